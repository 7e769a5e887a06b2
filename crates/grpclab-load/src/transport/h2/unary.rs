//! One unary gRPC call over an h2 sender, and what its outcome means in gRPC terms.

use bytes::Bytes;
use grpclab_core::framing::unframe_maybe_gzip;
use grpclab_core::Code;
use h2::client::SendRequest;
use http::{HeaderMap, Request, StatusCode, Uri};

use crate::config::ReplyValidator;
use crate::outcome::{CallFailure, CONNECTION_LOST, REPLY_INFLATE_LIMIT};
use grpclab_h2::client::{CallHeaders, ReplyHeader};
use grpclab_h2::grpc::percent_decode;

/// What every call on a thread shares: each method's request line and headers, built once.
pub(crate) struct CallTemplate {
    /// By method (`LoadConfig::methods`' order): its URI, and the run's headers then its own.
    pub methods: Vec<(Uri, HeaderMap)>,
    pub validator: Option<ReplyValidator>,
    /// Requests are gzip-compressed and gzip replies are accepted (`-e`).
    pub gzip: bool,
    /// `--max-recv-message-size`.
    pub max_reply_message: Option<usize>,
    /// Response header and trailer names flow steps extract (see
    /// `LoadConfig::kept_reply_headers`).
    pub kept_headers: Vec<Bytes>,
    /// By method: what a flow step calling it asks (a server stream's replies may end OK
    /// with no message at all).
    pub step_traits: Vec<crate::flow::StepTraits>,
    /// The wire protocol (gRPC-Web and Connect: see [`super::web`]).
    pub protocol: grpclab_core::protocol::Protocol,
    /// How messages are encoded (the reply's content type must say the same).
    pub codec: grpclab_core::protocol::Codec,
    /// Unary Connect calls go as GET, their message in the query (`--connect-get`).
    pub connect_get: bool,
}

impl CallTemplate {
    /// A fresh request. h2 takes requests by value, so the header map is cloned per call: the
    /// one per-call allocation left in our code on this transport, owned by http/h2's API (our
    /// engine sends a cached header block instead).
    /// `call_headers` (a call's own, from metadata templates) are added after the template's.
    pub(crate) fn request(&self, method: u32, call_headers: &CallHeaders) -> Request<()> {
        let mut request = Request::new(());
        *request.method_mut() = http::Method::POST;
        // Built for every method before the run; an index outside them sends the first.
        if let Some((uri, headers)) = self
            .methods
            .get(method as usize)
            .or_else(|| self.methods.first())
        {
            *request.uri_mut() = uri.clone();
            *request.headers_mut() = headers.clone();
        }
        for (name, value) in call_headers {
            // Checked before the run (names and call 0's values); a value the actions made
            // unsendable cannot occur, and would be left out rather than fail the call.
            if let (Ok(name), Ok(value)) = (
                http::header::HeaderName::from_bytes(name),
                http::HeaderValue::from_maybe_shared(value.clone()),
            ) {
                request.headers_mut().append(name, value);
            }
        }
        request
    }
}

impl CallTemplate {
    /// The request for one unary call carrying `body` (the protocol's request body): a POST
    /// and the body to send after it, or with `--connect-get` a GET whose query holds the
    /// message, and no body.
    pub(crate) fn request_with_body(
        &self,
        method: u32,
        call_headers: &CallHeaders,
        body: Bytes,
    ) -> Result<(Request<()>, Option<Bytes>), CallFailure> {
        let mut request = self.request(method, call_headers);
        if !self.connect_get {
            return Ok((request, Some(body)));
        }
        let query = grpclab_core::protocol::connect_get_query(&body, self.codec, self.gzip);
        let uri = format!("{}?{query}", request.uri());
        *request.uri_mut() = uri.parse().map_err(|err| {
            CallFailure::new(
                grpclab_core::Code::Internal,
                format!(
                    "a GET request's URL cannot be made ({err}; {} bytes)",
                    uri.len()
                ),
            )
        })?;
        *request.method_mut() = http::Method::GET;
        Ok((request, None))
    }
}

