//! The command line: clap definitions only. Turning these into typed, validated settings
//! happens in each command's module, so that every error can name its flag.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

use super::values::{
    parse_at_least_one, parse_byte_size, parse_calls, parse_calls_or_zero, parse_details,
    parse_duration, parse_duration_or_zero, parse_positive_rate, parse_precision,
    parse_rate_change, parse_rps, parse_shard, parse_start_at, parse_streams, parse_streams_change,
    parse_streams_or_zero,
};

/// grpclab: a gRPC performance lab — load generator, built-in servers and benchmark harness.
#[derive(Debug, Parser)]
#[command(
    name = "grpclab",
    version,
    about,
    propagate_version = true,
    disable_version_flag = true,
    max_term_width = 80
)]
pub struct Cli {
    /// Print the version (-v as in ghz, or -V).
    #[arg(short = 'v', short_alias = 'V', long, action = clap::ArgAction::Version, global = true)]
    pub version: Option<bool>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark gRPC servers the way grpc_bench does, and print its table (the main job).
    Bench(BenchArgs),
    /// A/B/n: run implementations (or settings) interleaved and say whether each differs from A.
    Compare(CompareArgs),
    /// The highest request rate a server takes while an SLO holds ('p99<=10ms'): an
    /// open-loop search over rates, every probe reported.
    Capacity(Box<CapacityArgs>),
    /// Drive gRPC calls (unary or streaming) at a server and measure them (ghz's flags where
    /// they overlap).
    Load(Box<LoadArgs>),
    /// Run one of the built-in gRPC servers.
    Serve(ServeArgs),
    /// Every run remembered: list them (the default), show one as `report` does, draw the
    /// trends, or import results measured before.
    History(HistoryArgs),
    /// Render saved results (a bench results folder, or a `load -O json` file) as a
    /// self-contained HTML page with charts, or as Markdown; runs nothing.
    Report(ReportArgs),
    /// Add the results of several generators that shared one run (`load --shard I/N -O
    /// json`) into one result, exactly: histograms added, counts summed, seconds aligned.
    Merge(MergeArgs),
    /// Print a built-in server's counters (allocations, bytes, calls) as JSON.
    Stats(StatsArgs),
    /// Write a scenario's request as a framed gRPC message, for other clients (e.g. h2load -d).
    Encode(EncodeArgs),
    /// Print a shell's completion script, e.g. `grpclab completions bash >
    /// ~/.local/share/bash-completion/completions/grpclab`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff), e.g. `grpclab man > ~/.local/share/man/man1/grpclab.1`.
    Man,
}

/// `grpclab completions SHELL`
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

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

/// `grpclab serve --impl` values: the built-in servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImplementationArg {
    /// tonic on a multi-thread runtime.
    TonicMt,
    /// tonic on a current-thread runtime.
    TonicSt,
    /// grpclab's own server.
    Lab,
}

/// `grpclab serve --codec` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CodecArg {
    /// lab's zero-allocation codec.
    View,
    /// prost's generated structs.
    Prost,
}

/// `grpclab serve --decode` values: where a call's decode, handling and encode run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlacementArg {
    /// On the I/O thread.
    Inline,
    /// A task per call.
    Task,
    /// A bounded thread pool.
    Pool,
    /// Large requests to an idle pool worker when a core is spare; else inline.
    Adaptive,
}

/// Output formats of `grpclab load`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// ghz's text summary, then grpclab's extras.
    Summary,
    /// ghz's JSON report on one line, with grpclab's extras beside it.
    Json,
    /// The same JSON, indented (ghz's pretty).
    Pretty,
    /// One row per call, as ghz writes it (turns on --details).
    Csv,
    /// One row per second of the measured window.
    CsvSeconds,
    /// ghz's InfluxDB line: one `ghz_run` line for the run.
    InfluxSummary,
    /// ghz's InfluxDB lines: one `ghz_detail` line per call (turns on --details).
    InfluxDetails,
    /// ghz's Prometheus text exposition: gauges, histogram, summary.
    Prometheus,
    /// One self-contained HTML page with charts (as ghz's html; `grpclab report` renders the
    /// same page from a saved `-O json`).
    Html,
}

