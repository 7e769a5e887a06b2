//! Interop with clients we did not write: Python grpcio and h2load, against the built-in
//! servers started as `grpclab serve` processes. CI installs both (`.ci/run`); on a developer
//! machine without them these tests say so and pass only outside CI.

mod common;

use common::{grpclab, Server};
use std::process::{Command, Stdio};

/// Whether a tool is available; outside CI a missing tool skips the test with a message,
/// in CI (where .ci/run installs it) it fails.
fn available(check: &mut Command, what: &str) -> bool {
    let ok = check
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} is missing in CI: .ci/run must install it"
        );
        eprintln!("SKIPPED: {what} is not installed (bash .ci/run installs it)");
    }
    ok
}

fn request_file(dir: &std::path::Path) -> std::path::PathBuf {
    let file = dir.join("request.bin");
    let status = Command::new(env!("CARGO_BIN_EXE_grpclab"))
        .args(["encode", "--scenario", "complex_proto", "-o"])
        .arg(&file)
        .status()
        .unwrap();
    assert!(status.success());
    file
}

/// h2load sends 2000 framed requests (4 connections, 10 streams each) to SayHello over
/// `scheme` (`http`: h2c; `https`: TLS with ALPN h2): whether it exited well, and its report.
fn h2load_say_hello(scheme: &str, server: &Server, request: &std::path::Path) -> (bool, String) {
    let output = Command::new("h2load")
        .args(["-n", "2000", "-c", "4", "-m", "10", "-d"])
        .arg(request)
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
        .arg(format!(
            "{scheme}://{}/helloworld.Greeter/SayHello",
            server.addr
        ))
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// The calls the server has answered with a reply (its admin counters), via `grpclab stats`
/// with `tls` flags when given.
fn calls_answered(server: &Server, tls: &[&str]) -> u64 {
    let plaintext: &[&str] = if tls.is_empty() { &["--insecure"] } else { &[] };
    let output = common::grpclab()
        .arg("stats")
        .arg(server.target())
        .args(plaintext)
        .args(tls)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    stats["calls"].as_u64().expect("a call count")
}

/// One SayHello call with nghttp (nghttp2's client; not ours): the `grpc-status` the server
/// sent, as nghttp printed it (`None` when there was none).
fn nghttp_grpc_status(scheme: &str, server: &Server, request: &std::path::Path) -> Option<String> {
    let output = Command::new("nghttp")
        .args(["-v", "-d"])
        .arg(request)
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
        .arg(format!(
            "{scheme}://{}/helloworld.Greeter/SayHello",
            server.addr
        ))
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.split("grpc-status: ").nth(1))
        .map(|status| status.trim().to_owned())
}

/// h2load's 2000 calls were gRPC successes, not only HTTP 200s: the server answered every one
/// with a reply (its counters went up by 2000; a call answered with a gRPC error does not count),
/// and a call from nghttp, another client we did not write, ends with `grpc-status: 0`.
fn assert_grpc_successes(
    scheme: &str,
    server: &Server,
    request: &std::path::Path,
    before: u64,
    tls: &[&str],
) {
    let label = format!("{scheme} {}", server.target());
    assert_eq!(
        calls_answered(server, tls) - before,
        2000,
        "{label}: calls answered with a reply"
    );
    assert_eq!(
        nghttp_grpc_status(scheme, server, request).as_deref(),
        Some("0"),
        "{label}: nghttp's call"
    );
}

/// The grpcio Greeter with reflection (`interop/grpcio_reflection_server.py`), TLS with
/// `tls` when given; returns the child (stopped by closing its stdin) and its target.
fn grpcio_reflection_server(tls: Option<&common::pki::Pair>) -> (std::process::Child, String) {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut args = vec![format!("{repo}/scenarios/complex_proto")];
    if let Some(pair) = tls {
        args.push(pair.cert.display().to_string());
        args.push(pair.key.display().to_string());
    }
    python_server("grpcio_reflection_server.py", &args)
}