/// The `names` among `headers`, added to `kept` (`trailer`: they are the trailers).
pub(super) fn keep_headers(
    names: &[Bytes],
    headers: &HeaderMap,
    trailer: bool,
    kept: &mut Vec<ReplyHeader>,
) {
    for name in names {
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        for value in headers.get_all(name) {
            kept.push(ReplyHeader {
                trailer,
                name: Bytes::copy_from_slice(name.as_bytes()),
                value: Bytes::copy_from_slice(value.as_bytes()),
            });
        }
    }
}

/// Sends one gRPC call (binary codec) with `body` (a framed request) and reads its reply and
/// trailers. `scratch` collects the reply for validation, and keeps it (framed) when `kept`
/// is given (a flow step that reads it), which then receives the template's kept headers
/// and trailers; `scratch` is reused across calls.
pub(super) async fn grpc_call(
    sender: &mut SendRequest<Bytes>,
    template: &CallTemplate,
    method: u32,
    body: Bytes,
    call_headers: &CallHeaders,
    scratch: &mut Vec<u8>,
    mut kept: Option<&mut Vec<ReplyHeader>>,
) -> Result<(), CallFailure> {
    let (head, mut reply) = send(
        sender,
        template,
        (method, body, call_headers),
        kept.as_deref_mut(),
    )
    .await?;
    if head.status != StatusCode::OK {
        return Err(CallFailure::new(
            Code::from_http_status(head.status.as_u16()),
            format!("HTTP status {}", head.status.as_u16()),
        ));
    }
    // Trailers-Only: the status came with the headers (typical of an immediate error). A
    // unary call that ends OK must carry exactly one reply message: OK without one is
    // Internal (gRPC's rule for unary calls, as our engine applies it too); a server stream
    // may carry none.
    let streams = template
        .step_traits
        .get(method as usize)
        .is_some_and(|traits| traits.streams);
    if head.headers.contains_key("grpc-status") {
        status_from(&head.headers)?;
        if streams {
            scratch.clear();
            return Ok(());
        }
        return Err(CallFailure::new(
            Code::Internal,
            "status OK but no reply message",
        ));
    }
    scratch.clear();
    let mut received = 0usize;
    while let Some(chunk) = reply.data().await {
        let chunk = chunk.map_err(failure_from_h2)?;
        received += chunk.len();
        if let Some(max) = template.max_reply_message {
            // Past the prefix and `max` bytes the message is too large: dropping the stream
            // resets it (CANCEL), as grpc-go's client gives up on it.
            if received > max.saturating_add(5) {
                return Err(CallFailure::new(
                    Code::ResourceExhausted,
                    format!(
                        "grpc: received message larger than max ({}+ vs. {max}) (--max-recv-message-size)",
                        received - 5
                    ),
                ));
            }
        }
        // Give the window back at once, so the server can keep sending.
        let _ = reply.flow_control().release_capacity(chunk.len());
        if kept.is_some() || template.validator.is_some() {
            scratch.extend_from_slice(&chunk);
        }
    }
    let trailers = reply.trailers().await.map_err(failure_from_h2)?;
    let Some(trailers) = trailers else {
        return Err(CallFailure::new(
            Code::Internal,
            "the server ended the stream without trailers (no grpc-status)",
        ));
    };
    if let Some(kept) = kept {
        keep_headers(&template.kept_headers, &trailers, true, kept);
    }
    status_from(&trailers)?;
    if received == 0 && !streams {
        return Err(CallFailure::new(
            Code::Internal,
            "status OK but no reply message",
        ));
    }
    validate(template, scratch)
}

/// `--validate`: the reply (gRPC frames in `scratch`) checked by the template's validator.
pub(super) fn validate(template: &CallTemplate, scratch: &[u8]) -> Result<(), CallFailure> {
    if let Some(validator) = &template.validator {
        let message = unframe_maybe_gzip(scratch, template.gzip, REPLY_INFLATE_LIMIT)
            .map_err(|err| CallFailure::new(Code::Internal, format!("invalid reply: {err}")))?;
        validator(&message).map_err(|reason| {
            CallFailure::new(Code::Internal, format!("invalid reply: {reason}"))
        })?;
    }
    Ok(())
}

