//! `-O csv-seconds`: the per-second series, one row per second of the measured window.

use super::{Exporter, RenderError};
use crate::model::Report;
use std::fmt::Write as _;

/// Renders the per-second series.
pub struct CsvSecondsExporter;

impl Exporter for CsvSecondsExporter {
    fn render(&self, report: &Report) -> Result<Vec<u8>, RenderError> {
        // A run of streaming calls adds the messages of the calls that ended in each second.
        let streamed = report.result.messages() != (0, 0);
        let mut out =
            String::from("second,count,errors,average_ns,slowest_ns,in_flight_max,p50_ns,p99_ns");
        out.push_str(if streamed {
            ",messages_sent,messages_received\n"
        } else {
            "\n"
        });
        for (second, stats) in report.result.per_second().iter().enumerate() {
            let average = stats
                .mean_latency_ns()
                .map(|ns| ns.to_string())
                .unwrap_or_default();
            write!(
                out,
                "{second},{},{},{average},{},{},{},{}",
                stats.count,
                stats.errors,
                stats.latency_max_ns,
                stats.in_flight_max,
                stats.latency_p50_ns,
                stats.latency_p99_ns
            )?;
            if streamed {
                write!(out, ",{},{}", stats.messages_sent, stats.messages_received)?;
            }
            out.push('\n');
        }
        Ok(out.into_bytes())
    }
}
