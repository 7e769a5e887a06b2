//! Streaming calls on lab's own engine, spoken to frame by frame: messages split and
//! joined across DATA frames, malformed streaming input (a truncated last message, a message
//! over the limit mid-stream) answered with the right status while other streams go on, a
//! hundred thousand messages on one stream, a reader that stalls one stream beside a busy one,
//! resets both ways, and a deadline in the middle of a stream.

use crate::common::frame::*;
use crate::common::*;
use grpclab_server::lab::LabConfig;
use std::collections::HashMap;

const PING_PONG: &str = "/grpclab.streaming.v1.StreamingEcho/PingPong";
const FEED: &str = "/grpclab.streaming.v1.StreamingEcho/Feed";
const UPLOAD: &str = "/grpclab.streaming.v1.StreamingEcho/Upload";
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
const CANCEL: u32 = 0x8;
const NO_ERROR: u32 = 0x0;

fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn read_varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0;
    let mut shift = 0;
    loop {
        let byte = bytes[*at];
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return value;
        }
        shift += 7;
    }
}

use grpclab_testkit::raw::grpc_message as framed;

/// A framed `EchoRequest { payload }`.
fn echo_request(payload: &[u8]) -> Vec<u8> {
    let mut message = vec![0x0a];
    varint(payload.len() as u64, &mut message);
    message.extend_from_slice(payload);
    framed(&message)
}

/// A framed `FeedRequest { count, payload }`.
fn feed_request(count: u32, payload: &[u8]) -> Vec<u8> {
    let mut message = vec![0x08];
    varint(u64::from(count), &mut message);
    message.push(0x12);
    varint(payload.len() as u64, &mut message);
    message.extend_from_slice(payload);
    framed(&message)
}

/// An `EchoReply`'s (payload, sequence).
fn echo_reply(message: &[u8]) -> (Vec<u8>, u64) {
    let (mut payload, mut sequence, mut at) = (Vec::new(), 0, 0);
    while at < message.len() {
        match message[at] {
            0x0a => {
                at += 1;
                let len = read_varint(message, &mut at) as usize;
                payload = message[at..at + len].to_vec();
                at += len;
            }
            0x10 => {
                at += 1;
                sequence = read_varint(message, &mut at);
            }
            other => panic!("unexpected key {other:#x} in {message:?}"),
        }
    }
    (payload, sequence)
}

/// What one stream has received.
#[derive(Default, Debug)]
struct StreamSeen {
    /// DATA bytes not yet split into messages.
    data: Vec<u8>,
    /// Whole reply messages (unframed).
    messages: Vec<Vec<u8>>,
    /// DATA bytes received in all.
    data_bytes: usize,
    /// `grpc-status` and `grpc-message` of the trailers (or a trailers-only response).
    status: Option<(u32, String)>,
    /// RST_STREAM code.
    reset: Option<u32>,
    /// Window the server granted to this stream with WINDOW_UPDATE.
    granted: u64,
}

/// A raw client of streaming calls: sends frames, reads and decodes the server's, returns the
/// window of the streams it reads (all but those in `stalled`).
struct Client {
    connection: RawConnection,
    decoder: grpclab_h2::hpack::Decoder,
    streams: HashMap<u32, StreamSeen>,
    /// Streams whose DATA we never acknowledge: a reader that stopped reading.
    stalled: Vec<u32>,
}

impl Client {
    /// Connects, advertising `initial_window` as SETTINGS_INITIAL_WINDOW_SIZE and a connection
    /// window large enough for any test.
    fn open(server: &Running, initial_window: u32) -> Client {
        let mut connection = RawConnection::open(server.addr);
        connection.set_nodelay();
        let mut settings = SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes().to_vec();
        settings.extend_from_slice(&initial_window.to_be_bytes());
        connection.send(SETTINGS, 0, 0, &settings);
        connection.send(WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes());
        Client {
            connection,
            decoder: grpclab_h2::hpack::Decoder::new(4096),
            streams: HashMap::new(),
            stalled: Vec::new(),
        }
    }

    fn open_stream(&mut self, stream: u32, path: &str) {
        self.connection
            .send(HEADERS, END_HEADERS, stream, &request_header_block(path));
        self.streams.entry(stream).or_default();
    }

    fn data(&mut self, stream: u32, bytes: &[u8], end_stream: bool) {
        let flags = if end_stream { END_STREAM } else { 0 };
        self.connection.send(DATA, flags, stream, bytes);
    }

    fn stream(&self, stream: u32) -> &StreamSeen {
        &self.streams[&stream]
    }

