//! A server connection for gRPC calls: unary here, streaming in `streaming.rs` (the parts of a
//! turn that hand messages over one by one and send replies as flow control allows).
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

use bytes::{Bytes, BytesMut};
use std::borrow::Cow;
use std::collections::VecDeque;

use crate::io::Socket;
use crate::stream_map::StreamMap;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::frame::{self, code, connection_error, flags, kind, setting, ConnectionError, Header};
use crate::hpack::{CachedBlock, Decoder, Encoder, Indexing};

mod streaming;

use streaming::StreamingCall;
pub use streaming::{Step, StreamOut, OUTBOX_LIMIT};

/// Settings of a server connection.
#[derive(Debug, Clone, Copy)]
pub struct ServerSettings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS advertised and enforced.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE advertised: how much each request may send unacknowledged.
    pub initial_window_size: u32,
    /// The connection-level receive window, which is also the connection's budget for
    /// request bodies: a request's window is returned once its answer is written (or the
    /// stream dropped), not as its bytes arrive, so the requests a connection holds — bodies
    /// still arriving, being served, or whose answers wait to be written — never exceed it in
    /// request bytes, and their answers are bounded with them (raised, if needed, to fit one
    /// message of [`Service::max_message_bytes`]).
    pub connection_window: u32,
    /// A connection with no open stream that has sent nothing for this long gets
    /// GOAWAY(NO_ERROR) and is closed; `None` keeps idle connections forever.
    pub idle_timeout: Option<std::time::Duration>,
    /// A connection with open streams that has sent nothing for this long gets a PING; `None`
    /// sends none.
    pub keepalive_interval: Option<std::time::Duration>,
    /// How long after a keepalive PING the peer must have sent something (the ACK, or any
    /// frame) before the connection is dropped as dead, its calls with it.
    pub keepalive_timeout: std::time::Duration,
    /// `grpc-accept-encoding` to send on gzip responses and on trailers-only statuses (the
    /// gRPC spec: a server names what it accepts when it refuses a client's encoding); not
    /// on plain responses, whose head stays two indexed bytes. `None`: never sent.
    pub accept_encoding: Option<&'static [u8]>,
}

/// The default of [`ServerSettings::idle_timeout`]: five minutes.
pub const DEFAULT_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The default of [`ServerSettings::keepalive_interval`]: one minute.
pub const DEFAULT_KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// The default of [`ServerSettings::keepalive_timeout`]: twenty seconds (gRPC's own default).
pub const DEFAULT_KEEPALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// The opaque data of our keepalive PINGs.
const KEEPALIVE_PING: &[u8; 8] = b"grpclabK";

impl Default for ServerSettings {
    fn default() -> ServerSettings {
        ServerSettings {
            max_concurrent_streams: 1000,
            initial_window_size: 1 << 20,
            connection_window: 16 << 20,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            keepalive_interval: Some(DEFAULT_KEEPALIVE_INTERVAL),
            keepalive_timeout: DEFAULT_KEEPALIVE_TIMEOUT,
            accept_encoding: None,
        }
    }
}

/// The request headers a gRPC server looks at. Slices are valid during the call only.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestHead<'a> {
    /// `:method`
    pub method: &'a [u8],
    /// `:path`
    pub path: &'a [u8],
    /// `content-type`
    pub content_type: Option<&'a [u8]>,
    /// `grpc-encoding`
    pub grpc_encoding: Option<&'a [u8]>,
    /// `grpc-timeout`
    pub grpc_timeout: Option<&'a [u8]>,
}

/// A response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// `200`, `content-type: application/grpc`, the framed message, `grpc-status: 0`.
    Message(Bytes),
    /// As `Message`, for a message framed gzip-compressed (flag 1): the head adds
    /// `grpc-encoding: gzip` (and `grpc-accept-encoding` from the settings).
    Gzip(Bytes),
    /// A trailers-only gRPC error.
    Status {
        /// `grpc-status`
        code: u8,
        /// `grpc-message` (percent-encoded on the wire)
        message: Cow<'static, str>,
    },
    /// A bare HTTP status (not gRPC at all, e.g. 415).
    Http(u16),
}

/// Sends a response later, from any thread.
#[derive(Debug)]
pub struct Reply {
    stream: u32,
    replies: mpsc::UnboundedSender<(u32, Response)>,
}

impl Reply {
    /// Sends the call's response; the connection writes it on its next turn.
    pub fn send(self, response: Response) {
        // The connection may be gone (client vanished): then nobody needs the answer.
        let _ = self.replies.send((self.stream, response));
    }
}

/// What a call's body came to, for [`Service::call`].
pub enum Dispatch<C> {
    /// Answer now.
    Respond(Response),
    /// The service keeps the [`Reply`] and answers later.
    Later,
    /// The service cannot take it now (a full queue): the connection keeps the call and
    /// offers it again on a later turn.
    Busy(C, Bytes, Reply),
}

