//! Streaming calls on a server connection: request messages handed to the service one by one
//! as they arrive, any number of replies, trailers when the service ends the call.
//!
//! A streaming call's stream is marked `StreamState::Streaming`; the call itself lives in the
//! connection's `streaming` map, beside the streams, so that a unary stream's state (and the
//! code that drops it on every call) is what it was before streaming existed: the A/B found
//! 74 instructions per unary call in a `StreamState` drop glue grown too big to inline. Its
//! path through a connection's turn:
//!
//! ```text
//! DATA ──► split into whole messages (zero-copy when a message sits in one frame; a message
//!          spread over frames is gathered in `partial`) ──► `pending`
//!      ──► drive: while the service has no message out (`in_service`) and the outbox is below
//!          OUTBOX_LIMIT: next pending message ──► Service::on_message (replies appended to the
//!          outbox, or taken to answer later), then the half-close, then Service::on_room for a
//!          producing call (server streaming)
//!      ──► send: response HEADERS once, DATA from the outbox as the stream window, the
//!          connection window and the write backlog allow (else the stream waits in `blocked`),
//!          trailers once the service has ended the call and the outbox is empty
//! ```
//!
//! Flow control follows consumption, not arrival: a message's bytes go back to the client
//! (stream and connection WINDOW_UPDATE) when the service has taken it. A client that stops
//! reading stops only its own stream: its replies wait in the outbox (bounded by
//! [`OUTBOX_LIMIT`]), its messages wait unconsumed in `pending` (bounded by the stream's receive
//! window, since their window is not returned), and every other stream goes on. Memory stays
//! bounded whatever a stream's length.

use super::service::LateReplies;
use bytes::{Buf, Bytes, BytesMut};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::Instant;

use super::respond::{ReplyHead, StatusPlace};
use super::{Connection, Reply, Response, Service, StreamState, WRITE_BACKLOG_LIMIT};
use crate::frame::{self, code};

/// Reply bytes a streaming call may have waiting to be sent before the engine stops handing it
/// request messages (or asking it to produce): a client that does not read holds at most this
/// much of our memory per stream, plus the unconsumed requests its window allows.
pub const OUTBOX_LIMIT: usize = 32 * 1024;

/// The status codes the engine itself ends streams with.
const INTERNAL: u8 = 13;

/// What a message handed to [`Service::on_message`] came to.
#[derive(Debug)]
pub enum Step {
    /// Handled: replies (if any) are in the outbox. The message's window goes back now.
    Done,
    /// The service took it and answers through [`StreamOut::later`]'s [`Reply`]: a
    /// [`Response::Message`] appends its (framed) messages and lets the stream go on, a
    /// [`Response::Status`] ends the call. The stream's next message waits until then, so
    /// replies keep the order of requests.
    Later,
    /// The service cannot take it now (a full queue): the engine keeps it and offers it again.
    Busy(Bytes),
}

/// A streaming call's replies not yet sent, and how the service ended it.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    /// Framed reply messages, in order.
    data: BytesMut,
    /// The call's status once the service has ended it (sent after `data`).
    end: Option<(u8, Cow<'static, str>)>,
    /// The service wants [`Service::on_room`] calls while there is room (server streaming).
    producing: bool,
}

/// The service's handle on a streaming call's output, during one callback.
pub struct StreamOut<'a> {
    outbox: &'a mut Outbox,
    stream: u32,
    late: &'a mut LateReplies,
}

impl StreamOut<'_> {
    /// Where reply messages go: append framed messages (the 5-byte gRPC prefix, then the
    /// message). They are sent in order, as flow control allows.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.outbox.data
    }

    /// Reply bytes the service may add before the engine stops asking for more.
    pub fn room(&self) -> usize {
        OUTBOX_LIMIT.saturating_sub(self.outbox.data.len())
    }

    /// Ends the call with this status, sent once the replies before it are. Messages the
    /// client sends after this are discarded; a client still sending is asked to stop
    /// (RST_STREAM(NO_ERROR), RFC 9113 §8.1).
    pub fn finish(&mut self, code: u8, message: Cow<'static, str>) {
        if self.outbox.end.is_none() {
            self.outbox.end = Some((code, message));
        }
    }

    /// Whether the engine should call [`Service::on_room`] whenever the outbox has room.
    pub fn set_producing(&mut self, producing: bool) {
        self.outbox.producing = producing;
    }

    /// A way to answer the message being handed over later (see [`Step::Later`]).
    pub fn later(&mut self) -> Reply {
        self.late.reply(self.stream)
    }
}

