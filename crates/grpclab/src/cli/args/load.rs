//! `grpclab load`'s flags (ghz's, by their names) and `grpclab encode`'s.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

use super::{HistoryFlagArgs, MetricsArgs, OutputFormat, ScenarioArgs};
use crate::cli::values::{
    parse_at_least_one, parse_byte_size, parse_calls, parse_calls_or_zero, parse_details,
    parse_duration, parse_duration_or_zero, parse_network, parse_positive_rate, parse_rate_change,
    parse_rps, parse_shard, parse_start_at, parse_streams, parse_streams_change,
    parse_streams_or_zero,
};

/// ghz's `--load-schedule` and `--concurrency-schedule` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScheduleShape {
    /// One value for the whole run.
    Const,
    /// A step every step duration.
    Step,
    /// A step every second.
    Line,
}

impl ScheduleShape {
    /// The value as typed (and as ghz reports it in its options).
    pub fn name(self) -> &'static str {
        match self {
            ScheduleShape::Const => "const",
            ScheduleShape::Step => "step",
            ScheduleShape::Line => "line",
        }
    }
}

/// `--duration-stop` values (ghz's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurationStopArg {
    /// Calls in flight may finish within the drain limit (grpclab's default).
    Wait,
    /// Calls in flight count as Canceled at once (ghz's default).
    Close,
    /// Calls in flight are left out.
    Ignore,
}

/// `--transport` values: grpclab's own HTTP/2 engine or the h2 crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// grpclab's own HTTP/2 engine (named `lab` on the command line since it first served
    /// lab; `engine` is accepted too).
    #[value(name = "lab", alias = "engine")]
    Engine,
    /// The h2 crate, as tonic uses it: the reference.
    H2,
}

impl TransportArg {
    /// The value as the command line names it (and as reports show it).
    pub fn name(self) -> &'static str {
        match self {
            TransportArg::Engine => "lab",
            TransportArg::H2 => "h2",
        }
    }
}

/// `--protocol` values: the wire protocol each call speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtocolArg {
    /// gRPC over HTTP/2.
    Grpc,
    /// gRPC-Web, binary: the status in a trailer frame closing the body.
    GrpcWeb,
    /// gRPC-Web, text: the binary body base64-encoded.
    GrpcWebText,
    /// Connect, binary codec: a unary call's body is the bare message and its status the
    /// HTTP status and an error JSON; a server stream is enveloped and ends with an
    /// end-stream message.
    Connect,
}

impl ProtocolArg {
    /// The protocol it names.
    pub fn protocol(self) -> grpclab_core::protocol::Protocol {
        use grpclab_core::protocol::Protocol;
        match self {
            ProtocolArg::Grpc => Protocol::Grpc,
            ProtocolArg::GrpcWeb => Protocol::GrpcWeb,
            ProtocolArg::GrpcWebText => Protocol::GrpcWebText,
            ProtocolArg::Connect => Protocol::Connect,
        }
    }
}

/// `load --codec` values: how messages are encoded on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WireCodecArg {
    /// Protobuf's binary encoding.
    Proto,
    /// Protobuf's JSON mapping.
    Json,
}

/// `--lb-strategy`'s values, spelled as gRPC and ghz spell them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LbStrategy {
    /// Every connection to the first address that accepts one.
    #[value(name = "pick_first")]
    PickFirst,
    /// Connection i to address i mod n.
    #[value(name = "round_robin")]
    RoundRobin,
}

