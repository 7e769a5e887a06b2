//! The pages of stored runs: the trend page (`grpclab history trend`) and the figures of a
//! run that kept no page of its own (an imported ghz report).

use std::collections::BTreeMap;

use super::{count, ms};
use crate::report::charts::{self, LineChart, Series, XScale};
use crate::report::html::{self, Cell, Page, Section};
use grpclab_store::StoredRun;

/// One line of a trend: an implementation and scenario on one machine (runs on different
/// machines never share a line: their figures do not compare).
fn line_name(run: &StoredRun) -> String {
    let mut name = run.record.implementation.clone();
    if name.is_empty() {
        name = run.record.command.clone();
    }
    if !run.record.scenario.is_empty() {
        name.push_str(" · ");
        name.push_str(&run.record.scenario);
    }
    if !run.record.target.is_empty() {
        name.push_str(" → ");
        name.push_str(&run.record.target);
    }
    format!("{name} @ {}", run.record.machine.host)
}

/// A figure drawn over time.
struct Trend {
    id: &'static str,
    heading: &'static str,
    y_label: &'static str,
    /// The value in the unit drawn, if the run measured it.
    value: fn(&StoredRun) -> Option<f64>,
    format: fn(f64) -> String,
}

const TRENDS: [Trend; 3] = [
    Trend {
        id: "rps",
        heading: "Requests per second",
        y_label: "req/s",
        value: |run| run.record.figures.rps,
        format: count,
    },
    Trend {
        id: "p99",
        heading: "p99 latency",
        y_label: "p99 (ms)",
        value: |run| run.record.figures.p99_ns.map(|ns| ns as f64 / 1e6),
        format: ms,
    },
    Trend {
        id: "cpu",
        heading: "Server CPU per call",
        y_label: "CPU per call (µs)",
        value: |run| run.record.figures.cpu_ns_per_call.map(|ns| ns / 1e3),
        format: |v| format!("{v:.2} µs"),
    },
];

