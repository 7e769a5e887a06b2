//! gRPC over HTTP/2 message framing ("Length-Prefixed-Message": a compressed flag byte, a
//! big-endian u32 length, the message) and the `grpc-timeout` header.

use bytes::{BufMut, Bytes, BytesMut};
use std::time::Duration;

/// Length of the prefix in front of every gRPC message.
pub const PREFIX_LEN: usize = 5;

/// Frames one uncompressed protobuf message for the wire: flag 0, length, message.
pub fn frame_message(message: &[u8]) -> Bytes {
    let mut framed = BytesMut::with_capacity(PREFIX_LEN + message.len());
    framed.put_u8(0);
    framed.put_u32(message.len() as u32);
    framed.put_slice(message);
    framed.freeze()
}

/// A problem with a length-prefixed message as received.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the prefix or its declared length.
    #[error("truncated gRPC message: {have} bytes of {need}")]
    Truncated {
        /// bytes present
        have: usize,
        /// bytes the prefix promised (or the prefix itself)
        need: usize,
    },
    /// Bytes after the single message a unary reply may hold.
    #[error("{0} bytes after the end of the gRPC message")]
    Trailing(usize),
    /// The compressed flag is set, but no compression was negotiated (no `-e`).
    #[error("compressed gRPC message, but no compression was negotiated")]
    Compressed,
    /// The compressed message does not inflate as gzip.
    #[error("compressed gRPC message is not valid gzip: {0}")]
    Gzip(String),
    /// The message inflates past the limit (a decompression bomb, or a limit too small).
    #[error("compressed gRPC message inflates past {0} bytes")]
    TooLarge(usize),
}

/// The name of the one compression grpclab speaks, in `grpc-encoding`.
pub const GZIP: &str = "gzip";

// gzip (RFC 1952) = a 10-byte header, raw deflate, CRC-32 and length. Built by hand around
// flate2's raw `Compress`/`Decompress` so that each thread keeps one of each and resets it per
// message: `GzEncoder::new` allocates and zeroes deflate's ~256 KiB state for every message,
// which made lab slower under gzip than tonic (docs/benchmarks-history.md, "gzip").
thread_local! {
    static DEFLATE: std::cell::RefCell<flate2::Compress> =
        std::cell::RefCell::new(flate2::Compress::new(flate2::Compression::default(), false));
    static INFLATE: std::cell::RefCell<flate2::Decompress> =
        std::cell::RefCell::new(flate2::Decompress::new(false));
}

/// The gzip header grpclab writes: deflate, no name, no time, unknown OS.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// Frames one message gzip-compressed: flag 1, length of the compressed bytes, gzip data.
pub fn frame_gzip(message: &[u8]) -> Bytes {
    let mut out: Vec<u8> =
        Vec::with_capacity(PREFIX_LEN + GZIP_HEADER.len() + message.len() / 2 + 64);
    out.extend_from_slice(&[1, 0, 0, 0, 0]);
    out.extend_from_slice(&GZIP_HEADER);
    DEFLATE.with(|deflate| {
        let mut deflate = deflate.borrow_mut();
        deflate.reset();
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.len().max(256));
            }
            let consumed = deflate.total_in() as usize;
            match deflate.compress_vec(
                &message[consumed..],
                &mut out,
                flate2::FlushCompress::Finish,
            ) {
                Ok(flate2::Status::StreamEnd) => break,
                Ok(_) => continue,
                // Compressing into a growing Vec cannot fail; stop rather than loop.
                Err(_) => break,
            }
        }
    });
    let mut crc = flate2::Crc::new();
    crc.update(message);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&(message.len() as u32).to_le_bytes());
    let compressed_len = (out.len() - PREFIX_LEN) as u32;
    out[1..PREFIX_LEN].copy_from_slice(&compressed_len.to_be_bytes());
    Bytes::from(out)
}

/// A framed uncompressed message re-framed gzip-compressed; anything else (not a single
/// uncompressed message) is returned as it is.
pub fn gzip_framed(framed: &Bytes) -> Bytes {
    match unframe_single(framed) {
        Ok(message) => frame_gzip(message),
        Err(_) => framed.clone(),
    }
}

