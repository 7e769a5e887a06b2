//! `grpclab merge`: read the generators' results, add them ([`crate::merge`]), judge any
//! thresholds on the whole, export as `load` does.

use std::io::Write as _;

use super::args::MergeArgs;
use super::exporter_for;
use crate::InputError;
use grpclab_results::model::Report;
use grpclab_results::verdict::Threshold;

/// `grpclab merge`: merges and writes; exit code 3 when a threshold fails.
pub fn run(args: &MergeArgs) -> anyhow::Result<std::process::ExitCode> {
    let report = execute(args)?;
    Ok(super::exit::thresholds_exit(&report))
}

/// Merges, writes the output (standard output or `-o`) and returns the merged report.
pub fn execute(args: &MergeArgs) -> anyhow::Result<Report> {
    let mut thresholds = args
        .thresholds
        .iter()
        .map(|text| Threshold::parse(text))
        .collect::<Result<Vec<_>, _>>()?;
    let parts = args
        .results
        .iter()
        .map(|path| crate::merge::read(path))
        .collect::<Result<Vec<_>, InputError>>()?;
    let mut report = crate::merge::merge(parts, args.partial)?;
    let per_call = matches!(
        args.format,
        super::args::OutputFormat::Csv | super::args::OutputFormat::InfluxDetails
    );
    if per_call && report.result.details().is_none() {
        return Err(InputError(
            "-O csv and influx-details list calls one by one, and these results kept none: run the generators with --details (or -O json and merge to summary, json or html)".to_owned(),
        )
        .into());
    }
    let names: Vec<&str> = report
        .result
        .methods
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    for threshold in &mut thresholds {
        threshold.resolve_method(&names, "--threshold")?;
    }
    report.thresholds = super::load::judge(&report, &thresholds);
    // The whole run is stored (its parts were not); a partial merge is still a part.
    let mut history = if args.partial {
        grpclab_store::Recorder::off()
    } else {
        super::history::recorder(&args.history)?
    };
    if history.is_on() {
        let json = grpclab_results::model::JsonReport::from_report(&report);
        let source = args
            .output
            .as_deref()
            .map_or_else(|| "standard output".to_owned(), |p| p.display().to_string());
        report.history = super::history::store_load(&mut history, &json, &source);
    }
    // What the reader must know goes where a person looks whatever the format (the
    // summary has the warnings in it already).
    let summary_shown = args.format == super::args::OutputFormat::Summary && args.output.is_none();
    if let Some(facts) = report
        .sharding
        .as_ref()
        .and_then(|s| s.merge.as_ref())
        .filter(|_| !summary_shown)
    {
        for warning in &facts.warnings {
            let _ = writeln!(std::io::stderr(), "grpclab merge: warning: {warning}");
        }
    }
    let bytes = exporter_for(args.format).render(&report)?;
    super::output::write_output(args.output.as_deref(), &bytes)?;
    Ok(report)
}