/// A streaming call's state in its stream.
pub(super) struct StreamingCall<C, T> {
    pub(super) call: C,
    state: T,
    pub(super) deadline: Option<Instant>,
    content_length: Option<u64>,
    /// Request bytes received (padding excluded), for `content-length`.
    received: u64,
    /// The start of a message whose bytes have not all arrived.
    partial: BytesMut,
    /// Whole request messages not yet handed to the service.
    pending: VecDeque<Bytes>,
    /// The service has a message out ([`Step::Later`]) of this many bytes.
    in_service: Option<u32>,
    /// The client's END_STREAM arrived.
    pub(super) half_closed: bool,
    /// ... and the service has been told.
    half_close_delivered: bool,
    /// The response's HEADERS are written.
    head_sent: bool,
    outbox: Outbox,
}

impl<C, T> StreamingCall<C, T> {
    #[inline(never)]
    pub(super) fn new(
        call: C,
        state: T,
        deadline: Option<Instant>,
        content_length: Option<u64>,
    ) -> StreamingCall<C, T> {
        StreamingCall {
            call,
            state,
            deadline,
            content_length,
            received: 0,
            partial: BytesMut::new(),
            pending: VecDeque::new(),
            in_service: None,
            half_closed: false,
            half_close_delivered: false,
            head_sent: false,
            outbox: Outbox::default(),
        }
    }

    /// Whether the service is working on one of its messages (its answer can still come).
    pub(super) fn in_service(&self) -> bool {
        self.in_service.is_some()
    }

    /// Whether the engine can hand the service anything now.
    fn can_deliver(&self) -> bool {
        self.in_service.is_none()
            && self.outbox.end.is_none()
            && self.outbox.data.len() < OUTBOX_LIMIT
            && (!self.pending.is_empty()
                || (self.half_closed && !self.half_close_delivered)
                || self.outbox.producing)
    }
}

/// Moves every whole framed message at the front of `buffer` to `pending` (`split` takes the
/// first `n` bytes off as `Bytes`: a slice of a frame's payload, or of the gathering buffer);
/// returns the declared length of a message over `max` if one starts, leaving the rest.
fn split_messages<B: std::ops::Deref<Target = [u8]>>(
    buffer: &mut B,
    pending: &mut VecDeque<Bytes>,
    max: usize,
    split: impl Fn(&mut B, usize) -> Bytes,
) -> Option<usize> {
    while let Some(declared) = crate::grpc::declared_message_len(buffer) {
        if declared > max {
            return Some(declared);
        }
        if buffer.len() < 5 + declared {
            break;
        }
        pending.push_back(split(buffer, 5 + declared));
    }
    None
}

impl<S: Service> Connection<S> {
    /// DATA for a streaming call that has not half-closed. `payload` is the frame's whole
    /// payload, `range` its data without padding, `size` what it cost in flow control (already
    /// taken from both receive windows).
    #[inline(never)]
    pub(super) fn on_stream_data(
        &mut self,
        stream_id: u32,
        end_stream: bool,
        payload: Bytes,
        range: std::ops::Range<usize>,
        size: u32,
    ) {
        let max_message = self.service.max_message_bytes();
        let (Some(stream), Some(call)) = (
            self.streams.get_mut(&stream_id),
            self.streaming.get_mut(&stream_id),
        ) else {
            return;
        };
        // Padding carries nothing to consume: its window goes back at once. The data is held
        // until the service takes the message it belongs to.
        let data_len = range.len() as u32;
        let padding = size - data_len;
        stream.held += data_len;
        stream.recv_unacked += padding;
        self.conn_recv_unacked += padding;
        call.received += u64::from(data_len);
        if let Some(declared) = call.content_length {
            if call.received > declared || (end_stream && call.received != declared) {
                self.reset(stream_id, code::PROTOCOL_ERROR);
                return;
            }
        }
        let too_large = if call.partial.is_empty() {
            let mut data = payload.slice(range);
            let too_large =
                split_messages(&mut data, &mut call.pending, max_message, Bytes::split_to);
            if too_large.is_none() && !data.is_empty() {
                call.partial.extend_from_slice(&data);
            }
            too_large
        } else {
            call.partial.extend_from_slice(&payload[range]);
            split_messages(&mut call.partial, &mut call.pending, max_message, |b, n| {
                b.split_to(n).freeze()
            })
        };
        if end_stream {
            call.half_closed = true;
        }
        if let Some(declared) = too_large {
            let response = self.service.too_large(&call.call, declared);
            self.abort_stream(stream_id, response);
            return;
        }
        self.drive_stream(stream_id);
    }

