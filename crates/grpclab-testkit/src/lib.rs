//! The test kit every crate's tests share (a dev-dependency only, as h2's h2-support): bytes
//! written by hand, so a test can send what no well-behaved peer would, and the helpers that
//! look at a process or a tool from outside.
//!
//! - [`raw`]: HTTP/2 frames, prefaces and request header blocks byte by byte, gRPC's message
//!   prefix, the RFC's codes;
//! - [`connection`]: a raw HTTP/2 connection over a blocking socket (bytes in, frames out);
//! - [`h2_call`]: one well-formed call through the `h2` crate, independent of grpclab-h2;
//! - [`process`]: a process's peak memory, sockets and signals from `/proc` and `kill`;
//! - [`tools`]: the outside programs some tests drive (ghz, fortio, chromium), found or skipped.
#![deny(missing_docs)]

pub mod connection;
pub mod h2_call;
pub mod process;
pub mod raw;
pub mod tools;
