//! The live view: `grpclab load` and `grpclab bench` on a terminal — a tmux pane here — show
//! req/s, the last second's p50 and p99 and errors by code while they run, then leave the
//! terminal as they found it and print the summary (or table); `--no-tui` keeps the one-line
//! progress bar.

mod common;

use common::Server;
use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let output = Command::new("tmux").args(args).output().expect("run tmux");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `load` in a detached tmux pane and returns every screen seen while it ran, and what
/// it printed on stdout.
fn run_in_tmux(session: &str, target: &str, extra: &str) -> (Vec<String>, String) {
    run_grpclab_in_tmux(
        session,
        &format!("load --insecure --scenario complex_proto {target} -z 4s -c 20 {extra}"),
    )
}

/// One pane at a time: the tests would otherwise start tmux servers on one socket at once.
static ONE_PANE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `grpclab ARGS` in a detached tmux pane: every screen seen while it ran, and its stdout.
///
/// Sessions are addressed as `=NAME`, an exact match: a bare `-t NAME` also matches any
/// session whose name *starts* with NAME, and the load test's clean-up of "grpclab-live" once
/// killed the bench test's "grpclab-live-bench" pane mid-run (the bench then never ended).
fn run_grpclab_in_tmux(session: &str, args: &str) -> (Vec<String>, String) {
    let _turn = ONE_PANE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (exact, pane) = (format!("={session}"), format!("={session}:"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stdout");
    let done = dir.path().join("done");
    let command = format!(
        "{} {args} > {}; touch {}; sleep 30",
        env!("CARGO_BIN_EXE_grpclab"),
        out.display(),
        done.display()
    );
    let _ = tmux(&["kill-session", "-t", &exact]);
    tmux(&[
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        "100",
        "-y",
        "32",
        &command,
    ]);
    let mut screens = Vec::new();
    // Watch the pane until the run ends (bounded: a hang fails here, not in CI's timeout,
    // showing the last screen).
    let started = Instant::now();
    while !done.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "the run did not end; its screen:\n{}",
            screens.last().map_or("(none)", String::as_str)
        );
        screens.push(tmux(&["capture-pane", "-p", "-t", &pane]));
        std::thread::sleep(Duration::from_millis(300));
    }
    screens.push(tmux(&["capture-pane", "-p", "-t", &pane]));
    let _ = tmux(&["kill-session", "-t", &exact]);
    (screens, std::fs::read_to_string(out).unwrap_or_default())
}

fn has_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn load_shows_a_live_view_on_a_terminal() {
    if !has_tmux() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs tmux (.ci/run)"
        );
        eprintln!("SKIPPED: no tmux here (apt-get install tmux)");
        return;
    }
    let server = Server::start("lab");
    let target = server.target();
    let (screens, stdout) = run_in_tmux("grpclab-load-live", &target, "");
    // The p99 shown (once a whole second has passed) is a number of milliseconds.
    let p99_of = |screen: &str| {
        screen
            .split("· p99 ")
            .nth(1)
            .and_then(|rest| rest.split(" ms").next())
            .and_then(|value| value.trim().parse::<f64>().ok())
    };
    let live = screens
        .iter()
        .find(|screen| screen.contains("req/s now") && p99_of(screen).is_some())
        .unwrap_or_else(|| {
            panic!(
                "no live view with req/s and a p99:\n{}",
                screens.join("\n----\n")
            )
        });
    assert!(p99_of(live).is_some_and(|ms| ms > 0.0), "{live}");
    assert!(live.contains("errors by code"), "{live}");
    assert!(live.contains("none"), "no call failed: {live}");
    // At the end the terminal is back (no live view on it) and the summary is on stdout.
    let last = screens.last().unwrap();
    assert!(
        !last.contains("req/s now"),
        "the alternate screen was left: {last}"
    );
    assert!(stdout.contains("Summary:"), "{stdout}");

    let (screens, stdout) = run_in_tmux("grpclab-load-plain", &target, "--no-tui");
    assert!(
        screens.iter().all(|screen| !screen.contains("req/s now")),
        "--no-tui shows no live view"
    );
    assert!(
        screens.iter().any(|screen| screen.contains("req/s")),
        "the progress bar instead"
    );
    assert!(stdout.contains("Summary:"), "{stdout}");
}

/// `grpclab bench` on a terminal: the live view shows the implementation being measured with
/// its req/s while it runs; afterwards the terminal is back and the table is on stdout.
#[test]
fn bench_shows_a_live_view_on_a_terminal() {
    if !has_tmux() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs tmux (.ci/run)"
        );
        eprintln!("SKIPPED: no tmux here (apt-get install tmux)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let args = format!(
        "bench lab --duration 3s --warmup 1s --connections 2 --concurrency 20 --results-dir {}",
        dir.path().display()
    );
    let (screens, stdout) = run_grpclab_in_tmux("grpclab-bench-live", &args);
    let live = screens
        .iter()
        .find(|screen| screen.contains("req/s now") && screen.contains("grpclab bench"))
        .unwrap_or_else(|| panic!("no live bench view:\n{}", screens.join("\n----\n")));
    assert!(live.contains("lab"), "{live}");
    let last = screens.last().unwrap();
    assert!(
        !last.contains("req/s now"),
        "the alternate screen was left: {last}"
    );
    assert!(
        stdout.lines().any(|line| line.starts_with("| lab ")),
        "the table on stdout: {stdout}"
    );
}
