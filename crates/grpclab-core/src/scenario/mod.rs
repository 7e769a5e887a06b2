//! Scenarios: what to call and with what.
//!
//! A scenario is a folder holding `*.proto` files and a `payload` (the request as JSON, or a
//! JSON array of requests to send round-robin). The grpc_bench scenarios ship inside the binary
//! ([`BUILTIN`]); any other folder, or `--proto/--call/--data` on the command line, is a user's.
//!
//! `.proto` files are compiled at run time with protox and payloads encoded with prost-reflect,
//! so nothing needs protoc and no code is generated for a user's schema. Each distinct request
//! is encoded and framed exactly once; the load engine shares the bytes by reference.

use bytes::Bytes;
use prost_reflect::{DynamicMessage, MethodDescriptor};
use std::path::{Path, PathBuf};

mod payload;
mod schema;

use payload::summarize;
pub use payload::{binary_payload, encode_payload, validate_reply, ReplyError};
pub use schema::{import_paths, Schema};

/// A scenario compiled into the binary: its name, its `.proto` source and its JSON payload.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinScenario {
    /// The folder name under `scenarios/`, e.g. `complex_proto`.
    pub name: &'static str,
    /// The `.proto` file's name (`helloworld.proto`, or `streaming.proto`).
    pub proto_file: &'static str,
    /// The text of its `.proto` file.
    pub proto: &'static str,
    /// The method to call, where the schema has several.
    pub call: Option<&'static str>,
    /// The text of its `payload`.
    pub payload: &'static str,
}

macro_rules! builtin {
    ($name:literal) => {
        BuiltinScenario {
            name: $name,
            proto_file: "helloworld.proto",
            proto: include_str!(concat!(
                "../../../../scenarios/",
                $name,
                "/helloworld.proto"
            )),
            call: None,
            payload: include_str!(concat!("../../../../scenarios/", $name, "/payload")),
        }
    };
}

/// A streaming scenario: the streaming echo service (`scenarios/streaming/`) and one of its
/// methods, with the scenario folder's payload (an array: a stream's messages in order).
macro_rules! streaming {
    ($name:literal, $call:literal) => {
        BuiltinScenario {
            name: $name,
            proto_file: "streaming.proto",
            proto: include_str!("../../../../scenarios/streaming/streaming.proto"),
            call: Some($call),
            payload: include_str!(concat!("../../../../scenarios/", $name, "/payload")),
        }
    };
}

/// The grpc_bench scenarios, then the streaming ones, as committed under `scenarios/`.
pub const BUILTIN: &[BuiltinScenario] = &[
    builtin!("complex_proto"),
    builtin!("string_10B"),
    builtin!("string_100B"),
    builtin!("string_1kB"),
    builtin!("string_10kB"),
    builtin!("large_complex"),
    // Bidi ping-pong: 10 round trips of 100-byte messages per call.
    streaming!(
        "streaming_ping_pong",
        "grpclab.streaming.v1.StreamingEcho.PingPong"
    ),
    // 100 replies of 1 kB to each request.
    streaming!(
        "server_stream_1kB",
        "grpclab.streaming.v1.StreamingEcho.Feed"
    ),
    // 10 messages of 1 kB per call, one summary back.
    streaming!(
        "client_stream_1kB",
        "grpclab.streaming.v1.StreamingEcho.Upload"
    ),
];

/// The file name of a scenario's payload inside its folder.
pub const PAYLOAD_FILE: &str = "payload";

/// Everything that can be wrong with a scenario, a schema or a payload. Each message says what
/// is wrong and where, ready to print as one line.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// the file
        path: PathBuf,
        /// why
        source: std::io::Error,
    },
    /// A `.proto` file does not compile; `location` is `file:line:col` where known.
    #[error("{location}: {message}")]
    Proto {
        /// `file:line:col`, or just the file
        location: String,
        /// protox's description of the problem
        message: String,
    },
    /// No such built-in scenario and no such folder.
    #[error("unknown scenario '{name}': not a folder, and the built-in scenarios are {available}")]
    UnknownScenario {
        /// what was asked for
        name: String,
        /// the built-in names, comma-separated
        available: String,
    },
    /// A `FileDescriptorSet` (protoset or reflection) that does not decode or link.
    #[error("{origin}: not a usable FileDescriptorSet: {reason}")]
    Descriptors {
        /// the file, or the server
        origin: String,
        /// prost-reflect's description of the problem
        reason: String,
    },
    /// The call names no method of the schema.
    #[error("unknown call '{call}'; the schema has: {available}")]
    UnknownCall {
        /// what was asked for
        call: String,
        /// the methods there are, as `package.Service.Method`, comma-separated
        available: String,
    },
    /// The schema has several methods and no call was given.
    #[error("the schema has several methods ({available}); choose one with --call")]
    AmbiguousCall {
        /// the methods there are
        available: String,
    },
    /// The payload is not a JSON object (or array of objects) that fits the request message.
    #[error("payload does not fit {message}: {reason}")]
    Payload {
        /// the request message's full name
        message: String,
        /// serde's or prost-reflect's reason, naming the field and position
        reason: String,
    },
}

