//! Flows (`[[flows]]` in a workload file) over real sockets against the session service
//! every built-in server serves: each step carries the earlier steps' reply fields, the
//! server checks them (a wrong token or another user's item is refused), expectations count
//! the replies that miss them, and every flow and step is accounted for.

mod common;

use common::{grpclab, signal, Server};
use serde_json::Value;

/// Login as a user of its own per flow, list that user's items with the token, get the
/// first listed item: the server answers Get OK only when the token and the item are the
/// same user's, so every Get that succeeds proves both values came from this flow's replies.
const CARRY: &str = r#"
[[flows]]
name = "browse"

[[flows.steps]]
name = "login"
call = "grpclab.session.v1.Sessions.Login"
data = { user = "u{{.RequestNumber}}" }
extract = { token = "token" }

[[flows.steps]]
name = "list"
call = "grpclab.session.v1.Sessions.List"
data = { token = "{{.vars.token}}" }
extract = { sku = "items[0].sku" }

[[flows.steps]]
name = "get"
call = "grpclab.session.v1.Sessions.Get"
metadata = { x-flow-token = "{{.vars.token}}" }
data = { token = "{{.vars.token}}", sku = "{{.vars.sku}}" }
expect = { fields = [{ path = "sku", matches = "^sku-u[0-9]+-0$" }] }
"#;

/// A plain call beside the flows: the same Login, with a name of its own.
const LOGIN_CALL: &str =
    "name = \"plain-login\"\ncall = \"grpclab.session.v1.Sessions.Login\"\ndata = { user = \"ann\" }\n";

/// `grpclab load TARGET --workload FILE ARGS -O json`: the report (and the exit code).
fn run_flows(target: &str, workload: &str, args: &[&str]) -> (Value, Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flows.toml");
    std::fs::write(&file, workload).unwrap();
    let out = grpclab()
        .args(["load", target, "--insecure", "-O", "json", "--no-history"])
        .arg("--workload")
        .arg(&file)
        .args(args)
        .output()
        .expect("run grpclab load");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "no JSON report ({err}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (report, out.status.code())
}

/// The step of `report` named `name` (a method of the mix with `flow` set).
fn step<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["mix"]["methods"]
        .as_array()
        .and_then(|methods| methods.iter().find(|m| m["name"] == name))
        .unwrap_or_else(|| panic!("no step {name}: {report}"))
}

#[test]
fn every_step_carries_the_values_of_its_own_flow_on_both_transports_closed_and_open_loop() {
    let runs = ["lab", "h2"].into_iter().flat_map(|transport| {
        [&["-c", "8"][..], &["-c", "8", "--rps", "3000"][..]]
            .map(|pacing| [pacing, &["--transport", transport][..]].concat())
    });
    let runs: Vec<Vec<&str>> = runs.collect();
    for implementation in ["lab", "tonic-mt"] {
        let server = Server::start(implementation);
        let target = server.target();
        for pacing in &runs {
            let before = server.stats()["calls"].as_u64().unwrap_or(0);
            let args = [&pacing[..], &["-n", "300", "--connections", "2"][..]].concat();
            let (report, code) = run_flows(&target, CARRY, &args);
            let what = format!("{implementation} {pacing:?}");
            assert_eq!(code, Some(0), "{what}: {report}");
            let flow = &report["mix"]["flows"][0];
            assert_eq!(flow["name"], "browse", "{what}");
            assert_eq!(flow["count"], 300, "{what}: {flow}");
            assert_eq!(flow["passed"], 300, "{what}: {flow}");
            assert_eq!(flow["errors"], 0, "{what}: {flow}");
            assert_eq!(flow["unexpected"], 0, "{what}: {flow}");
            for name in ["login", "list", "get"] {
                let step = step(&report, name);
                assert_eq!(step["count"], 300, "{what} {name}: {step}");
                assert_eq!(step["ok"], 300, "{what} {name}: {step}");
                assert_eq!(step["flow"], "browse", "{what} {name}");
            }
            // Every call of the run is a step's, and the server answered each.
            assert_eq!(report["count"], 900, "{what}");
            assert_eq!(report["unaccounted"].as_u64().unwrap_or(0), 0, "{what}");
            let served = server.stats()["calls"].as_u64().unwrap_or(0) - before;
            assert_eq!(served, 900, "{what}");
        }
    }
}

