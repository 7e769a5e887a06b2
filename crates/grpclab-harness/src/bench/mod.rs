//! `grpclab bench`: grpc_bench's harness on one binary, without Docker.
//!
//! - [`config`]: grpc_bench's environment variables (each also a flag), validated.
//! - [`suite`]: which implementations, and how to build and start them (TOML, or the built-in
//!   servers).
//! - [`limits`]: cgroups (v2 or v1) and CPU affinity, read back from the kernel.
//! - [`process`]: a server as a child in its own process group; stop with SIGTERM, then SIGKILL.
//! - [`sampler`]: CPU and memory of the server's process group, once a second.
//! - [`profile`]: `--profile cpu`: perf samples of the server, a flamegraph and top functions.
//! - [`alloc_profile`]: `--profile alloc`: the server's top allocation sites (dhat).
//! - [`ghz_client`]: `--client ghz`: a row's window driven by ghz, as grpc_bench drives it.
//! - `monitor`: the watch over a row's server during its window (counters, sampler, profiles).
//! - `readiness`: a free port, the wait until a server answers, its counters, its liveness.
//! - `window`: a row's measured window as its client (grpclab's engine or ghz) gave it.
//! - [`runner`]: one implementation from build to stop, every failure a FAILED row.
//! - [`results`]: the results folder and the grpc_bench table.
//! - [`sweep`]: `--sweep KEY=V1,V2`: every implementation at every combination.
//!
//! The runner measures and reports progress through a callback; `execute` prints.

pub mod admin;
pub mod alloc_profile;
pub mod build;
pub mod config;
pub mod ghz_client;
pub mod jfr;
pub mod limits;
mod monitor;
pub mod names;
pub mod process;
pub mod profile;
mod readiness;
pub mod results;
pub mod runner;
pub mod sampler;
pub mod suite;
pub mod sweep;
mod window;

use grpclab_core::Scenario;
use grpclab_load::CancellationToken;

use config::BenchConfig;
use grpclab_core::InputError;
use results::ResultsDir;
use runner::{run_one, ImplResult, RowStatus, RunContext};
use suite::ImplementationSpec;

/// A validated bench run.
pub struct PreparedBench {
    /// Settings.
    pub config: BenchConfig,
    /// The swept keys (none for a plain run).
    pub axes: Vec<sweep::Axis>,
    /// Every run, in order: each implementation at each combination of swept values.
    pub runs: Vec<PlannedRun>,
    /// `--profile cpu` / `cpu-dwarf`: sample each server with perf during its window, stacks
    /// walked this way.
    pub profile_cpu: Option<profile::CallGraph>,
    /// `--profile alloc`: record each built-in server's allocation sites during its window.
    pub profile_alloc: bool,
    /// `--threshold`s, judged on every row.
    pub thresholds: Vec<grpclab_results::verdict::Threshold>,
    /// `--capacity`: each row's capacity at this SLO, searched after its window.
    pub capacity: Option<runner::CapacityPlan>,
    /// What the sweep had to change to run as asked (shown before the runs and under the
    /// table).
    pub notes: Vec<String>,
}

/// One run of a bench: an implementation with its settings.
pub struct PlannedRun {
    /// The implementation's name in the suite.
    pub implementation: String,
    /// The swept settings of this run.
    pub settings: Vec<(String, String)>,
    /// Its start command and row name.
    pub spec: ImplementationSpec,
    /// Its settings.
    pub config: BenchConfig,
    /// Its scenario.
    pub scenario: Scenario,
    /// `--workload`: the mix it sends (empty: the scenario's payload).
    pub methods: Vec<grpclab_load::CallMethod>,
    /// `--workload`: its flows, their steps the last of `methods`.
    pub flows: Vec<grpclab_load::flow::FlowPlan>,
    /// The mix's seed, the same for every row.
    pub mix_seed: Option<u64>,
}

