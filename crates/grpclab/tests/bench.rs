//! `grpclab bench` end to end: real server processes under real limits, on loopback.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::leftovers::Marker;

const BIN: &str = env!("CARGO_BIN_EXE_grpclab");

/// Runs `grpclab bench` to its end, then checks it left no process or cgroup behind.
fn bench(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let marker = Marker::new();
    let mut command = bench_command(dir, args, env);
    marker.apply(&mut command);
    let output = command.output().expect("run grpclab bench");
    marker.assert_nothing_left();
    output
}

fn bench_command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("bench")
        .args(["--results-dir", dir.join("results").to_str().unwrap()])
        .args(args);
    // A clean slate: the test's own settings only.
    for (key, _) in std::env::vars() {
        if key.starts_with("GRPC_") {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().copied());
    command
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The single results folder a run created.
fn results_folder(dir: &Path) -> PathBuf {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(dir.join("results"))
        .expect("results/ exists")
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    folders.pop().unwrap()
}

fn record(folder: &Path, name: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(folder.join(format!("{name}.json"))).unwrap()).unwrap()
}

fn write_suite(dir: &Path, entries: &[(&str, String)]) -> PathBuf {
    let mut text = String::new();
    for (name, command) in entries {
        text.push_str(&format!(
            "[[implementation]]\nname = \"{name}\"\ncommand = '''{command}'''\n\n"
        ));
    }
    let path = dir.join("suite.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn serve(implementation: &str) -> String {
    format!("exec '{BIN}' serve --impl {implementation} --port {{port}} --threads {{threads}}")
}

const SHORT: &[(&str, &str)] = &[
    ("GRPC_BENCHMARK_DURATION", "2s"),
    ("GRPC_BENCHMARK_WARMUP", "1s"),
    ("GRPC_CLIENT_CONNECTIONS", "2"),
    ("GRPC_CLIENT_CONCURRENCY", "20"),
];

#[test]
fn a_two_entry_suite_writes_results_and_a_table_that_matches_them() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(
        dir.path(),
        &[("lab", serve("lab")), ("tonic-st", serve("tonic-st"))],
    );
    let output = bench(dir.path(), &["--suite", suite.to_str().unwrap()], SHORT);
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    for file in [
        "bench.params",
        "lab.json",
        "tonic-st.json",
        "table.txt",
        "table.md",
    ] {
        assert!(folder.join(file).is_file(), "{file} missing");
    }
    let params = std::fs::read_to_string(folder.join("bench.params")).unwrap();
    for line in [
        "GRPC_BENCHMARK_DURATION=2s",
        "GRPC_CLIENT_CONCURRENCY=20",
        "GRPCLAB_GIT_COMMIT=",
        "MACHINE_KERNEL=",
    ] {
        assert!(
            params.contains(line),
            "{line} not in bench.params:\n{params}"
        );
    }
    let table = std::fs::read_to_string(folder.join("table.md")).unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    for name in ["lab", "tonic-st"] {
        let json = record(&folder, name);
        assert_eq!(json["status"], "ok", "{name}: {json}");
        let rps = format!("{:.0}", json["load"]["measuredRps"].as_f64().unwrap());
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row for {name} in\n{table}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[2], rps, "{name}: table req/s vs JSON");
        assert_eq!(
            cells[9],
            json["load"]["errors"].to_string(),
            "{name}: errors"
        );
        assert!(
            json["load"]["hdrHistogram"]["latency"]
                .as_str()
                .unwrap()
                .len()
                > 10
        );
        assert!(json["usage"]["samples"].as_array().unwrap().len() >= 2);
        assert!(json["usage"]["cpu_percent"].as_f64().unwrap() > 0.0);
        // The server's own memory: part of its RSS (the rest is its code and libraries).
        let own = json["usage"]["memory_own_average_bytes"].as_u64().unwrap();
        let rss = json["usage"]["memory_average_bytes"].as_u64().unwrap();
        assert!(own > 0 && own < rss, "{name}: own {own} of {rss} bytes");
        assert_eq!(
            cells[11],
            format!("{} MiB", own_mib(own)),
            "{name}: own memory, table vs JSON"
        );
        assert!(
            json["allocations_per_call"].as_f64().unwrap() > 0.0,
            "built-in servers report allocations"
        );
        assert!(stdout.contains(name), "the table is printed");
        // grpc_bench's layout on stdout: its widths, req/s as in the record.
        let printed = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {name:<18} |")))
            .unwrap_or_else(|| panic!("no grpc_bench row for {name} in\n{stdout}"));
        let cells: Vec<&str> = printed.split('|').map(str::trim).collect();
        assert_eq!(cells[2], rps, "{name}: printed req/s vs JSON");
        assert_eq!(
            printed.len(),
            127,
            "as wide as grpc_bench's header: {printed}"
        );
    }
    // The rules and header exactly as grpc_bench's analyze step prints them.
    assert!(stdout.lines().any(|l| l == "-".repeat(128)), "{stdout}");
    assert!(
        stdout.lines().any(|l| l
            == "| name               |   req/s |   avg. latency |        90 % in |        95 % in |        99 % in | avg. cpu |   avg. memory |"),
        "{stdout}"
    );
}

