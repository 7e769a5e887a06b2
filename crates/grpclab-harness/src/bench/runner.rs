//! One implementation's run: build, start under limits, wait until ready, warm up and measure
//! while sampling, stop, and say what happened. Never panics on a misbehaving server: every
//! failure becomes a FAILED row with its reason and the tail of the server's stderr.

use grpclab_core::tls::TlsClient;
use grpclab_core::Scenario;
use grpclab_load::{CancellationToken, LoadConfig, Pacing};
use serde::Serialize;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::config::BenchClient;
use super::config::BenchConfig;
use super::limits::{self, AppliedLimits, CorePlan, ServerCgroup};
use super::names::sanitize;
use super::process::{describe_exit, Launch, ServerProcess};
use super::readiness::{fetch_stats, free_port, shape_of, wait_until_ready};
use super::sampler::Usage;
use super::suite::ImplementationSpec;
use super::window::Window;
use grpclab_results::model::{JsonReport, RunOptions};

/// How a row ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowStatus {
    /// Measured.
    Ok,
    /// Not measured, or not to be trusted; see the reason.
    Failed,
    /// Not run: its toolchain is missing (the reason says what to install).
    Skipped,
}

/// How a row's status is named in tables and progress lines.
pub fn status_word(status: RowStatus) -> &'static str {
    match status {
        RowStatus::Ok => "OK",
        RowStatus::Failed => "FAILED",
        RowStatus::Skipped => "SKIPPED",
    }
}

/// Everything about one implementation's run, as written to `<name>.json`.
/// Read back by `grpclab report` (fields added later default, so older folders still read).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ImplResult {
    /// The row's name.
    pub name: String,
    /// OK or FAILED.
    pub status: RowStatus,
    /// Why it failed.
    pub reason: Option<String>,
    /// The last lines of the server's stderr, for a failure.
    pub stderr_tail: Vec<String>,
    /// The start command as run.
    pub command: String,
    /// The load result (ghz-compatible JSON, histogram included), if a window was measured.
    pub load: Option<JsonReport>,
    /// CPU and memory over the window.
    pub usage: Usage,
    /// Heap allocations per call over the window (servers with grpclab's admin RPC).
    pub allocations_per_call: Option<f64>,
    /// Bytes allocated per call over the window.
    pub bytes_per_call: Option<f64>,
    /// Calls the server itself counted over the window (servers with grpclab's admin RPC):
    /// the truth a client's count is checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_calls: Option<u64>,
    /// The limits the kernel really applied.
    pub limits: AppliedLimits,
    /// `--profile cpu`: the flamegraph and top functions.
    pub cpu_profile: Option<super::profile::CpuProfile>,
    /// `--profile alloc`: the top allocation sites.
    pub alloc_profile: Option<super::alloc_profile::AllocProfile>,
    /// Why a requested profile is missing (perf absent or not permitted, a server without
    /// grpclab's heap profiler); one line per profile.
    pub profile_note: Option<String>,
    /// What limited the row's figures, with the figures that decided it.
    pub bound_by: Option<grpclab_results::verdict::bound::Bound>,
    /// `--threshold` verdicts on the row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<grpclab_results::verdict::ThresholdVerdict>,
    /// `--capacity`: the search's answer and every probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::capacity::CapacityReport>,
}

impl ImplResult {
    fn skipped(name: &str, command: &str, reason: String) -> ImplResult {
        ImplResult {
            status: RowStatus::Skipped,
            ..ImplResult::failed(name, command, reason, Vec::new(), AppliedLimits::default())
        }
    }

    fn failed(
        name: &str,
        command: &str,
        reason: String,
        tail: Vec<String>,
        limits: AppliedLimits,
    ) -> ImplResult {
        // sh's "not found" is the commonest start-up failure of a hand-written suite; a
        // suite naming `grpclab` itself needs the placeholder, as the binary is seldom on
        // the PATH (cargo run, target/release).
        let reason = match tail.iter().find(|line| line.ends_with(": not found")) {
            Some(line) if line.contains("grpclab: not found") => format!(
                "{reason} (sh: grpclab: not found — write {{grpclab}} in the suite's command: it is this binary, wherever it is)"
            ),
            Some(line) => format!("{reason} (a command is not on the PATH: {line})"),
            None => reason,
        };
        ImplResult {
            name: name.to_owned(),
            status: RowStatus::Failed,
            reason: Some(reason),
            stderr_tail: tail,
            command: command.to_owned(),
            load: None,
            usage: Usage::default(),
            allocations_per_call: None,
            bytes_per_call: None,
            server_calls: None,
            limits,
            cpu_profile: None,
            alloc_profile: None,
            profile_note: None,
            bound_by: None,
            thresholds: Vec::new(),
            capacity: None,
        }
    }
}

