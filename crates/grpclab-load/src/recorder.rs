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

/// How a failed call is named in the error distribution and the per-call details: grpc-go's
/// status error text, `rpc error: code = Unavailable desc = connection refused`, as ghz
/// prints it (so a ghz user's scripts that match on it keep working).
pub fn error_key(code: Code, message: &str) -> String {
    format!("rpc error: code = {} desc = {message}", code.name())
}

/// The histogram of the time between two replies of a stream: from 1 ns, not 1 µs, since
/// replies read together are 0 apart and must show as 0, not as the lowest bucket.
pub fn new_gap_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HISTOGRAM_HIGH_NS, HISTOGRAM_SIGFIG)
        .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"))
}

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
    /// The most calls outstanding when one of this second's calls ended: calls taken from
    /// the schedule and not yet ended (in flight, or due and not yet written), the ending
    /// call included; an open loop's calls held until they are due are not among them. Per client thread it is exact; merged over threads it is the sum of
    /// each thread's most (an upper bound of the run's). It shows a concurrency schedule
    /// being followed.
    #[serde(default)]
    pub in_flight_max: u64,
    /// The median latency of this second's successful calls, in nanoseconds (2 significant
    /// digits; 0 without any). Set once the threads' recorders are merged.
    #[serde(default)]
    pub latency_p50_ns: u64,
    /// The 99th percentile of the same (2 significant digits; 0 without any).
    #[serde(default)]
    pub latency_p99_ns: u64,
    /// Streaming calls: request messages written by the calls that ended in this second.
    #[serde(default)]
    pub messages_sent: u64,
    /// Streaming calls: reply messages received whole by the calls that ended in this second.
    #[serde(default)]
    pub messages_received: u64,
}

impl SecondStats {
    fn merge(&mut self, other: &SecondStats) {
        self.count += other.count;
        self.errors += other.errors;
        self.latency_sum_ns += other.latency_sum_ns;
        self.latency_max_ns = self.latency_max_ns.max(other.latency_max_ns);
        self.in_flight_max += other.in_flight_max;
        self.messages_sent += other.messages_sent;
        self.messages_received += other.messages_received;
    }

    /// The mean latency of this second's successful calls, if it had any.
    pub fn mean_latency_ns(&self) -> Option<u64> {
        let ok = self.count - self.errors;
        (ok > 0).then(|| self.latency_sum_ns / ok)
    }
}

/// One measured call, as ghz's per-call `details` list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallDetail {
    /// When it ended, in nanoseconds from the start of the measured window.
    pub ended_ns: u64,
    /// Its latency in nanoseconds (from the intended send time in an open loop).
    pub latency_ns: u64,
    /// Its final status.
    pub code: Code,
    /// For a failed call, its [`error_key`].
    pub error: Option<Box<str>>,
    /// A streaming call's request messages written (0 for unary calls).
    pub messages_sent: u64,
    /// A streaming call's reply messages received whole.
    pub messages_received: u64,
    /// A mix: which of the run's methods it called (its index; 0 with one method).
    pub method: u32,
    /// A flow step: the number of the flow's run it belongs to (from 1, one sequence for
    /// the whole run); 0 for a plain call.
    pub flow_run: u64,
}

/// The first `limit` measured calls, one [`CallDetail`] each (`--details`). Bounded: a long run
/// keeps `limit` entries per client thread at most, and the merge keeps the first `limit` of
/// the whole run by end time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallLog {
    /// How many calls are kept.
    pub limit: usize,
    /// The calls kept, in the order they ended (after [`Recorder::merge`]).
    pub calls: Vec<CallDetail>,
}

impl CallLog {
    /// An empty log that keeps the first `limit` calls.
    pub fn new(limit: usize) -> CallLog {
        CallLog {
            limit,
            // Capacity grows as calls come: a large limit on a short run costs nothing.
            calls: Vec::new(),
        }
    }

    fn push(&mut self, detail: impl FnOnce() -> CallDetail) {
        if self.calls.len() < self.limit {
            self.calls.push(detail());
        }
    }

