//! The load engine: client threads, their connections and streams, and the controller that
//! starts, watches and stops them.
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

use bytes::Bytes;
use grpclab_core::framing::format_grpc_timeout;
use grpclab_core::Code;
use h2::client::SendRequest;
use http::{HeaderMap, HeaderValue, Uri};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::call::{unary_call, CallTemplate};
use crate::config::DurationStop;
use crate::config::{LoadConfig, Transport};
use crate::connection::{self, ConnectionState};
use crate::lab_transport;
use crate::progress::{totals, ProgressSnapshot, ProgressTarget, ThreadProgress};
use crate::recorder::Recorder;
use crate::result::{EndReason, LoadResult};
use crate::schedule::{Schedule, Ticket};

/// How early an open-loop stream wakes before its intended send time: two ticks of tokio's
/// 1 ms timer wheel, because the runtime parks in epoll with millisecond timeouts and may itself wake up to a tick late.
pub(crate) const EARLY_WAKE: Duration = Duration::from_millis(2);
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

/// How a call that outlived its deadline (`-t`) is described.
pub(crate) const DEADLINE_MESSAGE: &str = "deadline exceeded (client side)";

/// Everything the threads of one run share.
pub(crate) struct Shared {
    pub(crate) config: LoadConfig,
    progress: Vec<ThreadProgress>,
    /// Measured calls ended so far while `config.skip_first` is not yet reached: the first
    /// that many are left out of the results (ghz's `--skipFirst`). Untouched when it is 0.
    skipped: std::sync::atomic::AtomicU64,
    /// The next request number for templates (ghz's `.RequestNumber`: one count for the run).
    /// Touched only when `config.renderer` is set.
    request_number: std::sync::atomic::AtomicU64,
    /// Calls whose template rendering failed (sent with call 0's request instead).
    pub(crate) render_failures: std::sync::atomic::AtomicU64,
    /// `config.live_latency`: each thread's finished seconds, for the progress snapshots.
    live: Option<crate::progress::LiveSeconds>,
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
    if config.gzip {
        // Compressed once per distinct request, before the run: the hot path sends the
        // compressed bytes as it sends any request (a refcount clone).
        config.requests = config
            .requests
            .iter()
            .map(grpclab_core::framing::gzip_framed)
            .collect();
    }
    let threads = config.threads;
    let target = match config.duration {
        Some(duration) => ProgressTarget::Duration(duration),
        None => ProgressTarget::Total(config.total.unwrap_or(0)),
    };
    let shared = Arc::new(Shared {
        progress: (0..threads).map(|_| ThreadProgress::default()).collect(),
        skipped: std::sync::atomic::AtomicU64::new(0),
        request_number: std::sync::atomic::AtomicU64::new(0),
        render_failures: std::sync::atomic::AtomicU64::new(0),
        live: config
            .live_latency
            .then(crate::progress::LiveSeconds::default),
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
    let stop = cancel.child_token();
    let mut schedule = Schedule::new(
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
    let schedule = Arc::new(schedule);
    let started_at = SystemTime::now() + config.warmup;
    for go in go_senders {
        let _ = go.send(Some(Arc::clone(&schedule)));
    }

    // Watch: report progress, end the measured window on time, collect finished threads.
    let run_start = Instant::now();
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
        });
    }
    for handle in handles {
        let _ = handle.join();
    }

    let open_loop = config.pacing.is_open_loop();
    let mut recorder = Recorder::new(open_loop, config.details);
    let mut reconnects = 0;
    let mut planned_reconnects = 0;
    let mut abandoned = 0;
    let mut ignored = 0;
    let mut last_completion: Option<Instant> = None;
    for outcome in outcomes.into_iter().flatten() {
        recorder.merge(&outcome.recorder);
        reconnects += outcome.reconnects;
        planned_reconnects += outcome.planned_reconnects;
        abandoned += outcome.abandoned;
        ignored += outcome.ignored;
        last_completion = last_completion.max(outcome.last_completion);
    }
    recorder.finish_seconds();
    let end_reason = if cancel.is_cancelled() {
        EndReason::Cancel
    } else if config.total.is_some_and(|total| {
        let skipped = shared
            .skipped
            .load(std::sync::atomic::Ordering::Relaxed)
            .min(config.skip_first);
        recorder.count() + skipped >= total
    }) {
        EndReason::Total
    } else {
        EndReason::Timeout
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
        render_failures: shared
            .render_failures
            .load(std::sync::atomic::Ordering::Relaxed),
    })
}

