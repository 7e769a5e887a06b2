//! The gRPC layer of the `lab` server, independent of the HTTP/2 transport beneath it.
//!
//! The transport hands over what it parsed (a few header values, the request body) and sends
//! back what this layer decides ([`HeadRejection`] before the body, [`Outcome`] after). Nothing
//! here knows about HTTP/2, so both transports (`transport/engine.rs`, `transport/h2.rs`) share
//! it unchanged.

use bytes::{BufMut, Bytes, BytesMut};
use grpclab_core::framing::{parse_grpc_timeout, PREFIX_LEN};
use grpclab_core::Code;
use prost::Message;
use std::borrow::Cow;
use std::time::Instant;

use crate::heap_profile;
use crate::proto::pb::{HelloReply, HelloRequest};
use crate::proto::pb_admin::{HeapProfileReply, HeapProfileStartRequest};
use crate::stats::{count_call, snapshot, STATS_PATH};

/// The `:path` of the scenarios' call.
pub const SAY_HELLO_PATH: &str = "/helloworld.Greeter/SayHello";

/// The `:path` of the streaming echo's bidi ping-pong.
pub const PING_PONG_PATH: &str = "/grpclab.streaming.v1.StreamingEcho/PingPong";
/// The `:path` of the streaming echo's server-streaming feed.
pub const FEED_PATH: &str = "/grpclab.streaming.v1.StreamingEcho/Feed";
/// The `:path` of the streaming echo's client-streaming upload.
pub const UPLOAD_PATH: &str = "/grpclab.streaming.v1.StreamingEcho/Upload";

/// Why lab on the h2 crate answers streaming methods UNIMPLEMENTED.
pub const STREAMING_ON_OWN_ENGINE_ONLY: &str = "lab on the h2 crate (--transport h2) serves unary calls only; streaming methods are served on lab's own engine (--transport lab, the default)";

/// The methods the lab server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `helloworld.Greeter/SayHello`.
    SayHello,
    /// `grpclab.admin.v1.Stats/Get`.
    Stats,
    /// `grpclab.admin.v1.HeapProfile/Start`.
    HeapProfileStart,
    /// `grpclab.admin.v1.HeapProfile/Stop`.
    HeapProfileStop,
    /// `grpclab.streaming.v1.StreamingEcho/PingPong` (bidi streaming).
    PingPong,
    /// `grpclab.streaming.v1.StreamingEcho/Feed` (server streaming).
    Feed,
    /// `grpclab.streaming.v1.StreamingEcho/Upload` (client streaming).
    Upload,
    /// `grpc.reflection.v1` or `v1alpha` `ServerReflection/ServerReflectionInfo` (bidi).
    Reflection,
    /// `grpc.health.v1.Health/Check` (see [`crate::health`]).
    HealthCheck,
    /// `grpclab.session.v1.Sessions/Login` (see [`crate::session`]).
    SessionLogin,
    /// `grpclab.session.v1.Sessions/List`.
    SessionList,
    /// `grpclab.session.v1.Sessions/Get`.
    SessionGet,
}

impl Route {
    /// Whether the method streams (its messages are handled one by one as they arrive).
    pub fn is_streaming(self) -> bool {
        matches!(
            self,
            Route::PingPong | Route::Feed | Route::Upload | Route::Reflection
        )
    }
}

/// A gRPC status with its message, as sent in `grpc-status` / `grpc-message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The code.
    pub code: Code,
    /// A human-readable description (percent-encoded by the transport on the wire).
    pub message: Cow<'static, str>,
}

impl Status {
    /// A status with a fixed message.
    pub const fn new(code: Code, message: &'static str) -> Status {
        Status {
            code,
            message: Cow::Borrowed(message),
        }
    }
}