    fn merge(&mut self, other: &CallLog) {
        self.calls.extend(other.calls.iter().cloned());
        // Each thread kept its own first `limit`; the first `limit` of the run are among them.
        self.calls.sort_by_key(|call| call.ended_ns);
        self.calls.truncate(self.limit);
    }
}

/// Everything recorded about measured calls.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Latency of successful calls ([`Recorder::latency`]).
    latency: Histogram<u64>,
    /// Open loop only: the uncorrected service time, from the actual send.
    pub service_time: Option<Histogram<u64>>,
    /// Open loop only: how late each successful call was sent, from its scheduled time to
    /// its actual send (0 when on time or early; nanoseconds, from 1 ns): the client's own
    /// lag, the part of `latency` that is not `service_time`.
    pub send_lag: Option<Histogram<u64>>,
    /// Latency of failed calls (for ghz's `--count-errors`, which counts them in the
    /// latency figures too); recorded on the error path only.
    pub error_latency: Histogram<u64>,
    /// Calls by final gRPC status, indexed by `Code as usize`.
    pub status: [u64; Code::COUNT],
    /// Calls by error message (`Code: message`).
    pub errors: BTreeMap<String, u64>,
    /// Flow steps (and flows) whose reply failed its expectation, by how: their own outcome,
    /// apart from the statuses (a call can end OK and still not be what the step expected).
    /// Capped as `errors` is.
    pub unexpected: BTreeMap<String, u64>,
    /// The measured window, second by second.
    pub per_second: Vec<SecondStats>,
    /// Calls sent during the warmup that ended after the measured window began. They are not
    /// in the figures above (the warmup is not measured), but a server that starves some
    /// streams shows here: such calls can outlast the whole window.
    pub warmup_calls_in_window: u64,
    /// The longest of those calls, in nanoseconds (0 if none).
    pub warmup_call_max_ns: u64,
    /// Sum of the latencies of every measured call, failed ones included (ghz's average is
    /// over all calls), in nanoseconds.
    pub all_latency_sum_ns: u128,
    /// `--details`: the first calls, one entry each; `None` when not asked for.
    pub details: Option<CallLog>,
    /// `latency` as it was when the second now being recorded (`current_second`) began: that
    /// second's calls are the difference, worked out once when it ends (at 2 significant
    /// digits: each second's percentiles without a full histogram per second) instead of
    /// recorded twice per call. A call that ends in an earlier second than the current one
    /// (completions of several connections are handled in turn) counts in the current one.
    second_start: Histogram<u64>,
    current_second: usize,
    /// Each finished second's histogram, V2-encoded (a few hundred bytes): memory stays
    /// small whatever the run's length.
    second_latencies: Vec<(usize, Vec<u8>)>,
    /// Streaming calls: request messages written, over measured calls.
    pub messages_sent: u64,
    /// Streaming calls: reply messages received whole, over measured calls.
    pub messages_received: u64,
    /// Bidi ping-pong: each request→reply round trip (nanoseconds), measured calls only.
    pub round_trip: Option<Histogram<u64>>,
    /// Streams with several replies (server streaming): the time between two replies of a
    /// call arriving (nanoseconds; 0 for replies read together), measured calls only — the
    /// reply rate ghz#196 asks for, as a distribution.
    pub message_gaps: Option<Histogram<u64>>,
    /// Streams whose replies carry the server's stamp (`--stream-stamp`): each reply's latency
    /// from the time the server stamped it to its arrival (nanoseconds, by the two wall
    /// clocks), measured calls only.
    pub message_latency: Option<Histogram<u64>>,
    /// Of those streams' replies, the ones that carried no stamp (not in `message_latency`).
    pub messages_unstamped: u64,
    /// Stamps later than their reply's arrival (recorded as 0): the server's clock is ahead.
    pub stamps_ahead: u64,
    /// The messages of the streaming call about to be recorded ([`Recorder::record_messages`]),
    /// taken by its `record_ok` or `record_error`.
    pending_messages: (u64, u64),
    /// The method of the call about to be recorded ([`Recorder::record_method`]), for its
    /// entry in `details`.
    pending_method: u32,
    pending_flow_run: u64,
    /// Attempts beyond the first of calls with a retry policy: the extra calls the server
    /// saw (attempts per call = 1 + retries / count).
    pub retries: u64,
}

