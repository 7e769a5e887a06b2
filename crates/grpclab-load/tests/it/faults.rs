//! The load engine against servers that die, stall, reset and lie: every call is counted
//! exactly once and every run ends within its bounds.

use crate::common::fault::{Answer, Behaviour, FaultServer};
use crate::common::{any_port, scripted_server, Reply};
use grpclab_core::{Code, Scenario};
use grpclab_h2::frame::{code, setting};
use grpclab_load::{run, CancellationToken, EndReason, LoadConfig, LoadResult, Pacing, Transport};
use std::sync::Arc;
use std::time::Duration;

fn config_for(addr: std::net::SocketAddr, transport: Transport) -> LoadConfig {
    let scenario = Scenario::builtin("complex_proto").unwrap();
    let mut config = LoadConfig::new(addr, &scenario.path(), scenario.requests().to_vec());
    config.transport = transport;
    config
}

/// Runs `config` on a thread of its own; a run that has not ended after two minutes is a hang,
/// and fails the test instead of blocking the suite. Whatever the fault, every measured call
/// taken from the schedule is accounted for (recorded, left out or given back), counted
/// apart from the figures; and unsent calls are the sum of their causes.
fn run_bounded(config: LoadConfig) -> LoadResult {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(run(config, &CancellationToken::new(), &mut |_| {}));
    });
    let result = match done_rx.recv_timeout(Duration::from_secs(120)) {
        Ok(result) => result.expect("the run starts"),
        Err(_) => panic!("the run did not end: it hangs"),
    };
    assert_eq!(
        result.unaccounted,
        0,
        "calls taken and never accounted for: {:?}",
        result.error_counts()
    );
    assert_eq!(
        result.unsent,
        result.unsent_by_cause.never_taken + result.unsent_by_cause.stopped
    );
    result
}

fn count_of(result: &LoadResult, code: Code) -> u64 {
    result.status_counts().get(&code).copied().unwrap_or(0)
}

/// An open loop at `rate` for `duration` (no `-n`) over `concurrency` streams on
/// `connections` connections.
fn timed_open_loop(
    addr: std::net::SocketAddr,
    transport: Transport,
    rate: f64,
    duration: Duration,
    concurrency: usize,
    connections: usize,
) -> LoadConfig {
    let mut config = config_for(addr, transport);
    config.pacing = Pacing::OpenLoop { rate };
    config.duration = Some(duration);
    config.total = None;
    config.concurrency = concurrency;
    config.connections = connections;
    config
}

const BOTH: [Transport; 2] = [Transport::Engine, Transport::H2];

/// A: an open-loop `-n` run whose server dies and stays dead still records exactly N calls:
/// tickets taken ahead for a connection are failed, not forgotten, when reconnecting fails.
#[test]
fn open_loop_total_is_exact_when_the_server_dies_for_good() {
    for transport in BOTH {
        let mut server = scripted_server(any_port(), Arc::new(|_: &[u8]| Reply::Echo));
        let mut config = config_for(server.addr, transport);
        config.pacing = Pacing::OpenLoop { rate: 400.0 };
        config.total = Some(120);
        config.concurrency = 10;
        let served = Arc::clone(&server.served);
        let killer = std::thread::spawn(move || {
            server.wait_for_served(30);
            server.kill();
        });
        let result = run_bounded(config);
        killer.join().unwrap();
        let served = served.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            result.count(),
            120,
            "{transport:?}: {:?}",
            result.status_counts()
        );
        assert_eq!(result.end_reason, EndReason::Total, "{transport:?}");
        assert!(count_of(&result, Code::Unavailable) >= 1, "{transport:?}");
        assert!(result.ok() <= served, "{transport:?}: OK calls were served");
    }
}

