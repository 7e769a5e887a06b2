//! The scenario flags resolved: a built-in scenario, a .proto, a protoset or the server's
//! reflection; the payload (JSON, binary, a template that varies per call); a mix's methods,
//! each resolved as a lone `--call` would be; metadata templates bound to the method.

use grpclab_core::scenario::Schema;
use grpclab_core::template::{CallContext, Random, Template};
use grpclab_core::Scenario;
use http::HeaderName;

use super::DEFAULT_SCENARIO;
use crate::cli::args::{LoadArgs, ScenarioArgs};
use crate::reflection::ReflectFrom;
use crate::InputError;
use grpclab_harness::flow_plan::{call_info, template_renderer};
use grpclab_harness::workload::metadata_headers;
use grpclab_harness::workload::MixCall;

/// What the scenario flags resolved to.
#[derive(Clone)]
pub struct LoadedScenario {
    /// The method and its framed requests.
    pub scenario: Scenario,
    /// How reports name where it came from.
    pub label: String,
    /// The JSON payload text as the user gave it (`-d`, `-d @`, `-D`), if any.
    pub payload: Option<String>,
    /// The payload's call template when something in it varies per call (bound to the
    /// method); the scenario's requests are then its rendering for call 0.
    pub template: Option<Template>,
}

/// Resolves the scenario flags into a scenario and a label for reports: `--proto`,
/// `--protoset`, `--scenario`, else the server's reflection (`reflect`), else (no server to
/// ask: `encode`) the default scenario.
pub fn load_scenario(
    args: &ScenarioArgs,
    reflect: Option<ReflectFrom<'_>>,
) -> Result<LoadedScenario, InputError> {
    let payload = match (&args.data, &args.data_file) {
        (Some(at), _) if at == "@" => {
            let mut json = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut json)
                .map_err(|err| InputError(format!("-d @: cannot read standard input: {err}")))?;
            Some(json)
        }
        (Some(json), _) => Some(json.clone()),
        (None, Some(path)) => Some(std::fs::read_to_string(path).map_err(|err| {
            InputError(format!(
                "-D/--data-file: cannot read {}: {err}",
                path.display()
            ))
        })?),
        (None, None) => None,
    };
    let binary = match (&args.binary_file, args.binary) {
        (Some(path), _) => Some(std::fs::read(path).map_err(|err| {
            InputError(format!(
                "-B/--binary-file: cannot read {}: {err}",
                path.display()
            ))
        })?),
        (None, true) => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).map_err(|err| {
                InputError(format!("-b/--binary: cannot read standard input: {err}"))
            })?;
            Some(bytes)
        }
        (None, false) => None,
    };
    let input_error = |err: grpclab_core::ScenarioError| InputError(err.to_string());
    // A schema from a .proto, a protoset or the server: the call and payload come from flags.
    let from_schema = |schema: Schema, label: String| {
        let method = schema.method(args.call.as_deref()).map_err(input_error)?;
        let (text, template) = templated(payload.as_deref(), &method)?;
        let scenario = match &binary {
            Some(bytes) => Scenario::from_method_binary(&label, method, bytes),
            None => Scenario::from_method(&label, method, text.as_deref().unwrap_or("{}")),
        }
        .map_err(input_error)?;
        Ok(LoadedScenario {
            scenario,
            label,
            payload: payload.clone(),
            template,
        })
    };
    if let Some(proto) = &args.proto {
        let schema = Schema::compile(std::slice::from_ref(proto), &args.import_paths)
            .map_err(input_error)?;
        return from_schema(schema, proto.display().to_string());
    }
    if let Some(protoset) = &args.protoset {
        let bytes = std::fs::read(protoset).map_err(|err| {
            InputError(format!(
                "--protoset: cannot read {}: {err}",
                protoset.display()
            ))
        })?;
        let label = protoset.display().to_string();
        let schema = Schema::from_descriptor_set(&label, &bytes).map_err(input_error)?;
        return from_schema(schema, label);
    }
    if let (None, Some(reflect)) = (&args.scenario, reflect) {
        let reflected = crate::reflection::fetch(&reflect, args.call.as_deref())
            .map_err(|err| InputError(err.to_string()))?;
        let label = format!("reflection ({})", reflected.version);
        let schema = Schema::from_descriptor_set(
            &format!("reflection from {}", reflect.target),
            &reflected.descriptor_set,
        )
        .map_err(input_error)?;
        return from_schema(schema, label);
    }
    let name = args.scenario.as_deref().unwrap_or(DEFAULT_SCENARIO);
    let scenario = Scenario::load(name, args.call.as_deref()).map_err(input_error)?;
    let (text, template) = templated(payload.as_deref(), scenario.method())?;
    let scenario = match (&text, &binary) {
        (_, Some(bytes)) => scenario.with_binary_payload(bytes).map_err(input_error)?,
        (Some(text), None) => scenario.with_payload(text).map_err(input_error)?,
        (None, None) => scenario,
    };
    Ok(LoadedScenario {
        scenario,
        label: name.to_owned(),
        payload,
        template,
    })
}

