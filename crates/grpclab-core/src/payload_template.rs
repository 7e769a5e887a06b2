//! A templated JSON payload encoded part by part: what is constant is encoded once, and only
//! the fields whose text varies are rendered and encoded per call.
//!
//! Why: rendering the whole text, parsing it as JSON and encoding it with prost-reflect for
//! every call (ghz's way) costs the client ten times a constant payload's work, although a
//! template usually varies one field of a large message. Protobuf's encoding is a sequence of
//! fields in number order (prost-reflect writes them so), each `key + value`, and a nested
//! message is `key + length + its own fields`: so a message whose varying fields are known can
//! be written as its constant runs of fields (bytes encoded once) with the varying fields
//! encoded between them, and a nested message that holds a varying field gets its length
//! worked out per call. The bytes are exactly those of the full rendering encoded at once
//! (the tests compare them), so no server sees a different message.
//!
//! A varying field is encoded straight from its rendered text when it is a singular string
//! (the text is the value) or a singular varint integer (the text parsed); any other
//! field — a list, a map, bytes, a float, an enum, a well-known type — and any direct encoding
//! that does not apply to a rendering (an empty or unparsable value) goes through
//! prost-reflect as the one-field JSON object `{"name": value}`, so every rendering means what
//! the full path would make of it, errors included.
//!
//! Only an object payload is planned; an array of messages, a templated key, a field the
//! message lacks, a field given twice or text this module cannot follow leave the payload to
//! the full path ([`PayloadTemplate::plan`] returns `None`).

use bytes::Bytes;
use prost::Message as _;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor};

use crate::framing::PREFIX_LEN;
use crate::template::{CallContext, CallInfo, Random, Template};

/// A payload template planned part by part (see the module's documentation).
#[derive(Debug, Clone)]
pub struct PayloadTemplate {
    parts: Vec<Part>,
}

/// One run of a message's fields, in field-number order.
#[derive(Debug, Clone)]
enum Part {
    /// Fields whose text is constant: their bytes, encoded once.
    Constant(Vec<u8>),
    /// A singular message field holding varying fields: its key, then its fields.
    Nested { key: Vec<u8>, parts: Vec<Part> },
    /// A varying field.
    Field(VaryingField),
}

/// A field whose text varies per call.
#[derive(Debug, Clone)]
struct VaryingField {
    /// How its rendered text becomes bytes without prost-reflect, when it can.
    direct: Direct,
    /// The field's key (number and wire type), for the direct encodings.
    key: Vec<u8>,
    /// Whether the field is written when its value is the default ("" or 0).
    presence: bool,
    /// The value's text (a string's inside, without quotes), for the direct encodings.
    value: Template,
    /// The field as a one-field JSON object for prost-reflect: the general path.
    json: Template,
    /// The message the field belongs to, for the general path.
    message: MessageDescriptor,
}

/// The direct encodings of a rendered value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direct {
    /// A string field given as a JSON string without escapes: the rendered text is the value.
    String,
    /// `int32`/`int64`/`uint32`/`uint64`: the rendered text parsed, written as a varint.
    Int(IntKind),
    /// None: always the general path.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntKind {
    I32,
    I64,
    U32,
    U64,
}

impl PayloadTemplate {
    /// Plans `text` (a JSON payload with template actions) for messages of `input`, the
    /// call-describing actions bound with `call`. `None` when the payload is not an object
    /// this module can plan, or when nothing of it is constant: the caller then renders the
    /// whole text per call.
    pub fn plan(text: &str, input: &MessageDescriptor, call: &CallInfo) -> Option<PayloadTemplate> {
        let mut parser = Parser { text, at: 0 };
        let root = parser.value()?;
        parser.skip_whitespace();
        if parser.at != text.len() {
            return None;
        }
        let Node::Object(members) = root else {
            return None;
        };
        let parts = plan_message(&members, input, call)?;
        // All varying at the top: the general path renders one object anyway.
        parts
            .iter()
            .any(|part| !matches!(part, Part::Field(_)))
            .then_some(PayloadTemplate { parts })
    }

