//! Retries on the engine transport (hedging, which shares the runs, is in `hedge.rs`): a call of a method with a retry policy
//! ([`RetryPolicy`](crate::retry::RetryPolicy)) is a run of attempts on its connection. Its
//! request (and metadata) is kept; an attempt that ends with a retryable status is sent
//! again after the policy's backoff, holding its stream slot meanwhile (as a flow between
//! steps does), and never past the call's deadline: when the backoff would end after it,
//! the call ends DeadlineExceeded at the deadline. The call is recorded once, at its end,
//! with its last attempt's outcome and its latency from its start; its retries are counted
//! apart (`ThreadState::note_retries`).

use bytes::Bytes;
use grpclab_core::Code;
use grpclab_h2::client::{CallEnd, CallHeaders, CallToken, NextCall};
use std::time::Instant;

use super::LabSource;
use crate::outcome::CallFailure;

/// The bit of `CallToken::flow` that marks an attempt of a retried call (the rest: its run's
/// id in `LabSource::retries`); flow runs' ids stay below it.
pub(super) const RETRY_RUN: u32 = 1 << 31;

/// A call with a retry policy, between its first send and its end.
#[derive(Debug)]
pub(super) struct RetryRun {
    /// Its token as first sent (`flow` 0).
    pub(super) token: CallToken,
    /// Its framed request, sent again as it was.
    pub(super) body: Bytes,
    /// Its rendered metadata, if any.
    pub(super) headers: Option<Box<CallHeaders>>,
    /// When it started: the earlier of its schedule and its first send.
    pub(super) started: Option<Instant>,
    /// Attempts sent so far.
    pub(super) attempts: u32,
    /// Its last attempt's failure, while it waits for the next.
    pub(super) last: Option<CallFailure>,
    /// Its attempts in flight (a hedged call may have several).
    pub(super) in_flight: u32,
    /// Its backoff would end past its deadline: when due, it ends DeadlineExceeded.
    expires: bool,
}

impl RetryRun {
    /// Its request again, as attempt of run `id`.
    pub(super) fn attempt(&self, id: u32) -> NextCall {
        NextCall::Send {
            body: self.body.clone(),
            headers: self.headers.clone(),
            token: CallToken {
                flow: id | RETRY_RUN,
                // Only the first attempt was scheduled.
                intended: None,
                ..self.token
            },
        }
    }
}

impl LabSource {
    /// Sends a call of a method with a retry policy: its request kept for the attempts
    /// after the first.
    #[cold]
    #[inline(never)]
    pub(super) fn send_retried(
        &mut self,
        token: CallToken,
        body: Bytes,
        headers: Option<Box<CallHeaders>>,
    ) -> NextCall {
        let id = self.retries.start(RetryRun {
            token,
            body: body.clone(),
            headers: headers.clone(),
            started: None,
            attempts: 1,
            last: None,
            in_flight: 1,
            expires: false,
        });
        if self.hedging(token.method).is_some() {
            self.hedge_started(id, token.method);
        }
        NextCall::Send {
            body,
            headers,
            token: CallToken {
                flow: id | RETRY_RUN,
                ..token
            },
        }
    }

    /// The next attempt of a call whose backoff has passed; `None` when the one due ended
    /// instead (its deadline came first): the caller asks again.
    pub(super) fn next_attempt(&mut self, id: u32, now: Instant) -> Option<NextCall> {
        let run = self.retries.get_mut(id)?;
        if run.expires {
            let run = self.retries.finish(id)?;
            let failure = CallFailure::deadline_before_attempt(run.attempts + 1);
            self.end_retried(run, now, now, Err(failure));
            return None;
        }
        run.attempts += 1;
        run.in_flight += 1;
        run.last = None;
        let method = run.token.method;
        if self.hedging(method).is_some() {
            self.hedge_started(id, method);
        }
        Some(self.retries.get_mut(id)?.attempt(id))
    }

    /// An attempt ended: sent again after its backoff when its status is retryable and
    /// attempts remain, else the call ends.
    pub(super) fn attempt_ended(
        &mut self,
        token: CallToken,
        sent: Instant,
        now: Instant,
        outcome: Result<(), CallFailure>,
    ) {
        if self.hedging(token.method).is_some() {
            return self.hedge_ended(token, sent, now, outcome);
        }
        let id = token.flow & !RETRY_RUN;
        let thread = &*self.thread;
        let Some(run) = self.retries.get_mut(id) else {
            return;
        };
        run.in_flight = run.in_flight.saturating_sub(1);
        let started = *run
            .started
            .get_or_insert_with(|| token.intended.map_or(sent, |at| at.min(sent)));
        let policy = thread
            .shared
            .config
            .methods
            .get(token.method as usize)
            .and_then(|own| own.retry.as_ref());
        let retry = match (&outcome, policy) {
            (Err(failure), Some(policy)) if policy.retries(failure.code, run.attempts) => {
                Some(policy.backoff(run.attempts, self.jitter.share()))
            }
            _ => None,
        };
        if let (Some(backoff), false) = (retry, thread.schedule.stop_token().is_cancelled()) {
            let due = now + backoff;
            let deadline = thread.shared.config.timeout.map(|limit| started + limit);
            run.last = outcome.err();
            match deadline {
                Some(deadline) if due >= deadline => {
                    run.expires = true;
                    self.retries.wait(id, Some(deadline));
                }
                _ => self.retries.wait(id, Some(due)),
            }
            return;
        }
        if let Some(run) = self.retries.finish(id) {
            self.end_retried(run, sent, now, outcome);
        }
    }

    /// A call with a retry policy ends: recorded once (latency from its start), its
    /// retries counted.
    pub(super) fn end_retried(
        &mut self,
        run: RetryRun,
        sent: Instant,
        now: Instant,
        outcome: Result<(), CallFailure>,
    ) {
        let started = run.started.unwrap_or(sent);
        let token = CallToken {
            intended: Some(started),
            ..run.token
        };
        // The deadline is the call's, not an attempt's: an attempt that ended past it (it
        // was sent before it with the whole timeout of its own) ends the call as a client
        // would have, at its deadline.
        let deadline = self
            .thread
            .shared
            .config
            .timeout
            .map(|limit| started + limit);
        let outcome = match deadline {
            Some(deadline) if now > deadline && outcome.is_ok() => {
                Err(CallFailure::deadline_over_attempts(run.attempts))
            }
            _ => outcome,
        };
        if token.measured {
            self.thread.note_retries(token.method, run.attempts - 1);
        }
        self.finish(token, sent, now, |_| outcome);
    }

    /// The run stopped: calls waiting for their next attempt end with their last attempt's
    /// failure.
    pub(super) fn drop_retries(&mut self) {
        let now = Instant::now();
        self.hedge_timers.clear();
        self.hedge_extra = 0;
        for mut run in self.retries.take_all() {
            let failure = run.last.take().unwrap_or_else(|| {
                CallFailure::new(Code::Canceled, "the run ended before its next attempt")
            });
            self.end_retried(run, now, now, Err(failure));
        }
    }

    /// An attempt's end as the engine reports it, for a retried call.
    pub(super) fn attempt_completed(
        &mut self,
        token: CallToken,
        sent: Instant,
        end: CallEnd,
        now: Instant,
    ) {
        let outcome = self.outcome(end);
        self.attempt_ended(token, sent, now, outcome);
    }
}
