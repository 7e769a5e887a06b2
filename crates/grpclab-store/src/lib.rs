//! Results that outlive the run: every `load`, `bench` row and `compare` side stored in a
//! database (SQLite at a default path with no setup, or a team's PostgreSQL), listed and
//! read back by `grpclab history`, and each new run set against the previous run of the
//! same configuration.
//!
//! Rooms, top to bottom:
//! - this module: a run's record ([`RunRecord`], [`NewRun`], [`StoredRun`]), the machine it
//!   ran on, the [`Recorder`] a verb stores through;
//! - [`store`]: the two databases behind one [`store::Store`], the schema and its migrations;
//! - `postgres_tls`: TLS to PostgreSQL, the driver's errors in one line;
//! - [`location`] (the bottom): which store `--history` names, and the [`Backend`] it is.
//!
//! The store sits below the harness: it keeps records and never reads bench's, compare's or
//! load's types; `grpclab`'s `records` module makes records from them. The judgement of a
//! new run against the previous one is `grpclab_results::verdict::previous`.
//!
//! Storing never fails a run: [`Recorder::record`] turns every problem into one warning
//! line, and the results folder or file is written whatever the store does.

#![deny(missing_docs)]

pub mod location;
pub(crate) mod postgres_tls;
pub mod store;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use grpclab_results::verdict::previous::{Previous, StoredNote};
pub use location::{resolve, Backend, HistoryFlags, Location};
pub use store::{Store, StoreError};

/// The machine a run was measured on: runs on different machines are different
/// configurations, and a trend tells them apart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// Host name.
    pub host: String,
    /// Logical cores.
    pub cores: u64,
    /// CPU model.
    pub model: String,
    /// Kernel release.
    pub kernel: String,
}

impl Machine {
    /// This machine.
    pub fn this() -> Machine {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|text| text.trim().to_owned())
                .unwrap_or_default()
        };
        let model = read("/proc/cpuinfo")
            .lines()
            .find_map(|line| {
                line.strip_prefix("model name")
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        Machine {
            host: read("/proc/sys/kernel/hostname"),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
            model,
            kernel: read("/proc/sys/kernel/osrelease"),
        }
    }

    /// "host (N cores, model)".
    pub fn label(&self) -> String {
        format!("{} ({} cores, {})", self.host, self.cores, self.model)
    }
}

/// A run's headline figures (nanoseconds for times); `None` where the run did not measure it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Calls in the measured window.
    pub calls: Option<u64>,
    /// Of those, failed.
    pub errors: Option<u64>,
    /// Calls per second over the measured window.
    pub rps: Option<f64>,
    /// Median latency.
    pub p50_ns: Option<u64>,
    /// 90th percentile.
    pub p90_ns: Option<u64>,
    /// 99th percentile.
    pub p99_ns: Option<u64>,
    /// 99.9th percentile.
    pub p999_ns: Option<u64>,
    /// The server's mean CPU, percent of one core.
    pub server_cpu_percent: Option<f64>,
    /// The server's mean resident memory.
    pub server_memory_bytes: Option<u64>,
    /// The server's CPU time per call.
    pub cpu_ns_per_call: Option<f64>,
    /// `--capacity`: the highest rate that met the SLO.
    pub capacity_rps: Option<f64>,
}

impl Figures {
    /// The figures a new run is judged on against its previous runs.
    pub fn judged(&self) -> grpclab_results::verdict::previous::Figures {
        [
            self.rps,
            self.p99_ns.map(|v| v as f64),
            self.cpu_ns_per_call,
        ]
    }
}

/// What identifies a run and its headline figures: the columns of the store, the same for a
/// run to store ([`NewRun`]) and one read back ([`StoredRun`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// When it started, RFC 3339 UTC.
    pub started_at: String,
    /// The same, milliseconds since the epoch (for ordering and `--since`).
    pub started_unix_ms: i64,
    /// `load`, `bench` or `compare`.
    pub command: String,
    /// Shared by the runs of one invocation (a bench's rows, a compare's sides).
    pub batch: String,
    /// The server addressed (`load`), empty for servers the harness started.
    pub target: String,
    /// The implementation (a bench row, a compare side, a load's `--name`).
    pub implementation: String,
    /// The scenario or call.
    pub scenario: String,
    /// Equal for runs of the same configuration on the same machine (`grpclab`'s `records::config_key`).
    pub config_key: String,
    /// Every setting that shaped the run.
    pub settings: serde_json::Value,
    /// `--tags`.
    pub tags: BTreeMap<String, String>,
    /// How it ended (a load's end reason, a row's status).
    pub status: String,
    /// Where it ran.
    pub machine: Machine,
    /// grpclab's version.
    pub version: String,
    /// grpclab's git commit, or "unknown".
    pub git_commit: String,
    /// The results folder or file it was written to (or imported from).
    pub source: String,
    /// The headline figures.
    pub figures: Figures,
    /// What the run's whole result holds: `load`, `bench`, `compare` or `ghz`.
    pub result_kind: String,
}

/// A run to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// Its columns.
    pub record: RunRecord,
    /// The whole result as JSON (histograms included), so the run can be rendered again.
    pub result: String,
}

/// A stored run, as listed (its full result is read with [`Store::get`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRun {
    /// Its id.
    pub id: i64,
    /// Its columns (flattened: the JSON of `grpclab history -O json` lists them beside `id`).
    #[serde(flatten)]
    pub record: RunRecord,
}