    /// Renders one call's message and frames it (gRPC's 5-byte prefix, uncompressed). `text`
    /// is a reused buffer. Errors are prost-reflect's, for a rendering it cannot encode.
    pub fn render(
        &self,
        context: &CallContext<'_>,
        random: &mut Random,
        text: &mut String,
    ) -> Result<Bytes, String> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&[0; PREFIX_LEN]);
        write_parts(&self.parts, context, random, text, &mut out)?;
        let len = u32::try_from(out.len() - PREFIX_LEN)
            .map_err(|_| "the rendered message is larger than 4 GiB".to_owned())?;
        out[1..PREFIX_LEN].copy_from_slice(&len.to_be_bytes());
        Ok(Bytes::from(out))
    }
}

fn write_parts(
    parts: &[Part],
    context: &CallContext<'_>,
    random: &mut Random,
    text: &mut String,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    for part in parts {
        match part {
            Part::Constant(bytes) => out.extend_from_slice(bytes),
            Part::Nested { key, parts } => {
                out.extend_from_slice(key);
                let start = out.len();
                write_parts(parts, context, random, text, out)?;
                // The length goes before the fields, known only now: shift them by its size
                // (a few bytes of a small message).
                let (length, size) = varint_bytes((out.len() - start) as u64);
                out.splice(start..start, length[..size].iter().copied());
            }
            Part::Field(field) => field.write(context, random, text, out)?,
        }
    }
    Ok(())
}

impl VaryingField {
    fn write(
        &self,
        context: &CallContext<'_>,
        random: &mut Random,
        text: &mut String,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        if self.direct != Direct::None {
            self.value.render(context, random, text);
            if self.write_direct(text, out) {
                return Ok(());
            }
            // Rendered once already: the general path renders the same actions again, so a
            // random value may differ from this rendering, never from what is sent.
        }
        self.json.render(context, random, text);
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|err| format!("invalid JSON: {err}"))?;
        let message = DynamicMessage::deserialize(self.message.clone(), value)
            .map_err(|err| err.to_string())?;
        message
            .encode(out)
            .map_err(|err| format!("encoding: {err}"))
    }

    /// Writes the rendered `value` by the direct encoding; false when it does not apply
    /// (the general path then decides, errors included).
    fn write_direct(&self, value: &str, out: &mut Vec<u8>) -> bool {
        let number = match self.direct {
            Direct::None => return false,
            Direct::String => {
                if value.is_empty() && !self.presence {
                    return true;
                }
                out.extend_from_slice(&self.key);
                put_varint(value.len() as u64, out);
                out.extend_from_slice(value.as_bytes());
                return true;
            }
            // Negative int32/int64 are sign-extended to 64 bits, as protobuf writes them.
            Direct::Int(IntKind::I32) => value.parse::<i32>().ok().map(|n| i64::from(n) as u64),
            Direct::Int(IntKind::I64) => value.parse::<i64>().ok().map(|n| n as u64),
            Direct::Int(IntKind::U32) => value.parse::<u32>().ok().map(u64::from),
            Direct::Int(IntKind::U64) => value.parse::<u64>().ok(),
        };
        match number {
            None => false,
            Some(0) if !self.presence => true,
            Some(number) => {
                out.extend_from_slice(&self.key);
                put_varint(number, out);
                true
            }
        }
    }
}

