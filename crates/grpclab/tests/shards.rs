//! Many generators, one run: `load --shard I/N --start-at`, `grpclab merge`, and the
//! Kubernetes manifests that start them (deploy/kubernetes/), checked without a cluster.
//!
//! - The manifests render with `kubectl kustomize`, validate strictly against the
//!   Kubernetes schemas and hold what the schemas cannot (deploy/kubernetes/check.py).
//! - The four-generator overlay's pods run here, each with exactly the arguments (expanded
//!   as the kubelet expands them) and environment its Job gives it, against one lab
//!   server: the merged count is the server's own count of calls served, and the merged
//!   percentiles are those of one histogram holding every call's recorded latency.
//! - A generator later than its --start-at allows is refused (exit 4, nothing sent); one
//!   allowed to start late shows up as the merge's start skew.
//!
//! The manifest tests need kubectl and the kubernetes-validate package: they skip with a
//! message on a developer's machine without them and fail on CI (.ci/run installs them).

mod common;

use common::{grpclab, Server};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether the manifest tools are here; on CI their absence is a failure.
fn manifest_tools() -> bool {
    let kubectl = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|out| out.status.success());
    let validate = Command::new("python3")
        .args(["-c", "import kubernetes_validate, yaml"])
        .output()
        .is_ok_and(|out| out.status.success());
    if kubectl && validate {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have kubectl ({kubectl}) and kubernetes-validate ({validate}): .ci/run installs them"
    );
    eprintln!("skipped: needs kubectl and python3 -m pip install kubernetes-validate");
    false
}

fn check_py() -> Command {
    let mut command = Command::new("python3");
    command.arg(repo().join("deploy/kubernetes/check.py"));
    command
}

#[test]
fn the_manifests_render_validate_and_keep_one_shard_per_pod() {
    if !manifest_tools() {
        return;
    }
    let out = check_py().output().expect("run check.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "check.py found problems:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("checked base"), "{stdout}");
    assert!(
        stdout.contains("checked overlays/four-generators"),
        "{stdout}"
    );
}

#[test]
fn the_semantic_check_catches_a_job_that_could_run_a_shard_twice() {
    if !manifest_tools() {
        return;
    }
    // An overlay that breaks what the schemas allow: retries on, a parallelism short of
    // the completions, and grpc_bench's "512m" taken as Kubernetes millibytes.
    // Kustomize takes relative paths only: the overlay lives under the repository.
    let scratch = repo().join("target");
    std::fs::create_dir_all(&scratch).unwrap();
    let dir = tempfile::tempdir_in(&scratch).expect("temp dir");
    let overlay = dir.path().join("bad");
    std::fs::create_dir_all(&overlay).unwrap();
    let base = "../../../deploy/kubernetes/base";
    let components = "../../../deploy/kubernetes/components/bench-settings";
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {}\ncomponents:\n  - {}\nconfigMapGenerator:\n  - name: grpclab-bench\n    behavior: merge\n    literals:\n      - GRPC_SERVER_RAM=512m\npatches:\n  - target:\n      kind: Job\n    patch: |-\n      - op: replace\n        path: /spec/backoffLimit\n        value: 3\n      - op: replace\n        path: /spec/completions\n        value: 3\n",
            base, components
        ),
    )
    .unwrap();
    let script = format!(
        "import sys; sys.path.insert(0, {:?}); import check; objs = check.render({:?}); print('\\n'.join(check.semantic_problems({:?}, objs)))",
        repo().join("deploy/kubernetes").display().to_string(),
        overlay.display().to_string(),
        overlay.display().to_string()
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("run check");
    let problems = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(problems.contains("backoffLimit must be 0"), "{problems}");
    assert!(problems.contains("must be one number"), "{problems}");
    assert!(problems.contains("millibytes"), "{problems}");
}

/// A pod's arguments and environment.
type Pod = (Vec<String>, Vec<(String, String)>);

/// The generator pods of an overlay, with per-run settings as a run's ConfigMap gives them.
fn job_pods(overlay: &str, settings: &[(&str, String)]) -> Vec<Pod> {
    let mut command = check_py();
    command.args(["--pods", &repo().join(overlay).display().to_string()]);
    for (key, value) in settings {
        command.args(["--set", &format!("{key}={value}")]);
    }
    let out = command.output().expect("check.py --pods");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pods: Value = serde_json::from_slice(&out.stdout).expect("pods JSON");
    pods.as_array()
        .expect("a list")
        .iter()
        .map(|pod| {
            let args = pod["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            let env = pod["env"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            (args, env)
        })
        .collect()
}

fn unix_seconds_from_now(seconds: u64) -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + seconds
}

