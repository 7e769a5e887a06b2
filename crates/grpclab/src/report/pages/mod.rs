//! What each kind of page shows: a bench results folder (the grpc_bench table and its
//! pictures, `bench.rs`), one load run (`load -O json`, or `load -O html` directly,
//! `load.rs`), a compare folder (`compare.rs`). Here: the sections more than one page draws
//! (latency curves, the timeline, status codes) and the number formats they share.

mod bench;
mod compare;
mod history;
mod load;

pub use bench::{bench_page, sweep_section};
pub use compare::compare_page;
pub use history::{stored_figures, trend_page};
pub use load::load_page;

use std::collections::BTreeSet;
use std::path::Path;

use hdrhistogram::Histogram;

use super::charts::{self, trim_number, LineChart, Series, XScale};
use super::html::{self, Cell, Section};
use grpclab_results::model::JsonReport;

/// The percentiles the latency curves are drawn through (50 to 99.99, denser in the tail).
pub const CURVE_PERCENTILES: [f64; 17] = [
    50.0, 60.0, 70.0, 75.0, 80.0, 85.0, 90.0, 92.5, 95.0, 96.0, 97.0, 98.0, 99.0, 99.5, 99.9,
    99.95, 99.99,
];

/// Latency in milliseconds with three significant decimals.
fn ms(value: f64) -> String {
    format!("{value:.3} ms")
}

fn count(value: f64) -> String {
    format!("{value:.0}")
}

fn percent(value: f64) -> String {
    format!("{value:.1}%")
}

fn mib(value: f64) -> String {
    format!("{value:.1} MiB")
}

/// A mix method's latency at `percentage` (one of its summary's points), in milliseconds.
fn method_ms_at(method: &grpclab_results::model::MethodJson, percentage: f64) -> Option<f64> {
    method
        .latency
        .at(percentage)
        .map(|latency| latency as f64 / 1e6)
}

/// A latency cell in milliseconds, or a dash where there is none.
fn latency_cell(value: Option<f64>) -> Cell {
    match value {
        Some(value) => Cell::number(ms(value), value),
        None => Cell::text("–"),
    }
}

/// A run's latency histogram, from its saved HdrHistogram; `None` when there is none.
pub fn latency_histogram(load: &JsonReport) -> Option<Histogram<u64>> {
    load.latency_histogram()
}

/// The curve of one histogram: `(percentile, latency in ms)` at [`CURVE_PERCENTILES`].
pub fn percentile_curve(histogram: &Histogram<u64>) -> Vec<(f64, f64)> {
    CURVE_PERCENTILES
        .iter()
        .map(|&p| (p, histogram.value_at_quantile(p / 100.0) as f64 / 1e6))
        .collect()
}

/// A run's latency curve: from its histogram at [`CURVE_PERCENTILES`], or, for a run without
/// one (another client's, e.g. ghz), through the percentiles from the 50th up that it
/// reported. `None` when it has neither.
pub fn latency_curve(load: &JsonReport) -> Option<Vec<(f64, f64)>> {
    if let Some(histogram) = latency_histogram(load) {
        return Some(percentile_curve(&histogram));
    }
    let reported: Vec<(f64, f64)> = load
        .latency_percentiles
        .iter()
        .filter(|point| point.percentage >= 50.0)
        .map(|point| (point.percentage, point.latency as f64 / 1e6))
        .collect();
    (!reported.is_empty()).then_some(reported)
}

/// A curve's latency at `percentage`, where it has that point.
pub fn curve_at(curve: &[(f64, f64)], percentage: f64) -> Option<f64> {
    curve
        .iter()
        .find(|(p, _)| (p - percentage).abs() < 1e-9)
        .map(|(_, latency)| *latency)
}

/// Latency percentile curves of several runs on one chart, with the table of their values.
fn percentile_section(runs: &[(&str, &JsonReport)]) -> Section {
    let series: Vec<Series> = runs
        .iter()
        .filter_map(|(name, load)| {
            latency_curve(load).map(|points| Series {
                name: (*name).to_owned(),
                points,
            })
        })
        .collect();
    let reported_only = runs
        .iter()
        .any(|(_, load)| latency_histogram(load).is_none() && latency_curve(load).is_some());
    let chart = charts::line_chart(&LineChart {
        title: "Latency by percentile (successful calls)",
        x_label: "percentile",
        y_label: "latency (ms)",
        series: &series,
        x_scale: XScale::Percentile,
        y_format: trim_number,
        x_names: &[],
    });
    let mut headers = vec!["percentile".to_owned()];
    headers.extend(series.iter().map(|s| s.name.clone()));
    let rows: Vec<Vec<Cell>> = CURVE_PERCENTILES
        .iter()
        .map(|p| {
            let mut row = vec![Cell::number(format!("p{}", trim_number(*p)), *p)];
            row.extend(series.iter().map(|s| latency_cell(curve_at(&s.points, *p))));
            row
        })
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    Section {
        id: "percentiles".to_owned(),
        heading: "Latency percentiles".to_owned(),
        body: html::figure(
            chart,
            &format!(
                "From each run's saved HdrHistogram (1 µs to 60 s, 3 significant digits){}. x: \
                 the percentile on a log scale (each step a tenfold smaller tail); y: latency \
                 in ms.",
                if reported_only {
                    "; a run driven by another client (ghz) has no histogram and is drawn \
                     through the percentiles that client reported"
                } else {
                    ""
                }
            ),
            &html::table(&headers, &rows, false),
        ),
    }
}

