//! A fault-injection HTTP/2 server for the load engine's tests: raw frames over a blocking
//! socket, one thread per connection, so it can do what no well-behaved server library
//! would — send its SETTINGS late, stall mid-run without closing, reset a stream after its
//! status, enforce its stream limit strictly and count every violation.
//!
//! Its frames are written with grpclab-h2's frame writers and HPACK encoder (literal fields
//! only, never indexed, so every block stands alone); requests are parsed just enough to echo
//! their message back.

use grpclab_h2::frame::{self, code, flags, kind, setting, Header, HEADER_LEN};
use grpclab_h2::hpack::{Encoder, Indexing};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server answers one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The request's message back, status OK.
    Echo,
    /// A HEADERS frame with `:status 200` and `grpc-status` 13 ("boom"), *without*
    /// END_STREAM, then RST_STREAM with this error code.
    StatusThenReset(u32),
    /// A response whose headers lack `:status`.
    NoStatus,
    /// A response whose headers carry `:status` twice.
    TwoStatuses,
    /// The reply's DATA before any HEADERS.
    DataFirst,
    /// A WINDOW_UPDATE that raises the stream's send window past 2^31-1, then nothing.
    WindowOverflow,
    /// GOAWAY with last-stream-id = this stream, the echo, then a second GOAWAY whose
    /// last-stream-id goes up (§6.8 forbids it).
    RisingGoAway,
    /// A WINDOW_UPDATE that raises the connection's send window past 2^31-1.
    ConnectionWindowOverflow,
    /// A DATA frame larger than the client's SETTINGS_MAX_FRAME_SIZE (the default, 16,384).
    OversizedFrame,
    /// A PUSH_PROMISE, although the client disabled push.
    PushPromise,
    /// A server shutting down: GOAWAY NO_ERROR whose last-stream-id is below the request's
    /// stream (never processed), and no answer.
    ShuttingDown,
    /// The echo, with the status put into the HPACK dynamic table by the response's head
    /// (`grpc-status` with incremental indexing: 0 on streams 1, 5, 9, ..., 13 on streams
    /// 3, 7, 11, ...) and trailers that are always the same byte: index 62, the newest entry.
    /// The same trailer bytes mean a different status on every other call.
    StatusByIndex,
}

/// What the server does on every connection.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// Its SETTINGS frame (the server preface).
    pub settings: Vec<(u16, u32)>,
    /// How long to wait before sending SETTINGS (the client's preface is read meanwhile).
    pub settings_delay: Duration,
    /// After this many answers (over all connections) the server stops reading and writing
    /// for good, holding its sockets open: a process stopped with SIGSTOP, as the client sees it.
    pub stall_after: Option<u64>,
    /// How requests are answered.
    pub answer: Answer,
}

impl Default for Behaviour {
    fn default() -> Behaviour {
        Behaviour {
            settings: Vec::new(),
            settings_delay: Duration::ZERO,
            stall_after: None,
            answer: Answer::Echo,
        }
    }
}

/// What the server saw, shared with the test.
#[derive(Debug, Default)]
pub struct Seen {
    /// Requests answered.
    pub answered: AtomicU64,
    /// Streams opened beyond the advertised SETTINGS_MAX_CONCURRENT_STREAMS once it was
    /// sent (refused with REFUSED_STREAM).
    pub refused: AtomicU64,
    /// Streams the client opened before the server had sent its SETTINGS.
    pub opened_before_settings: AtomicU64,
    /// The most streams open at once on one connection.
    pub peak_open: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
    /// The error code of every GOAWAY the client sent.
    pub client_goaways: Mutex<Vec<u32>>,
}

/// A running fault server; every socket is shut down when it is dropped.
pub struct FaultServer {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    sockets: Arc<Mutex<Vec<TcpStream>>>,
    closing: Arc<AtomicBool>,
}

