//! Flows in a workload file: `[[flows]]`, each an ordered list of `[[flows.steps]]` that
//! carry reply fields forward (`extract`), check replies (`expect`), pause (`think`) and stop
//! or go on after a failed step (`on_failure`). Only reading and checking, as for `[[calls]]`
//! (workload.rs): every error names the file, the line and the field. What needs the
//! methods' schemas (a reply field's path) is checked where the methods are resolved, with
//! the line kept here ([`Extract::line`], [`FieldCheck::line`]).
//!
//! ```toml
//! [[flows]]
//! name = "checkout"
//! weight = 2
//!
//! [[flows.steps]]
//! name = "login"
//! call = "session.Sessions.Login"
//! data = { user = "u{{.RequestNumber}}" }
//! extract = { token = "token" }
//! expect = { status = "OK" }
//!
//! [[flows.steps]]
//! name = "list"
//! call = "session.Sessions.List"
//! metadata = { authorization = "Bearer {{.vars.token}}" }
//! expect = { fields = [{ path = "items[0].sku", matches = "^sku-" }] }
//! think = "10ms"
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::time::Duration;

use grpclab_core::status::Code;
use grpclab_core::InputError;
use toml::Spanned;

/// One flow, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    /// What its figures are reported under (`flow:NAME:` in thresholds).
    pub name: String,
    /// Its share of the starts, against the other flows' and the plain calls' weights.
    pub weight: u32,
    /// At least one, in order.
    pub steps: Vec<FlowStep>,
    /// Where the flow's `name` is in the file.
    pub line: usize,
}

/// One step of a flow: a call, as a `[[calls]]` entry gives it, and what to do with its reply.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowStep {
    /// Unique in the file (`step:NAME:` in thresholds).
    pub name: String,
    /// The method: `package.Service.Method`.
    pub call: String,
    /// Its payload as JSON text; may use `{{.vars.NAME}}` of earlier steps.
    pub data: Option<String>,
    /// Its own metadata; values may use `{{.vars.NAME}}` of earlier steps.
    pub metadata: BTreeMap<String, String>,
    /// Values taken from the reply into the flow's variables.
    pub extract: Vec<Extract>,
    /// Conditions on the reply; a failed one is its own outcome.
    pub expect: Expect,
    /// A pause after this step, before the next.
    pub think: Option<Duration>,
    /// What a failed step (a status other than the expected, or a failed expectation) does.
    pub on_failure: OnFailure,
    /// Its retry policy (`retry`, as a `[[calls]]` entry takes it), if any.
    pub retry: Option<grpclab_load::retry::RetryPolicy>,
    /// Where the step's `name` is in the file.
    pub line: usize,
}

/// A variable taken from a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Extract {
    /// The variable (`{{.vars.NAME}}`).
    pub var: String,
    /// Where its value comes from.
    pub from: ExtractFrom,
    /// Where it is in the file.
    pub line: usize,
}

/// The part of a reply a variable comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtractFrom {
    /// A field of the reply message, by path (`user.id`, `items[0].sku`).
    Field(String),
    /// A response header (`header:NAME`).
    Header(String),
    /// A trailer (`trailer:NAME`).
    Trailer(String),
}

/// What a step's reply must be.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Expect {
    /// The status (default: OK).
    pub status: Option<Code>,
    /// The number of reply messages (a server stream's).
    pub messages: Option<u64>,
    /// Conditions on reply fields.
    pub fields: Vec<FieldCheck>,
}

/// A condition on one reply field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldCheck {
    /// The field's path.
    pub path: String,
    /// The condition.
    pub check: Check,
    /// Where it is in the file.
    pub line: usize,
}

/// A condition on a field's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Check {
    /// The value's text form equals this (numbers and booleans as TOML writes them).
    Equals(String),
    /// The value's text form matches this regular expression (checked to compile).
    Matches(String),
    /// A number within these bounds, both included.
    Range {
        /// Lower bound.
        min: Option<f64>,
        /// Upper bound.
        max: Option<f64>,
    },
}

/// What a failed step does to its flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// The flow ends (its later steps are not called).
    #[default]
    Stop,
    /// The next step is called anyway (variables this step would have set stay unset).
    Continue,
}

