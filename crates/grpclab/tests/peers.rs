//! grpc_bench's table, reproduced: `grpclab bench --suite peers/suite.toml` builds
//! every peer for the scenario, checks its first reply is the echo, and measures it beside the
//! built-ins. CI installs the toolchains (`bash peers/install.sh`); on a machine without one, its
//! rows are SKIPPED — which is what the second test checks on purpose, by hiding a toolchain.

#[allow(dead_code)]
#[path = "common/leftovers.rs"]
mod leftovers;

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_grpclab");
const SUITE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../peers/suite.toml");

/// The peers in the suite, as grpc_bench names them.
const PEERS: [&str; 13] = [
    "rust_ntex_grpc",
    "go_grpc",
    "go_connect",
    "cpp_grpc_mt",
    "java_hotspot_grpc_pgc",
    "java_hotspot_grpc_pgc_direct",
    "java_armeria",
    "java_armeria_blocking",
    "scala_zio",
    "scala_pekko",
    "python_async_grpc",
    "node_grpcjs",
    "rust_lab",
];

fn bench(results: &Path, args: &[&str], path_env: Option<&Path>) -> Output {
    bench_with(results, args, path_env, &[])
}

fn bench_with(
    results: &Path,
    args: &[&str],
    path_env: Option<&Path>,
    extra_env: &[(&str, &str)],
) -> Output {
    grpclab_with("bench", results, args, path_env, extra_env)
}

/// Held by each bench or compare run: every run pins its servers to CPU 0, so runs side by
/// side starve each other's servers (a Flight Recorder recording then took 19 samples in 8 s,
/// too few to name a framework's frames).
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `grpclab SUBCOMMAND` (bench or compare) on the suite, with the harness's GRPC_ settings
/// of this environment replaced by short test ones, one run at a time.
fn grpclab_with(
    subcommand: &str,
    results: &Path,
    args: &[&str],
    path_env: Option<&Path>,
    extra_env: &[(&str, &str)],
) -> Output {
    let mut command = Command::new(BIN);
    command
        .arg(subcommand)
        .args(["--suite", SUITE])
        .args(["--results-dir", results.to_str().unwrap()])
        .args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("GRPC_") {
            command.env_remove(key);
        }
    }
    // A few seconds each: this checks that every peer builds, answers right and holds up
    // under load without errors, not how fast it is (BENCHMARKS.md has the full runs).
    command.envs([
        ("GRPC_BENCHMARK_DURATION", "2s"),
        ("GRPC_BENCHMARK_WARMUP", "2s"),
        ("GRPC_CLIENT_CONNECTIONS", "5"),
        ("GRPC_CLIENT_CONCURRENCY", "50"),
    ]);
    command.envs(extra_env.iter().copied());
    if let Some(path) = path_env {
        command.env("PATH", path);
    }
    // A test that failed while holding the lock leaves it poisoned; the next run may go on.
    let _one_at_a_time = ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Every peer process and cgroup ends with the run.
    leftovers::output_leaving_nothing(&mut command)
}

/// Where `tool` is on PATH, if it is.
fn tool_path(tool: &str) -> Option<String> {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&found.stdout).trim().to_owned();
    (found.status.success() && !path.is_empty()).then_some(path)
}

