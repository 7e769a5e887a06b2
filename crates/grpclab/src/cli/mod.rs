//! The command-line layer: clap's definitions ([`args`]) and one module per verb that turns
//! its flags into the typed settings of the layers below, runs them and prints. Nothing
//! below this layer sees a clap type; the harness ([`crate::bench`], [`crate::compare`]),
//! the renderers ([`crate::export`], [`crate::report`]) and the load engine take typed
//! settings and return typed results.

pub mod args;
pub mod bench;
pub mod compare;
pub mod config_file;
pub mod encode;
pub mod load;
pub mod serve;
pub mod stats;

pub use args::{Cli, Command};

use crate::export::{
    CsvExporter, CsvSecondsExporter, Exporter, InfluxDetailsExporter, InfluxSummaryExporter,
    JsonExporter, PrettyJsonExporter, PrometheusExporter, SummaryExporter,
};
use args::OutputFormat;

/// The exporter for `grpclab load -O FORMAT`.
pub fn exporter_for(format: OutputFormat) -> Box<dyn Exporter> {
    match format {
        OutputFormat::Summary => Box::new(SummaryExporter),
        OutputFormat::Json => Box::new(JsonExporter),
        OutputFormat::Pretty => Box::new(PrettyJsonExporter),
        OutputFormat::Csv => Box::new(CsvExporter),
        OutputFormat::CsvSeconds => Box::new(CsvSecondsExporter),
        OutputFormat::InfluxSummary => Box::new(InfluxSummaryExporter),
        OutputFormat::InfluxDetails => Box::new(InfluxDetailsExporter),
        OutputFormat::Prometheus => Box::new(PrometheusExporter),
        OutputFormat::Html => Box::new(crate::report::LoadPageExporter),
    }
}
