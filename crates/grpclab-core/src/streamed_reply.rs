//! A gRPC-Web or Connect server stream's reply body, read as it arrives: its messages
//! counted, never kept (a stream may be long), and its last frame kept, which says how the
//! call ended:
//!
//! - gRPC-Web: the trailer frame (flag 0x80), `name: value` lines with `grpc-status`; the
//!   text form is base64 in groups of four characters, each chunk padded on its own;
//! - Connect: the end-stream message (flag 0x02), a JSON object whose `error` (absent: OK)
//!   has Connect's `code`, `message` and `details`, beside the trailing `metadata`.
//!
//! Pure, like [`crate::protocol`]: bytes in, counts and a status out, so it is tested and
//! fuzzed on bytes alone.

use crate::protocol::{
    connect_code_named, last_frame_payload, parse_trailer_lines, unknown_code_said, Protocol,
    ProtocolError, LARGEST_LAST_FRAME,
};
use crate::Code;

/// How a streamed reply marks its last frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// gRPC-Web's trailer frame.
    GrpcWebTrailers,
    /// Connect's end-stream message.
    ConnectEndStream,
}

impl Ending {
    /// The frame flag that marks it.
    fn flag(self) -> u8 {
        match self {
            Ending::GrpcWebTrailers => 0x80,
            Ending::ConnectEndStream => 0x02,
        }
    }

    /// What it is called in an error.
    fn name(self) -> &'static str {
        match self {
            Ending::GrpcWebTrailers => "trailer frame",
            Ending::ConnectEndStream => "end-stream message",
        }
    }
}

/// How a streamed call ended, from its last frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamStatus {
    /// The call's code.
    pub code: Code,
    /// Its message (gRPC-Web's `grpc-message` as sent, still percent-encoded; Connect's as
    /// the JSON gives it).
    pub message: String,
    /// How many error details it carried (Connect).
    pub details: usize,
    /// The trailers: gRPC-Web's lines (`grpc-status` among them), Connect's metadata (each
    /// value of a name on its own), names lower-cased.
    pub trailers: Vec<(String, String)>,
}

/// A streamed reply body being read; see the module's doc.
#[derive(Debug)]
pub struct StreamedReply {
    protocol: Protocol,
    ending: Ending,
    /// gRPC-Web text: base64 characters not yet decoded (fewer than four).
    text: Option<Vec<u8>>,
    prefix: [u8; 5],
    prefix_len: usize,
    /// Bytes of the current frame still to come (valid once the prefix is whole).
    remaining: usize,
    /// The last frame's payload, once its prefix has come.
    last: Option<Vec<u8>>,
    /// The last frame is whole: nothing may follow.
    ended: bool,
    /// The last frame's flag (0x01 beside its own: gzip-compressed).
    last_flag: u8,
    messages: u64,
}

impl StreamedReply {
    /// A reader for `protocol`'s streamed replies; `None` for gRPC, whose status is in HTTP/2
    /// trailers, not the body.
    pub fn new(protocol: Protocol) -> Option<StreamedReply> {
        let (ending, text) = match protocol {
            Protocol::Grpc => return None,
            Protocol::GrpcWeb => (Ending::GrpcWebTrailers, false),
            Protocol::GrpcWebText => (Ending::GrpcWebTrailers, true),
            Protocol::Connect => (Ending::ConnectEndStream, false),
        };
        Some(StreamedReply {
            protocol,
            ending,
            text: text.then(Vec::new),
            prefix: [0; 5],
            prefix_len: 0,
            remaining: 0,
            last: None,
            ended: false,
            last_flag: 0,
            messages: 0,
        })
    }

