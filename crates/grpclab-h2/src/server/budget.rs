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

impl<S: Service> Connection<S> {
    /// Spends one unit of the flood budget on a frame that carries no request forward.
    pub(super) fn spend_flood_credit(&mut self) -> Result<(), ConnectionError> {
        self.flood_credit -= 1;
        if self.flood_credit >= 0 {
            return Ok(());
        }
        if self.turn_started.duration_since(self.flood_window_start)
            >= std::time::Duration::from_secs(1)
        {
            self.flood_window_start = self.turn_started;
            self.flood_credit = FLOOD_BUDGET - 1;
            return Ok(());
        }
        Err(connection_error(
            code::ENHANCE_YOUR_CALM,
            "too many control frames",
        ))
    }
}
