//! One unary call in gRPC-Web or Connect over an h2 sender: gRPC's request in the
//! protocol's headers and body, the reply read whole and its status found where the protocol
//! keeps it (`grpclab_core::protocol`): a gRPC-Web trailer frame (or the headers of a
//! Trailers-Only reply), or Connect's HTTP status and error JSON.

use bytes::Bytes;
use grpclab_core::framing::{frame_message, gunzip};
use grpclab_core::protocol::{
    decode_connect_error, decode_grpc_web, reply_content_type_fits_codec, Protocol,
};
use grpclab_core::Code;
use h2::client::SendRequest;
use http::{HeaderMap, StatusCode};

use super::unary::{failure_from_h2, keep_headers, send, status_from, validate, CallTemplate};
use crate::outcome::{CallFailure, REPLY_INFLATE_LIMIT};
use grpclab_h2::client::{CallHeaders, ReplyHeader};
use grpclab_h2::grpc::percent_decode;

/// Sends one call (`method`, its framed request `body`, its own headers) in the template's
/// protocol and judges its reply. `scratch` ends holding the reply as gRPC frames (the
/// first message of a unary call, every message of a server stream), which `kept` callers
/// (flow steps) read as they read a gRPC reply.
pub(super) async fn call(
    sender: &mut SendRequest<Bytes>,
    template: &CallTemplate,
    (method, body, call_headers): (u32, Bytes, &CallHeaders),
    scratch: &mut Vec<u8>,
    mut kept: Option<&mut Vec<ReplyHeader>>,
) -> Result<(), CallFailure> {
    let request_body = template
        .protocol
        .request_body(&body)
        .map_err(|err| CallFailure::new(Code::Internal, err.0))?;
    let (head, mut reply) = send(
        sender,
        template,
        (method, request_body, call_headers),
        kept.as_deref_mut(),
    )
    .await?;
    // The whole body: both protocols put what decides the call at its end (or in it).
    let limit = template
        .max_reply_message
        .map(|max| max.saturating_mul(2).saturating_add(64 * 1024));
    scratch.clear();
    while let Some(chunk) = reply.data().await {
        let chunk = chunk.map_err(failure_from_h2)?;
        let _ = reply.flow_control().release_capacity(chunk.len());
        scratch.extend_from_slice(&chunk);
        if let (Some(limit), Some(max)) = (limit, template.max_reply_message) {
            if scratch.len() > limit {
                return Err(CallFailure::new(
                    Code::ResourceExhausted,
                    format!(
                        "grpc: received message larger than max ({}+ vs. {max}) (--max-recv-message-size)",
                        scratch.len()
                    ),
                ));
            }
        }
    }
    // HTTP trailers, if the server sent any beside the protocol's own: read to the end.
    let http_trailers = reply.trailers().await.map_err(failure_from_h2)?;
    judge(
        template,
        method,
        (&head, http_trailers.as_ref()),
        scratch,
        kept,
    )
}

/// Judges a reply read whole (its head, its HTTP trailers if any, its body in `scratch`),
/// on either HTTP version: where the protocol keeps the status, then the message sizes and
/// `--validate`. `scratch` ends holding the reply as gRPC frames.
pub(crate) fn judge(
    template: &CallTemplate,
    method: u32,
    (head, http_trailers): (&http::response::Parts, Option<&HeaderMap>),
    scratch: &mut Vec<u8>,
    mut kept: Option<&mut Vec<ReplyHeader>>,
) -> Result<(), CallFailure> {
    let protocol = template.protocol;
    let streams = template
        .step_traits
        .get(method as usize)
        .is_some_and(|traits| traits.streams);
    let outcome = match protocol {
        Protocol::Connect => connect_reply(head, scratch, template),
        Protocol::Grpc => grpc_reply(head, scratch, http_trailers, streams, template),
        _ => web_reply(
            protocol,
            head,
            scratch,
            streams,
            kept.as_deref_mut(),
            template,
        ),
    };
    if let (Some(kept), Some(trailers)) = (kept, http_trailers) {
        keep_headers(&template.kept_headers, trailers, true, kept);
    }
    outcome?;
    if let Some(max) = template.max_reply_message {
        check_message_sizes(scratch, max)?;
    }
    validate(template, scratch)
}

