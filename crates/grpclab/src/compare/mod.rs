//! `grpclab compare A B [C ...]`: did my change help? Runs the sides interleaved (A B A B ...,
//! or A B C A B C ...) for `--rounds` rounds, so drift on a noisy machine hits every side,
//! each round a full bench run (server under limits, warmup, window); then per metric (req/s,
//! p50, p99) each side's mean with its 99.9 % interval and, for every side after the first,
//! the ratio to A with its interval and a verdict. A is the baseline.
//!
//! Each side names an implementation of the suite (the built-in servers by default) followed
//! by extra arguments for its start command: `"lab --decode inline"` vs `"lab --decode pool"`.

pub mod stats;

use grpclab_load::CancellationToken;
use serde::Serialize;

use crate::bench::config::BenchConfig;
use crate::bench::runner::{run_one, ImplResult, RowStatus, RunContext};
use crate::bench::suite::{self, shell_quote, ImplementationSpec};
use crate::InputError;
use stats::{compare, Better, Comparison};

/// Fewest rounds per side: below it a 99.9 % interval is wider than any difference.
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
    /// Each side as given, and its suite entry.
    sides: Vec<(String, ImplementationSpec)>,
    rounds: usize,
    scenario: grpclab_core::Scenario,
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

/// Validates a comparison before anything runs: `sides` as typed ("NAME [ARGS...]", A
/// first), each found in `suite`, `rounds` per side.
pub fn prepare(
    config: BenchConfig,
    suite: &[ImplementationSpec],
    sides: &[String],
    rounds: usize,
) -> Result<PreparedCompare, InputError> {
    if rounds < MIN_ROUNDS {
        // Two rounds give one degree of freedom: Student's t at 99.9 % is 636.6, and the
        // interval spans from nothing to absurd (it once printed 565963 ± 64739650 req/s).
        let why = if rounds < 2 {
            "one round has no spread to make an interval of".to_owned()
        } else {
            format!(
                "with {rounds} rounds a 99.9 % interval is ±{:.0} standard errors wide, no use for a verdict",
                stats::t_critical(rounds as f64 - 1.0)
            )
        };
        return Err(InputError(format!(
            "--rounds {rounds}: {why}; give at least {MIN_ROUNDS} (±{:.1}), better 5, the default (±{:.1}), or 10 (±{:.1})",
            stats::t_critical(MIN_ROUNDS as f64 - 1.0),
            stats::t_critical(4.0),
            stats::t_critical(9.0),
        )));
    }
    let scenario = grpclab_core::Scenario::load(&config.scenario, None).map_err(|err| {
        InputError(format!(
            "GRPC_REQUEST_SCENARIO='{}': {err}",
            config.scenario
        ))
    })?;
    if sides.len() < 2 || sides.len() > MAX_SIDES {
        return Err(InputError(format!(
            "compare takes 2 to {MAX_SIDES} sides (A B [C ...]), got {}",
            sides.len()
        )));
    }
    let sides = sides
        .iter()
        .enumerate()
        .map(|(index, text)| Ok((text.clone(), side(text, suite, &label(index))?)))
        .collect::<Result<Vec<_>, InputError>>()?;
    Ok(PreparedCompare {
        sides,
        config,
        rounds,
        scenario,
    })
}

/// The comparison's result, as printed and written to `compare.json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CompareReport {
    /// A as given: the baseline.
    pub baseline: String,
    /// Rounds per side.
    pub rounds: usize,
    /// Every side after A against A, in the order given.
    pub comparisons: Vec<SideComparison>,
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
}

fn metric(results: &[ImplResult], pick: impl Fn(&crate::export::JsonReport) -> f64) -> Vec<f64> {
    results
        .iter()
        .filter_map(|r| r.load.as_ref())
        .map(pick)
        .collect()
}

fn percentile(report: &crate::export::JsonReport, p: f64) -> f64 {
    report.percentile(p).map_or(0.0, |latency| latency as f64)
}

