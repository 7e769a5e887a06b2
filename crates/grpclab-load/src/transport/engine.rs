//! The run loop's calls on grpclab's own HTTP/2 engine (`--transport lab`, the default).
//!
//! Here a connection is not shared by stream tasks: one task per connection runs
//! [`grpclab_h2::client::run_connection`], which keeps the connection's share of the streams
//! in flight itself and asks this module's [`LabSource`] for each next call and reports each
//! completion. Scheduling and recording are the same as on the h2 crate's path
//! ([`super::h2`]): the same [`Schedule`](crate::schedule) tickets, the same latency rule,
//! the same recorder, all through [`ThreadState`].

use bytes::Bytes;
use grpclab_core::framing::{stream_messages, unframe_maybe_gzip};
use grpclab_core::Code;
use grpclab_h2::client::{
    run_connection, CallEnd, CallSource, CallToken, ConnectionEnd, MessagesFrom, MethodHead,
    NextCall, RequestTemplate, StreamSpec, TurnClock,
};
use grpclab_h2::frame::code as h2_code;
use grpclab_h2::Socket;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::dial::{
    connect_tcp, connect_unix, peer_name, tls_handshake, INITIAL_BACKOFF, MAX_BACKOFF,
};
use super::flow_runs::{AfterStep, FlowRun, FlowRuns, Runs, StepEnd};
use super::resolve::redial_target;
use super::Reconnects;
use crate::config::{CallShape, LoadConfig};
use crate::outcome::{CallFailure, DEADLINE_MESSAGE, REPLY_INFLATE_LIMIT};
use crate::retry::Jitter;
use crate::schedule::Ticket;
use crate::thread::{ThreadState, EARLY_WAKE};
use retry::{RetryRun, RETRY_RUN};

mod hedge;
mod retry;

/// Opens this thread's connections (`indexes`) before the run starts.
pub(crate) async fn open(
    config: &LoadConfig,
    indexes: impl Iterator<Item = usize>,
) -> Result<Vec<(usize, Socket)>, String> {
    let mut connections = Vec::new();
    for index in indexes {
        let socket = connect(config, config.target_for(index))
            .await
            .inspect_err(|reason| {
                tracing::debug!(connection = index, %reason, "connect failed");
            })?;
        tracing::debug!(connection = index, peer = %peer_name(config, config.target_for(index)), "connected");
        connections.push((index, socket));
    }
    Ok(connections)
}

/// Starts one task per connection, each running its share of the streams.
pub(crate) fn start(
    connections: Vec<(usize, Socket)>,
    thread: &Rc<ThreadState>,
    reconnects: &Reconnects,
) -> Vec<tokio::task::JoinHandle<()>> {
    // One template for all: a copy per connection cost each ~0.8 KiB (it was also copied
    // again for every connection it ran).
    let template = Rc::new(request_template(&thread.shared.config));
    connections
        .into_iter()
        .map(|(index, socket)| {
            tokio::task::spawn_local(connection_loop(
                Rc::clone(thread),
                Rc::clone(&template),
                socket,
                index,
                thread.shared.config.streams_on(index),
                reconnects.clone(),
            ))
        })
        .collect()
}

/// Opens a connection for our engine: the unix socket, or TCP to `target`, then TLS when
/// configured.
async fn connect(config: &LoadConfig, target: std::net::SocketAddr) -> Result<Socket, String> {
    let timeout = config.connect_timeout;
    if let Some(path) = &config.unix {
        return Ok(Socket::from(connect_unix(path, timeout).await?));
    }
    let tcp = connect_tcp(target, timeout).await?;
    match config.tls.as_ref() {
        None => Ok(Socket::from(tcp)),
        Some(tls) => {
            let (tcp, session) = tls_handshake(tcp, tls, timeout).await?.into_inner();
            Ok(Socket::with_tls(tcp, session))
        }
    }
}

