//! The JSON document of a run ([`JsonReport`], written by `-O json` and `-O pretty`): ghz's
//! report, field for field, with grpclab's extras beside it under names ghz does not use.
//!
//! The ghz part follows ghz's runner `Report` type (runner/reporter.go) in names, types, units
//! and meaning, so a consumer written for ghz decodes it unchanged:
//! - durations are integer nanoseconds (Go's `time.Duration`); `histogram` marks are seconds;
//! - `count`, `total` and `rps` describe one span, the measured window: `total` is the window
//!   and `rps` = `count` / `total`. ghz has no warmup, so without `--warmup` the window is the
//!   whole run, as in ghz (and, as in ghz, calls `--skipFirst` leaves out of `count` still
//!   take time in `total`); with one, the warmup's time and calls are both outside, and
//!   `wholeRun` adds the warmup back;
//! - `average` is over every call, failed ones included; `fastest`, `slowest`,
//!   `latencyDistribution` (ghz's seven integer percentiles) and `histogram` (ghz's 11 marks)
//!   are over successful calls;
//! - `date` is when the run ended (RFC 3339); `endReason` is `normal`, `timeout` or `cancel`;
//! - error keys are grpc-go's `rpc error: code = X desc = …`;
//! - `details` lists calls one by one only with `--details` (bounded memory otherwise: ghz
//!   keeps every call), and is an empty array without it.
//!
//! One deliberate difference in meaning: in an open loop (`--rps`), latency counts from each
//! call's scheduled send time (coordinated omission corrected), where ghz counts from the
//! actual send; the uncorrected figure is `serviceTime`.
//!
//! The extras: `measuredWindow` and `measuredRps` (the same as `total` and `rps`, kept for
//! readers of earlier reports), `wholeRun` (warmup included), `latencyPercentiles` (fractional percentiles up to 99.99), `ok`, `errors`,
//! `serviceTime`, reconnect and warmup accounting, `perSecond`, and the merged HdrHistograms in
//! their standard serialized form so runs can be merged exactly.

use grpclab_load::{encode_histogram, LoadResult};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

use super::*;