/// Inflates a gzip message, refusing to produce more than `limit` bytes.
pub fn gunzip(compressed: &[u8], limit: usize) -> Result<Vec<u8>, FrameError> {
    let bad = |why: &str| FrameError::Gzip(why.to_owned());
    let body_start = gzip_header_len(compressed).ok_or_else(|| bad("bad gzip header"))?;
    if compressed.len() < body_start + 8 {
        return Err(bad("gzip data ends early"));
    }
    let trailer = &compressed[compressed.len() - 8..];
    let expected_crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let expected_len = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
    // The trailer states the size: refuse early what would pass the limit (the inflate below
    // still stops at limit + 1 whatever the trailer claims).
    if expected_len as usize > limit {
        return Err(FrameError::TooLarge(limit));
    }
    let deflated = &compressed[body_start..compressed.len() - 8];
    let mut inflated = Vec::with_capacity((expected_len as usize).min(limit) + 1);
    INFLATE.with(|inflate| {
        let mut inflate = inflate.borrow_mut();
        inflate.reset(false);
        loop {
            if inflated.len() > limit {
                return Err(FrameError::TooLarge(limit));
            }
            if inflated.capacity() == inflated.len() {
                // Grow by doubling, never past limit + 1 (enough to see the limit crossed).
                let room = (limit + 1 - inflated.len()).min(inflated.len().max(256));
                inflated.reserve(room);
            }
            let consumed = inflate.total_in() as usize;
            let before = (inflate.total_in(), inflate.total_out());
            match inflate.decompress_vec(
                &deflated[consumed..],
                &mut inflated,
                flate2::FlushDecompress::Finish,
            ) {
                Ok(flate2::Status::StreamEnd) => return Ok(()),
                Ok(_)
                    if (inflate.total_in(), inflate.total_out()) == before
                        && inflated.capacity() > inflated.len() =>
                {
                    return Err(bad("gzip data ends early"))
                }
                Ok(_) => continue,
                Err(err) => return Err(FrameError::Gzip(err.to_string())),
            }
        }
    })?;
    if inflated.len() > limit {
        return Err(FrameError::TooLarge(limit));
    }
    let mut crc = flate2::Crc::new();
    crc.update(&inflated);
    if crc.sum() != expected_crc || inflated.len() as u32 != expected_len {
        return Err(bad("gzip checksum or length does not match"));
    }
    Ok(inflated)
}

/// The length of a gzip member's header (RFC 1952 §2.3), optional fields included.
fn gzip_header_len(data: &[u8]) -> Option<usize> {
    if data.len() < 10 || data[0] != 0x1f || data[1] != 0x8b || data[2] != 8 {
        return None;
    }
    let flags = data[3];
    let mut at = 10usize;
    if flags & 0x04 != 0 {
        // FEXTRA: two bytes of length, then that many bytes.
        let len = u16::from_le_bytes([*data.get(at)?, *data.get(at + 1)?]) as usize;
        at += 2 + len;
    }
    for flag in [0x08u8, 0x10] {
        // FNAME, FCOMMENT: zero-terminated.
        if flags & flag != 0 {
            at += data.get(at..)?.iter().position(|&b| b == 0)? + 1;
        }
    }
    if flags & 0x02 != 0 {
        at += 2; // FHCRC
    }
    (at <= data.len()).then_some(at)
}

/// Splits a unary body into its message, inflating it when the compressed flag is set and
/// gzip was negotiated (`gzip_ok`); at most `limit` bytes inflated.
pub fn unframe_maybe_gzip(
    body: &[u8],
    gzip_ok: bool,
    limit: usize,
) -> Result<std::borrow::Cow<'_, [u8]>, FrameError> {
    match unframe_flagged(body)? {
        (0, message) => Ok(std::borrow::Cow::Borrowed(message)),
        (_, message) if gzip_ok => gunzip(message, limit).map(std::borrow::Cow::Owned),
        _ => Err(FrameError::Compressed),
    }
}

/// A reply message: borrowed from the body, or inflated.
pub type Message<'a> = std::borrow::Cow<'a, [u8]>;

