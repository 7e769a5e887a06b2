//! `--debug FILE` (ghz's debug log): a run whose server goes away mid-run leaves, as JSON
//! lines, how the target resolved, the connections made, how they ended (the server's GOAWAY)
//! and each failed attempt to make them again with its backoff, on both client transports.

mod common;

use common::{grpclab, Server};
use std::process::Stdio;

fn events(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}")))
        .collect()
}

fn messages<'a>(events: &'a [serde_json::Value], message: &str) -> Vec<&'a serde_json::Value> {
    events
        .iter()
        .filter(|event| event["fields"]["message"] == message)
        .map(|event| &event["fields"])
        .collect()
}

#[test]
fn the_debug_log_tells_how_connections_came_and_went() {
    let dir = tempfile::tempdir().unwrap();
    for transport in ["lab", "h2"] {
        let mut server = Server::start("lab");
        let log = dir.path().join(format!("{transport}.log"));
        let client = grpclab()
            .args([
                "load",
                "--insecure",
                &server.target(),
                "--scenario",
                "complex_proto",
            ])
            .args([
                "-z",
                "3s",
                "--rps",
                "400",
                "--connections",
                "2",
                "--no-history",
            ])
            .args(["--transport", transport, "-O", "json", "--debug"])
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Once calls flow, the server shuts down (GOAWAY) and stays away.
        while server.stats()["calls"].as_u64().unwrap_or(0) < 100 {}
        let status = server.terminate();
        assert!(
            status.success(),
            "{status:?}: {:?}",
            server.stderr_lines.lock().unwrap()
        );
        let output = client.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let events = events(&log);
        let resolved = messages(&events, "resolved");
        assert_eq!(resolved.len(), 1, "{events:?}");
        assert_eq!(resolved[0]["target"], server.target());
        assert_eq!(
            messages(&events, "connected").len(),
            2,
            "{transport}: {events:?}"
        );
        let ended = messages(&events, "connection ended");
        assert!(!ended.is_empty(), "{transport}: {events:?}");
        if transport == "lab" {
            // Our engine names the GOAWAY; h2's driver reports the closed connection.
            assert!(
                ended
                    .iter()
                    .any(|e| e["reason"].as_str().unwrap().contains("GOAWAY")),
                "{ended:?}"
            );
        }
        let failed = messages(&events, "reconnect failed");
        assert!(failed.len() >= 2, "{transport}: {events:?}");
        let backoffs: Vec<u64> = failed
            .iter()
            .map(|e| e["retry_in_ms"].as_u64().unwrap())
            .collect();
        assert!(
            backoffs.iter().all(|&ms| (50..=1000).contains(&ms)),
            "{backoffs:?}"
        );
        assert!(
            failed
                .iter()
                .all(|e| e["reason"].as_str().unwrap().contains("cannot connect")),
            "{failed:?}"
        );
    }
}
