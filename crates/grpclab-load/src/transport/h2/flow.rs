//! A flow on the h2 crate's transport: the stream task that drew it runs its steps one after
//! the other (think times included), so the task's slot is held from the first step to the
//! last, as on our engine. Judging and recording are shared with the engine
//! ([`FlowRun`](super::super::flow_runs::FlowRun)).

use grpclab_core::framing::{stream_messages, unframe_maybe_gzip};
use grpclab_core::Code;
use std::collections::VecDeque;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::flow_runs::{AfterStep, FlowRun, StepEnd};
use super::{unary_call, CallTemplate};
use super::{within_deadline, StreamConnection};
use crate::outcome::{CallFailure, REPLY_INFLATE_LIMIT};
use crate::thread::ThreadState;
use grpclab_h2::client::ReplyHeader;

/// A ticket that drew a flow.
pub(super) struct FlowTicket {
    /// Which of the run's flows.
    pub flow: u32,
    /// When it was scheduled (open loop).
    pub intended: Option<Instant>,
    pub measured: bool,
}

/// What a stream task lends a flow while it runs.
pub(super) struct FlowStream<'a> {
    pub thread: &'a ThreadState,
    pub template: &'a CallTemplate,
    pub connection: &'a mut StreamConnection,
    /// The task's held open-loop calls (see `StreamConnection::wait_for_change`).
    pub held: &'a mut VecDeque<(Instant, bool)>,
    pub stop: &'a CancellationToken,
    pub scratch: &'a mut Vec<u8>,
    /// The backoffs' random shares (steps with a retry policy).
    pub jitter: &'a mut crate::retry::Jitter,
}

impl FlowStream<'_> {
    /// Runs the flow to its end: each step rendered with the run's variables, called,
    /// judged and recorded; a run stopped between steps ends Canceled.
    pub async fn run(&mut self, ticket: FlowTicket) {
        let thread = self.thread;
        let mut run = FlowRun::new(thread, ticket.flow, ticket.intended, ticket.measured);
        loop {
            let intended = run.step_intended();
            let method = run.method(thread);
            let mut kept = Vec::new();
            let (sent, outcome) = self.call(&run, method, &mut kept).await;
            let now = Instant::now();
            // The reply, unframed (a stream's messages counted), for a step that reads it.
            let traits = thread.step_traits(method);
            let (outcome, message, replies) = match outcome {
                Ok(()) if traits.reads_reply => {
                    let gzip = thread.shared.config.gzip;
                    let read = match traits.streams {
                        true => stream_messages(self.scratch, gzip, REPLY_INFLATE_LIMIT),
                        false => unframe_maybe_gzip(self.scratch, gzip, REPLY_INFLATE_LIMIT)
                            .map(|message| (1, Some(message))),
                    };
                    match read {
                        Ok((replies, message)) => (Ok(()), message, replies),
                        Err(err) => (
                            Err(CallFailure::new(
                                Code::Internal,
                                format!("invalid reply: {err}"),
                            )),
                            None,
                            0,
                        ),
                    }
                }
                outcome => (outcome, None, 0),
            };
            let lost = match &outcome {
                Err(failure) if failure.connection_lost => Some(failure.message.clone()),
                _ => None,
            };
            let end = StepEnd {
                intended,
                sent,
                now,
                outcome,
                message: message.as_deref(),
                replies,
                address: self.connection.address,
                jitter: self.jitter,
                headers: &kept,
            };
            let at = match run.step_ended(thread, end) {
                AfterStep::Next(at) => at,
                AfterStep::Ended => {
                    // Its end is recorded before the stream waits for a lost connection.
                    run.end(thread, now);
                    if let Some(reason) = lost {
                        self.wait_for_change(&reason).await;
                    }
                    return;
                }
            };
            if let Some(reason) = lost {
                self.wait_for_change(&reason).await;
            }
            if self.stop.is_cancelled() {
                run.cancel(thread, Instant::now());
                return;
            }
            if let Some(at) = at {
                tokio::select! {
                    _ = tokio::time::sleep_until(at.into()) => {}
                    _ = self.stop.cancelled() => {
                        run.cancel(thread, Instant::now());
                        return;
                    }
                }
            }
        }
    }

    /// The connection was lost: wait until its driver has news (see
    /// `StreamConnection::wait_for_change`).
    async fn wait_for_change(&mut self, reason: &str) {
        self.connection
            .wait_for_change(self.thread, self.held, reason, self.stop)
            .await;
    }

    /// One step's call (its reply left in `scratch` and its kept headers in `kept` when the
    /// step reads it): when it was sent, and how it ended.
    async fn call(
        &mut self,
        run: &FlowRun,
        method: u32,
        kept: &mut Vec<ReplyHeader>,
    ) -> (Instant, Result<(), CallFailure>) {
        let thread = self.thread;
        let number = match thread.method_templated(method) {
            true => thread.call_number(),
            false => None,
        };
        let body = thread.body_with(method, number, &run.vars);
        let headers = thread
            .call_headers(method, number, &run.vars)
            .map_or_else(Vec::new, |headers| *headers);
        let keep = thread.step_reads_reply(method);
        let sent = Instant::now();
        let outcome = match self.connection.sender() {
            Err(reason) => Err(CallFailure {
                code: Code::Unavailable,
                message: reason,
                connection_lost: true,
            }),
            Ok(sender) => {
                let call = unary_call(
                    sender,
                    self.template,
                    method,
                    body,
                    &headers,
                    self.scratch,
                    keep.then_some(kept),
                );
                within_deadline(thread.shared.config.timeout, call)
                    .await
                    .map_err(|failure| self.connection.explain(failure))
            }
        };
        (sent, outcome)
    }
}