/// A timed open loop whose server dies halfway accounts for every call its schedule intended:
/// while no connection can be made, each call that comes due fails as Unavailable instead of
/// staying in the schedule unsent (an outage must show as errors, not as a shorter run).
/// The same for one shard of a sharded run: its part of the global schedule.
#[test]
fn a_timed_open_loop_counts_every_due_call_across_a_server_death() {
    for transport in BOTH {
        for shard in [None, Some(grpclab_load::Shard { index: 1, of: 2 })] {
            let mut server = scripted_server(any_port(), Arc::new(|_: &[u8]| Reply::Echo));
            // 600 calls intended in the window: 2.5 ms apart over 1.5 s (300 for one shard
            // of two).
            let mut config = timed_open_loop(
                server.addr,
                transport,
                400.0,
                Duration::from_millis(1500),
                4,
                2,
            );
            config.shard = shard;
            let intended = if shard.is_some() { 300 } else { 600 };
            let served = Arc::clone(&server.served);
            let killer = std::thread::spawn(move || {
                server.wait_for_served(intended / 6);
                server.kill();
            });
            let result = run_bounded(config);
            killer.join().unwrap();
            let served = served.load(std::sync::atomic::Ordering::Relaxed);
            let what = format!("{transport:?} {shard:?}: {:?}", result.error_counts());
            assert_eq!(result.end_reason, EndReason::Timeout, "{what}");
            assert_eq!(result.count() + result.unsent, intended, "{what}");
            // Only calls coming due in the last moments before the stop can be left unsent
            // (before the fix, every call due after the death was: about half of them).
            assert!(
                result.unsent <= intended / 20,
                "{what}: unsent {}",
                result.unsent
            );
            assert!(result.ok() <= served, "{what}: OK calls were served");
            assert_eq!(
                count_of(&result, Code::Unavailable),
                result.count() - result.ok(),
                "{what}"
            );
            assert!(
                count_of(&result, Code::Unavailable) >= intended / 4,
                "{what}: the calls due after the death fail"
            );
        }
    }
}

/// A timed open loop that cannot keep up says so: calls intended in the window that never
/// went out are counted as unsent. Two streams against a server that never answers: two
/// calls go out and are abandoned at the end; the other 198 were never sent.
#[test]
fn calls_an_open_loop_never_sent_are_counted_as_unsent() {
    for transport in BOTH {
        let server = scripted_server(any_port(), Arc::new(|_: &[u8]| Reply::Hang));
        let mut config =
            timed_open_loop(server.addr, transport, 200.0, Duration::from_secs(1), 2, 1);
        config.duration_stop = grpclab_load::DurationStop::Close;
        let result = run_bounded(config);
        let what = format!("{transport:?}: {:?}", result.error_counts());
        assert_eq!(result.count(), 2, "{what}");
        assert_eq!(count_of(&result, Code::Canceled), 2, "{what}");
        assert_eq!(result.unsent, 198, "{what}");
        // The streams were busy with the two hung calls: the rest were never taken.
        assert_eq!(result.unsent_by_cause.never_taken, 198, "{what}");
    }
}

/// B: a `-n` run whose server stalls (stops reading and writing, socket open) ends once every
/// call has met its deadline, with exactly N calls: deadlines run for calls that could not
/// even be written, and the drain limit starts when the last ticket is due.
#[test]
fn a_stalled_server_cannot_hold_a_total_run() {
    for transport in BOTH {
        let server = FaultServer::start(Behaviour {
            stall_after: Some(2000),
            ..Behaviour::default()
        });
        // Enough calls that their frames overflow the socket buffers (~160 bytes each).
        let mut config = config_for(server.addr, transport);
        config.total = Some(200_000);
        config.concurrency = 1000;
        config.timeout = Some(Duration::from_millis(2));
        let result = run_bounded(config);
        assert_eq!(
            result.count(),
            200_000,
            "{transport:?}: {:?}",
            result.status_counts()
        );
        assert_eq!(result.end_reason, EndReason::Total);
        assert!(result.ok() <= 2000 + 1000, "{transport:?}: {}", result.ok());
        // h2 (the crate) may also close the connection itself once it has reset too many
        // streams (its own guard against rapid resets): Unavailable, counted all the same.
        assert_eq!(
            count_of(&result, Code::DeadlineExceeded)
                + count_of(&result, Code::Canceled)
                + count_of(&result, Code::Unavailable),
            200_000 - result.ok(),
            "{transport:?}: {:?}",
            result.error_counts()
        );
    }
}