/// The parts of a message of `message` given by `members`; `None` when it cannot be planned.
fn plan_message(
    members: &[Member<'_>],
    message: &MessageDescriptor,
    call: &CallInfo,
) -> Option<Vec<Part>> {
    let mut fields = Vec::with_capacity(members.len());
    for member in members {
        let key = member.key?;
        let field = message
            .get_field_by_json_name(key)
            .or_else(|| message.get_field_by_name(key))?;
        fields.push((field, member));
    }
    fields.sort_by_key(|(field, _)| field.number());
    if fields
        .windows(2)
        .any(|pair| pair[0].0.number() == pair[1].0.number())
    {
        return None;
    }
    let mut parts = Vec::new();
    let mut constant: Vec<String> = Vec::new();
    for (field, member) in fields {
        let bound = bind(member.text, call)?;
        if bound.is_constant() {
            constant.push(bound.text());
            continue;
        }
        flush_constant(&mut constant, message, &mut parts)?;
        parts.push(plan_field(&field, member, message, call)?);
    }
    flush_constant(&mut constant, message, &mut parts)?;
    Some(parts)
}

/// The constant members gathered so far, encoded as one run of fields.
fn flush_constant(
    members: &mut Vec<String>,
    message: &MessageDescriptor,
    parts: &mut Vec<Part>,
) -> Option<()> {
    if members.is_empty() {
        return Some(());
    }
    let json = format!("{{{}}}", members.join(","));
    members.clear();
    let value: serde_json::Value = serde_json::from_str(&json).ok()?;
    let encoded = DynamicMessage::deserialize(message.clone(), value)
        .ok()?
        .encode_to_vec();
    parts.push(Part::Constant(encoded));
    Some(())
}

/// A member whose text varies: a nested plan for a singular message given as an object, else
/// a varying field.
fn plan_field(
    field: &FieldDescriptor,
    member: &Member<'_>,
    message: &MessageDescriptor,
    call: &CallInfo,
) -> Option<Part> {
    let singular = !field.is_list() && !field.is_map();
    if let (Kind::Message(inner), Node::Object(members), true) =
        (field.kind(), &member.value, singular)
    {
        // Well-known types have JSON forms of their own (Struct, Any, wrappers, Timestamp).
        if !inner.full_name().starts_with("google.protobuf.") {
            return Some(Part::Nested {
                key: key_bytes(field.number(), 2),
                parts: plan_message(members, &inner, call)?,
            });
        }
    }
    let (direct, value_text) = match (&member.value, field.kind(), singular) {
        (
            Node::Leaf {
                string: Some(inner),
                ..
            },
            Kind::String,
            true,
        ) if !inner.contains('\\') => (Direct::String, *inner),
        (Node::Leaf { string, text }, kind, true) => match int_kind(&kind) {
            Some(int) if !string.is_some_and(|inner| inner.contains('\\')) => {
                (Direct::Int(int), string.unwrap_or(text))
            }
            _ => (Direct::None, ""),
        },
        _ => (Direct::None, ""),
    };
    let wire_type = if direct == Direct::String { 2 } else { 0 };
    Some(Part::Field(VaryingField {
        direct,
        key: key_bytes(field.number(), wire_type),
        presence: field.supports_presence(),
        value: bind(value_text, call)?,
        json: bind(&format!("{{{}}}", member.text), call)?,
        message: message.clone(),
    }))
}

fn int_kind(kind: &Kind) -> Option<IntKind> {
    match kind {
        Kind::Int32 => Some(IntKind::I32),
        Kind::Int64 => Some(IntKind::I64),
        Kind::Uint32 => Some(IntKind::U32),
        Kind::Uint64 => Some(IntKind::U64),
        _ => None,
    }
}

fn bind(text: &str, call: &CallInfo) -> Option<Template> {
    Template::parse(text, "-d")
        .ok()
        .map(|template| template.bind(call))
}

fn key_bytes(number: u32, wire_type: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(5);
    put_varint((u64::from(number) << 3) | wire_type, &mut key);
    key
}

/// `value` as a varint on the stack: its bytes and how many there are.
fn varint_bytes(mut value: u64) -> ([u8; 10], usize) {
    let mut bytes = [0u8; 10];
    let mut size = 0;
    while value >= 0x80 {
        bytes[size] = (value as u8) | 0x80;
        value >>= 7;
        size += 1;
    }
    bytes[size] = value as u8;
    (bytes, size + 1)
}

fn put_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// JSON with template actions, as far as planning needs it: objects' members, everything
/// else a leaf kept as text.
enum Node<'a> {
    Object(Vec<Member<'a>>),
    Leaf {
        /// The leaf's text.
        text: &'a str,
        /// A string leaf's inside (between the quotes).
        string: Option<&'a str>,
    },
}

struct Member<'a> {
    /// The key, when it is a plain string (no escape, no action).
    key: Option<&'a str>,
    /// The member's whole text, `"key": value`.
    text: &'a str,
    value: Node<'a>,
}