/// Significant digits of the per-second latency histograms: enough for a p99 to 1 %.
const SECOND_SIGFIG: u8 = 2;

fn new_second_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(HISTOGRAM_LOW_NS, HISTOGRAM_HIGH_NS, SECOND_SIGFIG)
        .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"))
}

fn encode_second(histogram: &Histogram<u64>) -> Vec<u8> {
    let mut bytes = Vec::new();
    // Writing into a Vec cannot fail; a histogram that cannot be encoded loses only its
    // second's percentiles.
    use hdrhistogram::serialization::Serializer as _;
    let _ = hdrhistogram::serialization::V2Serializer::new().serialize(histogram, &mut bytes);
    bytes
}

/// Counts `times` under `key` in a map of messages, or under [`OTHER_ERRORS`] once it holds
/// [`MAX_ERROR_MESSAGES`]: a run of varied messages keeps a bounded map.
fn count_capped(map: &mut BTreeMap<String, u64>, key: String, times: u64) {
    if let Some(count) = map.get_mut(&key) {
        *count += times;
    } else if map.len() < MAX_ERROR_MESSAGES {
        map.insert(key, times);
    } else {
        *map.entry(OTHER_ERRORS.to_owned()).or_insert(0) += times;
    }
}

impl Recorder {
    /// An empty recorder; `open_loop` adds the service-time histogram, `details` keeps the
    /// first that many calls one by one.
    pub fn new(open_loop: bool, details: Option<usize>) -> Recorder {
        Recorder {
            latency: new_histogram(),
            service_time: open_loop.then(new_histogram),
            send_lag: open_loop.then(new_gap_histogram),
            error_latency: new_histogram(),
            status: [0; Code::COUNT],
            errors: BTreeMap::new(),
            unexpected: BTreeMap::new(),
            per_second: Vec::new(),
            warmup_calls_in_window: 0,
            warmup_call_max_ns: 0,
            all_latency_sum_ns: 0,
            details: details.map(CallLog::new),
            second_start: new_histogram(),
            current_second: 0,
            second_latencies: Vec::new(),
            messages_sent: 0,
            messages_received: 0,
            round_trip: None,
            message_gaps: None,
            message_latency: None,
            messages_unstamped: 0,
            stamps_ahead: 0,
            pending_messages: (0, 0),
            pending_method: 0,
            pending_flow_run: 0,
            retries: 0,
        }
    }

    /// A streaming call's messages, each way: counted with the call recorded next (its
    /// `record_ok` or `record_error`), in the totals, its second and its detail.
    pub fn record_messages(&mut self, sent: u64, received: u64) {
        self.pending_messages = (sent, received);
    }

    /// A call left out of the figures (`--skipFirst`): its messages go with it.
    pub fn discard_messages(&mut self) {
        self.pending_messages = (0, 0);
    }

    /// Counts the pending messages (see [`Recorder::record_messages`]) for a call that ended
    /// `since_start` into the window; returns them for its detail.
    #[inline]
    fn take_messages(&mut self, since_start: Duration) -> (u64, u64) {
        let (sent, received) = std::mem::take(&mut self.pending_messages);
        if sent > 0 || received > 0 {
            self.count_messages(sent, received, since_start);
        }
        (sent, received)
    }

    /// A streaming call's messages in the run's and its second's counts. Out of line: a
    /// unary call never comes here, and every call inlines [`Recorder::take_messages`].
    #[inline(never)]
    fn count_messages(&mut self, sent: u64, received: u64, since_start: Duration) {
        self.messages_sent += sent;
        self.messages_received += received;
        let second = self.second(since_start);
        second.messages_sent += sent;
        second.messages_received += received;
    }

