//! The `lab` server on grpclab's own HTTP/2 engine (`grpclab-h2`): the gRPC layer in `grpc.rs`
//! adapted to the engine's [`Service`] trait. Selected with `--transport lab` (the default).

use bytes::Bytes;
use grpclab_h2::server::{Dispatch, Reply, RequestHead, Response, Service};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

use super::grpc::{check_head, run_call, CallHead, HeadRejection, Outcome, RequestHeaders, Status};
use super::placement::{Job, Placement, PoolSender, Responder};
use super::LabConfig;

const IMPLEMENTATION: &str = "lab";

/// Answers through the engine's [`Reply`] (from a task or a pool thread).
pub struct EngineResponder(Reply);

impl Responder for EngineResponder {
    fn respond(self, outcome: Outcome) {
        self.0.send(response(outcome));
    }
}

fn response(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Reply(message) => Response::Message(message),
        Outcome::GzipReply(message) => Response::Gzip(message),
        Outcome::Status(status) => status_response(status),
    }
}

fn status_response(status: Status) -> Response {
    Response::Status {
        code: status.code as u8,
        message: status.message,
    }
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

    fn accept(&mut self, head: &RequestHead<'_>, now: Instant) -> Result<CallHead, Response> {
        let headers = RequestHeaders {
            method: head.method,
            path: head.path,
            content_type: head.content_type,
            grpc_encoding: head.grpc_encoding,
            grpc_timeout: head.grpc_timeout,
        };
        check_head(&headers, now, self.config.max_message_bytes).map_err(
            |rejection| match rejection {
                HeadRejection::Http(status) => Response::Http(status),
                HeadRejection::Status(status) => status_response(status),
            },
        )
    }

    fn deadline(&self, call: &CallHead) -> Option<Instant> {
        call.deadline
    }

    fn max_message_bytes(&self) -> usize {
        self.config.max_message_bytes
    }

    fn too_large(&self, declared: usize) -> Response {
        Response::Status {
            code: grpclab_core::Code::ResourceExhausted as u8,
            message: Cow::Owned(format!(
                "request message of {declared} bytes is larger than the server's limit of {} (--max-message-bytes)",
                self.config.max_message_bytes
            )),
        }
    }

    fn deadline_exceeded(&self) -> Response {
        Response::Status {
            code: grpclab_core::Code::DeadlineExceeded as u8,
            message: Cow::Borrowed("deadline exceeded while receiving the request"),
        }
    }

    fn call(&mut self, call: CallHead, body: Bytes, reply: Reply) -> Dispatch<CallHead> {
        if let Some(delay) = self.config.handler_delay {
            // A deliberately slow handler (experiments): it blocks, as a slow handler does.
            std::thread::sleep(delay);
        }
        let offload = match self.config.placement {
            Placement::Inline => false,
            Placement::Pool => true,
            Placement::Adaptive => self
                .pool
                .as_ref()
                .is_some_and(|pool| pool.adaptive_offload(body.len(), self.config.offload_above)),
            Placement::Task => {
                tokio::spawn(async move {
                    reply.send(response(run_call(&call, &body, IMPLEMENTATION)));
                });
                return Dispatch::Later;
            }
        };
        let Some(pool) = self.pool.as_ref().filter(|_| offload) else {
            return Dispatch::Respond(response(run_call(&call, &body, IMPLEMENTATION)));
        };
        let job = Job {
            head: call,
            body,
            responder: EngineResponder(reply),
            implementation: IMPLEMENTATION,
        };
        match pool.sender.try_send(job) {
            Ok(()) => Dispatch::Later,
            // A full queue is back-pressure: the connection keeps the call and offers it again.
            Err(mpsc::error::TrySendError::Full(job)) => {
                Dispatch::Busy(job.head, job.body, job.responder.0)
            }
            // The pool is shutting down: answer here rather than drop the call.
            Err(mpsc::error::TrySendError::Closed(job)) => {
                Dispatch::Respond(response(run_call(&job.head, &job.body, IMPLEMENTATION)))
            }
        }
    }
}
