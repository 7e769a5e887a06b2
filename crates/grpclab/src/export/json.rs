//! JSON (`-O json`, and `-O pretty` indented): ghz's report, field for field, with grpclab's
//! extras beside it under names ghz does not use.
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

use grpclab_load::{encode_histogram, EndReason, LoadResult};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::{Exporter, Report, RunOptions, GHZ_PERCENTILES, PERCENTILES};

/// One point of ghz's latency distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GhzLatencyPoint {
    /// The percentile, an integer as in ghz (10, 25, 50, 75, 90, 95, 99).
    pub percentage: u32,
    /// Nanoseconds.
    pub latency: u64,
}

/// One point of grpclab's finer latency distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    /// The percentile, e.g. 99.9.
    pub percentage: f64,
    /// Nanoseconds.
    pub latency: u64,
}

/// One bar of ghz's response-time histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramBucket {
    /// The bucket's upper bound, in seconds (ghz's unit for marks).
    pub mark: f64,
    /// Successful calls at or under the mark and above the previous one.
    pub count: u64,
    /// `count` as a fraction of the successful calls.
    pub frequency: f64,
}

/// One call of ghz's per-call `details`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallDetailJson {
    /// When the call ended (RFC 3339 with nanoseconds).
    pub timestamp: String,
    /// Nanoseconds.
    pub latency: u64,
    /// Empty for a successful call, else grpc-go's error text.
    pub error: String,
    /// The status name (`OK`, `Unavailable`, ...).
    pub status: String,
    /// grpclab, a mix: the method the call called; omitted for a run of one method.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub method: String,
}

/// Summary statistics of one histogram at grpclab's percentiles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyStats {
    /// How many values the histogram holds.
    #[serde(default)]
    pub count: u64,
    /// Mean, in nanoseconds.
    pub average: u64,
    /// Fastest, in nanoseconds.
    pub fastest: u64,
    /// Slowest, in nanoseconds.
    pub slowest: u64,
    /// At grpclab's percentiles (ghz's seven, then 99.9 and 99.99).
    pub latency_distribution: Vec<LatencyPoint>,
}

impl LatencyStats {
    /// The latency at `percentage` (one of grpclab's percentiles), in nanoseconds; `None` for
    /// another percentage or an empty histogram.
    pub fn at(&self, percentage: f64) -> Option<u64> {
        self.latency_distribution
            .iter()
            .find(|point| point.percentage == percentage)
            .map(|point| point.latency)
    }

    /// The statistics of `histogram` (zeros when it is empty).
    pub fn of(histogram: &Histogram<u64>) -> LatencyStats {
        let empty = histogram.is_empty();
        LatencyStats {
            count: histogram.len(),
            average: if empty {
                0
            } else {
                histogram.mean().round() as u64
            },
            fastest: if empty { 0 } else { histogram.min() },
            slowest: if empty { 0 } else { histogram.max() },
            latency_distribution: if empty {
                Vec::new()
            } else {
                PERCENTILES
                    .iter()
                    .map(|p| LatencyPoint {
                        percentage: *p,
                        latency: histogram.value_at_percentile(*p),
                    })
                    .collect()
            },
        }
    }
}

/// One second of the series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecondPoint {
    /// Seconds since the measured window began.
    pub second: u64,
    /// Calls completed.
    pub count: u64,
    /// Of those, failed.
    pub errors: u64,
    /// Mean latency of the successful calls, in nanoseconds.
    pub average: Option<u64>,
    /// Slowest successful call, in nanoseconds.
    pub slowest: u64,
    /// The most calls outstanding when one of this second's calls ended (summed over client
    /// threads; see `SecondStats::in_flight_max`).
    #[serde(default)]
    pub in_flight_max: u64,
    /// Median latency of this second's successful calls, ns (2 significant digits; 0 if none).
    #[serde(default)]
    pub p50: u64,
    /// 99th percentile of the same, ns.
    #[serde(default)]
    pub p99: u64,
    /// A generator among several (`--shard`, `--start-at`) and merges: the wall-clock
    /// second (Unix) this second began in, the key several generators' series line up by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix_second: Option<u64>,
}

/// The serialized histograms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HdrHistograms {
    /// What the values mean.
    pub unit: String,
    /// How they are encoded.
    pub encoding: String,
    /// Latency of successful calls.
    pub latency: String,
    /// Open loop: the uncorrected service time.
    pub service_time: Option<String>,
}

