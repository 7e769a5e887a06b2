//! The `grpclab` binary end to end: real processes, real loopback sockets.

use std::process::{Output, Stdio};
use std::time::Duration;

mod common;

use common::{grpclab, signal, Server};

fn run(args: &[&str]) -> Output {
    grpclab().args(args).output().expect("run grpclab")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "stdout is not JSON ({err}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            stderr(output)
        )
    })
}

#[test]
fn json_output_keeps_ghz_fields_and_histograms_merge() {
    let server = Server::start("tonic-mt");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("second.json");
    let first = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-n",
        "300",
        "-c",
        "10",
        "-O",
        "json",
    ]);
    assert!(first.status.success(), "{}", stderr(&first));
    let second = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-n",
        "200",
        "-c",
        "5",
        "-O",
        "json",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(
        second.stdout.is_empty(),
        "-o writes to the file, not stdout"
    );

    let first = json(&first);
    let second: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(first["count"], 300);
    assert_eq!(first["statusCodeDistribution"]["OK"], 300);
    assert_eq!(
        first["endReason"], "normal",
        "ghz's name for an -n run's end"
    );
    for field in ["total", "average", "fastest", "slowest", "measuredWindow"] {
        assert!(
            first[field].as_u64().unwrap() > 0,
            "{field} is a positive integer (ns)"
        );
    }
    assert!(first["rps"].as_f64().unwrap() > 0.0);
    assert!(first["measuredRps"].as_f64().unwrap() > 0.0);
    let distribution = first["latencyDistribution"].as_array().unwrap();
    assert_eq!(distribution.len(), 7, "ghz's seven percentiles");
    assert_eq!(distribution[2]["percentage"], 50);
    assert!(
        distribution[2]["percentage"].is_u64(),
        "an integer, as ghz's"
    );
    let finer = first["latencyPercentiles"].as_array().unwrap();
    assert_eq!(finer.len(), 9);
    assert_eq!(finer[8]["percentage"], 99.99);
    assert_eq!(first["details"].as_array().unwrap().len(), 0, "opt-in");
    assert_eq!(first["histogram"].as_array().unwrap().len(), 11);

    let decode = |report: &serde_json::Value| {
        grpclab_load::decode_histogram(report["hdrHistogram"]["latency"].as_str().unwrap()).unwrap()
    };
    let mut merged = decode(&first);
    merged.add(decode(&second)).unwrap();
    assert_eq!(merged.len(), 500);
    assert_eq!(
        merged.max(),
        first["slowest"]
            .as_u64()
            .unwrap()
            .max(second["slowest"].as_u64().unwrap())
    );
}

#[test]
fn summary_and_csv_outputs() {
    let server = Server::start("tonic-st");
    let summary = run(&[
        "load",
        "--insecure",
        &server.target(),
        "-n",
        "150",
        "--scenario",
        "string_1kB",
    ]);
    assert!(summary.status.success(), "{}", stderr(&summary));
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(text.contains("\n  Count:\t150\n"), "{text}");
    assert!(text.contains("\n  [OK]   150 responses   \n"), "{text}");
    assert!(text.contains("\nResponse time histogram:\n  "), "{text}");
    assert!(text.contains("\n  99 % in "), "{text}");
    assert!(text.contains("\n    99.99 % in "), "the extras: {text}");
    let bars = text.lines().filter(|line| line.contains(" |")).count();
    assert_eq!(bars, 11, "ghz's 11 histogram marks: {text}");

    // ghz's CSV: a row per call, on without --details.
    let csv = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-n",
        "120",
        "-O",
        "csv",
    ]);
    assert!(csv.status.success(), "{}", stderr(&csv));
    let text = String::from_utf8_lossy(&csv.stdout);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(""),
        "ghz's template starts with a newline"
    );
    assert_eq!(lines.next(), Some("duration (ms),status,error"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 120, "{text}");
    for row in rows {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), 3, "{row}");
        assert!(cells[0].parse::<f64>().unwrap() > 0.0, "{row}");
        assert_eq!(cells[1..], ["OK", ""], "{row}");
    }

    // --details=N keeps the first N, and says so.
    let few = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-n",
        "50",
        "-O",
        "csv",
        "--details=7",
    ]);
    assert!(few.status.success(), "{}", stderr(&few));
    assert_eq!(String::from_utf8_lossy(&few.stdout).lines().count(), 2 + 7);

    let seconds = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-n",
        "120",
        "-O",
        "csv-seconds",
    ]);
    assert!(seconds.status.success(), "{}", stderr(&seconds));
    let text = String::from_utf8_lossy(&seconds.stdout);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("second,count,errors,average_ns,slowest_ns,in_flight_max,p50_ns,p99_ns")
    );
    let total: u64 = lines
        .map(|line| line.split(',').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 120);
}

