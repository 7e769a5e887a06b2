//! grpclab-h2's integration tests: both sides' state machines fed bytes (differential against
//! the h2 crate, random and hostile input), one module per concern.
//!
//! One test binary for the crate (one link instead of 2).

mod common;

mod control;

mod differential;
mod robustness;
