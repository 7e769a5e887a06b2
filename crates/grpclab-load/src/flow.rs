//! What a flow step does with its reply, resolved for the engine: the values it extracts
//! into the flow's variables and the expectations it checks. Pure functions of the reply
//! (its status and its message bytes), so a transport only hands them over; reply fields are
//! read by a wire scan ([`FieldPath::read`]), not a decode.
//!
//! The workload file's text form (and its checks, with file and line) is grpclab-harness's
//! `flow.rs`; the command line resolves it into these types against the methods' schemas.

use grpclab_core::field_path::{FieldPath, FieldValue};
use grpclab_core::Code;

/// A variable's source in a step's reply.
#[derive(Debug, Clone)]
pub enum Extractor {
    /// A reply field.
    Field(FieldPath),
    /// A response header, by its lowercase name.
    Header(bytes::Bytes),
    /// A trailer, by its lowercase name.
    Trailer(bytes::Bytes),
}

/// One extract: the variable's place among the flow's variables, and its source.
#[derive(Debug, Clone)]
pub struct Extract {
    /// The variable's place in the flow's variable list (as templates were bound to it).
    pub var: usize,
    /// Where the value comes from.
    pub from: Extractor,
}

/// A condition on one reply field's value.
#[derive(Debug, Clone)]
pub enum ValueCheck {
    /// Its text form equals this.
    Equals(String),
    /// Its text form matches this expression.
    Matches(regex::Regex),
    /// A number within these bounds (both included).
    Range {
        /// Lower bound.
        min: Option<f64>,
        /// Upper bound.
        max: Option<f64>,
    },
}

/// What a step's reply must be.
#[derive(Debug, Clone)]
pub struct Expectation {
    /// The status the step expects (OK unless the file says otherwise).
    pub status: Code,
    /// Conditions on reply fields (only read when the status is OK; a server stream's
    /// first reply).
    pub fields: Vec<(FieldPath, ValueCheck)>,
    /// The number of reply messages a server stream must carry (checked when the status is
    /// OK).
    pub messages: Option<u64>,
}

impl Default for Expectation {
    fn default() -> Expectation {
        Expectation {
            status: Code::Ok,
            fields: Vec::new(),
            messages: None,
        }
    }
}

/// How a reply failed its step's expectation: one line, as the run's examples show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unexpected(pub String);

impl Expectation {
    /// Checks a reply: its status, then (status OK) its number of messages (`replies`) and
    /// each field condition. `message` is the reply message (a stream's first) without its
    /// gRPC prefix.
    pub fn check(
        &self,
        status: Code,
        message: Option<&[u8]>,
        replies: u64,
    ) -> Result<(), Unexpected> {
        if status != self.status {
            return Err(Unexpected(format!(
                "status {} where {} was expected",
                status.name(),
                self.status.name()
            )));
        }
        if status != Code::Ok {
            return Ok(());
        }
        if let Some(expected) = self.messages.filter(|expected| *expected != replies) {
            let plural = |n: u64| if n == 1 { "message" } else { "messages" };
            return Err(Unexpected(format!(
                "{replies} reply {} where {expected} {} expected",
                plural(replies),
                if expected == 1 { "was" } else { "were" }
            )));
        }
        if self.fields.is_empty() {
            return Ok(());
        }
        let Some(message) = message else {
            return Err(Unexpected(
                "no reply message to read its fields from".to_owned(),
            ));
        };
        for (path, check) in &self.fields {
            let value = path
                .read(message)
                .map_err(|err| Unexpected(err.to_string()))?;
            check_value(path, &value, check)?;
        }
        Ok(())
    }
}

fn check_value(path: &FieldPath, value: &FieldValue, check: &ValueCheck) -> Result<(), Unexpected> {
    let shown = || {
        let text = value.to_string();
        // Examples stay one short line whatever the reply holds.
        let mut cut: String = text.chars().take(60).collect();
        if cut.len() < text.len() {
            cut.push('…');
        }
        cut
    };
    // A text value is compared as it is; others as a template would insert them.
    let text = || match value {
        FieldValue::Text(text) => std::borrow::Cow::Borrowed(text.as_str()),
        other => std::borrow::Cow::Owned(other.to_string()),
    };
    let passed = match check {
        ValueCheck::Equals(expected) => text() == expected.as_str(),
        ValueCheck::Matches(pattern) => pattern.is_match(&text()),
        ValueCheck::Range { min, max } => {
            let number = match value {
                FieldValue::Int(v) => Some(*v as f64),
                FieldValue::Uint(v) => Some(*v as f64),
                FieldValue::Float(v) => Some(*v),
                FieldValue::Bool(_) | FieldValue::Text(_) | FieldValue::Bytes(_) => None,
            };
            match number {
                None => {
                    return Err(Unexpected(format!(
                        "{} is '{}', not a number",
                        path.as_str(),
                        shown()
                    )))
                }
                Some(n) => min.is_none_or(|min| n >= min) && max.is_none_or(|max| n <= max),
            }
        }
    };
    if passed {
        return Ok(());
    }
    let wanted = match check {
        ValueCheck::Equals(expected) => format!("equal to '{expected}'"),
        ValueCheck::Matches(pattern) => format!("matching /{}/", pattern.as_str()),
        ValueCheck::Range { min, max } => match (min, max) {
            (Some(min), Some(max)) => format!("within [{min}, {max}]"),
            (Some(min), None) => format!("at least {min}"),
            (None, Some(max)) => format!("at most {max}"),
            (None, None) => "a number".to_owned(),
        },
    };
    Err(Unexpected(format!(
        "{} is '{}', not {wanted}",
        path.as_str(),
        shown()
    )))
}