/// A scenario ready to run: the method and its framed requests.
#[derive(Debug, Clone)]
pub struct Scenario {
    name: String,
    method: MethodDescriptor,
    requests: Vec<Bytes>,
}

impl Scenario {
    /// A built-in scenario by name.
    pub fn builtin(name: &str) -> Result<Scenario, ScenarioError> {
        let builtin = BUILTIN.iter().find(|b| b.name == name).ok_or_else(|| {
            ScenarioError::UnknownScenario {
                name: name.to_owned(),
                available: builtin_names(),
            }
        })?;
        let schema = Schema::compile_source(builtin.proto_file, builtin.proto)?;
        let method = schema.method(builtin.call)?;
        let requests = encode_payload(&method.input(), builtin.payload)?;
        Ok(Scenario {
            name: name.to_owned(),
            method,
            requests,
        })
    }

    /// A scenario folder: every `*.proto` in it (compiled with the folder as include path) and
    /// its `payload` file. `call` picks the method where the schema has several.
    pub fn from_dir(dir: &Path, call: Option<&str>) -> Result<Scenario, ScenarioError> {
        let io = |source| ScenarioError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut protos: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "proto"))
            .collect();
        protos.sort();
        if protos.is_empty() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the folder holds no .proto file",
            )));
        }
        let schema = Schema::compile(&protos, &[dir.to_path_buf()])?;
        let method = schema.method(call)?;
        let payload_path = dir.join(PAYLOAD_FILE);
        let payload =
            std::fs::read_to_string(&payload_path).map_err(|source| ScenarioError::Io {
                path: payload_path,
                source,
            })?;
        let requests = encode_payload(&method.input(), &payload)?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string());
        Ok(Scenario {
            name,
            method,
            requests,
        })
    }

    /// A built-in scenario's name, else a folder's path.
    pub fn load(name_or_dir: &str, call: Option<&str>) -> Result<Scenario, ScenarioError> {
        let dir = Path::new(name_or_dir);
        if dir.is_dir() {
            Scenario::from_dir(dir, call)
        } else {
            let scenario = Scenario::builtin(name_or_dir)?;
            match call {
                Some(call) if call.replace('/', ".") != scenario.method.full_name() => {
                    Err(ScenarioError::UnknownCall {
                        call: call.to_owned(),
                        available: scenario.method.full_name().to_owned(),
                    })
                }
                _ => Ok(scenario),
            }
        }
    }

    /// A scenario from parts: a method and a JSON payload for it.
    pub fn from_method(
        name: &str,
        method: MethodDescriptor,
        payload_json: &str,
    ) -> Result<Scenario, ScenarioError> {
        let requests = encode_payload(&method.input(), payload_json)?;
        Ok(Scenario {
            name: name.to_owned(),
            method,
            requests,
        })
    }

    /// A scenario from a method and a binary payload ([`binary_payload`]).
    pub fn from_method_binary(
        name: &str,
        method: MethodDescriptor,
        payload: &[u8],
    ) -> Result<Scenario, ScenarioError> {
        let requests = binary_payload(&method.input(), payload)?;
        Ok(Scenario {
            name: name.to_owned(),
            method,
            requests,
        })
    }

    /// This scenario with a binary payload instead of its own (`-b`/`-B`).
    pub fn with_binary_payload(self, payload: &[u8]) -> Result<Scenario, ScenarioError> {
        Scenario::from_method_binary(&self.name, self.method, payload)
    }

    /// This scenario with its payload replaced (`-d`/`-D` on top of `--scenario`).
    pub fn with_payload(self, payload_json: &str) -> Result<Scenario, ScenarioError> {
        Scenario::from_method(&self.name, self.method, payload_json)
    }

    /// The scenario's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The method called.
    pub fn method(&self) -> &MethodDescriptor {
        &self.method
    }

    /// The HTTP/2 `:path` of the call: `/package.Service/Method`.
    pub fn path(&self) -> String {
        format!(
            "/{}/{}",
            self.method.parent_service().full_name(),
            self.method.name()
        )
    }

    /// The framed requests, sent round-robin.
    pub fn requests(&self) -> &[Bytes] {
        &self.requests
    }

    /// Checks a reply to the scenario's first request: it must decode as the output message
    /// with no unknown field ([`validate_reply`]), and where the method is the grpc_bench
    /// Greeter shape (a `request` field in, a `response` field of the same type out) it must
    /// echo the request's `request` exactly. What the readiness call checks of any server,
    /// ours or a peer's.
    pub fn check_first_reply(&self, reply: &[u8]) -> Result<(), ReplyError> {
        let output = self.method.output();
        let echoed = payload::decode_reply(&output, reply)?;
        let input = self.method.input();
        let (Some(sent_field), Some(echo_field)) = (
            input.get_field_by_name("request"),
            output.get_field_by_name("response"),
        ) else {
            return Ok(());
        };
        if sent_field.kind() != echo_field.kind() {
            return Ok(());
        }
        let Some(first) = self.requests.first() else {
            return Ok(());
        };
        let sent = crate::framing::unframe_single(first)
            .ok()
            .and_then(|bytes| DynamicMessage::decode(input, bytes).ok())
            .ok_or(ReplyError::RequestUndecodable)?;
        if sent.get_field(&sent_field) != echoed.get_field(&echo_field) {
            return Err(ReplyError::NotEchoed {
                sent: summarize(&sent.get_field(&sent_field)),
                got: summarize(&echoed.get_field(&echo_field)),
            });
        }
        Ok(())
    }
}