/// Which calls `details` holds, when it holds fewer than all of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetailsKept {
    /// Calls listed.
    pub kept: u64,
    /// Calls measured.
    pub of: u64,
    /// How they were chosen: `first` (the first that ended).
    pub which: String,
}

/// One of the target's addresses, how many of the run's connections dialled it at the start
/// and how many measured calls ended on connections to it (an address a re-resolution brought
/// during the run is listed after the others, with 0 connections at the start).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressShare {
    /// `IP:PORT`.
    pub address: String,
    /// Connections to it.
    pub connections: u64,
    /// Measured calls that ended on those connections (sent there, or failed while the
    /// connection was down); calls abandoned at the drain limit are in no address's count.
    #[serde(default)]
    pub calls: u64,
}

impl AddressShare {
    /// The shares of a run: round_robin gives connection i to address i mod n, pick_first
    /// every connection to the first (the one that accepted); the calls are the run's count.
    pub fn of(options: &RunOptions, result: &LoadResult) -> Vec<AddressShare> {
        let count = options.addresses.len();
        let listed: Vec<String> = if result.addresses.len() > count {
            result.addresses.iter().map(ToString::to_string).collect()
        } else {
            options.addresses.clone()
        };
        if listed.len() < 2 {
            return Vec::new();
        }
        let connections = options.connections as u64;
        listed
            .iter()
            .enumerate()
            .map(|(index, address)| AddressShare {
                address: address.clone(),
                connections: if index >= count.max(1) {
                    0
                } else if options.lb_strategy == "round_robin" {
                    connections / count as u64
                        + u64::from((index as u64) < connections % count as u64)
                } else if index == 0 {
                    connections
                } else {
                    0
                },
                calls: result.calls_by_address.get(index).copied().unwrap_or(0),
            })
            .collect()
    }
}

