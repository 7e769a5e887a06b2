//! Per-thread recording of call outcomes: latency histograms, status counts, error messages and
//! a per-second series. One [`Recorder`] per client thread, touched only by that thread (no
//! locks, no atomics on the hot path); recorders merge once, at the end.

use grpclab_core::Code;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::Duration;

/// Lowest latency the histograms tell apart: 1 µs, in the histograms' unit (nanoseconds).
pub const HISTOGRAM_LOW_NS: u64 = 1_000;
/// Highest latency the histograms hold: 60 s. Longer calls are recorded as 60 s.
pub const HISTOGRAM_HIGH_NS: u64 = 60_000_000_000;
/// Significant decimal digits kept: 3, so any recorded value is exact to 0.1 %.
pub const HISTOGRAM_SIGFIG: u8 = 3;

/// Distinct error messages kept; past this, messages are counted under [`OTHER_ERRORS`], so a
/// storm of unique messages cannot grow memory without bound.
pub const MAX_ERROR_MESSAGES: usize = 64;
/// The error-distribution key for messages past [`MAX_ERROR_MESSAGES`].
pub const OTHER_ERRORS: &str = "(other error messages)";

/// A new, empty latency histogram with grpclab's bounds (values in nanoseconds).
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts (low >= 1, high >= 2 * low, sigfig <= 5).
    Histogram::new_with_bounds(HISTOGRAM_LOW_NS, HISTOGRAM_HIGH_NS, HISTOGRAM_SIGFIG)
        .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"))
}

/// What happened in one second of the measured window (seconds counted from its start, by the
/// time each call completed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SecondStats {
    /// Calls completed in this second, successful or not.
    pub count: u64,
    /// Of those, calls that did not end with status OK.
    pub errors: u64,
    /// Sum of the latencies of the successful calls, in nanoseconds.
    pub latency_sum_ns: u64,
    /// The slowest successful call, in nanoseconds.
    pub latency_max_ns: u64,
}

impl SecondStats {
    fn merge(&mut self, other: &SecondStats) {
        self.count += other.count;
        self.errors += other.errors;
        self.latency_sum_ns += other.latency_sum_ns;
        self.latency_max_ns = self.latency_max_ns.max(other.latency_max_ns);
    }

    /// The mean latency of this second's successful calls, if it had any.
    pub fn mean_latency_ns(&self) -> Option<u64> {
        let ok = self.count - self.errors;
        (ok > 0).then(|| self.latency_sum_ns / ok)
    }
}

/// Everything recorded about measured calls.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Latency of successful calls. In an open loop it runs from the *intended* send time
    /// (coordinated omission corrected); in a closed loop from the actual send.
    pub latency: Histogram<u64>,
    /// Open loop only: the uncorrected service time, from the actual send.
    pub service_time: Option<Histogram<u64>>,
    /// Calls by final gRPC status, indexed by `Code as usize`.
    pub status: [u64; Code::COUNT],
    /// Calls by error message (`Code: message`).
    pub errors: BTreeMap<String, u64>,
    /// The measured window, second by second.
    pub per_second: Vec<SecondStats>,
    /// Calls sent during the warmup that ended after the measured window began. They are not
    /// in the figures above (the warmup is not measured), but a server that starves some
    /// streams shows here: such calls can outlast the whole window.
    pub warmup_calls_in_window: u64,
    /// The longest of those calls, in nanoseconds (0 if none).
    pub warmup_call_max_ns: u64,
}

impl Recorder {
    /// An empty recorder; `open_loop` adds the service-time histogram.
    pub fn new(open_loop: bool) -> Recorder {
        Recorder {
            latency: new_histogram(),
            service_time: open_loop.then(new_histogram),
            status: [0; Code::COUNT],
            errors: BTreeMap::new(),
            per_second: Vec::new(),
            warmup_calls_in_window: 0,
            warmup_call_max_ns: 0,
        }
    }

    /// Records a call sent during the warmup that ended inside (or after) the measured window,
    /// successful or not: `latency` from its send to its end.
    pub fn record_warmup_call_in_window(&mut self, latency: Duration) {
        self.warmup_calls_in_window += 1;
        self.warmup_call_max_ns = self.warmup_call_max_ns.max(saturating_ns(latency));
    }

    /// Records a successful call. `since_start` is when it completed, from the measured
    /// window's start.
    pub fn record_ok(&mut self, latency: Duration, service: Duration, since_start: Duration) {
        let latency_ns = saturating_ns(latency);
        self.latency.saturating_record(latency_ns);
        if let Some(service_time) = &mut self.service_time {
            service_time.saturating_record(saturating_ns(service));
        }
        self.status[Code::Ok as usize] += 1;
        let second = self.second(since_start);
        second.count += 1;
        second.latency_sum_ns += latency_ns;
        second.latency_max_ns = second.latency_max_ns.max(latency_ns);
    }