/// The request headers every call of the run sends.
fn call_template(config: &LoadConfig) -> Result<CallTemplate, String> {
    let uri: Uri = format!("http://{}{}", config.authority, config.path)
        .parse()
        .map_err(|err| format!("invalid call path or authority: {err}"))?;
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
    headers.insert(
        http::header::USER_AGENT,
        HeaderValue::from_static(concat!("grpclab/", env!("CARGO_PKG_VERSION"))),
    );
    if let Some(timeout) = config.timeout {
        let value = HeaderValue::from_str(&format_grpc_timeout(timeout))
            .map_err(|err| format!("invalid timeout: {err}"))?;
        headers.insert("grpc-timeout", value);
    }
    if config.gzip {
        headers.insert("grpc-encoding", HeaderValue::from_static("gzip"));
        headers.insert("grpc-accept-encoding", HeaderValue::from_static("gzip"));
    }
    for (name, value) in &config.metadata {
        headers.append(name.clone(), value.clone());
    }
    Ok(CallTemplate {
        uri,
        headers,
        validator: config.validator.clone(),
        gzip: config.gzip,
        max_reply_message: config.max_recv_message_bytes,
    })
}

/// How many streams each connection carries: `concurrency` spread evenly.
fn streams_on(connection: usize, config: &LoadConfig) -> usize {
    let base = config.concurrency / config.connections;
    base + usize::from(connection < config.concurrency % config.connections)
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
        let template = match call_template(config) {
            Ok(template) => Rc::new(template),
            Err(message) => {
                let _ = ready.send(Err(message));
                return None;
            }
        };
        // This thread's connections: every `threads`-th one, starting at `index`.
        let mut connections = Vec::new();
        let mut lab_connections = Vec::new();
        for connection_index in (index..config.connections).step_by(config.threads) {
            let connected = match config.transport {
                Transport::H2 => {
                    connection::connect(config.target, config.connect_timeout, config.tls.as_ref())
                        .await
                        .map(|(sender, driver)| {
                            connections.push((connection_index, sender, driver))
                        })
                }
                Transport::Lab => lab_transport::connect(
                    config.target,
                    config.connect_timeout,
                    config.tls.as_ref(),
                )
                .await
                .map(|tcp| lab_connections.push((connection_index, tcp))),
            };
            if let Err(message) = connected {
                let _ = ready.send(Err(message));
                return None;
            }
        }
        let _ = ready.send(Ok(()));
        let schedule = go.await.ok().flatten()?;

        let thread = Rc::new(ThreadState {
            schedule: Arc::clone(&schedule),
            template,
            requests: config.requests.clone(),
            next_request: Cell::new(index),
            render_state: RefCell::new((
                grpclab_core::template::Random::new(
                    (index as u64 + 1)
                        ^ std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_nanos() as u64),
                ),
                String::new(),
            )),
            worker_id: format!("g{index}"),
            recorder: RefCell::new(Recorder::new(config.pacing.is_open_loop(), config.details)),
            outstanding: Cell::new(0),
            last_completion: Cell::new(None),
            progress_slot: index,
            live_published: Cell::new(0),
            shared: Arc::clone(shared),
        });
        let drivers_stop = schedule.stop_token().child_token();
        let reconnects = Rc::new(Cell::new(0u64));
        let planned_reconnects = Rc::new(Cell::new(0u64));
        let mut streams = Vec::new();
        for (connection_index, tcp) in lab_connections {
            streams.push(tokio::task::spawn_local(lab_transport::connection_loop(
                Rc::clone(&thread),
                tcp,
                connection_index,
                streams_on(connection_index, config),
                lab_transport::Reconnects {
                    unplanned: Rc::clone(&reconnects),
                    planned: Rc::clone(&planned_reconnects),
                },
            )));
        }
        for (connection_index, sender, driver) in connections {
            let (state_tx, state_rx) = watch::channel(ConnectionState {
                generation: 0,
                sender: Some(sender.clone()),
                down_reason: String::new(),
            });
            tokio::task::spawn_local(connection::drive(
                connection::Dial {
                    target: config.target,
                    connect_timeout: config.connect_timeout,
                    tls: config.tls.clone(),
                    keepalive: config.keepalive,
                },
                driver,
                state_tx,
                drivers_stop.clone(),
                Rc::clone(&reconnects),
            ));
            for index in 0..streams_on(connection_index, config) {
                streams.push(tokio::task::spawn_local(stream_loop(
                    Rc::clone(&thread),
                    StreamSlot {
                        connection: connection_index,
                        index,
                    },
                    StreamConnection {
                        state: state_rx.clone(),
                        sender: Some(sender.clone()),
                        generation: 0,
                    },
                )));
            }
        }

        // Wait for the streams. Once the schedule hands out no more tickets (the budget is
        // spent, the duration is over, or Ctrl-C), the calls still running get the drain
        // limit, counted from when the last ticket was due: a server that stalls cannot hold
        // the run, and every measured ticket is either recorded or abandoned.
        let all_streams = async {
            for stream in streams {
                let _ = stream.await;
            }
        };
        let drain_deadline = async {
            schedule.issued_all().cancelled().await;
            let now = Instant::now();
            let from = schedule.last_due().map_or(now, |due| due.max(now));
            tokio::time::sleep_until((from + drain_limit(config)).into()).await;
        };
        let abandoned = tokio::select! {
            _ = all_streams => 0,
            _ = drain_deadline => thread.outstanding.get(),
        };
        drivers_stop.cancel();
        let mut recorder = thread.recorder.borrow().clone();
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
            for _ in 0..abandoned {
                recorder.record_error(Code::Canceled, why, waited, since);
            }
        }
        Some(ThreadOutcome {
            recorder,
            reconnects: reconnects.get(),
            planned_reconnects: planned_reconnects.get(),
            abandoned,
            ignored,
            last_completion: thread.last_completion.get(),
        })
    })
}

