//! The flows in progress on one connection of the engine transport: each run's place (the
//! number its step calls carry in `CallToken::flow`), its variables, and which runs wait to
//! send their next step (at once, or after a think time).
//!
//! A run holds its stream slot from its first step to its last: while it waits between
//! steps, the connection starts no other call in that slot, so `-c` counts flows in progress.

use std::time::Instant;

use grpclab_core::Code;

use crate::outcome::CallFailure;
use crate::retry::Jitter;
use crate::thread::ThreadState;

/// One flow in progress.
#[derive(Debug)]
pub(super) struct FlowRun {
    /// Which of the run's flows (`LoadConfig::flows`).
    pub flow: u32,
    /// Its number in the run, for `--details` (0 without details).
    pub number: u64,
    /// The step in flight, or the next one to send.
    pub step: u32,
    /// Its variables' values, by place (empty until a step extracts them).
    pub vars: Vec<String>,
    /// When the flow was scheduled to start (open loop).
    pub intended: Option<Instant>,
    /// When it started: the earlier of its schedule and its first step's send.
    pub started: Option<Instant>,
    /// Whether it counts (false during warmup).
    pub measured: bool,
    /// Its latency, once known at a step's end: a run that ends at its first step took
    /// what that step took (both count from the earlier of its schedule and its send), so
    /// its end need not read the clock's difference again.
    pub latency: Option<std::time::Duration>,
    /// Its first failed step, if any: boxed, so that a run that passes moves a word.
    pub miss: Option<Box<FlowMiss>>,
    /// Attempts of the current step ended so far (a step with a retry policy may make
    /// several).
    pub attempts: u32,
    /// When the current step's first attempt started (the earlier of its schedule and its
    /// send), while it is retried: its latency counts from there.
    pub step_started: Option<Instant>,
}

/// How a flow's first failed step failed.
#[derive(Debug)]
pub(super) enum FlowMiss {
    /// By its status.
    Failure(CallFailure),
    /// Its reply failed its expectation otherwise.
    Unexpected(String),
}

/// What a run does once a step has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterStep {
    /// It is over: [`FlowRun::end`] records it.
    Ended,
    /// It sends its next step at this instant (`None`: at once).
    Next(Option<Instant>),
}

/// How one step call ended, as both transports see it.
pub(super) struct StepEnd<'a> {
    /// When the step was scheduled (the first step of an open-loop flow only).
    pub intended: Option<Instant>,
    pub sent: Instant,
    pub now: Instant,
    pub outcome: Result<(), CallFailure>,
    /// The reply message (unframed; a server stream's first), when the step reads it.
    pub message: Option<&'a [u8]>,
    /// The number of reply messages, when the step reads its reply.
    pub replies: u64,
    /// Which of the target's addresses the call went to.
    pub address: usize,
    /// The backoffs' random shares, for a step with a retry policy.
    pub jitter: &'a mut Jitter,
    /// The reply's kept headers and trailers, when the step extracts some.
    pub headers: &'a [crate::flow::ReplyHeader],
}

impl FlowRun {
    /// A run of flow `flow` about to send its first step.
    pub fn new(thread: &ThreadState, flow: u32, intended: Option<Instant>, measured: bool) -> Self {
        let vars = thread
            .shared
            .config
            .flows
            .get(flow as usize)
            .map_or(0, |plan| plan.vars.len());
        FlowRun {
            flow,
            number: thread.flow_run_number(),
            step: 0,
            // No allocation for a flow without variables (`vec!` of a clone would cost
            // instructions per run even for none).
            vars: (0..vars).map(|_| String::new()).collect(),
            intended,
            started: None,
            measured,
            latency: None,
            miss: None,
            attempts: 0,
            step_started: None,
        }
    }

    /// The method its next step (or the step in flight) calls.
    pub fn method(&self, thread: &ThreadState) -> u32 {
        thread.shared.config.flows[self.flow as usize].steps[self.step as usize].method
    }

    /// The instant its current step was scheduled for: only the first step is scheduled,
    /// the next ones go when the one before ends (and its think time passes).
    pub fn step_intended(&self) -> Option<Instant> {
        if self.step == 0 && self.attempts == 0 {
            self.intended
        } else {
            None
        }
    }

