//! The view codecs against prost: one check, used by this crate's tests and by the
//! `view_codec` fuzz target (the `fuzzing` feature), that any bytes get the same answer from
//! both — the same accept or reject, and the same reply bytes — and a structured generator
//! that turns arbitrary bytes into the inputs byte flips rarely form: groups (matched,
//! mismatched, unterminated, nested past prost's recursion limit), packed and wrong-typed
//! fields, overlong varints, duplicate and unknown fields of every wire type.

use bytes::BytesMut;
use prost::Message;

use super::{fast_codec, stream_codec};
use crate::proto::pb::{HelloReply, HelloRequest};
use crate::proto::pb_streaming::FeedRequest;

/// Panics when the view codecs answer `request` differently from prost: as a
/// `HelloRequest` (the Greeter's reply bytes) and as a `FeedRequest` (the fields read).
pub fn assert_agrees_with_prost(request: &[u8]) {
    let slow = prost_reply(request);
    let mut out = BytesMut::new();
    match (fast_codec::echo_reply(request, &mut out), &slow) {
        (Ok(true), Ok(slow)) => assert_eq!(&out[..], &slow[..], "reply to {request:?}"),
        // The view codec hands a shape it does not do in one pass to prost.
        (Ok(false), _) => {}
        (Err(_), Err(_)) => {}
        (fast, slow) => panic!(
            "Greeter: the view codec and prost disagree on {request:?}: {fast:?} vs {:?}",
            slow.as_ref().map(|_| "accepted")
        ),
    }
    let slow = FeedRequest::decode(request);
    match (stream_codec::feed_request(request), slow) {
        (Ok(view), Ok(slow)) => {
            assert_eq!(view.count, slow.count, "{request:?}");
            assert_eq!(
                &request[view.payload.clone()],
                &slow.payload[..],
                "{request:?}"
            );
            assert_eq!(view.stamp, slow.stamp, "{request:?}");
        }
        (Err(_), Err(_)) => {}
        (fast, slow) => {
            panic!("Feed: the view codec and prost disagree on {request:?}: {fast:?} vs {slow:?}")
        }
    }
}

/// The Greeter's framed reply to `request` as prost makes it (gRPC prefix included).
pub fn prost_reply(request: &[u8]) -> Result<Vec<u8>, prost::DecodeError> {
    HelloRequest::decode(request).map(|decoded| {
        let reply = HelloReply {
            response: decoded.request,
        }
        .encode_to_vec();
        let mut framed = vec![0];
        framed.extend_from_slice(&(reply.len() as u32).to_be_bytes());
        framed.extend_from_slice(&reply);
        framed
    })
}

/// A message built from `program`: each byte (with the ones after it) chooses a field to
/// write, so a fuzzer's mutations move through message shapes rather than raw bytes.
pub fn structured_request(program: &[u8]) -> Vec<u8> {
    let mut generator = Generator {
        program,
        at: 0,
        out: Vec::new(),
    };
    generator.message(0);
    generator.out
}

struct Generator<'a> {
    program: &'a [u8],
    at: usize,
    out: Vec<u8>,
}

/// How deep the generator nests messages and groups by recursion (the deep group chains of
/// one step are written in a loop, past prost's limit of 100).
const MAX_NESTING: u32 = 6;

