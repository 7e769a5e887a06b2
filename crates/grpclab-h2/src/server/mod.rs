//! A server connection for gRPC calls. This file holds the connection loop, the stream
//! states and the frame dispatch; each part of the protocol has a module of its own, as in
//! the h2 crate's `proto/`: `service` (what the application implements), `head` (request
//! headers), `settings`, `flow_control`, `budget` (flood and body budgets), `deadlines`,
//! `respond` (response heads, trailers, statuses), `go_away` (resets, GOAWAY, connection
//! errors) and `streaming` (a streaming call's messages one by one, replies as flow control
//! allows). They are `impl` blocks of the one `Connection` and see its fields: a turn
//! touches all of them, and splitting the state would put a borrow on every hot access.
//!
//! One task per connection owns the socket, a read buffer and a write buffer. Each turn of its
//! loop reads everything the socket has, parses every complete frame, runs the calls whose
//! request is complete (inline, or handed to the [`Service`] to answer later), encodes every
//! response into the write buffer, and writes it with as few syscalls as the socket allows.
//! A call's body is a slice of the read buffer (no copy when it came in one DATA frame).
//!
//! Protocol rules enforced here (RFC 9113): the preface and first SETTINGS; frame sizes per
//! type; stream id rules (odd, increasing; idle streams); CONTINUATION sequences; flow control
//! on both directions (WINDOW_UPDATE batched at half a window); SETTINGS and PING
//! acknowledgements; SETTINGS_MAX_CONCURRENT_STREAMS (excess streams get REFUSED_STREAM);
//! RST_STREAM; GOAWAY (ours on shutdown or error, the peer's). A connection error writes
//! GOAWAY with its code and closes this connection only.

use bytes::{Buf, Bytes, BytesMut};
use std::borrow::Cow;
use std::collections::VecDeque;

use crate::io::Socket;
use crate::stream_map::StreamMap;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::control;
use crate::frame::{self, code, connection_error, flags, kind, setting, ConnectionError, Header};
use crate::hpack::{CachedBlock, DecodedBlocks, Decoder, Encoder, Indexing};

mod budget;
mod deadlines;
mod flow_control;
#[cfg(feature = "fuzzing")]
mod fuzz;
mod go_away;
mod head;
mod respond;
mod service;
mod settings;
mod streaming;

use crate::cancel_watch::CancelWatch;
use budget::{FloodBudget, BUDGET_SLACK};
use deadlines::arm_no_later_than;
#[cfg(feature = "fuzzing")]
pub use fuzz::feed_server;
use go_away::{close_after_error, ResetMemory};
use head::{HeadScratch, PartialHeaders, SkippedIds};
use respond::{Message, ReplyHead, StatusPlace};
pub use service::{
    CallReply, Dispatch, Reply, RequestHead, Response, ServerSettings, Service,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_KEEPALIVE_INTERVAL, DEFAULT_KEEPALIVE_TIMEOUT,
};
use service::{LateReplies, KEEPALIVE_PING};

/// The largest reply buffer a connection keeps between calls (see `reply_message`): the
/// grpc_bench messages fit many times over; a 166 KB reply's buffer goes with its call.
const REPLY_BUFFER_KEPT: usize = 16 << 10;
use streaming::StreamingCall;
pub use streaming::{Step, StreamOut, OUTBOX_LIMIT};

/// How much service work (calls run inline, responses encoded) a connection does before it
/// lets the thread's other connections run. Without it, a connection whose client keeps it
/// readable keeps the thread: tokio's cooperative budget only forces a yield after 128
/// socket operations, which at 760 µs per large_complex call is about two seconds — the other
/// connections' calls starved that long (study 2, docs/studies/decode-placement.md). Small
/// calls never reach it within a turn, so their batching is unchanged.
const FAIR_SHARE: std::time::Duration = std::time::Duration::from_millis(1);
/// How long a connection waits before offering a busy call again when nothing else wakes it.
const BUSY_RETRY: std::time::Duration = std::time::Duration::from_millis(1);
/// Read buffer growth step for a busy connection.
const READ_CHUNK: usize = 64 * 1024;
/// What a connection's read buffer starts with (it doubles while reads fill it, up to
/// [`READ_CHUNK`]): a held connection costs what it touches, and a unary request with its
/// headers fits in 1 KiB. 4 KiB cost lab 13.9 KiB of RSS per held connection, 1 KiB 7.0 KiB
/// (benches/connections.py).
const INITIAL_BUFFER: usize = 1024;
/// Bytes waiting to be written above which the connection stops reading until they drain:
/// a client that does not read cannot make us queue answers (PING and SETTINGS acks,
/// resets, responses) without limit; it gets what tonic gives it, a server that stops reading.
const WRITE_BACKLOG_LIMIT: usize = 256 * 1024;
/// After the peer closed its side, how long queued bytes may take to leave before the
/// connection is dropped: a half-closed peer that never reads cannot hold the socket.
const CLOSE_LINGER: std::time::Duration = std::time::Duration::from_secs(30);

