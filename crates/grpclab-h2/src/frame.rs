//! The HTTP/2 frame codec (RFC 9113 §4 and §6): frame headers, payload parsing with the
//! checks that make a malformed frame the right error, and writers for every frame a gRPC
//! server or client sends.

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Length of a frame header.
pub const HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's initial value, and what we advertise.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The initial flow-control window (RFC 9113 §6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;
/// The largest flow-control window (2^31 - 1).
pub const MAX_WINDOW: u32 = 0x7fff_ffff;

/// Frame types (RFC 9113 §6).
pub mod kind {
    /// DATA
    pub const DATA: u8 = 0x0;
    /// HEADERS
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING
    pub const PING: u8 = 0x6;
    /// GOAWAY
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub mod flags {
    /// DATA, HEADERS: the last frame of the stream from this side.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, CONTINUATION: the header block is complete.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS: padding follows.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: priority fields follow.
    pub const PRIORITY: u8 = 0x20;
}

/// Error codes (RFC 9113 §7).
pub mod code {
    /// Graceful shutdown, no error.
    pub const NO_ERROR: u32 = 0x0;
    /// A protocol rule was broken.
    pub const PROTOCOL_ERROR: u32 = 0x1;
    /// An internal failure.
    pub const INTERNAL_ERROR: u32 = 0x2;
    /// The flow-control protocol was violated.
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    /// A frame arrived on a half-closed or closed stream.
    pub const STREAM_CLOSED: u32 = 0x5;
    /// A frame had an invalid size.
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    /// The stream was refused before any processing.
    pub const REFUSED_STREAM: u32 = 0x7;
    /// The stream is no longer needed.
    pub const CANCEL: u32 = 0x8;
    /// The header compression context cannot be maintained.
    pub const COMPRESSION_ERROR: u32 = 0x9;
    /// The peer is generating excessive load (RFC 9113 §7).
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
}

/// SETTINGS parameters (RFC 9113 §6.5.2).
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// A frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Payload length.
    pub length: u32,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (reserved bit cleared).
    pub stream: u32,
}

impl Header {
    /// Parses the first 9 bytes of a frame.
    pub fn parse(bytes: &[u8; HEADER_LEN]) -> Header {
        Header {
            length: u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]),
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff,
        }
    }

    /// The whole frame's length on the wire: this header and its payload.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.length as usize
    }

    /// The frame's payload in `frame` (a buffer that starts with this header).
    pub fn payload<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        &frame[HEADER_LEN..self.frame_len()]
    }

    /// Whether `flag` is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// A violation that ends the connection (GOAWAY with `code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("connection error {code:#x}: {reason}")]
pub struct ConnectionError {
    /// The RFC 9113 error code.
    pub code: u32,
    /// What was wrong, for logs and GOAWAY debug data.
    pub reason: &'static str,
}

/// Shorthand for a connection error.
pub const fn connection_error(code: u32, reason: &'static str) -> ConnectionError {
    ConnectionError { code, reason }
}

/// Removes padding from a DATA or HEADERS payload (RFC 9113 §6.1, §6.2).
pub fn strip_padding(
    header: &Header,
    payload: &[u8],
) -> Result<std::ops::Range<usize>, ConnectionError> {
    if !header.has(flags::PADDED) {
        return Ok(0..payload.len());
    }
    let pad = *payload.first().ok_or(connection_error(
        code::FRAME_SIZE_ERROR,
        "padded frame without a pad length",
    ))? as usize;
    if pad >= payload.len() {
        return Err(connection_error(
            code::PROTOCOL_ERROR,
            "padding is as long as the frame",
        ));
    }
    Ok(1..payload.len() - pad)
}

/// The header block fragment of a HEADERS payload: padding and priority fields removed.
pub fn headers_fragment(
    header: &Header,
    payload: &[u8],
) -> Result<std::ops::Range<usize>, ConnectionError> {
    let range = strip_padding(header, payload)?;
    if header.has(flags::PRIORITY) {
        if range.len() < 5 {
            return Err(connection_error(
                code::FRAME_SIZE_ERROR,
                "HEADERS too short for its priority fields",
            ));
        }
        return Ok(range.start + 5..range.end);
    }
    Ok(range)
}