/// One method of a mix as the engine runs it: its requests (and template), and its
/// metadata — the run's -m with the method's own over it — split into the constant headers,
/// cached with the method's header block, and the templates rendered per call.
pub(super) fn mix_method(
    loaded: &LoadedScenario,
    call: &grpclab_harness::workload::MixCall,
    run_metadata: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<grpclab_load::CallMethod, InputError> {
    let scenario = &loaded.scenario;
    let method = scenario.method();
    let mut own = grpclab_load::CallMethod::new(&scenario.path(), scenario.requests().to_vec());
    own.name = call
        .name
        .clone()
        .unwrap_or_else(|| method.full_name().to_owned());
    own.weight = call.weight;
    own.retry.clone_from(&call.retry);
    own.hedging.clone_from(&call.hedging);
    let mut metadata = run_metadata.cloned().unwrap_or_default();
    metadata.extend(call.metadata.clone());
    let what = format!("{}'s metadata", call.call);
    match bind_metadata(Some(&metadata), method)? {
        Some((constant, varying)) => {
            own.metadata = metadata_headers(&what, Some(&constant))?;
            own.metadata_templates = varying;
        }
        None => own.metadata = metadata_headers(&what, Some(&metadata))?,
    }
    own.renderer = loaded
        .template
        .clone()
        .map(|template| template_renderer(template, loaded.payload.as_deref(), method));
    Ok(own)
}

/// `-m` values with templates bound to the call: the constant ones (the call's names filled
/// in), and those that vary per call with their templates (`None` when no value has one).
/// A varying value's name and call 0's rendering must make a valid header, so a bad one is one
/// line now, not a broken call later.
#[allow(clippy::type_complexity)]
pub(super) fn bind_metadata(
    map: Option<&std::collections::BTreeMap<String, String>>,
    method: &prost_reflect::MethodDescriptor,
) -> Result<
    Option<(
        std::collections::BTreeMap<String, String>,
        Vec<(HeaderName, Template)>,
    )>,
    InputError,
> {
    let Some(map) = map.filter(|map| map.values().any(|value| value.contains("{{"))) else {
        return Ok(None);
    };
    let call = call_info(method);
    let mut constant = std::collections::BTreeMap::new();
    let mut varying = Vec::new();
    for (name, value) in map {
        let template = Template::parse(value, "-m/--metadata")
            .map_err(|err| InputError(err.to_string()))?
            .bind(&call);
        outside_flows(&template, "-m/--metadata")?;
        if template.is_constant() {
            constant.insert(name.clone(), template.text());
            continue;
        }
        let checked = std::collections::BTreeMap::from([(name.clone(), call_zero(&template))]);
        let (name, _) = metadata_headers("-m/--metadata", Some(&checked))?
            .pop()
            .ok_or_else(|| InputError(format!("-m/--metadata: '{name}' gave no header")))?;
        varying.push((name, template));
    }
    Ok(Some((constant, varying)))
}

/// A template outside a flow step: `{{.vars.NAME}}` has nothing to name.
fn outside_flows(template: &Template, what: &str) -> Result<(), InputError> {
    match template.var_names().first() {
        None => Ok(()),
        Some(name) => Err(InputError(format!(
            "{what}: {{{{.vars.{name}}}}} is a flow variable: only the steps of a workload file's [[flows]] may use one"
        ))),
    }
}

/// The scenario's first request as JSON (proto3's mapping), for the report's `options.data`.
pub(super) fn first_request_json(scenario: &Scenario) -> Option<serde_json::Value> {
    let framed = scenario.requests().first()?;
    let message = grpclab_core::framing::unframe_single(framed).ok()?;
    let decoded = prost_reflect::DynamicMessage::decode(scenario.method().input(), message).ok()?;
    serde_json::to_value(&decoded).ok()
}

/// The payload text to encode, and its template when something in it varies per call: ghz's
/// call templates. Without `{{` the text is the payload, as always; with only the call's names
/// it is rendered once; with per-call values the text returned is call 0's rendering (which
/// must encode, so a template that makes bad JSON is one line now, not an error per call).
fn templated(
    payload: Option<&str>,
    method: &prost_reflect::MethodDescriptor,
) -> Result<(Option<String>, Option<Template>), InputError> {
    let Some(text) = payload else {
        return Ok((None, None));
    };
    if !text.contains("{{") {
        return Ok((Some(text.to_owned()), None));
    }
    let template = Template::parse(text, "-d/-D")
        .map_err(|err| InputError(err.to_string()))?
        .bind(&call_info(method));
    outside_flows(&template, "-d/-D")?;
    if template.is_constant() {
        return Ok((Some(template.text()), None));
    }
    Ok((Some(call_zero(&template)), Some(template)))
}

/// A template rendered for call 0 (thread 0): what is checked before the run, so a template
/// that cannot make a valid payload or header is one line now, not an error per call.
fn call_zero(template: &Template) -> String {
    let mut first = String::new();
    template.render(
        &CallContext {
            request_number: 0,
            worker_id: "g0c0",
            call_seed: 1,
            now: std::time::SystemTime::now(),
            vars: &[],
        },
        &mut Random::new(1),
        &mut first,
    );
    first
}

/// The calls a run makes (see [`resolve_calls`]).
pub(super) struct ResolvedCalls {
    /// Its first (or only) method's scenario (with flows only: the first step's).
    pub loaded: LoadedScenario,
    /// A mix's plain methods, each resolved as a lone `--call` would be with its own data
    /// (empty for one method).
    pub mixed: Vec<(LoadedScenario, MixCall)>,
    /// The workload file's seed.
    pub seed: Option<u64>,
    /// The workload file's flows, each step's method resolved.
    pub flows: Vec<(grpclab_harness::flow::Flow, Vec<LoadedScenario>)>,
}

/// The calls a run makes: see [`ResolvedCalls`]. A mix takes unary methods, and payloads
/// from files.
pub(super) fn resolve_calls(
    args: &LoadArgs,
    reflect: ReflectFrom<'_>,
) -> Result<ResolvedCalls, InputError> {
    let mix = match &args.workload {
        Some(path) => Some(grpclab_harness::workload::from_file(path)?),
        None => grpclab_harness::workload::from_flags(&args.mix)?,
    };
    // Standard input can be read once, and each method of a mix reads its payload.
    if mix.as_ref().is_some_and(|mix| mix.calls.len() > 1)
        && (args.scenario.binary || args.scenario.data.as_deref() == Some("@"))
    {
        return Err(InputError(
            "-b and -d @ read the payload from standard input, once; a mix reads one payload per method: give it in a file (-B FILE, -D FILE) or per method in a --workload file".to_owned(),
        ));
    }
    let mut flows = Vec::new();
    if let Some(mix) = mix.as_ref().filter(|mix| !mix.flows.is_empty()) {
        let file = args
            .workload
            .as_deref()
            .unwrap_or(std::path::Path::new("-"));
        flows = check_flow_steps(args, reflect, &mix.flows, file)?;
    }
    // A mix: each method resolved as a lone --call would be, with its own data.
    let mut mixed = Vec::new();
    let seed = mix.as_ref().and_then(|mix| mix.seed);
    for call in mix.into_iter().flat_map(|mix| mix.calls) {
        let mut scenario_args = args.scenario.clone();
        scenario_args.call = Some(call.call.clone());
        if let Some(data) = &call.data {
            (scenario_args.data, scenario_args.data_file) = (Some(data.clone()), None);
            (scenario_args.binary, scenario_args.binary_file) = (false, None);
        }
        let loaded = load_scenario(&scenario_args, Some(reflect))?;
        let method = loaded.scenario.method();
        if method.is_client_streaming() || method.is_server_streaming() {
            return Err(InputError(format!(
                "{} streams: a mix takes unary methods only; run a streaming method on its own",
                method.full_name()
            )));
        }
        mixed.push((loaded, call));
    }
    let first_step = flows
        .first()
        .and_then(|(_, steps): &(_, Vec<LoadedScenario>)| steps.first());
    let loaded = match (mixed.first(), first_step) {
        (Some((first, _)), _) => first.clone(),
        (None, Some(step)) => step.clone(),
        (None, None) => load_scenario(&args.scenario, Some(reflect))?,
    };
    Ok(ResolvedCalls {
        loaded,
        mixed,
        seed,
        flows,
    })
}

/// What a flow step names that needs the schema: its method exists, and the
/// reply paths it extracts and checks are fields of the method's reply (one line with the
/// file's line for each).
#[allow(clippy::type_complexity)]
fn check_flow_steps(
    args: &LoadArgs,
    reflect: ReflectFrom<'_>,
    flows: &[grpclab_harness::flow::Flow],
    file: &std::path::Path,
) -> Result<Vec<(grpclab_harness::flow::Flow, Vec<LoadedScenario>)>, InputError> {
    use grpclab_core::field_path::FieldPath;
    use grpclab_harness::flow::ExtractFrom;
    let mut resolved = Vec::with_capacity(flows.len());
    for flow in flows {
        let mut steps = Vec::with_capacity(flow.steps.len());
        for step in &flow.steps {
            let mut scenario_args = args.scenario.clone();
            scenario_args.call = Some(step.call.clone());
            // The method alone: a step's data may use variables known only when it runs.
            (scenario_args.data, scenario_args.data_file) = (None, None);
            (scenario_args.binary, scenario_args.binary_file) = (false, None);
            let at = |line: usize| format!("--workload {} line {line}", file.display());
            let loaded = load_scenario(&scenario_args, Some(reflect)).map_err(|err| {
                InputError(format!(
                    "{}: step '{}': {}",
                    at(step.line),
                    step.name,
                    err.0
                ))
            })?;
            let method = loaded.scenario.method();
            let reply = method.output();
            let paths = step
                .extract
                .iter()
                .filter_map(|extract| match &extract.from {
                    ExtractFrom::Field(path) => Some((path, extract.line, "extract")),
                    ExtractFrom::Header(_) | ExtractFrom::Trailer(_) => None,
                })
                .chain(
                    step.expect
                        .fields
                        .iter()
                        .map(|check| (&check.path, check.line, "expect.fields")),
                );
            for (path, line, field) in paths {
                FieldPath::resolve(&reply, path).map_err(|err| {
                    InputError(format!(
                        "{}: flows.steps.{field}: step '{}': {err}",
                        at(line),
                        step.name
                    ))
                })?;
            }
            steps.push(loaded);
        }
        resolved.push((flow.clone(), steps));
    }
    Ok(resolved)
}
