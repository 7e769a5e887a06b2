//! grpclab's entry point: parse → prepare (validate) → execute → report. `main` only prints
//! the error and chooses the exit code.

use clap::Parser;
use grpclab::cli::{self, Cli, Command};
use grpclab::{InputError, EXIT_FAILURE, EXIT_INPUT};
use grpclab_harness::{bench, compare, HarnessError};
use grpclab_load::CancellationToken;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// Counts heap allocations per thread, so servers can report allocations per call through
/// their admin RPC (a plain load and store per allocation; see `alloc_count`).
#[global_allocator]
static ALLOCATOR: grpclab_server::alloc_count::CountingAllocator =
    grpclab_server::alloc_count::CountingAllocator;

fn main() -> ExitCode {
    grpclab_server::alloc_count::mark_installed();
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
            match cli::missing_verb_hint(&argv, err.kind()) {
                Some(hint) => {
                    let _ = writeln!(std::io::stderr(), "error: {hint}");
                    return ExitCode::from(EXIT_INPUT);
                }
                None => err.exit(),
            }
        }
    };
    // ghz's --config: the file's settings become flags in front of the command line's, and
    // the command line is parsed again (later flags win).
    if let Command::Load(args) = &cli.command {
        if let Some(path) = &args.config {
            let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
            match cli::config_file::expand(&argv, path, !args.target.is_empty()) {
                Ok(expanded) => cli = Cli::parse_from(expanded),
                Err(err) => {
                    let _ = writeln!(std::io::stderr(), "error: {err}");
                    return ExitCode::from(EXIT_INPUT);
                }
            }
        }
    }
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "error: {err:#}");
            if err.downcast_ref::<InputError>().is_some() {
                ExitCode::from(EXIT_INPUT)
            } else if err.downcast_ref::<grpclab::LateStart>().is_some() {
                ExitCode::from(grpclab::EXIT_LATE_START)
            } else {
                ExitCode::from(EXIT_FAILURE)
            }
        }
    }
}