/// A suite entry with a build: placeholders filled in build, command and env; the build runs
/// once for the same inputs; an entry whose toolchain is missing is one SKIPPED row, not a
/// failure.
#[test]
fn builds_are_cached_and_a_missing_toolchain_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let peer = dir.path().join("peer");
    std::fs::create_dir_all(&peer).unwrap();
    std::fs::write(peer.join("source.txt"), "v1").unwrap();
    let log = dir.path().join("builds.log");
    // The build copies a launcher into {build_dir}; the launcher refuses to start unless the
    // scenario's .proto is where {scenario_dir} says.
    std::fs::write(
        peer.join("launcher.sh"),
        format!(
            "#!/bin/sh\ntest -f \"$PEER_SCENARIO/helloworld.proto\" || exit 9\nexec '{BIN}' serve --impl lab --port \"$1\" --threads \"$2\"\n"
        ),
    )
    .unwrap();
    let build = format!(
        "echo built >> {} && cp launcher.sh {{build_dir}}/server && chmod +x {{build_dir}}/server",
        log.display()
    );
    let suite = dir.path().join("suite.toml");
    let mut text = String::new();
    text.push_str("[[implementation]]\nname = \"built\"\nworkdir = \"peer\"\n");
    text.push_str("requires = \"command -v sh\"\n");
    text.push_str(&format!("build = {}\n", toml_string(&build)));
    text.push_str("command = \"exec {build_dir}/server {port} {threads}\"\n");
    text.push_str("env = { PEER_SCENARIO = \"{scenario_dir}\" }\n\n");
    text.push_str("[[implementation]]\nname = \"missing\"\n");
    text.push_str("requires = \"command -v no-such-toolchain-xyz\"\n");
    text.push_str("install = \"apt-get install xyz\"\ncommand = \"exit 1\"\n");
    std::fs::write(&suite, text).unwrap();
    for run in 1..=2 {
        let output = bench(dir.path(), &["--suite", suite.to_str().unwrap()], SHORT);
        assert!(output.status.success(), "run {run}: {}", stderr(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains("| missing            | SKIPPED |"),
            "run {run}: {stdout}"
        );
        assert!(
            stdout.contains("missing SKIPPED: toolchain missing (`command -v no-such-toolchain-xyz` failed); install it with: apt-get install xyz"),
            "run {run}: {stdout}"
        );
    }
    let builds = std::fs::read_to_string(&log).unwrap();
    assert_eq!(builds.lines().count(), 1, "built once: {builds}");
    let mut folders: Vec<PathBuf> = std::fs::read_dir(dir.path().join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    folders.sort();
    assert_eq!(folders.len(), 2);
    for folder in folders {
        assert_eq!(record(&folder, "built")["status"], "ok");
        assert_eq!(record(&folder, "missing")["status"], "skipped");
    }
    // A changed source builds again.
    std::fs::write(peer.join("source.txt"), "v2").unwrap();
    let output = bench(
        dir.path(),
        &["--suite", suite.to_str().unwrap(), "built"],
        SHORT,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[test]
fn limits_are_applied_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    // 200 streams (SHORT's 20 are too few): with 20 a debug-build client on a busy machine
    // waits on round trips before the half core saturates, and the row is then, rightly,
    // bound by concurrency.
    let env = [
        SHORT,
        &[
            ("GRPC_SERVER_CPUS", "0.5"),
            ("GRPC_SERVER_RAM", "256m"),
            ("GRPC_CLIENT_CONCURRENCY", "200"),
        ],
    ]
    .concat();
    let output = bench(dir.path(), &["lab"], &env);
    assert!(output.status.success(), "{}", stderr(&output));
    let json = record(&results_folder(dir.path()), "lab");
    let limits = &json["limits"];
    match limits["mechanism"].as_str().unwrap() {
        "cgroup-v1" => assert_eq!(limits["cpu_quota"], "50000 100000"),
        "cgroup-v2" => assert_eq!(limits["cpu_quota"], "50000 100000"),
        other => {
            assert_eq!(other, "affinity-only");
            assert!(limits["note"].as_str().unwrap().contains("no cgroup"));
            // CI runs as root on a machine with writable cgroups: there, a fallback is a bug.
            assert!(
                std::env::var_os("CI").is_none(),
                "no writable cgroups on CI: {limits}"
            );
            eprintln!("SKIPPED (no writable cgroups here): the quota and memory limit checks");
            return;
        }
    }
    assert_eq!(limits["memory_limit_bytes"], 256u64 << 20);
    // Half a core saturates at once: the row says its quota bound it, throttled.
    let bound = &json["bound_by"];
    assert_eq!(bound["kind"], "server_cpu", "{json:#}");
    let evidence = bound["evidence"].as_str().unwrap();
    assert!(evidence.contains("against a quota of 0.5"), "{evidence}");
    assert!(evidence.contains("throttled in"), "{evidence}");
    // The server ran on its own core, the client on another.
    let server = limits["server_cpus_allowed"].as_str().unwrap().to_owned();
    let client = limits["client_cores"][0].as_u64().unwrap().to_string();
    assert_ne!(server, client, "server and client share a core");
}

/// Two streams cannot keep lab busy: neither side saturates, and the row says the closed
/// loop's concurrency set its figures, with Little's law's numbers.
#[test]
fn a_closed_loop_with_few_streams_is_bound_by_concurrency() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        SHORT,
        &[
            ("GRPC_CLIENT_CONCURRENCY", "2"),
            ("GRPC_CLIENT_CONNECTIONS", "1"),
        ],
    ]
    .concat();
    let output = bench(dir.path(), &["lab"], &env);
    assert!(output.status.success(), "{}", stderr(&output));
    let json = record(&results_folder(dir.path()), "lab");
    assert_eq!(
        json["bound_by"]["kind"], "concurrency",
        "{:#}",
        json["bound_by"]
    );
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("| bound by"), "{table}");
    assert!(table.contains("| concurrency"), "{table}");
    assert!(
        table.contains("lab bound by concurrency: 2 streams in a closed loop"),
        "{table}"
    );
}

/// `--threshold` on every row: a passing and a failing one, the verdicts under the table and
/// in the row's record, exit 3 with everything written; a bad expression is refused first.
#[test]
fn row_thresholds_set_the_exit_code_and_keep_the_results() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(
        dir.path(),
        &["lab", "--threshold", "rps>=1", "--threshold", "p99<=1ns"],
        SHORT,
    );
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("grpclab: 1 row thresholds failed: lab p99<=1ns"),
        "{}",
        stderr(&output)
    );
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("lab threshold rps>=1: passed"), "{table}");
    assert!(table.contains("lab threshold p99<=1ns: FAILED"), "{table}");
    let json = record(&results_folder(dir.path()), "lab");
    let verdicts = json["thresholds"].as_array().unwrap();
    assert_eq!(verdicts.len(), 2, "{json:#}");
    assert_eq!(verdicts[0]["passed"], true);
    assert_eq!(verdicts[1]["passed"], false);
    let output = bench(dir.path(), &["lab", "--threshold", "p99<<1ms"], SHORT);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--threshold 'p99<<1ms'"),
        "{}",
        stderr(&output)
    );
}

/// `--capacity SLO`: after its window each row searches its capacity; the answer is a table
/// column with a line saying why the search stopped, every probe is in the row's record, and
/// the report draws them. A throughput SLO is refused before anything runs.
#[test]
fn capacity_at_an_slo_is_searched_for_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(
        dir.path(),
        &[
            "lab",
            "--capacity",
            "p99<=50ms",
            "--capacity-probe-max",
            "2s",
        ],
        SHORT,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("|   capacity |"), "{table}");
    assert!(table.contains("lab capacity at p99<=50ms: "), "{table}");
    let folder = results_folder(dir.path());
    let json = record(&folder, "lab");
    let capacity = &json["capacity"];
    assert!(
        capacity["capacity_rps"].as_f64().unwrap() > 0.0,
        "{capacity:#}"
    );
    let probes = capacity["probes"].as_array().unwrap();
    assert!(probes.len() >= 2, "{capacity:#}");
    assert!(probes
        .iter()
        .all(|p| p["server"]["rss_bytes"].as_u64().unwrap() > 0));
    assert!(
        stderr(&output).contains("lab: capacity: probe 1: "),
        "{}",
        stderr(&output)
    );
    let page = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(
        page.contains("id=\"capacity\""),
        "the report has the capacity section"
    );
    let output = bench(dir.path(), &["lab", "--capacity", "rps>=5"], SHORT);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("the throughput is what the search finds"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn oversubscribed_cores_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let cores = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .to_string();
    let env = [SHORT, &[("GRPC_SERVER_CPUS", cores.as_str())]].concat();
    let output = bench(dir.path(), &["lab"], &env);
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    assert!(std::fs::read_to_string(folder.join("table.txt"))
        .unwrap()
        .contains("WARNING"));
    assert!(std::fs::read_to_string(folder.join("bench.params"))
        .unwrap()
        .contains("WARNING="));
}

