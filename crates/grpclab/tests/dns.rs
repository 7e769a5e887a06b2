//! Names resolved by a DNS server of the test's own (`dns://SERVER/NAME:PORT`, gRPC's
//! authority form): a name with two loopback addresses gets calls on both under round_robin;
//! a name whose answer changes mid-run is followed when the connection is re-made; a DNS
//! server that never answers or a bad server address is one line.

mod common;

use common::{grpclab, Server};
use std::net::{Ipv4Addr, UdpSocket};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A DNS server on 127.0.0.1 answering every A question with `answer` (TTL 0) and every
/// other question with no record; it counts the A questions.
struct Dns {
    port: u16,
    answer: Arc<Mutex<Vec<Ipv4Addr>>>,
    questions: Arc<AtomicU64>,
}

impl Dns {
    fn start(answer: &[Ipv4Addr]) -> Dns {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let answer = Arc::new(Mutex::new(answer.to_vec()));
        let questions = Arc::new(AtomicU64::new(0));
        let (shared, counted) = (Arc::clone(&answer), Arc::clone(&questions));
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = socket.recv_from(&mut buf) {
                if let Some(reply) = reply(&buf[..n], &shared.lock().unwrap(), &counted) {
                    let _ = socket.send_to(&reply, from);
                }
            }
        });
        Dns {
            port,
            answer,
            questions,
        }
    }

    fn set(&self, answer: &[Ipv4Addr]) {
        *self.answer.lock().unwrap() = answer.to_vec();
    }
}

/// The reply to one query (RFC 1035 §4.1): its header and question back, then an A record
/// per address for an A question.
fn reply(query: &[u8], answer: &[Ipv4Addr], questions: &AtomicU64) -> Option<Vec<u8>> {
    if query.len() < 12 {
        return None;
    }
    // The question's name: labels up to the zero byte, then type and class.
    let mut at = 12;
    while *query.get(at)? != 0 {
        at += 1 + usize::from(query[at]);
    }
    let question_end = at + 5;
    let qtype = u16::from_be_bytes([*query.get(at + 1)?, *query.get(at + 2)?]);
    let records: &[Ipv4Addr] = if qtype == 1 {
        questions.fetch_add(1, Ordering::SeqCst);
        answer
    } else {
        &[]
    };
    let mut out = Vec::with_capacity(question_end + 16 * records.len());
    out.extend_from_slice(&query[..2]); // id
    let recursion_desired = query[2] & 0x01;
    out.extend_from_slice(&[0x80 | recursion_desired, 0x80]); // a response, recursion available
    out.extend_from_slice(&[0, 1]); // one question
    out.extend_from_slice(&(records.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]); // no authority, no additional records
    out.extend_from_slice(query.get(12..question_end)?);
    for ip in records {
        // The name by pointer to the question's, type A, class IN, TTL 0, 4 bytes.
        out.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]);
        out.extend_from_slice(&ip.octets());
    }
    Some(out)
}

fn calls_served(server: &Server) -> u64 {
    server.stats()["calls"].as_u64().expect("calls in stats")
}

const TWO: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const THREE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

#[test]
fn a_name_with_two_addresses_gets_calls_on_both_under_round_robin() {
    let a = Server::start_with(&["--impl", "lab", "--host", "127.0.0.2"]);
    let port = a.addr.port().to_string();
    let b = Server::start_with(&["--impl", "lab", "--host", "127.0.0.3", "--port", &port]);
    let dns = Dns::start(&[TWO, THREE]);
    let target = format!("dns://127.0.0.1:{}/grpclab.test:{port}", dns.port);
    let output = grpclab()
        .args(["load", "--insecure", &target, "--scenario", "string_100B"])
        .args(["-n", "2000", "-c", "8", "--connections", "4"])
        .args(["--lb-strategy", "round_robin", "--no-history", "-O", "json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["statusCodeDistribution"]["OK"], 2000);
    assert_eq!(
        report["options"]["authority"],
        format!("grpclab.test:{port}")
    );
    let shares = report["options"]["addresses"].as_array().unwrap();
    assert_eq!(shares.len(), 2, "{shares:?}");
    let (served_a, served_b) = (calls_served(&a), calls_served(&b));
    assert!(served_a > 0 && served_b > 0, "{served_a} / {served_b}");
    assert_eq!(shares[0]["address"], a.target());
    assert_eq!(shares[0]["calls"], served_a);
    assert_eq!(shares[1]["calls"], served_b);
    assert!(dns.questions.load(Ordering::SeqCst) >= 1);
}

/// The name moves from 127.0.0.2 to 127.0.0.3 and the old server goes away: the connection
/// is re-made to the name's new address and calls carry on there, on both client transports.
/// Every call is in one address's count, the ones failed during the move included.
#[test]
fn a_name_whose_address_changes_is_followed_on_reconnect() {
    for transport in ["lab", "h2"] {
        let mut a = Server::start_with(&["--impl", "lab", "--host", "127.0.0.2"]);
        let port = a.addr.port().to_string();
        let b = Server::start_with(&["--impl", "lab", "--host", "127.0.0.3", "--port", &port]);
        let dns = Dns::start(&[TWO]);
        let target = format!("dns://127.0.0.1:{}/grpclab.test:{port}", dns.port);
        let client = grpclab()
            .args(["load", "--insecure", &target, "--scenario", "string_100B"])
            .args(["-z", "3s", "--rps", "400", "--connections", "1"])
            .args(["--transport", transport, "--no-history", "-O", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        while calls_served(&a) < 100 {}
        dns.set(&[THREE]);
        let status = a.terminate();
        assert!(status.success(), "{status:?}");
        let output = client.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let served_b = calls_served(&b);
        assert!(
            served_b > 0,
            "{transport}: the new address got no call: {report}"
        );
        let shares = report["options"]["addresses"].as_array().unwrap();
        assert_eq!(shares.len(), 2, "{transport}: {shares:?}");
        assert_eq!(shares[1]["address"], b.target());
        assert_eq!(shares[1]["connections"], 0, "none at the start");
        assert!(
            shares[1]["calls"].as_u64().unwrap() >= served_b,
            "{transport}: {shares:?} vs {served_b}"
        );
        let counted: u64 = shares.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
        let abandoned = report["abandoned"].as_u64().unwrap_or(0);
        assert_eq!(
            counted + abandoned,
            report["count"].as_u64().unwrap(),
            "{report}"
        );
        assert!(dns.questions.load(Ordering::SeqCst) >= 2, "asked again");
    }
}

#[test]
fn a_dns_server_that_never_answers_or_a_bad_one_is_one_line() {
    // Bound, never read: every question times out.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    for (target, needle) in [
        (
            format!("dns://127.0.0.1:{port}/grpclab.test:50051"),
            "grpclab.test",
        ),
        (
            "dns://not-an-ip/grpclab.test:50051".to_owned(),
            "not a DNS server's address",
        ),
        ("dns://127.0.0.1:53/grpclab.test".to_owned(), "no port"),
    ] {
        let output = grpclab()
            .args(["load", "--insecure", &target, "--scenario", "string_100B"])
            .args(["-n", "5", "--no-history"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{target}: {stderr}");
        assert!(stderr.contains(needle), "{target}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{target}: {stderr}");
    }
}