/// Parses a SETTINGS payload into `(identifier, value)` pairs, checking each value (§6.5.2).
pub fn parse_settings(
    payload: &[u8],
) -> Result<impl Iterator<Item = (u16, u32)> + '_, ConnectionError> {
    if !payload.len().is_multiple_of(6) {
        return Err(connection_error(
            code::FRAME_SIZE_ERROR,
            "SETTINGS length is not a multiple of 6",
        ));
    }
    for chunk in payload.chunks_exact(6) {
        let id = u16::from_be_bytes([chunk[0], chunk[1]]);
        let value = u32::from_be_bytes([chunk[2], chunk[3], chunk[4], chunk[5]]);
        match id {
            setting::ENABLE_PUSH if value > 1 => {
                return Err(connection_error(
                    code::PROTOCOL_ERROR,
                    "SETTINGS_ENABLE_PUSH above 1",
                ))
            }
            setting::INITIAL_WINDOW_SIZE if value > MAX_WINDOW => {
                return Err(connection_error(
                    code::FLOW_CONTROL_ERROR,
                    "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                ))
            }
            setting::MAX_FRAME_SIZE if !(DEFAULT_MAX_FRAME_SIZE..=0xff_ffff).contains(&value) => {
                return Err(connection_error(
                    code::PROTOCOL_ERROR,
                    "SETTINGS_MAX_FRAME_SIZE out of range",
                ))
            }
            _ => {}
        }
    }
    Ok(payload.chunks_exact(6).map(|c| {
        (
            u16::from_be_bytes([c[0], c[1]]),
            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
        )
    }))
}

/// The increment of a WINDOW_UPDATE payload (RFC 9113 §6.9): exactly 4 bytes, reserved bit
/// cleared. A zero increment is for the caller to judge (connection or stream error).
pub fn parse_window_update(payload: &[u8]) -> Result<u32, ConnectionError> {
    let bytes: [u8; 4] = payload
        .try_into()
        .map_err(|_| connection_error(code::FRAME_SIZE_ERROR, "WINDOW_UPDATE length is not 4"))?;
    Ok(u32::from_be_bytes(bytes) & 0x7fff_ffff)
}

/// The error code of a RST_STREAM payload (RFC 9113 §6.4): exactly 4 bytes.
pub fn parse_rst_stream(payload: &[u8]) -> Result<u32, ConnectionError> {
    let bytes: [u8; 4] = payload
        .try_into()
        .map_err(|_| connection_error(code::FRAME_SIZE_ERROR, "RST_STREAM length is not 4"))?;
    Ok(u32::from_be_bytes(bytes))
}

/// The last stream id and error code of a GOAWAY payload (RFC 9113 §6.8): at least 8 bytes.
pub fn parse_goaway(payload: &[u8]) -> Result<(u32, u32), ConnectionError> {
    if payload.len() < 8 {
        return Err(connection_error(
            code::FRAME_SIZE_ERROR,
            "GOAWAY shorter than 8 bytes",
        ));
    }
    let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
    let error = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
    Ok((last, error))
}

/// Checks a PING payload's length (RFC 9113 §6.7): exactly 8 bytes.
pub fn check_ping(payload: &[u8]) -> Result<(), ConnectionError> {
    if payload.len() != 8 {
        return Err(connection_error(
            code::FRAME_SIZE_ERROR,
            "PING length is not 8",
        ));
    }
    Ok(())
}

/// The header of the next frame in `buf` once the whole frame has arrived; the frame stays
/// in the buffer (its payload is `buf[HEADER_LEN..HEADER_LEN + length]`), to be read in place
/// and then skipped with [`Header::frame_len`]. `Ok(None)` when the frame has not fully
/// arrived; a frame larger than our SETTINGS_MAX_FRAME_SIZE is a FRAME_SIZE_ERROR (RFC 9113
/// §4.2). Reading in place is why: splitting every frame off as `Bytes` cost each call a
/// split, a freeze and a reference count per frame, for payloads nearly all read and dropped
/// at once.
pub fn next_frame(buf: &[u8]) -> Result<Option<Header>, ConnectionError> {
    let Some(raw) = buf.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    let header = Header::parse(raw);
    if header.length > DEFAULT_MAX_FRAME_SIZE {
        return Err(connection_error(
            code::FRAME_SIZE_ERROR,
            oversized_frame_reason(raw),
        ));
    }
    if buf.len() < header.frame_len() {
        return Ok(None);
    }
    Ok(Some(header))
}

/// Why a frame header claimed more than SETTINGS_MAX_FRAME_SIZE. An HTTP/1 status line read as
/// a frame header always does ("HTT" is a 4.7 MB length): a server that answers HTTP/2's
/// preface in HTTP/1 (no plaintext HTTP/2 on that port) is named as such, not as a frame size.
fn oversized_frame_reason(header: &[u8; HEADER_LEN]) -> &'static str {
    match header {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'1', ..] => {
            "the server answered in HTTP/1.1, not HTTP/2 with prior knowledge (turn on its plaintext HTTP/2, or use TLS if it offers HTTP/2 by ALPN)"
        }
        [b'H', b'T', b'T', b'P', b'/', b'1', ..] => {
            "the server answered in HTTP/1.0, not HTTP/2 with prior knowledge (turn on its plaintext HTTP/2, or use TLS if it offers HTTP/2 by ALPN)"
        }
        _ => "frame larger than SETTINGS_MAX_FRAME_SIZE",
    }
}

