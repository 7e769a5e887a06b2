//! One call to the conformance reference server, over HTTP/1.1 or HTTP/2 (hyper's client
//! connection), its request built and its reply read with grpclab-core's protocol code.

use base64::Engine;
use bytes::Bytes;
use grpclab_core::framing::{frame_gzip, frame_message, gunzip};
use grpclab_core::protocol::{
    connect_get_query, decode_connect_error, decode_grpc_web, reply_content_type_fits_codec,
    stream_reply_content_type_fits, Codec, Protocol,
};
use grpclab_core::Code;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;

/// One call, as the runner asked for it.
pub struct CallSpec {
    /// HTTP/2 (h2c) rather than HTTP/1.1.
    pub http2: bool,
    /// A unary Connect call sent as GET, its message in the query.
    pub get: bool,
    /// The wire protocol.
    pub protocol: Protocol,
    /// The codec.
    pub codec: Codec,
    /// Messages gzip-compressed (in each protocol's own headers).
    pub gzip: bool,
    /// `http://host:port`.
    pub authority: String,
    /// `/service/method`.
    pub path: String,
    /// The method streams its replies.
    pub server_stream: bool,
    /// The method streams its requests (sent whole, then the half-close: client streams and
    /// half-duplex bidi).
    pub client_stream: bool,
    /// Request metadata.
    pub headers: Vec<(String, String)>,
    /// The request messages, encoded in `codec`.
    pub requests: Vec<Vec<u8>>,
    /// The call's deadline.
    pub timeout_ms: Option<u32>,
    /// When the client cancels the call.
    pub cancel: Cancel,
}

impl CallSpec {
    /// Either side streams: the protocol's stream framing and content type apply.
    fn streams(&self) -> bool {
        self.server_stream || self.client_stream
    }
}

/// When the client cancels a call (the request's `cancel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// Never.
    Never,
    /// This many milliseconds after the request is sent.
    AfterSendMs(u32),
    /// Once this many replies have come.
    AfterReplies(u32),
    /// Once the requests are handed over, before the half-close that would end them.
    BeforeCloseSend,
}

/// The most a compressed reply message may inflate to.
const INFLATE_LIMIT: usize = 64 << 20;

/// An RPC error: its code (gRPC's numbers, which the suite's `Code` shares), message and
/// details.
pub struct RpcError {
    /// The code.
    pub code: i32,
    /// The message, if the server gave one.
    pub message: Option<String>,
    /// The error's details.
    pub details: Vec<prost_types::Any>,
}

/// What a call came to.
#[derive(Default)]
pub struct Outcome {
    /// Response headers.
    pub headers: Vec<(String, String)>,
    /// Each reply message, in the call's codec.
    pub replies: Vec<Vec<u8>>,
    /// The error the call ended with.
    pub error: Option<RpcError>,
    /// Response trailers (gRPC's HTTP trailers, gRPC-Web's trailer frame, Connect's
    /// `trailer-` headers or end-stream metadata).
    pub trailers: Vec<(String, String)>,
    /// The HTTP status.
    pub http_status: Option<u16>,
}

impl Outcome {
    fn failed(code: Code, message: String) -> Outcome {
        Outcome {
            error: Some(RpcError {
                code: code as i32,
                message: Some(message),
                details: Vec::new(),
            }),
            ..Outcome::default()
        }
    }
}

/// `google.rpc.Status`, as `grpc-status-details-bin` carries it.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<prost_types::Any>,
}

/// Makes the call, within its deadline.
pub async fn run(spec: &CallSpec) -> Outcome {
    let started = std::time::Instant::now();
    let call = perform(spec);
    let Some(ms) = spec.timeout_ms else {
        return call.await;
    };
    let deadline = std::time::Duration::from_millis(u64::from(ms));
    let mut outcome = match tokio::time::timeout(deadline, call).await {
        Ok(outcome) => outcome,
        Err(_) => {
            return Outcome::failed(Code::DeadlineExceeded, format!("no reply within {ms} ms"))
        }
    };
    // A server may end the stream at the deadline (grpc-go resets it) just before the
    // client's own timer fires: a call that broke once its deadline had passed ended by it.
    if let Some(error) = outcome.error.as_mut() {
        if error.code == Code::Unavailable as i32 && started.elapsed() >= deadline {
            error.code = Code::DeadlineExceeded as i32;
        }
    }
    outcome
}