/// What the runner needs besides the implementation.
pub struct RunContext<'a> {
    /// Settings.
    pub config: &'a BenchConfig,
    /// The scenario to send.
    pub scenario: &'a Scenario,
    /// `--workload`: the mix to send instead of the scenario's payload (empty: none).
    pub methods: &'a [grpclab_load::CallMethod],
    /// `--workload`: its flows, whose steps are the last of `methods`.
    pub flows: &'a [grpclab_load::flow::FlowPlan],
    /// The mix's seed.
    pub mix_seed: Option<u64>,
    /// A folder with the scenario's `.proto` files and payload (`{scenario_dir}`).
    pub scenario_dir: std::path::PathBuf,
    /// The results folder (`--client ghz` writes the files ghz reads under it).
    pub results_dir: std::path::PathBuf,
    /// Cores for server and client.
    pub cores: &'a CorePlan,
    /// Ctrl-C.
    pub cancel: &'a CancellationToken,
    /// Progress lines for the user (the runner never prints).
    pub progress: &'a mut dyn FnMut(&str),
    /// A live view's snapshots of the measured load (with the last second's percentiles);
    /// `None`: the load runs silently.
    pub snapshots: Option<&'a mut dyn FnMut(&grpclab_load::ProgressSnapshot)>,
    /// `--profile cpu`: where the profile files go.
    pub cpu_profile_dir: Option<std::path::PathBuf>,
    /// `--profile cpu` (frame pointers) or `cpu-dwarf`: how perf walks the stacks.
    pub cpu_call_graph: super::profile::CallGraph,
    /// `--profile alloc`: where the allocation profiles go.
    pub alloc_profile_dir: Option<std::path::PathBuf>,
    /// `--tls`: the servers serve TLS with this pair and the load trusts it.
    pub tls: Option<&'a BenchTls>,
    /// `--capacity SLO`: after the window, search each server's capacity at the SLO.
    pub capacity: Option<&'a CapacityPlan>,
}

/// `bench --capacity`: the SLO every row's search is judged against, and its probe bounds.
#[derive(Debug, Clone)]
pub struct CapacityPlan {
    /// The SLO's thresholds.
    pub slo: Vec<grpclab_results::verdict::Threshold>,
    /// Shortest probe window.
    pub min_probe: Duration,
    /// Longest probe window.
    pub max_probe: Duration,
}

/// A bench over TLS: the pair every server is started with (`{tls_cert}`, `{tls_key}` in its
/// suite entry's `tls` arguments) and the client that trusts it.
#[derive(Debug, Clone)]
pub struct BenchTls {
    /// The server's certificate (PEM).
    pub cert: std::path::PathBuf,
    /// Its key (PEM).
    pub key: std::path::PathBuf,
    /// The load's (and the harness's admin calls') TLS client.
    pub client: grpclab_core::tls::TlsClient,
}

