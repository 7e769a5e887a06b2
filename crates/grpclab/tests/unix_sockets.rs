//! gRPC over unix sockets (`unix:PATH`, `unix:///PATH`): lab listening on one (both of its
//! HTTP/2 transports) loaded by both client transports; a server that dies mid-run; and each
//! way a unix target can be wrong, refused in one line before anything runs. (A grpcio server
//! on a unix socket: interop.rs.)

mod common;

use common::grpclab;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

/// `grpclab serve --impl lab --unix PATH` (plus `args`), once it says it listens.
fn lab_on_unix(path: &Path, args: &[&str]) -> Child {
    let mut child = grpclab()
        .args(["serve", "--impl", "lab", "--unix"])
        .arg(path)
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines.next().expect("a line").unwrap();
    assert!(
        line.contains(&format!("listening on unix:{}", path.display())),
        "{line}"
    );
    // Keep reading, so that the server never writes into a closed pipe.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    child
}

fn stop(mut child: Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

fn load(target: &str, args: &[&str]) -> std::process::Output {
    grpclab()
        .args(["load", "--insecure", target, "--scenario", "complex_proto"])
        .args(["--no-history", "-O", "json"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn lab_serves_and_is_loaded_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    for server_transport in ["engine", "h2"] {
        let path = dir.path().join(format!("lab-{server_transport}.sock"));
        let server = lab_on_unix(&path, &["--transport", server_transport]);
        let absolute = format!("unix://{}", path.display());
        let relative = format!("unix:{}", path.display());
        for (target, transport) in [(&absolute, "lab"), (&relative, "h2")] {
            let output = load(
                target,
                &[
                    "-n",
                    "2000",
                    "-c",
                    "20",
                    "--connections",
                    "2",
                    "--transport",
                    transport,
                ],
            );
            assert!(
                output.status.success(),
                "{target} {transport}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
            assert_eq!(
                report["statusCodeDistribution"]["OK"], 2000,
                "{server_transport} {transport}: {report}"
            );
            assert_eq!(report["options"]["authority"], "localhost");
        }
        stop(server);
        assert!(!path.exists(), "the server removes its socket file");
    }
}

/// The server dies mid-run: every call is accounted for (OK before, Unavailable after), as
/// over TCP; a stale socket file left by a killed server is taken over by the next one.
#[test]
fn a_server_that_dies_mid_run_is_counted_and_its_stale_socket_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.sock");
    let mut server = lab_on_unix(&path, &[]);
    let target = format!("unix:{}", path.display());
    let client = grpclab()
        .args(["load", "--insecure", &target, "--scenario", "complex_proto"])
        .args(["-z", "3s", "--rps", "500", "--no-history", "-O", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let _ = server.kill();
    let _ = server.wait();
    let output = client.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let codes = report["statusCodeDistribution"].as_object().unwrap();
    let count = |code: &str| codes.get(code).and_then(|v| v.as_u64()).unwrap_or(0);
    assert!(count("OK") > 0 && count("Unavailable") > 0, "{codes:?}");
    assert_eq!(
        count("OK") + count("Unavailable"),
        report["count"].as_u64().unwrap(),
        "{codes:?}"
    );
    // SIGKILL left the socket file; the next server replaces it and serves.
    assert!(path.exists());
    let server = lab_on_unix(&path, &[]);
    let output = load(&target, &["-n", "100"]);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["statusCodeDistribution"]["OK"], 100, "{report}");
    stop(server);
}

#[test]
fn unix_targets_that_cannot_work_are_one_line_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.sock");
    let server = lab_on_unix(&path, &[]);
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "not a socket").unwrap();
    let socket = format!("unix:{}", path.display());
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                format!("unix:{}/nobody.sock", dir.path().display()),
                "--insecure".into(),
            ],
            "is the server running",
        ),
        (
            vec![format!("unix:{}", file.display()), "--insecure".into()],
            "is not a socket",
        ),
        (vec![socket.clone()], "add --insecure"),
        (
            vec!["unix://relative.sock".into(), "--insecure".into()],
            "absolute path",
        ),
        (vec!["unix:".into(), "--insecure".into()], "names no socket"),
        (
            vec!["unix-abstract:x".into(), "--insecure".into()],
            "abstract",
        ),
    ];
    for (args, needle) in cases {
        let output = grpclab()
            .arg("load")
            .args(&args)
            .args(["--scenario", "complex_proto", "-n", "5", "--no-history"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
    // No method given: reflection is asked over TCP only.
    let output = grpclab()
        .args(["load", &socket, "--insecure", "-n", "5", "--no-history"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--proto"), "{stderr}");
    // The server side: a live socket is not taken over; only lab listens on one.
    let output = grpclab()
        .args(["serve", "--impl", "lab", "--unix"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("another server is listening"), "{stderr}");
    let output = grpclab()
        .args(["serve", "--impl", "tonic-mt", "--unix"])
        .arg(dir.path().join("tonic.sock"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("only lab"), "{stderr}");
    stop(server);
}