/// The request template for the engine: path, authority, and the constant headers.
fn request_template(config: &LoadConfig) -> RequestTemplate {
    let mut headers = vec![(
        "user-agent".to_owned(),
        concat!("grpclab/", env!("CARGO_PKG_VERSION")).to_owned(),
    )];
    if let Some(timeout) = config.timeout {
        headers.push((
            "grpc-timeout".to_owned(),
            grpclab_core::framing::format_grpc_timeout(timeout),
        ));
    }
    if config.gzip {
        headers.push(("grpc-encoding".to_owned(), "gzip".to_owned()));
        headers.push(("grpc-accept-encoding".to_owned(), "gzip".to_owned()));
    }
    for (name, value) in &config.metadata {
        headers.push((
            name.as_str().to_owned(),
            String::from_utf8_lossy(value.as_bytes()).into_owned(),
        ));
    }
    RequestTemplate {
        authority: config.authority.clone(),
        methods: config
            .methods
            .iter()
            .map(|method| MethodHead {
                path: method.path.clone(),
                headers: method
                    .metadata
                    .iter()
                    .map(|(name, value)| {
                        (
                            name.as_str().to_owned(),
                            String::from_utf8_lossy(value.as_bytes()).into_owned(),
                        )
                    })
                    .collect(),
            })
            .collect(),
        headers,
        timeout: config.timeout,
        first_stream_id: config.first_stream_id,
        max_reply_message: config.max_recv_message_bytes,
        keepalive: config.keepalive,
        stream: stream_spec(config),
        kept_headers: config.kept_reply_headers(),
    }
}

/// How a streaming method's calls send (ghz's `--stream-*` flags); `None` for unary calls.
fn stream_spec(config: &LoadConfig) -> Option<StreamSpec> {
    let settings = &config.stream;
    // Messages per call: --stream-call-count, else the data array once (ghz); a duration
    // alone sends until it passes.
    // Streaming calls are never in a mix: the one method's requests.
    let first = config.methods.first();
    let messages = first.map_or_else(Vec::new, |method| method.requests.clone());
    let count = settings.call_count.unwrap_or(match settings.call_duration {
        Some(_) => usize::MAX,
        None => messages.len(),
    });
    let messages_from = match (
        first.and_then(|method| method.renderer.as_ref()),
        settings.dynamic_messages,
    ) {
        (None, _) => MessagesFrom::Spec,
        (Some(_), false) => MessagesFrom::EachCall,
        (Some(_), true) => MessagesFrom::EachMessage,
    };
    match config.shape {
        CallShape::Unary => None,
        // One request, then the replies.
        CallShape::ServerStreaming => Some(StreamSpec {
            messages,
            count: 1,
            duration: None,
            interval: None,
            ping_pong: false,
            messages_from,
            receive_limit: settings.call_count.map(|count| count as u64),
            receive_for: settings.call_duration,
            stamp: settings.stamp,
        }),
        CallShape::ClientStreaming | CallShape::Bidi => Some(StreamSpec {
            messages,
            count,
            duration: settings.call_duration,
            interval: settings.interval,
            ping_pong: config.shape == CallShape::Bidi && !settings.independent,
            messages_from,
            receive_limit: None,
            receive_for: None,
            // Client streaming has one reply: its latency is the call's.
            stamp: settings.stamp.filter(|_| config.shape == CallShape::Bidi),
        }),
    }
}

/// Feeds one connection from the thread's schedule and records what comes back.
struct LabSource {
    thread: Rc<ThreadState>,
    /// Open-loop tickets taken ahead, in schedule order, waiting for their time.
    ///
    /// A connection takes as many consecutive tickets as it has free slots, so its calls are
    /// due together and leave in one write — as with per-stream tasks, whose consecutive
    /// tickets wake on the same timer tick. Taking one ticket at a time would interleave the
    /// schedule over all connections and send one call per write.
    held: std::collections::VecDeque<(Instant, bool)>,
    /// This connection's index in the run (its share of a concurrency schedule).
    connection: usize,
    /// Which of the target's addresses this connection dials (`LoadConfig::address_index`).
    address: usize,
    /// The request number of the call just handed to the connection (templates only): a
    /// streaming call's messages are asked for right after, and render with the same number.
    number: Option<u64>,
    /// Flows in progress on this connection (kept across its reconnects).
    flows: FlowRuns,
    /// Calls with a retry policy in progress on this connection (see [`retry`]).
    retries: Runs<RetryRun>,
    /// The retries' backoff draws.
    jitter: Jitter,
    /// Hedged calls' next attempts, when each is due, by run id (see [`hedge`]).
    hedge_timers: Vec<(Instant, u32)>,
    /// Hedged attempts in flight beyond each call's first: extra streams, not slots.
    hedge_extra: usize,
    /// The connection's slots beyond this connection's share of the streams, room for
    /// hedged attempts (0 without hedging): never handed to new calls.
    headroom: usize,
    /// Hedged runs that ended with attempts still in flight, for the connection to reset.
    given_up: Vec<u32>,
    /// The kept headers of the step call about to complete (see `CallSource::reply_headers`).
    reply_headers: Vec<grpclab_h2::client::ReplyHeader>,
}

