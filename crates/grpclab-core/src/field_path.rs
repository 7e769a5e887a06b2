//! A field of a reply named by a path — `token`, `user.id`, `items[0].sku`, `tags[2]` —
//! resolved once against the reply's descriptor, then read from each reply's wire bytes by a
//! scan that skips everything off the path: what a flow's `extract` and `expect` need per call
//! without decoding the whole message (a scan like `--stream-stamp`'s).
//!
//! The value read is the one a protobuf decoder would give: for a field present several times
//! the last occurrence wins, and a message field present several times is merged (so the
//! path is followed into every occurrence, in order); a repeated field's element `[i]` counts
//! packed and unpacked elements alike, and a repeated message's element `[i]` is its `i`-th
//! occurrence. A field absent from the bytes reads as its default (0, "", false, the enum's
//! first value), as proto3 defines it.
//!
//! ```
//! use grpclab_core::field_path::{FieldPath, FieldValue};
//! let schema = grpclab_core::scenario::Schema::compile_source(
//!     "login.proto",
//!     "syntax = \"proto3\"; message User { int64 id = 1; }
//!      message LoginReply { string token = 1; User user = 2; }",
//! ).unwrap();
//! let reply = schema.pool().get_message_by_name("LoginReply").unwrap();
//! let path = FieldPath::resolve(&reply, "user.id").unwrap();
//! // user { id: 42 }: field 2 (a message of 2 bytes), inside it field 1 = 42.
//! assert_eq!(path.read(&[0x12, 0x02, 0x08, 42]).unwrap(), FieldValue::Int(42));
//! ```

use prost_reflect::{Cardinality, FieldDescriptor, Kind, MessageDescriptor};

/// A path resolved against a message's descriptor (see the module's doc).
#[derive(Debug, Clone)]
pub struct FieldPath {
    /// As written, for messages.
    text: String,
    /// The message fields the path goes through, outermost first.
    through: Vec<Step>,
    /// The field read at the end.
    leaf: Step,
    kind: ScalarKind,
}

/// One field on a path: its number and, for a repeated field, which element.
#[derive(Debug, Clone, Copy)]
struct Step {
    number: u32,
    index: Option<usize>,
}

/// How the leaf field is encoded and what its value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScalarKind {
    Int32,
    Int64,
    Uint32,
    Uint64,
    Sint32,
    Sint64,
    Fixed32,
    Fixed64,
    Sfixed32,
    Sfixed64,
    Float,
    Double,
    Bool,
    Enum,
    String,
    Bytes,
}

/// A value read at the end of a path.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// Any signed integer field, and an enum's number.
    Int(i64),
    /// An unsigned integer field.
    Uint(u64),
    /// `float` or `double`.
    Float(f64),
    /// `bool`.
    Bool(bool),
    /// `string`.
    Text(String),
    /// `bytes`.
    Bytes(Vec<u8>),
}

impl FieldValue {
    /// The value as a template inserts it (see its `Display`); a text value is moved, not
    /// copied.
    pub fn into_text(self) -> String {
        match self {
            FieldValue::Text(text) => text,
            other => other.to_string(),
        }
    }
}

impl std::fmt::Display for FieldValue {
    /// As a template inserts it: numbers in decimal, text as is, bytes as lossy UTF-8.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldValue::Int(v) => write!(f, "{v}"),
            FieldValue::Uint(v) => write!(f, "{v}"),
            FieldValue::Float(v) => write!(f, "{v}"),
            FieldValue::Bool(v) => write!(f, "{v}"),
            FieldValue::Text(v) => f.write_str(v),
            FieldValue::Bytes(v) => f.write_str(&String::from_utf8_lossy(v)),
        }
    }
}

/// Why a path does not name a readable field of a message (the user's file is wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("path `{path}`: {reason}")]
pub struct PathError {
    path: String,
    reason: String,
}

