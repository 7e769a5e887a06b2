//! Verbs over saved results: `grpclab merge`, `history` and `report`.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

use super::{HistoryFlagArgs, OutputFormat, StoreArgs};

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
