//! A workload entry's `retry` or `hedging`: gRPC's service config `retryPolicy` and
//! `hedgingPolicy` (gRFC A6), with their own names, read and checked into the engine's
//! [`RetryPolicy`] and [`HedgingPolicy`]:
//!
//! ```toml
//! retry = { maxAttempts = 3, initialBackoff = "0.01s", maxBackoff = "0.1s",
//!           backoffMultiplier = 2, retryableStatusCodes = ["UNAVAILABLE"] }
//! hedging = { maxAttempts = 3, hedgingDelay = "0.05s", nonFatalStatusCodes = ["UNAVAILABLE"] }
//! ```
//!
//! Durations as the service config writes them (`"0.01s"`), or as grpclab's flags do
//! (`"10ms"`); statuses by the spec's names (`UNAVAILABLE`), ghz's (`Unavailable`) or number.

use grpclab_core::{Code, InputError};
use grpclab_load::retry::{HedgingPolicy, RetryPolicy};
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

/// A workload entry's `hedging`: gRPC's service config `hedgingPolicy`, as written.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HedgingEntry {
    max_attempts: i64,
    hedging_delay: String,
    #[serde(default)]
    non_fatal_status_codes: Vec<toml::Value>,
}

/// `entry` checked (`what` names the file and the call in errors).
pub fn retry_policy(entry: RetryEntry, what: &str) -> Result<RetryPolicy, InputError> {
    let fail = |reason: String| InputError(format!("{what}: retry: {reason}"));
    let max_attempts = grpclab_load::retry::max_attempts(entry.max_attempts).map_err(fail)?;
    let policy = RetryPolicy {
        max_attempts,
        initial_backoff: duration(&entry.initial_backoff, "initialBackoff", false).map_err(fail)?,
        max_backoff: duration(&entry.max_backoff, "maxBackoff", false).map_err(fail)?,
        backoff_multiplier: entry.backoff_multiplier,
        retryable: statuses(&entry.retryable_status_codes, "retryableStatusCodes").map_err(fail)?,
    };
    policy.check().map_err(fail)?;
    Ok(policy)
}

/// `entry` checked (`what` names the file and the call in errors).
pub fn hedging_policy(entry: HedgingEntry, what: &str) -> Result<HedgingPolicy, InputError> {
    let fail = |reason: String| InputError(format!("{what}: hedging: {reason}"));
    let policy = HedgingPolicy {
        max_attempts: grpclab_load::retry::max_attempts(entry.max_attempts).map_err(fail)?,
        hedging_delay: duration(&entry.hedging_delay, "hedgingDelay", true).map_err(fail)?,
        non_fatal: statuses(&entry.non_fatal_status_codes, "nonFatalStatusCodes").map_err(fail)?,
    };
    policy.check().map_err(fail)?;
    Ok(policy)
}

/// Statuses by name or number (`field` names them in errors).
fn statuses(values: &[toml::Value], field: &str) -> Result<Vec<Code>, String> {
    values
        .iter()
        .map(|value| {
            crate::status::status_named(value).ok_or_else(|| {
                format!("{field}: '{value}' is no status; give names such as \"UNAVAILABLE\"")
            })
        })
        .collect()
}

/// A duration: `"0.01s"` (the service config's form) or `"10ms"`; above 0 unless `zero`
/// may be given.
fn duration(text: &str, field: &str, zero: bool) -> Result<Duration, String> {
    let seconds = text
        .strip_suffix('s')
        .and_then(|number| number.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64);
    match seconds.or_else(|| humantime::parse_duration(text).ok()) {
        Some(duration) if zero || !duration.is_zero() => Ok(duration),
        _ => Err(format!(
            "{field} is '{text}'; give a duration{} such as \"0.01s\" or \"10ms\"",
            if zero { "" } else { " above 0" }
        )),
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

    fn hedging(text: &str) -> HedgingEntry {
        toml::from_str(text).expect("an entry")
    }

    #[test]
    fn a_hedging_policy_is_read_with_a_zero_delay_and_no_non_fatal_codes() {
        let policy = hedging_policy(
            hedging("maxAttempts = 3\nhedgingDelay = \"0.05s\"\nnonFatalStatusCodes = [\"UNAVAILABLE\"]\n"),
            "w",
        )
        .unwrap();
        assert_eq!(policy.max_attempts, 3);
        assert_eq!(policy.hedging_delay, Duration::from_millis(50));
        assert_eq!(policy.non_fatal, [Code::Unavailable]);
        let at_once =
            hedging_policy(hedging("maxAttempts = 2\nhedgingDelay = \"0s\"\n"), "w").unwrap();
        assert_eq!(
            at_once.hedging_delay,
            Duration::ZERO,
            "all attempts at once"
        );
        assert!(at_once.non_fatal.is_empty());
    }

    #[test]
    fn each_bad_hedging_field_is_one_line_naming_it() {
        for (text, says) in [
            (
                "maxAttempts = 1\nhedgingDelay = \"1s\"\n",
                "maxAttempts is 1",
            ),
            (
                "maxAttempts = 2\nhedgingDelay = \"later\"\n",
                "hedgingDelay is 'later'",
            ),
            (
                "maxAttempts = 2\nhedgingDelay = \"1s\"\nnonFatalStatusCodes = [\"OK\"]\n",
                "nonFatalStatusCodes cannot hold OK",
            ),
            (
                "maxAttempts = 2\nhedgingDelay = \"1s\"\nnonFatalStatusCodes = [\"SOON\"]\n",
                "'\"SOON\"' is no status",
            ),
        ] {
            let err = hedging_policy(hedging(text), "--workload w.toml").unwrap_err();
            assert!(err.0.starts_with("--workload w.toml: hedging: "), "{err}");
            assert!(err.0.contains(says), "{text}: {err}");
        }
    }
}
