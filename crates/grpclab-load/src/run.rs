//! The run loop: client threads, and the controller that starts, watches and stops them.
//!
//! Thread-per-core: each client thread runs one current-thread tokio runtime that owns its
//! connections outright, so nothing on the hot path is shared between threads except the
//! [`Schedule`] (two relaxed atomics). Each thread records into its own [`Recorder`]; the
//! controller merges them once, at the end.
//!
//! A run goes: every thread connects its connections (any failure aborts the run with an
//! error before anything is measured) → the controller starts the schedule → streams send
//! until the schedule says stop → calls still in flight get [`drain_limit`] to finish →
//! recorders merge into a [`LoadResult`].

use crate::result::Unsent;
use grpclab_core::Code;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::config::{DurationStop, LoadConfig};
use crate::progress::{totals, LiveSeconds, ProgressSnapshot, ProgressTarget, ThreadProgress};
use crate::recorder::Recorder;
use crate::result::{EndReason, LoadResult};
use crate::schedule::Schedule;
use crate::thread::{Shared, ThreadState};
use crate::transport::{Connections, Reconnects};

/// How often the controller reports progress.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);
/// The longest calls still in flight at the end may take to finish before they are abandoned.
const MAX_DRAIN: Duration = Duration::from_secs(5);
/// How much longer than the call timeout a `-n` run's drain waits: the calls' own deadline
/// timers fire first, so they end as DeadlineExceeded rather than as abandoned.
const DEADLINE_SLACK: Duration = Duration::from_secs(1);

/// Why a run could not start or could not finish.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The target could not be reached (or its TLS handshake failed) before the run started;
    /// the message says what to check.
    #[error("{0}")]
    Connect(String),
    /// A client thread could not be started.
    #[error("cannot start a client thread: {0}")]
    Thread(String),
    /// `--start-at`: the generator was ready later than the shared start allows; it sent
    /// nothing, rather than a run whose calls would not line up with the others'.
    #[error("ready {late_ms} ms after --start-at {start_at}, past the {tolerance_ms} ms tolerance: refused to start late (give a later --start-at, leaving time to connect, or a wider --start-tolerance)")]
    Late {
        /// The shared start, RFC 3339.
        start_at: String,
        /// How late the generator was, in milliseconds.
        late_ms: u64,
        /// The tolerance, in milliseconds.
        tolerance_ms: u64,
    },
}

/// How long calls still running once the last ticket is due may take to finish; calls past it
/// are abandoned and counted as `Canceled`. A timed run's window is its duration, so its tail
/// gets the call timeout, at most [`MAX_DRAIN`]. A `-n` run asked for N calls, each with its
/// deadline: its tail gets the whole call timeout plus [`DEADLINE_SLACK`] ([`MAX_DRAIN`]
/// without one), so its last calls end by their own deadlines and count as what they are.
pub fn drain_limit(config: &LoadConfig) -> Duration {
    if config.end_of_run() != DurationStop::Wait {
        // --duration-stop close|ignore: nothing waits.
        return Duration::ZERO;
    }
    match (config.duration, config.timeout) {
        (None, Some(timeout)) => timeout + DEADLINE_SLACK,
        (_, timeout) => timeout.unwrap_or(MAX_DRAIN).min(MAX_DRAIN),
    }
}

/// What one thread hands back.
struct ThreadOutcome {
    recorder: Recorder,
    reconnects: u64,
    planned_reconnects: u64,
    abandoned: u64,
    /// `--duration-stop ignore`: calls in flight at the end, left out.
    ignored: u64,
    last_completion: Option<Instant>,
    calls_by_address: Vec<u64>,
    /// A mix: this thread's figures of each method.
    method_recorders: Vec<Recorder>,
    /// Flows: this thread's figures of each flow.
    flow_recorders: Vec<Recorder>,
    /// Flow step calls recorded, and flows ended (see `ThreadState::flow_counts`).
    flow_counts: (u64, u64),
    /// Measured tickets this thread took, and of those gave back unsent.
    taken: u64,
    dropped: u64,
    /// What the server's frames allowed this thread's connections.
    server_windows: Option<grpclab_h2::client::PeerWindows>,
    /// How long its requests waited for the server's windows.
    window_waits: grpclab_h2::client::WindowWaits,
}