/// Runs one implementation from build to stop.
pub fn run_one(spec: &ImplementationSpec, context: &mut RunContext<'_>) -> ImplResult {
    let config = context.config;
    let name = spec.name.as_str();
    let mut placeholders = match super::build::prepare(
        spec,
        context.scenario.name(),
        &context.scenario_dir,
        config.server_threads(),
        context.progress,
    ) {
        super::build::Prepared::Ready { placeholders, note } => {
            if let Some(note) = note {
                (context.progress)(&format!("{name}: {note}"));
            }
            placeholders
        }
        super::build::Prepared::Skipped(reason) => {
            return ImplResult::skipped(name, &spec.command, reason);
        }
        super::build::Prepared::Failed(reason, tail) => {
            return ImplResult::failed(name, &spec.command, reason, tail, AppliedLimits::default())
        }
    };
    let port = match free_port() {
        Ok(port) => port,
        Err(err) => {
            return ImplResult::failed(
                name,
                &spec.command,
                format!("no free port: {err}"),
                Vec::new(),
                AppliedLimits::default(),
            )
        }
    };
    // Across --network: the server in a namespace of its own, the client in another.
    let network = match config.network {
        grpclab_net::NetworkSpec::Link(link) => match grpclab_net::NetworkPair::up(link) {
            Ok(pair) => Some(pair),
            Err(err) => {
                return ImplResult::failed(
                    name,
                    &spec.command,
                    format!("no network {}: {}", config.network, err.0),
                    Vec::new(),
                    AppliedLimits::default(),
                )
            }
        },
        grpclab_net::NetworkSpec::Loopback => None,
    };
    let host = match network {
        Some(_) => std::net::IpAddr::V4(grpclab_net::namespace::SERVER_ADDRESS),
        None => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
    };
    let addr = SocketAddr::new(host, port);
    placeholders.port = Some(port);
    placeholders.host = host.to_string();
    let mut command = placeholders.fill(&spec.command);
    if let Some(tls) = context.tls {
        let Some(tls_args) = &spec.tls else {
            let reason = match &spec.no_tls {
                Some(why) => format!("no TLS under --tls: {why}"),
                None => "no TLS arguments in its suite entry: add tls = \"...\" with {tls_cert} and {tls_key} (its server's flags for a certificate and key) to run it under --tls".to_owned(),
            };
            return ImplResult::skipped(name, &spec.command, reason);
        };
        placeholders.tls = Some((tls.cert.clone(), tls.key.clone()));
        command = format!("{command} {}", placeholders.fill(tls_args));
    }

    // A harness killed with SIGKILL could not remove its cgroups: the next one does.
    let (swept, stayed) = limits::sweep_stale_cgroups();
    for folder in &swept {
        (context.progress)(&format!(
            "removed {}, left by a grpclab that has ended",
            folder.display()
        ));
    }
    for why in &stayed {
        (context.progress)(&format!("WARNING: {why}, left by a grpclab that has ended"));
    }
    let cgroup_name = format!("grpclab-{}-{}", std::process::id(), sanitize(name));
    let (cgroup, cgroup_note) =
        match ServerCgroup::create(&cgroup_name, config.server_cpus, config.server_ram) {
            Ok(cgroup) => (Some(cgroup), None),
            Err(reason) => (
                None,
                Some(format!(
                    "no cgroup ({reason}): CPU affinity only, no CPU quota or memory limit"
                )),
            ),
        };
    let mut limits = cgroup
        .as_ref()
        .map(ServerCgroup::read_back)
        .unwrap_or_else(|| AppliedLimits {
            mechanism: "affinity-only".to_owned(),
            ..AppliedLimits::default()
        });
    limits.note = cgroup_note;
    limits.client_cores = context.cores.client.clone();

    let mut env: Vec<(String, String)> = placeholders.env(spec).into_iter().collect();
    env.push((
        "GRPC_SERVER_CPUS".to_owned(),
        config.server_cpus.to_string(),
    ));
    env.push((
        "GRPC_SERVER_RAM".to_owned(),
        format!("{}m", config.server_ram >> 20),
    ));
    // Where the client reaches the server: a peer listens there ({host} in a command).
    env.push(("GRPC_SERVER_HOST".to_owned(), host.to_string()));
    if context.alloc_profile_dir.is_some() {
        // Should the server be a JVM: Flight Recorder samples allocations when a thread takes
        // a new TLAB, and grown TLABs (megabytes) leave a window with a handful of samples.
        // Small fixed TLABs give it hundreds; only under --profile alloc, which perturbs
        // anyway. Other runtimes ignore the variable.
        let mut options = std::env::var("JAVA_TOOL_OPTIONS").unwrap_or_default();
        options.push_str(" -XX:TLABSize=16k -XX:-ResizeTLAB");
        env.push(("JAVA_TOOL_OPTIONS".to_owned(), options.trim().to_owned()));
    }
    match &network {
        Some(pair) => (context.progress)(&format!(
            "{name}: starting at {addr} in {}, across {} each direction (a link grpclab emulates: this kernel has no sch_netem), the client in {}",
            pair.server_namespace(),
            config.network,
            pair.client_namespace()
        )),
        None => (context.progress)(&format!("{name}: starting on port {port}")),
    }
    let launch = Launch {
        command: &command,
        workdir: spec.workdir.as_deref(),
        env,
        cgroup_procs: cgroup
            .as_ref()
            .map(ServerCgroup::procs_files)
            .unwrap_or_default(),
        cores: limits::core_list(&context.cores.server),
        netns: network
            .as_ref()
            .map(grpclab_net::NetworkPair::server_namespace),
    };
    let mut server = match ServerProcess::start(&launch) {
        Ok(server) => server,
        Err(err) => {
            if let Some(Err(warning)) = cgroup.map(ServerCgroup::remove) {
                (context.progress)(&format!("{name}: WARNING: {warning}"));
            }
            return ImplResult::failed(
                name,
                &command,
                format!("cannot start: {err}"),
                Vec::new(),
                limits,
            );
        }
    };
    // The client's side of the network for the row's readiness checks, window and counters
    // (threads and processes started meanwhile are the client's too).
    let client_side = network
        .as_ref()
        .map(grpclab_net::NetworkPair::client_side)
        .transpose()
        .map_err(|err| err.0);
    let result = match client_side {
        Ok(side) => {
            let result = measure(
                spec,
                &command,
                &mut server,
                addr,
                (cgroup.as_ref(), network.as_ref()),
                &mut limits,
                context,
            );
            drop(side);
            result
        }
        Err(reason) => ImplResult::failed(name, &command, reason, Vec::new(), limits.clone()),
    };
    if let Some(windows) = result.load.as_ref().and_then(|load| load.server_windows) {
        (context.progress)(&format!(
            "{name}: the server's HTTP/2 windows, as its frames set them: {}",
            windows.describe()
        ));
    }
    if let Some(waits) = result.load.as_ref().and_then(|load| load.window_waits) {
        (context.progress)(&format!(
            "{name}: requests waited for the server's windows {} times with its connection window spent and {} for a stream's window, {:.3} s in all",
            waits.connection,
            waits.stream,
            waits.waited_ns as f64 / 1e9
        ));
    }
    let (status, killed) = server.stop(config.stop_grace);
    if let Some(pair) = network {
        for (direction, counts) in ["client → server", "server → client"]
            .iter()
            .zip(pair.down())
        {
            (context.progress)(&format!(
                "{name}: network {direction}: {} packets, {} lost, {} dropped by a full queue; the link's CPU {}",
                counts.packets,
                counts.lost,
                counts.overflowed,
                grpclab_net::link::cpu_text(&counts)
            ));
        }
    }
    let oom_kills = cgroup.as_ref().map_or(0, ServerCgroup::oom_kills);
    // Removing the cgroup kills what is left in it: a child that left the server's process
    // group (setsid) cannot outlive the run.
    if let Some(Err(warning)) = cgroup.map(ServerCgroup::remove) {
        (context.progress)(&format!("{name}: WARNING: {warning}"));
        limits.note = Some(match limits.note.take() {
            Some(note) => format!("{note}; {warning}"),
            None => warning,
        });
    }
    let mut result = result;
    result.limits = limits;
    let reported_as_oom = result.reason.as_deref().is_some_and(|r| r.contains("OOM"));
    if oom_kills > 0 && !reported_as_oom {
        result.status = RowStatus::Failed;
        result.reason = Some(format!(
            "OOM-killed: the server exceeded its memory limit of {}m (GRPC_SERVER_RAM){}",
            config.server_ram >> 20,
            result
                .reason
                .as_deref()
                .map(|r| format!("; {r}"))
                .unwrap_or_default()
        ));
        result.stderr_tail = server.stderr_tail();
    }
    if killed && result.status == RowStatus::Ok {
        (context.progress)(&format!(
            "{name}: did not exit within {}s of SIGTERM; killed ({})",
            config.stop_grace.as_secs(),
            status.map(describe_exit).unwrap_or_default()
        ));
    }
    result
}

