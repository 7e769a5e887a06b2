//! Exporters: one per output format behind one trait. They only render a finished
//! [`Report`]; they never measure.

mod csv;
mod json;
mod summary;

pub use self::csv::CsvExporter;
pub use self::json::{JsonExporter, JsonReport};
pub use self::summary::{starvation_note, SummaryExporter};

use grpclab_load::LoadResult;
use serde::Serialize;

use crate::cli::OutputFormat;

/// The settings a run was made with, as reported beside its results.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunOptions {
    /// The server, as given.
    pub host: String,
    /// `package.Service.Method`.
    pub call: String,
    /// The scenario or .proto the call came from.
    pub scenario: String,
    /// Distinct requests sent round-robin.
    pub distinct_requests: usize,
    /// Streams in flight.
    pub concurrency: usize,
    /// HTTP/2 connections.
    pub connections: usize,
    /// Open-loop rate; 0 = closed loop.
    pub rps: f64,
    /// Measured duration in nanoseconds, if set.
    pub duration: Option<u64>,
    /// Measured calls, if set.
    pub total: Option<u64>,
    /// Warmup in nanoseconds.
    pub warmup: u64,
    /// Per-call timeout in nanoseconds, if any.
    pub timeout: Option<u64>,
    /// Client threads.
    pub cpus: usize,
    /// Whether replies were validated.
    pub validate: bool,
}

/// A finished run with the settings it was made with.
#[derive(Debug, Clone)]
pub struct Report {
    /// The settings.
    pub options: RunOptions,
    /// The measurements.
    pub result: LoadResult,
}

/// Renders a report in one format.
pub trait Exporter {
    /// The rendered bytes.
    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>>;
}

/// The exporter for a format.
pub fn exporter_for(format: OutputFormat) -> Box<dyn Exporter> {
    match format {
        OutputFormat::Summary => Box::new(SummaryExporter),
        OutputFormat::Json => Box::new(JsonExporter),
        OutputFormat::Csv => Box::new(CsvExporter),
    }
}

/// The percentiles ghz reports, as percentages.
pub const PERCENTILES: [f64; 9] = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99];