/// C: no stream opens beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS, not even in the
/// first batch: our engine reads the server's SETTINGS before it opens a stream.
#[test]
fn the_first_batch_respects_the_servers_stream_limit() {
    for (transport, delay) in [
        (Transport::Engine, Duration::ZERO),
        (Transport::Engine, Duration::from_millis(150)),
        (Transport::H2, Duration::ZERO),
    ] {
        let server = FaultServer::start(Behaviour {
            settings: vec![(setting::MAX_CONCURRENT_STREAMS, 10)],
            settings_delay: delay,
            ..Behaviour::default()
        });
        let mut config = config_for(server.addr, transport);
        config.total = Some(1000);
        config.concurrency = 50;
        let result = run_bounded(config);
        let seen = &server.seen;
        let refused = seen.refused.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            refused, 0,
            "{transport:?} {delay:?}: streams over the limit"
        );
        assert_eq!(
            result.ok(),
            1000,
            "{transport:?} {delay:?}: {:?}",
            result.error_counts()
        );
        assert!(seen.peak_open.load(std::sync::atomic::Ordering::Relaxed) <= 10);
        if transport == Transport::Engine {
            assert_eq!(
                seen.opened_before_settings
                    .load(std::sync::atomic::Ordering::Relaxed),
                0,
                "our engine waits for the server's SETTINGS"
            );
        }
    }
}

/// D: a status in a header block without END_STREAM, then RST_STREAM: the call ends with the
/// status the server sent (h2's and grpc-go's reading), even without a client deadline.
#[test]
fn a_reset_after_the_status_ends_the_call_with_that_status() {
    for transport in BOTH {
        for reset in [code::NO_ERROR, code::CANCEL] {
            let server = FaultServer::start(Behaviour {
                answer: Answer::StatusThenReset(reset),
                ..Behaviour::default()
            });
            let mut config = config_for(server.addr, transport);
            config.total = Some(40);
            config.concurrency = 4;
            config.timeout = None;
            let result = run_bounded(config);
            assert_eq!(result.count(), 40);
            assert_eq!(
                count_of(&result, Code::Internal),
                40,
                "{transport:?} reset {reset:#x}: {:?}",
                result.error_counts()
            );
            assert_eq!(
                result
                    .error_counts()
                    .get("rpc error: code = Internal desc = boom"),
                Some(&40)
            );
        }
    }
}

/// E: a connection whose stream ids run out opens a new one before they do: a planned
/// reconnect, and not one call fails.
#[test]
fn stream_id_exhaustion_is_a_planned_reconnect() {
    let server = scripted_server(any_port(), Arc::new(|_: &[u8]| Reply::Echo));
    let mut config = config_for(server.addr, Transport::Engine);
    // 101 ids left per connection: 500 calls need at least four new connections.
    config.first_stream_id = 0x7fff_ffff - 200;
    config.total = Some(500);
    config.concurrency = 10;
    let result = run_bounded(config);
    assert_eq!(result.ok(), 500, "{:?}", result.error_counts());
    assert!(
        result.planned_reconnects >= 4,
        "{}",
        result.planned_reconnects
    );
    assert_eq!(result.reconnects, 0);
}

