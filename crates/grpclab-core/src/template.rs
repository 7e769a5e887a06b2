//! ghz's call templates: `{{.RequestNumber}}`, `{{.MethodName}}`, `{{randomInt 1 10}}`, ... in
//! `-d`/`-D` payloads and `-m`/`-M` metadata.
//!
//! A template is parsed once into literal text and actions. Actions that name the call
//! (`.FullyQualifiedName`, `.MethodName`, `.ServiceName`, `.InputName`, `.OutputName`,
//! `.IsClientStreaming`, `.IsServerStreaming`) are folded into the text when the method is
//! known ([`Template::bind`]); what is left varies per call (`.RequestNumber`, `.WorkerID`,
//! the timestamps, `.UUID`, `randomString`, `randomInt`) and is rendered per call into a
//! reused buffer ([`Template::render`]). A template with nothing left to vary is constant: the
//! caller encodes it once, as any payload, and the hot path never sees a template.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// A template that cannot be parsed; the message names the action and what is known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(String);

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    RequestNumber,
    WorkerId,
    Timestamp,
    TimestampUnix,
    TimestampUnixMilli,
    TimestampUnixNano,
    /// `.UUID`: the call's own UUID, the same wherever the call's templates name it.
    Uuid,
    /// `newUUID`: a fresh UUID at each use.
    NewUuid,
    /// `randomString N`; 0 (or less, in ghz's text) draws the length from 2 to 16 as ghz does.
    RandomString(usize),
    RandomInt(i64, i64),
    /// Known once the method is: folded into text by [`Template::bind`].
    Call(CallField),
    /// `.vars.NAME`: a flow variable, by name until [`Template::bind_vars`] makes it a place
    /// in [`CallContext::vars`].
    Var(String),
    /// A flow variable's place in [`CallContext::vars`].
    VarAt(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallField {
    FullyQualifiedName,
    MethodName,
    ServiceName,
    InputName,
    OutputName,
    IsClientStreaming,
    IsServerStreaming,
}

/// What the call-describing actions render to.
#[derive(Debug, Clone, Default)]
pub struct CallInfo {
    /// `package.Service.Method`.
    pub fully_qualified_name: String,
    /// `Method`.
    pub method_name: String,
    /// `package.Service`.
    pub service_name: String,
    /// The input message's full name.
    pub input_name: String,
    /// The output message's full name.
    pub output_name: String,
    /// Whether the client streams.
    pub client_streaming: bool,
    /// Whether the server streams.
    pub server_streaming: bool,
}

/// What varies per call.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    /// The call's number in the run, from 0 (ghz's `.RequestNumber`).
    pub request_number: u64,
    /// The worker sending it (ghz's `.WorkerID`).
    pub worker_id: &'a str,
    /// A random number drawn for this call and shared by every template it renders (its
    /// payload's and its metadata's): `.UUID` is made from it, so one call has one UUID, as
    /// in ghz.
    pub call_seed: u64,
    /// Now.
    pub now: SystemTime,
    /// A flow's variables, in the order [`Template::bind_vars`] was given their names
    /// (empty outside flows; a variable not set renders empty).
    pub vars: &'a [String],
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

/// The actions a template may use, for error messages.
const KNOWN: &str = ".vars.NAME (in flow steps), .RequestNumber, .FullyQualifiedName, .MethodName, .ServiceName, .InputName, .OutputName, .IsClientStreaming, .IsServerStreaming, .Timestamp, .TimestampUnix, .TimestampUnixMilli, .TimestampUnixNano, .UUID, .WorkerID, newUUID, randomString N, randomInt MIN MAX";

impl Template {
    /// Parses `text`; `what` names the flag in errors (`-d`, `-m`).
    pub fn parse(text: &str, what: &str) -> Result<Template, TemplateError> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let close = after.find("}}").ok_or_else(|| {
                TemplateError(format!(
                    "{what}: a template action opened with '{{{{' is never closed with '}}}}'"
                ))
            })?;
            pieces.push(parse_action(after[..close].trim(), what)?);
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        Ok(Template { pieces })
    }

    /// Folds the call-describing actions into text.
    pub fn bind(self, call: &CallInfo) -> Template {
        let mut pieces: Vec<Piece> = Vec::with_capacity(self.pieces.len());
        for piece in self.pieces {
            let piece = match piece {
                Piece::Call(field) => Piece::Text(match field {
                    CallField::FullyQualifiedName => call.fully_qualified_name.clone(),
                    CallField::MethodName => call.method_name.clone(),
                    CallField::ServiceName => call.service_name.clone(),
                    CallField::InputName => call.input_name.clone(),
                    CallField::OutputName => call.output_name.clone(),
                    CallField::IsClientStreaming => call.client_streaming.to_string(),
                    CallField::IsServerStreaming => call.server_streaming.to_string(),
                }),
                other => other,
            };
            // Merge neighbouring text, so rendering appends one slice per literal run.
            match (pieces.last_mut(), piece) {
                (Some(Piece::Text(last)), Piece::Text(text)) => last.push_str(&text),
                (_, piece) => pieces.push(piece),
            }
        }
        Template { pieces }
    }

    /// The flow variables (`{{.vars.NAME}}`) the template uses, by name, in order of use.
    pub fn var_names(&self) -> Vec<&str> {
        self.pieces
            .iter()
            .filter_map(|piece| match piece {
                Piece::Var(name) => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Turns each `{{.vars.NAME}}` into NAME's place in `names` (the flow's variables, as
    /// [`CallContext::vars`] will hold their values). A name not in `names` is an error
    /// naming it and the names known.
    pub fn bind_vars(self, names: &[String], what: &str) -> Result<Template, TemplateError> {
        let pieces = self
            .pieces
            .into_iter()
            .map(|piece| match piece {
                Piece::Var(name) => names
                    .iter()
                    .position(|known| *known == name)
                    .map(Piece::VarAt)
                    .ok_or_else(|| {
                        TemplateError(format!(
                            "{what}: {{{{.vars.{name}}}}} is not a variable of this flow (its variables: {})",
                            if names.is_empty() { "none".to_owned() } else { names.join(", ") }
                        ))
                    }),
                other => Ok(other),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Template { pieces })
    }

    /// Whether nothing varies per call (after [`Template::bind`]): then [`Template::text`]
    /// is the whole payload.
    pub fn is_constant(&self) -> bool {
        self.pieces
            .iter()
            .all(|piece| matches!(piece, Piece::Text(_)))
    }

    /// The text of a constant template (every literal, actions left out).
    pub fn text(&self) -> String {
        self.pieces
            .iter()
            .filter_map(|piece| match piece {
                Piece::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Renders one call's text into `out` (cleared first). `random` is the caller's
    /// generator (one per thread: nothing shared on the hot path).
    pub fn render(&self, context: &CallContext<'_>, random: &mut Random, out: &mut String) {
        out.clear();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::RequestNumber => {
                    let _ = write!(out, "{}", context.request_number);
                }
                Piece::WorkerId => out.push_str(context.worker_id),
                Piece::Timestamp => out.push_str(&rfc3339(context.now)),
                Piece::TimestampUnix => {
                    let _ = write!(out, "{}", since_epoch(context.now).as_secs());
                }
                Piece::TimestampUnixMilli => {
                    let _ = write!(out, "{}", since_epoch(context.now).as_millis());
                }
                Piece::TimestampUnixNano => {
                    let _ = write!(out, "{}", since_epoch(context.now).as_nanos());
                }
                Piece::Uuid => Random::new(context.call_seed).uuid_into(out),
                Piece::NewUuid => random.uuid_into(out),
                Piece::RandomString(0) => {
                    let len = random.int_in(2, 17) as usize;
                    random.string_into(len, out)
                }
                Piece::RandomString(len) => random.string_into(*len, out),
                Piece::RandomInt(min, max) => {
                    let _ = write!(out, "{}", random.int_in(*min, *max));
                }
                Piece::VarAt(place) => {
                    if let Some(value) = context.vars.get(*place) {
                        out.push_str(value);
                    }
                }
                // Unbound call fields and variables render empty (callers bind first).
                Piece::Call(_) | Piece::Var(_) => {}
            }
        }
    }
}

fn parse_action(action: &str, what: &str) -> Result<Piece, TemplateError> {
    let mut words = action.split_whitespace();
    let name = words.next().unwrap_or_default();
    let args: Vec<&str> = words.collect();
    let number = |text: &str| -> Result<i64, TemplateError> {
        text.parse::<i64>().map_err(|_| {
            TemplateError(format!(
                "{what}: '{{{{{action}}}}}': '{text}' is not an integer"
            ))
        })
    };
    let piece = match (name, args.as_slice()) {
        (".RequestNumber", []) => Piece::RequestNumber,
        (".WorkerID", []) => Piece::WorkerId,
        (".Timestamp", []) => Piece::Timestamp,
        (".TimestampUnix", []) => Piece::TimestampUnix,
        (".TimestampUnixMilli", []) => Piece::TimestampUnixMilli,
        (".TimestampUnixNano", []) => Piece::TimestampUnixNano,
        (".UUID", []) => Piece::Uuid,
        ("newUUID", []) => Piece::NewUuid,
        (".FullyQualifiedName", []) => Piece::Call(CallField::FullyQualifiedName),
        (".MethodName", []) => Piece::Call(CallField::MethodName),
        (".ServiceName", []) => Piece::Call(CallField::ServiceName),
        (".InputName", []) => Piece::Call(CallField::InputName),
        (".OutputName", []) => Piece::Call(CallField::OutputName),
        (".IsClientStreaming", []) => Piece::Call(CallField::IsClientStreaming),
        (".IsServerStreaming", []) => Piece::Call(CallField::IsServerStreaming),
        (var, []) if var.starts_with(".vars.") => {
            let name = &var[".vars.".len()..];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(TemplateError(format!(
                    "{what}: '{{{{{action}}}}}': a flow variable is .vars.NAME, NAME letters, digits and '_'"
                )));
            }
            Piece::Var(name.to_owned())
        }
        ("randomString", [len]) => {
            // ghz: a length of 0 or less is drawn from 2 to 16.
            let len = number(len)?.max(0);
            if len > 1 << 20 {
                return Err(TemplateError(format!(
                    "{what}: '{{{{{action}}}}}': the length must be at most 1048576"
                )));
            }
            Piece::RandomString(len as usize)
        }
        ("randomInt", [min, max]) => {
            let (min, max) = (number(min)?, number(max)?);
            if min >= max {
                return Err(TemplateError(format!(
                    "{what}: '{{{{{action}}}}}': randomInt MIN MAX needs MIN < MAX (MAX is excluded, as in ghz)"
                )));
            }
            Piece::RandomInt(min, max)
        }
        _ => {
            return Err(TemplateError(format!(
                "{what}: unknown template action '{{{{{action}}}}}'; known: {KNOWN}"
            )))
        }
    };
    Ok(piece)
}

fn since_epoch(now: SystemTime) -> std::time::Duration {
    now.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// `now` as RFC 3339 in UTC, to the second (Go's `time.RFC3339`).
fn rfc3339(now: SystemTime) -> String {
    let secs = since_epoch(now).as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A small, fast generator for template values (xorshift64*): not for secrets.
#[derive(Debug, Clone)]
pub struct Random(u64);

impl Random {
    /// A generator seeded from `seed` (any value; 0 is replaced).
    pub fn new(seed: u64) -> Random {
        Random(seed.max(1) ^ 0x9e37_79b9_7f4a_7c15)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// An integer in `[min, max)`.
    pub fn int_in(&mut self, min: i64, max: i64) -> i64 {
        let span = max.wrapping_sub(min) as u64;
        min.wrapping_add((self.next() % span.max(1)) as i64)
    }

    /// `len` random letters and digits.
    pub fn string_into(&mut self, len: usize, out: &mut String) {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        for _ in 0..len {
            out.push(ALPHABET[(self.next() % ALPHABET.len() as u64) as usize] as char);
        }
    }

    /// A random (version 4) UUID in its usual text form.
    pub fn uuid_into(&mut self, out: &mut String) {
        let (high, low) = (self.next(), self.next());
        let high = (high & !0xf000) | 0x4000; // version 4
        let low = (low & !(0xc << 60)) | (0x8 << 60); // variant 10
                                                      // 8-4-4-4-12 hex digits, written by hand: `write!` with widths costs several times
                                                      // more, and a per-call request id is on every call's path.
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 36];
        let mut at = 0;
        for (word, range) in [(high, 0..16), (low, 16..32)] {
            for digit in range {
                if matches!(digit, 8 | 12 | 16 | 20) {
                    text[at] = b'-';
                    at += 1;
                }
                let shift = 60 - 4 * (digit % 16);
                text[at] = HEX[((word >> shift) & 0xf) as usize];
                at += 1;
            }
        }
        out.push_str(std::str::from_utf8(&text).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> CallInfo {
        CallInfo {
            fully_qualified_name: "helloworld.Greeter.SayHello".into(),
            method_name: "SayHello".into(),
            service_name: "helloworld.Greeter".into(),
            input_name: "helloworld.HelloRequest".into(),
            output_name: "helloworld.HelloReply".into(),
            client_streaming: false,
            server_streaming: false,
        }
    }

    #[test]
    fn call_fields_fold_and_per_call_values_render() {
        let template = Template::parse(
            r#"{"name": "{{.MethodName}} of {{ .ServiceName }}", "n": {{.RequestNumber}}, "w": "{{.WorkerID}}"}"#,
            "-d",
        )
        .unwrap()
        .bind(&call());
        assert!(!template.is_constant());
        let mut out = String::new();
        let mut random = Random::new(7);
        let context = CallContext {
            request_number: 41,
            worker_id: "w3",
            call_seed: 5,
            now: UNIX_EPOCH + std::time::Duration::from_secs(1_764_547_200),
            vars: &[],
        };
        template.render(&context, &mut random, &mut out);
        assert_eq!(
            out,
            r#"{"name": "SayHello of helloworld.Greeter", "n": 41, "w": "w3"}"#
        );
        let constant = Template::parse("{{.FullyQualifiedName}} {{.IsClientStreaming}}", "-m")
            .unwrap()
            .bind(&call());
        assert!(constant.is_constant());
        assert_eq!(constant.text(), "helloworld.Greeter.SayHello false");
    }

    #[test]
    fn flow_variables_render_from_their_places_once_bound() {
        let template = Template::parse(
            r#"{"token": "{{ .vars.token }}", "n": {{.RequestNumber}}, "r": "{{.vars.region}}"}"#,
            "data",
        )
        .unwrap();
        assert_eq!(template.var_names(), ["token", "region"]);
        let names = ["region".to_owned(), "token".to_owned(), "unused".to_owned()];
        let bound = template.clone().bind_vars(&names, "data").unwrap();
        let values = ["eu".to_owned(), "tok.a.1".to_owned(), String::new()];
        let context = CallContext {
            request_number: 3,
            worker_id: "",
            call_seed: 1,
            now: UNIX_EPOCH,
            vars: &values,
        };
        let mut out = String::new();
        bound.render(&context, &mut Random::new(1), &mut out);
        assert_eq!(out, r#"{"token": "tok.a.1", "n": 3, "r": "eu"}"#);
        // Unset values (a flow that went on after a failed step) render empty.
        bound.render(
            &CallContext {
                vars: &[],
                ..context
            },
            &mut Random::new(1),
            &mut out,
        );
        assert_eq!(out, r#"{"token": "", "n": 3, "r": ""}"#);
        let error = template
            .bind_vars(&names[..1], "data")
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "data: {{.vars.token}} is not a variable of this flow (its variables: region)"
        );
        let error = Template::parse("{{.vars.}}", "-d").unwrap_err().to_string();
        assert!(error.contains("a flow variable is .vars.NAME"), "{error}");
    }

    #[test]
    fn timestamps_randoms_and_uuids_have_their_shapes() {
        let at = UNIX_EPOCH + std::time::Duration::new(1_764_547_200, 123_456_789);
        let context = CallContext {
            request_number: 0,
            worker_id: "",
            call_seed: 9,
            now: at,
            vars: &[],
        };
        let mut random = Random::new(1);
        let mut out = String::new();
        let render = |text: &str, random: &mut Random, out: &mut String| {
            Template::parse(text, "-d")
                .unwrap()
                .render(&context, random, out);
        };
        render("{{.Timestamp}}", &mut random, &mut out);
        assert_eq!(out, "2025-12-01T00:00:00Z");
        render(
            "{{.TimestampUnix}} {{.TimestampUnixMilli}} {{.TimestampUnixNano}}",
            &mut random,
            &mut out,
        );
        assert_eq!(out, "1764547200 1764547200123 1764547200123456789");
        for _ in 0..1000 {
            render("{{randomInt 5 8}}", &mut random, &mut out);
            let value: i64 = out.parse().unwrap();
            assert!((5..8).contains(&value), "{value}");
            render("{{randomString 12}}", &mut random, &mut out);
            assert_eq!(out.len(), 12);
            assert!(out.bytes().all(|b| b.is_ascii_alphanumeric()));
        }
        for _ in 0..1000 {
            // ghz: `randomString 0` (or less) is 2 to 16 characters.
            for zero in ["{{randomString 0}}", "{{randomString -3}}"] {
                render(zero, &mut random, &mut out);
                assert!((2..=16).contains(&out.len()), "{out:?}");
            }
        }
        // `.UUID` is the call's: the same at every use in a call; `newUUID` is fresh each time.
        render(
            "{{.UUID}} {{.UUID}} {{newUUID}} {{newUUID}}",
            &mut random,
            &mut out,
        );
        let uuids: Vec<&str> = out.split(' ').collect();
        assert_eq!(uuids[0], uuids[1], "{out}");
        assert!(uuids[2] != uuids[3] && uuids[2] != uuids[0], "{out}");
        assert_eq!(uuids[2].len(), 36);
        render("{{.UUID}}", &mut random, &mut out);
        let parts: Vec<&str> = out.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'), "{out}");
        assert!(
            matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'),
            "{out}"
        );
        // The hand-written digits are the 128 bits in order: compare with `format!` of the
        // same two words from a generator in the same state.
        for seed in 1..200 {
            let (mut a, mut b) = (Random::new(seed), Random::new(seed));
            let mut text = String::new();
            a.uuid_into(&mut text);
            let (high, low) = (b.next(), b.next());
            let high = (high & !0xf000) | 0x4000;
            let low = (low & !(0xc << 60)) | (0x8 << 60);
            let expected = format!(
                "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                high >> 32,
                (high >> 16) & 0xffff,
                high & 0xffff,
                low >> 48,
                low & 0xffff_ffff_ffff
            );
            assert_eq!(text, expected);
        }
    }

    #[test]
    fn bad_templates_name_the_action_and_the_flag() {
        for (text, needle) in [
            ("{{.Nope}}", "unknown template action '{{.Nope}}'"),
            ("{{randomInt 5}}", "unknown template action"),
            ("{{randomInt 9 1}}", "MIN < MAX"),
            ("{{randomString x}}", "'x' is not an integer"),
            ("{{.RequestNumber", "never closed"),
        ] {
            let err = Template::parse(text, "-d").unwrap_err().to_string();
            assert!(
                err.starts_with("-d: ") && err.contains(needle),
                "{text}: {err}"
            );
        }
    }
}
