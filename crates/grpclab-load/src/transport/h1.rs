//! gRPC-Web and Connect over HTTP/1.1 (`--http1`), as browsers send them: each connection
//! of the run is a keep-alive HTTP/1.1 connection (hyper's client) with one request in flight
//! at a time, and the streams it carries (`-c` over `--connections`) take turns on it in the
//! order they asked (tokio's fair mutex), as a browser's requests queue for its connections
//! to an origin. A call's latency counts from when it asked for its turn. Over TLS the
//! client offers HTTP/1.1 alone (ALPN `http/1.1`).
//!
//! Requests carry the protocol's headers and body as on HTTP/2; replies are read whole and
//! judged by the same code (`h2::judge`). A connection found closed is made again by the
//! stream whose turn it is, and counted as a reconnection.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use grpclab_core::tls::TlsClient;
use grpclab_core::Code;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::task::JoinHandle;

use super::dial::{connect_tcp, tls_handshake};
use super::h2::streaming::{check_head, Replies, ReplyBody, ServerStream, StreamTally};
use super::h2::{
    call_template, judge, record_call, until_intended, wait_for_turn, within_deadline,
    AbandonGuard, CallTemplate, StreamSlot,
};
use super::Reconnects;
use crate::config::{CallShape, LoadConfig};
use crate::outcome::{CallFailure, CONNECTION_LOST};
use crate::schedule::Ticket;
use crate::thread::ThreadState;

/// One HTTP/1.1 connection's sender.
type Sender = SendRequest<Full<Bytes>>;

/// One thread's HTTP/1.1 connections, opened before the run starts.
pub(crate) struct Connections {
    template: Rc<CallTemplate>,
    dialer: Rc<Dialer>,
    open: Vec<(usize, Sender)>,
}

/// Opens this thread's connections (`indexes`) before the run starts.
pub(crate) async fn open(
    config: &LoadConfig,
    indexes: impl Iterator<Item = usize>,
) -> Result<Connections, String> {
    let template = Rc::new(call_template(config)?);
    let dialer = Rc::new(Dialer::new(config));
    let mut open = Vec::new();
    for index in indexes {
        open.push((index, dialer.connect(config.target_for(index)).await?));
    }
    Ok(Connections {
        template,
        dialer,
        open,
    })
}

/// How a thread makes its HTTP/1.1 connections: TCP, then TLS offering HTTP/1.1 alone (ALPN
/// `http/1.1`, as a browser's fetch would settle on) when the run has TLS.
struct Dialer {
    tls: Option<TlsClient>,
    timeout: std::time::Duration,
}

impl Dialer {
    fn new(config: &LoadConfig) -> Dialer {
        let tls = config.tls.as_ref().map(|tls| {
            let mut rustls = (*tls.config).clone();
            rustls.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
            TlsClient {
                config: std::sync::Arc::new(rustls),
                ..tls.clone()
            }
        });
        Dialer {
            tls,
            timeout: config.connect_timeout,
        }
    }

    /// A TCP connection (TCP_NODELAY) to `target`, TLS over it if the run has TLS, and
    /// HTTP/1.1 over that; its connection task runs on this thread until the connection
    /// closes.
    async fn connect(&self, target: std::net::SocketAddr) -> Result<Sender, String> {
        let tcp = connect_tcp(target, self.timeout).await?;
        match &self.tls {
            None => handshake(tcp, target).await,
            Some(tls) => handshake(tls_handshake(tcp, tls, self.timeout).await?, target).await,
        }
    }
}

/// The ALPN id of HTTP/1.1 (RFC 7301 §6).
const ALPN_HTTP1: &[u8] = b"http/1.1";