enum StreamState<C> {
    /// Headers in; body arriving.
    Receiving {
        call: C,
        body: Body,
        deadline: Option<Instant>,
        /// The request's `content-length`, which its DATA must match (§8.1.1).
        content_length: Option<u64>,
    },
    /// The service has the call.
    Running,
    /// Response data waiting for flow-control window, then the trailers (`trailers`), or
    /// not (a gRPC-Web reply: its last DATA ends the stream).
    Sending { data: Bytes, trailers: bool },
    /// The response's END_STREAM is in the write buffer, not yet on the socket: the stream
    /// still counts against SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §5.1.2), and frames the
    /// peer sends meanwhile (WINDOW_UPDATE, RST_STREAM) meet it half-closed, not closed.
    Flushing,
    /// A streaming call, whose state is in `Connection::streaming` (see the `streaming`
    /// module: kept apart so that unary streams and their drop code stay as small as before).
    Streaming,
}

enum Body {
    Empty,
    One(Bytes),
    Many(BytesMut),
}

impl Body {
    fn len(&self) -> usize {
        match self {
            Body::Empty => 0,
            Body::One(b) => b.len(),
            Body::Many(b) => b.len(),
        }
    }

    fn push(&mut self, chunk: Bytes) {
        *self = match std::mem::replace(self, Body::Empty) {
            Body::Empty => Body::One(chunk),
            Body::One(first) => {
                let mut many = BytesMut::with_capacity(first.len() + chunk.len());
                many.extend_from_slice(&first);
                many.extend_from_slice(&chunk);
                Body::Many(many)
            }
            Body::Many(mut many) => {
                many.extend_from_slice(&chunk);
                Body::Many(many)
            }
        };
    }

    fn prefix_length(&self) -> Option<usize> {
        let bytes: &[u8] = match self {
            Body::Empty => return None,
            Body::One(b) => b,
            Body::Many(b) => b,
        };
        crate::grpc::declared_message_len(bytes)
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Body::Empty => Bytes::new(),
            Body::One(b) => b,
            Body::Many(b) => b.freeze(),
        }
    }
}

struct Stream<C> {
    state: StreamState<C>,
    /// What the peer may still send on this stream.
    recv_window: i64,
    /// Consumed and not yet returned with a stream WINDOW_UPDATE.
    recv_unacked: u32,
    /// What we may still send on this stream, minus the peer's SETTINGS_INITIAL_WINDOW_SIZE
    /// (WINDOW_UPDATEs added, data sent subtracted). Relative, so that a SETTINGS change
    /// applies to every open stream (RFC 9113 §6.9.2) in O(1) instead of a walk over them all:
    /// a walk per SETTINGS entry let 6 MB/s of SETTINGS keep an I/O thread busy.
    send_window_offset: i64,
    /// Connection-window bytes this stream's DATA took that are not yet returned: returned
    /// when the answer has been written or the stream dropped (see
    /// [`ServerSettings::connection_window`]).
    held: u32,
}