    /// Reads one frame and records it; false when the connection closed.
    fn read_one(&mut self) -> bool {
        let Some(frame) = self.connection.read_frame() else {
            return false;
        };
        match frame.kind {
            DATA => {
                let len = frame.payload.len() as u32;
                let seen = self.streams.entry(frame.stream).or_default();
                seen.data.extend_from_slice(&frame.payload);
                seen.data_bytes += frame.payload.len();
                while seen.data.len() >= 5 {
                    let declared = u32::from_be_bytes(seen.data[1..5].try_into().unwrap()) as usize;
                    if seen.data.len() < 5 + declared {
                        break;
                    }
                    let message: Vec<u8> = seen.data.drain(..5 + declared).skip(5).collect();
                    seen.messages.push(message);
                }
                if len > 0 && !self.stalled.contains(&frame.stream) {
                    self.connection
                        .send(WINDOW_UPDATE, 0, frame.stream, &len.to_be_bytes());
                }
            }
            HEADERS => {
                let (mut status, mut message) = (None, String::new());
                self.decoder
                    .decode(&frame.payload, |name, value| match name {
                        b"grpc-status" => {
                            status = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok())
                        }
                        b"grpc-message" => message = String::from_utf8_lossy(value).into_owned(),
                        _ => {}
                    })
                    .unwrap();
                if let Some(status) = status {
                    self.streams.entry(frame.stream).or_default().status = Some((status, message));
                }
            }
            RST_STREAM => {
                let code = u32::from_be_bytes(frame.payload[..4].try_into().unwrap());
                self.streams.entry(frame.stream).or_default().reset = Some(code);
            }
            WINDOW_UPDATE if frame.stream != 0 => {
                let increment = u32::from_be_bytes(frame.payload[..4].try_into().unwrap());
                self.streams.entry(frame.stream).or_default().granted += u64::from(increment);
            }
            _ => {}
        }
        true
    }

    /// Reads until `done` holds; panics if the connection closes first (reads time out after
    /// 10 s, so a server that never answers fails the test rather than hanging it).
    fn read_until(&mut self, mut done: impl FnMut(&Client) -> bool) {
        while !done(self) {
            assert!(self.read_one(), "the connection closed");
        }
    }
}

fn ended(stream: u32) -> impl FnMut(&Client) -> bool {
    move |client: &Client| {
        client
            .streams
            .get(&stream)
            .is_some_and(|s| s.status.is_some())
    }
}

/// A ping-pong where each message reaches the server one byte per DATA frame, then several
/// messages in one frame, then one message split mid-prefix: every reply arrives whole, in
/// order, with its sequence.
#[test]
fn messages_are_split_and_joined_across_data_frames() {
    let server = start_lab(LabConfig::default());
    let mut client = Client::open(&server, 1 << 20);
    client.open_stream(1, PING_PONG);
    let first = echo_request(b"byte by byte");
    for byte in &first {
        client.data(1, std::slice::from_ref(byte), false);
    }
    client.read_until(|c| c.stream(1).messages.len() == 1);
    let mut three = Vec::new();
    for payload in [&b"a"[..], b"bb", b"ccc"] {
        three.extend(echo_request(payload));
    }
    client.data(1, &three, false);
    let last = echo_request(b"split in the prefix");
    client.data(1, &last[..3], false);
    client.data(1, &last[3..], true);
    client.read_until(ended(1));
    let replies: Vec<(Vec<u8>, u64)> = client
        .stream(1)
        .messages
        .iter()
        .map(|m| echo_reply(m))
        .collect();
    let expected: Vec<(Vec<u8>, u64)> = [
        &b"byte by byte"[..],
        b"a",
        b"bb",
        b"ccc",
        b"split in the prefix",
    ]
    .iter()
    .enumerate()
    .map(|(sequence, payload)| (payload.to_vec(), sequence as u64))
    .collect();
    assert_eq!(replies, expected);
    assert_eq!(client.stream(1).status, Some((0, String::new())));
}

