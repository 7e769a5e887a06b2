//! `serve --impl lab --codec prost`: the Greeter decoded into prost's generated structs and
//! the reply encoded by prost, as a typical service does it. The path must serve the same
//! correct replies as lab's own view codec (every reply validated against the schema) and
//! its counters must show what it is: allocations per call, which the view codec avoids.

mod common;

use common::{grpclab, Server};
use serde_json::Value;

/// Serves `calls` validated complex_proto calls with `--codec codec`; returns the server's
/// counters (allocations, calls) and the client's count of OK replies.
fn serve_with(codec: &str, calls: u64) -> (u64, u64, u64) {
    let server = Server::start_with(&["--impl", "lab", "--codec", codec]);
    let out = grpclab()
        .args([
            "load",
            &server.target(),
            "--insecure",
            "--scenario",
            "complex_proto",
        ])
        .args([
            "-n",
            &calls.to_string(),
            "-c",
            "10",
            "--validate",
            "-O",
            "json",
        ])
        .output()
        .expect("run load");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let ok = result["ok"].as_u64().unwrap();
    let stats = server.stats();
    assert_eq!(
        stats["counting"], true,
        "the allocation counter is installed"
    );
    (
        stats["allocations"].as_u64().unwrap(),
        stats["calls"].as_u64().unwrap(),
        ok,
    )
}

#[test]
fn the_prost_codec_serves_the_same_replies_and_allocates_per_call() {
    let calls = 3_000;
    let (view_allocations, view_calls, view_ok) = serve_with("view", calls);
    let (prost_allocations, prost_calls, prost_ok) = serve_with("prost", calls);
    // Every reply decoded and checked by the client (--validate): both codecs are correct.
    assert_eq!((view_ok, prost_ok), (calls, calls));
    assert_eq!((view_calls, prost_calls), (calls, calls));
    // complex_proto's request has nested messages, strings and repeated fields: prost's
    // owned structs allocate several times per call; the view codec reads them in place.
    let per_call = |allocations: u64| allocations as f64 / calls as f64;
    let (view, prost) = (per_call(view_allocations), per_call(prost_allocations));
    assert!(
        prost >= view + 5.0,
        "allocations per call: view {view:.2}, prost {prost:.2}"
    );
    assert!(view < 1.0, "the view codec allocates {view:.2} per call");
}

#[test]
fn an_unknown_codec_is_one_clear_line() {
    let out = grpclab()
        .args(["serve", "--impl", "lab", "--codec", "json"])
        .output()
        .expect("run serve");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("view") && stderr.contains("prost"),
        "{stderr}"
    );
}
