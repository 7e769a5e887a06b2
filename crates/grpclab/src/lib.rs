//! The `grpclab` command line, as a library so tests can call each command in-process.
//!
//! - [`cli`]: clap definitions.
//! - [`bench`]: `grpclab bench`, the grpc_bench harness (the main job).
//! - [`compare`]: `grpclab compare A B`, interleaved A/B runs with confidence intervals.
//! - [`config_file`]: `grpclab load --config FILE` (ghz's config file, as flags).
//! - [`load_cmd`]: `grpclab load` (flags → [`grpclab_load::LoadConfig`] → run → export).
//! - [`encode_cmd`]: `grpclab encode` (a scenario's request as framed bytes, for h2load).
//! - [`serve_cmd`]: `grpclab serve` (built-in servers from [`grpclab_server`]).
//! - [`stats_cmd`]: `grpclab stats` (a built-in server's admin counters).
//! - [`export`]: one exporter per output format behind the [`export::Exporter`] trait.
//! - [`reflection`]: a call's descriptors from the server (gRPC server reflection).
#![deny(missing_docs)]

pub mod bench;
pub mod cli;
pub mod compare;
pub mod config_file;
pub mod encode_cmd;
pub mod export;
pub mod live;
pub mod load_cmd;
pub mod reflection;
pub mod report;
pub mod serve_cmd;
pub mod stats_cmd;

/// A problem with what the user asked for (a flag, a file, a payload, an unreachable target):
/// printed as one line, exit code 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Exit code for bad input, as clap uses for bad flags.
pub const EXIT_INPUT: u8 = 2;
/// Exit code for a failure after the work started (e.g. results could not be written).
pub const EXIT_FAILURE: u8 = 1;
