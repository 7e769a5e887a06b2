//! Calls to a built-in server's admin service (counters, heap profiles) from the synchronous
//! harness.

use std::time::Duration;

/// Runs one admin call on `target`'s server with a deadline, on a throwaway runtime (the
/// harness is synchronous; admin calls are a few per run).
pub(crate) fn admin_call<T>(
    limit: Duration,
    future: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("cannot start a runtime: {err}"))?;
    runtime
        .block_on(async { tokio::time::timeout(limit, future).await })
        .map_err(|_| format!("the server did not answer within {} s", limit.as_secs()))?
}
