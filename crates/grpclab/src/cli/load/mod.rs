//! `grpclab load`: turn flags into a [`LoadConfig`], run it with a progress bar, export.
//!
//! Two stages, as in ripgrep: [`prepare`] only validates and builds (every error names its flag
//! or file), [`execute`] runs and writes. Results are always written, Ctrl-C included.

use grpclab_core::scenario::validate_reply;
use grpclab_core::tls::{ClientTls, TlsClient};
use grpclab_load::{LoadConfig, Target};
use http::{HeaderName, HeaderValue};
use std::io::{IsTerminal, Write};
use std::sync::Arc;

use super::exit::thresholds_exit;
use super::session::Session;
use std::process::ExitCode;

mod network;
mod options;
mod progress;
mod scenario;
mod schedule;

use grpclab_harness::flow_plan::template_renderer;
use options::run_options;
use progress::{progress_bar, show_progress};
use scenario::{bind_metadata, mix_method, resolve_calls};
pub use scenario::{load_scenario, LoadedScenario};
use schedule::apply_schedule;

use super::args::{DurationStopArg, LbStrategy, LoadArgs, OutputFormat, TransportArg};
use super::exporter_for;
use crate::reflection::ReflectFrom;
use crate::InputError;
use grpclab_harness::workload::metadata_headers;
use grpclab_results::model::{Report, RunOptions};
use grpclab_results::verdict::threshold::{MethodFigures, RunFigures};
use grpclab_results::verdict::Threshold;

/// The scenario used when neither --scenario nor --proto is given.
pub const DEFAULT_SCENARIO: &str = "complex_proto";

/// Calls `--details` keeps when given no number: ghz's own cap on its per-call list.
pub const DEFAULT_DETAILS: usize = 1_000_000;

/// A validated load run, ready to execute.
pub struct PreparedLoad {
    /// The engine's configuration.
    pub config: LoadConfig,
    /// The settings as reported.
    pub options: RunOptions,
    /// Output format.
    pub format: OutputFormat,
    /// Output file, if not standard output.
    pub output: Option<std::path::PathBuf>,
    /// Show the live view (a terminal, or `--tui`) instead of the progress line.
    pub live: bool,
    /// `--threshold`s, judged once the run ends.
    pub thresholds: Vec<Threshold>,
}

