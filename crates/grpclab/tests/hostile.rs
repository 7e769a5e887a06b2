//! Hostile clients against `grpclab serve` processes (issue 12): raw HTTP/2 over loopback,
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

/// The bound the issue sets for one attacking connection.
const RSS_BOUND_KIB: u64 = 256 * 1024;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(9 + payload.len());
    bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    bytes.push(kind);
    bytes.push(flags);
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const HEADERS: u8 = 0x1;
const DATA: u8 = 0x0;

/// A client preface and an empty SETTINGS frame, then `settings` if any.
fn preface(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let mut payload = Vec::new();
    for (id, value) in settings {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    bytes.extend(frame(SETTINGS, 0, 0, &payload));
    bytes
}

/// A SayHello request on `stream`: HEADERS (literal fields, no Huffman) and its DATA.
fn request(stream: u32) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    let mut literal = |index: &[u8], value: &str| {
        block.extend_from_slice(index);
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    };
    literal(&[0x04], "/helloworld.Greeter/SayHello");
    literal(&[0x01], "localhost");
    literal(&[0x0f, 0x10], "application/grpc");
    let mut bytes = frame(HEADERS, 0x4, stream, &block);
    // An empty HelloRequest message: the 5-byte gRPC prefix only.
    bytes.extend(frame(DATA, 0x1, stream, &[0, 0, 0, 0, 0]));
    bytes
}

/// The server's peak resident memory so far (VmHWM), in KiB.
fn peak_rss_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// The server's open sockets (listening one included).
fn open_fds(server: &Server) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", server.child.id()))
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
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
    let output = grpclab()
        .args([
            "load",
            &server.target(),
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
        .unwrap_or_else(|_| panic!("load failed: {}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(report["statusCodeDistribution"]["OK"], 20, "{report}");
}

/// Writes `unit` repeatedly without ever reading, until `cap` bytes are out or the server has
/// stopped taking them for a second (it stopped reading). Returns the bytes written.
fn flood(tcp: &mut TcpStream, unit: &[u8], cap: usize) -> usize {
    tcp.set_nonblocking(true).unwrap();
    let chunk: Vec<u8> = unit
        .iter()
        .copied()
        .cycle()
        .take(unit.len() * (65536 / unit.len()))
        .collect();
    let mut sent = 0;
    let mut stuck_since: Option<Instant> = None;
    while sent < cap {
        // Resume where a partial write stopped: frames must stay whole.
        let offset = sent % chunk.len();
        match tcp.write(&chunk[offset..]) {
            Ok(n) => {
                sent += n;
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

/// Issue 12, item 1: a PING flood from a client that never reads. Each PING asks for an
/// ACK; a server that keeps reading while it cannot write queues them all.
#[test]
fn a_ping_flood_from_a_client_that_never_reads_stays_bounded() {
    for args in SERVERS {
        let server = Server::start_with(args);
        // One served call first: the server's own sockets (runtime, signals) all exist then.
        bystander_is_served(&server);
        let baseline = open_fds(&server);
        let mut tcp = TcpStream::connect(server.addr).unwrap();
        tcp.write_all(&preface(&[])).unwrap();
        let ping = frame(PING, 0, 0, b"hostile!");
        let sent = flood(&mut tcp, &ping, 400 << 20);
        let peak = peak_rss_kib(&server);
        eprintln!("{args:?}: {sent} bytes of PINGs, server peak RSS {peak} KiB");
        assert!(
            peak < RSS_BOUND_KIB,
            "{args:?}: peak RSS {peak} KiB after {sent} bytes of PINGs"
        );
        bystander_is_served(&server);
        drop(tcp);
        assert!(
            sockets_released(&server, baseline),
            "{args:?}: socket kept ({} sockets, {baseline} before; {sent} bytes sent)",
            open_fds(&server)
        );
    }
}

/// Issue 12, item 2: clients that close while their responses wait for flow-control window
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

/// Issue 12, item 4: a connection cap. With `--max-connections 20`, forty idle clients: the
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
        eprintln!("{transport}: {} held, {closed} closed", held.len());
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
                .args(["load", &server.target(), "-n", "5", "-c", "1", "-O", "json"])
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