impl FaultServer {
    /// Starts a server on a free loopback port.
    pub fn start(behaviour: Behaviour) -> FaultServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fault server");
        let addr = listener.local_addr().expect("local addr");
        let seen = Arc::new(Seen::default());
        let sockets = Arc::new(Mutex::new(Vec::new()));
        let closing = Arc::new(AtomicBool::new(false));
        let (seen_in, sockets_in, closing_in) = (
            Arc::clone(&seen),
            Arc::clone(&sockets),
            Arc::clone(&closing),
        );
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                if closing_in.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(tcp) = tcp else { return };
                let _ = tcp.set_nodelay(true);
                if let Ok(clone) = tcp.try_clone() {
                    sockets_in.lock().unwrap().push(clone);
                }
                seen_in.connections.fetch_add(1, Ordering::Relaxed);
                let (behaviour, seen, closing) = (
                    behaviour.clone(),
                    Arc::clone(&seen_in),
                    Arc::clone(&closing_in),
                );
                std::thread::spawn(move || serve(tcp, &behaviour, &seen, &closing));
            }
        });
        FaultServer {
            addr,
            seen,
            sockets,
            closing,
        }
    }

    /// Requests answered so far.
    pub fn answered(&self) -> u64 {
        self.seen.answered.load(Ordering::Relaxed)
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::Relaxed);
        for socket in self.sockets.lock().unwrap().drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
        // Wake the accept loop so it sees `closing`.
        let _ = TcpStream::connect(self.addr);
    }
}

/// One request being received.
struct Request {
    body: Vec<u8>,
}

