//! The page for one load run: its summary, latency curve, timeline, status codes, the
//! generators of a sharded run and its threshold verdicts.

use super::{
    count, latency_cell, method_ms_at, ms, percent, percentile_section, status_section,
    timeline_section,
};
use crate::report::charts::{self, BarColours};
use crate::report::html::{self, Cell, Page, Section};
use grpclab_load::recorder::OTHER_ERRORS;
use grpclab_results::model::{JsonReport, LatencyStats};

/// A streaming run's summary rows: messages each way, their rates over the window, and the
/// ping-pong round trips (none for a unary run).
fn stream_rows(load: &JsonReport) -> Vec<(&'static str, f64, String)> {
    let Some((sent_rate, received_rate)) = grpclab_harness::bench::results::message_rates(load)
    else {
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
    // Microseconds: replies of a stream are mostly far less than a millisecond apart, and
    // a stamped reply's latency is of the same order.
    let mut microseconds = |what: [&'static str; 3], stats: &LatencyStats| {
        let us = |value: f64| format!("{value:.1} µs");
        let average = stats.average as f64 / 1e3;
        rows.push((what[0], average, us(average)));
        for (label, percentage) in [(what[1], 50.0), (what[2], 99.0)] {
            if let Some(value) = stats.at(percentage).map(|latency| latency as f64 / 1e3) {
                rows.push((label, value, us(value)));
            }
        }
    };
    if let Some(gaps) = &load.message_gaps {
        microseconds(
            [
                "between replies, average",
                "between replies, p50",
                "between replies, p99",
            ],
            gaps,
        );
    }
    if let Some(stamped) = &load.message_latency {
        microseconds(
            [
                "reply from its stamp, average",
                "reply from its stamp, p50",
                "reply from its stamp, p99",
            ],
            stamped,
        );
    }
    if load.messages_unstamped > 0 {
        let unstamped = load.messages_unstamped;
        rows.push((
            "replies without a stamp",
            unstamped as f64,
            count(unstamped as f64),
        ));
    }
    if let Some(round_trip) = &load.round_trip {
        let at = |percentage: f64| {
            round_trip
                .at(percentage)
                .map(|latency| latency as f64 / 1e6)
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
    let called = match &load.mix {
        Some(mix) if !mix.flows.is_empty() => {
            let plain = mix.methods.iter().filter(|m| m.flow.is_none()).count();
            format!(
                "{} and {}",
                counted(plain, "method"),
                counted(mix.flows.len(), "flow")
            )
        }
        Some(mix) => format!("a mix of {} methods", mix.methods.len()),
        None => options.call.clone(),
    };
    let subtitle = format!(
        "{} · {} · {} calls in {:.2} s, {:.0} req/s",
        called,
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
    let mut page = Page {
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
            methods_section(load),
            flows_section(load),
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
    };
    // Right after the summary: a person opening a run's page wants to know if it moved.
    let notes: Vec<(String, grpclab_results::verdict::previous::StoredNote)> = load
        .history
        .iter()
        .map(|note| (name.to_owned(), note.clone()))
        .collect();
    page.sections.insert(1, super::previous_section(&notes));
    page
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

/// A mix of methods: each method's calls and latency beside the others' (a section only
/// for a mix; the rest of the page is the whole mix's).
fn methods_section(load: &JsonReport) -> Section {
    // A flow's steps are in the Flows section.
    let plain: Vec<_> = load
        .mix
        .iter()
        .flat_map(|mix| &mix.methods)
        .filter(|method| method.flow.is_none())
        .collect();
    let Some(mix) = load.mix.as_ref().filter(|_| !plain.is_empty()) else {
        return Section {
            id: "methods".to_owned(),
            heading: "Methods".to_owned(),
            body: String::new(),
        };
    };
    let at = method_ms_at;
    let bars: Vec<(String, f64)> = plain
        .iter()
        .map(|method| (method.name.clone(), at(method, 99.0).unwrap_or(0.0)))
        .collect();
    let p99_rows: Vec<Vec<Cell>> = bars
        .iter()
        .map(|(name, p99)| vec![Cell::text(name.clone()), Cell::number(ms(*p99), *p99)])
        .collect();
    let rows: Vec<Vec<Cell>> = plain
        .iter()
        .map(|method| {
            let share_of_calls = 100.0 * method.count as f64 / load.count.max(1) as f64;
            vec![
                Cell::text(method.name.clone()),
                Cell::number(
                    format!("{} ({})", method.weight, percent(method.share * 100.0)),
                    method.share,
                ),
                Cell::number(
                    format!("{} ({})", method.count, percent(share_of_calls)),
                    method.count as f64,
                ),
                Cell::number(count(method.rps), method.rps),
                latency_cell(at(method, 50.0)),
                latency_cell(at(method, 90.0)),
                latency_cell(at(method, 99.0)),
                Cell::number(method.errors.to_string(), method.errors as f64),
            ]
        })
        .collect();
    Section {
        id: "methods".to_owned(),
        heading: "Methods".to_owned(),
        body: html::paragraph(&format!(
            "A mix of {}, each call's method drawn by weight from seed {} (the same seed makes the same calls of each method). Calls abandoned at the end of the run are in no method's count.",
            counted(plain.len(), "method"),
            mix.seed
        )) + &html::table(
            &[
                "method", "weight", "calls", "req/s", "p50", "p90", "p99", "errors",
            ],
            &rows,
            true,
        ) + &html::figure(
            charts::bar_chart(
                "Each method's p99 latency (successful calls)",
                "p99 (ms)",
                &bars,
                ms,
                BarColours::Single,
            ),
            "One bar per method: which of the mix is slow at the tail.",
            &html::table(&["method", "p99"], &p99_rows, false),
        ),
    }
}

/// `n` things, singular or plural: "1 flow", "2 flows".
fn counted(n: usize, thing: &str) -> String {
    match n {
        1 => format!("1 {thing}"),
        n => format!("{n} {thing}s"),
    }
}

/// A workload's flows: each flow's runs, then each step's calls, and each step's p99 (a
/// section only with flows).
fn flows_section(load: &JsonReport) -> Section {
    let mut section = Section {
        id: "flows".to_owned(),
        heading: "Flows".to_owned(),
        body: String::new(),
    };
    let Some(mix) = load.mix.as_ref().filter(|mix| !mix.flows.is_empty()) else {
        return section;
    };
    let at =
        |latency: &LatencyStats, percentage: f64| latency.at(percentage).map(|ns| ns as f64 / 1e6);
    let number = |value: u64| Cell::number(value.to_string(), value as f64);
    let flow_rows: Vec<Vec<Cell>> = mix
        .flows
        .iter()
        .map(|flow| {
            vec![
                Cell::text(flow.name.clone()),
                Cell::number(
                    format!("{} ({})", flow.weight, percent(flow.share * 100.0)),
                    flow.share,
                ),
                number(flow.count),
                Cell::number(count(flow.rps), flow.rps),
                latency_cell(at(&flow.latency, 50.0)),
                latency_cell(at(&flow.latency, 90.0)),
                latency_cell(at(&flow.latency, 99.0)),
                number(flow.passed),
                number(flow.errors),
                number(flow.unexpected),
            ]
        })
        .collect();
    let steps: Vec<_> = mix
        .methods
        .iter()
        .filter_map(|method| Some((method.flow.as_deref()?, method)))
        .collect();
    let step_rows: Vec<Vec<Cell>> = steps
        .iter()
        .map(|(flow, step)| {
            vec![
                Cell::text(*flow),
                Cell::text(step.name.clone()),
                number(step.count),
                latency_cell(at(&step.latency, 50.0)),
                latency_cell(at(&step.latency, 90.0)),
                latency_cell(at(&step.latency, 99.0)),
                number(step.errors),
                number(step.unexpected.unwrap_or(0)),
            ]
        })
        .collect();
    let bars: Vec<(String, f64)> = steps
        .iter()
        .map(|(flow, step)| {
            let p99 = at(&step.latency, 99.0).unwrap_or(0.0);
            (format!("{flow} / {}", step.name), p99)
        })
        .collect();
    let bar_rows: Vec<Vec<Cell>> = bars
        .iter()
        .map(|(name, p99)| vec![Cell::text(name.clone()), Cell::number(ms(*p99), *p99)])
        .collect();
    // The first reasons a step's reply missed its expectation, per flow.
    let reason_rows: Vec<Vec<Cell>> = mix
        .flows
        .iter()
        .flat_map(|flow| {
            let mut reasons: Vec<_> = flow.unexpected_distribution.iter().collect();
            // Most runs first; the reasons past the kept ones, counted together, last.
            reasons.sort_by_key(|(reason, runs)| {
                (reason.as_str() == OTHER_ERRORS, std::cmp::Reverse(**runs))
            });
            reasons.into_iter().take(5).map(|(reason, runs)| {
                vec![
                    Cell::text(flow.name.clone()),
                    Cell::text(reason.clone()),
                    number(*runs),
                ]
            })
        })
        .collect();
    let mut body = html::paragraph(
        "A flow's run passes when every step met its expectation; its latency runs from its \
         start (its scheduled start, in an open loop) to its last step's end, think times \
         included. A run's error is its first step that failed by status; an unexpected \
         reply (a call that may have ended OK) is counted apart.",
    ) + &html::table(
        &[
            "flow",
            "weight",
            "runs",
            "runs/s",
            "p50",
            "p90",
            "p99",
            "passed",
            "errors",
            "unexpected",
        ],
        &flow_rows,
        true,
    ) + &html::table(
        &[
            "flow",
            "step",
            "calls",
            "p50",
            "p90",
            "p99",
            "errors",
            "unexpected",
        ],
        &step_rows,
        true,
    ) + &html::figure(
        charts::bar_chart(
            "Each step's p99 latency (successful calls)",
            "p99 (ms)",
            &bars,
            ms,
            BarColours::Single,
        ),
        "One bar per step, in each flow's order: which step is slow at the tail.",
        &html::table(&["step", "p99"], &bar_rows, false),
    );
    if !reason_rows.is_empty() {
        body += &html::table(&["flow", "unexpected reply", "runs"], &reason_rows, false);
    }
    section.body = body;
    section
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
