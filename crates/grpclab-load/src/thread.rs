//! What the streams of one client thread share, and the one place where a call's end is
//! recorded: both transports take tickets, bodies and the recorder from here, so scheduling,
//! the latency rule and the figures are the same whichever HTTP/2 engine carried the call.
//!
//! Below the transports and the run loop: it imports the schedule, the configuration and the
//! recorder, never a transport.

use bytes::Bytes;
use grpclab_core::Code;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::config::{LoadConfig, RequestRenderer};
use crate::outcome::{CallFailure, DEADLINE_MESSAGE};
use crate::progress::{LiveSeconds, ThreadProgress};
use crate::recorder::Recorder;
use crate::schedule::{Schedule, Ticket};

/// How early an open-loop call is sent before its intended time: two ticks of tokio's 1 ms
/// timer wheel, because the runtime parks in epoll with millisecond timeouts and may itself
/// wake up to a tick late. Latency then counts from the earlier of the intended and the
/// actual send, so an early send is measured as its plain service time and never flatters
/// the server.
pub(crate) const EARLY_WAKE: Duration = Duration::from_millis(2);

/// Everything the threads of one run share.
pub(crate) struct Shared {
    pub(crate) config: LoadConfig,
    pub(crate) progress: Vec<ThreadProgress>,
    /// Measured calls ended so far while `config.skip_first` is not yet reached: the first
    /// that many are left out of the results (ghz's `--skipFirst`). Untouched when it is 0.
    pub(crate) skipped: AtomicU64,
    /// The next request number for templates (ghz's `.RequestNumber`: one count for the run).
    /// Touched only when a method is templated.
    pub(crate) request_number: AtomicU64,
    /// The last flow run numbered (`--details` lists each step call's run). Touched only
    /// with details and flows.
    pub(crate) flow_run_number: AtomicU64,
    /// A mix: the next measured call's and the next warmup call's number, from which its
    /// method is drawn ([`ThreadState::choose_method`]). Untouched with one method.
    pub(crate) mix_numbers: [AtomicU64; 2],
    /// Calls whose template rendering failed (sent with call 0's request instead).
    pub(crate) render_failures: AtomicU64,
    /// `config.live_latency`: each thread's finished seconds, for the progress snapshots.
    pub(crate) live: Option<LiveSeconds>,
    /// Every address a connection was dialled to, in order of first use (`config.addresses`
    /// first): an address's id is its position. Locked only when a connection is (re)made.
    pub(crate) addresses: std::sync::Mutex<Vec<std::net::SocketAddr>>,
}

impl Shared {
    /// The id of `address` in [`Shared::addresses`], added if new.
    pub(crate) fn address_id(&self, address: std::net::SocketAddr) -> usize {
        let mut known = self
            .addresses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match known.iter().position(|a| *a == address) {
            Some(id) => id,
            None => {
                known.push(address);
                known.len() - 1
            }
        }
    }
}

/// ghz's `.WorkerID` of the workers thread `index` runs: ghz numbers its `-c` workers from 0
/// and hands them the connections in turn, naming each `g{worker}c{connection}` (after the
/// run's `--name` and `:`); here worker `w` is on connection `w mod connections`, run by the
/// thread holding that connection, and a shard's ids carry `s{index}` in front of the `g`.
/// A call's id is the thread's worker its number lands on (ghz's is whichever worker was
/// free): the same ids, spread the same way over a run.
fn worker_ids(config: &LoadConfig, index: usize) -> Vec<String> {
    let prefix = match config.shard {
        Some(shard) => format!("{}s{}", config.worker_prefix, shard.index),
        None => config.worker_prefix.clone(),
    };
    let (threads, connections) = (config.threads.max(1), config.connections.max(1));
    let ids: Vec<String> = (0..config.concurrency.max(1))
        .filter(|worker| worker % connections % threads == index)
        .map(|worker| format!("{prefix}g{worker}c{}", worker % connections))
        .collect();
    match ids.is_empty() {
        true => vec![format!("{prefix}g{index}c{index}")],
        false => ids,
    }
}

