//! Request headers: HEADERS and CONTINUATION frames, the header block decoded field by field
//! into a fixed scratch (no allocation per request), and the checks that make a request
//! well-formed (RFC 9113 §8.1.2, §8.3.1): pseudo-headers once each and first, no connection
//! headers, `te: trailers` only, lower-case names, `content-length` that the body must match.

use super::*;

/// Header decoding scratch, reused for every header block.
#[derive(Default)]
pub(super) struct HeadScratch {
    pub(super) method: Vec<u8>,
    pub(super) path: Vec<u8>,
    pub(super) content_type: OptionalValue,
    pub(super) grpc_encoding: OptionalValue,
    pub(super) grpc_timeout: OptionalValue,
    /// Which of :method, :scheme, :path, :authority were present (`PSEUDO_*` bits).
    pub(super) pseudo_seen: u8,
    /// A regular field has been seen: a pseudo-header after it is malformed (§8.3).
    pub(super) regular_seen: bool,
    pub(super) content_length: Option<u64>,
    pub(super) malformed: bool,
    /// The block the fields above were decoded from, kept when decoding it left the HPACK
    /// table as it was: seen again, it would decode to the same fields, so they are used as
    /// they stand (see `on_header_block`). No table generation is kept with it: only
    /// decoding changes the table, and every decode first forgets the block (`clear`), so a
    /// block still held was the last one decoded and the table is as it left it.
    decoded_from: DecodedBlocks<(), 1>,
}

/// The one generation the server's memo is kept at: see `decoded_from`.
const HELD: u64 = 0;

pub(super) const PSEUDO_METHOD: u8 = 1;
pub(super) const PSEUDO_SCHEME: u8 = 2;
pub(super) const PSEUDO_PATH: u8 = 4;
pub(super) const PSEUDO_AUTHORITY: u8 = 8;

/// A header value that may be absent, whose buffer is kept between requests (an `Option<Vec>`
/// reset to `None` would allocate again for every request).
#[derive(Default)]
pub(super) struct OptionalValue {
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

    /// Whether the fields held are what decoding `block` now would give.
    fn decoded(&self, block: &[u8]) -> bool {
        self.decoded_from.find(block, HELD).is_some()
    }

    /// Remembers `block` as the source of the fields held, if decoding it changed nothing in
    /// the table (its generation stayed `before`) and it is short.
    fn remember(&mut self, block: &[u8], before: u64, after: u64) {
        if before == after {
            self.decoded_from.remember(block, HELD, HELD, ());
        }
    }

    fn clear(&mut self) {
        self.decoded_from.forget();
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
pub(super) struct PartialHeaders {
    pub(super) stream: u32,
    pub(super) end_stream: bool,
    pub(super) self_dependent: bool,
    pub(super) block: Vec<u8>,
}

impl<S: Service> Connection<S> {
    pub(super) fn on_headers(
        &mut self,
        header: Header,
        payload: &[u8],
    ) -> Result<(), ConnectionError> {
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

    pub(super) fn on_continuation(
        &mut self,
        header: Header,
        payload: &[u8],
    ) -> Result<(), ConnectionError> {
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
    pub(super) fn on_header_block(
        &mut self,
        stream_id: u32,
        end_stream: bool,
        self_dependent: bool,
        block: &[u8],
    ) -> Result<(), ConnectionError> {
        // Decode first, whatever happens to the stream: the HPACK state must stay in step.
        // A block equal to the last one, at the same table generation, decodes to the fields
        // already held (and changes nothing in the table): they are used as they stand.
        let before = self.decoder.generation();
        if !self.head.decoded(block) {
            self.head.clear();
            let head = &mut self.head;
            self.decoder
                .decode(block, |name, value| head.field(name, value))
                .map_err(|_| {
                    connection_error(code::COMPRESSION_ERROR, "malformed HPACK header block")
                })?;
            self.head.remember(block, before, self.decoder.generation());
        }

        if stream_id <= self.last_stream {
            // A streaming call's half-close so far (None: not a streaming call).
            let stream_half_closed = self.streaming.get(&stream_id).map(|call| call.half_closed);
            // Usually an empty list: clients number streams consecutively.
            let skipped = self.skipped.contains(stream_id);
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
                // A second header block that is not trailers: malformed (§8.1).
                Some(Stream {
                    state: StreamState::Receiving { .. },
                    ..
                }) => {
                    self.reset(stream_id, code::PROTOCOL_ERROR);
                    Ok(())
                }
                // The request has ended (running, answering, or its answer being written):
                // the stream is half-closed (remote), §5.1.
                Some(_) => {
                    self.reset(stream_id, code::STREAM_CLOSED);
                    Ok(())
                }
                // Trailers of a stream we reset (refused, or answered early): ignored (§5.1).
                None if self.resets.contains(stream_id) => Ok(()),
                // An id a later stream jumped over, used now: an unexpected stream id (§5.1.1).
                None if skipped => Err(connection_error(
                    code::PROTOCOL_ERROR,
                    "HEADERS on a stream id below one already used",
                )),
                // A stream that was opened and has closed (§5.1).
                None => Err(connection_error(
                    code::STREAM_CLOSED,
                    "HEADERS on a closed stream",
                )),
            };
        }
        // Clients number their streams 1, 3, 5, ...: one comparison per new stream.
        let next_expected = if self.last_stream == 0 {
            1
        } else {
            self.last_stream + 2
        };
        if stream_id > next_expected {
            self.skipped.remember(next_expected, stream_id - 2);
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
}

/// Ranges of stream ids jumped over that are remembered: a client that skips ids on every
/// stream is unusual, and past this many ranges the oldest are forgotten (a HEADERS on one of
/// those is then taken for a closed stream's: still a connection error, STREAM_CLOSED).
pub(super) const SKIPPED_MEMORY: usize = 1024;

/// Client stream ids a new stream jumped over (never opened), as inclusive ranges, newest
/// last, at most [`SKIPPED_MEMORY`]. Clients number streams consecutively, so this stays
/// empty.
#[derive(Debug, Default)]
pub(super) struct SkippedIds(VecDeque<(u32, u32)>);

impl SkippedIds {
    /// Remembers ids `first..=last` as never opened. Out of line: the request path stays as
    /// small as before.
    #[cold]
    #[inline(never)]
    pub(super) fn remember(&mut self, first: u32, last: u32) {
        if self.0.len() == SKIPPED_MEMORY {
            self.0.pop_front();
        }
        self.0.push_back((first, last));
    }

    /// Whether `stream_id` was jumped over by a later stream (never opened).
    #[inline(never)]
    pub(super) fn contains(&self, stream_id: u32) -> bool {
        self.0
            .iter()
            .any(|(first, last)| (*first..=*last).contains(&stream_id))
    }
}