#[test]
fn failing_servers_get_failed_rows_and_the_others_complete() {
    let dir = tempfile::tempdir().unwrap();
    let hog = "python3 -c 'import time; time.sleep(1.5); a = bytearray(300 << 20); time.sleep(60)'";
    let suite = write_suite(
        dir.path(),
        &[
            ("never-ready", "exec sleep 60".to_owned()),
            (
                "crashes",
                format!("(sleep 2.5; kill -9 $$) & exec '{BIN}' serve --impl lab --port {{port}}"),
            ),
            (
                "hog",
                format!("({hog}) & exec '{BIN}' serve --impl lab --port {{port}}"),
            ),
            ("good", serve("lab")),
        ],
    );
    let env = [
        SHORT,
        &[
            ("GRPC_BENCHMARK_DURATION", "4s"),
            ("GRPC_SERVER_RAM", "100m"),
        ],
    ]
    .concat();
    let output = bench(
        dir.path(),
        &[
            "--suite",
            suite.to_str().unwrap(),
            "--ready-timeout",
            "3s",
            "--stop-grace",
            "2s",
        ],
        &env,
    );
    assert_eq!(
        output.status.code(),
        Some(1),
        "a failed row makes the exit code 1: {}",
        stderr(&output)
    );
    let folder = results_folder(dir.path());
    let reason = |name: &str| {
        let json = record(&folder, name);
        assert_eq!(json["status"], "failed", "{name}: {json}");
        json["reason"].as_str().unwrap().to_owned()
    };
    assert!(
        reason("never-ready").contains("not ready within 3s"),
        "{}",
        reason("never-ready")
    );
    let crashed = reason("crashes");
    assert!(
        crashed.contains("exited during the run") && crashed.contains("SIGKILL"),
        "{crashed}"
    );
    let good = record(&folder, "good");
    assert_eq!(good["status"], "ok", "{good}");
    let hog = record(&folder, "hog");
    if hog["limits"]["mechanism"] == "affinity-only" {
        assert!(
            std::env::var_os("CI").is_none(),
            "no writable cgroups on CI: the OOM kill cannot be checked"
        );
        eprintln!("SKIPPED (no writable cgroups here): the OOM kill check");
    } else {
        assert!(reason("hog").contains("OOM"), "{}", reason("hog"));
    }
    let table = std::fs::read_to_string(folder.join("table.txt")).unwrap();
    assert!(table.contains("never-ready FAILED: not ready"), "{table}");
}

fn assert_config_error(env: &[(&str, &str)], args: &[&str], needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(dir.path(), args, env);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{env:?} {args:?}: {text}");
    for needle in needles {
        assert!(
            text.contains(needle),
            "{env:?} {args:?}: expected '{needle}' in {text}"
        );
    }
    assert!(
        !dir.path().join("results").exists(),
        "nothing runs on a bad configuration"
    );
}

#[test]
fn bad_configuration_values_name_their_variable() {
    assert_config_error(
        &[("GRPC_BENCHMARK_DURATION", "abc")],
        &[],
        &["GRPC_BENCHMARK_DURATION='abc'", "20s"],
    );
    assert_config_error(
        &[("GRPC_SERVER_RAM", "lots")],
        &[],
        &["GRPC_SERVER_RAM='lots'", "512m"],
    );
    assert_config_error(
        &[("GRPC_SERVER_CPUS", "-1")],
        &[],
        &["GRPC_SERVER_CPUS='-1'"],
    );
    assert_config_error(
        &[("GRPC_CLIENT_CONNECTIONS", "0")],
        &[],
        &["GRPC_CLIENT_CONNECTIONS='0'", "at least 1"],
    );
    assert_config_error(
        &[("GRPC_CLIENT_QPS", "fast")],
        &[],
        &["GRPC_CLIENT_QPS='fast'"],
    );
    assert_config_error(
        &[("GRPC_REQUEST_SCENARIO", "nope")],
        &[],
        &["GRPC_REQUEST_SCENARIO='nope'", "complex_proto"],
    );
    assert_config_error(&[], &["--duration", "1x"], &["--duration='1x'"]);
    assert_config_error(
        &[],
        &["nginx"],
        &["unknown implementation 'nginx'", "tonic-mt"],
    );
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("bad.toml");
    std::fs::write(&suite, "[[implementation]]\nname = \"x\"\n").unwrap();
    assert_config_error(
        &[],
        &["--suite", suite.to_str().unwrap()],
        &["bad.toml", "command"],
    );
    // A placeholder that is not one is refused before anything starts, naming the field.
    std::fs::write(
        &suite,
        "[[implementation]]\nname = \"x\"\ncommand = \"exec {grpclab} serve --port {prot}\"\n",
    )
    .unwrap();
    assert_config_error(
        &[],
        &["--suite", suite.to_str().unwrap()],
        &["bad.toml", "command names {prot}", "{port}"],
    );
    std::fs::write(
        &suite,
        "[[implementation]]\nname = \"x\"\ncommand = \"x\"\nready = \"http\"\n",
    )
    .unwrap();
    assert_config_error(
        &[],
        &["--suite", suite.to_str().unwrap()],
        &["bad.toml", "ready", "rpc", "port"],
    );
}

#[test]
fn ctrl_c_keeps_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let marker = Marker::new();
    let mut command = Command::new(BIN);
    marker.apply(&mut command);
    command
        .args([
            "bench",
            "lab",
            "tonic-st",
            "--results-dir",
            dir.path().join("results").to_str().unwrap(),
        ])
        .envs([
            ("GRPC_BENCHMARK_DURATION", "60s"),
            ("GRPC_BENCHMARK_WARMUP", "0s"),
            ("GRPC_CLIENT_CONCURRENCY", "20"),
            ("GRPC_CLIENT_CONNECTIONS", "2"),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    marker.assert_nothing_left();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    let lab = record(&folder, "lab");
    assert!(
        lab["reason"].as_str().unwrap().contains("interrupted"),
        "{lab}"
    );
    assert!(
        lab["load"]["count"].as_u64().unwrap() > 0,
        "the partial window is kept"
    );
    assert!(
        !folder.join("tonic-st.json").exists(),
        "the run stops after Ctrl-C"
    );
    assert!(std::fs::read_to_string(folder.join("table.txt"))
        .unwrap()
        .contains("lab"));
}

#[test]
fn a_sweep_runs_every_combination_and_writes_the_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        SHORT,
        &[
            ("GRPC_BENCHMARK_DURATION", "1s"),
            ("GRPC_BENCHMARK_WARMUP", "0s"),
        ],
    ]
    .concat();
    let output = bench(
        dir.path(),
        &[
            "lab",
            "--sweep",
            "concurrency=10,20",
            "--sweep",
            "decode=inline,pool",
        ],
        &env,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    let matrix: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("sweep.json")).unwrap()).unwrap();
    let cells = matrix["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    let markdown = std::fs::read_to_string(folder.join("sweep.md")).unwrap();
    assert!(
        markdown.contains("| concurrency \\ decode | inline | pool |"),
        "{markdown}"
    );
    for (concurrency, decode) in [
        ("10", "inline"),
        ("10", "pool"),
        ("20", "inline"),
        ("20", "pool"),
    ] {
        let name = format!("lab concurrency={concurrency} decode={decode}");
        let json = record(&folder, &name.replace([' ', '='], "_"));
        assert_eq!(json["status"], "ok", "{name}");
        assert!(json["command"]
            .as_str()
            .unwrap()
            .contains(&format!("--decode '{decode}'")));
        assert_eq!(
            json["load"]["options"]["concurrency"]
                .as_u64()
                .unwrap()
                .to_string(),
            concurrency
        );
        // The matrix shows the run's own req/s in its row.
        let rps = format!("{:.0}", json["load"]["measuredRps"].as_f64().unwrap());
        let row = markdown
            .lines()
            .find(|l| l.starts_with(&format!("| {concurrency} |")))
            .unwrap();
        assert!(row.contains(&rps), "{row} lacks {rps}");
    }
    let params = std::fs::read_to_string(folder.join("bench.params")).unwrap();
    assert!(params.contains("SWEEP=concurrency=10,20"), "{params}");
}