/// A workload's calls and flows against the scenario `scenario` (its proto names the
/// methods; each entry's data is encoded against it once): the plain calls, constant
/// payloads and metadata only, then each flow step's method (bound to the flow's variables,
/// as `load` binds them), and the flows.
fn mix_methods(
    scenario: &str,
    mix: &crate::workload::Mix,
) -> Result<
    (
        Vec<grpclab_load::CallMethod>,
        Vec<grpclab_load::flow::FlowPlan>,
    ),
    InputError,
> {
    let mut methods = mix_calls(scenario, mix)?;
    let mut flows = Vec::with_capacity(mix.flows.len());
    for flow in &mix.flows {
        let mut steps = Vec::with_capacity(flow.steps.len());
        for step in &flow.steps {
            let refuse = |why: String| {
                InputError(format!(
                    "{} line {}: step '{}': {}: {why}",
                    mix.source, step.line, step.name, step.call
                ))
            };
            let found = Scenario::load(scenario, Some(&step.call)).map_err(|err| {
                refuse(format!("not in GRPC_REQUEST_SCENARIO='{scenario}': {err}"))
            })?;
            steps.push(found);
        }
        flows.push((flow.clone(), steps));
    }
    let plans = crate::flow_plan::flow_plans(&flows, None, &mut methods, &mix.source)?;
    Ok((methods, plans))
}

/// A workload's plain calls (see [`mix_methods`]).
fn mix_calls(
    scenario: &str,
    mix: &crate::workload::Mix,
) -> Result<Vec<grpclab_load::CallMethod>, InputError> {
    mix.calls
        .iter()
        .map(|call| {
            let refuse = |why: String| InputError(format!("--workload: {}: {why}", call.call));
            let templated = call.data.as_deref().is_some_and(|d| d.contains("{{"))
                || call.metadata.values().any(|v| v.contains("{{"));
            if templated {
                return Err(refuse(
                    "bench sends constant payloads and metadata; templates ('{{') are load's"
                        .to_owned(),
                ));
            }
            let found = Scenario::load(scenario, Some(&call.call)).map_err(|err| {
                refuse(format!("not in GRPC_REQUEST_SCENARIO='{scenario}': {err}"))
            })?;
            let found = match &call.data {
                Some(data) => found
                    .with_payload(data)
                    .map_err(|err| refuse(err.to_string()))?,
                None => found,
            };
            let method = found.method();
            if method.is_client_streaming() || method.is_server_streaming() {
                return Err(refuse(
                    "it streams: a mix takes unary methods only".to_owned(),
                ));
            }
            let mut own = grpclab_load::CallMethod::new(&found.path(), found.requests().to_vec());
            own.name = call
                .name
                .clone()
                .unwrap_or_else(|| method.full_name().to_owned());
            own.weight = call.weight;
            own.retry.clone_from(&call.retry);
            own.hedging.clone_from(&call.hedging);
            own.metadata = crate::workload::metadata_headers(
                &format!("--workload: {}'s metadata", call.call),
                Some(&call.metadata),
            )?;
            Ok(own)
        })
        .collect()
}

/// What a bench is asked to run, already typed: the settings, the suite, which of its
/// implementations, the sweep axes as given (`KEY=V1,V2`) and what to profile.
pub struct BenchRequest<'a> {
    /// The settings (flags, environment, defaults).
    pub config: BenchConfig,
    /// The suite's implementations.
    pub suite: Vec<ImplementationSpec>,
    /// Which to run, by name (empty: all).
    pub implementations: &'a [String],
    /// `--sweep` axes, as typed.
    pub sweep: &'a [String],
    /// `--network` specs, as typed: one axis (`network`), a value each.
    pub networks: &'a [String],
    /// `--profile cpu|cpu-dwarf`: how stacks are walked, if profiling.
    pub profile_cpu: Option<profile::CallGraph>,
    /// `--profile alloc`.
    pub profile_alloc: bool,
    /// `--threshold`s, judged on every row.
    pub thresholds: Vec<grpclab_results::verdict::Threshold>,
    /// `--capacity`: the SLO each row's capacity is searched at.
    pub capacity: Option<runner::CapacityPlan>,
    /// `--workload`: a mix every row sends instead of its scenario's payload.
    pub workload: Option<crate::workload::Mix>,
}