    /// One bidi round trip: a request until its reply.
    pub fn record_round_trip(&mut self, latency: Duration) {
        self.round_trip
            .get_or_insert_with(new_histogram)
            .saturating_record(saturating_ns(latency));
    }

    /// Replies of a streaming call completed by one read: the first `gap` after the call's
    /// previous reply (`None`: the call's first), and `together` more 0 apart.
    pub fn record_message_gaps(&mut self, gap: Option<Duration>, together: u64) {
        if gap.is_none() && together == 0 {
            // A call's first reply alone: no gap yet (a call with one reply has none).
            return;
        }
        let histogram = self.message_gaps.get_or_insert_with(new_gap_histogram);
        if let Some(gap) = gap {
            histogram.saturating_record(saturating_ns(gap));
        }
        if together > 0 {
            // 0 is inside the bounds: recording it cannot fail.
            let _ = histogram.record_n(0, together);
        }
    }

    /// Replies of a stream that arrived at `arrived` (nanoseconds since the Unix epoch), with
    /// the stamp each carried (`None`: none).
    pub fn record_message_stamps(&mut self, arrived: u64, stamps: &[Option<u64>]) {
        let histogram = self.message_latency.get_or_insert_with(new_gap_histogram);
        for stamp in stamps {
            match stamp {
                Some(stamp) if *stamp > 0 => {
                    if *stamp > arrived {
                        self.stamps_ahead += 1;
                    }
                    histogram.saturating_record(arrived.saturating_sub(*stamp));
                }
                _ => self.messages_unstamped += 1,
            }
        }
    }

    /// Latency of successful calls. In an open loop it runs from the *intended* send time
    /// (coordinated omission corrected); in a closed loop from the actual send.
    pub fn latency(&self) -> &Histogram<u64> {
        &self.latency
    }

    /// Replaces the successful calls' latency (a result read back): its calls belong to no
    /// second being recorded.
    pub fn set_latency(&mut self, latency: Histogram<u64>) {
        self.second_start = latency.clone();
        self.latency = latency;
    }

    /// The successful calls of the second being recorded, at 2 significant digits; `None`
    /// when it has none.
    fn current_second_latency(&self) -> Option<Histogram<u64>> {
        if self.latency.len() == self.second_start.len() {
            return None;
        }
        let mut calls = self.latency.clone();
        // `second_start` is an earlier state of `latency` (same bounds, no count larger):
        // subtracting cannot fail.
        let _ = calls.subtract(&self.second_start);
        let mut second = new_second_histogram();
        let _ = second.add(&calls);
        Some(second)
    }

    /// Sets the current second's calls aside (encoded), and starts the next second empty.
    fn set_current_second_aside(&mut self) {
        if let Some(second) = self.current_second_latency() {
            self.second_latencies
                .push((self.current_second, encode_second(&second)));
            self.second_start.reset();
            // Same bounds and an empty histogram: a copy of the counts.
            let _ = self.second_start.add(&self.latency);
        }
    }

    /// Sets the current second's histogram aside when a call ends in a later second.
    fn note_second(&mut self, index: usize) {
        if index > self.current_second {
            self.set_current_second_aside();
            self.current_second = index;
        }
    }

    /// The seconds set aside so far (second, V2-encoded histogram of its successful calls);
    /// after [`Recorder::finish_seconds`], one merged histogram per second, in order (what a
    /// sharded result saves, so `grpclab merge` recomputes each second's percentiles exactly).
    pub fn finished_seconds(&self) -> &[(usize, Vec<u8>)] {
        &self.second_latencies
    }

    /// Forgets the seconds' histograms (a result being moved in time keeps them re-added
    /// at their new seconds).
    pub fn clear_second_histograms(&mut self) {
        self.second_latencies.clear();
    }

    /// Adds a saved second's histogram (V2, as [`Recorder::finished_seconds`] gives them):
    /// a result read back to be merged. [`Recorder::finish_seconds`] then merges them.
    pub fn add_second_histogram(&mut self, second: usize, encoded: Vec<u8>) {
        self.second_latencies.push((second, encoded));
    }