/// The built-in scenario names, comma-separated.
pub fn builtin_names() -> String {
    BUILTIN
        .iter()
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_payloads_are_one_message_or_count_prefixed_messages() {
        let scenario = Scenario::builtin("complex_proto").unwrap();
        let input = scenario.method().input();
        let one = crate::framing::unframe_single(&scenario.requests()[0]).unwrap();
        let single = binary_payload(&input, one).unwrap();
        assert_eq!(single, scenario.requests());
        let other = Scenario::builtin("complex_proto")
            .unwrap()
            .with_payload(r#"{"request":{"name":"b"}}"#)
            .unwrap();
        let two = crate::framing::unframe_single(&other.requests()[0]).unwrap();
        let mut delimited = Vec::new();
        for message in [one, two] {
            prost::encoding::encode_varint(message.len() as u64, &mut delimited);
            delimited.extend_from_slice(message);
        }
        let both = binary_payload(&input, &delimited).unwrap();
        assert_eq!(both.len(), 2);
        assert_eq!(both[1], other.requests()[0]);
        let err = binary_payload(&input, b"\xff\xff\xff")
            .unwrap_err()
            .to_string();
        assert!(err.contains("neither one serialized message"), "{err}");
        assert!(binary_payload(&input, b"").is_err());
        // What `grpclab encode` writes (gRPC-framed) reads as the same requests, not as
        // count-prefixed messages with empty ones among them.
        let framed: Vec<u8> = [&scenario.requests()[0], &other.requests()[0]]
            .iter()
            .flat_map(|frame| frame.iter().copied())
            .collect();
        let both = binary_payload(&input, &framed).unwrap();
        assert_eq!(
            both,
            vec![scenario.requests()[0].clone(), other.requests()[0].clone()]
        );
        let one_framed = binary_payload(&input, &scenario.requests()[0]).unwrap();
        assert_eq!(one_framed, scenario.requests());
    }

    #[test]
    fn the_first_reply_must_echo_the_request() {
        let scenario = Scenario::builtin("complex_proto").unwrap();
        // A Greeter echo: HelloReply.response (field 1) = HelloRequest.request (field 1), so
        // the encoded reply is the encoded request.
        let request = crate::framing::unframe_single(&scenario.requests()[0]).unwrap();
        assert_eq!(scenario.check_first_reply(request), Ok(()));
        let other = Scenario::builtin("complex_proto")
            .unwrap()
            .with_payload(r#"{"request":{"name":"someone else"}}"#)
            .unwrap();
        let wrong = crate::framing::unframe_single(&other.requests()[0]).unwrap();
        let err = scenario.check_first_reply(wrong).unwrap_err();
        assert!(matches!(err, ReplyError::NotEchoed { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("not the request's `request` echoed back"),
            "{err}"
        );
        assert!(
            scenario.check_first_reply(b"").is_err(),
            "an empty reply echoes nothing"
        );
        assert!(scenario.check_first_reply(b"\xff\xff").is_err());
    }

    #[test]
    fn complex_proto_encodes_to_grpc_bench_size() {
        let scenario = Scenario::builtin("complex_proto").unwrap();
        assert_eq!(scenario.requests().len(), 1);
        assert_eq!(scenario.requests()[0].len(), 83);
        assert_eq!(scenario.path(), "/helloworld.Greeter/SayHello");
    }

    #[test]
    fn every_builtin_compiles_and_string_sizes_hold() {
        for builtin in BUILTIN {
            let scenario = Scenario::builtin(builtin.name).unwrap();
            let framed = scenario.requests()[0].len();
            let expected_string = match builtin.name {
                "string_10B" => Some(10),
                "string_100B" => Some(100),
                "string_1kB" => Some(1000),
                "string_10kB" => Some(10_000),
                _ => None,
            };
            if let Some(len) = expected_string {
                // prefix + request tag/len + Hello.name tag/len + the string
                assert!(
                    framed > len + 5 && framed <= len + 5 + 8,
                    "{}: {framed}",
                    builtin.name
                );
            }
            if builtin.name == "large_complex" {
                assert!(
                    (100_000..=200_000).contains(&framed),
                    "large_complex is {framed} bytes"
                );
            }
        }
    }

    #[test]
    fn proto_errors_carry_line_and_column() {
        let err = Schema::compile_source(
            "bad.proto",
            "syntax = \"proto3\";\nmessage M {\n  string a = 1\n}\n",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("bad.proto:4:1"), "{text}");
    }

    #[test]
    fn unknown_call_lists_methods() {
        let schema = Schema::compile_source("h.proto", BUILTIN[0].proto).unwrap();
        let err = schema
            .method(Some("helloworld.Greeter.SayBye"))
            .unwrap_err();
        assert!(
            err.to_string().contains("helloworld.Greeter.SayHello"),
            "{err}"
        );
        assert!(schema.method(Some("helloworld.Greeter/SayHello")).is_ok());
    }

    #[test]
    fn payload_errors_name_the_field() {
        let schema = Schema::compile_source("h.proto", BUILTIN[0].proto).unwrap();
        let input = schema.method(None).unwrap().input();
        let err = encode_payload(&input, r#"{"request": {"nmae": "x"}}"#).unwrap_err();
        assert!(err.to_string().contains("nmae"), "{err}");
        let err = encode_payload(&input, r#"{"request": {"n": "many"}}"#).unwrap_err();
        assert!(err.to_string().contains("helloworld.HelloRequest"), "{err}");
        let err = encode_payload(&input, "[1]").unwrap_err();
        assert!(
            err.to_string().contains("request [0]") || err.to_string().contains("expected"),
            "{err}"
        );
        assert_eq!(
            encode_payload(&input, r#"[{}, {"request": {"name": "b"}}]"#)
                .unwrap()
                .len(),
            2
        );
        // The path, and what the message has or the field takes (serde said only
        // "unrecognized field name 'nmae'", "invalid type: integer `5`, expected a string").
        for (payload, expected) in [
            (
                r#"{"request": {"nmae": "x"}}"#,
                "request.nmae: helloworld.Hello has no field 'nmae'; its fields: name, d, f, b, n, l, c1, c2, pets",
            ),
            (
                r#"{"name": "Joe"}"#,
                "name: helloworld.HelloRequest has no field 'name'; its fields: request",
            ),
            (
                r#"{"request": {"name": 5}}"#,
                "request.name: expected a string, found a number",
            ),
            (
                r#"{"request": {"pets": [{"name": "a"}, {"color": "PINK"}]}}"#,
                "request.pets[1].color: 'PINK' is not a value of helloworld.Hello.Pet.Color (BLACK, WHITE, BLUE, RED, YELLOW, GREEN)",
            ),
            (
                r#"{"request": {"pets": {"name": "a"}}}"#,
                "request.pets: expected an array, found an object",
            ),
            (
                r#"{"request": {"b": "yes"}}"#,
                "request.b: expected true or false, found a string",
            ),
            (
                r#"[{}, {"request": "Joe"}]"#,
                "request [1]: request: expected an object (helloworld.Hello), found a string",
            ),
        ] {
            let err = encode_payload(&input, payload).unwrap_err().to_string();
            assert!(err.ends_with(expected), "{payload}: {err}");
        }
    }

    #[test]
    fn validation_rejects_garbage_and_unknown_fields() {
        let scenario = Scenario::builtin("complex_proto").unwrap();
        let output = scenario.method().output();
        let request = &scenario.requests()[0][5..];
        // HelloReply and HelloRequest share their layout, so an echo validates.
        assert_eq!(validate_reply(&output, request), Ok(()));
        assert!(validate_reply(&output, b"\xff\xff").is_err());
        // field 15, varint 1: unknown to HelloReply
        assert!(matches!(
            validate_reply(&output, b"\x78\x01"),
            Err(ReplyError::UnknownField { number: 15, .. })
        ));
    }
}
