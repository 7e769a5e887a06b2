//! The load engine against real servers on loopback sockets.

use crate::common::{any_port, scripted_server, scripted_server_with_goaway, tonic_server, Reply};
use grpclab_core::scenario::validate_reply;
use grpclab_core::{Code, Scenario};
use grpclab_load::{run, CancellationToken, EndReason, LoadConfig, Pacing, Transport};
use std::sync::Arc;
use std::time::Duration;

thread_local! {
    /// The transport the current test runs on (see `on_each_transport!`).
    static TRANSPORT: std::cell::Cell<Transport> = const { std::cell::Cell::new(Transport::Engine) };
}

fn config_for(addr: std::net::SocketAddr, scenario: &Scenario) -> LoadConfig {
    let mut config = LoadConfig::new(addr, &scenario.path(), scenario.requests().to_vec());
    config.transport = TRANSPORT.with(|t| t.get());
    config
}

/// Declares a test that runs its body once on each transport (our engine, then h2).
macro_rules! on_each_transport {
    ($(fn $name:ident() $body:block)*) => {$(
        #[test]
        fn $name() {
            for transport in [Transport::Engine, Transport::H2] {
                TRANSPORT.with(|t| t.set(transport));
                eprintln!("transport {transport:?}");
                $body
            }
        }
    )*};
}

fn complex() -> Scenario {
    Scenario::builtin("complex_proto").unwrap()
}

on_each_transport! {

fn total_is_counted_exactly_over_several_threads_and_connections() {
    let server = tonic_server(any_port());
    let scenario = complex();
    let mut config = config_for(server.addr, &scenario);
    config.total = Some(1000);
    config.concurrency = 20;
    config.connections = 3;
    config.threads = 2;
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.count(), 1000);
    assert_eq!(result.ok(), 1000);
    assert_eq!(result.latency().len(), 1000);
    assert_eq!(result.end_reason, EndReason::Total);
    assert!(result.send_lag().is_none(), "a closed loop has no schedule to lag");
    assert_eq!(
        result.per_second().iter().map(|s| s.count).sum::<u64>(),
        1000
    );
}

