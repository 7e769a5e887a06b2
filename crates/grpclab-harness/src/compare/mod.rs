//! `grpclab compare A B [C ...]`: did my change help? Runs the sides interleaved (A B A B ...,
//! or A B C A B C ...) for `--rounds` rounds, so drift on a noisy machine hits every side,
//! each round a full bench run (server under limits, warmup, window); then per metric (req/s,
//! p50, p99, the server's CPU per call) each side's mean with its interval (99.9 % unless
//! `--confidence` says otherwise) and, for every side after the first, the ratio to A with its
//! interval and a verdict. A is the baseline: a side typed first, or the rounds of a saved
//! `--baseline` ([`baseline`]); `--fail-if` rules turn the verdicts into an exit code
//! ([`gate`]).
//!
//! Each side names an implementation of the suite (the built-in servers by default) followed
//! by extra arguments for its start command: `"lab --decode inline"` vs `"lab --decode pool"`.

pub mod baseline;
pub mod gate;
pub mod metric;
pub mod stats;

use grpclab_load::CancellationToken;
use serde::Serialize;

use crate::bench::config::BenchConfig;
use crate::bench::runner::{run_one, ImplResult, RowStatus, RunContext};
use crate::bench::suite::{self, shell_quote, ImplementationSpec};
use baseline::{Baseline, RunSettings, SideSamples};
use gate::{FailIf, GateVerdict};
use grpclab_core::InputError;
use metric::Metric;
use stats::{compare, Comparison, Confidence};

/// Fewest rounds per side: below it any interval is wider than any difference.
pub const MIN_ROUNDS: usize = 3;

/// Most sides one comparison takes (labels A..H); more would make rounds too long to
/// interleave usefully.
pub const MAX_SIDES: usize = 8;

/// A side's label: A, B, C, ...
fn label(index: usize) -> String {
    char::from(b'A' + index as u8).to_string()
}

/// A validated comparison.
pub struct PreparedCompare {
    config: BenchConfig,
    /// Each side to run as given, its label and its suite entry.
    sides: Vec<(String, String, ImplementationSpec)>,
    rounds: usize,
    scenario: grpclab_core::Scenario,
    options: CompareOptions,
    /// `--baseline`'s rounds: side A, not run again.
    baseline: Option<Baseline>,
    gates: Vec<FailIf>,
}

/// Where `--baseline`'s rounds come from.
#[derive(Debug, Clone)]
pub enum BaselineSource {
    /// A file `--save-baseline` wrote, or a compare results folder or its `compare.json`.
    File(std::path::PathBuf),
    /// Already read (from the history store: `--baseline last` or a run's id).
    Loaded(Box<Baseline>),
}

/// How to compare, beyond the sides.
#[derive(Debug, Clone, Default)]
pub struct CompareOptions {
    /// Rounds per side.
    pub rounds: usize,
    /// Every interval's level.
    pub confidence: Confidence,
    /// A saved baseline to judge the sides against (it becomes A).
    pub baseline: Option<BaselineSource>,
    /// Where to save the first typed side's rounds as a baseline.
    pub save_baseline: Option<std::path::PathBuf>,
    /// `--fail-if` rules, as typed.
    pub fail_if: Vec<String>,
}

/// One side: "NAME [ARGS...]" → the suite's entry with the arguments appended.
fn side(
    text: &str,
    suite: &[ImplementationSpec],
    which: &str,
) -> Result<ImplementationSpec, InputError> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some((name, extra)) = words.split_first() else {
        return Err(InputError(format!(
            "{which} is empty; give an implementation name, e.g. \"lab --decode pool\""
        )));
    };
    let mut spec = suite::select(suite.to_vec(), &[(*name).to_owned()])
        .map_err(|err| InputError(format!("{which}: {err}")))?
        .remove(0);
    for word in extra {
        spec.command.push(' ');
        spec.command.push_str(&shell_quote(word));
    }
    spec.name = which.to_owned();
    Ok(spec)
}