impl CallSource for LabSource {
    fn next_call(
        &mut self,
        released_until: Instant,
        clock: &mut TurnClock,
        in_flight: usize,
        free_slots: usize,
    ) -> NextCall {
        let (mut in_flight, mut free_slots) = (in_flight, free_slots);
        if self.headroom > 0 {
            if let Some(next) = self.hedge_room(clock, &mut in_flight, &mut free_slots) {
                return next;
            }
        }
        if self.runs_active() {
            // A retried call's next attempt first, then a flow's next step: each holds a
            // slot already. An attempt whose deadline came first ends instead.
            while let Some(id) = self.retries.due(|| clock.now()) {
                if let Some(attempt) = self.next_attempt(id, clock.now()) {
                    return attempt;
                }
            }
            if let Some(id) = self.flows.due(|| clock.now()) {
                return self.send_step(id);
            }
            // Runs between steps (or attempts) hold their slots too.
            let waiting = self.flows.waiting() + self.retries.waiting();
            in_flight += waiting;
            free_slots = free_slots.saturating_sub(waiting);
            if free_slots == 0 {
                return self.pause(None);
            }
        }
        if self.held.is_empty() {
            // A concurrency schedule limits how many tickets are taken; tickets already held
            // go out when due (at a falling step, at most the held few exceed the new limit).
            let (allowed, next_change) = self.thread.schedule.streams_allowed(self.connection);
            if in_flight >= allowed {
                return match next_change {
                    None if in_flight == 0 => NextCall::Stop,
                    at if self.runs_active() => self.pause(at),
                    at => NextCall::Busy(at),
                };
            }
            for _ in 0..free_slots.min(allowed - in_flight).max(1) {
                match self.thread.take_ticket(|| clock.now()) {
                    Ticket::Stop => break,
                    // Closed loop: no schedule to hold; send at once.
                    Ticket::Send {
                        intended: None,
                        measured,
                    } => {
                        return self.send(None, measured);
                    }
                    Ticket::Send {
                        intended: Some(at),
                        measured,
                    } => self.held.push_back((at, measured)),
                }
            }
        }
        let Some(&(at, measured)) = self.held.front() else {
            if self.runs_active() {
                return self.pause(None);
            }
            return NextCall::Stop;
        };
        // Send up to EARLY_WAKE early (see its doc): latency then counts from the earlier
        // of intended and actual send, so an early send is never flattering.
        let wake = at.checked_sub(EARLY_WAKE).unwrap_or(at);
        if wake > released_until {
            if self.runs_active() {
                return self.pause(Some(wake));
            }
            return NextCall::WaitUntil(wake);
        }
        self.held.pop_front();
        self.thread.ticket_due(Some(at), measured);
        self.send(Some(at), measured)
    }

    fn completed(&mut self, token: CallToken, sent: Instant, end: CallEnd, now: Instant) {
        if token.flow != 0 {
            if token.flow & RETRY_RUN != 0 {
                return self.attempt_completed(token, sent, end, now);
            }
            return self.step_completed(token, sent, end, now);
        }
        self.finish(token, sent, now, |source| source.outcome(end));
    }