    /// Its current step has ended: judged against the step's expectation (its variables
    /// taken from the reply), recorded as a call and in its step's figures; says whether
    /// the run goes on.
    pub fn step_ended(&mut self, thread: &ThreadState, mut end: StepEnd<'_>) -> AfterStep {
        let plan = &thread.shared.config.flows[self.flow as usize];
        let step = &plan.steps[self.step as usize];
        // One flag read when no method of the run has a policy.
        let policy = match thread.has_retries() {
            true => thread
                .shared
                .config
                .methods
                .get(step.method as usize)
                .and_then(|own| own.retry.as_ref()),
            false => None,
        };
        if let Some(policy) = policy {
            match self.retry(thread, policy, &mut end) {
                Some(at) => {
                    if self.measured {
                        thread.note_retries(step.method, 1);
                    }
                    return AfterStep::Next(Some(at));
                }
                None => {
                    if let Some(started) = self.step_started.take() {
                        // Its latency counts from its first attempt.
                        end.intended = Some(started);
                    }
                    self.attempts = 0;
                }
            }
        }
        let status = end
            .outcome
            .as_ref()
            .map_or_else(|failure| failure.code, |()| Code::Ok);
        // A step that reads nothing of its reply is judged by its status alone.
        let judged = if !step.reads_reply() && status == step.expect.status {
            Ok(())
        } else {
            step.judge(
                status,
                end.message,
                end.replies,
                end.headers,
                &mut self.vars,
            )
        };
        // A call that failed where OK was expected is an error (its status says it all);
        // any other miss is the step's own outcome, apart from the statuses.
        let transport_failure = end.outcome.is_err() && step.expect.status == Code::Ok;
        let unexpected = match &judged {
            Err(miss) if !transport_failure => Some(miss.0.as_str()),
            _ => None,
        };
        let (latency, first) = self.record_end(
            thread,
            end.intended,
            end.sent,
            end.now,
            &end.outcome,
            unexpected,
            end.address,
            step.method,
        );
        // The flow keeps its first failed step's reason, whichever kind it was.
        if self.miss.is_none() {
            match (&end.outcome, unexpected) {
                (Err(failure), _) if transport_failure => {
                    self.miss = Some(Box::new(FlowMiss::Failure(CallFailure::new(
                        failure.code,
                        format!("step {}: {}", step.name, failure.message),
                    ))));
                }
                (_, Some(miss)) => {
                    self.miss = Some(Box::new(FlowMiss::Unexpected(format!(
                        "step {}: {miss}",
                        step.name
                    ))));
                }
                _ => {}
            }
        }
        self.advance(thread, first, latency, end.now, judged.is_ok())
    }

    /// [`FlowRun::step_ended`]'s short way, for the usual constant step: one that an OK
    /// answer passes (see `StepTraits::passes_on_ok`) ended OK. Recorded, and the run
    /// goes on or ends, with nothing judged, kept or retried.
    #[inline]
    pub fn step_passed(
        &mut self,
        thread: &ThreadState,
        token: &grpclab_h2::client::CallToken,
        sent: Instant,
        now: Instant,
        address: usize,
    ) -> AfterStep {
        let (latency, first) = self.record_end(
            thread,
            token.intended,
            sent,
            now,
            &Ok(()),
            None,
            address,
            token.method,
        );
        self.advance(thread, first, latency, now, true)
    }

