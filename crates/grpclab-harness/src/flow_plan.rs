//! A workload file's `[[flows]]` resolved for the engine, for `load` and `bench` alike: each
//! step a method of its own (its payload and metadata bound to the flow's variables), its
//! extracts and expectations resolved against its method's reply type (see
//! `grpclab_load::flow`).

use grpclab_core::field_path::FieldPath;
use grpclab_core::payload_template::PayloadTemplate;
use grpclab_core::template::{CallContext, CallInfo, Random, Template};
use grpclab_core::{Code, InputError, Scenario};
use grpclab_load::flow::{Expectation, Extract, Extractor, FlowPlan, FlowStepPlan, ValueCheck};
use grpclab_load::{CallMethod, RequestRenderer};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::flow::{Check, ExtractFrom, Flow, OnFailure};
use crate::workload::metadata_headers;

/// The flows as the engine runs them, their steps calling the methods `methods` gets (one
/// per step, appended in order: after the plain methods already in it).
pub fn flow_plans(
    flows: &[(Flow, Vec<Scenario>)],
    run_metadata: Option<&BTreeMap<String, String>>,
    methods: &mut Vec<CallMethod>,
    what: &str,
) -> Result<Vec<FlowPlan>, InputError> {
    let mut plans = Vec::with_capacity(flows.len());
    for (flow, loaded) in flows {
        // Variables in the order steps set them: the places templates are bound to.
        let mut vars: Vec<String> = Vec::new();
        for extract in flow.steps.iter().flat_map(|step| &step.extract) {
            if !vars.contains(&extract.var) {
                vars.push(extract.var.clone());
            }
        }
        let mut steps = Vec::with_capacity(flow.steps.len());
        for (step, loaded) in flow.steps.iter().zip(loaded) {
            let at = format!("{what} line {}: step '{}'", step.line, step.name);
            let in_step = |err: String| InputError(format!("{at}: {err}"));
            let method = loaded.method();
            let streams = step_shape(method, step.expect.messages).map_err(in_step)?;
            let mut own = CallMethod::new(&loaded.path(), loaded.requests().to_vec());
            own.name = step.name.clone();
            own.retry.clone_from(&step.retry);
            if let Some(text) = &step.data {
                let template = Template::parse(text, "data")
                    .map_err(|err| in_step(err.to_string()))?
                    .bind(&call_info(method))
                    .bind_vars(&vars, "data")
                    .map_err(|err| in_step(err.to_string()))?;
                if template.is_constant() {
                    own.requests =
                        grpclab_core::scenario::encode_payload(&method.input(), &template.text())
                            .map_err(|err| in_step(format!("data: {err}")))?;
                } else {
                    // Rendered whole per call: the part-by-part plan knows no variables.
                    own.renderer = Some(template_renderer(template, None, method));
                }
            }
            let mut metadata = run_metadata.cloned().unwrap_or_default();
            metadata.extend(step.metadata.clone());
            let what = format!("{at}: metadata");
            let mut constant = BTreeMap::new();
            for (name, value) in metadata {
                let template = Template::parse(&value, "metadata")
                    .map_err(|err| in_step(err.to_string()))?
                    .bind(&call_info(method))
                    .bind_vars(&vars, "metadata")
                    .map_err(|err| in_step(err.to_string()))?;
                if template.is_constant() {
                    constant.insert(name, template.text());
                    continue;
                }
                let header = http::HeaderName::try_from(name.as_str()).map_err(|err| {
                    in_step(format!("metadata: '{name}' is not a header name ({err})"))
                })?;
                own.metadata_templates.push((header, template));
            }
            own.metadata = metadata_headers(&what, Some(&constant))?;
            let reply = method.output();
            let path = |text: &str| {
                FieldPath::resolve(&reply, text).map_err(|err| in_step(err.to_string()))
            };
            let mut extracts = Vec::with_capacity(step.extract.len());
            for extract in &step.extract {
                let from = match &extract.from {
                    ExtractFrom::Field(text) => Extractor::Field(path(text)?),
                    ExtractFrom::Header(name) => {
                        Extractor::Header(bytes::Bytes::from(name.to_ascii_lowercase()))
                    }
                    ExtractFrom::Trailer(name) => {
                        Extractor::Trailer(bytes::Bytes::from(name.to_ascii_lowercase()))
                    }
                };
                extracts.push(Extract {
                    var: vars.iter().position(|v| *v == extract.var).unwrap_or(0),
                    from,
                });
            }
            let mut fields = Vec::with_capacity(step.expect.fields.len());
            for check in &step.expect.fields {
                let value = match &check.check {
                    Check::Equals(text) => ValueCheck::Equals(text.clone()),
                    Check::Matches(pattern) => ValueCheck::Matches(
                        regex::Regex::new(pattern).map_err(|err| in_step(err.to_string()))?,
                    ),
                    Check::Range { min, max } => ValueCheck::Range {
                        min: *min,
                        max: *max,
                    },
                };
                fields.push((path(&check.path)?, value));
            }
            steps.push(FlowStepPlan {
                name: step.name.clone(),
                method: methods.len() as u32,
                extracts,
                expect: Expectation {
                    status: step.expect.status.unwrap_or(Code::Ok),
                    fields,
                    messages: step.expect.messages,
                },
                think: step.think.unwrap_or_default(),
                continue_on_failure: step.on_failure == OnFailure::Continue,
                streams,
            });
            methods.push(own);
        }
        plans.push(FlowPlan {
            name: flow.name.clone(),
            weight: flow.weight,
            steps,
            vars,
        });
    }
    Ok(plans)
}