/// What a call's headers say, once checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallHead {
    /// Which method.
    pub route: Route,
    /// When the client's `grpc-timeout` runs out.
    pub deadline: Option<Instant>,
    /// The request is `grpc-encoding: gzip`: its message may be compressed, and the reply is.
    pub gzip: bool,
    /// The most bytes a compressed request message may inflate to (`--max-message-bytes`).
    /// A `u32` (as gRPC's length prefix) so that with `gzip` it fits in the padding after
    /// `route`: the head is stored per stream and moved with it, and growing it from 24 to
    /// 40 bytes cost lab 1 % of its CPU per call in the A/B (BENCHMARKS.md).
    pub inflate_limit: u32,
    /// How a Greeter request is decoded and its reply encoded (one byte: it sits in the
    /// padding beside `gzip`, the head stays 24 bytes).
    pub codec: Codec,
    /// A gRPC-Web call (`application/grpc-web+proto`, `serve --grpc-web`): its reply carries
    /// its status in a trailer frame at the end of the body ([`web_body`]), its errors
    /// gRPC-Web's content type. One byte, in the padding as `codec` is.
    pub web: bool,
}

/// How lab decodes a unary Greeter request and encodes its reply (`serve --codec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Codec {
    /// Our zero-allocation codec: the request read in place as a view, the reply written
    /// straight into its buffer (lab's default; what the headline figures use).
    #[default]
    View,
    /// prost, as a typical service does it: the request decoded into the generated structs
    /// (owned strings and vectors), the reply built from them and encoded. Isolates what the
    /// HTTP/2 engine is worth from what the codec is.
    Prost,
}

/// Why a call is refused before its body is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadRejection {
    /// Not a gRPC request at all: answer with this HTTP status (415, 405) and no gRPC status.
    Http(u16),
    /// A gRPC request we answer with this status at once (trailers-only).
    Status(Status),
    /// A gRPC-Web request we answer with this status at once (trailers-only, gRPC-Web's
    /// content type).
    WebStatus(Status),
}

/// The trailer frame ending every successful gRPC-Web reply: flag 0x80, its length, and
/// `grpc-status:0` as an HTTP/1 header line.
pub const GRPC_WEB_OK_TRAILER_FRAME: &[u8] = b"\x80\0\0\0\x0fgrpc-status:0\r\n";

/// A gRPC-Web reply's whole body: the framed message, then the OK trailer frame.
pub fn web_body(framed: &[u8]) -> Bytes {
    let mut body = BytesMut::with_capacity(framed.len() + GRPC_WEB_OK_TRAILER_FRAME.len());
    body.extend_from_slice(framed);
    body.extend_from_slice(GRPC_WEB_OK_TRAILER_FRAME);
    body.freeze()
}

/// Why lab answers a gRPC-Web call of a streaming method UNIMPLEMENTED.
pub const WEB_STREAMS_NOT_SERVED: &str = "lab serves gRPC-Web's unary calls only; for gRPC-Web server streams use serve --impl tonic-mt --grpc-web";

/// The request header values the gRPC layer looks at, as raw bytes from the transport.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestHeaders<'a> {
    /// `:method`.
    pub method: &'a [u8],
    /// `:path`.
    pub path: &'a [u8],
    /// `content-type`.
    pub content_type: Option<&'a [u8]>,
    /// `grpc-encoding`.
    pub grpc_encoding: Option<&'a [u8]>,
    /// `grpc-timeout`.
    pub grpc_timeout: Option<&'a [u8]>,
}

/// The encodings lab accepts, as `grpc-accept-encoding` says them.
pub const ACCEPT_ENCODING: &[u8] = b"identity,gzip";

