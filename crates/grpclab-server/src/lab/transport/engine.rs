//! The `lab` server on grpclab's own HTTP/2 engine (`grpclab-h2`): the gRPC layer in `grpc.rs`
//! adapted to the engine's [`Service`] trait. Selected with `--transport lab` (the default).

use bytes::{BufMut, Bytes};
use grpclab_core::Code;
use grpclab_h2::server::{
    CallReply, Dispatch, Reply, RequestHead, Response, Service, Step, StreamOut,
};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

use crate::lab::config::LabConfig;
use crate::lab::grpc::{
    check_head, invalid, ping_pong_message, run_call, run_call_into, run_ping_pong, stream_message,
    web_body, Answer, CallHead, HeadRejection, Outcome, RequestHeaders, Route, Status,
    ECHO_REQUEST, FEED_REQUEST, GRPC_WEB_OK_TRAILER_FRAME,
};
use crate::lab::placement::{Job, Placement, PoolSender, Responder, Work};
use crate::lab::stream_codec;
use crate::stats::count_call;

const IMPLEMENTATION: &str = "lab";

/// Answers through the engine's [`Reply`] (from a task or a pool thread).
pub struct EngineResponder {
    reply: Reply,
    /// The call is gRPC-Web's.
    web: bool,
}

impl Responder for EngineResponder {
    fn respond(self, outcome: Outcome) {
        self.reply.send(response(outcome, self.web));
    }
}

/// The engine's response to a call's outcome; `web`: in gRPC-Web's form.
fn response(outcome: Outcome, web: bool) -> Response {
    match outcome {
        Outcome::Reply(message) if web => Response::Web(web_body(&message)),
        Outcome::Reply(message) => Response::Message(message),
        Outcome::GzipReply(message) => Response::Gzip(message),
        Outcome::Status(status) => status_response(status, web),
    }
}

fn status_response(status: Status, web: bool) -> Response {
    let code = status.code as u8;
    let message = status.message;
    match web {
        true => Response::WebStatus { code, message },
        false => Response::Status { code, message },
    }
}

/// What lab keeps for a streaming call of the streaming echo.
pub enum LabStream {
    /// Bidi: the next reply's sequence number.
    PingPong {
        /// The position of the next request in the stream.
        sequence: u64,
    },
    /// Server streaming: replies still to send once the request has come.
    Feed {
        /// The one request message has arrived.
        requested: bool,
        /// Replies not yet produced.
        remaining: u64,
        /// Each reply's payload (a slice of the request's bytes).
        payload: Bytes,
        /// The next reply's sequence number.
        sequence: u64,
        /// Each reply carries the time it was produced (`FeedRequest.stamp`).
        stamp: bool,
    },
    /// Client streaming: what the client has sent so far.
    Upload {
        /// Messages received.
        messages: u64,
        /// Payload bytes received.
        bytes: u64,
    },
    /// Server reflection: one response per request.
    Reflection,
}

/// Ends a streaming call with an error status.
fn finish_with(out: &mut StreamOut<'_>, status: Status) {
    out.finish(status.code as u8, status.message);
}

/// The lab service for one connection.
pub struct LabService {
    config: Arc<LabConfig>,
    pool: Option<PoolSender<EngineResponder>>,
}

impl LabService {
    /// A service using `pool` for the pool and adaptive placements.
    pub fn new(config: Arc<LabConfig>, pool: Option<PoolSender<EngineResponder>>) -> LabService {
        LabService { config, pool }
    }
}

impl Service for LabService {
    type Call = CallHead;
    type Stream = LabStream;