    /// Fills each second's `latency_p50_ns` and `latency_p99_ns` from the histograms set
    /// aside (call it on the merged recorder, once every thread's is in). With `keep`, one
    /// merged histogram per second stays (a result that may be merged with others' saves
    /// them); without, they are dropped and nothing is encoded again.
    pub fn finish_seconds(&mut self, keep: bool) {
        self.set_current_second_aside();
        let mut pending = std::mem::take(&mut self.second_latencies);
        pending.sort_by_key(|(second, _)| *second);
        let mut deserializer = hdrhistogram::serialization::Deserializer::new();
        let mut merged = new_second_histogram();
        let mut index = 0;
        while index < pending.len() {
            let second = pending[index].0;
            merged.reset();
            while index < pending.len() && pending[index].0 == second {
                if let Ok(part) =
                    deserializer.deserialize::<u64, _>(&mut pending[index].1.as_slice())
                {
                    let _ = merged.add(&part);
                }
                index += 1;
            }
            if let Some(stats) = self.per_second.get_mut(second) {
                if !merged.is_empty() {
                    stats.latency_p50_ns = merged.value_at_quantile(0.5);
                    stats.latency_p99_ns = merged.value_at_quantile(0.99);
                }
            }
            if keep && !merged.is_empty() {
                self.second_latencies.push((second, encode_second(&merged)));
            }
        }
    }

    /// Records a call sent during the warmup that ended inside (or after) the measured window,
    /// successful or not: `latency` from its send to its end.
    pub fn record_warmup_call_in_window(&mut self, latency: Duration) {
        self.warmup_calls_in_window += 1;
        self.warmup_call_max_ns = self.warmup_call_max_ns.max(saturating_ns(latency));
    }

    /// A mix: the next call recorded called method `method` (its entry in `details` says so).
    pub fn record_method(&mut self, method: u32) {
        self.pending_method = method;
    }

    /// A call with a retry policy made `retries` attempts beyond its first.
    pub fn note_retries(&mut self, retries: u32) {
        self.retries += u64::from(retries);
    }

    /// A flow step: the next call recorded belongs to the flow's run numbered `run` (its
    /// entry in `details` says so).
    pub fn record_flow_run(&mut self, run: u64) {
        self.pending_flow_run = run;
    }

    /// Records a successful call. `since_start` is when it completed, from the measured
    /// window's start.
    pub fn record_ok(&mut self, latency: Duration, service: Duration, since_start: Duration) {
        let latency_ns = saturating_ns(latency);
        // First: a call that begins a new second sets the last one aside without it.
        self.note_second(since_start.as_secs() as usize);
        self.latency.saturating_record(latency_ns);
        if let Some(service_time) = &mut self.service_time {
            service_time.saturating_record(saturating_ns(service));
        }
        if let Some(send_lag) = &mut self.send_lag {
            // Latency runs from the earlier of the scheduled and the actual send, service
            // time from the actual send: their difference is how late the send was.
            send_lag.saturating_record(saturating_ns(latency.saturating_sub(service)));
        }
        self.status[Code::Ok as usize] += 1;
        self.all_latency_sum_ns += u128::from(latency_ns);
        let second = self.second(since_start);
        second.count += 1;
        second.latency_sum_ns += latency_ns;
        second.latency_max_ns = second.latency_max_ns.max(latency_ns);
        let (messages_sent, messages_received) = self.take_messages(since_start);
        let method = self.pending_method;
        if let Some(details) = &mut self.details {
            let flow_run = std::mem::take(&mut self.pending_flow_run);
            details.push(|| CallDetail {
                ended_ns: saturating_ns(since_start),
                latency_ns,
                code: Code::Ok,
                error: None,
                messages_sent,
                messages_received,
                method,
                flow_run,
            });
        }
    }

