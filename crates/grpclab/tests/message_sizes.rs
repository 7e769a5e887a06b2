//! ghz's `--max-recv-message-size` and `--max-send-message-size`, on both client transports.

mod common;

use common::{grpclab, Server};

#[test]
fn replies_over_the_receive_limit_fail_as_resource_exhausted() {
    // large_complex's reply (the echo of a ~166 KB request) against limits below and above it.
    let server = Server::start_with(&["--impl", "lab"]);
    for transport in ["lab", "h2"] {
        for (limit, expect_ok) in [("100KB", false), ("200 KiB", true)] {
            let output = grpclab()
                .args([
                    "load",
                    "--insecure",
                    &server.target(),
                    "--scenario",
                    "large_complex",
                ])
                .args([
                    "-n",
                    "20",
                    "-c",
                    "4",
                    "-O",
                    "json",
                    "--transport",
                    transport,
                ])
                .args(["--max-recv-message-size", limit])
                .output()
                .unwrap();
            assert!(
                common::finished(&output),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
            if expect_ok {
                assert_eq!(
                    report["statusCodeDistribution"]["OK"], 20,
                    "{transport} {report}"
                );
            } else {
                assert_eq!(
                    report["statusCodeDistribution"]["ResourceExhausted"], 20,
                    "{transport}: {report}"
                );
                let error = report["errorDistribution"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .next()
                    .unwrap()
                    .clone();
                assert!(
                    error.contains("received message larger than max") && error.contains("100000"),
                    "{error}"
                );
            }
        }
    }
    // The connection survives refused replies: the server still answers afterwards.
    let output = grpclab()
        .args([
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "complex_proto",
        ])
        .args(["-n", "10", "-O", "json", "--max-recv-message-size", "100KB"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["statusCodeDistribution"]["OK"], 10);
}

#[test]
fn requests_over_the_send_limit_and_bad_sizes_are_one_line() {
    let server = Server::start("lab");
    for (flag, value, needle) in [
        (
            "--max-send-message-size",
            "1kB",
            "over --max-send-message-size 1000",
        ),
        ("--max-send-message-size", "12 parsecs", "unknown size unit"),
        ("--max-recv-message-size", "0", "at least 1 byte"),
    ] {
        let output = grpclab()
            .args([
                "load",
                "--insecure",
                &server.target(),
                "--scenario",
                "large_complex",
            ])
            .args(["-n", "5", flag, value])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{value}: {stderr}");
        assert!(stderr.contains(needle), "{value}: {stderr}");
    }
}