/// `[[flows]]` as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FlowEntry {
    name: Spanned<String>,
    #[serde(default)]
    weight: Option<Spanned<i64>>,
    #[serde(default)]
    steps: Vec<StepEntry>,
}

/// `[[flows.steps]]` as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StepEntry {
    name: Spanned<String>,
    call: Spanned<String>,
    #[serde(default)]
    data: Option<Spanned<toml::Value>>,
    #[serde(default)]
    metadata: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    extract: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    expect: Option<ExpectEntry>,
    #[serde(default)]
    think: Option<Spanned<String>>,
    #[serde(default)]
    on_failure: Option<Spanned<String>>,
    #[serde(default)]
    retry: Option<Spanned<crate::retry::RetryEntry>>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectEntry {
    #[serde(default)]
    status: Option<Spanned<toml::Value>>,
    #[serde(default)]
    messages: Option<Spanned<i64>>,
    #[serde(default)]
    fields: Vec<Spanned<FieldEntry>>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldEntry {
    path: String,
    #[serde(default)]
    equals: Option<toml::Value>,
    #[serde(default)]
    matches: Option<String>,
    #[serde(default)]
    min: Option<f64>,
    #[serde(default)]
    max: Option<f64>,
}

/// Where an error is: the file (as `--workload FILE`) and a line of it.
struct Place<'a> {
    what: &'a str,
    text: &'a str,
}

impl Place<'_> {
    fn line(&self, span: Range<usize>) -> usize {
        self.text[..span.start.min(self.text.len())]
            .matches('\n')
            .count()
            + 1
    }

    fn error(&self, span: Range<usize>, message: impl std::fmt::Display) -> InputError {
        self.error_at_line(self.line(span), message)
    }

    fn error_at_line(&self, line: usize, message: impl std::fmt::Display) -> InputError {
        InputError(format!("{} line {line}: {message}", self.what))
    }
}

/// Checks the flows of a workload file. `what` is `--workload FILE`; `text` the file's text
/// (for lines); `call_labels` the names the file's `[[calls]]` are reported under (a step's
/// name must not be one of them).
pub(crate) fn check_flows(
    entries: Vec<FlowEntry>,
    what: &str,
    text: &str,
    call_labels: &[String],
) -> Result<Vec<Flow>, InputError> {
    let place = Place { what, text };
    let mut flow_names = BTreeSet::new();
    let mut step_names: BTreeMap<String, usize> = BTreeMap::new();
    let mut flows = Vec::with_capacity(entries.len());
    for entry in entries {
        let name_span = entry.name.span();
        let name = entry.name.into_inner();
        check_word(&name, "flow", &place, name_span.clone())?;
        if !flow_names.insert(name.clone()) {
            return Err(place.error(
                name_span,
                format!("flows.name: a second flow named '{name}'; give each flow its own name"),
            ));
        }
        let weight = match entry.weight {
            None => 1,
            Some(weight) => {
                let span = weight.span();
                u32::try_from(*weight.get_ref())
                    .ok()
                    .filter(|w| *w >= 1)
                    .ok_or_else(|| {
                        place.error(
                            span,
                            format!(
                                "flows.weight: flow '{name}' has weight {}; give a whole number from 1 to {}",
                                weight.get_ref(),
                                u32::MAX
                            ),
                        )
                    })?
            }
        };
        if entry.steps.is_empty() {
            return Err(place.error(
                name_span.clone(),
                format!("flow '{name}' has no steps; give [[flows.steps]] with name and call"),
            ));
        }
        let mut extracted: BTreeMap<String, String> = BTreeMap::new();
        let mut steps = Vec::with_capacity(entry.steps.len());
        for step in entry.steps {
            let step = check_step(step, &name, &place, &mut extracted, &mut step_names)?;
            if call_labels.contains(&step.name) {
                return Err(place.error_at_line(
                    step.line,
                    format!(
                        "flows.steps.name: '{}' is also a [[calls]] entry's name; figures would mix: rename one",
                        step.name
                    ),
                ));
            }
            steps.push(step);
        }
        flows.push(Flow {
            name,
            weight,
            steps,
            line: place.line(name_span),
        });
    }
    Ok(flows)
}

