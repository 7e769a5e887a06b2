//! A client connection for gRPC calls, driven from inside: the connection task itself
//! keeps up to `slots` calls in flight, asking a [`CallSource`] for the next call whenever a
//! slot is free and reporting each completion back to it. No task, lock or channel per call:
//! each turn reads everything the socket has, completes what it can, starts what the source
//! allows, and writes every frame in one go.
//!
//! After the first call the request header block is a few bytes: the encoder indexes
//! `:path`, `:authority`, `content-type`, `te` and the caller's constant metadata.
//!
//! Streaming calls ([`RequestTemplate::stream`]) run on the same loop: each call's messages are
//! written one at a time as the windows, the write buffer and the plan allow (ping-pong: the
//! next message once the previous one's reply is whole; `interval` apart; until `count` or
//! `duration`), replies are counted as whole messages across DATA frames and released at once,
//! and the source hears of each round trip and, when the call ends, of its message counts.
//!
//! This file holds the connection loop (keepalive, deadlines, lost connections, frame
//! dispatch); `source` the interface to the caller ([`CallSource`] and what it is told),
//! `send` starting calls and writing requests within the windows, `receive` the replies, and
//! `streaming` a streaming call's plan ([`StreamSpec`]) and [`MessageCounter`], `stamp` reading a
//! server's stamp out of each reply ([`StampField`]). They are `impl`
//! blocks of the one connection and see its fields, as the server's modules do.

use bytes::{Buf, Bytes, BytesMut};
use std::collections::VecDeque;
use std::rc::Rc;

use crate::cancel_watch::CancelWatch;
use crate::io::Socket;
use call_table::CallTable;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::control;
use crate::flow::WindowError;
use crate::frame::{self, code, connection_error, flags, kind, setting, ConnectionError, Header};
use crate::hpack::{CachedBlock, DecodedBlocks, Decoder, Encoder, Indexing};

mod call_table;
#[cfg(feature = "fuzzing")]
mod fuzz;
mod pacer;
mod receive;
mod send;
mod source;
mod stamp;
mod streaming;
mod windows;

#[cfg(feature = "fuzzing")]
pub use fuzz::{feed_client, FedClient};

pub use pacer::Pacer;
pub use source::{
    CallEnd, CallHeaders, CallSource, CallToken, ConnectionEnd, LostCall, MethodHead, NextCall,
    ReplyHeader, RequestTemplate, TurnClock,
};
pub use stamp::{StampEncoding, StampField};
pub use streaming::{MessageCounter, MessagesFrom, StreamSpec};
pub use windows::{PeerWindows, WindowWaits};

const READ_CHUNK: usize = 64 * 1024;
/// A connection's first read buffer (see `run_connection`).
const INITIAL_READ: usize = 1024;
/// The opaque data of our keepalive PINGs.
const KEEPALIVE_PING: &[u8; 8] = b"grpclab\0";
/// The largest stream id (RFC 9113 §5.1.1: 31 bits).
const MAX_STREAM_ID: u32 = 0x7fff_ffff;
/// How long the server may take to send its SETTINGS (its connection preface, RFC 9113 §3.4).
/// No stream opens before it arrives, so the first batch already respects the server's
/// SETTINGS_MAX_CONCURRENT_STREAMS; calls started meanwhile wait, deadlines running.
const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes waiting to be written above which no new request is written: a server that stops
/// reading makes calls wait (with their deadlines running) instead of growing the buffer.
const OUT_HIGH_WATER: usize = 256 * 1024;
/// Bytes waiting to be written above which the connection stops reading too: a server that
/// sends frames needing an answer (PING, SETTINGS) but never reads cannot grow our memory.
const OUT_HARD_LIMIT: usize = 1024 * 1024;
/// The stream window we grant: replies up to 1 MiB need no WINDOW_UPDATE round trip.
const STREAM_WINDOW: u32 = 1 << 20;
/// The connection window we grant.
const CONNECTION_WINDOW: u32 = 16 << 20;

struct Call {
    token: CallToken,
    sent: Instant,
    /// Request data not yet sent (flow control).
    pending: Bytes,
    http_status: u16,
    grpc_status: Option<u32>,
    received: usize,
    headers_seen: bool,
    recv_unacked: u32,
    send_window: crate::flow::Window,
    /// The request's last DATA frame ends the stream when `pending` is written (unary; a
    /// streaming call's known-last message).
    end_with_pending: bool,
    /// A streaming call's progress (boxed: unary calls stay small).
    stream: Option<Box<ClientStream>>,
}

