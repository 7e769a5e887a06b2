//! What the engine knows of gRPC beside HTTP/2, in one place for the client, the server and
//! the crates above: the message prefix, and `grpc-message`'s percent-encoding both ways.

use std::borrow::Cow;

/// The length a gRPC message prefix announces (a flag byte, then the length as a big-endian
/// `u32`), once `bytes` holds the whole 5-byte prefix.
#[inline]
pub fn declared_message_len(bytes: &[u8]) -> Option<usize> {
    match bytes {
        [_, a, b, c, d, ..] => Some(u32::from_be_bytes([*a, *b, *c, *d]) as usize),
        _ => None,
    }
}

/// A header value that is a decimal number, as `:status` (RFC 9110 §15: 3DIGIT) and
/// `grpc-status` (1*DIGIT) are: digits only, no sign, no space; `None` for anything else or a
/// number above `u32::MAX`.
///
/// Why by hand: the client reads two of them per call, and going through `str::from_utf8`
/// and `str::parse` cost ~100 instructions per call, a tenth of the client's receive path.
#[inline]
pub fn parse_decimal(value: &[u8]) -> Option<u32> {
    if value.is_empty() || value.len() > 10 {
        return None;
    }
    let mut number: u64 = 0;
    for &byte in value {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        number = number * 10 + u64::from(digit);
    }
    u32::try_from(number).ok()
}

/// `grpc-message` is percent-encoded: printable ASCII except `%` passes, the rest is `%XX`.
pub fn percent_encode(text: &str) -> Cow<'_, str> {
    if text.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'%') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for byte in text.bytes() {
        if (0x20..0x7f).contains(&byte) && byte != b'%' {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    Cow::Owned(out)
}

/// `grpc-message` is percent-encoded (gRPC over HTTP/2); decode it for display.
pub fn percent_decode(value: &[u8]) -> String {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        if value[i] == b'%' && i + 2 < value.len() {
            let hex = std::str::from_utf8(&value[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(byte) = hex {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(value[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_header_values_are_digits_only() {
        assert_eq!(parse_decimal(b"200"), Some(200));
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_decimal(b"4294967296"), None);
        assert_eq!(parse_decimal(b"99999999999"), None);
        for bad in [&b""[..], b"+200", b"-1", b" 200", b"20 0", b"2a", b"\xff"] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
        // The same answers as the standard library for every digit string it accepts.
        for n in [1u32, 9, 10, 99, 100, 404, 65_535, 65_536, 1_000_000_007] {
            assert_eq!(parse_decimal(n.to_string().as_bytes()), Some(n));
        }
    }

    #[test]
    fn grpc_messages_are_percent_encoded() {
        assert_eq!(percent_encode("100% done"), "100%25 done");
        assert_eq!(percent_encode("é"), "%C3%A9");
        assert_eq!(percent_encode("plain"), "plain");
    }

    #[test]
    fn grpc_message_is_percent_decoded() {
        assert_eq!(percent_decode(b"no%20such%20thing"), "no such thing");
        assert_eq!(percent_decode(b"100%"), "100%");
        assert_eq!(percent_decode(b"%zz"), "%zz");
        assert_eq!(
            percent_decode(percent_encode("100% é").as_bytes()),
            "100% é"
        );
    }
}