    /// Records a failed call with its status, a description (the `grpc-message`, or what
    /// went wrong on the client's side) and how long it took.
    pub fn record_error(
        &mut self,
        code: Code,
        message: &str,
        latency: Duration,
        since_start: Duration,
    ) {
        self.status[code as usize] += 1;
        self.all_latency_sum_ns += u128::from(saturating_ns(latency));
        self.error_latency.saturating_record(saturating_ns(latency));
        let second = self.second(since_start);
        second.count += 1;
        second.errors += 1;
        let key = error_key(code, message);
        let (messages_sent, messages_received) = self.take_messages(since_start);
        let method = self.pending_method;
        if let Some(details) = &mut self.details {
            let flow_run = std::mem::take(&mut self.pending_flow_run);
            details.push(|| CallDetail {
                ended_ns: saturating_ns(since_start),
                latency_ns: saturating_ns(latency),
                code,
                error: Some(key.as_str().into()),
                messages_sent,
                messages_received,
                method,
                flow_run,
            });
        }
        self.add_message(key, 1);
    }

    /// Counts `times` calls under `key`, or under [`OTHER_ERRORS`] once the map is full.
    fn add_message(&mut self, key: String, times: u64) {
        count_capped(&mut self.errors, key, times);
    }

    /// Notes that the call (or flow) just recorded did not meet its expectation, and how
    /// (one line, the first distinct ones kept as examples).
    pub fn note_unexpected(&mut self, reason: &str) {
        match self.unexpected.get_mut(reason) {
            Some(count) => *count += 1,
            None => count_capped(&mut self.unexpected, reason.to_owned(), 1),
        }
    }

    /// How many recorded calls (or flows) failed their expectation.
    pub fn unexpected_count(&self) -> u64 {
        self.unexpected.values().sum()
    }