impl Extract {
    /// The variable's value from a reply message (no gRPC prefix); a path the reply does not
    /// reach (an element past the end) is an [`Unexpected`] of its own.
    pub fn value(&self, message: &[u8], headers: &[ReplyHeader]) -> Result<String, Unexpected> {
        let header = |name: &bytes::Bytes, trailer: bool| {
            let kind = if trailer { "trailer" } else { "header" };
            headers
                .iter()
                .find(|header| header.trailer == trailer && header.name == name)
                .map(|header| String::from_utf8_lossy(&header.value).into_owned())
                .ok_or_else(|| {
                    Unexpected(format!(
                        "extract: the reply has no {kind} {}",
                        String::from_utf8_lossy(name)
                    ))
                })
        };
        match &self.from {
            Extractor::Field(path) => path
                .read(message)
                .map(FieldValue::into_text)
                .map_err(|err| Unexpected(format!("extract: {err}"))),
            Extractor::Header(name) => header(name, false),
            Extractor::Trailer(name) => header(name, true),
        }
    }
}

/// A step's kept response headers and trailers (see `RequestTemplate::kept_headers`).
pub use grpclab_h2::client::ReplyHeader;

/// A flow as the engine runs it: its steps in order, and its variables' names (the places
/// [`Extract::var`] and the steps' templates were bound to).
#[derive(Debug, Clone)]
pub struct FlowPlan {
    /// Its name in the workload file (outputs, thresholds).
    pub name: String,
    /// Its share of the mix's entries, against the plain methods' and other flows' weights.
    pub weight: u32,
    /// Its steps, run one after another on one stream slot.
    pub steps: Vec<FlowStepPlan>,
    /// Its variables, by place.
    pub vars: Vec<String>,
}

/// What the engine asks of a flow step's method, worked out once per run
/// ([`LoadConfig::step_traits`](crate::LoadConfig::step_traits)).
#[derive(Debug, Clone, Copy, Default)]
pub struct StepTraits {
    /// It reads its reply (extracts, field conditions, a count of messages): kept only then.
    pub reads_reply: bool,
    /// An OK answer passes it with nothing more to do (it reads nothing, expects OK, has no
    /// retry policy): the constant step's short way.
    pub passes_on_ok: bool,
    /// Its method is server-streaming (see [`FlowStepPlan::streams`]).
    pub streams: bool,
}

/// One step of a [`FlowPlan`].
#[derive(Debug, Clone)]
pub struct FlowStepPlan {
    /// Its name in the workload file.
    pub name: String,
    /// The method it calls: its place in [`LoadConfig::methods`](crate::LoadConfig::methods),
    /// a method of its own (its figures are the step's).
    pub method: u32,
    /// Variables it takes from its reply.
    pub extracts: Vec<Extract>,
    /// What its reply must be.
    pub expect: Expectation,
    /// The pause after it, before the next step.
    pub think: std::time::Duration,
    /// Whether the flow goes on when this step fails (else it ends there).
    pub continue_on_failure: bool,
    /// Whether its method is server-streaming: its call sends one request and reads replies
    /// to the stream's end (none is fine), fields and extracts reading the first.
    pub streams: bool,
}

impl FlowStepPlan {
    /// Whether the step reads its reply's message (extracts, field conditions): only then is
    /// the reply kept; a constant step costs what a plain call costs.
    pub fn reads_reply(&self) -> bool {
        !self.extracts.is_empty()
            || !self.expect.fields.is_empty()
            || self.expect.messages.is_some()
    }