impl Generator<'_> {
    fn byte(&mut self) -> u8 {
        let byte = self.program.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        byte
    }

    fn done(&self) -> bool {
        self.at >= self.program.len()
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire_type));
    }

    /// A varint, overlong (padded with continuation bytes) when the program says so.
    fn varint(&mut self, mut value: u64) {
        let pad = if self.byte().is_multiple_of(8) {
            self.byte() % 5
        } else {
            0
        };
        loop {
            let low = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 && pad == 0 {
                self.out.push(low);
                return;
            }
            self.out.push(low | 0x80);
            if value == 0 {
                for left in (0..pad).rev() {
                    self.out.push(if left == 0 { 0 } else { 0x80 });
                }
                return;
            }
        }
    }

    fn field_number(&mut self) -> u32 {
        match self.byte() % 4 {
            // The fields both messages declare, and unknown ones near and far.
            0 | 1 => 1 + u32::from(self.byte() % 12),
            2 => 10 + u32::from(self.byte()),
            _ => (u32::from(self.byte()) << 21 | u32::from(self.byte())) % (1 << 29) + 1,
        }
    }

    fn bytes_field(&mut self, field: u32) {
        let len = usize::from(self.byte() % 16);
        let mut body = Vec::with_capacity(len);
        for _ in 0..len {
            // Mostly text, now and then a byte that is not UTF-8.
            let byte = self.byte();
            body.push(if byte.is_multiple_of(16) {
                0xff
            } else {
                b'a' + byte % 26
            });
        }
        self.key(field, fast_codec::LEN);
        self.varint(body.len() as u64);
        self.out.extend_from_slice(&body);
    }

    fn nested(&mut self, field: u32, depth: u32) {
        let mut inner = Generator {
            program: self.program,
            at: self.at,
            out: Vec::new(),
        };
        let steps = usize::from(self.byte() % 6);
        inner.at = self.at;
        for _ in 0..steps {
            if inner.done() {
                break;
            }
            inner.field(depth + 1);
        }
        self.at = inner.at;
        self.key(field, fast_codec::LEN);
        self.varint(inner.out.len() as u64);
        self.out.extend_from_slice(&inner.out);
    }

    fn message(&mut self, depth: u32) {
        while !self.done() {
            self.field(depth);
        }
    }

    fn field(&mut self, depth: u32) {
        let field = self.field_number();
        match self.byte() % 12 {
            0 | 1 => {
                self.key(field, fast_codec::VARINT);
                let value = u64::from(self.byte()) << (self.byte() % 64);
                self.varint(value);
            }
            2 => {
                self.key(field, fast_codec::I64);
                for _ in 0..8 {
                    let byte = self.byte();
                    self.out.push(byte);
                }
            }
            3 => {
                self.key(field, 5);
                for _ in 0..4 {
                    let byte = self.byte();
                    self.out.push(byte);
                }
            }
            4 | 5 => self.bytes_field(field),
            6 | 7 if depth < MAX_NESTING => self.nested(field, depth),
            8 if depth < MAX_NESTING => {
                // A group: its fields, then its end — matched, another field's, or none.
                self.key(field, 3);
                for _ in 0..self.byte() % 4 {
                    self.field(depth + 1);
                }
                match self.byte() % 8 {
                    0 => self.key(field + 1, 4),
                    1 => {}
                    _ => self.key(field, 4),
                }
            }
            9 => {
                // A chain of nested groups around prost's recursion limit.
                let levels = 90 + u32::from(self.byte() % 20);
                for level in 0..levels {
                    self.key(field + level, 3);
                }
                for level in (0..levels).rev() {
                    self.key(field + level, 4);
                }
            }
            10 => {
                // Packed varints (a field's repeated scalars in one LEN).
                let count = self.byte() % 6;
                let mut inner = Generator {
                    program: self.program,
                    at: self.at,
                    out: Vec::new(),
                };
                for _ in 0..count {
                    let value = u64::from(inner.byte());
                    inner.varint(value);
                }
                self.at = inner.at;
                self.key(field, fast_codec::LEN);
                self.varint(inner.out.len() as u64);
                self.out.extend_from_slice(&inner.out);
            }
            _ => {
                // A stray end-group, or a raw byte.
                if self.byte().is_multiple_of(2) {
                    self.key(field, 4);
                } else {
                    let byte = self.byte();
                    self.out.push(byte);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Groups as prost reads them: skipped when matched, refused when not, and refused past
    /// the same depth.
    #[test]
    fn unknown_groups_are_answered_as_prost_answers_them() {
        let hello = HelloRequest {
            request: Some(crate::proto::pb::Hello {
                name: "x".to_owned(),
                ..Default::default()
            }),
        }
        .encode_to_vec();
        let group = |field: u32, inner: &[u8], end: u32| {
            let mut bytes = hello.clone();
            bytes.push(((field << 3) | 3) as u8);
            bytes.extend_from_slice(inner);
            bytes.push(((end << 3) | 4) as u8);
            bytes
        };
        // Matched, with a varint inside: prost skips it and answers.
        let matched = group(15, &[0x08, 0x01], 15);
        assert!(HelloRequest::decode(&matched[..]).is_ok());
        let mut out = BytesMut::new();
        assert_eq!(fast_codec::echo_reply(&matched, &mut out), Ok(true));
        for bytes in [
            matched,
            group(15, &[], 14),
            group(15, &[0x08], 15),
            [&hello[..], &[0x7c]].concat(),
        ] {
            assert_agrees_with_prost(&bytes);
        }
        // 99 and 100 nested groups at the top level: prost's limit falls between them.
        for levels in [99u32, 100, 101] {
            let mut bytes = hello.clone();
            for level in 0..levels {
                bytes.extend_from_slice(&prost_key(20 + level, 3));
            }
            for level in (0..levels).rev() {
                bytes.extend_from_slice(&prost_key(20 + level, 4));
            }
            assert_agrees_with_prost(&bytes);
        }
    }

    fn prost_key(field: u32, wire_type: u32) -> Vec<u8> {
        let mut out = Vec::new();
        prost::encoding::encode_varint(u64::from((field << 3) | wire_type), &mut out);
        out
    }

    /// The structured generator over many programs: every message agrees.
    #[test]
    fn generated_messages_agree_with_prost() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            let len = 1 + (state % 64) as usize;
            let program: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            assert_agrees_with_prost(&structured_request(&program));
            assert_agrees_with_prost(&program);
        }
    }
}