fn check_step(
    step: StepEntry,
    flow: &str,
    place: &Place<'_>,
    extracted: &mut BTreeMap<String, String>,
    step_names: &mut BTreeMap<String, usize>,
) -> Result<FlowStep, InputError> {
    let name_span = step.name.span();
    let name = step.name.into_inner();
    let line = place.line(name_span.clone());
    check_word(&name, "step", place, name_span.clone())?;
    if let Some(first) = step_names.insert(name.clone(), line) {
        return Err(place.error(
            name_span,
            format!(
                "flows.steps.name: a second step named '{name}' (the first is on line {first}); step names are unique in the file"
            ),
        ));
    }
    let call_span = step.call.span();
    let call = step.call.into_inner();
    if call.trim().is_empty() {
        return Err(place.error(
            call_span,
            format!(
                "flows.steps.call: step '{name}' has no method; give call = \"pkg.Service.Method\""
            ),
        ));
    }
    // Variables used must come from an earlier step of this flow.
    let data = match step.data {
        None => None,
        Some(value) => {
            let span = value.span();
            let text = match value.into_inner() {
                toml::Value::String(text) => text,
                value @ (toml::Value::Table(_) | toml::Value::Array(_)) => {
                    serde_json::to_string(&value).map_err(|err| {
                        place.error(span.clone(), format!("flows.steps.data: step '{name}': {err}"))
                    })?
                }
                other => {
                    return Err(place.error(
                        span,
                        format!(
                            "flows.steps.data: step '{name}' has a {}; give a table (the message's fields), an array of them, or JSON text",
                            other.type_str()
                        ),
                    ))
                }
            };
            check_vars(
                &text,
                "flows.steps.data",
                &name,
                flow,
                extracted,
                place,
                span,
            )?;
            Some(text)
        }
    };
    let mut metadata = BTreeMap::new();
    for (key, value) in step.metadata {
        let span = value.span();
        let value = value.into_inner();
        check_vars(
            &value,
            &format!("flows.steps.metadata.{key}"),
            &name,
            flow,
            extracted,
            place,
            span,
        )?;
        metadata.insert(key, value);
    }
    let expect = match step.expect {
        None => Expect::default(),
        Some(entry) => check_expect(entry, &name, place)?,
    };
    let think = match step.think {
        None => None,
        Some(text) => {
            let span = text.span();
            let parsed = grpclab_core::duration::parse_duration(text.get_ref()).map_err(|err| {
                place.error(
                    span,
                    format!("flows.steps.think: step '{name}': {err}; give a duration such as 10ms or 1s"),
                )
            })?;
            Some(parsed)
        }
    };
    let on_failure = match step.on_failure {
        None => OnFailure::Stop,
        Some(text) => match text.get_ref().as_str() {
            "stop" => OnFailure::Stop,
            "continue" => OnFailure::Continue,
            other => {
                return Err(place.error(
                    text.span(),
                    format!(
                        "flows.steps.on_failure: step '{name}' says '{other}'; give \"stop\" (the default) or \"continue\""
                    ),
                ))
            }
        },
    };
    // Extracted after the step's own data and metadata: a step cannot use what it extracts.
    let mut extract = Vec::with_capacity(step.extract.len());
    for (var, source) in step.extract {
        let span = source.span();
        let line = place.line(span.clone());
        if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(place.error(
                span,
                format!(
                    "flows.steps.extract: step '{name}': the variable '{var}' must be letters, digits and '_'"
                ),
            ));
        }
        let source = source.into_inner();
        let from = if let Some(header) = source.strip_prefix("header:") {
            ExtractFrom::Header(header_name(header, &name, place, span.clone())?)
        } else if let Some(trailer) = source.strip_prefix("trailer:") {
            ExtractFrom::Trailer(header_name(trailer, &name, place, span.clone())?)
        } else if source.trim().is_empty() {
            return Err(place.error(
                span,
                format!(
                    "flows.steps.extract.{var}: step '{name}' gives no path; give a reply field (user.id, items[0].sku), header:NAME or trailer:NAME"
                ),
            ));
        } else {
            ExtractFrom::Field(source)
        };
        extracted.insert(var.clone(), name.clone());
        extract.push(Extract { var, from, line });
    }
    let retry = match step.retry {
        None => None,
        Some(entry) => {
            let span = entry.span();
            let what = format!("flows.steps: step '{name}'");
            Some(
                crate::retry::retry_policy(entry.into_inner(), &what)
                    .map_err(|err| place.error(span, err.0))?,
            )
        }
    };
    Ok(FlowStep {
        name,
        call,
        data,
        metadata,
        extract,
        expect,
        think,
        on_failure,
        retry,
        line,
    })
}