/// `grpclab merge SHARD.json... [-O FORMAT] [-o FILE]`
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The generators' results (`load -O json --shard I/N`), one per shard, in any order;
    /// a pod's log with the JSON as its last line will do.
    #[arg(value_name = "RESULT", required = true)]
    pub results: Vec<PathBuf>,

    /// Output format, as `load -O`.
    #[arg(short = 'O', long = "format", value_enum, default_value = "summary")]
    pub format: OutputFormat,

    /// Write the output here instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Merge fewer than all the shards: the result says which it holds and merges again
    /// with the rest (a merge tree for many generators).
    #[arg(long)]
    pub partial: bool,

    /// A pass/fail condition on the merged run, repeatable, as `load --threshold`; a failed
    /// one makes the exit code 3.
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
    /// Where the merged run is stored (not with --partial: a part is not the run).
    #[command(flatten)]
    pub history: HistoryFlagArgs,
}

/// Where a run is stored (`load`, `bench`, `compare`): on by default.
#[derive(Debug, Clone, Default, Args)]
pub struct StoreArgs {
    /// Store runs here: a SQLite file, or a PostgreSQL database as
    /// postgres://USER@HOST:PORT/DATABASE (password from the URL, --history-password-file or
    /// $GRPCLAB_HISTORY_PASSWORD; never printed). Default: $GRPCLAB_HISTORY, else
    /// $XDG_DATA_HOME/grpclab/history.sqlite (~/.local/share/grpclab/history.sqlite).
    #[arg(long = "history", value_name = "PATH|URL")]
    pub history: Option<String>,

    /// A file holding the PostgreSQL password (its first line).
    #[arg(long = "history-password-file", value_name = "FILE")]
    pub password_file: Option<PathBuf>,
}

/// `--history`, `--no-history` on the commands that store their runs.
#[derive(Debug, Clone, Default, Args)]
pub struct HistoryFlagArgs {
    /// Where runs are stored.
    #[command(flatten)]
    pub store: StoreArgs,

    /// Do not store this run (the results folder or file is written as always).
    #[arg(long = "no-history", conflicts_with = "history")]
    pub no_history: bool,
}

/// `--metrics-addr` on `load` and `bench`.
#[derive(Debug, Clone, Default, Args)]
pub struct MetricsArgs {
    /// Serve live Prometheus metrics at http://HOST:PORT/metrics while the run goes (calls by
    /// status, a latency histogram, in-flight calls, offered and achieved rate; in bench one
    /// label per row). Port 0 picks a free one, printed at the start.
    #[arg(long = "metrics-addr", value_name = "HOST:PORT")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// With --metrics-addr: after the run, keep serving until one scrape has read the final
    /// figures, at most this long (set it to the scrape interval so the end is never missed).
    #[arg(long = "metrics-linger", value_name = "DURATION", default_value = "0s", value_parser = parse_duration_or_zero, requires = "metrics_addr")]
    pub metrics_linger: std::time::Duration,
}