/// SplitMix64's finalizer: neighbouring call numbers give unrelated seeds.
fn split_mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// What the streams of one thread share. Single-threaded: `Cell`/`RefCell`, no locks.
pub(crate) struct ThreadState {
    pub(crate) schedule: Arc<Schedule>,
    /// What this thread sends for each of `config.methods`, in that order.
    methods: Vec<ThreadMethod>,
    /// A mix (several methods, or flows): how a call's number picks its entry (a plain
    /// method, then the flows). `None` with one method alone.
    mix: Option<MixDraw>,
    /// Whether each method has figures of its own (a mix, or flows: each step its own).
    per_method: bool,
    /// A mix whose calls are recorded in their method's figures only, the run's being their
    /// sum ([`ThreadState::run_recorder`]): one recording per call, as a run of one method
    /// makes. Off when the run's own recorder must see each call as it ends (`--details`
    /// lists calls in order, a live view publishes each second).
    methods_apart: bool,
    /// Whether any method has a retry policy.
    has_retries: bool,
    /// By method: what the engine asks of a flow step calling it (all false for a plain
    /// method).
    step_traits: Vec<crate::flow::StepTraits>,
    /// How many of the run's methods a plain call may draw (the flows' steps follow them):
    /// a drawn entry past them is a flow.
    plain_methods: u32,
    /// Each flow's own figures (a flow's latency runs from its start to its last step's end).
    pub(crate) flow_recorders: RefCell<Vec<Recorder>>,
    /// Flow step calls recorded without ending a ticket, and flows ended (each a ticket
    /// ended without a call of its own): the run's accounting of tickets against calls.
    step_calls: Cell<u64>,
    flows_ended: Cell<u64>,
    /// Templates only: this thread's generator and text buffer.
    render_state: RefCell<(grpclab_core::template::Random, String)>,
    /// Templates only: ghz's `.WorkerID` of each worker this thread runs ([`worker_ids`]).
    worker_ids: Vec<String>,
    /// Templates only: mixed with a call's number into the seed its templates share
    /// (`.UUID`: one per call, in its payload and its metadata alike).
    call_seed_key: u64,
    /// Whether calls take a request number (a payload or metadata template).
    templated: bool,
    pub(crate) recorder: RefCell<Recorder>,
    /// A mix: each method's own figures, beside the run's in `recorder` (empty with one
    /// method, so a plain run records once per call).
    pub(crate) method_recorders: RefCell<Vec<Recorder>>,
    /// Measured tickets taken and not yet recorded (waiting for their time, waiting to be
    /// written, or in flight): what the drain limit abandons, so `-n` always adds up.
    outstanding: Cell<u64>,
    /// Of those, an open loop's tickets held until they are due (by a stream waiting for its
    /// time, or a connection's free slot): not sent, so not in flight
    /// ([`SecondStats::in_flight_max`](crate::recorder::SecondStats::in_flight_max) leaves them
    /// out). Each leaves at [`ThreadState::ticket_due`] or [`ThreadState::drop_ticket`].
    waiting: Cell<u64>,
    /// Measured tickets taken, and of those given back unsent ([`ThreadState::drop_ticket`]):
    /// counted where it happens, so the run can check that every ticket taken was recorded,
    /// left out or given back — none lost.
    taken: Cell<u64>,
    dropped: Cell<u64>,
    last_completion: Cell<Option<Instant>>,
    /// The last completion's time into the measured window: calls ended by one read share
    /// their end instant, and so this subtraction (~45 instructions).
    last_completion_since: Cell<Duration>,
    progress_slot: usize,
    /// Measured calls ended (in the figures) on connections to each address, by its id in
    /// `Shared::addresses`: this thread's own counts (grown when a re-resolution brings a new
    /// address), summed at the end.
    calls_by_address: RefCell<Vec<u64>>,
    /// What the server's frames allowed this thread's connections (engine transport).
    server_windows: Cell<Option<grpclab_h2::client::PeerWindows>>,
    /// How long this thread's requests waited for the server's windows (engine transport).
    window_waits: Cell<grpclab_h2::client::WindowWaits>,
    /// Live view: how many of the recorder's finished seconds were handed over.
    live_published: Cell<usize>,
    /// Messages (sent, received) of measured streaming calls still in flight when the run
    /// abandoned them at its drain limit, handed over as their connection or task is
    /// dropped; recorded with those calls.
    abandoned_messages: RefCell<Vec<(u64, u64)>>,
    pub(crate) shared: Arc<Shared>,
}

/// One method's requests as a thread sends them.
struct ThreadMethod {
    requests: Vec<Bytes>,
    /// The method's payload template, if it has one.
    renderer: Option<RequestRenderer>,
    /// Round-robin position in `requests`.
    next_request: Cell<usize>,
    /// The method's metadata templates with their names as bytes, made once for the thread.
    metadata_templates: Vec<(Bytes, grpclab_core::template::Template)>,
}

