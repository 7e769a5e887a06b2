//! `grpclab capacity`'s arguments, resolved into a search and run against the server: each
//! probe is a `load` run (the same engine and settings) at one open-loop rate.

use std::process::ExitCode;

use super::session::Session;
use std::io::Write;
use std::time::Duration;

use grpclab_load::{CancellationToken, LoadConfig};

use super::args::{CapacityArgs, OutputFormat, ScheduleShape};
use crate::InputError;
use grpclab_harness::bench::sampler::read_process;
use grpclab_harness::capacity::search::SearchPlan;
use grpclab_harness::capacity::{CapacityReport, CapacitySettings};
use grpclab_results::verdict::Threshold;

/// A validated search, ready to run.
pub struct PreparedCapacity {
    settings: CapacitySettings,
    config: LoadConfig,
    server_pid: Option<u32>,
    format: OutputFormat,
    output: Option<std::path::PathBuf>,
}

/// The warm-up before each probe when --warmup is not given: long enough for connections,
/// caches and a JIT's first pass, short beside a probe.
const DEFAULT_WARMUP: Duration = Duration::from_secs(1);

/// `grpclab capacity`: prepares, runs the search and says how it ended (the report is
/// written whatever the end).
pub fn run(args: &CapacityArgs) -> anyhow::Result<ExitCode> {
    let prepared = prepare(args)?;
    let session = Session::start(None, None)?;
    let report = execute(prepared, &session.cancel)?;
    // The report is written; the exit code and one line say how the search ended.
    if let Some(error) = &report.error {
        let _ = writeln!(
            std::io::stderr(),
            "grpclab: the search stopped early: {error}"
        );
        // Before any probe ran, the cause is the input (an unreachable server, a
        // method it lacks); after, the run broke down.
        return Ok(ExitCode::from(if report.probes.is_empty() {
            crate::EXIT_INPUT
        } else {
            crate::EXIT_FAILURE
        }));
    }
    if report.capacity_rps.is_none() {
        let _ = writeln!(
            std::io::stderr(),
            "grpclab: no rate tried met the SLO ({})",
            report.stopped_because
        );
        return Ok(ExitCode::from(grpclab_results::verdict::EXIT_THRESHOLD));
    }
    if report.client_bound {
        let _ = writeln!(
            std::io::stderr(),
            "grpclab: NOTE: the client's limit ended the search; the server's capacity is higher than reported"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Validates the flags. Every error is an [`InputError`].
pub fn prepare(args: &CapacityArgs) -> Result<PreparedCapacity, InputError> {
    let load = &args.load;
    let refuse = |flag: &str, why: &str| Err(InputError(format!("capacity {flag}: {why}")));
    if load.rps > 0.0 {
        return refuse(
            "--rps",
            "the search chooses the rates; give --start-rps and --max-rps to bound it",
        );
    }
    if load.duration.is_some() || load.total.is_some() {
        return refuse(
            "-z/-n",
            "each probe's length follows the SLO; bound it with --probe-min and --probe-max",
        );
    }
    if load.load_schedule != ScheduleShape::Const
        || load.concurrency_schedule != ScheduleShape::Const
    {
        return refuse(
            "--load-schedule/--concurrency-schedule",
            "a probe holds one rate; the search moves it",
        );
    }
    if !load.thresholds.is_empty() {
        return refuse("--threshold", "give the service level as --slo");
    }
    if load.config.is_some() {
        return refuse(
            "--config",
            "not read by capacity; give the settings as flags",
        );
    }
    if !matches!(
        load.format,
        OutputFormat::Summary | OutputFormat::Json | OutputFormat::Pretty
    ) {
        return refuse("-O", "capacity writes summary or json");
    }
    if args.probe_min > args.probe_max {
        return refuse("--probe-min", "is longer than --probe-max");
    }
    if let Some(start) = args.start_rps {
        if start > args.max_rps {
            return refuse("--start-rps", "is above --max-rps");
        }
    }
    if let Some(pid) = args.server_pid {
        if read_process(pid).is_none() {
            return Err(InputError(format!(
                "capacity --server-pid {pid}: no such process; give the server's pid (e.g. from `pgrep -f 'grpclab serve'`) or leave it out"
            )));
        }
    }
    let slo = args
        .slo
        .iter()
        .map(|text| {
            let threshold = Threshold::parse(text)
                .map_err(|err| InputError(err.0.replacen("--threshold", "--slo", 1)))?;
            if threshold.is_throughput() {
                return Err(InputError(format!(
                    "--slo '{text}': the throughput is what capacity finds, not a service level; give latency or errors, e.g. 'p99<=10ms'"
                )));
            }
            Ok(threshold)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let prepared = super::load::prepare(load)?;
    let mut slo = slo;
    let owned_names = super::load::mix_names(&prepared.config);
    let names: Vec<&str> = owned_names.iter().map(String::as_str).collect();
    for threshold in &mut slo {
        threshold.resolve_method(&names, "--slo")?;
    }
    let mut config = prepared.config;
    config.details = None;
    config.live_latency = false;
    let warmup = if load.warmup.is_zero() {
        DEFAULT_WARMUP
    } else {
        load.warmup
    };
    let settings = CapacitySettings {
        target: load.target.clone(),
        slo,
        plan: SearchPlan {
            start: args.start_rps.unwrap_or(0.0),
            max: args.max_rps,
            floor: 1.0,
            growth: 2.0,
            precision: args.precision,
            max_probes: args.max_probes,
        },
        min_probe: args.probe_min,
        max_probe: args.probe_max,
        warmup,
        concurrency: config.concurrency,
        method_shares: method_shares(&config),
    };
    Ok(PreparedCapacity {
        settings,
        config,
        server_pid: args.server_pid,
        format: load.format,
        output: load.output.clone(),
    })
}

/// Runs the search, a line per probe on stderr, and writes the report (also when a probe
/// failed: what was learned is kept).
pub fn execute(
    prepared: PreparedCapacity,
    cancel: &CancellationToken,
) -> anyhow::Result<CapacityReport> {
    let base = prepared.config;
    let server_pid = prepared.server_pid;
    let mut measure = |rate: Option<f64>, window: Duration, warmup: Duration| {
        grpclab_harness::bench::runner::capacity_probe(&base, rate, window, warmup, cancel, &|| {
            server_pid.and_then(read_process)
        })
    };
    let mut progress = |line: &str| {
        let _ = writeln!(std::io::stderr(), "{line}");
    };
    let report =
        grpclab_harness::capacity::run(&prepared.settings, &mut measure, &mut progress, cancel);
    let bytes = match prepared.format {
        OutputFormat::Json => serde_json::to_vec(&report)?,
        OutputFormat::Pretty => serde_json::to_vec_pretty(&report)?,
        _ => grpclab_harness::capacity::render(&report).into_bytes(),
    };
    match &prepared.output {
        Some(path) => {
            if let Err(err) = std::fs::write(path, &bytes) {
                // The search's results are never lost: standard output gets them.
                let _ = std::io::stdout().write_all(&bytes);
                anyhow::bail!(
                    "cannot write {}: {err}; the report went to standard output",
                    path.display()
                );
            }
        }
        None => {
            let _ = std::io::stdout().write_all(&bytes);
        }
    }
    Ok(report)
}

/// A mix's methods with their share of its calls, by weight (none for one method).
fn method_shares(config: &grpclab_load::LoadConfig) -> Vec<(String, f64)> {
    if config.methods.len() < 2 {
        return Vec::new();
    }
    let total: f64 = config.methods.iter().map(|m| f64::from(m.weight)).sum();
    config
        .methods
        .iter()
        .map(|m| (m.name.clone(), f64::from(m.weight) / total))
        .collect()
}