/// `grpclab history [list|show|trend|import]`
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct HistoryArgs {
    /// What to do; without one, list.
    #[command(subcommand)]
    pub action: Option<HistoryAction>,

    /// Which runs to list.
    #[command(flatten)]
    pub filter: HistoryFilterArgs,

    /// List format.
    #[arg(short = 'O', long = "format", value_enum, default_value_t = HistoryFormat::Table)]
    pub format: HistoryFormat,

    /// The store to read.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `grpclab history`'s actions.
#[derive(Debug, Subcommand)]
pub enum HistoryAction {
    /// List runs, oldest first (the newest --limit).
    List {
        /// Which runs.
        #[command(flatten)]
        filter: HistoryFilterArgs,
        /// Format.
        #[arg(short = 'O', long = "format", value_enum, default_value_t = HistoryFormat::Table)]
        format: HistoryFormat,
        /// The store to read.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Render one stored run as `grpclab report` does (HTML with charts, or Markdown).
    Show {
        /// The run's id (the first column of `grpclab history`).
        #[arg(value_name = "ID")]
        id: i64,
        /// Where to write the page; `-` (the default for md) for standard output. Default
        /// for html: run-ID.html in the current folder.
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// html or md.
        #[arg(long, value_enum, default_value_t = ReportFormat::Html)]
        format: ReportFormat,
        /// The store to read.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// An HTML page of trends: req/s, p99 and CPU per call over time, one line per
    /// implementation and scenario (and machine), the numbers beside each chart.
    Trend {
        /// Which runs.
        #[command(flatten)]
        filter: HistoryFilterArgs,
        /// Where to write the page.
        #[arg(short = 'o', long, value_name = "FILE", default_value = "trend.html")]
        output: PathBuf,
        /// The store to read.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Store results measured before: bench or compare results folders, `load -O json`
    /// files, ghz's JSON reports (`ghz -O json`). A run already stored is not stored again.
    Import {
        /// The folders and files.
        #[arg(value_name = "PATH", required = true)]
        paths: Vec<PathBuf>,
        /// The store to write.
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Which stored runs (every filter given must match).
#[derive(Debug, Clone, Default, Args)]
pub struct HistoryFilterArgs {
    /// The implementation (a bench row's name, a compare side, a load's --name).
    #[arg(long = "impl", value_name = "NAME")]
    pub implementation: Option<String>,
    /// The scenario (or a load's call).
    #[arg(long, value_name = "NAME")]
    pub scenario: Option<String>,
    /// The target a load addressed (HOST:PORT).
    #[arg(long, value_name = "HOST:PORT")]
    pub target: Option<String>,
    /// load, bench, compare or ghz (imported).
    #[arg(long, value_name = "COMMAND")]
    pub command: Option<String>,
    /// Runs since: a date (2026-11-30, RFC 3339) or a time ago (7d, 12h).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// A tag a run was given (load --tags), KEY=VALUE.
    #[arg(long, value_name = "KEY=VALUE")]
    pub tag: Option<String>,
    /// At most this many, the newest.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub limit: usize,
}

/// `grpclab history`'s list formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HistoryFormat {
    /// A table.
    Table,
    /// JSON, every field.
    Json,
    /// CSV, the headline figures.
    Csv,
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

/// `grpclab report RESULTS [-o FILE] [--format html|md]`
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A results folder written by `grpclab bench`, or a file written by `grpclab load -O json`.
    #[arg(value_name = "RESULTS")]
    pub results: PathBuf,

    /// Where to write the page; `-` for standard output. Default: `report.html` (or `.md`)
    /// inside a results folder, or the JSON file's name with the new extension (`NAME-1.html`
    /// and so on when that file exists: a page `load -O html` wrote is never overwritten).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// html (charts, self-contained) or md (the tables).
    #[arg(long, value_enum, default_value_t = ReportFormat::Html)]
    pub format: ReportFormat,
}

/// `grpclab report`'s formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// One self-contained HTML page.
    Html,
    /// Markdown tables.
    Md,
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

/// `grpclab load [OPTIONS] HOST:PORT`
#[derive(Debug, Args)]
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
    /// How connections are spread over the target's addresses (ghz's flag, gRPC's
    /// policies): pick_first (every connection to the first address that accepts one) or
    /// round_robin (connection i to address i mod n). A target may name several: HOST:PORT
    /// and dns:///HOST:PORT (every address of the name), ipv4:A:PORT,B:PORT,
    /// ipv6:[A]:PORT,[B]:PORT.
    #[arg(help_heading = "Target and connections", hide_short_help = true, long = "lb-strategy", value_enum, default_value_t = LbStrategy::PickFirst, value_name = "STRATEGY")]
    pub lb_strategy: LbStrategy,

    /// Where the run is stored.
    #[command(flatten, next_help_heading = "Outputs")]
    pub history: HistoryFlagArgs,

    /// Live metrics.
    #[command(flatten, next_help_heading = "Outputs")]
    pub metrics: MetricsArgs,
}

/// Where the call and its requests come from: a scenario, or a .proto with a payload.
#[derive(Debug, Clone, Args)]
pub struct ScenarioArgs {
    /// A built-in scenario (complex_proto, string_10B, string_100B, string_1kB, string_10kB,
    /// large_complex; streaming: streaming_ping_pong, server_stream_1kB, client_stream_1kB)
    /// or a scenario folder (*.proto + payload). `grpclab load` with neither this,
    /// --proto nor --protoset asks the server by reflection (as ghz does); `grpclab encode`
    /// then uses complex_proto.
    #[arg(long, value_name = "NAME|DIR", conflicts_with_all = ["proto", "protoset"])]
    pub scenario: Option<String>,

    /// The .proto file that defines the call (compiled at run time; no protoc needed).
    #[arg(long, value_name = "FILE", conflicts_with = "protoset")]
    pub proto: Option<PathBuf>,

    /// A compiled FileDescriptorSet that defines the call (`protoc --descriptor_set_out=FILE
    /// --include_imports`), as ghz's --protoset.
    #[arg(long, value_name = "FILE")]
    pub protoset: Option<PathBuf>,

    /// Folders to resolve the .proto's imports in (default: the .proto's own folder).
    #[arg(
        short = 'i',
        long = "import-paths",
        value_name = "DIR",
        value_delimiter = ','
    )]
    pub import_paths: Vec<PathBuf>,

    /// The method to call: package.Service.Method (or package.Service/Method).
    #[arg(long, value_name = "CALL")]
    pub call: Option<String>,

    /// The request as JSON: an object, or an array of objects sent round-robin; `@` reads it
    /// from standard input (as ghz).
    #[arg(short = 'd', long, value_name = "JSON", conflicts_with = "data_file")]
    pub data: Option<String>,

    /// A file holding the request as JSON (an object, or an array sent round-robin).
    #[arg(short = 'D', long = "data-file", value_name = "FILE", conflicts_with_all = ["binary", "binary_file"])]
    pub data_file: Option<PathBuf>,

    /// The request comes on standard input as a serialized protobuf message, or as several
    /// count-prefixed (varint length) messages sent round-robin (ghz's -b).
    #[arg(short = 'b', long, conflicts_with_all = ["data", "binary_file"])]
    pub binary: bool,

    /// A file holding the request as a serialized protobuf message, or several count-prefixed
    /// messages sent round-robin (ghz's -B).
    #[arg(
        short = 'B',
        long = "binary-file",
        value_name = "FILE",
        conflicts_with = "data"
    )]
    pub binary_file: Option<PathBuf>,
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

/// `grpclab bench [IMPL ...]`: settings come from grpc_bench's environment variables; each
/// flag below overrides its variable.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Implementations to run, by name (default: every one in the suite).
    #[arg(value_name = "IMPL")]
    pub implementations: Vec<String>,

    /// Sweep a setting: run every implementation at each value (repeatable; every combination
    /// runs). Keys: scenario, concurrency, connections, qps, server_cpus, client_cpus, or any
    /// server flag (e.g. decode=inline,pool passes --decode to the server).
    #[arg(long, value_name = "KEY=V1,V2")]
    pub sweep: Vec<String>,

    /// Profile each server during its measured window (repeatable): cpu = perf samples rendered
    /// as a flamegraph (`<name>.flamegraph.svg`) and top functions (`<name>.top.txt`); alloc =
    /// the built-in servers' top allocation sites by count and bytes (`<name>.alloc-sites.txt`,
    /// dhat's `<name>.dhat.json`). A profiled window runs slower than an unprofiled one.
    /// Allocations per request are always in the table for servers with grpclab's admin RPC.
    #[arg(long, value_enum, value_name = "KIND")]
    pub profile: Vec<ProfileKind>,

    /// No live view: on a terminal, the progress lines as they come instead.
    #[arg(long)]
    pub no_tui: bool,

    /// A pass/fail condition judged on every row, repeatable, as load's: 'p99<=10ms',
    /// 'errors<=0.1%', 'rps>=5000'. Verdicts under the table and in each row's JSON; a failed
    /// one makes the exit code 3 (everything written all the same).
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,

    /// After each row's window, search its capacity at this SLO (repeatable, as capacity's
    /// --slo: 'p99<=10ms', 'errors<=0.1%'): a "capacity" column, every probe in the row's JSON,
    /// a chart in the report.
    #[arg(long = "capacity", value_name = "SLO")]
    pub capacity: Vec<String>,

    /// A workload file (TOML, as load's --workload): every row sends this mix of calls of
    /// the scenario's method(s), each entry with its data and metadata (e.g. the same method
    /// with small and large payloads, each under its own name), instead of the scenario's
    /// payload. Constant payloads only (no templates). Each row's JSON has every entry's figures.
    #[arg(long, value_name = "FILE")]
    pub workload: Option<PathBuf>,

    /// The load generator of each window: grpclab (default), or ghz as grpc_bench runs it (a
    /// warm-up run, then the window; `--cpus` = GRPC_CLIENT_CPUS), to see the table grpc_bench
    /// would have printed and where ghz, not the server, set a figure. ghz must be on the PATH
    /// or in $(go env GOPATH)/bin (`bash peers/install.sh clients`); unary scenarios only.
    #[arg(long, value_enum, default_value = "grpclab", value_name = "CLIENT")]
    pub client: ClientArg,

    /// With --capacity: the longest probe window (probes run at least 2 s).
    #[arg(long = "capacity-probe-max", default_value = "10s", value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub capacity_probe_max: std::time::Duration,

    /// Settings shared with `grpclab compare`.
    #[command(flatten)]
    pub settings: BenchSettings,
    /// Where the rows are stored.
    #[command(flatten)]
    pub history: HistoryFlagArgs,

    /// Live metrics.
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

/// The harness's settings: grpc_bench's environment variables, each also a flag.
#[derive(Debug, Args)]
pub struct BenchSettings {
    /// A suite file (TOML) listing implementations; default: the built-in servers
    /// (tonic-mt, tonic-st, lab).
    #[arg(long, value_name = "FILE")]
    pub suite: Option<PathBuf>,

    /// Measured window [GRPC_BENCHMARK_DURATION, default 20s].
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// Warmup before the window [GRPC_BENCHMARK_WARMUP, default 5s].
    #[arg(long, value_name = "DURATION")]
    pub warmup: Option<String>,

    /// Server CPU quota in cores [GRPC_SERVER_CPUS, default 1].
    #[arg(long, value_name = "CPUS")]
    pub server_cpus: Option<String>,

    /// Server memory limit, e.g. 512m [GRPC_SERVER_RAM, default 512m].
    #[arg(long, value_name = "SIZE")]
    pub server_ram: Option<String>,

    /// HTTP/2 connections [GRPC_CLIENT_CONNECTIONS, default 50].
    #[arg(long, value_name = "N")]
    pub connections: Option<String>,

    /// Streams in flight [GRPC_CLIENT_CONCURRENCY, default 1000].
    #[arg(long, value_name = "N")]
    pub concurrency: Option<String>,

    /// Total request rate, 0 = unlimited [GRPC_CLIENT_QPS, default 0].
    #[arg(long, value_name = "RATE")]
    pub qps: Option<String>,

    /// Client threads and cores [GRPC_CLIENT_CPUS, default 1].
    #[arg(long, value_name = "N")]
    pub client_cpus: Option<String>,

    /// Scenario name or folder [GRPC_REQUEST_SCENARIO, default complex_proto].
    #[arg(long, value_name = "NAME|DIR")]
    pub scenario: Option<String>,

    /// How long a server has to become ready.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_duration)]
    pub ready_timeout: std::time::Duration,

    /// How long a server has to exit after SIGTERM before SIGKILL.
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = parse_duration)]
    pub stop_grace: std::time::Duration,

    /// Where result folders are created.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results_dir: PathBuf,

    /// Run everything over TLS: servers start with a certificate (their suite entry's `tls`
    /// arguments; entries without them are SKIPPED), the load verifies it as `localhost`. A
    /// self-signed pair is made in the results folder unless --tls-cert/--tls-key give one.
    #[arg(long)]
    pub tls: bool,

    /// With --tls: the servers' certificate (PEM, valid for `localhost`; the load trusts it
    /// as its root).
    #[arg(long = "tls-cert", value_name = "FILE", requires_all = ["tls", "bench_tls_key"], id = "bench_tls_cert")]
    pub tls_cert: Option<PathBuf>,

    /// With --tls: the key (PEM) of --tls-cert.
    #[arg(long = "tls-key", value_name = "FILE", requires_all = ["tls", "bench_tls_cert"], id = "bench_tls_key")]
    pub tls_key: Option<PathBuf>,
}

