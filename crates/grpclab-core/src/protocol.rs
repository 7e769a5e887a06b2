//! The wire protocols a call may speak: gRPC, gRPC-Web (binary, and text: base64) and
//! Connect (unary). They share the message and its method path; they differ in the request's
//! content type and framing, and in where the status is:
//!
//! - gRPC: `grpc-status` in the HTTP/2 trailers (or in the headers, Trailers-Only);
//! - gRPC-Web: a trailer frame (flag 0x80) closing the body, its lines as HTTP/1 headers, so
//!   it crosses HTTP/1.1 and proxies that drop trailers;
//! - Connect unary: the HTTP status, the message as the whole body with no prefix, and on
//!   failure a JSON error (`{"code": "not_found", "message": ..., "details": [...]}`).
//!
//! What is here is pure: request encoding and reply decoding, apart from any transport, so
//! the decoders are checked (and fuzzed) on bytes alone.

use bytes::Bytes;
use std::ops::Range;

use crate::status::Code;

/// A call's wire protocol (`load --protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// gRPC over HTTP/2.
    #[default]
    Grpc,
    /// gRPC-Web, binary (`application/grpc-web+proto`).
    GrpcWeb,
    /// gRPC-Web, text: the binary body base64-encoded (`application/grpc-web-text+proto`).
    GrpcWebText,
    /// Connect's unary protocol with the binary codec (`application/proto`).
    Connect,
}

impl Protocol {
    /// Every protocol, in the order `--protocol` lists them.
    pub const ALL: [Protocol; 4] = [
        Protocol::Grpc,
        Protocol::GrpcWeb,
        Protocol::GrpcWebText,
        Protocol::Connect,
    ];

    /// Its name as `--protocol` takes it and results say it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::GrpcWeb => "grpc-web",
            Protocol::GrpcWebText => "grpc-web-text",
            Protocol::Connect => "connect",
        }
    }

    /// The protocol named `name`.
    pub fn from_name(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The request's `content-type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Protocol::Grpc => "application/grpc",
            Protocol::GrpcWeb => "application/grpc-web+proto",
            Protocol::GrpcWebText => "application/grpc-web-text+proto",
            Protocol::Connect => "application/proto",
        }
    }

    /// Headers the protocol adds to each request, beside `content-type`: gRPC's
    /// `te: trailers`; gRPC-Web's `x-grpc-web` and the reply encoding it accepts (as
    /// grpc-web's own client sends them: servers such as tonic-web answer text only to a
    /// client that accepts it); Connect's protocol version.
    pub fn request_headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Protocol::Grpc => &[("te", "trailers")],
            Protocol::GrpcWeb => &[("x-grpc-web", "1"), ("accept", "application/grpc-web")],
            Protocol::GrpcWebText => {
                &[("x-grpc-web", "1"), ("accept", "application/grpc-web-text")]
            }
            Protocol::Connect => &[("connect-protocol-version", "1")],
        }
    }

    /// The request body for a gRPC-framed request message (its 5-byte prefix, then the
    /// message): as is for gRPC and gRPC-Web, base64 for gRPC-Web text, the bare message for
    /// Connect (which says compression in a header, never in a prefix: a compressed frame's
    /// gzip bytes go as they are, under [`Protocol::compression_headers`]'
    /// `content-encoding`).
    pub fn request_body(self, framed: &Bytes) -> Result<Bytes, ProtocolError> {
        match self {
            Protocol::Grpc | Protocol::GrpcWeb => Ok(framed.clone()),
            Protocol::GrpcWebText => {
                use base64::Engine;
                Ok(Bytes::from(
                    base64::engine::general_purpose::STANDARD.encode(framed),
                ))
            }
            Protocol::Connect => match framed.first() {
                Some(0 | 1) if framed.len() >= 5 => Ok(framed.slice(5..)),
                Some(flag) if framed.len() >= 5 => Err(ProtocolError(format!(
                    "a request frame with flag {flag:#04x}, neither plain nor compressed"
                ))),
                _ => Err(ProtocolError(format!(
                    "a request of {} bytes has no gRPC prefix",
                    framed.len()
                ))),
            },
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How messages are encoded on the wire: protobuf's binary form, or its JSON mapping (gRPC's
/// and gRPC-Web's `+json` content types, Connect's `application/json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Codec {
    /// Protobuf's binary encoding.
    #[default]
    Proto,
    /// Protobuf's JSON mapping.
    Json,
}

impl Codec {
    /// Its name as `--codec` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Proto => "proto",
            Codec::Json => "json",
        }
    }
}