/// Sends one request (`method`, its `body` as the protocol sends it, its own headers) and
/// waits for the reply's head, whose kept headers go to `kept`.
pub(super) async fn send(
    sender: &mut SendRequest<Bytes>,
    template: &CallTemplate,
    (method, body, call_headers): (u32, Bytes, &CallHeaders),
    kept: Option<&mut Vec<ReplyHeader>>,
) -> Result<(http::response::Parts, h2::RecvStream), CallFailure> {
    std::future::poll_fn(|cx| sender.poll_ready(cx))
        .await
        .map_err(failure_from_h2)?;
    let (request, body) = template.request_with_body(method, call_headers, body)?;
    let (response, mut request_body) = sender
        .send_request(request, body.is_none())
        .map_err(failure_from_h2)?;
    if let Some(body) = body {
        request_body
            .send_data(body, true)
            .map_err(failure_from_h2)?;
    }
    let response = response.await.map_err(failure_from_h2)?;
    let (head, reply) = response.into_parts();
    if let Some(kept) = kept {
        keep_headers(&template.kept_headers, &head.headers, false, kept);
    }
    Ok((head, reply))
}

/// Reads `grpc-status` and `grpc-message` from headers or trailers.
pub(crate) fn status_from(headers: &HeaderMap) -> Result<(), CallFailure> {
    let Some(status) = headers.get("grpc-status") else {
        return Err(CallFailure::new(
            Code::Internal,
            "the server sent trailers without grpc-status",
        ));
    };
    match Code::from_header(status.as_bytes()) {
        Code::Ok => Ok(()),
        code => {
            let message = headers
                .get("grpc-message")
                .map(|m| percent_decode(m.as_bytes()))
                .unwrap_or_default();
            Err(CallFailure::new(code, message))
        }
    }
}

/// Maps an h2 error to the status a gRPC client reports (the gRPC spec's mapping of RST_STREAM
/// codes; transport failures are Unavailable).
pub(crate) fn failure_from_h2(err: h2::Error) -> CallFailure {
    if let (true, Some(reason)) = (err.is_reset(), err.reason()) {
        let code = match reason {
            h2::Reason::REFUSED_STREAM => Code::Unavailable,
            h2::Reason::CANCEL => Code::Canceled,
            h2::Reason::ENHANCE_YOUR_CALM => Code::ResourceExhausted,
            h2::Reason::INADEQUATE_SECURITY => Code::PermissionDenied,
            _ => Code::Internal,
        };
        let by = if err.is_remote() {
            "the server"
        } else {
            "the client (the server broke the protocol)"
        };
        return CallFailure::new(code, format!("stream reset by {by}: {reason:?}"));
    }
    // h2 refusing a use of a stream that has already ended (the server closed it): this
    // call's problem, not the connection's. Reported as Internal, and the stream goes on.
    if err.reason().is_none() && !err.is_io() {
        return CallFailure::new(Code::Internal, format!("stream error: {err}"));
    }
    CallFailure {
        code: Code::Unavailable,
        message: if err.is_go_away() && err.is_remote() {
            "the server sent GOAWAY".to_owned()
        } else if err.is_go_away() {
            // h2 itself closed the connection: the server broke the protocol.
            format!("the client closed the connection: {err}")
        } else if err.is_io() {
            CONNECTION_LOST.to_owned()
        } else {
            err.to_string()
        },
        connection_lost: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_read_from_trailers() {
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        assert!(status_from(&trailers).is_ok());
        trailers.insert("grpc-status", "13".parse().unwrap());
        trailers.insert("grpc-message", "boom%21".parse().unwrap());
        let failure = status_from(&trailers).unwrap_err();
        assert_eq!(failure.code, Code::Internal);
        assert_eq!(failure.message, "boom!");
    }
}