/// `grpclab capacity [OPTIONS] HOST:PORT --slo EXPR [--slo EXPR ...]`
#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// The service level, repeatable, as load's --threshold: 'p99<=10ms', 'avg<2ms',
    /// 'errors<=0.1%'. A rate meets the SLO when every one holds.
    #[arg(long = "slo", value_name = "EXPR", required = true)]
    pub slo: Vec<String>,

    /// The first rate probed, req/s. Default: half the throughput of a 2 s closed loop.
    #[arg(long = "start-rps", value_name = "R", value_parser = parse_positive_rate, allow_hyphen_values = true)]
    pub start_rps: Option<f64>,

    /// The highest rate probed, req/s: an SLO still met there ends the search.
    #[arg(long = "max-rps", default_value_t = 1_000_000.0, value_name = "R", value_parser = parse_positive_rate, allow_hyphen_values = true)]
    pub max_rps: f64,

    /// How close the answer must be: the search ends when the lowest failing rate is within
    /// this share above the highest passing one (0.01 to 0.5).
    #[arg(long, default_value_t = 0.05, value_name = "FRACTION", value_parser = parse_precision, allow_hyphen_values = true)]
    pub precision: f64,

    /// Shortest probe window.
    #[arg(long = "probe-min", default_value = "2s", value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub probe_min: std::time::Duration,

    /// Longest probe window (a probe that needs more calls than this allows says so).
    #[arg(long = "probe-max", default_value = "20s", value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub probe_max: std::time::Duration,

    /// Most probes (repeats not counted).
    #[arg(long = "max-probes", default_value_t = 30, value_name = "N", value_parser = parse_at_least_one, allow_hyphen_values = true)]
    pub max_probes: usize,

    /// The server's process id: its CPU and memory are recorded for every probe.
    #[arg(long = "server-pid", value_name = "PID")]
    pub server_pid: Option<u32>,

    /// The load's settings, as `grpclab load` takes them (the rate, -z, -n and the schedules
    /// are the search's to choose; --warmup, default 1 s here, precedes every probe).
    #[command(flatten)]
    pub load: LoadArgs,
}