/// Readiness, warmup and the measured window, with the sampler and the admin counters.
fn measure(
    spec: &ImplementationSpec,
    command: &str,
    server: &mut ServerProcess,
    addr: SocketAddr,
    (cgroup, network): (Option<&ServerCgroup>, Option<&grpclab_net::NetworkPair>),
    limits: &mut AppliedLimits,
    context: &mut RunContext<'_>,
) -> ImplResult {
    let config = context.config;
    let name = spec.name.as_str();
    let tls_client = context.tls.map(|tls| tls.client.clone());
    if let Err(reason) = get_ready(
        spec,
        server,
        addr,
        cgroup,
        limits,
        context,
        tls_client.as_ref(),
    ) {
        return ImplResult::failed(name, command, reason, server.stderr_tail(), limits.clone());
    }
    // `--client ghz`: ghz's own warm-up run first (as grpc_bench does), so the monitor's
    // window starts with the measured run.
    let ghz = match config.client {
        BenchClient::Grpclab => None,
        BenchClient::Ghz => match ghz_window_plan(name, addr, context) {
            Ok(plan) => Some(plan),
            Err(reason) => {
                return ImplResult::failed(
                    name,
                    command,
                    reason,
                    server.stderr_tail(),
                    limits.clone(),
                )
            }
        },
    };

    let (load, options) = row_load(context, addr, name, tls_client.clone());
    let capacity_load = load.clone();

    // The monitor: at the end of the warmup it reads the admin counters and starts the
    // sampler; if the server dies, it stops the load at once.
    let load_cancel = context.cancel.child_token();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    // The monitor says when the window's counters and samplers are started: another client's
    // run starts only then, so the server's count covers all of it.
    let (window_started_tx, window_started_rx) = std::sync::mpsc::channel::<()>();
    let pid = server.pid();
    let warmup = if ghz.is_some() {
        Duration::ZERO
    } else {
        config.warmup
    };
    // Around the load: the client's own CPU and the cgroup's throttling, for "bound by".
    let throttle_file = cgroup.map(ServerCgroup::cpu_stat_file);
    let throttle_before = throttle_file.as_deref().and_then(limits::throttle_counts);
    let client_cpu = super::sampler::OwnCpu::start();
    let link_before = network.map(|pair| (pair.counts(), std::time::Instant::now()));
    let monitor = super::monitor::spawn(
        super::monitor::MonitorPlan {
            pid,
            warmup,
            target: addr.to_string(),
            tls: tls_client.clone(),
            cpu_usage_file: cgroup.and_then(ServerCgroup::cpu_usage_file),
            profile_dir: context.cpu_profile_dir.clone(),
            call_graph: context.cpu_call_graph,
            alloc_dir: context.alloc_profile_dir.clone(),
            profile_name: sanitize(name),
            cancel: load_cancel.clone(),
        },
        done_rx,
        window_started_tx,
    );
    let outcome = match (&ghz, context.snapshots.as_mut()) {
        (Some(plan), _) => {
            // Err: the monitor ended first (the server died); ghz then fails by itself.
            let _ = window_started_rx.recv();
            Window::Ghz(plan.run(config.duration, &load_cancel))
        }
        (None, Some(show)) => {
            let mut load = load;
            load.live_latency = true;
            Window::Engine(
                grpclab_load::run(load, &load_cancel, &mut |snapshot| show(snapshot)).map(Box::new),
            )
        }
        (None, None) => {
            Window::Engine(grpclab_load::run(load, &load_cancel, &mut |_| {}).map(Box::new))
        }
    };
    let _ = done_tx.send(());
    let own_cpu_percent = client_cpu.percent();
    let link_over_load = network.zip(link_before).map(|(pair, (before, started))| {
        let after = pair.counts();
        let over: Vec<_> = after.iter().zip(&before).map(|(a, b)| a.since(b)).collect();
        (over, started.elapsed(), pair.spec())
    });
    let throttled_share = limits::throttled_share(
        throttle_before,
        throttle_file.as_deref().and_then(limits::throttle_counts),
    );
    let super::monitor::MonitorOutcome {
        usage,
        stats_before,
        died,
        profile,
        alloc_profile: alloc_stopped,
        jfr,
    } = monitor.join().unwrap_or_default();
    let mut notes = Vec::new();
    let mut cpu_profile = keep_profile(profile, name, context.progress, &mut notes);
    if let Some(hint) = cpu_profile.as_ref().and_then(|p| p.hint.clone()) {
        (context.progress)(&format!("{name}: CPU profile: {hint}"));
        notes.push(format!("CPU profile: {hint}"));
    }
    let stats_after = if died {
        None
    } else {
        fetch_stats(&addr.to_string(), tls_client.as_ref())
    };
    let window_calls = match (&stats_before, &stats_after) {
        (Some(before), Some(after)) => Some(after.calls.saturating_sub(before.calls)),
        _ => None,
    };
    let mut alloc_profile = keep_profile(
        alloc_stopped.map(|stopped| stopped.and_then(|s| s.report(window_calls))),
        name,
        context.progress,
        &mut notes,
    );
    // The JVM's recording: per call over the calls the load measured (a JVM peer has no
    // admin counters).
    let figures = outcome.figures(options, own_cpu_percent, context.progress, name);
    let measured_calls = figures.as_ref().ok().map(|figures| figures.report.count);
    jvm_profiles(
        jfr,
        name,
        context,
        &mut notes,
        (window_calls.or(measured_calls), config.duration),
        (&mut cpu_profile, &mut alloc_profile),
    );
    let profile_note = (!notes.is_empty()).then(|| notes.join("; "));

    let figures = match figures {
        Ok(figures) => figures,
        Err(err) => {
            return ImplResult::failed(name, command, err, server.stderr_tail(), limits.clone())
        }
    };
    let mut evidence = figures.evidence(config, throttled_share);
    evidence.network = link_over_load.map(|(over, elapsed, link)| {
        network_evidence(
            &config.network.to_string(),
            link,
            &over,
            elapsed,
            mean_request_bytes(&capacity_load),
            figures.report.server_windows,
        )
    });
    if let (Some(network), None) = (evidence.network.as_mut(), &ghz) {
        network.window_waits = Some(grpclab_results::verdict::bound::WindowWaitEvidence::of(
            &figures
                .report
                .window_waits
                .map(Into::into)
                .unwrap_or_default(),
            config.connections,
            Duration::from_nanos(figures.report.whole_run),
        ));
    }
    let report = figures.report;
    let (allocations_per_call, bytes_per_call) = allocations_per_call(
        stats_before.as_ref(),
        stats_after.as_ref(),
        alloc_profile.as_ref(),
    );
    let (status, reason, tail) = row_end(died, server, context.cancel);
    let bound_by = (status == RowStatus::Ok).then(|| {
        grpclab_results::verdict::bound::bound_by(&grpclab_results::verdict::bound::BoundEvidence {
            server_cpu_percent: Some(usage.cpu_percent),
            server_memory_peak: Some(usage.memory_peak_bytes),
            ..evidence
        })
    });
    // The capacity search runs on the warm server after the window, so the table's figures
    // are the same with or without it.
    let capacity = match (context.capacity, status) {
        (Some(plan), RowStatus::Ok) => {
            Some(search_capacity(plan, &capacity_load, name, pid, context))
        }
        _ => None,
    };
    ImplResult {
        capacity,
        bound_by,
        thresholds: Vec::new(),
        name: name.to_owned(),
        status,
        reason,
        stderr_tail: tail,
        command: command.to_owned(),
        load: Some(report),
        usage,
        allocations_per_call,
        bytes_per_call,
        server_calls: window_calls,
        limits: limits.clone(),
        cpu_profile,
        alloc_profile,
        profile_note,
    }
}

