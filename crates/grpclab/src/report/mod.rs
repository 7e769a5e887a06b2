//! Reporting: saved results rendered as a self-contained HTML page (or Markdown).
//!
//! Reporting never measures and measuring never renders: this module only reads what `bench`
//! and `load -O json` wrote (a results folder's `<name>.json` records and `bench.params`, or
//! one load report) and turns it into a page. Charts are inline SVG from plotters
//! ([`charts`]); the page has no external script, font, stylesheet or image ([`html`]); what
//! each kind of page shows is in [`pages`].

pub mod charts;
pub mod html;
pub mod pages;

use std::path::{Path, PathBuf};

use crate::InputError;
use grpclab_harness::bench::runner::ImplResult;
use grpclab_results::model::JsonReport;

/// The report's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One self-contained HTML page with charts.
    Html,
    /// The tables as Markdown (no charts).
    Markdown,
}

/// The file name `bench` and `compare` write their report under, in the results folder.
pub const REPORT_FILE: &str = "report.html";

/// The file in a results folder that says where each row (or side) was stored and how it
/// compares with the previous run of its configuration: `[[name, note], ...]`.
pub const HISTORY_FILE: &str = "history.json";

/// Type of what [`HISTORY_FILE`] holds.
pub type Notes = Vec<(String, grpclab_results::verdict::previous::StoredNote)>;