/// Runs the load described by `config` and returns what it measured.
///
/// `cancel` ends the run early (Ctrl-C): calls stop, in-flight calls drain, and the result
/// covers what was measured. `on_progress` is called about ten times a second from the calling
/// thread; it must not block.
pub fn run(
    mut config: LoadConfig,
    cancel: &CancellationToken,
    on_progress: &mut dyn FnMut(&ProgressSnapshot),
) -> Result<LoadResult, LoadError> {
    config.validate()?;
    let mut config = config.into_share()?;
    if config.gzip {
        // Compressed once per distinct request, before the run: the hot path sends the
        // compressed bytes as it sends any request (a refcount clone).
        for method in &mut config.methods {
            method.requests = method
                .requests
                .iter()
                .map(grpclab_core::framing::gzip_framed)
                .collect();
        }
    }
    let threads = config.threads;
    let target = match config.duration {
        Some(duration) => ProgressTarget::Duration(duration),
        None => ProgressTarget::Total(config.total.unwrap_or(0)),
    };
    let shared = Arc::new(Shared {
        progress: (0..threads).map(|_| ThreadProgress::default()).collect(),
        skipped: AtomicU64::new(0),
        request_number: AtomicU64::new(0),
        flow_run_number: AtomicU64::new(0),
        mix_numbers: [AtomicU64::new(0), AtomicU64::new(0)],
        render_failures: AtomicU64::new(0),
        live: config.live_latency.then(LiveSeconds::default),
        addresses: std::sync::Mutex::new(config.addresses.clone()),
        config,
    });

    // Start the threads; each connects, reports, then waits for the schedule.
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let (done_tx, done_rx) = mpsc::channel::<Option<ThreadOutcome>>();
    let mut go_senders = Vec::with_capacity(threads);
    let mut handles = Vec::with_capacity(threads);
    for index in 0..threads {
        let (go_tx, go_rx) = oneshot::channel::<Option<Arc<Schedule>>>();
        go_senders.push(go_tx);
        let shared = Arc::clone(&shared);
        let ready_tx = ready_tx.clone();
        let done_tx = done_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("grpclab-client-{index}"))
            .spawn(move || {
                let outcome = client_thread(index, &shared, ready_tx, go_rx);
                let _ = done_tx.send(outcome);
            })
            .map_err(|err| LoadError::Thread(err.to_string()))?;
        handles.push(handle);
    }
    drop(ready_tx);
    drop(done_tx);

    let mut connect_error = None;
    for _ in 0..threads {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(message)) => connect_error = connect_error.or(Some(message)),
            Err(_) => {
                connect_error =
                    connect_error.or(Some("a client thread ended before connecting".to_owned()))
            }
        }
    }
    if let Some(message) = connect_error {
        for go in go_senders {
            let _ = go.send(None);
        }
        for handle in handles {
            let _ = handle.join();
        }
        return Err(LoadError::Connect(message));
    }

    let config = &shared.config;
    let start = match config.start_at {
        None => Ok(Instant::now()),
        Some(at) => wait_for(at, config.start_tolerance, cancel),
    };
    let start = match start {
        Ok(start) => start,
        Err(late) => {
            for go in go_senders {
                let _ = go.send(None);
            }
            for handle in handles {
                let _ = handle.join();
            }
            return Err(late);
        }
    };
    // When the threads were released: the first call goes out now (a shared start that
    // was already past counts its missed calls late, from the shared start).
    let first_send = SystemTime::now();
    let stop = cancel.child_token();
    let mut schedule = Schedule::new(
        start,
        config.pacing,
        config.warmup,
        config.duration,
        config.total,
        stop.clone(),
    );
    if let Some(steps) = config.concurrency_steps {
        schedule.limit_concurrency(
            steps.staircase(config.duration.map(|d| d + config.warmup)),
            config.connections,
        );
    }
    if let Some(shard) = config.shard {
        schedule.take_shard(shard);
    }
    let schedule = Arc::new(schedule);
    let started_at = config.start_at.unwrap_or(first_send) + config.warmup;
    for go in go_senders {
        let _ = go.send(Some(Arc::clone(&schedule)));
    }

    let outcomes = watch(&shared, &schedule, &stop, &done_rx, target, on_progress);
    for handle in handles {
        let _ = handle.join();
    }

    let addresses = shared.addresses.lock().map_or_else(
        |poisoned| poisoned.into_inner().clone(),
        |known| known.clone(),
    );
    let Merged {
        mut recorder,
        mut methods,
        mut flows,
        flow_counts: (step_calls, flows_ended),
        calls_by_address,
        reconnects,
        planned_reconnects,
        abandoned,
        ignored,
        taken,
        dropped,
        last_completion,
        server_windows,
        window_waits,
    } = merge(outcomes, config, addresses.len());
    // Each second's histogram is kept only for a result that may be merged with other
    // generators' (`--shard`, `--start-at`): a lone run pays nothing for merging.
    recorder.finish_seconds(config.shard.is_some() || config.start_at.is_some());
    for method in &mut methods {
        // A method's seconds are its calls per second; its latency is whole-run.
        method.recorder.finish_seconds(false);
    }
    for flow in &mut flows {
        flow.recorder.finish_seconds(false);
    }
    // What the schedule's tickets became: a plain call each, or a flow of several calls
    // (its ticket ends with the flow, not with each step).
    let ticket_ends = (recorder.count() + flows_ended).saturating_sub(step_calls);
    let end_reason = if cancel.is_cancelled() {
        EndReason::Cancel
    } else if config.total.is_some_and(|total| {
        let skipped = shared.skipped.load(Relaxed).min(config.skip_first);
        ticket_ends + skipped >= total
    }) {
        EndReason::Total
    } else {
        EndReason::Timeout
    };
    // Every measured ticket taken was recorded, skipped (--skipFirst), left out (in flight
    // at the end with --duration-stop ignore) or given back unsent: each counted where it
    // happened, so a call lost by a bug shows here rather than vanishing.
    let skipped = shared.skipped.load(Relaxed).min(config.skip_first);
    let accounted = ticket_ends + ignored + skipped + dropped;
    let unaccounted = taken.abs_diff(accounted);
    // A timed open loop accounts for every call its schedule intended in the window: those
    // no stream took before the window closed (the client could not keep up), and those
    // taken but given back when the run stopped before they were due.
    let unsent = match (end_reason, schedule.calls_in_window()) {
        (EndReason::Timeout, Some(scheduled)) => Unsent {
            never_taken: scheduled.saturating_sub(taken),
            stopped: dropped,
        },
        _ => Unsent::default(),
    };
    let measured_end = match (config.duration, end_reason) {
        // A timed run's window is its duration, plus however long the last calls took to
        // drain; a window cut short by Ctrl-C or -n ends with the last completion.
        (Some(_), EndReason::Timeout) => last_completion
            .max(schedule.end())
            .unwrap_or_else(Instant::now),
        _ => last_completion.unwrap_or_else(Instant::now),
    };
    Ok(LoadResult {
        started_at,
        elapsed: measured_end.saturating_duration_since(schedule.measure_from()),
        whole_run: measured_end.saturating_duration_since(schedule.start()),
        end_reason,
        recorder,
        reconnects,
        planned_reconnects,
        abandoned,
        ignored,
        unsent: unsent.never_taken + unsent.stopped,
        unsent_by_cause: unsent,
        unaccounted,
        render_failures: shared.render_failures.load(Relaxed),
        first_send,
        calls_by_address,
        addresses,
        methods,
        flows,
        server_windows,
        window_waits,
    })
}

