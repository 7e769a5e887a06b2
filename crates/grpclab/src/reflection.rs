//! Server reflection: the call's descriptors from the server itself, as ghz gets them when
//! given neither `--proto` nor `--protoset`.
//!
//! Speaks `grpc.reflection.v1.ServerReflection` and falls back to `v1alpha` (older servers
//! offer only that; the messages are the same on the wire). Each question goes on a stream of
//! its own — one request, half-close, one answer — which every server answers, whether it
//! keeps reflection streams open or not. The questions: list the services (to check the call's
//! service exists, and to name the choices when it does not), the file that defines the
//! service, then every file it imports that the answer did not already include. The files
//! become one `FileDescriptorSet`, dependencies first, decoded by prost-reflect like a protoset.
//!
//! Not the hot path: a tonic client (tonic's own channel) does it once, before the run.

use http::{HeaderName, HeaderValue};
use prost::Message as _;
use prost_types::{FileDescriptorProto, FileDescriptorSet};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use grpclab_core::tls::TlsClient;
use tonic::codegen::http::uri::PathAndQuery;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

/// Where `grpclab load` asks for descriptors when no schema flag is given: the server, by
/// reflection, with these request headers.
#[derive(Clone, Copy)]
pub struct ReflectFrom<'a> {
    /// The server.
    pub target: SocketAddr,
    /// How long connecting may take.
    pub connect_timeout: std::time::Duration,
    /// Headers for the reflection requests.
    pub metadata: &'a [(HeaderName, HeaderValue)],
    /// TLS, as the load itself uses it; `None` is plaintext.
    pub tls: Option<&'a TlsClient>,
}

/// How long reflection may take in all, connection included.
const REFLECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// Files fetched at most: a bound against a server that answers with ever new imports.
const MAX_FILES: usize = 1_000;

/// The two versions of the service, newest first.
const VERSIONS: [&str; 2] = ["grpc.reflection.v1", "grpc.reflection.v1alpha"];

/// What reflection found: the encoded `FileDescriptorSet` and which version answered.
#[derive(Debug, Clone)]
pub struct Reflected {
    /// `FileDescriptorSet`, encoded, dependencies before the files that import them.
    pub descriptor_set: Vec<u8>,
    /// `grpc.reflection.v1` or `grpc.reflection.v1alpha`.
    pub version: &'static str,
}

/// Why reflection gave nothing usable. Each message says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum ReflectionError {
    /// The server could not be reached (or reflection took too long).
    #[error("cannot ask {target} for its services by reflection: {reason}; is the server up (and TLS or plaintext as the flags say: --insecure for h2c)?")]
    Unreachable {
        /// the server
        target: String,
        /// what failed
        reason: String,
    },
    /// Neither version of the reflection service is there.
    #[error("{target} does not offer server reflection ({reason}); give the schema with --proto FILE or --protoset FILE, or use a built-in scenario with --scenario NAME ({builtin})")]
    NotOffered {
        /// the server
        target: String,
        /// the status the server gave
        reason: String,
        /// the built-in scenarios
        builtin: String,
    },
    /// No `--call`: reflection needs to know which service to describe.
    #[error("say what to call: --call package.Service.Method (the server at {target} offers {services} by reflection), or --proto FILE, --protoset FILE or --scenario NAME ({builtin})")]
    NoCall {
        /// the server
        target: String,
        /// the services it lists
        services: String,
        /// the built-in scenarios
        builtin: String,
    },
    /// The call's service is not among the server's.
    #[error(
        "the server at {target} has no service '{service}'; it offers {services} (check --call)"
    )]
    UnknownService {
        /// the server
        target: String,
        /// what was asked for
        service: String,
        /// what it lists
        services: String,
    },
    /// The server answered something reflection does not allow.
    #[error("the reflection service of {target} answered badly: {reason}")]
    Protocol {
        /// the server
        target: String,
        /// what was wrong
        reason: String,
    },
}

/// Asks the server `from` names for the descriptors of `call`'s service
/// (`package.Service.Method` or `package.Service/Method`; `None` lists the services in the
/// error). `from.metadata` goes on every reflection request (ghz's `--reflect-metadata`).
pub fn fetch(from: &ReflectFrom<'_>, call: Option<&str>) -> Result<Reflected, ReflectionError> {
    let target = from.target;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| ReflectionError::Unreachable {
            target: target.to_string(),
            reason: format!("cannot start a runtime: {err}"),
        })?;
    let asking = Asker {
        target,
        connect_timeout: from.connect_timeout,
        metadata: from.metadata,
        tls: from.tls,
    };
    runtime.block_on(async {
        match tokio::time::timeout(REFLECTION_TIMEOUT, asking.fetch(call)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ReflectionError::Unreachable {
                target: target.to_string(),
                reason: format!("no answer within {REFLECTION_TIMEOUT:?}"),
            }),
        }
    })
}

