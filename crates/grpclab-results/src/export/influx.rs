//! ghz's InfluxDB line protocol outputs (printer/influx.go): `-O influx-summary`, one
//! `ghz_run` line for the run, and `-O influx-details`, one `ghz_detail` line per call listed
//! (`--details`; this format turns it on, as `-O csv` does). Tags and fields carry ghz's names
//! and units: integers in nanoseconds, `rps` with two decimals, timestamps in Unix nanoseconds.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Exporter, RenderError};
use crate::model::Report;
use crate::model::{JsonOptions, JsonReport};

/// `-O influx-summary`.
pub struct InfluxSummaryExporter;

/// `-O influx-details`.
pub struct InfluxDetailsExporter;

impl Exporter for InfluxSummaryExporter {
    fn render(&self, report: &Report) -> Result<Vec<u8>, RenderError> {
        let json = JsonReport::from_report(report);
        let ended = report.result.started_at + report.result.elapsed;
        let mut fields = vec![
            format!("count={}", json.count),
            format!("total={}", json.total),
            format!("average={}", json.average),
            format!("fastest={}", json.fastest),
            format!("slowest={}", json.slowest),
            format!("rps={:.2}", json.rps),
        ];
        for point in &json.latency_distribution {
            match point.percentage {
                50 => fields.push(format!("median={}", point.latency)),
                95 => fields.push(format!("p95={}", point.latency)),
                _ => {}
            }
        }
        fields.push(format!("errors={}", error_count(&json)));
        // ghz writes this line without a newline at the end; one is added so shells and
        // files end cleanly (line protocol ignores it).
        let line = format!(
            "ghz_run,{} {} {}\n",
            tags(&json, true),
            fields.join(","),
            unix_nanos(ended)
        );
        Ok(line.into_bytes())
    }
}

impl Exporter for InfluxDetailsExporter {
    fn render(&self, report: &Report) -> Result<Vec<u8>, RenderError> {
        let json = JsonReport::from_report(report);
        let common = tags(&json, false);
        let mut out = String::new();
        if let Some(log) = report.result.details() {
            for call in &log.calls {
                let error = call.error.as_deref().unwrap_or_default();
                let _ = writeln!(
                    out,
                    "ghz_detail,{common},hasError={} latency={},error=\"{}\",status=\"{}\" {}",
                    !error.is_empty(),
                    call.latency_ns,
                    clean(error),
                    call.code.name(),
                    unix_nanos(report.result.started_at + Duration::from_nanos(call.ended_ns))
                );
            }
        }
        Ok(out.into_bytes())
    }
}

fn error_count(json: &JsonReport) -> u64 {
    json.error_distribution.values().sum()
}

/// ghz's tags, in its order.
fn tags(json: &JsonReport, with_errors: bool) -> String {
    let options: &JsonOptions = &json.options;
    let mut tags = Vec::new();
    if !json.name.trim().is_empty() {
        tags.push(format!("name=\"{}\"", clean(json.name.trim())));
    }
    if !options.proto.is_empty() {
        tags.push(format!("proto=\"{}\"", options.proto));
    } else if !options.protoset.is_empty() {
        tags.push(format!("Protoset=\"{}\"", options.protoset));
    }
    tags.push(format!("call=\"{}\"", options.call));
    tags.push(format!("host=\"{}\"", options.host));
    tags.push(format!("n={}", options.total));
    tags.push(format!("c={}", options.concurrency));
    if options.load_schedule == "const" {
        tags.push(format!("rps={}", options.rps));
    } else {
        tags.push(format!("load-schedule={}", options.load_schedule));
        tags.push(format!("load-start={}", options.load_start));
        tags.push(format!("load-end={}", options.load_end));
        tags.push(format!("load-step={}", options.load_step));
        tags.push(format!(
            "load-step-duration={}",
            go_duration(options.load_step_duration)
        ));
        tags.push(format!(
            "load-max-duration={}",
            go_duration(options.load_max_duration)
        ));
    }
    tags.push(format!("z={}", options.duration));
    tags.push(format!("timeout={}", seconds(options.timeout)));
    tags.push(format!("dial_timeout={}", seconds(options.dial_timeout)));
    tags.push(format!("keepalive={}", seconds(options.keepalive)));
    // ghz marshals data, metadata and tags to JSON, then that text again as a JSON string.
    let quoted = |value: &serde_json::Value| {
        serde_json::to_string(&value.to_string()).unwrap_or_else(|_| "\"\"".to_owned())
    };
    let data = quoted(&options.data);
    tags.push(format!("data={}", clean(&data)));
    let metadata = options.metadata.as_ref().map_or_else(
        || "\"\"".to_owned(),
        |map| clean(&quoted(&serde_json::to_value(map).unwrap_or_default())),
    );
    tags.push(format!("metadata={metadata}"));
    let call_tags = if json.tags.is_empty() {
        "\"\"".to_owned()
    } else {
        clean(&quoted(
            &serde_json::to_value(&json.tags).unwrap_or_default(),
        ))
    };
    tags.push(format!("tags={call_tags}"));
    if with_errors {
        let errors = error_count(json);
        tags.push(format!("errors={errors}"));
        tags.push(format!("has_errors={}", errors > 0));
    }
    tags.join(",")
}

/// A Go `time.Duration` held in nanoseconds, as `Seconds()` prints it.
fn seconds(nanos: u64) -> String {
    let value = nanos as f64 / 1e9;
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

/// Go's `time.Duration` text (`5s`, `1m30s`, `250ms`, `0s`), as ghz's `%v` prints it.
pub(crate) fn go_duration(nanos: u64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let trim = |value: f64| {
        let text = format!("{value:.9}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    };
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", trim(nanos as f64 / 1e3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", trim(nanos as f64 / 1e6));
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = nanos % 3_600_000_000_000 / 60_000_000_000;
    let secs = trim((nanos % 60_000_000_000) as f64 / 1e9);
    match (hours, minutes) {
        (0, 0) => format!("{secs}s"),
        (0, m) => format!("{m}m{secs}s"),
        (h, m) => format!("{h}h{m}m{secs}s"),
    }
}

/// ghz's cleanInfluxString: spaces, commas and equals signs escaped.
fn clean(text: &str) -> String {
    text.replace(' ', "\\ ")
        .replace(',', "\\,")
        .replace('=', "\\=")
}

fn unix_nanos(at: SystemTime) -> u128 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(5_000_000_000), "5s");
        assert_eq!(go_duration(90_000_000_000), "1m30s");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(250_000_000), "250ms");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
    }

    #[test]
    fn influx_strings_are_escaped() {
        assert_eq!(clean("a b,c=d"), "a\\ b\\,c\\=d");
    }
}
