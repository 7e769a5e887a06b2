//! The Greeter handler's allocation-free path: decode `HelloRequest` as a view over the
//! request's bytes, and encode `HelloReply` from that view straight into a reused buffer.
//!
//! It is the same work prost does — every field decoded and checked (wire types, varints,
//! UTF-8, lengths), unknown fields dropped, the reply encoded canonically (fields in number
//! order, proto3 defaults omitted, a set oneof always written) — without building owned
//! strings and vectors. Messages it does not handle in one pass (a `request` field that
//! occurs twice, which protobuf merges) go to prost instead (`Ok(false)`), so no input is
//! answered differently: the tests compare both paths on generated messages.

use bytes::{BufMut, BytesMut};

/// Protobuf wire types.
pub(super) const VARINT: u8 = 0;
pub(super) const I64: u8 = 1;
pub(super) const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const I32: u8 = 5;

/// prost's recursion budget (`prost::RECURSION_LIMIT`) as it stands when a top-level
/// message's unknown field is skipped; each nested message, and each group level inside a
/// skipped field, spends one. Skipping with the same budget refuses exactly the nesting
/// prost refuses.
pub(super) const TOP_LEVEL_DEPTH: u32 = 100;

/// A decoding failure, worded like prost's. Small and `Copy`, not a `String`: every field
/// read returns a `Result` of it, and a `String` error makes each of those results three
/// words wide and returned through memory on the path every call takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecodeError {
    BufferUnderflow,
    InvalidVarint,
    InvalidKey(u64),
    InvalidTag,
    InvalidWireType(u8),
    UnsupportedWireType(u8),
    UnexpectedWireType { found: u8, expected: u8 },
    NotUtf8,
    UnexpectedEndGroupTag,
    RecursionLimitReached,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            DecodeError::BufferUnderflow => f.write_str("buffer underflow"),
            DecodeError::InvalidVarint => f.write_str("invalid varint"),
            DecodeError::InvalidKey(key) => write!(f, "invalid key value: {key}"),
            DecodeError::InvalidTag => f.write_str("invalid tag value: 0"),
            DecodeError::InvalidWireType(wire_type) => {
                write!(f, "invalid wire type value: {wire_type}")
            }
            DecodeError::UnsupportedWireType(wire_type) => {
                write!(f, "unsupported wire type: {wire_type}")
            }
            DecodeError::UnexpectedWireType { found, expected } => {
                write!(f, "invalid wire type: {found} (expected {expected})")
            }
            DecodeError::NotUtf8 => f.write_str("invalid string value: data is not UTF-8 encoded"),
            DecodeError::UnexpectedEndGroupTag => f.write_str("unexpected end group tag"),
            DecodeError::RecursionLimitReached => f.write_str("recursion limit reached"),
        }
    }
}

/// A varint at `at`, which moves past it. The one-byte case (most keys and lengths of gRPC
/// messages) is inline wherever it is called: whether the loop below gets inlined depends on
/// how the compiler splits the crate into codegen units, which moved lab's cost per call by
/// 1.4 % between builds with this file unchanged.
#[inline]
pub(super) fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, DecodeError> {
    if let Some(&byte) = bytes.get(*at) {
        if byte & 0x80 == 0 {
            *at += 1;
            return Ok(u64::from(byte));
        }
    }
    varint_of_several_bytes(bytes, at)
}

/// [`varint`] past its first byte's check: any length, overlong ones refused as prost does.
#[inline(never)]
fn varint_of_several_bytes(bytes: &[u8], at: &mut usize) -> Result<u64, DecodeError> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *bytes.get(*at).ok_or(DecodeError::BufferUnderflow)?;
        *at += 1;
        if shift == 63 && byte > 1 {
            return Err(DecodeError::InvalidVarint);
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeError::InvalidVarint)
}

/// A field's key: its number and wire type. Inline: it runs once per field of every message.
#[inline]
pub(super) fn key(bytes: &[u8], at: &mut usize) -> Result<(u32, u8), DecodeError> {
    let key = varint(bytes, at)?;
    if key > u64::from(u32::MAX) {
        return Err(DecodeError::InvalidKey(key));
    }
    let wire_type = (key & 7) as u8;
    let field = (key >> 3) as u32;
    if field == 0 {
        return Err(DecodeError::InvalidTag);
    }
    if wire_type > 5 {
        return Err(DecodeError::InvalidWireType(wire_type));
    }
    Ok((field, wire_type))
}