#[test]
fn bad_sweeps_are_refused() {
    assert_config_error(
        &[],
        &["--sweep", "concurrency"],
        &["--sweep 'concurrency'", "KEY=V1,V2"],
    );
    assert_config_error(
        &[],
        &["--sweep", "concurrency=ten"],
        &["--sweep concurrency", "'ten'"],
    );
}

#[test]
fn cpu_profiles_come_with_a_flamegraph_or_say_why_not() {
    let env = [
        SHORT,
        &[
            ("GRPC_BENCHMARK_DURATION", "2s"),
            ("GRPC_BENCHMARK_WARMUP", "0s"),
        ],
    ]
    .concat();
    // With perf as installed: a flamegraph and the top functions, or a note saying why not.
    let dir = tempfile::tempdir().unwrap();
    let output = bench(dir.path(), &["lab", "--profile", "cpu"], &env);
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    let json = record(&folder, "lab");
    if let Some(note) = json["profile_note"].as_str() {
        assert!(note.contains("perf"), "{note}");
    } else {
        let profile = &json["cpu_profile"];
        let svg =
            std::fs::read_to_string(folder.join(profile["flamegraph"].as_str().unwrap())).unwrap();
        assert!(svg.contains("<svg"), "not an SVG");
        let top = std::fs::read_to_string(folder.join("lab.top.txt")).unwrap();
        assert!(top.contains("self %"), "{top}");
        assert!(!profile["top"].as_array().unwrap().is_empty());
    }
    // Without perf: one clear line, and the run still completes.
    let dir = tempfile::tempdir().unwrap();
    let without = [env.as_slice(), &[("GRPCLAB_PERF", "/nonexistent/perf")]].concat();
    let output = bench(dir.path(), &["lab", "--profile", "cpu"], &without);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("CPU profile skipped: '/nonexistent/perf' not found"),
        "{}",
        stderr(&output)
    );
    let json = record(&results_folder(dir.path()), "lab");
    assert_eq!(json["status"], "ok");
    assert!(json["profile_note"]
        .as_str()
        .unwrap()
        .contains("apt-get install linux-perf"));
}

/// `--profile cpu` on tonic-mt (built here with frame pointers, like everything of the
/// workspace) unwinds through the h2 crate and prost: a heavy call path at least 4 frames deep
/// runs through h2 (or hyper, tonic), and the flamegraph holds h2's and prost's (or tonic's
/// codec's) frames — the stacks a user profiling a tonic server needs, where lab's fast path
/// has neither.
#[test]
fn cpu_profiles_of_tonic_unwind_through_h2_and_prost() {
    let env = [
        SHORT,
        &[
            ("GRPC_BENCHMARK_DURATION", "2s"),
            ("GRPC_BENCHMARK_WARMUP", "1s"),
        ],
    ]
    .concat();
    let dir = tempfile::tempdir().unwrap();
    let output = bench(dir.path(), &["tonic-mt", "--profile", "cpu"], &env);
    assert!(output.status.success(), "{}", stderr(&output));
    let json = record(&results_folder(dir.path()), "tonic-mt");
    let profile = &json["cpu_profile"];
    if profile.is_null() {
        let note = json["profile_note"].as_str().unwrap_or_default();
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs perf and runs as root: {note}"
        );
        eprintln!("SKIPPED: no CPU profile here: {note}");
        return;
    }
    let paths = profile["top_paths"].as_array().unwrap();
    let frames_of = |path: &serde_json::Value| -> String {
        path["frames"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(";")
    };
    let through_h2 = paths.iter().any(|path| {
        let text = frames_of(path);
        text.matches(';').count() >= 3
            && ["h2::", "hyper::", "tonic::"]
                .iter()
                .any(|stack| text.contains(stack))
    });
    assert!(
        through_h2,
        "no deep path through h2, hyper or tonic: {paths:#?}"
    );
    let folder = results_folder(dir.path());
    let svg =
        std::fs::read_to_string(folder.join(profile["flamegraph"].as_str().unwrap())).unwrap();
    assert!(svg.contains("h2::proto"), "no h2 frame in the flamegraph");
    // Every sampled stack is in the flamegraph (the top lists rank only the heaviest): a
    // frame of prost or tonic's codec is among them.
    let folder = results_folder(dir.path());
    let svg =
        std::fs::read_to_string(folder.join(profile["flamegraph"].as_str().unwrap())).unwrap();
    assert!(
        svg.contains("prost::") || svg.contains("tonic::codec"),
        "no prost or tonic codec frame in the flamegraph"
    );
}

/// `--profile cpu` on lab (built with frame pointers) has real call stacks: a call path at
/// least 4 user-space frames deep runs through the HTTP/2 engine's connection loop into the
/// gRPC layer; the loop's total share is far above its self share; the stacks are not flat.
/// The flamegraph is kept under target/report-screenshots as a picture for a person.
#[test]
fn cpu_profiles_have_call_stacks_through_the_engine() {
    let env = [
        SHORT,
        &[
            ("GRPC_BENCHMARK_DURATION", "2s"),
            ("GRPC_BENCHMARK_WARMUP", "1s"),
        ],
    ]
    .concat();
    let dir = tempfile::tempdir().unwrap();
    let output = bench(dir.path(), &["lab", "--profile", "cpu"], &env);
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    let json = record(&folder, "lab");
    let profile = &json["cpu_profile"];
    if profile.is_null() {
        let note = json["profile_note"].as_str().unwrap_or_default();
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs perf and runs as root: {note}"
        );
        eprintln!("SKIPPED: no CPU profile here: {note}");
        return;
    }
    assert_eq!(profile["call_graph"], "fp");
    let paths = profile["top_paths"].as_array().unwrap();
    let through_engine = paths.iter().any(|path| {
        let frames: Vec<&str> = path["frames"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f.as_str())
            .collect();
        let text = frames.join(";");
        frames.len() >= 4
            && ["serve_connection", "on_bytes", "on_header_block"]
                .iter()
                .any(|engine| text.contains(engine))
            && ["decode", "encode", "echo_reply", "varint", "fast_codec"]
                .iter()
                .any(|codec| text.contains(codec))
    });
    assert!(
        through_engine,
        "no deep path through the engine: {paths:#?}"
    );
    let by_total = profile["top_total"].as_array().unwrap();
    // The engine's connection loop: serve_connection, or on_bytes where a release build
    // inlines the loop into its task.
    let connection_loop = by_total
        .iter()
        .find(|share| {
            let function = share["function"].as_str().unwrap_or("");
            function.contains("serve_connection") || function.contains("Connection<S>::on_bytes")
        })
        .unwrap_or_else(|| panic!("the connection loop by total: {by_total:#?}"));
    let (own, total) = (
        connection_loop["self_percent"].as_f64().unwrap(),
        connection_loop["total_percent"].as_f64().unwrap(),
    );
    assert!(
        total > 20.0 && total > 5.0 * own,
        "self {own} %, total {total} %"
    );
    assert!(
        profile["flat_percent"].as_f64().unwrap() < 50.0 && profile["hint"].is_null(),
        "{profile}"
    );
    let top = std::fs::read_to_string(folder.join("lab.top.txt")).unwrap();
    assert!(top.contains("heaviest call paths"), "{top}");
    // The flamegraph, as a person would open it.
    let svg = folder.join(profile["flamegraph"].as_str().unwrap());
    let shots =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("flamegraph.png");
    let browser = ["chromium", "chromium-browser"].into_iter().find(|b| {
        std::process::Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    match browser {
        Some(browser) => {
            let taken = std::process::Command::new(browser)
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                ])
                .arg("--window-size=1200,900")
                .arg(format!("--screenshot={}", shot.display()))
                .arg(&svg)
                .output()
                .unwrap();
            assert!(taken.status.success());
            assert!(std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000));
        }
        None => assert!(std::env::var_os("CI").is_none(), "CI installs chromium"),
    }
}