/// A line chart against the seconds of the measured window.
fn over_the_window(
    title: &str,
    y_label: &str,
    series: &[Series],
    format: fn(f64) -> String,
) -> Result<String, String> {
    charts::line_chart(&LineChart {
        title,
        x_label: "second of the window",
        y_label,
        series,
        x_scale: XScale::Linear,
        y_format: format,
        x_names: &[],
    })
}

/// Per-second throughput and latency through the measured window.
fn timeline_section(runs: &[(&str, &JsonReport)]) -> Section {
    let per_second =
        |pick: fn(&grpclab_results::model::SecondPoint) -> Option<f64>| -> Vec<Series> {
            runs.iter()
                .map(|(name, load)| Series {
                    name: (*name).to_owned(),
                    points: load
                        .per_second
                        .iter()
                        // Seconds at least half inside the window (and the first, for runs
                        // shorter than a second): calls that ended after it (the drain) land
                        // in a last, mostly empty second that would read as a collapse.
                        .filter(|point| {
                            point.second == 0
                                || point.second as f64 + 0.5 <= load.measured_window as f64 / 1e9
                        })
                        .filter_map(|point| pick(point).map(|y| (point.second as f64, y)))
                        .collect(),
                })
                .filter(|series| !series.points.is_empty())
                .collect()
        };
    let throughput = per_second(|p| Some(p.count as f64));
    let mean = per_second(|p| p.average.map(|ns| ns as f64 / 1e6));
    let p99 = per_second(|p| (p.p99 > 0).then_some(p.p99 as f64 / 1e6));
    let chart = over_the_window;
    let numbers = |series: &[Series], format: fn(f64) -> String| {
        let seconds: BTreeSet<u64> = series
            .iter()
            .flat_map(|s| s.points.iter().map(|(x, _)| *x as u64))
            .collect();
        let mut headers = vec!["second".to_owned()];
        headers.extend(series.iter().map(|s| s.name.clone()));
        let rows: Vec<Vec<Cell>> = seconds
            .iter()
            .map(|second| {
                let mut row = vec![Cell::number(second.to_string(), *second as f64)];
                row.extend(series.iter().map(|s| {
                    s.points
                        .iter()
                        .find(|(x, _)| *x as u64 == *second)
                        .map_or_else(|| Cell::text("-"), |(_, y)| Cell::number(format(*y), *y))
                }));
                row
            })
            .collect();
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        html::table(&headers, &rows, false)
    };
    let seconds = throughput.iter().map(|s| s.points.len()).max().unwrap_or(0);
    if seconds < 2 {
        // A window of under two seconds has one point per series: no line to draw.
        let window = runs
            .iter()
            .map(|(_, load)| load.measured_window as f64 / 1e9)
            .fold(0.0, f64::max);
        return Section {
            id: "timeline".to_owned(),
            heading: "Through the window".to_owned(),
            body: [
                html::paragraph(&format!(
                    "The measured window lasted {window:.2} s: one second of data, so there is \
                     no line through it to draw. Its figures:"
                )),
                one_second_table(&throughput, &p99, &mean),
            ]
            .concat(),
        };
    }
    let body = [
        html::figure(
            chart("Calls completed per second", "calls", &throughput, count),
            "Each second of the measured window: calls that completed in it (successful or not). \
             A warm-up, a pause or a throttled cgroup shows as a dip.",
            &numbers(&throughput, count),
        ),
        html::figure(
            chart("p99 latency per second", "latency (ms)", &p99, trim_number),
            "The 99th percentile of each second's successful calls (from a histogram per \
             second, 2 significant digits): the tail, second by second.",
            &numbers(&p99, ms),
        ),
        html::figure(
            chart(
                "Mean latency per second",
                "latency (ms)",
                &mean,
                trim_number,
            ),
            "The mean latency of each second's successful calls.",
            &numbers(&mean, ms),
        ),
    ]
    .concat();
    Section {
        id: "timeline".to_owned(),
        heading: "Through the window".to_owned(),
        body,
    }
}

