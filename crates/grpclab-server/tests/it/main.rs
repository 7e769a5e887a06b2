//! grpclab-server's integration tests: lab and tonic in-process on loopback, spoken to
//! through real sockets (raw HTTP/2 from the test kit, tonic's client), one module per concern.
//!
//! One test binary for the crate (one link instead of 7).

mod common;

mod body_budget;
mod conformance;
mod floods;
mod header_block_reuse;
mod listen;
mod rfc9113;
mod shutdown;
mod streaming;
