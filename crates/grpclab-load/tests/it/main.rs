//! grpclab-load's integration tests: the load engine against scripted and fault servers on
//! loopback, one module per concern.
//!
//! One test binary for the crate (one link instead of 2).

mod common;

mod engine;
mod faults;
