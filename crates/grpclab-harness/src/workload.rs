//! A mix of methods, as the command line (`--mix METHOD=WEIGHT`) or a workload file
//! (`--workload FILE`, TOML) gives it: which methods, their weights, and per method its data
//! and metadata. Only reading and checking: `cli/load.rs` (and `bench` for its rows) resolves
//! each method and builds the engine's `CallMethod`s. A workload file may list one method several times with
//! different data (small and large messages, ghz#82/#197), each entry under its own `name`:
//! the name is what the figures are reported under.

use std::collections::BTreeMap;
use std::path::Path;

use http::{HeaderName, HeaderValue};

use grpclab_core::InputError;

/// One method of a mix, as given.
#[derive(Debug, Clone, PartialEq)]
pub struct MixCall {
    /// The method: `package.Service.Method` (or `package.Service/Method`).
    pub call: String,
    /// What its figures are reported under (a workload entry's `name`); `None`: the
    /// method's full name.
    pub name: Option<String>,
    /// Its share of the calls, against the others' (at least 1).
    pub weight: u32,
    /// Its payload as JSON text (`None`: the run's -d/-D, else an empty message).
    pub data: Option<String>,
    /// Its own metadata, added to the run's -m (templates allowed).
    pub metadata: BTreeMap<String, String>,
    /// Its retry policy (a workload entry's `retry`, see retry.rs).
    pub retry: Option<grpclab_load::retry::RetryPolicy>,
    /// Its hedging policy (a workload entry's `hedging`, see retry.rs).
    pub hedging: Option<grpclab_load::retry::HedgingPolicy>,
}

impl MixCall {
    /// What its figures are reported under: its `name`, else its method (`pkg.Svc.Method`).
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| self.call.replace('/', "."))
    }
}

/// A whole mix: its calls, its flows and, if given, its seed.
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    /// Plain calls (at least one call or one flow).
    pub calls: Vec<MixCall>,
    /// Flows: chained calls (a workload file's `[[flows]]`, see flow.rs).
    pub flows: Vec<crate::flow::Flow>,
    /// The workload file's `seed` (the command line's `--mix-seed` wins over it).
    pub seed: Option<u64>,
    /// Where it came from, as errors name it: `--workload FILE` or `--mix`.
    pub source: String,
}

/// The workload file's shape (TOML).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    calls: Vec<WorkloadCall>,
    #[serde(default)]
    flows: Vec<crate::flow::FlowEntry>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadCall {
    call: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default = "one")]
    weight: i64,
    #[serde(default)]
    data: Option<toml::Value>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(default)]
    retry: Option<crate::retry::RetryEntry>,
    #[serde(default)]
    hedging: Option<crate::retry::HedgingEntry>,
}

/// A seed for a mix that was given none: from the clock and the process, reported with
/// the results so the run can be repeated.
pub fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ (u64::from(std::process::id()) << 32)) % 1_000_000_000
}

/// Headers a user may not set: HTTP/2 pseudo-headers and the ones gRPC's framing depends on.
const RESERVED_HEADERS: [&str; 4] = ["content-type", "te", "grpc-timeout", "grpc-encoding"];

/// Metadata as request headers: lower-cased names, none that grpclab sets itself, and only
/// what a header can carry.
pub fn metadata_headers(
    flag: &str,
    map: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<Vec<(HeaderName, HeaderValue)>, InputError> {
    map.into_iter()
        .flatten()
        .map(|(key, value)| {
            let lower = key.to_ascii_lowercase();
            if lower.starts_with(':') || RESERVED_HEADERS.contains(&lower.as_str()) {
                return Err(InputError(format!(
                    "{flag}: '{key}' is set by grpclab itself and cannot be overridden"
                )));
            }
            let name = HeaderName::from_bytes(lower.as_bytes())
                .map_err(|_| InputError(format!("{flag}: '{key}' is not a valid header name")))?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                InputError(format!(
                    "{flag}: the value of '{key}' has characters a header cannot carry"
                ))
            })?;
            Ok((name, value))
        })
        .collect()
}

fn one() -> i64 {
    1
}

/// The mix `--mix` entries give (`None` without any).
pub fn from_flags(entries: &[String]) -> Result<Option<Mix>, InputError> {
    if entries.is_empty() {
        return Ok(None);
    }
    let mut calls = Vec::with_capacity(entries.len());
    for entry in entries {
        let (call, weight) = match entry.rsplit_once('=') {
            Some((call, weight)) => {
                let weight = weight.trim().parse::<i64>().map_err(|_| {
                    InputError(format!(
                        "--mix '{entry}': the weight '{weight}' is not a whole number; give METHOD=WEIGHT, e.g. pkg.Svc.Method=3"
                    ))
                })?;
                (call.trim(), weight)
            }
            None => (entry.trim(), 1),
        };
        calls.push(checked_call(
            call,
            None,
            weight,
            None,
            BTreeMap::new(),
            "--mix",
        )?);
    }
    check_distinct(&calls, "--mix")?;
    Ok(Some(Mix {
        calls,
        flows: Vec::new(),
        seed: None,
        source: "--mix".to_owned(),
    }))
}

