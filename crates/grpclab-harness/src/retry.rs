//! A workload entry's `retry`: gRPC's service config `retryPolicy` (gRFC A6), with its own
//! names, read and checked into the engine's [`RetryPolicy`]:
//!
//! ```toml
//! retry = { maxAttempts = 3, initialBackoff = "0.01s", maxBackoff = "0.1s",
//!           backoffMultiplier = 2, retryableStatusCodes = ["UNAVAILABLE"] }
//! ```
//!
//! Durations as the service config writes them (`"0.01s"`), or as grpclab's flags do
//! (`"10ms"`); statuses by the spec's names (`UNAVAILABLE`), ghz's (`Unavailable`) or number.

use grpclab_core::{Code, InputError};
use grpclab_load::retry::RetryPolicy;
use std::time::Duration;

/// The entry as written.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetryEntry {
    max_attempts: i64,
    initial_backoff: String,
    max_backoff: String,
    backoff_multiplier: f64,
    retryable_status_codes: Vec<toml::Value>,
}

/// `entry` checked (`what` names the file and the call in errors).
pub fn retry_policy(entry: RetryEntry, what: &str) -> Result<RetryPolicy, InputError> {
    let fail = |reason: String| Err(InputError(format!("{what}: retry: {reason}")));
    let max_attempts = match u32::try_from(entry.max_attempts) {
        Ok(n) if n >= 2 => n.min(5),
        _ => return fail(format!("maxAttempts is {}; give 2 to 5 (attempts in all, the first included; gRPC caps more at 5)", entry.max_attempts)),
    };
    let initial_backoff = duration(&entry.initial_backoff, "initialBackoff", what)?;
    let max_backoff = duration(&entry.max_backoff, "maxBackoff", what)?;
    if !(entry.backoff_multiplier > 0.0 && entry.backoff_multiplier.is_finite()) {
        return fail(format!(
            "backoffMultiplier is {}; give a number above 0, e.g. 2",
            entry.backoff_multiplier
        ));
    }
    let mut retryable = Vec::new();
    for value in &entry.retryable_status_codes {
        let code = crate::flow::status_named(value);
        match code {
            Some(Code::Ok) => return fail("retryableStatusCodes cannot hold OK".to_owned()),
            Some(code) => retryable.push(code),
            None => {
                return fail(format!(
                "retryableStatusCodes: '{value}' is no status; give names such as \"UNAVAILABLE\""
            ))
            }
        }
    }
    if retryable.is_empty() {
        return fail(
            "retryableStatusCodes is empty; name at least one status, e.g. [\"UNAVAILABLE\"]"
                .to_owned(),
        );
    }
    Ok(RetryPolicy {
        max_attempts,
        initial_backoff,
        max_backoff,
        backoff_multiplier: entry.backoff_multiplier,
        retryable,
    })
}

/// A backoff: `"0.01s"` (the service config's form) or `"10ms"`; above 0.
fn duration(text: &str, field: &str, what: &str) -> Result<Duration, InputError> {
    let seconds = text
        .strip_suffix('s')
        .and_then(|number| number.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64);
    match seconds.or_else(|| humantime::parse_duration(text).ok()) {
        Some(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(InputError(format!(
            "{what}: retry: {field} is '{text}'; give a duration above 0 such as \"0.01s\" or \"10ms\""
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> RetryEntry {
        toml::from_str(text).expect("an entry")
    }

    const GOOD: &str = "maxAttempts = 3\ninitialBackoff = \"0.01s\"\nmaxBackoff = \"100ms\"\nbackoffMultiplier = 2\nretryableStatusCodes = [\"UNAVAILABLE\", \"ResourceExhausted\", 4]\n";

    #[test]
    fn the_service_configs_names_and_forms_are_read() {
        let policy = retry_policy(entry(GOOD), "w").unwrap();
        assert_eq!(policy.max_attempts, 3);
        assert_eq!(policy.initial_backoff, Duration::from_millis(10));
        assert_eq!(policy.max_backoff, Duration::from_millis(100));
        assert_eq!(
            policy.retryable,
            [
                Code::Unavailable,
                Code::ResourceExhausted,
                Code::DeadlineExceeded
            ]
        );
        let capped = retry_policy(entry(&GOOD.replace("= 3", "= 9")), "w").unwrap();
        assert_eq!(capped.max_attempts, 5, "gRPC caps maxAttempts at 5");
    }

    #[test]
    fn each_bad_field_is_one_line_naming_it() {
        for (from, to, says) in [
            ("maxAttempts = 3", "maxAttempts = 1", "maxAttempts is 1"),
            ("\"0.01s\"", "\"soon\"", "initialBackoff is 'soon'"),
            ("\"100ms\"", "\"0s\"", "maxBackoff is '0s'"),
            (
                "backoffMultiplier = 2",
                "backoffMultiplier = 0",
                "backoffMultiplier is 0",
            ),
            ("\"UNAVAILABLE\", ", "\"OK\", ", "cannot hold OK"),
            ("4]", "\"NOPE\"]", "'\"NOPE\"' is no status"),
        ] {
            let err =
                retry_policy(entry(&GOOD.replace(from, to)), "--workload w.toml").unwrap_err();
            assert!(err.0.starts_with("--workload w.toml: retry: "), "{err}");
            assert!(err.0.contains(says), "{to}: {err}");
        }
    }
}
