//! In-process servers on loopback, and the raw clients the conformance tests speak through.

#![allow(dead_code)]

use bytes::Bytes;
use grpclab_server::lab::{self, LabConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
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
            grpclab_server::tonic_baseline::run(listener, "tonic-mt", None, token.cancelled_owned())
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

/// A minimal h2 client call: the response head (status, headers) and, if the stream
/// continues, the body bytes and trailers.
pub struct RawResponse {
    pub http_status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
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
    pub path: &'a str,
    pub headers: Vec<(&'static str, &'a str)>,
    /// Sent as one DATA frame, ending the stream unless `keep_open`.
    pub body: Option<Bytes>,
    pub keep_open: bool,
}

impl<'a> RawCall<'a> {
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

/// HTTP/2 frame types and error codes used by the raw tests (RFC 9113).
pub mod frame {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const COMPRESSION_ERROR: u32 = 0x9;
    pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
}

/// A frame as read off the wire.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

/// A raw HTTP/2 connection: bytes in, frames out. Reads time out after 10 s so a test that
/// waits for a frame that never comes fails instead of hanging.
pub struct RawConnection {
    tcp: TcpStream,
    /// While batching, frames collect here and go out in one write.
    batch: Option<Vec<u8>>,
}

impl RawConnection {
    /// Connects and sends the client preface and an empty SETTINGS frame.
    pub fn open(addr: SocketAddr) -> RawConnection {
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut connection = RawConnection { tcp, batch: None };
        connection.send_raw(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        connection.send(frame::SETTINGS, 0, 0, &[]);
        connection
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        match &mut self.batch {
            Some(batch) => batch.extend_from_slice(bytes),
            None => self.tcp.write_all(bytes).unwrap(),
        }
    }

    /// Writes `bytes` now, reporting a failed write instead of panicking (a server that may
    /// legitimately close the connection mid-write).
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.tcp.write_all(bytes)
    }

    /// Turns Nagle's algorithm off: a client doing strict round trips of small frames would
    /// otherwise wait for delayed ACKs (40 ms each).
    pub fn set_nodelay(&self) {
        self.tcp.set_nodelay(true).unwrap();
    }

    /// Frames sent from now on wait for [`RawConnection::end_batch`], then leave in one write.
    pub fn begin_batch(&mut self) {
        self.batch = Some(Vec::new());
    }

    /// Sends the batch in one write.
    pub fn end_batch(&mut self) {
        if let Some(batch) = self.batch.take() {
            self.tcp.write_all(&batch).unwrap();
        }
    }

    /// A second handle on the same socket (to write from another thread).
    pub fn try_clone(&self) -> RawConnection {
        RawConnection {
            tcp: self.tcp.try_clone().unwrap(),
            batch: None,
        }
    }

    /// The next frame if one arrives within `limit` (the usual read timeout otherwise).
    pub fn read_frame_within(&mut self, limit: Duration) -> Option<Frame> {
        self.tcp.set_read_timeout(Some(limit)).unwrap();
        let frame = self.read_frame();
        self.tcp
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        frame
    }

    /// Sends one frame; `length` in the header is the payload's.
    pub fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        self.send_with_length(kind, flags, stream, payload, payload.len() as u32);
    }

    /// Sends one frame now, reporting a failed write (a server that closed the connection)
    /// instead of panicking.
    pub fn try_send(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
    ) -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(9 + payload.len());
        bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        bytes.push(kind);
        bytes.push(flags);
        bytes.extend_from_slice(&stream.to_be_bytes());
        bytes.extend_from_slice(payload);
        self.try_send_raw(&bytes)
    }

    /// Sends one frame whose header declares `length` (which may lie).
    pub fn send_with_length(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
        length: u32,
    ) {
        let mut bytes = Vec::with_capacity(9 + payload.len());
        bytes.extend_from_slice(&length.to_be_bytes()[1..]);
        bytes.push(kind);
        bytes.push(flags);
        bytes.extend_from_slice(&stream.to_be_bytes());
        bytes.extend_from_slice(payload);
        self.send_raw(&bytes);
    }

    /// The next frame, or `None` when the server closed the connection.
    pub fn read_frame(&mut self) -> Option<Frame> {
        let mut header = [0u8; 9];
        self.tcp.read_exact(&mut header).ok()?;
        let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0u8; length];
        self.tcp.read_exact(&mut payload).ok()?;
        Some(Frame {
            kind: header[3],
            flags: header[4],
            stream: u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff,
            payload,
        })
    }

    /// Reads frames until the server closes the connection: true if it did (EOF or reset),
    /// false if the read timed out first (the connection is still up).
    pub fn reads_until_closed(&mut self) -> bool {
        let mut header = [0u8; 9];
        loop {
            if let Err(err) = self.tcp.read_exact(&mut header) {
                return !matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
            let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
            let mut payload = vec![0u8; length];
            if let Err(err) = self.tcp.read_exact(&mut payload) {
                return !matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
        }
    }

    /// Reads frames until one of `kind` arrives (answering nothing); `None` if the connection
    /// closed first.
    pub fn read_until(&mut self, kind: u8) -> Option<Frame> {
        loop {
            let frame = self.read_frame()?;
            if frame.kind == kind {
                return Some(frame);
            }
        }
    }

    /// Reads until GOAWAY and returns its error code.
    pub fn goaway_code(&mut self) -> Option<u32> {
        let frame = self.read_until(frame::GOAWAY)?;
        Some(u32::from_be_bytes(frame.payload[4..8].try_into().ok()?))
    }
}

/// A request header block in HPACK without Huffman or indexing (RFC 7541 §6.2.2), enough for
/// raw tests: `:method POST`, `:scheme http`, `:path`, `:authority`, `content-type`, `te`.
pub fn request_header_block(path: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // indexed: :method POST, :scheme http
                                      // Literal without indexing, name from the static table: the index in a 4-bit prefix.
    let mut literal_indexed_name = |index: &[u8], value: &str| {
        block.extend_from_slice(index);
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    };
    literal_indexed_name(&[0x04], path); // :path (static index 4)
    literal_indexed_name(&[0x01], "localhost"); // :authority (static index 1)
    literal_indexed_name(&[0x0f, 0x10], "application/grpc"); // content-type (31 = 15 + 16)
    block
}

/// One frame's bytes: the 9-byte header (length from the payload) and the payload.
pub fn raw_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut bytes = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    bytes.push(kind);
    bytes.push(flags);
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}
