//! `grpclab capacity` end to end against real servers: a single queue with a known service
//! time (lab, one thread, a handler that sleeps), where queueing theory says where the SLO
//! breaks; a client whose one stream is the limit; and inputs it must refuse.

mod common;

use common::{grpclab, Server};

/// The capacity searches load the machine; one at a time keeps their figures their own.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn capacity(target: &str, extra: &[&str]) -> std::process::Output {
    grpclab()
        .args([
            "capacity",
            "--insecure",
            target,
            "--scenario",
            "complex_proto",
        ])
        .args([
            "--probe-min",
            "1s",
            "--probe-max",
            "3s",
            "--warmup",
            "500ms",
        ])
        .args(extra)
        .output()
        .expect("run grpclab capacity")
}

fn report(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "{err}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Every thread's time on a CPU so far (ns), from /proc/PID/task/*/schedstat.
fn on_cpu_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the server's threads")
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|line| line.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_single_queue_with_a_known_service_time_saturates_where_theory_says() {
    let _turn = turn();
    // One I/O thread whose handler sleeps 10 ms: calls are served one at a time, so the
    // server is a single queue with a near-deterministic service time D, and an open loop's
    // arrivals are evenly spaced. Queueing theory (D/D/1): no wait below 1/D req/s, a
    // backlog that grows without bound above it — a cliff at 1/D whatever the latency SLO
    // beyond D.
    let server =
        Server::start_with(&["--impl", "lab", "--threads", "1", "--handler-delay", "10ms"]);
    let target = server.target();
    // D from its two parts, each measured on its own (not from the throughput of a loaded
    // server): the handler's 10 ms sleep as this machine sleeps it, and the server's own CPU
    // time per call (every thread's on-CPU nanoseconds from /proc/PID/task/*/schedstat over
    // calls sent one at a time).
    let slept = {
        let runs = 50;
        let start = std::time::Instant::now();
        for _ in 0..runs {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        start.elapsed().as_nanos() as f64 / f64::from(runs)
    };
    let pid = server.child.id();
    let cpu_before = on_cpu_ns(pid);
    let alone = grpclab()
        .args(["load", "--insecure", &target, "--scenario", "complex_proto"])
        .args(["-c", "1", "--connections", "1", "-n", "200", "-O", "json"])
        .output()
        .expect("run load");
    let cpu_per_call = (on_cpu_ns(pid) - cpu_before) as f64 / 200.0;
    assert!(
        alone.status.success(),
        "{}",
        String::from_utf8_lossy(&alone.stderr)
    );
    let service_ns = slept + cpu_per_call;
    let theory = 1e9 / service_ns;

    let pid = pid.to_string();
    let output = capacity(
        &target,
        &[
            "--slo",
            "p99<=50ms",
            "--slo",
            "errors<=1%",
            "-c",
            "50",
            "--server-pid",
            &pid,
            "-O",
            "json",
        ],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let found = report(&output);
    let capacity = found["capacity_rps"].as_f64().expect("a capacity");
    eprintln!(
        "capacity {capacity:.1} req/s, 1/D {theory:.1} req/s (asleep {:.3} ms, on CPU {:.3} ms per call)",
        slept / 1e6,
        cpu_per_call / 1e6
    );
    // The search answers with a bracket: the highest rate that met the SLO and the lowest
    // that did not, at most --precision (5 %) apart. The cliff at 1/D lies inside it, give or
    // take 3 %: a rate a little above 1/D still passes a 3 s probe (the backlog it builds is
    // short), and near 1/D a little jitter in D already queues.
    let failing = found["lowest_failing_rps"]
        .as_f64()
        .expect("a failing rate");
    assert!(
        capacity <= 1.03 * theory && failing >= 0.97 * theory,
        "the cliff at 1/D = {theory:.1} req/s (D = {:.3} ms: {:.3} ms asleep, {:.3} ms on CPU) is not in [{capacity:.1}, {failing:.1}) req/s, ±3 %: {found:#}",
        service_ns / 1e6,
        slept / 1e6,
        cpu_per_call / 1e6
    );
    assert_eq!(found["client_bound"], false, "{found:#}");
    assert!(
        found["stopped_because"]
            .as_str()
            .unwrap()
            .starts_with("converged"),
        "{found:#}"
    );
    // The bounds bracket the answer, and every probe is there with its verdicts.
    assert!(
        failing > capacity && failing <= capacity * 1.05 + 1.0,
        "{found:#}"
    );
    let probes = found["probes"].as_array().unwrap();
    assert!(probes.len() >= 3, "{found:#}");
    for probe in probes {
        assert_eq!(probe["verdicts"].as_array().unwrap().len(), 2, "{probe:#}");
        assert!(probe["calls"].as_u64().unwrap() > 0, "{probe:#}");
    }
    assert!(probes.iter().any(|p| p["met_slo"] == true));
    assert!(probes.iter().any(|p| p["met_slo"] == false));
    // The server's memory at the capacity point, read from its process.
    assert!(
        found["server_at_capacity"]["rss_bytes"].as_u64().unwrap() > 1 << 20,
        "{found:#}"
    );
    // Progress went to stderr, a line per probe.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("probe 1: "), "{stderr}");
}

#[test]
fn a_client_with_one_stream_is_reported_as_the_limit_not_the_server() {
    let _turn = turn();
    // lab answers in well under a millisecond; one stream cannot offer more than
    // 1 / (its round trip) req/s, and past that calls wait in the client, their latency
    // growing without bound. The SLO is wide (50 ms) so that a machine's tail noise (a p99 of
    // 14 ms at 500 req/s was seen on CI, debug build) never fails a probe the stream could
    // keep up with: only the queue behind the one stream can.
    let server = Server::start("lab");
    let output = capacity(
        &server.target(),
        &[
            "--slo",
            "p99<=50ms",
            "-c",
            "1",
            "--connections",
            "1",
            "--start-rps",
            "500",
            "-O",
            "json",
        ],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let found = report(&output);
    assert_eq!(found["client_bound"], true, "{found:#}");
    let why = found["stopped_because"].as_str().unwrap();
    assert!(
        why.contains("was the client's limit, not the server's"),
        "{why}"
    );
    // Whether the stream or the client's time around it ran out first, the figures say;
    // either way the limit is named the client's.
    assert!(
        why.contains("streams were busy") || why.contains("streams busy"),
        "{why}"
    );
    assert!(
        found["capacity_rps"].as_f64().unwrap() >= 500.0,
        "{found:#}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the client's limit ended the search"),
        "{stderr}"
    );
    // The text form says "at least" and why — from the client's limit itself, not from a
    // --max-rps cap: one stream, one connection, one client core.
    let output = capacity(
        &server.target(),
        &[
            "--slo",
            "p99<=50ms",
            "-c",
            "1",
            "--connections",
            "1",
            "--cpus",
            "1",
            "--start-rps",
            "500",
        ],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("Capacity:\tat least ")
            && text.contains("req/s (the client's limit was reached first)"),
        "{text}"
    );
}

#[test]
fn bad_searches_are_refused_in_one_line() {
    // Refusals are quick, but its server and processes would still be noise in the searches'
    // probes beside it.
    let _turn = turn();
    let server = Server::start("lab");
    let target = server.target();
    for (extra, says) in [
        (
            vec!["--slo", "rps>=5000"],
            "the throughput is what capacity finds",
        ),
        (vec!["--slo", "p99<<10ms"], "--slo 'p99<<10ms'"),
        (
            vec!["--slo", "p99<=10ms", "--rps", "100"],
            "capacity --rps: the search chooses the rates",
        ),
        (vec!["--slo", "p99<=10ms", "-z", "5s"], "capacity -z/-n"),
        (
            vec!["--slo", "p99<=10ms", "--threshold", "p99<=1ms"],
            "give the service level as --slo",
        ),
        (
            vec!["--slo", "p99<=10ms", "--precision", "2"],
            "not a fraction from 0.01 to 0.5",
        ),
        (
            vec!["--slo", "p99<=10ms", "--probe-min", "30s"],
            "is longer than --probe-max",
        ),
        (
            vec!["--slo", "p99<=10ms", "--server-pid", "4000000000"],
            "no such process",
        ),
        (
            vec!["--slo", "p99<=10ms", "-O", "csv"],
            "capacity writes summary or json",
        ),
    ] {
        let output = capacity(&target, &extra);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{extra:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // No --slo at all.
    let output = grpclab()
        .args([
            "capacity",
            "--insecure",
            &target,
            "--scenario",
            "complex_proto",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--slo"));
    // A server that is not there: one line, exit 2, nothing half-written.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = closed.local_addr().unwrap().to_string();
    drop(closed);
    let output = capacity(&address, &["--slo", "p99<=10ms"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("grpclab: the search stopped early"),
        "{stderr}"
    );
}
