//! `load --network SPEC --serve IMPL`: the run crosses a link grpclab emulates between a
//! server namespace and a client namespace (real sockets, real TCP over the link). The
//! delay shows in every call, lost packets are recovered by TCP and every call is accounted
//! for, and nothing is left behind: not after the run, not after a SIGKILL (the next run
//! sweeps it), and without the privileges the run refuses in one line.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::grpclab;
use serde_json::Value;

/// What every run here adds after `load --network SPEC`: lab started in the server's
/// namespace, the Greeter called in plaintext, no history kept (and string_10B unless the
/// run names its scenario).
const LAB_ACROSS: &[&str] = &["--serve", "lab", "--insecure", "--no-history"];

/// `grpclab load --network SPEC --serve lab ... -O json`: the report, stderr and exit code.
fn across(spec: &str, args: &[&str]) -> (Option<Value>, String, Option<i32>) {
    let out = grpclab()
        .args(["load", "--network", spec])
        .args(LAB_ACROSS)
        .args(["-O", "json"])
        .args(args)
        .args(if args.contains(&"--scenario") {
            &[][..]
        } else {
            &["--scenario", "string_10B"][..]
        })
        .output()
        .expect("run grpclab load");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        serde_json::from_slice(&out.stdout).ok(),
        stderr,
        out.status.code(),
    )
}

/// The namespaces of ours `ip netns list` shows, and every link `ip link` shows.
fn network_state() -> (Vec<String>, Vec<String>) {
    let list = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().expect("ip");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let namespaces = list(&["netns", "list"])
        .into_iter()
        .filter(|line| line.starts_with("grpclab-"))
        .collect();
    let links = list(&["-o", "link"])
        .into_iter()
        .map(|line| line.split(':').nth(1).unwrap_or_default().trim().to_owned())
        .collect();
    (namespaces, links)
}

fn namespaces_of(pid: u32) -> Vec<String> {
    network_state()
        .0
        .into_iter()
        .filter(|name| name.starts_with(&format!("grpclab-{pid}-")))
        .collect()
}

fn served(stderr: &str) -> Option<u64> {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("network: the server answered "))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