/// The exit code of a run whose results are written: success, or — when a verdict failed —
/// [`grpclab_results::verdict::EXIT_THRESHOLD`] with one line, "grpclab: N WHAT: each failure".
fn verdict_exit(what: &str, failed: &[String]) -> ExitCode {
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
fn thresholds_exit(report: &grpclab_results::model::Report) -> ExitCode {
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
fn harness_error(err: HarnessError) -> anyhow::Error {
    match err {
        HarnessError::Input(input) => input.into(),
        other => other.into(),
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Bench(args) => {
            let prepared = cli::bench::prepare(&args)?;
            let mut history = cli::history::recorder(&args.history)?;
            let endpoint = cli::live_metrics::start(&args.metrics)?;
            let metrics = endpoint.as_ref().map(|e| std::sync::Arc::clone(&e.metrics));
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(&cancel);
            let live = !args.no_tui && std::io::stderr().is_terminal();
            let view = if live {
                grpclab::live::LiveView::start("grpclab bench".to_owned())
                    .ok()
                    .map(std::cell::RefCell::new)
            } else {
                None
            };
            // Each row, once written: stored (its note beside the results, for the page),
            // and its live metrics set to the final figures.
            let mut notes: grpclab::report::Notes = Vec::new();
            let mut row_written =
                |dir: &std::path::Path,
                 params: &[(String, String)],
                 row: &bench::runner::ImplResult| {
                    if let (Some(metrics), Some(load)) = (&metrics, &row.load) {
                        metrics.finish_saved(&row.name, load);
                    }
                    if let Some(note) =
                        cli::history::store_bench_row(&mut history, dir, params, row)
                    {
                        notes.push((row.name.clone(), note));
                        if let Err(err) = grpclab::report::write_notes(dir, &notes) {
                            let _ = writeln!(
                                std::io::stderr(),
                                "WARNING: cannot write {}: {err}",
                                grpclab::report::HISTORY_FILE
                            );
                        }
                    }
                };
            let outcome = match &view {
                Some(view) => {
                    let mut lines = |line: &str| view.borrow_mut().log(line);
                    let mut show = |row: &str, snapshot: &grpclab_load::ProgressSnapshot| {
                        if let Some(metrics) = &metrics {
                            metrics.update(row, snapshot);
                        }
                        view.borrow_mut().update(snapshot)
                    };
                    bench::execute(
                        prepared,
                        &cancel,
                        bench::BenchHooks {
                            progress: &mut lines,
                            snapshots: Some(&mut show),
                            row_written: &mut row_written,
                            after_write: &write_page,
                        },
                    )
                }
                None => {
                    let mut to_metrics = |row: &str, snapshot: &grpclab_load::ProgressSnapshot| {
                        if let Some(metrics) = &metrics {
                            metrics.update(row, snapshot);
                        }
                    };
                    bench::execute(
                        prepared,
                        &cancel,
                        bench::BenchHooks {
                            progress: &mut progress_line(&cancel),
                            // Snapshots cost the run a little (each second's histogram handed
                            // over): asked for only when something shows them.
                            snapshots: if metrics.is_some() {
                                Some(&mut to_metrics)
                            } else {
                                None
                            },
                            row_written: &mut row_written,
                            after_write: &write_page,
                        },
                    )
                }
            };
            if let Some(view) = view {
                // The lines shown in the view stay on the terminal after it closes.
                for line in view.into_inner().finish() {
                    let _ = writeln!(std::io::stderr(), "{line}");
                }
            }
            if let Some(endpoint) = endpoint {
                endpoint.end();
            }
            let outcome = outcome.map_err(harness_error)?;
            // Results are on disk already; a closed stdout or stderr only loses the echo.
            let _ = writeln!(std::io::stdout(), "{}", outcome.table);
            let _ = writeln!(std::io::stderr(), "results: {}", outcome.dir.display());
            let page = outcome.dir.join(grpclab::report::REPORT_FILE);
            if page.is_file() {
                let _ = writeln!(std::io::stderr(), "report: {}", page.display());
            }
            if outcome.any_failed() || cancel.is_cancelled() {
                return Ok(ExitCode::from(EXIT_FAILURE));
            }
            Ok(verdict_exit(
                "row thresholds failed",
                &outcome.thresholds_failed(),
            ))
        }
        Command::Compare(args) => {
            let prepared = cli::compare::prepare(&args)?;
            let mut history = cli::history::recorder(&args.history)?;
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(&cancel);
            let (report, dir) =
                compare::execute(prepared, &cancel, &mut progress_line(&cancel), &write_page)
                    .map_err(harness_error)?;
            let notes = cli::history::store_compare(&mut history, &report, &dir);
            if !notes.is_empty() {
                // The page again, now with each side against its previous run.
                let written = grpclab::report::write_notes(&dir, &notes)
                    .map_err(|err| err.to_string())
                    .and_then(|()| write_page(&dir).map_err(|err| err.to_string()));
                if let Err(err) = written {
                    let _ = writeln!(std::io::stderr(), "WARNING: {err}");
                }
            }
            let text = match args.format {
                cli::args::CompareFormat::Text => compare::render(&report),
                cli::args::CompareFormat::Json => serde_json::to_string_pretty(&report)? + "\n",
            };
            let _ = std::io::stdout().write_all(text.as_bytes());
            let _ = writeln!(std::io::stderr(), "results: {}", dir.display());
            let page = dir.join(grpclab::report::REPORT_FILE);
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
        Command::Capacity(args) => {
            let prepared = cli::capacity::prepare(&args)?;
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(&cancel);
            let report = cli::capacity::execute(prepared, &cancel)?;
            // The report is written; the exit code and one line say how the search ended.
            if let Some(error) = &report.error {
                let _ = writeln!(
                    std::io::stderr(),
                    "grpclab: the search stopped early: {error}"
                );
                // Before any probe ran, the cause is the input (an unreachable server, a
                // method it lacks); after, the run broke down.
                return Ok(ExitCode::from(if report.probes.is_empty() {
                    EXIT_INPUT
                } else {
                    EXIT_FAILURE
                }));
            }
            if report.capacity_rps.is_none() {
                let _ = writeln!(
                    std::io::stderr(),
                    "grpclab: no rate tried met the SLO ({})",
                    report.stopped_because
                );
                return Ok(ExitCode::from(grpclab_results::verdict::EXIT_THRESHOLD));
            }
            if report.client_bound {
                let _ = writeln!(
                    std::io::stderr(),
                    "grpclab: NOTE: the client's limit ended the search; the server's capacity is higher than reported"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Load(args) => {
            let prepared = cli::load::prepare(&args)?;
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(&cancel);
            let report = cli::load::execute(prepared, &cancel)?;
            if grpclab_results::export::nothing_succeeded(&report.result).is_some() {
                // Said on stderr by execute; the code outranks the thresholds' (which fail
                // too, with nothing measured).
                return Ok(ExitCode::from(grpclab::EXIT_NOTHING_SUCCEEDED));
            }
            Ok(thresholds_exit(&report))
        }
        Command::Completions(args) => {
            let mut command = <cli::Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut command, "grpclab", &mut script);
            write_stdout(&script)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => {
            let command = <cli::Cli as clap::CommandFactory>::command();
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            write_stdout(&page)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Encode(args) => {
            let written = cli::encode::execute(&args)?;
            let _ = writeln!(
                std::io::stderr(),
                "wrote {written} bytes to {}",
                args.output.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Report(args) => {
            let written = report_cmd(&args)?;
            if let Some(path) = written {
                let _ = writeln!(std::io::stderr(), "report: {}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Merge(args) => {
            let report = cli::merge::execute(&args)?;
            Ok(thresholds_exit(&report))
        }
        Command::Stats(args) => {
            let stats = cli::stats::fetch_for(&args)?;
            println!("{}", serde_json::to_string_pretty(&stats)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::History(args) => {
            cli::history::execute(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            let config = cli::serve::prepare(&args)?;
            cli::serve::execute(&config)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `grpclab report`: renders saved results; returns the file written (none for `-o -`).
/// Renders a results folder's page from the files the harness just wrote.
fn write_page(dir: &std::path::Path) -> Result<(), InputError> {
    grpclab::report::write_report(dir).map(|_| ())
}

fn report_cmd(args: &cli::args::ReportArgs) -> anyhow::Result<Option<std::path::PathBuf>> {
    use grpclab::report::Format;
    let format = match args.format {
        cli::args::ReportFormat::Html => Format::Html,
        cli::args::ReportFormat::Md => Format::Markdown,
    };
    let text = grpclab::report::render(&args.results, format)?;
    let extension = match format {
        Format::Html => "html",
        Format::Markdown => "md",
    };
    let path = match &args.output {
        Some(path) if path.as_os_str() == "-" => {
            std::io::stdout().write_all(text.as_bytes())?;
            return Ok(None);
        }
        Some(path) => path.clone(),
        // A folder gets report.html inside it; a file, its own name with the extension.
        None if args.results.is_dir() => args.results.join(format!("report.{extension}")),
        // Next to a `load -O json` file there may be a page `load -O html` wrote for the same
        // run (or an older render): never overwritten, the next free name is taken.
        None => free_name(&args.results.with_extension(extension)),
    };
    std::fs::write(&path, text).map_err(|err| {
        InputError(format!(
            "cannot write {}: {err}; choose another file with -o",
            path.display()
        ))
    })?;
    Ok(Some(path))
}

/// Writes generated text to standard output; a closed pipe (`grpclab man | head`) is not
/// an error.
fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    match std::io::stdout().write_all(bytes) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("cannot write to standard output: {err}"))
        }
        _ => Ok(()),
    }
}

/// `path`, or when a file of that name exists, the first free `STEM-N.EXT` beside it.
fn free_name(path: &std::path::Path) -> std::path::PathBuf {
    if !path.exists() {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let extension = path
        .extension()
        .map(|extension| format!(".{}", extension.to_string_lossy()))
        .unwrap_or_default();
    (1..)
        .map(|n| path.with_file_name(format!("{stem}-{n}{extension}")))
        .find(|candidate| !candidate.exists())
        .unwrap_or_else(|| path.to_path_buf())
}

/// Prints a progress line on stderr. When stderr is closed (`grpclab bench 2>&1 | head -1`),
/// the run ends as after Ctrl-C: what was measured is written, nothing panics.
fn progress_line(cancel: &CancellationToken) -> impl FnMut(&str) + '_ {
    move |line| {
        if writeln!(std::io::stderr(), "{line}").is_err() {
            cancel.cancel();
        }
    }
}

/// Cancels `token` on Ctrl-C (SIGINT) or SIGTERM, so a run stops, drains and still writes its
/// results.
fn cancel_on_ctrl_c(token: &CancellationToken) {
    let token = token.clone();
    let _ = std::thread::Builder::new()
        .name("grpclab-signals".to_owned())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                grpclab_server::shutdown_signal().await;
                token.cancel();
            });
        });
}
