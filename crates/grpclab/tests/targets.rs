//! Targets as gRPC names them: several addresses (`ipv4:A,B`, `dns:///NAME:PORT`) spread by
//! `--lb-strategy`, an address that goes away mid-run, one that never answers, and targets
//! missing their port, refused in one line. (A DNS server of a test's own: dns.rs.)

mod common;

use std::process::Stdio;

use common::{grpclab, Server};

fn calls_served(server: &Server) -> u64 {
    server.stats()["calls"].as_u64().expect("calls in stats")
}

/// Two servers on two loopback addresses: round_robin gives each half the connections, every
/// call is served by one of them, and the calls reported per address are each server's own
/// count.
#[test]
fn round_robin_spreads_connections_over_every_address() {
    let a = Server::start_with(&["--impl", "lab", "--host", "127.0.0.2"]);
    let b = Server::start_with(&["--impl", "lab", "--host", "127.0.0.3"]);
    let target = format!("ipv4:{},{}", a.target(), b.target());
    let output = grpclab()
        .args(["load", "--insecure", &target, "--scenario", "string_100B"])
        .args(["-n", "4000", "-c", "8", "--connections", "4"])
        .args(["--lb-strategy", "round_robin", "--no-history", "-O", "json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["statusCodeDistribution"]["OK"], 4000);
    let shares = report["options"]["addresses"]
        .as_array()
        .expect("addresses");
    assert_eq!(shares.len(), 2);
    for (share, server) in shares.iter().zip([&a, &b]) {
        assert_eq!(share["address"], server.target());
        assert_eq!(share["connections"], 2);
    }
    assert_eq!(report["options"]["lb-strategy"], "round_robin");
    let (served_a, served_b) = (calls_served(&a), calls_served(&b));
    assert!(served_a > 0 && served_b > 0, "{served_a} / {served_b}");
    assert_eq!(served_a + served_b, 4000);
    assert_eq!(shares[0]["calls"], served_a, "{shares:?}");
    assert_eq!(shares[1]["calls"], served_b, "{shares:?}");
    let summary = grpclab()
        .args(["load", "--insecure", &target, "--scenario", "string_100B"])
        .args([
            "-n",
            "100",
            "--connections",
            "2",
            "--lb-strategy",
            "round_robin",
        ])
        .args(["--no-history"])
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&summary.stdout);
    assert!(
        summary.contains(&format!("{} (1 conn, ", a.target())) && summary.contains(" calls), "),
        "{summary}"
    );
}

/// pick_first (the default) takes the first address that accepts a connection: a dead first
/// address costs nothing.
#[test]
fn pick_first_skips_an_address_that_does_not_answer() {
    let b = Server::start("lab");
    // Nothing listens on 127.0.0.9's port 1.
    let target = format!("ipv4:127.0.0.9:1,{}", b.target());
    let output = grpclab()
        .args(["load", "--insecure", &target, "--scenario", "string_100B"])
        .args([
            "-n",
            "500",
            "--connections",
            "2",
            "--no-history",
            "-O",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["statusCodeDistribution"]["OK"], 500);
    let shares = report["options"]["addresses"]
        .as_array()
        .expect("addresses");
    assert_eq!(
        shares[0]["address"],
        b.target(),
        "the one picked is listed first"
    );
    assert_eq!(shares[0]["connections"], 2);
    assert_eq!(shares[1]["connections"], 0);
    assert_eq!(calls_served(&b), 500);
    assert_eq!(
        (&shares[0]["calls"], &shares[1]["calls"]),
        (&500.into(), &0.into())
    );
}

/// One of two addresses goes away mid-run: its calls fail Unavailable and are counted; the
/// other address carries on serving.
#[test]
fn an_address_that_goes_away_is_counted_and_the_others_carry_on() {
    let a = Server::start_with(&["--impl", "lab", "--host", "127.0.0.2"]);
    let mut b = Server::start_with(&["--impl", "lab", "--host", "127.0.0.3"]);
    let target = format!("ipv4:{},{}", a.target(), b.target());
    let child = grpclab()
        .args(["load", "--insecure", &target, "--scenario", "string_100B"])
        .args(["-z", "3s", "--rps", "1000", "--connections", "2"])
        .args(["--lb-strategy", "round_robin", "--no-history", "-O", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-run: once both have served calls, B goes away.
    while calls_served(&b) < 100 || calls_served(&a) < 100 {}
    let served_a_at_kill = calls_served(&a);
    let _ = b.child.kill();
    let _ = b.child.wait();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let codes = report["statusCodeDistribution"].as_object().unwrap();
    assert!(codes["OK"].as_u64() > Some(0), "{codes:?}");
    assert!(
        codes.get("Unavailable").and_then(|v| v.as_u64()) > Some(0),
        "B's calls after it went away fail and are counted: {codes:?}"
    );
    assert!(
        codes
            .keys()
            .all(|code| code == "OK" || code == "Unavailable"),
        "{codes:?}"
    );
    assert!(calls_served(&a) > served_a_at_kill, "A carried on");
    // Every measured call is in one address's count, B's failures included.
    let shares = report["options"]["addresses"].as_array().unwrap();
    let per_address: Vec<u64> = shares
        .iter()
        .map(|s| s["calls"].as_u64().unwrap())
        .collect();
    let abandoned = report["abandoned"].as_u64().unwrap_or(0);
    assert_eq!(
        per_address.iter().sum::<u64>() + abandoned,
        report["count"].as_u64().unwrap(),
        "{shares:?}"
    );
    let unavailable = codes["Unavailable"].as_u64().unwrap();
    assert!(per_address[1] >= unavailable, "{per_address:?} {codes:?}");
}

/// A name (dns:///) resolves to its addresses; a target without its port is one line (unix
/// sockets: unix_sockets.rs).
#[test]
fn names_resolve_and_targets_without_a_port_are_one_line() {
    let server = Server::start("lab");
    let port = server.addr.port();
    let output = grpclab()
        .args(["load", "--insecure", &format!("dns:///127.0.0.1:{port}")])
        .args([
            "--scenario",
            "string_100B",
            "-n",
            "100",
            "--no-history",
            "-O",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["statusCodeDistribution"]["OK"], 100);
    assert_eq!(report["options"]["authority"], format!("127.0.0.1:{port}"));
    for (target, expected) in [
        ("ipv4:127.0.0.2", "not an address"),
        ("dns:///127.0.0.1", "no port"),
    ] {
        let output = grpclab()
            .args(["load", "--insecure", target, "--scenario", "string_100B"])
            .args(["-n", "1", "--no-history"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{target}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{target}: {stderr}");
        assert!(stderr.contains(expected), "{target}: {stderr}");
    }
}

/// IPv6 literals: `[::1]:PORT` and `ipv6:[::1]:PORT` reach a lab listening on the IPv6
/// loopback, and every call is one the server served.
#[test]
fn ipv6_literals_reach_a_server_on_the_ipv6_loopback() {
    let server = Server::start_with(&["--impl", "lab", "--host", "::1"]);
    assert!(server.target().starts_with("[::1]:"), "{}", server.target());
    for target in [server.target(), format!("ipv6:{}", server.target())] {
        let output = grpclab()
            .args(["load", "--insecure", &target, "--scenario", "string_100B"])
            .args(["-n", "300", "-c", "4", "--no-history", "-O", "json"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{target}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["statusCodeDistribution"]["OK"], 300, "{target}");
    }
    assert_eq!(calls_served(&server), 600);
}