    fn reply_headers(&mut self, _token: CallToken, headers: &[grpclab_h2::client::ReplyHeader]) {
        self.reply_headers.clear();
        self.reply_headers.extend_from_slice(headers);
    }

    fn given_up(&mut self) -> Option<u32> {
        self.given_up.pop()
    }

    #[inline]
    fn gives_up(&self) -> bool {
        !self.given_up.is_empty()
    }

    fn keeps_reply(&self, token: &CallToken) -> bool {
        self.thread.shared.config.validator.is_some()
            || (token.flow != 0 && self.thread.step_reads_reply(token.method))
    }

    fn peer_windows(&mut self, windows: &grpclab_h2::client::PeerWindows) {
        self.thread.note_server_windows(windows);
    }

    fn window_waited(&mut self, waits: &grpclab_h2::client::WindowWaits) {
        self.thread.note_window_waits(waits);
    }

    fn may_end_without_reply(&self, token: &CallToken) -> bool {
        token.flow != 0 && self.thread.step_traits(token.method).streams
    }

    fn call_messages(&mut self) -> Vec<Bytes> {
        self.thread
            .call_messages(self.number)
            .unwrap_or_else(|| self.thread.requests().to_vec())
    }

    fn message(&mut self, index: u64) -> Bytes {
        self.thread.dynamic_message(index)
    }

    fn message_gaps(&mut self, token: CallToken, gap: Option<Duration>, together: u64) {
        if token.measured {
            self.thread
                .recorder
                .borrow_mut()
                .record_message_gaps(gap, together);
        }
    }

    fn message_stamps(&mut self, token: CallToken, stamps: &[Option<u64>]) {
        if token.measured {
            self.thread
                .recorder
                .borrow_mut()
                .record_message_stamps(grpclab_core::clock::unix_nanos_now(), stamps);
        }
    }

    fn round_trip(&mut self, token: CallToken, latency: Duration) {
        if token.measured {
            self.thread.recorder.borrow_mut().record_round_trip(latency);
        }
    }

    fn stream_messages(&mut self, token: CallToken, sent: u64, received: u64) {
        if token.measured {
            self.thread
                .recorder
                .borrow_mut()
                .record_messages(sent, received);
        }
    }

    fn abandoned(&mut self, token: CallToken, sent: u64, received: u64) {
        if token.measured {
            self.thread.abandon_messages(sent, received);
        }
    }
}

impl LabSource {
    #[inline]
    fn send(&mut self, intended: Option<Instant>, measured: bool) -> NextCall {
        let token = CallToken {
            intended,
            measured,
            method: self.thread.choose_method(measured),
            flow: 0,
        };
        if let Some(flow) = self.thread.flow_of_entry(token.method) {
            return self.start_flow(flow, intended, measured);
        }
        if self.thread.has_retries() && self.thread.retried(token.method) {
            let number = self.thread.call_number();
            let body = self.thread.next_body(token.method, number);
            let headers = self.thread.call_headers(token.method, number, &[]);
            return self.send_retried(token, body, headers);
        }
        if self.thread.templated() {
            return self.send_templated(token);
        }
        // The constant path: the next encoded request, nothing rendered.
        NextCall::Send {
            body: self.thread.next_body(token.method, None),
            token,
            headers: None,
        }
    }

    /// A call with a payload or metadata template: rendered with its request number, which
    /// a streaming call's messages (asked for next) share.
    #[inline(never)]
    fn send_templated(&mut self, token: CallToken) -> NextCall {
        let number = self.thread.call_number();
        self.number = number;
        // A streaming call's messages come from `call_messages`/`message`: no body.
        let body = match self.thread.shared.config.shape {
            crate::config::CallShape::Unary => self.thread.next_body(token.method, number),
            _ => Bytes::new(),
        };
        NextCall::Send {
            body,
            token,
            headers: self.thread.call_headers(token.method, number, &[]),
        }
    }

