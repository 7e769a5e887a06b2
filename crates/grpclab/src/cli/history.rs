//! `grpclab history` (list, show, trend, import), and the history flags of the commands that
//! store their runs: which store, and storing a run when it ends.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::args::{
    HistoryAction, HistoryArgs, HistoryFilterArgs, HistoryFlagArgs, HistoryFormat, ReportFormat,
    StoreArgs,
};
use crate::InputError;
use grpclab_store::{
    self as history, Filter, HistoryFlags, Recorder, Store, StoredNote, StoredRun,
};

/// The recorder the flags choose (off with `--no-history`): the one place `--history`
/// crosses from the command line into the store.
pub fn recorder(flags: &HistoryFlagArgs) -> Result<Recorder, InputError> {
    Recorder::open(&store_flags(&flags.store, flags.no_history))
}

/// The store's settings from the flags that name it.
fn store_flags(store: &StoreArgs, off: bool) -> HistoryFlags {
    HistoryFlags {
        location: store.history.clone(),
        password_file: store.password_file.clone(),
        off,
    }
}

/// The store to read for `grpclab history` and `--baseline last`.
fn backend(store: &StoreArgs) -> Result<history::Backend, InputError> {
    match history::resolve(&store_flags(store, false))? {
        history::Location::Store(backend) => Ok(backend),
        history::Location::Unavailable(why) => Err(InputError(format!("no history store: {why}"))),
        history::Location::Off => Err(InputError("no history store".to_owned())),
    }
}

/// Opens the store for reading; a store that is not there yet is said plainly.
fn open(store: &StoreArgs) -> Result<(Store, history::Backend), InputError> {
    let backend = backend(store)?;
    if let history::Backend::Sqlite(path) = &backend {
        if !path.exists() {
            return Err(InputError(format!(
                "no runs stored yet: {} does not exist (every load, bench and compare run stores itself there; or give --history)",
                path.display()
            )));
        }
    }
    Ok((connect(&backend)?, backend))
}

/// Opens (or creates) the store at `backend`; its error said without a password.
fn connect(backend: &history::Backend) -> Result<Store, InputError> {
    Store::open(backend).map_err(|err| {
        InputError(format!(
            "cannot open the history store {}: {}",
            backend.describe(),
            err.redacted(backend)
        ))
    })
}

/// Stores one finished load run (its JSON report as written) and returns what its reports
/// say about it; prints the one line (or the one warning) on stderr.
pub fn store_load(
    recorder: &mut Recorder,
    json: &grpclab_results::model::JsonReport,
    source: &str,
) -> Option<StoredNote> {
    if !recorder.is_on() {
        return None;
    }
    let text = serde_json::to_string(json).unwrap_or_default();
    let run = crate::records::from_load(json, &text, source, history::Machine::this());
    let recorded = recorder.record(vec![run]);
    print_lines(&recorded.lines(&[]));
    note_of(recorder, &recorded, 0)
}

/// Stores one bench row just written to `dir`; prints its line.
pub fn store_bench_row(
    recorder: &mut Recorder,
    dir: &Path,
    params: &[(String, String)],
    row: &grpclab_harness::bench::runner::ImplResult,
) -> Option<StoredNote> {
    if !recorder.is_on() {
        return None;
    }
    let this = history::Machine::this();
    let mut machine = crate::records::bench_machine(params, &this.host);
    if machine.model.is_empty() {
        machine = this;
    }
    let run = crate::records::from_bench_row(
        params,
        row,
        &dir.display().to_string(),
        machine,
        (history::now_rfc3339(), history::now_unix_ms()),
    );
    let recorded = recorder.record(vec![run]);
    print_lines(&recorded.lines(std::slice::from_ref(&row.name)));
    note_of(recorder, &recorded, 0)
}

/// Stores a compare's sides; prints a line per side. Returns each side's note.
pub fn store_compare(
    recorder: &mut Recorder,
    report: &grpclab_harness::compare::CompareReport,
    dir: &Path,
) -> Vec<(String, StoredNote)> {
    if !recorder.is_on() {
        return Vec::new();
    }
    let runs = crate::records::from_compare(
        report,
        &dir.display().to_string(),
        &history::Machine::this(),
        (history::now_rfc3339(), history::now_unix_ms()),
    );
    let names: Vec<String> = report
        .sides
        .iter()
        .map(|side| format!("{}: {}", side.label, side.side))
        .collect();
    let recorded = recorder.record(runs);
    print_lines(&recorded.lines(&names));
    names
        .iter()
        .enumerate()
        .filter_map(|(index, name)| note_of(recorder, &recorded, index).map(|n| (name.clone(), n)))
        .collect()
}

