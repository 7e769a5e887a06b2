//! A gRPC server that serves any method and records every call it receives, byte for byte:
//! the counting server two load generators are run against to see whether they sent the same
//! things. Written on the `h2` crate, so that nothing of grpclab's own stands between a client
//! and what is recorded.
//!
//! Every call is answered after its request stream ends, with one empty message (a valid
//! reply of any type, for any shape of call: unary, client, server or bidirectional stream),
//! and the status is OK unless the [`Behaviour`] says otherwise.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};

/// One call as the server received it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordedCall {
    /// `/package.Service/Method`.
    pub path: String,
    /// The call's metadata: every header but HTTP/2's pseudo-headers and those gRPC's
    /// transport sets itself ([`TRANSPORT_HEADERS`]), sorted by name, values as sent.
    pub metadata: Vec<(String, Vec<u8>)>,
    /// `grpc-timeout` as sent, if any.
    pub timeout: Option<String>,
    /// `grpc-encoding` as sent, if any.
    pub encoding: Option<String>,
    /// Each request message's bytes, in order (compressed ones as they came).
    pub messages: Vec<Vec<u8>>,
    /// Over TLS: the client's certificate (DER), if it presented one.
    pub client_certificate: Option<Vec<u8>>,
}

/// Headers a gRPC transport sets on every call, kept out of [`RecordedCall::metadata`].
pub const TRANSPORT_HEADERS: [&str; 6] = [
    "content-type",
    "te",
    "user-agent",
    "grpc-timeout",
    "grpc-encoding",
    "grpc-accept-encoding",
];

/// How the server answers.
#[derive(Debug, Clone, Default)]
pub struct Behaviour {
    /// Every k-th call received (counting from 1, in the order their requests ended) ends
    /// with this gRPC status code instead of OK.
    pub fail_every: Option<(u64, u32)>,
    /// A call with a request message containing this text is answered after the delay.
    pub stall_on: Option<(Vec<u8>, Duration)>,
    /// The first call the server receives is answered after this long (the others at once,
    /// unless `stall_on` says otherwise).
    pub stall_first: Option<Duration>,
    /// Each answer names its call: a response header `x-call-number: N` and a trailer
    /// `x-served-by: recording-N` (N counting from 1 as `fail_every` does).
    pub numbered: bool,
}

/// The server, on a loopback port of its own, until dropped.
pub struct RecordingServer {
    pub addr: SocketAddr,
    calls: Arc<Mutex<Vec<RecordedCall>>>,
    /// Calls the client reset (RST_STREAM CANCEL) while they stalled, before their answer.
    resets: Arc<AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

impl RecordingServer {
    pub fn start(behaviour: Behaviour) -> RecordingServer {
        RecordingServer::start_with(behaviour, None)
    }

    /// The same server behind TLS (`tls`: its certificate, key and, for mutual TLS, the CA
    /// client certificates must be signed by); each call records the client's certificate.
    #[allow(dead_code)]
    pub fn start_tls(behaviour: Behaviour, tls: &grpclab_core::tls::ServerTls) -> RecordingServer {
        RecordingServer::start_with(behaviour, Some(tls.config().expect("server TLS settings")))
    }

    fn start_with(behaviour: Behaviour, tls: Option<Arc<rustls::ServerConfig>>) -> RecordingServer {
        let (runtime, listener, addr) = super::loopback_listener();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let resets = Arc::new(AtomicU64::new(0));
        let state = Arc::new(State {
            behaviour,
            calls: Arc::clone(&calls),
            ended: AtomicU64::new(0),
            resets: Arc::clone(&resets),
        });
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        runtime.spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let state = Arc::clone(&state);
                match acceptor.clone() {
                    None => {
                        tokio::spawn(connection(socket, state, None));
                    }
                    Some(acceptor) => {
                        tokio::spawn(async move {
                            // A failed handshake is the client's to report.
                            let Ok(stream) = acceptor.accept(socket).await else {
                                return;
                            };
                            let certificate = stream
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(|chain| chain.first())
                                .map(|cert| cert.as_ref().to_vec());
                            connection(stream, state, certificate).await;
                        });
                    }
                }
            }
        });
        RecordingServer {
            addr,
            calls,
            resets,
            _runtime: runtime,
        }
    }

    pub fn target(&self) -> String {
        self.addr.to_string()
    }

    /// Calls the client reset while they stalled (`Behaviour::stall_on`), so far.
    #[allow(dead_code)]
    pub fn resets(&self) -> u64 {
        self.resets.load(Ordering::SeqCst)
    }

    /// The calls received since the last `take`, in the order their requests ended.
    pub fn take(&self) -> Vec<RecordedCall> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