/// The JSON document: ghz's report, then grpclab's extras.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JsonReport {
    /// `--name`; omitted when not given (as ghz omits it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `normal` (the `-n` calls were made), `timeout` (the `-z` duration passed) or `cancel`.
    pub end_reason: String,
    /// The settings.
    pub options: JsonOptions,
    /// When the run ended (RFC 3339).
    pub date: String,
    /// Measured calls, successful or not.
    pub count: u64,
    /// The measured window in nanoseconds (the whole run when there is no warmup, as in ghz).
    pub total: u64,
    /// Mean latency of every measured call, failed ones included (ns).
    pub average: u64,
    /// Fastest successful call (ns).
    pub fastest: u64,
    /// Slowest successful call (ns).
    pub slowest: u64,
    /// `count` / `total`.
    pub rps: f64,
    /// Failed calls per grpc-go error text.
    pub error_distribution: BTreeMap<String, u64>,
    /// Calls per status name.
    pub status_code_distribution: BTreeMap<String, u64>,
    /// ghz's seven percentiles of successful calls (all calls with `--count-errors`).
    pub latency_distribution: Vec<GhzLatencyPoint>,
    /// ghz's response-time histogram of successful calls.
    pub histogram: Vec<HistogramBucket>,
    /// `--details`: calls one by one; empty otherwise.
    pub details: Vec<CallDetailJson>,
    /// `--tags`; omitted when none (as ghz omits them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,

    /// grpclab: `--threshold` verdicts, in the order given; omitted when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<crate::verdict::ThresholdVerdict>,
    /// grpclab: what limited the run, with its evidence; omitted when not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_by: Option<crate::verdict::bound::Bound>,
    /// grpclab: the measured window (after the warmup) in nanoseconds: `total`.
    pub measured_window: u64,
    /// grpclab: the whole run in nanoseconds, warmup included.
    #[serde(default)]
    pub whole_run: u64,
    /// grpclab: `count` / `measuredWindow`, the throughput the run sustained.
    pub measured_rps: f64,
    /// grpclab: latency of successful calls at finer percentiles (up to 99.99).
    pub latency_percentiles: Vec<LatencyPoint>,
    /// grpclab: of `count`, calls that ended OK.
    pub ok: u64,
    /// grpclab: of `count`, calls that did not.
    pub errors: u64,
    /// grpclab, open loop: what latency reads without the coordinated-omission correction.
    pub service_time: Option<LatencyStats>,
    /// grpclab, open loop: how late successful calls were sent, from their scheduled time
    /// to the actual send (0 when on time): the client's own lag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag: Option<LatencyStats>,
    /// grpclab, streaming calls: request messages written over the measured calls.
    #[serde(default)]
    pub messages_sent: u64,
    /// grpclab, streaming calls: reply messages received.
    #[serde(default)]
    pub messages_received: u64,
    /// grpclab, bidi ping-pong: each request→reply round trip.
    #[serde(default)]
    pub round_trip: Option<LatencyStats>,
    /// grpclab, streams with several replies (server streaming): the time between two
    /// replies of a call arriving (0 for replies read together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_gaps: Option<LatencyStats>,
    /// grpclab, streams read with `--stream-stamp`: each reply's latency from the time the
    /// server stamped it to its arrival, by the two wall clocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_latency: Option<LatencyStats>,
    /// grpclab, `--stream-stamp`: replies that carried no stamp (not in `messageLatency`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub messages_unstamped: u64,
    /// grpclab, `--stream-stamp`: stamps later than their reply's arrival (recorded as 0): the
    /// server's clock is ahead of the client's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stamps_ahead: u64,
    /// grpclab: connections re-established during the run.
    pub reconnects: u64,
    /// grpclab: new connections opened because a connection's stream ids ran out, or
    /// (`--http1`) because the client closed one to end a stream early.
    #[serde(default)]
    pub planned_reconnects: u64,
    /// grpclab: calls abandoned at the end (counted as Canceled).
    pub abandoned: u64,
    /// grpclab: templated calls whose rendering failed (sent with call 0's request).
    #[serde(default)]
    pub render_failures: u64,
    /// grpclab, calls with a retry policy: attempts beyond their first (the server saw
    /// `count + retries` calls); omitted when none was retried.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u64,
    /// grpclab: `--duration-stop ignore`: calls in flight at the end, left out.
    #[serde(default)]
    pub ignored_in_flight: u64,
    /// grpclab, timed open loop: calls the schedule intended inside the window that were never
    /// sent (the client or its connections fell behind the rate); `count + ignoredInFlight +
    /// unsent` is the schedule's calls in the window.
    #[serde(default)]
    pub unsent: u64,
    /// grpclab: `unsent` that no stream took before the window closed.
    #[serde(default)]
    pub unsent_never_taken: u64,
    /// grpclab: `unsent` that was taken and given back when the run stopped before it was due.
    #[serde(default)]
    pub unsent_stopped: u64,
    /// grpclab: measured calls taken from the schedule and then neither recorded, left out,
    /// skipped nor given back — 0 unless grpclab lost a call (counted apart from the figures).
    #[serde(default)]
    pub unaccounted: u64,
    /// grpclab's engine: what the server's HTTP/2 frames allowed the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_windows: Option<ServerWindows>,
    /// grpclab's engine: how the server's windows held requests back; omitted when none
    /// waited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_waits: Option<WindowWaits>,
    /// grpclab: calls sent during the warmup that ended in the measured window (not measured).
    #[serde(default)]
    pub warmup_calls_in_window: u64,
    /// grpclab: the slowest of those (ns). Above `slowest`, the server kept some streams
    /// waiting longer than any measured call.
    #[serde(default)]
    pub warmup_call_slowest: u64,
    /// grpclab: when `details` lists fewer calls than `count`, which ones.
    pub details_kept: Option<DetailsKept>,
    /// grpclab: the measured window second by second.
    pub per_second: Vec<SecondPoint>,
    /// grpclab: the merged histograms.
    pub hdr_histogram: HdrHistograms,
    /// grpclab: a generator among several (`--shard`, `--start-at`), or their merge: the
    /// shards held and each generator's part, start and clock. Omitted for a lone run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharding: Option<crate::generator::Sharding>,
    /// grpclab: what `grpclab merge` needs beyond the figures above to add results
    /// exactly; written with `sharding`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mergeable: Option<Mergeable>,
    /// grpclab: the run's id in the history store and how it compares with the previous run
    /// of its configuration; omitted when not stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<crate::verdict::previous::StoredNote>,
    /// grpclab, a mix of methods: its seed and each method's figures (the figures above are
    /// the whole mix's); omitted for a run of one method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<MixJson>,
}