/// Checks a request's headers (gRPC over HTTP/2: POST, `application/grpc*`, a known method,
/// a supported encoding, a well-formed timeout). gRPC-Web's binary form
/// (`application/grpc-web`, `+proto`) is a call only with `grpc_web`; otherwise, and its text
/// form always, it is refused with 415. `max_message_bytes` also bounds what a compressed
/// message may inflate to.
pub fn check_head(
    headers: &RequestHeaders<'_>,
    now: Instant,
    max_message_bytes: usize,
    codec: Codec,
    grpc_web: bool,
) -> Result<CallHead, HeadRejection> {
    let content_type = headers.content_type.unwrap_or_default();
    if !content_type.starts_with(b"application/grpc") {
        return Err(HeadRejection::Http(415));
    }
    // gRPC-Web unasked for is refused, not answered as gRPC: that would put its status where
    // a gRPC-Web client never looks.
    let web = content_type.get(16) == Some(&b'-');
    if web
        && !(grpc_web
            && matches!(
                content_type,
                b"application/grpc-web" | b"application/grpc-web+proto"
            ))
    {
        return Err(HeadRejection::Http(415));
    }
    if headers.method != b"POST" {
        return Err(HeadRejection::Http(405));
    }
    let refuse = |status: Status| match web {
        true => HeadRejection::WebStatus(status),
        false => HeadRejection::Status(status),
    };
    let route = match headers.path {
        path if path == SAY_HELLO_PATH.as_bytes() => Route::SayHello,
        path if path == STATS_PATH.as_bytes() => Route::Stats,
        path if path == heap_profile::START_PATH.as_bytes() => Route::HeapProfileStart,
        path if path == heap_profile::STOP_PATH.as_bytes() => Route::HeapProfileStop,
        path if path == PING_PONG_PATH.as_bytes() => Route::PingPong,
        path if path == FEED_PATH.as_bytes() => Route::Feed,
        path if path == UPLOAD_PATH.as_bytes() => Route::Upload,
        path if path == crate::health::CHECK_PATH.as_bytes() => Route::HealthCheck,
        path if path == crate::session::LOGIN_PATH.as_bytes() => Route::SessionLogin,
        path if path == crate::session::LIST_PATH.as_bytes() => Route::SessionList,
        path if path == crate::session::GET_PATH.as_bytes() => Route::SessionGet,
        path if path == super::reflection::V1_PATH.as_bytes()
            || path == super::reflection::V1ALPHA_PATH.as_bytes() =>
        {
            Route::Reflection
        }
        path => {
            return Err(refuse(Status {
                code: Code::Unimplemented,
                message: Cow::Owned(format!(
                    "unknown method {}; this server serves {SAY_HELLO_PATH}, grpclab.streaming.v1.StreamingEcho, grpclab.session.v1.Sessions, {} and {STATS_PATH}",
                    String::from_utf8_lossy(path),
                    crate::health::CHECK_PATH
                )),
            }))
        }
    };
    if web && route.is_streaming() {
        return Err(refuse(Status::new(
            Code::Unimplemented,
            WEB_STREAMS_NOT_SERVED,
        )));
    }
    // The spec: an encoding the server does not support is UNIMPLEMENTED (and the response
    // names the accepted ones in grpc-accept-encoding: the transport adds it).
    let gzip = match headers.grpc_encoding {
        None | Some(b"identity") => false,
        Some(b"gzip") => true,
        Some(encoding) => {
            return Err(refuse(Status {
                code: Code::Unimplemented,
                message: Cow::Owned(format!(
                    "grpc-encoding '{}' is not supported; this server accepts identity and gzip",
                    String::from_utf8_lossy(encoding)
                )),
            }));
        }
    };
    let deadline = match headers.grpc_timeout {
        None => None,
        Some(value) => match parse_grpc_timeout(value) {
            Some(timeout) => Some(now + timeout),
            None => {
                return Err(refuse(Status::new(
                    Code::Internal,
                    "malformed grpc-timeout header",
                )))
            }
        },
    };
    Ok(CallHead {
        route,
        deadline,
        gzip,
        inflate_limit: u32::try_from(max_message_bytes).unwrap_or(u32::MAX),
        codec,
        web,
    })
}

/// Checks a message's 5-byte prefix as soon as it arrives, so an oversized message is refused
/// without being buffered. Returns the declared message length.
pub fn check_prefix(prefix: &[u8], max_message_bytes: usize) -> Result<usize, Status> {
    let declared = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if declared > max_message_bytes {
        return Err(Status {
            code: Code::ResourceExhausted,
            message: Cow::Owned(format!(
                "request message of {declared} bytes is larger than the server's limit of {max_message_bytes} (--max-message-bytes)"
            )),
        });
    }
    Ok(declared)
}

