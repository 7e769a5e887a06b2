//! The page for a bench results folder: the grpc_bench table, throughput, usage,
//! allocations, capacity and profiles, and a sweep's lines.

use std::path::Path;

use super::{
    count, folder_name, latency_cell, method_ms_at, mib, ms, over_the_window, percent,
    percentile_section, status_section, timeline_section,
};
use crate::report::charts::{self, escape, trim_number, BarColours, LineChart, Series, XScale};
use crate::report::html::{self, Cell, Page, Section};
use grpclab_harness::bench::results::row_cells;
use grpclab_harness::bench::runner::{ImplResult, RowStatus};
use grpclab_results::model::JsonReport;

/// The page for a bench results folder (`bench.params` and one `<name>.json` per row).
pub fn bench_page(
    dir: &Path,
    params: &[(String, String)],
    rows: &[ImplResult],
    notes: &[(String, grpclab_results::verdict::previous::StoredNote)],
) -> Page {
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
    // A workload replaces the scenario's payload: say so where the scenario is named.
    let workload = if params.iter().any(|(key, _)| key == "GRPCLAB_WORKLOAD") {
        " with a --workload mix"
    } else {
        ""
    };
    // Another load generator made every figure: name it first.
    let client = params
        .iter()
        .find(|(key, _)| key == "GRPCLAB_CLIENT")
        .and_then(|(_, value)| value.split(" (").next())
        .map(|client| format!(" · driven by {client}"))
        .unwrap_or_default();
    let subtitle = format!(
        "{} rows{client} · scenario {}{workload} · {cpus} server {}, {} RAM · {} connections × {} streams · {} measured after {} warmup",
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
    if let Some(section) = workload_section(&measured) {
        sections.push(section);
    }
    if let Some(section) = allocation_section(&measured) {
        sections.push(section);
    }
    if let Some(section) = capacity_section(rows) {
        sections.push(section);
    }
    sections.push(super::previous_section(notes));
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

/// `--workload`: each row's entries (calls, req/s, p50, p99, errors) and a bar per row and
/// entry of its p99 — which entry of the mix is slow, on which implementation. `None`
/// without a workload.
fn workload_section(measured: &[(&str, &JsonReport, &ImplResult)]) -> Option<Section> {
    let seed = measured
        .iter()
        .find_map(|(_, load, _)| load.mix.as_ref())?
        .seed;
    let at = method_ms_at;
    let mut rows = Vec::new();
    let mut bars = Vec::new();
    for (name, load, _) in measured {
        for method in load.mix.iter().flat_map(|mix| &mix.methods) {
            rows.push(vec![
                Cell::text((*name).to_owned()),
                Cell::text(method.name.clone()),
                Cell::number(method.count.to_string(), method.count as f64),
                Cell::number(count(method.rps), method.rps),
                latency_cell(at(method, 50.0)),
                latency_cell(at(method, 99.0)),
                Cell::number(method.errors.to_string(), method.errors as f64),
            ]);
            bars.push((
                format!("{name} · {}", method.name),
                at(method, 99.0).unwrap_or(0.0),
            ));
        }
    }
    let bar_rows: Vec<Vec<Cell>> = bars
        .iter()
        .map(|(label, p99)| vec![Cell::text(label.clone()), Cell::number(ms(*p99), *p99)])
        .collect();
    // Flows: each row's runs of each (their steps are entries above).
    let mut flow_rows = Vec::new();
    for (name, load, _) in measured {
        for flow in load.mix.iter().flat_map(|mix| &mix.flows) {
            let at = |p: f64| flow.latency.at(p).map(|ns| ns as f64 / 1e6);
            let number = |n: u64| Cell::number(n.to_string(), n as f64);
            flow_rows.push(vec![
                Cell::text((*name).to_owned()),
                Cell::text(flow.name.clone()),
                number(flow.count),
                Cell::number(count(flow.rps), flow.rps),
                latency_cell(at(50.0)),
                latency_cell(at(99.0)),
                number(flow.passed),
                number(flow.errors),
                number(flow.unexpected),
            ]);
        }
    }
    let flows = if flow_rows.is_empty() {
        String::new()
    } else {
        html::paragraph(
            "Its flows on each row: runs (a run's latency from its start to its last step's end), and how they ended; each step's own figures are its entry above.",
        ) + &html::table(
            &[
                "row",
                "flow",
                "runs",
                "runs/s",
                "p50",
                "p99",
                "passed",
                "errors",
                "unexpected",
            ],
            &flow_rows,
            true,
        )
    };
    Some(Section {
        id: "workload".to_owned(),
        heading: "Workload entries".to_owned(),
        body: html::paragraph(&format!(
            "Every row sent the --workload mix, each call's entry drawn by weight from seed {seed} (the same for every row). Each entry's figures on each row:"
        )) + &html::table(
            &["row", "entry", "calls", "req/s", "p50", "p99", "errors"],
            &rows,
            true,
        ) + &flows
            + &html::figure(
            charts::bar_chart(
                "Each entry's p99 latency (successful calls)",
                "p99 (ms)",
                &bars,
                ms,
                BarColours::Single,
            ),
            "One bar per row and entry.",
            &html::table(&["row · entry", "p99"], &bar_rows, false),
        ),
    })
}

/// The grpc_bench table, sortable, with the rows that did not measure and why.
fn results_section(rows: &[ImplResult]) -> Section {
    let headers = grpclab_harness::bench::results::COLUMNS;
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
            let numbers: [Option<f64>; grpclab_harness::bench::results::COLUMNS.len()] =
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
                            Some(row.usage.memory_own_average_bytes as f64),
                            grpclab_harness::bench::results::message_rates(load)
                                .map(|(sent, _)| sent),
                            grpclab_harness::bench::results::message_rates(load)
                                .map(|(_, received)| received),
                            None,
                            row.capacity.as_ref().and_then(|c| c.capacity_rps),
                        ]
                    }
                    _ => [None; grpclab_harness::bench::results::COLUMNS.len()],
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
            grpclab_harness::bench::runner::status_word(row.status),
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
                escape(&bound.word()),
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
         one core; avg. memory: the server's mean resident set; own memory: the part of it \
         the server allocated (without its code and libraries); msgs/s: a streaming call's \
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
fn cpu_shares(samples: &[grpclab_harness::bench::sampler::Sample]) -> Vec<(f64, f64)> {
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
    let searched: Vec<(&str, &grpclab_harness::capacity::CapacityReport)> = rows
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
                    grpclab_harness::bench::results::capacity_cell(report),
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

/// One cell of a sweep on its line: (position of the swept value, req/s, p99 ns).
type SweepPoint = (f64, Option<f64>, Option<u64>);

/// A sweep (`bench --sweep KEY=V1,V2`): req/s and p99 against the first swept key, one line
/// per implementation (and per value of any other swept key).
pub fn sweep_section(
    axes: &[grpclab_harness::bench::sweep::Axis],
    cells: &[grpclab_harness::bench::sweep::SweepCell],
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
#[cfg(test)]
mod tests {
    use super::*;
    use grpclab_harness::bench::sampler::Sample;

    /// The sampler's last reading, taken as the server stops a fraction of a millisecond after
    /// the one before, is no CPU measurement: it once drew every run's line down to 0 %.
    #[test]
    fn a_last_reading_moments_after_the_one_before_is_left_out() {
        let sample = |at: f64, cpu_seconds: f64| Sample {
            at,
            cpu_seconds,
            rss_bytes: 0,
            own_bytes: 0,
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
