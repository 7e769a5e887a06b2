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
use miette::Diagnostic;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, MethodDescriptor};
use protox::file::{File, FileResolver};
use std::path::{Path, PathBuf};

use crate::framing::frame_message;

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
            proto: include_str!(concat!("../../../scenarios/", $name, "/helloworld.proto")),
            call: None,
            payload: include_str!(concat!("../../../scenarios/", $name, "/payload")),
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
            proto: include_str!("../../../scenarios/streaming/streaming.proto"),
            call: Some($call),
            payload: include_str!(concat!("../../../scenarios/", $name, "/payload")),
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

/// Where imports of `files` are looked for, in order, as ghz looks (and lists them in its
/// JSON's `import-paths`): each file's own folder (unless it is `.`), then `.`, then the
/// `-i` folders given.
pub fn import_paths(files: &[PathBuf], given: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut add = |path: &Path| {
        if !paths.iter().any(|known| known == path) {
            paths.push(path.to_path_buf());
        }
    };
    for file in files {
        if let Some(dir) = file
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty() && *dir != Path::new("."))
        {
            add(dir);
        }
    }
    add(Path::new("."));
    for path in given {
        add(path);
    }
    paths
}

/// A compiled set of `.proto` files.
#[derive(Debug, Clone)]
pub struct Schema {
    pool: DescriptorPool,
}

impl Schema {
    /// Compiles `files` (paths to `.proto` files), resolving imports against
    /// [`import_paths`]`(files, includes)`, as ghz does.
    pub fn compile(files: &[PathBuf], includes: &[PathBuf]) -> Result<Schema, ScenarioError> {
        let includes = import_paths(files, includes);
        for file in files {
            if !file.is_file() {
                return Err(ScenarioError::Io {
                    path: file.clone(),
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
                });
            }
        }
        let mut compiler =
            protox::Compiler::new(&includes).map_err(|err| proto_error(&err, |_| None))?;
        compiler
            .open_files(files)
            .map_err(|err| proto_error(&err, |name| read_included(&includes, name)))?;
        Ok(Schema {
            pool: compiler.descriptor_pool(),
        })
    }

    /// Compiles one `.proto` given as text, named `name` in error messages.
    pub fn compile_source(name: &str, source: &str) -> Result<Schema, ScenarioError> {
        let resolver = SingleFileResolver { name, source };
        let mut compiler = protox::Compiler::with_file_resolver(resolver.owned());
        compiler
            .open_file(name)
            .map_err(|err| proto_error(&err, |file| (file == name).then(|| source.to_owned())))?;
        Ok(Schema {
            pool: compiler.descriptor_pool(),
        })
    }

    /// A schema from an encoded `FileDescriptorSet`: a protoset file (`protoc
    /// --descriptor_set_out --include_imports`, ghz's `--protoset`) or what server reflection
    /// returned. `source` names it in error messages.
    pub fn from_descriptor_set(source: &str, bytes: &[u8]) -> Result<Schema, ScenarioError> {
        let pool = DescriptorPool::decode(bytes).map_err(|err| ScenarioError::Descriptors {
            origin: source.to_owned(),
            reason: err.to_string(),
        })?;
        Ok(Schema { pool })
    }

    /// Every method of every service, as `package.Service.Method`.
    pub fn method_names(&self) -> Vec<String> {
        self.pool
            .services()
            .flat_map(|service| service.methods().collect::<Vec<_>>())
            .map(|method| method.full_name().to_owned())
            .collect()
    }

