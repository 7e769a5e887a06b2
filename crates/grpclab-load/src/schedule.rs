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

use crate::config::Pacing;

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
}

impl Schedule {
    /// A schedule starting now. `stop` is cancelled when the run must end early (Ctrl-C);
    /// the schedule cancels it too once the duration has passed.
    pub(crate) fn new(
        pacing: Pacing,
        warmup: Duration,
        duration: Option<Duration>,
        total: Option<u64>,
        stop: CancellationToken,
    ) -> Schedule {
        let start = Instant::now();
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
        }
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

    /// The next call for a stream to send.
    pub(crate) fn next_ticket(&self) -> Ticket {
        if self.stop.is_cancelled() {
            return Ticket::Stop;
        }
        let intended = match &self.rate {
            RateShape::Closed => {
                let now = Instant::now();
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
            RateShape::Constant { interval_ns } => {
                let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
                self.start + Duration::from_nanos((slot as f64 * interval_ns) as u64)
            }
            RateShape::Steps(steps) => {
                let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
                self.start + Duration::from_nanos(steps.slot_time_ns(slot) as u64)
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

/// A stepped rate as segments: from `start_ns` (after the schedule's start) on, calls go out
/// at `rate` per second, the first of them being call number `first_slot`. The last segment
/// holds for ever.
#[derive(Debug)]
struct Steps {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, Copy)]
struct Segment {
    start_ns: f64,
    first_slot: f64,
    rate: f64,
}

/// Steps at most: past this the last rate holds (10,000 one-second steps is 2.8 hours).
const MAX_STEPS: usize = 10_000;

impl Steps {
    fn new(
        start: f64,
        step: f64,
        step_duration: Duration,
        end: Option<f64>,
        max_duration: Option<Duration>,
    ) -> Steps {
        let step_ns = step_duration.as_nanos() as f64;
        let limit_ns = max_duration.map(|d| d.as_nanos() as f64);
        let reached = |rate: f64| match end {
            Some(end) => (step > 0.0 && rate >= end) || (step < 0.0 && rate <= end),
            None => false,
        };
        let mut segments = vec![Segment {
            start_ns: 0.0,
            first_slot: 0.0,
            rate: start,
        }];
        while segments.len() < MAX_STEPS {
            let last = segments[segments.len() - 1];
            let next_ns = last.start_ns + step_ns;
            if reached(last.rate) || limit_ns.is_some_and(|limit| next_ns >= limit) {
                break;
            }
            let mut rate = last.rate + step;
            if let Some(end) = end {
                rate = if step > 0.0 {
                    rate.min(end)
                } else {
                    rate.max(end)
                };
            }
            segments.push(Segment {
                start_ns: next_ns,
                first_slot: last.first_slot + last.rate * step_ns / 1e9,
                rate,
            });
        }
        Steps { segments }
    }

    /// When call `slot` is intended, in nanoseconds after the schedule's start.
    fn slot_time_ns(&self, slot: u64) -> f64 {
        let slot = slot as f64;
        let index = self
            .segments
            .partition_point(|segment| segment.first_slot <= slot)
            .saturating_sub(1);
        let segment = self.segments[index];
        segment.start_ns + (slot - segment.first_slot) * 1e9 / segment.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stepped_rates_space_calls_by_the_rate_of_their_step() {
        // 10 req/s for 1 s, then 20 req/s for 1 s, then 30 req/s held (the end).
        let steps = Steps::new(10.0, 10.0, Duration::from_secs(1), Some(30.0), None);
        assert_eq!(steps.segments.len(), 3);
        let ms = |slot| (steps.slot_time_ns(slot) / 1e6).round() as u64;
        assert_eq!(ms(0), 0);
        assert_eq!(ms(9), 900);
        assert_eq!(ms(10), 1000, "the 11th call starts the second step");
        assert_eq!(ms(11), 1050);
        assert_eq!(ms(30), 2000);
        assert_eq!(ms(33), 2100, "30 req/s holds");
        assert_eq!(ms(330), 12000);
        // Falling, stopped by the end rate; and a maximum duration that stops the steps.
        let down = Steps::new(200.0, -50.0, Duration::from_secs(1), Some(100.0), None);
        let rates: Vec<f64> = down.segments.iter().map(|s| s.rate).collect();
        assert_eq!(rates, [200.0, 150.0, 100.0]);
        let capped = Steps::new(
            10.0,
            10.0,
            Duration::from_secs(1),
            None,
            Some(Duration::from_secs(3)),
        );
        let rates: Vec<f64> = capped.segments.iter().map(|s| s.rate).collect();
        assert_eq!(rates, [10.0, 20.0, 30.0], "changes for 3 s, then holds");
        let endless = Steps::new(1.0, 1.0, Duration::from_secs(1), None, None);
        assert_eq!(endless.segments.len(), MAX_STEPS);
    }

    #[test]
    fn budget_hands_out_exactly_total() {
        let schedule = Schedule::new(
            Pacing::ClosedLoop,
            Duration::ZERO,
            None,
            Some(3),
            CancellationToken::new(),
        );
        let sends = (0..10)
            .filter(|_| matches!(schedule.next_ticket(), Ticket::Send { .. }))
            .count();
        assert_eq!(sends, 3);
        assert!(schedule.issued_all().is_cancelled());
        assert!(schedule.last_due().is_some());
    }

    #[test]
    fn the_last_due_time_of_an_open_loop_budget_is_its_last_call() {
        let schedule = Schedule::new(
            Pacing::OpenLoop { rate: 100.0 },
            Duration::ZERO,
            None,
            Some(5),
            CancellationToken::new(),
        );
        let mut last = None;
        for _ in 0..4 {
            assert!(!schedule.issued_all().is_cancelled());
            last = Some(schedule.next_ticket());
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
        } = schedule.next_ticket()
        else {
            panic!("the fifth ticket is within the budget");
        };
        assert_eq!(fifth - fourth, Duration::from_millis(10));
        assert!(schedule.issued_all().is_cancelled());
        assert_eq!(schedule.last_due(), Some(fifth));
        assert_eq!(schedule.next_ticket(), Ticket::Stop);
    }

    #[test]
    fn open_loop_spaces_intended_times_by_the_rate() {
        let schedule = Schedule::new(
            Pacing::OpenLoop { rate: 1000.0 },
            Duration::from_millis(2),
            None,
            Some(100),
            CancellationToken::new(),
        );
        let times: Vec<(Instant, bool)> = (0..4)
            .map(|_| match schedule.next_ticket() {
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
        let schedule = Schedule::new(Pacing::ClosedLoop, Duration::ZERO, None, None, stop.clone());
        assert!(matches!(schedule.next_ticket(), Ticket::Send { .. }));
        stop.cancel();
        assert_eq!(schedule.next_ticket(), Ticket::Stop);
    }
}
