//! TLS end to end over real sockets, with certificates made in the test: our client against
//! our servers (lab on both transports, tonic-mt), mutual TLS accepted and refused, and each
//! way it goes wrong (unknown CA, wrong name, expired, plaintext and TLS crossed) giving one
//! line that names the flag to use, exit 2, never a hang. Interop with TLS stacks we did
//! not write (grpcio, h2load) is in interop.rs.

mod common;

use common::pki::TestCa;
use common::{grpclab, Server};
use std::path::Path;

/// `grpclab load` of 200 complex_proto calls at `target` with `flags`: (exit code, stdout, stderr).
fn load(target: &str, flags: &[&str]) -> (i32, String, String) {
    let output = grpclab()
        .args([
            "load",
            target,
            "--scenario",
            "complex_proto",
            "-n",
            "200",
            "-c",
            "8",
        ])
        .args(["--connect-timeout", "5s", "-O", "json"])
        .args(flags)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn ok_count(stdout: &str) -> u64 {
    let report: serde_json::Value = serde_json::from_str(stdout).unwrap();
    report["statusCodeDistribution"]["OK"].as_u64().unwrap_or(0)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The last line of stderr: the one-line error.
fn error_line(stderr: &str) -> &str {
    stderr.lines().last().unwrap_or("")
}

#[test]
fn every_built_in_server_serves_tls_to_both_client_transports() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    for server_args in [
        &["--impl", "lab"][..],
        &["--impl", "lab", "--transport", "h2"],
        &["--impl", "lab", "--decode", "pool"],
        &["--impl", "tonic-mt"],
        &["--impl", "tonic-st"],
    ] {
        let server = Server::start_tls(server_args, &leaf);
        for transport in ["lab", "h2"] {
            let (code, stdout, stderr) = load(
                &server.target(),
                &["--cacert", path(&ca.cert), "--transport", transport],
            );
            assert_eq!(code, 0, "{server_args:?} via {transport}: {stderr}");
            assert_eq!(ok_count(&stdout), 200, "{server_args:?} via {transport}");
            let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(report["options"]["insecure"], false);
            assert_eq!(report["options"]["cacert"], path(&ca.cert));
        }
        // The name given with --cname is the one verified: `localhost` is in the certificate.
        let (code, stdout, stderr) = load(
            &server.target(),
            &["--cacert", path(&ca.cert), "--cname", "localhost"],
        );
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(ok_count(&stdout), 200);
    }
}

#[test]
fn large_messages_cross_tls_records_intact() {
    // large_complex is ~166 KB a request: many TLS records per message both ways, and our
    // engine's TLS buffer limit (256 KiB) reached while writing a batch.
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    let server = Server::start_tls(&["--impl", "lab"], &leaf);
    let output = grpclab()
        .args(["load", &server.target(), "--scenario", "large_complex"])
        .args(["-n", "300", "-c", "16", "--validate", "-O", "json"])
        .args(["--cacert", path(&ca.cert)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(ok_count(&String::from_utf8_lossy(&output.stdout)), 300);
}

#[test]
fn mutual_tls_accepts_a_client_of_its_ca_and_refuses_others() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    let client = ca.leaf(dir.path(), "client", false);
    let stranger_ca = TestCa::new(dir.path(), "stranger");
    let stranger = stranger_ca.leaf(dir.path(), "stranger-client", false);
    for implementation in ["lab", "tonic-mt"] {
        let server = Server::start_tls(
            &["--impl", implementation, "--tls-client-ca", path(&ca.cert)],
            &leaf,
        );
        let trust = ["--cacert", path(&ca.cert)];
        let (code, stdout, stderr) = load(
            &server.target(),
            &[
                &trust[..],
                &["--cert", path(&client.cert), "--key", path(&client.key)],
            ]
            .concat(),
        );
        assert_eq!(code, 0, "{implementation}: {stderr}");
        assert_eq!(ok_count(&stdout), 200, "{implementation}");

        // No client certificate: refused at the handshake (TLS 1.3 reports it on the first
        // read), one line that names --cert and --key.
        let (code, _, stderr) = load(&server.target(), &trust);
        assert_eq!(
            code, 2,
            "{implementation}: accepted without a client certificate"
        );
        let line = error_line(&stderr);
        assert!(
            line.contains("--cert") && line.contains("--key"),
            "{implementation}: {stderr}"
        );

        // A certificate from a CA the server does not trust: refused.
        let (code, _, stderr) = load(
            &server.target(),
            &[
                &trust[..],
                &["--cert", path(&stranger.cert), "--key", path(&stranger.key)],
            ]
            .concat(),
        );
        assert_eq!(
            code, 2,
            "{implementation}: accepted a stranger's certificate"
        );
        assert!(
            error_line(&stderr).contains("refused"),
            "{implementation}: {stderr}"
        );

        // A server's certificate (serverAuth only) given as the client's: refused, and the
        // line names --cert (it once said only 'received fatal alert: UnsupportedCertificate').
        let server_only = ca.server_only_leaf(dir.path(), "server-only");
        let (code, _, stderr) = load(
            &server.target(),
            &[
                &trust[..],
                &[
                    "--cert",
                    path(&server_only.cert),
                    "--key",
                    path(&server_only.key),
                ],
            ]
            .concat(),
        );
        assert_eq!(code, 2, "{implementation}: accepted a server certificate");
        let line = error_line(&stderr);
        assert!(
            line.contains("--cert") && line.contains("client certificate"),
            "{implementation}: {stderr}"
        );
    }
}

#[test]
fn verification_failures_are_one_line_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    let expired = ca.leaf(dir.path(), "expired", true);
    let server = Server::start_tls(&["--impl", "lab"], &leaf);
    let target = server.target();

    // Unknown CA (the system's roots do not hold our test CA).
    let (code, stdout, stderr) = load(&target, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert!(error_line(&stderr).contains("--cacert"), "{stderr}");

    // Wrong name.
    let (code, _, stderr) = load(
        &target,
        &["--cacert", path(&ca.cert), "--cname", "example.com"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        error_line(&stderr).contains("not valid for the name") && stderr.contains("--cname"),
        "{stderr}"
    );

    // --skipTLS: no verification, said loudly, and the run works.
    let (code, stdout, stderr) = load(&target, &["--skipTLS", "--cname", "example.com"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("NOT verified"), "{stderr}");
    assert_eq!(ok_count(&stdout), 200);

    // A self-signed certificate that is also a CA (`openssl req -x509`'s default), given as
    // --cacert: ghz (Go) accepts it; rustls refuses a CA as the server's own certificate, and
    // grpclab says so in one line with the two ways out (docs/ghz-flags.md).
    let self_signed = common::pki::self_signed_ca_server(dir.path());
    let self_signed_server = Server::start_tls(&["--impl", "lab"], &self_signed);
    let (code, _, stderr) = load(
        &self_signed_server.target(),
        &["--cacert", path(&self_signed.cert)],
    );
    assert_eq!(code, 2, "{stderr}");
    let line = error_line(&stderr);
    assert!(
        line.contains("is a CA certificate") && line.contains("--skipTLS"),
        "{stderr}"
    );

    // Expired certificate.
    let expired_server = Server::start_tls(&["--impl", "tonic-mt"], &expired);
    let (code, _, stderr) = load(&expired_server.target(), &["--cacert", path(&ca.cert)]);
    assert_eq!(code, 2, "{stderr}");
    assert!(error_line(&stderr).contains("expired"), "{stderr}");

    // Bad files: one line naming the flag and the file, exit 2, before anything runs.
    let missing = dir.path().join("missing.pem");
    let (code, _, stderr) = load(&target, &["--cacert", path(&missing)]);
    assert_eq!(code, 2, "{stderr}");
    assert!(error_line(&stderr).contains("--cacert"), "{stderr}");
    let (code, _, stderr) = load(&target, &["--cacert", path(&leaf.key)]);
    assert_eq!(code, 2, "{stderr}");
    assert!(error_line(&stderr).contains("no certificate"), "{stderr}");
    let output = grpclab()
        .args(["serve", "--port", "0", "--impl", "lab", "--tls-cert"])
        .arg(&leaf.cert)
        .arg("--tls-key")
        .arg(&leaf.cert)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--tls-key"));
}

#[test]
fn plaintext_and_tls_crossed_say_which_flag_to_use() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    for implementation in ["lab", "tonic-mt"] {
        let tls_server = Server::start_tls(&["--impl", implementation], &leaf);
        let (code, stdout, stderr) = load(&tls_server.target(), &["--insecure"]);
        assert_eq!(code, 2, "{implementation}: {stderr}");
        assert!(stdout.is_empty());
        let line = error_line(&stderr);
        assert!(
            line.contains("speaks TLS") && line.contains("drop --insecure"),
            "{implementation}: {stderr}"
        );

        let plain_server = Server::start(implementation);
        for transport in ["lab", "h2"] {
            let (code, _, stderr) = load(
                &plain_server.target(),
                &["--cacert", path(&ca.cert), "--transport", transport],
            );
            assert_eq!(code, 2, "{implementation}/{transport}: {stderr}");
            assert!(
                error_line(&stderr).contains("use --insecure"),
                "{implementation}/{transport}: {stderr}"
            );
        }
    }
}

#[test]
fn reflection_and_the_admin_rpc_work_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    let server = Server::start_tls(&["--impl", "tonic-mt"], &leaf);
    let output = grpclab()
        .args([
            "load",
            &server.target(),
            "--call",
            "helloworld.Greeter.SayHello",
        ])
        .args([
            "-d",
            r#"{"request":{"name":"tls"}}"#,
            "-n",
            "50",
            "-O",
            "json",
        ])
        .args(["--cacert", path(&ca.cert), "--validate"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(ok_count(&String::from_utf8_lossy(&output.stdout)), 50);
}

/// `grpclab stats` speaks TLS unless `--insecure`, as `load`: it reads a TLS server's counters
/// with `--cacert`; plaintext against it, and TLS against a plaintext server, are one line
/// naming the flag, not a hang.
#[test]
fn stats_reads_a_tls_server() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let leaf = ca.leaf(dir.path(), "server", false);
    let server = Server::start_tls(&["--impl", "lab"], &leaf);
    let output = grpclab()
        .args(["stats", &server.target(), "--cacert", path(&ca.cert)])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stats: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(stats["implementation"], "lab", "{stats}");
    let plain = grpclab()
        .args(["stats", "--insecure", &server.target()])
        .output()
        .unwrap();
    assert!(!plain.status.success());
    assert!(String::from_utf8_lossy(&plain.stderr).contains("drop --insecure"));
    let plaintext_server = Server::start("lab");
    let crossed = grpclab()
        .args(["stats", &plaintext_server.target()])
        .output()
        .unwrap();
    assert!(!crossed.status.success());
    let stderr = String::from_utf8_lossy(&crossed.stderr);
    assert!(stderr.contains("--insecure"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}