/// The run's settings: ghz's `Options` field for field (names as ghz spells them), then
/// grpclab's own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JsonOptions {
    /// `package.Service.Method`.
    pub call: String,
    /// The server, as given.
    pub host: String,
    /// The .proto file, if one was given.
    pub proto: String,
    /// The protoset file (grpclab does not read protosets yet: always empty).
    pub protoset: String,
    /// Import paths of the .proto.
    #[serde(rename = "import-paths")]
    pub import_paths: Vec<String>,
    /// Request compression (not supported yet: false).
    #[serde(rename = "enable-compression")]
    pub enable_compression: bool,
    /// `--cacert`.
    pub cacert: String,
    /// TLS client certificate.
    pub cert: String,
    /// TLS client key.
    pub key: String,
    /// TLS server name.
    pub cname: String,
    /// TLS verification skipped.
    #[serde(rename = "skipTLS")]
    pub skip_tls: bool,
    /// `--insecure`: plaintext h2c.
    pub insecure: bool,
    /// The `:authority` sent.
    pub authority: String,
    /// ghz's `--lb-strategy`; omitted with one address.
    #[serde(
        rename = "lb-strategy",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub lb_strategy: String,
    /// grpclab: every address the target resolved to, with the connections each got (in
    /// connection order, as `--lb-strategy` spread them); omitted with one address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<AddressShare>,
    /// The open-loop rate rounded to an integer, as ghz's type holds it; 0 = closed loop.
    /// The exact rate is `rate`.
    pub rps: u64,
    /// Rate schedule: `const`.
    #[serde(rename = "load-schedule")]
    pub load_schedule: String,
    /// Schedule start rate.
    #[serde(rename = "load-start")]
    pub load_start: u64,
    /// Schedule end rate.
    #[serde(rename = "load-end")]
    pub load_end: u64,
    /// Schedule step.
    #[serde(rename = "load-step")]
    pub load_step: i64,
    /// Schedule step duration (ns).
    #[serde(rename = "load-step-duration")]
    pub load_step_duration: u64,
    /// Schedule maximum duration (ns).
    #[serde(rename = "load-max-duration")]
    pub load_max_duration: u64,
    /// Streams in flight.
    pub concurrency: u64,
    /// Concurrency schedule: `const`.
    #[serde(rename = "concurrency-schedule")]
    pub concurrency_schedule: String,
    /// Concurrency schedule start.
    #[serde(rename = "concurrency-start")]
    pub concurrency_start: u64,
    /// Concurrency schedule end.
    #[serde(rename = "concurrency-end")]
    pub concurrency_end: u64,
    /// Concurrency schedule step.
    #[serde(rename = "concurrency-step")]
    pub concurrency_step: i64,
    /// Concurrency schedule step duration (ns).
    #[serde(rename = "concurrency-step-duration")]
    pub concurrency_step_duration: u64,
    /// Concurrency schedule maximum duration (ns).
    #[serde(rename = "concurrency-max-duration")]
    pub concurrency_max_duration: u64,
    /// `-n`, or 0 when the run was timed.
    pub total: u64,
    /// ghz's async mode: calls sent on a rate's schedule whatever is in flight, which is what
    /// grpclab's open loop (`rps` above 0) always does.
    #[serde(rename = "async")]
    pub async_: bool,
    /// HTTP/2 connections.
    pub connections: u64,
    /// `-z` in nanoseconds, or 0.
    pub duration: u64,
    /// Per-call deadline in nanoseconds, or 0 for none.
    pub timeout: u64,
    /// Connect timeout in nanoseconds.
    #[serde(rename = "dial-timeout")]
    pub dial_timeout: u64,
    /// Client keepalive pings (none): 0.
    pub keepalive: u64,
    /// The request payload as given (`-d`/`-D`), or null for a scenario's own.
    pub data: serde_json::Value,
    /// Whether the payload came as serialized protobuf (`-b`/`-B`).
    pub binary: bool,
    /// Request metadata (`-m`), or null.
    pub metadata: Option<BTreeMap<String, String>>,
    /// Client threads.
    #[serde(rename = "CPUs")]
    pub cpus: u64,
    /// `--name`.
    pub name: String,
    /// `--skipFirst`: calls left out at the start (grpclab's `warmup` skips by time).
    #[serde(rename = "skipFirst")]
    pub skip_first: u64,
    /// grpclab: the scenario or .proto the call came from.
    pub scenario: String,
    /// grpclab: distinct requests sent round-robin.
    #[serde(rename = "distinctRequests")]
    pub distinct_requests: usize,
    /// grpclab: the exact open-loop rate (req/s); 0 = closed loop.
    pub rate: f64,
    /// grpclab: warmup in nanoseconds (calls sent, not measured).
    pub warmup: u64,
    /// grpclab: whether replies were validated.
    pub validate: bool,
    /// grpclab: the HTTP/2 implementation (`lab` or `h2`).
    pub transport: String,
    /// grpclab: `--details` (calls listed one by one), or null.
    #[serde(rename = "detailsLimit")]
    pub details_limit: Option<usize>,
    /// `--count-errors`: failed calls count in the latency figures.
    #[serde(rename = "count-errors", default)]
    pub count_errors: bool,
    /// grpclab: the streaming flags as given (`call-count=5 interval=10ms independent ...`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stream: String,
    /// grpclab: a fingerprint of what the calls send (payloads, headers, a mix's methods and
    /// weights), so `grpclab merge` can tell generators of one run from others.
    #[serde(
        rename = "requestsDigest",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub requests_digest: String,
}

impl JsonOptions {
    /// ghz's options for a run made with `options` (its `result` for the calls per address).
    pub fn from_run(options: &RunOptions, result: &LoadResult) -> JsonOptions {
        JsonOptions {
            addresses: AddressShare::of(options, result),
            ..JsonOptions::from_settings(options)
        }
    }

