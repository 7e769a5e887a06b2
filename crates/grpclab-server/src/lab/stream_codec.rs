//! The streaming echo's messages (`scenarios/streaming/streaming.proto`) without allocations:
//! requests decoded as views over their bytes, replies encoded framed straight into the
//! stream's outbox. The same checks and results as prost's generated types (tests compare
//! both on generated and corrupted messages): wire types checked, unknown fields skipped, the
//! last occurrence of a scalar field wins, proto3 defaults omitted on encoding.

use bytes::{BufMut, BytesMut};
use std::ops::Range;

use super::fast_codec::{
    expect, key, len_delimited, put_varint, skip, varint, varint_len, DecodeError, I64, LEN,
    TOP_LEVEL_DEPTH, VARINT,
};

/// Where field 1 (`bytes payload`) of an `EchoRequest` is in `message` (empty when absent).
pub(crate) fn echo_request_payload(message: &[u8]) -> Result<Range<usize>, DecodeError> {
    let mut payload = 0..0;
    let mut at = 0;
    while at < message.len() {
        let (field, wire_type) = key(message, &mut at)?;
        if field == 1 {
            expect(wire_type, LEN)?;
            let slice = len_delimited(message, &mut at)?;
            payload = at - slice.len()..at;
        } else {
            skip(message, &mut at, field, wire_type, TOP_LEVEL_DEPTH)?;
        }
    }
    Ok(payload)
}

/// A `FeedRequest` as a view over its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FeedRequestView {
    /// How many replies.
    pub count: u32,
    /// Where each reply's payload is in the message.
    pub payload: Range<usize>,
    /// Whether each reply carries the time it was produced (`sent_unix_nanos`).
    pub stamp: bool,
}

/// Reads a `FeedRequest`.
pub(crate) fn feed_request(message: &[u8]) -> Result<FeedRequestView, DecodeError> {
    let mut view = FeedRequestView {
        count: 0,
        payload: 0..0,
        stamp: false,
    };
    let mut at = 0;
    while at < message.len() {
        let (field, wire_type) = key(message, &mut at)?;
        match field {
            1 => {
                expect(wire_type, VARINT)?;
                // prost reads a uint32 as a varint truncated to 32 bits.
                view.count = varint(message, &mut at)? as u32;
            }
            2 => {
                expect(wire_type, LEN)?;
                let slice = len_delimited(message, &mut at)?;
                view.payload = at - slice.len()..at;
            }
            3 => {
                expect(wire_type, VARINT)?;
                // prost reads a bool as any non-zero varint.
                view.stamp = varint(message, &mut at)? != 0;
            }
            _ => skip(message, &mut at, field, wire_type, TOP_LEVEL_DEPTH)?,
        }
    }
    Ok(view)
}

/// Appends a framed `EchoReply { payload, sequence, sent_unix_nanos }` to `out` (0: the
/// field left out, as proto3 does).
pub(crate) fn put_echo_reply(
    out: &mut BytesMut,
    payload: &[u8],
    sequence: u64,
    sent_unix_nanos: u64,
) {
    let payload_field = if payload.is_empty() {
        0
    } else {
        1 + varint_len(payload.len() as u64) + payload.len()
    };
    let sequence_field = if sequence == 0 {
        0
    } else {
        1 + varint_len(sequence)
    };
    let stamp_field = if sent_unix_nanos == 0 { 0 } else { 1 + 8 };
    let len = payload_field + sequence_field + stamp_field;
    out.reserve(5 + len);
    out.put_u8(0);
    out.put_u32(len as u32);
    if !payload.is_empty() {
        out.put_u8((1 << 3) | LEN);
        put_varint(out, payload.len() as u64);
        out.put_slice(payload);
    }
    if sequence != 0 {
        out.put_u8((2 << 3) | VARINT);
        put_varint(out, sequence);
    }
    if sent_unix_nanos != 0 {
        out.put_u8((3 << 3) | I64);
        out.put_u64_le(sent_unix_nanos);
    }
}

