//! Helpers shared by the binary's integration tests: a `grpclab serve` child process.

#![allow(dead_code)]

pub mod leftovers;
pub mod pki;
pub mod recording;
pub mod scripted;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// The binary under test.
pub fn grpclab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_grpclab"))
}

/// Whether a `grpclab load` finished and wrote its results: exit 0, or 5 when it did but no
/// call succeeded (docs/ci.md) — what the tests of failing servers and refused calls expect.
pub fn finished(output: &std::process::Output) -> bool {
    matches!(output.status.code(), Some(0 | 5))
}

/// `grpclab load ARGS -O json --no-history`: its JSON report (`None` when it wrote none),
/// its exit code and its stderr.
pub fn load_report(args: &[&str]) -> (Option<serde_json::Value>, Option<i32>, String) {
    let out = grpclab()
        .arg("load")
        .args(args)
        .args(["-O", "json", "--no-history"])
        .output()
        .expect("run grpclab load");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        serde_json::from_slice(&out.stdout).ok(),
        out.status.code(),
        stderr,
    )
}

/// A user's own service, which no built-in server serves: `my.pkg.Svc.Method`, written as
/// `my.proto` into `dir` (every call against a built-in server ends Unimplemented).
pub fn unserved_service_proto(dir: &std::path::Path) -> std::path::PathBuf {
    let proto = dir.join("my.proto");
    std::fs::write(
        &proto,
        "syntax = \"proto3\";\npackage my.pkg;\nmessage Req { string name = 1; }\nmessage Resp {}\nservice Svc { rpc Method(Req) returns (Resp); }\n",
    )
    .expect("write my.proto");
    proto
}

/// A `grpclab serve` child process, stopped with SIGTERM when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    /// Every line the server printed on stderr after its `listening on` line, as it comes.
    pub stderr_lines: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub fn start(implementation: &str) -> Server {
        Server::start_with(&["--impl", implementation])
    }

    /// `args` may name a `--port`; without one the server takes a free port.
    pub fn start_with(args: &[&str]) -> Server {
        let port: &[&str] = if args.contains(&"--port") {
            &[]
        } else {
            &["--port", "0"]
        };
        let mut child = grpclab()
            .arg("serve")
            .args(port)
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn grpclab serve");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("serve printed no 'listening on' line")
                .expect("read stderr");
            if let Some((_, addr)) = line.split_once("listening on ") {
                break addr.trim().parse().expect("address");
            }
        };
        // Keep reading, so that the server never writes into a closed pipe.
        let stderr_lines = Arc::new(Mutex::new(Vec::new()));
        let collected = Arc::clone(&stderr_lines);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                collected.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            addr,
            stderr_lines,
        }
    }

    /// A server serving TLS with `pair` (`--tls-cert`, `--tls-key` added to `args`).
    pub fn start_tls(args: &[&str], pair: &pki::Pair) -> Server {
        let mut args = args.to_vec();
        let (cert, key) = (pair.cert.to_str().unwrap(), pair.key.to_str().unwrap());
        args.extend(["--tls-cert", cert, "--tls-key", key]);
        Server::start_with(&args)
    }

    pub fn target(&self) -> String {
        self.addr.to_string()
    }

    /// The server's own counters (`grpclab stats`: calls, allocations, ...), as JSON.
    pub fn stats(&self) -> serde_json::Value {
        let out = grpclab()
            .args(["stats", &self.target(), "--insecure"])
            .output()
            .expect("run grpclab stats");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("stats JSON")
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        signal(self.child.id(), "TERM");
        self.child.wait().expect("wait for server")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// Found or skipped, from the test kit (shared with the other crates' tests).
#[allow(unused_imports)]
pub use grpclab_testkit::process::signal;
#[allow(unused_imports)]
pub use grpclab_testkit::tools::{chromium, go_tool, CHROMIUM_FLAGS};

/// `grpclab load ARGS --shard I/N` for each of `shards` generators (each writing its JSON part
/// into `dir`), then `grpclab merge` of the parts: the parts' paths and the merged report.
#[allow(dead_code)]
pub fn run_shards_and_merge(
    args: &[&str],
    shards: usize,
    dir: &std::path::Path,
) -> (Vec<std::path::PathBuf>, serde_json::Value) {
    let mut parts = Vec::new();
    for index in 0..shards {
        let part = dir.join(format!("shard-{index}.json"));
        let out = grpclab()
            .arg("load")
            .args(args)
            .args(["--shard", &format!("{index}/{shards}"), "-O", "json", "-o"])
            .arg(&part)
            .output()
            .expect("run grpclab load");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        parts.push(part);
    }
    let out = grpclab()
        .arg("merge")
        .args(&parts)
        .args(["-O", "json"])
        .output()
        .expect("run grpclab merge");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged = serde_json::from_slice(&out.stdout).expect("merged JSON");
    (parts, merged)
}

/// A one-worker tokio runtime and a listener on a loopback port of its own: the start of
/// every test server written on the `h2` crate.
#[allow(dead_code)]
pub fn loopback_listener() -> (
    tokio::runtime::Runtime,
    tokio::net::TcpListener,
    std::net::SocketAddr,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("local address");
    (runtime, listener, addr)
}