fn note_of(recorder: &Recorder, recorded: &history::Recorded, index: usize) -> Option<StoredNote> {
    Some(StoredNote {
        id: *recorded.ids.get(index)?,
        store: recorder.describe(),
        against: recorded.against.get(index).cloned().flatten(),
    })
}

fn print_lines(lines: &[String]) {
    for line in lines {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

/// `--baseline last` or `--baseline ID`: a compare side read back from the store. Anything
/// else is a file or folder.
pub fn baseline_source(
    text: &str,
    store: &StoreArgs,
    settings: &grpclab_harness::compare::baseline::RunSettings,
) -> Result<grpclab_harness::compare::BaselineSource, InputError> {
    use grpclab_harness::compare::baseline::Baseline;
    use grpclab_harness::compare::BaselineSource;
    let path = PathBuf::from(text);
    let wanted_id = text.parse::<i64>().ok();
    if path.exists() || (text != "last" && wanted_id.is_none()) {
        return Ok(BaselineSource::File(path));
    }
    let (mut store, backend) = open(store)?;
    let failed = |err: grpclab_store::StoreError| {
        InputError(format!(
            "--baseline {text}: cannot read the history store {}: {}",
            backend.describe(),
            err.redacted(&backend)
        ))
    };
    let read = |store: &mut Store, id: i64| -> Result<Option<(StoredRun, String)>, InputError> {
        store.get(id).map_err(failed)
    };
    let from_record = |run: &StoredRun, result: &str| -> Result<Baseline, String> {
        if run.record.result_kind != "compare" {
            return Err(format!(
                "run {} is a {} run, not a compare side",
                run.id, run.record.command
            ));
        }
        let value: serde_json::Value =
            serde_json::from_str(result).map_err(|err| format!("a damaged record ({err})"))?;
        let label = value
            .get("side")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let report: grpclab_harness::compare::CompareReport = value
            .get("report")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|err| format!("a damaged record ({err})"))?
            .ok_or_else(|| "a damaged record (no report)".to_owned())?;
        let mut baseline =
            Baseline::of_side(report, label.as_deref()).map_err(|why| why.to_string())?;
        baseline.source = PathBuf::from(format!("history run {}", run.id));
        Ok(baseline)
    };
    if let Some(id) = wanted_id {
        let Some((run, result)) = read(&mut store, id)? else {
            return Err(InputError(format!(
                "--baseline {id}: no run {id} in the history store {}; list them with `grpclab history --command compare`",
                backend.describe()
            )));
        };
        return from_record(&run, &result)
            .map(|baseline| BaselineSource::Loaded(Box::new(baseline)))
            .map_err(|why| InputError(format!("--baseline {id}: {why}")));
    }
    // `last`: the newest compare run measured under these settings, its first side.
    let runs = store
        .list(&Filter {
            command: Some("compare".to_owned()),
            limit: Some(500),
            ..Filter::default()
        })
        .map_err(failed)?;
    // The settings column is the compare's RunSettings: only a match is read in full.
    let wanted = serde_json::to_value(settings).unwrap_or(serde_json::Value::Null);
    for run in runs
        .iter()
        .rev()
        .filter(|run| run.record.settings == wanted)
    {
        let Some((run, result)) = read(&mut store, run.id)? else {
            continue;
        };
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&result) else {
            continue;
        };
        let Some(report) = value.get("report").cloned().and_then(|r| {
            serde_json::from_value::<grpclab_harness::compare::CompareReport>(r).ok()
        }) else {
            continue;
        };
        // The record of the comparison's side A (each side is a record of its own).
        let first_label = report.sides.first().map(|side| side.label.clone());
        if report.settings.as_ref() != Some(settings)
            || value.get("side").and_then(|v| v.as_str()) != first_label.as_deref()
        {
            continue;
        }
        let mut baseline = Baseline::of_side(report, None)
            .map_err(|why| InputError(format!("--baseline last (run {}): {why}", run.id)))?;
        baseline.source = PathBuf::from(format!("history run {} (last)", run.id));
        return Ok(BaselineSource::Loaded(Box::new(baseline)));
    }
    Err(InputError(format!(
        "--baseline last: no compare run with these settings in the history store {}; run the comparison once without --baseline",
        backend.describe()
    )))
}