#[test]
fn alloc_profiles_name_the_sites_or_say_why_not() {
    let env = [
        SHORT,
        &[
            ("GRPC_BENCHMARK_DURATION", "2s"),
            ("GRPC_BENCHMARK_WARMUP", "1s"),
        ],
    ]
    .concat();
    let dir = tempfile::tempdir().unwrap();
    let output = bench(dir.path(), &["tonic-mt", "lab", "--profile", "alloc"], &env);
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = results_folder(dir.path());

    // tonic allocates per call, and decoding the request (prost) is one of the sites.
    let tonic = record(&folder, "tonic-mt");
    let profile = &tonic["alloc_profile"];
    assert!(profile.is_object(), "no profile: {tonic}");
    let per_call = profile["allocations"].as_f64().unwrap() / profile["calls"].as_f64().unwrap();
    assert!(per_call > 5.0, "tonic-mt allocates per call: {profile}");
    // Equal up to the last bit of a float division done in another order.
    let column = tonic["allocations_per_call"].as_f64().unwrap();
    assert!(
        (column - per_call).abs() <= 1e-9 * per_call,
        "the table's column comes from the profile under --profile alloc: {column} vs {per_call}"
    );
    let by_count = profile["by_count"].as_array().unwrap();
    assert!(!by_count.is_empty());
    let mentions_prost = by_count.iter().any(|site| {
        site["site"].as_str().unwrap().contains("prost")
            || site["called_from"]
                .as_array()
                .unwrap()
                .iter()
                .any(|frame| frame.as_str().unwrap().contains("prost"))
    });
    assert!(
        mentions_prost,
        "prost decoding allocates in tonic: {by_count:?}"
    );
    let sites = std::fs::read_to_string(folder.join("tonic-mt.alloc-sites.txt")).unwrap();
    assert!(
        sites.contains("allocations and") && sites.contains("by bytes:"),
        "{sites}"
    );
    let dhat: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("tonic-mt.dhat.json")).unwrap()).unwrap();
    assert_eq!(dhat["dhatFileVersion"], 2);

    // lab's steady state allocates (almost) nothing per call.
    let lab = record(&folder, "lab");
    let lab_profile = &lab["alloc_profile"];
    let lab_per_call =
        lab_profile["allocations"].as_f64().unwrap() / lab_profile["calls"].as_f64().unwrap();
    assert!(lab_per_call < 1.0, "lab: {lab_profile}");

    // A server without grpclab's admin service: one line, and the run completes.
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        "[[implementation]]\nname = \"plain-tcp\"\ncommand = 'exec python3 -m http.server --bind 127.0.0.1 {port}'\nready = \"port\"\n",
    )
    .unwrap();
    let output = bench(
        dir.path(),
        &["--suite", suite.to_str().unwrap(), "--profile", "alloc"],
        &env,
    );
    let json = record(&results_folder(dir.path()), "plain-tcp");
    let note = json["profile_note"].as_str().unwrap_or_default().to_owned();
    assert!(
        note.contains("allocation profile skipped") && note.contains("built-in servers"),
        "{note}\n{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains("allocation profile skipped"));
}

/// A server that writes bytes that are not UTF-8 on stderr
/// keeps running (the reader never closes the pipe), and a child that left the server's
/// process group (setsid) does not outlive the run (`bench` checks no marked process is left).
#[test]
fn invalid_utf8_on_stderr_and_a_setsid_child_neither_kill_nor_outlive_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(
        dir.path(),
        &[
            (
                "binary-stderr",
                format!(
                    "printf 'x\\377\\n' >&2; sleep 0.3; (while :; do printf 'y\\376\\n' >&2; sleep 0.05; done) & {}",
                    serve("lab")
                ),
            ),
            (
                "setsid-child",
                format!("setsid sleep 1002 & {}", serve("lab")),
            ),
        ],
    );
    let output = bench(dir.path(), &["--suite", suite.to_str().unwrap()], SHORT);
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    for name in ["binary-stderr", "setsid-child"] {
        let json = record(&folder, name);
        assert_eq!(json["status"], "ok", "{name}: {json}");
    }
}

/// Helpers that burn CPU in children living 0.2 s each are counted
/// (the cgroup's own counter, or reaped children's time), not lost between samples.
#[test]
fn cpu_of_short_lived_children_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let burner = "sh -c 'while :; do timeout 0.2 sh -c \"while :; do :; done\"; done'";
    let suite = write_suite(
        dir.path(),
        &[("burner", format!("{burner} & {}", serve("lab")))],
    );
    // A light open-loop load: the server itself needs a few percent of a core.
    let env = [SHORT, &[("GRPC_CLIENT_QPS", "200")]].concat();
    let output = bench(dir.path(), &["--suite", suite.to_str().unwrap()], &env);
    assert!(output.status.success(), "{}", stderr(&output));
    let json = record(&results_folder(dir.path()), "burner");
    let cpu = json["usage"]["cpu_percent"].as_f64().unwrap();
    // Alone on the machine the burner takes most of its one-core quota; with other tests
    // running beside it, about half. Before reaped children were counted it read ~3 %.
    assert!(
        cpu > 25.0,
        "the burner's children use much of a core: {cpu} %"
    );
}

/// A suite's relative commands and paths resolve against its own
/// folder, wherever `grpclab bench` runs from.
#[test]
fn a_suite_runs_from_any_folder() {
    let dir = tempfile::tempdir().unwrap();
    let srv = dir.path().join("srv");
    std::fs::create_dir(&srv).unwrap();
    std::fs::write(
        srv.join("server.sh"),
        format!(
            "#!/bin/sh\n{}\n",
            serve("lab")
                .replace("{port}", "$1")
                .replace("{threads}", "1")
        ),
    )
    .unwrap();
    std::fs::write(
        srv.join("suite.toml"),
        "[[implementation]]\nname = \"script\"\ncommand = \"exec sh ./server.sh {port}\"\n",
    )
    .unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let marker = Marker::new();
    let mut command = bench_command(dir.path(), &["--suite", "../srv/suite.toml"], SHORT);
    command.current_dir(&elsewhere);
    marker.apply(&mut command);
    let output = command.output().unwrap();
    marker.assert_nothing_left();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        record(&results_folder(dir.path()), "script")["status"],
        "ok"
    );
}

/// `grpclab bench … 2>&1 | head -1` — a closed output ends the run
/// like Ctrl-C: no panic, the results so far are written.
#[test]
fn a_closed_output_ends_the_run_cleanly_and_keeps_results() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let marker = Marker::new();
    let mut command = bench_command(dir.path(), &["lab", "tonic-st"], SHORT);
    marker.apply(&mut command);
    // One pipe for stdout and stderr, as `2>&1 | head -1` makes.
    let (reader, writer) = std::io::pipe().unwrap();
    command.stdout(writer.try_clone().unwrap()).stderr(writer);
    let mut child = command.spawn().unwrap();
    drop(command);
    let mut first = String::new();
    std::io::BufReader::new(reader)
        .read_line(&mut first)
        .unwrap();
    // The reader is gone: every later write fails with EPIPE.
    let status = child.wait().unwrap();
    marker.assert_nothing_left();
    assert!(!first.is_empty());
    assert_eq!(
        status.code(),
        Some(1),
        "ended as interrupted, not a panic (101)"
    );
    let folder = results_folder(dir.path());
    assert!(folder.join("bench.params").is_file());
    assert!(folder.join("table.txt").is_file(), "results are written");
    assert!(!folder.join("tonic-st.json").exists(), "the run stopped");
}