#[test]
fn a_server_answering_wrongly_every_tenth_list_is_exactly_that_share_of_unexpected_replies() {
    // Every 10th List of the (fresh) server names another user's item first: the step's
    // expectation fails on exactly those, the call itself ends OK, and the flow stops there.
    let workload = r#"
[[flows]]
name = "check"

[[flows.steps]]
name = "login"
call = "grpclab.session.v1.Sessions.Login"
data = { user = "ann" }
extract = { token = "token" }

[[flows.steps]]
name = "list"
call = "grpclab.session.v1.Sessions.List"
data = { token = "{{.vars.token}}", fault_every = 10 }
expect = { fields = [{ path = "items[0].sku", matches = "^sku-ann-" }] }

[[flows.steps]]
name = "get"
call = "grpclab.session.v1.Sessions.Get"
data = { token = "{{.vars.token}}", sku = "sku-ann-1" }
"#;
    for transport in ["lab", "h2"] {
        // A fresh server per run: its fault counter starts at the first List.
        let server = Server::start("lab");
        let args = ["-n", "500", "-c", "6", "--transport", transport];
        let (report, code) = run_flows(&server.target(), workload, &args);
        assert_eq!(code, Some(0), "{transport}: {report}");
        every_tenth_list_unexpected(&report);
    }
}

/// The figures of [`a_server_answering_wrongly_every_tenth_list_is_exactly_that_share_of_unexpected_replies`].
fn every_tenth_list_unexpected(report: &Value) {
    let list = step(report, "list");
    assert_eq!(list["count"], 500, "{list}");
    assert_eq!(list["ok"], 500, "an unexpected reply is no error: {list}");
    assert_eq!(list["unexpected"], 50, "{list}");
    let reasons = list["unexpectedDistribution"].as_object().unwrap();
    assert_eq!(reasons.len(), 1, "{list}");
    let (reason, count) = reasons.iter().next().unwrap();
    assert!(reason.contains("items[0].sku is 'wrong-ann'"), "{reason}");
    assert_eq!(count, 50);
    // The flows that met the wrong list stopped before Get.
    assert_eq!(step(report, "get")["count"], 450, "{report}");
    let flow = &report["mix"]["flows"][0];
    assert_eq!(flow["count"], 500, "{flow}");
    assert_eq!(flow["unexpected"], 50, "{flow}");
    assert_eq!(flow["passed"], 450, "{flow}");
    assert_eq!(flow["errors"], 0, "{flow}");
    assert!(
        flow["unexpectedDistribution"]
            .as_object()
            .unwrap()
            .keys()
            .all(|reason| reason.starts_with("step list: ")),
        "{flow}"
    );
}