/// The raw reply: status, headers, body, trailers.
struct Exchange {
    status: u16,
    headers: Vec<(String, String)>,
    body: Bytes,
    trailers: Vec<(String, String)>,
    /// The client cancelled the call once its replies came (`body` holds them).
    cancelled: bool,
}

async fn perform(spec: &CallSpec) -> Outcome {
    let body = match request_body(spec) {
        Ok(body) => body,
        Err(err) => return Outcome::failed(Code::Internal, err),
    };
    let exchanged = match spec.cancel {
        Cancel::AfterSendMs(ms) => {
            let wait = std::time::Duration::from_millis(u64::from(ms));
            match tokio::time::timeout(wait, exchange(spec, body, None)).await {
                Ok(exchanged) => exchanged,
                Err(_) => {
                    return Outcome::failed(
                        Code::Canceled,
                        format!("cancelled by the client {ms} ms after sending"),
                    )
                }
            }
        }
        Cancel::BeforeCloseSend => {
            let (sent, on_sent) = tokio::sync::oneshot::channel();
            tokio::select! {
                // The server ended the call before the client cancelled it.
                exchanged = exchange(spec, body, Some(sent)) => exchanged,
                _ = on_sent => {
                    return Outcome::failed(
                        Code::Canceled,
                        "cancelled by the client before closing its requests".to_owned(),
                    )
                }
            }
        }
        _ => exchange(spec, body, None).await,
    };
    let exchange = match exchanged {
        Ok(exchange) => exchange,
        Err(err) => return Outcome::failed(Code::Unavailable, err),
    };
    if exchange.cancelled {
        let mut outcome = Outcome::failed(Code::Canceled, "cancelled by the client".to_owned());
        outcome.replies = unframe_all(&exchange.body).0;
        outcome.headers = exchange.headers;
        return outcome;
    }
    // Only a 200 carries the protocol's content type (an error status may carry anything).
    if exchange.status == 200 {
        if let Some(failed) = wrong_content_type(spec, &exchange.headers) {
            return failed;
        }
    }
    let mut outcome = match spec.protocol {
        Protocol::Grpc => grpc(exchange),
        Protocol::GrpcWeb | Protocol::GrpcWebText => grpc_web(exchange),
        Protocol::Connect if spec.streams() => connect_stream(exchange, spec.gzip),
        Protocol::Connect => connect_unary(exchange),
    };
    if !spec.server_stream {
        if outcome.error.is_some() {
            // A unary call that failed has no reply, whatever came before its status.
            outcome.replies.clear();
        } else if outcome.replies.len() != 1 {
            // gRPC's and Connect's rule for a unary call answered OK with no reply or more.
            outcome.error = Some(RpcError {
                code: Code::Unimplemented as i32,
                message: Some(format!(
                    "a unary call answered with {} reply messages",
                    outcome.replies.len()
                )),
                details: Vec::new(),
            });
            outcome.replies.clear();
        }
    }
    outcome
}

/// The request's body in its protocol: each message framed (flag 1 and compressed under
/// gzip), then as the protocol sends it (Connect unary: the bare message).
fn request_body(spec: &CallSpec) -> Result<Bytes, String> {
    let mut body = Vec::new();
    for message in &spec.requests {
        let framed = match spec.gzip {
            true => frame_gzip(message),
            false => frame_message(message),
        };
        let encoded = match spec.streams() {
            true => spec.protocol.stream_request_body(&framed),
            false => spec.protocol.request_body(&framed),
        }
        .map_err(|err| err.to_string())?;
        body.extend_from_slice(&encoded);
    }
    Ok(Bytes::from(body))
}

/// A request body: whole, or (`left_open`, a call cancelled before its half-close) its
/// messages without the end, `left_open` told once they are handed over.
struct RequestBody {
    data: Option<Bytes>,
    left_open: Option<tokio::sync::oneshot::Sender<()>>,
    ends: bool,
}