/// F (h2 transport): a unary reply that ends OK with no message is Internal, on both.
#[test]
fn ok_without_a_message_is_internal() {
    for transport in BOTH {
        let server = scripted_server(any_port(), Arc::new(|_: &[u8]| Reply::Status(0, "")));
        let mut config = config_for(server.addr, transport);
        config.total = Some(10);
        config.concurrency = 2;
        let result = run_bounded(config);
        assert_eq!(count_of(&result, Code::Internal), 10, "{transport:?}");
        assert_eq!(
            result
                .error_counts()
                .get("rpc error: code = Internal desc = status OK but no reply message"),
            Some(&10),
            "{transport:?}: {:?}",
            result.error_counts()
        );
    }
}

/// `total` calls at `concurrency` on our transport against a fault server answering `answer`;
/// the server is returned too, for what it saw.
fn run_against(answer: Answer, total: u64, concurrency: usize) -> (FaultServer, LoadResult) {
    let server = FaultServer::start(Behaviour {
        answer,
        ..Behaviour::default()
    });
    let mut config = config_for(server.addr, Transport::Engine);
    config.total = Some(total);
    config.concurrency = concurrency;
    let result = run_bounded(config);
    (server, result)
}

/// A response that breaks RFC 9113 fails its call as Internal with a
/// precise message (the stream gets RST_STREAM), and the run still counts every call.
#[test]
fn malformed_responses_fail_their_calls_precisely() {
    for (answer, message) in [
        (Answer::NoStatus, "malformed response headers"),
        (Answer::TwoStatuses, "malformed response headers"),
        (Answer::DataFirst, "DATA before the response headers"),
        (Answer::WindowOverflow, "stream window past 2^31-1"),
    ] {
        let (_server, result) = run_against(answer, 30, 3);
        assert_eq!(result.count(), 30, "{answer:?}");
        assert_eq!(
            count_of(&result, Code::Internal),
            30,
            "{answer:?}: {:?}",
            result.error_counts()
        );
        assert_every_error_says(&result, message, answer);
    }
}

/// Trailers of the same bytes that name a different table entry on every other call (the
/// response's head changes the HPACK table each time): each call gets the status its own
/// trailers say. The client reuses what a repeated block decoded to only while the table is
/// unchanged; were it to reuse across a change, every call would read the first status.
#[test]
fn the_same_trailer_bytes_are_read_against_the_table_of_their_moment() {
    let (_server, result) = run_against(Answer::StatusByIndex, 40, 1);
    assert_eq!(result.count(), 40, "every call counted");
    assert_eq!(
        count_of(&result, Code::Ok),
        20,
        "{:?}",
        result.error_counts()
    );
    assert_eq!(
        count_of(&result, Code::Internal),
        20,
        "{:?}",
        result.error_counts()
    );
}

/// Every error in the run's table names `message`.
fn assert_every_error_says(result: &LoadResult, message: &str, answer: Answer) {
    assert!(
        result
            .error_counts()
            .keys()
            .all(|key| key.contains(message)),
        "{answer:?}: {:?}",
        result.error_counts()
    );
}

/// A server shutting down (GOAWAY NO_ERROR below the call's stream): each call is
/// Unavailable and says the server is shutting down and never processed it — not that a
/// limit was reached (it once read "its limit on streams ... was reached; spread the load").
#[test]
fn calls_a_shutting_down_server_never_processed_say_so() {
    let (_server, result) = run_against(Answer::ShuttingDown, 10, 1);
    assert_eq!(result.count(), 10, "every call counted");
    assert_eq!(
        count_of(&result, Code::Unavailable),
        10,
        "{:?}",
        result.error_counts()
    );
    assert_every_error_says(
        &result,
        "the server is shutting down (GOAWAY NO_ERROR) and never processed this call",
        Answer::ShuttingDown,
    );
}