/// Where a streaming call is.
struct ClientStream {
    /// Index of the next message in the spec's array.
    next_index: usize,
    /// Messages written (wholly queued).
    sent: u64,
    started: Instant,
    /// The next message may go at this instant (`interval`).
    next_at: Option<Instant>,
    /// The next message may go now.
    ready: bool,
    /// Ping-pong: a message is out and its reply not yet whole; the round trip's reference.
    awaiting_reply: Option<Instant>,
    /// Open loop (a call with an intended time): when the next message was meant to go — the
    /// call's intended time for the first, the previous reply's arrival (or that plus the
    /// interval) for the others. A round trip counts from the earlier of this and the write,
    /// so a message the client held back (a full write buffer, no window) is charged its
    /// wait, as open-loop calls are (coordinated omission).
    intended: Option<Instant>,
    /// Our END_STREAM is written.
    half_closed: bool,
    counter: MessageCounter,
    received: u64,
    /// When the last whole reply arrived (streams that are not ping-pong): for the gaps.
    last_reply: Option<Instant>,
    /// [`MessagesFrom::EachCall`]: this call's messages.
    messages: Vec<Bytes>,
    /// The run stopped: no message after the one out (see [`Connection::end_streams`]).
    ending: bool,
    /// [`StreamSpec::receive_for`]: when the client cancels this server stream.
    cancel_at: Option<Instant>,
}

/// A call started (its ticket taken, its deadline running) but not yet written: the server's
/// SETTINGS has not arrived, its stream limit is reached, or the server is not reading.
struct UnsentCall {
    token: CallToken,
    sent: Instant,
    deadline: Option<Instant>,
    body: Bytes,
    headers: Option<Box<CallHeaders>>,
}

/// A HEADERS frame waiting for its CONTINUATIONs.
struct PartialHeaders {
    stream: u32,
    end_stream: bool,
    block: Vec<u8>,
}

struct Connection<'s, S: CallSource> {
    source: &'s mut S,
    /// Shared by every connection of a thread: it never changes while they run.
    template: Rc<RequestTemplate>,
    slots: usize,
    decoder: Decoder,
    encoder: Encoder,
    calls: CallTable<Call>,
    /// The reply messages of calls whose source keeps replies, by stream id (apart from
    /// `calls`: most runs keep none, and a call's place stays small).
    replies: CallTable<BytesMut>,
    /// `grpc-message` of calls whose trailers came with one, by stream id (rare: errors).
    status_messages: Vec<(u32, String)>,
    /// Kept headers and trailers ([`RequestTemplate::kept_headers`]) of calls that keep
    /// their reply, by stream id.
    reply_headers: Vec<(u32, Vec<ReplyHeader>)>,
    /// The kept headers of the block being decoded.
    scratch_kept: Vec<(Bytes, Bytes)>,
    /// Started calls not yet written, oldest first (see [`UnsentCall`]).
    unsent: VecDeque<UnsentCall>,
    /// Calls whose body waits for window, oldest first.
    blocked: VecDeque<u32>,
    /// Since when some call has waited in `blocked` (`None`: none waits), and the waits of
    /// that stretch, told to the source when it ends.
    blocked_since: Option<Instant>,
    window_waits: WindowWaits,
    next_stream: u32,
    peer_max_streams: usize,
    /// Whether the server's SETTINGS (its connection preface) has arrived; no stream opens
    /// before, so the server's stream limit is known before the first batch.
    peer_settings_seen: bool,
    /// What the server's frames allowed so far (its SETTINGS, the connection window it
    /// granted), told to the source as it changes.
    peer_windows: PeerWindows,
    peer_max_frame: usize,
    peer_initial_window: i64,
    conn_send_window: crate::flow::Window,
    conn_recv_unacked: u32,
    partial: Option<PartialHeaders>,
    stopped: bool,
    /// The server's GOAWAY: its last stream id (which may only go down, RFC 9113 §6.8) and
    /// its error code.
    go_away: Option<crate::control::GoAway>,
    wait_until: Option<Instant>,
    /// When a busy source ([`NextCall::Busy`]) wants to be asked again.
    busy_until: Option<Instant>,
    /// Keepalive only: when bytes last arrived, and when our unanswered PING went out.
    last_read: Instant,
    /// While the bytes of one read are handled: when that read returned. Every call those
    /// bytes end, ends then — its reply arrived with them; handling the replies before it
    /// in the same read is the client's time, not the server's — and one clock read serves
    /// them all.
    arrived: Option<Instant>,
    ping_sent: Option<Instant>,
    /// Scheduled (open-loop) calls are released only up to this instant, which advances when
    /// the timer fires: sends then go out together on timer ticks, many calls per write, as
    /// they would from a batch of timers — instead of one or two calls per write whenever a
    /// response happens to wake the connection.
    released_until: Instant,
    out: Vec<u8>,
    block: Vec<u8>,
    /// Each method's request header block, cached (see [`CachedBlock`]).
    request_blocks: Vec<CachedBlock>,
    /// What the last header block said (statuses and its shape), and its `grpc-message`.
    scratch_head: receive::ReplyHead,
    scratch_message: String,
    /// What the server's repeated blocks decoded to: a response's head and its trailers,
    /// the same few bytes for every successful call (see `hpack::DecodedBlocks`).
    reply_blocks: DecodedBlocks<receive::ReplyHead, 2>,
    /// Streaming calls only: when the earliest `next_at` is due.
    stream_wake: Option<Instant>,
    /// Scratch for the streams to pump this turn.
    stream_scratch: Vec<u32>,
    /// A stream could send now but the write buffer was full: pump again once it drains.
    streams_waiting_room: bool,
    /// The run stopped (its `stop` token: duration over, or Ctrl-C; not a source that simply
    /// has no more calls): streams end (see [`Connection::end_streams`]).
    streams_ending: bool,
}