fn record(results: &Path, name: &str) -> serde_json::Value {
    let folder = std::fs::read_dir(results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max()
        .expect("a results folder");
    serde_json::from_slice(&std::fs::read(folder.join(format!("{name}.json"))).unwrap())
        .unwrap_or_else(|err| panic!("{name}.json: {err}"))
}

/// Runs the suite's peers with `args` and checks every row measured without errors (or, off
/// CI, was SKIPPED for a missing toolchain; or is in `skipped`, SKIPPED for a reason
/// containing the given text).
fn assert_every_peer_measures(args: &[&str], skipped: &[(&str, &str)]) {
    assert_every_peer_measures_with(args, skipped, &[]);
}

/// [`assert_every_peer_measures`] with extra environment (a scenario).
fn assert_every_peer_measures_with(args: &[&str], skipped: &[(&str, &str)], env: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let output = bench_with(dir.path(), &[&PEERS[..], args].concat(), None, env);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let in_ci = std::env::var_os("CI").is_some();
    for name in PEERS {
        let record = record(dir.path(), name);
        if let Some((_, why)) = skipped.iter().find(|(row, _)| *row == name) {
            assert_eq!(record["status"], "skipped", "{name} {args:?}: {record}");
            let reason = record["reason"].as_str().unwrap_or_default();
            // Off CI a missing toolchain is skipped first, whatever else would skip the row.
            if !in_ci && reason.contains("toolchain missing") {
                eprintln!("SKIPPED: {name}: {reason}");
                continue;
            }
            assert!(reason.contains(why), "{name}: {reason}");
            continue;
        }
        match record["status"].as_str() {
            Some("ok") => {
                assert_eq!(record["load"]["errors"], 0, "{name} {args:?}: {record}");
                assert!(record["load"]["count"].as_u64().unwrap() > 0, "{name}");
            }
            Some("skipped") if !in_ci => {
                eprintln!(
                    "SKIPPED: {name}: {} (bash peers/install.sh installs it)",
                    record["reason"]
                );
            }
            other => panic!(
                "{name} {args:?}: {other:?} ({}): CI installs every toolchain\n{stdout}\n{stderr}",
                record["reason"]
            ),
        }
    }
}

#[test]
fn every_peer_builds_answers_and_runs_without_errors() {
    assert_every_peer_measures(&[], &[]);
}

/// The other scenario families: large_complex (complex_proto's schema, 166 KB requests: the
/// build is shared, the messages are not) and string_10kB (the string_* schema, built once for
/// the family). Every peer answers each right and runs without errors (benches/peers_table.sh
/// runs all six at grpc_bench's full settings).
#[test]
fn every_peer_serves_the_other_scenario_families() {
    for scenario in ["large_complex", "string_10kB"] {
        assert_every_peer_measures_with(&[], &[], &[("GRPC_REQUEST_SCENARIO", scenario)]);
    }
}

/// `bench --tls` runs the whole table over TLS: every peer takes the generated certificate
/// and key through its suite entry's `tls` arguments, and the load, the first-reply check and
/// the readiness probe all speak TLS to it (the JVM peers with the JDK's own ALPN).
#[test]
fn every_peer_serves_the_table_over_tls() {
    assert_every_peer_measures(&["--tls"], &[]);
}

#[test]
fn a_peer_whose_toolchain_is_missing_is_one_skipped_row() {
    // A PATH holding only what the harness itself runs (sh, and taskset to pin a server):
    // node and npm are not found.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["sh", "taskset"] {
        let path = tool_path(tool).unwrap_or_else(|| panic!("{tool} is not installed"));
        std::os::unix::fs::symlink(path, bin.join(tool)).unwrap();
    }
    let results = dir.path().join("results");
    let output = bench(&results, &["node_grpcjs", "rust_lab"], Some(&bin));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "a skipped row is not a failure: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("| node_grpcjs        | SKIPPED |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("node_grpcjs SKIPPED: toolchain missing (`command -v node && command -v npm` failed); install it with: bash peers/install.sh node"),
        "{stdout}"
    );
    assert_eq!(record(&results, "node_grpcjs")["status"], "skipped");
    assert_eq!(
        record(&results, "rust_lab")["status"],
        "ok",
        "the rest still runs"
    );
}

/// The Java peer under `--profile cpu --profile alloc`: Java Flight Recorder, not perf, so the
/// flamegraph has Java method names, and the allocation sites name grpc-java, netty or
/// protobuf frames (the seed investigation's question: where does grpc-java allocate per call).
#[test]
fn a_jvm_peer_is_profiled_with_flight_recorder() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough for the recorder to take a few hundred samples of each kind.
    let output = bench_with(
        dir.path(),
        &[
            "java_hotspot_grpc_pgc",
            "--profile",
            "cpu",
            "--profile",
            "alloc",
        ],
        None,
        &[
            ("GRPC_BENCHMARK_DURATION", "8s"),
            ("GRPC_BENCHMARK_WARMUP", "4s"),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let record = record(dir.path(), "java_hotspot_grpc_pgc");
    if record["status"] == "skipped" && std::env::var_os("CI").is_none() {
        eprintln!("SKIPPED: no JVM toolchain (bash peers/install.sh jvm)");
        return;
    }
    assert_eq!(record["status"], "ok", "{record}");
    assert!(
        record["profile_note"].is_null(),
        "{}",
        record["profile_note"]
    );
    let folder = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .max()
        .unwrap();
    assert!(folder.join("java_hotspot_grpc_pgc.jfr").is_file());

    let java_frame = |name: &str| {
        [
            "io.grpc.",
            "io.netty.",
            "com.google.protobuf.",
            "helloworld.",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix))
    };
    let top = record["cpu_profile"]["top"].as_array().unwrap();
    assert!(
        top.iter()
            .any(|f| java_frame(f["function"].as_str().unwrap())),
        "Java methods by name: {top:?}"
    );
    let svg = std::fs::read_to_string(folder.join("java_hotspot_grpc_pgc.flamegraph.svg")).unwrap();
    assert!(svg.contains("io.grpc.") || svg.contains("io.netty."));

    let alloc = &record["alloc_profile"];
    assert!(
        alloc["source"]
            .as_str()
            .unwrap()
            .contains("Flight Recorder"),
        "{alloc}"
    );
    assert!(alloc["allocations"].as_u64().unwrap() > 0, "{alloc}");
    let sites = alloc["by_bytes"].as_array().unwrap();
    assert!(
        sites.iter().any(|site| {
            java_frame(site["site"].as_str().unwrap())
                || site["called_from"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| java_frame(f.as_str().unwrap()))
        }),
        "sites in grpc-java, netty or protobuf: {sites:?}"
    );
    assert!(
        sites[0]["bytes_per_call"].as_f64().unwrap() > 0.0,
        "per call over the measured calls"
    );
}

