//! `grpclab history import`: results measured before the store existed, so nothing is lost:
//! bench results folders (a row each), compare folders (a side each), `load -O json` files
//! and ghz's JSON reports.

use std::path::Path;

use serde::Deserialize;

use super::{self as runs, stamp};
use crate::InputError;
use grpclab_results::model::JsonReport;
use grpclab_store::{Figures, Machine, NewRun};

/// The records in `path`: a results folder or a JSON file. A folder or file grpclab cannot
/// read is an error that says what it expected.
pub fn records_of(path: &Path) -> Result<Vec<NewRun>, InputError> {
    let source = path
        .canonicalize()
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string();
    // Imported runs happened somewhere, perhaps not here: the host is unknown unless the
    // files say, and the key keeps them apart from this machine's runs.
    let host = "imported".to_owned();
    if path.is_dir() {
        let compare = path.join("compare.json");
        if compare.is_file() {
            let text = read(&compare)?;
            let report: grpclab_harness::compare::CompareReport = serde_json::from_str(&text)
                .map_err(|err| {
                    InputError(format!(
                        "{} is not a compare report grpclab can read ({err})",
                        compare.display()
                    ))
                })?;
            let machine = Machine {
                host,
                ..Machine::default()
            };
            return Ok(runs::from_compare(
                &report,
                &source,
                &machine,
                modified(&compare),
            ));
        }
        if !path.join("bench.params").is_file() {
            return Err(InputError(format!(
                "{} holds no bench.params or compare.json: give a results folder grpclab bench or compare wrote, or a JSON file",
                path.display()
            )));
        }
        let params = grpclab_harness::bench::results::read_params(path)?;
        let rows = grpclab_harness::bench::results::read_rows(path)?;
        let machine = runs::bench_machine(&params, &host);
        return Ok(rows
            .iter()
            .map(|row| {
                let file = path.join(format!(
                    "{}.json",
                    grpclab_harness::bench::names::sanitize(&row.name)
                ));
                runs::from_bench_row(&params, row, &source, machine.clone(), modified(&file))
            })
            .collect());
    }
    let text = read(path)?;
    if let Ok(report) = serde_json::from_str::<JsonReport>(&text) {
        let machine = Machine {
            host,
            ..Machine::default()
        };
        return Ok(vec![runs::from_load(&report, &text, &source, machine)]);
    }
    match serde_json::from_str::<GhzReport>(&text) {
        Ok(report) if report.options.is_some() => Ok(vec![from_ghz(&report, &text, &source)]),
        _ => Err(InputError(format!(
            "{} is neither a grpclab load report nor a ghz JSON report: give a file `grpclab load -O json` or `ghz -O json` wrote, or a results folder",
            path.display()
        ))),
    }
}

fn read(path: &Path) -> Result<String, InputError> {
    std::fs::read_to_string(path)
        .map_err(|err| InputError(format!("cannot read {}: {err}", path.display())))
}

/// When a file was last written (its run's time, as well as anything knows).
fn modified(path: &Path) -> (String, i64) {
    let time = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| std::time::SystemTime::now());
    stamp(time)
}

/// The parts of ghz's JSON report (`ghz -O json`) a run's record needs. ghz writes
/// durations as integer nanoseconds and its date in RFC 3339 with an offset.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GhzReport {
    #[serde(default)]
    name: String,
    #[serde(default)]
    end_reason: String,
    #[serde(default)]
    date: String,
    options: Option<serde_json::Value>,
    #[serde(default)]
    count: u64,
    #[serde(default)]
    total: u64,
    #[serde(default)]
    rps: f64,
    #[serde(default)]
    error_distribution: std::collections::BTreeMap<String, u64>,
    #[serde(default)]
    latency_distribution: Option<Vec<GhzPoint>>,
    #[serde(default)]
    tags: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
struct GhzPoint {
    percentage: f64,
    latency: u64,
}

fn from_ghz(report: &GhzReport, text: &str, source: &str) -> NewRun {
    let options = report.options.clone().unwrap_or(serde_json::Value::Null);
    let option = |key: &str| {
        options
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let mut settings = options.clone();
    if let Some(object) = settings.as_object_mut() {
        object.remove("name");
        object.remove("tags");
    }
    let percentile = |p: f64| {
        report
            .latency_distribution
            .iter()
            .flatten()
            .find(|point| (point.percentage - p).abs() < 1e-9)
            .map(|point| point.latency)
    };
    let machine = Machine {
        host: "imported".to_owned(),
        ..Machine::default()
    };
    let implementation = if report.name.is_empty() {
        "ghz".to_owned()
    } else {
        report.name.clone()
    };
    let target = option("host");
    let scenario = option("call");
    let started = runs::parse_date(&report.date)
        .map(|end| {
            stamp(
                end.checked_sub(std::time::Duration::from_nanos(report.total))
                    .unwrap_or(end),
            )
        })
        .unwrap_or_else(|| (grpclab_store::now_rfc3339(), grpclab_store::now_unix_ms()));
    NewRun {
        record: grpclab_store::RunRecord {
            config_key: runs::config_key(
                "ghz",
                &target,
                &implementation,
                &scenario,
                &settings,
                &machine,
            ),
            started_at: started.0,
            started_unix_ms: started.1,
            command: "ghz".to_owned(),
            batch: String::new(),
            target,
            implementation,
            scenario,
            settings,
            tags: report.tags.clone().unwrap_or_default(),
            status: report.end_reason.clone(),
            machine,
            version: String::new(),
            git_commit: String::new(),
            source: source.to_owned(),
            figures: Figures {
                calls: Some(report.count),
                errors: Some(report.error_distribution.values().sum()),
                rps: Some(report.rps),
                p50_ns: percentile(50.0),
                p90_ns: percentile(90.0),
                p99_ns: percentile(99.0),
                p999_ns: percentile(99.9),
                ..Figures::default()
            },
            result_kind: "ghz".to_owned(),
        },
        result: text.to_owned(),
    }
}