/// How a call ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Status OK with this framed reply message.
    Reply(Bytes),
    /// Status OK with this gzip-framed reply message (`grpc-encoding: gzip`).
    GzipReply(Bytes),
    /// An error status, sent trailers-only.
    Status(Status),
}

/// Runs a call whose body (every byte the client sent) has arrived: decode, handle, encode.
///
/// This is the work a decode placement moves around: inline on the I/O thread, in a task, or
/// on the pool. It allocates what prost's generated types allocate (the request's strings and
/// pets) plus one buffer for the encoded reply.
pub fn run_call(head: &CallHead, body: &[u8], implementation: &str) -> Outcome {
    run_call_at(head, body, implementation, Instant::now())
}

/// [`run_call`] with the deadline judged at `now`: the inline path passes the time its turn's
/// bytes were read, one clock reading for every call of the batch instead of one per call.
pub fn run_call_at(head: &CallHead, body: &[u8], implementation: &str, now: Instant) -> Outcome {
    if head.deadline.is_some_and(|deadline| now >= deadline) {
        return Outcome::Status(Status::new(
            Code::DeadlineExceeded,
            "deadline exceeded before the call was handled",
        ));
    }
    let message = match unframe(body, head) {
        Ok(message) => message,
        Err(status) => return Outcome::Status(status),
    };
    gzip_if_asked(head, route_call(head, &message, implementation))
}

/// What a call came to when its reply may be written in place ([`run_call_into`]).
pub enum Answer {
    /// The framed reply message is in the buffer given.
    Written,
    /// Any other answer (the buffer is left as it was).
    Outcome(Outcome),
}

/// [`run_call_at`] with a SayHello reply of the view codec, uncompressed, appended to `out`
/// framed ([`Answer::Written`]): the transport writes it straight after the response's
/// HEADERS, the reply never a `Bytes` of its own. Every other call answers as
/// [`run_call_at`] does.
pub fn run_call_into(
    head: &CallHead,
    body: &[u8],
    implementation: &str,
    now: Instant,
    out: &mut BytesMut,
) -> Answer {
    if head.route != Route::SayHello || head.codec != Codec::View || head.gzip {
        return Answer::Outcome(run_call_at(head, body, implementation, now));
    }
    if head.deadline.is_some_and(|deadline| now >= deadline) {
        return Answer::Outcome(Outcome::Status(Status::new(
            Code::DeadlineExceeded,
            "deadline exceeded before the call was handled",
        )));
    }
    let message = match unframe(body, head) {
        Ok(message) => message,
        Err(status) => return Answer::Outcome(Outcome::Status(status)),
    };
    match fast_say_hello_into(&message, out) {
        Some(Ok(())) => Answer::Written,
        Some(Err(status)) => Answer::Outcome(Outcome::Status(status)),
        None => Answer::Outcome(prost_say_hello(&message)),
    }
}

/// Mirrors the client: a gzip request gets a gzip reply (it accepts what it sends). A
/// gRPC-Web reply goes uncompressed (its head names no encoding; the spec lets a server
/// choose identity whatever the client's).
fn gzip_if_asked(head: &CallHead, outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Reply(framed) if head.gzip && !head.web => {
            Outcome::GzipReply(grpclab_core::framing::frame_gzip(&framed[PREFIX_LEN..]))
        }
        other => other,
    }
}