/// The application behind a server connection.
pub trait Service {
    /// What the service remembers about an accepted call between headers and body.
    type Call;
    /// Headers complete: accept the call, or answer at once.
    fn accept(&mut self, head: &RequestHead<'_>, now: Instant) -> Result<Self::Call, Response>;
    /// The call's deadline, if the client set one.
    fn deadline(&self, call: &Self::Call) -> Option<Instant>;
    /// The largest request message the service accepts.
    fn max_message_bytes(&self) -> usize;
    /// The answer to a message declared larger than [`Service::max_message_bytes`].
    fn too_large(&self, declared: usize) -> Response;
    /// The answer to a call whose deadline passed before its body arrived.
    fn deadline_exceeded(&self) -> Response;
    /// The body is complete (one framed message, or whatever the client sent).
    fn call(&mut self, call: Self::Call, body: Bytes, reply: Reply) -> Dispatch<Self::Call>;

    /// What the service keeps for a streaming call (`()` for a service that has none).
    type Stream;

    /// Whether an accepted call streams. `Some(state)`: its request messages are handed over
    /// one by one as they arrive ([`Service::on_message`]), the service may send any number of
    /// replies, and ends the call with a status (see the `streaming` module); `None`: a unary
    /// call, whose whole body goes to [`Service::call`].
    fn open_stream(&mut self, call: &Self::Call) -> Option<Self::Stream>;

    /// One request message of a streaming call (framed: the 5-byte prefix and the message).
    fn on_message(
        &mut self,
        call: &Self::Call,
        stream: &mut Self::Stream,
        message: Bytes,
        out: &mut StreamOut<'_>,
    ) -> Step {
        let _ = (call, stream, message);
        out.finish(12, Cow::Borrowed("streaming calls are not served"));
        Step::Done
    }

    /// The client half-closed a streaming call (every message before it has been handed over).
    /// The service ends the call now or later ([`StreamOut::finish`]).
    fn on_half_close(
        &mut self,
        call: &Self::Call,
        stream: &mut Self::Stream,
        out: &mut StreamOut<'_>,
    ) {
        let _ = (call, stream);
        out.finish(0, Cow::Borrowed(""));
    }

    /// A producing call ([`StreamOut::set_producing`]) has room for more replies.
    fn on_room(&mut self, call: &Self::Call, stream: &mut Self::Stream, out: &mut StreamOut<'_>) {
        let _ = (call, stream);
        out.set_producing(false);
    }
}

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
/// What a connection's buffers start with: an idle connection costs a few KiB, not 128 KiB
/// reserved up front (issue 12: 5,000 idle connections reserved 666 MB).
const INITIAL_BUFFER: usize = 4 * 1024;
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
    /// Response data waiting for flow-control window, then the trailers.
    Sending { data: Bytes, trailers: bool },
    /// The response's END_STREAM is in the write buffer, not yet on the socket: the stream
    /// still counts against SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §5.1.2), and frames the
    /// peer sends meanwhile (WINDOW_UPDATE, RST_STREAM) meet it half-closed, not closed.
    Flushing,
    /// A streaming call, whose state is in `Connection::streaming` (see the `streaming`
    /// module: kept apart so that unary streams and their drop code stay as small as before).
    Streaming,
}

/// How many stream ids reset by us are remembered, so frames the peer sent before it saw the
/// reset are ignored (RFC 9113 §5.1) instead of answered with STREAM_CLOSED.
const RESET_MEMORY: usize = 4096;

/// Frames that make work but carry no request forward (PING, SETTINGS, PRIORITY, empty DATA
/// or CONTINUATION, frames for closed streams) a connection may send per second beyond one per
/// request it completes; past that it gets GOAWAY(ENHANCE_YOUR_CALM), as the h2 crate and
/// other servers do. A reading client's flood otherwise keeps an I/O thread busy answering it.
const FLOOD_BUDGET: i64 = 10_000;

/// Room above one largest message in the connection window: its gRPC prefix and padding.
const BUDGET_SLACK: u32 = 64 * 1024;

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
        crate::declared_message_len(bytes)
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
    /// a walk per SETTINGS entry let 6 MB/s of SETTINGS keep an I/O thread busy (issue 12).
    send_window_offset: i64,
    /// Connection-window bytes this stream's DATA took that are not yet returned: returned
    /// when the answer has been written or the stream dropped (see
    /// [`ServerSettings::connection_window`]).
    held: u32,
}

/// Header decoding scratch, reused for every header block.
#[derive(Default)]
struct HeadScratch {
    method: Vec<u8>,
    path: Vec<u8>,
    content_type: OptionalValue,
    grpc_encoding: OptionalValue,
    grpc_timeout: OptionalValue,
    /// Which of :method, :scheme, :path, :authority were present (`PSEUDO_*` bits).
    pseudo_seen: u8,
    /// A regular field has been seen: a pseudo-header after it is malformed (§8.3).
    regular_seen: bool,
    content_length: Option<u64>,
    malformed: bool,
}

const PSEUDO_METHOD: u8 = 1;
const PSEUDO_SCHEME: u8 = 2;
const PSEUDO_PATH: u8 = 4;
const PSEUDO_AUTHORITY: u8 = 8;

/// A header value that may be absent, whose buffer is kept between requests (an `Option<Vec>`
/// reset to `None` would allocate again for every request).
#[derive(Default)]
struct OptionalValue {
    present: bool,
    value: Vec<u8>,
}

impl OptionalValue {
    fn set(&mut self, value: &[u8]) {
        self.value.clear();
        self.value.extend_from_slice(value);
        self.present = true;
    }

    fn get(&self) -> Option<&[u8]> {
        self.present.then_some(self.value.as_slice())
    }
}