/// A server that breaks a connection-level rule — a second GOAWAY that
/// raises its last stream id, a connection window past 2^31-1, a frame larger than our
/// SETTINGS_MAX_FRAME_SIZE, a PUSH_PROMISE although push is disabled — gets the RFC's
/// connection error from us (GOAWAY with its code), its calls a precise status (Unavailable,
/// naming the rule), and the run still counts every call. (More DATA than our stream window
/// cannot be provoked from outside: we return window as we read, so a server streaming past
/// it only ever meets the window we already returned.)
#[test]
fn connection_rule_breakers_get_the_rfcs_error() {
    const PROTOCOL_ERROR: u32 = 0x1;
    const FLOW_CONTROL_ERROR: u32 = 0x3;
    const FRAME_SIZE_ERROR: u32 = 0x6;
    for (answer, goaway, message) in [
        (Answer::RisingGoAway, Some(PROTOCOL_ERROR), None),
        (
            Answer::ConnectionWindowOverflow,
            Some(FLOW_CONTROL_ERROR),
            Some("connection error 0x3: the server raised the connection window past 2^31-1"),
        ),
        (
            Answer::OversizedFrame,
            Some(FRAME_SIZE_ERROR),
            Some("connection error 0x6: frame larger than SETTINGS_MAX_FRAME_SIZE"),
        ),
        (
            Answer::PushPromise,
            Some(PROTOCOL_ERROR),
            Some("PUSH_PROMISE"),
        ),
    ] {
        let (server, result) = run_against(answer, 20, 1);
        let goaways = server.seen.client_goaways.lock().unwrap().clone();
        eprintln!(
            "{answer:?}: {:?}, our GOAWAYs {goaways:?}",
            result.error_counts()
        );
        assert_eq!(result.count(), 20, "{answer:?}: every call counted");
        match message {
            // The calls were answered before the rule was broken: all OK.
            None => assert_eq!(count_of(&result, Code::Ok), 20, "{answer:?}"),
            Some(message) => {
                assert_eq!(count_of(&result, Code::Ok), 0, "{answer:?}");
                assert_every_error_says(&result, message, answer);
            }
        }
        if let Some(code) = goaway {
            assert!(
                !goaways.is_empty() && goaways.iter().all(|g| *g == code),
                "{answer:?}: we answered with GOAWAY {code:#x}: {goaways:?}"
            );
        }
    }
}

/// A server that listens but never accepts, its accept queue full: connecting cannot complete.
/// The run gives up after `connect_timeout` (ghz's --connect-timeout) with a message saying so,
/// on both transports, instead of hanging.
#[test]
fn a_server_that_never_accepts_fails_the_run_after_the_connect_timeout() {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    socket.listen(0).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    // Fill the accept queue (a backlog of 0 still queues one or two): later SYNs are dropped.
    let fillers: Vec<std::net::TcpStream> = (0..8)
        .map_while(|_| std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok())
        .collect();
    assert!(fillers.len() < 8, "the queue never filled");
    for transport in BOTH {
        let mut config = config_for(addr, transport);
        config.connect_timeout = Duration::from_millis(300);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(run(config, &CancellationToken::new(), &mut |_| {}));
        });
        let outcome = done_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the run ends");
        let err = outcome.expect_err("no connection, no run").to_string();
        assert!(
            err.contains("timed out after 300ms") && err.contains("--connect-timeout"),
            "{transport:?}: {err}"
        );
    }
    drop(fillers);
}

