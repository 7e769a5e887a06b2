//! Durations as flags and environment variables spell them: `20s`, `500ms`, `1m30s`, `2h`.
//! A bare number is refused rather than guessed at (seconds? milliseconds?).

use std::time::Duration;

/// The longest duration any setting takes: a year. Longer ones are typing mistakes, and
/// adding them to a clock reading could overflow it.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a human duration such as `20s`, `500ms` or `1m30s`, at most [`MAX_DURATION`].
///
/// The error says what was wrong and shows valid spellings, ready to print after the flag name.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = parse_any_duration(text)?;
    if duration > MAX_DURATION {
        return Err(format!(
            "'{}' is longer than a year; write a shorter duration such as '20s' or '2h'",
            text.trim()
        ));
    }
    Ok(duration)
}

fn parse_any_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') && text.len() > 1 {
        return Err(format!(
            "'{text}' is negative; a duration is 0 or more, e.g. '20s' or '500ms'"
        ));
    }
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "'{text}' has no unit; write e.g. '{text}s' or '{text}ms'"
        ));
    }
    humantime::parse_duration(text).map_err(|err| {
        format!("'{text}' is not a duration ({err}); write e.g. '20s', '500ms' or '1m30s'")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_spellings() {
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
    }

    #[test]
    fn refuses_bare_numbers_and_garbage() {
        assert!(parse_duration("20").unwrap_err().contains("no unit"));
        assert!(parse_duration("fast")
            .unwrap_err()
            .contains("not a duration"));
        assert!(parse_duration("100000000000000h")
            .unwrap_err()
            .contains("longer than a year"));
        assert!(parse_duration("365days").is_ok());
    }
}
