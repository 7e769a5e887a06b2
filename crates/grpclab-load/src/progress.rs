//! Live counters for a progress display. Each client thread owns one slot and is its only
//! writer; the controller reads all slots about ten times a second.

use grpclab_core::Code;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// One thread's counters, on a cache line of its own so threads never share one.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct ThreadProgress {
    completed: AtomicU64,
    errors: AtomicU64,
    /// Failed calls by status code (touched on the error path only).
    by_code: [AtomicU64; Code::COUNT],
}

impl ThreadProgress {
    /// One call ended: `failed` with its status code, or OK (`None`).
    pub(crate) fn add(&self, failed: Option<Code>) {
        // Single writer: a load and a store, not a read-modify-write (whose locked
        // instruction costs ~20 cycles a call); readers only want a recent value.
        bump(&self.completed);
        if let Some(code) = failed {
            bump(&self.errors);
            bump(&self.by_code[code as usize]);
        }
    }
}

/// Adds one to a counter only this thread writes.
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// The upper bounds of [`LatencyBuckets`], nanoseconds: 100 µs to 10 s, 1-2.5-5 per decade
/// (Prometheus' usual latency buckets, finer at the low end where gRPC calls sit).
pub const LATENCY_BUCKET_BOUNDS_NS: [u64; 16] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// The measured calls' latency so far, as cumulative buckets (for a Prometheus histogram):
/// whole seconds only, so it trails the run by at most a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyBuckets {
    /// Calls at or under each bound of [`LATENCY_BUCKET_BOUNDS_NS`].
    pub cumulative: [u64; LATENCY_BUCKET_BOUNDS_NS.len()],
    /// Every call counted.
    pub count: u64,
    /// Their latencies added, nanoseconds (from the histogram: within its precision).
    pub sum_ns: f64,
}

impl LatencyBuckets {
    /// The buckets of a latency histogram (nanoseconds).
    pub fn of(histogram: &hdrhistogram::Histogram<u64>) -> LatencyBuckets {
        let mut cumulative = [0u64; LATENCY_BUCKET_BOUNDS_NS.len()];
        let mut sum_ns = 0.0;
        for value in histogram.iter_recorded() {
            let at = value.value_iterated_to();
            let count = value.count_at_value();
            sum_ns += at as f64 * count as f64;
            for (bucket, bound) in cumulative.iter_mut().zip(LATENCY_BUCKET_BOUNDS_NS) {
                if histogram.equivalent(at, bound) || at <= bound {
                    *bucket += count;
                }
            }
        }
        LatencyBuckets {
            cumulative,
            count: histogram.len(),
            sum_ns,
        }
    }
}

/// The latency of the last whole second, for a live view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecondLatency {
    /// Which second of the measured window.
    pub second: u64,
    /// Its successful calls.
    pub calls: u64,
    /// Their median latency, ns (2 significant digits).
    pub p50_ns: u64,
    /// Their 99th percentile, ns.
    pub p99_ns: u64,
}

/// Where client threads hand each finished second's latency histogram (V2-encoded) when a
/// live view asks for them (`LoadConfig::live_latency`): one lock per thread per second.
#[derive(Debug, Default)]
pub(crate) struct LiveSeconds {
    finished: Mutex<Vec<(usize, Vec<u8>)>>,
    /// The newest second merged so far and its histogram (controller only).
    merged: Mutex<Option<(usize, hdrhistogram::Histogram<u64>)>>,
    /// Every second handed over, added (controller only): the run's latency so far.
    total: Mutex<Option<hdrhistogram::Histogram<u64>>>,
}

impl LiveSeconds {
    pub(crate) fn publish(&self, second: usize, encoded: Vec<u8>) {
        if let Ok(mut finished) = self.finished.lock() {
            finished.push((second, encoded));
        }
    }

    /// Merges what the threads handed over since the last call; returns the newest second
    /// seen. Parts of an older second that arrive late are dropped (a live view moves on).
    pub(crate) fn latest(&self) -> Option<SecondLatency> {
        let parts = self
            .finished
            .lock()
            .map(|mut finished| std::mem::take(&mut *finished))
            .unwrap_or_default();
        let mut merged = self.merged.lock().ok()?;
        let mut total = self.total.lock().ok()?;
        let mut deserializer = hdrhistogram::serialization::Deserializer::new();
        for (second, bytes) in parts {
            let Ok(part) = deserializer.deserialize::<u64, _>(&mut bytes.as_slice()) else {
                continue;
            };
            match total.as_mut() {
                Some(total) => {
                    let _ = total.add(&part);
                }
                None => *total = Some(part.clone()),
            }
            match merged.as_mut() {
                Some((current, histogram)) if *current == second => {
                    let _ = histogram.add(&part);
                }
                Some((current, _)) if *current > second => {}
                _ => *merged = Some((second, part)),
            }
        }
        drop(total);
        merged.as_ref().map(|(second, histogram)| SecondLatency {
            second: *second as u64,
            calls: histogram.len(),
            p50_ns: histogram.value_at_quantile(0.5),
            p99_ns: histogram.value_at_quantile(0.99),
        })
    }

    /// The run's latency so far (every whole second handed over), as buckets.
    pub(crate) fn buckets(&self) -> Option<LatencyBuckets> {
        let total = self.total.lock().ok()?;
        total.as_ref().map(LatencyBuckets::of)
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
    /// Failed calls so far by status code (indexed by `Code as usize`).
    pub errors_by_code: [u64; Code::COUNT],
    /// With `LoadConfig::live_latency`: the newest whole second's latency percentiles.
    pub last_second: Option<SecondLatency>,
    /// Measured calls in flight: those the schedule handed out less those completed (a
    /// closed loop without `-n` keeps every stream busy: its concurrency). Derived by the
    /// controller from counters the run keeps anyway, so it costs the calls nothing.
    pub in_flight: u64,
    /// The open loop's rate (calls per second); `None` for a closed loop or a schedule.
    pub offered_rps: Option<f64>,
    /// With `LoadConfig::live_latency`: the latency of every whole second so far.
    pub latency_buckets: Option<LatencyBuckets>,
}

/// What "done" means for the progress display.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProgressTarget {
    /// The measured window lasts this long (warmup excluded).
    Duration(Duration),
    /// This many calls.
    Total(u64),
}

/// Calls completed, failed, and failed by code, over every thread.
pub(crate) fn totals(slots: &[ThreadProgress]) -> (u64, u64, [u64; Code::COUNT]) {
    let mut by_code = [0u64; Code::COUNT];
    let (completed, errors) = slots.iter().fold((0, 0), |(completed, errors), slot| {
        for (total, count) in by_code.iter_mut().zip(slot.by_code.iter()) {
            *total += count.load(Ordering::Relaxed);
        }
        (
            completed + slot.completed.load(Ordering::Relaxed),
            errors + slot.errors.load(Ordering::Relaxed),
        )
    });
    (completed, errors, by_code)
}