/// `bench --tls`: the built-in servers run over TLS with a pair made in the results folder
/// (the load verifies it, so a server that fell back to plaintext could not pass), their
/// admin counters are read over TLS, and a suite entry without `tls` arguments is SKIPPED.
#[test]
fn a_whole_table_runs_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(dir.path(), &["lab", "tonic-st", "--tls"], SHORT);
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    assert!(folder.join("tls/cert.pem").is_file());
    let params = std::fs::read_to_string(folder.join("bench.params")).unwrap();
    assert!(params.contains("GRPCLAB_TLS=on"), "{params}");
    for name in ["lab", "tonic-st"] {
        let json = record(&folder, name);
        assert_eq!(json["status"], "ok", "{name}: {json}");
        assert_eq!(json["load"]["errors"], 0, "{name}: {json}");
        assert!(json["command"].as_str().unwrap().contains("--tls-cert"));
        // The admin RPC answered over TLS: allocations per call are there.
        assert!(
            json["allocations_per_call"].as_f64().is_some(),
            "{name}: no allocation counters read over TLS: {json}"
        );
    }

    let plain_only = tempfile::tempdir().unwrap();
    let suite = write_suite(plain_only.path(), &[("plain", serve("lab"))]);
    // An entry that says why it cannot serve TLS is SKIPPED with that reason.
    let mut text = std::fs::read_to_string(&suite).unwrap();
    text.push_str(&format!(
        "[[implementation]]\nname = \"no_alpn\"\ncommand = '''{}'''\nno_tls = \"its TLS stack has no ALPN\"\n",
        serve("lab")
    ));
    std::fs::write(&suite, text).unwrap();
    let output = bench(
        plain_only.path(),
        &["--suite", suite.to_str().unwrap(), "--tls"],
        SHORT,
    );
    let folder = results_folder(plain_only.path());
    let json = record(&folder, "plain");
    assert_eq!(json["status"], "skipped", "{json} {}", stderr(&output));
    assert!(json["reason"].as_str().unwrap().contains("tls ="), "{json}");
    let json = record(&folder, "no_alpn");
    assert_eq!(json["status"], "skipped", "{json}");
    assert!(
        json["reason"]
            .as_str()
            .unwrap()
            .contains("its TLS stack has no ALPN"),
        "{json}"
    );
}

/// `bench --workload`: every row sends the mix (one method twice, small and large, each
/// under its name), with one seed for all rows; each row's JSON gives every entry's calls,
/// which add up to the row's count; a threshold on one entry is judged on its own calls; the
/// parameters name the mix, so stored runs are set only against the same mix. A workload
/// entry that is not the scenario's method, or holds a template, is one line before any
/// server starts.
#[test]
fn a_workload_runs_on_every_row_with_each_entrys_figures() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(
        dir.path(),
        &[("lab", serve("lab")), ("tonic-st", serve("tonic-st"))],
    );
    let workload = dir.path().join("sizes.toml");
    std::fs::write(
        &workload,
        r#"
seed = 3
[[calls]]
call = "helloworld.Greeter.SayHello"
name = "small"
weight = 3
data = { request = { name = "s" } }

[[calls]]
call = "helloworld.Greeter.SayHello"
name = "large"
data = { request = { name = "llllllllllllllllllllllllllllllllllllllllllllllllllllllllllll" } }
metadata = { "x-size" = "large" }
"#,
    )
    .unwrap();
    let mut env = SHORT.to_vec();
    env.push(("GRPC_REQUEST_SCENARIO", "string_10B"));
    let output = bench(
        dir.path(),
        &[
            "--suite",
            suite.to_str().unwrap(),
            "--workload",
            workload.to_str().unwrap(),
            "--threshold",
            "large:errors==0",
            "--threshold",
            "small:p50<=1ns",
        ],
        &env,
    );
    // The impossible p50 fails every row: exit 3, everything written.
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    for name in ["lab", "tonic-st"] {
        let row = record(&folder, name);
        let load = &row["load"];
        assert_eq!(load["mix"]["seed"], 3, "{name}");
        let entries = load["mix"]["methods"].as_array().unwrap();
        let names: Vec<&str> = entries
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["small", "large"], "{name}");
        let calls: u64 = entries.iter().map(|e| e["count"].as_u64().unwrap()).sum();
        assert_eq!(calls, load["count"].as_u64().unwrap(), "{name}");
        assert!(
            entries.iter().all(|e| e["count"].as_u64().unwrap() > 0),
            "{name}"
        );
        let verdicts = row["thresholds"].as_array().unwrap();
        assert_eq!(verdicts[0]["passed"], true, "{name}: {verdicts:?}");
        assert_eq!(verdicts[1]["passed"], false, "{name}: {verdicts:?}");
    }
    // The page gives each row's entries their own rows and p99 bars.
    let page = std::fs::read_to_string(folder.join("report.html")).unwrap();
    for text in [
        "Workload entries",
        "lab · small",
        "tonic-st · large",
        "scenario string_10B with a --workload mix",
    ] {
        assert!(page.contains(text), "{text} missing from the page");
    }
    let params = std::fs::read_to_string(folder.join("bench.params")).unwrap();
    assert!(
        params.contains(
            "GRPCLAB_WORKLOAD=seed 3: small=3 (/helloworld.Greeter/SayHello, 10 B), large=1"
        ),
        "{params}"
    );

    for (text, says) in [
        (
            "[[calls]]\ncall = \"helloworld.Greeter.SayGoodbye\"\n",
            "not in GRPC_REQUEST_SCENARIO='string_10B'",
        ),
        (
            "[[calls]]\ncall = \"helloworld.Greeter.SayHello\"\ndata = { request = { name = \"{{.RequestNumber}}\" } }\n",
            "templates ('{{') are load's",
        ),
        (
            // A flow step's error names the file, as load's do.
            "[[flows]]\nname = \"f\"\n[[flows.steps]]\nname = \"s\"\ncall = \"helloworld.Greeter.SayGoodbye\"\n",
            &format!("--workload {} line 4: step 's'", workload.display()),
        ),
    ] {
        std::fs::write(&workload, text).unwrap();
        let output = bench(
            dir.path(),
            &["--suite", suite.to_str().unwrap(), "--workload", workload.to_str().unwrap()],
            &env,
        );
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        let stderr = stderr(&output);
        assert!(stderr.contains(says), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}

/// `bench --workload` with a flow: every row runs it, each step carrying the value the step
/// before took from its reply (the echo of "a" comes back as the next step's "a-b", which
/// the last step checks), with a plain call beside it; each row's JSON has the flow and its
/// steps, and no run missed its expectation. Thresholds judge a flow's runs (`flow:NAME`)
/// and a step's calls (`step:NAME`) on every row.
#[test]
fn a_workload_with_a_flow_runs_on_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(
        dir.path(),
        &[("lab", serve("lab")), ("tonic-st", serve("tonic-st"))],
    );
    let workload = dir.path().join("flow.toml");
    std::fs::write(
        &workload,
        r#"
seed = 5
[[calls]]
call = "helloworld.Greeter.SayHello"
name = "plain"
data = { request = { name = "p" } }

[[flows]]
name = "echo"

[[flows.steps]]
name = "first"
call = "helloworld.Greeter.SayHello"
data = { request = { name = "a" } }
extract = { said = "response.name" }

[[flows.steps]]
name = "second"
call = "helloworld.Greeter.SayHello"
data = { request = { name = "{{.vars.said}}-b" } }
expect = { fields = [{ path = "response.name", equals = "a-b" }] }
"#,
    )
    .unwrap();
    let mut env = SHORT.to_vec();
    env.push(("GRPC_REQUEST_SCENARIO", "string_10B"));
    let output = bench(
        dir.path(),
        &[
            "--suite",
            suite.to_str().unwrap(),
            "--workload",
            workload.to_str().unwrap(),
            "--threshold",
            "flow:echo:p99<=1ns",
            "--threshold",
            "step:second:errors<1%",
        ],
        &env,
    );
    // The impossible p99 of a flow's runs fails every row: exit 3, everything written.
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    for name in ["lab", "tonic-st"] {
        let row = record(&folder, name);
        let verdicts = row["thresholds"].as_array().unwrap();
        assert_eq!(verdicts[0]["passed"], false, "{name}: {verdicts:?}");
        assert_eq!(verdicts[1]["passed"], true, "{name}: {verdicts:?}");
        let load = &row["load"];
        let flow = &load["mix"]["flows"][0];
        assert_eq!(flow["name"], "echo", "{name}: {load}");
        let runs = flow["count"].as_u64().unwrap_or(0);
        assert!(runs > 0, "{name}: {flow}");
        // A timed window ends with some flows between their steps (at most one per stream of
        // GRPC_CLIENT_CONCURRENCY): those end Canceled; no run missed its expectation.
        let passed = flow["passed"].as_u64().unwrap_or(0);
        let errors = flow["errors"].as_u64().unwrap_or(0);
        assert_eq!(passed + errors, runs, "{name}: {flow}");
        assert!(passed > 0 && errors <= 20, "{name}: {flow}");
        assert_eq!(
            flow["unexpected"].as_u64().unwrap_or(0),
            0,
            "{name}: {flow}"
        );
        for reason in flow["errorDistribution"].as_object().unwrap().keys() {
            assert!(
                reason.contains("the run ended before it was sent"),
                "{name}: {flow}"
            );
        }
        let entries = load["mix"]["methods"].as_array().unwrap();
        let names: Vec<&str> = entries
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["plain", "first", "second"], "{name}");
        let second = &entries[2];
        assert_eq!(
            second["unexpected"].as_u64().unwrap_or(0),
            0,
            "{name}: {second}"
        );
        assert!(
            second["count"].as_u64().unwrap_or(0) > 0,
            "{name}: {second}"
        );
    }
    // The page lists each row's runs of the flow beside its entries.
    let page = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(page.contains("Its flows on each row"), "no flows table");
    assert!(page.contains(">echo<"), "no row for the flow");
}