/// Decode, handle, encode: the method's own work on an unframed message.
fn route_call(head: &CallHead, message: &[u8], implementation: &str) -> Outcome {
    match head.route {
        Route::SayHello => match head.codec {
            // The view codec handles what it can read in place and leaves the rest (fields it
            // does not know) to prost, so both answer every request alike.
            Codec::View => match fast_say_hello(message) {
                Some(outcome) => outcome,
                None => prost_say_hello(message),
            },
            Codec::Prost => prost_say_hello(message),
        },
        Route::Stats => Outcome::Reply(encode_framed(&snapshot(implementation))),
        Route::HeapProfileStart => {
            let Ok(request) = HeapProfileStartRequest::decode(message) else {
                return Outcome::Status(Status::new(
                    Code::InvalidArgument,
                    "malformed grpclab.admin.v1.HeapProfileStartRequest",
                ));
            };
            admin_outcome(heap_profile::start(&request.path).map(|()| request.path))
        }
        Route::HeapProfileStop => admin_outcome(heap_profile::stop()),
        Route::HealthCheck => health_check(message),
        Route::SessionLogin => session_call(message, crate::session::login),
        Route::SessionList => session_call(message, crate::session::list),
        Route::SessionGet => session_call(message, crate::session::get),
        // Streaming methods reach here only on a transport that serves unary calls alone.
        Route::PingPong | Route::Feed | Route::Upload | Route::Reflection => Outcome::Status(
            Status::new(Code::Unimplemented, STREAMING_ON_OWN_ENGINE_ONLY),
        ),
    }
}

/// One ping-pong message: decodes the framed `EchoRequest` (inflated under gzip) and appends
/// the framed `EchoReply` with its `sequence` to `out`. Replies are sent uncompressed (the
/// spec lets a server choose identity whatever the client's encoding).
pub fn ping_pong_message(
    head: &CallHead,
    framed: &[u8],
    sequence: u64,
    out: &mut BytesMut,
) -> Result<(), Status> {
    let message = stream_message(framed, head, ECHO_REQUEST)?;
    let payload = super::stream_codec::echo_request_payload(&message)
        .map_err(|err| invalid(&err, ECHO_REQUEST))?;
    super::stream_codec::put_echo_reply(out, &message[payload], sequence, 0);
    count_call();
    Ok(())
}

/// A ping-pong message run off the I/O thread (the pool or task placement): its reply, framed.
pub fn run_ping_pong(head: &CallHead, framed: &[u8], sequence: u64) -> Outcome {
    REPLY_BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        match ping_pong_message(head, framed, sequence, &mut buffer) {
            Ok(()) => Outcome::Reply(buffer.split().freeze()),
            Err(status) => {
                buffer.clear();
                Outcome::Status(status)
            }
        }
    })
}

/// The streaming echo's request types, as errors name them.
pub const ECHO_REQUEST: &str = "grpclab.streaming.v1.EchoRequest";
/// See [`ECHO_REQUEST`].
pub const FEED_REQUEST: &str = "grpclab.streaming.v1.FeedRequest";

/// A streaming call's message, unframed (and inflated under gzip); the engine splits messages
/// exactly, so the frame holds one message. `type_name` (fully qualified) names it in errors.
pub fn stream_message<'a>(
    framed: &'a [u8],
    head: &CallHead,
    type_name: &str,
) -> Result<Cow<'a, [u8]>, Status> {
    unframe(framed, head).map_err(|status| Status {
        code: status.code,
        message: Cow::Owned(format!("{type_name}: {}", status.message)),
    })
}

/// The status for a request message that does not decode.
pub fn invalid(err: &dyn std::fmt::Display, type_name: &str) -> Status {
    Status {
        code: Code::Internal,
        message: Cow::Owned(format!("request is not a valid {type_name}: {err}")),
    }
}

/// The reply to a heap profile request: the profile's path, or why not (FAILED_PRECONDITION,
/// as the tonic baseline answers).
fn admin_outcome(result: Result<String, heap_profile::HeapProfileError>) -> Outcome {
    match result {
        Ok(path) => Outcome::Reply(encode_framed(&HeapProfileReply { path })),
        Err(err) => Outcome::Status(Status {
            code: Code::FailedPrecondition,
            message: Cow::Owned(err.to_string()),
        }),
    }
}