/// A length-delimited field's bytes (strings, bytes, nested messages).
#[inline]
pub(super) fn len_delimited<'a>(bytes: &'a [u8], at: &mut usize) -> Result<&'a [u8], DecodeError> {
    let len = varint(bytes, at)? as usize;
    fixed(bytes, at, len)
}

/// The next `n` bytes (fixed-width fields, and the body of a length-delimited one).
#[inline]
fn fixed<'a>(bytes: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], DecodeError> {
    let slice = at
        .checked_add(n)
        .and_then(|end| bytes.get(*at..end))
        .ok_or(DecodeError::BufferUnderflow)?;
    *at += n;
    Ok(slice)
}

/// Skips field `field` of an unknown number as prost's `skip_field` does: a group (wire type
/// 3) up to its matching end (a nested group inside it too), an end-group with no start
/// refused, `depth` the recursion budget left (see [`TOP_LEVEL_DEPTH`]).
#[inline]
pub(super) fn skip(
    bytes: &[u8],
    at: &mut usize,
    field: u32,
    wire_type: u8,
    depth: u32,
) -> Result<(), DecodeError> {
    if depth == 0 {
        return Err(DecodeError::RecursionLimitReached);
    }
    match wire_type {
        VARINT => varint(bytes, at).map(|_| ()),
        I64 => fixed(bytes, at, 8).map(|_| ()),
        LEN => len_delimited(bytes, at).map(|_| ()),
        I32 => fixed(bytes, at, 4).map(|_| ()),
        START_GROUP => skip_group(bytes, at, field, depth),
        END_GROUP => Err(DecodeError::UnexpectedEndGroupTag),
        other => Err(DecodeError::UnsupportedWireType(other)),
    }
}

/// The fields of group `field` up to its end-group key; rare, so out of line.
#[inline(never)]
fn skip_group(bytes: &[u8], at: &mut usize, field: u32, depth: u32) -> Result<(), DecodeError> {
    loop {
        if *at >= bytes.len() {
            // prost reads a key from an empty buffer as an invalid varint.
            return Err(DecodeError::InvalidVarint);
        }
        let (inner, wire_type) = key(bytes, at)?;
        if wire_type == END_GROUP {
            return if inner == field {
                Ok(())
            } else {
                Err(DecodeError::UnexpectedEndGroupTag)
            };
        }
        skip(bytes, at, inner, wire_type, depth - 1)?;
    }
}

/// The field's wire type is the one its declared type uses, or prost's error.
#[inline]
pub(super) fn expect(wire_type: u8, expected: u8) -> Result<(), DecodeError> {
    if wire_type == expected {
        Ok(())
    } else {
        Err(DecodeError::UnexpectedWireType {
            found: wire_type,
            expected,
        })
    }
}

/// A string field's bytes, checked to be UTF-8 as prost checks them. ASCII first: most
/// strings are, and the word-at-a-time ASCII test costs a fraction of the full validation
/// on short strings.
#[inline]
fn utf8(bytes: &[u8]) -> Result<&[u8], DecodeError> {
    if bytes.is_ascii() || std::str::from_utf8(bytes).is_ok() {
        Ok(bytes)
    } else {
        Err(DecodeError::NotUtf8)
    }
}

/// The recursion budget inside `HelloRequest.request` (a `Hello`), and inside its pets.
const HELLO_DEPTH: u32 = TOP_LEVEL_DEPTH - 1;
const PET_DEPTH: u32 = TOP_LEVEL_DEPTH - 2;

/// `Hello.Pet`, as a view.
#[derive(Default, Clone, Copy)]
struct PetView<'a> {
    name: &'a [u8],
    color: i32,
    /// Its encoded length, worked out once by `decode` (the reply's length and the pet's
    /// own length prefix both need it).
    len: usize,
}