/// HTTP/1.1 over `io`, its connection driven by a task on this thread: its end (the server
/// closed it, or it broke) shows to the next call as a closed sender.
async fn handshake<T>(io: T, target: std::net::SocketAddr) -> Result<Sender, String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|err| format!("HTTP/1.1 with {target} failed: {err}"))?;
    tokio::task::spawn_local(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// A connection the streams take turns on, and what it needs to be made again.
struct Turns {
    index: usize,
    dialer: Rc<Dialer>,
    sender: tokio::sync::Mutex<Option<Sender>>,
    address: usize,
    /// Connections made again after the server closed one, or it broke.
    reconnects: Rc<Cell<u64>>,
    /// Connections made again after this client closed one (a stream it ended early).
    planned: Rc<Cell<u64>>,
    /// The connection was closed by this client: the next one made counts as planned.
    closed_by_client: Cell<bool>,
}

/// Starts a task per stream slot, each taking turns on its connection.
pub(crate) fn start(
    connections: Connections,
    thread: &Rc<ThreadState>,
    reconnects: &Reconnects,
) -> Vec<JoinHandle<()>> {
    let config = &thread.shared.config;
    let mut streams = Vec::new();
    for (index, sender) in connections.open {
        let turns = Rc::new(Turns {
            index,
            dialer: Rc::clone(&connections.dialer),
            sender: tokio::sync::Mutex::new(Some(sender)),
            address: config.address_index(index),
            reconnects: Rc::clone(&reconnects.unplanned),
            planned: Rc::clone(&reconnects.planned),
            closed_by_client: Cell::new(false),
        });
        for slot in 0..config.streams_on(index) {
            streams.push(tokio::task::spawn_local(stream_loop(
                Rc::clone(thread),
                Rc::clone(&connections.template),
                Rc::clone(&turns),
                StreamSlot {
                    connection: index,
                    index: slot,
                },
            )));
        }
    }
    streams
}

/// One stream slot: take a ticket, (open loop: wait for its time), wait for the connection's
/// turn, call, record, repeat.
async fn stream_loop(
    thread: Rc<ThreadState>,
    template: Rc<CallTemplate>,
    turns: Rc<Turns>,
    slot: StreamSlot,
) {
    let mut scratch = Vec::new();
    let stop = thread.schedule.stop_token().clone();
    let timeout = thread.shared.config.timeout;
    loop {
        // A concurrency schedule lets the first few streams of each connection run.
        if stop.is_cancelled() || !wait_for_turn(&thread, slot, &stop).await {
            return;
        }
        let Ticket::Send { intended, measured } = thread.take_ticket(Instant::now) else {
            return;
        };
        if !until_intended(intended, &stop).await {
            thread.drop_ticket(measured);
            return;
        }
        thread.ticket_due(intended, measured);
        let method = thread.choose_method(measured);
        let number = thread.call_number();
        let headers = thread
            .call_headers(method, number, &[])
            .map_or_else(Vec::new, |headers| *headers);
        let sent = Instant::now();
        let outcome = if thread.shared.config.shape == CallShape::ServerStreaming {
            let mut tally = AbandonGuard::new(&thread, measured);
            let message = first_message(&thread, number);
            let call = stream_call(
                &thread,
                &template,
                &turns,
                (message, &headers),
                &mut tally.tally,
            );
            let outcome = within_deadline(timeout, call).await;
            tally.record();
            outcome
        } else {
            let body = thread.next_body(method, number);
            let call = one_call(
                &thread,
                &template,
                &turns,
                (method, body, &headers),
                &mut scratch,
            );
            within_deadline(timeout, call).await
        };
        record_call(
            &thread,
            &outcome,
            (intended, sent, measured),
            turns.address,
            method,
        );
    }
}

/// A stream's turn on its connection. A turn dropped before its exchange finished (the
/// call's deadline passed, or the client ended a stream early) leaves a reply owed on the
/// connection, which HTTP/1.1 cannot skip: hyper closes it, and this turn forgets it, so the
/// next call makes a new one (counted as planned) rather than wait behind the old reply or
/// fail on the closing connection.
struct Turn<'a> {
    sender: tokio::sync::MutexGuard<'a, Option<Sender>>,
    turns: &'a Turns,
    /// The reply was read to its end: the connection may carry the next call.
    finished: bool,
}

