//! What a client connection asks of its caller, and what it reports: the [`CallSource`] that
//! decides each next call and hears of each end, the [`RequestTemplate`] every call shares,
//! and how calls and connections end.

use super::*;

/// What the next call is, as the [`CallSource`] decides.
#[derive(Debug)]
pub enum NextCall {
    /// Send this framed request now; `token` comes back with the completion.
    Send {
        /// The framed request message.
        body: Bytes,
        /// The caller's reference for this call (e.g. its intended send time).
        token: CallToken,
        /// Headers of this call only, after the template's (see [`CallHeaders`]). Boxed and
        /// optional so that a call without any moves one word, not a vector's three.
        headers: Option<Box<CallHeaders>>,
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

/// Headers of one call only (name, value), such as metadata rendered per call from a
/// template: written after the template's headers as literals without indexing. Why: the
/// template's block stays cached (nothing in it changes the HPACK table) and values that
/// differ call after call never fill the table and evict the ones that repeat. Most calls
/// have none.
pub type CallHeaders = Vec<(Bytes, Bytes)>;

/// The caller's reference for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallToken {
    /// When the call was meant to go out (open loop), if scheduled.
    pub intended: Option<Instant>,
    /// Whether the call counts (false during warmup).
    pub measured: bool,
    /// Which of [`RequestTemplate::methods`] the call invokes (0 with one method).
    pub method: u32,
    /// The caller's own number for a call that belongs to something larger (a flow run's
    /// place among the caller's, plus one); 0 for a lone call. The connection only carries it.
    pub flow: u32,
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
    /// The server's GOAWAY (with this error code) came with a last-stream-id below the
    /// stream: it was never processed (RFC 9113 §6.8), so it is safe to retry.
    Unprocessed(u32),
    /// The response broke the gRPC protocol (no status, no reply message).
    Malformed(&'static str),
    /// The client's deadline passed first.
    DeadlineExceeded,
}

/// The clock of one turn of starting calls: read once, when first asked, and the same for
/// every call the turn starts (their send time, and a closed loop's check of the run's end).
/// Why: a clock read is ~50 instructions, and a turn starts many calls at saturation.
#[derive(Debug, Default)]
pub struct TurnClock {
    now: Option<Instant>,
}

impl TurnClock {
    /// A clock not read yet.
    pub fn new() -> TurnClock {
        TurnClock::default()
    }

    /// The turn's instant: the clock read at the first call of this method.
    #[inline]
    pub fn now(&mut self) -> Instant {
        *self.now.get_or_insert_with(Instant::now)
    }
}

/// The load engine's side of a connection: where calls come from and results go.
pub trait CallSource {
    /// The next call to start; scheduled calls are released up to `released_until`;
    /// `clock` is this turn's time, `in_flight` calls are started and not ended, and
    /// `free_slots` more could start now (a source may take that many scheduled calls at
    /// once, so a connection's calls go out together).
    fn next_call(
        &mut self,
        released_until: Instant,
        clock: &mut TurnClock,
        in_flight: usize,
        free_slots: usize,
    ) -> NextCall;
    /// A call ended; `sent` is when its first frame was queued.
    fn completed(&mut self, token: CallToken, sent: Instant, end: CallEnd, now: Instant);
    /// Whether this call's reply must be kept (validation, a flow step that reads it);
    /// otherwise only its length is counted. Asked once per call, as it starts.
    fn keeps_reply(&self, token: &CallToken) -> bool;
    /// Whether this call, sent as a unary one (one request), reads a server stream, which
    /// may end OK with no reply message at all; a unary call may not. Asked only when a call
    /// ends OK with none.
    fn may_end_without_reply(&self, token: &CallToken) -> bool {
        let _ = token;
        false
    }
    /// A ping-pong round trip of a streaming call: a reply, against its request's write.
    fn round_trip(&mut self, token: CallToken, latency: Duration) {
        let _ = (token, latency);
    }
    /// A streaming call that is not ping-pong completed replies in one read: the first of
    /// them `gap` after the call's previous reply (`None`: it is the call's first), and
    /// `together` more right behind it (0 apart). The reply rate, as the client sees it; one
    /// report per read, not per reply, so a stream of small replies pays once per read.
    fn message_gaps(&mut self, token: CallToken, gap: Option<Duration>, together: u64) {
        let _ = (token, gap, together);
    }
    /// Replies of a streaming call completed by one read, with the stamp each carried
    /// ([`StreamSpec::stamp`]; `None`: it had none). Told at once, so the source can read its
    /// clock as they arrive.
    fn message_stamps(&mut self, token: CallToken, stamps: &[Option<u64>]) {
        let _ = (token, stamps);
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

    /// The kept headers and trailers of a call that keeps its reply (see
    /// [`RequestTemplate::kept_headers`]), told just before it completes, when it had any.
    fn reply_headers(&mut self, token: CallToken, headers: &[ReplyHeader]) {
        let _ = (token, headers);
    }

    /// What the server's frames have allowed so far (see [`PeerWindows`]), told when its
    /// SETTINGS arrive and when the connection window it leaves open reaches a new high.
    fn peer_windows(&mut self, windows: &super::PeerWindows) {
        let _ = windows;
    }

    /// A stretch in which requests waited for the server's window has ended (no call waits
    /// any more, or the connection closes): its waits (see [`super::WindowWaits`]).
    fn window_waited(&mut self, waits: &super::WindowWaits) {
        let _ = waits;
    }

    /// A group of calls the source has given up on (their [`CallToken::flow`]; a hedged
    /// call's attempts, once one has won): asked after each call of a group (`flow` not 0)
    /// completes, until `None`. The connection resets the group's calls still in flight
    /// (RST_STREAM CANCEL) and drops those not yet written, and reports none of them.
    fn given_up(&mut self) -> Option<u32> {
        None
    }

    /// Whether [`CallSource::given_up`] has a group to give: asked after each grouped
    /// call, so it should be one load.
    fn gives_up(&self) -> bool {
        false
    }

    /// A streaming call was still in flight when the connection was dropped (the caller gave
    /// up on it, e.g. at its drain limit): the messages it wrote and received whole so far.
    /// Its end is the caller's to record.
    fn abandoned(&mut self, token: CallToken, sent: u64, received: u64) {
        let _ = (token, sent, received);
    }
}

/// What every request carries, set once per connection.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    /// `:authority`
    pub authority: String,
    /// The methods calls invoke (at least one; a call names its own by
    /// [`CallToken::method`]). Each has its own cached header block, so a mix of methods
    /// costs no more per call than one method once every path is in the HPACK table.
    pub methods: Vec<MethodHead>,
    /// Extra headers of every call (e.g. `grpc-timeout`, metadata): indexed, since they
    /// repeat.
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
    /// Response header and trailer names (lowercase) whose values a call that keeps its
    /// reply ([`CallSource::keeps_reply`]) hands to [`CallSource::reply_headers`]; empty for
    /// most runs, which then decode no header they do not need.
    pub kept_headers: Vec<Bytes>,
}

/// A response header or trailer a call kept (see [`RequestTemplate::kept_headers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyHeader {
    /// Whether it came in the trailers (the block that ended the stream) rather than the
    /// response headers.
    pub trailer: bool,
    /// Its name, lowercase.
    pub name: Bytes,
    /// Its value as sent.
    pub value: Bytes,
}

/// What one method's requests carry besides the headers every call has.
#[derive(Debug, Clone)]
pub struct MethodHead {
    /// `:path`, `/package.Service/Method`.
    pub path: String,
    /// Headers of this method's calls only (e.g. a workload's per-method metadata), after
    /// [`RequestTemplate::headers`]: indexed, since they repeat.
    pub headers: Vec<(String, String)>,
}

impl MethodHead {
    /// A method with no headers of its own.
    pub fn path(path: impl Into<String>) -> MethodHead {
        MethodHead {
            path: path.into(),
            headers: Vec::new(),
        }
    }
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
    /// The socket failed or closed before the server's SETTINGS (its connection preface)
    /// arrived: the server took the connection and would not serve it. A client backs off
    /// before the next attempt, as after a failed connect.
    #[error("the server closed the connection before its HTTP/2 SETTINGS ({0}): a connection limit (such as lab's --max-connections), or not a gRPC server")]
    ClosedBeforeSettings(String),
    /// The server sent no SETTINGS frame (its connection preface) in time.
    #[error("the server sent no HTTP/2 SETTINGS within {0:?}: is it an HTTP/2 (gRPC) server, and not a TLS port?")]
    NoPreface(Duration),
    /// Nothing arrived within the keepalive time after our PING (`--keepalive`).
    #[error("keepalive: nothing from the server within {0:?} of a PING (--keepalive); the connection is taken as dead")]
    KeepaliveTimeout(Duration),
}

impl ConnectionEnd {
    /// Whether the server never began to serve the connection (no SETTINGS from it): the
    /// next attempt should wait, as after a failed connect, not follow at once.
    pub fn before_settings(&self) -> bool {
        matches!(
            self,
            ConnectionEnd::ClosedBeforeSettings(_) | ConnectionEnd::NoPreface(_)
        )
    }
}
