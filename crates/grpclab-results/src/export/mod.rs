//! Exporters: one per output format behind one trait. They only render a finished
//! [`Report`]; they never measure.

mod csv;
mod csv_seconds;
mod influx;
mod json;
mod prometheus;
mod summary;

pub use self::csv::CsvExporter;
pub use self::csv_seconds::CsvSecondsExporter;
pub use self::influx::{InfluxDetailsExporter, InfluxSummaryExporter};
pub use self::json::{JsonExporter, PrettyJsonExporter};
pub use self::prometheus::PrometheusExporter;
pub use self::summary::{nothing_succeeded, starvation_note, SummaryExporter};

use crate::model::Report;

/// Why a report could not be rendered: the writer or the encoder failed.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// Writing the bytes failed.
    #[error("could not write the report: {0}")]
    Io(#[from] std::io::Error),
    /// Formatting text failed.
    #[error("could not format the report: {0}")]
    Fmt(#[from] std::fmt::Error),
    /// Encoding JSON failed.
    #[error("could not encode the report as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Renders a report in one format.
pub trait Exporter {
    /// The rendered bytes.
    fn render(&self, report: &Report) -> Result<Vec<u8>, RenderError>;
}
