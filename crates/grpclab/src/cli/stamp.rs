//! `--stream-stamp FIELD`: which field of a stream's replies holds the time the server
//! produced each one, checked against the method's schema before the run.

use grpclab_h2::client::{StampEncoding, StampField};
use prost_reflect::{Kind, MethodDescriptor};

use crate::InputError;

/// The reply field `name` of `method` as a stamp: a singular 64-bit integer field of a
/// streaming method that replies with a stream.
pub fn stamp_field(method: &MethodDescriptor, name: &str) -> Result<StampField, InputError> {
    if !method.is_server_streaming() {
        return Err(InputError(format!(
            "--stream-stamp reads each reply of a stream; {} has one reply, whose latency is the call's (leave --stream-stamp out)",
            method.full_name()
        )));
    }
    let output = method.output();
    let field = output.get_field_by_name(name).ok_or_else(|| {
        let integers: Vec<String> = output
            .fields()
            .filter(|field| encoding(&field.kind()).is_some() && !field.is_list())
            .map(|field| field.name().to_owned())
            .collect();
        InputError(format!(
            "--stream-stamp {name}: {} has no field of that name; its 64-bit integer fields: {}",
            output.full_name(),
            if integers.is_empty() {
                "none (the server must put a fixed64 or uint64 of Unix nanoseconds in its replies)"
                    .to_owned()
            } else {
                integers.join(", ")
            }
        ))
    })?;
    match encoding(&field.kind()) {
        Some(encoding) if !field.is_list() => Ok(StampField {
            number: field.number(),
            encoding,
        }),
        _ => Err(InputError(format!(
            "--stream-stamp {name}: {}.{name} is {}{:?}, not a single fixed64, sfixed64, uint64 or int64 holding nanoseconds since the Unix epoch",
            output.full_name(),
            if field.is_list() { "a repeated " } else { "" },
            field.kind()
        ))),
    }
}

/// How a field of `kind` is encoded, if it can hold a stamp.
fn encoding(kind: &Kind) -> Option<StampEncoding> {
    match kind {
        Kind::Fixed64 | Kind::Sfixed64 => Some(StampEncoding::Fixed64),
        Kind::Uint64 | Kind::Int64 => Some(StampEncoding::Varint),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grpclab_core::Scenario;

    fn method(name: &str) -> MethodDescriptor {
        match Scenario::builtin(name) {
            Ok(scenario) => scenario.method().clone(),
            Err(err) => panic!("{name}: {err}"),
        }
    }

    #[test]
    fn the_echo_replies_stamp_field_is_found_by_name() {
        let feed = method("server_stream_1kB");
        let field = stamp_field(&feed, "sent_unix_nanos").map_err(|e| e.0);
        assert_eq!(
            field,
            Ok(StampField {
                number: 3,
                encoding: StampEncoding::Fixed64
            })
        );
        // A uint64 is read as a varint.
        let sequence = stamp_field(&method("streaming_ping_pong"), "sequence").map_err(|e| e.0);
        assert_eq!(
            sequence,
            Ok(StampField {
                number: 2,
                encoding: StampEncoding::Varint
            })
        );
    }

    #[test]
    fn wrong_fields_and_one_reply_methods_are_refused_in_a_line() {
        let feed = method("server_stream_1kB");
        let unknown = stamp_field(&feed, "sent_at").err().map(|e| e.0);
        assert_eq!(
            unknown.as_deref(),
            Some("--stream-stamp sent_at: grpclab.streaming.v1.EchoReply has no field of that name; its 64-bit integer fields: sequence, sent_unix_nanos")
        );
        let bytes = stamp_field(&feed, "payload").err().map(|e| e.0);
        assert!(
            bytes
                .as_deref()
                .is_some_and(|line| line.contains("is bytes, not a single fixed64")),
            "{bytes:?}"
        );
        let upload = stamp_field(&method("client_stream_1kB"), "messages")
            .err()
            .map(|e| e.0);
        assert!(
            upload
                .as_deref()
                .is_some_and(|line| line.contains("has one reply")),
            "{upload:?}"
        );
    }
}