/// `grpclab load [OPTIONS] HOST:PORT`
#[derive(Debug, Clone, Args)]
#[command(
    args_override_self = true,
    after_help = "The flags above are those a first run needs; --help lists every flag, by topic, with examples.",
    after_long_help = LOAD_EXAMPLES
)]
pub struct LoadArgs {
    /// The server, as HOST:PORT (or `host` in --config).
    #[arg(
        value_name = "HOST:PORT",
        default_value = "",
        hide_default_value = true
    )]
    pub target: String,

    /// ghz's config file: JSON, or TOML when it ends in .toml; its keys are ghz's option names
    /// (`call`, `total`, `data`, `host`, ...). Flags on the command line override it.
    #[arg(help_heading = "Outputs", long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// ghz's debug log: JSON lines (tracing) of name resolution, connections made, ended
    /// (GOAWAY, resets, losses) and re-made, failed attempts and their backoff, calls a
    /// GOAWAY left unprocessed and streams the server reset. Written as they happen.
    #[arg(help_heading = "Outputs", long, value_name = "FILE")]
    pub debug: Option<PathBuf>,

    /// What to call, and with what.
    #[command(flatten, next_help_heading = "What to call")]
    pub scenario: ScenarioArgs,

    /// A mix of methods: METHOD=WEIGHT, repeated (or comma-separated), e.g. --mix
    /// pkg.Shop.Browse=9 --mix pkg.Shop.Buy=1. Each call picks a method by weight; each
    /// method's payload is -d encoded as its own input (give per-method payloads in a
    /// --workload file). Unary methods only; figures per method and together.
    #[arg(help_heading = "What to send", long, value_name = "METHOD=WEIGHT", value_delimiter = ',', conflicts_with_all = ["call", "workload"])]
    pub mix: Vec<String>,

    /// A workload file (TOML): several calls with weights, and per call its data and
    /// metadata (templates allowed): [[calls]] call = "pkg.Svc.Method", weight = 3, data =
    /// {..}, metadata = {..}; optional seed = N.
    #[arg(
        help_heading = "What to send",
        long,
        value_name = "FILE",
        conflicts_with = "call"
    )]
    pub workload: Option<PathBuf>,

    /// A mix's seed: which method each call takes follows from it and the call's number, so
    /// an -n run with one seed makes the same calls of each method every time. Default: a
    /// random seed, reported in the results.
    #[arg(
        help_heading = "What to send",
        hide_short_help = true,
        long = "mix-seed",
        value_name = "N"
    )]
    pub mix_seed: Option<u64>,

    /// Request metadata as a JSON object of strings, e.g. '{"authorization":"Bearer x"}'.
    #[arg(
        help_heading = "What to send",
        short = 'm',
        long,
        value_name = "JSON",
        conflicts_with = "metadata_file"
    )]
    pub metadata: Option<String>,

    /// A file holding the request metadata as a JSON object of strings (ghz's -M).
    #[arg(
        help_heading = "What to send",
        hide_short_help = true,
        short = 'M',
        long = "metadata-file",
        value_name = "FILE"
    )]
    pub metadata_file: Option<PathBuf>,

    /// Metadata for the reflection requests only, as a JSON object of strings (ghz's
    /// --reflect-metadata), e.g. when reflection needs its own credentials.
    #[arg(
        help_heading = "What to send",
        hide_short_help = true,
        long,
        value_name = "JSON"
    )]
    pub reflect_metadata: Option<String>,

    /// Calls in flight at once (streams), spread evenly over the connections.
    #[arg(help_heading = "Load shape", short = 'c', long, default_value_t = 50, value_name = "N", value_parser = parse_streams, allow_hyphen_values = true)]
    pub concurrency: usize,

    /// HTTP/2 connections.
    #[arg(help_heading = "Target and connections", long, default_value_t = 1, value_name = "N", value_parser = parse_streams, allow_hyphen_values = true)]
    pub connections: usize,

    /// Total request rate (open loop, latency measured from each call's scheduled time);
    /// 0 means as fast as the streams go (closed loop).
    #[arg(help_heading = "Load shape", short = 'r', long, default_value_t = 0.0, value_name = "R", value_parser = parse_rps, allow_hyphen_values = true)]
    pub rps: f64,

    /// The rate's shape (ghz's --load-schedule): const (--rps, or a closed loop), step
    /// (--load-start, changed by --load-step every --load-step-duration) or line (the same,
    /// every second).
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_enum, default_value_t = ScheduleShape::Const, value_name = "SCHEDULE")]
    pub load_schedule: ScheduleShape,

    /// step/line: the first rate, req/s.
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_name = "R", value_parser = parse_positive_rate, allow_hyphen_values = true)]
    pub load_start: Option<f64>,

    /// step/line: the rate change per step, req/s (negative to step down).
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_name = "R", value_parser = parse_rate_change, allow_hyphen_values = true)]
    pub load_step: Option<f64>,

    /// step/line: the rate at which to stop changing and hold.
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_name = "R", value_parser = parse_positive_rate, allow_hyphen_values = true)]
    pub load_end: Option<f64>,

    /// step: how long each rate holds.
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub load_step_duration: Option<std::time::Duration>,

    /// step/line: how long to keep changing the rate, from the start; then it holds.
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub load_max_duration: Option<std::time::Duration>,

    /// Streaming calls: the pause between two messages sent (ghz's --stream-interval).
    #[arg(help_heading = "Streaming", long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub stream_interval: Option<std::time::Duration>,

    /// Streaming calls: stop sending after this long (ghz's --stream-call-duration). Server
    /// streams, as ghz: the client cancels each call after this long, and it counts as OK.
    #[arg(help_heading = "Streaming", hide_short_help = true, long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub stream_call_duration: Option<std::time::Duration>,

    /// Streaming calls: messages sent per call, cycling the data array (ghz's
    /// --stream-call-count); default: the array once. Server streams, as ghz: the client
    /// cancels the stream after N replies, and the call counts as OK.
    #[arg(help_heading = "Streaming", long, value_name = "N", value_parser = parse_at_least_one, allow_hyphen_values = true)]
    pub stream_call_count: Option<usize>,

    /// Bidi calls send and receive independently, as ghz's do: sends paced by
    /// --stream-interval, the half-close after the last, the call ending with the server's
    /// trailers. Default: strict ping-pong (each send waits for the previous reply).
    #[arg(help_heading = "Streaming", hide_short_help = true, long)]
    pub stream_independent: bool,

    /// Server and bidi streams: the reply field holding when the server produced each reply
    /// (a fixed64 or uint64 of nanoseconds since the Unix epoch), for each reply's latency.
    /// grpclab's servers fill `sent_unix_nanos` when the Feed request sets `"stamp": true`.
    #[arg(
        help_heading = "Streaming",
        hide_short_help = true,
        long,
        value_name = "FIELD"
    )]
    pub stream_stamp: Option<String>,

    /// ghz's --stream-dynamic-messages: in streaming calls, render the call template (-d with
    /// {{...}}) again for every message instead of once per call.
    #[arg(help_heading = "Streaming", hide_short_help = true, long)]
    pub stream_dynamic_messages: bool,

    /// No live view: on a terminal, the one-line progress bar instead.
    #[arg(
        help_heading = "Outputs",
        hide_short_help = true,
        long,
        conflicts_with = "tui"
    )]
    pub no_tui: bool,

    /// The live view even when stderr is not a terminal (to measure what it costs).
    #[arg(help_heading = "Outputs", hide_short_help = true, long, hide = true)]
    pub tui: bool,

    /// How many calls may be in flight as the run goes (ghz's --concurrency-schedule): const
    /// (-c), step (--concurrency-start, changed by --concurrency-step every
    /// --concurrency-step-duration) or line (the same, every second). -c is then ignored.
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_enum, default_value_t = ScheduleShape::Const, value_name = "SCHEDULE")]
    pub concurrency_schedule: ScheduleShape,

    /// step/line: the streams at the start.
    #[arg(help_heading = "Load shape", hide_short_help = true, long, default_value_t = 1, value_name = "N", value_parser = parse_streams_or_zero, allow_hyphen_values = true)]
    pub concurrency_start: usize,

    /// step/line: the change in streams per step (negative to step down).
    #[arg(help_heading = "Load shape", hide_short_help = true, 
        long,
        default_value_t = 1,
        value_name = "N",
        value_parser = parse_streams_change,
        allow_hyphen_values = true
    )]
    pub concurrency_step: i64,

    /// step/line: the streams at which to stop changing and hold.
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_name = "N", value_parser = parse_streams_or_zero, allow_hyphen_values = true)]
    pub concurrency_end: Option<usize>,

    /// step: how long each value holds.
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub concurrency_step_duration: Option<std::time::Duration>,

    /// step/line: how long to keep changing, from the start; then it holds.
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub concurrency_max_duration: Option<std::time::Duration>,

    /// How long to measure, e.g. 20s (warmup excluded). As in ghz, -n is then ignored; to stop
    /// an -n run early, use -x.
    #[arg(help_heading = "Load shape", short = 'z', long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Option<std::time::Duration>,

    /// How many calls to measure (default 200); ignored with -z, as in ghz.
    #[arg(help_heading = "Load shape", short = 'n', long, value_name = "N", value_parser = parse_calls, allow_hyphen_values = true)]
    pub total: Option<u64>,

    /// With -z: calls still in flight when the duration ends: wait (finish within the drain
    /// limit, the rest count as Canceled; grpclab's default), close (count them as Canceled
    /// at once; ghz's default) or ignore (leave them out).
    #[arg(help_heading = "Load shape", hide_short_help = true, long, value_enum, default_value_t = DurationStopArg::Wait, value_name = "HOW")]
    pub duration_stop: DurationStopArg,

    /// With -n: stop after this long even if the calls are not all done (ghz's -x).
    #[arg(help_heading = "Load shape", short = 'x', long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub max_duration: Option<std::time::Duration>,

    /// Per-call deadline, sent as grpc-timeout; 0 for none.
    #[arg(help_heading = "Load shape", short = 't', long, default_value = "20s", value_name = "DURATION", value_parser = parse_duration_or_zero, allow_hyphen_values = true)]
    pub timeout: std::time::Duration,

    /// How long opening a connection may take before the run reports the server unreachable
    /// (ghz's --connect-timeout).
    #[arg(help_heading = "Target and connections", hide_short_help = true, long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub connect_timeout: std::time::Duration,

    /// ghz's --keepalive: PING a connection with calls in flight once the server has sent
    /// nothing for this long, and drop it (calls Unavailable, then reconnect) when nothing
    /// arrives within as long again. 0s (the default): no PINGs.
    #[arg(help_heading = "Target and connections", hide_short_help = true, long, default_value = "0s", value_name = "DURATION", value_parser = parse_duration_or_zero, allow_hyphen_values = true)]
    pub keepalive: std::time::Duration,

    /// The `:authority` pseudo-header to send (default: HOST:PORT as given), as ghz's
    /// --authority.
    #[arg(
        help_heading = "Target and connections",
        hide_short_help = true,
        long,
        value_name = "AUTHORITY"
    )]
    pub authority: Option<String>,

    /// The largest reply message accepted, e.g. 4MiB or 42 MB (ghz's); a larger one fails its
    /// call with RESOURCE_EXHAUSTED. Default: no limit.
    #[arg(help_heading = "What to send", hide_short_help = true, long, value_name = "SIZE", value_parser = parse_byte_size, allow_hyphen_values = true)]
    pub max_recv_message_size: Option<usize>,

    /// The largest request message allowed (ghz's): a larger payload is refused before the
    /// run, since every call would fail.
    #[arg(help_heading = "What to send", hide_short_help = true, long, value_name = "SIZE", value_parser = parse_byte_size, allow_hyphen_values = true)]
    pub max_send_message_size: Option<usize>,

    /// Compress requests with gzip (`grpc-encoding: gzip`) and accept gzip replies, as ghz's
    /// -e.
    #[arg(
        help_heading = "What to send",
        hide_short_help = true,
        short = 'e',
        long
    )]
    pub enable_compression: bool,

    /// Plaintext HTTP/2 (h2c), no TLS. Without it, as in ghz, grpclab speaks TLS and verifies
    /// the server against the system's roots (or --cacert).
    #[arg(help_heading = "TLS", long, conflicts_with_all = ["cacert", "cert", "key", "cname", "skip_tls"])]
    pub insecure: bool,

    /// TLS: trust this CA (PEM) instead of the system's roots.
    #[arg(help_heading = "TLS", long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// TLS: our client certificate (PEM), for servers that require one (mutual TLS).
    #[arg(help_heading = "TLS", long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,

    /// TLS: the private key (PEM) of --cert.
    #[arg(help_heading = "TLS", long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,

    /// TLS: the server name to send (SNI) and to verify in its certificate, instead of the
    /// target's host.
    #[arg(
        help_heading = "TLS",
        hide_short_help = true,
        long,
        value_name = "NAME"
    )]
    pub cname: Option<String>,

    /// TLS without verifying the server's certificate (any server is trusted: for tests only).
    #[arg(help_heading = "TLS", long = "skipTLS", alias = "skip-tls")]
    pub skip_tls: bool,

    /// Output format.
    #[arg(help_heading = "Outputs", short = 'O', long, value_enum, default_value_t = OutputFormat::Summary)]
    pub format: OutputFormat,

    /// Write the output to this file instead of standard output.
    #[arg(help_heading = "Outputs", short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// List calls one by one in the output (ghz's `details`; -O csv's rows): `--details` keeps
    /// the first 1,000,000 that end (ghz's own cap), `--details=N` the first N. Off by
    /// default, so memory stays bounded whatever the run's length; -O csv turns it on.
    #[arg(help_heading = "Outputs", 
        long,
        value_name = "N",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "1000000",
        value_parser = parse_details
    )]
    pub details: Option<usize>,

    /// Leave the first N calls to end out of the results (ghz's --skipFirst); they still count
    /// against -n. grpclab's --warmup skips by time instead.
    #[arg(help_heading = "Load shape", hide_short_help = true, 
        long = "skipFirst",
        alias = "skip-first",
        default_value_t = 0,
        value_name = "N",
        value_parser = parse_calls_or_zero,
        allow_hyphen_values = true
    )]
    pub skip_first: u64,

    /// Count failed calls in fastest, slowest, the percentiles and the histogram too (ghz's
    /// --count-errors); by default they describe successful calls only.
    #[arg(help_heading = "Outputs", hide_short_help = true, long)]
    pub count_errors: bool,

    /// A name for the run, reported as ghz's `name`.
    #[arg(help_heading = "Outputs", long, value_name = "NAME")]
    pub name: Option<String>,

    /// Tags for the run as a JSON object of strings, reported as ghz's `tags`.
    #[arg(help_heading = "Outputs", long, value_name = "JSON")]
    pub tags: Option<String>,

    /// Send calls for this long before measuring; they are not counted.
    #[arg(help_heading = "Load shape", long, default_value = "0s", value_name = "DURATION", value_parser = parse_duration_or_zero, allow_hyphen_values = true)]
    pub warmup: std::time::Duration,

    /// Client threads (each owns its connections). Default: the CPUs this process may use.
    #[arg(help_heading = "Target and connections", long, value_name = "N", value_parser = parse_at_least_one, allow_hyphen_values = true)]
    pub cpus: Option<usize>,

    /// Run generator I (from 0) of N sharing one run, e.g. 2/4: -c, --connections and -n
    /// are the whole run's and split so the parts add up; an --rps schedule (ramps too) is
    /// the whole run's and this generator sends every N-th call of it. Merge the N results
    /// with `grpclab merge`. Without the flag: GRPCLAB_SHARD, else JOB_COMPLETION_INDEX (a
    /// Kubernetes Indexed Job's) of GRPCLAB_SHARDS.
    #[arg(help_heading = "Distribution (several generators)", hide_short_help = true, long, value_name = "I/N", env = "GRPCLAB_SHARD", value_parser = parse_shard)]
    pub shard: Option<grpclab_load::Shard>,

    /// Start at this wall-clock time, RFC 3339 (2026-12-02T10:00:00Z) or Unix seconds, so
    /// generators on several machines share one clock: the warmup, then the window, start
    /// there, and the per-second series lines up by wall-clock second.
    #[arg(help_heading = "Distribution (several generators)", hide_short_help = true, long, value_name = "TIME", env = "GRPCLAB_START_AT", value_parser = parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,

    /// With --start-at: how late a generator may still start (its missed calls count late);
    /// later, it refuses with exit code 4 and sends nothing.
    #[arg(help_heading = "Distribution (several generators)", hide_short_help = true, long, default_value = "500ms", value_name = "DURATION", value_parser = parse_duration_or_zero, allow_hyphen_values = true)]
    pub start_tolerance: std::time::Duration,

    /// Decode every reply with the schema; a reply that does not decode, or has fields the
    /// schema does not define, counts as an error.
    #[arg(help_heading = "What to send", long)]
    pub validate: bool,

    /// A pass/fail condition on the run, repeatable (k6's thresholds): 'p99<=10ms',
    /// 'avg<2ms', 'errors<=0.1%', 'errors==0', 'rps>=5000'. Each verdict is in the output; a
    /// failed one makes the exit code 3 (results written all the same).
    #[arg(help_heading = "Outputs", long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,

    /// ghz's --async (send on schedule whatever is in flight): what grpclab's --rps always
    /// does, so accepted with --rps; without it, refused with what to give instead.
    #[arg(help_heading = "Load shape", hide_short_help = true, long = "async")]
    pub ghz_async: bool,

    /// ghz flags grpclab does not take, each refused by name with what to do instead
    /// (docs/ghz-flags.md), rather than with clap's tip to put them after `--`.
    #[command(flatten)]
    pub unsupported: UnsupportedGhzFlags,

    /// The HTTP/2 implementation: lab (grpclab's own engine, the fast path) or h2 (the h2
    /// crate, the reference).
    #[arg(help_heading = "Target and connections", long, value_enum, default_value_t = TransportArg::Engine, value_name = "TRANSPORT")]
    pub transport: TransportArg,

    /// The wire protocol of each call: grpc, grpc-web (binary), grpc-web-text (base64) or
    /// connect (Connect, binary codec). gRPC-Web and Connect go over HTTP/2 on the h2
    /// crate's transport (--transport h2): unary calls and server streams (Connect: client
    /// and bidi streams too).
    #[arg(help_heading = "Target and connections", long, value_enum, default_value_t = ProtocolArg::Grpc, value_name = "PROTOCOL")]
    pub protocol: ProtocolArg,

    /// How messages go on the wire: proto (binary) or json (protobuf's JSON mapping:
    /// application/grpc+json, grpc-web+json, Connect's application/json). JSON on the h2
    /// crate's transport, for the scenario's or --proto's method (no workload, no payload
    /// template), unary or server-streaming: its requests are encoded once before the run.
    #[arg(help_heading = "Target and connections", long, value_enum, default_value_t = WireCodecArg::Proto, value_name = "CODEC")]
    pub codec: WireCodecArg,

    /// gRPC-Web or Connect over HTTP/1.1, as browsers send them: keep-alive connections with
    /// one request in flight each (--connections is the pool; -c streams take turns on it,
    /// their waits in their latency). Over TLS it offers HTTP/1.1 alone (ALPN http/1.1).
    /// TCP targets, no workload.
    #[arg(help_heading = "Target and connections", long)]
    pub http1: bool,

    /// Connect unary calls as HTTP GET, the message in the URL's query (Connect's form for
    /// methods without side effects, which caches and CDNs can serve): with --protocol
    /// connect and a unary method. The server must allow GET for it (connect-go: methods
    /// marked idempotency_level = NO_SIDE_EFFECTS; others answer 405).
    #[arg(help_heading = "Target and connections", long = "connect-get")]
    pub connect_get: bool,
    /// How connections are spread over the target's addresses (ghz's flag, gRPC's
    /// policies): pick_first (every connection to the first address that accepts one) or
    /// round_robin (connection i to address i mod n). A target may name several: HOST:PORT
    /// and dns:///HOST:PORT (every address of the name), ipv4:A:PORT,B:PORT,
    /// ipv6:[A]:PORT,[B]:PORT.
    #[arg(help_heading = "Target and connections", hide_short_help = true, long = "lb-strategy", value_enum, default_value_t = LbStrategy::PickFirst, value_name = "STRATEGY")]
    pub lb_strategy: LbStrategy,

    /// Run across an emulated network instead of loopback. SPEC: delay=20ms,jitter=2ms,
    /// loss=0.1%,rate=1gbit,mtu=1500 (netem's terms, each applying to each direction: a
    /// round trip meets the delay twice), or lo. grpclab makes a network namespace for the
    /// server and one for the client (addresses 198.18.0.1 and .2), joins them by a link it
    /// emulates itself, starts the --serve server in the server's, runs the load from the
    /// client's, and removes both afterwards (a killed run's are removed by the next).
    /// Needs root. Leave HOST:PORT out.
    #[arg(help_heading = "Target and connections", long, value_name = "SPEC", value_parser = parse_network, requires = "serve")]
    pub network: Option<grpclab_net::NetworkSpec>,

    /// With --network: the built-in server started inside the server's namespace.
    #[arg(
        help_heading = "Target and connections",
        long,
        value_enum,
        value_name = "IMPL",
        requires = "network"
    )]
    pub serve: Option<super::serve::ImplementationArg>,

    /// Where the run is stored.
    #[command(flatten, next_help_heading = "Outputs")]
    pub history: HistoryFlagArgs,

    /// Live metrics.
    #[command(flatten, next_help_heading = "Outputs")]
    pub metrics: MetricsArgs,
}