impl JsonReport {
    /// Builds the document for a report.
    pub fn from_report(report: &Report) -> JsonReport {
        let result = &report.result;
        let ghz_latency = report.ghz_latency();
        let latency: &Histogram<u64> = &ghz_latency;
        let empty = latency.is_empty();
        let ended_at = result.started_at + result.elapsed;
        let window_unix = report.sharding.as_ref().and_then(|_| {
            result
                .started_at
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|since| since.as_secs())
        });
        JsonReport {
            name: report.options.name.clone().unwrap_or_default(),
            end_reason: ghz_end_reason(result.end_reason).to_owned(),
            options: JsonOptions::from_run(&report.options, &report.result),
            date: humantime::format_rfc3339_seconds(ended_at).to_string(),
            count: result.count(),
            total: saturating_ns(result.elapsed),
            average: result.mean_latency_all_ns(),
            fastest: if empty { 0 } else { latency.min() },
            slowest: if empty { 0 } else { latency.max() },
            rps: result.rps(),
            error_distribution: result.error_counts().clone(),
            status_code_distribution: result
                .status_counts()
                .into_iter()
                .map(|(code, count)| (code.name().to_owned(), count))
                .collect(),
            latency_distribution: ghz_percentiles(latency),
            histogram: ghz_histogram(latency),
            details: details(result),
            tags: report.options.tags.clone(),
            thresholds: report.thresholds.clone(),
            bound_by: report.bound_by.clone(),
            history: report.history.clone(),
            measured_window: saturating_ns(result.elapsed),
            whole_run: saturating_ns(result.whole_run),
            measured_rps: result.rps(),
            latency_percentiles: LatencyStats::of(result.latency()).latency_distribution,
            ok: result.ok(),
            errors: result.errors(),
            service_time: result.service_time().map(LatencyStats::of),
            send_lag: result.send_lag().map(LatencyStats::of),
            messages_sent: result.messages().0,
            messages_received: result.messages().1,
            round_trip: result.round_trip().map(LatencyStats::of),
            message_gaps: result.message_gaps().map(LatencyStats::of),
            message_latency: result.message_latency().map(LatencyStats::of),
            messages_unstamped: result.recorder.messages_unstamped,
            stamps_ahead: result.recorder.stamps_ahead,
            reconnects: result.reconnects,
            planned_reconnects: result.planned_reconnects,
            abandoned: result.abandoned,
            render_failures: result.render_failures,
            retries: result.recorder.retries,
            ignored_in_flight: result.ignored,
            unsent: result.unsent,
            unsent_never_taken: result.unsent_by_cause.never_taken,
            unsent_stopped: result.unsent_by_cause.stopped,
            unaccounted: result.unaccounted,
            server_windows: result.server_windows.map(ServerWindows::from),
            window_waits: WindowWaits::of(&result.window_waits),
            warmup_calls_in_window: result.warmup_calls_in_window().0,
            warmup_call_slowest: result.warmup_calls_in_window().1,
            details_kept: result
                .details()
                .filter(|log| (log.calls.len() as u64) < result.count())
                .map(|log| DetailsKept {
                    kept: log.calls.len() as u64,
                    of: result.count(),
                    which: "first".to_owned(),
                }),
            per_second: result
                .per_second()
                .iter()
                .enumerate()
                .map(|(second, stats)| SecondPoint {
                    second: second as u64,
                    count: stats.count,
                    errors: stats.errors,
                    average: stats.mean_latency_ns(),
                    slowest: stats.latency_max_ns,
                    in_flight_max: stats.in_flight_max,
                    p50: stats.latency_p50_ns,
                    p99: stats.latency_p99_ns,
                    unix_second: window_unix.map(|start| start + second as u64),
                })
                .collect(),
            hdr_histogram: HdrHistograms {
                unit: "nanoseconds".to_owned(),
                encoding: "HdrHistogram V2 compressed (deflate), base64".to_owned(),
                latency: encode_histogram(result.latency()),
                service_time: result.service_time().map(encode_histogram),
            },
            mergeable: report.sharding.as_ref().map(|_| Mergeable::of(result)),
            mix: MixJson::of(result, report.options.mix_seed),
            sharding: report.sharding.clone(),
        }
    }

    /// The run's latency histogram, decoded from its saved HdrHistogram; `None` when there is
    /// none or it is empty.
    pub fn latency_histogram(&self) -> Option<Histogram<u64>> {
        grpclab_load::decode_histogram(&self.hdr_histogram.latency)
            .ok()
            .filter(|histogram| !histogram.is_empty())
    }

    /// Latency of successful calls at `percentage` (one of grpclab's percentiles), in ns.
    pub fn percentile(&self, percentage: f64) -> Option<u64> {
        self.latency_percentiles
            .iter()
            .find(|point| point.percentage == percentage)
            .map(|point| point.latency)
    }
}

/// Whether a count is zero: counts that are zero in every run but a few are left out.
pub(super) fn is_zero(count: &u64) -> bool {
    *count == 0
}

fn details(result: &LoadResult) -> Vec<CallDetailJson> {
    let Some(log) = result.details() else {
        return Vec::new();
    };
    log.calls
        .iter()
        .map(|call| CallDetailJson {
            timestamp: rfc3339_nanos(result.started_at + Duration::from_nanos(call.ended_ns)),
            latency: call.latency_ns,
            error: call.error.as_deref().unwrap_or_default().to_owned(),
            status: call.code.name().to_owned(),
            method: result
                .methods
                .get(call.method as usize)
                .map(|method| method.name.clone())
                .unwrap_or_default(),
            flow_run: call.flow_run,
        })
        .collect()
}
