//! The outcome of a load run, merged over all client threads. Measuring only: exporters in the
//! `grpclab` crate turn it into text, JSON or CSV.

use base64::Engine as _;
use grpclab_core::Code;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::recorder::{Recorder, SecondStats};

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndReason {
    /// The measured duration (`-z`) passed.
    Timeout,
    /// The `-n` calls were made (ghz calls this end `normal`).
    Total,
    /// Ctrl-C (or the caller) stopped it early.
    Cancel,
}

/// Calls a timed open loop intended in its window and never sent, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unsent {
    /// No stream took them before the window closed: the client (or every connection it
    /// had, at its stream limit) could not keep up with the rate.
    pub never_taken: u64,
    /// Taken, and given back when the run stopped before they were due.
    pub stopped: u64,
}

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct LoadResult {
    /// When the measured window began (after the warmup).
    pub started_at: SystemTime,
    /// From the start of the measured window to the last measured call's completion.
    pub elapsed: Duration,
    /// From the first call sent (warmup included) to the last measured call's completion.
    /// ghz's `total` is [`elapsed`](Self::elapsed): ghz has no warmup.
    pub whole_run: Duration,
    /// Why the run ended.
    pub end_reason: EndReason,
    /// The merged recordings.
    pub recorder: Recorder,
    /// Connections re-established after being lost.
    pub reconnects: u64,
    /// New connections opened because a connection had used all its stream ids (RFC 9113
    /// §5.1.1), or (`--http1`) because the client closed one to end a stream early:
    /// planned, no call fails.
    pub planned_reconnects: u64,
    /// Calls still in flight when the drain limit ran out; counted as `Canceled` errors.
    pub abandoned: u64,
    /// `--duration-stop ignore`: calls in flight when the duration ended, left out of every
    /// figure.
    pub ignored: u64,
    /// A timed open loop: calls the schedule intended inside the measured window that were
    /// never sent, neither succeeded nor failed: still waiting to be taken when the
    /// duration ended, because the client (or every connection it had) could not keep up
    /// with the rate. `count + ignored + unsent` is the schedule's calls in the window.
    pub unsent: u64,
    /// `unsent` by why: each counted where the call was given up, not as a remainder.
    pub unsent_by_cause: Unsent,
    /// Measured calls taken from the schedule that were neither recorded, left out, skipped
    /// nor given back: 0 unless grpclab lost a call. Counted apart from the figures, so
    /// `count + ignored + unsent` adding up is checked rather than true by construction.
    pub unaccounted: u64,
    /// Templated calls whose rendering failed and went out with call 0's request instead.
    pub render_failures: u64,
    /// When the client threads were released to send (the warmup's start): with
    /// `--start-at`, how far this generator actually was from the shared start.
    pub first_send: SystemTime,
    /// Measured calls that ended on connections to each of `LoadConfig::addresses` (in that
    /// order; empty without addresses): sent there, or failed while its connection was down.
    /// Calls abandoned at the run's drain limit are in no address's count.
    pub calls_by_address: Vec<u64>,
    /// The addresses `calls_by_address` counts for: `LoadConfig::addresses`, then any a
    /// re-resolution brought during the run (`LoadConfig::naming`).
    pub addresses: Vec<std::net::SocketAddr>,
    /// A mix: each method's own figures, in `LoadConfig::methods`' order (empty with one
    /// method: the run's figures are its). Calls abandoned at the drain limit are in the
    /// run's figures only.
    pub methods: Vec<MethodResult>,
    /// A workload's flows: each flow's own figures (its steps are in `methods`, each a
    /// method of its own), in `LoadConfig::flows`' order; empty without flows.
    pub flows: Vec<FlowResult>,
    /// What the server's HTTP/2 frames allowed the client (its windows, streams at once,
    /// frame size), the largest over the run's connections; `None` on the h2 crate's
    /// transport, which does not show them.
    pub server_windows: Option<grpclab_h2::client::PeerWindows>,
    /// How the server's windows held the requests back, over the whole run (warmup
    /// included), summed over connections; zero on the h2 crate's transport, which does not
    /// show it.
    pub window_waits: grpclab_h2::client::WindowWaits,
}

/// One flow's figures: its runs (count, latency from each run's start to its last step's
/// end, the status of its first step that failed by status) and the runs whose replies
/// failed a step's expectation ([`Recorder::unexpected`]).
#[derive(Debug, Clone)]
pub struct FlowResult {
    /// The flow's name in the workload file.
    pub name: String,
    /// Its weight among the mix's entries.
    pub weight: u32,
    /// Its steps' names, in order (their figures: the methods of the same names).
    pub steps: Vec<String>,
    /// Its runs' figures.
    pub recorder: Recorder,
}