impl<'a> PetView<'a> {
    fn decode(bytes: &'a [u8]) -> Result<PetView<'a>, DecodeError> {
        let mut pet = PetView::default();
        let mut at = 0;
        while at < bytes.len() {
            let (field, wire_type) = key(bytes, &mut at)?;
            match field {
                1 => {
                    expect(wire_type, LEN)?;
                    pet.name = utf8(len_delimited(bytes, &mut at)?)?;
                }
                2 => {
                    expect(wire_type, VARINT)?;
                    pet.color = varint(bytes, &mut at)? as i32;
                }
                _ => skip(bytes, &mut at, field, wire_type, PET_DEPTH)?,
            }
        }
        pet.len = pet.encoded_len();
        Ok(pet)
    }

    fn encoded_len(&self) -> usize {
        string_len(1, self.name)
            + if self.color != 0 {
                1 + varint_len(self.color as i64 as u64)
            } else {
                0
            }
    }

    fn encode(&self, out: &mut Writer<'_>) {
        out.string(1, self.name);
        if self.color != 0 {
            out.byte(2 << 3);
            out.varint(self.color as i64 as u64);
        }
    }
}

/// The `choice` oneof.
#[derive(Clone, Copy)]
enum Choice<'a> {
    C1(&'a [u8]),
    C2(bool),
}

/// How many pets a view keeps as it decodes them; a message with more has the rest decoded
/// again from its bytes while encoding (still without allocating).
const INLINE_PETS: usize = 4;

/// `Hello`, as a view. The first [`INLINE_PETS`] pets are kept decoded; any further ones stay
/// in `bytes` and are decoded again while encoding.
#[derive(Default)]
struct HelloView<'a> {
    bytes: &'a [u8],
    name: &'a [u8],
    d: f64,
    f: f32,
    b: bool,
    n: i32,
    l: i64,
    choice: Option<Choice<'a>>,
    pets_len: usize,
    pets: [PetView<'a>; INLINE_PETS],
    pet_count: usize,
}

impl<'a> HelloView<'a> {
    fn decode(bytes: &'a [u8]) -> Result<HelloView<'a>, DecodeError> {
        let mut hello = HelloView {
            bytes,
            ..HelloView::default()
        };
        let mut at = 0;
        while at < bytes.len() {
            let (field, wire_type) = key(bytes, &mut at)?;
            match field {
                1 => {
                    expect(wire_type, LEN)?;
                    hello.name = utf8(len_delimited(bytes, &mut at)?)?;
                }
                2 => {
                    expect(wire_type, I64)?;
                    let raw = fixed(bytes, &mut at, 8)?;
                    hello.d = f64::from_le_bytes(
                        raw.try_into().map_err(|_| DecodeError::BufferUnderflow)?,
                    );
                }
                3 => {
                    expect(wire_type, I32)?;
                    let raw = fixed(bytes, &mut at, 4)?;
                    hello.f = f32::from_le_bytes(
                        raw.try_into().map_err(|_| DecodeError::BufferUnderflow)?,
                    );
                }
                4 => {
                    expect(wire_type, VARINT)?;
                    hello.b = varint(bytes, &mut at)? != 0;
                }
                5 => {
                    expect(wire_type, VARINT)?;
                    hello.n = varint(bytes, &mut at)? as i32;
                }
                6 => {
                    expect(wire_type, VARINT)?;
                    hello.l = varint(bytes, &mut at)? as i64;
                }
                7 => {
                    expect(wire_type, LEN)?;
                    hello.choice = Some(Choice::C1(utf8(len_delimited(bytes, &mut at)?)?));
                }
                8 => {
                    expect(wire_type, VARINT)?;
                    hello.choice = Some(Choice::C2(varint(bytes, &mut at)? != 0));
                }
                9 => {
                    expect(wire_type, LEN)?;
                    let pet = PetView::decode(len_delimited(bytes, &mut at)?)?;
                    hello.pets_len += 1 + varint_len(pet.len as u64) + pet.len;
                    if let Some(slot) = hello.pets.get_mut(hello.pet_count) {
                        *slot = pet;
                    }
                    hello.pet_count += 1;
                }
                _ => skip(bytes, &mut at, field, wire_type, HELLO_DEPTH)?,
            }
        }
        Ok(hello)
    }

    fn encoded_len(&self) -> usize {
        string_len(1, self.name)
            + if self.d != 0.0 { 9 } else { 0 }
            + if self.f != 0.0 { 5 } else { 0 }
            + if self.b { 2 } else { 0 }
            + if self.n != 0 {
                1 + varint_len(self.n as i64 as u64)
            } else {
                0
            }
            + if self.l != 0 {
                1 + varint_len(self.l as u64)
            } else {
                0
            }
            + match self.choice {
                None => 0,
                Some(Choice::C1(text)) => 1 + varint_len(text.len() as u64) + text.len(),
                Some(Choice::C2(_)) => 2,
            }
            + self.pets_len
    }

    fn encode(&self, out: &mut Writer<'_>) {
        out.string(1, self.name);
        if self.d != 0.0 {
            out.byte((2 << 3) | I64);
            out.bytes(&self.d.to_le_bytes());
        }
        if self.f != 0.0 {
            out.byte((3 << 3) | I32);
            out.bytes(&self.f.to_le_bytes());
        }
        if self.b {
            out.bytes(&[4 << 3, 1]);
        }
        if self.n != 0 {
            out.byte(5 << 3);
            out.varint(self.n as i64 as u64);
        }
        if self.l != 0 {
            out.byte(6 << 3);
            out.varint(self.l as u64);
        }
        match self.choice {
            None => {}
            Some(Choice::C1(text)) => {
                out.byte((7 << 3) | LEN);
                out.varint(text.len() as u64);
                out.bytes(text);
            }
            Some(Choice::C2(value)) => out.bytes(&[8 << 3, u8::from(value)]),
        }
        let inline = self.pet_count.min(INLINE_PETS);
        for pet in &self.pets[..inline] {
            put_pet(out, pet);
        }
        if self.pet_count > INLINE_PETS {
            self.encode_pets_after(INLINE_PETS, out);
        }
    }

    /// Pets past the first `kept`, in order, decoded again from the request (already
    /// validated by `decode`).
    fn encode_pets_after(&self, kept: usize, out: &mut Writer<'_>) {
        let mut seen = 0;
        let mut at = 0;
        while at < self.bytes.len() {
            let Ok((field, wire_type)) = key(self.bytes, &mut at) else {
                return;
            };
            if field == 9 {
                let Ok(pet) = len_delimited(self.bytes, &mut at).and_then(PetView::decode) else {
                    return;
                };
                if seen >= kept {
                    put_pet(out, &pet);
                }
                seen += 1;
            } else if skip(self.bytes, &mut at, field, wire_type, HELLO_DEPTH).is_err() {
                return;
            }
        }
    }
}

/// One pet as field 9 of `Hello`.
fn put_pet(out: &mut Writer<'_>, pet: &PetView<'_>) {
    out.byte((9 << 3) | LEN);
    out.varint(pet.len as u64);
    pet.encode(out);
}

/// A reply of known length written in place: its bytes are made (zeroed) at once, then every
/// write is one bounds check on a slice, where `BytesMut`'s writes reserve and move its length
/// on every write (32 fewer instructions of a complex_proto call's ~4,500). A length computed
/// wrongly cannot write out of place: writes past the end are dropped, and
/// [`Writer::filled`] says the reply is not whole.
struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    #[inline]
    fn byte(&mut self, byte: u8) {
        if let Some(slot) = self.buf.get_mut(self.at) {
            *slot = byte;
        }
        self.at += 1;
    }

