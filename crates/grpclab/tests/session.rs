//! The session service every built-in server serves for flows (`grpclab.session.v1.Sessions`:
//! Login gives a token, List and Get take it), driven by `grpclab load` over real sockets
//! against lab and tonic: what each method answers, and what the server counts.

mod common;

use common::{grpclab, Server};
use serde_json::Value;

/// `grpclab load` of one session method with `data`, `n` calls: the JSON report (written
/// also when every call failed, the run then exiting non-zero).
fn load(target: &str, method: &str, data: &str, n: usize) -> Value {
    let out = grpclab()
        .args([
            "load",
            target,
            "--insecure",
            "-O",
            "json",
            "-c",
            "2",
            "--no-history",
        ])
        .args(["--call", &format!("grpclab.session.v1.Sessions.{method}")])
        .args(["-d", data, "-n", &n.to_string()])
        .output()
        .expect("run grpclab load");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "{method} {data}: no JSON report ({err}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn login_list_and_get_answer_by_the_token_on_lab_and_tonic() {
    // A token as Login gives it (the logic is shared by every server), and an altered one.
    let token = grpclab_server::session::login(&grpclab_server::session::LoginRequest {
        user: "ann".to_owned(),
        unavailable_every: 0,
    })
    .expect("login")
    .token;
    let forged = token.replace("ann", "bob");
    for implementation in ["lab", "tonic-mt"] {
        let server = Server::start(implementation);
        let target = server.target();
        let before = server.stats()["calls"].as_u64().unwrap_or(0);
        let cases = [
            ("Login", r#"{"user":"ann"}"#.to_owned(), "OK"),
            ("Login", r#"{"user":""}"#.to_owned(), "InvalidArgument"),
            ("List", format!(r#"{{"token":"{token}"}}"#), "OK"),
            (
                "List",
                format!(r#"{{"token":"{forged}"}}"#),
                "Unauthenticated",
            ),
            (
                "Get",
                format!(r#"{{"token":"{token}","sku":"sku-ann-1"}}"#),
                "OK",
            ),
            (
                "Get",
                format!(r#"{{"token":"{token}","sku":"sku-bob-1"}}"#),
                "NotFound",
            ),
            (
                "Get",
                r#"{"token":"","sku":"sku-ann-1"}"#.to_owned(),
                "Unauthenticated",
            ),
        ];
        for (method, data, status) in &cases {
            let report = load(&target, method, data, 30);
            let statuses = &report["statusCodeDistribution"];
            assert_eq!(
                statuses[*status], 30,
                "{implementation} {method} {data}: {statuses}"
            );
            assert_eq!(
                statuses.as_object().map(|s| s.len()),
                Some(1),
                "{implementation} {method} {data}: {statuses}"
            );
        }
        // Only the answered calls count as served: three methods x 30.
        let served = server.stats()["calls"].as_u64().unwrap_or(0) - before;
        assert_eq!(served, 90, "{implementation}");
    }
}
