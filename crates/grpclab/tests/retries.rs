//! Retries and hedging as gRPC's service config states them (a workload entry's `retry` and
//! `hedging`), over real sockets. Retries against the session service, whose Login refuses
//! every Nth login of its process with UNAVAILABLE (`unavailable_every`); hedging against
//! the recording server (tests/common/recording.rs), which stalls calls that ask it to and
//! counts the ones the client resets meanwhile. Each call is counted once, its attempts
//! apart, and the server's own count of attempts is the client's.

mod common;

use common::recording::{Behaviour, RecordingServer};
use common::{load_report, Server};
use serde_json::Value;
use std::time::Duration;

/// A workload of one Login call (every `every`th refused) with `retry`.
fn workload(every: u32, retry: &str) -> String {
    format!(
        "[[calls]]\nname = \"login\"\ncall = \"grpclab.session.v1.Sessions.Login\"\ndata = {{ user = \"ann\", unavailable_every = {every} }}\nretry = {{ {retry} }}\n"
    )
}

const RETRY_3: &str = "maxAttempts = 3, initialBackoff = \"0.001s\", maxBackoff = \"0.002s\", backoffMultiplier = 2, retryableStatusCodes = [\"UNAVAILABLE\"]";

/// `grpclab load TARGET --workload (text) ARGS -O json`: the report, the exit code, stderr.
fn run(target: &str, text: &str, args: &[&str]) -> (Option<Value>, Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("retry.toml");
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap();
    load_report(&[&[target, "--insecure", "--workload", file][..], args].concat())
}

#[test]
fn every_fifth_attempt_refused_one_call_at_a_time_is_retried_exactly_once() {
    // One call at a time: attempt 5k is refused and its retry, attempt 5k+1, passes. For
    // 400 calls the server sees 499 attempts: 99 of them (5, 10, ..., 495) refused and
    // retried, the 400th call passing at attempt 499.
    for transport in ["lab", "h2"] {
        let server = Server::start("lab");
        let args = ["-n", "400", "-c", "1", "--transport", transport];
        let (report, code, stderr) = run(&server.target(), &workload(5, RETRY_3), &args);
        let report = report.unwrap_or_else(|| panic!("{transport}: {stderr}"));
        assert_eq!(code, Some(0), "{transport}: {stderr}");
        assert_eq!(report["count"], 400, "{transport}: {report}");
        assert_eq!(
            report["ok"], 400,
            "{transport}: every refused attempt was retried"
        );
        assert_eq!(report["retries"], 99, "{transport}: {report}");
        assert_eq!(
            server.stats()["calls"],
            499,
            "{transport}: the server saw every attempt"
        );
        assert_eq!(
            report["unaccounted"].as_u64().unwrap_or(0),
            0,
            "{transport}"
        );
    }
}

#[test]
fn with_many_calls_at_once_every_attempt_is_accounted_for_in_a_mix_and_alone() {
    // Many calls at once: which attempts are refused depends on their interleaving, but
    // the server's count is always the calls plus their retries, and a call fails only
    // when its three attempts all were refused.
    for extra in ["", "[[calls]]\nname = \"other\"\ncall = \"grpclab.session.v1.Sessions.Login\"\ndata = { user = \"bob\" }\n"] {
        let server = Server::start("lab");
        let text = workload(3, RETRY_3) + extra;
        // The mix on the h2 transport, the lone method on our engine.
        let transport = if extra.is_empty() { "lab" } else { "h2" };
        let args = ["-n", "2000", "-c", "16", "--transport", transport];
        let (report, code, stderr) = run(&server.target(), &text, &args);
        let report = report.unwrap_or_else(|| panic!("{stderr}"));
        assert_eq!(code, Some(0), "{stderr}");
        let retries = report["retries"].as_u64().unwrap_or(0);
        assert!(retries > 0, "{report}");
        let served = server.stats()["calls"].as_u64().unwrap();
        assert_eq!(served, 2000 + retries, "{report}");
        for status in report["statusCodeDistribution"].as_object().unwrap().keys() {
            assert!(["OK", "Unavailable"].contains(&status.as_str()), "{report}");
        }
        if !extra.is_empty() {
            let methods = report["mix"]["methods"].as_array().unwrap();
            assert_eq!(methods[0]["retries"].as_u64(), Some(retries), "{report}");
            assert!(methods[1].get("retries").is_none(), "no policy, no retries");
        }
    }
}