/// Why a message's bytes could not be read along a path (the peer sent something else).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("reading `{path}`: {reason}")]
pub struct ReadError {
    path: String,
    reason: String,
}

/// Wire types (protobuf encoding).
const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;
const I32: u8 = 5;

/// Nesting the scan follows at most (protobuf's own decoders stop at 100).
const MAX_DEPTH: usize = 100;

impl FieldPath {
    /// Resolves `path` against `message`: each part a field of the message before it
    /// (`[i]` after a repeated one), the last a scalar, string, bytes or enum field.
    pub fn resolve(message: &MessageDescriptor, path: &str) -> Result<FieldPath, PathError> {
        let error = |reason: String| PathError {
            path: path.to_owned(),
            reason,
        };
        if path.is_empty() {
            return Err(error("empty: name a field, such as `user.id`".to_owned()));
        }
        let parts: Vec<&str> = path.split('.').collect();
        if parts.len() > MAX_DEPTH {
            return Err(error(format!("deeper than {MAX_DEPTH} fields")));
        }
        let mut current = message.clone();
        let mut through = Vec::new();
        for (at, part) in parts.iter().enumerate() {
            let (name, index) = split_index(part).map_err(error)?;
            let Some(field) = current.get_field_by_name(name) else {
                let names: Vec<String> = current.fields().map(|f| f.name().to_owned()).collect();
                return Err(error(format!(
                    "{} has no field `{name}` (its fields: {})",
                    current.full_name(),
                    names.join(", ")
                )));
            };
            let repeated = field.cardinality() == Cardinality::Repeated;
            if field.is_map() {
                return Err(error(format!(
                    "`{name}` is a map; paths do not go into maps"
                )));
            }
            match (repeated, index) {
                (true, None) => {
                    return Err(error(format!(
                        "`{name}` is repeated: say which element, such as `{name}[0]`"
                    )))
                }
                (false, Some(_)) => {
                    return Err(error(format!("`{name}` is not repeated: drop the `[…]`")))
                }
                _ => {}
            }
            let step = Step {
                number: field.number(),
                index,
            };
            let last = at + 1 == parts.len();
            match (field.kind(), last) {
                (Kind::Message(inner), false) => {
                    through.push(step);
                    current = inner;
                }
                (Kind::Message(_), true) => {
                    return Err(error(format!(
                        "`{name}` is a message: name one of its fields, such as `{name}.{}`",
                        first_field_name(&field)
                    )))
                }
                (_, false) => {
                    return Err(error(format!(
                        "`{name}` is not a message: nothing is inside it"
                    )))
                }
                (kind, true) => {
                    return Ok(FieldPath {
                        text: path.to_owned(),
                        through,
                        leaf: step,
                        kind: scalar_kind(&kind),
                    })
                }
            }
        }
        Err(error("empty part".to_owned()))
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Reads the path's value from `message`, the encoded message the path was resolved
    /// against (no gRPC prefix).
    pub fn read(&self, message: &[u8]) -> Result<FieldValue, ReadError> {
        // Elements of each repeated step seen so far, over every occurrence of the messages
        // above it (a merged message's repeated fields are the concatenation of its parts').
        // On the stack for paths of up to 8 steps (every path one writes by hand): a read
        // allocates nothing but a text or bytes value.
        let mut on_stack = [0usize; 8];
        let mut on_heap = Vec::new();
        let counts: &mut [usize] = match on_stack.get_mut(..self.through.len() + 1) {
            Some(counts) => counts,
            None => {
                on_heap.resize(self.through.len() + 1, 0);
                &mut on_heap
            }
        };
        let mut found = None;
        self.scan(message, 0, counts, &mut found)?;
        // An element asked for and not there: a scan that did not find it saw every element.
        let steps = self.through.iter().chain(std::iter::once(&self.leaf));
        for (step, seen) in steps.zip(counts.iter()) {
            if let Some(wanted) = step.index {
                if *seen <= wanted {
                    return Err(
                        self.read_error(format!("element [{wanted}] asked for, {seen} there"))
                    );
                }
            }
        }
        Ok(found.unwrap_or_else(|| self.kind.default_value()))
    }

    fn read_error(&self, reason: String) -> ReadError {
        ReadError {
            path: self.text.clone(),
            reason,
        }
    }

    /// Scans `bytes`, a message at `depth` on the path, leaving the last value of the leaf
    /// found in `found`. True once an indexed element is found and read: nothing later can
    /// change the value.
    fn scan(
        &self,
        bytes: &[u8],
        depth: usize,
        counts: &mut [usize],
        found: &mut Option<FieldValue>,
    ) -> Result<bool, ReadError> {
        let at_leaf = depth == self.through.len();
        let step = if at_leaf {
            self.leaf
        } else {
            self.through[depth]
        };
        let mut at = 0;
        while at < bytes.len() {
            let key = varint(bytes, &mut at).map_err(|r| self.read_error(r))?;
            let number = u32::try_from(key >> 3).unwrap_or(u32::MAX);
            let wire = (key & 7) as u8;
            if number != step.number {
                skip(bytes, &mut at, wire).map_err(|r| self.read_error(r))?;
                continue;
            }
            if !at_leaf {
                if wire != LEN {
                    return Err(self.wire_error(wire));
                }
                let inner = len_delimited(bytes, &mut at).map_err(|r| self.read_error(r))?;
                match step.index {
                    // A repeated message: each occurrence is one element.
                    Some(wanted) => {
                        counts[depth] += 1;
                        if counts[depth] == wanted + 1 {
                            self.scan(inner, depth + 1, counts, found)?;
                            return Ok(true);
                        }
                    }
                    // One message, merged over its occurrences: followed into each in turn.
                    None => {
                        if self.scan(inner, depth + 1, counts, found)? {
                            return Ok(true);
                        }
                    }
                }
                continue;
            }
            if step.index.is_some() && wire == LEN && self.kind.packable() {
                // A packed run of elements.
                let run = len_delimited(bytes, &mut at).map_err(|r| self.read_error(r))?;
                let mut inner = 0;
                while inner < run.len() {
                    let value = self
                        .kind
                        .read(run, &mut inner, self.kind.wire())
                        .map_err(|r| self.read_error(r))?;
                    if self.element(step, depth, counts, value, found) {
                        return Ok(true);
                    }
                }
                continue;
            }
            if wire != self.kind.wire() {
                return Err(self.wire_error(wire));
            }
            let value = self
                .kind
                .read(bytes, &mut at, wire)
                .map_err(|r| self.read_error(r))?;
            if self.element(step, depth, counts, value, found) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// One value of the leaf: the one asked for (then true), or the last so far.
    fn element(
        &self,
        step: Step,
        depth: usize,
        counts: &mut [usize],
        value: FieldValue,
        found: &mut Option<FieldValue>,
    ) -> bool {
        match step.index {
            Some(wanted) => {
                counts[depth] += 1;
                if counts[depth] == wanted + 1 {
                    *found = Some(value);
                    return true;
                }
                false
            }
            None => {
                *found = Some(value);
                false
            }
        }
    }

    fn wire_error(&self, wire: u8) -> ReadError {
        self.read_error(format!(
            "the field has wire type {wire}, which its declared type does not use"
        ))
    }
}

impl ScalarKind {
    fn wire(self) -> u8 {
        match self {
            ScalarKind::Fixed64 | ScalarKind::Sfixed64 | ScalarKind::Double => I64,
            ScalarKind::Fixed32 | ScalarKind::Sfixed32 | ScalarKind::Float => I32,
            ScalarKind::String | ScalarKind::Bytes => LEN,
            _ => VARINT,
        }
    }

    fn packable(self) -> bool {
        self.wire() != LEN
    }

    fn default_value(self) -> FieldValue {
        match self {
            ScalarKind::Int32
            | ScalarKind::Int64
            | ScalarKind::Sint32
            | ScalarKind::Sint64
            | ScalarKind::Sfixed32
            | ScalarKind::Sfixed64
            | ScalarKind::Enum => FieldValue::Int(0),
            ScalarKind::Uint32 | ScalarKind::Uint64 | ScalarKind::Fixed32 | ScalarKind::Fixed64 => {
                FieldValue::Uint(0)
            }
            ScalarKind::Float | ScalarKind::Double => FieldValue::Float(0.0),
            ScalarKind::Bool => FieldValue::Bool(false),
            ScalarKind::String => FieldValue::Text(String::new()),
            ScalarKind::Bytes => FieldValue::Bytes(Vec::new()),
        }
    }

    /// Reads one value of this kind at `at` (its wire type `wire` already checked).
    fn read(self, bytes: &[u8], at: &mut usize, wire: u8) -> Result<FieldValue, String> {
        Ok(match wire {
            VARINT => {
                let raw = varint(bytes, at)?;
                match self {
                    // int32 and enums are sign-extended to 64 bits on the wire; a decoder
                    // keeps the low 32.
                    ScalarKind::Int32 | ScalarKind::Enum => FieldValue::Int(i64::from(raw as i32)),
                    ScalarKind::Int64 => FieldValue::Int(raw as i64),
                    ScalarKind::Uint32 => FieldValue::Uint(u64::from(raw as u32)),
                    ScalarKind::Uint64 => FieldValue::Uint(raw),
                    ScalarKind::Sint32 => {
                        let raw = raw as u32;
                        FieldValue::Int(i64::from((raw >> 1) as i32 ^ -((raw & 1) as i32)))
                    }
                    ScalarKind::Sint64 => FieldValue::Int((raw >> 1) as i64 ^ -((raw & 1) as i64)),
                    ScalarKind::Bool => FieldValue::Bool(raw != 0),
                    _ => return Err("a varint where the type says otherwise".to_owned()),
                }
            }
            I64 => {
                let raw = u64::from_le_bytes(fixed::<8>(bytes, at)?);
                match self {
                    ScalarKind::Fixed64 => FieldValue::Uint(raw),
                    ScalarKind::Sfixed64 => FieldValue::Int(raw as i64),
                    _ => FieldValue::Float(f64::from_bits(raw)),
                }
            }
            I32 => {
                let raw = u32::from_le_bytes(fixed::<4>(bytes, at)?);
                match self {
                    ScalarKind::Fixed32 => FieldValue::Uint(u64::from(raw)),
                    ScalarKind::Sfixed32 => FieldValue::Int(i64::from(raw as i32)),
                    _ => FieldValue::Float(f64::from(f32::from_bits(raw))),
                }
            }
            _ => {
                let raw = len_delimited(bytes, at)?;
                match self {
                    ScalarKind::String => FieldValue::Text(
                        std::str::from_utf8(raw)
                            .map_err(|_| "a string that is not UTF-8".to_owned())?
                            .to_owned(),
                    ),
                    _ => FieldValue::Bytes(raw.to_vec()),
                }
            }
        })
    }
}

fn scalar_kind(kind: &Kind) -> ScalarKind {
    match kind {
        Kind::Int32 => ScalarKind::Int32,
        Kind::Int64 => ScalarKind::Int64,
        Kind::Uint32 => ScalarKind::Uint32,
        Kind::Uint64 => ScalarKind::Uint64,
        Kind::Sint32 => ScalarKind::Sint32,
        Kind::Sint64 => ScalarKind::Sint64,
        Kind::Fixed32 => ScalarKind::Fixed32,
        Kind::Fixed64 => ScalarKind::Fixed64,
        Kind::Sfixed32 => ScalarKind::Sfixed32,
        Kind::Sfixed64 => ScalarKind::Sfixed64,
        Kind::Float => ScalarKind::Float,
        Kind::Double => ScalarKind::Double,
        Kind::Bool => ScalarKind::Bool,
        Kind::Enum(_) => ScalarKind::Enum,
        Kind::String => ScalarKind::String,
        Kind::Bytes | Kind::Message(_) => ScalarKind::Bytes,
    }
}

fn first_field_name(field: &FieldDescriptor) -> String {
    match field.kind() {
        Kind::Message(inner) => inner
            .fields()
            .next()
            .map_or_else(|| "…".to_owned(), |f| f.name().to_owned()),
        _ => "…".to_owned(),
    }
}

/// `name` or `name[i]`.
fn split_index(part: &str) -> Result<(&str, Option<usize>), String> {
    let Some(open) = part.find('[') else {
        return if part.is_empty() {
            Err("an empty part (two dots, or a dot at an end)".to_owned())
        } else {
            Ok((part, None))
        };
    };
    let (name, rest) = part.split_at(open);
    let index = rest
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|i| i.parse::<usize>().ok())
        .ok_or_else(|| {
            format!("`{part}`: an index is a number in brackets, such as `{name}[0]`")
        })?;
    if name.is_empty() {
        return Err(format!("`{part}`: an index needs a field before it"));
    }
    Ok((name, Some(index)))
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let Some(&byte) = bytes.get(*at) else {
            return Err("the message ends inside a varint".to_owned());
        };
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(value);
        }
    }
    Err("a varint longer than 10 bytes".to_owned())
}