    /// Notes that `in_flight` calls were outstanding when a call ended `since_start` into
    /// the measured window (see [`SecondStats::in_flight_max`]).
    pub fn note_in_flight(&mut self, in_flight: u64, since_start: Duration) {
        let second = self.second(since_start);
        second.in_flight_max = second.in_flight_max.max(in_flight);
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

    /// Latency of every recorded call, failed ones included (`--count-errors`), in
    /// nanoseconds.
    pub fn latency_of_all_calls(&self) -> Histogram<u64> {
        let mut all = self.latency.clone();
        // Same bounds on both: adding cannot fail.
        let _ = all.add(&self.error_latency);
        all
    }

    /// The mean latency of every recorded call, failed ones included (ghz's `average`), in
    /// nanoseconds; 0 with no calls.
    pub fn mean_latency_all_ns(&self) -> u64 {
        let count = u128::from(self.count());
        if count == 0 {
            return 0;
        }
        u64::try_from(self.all_latency_sum_ns / count).unwrap_or(u64::MAX)
    }

    /// Calls per final status, for the statuses that occurred.
    pub fn status_counts(&self) -> BTreeMap<Code, u64> {
        Code::ALL
            .iter()
            .zip(self.status.iter())
            .filter(|(_, count)| **count > 0)
            .map(|(code, count)| (*code, *count))
            .collect()
    }

    /// Adds `other` into this recorder.
    pub fn merge(&mut self, other: &Recorder) {
        // Both histograms share the same bounds, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        let _ = self.error_latency.add(&other.error_latency);
        if let (Some(mine), Some(theirs)) = (&mut self.service_time, &other.service_time) {
            let _ = mine.add(theirs);
        }
        if let (Some(mine), Some(theirs)) = (&mut self.send_lag, &other.send_lag) {
            let _ = mine.add(theirs);
        }
        for (mine, theirs) in self.status.iter_mut().zip(other.status.iter()) {
            *mine += theirs;
        }
        for (message, count) in &other.errors {
            self.add_message(message.clone(), *count);
        }
        for (reason, count) in &other.unexpected {
            count_capped(&mut self.unexpected, reason.clone(), *count);
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
        self.all_latency_sum_ns += other.all_latency_sum_ns;
        self.second_latencies
            .extend(other.second_latencies.iter().cloned());
        self.messages_sent += other.messages_sent;
        self.messages_received += other.messages_received;
        if let Some(theirs) = &other.round_trip {
            // Same bounds: adding cannot fail.
            let _ = self
                .round_trip
                .get_or_insert_with(new_histogram)
                .add(theirs);
        }
        if let Some(theirs) = &other.message_gaps {
            let _ = self
                .message_gaps
                .get_or_insert_with(new_gap_histogram)
                .add(theirs);
        }
        if let Some(theirs) = &other.message_latency {
            let _ = self
                .message_latency
                .get_or_insert_with(new_gap_histogram)
                .add(theirs);
        }
        self.messages_unstamped += other.messages_unstamped;
        self.retries += other.retries;
        self.stamps_ahead += other.stamps_ahead;
        if let Some(second) = other.current_second_latency() {
            self.second_latencies
                .push((other.current_second, encode_second(&second)));
        }
        // Their calls are not in this recorder's current second.
        let _ = self.second_start.add(&other.latency);
        match (&mut self.details, &other.details) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => self.details = Some(theirs.clone()),
            _ => {}
        }
    }
}

fn saturating_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_second_has_its_own_percentiles_over_every_thread() {
        // Thread a: second 0 has 1..=98 µs; second 1, 10 ms. Thread b: second 0 has two
        // slow calls (the p99 of second 0 over both threads), second 2 one call.
        let ok = |r: &mut Recorder, micros: u64, at_ms: u64| {
            let latency = Duration::from_micros(micros);
            r.record_ok(latency, latency, Duration::from_millis(at_ms));
        };
        let mut a = Recorder::new(false, None);
        for micros in 1..=98 {
            ok(&mut a, micros, 10);
        }
        ok(&mut a, 10_000, 1_200);
        let mut b = Recorder::new(false, None);
        ok(&mut b, 5_000, 500);
        ok(&mut b, 5_000, 600);
        ok(&mut b, 7, 2_100);
        let mut all = Recorder::new(false, None);
        all.merge(&a);
        all.merge(&b);
        all.finish_seconds(false);
        let p = |second: usize| {
            (
                all.per_second[second].latency_p50_ns,
                all.per_second[second].latency_p99_ns,
            )
        };
        // 100 calls in second 0: the median is 50 µs, the p99 one of the 5 ms calls
        // (2 significant digits: within 1 %).
        let (p50, p99) = p(0);
        assert!((49_000..=51_000).contains(&p50), "{p50}");
        assert!((4_950_000..=5_050_000).contains(&p99), "{p99}");
        let (p50, p99) = p(1);
        assert!((9_900_000..=10_100_000).contains(&p50) && p50 == p99);
        // Below 131 µs the histogram counts in 512 ns steps (its lowest discernible value
        // is 1 µs): 7 µs reads as its step's top, 7,167 ns.
        assert!((6_600..=7_200).contains(&p(2).0), "{:?}", p(2));
    }

    #[test]
    fn a_second_holds_exactly_its_calls_and_the_run_all_of_them() {
        let ok = |r: &mut Recorder, micros: u64, at_ms: u64| {
            let latency = Duration::from_micros(micros);
            r.record_ok(latency, latency, Duration::from_millis(at_ms));
        };
        let counts = |r: &Recorder| -> Vec<(usize, u64, u64)> {
            let mut deserializer = hdrhistogram::serialization::Deserializer::new();
            r.finished_seconds()
                .iter()
                .map(|(second, bytes)| {
                    let h: Histogram<u64> = deserializer
                        .deserialize(&mut bytes.as_slice())
                        .expect("a second's histogram decodes");
                    (*second, h.len(), h.max() / 1_000_000)
                })
                .collect()
        };
        let mut mine = Recorder::new(false, None);
        ok(&mut mine, 1_000, 10);
        ok(&mut mine, 1_000, 20);
        // The first call of second 1 sets second 0 aside without itself.
        ok(&mut mine, 50_000, 1_100);
        ok(&mut mine, 2_000, 3_500);
        let mut theirs = Recorder::new(false, None);
        for _ in 0..10 {
            ok(&mut theirs, 7_000, 3_900);
        }
        // Merged calls count once: in their own second, not again in this recorder's.
        mine.merge(&theirs);
        mine.finish_seconds(true);
        assert_eq!(counts(&mine), [(0, 2, 1), (1, 1, 50), (3, 11, 7)]);
        assert_eq!(mine.latency().len(), 14);
        assert_eq!(mine.per_second[3].latency_p99_ns / 1_000_000, 7);
    }