/// Validates everything before any server starts.
pub fn prepare(request: BenchRequest<'_>) -> Result<PreparedBench, InputError> {
    let BenchRequest {
        config,
        suite,
        implementations,
        sweep,
        networks,
        profile_cpu,
        profile_alloc,
        thresholds,
        capacity,
        workload,
    } = request;
    // One seed for every row: each implementation gets the same calls of each entry.
    let mix_seed = workload
        .as_ref()
        .map(|mix| mix.seed.unwrap_or_else(crate::workload::random_seed));
    let load_scenario = |name: &str| {
        Scenario::load(name, None)
            .map_err(|err| InputError(format!("GRPC_REQUEST_SCENARIO='{name}': {err}")))
    };
    load_scenario(&config.scenario)?;
    let implementations = suite::select(suite, implementations)?;
    let mut axes = sweep
        .iter()
        .map(|text| sweep::parse_axis(text))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(axis) = network_axis(networks)? {
        axes.push(axis);
    }
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    // Combinations outside, implementations inside: drift over a long sweep hits every
    // implementation alike.
    for combination in sweep::combinations(&axes) {
        for spec in &implementations {
            let (run_config, run_spec, note) = sweep::apply(&config, spec, &combination)?;
            notes.extend(note);
            let scenario = load_scenario(&run_config.scenario)?;
            let method = scenario.method();
            if run_config.client != config::BenchClient::Grpclab
                && (method.is_client_streaming() || method.is_server_streaming())
            {
                return Err(InputError(format!(
                    "--client {}: GRPC_REQUEST_SCENARIO='{}' streams ({}); grpc_bench's client runs unary calls: pick a unary scenario or drop --client",
                    run_config.client.name(),
                    run_config.scenario,
                    method.full_name()
                )));
            }
            if run_config.protocol != grpclab_core::protocol::Protocol::Grpc {
                let protocol = run_config.protocol;
                let refusal = if run_config.client != config::BenchClient::Grpclab {
                    Some(format!(
                        "--client {} speaks gRPC only",
                        run_config.client.name()
                    ))
                } else if method.is_client_streaming() || method.is_server_streaming() {
                    Some(format!(
                        "GRPC_REQUEST_SCENARIO='{}' streams ({}), and bench runs gRPC-Web and Connect rows on unary scenarios so far (load --protocol calls server streams)",
                        run_config.scenario,
                        method.full_name()
                    ))
                } else {
                    workload
                        .is_some()
                        .then(|| "a --workload's calls go as gRPC so far".to_owned())
                };
                if let Some(why) = refusal {
                    return Err(InputError(format!("--sweep protocol={protocol}: {why}")));
                }
            }
            let (methods, flows) = match &workload {
                Some(mix) => mix_methods(&run_config.scenario, mix)?,
                None => (Vec::new(), Vec::new()),
            };
            if let Some(other) = runs.iter().find(|r: &&PlannedRun| {
                names::sanitize(&r.spec.name) == names::sanitize(&run_spec.name)
            }) {
                return Err(InputError(format!(
                    "the runs '{}' and '{}' would both write {}.json; give them names that differ in letters, digits, '-', '_' or '.'",
                    other.spec.name,
                    run_spec.name,
                    names::sanitize(&run_spec.name)
                )));
            }
            runs.push(PlannedRun {
                implementation: spec.name.clone(),
                settings: combination.clone(),
                spec: run_spec,
                config: run_config,
                scenario,
                methods,
                flows,
                mix_seed,
            });
        }
    }
    Ok(PreparedBench {
        config,
        axes,
        runs,
        profile_cpu,
        profile_alloc,
        thresholds,
        capacity,
        notes,
    })
}

