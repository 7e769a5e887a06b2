//! Streaming calls: `grpclab load` drives the three streaming shapes of the built-in
//! streaming echo service (the tonic baseline, and lab on its own engine) with ghz's
//! `--stream-*` flags, and counts every message each way exactly; bidi is driven as ping-pong
//! with each round trip in its own histogram. Calls to a server without the service count as
//! UNIMPLEMENTED.

mod common;

use common::{grpclab, Server};
use serde_json::Value;

const SERVICE: &str = "grpclab.streaming.v1.StreamingEcho";

/// The streaming echo's .proto (tests that do not depend on reflection name it).
const PROTO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scenarios/streaming/streaming.proto"
);

fn load(server: &Server, method: &str, data: &str, extra: &[&str]) -> Value {
    let output = grpclab()
        .args(["load", "--insecure", "--no-tui", &server.target()])
        .args(["--proto", PROTO])
        .args(["--call", &format!("{SERVICE}.{method}"), "-d", data])
        .args(["-O", "json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        common::finished(&output),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn every_streaming_shape_counts_its_messages_exactly() {
    for implementation in ["tonic-mt", "lab"] {
        let server = Server::start(implementation);
        // Our engine (the default) and the h2 crate's transport (the reference).
        every_shape_counted_on(&server, &[]);
        every_shape_counted_on(&server, &["--transport", "h2"]);
    }
}

fn every_shape_counted_on(server: &Server, transport: &[&str]) {
    let load = |server: &Server, method: &str, data: &str, extra: &[&str]| {
        let extra: Vec<&str> = extra.iter().chain(transport).copied().collect();
        load(server, method, data, &extra)
    };
    // Server streaming: 50 replies to each of 300 calls.
    let feed = load(
        server,
        "Feed",
        r#"{"count":50,"payload":"aGVsbG8="}"#,
        &["-n", "300", "-c", "10"],
    );
    assert_eq!(feed["statusCodeDistribution"]["OK"], 300, "{feed}");
    assert_eq!(
        (&feed["messagesSent"], &feed["messagesReceived"]),
        (&300.into(), &15000.into())
    );
    // The time between two replies: one gap per reply after each call's first.
    let gaps = &feed["messageGaps"];
    assert_eq!(gaps["count"], 15000 - 300, "{gaps}");
    assert!(
        gaps["slowest"].as_u64().unwrap() <= feed["slowest"].as_u64().unwrap(),
        "a gap fits inside its call: {gaps}"
    );
    // ghz's --stream-call-count on a server stream: each call cancelled after 9 of its 50
    // replies, a success with exactly 9; ghz's bidi, sends and replies independent.
    let counted = load(
        server,
        "Feed",
        r#"{"count":50,"payload":"aGVsbG8="}"#,
        &["-n", "100", "-c", "10", "--stream-call-count", "9"],
    );
    assert_eq!(counted["statusCodeDistribution"]["OK"], 100, "{counted}");
    assert_eq!(counted["messagesReceived"], 900, "{counted}");
    let independent = load(
        server,
        "PingPong",
        r#"{"payload":"aGVsbG8="}"#,
        &[
            "-n",
            "50",
            "-c",
            "10",
            "--stream-independent",
            "--stream-call-count",
            "20",
        ],
    );
    assert_eq!(
        independent["statusCodeDistribution"]["OK"], 50,
        "{independent}"
    );
    assert_eq!(
        (
            &independent["messagesSent"],
            &independent["messagesReceived"]
        ),
        (&1000.into(), &1000.into())
    );
    assert!(independent["roundTrip"].is_null(), "not ping-pong");
    // Client streaming: the two-message array cycled to 7 messages, one summary each.
    let upload = load(
        server,
        "Upload",
        r#"[{"payload":"YQ=="},{"payload":"YmI="}]"#,
        &["-n", "100", "-c", "5", "--stream-call-count", "7"],
    );
    assert_eq!(upload["statusCodeDistribution"]["OK"], 100, "{upload}");
    assert_eq!(
        (&upload["messagesSent"], &upload["messagesReceived"]),
        (&700.into(), &100.into())
    );
    assert!(upload.get("messageGaps").is_none(), "one reply: no gap");
    // Bidi ping-pong: 100 round trips per call, each in the round-trip histogram.
    let ping_pong = load(
        server,
        "PingPong",
        r#"{"payload":"aGVsbG8="}"#,
        &["-n", "200", "-c", "10", "--stream-call-count", "100"],
    );
    assert_eq!(
        ping_pong["statusCodeDistribution"]["OK"], 200,
        "{ping_pong}"
    );
    assert_eq!(
        (&ping_pong["messagesSent"], &ping_pong["messagesReceived"]),
        (&20000.into(), &20000.into())
    );
    assert!(
        ping_pong.get("messageGaps").is_none(),
        "ping-pong has round trips instead"
    );
    let round_trip = &ping_pong["roundTrip"];
    assert!(round_trip["fastest"].as_u64().unwrap() > 0, "{round_trip}");
    assert!(
        round_trip["slowest"].as_u64().unwrap() <= ping_pong["slowest"].as_u64().unwrap(),
        "a round trip fits inside its call"
    );
    // A call duration with an interval: sends stop when the duration has passed.
    let timed = load(
        server,
        "PingPong",
        r#"{"payload":"aGVsbG8="}"#,
        &[
            "-n",
            "4",
            "-c",
            "2",
            "--stream-call-duration",
            "100ms",
            "--stream-interval",
            "10ms",
        ],
    );
    let sent = timed["messagesSent"].as_u64().unwrap();
    assert_eq!(timed["statusCodeDistribution"]["OK"], 4, "{timed}");
    assert!((4..=4 * 11).contains(&sent), "at most 11 per call: {sent}");
    assert_eq!(timed["messagesReceived"], sent);
}

#[test]
fn a_server_without_the_service_answers_unimplemented_for_every_call() {
    // lab on the h2 crate serves unary calls only, and says so at once (a bidi client waits
    // for a reply before it half-closes: an answer after the body would never come).
    let server = Server::start_with(&["--impl", "lab", "--transport", "h2"]);
    let result = load(
        &server,
        "PingPong",
        r#"{"payload":"YQ=="}"#,
        &["-n", "50", "-c", "5"],
    );
    assert_eq!(result["count"], 50);
    assert_eq!(
        result["statusCodeDistribution"]["Unimplemented"], 50,
        "{result}"
    );
}

#[test]
fn stream_flags_that_cannot_apply_are_one_line() {
    let server = Server::start("tonic-mt");
    let run = |args: &[&str]| {
        let output = grpclab()
            .args(["load", "--insecure", "--no-tui", &server.target()])
            .args(args)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        )
    };
    let (code, stderr) = run(&["--scenario", "complex_proto", "--stream-call-count", "3"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unary"), "{stderr}");
    let ping_pong = format!("{SERVICE}.PingPong");
    let (code, stderr) = run(&["--call", &ping_pong, "-d", "{}", "--validate"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.lines().last().unwrap().contains("--validate"),
        "{stderr}"
    );
    let (code, stderr) = run(&["--call", &ping_pong, "-d", "{}", "--stream-call-count", "0"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--stream-call-count"), "{stderr}");
    // ghz-style flags where they mean nothing are one line, not silently ignored.
    let feed = format!("{SERVICE}.Feed");
    for (args, says) in [
        (
            vec!["--call", &feed, "-d", "{}", "--stream-independent"],
            "bidi",
        ),
        (
            vec!["--call", &feed, "-d", "{}", "--stream-interval", "1ms"],
            "--stream-call-count N",
        ),
        // A stamp field that is not there, not a 64-bit integer, or on a one-reply call.
        (
            vec!["--call", &feed, "-d", "{}", "--stream-stamp", "sent_at"],
            "its 64-bit integer fields: sequence, sent_unix_nanos",
        ),
        (
            vec!["--call", &feed, "-d", "{}", "--stream-stamp", "payload"],
            "not a single fixed64",
        ),
        (
            vec![
                "--scenario",
                "complex_proto",
                "--stream-stamp",
                "sent_unix_nanos",
            ],
            "has one reply",
        ),
    ] {
        let (code, stderr) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// The built-in streaming scenarios run in `load` and `bench`: each sends its payload array
/// in order per call, on tonic and on lab.
#[test]
fn builtin_streaming_scenarios_run_in_load_and_bench() {
    let server = Server::start("tonic-mt");
    for (scenario, sent_per_call, received_per_call) in [
        ("streaming_ping_pong", 10, 10),
        ("server_stream_1kB", 1, 100),
        ("client_stream_1kB", 10, 1),
    ] {
        let output = grpclab()
            .args(["load", "--insecure", "--no-tui", &server.target()])
            .args(["--scenario", scenario, "-n", "40", "-c", "4", "-O", "json"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 40,
            "{scenario}: {report}"
        );
        assert_eq!(report["messagesSent"], 40 * sent_per_call, "{scenario}");
        assert_eq!(
            report["messagesReceived"],
            40 * received_per_call,
            "{scenario}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let output = common::leftovers::output_leaving_nothing(
        grpclab()
            .args(["bench", "tonic-mt", "lab", "--no-tui", "--results-dir"])
            .arg(dir.path())
            .envs([
                ("GRPC_REQUEST_SCENARIO", "streaming_ping_pong"),
                ("GRPC_BENCHMARK_DURATION", "1s"),
                ("GRPC_BENCHMARK_WARMUP", "1s"),
                ("GRPC_CLIENT_CONNECTIONS", "2"),
                ("GRPC_CLIENT_CONCURRENCY", "20"),
            ]),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    for implementation in ["tonic-mt", "lab"] {
        assert!(
            stderr
                .lines()
                .any(|line| line.contains(&format!("{implementation}: "))
                    && line.contains(" 0 errors")),
            "{implementation}: {stderr}"
        );
    }
    assert!(output.status.success(), "{stderr}");
    // The table gains the messages per second each way: 10 round trips per call, so as many
    // messages received as sent, ten per call.
    let folder = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.is_dir())
        .unwrap();
    let table = std::fs::read_to_string(folder.join("table.txt")).unwrap();
    assert!(
        table.contains("msgs/s sent") && table.contains("msgs/s recv"),
        "{table}"
    );
    // `bench` wrote its page beside the table, with both rows in it.
    let page = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(
        page.contains("<td>tonic-mt</td>") && page.contains("<td>lab</td>"),
        "report.html rows"
    );
    assert!(stderr.contains("report: "), "{stderr}");
    for implementation in ["tonic-mt", "lab"] {
        let row = std::fs::read_to_string(folder.join(format!("{implementation}.json"))).unwrap();
        let row: Value = serde_json::from_str(&row).unwrap();
        let load = &row["load"];
        let window_s = load["measuredWindow"].as_f64().unwrap() / 1e9;
        let sent_rate = load["messagesSent"].as_f64().unwrap() / window_s;
        let line = table
            .lines()
            .rfind(|line| line.starts_with(&format!("| {implementation} ")))
            .unwrap();
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | name | errors | allocs/req | own memory | msgs/s sent | msgs/s recv | ...
        let shown: f64 = cells[5].parse().unwrap();
        assert!((shown - sent_rate).abs() <= 1.0, "{line} vs {sent_rate}");
        assert_eq!(cells[5], cells[6], "ping-pong: as many each way: {line}");
        assert_eq!(load["messagesSent"], load["count"].as_u64().unwrap() * 10);
    }
}

/// A deadline in the middle of a stream (`-t`): every call ends DEADLINE_EXCEEDED, counted
/// once, with the messages it sent before.
#[test]
fn a_deadline_mid_stream_ends_each_call_once() {
    for implementation in ["tonic-mt", "lab"] {
        deadline_mid_stream_on(&Server::start(implementation));
    }
}

fn deadline_mid_stream_on(server: &Server) {
    let result = load(
        server,
        "PingPong",
        r#"{"payload":"YQ=="}"#,
        &[
            "-n",
            "4",
            "-c",
            "2",
            "--stream-call-count",
            "100",
            "--stream-interval",
            "50ms",
            "-t",
            "300ms",
        ],
    );
    assert_eq!(result["count"], 4, "{result}");
    assert_eq!(
        result["statusCodeDistribution"]["DeadlineExceeded"], 4,
        "{result}"
    );
    let sent = result["messagesSent"].as_u64().unwrap();
    assert!(
        sent < 4 * 100,
        "the calls stopped at their deadline: {sent}"
    );
}

/// Sends a signal to a process (`kill -SIG PID`).
fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Long ping-pong calls against lab: `-n 12 -c 4`, each call a stream far longer than the run.
fn long_streams(server: &Server, transport: &str, extra: &[&str]) -> std::process::Child {
    grpclab()
        .args(["load", "--insecure", "--no-tui", &server.target()])
        .args(["--proto", PROTO, "--call", &format!("{SERVICE}.PingPong")])
        .args(["-d", r#"{"payload":"YQ=="}"#, "-O", "json"])
        .args(["-n", "12", "-c", "4", "--transport", transport])
        .args(["--stream-call-count", "1000000", "--stream-interval", "1ms"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn report_of(load: std::process::Child) -> Value {
    let output = load.wait_with_output().unwrap();
    assert!(common::finished(&output), "{:?}", output.status);
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A server that dies in the middle of its streams: every call of a `-n` run is counted once
/// (the streams in flight and the calls that found no server: Unavailable), with the messages
/// the lost streams had exchanged.
#[test]
fn a_server_that_dies_mid_stream_costs_each_call_once() {
    for transport in ["lab", "h2"] {
        let mut server = Server::start("lab");
        let load = long_streams(&server, transport, &[]);
        // Let the streams get going (not a timed assertion: any moment mid-stream will do).
        std::thread::sleep(std::time::Duration::from_millis(400));
        server.child.kill().unwrap();
        let report = report_of(load);
        assert_eq!(report["count"], 12, "{transport}: {report}");
        assert_eq!(
            report["statusCodeDistribution"]["Unavailable"], 12,
            "{transport}: {report}"
        );
        let (sent, received) = (
            report["messagesSent"].as_u64().unwrap(),
            report["messagesReceived"].as_u64().unwrap(),
        );
        assert!(received > 0, "{transport}: the streams were under way");
        // Ping-pong leaves at most one message per call unanswered. The bound is the run's 12
        // calls, not its 4 concurrent streams: a call that starts on the dying connection before
        // its reader has seen the end can hand its first message to the transport (counted as
        // sent) and then end Unavailable (seen on CI with `--transport h2`: 525 sent, 520 received).
        assert!(
            received <= sent && sent <= received + 12,
            "{transport}: ping-pong, at most one message per call unanswered: {sent} sent, {received} received"
        );
    }
}

/// A server stopped (SIGSTOP) in the middle of its streams: each call ends at its deadline,
/// once, and the run ends with exactly N calls.
#[test]
fn a_server_stopped_mid_stream_ends_every_call_at_its_deadline() {
    for transport in ["lab", "h2"] {
        let server = Server::start("lab");
        let load = long_streams(&server, transport, &["-t", "1s"]);
        std::thread::sleep(std::time::Duration::from_millis(300));
        signal(server.child.id(), "STOP");
        let report = report_of(load);
        signal(server.child.id(), "CONT");
        assert_eq!(report["count"], 12, "{transport}: {report}");
        assert_eq!(
            report["statusCodeDistribution"]["DeadlineExceeded"], 12,
            "{transport}: {report}"
        );
    }
}

/// Open loop: a ping-pong round trip counts from its message's intended time. One stream,
/// calls due every millisecond, each call ten round trips 20 ms apart (at least 180 ms): the
/// third call cannot start before the first two have taken 360 ms, so its first round trip,
/// counted from the call's intended time, is at least that long — although the server answers
/// every message at once.
#[test]
fn open_loop_round_trips_count_from_the_intended_time() {
    let server = Server::start("lab");
    for transport in ["lab", "h2"] {
        let report = load(
            &server,
            "PingPong",
            r#"{"payload":"YQ=="}"#,
            &[
                "-n",
                "3",
                "-c",
                "1",
                "--rps",
                "1000",
                "--stream-call-count",
                "10",
                "--stream-interval",
                "20ms",
                "--transport",
                transport,
            ],
        );
        assert_eq!(report["statusCodeDistribution"]["OK"], 3, "{report}");
        let slowest = report["roundTrip"]["slowest"].as_u64().unwrap();
        assert!(
            slowest >= 350_000_000,
            "{transport}: the third call's first round trip waited for the first two: {slowest} ns"
        );
    }
}

/// Per-message figures in the CSV outputs: `-O csv` gives each call's messages each way,
/// `-O csv-seconds` the messages of the calls that ended in each second; both add up to the
/// run's totals. Unary runs keep ghz's columns.
#[test]
fn csv_outputs_carry_each_calls_messages() {
    let server = Server::start("lab");
    let run = |args: &[&str]| -> String {
        let output = grpclab()
            .args(["load", "--insecure", "--no-tui", &server.target()])
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let upload = [
        "--proto",
        PROTO,
        "--call",
        "grpclab.streaming.v1.StreamingEcho.Upload",
        "-d",
        r#"{"payload":"YQ=="}"#,
        "-n",
        "20",
        "-c",
        "4",
        "--stream-call-count",
        "7",
    ];
    let csv = run(&[&upload[..], &["-O", "csv"]].concat());
    let mut lines = csv.lines().skip(1);
    assert_eq!(
        lines.next(),
        Some("duration (ms),status,error,messages sent,messages received")
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 20, "{csv}");
    for row in &rows {
        assert!(row.ends_with(",OK,,7,1"), "{row}");
    }
    let seconds = run(&[&upload[..], &["-O", "csv-seconds"]].concat());
    let mut lines = seconds.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        &header[header.len() - 2..],
        ["messages_sent", "messages_received"]
    );
    let (mut sent, mut received) = (0, 0);
    for line in lines {
        let cells: Vec<u64> = line
            .split(',')
            .rev()
            .take(2)
            .map(|cell| cell.parse().unwrap())
            .collect();
        received += cells[0];
        sent += cells[1];
    }
    assert_eq!((sent, received), (140, 20), "{seconds}");
    // A unary run keeps ghz's three columns.
    let unary = run(&["--scenario", "complex_proto", "-n", "5", "-O", "csv"]);
    assert_eq!(unary.lines().nth(1), Some("duration (ms),status,error"));
    // The HTML page's summary has the messages each way and, for ping-pong, the round trips.
    let page = run(&[
        "--scenario",
        "streaming_ping_pong",
        "-n",
        "30",
        "-O",
        "html",
    ]);
    for row in [
        "<td>messages sent</td><td class=\"num\" data-sort=\"300\">300</td>",
        "<td>messages received</td><td class=\"num\" data-sort=\"300\">300</td>",
        "msgs/s sent",
        "round trip p99",
    ] {
        assert!(page.contains(row), "{row} not in the page");
    }
}

/// `grpclab compare` takes a streaming scenario like any other: every round of both sides
/// streams (its records carry the messages), and the verdict is computed.
#[test]
fn compare_runs_a_streaming_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let output = common::leftovers::output_leaving_nothing(
        grpclab()
            .args(["compare", "tonic-mt", "lab", "--rounds", "3"])
            .args(["--duration", "1s", "--warmup", "1s", "--results-dir"])
            .arg(dir.path())
            .env("GRPC_REQUEST_SCENARIO", "streaming_ping_pong")
            .env("GRPC_CLIENT_CONCURRENCY", "20")
            .env("GRPC_CLIENT_CONNECTIONS", "2"),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let folder = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.is_dir())
        .unwrap();
    let compare: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("compare.json")).unwrap())
            .unwrap();
    assert_eq!(compare["baseline"], "tonic-mt", "{compare}");
    // `compare` wrote its page: the verdict and every round.
    let page = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(
        page.contains("Verdict") && page.contains("<td>b-2</td>"),
        "report.html"
    );
    assert!(compare["comparisons"][0]["rps"]["ratio"].as_f64().unwrap() > 0.0);
    for round in ["a-1", "a-2", "b-1", "b-2"] {
        let record: Value = serde_json::from_str(
            &std::fs::read_to_string(folder.join(format!("{round}.json"))).unwrap(),
        )
        .unwrap();
        let load = &record["load"];
        assert_eq!(load["errors"], 0, "{round}: {load}");
        assert_eq!(
            load["messagesSent"],
            load["count"].as_u64().unwrap() * 10,
            "{round}"
        );
    }
}

/// A timed run whose streams (bounded by `--stream-call-duration`) would outlast it: at the
/// run's end each stream stops sending and half-closes, so every call ends with its status and
/// its messages counted (not abandoned at the drain limit).
#[test]
fn a_timed_run_ends_its_streams_gracefully() {
    let server = Server::start("lab");
    for transport in ["lab", "h2"] {
        let report = load(
            &server,
            "PingPong",
            r#"{"payload":"YQ=="}"#,
            &[
                "-z",
                "1s",
                "-c",
                "4",
                "--stream-call-duration",
                "60s",
                "--stream-interval",
                "10ms",
                "--transport",
                transport,
            ],
        );
        assert_eq!(report["count"], 4, "{transport}: {report}");
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 4,
            "{transport}: {report}"
        );
        let sent = report["messagesSent"].as_u64().unwrap();
        assert!(sent > 4, "{transport}: {report}");
        assert_eq!(report["messagesReceived"], sent, "{transport}");
    }
}

/// Count-bound streams still running when a timed run ends are abandoned at the drain limit
/// (here at once: `--duration-stop close`) and counted Canceled; the messages they exchanged
/// count too, on both transports (before, the totals lost them).
#[test]
fn abandoned_streams_keep_their_messages() {
    let server = Server::start("lab");
    for transport in ["lab", "h2"] {
        let report = load(
            &server,
            "PingPong",
            r#"{"payload":"YQ=="}"#,
            &[
                "-z",
                "1s",
                "-c",
                "4",
                "--stream-call-count",
                "1000000000",
                "--stream-interval",
                "10ms",
                "--duration-stop",
                "close",
                "--transport",
                transport,
            ],
        );
        assert_eq!(report["count"], 4, "{transport}: {report}");
        assert_eq!(report["abandoned"], 4, "{transport}: {report}");
        assert_eq!(
            report["statusCodeDistribution"]["Canceled"], 4,
            "{transport}: {report}"
        );
        // About 100 round trips a stream in the second; each was sent and answered.
        let sent = report["messagesSent"].as_u64().unwrap();
        let received = report["messagesReceived"].as_u64().unwrap();
        assert!(sent >= 40, "{transport}: {report}");
        assert!(
            received + 4 >= sent && received <= sent,
            "{transport}: {report}"
        );
    }
}

/// `--stream-stamp`: every reply's latency from the server's stamp (ghz#196's second half),
/// on tonic and lab, over both transports: one latency per reply counted, none longer than
/// the slowest call it came in, a receive limit's cancelled replies left out, unstamped
/// replies counted apart, and shards merging to the sum.
#[test]
fn stamped_replies_each_have_their_latency() {
    for implementation in ["tonic-mt", "lab"] {
        let server = Server::start(implementation);
        for transport in [&[][..], &["--transport", "h2"]] {
            let run = |data: &str, extra: &[&str]| {
                let extra: Vec<&str> = ["--stream-stamp", "sent_unix_nanos"]
                    .iter()
                    .chain(extra)
                    .chain(transport)
                    .copied()
                    .collect();
                load(&server, "Feed", data, &extra)
            };
            let stamped = r#"{"count":40,"payload":"aGVsbG8=","stamp":true}"#;
            let feed = run(stamped, &["-n", "200", "-c", "8"]);
            assert_eq!(feed["statusCodeDistribution"]["OK"], 200, "{feed}");
            assert_eq!(feed["messagesReceived"], 8000, "{feed}");
            let latency = &feed["messageLatency"];
            assert_eq!(
                latency["count"], 8000,
                "{implementation} {transport:?}: {latency}"
            );
            assert!(feed.get("messagesUnstamped").is_none(), "{feed}");
            // A reply's latency and its call's are read from two clocks at two moments (the
            // engine ends a call at its turn's clock reading; a stamp's arrival is the wall
            // clock read after): a thread preempted between them makes a reply read longer
            // than its call (CI saw 4.22 ms against 2.87 ms). The median reply still lies
            // within the slowest call, which a stamp read from the wrong field would not.
            let call_slowest = feed["slowest"].as_u64().unwrap();
            let median = latency["latencyDistribution"]
                .as_array()
                .and_then(|rows| rows.iter().find(|row| row["percentage"] == 50.0))
                .and_then(|row| row["latency"].as_u64())
                .expect("the median reply latency");
            assert!(
                median <= call_slowest,
                "{implementation} {transport:?}: the median reply's latency fits inside the slowest call: {latency} vs {}",
                feed["slowest"]
            );
            // Cancelled after 7 replies: the 7 counted are the ones with a latency.
            let counted = run(
                stamped,
                &["-n", "50", "-c", "5", "--stream-call-count", "7"],
            );
            assert_eq!(counted["messagesReceived"], 350, "{counted}");
            assert_eq!(counted["messageLatency"]["count"], 350, "{counted}");
            // The server not asked to stamp: every reply counted as unstamped, none guessed.
            let unstamped = run(r#"{"count":40}"#, &["-n", "20", "-c", "4"]);
            assert_eq!(unstamped["messagesUnstamped"], 800, "{unstamped}");
            assert_eq!(unstamped["messageLatency"]["count"], 0, "{unstamped}");
        }
    }
}

/// Two shards of a stamped run merge to one whose reply latencies are all of theirs, and
/// whose unstamped replies are too.
#[test]
fn stamped_reply_latencies_merge_exactly() {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    for (data, stamped) in [
        (r#"{"count":30,"stamp":true}"#, true),
        (r#"{"count":30}"#, false),
    ] {
        let mut files = Vec::new();
        for index in 0..2 {
            let shard = format!("{index}/2");
            let report = load(
                &server,
                "Feed",
                data,
                &[
                    "-n",
                    "100",
                    "-c",
                    "4",
                    "--connections",
                    "2",
                    "--stream-stamp",
                    "sent_unix_nanos",
                    "--shard",
                    &shard,
                ],
            );
            assert_eq!(report["messagesReceived"], 50 * 30, "{report}");
            let file = dir.path().join(format!("shard-{index}-{stamped}.json"));
            std::fs::write(&file, report.to_string()).unwrap();
            files.push(file);
        }
        let output = grpclab()
            .args(["merge", "-O", "json"])
            .args(&files)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let merged: Value = serde_json::from_slice(&output.stdout).unwrap();
        let (with, without) = if stamped { (3000, 0) } else { (0, 3000) };
        assert_eq!(merged["messageLatency"]["count"], with, "{merged}");
        assert_eq!(
            merged["messagesUnstamped"].as_u64().unwrap_or(0),
            without,
            "{merged}"
        );
    }
}

/// ghz's --stream-call-duration on a server stream: the client cancels each call when its time
/// is up, or when a timed run ends, and the call counts as OK with the replies it got; with
/// --stream-call-count too, whichever comes first ends it. On tonic and lab, both transports.
#[test]
fn server_streams_bounded_by_time_are_cancelled_as_successes() {
    // A stream far longer than any test: only the client's cancel ends it.
    let endless = r#"{"count":4000000000}"#;
    for implementation in ["tonic-mt", "lab"] {
        let server = Server::start(implementation);
        for transport in [&[][..], &["--transport", "h2"]] {
            let run = |data: &str, extra: &[&str]| {
                let extra: Vec<&str> = extra.iter().chain(transport).copied().collect();
                load(&server, "Feed", data, &extra)
            };
            let timed = run(
                endless,
                &["-n", "6", "-c", "3", "--stream-call-duration", "150ms"],
            );
            assert_eq!(timed["statusCodeDistribution"]["OK"], 6, "{timed}");
            assert_eq!(timed["count"], 6, "{timed}");
            assert!(timed["messagesReceived"].as_u64().unwrap() > 0, "{timed}");
            // The count comes first.
            let counted = run(
                endless,
                &[
                    "-n",
                    "6",
                    "-c",
                    "3",
                    "--stream-call-duration",
                    "1h",
                    "--stream-call-count",
                    "5",
                ],
            );
            assert_eq!(counted["statusCodeDistribution"]["OK"], 6, "{counted}");
            assert_eq!(counted["messagesReceived"], 30, "{counted}");
            // A timed run ends its hour-long streams when it ends: each one OK, none abandoned.
            let ended = run(
                endless,
                &["-z", "300ms", "-c", "3", "--stream-call-duration", "1h"],
            );
            assert_eq!(ended["statusCodeDistribution"]["OK"], 3, "{ended}");
            assert_eq!(ended["abandoned"], 0, "{ended}");
        }
    }
}

/// A stream waiting out its interval costs no CPU: one Upload call whose second message is
/// due 60 s after its first, cut by a 3 s run. The client's CPU time over the whole run
/// (start-up included) stays far under the 3 s it waits; a connection loop that polls
/// instead of sleeping spends all of them.
#[test]
#[allow(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also gives its CPU time"
)]
fn a_stream_waiting_for_its_interval_sleeps() {
    let server = Server::start("lab");
    for transport in ["lab", "h2"] {
        let child = grpclab()
            .args(["load", "--insecure", "--no-tui", &server.target()])
            .args(["--proto", PROTO])
            .args(["--call", &format!("{SERVICE}.Upload")])
            .args(["-d", r#"{"payload":"YQ=="}"#, "-O", "json"])
            .args(["--connections", "1", "-c", "1", "-z", "3s"])
            .args(["--stream-call-count", "2", "--stream-interval", "60s"])
            .args(["--transport", transport])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        let mut status = 0;
        // SAFETY: `usage` is plain old data, so all-zeroes is a valid value; `wait4` writes
        // the exit status and the child's resource usage into the two locals, which outlive
        // the call. The child is reaped here, so `child` is not waited on again.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(reaped, pid, "{}", std::io::Error::last_os_error());
        assert!(
            libc::WIFEXITED(status),
            "{transport}: the run ended by a signal"
        );
        let cpu_ms = |time: libc::timeval| time.tv_sec * 1000 + time.tv_usec / 1000;
        let cpu = cpu_ms(usage.ru_utime) + cpu_ms(usage.ru_stime);
        assert!(
            cpu < 1000,
            "{transport}: {cpu} ms of CPU over a 3 s run whose only stream waits out its interval"
        );
    }
}
