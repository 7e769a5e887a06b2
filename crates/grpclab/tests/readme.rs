//! The README's examples, run as written: every `grpclab` line of its "One example per
//! command" block, with three changes only — durations shortened (through grpc_bench's own
//! variables and `-z`/`--warmup`), the fixed port 50051 replaced by the one the README's own
//! `serve` line got, and the report's example folder by the one the `bench` line wrote. An
//! example that stops working fails here.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;

const README: &str = include_str!("../../../README.md");

/// The repository's root: the README's paths (peers/suite.toml) are relative to it.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `grpclab` command lines of the examples block, each split into words as a shell
/// would (double quotes group; comments and blank lines dropped).
fn example_lines() -> Vec<Vec<String>> {
    let block = README
        .split("## One example per command")
        .nth(1)
        .and_then(|rest| rest.split("```sh").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("the README has its examples block");
    block
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("grpclab "))
        .map(|line| {
            let mut words = Vec::new();
            let mut word = String::new();
            let mut quoted = false;
            for c in line.chars() {
                match c {
                    '"' | '\'' => quoted = !quoted,
                    ' ' if !quoted => {
                        if !word.is_empty() {
                            words.push(std::mem::take(&mut word));
                        }
                    }
                    c => word.push(c),
                }
            }
            if !word.is_empty() {
                words.push(word);
            }
            words
        })
        .collect()
}

#[test]
fn every_readme_example_runs_as_written() {
    let lines = example_lines();
    let commands: Vec<&str> = lines.iter().map(|words| words[1].as_str()).collect();
    for command in [
        "load", "serve", "bench", "compare", "capacity", "merge", "report", "stats", "encode",
    ] {
        assert!(commands.contains(&command), "no `{command}` example");
    }
    let scratch = tempfile::tempdir().unwrap();
    // `serve` first: the other examples talk to the server it starts.
    let serve = lines.iter().find(|words| words[1] == "serve").unwrap();
    let args: Vec<String> = serve[1..]
        .iter()
        .map(|word| {
            if word == "50051" {
                "0".to_owned()
            } else {
                word.clone()
            }
        })
        .collect();
    let mut server = common::grpclab()
        .args(&args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(server.stderr.take().unwrap()).lines();
    let target = loop {
        let line = stderr.next().expect("serve said where it listens").unwrap();
        if let Some((_, addr)) = line.split_once("listening on ") {
            break addr.trim().to_owned();
        }
    };
    std::thread::spawn(move || stderr.for_each(drop));
    let mut results: Option<PathBuf> = None;
    for words in lines.iter().filter(|words| words[1] != "serve") {
        let mut args: Vec<String> = Vec::new();
        let mut rest = words[1..].iter().peekable();
        while let Some(word) = rest.next() {
            match word.as_str() {
                "127.0.0.1:50051" => args.push(target.clone()),
                "-z" | "--warmup" => {
                    args.push(word.clone());
                    rest.next();
                    args.push(if word == "-z" { "1s" } else { "0s" }.to_owned());
                }
                "-o" => {
                    args.push(word.clone());
                    let file = rest.next().unwrap();
                    args.push(scratch.path().join(file).display().to_string());
                }
                // merge's inputs: the shards the example's comment says were run, run
                // here the same way (two generators sharing one start).
                other if words[1] == "merge" && other.starts_with("shard-") => {
                    let shards = words.iter().filter(|w| w.starts_with("shard-")).count();
                    let index = other.trim_start_matches("shard-").trim_end_matches(".json");
                    let file = scratch.path().join(other);
                    run_shard(&target, index, shards, &file);
                    args.push(file.display().to_string());
                }
                other if other.starts_with("results/") => {
                    let folder = results.as_ref().expect("bench ran before report");
                    args.push(folder.display().to_string());
                }
                other => args.push(other.to_owned()),
            }
        }
        let mut command = common::grpclab();
        command.current_dir(root()).args(&args);
        for (key, _) in std::env::vars() {
            if key.starts_with("GRPC_") {
                command.env_remove(key);
            }
        }
        command.envs([
            ("GRPC_BENCHMARK_DURATION", "1s"),
            ("GRPC_BENCHMARK_WARMUP", "0s"),
        ]);
        if words[1] == "bench" || words[1] == "compare" {
            // Written into the scratch folder, not the repository's results/.
            command.args(["--results-dir", scratch.path().to_str().unwrap()]);
            if words[1] == "compare" {
                command.args(["--rounds", "3"]);
            }
        }
        if words[1] == "capacity" {
            // A search of a few short probes, not one to the 5 % precision.
            command.args([
                "--probe-min",
                "1s",
                "--probe-max",
                "1s",
                "--max-probes",
                "3",
            ]);
            command.args(["--start-rps", "1000"]);
        }
        let output = command.output().unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {err}");
        if words[1] == "bench" {
            let folder = err
                .lines()
                .find_map(|line| line.strip_prefix("results: "))
                .expect("bench names its results folder");
            results = Some(PathBuf::from(folder.trim()));
        }
        if words[1] == "encode" {
            let file = scratch.path().join(words.last().unwrap());
            assert!(
                std::fs::metadata(&file).is_ok_and(|m| m.len() > 5),
                "{file:?}"
            );
        }
    }
    common::signal(server.id(), "TERM");
    assert!(server.wait().unwrap().success());
}

/// Runs shard `index` of `shards` at `target` into `file`, as the merge example's comment
/// says its inputs were made (one shared start a few seconds ahead, so both have time to
/// connect whichever runs first).
fn run_shard(target: &str, index: &str, shards: usize, file: &Path) {
    use std::sync::OnceLock;
    static START: OnceLock<u64> = OnceLock::new();
    let start = *START.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 3
    });
    let shards = shards.to_string();
    let child = common::grpclab()
        .args(["load", "--insecure", target, "--scenario", "complex_proto"])
        .args([
            "--shard",
            &format!("{index}/{shards}"),
            "--connections",
            &shards,
        ])
        .args(["--start-at", &start.to_string(), "--start-tolerance", "60s"])
        .args(["-z", "1s", "-O", "json", "-o"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        child.status.success(),
        "shard {index}: {}",
        String::from_utf8_lossy(&child.stderr)
    );
}