/// Runs the rounds and compares. Every run's record is written as it finishes.
pub fn execute(
    prepared: PreparedCompare,
    cancel: &CancellationToken,
    progress: &mut dyn FnMut(&str),
    after_write: &dyn Fn(&std::path::Path) -> Result<(), InputError>,
) -> anyhow::Result<(CompareReport, std::path::PathBuf)> {
    let config = &prepared.config;
    let (dir, cores) =
        crate::bench::results_and_cores(config, &crate::bench::limits::available_cores())?;
    let tls = crate::bench::bench_tls(config, dir.path())?;
    let mut runs: Vec<Vec<ImplResult>> = vec![Vec::new(); prepared.sides.len()];
    for round in 1..=prepared.rounds {
        for (index, (text, spec)) in prepared.sides.iter().enumerate() {
            if cancel.is_cancelled() {
                anyhow::bail!(
                    "interrupted (Ctrl-C) in round {round}; the finished runs are in {}",
                    dir.path().display()
                );
            }
            let mut prefixed =
                |line: &str| progress(&format!("[round {round}/{}] {line}", prepared.rounds));
            let scenario_dir = crate::bench::build::scenario_dir(&config.scenario, dir.path())
                .map_err(|err| {
                    anyhow::anyhow!(
                        "cannot write the scenario's files into {}: {err}",
                        dir.path().display()
                    )
                })?;
            let mut context = RunContext {
                config,
                scenario: &prepared.scenario,
                scenario_dir,
                cores: &cores,
                cancel,
                progress: &mut prefixed,
                snapshots: None,
                cpu_profile_dir: None,
                cpu_call_graph: Default::default(),
                alloc_profile_dir: None,
                tls: tls.as_ref(),
            };
            let mut spec = spec.clone();
            spec.name = format!("{}-{round}", label(index).to_lowercase());
            let result = run_one(&spec, &mut context);
            dir.write_result(&result)?;
            if result.status != RowStatus::Ok {
                anyhow::bail!(
                    "{} ({text}) did not run in round {round}: {}; the runs so far are in {}",
                    label(index),
                    result.reason.as_deref().unwrap_or("unknown"),
                    dir.path().display()
                );
            }
            runs[index].push(result);
        }
    }
    let baseline = &runs[0];
    let comparisons = runs
        .iter()
        .enumerate()
        .skip(1)
        .map(|(index, side_runs)| SideComparison {
            label: label(index),
            side: prepared.sides[index].0.clone(),
            rps: compare(
                &metric(baseline, |r| r.measured_rps),
                &metric(side_runs, |r| r.measured_rps),
                Better::Higher,
            ),
            p50_ns: compare(
                &metric(baseline, |r| percentile(r, 50.0)),
                &metric(side_runs, |r| percentile(r, 50.0)),
                Better::Lower,
            ),
            p99_ns: compare(
                &metric(baseline, |r| percentile(r, 99.0)),
                &metric(side_runs, |r| percentile(r, 99.0)),
                Better::Lower,
            ),
        })
        .collect();
    let report = CompareReport {
        baseline: prepared.sides[0].0.clone(),
        rounds: prepared.rounds,
        comparisons,
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

/// The comparison as a text table: per metric, A's mean and then each other side's, with
/// its ratio to A.
pub fn render(report: &CompareReport) -> String {
    let mut out = format!("A: {}\n", report.baseline);
    for side in &report.comparisons {
        out.push_str(&format!("{}: {}\n", side.label, side.side));
    }
    out.push_str(&format!(
        "{} rounds each, interleaved; means with 99.9 % confidence intervals; ratios to A\n",
        report.rounds
    ));
    if report.rounds < 5 {
        out.push_str(&format!(
            "NOTE: with {} rounds each interval is ±{:.1} standard errors wide; 5 rounds make it ±{:.1}, 10 ±{:.1}: only large differences can be called\n",
            report.rounds,
            stats::t_critical(report.rounds as f64 - 1.0),
            stats::t_critical(4.0),
            stats::t_critical(9.0)
        ));
    }
    out.push('\n');
    out.push_str(&format!(
        "{:<8} {:<5} {:>26} {:>24}  {}\n",
        "metric", "side", "mean", "ratio to A [99.9 % CI]", "verdict"
    ));
    type Pick = fn(&SideComparison) -> &Comparison;
    let metrics: [(&str, Pick, f64, &str); 3] = [
        ("req/s", |c| &c.rps, 1.0, ""),
        ("p50", |c| &c.p50_ns, 1e6, "ms"),
        ("p99", |c| &c.p99_ns, 1e6, "ms"),
    ];
    let mean = |summary: &stats::Summary, scale: f64, unit: &str| {
        format!(
            "{:.2} ± {:.2} {unit}",
            summary.mean / scale,
            summary.ci_half_width / scale
        )
    };
    for (name, pick, scale, unit) in metrics {
        let Some(first) = report.comparisons.first() else {
            continue;
        };
        out.push_str(&format!(
            "{:<8} {:<5} {:>26}\n",
            name,
            "A",
            mean(&pick(first).a, scale, unit)
        ));
        for side in &report.comparisons {
            let c = pick(side);
            let verdict = match c.verdict {
                stats::Verdict::Faster => format!("{} better", side.label),
                stats::Verdict::Slower => format!("{} worse", side.label),
                stats::Verdict::NoSignificantDifference => "no significant difference".to_owned(),
            };
            out.push_str(&format!(
                "{:<8} {:<5} {:>26} {:>24}  {}\n",
                "",
                side.label,
                mean(&c.b, scale, unit),
                format!(
                    "{} [{}, {}]",
                    stats::ratio_text(c.ratio),
                    stats::ratio_text(c.ratio_low),
                    stats::ratio_text(c.ratio_high)
                ),
                verdict
            ));
        }
    }
    out
}