/// Runs calls on `socket` until the source says stop and every call has ended (`Ok`), or the
/// connection fails (the calls in flight are reported as lost by the caller). `stop` ends the
/// run early: no new calls; calls in flight still finish.
pub async fn run_connection<S: CallSource>(
    mut socket: Socket,
    template: Rc<RequestTemplate>,
    slots: usize,
    source: &mut S,
    stop: &CancellationToken,
) -> Result<(), (ConnectionEnd, Vec<LostCall>)> {
    let mut connection = Connection::new(source, template, slots);
    // The read buffer starts small and doubles while reads fill what they are offered: a
    // connection costs what it touches (19,900 of them fit in one process), a busy one
    // reaches READ_CHUNK within a few reads.
    let mut read_offer = INITIAL_READ;
    let mut read_buf = BytesMut::with_capacity(read_offer);
    let mut written = 0usize;
    let preface_deadline = Instant::now() + PREFACE_TIMEOUT;
    let timer = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(timer);
    // Streams with an interval are paced by a timer of their own (see `pacer`); should the
    // system refuse one (out of file descriptors), tokio's timer paces them, a tick late.
    let mut pacer = connection
        .template
        .stream
        .as_ref()
        .and_then(|spec| spec.interval)
        .and_then(|_| pacer::Pacer::new().ok());
    // Polled once, then read by a flag (see CancelWatch): the token's wait and `is_cancelled`
    // each take its lock, on every turn.
    let stop_requested = stop.cancelled();
    tokio::pin!(stop_requested);
    let mut stop_watch = CancelWatch::default();
    loop {
        if !connection.streams_ending && stop_watch.is_cancelled(stop) {
            connection.stopped = true;
            connection.end_streams();
        }
        let pending_out = connection.out.len() - written;
        connection.start_calls(connection.released_until, pending_out);
        if socket.wants_flush() {
            if let Err(err) = socket.flush() {
                return Err(connection.lost(ConnectionEnd::Lost(err.to_string())));
            }
        }
        while written < connection.out.len() {
            match socket.try_write(&connection.out[written..]) {
                Ok(n) => written += n,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(err) => return Err(connection.lost(ConnectionEnd::Lost(err.to_string()))),
            }
        }
        if written == connection.out.len() {
            connection.out.clear();
            written = 0;
            if std::mem::take(&mut connection.streams_waiting_room) {
                // Streams that could send met a full buffer: now it has room (a timer that
                // fires at once brings the loop back to them, after whatever is readable).
                connection.stream_wake = Some(Instant::now());
            }
        } else if written >= READ_CHUNK && written * 2 >= connection.out.len() {
            // Keep the unwritten tail at the front, so a slow reader's buffer does not only grow.
            connection.out.drain(..written);
            written = 0;
        }
        if connection.calls.is_empty() && connection.unsent.is_empty() {
            if connection.stopped {
                // Nothing is waiting for an answer: unsent control frames (a RST_STREAM for an
                // expired call, a WINDOW_UPDATE) matter to no one once we close.
                return Ok(());
            }
            if let Some(away) = connection.go_away {
                return Err(connection.lost(ConnectionEnd::GoAway(away.code)));
            }
            if connection.ids_left() == 0 {
                frame::write_goaway(
                    &mut connection.out,
                    0,
                    code::NO_ERROR,
                    b"stream ids exhausted",
                );
                let _ = socket.try_write(&connection.out[written..]);
                let _ = socket.flush();
                return Err(connection.lost(ConnectionEnd::StreamIdsExhausted));
            }
        }
        let now = Instant::now();
        if !connection.peer_settings_seen && now >= preface_deadline {
            return Err(connection.lost(ConnectionEnd::NoPreface(PREFACE_TIMEOUT)));
        }
        let keepalive_wake = match connection.keepalive(now) {
            Ok(wake) => wake,
            Err(end) => return Err(connection.lost(end)),
        };
        // Wake for the next scheduled call, the earliest deadline, the preface's, or the
        // keepalive's.
        // Calls have deadlines only with a timeout: without, no turn walks the calls.
        let earliest_deadline = match connection.template.timeout {
            Some(timeout) => connection
                .calls
                .values()
                .map(|c| c.sent)
                .min()
                .map(|sent| sent + timeout),
            None => None,
        };
        let wake = earliest_deadline
            .into_iter()
            .chain(connection.unsent.iter().filter_map(|c| c.deadline))
            .chain(connection.wait_until)
            .chain(connection.busy_until)
            .chain((!connection.peer_settings_seen).then_some(preface_deadline))
            .chain(keepalive_wake)
            .chain(connection.stream_wake.filter(|_| pacer.is_none()))
            .min();
        if let Some(at) = wake {
            timer.as_mut().reset(at.into());
        }
        if let Some(pacer) = pacer.as_mut() {
            if let Err(err) = pacer.set(connection.stream_wake) {
                return Err(connection.lost(ConnectionEnd::Lost(format!(
                    "the stream pacing timer: {err}"
                ))));
            }
        }
        let paced = pacer.as_ref().is_some_and(pacer::Pacer::is_armed);
        let pending_out = connection.out.len() - written;
        let want_write = pending_out > 0 || socket.wants_flush();
        // A server that does not read cannot make us buffer without limit: past the hard
        // limit we stop reading until our writes drain (deadlines still fire).
        let want_read = pending_out < OUT_HARD_LIMIT;
        tokio::select! {
            ready = socket.readable(), if want_read => {
                if let Err(err) = ready {
                    return Err(connection.lost(ConnectionEnd::Lost(err.to_string())));
                }
                if read_buf.capacity() - read_buf.len() < read_offer / 4 {
                    read_buf.reserve(read_offer);
                }
                let offered = read_buf.capacity() - read_buf.len();
                match socket.read_available(&mut read_buf) {
                    Ok(0) => return Err(connection.lost(ConnectionEnd::Lost("the server closed the connection".to_owned()))),
                    Ok(n) => {
                        let arrived = Instant::now();
                        if n * 2 >= offered && read_offer < READ_CHUNK {
                            read_offer = (read_offer * 2).min(READ_CHUNK);
                        }
                        if connection.template.keepalive.is_some() {
                            // Anything from the server proves it alive (as in grpc-go).
                            connection.last_read = arrived;
                            connection.ping_sent = None;
                        }
                        if let Err(error) = connection.on_bytes(&mut read_buf, arrived) {
                            frame::write_goaway(&mut connection.out, 0, error.code, error.reason.as_bytes());
                            let _ = socket.try_write(&connection.out[written..]);
                            let _ = socket.flush();
                            return Err(connection.lost(ConnectionEnd::Protocol(error)));
                        }
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(err) => return Err(connection.lost(ConnectionEnd::Lost(err.to_string()))),
                }
            }
            _ = socket.writable(), if want_write => {}
            fired = async {
                match pacer.as_mut() {
                    Some(pacer) => pacer.fired().await,
                    None => std::future::pending().await,
                }
            }, if paced => {
                // The loop's next turn sends what is due (`pump_streams` reads the clock).
                if let Err(err) = fired {
                    return Err(connection.lost(ConnectionEnd::Lost(format!(
                        "the stream pacing timer: {err}"
                    ))));
                }
            }
            _ = &mut timer, if wake.is_some() => {
                let now = Instant::now();
                connection.released_until = now;
                if connection.busy_until.is_some_and(|at| at <= now) {
                    // Asked again below (or never, once stopped): a past instant must not
                    // keep the timer firing.
                    connection.busy_until = None;
                }
                connection.expire(now);
            }
            _ = std::future::poll_fn(|cx| stop_watch.poll_cancelled(stop_requested.as_mut(), cx)), if !connection.stopped || !connection.streams_ending => {
                connection.stopped = true;
                connection.end_streams();
            }
        }
    }
}

/// A connection dropped with streaming calls in flight (its task stopped by the caller) tells
/// the source their messages so far; every other end drains `calls` first. Calls still
/// waiting for window end their wait here.
impl<S: CallSource> Drop for Connection<'_, S> {
    fn drop(&mut self) {
        self.blocked.clear();
        self.end_window_wait();
        for (_, call) in self.calls.drain() {
            if let Some(progress) = &call.stream {
                self.source
                    .abandoned(call.token, progress.sent, progress.received);
            }
        }
    }
}

