//! Connections at scale and the descriptor limit (RLIMIT_NOFILE) that caps them: one client
//! holding 5,000 connections to lab with every call accounted for and lab's memory per
//! connection bounded; a run asking for more connections than the process may hold refused in
//! one line before it starts; the soft limit raised to the hard one by the process itself; and
//! a server whose `--max-connections` exceeds its limit saying so and serving within it.

mod common;

use common::{grpclab, Server};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What lab may hold per connection it keeps (RSS growth over its idle size / connections):
/// read and write buffers, HPACK tables, the connection's task (5.0 KiB measured by
/// benches/connections.py; 7.0 before the late-reply channel was made lazily).
const SERVER_KIB_PER_CONNECTION: f64 = 8.0;

/// `grpclab ARGS` run by a shell that first sets the descriptor limit with `ulimit LIMIT`
/// (e.g. `-n 300` for soft and hard, `-Sn 200` for the soft one only).
fn grpclab_limited(limit: &str, args: &[&str]) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit {limit} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_grpclab"))
        .args(args);
    command
}

/// `grpclab load TARGET --insecure --scenario complex_proto`, more flags to add.
fn load_complex_proto(target: &str) -> Command {
    let mut command = grpclab();
    command.args(["load", target, "--insecure", "--scenario", "complex_proto"]);
    command
}

fn resident_kib(pid: u32) -> u64 {
    grpclab_testkit::process::rss_kib(pid).expect("the server is running")
}

#[test]
fn five_thousand_connections_every_call_counted_and_memory_bounded() {
    let server = Server::start_with(&[
        "--impl",
        "lab",
        "--threads",
        "1",
        "--max-connections",
        "5100",
    ]);
    let pid = server.child.id();
    let base_sockets = grpclab_testkit::process::open_sockets(pid);
    let base_kib = resident_kib(pid);
    let connections = 5_000usize;
    let calls = 10_000u64;
    let mut load = load_complex_proto(&server.target())
        .args([
            "--connections",
            "5000",
            "-c",
            "5000",
            "--rps",
            "1000",
            "-n",
            "10000",
        ])
        .args(["-O", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn grpclab load");
    // While the run holds its connections, lab's memory for them.
    let give_up = Instant::now() + Duration::from_secs(120);
    let mut held_kib = None;
    while Instant::now() < give_up && load.try_wait().expect("poll load").is_none() {
        let held = grpclab_testkit::process::open_sockets(pid).saturating_sub(base_sockets);
        if held >= connections {
            held_kib = Some(resident_kib(pid));
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = load.wait_with_output().expect("wait for load");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let held_kib = held_kib.expect("lab never held the 5,000 connections");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON report");
    assert_eq!(report["count"], calls, "every call is counted");
    assert_eq!(
        report["statusCodeDistribution"]["OK"], calls,
        "and each succeeded"
    );
    assert_eq!(
        server.stats()["calls"],
        calls,
        "the server served exactly those"
    );
    let per_connection = (held_kib.saturating_sub(base_kib)) as f64 / connections as f64;
    eprintln!("lab: {per_connection:.1} KiB per held connection");
    assert!(
        per_connection <= SERVER_KIB_PER_CONNECTION,
        "lab holds {per_connection:.1} KiB per connection (bound {SERVER_KIB_PER_CONNECTION})"
    );
}

#[test]
fn more_connections_than_descriptors_is_refused_before_the_run() {
    let server = Server::start("lab");
    let output = grpclab_limited(
        "-n 300",
        &[
            "load",
            &server.target(),
            "--insecure",
            "--scenario",
            "complex_proto",
        ],
    )
    .args(["--connections", "1000", "-c", "1000", "-n", "1000"])
    .output()
    .expect("run grpclab load");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("--connections 1000")
            && stderr.contains("RLIMIT_NOFILE")
            && stderr.contains("300 descriptors"),
        "{stderr}"
    );
    assert_eq!(server.stats()["calls"], 0, "nothing was sent");
}

#[test]
fn the_soft_limit_is_raised_to_the_hard_one() {
    let server = Server::start("lab");
    // 500 connections under a soft limit of 200: the process raises it to the hard limit.
    let output = grpclab_limited(
        "-Sn 200",
        &[
            "load",
            &server.target(),
            "--insecure",
            "--scenario",
            "complex_proto",
        ],
    )
    .args([
        "--connections",
        "500",
        "-c",
        "500",
        "-n",
        "1000",
        "-O",
        "json",
    ])
    .output()
    .expect("run grpclab load");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON report");
    assert_eq!(report["statusCodeDistribution"]["OK"], 1000);
}

#[test]
fn a_server_limited_below_its_max_connections_says_so_and_serves() {
    let mut child = grpclab_limited(
        "-n 300",
        &[
            "serve",
            "--impl",
            "lab",
            "--port",
            "0",
            "--max-connections",
            "1000",
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn grpclab serve");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let mut said = Vec::new();
    let addr = loop {
        let line = lines.next().expect("serve ended").expect("read stderr");
        if let Some((_, addr)) = line.split_once("listening on ") {
            break addr.trim().to_owned();
        }
        said.push(line);
    };
    let served = grpclab()
        .args([
            "load",
            &addr,
            "--insecure",
            "--scenario",
            "complex_proto",
            "-n",
            "5",
        ])
        .output()
        .expect("run grpclab load");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        served.status.success(),
        "{}",
        String::from_utf8_lossy(&served.stderr)
    );
    let note = said.join("\n");
    assert!(
        note.contains("--max-connections 1000") && note.contains("at most 200 connections"),
        "{note}"
    );
}

#[test]
fn a_server_closing_connections_at_its_cap_is_named_as_the_bound() {
    // lab keeps 2 connections and closes the rest as it accepts them: the client's other 6
    // connect, lose their connection, and connect again, their calls failing meanwhile.
    let server = Server::start_with(&["--impl", "lab", "--threads", "1", "--max-connections", "2"]);
    let output = load_complex_proto(&server.target())
        .args(["--connections", "8", "-c", "16", "-n", "300", "-O", "json"])
        .output()
        .expect("run grpclab load");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "no JSON report ({err}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert_eq!(report["count"], 300, "every call is accounted for");
    let ok = report["statusCodeDistribution"]["OK"].as_u64().unwrap_or(0);
    let unavailable = report["statusCodeDistribution"]["Unavailable"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(
        ok + unavailable,
        300,
        "{}",
        report["statusCodeDistribution"]
    );
    assert!(unavailable > 0, "calls on the closed connections failed");
    assert_eq!(
        server.stats()["calls"],
        ok,
        "the server served the calls that succeeded"
    );
    let bound = &report["boundBy"];
    assert_eq!(bound["kind"], "connections", "{bound}");
    let evidence = bound["evidence"].as_str().unwrap_or_default();
    assert!(
        evidence.contains("over the 8 asked for") && evidence.contains("--max-connections"),
        "{evidence}"
    );
}