fn header_name(
    name: &str,
    step: &str,
    place: &Place<'_>,
    span: Range<usize>,
) -> Result<String, InputError> {
    let lower = name.trim().to_ascii_lowercase();
    http::HeaderName::from_bytes(lower.as_bytes())
        .map(|_| lower.clone())
        .map_err(|_| {
            place.error(
                span,
                format!("flows.steps.extract: step '{step}': '{name}' is not a header name"),
            )
        })
}

fn check_expect(entry: ExpectEntry, step: &str, place: &Place<'_>) -> Result<Expect, InputError> {
    let status = match entry.status {
        None => None,
        Some(value) => {
            let span = value.span();
            Some(crate::status::status_named(value.get_ref()).ok_or_else(|| {
                place.error(
                    span,
                    format!(
                        "flows.steps.expect.status: step '{step}': not a gRPC status; give a name such as \"OK\" or \"NOT_FOUND\", or a code from 0 to 16"
                    ),
                )
            })?)
        }
    };
    let messages = match entry.messages {
        None => None,
        Some(count) => Some(u64::try_from(*count.get_ref()).map_err(|_| {
            place.error(
                count.span(),
                format!("flows.steps.expect.messages: step '{step}': give a count from 0"),
            )
        })?),
    };
    let mut fields = Vec::with_capacity(entry.fields.len());
    for field in entry.fields {
        let span = field.span();
        let line = place.line(span.clone());
        let field = field.into_inner();
        let given = [
            field.equals.is_some(),
            field.matches.is_some(),
            field.min.is_some() || field.max.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(place.error(
                span,
                format!(
                    "flows.steps.expect.fields: step '{step}', path '{}': give exactly one of equals, matches, or min/max",
                    field.path
                ),
            ));
        }
        let check = if let Some(value) = field.equals {
            Check::Equals(match value {
                toml::Value::String(text) => text,
                toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                    value.to_string()
                }
                other => {
                    return Err(place.error(
                        span,
                        format!(
                            "flows.steps.expect.fields.equals: step '{step}': a {} cannot be compared; give a string, number or boolean",
                            other.type_str()
                        ),
                    ))
                }
            })
        } else if let Some(pattern) = field.matches {
            regex::Regex::new(&pattern).map_err(|err| {
                let reason = err.to_string().lines().last().unwrap_or_default().to_owned();
                place.error(
                    span.clone(),
                    format!(
                        "flows.steps.expect.fields.matches: step '{step}': '{pattern}' is not a regular expression ({})",
                        reason.trim()
                    ),
                )
            })?;
            Check::Matches(pattern)
        } else {
            if let (Some(min), Some(max)) = (field.min, field.max) {
                if min > max {
                    return Err(place.error(
                        span,
                        format!(
                            "flows.steps.expect.fields: step '{step}', path '{}': min {min} is above max {max}",
                            field.path
                        ),
                    ));
                }
            }
            Check::Range {
                min: field.min,
                max: field.max,
            }
        };
        fields.push(FieldCheck {
            path: field.path,
            check,
            line,
        });
    }
    Ok(Expect {
        status,
        messages,
        fields,
    })
}

/// A flow, a step: one plain word (a threshold's prefix, a row's label).
fn check_word(
    name: &str,
    kind: &str,
    place: &Place<'_>,
    span: Range<usize>,
) -> Result<(), InputError> {
    if name.is_empty() || name.contains(|c: char| c == ':' || c == ',' || c.is_whitespace()) {
        let field = if kind == "flow" {
            "flows.name"
        } else {
            "flows.steps.name"
        };
        return Err(place.error(
            span,
            format!("{field}: the {kind} name '{name}' must be a word without ':', ',' or spaces"),
        ));
    }
    Ok(())
}

/// The `{{.vars.NAME}}` a template text uses.
pub fn used_vars(text: &str) -> Vec<String> {
    let mut vars = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        if let Some(var) = after[..close].trim().strip_prefix(".vars.") {
            vars.push(var.trim().to_owned());
        }
        rest = &after[close + 2..];
    }
    vars
}