thread_local! {
    /// Where replies are encoded. A reply leaves as a `Bytes` split off this buffer; once the
    /// transport has copied and dropped it, the next `reserve` reuses the same memory, so the
    /// steady state allocates nothing here.
    static REPLY_BUFFER: std::cell::RefCell<BytesMut> = std::cell::RefCell::new(BytesMut::new());
}

/// The allocation-free path (see `fast_codec`), its reply split off this thread's buffer;
/// `None` when the message needs prost.
fn fast_say_hello(message: &[u8]) -> Option<Outcome> {
    REPLY_BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        // `echo_reply` reserves exactly what the reply needs: where the transport still holds
        // the previous reply (h2's send queue, the pool), a new buffer of that size is taken,
        // not a large one.
        fast_say_hello_into(message, &mut buffer).map(|written| match written {
            Ok(()) => Outcome::Reply(buffer.split().freeze()),
            Err(status) => Outcome::Status(status),
        })
    })
}

/// The allocation-free path, its framed reply appended to `out` (`Ok`); `None` when the
/// message needs prost, `Some(Err)` when it does not decode: `out` is left as it was then.
fn fast_say_hello_into(message: &[u8], out: &mut BytesMut) -> Option<Result<(), Status>> {
    let start = out.len();
    match super::fast_codec::echo_reply(message, out) {
        Ok(true) => {
            count_call();
            Some(Ok(()))
        }
        Ok(false) => {
            out.truncate(start);
            None
        }
        Err(err) => {
            out.truncate(start);
            Some(Err(Status {
                code: Code::Internal,
                message: Cow::Owned(format!(
                    "request is not a valid helloworld.HelloRequest: {err}"
                )),
            }))
        }
    }
}

/// The general path: prost's generated types.
/// `grpc.health.v1.Health/Check`: counted as a call when answered.
fn health_check(message: &[u8]) -> Outcome {
    let Ok(request) = crate::health::HealthCheckRequest::decode(message) else {
        return Outcome::Status(Status::new(
            Code::InvalidArgument,
            "malformed grpc.health.v1.HealthCheckRequest",
        ));
    };
    match crate::health::check(&request.service) {
        Ok(reply) => {
            count_call();
            Outcome::Reply(encode_framed(&reply))
        }
        Err((code, message)) => Outcome::Status(Status {
            code,
            message: Cow::Owned(message),
        }),
    }
}

/// A session method: the request decoded with prost, answered by [`crate::session`].
fn session_call<Request: Message + Default, Reply: Message>(
    message: &[u8],
    handle: fn(&Request) -> Result<Reply, crate::session::Refusal>,
) -> Outcome {
    let Ok(request) = Request::decode(message) else {
        return Outcome::Status(Status::new(
            Code::InvalidArgument,
            "malformed grpclab.session.v1 request",
        ));
    };
    match handle(&request) {
        Ok(reply) => Outcome::Reply(encode_framed(&reply)),
        Err((code, message)) => Outcome::Status(Status {
            code,
            message: Cow::Owned(message),
        }),
    }
}

fn prost_say_hello(message: &[u8]) -> Outcome {
    match HelloRequest::decode(message) {
        Ok(request) => {
            let reply = HelloReply {
                response: request.request,
            };
            count_call();
            Outcome::Reply(encode_framed(&reply))
        }
        Err(err) => Outcome::Status(Status {
            code: Code::Internal,
            message: Cow::Owned(format!(
                "request is not a valid helloworld.HelloRequest: {err}"
            )),
        }),
    }
}

