//! Server reflection for lab, on its own engine: `grpc.reflection.v1` and `v1alpha` (the same
//! messages on the wire), one response per request on the bidi stream, built from the
//! descriptors `build.rs` compiles (the Greeter, the streaming echo, the admin services) and the
//! reflection protocol's own. Off the hot path: a client asks a few questions before its run.

use prost::Message;
use prost_types::{DescriptorProto, FileDescriptorProto, FileDescriptorSet};
use std::collections::HashMap;
use std::sync::OnceLock;
use tonic_reflection::pb::v1::{
    server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    ErrorResponse, FileDescriptorResponse, ListServiceResponse, ServerReflectionRequest,
    ServerReflectionResponse, ServiceResponse,
};

/// The `:path` of v1's only method.
pub const V1_PATH: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
/// The `:path` of v1alpha's only method.
pub const V1ALPHA_PATH: &str = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

/// gRPC's NOT_FOUND, as reflection's `error_code`.
const NOT_FOUND: i32 = 5;

/// What lab can describe: every file, by name, and the file defining each symbol.
struct Catalogue {
    files: Vec<FileDescriptorProto>,
    by_name: HashMap<String, usize>,
    symbols: HashMap<String, usize>,
    services: Vec<String>,
}

fn catalogue() -> &'static Catalogue {
    static CATALOGUE: OnceLock<Catalogue> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        let sets = [
            crate::proto::pb::FILE_DESCRIPTOR_SET,
            crate::proto::pb_streaming::FILE_DESCRIPTOR_SET,
            crate::proto::pb_session::FILE_DESCRIPTOR_SET,
            crate::proto::pb_admin::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
        ];
        let mut catalogue = Catalogue {
            files: Vec::new(),
            by_name: HashMap::new(),
            symbols: HashMap::new(),
            services: Vec::new(),
        };
        // Compiled into the binary: a set that does not decode is a build defect, and it only
        // leaves its files out.
        for set in sets
            .iter()
            .filter_map(|bytes| FileDescriptorSet::decode(*bytes).ok())
        {
            for file in set.file {
                if catalogue.by_name.contains_key(file.name()) {
                    continue;
                }
                let index = catalogue.files.len();
                let package = file.package().to_owned();
                let prefixed = |name: &str| match package.is_empty() {
                    true => name.to_owned(),
                    false => format!("{package}.{name}"),
                };
                for service in &file.service {
                    let name = prefixed(service.name());
                    for method in &service.method {
                        catalogue
                            .symbols
                            .insert(format!("{name}.{}", method.name()), index);
                    }
                    catalogue.services.push(name.clone());
                    catalogue.symbols.insert(name, index);
                }
                for message in &file.message_type {
                    add_message(
                        &mut catalogue.symbols,
                        &prefixed(message.name()),
                        message,
                        index,
                    );
                }
                for enumeration in &file.enum_type {
                    catalogue
                        .symbols
                        .insert(prefixed(enumeration.name()), index);
                }
                catalogue.by_name.insert(file.name().to_owned(), index);
                catalogue.files.push(file);
            }
        }
        catalogue.services.sort();
        catalogue
    })
}

/// A message and everything nested in it, as symbols of file `index`.
fn add_message(
    symbols: &mut HashMap<String, usize>,
    name: &str,
    message: &DescriptorProto,
    index: usize,
) {
    for nested in &message.nested_type {
        add_message(symbols, &format!("{name}.{}", nested.name()), nested, index);
    }
    for enumeration in &message.enum_type {
        symbols.insert(format!("{name}.{}", enumeration.name()), index);
    }
    symbols.insert(name.to_owned(), index);
}

/// File `index` first, then every file it imports, transitively (each once): what a client
/// needs to build the descriptors.
fn with_dependencies(catalogue: &Catalogue, index: usize) -> Vec<Vec<u8>> {
    let mut order = vec![index];
    let mut at = 0;
    while at < order.len() {
        for dependency in &catalogue.files[order[at]].dependency {
            if let Some(&found) = catalogue.by_name.get(dependency) {
                if !order.contains(&found) {
                    order.push(found);
                }
            }
        }
        at += 1;
    }
    order
        .into_iter()
        .map(|index| catalogue.files[index].encode_to_vec())
        .collect()
}

