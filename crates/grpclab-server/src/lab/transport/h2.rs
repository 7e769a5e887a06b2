//! The `lab` server's HTTP/2 transport, on the h2 crate.
//!
//! One task per connection drives h2 and the connection's calls together, in one poll:
//!
//! 1. accept every stream h2 has ready (reading the socket, and writing what is queued);
//! 2. read the bodies that have arrived, refuse oversized messages from their prefix, answer
//!    calls whose deadline passed, and hand complete calls to the decode placement;
//! 3. return `Pending`. Responses queued in step 2 woke this task, so the next poll's step 1
//!    writes them all at once: one write per batch of calls, not one per call.
//!
//! h2 owns RFC 9113: frame parsing, HPACK, flow control, SETTINGS (including the advertised
//! and enforced SETTINGS_MAX_CONCURRENT_STREAMS), PING, RST_STREAM, GOAWAY and CONTINUATION.
//! A malformed frame makes h2 send GOAWAY with the right error code and fail this connection
//! only. The gRPC decisions are all in `grpc.rs`.

use bytes::{Bytes, BytesMut};
use grpclab_core::framing::PREFIX_LEN;
use grpclab_h2::grpc::percent_encode;
use h2::server::SendResponse;
use h2::RecvStream;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::{CancellationToken, PollSender};

use crate::lab::config::LabConfig;
use crate::lab::grpc::{
    check_head, check_prefix, CallHead, HeadRejection, Outcome, RequestHeaders, Status,
    STREAMING_ON_OWN_ENGINE_ONLY,
};
use crate::lab::placement::{Job, Placement, PoolSender, Responder, Work};

/// The implementation name the admin RPC reports.
const IMPLEMENTATION: &str = "lab";

/// Answers a call on its h2 stream.
pub struct H2Responder {
    respond: SendResponse<Bytes>,
}

impl Responder for H2Responder {
    fn respond(mut self, outcome: Outcome) {
        // A send can only fail if the client reset the stream or the connection is gone;
        // then there is nobody to answer.
        let _ = match outcome {
            Outcome::Reply(message) => send_reply(&mut self.respond, message, false),
            Outcome::GzipReply(message) => send_reply(&mut self.respond, message, true),
            Outcome::Status(status) => send_status(&mut self.respond, &status),
        };
    }
}

fn grpc_head() -> Response<()> {
    let mut response = Response::new(());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    response
}

fn send_reply(
    respond: &mut SendResponse<Bytes>,
    message: Bytes,
    gzip: bool,
) -> Result<(), h2::Error> {
    let mut head = grpc_head();
    if gzip {
        head.headers_mut()
            .insert("grpc-encoding", HeaderValue::from_static("gzip"));
        head.headers_mut().insert(
            "grpc-accept-encoding",
            HeaderValue::from_static("identity,gzip"),
        );
    }
    let mut stream = respond.send_response(head, false)?;
    stream.send_data(message, false)?;
    let mut trailers = HeaderMap::with_capacity(1);
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    stream.send_trailers(trailers)
}

/// A trailers-only response: the status travels in the headers, which end the stream.
fn send_status(respond: &mut SendResponse<Bytes>, status: &Status) -> Result<(), h2::Error> {
    let mut head = grpc_head();
    let headers = head.headers_mut();
    headers.insert(
        "grpc-accept-encoding",
        HeaderValue::from_static("identity,gzip"),
    );
    headers.insert("grpc-status", HeaderValue::from(status.code as u16));
    if let Ok(message) = HeaderValue::from_str(&percent_encode(&status.message)) {
        headers.insert("grpc-message", message);
    }
    respond.send_response(head, true).map(|_| ())
}

fn send_http_status(respond: &mut SendResponse<Bytes>, status: u16) {
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let _ = respond.send_response(response, true);
}

/// A call whose body is still arriving.
struct PendingCall {
    head: CallHead,
    body: RecvStream,
    received: Received,
    respond: SendResponse<Bytes>,
}

/// The body so far: usually one chunk, kept as is; copied only when it arrives in pieces.
enum Received {
    Nothing,
    One(Bytes),
    Several(BytesMut),
}