impl Protocol {
    /// The `content-type` of a streaming call's request with `codec`: Connect's streams are
    /// enveloped (`application/connect+proto`); the others' are their unary type.
    pub fn stream_content_type_with(self, codec: Codec) -> &'static str {
        match (self, codec) {
            (Protocol::Connect, Codec::Proto) => "application/connect+proto",
            (Protocol::Connect, Codec::Json) => "application/connect+json",
            _ => self.content_type_with(codec),
        }
    }

    /// The headers that say a call's messages are gzip-compressed and that gzip replies are
    /// welcome (`-e`): gRPC's `grpc-encoding` for gRPC and gRPC-Web; for Connect, HTTP's
    /// `content-encoding` on a unary call (its body is the compressed message), and
    /// `connect-content-encoding` on a stream (its envelopes say which are compressed).
    pub fn compression_headers(self, streaming: bool) -> [(&'static str, &'static str); 2] {
        match (self, streaming) {
            (Protocol::Connect, false) => {
                [("content-encoding", "gzip"), ("accept-encoding", "gzip")]
            }
            (Protocol::Connect, true) => [
                ("connect-content-encoding", "gzip"),
                ("connect-accept-encoding", "gzip"),
            ],
            _ => [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")],
        }
    }

    /// A streaming call's request body for a gRPC-framed message: Connect's envelope is
    /// gRPC's frame (flag 0, length, message); gRPC-Web as for a unary call.
    pub fn stream_request_body(self, framed: &Bytes) -> Result<Bytes, ProtocolError> {
        match self {
            Protocol::Connect => Ok(framed.clone()),
            _ => self.request_body(framed),
        }
    }

    /// The request's `content-type` with `codec`.
    pub fn content_type_with(self, codec: Codec) -> &'static str {
        match (self, codec) {
            (_, Codec::Proto) => self.content_type(),
            (Protocol::Grpc, Codec::Json) => "application/grpc+json",
            (Protocol::GrpcWeb, Codec::Json) => "application/grpc-web+json",
            (Protocol::GrpcWebText, Codec::Json) => "application/grpc-web-text+json",
            (Protocol::Connect, Codec::Json) => "application/json",
        }
    }
}

/// The query of a Connect unary call sent as HTTP GET (Connect's GET for methods without
/// side effects, `load --connect-get`): the protocol version, the codec, the compression when
/// `compressed`, and the request `message` (the bare message Connect's POST would send, gzip
/// bytes when compressed) in unpadded base64url, which needs no percent-encoding. The
/// parameters go in the order Connect's spec recommends, so equal calls make equal URLs for
/// shared caches (`connect`, `base64`, `compression`, `encoding`, `message`; the conformance
/// suite checks it).
pub fn connect_get_query(message: &[u8], codec: Codec, compressed: bool) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(message);
    let mut query = String::with_capacity(64 + encoded.len());
    query.push_str("connect=v1&base64=1");
    if compressed {
        query.push_str("&compression=gzip");
    }
    query.push_str("&encoding=");
    query.push_str(codec.name());
    query.push_str("&message=");
    query.push_str(&encoded);
    query
}

/// A reply that breaks its protocol: what is wrong, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProtocolError(pub String);

/// A gRPC-Web reply body, read: its messages, its status and trailers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebReply {
    /// The body as binary (a text reply decoded from base64).
    pub body: Bytes,
    /// Where each message frame lies in `body`, prefix included (a gRPC frame, as a gRPC
    /// reply's would be).
    pub messages: Vec<Range<usize>>,
    /// `grpc-status` from the trailer frame.
    pub code: Code,
    /// `grpc-message`, percent-decoded by the caller's rules (as given here).
    pub message: String,
    /// The trailer frame's lines (name lower-cased, value trimmed), `grpc-status` included.
    pub trailers: Vec<(String, String)>,
}

