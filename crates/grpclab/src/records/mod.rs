//! A run's record made from what each command wrote: a load report (`load -O json`, ghz's
//! JSON), a bench row with its folder's `bench.params`, a compare report's sides.

pub mod import;

use std::collections::BTreeMap;

use grpclab_harness::bench::runner::{ImplResult, RowStatus};
use grpclab_harness::compare::metric::Metric;
use grpclab_harness::compare::CompareReport;
use grpclab_results::model::JsonReport;
use grpclab_store::{Figures, Machine, NewRun};

/// The key runs of the same configuration share: a stable hash (FNV-1a, the same on every
/// build and machine) of the command, target, implementation, scenario, the settings that
/// shape the figures, and the machine. A change of any of them is another configuration.
pub fn config_key(
    command: &str,
    target: &str,
    implementation: &str,
    scenario: &str,
    settings: &serde_json::Value,
    machine: &Machine,
) -> String {
    let text = serde_json::json!([
        command,
        target,
        implementation,
        scenario,
        settings,
        machine.host,
        machine.cores,
        machine.model
    ])
    .to_string();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The version and commit of this build.
fn this_build() -> (String, String) {
    (
        env!("CARGO_PKG_VERSION").to_owned(),
        grpclab_harness::BUILD_COMMIT.to_owned(),
    )
}

/// A load report's figures (the measured window's).
pub fn load_figures(report: &JsonReport) -> Figures {
    Figures {
        calls: Some(report.count),
        errors: Some(report.errors),
        rps: Some(report.measured_rps),
        p50_ns: report.percentile(50.0),
        p90_ns: report.percentile(90.0),
        p99_ns: report.percentile(99.0),
        p999_ns: report.percentile(99.9),
        ..Figures::default()
    }
}

/// A report's `date` (RFC 3339, `Z` or a `±HH:MM` offset as ghz writes), if it parses.
pub fn parse_date(date: &str) -> Option<std::time::SystemTime> {
    let date = date.trim();
    if let Ok(time) = humantime::parse_rfc3339_weak(date.trim_end_matches('Z')) {
        return Some(time);
    }
    // ghz (Go) writes local time with an offset: 2019-04-10T13:21:03.519935-04:00.
    let (_, time) = date.split_once('T')?;
    let sign_at = time.rfind(['+', '-'])?;
    let offset = &time[sign_at + 1..];
    let (hours, minutes) = offset.split_once(':')?;
    let seconds = hours.parse::<u64>().ok()? * 3600 + minutes.parse::<u64>().ok()? * 60;
    let local = &date[..date.len() - offset.len() - 1];
    let local = humantime::parse_rfc3339_weak(local).ok()?;
    let offset = std::time::Duration::from_secs(seconds);
    // Local = UTC + offset, so UTC = local − offset (for '+').
    if time.as_bytes()[sign_at] == b'+' {
        local.checked_sub(offset)
    } else {
        local.checked_add(offset)
    }
}

/// When a run that ended at `date` and lasted `whole_run_ns` started (now, if the date is
/// unreadable).
fn started(date: &str, whole_run_ns: u64) -> (String, i64) {
    match parse_date(date) {
        Some(end) => {
            let start = end
                .checked_sub(std::time::Duration::from_nanos(whole_run_ns))
                .unwrap_or(end);
            stamp(start)
        }
        None => (grpclab_store::now_rfc3339(), grpclab_store::now_unix_ms()),
    }
}

/// A time as RFC 3339 (ms) and milliseconds since the epoch.
pub fn stamp(time: std::time::SystemTime) -> (String, i64) {
    (
        humantime::format_rfc3339_millis(time).to_string(),
        time.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64),
    )
}

