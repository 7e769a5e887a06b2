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
    /// Open loop: nanoseconds between intended send times.
    interval_ns: Option<f64>,
    /// Measured tickets handed out (the `-n` budget).
    taken: AtomicU64,
    /// Open loop: the next call's index in the schedule.
    next_slot: AtomicU64,
    stop: CancellationToken,
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
            interval_ns: match pacing {
                Pacing::ClosedLoop => None,
                Pacing::OpenLoop { rate } => Some(1e9 / rate),
            },
            taken: AtomicU64::new(0),
            next_slot: AtomicU64::new(0),
            stop,
        }
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
        let intended = match self.interval_ns {
            None => {
                let now = Instant::now();
                if self.end.is_some_and(|end| now >= end) {
                    self.stop.cancel();
                    return Ticket::Stop;
                }
                let measured = now >= self.measure_from;
                if measured && !self.take_budget() {
                    return Ticket::Stop;
                }
                return Ticket::Send {
                    intended: None,
                    measured,
                };
            }
            Some(interval_ns) => {
                let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
                self.start + Duration::from_nanos((slot as f64 * interval_ns) as u64)
            }
        };
        if self.end.is_some_and(|end| intended >= end) {
            return Ticket::Stop;
        }
        let measured = intended >= self.measure_from;
        if measured && !self.take_budget() {
            return Ticket::Stop;
        }
        Ticket::Send {
            intended: Some(intended),
            measured,
        }
    }

    fn take_budget(&self) -> bool {
        match self.total {
            None => true,
            Some(total) => self.taken.fetch_add(1, Ordering::Relaxed) < total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