/// What the streams of one thread share. Single-threaded: `Cell`/`RefCell`, no locks.
pub(crate) struct ThreadState {
    pub(crate) schedule: Arc<Schedule>,
    pub(crate) template: Rc<CallTemplate>,
    pub(crate) requests: Vec<Bytes>,
    /// Round-robin position in `requests`.
    next_request: Cell<usize>,
    /// Templates only: this thread's generator and text buffer, and its worker id.
    render_state: RefCell<(grpclab_core::template::Random, String)>,
    worker_id: String,
    pub(crate) recorder: RefCell<Recorder>,
    /// Measured tickets taken and not yet recorded (waiting for their time, waiting to be
    /// written, or in flight): what the drain limit abandons, so `-n` always adds up.
    outstanding: Cell<u64>,
    last_completion: Cell<Option<Instant>>,
    progress_slot: usize,
    /// Live view: how many of the recorder's finished seconds were handed over.
    live_published: Cell<usize>,
    pub(crate) shared: Arc<Shared>,
}

impl ThreadState {
    /// The next ticket from the schedule; a measured one is outstanding until recorded (or
    /// given back with [`ThreadState::drop_ticket`]).
    pub(crate) fn take_ticket(&self) -> Ticket {
        let ticket = self.schedule.next_ticket();
        if let Ticket::Send { measured: true, .. } = ticket {
            self.outstanding.set(self.outstanding.get() + 1);
        }
        ticket
    }

    /// A ticket that will never be sent (the run was stopped before it was due): it is not a
    /// call, so it is neither recorded nor abandoned.
    pub(crate) fn drop_ticket(&self, measured: bool) {
        if measured {
            self.outstanding
                .set(self.outstanding.get().saturating_sub(1));
        }
    }