    fn open_stream(&mut self, call: &CallHead) -> Option<LabStream> {
        match call.route {
            Route::PingPong => Some(LabStream::PingPong { sequence: 0 }),
            Route::Feed => Some(LabStream::Feed {
                requested: false,
                remaining: 0,
                payload: Bytes::new(),
                sequence: 0,
                stamp: false,
            }),
            Route::Upload => Some(LabStream::Upload {
                messages: 0,
                bytes: 0,
            }),
            Route::Reflection => Some(LabStream::Reflection),
            Route::SayHello
            | Route::Stats
            | Route::HeapProfileStart
            | Route::HeapProfileStop
            | Route::HealthCheck
            | Route::SessionLogin
            | Route::SessionList
            | Route::SessionGet => None,
        }
    }

    fn on_message(
        &mut self,
        call: &CallHead,
        stream: &mut LabStream,
        message: Bytes,
        out: &mut StreamOut<'_>,
    ) -> Step {
        match stream {
            LabStream::PingPong { sequence } => self.ping_pong(call, sequence, message, out),
            LabStream::Feed {
                requested,
                remaining,
                payload,
                stamp,
                ..
            } => {
                if *requested {
                    finish_with(
                        out,
                        Status::new(
                            Code::Internal,
                            "more than one request message on a server-streaming call",
                        ),
                    );
                    return Step::Done;
                }
                *requested = true;
                let request = match stream_message(&message, call, FEED_REQUEST) {
                    Ok(request) => request,
                    Err(status) => {
                        finish_with(out, status);
                        return Step::Done;
                    }
                };
                match stream_codec::feed_request(&request) {
                    Ok(feed) => {
                        count_call();
                        let range = feed.payload;
                        *remaining = u64::from(feed.count);
                        *stamp = feed.stamp;
                        *payload = match request {
                            // A slice of the request: no copy.
                            Cow::Borrowed(_) => message.slice(5 + range.start..5 + range.end),
                            Cow::Owned(inflated) => Bytes::copy_from_slice(&inflated[range]),
                        };
                        out.set_producing(true);
                    }
                    Err(err) => finish_with(out, invalid(&err, FEED_REQUEST)),
                }
                Step::Done
            }
            LabStream::Upload { messages, bytes } => {
                let decoded = stream_message(&message, call, ECHO_REQUEST).and_then(|request| {
                    stream_codec::echo_request_payload(&request)
                        .map_err(|err| invalid(&err, ECHO_REQUEST))
                });
                match decoded {
                    Ok(payload) => {
                        count_call();
                        *messages += 1;
                        *bytes += payload.len() as u64;
                    }
                    Err(status) => finish_with(out, status),
                }
                Step::Done
            }
            LabStream::Reflection => {
                const REQUEST: &str = "grpc.reflection.v1.ServerReflectionRequest";
                let answer = stream_message(&message, call, REQUEST).and_then(|request| {
                    crate::lab::reflection::answer(&request).map_err(|err| invalid(&err, REQUEST))
                });
                match answer {
                    Ok(response) => {
                        let buffer = out.buffer();
                        buffer.put_u8(0);
                        buffer.put_u32(response.len() as u32);
                        buffer.extend_from_slice(&response);
                    }
                    Err(status) => finish_with(out, status),
                }
                Step::Done
            }
        }
    }

    fn on_half_close(&mut self, _: &CallHead, stream: &mut LabStream, out: &mut StreamOut<'_>) {
        match stream {
            LabStream::PingPong { .. } | LabStream::Reflection => out.finish(0, Cow::Borrowed("")),
            // The replies go on being produced; the call ends when they are all out.
            LabStream::Feed {
                requested: true, ..
            } => {}
            LabStream::Feed { .. } => finish_with(
                out,
                Status::new(
                    Code::Internal,
                    "the server-streaming call ended without its request message",
                ),
            ),
            LabStream::Upload { messages, bytes } => {
                stream_codec::put_upload_summary(out.buffer(), *messages, *bytes);
                out.finish(0, Cow::Borrowed(""));
            }
        }
    }