    #[inline]
    fn bytes(&mut self, bytes: &[u8]) {
        let end = self.at.saturating_add(bytes.len());
        if let Some(place) = self.buf.get_mut(self.at..end) {
            place.copy_from_slice(bytes);
        }
        self.at = end;
    }

    #[inline]
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte((value as u8) | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }

    /// A string or bytes field, left out when empty (proto3's default).
    #[inline]
    fn string(&mut self, field: u8, text: &[u8]) {
        if !text.is_empty() {
            self.byte((field << 3) | LEN);
            self.varint(text.len() as u64);
            self.bytes(text);
        }
    }

    /// Every byte written, none past the end.
    fn filled(&self) -> bool {
        self.at == self.buf.len()
    }
}

pub(super) fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

pub(super) fn put_varint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

fn string_len(_field: u32, text: &[u8]) -> usize {
    if text.is_empty() {
        0
    } else {
        1 + varint_len(text.len() as u64) + text.len()
    }
}

/// Decodes a `HelloRequest` and appends the framed `HelloReply` (gRPC prefix included) to
/// `out`. `Ok(false)`: this path does not handle the message's shape; use prost.
pub(crate) fn echo_reply(request: &[u8], out: &mut BytesMut) -> Result<bool, DecodeError> {
    let mut hello = None;
    let mut at = 0;
    while at < request.len() {
        let (field, wire_type) = key(request, &mut at)?;
        if field == 1 {
            expect(wire_type, LEN)?;
            if hello.is_some() {
                // A repeated message field is merged by protobuf: prost does that.
                return Ok(false);
            }
            hello = Some(HelloView::decode(len_delimited(request, &mut at)?)?);
        } else {
            skip(request, &mut at, field, wire_type, TOP_LEVEL_DEPTH)?;
        }
    }
    let hello_len = hello.as_ref().map_or(0, HelloView::encoded_len);
    let reply_len = hello
        .as_ref()
        .map_or(0, |_| 1 + varint_len(hello_len as u64) + hello_len);
    let start = out.len();
    out.resize(start + 5 + reply_len, 0);
    let mut writer = Writer {
        buf: &mut out[start..],
        at: 0,
    };
    writer.byte(0);
    writer.bytes(&(reply_len as u32).to_be_bytes());
    if let Some(hello) = hello {
        writer.byte((1 << 3) | LEN);
        writer.varint(hello_len as u64);
        hello.encode(&mut writer);
    }
    if !writer.filled() {
        // A length this file computed differs from what it wrote: prost answers instead.
        out.truncate(start);
        return Ok(false);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::pb::hello::pet::Color;
    use crate::proto::pb::hello::{Choice as PbChoice, Pet};
    use crate::proto::pb::{Hello, HelloRequest};
    use prost::Message;

    /// The reply prost would produce, framed.
    fn prost_reply(request: &[u8]) -> Result<Vec<u8>, String> {
        super::super::codec_check::prost_reply(request).map_err(|e| e.to_string())
    }

    fn fast_reply(request: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let mut out = BytesMut::new();
        echo_reply(request, &mut out)
            .map(|handled| handled.then(|| out.to_vec()))
            .map_err(|e| e.to_string())
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    fn random_hello(rng: &mut Rng) -> Hello {
        let text = |rng: &mut Rng| {
            "héllo wörld"
                .chars()
                .take((rng.next() % 12) as usize)
                .collect::<String>()
        };
        Hello {
            name: text(rng),
            d: [0.0, -0.0, 4.55332, f64::MAX][(rng.next() % 4) as usize],
            f: [0.0, 232.3, -1.5][(rng.next() % 3) as usize],
            b: rng.next().is_multiple_of(2),
            n: [0, 32, -1, i32::MIN][(rng.next() % 4) as usize],
            l: [0, 444325235223, -7][(rng.next() % 3) as usize],
            choice: match rng.next() % 4 {
                0 => None,
                1 => Some(PbChoice::C1(text(rng))),
                2 => Some(PbChoice::C2(false)),
                _ => Some(PbChoice::C2(true)),
            },
            // Up to 6 pets: past INLINE_PETS too, where the rest are decoded again.
            pets: (0..rng.next() % 7)
                .map(|_| Pet {
                    name: text(rng),
                    color: [Color::Black as i32, Color::Red as i32, -3, 99]
                        [(rng.next() % 4) as usize],
                })
                .collect(),
        }
    }

    #[test]
    fn matches_prost_on_generated_messages() {
        let mut rng = Rng(42);
        for _ in 0..5000 {
            let request = HelloRequest {
                request: (!rng.next().is_multiple_of(8)).then(|| random_hello(&mut rng)),
            }
            .encode_to_vec();
            assert_eq!(
                fast_reply(&request).unwrap(),
                Some(prost_reply(&request).unwrap())
            );
        }
    }

    #[test]
    fn matches_prost_on_non_canonical_and_broken_input() {
        let mut rng = Rng(7);
        for _ in 0..20_000 {
            let mut bytes = HelloRequest {
                request: Some(random_hello(&mut rng)),
            }
            .encode_to_vec();
            // Unknown fields, repeated scalars and byte flips: either both paths agree, or
            // both fail, or the fast path defers to prost.
            match rng.next() % 4 {
                0 => bytes.extend_from_slice(&[0x78, 0x05]), // field 15, varint
                1 if !bytes.is_empty() => {
                    let at = (rng.next() as usize) % bytes.len();
                    bytes[at] = rng.next() as u8;
                }
                2 => bytes.extend_from_slice(&bytes.clone()), // field 1 twice: merge
                _ => {}
            }
            match (fast_reply(&bytes), prost_reply(&bytes)) {
                (Ok(Some(fast)), Ok(slow)) => assert_eq!(fast, slow, "{bytes:?}"),
                (Ok(None), _) => {}
                (Err(_), Err(_)) => {}
                (fast, slow) => panic!("paths disagree on {bytes:?}: {fast:?} vs {slow:?}"),
            }
        }
    }
}