    /// A call in flight on a connection that was lost: Unavailable.
    fn lost(&mut self, token: CallToken, sent: Instant, reason: &str) {
        let failure = CallFailure {
            code: Code::Unavailable,
            message: reason.to_owned(),
            connection_lost: true,
        };
        if token.flow & RETRY_RUN != 0 {
            return self.attempt_ended(token, sent, Instant::now(), Err(failure));
        }
        if token.flow != 0 {
            return self.step_ended(token, sent, Instant::now(), Err(failure), None, 0);
        }
        self.finish(token, sent, Instant::now(), |_| Err(failure));
    }

    /// Nothing to send now: while flows are in progress, ask again when a call ends, when the
    /// earliest run between steps may go on, or at `until` (a schedule's next call).
    fn pause(&self, until: Option<Instant>) -> NextCall {
        let earliest = [
            self.flows.earliest(),
            self.retries.earliest(),
            self.earliest_hedge(),
        ]
        .into_iter()
        .flatten()
        .min();
        let at = match (until, earliest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        NextCall::Busy(at)
    }

    /// Whether flows or retried calls are in progress: the connection then never stops
    /// before they end.
    #[inline]
    fn runs_active(&self) -> bool {
        self.flows.is_active() || self.retries.is_active()
    }

    /// A ticket drew a flow: its run starts with its first step.
    #[cold]
    #[inline(never)]
    fn start_flow(&mut self, flow: u32, intended: Option<Instant>, measured: bool) -> NextCall {
        let id = self
            .flows
            .start(FlowRun::new(&self.thread, flow, intended, measured));
        self.send_step(id)
    }

    /// The next step of run `id`: its method's request, rendered with the run's variables
    /// when its data or metadata is a template.
    fn send_step(&mut self, id: u32) -> NextCall {
        let thread = &*self.thread;
        let Some(run) = self.flows.get_mut(id) else {
            return NextCall::Busy(None);
        };
        let method = run.method(thread);
        // A constant step is a plain call's request: nothing rendered.
        let (body, headers) = match thread.method_templated(method) {
            true => {
                let number = thread.call_number();
                (
                    thread.body_with(method, number, &run.vars),
                    thread.call_headers(method, number, &run.vars),
                )
            }
            false => (thread.next_body(method, None), None),
        };
        NextCall::Send {
            body,
            headers,
            token: CallToken {
                intended: run.step_intended(),
                measured: run.measured,
                method,
                flow: id,
            },
        }
    }

    /// A flow step's call ended: its reply (framed, when kept) judged and its variables
    /// taken.
    fn step_completed(&mut self, token: CallToken, sent: Instant, end: CallEnd, now: Instant) {
        let traits = self.thread.step_traits(token.method);
        if matches!(end, CallEnd::Ok(None)) && traits.passes_on_ok {
            return self.step_passed(token, sent, now);
        }
        match end {
            CallEnd::Ok(Some(reply)) => {
                let gzip = self.thread.shared.config.gzip;
                let read = match traits.streams {
                    true => stream_messages(&reply, gzip, REPLY_INFLATE_LIMIT),
                    false => unframe_maybe_gzip(&reply, gzip, REPLY_INFLATE_LIMIT)
                        .map(|message| (1, Some(message))),
                };
                match read {
                    Err(err) => {
                        let failure =
                            CallFailure::new(Code::Internal, format!("invalid reply: {err}"));
                        self.step_ended(token, sent, now, Err(failure), None, 0)
                    }
                    Ok((replies, message)) => {
                        self.step_ended(token, sent, now, Ok(()), message.as_deref(), replies)
                    }
                }
            }
            CallEnd::Ok(None) => self.step_ended(token, sent, now, Ok(()), None, 0),
            end => {
                let outcome = self.outcome(end);
                self.step_ended(token, sent, now, outcome, None, 0)
            }
        }
    }

    /// A flow step's end: judged and recorded (see [`FlowRun::step_ended`]); its run goes
    /// on (after its think time) or ends.
    fn step_ended(
        &mut self,
        token: CallToken,
        sent: Instant,
        now: Instant,
        outcome: Result<(), CallFailure>,
        message: Option<&[u8]>,
        replies: u64,
    ) {
        let Some(run) = self.flows.get_mut(token.flow) else {
            return;
        };
        let end = StepEnd {
            intended: token.intended,
            sent,
            now,
            outcome,
            message,
            replies,
            address: self.address,
            jitter: &mut self.jitter,
            headers: &self.reply_headers,
        };
        let after = run.step_ended(&self.thread, end);
        if !self.reply_headers.is_empty() {
            self.reply_headers.clear();
        }
        match after {
            AfterStep::Next(at) => self.flows.wait(token.flow, at),
            AfterStep::Ended => {
                if let Some(run) = self.flows.finish(token.flow) {
                    run.end(&self.thread, now);
                }
            }
        }
    }

    /// A constant step passed by its OK answer (see [`FlowRun::step_passed`]): its run goes
    /// on or ends, with no [`StepEnd`] built.
    #[inline]
    fn step_passed(&mut self, token: CallToken, sent: Instant, now: Instant) {
        let Some(run) = self.flows.get_mut(token.flow) else {
            return;
        };
        match run.step_passed(&self.thread, &token, sent, now, self.address) {
            AfterStep::Next(at) => self.flows.wait(token.flow, at),
            AfterStep::Ended => {
                if let Some(run) = self.flows.finish(token.flow) {
                    run.end(&self.thread, now);
                }
            }
        }
    }

    /// The run ended with flows still between steps: each ends Canceled at the step it
    /// would have sent next.
    fn drop_flows(&mut self) {
        let now = Instant::now();
        for run in self.flows.take_all() {
            run.cancel(&self.thread, now);
        }
    }

    /// Records a call's end: a measured call in the figures (its outcome is only worked out
    /// for those), a warmup call apart (see `Recorder::warmup_calls_in_window`).
    fn finish(
        &mut self,
        token: CallToken,
        sent: Instant,
        now: Instant,
        outcome: impl FnOnce(&Self) -> Result<(), CallFailure>,
    ) {
        let service = now.saturating_duration_since(sent);
        // Latency counts from the call's intended start when it was sent late (open loop);
        // otherwise it is the service time, not worked out twice (a subtraction of two
        // `Instant`s is ~55 instructions, 2 % of a call).
        let latency = match token.intended {
            Some(intended) if intended < sent => now.saturating_duration_since(intended),
            _ => service,
        };
        if !token.measured {
            self.thread.record_warmup_call(latency, now);
            return;
        }
        let outcome = outcome(self);
        self.thread
            .record(&outcome, latency, service, now, self.address, token.method);
    }

    /// Open loop, the connection down until `retry_at` (the next attempt to re-establish
    /// it): the held calls and those coming due meanwhile end as Unavailable when due (see
    /// `ThreadState::fail_due`); the first call due later stays held for the next
    /// connection. False when the run is over.
    async fn fail_until(
        &mut self,
        retry_at: Instant,
        reason: &str,
        stop: &tokio_util::sync::CancellationToken,
    ) -> bool {
        loop {
            let Some(next) =
                self.thread
                    .fail_due(&mut self.held, Instant::now(), reason, self.address)
            else {
                return false;
            };
            let wake = next.min(retry_at);
            tokio::select! {
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = stop.cancelled() => {
                    // Held calls that came due before the stop failed like the rest.
                    self.thread
                        .fail_due(&mut self.held, Instant::now(), reason, self.address);
                    return false;
                }
            }
            if next >= retry_at {
                return true;
            }
        }
    }

    /// The run stopped before the held tickets were due: they were never calls. Flows still
    /// between steps end there.
    fn drop_held(&mut self) {
        while let Some((_, measured)) = self.held.pop_front() {
            self.thread.drop_ticket(measured);
        }
        if self.flows.is_active() {
            self.drop_flows();
        }
        if self.retries.is_active() {
            self.drop_retries();
        }
    }

    fn outcome(&self, end: CallEnd) -> Result<(), CallFailure> {
        let fail = |code: Code, message: String| {
            Err(CallFailure {
                code,
                message,
                connection_lost: false,
            })
        };
        match end {
            CallEnd::Ok(reply) => match (&self.thread.shared.config.validator, reply) {
                (Some(validator), Some(reply)) => {
                    let message = unframe_maybe_gzip(
                        &reply,
                        self.thread.shared.config.gzip,
                        REPLY_INFLATE_LIMIT,
                    )
                    .map_err(|err| format!("invalid reply: {err}"))
                    .and_then(|message| {
                        validator(&message).map_err(|reason| format!("invalid reply: {reason}"))
                    });
                    match message {
                        Ok(()) => Ok(()),
                        Err(reason) => fail(Code::Internal, reason),
                    }
                }
                _ => Ok(()),
            },
            CallEnd::Status(code, message) => fail(Code::from_u32(code), message),
            CallEnd::Http(status) => fail(
                Code::from_http_status(status),
                format!("HTTP status {status}"),
            ),
            CallEnd::Reset(error) => {
                tracing::debug!(
                    connection = self.connection,
                    error_code = format_args!("{error:#x}"),
                    "stream reset by the server"
                );
                let code = match error {
                    h2_code::REFUSED_STREAM => Code::Unavailable,
                    h2_code::CANCEL => Code::Canceled,
                    0xb => Code::ResourceExhausted, // ENHANCE_YOUR_CALM
                    0xc => Code::PermissionDenied,  // INADEQUATE_SECURITY
                    _ => Code::Internal,
                };
                let message = if error == h2_code::REFUSED_STREAM {
                    // Say what to do: the server's per-connection limits were reached.
                    "stream refused by the server (REFUSED_STREAM, never processed): its limit \
                     on streams or request bytes per connection was reached; spread the load \
                     over more --connections or raise the server's limits"
                        .to_owned()
                } else {
                    format!("stream reset by the server (error code {error:#x})")
                };
                fail(code, message)
            }
            CallEnd::Unprocessed(error) => {
                tracing::debug!(
                    connection = self.connection,
                    error_code = format_args!("{error:#x}"),
                    "call above the server's GOAWAY last-stream-id: never processed"
                );
                fail(
                    Code::Unavailable,
                    if error == h2_code::NO_ERROR {
                        // A graceful shutdown (a server stopping, a proxy draining): not a limit.
                        "the server is shutting down (GOAWAY NO_ERROR) and never processed this \
                         call (safe to retry)"
                            .to_owned()
                    } else {
                        format!(
                            "the server ended the connection (GOAWAY error code {error:#x}) \
                             before processing this call (safe to retry)"
                        )
                    },
                )
            }
            CallEnd::Malformed(reason) => fail(Code::Internal, reason.to_owned()),
            CallEnd::DeadlineExceeded => fail(Code::DeadlineExceeded, DEADLINE_MESSAGE.to_owned()),
        }
    }
}

/// Records `count` scheduled calls as failed with `reason` (a connection that is down),
/// taking their tickets so `-n` and the duration still end the run.
fn fail_tickets(thread: &ThreadState, count: usize, reason: &str, address: usize) -> bool {
    for _ in 0..count {
        match thread.take_ticket(Instant::now) {
            Ticket::Stop => return false,
            Ticket::Send { intended, measured } => {
                thread.ticket_due(intended, measured);
                if measured {
                    thread.record_connection_down(reason, Duration::ZERO, Instant::now(), address);
                }
            }
        }
    }
    true
}

/// Waits out `backoff` before the next connection attempt. Open loop: calls keep coming due
/// meanwhile, and each fails when due. False when the run is over.
async fn back_off(
    source: &mut LabSource,
    open_loop: bool,
    backoff: Duration,
    reason: &str,
    stop: &tokio_util::sync::CancellationToken,
) -> bool {
    if open_loop {
        source
            .fail_until(Instant::now() + backoff, reason, stop)
            .await
    } else {
        tokio::select! {
            _ = tokio::time::sleep(backoff) => true,
            _ = stop.cancelled() => false,
        }
    }
}

/// One connection's life: run calls; when the connection is lost, count its calls in flight
/// as Unavailable and reconnect (at once, then with backoff while attempts fail). When its
/// stream ids run out, open a new one (a planned reconnect: nothing fails).
async fn connection_loop(
    thread: Rc<ThreadState>,
    template: Rc<RequestTemplate>,
    first: Socket,
    connection: usize,
    slots: usize,
    reconnects: Reconnects,
) {
    let stop = thread.schedule.stop_token().clone();
    let mut target = thread.shared.config.target_for(connection);
    let mut source = LabSource {
        thread: Rc::clone(&thread),
        held: std::collections::VecDeque::new(),
        connection,
        address: thread.shared.config.address_index(connection),
        number: None,
        flows: FlowRuns::default(),
        retries: Runs::default(),
        jitter: Jitter::new((connection as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        hedge_timers: Vec::new(),
        hedge_extra: 0,
        headroom: 0,
        given_up: Vec::new(),
        reply_headers: Vec::new(),
    };
    // Hedged attempts beyond a call's first ride on room of their own: up to the policy's
    // attempts per slot.
    let hedge_attempts = thread
        .shared
        .config
        .methods
        .iter()
        .filter_map(|method| method.hedging.as_ref())
        .map(|policy| policy.max_attempts as usize)
        .max()
        .unwrap_or(1);
    source.headroom = slots * (hedge_attempts - 1);
    let connection_slots = slots * hedge_attempts;
    let mut tcp = Some(first);
    let mut backoff = Duration::ZERO;
    let mut planned = false;
    let open_loop = thread.shared.config.pacing.is_open_loop();
    loop {
        if let Some(live) = tcp.take() {
            // Closed before the server's SETTINGS: the backoff keeps growing.
            let refused;
            match run_connection(
                live,
                Rc::clone(&template),
                connection_slots,
                &mut source,
                &stop,
            )
            .await
            {
                Ok(()) => {
                    source.drop_held();
                    return;
                }
                Err((end, lost)) => {
                    planned = end == ConnectionEnd::StreamIdsExhausted;
                    refused = end.before_settings();
                    let reason = end.to_string();
                    tracing::debug!(
                        connection,
                        peer = %peer_name(&thread.shared.config, target),
                        %reason,
                        calls_lost = lost.len(),
                        planned,
                        "connection ended"
                    );
                    for call in lost {
                        let (sent, received) = call.messages;
                        if sent > 0 || received > 0 {
                            source.stream_messages(call.token, sent, received);
                        }
                        source.lost(call.token, call.sent, &reason);
                    }
                    // Attempts given up with the connection are gone with it.
                    source.given_up.clear();
                    if refused {
                        // Taken and closed unserved: the next attempt waits, as after a
                        // failed connect (its calls have failed already: none more here).
                        backoff = (backoff * 2).clamp(INITIAL_BACKOFF, MAX_BACKOFF);
                        if !back_off(&mut source, open_loop, backoff, &reason, &stop).await {
                            source.drop_held();
                            return;
                        }
                    }
                }
            }
            if !refused {
                backoff = Duration::ZERO;
            }
        }
        if stop.is_cancelled() {
            source.drop_held();
            return;
        }
        // A name is resolved again: the connection follows the addresses it has now.
        target = redial_target(&thread.shared.config, connection, target).await;
        source.address = thread.shared.address_id(target);
        match connect(&thread.shared.config, target).await {
            Ok(live) => {
                tracing::debug!(
                    connection,
                    peer = %peer_name(&thread.shared.config, target),
                    planned,
                    "reconnected"
                );
                let counter = if planned {
                    &reconnects.planned
                } else {
                    &reconnects.unplanned
                };
                counter.set(counter.get() + 1);
                planned = false;
                tcp = Some(live);
            }
            Err(reason) => {
                planned = false;
                backoff = (backoff * 2).clamp(INITIAL_BACKOFF, MAX_BACKOFF);
                tracing::debug!(
                    connection,
                    %reason,
                    retry_in_ms = backoff.as_millis() as u64,
                    "reconnect failed"
                );
                // Wait out the backoff before the next attempt. Closed loop: each stream's
                // next call fails, once per attempt.
                let go_on = (open_loop || fail_tickets(&thread, slots, &reason, source.address))
                    && back_off(&mut source, open_loop, backoff, &reason, &stop).await;
                if !go_on {
                    source.drop_held();
                    return;
                }
            }
        }
    }
}