    /// Records the current step's call, its latency counted from its schedule when it was
    /// sent late (open loop), and notes the run's start at its first step. Returns the
    /// step's latency and whether it was the run's first.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn record_end(
        &mut self,
        thread: &ThreadState,
        intended: Option<Instant>,
        sent: Instant,
        now: Instant,
        outcome: &Result<(), CallFailure>,
        unexpected: Option<&str>,
        address: usize,
        method: u32,
    ) -> (std::time::Duration, bool) {
        let service = now.saturating_duration_since(sent);
        let latency = match intended {
            Some(intended) if intended < sent => now.saturating_duration_since(intended),
            _ => service,
        };
        if self.measured {
            thread.record_step(
                self.number,
                outcome,
                unexpected,
                latency,
                service,
                now,
                address,
                method,
            );
        } else {
            thread.record_warmup_call(latency, now);
        }
        let first = self.started.is_none();
        if first {
            self.started = Some(intended.map_or(sent, |at| at.min(sent)));
        }
        (latency, first)
    }

    /// What the run does after its current step, which `passed` or not: it ends after its
    /// last step or a failed one that stops it (a run that ends at its first step took
    /// that step's `latency`); otherwise its next step goes after the think time.
    #[inline]
    fn advance(
        &mut self,
        thread: &ThreadState,
        first: bool,
        latency: std::time::Duration,
        now: Instant,
        passed: bool,
    ) -> AfterStep {
        let plan = &thread.shared.config.flows[self.flow as usize];
        let Some(step) = plan.steps.get(self.step as usize) else {
            return AfterStep::Ended;
        };
        if self.step as usize + 1 >= plan.steps.len() || (!passed && !step.continue_on_failure) {
            if first {
                self.latency = Some(latency);
            }
            return AfterStep::Ended;
        }
        let think = step.think;
        self.step += 1;
        AfterStep::Next((!think.is_zero()).then(|| now + think))
    }

    /// A step with a retry policy ended an attempt: the instant its next attempt goes when
    /// its status is retryable, attempts remain and the backoff ends before the step's
    /// deadline (its first attempt's start plus -t). Otherwise the step ends here, and
    /// `end` says how: a backoff past the deadline ends it DeadlineExceeded, as does an
    /// answer that came after it.
    #[cold]
    fn retry(
        &mut self,
        thread: &ThreadState,
        policy: &crate::retry::RetryPolicy,
        end: &mut StepEnd<'_>,
    ) -> Option<Instant> {
        self.attempts += 1;
        let (intended, sent) = (end.intended, end.sent);
        let started = *self
            .step_started
            .get_or_insert_with(|| intended.map_or(sent, |at| at.min(sent)));
        let deadline = thread.shared.config.timeout.map(|limit| started + limit);
        let retryable = match &end.outcome {
            Err(failure) => policy.retries(failure.code, self.attempts),
            Ok(()) => false,
        };
        if retryable && !thread.schedule.stop_token().is_cancelled() {
            let at = end.now + policy.backoff(self.attempts, end.jitter.share());
            if deadline.is_none_or(|deadline| at < deadline) {
                return Some(at);
            }
            end.outcome = Err(CallFailure::deadline_before_attempt(self.attempts + 1));
        } else if end.outcome.is_ok() && deadline.is_some_and(|deadline| end.now > deadline) {
            end.outcome = Err(CallFailure::deadline_over_attempts(self.attempts));
        }
        None
    }

    /// The run is over: its end in the flow's figures, its ticket with it (a warmup
    /// flow's steps were warmup calls: nothing more).
    pub fn end(self, thread: &ThreadState, now: Instant) {
        if !self.measured {
            return;
        }
        let latency = self.latency(now);
        let (outcome, unexpected) = match self.miss.map(|miss| *miss) {
            None => (Ok(()), None),
            Some(FlowMiss::Failure(failure)) => (Err(failure), None),
            Some(FlowMiss::Unexpected(reason)) => (Ok(()), Some(reason)),
        };
        thread.end_flow(self.flow, &outcome, unexpected.as_deref(), latency, now);
    }

    /// From its start to `now`.
    fn latency(&self, now: Instant) -> std::time::Duration {
        self.latency.unwrap_or_else(|| {
            let started = self.started.or(self.intended).unwrap_or(now);
            now.saturating_duration_since(started)
        })
    }

    /// The run stopped before it sent its next step: it ends Canceled at that step (unless
    /// a step failed by its status before; a reply that failed its expectation is kept
    /// beside).
    pub fn cancel(self, thread: &ThreadState, now: Instant) {
        if matches!(self.miss.as_deref(), Some(FlowMiss::Failure(_))) || !self.measured {
            return self.end(thread, now);
        }
        let step = thread.shared.config.flows[self.flow as usize]
            .steps
            .get(self.step as usize)
            .map_or("?", |step| step.name.as_str());
        let failure = CallFailure::new(
            Code::Canceled,
            format!("step {step}: the run ended before it was sent"),
        );
        let latency = self.latency(now);
        let unexpected = match self.miss.map(|miss| *miss) {
            Some(FlowMiss::Unexpected(reason)) => Some(reason),
            _ => None,
        };
        thread.end_flow(
            self.flow,
            &Err(failure),
            unexpected.as_deref(),
            latency,
            now,
        );
    }
}

/// The flow runs of one connection.
pub(super) type FlowRuns = Runs<FlowRun>;

/// Runs of one connection (flows in progress, calls between retry attempts): each in a
/// place whose number (plus one) its calls carry, and which of them wait to send their
/// next call (at once, or at an instant).
#[derive(Debug)]
pub(super) struct Runs<T> {
    /// Runs by place; `None` is a free place.
    runs: Vec<Option<T>>,
    free: Vec<u32>,
    /// Runs waiting to send their next step, with the instant it may go (`None`: at once).
    ready: Vec<(Option<Instant>, u32)>,
    /// Runs in progress (in flight or waiting).
    active: usize,
}