/// A server stream's body, its messages back to back to its end: how many there are, and
/// the first (inflated when its compressed flag is set and gzip was negotiated, at most
/// `limit` bytes), `None` for a stream of none.
pub fn stream_messages(
    body: &[u8],
    gzip_ok: bool,
    limit: usize,
) -> Result<(u64, Option<Message<'_>>), FrameError> {
    let mut count = 0u64;
    let mut first = None;
    let mut rest = body;
    while !rest.is_empty() {
        let Some(prefix) = rest.get(..PREFIX_LEN) else {
            return Err(FrameError::Truncated {
                have: rest.len(),
                need: PREFIX_LEN,
            });
        };
        let end =
            PREFIX_LEN + u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
        let Some((frame, after)) = rest.split_at_checked(end) else {
            return Err(FrameError::Truncated {
                have: rest.len(),
                need: end,
            });
        };
        if first.is_none() {
            first = Some(unframe_maybe_gzip(frame, gzip_ok, limit)?);
        }
        count += 1;
        rest = after;
    }
    Ok((count, first))
}

/// Splits a unary body (exactly one uncompressed length-prefixed message) into its message.
pub fn unframe_single(body: &[u8]) -> Result<&[u8], FrameError> {
    match unframe_flagged(body)? {
        (0, message) => Ok(message),
        _ => Err(FrameError::Compressed),
    }
}

/// Splits bytes holding uncompressed gRPC-framed messages back to back, exactly to their end,
/// into (each whole frame, its message); `None` when they are not such a sequence.
pub fn split_frames(mut bytes: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let len = u32::from_be_bytes(bytes.get(1..PREFIX_LEN)?.try_into().ok()?) as usize;
        let (frame, rest) = bytes.split_at_checked(PREFIX_LEN + len)?;
        frames.push((frame, unframe_single(frame).ok()?));
        bytes = rest;
    }
    Some(frames)
}