/// One server's reflection service, asked one question per stream.
struct Asker<'a> {
    target: SocketAddr,
    connect_timeout: Duration,
    metadata: &'a [(HeaderName, HeaderValue)],
    tls: Option<&'a grpclab_core::tls::TlsClient>,
}

impl Asker<'_> {
    fn unreachable(&self, reason: impl std::fmt::Display) -> ReflectionError {
        ReflectionError::Unreachable {
            target: self.target.to_string(),
            reason: reason.to_string(),
        }
    }

    fn protocol(&self, reason: impl Into<String>) -> ReflectionError {
        ReflectionError::Protocol {
            target: self.target.to_string(),
            reason: reason.into(),
        }
    }

    async fn fetch(&self, call: Option<&str>) -> Result<Reflected, ReflectionError> {
        let channel = grpclab_server::channel::connect(self.target, self.connect_timeout, self.tls)
            .await
            .map_err(|err| self.unreachable(err))?;
        let mut grpc = tonic::client::Grpc::new(channel);

        // Which version answers, and the services it lists.
        let mut refusals = Vec::new();
        let mut found = None;
        for version in VERSIONS {
            match self
                .ask(
                    &mut grpc,
                    version,
                    MessageRequest::ListServices(String::new()),
                )
                .await
            {
                Ok(MessageResponse::ListServicesResponse(list)) => {
                    found = Some((version, list.service));
                    break;
                }
                Ok(other) => return Err(self.protocol(unexpected(&other, "a service list"))),
                Err(status) if status.code() == tonic::Code::Unimplemented => {
                    refusals.push(format!("{version} is UNIMPLEMENTED"));
                }
                Err(status) => return Err(self.unreachable(describe_status(&status))),
            }
        }
        let Some((version, services)) = found else {
            return Err(ReflectionError::NotOffered {
                target: self.target.to_string(),
                reason: refusals.join(", "),
                builtin: grpclab_core::scenario::builtin_names(),
            });
        };
        let names: Vec<String> = services
            .into_iter()
            .map(|s| s.name)
            .filter(|name| !name.starts_with("grpc.reflection."))
            .collect();
        let listed = if names.is_empty() {
            "no service".to_owned()
        } else {
            names.join(", ")
        };
        let Some(call) = call else {
            return Err(ReflectionError::NoCall {
                target: self.target.to_string(),
                services: listed,
                builtin: grpclab_core::scenario::builtin_names(),
            });
        };
        let normalized = call.trim_start_matches('/').replace('/', ".");
        let service = normalized
            .rsplit_once('.')
            .map_or(normalized.as_str(), |(service, _)| service);
        if !names.iter().any(|name| name == service) {
            return Err(ReflectionError::UnknownService {
                target: self.target.to_string(),
                service: service.to_owned(),
                services: listed,
            });
        }

        // The service's file, then whatever it imports that has not come yet.
        let mut files: BTreeMap<String, FileDescriptorProto> = BTreeMap::new();
        let mut wanted = vec![MessageRequest::FileContainingSymbol(service.to_owned())];
        while let Some(question) = wanted.pop() {
            if files.len() > MAX_FILES {
                return Err(self.protocol(format!("more than {MAX_FILES} files")));
            }
            let answer = match self.ask(&mut grpc, version, question.clone()).await {
                Ok(MessageResponse::FileDescriptorResponse(answer)) => answer,
                Ok(MessageResponse::ErrorResponse(error)) => {
                    return Err(self.protocol(format!(
                        "asked for {}, got error {}: {}",
                        describe_question(&question),
                        error.error_code,
                        error.error_message
                    )))
                }
                Ok(other) => return Err(self.protocol(unexpected(&other, "file descriptors"))),
                Err(status) => return Err(self.unreachable(describe_status(&status))),
            };
            for bytes in answer.file_descriptor_proto {
                let file = FileDescriptorProto::decode(bytes.as_slice()).map_err(|err| {
                    self.protocol(format!("a file descriptor does not decode: {err}"))
                })?;
                files.insert(file.name().to_owned(), file);
            }
            let missing: BTreeSet<String> = files
                .values()
                .flat_map(|file| file.dependency.iter())
                .filter(|dependency| !files.contains_key(*dependency))
                .cloned()
                .collect();
            for dependency in missing {
                let question = MessageRequest::FileByFilename(dependency);
                if !wanted.contains(&question) {
                    wanted.push(question);
                }
            }
        }
        let set = FileDescriptorSet {
            file: dependencies_first(files),
        };
        Ok(Reflected {
            descriptor_set: set.encode_to_vec(),
            version,
        })
    }

    /// One question on a stream of its own: send it, half-close, read the one answer.
    async fn ask(
        &self,
        grpc: &mut tonic::client::Grpc<tonic::transport::Channel>,
        version: &str,
        question: MessageRequest,
    ) -> Result<MessageResponse, tonic::Status> {
        grpc.ready()
            .await
            .map_err(|err| tonic::Status::unavailable(err.to_string()))?;
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(question),
        };
        let mut request = tonic::Request::new(tokio_stream::once(request));
        // The headers exactly as the calls send them: tonic's typed insert refuses a `-bin`
        // name given an ASCII value, and these were checked as headers already.
        let headers: http::HeaderMap = self
            .metadata
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        *request.metadata_mut() = tonic::metadata::MetadataMap::from_headers(headers);
        let path =
            PathAndQuery::try_from(format!("/{version}.ServerReflection/ServerReflectionInfo"))
                .map_err(|err| tonic::Status::internal(err.to_string()))?;
        let codec =
            tonic_prost::ProstCodec::<ServerReflectionRequest, ServerReflectionResponse>::default();
        let mut answers = grpc.streaming(request, path, codec).await?.into_inner();
        let answer = answers
            .message()
            .await?
            .ok_or_else(|| tonic::Status::internal("the stream ended without an answer"))?;
        answer
            .message_response
            .ok_or_else(|| tonic::Status::internal("an answer with no content"))
    }
}