/// One request message's mean size over the requests a load sends, bytes.
pub fn mean_request_bytes(load: &grpclab_load::LoadConfig) -> f64 {
    let (count, bytes) = load
        .methods
        .iter()
        .flat_map(|method| method.requests.iter())
        .fold((0usize, 0usize), |(n, sum), r| (n + 1, sum + r.len()));
    bytes as f64 / count.max(1) as f64
}

/// What a load saw of its network, for "bound by": the link's counts over the load
/// (`over`, per direction, across `elapsed`), the requests' mean size, the server's windows.
pub fn network_evidence(
    spec: &str,
    link: grpclab_net::LinkSpec,
    over: &[grpclab_net::link::DirectionCounts],
    elapsed: Duration,
    request_bytes: f64,
    windows: Option<grpclab_results::model::ServerWindows>,
) -> grpclab_results::verdict::bound::NetworkEvidence {
    let direction = |i: usize| over.get(i).copied().unwrap_or_default();
    grpclab_results::verdict::bound::NetworkEvidence {
        spec: spec.to_owned(),
        round_trip_ns: 2.0 * link.delay.as_nanos() as f64,
        rate_bits: link.rate_bits,
        elapsed_s: elapsed.as_secs_f64(),
        bytes: [direction(0).bytes, direction(1).bytes],
        link_cpu_s: [
            direction(0).cpu.as_secs_f64(),
            direction(1).cpu.as_secs_f64(),
        ],
        request_bytes,
        stream_window: windows.map(|w| w.stream_window_largest),
        connection_window: windows.map(|w| w.connection_window_largest),
        window_waits: None,
    }
}