/// Splits a unary body into its compressed flag and its (possibly compressed) message.
fn unframe_flagged(body: &[u8]) -> Result<(u8, &[u8]), FrameError> {
    if body.len() < PREFIX_LEN {
        return Err(FrameError::Truncated {
            have: body.len(),
            need: PREFIX_LEN,
        });
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    let end = PREFIX_LEN + len;
    match body.len() {
        have if have < end => Err(FrameError::Truncated { have, need: end }),
        have if have > end => Err(FrameError::Trailing(have - end)),
        _ => Ok((body[0], &body[PREFIX_LEN..end])),
    }
}

/// Formats a `grpc-timeout` value: at most 8 digits and a unit, choosing the finest unit that
/// fits so the server sees the deadline the user asked for.
pub fn format_grpc_timeout(timeout: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let nanos = timeout.as_nanos();
    let units: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    for (per_unit, unit) in units {
        // Round up, so a deadline is never shorter on the wire than asked.
        let value = nanos.div_ceil(per_unit);
        if value <= MAX {
            return format!("{value}{unit}");
        }
    }
    format!("{MAX}H")
}

/// Parses a `grpc-timeout` value (`1..=8` digits and one of `H M S m u n`).
pub fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    // One pass, each byte checked as it is added (lab parses this on every call that has a
    // deadline); eight digits cannot overflow.
    let mut amount = 0u64;
    for &digit in digits {
        let value = digit.wrapping_sub(b'0');
        if value > 9 {
            return None;
        }
        amount = amount * 10 + u64::from(value);
    }
    Some(match unit {
        b'H' => Duration::from_secs(amount * 3600),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_frames_round_trip_and_bombs_are_refused() {
        let message = b"hello hello hello hello hello".repeat(10);
        let framed = frame_gzip(&message);
        assert_eq!(framed[0], 1);
        assert_eq!(unframe_single(&framed), Err(FrameError::Compressed));
        assert_eq!(
            unframe_maybe_gzip(&framed, true, 1 << 20).unwrap().as_ref(),
            &message[..]
        );
        assert_eq!(
            unframe_maybe_gzip(&framed, false, 1 << 20),
            Err(FrameError::Compressed)
        );
        // 1 MiB of zeros compresses to about 1 KiB: refused past the limit, never inflated whole.
        let bomb = frame_gzip(&vec![0u8; 1 << 20]);
        assert!(bomb.len() < 4096);
        assert_eq!(
            unframe_maybe_gzip(&bomb, true, 64 * 1024),
            Err(FrameError::TooLarge(64 * 1024))
        );
        // A wrong CRC in the gzip trailer.
        let mut broken = framed.to_vec();
        let crc = broken.len() - 6;
        broken[crc] ^= 0xff;
        assert!(matches!(
            unframe_maybe_gzip(&broken, true, 1 << 20),
            Err(FrameError::Gzip(_))
        ));
        // Other encoders' gzip (a name in the header, another level) inflates too.
        let mut foreign = flate2::GzBuilder::new()
            .filename("x.bin")
            .write(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut foreign, &message).unwrap();
        let foreign = foreign.finish().unwrap();
        assert_eq!(gunzip(&foreign, 1 << 20).unwrap(), message);
        // A reused compressor produces the same as a fresh one, message after message.
        assert_eq!(frame_gzip(&message), framed);
        // Uncompressed bodies pass through untouched either way.
        let plain = frame_message(b"x");
        assert_eq!(unframe_maybe_gzip(&plain, true, 10).unwrap().as_ref(), b"x");
    }

    #[test]
    fn frames_and_unframes() {
        let framed = frame_message(b"hello");
        assert_eq!(&framed[..], b"\0\0\0\0\x05hello");
        assert_eq!(unframe_single(&framed), Ok(&b"hello"[..]));
    }

    #[test]
    fn rejects_bad_frames() {
        assert_eq!(
            unframe_single(b"\0\0\0"),
            Err(FrameError::Truncated { have: 3, need: 5 })
        );
        assert_eq!(
            unframe_single(b"\0\0\0\0\x05hel"),
            Err(FrameError::Truncated { have: 8, need: 10 })
        );
        assert_eq!(
            unframe_single(b"\0\0\0\0\x01ab"),
            Err(FrameError::Trailing(1))
        );
        assert_eq!(unframe_single(b"\x01\0\0\0\0"), Err(FrameError::Compressed));
    }

    #[test]
    fn timeouts_round_trip_within_eight_digits() {
        assert_eq!(format_grpc_timeout(Duration::from_secs(20)), "20000000u");
        assert_eq!(format_grpc_timeout(Duration::from_millis(1500)), "1500000u");
        assert_eq!(
            format_grpc_timeout(Duration::from_secs(3600 * 24)),
            "86400000m"
        );
        for text in ["20000000u", "86400S", "5m", "7H"] {
            let parsed = parse_grpc_timeout(text.as_bytes()).unwrap();
            assert_eq!(
                parse_grpc_timeout(format_grpc_timeout(parsed).as_bytes()),
                Some(parsed)
            );
        }
        assert_eq!(parse_grpc_timeout(b"123456789S"), None);
        assert_eq!(parse_grpc_timeout(b"10x"), None);
        for malformed in [&b"1a0S"[..], b"1/S", b"1:S", b"S", b"", b"-5S", b" 5S"] {
            assert_eq!(parse_grpc_timeout(malformed), None, "{malformed:?}");
        }
        assert_eq!(
            parse_grpc_timeout(b"00000001n"),
            Some(Duration::from_nanos(1))
        );
        assert_eq!(
            parse_grpc_timeout(b"99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
    }

    #[test]
    fn a_streams_messages_are_counted_and_its_first_read() {
        let mut body = Vec::new();
        for message in [&b"one"[..], b"", b"three"] {
            body.extend_from_slice(&frame_message(message));
        }
        let (count, first) = stream_messages(&body, false, 1 << 20).unwrap();
        assert_eq!((count, first.as_deref()), (3, Some(&b"one"[..])));
        assert_eq!(stream_messages(&[], false, 1 << 20).unwrap().0, 0);
        // A message cut short, in its prefix or its bytes, is an error, not a count.
        assert!(matches!(
            stream_messages(&body[..body.len() - 1], false, 1 << 20),
            Err(FrameError::Truncated { .. })
        ));
        assert!(matches!(
            stream_messages(&body[..2], false, 1 << 20),
            Err(FrameError::Truncated { have: 2, need: 5 })
        ));
        // A compressed first message needs gzip negotiated.
        let gzipped = frame_gzip(b"inflated");
        assert!(matches!(
            stream_messages(&gzipped, false, 1 << 20),
            Err(FrameError::Compressed)
        ));
        let (count, first) = stream_messages(&gzipped, true, 1 << 20).unwrap();
        assert_eq!((count, first.as_deref()), (1, Some(&b"inflated"[..])));
    }
}