    fn on_room(&mut self, _: &CallHead, stream: &mut LabStream, out: &mut StreamOut<'_>) {
        let LabStream::Feed {
            remaining,
            payload,
            sequence,
            stamp,
            ..
        } = stream
        else {
            out.set_producing(false);
            return;
        };
        // One clock reading per batch: the replies produced together leave together.
        let sent_unix_nanos = if *stamp {
            grpclab_core::clock::unix_nanos_now()
        } else {
            0
        };
        while *remaining > 0 && out.room() > 0 {
            stream_codec::put_echo_reply(out.buffer(), payload, *sequence, sent_unix_nanos);
            *sequence += 1;
            *remaining -= 1;
        }
        if *remaining == 0 {
            out.set_producing(false);
            out.finish(0, Cow::Borrowed(""));
        }
    }

    fn accept(&mut self, head: &RequestHead<'_>, now: Instant) -> Result<CallHead, Response> {
        let headers = RequestHeaders {
            method: head.method,
            path: head.path,
            content_type: head.content_type,
            grpc_encoding: head.grpc_encoding,
            grpc_timeout: head.grpc_timeout,
        };
        check_head(
            &headers,
            now,
            self.config.max_message_bytes,
            self.config.codec,
            self.config.grpc_web,
        )
        .map_err(|rejection| match rejection {
            HeadRejection::Http(status) => Response::Http(status),
            HeadRejection::Status(status) => status_response(status, false),
            HeadRejection::WebStatus(status) => status_response(status, true),
        })
    }

    fn deadline(&self, call: &CallHead) -> Option<Instant> {
        call.deadline
    }

    fn max_message_bytes(&self) -> usize {
        self.config.max_message_bytes
    }

    fn too_large(&self, call: &CallHead, declared: usize) -> Response {
        let status = Status {
            code: Code::ResourceExhausted,
            message: Cow::Owned(format!(
                "request message of {declared} bytes is larger than the server's limit of {} (--max-message-bytes)",
                self.config.max_message_bytes
            )),
        };
        status_response(status, call.web)
    }

    fn deadline_exceeded(&self, call: &CallHead) -> Response {
        let status = Status::new(
            Code::DeadlineExceeded,
            "deadline exceeded while receiving the request",
        );
        status_response(status, call.web)
    }

    fn call(
        &mut self,
        call: CallHead,
        body: Bytes,
        reply: CallReply<'_>,
        now: Instant,
    ) -> Dispatch<CallHead> {
        self.unary(call, body, reply, now)
    }
}

impl LabService {
    /// Whether the decode placement sends a request of `len` bytes off the I/O task.
    #[inline]
    fn offload(&self, len: usize) -> bool {
        match self.config.placement {
            Placement::Inline | Placement::Task => false,
            Placement::Pool => true,
            Placement::Adaptive => self
                .pool
                .as_ref()
                .is_some_and(|pool| pool.adaptive_offload(len, self.config.offload_above)),
        }
    }

    /// One ping-pong message, where the decode placement says: inline (the reply straight into
    /// the outbox), a task, or the pool (answered later; the stream's next message waits).
    fn ping_pong(
        &mut self,
        call: &CallHead,
        sequence: &mut u64,
        message: Bytes,
        out: &mut StreamOut<'_>,
    ) -> Step {
        if let Some(delay) = self.config.handler_delay {
            std::thread::sleep(delay);
        }
        let this = *sequence;
        if self.config.placement == Placement::Task {
            let reply = out.later();
            let head = *call;
            tokio::spawn(async move {
                reply.send(response(run_ping_pong(&head, &message, this), false));
            });
            *sequence += 1;
            return Step::Later;
        }
        if let Some(pool) = self.pool.as_ref().filter(|_| self.offload(message.len())) {
            let job = Job {
                work: Work::PingPong { sequence: this },
                head: *call,
                body: message,
                responder: EngineResponder {
                    reply: out.later(),
                    web: false,
                },
                implementation: IMPLEMENTATION,
            };
            match pool.sender.try_send(job) {
                Ok(()) => {
                    *sequence += 1;
                    return Step::Later;
                }
                // A full queue: the stream keeps the message and offers it again.
                Err(mpsc::error::TrySendError::Full(job)) => return Step::Busy(job.body),
                // The pool is shutting down: answer here.
                Err(mpsc::error::TrySendError::Closed(job)) => {
                    return self.ping_pong_inline(call, sequence, &job.body, out)
                }
            }
        }
        self.ping_pong_inline(call, sequence, &message, out)
    }