impl FlowResult {
    /// Runs that ended, passed or not.
    pub fn count(&self) -> u64 {
        self.recorder.count()
    }

    /// Runs per second over the run's measured window `elapsed`.
    pub fn rps(&self, elapsed: Duration) -> f64 {
        per_second(self.count(), elapsed)
    }

    /// Runs that ended with a step failed by its status.
    pub fn errors(&self) -> u64 {
        self.count() - self.recorder.status[Code::Ok as usize]
    }

    /// Runs in which every step met its expectation.
    pub fn passed(&self) -> u64 {
        self.recorder.status[Code::Ok as usize].saturating_sub(self.recorder.unexpected_count())
    }
}

/// One method of a mix: its name, weight and figures.
#[derive(Debug, Clone)]
pub struct MethodResult {
    /// The method's full name (`package.Service.Method`).
    pub name: String,
    /// Its weight in the mix.
    pub weight: u32,
    /// Its calls' figures, recorded as the run's are (no call list: the run's `details`
    /// name each call's method).
    pub recorder: Recorder,
}

impl MethodResult {
    /// Its measured calls, successful or not.
    pub fn count(&self) -> u64 {
        self.recorder.count()
    }

    /// Its calls that did not end with status OK.
    pub fn errors(&self) -> u64 {
        self.count() - self.recorder.status[Code::Ok as usize]
    }

    /// Its calls per second over the run's measured window `elapsed`.
    pub fn rps(&self, elapsed: Duration) -> f64 {
        per_second(self.count(), elapsed)
    }
}

/// A part of a run that thresholds and service levels may read by name: a method of a mix
/// (a flow's step among them, by its name), and with flows `step:NAME` (the step's calls,
/// a miss by status or by an unexpected reply counting as a failure) and `flow:NAME` (the
/// flow's runs, those that did not pass failing).
#[derive(Debug, Clone)]
pub struct Scope<'a> {
    /// The name a threshold gives it.
    pub name: String,
    /// Calls (or runs) measured.
    pub count: u64,
    /// Of them, failed.
    pub failures: u64,
    /// `count` per second of the measured window.
    pub rps: f64,
    /// Its figures (latency: its successful calls', or runs').
    pub recorder: &'a Recorder,
}

impl LoadResult {
    /// Where the flows' steps start in `methods`: the plain methods come before them.
    pub fn first_step(&self) -> usize {
        let steps: usize = self.flows.iter().map(|flow| flow.steps.len()).sum();
        self.methods.len().saturating_sub(steps)
    }

    /// The flow whose step method `method` (an index of `methods`) is; `None` for a plain
    /// method.
    pub fn flow_of_method(&self, method: usize) -> Option<&FlowResult> {
        let mut first = self.first_step();
        for flow in &self.flows {
            if (first..first + flow.steps.len()).contains(&method) {
                return Some(flow);
            }
            first += flow.steps.len();
        }
        None
    }