/// The frame flag of gRPC-Web's trailer frame.
const TRAILER_FLAG: u8 = 0x80;

/// Reads a gRPC-Web reply body (`text`: base64, as `application/grpc-web-text` sends it):
/// message frames, then exactly one trailer frame, last. A body without its trailer frame,
/// a frame cut short, anything after the trailers or trailers without `grpc-status` is a
/// [`ProtocolError`].
pub fn decode_grpc_web(body: &[u8], text: bool) -> Result<WebReply, ProtocolError> {
    let body = if text {
        Bytes::from(decode_web_text(body)?)
    } else {
        Bytes::copy_from_slice(body)
    };
    let mut messages = Vec::new();
    let mut at = 0usize;
    while at < body.len() {
        let Some(header) = body.get(at..at + 5) else {
            return Err(ProtocolError(format!(
                "a frame header cut short: {} of 5 bytes at byte {at}",
                body.len() - at
            )));
        };
        let flag = header[0];
        let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let end = at + 5 + length;
        if end > body.len() {
            return Err(ProtocolError(format!(
                "a frame of {length} bytes cut short at {} (byte {at})",
                body.len() - at - 5
            )));
        }
        if flag & TRAILER_FLAG == 0 {
            messages.push(at..end);
            at = end;
            continue;
        }
        if end != body.len() {
            return Err(ProtocolError(format!(
                "{} bytes after the trailer frame",
                body.len() - end
            )));
        }
        // A compressed trailer frame (0x81: connect-go compresses it with the messages).
        let block = last_frame_payload(flag, &body[at + 5..end], "trailer frame")?;
        let trailers = parse_trailer_lines(&block)?;
        let status = trailers
            .iter()
            .find(|(name, _)| name == "grpc-status")
            .map(|(_, value)| value.clone())
            .ok_or_else(|| ProtocolError("the trailer frame has no grpc-status".to_owned()))?;
        let message = trailers
            .iter()
            .find(|(name, _)| name == "grpc-message")
            .map(|(_, value)| value.clone())
            .unwrap_or_default();
        return Ok(WebReply {
            code: Code::from_header(status.as_bytes()),
            message,
            trailers,
            messages,
            body,
        });
    }
    Err(ProtocolError(
        "the body ended without its trailer frame (no grpc-status)".to_owned(),
    ))
}

/// The largest last frame read (a gRPC-Web trailer block, a Connect end-stream JSON), and
/// the most a compressed one may inflate to.
pub(crate) const LARGEST_LAST_FRAME: usize = 1 << 20;

/// A stream's last frame's payload (`what` names it in an error): inflated when its `flag`
/// says compressed (0x01 beside the frame's own flag), as is otherwise.
pub(crate) fn last_frame_payload<'a>(
    flag: u8,
    payload: &'a [u8],
    what: &str,
) -> Result<std::borrow::Cow<'a, [u8]>, ProtocolError> {
    if flag & 0x01 == 0 {
        return Ok(std::borrow::Cow::Borrowed(payload));
    }
    crate::framing::gunzip(payload, LARGEST_LAST_FRAME)
        .map(std::borrow::Cow::Owned)
        .map_err(|err| ProtocolError(format!("a compressed {what}: {err}")))
}

/// gRPC-Web text: base64 in chunks, each padded on its own (a server may flush a message and
/// its trailers apart), so padding may sit mid-body.
fn decode_web_text(body: &[u8]) -> Result<Vec<u8>, ProtocolError> {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    let clean: Vec<u8> = body
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(clean.len() / 4 * 3);
    for chunk in clean.chunks(4) {
        if chunk.len() < 4 {
            return Err(ProtocolError(format!(
                "the base64 body ends in {} characters, not a group of 4",
                chunk.len()
            )));
        }
        engine
            .decode_vec(chunk, &mut out)
            .map_err(|err| ProtocolError(format!("the body is not base64: {err}")))?;
    }
    Ok(out)
}