/// Appends a frame header.
pub fn write_header(out: &mut Vec<u8>, length: usize, kind: u8, flags: u8, stream: u32) {
    // One append of the nine bytes: every call writes two or three of these, and four
    // appends cost four capacity checks.
    let [_, l0, l1, l2] = (length as u32).to_be_bytes();
    let [s0, s1, s2, s3] = (stream & 0x7fff_ffff).to_be_bytes();
    out.extend_from_slice(&[l0, l1, l2, kind, flags, s0, s1, s2, s3]);
}

/// Appends a SETTINGS frame.
pub fn write_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    write_header(out, settings.len() * 6, kind::SETTINGS, 0, 0);
    for (id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends a SETTINGS acknowledgement.
pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_header(out, 0, kind::SETTINGS, flags::ACK, 0);
}

/// Appends a PING acknowledgement echoing `payload`.
pub fn write_ping_ack(out: &mut Vec<u8>, payload: &[u8]) {
    write_header(out, payload.len(), kind::PING, flags::ACK, 0);
    out.extend_from_slice(payload);
}

/// Appends a PING (not an ACK) with these 8 bytes.
pub fn write_ping(out: &mut Vec<u8>, payload: &[u8; 8]) {
    write_header(out, payload.len(), kind::PING, 0, 0);
    out.extend_from_slice(payload);
}