#[test]
fn no_attempt_is_sent_past_the_calls_deadline() {
    // Every attempt is refused; backoffs are drawn up to 1 s and the deadline is 100 ms:
    // a call whose next backoff ends past its deadline ends DeadlineExceeded there, never
    // sending that attempt. Each call ends Unavailable (five refusals within its deadline)
    // or DeadlineExceeded, and the server saw exactly the attempts the client counted.
    let retry = "maxAttempts = 5, initialBackoff = \"1s\", maxBackoff = \"1s\", backoffMultiplier = 1, retryableStatusCodes = [\"UNAVAILABLE\"]";
    for transport in ["lab", "h2"] {
        let server = Server::start("lab");
        let args = [
            "-n",
            "40",
            "-c",
            "40",
            "-t",
            "100ms",
            "--transport",
            transport,
        ];
        let (report, _, stderr) = run(&server.target(), &workload(1, retry), &args);
        let report = report.unwrap_or_else(|| panic!("{transport}: {stderr}"));
        let statuses = report["statusCodeDistribution"].as_object().unwrap();
        let count = |name: &str| statuses.get(name).and_then(Value::as_u64).unwrap_or(0);
        let deadline = count("DeadlineExceeded");
        assert_eq!(deadline + count("Unavailable"), 40, "{transport}: {report}");
        assert!(deadline > 0, "{transport}: {report}");
        let retries = report["retries"].as_u64().unwrap_or(0);
        assert!(retries <= 40 * 4, "{transport}: {report}");
        let served = server.stats()["calls"].as_u64();
        assert_eq!(served, Some(40 + retries), "{transport}: {report}");
        if transport == "lab" {
            // Our engine ends such a call at its deadline without its next attempt (h2's
            // task is cut off by the deadline in the backoff's sleep).
            let reasons = report["errorDistribution"].as_object().unwrap();
            assert!(
                reasons.keys().any(|r| r.contains("before attempt")),
                "a call ended at its deadline before its next attempt: {reasons:?}"
            );
        }
    }
}

