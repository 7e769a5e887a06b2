//! The `grpclab` command line, as a library so tests can call each command in-process.
//!
//! Layers, top to bottom; a module imports only from the layers below it:
//!
//! 1. [`cli`]: clap's definitions and one module per verb (`load`, `serve`, `bench`,
//!    `compare`, `encode`, `stats`, ghz's `--config` file): flags → typed settings → run →
//!    print. The only layer that sees clap.
//! 2. [`report`]: the HTML and Markdown pages of load, bench and compare results and of
//!    stored runs' trends (charts with their numbers beside them); renders saved results,
//!    never measures.
//! 3. [`records`]: a run's record made from what `load`, `bench` and `compare` wrote, and
//!    `history import` of older results folders; the bridge from the harness to the store.
//! 4. [`merge`] (many generators' results as one), [`metrics`] (live Prometheus metrics while
//!    a run goes), [`live`] (the terminal's live view), [`reflection`] (a call's descriptors
//!    from the server).
//!
//! Below them, crates: `grpclab_harness` (bench, compare, capacity, workload mixes: typed
//! settings in, typed results out), `grpclab_store` (the results store: SQLite or
//! PostgreSQL; it stores records and never reads the harness's types), and under both
//! `grpclab_results`, the results model (a run's report and its saved document), the
//! verdicts and the `-O` exporters.
#![deny(missing_docs)]

pub mod cli;

pub mod live;
pub mod merge;
pub mod metrics;
pub mod records;
pub mod reflection;
pub mod report;

pub use grpclab_core::InputError;

/// Exit code for bad input, as clap uses for bad flags.
pub const EXIT_INPUT: u8 = 2;
/// Exit code for a failure after the work started (e.g. results could not be written).
pub const EXIT_FAILURE: u8 = 1;

/// Exit code of a `load` that finished and wrote its results, but in which no call
/// succeeded: a script reading the results (or only the exit code) is told the run measured
/// nothing but failures. ghz exits 0 there.
pub const EXIT_NOTHING_SUCCEEDED: u8 = 5;

/// Exit code of a generator that was ready later than `--start-at` allows and so sent
/// nothing: distinct, so an orchestrator tells "this shard must be run again" from a
/// broken run (1) or bad flags (2).
pub const EXIT_LATE_START: u8 = 4;

/// A generator that was ready past `--start-at` and its tolerance: exit code
/// [`EXIT_LATE_START`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LateStart(pub String);