impl<'s, S: CallSource> Connection<'s, S> {
    /// A connection with nothing sent yet but our preface, SETTINGS and window raise in its
    /// write buffer.
    fn new(
        source: &'s mut S,
        mut template: Rc<RequestTemplate>,
        slots: usize,
    ) -> Connection<'s, S> {
        let first_stream = template.first_stream_id.max(1) | 1;
        if template.methods.is_empty() {
            // A template without a method (a caller's bug) still sends well-formed requests,
            // which the server answers as unknown: no index can fall outside `methods`.
            Rc::make_mut(&mut template)
                .methods
                .push(MethodHead::path("/"));
        }
        let request_blocks = vec![CachedBlock::default(); template.methods.len()];
        let mut connection = Connection {
            source,
            template,
            slots: slots.max(1),
            decoder: Decoder::new(4096),
            encoder: Encoder::default(),
            calls: CallTable::new(slots),
            replies: CallTable::new(slots),
            status_messages: Vec::new(),
            reply_headers: Vec::new(),
            scratch_kept: Vec::new(),
            unsent: VecDeque::new(),
            blocked: VecDeque::new(),
            blocked_since: None,
            window_waits: WindowWaits::default(),
            next_stream: first_stream,
            peer_max_streams: usize::MAX,
            peer_settings_seen: false,
            peer_windows: PeerWindows::default(),
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE as usize,
            peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
            conn_send_window: crate::flow::Window::new(frame::DEFAULT_WINDOW),
            conn_recv_unacked: 0,
            partial: None,
            stopped: false,
            go_away: None,
            wait_until: None,
            busy_until: None,
            last_read: Instant::now(),
            arrived: None,
            ping_sent: None,
            released_until: Instant::now(),
            // Grows with the first writes (preface, requests): a held connection reserves
            // nothing it does not write.
            out: Vec::new(),
            block: Vec::new(),
            request_blocks,
            scratch_head: receive::ReplyHead::default(),
            scratch_message: String::new(),
            reply_blocks: DecodedBlocks::default(),
            stream_wake: None,
            stream_scratch: Vec::new(),
            streams_waiting_room: false,
            streams_ending: false,
        };
        connection.out.extend_from_slice(frame::PREFACE);
        frame::write_settings(
            &mut connection.out,
            &[
                (setting::ENABLE_PUSH, 0),
                (setting::INITIAL_WINDOW_SIZE, STREAM_WINDOW),
            ],
        );
        frame::write_window_update(
            &mut connection.out,
            0,
            CONNECTION_WINDOW - frame::DEFAULT_WINDOW,
        );
        connection
    }

    /// Hands back the calls in flight and the calls started but not yet written, for the
    /// caller to count as lost.
    fn lost(&mut self, end: ConnectionEnd) -> (ConnectionEnd, Vec<LostCall>) {
        let end = match end {
            ConnectionEnd::Lost(reason) if !self.peer_settings_seen => {
                ConnectionEnd::ClosedBeforeSettings(reason)
            }
            end => end,
        };
        let mut calls: Vec<LostCall> = self
            .calls
            .drain()
            .into_iter()
            .map(|(_, call)| LostCall {
                token: call.token,
                sent: call.sent,
                messages: call
                    .stream
                    .as_ref()
                    .map_or((0, 0), |s| (s.sent, s.received)),
            })
            .collect();
        calls.extend(self.unsent.drain(..).map(|call| LostCall {
            token: call.token,
            sent: call.sent,
            messages: (0, 0),
        }));
        (end, calls)
    }

    /// Keepalive (`--keepalive`): sends a PING once nothing has arrived for the keepalive
    /// time while calls are in flight, and gives the connection up when nothing arrives
    /// within as long after it. Returns when to look again; `None` without keepalive or
    /// with no call in flight (grpc-go's default: no PINGs without streams).
    fn keepalive(&mut self, now: Instant) -> Result<Option<Instant>, ConnectionEnd> {
        let Some(interval) = self.template.keepalive else {
            return Ok(None);
        };
        if self.calls.is_empty() {
            return Ok(None);
        }
        match self.ping_sent {
            Some(sent) if now >= sent + interval => Err(ConnectionEnd::KeepaliveTimeout(interval)),
            Some(sent) => Ok(Some(sent + interval)),
            None if now >= self.last_read + interval => {
                frame::write_ping(&mut self.out, KEEPALIVE_PING);
                self.ping_sent = Some(now);
                Ok(Some(now + interval))
            }
            None => Ok(Some(self.last_read + interval)),
        }
    }

    /// How many more streams this connection can open before its ids run out.
    fn ids_left(&self) -> usize {
        if self.next_stream > MAX_STREAM_ID {
            0
        } else {
            ((MAX_STREAM_ID - self.next_stream) / 2 + 1) as usize
        }
    }

    fn finish(&mut self, stream: u32, end: CallEnd) {
        // Read in place and dropped in place: a call is over a hundred bytes, and moving it out of
        // its place cost two copies per call.
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        let (token, sent) = (call.token, call.sent);
        let progress = call.stream.as_ref().map(|p| (p.sent, p.received));
        self.calls.discard(stream);
        if !self.blocked.is_empty() {
            // (A call waits here only while a window keeps its body back.)
            self.stop_waiting(stream);
        }
        if !self.replies.is_empty() {
            self.replies.discard(stream);
        }
        if !self.status_messages.is_empty() {
            self.status_messages.retain(|(s, _)| *s != stream);
        }
        if token.flow != 0 && !self.reply_headers.is_empty() {
            // Only a flow step keeps headers.
            self.hand_reply_headers(stream, token);
        }
        if let Some((messages_sent, received)) = progress {
            self.source.stream_messages(token, messages_sent, received);
        }
        let now = self.arrived.unwrap_or_else(Instant::now);
        self.source.completed(token, sent, end, now);
        if token.flow != 0 && self.source.gives_up() {
            self.cancel_given_up();
        }
    }

    /// The kept headers of call `stream`, if any, to the source.
    #[cold]
    #[inline(never)]
    fn hand_reply_headers(&mut self, stream: u32, token: CallToken) {
        if let Some(place) = self.reply_headers.iter().position(|(s, _)| *s == stream) {
            let (_, headers) = self.reply_headers.swap_remove(place);
            self.source.reply_headers(token, &headers);
        }
    }

    /// The groups the source gave up on (see [`CallSource::given_up`]), each cancelled.
    #[cold]
    #[inline(never)]
    fn cancel_given_up(&mut self) {
        while let Some(group) = self.source.given_up() {
            self.cancel_group(group);
        }
    }

    /// The source gave up on the calls of `group`: those in flight are reset, those not yet
    /// written dropped, none reported.
    fn cancel_group(&mut self, group: u32) {
        let streams: Vec<u32> = self
            .calls
            .iter()
            .filter(|(_, call)| call.token.flow == group)
            .map(|(id, _)| id)
            .collect();
        for stream in streams {
            frame::write_rst_stream(&mut self.out, stream, code::CANCEL);
            self.calls.discard(stream);
            self.blocked.retain(|s| *s != stream);
            self.end_window_wait();
            if !self.replies.is_empty() {
                self.replies.discard(stream);
            }
            self.status_messages.retain(|(s, _)| *s != stream);
            self.reply_headers.retain(|(s, _)| *s != stream);
        }
        self.unsent.retain(|call| call.token.flow != group);
    }

    fn expire(&mut self, now: Instant) {
        let Some(timeout) = self.template.timeout else {
            return;
        };
        let expired: Vec<u32> = self
            .calls
            .iter()
            .filter(|(_, c)| c.sent + timeout <= now)
            .map(|(id, _)| id)
            .collect();
        for stream in expired {
            frame::write_rst_stream(&mut self.out, stream, code::CANCEL);
            self.finish(stream, CallEnd::DeadlineExceeded);
        }
        // Calls that never got written end without a frame; the others keep their order.
        if self
            .unsent
            .iter()
            .any(|c| c.deadline.is_some_and(|d| d <= now))
        {
            for call in std::mem::take(&mut self.unsent) {
                if call.deadline.is_some_and(|d| d <= now) {
                    self.source
                        .completed(call.token, call.sent, CallEnd::DeadlineExceeded, now);
                } else {
                    self.unsent.push_back(call);
                }
            }
        }
    }

    fn on_bytes(&mut self, buf: &mut BytesMut, arrived: Instant) -> Result<(), ConnectionError> {
        self.arrived = Some(arrived);
        let read = self.on_frames(buf);
        self.arrived = None;
        read?;
        if self.conn_recv_unacked >= CONNECTION_WINDOW / 2 {
            frame::write_window_update(&mut self.out, 0, self.conn_recv_unacked);
            self.conn_recv_unacked = 0;
        }
        Ok(())
    }

    /// Handles the whole frames at the start of `buf` and lets go of them.
    fn on_frames(&mut self, buf: &mut BytesMut) -> Result<(), ConnectionError> {
        // Every frame is read in place: nothing of a payload outlives its frame here. The
        // frames read are let go of at once, after the loop: advancing a BytesMut costs ~30
        // instructions, once per read rather than once per frame (three per unary call).
        // (On an error the connection ends: what is left in the buffer no longer matters.)
        let mut read = 0;
        while let Some(header) = frame::next_frame(&buf[read..])? {
            self.on_frame(header, header.payload(&buf[read..]))?;
            read += header.frame_len();
        }
        buf.advance(read);
        Ok(())
    }

    fn on_frame(&mut self, header: Header, payload: &[u8]) -> Result<(), ConnectionError> {
        if !self.peer_settings_seen && (header.kind != kind::SETTINGS || header.has(flags::ACK)) {
            // RFC 9113 §3.4: the server's preface is a SETTINGS frame, and it comes first.
            return Err(connection_error(
                code::PROTOCOL_ERROR,
                "the server's first frame was not SETTINGS",
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
        match header.kind {
            kind::DATA => self.on_data(header, payload),
            kind::HEADERS => {
                if header.stream == 0 {
                    return Err(connection_error(
                        code::PROTOCOL_ERROR,
                        "HEADERS on stream 0",
                    ));
                }
                let range = frame::headers_fragment(&header, payload)?;
                if header.has(flags::END_HEADERS) {
                    self.on_header_block(
                        header.stream,
                        header.has(flags::END_STREAM),
                        &payload[range],
                    )
                } else {
                    self.partial = Some(PartialHeaders {
                        stream: header.stream,
                        end_stream: header.has(flags::END_STREAM),
                        block: payload[range].to_vec(),
                    });
                    Ok(())
                }
            }
            kind::CONTINUATION => {
                let Some(mut partial) = self.partial.take() else {
                    return Err(connection_error(
                        code::PROTOCOL_ERROR,
                        "CONTINUATION without HEADERS",
                    ));
                };
                partial.block.extend_from_slice(payload);
                if header.has(flags::END_HEADERS) {
                    self.on_header_block(partial.stream, partial.end_stream, &partial.block)
                } else {
                    self.partial = Some(partial);
                    Ok(())
                }
            }
            kind::RST_STREAM => {
                let error = frame::parse_rst_stream(payload)?;
                // A reset after the server already sent the call's grpc-status (in trailers
                // that lacked END_STREAM): the status it sent is the call's outcome, as gRPC
                // clients report it. Otherwise the reset is.
                let status_seen = self
                    .calls
                    .get(header.stream)
                    .is_some_and(|c| c.grpc_status.is_some());
                if status_seen {
                    self.end_stream(header.stream);
                } else {
                    self.finish(header.stream, CallEnd::Reset(error));
                }
                Ok(())
            }
            kind::SETTINGS => {
                let Some(change) = control::read_settings(&header, payload)? else {
                    return Ok(());
                };
                let windows = &mut self.peer_windows;
                let advertised = change.initial_window_size;
                if !self.peer_settings_seen {
                    windows.stream_window_first = advertised.unwrap_or(frame::DEFAULT_WINDOW);
                }
                if let Some(value) = advertised {
                    windows.stream_window_largest = windows.stream_window_largest.max(value);
                }
                if let Some(streams) = change.max_concurrent_streams {
                    windows.max_concurrent_streams = Some(streams);
                }
                if let Some(size) = change.max_frame_size {
                    windows.max_frame_size = size;
                }
                self.source.peer_windows(&self.peer_windows);
                self.peer_settings_seen = true;
                if let Some(size) = change.header_table_size {
                    self.encoder.set_max_size(size as usize);
                }
                if let Some(streams) = change.max_concurrent_streams {
                    self.peer_max_streams = streams as usize;
                }
                if let Some(value) = change.initial_window_size {
                    let delta = i64::from(value) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(value);
                    for call in self.calls.values_mut() {
                        call.send_window.shift(delta).map_err(|_| {
                            connection_error(
                                code::FLOW_CONTROL_ERROR,
                                "the server's initial window took a stream's past 2^31-1",
                            )
                        })?;
                    }
                }
                if let Some(size) = change.max_frame_size {
                    self.peer_max_frame = size as usize;
                }
                frame::write_settings_ack(&mut self.out);
                self.send_blocked();
                Ok(())
            }
            kind::PING => {
                if let Some(data) = control::read_ping(&header, payload)? {
                    frame::write_ping_ack(&mut self.out, data);
                }
                Ok(())
            }
            kind::GOAWAY => {
                let away = control::read_goaway(&header, payload, self.go_away)?;
                self.go_away = Some(away);
                // Streams above `last` were never processed: they fail now (retry-safe).
                let unprocessed: Vec<u32> = self
                    .calls
                    .iter()
                    .map(|(id, _)| id)
                    .filter(|id| *id > away.last_stream)
                    .collect();
                for stream in unprocessed {
                    self.finish(stream, CallEnd::Unprocessed(away.code));
                }
                Ok(())
            }
            kind::WINDOW_UPDATE => {
                let increment = frame::parse_window_update(payload)?;
                if header.stream == 0 {
                    self.conn_send_window.grow_connection(
                        increment,
                        "the server raised the connection window past 2^31-1",
                    )?;
                    // The server's connection window shows as the most it leaves open.
                    let open = self.conn_send_window.available();
                    if open > i64::from(self.peer_windows.connection_window_largest) {
                        self.peer_windows.connection_window_largest =
                            u32::try_from(open).unwrap_or(u32::MAX);
                        self.source.peer_windows(&self.peer_windows);
                    }
                } else if let Some(call) = self.calls.get_mut(header.stream) {
                    match call.send_window.grow(increment) {
                        Ok(()) => {}
                        Err(WindowError::ZeroIncrement) => self.stream_error(
                            header.stream,
                            code::PROTOCOL_ERROR,
                            "the server sent a WINDOW_UPDATE of 0",
                        ),
                        Err(WindowError::Overflow) => self.stream_error(
                            header.stream,
                            code::FLOW_CONTROL_ERROR,
                            "the server raised a stream window past 2^31-1",
                        ),
                    }
                }
                self.send_blocked();
                Ok(())
            }
            kind::PUSH_PROMISE => Err(connection_error(
                code::PROTOCOL_ERROR,
                "PUSH_PROMISE although push is disabled",
            )),
            _ => Ok(()),
        }
    }

    /// A stream error (RFC 9113 §5.4.2): reset the stream and end its call as malformed.
    fn stream_error(&mut self, stream: u32, error: u32, reason: &'static str) {
        frame::write_rst_stream(&mut self.out, stream, error);
        self.finish(stream, CallEnd::Malformed(reason));
    }

    /// The server ended the stream: decide the call's outcome.
    fn end_stream(&mut self, stream: u32) {
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        let streaming = call.stream.as_ref();
        let end = match (call.http_status, call.grpc_status) {
            _ if streaming.is_some_and(|s| s.counter.in_message()) => {
                CallEnd::Malformed("the stream ended inside a message")
            }
            // A stream may carry no message at all (a feed of 0).
            (200, Some(0)) if streaming.is_some() => CallEnd::Ok(None),
            (200, Some(0))
                if call.received == 0 && !self.source.may_end_without_reply(&call.token) =>
            {
                CallEnd::Malformed("status OK but no reply message")
            }
            (200, Some(0)) => CallEnd::Ok(
                self.replies
                    .get_mut(stream)
                    .map(|reply| std::mem::take(reply).freeze()),
            ),
            (_, Some(status)) => CallEnd::Status(
                status,
                self.status_messages
                    .iter_mut()
                    .find(|(s, _)| *s == stream)
                    .map(|(_, message)| std::mem::take(message))
                    .unwrap_or_default(),
            ),
            (200, None) => CallEnd::Malformed("the server ended the stream without grpc-status"),
            (http, None) => CallEnd::Http(http),
        };
        // If our request body is still going out, stop it: the call is over.
        if !call.pending.is_empty() || call.stream.as_ref().is_some_and(|s| !s.half_closed) {
            frame::write_rst_stream(&mut self.out, stream, code::CANCEL);
        }
        self.finish(stream, end);
    }
}
