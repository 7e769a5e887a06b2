//! The progress bar a load run shows on a terminal without the live view.

use grpclab_load::{ProgressSnapshot, ProgressTarget};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub(super) fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

pub(super) fn show_progress(bar: &ProgressBar, snapshot: &ProgressSnapshot) {
    if bar.is_hidden() {
        return;
    }
    let fraction = match snapshot.target {
        ProgressTarget::Duration(duration) => {
            snapshot.measured.as_secs_f64() / duration.as_secs_f64().max(1e-9)
        }
        ProgressTarget::Total(total) => snapshot.completed as f64 / total.max(1) as f64,
    };
    bar.set_position((fraction.clamp(0.0, 1.0) * 1000.0) as u64);
    let phase = if snapshot.warming_up {
        "warming up · "
    } else {
        ""
    };
    bar.set_message(format!(
        "{phase}{} calls · {:.0} req/s · {} errors",
        snapshot.completed, snapshot.current_rps, snapshot.errors
    ));
}
