//! Replies: a response's header block (HTTP status, `grpc-status`, `grpc-message`, in headers or
//! trailers) and its DATA (messages counted, a reply kept for validation when asked, windows
//! given back).

use super::*;

/// What a response header block says, as far as a call needs it (its `grpc-message` aside):
/// the scratch a block is decoded into, and what is kept per repeated block.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ReplyHead {
    /// `grpc-status`, if the block carries one.
    status: Option<u32>,
    /// `:status` (0 if absent or not a number).
    http: u16,
    /// The block's shape: `:status` fields seen, and whether it broke the pseudo-header rules
    /// (unknown or request pseudo-headers, one after a regular field).
    status_fields: u8,
    malformed: bool,
}

impl<S: CallSource> Connection<'_, S> {
    pub(super) fn on_header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), ConnectionError> {
        let before = self.decoder.generation();
        if let Some(head) = self.reply_blocks.find(block, before) {
            // The same bytes at the same table generation: the fields they decoded to before.
            self.scratch_head = head;
            self.scratch_message.clear();
        } else {
            self.decode_reply_block(block)?;
            // A block with a grpc-message is not kept: the message is text to carry, and
            // errors are not the path to make cheap. Nor one with headers a call keeps.
            if self.scratch_message.is_empty() && self.scratch_kept.is_empty() {
                self.reply_blocks.remember(
                    block,
                    before,
                    self.decoder.generation(),
                    self.scratch_head,
                );
            }
        }
        let head = self.scratch_head;
        let Some(call) = self.calls.get_mut(stream) else {
            // A call we gave up on (deadline) or never made: nothing of it is kept.
            self.scratch_kept.clear();
            return Ok(());
        };
        // RFC 9113 §8.3.2: one :status, pseudo-headers first, none other; trailers carry no
        // pseudo-header and end the stream (§8.1). A malformed response is a stream error.
        let malformed = head.malformed
            || if call.headers_seen {
                head.status_fields != 0 || !end_stream
            } else {
                head.status_fields != 1
            };
        if malformed {
            self.scratch_kept.clear();
            self.stream_error(
                stream,
                code::PROTOCOL_ERROR,
                "malformed response headers (:status missing or repeated, or misplaced pseudo-headers)",
            );
            return Ok(());
        }
        let seen_before = call.headers_seen;
        if !call.headers_seen {
            call.headers_seen = true;
            call.http_status = head.http;
        }
        if let Some(status) = head.status {
            call.grpc_status = Some(status);
            if !self.scratch_message.is_empty() {
                let message = std::mem::take(&mut self.scratch_message);
                match self.status_messages.iter_mut().find(|(s, _)| *s == stream) {
                    Some((_, held)) => *held = message,
                    None => self.status_messages.push((stream, message)),
                }
            }
        }
        if !self.scratch_kept.is_empty() {
            // The response headers, or (the stream's last block) the trailers.
            self.keep_reply_headers(stream, seen_before || end_stream);
        }
        if end_stream {
            self.end_stream(stream);
        }
        Ok(())
    }

    /// The kept headers just decoded, held for call `stream`'s end if it keeps its reply;
    /// `scratch_kept` is empty again after (a cached block's path never clears it).
    #[cold]
    #[inline(never)]
    fn keep_reply_headers(&mut self, stream: u32, trailer: bool) {
        if self.replies.get_mut(stream).is_none() {
            self.scratch_kept.clear();
            return;
        }
        let kept = self
            .scratch_kept
            .drain(..)
            .map(|(name, value)| ReplyHeader {
                trailer,
                name,
                value,
            });
        match self.reply_headers.iter_mut().find(|(s, _)| *s == stream) {
            Some((_, held)) => held.extend(kept),
            None => {
                let kept = kept.collect();
                self.reply_headers.push((stream, kept));
            }
        }
    }

    /// Decodes a response header block into `scratch_head` and `scratch_message` (and the
    /// headers calls keep into `scratch_kept`).
    fn decode_reply_block(&mut self, block: &[u8]) -> Result<(), ConnectionError> {
        self.scratch_head = ReplyHead::default();
        self.scratch_message.clear();
        self.scratch_kept.clear();
        let kept_names = &self.template.kept_headers;
        let kept = &mut self.scratch_kept;
        let (head, message) = (&mut self.scratch_head, &mut self.scratch_message);
        let mut regular_seen = false;
        self.decoder
            .decode(block, |name, value| match name {
                b":status" => {
                    head.malformed |= regular_seen;
                    head.status_fields = head.status_fields.saturating_add(1);
                    head.http = crate::grpc::parse_decimal(value)
                        .and_then(|v| u16::try_from(v).ok())
                        .unwrap_or(0);
                }
                _ if name.first() == Some(&b':') => head.malformed = true,
                b"grpc-status" => {
                    regular_seen = true;
                    // Not a number: Unknown (2).
                    head.status = Some(crate::grpc::parse_decimal(value).unwrap_or(2));
                }
                b"grpc-message" => {
                    regular_seen = true;
                    message.push_str(&crate::grpc::percent_decode(value))
                }
                _ => {
                    regular_seen = true;
                    if !kept_names.is_empty() && kept_names.iter().any(|kept| kept == name) {
                        kept.push((Bytes::copy_from_slice(name), Bytes::copy_from_slice(value)));
                    }
                }
            })
            .map_err(|_| {
                connection_error(
                    code::COMPRESSION_ERROR,
                    "malformed HPACK header block from the server",
                )
            })?;
        Ok(())
    }

    pub(super) fn on_data(
        &mut self,
        header: Header,
        payload: &[u8],
    ) -> Result<(), ConnectionError> {
        let size = payload.len() as u32;
        self.conn_recv_unacked += size;
        let range = frame::strip_padding(&header, payload)?;
        if self.conn_recv_unacked > CONNECTION_WINDOW {
            return Err(connection_error(
                code::FLOW_CONTROL_ERROR,
                "the server sent more DATA than the connection window",
            ));
        }
        let Some(call) = self.calls.get_mut(header.stream) else {
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
            let mut whole = stream.counter.feed(&payload[range.clone()]);
            let limit = self.template.stream.as_ref().and_then(|s| s.receive_limit);
            let reached = limit.is_some_and(|limit| stream.received + whole >= limit);
            if let (true, Some(limit)) = (reached, limit) {
                // Replies behind the limit's in this read are the cancelled rest.
                whole = limit.saturating_sub(stream.received);
            }
            stream.received += whole;
            if let Some(stamps) = stream.counter.stamps().filter(|_| whole > 0) {
                // Only the replies counted: any behind a receive limit were cancelled.
                let counted = stamps.len().min(whole as usize);
                self.source.message_stamps(call.token, &stamps[..counted]);
            }
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
            if whole > 0 && self.template.stream.as_ref().is_some_and(|s| !s.ping_pong) {
                // Replies completed by one DATA frame arrived together: one gap from the
                // previous reply, then zeros.
                let now = Instant::now();
                let gap = stream
                    .last_reply
                    .map(|last| now.saturating_duration_since(last));
                self.source.message_gaps(call.token, gap, whole - 1);
                stream.last_reply = Some(now);
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
            if reached {
                // ghz's --stream-call-count on a server stream: the client has what it asked
                // for and cancels the rest; the call is a success.
                frame::write_rst_stream(&mut self.out, header.stream, code::CANCEL);
                self.finish(header.stream, CallEnd::Ok(None));
                return Ok(());
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
        if let Some(reply) = self.replies.get_mut(header.stream) {
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
}