/// Validates the flags and builds the run. Every error is an [`InputError`].
pub fn prepare(args: &LoadArgs) -> Result<PreparedLoad, InputError> {
    if let Some(refusal) = args.unsupported.refusal() {
        return Err(InputError(refusal));
    }
    let thresholds = args
        .thresholds
        .iter()
        .map(|text| Threshold::parse(text))
        .collect::<Result<Vec<_>, _>>()?;
    // Before anything is sent: a finished run must have somewhere to go.
    if let Some(path) = &args.output {
        super::output::check_writable(path, "-o")?;
    }
    if args.ghz_async && args.rps == 0.0 {
        return Err(InputError(
            "--async sends calls on a rate's schedule whatever is in flight: give --rps R with it (grpclab's --rps always works that way); without a rate, -c N keeps N calls in flight".to_owned(),
        ));
    }
    if let Some(path) = &args.debug {
        super::debug_log::install(path)?;
    }
    let mut target = Target::resolve(&args.target)?;
    let first = target.pick_first(
        args.connect_timeout,
        args.lb_strategy == LbStrategy::PickFirst,
    );
    match &target.unix {
        Some(path) => tracing::debug!(target = %args.target, socket = %path.display(), "resolved"),
        None => tracing::debug!(
            target = %args.target,
            addresses = ?target.addresses,
            lb_strategy = ?args.lb_strategy,
            first = %first,
            "resolved"
        ),
    }
    let metadata_json = match (&args.metadata, &args.metadata_file) {
        (Some(json), _) => Some(json.clone()),
        (None, Some(path)) => Some(std::fs::read_to_string(path).map_err(|err| {
            InputError(format!(
                "-M/--metadata-file: cannot read {}: {err}",
                path.display()
            ))
        })?),
        (None, None) => None,
    };
    let metadata_map = parse_string_map("-m/--metadata", metadata_json.as_deref())?;
    let metadata = metadata_headers("-m/--metadata", metadata_map.as_ref())?;
    let reflect_metadata = match &args.reflect_metadata {
        Some(json) => parse_metadata("--reflect-metadata", Some(json))?,
        None => metadata.clone(),
    };
    let tls = client_tls(args)?;
    if target.unix.is_some() {
        let schema_given = args.scenario.scenario.is_some()
            || args.scenario.proto.is_some()
            || args.scenario.protoset.is_some();
        target.check_unix(tls.is_some(), schema_given)?;
    } else if tls.is_none() && !args.http1 {
        // The check speaks HTTP/2's preface: an HTTP/1.1 server (--http1) would take it for
        // a request and answer it, one call the run never made.
        target.check_plaintext(first, args.connect_timeout)?;
    }
    let reflect = ReflectFrom {
        target: first,
        connect_timeout: args.connect_timeout,
        metadata: &reflect_metadata,
        tls: tls.as_ref(),
    };
    let scenario::ResolvedCalls {
        loaded,
        mixed,
        seed: mix_seed,
        flows,
    } = resolve_calls(args, reflect)?;
    let scenario = &loaded.scenario;
    let mut config = LoadConfig::new(first, &scenario.path(), scenario.requests().to_vec());
    config.addresses = target.addresses.clone();
    config.unix = target.unix.clone();
    config.naming = target.naming.clone();
    config.balance = match args.lb_strategy {
        LbStrategy::PickFirst => grpclab_load::Balance::PickFirst,
        LbStrategy::RoundRobin => grpclab_load::Balance::RoundRobin,
    };
    config.authority = match &args.authority {
        Some(authority) => {
            // It goes on the wire as a header value: refuse what cannot.
            http::uri::Authority::try_from(authority.as_str()).map_err(|err| {
                InputError(format!(
                    "--authority '{authority}' is not a valid authority ({err}); give HOST[:PORT]"
                ))
            })?;
            authority.clone()
        }
        None => target.authority.clone(),
    };
    // ghz's templates in metadata values: the call's names are filled in once; values that
    // vary per call are rendered per call (sent apart, so the rest stays cached).
    if mixed.is_empty() && flows.is_empty() {
        match bind_metadata(metadata_map.as_ref(), scenario.method())? {
            Some((constant, varying)) => {
                config.metadata = metadata_headers("-m/--metadata", Some(&constant))?;
                config.methods[0].metadata_templates = varying;
            }
            None => config.metadata = metadata,
        }
    } else {
        if args.validate {
            return Err(InputError(
                "--validate checks replies against one method's reply type; run it without a mix"
                    .to_owned(),
            ));
        }
        config.mix_seed = args
            .mix_seed
            .or(mix_seed)
            .unwrap_or_else(grpclab_harness::workload::random_seed);
        config.methods = mixed
            .iter()
            .map(|(loaded, call)| mix_method(loaded, call, metadata_map.as_ref()))
            .collect::<Result<_, _>>()?;
        let file = args
            .workload
            .as_deref()
            .unwrap_or(std::path::Path::new("-"));
        let flows: Vec<_> = flows
            .iter()
            .map(|(flow, loaded)| {
                let scenarios = loaded.iter().map(|step| step.scenario.clone()).collect();
                (flow.clone(), scenarios)
            })
            .collect();
        let what = format!("--workload {}", file.display());
        config.flows = grpclab_harness::flow_plan::flow_plans(
            &flows,
            metadata_map.as_ref(),
            &mut config.methods,
            &what,
        )?;
    }
    config.tls = tls;
    config.gzip = args.enable_compression;
    config.max_recv_message_bytes = args.max_recv_message_size;
    config.duration_stop = match args.duration_stop {
        DurationStopArg::Close => grpclab_load::DurationStop::Close,
        DurationStopArg::Ignore => grpclab_load::DurationStop::Ignore,
        DurationStopArg::Wait => grpclab_load::DurationStop::Wait,
    };
    if let Some(max) = args.max_send_message_size {
        // ghz would fail every call with RESOURCE_EXHAUSTED; one line now says the same.
        if let Some(largest) = scenario
            .requests()
            .iter()
            .map(|r| r.len().saturating_sub(5))
            .max()
        {
            if largest > max {
                return Err(InputError(format!(
                    "the request message is {largest} bytes, over --max-send-message-size {max}: every call would fail (RESOURCE_EXHAUSTED); raise the limit or send a smaller payload"
                )));
            }
        }
    }
    if mixed.is_empty() && flows.is_empty() {
        config.methods[0].renderer = loaded.template.clone().map(|template| {
            template_renderer(template, loaded.payload.as_deref(), scenario.method())
        });
    }
    apply_schedule(args, &mut config)?;
    apply_call_shape(args, &mut config, scenario.method())?;
    config.shard = match args.shard {
        Some(shard) => Some(shard),
        None => shard_from_job()?,
    };
    if let Some(at) = args.start_at {
        // A typo in a date would otherwise park the generator for days.
        let ahead = at
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        if ahead > std::time::Duration::from_secs(24 * 3600) {
            return Err(InputError(format!(
                "--start-at {} is {:.1} days ahead: give a time within a day (RFC 3339 in UTC, or Unix seconds)",
                humantime::format_rfc3339_seconds(at),
                ahead.as_secs_f64() / 86_400.0
            )));
        }
    }
    config.start_at = args.start_at;
    config.start_tolerance = args.start_tolerance;
    if args.validate {
        let output = scenario.method().output();
        config.validator = Some(Arc::new(move |reply: &[u8]| validate_reply(&output, reply)));
    }
    if args.codec == crate::cli::args::WireCodecArg::Json {
        apply_json_codec(args, &mut config, scenario.method())?;
    }
    config
        .validate()
        .map_err(|err| InputError(err.to_string()))?;
    // The live view on a terminal (oha's), unless --no-tui; --tui forces it (e.g. to measure
    // what it costs with stderr redirected).
    let live = args.tui || (!args.no_tui && std::io::stderr().is_terminal());
    // The live view and live metrics both draw each finished second's latency.
    config.live_latency = live || args.metrics.metrics_addr.is_some();
    config.worker_prefix = args
        .name
        .as_deref()
        .map_or_else(String::new, |name| format!("{name}:"));
    let options = run_options(args, &config, &loaded, metadata_map)?;
    let mut thresholds = thresholds;
    let owned_names = mix_names(&config);
    let names: Vec<&str> = owned_names.iter().map(String::as_str).collect();
    for threshold in &mut thresholds {
        threshold.resolve_method(&names, "--threshold")?;
    }
    Ok(PreparedLoad {
        config,
        options,
        format: args.format,
        output: args.output.clone(),
        live,
        thresholds,
    })
}

