//! Differential test: the same client bytes fed to our server engine and to the h2
//! crate's server must come to the same class of outcome — a connection error with the same
//! code, or else, stream by stream, the same stream error code, or served, or left open.
//!
//! Inputs are generated from a fixed seed: a client SETTINGS, then a few frames drawn from
//! valid requests, malformed requests and every frame type with valid and invalid fields.
//! Every disagreement must be one of the deviations listed (with the RFC text that makes our
//! answer right) in ARCHITECTURE.md's table of h2 deviations; anything else fails the test
//! with the input that shows it. `DIFFERENTIAL_SHOW=1` prints every listed disagreement too.

use bytes::Bytes;
use grpclab_h2::frame::{self, code, flags, kind};
use grpclab_h2::server::feed_server;
use std::collections::BTreeMap;
use std::fmt;

use crate::common::Rng;

/// A header field as a literal without indexing, new name (RFC 7541 §6.2.2).
fn literal(block: &mut Vec<u8>, name: &str, value: &str) {
    block.extend_from_slice(&[0x00, name.len() as u8]);
    block.extend_from_slice(name.as_bytes());
    block.push(value.len() as u8);
    block.extend_from_slice(value.as_bytes());
}

/// A request header block: valid, or broken in one of the ways RFC 9113 §8 names.
fn request_block(rng: &mut Rng) -> Vec<u8> {
    let mut fields = vec![
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/x"),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ];
    if rng.chance(40) {
        match rng.below(7) {
            0 => {
                fields.remove(1); // no :scheme
            }
            1 => fields.insert(0, (":path", "/y")), // :path twice
            2 => fields.push((":method", "GET")),   // a pseudo-header after regular ones
            3 => fields[5] = ("te", "gzip"),
            4 => fields.push(("connection", "close")),
            5 => fields.push(("Upper", "case")),
            _ => fields.push((":unknown", "pseudo")),
        }
    }
    let mut block = Vec::new();
    for (name, value) in fields {
        literal(&mut block, name, value);
    }
    block
}

fn raw_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend(grpclab_testkit::raw::frame(kind, flags, stream, payload));
}

