//! Hostile clients against `grpclab serve` processes: raw HTTP/2 over loopback,
//! each attack bounded in bytes, each asserting the server's memory stays bounded, its sockets
//! are released when the attacker leaves, and a bystander is still served. lab runs on both
//! transports; tonic-mt (the h2 crate) is the comparison.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

mod common;

use common::{grpclab, Server};

const SERVERS: &[&[&str]] = &[
    &["--impl", "lab", "--threads", "1"],
    &["--impl", "lab", "--threads", "1", "--transport", "h2"],
    &["--impl", "tonic-mt", "--threads", "1"],
];

use grpclab_testkit::raw::frame;

/// The bound on one attacking connection: what one connection may cost the server.
const RSS_BOUND_KIB: u64 = 256 * 1024;

use grpclab_testkit::raw::codes::{DATA, HEADERS, PING, SETTINGS, WINDOW_UPDATE};
use grpclab_testkit::raw::{grpc_message, preface, request_header_block};

/// A SayHello request on `stream`: HEADERS (literal fields, no Huffman) and an empty
/// HelloRequest in one DATA frame ending the stream.
fn request(stream: u32) -> Vec<u8> {
    let block = request_header_block("/helloworld.Greeter/SayHello");
    let mut bytes = frame(HEADERS, 0x4, stream, &block);
    bytes.extend(frame(DATA, 0x1, stream, &grpc_message(&[])));
    bytes
}

/// The server's peak resident memory so far (VmHWM), in KiB.
fn peak_rss_kib(server: &Server) -> u64 {
    grpclab_testkit::process::peak_rss_kib(server.child.id()).expect("the server is running")
}

/// The server's open sockets (listening one included).
fn open_fds(server: &Server) -> usize {
    grpclab_testkit::process::open_sockets(server.child.id())
}