/// Runs a prepared load with the live view or a progress bar (when stderr is a terminal) and
/// writes the output.
/// `grpclab load`: prepares, runs in a session of its own (a shard stores nothing: its
/// merge is what a person compares) and says how it ended.
pub fn run(args: &LoadArgs) -> anyhow::Result<ExitCode> {
    match args.network {
        Some(spec) => network::run(args, spec),
        None => run_across(args, None),
    }
}

/// A run across `--network`: the pair whose link the calls cross, and the server started
/// inside it (for "bound by").
pub struct AcrossNetwork<'a> {
    /// The pair.
    pub pair: &'a grpclab_net::NetworkPair,
    /// The server's process.
    pub server_pid: u32,
}

/// `grpclab load` itself, across `network` when given (from this thread, already inside its
/// client's namespace).
fn run_across(args: &LoadArgs, network: Option<&AcrossNetwork<'_>>) -> anyhow::Result<ExitCode> {
    let prepared = prepare(args)?;
    let history = prepared.config.shard.is_none().then_some(&args.history);
    let mut session = Session::start(history, Some(&args.metrics))?;
    let report = execute(prepared, &mut session, network)?;
    if grpclab_results::export::nothing_succeeded(&report.result).is_some() {
        // Said on stderr by execute; the code outranks the thresholds' (which fail too,
        // with nothing measured).
        return Ok(ExitCode::from(crate::EXIT_NOTHING_SUCCEEDED));
    }
    Ok(thresholds_exit(&report))
}

