//! Retries as gRPC's service config states them (a workload entry's `retry`), over real
//! sockets against the session service, whose Login refuses every Nth login of its process
//! with UNAVAILABLE (`unavailable_every`): each call is counted once, its attempts apart, and
//! the server's own count of attempts is the client's.

mod common;

use common::{load_report, Server};
use serde_json::Value;

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