impl hyper::body::Body for RequestBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        if let Some(data) = self.data.take() {
            return std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(data))));
        }
        if self.ends {
            return std::task::Poll::Ready(None);
        }
        if let Some(sent) = self.left_open.take() {
            let _ = sent.send(());
        }
        // The end never comes: the call is dropped (cancelled) instead.
        std::task::Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.ends && self.data.is_none()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match (self.ends, &self.data) {
            (true, Some(data)) => hyper::body::SizeHint::with_exact(data.len() as u64),
            (true, None) => hyper::body::SizeHint::with_exact(0),
            (false, _) => hyper::body::SizeHint::default(),
        }
    }
}

async fn exchange(
    spec: &CallSpec,
    body: Bytes,
    left_open: Option<tokio::sync::oneshot::Sender<()>>,
) -> Result<Exchange, String> {
    let tcp = tokio::net::TcpStream::connect(&spec.authority)
        .await
        .map_err(|err| format!("cannot connect to {}: {err}", spec.authority))?;
    let _ = tcp.set_nodelay(true);
    let content_type = match spec.streams() {
        true => spec.protocol.stream_content_type_with(spec.codec),
        false => spec.protocol.content_type_with(spec.codec),
    };
    // Connect's GET: the message, codec, compression and version in the query, no body.
    let get = spec.get && spec.protocol == Protocol::Connect && !spec.streams();
    let path = match get {
        true => format!(
            "{}?{}",
            spec.path,
            connect_get_query(&body, spec.codec, spec.gzip)
        ),
        false => spec.path.clone(),
    };
    let uri = match spec.http2 {
        true => format!("http://{}{path}", spec.authority),
        false => path,
    };
    let mut request = http::Request::builder().uri(uri);
    request = match get {
        true => request.method(http::Method::GET),
        false => request
            .method(http::Method::POST)
            .header("content-type", content_type),
    };
    if !spec.http2 {
        request = request.header("host", &spec.authority);
    }
    for (name, value) in spec.protocol.request_headers() {
        if *name != "accept" && !get {
            request = request.header(*name, *value);
        }
    }
    if spec.gzip {
        for (name, value) in spec.protocol.compression_headers(spec.streams()) {
            if !(get && name == "content-encoding") {
                request = request.header(name, value);
            }
        }
    }
    if let Some(ms) = spec.timeout_ms {
        request = match spec.protocol {
            Protocol::Connect => request.header("connect-timeout-ms", ms.to_string()),
            _ => request.header("grpc-timeout", format!("{ms}m")),
        };
    }
    for (name, value) in &spec.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let body = match get {
        true => Bytes::new(),
        false => body,
    };
    let request = request
        .body(RequestBody {
            data: Some(body).filter(|body| !body.is_empty()),
            ends: left_open.is_none(),
            left_open,
        })
        .map_err(|err| format!("cannot build the request: {err}"))?;
    let io = TokioIo::new(tcp);
    let response = if spec.http2 {
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .map_err(|err| format!("HTTP/2 handshake: {err}"))?;
        tokio::spawn(connection);
        sender.send_request(request).await
    } else {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|err| format!("HTTP/1.1 handshake: {err}"))?;
        tokio::spawn(connection);
        sender.send_request(request).await
    }
    .map_err(|err| format!("the request failed: {err}"))?;
    let status = response.status().as_u16();
    let headers = pairs(response.headers());
    let stop_after = match spec.cancel {
        Cancel::AfterReplies(n) => Some(n as usize),
        _ => None,
    };
    let mut body = response.into_body();
    let mut received = Vec::new();
    let mut trailers = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| format!("the reply's body: {err}"))?;
        match frame.into_data() {
            Ok(data) => received.extend_from_slice(&data),
            Err(frame) => {
                if let Some(map) = frame.trailers_ref() {
                    trailers = pairs(map);
                }
            }
        }
        if let Some(end) = stop_after.and_then(|n| end_of_replies(&received, n)) {
            // Cancelled: the connection is dropped with the rest unread.
            received.truncate(end);
            return Ok(Exchange {
                status,
                headers,
                body: Bytes::from(received),
                trailers,
                cancelled: true,
            });
        }
    }
    Ok(Exchange {
        status,
        headers,
        body: Bytes::from(received),
        trailers,
        cancelled: false,
    })
}