/// Runs a prepared load in `session` (its cancel token, store and metrics endpoint).
pub fn execute(
    prepared: PreparedLoad,
    session: &mut Session,
    network: Option<&AcrossNetwork<'_>>,
) -> anyhow::Result<Report> {
    let cancel = &session.cancel;
    let live_view = if prepared.live {
        let title = format!(
            "grpclab load {} · {}",
            prepared.options.host, prepared.options.call
        );
        // A terminal that refuses the alternate screen falls back to the progress line.
        crate::live::LiveView::start(title).ok()
    } else {
        None
    };
    // For "bound by": the client's own CPU around the run, and how it was paced.
    let threads = prepared.config.threads;
    let streams = prepared.config.concurrency;
    let connections = prepared.config.connections;
    let offered_rate = match prepared.config.pacing {
        grpclab_load::Pacing::OpenLoop { rate } => Some(rate),
        _ => None,
    };
    let stepped = matches!(prepared.config.pacing, grpclab_load::Pacing::Steps { .. })
        || prepared.config.concurrency_steps.is_some();
    // A generator among several records its part and its clock beside the results.
    let sharding = (prepared.config.shard.is_some() || prepared.config.start_at.is_some())
        .then(|| {
            prepared
                .config
                .share()
                .map(|share| (prepared.config.shard, share, prepared.config.start_at))
        })
        .transpose()
        .map_err(|err| InputError(err.to_string()))?;
    let ahead = prepared
        .config
        .start_at
        .and_then(|at| at.duration_since(std::time::SystemTime::now()).ok());
    if let (Some(at), Some(wait)) = (prepared.config.start_at, ahead) {
        // A generator may wait a minute for a shared start: say so where a person (or a
        // pod's log) looks, before the result line.
        let _ = writeln!(
            std::io::stderr(),
            "grpclab load: {}starts at {} (in {:.1} s), once connected",
            prepared
                .config
                .shard
                .map(|shard| format!("shard {shard} "))
                .unwrap_or_default(),
            humantime::format_rfc3339_millis(at),
            wait.as_secs_f64()
        );
    }
    let row = prepared
        .options
        .name
        .clone()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "load".to_owned());
    let metrics = session
        .metrics
        .as_ref()
        .map(|endpoint| Arc::clone(&endpoint.metrics));
    let to_metrics = |snapshot: &grpclab_load::ProgressSnapshot| {
        if let Some(metrics) = &metrics {
            metrics.update(&row, snapshot);
        }
    };
    let client_cpu = grpclab_harness::bench::sampler::OwnCpu::start();
    let request_bytes = grpclab_harness::bench::runner::mean_request_bytes(&prepared.config);
    // Only our engine measures how long requests waited for the server's windows.
    let waits_measured = matches!(prepared.config.transport, grpclab_h2::Transport::Engine);
    let across_before = network.map(|across| {
        let server_cpu = grpclab_harness::bench::sampler::read_process(across.server_pid);
        (
            across.pair.counts(),
            server_cpu.map(|(cpu, _)| cpu),
            std::time::Instant::now(),
        )
    });
    let result = match live_view {
        Some(mut view) => {
            let result = grpclab_load::run(prepared.config, cancel, &mut |snapshot| {
                to_metrics(snapshot);
                view.update(snapshot)
            });
            let _ = view.finish();
            result
        }
        None => {
            let progress = progress_bar();
            let result = grpclab_load::run(prepared.config, cancel, &mut |snapshot| {
                to_metrics(snapshot);
                show_progress(&progress, snapshot)
            });
            progress.finish_and_clear();
            result
        }
    };
    if let (Some(metrics), Ok(result)) = (&metrics, &result) {
        metrics.finish(&row, result);
    }
    let result = result.map_err(|err| match err {
        late @ grpclab_load::LoadError::Late { .. } => {
            anyhow::Error::new(crate::LateStart(late.to_string()))
        }
        other => anyhow::Error::new(InputError(other.to_string())),
    })?;
    let client_cpu_percent = client_cpu.percent();
    // Across --network the server is this run's own: its CPU over the load, and the link's.
    let (server_cpu_percent, server_cpu_quota, network_evidence) = match network.zip(across_before)
    {
        Some((across, (link_before, cpu_before, started))) => {
            let elapsed = started.elapsed();
            let cpu_after = grpclab_harness::bench::sampler::read_process(across.server_pid);
            let over: Vec<_> = across
                .pair
                .counts()
                .iter()
                .zip(&link_before)
                .map(|(after, before)| after.since(before))
                .collect();
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            (
                cpu_before
                    .zip(cpu_after)
                    .map(|(before, (after, _))| 100.0 * (after - before) / elapsed.as_secs_f64()),
                Some(cores as f64),
                Some(grpclab_results::verdict::bound::NetworkEvidence {
                    window_waits: waits_measured.then(|| {
                        grpclab_results::verdict::bound::WindowWaitEvidence::of(
                            &result.window_waits,
                            connections,
                            result.whole_run,
                        )
                    }),
                    ..grpclab_harness::bench::runner::network_evidence(
                        &prepared.options.network,
                        across.pair.spec(),
                        &over,
                        elapsed,
                        request_bytes,
                        result.server_windows.map(Into::into),
                    )
                }),
            )
        }
        None => (None, None, None),
    };
    // A stepped schedule has no one rate or stream count to judge against.
    let bound_by = (!stepped).then(|| {
        let recorder = &result.recorder;
        grpclab_results::verdict::bound::bound_by(&grpclab_results::verdict::bound::BoundEvidence {
            server_cpu_percent,
            server_cpu_quota,
            network: network_evidence.clone(),
            client_cpu_percent,
            client_threads: threads,
            offered_rate,
            rps: result.rps(),
            send_lag_share: grpclab_results::verdict::bound::send_lag_share(recorder),
            streams,
            mean_latency_ns: recorder.latency().mean(),
            calls: result.count(),
            errors: result.errors(),
            connections,
            reconnects: result.reconnects,
            ..Default::default()
        })
    });
    let sharding = sharding.map(
        |(shard, share, start_at)| grpclab_results::generator::Sharding {
            of: shard.map_or(1, |shard| shard.of),
            generators: vec![grpclab_results::generator::GeneratorRun::new(
                shard,
                share,
                start_at,
                result.first_send,
                result.started_at,
                result.elapsed,
                result.count(),
                result.rps(),
            )],
            merge: None,
        },
    );
    let mut report = Report {
        history: None,
        options: prepared.options,
        result,
        thresholds: Vec::new(),
        bound_by,
        sharding,
    };
    report.thresholds = judge(&report, &prepared.thresholds);
    // Stored before the output is rendered, so every format can say how the run compares
    // with the previous one of its configuration. Storing never fails the run.
    let history = &mut session.history;
    if history.is_on() {
        let json = grpclab_results::model::JsonReport::from_report(&report);
        let source = prepared
            .output
            .as_deref()
            .map_or_else(|| "standard output".to_owned(), |p| p.display().to_string());
        report.history = super::history::store_load(history, &json, &source);
    }
    let bytes = exporter_for(prepared.format).render(&report)?;
    let written = super::output::write_output(prepared.output.as_deref(), &bytes);
    // The results are out: the last scrape may now read the final figures.
    session.end_metrics();
    written?;
    // Whatever the output format (JSON read by a script, a file), a run in which nothing
    // succeeded says so where a person looks.
    if let Some(line) = grpclab_results::export::nothing_succeeded(&report.result) {
        let _ = writeln!(std::io::stderr(), "grpclab: {line}");
    }
    Ok(report)
}