/// `bench --client ghz`: the real ghz drives each window as grpc_bench drives it, over
/// plaintext and TLS. Every row's figures are ghz's (its report's transport says so) and hold
/// against the server's own count: every call ghz saw succeed was served, and the server
/// served no call ghz did not send (`ok <= server_calls <= count`). The parameters name ghz
/// and its version; a verdict that blames the client names ghz. Without ghz, the row is
/// FAILED with how to install it.
#[test]
fn a_table_driven_by_ghz_holds_against_the_servers_count() {
    let Some(ghz) = common::go_tool("ghz") else {
        eprintln!("skipped: ghz is not installed (bash peers/install.sh clients)");
        return;
    };
    let ghz_dir = ghz.parent().unwrap().to_str().unwrap().to_owned();
    let path = format!("{ghz_dir}:{}", std::env::var("PATH").unwrap_or_default());
    let env = [SHORT, &[("PATH", path.as_str())]].concat();
    for (args, rows) in [
        (
            &["lab", "tonic-st", "--client", "ghz"][..],
            &["lab", "tonic-st"][..],
        ),
        (&["lab", "--client", "ghz", "--tls"][..], &["lab"][..]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let output = bench(dir.path(), args, &env);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let folder = results_folder(dir.path());
        let params = std::fs::read_to_string(folder.join("bench.params")).unwrap();
        assert!(params.contains("GRPCLAB_CLIENT=ghz v0."), "{params}");
        // The page says who drove the rows and draws ghz's percentiles (no histogram).
        let page = std::fs::read_to_string(folder.join("report.html")).unwrap();
        assert!(
            page.contains("driven by ghz v0."),
            "no client in the subtitle"
        );
        assert!(
            page.contains("drawn through the percentiles that client reported"),
            "no ghz curve"
        );
        let table = String::from_utf8_lossy(&output.stdout);
        for name in rows {
            let json = record(&folder, name);
            assert_eq!(json["status"], "ok", "{args:?} {name}: {json}");
            let load = &json["load"];
            assert_eq!(load["options"]["transport"], "ghz", "{name}: {load}");
            let count = load["count"].as_u64().unwrap();
            let ok = load["ok"].as_u64().unwrap();
            assert!(ok > 0, "{name}: {load}");
            assert_eq!(count, ok + load["errors"].as_u64().unwrap(), "{name}");
            let served = json["server_calls"].as_u64().expect("the server's count");
            assert!(
                ok <= served && served <= count,
                "{args:?} {name}: ghz counted {count} calls ({ok} OK), the server served {served}"
            );
            // ghz's seven percentiles are the table's.
            assert!(load["latencyDistribution"].as_array().unwrap().len() == 7);
            let bound = &json["bound_by"];
            if bound["kind"] == "client" {
                assert_eq!(bound["client"], "ghz", "{bound}");
                assert!(table.contains("client (ghz)"), "{table}");
            } else {
                assert!(bound["client"].is_null(), "{bound}");
            }
            assert!(table.contains(&format!("| {name} ")), "{table}");
        }
    }

    // No ghz anywhere: a FAILED row saying how to get it, the run still complete.
    let dir = tempfile::tempdir().unwrap();
    let output = bench(
        dir.path(),
        &["lab", "--client", "ghz"],
        &[
            SHORT,
            &[
                ("PATH", "/usr/bin:/bin"),
                ("HOME", dir.path().to_str().unwrap()),
            ],
        ]
        .concat(),
    );
    let json = record(&results_folder(dir.path()), "lab");
    assert_eq!(json["status"], "failed", "{json} {}", stderr(&output));
    let reason = json["reason"].as_str().unwrap();
    assert!(
        reason.contains("ghz is not installed") && reason.contains("peers/install.sh clients"),
        "{reason}"
    );
}

/// Bytes as the table prints MiB: two decimals, trailing zeros dropped.
fn own_mib(bytes: u64) -> String {
    let text = format!("{:.2}", bytes as f64 / f64::from(1 << 20));
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `bench --network`: each spec is a value of a `network` axis. A row across a 10 ms link
/// runs its server in a namespace of its own and its client in another, so each call meets
/// the delay twice; the `lo` row runs on loopback as ever; the matrix has the axis; nothing
/// (process, cgroup, namespace) is left after the run.
#[test]
fn a_network_axis_runs_each_row_across_its_own_link() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        SHORT,
        &[
            ("GRPC_BENCHMARK_DURATION", "1s"),
            ("GRPC_BENCHMARK_WARMUP", "0s"),
            ("GRPC_CLIENT_CONNECTIONS", "1"),
            ("GRPC_CLIENT_CONCURRENCY", "1"),
        ],
    ]
    .concat();
    let marker = Marker::new();
    let mut command = bench_command(
        dir.path(),
        &["lab", "--network", "delay=10ms", "--network", "lo"],
        &env,
    );
    marker.apply(&mut command);
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run grpclab bench");
    let pid = child.id();
    let output = child.wait_with_output().expect("wait for grpclab bench");
    marker.assert_nothing_left();
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains("across delay=10ms each direction"), "{said}");
    let folder = results_folder(dir.path());
    let p50 = |name: &str| {
        let row = record(&folder, name);
        assert_eq!(row["status"], "ok", "{name}: {row}");
        row["load"]["latencyDistribution"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["percentage"] == 50))
            .and_then(|r| r["latency"].as_u64())
            .expect("p50")
    };
    assert!(p50("lab_network_delay_10ms") >= 20_000_000);
    assert!(
        p50("lab_network_lo") < 20_000_000,
        "loopback crossed no link"
    );
    let markdown = std::fs::read_to_string(folder.join("sweep.md")).unwrap();
    assert!(markdown.contains("| network | req/s | p99 |"), "{markdown}");
    assert!(markdown.contains("| delay=10ms |"), "{markdown}");
    let namespaces = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&namespaces.stdout).into_owned();
    assert!(!left.contains(&format!("grpclab-{pid}-")), "{left}");
}