/// The mix a workload file describes.
pub fn from_file(path: &Path) -> Result<Mix, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| InputError(format!("--workload: cannot read {}: {err}", path.display())))?;
    parse(&text, &path.display().to_string())
}

/// Parses a workload file's text (`name` says which file in errors).
pub(crate) fn parse(text: &str, name: &str) -> Result<Mix, InputError> {
    let file: WorkloadFile = toml::from_str(text).map_err(|err| {
        // toml's message spans lines (a snippet of the file): one line of it here.
        let message = err
            .message()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let at = err
            .span()
            .map(|span| {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!(" (line {line})")
            })
            .unwrap_or_default();
        InputError(format!(
            "--workload {name}: {message}{at}; a workload is [[calls]] tables with call = \"pkg.Svc.Method\" and optional weight, data, metadata, and [[flows]] with [[flows.steps]]"
        ))
    })?;
    if file.calls.is_empty() && file.flows.is_empty() {
        return Err(InputError(format!(
            "--workload {name}: no [[calls]] and no [[flows]]; give at least one: [[calls]] call = \"pkg.Svc.Method\""
        )));
    }
    let what = format!("--workload {name}");
    let calls = file
        .calls
        .into_iter()
        .map(|call| {
            let data = call
                .data
                .map(|value| data_text(value, &call.call, &what))
                .transpose()?;
            let named = format!("{what}: {}", call.call);
            if call.retry.is_some() && call.hedging.is_some() {
                return Err(InputError(format!(
                    "{named}: give retry or hedging, not both (a method has one policy, as in gRPC's service config)"
                )));
            }
            let retry = call
                .retry
                .map(|entry| crate::retry::retry_policy(entry, &named))
                .transpose()?;
            let hedging = call
                .hedging
                .map(|entry| crate::retry::hedging_policy(entry, &named))
                .transpose()?;
            let mut checked = checked_call(
                &call.call,
                call.name,
                call.weight,
                data,
                call.metadata,
                &what,
            )?;
            checked.retry = retry;
            checked.hedging = hedging;
            Ok::<_, InputError>(checked)
        })
        .collect::<Result<Vec<_>, _>>()?;
    check_distinct(&calls, &what)?;
    let labels: Vec<String> = calls.iter().map(MixCall::label).collect();
    let flows = crate::flow::check_flows(file.flows, &what, text, &labels)?;
    Ok(Mix {
        calls,
        flows,
        seed: file.seed,
        source: what,
    })
}

/// A call's `data` as JSON text: a string is JSON text as written; a table or an array is
/// converted (its strings may hold templates).
fn data_text(value: toml::Value, call: &str, what: &str) -> Result<String, InputError> {
    match value {
        toml::Value::String(text) => Ok(text),
        value @ (toml::Value::Table(_) | toml::Value::Array(_)) => serde_json::to_string(&value)
            .map_err(|err| InputError(format!("{what}: {call}'s data cannot be JSON: {err}"))),
        other => Err(InputError(format!(
            "{what}: {call}'s data is a {}; give a table (the message's fields), an array of them, or JSON text",
            other.type_str()
        ))),
    }
}

fn checked_call(
    call: &str,
    name: Option<String>,
    weight: i64,
    data: Option<String>,
    metadata: BTreeMap<String, String>,
    what: &str,
) -> Result<MixCall, InputError> {
    if call.is_empty() {
        return Err(InputError(format!(
            "{what}: a call without a method; give pkg.Service.Method"
        )));
    }
    let weight = u32::try_from(weight).ok().filter(|w| *w >= 1).ok_or_else(|| {
        InputError(format!(
            "{what}: {call} has weight {weight}; give a whole number from 1 to {} (leave a method out to call it never)",
            u32::MAX
        ))
    })?;
    if let Some(name) = &name {
        // The name is a threshold's `NAME:` prefix and a row's label: one plain word.
        if name.is_empty() || name.contains(|c: char| c == ':' || c == ',' || c.is_whitespace()) {
            return Err(InputError(format!(
                "{what}: {call}'s name '{name}' must be a word without ':', ',' or spaces, e.g. name = \"small\""
            )));
        }
    }
    Ok(MixCall {
        call: call.to_owned(),
        name,
        weight,
        data,
        metadata,
        retry: None,
        hedging: None,
    })
}