    /// Finds the method `call` names: `package.Service.Method` or `package.Service/Method` (ghz
    /// accepts both). With no call, the schema's only method.
    pub fn method(&self, call: Option<&str>) -> Result<MethodDescriptor, ScenarioError> {
        let available = || self.method_names().join(", ");
        let method = match call {
            None => {
                let mut methods = self
                    .pool
                    .services()
                    .flat_map(|s| s.methods().collect::<Vec<_>>());
                match (methods.next(), methods.next()) {
                    (Some(only), None) => only,
                    (None, _) => {
                        return Err(ScenarioError::UnknownCall {
                            call: String::new(),
                            available: "no services".to_owned(),
                        })
                    }
                    (Some(_), Some(_)) => {
                        return Err(ScenarioError::AmbiguousCall {
                            available: available(),
                        })
                    }
                }
            }
            Some(call) => {
                let normalized = call.trim_start_matches('/').replace('/', ".");
                let (service, method) =
                    normalized
                        .rsplit_once('.')
                        .ok_or_else(|| ScenarioError::UnknownCall {
                            call: call.to_owned(),
                            available: available(),
                        })?;
                self.pool
                    .get_service_by_name(service)
                    .and_then(|s| s.methods().find(|m| m.name() == method))
                    .ok_or_else(|| ScenarioError::UnknownCall {
                        call: call.to_owned(),
                        available: available(),
                    })?
            }
        };
        Ok(method)
    }
}

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
    pub fn check_first_reply(&self, reply: &[u8]) -> Result<(), String> {
        let output = self.method.output();
        validate_reply(&output, reply)?;
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
            .ok_or("the scenario's own request does not decode")?;
        let echoed = DynamicMessage::decode(output, reply)
            .map_err(|err| format!("reply does not decode: {err}"))?;
        if sent.get_field(&sent_field) != echoed.get_field(&echo_field) {
            return Err(format!(
                "the reply's `response` is not the request's `request` echoed back (sent {}, got {})",
                summarize(&sent.get_field(&sent_field)),
                summarize(&echoed.get_field(&echo_field))
            ));
        }
        Ok(())
    }
}

/// A value, shortened for an error message.
fn summarize(value: &prost_reflect::Value) -> String {
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

/// Checks a reply as `--validate` does: it must decode as the method's output message with no
/// field the schema does not know. Returns the reason when it does not.
pub fn validate_reply(output: &MessageDescriptor, message: &[u8]) -> Result<(), String> {
    let decoded = DynamicMessage::decode(output.clone(), message)
        .map_err(|err| format!("reply does not decode as {}: {err}", output.full_name()))?;
    if let Some(unknown) = first_unknown_field(&decoded) {
        return Err(format!(
            "reply has field number {unknown}, which {} does not define",
            output.full_name()
        ));
    }
    Ok(())
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

/// The built-in scenario names, comma-separated.
pub fn builtin_names() -> String {
    BUILTIN
        .iter()
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
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

fn read_included(includes: &[PathBuf], name: &str) -> Option<String> {
    includes
        .iter()
        .find_map(|dir| std::fs::read_to_string(dir.join(name)).ok())
}

/// Turns a protox error into `file:line:col: message`, reading the file's text through `source`
/// to turn protox's byte offset into a line and column.
fn proto_error(err: &protox::Error, source: impl Fn(&str) -> Option<String>) -> ScenarioError {
    let file = err.file().unwrap_or("<proto>").to_owned();
    let offset = err
        .labels()
        .and_then(|mut labels| labels.next())
        .map(|label| label.offset());
    let location = match (offset, source(&file)) {
        (Some(offset), Some(text)) => {
            let before = &text[..offset.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |nl| nl + 1) + 1;
            format!("{file}:{line}:{col}")
        }
        _ => file,
    };
    ScenarioError::Proto {
        location,
        message: err.to_string(),
    }
}

/// Serves one in-memory `.proto` to protox (the built-in scenarios live in the binary).
struct SingleFileResolver<'a> {
    name: &'a str,
    source: &'a str,
}

impl SingleFileResolver<'_> {
    fn owned(&self) -> OwnedFileResolver {
        OwnedFileResolver {
            name: self.name.to_owned(),
            source: self.source.to_owned(),
        }
    }
}

struct OwnedFileResolver {
    name: String,
    source: String,
}

impl FileResolver for OwnedFileResolver {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if name == self.name {
            File::from_source(name, &self.source)
        } else {
            // Well-known imports (google/protobuf/*) still resolve.
            protox::file::GoogleFileResolver::new().open_file(name)
        }
    }
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
        assert!(
            err.contains("not the request's `request` echoed back"),
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
        assert!(validate_reply(&output, b"\x78\x01")
            .unwrap_err()
            .contains("15"));
    }
}