/// The single message of a unary request body, inflated when it is compressed under
/// `grpc-encoding: gzip`.
fn unframe<'a>(body: &'a [u8], head: &CallHead) -> Result<Cow<'a, [u8]>, Status> {
    if body.len() < PREFIX_LEN {
        return Err(Status::new(
            Code::Internal,
            "request body ended before a complete gRPC message",
        ));
    }
    if body[0] != 0 && !head.gzip {
        return Err(Status::new(
            Code::Internal,
            "compressed message but no grpc-encoding was negotiated",
        ));
    }
    let declared = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    let message = match body.len() - PREFIX_LEN {
        have if have < declared => {
            return Err(Status::new(
                Code::Internal,
                "request body ended before a complete gRPC message",
            ))
        }
        have if have > declared => {
            return Err(Status::new(
                Code::Unimplemented,
                "more than one request message on a unary call",
            ))
        }
        _ => &body[PREFIX_LEN..],
    };
    if body[0] == 0 {
        return Ok(Cow::Borrowed(message));
    }
    match grpclab_core::framing::gunzip(message, head.inflate_limit as usize) {
        Ok(inflated) => Ok(Cow::Owned(inflated)),
        Err(grpclab_core::framing::FrameError::TooLarge(limit)) => Err(Status {
            code: Code::ResourceExhausted,
            message: Cow::Owned(format!(
                "request message inflates past the server's limit of {limit} bytes (--max-message-bytes)"
            )),
        }),
        Err(err) => Err(Status {
            code: Code::Internal,
            message: Cow::Owned(format!("request message: {err}")),
        }),
    }
}

/// Encodes a message behind gRPC's prefix, in one buffer.
fn encode_framed(message: &impl Message) -> Bytes {
    let len = message.encoded_len();
    let mut buffer = BytesMut::with_capacity(PREFIX_LEN + len);
    buffer.put_u8(0);
    buffer.put_u32(len as u32);
    // Encoding into a buffer with enough capacity cannot fail.
    let _ = message.encode(&mut buffer);
    buffer.freeze()
}

#[cfg(test)]
mod tests {
    use super::Codec;
    use super::*;
    use grpclab_core::Scenario;

