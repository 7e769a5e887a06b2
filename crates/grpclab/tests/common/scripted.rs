//! An HTTP/2 server that answers every call with one reply given by the test, byte for byte:
//! a status, headers, a body and optional trailers. Written on the `h2` crate, so a test can
//! make a server that lies in any way a protocol allows (a gRPC-Web body without its trailer
//! frame, a Connect error without a code, a wrong content-type) and see what the client
//! makes of it. It counts the requests it received and keeps the last one's headers.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// The reply every call gets.
#[derive(Debug, Clone)]
pub struct ScriptedReply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// HTTP/2 trailers after the body (`None`: the body ends the stream).
    pub trailers: Option<Vec<(&'static str, String)>>,
}

/// What the server saw: requests received whole, and the last one's headers and body.
#[derive(Default)]
struct Seen {
    received: AtomicU64,
    headers: Mutex<Vec<(String, String)>>,
    body: Mutex<Vec<u8>>,
    /// The last request's method and its path with the query.
    line: Mutex<(String, String)>,
}

/// The server, on a loopback port of its own, until dropped.
pub struct ScriptedServer {
    pub addr: SocketAddr,
    seen: Arc<Seen>,
    _runtime: tokio::runtime::Runtime,
}

impl ScriptedServer {
    pub fn start(reply: ScriptedReply) -> ScriptedServer {
        let (runtime, listener, addr) = super::loopback_listener();
        let seen = Arc::new(Seen::default());
        let reply = Arc::new(reply);
        let watched = Arc::clone(&seen);
        runtime.spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (reply, seen) = (Arc::clone(&reply), Arc::clone(&watched));
                tokio::spawn(async move {
                    let Ok(mut connection) = h2::server::handshake(socket).await else {
                        return;
                    };
                    while let Some(Ok((request, respond))) = connection.accept().await {
                        tokio::spawn(answer(
                            request,
                            respond,
                            Arc::clone(&reply),
                            Arc::clone(&seen),
                        ));
                    }
                });
            }
        });
        ScriptedServer {
            addr,
            seen,
            _runtime: runtime,
        }
    }

    pub fn target(&self) -> String {
        self.addr.to_string()
    }

    /// Requests received whole so far.
    pub fn received(&self) -> u64 {
        self.seen.received.load(Ordering::SeqCst)
    }

    /// The last request's headers (name, value).
    pub fn last_headers(&self) -> Vec<(String, String)> {
        self.seen.headers.lock().unwrap().clone()
    }

    /// The last request's method and path (with its query).
    #[allow(dead_code)]
    pub fn last_request_line(&self) -> (String, String) {
        self.seen.line.lock().unwrap().clone()
    }

    /// The last request's body, as received.
    #[allow(dead_code)]
    pub fn last_body(&self) -> Vec<u8> {
        self.seen.body.lock().unwrap().clone()
    }
}

async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    reply: Arc<ScriptedReply>,
    seen: Arc<Seen>,
) {
    let (parts, mut body) = request.into_parts();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let Ok(chunk) = chunk else {
            return;
        };
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    *seen.body.lock().unwrap() = bytes;
    *seen.line.lock().unwrap() = (
        parts.method.to_string(),
        parts
            .uri
            .path_and_query()
            .map_or_else(String::new, ToString::to_string),
    );
    *seen.headers.lock().unwrap() = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    seen.received.fetch_add(1, Ordering::SeqCst);
    let mut response = http::Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        response = response.header(*name, value);
    }
    let Ok(response) = response.body(()) else {
        return;
    };
    let ends_with_body = reply.trailers.is_none();
    let only_headers = reply.body.is_empty() && ends_with_body;
    let Ok(mut stream) = respond.send_response(response, only_headers) else {
        return;
    };
    if !reply.body.is_empty() || (ends_with_body && !only_headers) {
        let _ = stream.send_data(Bytes::from(reply.body.clone()), ends_with_body);
    }
    if let Some(trailers) = &reply.trailers {
        let mut map = http::HeaderMap::new();
        for (name, value) in trailers {
            if let Ok(value) = value.parse() {
                map.append(*name, value);
            }
        }
        let _ = stream.send_trailers(map);
    }
}
