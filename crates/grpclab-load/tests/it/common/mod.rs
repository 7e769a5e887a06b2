//! Test servers on loopback: a scriptable raw HTTP/2 gRPC responder (to produce the failures a
//! well-behaved server never would) and the tonic baseline. Each runs on its own thread and
//! runtime, so a test can kill it outright, as a crash would.

#![allow(dead_code)]

pub mod fault;

use bytes::Bytes;
use grpclab_core::framing::unframe_single;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the scripted server does with one call.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Echo the request message back with status OK.
    Echo,
    /// Send these message bytes (framed by the server) with status OK.
    Message(Vec<u8>),
    /// Trailers-only response with this status and message.
    Status(u32, &'static str),
    /// Never answer.
    Hang,
    /// Echo, after this long (a slow or starving server, for this call only).
    EchoAfter(std::time::Duration),
}

/// Decides the reply from the request's message bytes.
pub type Script = Arc<dyn Fn(&[u8]) -> Reply + Send + Sync>;

/// A running test server; killed when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    /// Calls answered (any reply but Hang).
    pub served: Arc<AtomicU64>,
    /// The grpc-timeout header of the last call seen.
    pub last_timeout: Arc<Mutex<Option<String>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl TestServer {
    /// Kills the server abruptly: every connection is dropped without GOAWAY.
    pub fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }

    /// Waits until the server has answered at least `calls` calls; gives up after 30 s so a
    /// broken test ends instead of hanging (the caller's assertions then fail).
    pub fn wait_for_served(&self, calls: u64) {
        let give_up = std::time::Instant::now() + Duration::from_secs(30);
        while self.served.load(Ordering::Relaxed) < calls && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("test runtime")
}

/// Starts the scripted raw HTTP/2 server on `addr` (port 0 for any).
pub fn scripted_server(addr: SocketAddr, script: Script) -> TestServer {
    scripted_server_with_goaway(addr, script, None)
}

/// Like [`scripted_server`], but each connection sends GOAWAY (graceful shutdown) after
/// accepting `goaway_after` streams, as a server going away for a restart does.
pub fn scripted_server_with_goaway(
    addr: SocketAddr,
    script: Script,
    goaway_after: Option<u64>,
) -> TestServer {
    let runtime = runtime();
    let served = Arc::new(AtomicU64::new(0));
    let last_timeout = Arc::new(Mutex::new(None));
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .expect("bind test server");
    let addr = listener.local_addr().expect("local addr");
    let (served_in, timeout_in) = (Arc::clone(&served), Arc::clone(&last_timeout));
    runtime.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let _ = tcp.set_nodelay(true);
            let (script, served, last_timeout) = (
                Arc::clone(&script),
                Arc::clone(&served_in),
                Arc::clone(&timeout_in),
            );
            tokio::spawn(async move {
                let Ok(mut connection) = h2::server::handshake(tcp).await else {
                    return;
                };
                let mut accepted = 0u64;
                while let Some(Ok((request, respond))) = connection.accept().await {
                    accepted += 1;
                    if Some(accepted) == goaway_after {
                        connection.graceful_shutdown();
                    }
                    let (script, served, last_timeout) = (
                        Arc::clone(&script),
                        Arc::clone(&served),
                        Arc::clone(&last_timeout),
                    );
                    tokio::spawn(answer(request, respond, script, served, last_timeout));
                }
            });
        }
    });
    TestServer {
        addr,
        served,
        last_timeout,
        runtime: Some(runtime),
    }
}

async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    script: Script,
    served: Arc<AtomicU64>,
    last_timeout: Arc<Mutex<Option<String>>>,
) {
    let timeout = request
        .headers()
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    *last_timeout.lock().unwrap() = timeout;
    let mut body = request.into_body();
    let mut bytes = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    let message = unframe_single(&bytes).unwrap_or(&[]).to_vec();
    let reply = script(&message);
    let head = |status: Option<u32>, message: &str| {
        let mut builder = http::Response::builder()
            .status(200)
            .header("content-type", "application/grpc");
        if let Some(status) = status {
            builder = builder
                .header("grpc-status", status.to_string())
                .header("grpc-message", message);
        }
        builder.body(()).unwrap()
    };
    let send_message = |respond: &mut h2::server::SendResponse<Bytes>, message: &[u8]| {
        let mut stream = respond.send_response(head(None, ""), false)?;
        stream.send_data(grpclab_core::framing::frame_message(message), false)?;
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        stream.send_trailers(trailers)
    };
    let _ = match reply {
        Reply::Hang => {
            std::future::pending::<()>().await;
            Ok(())
        }
        Reply::Echo => send_message(&mut respond, &message),
        Reply::EchoAfter(delay) => {
            tokio::time::sleep(delay).await;
            send_message(&mut respond, &message)
        }
        Reply::Message(bytes) => send_message(&mut respond, &bytes),
        Reply::Status(code, text) => respond
            .send_response(head(Some(code), text), true)
            .map(|_| ()),
    };
    served.fetch_add(1, Ordering::Relaxed);
}

/// Starts the tonic baseline server on `addr`.
pub fn tonic_server(addr: SocketAddr) -> TestServer {
    let runtime = runtime();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .expect("bind tonic server");
    let addr = listener.local_addr().expect("local addr");
    runtime.spawn(grpclab_server::tonic_baseline::run(
        listener,
        "tonic-mt",
        None,
        false,
        std::future::pending(),
    ));
    TestServer {
        addr,
        served: Arc::new(AtomicU64::new(0)),
        last_timeout: Arc::new(Mutex::new(None)),
        runtime: Some(runtime),
    }
}

/// Any free loopback port.
pub fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}
