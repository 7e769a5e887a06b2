//! Live counters for a progress display. Each client thread owns one slot and is its only
//! writer; the controller reads all slots about ten times a second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One thread's counters, on a cache line of its own so threads never share one.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct ThreadProgress {
    completed: AtomicU64,
    errors: AtomicU64,
}

impl ThreadProgress {
    pub(crate) fn add(&self, failed: bool) {
        // Single writer: a relaxed add is enough; readers only want a recent value.
        self.completed.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What the run has done so far, as shown by a progress bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressSnapshot {
    /// Time spent in the measured window so far (zero during the warmup).
    pub measured: Duration,
    /// Whether the warmup is still going on.
    pub warming_up: bool,
    /// Measured calls completed.
    pub completed: u64,
    /// Of those, the failed ones.
    pub errors: u64,
    /// Completed calls per second over the last interval.
    pub current_rps: f64,
    /// Where the run is heading, if known: the duration or the `-n` total.
    pub target: ProgressTarget,
}

/// What "done" means for the progress display.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProgressTarget {
    /// The measured window lasts this long (warmup excluded).
    Duration(Duration),
    /// This many calls.
    Total(u64),
}

pub(crate) fn totals(slots: &[ThreadProgress]) -> (u64, u64) {
    slots.iter().fold((0, 0), |(completed, errors), slot| {
        (
            completed + slot.completed.load(Ordering::Relaxed),
            errors + slot.errors.load(Ordering::Relaxed),
        )
    })
}
