//! `-O csv`: one row per call, as ghz writes it (printer/template.go's `csvTmpl`): a blank
//! first line, the header `duration (ms),status,error`, then each call's latency in
//! milliseconds with two decimals, its status name and its error text (empty when OK).
//!
//! The calls are the ones `--details` kept (the first N; `-O csv` turns details on). Two
//! differences from ghz: a field holding a comma, a quote or a line break is quoted as RFC 4180
//! says, where ghz writes it bare and breaks the row; and a run of streaming calls adds two
//! columns, each call's `messages sent` and `messages received` (unary runs keep ghz's three);
//! a mix adds the call's `method`, and a run with flows each step call's `flow` and `flow run`
//! (the number of the flow's run it belongs to; empty for a plain call).

use std::fmt::Write as _;

use super::{Exporter, RenderError};
use crate::model::Report;

/// Renders the per-call listing.
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn render(&self, report: &Report) -> Result<Vec<u8>, RenderError> {
        let streamed = report.result.messages() != (0, 0);
        let mut out = String::from("\nduration (ms),status,error");
        if streamed {
            out.push_str(",messages sent,messages received");
        }
        let result = &report.result;
        let mixed = !result.methods.is_empty();
        let flows = !result.flows.is_empty();
        if mixed {
            out.push_str(",method");
        }
        if flows {
            out.push_str(",flow,flow run");
        }
        if let Some(log) = report.result.details() {
            for call in &log.calls {
                write!(
                    out,
                    "\n{:4.2},{},{}",
                    call.latency_ns as f64 / 1e6,
                    call.code.name(),
                    quoted(call.error.as_deref().unwrap_or_default())
                )?;
                if streamed {
                    write!(out, ",{},{}", call.messages_sent, call.messages_received)?;
                }
                let method = call.method as usize;
                if mixed {
                    let name = result.methods.get(method).map_or("", |m| m.name.as_str());
                    write!(out, ",{}", quoted(name))?;
                }
                if flows {
                    match result.flow_of_method(method) {
                        Some(flow) => write!(out, ",{},{}", quoted(&flow.name), call.flow_run)?,
                        None => out.push_str(",,"),
                    }
                }
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
    use super::{quoted, CsvExporter};
    use crate::export::Exporter;
    use crate::model::{Report, RunOptions};
    use grpclab_core::Code;
    use grpclab_load::{EndReason, LoadResult, Recorder};
    use std::time::Duration;

    /// ghz's `csvTmpl` by hand: a newline, the header, then per call `%4.2f` milliseconds, the
    /// status name and the error text, and a closing newline.
    #[test]
    fn rows_are_ghz_csv_per_call() {
        let mut recorder = Recorder::new(false, Some(3));
        let ms = Duration::from_millis;
        recorder.record_ok(Duration::from_micros(1_434), ms(1), ms(1));
        recorder.record_error(Code::Unavailable, "refused, twice", ms(12), ms(2));
        recorder.record_ok(Duration::from_micros(390), ms(1), ms(3));
        recorder.record_ok(ms(1), ms(1), ms(4));
        let report = Report {
            history: None,
            options: RunOptions::default(),
            result: LoadResult {
                started_at: std::time::SystemTime::UNIX_EPOCH,
                first_send: std::time::SystemTime::UNIX_EPOCH,
                elapsed: ms(10),
                whole_run: ms(10),
                end_reason: EndReason::Total,
                recorder,
                reconnects: 0,
                planned_reconnects: 0,
                abandoned: 0,
                unsent: 0,
                unsent_by_cause: grpclab_load::Unsent::default(),
                unaccounted: 0,
                render_failures: 0,
                calls_by_address: Vec::new(),
                addresses: Vec::new(),
                methods: Vec::new(),
                flows: Vec::new(),
                ignored: 0,
                server_windows: None,
                window_waits: Default::default(),
            },
            thresholds: Vec::new(),
            bound_by: None,
            sharding: None,
        };
        let text = String::from_utf8(CsvExporter.render(&report).unwrap()).unwrap();
        assert_eq!(
            text,
            "\nduration (ms),status,error\n1.43,OK,\n12.00,Unavailable,\"rpc error: code = Unavailable desc = refused, twice\"\n0.39,OK,\n"
        );
    }

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