/// The response to one reflection request (an unframed `ServerReflectionRequest`), encoded;
/// `Err` with prost's reason when the request does not decode.
pub fn answer(request: &[u8]) -> Result<Vec<u8>, String> {
    let request = ServerReflectionRequest::decode(request).map_err(|err| err.to_string())?;
    let catalogue = catalogue();
    let not_found = |what: String| {
        MessageResponse::ErrorResponse(ErrorResponse {
            error_code: NOT_FOUND,
            error_message: what,
        })
    };
    let file = |found: Option<&usize>, what: String| match found {
        Some(&index) => MessageResponse::FileDescriptorResponse(FileDescriptorResponse {
            file_descriptor_proto: with_dependencies(catalogue, index),
        }),
        None => not_found(what),
    };
    let response = match &request.message_request {
        Some(MessageRequest::ListServices(_)) => {
            MessageResponse::ListServicesResponse(ListServiceResponse {
                service: catalogue
                    .services
                    .iter()
                    .map(|name| ServiceResponse { name: name.clone() })
                    .collect(),
            })
        }
        Some(MessageRequest::FileByFilename(name)) => {
            file(catalogue.by_name.get(name), format!("no file named {name}"))
        }
        Some(MessageRequest::FileContainingSymbol(symbol)) => {
            file(catalogue.symbols.get(symbol), format!("no symbol {symbol}"))
        }
        Some(MessageRequest::FileContainingExtension(extension)) => not_found(format!(
            "no extension {} of {}: this server defines no extensions",
            extension.extension_number, extension.containing_type
        )),
        Some(MessageRequest::AllExtensionNumbersOfType(name)) => {
            not_found(format!("no extensions of {name}: this server defines none"))
        }
        None => not_found("an empty reflection request".to_owned()),
    };
    Ok(ServerReflectionResponse {
        valid_host: request.host.clone(),
        original_request: Some(request),
        message_response: Some(response),
    }
    .encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(request: MessageRequest) -> MessageResponse {
        let bytes = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(request),
        }
        .encode_to_vec();
        let response = ServerReflectionResponse::decode(answer(&bytes).unwrap().as_slice());
        response.unwrap().message_response.unwrap()
    }

    #[test]
    fn services_symbols_and_files_are_described() {
        let MessageResponse::ListServicesResponse(list) =
            ask(MessageRequest::ListServices(String::new()))
        else {
            panic!("a list")
        };
        let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
        for expected in [
            "helloworld.Greeter",
            "grpclab.streaming.v1.StreamingEcho",
            "grpclab.admin.v1.Stats",
            "grpc.reflection.v1.ServerReflection",
        ] {
            assert!(names.contains(&expected), "{names:?}");
        }
        for symbol in [
            "grpclab.streaming.v1.StreamingEcho",
            "grpclab.streaming.v1.StreamingEcho.PingPong",
            "grpclab.streaming.v1.EchoReply",
            "helloworld.HelloRequest",
        ] {
            let MessageResponse::FileDescriptorResponse(files) =
                ask(MessageRequest::FileContainingSymbol(symbol.to_owned()))
            else {
                panic!("{symbol}: a file")
            };
            let first = FileDescriptorProto::decode(files.file_descriptor_proto[0].as_slice());
            let package = first.unwrap().package.unwrap_or_default();
            assert!(symbol.starts_with(&package), "{symbol} in {package}");
        }
        let MessageResponse::ErrorResponse(error) =
            ask(MessageRequest::FileContainingSymbol("no.Such".to_owned()))
        else {
            panic!("not found")
        };
        assert_eq!(error.error_code, NOT_FOUND);
        assert!(answer(b"\xff\xff").is_err(), "garbage does not decode");
    }
}
