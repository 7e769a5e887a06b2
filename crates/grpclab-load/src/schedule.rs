//! The schedule every stream of every client thread draws its next call from.
//!
//! Closed loop: a stream may send as soon as its previous call ends. Open loop: call `k` is
//! *intended* for `start + k / rate`, whichever stream takes it; when every stream is busy the
//! call waits for one, and that wait is part of its latency (latency runs from the intended
//! time: the coordinated-omission correction). The schedule also owns the run's end: the
//! measured duration, the `-n` budget, and the stop token that Ctrl-C cancels.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::config::{Pacing, Shard};
use crate::staircase::{Staircase, Steps};

/// Permission to send one call, or the order to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ticket {
    /// Send a call.
    Send {
        /// Open loop: when the call should go out. Closed loop: `None` (now).
        intended: Option<Instant>,
        /// Whether the call belongs to the measured window (false during warmup).
        measured: bool,
    },
    /// The run is over for this stream.
    Stop,
}

/// Shared by all client threads for one run.
#[derive(Debug)]
pub(crate) struct Schedule {
    start: Instant,
    measure_from: Instant,
    end: Option<Instant>,
    total: Option<u64>,
    /// When each call is intended (open loop) or none (closed loop).
    rate: RateShape,
    /// Measured tickets handed out (the `-n` budget).
    taken: AtomicU64,
    /// Open loop: the next call's index in the schedule.
    next_slot: AtomicU64,
    stop: CancellationToken,
    /// Cancelled once the schedule hands out no more tickets: the `-n` budget is spent, the
    /// duration has passed, or `stop` was cancelled (it is a child of `stop`). Calls still
    /// running then have the drain limit, counted from [`Schedule::last_due`], to finish.
    issued_all: CancellationToken,
    /// Nanoseconds after `start` (plus one; 0 = not yet) at which the last ticket handed out
    /// is due: its intended time (open loop) or when it was taken (closed loop).
    last_due_ns: AtomicU64,
    /// A concurrency schedule (streams allowed over time, all connections together) and the
    /// number of connections it is spread over; `None`: every stream, always.
    concurrency: Option<(Staircase, usize)>,
    /// `--shard`: this generator takes every `of`-th slot of the global schedule (from slot
    /// `index`) and its share of a concurrency schedule's streams.
    shard: Option<Shard>,
}

impl Schedule {
    /// A schedule starting at `start` (now, or a shared start a little in the past: calls due
    /// before now are late and count so). `stop` is cancelled when the run must end early
    /// (Ctrl-C); the schedule cancels it too once the duration has passed.
    pub(crate) fn new(
        start: Instant,
        pacing: Pacing,
        warmup: Duration,
        duration: Option<Duration>,
        total: Option<u64>,
        stop: CancellationToken,
    ) -> Schedule {
        let measure_from = start + warmup;
        Schedule {
            start,
            measure_from,
            end: duration.map(|d| measure_from + d),
            total,
            rate: RateShape::of(pacing),
            taken: AtomicU64::new(0),
            next_slot: AtomicU64::new(0),
            issued_all: stop.child_token(),
            stop,
            last_due_ns: AtomicU64::new(0),
            concurrency: None,
            shard: None,
        }
    }

    /// Makes this generator's schedule the `shard`'s part of the global one.
    pub(crate) fn take_shard(&mut self, shard: Shard) {
        self.shard = Some(shard);
    }

    /// Open loop: the global slot of this generator's `local`-th call.
    fn global_slot(&self, local: u64) -> u64 {
        match self.shard {
            Some(shard) => shard.global(local),
            None => local,
        }
    }

    /// Limits the streams that may be busy to `streams` (over all `connections`) as time goes.
    pub(crate) fn limit_concurrency(&mut self, streams: Staircase, connections: usize) {
        self.concurrency = Some((streams, connections.max(1)));
    }

    /// How many of connection `connection`'s streams may have a call in flight now, and
    /// when that next changes (`None`: never). The scheduled total is spread over the
    /// connections as the engine spreads streams: the first `total % connections`
    /// connections take one more. Without a concurrency schedule: every stream, always.
    pub(crate) fn streams_allowed(&self, connection: usize) -> (usize, Option<Instant>) {
        let Some((streams, connections)) = &self.concurrency else {
            return (usize::MAX, None);
        };
        // The clock is read here, not passed in: a connection's notion of "now" may lag (it
        // advances on timer ticks), and a schedule read late would keep a falling step's
        // streams busy.
        let since_ns = self.start.elapsed().as_nanos() as f64;
        let (total, next_ns) = streams.at(since_ns);
        let mut total = total.max(0.0) as usize;
        if let Some(shard) = self.shard {
            total = shard.share(total as u64) as usize;
        }
        let share = total / connections + usize::from(connection < total % connections);
        (
            share,
            next_ns.map(|ns| self.start + Duration::from_nanos(ns as u64)),
        )
    }