/// `grpclab history`: runs the action; its output is the result.
pub fn run(args: &HistoryArgs) -> anyhow::Result<std::process::ExitCode> {
    execute(args)?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `grpclab history ...`.
pub fn execute(args: &HistoryArgs) -> anyhow::Result<()> {
    match &args.action {
        None => list(&args.filter, args.format, &args.store),
        Some(HistoryAction::List {
            filter,
            format,
            store,
        }) => list(filter, *format, store),
        Some(HistoryAction::Show {
            id,
            output,
            format,
            store,
        }) => show(*id, output.as_deref(), *format, store),
        Some(HistoryAction::Trend {
            filter,
            output,
            store,
        }) => trend(filter, output, store),
        Some(HistoryAction::Import { paths, store }) => import(paths, store),
    }
}

/// The filter the flags describe.
fn filter_of(args: &HistoryFilterArgs) -> Result<Filter, InputError> {
    let since_unix_ms = args.since.as_deref().map(since).transpose()?;
    let tag = args
        .tag
        .as_deref()
        .map(|tag| {
            tag.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| InputError(format!("--tag {tag}: write KEY=VALUE")))
        })
        .transpose()?;
    if args.limit == 0 {
        return Err(InputError(
            "--limit 0 lists nothing: give 1 or more".to_owned(),
        ));
    }
    Ok(Filter {
        implementation: args.implementation.clone(),
        scenario: args.scenario.clone(),
        target: args.target.clone(),
        command: args.command.clone(),
        since_unix_ms,
        tag,
        limit: Some(args.limit),
        ..Filter::default()
    })
}

/// `--since`: a date, an RFC 3339 time, or a time ago (`7d`).
fn since(text: &str) -> Result<i64, InputError> {
    let text = text.trim();
    if let Ok(ago) = humantime::parse_duration(text) {
        return Ok(history::now_unix_ms() - ago.as_millis() as i64);
    }
    let with_time = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_owned()
    };
    crate::records::parse_date(&with_time)
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .ok_or_else(|| {
            InputError(format!(
                "--since {text}: give a date (2026-11-30), an RFC 3339 time, or a time ago (7d, 12h)"
            ))
        })
}

fn list(
    filter: &HistoryFilterArgs,
    format: HistoryFormat,
    store: &StoreArgs,
) -> anyhow::Result<()> {
    let filter = filter_of(filter)?;
    let (mut store, backend) = open(store)?;
    let runs = store
        .list(&filter)
        .map_err(|err| InputError(format!("cannot list runs: {}", err.redacted(&backend))))?;
    let text = match format {
        HistoryFormat::Json => serde_json::to_string_pretty(&runs)? + "\n",
        HistoryFormat::Csv => csv(&runs),
        HistoryFormat::Table => table(&runs),
    };
    super::output::write_output(None, text.as_bytes())
}

/// The columns of `history`'s table and CSV.
const LIST_COLUMNS: [&str; 14] = [
    "id",
    "started",
    "command",
    "implementation",
    "scenario",
    "target",
    "req/s",
    "p50 ms",
    "p99 ms",
    "errors",
    "cpu/call µs",
    "server cpu %",
    "machine",
    "commit",
];

fn cells(run: &StoredRun) -> Vec<String> {
    let ms = |ns: Option<u64>| ns.map_or("-".to_owned(), |ns| format!("{:.3}", ns as f64 / 1e6));
    let real =
        |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
    vec![
        run.id.to_string(),
        run.record.started_at.clone(),
        run.record.command.clone(),
        run.record.implementation.clone(),
        run.record.scenario.clone(),
        run.record.target.clone(),
        real(run.record.figures.rps, 1),
        ms(run.record.figures.p50_ns),
        ms(run.record.figures.p99_ns),
        run.record
            .figures
            .errors
            .map_or("-".to_owned(), |errors| errors.to_string()),
        real(run.record.figures.cpu_ns_per_call.map(|ns| ns / 1e3), 2),
        real(run.record.figures.server_cpu_percent, 1),
        run.record.machine.host.clone(),
        run.record.git_commit.chars().take(10).collect(),
    ]
}