#[test]
fn round_robin_data_file_and_metadata_are_sent() {
    let server = Server::start("tonic-mt");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("requests.json");
    std::fs::write(
        &data,
        r#"[{"request":{"name":"one"}},{"request":{"name":"two","pets":[{"name":"x","color":"RED"}]}}]"#,
    )
    .unwrap();
    let output = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-n",
        "100",
        "-D",
        data.to_str().unwrap(),
        "-m",
        r#"{"x-run":"test"}"#,
        "--validate",
        "-O",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["statusCodeDistribution"]["OK"], 100);
    assert_eq!(report["options"]["distinctRequests"], 2);
    assert_eq!(report["options"]["metadata"]["x-run"], "test");

    // ghz's -M: the metadata from a file.
    let metadata = dir.path().join("metadata.json");
    std::fs::write(&metadata, r#"{"x-run":"from-file"}"#).unwrap();
    let output = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-n",
        "10",
        "-M",
        metadata.to_str().unwrap(),
        "-O",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["options"]["metadata"]["x-run"], "from-file");

    // ghz's -d @ (the JSON on standard input) and --authority.
    let mut child = grpclab()
        .args([
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-d",
            "@",
            "--authority",
            "greeter.example:443",
            "--validate",
            "-n",
            "10",
            "-O",
            "json",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        br#"{"request":{"name":"from stdin"}}"#,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["statusCodeDistribution"]["OK"], 10);
    assert_eq!(report["options"]["authority"], "greeter.example:443");
    assert_input_error(
        &[
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "--authority",
            "bad authority",
        ],
        &["--authority", "not a valid authority"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-M",
            "/nonexistent.json",
        ],
        &["-M/--metadata-file", "cannot read"],
    );
}

#[test]
fn ctrl_c_stops_the_run_and_still_prints_results() {
    let server = Server::start("tonic-mt");
    let child = grpclab()
        .args([
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-z",
            "10m",
            "-c",
            "4",
            "-O",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Give the run time to install its signal handler and make some calls.
    std::thread::sleep(Duration::from_millis(1500));
    signal(child.id(), "INT");
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["endReason"], "cancel");
    assert!(report["count"].as_u64().unwrap() > 0);
}

#[test]
fn serve_drains_and_exits_zero_on_sigterm() {
    for implementation in ["tonic-mt", "lab"] {
        let mut server = Server::start(implementation);
        let output = run(&[
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-n",
            "50",
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let status = server.terminate();
        assert_eq!(status.code(), Some(0), "{implementation}");
    }
}

fn stats(target: &str) -> serde_json::Value {
    let output = run(&["stats", "--insecure", target]);
    assert!(output.status.success(), "{}", stderr(&output));
    json(&output)
}

#[test]
fn allocation_and_call_counters_move_with_load() {
    for implementation in ["tonic-mt", "tonic-st", "lab"] {
        let server = Server::start(implementation);
        let before = stats(&server.target());
        assert_eq!(before["counting"], true);
        assert_eq!(before["implementation"], implementation);
        let output = run(&[
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-n",
            "500",
            "-c",
            "10",
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let after = stats(&server.target());
        let delta = |key: &str| after[key].as_u64().unwrap() - before[key].as_u64().unwrap();
        assert_eq!(
            delta("calls"),
            500,
            "{implementation}: every call counted, once"
        );
        // Every run opens a connection, which allocates: the counters move with load.
        assert!(
            delta("allocations") > 0 && delta("allocated_bytes") > 0,
            "{implementation}"
        );
        if implementation == "lab" {
            // lab's Greeter path allocates nothing per call: what moved is the connection.
            assert!(
                delta("allocations") < 500,
                "lab: {} allocations for 500 calls",
                delta("allocations")
            );
        } else {
            assert!(
                delta("allocations") >= 500,
                "{implementation}: tonic allocates per call"
            );
            assert!(
                delta("allocated_bytes") >= 500 * 78,
                "{implementation}: the requests' bytes at least"
            );
        }
    }
}

#[test]
fn every_decode_placement_serves_load_correctly_with_back_pressure() {
    for placement in [
        &["--decode", "inline"][..],
        &["--decode", "task"],
        // A one-slot queue: most calls wait for room, none may be lost or stuck.
        &[
            "--decode",
            "pool",
            "--pool-threads",
            "2",
            "--pool-queue",
            "1",
        ],
        &["--decode", "adaptive", "--offload-above", "1000"],
    ] {
        let mut args = vec!["--impl", "lab"];
        args.extend_from_slice(placement);
        let server = Server::start_with(&args);
        for scenario in ["complex_proto", "large_complex"] {
            let output = run(&[
                "load",
                "--insecure",
                &server.target(),
                "--scenario",
                scenario,
                "-n",
                "300",
                "-c",
                "30",
                "--connections",
                "3",
                "--validate",
                "-O",
                "json",
            ]);
            assert!(
                output.status.success(),
                "{placement:?}: {}",
                stderr(&output)
            );
            let report = json(&output);
            assert_eq!(
                report["statusCodeDistribution"]["OK"], 300,
                "{placement:?} {scenario}: {} {}",
                report["errorDistribution"], report["total"]
            );
        }
    }
}

/// Runs grpclab expecting exit code 2 and a message containing every `needle`.
fn assert_input_error(args: &[&str], needles: &[&str]) {
    let output = run(args);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {text}");
    for needle in needles {
        assert!(
            text.contains(needle),
            "{args:?}: expected '{needle}' in: {text}"
        );
    }
    assert!(text.starts_with("error"), "{args:?}: {text}");
}

#[test]
fn bad_inputs_get_one_clear_error_and_exit_two() {
    let dir = tempfile::tempdir().unwrap();
    let bad_proto = dir.path().join("bad.proto");
    std::fs::write(
        &bad_proto,
        "syntax = \"proto3\";\nmessage M {\n  string a = 1\n}\n",
    )
    .unwrap();
    let bad_proto = bad_proto.to_str().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let t = "127.0.0.1:1";

    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "-z",
            "fast",
        ],
        &["fast", "not a duration"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "-z",
            "20",
        ],
        &["no unit"],
    );
    assert_input_error(
        &["load", "--insecure", t, "--proto", bad_proto],
        &["bad.proto:4:1"],
    );
    // Counts have bounds, and a negative number is a value, not a flag (it once aborted
    // allocating 26 GB, or was taken for an unknown flag '-5').
    for (args, needles) in [
        (
            &["-c", "100000000"][..],
            &["--concurrency", "from 1 to 100000"][..],
        ),
        (&["-n", "-5"], &["--total", "at least 1"]),
        (&["-c", "-1"], &["--concurrency", "from 1 to 100000"]),
        (&["-r", "-5"], &["--rps", "0 or more"]),
        (&["-z", "-3s"], &["--duration", "negative"]),
        // ghz flags grpclab does not take: refused by name, not with clap's tip to use `--`.
        (&["--async"], &["--async", "give --rps"]),
        (
            &["--lb-strategy", "grpclb"],
            &["--lb-strategy", "pick_first", "round_robin"],
        ),
        (
            &["--disable-template-functions"],
            &["--disable-template-functions is a ghz flag"],
        ),
        (
            &["--debug", "/nonexistent-folder/ghz.log"],
            &["--debug", "cannot write"],
        ),
    ] {
        let mut argv = vec!["load", "--insecure", t, "--scenario", "complex_proto"];
        argv.extend_from_slice(args);
        assert_input_error(&argv, needles);
        assert!(
            !stderr(&run(&argv)).contains("unexpected argument"),
            "{args:?}"
        );
    }
    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "--connect-timeout",
            "0s",
        ],
        &["--connect-timeout"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "--call",
            "helloworld.Greeter.SayBye",
        ],
        &["unknown call", "helloworld.Greeter.SayHello"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "-d",
            r#"{"request":{"nmae":"x"}}"#,
        ],
        &["helloworld.HelloRequest", "nmae"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "-d",
            "not json",
        ],
        &["invalid JSON"],
    );
    assert_input_error(
        &["load", "--insecure", t, "--scenario", "nope"],
        &["unknown scenario", "complex_proto"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "-D",
            "/no/such/file.json",
        ],
        &["--data-file", "/no/such/file.json"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "-m",
            "[1]",
        ],
        &["--metadata", "JSON object"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "-c",
            "2",
            "--connections",
            "5",
        ],
        &["--connections", "-c"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "--rps=-5",
        ],
        &["--rps"],
    );
    assert_input_error(
        &["load", "--insecure", "localhost"],
        &["no port", "HOST:PORT"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            &closed,
            "--scenario",
            "complex_proto",
            "-n",
            "5",
        ],
        &["cannot connect", "is the server running"],
    );
    assert_input_error(
        &["serve", "--impl", "nginx"],
        &["invalid value 'nginx'", "tonic-mt"],
    );
    assert_input_error(
        &[
            "load",
            "--insecure",
            t,
            "--scenario",
            "complex_proto",
            "--frobnicate",
        ],
        &["--frobnicate"],
    );
}

#[test]
fn encode_writes_the_framed_request_for_other_clients() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("request.bin");
    let output = run(&[
        "encode",
        "--scenario",
        "complex_proto",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(bytes.len(), 83);
    assert_eq!(bytes[..5], [0, 0, 0, 0, 78]);
    assert_input_error(
        &["encode", "--index", "3", "-o", file.to_str().unwrap()],
        &["--index 3", "1 request"],
    );
}

/// Long inline calls on one connection must not starve the thread's other connections: a
/// connection that stays readable yields after a share of work (grpclab-h2's FAIR_SHARE).
/// Counted, not timed: the flood is a fixed number of large calls, and the probe's call on
/// its own connection (and the admin calls) must complete while the flood is still far from
/// done. Without the yield, the flooding connections keep the I/O thread until the flood ends.
#[test]
fn slow_inline_calls_do_not_starve_other_connections() {
    const FLOOD: u64 = 3000;
    let server = Server::start_with(&["--impl", "lab", "--threads", "1", "--decode", "inline"]);
    let target = server.target();
    let calls = |target: &str| -> u64 {
        let output = run(&["stats", "--insecure", target]);
        json(&output)["calls"].as_u64().unwrap()
    };
    let mut flood = grpclab()
        // Large requests keep the flooding connections readable: the client always has more
        // request bytes queued than one read takes.
        .args(["load", "--insecure", &target, "--scenario", "large_complex"])
        .args(["-c", "64", "--connections", "4", "-n", &FLOOD.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the flood is under way (counted by the server).
    while calls(&target) < 50 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let probe = run(&[
        "load",
        "--insecure",
        &target,
        "--scenario",
        "complex_proto",
        "-n",
        "1",
        "-c",
        "1",
        "--connections",
        "1",
    ]);
    assert!(probe.status.success(), "{}", stderr(&probe));
    let served = calls(&target);
    let _ = flood.kill();
    let _ = flood.wait();
    assert!(
        served < FLOOD / 2,
        "{served} of the flood's {FLOOD} calls were served before one probe call on another connection: it starved"
    );
}

/// Waits for `child` and returns its exit status and peak RSS in KiB (`wait4`'s rusage); a
/// child still running after two minutes is killed and the test fails: it hung.
fn wait_with_peak_rss(child: &mut std::process::Child) -> (std::process::ExitStatus, i64) {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as libc::pid_t;
    let give_up = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child, not yet reaped; status and usage point to live
        // locals of the right types.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if reaped == pid {
            return (std::process::ExitStatus::from_raw(status), usage.ru_maxrss);
        }
        if std::time::Instant::now() > give_up {
            let _ = child.kill();
            panic!("the load run did not end: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// As a user meets it: a `-n` run against a server stopped with SIGSTOP ends,
/// counts every call, and its memory stays bounded while the server reads nothing.
#[test]
fn a_server_stopped_mid_run_cannot_hold_a_total_run_or_grow_its_memory() {
    let server = Server::start_with(&["--impl", "lab", "--threads", "1"]);
    let mut load = grpclab()
        .args([
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-n",
            "300000",
            "-c",
            "1000",
        ])
        .args(["-t", "1ms", "-O", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn grpclab load");
    std::thread::sleep(Duration::from_millis(300));
    signal(server.child.id(), "STOP");
    let mut stdout = load.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut text).map(|_| text)
    });
    let (status, peak_kib) = wait_with_peak_rss(&mut load);
    signal(server.child.id(), "CONT");
    let text = reader.join().unwrap().expect("read stdout");
    // Exit 5 when no call beat its 1 ms deadline (a debug build on a slow machine): the run
    // still ended and reported every call, which is what this test is about.
    assert!(matches!(status.code(), Some(0 | 5)), "{status:?}");
    let report: serde_json::Value = serde_json::from_slice(&text).expect("JSON report");
    assert_eq!(
        report["count"], 300000,
        "{}",
        report["statusCodeDistribution"]
    );
    // Unbounded, the write buffer grew by ~9 MB a second (24 -> 67 MB in 5 s)
    // and the run never ended; bounded, the client stays near its idle size.
    assert!(peak_kib < 48 * 1024, "peak RSS {peak_kib} KiB");
}

/// ghz's meanings of -z, -n, -x, -r and -v: -z runs for its duration and ignores -n
/// (saying so); -n with -x stops at whichever comes first; -z with -x is an input error; -r is
/// --rps; -v prints the version.
#[test]
fn duration_count_and_rate_flags_mean_what_they_mean_in_ghz() {
    let server = Server::start_with(&["--impl", "lab", "--threads", "1"]);
    let target = server.target();
    // -z wins over -n: far more than 5 calls in a second against lab.
    let output = run(&[
        "load",
        "--insecure",
        &target,
        "--scenario",
        "complex_proto",
        "-z",
        "1s",
        "-n",
        "5",
        "-c",
        "4",
        "-O",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(json(&output)["count"].as_u64().unwrap() > 5);
    assert!(stderr(&output).contains("-n 5 is ignored because -z is set"));
    // -n with -x: a count no run finishes in a second stops at the second.
    let output = run(&[
        "load",
        "--insecure",
        &target,
        "--scenario",
        "complex_proto",
        "-n",
        "100000000",
        "-x",
        "1s",
        "-O",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    assert!(report["count"].as_u64().unwrap() < 100_000_000);
    assert_eq!(report["endReason"], "timeout", "{report}");
    // -z and -x together: one of them.
    assert_input_error(
        &[
            "load",
            "--insecure",
            &target,
            "--scenario",
            "complex_proto",
            "-z",
            "1s",
            "-x",
            "1s",
        ],
        &["-x/--max-duration"],
    );
    // -r is --rps.
    let output = run(&[
        "load",
        "--insecure",
        &target,
        "--scenario",
        "complex_proto",
        "-r",
        "200",
        "-n",
        "20",
        "-O",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["options"]["rps"], 200);
    assert_eq!(json(&output)["options"]["rate"], 200.0);
    // -v prints the version, at the top and after a subcommand.
    for args in [&["-v"][..], &["load", "--insecure", "-v"][..]] {
        let output = run(args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains(env!("CARGO_PKG_VERSION")),
            "{args:?}: {stdout}"
        );
    }
}

/// ghz's -B and -b: the request as a serialized protobuf message, or count-prefixed messages
/// sent round-robin; from a file or standard input; validated against the input type.
#[test]
fn binary_payloads_from_a_file_or_standard_input() {
    let server = Server::start("tonic-st");
    let dir = tempfile::tempdir().unwrap();
    let framed = dir.path().join("framed.bin");
    let encoded = run(&[
        "encode",
        "--scenario",
        "complex_proto",
        "-o",
        framed.to_str().unwrap(),
    ]);
    assert!(encoded.status.success(), "{}", stderr(&encoded));
    // `encode` writes gRPC's 5-byte prefix; the message itself follows it.
    let message = std::fs::read(&framed).unwrap()[5..].to_vec();
    let single = dir.path().join("single.bin");
    std::fs::write(&single, &message).unwrap();
    let mut two = Vec::new();
    for _ in 0..2 {
        two.push(message.len() as u8); // < 128: a one-byte varint
        two.extend_from_slice(&message);
    }
    assert!(message.len() < 128);
    let delimited = dir.path().join("delimited.bin");
    std::fs::write(&delimited, &two).unwrap();
    for (file, distinct) in [(&single, 1), (&delimited, 2)] {
        let output = run(&[
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-B",
            file.to_str().unwrap(),
            "--validate",
            "-n",
            "20",
            "-O",
            "json",
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let report = json(&output);
        assert_eq!(report["statusCodeDistribution"]["OK"], 20, "{report}");
        assert_eq!(report["options"]["distinctRequests"], distinct);
        assert_eq!(report["options"]["binary"], true);
    }
    let mut child = grpclab()
        .args([
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-b",
            "-n",
            "10",
            "-O",
            "json",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &message).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["statusCodeDistribution"]["OK"], 10);

    let garbage = dir.path().join("garbage.bin");
    std::fs::write(&garbage, b"\xff\xff\xff\xff").unwrap();
    assert_input_error(
        &[
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-B",
            garbage.to_str().unwrap(),
        ],
        &["helloworld.HelloRequest", "neither one serialized message"],
    );
}

/// ghz's --skipFirst: the first N calls to end are left out of the report (count excludes
/// them, -n includes them); skipping all of them is an input error.
#[test]
fn skip_first_leaves_the_first_calls_out() {
    let server = Server::start_with(&["--impl", "lab", "--threads", "1"]);
    let output = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-n",
        "100",
        "-c",
        "4",
        "--skipFirst",
        "30",
        "-O",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["count"], 70, "{report}");
    assert_eq!(report["statusCodeDistribution"]["OK"], 70);
    assert_eq!(report["endReason"], "normal");
    assert_eq!(report["options"]["skipFirst"], 30);
    assert_eq!(report["options"]["total"], 100);
    assert_input_error(
        &[
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "-n",
            "10",
            "--skipFirst",
            "10",
        ],
        &["--skipFirst", "-n"],
    );
}

/// ghz's step and line load schedules: calls are scheduled at each step's rate, so a timed run
/// sends exactly the calls whose intended times fall in it (200 + 400 + 600 in 3 s), whatever
/// the machine's speed; each misplaced flag is named.
#[test]
fn step_and_line_schedules_send_the_calls_of_each_step() {
    let server = Server::start_with(&["--impl", "lab", "--threads", "1"]);
    let target = server.target();
    let base = [
        "load",
        "--insecure",
        &target,
        "--scenario",
        "complex_proto",
        "-c",
        "20",
        "-z",
        "3s",
    ];
    let steps = [
        "--load-schedule",
        "step",
        "--load-start",
        "200",
        "--load-step",
        "200",
        "--load-step-duration",
        "1s",
        "--load-end",
        "600",
        "-O",
        "json",
    ];
    let output = run(&[&base[..], &steps[..]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["count"], 1200, "{report}");
    assert_eq!(report["options"]["load-schedule"], "step");
    assert_eq!(report["options"]["load-step-duration"], 1_000_000_000u64);
    assert!(report["serviceTime"].is_object(), "an open loop");
    let line = [
        "--load-schedule",
        "line",
        "--load-start",
        "300",
        "--load-step",
        "-100",
        "--load-end",
        "100",
        "-O",
        "json",
    ];
    let output = run(&[&base[..], &line[..]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["count"], 600, "300 + 200 + 100");

    let bad = |extra: &[&str], needles: &[&str]| {
        assert_input_error(&[&base[..], extra].concat(), needles);
    };
    bad(
        &[
            "--load-schedule",
            "step",
            "--load-start",
            "10",
            "--load-step",
            "5",
        ],
        &["--load-step-duration"],
    );
    bad(
        &[
            "--load-schedule",
            "step",
            "--rps",
            "10",
            "--load-start",
            "10",
        ],
        &["--rps", "--load-start"],
    );
    bad(
        &[
            "--load-schedule",
            "line",
            "--load-start",
            "10",
            "--load-step",
            "5",
            "--load-step-duration",
            "2s",
        ],
        &["--load-step-duration", "line"],
    );
    bad(
        &[
            "--load-schedule",
            "line",
            "--load-start",
            "10",
            "--load-step",
            "-5",
        ],
        &["--load-end"],
    );
    bad(&["--load-schedule", "ramp"], &["ramp"]);
}

/// ghz's concurrency schedules: the per-second series shows the calls outstanding follow the
/// steps (a server holding each call keeps every allowed stream busy), the JSON options say
/// what was asked, and each missing or contradictory flag is named.
#[test]
fn concurrency_schedules_are_followed_and_reported() {
    let server = Server::start_with(&["--impl", "lab", "--threads", "1"]);
    let target = server.target();
    let base = [
        "load",
        "--insecure",
        &target,
        "--scenario",
        "complex_proto",
        "--cpus",
        "1",
        "-z",
        "2500ms",
    ];
    let step = [
        "--concurrency-schedule",
        "step",
        "--concurrency-start",
        "2",
        "--concurrency-step",
        "3",
        "--concurrency-step-duration",
        "1s",
        "--concurrency-end",
        "5",
    ];
    let output = run(&[&base[..], &step[..], &["-O", "csv-seconds"]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let outstanding: Vec<&str> = text
        .lines()
        .skip(1)
        .filter_map(|line| line.split(',').nth(5))
        .collect();
    // Rising: no call ends with more outstanding than the step allows; lab answers fast
    // enough that each second reaches it.
    assert_eq!(outstanding[..2], ["2", "5"], "{text}");

    let output = run(&[&base[..], &step[..], &["-O", "json"]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    let options = &report["options"];
    assert_eq!(options["concurrency-schedule"], "step", "{options}");
    assert_eq!(
        (
            &options["concurrency-start"],
            &options["concurrency-step"],
            &options["concurrency-end"]
        ),
        (&2.into(), &3.into(), &5.into())
    );
    assert_eq!(options["concurrency-step-duration"], 1_000_000_000u64);
    assert_eq!(options["concurrency"], 5, "the streams opened: the peak");

    let bad = |extra: &[&str], needles: &[&str]| {
        assert_input_error(&[&base[..], extra].concat(), needles);
    };
    bad(
        &["--concurrency-schedule", "step", "--concurrency-step", "2"],
        &["--concurrency-step-duration"],
    );
    bad(
        &[
            "--concurrency-schedule",
            "line",
            "--concurrency-step-duration",
            "2s",
        ],
        &["--concurrency-step-duration", "line"],
    );
    bad(
        &[
            "--concurrency-schedule",
            "line",
            "--concurrency-start",
            "5",
            "--concurrency-step",
            "-1",
        ],
        &["--concurrency-end"],
    );
    bad(
        &["--concurrency-schedule", "line", "--concurrency-step", "0"],
        &["--concurrency-step"],
    );
    bad(
        &[
            "--concurrency-schedule",
            "line",
            "--concurrency-start",
            "5",
            "--concurrency-end",
            "2",
        ],
        &["--concurrency-end", "--concurrency-start"],
    );
    bad(
        &[
            "--concurrency-schedule",
            "line",
            "--concurrency-step",
            "100000",
        ],
        &["100000"],
    );
    bad(&["--concurrency-schedule", "ramp"], &["ramp"]);
    // A rising schedule with nothing to stop it: -n alone gives no run length.
    assert_input_error(
        &[
            "load",
            "--insecure",
            &target,
            "--scenario",
            "complex_proto",
            "-n",
            "10",
            "--concurrency-schedule",
            "line",
        ],
        &["--concurrency-end", "--concurrency-max-duration"],
    );
}

/// `--keepalive`: against lab, which answers PINGs, a run with keepalive on loses nothing,
/// and the JSON options carry it as ghz does (nanoseconds). (The PINGs themselves, and a
/// server found dead by them, are tested on both transports in grpclab-load's faults.rs.)
#[test]
fn keepalive_is_accepted_and_reported() {
    let server = Server::start_with(&["--impl", "lab", "--threads", "1"]);
    let output = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-n",
        "2000",
        "-c",
        "4",
        "--keepalive",
        "2s",
        "-O",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["statusCodeDistribution"]["OK"], 2000, "{report}");
    assert_eq!(report["options"]["keepalive"], 2_000_000_000u64);
    assert_input_error(
        &[
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
            "--keepalive",
            "soon",
        ],
        &["--keepalive"],
    );
}

/// Under a step schedule, latency still counts from each call's intended time (coordinated
/// omission corrected), not from when it could be sent: one stream against a server that
/// holds each call 100 ms serves 10 calls a second while the schedule asks 10, then 20, then
/// 30; the calls queue, and their latency grows with the queue while their service time
/// stays ~100 ms. Uncorrected (latency = service time), the two would be equal.
#[test]
fn a_step_schedule_counts_latency_from_the_intended_time() {
    let server = Server::start_with(&[
        "--impl",
        "lab",
        "--threads",
        "1",
        "--handler-delay",
        "100ms",
    ]);
    let output = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-c",
        "1",
        "-z",
        "3s",
        "--duration-stop",
        "close",
        "--load-schedule",
        "step",
        "--load-start",
        "10",
        "--load-step",
        "10",
        "--load-step-duration",
        "1s",
        "-O",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    let service = report["serviceTime"]["slowest"].as_u64().unwrap();
    let latency = report["slowest"].as_u64().unwrap();
    // Each call is served in about 100 ms (a little more on a busy machine).
    assert!((100_000_000..1_000_000_000).contains(&service), "{report}");
    // By the end about 60 calls were due and some 30 served: the last ones waited seconds.
    assert!(
        latency >= 1_000_000_000,
        "latency {latency} ns, service {service} ns"
    );
    assert!(
        latency >= 5 * service,
        "latency {latency} ns, service {service} ns"
    );
}

/// A run in which every call failed says so plainly (on stderr whatever the format, and in
/// the summary), and shows no fastest or slowest call as if one had been measured. The case a
/// new user meets first: their own service against a built-in server (Unimplemented).
#[test]
fn a_run_where_every_call_failed_says_so() {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let proto = common::unserved_service_proto(dir.path());
    for format in ["summary", "json"] {
        let output = run(&[
            "load",
            "--insecure",
            &server.target(),
            "--proto",
            proto.to_str().unwrap(),
            "--call",
            "my.pkg.Svc.Method",
            "-d",
            r#"{"name":"Joe"}"#,
            "-n",
            "50",
            "-O",
            format,
        ]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let text = stderr(&output);
        // The results are written, and the exit code says nothing succeeded (docs/ci.md).
        assert_eq!(output.status.code(), Some(5), "{text}");
        assert!(
            text.contains("grpclab: no call succeeded: all 50 failed (50 Unimplemented)"),
            "{format}: {text}"
        );
        assert!(text.contains("helloworld.Greeter.SayHello"), "{text}");
        if format == "summary" {
            assert!(stdout.contains("Slowest:\t–"), "{stdout}");
            assert!(stdout.contains("Fastest:\t–"), "{stdout}");
            assert!(!stdout.contains("0 ns"), "{stdout}");
            assert!(
                stdout.contains("  no call succeeded: all 50 failed"),
                "{stdout}"
            );
        }
    }
    // ghz's README example, copied as a new user would: the canonical helloworld.proto,
    // whose HelloRequest has a string where grpc_bench's Greeter has a message.
    let canonical = dir.path().join("helloworld.proto");
    std::fs::write(
        &canonical,
        "syntax = \"proto3\";\npackage helloworld;\nservice Greeter { rpc SayHello (HelloRequest) returns (HelloReply) {} }\nmessage HelloRequest { string name = 1; }\nmessage HelloReply { string message = 1; }\n",
    )
    .unwrap();
    for implementation in ["lab", "tonic-mt"] {
        let server = Server::start(implementation);
        let output = run(&[
            "load",
            "--insecure",
            "--proto",
            canonical.to_str().unwrap(),
            "--call",
            "helloworld.Greeter.SayHello",
            "-d",
            r#"{"name":"Joe"}"#,
            "-n",
            "20",
            &server.target(),
        ]);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(5), "{implementation}: {text}");
        assert!(text.contains("no call succeeded: all 20 failed"), "{text}");
        assert!(
            text.contains("wraps the scenario's message in field 1")
                && text.contains("--scenario complex_proto"),
            "{implementation}: {text}"
        );
    }
    // One success is enough for silence. (And more --cpus than connections is said, not
    // silently capped.)
    let output = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-n",
        "20",
        "--cpus",
        "4",
    ]);
    let text = stderr(&output);
    assert!(!text.contains("no call succeeded"), "{text}");
    assert!(text.contains("--cpus 4 runs 1 client thread(s)"), "{text}");
    assert_eq!(json_of_options(&server, &["--cpus", "4"])["CPUs"], 1);
    // `options.data` is the payload sent, as ghz lists it: the scenario's own without -d,
    // the user's with it.
    let options = json_of_options(&server, &[]);
    assert_eq!(options["data"]["request"]["name"], "a name", "{options}");
    let options = json_of_options(&server, &["-d", r#"{"request":{"name":"mine"}}"#]);
    assert_eq!(options["data"]["request"]["name"], "mine", "{options}");
}

fn json_of_options(server: &Server, extra: &[&str]) -> serde_json::Value {
    let target = server.target();
    let mut args = vec!["load", "--insecure", &target, "--scenario", "complex_proto"];
    args.extend_from_slice(&["-n", "5", "-O", "json"]);
    args.extend_from_slice(extra);
    json(&run(&args))["options"].clone()
}

/// `serve` on a port another process holds: one line, the reason said once, naming --port.
#[test]
fn serve_on_a_busy_port_is_one_line() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port().to_string();
    for implementation in ["lab", "tonic-mt"] {
        let output = run(&["serve", "--impl", implementation, "--port", &port]);
        let text = stderr(&output);
        assert!(!output.status.success(), "{implementation}: {text}");
        assert_eq!(text.trim().lines().count(), 1, "{implementation}: {text}");
        assert!(text.contains("--port"), "{implementation}: {text}");
        assert_eq!(
            text.matches("Address already in use").count(),
            1,
            "{implementation}: {text}"
        );
    }
}

/// ghz's count, total and rps describe one span: with a warmup, the measured window (its
/// calls and its time both leave the warmup out), so rps = count / total holds and matches
/// grpclab's measuredRps; wholeRun adds the warmup back. (Before, total held the warmup's time
/// while count left its calls out: ghz's rps matched neither.)
#[test]
fn count_total_and_rps_describe_the_measured_window() {
    let server = Server::start("lab");
    let output = run(&[
        "load",
        "--insecure",
        &server.target(),
        "--scenario",
        "complex_proto",
        "-z",
        "1s",
        "--warmup",
        "1s",
        "-c",
        "4",
        "-O",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    let count = report["count"].as_f64().unwrap();
    let total = report["total"].as_f64().unwrap();
    let rps = report["rps"].as_f64().unwrap();
    assert!(count > 0.0);
    assert!((rps - count / (total / 1e9)).abs() < 1e-6 * rps, "{report}");
    assert_eq!(report["total"], report["measuredWindow"]);
    assert_eq!(report["rps"], report["measuredRps"]);
    let whole = report["wholeRun"].as_f64().unwrap();
    assert!(
        whole >= total + 1e9,
        "the warmup's second: {whole} vs {total}"
    );
}

/// `grpclab completions SHELL` and `grpclab man` print what a shell and man(1) read, from the
/// same definitions as --help, so every flag is in them.
#[test]
fn completions_and_the_manual_page_come_from_the_flags() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = run(&["completions", shell]);
        assert!(output.status.success(), "{shell}: {}", stderr(&output));
        let script = String::from_utf8_lossy(&output.stdout);
        for flag in ["concurrency", "connections", "insecure", "sweep"] {
            assert!(script.contains(flag), "{shell} lacks {flag}");
        }
    }
    let output = run(&["completions", "tcsh"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("bash"));
    let output = run(&["man"]);
    assert!(output.status.success());
    let page = String::from_utf8_lossy(&output.stdout);
    assert!(page.contains(".TH grpclab 1"), "{page}");
    for command in ["load", "serve", "bench", "compare", "report"] {
        assert!(page.contains(command), "the page lacks {command}");
    }
}

/// `--threshold`: each verdict in the output; all met → exit 0; one failed → exit 3 with the
/// results written all the same (and one line saying which); a bad expression → exit 2
/// before anything runs.
#[test]
fn thresholds_set_the_exit_code_and_keep_the_results() {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let target = server.target();
    let run_with = |thresholds: &[&str], out: &str| {
        let out = dir.path().join(out);
        let mut args = vec![
            "load",
            "--insecure",
            &target,
            "--scenario",
            "complex_proto",
            "-n",
            "300",
            "-O",
            "json",
            "-o",
        ];
        let out_text = out.to_str().unwrap().to_owned();
        args.push(&out_text);
        for threshold in thresholds {
            args.extend(["--threshold", threshold]);
        }
        let output = run(&args);
        let json: Option<serde_json::Value> = std::fs::read(&out)
            .ok()
            .map(|bytes| serde_json::from_slice(&bytes).unwrap());
        (output, json)
    };
    let (output, json) = run_with(&["p99<=60s", "errors==0", "rps>=1"], "pass.json");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json = json.unwrap();
    let verdicts = json["thresholds"].as_array().unwrap();
    assert_eq!(verdicts.len(), 3);
    assert!(verdicts.iter().all(|v| v["passed"] == true), "{verdicts:?}");
    assert_eq!(verdicts[0]["expression"], "p99<=60s");

    let (output, json) = run_with(&["p99<=60s", "p50<1ns", "rps>=1e12"], "fail.json");
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let text = stderr(&output);
    assert!(
        text.contains("grpclab: 2 of 3 thresholds failed: p50<1ns ("),
        "{text}"
    );
    let json = json.expect("the results are written when a threshold fails");
    assert_eq!(json["count"], 300);
    assert_eq!(json["thresholds"][1]["passed"], false);

    // In the summary too.
    let output = run(&[
        "load",
        "--insecure",
        &target,
        "--scenario",
        "complex_proto",
        "-n",
        "50",
        "--threshold",
        "errors<=0.1%",
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout)
        .contains("Threshold errors<=0.1%:\tpassed (0.000 %)"));

    // A bad expression: one line, exit 2, nothing run.
    let (output, json) = run_with(&["p99 <= 10 hours"], "bad.json");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--threshold 'p99 <= 10 hours'"),
        "{}",
        stderr(&output)
    );
    assert!(json.is_none());
}

/// Every load result says what bound it, from what the client can see: an open loop the
/// server kept up with is bound by its offered rate; a closed loop, with the client's CPU to
/// spare, by the server or the network (load cannot see the server's CPU, and says so).
#[test]
fn a_load_result_says_what_bound_it() {
    let server = Server::start("lab");
    let target = server.target();
    let output = run(&[
        "load",
        "--insecure",
        &target,
        "--scenario",
        "complex_proto",
        "-z",
        "1s",
        "--rps",
        "500",
        "-O",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        json["boundBy"]["kind"], "offered_rate",
        "{:#}",
        json["boundBy"]
    );
    assert!(json["boundBy"]["evidence"]
        .as_str()
        .unwrap()
        .contains("kept up with the offered 500 req/s"));
    let output = run(&[
        "load",
        "--insecure",
        &target,
        "--scenario",
        "complex_proto",
        "-z",
        "1s",
        "-c",
        "2",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = String::from_utf8_lossy(&output.stdout);
    let line = summary
        .lines()
        .find(|line| line.trim_start().starts_with("Bound by:"))
        .unwrap_or_else(|| panic!("no Bound by line: {summary}"));
    assert!(line.contains("server/network"), "{line}");
    assert!(line.contains("not visible from the client"), "{line}");
}

/// ghz's command line without a verb (`grpclab --insecure ... HOST:PORT`) is told to put
/// `load` in front, in one line, exit 2; `--help` and a real verb are untouched.
#[test]
fn a_ghz_command_line_without_a_verb_is_told_to_use_load() {
    for args in [
        vec![
            "--insecure",
            "--proto",
            "x.proto",
            "--call",
            "a.B.C",
            "127.0.0.1:50051",
        ],
        vec!["127.0.0.1:50051"],
        vec!["-n", "10", "localhost:1"],
    ] {
        let output = run(&args);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {text}");
        assert_eq!(text.lines().count(), 1, "{args:?}: {text}");
        assert!(
            text.contains(&format!("grpclab load {}", args[0])),
            "{args:?}: {text}"
        );
    }
    let help = run(&["--help"]);
    assert!(help.status.success());
    let typo = run(&["laod"]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        !stderr(&typo).contains("grpclab load laod"),
        "{}",
        stderr(&typo)
    );
}

/// `grpclab load ... | head -1`: the reader leaves early, and grpclab ends quietly with exit 0
/// (as ghz does), not with "cannot write to standard output: Broken pipe".
#[test]
fn a_reader_that_leaves_early_ends_the_run_quietly() {
    use std::io::BufRead;
    let server = Server::start("lab");
    // 20,000 CSV rows (about 180 kB): more than a pipe holds, so the write meets the closed end.
    let mut child = grpclab()
        .args([
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "string_10B",
        ])
        .args(["-n", "20000", "-O", "csv"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped here: the pipe's read end is closed.
    let output = child.wait_with_output().unwrap();
    let text = stderr(&output);
    assert!(!first.is_empty());
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(!text.contains("error"), "{text}");
}

/// `-o` into a folder that does not exist (or a file that cannot be written) is refused before
/// anything is sent, in one line naming the path, exit 2.
#[test]
fn an_output_file_that_cannot_be_written_is_refused_before_the_run() {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let target = server.target();
    let load_into = |path: &std::path::Path| {
        run(&[
            "load",
            "--insecure",
            &target,
            "--scenario",
            "string_10B",
            "-n",
            "10",
            "-O",
            "json",
            "-o",
            path.to_str().unwrap(),
        ])
    };
    let missing = dir.path().join("no/such/folder/run.json");
    let before = server.stats()["calls"].as_u64().unwrap_or(0);
    let output = load_into(&missing);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(missing.to_str().unwrap()), "{text}");
    assert_eq!(
        server.stats()["calls"].as_u64().unwrap_or(0),
        before,
        "calls were sent"
    );
    // A writable path gets the results (the probe before the run leaves nothing behind).
    let fine = dir.path().join("fine.json");
    let output = load_into(&fine);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json_file(&fine)["count"], 10);
}

fn json_file(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `load --help` groups its flags by topic and ends with examples, as ghz's and ripgrep's
/// help do; `-h` lists only what a first run needs and points at `--help`.
#[test]
fn load_help_has_topics_examples_and_a_short_form() {
    let long = run(&["load", "--help"]);
    assert!(long.status.success());
    let long = String::from_utf8_lossy(&long.stdout).into_owned();
    for heading in [
        "What to call:",
        "What to send:",
        "Target and connections:",
        "Load shape:",
        "Streaming:",
        "TLS:",
        "Outputs:",
        "Distribution (several generators):",
        "Examples:",
    ] {
        assert!(long.contains(heading), "no '{heading}' in --help:\n{long}");
    }
    assert!(long.contains("--load-step-duration"));
    let short = run(&["load", "-h"]);
    assert!(short.status.success());
    let short = String::from_utf8_lossy(&short.stdout).into_owned();
    assert!(short.contains("--help lists every flag"), "{short}");
    assert!(!short.contains("--load-step-duration"), "{short}");
    assert!(
        short.lines().count() * 2 < long.lines().count(),
        "-h is {} lines, --help {}",
        short.lines().count(),
        long.lines().count()
    );
}