/// The JSON result on a generator's last line of output (what `kubectl logs` collects).
fn last_json_line(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|line| line.starts_with('{'))
        .unwrap_or_else(|| {
            panic!(
                "no JSON line; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    line.to_owned()
}

fn served_calls(server: &Server) -> u64 {
    server.stats()["calls"].as_u64().expect("calls")
}

#[test]
fn the_jobs_pods_run_here_and_merge_exactly() {
    if !manifest_tools() {
        return;
    }
    let server = Server::start("lab");
    // A small run in the overlay's shape: an open loop, so each pod takes every 4th call of
    // one schedule; no warmup, so the server's count is the measured calls' count.
    let pods = job_pods(
        "deploy/kubernetes/overlays/four-generators",
        &[
            ("GRPCLAB_TARGET", server.target()),
            ("GRPCLAB_START_AT", unix_seconds_from_now(3).to_string()),
            ("GRPC_CLIENT_CONCURRENCY", "8".to_owned()),
            ("GRPC_CLIENT_CONNECTIONS", "4".to_owned()),
            ("GRPC_CLIENT_QPS", "400".to_owned()),
            ("GRPC_BENCHMARK_DURATION", "2s".to_owned()),
            ("GRPC_BENCHMARK_WARMUP", "0s".to_owned()),
        ],
    );
    assert_eq!(pods.len(), 4);
    let children: Vec<_> = pods
        .iter()
        .map(|(args, env)| {
            grpclab()
                .args(args)
                // Every call one by one too: the independent check of the percentiles.
                .arg("--details=1000000")
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a generator")
        })
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut files = Vec::new();
    let mut every_call =
        hdrhistogram::Histogram::<u64>::new_with_bounds(1_000, 60_000_000_000, 3).unwrap();
    for (index, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("generator ends");
        assert!(
            out.status.success(),
            "pod {index}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = last_json_line(&out);
        let result: Value = serde_json::from_str(&line).unwrap();
        let generator = &result["sharding"]["generators"][0];
        assert_eq!(generator["shard"], index as u64, "{generator}");
        assert_eq!(result["sharding"]["of"], 4);
        // -c 8 over 4 connections, split four ways.
        assert_eq!(
            (
                generator["concurrency"].as_u64(),
                generator["connections"].as_u64()
            ),
            (Some(2), Some(1))
        );
        for call in result["details"].as_array().unwrap() {
            assert_eq!(call["status"], "OK", "{call}");
            every_call.saturating_record(call["latency"].as_u64().unwrap());
        }
        let file = dir.path().join(format!("shard-{index}.log"));
        // As `kubectl logs` would save it: whatever else the pod printed, the JSON last.
        std::fs::write(
            &file,
            format!("{}\n{line}\n", String::from_utf8_lossy(&out.stderr)),
        )
        .unwrap();
        files.push(file);
    }
    let merged_file = dir.path().join("merged.json");
    let out = grpclab()
        .arg("merge")
        .args(files.iter().rev())
        .args(["-O", "json", "-o"])
        .arg(&merged_file)
        .output()
        .expect("merge");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged: Value =
        serde_json::from_str(&std::fs::read_to_string(&merged_file).unwrap()).unwrap();
    let count = merged["count"].as_u64().unwrap();
    assert_eq!(count, served_calls(&server), "merged count vs the server's");
    assert_eq!(count, every_call.len(), "merged count vs every call listed");
    // One global schedule at 400/s for 2 s: 800 intended calls, each sent by one pod — or,
    // on a loaded machine, a last tick that came after the window closed, counted as unsent
    // by its pod. Every intended call is accounted for either way.
    let unsent = merged["unsent"].as_u64().unwrap_or(0);
    let ignored = merged["ignoredInFlight"].as_u64().unwrap_or(0);
    assert_eq!(count + unsent + ignored, 800, "{merged}");
    // Counted where each call was given up, not as the remainder: none lost, and only the
    // last moments' calls may be unsent (as tests/faults.rs bounds them).
    assert_eq!(merged["unaccounted"].as_u64(), Some(0), "{merged}");
    assert_eq!(
        merged["unsentNeverTaken"].as_u64().unwrap_or(0)
            + merged["unsentStopped"].as_u64().unwrap_or(0),
        unsent,
        "{merged}"
    );
    assert!(unsent <= 800 / 20, "unsent {unsent}: {merged}");
    assert!(count > 0, "{merged}");
    for point in merged["latencyPercentiles"].as_array().unwrap() {
        let percentage = point["percentage"].as_f64().unwrap();
        assert_eq!(
            point["latency"].as_u64().unwrap(),
            every_call.value_at_percentile(percentage),
            "p{percentage}"
        );
    }
    assert_eq!(merged["slowest"].as_u64().unwrap(), every_call.max());
    let per_second: u64 = merged["perSecond"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["count"].as_u64().unwrap())
        .sum();
    assert_eq!(per_second, count);
    assert_eq!(
        merged["sharding"]["merge"]["sumOfRates"]
            .as_f64()
            .map(|r| r > 0.0),
        Some(true)
    );
    // The merged result is a load result: it merges again, alone, to the same figures.
    let again = grpclab()
        .args(["merge", "-O", "json"])
        .arg(&merged_file)
        .output()
        .expect("merge again");
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["count"], merged["count"]);
    assert_eq!(again["latencyPercentiles"], merged["latencyPercentiles"]);
    assert_eq!(again["perSecond"], merged["perSecond"]);
}

/// Runs `command` (a generator with `-O json`), checks it succeeded, and saves its stdout
/// at `path`.
fn saved(command: &mut Command, path: PathBuf) -> PathBuf {
    let out = command.output().expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// A two-shard run's generator `index` against `target`, starting at `start_at`.
fn generator(target: &str, index: u64, start_at: u64, extra: &[&str]) -> Command {
    let mut command = grpclab();
    command
        .args(["load", target, "--insecure", "--scenario", "string_100B"])
        .args([
            "--shard",
            &format!("{index}/2"),
            "--start-at",
            &start_at.to_string(),
        ])
        .args([
            "-c",
            "2",
            "--connections",
            "2",
            "--rps",
            "200",
            "-z",
            "2s",
            "-O",
            "json",
            "--no-tui",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

#[test]
fn a_late_generator_is_refused_or_its_skew_reported() {
    let server = Server::start("lab");
    let target = server.target();
    let start_at = unix_seconds_from_now(3);
    let on_time = generator(&target, 0, start_at, &[])
        .spawn()
        .expect("shard 0");
    // Shard 1 is ready a second after the shared start: past the default 500 ms tolerance.
    let at = UNIX_EPOCH + Duration::from_secs(start_at + 1);
    while SystemTime::now() < at {
        std::thread::sleep(Duration::from_millis(50));
    }
    let late = generator(&target, 1, start_at, &[])
        .output()
        .expect("shard 1");
    assert_eq!(
        late.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&late.stderr)
    );
    let stderr = String::from_utf8_lossy(&late.stderr);
    assert!(stderr.contains("--start-at"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        late.stdout.is_empty(),
        "a refused generator writes no result"
    );
    // Allowed to be late, it runs, its schedule anchored at the shared start.
    let allowed = generator(&target, 1, start_at, &["--start-tolerance", "30s"])
        .output()
        .expect("shard 1 again");
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    let first = on_time.wait_with_output().expect("shard 0 ends");
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("0.json"), dir.path().join("1.json"));
    std::fs::write(&a, &first.stdout).unwrap();
    std::fs::write(&b, &allowed.stdout).unwrap();
    let out = grpclab()
        .args(["merge", "-O", "json"])
        .args([&a, &b])
        .output()
        .expect("merge");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Shard 0 was released by 500 ms after the start (else it would have been refused);
    // shard 1 no earlier than a second after it: the skew is at least the difference.
    let skew = merged["sharding"]["merge"]["startSkew"].as_u64().unwrap();
    assert!(skew >= 500_000_000, "start skew {skew} ns: {merged}");
    let served = served_calls(&server);
    assert_eq!(merged["count"].as_u64().unwrap(), served);
    // Both generators count from the one shared start: the late one's missed calls are
    // late calls (their latency counts from their intended time), not calls it skipped.
    let shard1: Value = serde_json::from_slice(&allowed.stdout).unwrap();
    assert!(
        shard1["slowest"].as_u64().unwrap() >= 500_000_000,
        "{shard1}"
    );
}

#[test]
fn merge_refuses_what_does_not_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start("lab");
    let target = server.target();
    // Run one after the other, each its own start (the merge checks settings, not clocks).
    let run = |index: u64, extra: &[&str]| {
        saved(
            &mut generator(&target, index, unix_seconds_from_now(2), extra),
            dir.path().join(format!("{index}-{}.json", extra.len())),
        )
    };
    let zero = run(0, &[]);
    let one_other_call = run(1, &["--rps", "300"]);
    let lone = dir.path().join("lone.json");
    let out = grpclab()
        .args([
            "load",
            &target,
            "--insecure",
            "--scenario",
            "string_100B",
            "-n",
            "10",
            "-O",
            "json",
        ])
        .output()
        .unwrap();
    std::fs::write(&lone, &out.stdout).unwrap();
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "not json").unwrap();
    for (files, expected) in [
        (vec![&zero, &zero], "in both"),
        (vec![&zero], "missing"),
        (vec![&zero, &one_other_call], "not shards of one run"),
        (vec![&zero, &lone], "does not say which shard"),
        (vec![&garbage], "is not a grpclab load result"),
    ] {
        let out = grpclab().arg("merge").args(&files).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{files:?}: {stderr}");
        assert!(stderr.contains(expected), "{files:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
    // --partial merges what there is into a result that merges again with the rest.
    let partial = dir.path().join("partial.json");
    let out = grpclab()
        .args(["merge", "--partial", "-O", "json", "-o"])
        .arg(&partial)
        .arg(&zero)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = grpclab()
        .args(["merge"])
        .arg(&partial)
        .arg(&zero)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "shard 0 twice, through the partial merge"
    );
}

/// Shards that send differently are not one run, whatever else they share: other metadata,
/// another mix seed, other weights or data in a workload's entries, other streaming flags.
/// Each is refused in one line naming what differs (a header's value is never printed).
#[test]
fn merge_refuses_shards_that_send_differently() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start("lab");
    let target = server.target();
    let workload = |name: &str, weight: u32, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "[[calls]]\ncall = \"helloworld.Greeter.SayHello\"\nname = \"a\"\nweight = {weight}\ndata = '{{\"request\": {{\"name\": \"a\"}}}}'\n\n[[calls]]\ncall = \"helloworld.Greeter.SayHello\"\nname = \"b\"\ndata = '{{\"request\": {{\"name\": \"{text}\"}}}}'\n"
            ),
        )
        .unwrap();
        path.display().to_string()
    };
    let plain = workload("plain.toml", 2, "b");
    let heavier = workload("heavier.toml", 3, "b");
    let other_data = workload("other-data.toml", 2, "other");
    let run = |index: u64, tag: &str, extra: &[&str]| {
        saved(
            &mut generator(&target, index, unix_seconds_from_now(1), extra),
            dir.path().join(format!("{index}-{tag}.json")),
        )
    };
    let zero = run(0, "plain", &[]);
    let zero_mix = run(0, "mix", &["--workload", &plain, "--mix-seed", "1"]);
    let cases = [
        (
            &zero,
            run(1, "metadata", &["-m", r#"{"x-token": "s3cret-token"}"#]),
            "the metadata (-m) differs",
        ),
        (
            &zero_mix,
            run(1, "seed", &["--workload", &plain, "--mix-seed", "2"]),
            "the mix seed",
        ),
        (
            &zero_mix,
            run(1, "weights", &["--workload", &heavier, "--mix-seed", "1"]),
            "the mix's methods and weights",
        ),
        (
            &zero_mix,
            run(1, "data", &["--workload", &other_data, "--mix-seed", "1"]),
            "what the calls send",
        ),
    ];
    // The same settings merge (the check refuses differences, not mixes).
    let same = run(1, "mix-same", &["--workload", &plain, "--mix-seed", "1"]);
    let out = grpclab()
        .arg("merge")
        .arg(&zero_mix)
        .arg(&same)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (first, second, expected) in &cases {
        let out = grpclab()
            .arg("merge")
            .arg(first)
            .arg(second)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{second:?}: {stderr}");
        assert!(stderr.contains(expected), "{second:?}: {stderr}");
        assert!(!stderr.contains("s3cret-token"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
    // Streaming flags: server streams ended after 3 replies in one shard, 5 in the other.
    let stream = |index: u64, count: &str| {
        let mut command = grpclab();
        command
            .args([
                "load",
                &target,
                "--insecure",
                "--scenario",
                "server_stream_1kB",
            ])
            .args([
                "--shard",
                &format!("{index}/2"),
                "-c",
                "2",
                "--connections",
                "2",
            ])
            .args([
                "-n",
                "20",
                "--stream-call-count",
                count,
                "-O",
                "json",
                "--no-tui",
            ]);
        saved(
            &mut command,
            dir.path().join(format!("stream-{index}-{count}.json")),
        )
    };
    let (three, five) = (stream(0, "3"), stream(1, "5"));
    let out = grpclab()
        .arg("merge")
        .arg(&three)
        .arg(&five)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the streaming flags is call-count=3 in one and call-count=5"),
        "{stderr}"
    );
}