/// The full names of a mix's methods (none when the run calls one method), for thresholds on
/// one of them.
/// With flows, `step:NAME` and `flow:NAME` name a step's and a flow's figures too.
pub(crate) fn mix_names(config: &LoadConfig) -> Vec<String> {
    if config.methods.len() < 2 && config.flows.is_empty() {
        return Vec::new();
    }
    let mut names: Vec<String> = config.methods.iter().map(|m| m.name.clone()).collect();
    for flow in &config.flows {
        names.extend(flow.steps.iter().map(|step| format!("step:{}", step.name)));
        names.push(format!("flow:{}", flow.name));
    }
    names
}

/// `--threshold` verdicts on a finished (or merged) run, in the order given.
pub(crate) fn judge(
    report: &Report,
    thresholds: &[Threshold],
) -> Vec<grpclab_results::verdict::ThresholdVerdict> {
    let result = &report.result;
    let scopes = result.scopes();
    // Each part's latency as the run's reads: successful calls, or all with --count-errors.
    let latencies: Vec<std::borrow::Cow<'_, hdrhistogram::Histogram<u64>>> = scopes
        .iter()
        .map(|scope| match report.options.count_errors {
            true => std::borrow::Cow::Owned(scope.recorder.latency_of_all_calls()),
            false => std::borrow::Cow::Borrowed(scope.recorder.latency()),
        })
        .collect();
    let methods: Vec<MethodFigures<'_>> = scopes
        .iter()
        .zip(&latencies)
        .map(|(scope, latency)| {
            MethodFigures::new(&scope.name, latency, scope.count, scope.failures, scope.rps)
        })
        .collect();
    let figures = RunFigures {
        latency: &report.ghz_latency(),
        count: result.count(),
        errors: result.errors(),
        rps: result.rps(),
        methods: &methods,
    };
    thresholds
        .iter()
        .map(|threshold| threshold.judge(&figures))
        .collect()
}

