//! The figures a document is made of: latency statistics and percentiles, ghz's histogram,
//! the per-second series, the serialized HdrHistograms, per-address shares, and the ghz
//! conventions (Go durations, RFC 3339 dates) they are written in.

use grpclab_load::{EndReason, LoadResult};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

use super::*;

/// One point of ghz's latency distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GhzLatencyPoint {
    /// The percentile, an integer as in ghz (10, 25, 50, 75, 90, 95, 99).
    pub percentage: u32,
    /// Nanoseconds.
    pub latency: u64,
}

/// One point of grpclab's finer latency distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    /// The percentile, e.g. 99.9.
    pub percentage: f64,
    /// Nanoseconds.
    pub latency: u64,
}

/// One bar of ghz's response-time histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramBucket {
    /// The bucket's upper bound, in seconds (ghz's unit for marks).
    pub mark: f64,
    /// Successful calls at or under the mark and above the previous one.
    pub count: u64,
    /// `count` as a fraction of the successful calls.
    pub frequency: f64,
}

/// One call of ghz's per-call `details`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallDetailJson {
    /// When the call ended (RFC 3339 with nanoseconds).
    pub timestamp: String,
    /// Nanoseconds.
    pub latency: u64,
    /// Empty for a successful call, else grpc-go's error text.
    pub error: String,
    /// The status name (`OK`, `Unavailable`, ...).
    pub status: String,
    /// grpclab, a mix: the method the call called; omitted for a run of one method.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub method: String,
    /// grpclab, a flow step (`method` is the step): the number of its flow's run (from 1,
    /// one sequence for the run); omitted for a plain call.
    #[serde(
        default,
        rename = "flowRun",
        skip_serializing_if = "super::document::is_zero"
    )]
    pub flow_run: u64,
}

/// Summary statistics of one histogram at grpclab's percentiles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyStats {
    /// How many values the histogram holds.
    #[serde(default)]
    pub count: u64,
    /// Mean, in nanoseconds.
    pub average: u64,
    /// Fastest, in nanoseconds.
    pub fastest: u64,
    /// Slowest, in nanoseconds.
    pub slowest: u64,
    /// At grpclab's percentiles (ghz's seven, then 99.9 and 99.99).
    pub latency_distribution: Vec<LatencyPoint>,
}

impl LatencyStats {
    /// The latency at `percentage` (one of grpclab's percentiles), in nanoseconds; `None` for
    /// another percentage or an empty histogram.
    pub fn at(&self, percentage: f64) -> Option<u64> {
        self.latency_distribution
            .iter()
            .find(|point| point.percentage == percentage)
            .map(|point| point.latency)
    }