struct State {
    behaviour: Behaviour,
    calls: Arc<Mutex<Vec<RecordedCall>>>,
    ended: AtomicU64,
    resets: Arc<AtomicU64>,
}

async fn connection<S>(socket: S, state: Arc<State>, client_certificate: Option<Vec<u8>>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(mut connection) = h2::server::handshake(socket).await else {
        return;
    };
    while let Some(Ok((request, respond))) = connection.accept().await {
        tokio::spawn(call(
            request,
            respond,
            Arc::clone(&state),
            client_certificate.clone(),
        ));
    }
}

async fn call(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    state: Arc<State>,
    client_certificate: Option<Vec<u8>>,
) {
    let (parts, mut body) = request.into_parts();
    let mut received = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let Ok(chunk) = chunk else {
            return; // reset by the client: not a call that ended
        };
        let _ = body.flow_control().release_capacity(chunk.len());
        received.extend_from_slice(&chunk);
    }
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let mut metadata: Vec<(String, Vec<u8>)> = parts
        .headers
        .iter()
        .filter(|(name, _)| !TRANSPORT_HEADERS.contains(&name.as_str()))
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect();
    metadata.sort();
    let mut messages = Vec::new();
    let mut rest = &received[..];
    while rest.len() >= 5 {
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        let Some(message) = rest.get(5..5 + len) else {
            break;
        };
        messages.push(message.to_vec());
        rest = &rest[5 + len..];
    }
    let recorded = RecordedCall {
        path: parts.uri.path().to_owned(),
        metadata,
        timeout: header("grpc-timeout"),
        encoding: header("grpc-encoding"),
        messages,
        client_certificate,
    };
    let stall = state.behaviour.stall_on.as_ref().and_then(|(text, delay)| {
        recorded
            .messages
            .iter()
            .any(|m| m.windows(text.len()).any(|w| w == &text[..]))
            .then_some(*delay)
    });
    let number = {
        let mut calls = state.calls.lock().unwrap();
        calls.push(recorded.clone());
        state.ended.fetch_add(1, Ordering::SeqCst) + 1
    };
    let stall = match state.behaviour.stall_first {
        Some(delay) if number == 1 => Some(delay),
        _ => stall,
    };
    if let Some(delay) = stall {
        // A client that gives the call up (RST_STREAM) while it stalls is counted.
        let reset = std::future::poll_fn(|cx| respond.poll_reset(cx));
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            reset = reset => {
                // A connection that closes ends its streams too; only a CANCEL is the
                // client giving the call up.
                if matches!(reset, Ok(h2::Reason::CANCEL)) {
                    state.resets.fetch_add(1, Ordering::SeqCst);
                }
                return;
            }
        }
    }
    let code = match state.behaviour.fail_every {
        Some((every, code)) if number % every == 0 => code,
        _ => 0,
    };
    let mut response = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc");
    if state.behaviour.numbered {
        response = response.header("x-call-number", number.to_string());
    }
    let response = response.body(()).expect("response head");
    let Ok(mut stream) = respond.send_response(response, false) else {
        return;
    };
    // An empty message: flag 0, length 0.
    if code == 0
        && stream
            .send_data(Bytes::from_static(&[0; 5]), false)
            .is_err()
    {
        return;
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", code.into());
    if state.behaviour.numbered {
        if let Ok(value) = http::HeaderValue::try_from(format!("recording-{number}")) {
            trailers.insert("x-served-by", value);
        }
    }
    if code != 0 {
        trailers.insert(
            "grpc-message",
            http::HeaderValue::from_static("failed by the recording server"),
        );
    }
    let _ = stream.send_trailers(trailers);
}
