//! grpclab's harness: measurements made of many runs, taking typed settings and handing back
//! typed results. Nothing here parses flags or prints to a terminal.
//!
//! Rooms, top to bottom; a module imports only from the ones below it:
//!
//! 1. [`compare`]: A/B/n rounds of two or more builds or servers with intervals, metrics,
//!    baselines and the gate.
//! 2. [`bench`]: grpc_bench on one binary: the suite, builds, server processes, CPU and memory
//!    limits, the sampler, profiles, sweeps and the results folder.
//! 3. [`capacity`]: the SLO search (grow, bisect, stop) over probes a caller runs.
//! 4. [`workload`]: a mix of methods as `--mix` or a workload file gives it.
//!
//! Below: `grpclab_results` (the results model and verdicts), `grpclab_load` (the load
//! engine), `grpclab_server` (the built-in servers).
#![deny(missing_docs)]

pub mod bench;
pub mod capacity;
pub mod compare;
pub mod flow;
pub mod flow_plan;
pub mod retry;
mod status;
pub mod workload;

/// Why a bench, a compare or a baseline stopped before its work was done.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// What was asked cannot be done (a flag, a file, cores, a results folder's place): the
    /// command line exits with code 2.
    #[error(transparent)]
    Input(#[from] grpclab_core::InputError),
    /// The work started and then could not go on (interrupted, a side that did not run, a
    /// file that could not be written); the message says where what was done is.
    #[error("{0}")]
    Failed(String),
    /// The results folder could not be written.
    #[error("cannot write the results: {0}")]
    Write(#[from] std::io::Error),
    /// A result could not be encoded as JSON.
    #[error("cannot encode the results as JSON: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The git commit this build was made from (`unknown` outside a git checkout), as
/// `bench.params` and stored runs report it.
pub const BUILD_COMMIT: &str = match option_env!("GRPCLAB_GIT_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};
