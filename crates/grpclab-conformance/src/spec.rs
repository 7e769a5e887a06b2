//! The conformance suite's messages, read and written through prost-reflect with the
//! suite's own `.proto` files: a `ClientCompatRequest` into a [`CallSpec`], a call's
//! [`Outcome`] into a `ClientCompatResponse`.

use grpclab_core::protocol::{Codec, Protocol};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, Value};

use crate::call::{self, CallSpec, Cancel, Outcome};

const PACKAGE: &str = "connectrpc.conformance.v1";

/// The suite's descriptors.
pub struct Schema {
    pool: DescriptorPool,
}

impl Schema {
    /// Compiles `client_compat.proto` (with what it imports) under `proto_dir`.
    pub fn compile(proto_dir: &str) -> Result<Schema, String> {
        let files = protox::compile(
            ["connectrpc/conformance/v1/client_compat.proto"],
            [proto_dir],
        )
        .map_err(|err| format!("cannot compile the conformance protos under {proto_dir}: {err}"))?;
        let pool = DescriptorPool::from_file_descriptor_set(files)
            .map_err(|err| format!("the conformance protos: {err}"))?;
        Ok(Schema { pool })
    }

    fn message(&self, name: &str) -> MessageDescriptor {
        match self.pool.get_message_by_name(&format!("{PACKAGE}.{name}")) {
            Some(descriptor) => descriptor,
            None => unreachable!("{name} is compiled from client_compat.proto's imports"),
        }
    }

    /// Makes the call a `ClientCompatRequest` describes; its `ClientCompatResponse`, encoded.
    pub async fn answer(&self, request: &[u8]) -> Vec<u8> {
        let mut response = DynamicMessage::new(self.message("ClientCompatResponse"));
        let request = match DynamicMessage::decode(self.message("ClientCompatRequest"), request) {
            Ok(request) => request,
            Err(err) => {
                self.set_error(
                    &mut response,
                    format!("undecodable ClientCompatRequest: {err}"),
                );
                return response.encode_to_vec();
            }
        };
        response.set_field_by_name(
            "test_name",
            request
                .get_field_by_name("test_name")
                .map_or(Value::String(String::new()), |v| v.into_owned()),
        );
        let (spec, output) = match self.spec(&request) {
            Ok(spec) => spec,
            Err(err) => {
                self.set_error(&mut response, err);
                return response.encode_to_vec();
            }
        };
        let outcome = call::run(&spec).await;
        let result = self.result(outcome, &output, spec.codec);
        response.set_field_by_name("response", Value::Message(result));
        response.encode_to_vec()
    }

    fn set_error(&self, response: &mut DynamicMessage, message: String) {
        let mut error = DynamicMessage::new(self.message("ClientErrorResult"));
        error.set_field_by_name("message", Value::String(message));
        response.set_field_by_name("error", Value::Message(error));
    }

