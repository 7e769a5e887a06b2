//! grpclab's HTTP/2 engine, written for gRPC: unary and streaming calls.
//!
//! - [`hpack`]: header compression (RFC 7541), with an encoder that indexes gRPC's repeated
//!   headers so a call's header block is a few bytes.
//! - [`frame`]: the frame codec (RFC 9113 §4, §6): frame headers, every frame type's payload,
//!   and the validation that turns a malformed frame into the right connection or stream error.
//! - [`control`]: SETTINGS, PING and GOAWAY as both sides read them (the RFC's rules on
//!   where they may come and what they may carry, the settings a frame changes).
//! - [`flow`]: flow control both sides share: the send [`flow::Window`], WINDOW_UPDATE's
//!   rules, how much of a body may go out now.
//! - [`client`]: a client connection that runs the calls itself (unary, and streaming calls
//!   by a plan): the load engine's fast path.
//! - [`grpc`]: gRPC beside HTTP/2 (the message prefix, `grpc-message` percent-encoding), for
//!   the client, the server and the crates above.
//! - [`Socket`]: the byte pipe under a connection, plaintext TCP or TLS (rustls).
//! - [`server`]: a server connection that reads everything available, runs the calls (a
//!   streaming call's messages one by one as they arrive), and writes all their responses in
//!   one go.
#![deny(missing_docs)]

mod cancel_watch;
pub mod client;
pub mod control;
pub mod flow;
pub mod frame;
pub mod grpc;
pub mod hpack;
mod io;
pub mod server;
mod stream_map;

pub use io::{await_tls13_verdict, Socket, Tls13Verdict};

/// Which HTTP/2 implementation a grpclab client or server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// This engine.
    Engine,
    /// The h2 crate (as tonic uses it): the reference this engine is measured against.
    H2,
}