/// Where the `n`th whole reply message of an enveloped body ends (gRPC-Web's trailer frame,
/// flag 0x80, and Connect's end-stream message, flag 0x02, are not replies); `None` until
/// it has come.
fn end_of_replies(body: &[u8], n: usize) -> Option<usize> {
    let mut seen = 0;
    let mut rest = body;
    while seen < n {
        let (flags, _, after) = next_frame(rest).ok()??;
        if flags & 0x82 == 0 {
            seen += 1;
        }
        rest = after;
    }
    Some(body.len() - rest.len())
}

/// A frame: its flags, its payload, and the bytes after it.
type Frame<'a> = (u8, &'a [u8], &'a [u8]);

/// The first frame of an enveloped body (gRPC's, gRPC-Web's, Connect's: a flag byte, a
/// 4-byte length, the payload); `None` for an empty body, an error for one cut short.
fn next_frame(body: &[u8]) -> Result<Option<Frame<'_>>, String> {
    if body.is_empty() {
        return Ok(None);
    }
    let Some(prefix) = body.get(..5) else {
        return Err(format!("{} bytes after the last whole message", body.len()));
    };
    let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    let Some(payload) = body.get(5..5 + length) else {
        return Err("a message cut short".to_owned());
    };
    Ok(Some((prefix[0], payload, &body[5 + length..])))
}