/// `--codec json`: the requests re-encoded once in protobuf's JSON mapping (framed, as the
/// binary ones are), and `--validate` reading JSON replies. Refused in one line where it
/// cannot apply.
fn apply_json_codec(
    args: &LoadArgs,
    config: &mut LoadConfig,
    method: &prost_reflect::MethodDescriptor,
) -> Result<(), InputError> {
    if args.transport != TransportArg::H2 {
        return Err(InputError(
            "--codec json runs on the h2 crate's transport so far: add --transport h2".to_owned(),
        ));
    }
    if args.workload.is_some() || config.methods.len() != 1 || config.methods[0].renderer.is_some()
    {
        return Err(InputError(
            "--codec json encodes the scenario's (or --proto's) requests once before the run: a workload or a payload template cannot use it yet".to_owned(),
        ));
    }
    if method.is_client_streaming() {
        return Err(InputError(format!(
            "--codec json: {} streams its requests; JSON goes in unary calls and server streams only so far",
            method.full_name()
        )));
    }
    config.codec = grpclab_core::protocol::Codec::Json;
    let input = method.input();
    let mut json_requests = Vec::with_capacity(config.methods[0].requests.len());
    for framed in &config.methods[0].requests {
        let body = grpclab_core::framing::unframe_single(framed).map_err(|err| {
            InputError(format!("--codec json: a request is not one message: {err}"))
        })?;
        let message =
            prost_reflect::DynamicMessage::decode(input.clone(), body).map_err(|err| {
                InputError(format!(
                    "--codec json: a request does not decode as {}: {err}",
                    input.full_name()
                ))
            })?;
        let json = serde_json::to_vec(&message).map_err(|err| {
            InputError(format!(
                "--codec json: cannot write a request as JSON: {err}"
            ))
        })?;
        json_requests.push(grpclab_core::framing::frame_message(&json));
    }
    config.methods[0].requests = json_requests;
    if let Some(binary) = config.validator.take() {
        let output = method.output();
        config.validator = Some(Arc::new(move |reply: &[u8]| {
            let mut reader = serde_json::Deserializer::from_slice(reply);
            let message = prost_reflect::DynamicMessage::deserialize(output.clone(), &mut reader)
                .map_err(|err| grpclab_core::scenario::ReplyError::Undecodable {
                message: output.full_name().to_owned(),
                reason: format!("not its JSON mapping: {err}"),
            })?;
            binary(&prost::Message::encode_to_vec(&message))
        }));
    }
    Ok(())
}