/// How a mix picks a call's method: by weight, from the run's seed and the call's number.
/// A hash of the two, not a generator per thread, so the choice does not depend on which
/// thread sends the call: a run of `-n` calls makes the same calls of each method every time.
#[derive(Debug, Clone)]
pub(crate) struct MixDraw {
    seed: u64,
    /// The weights' running sums: method `i` takes the draws below `cumulative[i]`.
    cumulative: Vec<u64>,
}

impl MixDraw {
    /// The draw for the entries' `weights` (each at least 1), `None` with one entry.
    pub(crate) fn new(weights: &[u32], seed: u64) -> Option<MixDraw> {
        if weights.len() < 2 {
            return None;
        }
        let cumulative = weights
            .iter()
            .scan(0u64, |sum, weight| {
                *sum += u64::from((*weight).max(1));
                Some(*sum)
            })
            .collect();
        Some(MixDraw { seed, cumulative })
    }

    /// The entry of call `number` (`measured` or warmup: two sequences).
    pub(crate) fn method(&self, number: u64, measured: bool) -> u32 {
        let total = self.cumulative.last().copied().unwrap_or(1);
        let stream = if measured { 0 } else { 0x5bd1_e995 };
        // splitmix64's finaliser: consecutive numbers give independent-looking draws.
        let mut z = self
            .seed
            .wrapping_add(stream)
            .wrapping_add(number.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // Multiply-shift maps the 64-bit draw onto 0..total without a division's bias.
        let draw = ((u128::from(z) * u128::from(total)) >> 64) as u64;
        self.cumulative.partition_point(|&sum| sum <= draw) as u32
    }
}

impl ThreadState {
    /// Thread `index`'s state for a run that has started with `schedule`.
    pub(crate) fn new(index: usize, schedule: Arc<Schedule>, shared: Arc<Shared>) -> ThreadState {
        let config = &shared.config;
        let templated = config.methods.iter().any(|method| method.templated());
        ThreadState {
            schedule,
            methods: config
                .methods
                .iter()
                .map(|method| ThreadMethod {
                    requests: method.requests.clone(),
                    renderer: method.renderer.clone(),
                    next_request: Cell::new(index),
                    metadata_templates: method
                        .metadata_templates
                        .iter()
                        .map(|(name, template)| {
                            (
                                Bytes::copy_from_slice(name.as_str().as_bytes()),
                                template.clone(),
                            )
                        })
                        .collect(),
                })
                .collect(),
            mix: MixDraw::new(&config.entry_weights(), config.mix_seed),
            per_method: config.methods.len() > 1 || !config.flows.is_empty(),
            has_retries: config
                .methods
                .iter()
                .any(|method| method.retry.is_some() || method.hedging.is_some()),
            methods_apart: (config.methods.len() > 1 || !config.flows.is_empty())
                && config.details.is_none()
                && !config.live_latency,
            plain_methods: config.plain_methods() as u32,
            step_traits: config.step_traits(),
            flow_recorders: RefCell::new(vec![
                Recorder::new(config.pacing.is_open_loop(), None);
                config.flows.len()
            ]),
            step_calls: Cell::new(0),
            flows_ended: Cell::new(0),
            render_state: RefCell::new((
                grpclab_core::template::Random::new(
                    (index as u64 + 1)
                        ^ SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_nanos() as u64),
                ),
                String::new(),
            )),
            worker_ids: match templated {
                true => worker_ids(config, index),
                false => Vec::new(),
            },
            call_seed_key: SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
                .rotate_left(17)
                ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            templated,
            recorder: RefCell::new(Recorder::new(config.pacing.is_open_loop(), config.details)),
            method_recorders: RefCell::new(
                if config.methods.len() > 1 || !config.flows.is_empty() {
                    // Each method's figures without a call list: the run's list names the method
                    // of each call.
                    vec![Recorder::new(config.pacing.is_open_loop(), None); config.methods.len()]
                } else {
                    Vec::new()
                },
            ),
            outstanding: Cell::new(0),
            waiting: Cell::new(0),
            taken: Cell::new(0),
            dropped: Cell::new(0),
            calls_by_address: RefCell::new(vec![0; config.addresses.len().max(1)]),
            server_windows: Cell::new(None),
            window_waits: Cell::new(grpclab_h2::client::WindowWaits::default()),
            last_completion: Cell::new(None),
            last_completion_since: Cell::new(Duration::ZERO),
            progress_slot: index,
            live_published: Cell::new(0),
            abandoned_messages: RefCell::new(Vec::new()),
            shared,
        }
    }