/// A lenient reader of JSON whose text may hold `{{ ... }}` actions anywhere a value or part
/// of a string may be: it finds where things start and end, and leaves checking the JSON to
/// serde (on the rendered text). `None` for anything it cannot follow.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn skip_whitespace(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    /// Past a `{{ ... }}` action at the cursor.
    fn skip_action(&mut self) -> Option<()> {
        let close = self.rest().find("}}")?;
        self.at += close + 2;
        Some(())
    }

    fn value(&mut self) -> Option<Node<'a>> {
        self.skip_whitespace();
        let start = self.at;
        let rest = self.rest();
        if rest.starts_with("{{") {
            self.bare()?;
        } else if rest.starts_with('{') {
            return self.object();
        } else if rest.starts_with('[') {
            self.array()?;
        } else if rest.starts_with('"') {
            self.string()?;
            let text = &self.text[start..self.at];
            return Some(Node::Leaf {
                text,
                string: Some(&text[1..text.len() - 1]),
            });
        } else {
            self.bare()?;
        }
        Some(Node::Leaf {
            text: &self.text[start..self.at],
            string: None,
        })
    }

    /// A number, `true`, `null`, an action, or any run of them up to a delimiter.
    fn bare(&mut self) -> Option<()> {
        let start = self.at;
        while let Some(c) = self.rest().chars().next() {
            if self.rest().starts_with("{{") {
                self.skip_action()?;
            } else if matches!(c, ',' | '}' | ']' | ':' | '"' | '{' | '[') || c.is_whitespace() {
                break;
            } else {
                self.at += c.len_utf8();
            }
        }
        (self.at > start).then_some(())
    }

    /// Past a string at the cursor (its opening quote).
    fn string(&mut self) -> Option<()> {
        self.at += 1;
        loop {
            let rest = self.rest();
            let c = rest.chars().next()?;
            if rest.starts_with("{{") {
                self.skip_action()?;
            } else if c == '\\' {
                self.at += 1;
                let escaped = self.rest().chars().next()?;
                self.at += escaped.len_utf8();
            } else {
                self.at += c.len_utf8();
                if c == '"' {
                    return Some(());
                }
            }
        }
    }

    /// Past an array at the cursor: its elements are values, kept as the array's text.
    fn array(&mut self) -> Option<()> {
        self.at += 1;
        self.skip_whitespace();
        if self.rest().starts_with(']') {
            self.at += 1;
            return Some(());
        }
        loop {
            self.value()?;
            self.skip_whitespace();
            let c = self.rest().chars().next()?;
            self.at += 1;
            match c {
                ',' => continue,
                ']' => return Some(()),
                _ => return None,
            }
        }
    }

    fn object(&mut self) -> Option<Node<'a>> {
        self.at += 1;
        let mut members = Vec::new();
        self.skip_whitespace();
        if self.rest().starts_with('}') {
            self.at += 1;
            return Some(Node::Object(members));
        }
        loop {
            self.skip_whitespace();
            let start = self.at;
            if !self.rest().starts_with('"') {
                return None;
            }
            self.string()?;
            let quoted = &self.text[start..self.at];
            let inner = &quoted[1..quoted.len() - 1];
            let key = (!inner.contains('\\') && !inner.contains("{{")).then_some(inner);
            self.skip_whitespace();
            if !self.rest().starts_with(':') {
                return None;
            }
            self.at += 1;
            let value = self.value()?;
            members.push(Member {
                key,
                text: &self.text[start..self.at],
                value,
            });
            self.skip_whitespace();
            let c = self.rest().chars().next()?;
            self.at += 1;
            match c {
                ',' => continue,
                '}' => return Some(Node::Object(members)),
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::encode_payload;
    use std::time::{Duration, UNIX_EPOCH};

    fn complex() -> MessageDescriptor {
        crate::Scenario::builtin("complex_proto")
            .unwrap()
            .method()
            .input()
    }

    fn call() -> CallInfo {
        CallInfo {
            method_name: "SayHello".into(),
            ..CallInfo::default()
        }
    }

    /// The full path's bytes for call `number`: the whole text rendered, then encoded.
    fn full(text: &str, input: &MessageDescriptor, number: u64) -> Result<Bytes, String> {
        let template = Template::parse(text, "-d").unwrap().bind(&call());
        let mut rendered = String::new();
        template.render(&context(number), &mut Random::new(7), &mut rendered);
        encode_payload(input, &rendered)
            .map(|mut messages| messages.remove(0))
            .map_err(|err| err.to_string())
    }

    fn context(number: u64) -> CallContext<'static> {
        CallContext {
            request_number: number,
            worker_id: "g3",
            call_seed: number,
            now: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            vars: &[],
        }
    }

    fn partial(plan: &PayloadTemplate, number: u64) -> Result<Bytes, String> {
        plan.render(&context(number), &mut Random::new(7), &mut String::new())
    }

    #[test]
    fn partial_bytes_equal_the_full_rendering() {
        let input = complex();
        let templates = [
            // The benchmark's: one string deep inside a large message.
            r#"{"request":{"name":"n{{.RequestNumber}}","d":4.55332,"f":232.3,"b":true,"n":32,"l":444325235223,"c1":"ofcouse","pets":[{"name":"Bof","color":"BLUE"},{"name":"Kim","color":"RED"}]}}"#,
            // Integers bare and quoted, a templated list, fields out of number order.
            r#"{ "request" : { "pets":[{"name":"p{{.RequestNumber}}"}], "l": "{{.RequestNumber}}", "n": {{.RequestNumber}}, "name": "{{.WorkerID}}-{{.MethodName}}", "b": true } }"#,
            // A float and an enum go through prost-reflect per call.
            r#"{"request":{"d":{{.RequestNumber}}.5,"name":"x","c2":true}}"#,
            // Escapes in a varying string: the general path.
            r#"{"request":{"name":"a\"b{{.TimestampUnixMilli}}","n":7}}"#,
        ];
        for text in templates {
            let plan = PayloadTemplate::plan(text, &input, &call())
                .unwrap_or_else(|| panic!("not planned: {text}"));
            // 0 renders defaults (an empty or zero value is left out, as the full path does).
            for number in [0, 1, 2, 127, 128, 300, 1 << 40] {
                match (partial(&plan, number), full(text, &input, number)) {
                    (Ok(partial), Ok(full)) => assert_eq!(partial, full, "{text} at {number}"),
                    // int32 `n` past its range: both refuse the call.
                    (Err(_), Err(_)) => assert!(number > u64::from(u32::MAX)),
                    (partial, full) => panic!("{text} at {number}: {partial:?} vs {full:?}"),
                }
            }
        }
    }

    #[test]
    fn a_rendering_that_cannot_encode_fails_as_the_full_path_does() {
        let input = complex();
        // An int32 field given a value past its range at large request numbers.
        let text = r#"{"request":{"name":"x","n":"{{.RequestNumber}}9999999999"}}"#;
        let plan = PayloadTemplate::plan(text, &input, &call()).unwrap();
        assert!(partial(&plan, 5).is_err());
        assert!(full(text, &input, 5).is_err());
    }

    #[test]
    fn what_cannot_be_planned_is_left_to_the_full_path() {
        let input = complex();
        for text in [
            // An array of messages, a templated key, an unknown field, a field twice,
            // nothing constant at the top, unbalanced text.
            r#"[{"request":{"name":"{{.RequestNumber}}"}}]"#,
            r#"{"request":{"{{.MethodName}}":"x"}}"#,
            r#"{"request":{"name":"x"},"nope":"{{.RequestNumber}}"}"#,
            r#"{"request":{"name":"{{.UUID}}"},"request":{"n":1}}"#,
            r#"{"request":"{{.UUID}}"}"#,
            r#"{"request":{"name":"{{.UUID}}"}"#,
        ] {
            assert!(
                PayloadTemplate::plan(text, &input, &call()).is_none(),
                "planned: {text}"
            );
        }
    }
}