/// Appends a GOAWAY.
pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32, debug: &[u8]) {
    write_header(out, 8 + debug.len(), kind::GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(debug);
}

/// Appends a RST_STREAM.
pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    write_header(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends a WINDOW_UPDATE.
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_header(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// Appends a DATA frame.
pub fn write_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    write_header(
        out,
        data.len(),
        kind::DATA,
        if end_stream { flags::END_STREAM } else { 0 },
        stream,
    );
    out.extend_from_slice(data);
}

/// Appends a header block as HEADERS plus as many CONTINUATION frames as `max_frame` needs.
pub fn write_headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    if block.len() <= max_frame.max(1) {
        // One frame (gRPC's heads and trailers always are): no CONTINUATION to plan.
        let flags = flags::END_HEADERS | if end_stream { flags::END_STREAM } else { 0 };
        write_header(out, block.len(), kind::HEADERS, flags, stream);
        out.extend_from_slice(block);
        return;
    }
    let mut chunks = block.chunks(max_frame.max(1)).peekable();
    let mut first = true;
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let mut frame_flags = if last { flags::END_HEADERS } else { 0 };
        let frame_kind = if first {
            if end_stream {
                frame_flags |= flags::END_STREAM;
            }
            kind::HEADERS
        } else {
            kind::CONTINUATION
        };
        write_header(out, chunk.len(), frame_kind, frame_flags, stream);
        out.extend_from_slice(chunk);
        first = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let mut out = Vec::new();
        write_header(&mut out, 300, kind::DATA, flags::END_STREAM, 5);
        let header = Header::parse(out[..9].try_into().unwrap());
        assert_eq!(
            header,
            Header {
                length: 300,
                kind: kind::DATA,
                flags: flags::END_STREAM,
                stream: 5
            }
        );
    }

    #[test]
    fn padding_and_priority_are_checked() {
        let padded = Header {
            length: 4,
            kind: kind::DATA,
            flags: flags::PADDED,
            stream: 1,
        };
        assert_eq!(strip_padding(&padded, &[2, b'a', 0, 0]), Ok(1..2));
        assert_eq!(
            strip_padding(&padded, &[4, 0, 0, 0]).unwrap_err().code,
            code::PROTOCOL_ERROR
        );
        let prioritized = Header {
            length: 3,
            kind: kind::HEADERS,
            flags: flags::PRIORITY,
            stream: 1,
        };
        assert_eq!(
            headers_fragment(&prioritized, &[0; 3]).unwrap_err().code,
            code::FRAME_SIZE_ERROR
        );
    }

    #[test]
    fn settings_values_are_validated() {
        assert_eq!(
            parse_settings(&[0, 3, 0, 0, 0]).err().unwrap().code,
            code::FRAME_SIZE_ERROR
        );
        assert_eq!(
            parse_settings(&[0, 2, 0, 0, 0, 2]).err().unwrap().code,
            code::PROTOCOL_ERROR
        );
        assert_eq!(
            parse_settings(&[0, 4, 0x80, 0, 0, 0]).err().unwrap().code,
            code::FLOW_CONTROL_ERROR
        );
        assert_eq!(
            parse_settings(&[0, 5, 0, 0, 0x10, 0]).err().unwrap().code,
            code::PROTOCOL_ERROR
        );
        let parsed: Vec<_> = parse_settings(&[0, 3, 0, 0, 0, 7]).unwrap().collect();
        assert_eq!(parsed, [(setting::MAX_CONCURRENT_STREAMS, 7)]);
    }

    #[test]
    fn long_header_blocks_continue() {
        let mut out = Vec::new();
        write_headers(&mut out, 1, &[7u8; 25], true, 10);
        let first = Header::parse(out[..9].try_into().unwrap());
        assert_eq!(
            (first.kind, first.flags, first.length),
            (kind::HEADERS, flags::END_STREAM, 10)
        );
        let last = Header::parse(out[38..47].try_into().unwrap());
        assert_eq!(
            (last.kind, last.flags, last.length),
            (kind::CONTINUATION, flags::END_HEADERS, 5)
        );
        // At the boundaries: a block of exactly one frame, one byte more, and none.
        for (len, frames) in [(10usize, 1usize), (11, 2), (0, 1)] {
            let mut out = Vec::new();
            write_headers(&mut out, 3, &vec![7u8; len], false, 10);
            let mut at = 0;
            let mut seen = Vec::new();
            while at < out.len() {
                let header = Header::parse(out[at..at + 9].try_into().unwrap());
                seen.push((header.kind, header.flags, header.length, header.stream));
                at += header.frame_len();
            }
            assert_eq!(at, out.len(), "{len}: frames end where the bytes do");
            assert_eq!(seen.len(), frames, "{len}: {seen:?}");
            assert_eq!(seen[0].0, kind::HEADERS, "{len}");
            assert_eq!(
                seen.last().unwrap().1,
                flags::END_HEADERS,
                "{len}: {seen:?}"
            );
            assert!(seen.iter().all(|frame| frame.3 == 3), "{len}");
            let payload: u32 = seen.iter().map(|frame| frame.2).sum();
            assert_eq!(payload as usize, len);
        }
    }
}
