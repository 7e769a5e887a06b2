//! How a verb's end becomes the process's exit code, once its results are written: success,
//! failed verdicts (3, with one line naming each), nothing measured (5), a failure (1), or
//! the user's input (2).

use std::io::Write;
use std::process::ExitCode;

use grpclab_harness::HarnessError;

/// The exit code of a run whose results are written: success, or — when a verdict failed —
/// [`grpclab_results::verdict::EXIT_THRESHOLD`] with one line, "grpclab: N WHAT: each failure".
pub fn verdict_exit(what: &str, failed: &[String]) -> ExitCode {
    if failed.is_empty() {
        return ExitCode::SUCCESS;
    }
    let _ = writeln!(
        std::io::stderr(),
        "grpclab: {} {what}: {}",
        failed.len(),
        failed.join(", ")
    );
    ExitCode::from(grpclab_results::verdict::EXIT_THRESHOLD)
}

/// The exit code of a load-shaped run (`load`, `merge`) from its `--threshold` verdicts.
pub fn thresholds_exit(report: &grpclab_results::model::Report) -> ExitCode {
    let failed: Vec<String> = report
        .thresholds
        .iter()
        .filter(|verdict| !verdict.passed)
        .map(|verdict| format!("{} ({})", verdict.expression, verdict.actual))
        .collect();
    verdict_exit(
        &format!("of {} thresholds failed", report.thresholds.len()),
        &failed,
    )
}

/// The harness's error as the binary reports it: what the user asked for keeps its exit code
/// (2), anything else is a failure (1).
pub fn harness_error(err: HarnessError) -> anyhow::Error {
    match err {
        HarnessError::Input(input) => input.into(),
        other => other.into(),
    }
}
