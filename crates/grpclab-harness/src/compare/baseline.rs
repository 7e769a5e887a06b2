//! Saved baselines: a side's per-round figures and the settings they were measured under,
//! so a later `compare --baseline` can judge a new build against them without running the old
//! one again (`--save-baseline FILE` writes one; a `compare.json` or its folder serves too).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::metric::Metric;
use crate::bench::config::BenchConfig;
use grpclab_core::InputError;

/// The format tag a baseline file starts with; a file without it is read as a compare report.
const FORMAT: &str = "grpclab-baseline/1";

/// The settings that make two sets of rounds comparable: a baseline measured under other
/// settings answers another question, so [`Baseline::check`] refuses it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RunSettings {
    /// The scenario (built-in name or folder).
    pub scenario: String,
    /// The measured window, seconds.
    pub duration_s: f64,
    /// The warm-up, seconds.
    pub warmup_s: f64,
    /// The server's CPU quota, cores.
    pub server_cpus: f64,
    /// The server's memory limit, bytes.
    pub server_ram: u64,
    /// Client connections.
    pub connections: usize,
    /// Streams in flight.
    pub concurrency: usize,
    /// Offered rate (0: closed loop).
    pub qps: u64,
    /// Client threads.
    pub client_cpus: usize,
    /// TLS on.
    pub tls: bool,
}

impl RunSettings {
    /// The settings of a bench configuration.
    pub fn of(config: &BenchConfig) -> RunSettings {
        RunSettings {
            scenario: config.scenario.clone(),
            duration_s: config.duration.as_secs_f64(),
            warmup_s: config.warmup.as_secs_f64(),
            server_cpus: config.server_cpus,
            server_ram: config.server_ram,
            connections: config.connections,
            concurrency: config.concurrency,
            qps: config.qps,
            client_cpus: config.client_cpus,
            tls: config.tls,
        }
    }

    /// "name: saved → now" for every setting that differs.
    fn differences(&self, now: &RunSettings) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |name: &str, saved: String, current: String| {
            if saved != current {
                out.push(format!("{name} {saved} (now {current})"));
            }
        };
        check("scenario", self.scenario.clone(), now.scenario.clone());
        check(
            "--duration",
            format!("{}s", self.duration_s),
            format!("{}s", now.duration_s),
        );
        check(
            "--warmup",
            format!("{}s", self.warmup_s),
            format!("{}s", now.warmup_s),
        );
        check(
            "--cpus",
            self.server_cpus.to_string(),
            now.server_cpus.to_string(),
        );
        check(
            "--memory",
            self.server_ram.to_string(),
            now.server_ram.to_string(),
        );
        check(
            "--connections",
            self.connections.to_string(),
            now.connections.to_string(),
        );
        check(
            "--concurrency",
            self.concurrency.to_string(),
            now.concurrency.to_string(),
        );
        check("--rps", self.qps.to_string(), now.qps.to_string());
        check(
            "--client-cpus",
            self.client_cpus.to_string(),
            now.client_cpus.to_string(),
        );
        check("--tls", self.tls.to_string(), now.tls.to_string());
        out
    }
}

/// One side's figures, round by round (nanoseconds for times).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct SideSamples {
    /// The side's label (A, B, ...).
    pub label: String,
    /// The side as given.
    pub side: String,
    /// req/s per round.
    pub rps: Vec<f64>,
    /// p50 per round.
    pub p50_ns: Vec<f64>,
    /// p99 per round.
    pub p99_ns: Vec<f64>,
    /// The server's CPU per call per round (empty when a round did not measure it).
    #[serde(default)]
    pub cpu_ns_per_call: Vec<f64>,
}

impl SideSamples {
    /// The values of one metric.
    pub fn values(&self, metric: Metric) -> &[f64] {
        match metric {
            Metric::Rps => &self.rps,
            Metric::P50 => &self.p50_ns,
            Metric::P99 => &self.p99_ns,
            Metric::CpuPerCall => &self.cpu_ns_per_call,
        }
    }

    /// Collects a side's figures from its runs; a metric missing from any run is left empty
    /// (a partial sample would bias the mean towards the runs that measured it).
    pub fn from_runs(label: &str, side: &str, runs: &[crate::bench::runner::ImplResult]) -> Self {
        let collect = |metric: Metric| {
            runs.iter()
                .map(|run| metric.of(run))
                .collect::<Option<Vec<f64>>>()
                .unwrap_or_default()
        };
        SideSamples {
            label: label.to_owned(),
            side: side.to_owned(),
            rps: collect(Metric::Rps),
            p50_ns: collect(Metric::P50),
            p99_ns: collect(Metric::P99),
            cpu_ns_per_call: collect(Metric::CpuPerCall),
        }
    }
}

