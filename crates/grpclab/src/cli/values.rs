//! Flag values: each parser takes what a user typed and gives the typed value, or one line
//! saying what the flag takes. clap calls them (`value_parser = ...` in `args.rs`) so that a
//! bad value is refused by the flag's name before any command runs.

pub(super) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    grpclab_core::duration::parse_duration(text)
}

pub(super) fn parse_duration_or_zero(text: &str) -> Result<std::time::Duration, String> {
    if text.trim() == "0" {
        return Ok(std::time::Duration::ZERO);
    }
    parse_duration(text)
}

/// The most streams a run keeps at once (`-c`, and `--connections` within it): the engine's
/// own bound, which its concurrency schedules already kept to.
const MAX_STREAMS: u64 = grpclab_load::MAX_SCHEDULED_STREAMS as u64;

/// A whole number from `min` to `max`. Values starting with '-' reach here (the flags allow
/// them), so `-n -5` is told what it may be instead of being taken for a flag.
pub(super) fn whole_number(text: &str, min: u64, max: u64) -> Result<u64, String> {
    let trimmed = text.trim();
    let range = if max == u64::MAX {
        format!("a whole number, at least {min}")
    } else {
        format!("a whole number from {min} to {max}")
    };
    let value: u64 = match trimmed.parse::<i128>() {
        Ok(value) if value < min as i128 => return Err(format!("must be {range}")),
        Ok(value) if value > max as i128 => {
            return Err(format!("must be {range}; {trimmed} is more"))
        }
        Ok(value) => value as u64,
        Err(_) => return Err(format!("must be {range}")),
    };
    Ok(value)
}

/// `-c`, `--connections`, `--concurrency-start`/`-end` (streams).
pub(super) fn parse_streams(text: &str) -> Result<usize, String> {
    whole_number(text, 1, MAX_STREAMS).map(|n| n as usize)
}

/// `--concurrency-start` and `--concurrency-end`: 0 allowed (a schedule may start idle).
pub(super) fn parse_streams_or_zero(text: &str) -> Result<usize, String> {
    whole_number(text, 0, MAX_STREAMS).map(|n| n as usize)
}

/// `-n`: at least one call.
pub(super) fn parse_calls(text: &str) -> Result<u64, String> {
    whole_number(text, 1, u64::MAX)
}

/// `--skipFirst` (0 allowed).
pub(super) fn parse_calls_or_zero(text: &str) -> Result<u64, String> {
    whole_number(text, 0, u64::MAX)
}

/// `--stream-call-count` and `--cpus`: at least one.
pub(super) fn parse_at_least_one(text: &str) -> Result<usize, String> {
    whole_number(text, 1, usize::MAX as u64).map(|n| n as usize)
}

/// `--details=N`: calls kept in memory, each about a hundred bytes: a billion at most.
pub(super) fn parse_details(text: &str) -> Result<usize, String> {
    whole_number(text, 0, 1_000_000_000).map(|n| n as usize)
}

/// A rate in requests per second: a finite number, at least `min` (`-r 0` is a closed loop).
pub(super) fn rate(text: &str, min: f64) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(value) if value.is_finite() && value >= min && value <= 1e9 => Ok(value),
        Ok(value) if value.is_finite() && value > 1e9 => {
            Err("must be a rate in requests per second, at most 1e9".to_owned())
        }
        _ if min == 0.0 => Err(
            "must be a rate in requests per second, 0 or more (0: as fast as the streams go)"
                .to_owned(),
        ),
        _ => Err("must be a rate in requests per second, above 0".to_owned()),
    }
}

/// `-r/--rps`.
pub(super) fn parse_rps(text: &str) -> Result<f64, String> {
    rate(text, 0.0)
}

/// `--load-start` and `--load-end`: above 0.
pub(super) fn parse_positive_rate(text: &str) -> Result<f64, String> {
    rate(text, f64::MIN_POSITIVE)
}