    /// The call a request describes, and its method's reply type.
    fn spec(&self, request: &DynamicMessage) -> Result<(CallSpec, MessageDescriptor), String> {
        let number = |name: &str| match request.get_field_by_name(name).as_deref() {
            Some(Value::EnumNumber(n)) => *n,
            _ => 0,
        };
        let text = |name: &str| match request.get_field_by_name(name).as_deref() {
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        let protocol = match number("protocol") {
            1 => Protocol::Connect,
            2 => Protocol::Grpc,
            3 => Protocol::GrpcWeb,
            other => return Err(format!("protocol {other} is not supported")),
        };
        let codec = match number("codec") {
            1 => Codec::Proto,
            2 => Codec::Json,
            other => return Err(format!("codec {other} is not supported")),
        };
        let gzip = match number("compression") {
            0 | 1 => false,
            2 => true,
            other => return Err(format!("compression {other} is not supported")),
        };
        let http2 = match number("http_version") {
            1 => false,
            2 => true,
            other => return Err(format!("HTTP version {other} is not supported")),
        };
        if request
            .get_field_by_name("server_tls_cert")
            .is_some_and(|v| matches!(v.as_ref(), Value::Bytes(b) if !b.is_empty()))
        {
            return Err("TLS is not supported".to_owned());
        }
        let service_name = text("service");
        let method_name = text("method");
        let service = self
            .pool
            .get_service_by_name(&service_name)
            .ok_or_else(|| format!("unknown service {service_name}"))?;
        let method = service
            .methods()
            .find(|method| method.name() == method_name)
            .ok_or_else(|| format!("unknown method {service_name}/{method_name}"))?;
        let input = method.input();
        let mut requests = Vec::new();
        if let Some(Value::List(messages)) =
            request.get_field_by_name("request_messages").as_deref()
        {
            for any in messages {
                let Value::Message(any) = any else { continue };
                let type_url = match any.get_field_by_name("type_url").as_deref() {
                    Some(Value::String(url)) => url.clone(),
                    _ => String::new(),
                };
                let value = match any.get_field_by_name("value").as_deref() {
                    Some(Value::Bytes(bytes)) => bytes.clone(),
                    _ => Default::default(),
                };
                let type_name = type_url.rsplit('/').next().unwrap_or_default();
                if type_name != input.full_name() {
                    return Err(format!(
                        "a request of type {type_name} for {method_name}, which takes {}",
                        input.full_name()
                    ));
                }
                requests.push(match codec {
                    Codec::Proto => value.to_vec(),
                    Codec::Json => {
                        let message = DynamicMessage::decode(input.clone(), value)
                            .map_err(|err| format!("a request does not decode: {err}"))?;
                        serde_json::to_vec(&message)
                            .map_err(|err| format!("a request as JSON: {err}"))?
                    }
                });
            }
        }
        let mut headers = Vec::new();
        if let Some(Value::List(list)) = request.get_field_by_name("request_headers").as_deref() {
            for header in list {
                let Value::Message(header) = header else {
                    continue;
                };
                let name = match header.get_field_by_name("name").as_deref() {
                    Some(Value::String(name)) => name.clone(),
                    _ => continue,
                };
                if let Some(Value::List(values)) = header.get_field_by_name("value").as_deref() {
                    for value in values {
                        if let Value::String(value) = value {
                            headers.push((name.clone(), value.clone()));
                        }
                    }
                }
            }
        }
        let timeout_ms = match request.has_field_by_name("timeout_ms") {
            true => match request.get_field_by_name("timeout_ms").as_deref() {
                Some(Value::U32(ms)) => Some(*ms),
                _ => None,
            },
            false => None,
        };
        let cancel = match request.get_field_by_name("cancel").as_deref() {
            Some(Value::Message(cancel)) => {
                let number = |name: &str| match cancel.get_field_by_name(name).as_deref() {
                    Some(Value::U32(n)) => *n,
                    _ => 0,
                };
                if cancel.has_field_by_name("after_close_send_ms") {
                    Cancel::AfterSendMs(number("after_close_send_ms"))
                } else if cancel.has_field_by_name("after_num_responses") {
                    Cancel::AfterReplies(number("after_num_responses"))
                } else if cancel.has_field_by_name("before_close_send") {
                    Cancel::BeforeCloseSend
                } else {
                    Cancel::Never
                }
            }
            _ => Cancel::Never,
        };
        let port = match request.get_field_by_name("port").as_deref() {
            Some(Value::U32(port)) => *port,
            _ => 0,
        };
        let get = matches!(
            request.get_field_by_name("use_get_http_method").as_deref(),
            Some(Value::Bool(true))
        );
        let spec = CallSpec {
            http2,
            get,
            protocol,
            codec,
            gzip,
            authority: format!("{}:{port}", text("host")),
            path: format!("/{service_name}/{method_name}"),
            server_stream: method.is_server_streaming(),
            client_stream: method.is_client_streaming(),
            headers,
            requests,
            timeout_ms,
            cancel,
        };
        Ok((spec, method.output()))
    }

    /// A `ClientResponseResult` of a call's outcome: each reply's `payload` field.
    fn result(&self, outcome: Outcome, output: &MessageDescriptor, codec: Codec) -> DynamicMessage {
        let mut result = DynamicMessage::new(self.message("ClientResponseResult"));
        result.set_field_by_name("response_headers", self.headers(&outcome.headers));
        result.set_field_by_name("response_trailers", self.headers(&outcome.trailers));
        let mut payloads = Vec::new();
        let mut error = outcome.error;
        for reply in &outcome.replies {
            let decoded = match codec {
                Codec::Proto => DynamicMessage::decode(output.clone(), reply.as_slice())
                    .map_err(|err| err.to_string()),
                Codec::Json => {
                    let mut reader = serde_json::Deserializer::from_slice(reply);
                    DynamicMessage::deserialize(output.clone(), &mut reader)
                        .map_err(|err| err.to_string())
                }
            };
            match decoded {
                Ok(message) => {
                    if let Some(payload) = message.get_field_by_name("payload") {
                        payloads.push(payload.into_owned());
                    }
                }
                Err(err) => {
                    error.get_or_insert(call::RpcError {
                        code: grpclab_core::Code::Internal as i32,
                        message: Some(format!(
                            "a reply that does not decode as {}: {err}",
                            output.full_name()
                        )),
                        details: Vec::new(),
                    });
                }
            }
        }
        result.set_field_by_name("payloads", Value::List(payloads));
        if let Some(error) = error {
            let mut message = DynamicMessage::new(self.message("Error"));
            message.set_field_by_name("code", Value::EnumNumber(error.code));
            if let Some(text) = error.message {
                message.set_field_by_name("message", Value::String(text));
            }
            let any = match self.pool.get_message_by_name("google.protobuf.Any") {
                Some(any) => any,
                None => unreachable!("any.proto is imported by client_compat.proto"),
            };
            let details = error
                .details
                .into_iter()
                .map(|detail| {
                    let mut message = DynamicMessage::new(any.clone());
                    message.set_field_by_name("type_url", Value::String(detail.type_url));
                    message.set_field_by_name("value", Value::Bytes(detail.value.into()));
                    Value::Message(message)
                })
                .collect();
            message.set_field_by_name("details", Value::List(details));
            result.set_field_by_name("error", Value::Message(message));
        }
        if let Some(status) = outcome.http_status {
            result.set_field_by_name("http_status_code", Value::I32(i32::from(status)));
        }
        result
    }

    /// `Header` messages, one per name with its values in order.
    fn headers(&self, pairs: &[(String, String)]) -> Value {
        let mut grouped: Vec<(String, Vec<Value>)> = Vec::new();
        for (name, value) in pairs {
            match grouped.iter_mut().find(|(seen, _)| seen == name) {
                Some((_, values)) => values.push(Value::String(value.clone())),
                None => grouped.push((name.clone(), vec![Value::String(value.clone())])),
            }
        }
        let header = self.message("Header");
        Value::List(
            grouped
                .into_iter()
                .map(|(name, values)| {
                    let mut message = DynamicMessage::new(header.clone());
                    message.set_field_by_name("name", Value::String(name));
                    message.set_field_by_name("value", Value::List(values));
                    Value::Message(message)
                })
                .collect(),
        )
    }
}