impl Turn<'_> {
    /// The sender, ready (checked by `take_turn`).
    fn sender(&mut self) -> Result<&mut Sender, CallFailure> {
        self.sender.as_mut().ok_or_else(|| lost(None))
    }

    /// The connection broke under the call: forgotten, and the next call's new connection
    /// counts as unplanned (the client did not close it).
    fn lost(&mut self, err: Option<&hyper::Error>) -> CallFailure {
        self.sender.take();
        lost(err)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if !self.finished && self.sender.take().is_some() {
            self.turns.closed_by_client.set(true);
        }
    }
}

/// The connection's turn, with a sender ready to send: the connection made again first if it
/// has closed (counted as planned when this client closed it, as unplanned otherwise).
async fn take_turn<'a>(thread: &ThreadState, turns: &'a Turns) -> Result<Turn<'a>, CallFailure> {
    let mut turn = turns.sender.lock().await;
    if turn.as_ref().is_none_or(Sender::is_closed) {
        *turn = None;
        let config = &thread.shared.config;
        let sender = turns
            .dialer
            .connect(config.target_for(turns.index))
            .await
            .map_err(|reason| CallFailure {
                code: Code::Unavailable,
                message: reason,
                connection_lost: true,
            })?;
        let count = match turns.closed_by_client.replace(false) {
            true => &turns.planned,
            false => &turns.reconnects,
        };
        count.set(count.get() + 1);
        *turn = Some(sender);
    }
    match turn.as_mut() {
        Some(sender) => sender.ready().await.map_err(|err| lost(Some(&err)))?,
        None => return Err(lost(None)),
    }
    Ok(Turn {
        sender: turn,
        turns,
        finished: false,
    })
}

/// One call on its connection's turn.
async fn one_call(
    thread: &ThreadState,
    template: &CallTemplate,
    turns: &Turns,
    (method, body, headers): (u32, Bytes, &grpclab_h2::client::CallHeaders),
    scratch: &mut Vec<u8>,
) -> Result<(), CallFailure> {
    let request_body = template
        .protocol
        .request_body(&body)
        .map_err(|err| CallFailure::new(Code::Internal, err.0))?;
    let (request, request_body) = template.request_with_body(method, headers, request_body)?;
    let mut turn = take_turn(thread, turns).await?;
    let response = turn
        .sender()?
        .send_request(origin_form(request, request_body))
        .await;
    let response = response.map_err(|err| turn.lost(Some(&err)))?;
    let (head, reply) = response.into_parts();
    let collected = reply.collect().await.map_err(|err| turn.lost(Some(&err)))?;
    // The turn ends with the reply read: the next stream may send.
    turn.finished = true;
    drop(turn);
    let trailers = collected.trailers().cloned();
    scratch.clear();
    scratch.extend_from_slice(&collected.to_bytes());
    judge(template, method, (&head, trailers.as_ref()), scratch, None)
}

/// A server stream's request message: the run's first (a rendered one under
/// `--stream-dynamic-messages` with a template), as the HTTP/2 transport sends it.
fn first_message(thread: &ThreadState, number: Option<u64>) -> Bytes {
    let config = &thread.shared.config;
    if config.stream.dynamic_messages
        && config.methods.first().is_some_and(|m| m.renderer.is_some())
    {
        return thread.dynamic_message(0);
    }
    let call_messages = thread.call_messages(number);
    call_messages
        .as_deref()
        .unwrap_or(thread.requests())
        .first()
        .cloned()
        .unwrap_or_default()
}

