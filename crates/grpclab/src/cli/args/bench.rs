//! `grpclab bench`, `compare` and `capacity`: the harness's flags (grpc_bench's variables, each
//! also a flag).

use clap::{Args, ValueEnum};
use std::path::PathBuf;

use super::{HistoryFlagArgs, LoadArgs, MetricsArgs};
use crate::cli::values::{
    parse_at_least_one, parse_duration, parse_positive_rate, parse_precision,
};

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

    /// Run every row across this network (repeatable: a sweep axis, one value per flag).
    /// SPEC: delay=20ms,jitter=2ms,loss=0.1%,rate=1gbit,mtu=1500 (netem's terms, each
    /// applying to each direction), or lo (loopback, the default). Each row's server runs in
    /// a network namespace of its own and the client in another, joined by a link grpclab
    /// emulates (this kernel has no sch_netem); both are removed after the row. Needs root.
    #[arg(long, value_name = "SPEC")]
    pub network: Vec<String>,

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
