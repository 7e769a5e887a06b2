//! Live metrics while a run goes (`--metrics-addr` on `load` and `bench`), in Prometheus'
//! text format, for the dashboards teams already have.
//!
//! The engine is never asked for anything: the controller thread already takes a progress
//! snapshot ten times a second (counters the client threads keep anyway, and each finished
//! second's latency histogram); [`LiveMetrics::update`] copies it under a lock the scraper
//! takes too. A scrape reads that copy, so its cost falls on the HTTP thread ([`server`]).
//! When a row ends, [`LiveMetrics::finish`] sets every figure to the final result's, so the
//! last scrape equals what the report says.
//!
//! Counters only grow: a snapshot never lowers one (the final result counts the same calls).

pub mod server;

use std::sync::{Arc, Mutex};

use grpclab_core::Code;
use grpclab_load::{LatencyBuckets, LoadResult, ProgressSnapshot, LATENCY_BUCKET_BOUNDS_NS};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// One row's figures (a bench row, or the one load run).
#[derive(Debug, Clone, Default, PartialEq)]
struct RowFigures {
    completed: u64,
    errors_by_code: [u64; Code::COUNT],
    in_flight: u64,
    achieved_rps: f64,
    offered_rps: Option<f64>,
    latency: Option<LatencyBuckets>,
    finished: bool,
}

/// The figures of every row so far, read by the scraper.
#[derive(Debug, Default)]
pub struct LiveMetrics {
    rows: Mutex<Vec<(String, RowFigures)>>,
    /// Rows finished so far (changed under the `rows` lock).
    finished_rows: std::sync::atomic::AtomicU64,
    /// The most finished rows any scrape has read.
    finished_rows_read: Mutex<u64>,
    finished_rows_read_changed: std::sync::Condvar,
}

impl LiveMetrics {
    /// No rows yet.
    pub fn new() -> Arc<LiveMetrics> {
        Arc::new(LiveMetrics::default())
    }

    fn with_row(&self, row: &str, change: impl FnOnce(&mut RowFigures)) {
        let Ok(mut rows) = self.rows.lock() else {
            return;
        };
        let figures = match rows.iter().position(|(name, _)| name == row) {
            Some(index) => &mut rows[index].1,
            None => {
                rows.push((row.to_owned(), RowFigures::default()));
                let last = rows.len() - 1;
                &mut rows[last].1
            }
        };
        let was_finished = figures.finished;
        change(figures);
        if figures.finished && !was_finished {
            self.finished_rows
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A progress snapshot of `row`.
    pub fn update(&self, row: &str, snapshot: &ProgressSnapshot) {
        self.with_row(row, |figures| {
            figures.completed = figures.completed.max(snapshot.completed);
            for (total, now) in figures
                .errors_by_code
                .iter_mut()
                .zip(snapshot.errors_by_code.iter())
            {
                *total = (*total).max(*now);
            }
            figures.in_flight = snapshot.in_flight;
            figures.achieved_rps = snapshot.current_rps;
            figures.offered_rps = snapshot.offered_rps;
            if let Some(buckets) = snapshot.latency_buckets {
                if figures.latency.is_none_or(|old| buckets.count >= old.count) {
                    figures.latency = Some(buckets);
                }
            }
        });
    }

    /// `row` ended with `result`: every figure becomes the result's.
    pub fn finish(&self, row: &str, result: &LoadResult) {
        let failed = |code: Code| result.recorder.status[code as usize];
        self.set_final(
            row,
            result.count(),
            &failed,
            result.rps(),
            Some(LatencyBuckets::of(result.latency())),
        );
    }

    /// A bench `row` ended: every figure becomes its saved load report's.
    pub fn finish_saved(&self, row: &str, load: &grpclab_results::model::JsonReport) {
        let failed = |code: Code| {
            load.status_code_distribution
                .get(code.name())
                .copied()
                .unwrap_or(0)
        };
        let latency = load
            .latency_histogram()
            .map(|histogram| LatencyBuckets::of(&histogram));
        self.set_final(row, load.count, &failed, load.measured_rps, latency);
    }

    /// A row's final figures: counters raised to them (never lowered), gauges set.
    fn set_final(
        &self,
        row: &str,
        completed: u64,
        failed: &dyn Fn(Code) -> u64,
        rps: f64,
        latency: Option<LatencyBuckets>,
    ) {
        self.with_row(row, |figures| {
            figures.completed = figures.completed.max(completed);
            for code in Code::ALL.into_iter().filter(|code| *code != Code::Ok) {
                let slot = &mut figures.errors_by_code[code as usize];
                *slot = (*slot).max(failed(code));
            }
            figures.in_flight = 0;
            figures.achieved_rps = rps;
            if latency.is_some() {
                figures.latency = latency;
            }
            figures.finished = true;
        });
    }

    /// After the run: waits until a scrape has read every finished row's final figures, at
    /// most `linger` (`--metrics-linger`, so a scraper on a 15 s interval sees the end).
    /// Returns whether one did.
    pub fn wait_for_final_scrape(&self, linger: std::time::Duration) -> bool {
        let finished = self.finished_rows.load(std::sync::atomic::Ordering::SeqCst);
        let Ok(read) = self.finished_rows_read.lock() else {
            return false;
        };
        self.finished_rows_read_changed
            .wait_timeout_while(read, linger, |read| *read < finished)
            .map(|(read, _)| *read >= finished)
            .unwrap_or(false)
    }

    /// The Prometheus text exposition of every row (`# EOF`-terminated OpenMetrics-style
    /// text from `prometheus-client`).
    pub fn encode(self: &Arc<Self>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape(Arc::clone(self))));
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }
}

