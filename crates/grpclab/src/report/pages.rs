//! What each kind of page shows: a bench results folder (the grpc_bench table and its
//! pictures), or one load run (`load -O json`, or `load -O html` directly).

use std::collections::BTreeSet;
use std::path::Path;

use hdrhistogram::Histogram;

use super::charts::{self, escape, trim_number, BarColours, LineChart, Series, XScale};
use super::html::{self, Cell, Page, Section};
use crate::bench::results::row_cells;
use crate::bench::runner::{ImplResult, RowStatus};
use crate::compare::stats::ratio_text;
use crate::export::JsonReport;

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

/// Latency percentile curves of several runs on one chart, with the table of their values.
fn percentile_section(runs: &[(&str, &JsonReport)]) -> Section {
    let series: Vec<Series> = runs
        .iter()
        .filter_map(|(name, load)| {
            latency_histogram(load).map(|histogram| Series {
                name: (*name).to_owned(),
                points: percentile_curve(&histogram),
            })
        })
        .collect();
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
        .enumerate()
        .map(|(index, p)| {
            let mut row = vec![Cell::number(format!("p{}", trim_number(*p)), *p)];
            row.extend(
                series
                    .iter()
                    .map(|s| Cell::number(ms(s.points[index].1), s.points[index].1)),
            );
            row
        })
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    Section {
        id: "percentiles".to_owned(),
        heading: "Latency percentiles".to_owned(),
        body: html::figure(
            chart,
            "From each run's saved HdrHistogram (1 µs to 60 s, 3 significant digits). x: the \
             percentile on a log scale (each step a tenfold smaller tail); y: latency in ms.",
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
    let per_second = |pick: fn(&crate::export::SecondPoint) -> Option<f64>| -> Vec<Series> {
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

/// The page for a bench results folder (`bench.params` and one `<name>.json` per row).
pub fn bench_page(dir: &Path, params: &[(String, String)], rows: &[ImplResult]) -> Page {
    let measured: Vec<(&str, &JsonReport, &ImplResult)> = rows
        .iter()
        .filter(|row| row.status == RowStatus::Ok)
        .filter_map(|row| row.load.as_ref().map(|load| (row.name.as_str(), load, row)))
        .collect();
    let runs: Vec<(&str, &JsonReport)> = measured.iter().map(|(n, l, _)| (*n, *l)).collect();
    let param = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k == key)
            .map_or("?", |(_, v)| v.as_str())
    };
    let cpus = param("GRPC_SERVER_CPUS");
    let subtitle = format!(
        "{} rows · scenario {} · {cpus} server {}, {} RAM · {} connections × {} streams · {} measured after {} warmup",
        rows.len(),
        param("GRPC_REQUEST_SCENARIO"),
        if cpus == "1" { "CPU" } else { "CPUs" },
        param("GRPC_SERVER_RAM"),
        param("GRPC_CLIENT_CONNECTIONS"),
        param("GRPC_CLIENT_CONCURRENCY"),
        param("GRPC_BENCHMARK_DURATION"),
        param("GRPC_BENCHMARK_WARMUP"),
    );
    let mut sections = vec![
        results_section(rows),
        throughput_section(&measured),
        percentile_section(&runs),
        timeline_section(&runs),
        usage_section(&measured),
        status_section(&runs),
    ];
    if let Some(section) = allocation_section(&measured) {
        sections.push(section);
    }
    if let Some(section) = capacity_section(rows) {
        sections.push(section);
    }
    if let Some(section) = profiles_section(dir, rows) {
        sections.push(section);
    }
    sections.push(Section {
        id: "configuration".to_owned(),
        heading: "Configuration and machine".to_owned(),
        body: html::settings(params),
    });
    Page {
        title: format!("grpclab bench: {}", folder_name(dir)),
        subtitle,
        sections,
    }
}

fn folder_name(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The grpc_bench table, sortable, with the rows that did not measure and why.
fn results_section(rows: &[ImplResult]) -> Section {
    let headers = crate::bench::results::COLUMNS;
    let mut ordered: Vec<&ImplResult> = rows.iter().collect();
    let rps = |r: &ImplResult| match (&r.status, &r.load) {
        (RowStatus::Ok, Some(load)) => load.measured_rps,
        _ => -1.0,
    };
    ordered.sort_by(|a, b| rps(b).total_cmp(&rps(a)));
    let table_rows: Vec<Vec<Cell>> = ordered
        .iter()
        .map(|row| {
            let cells = row_cells(row);
            let numbers: [Option<f64>; crate::bench::results::COLUMNS.len()] =
                match (&row.load, row.status) {
                    (Some(load), RowStatus::Ok) => {
                        let at = |p: f64| load.percentile(p).map(|ns| ns as f64 / 1e6);
                        [
                            None,
                            Some(load.measured_rps),
                            Some(load.average as f64 / 1e6),
                            at(90.0),
                            at(95.0),
                            at(99.0),
                            Some(row.usage.cpu_percent),
                            Some(row.usage.memory_average_bytes as f64),
                            Some(load.errors as f64),
                            row.allocations_per_call,
                            crate::bench::results::message_rates(load).map(|(sent, _)| sent),
                            crate::bench::results::message_rates(load)
                                .map(|(_, received)| received),
                            None,
                            row.capacity.as_ref().and_then(|c| c.capacity_rps),
                        ]
                    }
                    _ => [None; crate::bench::results::COLUMNS.len()],
                };
            cells
                .into_iter()
                .zip(numbers)
                .map(|(text, number)| match number {
                    Some(value) => Cell::number(text, value),
                    None => Cell::text(text),
                })
                .collect()
        })
        .collect();
    let mut body = html::table(&headers, &table_rows, true);
    for row in rows.iter().filter(|r| r.status != RowStatus::Ok) {
        body.push_str(&format!(
            "<p class=\"note\">{} {}: {}</p>",
            escape(&row.name),
            crate::bench::runner::status_word(row.status),
            escape(row.reason.as_deref().unwrap_or("no reason recorded"))
        ));
    }
    // What bound each row, with its figures, and each row's threshold verdicts.
    for row in &ordered {
        if let Some(bound) = row
            .bound_by
            .as_ref()
            .filter(|_| row.status == RowStatus::Ok)
        {
            body.push_str(&format!(
                "<p class=\"note\">{} bound by {}: {}</p>",
                escape(&row.name),
                escape(bound.kind.word()),
                escape(&bound.evidence)
            ));
        }
        for verdict in &row.thresholds {
            body.push_str(&format!(
                "<p class=\"note\">{} threshold {}: {} ({})</p>",
                escape(&row.name),
                escape(&verdict.expression),
                if verdict.passed { "passed" } else { "FAILED" },
                escape(&verdict.actual)
            ));
        }
    }
    body.push_str(&html::paragraph(
        "req/s over the measured window; latency of successful calls; avg. cpu in percent of \
         one core; avg. memory: the server's mean resident set; msgs/s: a streaming call's \
         messages each way over the window (- for unary calls); bound by: what limited the \
         row (the figures that decided it are under the table); capacity: the highest rate \
         that met --capacity's SLO. Click a column to sort.",
    ));
    Section {
        id: "table".to_owned(),
        heading: "Results".to_owned(),
        body,
    }
}

/// req/s, CPU and memory as bars, side by side.
fn throughput_section(measured: &[(&str, &JsonReport, &ImplResult)]) -> Section {
    let mut by_rps: Vec<&(&str, &JsonReport, &ImplResult)> = measured.iter().collect();
    by_rps.sort_by(|a, b| b.1.measured_rps.total_cmp(&a.1.measured_rps));
    let bars = |pick: fn(&JsonReport, &ImplResult) -> f64| -> Vec<(String, f64)> {
        by_rps
            .iter()
            .map(|(name, load, row)| ((*name).to_owned(), pick(load, row)))
            .collect()
    };
    let rps = bars(|load, _| load.measured_rps);
    let cpu = bars(|_, row| row.usage.cpu_percent);
    let memory = bars(|_, row| row.usage.memory_average_bytes as f64 / f64::from(1 << 20));
    let rows: Vec<Vec<Cell>> = by_rps
        .iter()
        .enumerate()
        .map(|(i, (name, _, _))| {
            vec![
                Cell::text(*name),
                Cell::number(count(rps[i].1), rps[i].1),
                Cell::number(percent(cpu[i].1), cpu[i].1),
                Cell::number(mib(memory[i].1), memory[i].1),
            ]
        })
        .collect();
    let numbers = html::table(&["name", "req/s", "avg. cpu", "avg. memory"], &rows, true);
    let body = format!(
        "<div class=\"grid\">{}{}{}</div>",
        html::figure(
            charts::bar_chart(
                "Requests per second",
                "req/s",
                &rps,
                count,
                BarColours::PerRun
            ),
            "Throughput over the measured window.",
            &numbers,
        ),
        html::figure(
            charts::bar_chart(
                "Server CPU",
                "% of one core",
                &cpu,
                percent,
                BarColours::PerRun
            ),
            "The server's mean CPU over the window.",
            &numbers,
        ),
        html::figure(
            charts::bar_chart("Server memory", "MiB", &memory, mib, BarColours::PerRun),
            "The server's mean resident memory over the window.",
            &numbers,
        ),
    );
    Section {
        id: "throughput".to_owned(),
        heading: "Throughput, CPU and memory".to_owned(),
        body,
    }
}

/// The sampler's readings: CPU % between readings, and resident memory.
fn usage_section(measured: &[(&str, &JsonReport, &ImplResult)]) -> Section {
    let cpu: Vec<Series> = measured
        .iter()
        .map(|(name, _, row)| Series {
            name: (*name).to_owned(),
            points: cpu_shares(&row.usage.samples),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let rss: Vec<Series> = measured
        .iter()
        .map(|(name, _, row)| Series {
            name: (*name).to_owned(),
            points: row
                .usage
                .samples
                .iter()
                .map(|s| (s.at, s.rss_bytes as f64 / f64::from(1 << 20)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let numbers = |series: &[Series], format: fn(f64) -> String| {
        let rows: Vec<Vec<Cell>> = series
            .iter()
            .flat_map(|s| {
                s.points.iter().map(move |(at, y)| {
                    vec![
                        Cell::text(s.name.clone()),
                        Cell::number(format!("{at:.2}"), *at),
                        Cell::number(format(*y), *y),
                    ]
                })
            })
            .collect();
        html::table(&["name", "second", "value"], &rows, true)
    };
    let line = over_the_window;
    let body = format!(
        "{}{}",
        html::figure(
            line("Server CPU over time", "% of one core", &cpu, percent),
            "CPU between consecutive readings of the sampler.",
            &numbers(&cpu, percent),
        ),
        html::figure(
            line("Server memory over time", "MiB resident", &rss, mib),
            "Resident memory at each reading.",
            &numbers(&rss, mib),
        ),
    );
    Section {
        id: "usage".to_owned(),
        heading: "Server CPU and memory over time".to_owned(),
        body,
    }
}

/// CPU share between consecutive readings. A reading far closer to the one before it than
/// the sampler's period (the last, taken as the server stops, 0.4 ms after the one before)
/// measures nothing but noise, and read as a drop to 0 %: left out.
fn cpu_shares(samples: &[crate::bench::sampler::Sample]) -> Vec<(f64, f64)> {
    let mut gaps: Vec<f64> = samples
        .windows(2)
        .map(|pair| pair[1].at - pair[0].at)
        .filter(|gap| *gap > 0.0)
        .collect();
    gaps.sort_by(f64::total_cmp);
    let typical = gaps.get(gaps.len() / 2).copied().unwrap_or(0.0);
    samples
        .windows(2)
        .filter(|pair| pair[1].at - pair[0].at > typical / 4.0 && pair[1].at > pair[0].at)
        .map(|pair| {
            let share =
                (pair[1].cpu_seconds - pair[0].cpu_seconds).max(0.0) / (pair[1].at - pair[0].at);
            (pair[1].at, 100.0 * share)
        })
        .collect()
}

/// Heap allocations per call, for the servers that count them.
fn allocation_section(measured: &[(&str, &JsonReport, &ImplResult)]) -> Option<Section> {
    let bars: Vec<(String, f64)> = measured
        .iter()
        .filter_map(|(name, _, row)| row.allocations_per_call.map(|a| ((*name).to_owned(), a)))
        .collect();
    if bars.is_empty() {
        return None;
    }
    let rows: Vec<Vec<Cell>> = measured
        .iter()
        .filter_map(|(name, _, row)| {
            row.allocations_per_call.map(|a| {
                let bytes = row.bytes_per_call.unwrap_or(0.0);
                vec![
                    Cell::text(*name),
                    Cell::number(format!("{a:.1}"), a),
                    Cell::number(format!("{bytes:.0}"), bytes),
                ]
            })
        })
        .collect();
    Some(Section {
        id: "allocations".to_owned(),
        heading: "Allocations per call".to_owned(),
        body: html::figure(
            charts::bar_chart(
                "Heap allocations per call",
                "allocations",
                &bars,
                |v| format!("{v:.1}"),
                BarColours::PerRun,
            ),
            "Counted by the server's own allocator over the window (grpclab's admin RPC).",
            &html::table(&["name", "allocations/call", "bytes/call"], &rows, true),
        ),
    })
}

/// `bench --capacity`: each row's probes as p99 against the offered rate, and each answer with
/// its interval, knee and why its search stopped.
fn capacity_section(rows: &[ImplResult]) -> Option<Section> {
    let searched: Vec<(&str, &crate::capacity::CapacityReport)> = rows
        .iter()
        .filter_map(|row| row.capacity.as_ref().map(|c| (row.name.as_str(), c)))
        .collect();
    let (_, first) = searched.first()?;
    // Probes past the cliff reach seconds of p99 and would flatten the region the SLO is
    // about: the axis stops at three times the highest p99 that met it, higher ones are drawn
    // there (their values are in the table).
    let ceiling = searched
        .iter()
        .flat_map(|(_, report)| report.probes.iter())
        .filter(|p| p.met_slo)
        .map(|p| p.p99_ms)
        .fold(0.0f64, f64::max)
        * 3.0;
    let clip = |value: f64| {
        if ceiling > 0.0 {
            value.min(ceiling)
        } else {
            value
        }
    };
    let series: Vec<Series> = searched
        .iter()
        .map(|(name, report)| {
            let mut points: Vec<(f64, f64)> = report
                .probes
                .iter()
                .filter(|p| p.calls > 0)
                .map(|p| (p.rate, clip(p.p99_ms)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name: (*name).to_owned(),
                points,
            }
        })
        .collect();
    let table_rows: Vec<Vec<Cell>> = searched
        .iter()
        .map(|(name, report)| {
            let server = report.server_at_capacity;
            vec![
                Cell::text(*name),
                Cell::number(
                    crate::bench::results::capacity_cell(report),
                    report.capacity_rps.unwrap_or(0.0),
                ),
                Cell::text(match (report.capacity_rps, report.lowest_failing_rps) {
                    (Some(pass), Some(fail)) => format!("[{pass:.0}, {fail:.0})"),
                    _ => "-".to_owned(),
                }),
                Cell::text(
                    report
                        .knee_rps
                        .map_or("-".to_owned(), |k| format!("{k:.0}")),
                ),
                Cell::text(server.map_or("-".to_owned(), |s| percent(s.cpu_percent))),
                Cell::text(server.map_or("-".to_owned(), |s| {
                    mib(s.rss_bytes as f64 / (1024.0 * 1024.0))
                })),
                Cell::number(report.probes.len().to_string(), report.probes.len() as f64),
                Cell::text(report.stopped_because.clone()),
            ]
        })
        .collect();
    let slo = first.slo.join(", ");
    let chart = charts::line_chart(&LineChart {
        title: &format!("p99 against the offered rate (SLO {slo})"),
        x_label: "offered rate (req/s)",
        y_label: "p99 (ms)",
        series: &series,
        x_scale: XScale::Linear,
        y_format: trim_number,
        x_names: &[],
    });
    Some(Section {
        id: "capacity".to_owned(),
        heading: format!("Capacity at {slo}"),
        body: html::figure(
            chart,
            &format!(
                "Each dot a probe: an open-loop rate held for its window, p99 counted from each call's scheduled time{}. The capacity is the highest rate that met the SLO; the next failing rate bounds it. Probes: {}.",
                if ceiling > 0.0 {
                    format!(" (p99s above {ceiling:.1} ms are drawn at {ceiling:.1} ms)")
                } else {
                    String::new()
                },
                first.probe_rule
            ),
            &html::table(
                &[
                    "name",
                    "capacity (req/s)",
                    "interval",
                    "knee (req/s)",
                    "server cpu",
                    "memory",
                    "probes",
                    "stopped because",
                ],
                &table_rows,
                true,
            ),
        ),
    })
}

/// Links to the flamegraphs and allocation profiles beside the page.
fn profiles_section(dir: &Path, rows: &[ImplResult]) -> Option<Section> {
    let mut items = String::new();
    for row in rows {
        let mut files: Vec<(&str, &str)> = Vec::new();
        if let Some(cpu) = &row.cpu_profile {
            files.push((&cpu.flamegraph, "flamegraph"));
            files.push((&cpu.top_file, "top functions"));
        }
        if let Some(alloc) = &row.alloc_profile {
            files.push((&alloc.sites_file, "allocation sites"));
            files.push((&alloc.dhat_file, "full profile"));
        }
        let mut links: Vec<String> = files
            .into_iter()
            .map(|(path, text)| html::file_link(&relative(dir, path), text))
            .collect();
        if let Some(note) = &row.profile_note {
            links.push(escape(note));
        }
        if !links.is_empty() {
            items.push_str(&format!(
                "<li>{}: {}</li>",
                escape(&row.name),
                links.join(" · ")
            ));
        }
    }
    (!items.is_empty()).then(|| Section {
        id: "profiles".to_owned(),
        heading: "Profiles".to_owned(),
        body: format!("<ul>{items}</ul>"),
    })
}

/// `path` relative to the page's folder when it lies inside it (links must not leave it).
fn relative(dir: &Path, path: &str) -> String {
    let path = Path::new(path);
    path.strip_prefix(dir)
        .ok()
        .or_else(|| path.file_name().map(Path::new))
        .map_or_else(|| path.display().to_string(), |p| p.display().to_string())
}

/// A streaming run's summary rows: messages each way, their rates over the window, and the
/// ping-pong round trips (none for a unary run).
fn stream_rows(load: &JsonReport) -> Vec<(&'static str, f64, String)> {
    let Some((sent_rate, received_rate)) = crate::bench::results::message_rates(load) else {
        return Vec::new();
    };
    let mut rows = vec![
        (
            "messages sent",
            load.messages_sent as f64,
            load.messages_sent.to_string(),
        ),
        (
            "messages received",
            load.messages_received as f64,
            load.messages_received.to_string(),
        ),
        ("msgs/s sent", sent_rate, count(sent_rate)),
        ("msgs/s received", received_rate, count(received_rate)),
    ];
    if let Some(round_trip) = &load.round_trip {
        let at = |percentage: f64| {
            round_trip
                .latency_distribution
                .iter()
                .find(|point| point.percentage == percentage)
                .map(|point| point.latency as f64 / 1e6)
        };
        let average = round_trip.average as f64 / 1e6;
        rows.push(("round trip average", average, ms(average)));
        for (label, percentage) in [("round trip p50", 50.0), ("round trip p99", 99.0)] {
            if let Some(value) = at(percentage) {
                rows.push((label, value, ms(value)));
            }
        }
    }
    rows
}

/// The page for one load run.
pub fn load_page(name: &str, load: &JsonReport) -> Page {
    let runs = [(name, load)];
    let options = &load.options;
    let subtitle = format!(
        "{} · {} · {} calls in {:.2} s, {:.0} req/s",
        options.call,
        options.host,
        load.count,
        load.measured_window as f64 / 1e9,
        load.measured_rps
    );
    let summary_rows: Vec<Vec<Cell>> = [
        ("calls", load.count as f64, load.count.to_string()),
        ("OK", load.ok as f64, load.ok.to_string()),
        ("errors", load.errors as f64, load.errors.to_string()),
        (
            "req/s (measured window)",
            load.measured_rps,
            count(load.measured_rps),
        ),
        (
            "average",
            load.average as f64 / 1e6,
            ms(load.average as f64 / 1e6),
        ),
        (
            "fastest",
            load.fastest as f64 / 1e6,
            ms(load.fastest as f64 / 1e6),
        ),
        (
            "slowest",
            load.slowest as f64 / 1e6,
            ms(load.slowest as f64 / 1e6),
        ),
    ]
    .into_iter()
    .chain(stream_rows(load))
    .map(|(label, value, text)| {
        // Fastest and slowest are over successful calls: with none, nothing was measured.
        if load.ok == 0 && (label == "fastest" || label == "slowest") {
            vec![Cell::text(label), Cell::text("–")]
        } else {
            vec![Cell::text(label), Cell::number(text, value)]
        }
    })
    .collect();
    let histogram: Vec<(String, f64)> = load
        .histogram
        .iter()
        .map(|bucket| (ms(bucket.mark * 1e3), bucket.count as f64))
        .collect();
    let histogram_rows: Vec<Vec<Cell>> = load
        .histogram
        .iter()
        .map(|bucket| {
            vec![
                Cell::number(ms(bucket.mark * 1e3), bucket.mark),
                Cell::number(bucket.count.to_string(), bucket.count as f64),
                Cell::number(percent(bucket.frequency * 100.0), bucket.frequency),
            ]
        })
        .collect();
    let options_pairs: Vec<(String, String)> = serde_json::to_value(options)
        .ok()
        .and_then(|value| value.as_object().cloned())
        .map(|map| {
            map.into_iter()
                .map(|(key, value)| {
                    let text = match value {
                        serde_json::Value::String(text) => text,
                        other => other.to_string(),
                    };
                    (key, text)
                })
                .collect()
        })
        .unwrap_or_default();
    Page {
        title: format!("grpclab load: {name}"),
        subtitle,
        sections: vec![
            Section {
                id: "summary".to_owned(),
                heading: "Summary".to_owned(),
                body: if load.ok == 0 && load.count > 0 {
                    html::paragraph(&format!(
                        "No call succeeded: all {} failed (see Status codes and errors), so no \
                         latency or throughput here measures the server's work.",
                        load.count
                    )) + &html::table(&["", "value"], &summary_rows, false)
                } else {
                    html::table(&["", "value"], &summary_rows, false)
                },
            },
            threshold_section(load),
            generators_section(load),
            percentile_section(&runs),
            Section {
                id: "histogram".to_owned(),
                heading: "Response time histogram".to_owned(),
                body: html::figure(
                    charts::bar_chart(
                        "Calls by latency (ghz's buckets)",
                        "calls",
                        &histogram,
                        count,
                        BarColours::Single,
                    ),
                    "ghz's histogram: each bar counts the calls up to its mark.",
                    &html::table(&["up to", "calls", "share"], &histogram_rows, false),
                ),
            },
            timeline_section(&runs),
            status_section(&runs),
            Section {
                id: "configuration".to_owned(),
                heading: "Options".to_owned(),
                body: html::settings(&options_pairs),
            },
        ],
    }
}

/// A run shared by several generators, or their merge: what the merge found, and each
/// generator's part (a section only for sharded results).
fn generators_section(load: &JsonReport) -> Section {
    let Some(sharding) = &load.sharding else {
        return Section {
            id: "generators".to_owned(),
            heading: "Generators".to_owned(),
            body: String::new(),
        };
    };
    let mut intro = format!(
        "Shards {} of {}.",
        sharding
            .held()
            .iter()
            .map(|shard| shard.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        sharding.of
    );
    if let Some(facts) = &sharding.merge {
        intro.push_str(&format!(
            " Merged exactly (histograms added): {:.0} req/s as the sum of the generators' rates, {:.0} req/s over the {:.2} s they all measured; start skew {} (latest first send minus earliest); clock error {}.",
            facts.sum_of_rates,
            facts.shared_window_rps,
            facts.shared_window as f64 / 1e9,
            ms(facts.start_skew as f64 / 1e6),
            match facts.worst_clock_error_us {
                Some(us) => format!("at most {}", ms(us as f64 / 1e3)),
                None => "unknown (a clock not synchronised)".to_owned(),
            }
        ));
        for warning in &facts.warnings {
            intro.push_str(&format!(" Warning: {warning}."));
        }
    }
    let bars: Vec<(String, f64)> = sharding
        .generators
        .iter()
        .map(|g| (format!("shard {}", g.shard), g.measured_rps))
        .collect();
    let rows: Vec<Vec<Cell>> = sharding
        .generators
        .iter()
        .map(|g| {
            vec![
                Cell::number(g.shard.to_string(), g.shard as f64),
                Cell::text(g.host.clone()),
                Cell::number(g.count.to_string(), g.count as f64),
                Cell::number(count(g.measured_rps), g.measured_rps),
                Cell::number(g.concurrency.to_string(), g.concurrency as f64),
                Cell::number(g.connections.to_string(), g.connections as f64),
                Cell::text(g.first_send.clone()),
                Cell::text(match (g.clock.synchronized, g.clock.max_error_us) {
                    (Some(true), Some(us)) => format!("synchronised, ±{}", ms(us as f64 / 1e3)),
                    (Some(false), _) => "not synchronised".to_owned(),
                    _ => "unknown".to_owned(),
                }),
            ]
        })
        .collect();
    Section {
        id: "generators".to_owned(),
        heading: "Generators".to_owned(),
        body: html::paragraph(&intro)
            + &html::figure(
                charts::bar_chart(
                    "Each generator's rate (req/s over its window)",
                    "req/s",
                    &bars,
                    count,
                    BarColours::Single,
                ),
                "One bar per shard: a generator that fell behind its share of the schedule shows as a short bar.",
                &html::table(
                    &[
                        "shard",
                        "host",
                        "calls",
                        "req/s",
                        "streams",
                        "connections",
                        "first send",
                        "clock",
                    ],
                    &rows,
                    true,
                ),
            ),
    }
}

/// The run's `--threshold` verdicts (a section only when it had some).
fn threshold_section(load: &JsonReport) -> Section {
    let rows: Vec<Vec<Cell>> = load
        .thresholds
        .iter()
        .map(|verdict| {
            vec![
                Cell::text(verdict.expression.clone()),
                Cell::text(verdict.actual.clone()),
                Cell::text(if verdict.passed { "passed" } else { "FAILED" }),
            ]
        })
        .collect();
    let failed = load.thresholds.iter().filter(|v| !v.passed).count();
    let body = if rows.is_empty() {
        String::new()
    } else {
        html::paragraph(&format!(
            "{failed} of {} thresholds failed (exit code 3 when any does).",
            rows.len()
        )) + &html::table(&["threshold", "this run", "verdict"], &rows, false)
    };
    Section {
        id: "thresholds".to_owned(),
        heading: "Thresholds".to_owned(),
        body,
    }
}

/// One cell of a sweep on its line: (position of the swept value, req/s, p99 ns).
type SweepPoint = (f64, Option<f64>, Option<u64>);

/// A sweep (`bench --sweep KEY=V1,V2`): req/s and p99 against the first swept key, one line
/// per implementation (and per value of any other swept key).
pub fn sweep_section(
    axes: &[crate::bench::sweep::Axis],
    cells: &[crate::bench::sweep::SweepCell],
) -> Option<Section> {
    let first = axes.first()?;
    let x_names = first.values.clone();
    // One line per implementation and combination of the other keys.
    let mut lines: Vec<(String, Vec<SweepPoint>)> = Vec::new();
    for cell in cells {
        let others: Vec<String> = cell
            .settings
            .iter()
            .filter(|(key, _)| *key != first.key)
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        let name = if others.is_empty() {
            cell.implementation.clone()
        } else {
            format!("{} {}", cell.implementation, others.join(" "))
        };
        let Some(position) = cell
            .settings
            .iter()
            .find(|(key, _)| *key == first.key)
            .and_then(|(_, value)| first.values.iter().position(|v| v == value))
        else {
            continue;
        };
        let point = (position as f64, cell.rps, cell.p99_ns);
        match lines.iter_mut().find(|(n, _)| *n == name) {
            Some((_, points)) => points.push(point),
            None => lines.push((name, vec![point])),
        }
    }
    let series = |pick: fn(&SweepPoint) -> Option<f64>| -> Vec<Series> {
        lines
            .iter()
            .map(|(name, points)| Series {
                name: name.clone(),
                points: points
                    .iter()
                    .filter_map(|p| pick(p).map(|y| (p.0, y)))
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let rps = series(|p| p.1);
    let p99 = series(|p| p.2.map(|ns| ns as f64 / 1e6));
    let chart = |title, y_label, series: &[Series], format: fn(f64) -> String| {
        charts::line_chart(&LineChart {
            title,
            x_label: &first.key,
            y_label,
            series,
            x_scale: XScale::Linear,
            y_format: format,
            x_names: &x_names,
        })
    };
    let rows: Vec<Vec<Cell>> = cells
        .iter()
        .map(|cell| {
            let settings: Vec<String> = cell
                .settings
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            vec![
                Cell::text(cell.implementation.clone()),
                Cell::text(settings.join(" ")),
                cell.rps
                    .map_or_else(|| Cell::text("FAILED"), |r| Cell::number(count(r), r)),
                cell.p99_ns.map_or_else(
                    || Cell::text("-"),
                    |ns| Cell::number(ms(ns as f64 / 1e6), ns as f64 / 1e6),
                ),
            ]
        })
        .collect();
    let numbers = html::table(&["implementation", "settings", "req/s", "p99"], &rows, true);
    Some(Section {
        id: "sweep".to_owned(),
        heading: format!("Sweep over {}", first.key),
        body: [
            html::figure(
                chart("Requests per second", "req/s", &rps, count),
                "Throughput at each swept value, one line per implementation.",
                &numbers,
            ),
            html::figure(
                chart("p99 latency", "latency (ms)", &p99, trim_number),
                "The 99th percentile at each swept value.",
                &numbers,
            ),
        ]
        .concat(),
    })
}

/// The page for a `grpclab compare` folder: each side against A, with intervals, in words
/// and as a forest plot; the rounds one by one.
pub fn compare_page(
    dir: &Path,
    report: &crate::compare::CompareReport,
    rows: &[ImplResult],
) -> Page {
    use crate::compare::metric::Metric;
    use crate::compare::stats::Verdict;
    let level = report.confidence.percent_text();
    let mut verdicts = String::from("<ul>");
    let mut estimates = Vec::new();
    let mut means: Vec<Vec<Cell>> = Vec::new();
    for metric in Metric::ALL {
        let (scale, unit) = metric.scale_and_unit();
        let higher_is_better = metric.better() == crate::compare::stats::Better::Higher;
        let name = metric.name();
        if let Some(a) = report
            .comparisons
            .first()
            .and_then(|first| first.get(metric))
            .map(|c| c.a)
        {
            means.push(vec![
                Cell::text(name),
                Cell::text("A"),
                Cell::number(
                    format!(
                        "{:.3}{unit} ± {:.3}",
                        a.mean / scale,
                        a.ci_half_width / scale
                    ),
                    a.mean,
                ),
                Cell::text(""),
                Cell::text(""),
            ]);
        }
        for side in &report.comparisons {
            let Some(c) = side.get(metric) else {
                continue;
            };
            let words = match c.verdict {
                Verdict::Faster => format!("{} is better", side.label),
                Verdict::Slower => format!("{} is worse", side.label),
                Verdict::NoSignificantDifference => "no significant difference".to_owned(),
            };
            let direction = if higher_is_better {
                "higher is better"
            } else {
                "lower is better"
            };
            verdicts.push_str(&format!(
                "<li><strong>{}</strong> {name} ({direction}): {}× A, {level} interval [{}, {}]: {}</li>",
                escape(&side.label),
                ratio_text(c.ratio),
                ratio_text(c.ratio_low),
                ratio_text(c.ratio_high),
                escape(&words)
            ));
            estimates.push(charts::Estimate {
                label: format!("{} {name}", side.label),
                ratio: c.ratio,
                low: c.ratio_low,
                high: c.ratio_high,
            });
            means.push(vec![
                Cell::text(name),
                Cell::text(side.label.clone()),
                Cell::number(
                    format!(
                        "{:.3}{unit} ± {:.3}",
                        c.b.mean / scale,
                        c.b.ci_half_width / scale
                    ),
                    c.b.mean,
                ),
                Cell::number(
                    format!(
                        "{} [{}, {}]",
                        ratio_text(c.ratio),
                        ratio_text(c.ratio_low),
                        ratio_text(c.ratio_high)
                    ),
                    c.ratio,
                ),
                Cell::text(words),
            ]);
        }
    }
    verdicts.push_str("</ul>");
    if !report.gate.is_empty() {
        let failed = report.gate.iter().filter(|verdict| verdict.failed).count();
        verdicts.push_str(&format!(
            "<p><strong>Gate: {}</strong> — a rule fails only where the whole {level} interval \
             lies past its limit.</p><ul>",
            if failed == 0 {
                "passed".to_owned()
            } else {
                format!("FAILED ({failed} of {})", report.gate.len())
            }
        ));
        for verdict in &report.gate {
            verdicts.push_str(&format!("<li>{}</li>", escape(&verdict.line)));
        }
        verdicts.push_str("</ul>");
    }
    let mut sides = vec![match &report.baseline_file {
        Some(file) => format!("A: {} (saved baseline {file})", report.baseline),
        None => format!("A: {}", report.baseline),
    }];
    sides.extend(
        report
            .comparisons
            .iter()
            .map(|c| format!("{}: {}", c.label, c.side)),
    );
    let rounds: Vec<Vec<Cell>> = rows
        .iter()
        .filter_map(|row| row.load.as_ref().map(|load| (row, load)))
        .map(|(row, load)| {
            let p99 = load.percentile(99.0).unwrap_or(0) as f64 / 1e6;
            vec![
                Cell::text(row.name.clone()),
                Cell::number(count(load.measured_rps), load.measured_rps),
                Cell::number(ms(p99), p99),
                Cell::number(percent(row.usage.cpu_percent), row.usage.cpu_percent),
            ]
        })
        .collect();
    Page {
        title: format!("grpclab compare: {}", folder_name(dir)),
        subtitle: format!(
            "{} · {} rounds each, interleaved; means with {level} confidence intervals",
            sides.join(" · "),
            report.rounds
        ),
        sections: vec![
            Section {
                id: "verdict".to_owned(),
                heading: "Verdict".to_owned(),
                body: verdicts,
            },
            Section {
                id: "forest".to_owned(),
                heading: "Ratios to A".to_owned(),
                body: html::figure(
                    charts::forest_chart(
                        &format!("Each side's ratio to A, with its {level} interval"),
                        &estimates,
                    ),
                    &format!(
                        "A dot is the ratio of the means; its line the {level} interval. An \
                         interval that misses the line at 1 (red) is a difference; one that \
                         crosses it (blue) is not."
                    ),
                    &html::table(
                        &[
                            "metric",
                            "side",
                            &format!("mean ± {level} CI"),
                            &format!("ratio to A [{level} CI]"),
                            "verdict",
                        ],
                        &means,
                        false,
                    ),
                ),
            },
            Section {
                id: "rounds".to_owned(),
                heading: "Rounds".to_owned(),
                body: html::table(&["round", "req/s", "p99", "server cpu"], &rounds, true),
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sampler::Sample;

    /// The sampler's last reading, taken as the server stops a fraction of a millisecond after
    /// the one before, is no CPU measurement: it once drew every run's line down to 0 %.
    #[test]
    fn a_last_reading_moments_after_the_one_before_is_left_out() {
        let sample = |at: f64, cpu_seconds: f64| Sample {
            at,
            cpu_seconds,
            rss_bytes: 0,
        };
        let samples = [
            sample(0.0, 0.0),
            sample(0.5, 0.45),
            sample(1.0, 0.9),
            sample(1.5, 1.35),
            sample(1.5004, 1.35),
        ];
        let shares = cpu_shares(&samples);
        assert_eq!(shares.len(), 3, "{shares:?}");
        assert!(shares.iter().all(|(_, share)| (share - 90.0).abs() < 1e-6));
        // Evenly spaced readings all count, the last included.
        assert_eq!(cpu_shares(&samples[..4]).len(), 3);
    }
}
