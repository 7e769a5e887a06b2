//! What a server connection asks of the application, and its settings: the [`Service`] trait,
//! the request head it sees, the responses it gives, and [`ServerSettings`].

use super::*;

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
pub(super) const KEEPALIVE_PING: &[u8; 8] = b"grpclabK";

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
    /// A gRPC-Web reply: `200`, `content-type: application/grpc-web+proto`, and this whole
    /// body — the framed message, then the trailer frame (flag 0x80) with `grpc-status` —
    /// in DATA, the last of which ends the stream: gRPC-Web has no HTTP trailers.
    Web(Bytes),
    /// A gRPC-Web error: as [`Response::Status`] (trailers-only), with gRPC-Web's
    /// content type.
    WebStatus {
        /// `grpc-status`
        code: u8,
        /// `grpc-message` (percent-encoded on the wire)
        message: Cow<'static, str>,
    },
}

/// Sends a response later, from any thread.
#[derive(Debug)]
pub struct Reply {
    pub(super) stream: u32,
    pub(super) replies: mpsc::UnboundedSender<(u32, Response)>,
}

/// Where answers given later (by a task, or another thread) come back to their connection: a
/// channel made at the first such answer. A connection whose calls are all answered at once
/// holds none: the channel's first block alone is 1.5 KiB, a fifth of what a held connection
/// cost before it was made lazily.
#[derive(Debug, Default)]
pub(super) struct LateReplies {
    sender: Option<mpsc::UnboundedSender<(u32, Response)>>,
    /// The receiving end, from when the channel is made until the connection loop takes it.
    receiver: Option<mpsc::UnboundedReceiver<(u32, Response)>>,
}

impl LateReplies {
    /// A [`Reply`] for `stream`, the channel made if this is the first.
    pub(super) fn reply(&mut self, stream: u32) -> Reply {
        if self.sender.is_none() {
            let (sender, receiver) = mpsc::unbounded_channel();
            self.sender = Some(sender);
            self.receiver = Some(receiver);
        }
        Reply {
            stream,
            replies: self
                .sender
                .clone()
                .unwrap_or_else(|| unreachable!("made above")),
        }
    }

    /// The receiving end, once, after the channel is made.
    pub(super) fn take_receiver(&mut self) -> Option<mpsc::UnboundedReceiver<(u32, Response)>> {
        self.receiver.take()
    }
}

/// How a unary call is answered: at once with a message written in place
/// ([`CallReply::message_buffer`] and [`Dispatch::Written`]), or later through a [`Reply`]
/// made only if the service keeps it ([`CallReply::keep`]); a call answered at once costs no
/// channel.
pub struct CallReply<'a> {
    pub(super) stream: u32,
    pub(super) late: &'a mut LateReplies,
    pub(super) message: &'a mut BytesMut,
}

impl CallReply<'_> {
    /// The service answers later: a [`Reply`] to send the response with.
    pub fn keep(self) -> Reply {
        self.late.reply(self.stream)
    }

    /// An empty buffer, the connection's own, for the call's framed reply message (the 5-byte
    /// prefix and the message); return [`Dispatch::Written`] once it is written. The
    /// connection copies it straight after the response's HEADERS and keeps the buffer for
    /// the next call: the message never becomes a `Bytes` of its own (no split, no reference
    /// count, no thread-local buffer).
    pub fn message_buffer(&mut self) -> &mut BytesMut {
        self.message
    }
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
    /// Answer now with the framed message written into [`CallReply::message_buffer`]: the
    /// same response as [`Response::Message`] of those bytes.
    Written,
    /// Answer now with a gRPC-Web body (the framed message and the trailer frame) written
    /// into [`CallReply::message_buffer`]: the same response as [`Response::Web`] of those
    /// bytes.
    WrittenWeb,
    /// The service keeps the [`Reply`] and answers later.
    Later,
    /// The service cannot take it now (a full queue): the connection keeps the call and
    /// offers it again on a later turn.
    Busy(C, Bytes),
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
    /// The answer to `call`'s message declared larger than [`Service::max_message_bytes`].
    fn too_large(&self, call: &Self::Call, declared: usize) -> Response;
    /// The answer to `call`, whose deadline passed before its body arrived.
    fn deadline_exceeded(&self, call: &Self::Call) -> Response;
    /// The body is complete (one framed message, or whatever the client sent). `now` is when
    /// the bytes that completed it were read (or when a busy call is offered again): the
    /// clock for a deadline check, read once per turn rather than once per call.
    fn call(
        &mut self,
        call: Self::Call,
        body: Bytes,
        reply: CallReply<'_>,
        now: Instant,
    ) -> Dispatch<Self::Call>;

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
