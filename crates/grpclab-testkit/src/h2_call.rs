//! One call through the `h2` crate (a client independent of grpclab-h2): what the server
//! answered, head, body and trailers.

use bytes::Bytes;
use std::net::SocketAddr;
use std::time::Duration;

/// A minimal h2 client call: the response head (status, headers) and, if the stream
/// continues, the body bytes and trailers.
pub struct RawResponse {
    /// The HTTP status.
    pub http_status: u16,
    /// The response headers.
    pub headers: http::HeaderMap,
    /// The body's bytes, all DATA frames together.
    pub body: Vec<u8>,
    /// The trailers, if any came.
    pub trailers: Option<http::HeaderMap>,
}

impl RawResponse {
    /// `grpc-status` from trailers, or from the headers (trailers-only).
    pub fn grpc_status(&self) -> Option<u32> {
        let from = |map: &http::HeaderMap| {
            map.get("grpc-status")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
        };
        self.trailers
            .as_ref()
            .and_then(from)
            .or_else(|| from(&self.headers))
    }

    /// `grpc-message` from trailers or headers, empty if none.
    pub fn grpc_message(&self) -> String {
        let from = |map: &http::HeaderMap| {
            map.get("grpc-message")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        self.trailers
            .as_ref()
            .and_then(from)
            .or_else(|| from(&self.headers))
            .unwrap_or_default()
    }
}

/// What to send on a raw h2 call.
pub struct RawCall<'a> {
    /// The request's `:path`.
    pub path: &'a str,
    /// Headers sent beside the pseudo-headers.
    pub headers: Vec<(&'static str, &'a str)>,
    /// Sent as one DATA frame, ending the stream unless `keep_open`.
    pub body: Option<Bytes>,
    /// Leaves the request stream open after the body (a client still sending).
    pub keep_open: bool,
}

impl<'a> RawCall<'a> {
    /// A gRPC call to `path` with `body` (a framed message) and the usual headers.
    pub fn grpc(path: &'a str, body: Bytes) -> RawCall<'a> {
        RawCall {
            path,
            headers: vec![("content-type", "application/grpc"), ("te", "trailers")],
            body: Some(body),
            keep_open: false,
        }
    }
}

/// Sends one call over a fresh h2 connection and reads the whole response.
pub fn raw_call(addr: SocketAddr, call: RawCall<'_>) -> RawResponse {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (sender, connection) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut sender = sender.ready().await.unwrap();
        let mut request = http::Request::builder()
            .method("POST")
            .uri(format!("http://{addr}{}", call.path));
        for (name, value) in &call.headers {
            request = request.header(*name, *value);
        }
        let end_now = call.body.is_none() && !call.keep_open;
        let (response, mut stream) = sender
            .send_request(request.body(()).unwrap(), end_now)
            .unwrap();
        if let Some(body) = call.body {
            stream.send_data(body, !call.keep_open).unwrap();
        }
        let response = tokio::time::timeout(Duration::from_secs(20), response)
            .await
            .expect("no response within 20 s")
            .unwrap();
        let (head, mut body) = response.into_parts();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap();
            let _ = body.flow_control().release_capacity(chunk.len());
            bytes.extend_from_slice(&chunk);
        }
        let trailers = body.trailers().await.ok().flatten();
        drop(stream);
        RawResponse {
            http_status: head.status.as_u16(),
            headers: head.headers,
            body: bytes,
            trailers,
        }
    })
}