/// A Python server script of `tests/interop/` that prints its port and serves until its
/// standard input closes; returns the child and its target.
fn python_server(script: &str, args: &[String]) -> (std::process::Child, String) {
    python_server_with_env(script, args, &[])
}

/// [`python_server`] with extra environment variables.
fn python_server_with_env(
    script: &str,
    args: &[String],
    env: &[(&str, &str)],
) -> (std::process::Child, String) {
    let mut server = Command::new("python3")
        .arg(format!(
            "{}/tests/interop/{script}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut port,
    )
    .unwrap();
    (server, format!("127.0.0.1:{}", port.trim()))
}

#[test]
fn python_grpcio_client_interoperates() {
    if !available(
        Command::new("python3").args(["-c", "import grpc"]),
        "python3 grpcio",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let request = request_file(dir.path());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/grpcio_client.py"
    );
    for args in [
        &["--impl", "lab", "--max-message-bytes", "65536"][..],
        &[
            "--impl",
            "lab",
            "--decode",
            "pool",
            "--max-message-bytes",
            "65536",
        ],
        &["--impl", "tonic-mt"],
    ] {
        let server = Server::start_with(args);
        // Plain, then every call gzip-compressed by grpcio (lab and tonic accept
        // gzip and answer in it).
        for gzip in [false, true] {
            let mut command = Command::new("python3");
            command
                .arg(script)
                .arg(server.addr.to_string())
                .arg(&request);
            if args[1] == "lab" {
                command.arg("65536");
            }
            if gzip {
                command.arg("--gzip");
            }
            let output = command.output().unwrap();
            assert!(
                output.status.success(),
                "{args:?} gzip {gzip}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

/// The streaming echo service on the tonic baseline, driven by Python
/// grpcio (a client we did not write) in all three streaming shapes: strict and pipelined
/// ping-pong, a feed, an upload, a cancel mid-stream; against tonic and against lab on its own
/// engine with each decode placement (a ping-pong message runs where the placement says).
#[test]
fn python_grpcio_streams_with_tonic_and_lab() {
    if !available(
        Command::new("python3").args(["-c", "import grpc"]),
        "python3 grpcio",
    ) {
        return;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/grpcio_streaming_client.py"
    );
    let servers: [&[&str]; 5] = [
        &["--impl", "tonic-mt"],
        &["--impl", "tonic-st"],
        &["--impl", "lab"],
        &["--impl", "lab", "--decode", "pool"],
        &["--impl", "lab", "--decode", "task"],
    ];
    for args in servers {
        let implementation = args.join(" ");
        let server = Server::start_with(args);
        let output = Command::new("python3")
            .arg(script)
            .arg(server.addr.to_string())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{implementation}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn h2load_interoperates() {
    if !available(
        Command::new("h2load").arg("--version"),
        "h2load (nghttp2-client)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let request = request_file(dir.path());
    for args in [
        &["--impl", "lab"][..],
        &["--impl", "lab", "--transport", "h2"],
        &["--impl", "tonic-mt"],
    ] {
        let implementation = args.join(" ");
        let server = Server::start_with(args);
        let before = calls_answered(&server, &[]);
        let (success, text) = h2load_say_hello("http", &server, &request);
        assert!(success, "{implementation}: {text}");
        assert_grpc_successes("http", &server, &request, before, &[]);
        assert!(
            text.contains("2000 succeeded, 0 failed, 0 errored"),
            "{implementation}: {text}"
        );
        assert!(
            text.contains("status codes: 2000 2xx"),
            "{implementation}: {text}"
        );
    }
}

/// Reflection against a server we did not write: grpcio's Greeter with
/// grpcio-reflection, which offers only v1alpha, so the fallback from v1 is what is tested.
/// `grpclab load` with --call and no schema flag gets the descriptors from it, encodes the
/// payload with them and validates every reply.
#[test]
fn our_reflection_client_reads_a_grpcio_server() {
    if !available(
        Command::new("python3").args(["-c", "import grpc, grpc_tools, grpc_reflection"]),
        "python3 grpcio-tools and grpcio-reflection",
    ) {
        return;
    }
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let (mut server, target) = grpcio_reflection_server(None);
    let output = Command::new(env!("CARGO_BIN_EXE_grpclab"))
        .args([
            "load",
            "--insecure",
            &target,
            "--call",
            "helloworld.Greeter.SayHello",
            "-D",
        ])
        .arg(format!("{repo}/scenarios/complex_proto/payload"))
        .args(["--validate", "-n", "200", "-c", "4", "-O", "json"])
        .output()
        .unwrap();
    // Our gzip requests (-e) against grpcio's server, replies validated.
    let gzip = Command::new(env!("CARGO_BIN_EXE_grpclab"))
        .args([
            "load",
            "--insecure",
            &target,
            "--scenario",
            "complex_proto",
            "-e",
        ])
        .args(["--validate", "-n", "200", "-c", "4", "-O", "json"])
        .output()
        .unwrap();
    drop(server.stdin.take());
    assert!(
        gzip.status.success(),
        "{}",
        String::from_utf8_lossy(&gzip.stderr)
    );
    let gzip_report: serde_json::Value = serde_json::from_slice(&gzip.stdout).unwrap();
    assert_eq!(
        gzip_report["statusCodeDistribution"]["OK"], 200,
        "{gzip_report}"
    );
    assert_eq!(gzip_report["options"]["enable-compression"], true);
    let _ = server.wait();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["statusCodeDistribution"]["OK"], 200, "{report}");
    assert_eq!(
        report["options"]["scenario"], "reflection (grpc.reflection.v1alpha)",
        "v1 is UNIMPLEMENTED there: the client fell back"
    );
}

/// TLS with stacks we did not write: grpcio (BoringSSL) as a client of lab (both
/// transports) and tonic-mt, plain and mutual TLS, with certificates made in the test.
#[test]
fn python_grpcio_client_interoperates_over_tls() {
    if !available(
        Command::new("python3").args(["-c", "import grpc"]),
        "python3 grpcio",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let request = request_file(dir.path());
    let ca = common::pki::TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    let client = ca.leaf(dir.path(), "client", false);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/grpcio_client.py"
    );
    let ca_file = ca.cert.to_str().unwrap();
    for (args, mutual) in [
        (&["--impl", "lab"][..], false),
        (&["--impl", "lab", "--transport", "h2"], false),
        (&["--impl", "tonic-mt"], false),
        (&["--impl", "lab", "--tls-client-ca", ca_file], true),
        (&["--impl", "tonic-mt", "--tls-client-ca", ca_file], true),
    ] {
        let server = Server::start_tls(args, &leaf);
        let mut command = Command::new("python3");
        command
            .arg(script)
            .arg(server.addr.to_string())
            .arg(&request)
            .args(["--ca", ca_file]);
        if mutual {
            command
                .arg("--client-cert")
                .arg(&client.cert)
                .arg("--client-key")
                .arg(&client.key);
        }
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(String::from_utf8_lossy(&output.stdout).contains("ok 200 calls"));
    }
}

/// h2load over TLS (OpenSSL, ALPN h2) against lab on both transports and tonic-mt.
#[test]
fn h2load_interoperates_over_tls() {
    if !available(
        Command::new("h2load").arg("--version"),
        "h2load (nghttp2-client)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let request = request_file(dir.path());
    let ca = common::pki::TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    for args in [
        &["--impl", "lab"][..],
        &["--impl", "lab", "--transport", "h2"],
        &["--impl", "tonic-mt"],
    ] {
        let server = Server::start_tls(args, &leaf);
        let cacert = ca.cert.display().to_string();
        let tls = ["--tls", "--cacert", cacert.as_str(), "--cname", "localhost"];
        let before = calls_answered(&server, &tls);
        let (success, text) = h2load_say_hello("https", &server, &request);
        assert!(success, "{args:?}: {text}");
        assert_grpc_successes("https", &server, &request, before, &tls);
        assert!(
            text.contains("2000 succeeded, 0 failed, 0 errored"),
            "{args:?}: {text}"
        );
        assert!(
            text.contains("Application protocol: h2"),
            "{args:?}: {text}"
        );
    }
}

/// Our client over TLS against grpcio's TLS server, schema by reflection over the same TLS.
#[test]
fn our_tls_client_reads_a_grpcio_tls_server() {
    if !available(
        Command::new("python3").args(["-c", "import grpc, grpc_tools, grpc_reflection"]),
        "python3 grpcio-tools and grpcio-reflection",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = common::pki::TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let (mut server, target) = grpcio_reflection_server(Some(&leaf));
    let mut outputs = Vec::new();
    for transport in ["lab", "h2"] {
        outputs.push(
            Command::new(env!("CARGO_BIN_EXE_grpclab"))
                .args([
                    "load",
                    &target,
                    "--call",
                    "helloworld.Greeter.SayHello",
                    "-D",
                ])
                .arg(format!("{repo}/scenarios/complex_proto/payload"))
                .arg("--cacert")
                .arg(&ca.cert)
                .args(["--transport", transport, "--validate"])
                .args(["-n", "200", "-c", "4", "-O", "json"])
                .output()
                .unwrap(),
        );
    }
    // Plaintext to grpcio's TLS port: one line, exit 2.
    let crossed = Command::new(env!("CARGO_BIN_EXE_grpclab"))
        .args([
            "load",
            &target,
            "--insecure",
            "--scenario",
            "complex_proto",
            "-n",
            "5",
        ])
        .output()
        .unwrap();
    drop(server.stdin.take());
    let _ = server.wait();
    for output in outputs {
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["statusCodeDistribution"]["OK"], 200, "{report}");
    }
    let stderr = String::from_utf8_lossy(&crossed.stderr);
    assert_eq!(crossed.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("speaks TLS"), "{stderr}");
}

/// Our streaming client against a grpcio streaming server (a server we did not
/// write): every shape counts its messages exactly, and a server that ends a stream early
/// with a status has that status counted, with the messages that came before it.
#[test]
fn our_streaming_client_reads_a_grpcio_server() {
    if !available(
        Command::new("python3").args(["-c", "import grpc, grpc_tools"]),
        "python3 grpcio-tools",
    ) {
        return;
    }
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let (mut server, target) = python_server(
        "grpcio_streaming_server.py",
        &[format!("{repo}/scenarios/streaming")],
    );
    let proto = format!("{repo}/scenarios/streaming/streaming.proto");
    // Both client transports: our engine (the default) and the h2 crate (the reference).
    for transport in ["lab", "h2"] {
        let load = |method: &str, data: &str, extra: &[&str]| -> serde_json::Value {
            let output = grpclab()
                .args(["load", "--insecure", "--no-tui", &target, "--proto", &proto])
                .args(["--transport", transport])
                .args([
                    "--call",
                    &format!("grpclab.streaming.v1.StreamingEcho.{method}"),
                ])
                .args(["-d", data, "-O", "json"])
                .args(extra)
                .output()
                .unwrap();
            assert!(
                common::finished(&output),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            serde_json::from_slice(&output.stdout).unwrap()
        };
        let ping_pong = load(
            "PingPong",
            r#"[{"payload":"YQ=="},{"payload":"Yg=="}]"#,
            &["-n", "30", "-c", "3", "--stream-call-count", "20"],
        );
        assert_eq!(ping_pong["statusCodeDistribution"]["OK"], 30, "{ping_pong}");
        assert_eq!(ping_pong["messagesSent"], 600);
        assert_eq!(ping_pong["messagesReceived"], 600);
        let feed = load(
            "Feed",
            r#"{"count":40,"payload":"YQ=="}"#,
            &["-n", "20", "-c", "2"],
        );
        assert_eq!(feed["statusCodeDistribution"]["OK"], 20, "{feed}");
        assert_eq!(feed["messagesReceived"], 800);
        // ghz's --stream-call-count on a server stream: the client cancels each after 7 of
        // its 40 replies, and the call is a success with exactly 7.
        let counted = load(
            "Feed",
            r#"{"count":40,"payload":"YQ=="}"#,
            &["-n", "20", "-c", "2", "--stream-call-count", "7"],
        );
        assert_eq!(counted["statusCodeDistribution"]["OK"], 20, "{counted}");
        assert_eq!(counted["count"], 20, "{counted}");
        assert_eq!(counted["messagesReceived"], 140, "{counted}");
        // ghz's bidi: sends paced on their own, replies read as they come (not ping-pong):
        // each call sends 5 and the echo server answers each.
        let independent = load(
            "PingPong",
            r#"{"payload":"YQ=="}"#,
            &[
                "-n",
                "20",
                "-c",
                "4",
                "--stream-independent",
                "--stream-call-count",
                "5",
                "--stream-interval",
                "1ms",
            ],
        );
        assert_eq!(
            independent["statusCodeDistribution"]["OK"], 20,
            "{independent}"
        );
        assert_eq!(
            (
                &independent["messagesSent"],
                &independent["messagesReceived"]
            ),
            (&100.into(), &100.into()),
            "{independent}"
        );
        assert!(independent["roundTrip"].is_null(), "{independent}");
        assert_eq!(independent["messageGaps"]["count"], 80, "{independent}");
        let upload = load(
            "Upload",
            r#"{"payload":"YWJj"}"#,
            &["-n", "10", "-c", "2", "--stream-call-count", "25"],
        );
        assert_eq!(upload["statusCodeDistribution"]["OK"], 10, "{upload}");
        assert_eq!(
            (&upload["messagesSent"], &upload["messagesReceived"]),
            (&250.into(), &10.into())
        );
        // Early ends, with the server's status: a feed cut after 10 replies...
        let cut = load(
            "Feed",
            r#"{"count":5000,"payload":"YQ=="}"#,
            &["-n", "6", "-c", "2"],
        );
        assert_eq!(
            cut["statusCodeDistribution"]["ResourceExhausted"], 6,
            "{cut}"
        );
        assert_eq!(cut["messagesReceived"], 60);
        assert!(cut["errorDistribution"]
            .as_object()
            .unwrap()
            .keys()
            .all(|key| key.contains("at most 1000 replies")));
        // ...and a ping-pong aborted at its third message (two round trips done).
        let aborted = load(
            "PingPong",
            r#"[{"payload":"YQ=="},{"payload":"Yg=="},{"payload":"YWJvcnQ="}]"#,
            &["-n", "8", "-c", "2"],
        );
        assert_eq!(aborted["statusCodeDistribution"]["Aborted"], 8, "{aborted}");
        assert_eq!(aborted["messagesSent"], 24);
        assert_eq!(aborted["messagesReceived"], 16);
        // ...and one the server cancels at its third message: CANCELLED, counted once each.
        let cancelled = load(
            "PingPong",
            r#"[{"payload":"YQ=="},{"payload":"Yg=="},{"payload":"Y2FuY2Vs"}]"#,
            &["-n", "6", "-c", "2"],
        );
        assert_eq!(cancelled["count"], 6, "{cancelled}");
        assert_eq!(
            cancelled["statusCodeDistribution"]["Canceled"], 6,
            "{cancelled}"
        );
        assert_eq!(cancelled["messagesSent"], 18);
        assert_eq!(cancelled["messagesReceived"], 12);
    }
    drop(server.stdin.take());
    let _ = server.wait();
}

/// Call templates on streaming calls (ghz's meaning): the payload is rendered once per call
/// (its array's messages cycled), or once per message with `--stream-dynamic-messages`. The
/// grpcio server logs every Upload's payloads, so what was rendered is seen on the wire, and
/// the `x-n` metadata rendered per call (`{{.RequestNumber}}`) beside them.
#[test]
fn streaming_templates_render_per_call_or_per_message() {
    if !available(
        Command::new("python3").args(["-c", "import grpc, grpc_tools"]),
        "python3 grpcio-tools",
    ) {
        return;
    }
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let dir = tempfile::tempdir().unwrap();
    let proto = format!("{repo}/scenarios/streaming/streaming.proto");
    // randomString 8: eight letters and digits, valid base64 for the bytes field.
    let data = r#"[{"payload":"{{randomString 8}}"},{"payload":"{{randomString 8}}"}]"#;
    for transport in ["lab", "h2"] {
        for dynamic in [false, true] {
            let log = dir.path().join(format!("{transport}-{dynamic}.log"));
            let (mut server, target) = python_server_with_env(
                "grpcio_streaming_server.py",
                &[format!("{repo}/scenarios/streaming")],
                &[("PAYLOAD_LOG", log.to_str().unwrap())],
            );
            let mut command = grpclab();
            command
                .args(["load", "--insecure", "--no-tui", &target, "--proto", &proto])
                .args(["--call", "grpclab.streaming.v1.StreamingEcho.Upload"])
                .args(["-d", data, "-n", "6", "-c", "2", "--stream-call-count", "4"])
                .args(["-m", r#"{"x-n": "{{.RequestNumber}}"}"#])
                .args(["--transport", transport, "-O", "json"]);
            if dynamic {
                command.arg("--stream-dynamic-messages");
            }
            let output = command.output().unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
            assert_eq!(report["statusCodeDistribution"]["OK"], 6, "{report}");
            drop(server.stdin.take());
            let _ = server.wait();
            let mut numbers = std::collections::BTreeSet::new();
            let calls: Vec<Vec<String>> = std::fs::read_to_string(&log)
                .unwrap()
                .lines()
                .map(|line| {
                    let (number, payloads) = line.split_once('|').unwrap();
                    numbers.insert(number.parse::<u64>().unwrap());
                    payloads.split(',').map(str::to_owned).collect()
                })
                .collect();
            // One number per call; per message renderings take numbers of their own.
            assert_eq!(numbers.len(), 6, "{transport} {dynamic}: {numbers:?}");
            if !dynamic {
                assert_eq!(numbers, (0..6).collect(), "{transport}");
            }
            assert_eq!(calls.len(), 6, "{transport} {dynamic}: {calls:?}");
            let mut all = std::collections::HashSet::new();
            for call in &calls {
                assert_eq!(call.len(), 4, "{call:?}");
                assert!(
                    call.iter().all(|payload| payload.len() == 12),
                    "6 bytes: {call:?}"
                );
                if dynamic {
                    // Every message rendered anew.
                    let distinct: std::collections::HashSet<_> = call.iter().collect();
                    assert_eq!(distinct.len(), 4, "{transport}: {call:?}");
                } else {
                    // One rendering per call, its two messages cycled.
                    assert_eq!((&call[0], &call[1]), (&call[2], &call[3]), "{call:?}");
                    assert_ne!(call[0], call[1], "{call:?}");
                }
                all.extend(call.iter().cloned());
            }
            let expected = if dynamic { 24 } else { 12 };
            assert_eq!(all.len(), expected, "{transport} {dynamic}: calls differ");
        }
    }
}

/// grpcio-reflection's client (v1alpha, a client we did not write) reads lab's reflection
/// (served on lab's own engine) as it reads tonic's: the services, and descriptors it can
/// build types from, imports included.
#[test]
fn grpcio_reflection_client_reads_lab_and_tonic() {
    if !available(
        Command::new("python3").args(["-c", "import grpc, grpc_reflection"]),
        "python3 grpcio-reflection",
    ) {
        return;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/grpcio_reflection_client.py"
    );
    for implementation in ["lab", "tonic-mt"] {
        let server = Server::start(implementation);
        let output = Command::new("python3")
            .arg(script)
            .arg(server.addr.to_string())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{implementation}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let seen: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let services = seen["services"].as_array().unwrap();
        for service in [
            "helloworld.Greeter",
            "grpclab.streaming.v1.StreamingEcho",
            "grpc.reflection.v1alpha.ServerReflection",
        ] {
            assert!(
                services.iter().any(|s| s == service),
                "{implementation}: {seen}"
            );
        }
        assert_eq!(
            seen["ping_pong"],
            serde_json::json!([
                "grpclab.streaming.v1.EchoRequest",
                "grpclab.streaming.v1.EchoReply",
                true,
                true
            ]),
            "{implementation}"
        );
        assert_eq!(
            seen["hello_fields"],
            serde_json::json!(["request"]),
            "{implementation}"
        );
    }
}

/// A grpcio server that requires a client certificate (BoringSSL: after a TLS 1.3 handshake it
/// hangs up without an alert) is found out before the run: without --cert, one line naming
/// --cert and --key, exit 2, no call counted; with a certificate its CA signed, every call OK.
#[test]
fn grpcio_requiring_a_client_certificate_is_named_before_the_run() {
    if !available(
        Command::new("python3").args(["-c", "import grpc, grpc_tools, grpc_reflection"]),
        "python3 grpcio, grpcio-tools, grpcio-reflection",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = common::pki::TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    let client = ca.leaf(dir.path(), "client", false);
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let (mut server, target) = python_server(
        "grpcio_reflection_server.py",
        &[
            format!("{repo}/scenarios/complex_proto"),
            leaf.cert.display().to_string(),
            leaf.key.display().to_string(),
            ca.cert.display().to_string(),
        ],
    );
    a_missing_client_certificate_is_named(&target, &ca, &client);
    drop(server.stdin.take());
    let _ = server.wait();
}

/// Against a server at `target` that requires client certificates signed by `ca`, on both
/// transports: without --cert, one line naming --cert/--key, exit 2, no call counted; with
/// `client`'s certificate, 50 calls OK.
fn a_missing_client_certificate_is_named(
    target: &str,
    ca: &common::pki::TestCa,
    client: &common::pki::Pair,
) {
    for transport in ["lab", "h2"] {
        let refused = Command::new(env!("CARGO_BIN_EXE_grpclab"))
            .args(["load", target, "--scenario", "complex_proto"])
            .arg("--cacert")
            .arg(&ca.cert)
            .args(["--transport", transport, "-n", "50", "--no-history"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{transport}: {stderr}");
        assert!(
            refused.stdout.is_empty(),
            "{transport}: no summary, no call counted"
        );
        assert_eq!(stderr.lines().count(), 1, "{transport}: one line: {stderr}");
        assert!(
            stderr.contains("--cert") && stderr.contains("--key"),
            "{transport}: {stderr}"
        );
        let accepted = Command::new(env!("CARGO_BIN_EXE_grpclab"))
            .args(["load", target, "--scenario", "complex_proto"])
            .arg("--cacert")
            .arg(&ca.cert)
            .arg("--cert")
            .arg(&client.cert)
            .arg("--key")
            .arg(&client.key)
            .args(["--transport", transport, "-n", "50", "--no-history"])
            .args(["-O", "json"])
            .output()
            .unwrap();
        assert!(
            accepted.status.success(),
            "{transport}: {}",
            String::from_utf8_lossy(&accepted.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&accepted.stdout).unwrap();
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 50,
            "{transport}: {report:#}"
        );
    }
}

/// grpc-go (Go's crypto/tls, the peer of peers/go_grpc built here) requiring client
/// certificates: like BoringSSL's grpcio, it refuses a client without one only after a TLS
/// 1.3 handshake the client sees succeed. `grpclab load` without --cert names --cert/--key in
/// one line before any call, exit 2; with them, every call is OK.
#[test]
fn grpc_go_requiring_a_client_certificate_is_named_before_the_run() {
    if !available(
        Command::new("sh").args(["-c", "command -v go && command -v protoc"]),
        "Go and protoc (bash peers/install.sh go; grpc-go comes from the Go module proxy)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let build = dir.path().join("go");
    let built = Command::new("sh")
        .arg("build.sh")
        .arg(format!("{repo}/scenarios/complex_proto"))
        .arg(&build)
        .current_dir(format!("{repo}/peers/go_grpc"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ca = common::pki::TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    let client = ca.leaf(dir.path(), "client", false);
    // A free port, handed to the server (it takes a number, not 0).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    /// Kills the server however the test ends (a failed assertion included).
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _server = KillOnDrop(
        Command::new(build.join("server"))
            .arg(port.to_string())
            .args([&leaf.cert, &leaf.key, &ca.cert])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let target = format!("127.0.0.1:{port}");
    // Until it listens (it says nothing when it does).
    let mut listening = false;
    for _ in 0..200 {
        if std::net::TcpStream::connect(&target).is_ok() {
            listening = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(listening, "the grpc-go server never listened on {target}");
    a_missing_client_certificate_is_named(&target, &ca, &client);
}

/// A grpcio server listening on a unix socket (`LISTEN=unix:PATH`): grpclab loads it over
/// `unix:PATH` on both transports, server streaming, every message counted.
#[test]
fn grpcio_on_a_unix_socket_is_loaded_over_it() {
    if !available(
        Command::new("python3").args(["-c", "import grpc, grpc_tools"]),
        "python3 grpcio-tools",
    ) {
        return;
    }
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("grpcio.sock");
    let listen = format!("unix:{}", socket.display());
    let (mut server, _) = python_server_with_env(
        "grpcio_streaming_server.py",
        &[format!("{repo}/scenarios/streaming")],
        &[("LISTEN", listen.as_str())],
    );
    let proto = format!("{repo}/scenarios/streaming/streaming.proto");
    for (target, transport) in [
        (listen.clone(), "lab"),
        (format!("unix://{}", socket.display()), "h2"),
    ] {
        let output = grpclab()
            .args(["load", "--insecure", "--no-tui", &target, "--proto", &proto])
            .args(["--call", "grpclab.streaming.v1.StreamingEcho.Feed"])
            .args([
                "-d",
                r#"{"count": 5, "payload": "AAE="}"#,
                "-n",
                "40",
                "-c",
                "4",
            ])
            .args(["--transport", transport, "--no-history", "-O", "json"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{target} {transport}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["statusCodeDistribution"]["OK"], 40, "{report}");
        assert_eq!(report["messagesReceived"], 200, "{report}");
        // Between two replies of a call: four gaps per call.
        assert_eq!(report["messageGaps"]["count"], 160, "{report}");
    }
    drop(server.stdin.take());
    let _ = server.wait();
}

/// fortio's gRPC load calls nothing but `grpc.health.v1.Health/Check`: every built-in server
/// (lab on both its transports, tonic-mt) answers SERVING for the server and its services,
/// NOT_FOUND naming what it serves for anything else, and counts each Check it answered as
/// a call (what a harness reads as the server's truth).
#[test]
fn fortio_health_checks_are_answered_and_counted_by_every_builtin_server() {
    let Some(fortio) = common::go_tool("fortio") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fortio_run = |target: &str, service: &str, calls: u32| -> serde_json::Value {
        let json = dir.path().join("fortio.json");
        let output = Command::new(&fortio)
            .args([
                "load",
                "-grpc",
                "-healthservice",
                service,
                "-qps",
                "0",
                "-c",
                "4",
            ])
            .args(["-n", &calls.to_string(), "-json"])
            .arg(&json)
            .arg(target)
            .output()
            .expect("run fortio");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&std::fs::read(&json).unwrap()).expect("fortio JSON")
    };
    for args in [
        &["--impl", "lab"][..],
        &["--impl", "lab", "--transport", "h2"][..],
        &["--impl", "tonic-mt"][..],
    ] {
        let server = Server::start_with(args);
        let target = server.target();
        let served = fortio_run(&target, "", 200);
        assert_eq!(
            served["RetCodes"],
            serde_json::json!({"SERVING": 200}),
            "{args:?}"
        );
        let named = fortio_run(&target, "helloworld.Greeter", 20);
        assert_eq!(
            named["RetCodes"],
            serde_json::json!({"SERVING": 20}),
            "{args:?}"
        );
        let unknown = fortio_run(&target, "no.such.Service", 10);
        assert_eq!(
            unknown["RetCodes"],
            serde_json::json!({"ERROR": 10}),
            "{args:?}"
        );
        // Only the answered checks count: the unknown service's ten were refused.
        assert_eq!(server.stats()["calls"], 220, "{args:?}");
    }
}