    #[test]
    fn records_and_merges() {
        let mut a = Recorder::new(false, None);
        a.record_ok(
            Duration::from_micros(100),
            Duration::from_micros(100),
            Duration::from_millis(10),
        );
        a.record_error(
            Code::Unavailable,
            "connection refused",
            Duration::from_micros(500),
            Duration::from_millis(1500),
        );
        let mut b = Recorder::new(false, None);
        b.record_ok(
            Duration::from_micros(300),
            Duration::from_micros(300),
            Duration::from_millis(2500),
        );
        b.record_error(
            Code::Unavailable,
            "connection refused",
            Duration::from_micros(700),
            Duration::from_millis(20),
        );
        a.merge(&b);
        assert_eq!(a.count(), 4);
        assert_eq!(a.latency().len(), 2);
        assert_eq!(a.status[Code::Unavailable as usize], 2);
        assert_eq!(
            a.errors["rpc error: code = Unavailable desc = connection refused"],
            2
        );
        assert_eq!(
            a.all_latency_sum_ns, 1_600_000,
            "failed calls count in the sum"
        );
        assert_eq!(a.per_second.len(), 3);
        assert_eq!(a.per_second[0].count, 2);
        assert_eq!(a.per_second[0].errors, 1);
        assert_eq!(a.per_second[0].mean_latency_ns(), Some(100_000));
    }

    #[test]
    fn error_messages_are_bounded() {
        let mut recorder = Recorder::new(false, None);
        for i in 0..(MAX_ERROR_MESSAGES + 10) {
            recorder.record_error(
                Code::Internal,
                &format!("message {i}"),
                Duration::ZERO,
                Duration::ZERO,
            );
        }
        assert_eq!(recorder.errors.len(), MAX_ERROR_MESSAGES + 1);
        assert_eq!(recorder.errors[OTHER_ERRORS], 10);
    }

    #[test]
    fn latencies_past_the_top_saturate() {
        let mut recorder = Recorder::new(true, None);
        recorder.record_ok(
            Duration::from_secs(600),
            Duration::from_secs(600),
            Duration::ZERO,
        );
        assert!(recorder.latency().max() >= HISTOGRAM_HIGH_NS);
        assert!(recorder.service_time.as_ref().is_some_and(|h| h.len() == 1));
    }

    #[test]
    fn details_keep_the_first_calls_of_the_run_across_threads() {
        let mut a = Recorder::new(false, Some(3));
        let mut b = Recorder::new(false, Some(3));
        for ms in [1u64, 4, 6, 8] {
            a.record_ok(
                Duration::from_micros(10),
                Duration::ZERO,
                Duration::from_millis(ms),
            );
        }
        b.record_error(
            Code::Internal,
            "boom",
            Duration::from_micros(20),
            Duration::from_millis(2),
        );
        b.record_ok(
            Duration::from_micros(30),
            Duration::ZERO,
            Duration::from_millis(5),
        );
        let kept = a.details.as_ref().unwrap().calls.len();
        assert_eq!(kept, 3, "each thread keeps at most the limit");
        a.merge(&b);
        let log = a.details.unwrap();
        let ended: Vec<u64> = log.calls.iter().map(|c| c.ended_ns / 1_000_000).collect();
        assert_eq!(ended, [1, 2, 4], "the first three of the run, by end time");
        assert_eq!(log.calls[1].code, Code::Internal);
        assert_eq!(
            log.calls[1].error.as_deref(),
            Some("rpc error: code = Internal desc = boom")
        );
        assert_eq!(log.calls[1].latency_ns, 20_000);
        assert!(Recorder::new(false, None).details.is_none());
    }
}