    /// This thread's measured calls per address (see the field).
    pub(crate) fn calls_by_address(&self) -> Vec<u64> {
        self.calls_by_address.borrow().clone()
    }

    /// A connection told what the server's frames allow it: kept with the others'.
    pub(crate) fn note_server_windows(&self, windows: &grpclab_h2::client::PeerWindows) {
        let mut kept = self.server_windows.get().unwrap_or(*windows);
        kept.merge(windows);
        self.server_windows.set(Some(kept));
    }

    /// A connection's requests waited for the server's windows: added to the others'.
    pub(crate) fn note_window_waits(&self, waits: &grpclab_h2::client::WindowWaits) {
        let mut kept = self.window_waits.get();
        kept.add(waits);
        self.window_waits.set(kept);
    }

    /// How long this thread's requests waited for the server's windows.
    pub(crate) fn window_waits(&self) -> grpclab_h2::client::WindowWaits {
        self.window_waits.get()
    }

    /// What the server's frames allowed this thread's connections.
    pub(crate) fn server_windows(&self) -> Option<grpclab_h2::client::PeerWindows> {
        self.server_windows.get()
    }

    /// Measured tickets taken and not yet recorded.
    pub(crate) fn outstanding(&self) -> u64 {
        self.outstanding.get()
    }

    /// A measured streaming call in flight is being abandoned (the run's drain limit passed):
    /// its messages so far, to be counted with it.
    pub(crate) fn abandon_messages(&self, sent: u64, received: u64) {
        if sent > 0 || received > 0 {
            self.abandoned_messages.borrow_mut().push((sent, received));
        }
    }

    /// The messages handed over by [`ThreadState::abandon_messages`].
    pub(crate) fn take_abandoned_messages(&self) -> Vec<(u64, u64)> {
        std::mem::take(&mut *self.abandoned_messages.borrow_mut())
    }

    /// When this thread's last measured call ended.
    pub(crate) fn last_completion(&self) -> Option<Instant> {
        self.last_completion.get()
    }
    /// The next ticket from the schedule; a measured one is outstanding until recorded (or
    /// given back with [`ThreadState::drop_ticket`]).
    /// An open loop's measured ticket also waits until [`ThreadState::ticket_due`].
    pub(crate) fn take_ticket(&self, now: impl FnOnce() -> Instant) -> Ticket {
        let ticket = self.schedule.next_ticket(now);
        if let Ticket::Send {
            measured: true,
            intended,
        } = ticket
        {
            self.outstanding.set(self.outstanding.get() + 1);
            self.taken.set(self.taken.get() + 1);
            if intended.is_some() {
                self.waiting.set(self.waiting.get() + 1);
            }
        }
        ticket
    }

    /// An open loop's ticket stops waiting: its call is being sent now, or ended without
    /// being sent (its connection is down). A closed loop's tickets never wait.
    pub(crate) fn ticket_due(&self, intended: Option<Instant>, measured: bool) {
        if measured && intended.is_some() {
            self.waiting.set(self.waiting.get().saturating_sub(1));
        }
    }

    /// Measured tickets taken so far, and of those given back unsent.
    pub(crate) fn tickets(&self) -> (u64, u64) {
        (self.taken.get(), self.dropped.get())
    }

    /// An open loop's ticket that will never be sent (the run was stopped before it was due):
    /// it is not a call, so it is neither recorded nor abandoned.
    pub(crate) fn drop_ticket(&self, measured: bool) {
        if measured {
            self.outstanding
                .set(self.outstanding.get().saturating_sub(1));
            self.waiting.set(self.waiting.get().saturating_sub(1));
            self.dropped.set(self.dropped.get() + 1);
        }
    }