/// `grpclab compare A B [C ...]`
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The sides, A first (the baseline), then B, C, ... (2 to 8): each an implementation and
    /// extra start arguments, e.g. "lab --decode inline" "lab --decode pool". With --baseline
    /// the saved rounds are A and the sides given are B, C, ...
    #[arg(value_name = "SIDE", num_args = 1..=grpclab_harness::compare::MAX_SIDES, required = true)]
    pub sides: Vec<String>,

    /// Rounds per side, interleaved A B A B ... (at least 3: fewer make any interval
    /// useless; at 99.9 % 5 give ±8.6 standard errors, 10 ±4.8).
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub rounds: usize,

    /// Confidence level of every interval: 0.95, 0.99 or 0.999. Higher calls fewer
    /// differences (and fails --fail-if less often on noise).
    #[arg(long, value_name = "LEVEL", default_value = "0.999", value_parser = grpclab_harness::compare::stats::Confidence::parse)]
    pub confidence: grpclab_harness::compare::stats::Confidence,

    /// A saved baseline as side A, instead of running it: a file --save-baseline wrote, a
    /// compare results folder (or its compare.json), whose first side is used; `last`, the
    /// newest stored compare run with these settings (its first side); or a stored run's id
    /// (`grpclab history --command compare`), that side. Its settings must match this run's.
    #[arg(long, value_name = "FILE|DIR|last|ID")]
    pub baseline: Option<String>,

    /// Save the rounds of the first side given as a baseline file for a later --baseline
    /// (with one side, compare only measures and saves).
    #[arg(long = "save-baseline", value_name = "FILE")]
    pub save_baseline: Option<PathBuf>,

    /// A regression gate, repeatable: 'req/s<-5%', 'p99>+10%', 'p50>+10%', 'cpu/call>+5%'.
    /// Exit 3 when a side's whole interval lies past a limit (a significant change), 0 when
    /// none does; one line per rule says which.
    #[arg(long = "fail-if", value_name = "RULE")]
    pub fail_if: Vec<String>,

    /// Output format of the comparison.
    #[arg(short = 'O', long, value_enum, default_value_t = CompareFormat::Text)]
    pub format: CompareFormat,

    /// Settings, as for `grpclab bench`.
    #[command(flatten)]
    pub settings: BenchSettings,
    /// Where the sides are stored.
    #[command(flatten)]
    pub history: HistoryFlagArgs,
}