/// A gRPC-Web reply: the status from its trailer frame (or, Trailers-Only, its headers);
/// `scratch` left holding its message frames.
fn web_reply(
    protocol: Protocol,
    head: &http::response::Parts,
    scratch: &mut Vec<u8>,
    streams: bool,
    kept: Option<&mut Vec<ReplyHeader>>,
    template: &CallTemplate,
) -> Result<(), CallFailure> {
    http_ok(head)?;
    if scratch.is_empty() && head.headers.contains_key("grpc-status") {
        // Trailers-Only: the status came as headers, with no body.
        status_from(&head.headers)?;
        return if streams {
            Ok(())
        } else {
            Err(CallFailure::new(
                Code::Internal,
                "status OK but no reply message",
            ))
        };
    }
    let content_type = content_type(head);
    if !reply_content_type_fits_codec(protocol, template.codec, content_type) {
        return Err(CallFailure::new(
            Code::Unknown,
            format!(
                "the reply's content-type is {}, not {protocol}'s",
                described(content_type)
            ),
        ));
    }
    let reply = decode_grpc_web(scratch, protocol == Protocol::GrpcWebText)
        .map_err(|err| CallFailure::new(Code::Internal, format!("gRPC-Web reply: {err}")))?;
    if let Some(kept) = kept {
        let mut lines = HeaderMap::new();
        for (name, value) in &reply.trailers {
            if let (Ok(name), Ok(value)) = (
                http::header::HeaderName::from_bytes(name.as_bytes()),
                http::HeaderValue::from_str(value),
            ) {
                lines.append(name, value);
            }
        }
        keep_headers(&template.kept_headers, &lines, true, kept);
    }
    if reply.code != Code::Ok {
        return Err(CallFailure::new(
            reply.code,
            percent_decode(reply.message.as_bytes()),
        ));
    }
    match (reply.messages.len(), streams) {
        (0, false) => {
            return Err(CallFailure::new(
                Code::Internal,
                "status OK but no reply message",
            ))
        }
        (n, false) if n > 1 => {
            return Err(CallFailure::new(
                Code::Internal,
                format!("{n} reply messages on a unary call"),
            ))
        }
        _ => {}
    }
    scratch.clear();
    for range in &reply.messages {
        scratch.extend_from_slice(&reply.body[range.clone()]);
    }
    Ok(())
}

/// A Connect unary reply: 200 with the bare message (left in `scratch` as one gRPC frame),
/// or an error JSON.
fn connect_reply(
    head: &http::response::Parts,
    scratch: &mut Vec<u8>,
    template: &CallTemplate,
) -> Result<(), CallFailure> {
    let encoding = head.headers.get(http::header::CONTENT_ENCODING);
    match encoding.map(|value| value.as_bytes()) {
        None | Some(b"identity") => {}
        Some(b"gzip") if template.gzip => {
            // The body, error JSON or message, is one gzip stream.
            let limit = template.max_reply_message.unwrap_or(REPLY_INFLATE_LIMIT);
            *scratch = gunzip(scratch, limit).map_err(|err| {
                CallFailure::new(Code::Internal, format!("a gzip Connect reply: {err}"))
            })?;
        }
        Some(other) => {
            return Err(CallFailure::new(
                Code::Internal,
                format!(
                    "the reply's content-encoding is {:?}, which this call did not accept{}",
                    String::from_utf8_lossy(other),
                    if template.gzip {
                        ""
                    } else {
                        " (-e accepts gzip)"
                    }
                ),
            ))
        }
    }
    if head.status != StatusCode::OK {
        let failure = decode_connect_error(head.status.as_u16(), scratch);
        let mut message = with_details(&failure.message, failure.details);
        if template.connect_get && head.status == StatusCode::METHOD_NOT_ALLOWED {
            message.push_str(
                "; the server takes no GET for this method (Connect allows it for methods marked idempotency_level = NO_SIDE_EFFECTS): leave out --connect-get",
            );
        }
        return Err(CallFailure::new(failure.code, message));
    }
    let content_type = content_type(head);
    if !reply_content_type_fits_codec(Protocol::Connect, template.codec, content_type) {
        return Err(CallFailure::new(
            Code::Unknown,
            format!(
                "the reply's content-type is {}, not Connect's {}",
                described(content_type),
                Protocol::Connect.content_type_with(template.codec)
            ),
        ));
    }
    if u32::try_from(scratch.len()).is_err() {
        return Err(CallFailure::new(
            Code::ResourceExhausted,
            "a reply larger than a gRPC message can be",
        ));
    }
    *scratch = frame_message(scratch).to_vec();
    Ok(())
}