/// The trend page: req/s, p99 and CPU per call over time, one line per implementation and
/// scenario on one machine, each chart with its numbers (every point, with its run id).
pub fn trend_page(runs: &[StoredRun], store: &str) -> Page {
    let first_ms = runs
        .iter()
        .map(|run| run.record.started_unix_ms)
        .min()
        .unwrap_or(0);
    let last_ms = runs
        .iter()
        .map(|run| run.record.started_unix_ms)
        .max()
        .unwrap_or(0);
    // The largest unit the runs span at least two of, so the axis reads in whole steps.
    let span_ms = (last_ms - first_ms) as f64;
    let (unit_ms, unit) = [
        (86_400_000.0, "days"),
        (3_600_000.0, "hours"),
        (60_000.0, "minutes"),
    ]
    .into_iter()
    .find(|(unit_ms, _)| span_ms >= 2.0 * unit_ms)
    .unwrap_or((1000.0, "seconds"));
    let first_at = runs
        .iter()
        .min_by_key(|run| run.record.started_unix_ms)
        .map(|run| run.record.started_at.clone())
        .unwrap_or_default();
    let x_label = format!("{unit} since {first_at}");
    let mut lines: BTreeMap<String, Vec<&StoredRun>> = BTreeMap::new();
    for run in runs {
        lines.entry(line_name(run)).or_default().push(run);
    }
    let machines: std::collections::BTreeSet<String> =
        runs.iter().map(|run| run.record.machine.label()).collect();
    let mut sections = Vec::new();
    if runs.is_empty() {
        sections.push(Section {
            id: "none".to_owned(),
            heading: "No runs".to_owned(),
            body: html::paragraph(
                "No stored run matches: every load, bench and compare run stores itself; widen the filters or import older results (grpclab history import).",
            ),
        });
    }
    for trend in TRENDS.iter() {
        let series: Vec<Series> = lines
            .iter()
            .filter_map(|(name, runs)| {
                let points: Vec<(f64, f64)> = runs
                    .iter()
                    .filter_map(|run| {
                        let y = (trend.value)(run)?;
                        Some(((run.record.started_unix_ms - first_ms) as f64 / unit_ms, y))
                    })
                    .collect();
                (!points.is_empty()).then(|| Series {
                    name: name.clone(),
                    points,
                })
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let rows: Vec<Vec<Cell>> = lines
            .iter()
            .flat_map(|(name, runs)| {
                runs.iter().filter_map(move |run| {
                    let y = (trend.value)(run)?;
                    Some(vec![
                        Cell::text(name.clone()),
                        Cell::number(run.id.to_string(), run.id as f64),
                        Cell::number(
                            run.record.started_at.clone(),
                            run.record.started_unix_ms as f64,
                        ),
                        Cell::number((trend.format)(y), y),
                        Cell::text(run.record.git_commit.chars().take(10).collect::<String>()),
                    ])
                })
            })
            .collect();
        let chart = charts::line_chart(&LineChart {
            title: trend.heading,
            x_label: &x_label,
            y_label: trend.y_label,
            series: &series,
            x_scale: XScale::Linear,
            y_format: trend.format,
            x_names: &[],
        });
        sections.push(Section {
            id: trend.id.to_owned(),
            heading: trend.heading.to_owned(),
            body: html::figure(
                chart,
                &format!(
                    "{} over time, one line per implementation and scenario on one machine.",
                    trend.heading
                ),
                &html::table(
                    &["line", "run", "started", trend.y_label, "commit"],
                    &rows,
                    true,
                ),
            ),
        });
    }
    sections.push(Section {
        id: "machines".to_owned(),
        heading: "Machines".to_owned(),
        body: html::table(
            &["machine"],
            &machines
                .iter()
                .map(|label| vec![Cell::text(label.clone())])
                .collect::<Vec<_>>(),
            false,
        ),
    });
    Page {
        title: "grpclab history: trends".to_owned(),
        subtitle: format!(
            "{} runs on {} lines, {} – {} · {store}",
            runs.len(),
            lines.len(),
            first_at,
            runs.iter()
                .max_by_key(|run| run.record.started_unix_ms)
                .map(|run| run.record.started_at.clone())
                .unwrap_or_default()
        ),
        sections,
    }
}

/// A stored run that kept only its figures (an imported ghz report): its page, or Markdown.
pub fn stored_figures(run: &StoredRun, as_html: bool) -> String {
    let figures = &run.record.figures;
    let optional = |value: Option<f64>, format: fn(f64) -> String| {
        value.map_or_else(|| "–".to_owned(), format)
    };
    let pairs: Vec<(String, String)> = vec![
        (
            "calls".to_owned(),
            optional(figures.calls.map(|v| v as f64), count),
        ),
        (
            "errors".to_owned(),
            optional(figures.errors.map(|v| v as f64), count),
        ),
        ("req/s".to_owned(), optional(figures.rps, count)),
        (
            "p50".to_owned(),
            optional(figures.p50_ns.map(|v| v as f64 / 1e6), ms),
        ),
        (
            "p90".to_owned(),
            optional(figures.p90_ns.map(|v| v as f64 / 1e6), ms),
        ),
        (
            "p99".to_owned(),
            optional(figures.p99_ns.map(|v| v as f64 / 1e6), ms),
        ),
        ("started".to_owned(), run.record.started_at.clone()),
        ("target".to_owned(), run.record.target.clone()),
        ("call".to_owned(), run.record.scenario.clone()),
        ("source".to_owned(), run.record.source.clone()),
    ];
    let title = format!("grpclab history: run {} ({})", run.id, run.record.command);
    if !as_html {
        let mut out = format!("# {title}\n\n| | value |\n|---|---|\n");
        for (key, value) in &pairs {
            out.push_str(&format!("| {key} | {value} |\n"));
        }
        return out;
    }
    html::render(&Page {
        title,
        subtitle: format!(
            "{} · imported from {}",
            run.record.implementation, run.record.source
        ),
        sections: vec![Section {
            id: "figures".to_owned(),
            heading: "Figures".to_owned(),
            body: html::settings(&pairs),
        }],
    })
}
