//! The connection's budgets against floods and memory: frames that make work without carrying a
//! request forward spend credit (GOAWAY ENHANCE_YOUR_CALM when it runs out), and request bodies
//! held at once are bounded by the connection window.

use super::*;

/// Frames that make work but carry no request forward (PING, SETTINGS, PRIORITY, empty DATA
/// or CONTINUATION, frames for closed streams) a connection may send per second beyond one per
/// request it completes; past that it gets GOAWAY(ENHANCE_YOUR_CALM), as the h2 crate and
/// other servers do. A reading client's flood otherwise keeps an I/O thread busy answering it.
pub(super) const FLOOD_BUDGET: i64 = 10_000;

/// Room above one largest message in the connection window: its gRPC prefix and padding.
pub(super) const BUDGET_SLACK: u32 = 64 * 1024;

/// What is left of [`FLOOD_BUDGET`] in the current second: spent by frames that carry no
/// request forward, earned back a unit per completed request.
#[derive(Debug)]
pub(super) struct FloodBudget {
    credit: i64,
    /// When the current second began (a turn's read time).
    window_start: Instant,
}

impl FloodBudget {
    /// A full budget whose first second starts `now`.
    pub(super) fn new(now: Instant) -> FloodBudget {
        FloodBudget {
            credit: FLOOD_BUDGET,
            window_start: now,
        }
    }

    /// Spends one unit at `now` (the turn's read time); past the budget within one second,
    /// ENHANCE_YOUR_CALM. A new second refills it.
    pub(super) fn spend(&mut self, now: Instant) -> Result<(), ConnectionError> {
        self.credit -= 1;
        if self.credit >= 0 {
            return Ok(());
        }
        if now.duration_since(self.window_start) >= std::time::Duration::from_secs(1) {
            self.window_start = now;
            self.credit = FLOOD_BUDGET - 1;
            return Ok(());
        }
        Err(connection_error(
            code::ENHANCE_YOUR_CALM,
            "too many control frames",
        ))
    }

    /// A completed request earns a unit back (up to the budget): a busy client's stray frames
    /// (a reset crossing its answer) never add up to a flood.
    #[inline]
    pub(super) fn earn(&mut self) {
        self.credit = (self.credit + 1).min(FLOOD_BUDGET);
    }
}

impl<S: Service> Connection<S> {
    /// Spends one unit of the flood budget on a frame that carries no request forward.
    pub(super) fn spend_flood_credit(&mut self) -> Result<(), ConnectionError> {
        self.flood.spend(self.turn_started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_runs_out_within_a_second_and_refills_after_it() {
        let start = Instant::now();
        let mut budget = FloodBudget::new(start);
        for _ in 0..FLOOD_BUDGET {
            budget.spend(start).unwrap();
        }
        let over = budget.spend(start).unwrap_err();
        assert_eq!(over.code, code::ENHANCE_YOUR_CALM);
        budget.earn();
        budget.earn();
        assert!(budget.spend(start).is_ok(), "a request earns a unit back");
        let later = start + std::time::Duration::from_secs(1);
        let mut spent = FloodBudget::new(start);
        for _ in 0..=FLOOD_BUDGET {
            let _ = spent.spend(start);
        }
        assert!(spent.spend(later).is_ok(), "a new second refills it");
    }
}