/// What `grpclab bench --profile` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProfileKind {
    /// CPU samples with perf, stacks walked by frame pointers (grpclab's servers, Go):
    /// flamegraph, top functions, heaviest call paths.
    Cpu,
    /// The same, stacks unwound with DWARF: for servers built without frame pointers (most
    /// C++ and Rust builds); bigger files, more overhead.
    CpuDwarf,
    /// Allocation sites with dhat (grpclab's built-in servers): top sites by count and bytes.
    Alloc,
}

/// Output formats of `grpclab compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// A table.
    Text,
    /// JSON.
    Json,
}

/// `grpclab stats HOST:PORT`
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The server, as HOST:PORT.
    #[arg(value_name = "HOST:PORT")]
    pub target: String,

    /// Plaintext HTTP/2 (h2c), no TLS. Without it, as `load` (and ghz), stats speaks TLS and
    /// verifies the server against the system's roots (or --cacert).
    #[arg(long, conflicts_with_all = ["tls", "cacert", "cname", "skip_tls"])]
    pub insecure: bool,

    /// TLS (the default; kept so older command lines still work).
    #[arg(long, hide = true)]
    pub tls: bool,

    /// TLS: trust this CA certificate (PEM) instead of the system's roots.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// TLS: the name to verify in the server's certificate (and send as SNI).
    #[arg(long, value_name = "NAME")]
    pub cname: Option<String>,

    /// TLS without verifying the server's certificate.
    #[arg(long = "skipTLS")]
    pub skip_tls: bool,
}