fn table(runs: &[StoredRun]) -> String {
    if runs.is_empty() {
        return "no runs match\n".to_owned();
    }
    let rows: Vec<Vec<String>> = runs.iter().map(cells).collect();
    let mut widths: Vec<usize> = LIST_COLUMNS.iter().map(|c| c.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        parts.join("  ").trim_end().to_owned() + "\n"
    };
    let header: Vec<String> = LIST_COLUMNS.iter().map(|c| (*c).to_owned()).collect();
    let mut out = line(&header);
    for row in &rows {
        out.push_str(&line(row));
    }
    out
}

fn csv(runs: &[StoredRun]) -> String {
    // RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled.
    let field = |text: &str| {
        if text.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", text.replace('"', "\"\""))
        } else {
            text.to_owned()
        }
    };
    let mut out = LIST_COLUMNS.map(field).join(",") + "\n";
    for run in runs {
        let row: Vec<String> = cells(run).iter().map(|cell| field(cell)).collect();
        out.push_str(&(row.join(",") + "\n"));
    }
    out
}

fn show(
    id: i64,
    output: Option<&Path>,
    format: ReportFormat,
    store: &StoreArgs,
) -> anyhow::Result<()> {
    let (mut store, backend) = open(store)?;
    let Some((run, result)) = store
        .get(id)
        .map_err(|err| InputError(format!("cannot read run {id}: {}", err.redacted(&backend))))?
    else {
        return Err(InputError(format!(
            "no run {id} in {}; list them with `grpclab history`",
            backend.describe()
        ))
        .into());
    };
    let format = match format {
        ReportFormat::Html => crate::report::Format::Html,
        ReportFormat::Md => crate::report::Format::Markdown,
    };
    let text = crate::report::render_stored(&run, &result, format)?;
    let path = match output {
        Some(path) if path.as_os_str() == "-" => None,
        Some(path) => Some(path.to_path_buf()),
        None if format == crate::report::Format::Markdown => None,
        None => Some(PathBuf::from(format!("run-{id}.html"))),
    };
    super::output::write_output(path.as_deref(), text.as_bytes())?;
    if let Some(path) = path {
        let _ = writeln!(std::io::stderr(), "report: {}", path.display());
    }
    Ok(())
}

fn trend(filter: &HistoryFilterArgs, output: &Path, store: &StoreArgs) -> anyhow::Result<()> {
    let filter = filter_of(filter)?;
    let (mut store, backend) = open(store)?;
    let runs = store
        .list(&filter)
        .map_err(|err| InputError(format!("cannot list runs: {}", err.redacted(&backend))))?;
    let page = crate::report::trend_page(&runs, &backend.describe());
    super::output::write_output(Some(output), page.as_bytes())?;
    let _ = writeln!(
        std::io::stderr(),
        "trend: {} ({} runs)",
        output.display(),
        runs.len()
    );
    Ok(())
}

fn import(paths: &[PathBuf], store: &StoreArgs) -> anyhow::Result<()> {
    // Read everything first: a path that is not a result stops the import before any write.
    let mut runs = Vec::new();
    for path in paths {
        runs.extend(crate::records::import::records_of(path)?);
    }
    let backend = backend(store)?;
    let mut opened = connect(&backend)?;
    // A run already stored (same configuration, same start) is not stored twice.
    let mut fresh = Vec::new();
    let mut skipped = 0;
    for run in runs {
        let same = opened
            .list(&Filter {
                config_key: Some(run.record.config_key.clone()),
                ..Filter::default()
            })
            .map_err(|err| InputError(err.redacted(&backend).to_string()))?;
        if same.iter().any(|stored| {
            stored.record.started_unix_ms == run.record.started_unix_ms
                && stored.record.source == run.record.source
        }) {
            skipped += 1;
        } else {
            fresh.push(run);
        }
    }
    let batch = format!("import-{}-{}", history::now_unix_ms(), std::process::id());
    for run in &mut fresh {
        run.record.batch = batch.clone();
    }
    let ids = opened
        .insert(&fresh)
        .map_err(|err| InputError(format!("cannot store the runs: {}", err.redacted(&backend))))?;
    let _ = writeln!(
        std::io::stdout(),
        "imported {} runs into {}{}{}",
        ids.len(),
        backend.describe(),
        match (ids.first(), ids.last()) {
            (Some(first), Some(last)) => format!(" (ids {first}-{last})"),
            _ => String::new(),
        },
        if skipped > 0 {
            format!("; {skipped} already stored")
        } else {
            String::new()
        }
    );
    Ok(())
}