/// Waits until the server holds `baseline` descriptors again; false after 20 s.
fn sockets_released(server: &Server, baseline: usize) -> bool {
    let give_up = Instant::now() + Duration::from_secs(20);
    while Instant::now() < give_up {
        if open_fds(server) <= baseline {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A bystander's call on a new connection succeeds.
fn bystander_is_served(server: &Server) {
    if let Err(report) = bystander_outcome(server) {
        panic!("bystander not served: {report}");
    }
}

/// Twenty calls of a bystander on a new connection: `Err` with the report unless all are OK.
fn bystander_outcome(server: &Server) -> Result<(), String> {
    let output = grpclab()
        .args([
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-n",
            "20",
            "-c",
            "2",
            "-O",
            "json",
        ])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|_| format!("load failed: {}", String::from_utf8_lossy(&output.stderr)))?;
    if report["statusCodeDistribution"]["OK"] == 20 {
        Ok(())
    } else {
        Err(format!("{}", report["statusCodeDistribution"]))
    }
}

/// Writes `unit` repeatedly without ever reading, until `cap` bytes are out or the server has
/// stopped taking them for a second (it stopped reading). Returns the bytes written.
fn flood(tcp: &mut TcpStream, unit: &[u8], cap: usize) -> usize {
    flood_from(
        tcp,
        |buf| {
            while buf.len() < 65536 {
                buf.extend_from_slice(unit);
            }
        },
        cap,
    )
}

/// Writes what `more` appends (whole frames, about 64 KiB a call) without ever reading,
/// until `cap` bytes are out or the server has stopped taking them for a second (it stopped
/// reading, or closed). Returns the bytes written.
fn flood_from(tcp: &mut TcpStream, mut more: impl FnMut(&mut Vec<u8>), cap: usize) -> usize {
    tcp.set_nonblocking(true).unwrap();
    let mut pending = Vec::new();
    let mut at = 0;
    let mut sent = 0;
    let mut stuck_since: Option<Instant> = None;
    while sent < cap {
        if at == pending.len() {
            pending.clear();
            at = 0;
            more(&mut pending);
            if pending.is_empty() {
                break;
            }
        }
        match tcp.write(&pending[at..]) {
            Ok(n) => {
                sent += n;
                at += n;
                stuck_since = None;
            }
            Err(err) if err.kind() == ErrorKind::WouldBlock => {
                let since = *stuck_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(1) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => break,
        }
    }
    sent
}

/// What tonic-mt (tonic's defaults, the reference server, not ours to harden) does under an
/// attack: stays within the same bounds as lab, or keeps the documented deviation.
#[derive(Clone, Copy, PartialEq)]
enum TonicMt {
    /// Peak RSS under the bound and a bystander served, as lab.
    Bounded,
    /// Requests on ever new streams from a client that never reads: tonic sets no limit on
    /// concurrent streams and queues every answer (~470 MiB seen after 23 MB of requests;
    /// docs/guide.md). Asserted as it is, so a change either way is noticed.
    Unbounded,
}

/// Runs an attack on a fresh server of each kind: `attack` gets a connected socket that has
/// sent the client preface, and returns the bytes it sent. Then: the server's peak RSS stays
/// under the bound and a bystander is served (lab on both transports; tonic-mt as `tonic`
/// says), and once the attacker leaves its socket is released.
fn each_server_under(name: &str, tonic: TonicMt, attack: impl Fn(&mut TcpStream) -> usize) {
    for args in SERVERS {
        let server = Server::start_with(args);
        // One served call first: the server's own sockets (runtime, signals) all exist then.
        bystander_is_served(&server);
        let baseline = open_fds(&server);
        let mut tcp = TcpStream::connect(server.addr).unwrap();
        tcp.write_all(&preface(&[])).unwrap();
        let sent = attack(&mut tcp);
        let peak = peak_rss_kib(&server);
        let what = format!("{args:?}: {name}: peak RSS {peak} KiB after {sent} bytes");
        if args[1] == "tonic-mt" && tonic == TonicMt::Unbounded {
            assert!(
                peak > RSS_BOUND_KIB,
                "{what}: tonic-mt now stays bounded; update docs/guide.md and this test"
            );
        } else {
            assert!(peak < RSS_BOUND_KIB, "{what}");
            assert_eq!(bystander_outcome(&server), Ok(()), "{what}: bystander");
        }
        drop(tcp);
        assert!(
            sockets_released(&server, baseline),
            "{what}: socket kept ({} sockets, {baseline} before)",
            open_fds(&server)
        );
    }
}

/// Requests on ever new stream ids, appended about 64 KiB at a time.
fn endless_requests() -> impl FnMut(&mut Vec<u8>) {
    let mut stream = 1u32;
    move |buf: &mut Vec<u8>| {
        while buf.len() < 65536 && stream < 0x7fff_0000 {
            buf.extend(request(stream));
            stream += 2;
        }
    }
}

/// Floods from a client that never reads. Each frame asks for an answer
/// (an ACK, a reset, a response); a server that keeps reading while it cannot write queues
/// them all (lab before: 2-5 GB).
#[test]
fn floods_from_a_client_that_never_reads_stay_bounded() {
    const CAP: usize = 400 << 20;
    each_server_under("PING flood", TonicMt::Bounded, |tcp| {
        flood(tcp, &frame(PING, 0, 0, b"hostile!"), CAP)
    });
    each_server_under("SETTINGS flood", TonicMt::Bounded, |tcp| {
        flood(tcp, &frame(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0]), CAP)
    });
    each_server_under("empty DATA on a closed stream", TonicMt::Bounded, |tcp| {
        tcp.write_all(&request(1)).unwrap();
        flood(tcp, &frame(DATA, 0, 1, &[]), CAP)
    });
    each_server_under("requests, huge client window", TonicMt::Unbounded, |tcp| {
        let mut bytes = frame(SETTINGS, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]);
        bytes.extend(frame(
            WINDOW_UPDATE,
            0,
            0,
            &(0x7fff_ffffu32 - 65_535).to_be_bytes(),
        ));
        tcp.write_all(&bytes).unwrap();
        flood_from(tcp, endless_requests(), CAP)
    });
    each_server_under(
        "requests, default client window",
        TonicMt::Unbounded,
        |tcp| flood_from(tcp, endless_requests(), CAP),
    );
}

/// Clients that close while their responses wait for flow-control window
/// (they granted none) must not leave sockets behind.
#[test]
fn clients_that_leave_while_responses_wait_for_window_leave_nothing_behind() {
    for args in SERVERS {
        let server = Server::start_with(args);
        // One served call first: the server's own sockets (runtime, signals) all exist then.
        bystander_is_served(&server);
        let baseline = open_fds(&server);
        for _ in 0..20 {
            let mut tcp = TcpStream::connect(server.addr).unwrap();
            // SETTINGS_INITIAL_WINDOW_SIZE 0: no response DATA can be sent.
            let mut bytes = preface(&[(0x4, 0)]);
            for stream in (1..40).step_by(2) {
                bytes.extend(request(stream));
            }
            tcp.write_all(&bytes).unwrap();
            // Read what the server sends until its HEADERS arrived, then leave.
            tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 4096];
            let _ = tcp.read(&mut buf);
            drop(tcp);
        }
        assert!(
            sockets_released(&server, baseline),
            "{args:?}: {} descriptors open, {baseline} before",
            open_fds(&server)
        );
        bystander_is_served(&server);
    }
}