fn check_vars(
    text: &str,
    field: &str,
    step: &str,
    flow: &str,
    extracted: &BTreeMap<String, String>,
    place: &Place<'_>,
    span: Range<usize>,
) -> Result<(), InputError> {
    for var in used_vars(text) {
        if !extracted.contains_key(&var) {
            let known = if extracted.is_empty() {
                "no step before it extracts any".to_owned()
            } else {
                format!(
                    "earlier steps extract: {}",
                    extracted.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            };
            return Err(place.error(
                span,
                format!(
                    "{field}: step '{step}' of flow '{flow}' uses {{{{.vars.{var}}}}}, which no earlier step of the flow extracts ({known}); add extract = {{ {var} = \"PATH\" }} to an earlier step"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::parse;

    const GOOD: &str = r#"
[[calls]]
call = "helloworld.Greeter.SayHello"
weight = 3

[[flows]]
name = "checkout"
weight = 2

[[flows.steps]]
name = "login"
call = "session.Sessions.Login"
data = { user = "u{{.RequestNumber}}" }
extract = { token = "token", region = "header:X-Region" }
expect = { status = "OK" }

[[flows.steps]]
name = "list"
call = "session.Sessions.List"
metadata = { authorization = "Bearer {{ .vars.token }}" }
expect = { messages = 1, fields = [{ path = "items[0].sku", matches = "^sku-" }, { path = "count", min = 1 }] }
think = "10ms"
on_failure = "continue"

[[flows.steps]]
name = "get"
call = "session.Sessions.Get"
data = '{"token": "{{.vars.token}}", "region": "{{.vars.region}}"}'
expect = { status = 5, fields = [{ path = "found", equals = false }] }
"#;

    #[test]
    fn a_flow_is_read_with_its_steps_in_order() {
        let mix = parse(GOOD, "w.toml").unwrap();
        assert_eq!(mix.calls.len(), 1);
        let flow = &mix.flows[0];
        assert_eq!(
            (flow.name.as_str(), flow.weight, flow.line),
            ("checkout", 2, 7)
        );
        let names: Vec<&str> = flow.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["login", "list", "get"]);
        let login = &flow.steps[0];
        assert_eq!(login.line, 11);
        assert_eq!(
            login.data.as_deref(),
            Some(r#"{"user":"u{{.RequestNumber}}"}"#)
        );
        assert_eq!(
            login
                .extract
                .iter()
                .map(|e| (&e.var[..], e.from.clone()))
                .collect::<Vec<_>>(),
            [
                ("region", ExtractFrom::Header("x-region".to_owned())),
                ("token", ExtractFrom::Field("token".to_owned()))
            ]
        );
        assert_eq!(login.expect.status, Some(Code::Ok));
        assert_eq!(login.on_failure, OnFailure::Stop);
        let list = &flow.steps[1];
        assert_eq!(list.think, Some(Duration::from_millis(10)));
        assert_eq!(list.on_failure, OnFailure::Continue);
        assert_eq!(list.expect.messages, Some(1));
        assert_eq!(
            list.expect.fields,
            [
                FieldCheck {
                    path: "items[0].sku".to_owned(),
                    check: Check::Matches("^sku-".to_owned()),
                    line: 21
                },
                FieldCheck {
                    path: "count".to_owned(),
                    check: Check::Range {
                        min: Some(1.0),
                        max: None
                    },
                    line: 21
                },
            ]
        );
        let get = &flow.steps[2];
        assert_eq!(get.expect.status, Some(Code::NotFound));
        assert_eq!(
            get.expect.fields[0].check,
            Check::Equals("false".to_owned())
        );
    }

    #[test]
    fn a_status_is_named_as_the_grpc_spec_or_ghz_names_it() {
        for name in ["NOT_FOUND", "NotFound", "not_found"] {
            let text = GOOD.replacen("status = 5", &format!("status = \"{name}\""), 1);
            let flows = parse(&text, "w.toml").unwrap().flows;
            assert_eq!(
                flows[0].steps[2].expect.status,
                Some(Code::NotFound),
                "{name}"
            );
        }
    }

    /// `GOOD` with `from` replaced by `to` (once): the error names the file, the line, the field.
    fn error_of(from: &str, to: &str) -> String {
        assert!(GOOD.contains(from), "{from}");
        parse(&GOOD.replacen(from, to, 1), "w.toml").unwrap_err().0
    }

    #[test]
    fn bad_flows_name_the_file_line_and_field() {
        let cases = [
            // A variable no earlier step extracts (and one a step uses before extracting it).
            ("{{ .vars.token }}", "{{.vars.tokn}}", "--workload w.toml line 20: flows.steps.metadata.authorization: step 'list' of flow 'checkout' uses {{.vars.tokn}}, which no earlier step"),
            ("u{{.RequestNumber}}", "{{.vars.token}}", "--workload w.toml line 13: flows.steps.data: step 'login' of flow 'checkout' uses {{.vars.token}}, which no earlier step of the flow extracts (no step before it extracts any)"),
            // Step names are unique in the file, and apart from the plain calls' names.
            ("name = \"get\"", "name = \"login\"", "--workload w.toml line 26: flows.steps.name: a second step named 'login' (the first is on line 11)"),
            ("name = \"get\"", "name = \"helloworld.Greeter.SayHello\"", "--workload w.toml line 26: flows.steps.name: 'helloworld.Greeter.SayHello' is also a [[calls]] entry's name"),
            ("think = \"10ms\"", "think = \"soon\"", "--workload w.toml line 22: flows.steps.think: step 'list'"),
            ("on_failure = \"continue\"", "on_failure = \"retry\"", "--workload w.toml line 23: flows.steps.on_failure: step 'list' says 'retry'"),
            ("status = 5", "status = \"MAYBE\"", "--workload w.toml line 29: flows.steps.expect.status: step 'get': not a gRPC status"),
            ("matches = \"^sku-\"", "matches = \"(sku\"", "--workload w.toml line 21: flows.steps.expect.fields.matches: step 'list': '(sku' is not a regular expression"),
            ("min = 1", "min = 1, equals = 2", "--workload w.toml line 21: flows.steps.expect.fields: step 'list', path 'count': give exactly one of equals, matches, or min/max"),
            ("weight = 2", "weight = 0", "--workload w.toml line 8: flows.weight: flow 'checkout' has weight 0"),
            ("region = \"header:X-Region\"", "region = \"header:X Region\"", "--workload w.toml line 14: flows.steps.extract: step 'login': 'X Region' is not a header name"),
            ("region = \"header:X-Region\"", "\"re-gion\" = \"x\"", "--workload w.toml line 14: flows.steps.extract: step 'login': the variable 're-gion' must be"),
            ("name = \"checkout\"", "name = \"check out\"", "--workload w.toml line 7: flows.name: the flow name 'check out' must be a word"),
        ];
        for (from, to, expected) in cases {
            let error = error_of(from, to);
            assert!(
                error.starts_with(expected),
                "{from} -> {to}:\n  {error}\n  expected {expected}"
            );
            assert!(!error.contains('\n'), "one line: {error}");
        }
        // A field the format does not know: toml's message with its line.
        let error = error_of("think = \"10ms\"", "thinking = \"10ms\"");
        assert!(
            error.contains("unknown field `thinking`") && error.contains("(line 22)"),
            "{error}"
        );
    }

    #[test]
    fn a_flow_without_steps_and_a_file_of_flows_only() {
        let error = parse("[[flows]]\nname = \"empty\"\n", "w.toml")
            .unwrap_err()
            .0;
        assert!(
            error.starts_with("--workload w.toml line 2: flow 'empty' has no steps"),
            "{error}"
        );
        let mix = parse(
            "[[flows]]\nname = \"one\"\n[[flows.steps]]\nname = \"a\"\ncall = \"p.S.M\"\n",
            "w.toml",
        )
        .unwrap();
        assert!(mix.calls.is_empty());
        assert_eq!(mix.flows[0].steps[0].call, "p.S.M");
    }

    #[test]
    fn used_vars_are_found_in_any_spacing() {
        assert_eq!(
            used_vars("a {{.vars.x}} b {{ .vars.y }} {{.RequestNumber}} {{.vars.x}}"),
            ["x", "y", "x"]
        );
        assert!(used_vars("{{.vars.x").is_empty());
    }
}
