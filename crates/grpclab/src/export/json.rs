//! JSON: everything, with ghz's field names where they overlap (`count`, `total`, `average`,
//! `fastest`, `slowest`, `rps`, `latencyDistribution`, `statusCodeDistribution`,
//! `errorDistribution`), durations in integer nanoseconds as ghz writes them, and the merged
//! histograms in HdrHistogram's standard serialized form so runs can be merged exactly.

use grpclab_load::{encode_histogram, EndReason};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::{Exporter, Report, PERCENTILES};

/// One point of a latency distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    /// The percentile, e.g. 99.9.
    pub percentage: f64,
    /// Nanoseconds.
    pub latency: u64,
}

/// Summary statistics of one histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyStats {
    /// Mean, in nanoseconds.
    pub average: u64,
    /// Fastest, in nanoseconds.
    pub fastest: u64,
    /// Slowest, in nanoseconds.
    pub slowest: u64,
    /// At ghz's percentiles.
    pub latency_distribution: Vec<LatencyPoint>,
}

impl LatencyStats {
    /// The statistics of `histogram` (zeros when it is empty).
    pub fn of(histogram: &Histogram<u64>) -> LatencyStats {
        let empty = histogram.is_empty();
        LatencyStats {
            average: if empty {
                0
            } else {
                histogram.mean().round() as u64
            },
            fastest: if empty { 0 } else { histogram.min() },
            slowest: if empty { 0 } else { histogram.max() },
            latency_distribution: PERCENTILES
                .iter()
                .map(|p| LatencyPoint {
                    percentage: *p,
                    latency: if empty {
                        0
                    } else {
                        histogram.value_at_percentile(*p)
                    },
                })
                .collect(),
        }
    }
}

/// One second of the series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecondPoint {
    /// Seconds since the measured window began.
    pub second: u64,
    /// Calls completed.
    pub count: u64,
    /// Of those, failed.
    pub errors: u64,
    /// Mean latency of the successful calls, in nanoseconds.
    pub average: Option<u64>,
    /// Slowest successful call, in nanoseconds.
    pub slowest: u64,
}

/// The serialized histograms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HdrHistograms {
    /// What the values mean.
    pub unit: String,
    /// How they are encoded.
    pub encoding: String,
    /// Latency of successful calls.
    pub latency: String,
    /// Open loop: the uncorrected service time.
    pub service_time: Option<String>,
}

/// The JSON document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JsonReport {
    /// When the measured window began (RFC 3339).
    pub date: String,
    /// `timeout`, `total` or `cancel`.
    pub end_reason: EndReason,
    /// The settings (free-form for readers).
    pub options: serde_json::Value,
    /// Measured calls.
    pub count: u64,
    /// Of those, OK.
    pub ok: u64,
    /// Of those, failed.
    pub errors: u64,
    /// The measured window in nanoseconds.
    pub total: u64,
    /// Calls per second.
    pub rps: f64,
    /// Mean latency of successful calls, in nanoseconds.
    pub average: u64,
    /// Fastest successful call.
    pub fastest: u64,
    /// Slowest successful call.
    pub slowest: u64,
    /// Latency percentiles.
    pub latency_distribution: Vec<LatencyPoint>,
    /// Open loop: what latency would read without the coordinated-omission correction.
    pub service_time: Option<LatencyStats>,
    /// Calls per status name.
    pub status_code_distribution: BTreeMap<String, u64>,
    /// Failed calls per message.
    pub error_distribution: BTreeMap<String, u64>,
    /// Connections re-established during the run.
    pub reconnects: u64,
    /// New connections opened because a connection's stream ids ran out (no call failed).
    #[serde(default)]
    pub planned_reconnects: u64,
    /// Calls abandoned at the end (counted as Canceled).
    pub abandoned: u64,
    /// Calls sent during the warmup that ended in the measured window (not in the figures).
    #[serde(default)]
    pub warmup_calls_in_window: u64,
    /// The slowest of those, in nanoseconds: above `slowest`, the server kept some streams
    /// waiting longer than any measured call.
    #[serde(default)]
    pub warmup_call_slowest: u64,
    /// Second by second.
    pub per_second: Vec<SecondPoint>,
    /// The merged histograms.
    pub hdr_histogram: HdrHistograms,
}

impl JsonReport {
    /// Builds the document for a report.
    pub fn from_report(report: &Report) -> JsonReport {
        let result = &report.result;
        let latency = LatencyStats::of(result.latency());
        JsonReport {
            date: humantime::format_rfc3339_millis(result.started_at).to_string(),
            end_reason: result.end_reason,
            options: serde_json::to_value(&report.options).unwrap_or_default(),
            count: result.count(),
            ok: result.ok(),
            errors: result.errors(),
            total: u64::try_from(result.elapsed.as_nanos()).unwrap_or(u64::MAX),
            rps: result.rps(),
            average: latency.average,
            fastest: latency.fastest,
            slowest: latency.slowest,
            latency_distribution: latency.latency_distribution,
            service_time: result.service_time().map(LatencyStats::of),
            status_code_distribution: result
                .status_counts()
                .into_iter()
                .map(|(code, count)| (code.name().to_owned(), count))
                .collect(),
            error_distribution: result.error_counts().clone(),
            reconnects: result.reconnects,
            planned_reconnects: result.planned_reconnects,
            abandoned: result.abandoned,
            warmup_calls_in_window: result.warmup_calls_in_window().0,
            warmup_call_slowest: result.warmup_calls_in_window().1,
            per_second: result
                .per_second()
                .iter()
                .enumerate()
                .map(|(second, stats)| SecondPoint {
                    second: second as u64,
                    count: stats.count,
                    errors: stats.errors,
                    average: stats.mean_latency_ns(),
                    slowest: stats.latency_max_ns,
                })
                .collect(),
            hdr_histogram: HdrHistograms {
                unit: "nanoseconds".to_owned(),
                encoding: "HdrHistogram V2 compressed (deflate), base64".to_owned(),
                latency: encode_histogram(result.latency()),
                service_time: result.service_time().map(encode_histogram),
            },
        }
    }
}

/// Renders [`JsonReport`].
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(&JsonReport::from_report(report))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}