/// One connection's protocol state.
struct Connection<S: Service> {
    service: S,
    settings: ServerSettings,
    decoder: Decoder,
    encoder: Encoder,
    streams: StreamMap<Stream<S::Call>>,
    /// The streaming calls, by stream id (their streams are `StreamState::Streaming`).
    streaming: StreamMap<StreamingCall<S::Call, S::Stream>>,
    /// Streaming calls whose next message met a busy service, to offer again.
    streams_busy: Vec<u32>,
    /// Streams with response data blocked on flow control, in arrival order.
    blocked: VecDeque<u32>,
    /// Calls the service could not take yet.
    busy: VecDeque<(u32, S::Call, Bytes)>,
    /// The channel answers given later come back on, made at the first (see [`LateReplies`]).
    late: LateReplies,
    /// Where a unary call's reply message is written in place ([`CallReply::message_buffer`]);
    /// emptied after each, kept while it stays small ([`REPLY_BUFFER_KEPT`]).
    reply_message: BytesMut,
    /// When the current turn's bytes were read: the `now` of every call accepted in the turn
    /// (deadlines count from it). One clock read per turn instead of one per call — the clock
    /// was ~5 % of lab's CPU (docs/studies/allocations.md).
    turn_started: Instant,
    head: HeadScratch,
    partial: Option<PartialHeaders>,
    /// Highest client stream id seen.
    last_stream: u32,
    preface_done: bool,
    settings_received: bool,
    peer_max_frame: usize,
    peer_initial_window: i64,
    /// At least the largest `send_window_offset` of any open stream (an upper bound, exact
    /// after [`Connection::check_initial_window`] had to look): raising the initial window
    /// overflows no stream while this plus the new value stays within 2^31-1.
    max_send_offset: i64,
    conn_send_window: crate::flow::Window,
    conn_recv_window: i64,
    /// Released (answered or dropped) and not yet returned with a WINDOW_UPDATE.
    conn_recv_unacked: u32,
    /// The connection window advertised: `settings.connection_window`, raised to fit one
    /// largest message with room for its frames' overhead.
    conn_window_target: u32,
    /// Frames that carry no request forward, budgeted per second.
    flood: FloodBudget,
    /// Streams in `Flushing`, to forget once the write buffer is on the socket.
    flushing: Vec<u32>,
    /// Streams we reset, so their late frames are ignored (§5.1).
    resets: ResetMemory,
    /// Client stream ids jumped over: HEADERS on one of them is an unexpected stream id
    /// (PROTOCOL_ERROR, §5.1.1), on any other id at or below `last_stream` a closed stream
    /// (STREAM_CLOSED, §5.1).
    skipped: SkippedIds,
    /// GOAWAY sent: no new streams.
    going_away: bool,
    /// The peer sent GOAWAY.
    peer_go_away: Option<crate::control::GoAway>,
    out: Vec<u8>,
    block_scratch: Vec<u8>,
    /// `:status 200` + `content-type: application/grpc`, once indexed.
    head_block: CachedBlock,
    /// The same + `grpc-encoding: gzip` (+ `grpc-accept-encoding`), for gzip responses.
    gzip_head_block: CachedBlock,
    /// `:status 200` + `content-type: application/grpc-web+proto`, for gRPC-Web replies.
    web_head_block: CachedBlock,
    /// `grpc-status: 0`, once indexed.
    ok_trailers_block: CachedBlock,
}

/// The stream a priority block (5 bytes: E bit + 31-bit dependency, weight) depends on.
fn dependency(priority: &[u8]) -> u32 {
    u32::from_be_bytes([priority[0], priority[1], priority[2], priority[3]]) & 0x7fff_ffff
}