    /// Cancelled once no more tickets will be handed out (see the field).
    pub(crate) fn issued_all(&self) -> &CancellationToken {
        &self.issued_all
    }

    /// When the last ticket handed out is due; `None` while tickets are still being handed
    /// out, or when the run was stopped before the budget or duration ran out.
    pub(crate) fn last_due(&self) -> Option<Instant> {
        match self.last_due_ns.load(Ordering::Acquire) {
            0 => None,
            ns => Some(self.start + Duration::from_nanos(ns - 1)),
        }
    }

    /// No more tickets: the last one handed out is due at `due`.
    fn run_out(&self, due: Instant) {
        let ns = u64::try_from(due.saturating_duration_since(self.start).as_nanos())
            .unwrap_or(u64::MAX - 1)
            + 1;
        self.last_due_ns.fetch_max(ns, Ordering::AcqRel);
        self.issued_all.cancel();
    }

    /// When the schedule began: the first call's time, warmup included.
    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    /// The start of the measured window.
    pub(crate) fn measure_from(&self) -> Instant {
        self.measure_from
    }

    /// The end of the measured window, when the run has a duration.
    pub(crate) fn end(&self) -> Option<Instant> {
        self.end
    }

    /// The token cancelled when the run stops issuing calls.
    pub(crate) fn stop_token(&self) -> &CancellationToken {
        &self.stop
    }

    /// The next call for a stream to send; `now` reads the time (a closed loop checks the
    /// run's end and warmup with it; an open loop's calls have their own times).
    #[inline]
    pub(crate) fn next_ticket(&self, now: impl FnOnce() -> Instant) -> Ticket {
        if self.stop.is_cancelled() {
            return Ticket::Stop;
        }
        let intended = match &self.rate {
            RateShape::Closed => {
                let now = now();
                if self.end.is_some_and(|end| now >= end) {
                    self.run_out(now);
                    self.stop.cancel();
                    return Ticket::Stop;
                }
                let measured = now >= self.measure_from;
                if measured && !self.take_budget(now) {
                    return Ticket::Stop;
                }
                return Ticket::Send {
                    intended: None,
                    measured,
                };
            }
            RateShape::Constant { .. } | RateShape::Steps(_) => {
                self.start + self.slot_time(self.next_slot.fetch_add(1, Ordering::Relaxed))
            }
        };
        if let Some(end) = self.end.filter(|end| intended >= *end) {
            self.run_out(end);
            return Ticket::Stop;
        }
        let measured = intended >= self.measure_from;
        if measured && !self.take_budget(intended) {
            return Ticket::Stop;
        }
        Ticket::Send {
            intended: Some(intended),
            measured,
        }
    }

    /// Open loop: when this generator's `local`-th call is intended, after the start.
    /// Always inlined: every open-loop call asks, and the compiler's own choice flips with
    /// unrelated changes (~38 instructions a call when it is not).
    #[inline(always)]
    fn slot_time(&self, local: u64) -> Duration {
        let slot = self.global_slot(local);
        match &self.rate {
            RateShape::Closed => Duration::ZERO,
            RateShape::Constant { interval_ns } => {
                Duration::from_nanos((slot as f64 * interval_ns) as u64)
            }
            RateShape::Steps(steps) => Duration::from_nanos(steps.slot_time_ns(slot) as u64),
        }
    }