    /// Records a failed call with its status and a description (the `grpc-message`, or what
    /// went wrong on the client's side).
    pub fn record_error(&mut self, code: Code, message: &str, since_start: Duration) {
        self.status[code as usize] += 1;
        let second = self.second(since_start);
        second.count += 1;
        second.errors += 1;
        self.count_message(code, message, 1);
    }

    fn count_message(&mut self, code: Code, message: &str, times: u64) {
        let key = if message.is_empty() {
            code.name().to_owned()
        } else {
            format!("{code}: {message}")
        };
        self.add_message(key, times);
    }

    /// Counts `times` calls under `key`, or under [`OTHER_ERRORS`] once the map is full.
    fn add_message(&mut self, key: String, times: u64) {
        if let Some(count) = self.errors.get_mut(&key) {
            *count += times;
        } else if self.errors.len() < MAX_ERROR_MESSAGES {
            self.errors.insert(key, times);
        } else {
            *self.errors.entry(OTHER_ERRORS.to_owned()).or_insert(0) += times;
        }
    }

    fn second(&mut self, since_start: Duration) -> &mut SecondStats {
        let index = since_start.as_secs() as usize;
        if self.per_second.len() <= index {
            self.per_second.resize(index + 1, SecondStats::default());
        }
        &mut self.per_second[index]
    }

    /// Calls recorded, successful or not.
    pub fn count(&self) -> u64 {
        self.status.iter().sum()
    }

    /// Adds `other` into this recorder.
    pub fn merge(&mut self, other: &Recorder) {
        // Both histograms share the same bounds, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        if let (Some(mine), Some(theirs)) = (&mut self.service_time, &other.service_time) {
            let _ = mine.add(theirs);
        }
        for (mine, theirs) in self.status.iter_mut().zip(other.status.iter()) {
            *mine += theirs;
        }
        for (message, count) in &other.errors {
            self.add_message(message.clone(), *count);
        }
        if self.per_second.len() < other.per_second.len() {
            self.per_second
                .resize(other.per_second.len(), SecondStats::default());
        }
        for (mine, theirs) in self.per_second.iter_mut().zip(other.per_second.iter()) {
            mine.merge(theirs);
        }
        self.warmup_calls_in_window += other.warmup_calls_in_window;
        self.warmup_call_max_ns = self.warmup_call_max_ns.max(other.warmup_call_max_ns);
    }
}

fn saturating_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_merges() {
        let mut a = Recorder::new(false);
        a.record_ok(
            Duration::from_micros(100),
            Duration::from_micros(100),
            Duration::from_millis(10),
        );
        a.record_error(
            Code::Unavailable,
            "connection refused",
            Duration::from_millis(1500),
        );
        let mut b = Recorder::new(false);
        b.record_ok(
            Duration::from_micros(300),
            Duration::from_micros(300),
            Duration::from_millis(2500),
        );
        b.record_error(
            Code::Unavailable,
            "connection refused",
            Duration::from_millis(20),
        );
        a.merge(&b);
        assert_eq!(a.count(), 4);
        assert_eq!(a.latency.len(), 2);
        assert_eq!(a.status[Code::Unavailable as usize], 2);
        assert_eq!(a.errors["Unavailable: connection refused"], 2);
        assert_eq!(a.per_second.len(), 3);
        assert_eq!(a.per_second[0].count, 2);
        assert_eq!(a.per_second[0].errors, 1);
        assert_eq!(a.per_second[0].mean_latency_ns(), Some(100_000));
    }

    #[test]
    fn error_messages_are_bounded() {
        let mut recorder = Recorder::new(false);
        for i in 0..(MAX_ERROR_MESSAGES + 10) {
            recorder.record_error(Code::Internal, &format!("message {i}"), Duration::ZERO);
        }
        assert_eq!(recorder.errors.len(), MAX_ERROR_MESSAGES + 1);
        assert_eq!(recorder.errors[OTHER_ERRORS], 10);
    }

    #[test]
    fn latencies_past_the_top_saturate() {
        let mut recorder = Recorder::new(true);
        recorder.record_ok(
            Duration::from_secs(600),
            Duration::from_secs(600),
            Duration::ZERO,
        );
        assert!(recorder.latency.max() >= HISTOGRAM_HIGH_NS);
        assert!(recorder.service_time.as_ref().is_some_and(|h| h.len() == 1));
    }
}