#[test]
fn a_step_that_fails_by_status_ends_its_flow_as_an_error_unless_told_to_continue() {
    // A forged token: List is refused (UNAUTHENTICATED) where OK was expected — an error,
    // not an unexpected reply. With on_failure = "continue" the flow goes on to Get.
    let runs = [
        ("stop", 0, "lab"),
        ("continue", 40, "lab"),
        ("continue", 40, "h2"),
    ];
    for (on_failure, gets, transport) in runs {
        let workload = format!(
            r#"
[[flows]]
name = "forged"

[[flows.steps]]
name = "list"
call = "grpclab.session.v1.Sessions.List"
data = {{ token = "tok.ann.1" }}
on_failure = "{on_failure}"

[[flows.steps]]
name = "get"
call = "grpclab.session.v1.Sessions.Get"
data = {{ token = "tok.ann.1", sku = "sku-ann-1" }}
expect = {{ status = "UNAUTHENTICATED" }}
"#
        );
        let server = Server::start("lab");
        let args = ["-n", "40", "-c", "4", "--transport", transport];
        let (report, code) = run_flows(&server.target(), &workload, &args);
        assert_ne!(code, Some(2), "{report}");
        let flow = &report["mix"]["flows"][0];
        assert_eq!(flow["count"], 40, "{on_failure}: {flow}");
        assert_eq!(flow["errors"], 40, "{on_failure}: {flow}");
        assert_eq!(flow["unexpected"], 0, "{on_failure}: {flow}");
        assert_eq!(
            flow["statusCodeDistribution"]["Unauthenticated"], 40,
            "{flow}"
        );
        let list = step(&report, "list");
        assert_eq!(list["errors"], 40, "{list}");
        assert_eq!(list["unexpected"], 0, "{list}");
        let get = step(&report, "get");
        assert_eq!(get["count"], gets, "{on_failure}: {get}");
        // Get expects UNAUTHENTICATED and gets it: no unexpected reply, though a failed status.
        assert_eq!(get["unexpected"], 0, "{get}");
        assert_eq!(report["count"], 40 + gets, "{on_failure}");
    }
}

/// Constant steps (nothing read of the reply, OK expected, no retry) take the engine's short
/// way past an OK answer; they still go one after another, the think time between them kept,
/// each counted once: on both transports, closed and open loop.
#[test]
fn constant_steps_run_in_order_each_counted_once() {
    let login = |name: &str, user: &str, think: &str| {
        format!(
            "[[flows.steps]]\nname = \"{name}\"\ncall = \"grpclab.session.v1.Sessions.Login\"\ndata = {{ user = \"{user}\" }}\n{think}"
        )
    };
    let workload = format!(
        "[[flows]]\nname = \"constant\"\n{}{}{}",
        login("first", "ann", ""),
        login("second", "bob", "think = \"2ms\"\n"),
        login("third", "cid", "")
    );
    let server = Server::start("lab");
    for transport in ["lab", "h2"] {
        for pacing in [&["-c", "8"][..], &["-c", "8", "--rps", "2000"][..]] {
            let before = server.stats()["calls"].as_u64().unwrap_or(0);
            let args = [pacing, &["-n", "200", "--transport", transport][..]].concat();
            let (report, code) = run_flows(&server.target(), &workload, &args);
            let what = format!("{transport} {pacing:?}");
            assert_eq!(code, Some(0), "{what}: {report}");
            let flow = &report["mix"]["flows"][0];
            assert_eq!(flow["count"], 200, "{what}: {flow}");
            assert_eq!(flow["passed"], 200, "{what}: {flow}");
            for name in ["first", "second", "third"] {
                let step = step(&report, name);
                assert_eq!(step["count"], 200, "{what} {name}: {step}");
                assert_eq!(step["ok"], 200, "{what} {name}: {step}");
            }
            // A flow lasts at least its think time: every one waited 2 ms between steps.
            let fastest = flow["latency"]["fastest"].as_f64().unwrap_or(0.0);
            assert!(fastest >= 2e6, "{what}: fastest flow {fastest} ns: {flow}");
            assert_eq!(report["count"], 600, "{what}");
            let served = server.stats()["calls"].as_u64().unwrap_or(0) - before;
            assert_eq!(served, 600, "{what}");
        }
    }
}