/// Watches the run from the calling thread: reports progress about ten times a second, ends
/// the measured window on time (`stop`), and collects each client thread's outcome as it
/// finishes.
fn watch(
    shared: &Shared,
    schedule: &Schedule,
    stop: &CancellationToken,
    done_rx: &mpsc::Receiver<Option<ThreadOutcome>>,
    target: ProgressTarget,
    on_progress: &mut dyn FnMut(&ProgressSnapshot),
) -> Vec<Option<ThreadOutcome>> {
    let run_start = Instant::now();
    let config = &shared.config;
    let threads = config.threads;
    let mut outcomes = Vec::with_capacity(threads);
    let mut last_report = (run_start, 0u64);
    while outcomes.len() < threads {
        match done_rx.recv_timeout(PROGRESS_INTERVAL) {
            Ok(outcome) => outcomes.push(outcome),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        if schedule.end().is_some_and(|end| now >= end) {
            stop.cancel();
        }
        let (completed, errors, errors_by_code) = totals(&shared.progress);
        let interval = now.duration_since(last_report.0).as_secs_f64();
        let current_rps = if interval > 0.0 {
            completed.saturating_sub(last_report.1) as f64 / interval
        } else {
            0.0
        };
        last_report = (now, completed);
        on_progress(&ProgressSnapshot {
            measured: now.saturating_duration_since(schedule.measure_from()),
            warming_up: now < schedule.measure_from(),
            completed,
            errors,
            current_rps,
            target,
            errors_by_code,
            last_second: shared.live.as_ref().and_then(|live| live.latest()),
            in_flight: schedule
                .measured_issued()
                .map_or(config.concurrency as u64, |issued| {
                    issued.saturating_sub(completed)
                }),
            offered_rps: match config.pacing {
                crate::config::Pacing::OpenLoop { rate } => Some(rate),
                _ => None,
            },
            latency_buckets: shared.live.as_ref().and_then(|live| live.buckets()),
        });
    }
    outcomes
}

/// The client threads' outcomes summed into one.
struct Merged {
    recorder: Recorder,
    methods: Vec<crate::result::MethodResult>,
    flows: Vec<crate::result::FlowResult>,
    /// Flow step calls recorded and flows ended, over the threads.
    flow_counts: (u64, u64),
    calls_by_address: Vec<u64>,
    reconnects: u64,
    planned_reconnects: u64,
    abandoned: u64,
    ignored: u64,
    taken: u64,
    dropped: u64,
    last_completion: Option<Instant>,
    server_windows: Option<grpclab_h2::client::PeerWindows>,
    window_waits: grpclab_h2::client::WindowWaits,
}

/// Sums the client threads' outcomes (recorders merged, per method in a mix, per address,
/// and every count kept for the run's accounting); `addresses` is how many the run knew.
fn merge(outcomes: Vec<Option<ThreadOutcome>>, config: &LoadConfig, addresses: usize) -> Merged {
    let open_loop = config.pacing.is_open_loop();
    let mut recorder = Recorder::new(open_loop, config.details);
    let mut reconnects = 0;
    let mut planned_reconnects = 0;
    let mut abandoned = 0;
    let mut ignored = 0;
    let (mut taken, mut dropped) = (0u64, 0u64);
    let mut last_completion: Option<Instant> = None;
    let mut server_windows: Option<grpclab_h2::client::PeerWindows> = None;
    let mut window_waits = grpclab_h2::client::WindowWaits::default();
    let mut calls_by_address = vec![0; addresses];
    let mut flows: Vec<crate::result::FlowResult> = config
        .flows
        .iter()
        .map(|flow| crate::result::FlowResult {
            name: flow.name.clone(),
            weight: flow.weight,
            steps: flow.steps.iter().map(|step| step.name.clone()).collect(),
            recorder: Recorder::new(open_loop, None),
        })
        .collect();
    let mut flow_counts = (0u64, 0u64);
    let mut methods: Vec<crate::result::MethodResult> =
        if config.methods.len() > 1 || !config.flows.is_empty() {
            config
                .methods
                .iter()
                .map(|method| crate::result::MethodResult {
                    name: method.name.clone(),
                    weight: method.weight,
                    recorder: Recorder::new(open_loop, None),
                })
                .collect()
        } else {
            Vec::new()
        };
    for outcome in outcomes.into_iter().flatten() {
        for (total, theirs) in methods.iter_mut().zip(&outcome.method_recorders) {
            total.recorder.merge(theirs);
        }
        for (total, theirs) in flows.iter_mut().zip(&outcome.flow_recorders) {
            total.recorder.merge(theirs);
        }
        flow_counts.0 += outcome.flow_counts.0;
        flow_counts.1 += outcome.flow_counts.1;
        for (total, calls) in calls_by_address.iter_mut().zip(&outcome.calls_by_address) {
            *total += calls;
        }
        recorder.merge(&outcome.recorder);
        reconnects += outcome.reconnects;
        planned_reconnects += outcome.planned_reconnects;
        abandoned += outcome.abandoned;
        ignored += outcome.ignored;
        taken += outcome.taken;
        dropped += outcome.dropped;
        last_completion = last_completion.max(outcome.last_completion);
        if let Some(theirs) = &outcome.server_windows {
            server_windows.get_or_insert(*theirs).merge(theirs);
        }
        window_waits.add(&outcome.window_waits);
    }
    Merged {
        recorder,
        methods,
        flows,
        flow_counts,
        calls_by_address,
        reconnects,
        planned_reconnects,
        abandoned,
        ignored,
        taken,
        dropped,
        last_completion,
        server_windows,
        window_waits,
    }
}

/// Waits until the wall clock reads `at` and returns that moment on the monotonic clock
/// (the schedule's). A generator already later than `tolerance` is refused; one late within
/// it starts at once, its schedule anchored at `at` (a moment in the past). Ctrl-C while
/// waiting starts at once too: the run then ends straight away with what it has (nothing).
fn wait_for(
    at: SystemTime,
    tolerance: Duration,
    cancel: &CancellationToken,
) -> Result<Instant, LoadError> {
    loop {
        let (now, wall) = (Instant::now(), SystemTime::now());
        match at.duration_since(wall) {
            // Early: sleep in slices (the wall clock may be stepped meanwhile), the last
            // slice exactly.
            Ok(ahead) if !ahead.is_zero() && !cancel.is_cancelled() => {
                std::thread::sleep(ahead.min(Duration::from_millis(100)));
            }
            Ok(_) => return Ok(now),
            Err(past) => {
                let late = past.duration();
                if late > tolerance {
                    return Err(LoadError::Late {
                        start_at: humantime::format_rfc3339_millis(at).to_string(),
                        late_ms: u64::try_from(late.as_millis()).unwrap_or(u64::MAX),
                        tolerance_ms: u64::try_from(tolerance.as_millis()).unwrap_or(u64::MAX),
                    });
                }
                return Ok(now.checked_sub(late).unwrap_or(now));
            }
        }
    }
}

/// One client thread: connect, wait for the start, run its streams, drain, hand back results.
fn client_thread(
    index: usize,
    shared: &Arc<Shared>,
    ready: mpsc::Sender<Result<(), String>>,
    go: oneshot::Receiver<Option<Arc<Schedule>>>,
) -> Option<ThreadOutcome> {
    let config = &shared.config;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            let _ = ready.send(Err(format!("cannot start a client runtime: {err}")));
            return None;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        // This thread's connections: every `threads`-th one, starting at `index`.
        let indexes = (index..config.connections).step_by(config.threads);
        let connections = match Connections::open(config, indexes).await {
            Ok(connections) => connections,
            Err(message) => {
                let _ = ready.send(Err(message));
                return None;
            }
        };
        let _ = ready.send(Ok(()));
        let schedule = go.await.ok().flatten()?;

        let thread = Rc::new(ThreadState::new(
            index,
            Arc::clone(&schedule),
            Arc::clone(shared),
        ));
        let drivers_stop = schedule.stop_token().child_token();
        let reconnects = Reconnects::default();
        let streams = connections.start(&thread, &reconnects, &drivers_stop);

        // Wait for the streams. Once the schedule hands out no more tickets (the budget is
        // spent, the duration is over, or Ctrl-C), the calls still running get the drain
        // limit, counted from when the last ticket was due: a server that stalls cannot hold
        // the run, and every measured ticket is either recorded or abandoned.
        let mut streams = streams;
        let all_streams = async {
            // Each handle is awaited once: a finished one leaves the list.
            while let Some(stream) = streams.last_mut() {
                let _ = stream.await;
                streams.pop();
            }
        };
        let drain_deadline = async {
            schedule.issued_all().cancelled().await;
            let now = Instant::now();
            let from = schedule.last_due().map_or(now, |due| due.max(now));
            tokio::time::sleep_until((from + drain_limit(config)).into()).await;
        };
        let drained = tokio::select! {
            _ = all_streams => true,
            _ = drain_deadline => false,
        };
        let abandoned = if drained {
            0
        } else {
            // Stop what still runs: dropping a connection (or a stream task) hands the
            // messages of its streaming calls still in flight to `thread`, so they count
            // with those calls below.
            for stream in &streams {
                stream.abort();
            }
            for stream in streams.iter_mut() {
                let _ = stream.await;
            }
            thread.outstanding()
        };
        drivers_stop.cancel();
        let mut recorder = thread.run_recorder();
        // --duration-stop ignore: the calls in flight at the end are left out entirely.
        let ignored = if config.end_of_run() == DurationStop::Ignore {
            abandoned
        } else {
            0
        };
        let abandoned = abandoned - ignored;
        if abandoned > 0 {
            let since = Instant::now().saturating_duration_since(schedule.measure_from());
            // Each was in flight for at least the drain limit: its latency as recorded (for
            // the average over all calls) is that lower bound.
            let waited = drain_limit(config);
            let why = if config.end_of_run() == DurationStop::Close {
                "still in flight when the duration ended (--duration-stop close)"
            } else {
                "still in flight when the run ended (drain limit reached)"
            };
            let mut messages = thread.take_abandoned_messages().into_iter();
            for _ in 0..abandoned {
                if let Some((sent, received)) = messages.next() {
                    recorder.record_messages(sent, received);
                }
                recorder.record_error(Code::Canceled, why, waited, since);
            }
        }
        Some(ThreadOutcome {
            recorder,
            reconnects: reconnects.unplanned.get(),
            planned_reconnects: reconnects.planned.get(),
            abandoned,
            ignored,
            last_completion: thread.last_completion(),
            calls_by_address: thread.calls_by_address(),
            method_recorders: thread.take_method_recorders(),
            flow_recorders: thread.take_flow_recorders(),
            flow_counts: thread.flow_counts(),
            taken: thread.tickets().0,
            dropped: thread.tickets().1,
            server_windows: thread.server_windows(),
            window_waits: thread.window_waits(),
        })
    })
}