fn failing_calls_show_in_the_status_distribution() {
    let server = scripted_server(
        any_port(),
        Arc::new(|message: &[u8]| {
            if message.windows(4).any(|w| w == b"fail") {
                Reply::Status(13, "boom%21")
            } else {
                Reply::Echo
            }
        }),
    );
    let scenario = complex()
        .with_payload(r#"[{"request":{"name":"fine"}},{"request":{"name":"fail"}}]"#)
        .unwrap();
    let mut config = config_for(server.addr, &scenario);
    config.total = Some(100);
    config.concurrency = 1;
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    let statuses = result.status_counts();
    assert_eq!(statuses.get(&Code::Ok), Some(&50));
    assert_eq!(statuses.get(&Code::Internal), Some(&50));
    assert_eq!(result.error_counts().get("rpc error: code = Internal desc = boom!"), Some(&50));
    // Only successful calls are in the latency histogram.
    assert_eq!(result.latency().len(), 50);
}

fn timeouts_are_sent_and_enforced() {
    let server = scripted_server(any_port(), Arc::new(|_: &[u8]| Reply::Hang));
    let scenario = complex();
    let mut config = config_for(server.addr, &scenario);
    config.total = Some(6);
    config.concurrency = 3;
    config.timeout = Some(Duration::from_millis(100));
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(
        result.status_counts().get(&Code::DeadlineExceeded),
        Some(&6)
    );
    assert_eq!(
        server.last_timeout.lock().unwrap().as_deref(),
        Some("100000u")
    );
}

fn validate_catches_a_wrong_reply() {
    // Field 15 (varint 1): HelloReply has no such field.
    let server = scripted_server(
        any_port(),
        Arc::new(|_: &[u8]| Reply::Message(vec![0x78, 0x01])),
    );
    let scenario = complex();
    let output = scenario.method().output();
    let mut config = config_for(server.addr, &scenario);
    config.total = Some(20);
    let unvalidated = run(config.clone(), &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(unvalidated.ok(), 20, "without --validate the reply passes");
    config.validator = Some(Arc::new(move |reply: &[u8]| validate_reply(&output, reply)));
    let validated = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(validated.status_counts().get(&Code::Internal), Some(&20));
    let message = validated.error_counts().keys().next().unwrap();
    assert!(message.contains("field number 15"), "{message}");
}

fn validate_accepts_a_correct_echo() {
    let server = tonic_server(any_port());
    let scenario = complex();
    let output = scenario.method().output();
    let mut config = config_for(server.addr, &scenario);
    config.total = Some(50);
    config.validator = Some(Arc::new(move |reply: &[u8]| validate_reply(&output, reply)));
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.ok(), 50);
}

fn a_server_killed_mid_run_counts_unavailable_and_the_run_recovers() {
    let mut server = scripted_server(any_port(), Arc::new(|_: &[u8]| Reply::Echo));
    let addr = server.addr;
    let scenario = complex();
    let mut config = config_for(addr, &scenario);
    config.total = Some(3000);
    config.concurrency = 10;
    config.connections = 2;
    let killer = std::thread::spawn(move || {
        server.wait_for_served(500);
        server.kill();
        std::thread::sleep(Duration::from_millis(300));
        // A new server on the same port: the client must reconnect and finish.
        let revived = scripted_server(addr, Arc::new(|_: &[u8]| Reply::Echo));
        revived.wait_for_served(100);
        revived
    });
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    let _revived = killer.join().unwrap();
    let statuses = result.status_counts();
    assert_eq!(result.count(), 3000);
    assert!(
        statuses.get(&Code::Unavailable).copied().unwrap_or(0) >= 1,
        "{statuses:?}"
    );
    assert!(
        statuses.get(&Code::Ok).copied().unwrap_or(0) >= 600,
        "{statuses:?}"
    );
    assert!(result.reconnects >= 1);
}

fn cancelling_stops_the_run_and_keeps_what_was_measured() {
    let server = tonic_server(any_port());
    let scenario = complex();
    let mut config = config_for(server.addr, &scenario);
    config.total = None;
    config.duration = Some(Duration::from_secs(600));
    let cancel = CancellationToken::new();
    let mut seen = 0;
    let result = run(config, &cancel, &mut |progress| {
        seen = progress.completed;
        if progress.completed >= 200 {
            cancel.cancel();
        }
    })
    .unwrap();
    assert_eq!(result.end_reason, EndReason::Cancel);
    assert!(result.count() >= seen && seen >= 200);
    assert_eq!(result.errors(), 0);
}

fn open_loop_records_service_time_beside_corrected_latency() {
    let server = tonic_server(any_port());
    let scenario = complex();
    let mut config = config_for(server.addr, &scenario);
    config.pacing = Pacing::OpenLoop { rate: 2000.0 };
    config.total = Some(300);
    config.concurrency = 10;
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.ok(), 300);
    let service = result.service_time().expect("open loop keeps service time");
    assert_eq!(service.len(), 300);
    // Latency counts from the earlier of intended and actual send: never below service time.
    assert!(result.latency().max() >= service.max());
}

fn open_loop_send_lag_is_the_wait_a_busy_stream_forces() {
    // One stream, calls due every 5 ms, each held 20 ms by the server: call k cannot be sent
    // before k x 20 ms, though due at k x 5 ms, so it is sent at least k x 15 ms late (less
    // the client's 2 ms early wake). The lag is the client's wait, not the server's time.
    let server = scripted_server(
        any_port(),
        Arc::new(|_: &[u8]| Reply::EchoAfter(Duration::from_millis(20))),
    );
    let scenario = complex();
    let mut config = config_for(server.addr, &scenario);
    config.pacing = Pacing::OpenLoop { rate: 200.0 };
    config.total = Some(20);
    config.concurrency = 1;
    config.connections = 1;
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.ok(), 20);
    let lag = result.send_lag().expect("open loop keeps the send lag");
    assert_eq!(lag.len(), 20, "one value per successful call");
    assert!(
        lag.max() >= 250_000_000,
        "the last call waited ~19 x 15 ms for the stream: {} ns",
        lag.max()
    );
    let service = result.service_time().expect("open loop keeps service time");
    assert!(
        service.max() < lag.max(),
        "the wait is in the lag, not in the service time ({} vs {} ns)",
        service.max(),
        lag.max()
    );
}