    fn ping_pong_inline(
        &mut self,
        call: &CallHead,
        sequence: &mut u64,
        message: &[u8],
        out: &mut StreamOut<'_>,
    ) -> Step {
        match ping_pong_message(call, message, *sequence, out.buffer()) {
            Ok(()) => *sequence += 1,
            Err(status) => finish_with(out, status),
        }
        Step::Done
    }

    /// A unary call, where the decode placement says.
    #[inline]
    fn unary(
        &mut self,
        call: CallHead,
        body: Bytes,
        mut reply: CallReply<'_>,
        mut now: Instant,
    ) -> Dispatch<CallHead> {
        if let Some(delay) = self.config.handler_delay {
            // A deliberately slow handler (experiments): it blocks, as a slow handler does,
            // and its deadline is judged after the wait.
            std::thread::sleep(delay);
            now = Instant::now();
        }
        if let Some(spin) = self.config.handler_spin {
            now = spin_for(spin);
        }
        if self.config.placement == Placement::Task {
            let reply = reply.keep();
            tokio::spawn(async move {
                reply.send(response(run_call(&call, &body, IMPLEMENTATION), call.web));
            });
            return Dispatch::Later;
        }
        let Some(pool) = self.pool.as_ref().filter(|_| self.offload(body.len())) else {
            let buffer = reply.message_buffer();
            return match run_call_into(&call, &body, IMPLEMENTATION, now, buffer) {
                Answer::Written if call.web => {
                    buffer.extend_from_slice(GRPC_WEB_OK_TRAILER_FRAME);
                    Dispatch::WrittenWeb
                }
                Answer::Written => Dispatch::Written,
                Answer::Outcome(outcome) => Dispatch::Respond(response(outcome, call.web)),
            };
        };
        let job = Job {
            work: Work::Call,
            head: call,
            body,
            responder: EngineResponder {
                reply: reply.keep(),
                web: call.web,
            },
            implementation: IMPLEMENTATION,
        };
        match pool.sender.try_send(job) {
            Ok(()) => Dispatch::Later,
            // A full queue is back-pressure: the connection keeps the call and offers it again.
            Err(mpsc::error::TrySendError::Full(job)) => Dispatch::Busy(job.head, job.body),
            // The pool is shutting down: answer here rather than drop the call.
            Err(mpsc::error::TrySendError::Closed(job)) => {
                let web = job.head.web;
                Dispatch::Respond(response(
                    run_call(&job.head, &job.body, IMPLEMENTATION),
                    web,
                ))
            }
        }
    }
}
/// Keeps this thread's CPU busy for about `spin` (`--handler-spin`); returns the time it
/// ended. A loop of a fixed number of iterations, calibrated once against the clock: reading
/// the clock in the loop would cost more than the short spins asked for (a clock read is
/// tens to hundreds of nanoseconds on a virtual machine).
#[cold]
fn spin_for(spin: std::time::Duration) -> Instant {
    static ITERATIONS_PER_NS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let rate = *ITERATIONS_PER_NS.get_or_init(|| {
        const CALIBRATION: u64 = 20_000_000;
        let start = Instant::now();
        spin_iterations(CALIBRATION);
        CALIBRATION as f64 / start.elapsed().as_nanos().max(1) as f64
    });
    spin_iterations((spin.as_nanos() as f64 * rate) as u64);
    Instant::now()
}

fn spin_iterations(count: u64) {
    for i in 0..count {
        std::hint::black_box(i);
        std::hint::spin_loop();
    }
}