    /// Open loop while a connection is down: ends every call of `held` and then of the
    /// schedule that is due by `now` as Unavailable (`reason`), and leaves the first call not
    /// yet due at the front of `held`. Returns when that call is due, or `None` once the
    /// schedule has no more calls (and `held` is empty).
    ///
    /// Why: a connection that cannot be re-established takes no calls, and an open loop's
    /// calls keep coming due. Left in the schedule, they would never be sent, failed or
    /// counted: an outage would shrink the run instead of showing as errors (coordinated
    /// omission). gRPC clients fail a call at once while their channel is down (not
    /// wait-for-ready), so each due call ends Unavailable; its latency runs from its intended
    /// time, so calls that waited out a connection attempt show that wait.
    pub(crate) fn fail_due(
        &self,
        held: &mut VecDeque<(Instant, bool)>,
        now: Instant,
        reason: &str,
        address: usize,
    ) -> Option<Instant> {
        loop {
            if held.is_empty() {
                match self.take_ticket(Instant::now) {
                    Ticket::Stop => return None,
                    Ticket::Send { intended, measured } => {
                        // A closed-loop ticket (never taken here by the transports) is due now.
                        held.push_back((intended.unwrap_or(now), measured));
                    }
                }
            }
            let &(at, measured) = held.front()?;
            if at > now {
                return Some(at);
            }
            held.pop_front();
            // Every ticket here is an open loop's (see above), so it was waiting.
            self.ticket_due(Some(at), measured);
            let latency = now.saturating_duration_since(at);
            if measured {
                self.record_connection_down(reason, latency, now, address);
            } else {
                self.record_warmup_call(latency, now);
            }
        }
    }

    /// Records a measured call that was never sent because its connection is down and
    /// could not be re-established (`reason`): Unavailable, as a gRPC client fails it.
    pub(crate) fn record_connection_down(
        &self,
        reason: &str,
        latency: Duration,
        now: Instant,
        address: usize,
    ) {
        // A call never sent still belongs to a method: the one it would have called (a
        // flow's first step: the flow failed there).
        let entry = self.choose_method(true);
        let failure = Err(CallFailure {
            code: Code::Unavailable,
            message: reason.to_owned(),
            connection_lost: true,
        });
        match self.flow_of_entry(entry) {
            None => self.record(&failure, latency, Duration::ZERO, now, address, entry),
            Some(flow) => {
                let first = self.shared.config.flows[flow as usize].steps[0].method;
                let run = self.flow_run_number();
                if run != 0 {
                    self.recorder.borrow_mut().record_flow_run(run);
                }
                self.record(&failure, latency, Duration::ZERO, now, address, first);
                self.record_flow(flow, &failure, None, latency, now);
            }
        }
    }

    /// The flow a drawn entry of the mix starts (`None`: a plain method's call).
    #[inline]
    pub(crate) fn flow_of_entry(&self, entry: u32) -> Option<u32> {
        entry.checked_sub(self.plain_methods)
    }

    /// The number of a flow run about to start (from 1, one sequence for the run, so each
    /// step call in `--details` names its run); 0 without details, where nothing lists it.
    pub(crate) fn flow_run_number(&self) -> u64 {
        if self.shared.config.details.is_none() {
            return 0;
        }
        let local = self.shared.flow_run_number.fetch_add(1, Relaxed);
        // Sharded: numbers from the run's one global sequence, so no two generators' runs
        // share a number.
        1 + match self.shared.config.shard {
            Some(shard) => shard.global(local),
            None => local,
        }
    }