/// `--network` flags as one sweep axis (`None` without any): each spec checked, and, when
/// one crosses a link, a namespace pair made and removed once, so a machine that cannot
/// (not root, no TUN devices) is told before any server starts.
fn network_axis(networks: &[String]) -> Result<Option<sweep::Axis>, InputError> {
    if networks.is_empty() {
        return Ok(None);
    }
    let mut values = Vec::with_capacity(networks.len());
    let mut probe = None;
    for text in networks {
        let spec = grpclab_net::NetworkSpec::parse(text).map_err(|err| InputError(err.0))?;
        if let grpclab_net::NetworkSpec::Link(link) = spec {
            probe.get_or_insert(link);
        }
        let value = spec.to_string();
        if values.contains(&value) {
            return Err(InputError(format!("--network '{text}' is given twice")));
        }
        values.push(value);
    }
    if let Some(link) = probe {
        grpclab_net::NetworkPair::up(link)
            .map_err(|err| InputError(err.0))?
            .down();
    }
    Ok(Some(sweep::Axis {
        key: "network".to_owned(),
        values,
    }))
}

/// The suite the settings name (`--suite`), or the built-in servers.
pub fn suite_of(path: Option<&std::path::Path>) -> Result<Vec<ImplementationSpec>, InputError> {
    match path {
        Some(path) => suite::load_suite(path),
        None => {
            let exe = std::env::current_exe()
                .map_err(|err| InputError(format!("cannot find this program's path: {err}")))?;
            Ok(suite::builtin_suite(&exe))
        }
    }
}