    fn headers(path: &'static str) -> RequestHeaders<'static> {
        RequestHeaders {
            method: b"POST",
            path: path.as_bytes(),
            content_type: Some(b"application/grpc"),
            grpc_encoding: None,
            grpc_timeout: None,
        }
    }

    #[test]
    fn heads_are_checked_per_spec() {
        let now = Instant::now();
        let limit = 4 << 20;
        assert!(check_head(&headers(SAY_HELLO_PATH), now, limit, Codec::View, false).is_ok());
        let mut json = headers(SAY_HELLO_PATH);
        json.content_type = Some(b"application/json");
        assert_eq!(
            check_head(&json, now, limit, Codec::View, false),
            Err(HeadRejection::Http(415))
        );
        // gRPC-Web is not gRPC: unless served (`grpc_web`), refused, not answered with
        // trailers it would never read; its text form always.
        for (content_type, accepted, accepted_as_web) in [
            (&b"application/grpc-web+proto"[..], false, true),
            (b"application/grpc-web", false, true),
            (b"application/grpc-web-text", false, false),
            (b"application/grpc-web+json", false, false),
            (b"application/grpc+proto", true, true),
        ] {
            let mut typed = headers(SAY_HELLO_PATH);
            typed.content_type = Some(content_type);
            let checked = check_head(&typed, now, limit, Codec::View, false);
            assert_eq!(checked.is_ok(), accepted, "{content_type:?}");
            let checked = check_head(&typed, now, limit, Codec::View, true);
            assert_eq!(checked.is_ok(), accepted_as_web, "{content_type:?}");
            if let Ok(head) = checked {
                assert_eq!(head.web, content_type.starts_with(b"application/grpc-web"));
            }
        }
        // A gRPC-Web call's refusals are gRPC-Web statuses; its streams are not served.
        let mut web = headers("/x.Y/Z");
        web.content_type = Some(b"application/grpc-web+proto");
        assert!(matches!(
            check_head(&web, now, limit, Codec::View, true),
            Err(HeadRejection::WebStatus(s)) if s.code == Code::Unimplemented
        ));
        web.path = FEED_PATH.as_bytes();
        assert_eq!(
            check_head(&web, now, limit, Codec::View, true),
            Err(HeadRejection::WebStatus(Status::new(
                Code::Unimplemented,
                WEB_STREAMS_NOT_SERVED
            )))
        );
        let Err(HeadRejection::Status(status)) =
            check_head(&headers("/x.Y/Z"), now, limit, Codec::View, false)
        else {
            panic!("unknown path must be refused")
        };
        assert_eq!(status.code, Code::Unimplemented);
        let mut gzip = headers(SAY_HELLO_PATH);
        gzip.grpc_encoding = Some(b"gzip");
        assert!(
            check_head(&gzip, now, limit, Codec::View, false)
                .unwrap()
                .gzip
        );
        let mut brotli = headers(SAY_HELLO_PATH);
        brotli.grpc_encoding = Some(b"br");
        assert!(
            matches!(check_head(&brotli, now, limit, Codec::View, false), Err(HeadRejection::Status(s)) if s.code == Code::Unimplemented)
        );
        let mut timed = headers(SAY_HELLO_PATH);
        timed.grpc_timeout = Some(b"100m");
        assert_eq!(
            check_head(&timed, now, limit, Codec::View, false)
                .unwrap()
                .deadline,
            Some(now + std::time::Duration::from_millis(100))
        );
        timed.grpc_timeout = Some(b"soon");
        assert!(check_head(&timed, now, limit, Codec::View, false).is_err());
    }

    #[test]
    fn calls_decode_handle_and_encode() {
        let scenario = Scenario::builtin("complex_proto").unwrap();
        let request = &scenario.requests()[0];
        let head = CallHead {
            route: Route::SayHello,
            deadline: None,
            gzip: false,
            inflate_limit: 1 << 20,
            codec: Codec::View,
            web: false,
        };
        assert_eq!(std::mem::size_of::<CallHead>(), 24, "see inflate_limit");
        // HelloReply and HelloRequest share their layout: the reply re-encodes the same bytes,
        // whichever codec does it.
        assert_eq!(
            run_call(&head, request, "lab"),
            Outcome::Reply(request.clone())
        );
        let prost = CallHead {
            codec: Codec::Prost,
            ..head
        };
        assert_eq!(
            run_call(&prost, request, "lab"),
            Outcome::Reply(request.clone())
        );
        // A corrupt request fails with the same code either way (prost words its reason).
        let code = |outcome: Outcome| match outcome {
            Outcome::Status(status) => status.code,
            other => panic!("invalid protobuf must fail: {other:?}"),
        };
        assert_eq!(
            code(run_call(&prost, b"\0\0\0\0\x02\xff\xff", "lab")),
            code(run_call(&head, b"\0\0\0\0\x02\xff\xff", "lab"))
        );
        let Outcome::Status(status) = run_call(&head, b"\0\0\0\0\x02\xff\xff", "lab") else {
            panic!("invalid protobuf must fail")
        };
        assert_eq!(status.code, Code::Internal);
        let Outcome::Status(status) = run_call(&head, b"\x01\0\0\0\0", "lab") else {
            panic!("compressed flag must fail")
        };
        assert_eq!(status.code, Code::Internal);
        // Under gzip: the compressed request is inflated, the reply compressed; a message that
        // inflates past the limit is RESOURCE_EXHAUSTED.
        let gzip = CallHead { gzip: true, ..head };
        let message = grpclab_core::framing::unframe_single(request).unwrap();
        let compressed = grpclab_core::framing::frame_gzip(message);
        let Outcome::GzipReply(reply) = run_call(&gzip, &compressed, "lab") else {
            panic!("a gzip request gets a gzip reply")
        };
        assert_eq!(
            grpclab_core::framing::unframe_maybe_gzip(&reply, true, 1 << 20)
                .unwrap()
                .as_ref(),
            message
        );
        let small = CallHead {
            inflate_limit: 10,
            ..gzip
        };
        let Outcome::Status(status) = run_call(&small, &compressed, "lab") else {
            panic!("inflating past the limit must fail")
        };
        assert_eq!(status.code, Code::ResourceExhausted);
        assert!(check_prefix(b"\0\0\x10\0\0", 1024).is_err());
        assert_eq!(check_prefix(b"\0\0\0\x04\0", 1024), Ok(1024));
    }
}