/// gRPC in a codec other than proto (`application/grpc+json`): read whole, as the other
/// protocols are; the status from the trailers, or the headers of a Trailers-Only reply.
fn grpc_reply(
    head: &http::response::Parts,
    scratch: &[u8],
    trailers: Option<&HeaderMap>,
    streams: bool,
    template: &CallTemplate,
) -> Result<(), CallFailure> {
    http_ok(head)?;
    match trailers {
        Some(trailers) => status_from(trailers)?,
        None => status_from(&head.headers)?,
    }
    let content_type = content_type(head);
    if !scratch.is_empty()
        && !reply_content_type_fits_codec(Protocol::Grpc, template.codec, content_type)
    {
        return Err(CallFailure::new(
            Code::Unknown,
            format!(
                "the reply's content-type is {}, not {}",
                described(content_type),
                Protocol::Grpc.content_type_with(template.codec)
            ),
        ));
    }
    if scratch.is_empty() && !streams {
        return Err(CallFailure::new(
            Code::Internal,
            "status OK but no reply message",
        ));
    }
    Ok(())
}

/// A reply whose HTTP status is not 200: the gRPC status HTTP's maps to.
fn http_ok(head: &http::response::Parts) -> Result<(), CallFailure> {
    if head.status == StatusCode::OK {
        return Ok(());
    }
    Err(CallFailure::new(
        Code::from_http_status(head.status.as_u16()),
        format!("HTTP status {}", head.status.as_u16()),
    ))
}

/// A reply's `content-type`, if it has one.
fn content_type(head: &http::response::Parts) -> Option<&[u8]> {
    head.headers
        .get(http::header::CONTENT_TYPE)
        .map(|value| value.as_bytes())
}

/// A Connect error's message with how many details it carried (` (1 error detail)`).
pub(super) fn with_details(message: &str, details: usize) -> String {
    match details {
        0 => message.to_owned(),
        1 => format!("{message} (1 error detail)"),
        n => format!("{message} ({n} error details)"),
    }
}

/// A header value as an error says it: quoted, or `missing`.
pub(super) fn described(value: Option<&[u8]>) -> String {
    value.map_or_else(
        || "missing".to_owned(),
        |v| format!("{:?}", String::from_utf8_lossy(v)),
    )
}

/// `--max-recv-message-size` over the message frames in `frames`.
fn check_message_sizes(frames: &[u8], max: usize) -> Result<(), CallFailure> {
    let mut at = 0usize;
    while let Some(header) = frames.get(at..at + 5) {
        let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        if length > max {
            return Err(CallFailure::new(
                Code::ResourceExhausted,
                format!(
                    "grpc: received message larger than max ({length} vs. {max}) (--max-recv-message-size)"
                ),
            ));
        }
        at += 5 + length;
    }
    Ok(())
}
