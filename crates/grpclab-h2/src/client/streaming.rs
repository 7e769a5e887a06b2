//! Streaming calls on the connection loop: a call's messages by its [`StreamSpec`] (ping-pong:
//! the next once the previous reply is whole; `interval` apart; until `count` or `duration`),
//! written as windows and the write buffer allow, replies counted whole across DATA frames by
//! [`MessageCounter`] and released at once.

use super::stamp::StampScanner;
use super::*;

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
    /// Server streams (ghz's `--stream-call-count`): the call ends once this many whole
    /// replies have arrived — the client cancels the stream (RST_STREAM CANCEL) and the
    /// call counts as OK, with exactly this many replies (any behind them in the same read
    /// are not counted). `None`: the server ends the stream.
    pub receive_limit: Option<u64>,
    /// Server streams (ghz's `--stream-call-duration`): the client cancels each call this long
    /// after it started (RST_STREAM CANCEL), and at once when the run stops; the call counts
    /// as OK with the replies whole by then. `None`: the server ends the stream.
    pub receive_for: Option<Duration>,
    /// The reply field carrying the time the server produced each reply: read from every
    /// reply and handed to [`CallSource::message_stamps`] as it arrives.
    pub stamp: Option<StampField>,
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
    pub(super) fn message<S: CallSource>(
        &self,
        source: &mut S,
        own: &[Bytes],
        index: usize,
    ) -> Bytes {
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
    pub(super) fn ends_with_next(&self, sent: u64, ending: bool) -> bool {
        ending || (!self.ping_pong && sent + 1 >= self.count as u64)
    }

    /// Whether a call that started at `started` and has sent `sent` messages sends another.
    pub(super) fn more(&self, sent: u64, started: Instant) -> bool {
        (sent as usize) < self.count && self.duration.is_none_or(|limit| started.elapsed() < limit)
    }
}

/// Counts whole gRPC messages (5-byte prefix, then the length it announces) in a byte stream
/// that arrives in arbitrary chunks, keeping none of it — only, when asked
/// ([`MessageCounter::stamped`]), each message's stamp.
#[derive(Debug, Default, Clone)]
pub struct MessageCounter {
    prefix: [u8; 5],
    prefix_len: usize,
    /// Bytes of the current message's body still to come (valid once the prefix is whole).
    remaining: usize,
    /// The largest length a prefix has announced.
    largest: usize,
    /// The current message's length (valid once the prefix is whole).
    body_len: usize,
    /// Reads each message's stamp; the stamps of the messages the last `feed` completed.
    stamps: Option<Box<(StampScanner, Vec<Option<u64>>)>>,
}

impl MessageCounter {
    /// A counter that also reads `field` from every message (see [`MessageCounter::stamps`]).
    pub fn stamped(field: StampField) -> MessageCounter {
        MessageCounter {
            stamps: Some(Box::new((StampScanner::new(field), Vec::new()))),
            ..MessageCounter::default()
        }
    }

    /// A counter for `spec`'s replies: stamped when it names a stamp field.
    pub fn for_spec(spec: Option<&StreamSpec>) -> MessageCounter {
        match spec.and_then(|spec| spec.stamp) {
            Some(field) => MessageCounter::stamped(field),
            None => MessageCounter::default(),
        }
    }

    /// The stamps of the messages the last [`MessageCounter::feed`] completed, in order
    /// (`None` for a message without one); `None` for a counter that reads none.
    pub fn stamps(&self) -> Option<&[Option<u64>]> {
        self.stamps.as_ref().map(|stamps| stamps.1.as_slice())
    }

    /// Feeds a chunk; returns how many messages it completed.
    pub fn feed(&mut self, data: &[u8]) -> u64 {
        // Two instances of one loop: a counter without stamps pays nothing for them.
        if self.stamps.is_some() {
            self.feed_stamped(data)
        } else {
            self.feed_with::<false>(data)
        }
    }

    /// [`MessageCounter::feed`] reading stamps. Out of line: the stamped loop stays out of
    /// the plain one's caller.
    #[inline(never)]
    fn feed_stamped(&mut self, data: &[u8]) -> u64 {
        if let Some(stamps) = &mut self.stamps {
            stamps.1.clear();
        }
        self.feed_with::<true>(data)
    }

    /// The counting loop; `STAMPED`: also scan each body for its stamp.
    #[inline(always)]
    fn feed_with<const STAMPED: bool>(&mut self, mut data: &[u8]) -> u64 {
        let mut completed = 0;
        while !data.is_empty() {
            if self.prefix_len < 5 {
                let take = (5 - self.prefix_len).min(data.len());
                self.prefix[self.prefix_len..self.prefix_len + take].copy_from_slice(&data[..take]);
                self.prefix_len += take;
                data = &data[take..];
                if let Some(length) =
                    crate::grpc::declared_message_len(&self.prefix[..self.prefix_len])
                {
                    self.remaining = length;
                    self.largest = self.largest.max(length);
                    if STAMPED {
                        self.body_len = length;
                    }
                    if length == 0 {
                        completed += 1;
                        self.prefix_len = 0;
                        if STAMPED {
                            self.message_done();
                        }
                    }
                }
                continue;
            }
            let take = self.remaining.min(data.len());
            if let (true, Some(stamps)) = (STAMPED, &mut self.stamps) {
                if take == self.remaining && self.remaining == self.body_len {
                    stamps.0.whole(&data[..take]);
                } else {
                    stamps.0.feed(&data[..take]);
                }
            }
            self.remaining -= take;
            data = &data[take..];
            if self.remaining == 0 {
                completed += 1;
                self.prefix_len = 0;
                if STAMPED {
                    self.message_done();
                }
            }
        }
        completed
    }