/// The trailer frame's `name: value` lines (CRLF, or LF, separated).
pub(crate) fn parse_trailer_lines(block: &[u8]) -> Result<Vec<(String, String)>, ProtocolError> {
    let text = std::str::from_utf8(block)
        .map_err(|_| ProtocolError("the trailer frame is not text".to_owned()))?;
    let mut trailers = Vec::new();
    for line in text.split('\n') {
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(ProtocolError(format!(
                "a trailer line without ':': {:?}",
                line.chars().take(60).collect::<String>()
            )));
        };
        trailers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    Ok(trailers)
}

/// Connect's name for a code (`not_found`); none for OK, which Connect never sends as one.
pub fn connect_code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Canceled => "canceled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

/// The code Connect names `name` (`not_found`); none for a name it does not have, or for
/// `ok`, which it never sends as an error's.
pub fn connect_code_named(name: &str) -> Option<Code> {
    Code::ALL
        .into_iter()
        .find(|code| *code != Code::Ok && connect_code_name(*code) == name)
}

/// A Connect error, read from a non-200 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectFailure {
    /// The code: the JSON's, or inferred from the HTTP status when the JSON has none.
    pub code: Code,
    /// The JSON's message, with how the code was found when it was not given.
    pub message: String,
    /// How many details the error carried.
    pub details: usize,
}

/// Reads a Connect unary error: `http_status` (not 200) and its body, which should be
/// `{"code": ..., "message": ..., "details": [...]}`. A body that is not that JSON, or names
/// no code Connect has, is an error still: its code comes from the HTTP status, as the
/// Connect protocol says, and the message says what was wrong with the body.
pub fn decode_connect_error(http_status: u16, body: &[u8]) -> ConnectFailure {
    let inferred = Code::from_http_status(http_status);
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return ConnectFailure {
            code: inferred,
            message: format!(
                "HTTP status {http_status} without a Connect error body ({} bytes that are not JSON)",
                body.len()
            ),
            details: 0,
        };
    };
    let message = json["message"].as_str().unwrap_or_default().to_owned();
    let details = json["details"].as_array().map_or(0, Vec::len);
    let named = json["code"].as_str().and_then(connect_code_named);
    match named {
        Some(code) => ConnectFailure {
            code,
            message,
            details,
        },
        None => ConnectFailure {
            code: inferred,
            message: format!(
                "HTTP status {http_status}, a Connect error without a known code {}",
                unknown_code_said(&json["code"], &message)
            ),
            details,
        },
    }
}

/// What a Connect error with no code Connect has said: the code it gave (or `none`) in
/// brackets, then its message if any (`("teapot"): short and stout`).
pub(crate) fn unknown_code_said(code: &serde_json::Value, message: &str) -> String {
    let code = code
        .as_str()
        .map_or_else(|| "none".to_owned(), |c| format!("{c:?}"));
    if message.is_empty() {
        format!("({code})")
    } else {
        format!("({code}): {message}")
    }
}

/// A `content-type`'s media type, lower-cased, without its parameters (`; charset=...`).
fn media_type(content_type: Option<&[u8]>) -> Option<String> {
    let value = std::str::from_utf8(content_type?).ok()?;
    Some(
        value
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase(),
    )
}

/// Whether a reply's `content-type` is the one `protocol` expects for a message in `codec`
/// (Connect's errors come as `application/json` and are read apart).
pub fn reply_content_type_fits_codec(
    protocol: Protocol,
    codec: Codec,
    content_type: Option<&[u8]>,
) -> bool {
    if codec == Codec::Proto {
        return reply_content_type_fits(protocol, content_type);
    }
    let Some(value) = media_type(content_type) else {
        return false;
    };
    value == protocol.content_type_with(Codec::Json)
}

/// Whether a streamed reply's `content-type` is the one `protocol` expects for a server
/// stream in `codec`: Connect's enveloped type (`application/connect+proto`), the others'
/// as for a unary reply.
pub fn stream_reply_content_type_fits(
    protocol: Protocol,
    codec: Codec,
    content_type: Option<&[u8]>,
) -> bool {
    if protocol != Protocol::Connect {
        return reply_content_type_fits_codec(protocol, codec, content_type);
    }
    media_type(content_type).is_some_and(|value| value == protocol.stream_content_type_with(codec))
}