/// A server-streaming step reads its replies to the stream's end: its count of messages is
/// checked (`expect.messages`) and its fields are read from the first; a stream of none is
/// OK; a count that misses is an unexpected reply naming both counts. On both transports,
/// against lab and tonic.
#[test]
fn a_server_streaming_step_counts_its_replies_and_reads_the_first() {
    let workload = |count: u32, expect: &str| {
        format!(
            r#"
[[flows]]
name = "watch"

[[flows.steps]]
name = "login"
call = "grpclab.session.v1.Sessions.Login"
data = {{ user = "ann" }}
extract = {{ token = "token" }}

[[flows.steps]]
name = "feed"
call = "grpclab.streaming.v1.StreamingEcho.Feed"
data = {{ count = {count} }}
metadata = {{ x-token = "{{{{.vars.token}}}}" }}
{expect}
"#
        )
    };
    // (replies streamed, the step's expectation, the feed steps that pass, the reason of
    // those that do not)
    let cases = [
        (
            3,
            r#"expect = { messages = 3, fields = [{ path = "sequence", equals = "0" }] }"#,
            true,
            "",
        ),
        (
            3,
            "expect = { messages = 4 }",
            false,
            "3 reply messages where 4 were expected",
        ),
        (0, "expect = { messages = 0 }", true, ""),
        (0, "", true, ""),
        (
            0,
            r#"extract = { first = "sequence" }"#,
            false,
            "extract: no reply message to read it from",
        ),
    ];
    for implementation in ["lab", "tonic-mt"] {
        let server = Server::start(implementation);
        for transport in ["lab", "h2"] {
            for (count, expect, passes, reason) in cases {
                let args = ["-n", "60", "-c", "4", "--transport", transport];
                let (report, code) = run_flows(&server.target(), &workload(count, expect), &args);
                let what = format!("{implementation} {transport} feed of {count}, {expect:?}");
                assert_eq!(code, Some(0), "{what}: {report}");
                let feed = step(&report, "feed");
                assert_eq!(feed["count"], 60, "{what}: {feed}");
                assert_eq!(feed["ok"], 60, "{what}: a stream of {count} is OK: {feed}");
                let flow = &report["mix"]["flows"][0];
                assert_eq!(flow["count"], 60, "{what}: {flow}");
                if passes {
                    assert_eq!(flow["passed"], 60, "{what}: {flow}");
                    assert_eq!(feed["unexpected"], 0, "{what}: {feed}");
                } else {
                    assert_eq!(feed["unexpected"], 60, "{what}: {feed}");
                    let reasons = feed["unexpectedDistribution"].as_object().unwrap();
                    assert!(
                        reasons.keys().all(|said| said.contains(reason)),
                        "{what}: {feed}"
                    );
                }
            }
        }
    }
}

/// A step refuses a method that streams its requests, and a count of messages a unary
/// method can never answer: one line naming the file, line and step; exit 2.
#[test]
fn a_step_with_a_shape_it_cannot_have_is_refused_in_one_line() {
    let server = Server::start("lab");
    let cases = [
        (
            "call = \"grpclab.streaming.v1.StreamingEcho.Upload\"\ndata = { payload = \"\" }\n",
            "streams its requests; flow steps take unary or server-streaming methods",
        ),
        (
            "call = \"grpclab.session.v1.Sessions.Login\"\ndata = { user = \"ann\" }\nexpect = { messages = 2 }\n",
            "expect.messages = 2: grpclab.session.v1.Sessions.Login is unary",
        ),
    ];
    for (step, says) in cases {
        let workload = format!("[[flows]]\nname = \"f\"\n\n[[flows.steps]]\nname = \"s\"\n{step}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("shape.toml");
        std::fs::write(&file, workload).unwrap();
        let out = grpclab()
            .args([
                "load",
                &server.target(),
                "--insecure",
                "-n",
                "1",
                "--workload",
            ])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("{} line 5: step 's'", file.display())),
            "{stderr}"
        );
        assert!(stderr.contains(says), "{stderr}");
    }
}

/// The guide's flow example runs as written: its command is in docs/guide.md, its file is
/// docs/examples/session-flow.toml, and every 10th List of a fresh server answered wrongly
/// is an unexpected reply that stops its flow.
#[test]
fn the_guides_flow_example_runs_as_written() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let guide = std::fs::read_to_string(root.join("docs/guide.md")).unwrap();
    let command = "--workload docs/examples/session-flow.toml -n 3000 -c 8";
    assert!(
        guide.contains(command),
        "the guide no longer runs: {command}"
    );
    let workload = std::fs::read_to_string(root.join("docs/examples/session-flow.toml")).unwrap();
    let server = Server::start("lab");
    let args: Vec<&str> = command.split(' ').skip(2).collect();
    let (report, code) = run_flows(&server.target(), &workload, &args);
    assert_eq!(code, Some(0), "{report}");
    let flow = &report["mix"]["flows"][0];
    assert_eq!(flow["count"], 3000, "{flow}");
    assert_eq!(flow["passed"], 2700, "{flow}");
    assert_eq!(flow["unexpected"], 300, "{flow}");
    assert_eq!(flow["errors"], 0, "{flow}");
    assert_eq!(step(&report, "get")["ok"], 2700, "{report}");
}