/// The figures of a window's only second, one row per run: calls, p99, mean.
fn one_second_table(throughput: &[Series], p99: &[Series], mean: &[Series]) -> String {
    let value = |series: &[Series], name: &str, format: fn(f64) -> String| {
        series
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.points.first())
            .map_or_else(|| Cell::text("-"), |(_, y)| Cell::number(format(*y), *y))
    };
    let rows: Vec<Vec<Cell>> = throughput
        .iter()
        .map(|s| {
            vec![
                Cell::text(s.name.clone()),
                value(throughput, &s.name, count),
                value(p99, &s.name, ms),
                value(mean, &s.name, ms),
            ]
        })
        .collect();
    html::table(&["run", "calls", "p99", "mean"], &rows, false)
}

/// Calls by status code, and the failures' messages.
fn status_section(runs: &[(&str, &JsonReport)]) -> Section {
    let codes: BTreeSet<&String> = runs
        .iter()
        .flat_map(|(_, load)| load.status_code_distribution.keys())
        .collect();
    let mut headers = vec!["run".to_owned()];
    headers.extend(codes.iter().map(|code| (*code).clone()));
    let rows: Vec<Vec<Cell>> = runs
        .iter()
        .map(|(name, load)| {
            let mut row = vec![Cell::text(*name)];
            row.extend(codes.iter().map(|code| {
                let n = load
                    .status_code_distribution
                    .get(*code)
                    .copied()
                    .unwrap_or(0);
                Cell::number(n.to_string(), n as f64)
            }));
            row
        })
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut body = html::table(&headers, &rows, true);
    let messages: Vec<Vec<Cell>> = runs
        .iter()
        .flat_map(|(name, load)| {
            load.error_distribution.iter().map(move |(message, n)| {
                vec![
                    Cell::text(*name),
                    Cell::number(n.to_string(), *n as f64),
                    Cell::text(message.clone()),
                ]
            })
        })
        .collect();
    if messages.is_empty() {
        body.push_str(&html::paragraph("No call failed."));
    } else {
        body.push_str(&html::table(&["run", "calls", "error"], &messages, true));
    }
    Section {
        id: "errors".to_owned(),
        heading: "Status codes and errors".to_owned(),
        body,
    }
}

fn folder_name(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// "Against the previous run": each stored run of the page (`name`, its note) against the
/// previous run of its configuration, figure by figure, with the usual spread and whether
/// the change is beyond it. Empty (and so left out) when nothing was stored.
pub fn previous_section(
    notes: &[(String, grpclab_results::verdict::previous::StoredNote)],
) -> Section {
    let mut rows = Vec::new();
    let mut firsts = Vec::new();
    for (name, note) in notes {
        let Some(previous) = &note.against else {
            firsts.push(format!("{name} (run {})", note.id));
            continue;
        };
        for change in &previous.changes {
            let (scale, format): (f64, fn(f64) -> String) = match change.metric.as_str() {
                "req/s" => (1.0, count),
                "cpu/call" => (1e3, |v| format!("{v:.2} µs")),
                _ => (1e6, ms),
            };
            let band = change.usual.map_or_else(
                || format!("too few runs ({})", previous.spread_runs),
                |(low, high)| format!("{} – {}", format(low / scale), format(high / scale)),
            );
            let verdict = match change.beyond {
                Some(true) => "BEYOND the usual spread",
                Some(false) => "within",
                None => "unknown",
            };
            rows.push(vec![
                Cell::text(name.clone()),
                Cell::number(note.id.to_string(), note.id as f64),
                Cell::number(previous.id.to_string(), previous.id as f64),
                Cell::text(change.metric.clone()),
                Cell::number(format(change.previous / scale), change.previous),
                Cell::number(format(change.now / scale), change.now),
                Cell::number(
                    format!("{:+.1}%", change.change_percent),
                    change.change_percent,
                ),
                Cell::text(band),
                Cell::text(verdict),
            ]);
        }
    }
    let mut body = String::new();
    if !rows.is_empty() {
        body.push_str(&html::paragraph(&format!(
            "Each figure against the previous run of the same configuration (same settings, implementation and machine); the usual spread is the mean ± 2 standard deviations of up to {} earlier runs (at least {}).",
            grpclab_results::verdict::previous::SPREAD_RUNS,
            grpclab_results::verdict::previous::MIN_SPREAD_RUNS
        )));
        body.push_str(&html::table(
            &[
                "run",
                "stored as",
                "against run",
                "figure",
                "then",
                "now",
                "change",
                "usual spread",
                "verdict",
            ],
            &rows,
            true,
        ));
    }
    if !firsts.is_empty() {
        body.push_str(&html::paragraph(&format!(
            "The first stored run of its configuration: {}.",
            firsts.join(", ")
        )));
    }
    if let Some((_, note)) = notes.first() {
        body.push_str(&html::paragraph(&format!(
            "Stored in {} (grpclab history show ID renders any of them again).",
            note.store
        )));
    }
    Section {
        id: "previous".to_owned(),
        heading: "Against the previous run".to_owned(),
        body: if notes.is_empty() {
            String::new()
        } else {
            body
        },
    }
}