    /// Open loop: the first of this generator's calls intended at or after `since_start`.
    fn first_slot_from(&self, since_start: Duration) -> u64 {
        // Slot times only grow: find an upper bound by doubling, then bisect.
        let mut high = 1u64;
        while self.slot_time(high) < since_start && high < u64::MAX / 4 {
            high *= 2;
        }
        let mut low = 0u64;
        while low < high {
            let middle = low + (high - low) / 2;
            if self.slot_time(middle) < since_start {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        low
    }

    /// Measured calls handed out so far: an open loop's slots from the window's first (a
    /// slot handed out past the end counts too, briefly), a closed loop's `-n` budget taken.
    /// `None` for a timed closed loop, which keeps no count (every stream is busy). Read by
    /// the controller for its progress snapshots, never on a call's path.
    pub(crate) fn measured_issued(&self) -> Option<u64> {
        match self.rate {
            RateShape::Closed => self.total.map(|_| self.taken.load(Ordering::Relaxed)),
            RateShape::Constant { .. } | RateShape::Steps(_) => {
                let issued = self.next_slot.load(Ordering::Relaxed);
                let first =
                    self.first_slot_from(self.measure_from.saturating_duration_since(self.start));
                Some(issued.saturating_sub(first))
            }
        }
    }

    /// A timed open loop: how many of this generator's calls the schedule intends inside the
    /// measured window. With the calls recorded (and left out) it says how many came due and
    /// were never sent. `None` for a closed loop or a run without a duration.
    pub(crate) fn calls_in_window(&self) -> Option<u64> {
        if matches!(self.rate, RateShape::Closed) {
            return None;
        }
        let end = self.end?;
        let from = self.first_slot_from(self.measure_from - self.start);
        let to = self.first_slot_from(end - self.start);
        Some(to.saturating_sub(from))
    }

    /// Takes one measured call from the `-n` budget for a call due at `due`; the call that
    /// spends the budget marks the schedule as run out.
    fn take_budget(&self, due: Instant) -> bool {
        match self.total {
            None => true,
            Some(total) => {
                let taken = self.taken.fetch_add(1, Ordering::Relaxed);
                if taken + 1 >= total {
                    self.run_out(due);
                }
                taken < total
            }
        }
    }
}

/// How intended send times are spaced.
#[derive(Debug)]
enum RateShape {
    /// Closed loop: no intended times.
    Closed,
    /// One rate: call `k` at `k * interval_ns`.
    Constant { interval_ns: f64 },
    /// A rate that changes in steps.
    Steps(Steps),
}

impl RateShape {
    fn of(pacing: Pacing) -> RateShape {
        match pacing {
            Pacing::ClosedLoop => RateShape::Closed,
            Pacing::OpenLoop { rate } => RateShape::Constant {
                interval_ns: 1e9 / rate,
            },
            Pacing::Steps {
                start,
                step,
                step_duration,
                end,
                max_duration,
            } => RateShape::Steps(Steps::new(start, step, step_duration, end, max_duration)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_hands_out_exactly_total() {
        let schedule = Schedule::new(
            Instant::now(),
            Pacing::ClosedLoop,
            Duration::ZERO,
            None,
            Some(3),
            CancellationToken::new(),
        );
        let sends = (0..10)
            .filter(|_| matches!(schedule.next_ticket(Instant::now), Ticket::Send { .. }))
            .count();
        assert_eq!(sends, 3);
        assert!(schedule.issued_all().is_cancelled());
        assert!(schedule.last_due().is_some());
    }

    #[test]
    fn the_last_due_time_of_an_open_loop_budget_is_its_last_call() {
        let schedule = Schedule::new(
            Instant::now(),
            Pacing::OpenLoop { rate: 100.0 },
            Duration::ZERO,
            None,
            Some(5),
            CancellationToken::new(),
        );
        let mut last = None;
        for _ in 0..4 {
            assert!(!schedule.issued_all().is_cancelled());
            last = Some(schedule.next_ticket(Instant::now));
        }
        let Some(Ticket::Send {
            intended: Some(fourth),
            ..
        }) = last
        else {
            panic!("open loop tickets have intended times: {last:?}");
        };
        let Ticket::Send {
            intended: Some(fifth),
            ..
        } = schedule.next_ticket(Instant::now)
        else {
            panic!("the fifth ticket is within the budget");
        };
        assert_eq!(fifth - fourth, Duration::from_millis(10));
        assert!(schedule.issued_all().is_cancelled());
        assert_eq!(schedule.last_due(), Some(fifth));
        assert_eq!(schedule.next_ticket(Instant::now), Ticket::Stop);
    }

    #[test]
    fn open_loop_spaces_intended_times_by_the_rate() {
        let schedule = Schedule::new(
            Instant::now(),
            Pacing::OpenLoop { rate: 1000.0 },
            Duration::from_millis(2),
            None,
            Some(100),
            CancellationToken::new(),
        );
        let times: Vec<(Instant, bool)> = (0..4)
            .map(|_| match schedule.next_ticket(Instant::now) {
                Ticket::Send {
                    intended: Some(at),
                    measured,
                } => (at, measured),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(times[1].0 - times[0].0, Duration::from_millis(1));
        assert_eq!(times[3].0 - times[0].0, Duration::from_millis(3));
        // 2 ms of warmup: slots 0 and 1 are not measured, 2 and 3 are.
        assert_eq!(
            times.iter().map(|t| t.1).collect::<Vec<_>>(),
            [false, false, true, true]
        );
    }

    #[test]
    fn cancelled_schedules_stop() {
        let stop = CancellationToken::new();
        let schedule = Schedule::new(
            Instant::now(),
            Pacing::ClosedLoop,
            Duration::ZERO,
            None,
            None,
            stop.clone(),
        );
        assert!(matches!(
            schedule.next_ticket(Instant::now),
            Ticket::Send { .. }
        ));
        stop.cancel();
        assert_eq!(schedule.next_ticket(Instant::now), Ticket::Stop);
    }

    /// The intended times of the first `calls` tickets of a schedule.
    fn intended_times(schedule: &Schedule, calls: usize) -> Vec<Instant> {
        (0..calls)
            .map(|_| match schedule.next_ticket(Instant::now) {
                Ticket::Send {
                    intended: Some(at), ..
                } => at,
                other => panic!("open loop tickets have intended times: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn shards_take_every_nth_call_of_one_global_schedule() {
        // A step ramp, so the spacing changes under the shards: their union must still be
        // the single generator's schedule, call for call.
        let pacing = Pacing::Steps {
            start: 1000.0,
            step: 1000.0,
            step_duration: Duration::from_millis(10),
            end: Some(5000.0),
            max_duration: None,
        };
        let start = Instant::now();
        let make = || {
            Schedule::new(
                start,
                pacing,
                Duration::ZERO,
                Some(Duration::from_secs(1)),
                None,
                CancellationToken::new(),
            )
        };
        let whole = intended_times(&make(), 300);
        let mut union = Vec::new();
        for index in 0..3 {
            let mut schedule = make();
            schedule.take_shard(Shard { index, of: 3 });
            let times = intended_times(&schedule, 100);
            for (local, at) in times.iter().enumerate() {
                assert_eq!(
                    *at,
                    whole[local * 3 + index as usize],
                    "shard {index} call {local}"
                );
            }
            union.extend(times);
        }
        union.sort();
        assert_eq!(union, whole);
    }

    #[test]
    fn shards_split_a_concurrency_schedule_without_losing_a_stream() {
        let start = Instant::now();
        for streams in [1u64, 5, 7, 64] {
            let mut allowed = 0;
            for index in 0..4 {
                let mut schedule = Schedule::new(
                    start,
                    Pacing::ClosedLoop,
                    Duration::ZERO,
                    None,
                    Some(1),
                    CancellationToken::new(),
                );
                schedule.limit_concurrency(
                    Staircase::new(streams as f64, 1.0, Duration::from_secs(3600), None, None),
                    1,
                );
                schedule.take_shard(Shard { index, of: 4 });
                allowed += schedule.streams_allowed(0).0 as u64;
            }
            assert_eq!(allowed, streams);
        }
    }

    #[test]
    fn the_calls_in_a_window_are_counted_from_the_same_times_the_tickets_use() {
        let schedule = |pacing, shard: Option<Shard>| {
            let mut schedule = Schedule::new(
                Instant::now(),
                pacing,
                Duration::from_millis(500),
                Some(Duration::from_secs(1)),
                None,
                CancellationToken::new(),
            );
            if let Some(shard) = shard {
                schedule.take_shard(shard);
            }
            schedule
        };
        let rate = Pacing::OpenLoop { rate: 100.0 };
        // Calls 50..150 of the global schedule fall in [0.5 s, 1.5 s).
        assert_eq!(schedule(rate, None).calls_in_window(), Some(100));
        // Shard 1 of 3 takes the global slots 1, 4, 7, ...: 52, 55, ..., 148 in the window.
        let shard = Shard { index: 1, of: 3 };
        assert_eq!(schedule(rate, Some(shard)).calls_in_window(), Some(33));
        // The same count, ticket by ticket.
        let counted = schedule(rate, Some(shard));
        let mut measured = 0;
        while let Ticket::Send { measured: m, .. } = counted.next_ticket(Instant::now) {
            measured += u64::from(m);
        }
        assert_eq!(measured, 33);
        // Steps: 10 req/s for 1 s then 20 req/s: [0.5 s, 1.5 s) holds 5 + 10 calls.
        let steps = Pacing::Steps {
            start: 10.0,
            step: 10.0,
            step_duration: Duration::from_secs(1),
            end: Some(20.0),
            max_duration: None,
        };
        assert_eq!(schedule(steps, None).calls_in_window(), Some(15));
        assert_eq!(schedule(Pacing::ClosedLoop, None).calls_in_window(), None);
    }
}