/// A stream that ends inside a message gets INTERNAL; one whose next message declares more
/// than --max-message-bytes gets RESOURCE_EXHAUSTED at once, and the server asks it to stop
/// sending (RST_STREAM(NO_ERROR)); a stream beside them on the same connection is untouched.
#[test]
fn malformed_streaming_input_fails_only_its_stream() {
    let server = start_lab(LabConfig {
        max_message_bytes: 1024,
        ..LabConfig::default()
    });
    let mut client = Client::open(&server, 1 << 20);
    client.open_stream(1, PING_PONG);
    client.open_stream(3, UPLOAD);
    client.open_stream(5, PING_PONG);
    client.data(1, &echo_request(b"fine"), false);
    client.read_until(|c| c.stream(1).messages.len() == 1);

    // Upload: two whole messages, then half of a third, then END_STREAM.
    let mut upload = echo_request(b"one");
    upload.extend(echo_request(b"two"));
    let third = echo_request(b"three, cut short");
    upload.extend_from_slice(&third[..9]);
    client.data(3, &upload, true);
    client.read_until(ended(3));
    let (code, message) = client.stream(3).status.clone().unwrap();
    assert_eq!(code, 13, "{message}");
    assert!(message.contains("truncated"), "{message}");
    assert!(
        client.stream(3).messages.is_empty(),
        "no summary after a failure"
    );

    // PingPong 5: a fine message, then a prefix declaring 2,000 bytes (limit 1,024).
    client.data(5, &echo_request(b"before"), false);
    client.read_until(|c| c.stream(5).messages.len() == 1);
    let mut oversized = vec![0];
    oversized.extend_from_slice(&2000u32.to_be_bytes());
    client.data(5, &oversized, false);
    client.read_until(|c| ended(5)(c) && c.stream(5).reset.is_some());
    let (code, message) = client.stream(5).status.clone().unwrap();
    assert_eq!(code, 8, "{message}");
    assert!(
        message.contains("2000") && message.contains("1024"),
        "{message}"
    );
    assert_eq!(
        client.stream(5).reset,
        Some(NO_ERROR),
        "asked to stop sending"
    );

    // Stream 1 goes on as if nothing happened.
    client.data(1, &echo_request(b"still here"), true);
    client.read_until(ended(1));
    let replies: Vec<(Vec<u8>, u64)> = client
        .stream(1)
        .messages
        .iter()
        .map(|m| echo_reply(m))
        .collect();
    assert_eq!(
        replies,
        vec![(b"fine".to_vec(), 0), (b"still here".to_vec(), 1)]
    );
    assert_eq!(client.stream(1).status, Some((0, String::new())));
    // A message that is not an EchoRequest: INTERNAL naming the type.
    client.open_stream(7, PING_PONG);
    client.data(7, &framed(&[0x0a, 0x05, b'x']), true);
    client.read_until(ended(7));
    let (code, message) = client.stream(7).status.clone().unwrap();
    assert_eq!(code, 13, "{message}");
    assert!(message.contains("EchoRequest"), "{message}");
}

/// 100,000 messages on one bidi stream, sent as fast as the windows allow: far more than the
/// stream's 1 MiB window, so the server must return window as it consumes messages. Every
/// reply arrives, in order.
#[test]
fn a_hundred_thousand_messages_flow_on_one_stream() {
    const MESSAGES: u64 = 100_000;
    let server = start_lab(LabConfig::default());
    let mut client = Client::open(&server, 1 << 30);
    let mut writer = client.connection.try_clone();
    client.open_stream(1, PING_PONG);
    let message = echo_request(&[7u8; 32]);
    // The writer sends in batches of 100 messages, within the window the server granted: the
    // reader thread reports grants through the channel.
    let (grants_tx, grants_rx) = std::sync::mpsc::channel::<u64>();
    let batch: Vec<u8> = message.repeat(100);
    let sender = std::thread::spawn(move || {
        let mut window: u64 = 1 << 20; // lab's SETTINGS_INITIAL_WINDOW_SIZE
        let mut sent = 0;
        while sent < MESSAGES {
            while window < batch.len() as u64 {
                window += grants_rx
                    .recv()
                    .expect("the server stopped granting window");
            }
            let last = sent + 100 >= MESSAGES;
            writer.send(DATA, if last { END_STREAM } else { 0 }, 1, &batch);
            window -= batch.len() as u64;
            sent += 100;
        }
    });
    let mut reported = 0;
    client.read_until(|c| {
        let seen = c.stream(1);
        if seen.granted > reported {
            let _ = grants_tx.send(seen.granted - reported);
            reported = seen.granted;
        }
        seen.status.is_some()
    });
    sender.join().unwrap();
    let seen = client.stream(1);
    assert_eq!(seen.status, Some((0, String::new())));
    assert_eq!(seen.messages.len() as u64, MESSAGES);
    for (expected, message) in seen.messages.iter().enumerate() {
        let (payload, sequence) = echo_reply(message);
        assert_eq!((payload.len(), sequence), (32, expected as u64));
    }
    assert!(
        seen.granted >= MESSAGES * message.len() as u64 - (1 << 20),
        "window returned as consumed: {}",
        seen.granted
    );
}

