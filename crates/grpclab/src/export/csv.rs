//! `-O csv`: one row per call, as ghz writes it (printer/template.go's `csvTmpl`): a blank
//! first line, the header `duration (ms),status,error`, then each call's latency in
//! milliseconds with two decimals, its status name and its error text (empty when OK).
//!
//! The calls are the ones `--details` kept (the first N; `-O csv` turns details on). One
//! difference from ghz: a field holding a comma, a quote or a line break is quoted as RFC 4180
//! says, where ghz writes it bare and breaks the row.

use std::fmt::Write as _;

use super::{Exporter, Report};

/// Renders the per-call listing.
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        let mut out = String::from("\nduration (ms),status,error");
        if let Some(log) = report.result.details() {
            for call in &log.calls {
                write!(
                    out,
                    "\n{:4.2},{},{}",
                    call.latency_ns as f64 / 1e6,
                    call.code.name(),
                    quoted(call.error.as_deref().unwrap_or_default())
                )?;
            }
        }
        out.push('\n');
        Ok(out.into_bytes())
    }
}

/// `field` as one CSV field: bare when it can be, else quoted with quotes doubled.
fn quoted(field: &str) -> std::borrow::Cow<'_, str> {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\"")).into()
    } else {
        field.into()
    }
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn only_fields_that_need_it_are_quoted() {
        assert_eq!(quoted(""), "");
        assert_eq!(
            quoted("rpc error: code = Internal desc = boom"),
            "rpc error: code = Internal desc = boom"
        );
        assert_eq!(quoted("a, \"b\""), "\"a, \"\"b\"\"\"");
    }
}