/// Which runs `grpclab history` lists; every field given must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// The implementation, exactly.
    pub implementation: Option<String>,
    /// The scenario, exactly.
    pub scenario: Option<String>,
    /// The target, exactly.
    pub target: Option<String>,
    /// The command.
    pub command: Option<String>,
    /// The configuration key.
    pub config_key: Option<String>,
    /// Runs started at or after this time.
    pub since_unix_ms: Option<i64>,
    /// Runs stored before this one.
    pub before_id: Option<i64>,
    /// A tag `key=value`.
    pub tag: Option<(String, String)>,
    /// At most this many (the newest).
    pub limit: Option<usize>,
}

/// What storing some runs gave: their ids and each against its previous run, or the one
/// warning that says why nothing was stored.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    /// Ids of the runs stored, in order.
    pub ids: Vec<i64>,
    /// For each, the previous run of its configuration (when there was one).
    pub against: Vec<Option<Previous>>,
    /// Why the runs were not stored.
    pub warning: Option<String>,
}

impl Recorded {
    /// The lines to print: "history: run N stored; ..." per run, or the warning.
    pub fn lines(&self, names: &[String]) -> Vec<String> {
        if let Some(warning) = &self.warning {
            return vec![format!("WARNING: {warning}")];
        }
        self.ids
            .iter()
            .zip(&self.against)
            .enumerate()
            .map(|(index, (id, against))| {
                let name = names
                    .get(index)
                    .map(|name| format!(" ({name})"))
                    .unwrap_or_default();
                match against {
                    Some(previous) => format!("history: run {id}{name}; {}", previous.sentence()),
                    None => format!("history: run {id}{name}; the first of its configuration"),
                }
            })
            .collect()
    }
}

/// Writes runs to the store chosen for this invocation; one batch id for all its runs.
#[derive(Debug)]
pub struct Recorder {
    backend: Option<Result<Backend, String>>,
    batch: String,
}

impl Recorder {
    /// A recorder that stores nothing (`--no-history`).
    pub fn off() -> Recorder {
        Recorder {
            backend: None,
            batch: String::new(),
        }
    }

    /// The recorder `flags` choose: off with `--no-history`. A malformed location or an
    /// unreadable password file is the user's input: an error, before anything runs.
    pub fn open(flags: &HistoryFlags) -> Result<Recorder, grpclab_core::InputError> {
        Ok(match location::resolve(flags)? {
            Location::Off => Recorder::off(),
            Location::Store(backend) => Recorder::new(Ok(backend)),
            Location::Unavailable(why) => Recorder::new(Err(why)),
        })
    }

    /// A recorder for `backend`: `Err` holds the one warning to give instead of storing
    /// (e.g. no default path on a machine without `$HOME`).
    fn new(backend: Result<Backend, String>) -> Recorder {
        let batch = format!("{}-{}", now_unix_ms(), std::process::id());
        Recorder {
            backend: Some(backend),
            batch,
        }
    }

    /// Whether runs are stored at all.
    pub fn is_on(&self) -> bool {
        self.backend.is_some()
    }

    /// The store, as said to a person (no password); empty when off.
    pub fn describe(&self) -> String {
        match &self.backend {
            Some(Ok(backend)) => backend.describe(),
            _ => String::new(),
        }
    }

    /// This invocation's batch id.
    pub fn batch(&self) -> &str {
        &self.batch
    }

    /// Stores `runs` and finds each one's previous run. Never fails and never panics out:
    /// a store that cannot be opened or written gives one warning.
    pub fn record(&mut self, mut runs: Vec<NewRun>) -> Recorded {
        let backend = match &self.backend {
            None => return Recorded::default(),
            Some(Err(warning)) => {
                return Recorded {
                    warning: Some(format!("runs are not stored in history: {warning}")),
                    ..Recorded::default()
                }
            }
            Some(Ok(backend)) => backend.clone(),
        };
        for run in &mut runs {
            run.record.batch = self.batch.clone();
        }
        // Its own thread: the PostgreSQL driver runs a runtime of its own (never inside the
        // caller's), and a panic in a driver costs the history, never the run.
        let outcome = std::thread::scope(|scope| {
            scope
                .spawn(|| store_and_compare(&backend, &runs))
                .join()
                .unwrap_or_else(|_| {
                    Err(StoreError::Refused("the database driver failed".to_owned()))
                })
        });
        match outcome {
            Ok(recorded) => recorded,
            Err(err) => Recorded {
                warning: Some(format!(
                    "runs are not stored in history ({}): {}; the results are still written",
                    backend.describe(),
                    err.redacted(&backend)
                )),
                ..Recorded::default()
            },
        }
    }
}

fn store_and_compare(backend: &Backend, runs: &[NewRun]) -> Result<Recorded, StoreError> {
    let mut store = Store::open(backend)?;
    let ids = store.insert(runs)?;
    let mut against = Vec::with_capacity(runs.len());
    for (run, id) in runs.iter().zip(&ids) {
        let earlier = store.list(&Filter {
            config_key: Some(run.record.config_key.clone()),
            before_id: Some(*id),
            limit: Some(grpclab_results::verdict::previous::SPREAD_RUNS),
            ..Filter::default()
        })?;
        let earlier: Vec<grpclab_results::verdict::previous::EarlierRun> = earlier
            .iter()
            .map(|run| grpclab_results::verdict::previous::EarlierRun {
                id: run.id,
                started_at: run.record.started_at.clone(),
                figures: run.record.figures.judged(),
            })
            .collect();
        against.push(Previous::of(&run.record.figures.judged(), &earlier));
    }
    Ok(Recorded {
        ids,
        against,
        warning: None,
    })
}

/// Now, RFC 3339 UTC to the millisecond.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Now, milliseconds since the epoch.
pub fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
