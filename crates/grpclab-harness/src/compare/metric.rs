//! The metrics a comparison judges, in one list: the text table, the JSON, the page and the
//! gate all walk [`Metric::ALL`], so a metric added here shows up everywhere at once.

use super::stats::Better;
use crate::bench::runner::ImplResult;

/// One measured figure of a run that sides are compared on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Calls per second over the measured window (higher is better).
    Rps,
    /// Median latency (lower is better).
    P50,
    /// 99th percentile latency (lower is better).
    P99,
    /// The server's CPU time per call: its CPU over the window divided by the calls served
    /// (lower is better). What a server costs, where req/s alone can hide a server that is
    /// as fast but burns more of its quota.
    CpuPerCall,
}

impl Metric {
    /// Every metric, in the order tables list them.
    pub const ALL: [Metric; 4] = [Metric::Rps, Metric::P50, Metric::P99, Metric::CpuPerCall];

    /// The name tables print and `--fail-if` takes.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Rps => "req/s",
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::CpuPerCall => "cpu/call",
        }
    }

    /// The metric a `--fail-if` name means (`rps` is accepted for `req/s`).
    pub fn from_name(name: &str) -> Option<Metric> {
        match name.trim().to_ascii_lowercase().as_str() {
            "req/s" | "rps" => Some(Metric::Rps),
            "p50" => Some(Metric::P50),
            "p99" => Some(Metric::P99),
            "cpu/call" => Some(Metric::CpuPerCall),
            _ => None,
        }
    }

    /// Which way is better.
    pub fn better(self) -> Better {
        match self {
            Metric::Rps => Better::Higher,
            _ => Better::Lower,
        }
    }

    /// How a value is printed: divide by the scale, append the unit.
    pub fn scale_and_unit(self) -> (f64, &'static str) {
        match self {
            Metric::Rps => (1.0, ""),
            Metric::P50 | Metric::P99 => (1e6, " ms"),
            Metric::CpuPerCall => (1e3, " µs"),
        }
    }

    /// This metric's value in one run (nanoseconds for times), if the run measured it.
    pub fn of(self, run: &ImplResult) -> Option<f64> {
        let load = run.load.as_ref()?;
        match self {
            Metric::Rps => Some(load.measured_rps),
            Metric::P50 => load.percentile(50.0).map(|ns| ns as f64),
            Metric::P99 => load.percentile(99.0).map(|ns| ns as f64),
            Metric::CpuPerCall => {
                let cpu_seconds_per_second = run.usage.cpu_percent / 100.0;
                (load.measured_rps > 0.0 && cpu_seconds_per_second > 0.0)
                    .then(|| cpu_seconds_per_second / load.measured_rps * 1e9)
            }
        }
    }
}