    /// Judges a step's reply against its expectation and, when it passes with status OK,
    /// takes its extracts into `vars`. `message` is the reply (a stream's first) without its
    /// gRPC prefix, `replies` the number of reply messages.
    pub fn judge(
        &self,
        status: Code,
        message: Option<&[u8]>,
        replies: u64,
        headers: &[ReplyHeader],
        vars: &mut [String],
    ) -> Result<(), Unexpected> {
        self.expect.check(status, message, replies)?;
        if status != Code::Ok {
            return Ok(());
        }
        for extract in &self.extracts {
            let field = matches!(extract.from, Extractor::Field(_));
            if field && message.is_none() {
                return Err(Unexpected(
                    "extract: no reply message to read it from".to_owned(),
                ));
            }
            let value = extract.value(message.unwrap_or_default(), headers)?;
            if let Some(place) = vars.get_mut(extract.var) {
                *place = value;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grpclab_core::scenario::Schema;
    use std::path::PathBuf;

    /// A message of the session service (the repo's scenarios/session/session.proto).
    fn reply_type(name: &str) -> prost_reflect::MessageDescriptor {
        let root = PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/session"
        ));
        let schema = Schema::compile(&[root.join("session.proto")], &[root]).expect("compile");
        schema
            .pool()
            .get_message_by_name(&format!("grpclab.session.v1.{name}"))
            .expect("message")
    }

    fn list_reply(first_sku: &str, count: u32) -> Vec<u8> {
        let json = format!(
            r#"{{"items":[{{"sku":"{first_sku}","priceCents":"100"}},{{"sku":"sku-a-1"}}],"count":{count}}}"#
        );
        let mut deserializer = serde_json::Deserializer::from_str(&json);
        let message =
            prost_reflect::DynamicMessage::deserialize(reply_type("ListReply"), &mut deserializer)
                .expect("json");
        prost_reflect::prost::Message::encode_to_vec(&message)
    }

    fn path(text: &str) -> FieldPath {
        FieldPath::resolve(&reply_type("ListReply"), text).expect("path")
    }

    #[test]
    fn expectations_pass_and_fail_with_one_line_each() {
        let expect = Expectation {
            status: Code::Ok,
            fields: vec![
                (
                    path("items[0].sku"),
                    ValueCheck::Matches(regex::Regex::new("^sku-").unwrap()),
                ),
                (
                    path("count"),
                    ValueCheck::Range {
                        min: Some(1.0),
                        max: Some(5.0),
                    },
                ),
                (
                    path("items[0].price_cents"),
                    ValueCheck::Equals("100".to_owned()),
                ),
            ],
            messages: None,
        };
        assert_eq!(
            expect.check(Code::Ok, Some(&list_reply("sku-a-0", 2)), 1),
            Ok(())
        );
        let cases = [
            (
                Code::Ok,
                list_reply("wrong-a", 2),
                "items[0].sku is 'wrong-a', not matching /^sku-/",
            ),
            (
                Code::Ok,
                list_reply("sku-a-0", 9),
                "count is '9', not within [1, 5]",
            ),
            (
                Code::Unauthenticated,
                Vec::new(),
                "status Unauthenticated where OK was expected",
            ),
        ];
        for (status, reply, says) in cases {
            let Err(Unexpected(line)) = expect.check(status, Some(&reply), 1) else {
                panic!("{says}: passed")
            };
            assert_eq!(line, says);
        }
        // An expected failure status passes, and its fields are not read.
        let refused = Expectation {
            status: Code::NotFound,
            ..expect.clone()
        };
        assert_eq!(refused.check(Code::NotFound, None, 0), Ok(()));
        // A path past the reply's elements fails, saying so.
        let past = Expectation {
            status: Code::Ok,
            fields: vec![(path("items[5].sku"), ValueCheck::Equals("x".to_owned()))],
            messages: None,
        };
        let Err(Unexpected(line)) = past.check(Code::Ok, Some(&list_reply("sku-a-0", 2)), 1) else {
            panic!("passed")
        };
        assert!(line.contains("element [5] asked for, 2 there"), "{line}");
        // A stream's count of replies, checked before its fields; an OK stream of none has
        // no fields to read.
        let three = Expectation {
            messages: Some(3),
            ..expect.clone()
        };
        let reply = list_reply("sku-a-0", 2);
        assert_eq!(three.check(Code::Ok, Some(&reply), 3), Ok(()));
        assert_eq!(
            three.check(Code::Ok, Some(&reply), 1),
            Err(Unexpected(
                "1 reply message where 3 were expected".to_owned()
            ))
        );
        assert_eq!(
            expect.check(Code::Ok, None, 0),
            Err(Unexpected(
                "no reply message to read its fields from".to_owned()
            ))
        );
        let none = Expectation {
            messages: Some(0),
            fields: Vec::new(),
            ..expect.clone()
        };
        assert_eq!(none.check(Code::Ok, None, 0), Ok(()));
    }

    #[test]
    fn extracts_read_the_reply_by_path() {
        let extract = Extract {
            var: 0,
            from: Extractor::Field(path("items[1].sku")),
        };
        assert_eq!(
            extract.value(&list_reply("sku-a-0", 2), &[]),
            Ok("sku-a-1".to_owned())
        );
        let count = Extract {
            var: 1,
            from: Extractor::Field(path("count")),
        };
        assert_eq!(
            count.value(&list_reply("sku-a-0", 7), &[]),
            Ok("7".to_owned())
        );
        let beyond = Extract {
            var: 0,
            from: Extractor::Field(path("items[2].sku")),
        };
        assert!(beyond.value(&list_reply("sku-a-0", 2), &[]).is_err());
    }
}
