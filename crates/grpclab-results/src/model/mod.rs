//! The results model: a finished run with its settings ([`Report`]) and the document it is
//! saved as ([`JsonReport`], ghz's JSON and grpclab's extras). Load, bench, compare,
//! capacity, merge and the store all read and write these; exporters render them.

mod document;
mod figures;
mod mix;
mod settings;

pub use self::document::JsonReport;
pub use self::figures::{
    ghz_end_reason, ghz_histogram, ghz_percentiles, rfc3339_nanos, saturating_ns, AddressShare,
    CallDetailJson, DetailsKept, GhzLatencyPoint, HdrHistograms, HistogramBucket, LatencyPoint,
    LatencyStats, SecondPoint, ServerWindows, WindowWaits,
};
pub use self::mix::{FlowJson, Mergeable, MergeableSecond, MethodJson, MixJson};
pub use self::settings::JsonOptions;

use grpclab_load::LoadResult;
use std::collections::BTreeMap;
use std::time::Duration;

/// The TLS flags of a run, as given (ghz's options report them by these names).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// `--insecure`: plaintext h2c.
    pub insecure: bool,
    /// `--cacert`.
    pub cacert: String,
    /// `--cert`.
    pub cert: String,
    /// `--key`.
    pub key: String,
    /// `--cname`.
    pub cname: String,
    /// `--skipTLS`.
    pub skip_verify: bool,
}

/// The settings a run was made with, as reported beside its results.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// `--insecure` and the TLS flags, as given.
    pub tls: TlsOptions,
    /// `-e`: gzip.
    pub compression: bool,
    /// `--name`.
    pub name: Option<String>,
    /// `--tags`.
    pub tags: BTreeMap<String, String>,
    /// The server, as given.
    pub host: String,
    /// The `:authority` sent (the host unless `--authority`).
    pub authority: String,
    /// Every address the target resolved to, when it named more than one.
    pub addresses: Vec<String>,
    /// `--lb-strategy` (`pick_first` or `round_robin`), when the target had several
    /// addresses.
    pub lb_strategy: String,
    /// `package.Service.Method`.
    pub call: String,
    /// The scenario or .proto the call came from.
    pub scenario: String,
    /// The .proto file, when the call came from one.
    pub proto: Option<String>,
    /// Its import paths.
    pub import_paths: Vec<String>,
    /// The payload as given (`-d`/`-D`), parsed.
    pub data: Option<serde_json::Value>,
    /// Whether the payload came as binary protobuf (`-b`/`-B`).
    pub binary: bool,
    /// Request metadata (`-m`).
    pub metadata: Option<BTreeMap<String, String>>,
    /// Distinct requests sent round-robin.
    pub distinct_requests: usize,
    /// A mix of methods: its seed (the methods are in the result); `None` for one method.
    pub mix_seed: Option<u64>,
    /// Streams in flight.
    pub concurrency: usize,
    /// HTTP/2 connections.
    pub connections: usize,
    /// Open-loop rate; 0 = closed loop.
    pub rps: f64,
    /// Measured duration, if set.
    pub duration: Option<Duration>,
    /// Measured calls, if set.
    pub total: Option<u64>,
    /// Warmup.
    pub warmup: Duration,
    /// Per-call timeout, if any.
    pub timeout: Option<Duration>,
    /// How long a connection may take to open.
    pub dial_timeout: Duration,
    /// `--keepalive` (zero: none).
    pub keepalive: Duration,
    /// Client threads.
    pub cpus: usize,
    /// Whether replies were validated.
    pub validate: bool,
    /// The HTTP/2 implementation.
    pub transport: String,
    /// `--details`: calls kept one by one.
    pub details: Option<usize>,
    /// `--count-errors`: failed calls count in fastest, slowest, percentiles and histogram.
    pub count_errors: bool,
    /// The streaming flags as given (`call-count=5 interval=10ms ...`), empty for none.
    pub stream: String,
    /// What the calls send ([`grpclab_load::LoadConfig::requests_digest`]), empty when unknown.
    pub requests_digest: String,
    /// `--skipFirst`: calls left out at the start.
    pub skip_first: u64,
    /// `--load-schedule` and its settings (rates in req/s).
    pub load: LoadShape,
    /// `--concurrency-schedule` and its settings (streams).
    pub concurrency_shape: LoadShape,
    /// `--network`: the network the calls crossed, as given (empty: not given).
    pub network: String,
    /// `--protocol`, when not gRPC (`grpc-web`, `grpc-web-text`, `connect`; empty: gRPC).
    pub protocol: String,
    /// `--codec`, when not proto (`json`; empty: proto).
    pub codec: String,
}

/// ghz's load- or concurrency-schedule settings as given (`const` with its zeros when not stepped).
#[derive(Debug, Clone, Default)]
pub struct LoadShape {
    /// `const`, `step` or `line` (empty means `const`).
    pub schedule: String,
    /// `--load-start`.
    pub start: f64,
    /// `--load-end`.
    pub end: f64,
    /// `--load-step`.
    pub step: f64,
    /// `--load-step-duration`.
    pub step_duration: Duration,
    /// `--load-max-duration`.
    pub max_duration: Duration,
}

impl Report {
    /// The latency the ghz figures describe: successful calls, or every call with
    /// `--count-errors` (as ghz).
    pub fn ghz_latency(&self) -> std::borrow::Cow<'_, hdrhistogram::Histogram<u64>> {
        if self.options.count_errors {
            std::borrow::Cow::Owned(self.result.latency_of_all_calls())
        } else {
            std::borrow::Cow::Borrowed(self.result.latency())
        }
    }
}

/// A finished run with the settings it was made with.
#[derive(Debug, Clone)]
pub struct Report {
    /// The settings.
    pub options: RunOptions,
    /// The measurements.
    pub result: LoadResult,
    /// `--threshold` verdicts, in the order given (empty without thresholds).
    pub thresholds: Vec<crate::verdict::ThresholdVerdict>,
    /// What limited the run as far as the client can tell (`load`); `None` where the caller
    /// judges it with more evidence (bench rows carry their own).
    pub bound_by: Option<crate::verdict::bound::Bound>,
    /// A run shared by several generators (`--shard`, `--start-at`), or their merge: which
    /// shards it holds and each generator's facts. `None` for a lone run.
    pub sharding: Option<crate::generator::Sharding>,
    /// Where the run was stored and how it compares with the previous run of its
    /// configuration (`None` with `--no-history`, or a store that could not be written).
    pub history: Option<crate::verdict::previous::StoredNote>,
}

/// The percentiles ghz reports (runner/reporter.go), as integer percentages.
pub const GHZ_PERCENTILES: [u32; 7] = [10, 25, 50, 75, 90, 95, 99];

/// The percentiles grpclab reports beside them: ghz's, then the tail.
pub const PERCENTILES: [f64; 9] = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99];