fn warmup_calls_are_sent_but_not_counted() {
    let server = scripted_server(any_port(), Arc::new(|_: &[u8]| Reply::Echo));
    let scenario = complex();
    let mut config = config_for(server.addr, &scenario);
    config.total = Some(100);
    config.concurrency = 4;
    config.warmup = Duration::from_millis(200);
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.count(), 100);
    assert!(server.served.load(std::sync::atomic::Ordering::Relaxed) > 100);
}

fn warmup_calls_that_outlast_the_warmup_are_reported_apart() {
    // The first call the server sees is held for 600 ms: it was sent during the 100 ms warmup
    // and ends well inside the window, slower than any measured call.
    let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let server = scripted_server(
        any_port(),
        Arc::new(move |_: &[u8]| {
            if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                Reply::EchoAfter(Duration::from_millis(600))
            } else {
                Reply::Echo
            }
        }),
    );
    let scenario = complex();
    let mut config = config_for(server.addr, &scenario);
    config.total = Some(200);
    config.concurrency = 2;
    config.connections = 1;
    config.warmup = Duration::from_millis(100);
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.count(), 200, "the held call is not a measured one");
    let (calls, slowest_ns) = result.warmup_calls_in_window();
    assert!(calls >= 1, "the held warmup call ended in the window");
    assert!(
        slowest_ns >= 600_000_000,
        "it took at least the 600 ms the server held it: {slowest_ns} ns"
    );
}

fn an_unreachable_target_is_an_error_before_anything_runs() {
    // Bind then drop a listener: its port is very likely closed now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let scenario = complex();
    let config = config_for(port, &scenario);
    let err = run(config, &CancellationToken::new(), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("cannot connect"), "{err}");
}

fn invalid_configurations_are_refused() {
    let scenario = complex();
    let mut config = config_for(any_port(), &scenario);
    config.connections = 60;
    config.concurrency = 50;
    let err = run(config, &CancellationToken::new(), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("--connections"), "{err}");
}

fn goaway_mid_run_reconnects_and_finishes() {
    let server =
        scripted_server_with_goaway(any_port(), Arc::new(|_: &[u8]| Reply::Echo), Some(100));
    let scenario = complex();
    let mut config = config_for(server.addr, &scenario);
    config.total = Some(1000);
    config.concurrency = 4;
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.count(), 1000);
    // Every connection goes away after 100 streams: at least 9 reconnections for 1000 calls.
    assert!(result.reconnects >= 9, "reconnects: {}", result.reconnects);
    let failed = result.errors();
    let unavailable = result
        .status_counts()
        .get(&Code::Unavailable)
        .copied()
        .unwrap_or(0);
    assert_eq!(failed, unavailable, "{:?}", result.error_counts());
}
}

/// What the gzip-recording server saw of each request.
#[derive(Debug, Clone, PartialEq)]
struct SeenRequest {
    encoding: Option<String>,
    accept_encoding: Option<String>,
    compressed_flag: u8,
    message: Vec<u8>,
}

/// A raw h2 server that records each request's encoding headers and inflated message and
/// answers with the message echoed back gzip-compressed (`grpc-encoding: gzip`).
fn gzip_recording_server() -> (
    std::net::SocketAddr,
    Arc<std::sync::Mutex<Vec<SeenRequest>>>,
    tokio::runtime::Runtime,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    runtime.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let recorded = Arc::clone(&recorded);
            tokio::spawn(async move {
                let Ok(mut connection) = h2::server::handshake(tcp).await else {
                    return;
                };
                while let Some(Ok((request, mut respond))) = connection.accept().await {
                    let recorded = Arc::clone(&recorded);
                    tokio::spawn(async move {
                        let header = |name: &str| {
                            request
                                .headers()
                                .get(name)
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_owned)
                        };
                        let (encoding, accept_encoding) =
                            (header("grpc-encoding"), header("grpc-accept-encoding"));
                        let mut body = request.into_body();
                        let mut bytes = Vec::new();
                        while let Some(Ok(chunk)) = body.data().await {
                            let _ = body.flow_control().release_capacity(chunk.len());
                            bytes.extend_from_slice(&chunk);
                        }
                        let message =
                            grpclab_core::framing::unframe_maybe_gzip(&bytes, true, 1 << 20)
                                .map(|m| m.to_vec())
                                .unwrap_or_default();
                        recorded.lock().unwrap().push(SeenRequest {
                            encoding,
                            accept_encoding,
                            compressed_flag: bytes.first().copied().unwrap_or(9),
                            message: message.clone(),
                        });
                        let head = http::Response::builder()
                            .status(200)
                            .header("content-type", "application/grpc")
                            .header("grpc-encoding", "gzip")
                            .body(())
                            .unwrap();
                        let Ok(mut stream) = respond.send_response(head, false) else {
                            return;
                        };
                        let _ =
                            stream.send_data(grpclab_core::framing::frame_gzip(&message), false);
                        let mut trailers = http::HeaderMap::new();
                        trailers.insert("grpc-status", "0".parse().unwrap());
                        let _ = stream.send_trailers(trailers);
                    });
                }
            });
        }
    });
    (addr, seen, runtime)
}

