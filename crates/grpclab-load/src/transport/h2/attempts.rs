//! Calls of a method with a retry or hedging policy on the h2 transport: the stream task
//! runs the call's attempts itself, the whole under the call's deadline (the caller's
//! `within_deadline`), so no attempt starts past it and dropping the call at its deadline
//! cancels what still runs.

use bytes::Bytes;
use grpclab_core::Code;
use h2::client::SendRequest;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use super::StreamConnection;
use super::{unary_call, CallTemplate};
use crate::outcome::CallFailure;
use crate::retry::{HedgingPolicy, Jitter, RetryPolicy};
use crate::thread::ThreadState;

/// A method's policy for its calls' attempts.
#[derive(Debug, Clone, Copy)]
pub(super) enum Policy<'a> {
    Retry(&'a RetryPolicy),
    Hedging(&'a HedgingPolicy),
}

impl Policy<'_> {
    /// `method`'s policy, if it has one.
    pub(super) fn of(method: &crate::config::CallMethod) -> Option<Policy<'_>> {
        match (&method.retry, &method.hedging) {
            (Some(retry), _) => Some(Policy::Retry(retry)),
            (None, Some(hedging)) => Some(Policy::Hedging(hedging)),
            (None, None) => None,
        }
    }
}

/// One call's request as every attempt sends it.
pub(super) struct AttemptedCall<'a> {
    pub(super) thread: &'a ThreadState,
    pub(super) template: &'a CallTemplate,
    pub(super) method: u32,
    /// The request, sent again as it was.
    pub(super) body: Bytes,
    pub(super) headers: &'a grpclab_h2::client::CallHeaders,
}

/// A failure for an attempt that found no connection to go on.
fn no_connection(reason: String) -> CallFailure {
    CallFailure {
        code: Code::Unavailable,
        message: reason,
        connection_lost: true,
    }
}

impl AttemptedCall<'_> {
    /// Retries: attempts one after the other, each on the stream's connection as it then
    /// is, with the policy's backoff between them, until one ends OK, its status is not
    /// retryable, the attempts are spent or the run stops; `attempts` counts them as they
    /// are sent.
    pub(super) async fn retried(
        &self,
        policy: &RetryPolicy,
        connection: &mut StreamConnection,
        scratch: &mut Vec<u8>,
        attempts: &Cell<u32>,
        jitter: &mut Jitter,
    ) -> Result<(), CallFailure> {
        loop {
            attempts.set(attempts.get() + 1);
            let outcome = match connection.sender() {
                Err(reason) => Err(no_connection(reason)),
                Ok(sender) => {
                    let body = self.body.clone();
                    let call = unary_call(
                        sender,
                        self.template,
                        self.method,
                        body,
                        self.headers,
                        scratch,
                        None,
                    );
                    call.await
                }
            };
            let failure = match outcome {
                Ok(()) => return Ok(()),
                Err(failure) => failure,
            };
            let stopped = self.thread.schedule.stop_token().is_cancelled();
            if stopped || !policy.retries(failure.code, attempts.get()) {
                return Err(failure);
            }
            if failure.connection_lost {
                // The next attempt takes the connection as its driver then has it.
                connection.sender = None;
            }
            let backoff = policy.backoff(attempts.get(), jitter.share());
            tokio::time::sleep(backoff).await;
        }
    }

    /// Hedging: the first attempt at once, another each hedging delay while none has
    /// ended, the next at once after a non-fatal status; the first attempt that ends OK or
    /// with a fatal status is the call's, and returning drops the others, which resets
    /// their streams (CANCEL). With every attempt spent on non-fatal statuses, the last
    /// one's is the call's. `attempts` counts them as they are sent.
    pub(super) async fn hedged(
        &self,
        policy: &HedgingPolicy,
        connection: &mut StreamConnection,
        attempts: &Cell<u32>,
    ) -> Result<(), CallFailure> {
        type Attempt<'f> = Pin<Box<dyn Future<Output = Result<(), CallFailure>> + 'f>>;
        let mut running: Vec<Attempt<'_>> = Vec::new();
        let mut last = None;
        let mut next_due = tokio::time::Instant::now();
        loop {
            let stopped = self.thread.schedule.stop_token().is_cancelled();
            let may_send = attempts.get() < policy.max_attempts && !stopped;
            if may_send && (running.is_empty() || tokio::time::Instant::now() >= next_due) {
                attempts.set(attempts.get() + 1);
                next_due = tokio::time::Instant::now() + policy.hedging_delay;
                match connection.sender() {
                    Err(reason) => {
                        let failure = no_connection(reason);
                        if !policy.non_fatal(failure.code) {
                            return Err(failure);
                        }
                        last = Some(failure);
                    }
                    Ok(sender) => running.push(Box::pin(attempt(
                        sender.clone(),
                        self.template,
                        self.method,
                        self.body.clone(),
                        self.headers,
                    ))),
                }
                continue;
            }
            if running.is_empty() {
                return Err(last.unwrap_or_else(|| {
                    CallFailure::new(Code::Canceled, "the run stopped before an attempt")
                }));
            }
            let ended = std::future::poll_fn(|cx| {
                running
                    .iter_mut()
                    .enumerate()
                    .find_map(|(index, attempt)| match attempt.as_mut().poll(cx) {
                        Poll::Ready(outcome) => Some((index, outcome)),
                        Poll::Pending => None,
                    })
                    .map_or(Poll::Pending, Poll::Ready)
            });
            let hedge = tokio::time::sleep_until(next_due);
            tokio::select! {
                (index, outcome) = ended => {
                    drop(running.swap_remove(index));
                    match outcome {
                        Ok(()) => return Ok(()),
                        Err(failure) if policy.non_fatal(failure.code) => {
                            if failure.connection_lost {
                                connection.sender = None;
                            }
                            // The next attempt goes at once.
                            next_due = tokio::time::Instant::now();
                            last = Some(failure);
                        }
                        Err(failure) => return Err(failure),
                    }
                }
                () = hedge, if may_send => {}
            }
        }
    }
}

/// One hedged attempt on its own handle of the connection, with its own reply buffer.
async fn attempt(
    mut sender: SendRequest<Bytes>,
    template: &CallTemplate,
    method: u32,
    body: Bytes,
    headers: &grpclab_h2::client::CallHeaders,
) -> Result<(), CallFailure> {
    let mut scratch = Vec::new();
    unary_call(
        &mut sender,
        template,
        method,
        body,
        headers,
        &mut scratch,
        None,
    )
    .await
}
