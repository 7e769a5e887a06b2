//! JSON (`-O json`, and `-O pretty` indented): the run's [`JsonReport`] as ghz writes its
//! report; the document itself is [`crate::model::JsonReport`].

use super::{Exporter, RenderError};
use crate::model::{JsonReport, Report};

/// Renders [`JsonReport`] on one line, as ghz's `-O json` does.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn render(&self, report: &Report) -> Result<Vec<u8>, RenderError> {
        let mut bytes = serde_json::to_vec(&JsonReport::from_report(report))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// Renders [`JsonReport`] indented by two spaces, as ghz's `-O pretty` does.
pub struct PrettyJsonExporter;

impl Exporter for PrettyJsonExporter {
    fn render(&self, report: &Report) -> Result<Vec<u8>, RenderError> {
        let mut bytes = serde_json::to_vec_pretty(&JsonReport::from_report(report))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}