/// Serves one connection until it closes, fails, or `shutdown` asks for a graceful close
/// (GOAWAY, then in-flight calls finish).
pub async fn serve_connection<S: Service>(
    mut socket: Socket,
    settings: ServerSettings,
    service: S,
    shutdown: CancellationToken,
) {
    let mut connection = Connection::new(service, settings);
    // Answers given later come back here, once the connection has made their channel.
    let mut replies_rx: Option<mpsc::UnboundedReceiver<(u32, Response)>> = None;
    connection.start();
    let mut read_buf = BytesMut::with_capacity(INITIAL_BUFFER);
    // How much to offer the next read: grows while reads fill what they are offered.
    let mut read_offer = INITIAL_BUFFER;
    let mut read_closed = false;
    // A connection error was answered with GOAWAY: close so that the peer reads it.
    let mut failed = false;
    let mut written = 0usize;
    let deadline_timer = tokio::time::sleep(std::time::Duration::from_secs(3600));
    tokio::pin!(deadline_timer);
    let linger = tokio::time::sleep(CLOSE_LINGER);
    tokio::pin!(linger);
    let mut lingering = false;
    // The idle timer counts from the last read (`turn_started`) while the connection has no
    // stream. It is armed lazily: reset only when it must fire earlier than it would, and
    // re-checked when it fires, so a busy connection costs no timer work per turn.
    let idle_limit = connection.settings.idle_timeout;
    let idle_timer = tokio::time::sleep(idle_limit.unwrap_or(CLOSE_LINGER));
    tokio::pin!(idle_timer);
    let mut idle_timer_at: Option<Instant> = None;
    // Keepalive: while streams are open, a PING once the peer has been silent for the
    // interval, and the end if it stays silent for the timeout after it. Armed lazily too.
    let keepalive_interval = connection.settings.keepalive_interval;
    let keepalive_timeout = connection.settings.keepalive_timeout;
    let keepalive_timer = tokio::time::sleep(keepalive_interval.unwrap_or(CLOSE_LINGER));
    tokio::pin!(keepalive_timer);
    let mut keepalive_timer_at: Option<Instant> = None;
    // When our unanswered keepalive PING was sent.
    let mut ping_sent_at: Option<Instant> = None;
    // Service work since this task last yielded (see FAIR_SHARE).
    let mut work_since_yield = std::time::Duration::ZERO;
    // Made once and polled once (see CancelWatch): a `cancelled()` made in the loop
    // registered with the token and left it again on every turn (~300 instructions a turn).
    let shutdown_requested = shutdown.cancelled();
    tokio::pin!(shutdown_requested);
    let mut shutdown_watch = CancelWatch::default();
    loop {
        if work_since_yield >= FAIR_SHARE {
            work_since_yield = std::time::Duration::ZERO;
            tokio::task::yield_now().await;
        }
        if replies_rx.is_none() {
            // A call of the last turn was kept to be answered later: listen from now on.
            replies_rx = connection.late.take_receiver();
        }
        // Window released by answers that came from other threads (pool placement, deadlines)
        // goes back before the write: a client out of window sends nothing that would wake us.
        connection.flush_window_updates();
        // Write what is queued, as far as the socket takes it.
        if socket.wants_flush() && socket.flush().is_err() {
            return;
        }
        while written < connection.out.len() {
            match socket.try_write(&connection.out[written..]) {
                Ok(n) => written += n,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => return,
            }
        }
        if written == connection.out.len() {
            connection.out.clear();
            written = 0;
            connection.flushed();
            if !connection.blocked.is_empty() {
                // Streaming replies wait for the write backlog too: it has drained.
                connection.send_blocked();
            }
            // Answers just written gave their requests' window back: return it now (the
            // client may be waiting for it, with nothing else to wake us).
            connection.flush_window_updates();
            if connection.out.capacity() > WRITE_BACKLOG_LIMIT {
                // A burst beyond any steady-state batch is over: give back what it took.
                connection.out.shrink_to(READ_CHUNK);
            }
        } else if written >= READ_CHUNK && written * 2 >= connection.out.len() {
            // Keep the unwritten tail at the front, so a slow reader's buffer does not only grow.
            connection.out.drain(..written);
            written = 0;
        }
        let draining = connection.going_away || connection.peer_go_away.is_some() || read_closed;
        if draining
            && connection.streams.is_empty()
            && connection.busy.is_empty()
            && connection.out.is_empty()
        {
            if failed {
                close_after_error(socket).await;
            }
            return;
        }
        // After the peer's EOF only calls the service is running can still produce bytes:
        // a body that never completed cannot, nor can a response waiting for window (no
        // WINDOW_UPDATE can come). Once nothing else is queued, the connection is over.
        if read_closed
            && connection.out.is_empty()
            && connection.busy.is_empty()
            && !connection
                .streams
                .values()
                .any(|s| matches!(s.state, StreamState::Running))
            && !connection.streaming_in_service()
        {
            return;
        }
        if read_closed && !lingering {
            lingering = true;
            linger
                .as_mut()
                .reset((Instant::now() + CLOSE_LINGER).into());
        }
        // Only calls still waiting for their body can miss a deadline here; usually none are.
        let timer_armed = match connection.earliest_deadline() {
            Some(earliest) => {
                deadline_timer.as_mut().reset(earliest.into());
                true
            }
            None => false,
        };
        let idle_deadline = idle_limit
            .filter(|_| connection.streams.is_empty() && connection.busy.is_empty() && !draining)
            .map(|limit| connection.turn_started + limit);
        if let Some(deadline) = idle_deadline {
            arm_no_later_than(idle_timer.as_mut(), &mut idle_timer_at, deadline);
        }
        if ping_sent_at.is_some_and(|at| connection.turn_started >= at) {
            // The peer spoke since our PING: alive.
            ping_sent_at = None;
        }
        let keepalive_deadline = keepalive_interval
            .filter(|_| !connection.streams.is_empty() && !draining)
            .map(|interval| match ping_sent_at {
                Some(at) => at + keepalive_timeout,
                None => connection.turn_started + interval,
            });
        if let Some(deadline) = keepalive_deadline {
            arm_no_later_than(keepalive_timer.as_mut(), &mut keepalive_timer_at, deadline);
        }
        let backlog = connection.out.len() - written;
        let want_write = backlog > 0 || socket.wants_flush();
        let want_read = !read_closed && backlog < WRITE_BACKLOG_LIMIT;
        let busy = !connection.busy.is_empty() || !connection.streams_busy.is_empty();
        tokio::select! {
            ready = socket.readable(), if want_read => {
                if ready.is_err() {
                    return;
                }
                if read_buf.capacity() - read_buf.len() < read_offer / 4 {
                    read_buf.reserve(read_offer);
                }
                let offered = read_buf.capacity() - read_buf.len();
                match socket.read_available(&mut read_buf) {
                    Ok(0) => read_closed = true,
                    Ok(n) => {
                        if n * 2 >= offered && read_offer < READ_CHUNK {
                            read_offer = (read_offer * 2).min(READ_CHUNK);
                        }
                        let started = Instant::now();
                        connection.turn_started = started;
                        if let Err(error) = connection.on_bytes(&mut read_buf) {
                            connection.fail(error);
                            read_closed = true;
                            failed = true;
                        }
                        work_since_yield += started.elapsed();
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return,
                }
            }
            _ = socket.writable(), if want_write => {}
            Some((stream, response)) = late_reply(&mut replies_rx) => {
                connection.respond(stream, response);
                // Take every reply already waiting, so they go out in one write.
                while let Some(Ok((stream, response))) = replies_rx.as_mut().map(|rx| rx.try_recv()) {
                    connection.respond(stream, response);
                }
            }
            _ = &mut deadline_timer, if timer_armed => connection.expire_deadlines(Instant::now()),
            _ = busy_retry(busy), if busy => {}
            _ = std::future::poll_fn(|cx| shutdown_watch.poll_cancelled(shutdown_requested.as_mut(), cx)), if !connection.going_away => connection.go_away(code::NO_ERROR, b""),
            _ = &mut linger, if lingering => return,
            _ = &mut keepalive_timer, if keepalive_deadline.is_some() && keepalive_timer_at.is_some() => {
                keepalive_timer_at = None;
                let now = Instant::now();
                match keepalive_deadline {
                    // Silent through the interval and the timeout after our PING: dead.
                    Some(deadline) if now >= deadline && ping_sent_at.is_some() => return,
                    Some(deadline) if now >= deadline => {
                        frame::write_ping(&mut connection.out, KEEPALIVE_PING);
                        ping_sent_at = Some(now);
                    }
                    // The peer spoke meanwhile; the next turn re-arms.
                    _ => {}
                }
            }
            _ = &mut idle_timer, if idle_deadline.is_some() && idle_timer_at.is_some() => {
                idle_timer_at = None;
                // Idle since the deadline was set (a read since then moved it later, and the
                // next turn re-arms): say goodbye; the loop ends once GOAWAY is written.
                if idle_deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                    connection.go_away(code::NO_ERROR, b"idle");
                }
            }
        }
        connection.retry_busy();
        if !connection.streams_busy.is_empty() {
            connection.retry_busy_streams();
        }
    }
}