    /// The statistics of `histogram` (zeros when it is empty).
    pub fn of(histogram: &Histogram<u64>) -> LatencyStats {
        let empty = histogram.is_empty();
        LatencyStats {
            count: histogram.len(),
            average: if empty {
                0
            } else {
                histogram.mean().round() as u64
            },
            fastest: if empty { 0 } else { histogram.min() },
            slowest: if empty { 0 } else { histogram.max() },
            latency_distribution: if empty {
                Vec::new()
            } else {
                PERCENTILES
                    .iter()
                    .map(|p| LatencyPoint {
                        percentage: *p,
                        latency: histogram.value_at_percentile(*p),
                    })
                    .collect()
            },
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
    /// The most calls outstanding when one of this second's calls ended (summed over client
    /// threads; see `SecondStats::in_flight_max`).
    #[serde(default)]
    pub in_flight_max: u64,
    /// Median latency of this second's successful calls, ns (2 significant digits; 0 if none).
    #[serde(default)]
    pub p50: u64,
    /// 99th percentile of the same, ns.
    #[serde(default)]
    pub p99: u64,
    /// A generator among several (`--shard`, `--start-at`) and merges: the wall-clock
    /// second (Unix) this second began in, the key several generators' series line up by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix_second: Option<u64>,
}

/// The serialized histograms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// What the server's HTTP/2 frames allowed the client (grpclab's engine reads them off the
/// wire): its windows, streams at once and frame size, the largest over the connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerWindows {
    /// SETTINGS_INITIAL_WINDOW_SIZE in its first SETTINGS, in bytes.
    pub stream_window_first: u32,
    /// The largest stream window it advertised (above the first: a window it grew).
    pub stream_window_largest: u32,
    /// The largest connection window it left open, in bytes.
    pub connection_window_largest: u32,
    /// SETTINGS_MAX_CONCURRENT_STREAMS, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_streams: Option<u32>,
    /// SETTINGS_MAX_FRAME_SIZE, in bytes.
    pub max_frame_size: u32,
}

impl From<grpclab_load::PeerWindows> for ServerWindows {
    fn from(seen: grpclab_load::PeerWindows) -> ServerWindows {
        ServerWindows {
            stream_window_first: seen.stream_window_first,
            stream_window_largest: seen.stream_window_largest,
            connection_window_largest: seen.connection_window_largest,
            max_concurrent_streams: seen.max_concurrent_streams,
            max_frame_size: seen.max_frame_size,
        }
    }
}

impl From<ServerWindows> for grpclab_load::PeerWindows {
    fn from(saved: ServerWindows) -> grpclab_load::PeerWindows {
        grpclab_load::PeerWindows {
            stream_window_first: saved.stream_window_first,
            stream_window_largest: saved.stream_window_largest,
            connection_window_largest: saved.connection_window_largest,
            max_concurrent_streams: saved.max_concurrent_streams,
            max_frame_size: saved.max_frame_size,
        }
    }
}

impl ServerWindows {
    /// One line: `stream 1 MiB (grew from 64 KiB), connection 16 MiB open at most, 100
    /// streams at once, frames up to 16 KiB`. The connection figure is the most the server
    /// left open: its window less what was in flight when it said so.
    pub fn describe(&self) -> String {
        let size = |bytes: u32| match bytes {
            b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
            b if b >= 1 << 20 => format!("{:.2} MiB", f64::from(b) / f64::from(1u32 << 20)),
            b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{} KiB", b >> 10),
            b if b >= 1 << 10 => format!("{:.1} KiB", f64::from(b) / 1024.0),
            b => format!("{b} B"),
        };
        let mut text = format!("stream {}", size(self.stream_window_largest));
        if grpclab_load::PeerWindows::from(*self).stream_window_grew() {
            text.push_str(&format!(" (grew from {})", size(self.stream_window_first)));
        }
        text.push_str(&format!(
            ", connection {} open at most",
            size(self.connection_window_largest)
        ));
        if let Some(streams) = self.max_concurrent_streams {
            text.push_str(&format!(", {streams} streams at once"));
        }
        text.push_str(&format!(", frames up to {}", size(self.max_frame_size)));
        text
    }
}

/// How the server's windows held the client's requests back (grpclab's engine measures it
/// where a request blocks), over the whole run, summed over connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowWaits {
    /// Requests that waited with the connection window spent.
    pub connection: u64,
    /// Requests that waited for their stream's window only.
    pub stream: u64,
    /// Time some request on a connection waited, summed over connections, ns.
    pub waited_ns: u64,
}

impl WindowWaits {
    /// The engine's waits, or `None` when nothing waited.
    pub fn of(waits: &grpclab_load::WindowWaits) -> Option<WindowWaits> {
        (!waits.is_empty()).then(|| WindowWaits {
            connection: waits.connection,
            stream: waits.stream,
            waited_ns: u64::try_from(waits.waited.as_nanos()).unwrap_or(u64::MAX),
        })
    }
}

impl From<WindowWaits> for grpclab_load::WindowWaits {
    fn from(saved: WindowWaits) -> grpclab_load::WindowWaits {
        grpclab_load::WindowWaits {
            connection: saved.connection,
            stream: saved.stream,
            waited: Duration::from_nanos(saved.waited_ns),
        }
    }
}

/// Which calls `details` holds, when it holds fewer than all of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetailsKept {
    /// Calls listed.
    pub kept: u64,
    /// Calls measured.
    pub of: u64,
    /// How they were chosen: `first` (the first that ended).
    pub which: String,
}

/// One of the target's addresses, how many of the run's connections dialled it at the start
/// and how many measured calls ended on connections to it (an address a re-resolution brought
/// during the run is listed after the others, with 0 connections at the start).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressShare {
    /// `IP:PORT`.
    pub address: String,
    /// Connections to it.
    pub connections: u64,
    /// Measured calls that ended on those connections (sent there, or failed while the
    /// connection was down); calls abandoned at the drain limit are in no address's count.
    #[serde(default)]
    pub calls: u64,
}

impl AddressShare {
    /// The shares of a run: round_robin gives connection i to address i mod n, pick_first
    /// every connection to the first (the one that accepted); the calls are the run's count.
    pub fn of(options: &RunOptions, result: &LoadResult) -> Vec<AddressShare> {
        let count = options.addresses.len();
        let listed: Vec<String> = if result.addresses.len() > count {
            result.addresses.iter().map(ToString::to_string).collect()
        } else {
            options.addresses.clone()
        };
        if listed.len() < 2 {
            return Vec::new();
        }
        let connections = options.connections as u64;
        listed
            .iter()
            .enumerate()
            .map(|(index, address)| AddressShare {
                address: address.clone(),
                connections: if index >= count.max(1) {
                    0
                } else if options.lb_strategy == "round_robin" {
                    connections / count as u64
                        + u64::from((index as u64) < connections % count as u64)
                } else if index == 0 {
                    connections
                } else {
                    0
                },
                calls: result.calls_by_address.get(index).copied().unwrap_or(0),
            })
            .collect()
    }
}