/// Validates a comparison before anything runs: `sides` as typed ("NAME [ARGS...]"), each
/// found in `suite`; A is the first of them, or `--baseline`'s rounds when one is given.
pub fn prepare(
    config: BenchConfig,
    suite: &[ImplementationSpec],
    sides: &[String],
    options: CompareOptions,
) -> Result<PreparedCompare, InputError> {
    let rounds = options.rounds;
    let confidence = options.confidence;
    if rounds < MIN_ROUNDS {
        // Two rounds give one degree of freedom: Student's t at 99.9 % is 636.6, and the
        // interval spans from nothing to absurd (it once printed 565963 ± 64739650 req/s).
        let why = if rounds < 2 {
            "one round has no spread to make an interval of".to_owned()
        } else {
            format!(
                "with {rounds} rounds a {} interval is ±{:.0} standard errors wide, no use for a verdict",
                confidence.percent_text(),
                confidence.t(rounds as f64 - 1.0)
            )
        };
        return Err(InputError(format!(
            "--rounds {rounds}: {why}; give at least {MIN_ROUNDS} (±{:.1}), better 5, the default (±{:.1}), or 10 (±{:.1})",
            confidence.t(MIN_ROUNDS as f64 - 1.0),
            confidence.t(4.0),
            confidence.t(9.0),
        )));
    }
    let gates = options
        .fail_if
        .iter()
        .map(|text| FailIf::parse(text).map_err(InputError))
        .collect::<Result<Vec<_>, _>>()?;
    let baseline = match &options.baseline {
        Some(source) => {
            let baseline = match source {
                BaselineSource::File(path) => Baseline::load(path)?,
                BaselineSource::Loaded(baseline) => (**baseline).clone(),
            };
            baseline.check(&RunSettings::of(&config))?;
            Some(baseline)
        }
        None => None,
    };
    if let Some(path) = &options.save_baseline {
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => std::path::Path::new("."),
        };
        if !parent.is_dir() {
            return Err(InputError(format!(
                "--save-baseline {}: the folder {} does not exist; create it or give another path",
                path.display(),
                parent.display()
            )));
        }
    }
    let (least, most) = if baseline.is_some() {
        (1, MAX_SIDES - 1)
    } else if options.save_baseline.is_some() {
        (1, MAX_SIDES)
    } else {
        (2, MAX_SIDES)
    };
    if sides.len() < least || sides.len() > most {
        let what = if baseline.is_some() {
            format!("with --baseline (side A) compare takes 1 to {most} more sides (B [C ...])")
        } else if least == 1 {
            format!("compare takes 1 to {most} sides")
        } else {
            format!("compare takes 2 to {most} sides (A B [C ...]), or one with --baseline or --save-baseline")
        };
        return Err(InputError(format!("{what}, got {}", sides.len())));
    }
    if !gates.is_empty() && sides.len() + usize::from(baseline.is_some()) < 2 {
        return Err(InputError(
            "--fail-if needs something to compare against: give two sides, or --baseline FILE"
                .to_owned(),
        ));
    }
    let scenario = grpclab_core::Scenario::load(&config.scenario, None).map_err(|err| {
        InputError(format!(
            "GRPC_REQUEST_SCENARIO='{}': {err}",
            config.scenario
        ))
    })?;
    let first_label = usize::from(baseline.is_some());
    let sides = sides
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let label = label(first_label + index);
            Ok((text.clone(), label.clone(), side(text, suite, &label)?))
        })
        .collect::<Result<Vec<_>, InputError>>()?;
    Ok(PreparedCompare {
        sides,
        config,
        rounds,
        scenario,
        options,
        baseline,
        gates,
    })
}

/// The comparison's result, as printed and written to `compare.json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CompareReport {
    /// A as given: the baseline.
    pub baseline: String,
    /// Rounds per side (run in this comparison).
    pub rounds: usize,
    /// The level of every interval.
    #[serde(default)]
    pub confidence: Confidence,
    /// The settings every round ran under.
    #[serde(default)]
    pub settings: Option<RunSettings>,
    /// Where A's rounds came from, when A is a saved `--baseline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_file: Option<String>,
    /// Every side's figures round by round, A first.
    #[serde(default)]
    pub sides: Vec<SideSamples>,
    /// Every side after A against A, in the order given.
    pub comparisons: Vec<SideComparison>,
    /// `--fail-if` verdicts, per rule and side.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gate: Vec<GateVerdict>,
}

impl CompareReport {
    /// Whether a `--fail-if` rule failed.
    pub fn gate_failed(&self) -> bool {
        self.gate.iter().any(|verdict| verdict.failed)
    }
}

/// One side against the baseline.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SideComparison {
    /// Its label (B, C, ...).
    pub label: String,
    /// The side as given.
    pub side: String,
    /// Requests per second (higher is better).
    pub rps: Comparison,
    /// Median latency in nanoseconds (lower is better).
    pub p50_ns: Comparison,
    /// 99th percentile latency in nanoseconds (lower is better).
    pub p99_ns: Comparison,
    /// The server's CPU per call in nanoseconds (lower is better); absent when a round did
    /// not measure it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns_per_call: Option<Comparison>,
}

