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

use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;

use crate::io::Socket;
use crate::stream_map::StreamMap;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::frame::{self, code, connection_error, flags, kind, setting, ConnectionError, Header};
use crate::hpack::{CachedBlock, Decoder, Encoder, Indexing};

/// What the next call is, as the [`CallSource`] decides.
#[derive(Debug)]
pub enum NextCall {
    /// Send this framed request now; `token` comes back with the completion.
    Send {
        /// The framed request message.
        body: Bytes,
        /// The caller's reference for this call (e.g. its intended send time).
        token: CallToken,
    },
    /// Nothing before this instant (open loop); ask again then.
    WaitUntil(Instant),
    /// The source allows no more calls in flight for now (a concurrency schedule): ask
    /// again when a call ends, or at this instant if given. Unlike `WaitUntil`, a call's end
    /// may free room at once.
    Busy(Option<Instant>),
    /// No more calls on this connection.
    Stop,
}

/// The caller's reference for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallToken {
    /// When the call was meant to go out (open loop), if scheduled.
    pub intended: Option<Instant>,
    /// Whether the call counts (false during warmup).
    pub measured: bool,
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallEnd {
    /// `grpc-status: 0`, with the reply message if the source keeps replies.
    Ok(Option<Bytes>),
    /// A non-zero `grpc-status`, with `grpc-message`.
    Status(u32, String),
    /// A non-200 HTTP status and no `grpc-status`.
    Http(u16),
    /// The server reset the stream with this error code.
    Reset(u32),
    /// The response broke the gRPC protocol (no status, no reply message).
    Malformed(&'static str),
    /// The client's deadline passed first.
    DeadlineExceeded,
}

/// How every call of a connection streams (ghz's `--stream-*` semantics).
#[derive(Debug, Clone)]
pub struct StreamSpec {
    /// The framed messages, sent in order from the first in every call, cycled.
    pub messages: Vec<Bytes>,
    /// Messages per call (`usize::MAX`: until `duration`).
    pub count: usize,
    /// Stop sending once the call is this old.
    pub duration: Option<Duration>,
    /// The pause between two sends.
    pub interval: Option<Duration>,
    /// Bidi ping-pong: the next message waits for the previous one's reply; the half-close
    /// follows the last reply. Otherwise messages go out as fast as the plan allows and the
    /// half-close follows the last message.
    pub ping_pong: bool,
    /// Where each call's messages come from.
    pub messages_from: MessagesFrom,
}

/// Where a streaming call's messages come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessagesFrom {
    /// [`StreamSpec::messages`], the same for every call.
    Spec,
    /// [`CallSource::call_messages`], once per call (a template rendered per call).
    EachCall,
    /// [`CallSource::message`], once per message (a template rendered per message).
    EachMessage,
}

impl StreamSpec {
    /// Message `index` of a call: the spec's, the call's own (`own`, rendered once for it), or
    /// the source's, rendered for it (see [`MessagesFrom`]); cycled.
    fn message<S: CallSource>(&self, source: &mut S, own: &[Bytes], index: usize) -> Bytes {
        let cycled = |list: &[Bytes]| {
            list.get(index % list.len().max(1))
                .cloned()
                .unwrap_or_default()
        };
        match self.messages_from {
            MessagesFrom::Spec => cycled(&self.messages),
            MessagesFrom::EachCall => cycled(own),
            MessagesFrom::EachMessage => source.message(index as u64),
        }
    }

    /// Whether a call that has written `sent` messages ends its stream with the next one:
    /// client streaming's known-last message, or any message once the run is `ending`
    /// (ping-pong otherwise half-closes after its last reply).
    fn ends_with_next(&self, sent: u64, ending: bool) -> bool {
        ending || (!self.ping_pong && sent + 1 >= self.count as u64)
    }

    /// Whether a call that started at `started` and has sent `sent` messages sends another.
    fn more(&self, sent: u64, started: Instant) -> bool {
        (sent as usize) < self.count && self.duration.is_none_or(|limit| started.elapsed() < limit)
    }
}

/// Counts whole gRPC messages (5-byte prefix, then the length it announces) in a byte stream
/// that arrives in arbitrary chunks, keeping none of it.
#[derive(Debug, Default, Clone)]
pub struct MessageCounter {
    prefix: [u8; 5],
    prefix_len: usize,
    /// Bytes of the current message's body still to come (valid once the prefix is whole).
    remaining: usize,
    /// The largest length a prefix has announced.
    largest: usize,
}

impl MessageCounter {
    /// Feeds a chunk; returns how many messages it completed.
    pub fn feed(&mut self, mut data: &[u8]) -> u64 {
        let mut completed = 0;
        while !data.is_empty() {
            if self.prefix_len < 5 {
                let take = (5 - self.prefix_len).min(data.len());
                self.prefix[self.prefix_len..self.prefix_len + take].copy_from_slice(&data[..take]);
                self.prefix_len += take;
                data = &data[take..];
                if let Some(length) = crate::declared_message_len(&self.prefix[..self.prefix_len]) {
                    self.remaining = length;
                    self.largest = self.largest.max(length);
                    if length == 0 {
                        completed += 1;
                        self.prefix_len = 0;
                    }
                }
                continue;
            }
            let take = self.remaining.min(data.len());
            self.remaining -= take;
            data = &data[take..];
            if self.remaining == 0 {
                completed += 1;
                self.prefix_len = 0;
            }
        }
        completed
    }