/// The call's shape from its method (unary, client, server or bidi streaming) with the
/// streaming flags, each refused in one line where the method cannot take it; the HTTP/2
/// transport.
fn apply_call_shape(
    args: &LoadArgs,
    config: &mut LoadConfig,
    method: &prost_reflect::MethodDescriptor,
) -> Result<(), InputError> {
    config.transport = match args.transport {
        TransportArg::Engine => grpclab_load::Transport::Engine,
        TransportArg::H2 => grpclab_load::Transport::H2,
    };
    config.protocol = args.protocol.protocol();
    if args.http1 && config.protocol == grpclab_core::protocol::Protocol::Grpc {
        return Err(InputError(
            "--http1: gRPC needs HTTP/2; add --protocol grpc-web, grpc-web-text or connect (and --transport h2)".to_owned(),
        ));
    }
    if args.connect_get {
        if config.protocol != grpclab_core::protocol::Protocol::Connect {
            return Err(InputError(format!(
                "--connect-get sends Connect's GET: add --protocol connect (this run speaks {})",
                config.protocol
            )));
        }
        if method.is_client_streaming() || method.is_server_streaming() {
            return Err(InputError(format!(
                "--connect-get: {} streams; Connect sends GET for unary calls only: leave --connect-get out",
                method.full_name()
            )));
        }
        if args.workload.is_some() {
            return Err(InputError(
                "--connect-get applies to the run's one method; a --workload's steps go as POST: leave --connect-get out".to_owned(),
            ));
        }
        config.connect_get = true;
    }
    if config.protocol != grpclab_core::protocol::Protocol::Grpc {
        let protocol = config.protocol;
        if args.transport != TransportArg::H2 {
            return Err(InputError(format!(
                "--protocol {protocol} runs on the h2 crate's transport so far: add --transport h2 (grpclab's engine speaks gRPC)"
            )));
        }
        if method.is_client_streaming() {
            if protocol != grpclab_core::protocol::Protocol::Connect {
                return Err(InputError(format!(
                    "--protocol {protocol}: {} streams requests; gRPC-Web carries unary and server-streaming calls only: call one of those, or use --protocol connect or grpc",
                    method.full_name()
                )));
            }
            if args.http1 {
                return Err(InputError(format!(
                    "--http1: {} streams requests, which go over HTTP/2 here: leave --http1 out",
                    method.full_name()
                )));
            }
        }
        if method.is_server_streaming() && args.stream_stamp.is_some() {
            return Err(InputError(format!(
                "--stream-stamp reads gRPC's frames; with --protocol {protocol} leave it out"
            )));
        }
        if args.http1 {
            if args.workload.is_some() {
                return Err(InputError(
                    "--http1 runs single calls; a --workload's flows, retries and hedging go over HTTP/2: leave --http1 out".to_owned(),
                ));
            }
            if config.unix.is_some() {
                return Err(InputError(
                    "--http1 dials TCP so far: give a HOST:PORT target, not a unix: socket"
                        .to_owned(),
                ));
            }
            config.http1 = true;
        }
    }
    config.shape =
        grpclab_load::CallShape::of(method.is_client_streaming(), method.is_server_streaming());
    if !config.flows.is_empty() {
        // A workload's calls all go as unary ones: a server-streaming step sends its one
        // request and reads its replies to the stream's end.
        config.shape = grpclab_load::CallShape::Unary;
        if args.stream_call_count.is_some()
            || args.stream_call_duration.is_some()
            || args.stream_interval.is_some()
            || args.stream_independent
            || args.stream_stamp.is_some()
            || args.stream_dynamic_messages
        {
            return Err(InputError(
                "the --stream-* flags shape a lone streaming method's calls; a workload's server-streaming steps read their replies to the stream's end: leave the flags out".to_owned(),
            ));
        }
    }
    config.stream = grpclab_load::StreamSettings {
        call_count: args.stream_call_count,
        call_duration: args.stream_call_duration,
        interval: args.stream_interval,
        dynamic_messages: args.stream_dynamic_messages,
        independent: args.stream_independent,
        stamp: match &args.stream_stamp {
            Some(name) => Some(super::stamp::stamp_field(method, name)?),
            None => None,
        },
    };
    if args.stream_independent && config.shape != grpclab_load::CallShape::Bidi {
        return Err(InputError(format!(
            "--stream-independent applies to bidi streams; {} is not one (leave it out)",
            method.full_name()
        )));
    }
    if config.shape == grpclab_load::CallShape::ServerStreaming && args.stream_interval.is_some() {
        return Err(InputError(format!(
            "--stream-interval paces a client's sends; {} sends one request and the server streams: end each call after N replies with --stream-call-count N, or after a time with --stream-call-duration",
            method.full_name()
        )));
    }
    if config.shape != grpclab_load::CallShape::Unary {
        let refuse = |what: &str| {
            Err(InputError(format!(
                "{what} is not supported for streaming calls yet ({} streams); leave it out",
                method.full_name()
            )))
        };
        if args.validate {
            return refuse("--validate");
        }
    } else if args.stream_call_count.is_some()
        || args.stream_call_duration.is_some()
        || args.stream_interval.is_some()
    {
        return Err(InputError(format!(
            "--stream-call-count, --stream-call-duration and --stream-interval apply to streaming calls; {} is unary",
            method.full_name()
        )));
    }
    Ok(())
}