/// Thresholds read a flow's runs (`flow:NAME:`) and a step's calls (`step:NAME:`), a miss
/// (status or unexpected reply) counting as a failure: a flow failing 10 % of its runs fails
/// `errors<1%` (exit 3) while its login step passes it; a name that is no flow is one line.
#[test]
fn thresholds_on_flows_and_steps_judge_their_own_runs() {
    let workload = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/examples/session-flow.toml"),
    )
    .unwrap();
    let server = Server::start("lab");
    let target = server.target();
    for (threshold, exit) in [
        ("flow:browse:errors<1%", Some(3)),
        ("step:list:errors<1%", Some(3)),
        ("step:login:errors<1%", Some(0)),
        ("flow:browse:errors<=10%", Some(0)),
    ] {
        let (report, code) = run_flows(
            &target,
            &workload,
            &["-n", "500", "-c", "4", "--threshold", threshold],
        );
        assert_eq!(code, exit, "{threshold}: {}", report["thresholds"]);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flows.toml");
    std::fs::write(&file, &workload).unwrap();
    let out = grpclab()
        .args(["load", &target, "--insecure", "-n", "10", "--no-history"])
        .args(["--threshold", "flow:nope:p99<1s", "--workload"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("'flow:nope' is no method of the mix"),
        "{stderr}"
    );
    assert!(stderr.contains("flow:browse"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// Shards of a run with flows merge to what one whole run with the same seed draws: the same
/// plain calls and flows, each flow's runs and each step's calls, histograms summed.
#[test]
fn shards_of_a_run_with_flows_merge_to_one_whole_run() {
    let workload = format!("seed = 5\n\n[[calls]]\n{}weight = 1\n{CARRY}\n", LOGIN_CALL).replacen(
        "name = \"browse\"",
        "name = \"browse\"\nweight = 3",
        1,
    );
    let server = Server::start("lab");
    let target = server.target();
    let dir = tempfile::tempdir().unwrap();
    let common = ["-n", "900", "-c", "6", "--connections", "3"];
    let (whole, code) = run_flows(&target, &workload, &common);
    assert_eq!(code, Some(0), "{whole}");
    let file = dir.path().join("flows.toml");
    std::fs::write(&file, &workload).unwrap();
    let file_arg = file.to_str().unwrap();
    let args = [
        &[target.as_str(), "--insecure", "--workload", file_arg][..],
        &common,
    ]
    .concat();
    let (_, merged) = common::run_shards_and_merge(&args, 3, dir.path());
    let counts = |report: &Value| -> Vec<(String, u64)> {
        let mix = &report["mix"];
        mix["methods"]
            .as_array()
            .unwrap()
            .iter()
            .chain(mix["flows"].as_array().unwrap())
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_owned(),
                    m["count"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(counts(&merged), counts(&whole), "{}", merged["mix"]);
    let flow = &merged["mix"]["flows"][0];
    assert!(flow["count"].as_u64().unwrap() > 500, "{flow}");
    assert_eq!(flow["passed"], flow["count"], "{flow}");
    assert_eq!(flow["latency"]["count"], flow["count"], "{flow}");
}

/// The server dies while flows run (think times keep some between steps): every flow still
/// ends once, as passed or as an error at the step the loss met (or Canceled between steps
/// at the run's end), every step call is a call of the run, and nothing is left unaccounted
/// — on both transports.
#[test]
fn a_server_that_dies_mid_run_leaves_every_flow_accounted_for_on_both_transports() {
    let workload = CARRY.replacen(
        "extract = { token = \"token\" }\n",
        "extract = { token = \"token\" }\nthink = \"1ms\"\n",
        1,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flows.toml");
    std::fs::write(&file, &workload).unwrap();
    for transport in ["lab", "h2"] {
        let server = Server::start("lab");
        let load = grpclab()
            .args([
                "load",
                &server.target(),
                "--insecure",
                "-O",
                "json",
                "--no-history",
            ])
            .args(["-z", "3s", "-c", "8", "--connections", "2", "-t", "2s"])
            .args(["--transport", transport, "--workload"])
            .arg(&file)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run grpclab load");
        // Kill the server once it has served a share of the run, not after some time.
        while server.stats()["calls"].as_u64().unwrap_or(0) < 1500 {
            std::thread::yield_now();
        }
        signal(server.child.id(), "KILL");
        let out = load.wait_with_output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
            panic!(
                "{transport}: no report ({err}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let flow = &report["mix"]["flows"][0];
        let flows = flow["count"].as_u64().unwrap();
        let (passed, errors) = (
            flow["passed"].as_u64().unwrap(),
            flow["errors"].as_u64().unwrap(),
        );
        assert_eq!(passed + errors, flows, "{transport}: {flow}");
        assert!(passed > 0 && errors > 0, "{transport}: {flow}");
        assert_eq!(flow["unexpected"], 0, "{transport}: {flow}");
        let steps: u64 = ["login", "list", "get"]
            .iter()
            .map(|name| step(&report, name)["count"].as_u64().unwrap())
            .sum();
        assert_eq!(
            report["count"].as_u64(),
            Some(steps),
            "{transport}: {report}"
        );
        assert_eq!(
            report["unaccounted"].as_u64().unwrap_or(0),
            0,
            "{transport}"
        );
        // A flow that met the loss stopped there: no later step was sent for it.
        let logins = step(&report, "login")["count"].as_u64().unwrap();
        assert_eq!(logins, flows, "{transport}: every flow sent its first step");
        let gets = step(&report, "get")["count"].as_u64().unwrap();
        assert!(gets >= passed, "{transport}: {report}");
    }
}

/// A timed run ends while most flows wait out a think time: each of those ends Canceled at
/// the step it would have sent next, counted once, and the run adds up — on both transports.
#[test]
fn flows_waiting_between_steps_when_the_run_ends_are_canceled_and_counted() {
    let workload = CARRY.replacen(
        "extract = { token = \"token\" }\n",
        "extract = { token = \"token\" }\nthink = \"200ms\"\n",
        1,
    );
    let server = Server::start("lab");
    for transport in ["lab", "h2"] {
        let args = ["-z", "1s", "-c", "8", "--transport", transport];
        let (report, code) = run_flows(&server.target(), &workload, &args);
        assert_eq!(code, Some(0), "{transport}: {report}");
        let flow = &report["mix"]["flows"][0];
        let flows = flow["count"].as_u64().unwrap();
        let canceled = flow["statusCodeDistribution"]["Canceled"]
            .as_u64()
            .unwrap_or(0);
        assert!(canceled > 0, "{transport}: {flow}");
        let reasons = flow["errorDistribution"].as_object().unwrap();
        assert!(
            reasons
                .keys()
                .all(|reason| reason.contains("step list: the run ended before it was sent")),
            "{transport}: {flow}"
        );
        let (passed, errors) = (
            flow["passed"].as_u64().unwrap(),
            flow["errors"].as_u64().unwrap(),
        );
        assert_eq!(passed + errors, flows, "{transport}: {flow}");
        assert_eq!(errors, canceled, "{transport}: {flow}");
        assert_eq!(
            step(&report, "login")["count"].as_u64(),
            Some(flows),
            "{transport}"
        );
        assert_eq!(
            step(&report, "list")["count"].as_u64(),
            Some(passed),
            "{transport}"
        );
        assert_eq!(
            report["unaccounted"].as_u64().unwrap_or(0),
            0,
            "{transport}"
        );
    }
}

/// Every output carries the flows: the CSV lists each step call with its flow and run
/// (each run's three steps in order), the JSON details name each call's run, and the page
/// has a row per flow and per step with the JSON's counts, and history shows them again.
#[test]
fn the_csv_json_details_and_page_name_each_flow_and_step() {
    let server = Server::start("lab");
    let target = server.target();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flows.toml");
    std::fs::write(&file, format!("[[calls]]\n{LOGIN_CALL}\n{CARRY}")).unwrap();
    // Every run is kept in a history of its own.
    let store = dir.path().join("history.sqlite");
    let store = store.to_str().unwrap();
    let run = |format: &str, out: &std::path::Path, extra: &[&str]| {
        let done = grpclab()
            .args(["load", &target, "--insecure", "--history", store])
            .args(["-n", "120", "-c", "4"])
            .args(["--mix-seed", "3", "-O", format, "-o"])
            .arg(out)
            .args(extra)
            .arg("--workload")
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            done.status.success(),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
        std::fs::read_to_string(out).unwrap()
    };
    // CSV: header, then one row per call; a step's row names its flow and run.
    let csv = run("csv", &dir.path().join("calls.csv"), &[]);
    let mut lines = csv.lines().skip(1);
    assert_eq!(
        lines.next(),
        Some("duration (ms),status,error,method,flow,flow run")
    );
    let mut runs: std::collections::BTreeMap<u64, Vec<String>> = Default::default();
    let mut plain = 0;
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), 6, "{line}");
        match fields[4] {
            "" => {
                assert_eq!(fields[3], "plain-login", "{line}");
                assert_eq!(fields[5], "", "{line}");
                plain += 1;
            }
            flow => {
                assert_eq!(flow, "browse", "{line}");
                let number: u64 = fields[5].parse().expect(line);
                runs.entry(number).or_default().push(fields[3].to_owned());
            }
        }
    }
    assert!(plain > 0, "{csv}");
    assert!(!runs.is_empty(), "{csv}");
    for (number, steps) in &runs {
        assert_eq!(steps, &["login", "list", "get"], "run {number}");
    }
    assert_eq!(
        plain + runs.len(),
        120,
        "every ticket: a plain call or a flow run"
    );
    // JSON details: the same runs, each named by its step calls.
    let json = run("json", &dir.path().join("run.json"), &["--details"]);
    let report: Value = serde_json::from_str(&json).unwrap();
    let mut from_json: std::collections::BTreeMap<u64, usize> = Default::default();
    for call in report["details"].as_array().unwrap() {
        if let Some(number) = call["flowRun"].as_u64() {
            *from_json.entry(number).or_default() += 1;
        } else {
            assert_eq!(call["method"], "plain-login", "{call}");
        }
    }
    assert_eq!(
        from_json.len(),
        runs.len(),
        "the same seed draws the same flows"
    );
    assert!(from_json.values().all(|&steps| steps == 3), "{from_json:?}");
    // The page: a row per flow and per step, with the JSON run's counts (same seed).
    let html = run("html", &dir.path().join("page.html"), &[]);
    assert!(html.contains("1 method and 1 flow ·"), "subtitle");
    let flows = &html[html.find("id=\"flows\"").expect("a Flows section")..];
    let flow = &report["mix"]["flows"][0];
    let row = &flows[flows.find(">browse<").expect("the flow's row")..];
    assert!(row.contains(&format!(">{}<", flow["count"])), "{flow}");
    for name in ["login", "list", "get"] {
        let calls = step(&report, name)["count"].as_u64().unwrap();
        let row = &flows[flows.find(&format!(">{name}<")).expect(name)..];
        assert!(row.contains(&format!(">{calls}<")), "{name}: {calls}");
    }
    let methods = &html[html.find("id=\"methods\"").expect("a Methods section")..];
    let methods = &methods[..methods.find("id=\"flows\"").unwrap_or(methods.len())];
    assert!(
        methods.contains(">plain-login<"),
        "plain methods stay in Methods"
    );
    assert!(
        !methods.contains(">login<"),
        "steps are in Flows, not Methods"
    );
    // History: a stored run shows again with its flows.
    let page = dir.path().join("shown.html");
    let shown = grpclab()
        .args(["history", "show", "1", "--history", store, "-o"])
        .arg(&page)
        .env_remove("GRPCLAB_HISTORY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&shown.stderr);
    assert!(shown.status.success(), "{stderr}");
    let shown = std::fs::read_to_string(&page).unwrap();
    let flows = &shown[shown
        .find("id=\"flows\"")
        .expect("a Flows section in history")..];
    for name in [">browse<", ">login<", ">list<", ">get<"] {
        assert!(flows.contains(name), "{name}");
    }
}

/// A step takes one value from its reply's headers and one from its trailers (the recording
/// server names each answer: header `x-call-number: N`, trailer `x-served-by: recording-N`);
/// the next step sends both as metadata. Every second call carries its own flow's pair: N
/// and recording-N of one answer, each answer's pair once, on both transports.
#[test]
fn a_step_carries_a_header_and_a_trailer_of_its_reply_on_both_transports() {
    use common::recording::{Behaviour, RecordingServer};
    let proto = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/complex_proto/helloworld.proto");
    let workload = r#"
[[flows]]
name = "named"

[[flows.steps]]
name = "first"
call = "helloworld.Greeter.SayHello"
data = { request = { name = "a" } }
extract = { number = "header:X-Call-Number", by = "trailer:x-served-by" }

[[flows.steps]]
name = "second"
call = "helloworld.Greeter.SayHello"
data = { request = { name = "b" } }
metadata = { x-carried = "{{.vars.number}}/{{.vars.by}}" }
"#;
    for transport in ["lab", "h2"] {
        let server = RecordingServer::start(Behaviour {
            numbered: true,
            ..Behaviour::default()
        });
        let args = [
            "--proto",
            proto.to_str().unwrap(),
            "-n",
            "200",
            "-c",
            "8",
            "--transport",
            transport,
        ];
        let (report, code) = run_flows(&server.target(), workload, &args);
        assert_eq!(code, Some(0), "{transport}: {report}");
        assert_eq!(
            report["mix"]["flows"][0]["passed"], 200,
            "{transport}: {report}"
        );
        let calls = server.take();
        assert_eq!(calls.len(), 400, "{transport}");
        let mut carried: Vec<u64> = Vec::new();
        for call in &calls {
            let Some((_, value)) = call.metadata.iter().find(|(name, _)| name == "x-carried")
            else {
                continue;
            };
            let value = String::from_utf8_lossy(value).into_owned();
            let (number, by) = value.split_once('/').unwrap_or_else(|| panic!("{value}"));
            assert_eq!(
                by,
                format!("recording-{number}"),
                "{transport}: one answer's pair"
            );
            carried.push(number.parse().unwrap());
        }
        assert_eq!(
            carried.len(),
            200,
            "{transport}: every second step carried a pair"
        );
        carried.sort_unstable();
        carried.dedup();
        assert_eq!(carried.len(), 200, "{transport}: each answer's pair once");
    }
}

/// A header the reply does not have is the step's unexpected outcome, with the name said.
#[test]
fn a_missing_header_is_an_unexpected_reply_naming_it() {
    use common::recording::{Behaviour, RecordingServer};
    let proto = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/complex_proto/helloworld.proto");
    let workload = r#"
[[flows]]
name = "f"
[[flows.steps]]
name = "first"
call = "helloworld.Greeter.SayHello"
data = { request = { name = "a" } }
extract = { token = "header:x-token" }
"#;
    let server = RecordingServer::start(Behaviour::default());
    let args = ["--proto", proto.to_str().unwrap(), "-n", "10"];
    let (report, _) = run_flows(&server.target(), workload, &args);
    let flow = &report["mix"]["flows"][0];
    assert_eq!(flow["unexpected"], 10, "{report}");
    assert!(
        report
            .to_string()
            .contains("the reply has no header x-token"),
        "{report}"
    );
}