/// Appends a framed `UploadSummary { messages, bytes }` to `out`.
pub(crate) fn put_upload_summary(out: &mut BytesMut, messages: u64, bytes: u64) {
    let field = |value: u64| if value == 0 { 0 } else { 1 + varint_len(value) };
    let len = field(messages) + field(bytes);
    out.reserve(5 + len);
    out.put_u8(0);
    out.put_u32(len as u32);
    for (number, value) in [(1u8, messages), (2, bytes)] {
        if value != 0 {
            out.put_u8((number << 3) | VARINT);
            put_varint(out, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::pb_streaming::{EchoReply, EchoRequest, FeedRequest, UploadSummary};
    use prost::Message;

    /// A small deterministic generator (xorshift).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn unframed(out: &BytesMut) -> &[u8] {
        let len = u32::from_be_bytes([out[1], out[2], out[3], out[4]]) as usize;
        assert_eq!(out.len(), 5 + len, "one framed message");
        &out[5..]
    }

    #[test]
    fn replies_are_byte_identical_to_prost() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..2000u32 {
            let payload: Vec<u8> = (0..rng.next() % 300).map(|_| rng.next() as u8).collect();
            let sequence = if round % 3 == 0 {
                0
            } else {
                rng.next() >> (rng.next() % 64)
            };
            let sent_unix_nanos = if round.is_multiple_of(2) {
                0
            } else {
                rng.next()
            };
            let mut out = BytesMut::new();
            put_echo_reply(&mut out, &payload, sequence, sent_unix_nanos);
            let expected = EchoReply {
                payload: payload.clone(),
                sequence,
                sent_unix_nanos,
            }
            .encode_to_vec();
            assert_eq!(unframed(&out), expected.as_slice());

            let (messages, bytes) = (rng.next() % 5, rng.next() >> (rng.next() % 64));
            let mut out = BytesMut::new();
            put_upload_summary(&mut out, messages, bytes);
            let expected = UploadSummary { messages, bytes }.encode_to_vec();
            assert_eq!(unframed(&out), expected.as_slice());
        }
    }

    #[test]
    fn requests_decode_as_prost_decodes_them_valid_or_not() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..5000 {
            let payload: Vec<u8> = (0..rng.next() % 64).map(|_| rng.next() as u8).collect();
            let mut echo = EchoRequest { payload }.encode_to_vec();
            let mut feed = FeedRequest {
                count: rng.next() as u32,
                payload: echo.clone(),
                stamp: rng.next().is_multiple_of(2),
            }
            .encode_to_vec();
            // Corrupt some: a flipped byte, a cut, an unknown field, a repeated field.
            for message in [&mut echo, &mut feed] {
                match rng.next() % 5 {
                    0 if !message.is_empty() => {
                        let at = (rng.next() as usize) % message.len();
                        message[at] ^= 1 << (rng.next() % 8);
                    }
                    1 => message.truncate((rng.next() as usize) % (message.len() + 1)),
                    2 => message.extend_from_slice(&[0x78, 0x05]), // field 15 varint
                    3 => {
                        let copy = message.clone();
                        message.extend_from_slice(&copy);
                    }
                    _ => {}
                }
            }
            match (
                echo_request_payload(&echo),
                EchoRequest::decode(echo.as_slice()),
            ) {
                (Ok(range), Ok(decoded)) => assert_eq!(&echo[range], decoded.payload.as_slice()),
                (Err(_), Err(_)) => {}
                (ours, prost) => panic!("{echo:?}: ours {ours:?}, prost {prost:?}"),
            }
            match (feed_request(&feed), FeedRequest::decode(feed.as_slice())) {
                (Ok(view), Ok(decoded)) => {
                    assert_eq!(view.count, decoded.count);
                    assert_eq!(&feed[view.payload], decoded.payload.as_slice());
                    assert_eq!(view.stamp, decoded.stamp);
                }
                (Err(_), Err(_)) => {}
                (ours, prost) => panic!("{feed:?}: ours {ours:?}, prost {prost:?}"),
            }
        }
    }
}
