//! `grpclab compare`'s arguments, resolved into a typed comparison.

use std::io::Write;
use std::process::ExitCode;

use super::args::CompareArgs;
use super::bench::bench_config;
use super::exit::{harness_error, verdict_exit};
use super::session::{progress_line, Session};
use crate::InputError;
use grpclab_harness::compare::{CompareOptions, PreparedCompare};

/// `grpclab compare`: prepares, runs the rounds in a session (store, Ctrl-C), prints the
/// comparison and says whether the gate held.
pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let prepared = prepare(args)?;
    let mut session = Session::start(Some(&args.history), None)?;
    let cancel = session.cancel.clone();
    let (report, dir) = grpclab_harness::compare::execute(
        prepared,
        &cancel,
        &mut progress_line(&cancel),
        &super::report::write_page,
    )
    .map_err(harness_error)?;
    let notes = super::history::store_compare(&mut session.history, &report, &dir);
    if !notes.is_empty() {
        // The page again, now with each side against its previous run.
        let written = crate::report::write_notes(&dir, &notes)
            .map_err(|err| err.to_string())
            .and_then(|()| super::report::write_page(&dir).map_err(|err| err.to_string()));
        if let Err(err) = written {
            let _ = writeln!(std::io::stderr(), "WARNING: {err}");
        }
    }
    let text = match args.format {
        super::args::CompareFormat::Text => grpclab_harness::compare::render(&report),
        super::args::CompareFormat::Json => serde_json::to_string_pretty(&report)? + "\n",
    };
    let _ = std::io::stdout().write_all(text.as_bytes());
    let _ = writeln!(std::io::stderr(), "results: {}", dir.display());
    let page = dir.join(crate::report::REPORT_FILE);
    if page.is_file() {
        let _ = writeln!(std::io::stderr(), "report: {}", page.display());
    }
    let failed: Vec<String> = report
        .gate
        .iter()
        .filter(|verdict| verdict.failed)
        .map(|verdict| format!("{} ({})", verdict.expression, verdict.side))
        .collect();
    Ok(verdict_exit(
        &format!("of {} gate rules failed", report.gate.len()),
        &failed,
    ))
}

/// Validates `grpclab compare`'s arguments into a comparison ready to run.
pub fn prepare(args: &CompareArgs) -> Result<PreparedCompare, InputError> {
    let config = bench_config(&args.settings)?;
    let baseline = args
        .baseline
        .as_deref()
        .map(|text| {
            super::history::baseline_source(
                text,
                &args.history.store,
                &grpclab_harness::compare::baseline::RunSettings::of(&config),
            )
        })
        .transpose()?;
    let suite = grpclab_harness::bench::suite_of(args.settings.suite.as_deref())?;
    let options = CompareOptions {
        rounds: args.rounds,
        confidence: args.confidence,
        baseline,
        save_baseline: args.save_baseline.clone(),
        fail_if: args.fail_if.clone(),
    };
    grpclab_harness::compare::prepare(config, &suite, &args.sides, options)
}