fn pairs(map: &http::HeaderMap) -> Vec<(String, String)> {
    map.iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn find<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(seen, _)| seen.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// The messages of a gRPC-framed body, each inflated if flagged; with what broke the body,
/// if something did (the messages before the break are kept: a stream's replies count).
fn unframe_all(body: &[u8]) -> (Vec<Vec<u8>>, Option<String>) {
    let mut messages = Vec::new();
    let mut rest = body;
    loop {
        match next_frame(rest).and_then(|frame| {
            frame
                .map(|(flags, payload, after)| Ok((inflated(flags & 1 == 1, payload)?, after)))
                .transpose()
        }) {
            Ok(Some((message, after))) => {
                messages.push(message);
                rest = after;
            }
            Ok(None) => return (messages, None),
            Err(err) => return (messages, Some(err)),
        }
    }
}

fn internal(message: String) -> Option<RpcError> {
    Some(RpcError {
        code: Code::Internal as i32,
        message: Some(message),
        details: Vec::new(),
    })
}

/// A reply whose `content-type` is not its protocol's and codec's: Internal when it is the
/// protocol's with another codec, Unknown when it is not the protocol's at all (as the gRPC
/// and Connect specs map an unexpected content type).
fn wrong_content_type(spec: &CallSpec, headers: &[(String, String)]) -> Option<Outcome> {
    let content_type = find(headers, "content-type");
    let fits = match spec.streams() {
        true => stream_reply_content_type_fits(
            spec.protocol,
            spec.codec,
            content_type.map(str::as_bytes),
        ),
        false => reply_content_type_fits_codec(
            spec.protocol,
            spec.codec,
            content_type.map(str::as_bytes),
        ),
    };
    if fits {
        return None;
    }
    let value = content_type.unwrap_or_default().to_ascii_lowercase();
    let family = match (spec.protocol, spec.streams()) {
        (Protocol::Grpc, _) => {
            value.starts_with("application/grpc") && !value.starts_with("application/grpc-web")
        }
        (Protocol::GrpcWeb | Protocol::GrpcWebText, _) => value.starts_with("application/grpc-web"),
        (Protocol::Connect, true) => value.starts_with("application/connect+"),
        (Protocol::Connect, false) => value == "application/json" || value == "application/proto",
    };
    let code = match family {
        true => Code::Internal,
        false => Code::Unknown,
    };
    let mut outcome = Outcome::failed(
        code,
        format!("a reply of content-type {value:?}, not {}", spec.protocol),
    );
    outcome.headers = headers.to_vec();
    Some(outcome)
}

fn inflated(compressed: bool, message: &[u8]) -> Result<Vec<u8>, String> {
    match compressed {
        true => gunzip(message, INFLATE_LIMIT).map_err(|err| err.to_string()),
        false => Ok(message.to_vec()),
    }
}

/// The error a gRPC status (from trailers or headers) says; `None` for OK.
fn grpc_status(metadata: &[(String, String)]) -> Option<RpcError> {
    let Some(status) = find(metadata, "grpc-status") else {
        return Some(RpcError {
            code: Code::Internal as i32,
            message: Some("the reply ended without grpc-status".to_owned()),
            details: Vec::new(),
        });
    };
    let code = Code::from_header(status.as_bytes()) as i32;
    if code == 0 {
        return None;
    }
    let message = find(metadata, "grpc-message")
        .map(|value| grpclab_h2::grpc::percent_decode(value.as_bytes()));
    let details = find(metadata, "grpc-status-details-bin")
        .and_then(|value| {
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(value.trim_end_matches('='))
                .ok()
        })
        .and_then(|bytes| RpcStatus::decode(bytes.as_slice()).ok())
        .map(|status| status.details)
        .unwrap_or_default();
    Some(RpcError {
        code,
        message,
        details,
    })
}

/// An HTTP status other than 200 on a gRPC or gRPC-Web call: the code the gRPC spec maps it to.
fn http_failure(exchange: &Exchange) -> Option<Outcome> {
    if exchange.status == 200 {
        return None;
    }
    let mut outcome = Outcome::failed(
        Code::from_http_status(exchange.status),
        format!("HTTP status {}", exchange.status),
    );
    outcome.headers = exchange.headers.clone();
    outcome.http_status = Some(exchange.status);
    Some(outcome)
}

fn grpc(exchange: Exchange) -> Outcome {
    if let Some(failed) = http_failure(&exchange) {
        return failed;
    }
    // Trailers-only: the status in the headers, with no body and no trailers; otherwise the
    // headers' grpc-status is not the status.
    let trailers_only = exchange.body.is_empty()
        && exchange.trailers.is_empty()
        && find(&exchange.headers, "grpc-status").is_some();
    let metadata = match trailers_only {
        true => exchange.headers.clone(),
        false => exchange.trailers.clone(),
    };
    let (replies, broken) = unframe_all(&exchange.body);
    let error = match broken {
        Some(err) => internal(err),
        None => grpc_status(&metadata),
    };
    Outcome {
        headers: exchange.headers,
        replies,
        error,
        trailers: metadata,
        http_status: Some(exchange.status),
    }
}

fn grpc_web(exchange: Exchange) -> Outcome {
    if let Some(failed) = http_failure(&exchange) {
        return failed;
    }
    if exchange.body.is_empty() && find(&exchange.headers, "grpc-status").is_some() {
        let error = grpc_status(&exchange.headers);
        return Outcome {
            trailers: exchange.headers.clone(),
            headers: exchange.headers,
            error,
            http_status: Some(exchange.status),
            ..Outcome::default()
        };
    }
    let mut outcome = Outcome {
        headers: exchange.headers,
        http_status: Some(exchange.status),
        ..Outcome::default()
    };
    let reply = match decode_grpc_web(&exchange.body, false) {
        Ok(reply) => reply,
        Err(err) => {
            // The whole messages before the break still count.
            let mut rest = &exchange.body[..];
            while let Ok(Some((flags, payload, after))) = next_frame(rest) {
                match inflated(flags & 1 == 1, payload) {
                    Ok(message) if flags & 0x80 == 0 => outcome.replies.push(message),
                    _ => break,
                }
                rest = after;
            }
            outcome.error = internal(err.to_string());
            return outcome;
        }
    };
    for range in &reply.messages {
        let (mut messages, broken) = unframe_all(reply.body.get(range.clone()).unwrap_or_default());
        outcome.replies.append(&mut messages);
        if let Some(err) = broken {
            outcome.error = internal(err);
            return outcome;
        }
    }
    outcome.trailers = reply.trailers;
    outcome.error = grpc_status(&outcome.trailers);
    outcome
}

/// A Connect error JSON's details, as `Any`s (`type` and unpadded base64 `value`).
fn connect_details(error: &serde_json::Value) -> Vec<prost_types::Any> {
    let Some(details) = error["details"].as_array() else {
        return Vec::new();
    };
    details
        .iter()
        .filter_map(|detail| {
            let type_name = detail["type"].as_str()?;
            let value = detail["value"].as_str()?;
            let value = base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(value.trim_end_matches('='))
                .ok()?;
            Some(prost_types::Any {
                type_url: format!("type.googleapis.com/{type_name}"),
                value,
            })
        })
        .collect()
}

/// A Connect error from its JSON (`decode_connect_error` for the code), with its details.
fn connect_error(status: u16, body: &[u8]) -> RpcError {
    let failure = decode_connect_error(status, body);
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let message = match json["message"].as_str() {
        Some(message) => Some(message.to_owned()),
        None if json["code"].is_string() => None,
        None => Some(failure.message),
    };
    RpcError {
        code: failure.code as i32,
        message,
        details: connect_details(&json),
    }
}

fn connect_unary(exchange: Exchange) -> Outcome {
    let (trailers, headers): (Vec<_>, Vec<_>) = exchange
        .headers
        .iter()
        .cloned()
        .partition(|(name, _)| name.starts_with("trailer-"));
    let trailers = trailers
        .into_iter()
        .map(|(name, value)| (name["trailer-".len()..].to_owned(), value))
        .collect();
    let gzip = find(&exchange.headers, "content-encoding") == Some("gzip");
    let mut outcome = Outcome {
        headers,
        trailers,
        http_status: Some(exchange.status),
        ..Outcome::default()
    };
    let body = match inflated(gzip, &exchange.body) {
        Ok(body) => body,
        Err(err) => {
            outcome.error = Some(RpcError {
                code: Code::Internal as i32,
                message: Some(format!("the reply's gzip body: {err}")),
                details: Vec::new(),
            });
            return outcome;
        }
    };
    if exchange.status == 200 {
        outcome.replies.push(body);
    } else {
        outcome.error = Some(connect_error(exchange.status, &body));
    }
    outcome
}

fn connect_stream(exchange: Exchange, asked_gzip: bool) -> Outcome {
    let gzip = asked_gzip && find(&exchange.headers, "connect-content-encoding") == Some("gzip");
    let mut outcome = Outcome {
        headers: exchange.headers.clone(),
        http_status: Some(exchange.status),
        ..Outcome::default()
    };
    if exchange.status != 200 {
        outcome.error = Some(connect_error(exchange.status, &exchange.body));
        return outcome;
    }
    let mut rest = &exchange.body[..];
    let mut ended = false;
    while let Ok(Some((flags, payload, after))) = next_frame(rest) {
        rest = after;
        if flags & 1 == 1 && !gzip {
            outcome.error = internal("a compressed message, but no encoding was agreed".to_owned());
            return outcome;
        }
        let payload = match inflated(flags & 1 == 1, payload) {
            Ok(payload) => payload,
            Err(err) => {
                outcome.error = internal(err);
                return outcome;
            }
        };
        if flags & 2 == 0 {
            outcome.replies.push(payload);
            continue;
        }
        ended = true;
        let end: serde_json::Value = serde_json::from_slice(&payload).unwrap_or_default();
        if let Some(metadata) = end["metadata"].as_object() {
            for (name, values) in metadata {
                for value in values.as_array().into_iter().flatten() {
                    if let Some(value) = value.as_str() {
                        outcome.trailers.push((name.clone(), value.to_owned()));
                    }
                }
            }
        }
        if end["error"].is_object() {
            let error = serde_json::to_vec(&end["error"]).unwrap_or_default();
            outcome.error = Some(connect_error(200, &error));
            // An end-stream error's code is the JSON's; with none, Unknown.
            if end["error"]["code"].as_str().is_none() {
                if let Some(error) = outcome.error.as_mut() {
                    error.code = Code::Unknown as i32;
                }
            }
        }
        break;
    }
    if !ended && outcome.error.is_none() {
        outcome.error = internal("the stream ended without its end-stream message".to_owned());
    }
    outcome
}