#[test]
fn a_20ms_link_makes_each_call_a_40ms_round_trip_on_both_transports() {
    let (_, links_before) = network_state();
    for transport in ["lab", "h2"] {
        let (report, stderr, code) = across(
            "delay=20ms",
            &["-c", "1", "-n", "30", "--transport", transport],
        );
        assert_eq!(code, Some(0), "{transport}: {stderr}");
        let report = report.expect("a JSON report");
        assert_eq!(report["count"], 30, "{transport}: {report}");
        assert_eq!(report["statusCodeDistribution"]["OK"], 30, "{transport}");
        // Each call crosses the link twice: two one-way delays.
        let p50 = report["latencyDistribution"]
            .as_array()
            .and_then(|rows| rows.iter().find(|row| row["percentage"] == 50))
            .and_then(|row| row["latency"].as_u64())
            .expect("p50");
        assert!(p50 >= 40_000_000, "{transport}: p50 {p50} ns");
        assert!(
            stderr.contains("network: delay=20ms, each direction"),
            "{stderr}"
        );
        assert_eq!(served(&stderr), Some(30), "{transport}: {stderr}");
        // The report says which network; its verdict sees the server's CPU and the link.
        assert_eq!(report["options"]["network"], "delay=20ms", "{transport}");
        let bound = &report["boundBy"];
        assert_eq!(bound["kind"], "concurrency", "{transport}: {bound}");
        let evidence = bound["evidence"].as_str().unwrap_or_default();
        assert!(
            evidence.contains("the link's round trip (40.0 ms) is"),
            "{transport}: {evidence}"
        );
    }
    // The run's devices went with its namespaces.
    let (_, links_after) = network_state();
    assert_eq!(links_after, links_before);
    // `lo`: the server beside the client, on loopback.
    let (report, stderr, code) = across("lo", &["-n", "5"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report.expect("a JSON report")["count"], 5);
    assert!(
        stderr.contains("network: lo (loopback), server lab at 127.0.0.1:"),
        "{stderr}"
    );
}

#[test]
fn with_one_percent_loss_every_call_is_accounted_for() {
    // One call at a time: every call its own packets, ~2,400 of them, ~24 lost.
    let (report, stderr, code) = across("delay=1ms,loss=1%", &["-c", "1", "-n", "600"]);
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.expect("a JSON report");
    // TCP recovers what the link loses: every call ends OK, each one the server answered.
    assert_eq!(report["count"], 600, "{report}");
    assert_eq!(report["statusCodeDistribution"]["OK"], 600, "{report}");
    assert_eq!(served(&stderr), Some(600), "{stderr}");
    let lost: u64 = stderr
        .lines()
        .filter_map(|line| line.split(" packets, ").nth(1))
        .filter_map(|rest| rest.split(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(lost > 0, "1 % of the packets lost, none seen: {stderr}");
}

/// The server's peak resident memory, MiB, as `load --network` says it.
fn peak_memory(stderr: &str) -> f64 {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("network: the server's memory peaked at "))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no peak memory line: {stderr}"))
}

/// Under 1 % loss lab's memory is bounded: the calls the losses slow down wait within its
/// per-connection budget, and none is left behind, so four times the calls peak no higher.
/// 10 kB requests on 20 streams: a body kept per call would be 45 MB more at 6,000.
#[test]
fn under_one_percent_loss_labs_memory_does_not_grow_with_the_calls() {
    let run = |calls: u64| {
        let (report, stderr, code) = across(
            "delay=1ms,loss=1%",
            &[
                "--scenario",
                "string_10kB",
                "-c",
                "20",
                "-n",
                &calls.to_string(),
            ],
        );
        assert_eq!(code, Some(0), "{calls}: {stderr}");
        let report = report.expect("a JSON report");
        assert_eq!(report["statusCodeDistribution"]["OK"], calls, "{report}");
        assert_eq!(served(&stderr), Some(calls), "{stderr}");
        assert!(!stderr.contains(", 0 lost,"), "no loss seen: {stderr}");
        peak_memory(&stderr)
    };
    let short = run(1_500);
    let long = run(6_000);
    assert!(
        long <= short + 8.0,
        "lab peaked at {long:.1} MiB after 6,000 calls under 1 % loss, {short:.1} MiB after 1,500"
    );
}

/// The link cut for 1 s a second into the run (every packet lost, both ways): the calls
/// caught in it fail by their deadline, the rest succeed, the connection recovers (calls
/// succeed again after the cut), and every call is accounted for. On both transports.
#[test]
fn a_cut_link_fails_calls_by_deadline_and_loses_none() {
    for transport in ["lab", "h2"] {
        let (report, stderr, code) = across(
            "delay=1ms,outage=1s+1s",
            &[
                "-c",
                "4",
                "-z",
                "4s",
                "-t",
                "300ms",
                "--transport",
                transport,
            ],
        );
        assert_eq!(code, Some(0), "{transport}: {stderr}");
        let report = report.expect("a JSON report");
        let statuses = report["statusCodeDistribution"].as_object().unwrap();
        let ok = statuses["OK"].as_u64().unwrap_or(0);
        let late = statuses
            .get("DeadlineExceeded")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        assert!(
            late > 0,
            "{transport}: no call was caught by the cut: {statuses:?}"
        );
        assert_eq!(
            statuses.len(),
            2,
            "{transport}: only OK and DeadlineExceeded: {statuses:?}"
        );
        assert_eq!(report["count"].as_u64(), Some(ok + late), "{transport}");
        assert_eq!(
            report["unaccounted"].as_u64().unwrap_or(0),
            0,
            "{transport}"
        );
        // The run's last whole second, after the cut, has calls that succeeded.
        let seconds = report["perSecond"].as_array().unwrap();
        let after = &seconds[3];
        assert!(
            after["count"].as_u64().unwrap_or(0) > after["errors"].as_u64().unwrap_or(0),
            "{transport}: no recovery: {after}"
        );
        // The server answered every call that succeeded, and no call the client did not send.
        let served = served(&stderr).expect("the server's count");
        assert!(
            served >= ok && served <= ok + late,
            "{transport}: served {served}"
        );
    }
}

#[test]
fn a_killed_runs_namespaces_and_server_are_gone_by_the_next_run() {
    let mut child = grpclab()
        .args(["load", "--network", "delay=1ms"])
        .args(LAB_ACROSS)
        .args(["-c", "2", "-z", "60s", "-O", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start grpclab load");
    let pid = child.id();
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    // Running: the network is up and the load started.
    let started = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|line| line.starts_with("network: delay=1ms"));
    assert!(started, "no network line");
    let server_namespace = format!("grpclab-{pid}-0-s");
    assert!(
        namespaces_of(pid).contains(&server_namespace),
        "{:?}",
        network_state().0
    );
    let pids = Command::new("ip")
        .args(["netns", "pids", &server_namespace])
        .output()
        .expect("ip netns pids");
    let server: Vec<u32> = String::from_utf8_lossy(&pids.stdout)
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .collect();
    assert_eq!(server.len(), 1, "one server in its namespace: {server:?}");
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    // The server dies with its starter (PR_SET_PDEATHSIG); its namespaces stay until the next
    // pair is made (here, or by a test beside this one).
    let gone = |pid: u32| !std::path::Path::new(&format!("/proc/{pid}")).exists();
    // Waited for (not timed): at most 30 s, then it is a failure.
    for _ in 0..1500 {
        if gone(server[0]) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        gone(server[0]),
        "the server {} outlived its starter",
        server[0]
    );
    let (_, stderr, code) = across("delay=1ms", &["-c", "1", "-n", "5"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(namespaces_of(pid).is_empty(), "{:?}", network_state().0);
}

#[test]
fn each_mistake_and_a_missing_privilege_is_one_line_and_exit_2() {
    let one_line = |out: std::process::Output, says: &str| {
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        // One line saying it (clap's own mistakes add its pointer to --help below it).
        let said: Vec<&str> = stderr
            .lines()
            .filter(|line| line.starts_with("error"))
            .collect();
        assert_eq!(said.len(), 1, "{stderr}");
        assert!(stderr.contains(says), "{says}: {stderr}");
    };
    let load = |args: &[&str]| {
        grpclab()
            .args([
                "load",
                "--insecure",
                "--no-history",
                "--scenario",
                "string_10B",
                "-n",
                "1",
            ])
            .args(args)
            .output()
            .expect("run grpclab")
    };
    one_line(
        load(&["--network", "delay=fast", "--serve", "lab"]),
        "for '--network <SPEC>': delay=fast: ",
    );
    one_line(
        load(&["--network", "loss=5", "--serve", "lab"]),
        "give a share of packets",
    );
    one_line(load(&["--network", "delay=1ms"]), "--serve");
    one_line(
        load(&["--network", "delay=1ms", "--serve", "lab", "127.0.0.1:1"]),
        "leave HOST:PORT (127.0.0.1:1) out",
    );
    // Without CAP_SYS_ADMIN and CAP_NET_ADMIN (dropped from the bounding set, so root has
    // neither): no namespace can be made.
    let exe = env!("CARGO_BIN_EXE_grpclab");
    let out = Command::new("setpriv")
        .args([
            "--bounding-set",
            "-sys_admin,-net_admin",
            "--inh-caps",
            "-sys_admin,-net_admin",
            exe,
        ])
        .args(["load", "--network", "delay=1ms"])
        .args(LAB_ACROSS)
        .args(["-n", "1"])
        .output()
        .expect("run setpriv");
    one_line(out, "needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)");
}