    /// The protocol it reads.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Message frames whole so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Feeds a chunk of the body; returns how many message frames it completed. Anything
    /// after the last frame, a last frame larger than 1 MiB, or text that is not base64 is a
    /// [`ProtocolError`].
    pub fn feed(&mut self, chunk: &[u8]) -> Result<u64, ProtocolError> {
        let Some(pending) = self.text.as_mut() else {
            return self.feed_binary(chunk);
        };
        pending.extend(chunk.iter().copied().filter(|b| !b.is_ascii_whitespace()));
        let whole = pending.len() / 4 * 4;
        if whole == 0 {
            return Ok(0);
        }
        let mut binary = Vec::with_capacity(whole / 4 * 3);
        {
            use base64::Engine;
            let engine = base64::engine::general_purpose::STANDARD;
            for group in pending[..whole].chunks(4) {
                engine
                    .decode_vec(group, &mut binary)
                    .map_err(|err| ProtocolError(format!("the body is not base64: {err}")))?;
            }
        }
        pending.drain(..whole);
        self.feed_binary(&binary)
    }

    fn feed_binary(&mut self, mut data: &[u8]) -> Result<u64, ProtocolError> {
        let mut completed = 0;
        while !data.is_empty() {
            if self.ended {
                return Err(ProtocolError(format!(
                    "{} bytes after the {}",
                    data.len(),
                    self.ending.name()
                )));
            }
            if self.prefix_len < 5 {
                let take = (5 - self.prefix_len).min(data.len());
                self.prefix[self.prefix_len..self.prefix_len + take].copy_from_slice(&data[..take]);
                self.prefix_len += take;
                data = &data[take..];
                if self.prefix_len == 5 {
                    self.remaining = u32::from_be_bytes([
                        self.prefix[1],
                        self.prefix[2],
                        self.prefix[3],
                        self.prefix[4],
                    ]) as usize;
                    if self.prefix[0] & self.ending.flag() != 0 {
                        self.start_last(self.prefix[0])?;
                    }
                    if self.remaining == 0 {
                        completed += self.frame_done();
                    }
                }
                continue;
            }
            let take = self.remaining.min(data.len());
            if let Some(last) = self.last.as_mut() {
                last.extend_from_slice(&data[..take]);
            }
            self.remaining -= take;
            data = &data[take..];
            if self.remaining == 0 {
                completed += self.frame_done();
            }
        }
        Ok(completed)
    }

    /// The last frame's prefix has come (its `flag`): its payload is kept from here.
    fn start_last(&mut self, flag: u8) -> Result<(), ProtocolError> {
        self.last_flag = flag;
        if self.remaining > LARGEST_LAST_FRAME {
            return Err(ProtocolError(format!(
                "a {} of {} bytes, more than the {LARGEST_LAST_FRAME} read",
                self.ending.name(),
                self.remaining
            )));
        }
        self.last = Some(Vec::with_capacity(self.remaining));
        Ok(())
    }

    /// A frame is whole: 1 for a message, 0 for the last frame.
    fn frame_done(&mut self) -> u64 {
        self.prefix_len = 0;
        if self.last.is_some() {
            self.ended = true;
            0
        } else {
            self.messages += 1;
            1
        }
    }

    /// The body has ended: how the call ended, from its last frame. A body that ends inside
    /// a frame, or without its last frame, is a [`ProtocolError`]. The last frame is read
    /// once: a second call finds none.
    pub fn finish(&mut self) -> Result<StreamStatus, ProtocolError> {
        if let Some(pending) = self.text.as_ref().filter(|p| !p.is_empty()) {
            return Err(ProtocolError(format!(
                "the base64 body ends in {} characters, not a group of 4",
                pending.len()
            )));
        }
        if self.prefix_len > 0 {
            return Err(ProtocolError(format!(
                "the body ended inside a frame ({} bytes of it still to come)",
                if self.prefix_len < 5 {
                    5 - self.prefix_len
                } else {
                    self.remaining
                }
            )));
        }
        let (true, Some(last)) = (self.ended, self.last.take()) else {
            return Err(ProtocolError(match self.ending {
                Ending::GrpcWebTrailers => {
                    "the body ended without its trailer frame (no grpc-status)".to_owned()
                }
                Ending::ConnectEndStream => {
                    "the stream ended without its end-stream message".to_owned()
                }
            }));
        };
        let last = last_frame_payload(self.last_flag, &last, self.ending.name())?;
        match self.ending {
            Ending::GrpcWebTrailers => web_status(&last),
            Ending::ConnectEndStream => connect_end_status(&last),
        }
    }
}