/// `grpclab serve --impl NAME [--port P] [--threads N]`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Which server: tonic-mt (tonic, multi-thread runtime), tonic-st (tonic, current-thread
    /// runtime) or lab (grpclab's own).
    #[arg(long = "impl", value_enum, value_name = "NAME", default_value_t = ImplementationArg::TonicMt)]
    pub implementation: ImplementationArg,

    /// Port to listen on (0 picks a free one; the address is printed once ready).
    #[arg(long, default_value_t = 50051)]
    pub port: u16,

    /// Serve TLS (ALPN h2) with this certificate chain (PEM) instead of plaintext h2c; needs
    /// --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Mutual TLS: require client certificates signed by this CA (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,

    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,

    /// lab only: listen on this unix socket instead of --host/--port (plaintext; a stale
    /// socket left by a dead server is replaced). Load it with `grpclab load --insecure
    /// unix:PATH`.
    #[arg(long, value_name = "PATH")]
    pub unix: Option<PathBuf>,

    /// Worker threads (tonic-mt's runtime workers, lab's I/O threads). Default:
    /// GRPC_SERVER_CPUS, else 1.
    #[arg(long, env = "GRPC_SERVER_CPUS", value_name = "N")]
    pub threads: Option<usize>,

    /// lab: the HTTP/2 implementation under the gRPC layer: lab (grpclab's own engine) or h2
    /// (the h2 crate, as tonic uses it: the reference).
    #[arg(long, value_enum, default_value_t = TransportArg::Engine, value_name = "TRANSPORT")]
    pub transport: TransportArg,

    /// lab: where a call's decode/handle/encode runs: inline (on the I/O thread), task (a task
    /// per call), pool (a bounded thread pool), adaptive (requests over --offload-above bytes go
    /// to an idle pool worker when the process has a core beyond its I/O threads; else inline).
    #[arg(long, value_enum, default_value_t = PlacementArg::Inline, value_name = "PLACEMENT")]
    pub decode: PlacementArg,

    /// lab: how a Greeter request is decoded and its reply encoded: view (lab's own
    /// zero-allocation codec, in place) or prost (the generated structs, owned strings and
    /// vectors, as a typical service: what our engine gives a service written the usual way).
    #[arg(long, value_enum, default_value_t = CodecArg::View, value_name = "CODEC")]
    pub codec: CodecArg,

    /// lab: threads of the decode pool (pool and adaptive placements).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub pool_threads: usize,

    /// lab: calls the pool's queue holds; when full, calls wait in their connection.
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_POOL_QUEUE, value_name = "N")]
    pub pool_queue: usize,

    /// lab, adaptive placement: request bodies larger than this many bytes may go to the pool
    /// (when a worker is idle and a core is spare).
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_OFFLOAD_ABOVE, value_name = "BYTES")]
    pub offload_above: usize,

    /// lab, for experiments: sleep this long in every call's handler (e.g. 1ms), to make a
    /// deliberately slower server.
    #[arg(long, hide = true, value_parser = parse_duration)]
    pub handler_delay: Option<std::time::Duration>,

    /// lab, for experiments: keep the CPU busy this long in every unary call's handler (e.g.
    /// 100ns), a known per-call cost (benches/gate_power.py).
    #[arg(long, hide = true, value_parser = parse_duration)]
    pub handler_spin: Option<std::time::Duration>,

    /// lab: largest request message accepted; larger ones get RESOURCE_EXHAUSTED unread.
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_MAX_MESSAGE_BYTES, value_name = "BYTES")]
    pub max_message_bytes: usize,

    /// lab: SETTINGS_MAX_CONCURRENT_STREAMS advertised and enforced per connection.
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_MAX_CONCURRENT_STREAMS, value_name = "N")]
    pub max_concurrent_streams: u32,

    /// lab: the connection window, which is also the most request-body bytes one connection
    /// may hold (arriving, or not yet answered); bodies that cannot all fit are refused with
    /// REFUSED_STREAM (safe to retry). Raised to fit one --max-message-bytes message.
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_CONNECTION_WINDOW, value_name = "BYTES")]
    pub connection_window: u32,

    /// lab: connections open at once; more are closed as soon as they are accepted, with a
    /// log line at most once a second (keep it below the process's descriptor limit).
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    pub max_connections: usize,

    /// lab (its own transport): close a connection with no open stream after it has sent
    /// nothing for this long, with GOAWAY(NO_ERROR); 0s keeps idle connections forever.
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = parse_duration_or_zero)]
    pub idle_timeout: std::time::Duration,

    /// lab (its own transport): PING a connection with open streams once its client has
    /// sent nothing for this long; 0s sends none.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = parse_duration_or_zero)]
    pub keepalive: std::time::Duration,

    /// lab (its own transport): drop a connection, and its calls, when its client stays silent
    /// this long after a keepalive PING.
    #[arg(long, default_value = "20s", value_name = "DURATION", value_parser = parse_duration)]
    pub keepalive_timeout: std::time::Duration,
}