/// A client connection's bytes after the preface: SETTINGS, then 1-6 frames.
fn generate(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_settings(&mut out, &[]);
    let mut next_stream = 1u32;
    for _ in 0..1 + rng.below(6) {
        // Mostly the newest stream, sometimes an old, idle or even one.
        let stream = match rng.below(10) {
            0 => 0,
            1 => next_stream + 2 * rng.below(3) as u32,
            2 => (next_stream + 1) & !1,
            _ => next_stream.saturating_sub(2).max(1),
        };
        match rng.below(14) {
            0..=3 => {
                let end_stream = rng.chance(30);
                let mut flags = flags::END_HEADERS;
                if end_stream {
                    flags |= flags::END_STREAM;
                }
                let mut payload = Vec::new();
                if rng.chance(10) {
                    flags |= flags::PRIORITY;
                    let dependency = if rng.chance(50) { next_stream } else { 0 };
                    payload.extend_from_slice(&dependency.to_be_bytes());
                    payload.push(16);
                }
                payload.extend(request_block(rng));
                raw_frame(&mut out, kind::HEADERS, flags, next_stream, &payload);
                if !end_stream && rng.chance(80) {
                    raw_frame(
                        &mut out,
                        kind::DATA,
                        flags::END_STREAM,
                        next_stream,
                        b"\0\0\0\0\x01a",
                    );
                }
                next_stream += 2;
            }
            4 => {
                let length = [0, 1, 6, 100][rng.below(4)];
                let flags = if rng.chance(50) { flags::END_STREAM } else { 0 };
                raw_frame(&mut out, kind::DATA, flags, stream, &vec![0; length]);
            }
            5 => {
                let length = if rng.chance(90) { 4 } else { 3 };
                let error = [code::CANCEL, code::NO_ERROR, 0xff][rng.below(3)];
                raw_frame(
                    &mut out,
                    kind::RST_STREAM,
                    0,
                    stream,
                    &error.to_be_bytes()[..length],
                );
            }
            6 => {
                let length = if rng.chance(85) { 8 } else { 7 };
                let flags = if rng.chance(20) { flags::ACK } else { 0 };
                let stream = if rng.chance(90) { 0 } else { 1 };
                raw_frame(&mut out, kind::PING, flags, stream, &vec![7; length]);
            }
            7 => {
                let (id, value): (u16, u32) = match rng.below(6) {
                    0 => (4, 0x8000_0000), // INITIAL_WINDOW_SIZE too large
                    1 => (5, 100),         // MAX_FRAME_SIZE too small
                    2 => (2, 2),           // ENABLE_PUSH not 0 or 1
                    3 => (4, 1000),        // a fine window change
                    4 => (0x99, 1),        // unknown: ignored
                    _ => (3, 10),          // MAX_CONCURRENT_STREAMS
                };
                let mut payload = id.to_be_bytes().to_vec();
                payload.extend_from_slice(&value.to_be_bytes());
                if rng.chance(10) {
                    payload.pop();
                }
                let flags = if rng.chance(10) { flags::ACK } else { 0 };
                raw_frame(&mut out, kind::SETTINGS, flags, 0, &payload);
            }
            8 => {
                let increment: u32 = [0, 1, 0x7fff_ffff, 1000][rng.below(4)];
                let length = if rng.chance(90) { 4 } else { 5 };
                let mut payload = increment.to_be_bytes().to_vec();
                payload.resize(length, 0);
                raw_frame(&mut out, kind::WINDOW_UPDATE, 0, stream, &payload);
            }
            9 => {
                let dependency = if rng.chance(30) { stream } else { 0 };
                let mut payload = dependency.to_be_bytes().to_vec();
                payload.push(16);
                if rng.chance(10) {
                    payload.push(0);
                }
                raw_frame(&mut out, kind::PRIORITY, 0, stream, &payload);
            }
            10 => raw_frame(
                &mut out,
                kind::CONTINUATION,
                flags::END_HEADERS,
                stream,
                &[0x88],
            ),
            11 => raw_frame(&mut out, 0x42, 0, stream, b"unknown"), // ignored (§4.1)
            // A client's GOAWAY ends its input: streams it opened afterwards are a grey zone
            // (h2 ignores them, we serve them), not a rule either side breaks.
            12 => {
                raw_frame(&mut out, kind::GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0]);
                break;
            }
            _ => raw_frame(
                &mut out,
                kind::PUSH_PROMISE,
                flags::END_HEADERS,
                stream,
                &[0, 0, 0, 2],
            ),
        }
    }
    out
}

/// What happened to a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum StreamOutcome {
    Served,
    Reset(u32),
}

/// What a server made of an input.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// GOAWAY with an error code.
    ConnectionError(u32),
    /// Per stream that ended: served or reset (streams left open are absent).
    Streams(BTreeMap<u32, StreamOutcome>),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::ConnectionError(code) => write!(f, "connection error {code:#x}"),
            Outcome::Streams(streams) => write!(f, "{streams:?}"),
        }
    }
}

/// Streams the input itself resets: what the server did with them races the client's reset,
/// so they are not compared.
fn reset_by_client(input: &[u8]) -> Vec<u32> {
    let mut streams = Vec::new();
    let mut at = 0;
    while at + frame::HEADER_LEN <= input.len() {
        let header = frame::Header::parse(input[at..at + frame::HEADER_LEN].try_into().unwrap());
        if header.kind == kind::RST_STREAM {
            streams.push(header.stream);
        }
        at += frame::HEADER_LEN + header.length as usize;
    }
    streams
}

/// Reads a server's output frames into an [`Outcome`]; a reset after an answer is the
/// stream's last word, so it wins.
fn classify(output: &[u8], ignored: &[u32]) -> Outcome {
    let mut streams = BTreeMap::new();
    let mut at = 0;
    while at + frame::HEADER_LEN <= output.len() {
        let header = frame::Header::parse(output[at..at + frame::HEADER_LEN].try_into().unwrap());
        let end = at + frame::HEADER_LEN + header.length as usize;
        let Some(payload) = output.get(at + frame::HEADER_LEN..end) else {
            break;
        };
        match header.kind {
            kind::GOAWAY if payload.len() >= 8 => {
                let error = u32::from_be_bytes(payload[4..8].try_into().unwrap());
                if error != code::NO_ERROR {
                    return Outcome::ConnectionError(error);
                }
            }
            kind::RST_STREAM if payload.len() == 4 => {
                let error = u32::from_be_bytes(payload.try_into().unwrap());
                let outcome = streams
                    .entry(header.stream)
                    .or_insert(StreamOutcome::Reset(error));
                if *outcome == StreamOutcome::Served {
                    *outcome = StreamOutcome::Reset(error);
                }
            }
            kind::HEADERS | kind::DATA if header.has(flags::END_STREAM) => {
                streams
                    .entry(header.stream)
                    .or_insert(StreamOutcome::Served);
            }
            _ => {}
        }
        at = end;
    }
    streams.retain(|stream, _| !ignored.contains(stream));
    Outcome::Streams(streams)
}

