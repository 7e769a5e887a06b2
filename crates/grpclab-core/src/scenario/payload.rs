//! Payloads: JSON encoded with prost-reflect against the method's input (the first value
//! that does not fit named by its path), binary protobuf checked, replies validated.

use bytes::Bytes;
use prost::Message;
use prost_reflect::{DynamicMessage, MessageDescriptor};

use super::ScenarioError;
use crate::framing::frame_message;

/// Frames a binary payload (ghz's `-b`/`-B`): several count-prefixed messages (each preceded
/// by its length as a varint, protobuf's `writeDelimitedTo`) sent round-robin, or else one
/// serialized message. Every message must decode as `input`; the bytes are sent as given. A
/// file of gRPC-framed messages (what `grpclab encode` writes: a zero flag byte and a 4-byte
/// length before each) is read as such: as count-prefixed messages its zero bytes would read
/// as empty messages (one request became five, four of them empty).
pub fn binary_payload(
    input: &MessageDescriptor,
    bytes: &[u8],
) -> Result<Vec<Bytes>, ScenarioError> {
    let payload_error = |reason: String| ScenarioError::Payload {
        message: input.full_name().to_owned(),
        reason,
    };
    if bytes.is_empty() {
        return Err(payload_error(
            "the binary payload is empty: give one serialized message or count-prefixed messages"
                .to_owned(),
        ));
    }
    // A serialized message never starts with a zero byte (field number 0 does not exist),
    // so a leading zero is a gRPC frame's flag — or an empty first message, which the framed
    // reading rules out only if the whole file parses as frames.
    let grpc_framed = || -> Option<Vec<Bytes>> {
        crate::framing::split_frames(bytes)?
            .into_iter()
            .map(|(frame, message)| {
                DynamicMessage::decode(input.clone(), message).ok()?;
                Some(Bytes::copy_from_slice(frame))
            })
            .collect()
    };
    if bytes[0] == 0 {
        if let Some(messages) = grpc_framed().filter(|m| !m.is_empty()) {
            return Ok(messages);
        }
    }
    let delimited = || -> Option<Vec<Bytes>> {
        let mut rest = bytes;
        let mut messages = Vec::new();
        while !rest.is_empty() {
            let length = usize::try_from(prost::encoding::decode_varint(&mut rest).ok()?).ok()?;
            let message = rest.get(..length)?;
            DynamicMessage::decode(input.clone(), message).ok()?;
            messages.push(frame_message(message));
            rest = &rest[length..];
        }
        Some(messages)
    };
    if let Some(messages) = delimited().filter(|m| !m.is_empty()) {
        return Ok(messages);
    }
    DynamicMessage::decode(input.clone(), bytes).map_err(|err| {
        payload_error(format!(
            "the binary payload is neither one serialized message nor count-prefixed messages: {err}"
        ))
    })?;
    Ok(vec![frame_message(bytes)])
}