impl SideComparison {
    /// The comparison of one metric, if it was measured.
    pub fn get(&self, metric: Metric) -> Option<&Comparison> {
        match metric {
            Metric::Rps => Some(&self.rps),
            Metric::P50 => Some(&self.p50_ns),
            Metric::P99 => Some(&self.p99_ns),
            Metric::CpuPerCall => self.cpu_ns_per_call.as_ref(),
        }
    }

    /// `side` against `a`.
    fn of(a: &SideSamples, side: &SideSamples, confidence: Confidence) -> SideComparison {
        let pair = |metric: Metric| {
            compare(
                a.values(metric),
                side.values(metric),
                metric.better(),
                confidence,
            )
        };
        let cpu_measured = !a.cpu_ns_per_call.is_empty() && !side.cpu_ns_per_call.is_empty();
        SideComparison {
            label: side.label.clone(),
            side: side.side.clone(),
            rps: pair(Metric::Rps),
            p50_ns: pair(Metric::P50),
            p99_ns: pair(Metric::P99),
            cpu_ns_per_call: cpu_measured.then(|| pair(Metric::CpuPerCall)),
        }
    }
}

/// Runs the rounds and compares. Every run's record is written as it finishes; then
/// `compare.json` and `compare.txt`, the baseline if asked for, and the page.
pub fn execute(
    prepared: PreparedCompare,
    cancel: &CancellationToken,
    progress: &mut dyn FnMut(&str),
    after_write: &dyn Fn(&std::path::Path) -> Result<(), InputError>,
) -> Result<(CompareReport, std::path::PathBuf), crate::HarnessError> {
    let config = &prepared.config;
    let (dir, cores) =
        crate::bench::results_and_cores(config, &crate::bench::limits::available_cores())?;
    let tls = crate::bench::bench_tls(config, dir.path())?;
    let mut runs: Vec<Vec<ImplResult>> = vec![Vec::new(); prepared.sides.len()];
    for round in 1..=prepared.rounds {
        for (index, (text, side_label, spec)) in prepared.sides.iter().enumerate() {
            if cancel.is_cancelled() {
                return Err(crate::HarnessError::Failed(format!(
                    "interrupted (Ctrl-C) in round {round}; the finished runs are in {}",
                    dir.path().display()
                )));
            }
            let mut prefixed =
                |line: &str| progress(&format!("[round {round}/{}] {line}", prepared.rounds));
            let scenario_dir = crate::bench::build::scenario_dir(&config.scenario, dir.path())
                .map_err(|err| {
                    crate::HarnessError::Failed(format!(
                        "cannot write the scenario's files into {}: {err}",
                        dir.path().display()
                    ))
                })?;
            let mut context = RunContext {
                config,
                scenario: &prepared.scenario,
                // compare sends the scenario's payload.
                methods: &[],
                flows: &[],
                mix_seed: None,
                scenario_dir,
                results_dir: dir.path().to_path_buf(),
                cores: &cores,
                cancel,
                progress: &mut prefixed,
                snapshots: None,
                cpu_profile_dir: None,
                cpu_call_graph: Default::default(),
                alloc_profile_dir: None,
                tls: tls.as_ref(),
                capacity: None,
            };
            let mut spec = spec.clone();
            spec.name = format!("{}-{round}", side_label.to_lowercase());
            let result = run_one(&spec, &mut context);
            dir.write_result(&result)?;
            if result.status != RowStatus::Ok {
                return Err(crate::HarnessError::Failed(format!(
                    "{side_label} ({text}) did not run in round {round}: {}; the runs so far are in {}",
                    result.reason.as_deref().unwrap_or("unknown"),
                    dir.path().display()
                )));
            }
            runs[index].push(result);
        }
    }
    let settings = RunSettings::of(config);
    let measured: Vec<SideSamples> = prepared
        .sides
        .iter()
        .zip(&runs)
        .map(|((text, side_label, _), side_runs)| {
            SideSamples::from_runs(side_label, text, side_runs)
        })
        .collect();
    if let (Some(path), Some(first)) = (&prepared.options.save_baseline, measured.first()) {
        Baseline::new(settings.clone(), first.clone()).save(path)?;
        progress(&format!(
            "baseline saved: {} ({})",
            path.display(),
            first.side
        ));
    }
    let mut sides = Vec::new();
    if let Some(baseline) = &prepared.baseline {
        sides.push(SideSamples {
            label: label(0),
            ..baseline.samples.clone()
        });
    }
    sides.extend(measured);
    let confidence = prepared.options.confidence;
    let comparisons: Vec<SideComparison> = sides
        .iter()
        .skip(1)
        .map(|side| SideComparison::of(&sides[0], side, confidence))
        .collect();
    let gate = comparisons
        .iter()
        .flat_map(|side| {
            prepared
                .gates
                .iter()
                .map(|rule| rule.judge_at(&side.label, side.get(rule.metric), Some(confidence)))
        })
        .collect();
    let report = CompareReport {
        baseline: sides.first().map(|a| a.side.clone()).unwrap_or_default(),
        rounds: prepared.rounds,
        confidence,
        settings: Some(settings),
        baseline_file: prepared
            .baseline
            .as_ref()
            .map(|baseline| baseline.source.display().to_string()),
        sides,
        comparisons,
        gate,
    };
    std::fs::write(
        dir.path().join("compare.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    std::fs::write(dir.path().join("compare.txt"), render(&report))?;
    // The page is rendered from the files just written; a page that cannot be written costs
    // the comparison nothing but the page.
    if let Err(err) = after_write(dir.path()) {
        progress(&format!("WARNING: no report page: {err}"));
    }
    Ok((report, dir.path().to_path_buf()))
}

/// A mean with its interval, as tables print it.
fn mean_text(summary: &stats::Summary, metric: Metric) -> String {
    let (scale, unit) = metric.scale_and_unit();
    format!(
        "{:.2} ± {:.2}{unit}",
        summary.mean / scale,
        summary.ci_half_width / scale
    )
}

/// A verdict in words.
pub fn verdict_words(label: &str, verdict: stats::Verdict) -> String {
    match verdict {
        stats::Verdict::Faster => format!("{label} better"),
        stats::Verdict::Slower => format!("{label} worse"),
        stats::Verdict::NoSignificantDifference => "no significant difference".to_owned(),
    }
}

/// The comparison as a text table: per metric, A's mean and then each other side's, with
/// its ratio to A; then the gate's verdicts.
pub fn render(report: &CompareReport) -> String {
    let confidence = report.confidence;
    let level = confidence.percent_text();
    let mut out = format!("A: {}", report.baseline);
    if let Some(file) = &report.baseline_file {
        out.push_str(&format!(" (saved baseline {file})"));
    }
    out.push('\n');
    for side in &report.comparisons {
        out.push_str(&format!("{}: {}\n", side.label, side.side));
    }
    out.push_str(&format!(
        "{} rounds each, interleaved; means with {level} confidence intervals; ratios to A\n",
        report.rounds
    ));
    if report.rounds < 5 {
        out.push_str(&format!(
            "NOTE: with {} rounds each interval is ±{:.1} standard errors wide; 5 rounds make it ±{:.1}, 10 ±{:.1}: only large differences can be called\n",
            report.rounds,
            confidence.t(report.rounds as f64 - 1.0),
            confidence.t(4.0),
            confidence.t(9.0)
        ));
    }
    out.push('\n');
    let ratio_heading = format!("ratio to A [{level} CI]");
    out.push_str(&format!(
        "{:<8} {:<5} {:>26} {:>26}  {}\n",
        "metric", "side", "mean", ratio_heading, "verdict"
    ));
    for metric in Metric::ALL {
        // A's summary: from the first comparison, or (nothing to compare: a run that only
        // saves a baseline) from A's own rounds.
        let a = match report.comparisons.first() {
            Some(first) => first.get(metric).map(|c| c.a),
            None => report
                .sides
                .first()
                .map(|side| side.values(metric))
                .filter(|values| !values.is_empty())
                .map(|values| stats::summarize(values, confidence)),
        };
        let Some(a) = a else {
            continue;
        };
        out.push_str(&format!(
            "{:<8} {:<5} {:>26}\n",
            metric.name(),
            "A",
            mean_text(&a, metric)
        ));
        for side in &report.comparisons {
            let Some(c) = side.get(metric) else {
                continue;
            };
            out.push_str(&format!(
                "{:<8} {:<5} {:>26} {:>26}  {}\n",
                "",
                side.label,
                mean_text(&c.b, metric),
                format!(
                    "{} [{}, {}]",
                    stats::ratio_text(c.ratio),
                    stats::ratio_text(c.ratio_low),
                    stats::ratio_text(c.ratio_high)
                ),
                verdict_words(&side.label, c.verdict)
            ));
        }
    }
    if !report.gate.is_empty() {
        out.push_str("\ngate (fails only where the whole interval lies past the limit):\n");
        for verdict in &report.gate {
            out.push_str(&format!("  {}\n", verdict.line));
        }
    }
    out
}