    /// ghz's options for a run with `options` made by another client (no addresses).
    pub fn from_settings(options: &RunOptions) -> JsonOptions {
        let nanos = |d: Option<Duration>| d.map_or(0, saturating_ns);
        JsonOptions {
            call: options.call.clone(),
            host: options.host.clone(),
            proto: options.proto.clone().unwrap_or_default(),
            protoset: String::new(),
            import_paths: options.import_paths.clone(),
            enable_compression: options.compression,
            cacert: options.tls.cacert.clone(),
            cert: options.tls.cert.clone(),
            key: options.tls.key.clone(),
            cname: options.tls.cname.clone(),
            skip_tls: options.tls.skip_verify,
            insecure: options.tls.insecure,
            authority: if options.authority.is_empty() {
                options.host.clone()
            } else {
                options.authority.clone()
            },
            lb_strategy: options.lb_strategy.clone(),
            addresses: Vec::new(),
            rps: options.rps.round() as u64,
            load_schedule: if options.load.schedule.is_empty() {
                "const".to_owned()
            } else {
                options.load.schedule.clone()
            },
            load_start: options.load.start.round() as u64,
            load_end: options.load.end.round() as u64,
            load_step: options.load.step.round() as i64,
            load_step_duration: saturating_ns(options.load.step_duration),
            load_max_duration: saturating_ns(options.load.max_duration),
            concurrency: options.concurrency as u64,
            concurrency_schedule: if options.concurrency_shape.schedule.is_empty() {
                "const".to_owned()
            } else {
                options.concurrency_shape.schedule.clone()
            },
            concurrency_start: options.concurrency_shape.start as u64,
            concurrency_end: options.concurrency_shape.end as u64,
            concurrency_step: options.concurrency_shape.step as i64,
            concurrency_step_duration: saturating_ns(options.concurrency_shape.step_duration),
            concurrency_max_duration: saturating_ns(options.concurrency_shape.max_duration),
            total: options.total.unwrap_or(0),
            async_: options.rps > 0.0,
            connections: options.connections as u64,
            duration: nanos(options.duration),
            timeout: nanos(options.timeout),
            dial_timeout: saturating_ns(options.dial_timeout),
            keepalive: saturating_ns(options.keepalive),
            data: options.data.clone().unwrap_or(serde_json::Value::Null),
            binary: options.binary,
            metadata: options.metadata.clone(),
            cpus: options.cpus as u64,
            name: options.name.clone().unwrap_or_default(),
            skip_first: options.skip_first,
            scenario: options.scenario.clone(),
            distinct_requests: options.distinct_requests,
            rate: options.rps,
            warmup: saturating_ns(options.warmup),
            validate: options.validate,
            transport: options.transport.clone(),
            details_limit: options.details,
            count_errors: options.count_errors,
            stream: options.stream.clone(),
            requests_digest: options.requests_digest.clone(),
        }
    }
}

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
    /// grpclab: new connections opened because a connection's stream ids ran out.
    #[serde(default)]
    pub planned_reconnects: u64,
    /// grpclab: calls abandoned at the end (counted as Canceled).
    pub abandoned: u64,
    /// grpclab: templated calls whose rendering failed (sent with call 0's request).
    #[serde(default)]
    pub render_failures: u64,
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

/// A mix of methods: the seed that drew each call's method, and each method's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MixJson {
    /// `--mix-seed` (or the workload's `seed`, or the one drawn): the same seed makes the same
    /// calls of each method in an `-n` run.
    pub seed: u64,
    /// Each method, in the order given.
    pub methods: Vec<MethodJson>,
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
}

