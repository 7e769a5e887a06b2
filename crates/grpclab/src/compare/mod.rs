//! `grpclab compare A B`: did my change help? Runs A and B interleaved (A B A B ...) for
//! `--rounds` rounds, so drift on a noisy machine hits both, each round a full bench run
//! (server under limits, warmup, window); then per metric (req/s, p50, p99) each side's mean
//! with its 99.9 % interval, the ratio B/A with its interval, and a verdict.
//!
//! A and B name an implementation of the suite (the built-in servers by default) followed by
//! extra arguments for its start command: `"lab --decode inline"` vs `"lab --decode pool"`.

pub mod stats;

use grpclab_load::CancellationToken;
use serde::Serialize;

use crate::bench::config::BenchConfig;
use crate::bench::limits;
use crate::bench::results::ResultsDir;
use crate::bench::runner::{run_one, ImplResult, RowStatus, RunContext};
use crate::bench::suite::{self, shell_quote, ImplementationSpec};
use crate::cli::CompareArgs;
use crate::InputError;
use stats::{compare, Better, Comparison};

/// A validated comparison.
pub struct PreparedCompare {
    config: BenchConfig,
    a: (String, ImplementationSpec),
    b: (String, ImplementationSpec),
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

/// Validates the arguments before anything runs.
pub fn prepare(args: &CompareArgs) -> Result<PreparedCompare, InputError> {
    let config = BenchConfig::from_args(&args.settings)?;
    if args.rounds < 2 {
        return Err(InputError(
            "--rounds must be at least 2: an interval needs two samples per side".to_owned(),
        ));
    }
    let scenario = grpclab_core::Scenario::load(&config.scenario, None).map_err(|err| {
        InputError(format!(
            "GRPC_REQUEST_SCENARIO='{}': {err}",
            config.scenario
        ))
    })?;
    let suite = crate::bench::suite_of(&args.settings)?;
    Ok(PreparedCompare {
        a: (args.a.clone(), side(&args.a, &suite, "A")?),
        b: (args.b.clone(), side(&args.b, &suite, "B")?),
        config,
        rounds: args.rounds,
        scenario,
    })
}

/// The comparison's result, as printed and written to `compare.json`.
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    /// A as given.
    pub a: String,
    /// B as given.
    pub b: String,
    /// Rounds per side.
    pub rounds: usize,
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
    report
        .latency_distribution
        .iter()
        .find(|point| point.percentage == p)
        .map_or(0.0, |point| point.latency as f64)
}

/// Runs the rounds and compares. Every run's record is written as it finishes.
pub fn execute(
    prepared: PreparedCompare,
    cancel: &CancellationToken,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<(CompareReport, std::path::PathBuf)> {
    let config = &prepared.config;
    let dir = ResultsDir::create(&config.results_dir).map_err(|err| {
        InputError(format!(
            "cannot create a results folder under {}: {err}",
            config.results_dir.display()
        ))
    })?;
    let cores = limits::plan_cores(
        &limits::available_cores(),
        config.server_threads(),
        config.client_cpus,
    );
    let mut runs: [Vec<ImplResult>; 2] = [Vec::new(), Vec::new()];
    for round in 1..=prepared.rounds {
        for (index, (label, spec)) in [&prepared.a, &prepared.b].into_iter().enumerate() {
            if cancel.is_cancelled() {
                anyhow::bail!(
                    "interrupted (Ctrl-C) in round {round}; the finished runs are in {}",
                    dir.path().display()
                );
            }
            let mut prefixed =
                |line: &str| progress(&format!("[round {round}/{}] {line}", prepared.rounds));
            let mut context = RunContext {
                config,
                scenario: &prepared.scenario,
                cores: &cores,
                cancel,
                progress: &mut prefixed,
                cpu_profile_dir: None,
                alloc_profile_dir: None,
            };
            let mut spec = spec.clone();
            spec.name = format!("{}-{round}", ["a", "b"][index]);
            let result = run_one(&spec, &mut context);
            dir.write_result(&result)?;
            if result.status == RowStatus::Failed {
                anyhow::bail!(
                    "{label} failed in round {round}: {}; the runs so far are in {}",
                    result.reason.as_deref().unwrap_or("unknown"),
                    dir.path().display()
                );
            }
            runs[index].push(result);
        }
    }
    let [a_runs, b_runs] = &runs;
    let report = CompareReport {
        a: prepared.a.0.clone(),
        b: prepared.b.0.clone(),
        rounds: prepared.rounds,
        rps: compare(
            &metric(a_runs, |r| r.rps),
            &metric(b_runs, |r| r.rps),
            Better::Higher,
        ),
        p50_ns: compare(
            &metric(a_runs, |r| percentile(r, 50.0)),
            &metric(b_runs, |r| percentile(r, 50.0)),
            Better::Lower,
        ),
        p99_ns: compare(
            &metric(a_runs, |r| percentile(r, 99.0)),
            &metric(b_runs, |r| percentile(r, 99.0)),
            Better::Lower,
        ),
    };
    std::fs::write(
        dir.path().join("compare.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    std::fs::write(dir.path().join("compare.txt"), render(&report))?;
    Ok((report, dir.path().to_path_buf()))
}

/// The comparison as a text table.
pub fn render(report: &CompareReport) -> String {
    let mut out = format!(
        "A: {}\nB: {}\n{} rounds each, interleaved; means with 99.9 % confidence intervals\n\n",
        report.a, report.b, report.rounds
    );
    out.push_str(&format!(
        "{:<8} {:>26} {:>26} {:>24}  {}\n",
        "metric", "A", "B", "B/A [99.9 % CI]", "verdict"
    ));
    let row = |name: &str, c: &Comparison, scale: f64, unit: &str| {
        let verdict = match c.verdict {
            stats::Verdict::Faster => "B better",
            stats::Verdict::Slower => "B worse",
            stats::Verdict::NoSignificantDifference => "no significant difference",
        };
        format!(
            "{:<8} {:>26} {:>26} {:>24}  {}\n",
            name,
            format!(
                "{:.2} ± {:.2} {unit}",
                c.a.mean / scale,
                c.a.ci_half_width / scale
            ),
            format!(
                "{:.2} ± {:.2} {unit}",
                c.b.mean / scale,
                c.b.ci_half_width / scale
            ),
            format!("{:.3} [{:.3}, {:.3}]", c.ratio, c.ratio_low, c.ratio_high),
            verdict
        )
    };
    out.push_str(&row("req/s", &report.rps, 1.0, ""));
    out.push_str(&row("p50", &report.p50_ns, 1e6, "ms"));
    out.push_str(&row("p99", &report.p99_ns, 1e6, "ms"));
    out
}