/// A client that stops reading one stream (never returns its window) while it ping-pongs on
/// another: the stalled stream's replies wait in the server (bounded), the server stops
/// consuming its messages (so stops granting it window), and the busy stream finishes every
/// round trip. Resetting the stalled stream (CANCEL) frees it; the connection goes on.
#[test]
fn a_stalled_reader_stalls_only_its_own_stream() {
    let server = start_lab(LabConfig::default());
    let mut client = Client::open(&server, 1000);
    client.stalled = vec![1, 3];
    // Stream 1: pipelined ping-pong of 1 kB messages, replies never read.
    client.open_stream(1, PING_PONG);
    let message = echo_request(&[1u8; 1000]);
    // 1 MiB of window: about 1,000 messages; sent in one go (the socket buffers them).
    let mut writer = client.connection.try_clone();
    let pipelined = std::thread::spawn(move || {
        for _ in 0..1000 {
            writer.send(DATA, 0, 1, &message);
        }
    });
    // Stream 3: a feed of a million replies, never read.
    client.open_stream(3, FEED);
    client.data(3, &feed_request(1_000_000, &[2u8; 100]), true);
    // Stream 5: 2,000 strict round trips, read as they come.
    client.open_stream(5, PING_PONG);
    for round in 0..2000u64 {
        client.data(5, &echo_request(&round.to_be_bytes()), false);
        client.read_until(|c| c.stream(5).messages.len() as u64 == round + 1);
    }
    client.data(5, &[], true);
    client.read_until(ended(5));
    pipelined.join().unwrap();
    let busy = client.stream(5);
    assert_eq!(busy.status, Some((0, String::new())));
    for (round, message) in busy.messages.iter().enumerate() {
        assert_eq!(
            echo_reply(message),
            ((round as u64).to_be_bytes().to_vec(), round as u64)
        );
    }
    // The stalled streams got what their window allowed and no more; the server stopped
    // taking stream 1's messages once its replies backed up: the window it gave back covers
    // the replies its outbox holds (32 KiB: ~32 messages of 1 kB), not the 1,000 sent.
    for stalled in [1, 3] {
        let seen = client.stream(stalled);
        assert!(
            seen.data_bytes <= 1000,
            "stream {stalled}: {}",
            seen.data_bytes
        );
        assert!(seen.status.is_none() && seen.reset.is_none(), "{seen:?}");
    }
    assert!(
        client.stream(1).granted < 100 * 1005,
        "consumption stopped: {} bytes granted",
        client.stream(1).granted
    );
    // Cancel both stalled streams; a new stream on the same connection works.
    client
        .connection
        .send(RST_STREAM, 0, 1, &CANCEL.to_be_bytes());
    client
        .connection
        .send(RST_STREAM, 0, 3, &CANCEL.to_be_bytes());
    client.open_stream(7, PING_PONG);
    client.data(7, &echo_request(b"after"), true);
    client.read_until(ended(7));
    assert_eq!(client.stream(7).status, Some((0, String::new())));
    assert_eq!(client.stream(7).messages.len(), 1);
    // What the server received after the resets (the tail of stream 1's data) was ignored:
    // no answer on the cancelled streams.
    assert!(client.stream(1).status.is_none() && client.stream(3).status.is_none());
}

/// A deadline in the middle of a feed the client reads slowly (it half-closed with its
/// request): the server ends it with DEADLINE_EXCEEDED and resets it with CANCEL.
#[test]
fn a_deadline_mid_stream_ends_it_with_deadline_exceeded_and_cancel() {
    let server = start_lab(LabConfig::default());
    let mut client = Client::open(&server, 4096);
    client.stalled = vec![1];
    let mut block = request_header_block(FEED);
    // grpc-timeout: 200m, a literal with a new name.
    block.push(0x00);
    block.push(12);
    block.extend_from_slice(b"grpc-timeout");
    block.push(4);
    block.extend_from_slice(b"200m");
    client.connection.send(HEADERS, END_HEADERS, 1, &block);
    client.data(1, &feed_request(1_000_000, &[3u8; 100]), true);
    client.read_until(|c| {
        c.streams
            .get(&1)
            .is_some_and(|s| s.status.is_some() && s.reset.is_some())
    });
    let seen = client.stream(1);
    assert_eq!(seen.status.as_ref().map(|s| s.0), Some(4), "{seen:?}");
    assert_eq!(seen.reset, Some(CANCEL));
    assert!(seen.data_bytes <= 4096);
}