/// Feeds `input` (after the preface) to an h2 crate server over an in-memory pipe, with a
/// service that answers every complete request, and returns everything the server wrote.
async fn feed_h2(input: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut client, server) = tokio::io::duplex(1 << 20);
    let mut bytes = frame::PREFACE.to_vec();
    bytes.extend_from_slice(input);
    client.write_all(&bytes).await.unwrap();
    // No EOF: h2 treats one as the connection's end and would drop its answers unsent.
    let serve = tokio::spawn(async move {
        let mut builder = h2::server::Builder::new();
        builder
            .max_concurrent_streams(1000)
            .initial_window_size(1 << 20)
            .initial_connection_window_size(16 << 20);
        let Ok(mut connection) = builder.handshake::<_, Bytes>(server).await else {
            return;
        };
        // Responses are held until the connection ends, so none is reset for being dropped.
        let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        while let Some(Ok((request, mut respond))) = connection.accept().await {
            let held = std::sync::Arc::clone(&held);
            // A task per request: the connection must keep being polled while bodies arrive.
            tokio::spawn(async move {
                let mut body = request.into_body();
                let mut complete = true;
                while let Some(chunk) = body.data().await {
                    match chunk {
                        Ok(chunk) => {
                            let _ = body.flow_control().release_capacity(chunk.len());
                        }
                        Err(_) => {
                            complete = false;
                            break;
                        }
                    }
                }
                let mut sent = None;
                if complete {
                    let response = http::Response::builder()
                        .header("content-type", "application/grpc")
                        .body(())
                        .unwrap();
                    if let Ok(mut send) = respond.send_response(response, false) {
                        let _ = send.send_data(Bytes::from_static(b"\0\0\0\0\x01a"), false);
                        let mut trailers = http::HeaderMap::new();
                        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                        let _ = send.send_trailers(trailers);
                        sent = Some(send);
                    }
                }
                held.lock().unwrap().push((respond, sent));
            });
        }
        // Let the last answers (and any GOAWAY) out.
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            std::future::poll_fn(|cx| connection.poll_closed(cx)),
        )
        .await;
        drop(connection);
        drop(held);
    });
    // Everything the server writes until it has been quiet for a second (of paused time:
    // the runtime jumps ahead whenever every task waits).
    let mut output = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(Ok(n)) =
        tokio::time::timeout(std::time::Duration::from_secs(1), client.read(&mut buf)).await
    {
        if n == 0 {
            break;
        }
        output.extend_from_slice(&buf[..n]);
    }
    serve.abort();
    output
}

/// Whether the input sends DATA, WINDOW_UPDATE or RST_STREAM on a stream no HEADERS opened
/// before (an idle stream, even if a PRIORITY frame named it).
fn touches_an_idle_stream(input: &[u8]) -> bool {
    let mut highest_opened = 0;
    let mut at = 0;
    while at + frame::HEADER_LEN <= input.len() {
        let header = frame::Header::parse(input[at..at + frame::HEADER_LEN].try_into().unwrap());
        match header.kind {
            kind::HEADERS => highest_opened = highest_opened.max(header.stream),
            kind::DATA | kind::WINDOW_UPDATE | kind::RST_STREAM
                if header.stream > highest_opened =>
            {
                return true
            }
            _ => {}
        }
        at += frame::HEADER_LEN + header.length as usize;
    }
    false
}