/// ghz's flags that grpclab refuses, each by name (see [`UnsupportedGhzFlags::refusal`]).
#[derive(Debug, Args, Default)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Every numeric flag of `load` (counts, rates, sizes, durations), given any value a user
    /// could type, in both spellings (`--flag=V`, and `--flag V`, where a value starting with
    /// '-' must reach the parser instead of being taken for a flag): accepted, or refused by
    /// clap with exit code 2 and a message naming the flag — never a panic.
    #[test]
    fn every_numeric_load_flag_is_accepted_or_refused_by_name_never_a_panic() {
        let flags = [
            "--concurrency",
            "--connections",
            "--rps",
            "--load-start",
            "--load-step",
            "--load-end",
            "--load-step-duration",
            "--load-max-duration",
            "--stream-interval",
            "--stream-call-duration",
            "--stream-call-count",
            "--concurrency-start",
            "--concurrency-step",
            "--concurrency-end",
            "--concurrency-step-duration",
            "--concurrency-max-duration",
            "--duration",
            "--total",
            "--max-duration",
            "--timeout",
            "--connect-timeout",
            "--keepalive",
            "--max-recv-message-size",
            "--max-send-message-size",
            "--details",
            "--skipFirst",
            "--warmup",
            "--cpus",
        ];
        let mut seed = 0x1234_5678_9abc_def1u64;
        // The fixed values and a hundred random ones (clap builds its whole command for each
        // parse: all 300 take a minute in a debug build).
        let values = crate::cli::typed_values(&mut seed);
        let mut refused = 0;
        for flag in flags {
            for value in values.iter().take(150) {
                let joined = format!("{flag}={value}");
                let mut spellings = vec![vec![joined]];
                if flag != "--details" {
                    spellings.push(vec![flag.to_owned(), value.clone()]);
                }
                for spelling in spellings {
                    let mut argv = vec!["grpclab".to_owned(), "load".to_owned(), "h:1".to_owned()];
                    argv.extend(spelling.iter().cloned());
                    let parsed = std::panic::catch_unwind(|| Cli::try_parse_from(&argv));
                    let Ok(parsed) = parsed else {
                        panic!("{spelling:?} panicked");
                    };
                    if let Err(err) = parsed {
                        refused += 1;
                        assert_eq!(err.exit_code(), 2, "{spelling:?}");
                        let text = err.to_string();
                        assert!(text.contains(flag), "{spelling:?}: {text}");
                    }
                }
            }
        }
        assert!(refused > 1000, "{refused} refused");
        // The values a user reported, each refused in words that say what the flag takes.
        for (argv, says) in [
            (&["-c", "100000000"][..], "from 1 to 100000"),
            (&["-n", "-5"], "at least 1"),
            (&["-c", "-1"], "from 1 to 100000"),
            (&["-r", "-5"], "0 or more"),
            (&["-z", "-3s"], "negative"),
            (&["--connections", "0"], "from 1 to 100000"),
        ] {
            let mut full = vec!["grpclab", "load", "h:1"];
            full.extend_from_slice(argv);
            let err = Cli::try_parse_from(&full).unwrap_err().to_string();
            assert!(err.contains(says), "{argv:?}: {err}");
            assert!(!err.contains("unexpected argument"), "{argv:?}: {err}");
        }
    }

    #[test]
    fn sizes_read_as_ghz_reads_them() {
        assert_eq!(parse_byte_size("4194304"), Ok(4_194_304));
        assert_eq!(parse_byte_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_byte_size("42 MB"), Ok(42_000_000));
        assert_eq!(parse_byte_size("1.5kB"), Ok(1500));
        assert!(parse_byte_size("0").is_err());
        assert!(parse_byte_size("MB").is_err());
        assert!(parse_byte_size("3 furlongs").is_err());
    }
}

/// `bench --client`: the load generator of each window, as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClientArg {
    /// grpclab's own load engine: exact histograms, its CPU measured, every call accounted.
    Grpclab,
    /// ghz, as grpc_bench runs it (`--concurrency`, `--connections`, `--duration`, a warm-up
    /// run first): the table grpc_bench would have printed, with ghz's own figures.
    Ghz,
}

impl From<ClientArg> for grpclab_harness::bench::config::BenchClient {
    fn from(arg: ClientArg) -> Self {
        match arg {
            ClientArg::Grpclab => Self::Grpclab,
            ClientArg::Ghz => Self::Ghz,
        }
    }
}
