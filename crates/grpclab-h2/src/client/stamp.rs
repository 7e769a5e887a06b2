//! Reading a server's stamp out of each reply of a stream as its bytes go by: a top-level
//! field holding the time the server produced the message (nanoseconds since the Unix epoch,
//! e.g. the streaming echo's `fixed64 sent_unix_nanos = 3`). The scanner walks the protobuf
//! wire format incrementally, across any chunking, keeping only the field it is after: a
//! payload of any size is skipped, never copied.

/// Which top-level field of a reply carries its stamp, and how it is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StampField {
    /// The field's number.
    pub number: u32,
    /// `fixed64`/`sfixed64` (wire type 1) or `uint64`/`int64` (wire type 0).
    pub encoding: StampEncoding,
}

/// How a stamp field is encoded on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StampEncoding {
    /// Eight little-endian bytes (wire type 1).
    Fixed64,
    /// A varint (wire type 0).
    Varint,
}

/// Wire types (protobuf encoding).
const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;
const I32: u8 = 5;

/// Where the scanner is inside a message.
#[derive(Debug, Clone, Copy)]
enum State {
    /// Reading a field key (a varint).
    Key { value: u64, shift: u32 },
    /// Reading a varint value; `wanted`: it is the stamp.
    Varint {
        wanted: bool,
        value: u64,
        shift: u32,
    },
    /// Reading a length prefix, then skipping that many bytes.
    Length { value: u64, shift: u32 },
    /// Reading eight bytes (`wanted`: the stamp, little-endian) or skipping `left` bytes.
    Fixed {
        wanted: bool,
        value: u64,
        read: u8,
        left: u64,
    },
    /// The message is not valid protobuf (or uses groups): no stamp is read from it.
    Broken,
}

/// Reads one stamp per message from the bytes of consecutive messages' bodies.
#[derive(Debug, Clone)]
pub(crate) struct StampScanner {
    field: StampField,
    state: State,
    /// The stamp's last occurrence in the current message (the last one wins, as in protobuf).
    found: Option<u64>,
}

impl StampScanner {
    pub(crate) fn new(field: StampField) -> StampScanner {
        StampScanner {
            field,
            state: State::Key { value: 0, shift: 0 },
            found: None,
        }
    }

    /// The current message is over: its stamp (`None` when it had none, was cut inside a
    /// field or was not protobuf), and the scanner is ready for the next.
    pub(crate) fn finish(&mut self) -> Option<u64> {
        let stamp = match self.state {
            State::Key { shift: 0, .. } => self.found,
            _ => None,
        };
        self.state = State::Key { value: 0, shift: 0 };
        self.found = None;
        stamp
    }

    /// A whole message's body in one slice (the common case: a reply within one DATA
    /// frame): scanned straight through, several times faster than byte-wise [`Self::feed`].
    /// [`Self::finish`] then gives its stamp.
    pub(crate) fn whole(&mut self, body: &[u8]) {
        match read_whole(body, self.field) {
            Some(found) => self.found = found,
            None => self.state = State::Broken,
        }
    }

    /// Feeds bytes of the current message's body.
    pub(crate) fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            match &mut self.state {
                State::Broken => return,
                State::Fixed {
                    wanted,
                    value,
                    read,
                    left,
                } => {
                    if *wanted {
                        *value |= u64::from(data[0]) << (8 * u32::from(*read));
                        *read += 1;
                        *left -= 1;
                        data = &data[1..];
                    } else {
                        let take = (*left).min(data.len() as u64) as usize;
                        *left -= take as u64;
                        data = &data[take..];
                    }
                    if *left == 0 {
                        if *wanted {
                            self.found = Some(*value);
                        }
                        self.state = State::Key { value: 0, shift: 0 };
                    }
                }
                State::Key { value, shift }
                | State::Varint { value, shift, .. }
                | State::Length { value, shift } => {
                    let byte = data[0];
                    data = &data[1..];
                    if *shift >= 64 {
                        self.state = State::Broken;
                        return;
                    }
                    *value |= u64::from(byte & 0x7f) << *shift;
                    *shift += 7;
                    if byte & 0x80 == 0 {
                        let value = *value;
                        self.state = self.after_varint(value);
                    }
                }
            }
        }
    }

    /// The state after a whole varint in `self.state`.
    fn after_varint(&mut self, value: u64) -> State {
        match self.state {
            State::Key { .. } => {
                let number = value >> 3;
                let wire_type = (value & 7) as u8;
                let ours = number == u64::from(self.field.number);
                match wire_type {
                    VARINT => State::Varint {
                        wanted: ours && self.field.encoding == StampEncoding::Varint,
                        value: 0,
                        shift: 0,
                    },
                    I64 => State::Fixed {
                        wanted: ours && self.field.encoding == StampEncoding::Fixed64,
                        value: 0,
                        read: 0,
                        left: 8,
                    },
                    I32 => State::Fixed {
                        wanted: false,
                        value: 0,
                        read: 0,
                        left: 4,
                    },
                    LEN => State::Length { value: 0, shift: 0 },
                    _ => State::Broken,
                }
            }
            State::Varint { wanted, .. } => {
                if wanted {
                    self.found = Some(value);
                }
                State::Key { value: 0, shift: 0 }
            }
            State::Length { .. } if value == 0 => State::Key { value: 0, shift: 0 },
            State::Length { .. } => State::Fixed {
                wanted: false,
                value: 0,
                read: 0,
                left: value,
            },
            State::Fixed { .. } | State::Broken => State::Broken,
        }
    }
}