/// A saved baseline.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Baseline {
    /// [`FORMAT`].
    pub format: String,
    /// The settings its rounds ran under.
    pub settings: RunSettings,
    /// Its rounds.
    pub samples: SideSamples,
    /// Where it was read from (not saved).
    #[serde(skip)]
    pub source: PathBuf,
}

/// Why a compare report's side cannot serve as a baseline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotABaseline {
    /// The report predates per-round figures (or has no such side).
    #[error("an older compare report without per-round figures; run the baseline again")]
    NoRoundFigures,
    /// Fewer than two rounds: no interval can be drawn from it.
    #[error("it holds {0} round(s); a baseline needs at least 2 for an interval")]
    TooFewRounds(usize),
}

impl Baseline {
    /// A baseline of `samples` measured under `settings`.
    pub fn new(settings: RunSettings, samples: SideSamples) -> Baseline {
        Baseline {
            format: FORMAT.to_owned(),
            settings,
            samples,
            source: PathBuf::new(),
        }
    }

    /// The rounds of one side of a compare report (`label`, or the first side) as a
    /// baseline; `Err` says why it cannot be one.
    pub fn of_side(
        report: super::CompareReport,
        label: Option<&str>,
    ) -> Result<Baseline, NotABaseline> {
        let settings = report.settings.ok_or(NotABaseline::NoRoundFigures)?;
        let samples = match label {
            Some(label) => report.sides.into_iter().find(|side| side.label == label),
            None => report.sides.into_iter().next(),
        }
        .ok_or(NotABaseline::NoRoundFigures)?;
        if samples.rps.len() < 2 {
            return Err(NotABaseline::TooFewRounds(samples.rps.len()));
        }
        Ok(Baseline::new(settings, samples))
    }

    /// Writes it to `path` as JSON.
    pub fn save(&self, path: &Path) -> Result<(), crate::HarnessError> {
        let failed = |err: &dyn std::fmt::Display| {
            crate::HarnessError::Failed(format!(
                "cannot write the baseline to {}: {err}",
                path.display()
            ))
        };
        let bytes = serde_json::to_vec_pretty(self).map_err(|err| failed(&err))?;
        std::fs::write(path, bytes).map_err(|err| failed(&err))
    }

    /// Reads a baseline from a file `--save-baseline` wrote, a `compare.json` (its first
    /// side, A), or a compare results folder holding one.
    pub fn load(path: &Path) -> Result<Baseline, InputError> {
        let file = if path.is_dir() {
            path.join("compare.json")
        } else {
            path.to_path_buf()
        };
        let fix =
            "give a file --save-baseline wrote, or a compare results folder (or its compare.json)";
        let text = std::fs::read(&file).map_err(|err| {
            InputError(format!(
                "--baseline {}: cannot read {}: {err}; {fix}",
                path.display(),
                file.display()
            ))
        })?;
        let value: serde_json::Value = serde_json::from_slice(&text).map_err(|err| {
            InputError(format!(
                "--baseline {}: not JSON ({err}); {fix}",
                file.display()
            ))
        })?;
        let unreadable =
            |what: &str| InputError(format!("--baseline {}: {what}; {fix}", file.display()));
        let mut baseline = if value.get("format").and_then(|f| f.as_str()) == Some(FORMAT) {
            serde_json::from_value::<Baseline>(value)
                .map_err(|err| unreadable(&format!("a damaged baseline ({err})")))?
        } else if value.get("comparisons").is_some() {
            let report: super::CompareReport = serde_json::from_value(value).map_err(|err| {
                unreadable(&format!("not a compare report grpclab can read ({err})"))
            })?;
            Baseline::of_side(report, None).map_err(|why| unreadable(&why.to_string()))?
        } else {
            return Err(unreadable("neither a baseline nor a compare report"));
        };
        if baseline.samples.rps.len() < 2 {
            return Err(unreadable(
                &NotABaseline::TooFewRounds(baseline.samples.rps.len()).to_string(),
            ));
        }
        baseline.source = file;
        Ok(baseline)
    }

    /// Refuses a baseline measured under other settings, naming each difference.
    pub fn check(&self, now: &RunSettings) -> Result<(), InputError> {
        let differences = self.settings.differences(now);
        if differences.is_empty() {
            return Ok(());
        }
        Err(InputError(format!(
            "--baseline {} was measured with {}; run with the same settings, or save a new baseline",
            self.source.display(),
            differences.join(", ")
        )))
    }
}