#[test]
fn a_bad_policy_is_one_line_and_exit_2() {
    let server = Server::start("lab");
    let target = server.target();
    let bad = RETRY_3.replace("maxAttempts = 3", "maxAttempts = 1");
    let (_, code, stderr) = run(&target, &workload(5, &bad), &["-n", "5"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("retry: maxAttempts is 1"), "{stderr}");
    assert!(
        stderr.contains("grpclab.session.v1.Sessions.Login"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// Shards of a run with retries merge to their sum: calls, and retries of the run and of
/// the method, and the server saw every attempt.
#[test]
fn shards_with_retries_merge_to_their_sum() {
    let server = Server::start("lab");
    let target = server.target();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("retry.toml");
    let other = "[[calls]]\nname = \"other\"\ncall = \"grpclab.session.v1.Sessions.Login\"\ndata = { user = \"bob\" }\n";
    std::fs::write(&file, workload(5, RETRY_3) + other).unwrap();
    let file = file.to_str().unwrap();
    let args = [
        &target,
        "--insecure",
        "--no-history",
        "-n",
        "300",
        "-c",
        "2",
        "--connections",
        "2",
        "--mix-seed",
        "4",
    ];
    let (parts, merged) =
        common::run_shards_and_merge(&[&args[..], &["--workload", file]].concat(), 2, dir.path());
    let part = |path: &std::path::PathBuf| -> Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    };
    let parts: Vec<Value> = parts.iter().map(part).collect();
    let sum = |key: &dyn Fn(&Value) -> u64| parts.iter().map(key).sum::<u64>();
    let retries = sum(&|p| p["retries"].as_u64().unwrap_or(0));
    assert!(retries > 0, "{parts:?}");
    assert_eq!(merged["retries"].as_u64(), Some(retries), "{merged}");
    assert_eq!(
        merged["count"].as_u64(),
        Some(sum(&|p| p["count"].as_u64().unwrap()))
    );
    let method = |p: &Value| p["mix"]["methods"][0]["retries"].as_u64().unwrap_or(0);
    assert_eq!(method(&merged), sum(&method), "{merged}");
    assert_eq!(server.stats()["calls"].as_u64(), Some(300 + retries));
}

/// A workload of one Greeter call with `name` (the recording server stalls a request
/// holding "slow") and `hedging`.
fn hedged_workload(name: &str, hedging: &str) -> String {
    format!(
        "[[calls]]\ncall = \"helloworld.Greeter.SayHello\"\ndata = {{ request = {{ name = \"{name}\" }} }}\nhedging = {{ {hedging} }}\n"
    )
}

/// `run` against the recording server, with the Greeter's .proto, on `transport`.
fn run_hedged(
    server: &RecordingServer,
    transport: &str,
    text: &str,
    args: &[&str],
) -> (Option<Value>, Option<i32>, String) {
    let proto = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/complex_proto/helloworld.proto");
    let proto = proto.to_str().unwrap();
    let fixed = ["--proto", proto, "--transport", transport];
    run(&server.target(), text, &[&fixed[..], args].concat())
}

/// A server that answers at once never sees a hedged attempt before the delay; one that
/// stalls each call 1 s sees the call's later attempts at 300 and 600 ms, and once the
/// first answers the client resets the two still stalling.
#[test]
fn hedged_attempts_go_only_after_the_delay_and_the_first_answer_cancels_the_rest() {
    for transport in ["lab", "h2"] {
        let server = RecordingServer::start(Behaviour {
            stall_on: Some((b"slow".to_vec(), Duration::from_secs(1))),
            ..Behaviour::default()
        });
        let hedging = "maxAttempts = 3, hedgingDelay = \"0.3s\"";
        let fast = hedged_workload("fast", hedging);
        let (report, code, stderr) =
            run_hedged(&server, transport, &fast, &["-n", "200", "-c", "4"]);
        let report = report.unwrap_or_else(|| panic!("{transport}: {stderr}"));
        assert_eq!(code, Some(0), "{transport}: {stderr}");
        assert_eq!(report["ok"], 200, "{transport}: {report}");
        assert_eq!(
            report["retries"].as_u64().unwrap_or(0),
            0,
            "{transport}: no answer came later than the delay: {report}"
        );
        assert_eq!(server.take().len(), 200, "{transport}");

        let slow = hedged_workload("slow", hedging);
        let (report, code, stderr) = run_hedged(&server, transport, &slow, &["-n", "8", "-c", "8"]);
        let report = report.unwrap_or_else(|| panic!("{transport}: {stderr}"));
        assert_eq!(code, Some(0), "{transport}: {stderr}");
        assert_eq!(
            report["ok"], 8,
            "{transport}: the first attempt's answer is the call's: {report}"
        );
        assert_eq!(
            report["retries"], 16,
            "{transport}: two hedges per call: {report}"
        );
        assert_eq!(
            server.take().len(),
            24,
            "{transport}: the server saw every attempt"
        );
        assert_eq!(
            server.resets(),
            16,
            "{transport}: the two hedges still stalling were reset"
        );
    }
}

/// Every second call the server ends fails UNAVAILABLE. Non-fatal, the call's next attempt
/// goes at once (not after the 10 s delay, past the 2 s deadline) and passes; fatal (no
/// non-fatal codes), the failure is the call's.
#[test]
fn a_non_fatal_status_sends_the_next_attempt_at_once_and_a_fatal_one_ends_the_call() {
    for transport in ["lab", "h2"] {
        let server = RecordingServer::start(Behaviour {
            fail_every: Some((2, 14)),
            ..Behaviour::default()
        });
        let args = ["-n", "20", "-c", "1", "-t", "2s"];
        let non_fatal =
            "maxAttempts = 3, hedgingDelay = \"10s\", nonFatalStatusCodes = [\"UNAVAILABLE\"]";
        let (report, _, stderr) =
            run_hedged(&server, transport, &hedged_workload("x", non_fatal), &args);
        let report = report.unwrap_or_else(|| panic!("{transport}: {stderr}"));
        // Attempt 1 passes; each later call's first attempt is refused and its second passes.
        assert_eq!(report["ok"], 20, "{transport}: {report}");
        assert_eq!(report["retries"], 19, "{transport}: {report}");
        assert_eq!(server.take().len(), 39, "{transport}");

        let fatal = "maxAttempts = 3, hedgingDelay = \"10s\"";
        let (report, _, stderr) =
            run_hedged(&server, transport, &hedged_workload("x", fatal), &args);
        let report = report.unwrap_or_else(|| panic!("{transport}: {stderr}"));
        assert_eq!(report["count"], 20, "{transport}: {report}");
        assert_eq!(
            report["statusCodeDistribution"]["Unavailable"], 10,
            "{transport}: {report}"
        );
        assert_eq!(
            report["retries"].as_u64().unwrap_or(0),
            0,
            "{transport}: {report}"
        );
        assert_eq!(server.take().len(), 20, "{transport}");
    }
}

/// A deadline of 500 ms with a hedge each 200 ms against a server stalling 1 s: attempts at
/// 0, 200 and 400 ms, none at 600; each call ends DeadlineExceeded and every attempt sent is
/// reset at the deadline.
#[test]
fn no_hedged_attempt_is_sent_past_the_calls_deadline() {
    for transport in ["lab", "h2"] {
        let server = RecordingServer::start(Behaviour {
            stall_on: Some((b"slow".to_vec(), Duration::from_secs(1))),
            ..Behaviour::default()
        });
        let hedging = "maxAttempts = 5, hedgingDelay = \"0.2s\"";
        let args = ["-n", "8", "-c", "8", "-t", "500ms"];
        let (report, _, stderr) =
            run_hedged(&server, transport, &hedged_workload("slow", hedging), &args);
        let report = report.unwrap_or_else(|| panic!("{transport}: {stderr}"));
        assert_eq!(
            report["statusCodeDistribution"]["DeadlineExceeded"], 8,
            "{transport}: {report}"
        );
        let retries = report["retries"].as_u64().unwrap_or(0);
        assert!(
            (8..=16).contains(&retries),
            "{transport}: at most two hedges within 500 ms: {report}"
        );
        let sent = 8 + retries;
        assert_eq!(server.take().len() as u64, sent, "{transport}");
        // The resets reach the server a moment after the client ends.
        for _ in 0..100 {
            if server.resets() == sent {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            server.resets(),
            sent,
            "{transport}: every attempt was reset at the deadline"
        );
    }
}

#[test]
fn a_method_has_one_policy_said_in_one_line() {
    let server = RecordingServer::start(Behaviour::default());
    let hedging = "maxAttempts = 2, hedgingDelay = \"0.1s\"";
    let both = hedged_workload("x", hedging)
        .replace("hedging =", &format!("retry = {{ {RETRY_3} }}\nhedging ="));
    let (_, code, stderr) = run_hedged(&server, "lab", &both, &["-n", "5"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("give retry or hedging, not both"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(server.take().is_empty(), "nothing was sent");
}

/// A flow whose login step has a retry policy (every 5th login refused), then lists with the
/// token: one flow at a time, 400 flows need 99 retries of the login, every flow passes, the
/// login step is counted once per flow, and the server saw 499 logins and 400 lists.
#[test]
fn a_flow_step_with_a_retry_policy_is_retried_and_counted_once() {
    let flow = format!(
        "[[flows]]\nname = \"browse\"\n[[flows.steps]]\nname = \"login\"\ncall = \"grpclab.session.v1.Sessions.Login\"\ndata = {{ user = \"ann\", unavailable_every = 5 }}\nextract = {{ token = \"token\" }}\nretry = {{ {RETRY_3} }}\n[[flows.steps]]\nname = \"list\"\ncall = \"grpclab.session.v1.Sessions.List\"\ndata = {{ token = \"{{{{.vars.token}}}}\" }}\n"
    );
    for transport in ["lab", "h2"] {
        let server = Server::start("lab");
        let args = ["-n", "400", "-c", "1", "--transport", transport];
        let (report, code, stderr) = run(&server.target(), &flow, &args);
        let report = report.unwrap_or_else(|| panic!("{transport}: {stderr}"));
        assert_eq!(code, Some(0), "{transport}: {stderr}");
        let flows = &report["mix"]["flows"][0];
        assert_eq!(flows["passed"], 400, "{transport}: {flows}");
        let methods = report["mix"]["methods"].as_array().unwrap();
        let login = methods.iter().find(|m| m["name"] == "login").unwrap();
        assert_eq!(
            login["count"], 400,
            "{transport}: counted once per flow: {login}"
        );
        assert_eq!(login["ok"], 400, "{transport}: {login}");
        assert_eq!(login["retries"], 99, "{transport}: {login}");
        assert_eq!(report["retries"], 99, "{transport}: {report}");
        assert_eq!(
            server.stats()["calls"],
            499 + 400,
            "{transport}: the server saw every attempt"
        );
    }
}

#[test]
fn a_bad_retry_policy_on_a_step_names_its_line() {
    let server = Server::start("lab");
    let bad = RETRY_3.replace("maxAttempts = 3", "maxAttempts = 0");
    let flow = format!(
        "[[flows]]\nname = \"f\"\n[[flows.steps]]\nname = \"login\"\ncall = \"grpclab.session.v1.Sessions.Login\"\ndata = {{ user = \"ann\" }}\nretry = {{ {bad} }}\n"
    );
    let (_, code, stderr) = run(&server.target(), &flow, &["-n", "5"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("line 7"), "{stderr}");
    assert!(
        stderr.contains("step 'login': retry: maxAttempts is 0"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// The hedging delay is cut short by a non-fatal status while another attempt still runs:
/// attempt 1 stalls 3 s; attempt 2 (after the 1 s delay) is refused UNAVAILABLE, so attempt 3
/// goes at once and answers, well within the 1.5 s deadline. Waiting out the delay instead
/// would send it at 2 s, past the deadline: the call would end DeadlineExceeded.
#[test]
fn a_non_fatal_status_cuts_the_hedging_delay_short_while_an_attempt_still_runs() {
    for transport in ["lab", "h2"] {
        let server = RecordingServer::start(Behaviour {
            stall_first: Some(Duration::from_secs(3)),
            fail_every: Some((2, 14)),
            ..Behaviour::default()
        });
        let hedging =
            "maxAttempts = 3, hedgingDelay = \"1s\", nonFatalStatusCodes = [\"UNAVAILABLE\"]";
        let args = ["-n", "1", "-c", "1", "-t", "1500ms"];
        let (report, _, stderr) =
            run_hedged(&server, transport, &hedged_workload("x", hedging), &args);
        let report = report.unwrap_or_else(|| panic!("{transport}: {stderr}"));
        assert_eq!(report["ok"], 1, "{transport}: attempt 3 answered: {report}");
        assert_eq!(report["retries"], 2, "{transport}: {report}");
        assert_eq!(server.take().len(), 3, "{transport}");
        for _ in 0..100 {
            if server.resets() == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            server.resets(),
            1,
            "{transport}: the stalled first attempt was reset"
        );
    }
}