    pub(crate) fn next_body(&self) -> Bytes {
        if let Some(renderer) = &self.shared.config.renderer {
            return self.render_body(renderer);
        }
        let index = self.next_request.get();
        self.next_request.set(index.wrapping_add(1));
        // Cloning `Bytes` shares the encoded request: a reference count, no copy.
        self.requests[index % self.requests.len()].clone()
    }

    /// A templated call's request: rendered, encoded, framed (and compressed under `-e`).
    #[cold]
    fn render_body(&self, renderer: &crate::config::RequestRenderer) -> Bytes {
        let (number, messages) = self.render(renderer);
        messages[(number % messages.len() as u64) as usize].clone()
    }

    /// Renders the template once with the next request number: that number and the framed
    /// messages (never empty: a failed rendering is counted and sends call 0's request).
    fn render(&self, renderer: &crate::config::RequestRenderer) -> (u64, Vec<Bytes>) {
        use std::sync::atomic::Ordering::Relaxed;
        let number = self.shared.request_number.fetch_add(1, Relaxed);
        let mut state = self.render_state.borrow_mut();
        let (random, text) = &mut *state;
        let context = grpclab_core::template::CallContext {
            request_number: number,
            worker_id: &self.worker_id,
            now: std::time::SystemTime::now(),
        };
        let messages = match renderer(&context, random, text) {
            Ok(messages) if !messages.is_empty() => messages,
            _ => {
                self.shared.render_failures.fetch_add(1, Relaxed);
                return (number, vec![self.requests[0].clone()]);
            }
        };
        if self.template.gzip {
            let compressed = messages
                .iter()
                .map(grpclab_core::framing::gzip_framed)
                .collect();
            return (number, compressed);
        }
        (number, messages)
    }

    /// A streaming call's messages when the payload is a template rendered once per call
    /// (`None`: no template, or one rendered per message).
    pub(crate) fn call_messages(&self) -> Option<Vec<Bytes>> {
        let renderer = self.shared.config.renderer.as_ref()?;
        if self.shared.config.stream.dynamic_messages {
            return None;
        }
        Some(self.render(renderer).1)
    }

    /// Message `index` of a streaming call under `--stream-dynamic-messages`: the template
    /// rendered anew, its element `index % len` (the plain data array without a template).
    pub(crate) fn dynamic_message(&self, index: u64) -> Bytes {
        match &self.shared.config.renderer {
            Some(renderer) => {
                let messages = self.render(renderer).1;
                messages[(index % messages.len() as u64) as usize].clone()
            }
            None => self.requests[(index % self.requests.len() as u64) as usize].clone(),
        }
    }

    pub(crate) fn record(
        &self,
        outcome: &Result<(), crate::call::CallFailure>,
        latency: Duration,
        service: Duration,
        done: Instant,
    ) {
        let in_flight = self.outstanding.get();
        self.outstanding.set(in_flight.saturating_sub(1));
        let skip_first = self.shared.config.skip_first;
        if skip_first > 0
            && self
                .shared
                .skipped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                < skip_first
        {
            // One of the first `--skipFirst` calls of the run: it ran and ended, and is left
            // out of the figures, as ghz leaves it out of its report.
            self.recorder.borrow_mut().discard_messages();
            self.shared.progress[self.progress_slot]
                .add(outcome.as_ref().err().map(|failure| failure.code));
            return;
        }
        let since = done.saturating_duration_since(self.schedule.measure_from());
        // A reply that came after the deadline is late, whichever won the race between it and
        // the timer (whose granularity is a millisecond): a gRPC client gives up at its
        // deadline, so the call counts as DeadlineExceeded, as grpc-go would report it.
        let late = outcome.is_ok()
            && self
                .shared
                .config
                .timeout
                .is_some_and(|limit| service > limit);
        let mut recorder = self.recorder.borrow_mut();
        match outcome {
            Ok(()) if late => {
                recorder.record_error(Code::DeadlineExceeded, DEADLINE_MESSAGE, latency, since)
            }
            Ok(()) => recorder.record_ok(latency, service, since),
            Err(failure) => recorder.record_error(failure.code, &failure.message, latency, since),
        }
        recorder.note_in_flight(in_flight, since);
        if let Some(live) = &self.shared.live {
            // A live view: hand over each second's histogram once it is set aside.
            let finished = recorder.finished_seconds();
            while self.live_published.get() < finished.len() {
                let (second, bytes) = &finished[self.live_published.get()];
                live.publish(*second, bytes.clone());
                self.live_published.set(self.live_published.get() + 1);
            }
        }
        self.last_completion.set(Some(done));
        let failed = match outcome {
            Ok(()) if late => Some(Code::DeadlineExceeded),
            Ok(()) => None,
            Err(failure) => Some(failure.code),
        };
        self.shared.progress[self.progress_slot].add(failed);
    }