/// A `load` run (or an imported load/ghz report) as a record. `source` is where it was
/// written; `machine` where it ran (this machine, for a run just made).
pub fn from_load(report: &JsonReport, text: &str, source: &str, machine: Machine) -> NewRun {
    let mut settings = serde_json::to_value(&report.options).unwrap_or(serde_json::Value::Null);
    // The name and tags label a run; they do not change what it measures.
    if let Some(object) = settings.as_object_mut() {
        object.remove("name");
        object.remove("tags");
    }
    let implementation = if report.name.is_empty() {
        report.options.name.clone()
    } else {
        report.name.clone()
    };
    let scenario = if report.options.scenario.is_empty() {
        report.options.call.clone()
    } else {
        report.options.scenario.clone()
    };
    let target = report.options.host.clone();
    let (started_at, started_unix_ms) = started(&report.date, report.whole_run);
    let (version, git_commit) = this_build();
    NewRun {
        record: grpclab_store::RunRecord {
            config_key: config_key(
                "load",
                &target,
                &implementation,
                &scenario,
                &settings,
                &machine,
            ),
            started_at,
            started_unix_ms,
            command: "load".to_owned(),
            batch: String::new(),
            target,
            implementation,
            scenario,
            settings,
            tags: report.tags.clone(),
            status: report.end_reason.clone(),
            machine,
            version,
            git_commit,
            source: source.to_owned(),
            figures: load_figures(report),
            result_kind: "load".to_owned(),
        },
        result: text.to_owned(),
    }
}

/// The settings of a bench folder that shape its figures: `bench.params` without the lines
/// that describe the build, the machine (kept in their own columns) or its warnings.
fn bench_settings(params: &[(String, String)]) -> serde_json::Value {
    let kept: BTreeMap<&str, &str> = params
        .iter()
        .filter(|(key, _)| {
            !matches!(
                key.as_str(),
                "GRPCLAB_VERSION"
                    | "GRPCLAB_GIT_COMMIT"
                    | "MACHINE_CPU_MODEL"
                    | "MACHINE_CORES"
                    | "MACHINE_KERNEL"
                    | "WARNING"
            )
        })
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    serde_json::to_value(kept).unwrap_or(serde_json::Value::Null)
}

/// The machine a bench folder's `bench.params` describes (its own for an imported folder),
/// with this host's name when the folder was written here.
pub fn bench_machine(params: &[(String, String)], host: &str) -> Machine {
    let param = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    Machine {
        host: host.to_owned(),
        cores: param("MACHINE_CORES").parse().unwrap_or(0),
        model: param("MACHINE_CPU_MODEL"),
        kernel: param("MACHINE_KERNEL"),
    }
}

/// A bench row's figures: its load's, with the server's CPU, memory and CPU per call.
pub fn bench_figures(row: &ImplResult) -> Figures {
    let mut figures = row.load.as_ref().map(load_figures).unwrap_or_default();
    if row.load.is_some() {
        figures.server_cpu_percent = Some(row.usage.cpu_percent);
        figures.server_memory_bytes = Some(row.usage.memory_average_bytes);
        figures.cpu_ns_per_call = Metric::CpuPerCall.of(row);
    }
    figures.capacity_rps = row.capacity.as_ref().and_then(|c| c.capacity_rps);
    figures
}

/// One bench row as a record; `started` is when the row was written (now, for a run just
/// made; the file's time for an import).
pub fn from_bench_row(
    params: &[(String, String)],
    row: &ImplResult,
    source: &str,
    machine: Machine,
    started: (String, i64),
) -> NewRun {
    let settings = bench_settings(params);
    let scenario = params
        .iter()
        .find(|(key, _)| key == "GRPC_REQUEST_SCENARIO")
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    let (version, git_commit) = this_build();
    let result = serde_json::json!({ "params": params, "row": row }).to_string();
    NewRun {
        record: grpclab_store::RunRecord {
            config_key: config_key("bench", "", &row.name, &scenario, &settings, &machine),
            started_at: started.0,
            started_unix_ms: started.1,
            command: "bench".to_owned(),
            batch: String::new(),
            target: String::new(),
            implementation: row.name.clone(),
            scenario,
            settings,
            tags: BTreeMap::new(),
            status: match row.status {
                RowStatus::Ok => "ok",
                RowStatus::Failed => "failed",
                RowStatus::Skipped => "skipped",
            }
            .to_owned(),
            machine,
            version,
            git_commit,
            source: source.to_owned(),
            figures: bench_figures(row),
            result_kind: "bench".to_owned(),
        },
        result,
    }
}

/// The median of some values.
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