/// ghz's name for why a run ended.
pub fn ghz_end_reason(reason: EndReason) -> &'static str {
    match reason {
        EndReason::Total => "normal",
        EndReason::Timeout => "timeout",
        EndReason::Cancel => "cancel",
    }
}

/// ghz's seven percentiles; none without a successful call (as ghz).
pub fn ghz_percentiles(latency: &Histogram<u64>) -> Vec<GhzLatencyPoint> {
    if latency.is_empty() {
        return Vec::new();
    }
    GHZ_PERCENTILES
        .iter()
        .map(|p| GhzLatencyPoint {
            percentage: *p,
            latency: latency.value_at_percentile(f64::from(*p)),
        })
        .collect()
}

/// ghz's response-time histogram: 11 marks from the fastest to the slowest call, 10 equal
/// steps apart; each call counts under the first mark at or above it. None without a
/// successful call (as ghz). Computed from the HdrHistogram, so a call sits at its recorded
/// value (within 0.1 %).
pub fn ghz_histogram(latency: &Histogram<u64>) -> Vec<HistogramBucket> {
    const STEPS: u64 = 10;
    if latency.is_empty() {
        return Vec::new();
    }
    let (fastest, slowest) = (latency.min(), latency.max());
    let step = (slowest - fastest) as f64 / STEPS as f64;
    let marks: Vec<f64> = (0..STEPS)
        .map(|i| fastest as f64 + step * i as f64)
        .chain(std::iter::once(slowest as f64))
        .collect();
    let mut counts = vec![0u64; marks.len()];
    for value in latency.iter_recorded() {
        // The lowest value of the recorded bucket: min() is one, so the first mark fills.
        let at = latency.lowest_equivalent(value.value_iterated_to()) as f64;
        let index = marks
            .iter()
            .position(|mark| at <= *mark)
            .unwrap_or(marks.len() - 1);
        counts[index] += value.count_at_value();
    }
    let calls = latency.len() as f64;
    marks
        .iter()
        .zip(counts)
        .map(|(mark, count)| HistogramBucket {
            mark: mark / 1e9,
            count,
            frequency: count as f64 / calls,
        })
        .collect()
}

/// RFC 3339 with nanoseconds, in UTC (Go's `time.RFC3339Nano` trims trailing zeros; both read
/// back as the same instant).
pub fn rfc3339_nanos(at: SystemTime) -> String {
    humantime::format_rfc3339_nanos(at).to_string()
}

/// A duration in whole nanoseconds, saturating (Go's `time.Duration` unit).
pub fn saturating_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use grpclab_load::recorder::new_histogram;

    #[test]
    fn histogram_marks_run_from_fastest_to_slowest_in_ten_steps() {
        let mut latency = new_histogram();
        for ms in [10u64, 10, 12, 15, 20, 30, 110] {
            latency.record(ms * 1_000_000).unwrap();
        }
        let buckets = ghz_histogram(&latency);
        assert_eq!(buckets.len(), 11);
        assert!((buckets[0].mark - 0.010).abs() < 1e-4, "{buckets:?}");
        assert!((buckets[10].mark - 0.110).abs() < 1e-3, "{buckets:?}");
        assert!((buckets[1].mark - 0.020).abs() < 1e-3, "{buckets:?}");
        let counts: Vec<u64> = buckets.iter().map(|b| b.count).collect();
        // 10,10 at the first mark; 12,15,20 at or under 20 ms; 30 under 30 ms; 110 last.
        assert_eq!(counts, [2, 3, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
        let total: f64 = buckets.iter().map(|b| b.frequency).sum();
        assert!((total - 1.0).abs() < 1e-9);
        assert!(ghz_histogram(&new_histogram()).is_empty());
    }

    #[test]
    fn ghz_percentiles_are_the_seven_integers() {
        let mut latency = new_histogram();
        for us in 1..=100u64 {
            latency.record(us * 1_000).unwrap();
        }
        let points = ghz_percentiles(&latency);
        let percentages: Vec<u32> = points.iter().map(|p| p.percentage).collect();
        assert_eq!(percentages, [10, 25, 50, 75, 90, 95, 99]);
        // Nearest rank, as ghz: the 50th of 100 sorted values.
        assert_eq!(points[2].latency / 1_000, 50);
        assert!(ghz_percentiles(&new_histogram()).is_empty());
    }
}
