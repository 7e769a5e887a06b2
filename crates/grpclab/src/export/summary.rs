//! The text summary, laid out like ghz's so its users read it at a glance.

use std::fmt::Write as _;
use std::time::Duration;

use super::json::LatencyStats;
use super::{Exporter, Report};

/// Renders the ghz-style summary.
pub struct SummaryExporter;

impl Exporter for SummaryExporter {
    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        let result = &report.result;
        let latency = LatencyStats::of(result.latency());
        let service = result.service_time().map(LatencyStats::of);
        let mut out = String::new();
        writeln!(out, "\nSummary:")?;
        writeln!(out, "  Count:\t{}", result.count())?;
        writeln!(out, "  Total:\t{}", human(result.elapsed.as_nanos() as u64))?;
        writeln!(out, "  Slowest:\t{}", human(latency.slowest))?;
        writeln!(out, "  Fastest:\t{}", human(latency.fastest))?;
        writeln!(out, "  Average:\t{}", human(latency.average))?;
        writeln!(out, "  Requests/sec:\t{:.2}", result.rps())?;
        writeln!(out, "\nLatency distribution:")?;
        if let Some(service) = &service {
            writeln!(
                out,
                "  (open loop: latency from each call's scheduled send time, coordinated omission\n   corrected; service time from the actual send, uncorrected)"
            )?;
            for (point, service_point) in latency
                .latency_distribution
                .iter()
                .zip(&service.latency_distribution)
            {
                writeln!(
                    out,
                    "  {} % in {}\t(service time {})",
                    point.percentage,
                    human(point.latency),
                    human(service_point.latency)
                )?;
            }
        } else {
            for point in &latency.latency_distribution {
                writeln!(out, "  {} % in {}", point.percentage, human(point.latency))?;
            }
        }
        writeln!(out, "\nStatus code distribution:")?;
        for (code, count) in result.status_counts() {
            writeln!(out, "  [{}]\t{count} responses", code.name())?;
        }
        if !result.error_counts().is_empty() {
            writeln!(out, "\nError distribution:")?;
            for (message, count) in result.error_counts() {
                writeln!(out, "  [{count}]\t{message}")?;
            }
        }
        if result.reconnects > 0 {
            writeln!(out, "\nReconnections: {}", result.reconnects)?;
        }
        Ok(out.into_bytes())
    }
}

/// A duration in the unit ghz would pick: ns, µs, ms or s, with two decimals.
fn human(nanos: u64) -> String {
    let duration = Duration::from_nanos(nanos);
    match nanos {
        0..=999 => format!("{nanos} ns"),
        1_000..=999_999 => format!("{:.2} µs", nanos as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2} ms", nanos as f64 / 1e6),
        _ => format!("{:.2} s", duration.as_secs_f64()),
    }
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(human(999), "999 ns");
        assert_eq!(human(1_500), "1.50 µs");
        assert_eq!(human(26_430_000), "26.43 ms");
        assert_eq!(human(2_060_000_000), "2.06 s");
    }
}