/// `--keepalive`: a server that stalls with calls in flight (socket open, nothing read or
/// written) is found dead after two keepalive times — the calls it holds fail as Unavailable
/// naming the keepalive — where without keepalive they would hang until the run's end. A
/// healthy server that holds calls longer than the keepalive answers the PINGs: nothing fails.
#[test]
fn keepalive_finds_a_stalled_server_and_spares_a_slow_one() {
    for transport in BOTH {
        for keepalive in [None, Some(Duration::from_millis(100))] {
            let server = FaultServer::start(Behaviour {
                stall_after: Some(5),
                ..Behaviour::default()
            });
            let mut config = config_for(server.addr, transport);
            config.concurrency = 2;
            config.total = None;
            config.duration = Some(Duration::from_millis(1500));
            config.duration_stop = grpclab_load::DurationStop::Close;
            config.timeout = None;
            config.keepalive = keepalive;
            let result = run_bounded(config);
            let keepalive_failures: u64 = result
                .error_counts()
                .iter()
                .filter(|(message, _)| message.contains("keepalive"))
                .map(|(_, count)| count)
                .sum();
            let context = format!("{transport:?} {keepalive:?}: {:?}", result.error_counts());
            assert!(result.ok() <= 5, "{context}");
            match keepalive {
                None => assert_eq!(keepalive_failures, 0, "{context}"),
                // The two calls in flight when the server stalled; later connections to
                // the stalled server may fail the same way.
                Some(_) => assert!(keepalive_failures >= 2, "{context}"),
            }
            assert_eq!(
                count_of(&result, Code::Unavailable),
                keepalive_failures,
                "{context}"
            );
        }
        let server = scripted_server(
            any_port(),
            Arc::new(|_: &[u8]| Reply::EchoAfter(Duration::from_millis(600))),
        );
        let mut config = config_for(server.addr, transport);
        config.concurrency = 4;
        config.total = Some(12);
        // Several PINGs per held call, each answered by the server's HTTP/2 layer at once.
        config.keepalive = Some(Duration::from_millis(150));
        let result = run_bounded(config);
        assert_eq!(
            (result.count(), result.ok()),
            (12, 12),
            "{transport:?}: {:?}",
            result.error_counts()
        );
    }
}

/// A server that answers HTTP/2's preface in HTTP/1.1 (an HTTP/1 server, or an HTTP/2 one
/// with plaintext HTTP/2 turned off, as Pekko HTTP is by default): its status line read as a
/// frame header is a 4.7 MB frame, and the calls said "frame larger than
/// SETTINGS_MAX_FRAME_SIZE". They say what happened: the server spoke HTTP/1.
#[test]
fn a_server_that_answers_in_http1_is_named_as_such() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { return };
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut preface = [0u8; 24];
                if tcp.read_exact(&mut preface).is_ok() {
                    let _ = tcp.write_all(
                        b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
                let _ = tcp.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    let mut config = config_for(addr, Transport::Engine);
    config.total = Some(5);
    let result = run_bounded(config);
    assert_eq!(result.count(), 5, "every call counted");
    let errors = result.error_counts();
    assert!(
        !errors.is_empty()
            && errors
                .keys()
                .all(|message| message.contains("answered in HTTP/1.1")
                    && message.contains("HTTP/2 with prior knowledge")),
        "{errors:?}"
    );
}

/// A server that accepts connections and closes them at once, before its HTTP/2 SETTINGS (a
/// connection cap such as lab's --max-connections, a proxy with no backend): the client
/// backs off between attempts, as it does when a connect fails, instead of reconnecting in
/// a loop that starves its other connections. Over a 1 s run two connections backing off
/// from 50 ms make ~10 attempts; reconnecting at once makes thousands.
#[test]
fn a_server_that_closes_every_connection_at_once_is_retried_with_backoff() {
    for transport in BOTH {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let Ok(tcp) = tcp else { return };
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                drop(tcp);
            }
        });
        let mut config = config_for(addr, transport);
        config.duration = Some(Duration::from_secs(1));
        config.total = None;
        config.concurrency = 2;
        config.connections = 2;
        let result = run_bounded(config);
        let accepted = accepted.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            (2..100).contains(&accepted),
            "{transport:?}: {accepted} connections in a 1 s run"
        );
        assert_eq!(result.ok(), 0, "{transport:?}");
        assert!(
            result
                .error_counts()
                .keys()
                .all(|message| message.contains("before its HTTP/2 SETTINGS")),
            "{transport:?}: {:?}",
            result.error_counts()
        );
    }
}