/// Waits for the server to answer its first call (an OOM at start-up named as one), reads the
/// CPUs it may use, pins the client to its cores and says the row is warming up. `Err` holds
/// why the row failed.
fn get_ready(
    spec: &ImplementationSpec,
    server: &mut ServerProcess,
    addr: SocketAddr,
    cgroup: Option<&ServerCgroup>,
    limits: &mut AppliedLimits,
    context: &mut RunContext<'_>,
    tls_client: Option<&TlsClient>,
) -> Result<(), String> {
    let config = context.config;
    let name = spec.name.as_str();
    if let Err(reason) = wait_until_ready(
        server,
        addr,
        spec.ready,
        context.scenario,
        config.ready_timeout,
        context.cancel,
        tls_client,
    ) {
        // A server that dies at start-up because of its memory limit is an OOM, not a crash.
        let reason = if cgroup.is_some_and(|c| c.oom_kills() > 0) {
            format!("OOM-killed during start-up: the server exceeded its memory limit of {}m (GRPC_SERVER_RAM)", config.server_ram >> 20)
        } else {
            reason
        };
        return Err(reason);
    }
    limits.server_cpus_allowed = limits::cpus_allowed(server.pid());
    if let Err(err) = limits::pin_current_thread(&context.cores.client) {
        (context.progress)(&format!(
            "{name}: cannot pin the client to cores {:?}: {err}",
            context.cores.client
        ));
    }
    (context.progress)(&format!(
        "{name}: ready; warming up {}s, then measuring {}s{}",
        config.warmup.as_secs_f64(),
        config.duration.as_secs_f64(),
        match config.client {
            BenchClient::Grpclab => String::new(),
            client => format!(" with {}", client.name()),
        }
    ));
    Ok(())
}

/// `--client ghz`: ghz found, its files written, and its warm-up run done.
fn ghz_window_plan(
    name: &str,
    addr: SocketAddr,
    context: &mut RunContext<'_>,
) -> Result<super::ghz_client::GhzPlan, String> {
    let binary = super::ghz_client::find()?;
    let plan = super::ghz_client::GhzPlan::prepare(
        binary,
        addr.to_string(),
        context.scenario,
        &context.results_dir.join("ghz").join(sanitize(name)),
        context.config,
        context.tls.map(|tls| tls.cert.clone()),
    )?;
    if !context.config.warmup.is_zero() {
        plan.run(context.config.warmup, context.cancel)
            .map_err(|err| format!("ghz's warm-up run: {err}"))?;
    }
    Ok(plan)
}

/// How the row ended: its server exited (with the tail of its stderr), Ctrl-C cut the window,
/// or it was measured.
fn row_end(
    died: bool,
    server: &mut ServerProcess,
    cancel: &CancellationToken,
) -> (RowStatus, Option<String>, Vec<String>) {
    if died || server.exited().is_some() {
        let exit = server
            .exited()
            .map(describe_exit)
            .unwrap_or_else(|| "ended".to_owned());
        (
            RowStatus::Failed,
            Some(format!("the server exited during the run ({exit})")),
            server.stderr_tail(),
        )
    } else if cancel.is_cancelled() {
        (
            RowStatus::Failed,
            Some("interrupted (Ctrl-C): partial window".to_owned()),
            Vec::new(),
        )
    } else {
        (RowStatus::Ok, None, Vec::new())
    }
}

