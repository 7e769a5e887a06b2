//! Workload mixes (`--mix`, `--workload`): several methods in one run, each call's method
//! drawn by weight from the seed and the call's number. Against lab (two of its unary
//! methods) and a grpcio server that counts each method's calls and the metadata they carried.

mod common;

use common::{grpclab, Server};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// The two unary methods lab serves: the Greeter and its admin counters.
const LAB_MIX: &str = "helloworld.Greeter.SayHello=3,grpclab.admin.v1.Stats.Get=1";

fn load_json(args: &[&str]) -> Value {
    let out = grpclab()
        .arg("load")
        .args(args)
        .args(["-O", "json"])
        .output()
        .expect("run grpclab load");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

/// Each method's calls in a report's mix.
fn counts(report: &Value) -> BTreeMap<String, u64> {
    report["mix"]["methods"]
        .as_array()
        .expect("a mix in the report")
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_owned(),
                m["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_seed_makes_the_same_calls_of_each_method_and_each_methods_figures_are_its_calls() {
    let server = Server::start("lab");
    let target = server.target();
    let run = |transport: &str, seed: &str| {
        load_json(&[
            &target,
            "--insecure",
            "--mix",
            LAB_MIX,
            "--mix-seed",
            seed,
            "-n",
            "2000",
            "-c",
            "8",
            "--details=2000",
            "--transport",
            transport,
        ])
    };
    let first = run("engine", "5");
    let again = run("engine", "5");
    let on_h2 = run("h2", "5");
    let other_seed = run("engine", "6");
    let by_method = counts(&first);
    assert_eq!(by_method.values().sum::<u64>(), 2000, "{by_method:?}");
    assert_eq!(first["count"], 2000);
    assert_eq!(first["mix"]["seed"], 5);
    // The draw is the seed's and the call number's: which thread or transport sends a call
    // does not change it.
    assert_eq!(counts(&again), by_method);
    assert_eq!(counts(&on_h2), by_method);
    assert_ne!(counts(&other_seed), by_method, "another seed, other draws");
    // Weights 3:1 over 2000 calls: 1500 expected, one standard deviation is 19.4 calls.
    let greeter = by_method["helloworld.Greeter.SayHello"];
    assert!(
        (1500i64 - greeter as i64).abs() < 5 * 20,
        "{greeter} of 2000 for weight 3 of 4"
    );
    for report in [&first, &on_h2] {
        // Every call is listed with its method; each method's percentiles are those of its
        // own calls, exactly.
        let details = report["details"].as_array().unwrap();
        assert_eq!(details.len(), 2000);
        for method in report["mix"]["methods"].as_array().unwrap() {
            let name = method["name"].as_str().unwrap();
            let mut own =
                hdrhistogram::Histogram::<u64>::new_with_bounds(1_000, 60_000_000_000, 3).unwrap();
            for call in details.iter().filter(|call| call["method"] == name) {
                assert_eq!(call["status"], "OK", "{call}");
                own.saturating_record(call["latency"].as_u64().unwrap());
            }
            assert_eq!(own.len(), method["count"].as_u64().unwrap(), "{name}");
            assert_eq!(method["ok"], method["count"]);
            let latency = &method["latency"];
            assert_eq!(latency["slowest"].as_u64().unwrap(), own.max(), "{name}");
            assert_eq!(latency["fastest"].as_u64().unwrap(), own.min(), "{name}");
            for point in latency["latencyDistribution"].as_array().unwrap() {
                let percentage = point["percentage"].as_f64().unwrap();
                assert_eq!(
                    point["latency"].as_u64().unwrap(),
                    own.value_at_percentile(percentage),
                    "{name} p{percentage}"
                );
            }
        }
    }
}

#[test]
fn a_workload_file_sends_each_methods_own_data_and_metadata() {
    let Some(Shop {
        mut server,
        target,
        seen_file,
        proto,
        dir,
    }) = grpcio_mix_server()
    else {
        return;
    };
    let workload = dir.path().join("shop.toml");
    std::fs::write(
        &workload,
        r#"
seed = 11
[[calls]]
call = "mix.v1.Shop.Browse"
weight = 4
data = { name = "shelf" }
metadata = { "x-kind" = "browse" }

[[calls]]
call = "mix.v1.Shop/Buy"
data = '{"name": "cart", "id": "{{.RequestNumber}}"}'
metadata = { "x-kind" = "buy", "x-n" = "{{.RequestNumber}}" }
"#,
    )
    .unwrap();
    let report = load_json(&[
        &target,
        "--insecure",
        "--proto",
        proto.to_str().unwrap(),
        "--workload",
        workload.to_str().unwrap(),
        "-n",
        "500",
        "-c",
        "4",
    ]);
    drop(server.stdin.take());
    assert!(server.wait().unwrap().success());
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&seen_file).unwrap()).unwrap();
    let by_method = counts(&report);
    assert_eq!(report["mix"]["seed"], 11);
    assert_eq!(report["count"], 500);
    // The server saw exactly the calls the report gives each method.
    assert_eq!(
        seen["Browse"]["calls"].as_u64(),
        Some(by_method["mix.v1.Shop.Browse"])
    );
    assert_eq!(
        seen["Buy"]["calls"].as_u64(),
        Some(by_method["mix.v1.Shop.Buy"])
    );
    assert!(by_method.values().all(|calls| *calls > 0), "{by_method:?}");
    // Each method's own metadata, and only its own: the constant one on every call, the
    // template rendered per call (each Buy call its own request number).
    let values = |method: &str, key: &str| -> Vec<String> {
        seen[method][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    assert!(values("Browse", "x-kind").iter().all(|v| v == "browse"));
    assert_eq!(
        values("Browse", "x-kind").len() as u64,
        by_method["mix.v1.Shop.Browse"]
    );
    assert!(values("Browse", "x-n").is_empty());
    assert!(values("Buy", "x-kind").iter().all(|v| v == "buy"));
    let numbers: std::collections::BTreeSet<u64> = values("Buy", "x-n")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(numbers.len() as u64, by_method["mix.v1.Shop.Buy"]);
}

#[test]
fn what_a_mix_cannot_run_is_one_line_and_exit_2() {
    let server = Server::start("lab");
    let target = server.target();
    let dir = tempfile::tempdir().unwrap();
    let bad_toml = dir.path().join("bad.toml");
    std::fs::write(
        &bad_toml,
        "[[calls]]\ncall = \"helloworld.Greeter.SayHello\"\nweight = 0\n",
    )
    .unwrap();
    for (args, says) in [
        (
            vec![
                "--mix",
                "helloworld.Greeter.SayHello=1,grpclab.streaming.v1.StreamingEcho.Feed=1",
            ],
            "unary methods only",
        ),
        (
            vec![
                "--mix",
                "helloworld.Greeter.SayHello=1,helloworld.Greeter.Nope=1",
            ],
            "Nope",
        ),
        (
            vec!["--mix", "helloworld.Greeter.SayHello=zero"],
            "not a whole number",
        ),
        (vec!["--workload", bad_toml.to_str().unwrap()], "weight 0"),
        (
            vec!["--workload", "/nonexistent/w.toml"],
            "--workload: cannot read /nonexistent/w.toml",
        ),
        (vec!["--mix", LAB_MIX, "--validate"], "--validate"),
        (vec!["--mix", LAB_MIX, "-d", "@"], "standard input"),
        (vec!["--mix", LAB_MIX, "-b"], "standard input"),
        (
            vec![
                "--call",
                "helloworld.Greeter.SayHello",
                "-d",
                r#"{"request":{"name":"{{.vars.token}}"}}"#,
            ],
            "-d/-D: {{.vars.token}} is a flow variable: only the steps of a workload file's [[flows]] may use one",
        ),
        (
            vec![
                "--call",
                "helloworld.Greeter.SayHello",
                "-m",
                r#"{"authorization":"Bearer {{.vars.token}}"}"#,
            ],
            "-m/--metadata: {{.vars.token}} is a flow variable",
        ),
    ] {
        let out = grpclab()
            .args(["load", &target, "--insecure", "-n", "10"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // --mix and --call say two different things: clap refuses the pair.
    let out = grpclab()
        .args([
            "load",
            &target,
            "--insecure",
            "--call",
            "helloworld.Greeter.SayHello",
        ])
        .args(["--mix", LAB_MIX])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
}

/// A workload's [[flows]] are checked against the server's schema (methods, reply paths)
/// and the file (variables), each error one line with the file's line; a file that passes
/// every check runs, on both transports.
#[test]
fn a_flow_file_is_checked_line_by_line_against_the_schema() {
    let server = Server::start("lab");
    let target = server.target();
    let dir = tempfile::tempdir().unwrap();
    let load_file = |file: &std::path::Path, extra: &[&str]| {
        grpclab()
            .args(["load", &target, "--insecure", "-n", "10", "--no-history"])
            .args(extra)
            .arg("--workload")
            .arg(file)
            .output()
            .unwrap()
    };
    let good = "[[flows]]\nname = \"hello\"\n\n[[flows.steps]]\nname = \"first\"\ncall = \"helloworld.Greeter.SayHello\"\nextract = { greeting = \"response.name\" }\n\n[[flows.steps]]\nname = \"second\"\ncall = \"helloworld.Greeter.SayHello\"\ndata = { name = \"{{.vars.greeting}}\" }\nexpect = { fields = [{ path = \"response.name\", matches = \"^a\" }] }\n";
    for (from, to, says) in [
        ("\"response.name\" }\n\n", "\"response.nam\" }\n\n", "line 7: flows.steps.extract: step 'first': path `response.nam`"),
        ("path = \"response.name\"", "path = \"response\"", "line 13: flows.steps.expect.fields: step 'second': path `response`: `response` is a message"),
        ("{{.vars.greeting}}", "{{.vars.greting}}", "line 12: flows.steps.data: step 'second' of flow 'hello' uses {{.vars.greting}}"),
        ("call = \"helloworld.Greeter.SayHello\"\ndata", "call = \"helloworld.Greeter.Nope\"\ndata", "line 10: step 'second': unknown call 'helloworld.Greeter.Nope'"),
        ("greeting = \"response.name\"", "greeting = \"header:x greeting\"", "line 7: flows.steps.extract: step 'first': 'x greeting' is not a header name"),
    ] {
        let file = dir.path().join("flow.toml");
        std::fs::write(&file, good.replacen(from, to, 1)).unwrap();
        let out = load_file(&file, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {stderr}");
        assert!(stderr.contains(&format!("--workload {}", file.display())), "{stderr}");
        assert!(stderr.contains(says), "{to}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    // The file that passes every check runs: ten flows of two steps.
    let file = dir.path().join("flow.toml");
    std::fs::write(&file, good).unwrap();
    for transport in ["lab", "h2"] {
        let out = load_file(&file, &["-O", "json", "--transport", transport]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{transport}: {stderr}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["count"], 20, "{transport}: {report}");
        assert_eq!(
            report["mix"]["flows"][0]["count"], 10,
            "{transport}: {report}"
        );
    }
}

#[test]
fn shards_of_a_mix_merge_to_the_draws_of_one_whole_run() {
    let server = Server::start("lab");
    let target = server.target();
    let dir = tempfile::tempdir().unwrap();
    let common = [
        "--insecure",
        "--mix",
        LAB_MIX,
        "--mix-seed",
        "21",
        "-n",
        "2000",
        "-c",
        "8",
        "--connections",
        "2",
    ];
    let whole = load_json(&[&[target.as_str()][..], &common].concat());
    let args = [&[target.as_str()][..], &common].concat();
    let (files, merged) = common::run_shards_and_merge(&args, 2, dir.path());
    // Each shard draws from its calls' numbers in the run's one sequence: together they made
    // the calls of each method the whole run made with that seed.
    assert_eq!(merged["count"], 2000);
    assert_eq!(counts(&merged), counts(&whole));
    assert_eq!(merged["mix"]["seed"], 21);
    // Each method's histogram is the sum of the shards' (its count and slowest call).
    for (index, method) in merged["mix"]["methods"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let parts: Vec<Value> = files
            .iter()
            .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
            .collect();
        let slowest = parts
            .iter()
            .map(|p| {
                p["mix"]["methods"][index]["latency"]["slowest"]
                    .as_u64()
                    .unwrap()
            })
            .max();
        assert_eq!(method["latency"]["slowest"].as_u64(), slowest);
        assert_eq!(method["latency"]["count"], method["ok"]);
    }
}

#[test]
fn the_summary_and_the_load_page_give_each_method_its_row() {
    let server = Server::start("lab");
    let target = server.target();
    let args = [
        target.as_str(),
        "--insecure",
        "--mix",
        LAB_MIX,
        "--mix-seed",
        "9",
        "-n",
        "600",
        "-c",
        "4",
        "--no-history",
    ];
    let report = load_json(&args);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("mix.html");
    let out = grpclab()
        .arg("load")
        .args(args)
        .args(["-O", "html", "-o"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The summary: a line per method with the same counts.
    let summary = grpclab().arg("load").args(args).output().unwrap();
    assert!(summary.status.success());
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(text.contains("Methods (mix seed 9"), "{text}");
    for (name, calls) in counts(&report) {
        let line = text
            .lines()
            .find(|line| line.trim_start().starts_with(&name))
            .unwrap_or_else(|| panic!("no summary line for {name}: {text}"));
        assert!(line.contains(&format!(" {calls} calls (")), "{line}");
    }
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("a mix of 2 methods"), "subtitle");
    let methods = &html[html.find("id=\"methods\"").expect("a Methods section")..];
    // The same seed made the same calls: the page's rows carry the JSON run's counts.
    for (name, calls) in counts(&report) {
        let row = &methods[methods.find(&format!(">{name}<")).expect(&name)..];
        assert!(row.contains(&format!(">{calls} (")), "{name}: {calls}");
    }
}

/// `--threshold METHOD:...` reads one method of the mix: its verdict's figure is that
/// method's own (not the whole run's), a failed one exits 3 with the results written, and a
/// method that is not in the mix (or a run that is no mix) is one line, exit 2.
#[test]
fn a_methods_threshold_judges_that_methods_calls() {
    let server = Server::start("lab");
    let target = server.target();
    let out = grpclab()
        .args([
            "load",
            &target,
            "--insecure",
            "--mix",
            LAB_MIX,
            "--mix-seed",
            "7",
        ])
        .args(["-n", "1000", "-c", "8", "--no-history", "-O", "json"])
        .args(["--threshold", "Stats.Get:rps>=1"])
        .args(["--threshold", "SayHello:errors==0"])
        .args(["--threshold", "helloworld.Greeter.SayHello:p50<=1ns"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("results written");
    let verdicts = report["thresholds"].as_array().expect("verdicts");
    let stats = report["mix"]["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "grpclab.admin.v1.Stats.Get")
        .unwrap();
    // A quarter of the calls: its rate is not the run's.
    let rps = stats["rps"].as_f64().unwrap();
    assert!(rps < report["rps"].as_f64().unwrap() / 2.0, "{stats}");
    assert_eq!(verdicts[0]["passed"], true, "{verdicts:?}");
    assert_eq!(
        verdicts[0]["actual"],
        format!("{rps:.1} req/s"),
        "the method's own rate"
    );
    assert_eq!(verdicts[1]["passed"], true, "{verdicts:?}");
    assert_eq!(verdicts[2]["passed"], false, "{verdicts:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("helloworld.Greeter.SayHello:p50<=1ns"),
        "{stderr}"
    );

    for (args, says) in [
        (
            vec!["--mix", LAB_MIX, "--threshold", "Goodbye:p99<=1ms"],
            "'Goodbye' is no method of the mix; its methods: helloworld.Greeter.SayHello, grpclab.admin.v1.Stats.Get",
        ),
        (
            vec!["--scenario", "complex_proto", "--threshold", "SayHello:p99<=1ms"],
            "this run calls one method",
        ),
    ] {
        let out = grpclab()
            .args(["load", &target, "--insecure", "-n", "10", "--no-history"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(out.stdout.is_empty(), "nothing ran");
    }
}

/// One method twice under two names, each with its own data and metadata (small and large
/// messages, ghz#82/#197): the grpcio server sees each entry's calls with that entry's
/// payload size and metadata, as many as the report gives the entry.
#[test]
fn one_method_under_two_names_sends_each_its_own_data() {
    let Some(Shop {
        mut server,
        target,
        seen_file,
        proto,
        dir,
    }) = grpcio_mix_server()
    else {
        return;
    };
    let workload = dir.path().join("sizes.toml");
    std::fs::write(
        &workload,
        r#"
seed = 5
[[calls]]
call = "mix.v1.Shop.Browse"
name = "small"
weight = 3
data = { name = "s" }
metadata = { "x-kind" = "small" }

[[calls]]
call = "mix.v1.Shop.Browse"
name = "large"
data = { name = "llllllllllllllllllllllllllllllllllllllll" }
metadata = { "x-kind" = "large" }
"#,
    )
    .unwrap();
    let report = load_json(&[
        &target,
        "--insecure",
        "--proto",
        proto.to_str().unwrap(),
        "--workload",
        workload.to_str().unwrap(),
        "-n",
        "400",
        "-c",
        "4",
        "--threshold",
        "large:errors==0",
    ]);
    drop(server.stdin.take());
    assert!(server.wait().unwrap().success());
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&seen_file).unwrap()).unwrap();
    let by_entry = counts(&report);
    assert_eq!(
        by_entry.keys().collect::<Vec<_>>(),
        ["large", "small"],
        "{report}"
    );
    assert!(by_entry.values().all(|calls| *calls > 0), "{by_entry:?}");
    assert_eq!(seen["Browse"]["calls"], 400);
    let kinds: Vec<&str> = seen["Browse"]["x-kind"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let sizes: Vec<u64> = seen["Browse"]["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    for (entry, size) in [("small", 3u64), ("large", 42)] {
        let calls = by_entry[entry] as usize;
        assert_eq!(
            kinds.iter().filter(|k| **k == entry).count(),
            calls,
            "{entry}"
        );
        assert_eq!(
            sizes.iter().filter(|s| **s == size).count(),
            calls,
            "{entry}"
        );
    }
    assert_eq!(report["thresholds"][0]["passed"], true, "{report}");
}

/// The counting grpcio server (`tests/interop/grpcio_mix_server.py`) and what a test needs of
/// it.
struct Shop {
    server: std::process::Child,
    target: String,
    /// What it saw, written once its standard input closes.
    seen_file: std::path::PathBuf,
    /// Its service's .proto (`mix.v1.Shop`: Browse and Buy, both Item to Item).
    proto: std::path::PathBuf,
    dir: tempfile::TempDir,
}

/// Starts the counting grpcio server; `None` (the test skipped) where grpcio is missing
/// outside CI.
fn grpcio_mix_server() -> Option<Shop> {
    if !Command::new("python3")
        .args(["-c", "import grpc"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3 grpcio is missing in CI: .ci/run must install it"
        );
        eprintln!("SKIPPED: python3 grpcio is not installed (bash .ci/run installs it)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let seen_file = dir.path().join("seen.json");
    let mut server = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/interop/grpcio_mix_server.py"
        ))
        .arg(&seen_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the grpcio server");
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut port,
    )
    .unwrap();
    let target = format!("127.0.0.1:{}", port.trim());
    let proto = dir.path().join("shop.proto");
    std::fs::write(
        &proto,
        "syntax = \"proto3\";\npackage mix.v1;\nmessage Item { string name = 1; uint64 id = 2; }\nservice Shop {\n  rpc Browse(Item) returns (Item);\n  rpc Buy(Item) returns (Item);\n}\n",
    )
    .unwrap();
    Some(Shop {
        server,
        target,
        seen_file,
        proto,
        dir,
    })
}

/// A mix's figures for the whole run are its methods' summed, second by second: whether
/// each call is recorded in its method's figures only (the default) or in the run's too
/// (`--details`, which lists calls as they end), every second's count adds up to the run's,
/// each second with successful calls has its percentiles, and the run's latency histogram
/// holds every method's successful calls.
#[test]
fn a_mix_run_is_its_methods_summed_second_by_second() {
    let server = Server::start("lab");
    let target = server.target();
    for extra in [&[][..], &["--details"][..]] {
        let args = [
            &[
                target.as_str(),
                "--insecure",
                "--mix",
                LAB_MIX,
                "-z",
                "2500ms",
                "-c",
                "4",
            ][..],
            &["--no-history", "--rps", "2000"][..],
            extra,
        ]
        .concat();
        let report = load_json(&args);
        let count = report["count"].as_u64().unwrap();
        let methods: u64 = counts(&report).values().sum();
        assert_eq!(methods, count, "{extra:?}");
        let seconds = report["perSecond"].as_array().expect("perSecond");
        assert!(seconds.len() >= 2, "{extra:?}: {seconds:?}");
        assert_eq!(sum_of(&report["perSecond"], "count"), count, "{extra:?}");
        for second in seconds {
            if second["count"].as_u64() > second["errors"].as_u64() {
                assert!(second["p50"].as_u64().unwrap() > 0, "{extra:?}: {second}");
                assert!(
                    second["inFlightMax"].as_u64().unwrap() > 0,
                    "{extra:?}: {second}"
                );
            }
        }
        let ok = sum_of(&report["mix"]["methods"], "ok");
        assert_eq!(report["ok"].as_u64(), Some(ok), "{extra:?}");
        let in_buckets = sum_of(&report["histogram"], "count");
        assert_eq!(in_buckets, ok, "{extra:?}: the run's histogram");
        let latency_sum = sum_of(&report["mix"]["methods"], "latencySum");
        assert_eq!(
            report["average"].as_u64(),
            Some(latency_sum / count),
            "{extra:?}"
        );
    }
}

/// The sum of `field` over the objects of the JSON array `items`.
fn sum_of(items: &Value, field: &str) -> u64 {
    items
        .as_array()
        .expect("an array")
        .iter()
        .map(|item| item[field].as_u64().expect(field))
        .sum()
}