fn fixed<const N: usize>(bytes: &[u8], at: &mut usize) -> Result<[u8; N], String> {
    let raw = bytes
        .get(*at..*at + N)
        .and_then(|b| <[u8; N]>::try_from(b).ok())
        .ok_or_else(|| "the message ends inside a fixed-width field".to_owned())?;
    *at += N;
    Ok(raw)
}

fn len_delimited<'a>(bytes: &'a [u8], at: &mut usize) -> Result<&'a [u8], String> {
    let len = usize::try_from(varint(bytes, at)?).unwrap_or(usize::MAX);
    let end = at
        .checked_add(len)
        .filter(|end| *end <= bytes.len())
        .ok_or_else(|| "a length past the message's end".to_owned())?;
    let inner = &bytes[*at..end];
    *at = end;
    Ok(inner)
}

fn skip(bytes: &[u8], at: &mut usize, wire: u8) -> Result<(), String> {
    match wire {
        VARINT => varint(bytes, at).map(|_| ()),
        I64 => fixed::<8>(bytes, at).map(|_| ()),
        I32 => fixed::<4>(bytes, at).map(|_| ()),
        LEN => len_delimited(bytes, at).map(|_| ()),
        other => Err(format!("wire type {other}, which proto3 does not use")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;
    use prost_reflect::{DynamicMessage, ReflectMessage as _, Value};

    const PROTO: &str = r#"
        syntax = "proto3";
        package t;
        enum Color { RED = 0; GREEN = 1; BLUE = 2; }
        message Leaf {
            int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4;
            sint32 s32 = 5; sint64 s64 = 6; fixed32 f32 = 7; fixed64 f64 = 8;
            sfixed32 sf32 = 9; sfixed64 sf64 = 10; float fl = 11; double db = 12;
            bool b = 13; Color color = 14; string text = 15; bytes raw = 16;
            repeated int32 packed = 17; repeated string names = 18;
            repeated sint64 unpacked = 19 [packed = false];
        }
        message Middle { Leaf leaf = 1; repeated Leaf leaves = 2; string tag = 3; }
        message Top { Middle middle = 1; repeated Middle middles = 2; int64 id = 3; map<string, int32> counts = 4; }
    "#;

    fn top() -> MessageDescriptor {
        let schema = crate::scenario::Schema::compile_source("t.proto", PROTO).expect("compiles");
        schema.pool().get_message_by_name("t.Top").expect("t.Top")
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn chance(&mut self, one_in: u64) -> bool {
            self.next().is_multiple_of(one_in)
        }
    }

    /// A message with each field set, or left out, at random (values at their edges too).
    fn random_message(
        descriptor: &MessageDescriptor,
        rng: &mut Rng,
        depth: usize,
    ) -> DynamicMessage {
        let mut message = DynamicMessage::new(descriptor.clone());
        for field in descriptor.fields() {
            if field.is_map() || rng.chance(3) {
                continue;
            }
            let one = |rng: &mut Rng| -> Option<Value> {
                let wide = rng.next();
                let edge = [0u64, 1, u64::MAX, 1 << 31, 1 << 63, 127, 128][(wide % 7) as usize];
                let raw = if rng.chance(2) { edge } else { wide };
                Some(match field.kind() {
                    Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(raw as i32),
                    Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(raw as i64),
                    Kind::Uint32 | Kind::Fixed32 => Value::U32(raw as u32),
                    Kind::Uint64 | Kind::Fixed64 => Value::U64(raw),
                    Kind::Float => Value::F32((raw % 1000) as f32 / 8.0),
                    Kind::Double => Value::F64((raw % 100_000) as f64 / 16.0 - 10.0),
                    Kind::Bool => Value::Bool(raw % 2 == 1),
                    Kind::Enum(_) => Value::EnumNumber((raw % 3) as i32),
                    Kind::String => Value::String(format!("s{}é", raw % 1000)),
                    Kind::Bytes => {
                        Value::Bytes(raw.to_le_bytes()[..(raw % 9) as usize].to_vec().into())
                    }
                    Kind::Message(inner) => {
                        if depth > 2 {
                            return None;
                        }
                        Value::Message(random_message(&inner, rng, depth + 1))
                    }
                })
            };
            let value = if field.is_list() {
                let n = rng.next() % 4;
                Value::List((0..n).filter_map(|_| one(rng)).collect())
            } else {
                match one(rng) {
                    Some(v) => v,
                    None => continue,
                }
            };
            message.set_field(&field, value);
        }
        message
    }

    /// The value a decoder gives along `path` (None: an element not there).
    fn decoded(message: &DynamicMessage, path: &str) -> Option<FieldValue> {
        let mut current = message.clone();
        let parts: Vec<&str> = path.split('.').collect();
        for (at, part) in parts.iter().enumerate() {
            let (name, index) = split_index(part).expect("test paths are well formed");
            let field = current.descriptor().get_field_by_name(name).expect("field");
            let mut value = current.get_field(&field).into_owned();
            if let Some(i) = index {
                value = value.as_list().expect("list").get(i)?.clone();
            }
            if at + 1 < parts.len() {
                current = value.as_message().expect("message").clone();
                continue;
            }
            return Some(match value {
                Value::I32(v) => FieldValue::Int(v.into()),
                Value::I64(v) => FieldValue::Int(v),
                Value::U32(v) => FieldValue::Uint(v.into()),
                Value::U64(v) => FieldValue::Uint(v),
                Value::F32(v) => FieldValue::Float(v.into()),
                Value::F64(v) => FieldValue::Float(v),
                Value::Bool(v) => FieldValue::Bool(v),
                Value::EnumNumber(v) => FieldValue::Int(v.into()),
                Value::String(v) => FieldValue::Text(v),
                Value::Bytes(v) => FieldValue::Bytes(v.to_vec()),
                other => panic!("not a scalar: {other:?}"),
            });
        }
        unreachable!("a path has a last part")
    }

    const PATHS: &[&str] = &[
        "id",
        "middle.tag",
        "middle.leaf.i32",
        "middle.leaf.i64",
        "middle.leaf.u32",
        "middle.leaf.u64",
        "middle.leaf.s32",
        "middle.leaf.s64",
        "middle.leaf.f32",
        "middle.leaf.f64",
        "middle.leaf.sf32",
        "middle.leaf.sf64",
        "middle.leaf.fl",
        "middle.leaf.db",
        "middle.leaf.b",
        "middle.leaf.color",
        "middle.leaf.text",
        "middle.leaf.raw",
        "middle.leaf.packed[0]",
        "middle.leaf.packed[2]",
        "middle.leaf.names[1]",
        "middle.leaf.unpacked[0]",
        "middles[0].tag",
        "middles[1].leaf.text",
        "middles[0].leaves[1].packed[1]",
        "middle.leaves[2].s64",
    ];

    #[test]
    fn every_path_reads_what_a_decoder_gives_also_over_merged_parts() {
        let top = top();
        let paths: Vec<FieldPath> = PATHS
            .iter()
            .map(|p| FieldPath::resolve(&top, p).expect("resolves"))
            .collect();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..400 {
            let mut bytes = random_message(&top, &mut rng, 0).encode_to_vec();
            if round % 2 == 1 {
                // Two encodings one after the other: a decoder merges them (last scalar
                // wins, messages merge, repeated fields concatenate).
                bytes.extend(random_message(&top, &mut rng, 0).encode_to_vec());
            }
            let message = DynamicMessage::decode(top.clone(), bytes.as_slice()).expect("decodes");
            for (path, text) in paths.iter().zip(PATHS) {
                match decoded(&message, text) {
                    Some(expected) => assert_eq!(
                        path.read(&bytes),
                        Ok(expected),
                        "{text} in round {round}: {bytes:02x?}"
                    ),
                    None => assert!(
                        path.read(&bytes)
                            .is_err_and(|e| e.to_string().contains("asked for")),
                        "{text} in round {round}: an element not there reads as an error"
                    ),
                }
            }
        }
    }

    #[test]
    fn a_path_that_names_no_readable_field_says_why() {
        let top = top();
        let reason = |path: &str| FieldPath::resolve(&top, path).expect_err(path).to_string();
        assert!(
            reason("nope")
                .contains("t.Top has no field `nope` (its fields: middle, middles, id, counts)"),
            "{}",
            reason("nope")
        );
        assert!(reason("middles.tag")
            .contains("`middles` is repeated: say which element, such as `middles[0]`"));
        assert!(reason("middle[0].tag").contains("`middle` is not repeated"));
        assert!(reason("middle")
            .contains("`middle` is a message: name one of its fields, such as `middle.leaf`"));
        assert!(reason("id.x").contains("`id` is not a message"));
        assert!(reason("counts").contains("is a map"));
        assert!(reason("").contains("empty"));
        assert!(reason("middle..tag").contains("empty part"));
        assert!(reason("middles[x].tag").contains("an index is a number in brackets"));
        assert!(reason("[0]").contains("needs a field before it"));
    }

    #[test]
    fn bytes_that_are_not_the_message_are_an_error_not_a_value() {
        let top = top();
        let path = FieldPath::resolve(&top, "middle.tag").expect("resolves");
        // middle (field 1) as a varint, not a message.
        assert!(path
            .read(&[0x08, 0x01])
            .is_err_and(|e| e.to_string().contains("wire type 0")));
        // A length past the end.
        assert!(path
            .read(&[0x0a, 0x09, 0x1a])
            .is_err_and(|e| e.to_string().contains("past the message's end")));
        // A varint cut off.
        assert!(FieldPath::resolve(&top, "id")
            .expect("resolves")
            .read(&[0x18, 0x80])
            .is_err());
        // A string that is not UTF-8.
        assert!(path
            .read(&[0x0a, 0x03, 0x1a, 0x01, 0xff])
            .is_err_and(|e| e.to_string().contains("UTF-8")));
        // Absent: the default.
        assert_eq!(path.read(&[]), Ok(FieldValue::Text(String::new())));
    }
}