/// `--load-step`: any finite change, up to 1e9 either way.
pub(super) fn parse_rate_change(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(value) if value.is_finite() && value.abs() <= 1e9 => Ok(value),
        _ => Err("must be a change in requests per second, e.g. 100 or -100".to_owned()),
    }
}

/// `--concurrency-step`: a change in streams, up to the stream bound either way.
pub(super) fn parse_streams_change(text: &str) -> Result<i64, String> {
    match text.trim().parse::<i64>() {
        Ok(value) if value.unsigned_abs() <= MAX_STREAMS => Ok(value),
        _ => Err(format!(
            "must be a whole change in streams from -{MAX_STREAMS} to {MAX_STREAMS}, e.g. 10 or -10"
        )),
    }
}

/// A size as ghz takes it (go-humanize's ParseBytes): bytes, or a number with a unit, decimal
/// (`kB`, `MB`, `GB`) or binary (`KiB`, `MiB`, `GiB`), a space allowed between.
pub(super) fn parse_byte_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a size; give bytes, or e.g. 4MiB or 42 MB"))?;
    let multiplier: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "ki" | "kib" => 1024.0,
        "mi" | "mib" => 1024.0 * 1024.0,
        "gi" | "gib" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "unknown size unit '{other}' in '{text}'; use B, kB, MB, GB, KiB, MiB or GiB"
            ))
        }
    };
    let bytes = number * multiplier;
    if !(1.0..=usize::MAX as f64).contains(&bytes) {
        return Err(format!("'{text}' is not a usable size (at least 1 byte)"));
    }
    Ok(bytes as usize)
}

/// `--shard I/N`.
pub(super) fn parse_shard(text: &str) -> Result<grpclab_load::Shard, String> {
    grpclab_load::Shard::parse(text)
}

/// `--start-at`: RFC 3339 (a zone required: `Z` or an offset is not guessed) or Unix seconds
/// (fractions allowed).
pub(super) fn parse_start_at(text: &str) -> Result<std::time::SystemTime, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        if seconds.is_finite() && seconds >= 0.0 {
            return Ok(std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(seconds));
        }
    }
    humantime::parse_rfc3339_weak(text)
        .ok()
        .filter(|_| text.ends_with('Z') || text.ends_with('z'))
        .or_else(|| parse_rfc3339_with_offset(text))
        .ok_or_else(|| {
            format!("'{text}' is not a time: give RFC 3339 in UTC (2026-12-02T10:00:00Z) or Unix seconds (e.g. $(date -d +30sec +%s))")
        })
}

/// RFC 3339 with a numeric offset (`+01:00`), which humantime does not read: the offset is
/// taken off by hand.
pub(super) fn parse_rfc3339_with_offset(text: &str) -> Option<std::time::SystemTime> {
    let (stamp, sign, offset) = match text.rfind(['+', '-']) {
        Some(at) if at > 10 => (&text[..at], &text[at..at + 1], &text[at + 1..]),
        _ => return None,
    };
    let (hours, minutes) = offset.split_once(':')?;
    let offset = std::time::Duration::from_secs(
        hours.parse::<u64>().ok()? * 3600 + minutes.parse::<u64>().ok()? * 60,
    );
    let local = humantime::parse_rfc3339_weak(stamp).ok()?;
    if sign == "+" {
        local.checked_sub(offset)
    } else {
        local.checked_add(offset)
    }
}

/// --precision: a fraction from 0.01 to 0.5.
pub(super) fn parse_precision(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.01..=0.5).contains(&value) => Ok(value),
        _ => Err(format!(
            "'{text}' is not a fraction from 0.01 to 0.5 (0.05: the capacity known to 5 %)"
        )),
    }
}

/// `--network SPEC`: `lo`, or the link's settings (see `grpclab_net::NetworkSpec::parse`).
pub fn parse_network(text: &str) -> Result<grpclab_net::NetworkSpec, String> {
    grpclab_net::NetworkSpec::parse_reason(text)
}