/// One scrape's view of the metrics.
#[derive(Debug)]
struct Scrape(Arc<LiveMetrics>);

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let rows = match self.0.rows.lock() {
            // Read under the lock that guards the count: these rows are at least that final.
            Ok(rows) => {
                let finished = self
                    .0
                    .finished_rows
                    .load(std::sync::atomic::Ordering::SeqCst);
                if let Ok(mut read) = self.0.finished_rows_read.lock() {
                    *read = (*read).max(finished);
                    self.0.finished_rows_read_changed.notify_all();
                }
                rows.clone()
            }
            Err(_) => return Ok(()),
        };
        {
            let mut family = encoder.encode_descriptor(
                "grpclab_calls",
                "Calls completed in the measured window, by final status",
                None,
                MetricType::Counter,
            )?;
            for (row, figures) in &rows {
                let errors: u64 = figures.errors_by_code.iter().sum();
                let ok = figures.completed.saturating_sub(errors);
                let labels = [("row", row.as_str()), ("status", "OK")];
                ConstCounter::new(ok).encode(family.encode_family(&labels)?)?;
                for (index, count) in figures.errors_by_code.iter().enumerate() {
                    if *count == 0 {
                        continue;
                    }
                    let Some(code) = Code::ALL.get(index) else {
                        continue;
                    };
                    let labels = [("row", row.as_str()), ("status", code.name())];
                    ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "grpclab_call_latency_seconds",
                "Latency of the measured calls (whole seconds so far; final at the row's end)",
                None,
                MetricType::Histogram,
            )?;
            for (row, figures) in &rows {
                let Some(latency) = figures.latency else {
                    continue;
                };
                let mut buckets = Vec::with_capacity(LATENCY_BUCKET_BOUNDS_NS.len() + 1);
                let mut below = 0;
                for (bound, cumulative) in LATENCY_BUCKET_BOUNDS_NS.iter().zip(latency.cumulative) {
                    buckets.push((*bound as f64 / 1e9, cumulative.saturating_sub(below)));
                    below = cumulative.max(below);
                }
                buckets.push((f64::INFINITY, latency.count.saturating_sub(below)));
                let labels = [("row", row.as_str())];
                family
                    .encode_family(&labels)?
                    .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                        latency.sum_ns / 1e9,
                        latency.count,
                        &buckets,
                        None,
                    )?;
            }
        }
        type Gauge = (&'static str, &'static str, fn(&RowFigures) -> Option<f64>);
        let gauges: [Gauge; 4] = [
            (
                "grpclab_in_flight_calls",
                "Calls in flight",
                |f| Some(f.in_flight as f64),
            ),
            (
                "grpclab_offered_rate",
                "The rate asked for, calls per second (open loop only)",
                |f| f.offered_rps,
            ),
            (
                "grpclab_achieved_rate",
                "Calls completed per second over the last tenth of a second (the whole window's at the end)",
                |f| Some(f.achieved_rps),
            ),
            (
                "grpclab_row_finished",
                "1 once the row's run ended and its figures are final",
                |f| Some(if f.finished { 1.0 } else { 0.0 }),
            ),
        ];
        for (name, help, value) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (row, figures) in &rows {
                if let Some(value) = value(figures) {
                    let labels = [("row", row.as_str())];
                    ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(completed: u64, unavailable: u64) -> ProgressSnapshot {
        let mut errors_by_code = [0; Code::COUNT];
        errors_by_code[Code::Unavailable as usize] = unavailable;
        ProgressSnapshot {
            measured: std::time::Duration::from_secs(1),
            warming_up: false,
            completed,
            errors: unavailable,
            current_rps: 100.0,
            target: grpclab_load::ProgressTarget::Total(1000),
            errors_by_code,
            last_second: None,
            in_flight: 4,
            offered_rps: None,
            latency_buckets: None,
        }
    }

    #[test]
    fn counters_never_go_down_and_every_row_is_labelled() {
        let metrics = LiveMetrics::new();
        metrics.update("lab", &snapshot(10, 2));
        metrics.update("lab", &snapshot(7, 1));
        metrics.update("tonic-mt", &snapshot(5, 0));
        let text = metrics.encode();
        assert!(
            text.contains("grpclab_calls_total{row=\"lab\",status=\"OK\"} 8"),
            "{text}"
        );
        assert!(
            text.contains("grpclab_calls_total{row=\"lab\",status=\"Unavailable\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("grpclab_in_flight_calls{row=\"tonic-mt\"} 4.0"),
            "{text}"
        );
        assert!(text.contains("# TYPE grpclab_calls counter"), "{text}");
    }
}