/// A results folder's notes (none when it has no [`HISTORY_FILE`] or it cannot be read: the
/// page is drawn without them).
pub fn read_notes(dir: &Path) -> Notes {
    std::fs::read(dir.join(HISTORY_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Writes a results folder's notes.
pub fn write_notes(dir: &Path, notes: &Notes) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(notes).map_err(std::io::Error::other)?;
    std::fs::write(dir.join(HISTORY_FILE), bytes)
}

/// The trend page of stored runs, as HTML.
pub fn trend_page(runs: &[grpclab_store::StoredRun], store: &str) -> String {
    html::render(&pages::trend_page(runs, store))
}

/// What a results path holds.
enum Saved {
    /// A bench results folder: its settings and rows.
    Bench {
        dir: PathBuf,
        params: Vec<(String, String)>,
        rows: Vec<ImplResult>,
    },
    /// One load run's JSON.
    Load {
        name: String,
        report: Box<JsonReport>,
    },
    /// A `grpclab compare` folder: its report and the rounds' rows.
    Compare {
        dir: PathBuf,
        report: Box<grpclab_harness::compare::CompareReport>,
        rows: Vec<ImplResult>,
    },
}

/// Renders the results at `path` (a bench results folder, or a `load -O json` file).
pub fn render(path: &Path, format: Format) -> Result<String, InputError> {
    let saved = read(path)?;
    let notes = match &saved {
        Saved::Bench { dir, .. } | Saved::Compare { dir, .. } => read_notes(dir),
        Saved::Load { .. } => Vec::new(),
    };
    render_saved(saved, &notes, format)
}

fn render_saved(saved: Saved, notes: &Notes, format: Format) -> Result<String, InputError> {
    Ok(match (saved, format) {
        (Saved::Bench { dir, params, rows }, Format::Html) => {
            let mut page = pages::bench_page(&dir, &params, &rows, notes);
            if let Some(section) =
                read_sweep(&dir).and_then(|(axes, cells)| pages::sweep_section(&axes, &cells))
            {
                // Right after the table: a sweep's point is the curve.
                page.sections.insert(1, section);
            }
            html::render(&page)
        }
        (Saved::Compare { dir, report, rows }, Format::Html) => {
            html::render(&pages::compare_page(&dir, &report, &rows, notes))
        }
        (Saved::Compare { report, .. }, Format::Markdown) => format!(
            "# grpclab compare\n\n```\n{}```\n",
            grpclab_harness::compare::render(&report)
        ),
        (Saved::Bench { params, rows, .. }, Format::Markdown) => bench_markdown(&params, &rows),
        (Saved::Load { name, report }, Format::Html) => {
            html::render(&pages::load_page(&name, &report))
        }
        (Saved::Load { name, report }, Format::Markdown) => load_markdown(&name, &report),
    })
}

/// A stored run (`grpclab history show`) rendered as `grpclab report` renders the results
/// it came from: a load run's page, a bench row's, a compare's; an imported ghz report as
/// its figures.
pub fn render_stored(
    run: &grpclab_store::StoredRun,
    result: &str,
    format: Format,
) -> Result<String, InputError> {
    let damaged =
        |err: serde_json::Error| InputError(format!("run {} is stored damaged: {err}", run.id));
    let saved = match run.record.result_kind.as_str() {
        "load" => {
            let report: JsonReport = serde_json::from_str(result).map_err(damaged)?;
            let name = if run.record.implementation.is_empty() {
                format!("run {}", run.id)
            } else {
                run.record.implementation.clone()
            };
            Saved::Load {
                name,
                report: Box::new(report),
            }
        }
        "bench" => {
            #[derive(serde::Deserialize)]
            struct Stored {
                params: Vec<(String, String)>,
                row: ImplResult,
            }
            let stored: Stored = serde_json::from_str(result).map_err(damaged)?;
            Saved::Bench {
                dir: PathBuf::from(&run.record.source),
                params: stored.params,
                rows: vec![stored.row],
            }
        }
        "compare" => {
            #[derive(serde::Deserialize)]
            struct Stored {
                report: grpclab_harness::compare::CompareReport,
            }
            let stored: Stored = serde_json::from_str(result).map_err(damaged)?;
            let dir = PathBuf::from(&run.record.source);
            // The rounds' rows are in the folder, if it is still there.
            let rows = grpclab_harness::bench::results::read_rows(&dir).unwrap_or_default();
            Saved::Compare {
                dir,
                report: Box::new(stored.report),
                rows,
            }
        }
        _ => return Ok(pages::stored_figures(run, format == Format::Html)),
    };
    render_saved(saved, &Vec::new(), format)
}

/// Writes `report.html` into a results folder (bench, sweep or compare) from what it holds
/// now (`bench` calls it after each implementation, like the tables, so an interrupted run
/// keeps a report; `compare` at its end).
pub fn write_report(dir: &Path) -> Result<PathBuf, InputError> {
    let page = render(dir, Format::Html)?;
    let path = dir.join(REPORT_FILE);
    std::fs::write(&path, page)
        .map_err(|err| InputError(format!("cannot write {}: {err}", path.display())))?;
    Ok(path)
}

/// `load -O html`: the run's page (the same `grpclab report` renders from `-O json`).
pub struct LoadPageExporter;

impl grpclab_results::export::Exporter for LoadPageExporter {
    fn render(
        &self,
        report: &grpclab_results::model::Report,
    ) -> Result<Vec<u8>, grpclab_results::export::RenderError> {
        let json = JsonReport::from_report(report);
        let name = report
            .options
            .name
            .clone()
            .unwrap_or_else(|| "run".to_owned());
        Ok(html::render(&pages::load_page(&name, &json)).into_bytes())
    }
}

fn read(path: &Path) -> Result<Saved, InputError> {
    let hint = "give a results folder written by `grpclab bench`, or a file written by `grpclab load -O json`";
    let metadata = std::fs::metadata(path)
        .map_err(|err| InputError(format!("cannot read {}: {err}; {hint}", path.display())))?;
    if metadata.is_file() {
        let text = std::fs::read(path)
            .map_err(|err| InputError(format!("cannot read {}: {err}", path.display())))?;
        let report: JsonReport = serde_json::from_slice(&text).map_err(|err| {
            InputError(format!(
                "{} is not a grpclab load report ({err}); {hint}",
                path.display()
            ))
        })?;
        let name = if report.name.is_empty() {
            path.file_stem()
                .map_or_else(|| "run".to_owned(), |s| s.to_string_lossy().into_owned())
        } else {
            report.name.clone()
        };
        return Ok(Saved::Load {
            name,
            report: Box::new(report),
        });
    }
    let compare_file = path.join("compare.json");
    if compare_file.is_file() {
        let text = std::fs::read(&compare_file)
            .map_err(|err| InputError(format!("cannot read {}: {err}", compare_file.display())))?;
        let report: grpclab_harness::compare::CompareReport = serde_json::from_slice(&text)
            .map_err(|err| {
                InputError(format!(
                    "{} is not a compare report grpclab can read ({err})",
                    compare_file.display()
                ))
            })?;
        return Ok(Saved::Compare {
            dir: path.to_path_buf(),
            report: Box::new(report),
            rows: grpclab_harness::bench::results::read_rows(path)?,
        });
    }
    let params_file = path.join("bench.params");
    if !params_file.is_file() {
        return Err(InputError(format!(
            "{} holds no bench.params or compare.json; {hint}",
            path.display()
        )));
    }
    let params = grpclab_harness::bench::results::read_params(path)?;
    let rows = grpclab_harness::bench::results::read_rows(path)?;
    Ok(Saved::Bench {
        dir: path.to_path_buf(),
        params,
        rows,
    })
}

/// A sweep's matrix (`sweep.json`), when the folder holds one.
fn read_sweep(
    dir: &Path,
) -> Option<(
    Vec<grpclab_harness::bench::sweep::Axis>,
    Vec<grpclab_harness::bench::sweep::SweepCell>,
)> {
    #[derive(serde::Deserialize)]
    struct Matrix {
        axes: Vec<grpclab_harness::bench::sweep::Axis>,
        cells: Vec<grpclab_harness::bench::sweep::SweepCell>,
    }
    let text = std::fs::read(dir.join("sweep.json")).ok()?;
    let matrix: Matrix = serde_json::from_slice(&text).ok()?;
    Some((matrix.axes, matrix.cells))
}

/// A Markdown table from a header and rows of text.
fn markdown_table(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n|", headers.join(" | "));
    out.push_str(&"---|".repeat(headers.len()));
    out.push('\n');
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// The percentile table of several runs, Markdown.
fn percentiles_markdown(runs: &[(&str, &JsonReport)]) -> String {
    let curves: Vec<(&str, Vec<(f64, f64)>)> = runs
        .iter()
        .filter_map(|(name, load)| pages::latency_curve(load).map(|curve| (*name, curve)))
        .collect();
    let mut headers = vec!["percentile".to_owned()];
    headers.extend(curves.iter().map(|(name, _)| (*name).to_owned()));
    let rows: Vec<Vec<String>> = pages::CURVE_PERCENTILES
        .iter()
        .map(|p| {
            let mut row = vec![format!("p{}", charts::trim_number(*p))];
            row.extend(curves.iter().map(|(_, c)| {
                pages::curve_at(c, *p).map_or_else(|| "–".to_owned(), |ms| format!("{ms:.3} ms"))
            }));
            row
        })
        .collect();
    markdown_table(&headers, &rows)
}

fn bench_markdown(params: &[(String, String)], rows: &[ImplResult]) -> String {
    let runs: Vec<(&str, &JsonReport)> = rows
        .iter()
        .filter_map(|row| row.load.as_ref().map(|load| (row.name.as_str(), load)))
        .collect();
    let settings: Vec<Vec<String>> = params
        .iter()
        .map(|(k, v)| vec![format!("`{k}`"), format!("`{v}`")])
        .collect();
    format!(
        "# grpclab bench\n\n{}\n## Latency percentiles\n\n{}\n## Configuration\n\n{}",
        grpclab_harness::bench::results::render_markdown(rows, &[]),
        percentiles_markdown(&runs),
        markdown_table(&["setting".to_owned(), "value".to_owned()], &settings)
    )
}

fn load_markdown(name: &str, report: &JsonReport) -> String {
    let summary = vec![
        vec!["calls".to_owned(), report.count.to_string()],
        vec!["errors".to_owned(), report.errors.to_string()],
        vec![
            "req/s (measured window)".to_owned(),
            format!("{:.0}", report.measured_rps),
        ],
        vec![
            "average".to_owned(),
            format!("{:.3} ms", report.average as f64 / 1e6),
        ],
    ];
    format!(
        "# grpclab load: {name}\n\n{}\n## Latency percentiles\n\n{}",
        markdown_table(&["".to_owned(), "value".to_owned()], &summary),
        percentiles_markdown(&[(name, report)])
    )
}