on_each_transport! {

fn gzip_requests_carry_their_headers_and_gzip_replies_validate() {
    let (addr, seen, _runtime) = gzip_recording_server();
    let scenario = complex();
    let mut config = config_for(addr, &scenario);
    config.gzip = true;
    config.total = Some(50);
    config.concurrency = 5;
    let output = scenario.method().output();
    config.validator = Some(Arc::new(move |reply: &[u8]| validate_reply(&output, reply)));
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.ok(), 50, "{:?}", result.error_counts());
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 50);
    let sent = grpclab_core::framing::unframe_single(&scenario.requests()[0]).unwrap();
    for request in seen.iter() {
        assert_eq!(request.encoding.as_deref(), Some("gzip"));
        assert_eq!(request.accept_encoding.as_deref(), Some("gzip"));
        assert_eq!(request.compressed_flag, 1, "the message itself is compressed");
        assert_eq!(request.message, sent);
    }
}

fn gzip_replies_without_negotiation_fail_validation() {
    // The same server answers in gzip though the client never asked: a validating client
    // must refuse it (INTERNAL), not read compressed bytes as protobuf.
    let (addr, _seen, _runtime) = gzip_recording_server();
    let scenario = complex();
    let mut config = config_for(addr, &scenario);
    config.total = Some(10);
    config.concurrency = 2;
    let output = scenario.method().output();
    config.validator = Some(Arc::new(move |reply: &[u8]| validate_reply(&output, reply)));
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.count(), 10);
    assert_eq!(result.ok(), 0);
    assert_eq!(result.status_counts().get(&Code::Internal), Some(&10));
}

fn gzip_round_trips_with_the_tonic_baseline() {
    let server = tonic_server(any_port());
    let scenario = complex();
    let mut config = config_for(server.addr, &scenario);
    config.gzip = true;
    config.total = Some(200);
    config.concurrency = 10;
    let output = scenario.method().output();
    config.validator = Some(Arc::new(move |reply: &[u8]| validate_reply(&output, reply)));
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.ok(), 200, "{:?}", result.error_counts());
}

}

