//! HTTP/2 and gRPC bytes written by hand (RFC 9113 §4.1, RFC 7541, gRPC's length prefix),
//! independent of the engine under test: a bug in grpclab-h2's writer cannot hide one in its
//! reader.

/// One frame's bytes: the 9-byte header (length from the payload) and the payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    frame_with_length(kind, flags, stream, payload, payload.len() as u32)
}

/// One frame whose header declares `length`, which may lie about the payload that follows.
pub fn frame_with_length(kind: u8, flags: u8, stream: u32, payload: &[u8], length: u32) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(9 + payload.len());
    bytes.extend_from_slice(&length.to_be_bytes()[1..]);
    bytes.push(kind);
    bytes.push(flags);
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// The client connection preface and a SETTINGS frame carrying `settings` (id, value) pairs,
/// none for an empty one.
pub fn preface(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut bytes = PREFACE.to_vec();
    let mut payload = Vec::with_capacity(6 * settings.len());
    for (id, value) in settings {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    bytes.extend(frame(codes::SETTINGS, 0, 0, &payload));
    bytes
}

/// The 24 bytes every HTTP/2 client connection starts with (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types, flags, error codes and setting identifiers (RFC 9113 §6, §7, §6.5.2).
pub mod codes {
    /// DATA frame type.
    pub const DATA: u8 = 0x0;
    /// HEADERS frame type.
    pub const HEADERS: u8 = 0x1;
    /// RST_STREAM frame type.
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS frame type.
    pub const SETTINGS: u8 = 0x4;
    /// PING frame type.
    pub const PING: u8 = 0x6;
    /// GOAWAY frame type.
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE frame type.
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION frame type.
    pub const CONTINUATION: u8 = 0x9;
    /// END_STREAM flag (DATA, HEADERS).
    pub const END_STREAM: u8 = 0x1;
    /// ACK flag (SETTINGS, PING).
    pub const ACK: u8 = 0x1;
    /// END_HEADERS flag (HEADERS, CONTINUATION).
    pub const END_HEADERS: u8 = 0x4;
    /// PROTOCOL_ERROR error code.
    pub const PROTOCOL_ERROR: u32 = 0x1;
    /// FRAME_SIZE_ERROR error code.
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    /// REFUSED_STREAM error code.
    pub const REFUSED_STREAM: u32 = 0x7;
    /// COMPRESSION_ERROR error code.
    pub const COMPRESSION_ERROR: u32 = 0x9;
    /// SETTINGS_MAX_CONCURRENT_STREAMS identifier.
    pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE identifier.
    pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
}

/// A request header block in HPACK without Huffman or indexing (RFC 7541 §6.2.2), enough for
/// raw tests: `:method POST`, `:scheme http`, `:path`, `:authority localhost`,
/// `content-type application/grpc`.
pub fn request_header_block(path: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // indexed: :method POST, :scheme http
                                      // Literal without indexing, name from the static table: the index in a 4-bit prefix.
    let mut literal_indexed_name = |index: &[u8], value: &str| {
        block.extend_from_slice(index);
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    };
    literal_indexed_name(&[0x04], path); // :path (static index 4)
    literal_indexed_name(&[0x01], "localhost"); // :authority (static index 1)
    literal_indexed_name(&[0x0f, 0x10], "application/grpc"); // content-type (31 = 15 + 16)
    block
}

/// A gRPC message: the uncompressed prefix (a zero flag byte and a 4-byte length), then
/// `message`.
pub fn grpc_message(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_its_header_then_its_payload() {
        assert_eq!(
            frame(0x6, 0x1, 3, b"12345678"),
            [&[0, 0, 8, 6, 1, 0, 0, 0, 3][..], b"12345678"].concat()
        );
        assert_eq!(grpc_message(b"ab"), [0, 0, 0, 0, 2, b'a', b'b']);
        let block = request_header_block("/a.B/C");
        assert_eq!(&block[..4], &[0x83, 0x86, 0x04, 6]);
        let lying = frame_with_length(0x0, 0, 1, b"ab", 7);
        assert_eq!(&lying[..3], &[0, 0, 7]);
        let start = preface(&[(codes::SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
        assert_eq!(&start[..24], PREFACE);
        assert_eq!(
            &start[24..],
            &frame(codes::SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0])[..]
        );
    }
}