/// The TLS of a `--tls` run: the given pair, or a self-signed one made in `dir/tls/`, and a
/// client that trusts it as `localhost`. `None` without `--tls`. Shared by `bench` and
/// `compare`.
pub(crate) fn bench_tls(
    config: &BenchConfig,
    dir: &std::path::Path,
) -> Result<Option<runner::BenchTls>, InputError> {
    if !config.tls {
        return Ok(None);
    }
    let (cert, key) = match &config.tls_pair {
        Some(pair) => pair.clone(),
        None => {
            let tls_dir = dir.join("tls");
            std::fs::create_dir_all(&tls_dir)
                .map_err(|err| InputError(format!("cannot create {}: {err}", tls_dir.display())))?;
            let written = grpclab_core::tls::SelfSigned::for_loopback()
                .and_then(|pair| pair.write_to(&tls_dir))
                .map_err(|err| InputError(err.to_string()))?;
            (written.cert, written.key)
        }
    };
    let settings = grpclab_core::tls::ClientTls {
        ca_cert: Some(cert.clone()),
        server_name: Some("localhost".to_owned()),
        ..Default::default()
    };
    let client = grpclab_core::tls::TlsClient::new(&settings, "localhost")
        .map_err(|err| InputError(format!("--tls: {err}")))?;
    Ok(Some(runner::BenchTls { cert, key, client }))
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

/// Judges a measured row against every `--threshold` (a row that measured nothing has no
/// verdicts: it failed already).
fn judge_row(
    thresholds: &[grpclab_results::verdict::Threshold],
    result: &ImplResult,
) -> Vec<grpclab_results::verdict::ThresholdVerdict> {
    let Some(load) = result
        .load
        .as_ref()
        .filter(|_| result.status == RowStatus::Ok)
    else {
        return Vec::new();
    };
    // No successful call: an empty histogram, so latency thresholds fail as "no successful
    // call" (3 significant digits is always a valid histogram).
    let Some(latency) = load
        .latency_histogram()
        .or_else(|| hdrhistogram::Histogram::new(3).ok())
    else {
        return Vec::new();
    };
    // A workload's entries, for thresholds on one of them (an unreadable histogram reads as
    // no successful call).
    // A flow's steps are entries too, and as `step:NAME` (a failure: an error or an
    // unexpected reply); each flow is `flow:NAME` (a failure: a run that did not pass).
    let mut scopes: Vec<(String, &str, u64, u64, f64)> = Vec::new();
    if let Some(mix) = &load.mix {
        for entry in &mix.methods {
            scopes.push((
                entry.name.clone(),
                &entry.hdr_histogram,
                entry.count,
                entry.errors,
                entry.rps,
            ));
            if entry.flow.is_some() {
                let failures = entry.errors + entry.unexpected.unwrap_or(0);
                let name = format!("step:{}", entry.name);
                scopes.push((name, &entry.hdr_histogram, entry.count, failures, entry.rps));
            }
        }
        for flow in &mix.flows {
            let failures = flow.count.saturating_sub(flow.passed);
            let name = format!("flow:{}", flow.name);
            scopes.push((name, &flow.hdr_histogram, flow.count, failures, flow.rps));
        }
    }
    let latencies: Vec<hdrhistogram::Histogram<u64>> = scopes
        .iter()
        .map(|(_, histogram, ..)| {
            grpclab_load::decode_histogram(histogram)
                .unwrap_or_else(|_| hdrhistogram::Histogram::new_from(&latency))
        })
        .collect();
    let methods: Vec<grpclab_results::verdict::threshold::MethodFigures<'_>> = scopes
        .iter()
        .zip(&latencies)
        .map(|((name, _, count, failures, rps), latency)| {
            grpclab_results::verdict::threshold::MethodFigures::new(
                name, latency, *count, *failures, *rps,
            )
        })
        .collect();
    let figures = grpclab_results::verdict::threshold::RunFigures {
        latency: &latency,
        count: load.count,
        errors: load.errors,
        rps: load.measured_rps,
        methods: &methods,
    };
    thresholds.iter().map(|t| t.judge(&figures)).collect()
}

impl BenchOutcome {
    /// Whether a row failed a `--threshold`.
    pub fn thresholds_failed(&self) -> Vec<String> {
        self.results
            .iter()
            .flat_map(|r| {
                r.thresholds
                    .iter()
                    .filter(|v| !v.passed)
                    .map(move |v| format!("{} {} ({})", r.name, v.expression, v.actual))
            })
            .collect()
    }

    /// Whether any implementation failed.
    pub fn any_failed(&self) -> bool {
        self.results.iter().any(|r| r.status == RowStatus::Failed)
    }
}

/// The run's results folder (created now, so a bad path fails before anything starts) and
/// which of the `available` cores the servers and the client get. Shared by `bench` and
/// `compare`.
pub(crate) fn results_and_cores(
    config: &BenchConfig,
    available: &[usize],
) -> Result<(ResultsDir, limits::CorePlan), InputError> {
    let dir = ResultsDir::create(&config.results_dir).map_err(|err| {
        InputError(format!(
            "cannot create a results folder under {}: {err}",
            config.results_dir.display()
        ))
    })?;
    let cores = limits::plan_cores(available, config.server_threads(), config.client_cpus);
    Ok((dir, cores))
}

/// Receives the running row's name and its load's progress.
pub type SnapshotHook<'a> = &'a mut dyn FnMut(&str, &grpclab_load::ProgressSnapshot);

/// Receives a row just written into the results folder, with the folder's settings.
pub type RowHook<'a> = &'a mut dyn FnMut(&std::path::Path, &[(String, String)], &ImplResult);

/// What the caller sees of a bench run as it goes (measuring never renders nor stores: the
/// caller does, from what these hand it).
pub struct BenchHooks<'a> {
    /// One line per phase.
    pub progress: &'a mut dyn FnMut(&str),
    /// The running row's name and its load's progress, ten times a second.
    pub snapshots: Option<SnapshotHook<'a>>,
    /// A row was measured and its record written into the folder, with the folder's
    /// settings (`bench.params`): e.g. store it in the history.
    pub row_written: RowHook<'a>,
    /// The folder's tables were (re)written: render its pages.
    pub after_write: &'a dyn Fn(&std::path::Path) -> Result<(), InputError>,
}

