//! Connect's conformance suite (v1.0.7, from the Go module proxy) against grpclab's client:
//! every test case its config allows must pass. And the client's own refusals.

use std::process::Command;

const CLIENT: &str = env!("CARGO_BIN_EXE_grpclab-conformance-client");

fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|out| out.status.success())
}

#[test]
fn every_conformance_case_the_config_allows_passes() {
    if !has("go") {
        assert!(
            std::env::var_os("CI").is_none(),
            "go is installed on CI (peers/install.sh go)"
        );
        eprintln!("SKIPPED: no go here (bash peers/install.sh go)");
        return;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../peers/connect_conformance/run.sh"
    );
    let out = Command::new("sh")
        .arg(script)
        .env("CONFORMANCE_CLIENT", CLIENT)
        .output()
        .expect("run peers/connect_conformance/run.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let failures: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|line| line.starts_with("FAILED"))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // HTTP/1.1 and HTTP/2 x gRPC, gRPC-Web and Connect x proto and JSON x identity and gzip,
    // unary, client, server and half-duplex bidi streams, and Connect's GET, at v1.0.7.
    let all = format!("{stdout}{stderr}");
    assert!(all.contains("2371 passed, 0 failed"), "{all}");
}

#[test]
fn a_missing_or_broken_proto_directory_is_one_line() {
    for args in [&[][..], &["/nonexistent/proto"][..]] {
        let out = Command::new(CLIENT)
            .args(args)
            .output()
            .expect("run the client");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("proto"), "{stderr}");
    }
}