impl MixJson {
    /// The mix of `result` (`None` for one method).
    fn of(result: &LoadResult, seed: Option<u64>) -> Option<MixJson> {
        if result.methods.is_empty() {
            return None;
        }
        let weights: u64 = result.methods.iter().map(|m| u64::from(m.weight)).sum();
        let methods = result
            .methods
            .iter()
            .map(|method| {
                let recorder = &method.recorder;
                let count = method.count();
                MethodJson {
                    name: method.name.clone(),
                    weight: method.weight,
                    share: f64::from(method.weight) / weights.max(1) as f64,
                    count,
                    ok: count - method.errors(),
                    errors: method.errors(),
                    rps: method.rps(result.elapsed),
                    average: recorder.mean_latency_all_ns(),
                    latency: LatencyStats::of(&recorder.latency),
                    status_code_distribution: recorder
                        .status_counts()
                        .into_iter()
                        .map(|(code, count)| (code.name().to_owned(), count))
                        .collect(),
                    error_distribution: recorder.errors.clone(),
                    hdr_histogram: encode_histogram(&recorder.latency),
                    latency_sum: u64::try_from(recorder.all_latency_sum_ns).unwrap_or(u64::MAX),
                }
            })
            .collect();
        Some(MixJson {
            seed: seed.unwrap_or_default(),
            methods,
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
            ignored_in_flight: result.ignored,
            unsent: result.unsent,
            unsent_never_taken: result.unsent_by_cause.never_taken,
            unsent_stopped: result.unsent_by_cause.stopped,
            unaccounted: result.unaccounted,
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

/// ghz's name for why a run ended.
pub fn ghz_end_reason(reason: EndReason) -> &'static str {
    match reason {
        EndReason::Total => "normal",
        EndReason::Timeout => "timeout",
        EndReason::Cancel => "cancel",
    }
}

/// ghz's seven percentiles; none without a successful call (as ghz).
pub fn ghz_percentiles(latency: &Histogram<u64>) -> Vec<GhzLatencyPoint> {
    if latency.is_empty() {
        return Vec::new();
    }
    GHZ_PERCENTILES
        .iter()
        .map(|p| GhzLatencyPoint {
            percentage: *p,
            latency: latency.value_at_percentile(f64::from(*p)),
        })
        .collect()
}

/// ghz's response-time histogram: 11 marks from the fastest to the slowest call, 10 equal
/// steps apart; each call counts under the first mark at or above it. None without a
/// successful call (as ghz). Computed from the HdrHistogram, so a call sits at its recorded
/// value (within 0.1 %).
pub fn ghz_histogram(latency: &Histogram<u64>) -> Vec<HistogramBucket> {
    const STEPS: u64 = 10;
    if latency.is_empty() {
        return Vec::new();
    }
    let (fastest, slowest) = (latency.min(), latency.max());
    let step = (slowest - fastest) as f64 / STEPS as f64;
    let marks: Vec<f64> = (0..STEPS)
        .map(|i| fastest as f64 + step * i as f64)
        .chain(std::iter::once(slowest as f64))
        .collect();
    let mut counts = vec![0u64; marks.len()];
    for value in latency.iter_recorded() {
        // The lowest value of the recorded bucket: min() is one, so the first mark fills.
        let at = latency.lowest_equivalent(value.value_iterated_to()) as f64;
        let index = marks
            .iter()
            .position(|mark| at <= *mark)
            .unwrap_or(marks.len() - 1);
        counts[index] += value.count_at_value();
    }
    let calls = latency.len() as f64;
    marks
        .iter()
        .zip(counts)
        .map(|(mark, count)| HistogramBucket {
            mark: mark / 1e9,
            count,
            frequency: count as f64 / calls,
        })
        .collect()
}

/// Whether a count is zero: counts that are zero in every run but a few are left out.
fn is_zero(count: &u64) -> bool {
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
        })
        .collect()
}

/// RFC 3339 with nanoseconds, in UTC (Go's `time.RFC3339Nano` trims trailing zeros; both read
/// back as the same instant).
pub fn rfc3339_nanos(at: SystemTime) -> String {
    humantime::format_rfc3339_nanos(at).to_string()
}

/// A duration in whole nanoseconds, saturating (Go's `time.Duration` unit).
pub(super) fn saturating_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Renders [`JsonReport`] on one line, as ghz's `-O json` does.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec(&JsonReport::from_report(report))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// Renders [`JsonReport`] indented by two spaces, as ghz's `-O pretty` does.
pub struct PrettyJsonExporter;

impl Exporter for PrettyJsonExporter {
    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(&JsonReport::from_report(report))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grpclab_load::recorder::new_histogram;

    #[test]
    fn histogram_marks_run_from_fastest_to_slowest_in_ten_steps() {
        let mut latency = new_histogram();
        for ms in [10u64, 10, 12, 15, 20, 30, 110] {
            latency.record(ms * 1_000_000).unwrap();
        }
        let buckets = ghz_histogram(&latency);
        assert_eq!(buckets.len(), 11);
        assert!((buckets[0].mark - 0.010).abs() < 1e-4, "{buckets:?}");
        assert!((buckets[10].mark - 0.110).abs() < 1e-3, "{buckets:?}");
        assert!((buckets[1].mark - 0.020).abs() < 1e-3, "{buckets:?}");
        let counts: Vec<u64> = buckets.iter().map(|b| b.count).collect();
        // 10,10 at the first mark; 12,15,20 at or under 20 ms; 30 under 30 ms; 110 last.
        assert_eq!(counts, [2, 3, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
        let total: f64 = buckets.iter().map(|b| b.frequency).sum();
        assert!((total - 1.0).abs() < 1e-9);
        assert!(ghz_histogram(&new_histogram()).is_empty());
    }

    #[test]
    fn ghz_percentiles_are_the_seven_integers() {
        let mut latency = new_histogram();
        for us in 1..=100u64 {
            latency.record(us * 1_000).unwrap();
        }
        let points = ghz_percentiles(&latency);
        let percentages: Vec<u32> = points.iter().map(|p| p.percentage).collect();
        assert_eq!(percentages, [10, 25, 50, 75, 90, 95, 99]);
        // Nearest rank, as ghz: the 50th of 100 sorted values.
        assert_eq!(points[2].latency / 1_000, 50);
        assert!(ghz_percentiles(&new_histogram()).is_empty());
    }
}
