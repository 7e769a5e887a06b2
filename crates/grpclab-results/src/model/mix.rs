//! A mix of methods in the document, and the parts of a result kept so several generators'
//! results add up exactly.

use grpclab_load::{encode_histogram, LoadResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::*;

/// A mix of methods: the seed that drew each call's method, and each method's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MixJson {
    /// `--mix-seed` (or the workload's `seed`, or the one drawn): the same seed makes the same
    /// calls of each method in an `-n` run.
    pub seed: u64,
    /// Each method, in the order given: the plain ones, then each flow's steps (each a
    /// method of its own, named after its step, with `flow` set).
    pub methods: Vec<MethodJson>,
    /// A workload's flows, in the order given; omitted without flows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowJson>,
}

/// One flow of a workload: its runs' figures (latency from a run's start to its last step's
/// end; a run's status is its first step failed by status; `unexpected` counts runs in which
/// a step's reply failed its expectation otherwise).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowJson {
    /// Its name in the workload file.
    pub name: String,
    /// Its weight as given.
    pub weight: u32,
    /// Its share of the weights (plain methods' and flows').
    pub share: f64,
    /// Its steps' names, in order (their figures: `methods` of the same names).
    pub steps: Vec<String>,
    /// Runs that ended.
    pub count: u64,
    /// Of those, runs in which every step met its expectation.
    pub passed: u64,
    /// Of those, runs ended by a step's failed status.
    pub errors: u64,
    /// Of those, runs in which a step's reply failed its expectation otherwise.
    pub unexpected: u64,
    /// `count` over the run's measured window.
    pub rps: f64,
    /// Latency of its runs that ended without a failed status.
    pub latency: LatencyStats,
    /// Runs per status name (a run's status: its first step failed by status, else OK).
    pub status_code_distribution: BTreeMap<String, u64>,
    /// Runs ended by a failed status, per error text (`step NAME: ...`).
    pub error_distribution: BTreeMap<String, u64>,
    /// Runs with an unexpected reply, per reason (`step NAME: ...`).
    pub unexpected_distribution: BTreeMap<String, u64>,
    /// Its latency histogram: HdrHistogram V2 compressed (deflate), base64.
    pub hdr_histogram: String,
}

/// One method of a mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MethodJson {
    /// `package.Service.Method`.
    pub name: String,
    /// Its weight as given.
    pub weight: u32,
    /// Its share of the weights.
    pub share: f64,
    /// Its measured calls, successful or not (calls abandoned at the drain limit are in the
    /// run's count only).
    pub count: u64,
    /// Of those, calls that ended OK.
    pub ok: u64,
    /// Of those, calls that did not.
    pub errors: u64,
    /// `count` over the run's measured window.
    pub rps: f64,
    /// Mean latency of every call of the method, failed ones included (ns).
    pub average: u64,
    /// Latency of its successful calls.
    pub latency: LatencyStats,
    /// Calls per status name.
    pub status_code_distribution: BTreeMap<String, u64>,
    /// Failed calls per error text.
    pub error_distribution: BTreeMap<String, u64>,
    /// Its successful calls' latency histogram: HdrHistogram V2 compressed (deflate), base64.
    pub hdr_histogram: String,
    /// The sum of every call's latency (ns), failed ones included: what `average` rounds,
    /// kept so results of several generators add up exactly (`grpclab merge`).
    #[serde(default)]
    pub latency_sum: u64,
    /// A flow step: the flow it belongs to (its weight and share are then 0: steps are not
    /// drawn, their flow is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
    /// A flow step: its calls whose reply failed the step's expectation (beside the
    /// statuses: such a call may have ended OK).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unexpected: Option<u64>,
    /// A flow step: those calls per reason (the first distinct reasons).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unexpected_distribution: BTreeMap<String, u64>,
    /// A method with a retry policy: its calls' attempts beyond their first (attempts per
    /// call: 1 + retries / count); omitted when none was retried.
    #[serde(default, skip_serializing_if = "super::document::is_zero")]
    pub retries: u64,
}

