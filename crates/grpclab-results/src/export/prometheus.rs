//! ghz's Prometheus text exposition output (printer/prometheus.go), `-O prometheus`: gauges
//! `ghz_run_count`, `_total`, `_average`, `_fastest`, `_slowest`, `_rps` and `_errors`, the
//! latency histogram `ghz_run_histogram` (ghz's 11 marks, in seconds) and the summary
//! `ghz_run_latency` (ghz's seven percentiles, in nanoseconds), each labelled with the run's
//! `name`, `end_reason` and options. One deliberate difference: the histogram's buckets are
//! cumulative, as Prometheus defines them (ghz writes each mark's own count there).

use std::fmt::Write as _;

use super::{Exporter, RenderError};
use crate::model::JsonReport;
use crate::model::Report;

/// `-O prometheus`.
pub struct PrometheusExporter;

impl Exporter for PrometheusExporter {
    fn render(&self, report: &Report) -> Result<Vec<u8>, RenderError> {
        let json = JsonReport::from_report(report);
        let labels = labels(&json);
        let mut out = String::new();
        let errors: u64 = json.error_distribution.values().sum();
        for (name, value) in [
            ("ghz_run_count", json.count as f64),
            ("ghz_run_total", json.total as f64),
            ("ghz_run_average", json.average as f64),
            ("ghz_run_fastest", json.fastest as f64),
            ("ghz_run_slowest", json.slowest as f64),
            ("ghz_run_rps", json.rps),
        ] {
            gauge(&mut out, name, &labels, value);
        }
        let _ = writeln!(out, "# TYPE ghz_run_histogram histogram");
        let mut cumulative = 0u64;
        for bucket in &json.histogram {
            cumulative += bucket.count;
            let _ = writeln!(
                out,
                "ghz_run_histogram_bucket{{{labels},le=\"{}\"}} {cumulative}",
                bucket.mark
            );
        }
        let _ = writeln!(
            out,
            "ghz_run_histogram_bucket{{{labels},le=\"+Inf\"}} {}",
            json.count
        );
        let _ = writeln!(out, "ghz_run_histogram_sum{{{labels}}} {}", json.total);
        let _ = writeln!(out, "ghz_run_histogram_count{{{labels}}} {}", json.count);
        let _ = writeln!(out, "# TYPE ghz_run_latency summary");
        for point in &json.latency_distribution {
            let _ = writeln!(
                out,
                "ghz_run_latency{{{labels},quantile=\"{}\"}} {}",
                f64::from(point.percentage) / 100.0,
                point.latency
            );
        }
        let _ = writeln!(out, "ghz_run_latency_sum{{{labels}}} {}", json.total);
        let _ = writeln!(out, "ghz_run_latency_count{{{labels}}} {}", json.count);
        gauge(&mut out, "ghz_run_errors", &labels, errors as f64);
        Ok(out.into_bytes())
    }
}

fn gauge(out: &mut String, name: &str, labels: &str, value: f64) {
    let _ = writeln!(out, "# TYPE {name} gauge");
    let _ = writeln!(out, "{name}{{{labels}}} {value}");
}

/// `name`, `end_reason`, then every option as text, sorted by name (ghz's come in Go's map
/// order); a const schedule leaves out its schedule's keys, as ghz does.
fn labels(json: &JsonReport) -> String {
    let mut pairs = vec![
        ("name".to_owned(), json.name.clone()),
        ("end_reason".to_owned(), json.end_reason.clone()),
    ];
    let options = serde_json::to_value(&json.options).unwrap_or_default();
    let mut rest: Vec<(String, String)> = options
        .as_object()
        .map(|map| {
            map.iter()
                // `name` is already the run's own label: a label appears once per series.
                .filter(|(key, _)| key.as_str() != "name")
                .filter(|(key, _)| {
                    !(json.options.load_schedule == "const" && key.starts_with("load-")
                        || json.options.concurrency_schedule == "const"
                            && key.starts_with("concurrency-"))
                })
                .map(|(key, value)| {
                    let text = match value {
                        serde_json::Value::String(text) => text.clone(),
                        serde_json::Value::Null => String::new(),
                        serde_json::Value::Array(items) => items
                            .iter()
                            .map(|item| {
                                item.as_str()
                                    .map_or_else(|| item.to_string(), str::to_owned)
                            })
                            .collect::<Vec<_>>()
                            .join(","),
                        // ghz leaves data and metadata empty here.
                        serde_json::Value::Object(_) => String::new(),
                        other => other.to_string(),
                    };
                    (label_name(key), text)
                })
                .collect()
        })
        .unwrap_or_default();
    for key in ["data", "metadata"] {
        if let Some(entry) = rest.iter_mut().find(|(name, _)| name == key) {
            entry.1.clear();
        }
    }
    rest.sort();
    pairs.extend(rest);
    pairs
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Prometheus label names are `[a-zA-Z_][a-zA-Z0-9_]*`: ghz's option names with `-` become `_`.
fn label_name(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