/// Runs every implementation in turn, writing results after each, and tells `hooks` as it
/// goes.
pub fn execute(
    prepared: PreparedBench,
    cancel: &CancellationToken,
    hooks: BenchHooks<'_>,
) -> Result<BenchOutcome, crate::HarnessError> {
    let BenchHooks {
        progress,
        mut snapshots,
        row_written,
        after_write,
    } = hooks;
    let config = &prepared.config;
    let available = limits::available_cores();
    let (dir, cores) = results_and_cores(config, &available)?;
    let mut footer = Vec::new();
    if let Some(warning) = &cores.oversubscribed {
        footer.push(format!("WARNING: {warning}"));
        progress(&format!("WARNING: {warning}"));
    }
    for note in &prepared.notes {
        footer.push(format!("NOTE: {note}"));
        progress(&format!("NOTE: {note}"));
    }
    let tls = bench_tls(config, dir.path())?;
    let mut params = params(config, &cores, &footer);
    for axis in &prepared.axes {
        params.push((
            "SWEEP".to_owned(),
            format!("{}={}", axis.key, axis.values.join(",")),
        ));
    }
    if let Some(run) = prepared.runs.first().filter(|run| !run.methods.is_empty()) {
        // A mix shapes the figures: stored runs are set only against runs of the same mix.
        let entries: Vec<String> = run
            .methods
            .iter()
            .map(|method| {
                let bytes: usize = method.requests.iter().map(|r| r.len()).sum();
                format!(
                    "{}={} ({}, {bytes} B)",
                    method.name, method.weight, method.path
                )
            })
            .collect();
        params.push((
            "GRPCLAB_WORKLOAD".to_owned(),
            format!(
                "seed {}: {}",
                run.mix_seed.unwrap_or_default(),
                entries.join(", ")
            ),
        ));
    }
    dir.write_params(&params)?;
    let mut results: Vec<ImplResult> = Vec::new();
    let mut cells = Vec::new();
    let total = prepared.runs.len();
    for (index, run) in prepared.runs.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let mut prefixed = |line: &str| progress(&format!("[{}/{total}] {line}", index + 1));
        let run_cores = limits::plan_cores(
            &available,
            run.config.server_threads(),
            run.config.client_cpus,
        );
        let scenario_dir = match build::scenario_dir(&run.config.scenario, dir.path()) {
            Ok(path) => path,
            Err(err) => {
                return Err(crate::HarnessError::Failed(format!(
                    "cannot write the scenario's files into {}: {err}",
                    dir.path().display()
                )))
            }
        };
        // The row's name with each snapshot (live metrics label by row).
        let row_name = run.spec.name.clone();
        let mut row_snapshots = snapshots
            .as_mut()
            .map(|show| move |snapshot: &grpclab_load::ProgressSnapshot| show(&row_name, snapshot));
        let mut context = RunContext {
            config: &run.config,
            scenario: &run.scenario,
            methods: &run.methods,
            flows: &run.flows,
            mix_seed: run.mix_seed,
            scenario_dir,
            results_dir: dir.path().to_path_buf(),
            cores: &run_cores,
            cancel,
            progress: &mut prefixed,
            snapshots: row_snapshots
                .as_mut()
                .map(|show| show as &mut dyn FnMut(&grpclab_load::ProgressSnapshot)),
            cpu_profile_dir: prepared.profile_cpu.map(|_| dir.path().to_path_buf()),
            cpu_call_graph: prepared.profile_cpu.unwrap_or_default(),
            alloc_profile_dir: prepared.profile_alloc.then(|| dir.path().to_path_buf()),
            tls: tls.as_ref(),
            capacity: prepared.capacity.as_ref(),
        };
        let mut result = run_one(&run.spec, &mut context);
        result.thresholds = judge_row(&prepared.thresholds, &result);
        for verdict in result.thresholds.iter().filter(|v| !v.passed) {
            prefixed(&format!(
                "{}: threshold {} FAILED ({})",
                result.name, verdict.expression, verdict.actual
            ));
        }
        let summary = match (&result.status, &result.load) {
            (RowStatus::Ok, Some(load)) => format!(
                "{}: {:.0} req/s, {} errors",
                result.name, load.measured_rps, load.errors
            ),
            (status, _) => format!(
                "{}: {}: {}",
                result.name,
                runner::status_word(*status),
                result.reason.as_deref().unwrap_or("")
            ),
        };
        prefixed(&summary);
        dir.write_result(&result)?;
        row_written(dir.path(), &params, &result);
        if !prepared.axes.is_empty() {
            cells.push(sweep::SweepCell::of(
                &run.implementation,
                &run.settings,
                &result,
            ));
            let matrix = serde_json::json!({ "axes": prepared.axes, "cells": cells });
            std::fs::write(
                dir.path().join("sweep.json"),
                serde_json::to_vec_pretty(&matrix)?,
            )?;
            std::fs::write(
                dir.path().join("sweep.md"),
                sweep::render_markdown(&prepared.axes, &cells),
            )?;
        }
        results.push(result);
        let notes = footer_with_limits(&footer, &results);
        dir.write_tables(&results, &notes)?;
        // A page that cannot be written costs the run nothing but the page.
        if let Err(err) = after_write(dir.path()) {
            progress(&format!("WARNING: no report page: {err}"));
        }
    }
    let notes = footer_with_limits(&footer, &results);
    Ok(BenchOutcome {
        table: results::render_text(&results, &notes),
        dir: dir.path().to_path_buf(),
        results,
    })
}