/// The shard a Kubernetes Indexed Job's pod runs: `JOB_COMPLETION_INDEX` (set by the Job
/// controller) of `GRPCLAB_SHARDS` (set in the manifest), so one pod template serves every
/// pod. `None` unless `GRPCLAB_SHARDS` is set.
fn shard_from_job() -> Result<Option<grpclab_load::Shard>, InputError> {
    let Ok(shards) = std::env::var("GRPCLAB_SHARDS") else {
        return Ok(None);
    };
    let Ok(index) = std::env::var("JOB_COMPLETION_INDEX") else {
        return Err(InputError(format!(
            "GRPCLAB_SHARDS={shards} is set but JOB_COMPLETION_INDEX is not: run in an Indexed Job, or give --shard I/N"
        )));
    };
    grpclab_load::Shard::parse(&format!("{index}/{shards}"))
        .map(Some)
        .map_err(|err| InputError(format!("JOB_COMPLETION_INDEX and GRPCLAB_SHARDS: {err}")))
}

/// The TLS client `--insecure`, `--cacert`, `--cert`, `--key`, `--cname` and `--skipTLS`
/// describe: `None` (plaintext h2c) with `--insecure`, else TLS, as ghz decides.
fn client_tls(args: &LoadArgs) -> Result<Option<TlsClient>, InputError> {
    if args.insecure {
        return Ok(None);
    }
    let settings = ClientTls {
        ca_cert: args.cacert.clone(),
        cert: args.cert.clone(),
        key: args.key.clone(),
        server_name: args.cname.clone(),
        skip_verify: args.skip_tls,
    };
    let client = TlsClient::for_target(&settings, &Target::host_name(&args.target))
        .map_err(|err| InputError(err.to_string()))?;
    if args.skip_tls {
        // Said loudly: nothing checks who answers. Best effort on a closed stderr.
        let _ = writeln!(
            std::io::stderr(),
            "grpclab load: --skipTLS: the server's certificate is NOT verified; any server that answers is trusted"
        );
    }
    Ok(Some(client))
}

/// A JSON object of strings (`--tags`, `-m`), or `None` when the flag is absent.
fn parse_string_map(
    flag: &str,
    json: Option<&str>,
) -> Result<Option<std::collections::BTreeMap<String, String>>, InputError> {
    let Some(json) = json else {
        return Ok(None);
    };
    let hint = r#"give a JSON object of strings, e.g. '{"authorization":"Bearer x"}'"#;
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(json)
        .map_err(|err| InputError(format!("{flag} is not a JSON object ({err}); {hint}")))?;
    object
        .into_iter()
        .map(|(key, value)| match value {
            serde_json::Value::String(value) => Ok((key, value)),
            _ => Err(InputError(format!(
                "{flag}: the value of '{key}' is not a string; {hint}"
            ))),
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

fn parse_metadata(
    flag: &str,
    json: Option<&str>,
) -> Result<Vec<(HeaderName, HeaderValue)>, InputError> {
    metadata_headers(flag, parse_string_map(flag, json)?.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_must_be_an_object_of_valid_strings() {
        assert_eq!(
            parse_metadata("-m/--metadata", Some(r#"{"a":"b"}"#))
                .unwrap()
                .len(),
            1
        );
        assert!(parse_metadata("-m/--metadata", Some("[]"))
            .unwrap_err()
            .0
            .contains("JSON object"));
        assert!(parse_metadata("-m/--metadata", Some(r#"{"a":1}"#))
            .unwrap_err()
            .0
            .contains("not a string"));
        assert!(parse_metadata("-m/--metadata", Some(r#"{"te":"x"}"#))
            .unwrap_err()
            .0
            .contains("cannot be overridden"));
        assert!(parse_metadata("-m/--metadata", Some(r#"{"a b":"x"}"#))
            .unwrap_err()
            .0
            .contains("valid header name"));
    }
}
