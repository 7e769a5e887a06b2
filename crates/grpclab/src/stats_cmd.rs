//! `grpclab stats HOST:PORT`: read a server's admin counters (`grpclab.admin.v1.Stats/Get`)
//! and print them as JSON, for scripts that compute allocations per call over a window.

use grpclab_server::pb_admin::StatsReply;
use serde::Serialize;

use crate::InputError;

/// The counters, as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Heap allocations since the server started.
    pub allocations: u64,
    /// Bytes allocated since the server started.
    pub allocated_bytes: u64,
    /// Greeter calls served since the server started.
    pub calls: u64,
    /// Whether the allocation figures were counted.
    pub counting: bool,
    /// The server implementation.
    pub implementation: String,
}

impl From<StatsReply> for Stats {
    fn from(reply: StatsReply) -> Stats {
        Stats {
            allocations: reply.allocations,
            allocated_bytes: reply.allocated_bytes,
            calls: reply.calls,
            counting: reply.counting,
            implementation: reply.implementation,
        }
    }
}

/// Calls `Stats/Get` on `target` (HOST:PORT, plaintext).
pub fn fetch(target: &str) -> Result<Stats, InputError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| InputError(format!("cannot start a runtime: {err}")))?;
    runtime
        .block_on(grpclab_server::stats::fetch(target, None))
        .map(Stats::from)
        .map_err(InputError)
}