/// The seed's own question, on its own kind of server: a Scala peer (zio-grpc) and Armeria
/// under `--profile cpu` are recorded by Flight Recorder, and each flamegraph names its
/// framework's frames (ZIO's runtime or ScalaPB; Armeria), not only grpc-java's or netty's.
#[test]
fn scala_and_armeria_peers_are_profiled_with_flight_recorder() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench_with(
        dir.path(),
        &["scala_zio", "java_armeria", "--profile", "cpu"],
        None,
        &[
            ("GRPC_BENCHMARK_DURATION", "8s"),
            ("GRPC_BENCHMARK_WARMUP", "4s"),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let folder = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .max()
        .unwrap();
    for (name, frames) in [
        ("scala_zio", &["zio.", "scalapb."][..]),
        ("java_armeria", &["com.linecorp.armeria."][..]),
    ] {
        let record = record(dir.path(), name);
        if record["status"] == "skipped" && std::env::var_os("CI").is_none() {
            eprintln!("SKIPPED: {name}: no JVM toolchain (bash peers/install.sh jvm)");
            continue;
        }
        assert_eq!(record["status"], "ok", "{record}");
        assert!(
            record["profile_note"].is_null(),
            "{}",
            record["profile_note"]
        );
        assert!(folder.join(format!("{name}.jfr")).is_file(), "{name}");
        let svg = std::fs::read_to_string(folder.join(format!("{name}.flamegraph.svg"))).unwrap();
        // On failure, what the recording held instead (its weight and heaviest functions),
        // and the svg kept beside the results for a look.
        if !frames.iter().any(|frame| svg.contains(frame)) {
            let kept = std::env::temp_dir().join(format!("grpclab-peers-{name}.flamegraph.svg"));
            let _ = std::fs::write(&kept, &svg);
            panic!(
                "{name}: a flamegraph naming {frames:?}; {} samples, by total: {}; svg kept in {}",
                record["cpu_profile"]["weight"],
                record["cpu_profile"]["top_total"],
                kept.display()
            );
        }
    }
}

/// Call stacks of foreign servers: Go keeps frame pointers, so `--profile cpu`
/// unwinds it; the C++ peer (g++ -O2, Debian's libgrpc++) has none: `cpu` gives flat stacks
/// and a hint naming `cpu-dwarf`, and `cpu-dwarf` unwinds them.
#[test]
fn foreign_servers_unwind_with_the_call_graph_that_fits_them() {
    let profile = |peer: &str, kind: &str| -> Option<serde_json::Value> {
        let dir = tempfile::tempdir().unwrap();
        let output = bench_with(
            dir.path(),
            &[peer, "--profile", kind],
            None,
            &[
                ("GRPC_BENCHMARK_DURATION", "3s"),
                ("GRPC_BENCHMARK_WARMUP", "1s"),
            ],
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let record = record(dir.path(), peer);
        if record["status"] == "skipped" || record["cpu_profile"].is_null() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI installs the toolchains and perf: {record}"
            );
            eprintln!("SKIPPED: {peer} {kind}: {}", record["profile_note"]);
            return None;
        }
        Some(record)
    };
    let flat = |record: &serde_json::Value| record["cpu_profile"]["flat_percent"].as_f64().unwrap();
    if let Some(go) = profile("go_grpc", "cpu") {
        assert!(
            flat(&go) < 50.0,
            "Go unwinds by frame pointers: {}",
            go["cpu_profile"]
        );
        assert!(go["cpu_profile"]["hint"].is_null());
    }
    if let Some(cpp) = profile("cpp_grpc_mt", "cpu") {
        assert!(flat(&cpp) > 50.0, "{}", cpp["cpu_profile"]);
        let note = cpp["profile_note"].as_str().unwrap_or_default();
        assert!(note.contains("cpu-dwarf"), "the hint names the fix: {note}");
    }
    if let Some(cpp) = profile("cpp_grpc_mt", "cpu-dwarf") {
        assert_eq!(cpp["cpu_profile"]["call_graph"], "dwarf,8192");
        assert!(flat(&cpp) < 50.0, "{}", cpp["cpu_profile"]);
    }
}

/// A peer's own options go through `compare`'s sides: `scala_zio --bogus` is refused by the
/// server in one line (kept in the run's record) and the compare says which side did not run,
/// instead of the server ignoring the word, or hanging on its way out.
#[test]
fn a_peer_refusing_an_option_ends_the_compare_with_its_reason() {
    let jvm = tool_path("java").is_some() && tool_path("mvn").is_some();
    if !jvm && std::env::var_os("CI").is_none() {
        eprintln!("SKIPPED: no JVM toolchain (bash peers/install.sh jvm)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let output = grpclab_with(
        "compare",
        dir.path(),
        &[
            "--no-history",
            "--rounds",
            "3",
            "--warmup",
            "1s",
            "--duration",
            "1s",
            "--scenario",
            "string_100B",
            "scala_zio",
            "scala_zio --bogus",
        ],
        None,
        &[],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("B (scala_zio --bogus) did not run")
            && stderr.contains("exited during start-up"),
        "{stderr}"
    );
    let run = record(dir.path(), "b-1");
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(
        run["stderr_tail"][0],
        "scala_zio: unknown option --bogus: the only option is --direct-executor",
        "{run}"
    );
}
