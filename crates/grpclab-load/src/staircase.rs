//! Values that change in steps: ghz's `step` and `line` schedules, for rates and for
//! concurrency. Pure arithmetic over time; both the configuration (to check a schedule's
//! peak) and the [`Schedule`](crate::schedule) (to space calls and limit streams) use it.

use std::time::Duration;

/// A value that changes in steps (ghz's `step` and `line` schedules, for rates and for
/// concurrency): `start`, then `step` more (or fewer) every `step_duration`, until it reaches
/// `end` or `max_duration` has passed since the schedule began; then it holds. As segments:
/// from `start_ns` (after the schedule's start) on, the value is `value`; the last segment
/// holds for ever.
#[derive(Debug, Clone)]
pub(crate) struct Staircase {
    segments: Vec<Stair>,
}

#[derive(Debug, Clone, Copy)]
struct Stair {
    start_ns: f64,
    value: f64,
}

/// Steps at most: past this the last value holds (10,000 one-second steps is 2.8 hours).
const MAX_STEPS: usize = 10_000;

impl Staircase {
    pub(crate) fn new(
        start: f64,
        step: f64,
        step_duration: Duration,
        end: Option<f64>,
        max_duration: Option<Duration>,
    ) -> Staircase {
        let step_ns = step_duration.as_nanos() as f64;
        let limit_ns = max_duration.map(|d| d.as_nanos() as f64);
        let reached = |value: f64| match end {
            Some(end) => (step > 0.0 && value >= end) || (step < 0.0 && value <= end),
            None => false,
        };
        let mut segments = vec![Stair {
            start_ns: 0.0,
            value: start,
        }];
        while segments.len() < MAX_STEPS && step != 0.0 && step_ns > 0.0 {
            let last = segments[segments.len() - 1];
            let next_ns = last.start_ns + step_ns;
            if reached(last.value) || limit_ns.is_some_and(|limit| next_ns >= limit) {
                break;
            }
            let mut value = last.value + step;
            if let Some(end) = end {
                value = if step > 0.0 {
                    value.min(end)
                } else {
                    value.max(end)
                };
            }
            segments.push(Stair {
                start_ns: next_ns,
                value,
            });
        }
        Staircase { segments }
    }

    /// The value `at_ns` after the schedule's start, and when (in ns after the start) it
    /// next changes, if it does.
    pub(crate) fn at(&self, at_ns: f64) -> (f64, Option<f64>) {
        let index = self
            .segments
            .partition_point(|stair| stair.start_ns <= at_ns)
            .saturating_sub(1);
        (
            self.segments[index].value,
            self.segments.get(index + 1).map(|next| next.start_ns),
        )
    }

    /// The largest value the schedule takes.
    pub(crate) fn peak(&self) -> f64 {
        self.segments
            .iter()
            .map(|stair| stair.value)
            .fold(f64::MIN, f64::max)
    }
}

/// A stepped rate: the staircase of rates, with the number of the first call of each step.
#[derive(Debug)]
pub(crate) struct Steps {
    rates: Staircase,
    /// For each stair, how many calls were scheduled before it began.
    first_slots: Vec<f64>,
}

impl Steps {
    pub(crate) fn new(
        start: f64,
        step: f64,
        step_duration: Duration,
        end: Option<f64>,
        max_duration: Option<Duration>,
    ) -> Steps {
        let rates = Staircase::new(start, step, step_duration, end, max_duration);
        let mut first_slots = Vec::with_capacity(rates.segments.len());
        let mut slots = 0.0;
        for (index, stair) in rates.segments.iter().enumerate() {
            first_slots.push(slots);
            if let Some(next) = rates.segments.get(index + 1) {
                slots += stair.value * (next.start_ns - stair.start_ns) / 1e9;
            }
        }
        Steps { rates, first_slots }
    }

    /// When call `slot` is intended, in nanoseconds after the schedule's start.
    pub(crate) fn slot_time_ns(&self, slot: u64) -> f64 {
        let slot = slot as f64;
        let index = self
            .first_slots
            .partition_point(|first| *first <= slot)
            .saturating_sub(1);
        let stair = self.rates.segments[index];
        stair.start_ns + (slot - self.first_slots[index]) * 1e9 / stair.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stepped_rates_space_calls_by_the_rate_of_their_step() {
        // 10 req/s for 1 s, then 20 req/s for 1 s, then 30 req/s held (the end).
        let steps = Steps::new(10.0, 10.0, Duration::from_secs(1), Some(30.0), None);
        assert_eq!(steps.rates.segments.len(), 3);
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
        let rates: Vec<f64> = down.rates.segments.iter().map(|s| s.value).collect();
        assert_eq!(rates, [200.0, 150.0, 100.0]);
        let capped = Steps::new(
            10.0,
            10.0,
            Duration::from_secs(1),
            None,
            Some(Duration::from_secs(3)),
        );
        let rates: Vec<f64> = capped.rates.segments.iter().map(|s| s.value).collect();
        assert_eq!(rates, [10.0, 20.0, 30.0], "changes for 3 s, then holds");
        let endless = Steps::new(1.0, 1.0, Duration::from_secs(1), None, None);
        assert_eq!(endless.rates.segments.len(), MAX_STEPS);
    }
}
