//! `grpclab load`: turn flags into a [`LoadConfig`], run it with a progress bar, export.
//!
//! Two stages, as in ripgrep: [`prepare`] only validates and builds (every error names its flag
//! or file), [`execute`] runs and writes. Results are always written, Ctrl-C included.

use grpclab_core::payload_template::PayloadTemplate;
use grpclab_core::scenario::{validate_reply, Schema};
use grpclab_core::template::{CallContext, CallInfo, Random, Template};
use grpclab_core::tls::{ClientTls, TlsClient};
use grpclab_core::Scenario;
use grpclab_load::{
    CancellationToken, ConcurrencySteps, LoadConfig, Pacing, ProgressSnapshot, ProgressTarget,
    RequestRenderer,
};
use http::{HeaderName, HeaderValue};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use super::args::{
    DurationStopArg, LbStrategy, LoadArgs, OutputFormat, ScenarioArgs, ScheduleShape, TransportArg,
};
use super::exporter_for;
use crate::reflection::ReflectFrom;
use crate::InputError;
use grpclab_harness::workload::metadata_headers;
use grpclab_results::model::{Report, RunOptions, TlsOptions};
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
    /// Where the run is stored when it ends (off for a shard: its merge is the run).
    pub history: grpclab_store::Recorder,
    /// `--metrics-addr`, `--metrics-linger`: live Prometheus metrics while the run goes.
    pub metrics: super::args::MetricsArgs,
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
    let unix = unix_socket(&args.target)?;
    let mut resolved = match &unix {
        // gRPC's authority for a unix socket; the address only names the run.
        Some(_) => Resolved {
            authority: "localhost".to_owned(),
            addresses: vec![SocketAddr::from(([127, 0, 0, 1], 0))],
            naming: None,
        },
        None => resolve(&args.target)?,
    };
    let target = pick_first(&resolved.addresses, args.connect_timeout);
    if args.lb_strategy == LbStrategy::PickFirst {
        // The address picked first, so a report lists the one that carried the run first.
        resolved.addresses.retain(|address| *address != target);
        resolved.addresses.insert(0, target);
    }
    match &unix {
        Some(path) => tracing::debug!(target = %args.target, socket = %path.display(), "resolved"),
        None => tracing::debug!(
            target = %args.target,
            addresses = ?resolved.addresses,
            lb_strategy = ?args.lb_strategy,
            first = %target,
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
    if let Some(path) = &unix {
        check_unix_target(path, &args.target, tls.is_some(), &args.scenario)?;
    } else if tls.is_none() {
        check_plaintext_peer(target, &args.target, args.connect_timeout)?;
    }
    let reflect = ReflectFrom {
        target,
        connect_timeout: args.connect_timeout,
        metadata: &reflect_metadata,
        tls: tls.as_ref(),
    };
    let mix = match &args.workload {
        Some(path) => Some(grpclab_harness::workload::from_file(path)?),
        None => grpclab_harness::workload::from_flags(&args.mix)?,
    };
    // Standard input can be read once, and each method of a mix reads its payload.
    if mix.as_ref().is_some_and(|mix| mix.calls.len() > 1)
        && (args.scenario.binary || args.scenario.data.as_deref() == Some("@"))
    {
        return Err(InputError(
            "-b and -d @ read the payload from standard input, once; a mix reads one payload per method: give it in a file (-B FILE, -D FILE) or per method in a --workload file".to_owned(),
        ));
    }
    // A mix: each method resolved as a lone --call would be, with its own data.
    let mut mixed = Vec::new();
    for call in mix.iter().flat_map(|mix| &mix.calls) {
        let mut scenario_args = args.scenario.clone();
        scenario_args.call = Some(call.call.clone());
        if let Some(data) = &call.data {
            (scenario_args.data, scenario_args.data_file) = (Some(data.clone()), None);
            (scenario_args.binary, scenario_args.binary_file) = (false, None);
        }
        let loaded = load_scenario(&scenario_args, Some(reflect))?;
        let method = loaded.scenario.method();
        if method.is_client_streaming() || method.is_server_streaming() {
            return Err(InputError(format!(
                "{} streams: a mix takes unary methods only; run a streaming method on its own",
                method.full_name()
            )));
        }
        mixed.push((loaded, call));
    }
    let loaded = match mixed.first() {
        Some((first, _)) => first.clone(),
        None => load_scenario(&args.scenario, Some(reflect))?,
    };
    let scenario = &loaded.scenario;
    let mut config = LoadConfig::new(target, &scenario.path(), scenario.requests().to_vec());
    config.addresses = resolved.addresses.clone();
    config.unix = unix;
    config.naming = resolved.naming.clone();
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
        None => resolved.authority.clone(),
    };
    // ghz's templates in metadata values: the call's names are filled in once; values that
    // vary per call are rendered per call (sent apart, so the rest stays cached).
    if mixed.is_empty() {
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
            .or(mix.as_ref().and_then(|mix| mix.seed))
            .unwrap_or_else(grpclab_harness::workload::random_seed);
        config.methods = mixed
            .iter()
            .map(|(loaded, call)| mix_method(loaded, call, metadata_map.as_ref()))
            .collect::<Result<_, _>>()?;
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
    if mixed.is_empty() {
        config.methods[0].renderer = loaded.template.clone().map(|template| {
            template_renderer(template, loaded.payload.as_deref(), scenario.method())
        });
    }
    config.concurrency = args.concurrency;
    config.concurrency_steps = concurrency_steps(args)?;
    config.connections = args.connections;
    config.pacing = if args.rps < 0.0 || !args.rps.is_finite() {
        return Err(InputError(format!(
            "--rps {} is not a rate; give requests per second, or 0 for a closed loop",
            args.rps
        )));
    } else if args.load_schedule != ScheduleShape::Const {
        load_steps(args)?
    } else if args.rps == 0.0 {
        Pacing::ClosedLoop
    } else {
        Pacing::OpenLoop { rate: args.rps }
    };
    // ghz's meanings: -z runs for its duration and ignores -n; -n runs N calls, cut short
    // by -x if given.
    if args.duration.is_some() && args.max_duration.is_some() {
        return Err(InputError(
            "-x/--max-duration caps an -n run; with -z the duration already decides: give one of them"
                .to_owned(),
        ));
    }
    if let (Some(total), Some(_)) = (args.total, args.duration) {
        // Best effort: a closed stderr must not stop the run.
        let _ = writeln!(
            std::io::stderr(),
            "grpclab load: -n {total} is ignored because -z is set (as in ghz); -n with -x stops at whichever comes first"
        );
    }
    (config.duration, config.total) = match args.duration {
        Some(duration) => (Some(duration), None),
        None => (args.max_duration, Some(args.total.unwrap_or(200))),
    };
    config.warmup = args.warmup;
    config.connect_timeout = args.connect_timeout;
    config.keepalive = (!args.keepalive.is_zero()).then_some(args.keepalive);
    config.skip_first = args.skip_first;
    // ghz's CSV lists every call: -O csv keeps calls one by one even without --details.
    config.details = args.details.or(match args.format {
        OutputFormat::Csv | OutputFormat::InfluxDetails => Some(DEFAULT_DETAILS),
        _ => None,
    });
    if config.details == Some(0) {
        return Err(InputError(
            "--details=0 lists no call; give --details=N with N at least 1, or leave it out"
                .to_owned(),
        ));
    }
    config.timeout = (!args.timeout.is_zero()).then_some(args.timeout);
    config.threads = args
        .cpus
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if let Some(cpus) = args.cpus.filter(|cpus| *cpus > args.connections) {
        // Each client thread owns whole connections: more threads than connections would idle.
        let _ = writeln!(
            std::io::stderr(),
            "grpclab load: --cpus {cpus} runs {} client thread(s): each owns whole connections, and there are --connections {}; raise --connections to use more CPUs",
            args.connections, args.connections
        );
    }
    config.transport = match args.transport {
        TransportArg::Engine => grpclab_load::Transport::Engine,
        TransportArg::H2 => grpclab_load::Transport::H2,
    };
    let method = scenario.method();
    config.shape =
        grpclab_load::CallShape::of(method.is_client_streaming(), method.is_server_streaming());
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
    let options = RunOptions {
        name: args.name.clone(),
        tags: parse_string_map("--tags", args.tags.as_deref())?.unwrap_or_default(),
        host: args.target.clone(),
        authority: config.authority.clone(),
        addresses: if config.addresses.len() > 1 {
            config.addresses.iter().map(ToString::to_string).collect()
        } else {
            Vec::new()
        },
        lb_strategy: if config.addresses.len() > 1 {
            match args.lb_strategy {
                LbStrategy::PickFirst => "pick_first",
                LbStrategy::RoundRobin => "round_robin",
            }
            .to_owned()
        } else {
            String::new()
        },
        call: scenario.method().full_name().to_owned(),
        scenario: loaded.label.clone(),
        proto: args
            .scenario
            .proto
            .as_ref()
            .map(|p| p.display().to_string()),
        // ghz lists the folders it looks in, the .proto's own first.
        import_paths: match &args.scenario.proto {
            Some(proto) => grpclab_core::scenario::import_paths(
                std::slice::from_ref(proto),
                &args.scenario.import_paths,
            )
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
            None => Vec::new(),
        },
        // The payload as the user gave it (a template as written); without one, the request
        // sent (a scenario's own, as JSON), as ghz always lists it. `None` for a binary
        // payload or a mix.
        data: loaded
            .payload
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .or_else(
                || match args.scenario.binary || args.scenario.binary_file.is_some() {
                    true => None,
                    false => first_request_json(scenario),
                },
            ),
        binary: args.scenario.binary || args.scenario.binary_file.is_some(),
        metadata: metadata_map,
        distinct_requests: config.methods.iter().map(|m| m.requests.len()).sum(),
        mix_seed: (config.methods.len() > 1).then_some(config.mix_seed),
        concurrency: config.concurrency,
        connections: config.connections,
        rps: args.rps,
        duration: config.duration,
        total: config.total,
        warmup: config.warmup,
        timeout: config.timeout,
        dial_timeout: config.connect_timeout,
        keepalive: config.keepalive.unwrap_or_default(),
        cpus: config.threads,
        validate: args.validate,
        transport: args.transport.name().to_owned(),
        details: config.details,
        count_errors: args.count_errors,
        stream: stream_flags(args),
        requests_digest: config.requests_digest(),
        skip_first: args.skip_first,
        load: load_shape(args.load_schedule, config.pacing),
        concurrency_shape: config
            .concurrency_steps
            .map(|steps| grpclab_results::model::LoadShape {
                schedule: args.concurrency_schedule.name().to_owned(),
                start: steps.start as f64,
                end: steps.end.unwrap_or(0) as f64,
                step: steps.step as f64,
                step_duration: steps.step_duration,
                max_duration: steps.max_duration.unwrap_or_default(),
            })
            .unwrap_or_default(),
        compression: args.enable_compression,
        tls: TlsOptions {
            insecure: args.insecure,
            cacert: path_text(args.cacert.as_deref()),
            cert: path_text(args.cert.as_deref()),
            key: path_text(args.key.as_deref()),
            cname: args.cname.clone().unwrap_or_default(),
            skip_verify: args.skip_tls,
        },
    };
    let mut thresholds = thresholds;
    let names = mix_names(&config);
    for threshold in &mut thresholds {
        threshold.resolve_method(&names, "--threshold")?;
    }
    // A shard is part of a run: `grpclab merge` of the parts is what a person compares.
    let history = if config.shard.is_some() {
        grpclab_store::Recorder::off()
    } else {
        super::history::recorder(&args.history)?
    };
    Ok(PreparedLoad {
        config,
        options,
        format: args.format,
        output: args.output.clone(),
        live,
        thresholds,
        history,
        metrics: args.metrics.clone(),
    })
}

/// Runs a prepared load with the live view or a progress bar (when stderr is a terminal) and
/// writes the output.
pub fn execute(prepared: PreparedLoad, cancel: &CancellationToken) -> anyhow::Result<Report> {
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
    let endpoint = super::live_metrics::start(&prepared.metrics)?;
    let row = prepared
        .options
        .name
        .clone()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "load".to_owned());
    let metrics = endpoint
        .as_ref()
        .map(|endpoint| Arc::clone(&endpoint.metrics));
    let to_metrics = |snapshot: &grpclab_load::ProgressSnapshot| {
        if let Some(metrics) = &metrics {
            metrics.update(&row, snapshot);
        }
    };
    let client_cpu = grpclab_harness::bench::sampler::OwnCpu::start();
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
    // A stepped schedule has no one rate or stream count to judge against.
    let bound_by = (!stepped).then(|| {
        let recorder = &result.recorder;
        grpclab_results::verdict::bound::bound_by(&grpclab_results::verdict::bound::BoundEvidence {
            client_cpu_percent,
            client_threads: threads,
            offered_rate,
            rps: result.rps(),
            send_lag_share: grpclab_results::verdict::bound::send_lag_share(recorder),
            streams,
            mean_latency_ns: recorder.latency.mean(),
            calls: result.count(),
            errors: result.errors(),
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
    let mut history = prepared.history;
    if history.is_on() {
        let json = grpclab_results::model::JsonReport::from_report(&report);
        let source = prepared
            .output
            .as_deref()
            .map_or_else(|| "standard output".to_owned(), |p| p.display().to_string());
        report.history = super::history::store_load(&mut history, &json, &source);
    }
    let bytes = exporter_for(prepared.format).render(&report)?;
    let written = super::output::write_output(prepared.output.as_deref(), &bytes);
    // The results are out: the last scrape may now read the final figures.
    if let Some(endpoint) = endpoint {
        endpoint.end();
    }
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
pub(crate) fn mix_names(config: &LoadConfig) -> Vec<&str> {
    if config.methods.len() > 1 {
        config.methods.iter().map(|m| m.name.as_str()).collect()
    } else {
        Vec::new()
    }
}

/// `--threshold` verdicts on a finished (or merged) run, in the order given.
pub(crate) fn judge(
    report: &Report,
    thresholds: &[Threshold],
) -> Vec<grpclab_results::verdict::ThresholdVerdict> {
    let result = &report.result;
    // Each method's latency as the run's reads: successful calls, or all with --count-errors.
    let latencies: Vec<std::borrow::Cow<'_, hdrhistogram::Histogram<u64>>> = result
        .methods
        .iter()
        .map(|method| match report.options.count_errors {
            true => std::borrow::Cow::Owned(method.recorder.latency_of_all_calls()),
            false => std::borrow::Cow::Borrowed(&method.recorder.latency),
        })
        .collect();
    let methods: Vec<MethodFigures<'_>> = result
        .methods
        .iter()
        .zip(&latencies)
        .map(|(method, latency)| {
            MethodFigures::new(
                &method.name,
                latency,
                method.count(),
                method.errors(),
                method.rps(result.elapsed),
            )
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
    let client = TlsClient::for_target(&settings, &resolve_name(&args.target).0)
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

/// How long the plaintext check waits for the server's first bytes.
const PLAINTEXT_CHECK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// With `--insecure`, makes sure the server does not speak TLS, so that mistake is one line
/// rather than a run of failed calls: a throwaway connection sends HTTP/2's client preface and
/// reads the first bytes back. A TLS server answers that with a TLS alert (or hangs up); an
/// HTTP/2 server answers with its SETTINGS. Anything but a TLS record lets the run go on
/// (a server that is down or silent is the run's to report).
fn check_plaintext_peer(
    target: SocketAddr,
    shown: &str,
    connect_timeout: std::time::Duration,
) -> Result<(), InputError> {
    use std::io::Read;
    let Ok(mut tcp) = std::net::TcpStream::connect_timeout(&target, connect_timeout) else {
        return Ok(());
    };
    // The client preface and an empty SETTINGS frame (RFC 9113 §3.4).
    let mut hello = grpclab_h2::frame::PREFACE.to_vec();
    grpclab_h2::frame::write_settings(&mut hello, &[]);
    if tcp.write_all(&hello).is_err()
        || tcp
            .set_read_timeout(Some(PLAINTEXT_CHECK_WAIT.min(connect_timeout)))
            .is_err()
    {
        return Ok(());
    }
    let mut first = [0u8; 16];
    let mut got = 0;
    while got < 3 {
        match tcp.read(&mut first[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    // Some TLS servers (grpcio's) hang up on a plaintext preface without a word: then ask
    // in TLS whether it answers in TLS.
    let tls_answer = got == 0 && answers_tls_hello(target, connect_timeout);
    if tls_answer || grpclab_core::tls::looks_like_tls(&first[..got]) {
        return Err(InputError(format!(
            "{shown} speaks TLS, and --insecure asks for plaintext: drop --insecure (add --cacert FILE if its certificate is from a private CA, or --skipTLS to skip verification)"
        )));
    }
    Ok(())
}

/// Whether the server answers a TLS ClientHello with a TLS record (a second, throwaway
/// connection; nothing is verified, nothing is sent after the hello).
fn answers_tls_hello(target: SocketAddr, connect_timeout: std::time::Duration) -> bool {
    use std::io::Read;
    let settings = ClientTls {
        skip_verify: true,
        ..ClientTls::default()
    };
    let Ok(config) = settings.config() else {
        return false;
    };
    let Ok(name) = rustls::pki_types::ServerName::try_from("localhost") else {
        return false;
    };
    let Ok(mut session) = rustls::ClientConnection::new(config, name) else {
        return false;
    };
    let mut hello = Vec::new();
    if session.write_tls(&mut hello).is_err() {
        return false;
    }
    let Ok(mut tcp) = std::net::TcpStream::connect_timeout(&target, connect_timeout) else {
        return false;
    };
    let mut first = [0u8; 3];
    tcp.write_all(&hello).is_ok()
        && tcp
            .set_read_timeout(Some(PLAINTEXT_CHECK_WAIT.min(connect_timeout)))
            .is_ok()
        && tcp.read_exact(&mut first).is_ok()
        && grpclab_core::tls::looks_like_tls(&first)
}

fn path_text(path: Option<&Path>) -> String {
    path.map(|p| p.display().to_string()).unwrap_or_default()
}

/// A target as gRPC names them: `HOST:PORT` and `dns:///HOST:PORT` (every address the name
/// resolves to), `ipv4:A:PORT[,B:PORT...]`, `ipv6:[A]:PORT[,[B]:PORT...]`.
#[derive(Debug)]
struct Resolved {
    /// The `:authority` to send: the name and port as typed (the first address for ipv4:/ipv6:).
    authority: String,
    /// Every address, in order, each once.
    addresses: Vec<SocketAddr>,
    /// The name, resolved again on every reconnect (`None`: addresses given as such).
    naming: Option<grpclab_load::Naming>,
}

/// The part of a target that names its host: `HOST:PORT` without a `dns:` scheme; for an
/// address list, its first entry. The second value says whether it is an address list.
fn resolve_name(target: &str) -> (String, bool) {
    let target = target.trim();
    if let Some(rest) = target
        .strip_prefix("ipv4:")
        .or_else(|| target.strip_prefix("ipv6:"))
    {
        return (rest.split(',').next().unwrap_or("").trim().to_owned(), true);
    }
    let name = match target.strip_prefix("dns://") {
        // dns://SERVER/NAME:PORT (an empty SERVER: the system's resolver).
        Some(rest) => rest.split_once('/').map_or(rest, |(_, name)| name),
        None => target.strip_prefix("dns:").unwrap_or(target),
    };
    (name.to_owned(), false)
}

/// The DNS server of a `dns://SERVER[:PORT]/NAME:PORT` target (port 53 unless given); `None`
/// for every other target (`dns:///`: the system's resolver).
fn dns_server(target: &str) -> Result<Option<SocketAddr>, InputError> {
    let Some((server, _)) = target
        .trim()
        .strip_prefix("dns://")
        .and_then(|rest| rest.split_once('/'))
    else {
        return Ok(None);
    };
    if server.is_empty() {
        return Ok(None);
    }
    if let Ok(address) = server.parse::<SocketAddr>() {
        return Ok(Some(address));
    }
    server
        .parse::<std::net::IpAddr>()
        .map(|ip| Some(SocketAddr::new(ip, 53)))
        .map_err(|_| {
            InputError(format!(
                "'{target}': '{server}' is not a DNS server's address; write dns://IP[:PORT]/NAME:PORT (e.g. dns://127.0.0.1:5353/api.local:50051), or dns:///NAME:PORT for the system's resolver"
            ))
        })
}

fn resolve(target: &str) -> Result<Resolved, InputError> {
    let server = dns_server(target)?;
    let hint = "give HOST:PORT (e.g. 127.0.0.1:50051), dns:///HOST:PORT, or ipv4:A:PORT,B:PORT";
    if target.is_empty() {
        return Err(InputError(format!(
            "say which server to load: {hint} (or \"host\" in --config)"
        )));
    }
    let (name, list) = resolve_name(target);
    let mut addresses: Vec<SocketAddr> = Vec::new();
    if list {
        let scheme = &target[..5];
        for entry in target[5..].split(',').map(str::trim) {
            let address: SocketAddr = entry.parse().map_err(|_| {
                InputError(format!(
                    "'{entry}' in '{target}' is not an address with a port: write {scheme}{}",
                    if scheme == "ipv6:" {
                        "[::1]:50051,[::2]:50051"
                    } else {
                        "127.0.0.2:50051,127.0.0.3:50051"
                    }
                ))
            })?;
            if !addresses.contains(&address) {
                addresses.push(address);
            }
        }
    } else if let Ok(address) = name.parse::<SocketAddr>() {
        // An address as such: nothing to resolve, now or on reconnect.
        addresses.push(address);
    } else {
        let (host, port) = name
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
            .ok_or_else(|| InputError(format!("'{target}' has no port; {hint}")))?;
        let naming = grpclab_load::Naming {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port,
            server,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| {
                InputError(format!(
                    "cannot start a runtime to resolve '{target}': {err}"
                ))
            })?;
        addresses = runtime
            .block_on(naming.resolve())
            .map_err(|err| InputError(format!("'{target}': {err}; {hint}")))?;
        return Ok(Resolved {
            authority: name,
            addresses,
            naming: Some(naming),
        });
    }
    if addresses.is_empty() {
        return Err(InputError(format!(
            "'{target}' resolves to no address; {hint}"
        )));
    }
    Ok(Resolved {
        authority: name,
        addresses,
        naming: None,
    })
}

/// The socket a `unix:` target names: gRPC's `unix:PATH` (relative or absolute) and
/// `unix:///ABSOLUTE_PATH`; `None` for any other target.
fn unix_socket(target: &str) -> Result<Option<std::path::PathBuf>, InputError> {
    let target = target.trim();
    if target.starts_with("unix-abstract:") {
        return Err(InputError(format!(
            "'{target}': abstract unix sockets are not supported; give unix:PATH or unix:///ABSOLUTE_PATH"
        )));
    }
    let Some(rest) = target.strip_prefix("unix:") else {
        return Ok(None);
    };
    let path = match rest.strip_prefix("//") {
        Some(absolute) if absolute.starts_with('/') => absolute,
        Some(_) => {
            return Err(InputError(format!(
                "'{target}': after unix:// comes an absolute path (unix:///tmp/server.sock), or write unix:PATH"
            )))
        }
        None => rest,
    };
    if path.is_empty() {
        return Err(InputError(format!(
            "'{target}' names no socket: give unix:PATH or unix:///ABSOLUTE_PATH"
        )));
    }
    Ok(Some(std::path::PathBuf::from(path)))
}

/// What a unix-socket run needs before it starts: a socket at the path, plaintext (gRPC over
/// a unix socket is, beside a sidecar), and the method from files or a built-in scenario
/// (reflection is asked over TCP).
fn check_unix_target(
    path: &std::path::Path,
    shown: &str,
    tls: bool,
    scenario: &ScenarioArgs,
) -> Result<(), InputError> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {}
        Ok(_) => {
            return Err(InputError(format!(
                "'{shown}': {} is not a socket; is this the path the server listens on?",
                path.display()
            )))
        }
        Err(err) => {
            return Err(InputError(format!(
                "'{shown}': {}: {err}; is the server running and listening on that socket?",
                path.display()
            )))
        }
    }
    if tls {
        return Err(InputError(format!(
            "'{shown}': TLS over a unix socket is not supported; add --insecure (plaintext, as gRPC uses beside a sidecar)"
        )));
    }
    if scenario.scenario.is_none() && scenario.proto.is_none() && scenario.protoset.is_none() {
        return Err(InputError(format!(
            "'{shown}': grpclab asks a server's reflection over TCP only; give the method with --proto/--protoset and --call, or --scenario"
        )));
    }
    Ok(())
}

/// gRPC's pick_first: the first address that accepts a connection (each tried for at most
/// the connect timeout); the first address when none does (the run's own connect then says
/// why). One address is taken as it is.
fn pick_first(addresses: &[SocketAddr], connect_timeout: std::time::Duration) -> SocketAddr {
    if addresses.len() > 1 {
        for address in addresses {
            if std::net::TcpStream::connect_timeout(address, connect_timeout).is_ok() {
                return *address;
            }
        }
    }
    addresses
        .first()
        .copied()
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)))
}

/// ghz's step and line schedules as [`Pacing::Steps`]; each missing or misplaced flag named.
fn load_steps(args: &LoadArgs) -> Result<Pacing, InputError> {
    let schedule = args.load_schedule.name();
    if args.rps != 0.0 {
        return Err(InputError(format!(
            "--rps is the const schedule's rate; with --load-schedule {schedule} give --load-start (and --load-step)"
        )));
    }
    let start = args.load_start.ok_or_else(|| {
        InputError(format!(
            "--load-schedule {schedule} needs --load-start, the first rate in req/s"
        ))
    })?;
    let step = args.load_step.ok_or_else(|| {
        InputError(format!(
            "--load-schedule {schedule} needs --load-step, the rate change per step in req/s"
        ))
    })?;
    let step_duration = match (schedule, args.load_step_duration) {
        ("line", None) => std::time::Duration::from_secs(1),
        ("line", Some(_)) => return Err(InputError(
            "--load-schedule line changes the rate every second; --load-step-duration is for step"
                .to_owned(),
        )),
        (_, Some(duration)) => duration,
        (_, None) => return Err(InputError(
            "--load-schedule step needs --load-step-duration, how long each rate holds (e.g. 5s)"
                .to_owned(),
        )),
    };
    Ok(Pacing::Steps {
        start,
        step,
        step_duration,
        end: args.load_end,
        max_duration: args.load_max_duration,
    })
}

/// ghz's step and line concurrency schedules as [`ConcurrencySteps`]; `None` for const.
fn concurrency_steps(args: &LoadArgs) -> Result<Option<ConcurrencySteps>, InputError> {
    let schedule = args.concurrency_schedule.name();
    let step_duration = match (schedule, args.concurrency_step_duration) {
        ("const", _) => return Ok(None),
        ("line", None) => std::time::Duration::from_secs(1),
        ("line", Some(_)) => return Err(InputError(
            "--concurrency-schedule line changes the concurrency every second; --concurrency-step-duration is for step"
                .to_owned(),
        )),
        (_, Some(duration)) => duration,
        (_, None) => return Err(InputError(
            "--concurrency-schedule step needs --concurrency-step-duration, how long each concurrency holds (e.g. 5s)"
                .to_owned(),
        )),
    };
    Ok(Some(ConcurrencySteps {
        start: args.concurrency_start,
        step: args.concurrency_step,
        step_duration,
        end: args.concurrency_end,
        max_duration: args.concurrency_max_duration,
    }))
}

/// What the scenario flags resolved to.
#[derive(Clone)]
pub struct LoadedScenario {
    /// The method and its framed requests.
    pub scenario: Scenario,
    /// How reports name where it came from.
    pub label: String,
    /// The JSON payload text as the user gave it (`-d`, `-d @`, `-D`), if any.
    pub payload: Option<String>,
    /// The payload's call template when something in it varies per call (bound to the
    /// method); the scenario's requests are then its rendering for call 0.
    pub template: Option<Template>,
}

/// Resolves the scenario flags into a scenario and a label for reports: `--proto`,
/// `--protoset`, `--scenario`, else the server's reflection (`reflect`), else (no server to
/// ask: `encode`) the default scenario.
pub fn load_scenario(
    args: &ScenarioArgs,
    reflect: Option<ReflectFrom<'_>>,
) -> Result<LoadedScenario, InputError> {
    let payload = match (&args.data, &args.data_file) {
        (Some(at), _) if at == "@" => {
            let mut json = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut json)
                .map_err(|err| InputError(format!("-d @: cannot read standard input: {err}")))?;
            Some(json)
        }
        (Some(json), _) => Some(json.clone()),
        (None, Some(path)) => Some(std::fs::read_to_string(path).map_err(|err| {
            InputError(format!(
                "-D/--data-file: cannot read {}: {err}",
                path.display()
            ))
        })?),
        (None, None) => None,
    };
    let binary = match (&args.binary_file, args.binary) {
        (Some(path), _) => Some(std::fs::read(path).map_err(|err| {
            InputError(format!(
                "-B/--binary-file: cannot read {}: {err}",
                path.display()
            ))
        })?),
        (None, true) => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).map_err(|err| {
                InputError(format!("-b/--binary: cannot read standard input: {err}"))
            })?;
            Some(bytes)
        }
        (None, false) => None,
    };
    let input_error = |err: grpclab_core::ScenarioError| InputError(err.to_string());
    // A schema from a .proto, a protoset or the server: the call and payload come from flags.
    let from_schema = |schema: Schema, label: String| {
        let method = schema.method(args.call.as_deref()).map_err(input_error)?;
        let (text, template) = templated(payload.as_deref(), &method)?;
        let scenario = match &binary {
            Some(bytes) => Scenario::from_method_binary(&label, method, bytes),
            None => Scenario::from_method(&label, method, text.as_deref().unwrap_or("{}")),
        }
        .map_err(input_error)?;
        Ok(LoadedScenario {
            scenario,
            label,
            payload: payload.clone(),
            template,
        })
    };
    if let Some(proto) = &args.proto {
        let schema = Schema::compile(std::slice::from_ref(proto), &args.import_paths)
            .map_err(input_error)?;
        return from_schema(schema, proto.display().to_string());
    }
    if let Some(protoset) = &args.protoset {
        let bytes = std::fs::read(protoset).map_err(|err| {
            InputError(format!(
                "--protoset: cannot read {}: {err}",
                protoset.display()
            ))
        })?;
        let label = protoset.display().to_string();
        let schema = Schema::from_descriptor_set(&label, &bytes).map_err(input_error)?;
        return from_schema(schema, label);
    }
    if let (None, Some(reflect)) = (&args.scenario, reflect) {
        let reflected = crate::reflection::fetch(&reflect, args.call.as_deref())
            .map_err(|err| InputError(err.to_string()))?;
        let label = format!("reflection ({})", reflected.version);
        let schema = Schema::from_descriptor_set(
            &format!("reflection from {}", reflect.target),
            &reflected.descriptor_set,
        )
        .map_err(input_error)?;
        return from_schema(schema, label);
    }
    let name = args.scenario.as_deref().unwrap_or(DEFAULT_SCENARIO);
    let scenario = Scenario::load(name, args.call.as_deref()).map_err(input_error)?;
    let (text, template) = templated(payload.as_deref(), scenario.method())?;
    let scenario = match (&text, &binary) {
        (_, Some(bytes)) => scenario.with_binary_payload(bytes).map_err(input_error)?,
        (Some(text), None) => scenario.with_payload(text).map_err(input_error)?,
        (None, None) => scenario,
    };
    Ok(LoadedScenario {
        scenario,
        label: name.to_owned(),
        payload,
        template,
    })
}

/// One method of a mix as the engine runs it: its requests (and template), and its
/// metadata — the run's -m with the method's own over it — split into the constant headers,
/// cached with the method's header block, and the templates rendered per call.
fn mix_method(
    loaded: &LoadedScenario,
    call: &grpclab_harness::workload::MixCall,
    run_metadata: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<grpclab_load::CallMethod, InputError> {
    let scenario = &loaded.scenario;
    let method = scenario.method();
    let mut own = grpclab_load::CallMethod::new(&scenario.path(), scenario.requests().to_vec());
    own.name = call
        .name
        .clone()
        .unwrap_or_else(|| method.full_name().to_owned());
    own.weight = call.weight;
    let mut metadata = run_metadata.cloned().unwrap_or_default();
    metadata.extend(call.metadata.clone());
    let what = format!("{}'s metadata", call.call);
    match bind_metadata(Some(&metadata), method)? {
        Some((constant, varying)) => {
            own.metadata = metadata_headers(&what, Some(&constant))?;
            own.metadata_templates = varying;
        }
        None => own.metadata = metadata_headers(&what, Some(&metadata))?,
    }
    own.renderer = loaded
        .template
        .clone()
        .map(|template| template_renderer(template, loaded.payload.as_deref(), method));
    Ok(own)
}

/// `-m` values with templates bound to the call: the constant ones (the call's names filled
/// in), and those that vary per call with their templates (`None` when no value has one).
/// A varying value's name and call 0's rendering must make a valid header, so a bad one is one
/// line now, not a broken call later.
#[allow(clippy::type_complexity)]
fn bind_metadata(
    map: Option<&std::collections::BTreeMap<String, String>>,
    method: &prost_reflect::MethodDescriptor,
) -> Result<
    Option<(
        std::collections::BTreeMap<String, String>,
        Vec<(HeaderName, Template)>,
    )>,
    InputError,
> {
    let Some(map) = map.filter(|map| map.values().any(|value| value.contains("{{"))) else {
        return Ok(None);
    };
    let call = call_info(method);
    let mut constant = std::collections::BTreeMap::new();
    let mut varying = Vec::new();
    for (name, value) in map {
        let template = Template::parse(value, "-m/--metadata")
            .map_err(|err| InputError(err.to_string()))?
            .bind(&call);
        if template.is_constant() {
            constant.insert(name.clone(), template.text());
            continue;
        }
        let checked = std::collections::BTreeMap::from([(name.clone(), call_zero(&template))]);
        let (name, _) = metadata_headers("-m/--metadata", Some(&checked))?
            .pop()
            .ok_or_else(|| InputError(format!("-m/--metadata: '{name}' gave no header")))?;
        varying.push((name, template));
    }
    Ok(Some((constant, varying)))
}

/// What a method's call-describing template actions render to.
fn call_info(method: &prost_reflect::MethodDescriptor) -> CallInfo {
    CallInfo {
        fully_qualified_name: method.full_name().to_owned(),
        method_name: method.name().to_owned(),
        // ghz's names: the service's and the messages' own, without their package.
        service_name: method.parent_service().name().to_owned(),
        input_name: method.input().name().to_owned(),
        output_name: method.output().name().to_owned(),
        client_streaming: method.is_client_streaming(),
        server_streaming: method.is_server_streaming(),
    }
}

/// The scenario's first request as JSON (proto3's mapping), for the report's `options.data`.
fn first_request_json(scenario: &Scenario) -> Option<serde_json::Value> {
    let framed = scenario.requests().first()?;
    let message = grpclab_core::framing::unframe_single(framed).ok()?;
    let decoded = prost_reflect::DynamicMessage::decode(scenario.method().input(), message).ok()?;
    serde_json::to_value(&decoded).ok()
}

/// The payload text to encode, and its template when something in it varies per call: ghz's
/// call templates. Without `{{` the text is the payload, as always; with only the call's names
/// it is rendered once; with per-call values the text returned is call 0's rendering (which
/// must encode, so a template that makes bad JSON is one line now, not an error per call).
fn templated(
    payload: Option<&str>,
    method: &prost_reflect::MethodDescriptor,
) -> Result<(Option<String>, Option<Template>), InputError> {
    let Some(text) = payload else {
        return Ok((None, None));
    };
    if !text.contains("{{") {
        return Ok((Some(text.to_owned()), None));
    }
    let template = Template::parse(text, "-d/-D")
        .map_err(|err| InputError(err.to_string()))?
        .bind(&call_info(method));
    if template.is_constant() {
        return Ok((Some(template.text()), None));
    }
    Ok((Some(call_zero(&template)), Some(template)))
}

/// A template rendered for call 0 (thread 0): what is checked before the run, so a template
/// that cannot make a valid payload or header is one line now, not an error per call.
fn call_zero(template: &Template) -> String {
    let mut first = String::new();
    template.render(
        &CallContext {
            request_number: 0,
            worker_id: "g0c0",
            call_seed: 1,
            now: std::time::SystemTime::now(),
        },
        &mut Random::new(1),
        &mut first,
    );
    first
}

/// The engine's renderer for a payload template. Planned part by part when it can be (only
/// the varying fields rendered and encoded per call, the same bytes: see
/// `grpclab_core::payload_template`); otherwise render the whole text, encode it as the input
/// message (an array's elements round-robin by request number), frame it.
fn template_renderer(
    template: Template,
    text: Option<&str>,
    method: &prost_reflect::MethodDescriptor,
) -> RequestRenderer {
    let input = method.input();
    if let Some(plan) =
        text.and_then(|text| PayloadTemplate::plan(text, &input, &call_info(method)))
    {
        return Arc::new(
            move |context: &CallContext<'_>, random: &mut Random, text: &mut String| {
                plan.render(context, random, text)
                    .map(|message| vec![message])
                    .map_err(|err| format!("call {}: {err}", context.request_number))
            },
        );
    }
    Arc::new(
        move |context: &CallContext<'_>, random: &mut Random, text: &mut String| {
            template.render(context, random, text);
            let requests = grpclab_core::scenario::encode_payload(&input, text)
                .map_err(|err| format!("call {}: {err}", context.request_number))?;
            if requests.is_empty() {
                return Err("the payload rendered to an empty array".to_owned());
            }
            Ok(requests)
        },
    )
}

/// ghz's load-schedule settings for the report, read back from the pacing they became.
fn load_shape(schedule: ScheduleShape, pacing: Pacing) -> grpclab_results::model::LoadShape {
    match pacing {
        Pacing::Steps {
            start,
            step,
            step_duration,
            end,
            max_duration,
        } => grpclab_results::model::LoadShape {
            schedule: schedule.name().to_owned(),
            start,
            end: end.unwrap_or(0.0),
            step,
            step_duration,
            max_duration: max_duration.unwrap_or_default(),
        },
        Pacing::ClosedLoop | Pacing::OpenLoop { .. } => {
            grpclab_results::model::LoadShape::default()
        }
    }
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

fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

fn show_progress(bar: &ProgressBar, snapshot: &ProgressSnapshot) {
    if bar.is_hidden() {
        return;
    }
    let fraction = match snapshot.target {
        ProgressTarget::Duration(duration) => {
            snapshot.measured.as_secs_f64() / duration.as_secs_f64().max(1e-9)
        }
        ProgressTarget::Total(total) => snapshot.completed as f64 / total.max(1) as f64,
    };
    bar.set_position((fraction.clamp(0.0, 1.0) * 1000.0) as u64);
    let phase = if snapshot.warming_up {
        "warming up · "
    } else {
        ""
    };
    bar.set_message(format!(
        "{phase}{} calls · {:.0} req/s · {} errors",
        snapshot.completed, snapshot.current_rps, snapshot.errors
    ));
}

/// The streaming flags as given, in one canonical line (`call-count=5 interval=10ms ...`), for
/// the result's options: generators of one run have the same.
fn stream_flags(args: &LoadArgs) -> String {
    let mut flags = Vec::new();
    if let Some(count) = args.stream_call_count {
        flags.push(format!("call-count={count}"));
    }
    if let Some(duration) = args.stream_call_duration {
        flags.push(format!(
            "call-duration={}",
            humantime::format_duration(duration)
        ));
    }
    if let Some(interval) = args.stream_interval {
        flags.push(format!("interval={}", humantime::format_duration(interval)));
    }
    if args.stream_dynamic_messages {
        flags.push("dynamic-messages".to_owned());
    }
    if args.stream_independent {
        flags.push("independent".to_owned());
    }
    if let Some(stamp) = &args.stream_stamp {
        flags.push(format!("stamp={stamp}"));
    }
    flags.join(" ")
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

    #[test]
    fn targets_need_a_port() {
        assert!(resolve("localhost").unwrap_err().0.contains("no port"));
        assert_eq!(resolve("127.0.0.1:9").unwrap().addresses[0].port(), 9);
        let listed = resolve("ipv4:127.0.0.2:9,127.0.0.3:9,127.0.0.2:9").unwrap();
        assert_eq!(listed.addresses.len(), 2, "each address once");
        assert_eq!(listed.authority, "127.0.0.2:9");
        let named = resolve("dns:///localhost:9").unwrap();
        assert_eq!(named.authority, "localhost:9");
        assert!(named.addresses.iter().all(|a| a.ip().is_loopback()));
        assert!(resolve("ipv4:127.0.0.2")
            .unwrap_err()
            .0
            .contains("not an address"));
        assert!(resolve("unix:/tmp/s.sock").unwrap_err().0.contains("unix"));
    }
}