    /// A flow step's call has ended: recorded as any call (the run's figures and its
    /// step's), without ending its flow's ticket; `unexpected` says how its reply failed its
    /// expectation (its own outcome, beside the status); `run` is the flow run's number
    /// ([`ThreadState::flow_run_number`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_step(
        &self,
        run: u64,
        outcome: &Result<(), CallFailure>,
        unexpected: Option<&str>,
        latency: Duration,
        service: Duration,
        done: Instant,
        address: usize,
        method: u32,
    ) {
        // `record` ends a ticket; a step does not: the flow's end does.
        self.outstanding.set(self.outstanding.get() + 1);
        self.step_calls.set(self.step_calls.get() + 1);
        if run != 0 {
            self.recorder.borrow_mut().record_flow_run(run);
        }
        self.record(outcome, latency, service, done, address, method);
        if let Some(reason) = unexpected {
            if !self.methods_apart {
                self.recorder.borrow_mut().note_unexpected(reason);
            }
            if let Some(own) = self.method_recorders.borrow_mut().get_mut(method as usize) {
                own.note_unexpected(reason);
            }
        }
    }

    /// A measured flow has ended, its ticket with it: `outcome` is its first failed step's
    /// (OK when none failed by status), `unexpected` how a step's reply failed its
    /// expectation, `latency` from the flow's start (scheduled, in an open loop) to its last
    /// step's end.
    pub(crate) fn end_flow(
        &self,
        flow: u32,
        outcome: &Result<(), CallFailure>,
        unexpected: Option<&str>,
        latency: Duration,
        done: Instant,
    ) {
        self.outstanding
            .set(self.outstanding.get().saturating_sub(1));
        self.flows_ended.set(self.flows_ended.get() + 1);
        self.record_flow(flow, outcome, unexpected, latency, done);
    }

    /// How far into the measured window `done` is; worked out once per instant (a step and
    /// its flow end at the same one, as do calls read from one buffer).
    #[inline]
    fn since_start(&self, done: Instant) -> Duration {
        if self.last_completion.get() == Some(done) {
            return self.last_completion_since.get();
        }
        let since = done.saturating_duration_since(self.schedule.measure_from());
        self.last_completion.set(Some(done));
        self.last_completion_since.set(since);
        since
    }

    /// A flow's end in its own figures.
    fn record_flow(
        &self,
        flow: u32,
        outcome: &Result<(), CallFailure>,
        unexpected: Option<&str>,
        latency: Duration,
        done: Instant,
    ) {
        let since = self.since_start(done);
        let mut recorders = self.flow_recorders.borrow_mut();
        let Some(own) = recorders.get_mut(flow as usize) else {
            return;
        };
        record_end(own, outcome, false, latency, latency, since);
        if let Some(reason) = unexpected {
            own.note_unexpected(reason);
        }
    }

    /// Flow step calls recorded and flows ended, for the run's accounting.
    pub(crate) fn flow_counts(&self) -> (u64, u64) {
        (self.step_calls.get(), self.flows_ended.get())
    }

    /// This thread's figures of each flow.
    pub(crate) fn take_flow_recorders(&self) -> Vec<Recorder> {
        std::mem::take(&mut *self.flow_recorders.borrow_mut())
    }

    /// The next call's request number (ghz's `.RequestNumber`: one count for the run), when
    /// anything of a call is rendered from a template; `None` on the constant path. One
    /// number serves the call's payload and its metadata.
    pub(crate) fn call_number(&self) -> Option<u64> {
        if !self.templated {
            return None;
        }
        let local = self.shared.request_number.fetch_add(1, Relaxed);
        // Sharded: numbers from the run's one global sequence, so no two generators send
        // the same request number.
        Some(match self.shared.config.shard {
            Some(shard) => shard.global(local),
            None => local,
        })
    }

    /// The method of the next call (`measured` or warmup): 0 with one method; in a mix, drawn
    /// by weight from the call's number in the run (see [`MixDraw`]).
    #[inline]
    pub(crate) fn choose_method(&self, measured: bool) -> u32 {
        let Some(mix) = &self.mix else {
            return 0;
        };
        self.draw_method(mix, measured)
    }

    #[inline(never)]
    fn draw_method(&self, mix: &MixDraw, measured: bool) -> u32 {
        let local = self.shared.mix_numbers[usize::from(!measured)].fetch_add(1, Relaxed);
        // Sharded: numbers from the run's one global sequence, so the shards' draws together
        // are the draws of one whole run.
        let number = match self.shared.config.shard {
            Some(shard) => shard.global(local),
            None => local,
        };
        mix.method(number, measured)
    }

    /// A unary call's request for `method`: call `number`'s rendering under a payload
    /// template, else the next of the method's constant requests.
    pub(crate) fn next_body(&self, method: u32, number: Option<u64>) -> Bytes {
        self.body_with(method, number, &[])
    }

    /// A unary call's request, as [`ThreadState::next_body`], with a flow run's variables
    /// for its templates.
    pub(crate) fn body_with(&self, method: u32, number: Option<u64>, vars: &[String]) -> Bytes {
        let Some(own) = self.methods.get(method as usize) else {
            return Bytes::new();
        };
        // `number` is `None` on the constant path: no template is looked at.
        if let (Some(number), Some(renderer)) = (number, &own.renderer) {
            return self.render_body(method as usize, renderer, number, vars);
        }
        let next = own.next_request.get();
        own.next_request.set(next.wrapping_add(1));
        // Cloning `Bytes` shares the encoded request: a reference count, no copy.
        own.requests[next % own.requests.len()].clone()
    }

    /// The constant requests of the run's first method (streaming calls: a mix is unary).
    pub(crate) fn requests(&self) -> &[Bytes] {
        self.methods
            .first()
            .map_or(&[], |method| method.requests.as_slice())
    }

    /// Call `number`'s own headers: its method's metadata templates rendered (none without
    /// them).
    pub(crate) fn call_headers(
        &self,
        method: u32,
        number: Option<u64>,
        vars: &[String],
    ) -> Option<Box<grpclab_h2::client::CallHeaders>> {
        let templates = &self.methods.get(method as usize)?.metadata_templates;
        let number = number.filter(|_| !templates.is_empty())?;
        let context = self.call_context(number, vars);
        let mut state = self.render_state.borrow_mut();
        let (random, text) = &mut *state;
        let headers = templates
            .iter()
            .map(|(name, template)| {
                template.render(&context, random, text);
                (name.clone(), Bytes::copy_from_slice(text.as_bytes()))
            })
            .collect();
        Some(Box::new(headers))
    }

    /// What call `number`'s template actions render from (its number, this thread, now, and
    /// a flow run's variables).
    fn call_context<'a>(
        &'a self,
        number: u64,
        vars: &'a [String],
    ) -> grpclab_core::template::CallContext<'a> {
        grpclab_core::template::CallContext {
            request_number: number,
            worker_id: self
                .worker_ids
                .get((number % self.worker_ids.len().max(1) as u64) as usize)
                .map_or("", String::as_str),
            call_seed: split_mix(self.call_seed_key ^ number),
            now: std::time::SystemTime::now(),
            vars,
        }
    }

    /// Whether `method`'s calls render anything (a payload or metadata template).
    pub(crate) fn method_templated(&self, method: u32) -> bool {
        self.methods
            .get(method as usize)
            .is_some_and(|own| own.renderer.is_some() || !own.metadata_templates.is_empty())
    }

    /// What a flow step calling `method` asks of the engine (nothing for a plain method).
    #[inline]
    pub(crate) fn step_traits(&self, method: u32) -> crate::flow::StepTraits {
        self.step_traits
            .get(method as usize)
            .copied()
            .unwrap_or_default()
    }

    /// Whether a flow step calling `method` reads its reply (see
    /// [`FlowStepPlan::reads_reply`](crate::flow::FlowStepPlan::reads_reply)).
    pub(crate) fn step_reads_reply(&self, method: u32) -> bool {
        self.step_traits(method).reads_reply
    }

    /// Whether calls take a request number ([`ThreadState::call_number`]).
    pub(crate) fn templated(&self) -> bool {
        self.templated
    }

    /// A templated call's request: rendered, encoded, framed (and compressed under `-e`).
    #[cold]
    fn render_body(
        &self,
        method: usize,
        renderer: &RequestRenderer,
        number: u64,
        vars: &[String],
    ) -> Bytes {
        let messages = self.render(method, renderer, number, vars);
        messages[(number % messages.len() as u64) as usize].clone()
    }

    /// Renders `method`'s payload template for call `number`: the framed messages (never
    /// empty: a failed rendering is counted and sends call 0's request).
    fn render(
        &self,
        method: usize,
        renderer: &RequestRenderer,
        number: u64,
        vars: &[String],
    ) -> Vec<Bytes> {
        let mut state = self.render_state.borrow_mut();
        let (random, text) = &mut *state;
        let context = self.call_context(number, vars);
        let messages = match renderer(&context, random, text) {
            Ok(messages) if !messages.is_empty() => messages,
            _ => {
                self.shared.render_failures.fetch_add(1, Relaxed);
                let first = self
                    .methods
                    .get(method)
                    .and_then(|own| own.requests.first().cloned());
                return vec![first.unwrap_or_default()];
            }
        };
        if self.shared.config.gzip {
            return messages
                .iter()
                .map(grpclab_core::framing::gzip_framed)
                .collect();
        }
        messages
    }

    /// A streaming call's messages when the payload is a template rendered once per call
    /// (call `number`'s rendering; `None`: no template, or one rendered per message).
    pub(crate) fn call_messages(&self, number: Option<u64>) -> Option<Vec<Bytes>> {
        let renderer = self.shared.config.methods.first()?.renderer.as_ref()?;
        if self.shared.config.stream.dynamic_messages {
            return None;
        }
        Some(self.render(0, renderer, number?, &[]))
    }

    /// Message `index` of a streaming call under `--stream-dynamic-messages`: the template
    /// rendered anew, its element `index % len` (the plain data array without a template).
    pub(crate) fn dynamic_message(&self, index: u64) -> Bytes {
        let requests = self.requests();
        match self
            .shared
            .config
            .methods
            .first()
            .and_then(|m| m.renderer.as_ref())
        {
            Some(renderer) => {
                let number = self.call_number().unwrap_or_default();
                let messages = self.render(0, renderer, number, &[]);
                messages[(index % messages.len() as u64) as usize].clone()
            }
            None if requests.is_empty() => Bytes::new(),
            None => requests[(index % requests.len() as u64) as usize].clone(),
        }
    }

    /// Records a measured call's end: `method` (its index in `config.methods`) called on a
    /// connection to `address` (its id in `Shared::addresses`).
    pub(crate) fn record(
        &self,
        outcome: &Result<(), CallFailure>,
        latency: Duration,
        service: Duration,
        done: Instant,
        address: usize,
        method: u32,
    ) {
        let outstanding = self.outstanding.get();
        self.outstanding.set(outstanding.saturating_sub(1));
        let in_flight = outstanding.saturating_sub(self.waiting.get());
        let skip_first = self.shared.config.skip_first;
        if skip_first > 0 && self.shared.skipped.fetch_add(1, Relaxed) < skip_first {
            // One of the first `--skipFirst` calls of the run: it ran and ended, and is left
            // out of the figures, as ghz leaves it out of its report.
            self.recorder.borrow_mut().discard_messages();
            self.shared.progress[self.progress_slot]
                .add(outcome.as_ref().err().map(|failure| failure.code));
            return;
        }
        {
            let mut calls = self.calls_by_address.borrow_mut();
            if address >= calls.len() {
                calls.resize(address + 1, 0);
            }
            calls[address] += 1;
        }
        let since = self.since_start(done);
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
        if !self.per_method {
            record_end(&mut recorder, outcome, late, latency, service, since);
        } else {
            self.record_in_method(method, outcome, late, latency, service, since);
            if !self.methods_apart {
                recorder.record_method(method);
                record_end(&mut recorder, outcome, late, latency, service, since);
            }
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
        let failed = match outcome {
            Ok(()) if late => Some(Code::DeadlineExceeded),
            Ok(()) => None,
            Err(failure) => Some(failure.code),
        };
        self.shared.progress[self.progress_slot].add(failed);
    }

    /// A mix: the call's end in its method's own figures too. Out of line: a run of one
    /// method never comes here, and a second inlined copy of the recording would crowd the
    /// inlining of the path every call takes.
    #[inline(never)]
    fn record_in_method(
        &self,
        method: u32,
        outcome: &Result<(), CallFailure>,
        late: bool,
        latency: Duration,
        service: Duration,
        since: Duration,
    ) {
        if let Some(own) = self.method_recorders.borrow_mut().get_mut(method as usize) {
            record_end(own, outcome, late, latency, service, since);
        }
    }

    /// Whether any method of the run has a retry or hedging policy.
    #[inline]
    pub(crate) fn has_retries(&self) -> bool {
        self.has_retries
    }

    /// Whether `method` has a retry or hedging policy (its calls are runs of attempts).
    pub(crate) fn retried(&self, method: u32) -> bool {
        self.shared
            .config
            .methods
            .get(method as usize)
            .is_some_and(|own| own.retry.is_some() || own.hedging.is_some())
    }

    /// A measured call of `method` with a retry policy has ended after `retries` attempts
    /// beyond its first: counted in its method's figures and the run's.
    pub(crate) fn note_retries(&self, method: u32, retries: u32) {
        if retries == 0 {
            return;
        }
        if !self.methods_apart {
            self.recorder.borrow_mut().note_retries(retries);
        }
        if let Some(own) = self.method_recorders.borrow_mut().get_mut(method as usize) {
            own.note_retries(retries);
        }
    }

    /// This thread's figures of the whole run, once its calls have ended: its recorder,
    /// with each method's figures added when calls were recorded there only (see
    /// `methods_apart`).
    pub(crate) fn run_recorder(&self) -> Recorder {
        let mut recorder = self.recorder.borrow().clone();
        if self.methods_apart {
            for own in self.method_recorders.borrow().iter() {
                recorder.merge(own);
            }
        }
        recorder
    }

    /// This thread's figures of each method of a mix (empty with one method).
    pub(crate) fn take_method_recorders(&self) -> Vec<Recorder> {
        std::mem::take(&mut *self.method_recorders.borrow_mut())
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

/// One call's end in `recorder`: OK, or its status (a late OK reply as DeadlineExceeded).
fn record_end(
    recorder: &mut Recorder,
    outcome: &Result<(), CallFailure>,
    late: bool,
    latency: Duration,
    service: Duration,
    since: Duration,
) {
    match outcome {
        Ok(()) if late => {
            recorder.record_error(Code::DeadlineExceeded, DEADLINE_MESSAGE, latency, since)
        }
        Ok(()) => recorder.record_ok(latency, service, since),
        Err(failure) => recorder.record_error(failure.code, &failure.message, latency, since),
    }
}
