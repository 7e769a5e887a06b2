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
        if result.planned_reconnects > 0 {
            writeln!(
                out,
                "New connections after stream ids ran out: {}",
                result.planned_reconnects
            )?;
        }
        if let Some(note) = starvation_note(result) {
            writeln!(out, "\n{note}")?;
        }
        Ok(out.into_bytes())
    }
}

/// When calls sent during the warmup outlasted every measured call, says so: the percentiles
/// leave them out, and a server that starves some streams can look fast without this line.
pub fn starvation_note(result: &grpclab_load::LoadResult) -> Option<String> {
    let (calls, slowest_ns) = result.warmup_calls_in_window();
    let measured_slowest = result.latency().max();
    (calls > 0 && slowest_ns > measured_slowest).then(|| {
        format!(
            "NOTE: {calls} calls sent during the warmup ended in the measured window; the slowest took {}, longer than any measured call ({}). They are not in the figures above: the server may be keeping some streams waiting (a longer warmup or window shows it).",
            human(slowest_ns),
            human(measured_slowest)
        )
    })
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
    use super::{human, starvation_note};
    use grpclab_load::{EndReason, LoadResult, Recorder};
    use std::time::Duration;

    #[test]
    fn warmup_calls_slower_than_every_measured_call_get_a_note() {
        let mut recorder = Recorder::new(false);
        recorder.record_ok(Duration::from_millis(2), Duration::ZERO, Duration::ZERO);
        recorder.record_warmup_call_in_window(Duration::from_millis(1));
        let mut result = LoadResult {
            started_at: std::time::SystemTime::now(),
            elapsed: Duration::from_secs(1),
            end_reason: EndReason::Timeout,
            recorder,
            reconnects: 0,
            planned_reconnects: 0,
            abandoned: 0,
        };
        assert_eq!(
            starvation_note(&result),
            None,
            "faster than the measured calls"
        );
        result
            .recorder
            .record_warmup_call_in_window(Duration::from_millis(1500));
        let note = starvation_note(&result).unwrap();
        assert!(note.contains("2 calls sent during the warmup"), "{note}");
        assert!(note.contains("1.50 s"), "{note}");
    }

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(human(999), "999 ns");
        assert_eq!(human(1_500), "1.50 µs");
        assert_eq!(human(26_430_000), "26.43 ms");
        assert_eq!(human(2_060_000_000), "2.06 s");
    }
}