/// A connection cap. With `--max-connections 20`, forty idle clients: the
/// twenty beyond the cap are closed at once and the server says so on stderr; once the first
/// twenty leave, a bystander is served again (the count goes down as connections end).
#[test]
fn connections_beyond_the_cap_are_closed_with_a_log_line() {
    for transport in ["lab", "h2"] {
        let server = Server::start_with(&[
            "--impl",
            "lab",
            "--threads",
            "1",
            "--transport",
            transport,
            "--max-connections",
            "20",
        ]);
        let mut held = Vec::new();
        let mut closed = 0;
        for _ in 0..40 {
            let mut tcp = TcpStream::connect(server.addr).unwrap();
            tcp.write_all(&preface(&[])).unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            // A connection within the cap gets the server's SETTINGS; one beyond it, EOF.
            let mut buf = [0u8; 9];
            match tcp.read(&mut buf) {
                Ok(n) if n > 0 => held.push(tcp),
                _ => closed += 1,
            }
        }
        assert_eq!((held.len(), closed), (20, 20), "{transport}");
        let said = |server: &Server| {
            server
                .stderr_lines
                .lock()
                .unwrap()
                .iter()
                .any(|line| line.contains("--max-connections"))
        };
        let give_up = Instant::now() + Duration::from_secs(10);
        while !said(&server) && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(said(&server), "{transport}: no log line about the cap");
        drop(held);
        // The count goes down as the held connections end; then a bystander gets in.
        let give_up = Instant::now() + Duration::from_secs(20);
        loop {
            let output = grpclab()
                .args([
                    "load",
                    "--insecure",
                    &server.target(),
                    "--scenario",
                    "complex_proto",
                    "-n",
                    "5",
                    "-c",
                    "1",
                    "-O",
                    "json",
                ])
                .output()
                .unwrap();
            let report: serde_json::Value =
                serde_json::from_slice(&output.stdout).unwrap_or_default();
            if report["statusCodeDistribution"]["OK"] == 5 {
                break;
            }
            assert!(Instant::now() < give_up, "{transport}: never served again");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Idle connections cost what they use, not 128 KiB reserved up front
/// (lab before: 5,000 idle connections reserved 666 MB). 2,000 connections that send a
/// preface and nothing else: lab's growth stays under 24 KiB a connection; all are released
/// when they leave.
#[test]
fn idle_connections_cost_little_and_are_released() {
    const CONNECTIONS: u64 = 2_000;
    for args in SERVERS {
        let server = Server::start_with(args);
        bystander_is_served(&server);
        let baseline = open_fds(&server);
        let before = peak_rss_kib(&server);
        let mut idle = Vec::new();
        for _ in 0..CONNECTIONS {
            let mut tcp = TcpStream::connect(server.addr).unwrap();
            tcp.write_all(&preface(&[])).unwrap();
            idle.push(tcp);
        }
        // Every connection accepted and set up: the bystander comes after them all.
        bystander_is_served(&server);
        let peak = peak_rss_kib(&server);
        let per_connection = (peak.saturating_sub(before)) / CONNECTIONS;
        // 15 KiB measured on every server; a 16 KiB array in lab's connection future once
        // made it 46.
        assert!(
            per_connection < 24,
            "{args:?}: {CONNECTIONS} idle connections: peak RSS {before} -> {peak} KiB, {per_connection} KiB each"
        );
        drop(idle);
        assert!(
            sockets_released(&server, baseline),
            "{args:?}: {} sockets left, {baseline} before",
            open_fds(&server)
        );
    }
}

/// Large complete requests in flight (lab before: 5 GB). One connection
/// carries 100 concurrent 3 MB requests (300 MB at once): lab holds at most its 16 MiB
/// request budget per connection (bodies beyond it are refused, safe to retry) until their
/// answers are written, so its RSS stays bounded; every call is accounted for, and a bystander
/// is served.
#[test]
fn large_requests_in_flight_stay_within_the_budget() {
    let data = std::env::temp_dir().join(format!("grpclab-hostile-{}.json", std::process::id()));
    std::fs::write(
        &data,
        format!(r#"{{"request":{{"name":"{}"}}}}"#, "a".repeat(3_000_000)),
    )
    .unwrap();
    for args in SERVERS {
        let server = Server::start_with(args);
        let output = grpclab()
            .args([
                "load",
                "--insecure",
                &server.target(),
                "--scenario",
                "string_10B",
                "-D",
            ])
            .arg(&data)
            .args(["-n", "300", "-c", "100", "--connections", "1", "-O", "json"])
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("load failed: {}", String::from_utf8_lossy(&output.stderr)));
        let peak = peak_rss_kib(&server);
        assert_eq!(
            report["count"], 300,
            "{args:?}: every call accounted for: {}",
            report["statusCodeDistribution"]
        );
        let bystander = bystander_outcome(&server);
        // Our engine holds a request's budget until its answer is written, so answers queued
        // for a slow reader are bounded with the requests. On the h2 crate (lab-h2, tonic-mt)
        // answers queue in h2's send buffers unbounded: 345 MiB seen (ARCHITECTURE.md).
        if args[1] == "lab" && !args.contains(&"h2") {
            assert!(peak < RSS_BOUND_KIB, "{args:?}: peak RSS {peak} KiB");
        } else {
            // The documented deviation (docs/guide.md): answers queue in h2's send buffers,
            // 50-345 MiB seen for the 300 MB in flight. Bounded loosely, so a runaway (every
            // request and answer kept) is noticed.
            assert!(peak < 4 * RSS_BOUND_KIB, "{args:?}: peak RSS {peak} KiB");
        }
        if args[1] == "lab" {
            assert_eq!(bystander, Ok(()), "{args:?}");
        }
    }
    let _ = std::fs::remove_file(&data);
}

/// Reads and discards everything the server sends, in the background: a client that reads.
fn drain_in_background(tcp: &TcpStream) -> std::thread::JoinHandle<()> {
    let mut reader = tcp.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
    })
}

/// Runs `attack` as a client that reads (a background thread drains the socket), then closes
/// our side and waits for the server to close its own; returns what `attack` returned.
fn reading(tcp: &mut TcpStream, attack: impl FnOnce(&mut TcpStream) -> usize) -> usize {
    let reader = drain_in_background(tcp);
    let sent = attack(tcp);
    let _ = tcp.shutdown(std::net::Shutdown::Write);
    let _ = reader.join();
    sent
}

/// A header block literal with incremental indexing and a new name (RFC 7541 §6.2.1).
fn indexed_literal(name: &str, value: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0x40, name.len() as u8];
    bytes.extend_from_slice(name.as_bytes());
    // A 7-bit prefix integer for the value's length.
    if value.len() < 127 {
        bytes.push(value.len() as u8);
    } else {
        bytes.push(127);
        let mut rest = value.len() - 127;
        while rest >= 128 {
            bytes.push((rest as u8 & 0x7f) | 0x80);
            rest >>= 7;
        }
        bytes.push(rest as u8);
    }
    bytes.extend_from_slice(value);
    bytes
}