/// Whether the input sends DATA or HEADERS on a stream the client has already closed: after
/// its own RST_STREAM on it, or after a frame of it with END_STREAM.
fn touches_a_closed_stream(input: &[u8]) -> bool {
    let mut closed = std::collections::HashSet::new();
    let mut at = 0;
    while at + frame::HEADER_LEN <= input.len() {
        let header = frame::Header::parse(input[at..at + frame::HEADER_LEN].try_into().unwrap());
        match header.kind {
            kind::DATA | kind::HEADERS if closed.contains(&header.stream) => return true,
            kind::DATA | kind::HEADERS if header.flags & frame::flags::END_STREAM != 0 => {
                closed.insert(header.stream);
            }
            kind::RST_STREAM => {
                closed.insert(header.stream);
            }
            _ => {}
        }
        at += frame::HEADER_LEN + header.length as usize;
    }
    false
}

/// Whether the input has a PRIORITY frame that makes `stream` depend on itself.
fn self_dependent_priority(input: &[u8], stream: u32) -> bool {
    let mut at = 0;
    while at + frame::HEADER_LEN <= input.len() {
        let header = frame::Header::parse(input[at..at + frame::HEADER_LEN].try_into().unwrap());
        let payload = &input[at + frame::HEADER_LEN..];
        if header.kind == kind::PRIORITY
            && header.stream == stream
            && payload.len() >= 4
            && u32::from_be_bytes(payload[..4].try_into().unwrap()) & 0x7fff_ffff == stream
        {
            return true;
        }
        at += frame::HEADER_LEN + header.length as usize;
    }
    false
}

/// A disagreement the RFC settles in our favour (ARCHITECTURE.md, "Where the h2 crate ...").
fn is_listed_deviation(input: &[u8], ours: &Outcome, theirs: &Outcome) -> bool {
    use Outcome::*;
    match (ours, theirs) {
        // DATA, WINDOW_UPDATE or RST_STREAM on an idle stream — one that only a PRIORITY
        // frame has named, which leaves it idle (§5.1: "idle ... Receiving any frame other
        // than HEADERS or PRIORITY ... MUST be treated as a connection error of type
        // PROTOCOL_ERROR"; §6.4 for RST_STREAM): h2 takes the PRIORITY as opening it.
        (ConnectionError(code::PROTOCOL_ERROR), Streams(_)) => touches_an_idle_stream(input),
        // DATA or HEADERS on a stream that has closed (the client ended or reset it): a
        // connection error STREAM_CLOSED (§5.1); h2 resets or ignores the stream, or takes a
        // HEADERS for a lower stream id's reuse (PROTOCOL_ERROR).
        (ConnectionError(code::STREAM_CLOSED), _) => touches_a_closed_stream(input),
        // A frame of the wrong size: FRAME_SIZE_ERROR (§4.2, §6.5, §6.7); h2 says PROTOCOL_ERROR.
        (ConnectionError(code::FRAME_SIZE_ERROR), ConnectionError(code::PROTOCOL_ERROR)) => true,
        // HPACK decoding failure: COMPRESSION_ERROR (§4.3); h2 says PROTOCOL_ERROR.
        (ConnectionError(code::COMPRESSION_ERROR), ConnectionError(code::PROTOCOL_ERROR)) => true,
        // A stream-level error the RFC names as such — a malformed request (§8.1.1), DATA
        // after END_STREAM (§5.1 half-closed: STREAM_CLOSED), a PRIORITY frame not 5 bytes
        // long (§6.3: FRAME_SIZE_ERROR), WINDOW_UPDATE of 0 on a stream (§6.9), a stream
        // window past 2^31-1 (§6.9.1: FLOW_CONTROL_ERROR): h2 ends the whole connection
        // instead. Our answers must be those stream errors.
        (Streams(streams), ConnectionError(code::PROTOCOL_ERROR)) => {
            streams.values().all(|outcome| {
                matches!(
                    outcome,
                    StreamOutcome::Served
                        | StreamOutcome::Reset(
                            code::PROTOCOL_ERROR
                                | code::STREAM_CLOSED
                                | code::FRAME_SIZE_ERROR
                                | code::FLOW_CONTROL_ERROR
                        )
                )
            })
        }
        // SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1: FLOW_CONTROL_ERROR (§6.5.2).
        (ConnectionError(code::FLOW_CONTROL_ERROR), ConnectionError(code::PROTOCOL_ERROR)) => true,
        // Per stream: a WINDOW_UPDATE that overflows the window of a stream whose answer has
        // ended is ignored (the stream is closed: §5.1, §6.9), where h2 resets it with
        // FLOW_CONTROL_ERROR; a PRIORITY frame making a stream depend on itself is a stream
        // error PROTOCOL_ERROR (§5.3.1) whatever the stream's id, where h2 ignores it on a
        // server-initiated (even) id. Every other stream must agree.
        (Streams(ours), Streams(theirs)) => ours.keys().chain(theirs.keys()).all(|stream| {
            let pair = (ours.get(stream), theirs.get(stream));
            pair.0 == pair.1
                || pair
                    == (
                        Some(&StreamOutcome::Served),
                        Some(&StreamOutcome::Reset(code::FLOW_CONTROL_ERROR)),
                    )
                || (pair == (Some(&StreamOutcome::Reset(code::PROTOCOL_ERROR)), None)
                    && self_dependent_priority(input, *stream))
        }),
        _ => false,
    }
}