/// ghz's flags that grpclab refuses, each by name (see [`UnsupportedGhzFlags::refusal`]).
#[derive(Debug, Clone, Args, Default)]
pub struct UnsupportedGhzFlags {
    #[arg(long, hide = true)]
    disable_template_functions: bool,
    #[arg(long, hide = true)]
    disable_template_data: bool,
}

impl UnsupportedGhzFlags {
    /// The line refusing the first unsupported flag given, saying what to do instead.
    pub fn refusal(&self) -> Option<String> {
        if self.disable_template_functions || self.disable_template_data {
            let flag = if self.disable_template_functions {
                "--disable-template-functions"
            } else {
                "--disable-template-data"
            };
            return Some(format!(
                "{flag} is a ghz flag grpclab does not take: grpclab renders a call template only when -d/-D holds '{{{{', and a payload without one costs nothing extra; remove the flag"
            ));
        }
        None
    }
}

/// `grpclab encode [--scenario NAME | --proto FILE ...] -o FILE`
#[derive(Debug, Args)]
pub struct EncodeArgs {
    /// What to encode.
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The file to write the framed request to (gRPC's 5-byte prefix included).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,

    /// With a payload array, which request to write (counting from 0).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub index: usize,
}

/// The examples at the end of `grpclab load --help`.
const LOAD_EXAMPLES: &str = "Examples:
  # A built-in server, then ghz's first example against it
  grpclab serve --impl lab --port 50051 &
  grpclab load --insecure --scenario complex_proto -n 2000 127.0.0.1:50051
  # Your own server: its .proto, a method, a payload
  grpclab load --insecure --proto greeter.proto \\
      --call helloworld.Greeter.SayHello -d '{\"name\":\"Joe\"}' HOST:PORT
  # An open loop: 20,000 calls a second, 30 s after a 5 s warmup, JSON
  grpclab load --insecure --scenario complex_proto --rps 20000 \\
      -z 30s --warmup 5s -O json -o run.json 127.0.0.1:50051
  # A CI gate: exit 3 when a threshold fails (docs/ci.md)
  grpclab load --insecure --scenario complex_proto -z 20s \\
      --threshold 'p99<=10ms' --threshold 'errors<=0.1%' 127.0.0.1:50051
  # A client stream: 10 messages per call, one every 10 ms
  grpclab load --insecure --scenario client_stream_1kB \\
      --stream-call-count 10 --stream-interval 10ms 127.0.0.1:50051";