/// The row's load (grpc_bench's settings as the engine's) and the options its report states.
fn row_load(
    context: &RunContext<'_>,
    addr: SocketAddr,
    name: &str,
    tls: Option<grpclab_core::tls::TlsClient>,
) -> (LoadConfig, RunOptions) {
    let config = context.config;
    let mut load = LoadConfig::new(
        addr,
        &context.scenario.path(),
        context.scenario.requests().to_vec(),
    );
    load.shape = shape_of(context.scenario);
    if !context.methods.is_empty() {
        load.methods = context.methods.to_vec();
        load.flows = context.flows.to_vec();
        load.mix_seed = context.mix_seed.unwrap_or_default();
    }
    load.concurrency = config.concurrency;
    load.connections = config.connections;
    load.pacing = if config.qps == 0 {
        Pacing::ClosedLoop
    } else {
        Pacing::OpenLoop {
            rate: config.qps as f64,
        }
    };
    load.duration = Some(config.duration);
    load.total = None;
    load.warmup = config.warmup;
    load.threads = config.client_cpus;
    load.tls = tls;
    if config.protocol != grpclab_core::protocol::Protocol::Grpc {
        // gRPC-Web and Connect run on the h2 crate's transport (the engine speaks gRPC).
        load.transport = grpclab_load::Transport::H2;
        load.protocol = config.protocol;
    }
    let options = RunOptions {
        name: Some(name.to_owned()),
        host: addr.to_string(),
        call: context.scenario.method().full_name().to_owned(),
        scenario: context.scenario.name().to_owned(),
        distinct_requests: load.methods.iter().map(|m| m.requests.len()).sum(),
        concurrency: load.concurrency,
        connections: load.connections,
        rps: config.qps as f64,
        duration: Some(config.duration),
        total: None,
        warmup: config.warmup,
        timeout: load.timeout,
        dial_timeout: grpclab_load::CONNECT_TIMEOUT,
        cpus: load.threads,
        transport: match load.transport {
            grpclab_load::Transport::Engine => "lab".to_owned(),
            grpclab_load::Transport::H2 => "h2".to_owned(),
        },
        protocol: match config.protocol {
            grpclab_core::protocol::Protocol::Grpc => String::new(),
            other => other.name().to_owned(),
        },
        mix_seed: (load.methods.len() > 1).then_some(load.mix_seed),
        requests_digest: load.requests_digest(),
        ..RunOptions::default()
    };
    (load, options)
}

/// A JVM's Flight Recorder file read into the row's CPU and allocation profiles (allocations
/// per call over `calls`), in place of perf's and dhat's; what could not be read, and a CPU
/// recording too thin for its `window`, becomes a note.
fn jvm_profiles(
    jfr: Option<Result<std::path::PathBuf, String>>,
    name: &str,
    context: &mut RunContext<'_>,
    notes: &mut Vec<String>,
    (calls, window): (Option<u64>, std::time::Duration),
    (cpu_profile, alloc_profile): (
        &mut Option<super::profile::CpuProfile>,
        &mut Option<super::alloc_profile::AllocProfile>,
    ),
) {
    let samples = keep_profile(jfr, name, context.progress, notes).and_then(|file| {
        keep_profile(
            Some(super::jfr::read(&file).map(|samples| (file, samples))),
            name,
            context.progress,
            notes,
        )
    });
    if let Some((file, samples)) = samples {
        let dir = file.parent().unwrap_or(std::path::Path::new("."));
        let profile_name = sanitize(name);
        if context.cpu_profile_dir.is_some() {
            notes.extend(super::jfr::thin_recording_note(
                samples.execution_count(),
                window,
            ));
            *cpu_profile = keep_profile(
                Some(super::jfr::cpu_profile(&samples, dir, &profile_name)),
                name,
                context.progress,
                notes,
            );
        }
        if context.alloc_profile_dir.is_some() {
            *alloc_profile = keep_profile(
                Some(super::jfr::alloc_profile(
                    &samples,
                    &file,
                    &profile_name,
                    calls,
                )),
                name,
                context.progress,
                notes,
            );
        }
    }
}

/// The server's heap allocations and bytes per call over the window, from its admin counters
/// (`None` without them); under a heap profile from dhat's totals, since the counting
/// allocator then also counts dhat's own bookkeeping.
fn allocations_per_call(
    before: Option<&grpclab_server::pb_admin::StatsReply>,
    after: Option<&grpclab_server::pb_admin::StatsReply>,
    alloc_profile: Option<&super::alloc_profile::AllocProfile>,
) -> (Option<f64>, Option<f64>) {
    let per_call = |before: u64, after: u64, calls: u64| {
        (calls > 0).then(|| (after.saturating_sub(before)) as f64 / calls as f64)
    };
    let (Some(before), Some(after)) = (before, after) else {
        return (None, None);
    };
    let calls = after.calls.saturating_sub(before.calls);
    match alloc_profile {
        Some(profile) => (
            per_call(0, profile.allocations, calls),
            per_call(0, profile.bytes, calls),
        ),
        None => (
            per_call(before.allocations, after.allocations, calls),
            per_call(before.allocated_bytes, after.allocated_bytes, calls),
        ),
    }
}