    /// Whether a message is partly received.
    pub fn in_message(&self) -> bool {
        self.prefix_len > 0
    }

    /// The largest message length any prefix has announced.
    pub fn largest(&self) -> usize {
        self.largest
    }
}

/// The load engine's side of a connection: where calls come from and results go.
pub trait CallSource {
    /// The next call to start; `in_flight` calls are started and not ended, and `free_slots`
    /// more could start now (a source may take that many scheduled calls at once, so a
    /// connection's calls go out together).
    fn next_call(&mut self, now: Instant, in_flight: usize, free_slots: usize) -> NextCall;
    /// A call ended; `sent` is when its first frame was queued.
    fn completed(&mut self, token: CallToken, sent: Instant, end: CallEnd, now: Instant);
    /// Whether replies must be kept (validation); otherwise only their length is counted.
    fn keeps_replies(&self) -> bool;
    /// A ping-pong round trip of a streaming call: a reply, against its request's write.
    fn round_trip(&mut self, token: CallToken, latency: Duration) {
        let _ = (token, latency);
    }
    /// A streaming call's messages ([`MessagesFrom::EachCall`]), asked once as it starts.
    fn call_messages(&mut self) -> Vec<Bytes> {
        Vec::new()
    }
    /// Message `index` of a streaming call ([`MessagesFrom::EachMessage`]).
    fn message(&mut self, index: u64) -> Bytes {
        let _ = index;
        Bytes::new()
    }
    /// A streaming call is over (reported just before its end): the messages it wrote and the
    /// whole messages it received.
    fn stream_messages(&mut self, token: CallToken, sent: u64, received: u64) {
        let _ = (token, sent, received);
    }
}

/// What every request carries, set once per connection.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    /// `:authority`
    pub authority: String,
    /// `:path`
    pub path: String,
    /// Extra headers (e.g. `grpc-timeout`, metadata): indexed, since they repeat.
    pub headers: Vec<(String, String)>,
    /// Client-side deadline per call.
    pub timeout: Option<Duration>,
    /// The id of the connection's first stream: 1 in normal use. Tests start near 2^31 to
    /// reach stream-id exhaustion without 2^30 calls.
    pub first_stream_id: u32,
    /// The largest reply message accepted (ghz's `--max-recv-message-size`); a larger one
    /// ends its call with RESOURCE_EXHAUSTED (and RST_STREAM(CANCEL)), as grpc-go's client.
    pub max_reply_message: Option<usize>,
    /// ghz's `--keepalive` (grpc-go's client keepalive, its time and timeout both this
    /// long): while calls are in flight, a PING once nothing has arrived for this long; the
    /// connection is lost when nothing arrives within as long again. `None`: no PINGs.
    pub keepalive: Option<Duration>,
    /// Streaming calls: how each call sends its messages (`None`: unary calls, whose body is
    /// the source's).
    pub stream: Option<StreamSpec>,
}

/// A call that was in flight (or started and not yet written) on a connection that was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostCall {
    /// The caller's reference.
    pub token: CallToken,
    /// When its first frame was queued (or it started, if never written).
    pub sent: Instant,
    /// A streaming call's messages written and received whole before the loss.
    pub messages: (u64, u64),
}

/// Why a connection ended before its source said stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionEnd {
    /// The socket failed or closed.
    #[error("connection lost: {0}")]
    Lost(String),
    /// The server sent GOAWAY.
    #[error("the server sent GOAWAY (error code {0:#x})")]
    GoAway(u32),
    /// The server broke the protocol; we sent GOAWAY with this code.
    #[error("protocol error from the server: {0}")]
    Protocol(ConnectionError),
    /// Every stream id of the connection has been used (RFC 9113 §5.1.1: ids cannot be
    /// reused): a planned end, the caller opens a new connection. No call is lost.
    #[error("stream ids exhausted: a new connection is needed")]
    StreamIdsExhausted,
    /// The server sent no SETTINGS frame (its connection preface) in time.
    #[error("the server sent no HTTP/2 SETTINGS within {0:?}: is it an HTTP/2 (gRPC) server, and not a TLS port?")]
    NoPreface(Duration),
    /// Nothing arrived within the keepalive time after our PING (`--keepalive`).
    #[error("keepalive: nothing from the server within {0:?} of a PING (--keepalive); the connection is taken as dead")]
    KeepaliveTimeout(Duration),
}

const READ_CHUNK: usize = 64 * 1024;
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
    deadline: Option<Instant>,
    /// Request data not yet sent (flow control).
    pending: Bytes,
    http_status: u16,
    grpc_status: Option<u32>,
    grpc_message: String,
    received: usize,
    reply: Option<BytesMut>,
    headers_seen: bool,
    recv_unacked: u32,
    send_window: i64,
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
    /// [`MessagesFrom::EachCall`]: this call's messages.
    messages: Vec<Bytes>,
    /// The run stopped: no message after the one out (see [`Connection::end_streams`]).
    ending: bool,
}