impl Received {
    fn len(&self) -> usize {
        match self {
            Received::Nothing => 0,
            Received::One(chunk) => chunk.len(),
            Received::Several(buffer) => buffer.len(),
        }
    }

    fn push(&mut self, chunk: Bytes) {
        *self = match std::mem::replace(self, Received::Nothing) {
            Received::Nothing => Received::One(chunk),
            Received::One(first) => {
                let mut buffer = BytesMut::with_capacity(first.len() + chunk.len());
                buffer.extend_from_slice(&first);
                buffer.extend_from_slice(&chunk);
                Received::Several(buffer)
            }
            Received::Several(mut buffer) => {
                buffer.extend_from_slice(&chunk);
                Received::Several(buffer)
            }
        };
    }

    fn prefix(&self) -> Option<[u8; PREFIX_LEN]> {
        let bytes: &[u8] = match self {
            Received::Nothing => return None,
            Received::One(chunk) => chunk,
            Received::Several(buffer) => buffer,
        };
        bytes.get(..PREFIX_LEN)?.try_into().ok()
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Received::Nothing => Bytes::new(),
            Received::One(chunk) => chunk,
            Received::Several(buffer) => buffer.freeze(),
        }
    }
}

/// What reading a body came to.
enum BodyState {
    Complete,
    Refused(Status),
    /// The client reset the stream, or the connection failed: nobody to answer.
    Gone,
    /// The connection's bodies in progress passed its budget: refused, safe to retry.
    OverBudget,
}