/// The footer: warnings, and where limits fell back to affinity only. The mechanism comes
/// from the first row that got as far as applying limits (a row that failed before, e.g. in
/// its build, has none).
fn footer_with_limits(footer: &[String], results: &[ImplResult]) -> Vec<String> {
    let mut lines = footer.to_vec();
    if let Some(note) = results.iter().find_map(|r| r.limits.note.clone()) {
        lines.push(format!("NOTE: {note}"));
    } else if let Some(mechanism) = results
        .iter()
        .map(|r| r.limits.mechanism.as_str())
        .find(|mechanism| !mechanism.is_empty())
    {
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
    if config.tls {
        // Only said when on, so plaintext runs' parameters read as they always did.
        lines.push((
            "GRPCLAB_TLS".to_owned(),
            "on (rustls servers' and client's ALPN h2; the load verifies localhost)".to_owned(),
        ));
    }
    if config.client != config::BenchClient::Grpclab {
        // Only said for another client, so grpclab's runs read as they always did; a stored
        // row is set against rows of the same client only.
        lines.push((
            "GRPCLAB_CLIENT".to_owned(),
            ghz_client::describe(config.client),
        ));
    }
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
            crate::BUILD_COMMIT.to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_footer_names_limits_from_the_first_row_that_had_any() {
        let failed_early = runner::ImplResult {
            limits: limits::AppliedLimits::default(),
            ..sample_result()
        };
        let measured = runner::ImplResult {
            limits: limits::AppliedLimits {
                mechanism: "cgroup-v1".to_owned(),
                ..limits::AppliedLimits::default()
            },
            ..sample_result()
        };
        assert_eq!(
            footer_with_limits(&[], &[failed_early.clone(), measured]),
            vec!["limits: cgroup-v1".to_owned()]
        );
        assert!(footer_with_limits(&[], &[failed_early]).is_empty());
    }

    /// A name longer than grpc_bench's 18-character column widens the column and the rules:
    /// every line of the table is as long as its rules.
    #[test]
    fn a_long_name_keeps_the_table_aligned() {
        let long = runner::ImplResult {
            name: "java_hotspot_grpc_pgc_direct".to_owned(),
            ..sample_result()
        };
        let short = sample_result();
        for rows in [vec![short.clone()], vec![short, long]] {
            let table = results::render_text(&rows, &[]);
            let lines: Vec<&str> = table.lines().take(3 + rows.len() + 1).collect();
            // grpc_bench's rules are one wider than its rows (128 and 127).
            let rule = lines[0].chars().count();
            assert!(rule >= 128, "{table}");
            for line in &lines {
                let expected = if line.starts_with('-') {
                    rule
                } else {
                    rule - 1
                };
                assert_eq!(line.chars().count(), expected, "{line:?} in\n{table}");
            }
        }
    }

    fn sample_result() -> runner::ImplResult {
        runner::ImplResult {
            name: "x".to_owned(),
            status: RowStatus::Failed,
            reason: Some("build failed".to_owned()),
            stderr_tail: Vec::new(),
            command: "x".to_owned(),
            load: None,
            usage: sampler::Usage::default(),
            allocations_per_call: None,
            bytes_per_call: None,
            server_calls: None,
            limits: limits::AppliedLimits::default(),
            cpu_profile: None,
            alloc_profile: None,
            profile_note: None,
            bound_by: None,
            thresholds: Vec::new(),
            capacity: None,
        }
    }
}