/// Two entries reported under one name would mix their figures: refused. An entry is
/// reported under its `name`, else its method.
fn check_distinct(calls: &[MixCall], what: &str) -> Result<(), InputError> {
    for (index, call) in calls.iter().enumerate() {
        if let Some(earlier) = calls[..index].iter().find(|e| e.label() == call.label()) {
            let why = if earlier.name.is_some() || call.name.is_some() {
                "give each entry its own name".to_owned()
            } else {
                "give each method once with its whole weight, or (in a workload file) each entry its own name = \"...\" to send it different data".to_owned()
            };
            return Err(InputError(format!(
                "{what}: {} is named twice; {why}",
                call.label()
            )));
        }
    }
    if calls.len() > grpclab_load::MAX_METHODS {
        return Err(InputError(format!(
            "{what}: {} methods is more than the {} a mix takes",
            calls.len(),
            grpclab_load::MAX_METHODS
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_give_methods_and_weights() {
        let mix = from_flags(&["a.B.C=3".to_owned(), "a.B/D".to_owned()])
            .unwrap()
            .unwrap();
        assert_eq!(
            mix.calls
                .iter()
                .map(|c| (c.call.as_str(), c.weight))
                .collect::<Vec<_>>(),
            [("a.B.C", 3), ("a.B/D", 1)]
        );
        assert_eq!(from_flags(&[]).unwrap(), None);
        for bad in ["a.B.C=0", "a.B.C=-1", "a.B.C=x", "=2", "a.B.C=99999999999"] {
            let err = from_flags(&[bad.to_owned()]).unwrap_err().0;
            assert!(err.starts_with("--mix"), "{bad}: {err}");
        }
        let err = from_flags(&["a.B.C=1".to_owned(), "a.B/C=2".to_owned()])
            .unwrap_err()
            .0;
        assert!(err.contains("named twice"), "{err}");
    }

    #[test]
    fn a_workload_file_gives_data_metadata_and_seed() {
        let mix = parse(
            r#"
seed = 7
[[calls]]
call = "a.B.C"
weight = 9
data = { name = "n{{.RequestNumber}}", tags = ["x"] }
metadata = { "x-id" = "{{.UUID}}" }

[[calls]]
call = "a.B.D"
data = '{"id": 1}'
"#,
            "w.toml",
        )
        .unwrap();
        assert_eq!(mix.seed, Some(7));
        assert_eq!(mix.calls[0].weight, 9);
        let data: serde_json::Value =
            serde_json::from_str(mix.calls[0].data.as_deref().unwrap()).unwrap();
        assert_eq!(
            data,
            serde_json::json!({"name": "n{{.RequestNumber}}", "tags": ["x"]})
        );
        assert_eq!(mix.calls[0].metadata["x-id"], "{{.UUID}}");
        assert_eq!(mix.calls[1].weight, 1);
        assert_eq!(mix.calls[1].data.as_deref(), Some(r#"{"id": 1}"#));
    }

    #[test]
    fn a_bad_workload_file_is_one_line_naming_the_file() {
        for (text, says) in [
            ("", "no [[calls]]"),
            ("[[calls]]\nweight = 2\n", "missing field `call`"),
            ("[[calls]]\ncall = \"a.B.C\"\nweight = 0\n", "weight 0"),
            (
                "[[calls]]\ncall = \"a.B.C\"\ndata = 3\n",
                "data is a integer",
            ),
            ("[[calls]]\ncall = \"a.B.C\"\nwieght = 3\n", "unknown field"),
            ("[[calls]\n", "line 1"),
            (
                "[[calls]]\ncall = \"a.B.C\"\n[[calls]]\ncall = \"a.B.C\"\n",
                "named twice; give each method once with its whole weight, or (in a workload file) each entry its own name",
            ),
            (
                "[[calls]]\ncall = \"a.B.C\"\nname = \"x\"\n[[calls]]\ncall = \"a.B.D\"\nname = \"x\"\n",
                "x is named twice; give each entry its own name",
            ),
            ("[[calls]]\ncall = \"a.B.C\"\nname = \"a:b\"\n", "must be a word"),
            ("[[calls]]\ncall = \"a.B.C\"\nname = \"\"\n", "must be a word"),
        ] {
            let err = parse(text, "w.toml").unwrap_err().0;
            assert!(err.starts_with("--workload w.toml: "), "{text}: {err}");
            assert!(err.contains(says), "{text}: {err}");
            assert!(!err.contains('\n'), "{text}: {err}");
        }
    }

    #[test]
    fn one_method_twice_under_two_names_sends_two_payloads() {
        let mix = parse(
            r#"
[[calls]]
call = "helloworld.Greeter.SayHello"
name = "small"
weight = 9
data = { name = "a" }

[[calls]]
call = "helloworld.Greeter/SayHello"
name = "large"
data = { name = "long" }
"#,
            "w.toml",
        )
        .unwrap();
        let names: Vec<_> = mix.calls.iter().map(|c| c.name.as_deref()).collect();
        assert_eq!(names, [Some("small"), Some("large")]);
    }
}
