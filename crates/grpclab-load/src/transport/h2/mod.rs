//! The run loop's calls on the h2 crate (`--transport h2`): the reference transport, kept to
//! check our engine against a widely used HTTP/2 implementation.
//!
//! A task per stream slot takes tickets and runs one call at a time over its connection's
//! shared h2 sender; a driver task per connection runs h2's connection future and reconnects
//! ([`connection`]). Unary calls are in [`unary`], streaming calls in [`streaming`], and a
//! flow's steps, one after the other in the task that drew the flow, in [`flow`].

mod attempts;
mod connection;
mod flow;
pub(crate) mod streaming;
mod unary;
mod web;

use bytes::Bytes;
use grpclab_core::framing::format_grpc_timeout;
use grpclab_core::Code;
use h2::client::SendRequest;
use http::{HeaderMap, HeaderValue, Uri};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Reconnects;
use crate::config::{CallShape, LoadConfig};
use crate::outcome::{CallFailure, CONNECTION_LOST, DEADLINE_MESSAGE};
use crate::retry::Jitter;
use crate::schedule::Ticket;
use crate::thread::{ThreadState, EARLY_WAKE};
use connection::{ConnectionState, Io};
use flow::{FlowStream, FlowTicket};
pub(crate) use unary::CallTemplate;
pub(crate) use web::judge;

/// One thread's connections on the h2 crate, opened before the run starts.
pub(crate) struct Connections {
    /// The request line and headers every call of this thread sends.
    template: Rc<CallTemplate>,
    /// Each connection's index in the run, its sender and its connection future.
    open: Vec<(usize, SendRequest<Bytes>, h2::client::Connection<Io, Bytes>)>,
}

/// Opens this thread's connections (`indexes`) before the run starts.
pub(crate) async fn open(
    config: &LoadConfig,
    indexes: impl Iterator<Item = usize>,
) -> Result<Connections, String> {
    let template = Rc::new(call_template(config)?);
    let mut open = Vec::new();
    for index in indexes {
        let (sender, driver) = connection::connect(config, config.target_for(index))
            .await
            .inspect_err(|reason| tracing::debug!(connection = index, %reason, "connect failed"))?;
        tracing::debug!(
            connection = index,
            peer = %crate::transport::dial::peer_name(config, config.target_for(index)),
            "connected"
        );
        open.push((index, sender, driver));
    }
    Ok(Connections { template, open })
}

/// Starts a driver task per connection and a task per stream slot; the drivers stop with
/// `drivers_stop` once the streams are done.
pub(crate) fn start(
    connections: Connections,
    thread: &Rc<ThreadState>,
    reconnects: &Reconnects,
    drivers_stop: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let config = &thread.shared.config;
    let mut streams = Vec::new();
    for (connection_index, sender, driver) in connections.open {
        let (state_tx, state_rx) = watch::channel(ConnectionState {
            generation: 0,
            sender: Some(sender.clone()),
            down_reason: String::new(),
            address: config.address_index(connection_index),
        });
        tokio::task::spawn_local(connection::drive(
            connection_index,
            config.target_for(connection_index),
            std::sync::Arc::clone(&thread.shared),
            driver,
            state_tx,
            drivers_stop.clone(),
            Rc::clone(&reconnects.unplanned),
        ));
        for index in 0..config.streams_on(connection_index) {
            streams.push(tokio::task::spawn_local(stream_loop(
                Rc::clone(thread),
                Rc::clone(&connections.template),
                StreamSlot {
                    connection: connection_index,
                    index,
                },
                StreamConnection {
                    state: state_rx.clone(),
                    sender: Some(sender.clone()),
                    generation: 0,
                    address: config.address_index(connection_index),
                },
            )));
        }
    }
    streams
}