impl MixJson {
    /// The mix of `result` (`None` for one method).
    pub(super) fn of(result: &LoadResult, seed: Option<u64>) -> Option<MixJson> {
        if result.methods.is_empty() {
            return None;
        }
        // A flow's steps are methods of their own, after the plain ones.
        let plain = result.first_step();
        let step_flows: Vec<&str> = result
            .flows
            .iter()
            .flat_map(|flow| flow.steps.iter().map(|_| flow.name.as_str()))
            .collect();
        let weights: u64 = result.methods[..plain]
            .iter()
            .map(|m| u64::from(m.weight))
            .chain(result.flows.iter().map(|f| u64::from(f.weight)))
            .sum();
        let methods = result
            .methods
            .iter()
            .enumerate()
            .map(|(index, method)| {
                let recorder = &method.recorder;
                let count = method.count();
                let flow = index
                    .checked_sub(plain)
                    .and_then(|step| step_flows.get(step))
                    .map(|name| (*name).to_owned());
                let weight = if flow.is_some() { 0 } else { method.weight };
                MethodJson {
                    name: method.name.clone(),
                    weight,
                    share: f64::from(weight) / weights.max(1) as f64,
                    count,
                    ok: count - method.errors(),
                    errors: method.errors(),
                    rps: method.rps(result.elapsed),
                    average: recorder.mean_latency_all_ns(),
                    latency: LatencyStats::of(recorder.latency()),
                    status_code_distribution: recorder
                        .status_counts()
                        .into_iter()
                        .map(|(code, count)| (code.name().to_owned(), count))
                        .collect(),
                    error_distribution: recorder.errors.clone(),
                    hdr_histogram: encode_histogram(recorder.latency()),
                    latency_sum: u64::try_from(recorder.all_latency_sum_ns).unwrap_or(u64::MAX),
                    unexpected: flow.as_ref().map(|_| recorder.unexpected_count()),
                    unexpected_distribution: recorder.unexpected.clone(),
                    retries: recorder.retries,
                    flow,
                }
            })
            .collect();
        let flows = result
            .flows
            .iter()
            .map(|flow| {
                let recorder = &flow.recorder;
                FlowJson {
                    name: flow.name.clone(),
                    weight: flow.weight,
                    share: f64::from(flow.weight) / weights.max(1) as f64,
                    steps: flow.steps.clone(),
                    count: flow.count(),
                    passed: flow.passed(),
                    errors: flow.errors(),
                    unexpected: recorder.unexpected_count(),
                    rps: flow.rps(result.elapsed),
                    latency: LatencyStats::of(recorder.latency()),
                    status_code_distribution: recorder
                        .status_counts()
                        .into_iter()
                        .map(|(code, count)| (code.name().to_owned(), count))
                        .collect(),
                    error_distribution: recorder.errors.clone(),
                    unexpected_distribution: recorder.unexpected.clone(),
                    hdr_histogram: encode_histogram(recorder.latency()),
                }
            })
            .collect();
        Some(MixJson {
            seed: seed.unwrap_or_default(),
            methods,
            flows,
        })
    }
}

/// The parts of a result that its summary figures round or leave out, kept so results of
/// several generators add up exactly (`grpclab merge`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mergeable {
    /// The measured window's start, RFC 3339 with nanoseconds.
    pub window_start: String,
    /// When the generator was released to send, RFC 3339 with nanoseconds.
    pub first_send: String,
    /// The sum of every measured call's latency, failed ones included, nanoseconds (ghz's
    /// `average` is this over `count`).
    pub all_latency_sum_ns: u64,
    /// Failed calls' latency (HdrHistogram V2 deflate, base64).
    pub error_latency: String,
    /// Bidi ping-pong round trips (the same encoding), if any.
    pub round_trip: Option<String>,
    /// The time between two replies of a stream (the same encoding), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_gaps: Option<String>,
    /// Each reply's latency from its stamp (the same encoding), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_latency: Option<String>,
    /// Open loop: how late each successful call was sent (the same encoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag: Option<String>,
    /// Each second of the window, as `perSecond` but exact.
    pub per_second: Vec<MergeableSecond>,
}

/// One second of a result, as merging needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeableSecond {
    /// Seconds since the window began.
    pub second: u64,
    /// The sum of the successful calls' latencies, nanoseconds.
    pub latency_sum_ns: u64,
    /// Streaming calls: request messages written by the calls that ended in it.
    pub messages_sent: u64,
    /// Streaming calls: reply messages received by them.
    pub messages_received: u64,
    /// Its successful calls' latencies at 2 significant digits (HdrHistogram V2, base64),
    /// whence its p50 and p99; `None` when none succeeded.
    pub latency: Option<String>,
}

impl Mergeable {
    /// The mergeable parts of `result`.
    pub fn of(result: &LoadResult) -> Mergeable {
        let recorder = &result.recorder;
        let histograms: BTreeMap<usize, &Vec<u8>> = recorder
            .finished_seconds()
            .iter()
            .map(|(second, bytes)| (*second, bytes))
            .collect();
        Mergeable {
            window_start: rfc3339_nanos(result.started_at),
            first_send: rfc3339_nanos(result.first_send),
            all_latency_sum_ns: u64::try_from(recorder.all_latency_sum_ns).unwrap_or(u64::MAX),
            error_latency: encode_histogram(&recorder.error_latency),
            round_trip: recorder.round_trip.as_ref().map(encode_histogram),
            message_gaps: recorder.message_gaps.as_ref().map(encode_histogram),
            message_latency: recorder.message_latency.as_ref().map(encode_histogram),
            send_lag: recorder.send_lag.as_ref().map(encode_histogram),
            per_second: recorder
                .per_second
                .iter()
                .enumerate()
                .map(|(second, stats)| MergeableSecond {
                    second: second as u64,
                    latency_sum_ns: stats.latency_sum_ns,
                    messages_sent: stats.messages_sent,
                    messages_received: stats.messages_received,
                    latency: histograms.get(&second).map(|bytes| {
                        use base64::Engine as _;
                        base64::engine::general_purpose::STANDARD.encode(bytes)
                    }),
                })
                .collect(),
        }
    }
}