/// The request head of [`request`], as one HPACK block.
fn request_head() -> Vec<u8> {
    let request = request(1);
    let length = u32::from_be_bytes([0, request[0], request[1], request[2]]) as usize;
    request[9..9 + length].to_vec()
}

/// Attacks from a client
/// that reads. Each on a fresh server of each kind, bounded in bytes; lab's peak RSS stays
/// under the bound and a bystander is served meanwhile-or-after, on every server (tonic-mt
/// included).
#[test]
fn attacks_from_a_client_that_reads_stay_bounded() {
    const CAP: usize = 32 << 20;
    const RST_STREAM: u8 = 0x3;
    const CONTINUATION: u8 = 0x9;
    each_server_under(
        "SETTINGS_INITIAL_WINDOW_SIZE x 1,000 open streams",
        TonicMt::Bounded,
        |tcp| {
            reading(tcp, |tcp| {
                let head = request_head();
                let mut setup = Vec::new();
                for stream in (1..2000).step_by(2) {
                    setup.extend(frame(HEADERS, 0x4, stream, &head));
                }
                tcp.write_all(&setup).unwrap();
                // 2,730 entries a frame (the most a 16 KiB frame holds), values alternating.
                let mut entries = Vec::new();
                for i in 0..2730u32 {
                    entries.extend_from_slice(&4u16.to_be_bytes());
                    entries.extend_from_slice(&(65_535 + i % 2).to_be_bytes());
                }
                flood(tcp, &frame(SETTINGS, 0, 0, &entries), CAP)
            })
        },
    );
    // Requests reset at once, on ever new streams; `churn` adds a new indexed field to each.
    let resetting_requests = |churn: bool| {
        let head = request_head();
        let mut stream = 1u32;
        move |buf: &mut Vec<u8>| {
            while buf.len() < 65536 {
                let mut block = head.clone();
                if churn {
                    let value = format!("{stream:0>100}");
                    block.extend(indexed_literal("x-churn", value.as_bytes()));
                }
                buf.extend(frame(HEADERS, 0x4, stream, &block));
                buf.extend(frame(RST_STREAM, 0, stream, &8u32.to_be_bytes()));
                stream += 2;
            }
        }
    };
    each_server_under(
        "rapid reset (HEADERS + RST_STREAM)",
        TonicMt::Bounded,
        |tcp| reading(tcp, |tcp| flood_from(tcp, resetting_requests(false), CAP)),
    );
    each_server_under("CONTINUATION flood", TonicMt::Bounded, |tcp| {
        reading(tcp, |tcp| {
            tcp.write_all(&frame(HEADERS, 0, 1, &request_head()))
                .unwrap();
            flood(tcp, &frame(CONTINUATION, 0, 1, &[0x40; 16_384]), CAP)
        })
    });
    each_server_under(
        "HPACK bomb (one 4 KB entry referenced 16,000 times)",
        TonicMt::Bounded,
        |tcp| {
            reading(tcp, |tcp| {
                let mut block = request_head();
                block.extend(indexed_literal("x-bomb", &[b'b'; 4000]));
                // Index 62: the newest dynamic-table entry, the bomb.
                block.extend(std::iter::repeat_n(0xbe, 16_000));
                let mut bytes = Vec::new();
                let mut chunks = block.chunks(16_384);
                bytes.extend(frame(HEADERS, 0x1, 1, chunks.next().unwrap()));
                let rest: Vec<&[u8]> = chunks.collect();
                for (i, chunk) in rest.iter().enumerate() {
                    let flags = if i + 1 == rest.len() { 0x4 } else { 0 };
                    bytes.extend(frame(CONTINUATION, flags, 1, chunk));
                }
                let _ = tcp.write_all(&bytes);
                bytes.len()
            })
        },
    );
    each_server_under(
        "HPACK table churn (a new indexed field per request)",
        TonicMt::Bounded,
        |tcp| reading(tcp, |tcp| flood_from(tcp, resetting_requests(true), CAP)),
    );
    each_server_under(
        "WINDOW_UPDATE dribble (1 byte at a time)",
        TonicMt::Bounded,
        |tcp| {
            reading(tcp, |tcp| {
                // No window for responses, then window one byte at a time.
                let mut setup = frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]);
                setup.extend(request(1));
                tcp.write_all(&setup).unwrap();
                let mut unit = frame(WINDOW_UPDATE, 0, 1, &1u32.to_be_bytes());
                unit.extend(frame(WINDOW_UPDATE, 0, 0, &1u32.to_be_bytes()));
                flood(tcp, &unit, CAP)
            })
        },
    );
    each_server_under("PING and SETTINGS flood", TonicMt::Bounded, |tcp| {
        reading(tcp, |tcp| {
            let mut unit = frame(PING, 0, 0, b"hostile!");
            unit.extend(frame(SETTINGS, 0, 0, &[]));
            flood(tcp, &unit, CAP)
        })
    });
    each_server_under("random frames", TonicMt::Bounded, |tcp| {
        reading(tcp, |tcp| {
            // A fixed-seed generator: the same frames every run.
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            flood_from(
                tcp,
                |buf| {
                    while buf.len() < 65536 {
                        let r = next();
                        let payload: Vec<u8> = (0..(r >> 40) % 64).map(|_| next() as u8).collect();
                        buf.extend(frame(
                            (r % 10) as u8,
                            (r >> 8) as u8,
                            ((r >> 16) % 8) as u32,
                            &payload,
                        ));
                    }
                },
                CAP,
            )
        })
    });
}
