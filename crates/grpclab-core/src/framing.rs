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

/// Frames one message gzip-compressed: flag 1, length of the compressed bytes, gzip data.
pub fn frame_gzip(message: &[u8]) -> Bytes {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(message.len() / 2 + 32),
        flate2::Compression::default(),
    );
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(message);
    let compressed = encoder.finish().unwrap_or_default();
    let mut framed = BytesMut::with_capacity(PREFIX_LEN + compressed.len());
    framed.put_u8(1);
    framed.put_u32(compressed.len() as u32);
    framed.put_slice(&compressed);
    framed.freeze()
}

/// Inflates a gzip message, refusing to produce more than `limit` bytes.
pub fn gunzip(compressed: &[u8], limit: usize) -> Result<Vec<u8>, FrameError> {
    use std::io::Read;
    let mut inflated = Vec::new();
    // Read one byte past the limit: getting it means the message is too large, without ever
    // holding more than limit + 1 bytes.
    let mut reader = flate2::read::GzDecoder::new(compressed).take(limit as u64 + 1);
    reader
        .read_to_end(&mut inflated)
        .map_err(|err| FrameError::Gzip(err.to_string()))?;
    if inflated.len() > limit {
        return Err(FrameError::TooLarge(limit));
    }
    Ok(inflated)
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

/// Splits a unary body (exactly one uncompressed length-prefixed message) into its message.
pub fn unframe_single(body: &[u8]) -> Result<&[u8], FrameError> {
    match unframe_flagged(body)? {
        (0, message) => Ok(message),
        _ => Err(FrameError::Compressed),
    }
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
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let amount = digits
        .iter()
        .fold(0u64, |acc, digit| acc * 10 + u64::from(digit - b'0'));
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
    }
}
