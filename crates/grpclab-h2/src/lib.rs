//! grpclab's HTTP/2 engine, written for unary gRPC.
//!
//! - [`hpack`]: header compression (RFC 7541), with an encoder that indexes gRPC's repeated
//!   headers so a call's header block is a few bytes.
//! - [`frame`]: the frame codec (RFC 9113 §4, §6): frame headers, every frame type's payload,
//!   and the validation that turns a malformed frame into the right connection or stream error.
//! - [`client`]: a client connection that runs the calls itself: the load engine's fast path.
//! - [`server`]: a server connection for unary calls that reads everything available, runs
//!   the calls, and writes all their responses in one go.
#![deny(missing_docs)]

pub mod client;
pub mod frame;
pub mod hpack;
mod io;
pub mod server;
