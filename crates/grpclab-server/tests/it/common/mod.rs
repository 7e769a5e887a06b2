//! In-process servers on loopback; the raw clients the conformance tests speak through come from
//! the test kit (grpclab-testkit).

#![allow(dead_code)]

use bytes::Bytes;
use grpclab_server::lab::{self, LabConfig};
use std::net::SocketAddr;
use tokio_util::sync::CancellationToken;

/// A server running on its own threads; stopped (SIGTERM-like, graceful) when dropped.
pub struct Running {
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    thread: Option<std::thread::JoinHandle<bool>>,
}

impl Running {
    /// Asks for a graceful shutdown and returns whether the server ended cleanly.
    pub fn stop(mut self) -> bool {
        self.shutdown.cancel();
        self.thread
            .take()
            .map(|t| t.join().unwrap_or(false))
            .unwrap_or(false)
    }

    /// The token that stops the server (for tests that shut down mid-call).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Waits for the server's thread to end.
    pub fn join(mut self) -> bool {
        self.thread
            .take()
            .map(|t| t.join().unwrap_or(false))
            .unwrap_or(false)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Starts `lab` with `config` on a free loopback port.
pub fn start_lab(config: LabConfig) -> Running {
    let listener = lab::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let thread = std::thread::spawn(move || lab::run(listener, 2, config, token).is_ok());
    Running {
        addr,
        shutdown,
        thread: Some(thread),
    }
}

/// Starts the tonic baseline on a free loopback port.
pub fn start_tonic() -> Running {
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            grpclab_server::tonic_baseline::run(
                listener,
                "tonic-mt",
                None,
                false,
                token.cancelled_owned(),
            )
            .await
            .is_ok()
        })
    });
    Running {
        addr: addr_rx.recv().unwrap(),
        shutdown,
        thread: Some(thread),
    }
}

/// Every server, named: lab on its own engine, lab on the h2 crate, and tonic.
pub fn every_server() -> Vec<(&'static str, Running)> {
    vec![
        ("lab", start_lab(LabConfig::default())),
        ("lab-h2", start_lab(on_h2(LabConfig::default()))),
        ("tonic-mt", start_tonic()),
    ]
}

/// `config` on the h2 crate's transport.
pub fn on_h2(config: LabConfig) -> LabConfig {
    LabConfig {
        transport: lab::Transport::H2,
        ..config
    }
}

/// Runs `test` against lab on each transport, with `config`.
pub fn each_lab_transport(config: LabConfig, test: impl Fn(&str, &Running)) {
    for (name, config) in [("lab", config.clone()), ("lab-h2", on_h2(config))] {
        let server = start_lab(config);
        test(name, &server);
    }
}

/// The complex_proto request, framed.
pub fn complex_request() -> Bytes {
    grpclab_core::Scenario::builtin("complex_proto")
        .unwrap()
        .requests()[0]
        .clone()
}

// Each test binary includes this module and uses some of it: the raw clients live in the test
// kit, shared with the other crates' tests.
#[allow(unused_imports)]
pub use grpclab_testkit::connection::{Frame, RawConnection};
#[allow(unused_imports)]
pub use grpclab_testkit::h2_call::{raw_call, RawCall, RawResponse};
#[allow(unused_imports)]
pub use grpclab_testkit::raw::codes as frame;
#[allow(unused_imports)]
pub use grpclab_testkit::raw::{frame as raw_frame, request_header_block};