impl<T> Default for Runs<T> {
    fn default() -> Self {
        Runs {
            runs: Vec::new(),
            free: Vec::new(),
            ready: Vec::new(),
            active: 0,
        }
    }
}

impl<T> Runs<T> {
    /// Whether any run is in progress.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active > 0
    }

    /// Runs waiting between steps: each holds a stream slot.
    pub fn waiting(&self) -> usize {
        self.ready.len()
    }

    /// Takes a place for `run`; returns its id (place + 1, never 0).
    pub fn start(&mut self, run: T) -> u32 {
        self.active += 1;
        match self.free.pop() {
            Some(place) => {
                self.runs[place as usize] = Some(run);
                place + 1
            }
            None => {
                self.runs.push(Some(run));
                self.runs.len() as u32
            }
        }
    }

    /// The run with this id.
    pub fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        self.runs.get_mut(id.checked_sub(1)? as usize)?.as_mut()
    }

    /// The run is over: its place is freed.
    pub fn finish(&mut self, id: u32) -> Option<T> {
        let place = id.checked_sub(1)?;
        let run = self.runs.get_mut(place as usize)?.take()?;
        self.free.push(place);
        self.active -= 1;
        Some(run)
    }

    /// The run sends its next step at `at` (`None`: as soon as it is asked for).
    pub fn wait(&mut self, id: u32, at: Option<Instant>) {
        self.ready.push((at, id));
    }

    /// A waiting run whose next step may go now, taken out of the waiting ones; `now` is
    /// read only when some run waits for a time.
    #[inline]
    pub fn due(&mut self, now: impl FnOnce() -> Instant) -> Option<u32> {
        match self.ready.first() {
            None => None,
            // The usual case of a flow between steps without a think time: at once.
            Some((None, id)) => {
                let id = *id;
                self.ready.swap_remove(0);
                Some(id)
            }
            Some(_) => self.due_scan(now),
        }
    }

    /// [`Runs::due`] past a first run that waits for a time.
    fn due_scan(&mut self, now: impl FnOnce() -> Instant) -> Option<u32> {
        let mut now = Some(now);
        let mut clock = None;
        let position = self.ready.iter().position(|(at, _)| match at {
            None => true,
            Some(at) => {
                let now =
                    *clock.get_or_insert_with(|| now.take().map_or_else(Instant::now, |f| f()));
                *at <= now
            }
        })?;
        Some(self.ready.swap_remove(position).1)
    }

    /// When the earliest waiting run may send its next step (`None`: none waits for a time).
    pub fn earliest(&self) -> Option<Instant> {
        self.ready.iter().filter_map(|(at, _)| *at).min()
    }

    /// Every run still in progress, taken out (the run ended before they did).
    pub fn take_all(&mut self) -> Vec<T> {
        self.ready.clear();
        self.free.clear();
        self.active = 0;
        self.runs.drain(..).flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run(flow: u32) -> FlowRun {
        FlowRun {
            flow,
            number: 0,
            step: 0,
            vars: Vec::new(),
            intended: None,
            started: None,
            measured: true,
            latency: None,
            miss: None,
            attempts: 0,
            step_started: None,
        }
    }

    #[test]
    fn places_are_reused_and_ids_never_zero() {
        let mut runs = FlowRuns::default();
        let a = runs.start(run(0));
        let b = runs.start(run(1));
        assert_eq!((a, b), (1, 2));
        assert_eq!(runs.finish(a).map(|r| r.flow), Some(0));
        assert!(runs.finish(a).is_none(), "a place is freed once");
        assert_eq!(runs.start(run(2)), 1);
        assert!(runs.get_mut(0).is_none());
        assert_eq!(runs.take_all().len(), 2);
        assert!(!runs.is_active());
    }

    #[test]
    fn a_run_waiting_for_a_time_is_due_only_then() {
        let mut runs = FlowRuns::default();
        let now = Instant::now();
        let later = runs.start(run(0));
        let at_once = runs.start(run(0));
        runs.wait(later, Some(now + Duration::from_secs(5)));
        runs.wait(at_once, None);
        assert_eq!(runs.due(|| now), Some(at_once));
        assert_eq!(runs.due(|| now), None);
        assert_eq!(runs.earliest(), Some(now + Duration::from_secs(5)));
        assert_eq!(runs.due(|| now + Duration::from_secs(5)), Some(later));
        assert_eq!(runs.waiting(), 0);
    }
}