/// The last occurrence of `field` in `body` (`Some(None)`: absent); `None`: not protobuf.
fn read_whole(body: &[u8], field: StampField) -> Option<Option<u64>> {
    fn varint(body: &[u8], at: &mut usize) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *body.get(*at)?;
            *at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    let mut found = None;
    let mut at = 0;
    while at < body.len() {
        let key = varint(body, &mut at)?;
        let ours = key >> 3 == u64::from(field.number);
        match (key & 7) as u8 {
            VARINT => {
                let value = varint(body, &mut at)?;
                if ours && field.encoding == StampEncoding::Varint {
                    found = Some(value);
                }
            }
            I64 => {
                let bytes: [u8; 8] = body.get(at..at + 8)?.try_into().ok()?;
                at += 8;
                if ours && field.encoding == StampEncoding::Fixed64 {
                    found = Some(u64::from_le_bytes(bytes));
                }
            }
            I32 => {
                at += 4;
                if at > body.len() {
                    return None;
                }
            }
            LEN => {
                let len = usize::try_from(varint(body, &mut at)?).ok()?;
                at = at.checked_add(len).filter(|end| *end <= body.len())?;
            }
            _ => return None,
        }
    }
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(out: &mut Vec<u8>, mut value: u64) {
        while value >= 0x80 {
            out.push(value as u8 | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    /// An `EchoReply { payload, sequence, sent_unix_nanos }` as prost encodes it, with an
    /// unknown fixed32 and a varint stamp field 4 in front.
    fn reply(payload: &[u8], sequence: u64, stamp: u64) -> Vec<u8> {
        let mut out = vec![(9 << 3) | I32, 1, 2, 3, 4];
        out.push((4 << 3) | VARINT);
        varint(&mut out, stamp / 2);
        out.push((1 << 3) | LEN);
        varint(&mut out, payload.len() as u64);
        out.extend_from_slice(payload);
        out.push((2 << 3) | VARINT);
        varint(&mut out, sequence);
        out.push((3 << 3) | I64);
        out.extend_from_slice(&stamp.to_le_bytes());
        out
    }

    /// The stamp read byte-wise in chunks, checked against the one-slice read.
    fn scan(field: StampField, message: &[u8], chunk: usize) -> Option<u64> {
        let mut scanner = StampScanner::new(field);
        for piece in message.chunks(chunk.max(1)) {
            scanner.feed(piece);
        }
        let chunked = scanner.finish();
        scanner.whole(message);
        assert_eq!(
            scanner.finish(),
            chunked,
            "whole vs chunks of {chunk}: {message:?}"
        );
        chunked
    }

    const FIXED: StampField = StampField {
        number: 3,
        encoding: StampEncoding::Fixed64,
    };
    const VARINT_4: StampField = StampField {
        number: 4,
        encoding: StampEncoding::Varint,
    };

    #[test]
    fn stamps_are_read_across_any_chunking() {
        let stamp = 1_796_000_000_123_456_789;
        for payload_len in [0usize, 1, 127, 128, 300, 70_000] {
            let message = reply(&vec![0xfe; payload_len], 42, stamp);
            for chunk in [1, 2, 3, 7, 8, 9, 64, message.len()] {
                assert_eq!(
                    scan(FIXED, &message, chunk),
                    Some(stamp),
                    "{payload_len}/{chunk}"
                );
                assert_eq!(scan(VARINT_4, &message, chunk), Some(stamp / 2));
            }
        }
    }

    #[test]
    fn missing_mistyped_cut_or_broken_stamps_read_none() {
        let stamp = 7u64 << 60;
        let message = reply(b"abc", 1, stamp);
        // Absent: another field number.
        let other = StampField {
            number: 5,
            encoding: StampEncoding::Fixed64,
        };
        assert_eq!(scan(other, &message, 4), None);
        // The right number with the other wire type is not the stamp.
        let mistyped = StampField {
            number: 3,
            encoding: StampEncoding::Varint,
        };
        assert_eq!(scan(mistyped, &message, 4), None);
        // Cut inside the stamp.
        assert_eq!(scan(FIXED, &message[..message.len() - 3], 4), None);
        // A group (wire type 3) or a varint over ten bytes: not read.
        assert_eq!(scan(FIXED, &[(1 << 3) | 3, 0], 1), None);
        assert_eq!(scan(FIXED, &[0xff; 12], 5), None);
        // An empty message has none; the scanner is reusable after each.
        let mut scanner = StampScanner::new(FIXED);
        assert_eq!(scanner.finish(), None);
        scanner.feed(&[0xff; 12]);
        assert_eq!(scanner.finish(), None);
        scanner.feed(&message);
        assert_eq!(scanner.finish(), Some(stamp));
    }

    #[test]
    fn the_last_occurrence_wins() {
        let mut message = reply(b"", 0, 5);
        message.push((3 << 3) | I64);
        message.extend_from_slice(&9u64.to_le_bytes());
        assert_eq!(scan(FIXED, &message, 3), Some(9));
    }
}