/// The request headers every call of the run sends (an error: the path or authority cannot
/// make a URI).
pub(crate) fn call_template(config: &LoadConfig) -> Result<CallTemplate, String> {
    let mut headers = HeaderMap::new();
    let protocol = config.protocol;
    // Connect's GET has no body, hence no content type; its protocol version and
    // compression are in the query (`CallTemplate::request_with_body`).
    let connect_get = config.connect_get
        && protocol == grpclab_core::protocol::Protocol::Connect
        && config.shape == CallShape::Unary;
    // A run's streaming calls are its one method's: Connect envelopes them in a type of
    // their own.
    let content_type = if config.shape == CallShape::Unary {
        protocol.content_type_with(config.codec)
    } else {
        protocol.stream_content_type_with(config.codec)
    };
    if !connect_get {
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(content_type),
        );
        for (name, value) in protocol.request_headers() {
            headers.insert(*name, HeaderValue::from_static(value));
        }
    }
    headers.insert(
        http::header::USER_AGENT,
        HeaderValue::from_static(concat!("grpclab/", env!("CARGO_PKG_VERSION"))),
    );
    if let Some(timeout) = config.timeout {
        if protocol == grpclab_core::protocol::Protocol::Connect {
            // Connect's deadline: whole milliseconds, at most 10 digits.
            let millis = timeout.as_millis().clamp(1, 9_999_999_999);
            headers.insert("connect-timeout-ms", HeaderValue::from(millis as u64));
        } else {
            let value = HeaderValue::from_str(&format_grpc_timeout(timeout))
                .map_err(|err| format!("invalid timeout: {err}"))?;
            headers.insert("grpc-timeout", value);
        }
    }
    if config.gzip {
        for (name, value) in protocol.compression_headers(config.shape != CallShape::Unary) {
            if connect_get && name == "content-encoding" {
                continue;
            }
            headers.insert(name, HeaderValue::from_static(value));
        }
    }
    for (name, value) in &config.metadata {
        headers.append(name.clone(), value.clone());
    }
    let methods = config
        .methods
        .iter()
        .map(|method| {
            let uri: Uri = format!("http://{}{}", config.authority, method.path)
                .parse()
                .map_err(|err| format!("invalid call path or authority: {err}"))?;
            let mut own = headers.clone();
            for (name, value) in &method.metadata {
                own.append(name.clone(), value.clone());
            }
            Ok((uri, own))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(CallTemplate {
        methods,
        validator: config.validator.clone(),
        gzip: config.gzip,
        max_reply_message: config.max_recv_message_bytes,
        kept_headers: config.kept_reply_headers(),
        step_traits: config.step_traits(),
        protocol,
        codec: config.codec,
        connect_get,
    })
}

/// A stream's view of its connection: its own sender handle, refreshed only after a failure.
struct StreamConnection {
    state: watch::Receiver<ConnectionState>,
    sender: Option<SendRequest<Bytes>>,
    generation: u64,
    /// Which of the target's addresses it dials (`LoadConfig::address_index`).
    address: usize,
}

impl StreamConnection {
    /// The live sender, or why there is none.
    fn sender(&mut self) -> Result<&mut SendRequest<Bytes>, String> {
        if self.sender.is_none() {
            let state = self.state.borrow_and_update();
            self.generation = state.generation;
            self.address = state.address;
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
    fn explain(&self, mut failure: CallFailure) -> CallFailure {
        if failure.connection_lost && failure.message == CONNECTION_LOST {
            let state = self.state.borrow();
            if !state.down_reason.is_empty() {
                failure.message.clone_from(&state.down_reason);
            }
        }
        failure
    }

    /// After a connection-level failure (`reason`): forget the sender and wait until the
    /// driver has news (reconnected, or another attempt failed), so a dead connection is not
    /// hammered. Open loop, calls keep coming due meanwhile: each ends as Unavailable when
    /// due (see `ThreadState::fail_due`), and the first one due after the wait stays in
    /// `held` for this stream to send next.
    async fn wait_for_change(
        &mut self,
        thread: &ThreadState,
        held: &mut VecDeque<(Instant, bool)>,
        reason: &str,
        stop: &CancellationToken,
    ) {
        self.sender = None;
        if self.state.borrow().generation != self.generation {
            return;
        }
        // At most a second: a failure taken for a connection loss while the connection is
        // in fact up (the driver then never publishes news) must not park the stream for
        // good, or an -n run whose streams all parked would never end.
        let give_up = Instant::now() + Duration::from_secs(1);
        let open_loop = thread.shared.config.pacing.is_open_loop();
        loop {
            let wake = if open_loop {
                match thread.fail_due(held, Instant::now(), reason, self.address) {
                    // The schedule has no more calls: the stream's next ticket says stop.
                    None => return,
                    Some(next) => next.min(give_up),
                }
            } else {
                give_up
            };
            tokio::select! {
                _ = self.state.changed() => return,
                _ = stop.cancelled() => {
                    if open_loop {
                        // Held calls that came due before the stop failed like the rest.
                        thread.fail_due(held, Instant::now(), reason, self.address);
                    }
                    return;
                }
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
            if Instant::now() >= give_up {
                return;
            }
        }
    }
}

/// One unary call in the template's protocol: gRPC's own path (its status in the HTTP/2
/// trailers, the reply kept only when something reads it) or, for gRPC-Web, Connect and the
/// JSON codec, the reply read whole and judged where its protocol keeps the status.
pub(crate) async fn unary_call(
    sender: &mut SendRequest<Bytes>,
    template: &CallTemplate,
    method: u32,
    body: Bytes,
    call_headers: &grpclab_h2::client::CallHeaders,
    scratch: &mut Vec<u8>,
    kept: Option<&mut Vec<grpclab_h2::client::ReplyHeader>>,
) -> Result<(), CallFailure> {
    if template.protocol == grpclab_core::protocol::Protocol::Grpc
        && template.codec == grpclab_core::protocol::Codec::Proto
    {
        unary::grpc_call(sender, template, method, body, call_headers, scratch, kept).await
    } else {
        web::call(
            sender,
            template,
            (method, body, call_headers),
            scratch,
            kept,
        )
        .await
    }
}

/// Open loop: waits until a call's intended time (`None`: at once); false when the run
/// stopped meanwhile. tokio's timer fires on the first millisecond tick at or after its
/// deadline, so sleeping until `intended` would send a millisecond or more late and charge
/// that lateness to the server: it wakes EARLY_WAKE early instead.
pub(crate) async fn until_intended(intended: Option<Instant>, stop: &CancellationToken) -> bool {
    let Some(intended) = intended else {
        return true;
    };
    let wake = intended.checked_sub(EARLY_WAKE).unwrap_or(intended);
    if wake > Instant::now() {
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = stop.cancelled() => return false,
        }
    }
    true
}

/// Records a call that ended now: its latency from its intended time (open loop) or its
/// send, into the measured figures or the warmup's.
pub(crate) fn record_call(
    thread: &ThreadState,
    outcome: &Result<(), CallFailure>,
    (intended, sent, measured): (Option<Instant>, Instant, bool),
    address: usize,
    method: u32,
) {
    let done = Instant::now();
    let from = intended.map_or(sent, |intended| intended.min(sent));
    let latency = done.saturating_duration_since(from);
    if measured {
        thread.record(
            outcome,
            latency,
            done.saturating_duration_since(sent),
            done,
            address,
            method,
        );
    } else {
        thread.record_warmup_call(latency, done);
    }
}

/// Runs a call under the client's deadline (`-t`): past it, the call is dropped (h2 resets
/// its stream) and ends as DeadlineExceeded.
pub(crate) async fn within_deadline(
    timeout: Option<Duration>,
    call: impl std::future::Future<Output = Result<(), CallFailure>>,
) -> Result<(), CallFailure> {
    match timeout {
        None => call.await,
        Some(limit) => tokio::time::timeout(limit, call).await.unwrap_or_else(|_| {
            Err(CallFailure {
                code: Code::DeadlineExceeded,
                message: DEADLINE_MESSAGE.to_owned(),
                connection_lost: false,
            })
        }),
    }
}

/// A streaming call's tally while it runs: dropped before the call ended (its task stopped at
/// the drain limit), it hands the messages so far to the thread, to count with the call.
pub(crate) struct AbandonGuard<'a> {
    thread: &'a ThreadState,
    measured: bool,
    pub(crate) tally: streaming::StreamTally,
    ended: bool,
}

impl<'a> AbandonGuard<'a> {
    /// The tally of a call on `thread` (`measured`: its messages count).
    pub(crate) fn new(thread: &'a ThreadState, measured: bool) -> AbandonGuard<'a> {
        let config = &thread.shared.config;
        AbandonGuard {
            thread,
            measured,
            tally: streaming::StreamTally {
                keep_gaps: config.shape != CallShape::Bidi || config.stream.independent,
                ..streaming::StreamTally::default()
            },
            ended: false,
        }
    }

    /// The call ended: its messages (counts, gaps, stamps) go to the recorder if measured.
    pub(crate) fn record(&mut self) {
        self.ended = true;
        if !self.measured {
            return;
        }
        let tally = &mut self.tally;
        let mut recorder = self.thread.recorder.borrow_mut();
        for gap in tally.gaps.drain(..) {
            recorder.record_message_gaps(Some(gap), 0);
        }
        if tally.together > 0 {
            recorder.record_message_gaps(None, tally.together);
        }
        for (arrived, stamp) in tally.stamps.drain(..) {
            recorder.record_message_stamps(arrived, &[stamp]);
        }
        recorder.record_messages(tally.sent, tally.received);
    }
}

impl Drop for AbandonGuard<'_> {
    fn drop(&mut self) {
        if !self.ended && self.measured {
            self.thread
                .abandon_messages(self.tally.sent, self.tally.received);
        }
    }
}

/// Which stream a stream task is: its connection and its place among that connection's
/// streams (a concurrency schedule lets the first few of each connection run).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamSlot {
    pub(crate) connection: usize,
    pub(crate) index: usize,
}

/// A concurrency schedule: waits until `slot` may send; false when it never will again or
/// the run has stopped handing out calls. Without a schedule, true at once.
pub(crate) async fn wait_for_turn(
    thread: &ThreadState,
    slot: StreamSlot,
    stop: &CancellationToken,
) -> bool {
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
async fn stream_loop(
    thread: Rc<ThreadState>,
    template: Rc<CallTemplate>,
    slot: StreamSlot,
    mut connection: StreamConnection,
) {
    let mut scratch = Vec::new();
    let stop = thread.schedule.stop_token().clone();
    let timeout = thread.shared.config.timeout;
    // Open loop: a call taken while the connection was down and not yet due (at most one).
    let mut held = VecDeque::new();
    // Retries' backoff draws, each stream its own.
    let mut jitter = Jitter::new(
        ((slot.connection as u64) << 32 | slot.index as u64).wrapping_add(0x9e37_79b9_7f4a_7c15),
    );
    loop {
        if stop.is_cancelled() {
            // Not yet due when the run stopped: never a call.
            for (_, measured) in held.drain(..) {
                thread.drop_ticket(measured);
            }
            return;
        }
        let ticket = match held.pop_front() {
            Some((at, measured)) => Ticket::Send {
                intended: Some(at),
                measured,
            },
            None => {
                if !wait_for_turn(&thread, slot, &stop).await {
                    return;
                }
                thread.take_ticket(Instant::now)
            }
        };
        let Ticket::Send { intended, measured } = ticket else {
            return;
        };
        if !until_intended(intended, &stop).await {
            thread.drop_ticket(measured);
            return;
        }
        thread.ticket_due(intended, measured);
        let method = thread.choose_method(measured);
        if let Some(flow) = thread.flow_of_entry(method) {
            let ticket = FlowTicket {
                flow,
                intended,
                measured,
            };
            let mut stream = FlowStream {
                thread: &thread,
                template: &template,
                connection: &mut connection,
                held: &mut held,
                stop: &stop,
                scratch: &mut scratch,
                jitter: &mut jitter,
            };
            stream.run(ticket).await;
            continue;
        }
        let number = thread.call_number();
        let headers = thread
            .call_headers(method, number, &[])
            .map_or_else(Vec::new, |headers| *headers);
        let sent = Instant::now();
        let policy = thread
            .shared
            .config
            .methods
            .get(method as usize)
            .and_then(attempts::Policy::of);
        let outcome = if let Some(policy) = policy {
            // A method with a retry or hedging policy: its attempts, all under the call's
            // deadline.
            let attempts = std::cell::Cell::new(0);
            let call = attempts::AttemptedCall {
                thread: &thread,
                template: &template,
                method,
                body: thread.next_body(method, number),
                headers: &headers,
            };
            let outcome = match policy {
                attempts::Policy::Retry(policy) => {
                    let attempted = call.retried(
                        policy,
                        &mut connection,
                        &mut scratch,
                        &attempts,
                        &mut jitter,
                    );
                    within_deadline(timeout, attempted).await
                }
                attempts::Policy::Hedging(policy) => {
                    within_deadline(timeout, call.hedged(policy, &mut connection, &attempts)).await
                }
            };
            if measured {
                thread.note_retries(method, attempts.get().saturating_sub(1));
            }
            outcome.map_err(|failure| connection.explain(failure))
        } else {
            match connection.sender() {
                Err(reason) => Err(CallFailure {
                    code: Code::Unavailable,
                    message: reason,
                    connection_lost: true,
                }),
                Ok(sender) if thread.shared.config.shape != CallShape::Unary => {
                    let config = &thread.shared.config;
                    // Until the call ends, its tally is in the guard: a task stopped mid-call (the
                    // drain limit passed) hands its messages to the thread as it is dropped.
                    let mut tally = AbandonGuard::new(&thread, measured);
                    let mut round_trip = |latency: Duration| {
                        if measured {
                            thread.recorder.borrow_mut().record_round_trip(latency);
                        }
                    };
                    let call_messages = thread.call_messages(number);
                    let dynamic = |index: u64| thread.dynamic_message(index);
                    let plan = streaming::StreamPlan {
                        shape: config.shape,
                        settings: &config.stream,
                        messages: call_messages.as_deref().unwrap_or(thread.requests()),
                        // Streaming calls are never in a mix: the run's one method.
                        dynamic: (config.methods.first().is_some_and(|m| m.renderer.is_some())
                            && config.stream.dynamic_messages)
                            .then_some(&dynamic as &dyn Fn(u64) -> Bytes),
                        intended,
                        stop: &stop,
                        headers: &headers,
                    };
                    let call = streaming::streaming_call(
                        sender,
                        &template,
                        &plan,
                        &mut tally.tally,
                        &mut round_trip,
                    );
                    let outcome = within_deadline(timeout, call).await;
                    tally.record();
                    outcome.map_err(|failure| connection.explain(failure))
                }
                Ok(sender) => {
                    let body = thread.next_body(method, number);
                    let call = unary_call(
                        sender,
                        &template,
                        method,
                        body,
                        &headers,
                        &mut scratch,
                        None,
                    );
                    let outcome = within_deadline(timeout, call).await;
                    outcome.map_err(|failure| connection.explain(failure))
                }
            }
        };
        record_call(
            &thread,
            &outcome,
            (intended, sent, measured),
            connection.address,
            method,
        );
        if let Err(failure) = outcome {
            if failure.connection_lost {
                connection
                    .wait_for_change(&thread, &mut held, &failure.message, &stop)
                    .await;
            }
        }
    }
}