/// One server-streaming call on its connection's turn, which it keeps until the stream ends:
/// its replies counted as they arrive into `tally`. A stream the client ends early
/// (`--stream-call-count`, `--stream-call-duration`) leaves its connection unusable, as
/// HTTP/1.1 has no way to stop one reply but closing: the next call makes a new one (see
/// [`Turn`]).
async fn stream_call(
    thread: &ThreadState,
    template: &CallTemplate,
    turns: &Turns,
    (message, headers): (Bytes, &grpclab_h2::client::CallHeaders),
    tally: &mut StreamTally,
) -> Result<(), CallFailure> {
    let started = Instant::now();
    let request_body = template
        .protocol
        .stream_request_body(&message)
        .map_err(|err| CallFailure::new(Code::Internal, err.0))?;
    let mut counter = Replies::web(template.protocol).ok_or_else(|| {
        CallFailure::new(Code::Internal, "HTTP/1.1 carries gRPC-Web and Connect only")
    })?;
    let mut turn = take_turn(thread, turns).await?;
    // Streaming calls are never in a mix: the run's one method.
    let response = turn
        .sender()?
        .send_request(origin_form(
            template.request(0, headers),
            Some(request_body),
        ))
        .await;
    let response = response.map_err(|err| turn.lost(Some(&err)))?;
    tally.sent += 1;
    let (head, body) = response.into_parts();
    let mut reply = Http1Reply {
        body,
        trailers: None,
        ended: false,
    };
    let config = &thread.shared.config;
    let reading = ServerStream {
        shape: CallShape::ServerStreaming,
        settings: &config.stream,
        started,
        stop: thread.schedule.stop_token(),
    };
    let outcome = match check_head(&head, template) {
        Ok(()) => reading.read(&mut reply, &mut counter, tally).await,
        Err(failure) => Err(failure),
    };
    // A reply left unread (a stream ended early) leaves the connection to be made again
    // (`Turn`'s drop); one that broke is the server's doing.
    turn.finished = reply.ended;
    if outcome
        .as_ref()
        .is_err_and(|failure| failure.connection_lost)
    {
        turn.sender.take();
    }
    outcome
}

/// An HTTP/1.1 reply's body, read as a stream (`ReplyBody`): its data, then trailers if
/// the server sent any (chunked encoding).
struct Http1Reply {
    body: hyper::body::Incoming,
    trailers: Option<http::HeaderMap>,
    /// The body was read to its end.
    ended: bool,
}

impl ReplyBody for Http1Reply {
    async fn chunk(&mut self) -> Option<Result<Bytes, CallFailure>> {
        loop {
            let Some(frame) = self.body.frame().await else {
                self.ended = true;
                return None;
            };
            match frame.map_err(|err| lost(Some(&err))) {
                Err(failure) => return Some(Err(failure)),
                Ok(frame) => match frame.into_data() {
                    Ok(data) => return Some(Ok(data)),
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            self.trailers = Some(trailers);
                        }
                    }
                },
            }
        }
    }

    async fn trailers(&mut self) -> Result<Option<http::HeaderMap>, CallFailure> {
        Ok(self.trailers.take())
    }
}

/// An HTTP/1.1 request from `request`: `Host` from its authority, the path in origin form,
/// and `body` (none for Connect's GET).
fn origin_form(request: http::Request<()>, body: Option<Bytes>) -> http::Request<Full<Bytes>> {
    let (mut parts, ()) = request.into_parts();
    if let Some(authority) = parts.uri.authority().cloned() {
        if let Ok(host) = http::HeaderValue::from_str(authority.as_str()) {
            parts.headers.insert(http::header::HOST, host);
        }
    }
    if let Some(path) = parts.uri.path_and_query().cloned() {
        parts.uri = http::Uri::from(path);
    }
    http::Request::from_parts(parts, Full::new(body.unwrap_or_default()))
}

/// A call whose connection broke under it: Unavailable, as a lost HTTP/2 connection is.
fn lost(err: Option<&hyper::Error>) -> CallFailure {
    CallFailure {
        code: Code::Unavailable,
        message: match err {
            Some(err) if !err.is_closed() && !err.is_incomplete_message() => {
                format!("HTTP/1.1: {err}")
            }
            _ => CONNECTION_LOST.to_owned(),
        },
        connection_lost: true,
    }
}