/// One capacity probe: `load` at `rate` (a closed loop for `None`) for `window` after
/// `warmup`, with the client's own CPU and the server's (`server`: CPU seconds and RSS, read
/// before and after) around it. Shared by `bench --capacity` and `grpclab capacity`.
pub fn capacity_probe(
    load: &LoadConfig,
    rate: Option<f64>,
    window: Duration,
    warmup: Duration,
    cancel: &CancellationToken,
    server: &dyn Fn() -> Option<(f64, u64)>,
) -> Result<crate::capacity::ProbeMeasure, grpclab_load::LoadError> {
    let threads = load.threads.max(1) as f64;
    let mut config = load.clone();
    config.pacing = match rate {
        Some(rate) => Pacing::OpenLoop { rate },
        None => Pacing::ClosedLoop,
    };
    config.duration = Some(window);
    config.total = None;
    config.warmup = warmup;
    config.live_latency = false;
    let client_cpu = super::sampler::OwnCpu::start();
    let server_before = server();
    let started = Instant::now();
    let result = grpclab_load::run(config, cancel, &mut |_| {})?;
    let wall = started.elapsed().as_secs_f64().max(1e-9);
    let server = match (server_before, server()) {
        (Some((before, _)), Some((after, rss))) => Some(crate::capacity::ServerUsage {
            cpu_percent: 100.0 * (after - before).max(0.0) / wall,
            rss_bytes: rss,
        }),
        _ => None,
    };
    Ok(crate::capacity::ProbeMeasure {
        duration: result.elapsed,
        calls: result.count(),
        errors: result.errors(),
        rps: result.rps(),
        latency: result.recorder.latency().clone(),
        service: result.recorder.service_time.clone(),
        client_cpu_share: client_cpu.percent().unwrap_or(0.0) / (100.0 * threads),
        server,
        methods: result
            .scopes()
            .into_iter()
            .map(|scope| crate::capacity::MethodMeasure {
                name: scope.name,
                calls: scope.count,
                errors: scope.failures,
                rps: scope.rps,
                latency: scope.recorder.latency().clone(),
            })
            .collect(),
    })
}

/// `--capacity`: the open-loop search against a running server, each probe a load run with the
/// row's settings, the server's CPU and memory read from its process group around it.
fn search_capacity(
    plan: &CapacityPlan,
    load: &LoadConfig,
    name: &str,
    pid: u32,
    context: &mut RunContext<'_>,
) -> crate::capacity::CapacityReport {
    let cancel = context.cancel;
    let mut measure = |rate: Option<f64>, window: Duration, warmup: Duration| {
        capacity_probe(load, rate, window, warmup, cancel, &|| {
            Some(super::sampler::read_group(pid))
        })
    };
    let settings = crate::capacity::CapacitySettings {
        target: name.to_owned(),
        slo: plan.slo.clone(),
        plan: crate::capacity::search::SearchPlan {
            start: 0.0,
            max: 10_000_000.0,
            floor: 1.0,
            growth: 2.0,
            precision: 0.05,
            max_probes: 30,
        },
        min_probe: plan.min_probe,
        max_probe: plan.max_probe,
        warmup: Duration::from_secs(1),
        concurrency: load.concurrency,
        // bench runs one method.
        method_shares: Vec::new(),
    };
    let progress = &mut *context.progress;
    let mut prefixed = |line: &str| progress(&format!("{name}: capacity: {}", line.trim_start()));
    crate::capacity::run(&settings, &mut measure, &mut prefixed, cancel)
}

/// A requested profile, or the note saying why there is none (shown now, kept in the record).
fn keep_profile<T>(
    profile: Option<Result<T, String>>,
    name: &str,
    progress: &mut dyn FnMut(&str),
    notes: &mut Vec<String>,
) -> Option<T> {
    match profile? {
        Ok(profile) => Some(profile),
        Err(note) => {
            progress(&format!("{name}: {note}"));
            notes.push(note);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A suite command sh cannot find says so in the row's reason, and for `grpclab` itself
    /// names the placeholder to write instead.
    #[test]
    fn a_command_not_on_the_path_is_named_in_the_reason() {
        let failed = |tail: &[&str]| {
            ImplResult::failed(
                "x",
                "exec grpclab serve",
                "the server exited before it was ready".to_owned(),
                tail.iter().map(|line| (*line).to_owned()).collect(),
                AppliedLimits::default(),
            )
            .reason
            .unwrap()
        };
        let reason = failed(&["sh: 1: grpclab: not found"]);
        assert!(
            reason.contains("write {grpclab} in the suite's command"),
            "{reason}"
        );
        let reason = failed(&["sh: 1: ghz-server: not found"]);
        assert!(
            reason.contains("a command is not on the PATH: sh: 1: ghz-server: not found"),
            "{reason}"
        );
        assert_eq!(
            failed(&["panic: boom"]),
            "the server exited before it was ready"
        );
    }
}