/// A pause before calls the service could not take are offered again. `select!` makes every
/// branch's future on every turn, taken or not: this one reads the clock and makes a timer
/// only when it is awaited, so a turn with nothing busy costs nothing here.
async fn busy_retry(busy: bool) {
    if busy {
        tokio::time::sleep(BUSY_RETRY).await;
    } else {
        std::future::pending::<()>().await;
    }
}

/// The next answer given later, once the connection has made their channel; until then,
/// never (a branch of the loop's `select!` that stays pending).
async fn late_reply(
    receiver: &mut Option<mpsc::UnboundedReceiver<(u32, Response)>>,
) -> Option<(u32, Response)> {
    match receiver {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

impl<S: Service> Connection<S> {
    fn new(service: S, settings: ServerSettings) -> Connection<S> {
        Connection {
            service,
            settings,
            decoder: Decoder::new(4096),
            encoder: Encoder::default(),
            streams: StreamMap::default(),
            streaming: StreamMap::default(),
            streams_busy: Vec::new(),
            blocked: VecDeque::new(),
            busy: VecDeque::new(),
            late: LateReplies::default(),
            reply_message: BytesMut::new(),
            turn_started: Instant::now(),
            head: HeadScratch::default(),
            partial: None,
            last_stream: 0,
            preface_done: false,
            settings_received: false,
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE as usize,
            peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
            max_send_offset: 0,
            conn_send_window: crate::flow::Window::new(frame::DEFAULT_WINDOW),
            conn_recv_window: i64::from(frame::DEFAULT_WINDOW),
            conn_recv_unacked: 0,
            conn_window_target: 0,
            flood: FloodBudget::new(Instant::now()),
            flushing: Vec::new(),
            resets: ResetMemory::default(),
            skipped: SkippedIds::default(),
            going_away: false,
            peer_go_away: None,
            // Grows with the first writes (the preface's SETTINGS, a response): nothing is
            // reserved for a connection that has not answered yet.
            out: Vec::new(),
            block_scratch: Vec::new(),
            head_block: CachedBlock::default(),
            gzip_head_block: CachedBlock::default(),
            web_head_block: CachedBlock::default(),
            ok_trailers_block: CachedBlock::default(),
        }
    }
}

impl<S: Service> Connection<S> {
    /// Our SETTINGS and the connection window raise: the first bytes we send.
    fn start(&mut self) {
        frame::write_settings(
            &mut self.out,
            &[
                (
                    setting::MAX_CONCURRENT_STREAMS,
                    self.settings.max_concurrent_streams,
                ),
                (
                    setting::INITIAL_WINDOW_SIZE,
                    self.settings.initial_window_size,
                ),
                (setting::ENABLE_PUSH, 0),
            ],
        );
        // One largest message must fit, or a body that large could never complete.
        let one_message = u32::try_from(self.service.max_message_bytes())
            .unwrap_or(u32::MAX)
            .saturating_add(BUDGET_SLACK)
            .min(frame::MAX_WINDOW);
        self.conn_window_target = self.settings.connection_window.max(one_message);
        let raise = self
            .conn_window_target
            .saturating_sub(frame::DEFAULT_WINDOW);
        if raise > 0 {
            frame::write_window_update(&mut self.out, 0, raise);
            self.conn_recv_window += i64::from(raise);
        }
    }

    /// Parses every complete frame in `buf`.
    fn on_bytes(&mut self, buf: &mut BytesMut) -> Result<(), ConnectionError> {
        if !self.preface_done {
            if buf.len() < frame::PREFACE.len() {
                return if frame::PREFACE.starts_with(buf) {
                    Ok(())
                } else {
                    Err(connection_error(
                        code::PROTOCOL_ERROR,
                        "not the HTTP/2 client preface",
                    ))
                };
            }
            if &buf[..frame::PREFACE.len()] != frame::PREFACE {
                return Err(connection_error(
                    code::PROTOCOL_ERROR,
                    "not the HTTP/2 client preface",
                ));
            }
            let _ = buf.split_to(frame::PREFACE.len());
            self.preface_done = true;
        }
        while let Some(header) = frame::next_frame(buf)? {
            self.check_frame_order(&header)?;
            if header.kind == kind::DATA {
                // A request body may outlive its frame (it waits for the rest, or for the
                // service): DATA is split off the read buffer, shared, not copied.
                let payload = buf
                    .split_to(header.frame_len())
                    .freeze()
                    .slice(frame::HEADER_LEN..);
                self.on_data(header, payload)?;
            } else {
                // Every other frame is read in place and skipped.
                let result = self.on_frame(header, header.payload(buf));
                buf.advance(header.frame_len());
                result?;
            }
        }
        self.relieve_stall();
        self.flush_window_updates();
        Ok(())
    }

    /// The order rules every frame is checked against first: SETTINGS first, and nothing
    /// but the CONTINUATION of an unfinished header block.
    fn check_frame_order(&self, header: &Header) -> Result<(), ConnectionError> {
        if !self.settings_received && header.kind != kind::SETTINGS {
            return Err(connection_error(
                code::PROTOCOL_ERROR,
                "the first frame must be SETTINGS",
            ));
        }
        if let Some(partial) = &self.partial {
            if header.kind != kind::CONTINUATION || header.stream != partial.stream {
                return Err(connection_error(
                    code::PROTOCOL_ERROR,
                    "a header block was interrupted",
                ));
            }
        }
        Ok(())
    }

    /// Any frame but DATA (which `on_bytes` hands to `on_data`), its payload read in place.
    fn on_frame(&mut self, header: Header, payload: &[u8]) -> Result<(), ConnectionError> {
        match header.kind {
            kind::HEADERS => self.on_headers(header, payload),
            kind::PRIORITY => {
                if header.stream == 0 {
                    return Err(connection_error(
                        code::PROTOCOL_ERROR,
                        "PRIORITY on stream 0",
                    ));
                }
                self.spend_flood_credit()?;
                if payload.len() != 5 {
                    frame::write_rst_stream(&mut self.out, header.stream, code::FRAME_SIZE_ERROR);
                } else if dependency(payload) == header.stream {
                    // §5.3.1: a stream error, whatever state the stream is in.
                    self.reset(header.stream, code::PROTOCOL_ERROR);
                }
                Ok(())
            }
            kind::RST_STREAM => {
                if header.stream == 0 {
                    return Err(connection_error(
                        code::PROTOCOL_ERROR,
                        "RST_STREAM on stream 0",
                    ));
                }
                frame::parse_rst_stream(payload)?;
                if header.stream > self.last_stream {
                    return Err(connection_error(
                        code::PROTOCOL_ERROR,
                        "RST_STREAM on an idle stream",
                    ));
                }
                if !self.streams.contains_key(&header.stream) {
                    // Nothing to cancel: a reset of a closed stream is pure overhead, unless
                    // it crossed our own reset of it (§5.1).
                    if self.resets.contains(header.stream) {
                        return Ok(());
                    }
                    return self.spend_flood_credit();
                }
                self.drop_stream(header.stream);
                self.blocked.retain(|s| *s != header.stream);
                self.busy.retain(|(s, _, _)| *s != header.stream);
                self.streams_busy.retain(|s| *s != header.stream);
                Ok(())
            }
            kind::SETTINGS => self.on_settings(header, payload),
            kind::PUSH_PROMISE => Err(connection_error(
                code::PROTOCOL_ERROR,
                "a client sent PUSH_PROMISE",
            )),
            kind::PING => {
                if let Some(data) = control::read_ping(&header, payload)? {
                    self.spend_flood_credit()?;
                    frame::write_ping_ack(&mut self.out, data);
                }
                Ok(())
            }
            kind::GOAWAY => {
                self.peer_go_away =
                    Some(control::read_goaway(&header, payload, self.peer_go_away)?);
                Ok(())
            }
            kind::WINDOW_UPDATE => self.on_window_update(header, payload),
            kind::CONTINUATION => self.on_continuation(header, payload),
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    fn on_data(&mut self, header: Header, payload: Bytes) -> Result<(), ConnectionError> {
        if header.stream == 0 {
            return Err(connection_error(code::PROTOCOL_ERROR, "DATA on stream 0"));
        }
        if header.stream > self.last_stream {
            return Err(connection_error(
                code::PROTOCOL_ERROR,
                "DATA on an idle stream",
            ));
        }
        // Flow control counts the whole payload, padding included, on any stream (§6.9).
        let size = payload.len() as u32;
        self.conn_recv_window -= i64::from(size);
        if self.conn_recv_window < 0 {
            return Err(connection_error(
                code::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        let range = frame::strip_padding(&header, &payload)?;
        let max_message = self.service.max_message_bytes();
        // Empty DATA that does not end the stream moves nothing forward.
        let empty = range.is_empty() && !header.has(flags::END_STREAM);
        if empty {
            self.spend_flood_credit()?;
        }
        let Some(stream) = self.streams.get_mut(&header.stream) else {
            // DATA sent before the peer saw our reset is expected and ignored (§5.1); its
            // window goes back at once, nothing keeps the bytes.
            if self.resets.contains(header.stream) {
                self.conn_recv_unacked += size;
                return Ok(());
            }
            // Any other stream at or below the last one is closed: both sides ended it, the
            // client reset it, or a later stream implicitly closed it (§5.1, §5.1.1).
            return Err(connection_error(
                code::STREAM_CLOSED,
                "DATA on a closed stream",
            ));
        };
        stream.recv_window -= i64::from(size);
        if stream.recv_window < 0 {
            self.conn_recv_unacked += size;
            self.reset(header.stream, code::FLOW_CONTROL_ERROR);
            return Ok(());
        }
        if let StreamState::Streaming = stream.state {
            if self
                .streaming
                .get(&header.stream)
                .is_some_and(|call| !call.half_closed)
            {
                self.on_stream_data(
                    header.stream,
                    header.has(flags::END_STREAM),
                    payload,
                    range,
                    size,
                );
                return Ok(());
            }
        }
        let StreamState::Receiving {
            call,
            body,
            content_length,
            ..
        } = &mut stream.state
        else {
            // DATA after the request ended.
            self.conn_recv_unacked += size;
            self.reset(header.stream, code::STREAM_CLOSED);
            return Ok(());
        };
        // Held until the call is answered or dropped: the connection's body budget.
        stream.held += size;
        stream.recv_unacked += size;
        if !range.is_empty() {
            body.push(payload.slice(range));
        }
        // DATA that exceeds the declared content-length, or ends short of it: malformed.
        if let Some(declared) = *content_length {
            let received = body.len() as u64;
            if received > declared || (header.has(flags::END_STREAM) && received != declared) {
                self.reset(header.stream, code::PROTOCOL_ERROR);
                return Ok(());
            }
        }
        let too_large = body
            .prefix_length()
            .filter(|declared| *declared > max_message);
        let oversized = body.len() > max_message + 5;
        if let Some(declared) = too_large.or(oversized.then_some(body.len())) {
            let response = self.service.too_large(call, declared);
            // An early answer: `respond` also asks the client to stop sending the rest.
            self.respond(header.stream, response);
            return Ok(());
        }
        if header.has(flags::END_STREAM) {
            self.complete(header.stream);
        } else if stream.recv_unacked >= self.settings.initial_window_size / 2 {
            let increment = stream.recv_unacked;
            stream.recv_unacked = 0;
            stream.recv_window += i64::from(increment);
            frame::write_window_update(&mut self.out, header.stream, increment);
        }
        Ok(())
    }

    /// Gives a stream's held connection window back (see [`ServerSettings::connection_window`]).
    fn release(&mut self, stream_id: u32) {
        if let Some(stream) = self.streams.get_mut(&stream_id) {
            let held = std::mem::take(&mut stream.held);
            self.conn_recv_unacked += held;
        }
    }

    /// Forgets a stream, giving back the connection window it held.
    fn drop_stream(&mut self, stream_id: u32) {
        self.release(stream_id);
        if let Some(Stream {
            state: StreamState::Streaming,
            ..
        }) = self.streams.remove(&stream_id)
        {
            self.streaming.remove(&stream_id);
        }
    }

    /// The request is complete: hand it to the service.
    fn complete(&mut self, stream_id: u32) {
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return;
        };
        self.flood.earn();
        let StreamState::Receiving {
            call,
            body,
            content_length,
            ..
        } = std::mem::replace(&mut stream.state, StreamState::Running)
        else {
            return;
        };
        // A body that ended (with trailers) short of its content-length is malformed (§8.1.1).
        if content_length.is_some_and(|declared| declared != body.len() as u64) {
            self.reset(stream_id, code::PROTOCOL_ERROR);
            return;
        }
        self.dispatch(stream_id, call, body.into_bytes());
    }

    fn dispatch(&mut self, stream_id: u32, call: S::Call, body: Bytes) {
        if let Some((call, body)) = self.offer(stream_id, call, body, self.turn_started) {
            self.busy.push_back((stream_id, call, body));
        }
    }

    /// Offers calls the service was too busy for again, in order.
    fn retry_busy(&mut self) {
        if self.busy.is_empty() {
            return;
        }
        let now = Instant::now();
        while let Some((stream_id, call, body)) = self.busy.pop_front() {
            if !self.streams.contains_key(&stream_id) {
                continue;
            }
            if let Some((call, body)) = self.offer(stream_id, call, body, now) {
                self.busy.push_front((stream_id, call, body));
                break;
            }
        }
    }

    /// Hands a complete call to the service; gives it back if the service is busy.
    fn offer(
        &mut self,
        stream_id: u32,
        call: S::Call,
        body: Bytes,
        now: Instant,
    ) -> Option<(S::Call, Bytes)> {
        let reply = CallReply {
            stream: stream_id,
            late: &mut self.late,
            message: &mut self.reply_message,
        };
        match self.service.call(call, body, reply, now) {
            Dispatch::Respond(response) => {
                self.respond(stream_id, response);
                None
            }
            Dispatch::Written => {
                self.respond_written(stream_id, ReplyHead::Grpc);
                None
            }
            Dispatch::WrittenWeb => {
                self.respond_written(stream_id, ReplyHead::Web);
                None
            }
            Dispatch::Later => None,
            Dispatch::Busy(call, body) => Some((call, body)),
        }
    }

    /// Sends the reply the service wrote into the connection's reply buffer.
    #[inline(always)]
    fn respond_written(&mut self, stream_id: u32, head: ReplyHead) {
        let mut message = std::mem::take(&mut self.reply_message);
        self.respond_message(stream_id, Message::Buffer(&mut message), head);
        message.clear();
        // A large reply's buffer is not held by an idle connection.
        if message.capacity() <= REPLY_BUFFER_KEPT {
            self.reply_message = message;
        }
    }

    /// The stream's END_STREAM is queued: it is forgotten once written (see `Flushing`).
    fn finish_stream(&mut self, stream_id: u32) {
        if let Some(stream) = self.streams.get_mut(&stream_id) {
            stream.state = StreamState::Flushing;
            self.flushing.push(stream_id);
        }
    }

    /// The write buffer is on the socket: streams whose END_STREAM it held are closed.
    fn flushed(&mut self) {
        let mut flushing = std::mem::take(&mut self.flushing);
        for stream_id in flushing.drain(..) {
            if let Some(Stream {
                state: StreamState::Flushing,
                ..
            }) = self.streams.get(&stream_id)
            {
                // Its answer is on the socket: the request bytes it held go back.
                self.drop_stream(stream_id);
            }
        }
        // Keep the allocation for the next batch.
        self.flushing = flushing;
    }
}