on_each_transport! {

fn duration_stop_decides_what_happens_to_calls_in_flight_at_the_end() {
    // Every call is held 300 ms by the server; the run lasts 200 ms with 4 streams, so at the
    // end 4 calls are in flight. wait: they finish (drain limit 5 s); close: they count as
    // Canceled at once; ignore: they are left out of every figure.
    use grpclab_load::DurationStop;
    let server = scripted_server(
        any_port(),
        Arc::new(|_: &[u8]| Reply::EchoAfter(Duration::from_millis(300))),
    );
    let scenario = complex();
    for stop in [DurationStop::Wait, DurationStop::Close, DurationStop::Ignore] {
        let mut config = config_for(server.addr, &scenario);
        config.duration = Some(Duration::from_millis(200));
        config.total = None;
        config.concurrency = 4;
        config.duration_stop = stop;
        let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
        let canceled = result.status_counts().get(&Code::Canceled).copied().unwrap_or(0);
        match stop {
            DurationStop::Wait => {
                assert_eq!(result.ok(), 4, "{stop:?}: {:?}", result.status_counts());
                assert_eq!((result.abandoned, result.ignored, canceled), (0, 0, 0));
            }
            DurationStop::Close => {
                assert_eq!(result.ok(), 0, "{stop:?}");
                assert_eq!((result.abandoned, canceled), (4, 4), "{stop:?}");
                assert!(result
                    .error_counts()
                    .keys()
                    .all(|key| key.contains("--duration-stop close")));
            }
            DurationStop::Ignore => {
                assert_eq!(result.count(), 0, "{stop:?}: nothing recorded");
                assert_eq!((result.abandoned, result.ignored), (0, 4), "{stop:?}");
            }
        }
    }
}

fn concurrency_schedules_limit_the_calls_in_flight_second_by_second() {
    // The server holds each call 20 ms, so every allowed stream is busy all the time and
    // each second's most outstanding calls equals the schedule's value. Rising 1, 2, 3 one a
    // second: no call ends with more outstanding than the schedule allows at that instant.
    // Falling 3, 2, 1: the first and the last second show 3 and 1. Over 2 connections, an
    // -n run and an open loop: every call is still counted once.
    use grpclab_load::ConcurrencySteps;
    let server = scripted_server(
        any_port(),
        Arc::new(|_: &[u8]| Reply::EchoAfter(Duration::from_millis(20))),
    );
    let scenario = complex();
    let steps = |start, step, end| ConcurrencySteps {
        start,
        step,
        step_duration: Duration::from_secs(1),
        end: Some(end),
        max_duration: None,
    };
    let outstanding = |result: &grpclab_load::LoadResult| -> Vec<u64> {
        result.per_second().iter().map(|s| s.in_flight_max).collect()
    };

    let mut config = config_for(server.addr, &scenario);
    config.duration = Some(Duration::from_millis(3500));
    config.total = None;
    config.concurrency = 50; // ignored: the schedule's peak is opened
    config.concurrency_steps = Some(steps(1, 1, 3));
    config.validate().unwrap();
    assert_eq!(config.concurrency, 3, "the schedule's peak");
    let result = run(config.clone(), &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(outstanding(&result)[..3], [1, 2, 3], "{:?}", result.per_second());
    assert!(result.errors() == 0, "{:?}", result.error_counts());

    config.concurrency_steps = Some(steps(3, -1, 1));
    let result = run(config.clone(), &CancellationToken::new(), &mut |_| {}).unwrap();
    let seen = outstanding(&result);
    assert_eq!((seen[0], seen[3]), (3, 1), "{:?}", result.per_second());

    // A step that never comes within the run: 2 of the 4 streams opened stay idle.
    let mut config = config_for(server.addr, &scenario);
    config.total = Some(60);
    config.duration = None;
    config.connections = 2;
    config.concurrency_steps = Some(ConcurrencySteps {
        start: 2,
        step: 2,
        step_duration: Duration::from_secs(3600),
        end: Some(4),
        max_duration: None,
    });
    let result = run(config.clone(), &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!(result.count(), 60);
    assert_eq!(result.per_second().iter().map(|s| s.in_flight_max).max(), Some(2));

    config.pacing = Pacing::OpenLoop { rate: 400.0 };
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!((result.count(), result.ok()), (60, 60));
    assert!(result.per_second().iter().all(|s| s.in_flight_max <= 2));
}

fn an_open_loop_counts_in_flight_only_the_calls_it_has_sent() {
    // 100 calls a second over 50 streams against a server that answers at once: about one
    // call is in flight at any instant. A stream (or a connection's free slot) holding a
    // ticket that is not yet due has sent nothing, so it must not count as in flight; when it
    // did, every second read 50 — the streams, not the calls.
    let server = scripted_server(any_port(), Arc::new(|_: &[u8]| Reply::Echo));
    let scenario = complex();
    let mut config = config_for(server.addr, &scenario);
    config.total = Some(150);
    config.duration = None;
    config.concurrency = 50;
    config.pacing = Pacing::OpenLoop { rate: 100.0 };
    let result = run(config, &CancellationToken::new(), &mut |_| {}).unwrap();
    assert_eq!((result.count(), result.ok()), (150, 150));
    let most = result.per_second().iter().map(|s| s.in_flight_max).max();
    assert!(
        most.is_some_and(|most| (1..25).contains(&most)),
        "{:?}",
        result.per_second()
    );
}

}
