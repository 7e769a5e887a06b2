//! The counters every built-in server exposes through `grpclab.admin.v1.Stats/Get`, so a
//! harness can compute allocations and bytes per call over a measured window.

use crate::alloc_count::{allocation_totals, ThreadCounters};
use crate::proto::pb_admin::StatsReply;
use grpclab_core::tls::TlsClient;

/// The `:path` of the admin RPC.
pub const STATS_PATH: &str = "/grpclab.admin.v1.Stats/Get";

static CALLS: ThreadCounters = ThreadCounters::new();

/// Counts one served Greeter call (per-thread counter: no shared cache line).
#[inline]
pub fn count_call() {
    CALLS.add(1, 0);
}

/// The counters now, for `implementation`.
pub fn snapshot(implementation: &str) -> StatsReply {
    let allocations = allocation_totals();
    let (allocations_count, allocated_bytes) = allocations.unwrap_or((0, 0));
    StatsReply {
        allocations: allocations_count,
        allocated_bytes,
        calls: CALLS.totals().0,
        counting: allocations.is_some(),
        implementation: implementation.to_owned(),
    }
}

/// Calls `grpclab.admin.v1.Stats/Get` on `target` (HOST:PORT; over TLS when `tls` is given).
/// The error says what went wrong, ready to print.
pub async fn fetch(target: &str, tls: Option<&TlsClient>) -> Result<StatsReply, String> {
    let mut client =
        crate::proto::pb_admin::stats_client::StatsClient::new(admin_channel(target, tls).await?);
    let reply = client
        .get(crate::proto::pb_admin::StatsRequest {})
        .await
        .map_err(|status| {
            format!(
                "{target} did not answer grpclab.admin.v1.Stats/Get ({:?}: {}); only grpclab's built-in servers expose it",
                status.code(),
                status.message()
            )
        })?;
    Ok(reply.into_inner())
}

/// Starts a heap profile on `target`'s server (`grpclab.admin.v1.HeapProfile/Start`); it will
/// be written to `path` (absolute, writable by the server) when stopped.
pub async fn start_heap_profile(
    target: &str,
    path: &str,
    tls: Option<&TlsClient>,
) -> Result<(), String> {
    let mut client = heap_profile_client(target, tls).await?;
    client
        .start(crate::proto::pb_admin::HeapProfileStartRequest {
            path: path.to_owned(),
        })
        .await
        .map(|_| ())
        .map_err(|status| heap_profile_refusal(target, &status))
}

/// Stops the heap profile on `target`'s server; returns the path it wrote.
pub async fn stop_heap_profile(target: &str, tls: Option<&TlsClient>) -> Result<String, String> {
    let mut client = heap_profile_client(target, tls).await?;
    client
        .stop(crate::proto::pb_admin::HeapProfileStopRequest {})
        .await
        .map(|reply| reply.into_inner().path)
        .map_err(|status| heap_profile_refusal(target, &status))
}

async fn heap_profile_client(
    target: &str,
    tls: Option<&TlsClient>,
) -> Result<
    crate::proto::pb_admin::heap_profile_client::HeapProfileClient<tonic::transport::Channel>,
    String,
> {
    Ok(
        crate::proto::pb_admin::heap_profile_client::HeapProfileClient::new(
            admin_channel(target, tls).await?,
        ),
    )
}

/// A channel to `target`'s admin services (the server's own port, so TLS when it serves
/// TLS); the error says what to check.
async fn admin_channel(
    target: &str,
    tls: Option<&TlsClient>,
) -> Result<tonic::transport::Channel, String> {
    use std::net::ToSocketAddrs;
    let addr = target
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| format!("'{target}' is not HOST:PORT"))?;
    crate::channel::connect(addr, std::time::Duration::from_secs(10), tls)
        .await
        .map_err(|err| format!("{err}; is the server running and listening there?"))
}

fn heap_profile_refusal(target: &str, status: &tonic::Status) -> String {
    if status.code() == tonic::Code::Unimplemented {
        format!(
            "{target} does not serve grpclab.admin.v1.HeapProfile; only grpclab's built-in servers can report allocation sites"
        )
    } else {
        format!("{target} refused the heap profile: {}", status.message())
    }
}
