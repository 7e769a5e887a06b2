//! The page for a `grpclab compare` folder: each side against A, with intervals.

use std::path::Path;

use super::{count, folder_name, ms, percent};
use crate::report::charts::{self, escape};
use crate::report::html::{self, Cell, Page, Section};
use grpclab_harness::bench::runner::ImplResult;
use grpclab_harness::compare::stats::ratio_text;

/// The page for a `grpclab compare` folder: each side against A, with intervals, in words
/// and as a forest plot; the rounds one by one.
pub fn compare_page(
    dir: &Path,
    report: &grpclab_harness::compare::CompareReport,
    rows: &[ImplResult],
    notes: &[(String, grpclab_results::verdict::previous::StoredNote)],
) -> Page {
    use grpclab_harness::compare::metric::Metric;
    use grpclab_harness::compare::stats::Verdict;
    let level = report.confidence.percent_text();
    let mut verdicts = String::from("<ul>");
    let mut estimates = Vec::new();
    let mut means: Vec<Vec<Cell>> = Vec::new();
    for metric in Metric::ALL {
        let (scale, unit) = metric.scale_and_unit();
        let higher_is_better = metric.better() == grpclab_harness::compare::stats::Better::Higher;
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
            super::previous_section(notes),
        ],
    }
}
