//! Starting calls: taking calls from the source while slots, stream ids, the server's
//! stream limit and the write buffer allow, and writing each request's HEADERS and DATA as
//! the stream and connection windows allow (requests blocked on a window wait apart).

use super::*;

impl<S: CallSource> Connection<'_, S> {
    /// Starts calls while slots are free and the source has some (scheduled calls only up to
    /// `released_until`, see the field), and writes the started calls the connection can
    /// take: after the server's SETTINGS, within its stream limit, and while the bytes not
    /// yet written (`pending_out` before this turn) stay under [`OUT_HIGH_WATER`]. Calls that
    /// cannot be written wait in `unsent`, oldest first; in the steady state none do, and a
    /// new call goes straight to the write buffer.
    pub(super) fn start_calls(&mut self, released_until: Instant, pending_out: usize) {
        let budget = OUT_HIGH_WATER.saturating_sub(pending_out) + self.out.len();
        self.start_new_calls(released_until, budget);
        if self.template.stream.is_some() {
            // After the new calls: a call just started may be ready for its next message.
            self.pump_streams(budget);
        }
    }

    /// The new calls of [`Connection::start_calls`], within `budget` bytes of write buffer.
    pub(super) fn start_new_calls(&mut self, released_until: Instant, budget: usize) {
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
        let mut clock = TurnClock::new();
        while !self.stopped && self.calls.len() + self.unsent.len() < limit {
            if self.wait_until.is_some_and(|at| at > released_until) {
                break;
            }
            self.wait_until = None;
            self.busy_until = None;
            let in_flight = self.calls.len() + self.unsent.len();
            match self
                .source
                .next_call(released_until, &mut clock, in_flight, limit - in_flight)
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
                NextCall::Send {
                    body,
                    token,
                    headers,
                } => {
                    let sent = clock.now();
                    let call = UnsentCall {
                        token,
                        sent,
                        deadline: self.template.timeout.map(|t| sent + t),
                        body,
                        headers,
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
    pub(super) fn may_write(&self, budget: usize) -> bool {
        self.calls.len() < self.peer_max_streams && self.out.len() < budget
    }

    pub(super) fn send_request(&mut self, unsent: UnsentCall) {
        let UnsentCall {
            token,
            sent,
            deadline: _,
            body,
            headers,
        } = unsent;
        let stream = self.next_stream;
        self.next_stream += 2;
        // A token naming no method (a source's bug) sends the first rather than panic.
        let method = (token.method as usize).min(self.template.methods.len().saturating_sub(1));
        let cached = match &headers {
            None => self.request_blocks[method].cached(&self.encoder),
            Some(_) => None,
        };
        if let Some(block) = cached {
            // Every call's path: the method's cached block straight into the HEADERS frame.
            frame::write_headers(&mut self.out, stream, block, false, self.peer_max_frame);
        } else {
            self.write_request_head(stream, method, headers.as_deref());
        }
        if let Some(own) = headers {
            discard_call_headers(own);
        }
        let keep = self.source.keeps_reply(&token);
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
                    counter: MessageCounter::for_spec(self.template.stream.as_ref()),
                    received: 0,
                    last_reply: None,
                    cancel_at: spec.receive_for.map(|limit| sent + limit),
                };
                if let Some(at) = state.cancel_at {
                    self.stream_wake = Some(self.stream_wake.map_or(at, |wake| wake.min(at)));
                }
                let last = spec.ends_with_next(0, self.streams_ending);
                (first, Some(Box::new(state)), last)
            }
        };
        // `stream` was just taken from `next_stream`, which only grows by 2 and is never
        // reused on a connection: no call held has this id.
        self.calls.insert(
            stream,
            Call {
                token,
                sent,
                end_with_pending,
                stream: streaming,
                pending: body,
                http_status: 0,
                grpc_status: None,
                received: 0,
                headers_seen: false,
                recv_unacked: 0,
                send_window: crate::flow::Window::new(self.peer_initial_window as u32),
            },
        );
        if keep {
            self.replies.insert(stream, BytesMut::new());
        }
        if self.send_pending(stream) {
            self.message_written(stream);
        }
    }

    /// A request's HEADERS when its method's block is not cached (the first call, a changed
    /// HPACK table) or the call has headers of its own: encoded into `block`, then framed.
    fn write_request_head(&mut self, stream: u32, method: usize, headers: Option<&CallHeaders>) {
        self.block.clear();
        let template = &self.template;
        let head = &template.methods[method];
        self.request_blocks[method].write(&mut self.encoder, &mut self.block, |encoder, block| {
            encoder.field(b":method", b"POST", Indexing::Incremental, block);
            encoder.field(b":scheme", b"http", Indexing::Incremental, block);
            encoder.field(b":path", head.path.as_bytes(), Indexing::Incremental, block);
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
            for (name, value) in template.headers.iter().chain(&head.headers) {
                encoder.field(
                    name.as_bytes(),
                    value.as_bytes(),
                    Indexing::Incremental,
                    block,
                );
            }
        });
        if let Some(headers) = headers {
            write_call_headers(headers, &mut self.block);
        }
        frame::write_headers(
            &mut self.out,
            stream,
            &self.block,
            false,
            self.peer_max_frame,
        );
    }

    /// Sends as much of a request's body (a streaming call: its current message) as the
    /// windows allow; the last frame ends the stream when `end_with_pending` says so. Returns
    /// whether it is all written.
    pub(super) fn send_pending(&mut self, stream: u32) -> bool {
        let max_frame = self.peer_max_frame;
        let Some(call) = self.calls.get_mut(stream) else {
            return true;
        };
        loop {
            let allowed = crate::flow::sendable(
                self.conn_send_window,
                call.send_window.available(),
                max_frame,
            );
            if allowed == 0 && !call.pending.is_empty() {
                self.wait_for_window(stream);
                return false;
            }
            let take = allowed.min(call.pending.len());
            let chunk = call.pending.split_to(take);
            let last = call.pending.is_empty();
            frame::write_data(&mut self.out, stream, &chunk, last && call.end_with_pending);
            self.conn_send_window.spend(chunk.len());
            call.send_window.spend(chunk.len());
            if last {
                return true;
            }
        }
    }

    pub(super) fn send_blocked(&mut self) {
        // The oldest waits at the front until its body is all written: still blocked, it
        // stays there (and is not counted as waiting again).
        while let Some(&stream) = self.blocked.front() {
            if !self.send_pending(stream) {
                break;
            }
            self.blocked.pop_front();
            self.message_written(stream);
        }
        self.end_window_wait();
    }

    /// A call whose body must wait for window: queued (once) and counted, out of the way of
    /// the calls the windows let through.
    #[cold]
    #[inline(never)]
    fn wait_for_window(&mut self, stream: u32) {
        if self.blocked.contains(&stream) {
            return;
        }
        if self.blocked_since.is_none() {
            self.blocked_since = Some(Instant::now());
        }
        if self.conn_send_window.available() <= 0 {
            self.window_waits.connection += 1;
        } else {
            self.window_waits.stream += 1;
        }
        self.blocked.push_back(stream);
    }

    /// A call that ended (or was dropped) while its body waited for window: out of the
    /// queue, and the stretch of waits ends if it was the last.
    #[cold]
    #[inline(never)]
    pub(super) fn stop_waiting(&mut self, stream: u32) {
        self.blocked.retain(|s| *s != stream);
        self.end_window_wait();
    }

    /// Once no call waits for window: the stretch's waits, told to the source (see
    /// [`CallSource::window_waited`]).
    #[inline]
    pub(super) fn end_window_wait(&mut self) {
        if self.blocked_since.is_some() && self.blocked.is_empty() {
            self.report_window_wait();
        }
    }

    #[cold]
    #[inline(never)]
    fn report_window_wait(&mut self) {
        if let Some(since) = self.blocked_since.take() {
            self.window_waits.waited += since.elapsed();
            let waits = std::mem::take(&mut self.window_waits);
            self.source.window_waited(&waits);
        }
    }
}

/// A call's own headers, written: freed out of line, so that the common call without any
/// does not go through the drop code of an optional box (~14 instructions a call when the
/// compiler leaves that out of line).
#[cold]
#[inline(never)]
fn discard_call_headers(headers: Box<CallHeaders>) {
    drop(headers);
}

/// A call's own headers (metadata rendered per call), after the cached block: out of line,
/// as most calls have none and the request path every call takes stays small enough for the
/// compiler to inline what it calls.
#[cold]
#[inline(never)]
fn write_call_headers(headers: &CallHeaders, block: &mut Vec<u8>) {
    for (name, value) in headers {
        crate::hpack::literal_unindexed(name, value, block);
    }
}