/// Whether a step's method is server-streaming (its call reads replies to the stream's end);
/// a method streaming its requests cannot be a step, and a count of messages other than one
/// is never met by a unary method: each refused in one line.
fn step_shape(
    method: &prost_reflect::MethodDescriptor,
    messages: Option<u64>,
) -> Result<bool, String> {
    if method.is_client_streaming() {
        return Err(format!(
            "{} streams its requests; flow steps take unary or server-streaming methods",
            method.full_name()
        ));
    }
    let streams = method.is_server_streaming();
    if let Some(count) = messages.filter(|count| !streams && *count != 1) {
        return Err(format!(
            "expect.messages = {count}: {} is unary, so an OK reply is one message; leave messages out, or call a server-streaming method",
            method.full_name()
        ));
    }
    Ok(streams)
}

/// What a method's call-describing template actions render to.
pub fn call_info(method: &prost_reflect::MethodDescriptor) -> CallInfo {
    CallInfo {
        fully_qualified_name: method.full_name().to_owned(),
        method_name: method.name().to_owned(),
        // ghz's names: the service's and the messages' own, without their package.
        service_name: method.parent_service().name().to_owned(),
        input_name: method.input().name().to_owned(),
        output_name: method.output().name().to_owned(),
        client_streaming: method.is_client_streaming(),
        server_streaming: method.is_server_streaming(),
    }
}

/// The engine's renderer for a payload template. Planned part by part when it can be (only
/// the varying fields rendered and encoded per call, the same bytes: see
/// `grpclab_core::payload_template`); otherwise render the whole text, encode it as the input
/// message (an array's elements round-robin by request number), frame it.
pub fn template_renderer(
    template: Template,
    text: Option<&str>,
    method: &prost_reflect::MethodDescriptor,
) -> RequestRenderer {
    let input = method.input();
    if let Some(plan) =
        text.and_then(|text| PayloadTemplate::plan(text, &input, &call_info(method)))
    {
        return Arc::new(
            move |context: &CallContext<'_>, random: &mut Random, text: &mut String| {
                plan.render(context, random, text)
                    .map(|message| vec![message])
                    .map_err(|err| format!("call {}: {err}", context.request_number))
            },
        );
    }
    Arc::new(
        move |context: &CallContext<'_>, random: &mut Random, text: &mut String| {
            template.render(context, random, text);
            let requests = grpclab_core::scenario::encode_payload(&input, text)
                .map_err(|err| format!("call {}: {err}", context.request_number))?;
            if requests.is_empty() {
                return Err("the payload rendered to an empty array".to_owned());
            }
            Ok(requests)
        },
    )
}