/// `files` ordered so each comes after the files it imports (prost-reflect links in order).
fn dependencies_first(
    mut files: BTreeMap<String, FileDescriptorProto>,
) -> Vec<FileDescriptorProto> {
    let mut ordered = Vec::with_capacity(files.len());
    let mut placed = BTreeSet::new();
    while !files.is_empty() {
        let ready: Vec<String> = files
            .iter()
            .filter(|(_, file)| {
                file.dependency
                    .iter()
                    .all(|dep| placed.contains(dep) || !files.contains_key(dep))
            })
            .map(|(name, _)| name.clone())
            .collect();
        // An import cycle (invalid protobuf) leaves nothing ready: keep the rest as they are
        // and let the linker say what is wrong.
        let batch = if ready.is_empty() {
            files.keys().cloned().collect()
        } else {
            ready
        };
        for name in batch {
            if let Some(file) = files.remove(&name) {
                placed.insert(name);
                ordered.push(file);
            }
        }
    }
    ordered
}

fn describe_question(question: &MessageRequest) -> String {
    match question {
        MessageRequest::FileByFilename(name) => format!("file '{name}'"),
        MessageRequest::FileContainingSymbol(symbol) => format!("the file defining '{symbol}'"),
        _ => "something else".to_owned(),
    }
}

fn unexpected(answer: &MessageResponse, wanted: &str) -> String {
    let got = match answer {
        MessageResponse::FileDescriptorResponse(_) => "file descriptors".to_owned(),
        MessageResponse::AllExtensionNumbersResponse(_) => "extension numbers".to_owned(),
        MessageResponse::ListServicesResponse(_) => "a service list".to_owned(),
        MessageResponse::ErrorResponse(error) => {
            format!("error {}: {}", error.error_code, error.error_message)
        }
    };
    format!("asked for {wanted}, got {got}")
}

fn describe_status(status: &tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, deps: &[&str]) -> FileDescriptorProto {
        FileDescriptorProto {
            name: Some(name.to_owned()),
            dependency: deps.iter().map(|d| (*d).to_owned()).collect(),
            ..FileDescriptorProto::default()
        }
    }

    #[test]
    fn files_come_after_their_imports() {
        let files: BTreeMap<String, FileDescriptorProto> = [
            file("a.proto", &["c.proto", "google/protobuf/empty.proto"]),
            file("b.proto", &[]),
            file("c.proto", &["b.proto"]),
        ]
        .into_iter()
        .map(|f| (f.name().to_owned(), f))
        .collect();
        let names: Vec<String> = dependencies_first(files)
            .iter()
            .map(|f| f.name().to_owned())
            .collect();
        assert_eq!(names, ["b.proto", "c.proto", "a.proto"]);
    }
}