/// An input as a list of frames: kind, flags, stream, length (and SETTINGS entries).
fn describe(input: &[u8]) -> String {
    let mut frames = Vec::new();
    let mut at = 0;
    while at + frame::HEADER_LEN <= input.len() {
        let header = frame::Header::parse(input[at..at + frame::HEADER_LEN].try_into().unwrap());
        let end = (at + frame::HEADER_LEN + header.length as usize).min(input.len());
        let payload = &input[at + frame::HEADER_LEN..end];
        let name = match header.kind {
            kind::DATA => "DATA",
            kind::HEADERS => "HEADERS",
            kind::PRIORITY => "PRIORITY",
            kind::RST_STREAM => "RST_STREAM",
            kind::SETTINGS => "SETTINGS",
            kind::PUSH_PROMISE => "PUSH_PROMISE",
            kind::PING => "PING",
            kind::GOAWAY => "GOAWAY",
            kind::WINDOW_UPDATE => "WINDOW_UPDATE",
            kind::CONTINUATION => "CONTINUATION",
            _ => "unknown",
        };
        let detail = match header.kind {
            kind::SETTINGS | kind::WINDOW_UPDATE | kind::RST_STREAM | kind::PRIORITY => {
                format!(" {payload:02x?}")
            }
            _ => String::new(),
        };
        frames.push(format!(
            "{name}(flags {:#x}, stream {}, {} bytes{detail})",
            header.flags, header.stream, header.length
        ));
        at = end;
    }
    frames.join(", ")
}

#[test]
fn our_engine_and_the_h2_crate_agree_on_every_outcome_class() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let mut rng = Rng(0x005e_ed0f_d1ff);
    let mut agreed = 0;
    let mut listed: BTreeMap<String, usize> = BTreeMap::new();
    let mut unlisted = Vec::new();
    for case in 0..5000 {
        let input = generate(&mut rng);
        let ignored = reset_by_client(&input);
        let ours = classify(&feed_server(&input), &ignored);
        let theirs = classify(&runtime.block_on(feed_h2(&input)), &ignored);
        if ours == theirs {
            agreed += 1;
        } else if is_listed_deviation(&input, &ours, &theirs) {
            let key = match (&ours, &theirs) {
                (Outcome::ConnectionError(code::STREAM_CLOSED), _) => {
                    "ours: connection error 0x5 (a frame on a closed stream)".to_owned()
                }
                (Outcome::ConnectionError(_), Outcome::Streams(_)) => {
                    "ours: connection error 0x1 (a frame on an idle stream); h2: stream-level"
                        .to_owned()
                }
                (Outcome::Streams(_), Outcome::Streams(_)) => {
                    "ours and h2 differ on a closed stream's window or a self-dependent PRIORITY"
                        .to_owned()
                }
                (Outcome::Streams(_), _) => format!("ours: stream-level; h2: {theirs}"),
                _ => format!("ours: {ours}; h2: {theirs}"),
            };
            if std::env::var_os("DIFFERENTIAL_SHOW").is_some() {
                eprintln!("listed {key}: ours {ours}; {}", describe(&input));
            }
            *listed.entry(key).or_default() += 1;
        } else {
            unlisted.push((case, input, ours, theirs));
        }
    }
    eprintln!("{agreed} cases agree; listed deviations: {listed:#?}");
    for (case, input, ours, theirs) in unlisted.iter().take(12) {
        eprintln!(
            "case {case}: ours {ours}, h2 {theirs}; input {}",
            describe(input)
        );
    }
    assert!(
        unlisted.is_empty(),
        "{} disagreements not in the table",
        unlisted.len()
    );
}