/// Encodes a JSON payload — one object, or an array of objects to send round-robin — as framed
/// gRPC request messages of type `input`.
pub fn encode_payload(input: &MessageDescriptor, json: &str) -> Result<Vec<Bytes>, ScenarioError> {
    let payload_error = |reason: String| ScenarioError::Payload {
        message: input.full_name().to_owned(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|err| payload_error(format!("invalid JSON: {err}")))?;
    let objects = match value {
        serde_json::Value::Array(items) if items.is_empty() => {
            return Err(payload_error("the array holds no requests".to_owned()))
        }
        serde_json::Value::Array(items) => items,
        object @ serde_json::Value::Object(_) => vec![object],
        other => {
            return Err(payload_error(format!(
                "expected a JSON object or an array of objects, found {}",
                json_kind(&other)
            )))
        }
    };
    let several = objects.len() > 1;
    objects
        .into_iter()
        .enumerate()
        .map(|(index, object)| {
            let message = DynamicMessage::deserialize(input.clone(), &object).map_err(|err| {
                // serde's reason names neither the field's path nor what the message has:
                // find the first problem ourselves, and keep serde's word when we find none.
                let reason = first_misfit(&object, input, "").unwrap_or_else(|| err.to_string());
                if several {
                    payload_error(format!("request [{index}]: {reason}"))
                } else {
                    payload_error(reason)
                }
            })?;
            Ok(frame_message(&message.encode_to_vec()))
        })
        .collect()
}

/// The first place where `value` does not fit `message` under proto3's JSON mapping, as
/// `PATH: what is wrong`: a field the message does not have (listing those it has), a value of
/// the wrong kind, an enum value that does not exist. `None` when none is found here (the
/// caller keeps the decoder's reason). Well-known types (`google.protobuf.*`), which have JSON
/// forms of their own, are not looked into.
fn first_misfit(
    value: &serde_json::Value,
    message: &MessageDescriptor,
    path: &str,
) -> Option<String> {
    use serde_json::Value;
    if message.full_name().starts_with("google.protobuf.") {
        return None;
    }
    let Value::Object(fields) = value else {
        return Some(format!(
            "{}: expected an object ({}), found {}",
            path_or_root(path),
            message.full_name(),
            json_kind(value)
        ));
    };
    for (name, value) in fields {
        let at = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        let Some(field) = message
            .get_field_by_name(name)
            .or_else(|| message.get_field_by_json_name(name))
        else {
            let known: Vec<String> = message.fields().map(|f| f.name().to_owned()).collect();
            return Some(format!(
                "{at}: {} has no field '{name}'; its fields: {}",
                message.full_name(),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        };
        if value.is_null() {
            continue;
        }
        if field.is_map() {
            let Value::Object(entries) = value else {
                return Some(format!(
                    "{at}: expected an object (a map), found {}",
                    json_kind(value)
                ));
            };
            let prost_reflect::Kind::Message(entry) = field.kind() else {
                continue;
            };
            let value_kind = entry.map_entry_value_field().kind();
            if let Some(problem) = entries
                .iter()
                .find_map(|(key, v)| kind_misfit(v, &value_kind, &format!("{at}[{key}]")))
            {
                return Some(problem);
            }
        } else if field.is_list() {
            let Value::Array(items) = value else {
                return Some(format!(
                    "{at}: expected an array, found {}",
                    json_kind(value)
                ));
            };
            if let Some(problem) = items
                .iter()
                .enumerate()
                .find_map(|(i, v)| kind_misfit(v, &field.kind(), &format!("{at}[{i}]")))
            {
                return Some(problem);
            }
        } else if let Some(problem) = kind_misfit(value, &field.kind(), &at) {
            return Some(problem);
        }
    }
    None
}

/// Whether one JSON value fits a field's kind (see [`first_misfit`]).
fn kind_misfit(value: &serde_json::Value, kind: &prost_reflect::Kind, at: &str) -> Option<String> {
    use prost_reflect::Kind;
    use serde_json::Value;
    let expected = match (kind, value) {
        (Kind::Message(message), _) => return first_misfit(value, message, at),
        (Kind::Enum(enumeration), Value::String(name)) => {
            if enumeration.get_value_by_name(name).is_some() {
                return None;
            }
            let names: Vec<String> = enumeration.values().map(|v| v.name().to_owned()).collect();
            return Some(format!(
                "{at}: '{name}' is not a value of {} ({})",
                enumeration.full_name(),
                names.join(", ")
            ));
        }
        (Kind::Enum(_), Value::Number(_)) => return None,
        (Kind::Enum(enumeration), _) => format!(
            "a value of {} (a name or a number)",
            enumeration.full_name()
        ),
        (Kind::String | Kind::Bytes, Value::String(_)) => return None,
        (Kind::String, _) => "a string".to_owned(),
        (Kind::Bytes, _) => "a string (base64)".to_owned(),
        (Kind::Bool, Value::Bool(_)) => return None,
        (Kind::Bool, _) => "true or false".to_owned(),
        // Numbers: proto3's JSON takes them as numbers or as strings.
        (_, Value::Number(_) | Value::String(_)) => return None,
        _ => "a number".to_owned(),
    };
    Some(format!(
        "{at}: expected {expected}, found {}",
        json_kind(value)
    ))
}

fn path_or_root(path: &str) -> &str {
    if path.is_empty() {
        "the request"
    } else {
        path
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A value, shortened for an error message.
pub(super) fn summarize(value: &prost_reflect::Value) -> String {
    let text = format!("{value:?}");
    if text.len() > 120 {
        let cut = text
            .char_indices()
            .map(|(i, _)| i)
            .take_while(|i| *i <= 120)
            .last()
            .unwrap_or(0);
        format!("{}…", &text[..cut])
    } else {
        text
    }
}

/// Why a reply was refused (`--validate`, a readiness call's check).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// The bytes are not the method's output message.
    #[error("reply does not decode as {message}: {reason}")]
    Undecodable {
        /// The output message's full name.
        message: String,
        /// The decoder's reason.
        reason: String,
    },
    /// The reply carries a field the schema does not define (a server on another schema).
    #[error("reply has field number {number}, which {message} does not define")]
    UnknownField {
        /// The message (or nested message) type's full name.
        message: String,
        /// The unknown field's number.
        number: u32,
    },
    /// The scenario's own first request could not be read back (nothing to compare with).
    #[error("the scenario's own request does not decode")]
    RequestUndecodable,
    /// A Greeter-shaped reply whose `response` is not the request's `request`.
    #[error("the reply's `response` is not the request's `request` echoed back (sent {sent}, got {got})")]
    NotEchoed {
        /// The sent field, summarized.
        sent: String,
        /// The echoed field, summarized.
        got: String,
    },
}

/// Checks a reply as `--validate` does: it must decode as the method's output message with no
/// field the schema does not know.
pub fn validate_reply(output: &MessageDescriptor, message: &[u8]) -> Result<(), ReplyError> {
    decode_reply(output, message).map(|_| ())
}

/// The reply decoded as `output`, refused when it does not decode or carries a field the
/// schema does not know.
pub(super) fn decode_reply(
    output: &MessageDescriptor,
    message: &[u8],
) -> Result<DynamicMessage, ReplyError> {
    let decoded =
        DynamicMessage::decode(output.clone(), message).map_err(|err| ReplyError::Undecodable {
            message: output.full_name().to_owned(),
            reason: err.to_string(),
        })?;
    if let Some(unknown) = first_unknown_field(&decoded) {
        return Err(ReplyError::UnknownField {
            message: output.full_name().to_owned(),
            number: unknown,
        });
    }
    Ok(decoded)
}

fn first_unknown_field(message: &DynamicMessage) -> Option<u32> {
    if let Some(field) = message.unknown_fields().next() {
        return Some(field.number());
    }
    message.fields().find_map(|(_, value)| match value {
        prost_reflect::Value::Message(inner) => first_unknown_field(inner),
        prost_reflect::Value::List(items) => items.iter().find_map(|item| match item {
            prost_reflect::Value::Message(inner) => first_unknown_field(inner),
            _ => None,
        }),
        _ => None,
    })
}
