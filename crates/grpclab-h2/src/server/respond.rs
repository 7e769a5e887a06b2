//! Writing responses: the response HEADERS (cached HPACK blocks for gRPC's constant head), DATA,
//! and the trailers or Trailers-Only status block with `grpc-status` and a percent-encoded
//! `grpc-message`.

use super::*;
use crate::flow;

impl<S: Service> Connection<S> {
    /// Encodes a response; data beyond the flow-control windows waits in the stream.
    pub(super) fn respond(&mut self, stream_id: u32, response: Response) {
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
            && !matches!(
                response,
                Response::Message(_) | Response::Gzip(_) | Response::Web(_)
            );
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
                self.status_block(code, &message, StatusPlace::TrailersOnly);
                self.end_with_headers(stream_id);
            }
            Response::WebStatus { code, message } => {
                self.status_block(code, &message, StatusPlace::WebTrailersOnly);
                self.end_with_headers(stream_id);
            }
            Response::Message(data) => {
                self.respond_message(stream_id, Message::Shared(data), ReplyHead::Grpc)
            }
            Response::Gzip(data) => {
                self.respond_message(stream_id, Message::Shared(data), ReplyHead::Gzip)
            }
            Response::Web(body) => {
                self.respond_message(stream_id, Message::Shared(body), ReplyHead::Web)
            }
        }
        if early {
            self.reset(stream_id, code::NO_ERROR);
        }
    }

    /// A unary call's message response: HEADERS, then DATA and the trailers at once when the
    /// message fits the windows and one frame (nearly always: the stream is looked up once,
    /// the message never parked in it), else the message waits in the stream. A gRPC-Web
    /// reply ([`ReplyHead::Web`]) carries its trailers in its body: its last DATA ends the
    /// stream instead.
    pub(super) fn respond_message(
        &mut self,
        stream_id: u32,
        message: Message<'_>,
        head: ReplyHead,
    ) {
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return; // reset by the client meanwhile
        };
        let len = message.len();
        let allowed = flow::sendable(
            self.conn_send_window,
            stream.send_window_offset + self.peer_initial_window,
            self.peer_max_frame,
        );
        if len > allowed {
            stream.state = StreamState::Sending {
                data: message.into_bytes(),
                trailers: head != ReplyHead::Web,
            };
            self.write_response_head(stream_id, head);
            self.send_stream(stream_id);
            return;
        }
        stream.send_window_offset -= len as i64;
        // Its END_STREAM is queued below: forgotten once written (`finish_stream`).
        stream.state = StreamState::Flushing;
        self.flushing.push(stream_id);
        self.conn_send_window.spend(len);
        self.write_response_head(stream_id, head);
        if head == ReplyHead::Web {
            frame::write_data(&mut self.out, stream_id, message.as_slice(), true);
            return;
        }
        if len > 0 {
            frame::write_data(&mut self.out, stream_id, message.as_slice(), false);
        }
        match self.ok_trailers_block.cached(&self.encoder) {
            Some(block) => {
                frame::write_headers(&mut self.out, stream_id, block, true, self.peer_max_frame)
            }
            None => {
                self.status_block(0, "", StatusPlace::Trailers);
                self.write_last_headers(stream_id);
            }
        }
    }

    /// Writes a response's HEADERS, not ending the stream: `:status 200` and `content-type`,
    /// with `grpc-encoding: gzip` (and `grpc-accept-encoding`) for a gzip response, or
    /// gRPC-Web's content type; from the cached blocks, so after the first response they are
    /// a few bytes.
    pub(super) fn write_response_head(&mut self, stream_id: u32, head: ReplyHead) {
        let cached = match head {
            ReplyHead::Grpc => self.head_block.cached(&self.encoder),
            ReplyHead::Gzip => self.gzip_head_block.cached(&self.encoder),
            ReplyHead::Web => self.web_head_block.cached(&self.encoder),
        };
        if let Some(block) = cached {
            frame::write_headers(&mut self.out, stream_id, block, false, self.peer_max_frame);
            return;
        }
        self.block_scratch.clear();
        let accept_encoding = self.settings.accept_encoding;
        let block = match head {
            ReplyHead::Grpc => &mut self.head_block,
            ReplyHead::Gzip => &mut self.gzip_head_block,
            ReplyHead::Web => &mut self.web_head_block,
        };
        block.write(
            &mut self.encoder,
            &mut self.block_scratch,
            |encoder, block| {
                encoder.field(b":status", b"200", Indexing::Incremental, block);
                encoder.field(
                    b"content-type",
                    head.content_type(),
                    Indexing::Incremental,
                    block,
                );
                if head == ReplyHead::Gzip {
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
    pub(super) fn end_with_headers(&mut self, stream_id: u32) {
        self.write_last_headers(stream_id);
        self.finish_stream(stream_id);
    }

    /// Writes the header block in `block_scratch` as a HEADERS frame ending the stream.
    fn write_last_headers(&mut self, stream_id: u32) {
        frame::write_headers(
            &mut self.out,
            stream_id,
            &self.block_scratch,
            true,
            self.peer_max_frame,
        );
    }

    /// Encodes a status into `block_scratch`: a trailers-only response (`:status`,
    /// `content-type`, `grpc-accept-encoding` when configured) or the trailers after messages;
    /// `grpc-status 0` after messages comes from the cached block.
    pub(super) fn status_block(&mut self, code: u8, message: &str, place: StatusPlace) {
        self.block_scratch.clear();
        if place == StatusPlace::Trailers && code == 0 && message.is_empty() {
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
        let head = match place {
            StatusPlace::Trailers => None,
            StatusPlace::TrailersOnly => Some(ReplyHead::Grpc),
            StatusPlace::WebTrailersOnly => Some(ReplyHead::Web),
        };
        if let Some(head) = head {
            self.encoder.field(
                b":status",
                b"200",
                Indexing::Incremental,
                &mut self.block_scratch,
            );
            self.encoder.field(
                b"content-type",
                head.content_type(),
                Indexing::Incremental,
                &mut self.block_scratch,
            );
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
            let encoded = crate::grpc::percent_encode(message);
            self.encoder.field(
                b"grpc-message",
                encoded.as_bytes(),
                Indexing::Without,
                &mut self.block_scratch,
            );
        }
    }
}

/// The HEADERS a reply with messages starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReplyHead {
    /// `:status 200`, `content-type: application/grpc`.
    Grpc,
    /// The same with `grpc-encoding: gzip` (and `grpc-accept-encoding`).
    Gzip,
    /// `:status 200`, `content-type: application/grpc-web+proto`: a gRPC-Web reply, whose
    /// status is in its body's trailer frame.
    Web,
}

impl ReplyHead {
    fn content_type(self) -> &'static [u8] {
        match self {
            ReplyHead::Grpc | ReplyHead::Gzip => b"application/grpc",
            ReplyHead::Web => b"application/grpc-web+proto",
        }
    }
}

/// Where a status block goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StatusPlace {
    /// The trailers after a reply's messages.
    Trailers,
    /// A gRPC trailers-only response: the whole response is one HEADERS.
    TrailersOnly,
    /// A gRPC-Web trailers-only response (gRPC-Web's content type).
    WebTrailersOnly,
}

/// A response message: shared bytes ([`Response::Message`]), or the connection's reply buffer
/// a service wrote it into ([`Dispatch::Written`]).
pub(super) enum Message<'a> {
    Shared(Bytes),
    Buffer(&'a mut BytesMut),
}

impl Message<'_> {
    fn len(&self) -> usize {
        match self {
            Message::Shared(bytes) => bytes.len(),
            Message::Buffer(buffer) => buffer.len(),
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Message::Shared(bytes) => bytes,
            Message::Buffer(buffer) => buffer,
        }
    }

    /// The message as bytes a stream can hold until the windows open: the buffer's bytes
    /// split off it, not copied.
    fn into_bytes(self) -> Bytes {
        match self {
            Message::Shared(bytes) => bytes,
            Message::Buffer(buffer) => buffer.split().freeze(),
        }
    }
}
