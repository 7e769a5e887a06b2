//! A server's readiness and liveness as the runner sees them: a free port to start it on, the
//! wait until its port accepts and (by default) one real call returns the scenario's echo, its
//! admin counters, and whether its process is still alive.

use grpclab_core::tls::TlsClient;
use grpclab_core::Scenario;
use grpclab_load::{CancellationToken, LoadConfig};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::admin::admin_call;
use super::process::{describe_exit, ServerProcess};
use super::suite::Readiness;

/// A port free on loopback now.
pub(super) fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until the server is ready: the port accepts and (by default) one real call succeeds.
pub(super) fn wait_until_ready(
    server: &mut ServerProcess,
    addr: SocketAddr,
    readiness: Readiness,
    scenario: &Scenario,
    timeout: Duration,
    cancel: &CancellationToken,
    tls: Option<&TlsClient>,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut last_error = String::from("the port never accepted a connection");
    while Instant::now() < deadline {
        if cancel.is_cancelled() {
            return Err("interrupted (Ctrl-C) before the server was ready".to_owned());
        }
        if let Some(status) = server.exited() {
            return Err(format!(
                "the server exited during start-up ({})",
                describe_exit(status)
            ));
        }
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Err(err) => last_error = format!("the port does not accept connections ({err})"),
            Ok(_) if readiness == Readiness::Port => return Ok(()),
            Ok(_) => {
                let mut probe =
                    LoadConfig::new(addr, &scenario.path(), scenario.requests().to_vec());
                probe.shape = shape_of(scenario);
                if probe.shape == grpclab_load::CallShape::Unary {
                    // The reply must be the scenario's echo, whoever wrote the server: a peer
                    // that answers OK with the wrong message is not ready, it is wrong.
                    let checker = scenario.clone();
                    probe.validator = Some(std::sync::Arc::new(move |reply: &[u8]| {
                        checker.check_first_reply(reply)
                    }));
                }
                probe.total = Some(1);
                probe.concurrency = 1;
                probe.tls = tls.cloned();
                probe.timeout = Some(Duration::from_secs(2));
                match grpclab_load::run(probe, &CancellationToken::new(), &mut |_| {}) {
                    Ok(result) if result.ok() == 1 => return Ok(()),
                    // The server is up and says it does not serve the call: waiting will
                    // not change that.
                    Ok(result)
                        if result
                            .status_counts()
                            .contains_key(&grpclab_core::Code::Unimplemented) =>
                    {
                        return Err(format!(
                            "the server does not serve {} (UNIMPLEMENTED): {}",
                            scenario.method().full_name(),
                            first_error(&result)
                        ));
                    }
                    Ok(result) => {
                        last_error = format!("the readiness call failed: {}", first_error(&result))
                    }
                    Err(err) => last_error = format!("the readiness call failed: {err}"),
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "not ready within {}s: {last_error}",
        timeout.as_secs()
    ))
}

/// The scenario method's shape: streaming scenarios send their payload array in order within
/// each call.
pub(super) fn shape_of(scenario: &Scenario) -> grpclab_load::CallShape {
    let method = scenario.method();
    grpclab_load::CallShape::of(method.is_client_streaming(), method.is_server_streaming())
}

/// The server's admin counters, when it has grpclab's admin service and counts.
pub(super) fn fetch_stats(
    target: &str,
    tls: Option<&TlsClient>,
) -> Option<grpclab_server::pb_admin::StatsReply> {
    admin_call(
        Duration::from_secs(2),
        grpclab_server::stats::fetch(target, tls),
    )
    .ok()
    .filter(|stats| stats.counting)
}

/// Whether process `pid` is alive (not gone, not a zombie).
pub(super) fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// The text of a failed call of `result` (its first kind of error), or "" when none failed.
fn first_error(result: &grpclab_load::LoadResult) -> String {
    result
        .error_counts()
        .keys()
        .next()
        .cloned()
        .unwrap_or_default()
}