    /// A call sent during the warmup has ended: counted apart if it ended after the window
    /// began (see `Recorder::warmup_calls_in_window`).
    pub(crate) fn record_warmup_call(&self, latency: Duration, done: Instant) {
        if done >= self.schedule.measure_from() {
            self.recorder
                .borrow_mut()
                .record_warmup_call_in_window(latency);
        }
    }
}

/// A stream's view of its connection: its own sender handle, refreshed only after a failure.
struct StreamConnection {
    state: watch::Receiver<ConnectionState>,
    sender: Option<SendRequest<Bytes>>,
    generation: u64,
}

impl StreamConnection {
    /// The live sender, or why there is none.
    fn sender(&mut self) -> Result<&mut SendRequest<Bytes>, String> {
        if self.sender.is_none() {
            let state = self.state.borrow_and_update();
            self.generation = state.generation;
            match &state.sender {
                Some(sender) => self.sender = Some(sender.clone()),
                None => return Err(state.down_reason.clone()),
            }
        }
        self.sender
            .as_mut()
            .ok_or_else(|| "no connection".to_owned())
    }

    /// A call that failed with a bare "connection lost" takes the driver's reason when it has
    /// one (e.g. the keepalive gave the connection up).
    fn explain(&self, mut failure: crate::call::CallFailure) -> crate::call::CallFailure {
        if failure.connection_lost && failure.message == crate::call::CONNECTION_LOST {
            let state = self.state.borrow();
            if !state.down_reason.is_empty() {
                failure.message.clone_from(&state.down_reason);
            }
        }
        failure
    }