fn serve(mut tcp: TcpStream, behaviour: &Behaviour, seen: &Seen, closing: &AtomicBool) {
    let mut preface = [0u8; 24];
    if tcp.read_exact(&mut preface).is_err() || &preface != frame::PREFACE {
        return;
    }
    let max_streams = behaviour
        .settings
        .iter()
        .find(|(id, _)| *id == setting::MAX_CONCURRENT_STREAMS)
        .map(|(_, value)| *value as usize);
    let mut settings_sent = behaviour.settings_delay.is_zero();
    let settings_at = std::time::Instant::now() + behaviour.settings_delay;
    let mut out = Vec::new();
    if settings_sent {
        frame::write_settings(&mut out, &behaviour.settings);
    }
    let mut open: std::collections::HashMap<u32, Request> = Default::default();
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let _ = tcp.set_read_timeout(Some(Duration::from_millis(5)));
    loop {
        if closing.load(Ordering::Relaxed) {
            return;
        }
        if behaviour
            .stall_after
            .is_some_and(|limit| seen.answered.load(Ordering::Relaxed) >= limit)
        {
            // Stalled: neither read nor write again; the socket stays open until the test ends.
            while !closing.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
            }
            return;
        }
        if !settings_sent && std::time::Instant::now() >= settings_at {
            let mut held_back = std::mem::take(&mut out);
            frame::write_settings(&mut out, &behaviour.settings);
            out.append(&mut held_back);
            settings_sent = true;
        }
        // Nothing goes out before the SETTINGS frame: it is the server's preface.
        if settings_sent && !out.is_empty() {
            if tcp.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
        match tcp.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
        // Every complete frame of this read is handled before anything is written, so the
        // streams a burst opens are all open at once (as in a batching server).
        let mut finished = Vec::new();
        let mut used = 0;
        while buf.len() - used >= HEADER_LEN {
            let mut raw = [0u8; HEADER_LEN];
            raw.copy_from_slice(&buf[used..used + HEADER_LEN]);
            let header = Header::parse(&raw);
            let end = used + HEADER_LEN + header.length as usize;
            if buf.len() < end {
                break;
            }
            let payload = buf[used + HEADER_LEN..end].to_vec();
            used = end;
            match header.kind {
                kind::SETTINGS if !header.has(flags::ACK) => frame::write_settings_ack(&mut out),
                kind::PING if !header.has(flags::ACK) => frame::write_ping_ack(&mut out, &payload),
                kind::HEADERS => {
                    if !settings_sent {
                        seen.opened_before_settings.fetch_add(1, Ordering::Relaxed);
                    }
                    let over = settings_sent && max_streams.is_some_and(|max| open.len() >= max);
                    if over {
                        seen.refused.fetch_add(1, Ordering::Relaxed);
                        frame::write_rst_stream(&mut out, header.stream, code::REFUSED_STREAM);
                        continue;
                    }
                    open.insert(header.stream, Request { body: Vec::new() });
                    seen.peak_open
                        .fetch_max(open.len() as u64, Ordering::Relaxed);
                    if header.has(flags::END_STREAM) {
                        finished.push(header.stream);
                    }
                }
                kind::DATA => {
                    if !payload.is_empty() {
                        frame::write_window_update(&mut out, 0, payload.len() as u32);
                    }
                    if let Some(request) = open.get_mut(&header.stream) {
                        request.body.extend_from_slice(&payload);
                        if header.has(flags::END_STREAM) {
                            finished.push(header.stream);
                        }
                    }
                }
                kind::RST_STREAM => {
                    open.remove(&header.stream);
                }
                kind::GOAWAY if payload.len() >= 8 => {
                    let error =
                        u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                    seen.client_goaways.lock().unwrap().push(error);
                }
                _ => {}
            }
        }
        buf.drain(..used);
        for stream in finished {
            let Some(request) = open.remove(&stream) else {
                continue;
            };
            answer(&mut out, stream, &request.body, behaviour.answer);
            seen.answered.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn header_block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut encoder = Encoder::default();
    let mut block = Vec::new();
    for (name, value) in fields {
        encoder.field(
            name.as_bytes(),
            value.as_bytes(),
            Indexing::Without,
            &mut block,
        );
    }
    block
}

fn answer(out: &mut Vec<u8>, stream: u32, body: &[u8], how: Answer) {
    let max = frame::DEFAULT_MAX_FRAME_SIZE as usize;
    match how {
        Answer::Echo => {
            let head = header_block(&[(":status", "200"), ("content-type", "application/grpc")]);
            frame::write_headers(out, stream, &head, false, max);
            frame::write_data(out, stream, body, false);
            let trailers = header_block(&[("grpc-status", "0")]);
            frame::write_headers(out, stream, &trailers, true, max);
        }
        Answer::NoStatus | Answer::TwoStatuses => {
            let mut fields = vec![(":status", "200"), ("content-type", "application/grpc")];
            if how == Answer::NoStatus {
                fields.remove(0);
            } else {
                fields.insert(0, (":status", "200"));
            }
            let head = header_block(&fields);
            frame::write_headers(out, stream, &head, false, max);
            frame::write_data(out, stream, body, false);
            let trailers = header_block(&[("grpc-status", "0")]);
            frame::write_headers(out, stream, &trailers, true, max);
        }
        Answer::StatusByIndex => {
            let status = if (stream / 2).is_multiple_of(2) {
                "0"
            } else {
                "13"
            };
            let mut encoder = Encoder::default();
            let mut head =
                header_block(&[(":status", "200"), ("content-type", "application/grpc")]);
            encoder.field(
                b"grpc-status",
                status.as_bytes(),
                Indexing::Incremental,
                &mut head,
            );
            frame::write_headers(out, stream, &head, false, max);
            frame::write_data(out, stream, body, false);
            frame::write_headers(out, stream, &[0x80 | 62], true, max);
        }
        Answer::DataFirst => {
            frame::write_data(out, stream, body, false);
            let head = header_block(&[(":status", "200"), ("content-type", "application/grpc")]);
            frame::write_headers(out, stream, &head, false, max);
            let trailers = header_block(&[("grpc-status", "0")]);
            frame::write_headers(out, stream, &trailers, true, max);
        }
        Answer::WindowOverflow => {
            frame::write_window_update(out, stream, 0x7fff_ffff);
        }
        Answer::RisingGoAway => {
            frame::write_goaway(out, stream, code::NO_ERROR, b"");
            answer(out, stream, body, Answer::Echo);
            frame::write_goaway(out, stream + 2, code::NO_ERROR, b"");
        }
        Answer::ShuttingDown => {
            frame::write_goaway(out, stream.saturating_sub(2), code::NO_ERROR, b"");
        }
        Answer::ConnectionWindowOverflow => {
            frame::write_window_update(out, 0, 0x7fff_ffff);
        }
        Answer::OversizedFrame => {
            let head = header_block(&[(":status", "200"), ("content-type", "application/grpc")]);
            frame::write_headers(out, stream, &head, false, max);
            frame::write_data(out, stream, &vec![0u8; max + 1], false);
        }
        Answer::PushPromise => {
            let mut payload = (stream + 1).to_be_bytes().to_vec();
            payload.extend(header_block(&[(":method", "GET"), (":path", "/")]));
            let length = (payload.len() as u32).to_be_bytes();
            out.extend_from_slice(&length[1..]);
            out.extend_from_slice(&[kind::PUSH_PROMISE, flags::END_HEADERS]);
            out.extend_from_slice(&stream.to_be_bytes());
            out.extend_from_slice(&payload);
        }
        Answer::StatusThenReset(error) => {
            let head = header_block(&[
                (":status", "200"),
                ("content-type", "application/grpc"),
                ("grpc-status", "13"),
                ("grpc-message", "boom"),
            ]);
            frame::write_headers(out, stream, &head, false, max);
            frame::write_rst_stream(out, stream, error);
        }
    }
}