impl HeadScratch {
    /// Takes one decoded field, checking the rules of RFC 9113 §8.2 and §8.3 as it goes.
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if name.first() == Some(&b':') {
            let bit = match name {
                b":method" => PSEUDO_METHOD,
                b":scheme" => PSEUDO_SCHEME,
                b":path" => PSEUDO_PATH,
                b":authority" => PSEUDO_AUTHORITY,
                _ => 0, // unknown, or a response pseudo-header (§8.3): malformed
            };
            // Unknown, repeated, or after a regular field: malformed (§8.3, §8.3.1).
            if bit == 0 || self.pseudo_seen & bit != 0 || self.regular_seen {
                self.malformed = true;
            }
            self.pseudo_seen |= bit;
            match bit {
                PSEUDO_METHOD => self.method.extend_from_slice(value),
                PSEUDO_PATH => self.path.extend_from_slice(value),
                _ => {}
            }
            return;
        }
        self.regular_seen = true;
        match name {
            b"content-type" => self.content_type.set(value),
            b"grpc-encoding" => self.grpc_encoding.set(value),
            b"grpc-timeout" => self.grpc_timeout.set(value),
            // The only value `te` may carry in HTTP/2 (§8.2.2).
            b"te" if value != b"trailers" => self.malformed = true,
            b"content-length" => {
                let parsed = std::str::from_utf8(value)
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok());
                match (parsed, self.content_length) {
                    (Some(length), None) => self.content_length = Some(length),
                    (Some(length), Some(earlier)) if length == earlier => {}
                    _ => self.malformed = true,
                }
            }
            // Connection-specific fields are malformed in HTTP/2 (§8.2.2).
            b"connection" | b"transfer-encoding" | b"keep-alive" | b"upgrade"
            | b"proxy-connection" => self.malformed = true,
            _ if name.iter().any(u8::is_ascii_uppercase) => self.malformed = true,
            _ => {}
        }
    }

    /// Whether the fields make a well-formed request (§8.3.1): :method, :scheme and a
    /// non-empty :path, each once; a request that ends with its headers declares no body.
    fn is_valid_request(&self, end_stream: bool) -> bool {
        let required = PSEUDO_METHOD | PSEUDO_SCHEME | PSEUDO_PATH;
        let body_promised = end_stream && self.content_length.is_some_and(|length| length != 0);
        let incomplete = self.pseudo_seen & required != required
            || self.method.is_empty()
            || self.path.is_empty();
        !(self.malformed || incomplete || body_promised)
    }

    fn clear(&mut self) {
        self.method.clear();
        self.path.clear();
        for field in [
            &mut self.content_type,
            &mut self.grpc_encoding,
            &mut self.grpc_timeout,
        ] {
            field.present = false;
        }
        self.pseudo_seen = 0;
        self.regular_seen = false;
        self.content_length = None;
        self.malformed = false;
    }
}

