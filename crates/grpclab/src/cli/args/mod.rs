//! The command line: clap definitions only. Turning these into typed, validated settings
//! happens in each command's module, so that every error can name its flag.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

mod bench;
mod load;
mod results;
mod serve;

pub use bench::*;
pub use load::*;
pub use results::*;
pub use serve::*;

use super::values::parse_duration_or_zero;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::values::parse_byte_size;
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