    /// After a connection-level failure: forget the sender and wait until the driver has
    /// news (reconnected, or another attempt failed), so a dead connection is not hammered.
    async fn wait_for_change(&mut self, stop: &CancellationToken) {
        self.sender = None;
        if self.state.borrow().generation != self.generation {
            return;
        }
        // At most a second: a failure taken for a connection loss while the connection is
        // in fact up (the driver then never publishes news) must not park the stream for
        // good, or an -n run whose streams all parked would never end.
        tokio::select! {
            _ = self.state.changed() => {}
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Runs a call under the client's deadline (`-t`): past it, the call is dropped (h2 resets
/// its stream) and ends as DeadlineExceeded.
async fn within_deadline(
    timeout: Option<Duration>,
    call: impl std::future::Future<Output = Result<(), crate::call::CallFailure>>,
) -> Result<(), crate::call::CallFailure> {
    match timeout {
        None => call.await,
        Some(limit) => tokio::time::timeout(limit, call).await.unwrap_or_else(|_| {
            Err(crate::call::CallFailure {
                code: Code::DeadlineExceeded,
                message: DEADLINE_MESSAGE.to_owned(),
                connection_lost: false,
            })
        }),
    }
}

/// Which stream a stream task is: its connection and its place among that connection's
/// streams (a concurrency schedule lets the first few of each connection run).
#[derive(Debug, Clone, Copy)]
struct StreamSlot {
    connection: usize,
    index: usize,
}

/// A concurrency schedule: waits until `slot` may send; false when it never will again or
/// the run has stopped handing out calls. Without a schedule, true at once.
async fn wait_for_turn(thread: &ThreadState, slot: StreamSlot, stop: &CancellationToken) -> bool {
    loop {
        let (allowed, next_change) = thread.schedule.streams_allowed(slot.connection);
        if slot.index < allowed {
            return true;
        }
        let Some(at) = next_change else {
            return false;
        };
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => {}
            _ = stop.cancelled() => return false,
            _ = thread.schedule.issued_all().cancelled() => return false,
        }
    }
}

/// One stream slot: take a ticket, (open loop: wait for its time), call, record, repeat.
async fn stream_loop(thread: Rc<ThreadState>, slot: StreamSlot, mut connection: StreamConnection) {
    let mut scratch = Vec::new();
    let stop = thread.schedule.stop_token().clone();
    let timeout = thread.shared.config.timeout;
    loop {
        if !wait_for_turn(&thread, slot, &stop).await {
            return;
        }
        let Ticket::Send { intended, measured } = thread.take_ticket() else {
            return;
        };
        if let Some(intended) = intended {
            // tokio's timer fires on the first millisecond tick at or after its deadline, so
            // sleeping until `intended` would send a millisecond or more late and charge that lateness to
            // the server. Wake early instead (see EARLY_WAKE); latency below then counts from the
            // earlier of the intended and the actual send, so an early send is measured as
            // its plain service time and never flatters the server.
            let wake = intended.checked_sub(EARLY_WAKE).unwrap_or(intended);
            if wake > Instant::now() {
                tokio::select! {
                    _ = tokio::time::sleep_until(wake.into()) => {}
                    _ = stop.cancelled() => {
                        thread.drop_ticket(measured);
                        return;
                    }
                }
            }
        }
        let sent = Instant::now();
        let outcome = match connection.sender() {
            Err(reason) => Err(crate::call::CallFailure {
                code: Code::Unavailable,
                message: reason,
                connection_lost: true,
            }),
            Ok(sender) if thread.shared.config.shape != crate::config::CallShape::Unary => {
                let config = &thread.shared.config;
                let mut tally = crate::streaming::StreamTally::default();
                let mut round_trip = |latency: Duration| {
                    if measured {
                        thread.recorder.borrow_mut().record_round_trip(latency);
                    }
                };
                let call_messages = thread.call_messages();
                let dynamic = |index: u64| thread.dynamic_message(index);
                let plan = crate::streaming::StreamPlan {
                    shape: config.shape,
                    settings: &config.stream,
                    messages: call_messages.as_deref().unwrap_or(&thread.requests),
                    dynamic: (config.renderer.is_some() && config.stream.dynamic_messages)
                        .then_some(&dynamic as &dyn Fn(u64) -> Bytes),
                    intended,
                    stop: &stop,
                };
                let call = crate::streaming::streaming_call(
                    sender,
                    &thread.template,
                    &plan,
                    &mut tally,
                    &mut round_trip,
                );
                let outcome = within_deadline(timeout, call).await;
                if measured {
                    thread
                        .recorder
                        .borrow_mut()
                        .record_messages(tally.sent, tally.received);
                }
                outcome.map_err(|failure| connection.explain(failure))
            }
            Ok(sender) => {
                let call = unary_call(sender, &thread.template, thread.next_body(), &mut scratch);
                let outcome = within_deadline(timeout, call).await;
                outcome.map_err(|failure| connection.explain(failure))
            }
        };
        let done = Instant::now();
        let from = intended.map_or(sent, |intended| intended.min(sent));
        let latency = done.saturating_duration_since(from);
        if measured {
            thread.record(
                &outcome,
                latency,
                done.saturating_duration_since(sent),
                done,
            );
        } else {
            thread.record_warmup_call(latency, done);
        }
        if let Err(failure) = outcome {
            if failure.connection_lost {
                connection.wait_for_change(&stop).await;
            }
        }
    }
}
