//! Hedging on the engine transport: a call of a method with a hedging policy
//! ([`HedgingPolicy`](crate::retry::HedgingPolicy)) is a run in `LabSource::retries`, as a
//! retried call is, whose attempts may be in flight together. Its first attempt holds the
//! call's stream slot; each later one is an extra stream, sent when its hedge timer comes due
//! (`hedging_delay` after the attempt before it) or at once after a non-fatal status, and
//! carried by the connection's headroom (its slots times the policy's attempts; the source
//! keeps the run's tickets to the real slots). The first attempt to end OK or fatally is the
//! call's: it is recorded once, and the connection resets the run's other attempts
//! (`CallSource::given_up`). Nothing is sent past the call's deadline: a timer due after it
//! is dropped, and an attempt that ends after it ends the call.

use grpclab_h2::client::{CallToken, NextCall, TurnClock};
use std::time::Instant;

use super::retry::RETRY_RUN;
use super::LabSource;
use crate::outcome::CallFailure;
use crate::retry::HedgingPolicy;
use crate::thread::ThreadState;

impl LabSource {
    /// `method`'s hedging policy, if it has one.
    pub(super) fn hedging(&self, method: u32) -> Option<&HedgingPolicy> {
        hedging_of(&self.thread, method)
    }

    /// A hedged call's first attempt has been handed to the connection: its next attempt
    /// is due after the delay.
    pub(super) fn hedge_started(&mut self, id: u32, method: u32) {
        let Some(delay) = self.hedging(method).map(|policy| policy.hedging_delay) else {
            return;
        };
        let now = Instant::now();
        if let Some(run) = self.retries.get_mut(id) {
            // Its attempts end in any order: the call starts with its first (or its
            // schedule), which no later attempt's send time can stand for.
            let intended = run.token.intended;
            run.started
                .get_or_insert_with(|| intended.map_or(now, |at| at.min(now)));
        }
        self.hedge_timers.push((now + delay, id));
    }

    /// The next attempt of a hedged run whose timer is due, as an extra stream; timers of
    /// runs that ended, spent their attempts or whose deadline passed are dropped.
    pub(super) fn due_hedge(&mut self, now: Instant) -> Option<NextCall> {
        while let Some(position) = self.hedge_timers.iter().position(|(at, _)| *at <= now) {
            let (_, id) = self.hedge_timers.swap_remove(position);
            let thread = &*self.thread;
            let Some(run) = self.retries.get_mut(id) else {
                continue;
            };
            let Some(policy) = hedging_of(thread, run.token.method) else {
                continue;
            };
            let started = run.started.unwrap_or(now);
            let timeout = thread.shared.config.timeout;
            let past_deadline = timeout.is_some_and(|limit| now >= started + limit);
            if run.attempts >= policy.max_attempts || past_deadline {
                continue;
            }
            // An extra stream when one is in flight already.
            if run.in_flight > 0 {
                self.hedge_extra += 1;
            }
            run.attempts += 1;
            run.in_flight += 1;
            if run.attempts < policy.max_attempts {
                self.hedge_timers.push((now + policy.hedging_delay, id));
            }
            return Some(run.attempt(id));
        }
        None
    }

    /// With hedging, before any new call: a hedged attempt that is due goes first; then
    /// the connection's figures are made the real slots' (its extra room is for hedged
    /// attempts only), and a source with none free pauses.
    #[cold]
    #[inline(never)]
    pub(super) fn hedge_room(
        &mut self,
        clock: &mut TurnClock,
        in_flight: &mut usize,
        free_slots: &mut usize,
    ) -> Option<NextCall> {
        if let Some(attempt) = self.due_hedge(clock.now()) {
            return Some(attempt);
        }
        *in_flight = in_flight.saturating_sub(self.hedge_extra);
        *free_slots = (*free_slots + self.hedge_extra).saturating_sub(self.headroom);
        (*free_slots == 0).then(|| self.pause(None))
    }

    /// When the earliest hedge timer is due.
    pub(super) fn earliest_hedge(&self) -> Option<Instant> {
        self.hedge_timers.iter().map(|(at, _)| *at).min()
    }

    /// An attempt of a hedged call ended: the call's if it passed, failed fatally, came
    /// after the deadline or was the last; after a non-fatal status the next attempt goes
    /// at once (a timer due now).
    pub(super) fn hedge_ended(
        &mut self,
        token: CallToken,
        sent: Instant,
        now: Instant,
        outcome: Result<(), CallFailure>,
    ) {
        let id = token.flow & !RETRY_RUN;
        let thread = &*self.thread;
        let Some(policy) = hedging_of(thread, token.method) else {
            return;
        };
        let timeout = thread.shared.config.timeout;
        let Some(run) = self.retries.get_mut(id) else {
            return;
        };
        let started = *run
            .started
            .get_or_insert_with(|| token.intended.map_or(sent, |at| at.min(sent)));
        let extra_before = run.in_flight.saturating_sub(1);
        run.in_flight = run.in_flight.saturating_sub(1);
        let past_deadline = timeout.is_some_and(|limit| now >= started + limit);
        let stopped = thread.schedule.stop_token().is_cancelled();
        let goes_on = match &outcome {
            Err(failure) => policy.non_fatal(failure.code) && !past_deadline,
            Ok(()) => false,
        };
        let more = run.attempts < policy.max_attempts && !stopped;
        if goes_on && (more || run.in_flight > 0) {
            run.last = outcome.err();
            let in_flight = run.in_flight;
            self.hedge_extra -= (extra_before - in_flight.saturating_sub(1)) as usize;
            if more {
                // Shortcut its hedging delay: the next attempt goes now, as an extra stream
                // beside the ones in flight, or in the call's own slot when none is.
                self.hedge_timers.retain(|(_, timer)| *timer != id);
                if in_flight > 0 {
                    self.hedge_timers.push((now, id));
                } else {
                    self.retries.wait(id, None);
                }
            }
            return;
        }
        // This attempt is the call's: the others still in flight are reset.
        self.hedge_extra -= extra_before as usize;
        if run.in_flight > 0 {
            self.given_up.push(id | RETRY_RUN);
        }
        self.hedge_timers.retain(|(_, timer)| *timer != id);
        if let Some(run) = self.retries.finish(id) {
            self.end_retried(run, sent, now, outcome);
        }
    }
}

/// `method`'s hedging policy in `thread`'s run, if it has one (a free function, so that it
/// can be read while a run of the source is borrowed).
fn hedging_of(thread: &ThreadState, method: u32) -> Option<&HedgingPolicy> {
    thread
        .shared
        .config
        .methods
        .get(method as usize)
        .and_then(|own| own.hedging.as_ref())
}