impl PendingCall {
    /// Reads what has arrived of the body; `held` counts the bytes of every body in progress
    /// on the connection, which may not pass `budget`.
    fn poll_body(
        &mut self,
        cx: &mut Context<'_>,
        max_message_bytes: usize,
        held: &mut usize,
        budget: usize,
    ) -> Poll<BodyState> {
        loop {
            match self.body.poll_data(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    // Return the window at once so the client keeps sending (h2 cannot return
                    // a stream's window without the connection's): the budget below bounds
                    // what bodies in progress hold instead.
                    let _ = self.body.flow_control().release_capacity(chunk.len());
                    *held += chunk.len();
                    self.received.push(chunk);
                    if *held > budget {
                        return Poll::Ready(BodyState::OverBudget);
                    }
                    if let Some(prefix) = self.received.prefix() {
                        if let Err(status) = check_prefix(&prefix, max_message_bytes) {
                            return Poll::Ready(BodyState::Refused(status));
                        }
                    }
                    if self.received.len() > PREFIX_LEN + max_message_bytes {
                        return Poll::Ready(BodyState::Refused(Status::new(
                            grpclab_core::Code::ResourceExhausted,
                            "request body is larger than the server's message limit",
                        )));
                    }
                }
                Poll::Ready(Some(Err(_))) => return Poll::Ready(BodyState::Gone),
                Poll::Ready(None) => return Poll::Ready(BodyState::Complete),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// One connection: h2 plus the calls it carries.
/// `T`: the socket, plaintext TCP or a TLS stream over it.
struct ConnectionTask<T> {
    h2: h2::server::Connection<T, Bytes>,
    config: Arc<LabConfig>,
    calls: Vec<PendingCall>,
    /// Bytes of the bodies in `calls`: at most `config.connection_window` (the budget).
    held: usize,
    pool: Option<PollSender<Job<H2Responder>>>,
    /// The same pool, for the adaptive placement's question "is a worker idle?".
    adaptive: Option<PoolSender<H2Responder>>,
    /// Complete calls waiting for room in the pool's queue (back-pressure); bounded by the
    /// connection's SETTINGS_MAX_CONCURRENT_STREAMS.
    waiting_for_pool: std::collections::VecDeque<Job<H2Responder>>,
    /// Fires at the earliest deadline of a call still waiting for its body.
    deadline_timer: Option<Pin<Box<tokio::time::Sleep>>>,
    accept_done: bool,
}

impl<T: AsyncRead + AsyncWrite + Unpin> ConnectionTask<T> {
    fn accept(&mut self, request: Request<RecvStream>, mut respond: SendResponse<Bytes>) {
        let (parts, body) = request.into_parts();
        let headers = RequestHeaders {
            method: parts.method.as_str().as_bytes(),
            path: parts.uri.path().as_bytes(),
            content_type: parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .map(HeaderValue::as_bytes),
            grpc_encoding: parts
                .headers
                .get("grpc-encoding")
                .map(HeaderValue::as_bytes),
            grpc_timeout: parts.headers.get("grpc-timeout").map(HeaderValue::as_bytes),
        };
        match check_head(
            &headers,
            Instant::now(),
            self.config.max_message_bytes,
            self.config.codec,
            // gRPC-Web is served on lab's own engine only (`serve` refuses it here).
            false,
        ) {
            // Streaming is served on lab's own engine only: answered at once, since a bidi
            // client waits for replies before it half-closes.
            Ok(head) if head.route.is_streaming() => {
                let _ = send_status(
                    &mut respond,
                    &Status::new(
                        grpclab_core::Code::Unimplemented,
                        STREAMING_ON_OWN_ENGINE_ONLY,
                    ),
                );
            }
            Ok(head) => self.calls.push(PendingCall {
                head,
                body,
                received: Received::Nothing,
                respond,
            }),
            Err(HeadRejection::Http(status)) => send_http_status(&mut respond, status),
            Err(HeadRejection::Status(status) | HeadRejection::WebStatus(status)) => {
                let _ = send_status(&mut respond, &status);
            }
        }
    }

    fn dispatch(&mut self, job: Job<H2Responder>, cx: &mut Context<'_>) {
        let offload = match self.config.placement {
            Placement::Inline => false,
            Placement::Pool => true,
            Placement::Adaptive => self.adaptive.as_ref().is_some_and(|pool| {
                pool.adaptive_offload(job.body.len(), self.config.offload_above)
            }),
            Placement::Task => {
                tokio::spawn(async move { job.run() });
                return;
            }
        };
        if !offload || self.pool.is_none() {
            job.run();
        } else if self.waiting_for_pool.is_empty() {
            self.submit_or_wait(job, cx);
        } else {
            // Keep arrival order: earlier calls go to the pool first.
            self.waiting_for_pool.push_back(job);
        }
    }

    fn submit_or_wait(&mut self, job: Job<H2Responder>, cx: &mut Context<'_>) {
        let Some(pool) = self.pool.as_mut() else {
            job.run();
            return;
        };
        match pool.poll_reserve(cx) {
            Poll::Ready(Ok(())) => {
                if let Err(err) = pool.send_item(job) {
                    if let Some(job) = err.into_inner() {
                        job.run();
                    }
                }
            }
            // The pool is gone (shutting down): run it here rather than drop it.
            Poll::Ready(Err(_)) => job.run(),
            Poll::Pending => self.waiting_for_pool.push_front(job),
        }
    }

    fn poll_calls(&mut self, cx: &mut Context<'_>) {
        // Calls held back by a full pool queue go first.
        while let Some(job) = self.waiting_for_pool.pop_front() {
            let before = self.waiting_for_pool.len();
            self.submit_or_wait(job, cx);
            if self.waiting_for_pool.len() > before {
                break;
            }
        }
        let now = Instant::now();
        let mut earliest_deadline: Option<Instant> = None;
        let mut index = 0;
        while index < self.calls.len() {
            let call = &mut self.calls[index];
            if call.head.deadline.is_some_and(|deadline| now >= deadline) {
                let mut call = self.calls.swap_remove(index);
                self.held -= call.received.len();
                let _ = send_status(
                    &mut call.respond,
                    &Status::new(
                        grpclab_core::Code::DeadlineExceeded,
                        "deadline exceeded while receiving the request",
                    ),
                );
                continue;
            }
            let budget = (self.config.connection_window as usize)
                .max(self.config.max_message_bytes + PREFIX_LEN);
            match call.poll_body(cx, self.config.max_message_bytes, &mut self.held, budget) {
                Poll::Pending => {
                    if let Some(deadline) = call.head.deadline {
                        earliest_deadline =
                            Some(earliest_deadline.map_or(deadline, |e| e.min(deadline)));
                    }
                    index += 1;
                }
                Poll::Ready(state) => {
                    let mut call = self.calls.swap_remove(index);
                    self.held -= call.received.len();
                    match state {
                        BodyState::Complete => {
                            let job = Job {
                                work: Work::Call,
                                head: call.head,
                                body: call.received.into_bytes(),
                                responder: H2Responder {
                                    respond: call.respond,
                                },
                                implementation: IMPLEMENTATION,
                            };
                            self.dispatch(job, cx);
                        }
                        BodyState::Refused(status) => {
                            // Trailers-only, ending our side. Dropping the body stream lets h2
                            // discard (and give back the window of) whatever else arrives; an
                            // explicit RST_STREAM here would make h2 drop the queued response.
                            let _ = send_status(&mut call.respond, &status);
                        }
                        BodyState::Gone => {}
                        // Refusing the stream whose bytes passed the budget lets the others
                        // finish; it was never processed, so the client may retry it.
                        BodyState::OverBudget => {
                            call.respond.send_reset(h2::Reason::REFUSED_STREAM);
                        }
                    }
                }
            }
        }
        self.arm_deadline_timer(earliest_deadline, cx);
    }

    fn arm_deadline_timer(&mut self, earliest: Option<Instant>, cx: &mut Context<'_>) {
        let Some(earliest) = earliest else {
            return;
        };
        let timer = self
            .deadline_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(earliest.into())));
        timer.as_mut().reset(earliest.into());
        if timer.as_mut().poll(cx).is_ready() {
            // Already due: come back at once to answer it.
            cx.waker().wake_by_ref();
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), h2::Error>> {
        // 1. Accept every ready stream (this also flushes responses queued since last time).
        while !self.accept_done {
            match self.h2.poll_accept(cx) {
                Poll::Ready(Some(Ok((request, respond)))) => self.accept(request, respond),
                Poll::Ready(Some(Err(err))) => return Poll::Ready(Err(err)),
                Poll::Ready(None) => self.accept_done = true,
                Poll::Pending => break,
            }
        }
        // 2. Read bodies, run complete calls; their responses wake us for step 1.
        self.poll_calls(cx);
        if self.accept_done && self.calls.is_empty() && self.waiting_for_pool.is_empty() {
            // h2 ends `accept` only once every stream is closed and the connection is done.
            return Poll::Ready(Ok(()));
        }
        Poll::Pending
    }
}

/// Serves one connection until it closes, fails, or `shutdown` asks for a graceful close
/// (GOAWAY, then in-flight calls finish).
pub async fn serve_connection<T: AsyncRead + AsyncWrite + Unpin>(
    io: T,
    config: Arc<LabConfig>,
    pool: Option<PoolSender<H2Responder>>,
    shutdown: CancellationToken,
) {
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(config.max_concurrent_streams)
        .initial_window_size(config.stream_window)
        .initial_connection_window_size(config.connection_window);
    let handshake = tokio::select! {
        handshake = builder.handshake::<_, Bytes>(io) => handshake,
        _ = shutdown.cancelled() => return,
    };
    let Ok(h2) = handshake else {
        return;
    };
    let mut task = ConnectionTask {
        h2,
        config,
        calls: Vec::new(),
        held: 0,
        pool: pool
            .as_ref()
            .map(|pool| PollSender::new(pool.sender.clone())),
        adaptive: pool,
        waiting_for_pool: std::collections::VecDeque::new(),
        deadline_timer: None,
        accept_done: false,
    };
    let mut shutdown_requested = std::pin::pin!(shutdown.cancelled());
    let mut going_away = false;
    // A failed connection (malformed frame, reset socket) has already been answered by h2
    // with GOAWAY where possible; it ends here and touches nothing else.
    let _ = std::future::poll_fn(|cx| {
        if !going_away && shutdown_requested.as_mut().poll(cx).is_ready() {
            task.h2.graceful_shutdown();
            going_away = true;
        }
        task.poll(cx)
    })
    .await;
}