/// Whether a reply's `content-type` is the one `protocol` expects for a message (Connect's
/// errors come as `application/json` and are read apart).
pub fn reply_content_type_fits(protocol: Protocol, content_type: Option<&[u8]>) -> bool {
    let Some(value) = media_type(content_type) else {
        return false;
    };
    match protocol {
        Protocol::Grpc => value.starts_with("application/grpc") && !value.contains("grpc-web"),
        Protocol::GrpcWeb => {
            value == "application/grpc-web" || value == "application/grpc-web+proto"
        }
        Protocol::GrpcWebText => {
            value == "application/grpc-web-text" || value == "application/grpc-web-text+proto"
        }
        Protocol::Connect => value == "application/proto",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A frame as both protocols write one: flag, length, payload.
    pub(crate) fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn connect_get_query_carries_the_message_in_unpadded_base64url() {
        // 0xfb 0xff: '+' and '/' in standard base64, '-' and '_' in base64url; one byte
        // more than a multiple of 3 would be padded.
        let message = [0x0a, 0xfb, 0xff, 0x01];
        assert_eq!(
            connect_get_query(&message, Codec::Proto, false),
            "connect=v1&base64=1&encoding=proto&message=Cvv_AQ"
        );
        assert_eq!(
            connect_get_query(b"{}", Codec::Json, true),
            "connect=v1&base64=1&compression=gzip&encoding=json&message=e30"
        );
        assert_eq!(
            connect_get_query(b"", Codec::Proto, false),
            "connect=v1&base64=1&encoding=proto&message="
        );
    }

    #[test]
    fn a_web_body_gives_its_messages_and_its_trailer_frames_status() {
        let mut body = frame(0, b"hello");
        body.extend(frame(0, b"again"));
        body.extend(frame(
            0x80,
            b"grpc-status: 5\r\ngrpc-message: not here\r\nx-served-by: a\r\n",
        ));
        let reply = decode_grpc_web(&body, false).unwrap();
        assert_eq!(reply.messages, vec![0..10, 10..20]);
        assert_eq!(&reply.body[reply.messages[1].clone()][5..], b"again");
        assert_eq!(reply.code, Code::NotFound);
        assert_eq!(reply.message, "not here");
        assert!(reply
            .trailers
            .contains(&("x-served-by".to_owned(), "a".to_owned())));
    }

    #[test]
    fn web_text_is_base64_padded_per_chunk() {
        use base64::Engine;
        let engine = base64::engine::general_purpose::STANDARD;
        // The message and the trailers encoded apart: padding mid-body.
        let mut text = engine.encode(frame(0, b"hi")).into_bytes();
        text.extend(
            engine
                .encode(frame(0x80, b"grpc-status:0\r\n"))
                .into_bytes(),
        );
        let reply = decode_grpc_web(&text, true).unwrap();
        assert_eq!(reply.code, Code::Ok);
        assert_eq!(reply.messages.len(), 1);
    }

    #[test]
    fn a_web_body_that_breaks_the_protocol_is_one_line_each() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (frame(0, b"hello"), "without its trailer frame"),
            (vec![], "without its trailer frame"),
            (frame(0, b"hello")[..7].to_vec(), "cut short at 2"),
            (vec![0, 0, 0], "frame header cut short: 3 of 5"),
            (
                [frame(0x80, b"grpc-status: 0\r\n"), frame(0, b"x")].concat(),
                "6 bytes after the trailer frame",
            ),
            (frame(0x80, b"x-other: 1\r\n"), "no grpc-status"),
            (frame(0x80, b"no colon here"), "without ':'"),
            (frame(0x80, &[0xff, 0xfe]), "not text"),
        ];
        for (body, says) in cases {
            let err = decode_grpc_web(&body, false).unwrap_err();
            assert!(err.0.contains(says), "{says}: {err}");
        }
        let err = decode_grpc_web(b"AAAAAAVo", true).unwrap_err();
        assert!(err.0.contains("cut short"), "{err}");
        let err = decode_grpc_web(b"AAA", true).unwrap_err();
        assert!(err.0.contains("not a group of 4"), "{err}");
        let err = decode_grpc_web(b"!!!!", true).unwrap_err();
        assert!(err.0.contains("not base64"), "{err}");
    }

    #[test]
    fn a_connect_error_gives_its_code_or_the_http_statuss() {
        let named = decode_connect_error(
            404,
            br#"{"code":"not_found","message":"no such","details":[{"type":"a","value":""}]}"#,
        );
        assert_eq!(
            named,
            ConnectFailure {
                code: Code::NotFound,
                message: "no such".to_owned(),
                details: 1
            }
        );
        // Every code Connect names comes back as itself.
        for code in Code::ALL.into_iter().filter(|c| *c != Code::Ok) {
            let body = format!(r#"{{"code":"{}"}}"#, connect_code_name(code));
            assert_eq!(decode_connect_error(500, body.as_bytes()).code, code);
        }
        let no_code = decode_connect_error(503, br#"{"message":"busy"}"#);
        assert_eq!(no_code.code, Code::Unavailable);
        assert!(no_code
            .message
            .contains("without a known code (none): busy"));
        let unknown = decode_connect_error(400, br#"{"code":"ok"}"#);
        assert_eq!(unknown.code, Code::Internal);
        let not_json = decode_connect_error(502, b"<html>bad gateway</html>");
        assert_eq!(not_json.code, Code::Unavailable);
        assert!(not_json.message.contains("not JSON"));
    }

    #[test]
    fn a_compressed_trailer_frame_is_inflated() {
        let gzipped = crate::framing::frame_gzip(b"grpc-status: 10\r\n");
        let body = [frame(1, b"m"), vec![0x81], gzipped[1..].to_vec()].concat();
        let reply = decode_grpc_web(&body, false).unwrap();
        assert_eq!((reply.code, reply.messages.len()), (Code::Aborted, 1));
        let broken = [vec![0x81], 3u32.to_be_bytes().to_vec(), b"abc".to_vec()].concat();
        let err = decode_grpc_web(&broken, false).unwrap_err();
        assert!(err.0.contains("a compressed trailer frame"), "{err}");
    }

    #[test]
    fn requests_are_encoded_as_each_protocol_sends_them() {
        let framed = Bytes::from(frame(0, b"msg"));
        assert_eq!(Protocol::GrpcWeb.request_body(&framed).unwrap(), framed);
        assert_eq!(
            Protocol::Connect.request_body(&framed).unwrap(),
            Bytes::from_static(b"msg")
        );
        assert_eq!(
            Protocol::GrpcWebText.request_body(&framed).unwrap(),
            Bytes::from_static(b"AAAAAANtc2c=")
        );
        let compressed = Bytes::from(frame(1, b"gz"));
        assert_eq!(
            Protocol::Connect.request_body(&compressed).unwrap(),
            Bytes::from_static(b"gz")
        );
        let unknown = Bytes::from(frame(4, b"msg"));
        let err = Protocol::Connect.request_body(&unknown).unwrap_err();
        assert!(err.0.contains("flag 0x04"), "{err}");
        for protocol in Protocol::ALL {
            assert_eq!(Protocol::from_name(protocol.name()), Some(protocol));
        }
        assert!(reply_content_type_fits(
            Protocol::GrpcWeb,
            Some(b"application/grpc-web+proto")
        ));
        assert!(!reply_content_type_fits(
            Protocol::GrpcWeb,
            Some(b"application/grpc")
        ));
        assert!(reply_content_type_fits(
            Protocol::Connect,
            Some(b"application/proto; charset=utf-8")
        ));
        assert!(reply_content_type_fits_codec(
            Protocol::Connect,
            Codec::Json,
            Some(b"application/json; charset=utf-8")
        ));
        assert!(!reply_content_type_fits_codec(
            Protocol::GrpcWeb,
            Codec::Json,
            Some(b"application/grpc-web+proto")
        ));
        assert_eq!(
            Protocol::GrpcWeb.content_type_with(Codec::Json),
            "application/grpc-web+json"
        );
    }
}