/// A compare's sides as records, one each, figures the medians of its rounds; each keeps
/// the whole report (to render it again, and for `--baseline last`).
pub fn from_compare(
    report: &CompareReport,
    source: &str,
    machine: &Machine,
    started: (String, i64),
) -> Vec<NewRun> {
    let settings = report
        .settings
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(serde_json::Value::Null);
    let scenario = report
        .settings
        .as_ref()
        .map(|s| s.scenario.clone())
        .unwrap_or_default();
    let (version, git_commit) = this_build();
    // Each side's name, label and figures: the medians of its rounds, or — in an older
    // report that kept no rounds — the means its comparisons give.
    let sides: Vec<(String, String, Figures)> = if report.sides.is_empty() {
        let mean = |c: &grpclab_harness::compare::stats::Comparison, a: bool| {
            if a {
                c.a.mean
            } else {
                c.b.mean
            }
        };
        let figures_of = |c: &grpclab_harness::compare::SideComparison, a: bool| Figures {
            rps: Some(mean(&c.rps, a)),
            p50_ns: Some(mean(&c.p50_ns, a) as u64),
            p99_ns: Some(mean(&c.p99_ns, a) as u64),
            cpu_ns_per_call: c.cpu_ns_per_call.as_ref().map(|m| mean(m, a)),
            ..Figures::default()
        };
        let mut sides = Vec::new();
        if let Some(first) = report.comparisons.first() {
            sides.push((
                report.baseline.clone(),
                "A".to_owned(),
                figures_of(first, true),
            ));
        }
        for comparison in &report.comparisons {
            sides.push((
                comparison.side.clone(),
                comparison.label.clone(),
                figures_of(comparison, false),
            ));
        }
        sides
    } else {
        report
            .sides
            .iter()
            .map(|side| {
                (
                    side.side.clone(),
                    side.label.clone(),
                    Figures {
                        rps: median(&side.rps),
                        p50_ns: median(&side.p50_ns).map(|v| v as u64),
                        p99_ns: median(&side.p99_ns).map(|v| v as u64),
                        cpu_ns_per_call: median(&side.cpu_ns_per_call),
                        ..Figures::default()
                    },
                )
            })
            .collect()
    };
    sides
        .into_iter()
        .map(|(side, label, figures)| NewRun {
            record: grpclab_store::RunRecord {
                config_key: config_key("compare", "", &side, &scenario, &settings, machine),
                started_at: started.0.clone(),
                started_unix_ms: started.1,
                command: "compare".to_owned(),
                batch: String::new(),
                target: String::new(),
                implementation: side,
                scenario: scenario.clone(),
                settings: settings.clone(),
                tags: BTreeMap::new(),
                status: if report.gate_failed() {
                    "gate failed"
                } else {
                    "ok"
                }
                .to_owned(),
                machine: machine.clone(),
                version: version.clone(),
                git_commit: git_commit.clone(),
                source: source.to_owned(),
                figures,
                result_kind: "compare".to_owned(),
            },
            result: serde_json::json!({ "side": label, "report": report }).to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_stable_and_moves_with_every_part() {
        let machine = Machine {
            host: "h".to_owned(),
            cores: 2,
            model: "m".to_owned(),
            kernel: "k".to_owned(),
        };
        let settings = serde_json::json!({"concurrency": 8});
        let key = config_key("load", "t", "i", "s", &settings, &machine);
        // Fixed across builds: a stored key must keep matching.
        assert_eq!(key, config_key("load", "t", "i", "s", &settings, &machine));
        assert_eq!(key.len(), 16);
        let other_machine = Machine {
            host: "other".to_owned(),
            ..machine.clone()
        };
        for other in [
            config_key("bench", "t", "i", "s", &settings, &machine),
            config_key("load", "t2", "i", "s", &settings, &machine),
            config_key("load", "t", "i2", "s", &settings, &machine),
            config_key("load", "t", "i", "s2", &settings, &machine),
            config_key(
                "load",
                "t",
                "i",
                "s",
                &serde_json::json!({"concurrency": 9}),
                &machine,
            ),
            config_key("load", "t", "i", "s", &settings, &other_machine),
        ] {
            assert_ne!(key, other);
        }
        // The kernel is recorded but a kernel update keeps the configuration's history.
        let new_kernel = Machine {
            kernel: "k2".to_owned(),
            ..machine.clone()
        };
        assert_eq!(
            key,
            config_key("load", "t", "i", "s", &settings, &new_kernel)
        );
    }

    #[test]
    fn ghz_and_grpclab_dates_both_read() {
        let utc = parse_date("2019-04-10T17:21:03Z").expect("utc");
        let offset = parse_date("2019-04-10T13:21:03.519935-04:00").expect("offset");
        let gap = offset.duration_since(utc).expect("later by the fraction");
        assert!(gap.as_millis() == 519, "{gap:?}");
        assert!(parse_date("yesterday").is_none());
    }

    #[test]
    fn medians_of_rounds() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