/// A gRPC-Web trailer frame's status.
fn web_status(block: &[u8]) -> Result<StreamStatus, ProtocolError> {
    let trailers = parse_trailer_lines(block)?;
    let find = |wanted: &str| {
        trailers
            .iter()
            .find(|(name, _)| name == wanted)
            .map(|(_, value)| value.clone())
    };
    let status = find("grpc-status")
        .ok_or_else(|| ProtocolError("the trailer frame has no grpc-status".to_owned()))?;
    Ok(StreamStatus {
        code: Code::from_header(status.as_bytes()),
        message: find("grpc-message").unwrap_or_default(),
        details: 0,
        trailers,
    })
}

/// A Connect end-stream message's status: OK without an `error`; an error naming no code
/// Connect has is `unknown`, as the protocol says.
fn connect_end_status(json: &[u8]) -> Result<StreamStatus, ProtocolError> {
    let value: serde_json::Value = serde_json::from_slice(json).map_err(|err| {
        ProtocolError(format!(
            "the end-stream message is not JSON ({} bytes): {err}",
            json.len()
        ))
    })?;
    let serde_json::Value::Object(fields) = value else {
        return Err(ProtocolError(
            "the end-stream message is not a JSON object".to_owned(),
        ));
    };
    let mut trailers = Vec::new();
    if let Some(serde_json::Value::Object(metadata)) = fields.get("metadata") {
        for (name, values) in metadata {
            for value in values.as_array().into_iter().flatten() {
                trailers.push((
                    name.to_ascii_lowercase(),
                    value.as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    let error = match fields.get("error") {
        None | Some(serde_json::Value::Null) => {
            return Ok(StreamStatus {
                code: Code::Ok,
                message: String::new(),
                details: 0,
                trailers,
            })
        }
        Some(error) => error,
    };
    let message = error["message"].as_str().unwrap_or_default().to_owned();
    let details = error["details"].as_array().map_or(0, Vec::len);
    let (code, message) = match error["code"].as_str().and_then(connect_code_named) {
        Some(code) => (code, message),
        None => (
            Code::Unknown,
            format!(
                "an end-stream error without a known code {}",
                unknown_code_said(&error["code"], &message)
            ),
        ),
    };
    Ok(StreamStatus {
        code,
        message,
        details,
        trailers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::tests::frame;

    /// Feeds `body` a byte at a time (every split a frame can have), then finishes.
    fn read_bytewise(
        protocol: Protocol,
        body: &[u8],
    ) -> (u64, Result<StreamStatus, ProtocolError>) {
        let mut reader = StreamedReply::new(protocol).unwrap();
        let mut counted = 0;
        for byte in body {
            match reader.feed(std::slice::from_ref(byte)) {
                Ok(n) => counted += n,
                Err(err) => return (counted, Err(err)),
            }
        }
        assert_eq!(counted, reader.messages());
        (counted, reader.finish())
    }

    #[test]
    fn a_web_stream_counts_its_messages_and_reads_its_trailer_frame() {
        let mut body = frame(0, b"one");
        body.extend(frame(0, b""));
        body.extend(frame(0, b"three"));
        body.extend(frame(
            0x80,
            b"grpc-status: 5\r\ngrpc-message: gone%20away\r\n",
        ));
        let (count, status) = read_bytewise(Protocol::GrpcWeb, &body);
        let status = status.unwrap();
        assert_eq!(count, 3);
        assert_eq!(status.code, Code::NotFound);
        assert_eq!(status.message, "gone%20away");
        // The text form, each frame base64-padded on its own.
        use base64::Engine;
        let engine = base64::engine::general_purpose::STANDARD;
        let text: String = [frame(0, b"ab"), frame(0x80, b"grpc-status: 0\r\n")]
            .iter()
            .map(|f| engine.encode(f))
            .collect();
        let (count, status) = read_bytewise(Protocol::GrpcWebText, text.as_bytes());
        assert_eq!((count, status.unwrap().code), (1, Code::Ok));
    }

    #[test]
    fn a_connect_stream_ends_with_its_end_stream_message() {
        let mut body = frame(0, b"m");
        body.extend(frame(0, b"n"));
        body.extend(frame(2, br#"{"metadata":{"X-Served":["a","b"]}}"#));
        let (count, status) = read_bytewise(Protocol::Connect, &body);
        let status = status.unwrap();
        assert_eq!((count, status.code), (2, Code::Ok));
        assert_eq!(
            status.trailers,
            vec![
                ("x-served".to_owned(), "a".to_owned()),
                ("x-served".to_owned(), "b".to_owned())
            ]
        );
        let failed = frame(
            2,
            br#"{"error":{"code":"resource_exhausted","message":"full","details":[{},{}]}}"#,
        );
        let status = read_bytewise(Protocol::Connect, &failed).1.unwrap();
        assert_eq!(status.code, Code::ResourceExhausted);
        assert_eq!((status.message.as_str(), status.details), ("full", 2));
        let unnamed = frame(2, br#"{"error":{"message":"what"}}"#);
        let status = read_bytewise(Protocol::Connect, &unnamed).1.unwrap();
        assert_eq!(status.code, Code::Unknown);
        assert!(status.message.contains("without a known code (none): what"));
    }

    #[test]
    fn each_malformed_stream_is_one_error() {
        let cases: Vec<(Protocol, Vec<u8>, &str)> = vec![
            (
                Protocol::GrpcWeb,
                frame(0, b"x"),
                "without its trailer frame",
            ),
            (
                Protocol::Connect,
                frame(0, b"x"),
                "without its end-stream message",
            ),
            (
                Protocol::GrpcWeb,
                frame(0, b"abc")[..6].to_vec(),
                "inside a frame (2 bytes",
            ),
            (
                Protocol::GrpcWeb,
                [frame(0x80, b"grpc-status: 0"), frame(0, b"late")].concat(),
                "1 bytes after the trailer frame",
            ),
            (
                Protocol::GrpcWeb,
                frame(0x80, b"grpc-message: x"),
                "no grpc-status",
            ),
            (Protocol::Connect, frame(2, b"[1]"), "not a JSON object"),
            (Protocol::Connect, frame(2, b"{"), "not JSON (1 bytes)"),
            (
                Protocol::Connect,
                frame(3, b"{}"),
                "a compressed end-stream",
            ),
            (Protocol::GrpcWebText, b"AAAA!AAA".to_vec(), "not base64"),
            (
                Protocol::GrpcWebText,
                b"AAAAAA".to_vec(),
                "ends in 2 characters",
            ),
        ];
        for (protocol, body, says) in cases {
            let (_, outcome) = read_bytewise(protocol, &body);
            let err = outcome.expect_err(says);
            assert!(err.0.contains(says), "{protocol}: {err} (wanted {says:?})");
        }
        let mut huge = vec![0x80];
        huge.extend_from_slice(&(LARGEST_LAST_FRAME as u32 + 1).to_be_bytes());
        let mut reader = StreamedReply::new(Protocol::GrpcWeb).unwrap();
        let err = reader.feed(&huge).unwrap_err();
        assert!(err.0.contains("more than the 1048576 read"), "{err}");
        assert!(StreamedReply::new(Protocol::Grpc).is_none());
        // A compressed end-stream message (connect-accept-encoding: gzip) is inflated.
        let gzipped = crate::framing::frame_gzip(br#"{"error":{"code":"aborted"}}"#);
        let status = read_bytewise(Protocol::Connect, &[&[3u8][..], &gzipped[1..]].concat())
            .1
            .unwrap();
        assert_eq!(status.code, Code::Aborted);
    }
}