/// A call started (its ticket taken, its deadline running) but not yet written: the server's
/// SETTINGS has not arrived, its stream limit is reached, or the server is not reading.
struct UnsentCall {
    token: CallToken,
    sent: Instant,
    deadline: Option<Instant>,
    body: Bytes,
}

/// A HEADERS frame waiting for its CONTINUATIONs.
struct PartialHeaders {
    stream: u32,
    end_stream: bool,
    block: Vec<u8>,
}

struct Connection<'s, S: CallSource> {
    source: &'s mut S,
    template: RequestTemplate,
    slots: usize,
    decoder: Decoder,
    encoder: Encoder,
    calls: StreamMap<Call>,
    /// Started calls not yet written, oldest first (see [`UnsentCall`]).
    unsent: VecDeque<UnsentCall>,
    blocked: VecDeque<u32>,
    next_stream: u32,
    peer_max_streams: usize,
    /// Whether the server's SETTINGS (its connection preface) has arrived; no stream opens
    /// before, so the server's stream limit is known before the first batch.
    peer_settings_seen: bool,
    peer_max_frame: usize,
    peer_initial_window: i64,
    conn_send_window: i64,
    conn_recv_unacked: u32,
    partial: Option<PartialHeaders>,
    stopped: bool,
    /// The server's GOAWAY: its last stream id (which may only go down, RFC 9113 §6.8) and
    /// its error code.
    go_away: Option<(u32, u32)>,
    wait_until: Option<Instant>,
    /// When a busy source ([`NextCall::Busy`]) wants to be asked again.
    busy_until: Option<Instant>,
    /// Keepalive only: when bytes last arrived, and when our unanswered PING went out.
    last_read: Instant,
    ping_sent: Option<Instant>,
    /// Scheduled (open-loop) calls are released only up to this instant, which advances when
    /// the timer fires: sends then go out together on timer ticks, many calls per write, as
    /// they would from a batch of timers — instead of one or two calls per write whenever a
    /// response happens to wake the connection.
    released_until: Instant,
    out: Vec<u8>,
    block: Vec<u8>,
    request_block: CachedBlock,
    scratch_status: Option<u32>,
    scratch_message: String,
    scratch_http: u16,
    /// The last header block's shape: `:status` fields seen, and whether it broke the
    /// pseudo-header rules (unknown or request pseudo-headers, one after a regular field).
    scratch_status_fields: u8,
    scratch_malformed: bool,
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
    template: RequestTemplate,
    slots: usize,
    source: &mut S,
    stop: &CancellationToken,
) -> Result<(), (ConnectionEnd, Vec<LostCall>)> {
    let first_stream = template.first_stream_id.max(1) | 1;
    let mut connection = Connection {
        source,
        template,
        slots: slots.max(1),
        decoder: Decoder::new(4096),
        encoder: Encoder::default(),
        calls: StreamMap::with_capacity_and_hasher(slots, Default::default()),
        unsent: VecDeque::new(),
        blocked: VecDeque::new(),
        next_stream: first_stream,
        peer_max_streams: usize::MAX,
        peer_settings_seen: false,
        peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE as usize,
        peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
        conn_send_window: i64::from(frame::DEFAULT_WINDOW),
        conn_recv_unacked: 0,
        partial: None,
        stopped: false,
        go_away: None,
        wait_until: None,
        busy_until: None,
        last_read: Instant::now(),
        ping_sent: None,
        released_until: Instant::now(),
        out: Vec::with_capacity(READ_CHUNK),
        block: Vec::new(),
        request_block: CachedBlock::default(),
        scratch_status: None,
        scratch_message: String::new(),
        scratch_http: 0,
        scratch_status_fields: 0,
        scratch_malformed: false,
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
    let mut read_buf = BytesMut::with_capacity(READ_CHUNK);
    let mut written = 0usize;
    let preface_deadline = Instant::now() + PREFACE_TIMEOUT;
    let timer = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(timer);
    loop {
        if stop.is_cancelled() && !connection.streams_ending {
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
            if let Some((_, code)) = connection.go_away {
                return Err(connection.lost(ConnectionEnd::GoAway(code)));
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
        let wake = connection
            .calls
            .values()
            .filter_map(|c| c.deadline)
            .chain(connection.unsent.iter().filter_map(|c| c.deadline))
            .chain(connection.wait_until)
            .chain(connection.busy_until)
            .chain((!connection.peer_settings_seen).then_some(preface_deadline))
            .chain(keepalive_wake)
            .chain(connection.stream_wake)
            .min();
        if let Some(at) = wake {
            timer.as_mut().reset(at.into());
        }
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
                if read_buf.capacity() - read_buf.len() < READ_CHUNK / 4 {
                    read_buf.reserve(READ_CHUNK);
                }
                match socket.read_available(&mut read_buf) {
                    Ok(0) => return Err(connection.lost(ConnectionEnd::Lost("the server closed the connection".to_owned()))),
                    Ok(_) => {
                        if connection.template.keepalive.is_some() {
                            // Anything from the server proves it alive (as in grpc-go).
                            connection.last_read = Instant::now();
                            connection.ping_sent = None;
                        }
                        if let Err(error) = connection.on_bytes(&mut read_buf) {
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
            _ = stop.cancelled(), if !connection.stopped || !connection.streams_ending => {
                connection.stopped = true;
                connection.end_streams();
            }
        }
    }
}

impl<S: CallSource> Connection<'_, S> {
    /// Hands back the calls in flight and the calls started but not yet written, for the
    /// caller to count as lost.
    fn lost(&mut self, end: ConnectionEnd) -> (ConnectionEnd, Vec<LostCall>) {
        let mut calls: Vec<LostCall> = self
            .calls
            .drain()
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

    /// Starts calls while slots are free and the source has some (scheduled calls only up to
    /// `released_until`, see the field), and writes the started calls the connection can
    /// take: after the server's SETTINGS, within its stream limit, and while the bytes not
    /// yet written (`pending_out` before this turn) stay under [`OUT_HIGH_WATER`]. Calls that
    /// cannot be written wait in `unsent`, oldest first; in the steady state none do, and a
    /// new call goes straight to the write buffer.
    fn start_calls(&mut self, released_until: Instant, pending_out: usize) {
        let budget = OUT_HIGH_WATER.saturating_sub(pending_out) + self.out.len();
        self.start_new_calls(released_until, budget);
        if self.template.stream.is_some() {
            // After the new calls: a call just started may be ready for its next message.
            self.pump_streams(budget);
        }
    }

    /// The new calls of [`Connection::start_calls`], within `budget` bytes of write buffer.
    fn start_new_calls(&mut self, released_until: Instant, budget: usize) {
        let writable = self.peer_settings_seen && self.go_away.is_none();
        if writable {
            while !self.unsent.is_empty() && self.may_write(budget) {
                if let Some(call) = self.unsent.pop_front() {
                    self.send_request(call);
                }
            }
        }
        if self.go_away.is_some() {
            return;
        }
        // A slot is a call in flight or waiting to be written; a connection never starts
        // more calls than it has stream ids left.
        let limit = self.slots.min(self.ids_left());
        let mut now = None;
        while !self.stopped && self.calls.len() + self.unsent.len() < limit {
            if self.wait_until.is_some_and(|at| at > released_until) {
                break;
            }
            self.wait_until = None;
            self.busy_until = None;
            let in_flight = self.calls.len() + self.unsent.len();
            match self
                .source
                .next_call(released_until, in_flight, limit - in_flight)
            {
                NextCall::Stop => self.stopped = true,
                NextCall::Busy(at) => {
                    self.busy_until = at;
                    break;
                }
                NextCall::WaitUntil(at) => {
                    self.wait_until = Some(at);
                    break;
                }
                NextCall::Send { body, token } => {
                    let sent = *now.get_or_insert_with(Instant::now);
                    let call = UnsentCall {
                        token,
                        sent,
                        deadline: self.template.timeout.map(|t| sent + t),
                        body,
                    };
                    if writable && self.unsent.is_empty() && self.may_write(budget) {
                        self.send_request(call);
                    } else {
                        self.unsent.push_back(call);
                    }
                }
            }
        }
    }

    /// Whether one more stream may open now: within the server's stream limit, and with the
    /// write buffer under `budget` bytes (see [`Connection::start_calls`]).
    fn may_write(&self, budget: usize) -> bool {
        self.calls.len() < self.peer_max_streams && self.out.len() < budget
    }

    fn send_request(&mut self, unsent: UnsentCall) {
        let UnsentCall {
            token,
            sent,
            deadline,
            body,
        } = unsent;
        let stream = self.next_stream;
        self.next_stream += 2;
        self.block.clear();
        let template = &self.template;
        self.request_block
            .write(&mut self.encoder, &mut self.block, |encoder, block| {
                encoder.field(b":method", b"POST", Indexing::Incremental, block);
                encoder.field(b":scheme", b"http", Indexing::Incremental, block);
                encoder.field(
                    b":path",
                    template.path.as_bytes(),
                    Indexing::Incremental,
                    block,
                );
                encoder.field(
                    b":authority",
                    template.authority.as_bytes(),
                    Indexing::Incremental,
                    block,
                );
                encoder.field(
                    b"content-type",
                    b"application/grpc",
                    Indexing::Incremental,
                    block,
                );
                encoder.field(b"te", b"trailers", Indexing::Incremental, block);
                for (name, value) in &template.headers {
                    encoder.field(
                        name.as_bytes(),
                        value.as_bytes(),
                        Indexing::Incremental,
                        block,
                    );
                }
            });
        frame::write_headers(
            &mut self.out,
            stream,
            &self.block,
            false,
            self.peer_max_frame,
        );
        let keep = self.source.keeps_replies();
        let (body, streaming, end_with_pending) = match &self.template.stream {
            None => (body, None, true),
            Some(spec) => {
                let messages = match spec.messages_from {
                    MessagesFrom::EachCall => self.source.call_messages(),
                    MessagesFrom::Spec | MessagesFrom::EachMessage => Vec::new(),
                };
                let first = spec.message(&mut *self.source, &messages, 0);
                let state = ClientStream {
                    // Written after the run stopped (it waited for the server's SETTINGS or
                    // a stream slot): its first message is its last.
                    ending: self.streams_ending,
                    messages,
                    next_index: 1,
                    sent: 0,
                    started: sent,
                    next_at: None,
                    ready: false,
                    awaiting_reply: None,
                    intended: token.intended,
                    half_closed: false,
                    counter: MessageCounter::default(),
                    received: 0,
                };
                let last = spec.ends_with_next(0, self.streams_ending);
                (first, Some(Box::new(state)), last)
            }
        };
        self.calls.insert(
            stream,
            Call {
                token,
                sent,
                deadline,
                end_with_pending,
                stream: streaming,
                pending: body,
                http_status: 0,
                grpc_status: None,
                grpc_message: String::new(),
                received: 0,
                reply: keep.then(BytesMut::new),
                headers_seen: false,
                recv_unacked: 0,
                send_window: self.peer_initial_window,
            },
        );
        if self.send_pending(stream) {
            self.message_written(stream);
        }
    }

    /// Sends as much of a request's body (a streaming call: its current message) as the
    /// windows allow; the last frame ends the stream when `end_with_pending` says so. Returns
    /// whether it is all written.
    fn send_pending(&mut self, stream: u32) -> bool {
        let max_frame = self.peer_max_frame;
        let Some(call) = self.calls.get_mut(&stream) else {
            return true;
        };
        loop {
            let allowed = self
                .conn_send_window
                .min(call.send_window)
                .min(max_frame as i64);
            if allowed <= 0 && !call.pending.is_empty() {
                if !self.blocked.contains(&stream) {
                    self.blocked.push_back(stream);
                }
                return false;
            }
            let take = (allowed.max(0) as usize).min(call.pending.len());
            let chunk = call.pending.split_to(take);
            let last = call.pending.is_empty();
            frame::write_data(&mut self.out, stream, &chunk, last && call.end_with_pending);
            self.conn_send_window -= chunk.len() as i64;
            call.send_window -= chunk.len() as i64;
            if last {
                return true;
            }
        }
    }

    fn send_blocked(&mut self) {
        while let Some(stream) = self.blocked.pop_front() {
            if !self.send_pending(stream) {
                break;
            }
            self.message_written(stream);
        }
    }

    /// A streaming call's message is wholly written: count it, and plan what follows (wait
    /// for its reply, the next message now or after the interval, or the half-close).
    fn message_written(&mut self, stream_id: u32) {
        let Some(spec) = &self.template.stream else {
            return;
        };
        let Some(call) = self.calls.get_mut(&stream_id) else {
            return;
        };
        let Some(stream) = call.stream.as_mut() else {
            return;
        };
        if stream.half_closed {
            return;
        }
        stream.sent += 1;
        if call.end_with_pending {
            stream.half_closed = true;
            return;
        }
        if spec.ping_pong {
            let written = Instant::now();
            let planned = stream.intended.take();
            stream.awaiting_reply = Some(planned.map_or(written, |at| at.min(written)));
            return;
        }
        let open_loop = call.token.intended.is_some();
        Self::plan_next(
            spec,
            stream,
            &mut self.out,
            stream_id,
            &mut self.stream_wake,
            open_loop,
        );
    }

    /// After a message (client streaming) or its reply (ping-pong): the next message now or
    /// after the interval, or the half-close when the plan is done.
    fn plan_next(
        spec: &StreamSpec,
        stream: &mut ClientStream,
        out: &mut Vec<u8>,
        stream_id: u32,
        wake: &mut Option<Instant>,
        open_loop: bool,
    ) {
        if stream.ending || !spec.more(stream.sent, stream.started) {
            frame::write_data(out, stream_id, &[], true);
            stream.half_closed = true;
            return;
        }
        let now = Instant::now();
        let at = match spec.interval {
            Some(interval) => {
                let at = now + interval;
                stream.next_at = Some(at);
                *wake = Some(wake.map_or(at, |earlier| earlier.min(at)));
                at
            }
            None => {
                stream.ready = true;
                now
            }
        };
        if open_loop {
            stream.intended = Some(at);
        }
    }

    /// The run stopped (its duration ended, or Ctrl-C): streaming calls whose plan is bounded
    /// by time (`duration`) stop sending and half-close — at once when nothing of it is out,
    /// after its pending reply (ping-pong) or with its message being written — so they end
    /// promptly with their status and messages counted, instead of running on until the drain
    /// limit abandons them. Calls bounded by a count finish their plan, as unary calls in
    /// flight finish (the drain limit bounds the wait).
    fn end_streams(&mut self) {
        // Set for unary runs too: it also says the stop was seen (the loop's select arm).
        self.streams_ending = true;
        if self
            .template
            .stream
            .as_ref()
            .is_none_or(|spec| spec.duration.is_none())
        {
            return;
        }
        for (id, call) in self.calls.iter_mut() {
            let Some(stream) = call.stream.as_mut() else {
                continue;
            };
            if stream.half_closed {
                continue;
            }
            stream.ending = true;
            stream.ready = false;
            stream.next_at = None;
            if !call.pending.is_empty() {
                // The message being written ends the stream.
                call.end_with_pending = true;
            } else if stream.awaiting_reply.is_none() {
                frame::write_data(&mut self.out, *id, &[], true);
                stream.half_closed = true;
            }
        }
    }

    /// Writes the next message of every streaming call whose plan allows one now, while the
    /// write buffer stays under `budget` (the rest go on a later turn).
    fn pump_streams(&mut self, budget: usize) {
        let now = self.stream_wake.map(|_| Instant::now());
        let mut due = std::mem::take(&mut self.stream_scratch);
        due.clear();
        let mut wake: Option<Instant> = None;
        for (id, call) in self.calls.iter_mut() {
            let Some(stream) = call.stream.as_mut() else {
                continue;
            };
            if let (Some(at), Some(now)) = (stream.next_at, now) {
                if at <= now {
                    stream.next_at = None;
                    stream.ready = true;
                } else {
                    wake = Some(wake.map_or(at, |earlier| earlier.min(at)));
                }
            }
            if stream.ready && call.pending.is_empty() && !stream.half_closed {
                due.push(*id);
            }
        }
        self.stream_wake = wake;
        for stream_id in due.drain(..) {
            // A client-streaming call keeps writing while it may: each message written makes
            // the next ready at once (no interval).
            loop {
                if self.out.len() >= budget {
                    self.streams_waiting_room = true;
                    break;
                }
                let Some(spec) = self.template.stream.as_ref() else {
                    break;
                };
                let Some(call) = self.calls.get_mut(&stream_id) else {
                    break;
                };
                let Some(stream) = call.stream.as_mut() else {
                    break;
                };
                if !stream.ready || stream.half_closed || !call.pending.is_empty() {
                    break;
                }
                stream.ready = false;
                let index = stream.next_index;
                stream.next_index += 1;
                call.pending = spec.message(&mut *self.source, &stream.messages, index);
                call.end_with_pending = spec.ends_with_next(stream.sent, stream.ending);
                if !self.send_pending(stream_id) {
                    break;
                }
                self.message_written(stream_id);
            }
        }
        self.stream_scratch = due;
    }

    fn finish(&mut self, stream: u32, end: CallEnd) {
        if let Some(call) = self.calls.remove(&stream) {
            self.blocked.retain(|s| *s != stream);
            if let Some(progress) = &call.stream {
                self.source
                    .stream_messages(call.token, progress.sent, progress.received);
            }
            self.source
                .completed(call.token, call.sent, end, Instant::now());
        }
    }

    fn expire(&mut self, now: Instant) {
        let expired: Vec<u32> = self
            .calls
            .iter()
            .filter(|(_, c)| c.deadline.is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
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

    fn on_bytes(&mut self, buf: &mut BytesMut) -> Result<(), ConnectionError> {
        while let Some((header, payload)) = frame::take_frame(buf)? {
            self.on_frame(header, payload)?;
        }
        if self.conn_recv_unacked >= CONNECTION_WINDOW / 2 {
            frame::write_window_update(&mut self.out, 0, self.conn_recv_unacked);
            self.conn_recv_unacked = 0;
        }
        Ok(())
    }

    fn on_frame(&mut self, header: Header, payload: Bytes) -> Result<(), ConnectionError> {
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
            kind::DATA => self.on_data(header, &payload),
            kind::HEADERS => {
                if header.stream == 0 {
                    return Err(connection_error(
                        code::PROTOCOL_ERROR,
                        "HEADERS on stream 0",
                    ));
                }
                let range = frame::headers_fragment(&header, &payload)?;
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
                partial.block.extend_from_slice(&payload);
                if header.has(flags::END_HEADERS) {
                    self.on_header_block(partial.stream, partial.end_stream, &partial.block)
                } else {
                    self.partial = Some(partial);
                    Ok(())
                }
            }
            kind::RST_STREAM => {
                let error = frame::parse_rst_stream(&payload)?;
                // A reset after the server already sent the call's grpc-status (in trailers
                // that lacked END_STREAM): the status it sent is the call's outcome, as gRPC
                // clients report it. Otherwise the reset is.
                let status_seen = self
                    .calls
                    .get(&header.stream)
                    .is_some_and(|c| c.grpc_status.is_some());
                if status_seen {
                    self.end_stream(header.stream);
                } else {
                    self.finish(header.stream, CallEnd::Reset(error));
                }
                Ok(())
            }
            kind::SETTINGS => {
                if header.has(flags::ACK) {
                    return Ok(());
                }
                self.peer_settings_seen = true;
                for (id, value) in frame::parse_settings(&payload)? {
                    match id {
                        setting::HEADER_TABLE_SIZE => self.encoder.set_max_size(value as usize),
                        setting::MAX_CONCURRENT_STREAMS => self.peer_max_streams = value as usize,
                        setting::INITIAL_WINDOW_SIZE => {
                            let delta = i64::from(value) - self.peer_initial_window;
                            self.peer_initial_window = i64::from(value);
                            for call in self.calls.values_mut() {
                                call.send_window += delta;
                            }
                        }
                        setting::MAX_FRAME_SIZE => self.peer_max_frame = value as usize,
                        _ => {}
                    }
                }
                frame::write_settings_ack(&mut self.out);
                self.send_blocked();
                Ok(())
            }
            kind::PING => {
                frame::check_ping(&payload)?;
                if !header.has(flags::ACK) {
                    frame::write_ping_ack(&mut self.out, &payload);
                }
                Ok(())
            }
            kind::GOAWAY => {
                let (last, error) = frame::parse_goaway(&payload)?;
                if self.go_away.is_some_and(|(earlier, _)| last > earlier) {
                    return Err(connection_error(
                        code::PROTOCOL_ERROR,
                        "a second GOAWAY raised the last stream id",
                    ));
                }
                self.go_away = Some((last, error));
                // Streams above `last` were never processed: they fail now (retry-safe).
                let unprocessed: Vec<u32> =
                    self.calls.keys().copied().filter(|id| *id > last).collect();
                for stream in unprocessed {
                    self.finish(stream, CallEnd::Reset(code::REFUSED_STREAM));
                }
                Ok(())
            }
            kind::WINDOW_UPDATE => {
                let increment = frame::parse_window_update(&payload)?;
                if header.stream == 0 {
                    if increment == 0 {
                        return Err(connection_error(
                            code::PROTOCOL_ERROR,
                            "WINDOW_UPDATE of 0 on the connection",
                        ));
                    }
                    self.conn_send_window += i64::from(increment);
                    if self.conn_send_window > i64::from(frame::MAX_WINDOW) {
                        return Err(connection_error(
                            code::FLOW_CONTROL_ERROR,
                            "the server raised the connection window past 2^31-1",
                        ));
                    }
                } else if let Some(call) = self.calls.get_mut(&header.stream) {
                    call.send_window += i64::from(increment);
                    if increment == 0 {
                        self.stream_error(
                            header.stream,
                            code::PROTOCOL_ERROR,
                            "the server sent a WINDOW_UPDATE of 0",
                        );
                    } else if call.send_window > i64::from(frame::MAX_WINDOW) {
                        self.stream_error(
                            header.stream,
                            code::FLOW_CONTROL_ERROR,
                            "the server raised a stream window past 2^31-1",
                        );
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

    fn on_header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), ConnectionError> {
        self.scratch_status = None;
        self.scratch_message.clear();
        self.scratch_http = 0;
        self.scratch_status_fields = 0;
        self.scratch_malformed = false;
        let (status, message, http, status_fields, malformed) = (
            &mut self.scratch_status,
            &mut self.scratch_message,
            &mut self.scratch_http,
            &mut self.scratch_status_fields,
            &mut self.scratch_malformed,
        );
        let mut regular_seen = false;
        self.decoder
            .decode(block, |name, value| match name {
                b":status" => {
                    *malformed |= regular_seen;
                    *status_fields = status_fields.saturating_add(1);
                    *http = std::str::from_utf8(value)
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                }
                _ if name.first() == Some(&b':') => *malformed = true,
                b"grpc-status" => {
                    regular_seen = true;
                    *status = Some(
                        std::str::from_utf8(value)
                            .ok()
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(2),
                    );
                }
                b"grpc-message" => {
                    regular_seen = true;
                    message.push_str(&percent_decode(value))
                }
                _ => regular_seen = true,
            })
            .map_err(|_| {
                connection_error(
                    code::COMPRESSION_ERROR,
                    "malformed HPACK header block from the server",
                )
            })?;
        let Some(call) = self.calls.get_mut(&stream) else {
            return Ok(()); // a call we gave up on (deadline) or never made
        };
        // RFC 9113 §8.3.2: one :status, pseudo-headers first, none other; trailers carry no
        // pseudo-header and end the stream (§8.1). A malformed response is a stream error.
        let malformed = self.scratch_malformed
            || if call.headers_seen {
                self.scratch_status_fields != 0 || !end_stream
            } else {
                self.scratch_status_fields != 1
            };
        if malformed {
            self.stream_error(
                stream,
                code::PROTOCOL_ERROR,
                "malformed response headers (:status missing or repeated, or misplaced pseudo-headers)",
            );
            return Ok(());
        }
        if !call.headers_seen {
            call.headers_seen = true;
            call.http_status = self.scratch_http;
        }
        if let Some(status) = self.scratch_status {
            call.grpc_status = Some(status);
            call.grpc_message = std::mem::take(&mut self.scratch_message);
        }
        if end_stream {
            self.end_stream(stream);
        }
        Ok(())
    }

    fn on_data(&mut self, header: Header, payload: &Bytes) -> Result<(), ConnectionError> {
        let size = payload.len() as u32;
        self.conn_recv_unacked += size;
        let range = frame::strip_padding(&header, payload)?;
        if self.conn_recv_unacked > CONNECTION_WINDOW {
            return Err(connection_error(
                code::FLOW_CONTROL_ERROR,
                "the server sent more DATA than the connection window",
            ));
        }
        let Some(call) = self.calls.get_mut(&header.stream) else {
            return Ok(());
        };
        if !call.headers_seen {
            self.stream_error(
                header.stream,
                code::PROTOCOL_ERROR,
                "the server sent DATA before the response headers",
            );
            return Ok(());
        }
        if call.recv_unacked + size > STREAM_WINDOW {
            self.stream_error(
                header.stream,
                code::FLOW_CONTROL_ERROR,
                "the server sent more DATA than the stream window",
            );
            return Ok(());
        }
        call.received += range.len();
        if let Some(stream) = call.stream.as_mut() {
            let whole = stream.counter.feed(&payload[range.clone()]);
            stream.received += whole;
            call.recv_unacked += size;
            let too_large = self
                .template
                .max_reply_message
                .filter(|max| stream.counter.largest() > *max);
            if let Some(max) = too_large {
                let largest = stream.counter.largest();
                frame::write_rst_stream(&mut self.out, header.stream, code::CANCEL);
                self.finish(
                    header.stream,
                    CallEnd::Status(
                        8,
                        format!(
                            "grpc: received message larger than max ({largest} vs. {max}) (--max-recv-message-size)"
                        ),
                    ),
                );
                return Ok(());
            }
            if whole > 0 {
                if let (Some(written), Some(spec)) =
                    (stream.awaiting_reply.take(), &self.template.stream)
                {
                    self.source.round_trip(call.token, written.elapsed());
                    Self::plan_next(
                        spec,
                        stream,
                        &mut self.out,
                        header.stream,
                        &mut self.stream_wake,
                        call.token.intended.is_some(),
                    );
                }
            }
            if header.has(flags::END_STREAM) {
                self.end_stream(header.stream);
            } else if call.recv_unacked >= STREAM_WINDOW / 2 {
                frame::write_window_update(&mut self.out, header.stream, call.recv_unacked);
                call.recv_unacked = 0;
            }
            return Ok(());
        }
        if let Some(max) = self.template.max_reply_message {
            // The body is the 5-byte prefix and the message: past max + 5, the message is over.
            if call.received > max.saturating_add(5) {
                let received = call.received - 5;
                frame::write_rst_stream(&mut self.out, header.stream, code::CANCEL);
                self.finish(
                    header.stream,
                    CallEnd::Status(
                        8,
                        format!(
                            "grpc: received message larger than max ({received}+ vs. {max}) (--max-recv-message-size)"
                        ),
                    ),
                );
                return Ok(());
            }
        }
        if let Some(reply) = &mut call.reply {
            reply.extend_from_slice(&payload[range]);
        }
        call.recv_unacked += size;
        if header.has(flags::END_STREAM) {
            self.end_stream(header.stream);
        } else if call.recv_unacked >= STREAM_WINDOW / 2 {
            frame::write_window_update(&mut self.out, header.stream, call.recv_unacked);
            call.recv_unacked = 0;
        }
        Ok(())
    }

    /// A stream error (RFC 9113 §5.4.2): reset the stream and end its call as malformed.
    fn stream_error(&mut self, stream: u32, error: u32, reason: &'static str) {
        frame::write_rst_stream(&mut self.out, stream, error);
        self.finish(stream, CallEnd::Malformed(reason));
    }

    /// The server ended the stream: decide the call's outcome.
    fn end_stream(&mut self, stream: u32) {
        let Some(call) = self.calls.get_mut(&stream) else {
            return;
        };
        let streaming = call.stream.as_ref();
        let end = match (call.http_status, call.grpc_status) {
            _ if streaming.is_some_and(|s| s.counter.in_message()) => {
                CallEnd::Malformed("the stream ended inside a message")
            }
            // A stream may carry no message at all (a feed of 0).
            (200, Some(0)) if streaming.is_some() => CallEnd::Ok(None),
            (200, Some(0)) if call.received == 0 => {
                CallEnd::Malformed("status OK but no reply message")
            }
            (200, Some(0)) => CallEnd::Ok(call.reply.take().map(BytesMut::freeze)),
            (_, Some(status)) => CallEnd::Status(status, std::mem::take(&mut call.grpc_message)),
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

/// `grpc-message` is percent-encoded (gRPC over HTTP/2); decode it for display.
pub fn percent_decode(value: &[u8]) -> String {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        if value[i] == b'%' && i + 2 < value.len() {
            let hex = std::str::from_utf8(&value[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(byte) = hex {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(value[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_counted_across_any_chunking() {
        // Three messages: 3 bytes, empty, 70 bytes.
        let mut stream = Vec::new();
        for length in [3usize, 0, 70] {
            stream.push(0u8);
            stream.extend_from_slice(&(length as u32).to_be_bytes());
            stream.extend(std::iter::repeat_n(7u8, length));
        }
        for chunk in [1, 2, 5, 6, 7, 64, stream.len()] {
            let mut counter = MessageCounter::default();
            let total: u64 = stream.chunks(chunk).map(|c| counter.feed(c)).sum();
            assert_eq!(total, 3, "chunks of {chunk}");
            assert!(!counter.in_message());
            assert_eq!(counter.largest(), 70);
        }
        let mut counter = MessageCounter::default();
        assert_eq!(counter.feed(&stream[..7]), 0);
        assert!(counter.in_message(), "a message cut short");
    }
}