/// Across a 10 ms link, lab with its stream window cut to HTTP/2's smallest makes each
/// 166 kB request of large_complex wait 3 round trips for window: the engine sees its
/// requests wait for their streams' windows, and the row says "network" (window-limited)
/// with the figures. lab with its own 1 MiB window, beside it, does not.
#[test]
fn a_row_held_by_the_servers_windows_is_bound_by_the_network() {
    let dir = tempfile::tempdir().unwrap();
    let with_host = |extra: &str| format!("{} --host {{host}}{extra}", serve("lab"));
    let suite = write_suite(
        dir.path(),
        &[
            ("small_window", with_host(" --stream-window 65535")),
            ("own_window", with_host("")),
        ],
    );
    let env = [
        SHORT,
        &[
            ("GRPC_REQUEST_SCENARIO", "large_complex"),
            ("GRPC_BENCHMARK_DURATION", "2s"),
            ("GRPC_BENCHMARK_WARMUP", "1s"),
            ("GRPC_CLIENT_CONNECTIONS", "1"),
            ("GRPC_CLIENT_CONCURRENCY", "2"),
        ],
    ]
    .concat();
    let output = bench(
        dir.path(),
        &[
            "--suite",
            suite.to_str().unwrap(),
            "--network",
            "delay=10ms,mtu=65535",
        ],
        &env,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    let small = record(&folder, "small_window_network_delay_10ms_mtu_65535");
    assert_eq!(small["status"], "ok", "{small:#}");
    assert_eq!(
        small["bound_by"]["kind"], "network",
        "{:#}",
        small["bound_by"]
    );
    // Measured where the requests blocked: on their stream's window, most of the time.
    let evidence = small["bound_by"]["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("window-limited: some request waited for the server's window"),
        "{evidence}"
    );
    assert!(
        evidence.contains("0 waits with its connection window spent"),
        "{evidence}"
    );
    let waits = &small["load"]["windowWaits"];
    assert!(waits["stream"].as_u64().unwrap_or(0) > 0, "{waits}");
    let own = record(&folder, "own_window_network_delay_10ms_mtu_65535");
    assert_eq!(own["status"], "ok", "{own:#}");
    assert_ne!(own["bound_by"]["kind"], "network", "{:#}", own["bound_by"]);
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("| network"), "{table}");
}

/// `--sweep protocol=...`: the same server (tonic-mt with tonic-web's layer) loaded in gRPC,
/// gRPC-Web and its text form, one row each; every row's calls are the server's calls, the
/// row says its protocol, and the matrix has the axis.
#[test]
fn a_protocol_axis_loads_one_server_in_each_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(
        dir.path(),
        &[("tonic_web", format!("{} --grpc-web", serve("tonic-mt")))],
    );
    let env = [
        SHORT,
        &[
            ("GRPC_BENCHMARK_DURATION", "1s"),
            ("GRPC_BENCHMARK_WARMUP", "0s"),
            ("GRPC_CLIENT_CONNECTIONS", "1"),
            ("GRPC_CLIENT_CONCURRENCY", "4"),
        ],
    ]
    .concat();
    let output = bench(
        dir.path(),
        &[
            "--suite",
            suite.to_str().unwrap(),
            "--sweep",
            "protocol=grpc,grpc-web,grpc-web-text",
        ],
        &env,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = results_folder(dir.path());
    for protocol in ["grpc", "grpc-web", "grpc-web-text"] {
        let name = format!("tonic_web_protocol_{protocol}");
        let row = record(&folder, &name);
        assert_eq!(row["status"], "ok", "{name}: {row}");
        let load = &row["load"];
        let count = load["count"].as_u64().unwrap();
        assert!(count > 0, "{name}");
        assert_eq!(
            load["statusCodeDistribution"]["OK"], count,
            "{name}: {load}"
        );
        let said = load["options"]["protocol"].as_str().unwrap_or("grpc");
        assert_eq!(said, protocol, "{name}");
        if protocol != "grpc" {
            assert_eq!(load["options"]["transport"], "h2", "{name}");
        }
    }
    let markdown = std::fs::read_to_string(folder.join("sweep.md")).unwrap();
    assert!(
        markdown.contains("| protocol | req/s | p99 |"),
        "{markdown}"
    );
    // Refused before any row: a protocol that does not exist, and a streaming scenario.
    for (args, env, says) in [
        (
            &["lab", "--sweep", "protocol=carrier-pigeon"][..],
            SHORT.to_vec(),
            "--sweep protocol: 'carrier-pigeon' is not a protocol",
        ),
        (
            &["lab", "--sweep", "protocol=grpc-web"][..],
            [SHORT, &[("GRPC_REQUEST_SCENARIO", "streaming_ping_pong")]].concat(),
            "bench runs gRPC-Web and Connect rows on unary scenarios so far",
        ),
    ] {
        let output = bench(dir.path(), args, &env);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        let said = stderr(&output);
        assert!(said.contains(says), "{said}");
        assert_eq!(said.trim().lines().count(), 1, "{said}");
    }
}

/// A network the machine cannot make, or a mistake in its spec, is refused before any
/// server starts: one line, exit 2.
#[test]
fn a_network_that_cannot_be_made_is_refused_before_any_row() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            &["lab", "--network", "delay=slow"][..],
            "--network 'delay=slow': delay=slow",
        ),
        (
            &["lab", "--network", "lo", "--network", "lo"][..],
            "--network 'lo' is given twice",
        ),
    ] {
        let output = bench(dir.path(), args, SHORT);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        let said = stderr(&output);
        assert!(said.contains(says), "{said}");
        assert_eq!(said.trim().lines().count(), 1, "{said}");
    }
    let output = Command::new("setpriv")
        .args(["--bounding-set", "-sys_admin,-net_admin"])
        .args(["--inh-caps", "-sys_admin,-net_admin", BIN, "bench", "lab"])
        .args([
            "--results-dir",
            dir.path().join("results").to_str().unwrap(),
        ])
        .args(["--network", "delay=1ms"])
        .output()
        .expect("run setpriv");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains("needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"),
        "{said}"
    );
    assert_eq!(said.trim().lines().count(), 1, "{said}");
}
