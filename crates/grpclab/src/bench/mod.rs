//! `grpclab bench`: grpc_bench's harness on one binary, without Docker.
//!
//! - [`config`]: grpc_bench's environment variables (each also a flag), validated.
//! - [`suite`]: which implementations, and how to build and start them (TOML, or the built-in
//!   servers).
//! - [`limits`]: cgroups (v2 or v1) and CPU affinity, read back from the kernel.
//! - [`process`]: a server as a child in its own process group; stop with SIGTERM, then SIGKILL.
//! - [`sampler`]: CPU and memory of the server's process group, once a second.
//! - [`runner`]: one implementation from build to stop, every failure a FAILED row.
//! - [`results`]: the results folder and the grpc_bench table.
//!
//! The runner measures and reports progress through a callback; `execute` prints.

pub mod config;
pub mod limits;
pub mod process;
pub mod results;
pub mod runner;
pub mod sampler;
pub mod suite;

use grpclab_core::Scenario;
use grpclab_load::CancellationToken;

use crate::cli::BenchArgs;
use crate::InputError;
use config::BenchConfig;
use results::ResultsDir;
use runner::{run_one, ImplResult, RowStatus, RunContext};
use suite::ImplementationSpec;

/// A validated bench run.
pub struct PreparedBench {
    /// Settings.
    pub config: BenchConfig,
    /// The implementations, in order.
    pub implementations: Vec<ImplementationSpec>,
    /// The scenario.
    pub scenario: Scenario,
}

/// Validates everything before any server starts.
pub fn prepare(args: &BenchArgs) -> Result<PreparedBench, InputError> {
    let config = BenchConfig::from_args(&args.settings)?;
    let scenario = Scenario::load(&config.scenario, None).map_err(|err| {
        InputError(format!(
            "GRPC_REQUEST_SCENARIO='{}': {err}",
            config.scenario
        ))
    })?;
    let suite = suite_of(&args.settings)?;
    let implementations = suite::select(suite, &args.implementations)?;
    Ok(PreparedBench {
        config,
        implementations,
        scenario,
    })
}

/// The suite the settings name (`--suite`), or the built-in servers.
pub fn suite_of(
    settings: &crate::cli::BenchSettings,
) -> Result<Vec<ImplementationSpec>, InputError> {
    match &settings.suite {
        Some(path) => suite::load_suite(path),
        None => {
            let exe = std::env::current_exe()
                .map_err(|err| InputError(format!("cannot find this program's path: {err}")))?;
            Ok(suite::builtin_suite(&exe))
        }
    }
}

/// What a finished bench run produced.
pub struct BenchOutcome {
    /// One result per implementation that ran.
    pub results: Vec<ImplResult>,
    /// The results folder.
    pub dir: std::path::PathBuf,
    /// The table as text.
    pub table: String,
}

impl BenchOutcome {
    /// Whether any implementation failed.
    pub fn any_failed(&self) -> bool {
        self.results.iter().any(|r| r.status == RowStatus::Failed)
    }
}

/// Runs every implementation in turn, writing results after each; `progress` receives one
/// line per phase.
pub fn execute(
    prepared: PreparedBench,
    cancel: &CancellationToken,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<BenchOutcome> {
    let config = &prepared.config;
    let dir = ResultsDir::create(&config.results_dir).map_err(|err| {
        InputError(format!(
            "cannot create a results folder under {}: {err}",
            config.results_dir.display()
        ))
    })?;
    let available = limits::available_cores();
    let cores = limits::plan_cores(&available, config.server_threads(), config.client_cpus);
    let mut footer = Vec::new();
    if let Some(warning) = &cores.oversubscribed {
        footer.push(format!("WARNING: {warning}"));
        progress(&format!("WARNING: {warning}"));
    }
    dir.write_params(&params(config, &cores, &footer))?;
    let mut results: Vec<ImplResult> = Vec::new();
    let total = prepared.implementations.len();
    for (index, spec) in prepared.implementations.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let mut prefixed = |line: &str| progress(&format!("[{}/{total}] {line}", index + 1));
        let mut context = RunContext {
            config,
            scenario: &prepared.scenario,
            cores: &cores,
            cancel,
            progress: &mut prefixed,
        };
        let result = run_one(spec, &mut context);
        let summary = match (&result.status, &result.load) {
            (RowStatus::Ok, Some(load)) => format!(
                "{}: {:.0} req/s, {} errors",
                result.name, load.rps, load.errors
            ),
            _ => format!(
                "{}: FAILED: {}",
                result.name,
                result.reason.as_deref().unwrap_or("")
            ),
        };
        prefixed(&summary);
        dir.write_result(&result)?;
        results.push(result);
        let notes = footer_with_limits(&footer, &results);
        dir.write_tables(&results, &notes)?;
    }
    let notes = footer_with_limits(&footer, &results);
    Ok(BenchOutcome {
        table: results::render_text(&results, &notes),
        dir: dir.path().to_path_buf(),
        results,
    })
}

/// The footer: warnings, and where limits fell back to affinity only.
fn footer_with_limits(footer: &[String], results: &[ImplResult]) -> Vec<String> {
    let mut lines = footer.to_vec();
    if let Some(note) = results.iter().find_map(|r| r.limits.note.clone()) {
        lines.push(format!("NOTE: {note}"));
    } else if let Some(mechanism) = results.first().map(|r| r.limits.mechanism.clone()) {
        lines.push(format!("limits: {mechanism}"));
    }
    lines
}

fn params(
    config: &BenchConfig,
    cores: &limits::CorePlan,
    warnings: &[String],
) -> Vec<(String, String)> {
    let mut lines: Vec<(String, String)> = config
        .as_variables()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpu_model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    lines.extend([
        (
            "GRPCLAB_VERSION".to_owned(),
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
        (
            "GRPCLAB_GIT_COMMIT".to_owned(),
            option_env!("GRPCLAB_GIT_COMMIT")
                .unwrap_or("unknown")
                .to_owned(),
        ),
        ("MACHINE_CPU_MODEL".to_owned(), cpu_model),
        (
            "MACHINE_CORES".to_owned(),
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .to_string(),
        ),
        (
            "MACHINE_KERNEL".to_owned(),
            read("/proc/sys/kernel/osrelease").trim().to_owned(),
        ),
        ("SERVER_CORES".to_owned(), limits::core_list(&cores.server)),
        ("CLIENT_CORES".to_owned(), limits::core_list(&cores.client)),
    ]);
    for warning in warnings {
        lines.push(("WARNING".to_owned(), warning.clone()));
    }
    lines
}