/// A HEADERS frame waiting for its CONTINUATIONs.
struct PartialHeaders {
    stream: u32,
    end_stream: bool,
    self_dependent: bool,
    block: Vec<u8>,
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
    replies_tx: mpsc::UnboundedSender<(u32, Response)>,
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
    conn_send_window: i64,
    conn_recv_window: i64,
    /// Released (answered or dropped) and not yet returned with a WINDOW_UPDATE.
    conn_recv_unacked: u32,
    /// The connection window advertised: `settings.connection_window`, raised to fit one
    /// largest message with room for its frames' overhead.
    conn_window_target: u32,
    /// What is left of [`FLOOD_BUDGET`] in the current second (requests earn units back).
    flood_credit: i64,
    /// When the current flood-budget second began (a turn's read time).
    flood_window_start: Instant,
    /// Streams in `Flushing`, to forget once the write buffer is on the socket.
    flushing: Vec<u32>,
    /// Streams we reset (refused or failed), newest last, at most [`RESET_MEMORY`].
    reset_ids: std::collections::HashSet<u32>,
    reset_order: VecDeque<u32>,
    /// GOAWAY sent: no new streams.
    going_away: bool,
    /// The peer sent GOAWAY.
    peer_going_away: bool,
    out: Vec<u8>,
    block_scratch: Vec<u8>,
    /// `:status 200` + `content-type: application/grpc`, once indexed.
    head_block: CachedBlock,
    /// The same + `grpc-encoding: gzip` (+ `grpc-accept-encoding`), for gzip responses.
    gzip_head_block: CachedBlock,
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
    let (replies_tx, mut replies_rx) = mpsc::unbounded_channel();
    let mut connection = Connection::new(service, settings, replies_tx);
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
    loop {
        if work_since_yield >= FAIR_SHARE {
            work_since_yield = std::time::Duration::ZERO;
            tokio::task::yield_now().await;
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
        let draining = connection.going_away || connection.peer_going_away || read_closed;
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
            Some((stream, response)) = replies_rx.recv() => {
                connection.respond(stream, response);
                // Take every reply already waiting, so they go out in one write.
                while let Ok((stream, response)) = replies_rx.try_recv() {
                    connection.respond(stream, response);
                }
            }
            _ = &mut deadline_timer, if timer_armed => connection.expire_deadlines(Instant::now()),
            _ = tokio::time::sleep(BUSY_RETRY), if busy => {}
            _ = shutdown.cancelled(), if !connection.going_away => connection.go_away(code::NO_ERROR, b""),
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

/// Arms a lazily armed timer (one that is re-checked when it fires) to fire by `deadline`:
/// reset only when it is unarmed or would fire later, so a deadline that keeps moving later
/// (every read moves it) costs no timer work per turn.
fn arm_no_later_than(
    timer: std::pin::Pin<&mut tokio::time::Sleep>,
    armed_at: &mut Option<Instant>,
    deadline: Instant,
) {
    if armed_at.is_none_or(|at| at > deadline) {
        timer.reset(deadline.into());
        *armed_at = Some(deadline);
    }
}

/// How long a connection that failed with GOAWAY keeps discarding what the peer still sends.
const ERROR_LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Closes a connection after its GOAWAY is written. Closing a socket with unread bytes makes
/// the kernel send RST, and a peer that gets RST may lose the GOAWAY still in its receive
/// buffer — a flooding client would see "connection reset" instead of ENHANCE_YOUR_CALM. So:
/// half-close our side (FIN after the GOAWAY), then discard what arrives until the peer
/// closes too, for at most [`ERROR_LINGER`].
async fn close_after_error(mut socket: Socket) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = socket.flush();
    let mut tcp = socket.into_tcp();
    let _ = tcp.shutdown().await;
    // On the heap, and only here: an array would sit in every connection's future.
    let mut scratch = vec![0u8; 16 * 1024];
    let _ = tokio::time::timeout(ERROR_LINGER, async {
        while let Ok(n) = tcp.read(&mut scratch).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

impl<S: Service> Connection<S> {
    fn new(
        service: S,
        settings: ServerSettings,
        replies_tx: mpsc::UnboundedSender<(u32, Response)>,
    ) -> Connection<S> {
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
            replies_tx,
            turn_started: Instant::now(),
            head: HeadScratch::default(),
            partial: None,
            last_stream: 0,
            preface_done: false,
            settings_received: false,
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE as usize,
            peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
            max_send_offset: 0,
            conn_send_window: i64::from(frame::DEFAULT_WINDOW),
            conn_recv_window: i64::from(frame::DEFAULT_WINDOW),
            conn_recv_unacked: 0,
            conn_window_target: 0,
            flood_credit: FLOOD_BUDGET,
            flood_window_start: Instant::now(),
            flushing: Vec::new(),
            reset_ids: Default::default(),
            reset_order: VecDeque::new(),
            going_away: false,
            peer_going_away: false,
            out: Vec::with_capacity(INITIAL_BUFFER),
            block_scratch: Vec::new(),
            head_block: CachedBlock::default(),
            gzip_head_block: CachedBlock::default(),
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
        while let Some((header, payload)) = frame::take_frame(buf)? {
            self.on_frame(header, payload)?;
        }
        self.relieve_stall();
        self.flush_window_updates();
        Ok(())
    }

    fn on_frame(&mut self, header: Header, payload: Bytes) -> Result<(), ConnectionError> {
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
        match header.kind {
            kind::DATA => self.on_data(header, payload),
            kind::HEADERS => self.on_headers(header, &payload),
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
                } else if dependency(&payload) == header.stream {
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
                frame::parse_rst_stream(&payload)?;
                if header.stream > self.last_stream {
                    return Err(connection_error(
                        code::PROTOCOL_ERROR,
                        "RST_STREAM on an idle stream",
                    ));
                }
                if !self.streams.contains_key(&header.stream) {
                    // Nothing to cancel: a reset of a closed stream is pure overhead, unless
                    // it crossed our own reset of it (§5.1).
                    if self.reset_ids.contains(&header.stream) {
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
            kind::SETTINGS => self.on_settings(header, &payload),
            kind::PUSH_PROMISE => Err(connection_error(
                code::PROTOCOL_ERROR,
                "a client sent PUSH_PROMISE",
            )),
            kind::PING => {
                if header.stream != 0 {
                    return Err(connection_error(code::PROTOCOL_ERROR, "PING on a stream"));
                }
                frame::check_ping(&payload)?;
                if !header.has(flags::ACK) {
                    self.spend_flood_credit()?;
                    frame::write_ping_ack(&mut self.out, &payload);
                }
                Ok(())
            }
            kind::GOAWAY => {
                if header.stream != 0 {
                    return Err(connection_error(code::PROTOCOL_ERROR, "GOAWAY on a stream"));
                }
                frame::parse_goaway(&payload)?;
                self.peer_going_away = true;
                Ok(())
            }
            kind::WINDOW_UPDATE => self.on_window_update(header, &payload),
            kind::CONTINUATION => self.on_continuation(header, &payload),
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    fn on_settings(&mut self, header: Header, payload: &[u8]) -> Result<(), ConnectionError> {
        if header.stream != 0 {
            return Err(connection_error(
                code::PROTOCOL_ERROR,
                "SETTINGS on a stream",
            ));
        }
        if header.has(flags::ACK) {
            if !payload.is_empty() {
                return Err(connection_error(
                    code::FRAME_SIZE_ERROR,
                    "SETTINGS ACK with a payload",
                ));
            }
            return Ok(());
        }
        self.spend_flood_credit()?;
        // Only the last value of each setting in a frame counts (they apply in order), so a
        // frame repeating an entry thousands of times costs what one entry does.
        let mut initial_window = None;
        for (id, value) in frame::parse_settings(payload)? {
            match id {
                setting::HEADER_TABLE_SIZE => self.encoder.set_max_size(value as usize),
                setting::INITIAL_WINDOW_SIZE => initial_window = Some(i64::from(value)),
                setting::MAX_FRAME_SIZE => self.peer_max_frame = value as usize,
                _ => {}
            }
        }
        if let Some(value) = initial_window {
            self.check_initial_window(value)?;
            self.peer_initial_window = value;
        }
        self.settings_received = true;
        frame::write_settings_ack(&mut self.out);
        self.send_blocked();
        Ok(())
    }

    /// A new SETTINGS_INITIAL_WINDOW_SIZE may not push any open stream's window past 2^31-1
    /// (§6.9.2: FLOW_CONTROL_ERROR). O(1) while the upper bound says no stream can overflow;
    /// otherwise one walk makes the bound exact.
    fn check_initial_window(&mut self, value: i64) -> Result<(), ConnectionError> {
        let max = i64::from(frame::MAX_WINDOW);
        if self.max_send_offset + value <= max {
            return Ok(());
        }
        self.max_send_offset = self
            .streams
            .values()
            .map(|stream| stream.send_window_offset)
            .max()
            .unwrap_or(0);
        if self.max_send_offset + value > max {
            return Err(connection_error(
                code::FLOW_CONTROL_ERROR,
                "a stream window exceeds 2^31-1",
            ));
        }
        Ok(())
    }

    fn on_window_update(&mut self, header: Header, payload: &[u8]) -> Result<(), ConnectionError> {
        let increment = frame::parse_window_update(payload)?;
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
                    "connection window exceeds 2^31-1",
                ));
            }
        } else {
            if header.stream > self.last_stream {
                return Err(connection_error(
                    code::PROTOCOL_ERROR,
                    "WINDOW_UPDATE on an idle stream",
                ));
            }
            if let Some(stream) = self.streams.get_mut(&header.stream) {
                if increment == 0 {
                    self.reset(header.stream, code::PROTOCOL_ERROR);
                    return Ok(());
                }
                stream.send_window_offset += i64::from(increment);
                if stream.send_window_offset + self.peer_initial_window
                    > i64::from(frame::MAX_WINDOW)
                {
                    self.reset(header.stream, code::FLOW_CONTROL_ERROR);
                    return Ok(());
                }
                self.max_send_offset = self.max_send_offset.max(stream.send_window_offset);
            } else if !self.reset_ids.contains(&header.stream) {
                // Window for a closed stream (not one that crossed our reset): nothing to
                // send with it.
                self.spend_flood_credit()?;
            }
        }
        self.send_blocked();
        Ok(())
    }

    fn on_headers(&mut self, header: Header, payload: &[u8]) -> Result<(), ConnectionError> {
        if header.stream == 0 {
            return Err(connection_error(
                code::PROTOCOL_ERROR,
                "HEADERS on stream 0",
            ));
        }
        if header.stream.is_multiple_of(2) {
            return Err(connection_error(
                code::PROTOCOL_ERROR,
                "a client stream with an even id",
            ));
        }
        let fragment = frame::headers_fragment(&header, payload)?;
        // The priority fields sit just before the fragment (§6.2); RFC 9113 deprecates
        // priorities but still forbids a stream depending on itself (§5.3.1).
        let self_dependent = header.has(flags::PRIORITY)
            && dependency(&payload[fragment.start - 5..fragment.start]) == header.stream;
        let partial = PartialHeaders {
            stream: header.stream,
            end_stream: header.has(flags::END_STREAM),
            self_dependent,
            block: Vec::new(),
        };
        if header.has(flags::END_HEADERS) {
            self.on_header_block(
                partial.stream,
                partial.end_stream,
                self_dependent,
                &payload[fragment],
            )
        } else {
            let mut partial = partial;
            partial.block.extend_from_slice(&payload[fragment]);
            self.partial = Some(partial);
            Ok(())
        }
    }

    fn on_continuation(&mut self, header: Header, payload: &[u8]) -> Result<(), ConnectionError> {
        let Some(mut partial) = self.partial.take() else {
            return Err(connection_error(
                code::PROTOCOL_ERROR,
                "CONTINUATION without HEADERS",
            ));
        };
        if payload.is_empty() && !header.has(flags::END_HEADERS) {
            self.spend_flood_credit()?;
        }
        partial.block.extend_from_slice(payload);
        if partial.block.len() > crate::hpack::decoder_max_block() {
            return Err(connection_error(
                code::PROTOCOL_ERROR,
                "header block too large",
            ));
        }
        if header.has(flags::END_HEADERS) {
            let block = std::mem::take(&mut partial.block);
            self.on_header_block(
                partial.stream,
                partial.end_stream,
                partial.self_dependent,
                &block,
            )
        } else {
            self.partial = Some(partial);
            Ok(())
        }
    }

    /// A complete header block: a new request, or trailers of one. `self_dependent`: its
    /// HEADERS frame made the stream depend on itself (§5.3.1: a stream error).
    fn on_header_block(
        &mut self,
        stream_id: u32,
        end_stream: bool,
        self_dependent: bool,
        block: &[u8],
    ) -> Result<(), ConnectionError> {
        // Decode first, whatever happens to the stream: the HPACK state must stay in step.
        self.head.clear();
        let head = &mut self.head;
        self.decoder
            .decode(block, |name, value| head.field(name, value))
            .map_err(|_| {
                connection_error(code::COMPRESSION_ERROR, "malformed HPACK header block")
            })?;

        if stream_id <= self.last_stream {
            // A streaming call's half-close so far (None: not a streaming call).
            let stream_half_closed = self.streaming.get(&stream_id).map(|call| call.half_closed);
            // Trailers on a stream we know, or headers on a closed one.
            return match self.streams.get_mut(&stream_id) {
                // Trailers: END_STREAM, and no pseudo-header (§8.1, §8.3).
                Some(Stream {
                    state: StreamState::Receiving { .. },
                    ..
                }) if end_stream && self.head.pseudo_seen == 0 && !self.head.malformed => {
                    self.complete(stream_id);
                    Ok(())
                }
                // A streaming call's trailers: its half-close.
                Some(Stream {
                    state: StreamState::Streaming,
                    ..
                }) if stream_half_closed == Some(false)
                    && end_stream
                    && self.head.pseudo_seen == 0
                    && !self.head.malformed =>
                {
                    self.on_stream_trailers(stream_id);
                    Ok(())
                }
                // HEADERS on a stream the client has half-closed: §5.1.
                Some(Stream {
                    state: StreamState::Streaming,
                    ..
                }) if stream_half_closed == Some(true) => {
                    self.reset(stream_id, code::STREAM_CLOSED);
                    Ok(())
                }
                Some(_) => {
                    self.reset(stream_id, code::PROTOCOL_ERROR);
                    Ok(())
                }
                // Trailers of a stream we reset (refused, or answered early): ignored (§5.1).
                None if self.reset_ids.contains(&stream_id) => Ok(()),
                // An id at or below one already used that opens nothing: §5.1.1.
                None => Err(connection_error(
                    code::PROTOCOL_ERROR,
                    "HEADERS on a stream id already used or skipped",
                )),
            };
        }
        self.last_stream = stream_id;
        if self.going_away {
            return Ok(());
        }
        if self.streams.len() >= self.settings.max_concurrent_streams as usize {
            frame::write_rst_stream(&mut self.out, stream_id, code::REFUSED_STREAM);
            self.remember_reset(stream_id);
            return Ok(());
        }
        if self_dependent || !self.head.is_valid_request(end_stream) {
            frame::write_rst_stream(&mut self.out, stream_id, code::PROTOCOL_ERROR);
            self.remember_reset(stream_id);
            return Ok(());
        }
        let head = RequestHead {
            method: &self.head.method,
            path: &self.head.path,
            content_type: self.head.content_type.get(),
            grpc_encoding: self.head.grpc_encoding.get(),
            grpc_timeout: self.head.grpc_timeout.get(),
        };
        let stream = Stream {
            state: StreamState::Running,
            recv_window: i64::from(self.settings.initial_window_size),
            recv_unacked: 0,
            send_window_offset: 0,
            held: 0,
        };
        match self.service.accept(&head, self.turn_started) {
            Ok(call) => {
                let deadline = self.service.deadline(&call);
                if let Some(state) = self.service.open_stream(&call) {
                    self.open_streaming_call(stream_id, stream, call, state, deadline, end_stream);
                    return Ok(());
                }
                self.streams.insert(
                    stream_id,
                    Stream {
                        state: StreamState::Receiving {
                            call,
                            body: Body::Empty,
                            deadline,
                            content_length: self.head.content_length,
                        },
                        ..stream
                    },
                );
                if end_stream {
                    self.complete(stream_id);
                }
            }
            Err(response) => {
                self.streams.insert(stream_id, stream);
                self.respond(stream_id, response);
                if !end_stream {
                    // Refused before its body: ask the client to stop sending it (§8.1).
                    self.reset(stream_id, code::NO_ERROR);
                }
            }
        }
        Ok(())
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
            // Nothing keeps these bytes: their window goes back at once.
            self.conn_recv_unacked += size;
            // DATA sent before the peer saw our reset is expected (§5.1) and costs no output;
            // DATA on a stream closed long ago is answered, so it counts.
            if !self.reset_ids.contains(&header.stream) {
                if !empty {
                    self.spend_flood_credit()?;
                }
                frame::write_rst_stream(&mut self.out, header.stream, code::STREAM_CLOSED);
            }
            return Ok(());
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
            let response = self.service.too_large(declared);
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

    /// Returns released connection window once half of it is released, or as soon as anything
    /// is released while the client is down to less than half.
    fn flush_window_updates(&mut self) {
        let half = self.conn_window_target / 2;
        if self.conn_recv_unacked >= half
            || (self.conn_recv_unacked > 0 && self.conn_recv_window < i64::from(half))
        {
            frame::write_window_update(&mut self.out, 0, self.conn_recv_unacked);
            self.conn_recv_window += i64::from(self.conn_recv_unacked);
            self.conn_recv_unacked = 0;
        }
    }

    /// Spends one unit of the flood budget on a frame that carries no request forward.
    fn spend_flood_credit(&mut self) -> Result<(), ConnectionError> {
        self.flood_credit -= 1;
        if self.flood_credit >= 0 {
            return Ok(());
        }
        if self.turn_started.duration_since(self.flood_window_start)
            >= std::time::Duration::from_secs(1)
        {
            self.flood_window_start = self.turn_started;
            self.flood_credit = FLOOD_BUDGET - 1;
            return Ok(());
        }
        Err(connection_error(
            code::ENHANCE_YOUR_CALM,
            "too many control frames",
        ))
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

    /// Bodies still arriving can deadlock the budget: when the client's window cannot finish
    /// any of them and no call will give window back, no stream can progress. Refuse the
    /// newest unfinished bodies (REFUSED_STREAM: never processed, safe to retry, RFC 9113
    /// §8.7) until the client can finish one. Runs only when the client is nearly out of
    /// window and nothing is running, so the happy path pays one comparison.
    fn relieve_stall(&mut self) {
        loop {
            let credit = self.conn_recv_window + i64::from(self.conn_recv_unacked);
            let one_message = i64::try_from(self.service.max_message_bytes()).unwrap_or(i64::MAX);
            if credit >= one_message.saturating_add(5) {
                return;
            }
            let mut receiving = 0usize;
            let mut smallest_need = i64::MAX;
            let mut newest = 0u32;
            for (id, stream) in self.streams.iter() {
                // Window held by a request the service has (or whose answer waits to be
                // written) comes back without the client's help: not a stall.
                if stream.held > 0 && !matches!(stream.state, StreamState::Receiving { .. }) {
                    return;
                }
                if let StreamState::Receiving { body, .. } = &stream.state {
                    receiving += 1;
                    let need = match body.prefix_length() {
                        Some(declared) => declared as i64 + 5 - body.len() as i64,
                        None => 5 - body.len() as i64,
                    };
                    smallest_need = smallest_need.min(need.max(1));
                    newest = newest.max(*id);
                }
            }
            if receiving < 2 || credit >= smallest_need {
                return;
            }
            self.reset(newest, code::REFUSED_STREAM);
        }
    }

    /// The request is complete: hand it to the service.
    fn complete(&mut self, stream_id: u32) {
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return;
        };
        // A request earns back a unit of the flood budget: a busy client's stray frames
        // (a reset crossing its answer) never add up to a flood.
        self.flood_credit = (self.flood_credit + 1).min(FLOOD_BUDGET);
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
        if let Some((call, body)) = self.offer(stream_id, call, body) {
            self.busy.push_back((stream_id, call, body));
        }
    }

    /// Offers calls the service was too busy for again, in order.
    fn retry_busy(&mut self) {
        while let Some((stream_id, call, body)) = self.busy.pop_front() {
            if !self.streams.contains_key(&stream_id) {
                continue;
            }
            if let Some((call, body)) = self.offer(stream_id, call, body) {
                self.busy.push_front((stream_id, call, body));
                break;
            }
        }
    }

    /// Hands a complete call to the service; gives it back if the service is busy.
    fn offer(&mut self, stream_id: u32, call: S::Call, body: Bytes) -> Option<(S::Call, Bytes)> {
        let reply = Reply {
            stream: stream_id,
            replies: self.replies_tx.clone(),
        };
        match self.service.call(call, body, reply) {
            Dispatch::Respond(response) => {
                self.respond(stream_id, response);
                None
            }
            Dispatch::Later => None,
            Dispatch::Busy(call, body, _) => Some((call, body)),
        }
    }

    fn earliest_deadline(&self) -> Option<Instant> {
        self.streams
            .values()
            .filter_map(|s| match &s.state {
                StreamState::Receiving { deadline, .. } => *deadline,
                _ => None,
            })
            .chain(self.streaming.values().filter_map(|call| call.deadline))
            .min()
    }

    fn expire_deadlines(&mut self, now: Instant) {
        let expired: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| matches!(&s.state, StreamState::Receiving { deadline: Some(d), .. } if *d <= now))
            .map(|(id, _)| *id)
            .collect();
        let expired_streams: Vec<u32> = self
            .streaming
            .iter()
            .filter(|(_, call)| call.deadline.is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for stream_id in expired_streams {
            let response = Response::Status {
                code: 4,
                message: Cow::Borrowed("deadline exceeded during the stream"),
            };
            let half_closed = self
                .streaming
                .get(&stream_id)
                .is_some_and(|call| call.half_closed);
            self.abort_stream(stream_id, response);
            // The call is over for both sides: a client still sending is told to stop
            // (abort_stream did, with NO_ERROR); one that has half-closed gets CANCEL, as for
            // unary calls (§8.1: the server may reset after its response).
            if half_closed {
                frame::write_rst_stream(&mut self.out, stream_id, code::CANCEL);
            }
        }
        for stream_id in expired {
            let response = self.service.deadline_exceeded();
            self.respond(stream_id, response);
            frame::write_rst_stream(&mut self.out, stream_id, code::CANCEL);
        }
    }

    /// Encodes a response; data beyond the flow-control windows waits in the stream.
    fn respond(&mut self, stream_id: u32, response: Response) {
        let Some(stream) = self.streams.get(&stream_id) else {
            return; // reset by the client meanwhile
        };
        if let StreamState::Streaming = stream.state {
            self.on_stream_reply(stream_id, response);
            return;
        }
        // Answered before the request ended (415, RESOURCE_EXHAUSTED, a deadline): after the
        // response, RST_STREAM(NO_ERROR) asks the client to stop sending (§8.1), and its late
        // DATA is ignored rather than answered with STREAM_CLOSED.
        let early = matches!(stream.state, StreamState::Receiving { .. })
            && !matches!(response, Response::Message(_) | Response::Gzip(_));
        let response_is_gzip = matches!(response, Response::Gzip(_));
        self.block_scratch.clear();
        match response {
            Response::Http(status) => {
                self.encoder.begin_block(&mut self.block_scratch);
                let status = status.to_string();
                self.encoder.field(
                    b":status",
                    status.as_bytes(),
                    Indexing::Without,
                    &mut self.block_scratch,
                );
                self.end_with_headers(stream_id);
            }
            Response::Status { code, message } => {
                self.status_block(code, &message, true);
                self.end_with_headers(stream_id);
            }
            Response::Message(data) | Response::Gzip(data) => {
                self.write_response_head(stream_id, response_is_gzip);
                if let Some(stream) = self.streams.get_mut(&stream_id) {
                    stream.state = StreamState::Sending {
                        data,
                        trailers: true,
                    };
                }
                self.send_stream(stream_id);
            }
        }
        if early {
            self.reset(stream_id, code::NO_ERROR);
        }
    }

    /// Writes a response's HEADERS, not ending the stream: `:status 200` and `content-type`,
    /// with `grpc-encoding: gzip` (and `grpc-accept-encoding`) for a gzip response; from the
    /// cached blocks, so after the first response they are a few bytes.
    fn write_response_head(&mut self, stream_id: u32, gzip: bool) {
        self.block_scratch.clear();
        let accept_encoding = self.settings.accept_encoding;
        let block = match gzip {
            false => &mut self.head_block,
            true => &mut self.gzip_head_block,
        };
        block.write(
            &mut self.encoder,
            &mut self.block_scratch,
            |encoder, block| {
                encoder.field(b":status", b"200", Indexing::Incremental, block);
                encoder.field(
                    b"content-type",
                    b"application/grpc",
                    Indexing::Incremental,
                    block,
                );
                if gzip {
                    encoder.field(b"grpc-encoding", b"gzip", Indexing::Incremental, block);
                    if let Some(accepted) = accept_encoding {
                        encoder.field(
                            b"grpc-accept-encoding",
                            accepted,
                            Indexing::Incremental,
                            block,
                        );
                    }
                }
            },
        );
        frame::write_headers(
            &mut self.out,
            stream_id,
            &self.block_scratch,
            false,
            self.peer_max_frame,
        );
    }

    /// Sends the header block in `block_scratch` as the stream's last frame (trailers-only or
    /// a bare HTTP status) and forgets the stream.
    fn end_with_headers(&mut self, stream_id: u32) {
        frame::write_headers(
            &mut self.out,
            stream_id,
            &self.block_scratch,
            true,
            self.peer_max_frame,
        );
        self.finish_stream(stream_id);
    }

    /// Encodes a status into `block_scratch`: a trailers-only response (`:status`,
    /// `content-type`, `grpc-accept-encoding` when configured) or the trailers after messages;
    /// `grpc-status 0` after messages comes from the cached block.
    fn status_block(&mut self, code: u8, message: &str, trailers_only: bool) {
        self.block_scratch.clear();
        if !trailers_only && code == 0 && message.is_empty() {
            self.ok_trailers_block.write(
                &mut self.encoder,
                &mut self.block_scratch,
                |encoder, block| {
                    encoder.field(b"grpc-status", b"0", Indexing::Incremental, block);
                },
            );
            return;
        }
        self.encoder.begin_block(&mut self.block_scratch);
        if trailers_only {
            self.grpc_head();
            if let Some(accepted) = self.settings.accept_encoding {
                self.encoder.field(
                    b"grpc-accept-encoding",
                    accepted,
                    Indexing::Incremental,
                    &mut self.block_scratch,
                );
            }
        }
        let status = code.to_string();
        self.encoder.field(
            b"grpc-status",
            status.as_bytes(),
            Indexing::Incremental,
            &mut self.block_scratch,
        );
        if !message.is_empty() {
            let encoded = percent_encode(message);
            self.encoder.field(
                b"grpc-message",
                encoded.as_bytes(),
                Indexing::Without,
                &mut self.block_scratch,
            );
        }
    }

    fn grpc_head(&mut self) {
        self.encoder.field(
            b":status",
            b"200",
            Indexing::Incremental,
            &mut self.block_scratch,
        );
        self.encoder.field(
            b"content-type",
            b"application/grpc",
            Indexing::Incremental,
            &mut self.block_scratch,
        );
    }

    /// Sends as much of a stream's pending data as the windows allow, then its trailers.
    fn send_stream(&mut self, stream_id: u32) -> bool {
        let max_frame = self.peer_max_frame;
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return true;
        };
        let StreamState::Sending { data, trailers } = &mut stream.state else {
            if let StreamState::Streaming = stream.state {
                self.drive_stream(stream_id);
                // Blocked again (window or backlog): it is back in `blocked`.
                return !self.blocked.contains(&stream_id);
            }
            return true;
        };
        while !data.is_empty() {
            let allowed = self
                .conn_send_window
                .min(stream.send_window_offset + self.peer_initial_window)
                .min(max_frame as i64);
            if allowed <= 0 {
                if !self.blocked.contains(&stream_id) {
                    self.blocked.push_back(stream_id);
                }
                return false;
            }
            let chunk = data.split_to((allowed as usize).min(data.len()));
            frame::write_data(&mut self.out, stream_id, &chunk, false);
            self.conn_send_window -= chunk.len() as i64;
            stream.send_window_offset -= chunk.len() as i64;
        }
        if *trailers {
            self.status_block(0, "", false);
            self.end_with_headers(stream_id);
        } else {
            self.finish_stream(stream_id);
        }
        true
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

    /// Remembers a stream we reset, so its late frames are ignored.
    fn remember_reset(&mut self, stream_id: u32) {
        if self.reset_ids.insert(stream_id) {
            self.reset_order.push_back(stream_id);
            if self.reset_order.len() > RESET_MEMORY {
                if let Some(oldest) = self.reset_order.pop_front() {
                    self.reset_ids.remove(&oldest);
                }
            }
        }
    }

    /// Resumes streams waiting for window, in order. A stream blocked on its own window goes
    /// to the back and the others still get their turn (a client that stalls one stream stalls
    /// only that stream); the walk stops when the connection's window or the write backlog is
    /// spent.
    fn send_blocked(&mut self) {
        for _ in 0..self.blocked.len() {
            if self.conn_send_window <= 0 {
                return;
            }
            let Some(stream_id) = self.blocked.pop_front() else {
                return;
            };
            self.send_stream(stream_id);
        }
    }

    fn reset(&mut self, stream_id: u32, error: u32) {
        frame::write_rst_stream(&mut self.out, stream_id, error);
        self.drop_stream(stream_id);
        self.blocked.retain(|s| *s != stream_id);
        self.remember_reset(stream_id);
    }

    /// GOAWAY: no new streams; in-flight ones finish.
    fn go_away(&mut self, error: u32, debug: &[u8]) {
        if !self.going_away {
            frame::write_goaway(&mut self.out, self.last_stream, error, debug);
            self.going_away = true;
        }
    }

    /// A connection error: GOAWAY with its code; nothing more is read.
    fn fail(&mut self, error: ConnectionError) {
        self.going_away = false;
        self.go_away(error.code, error.reason.as_bytes());
        self.streams.clear();
        self.streaming.clear();
        self.busy.clear();
        self.blocked.clear();
    }
}

/// `grpc-message` is percent-encoded: printable ASCII except `%` passes, the rest is `%XX`.
pub fn percent_encode(text: &str) -> Cow<'_, str> {
    if text.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'%') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for byte in text.bytes() {
        if (0x20..0x7f).contains(&byte) && byte != b'%' {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    Cow::Owned(out)
}

/// A service that answers every call at once with its own body, for [`feed_server`]; calls
/// whose path starts with `/s` stream, echoing each message as it comes.
struct EchoService;

impl Service for EchoService {
    /// Whether the call streams.
    type Call = bool;
    type Stream = ();

    fn accept(&mut self, head: &RequestHead<'_>, _: Instant) -> Result<bool, Response> {
        if head.path.is_empty() {
            return Err(Response::Http(404));
        }
        Ok(head.path.starts_with(b"/s"))
    }

    fn open_stream(&mut self, streaming: &bool) -> Option<()> {
        streaming.then_some(())
    }

    fn on_message(
        &mut self,
        _: &bool,
        _: &mut (),
        message: Bytes,
        out: &mut StreamOut<'_>,
    ) -> Step {
        out.buffer().extend_from_slice(&message);
        Step::Done
    }

    fn deadline(&self, _: &bool) -> Option<Instant> {
        None
    }

    fn max_message_bytes(&self) -> usize {
        1 << 20
    }

    fn too_large(&self, _: usize) -> Response {
        Response::Status {
            code: 8,
            message: Cow::Borrowed("too large"),
        }
    }

    fn deadline_exceeded(&self) -> Response {
        Response::Status {
            code: 4,
            message: Cow::Borrowed("deadline"),
        }
    }

    fn call(&mut self, _: bool, body: Bytes, _: Reply) -> Dispatch<bool> {
        Dispatch::Respond(Response::Message(body))
    }
}

/// Feeds `data` to a server connection as what a client sent after the connection preface,
/// with a service that answers every call at once, and returns what the connection would
/// write. For fuzzing and robustness tests: whatever the input, the connection must answer
/// with frames or a GOAWAY — never panic, never loop.
#[doc(hidden)]
pub fn feed_server(data: &[u8]) -> Vec<u8> {
    let (replies_tx, _replies_rx) = mpsc::unbounded_channel();
    let mut connection = Connection::new(EchoService, ServerSettings::default(), replies_tx);
    connection.start();
    let mut buf = BytesMut::with_capacity(frame::PREFACE.len() + data.len());
    buf.extend_from_slice(frame::PREFACE);
    buf.extend_from_slice(data);
    if let Err(error) = connection.on_bytes(&mut buf) {
        connection.fail(error);
    }
    connection.out
}