    /// Every part of the run a threshold may name (see [`Scope`]); empty for a run of one
    /// method without flows.
    pub fn scopes(&self) -> Vec<Scope<'_>> {
        let mut scopes: Vec<Scope<'_>> = self
            .methods
            .iter()
            .map(|method| Scope {
                name: method.name.clone(),
                count: method.count(),
                failures: method.errors(),
                rps: method.rps(self.elapsed),
                recorder: &method.recorder,
            })
            .collect();
        for method in &self.methods[self.first_step()..] {
            scopes.push(Scope {
                name: format!("step:{}", method.name),
                count: method.count(),
                failures: method.errors() + method.recorder.unexpected_count(),
                rps: method.rps(self.elapsed),
                recorder: &method.recorder,
            });
        }
        for flow in &self.flows {
            scopes.push(Scope {
                name: format!("flow:{}", flow.name),
                count: flow.count(),
                failures: flow.count() - flow.passed(),
                rps: flow.rps(self.elapsed),
                recorder: &flow.recorder,
            });
        }
        scopes
    }

    /// Calls in the measured window, successful or not (ghz's `count`).
    pub fn count(&self) -> u64 {
        self.recorder.count()
    }

    /// Calls that ended with status OK.
    pub fn ok(&self) -> u64 {
        self.recorder.status[Code::Ok as usize]
    }

    /// Calls that did not end with status OK.
    pub fn errors(&self) -> u64 {
        self.count() - self.ok()
    }

    /// Completed calls per second over the measured window: the honest throughput (the
    /// warmup neither adds calls nor time).
    pub fn rps(&self) -> f64 {
        per_second(self.count(), self.elapsed)
    }

    /// The mean latency of every measured call, failed ones included (ghz's `average`), in
    /// nanoseconds; 0 with no calls.
    pub fn mean_latency_all_ns(&self) -> u64 {
        self.recorder.mean_latency_all_ns()
    }

    /// `--details`: the first measured calls, one by one, in the order they ended.
    pub fn details(&self) -> Option<&crate::recorder::CallLog> {
        self.recorder.details.as_ref()
    }

    /// Calls sent during the warmup that ended after the window began (not measured), and
    /// the longest of them in nanoseconds: a server starving some streams shows here.
    pub fn warmup_calls_in_window(&self) -> (u64, u64) {
        (
            self.recorder.warmup_calls_in_window,
            self.recorder.warmup_call_max_ns,
        )
    }

    /// Latency of successful calls, in nanoseconds.
    pub fn latency(&self) -> &Histogram<u64> {
        self.recorder.latency()
    }

    /// Latency of every call, failed ones included (ghz's `--count-errors`), in nanoseconds.
    pub fn latency_of_all_calls(&self) -> Histogram<u64> {
        self.recorder.latency_of_all_calls()
    }

    /// Open loop: the uncorrected service time of successful calls, in nanoseconds.
    pub fn service_time(&self) -> Option<&Histogram<u64>> {
        self.recorder.service_time.as_ref()
    }

    /// Open loop: how late each successful call was sent, from its scheduled time to its
    /// actual send (0 when on time), in nanoseconds.
    pub fn send_lag(&self) -> Option<&Histogram<u64>> {
        self.recorder.send_lag.as_ref()
    }

    /// Streaming calls: request messages written and reply messages received, over the
    /// measured calls.
    pub fn messages(&self) -> (u64, u64) {
        (self.recorder.messages_sent, self.recorder.messages_received)
    }

    /// Bidi ping-pong: each request→reply round trip, in nanoseconds.
    pub fn round_trip(&self) -> Option<&Histogram<u64>> {
        self.recorder.round_trip.as_ref()
    }

    /// Streams with several replies: the time between two replies arriving.
    pub fn message_gaps(&self) -> Option<&Histogram<u64>> {
        self.recorder.message_gaps.as_ref()
    }

    /// Streams read with `--stream-stamp`: each reply's latency from the server's stamp.
    pub fn message_latency(&self) -> Option<&Histogram<u64>> {
        self.recorder.message_latency.as_ref()
    }

    /// Calls per final status, for the statuses that occurred.
    pub fn status_counts(&self) -> BTreeMap<Code, u64> {
        self.recorder.status_counts()
    }

    /// Failed calls per message.
    pub fn error_counts(&self) -> &BTreeMap<String, u64> {
        &self.recorder.errors
    }

    /// The measured window, second by second.
    pub fn per_second(&self) -> &[SecondStats] {
        &self.recorder.per_second
    }
}

fn per_second(count: u64, over: Duration) -> f64 {
    let seconds = over.as_secs_f64();
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// Encodes a histogram in HdrHistogram's standard form: V2 with deflate, then base64 (as in
/// HdrHistogram's interval logs), so any HdrHistogram implementation can read and merge it.
pub fn encode_histogram(histogram: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    // Serializing into a Vec cannot fail for an in-bounds histogram.
    match V2DeflateSerializer::new().serialize(histogram, &mut bytes) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(bytes),
        Err(_) => String::new(),
    }
}

/// Decodes a histogram written by [`encode_histogram`] (or any HdrHistogram V2 encoder).
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|err| format!("histogram is not base64: {err}"))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|err| format!("histogram does not decode: {err:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::new_histogram;

    #[test]
    fn histograms_round_trip_and_merge_exactly() {
        let mut a = new_histogram();
        let mut b = new_histogram();
        for v in [1_000u64, 25_000, 1_000_000] {
            a.record(v).unwrap();
        }
        b.record(7_000_000).unwrap();
        let mut merged = decode_histogram(&encode_histogram(&a)).unwrap();
        merged
            .add(decode_histogram(&encode_histogram(&b)).unwrap())
            .unwrap();
        assert_eq!(merged.len(), 4);
        assert_eq!(merged.max(), b.max());
        assert_eq!(merged.min(), a.min());
        assert_eq!(merged.count_at(25_000), 1);
        assert!(decode_histogram("not base64!").is_err());
    }
}