    /// A message is whole: its stamp is read.
    fn message_done(&mut self) {
        if let Some(stamps) = &mut self.stamps {
            let stamp = stamps.0.finish();
            stamps.1.push(stamp);
        }
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

impl<S: CallSource> Connection<'_, S> {
    /// A streaming call's message is wholly written: count it, and plan what follows (wait
    /// for its reply, the next message now or after the interval, or the half-close).
    pub(super) fn message_written(&mut self, stream_id: u32) {
        let Some(spec) = &self.template.stream else {
            return;
        };
        let Some(call) = self.calls.get_mut(stream_id) else {
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
    pub(super) fn plan_next(
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
    pub(super) fn end_streams(&mut self) {
        // Set for unary runs too: it also says the stop was seen (the loop's select arm).
        self.streams_ending = true;
        if self
            .template
            .stream
            .as_ref()
            .is_some_and(|spec| spec.receive_for.is_some())
        {
            // Server streams bounded by time end now, with what they have.
            let ids: Vec<u32> = self.calls.ids();
            for id in ids {
                self.cancel_in_time(id);
            }
            return;
        }
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
                frame::write_data(&mut self.out, id, &[], true);
                stream.half_closed = true;
            }
        }
    }

    /// A server stream's time is up ([`StreamSpec::receive_for`]) or the run stopped: the
    /// client cancels it, and the call is a success with the replies whole so far.
    fn cancel_in_time(&mut self, stream_id: u32) {
        frame::write_rst_stream(&mut self.out, stream_id, code::CANCEL);
        self.finish(stream_id, CallEnd::Ok(None));
    }

    /// Writes the next message of every streaming call whose plan allows one now, while the
    /// write buffer stays under `budget` (the rest go on a later turn).
    pub(super) fn pump_streams(&mut self, budget: usize) {
        let now = self.stream_wake.map(|_| Instant::now());
        let mut due = std::mem::take(&mut self.stream_scratch);
        due.clear();
        let mut wake: Option<Instant> = None;
        let mut over: Vec<u32> = Vec::new();
        for (id, call) in self.calls.iter_mut() {
            let Some(stream) = call.stream.as_mut() else {
                continue;
            };
            if let (Some(at), Some(now)) = (stream.cancel_at, now) {
                if at <= now {
                    over.push(id);
                    continue;
                }
                wake = Some(wake.map_or(at, |earlier| earlier.min(at)));
            }
            if let (Some(at), Some(now)) = (stream.next_at, now) {
                if at <= now {
                    stream.next_at = None;
                    stream.ready = true;
                } else {
                    wake = Some(wake.map_or(at, |earlier| earlier.min(at)));
                }
            }
            if stream.ready && call.pending.is_empty() && !stream.half_closed {
                due.push(id);
            }
        }
        self.stream_wake = wake;
        for stream_id in over {
            self.cancel_in_time(stream_id);
        }
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
                let Some(call) = self.calls.get_mut(stream_id) else {
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

    #[test]
    fn stamps_come_with_the_messages_each_feed_completes() {
        // Three framed messages: stamped 11, unstamped (empty), stamped 33 behind a payload.
        let field = StampField {
            number: 3,
            encoding: super::super::stamp::StampEncoding::Fixed64,
        };
        let stamped = |stamp: u64, payload: &[u8]| {
            let mut body = vec![(1 << 3) | 2, payload.len() as u8];
            body.extend_from_slice(payload);
            body.push((3 << 3) | 1);
            body.extend_from_slice(&stamp.to_le_bytes());
            body
        };
        let mut stream = Vec::new();
        for body in [stamped(11, b""), Vec::new(), stamped(33, &[9; 100])] {
            stream.push(0u8);
            stream.extend_from_slice(&(body.len() as u32).to_be_bytes());
            stream.extend_from_slice(&body);
        }
        for chunk in [1, 4, 5, 16, stream.len()] {
            let mut counter = MessageCounter::stamped(field);
            let mut stamps = Vec::new();
            for piece in stream.chunks(chunk) {
                let whole = counter.feed(piece);
                let read = counter.stamps().unwrap_or_default();
                assert_eq!(read.len() as u64, whole, "chunks of {chunk}");
                stamps.extend_from_slice(read);
            }
            assert_eq!(stamps, [Some(11), None, Some(33)], "chunks of {chunk}");
        }
        assert_eq!(MessageCounter::default().stamps(), None);
    }
}