    /// An accepted call the service streams: its stream becomes `Streaming` (kept out of line:
    /// `on_header_block` is on every unary call's path, and inlining this would grow it).
    #[inline(never)]
    pub(super) fn open_streaming_call(
        &mut self,
        stream_id: u32,
        stream: super::Stream<S::Call>,
        call: S::Call,
        state: S::Stream,
        deadline: Option<Instant>,
        end_stream: bool,
    ) {
        let streaming = StreamingCall::new(call, state, deadline, self.head.content_length);
        self.streaming.insert(stream_id, streaming);
        self.streams.insert(
            stream_id,
            super::Stream {
                state: StreamState::Streaming,
                ..stream
            },
        );
        if end_stream {
            self.on_stream_trailers(stream_id);
        }
    }

    /// The client's trailers (HEADERS with END_STREAM) on a streaming call: its half-close.
    #[inline(never)]
    pub(super) fn on_stream_trailers(&mut self, stream_id: u32) {
        if let Some(call) = self.streaming.get_mut(&stream_id) {
            if let Some(declared) = call.content_length {
                if declared != call.received {
                    self.reset(stream_id, code::PROTOCOL_ERROR);
                    return;
                }
            }
            call.half_closed = true;
        }
        self.drive_stream(stream_id);
    }

    /// Gives `bytes` of consumed request data back: to the connection's budget, and to the
    /// stream's window (a WINDOW_UPDATE once half of it is consumed).
    fn consume(&mut self, stream_id: u32, bytes: u32) {
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return;
        };
        let bytes = bytes.min(stream.held);
        stream.held -= bytes;
        self.conn_recv_unacked += bytes;
        stream.recv_unacked += bytes;
        let call_open = self
            .streaming
            .get(&stream_id)
            .is_some_and(|call| !call.half_closed);
        if call_open && stream.recv_unacked >= self.settings.initial_window_size / 2 {
            let increment = std::mem::take(&mut stream.recv_unacked);
            stream.recv_window += i64::from(increment);
            frame::write_window_update(&mut self.out, stream_id, increment);
        }
    }

    /// Hands the service what it can take now, and sends what it produced; repeats while
    /// sending made room for more.
    #[inline(never)]
    pub(super) fn drive_stream(&mut self, stream_id: u32) {
        loop {
            self.deliver(stream_id);
            if !self.send_streaming(stream_id) {
                return;
            }
            let again = self
                .streaming
                .get(&stream_id)
                .is_some_and(StreamingCall::can_deliver);
            if !again {
                return;
            }
        }
    }

    /// Hands pending messages, the half-close, and room to produce to the service, while it can
    /// take them (see [`StreamingCall::can_deliver`]).
    fn deliver(&mut self, stream_id: u32) {
        loop {
            let Some(call) = self.streaming.get_mut(&stream_id) else {
                return;
            };
            if !call.can_deliver() {
                return;
            }
            let before = call.outbox.data.len();
            let mut out = StreamOut {
                outbox: &mut call.outbox,
                stream: stream_id,
                late: &mut self.late,
            };
            if let Some(message) = call.pending.pop_front() {
                let len = message.len() as u32;
                match self
                    .service
                    .on_message(&call.call, &mut call.state, message, &mut out)
                {
                    Step::Done => self.consume(stream_id, len),
                    Step::Later => call.in_service = Some(len),
                    Step::Busy(message) => {
                        call.pending.push_front(message);
                        if !self.streams_busy.contains(&stream_id) {
                            self.streams_busy.push(stream_id);
                        }
                        return;
                    }
                }
            } else if call.half_closed && !call.half_close_delivered {
                call.half_close_delivered = true;
                if !call.partial.is_empty() {
                    let response = Response::Status {
                        code: INTERNAL,
                        message: Cow::Borrowed(
                            "the request stream ended inside a message (truncated gRPC message)",
                        ),
                    };
                    self.abort_stream(stream_id, response);
                    return;
                }
                self.service
                    .on_half_close(&call.call, &mut call.state, &mut out);
            } else {
                self.service.on_room(&call.call, &mut call.state, &mut out);
                if call.outbox.data.len() == before && call.outbox.end.is_none() {
                    // Nothing produced: asking again would loop.
                    call.outbox.producing = false;
                }
            }
        }
    }

    /// The answer to a message the service took ([`Step::Later`]), or an error it ended with.
    #[inline(never)]
    pub(super) fn on_stream_reply(&mut self, stream_id: u32, response: Response) {
        let Some(call) = self.streaming.get_mut(&stream_id) else {
            return;
        };
        let taken = call.in_service.take().unwrap_or(0);
        match response {
            Response::Message(data) | Response::Gzip(data) | Response::Web(data) => {
                call.outbox.data.extend_from_slice(&data);
            }
            Response::Status { code, message } | Response::WebStatus { code, message } => {
                call.outbox.end.get_or_insert((code, message));
            }
            Response::Http(_) => {
                call.outbox.end.get_or_insert((
                    INTERNAL,
                    Cow::Borrowed("the service answered a streaming call with a bare HTTP status"),
                ));
            }
        }
        self.consume(stream_id, taken);
        self.drive_stream(stream_id);
    }

    /// Ends a streaming call at once with `response`'s status (a transport-level failure:
    /// an oversized or truncated message, a deadline): replies not yet sent are dropped.
    #[inline(never)]
    pub(super) fn abort_stream(&mut self, stream_id: u32, response: Response) {
        let Some(call) = self.streaming.get_mut(&stream_id) else {
            return;
        };
        let (code, message) = match response {
            Response::Status { code, message } | Response::WebStatus { code, message } => {
                (code, message)
            }
            _ => (INTERNAL, Cow::Borrowed("stream failed")),
        };
        call.outbox.data.clear();
        call.pending.clear();
        call.outbox.producing = false;
        call.outbox.end = Some((code, message));
        self.send_streaming(stream_id);
    }

    /// Writes what the stream may send now: HEADERS once, DATA as windows and the write backlog
    /// allow, then the trailers once the call has ended and its replies are out. Returns whether
    /// the stream is still open and sent everything it had (so the service may produce more).
    fn send_streaming(&mut self, stream_id: u32) -> bool {
        // The response's HEADERS go with its first reply (a call ended before any reply gets
        // a trailers-only response instead).
        let needs_head = match self.streaming.get_mut(&stream_id) {
            Some(call) => {
                let needs_head = !call.head_sent && !call.outbox.data.is_empty();
                call.head_sent |= needs_head;
                needs_head
            }
            None => return false,
        };
        if needs_head {
            self.write_response_head(stream_id, ReplyHead::Grpc);
        }
        let max_frame = self.peer_max_frame;
        let (Some(stream), Some(call)) = (
            self.streams.get_mut(&stream_id),
            self.streaming.get_mut(&stream_id),
        ) else {
            return false;
        };
        while !call.outbox.data.is_empty() {
            let backlog_room = WRITE_BACKLOG_LIMIT as i64 - self.out.len() as i64;
            let allowed = (crate::flow::sendable(
                self.conn_send_window,
                stream.send_window_offset + self.peer_initial_window,
                max_frame,
            ) as i64)
                .min(backlog_room);
            if allowed <= 0 {
                if !self.blocked.contains(&stream_id) {
                    self.blocked.push_back(stream_id);
                }
                return false;
            }
            let n = (allowed as usize).min(call.outbox.data.len());
            frame::write_data(&mut self.out, stream_id, &call.outbox.data[..n], false);
            call.outbox.data.advance(n);
            self.conn_send_window.spend(n);
            stream.send_window_offset -= n as i64;
        }
        let Some((status, message)) = call.outbox.end.take() else {
            return true;
        };
        let early = !call.half_closed;
        let trailers_only = !call.head_sent;
        // The call is over; its stream lives on (Flushing) until the trailers are written.
        self.streaming.remove(&stream_id);
        let place = match trailers_only {
            true => StatusPlace::TrailersOnly,
            false => StatusPlace::Trailers,
        };
        self.status_block(status, &message, place);
        self.end_with_headers(stream_id);
        if early {
            // The client is still sending: ask it to stop (§8.1).
            self.reset(stream_id, code::NO_ERROR);
        }
        false
    }

    /// Whether any streaming call's service work can still produce bytes.
    #[inline(never)]
    pub(super) fn streaming_in_service(&self) -> bool {
        self.streaming.values().any(StreamingCall::in_service)
    }

    /// Offers streams whose message met a busy service again.
    #[inline(never)]
    pub(super) fn retry_busy_streams(&mut self) {
        for stream_id in std::mem::take(&mut self.streams_busy) {
            self.drive_stream(stream_id);
        }
    }
}
