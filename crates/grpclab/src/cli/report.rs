//! `grpclab report`: pages from saved results (a bench or compare folder, a `load -O json`
//! file), and the page a results folder gets when the harness writes it.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::args::{ReportArgs, ReportFormat};
use crate::InputError;

/// `grpclab report`: renders saved results; says which file it wrote (none for `-o -`).
pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = render(args)? {
        let _ = writeln!(std::io::stderr(), "report: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Renders a results folder's page from the files the harness just wrote.
pub fn write_page(dir: &Path) -> Result<(), InputError> {
    crate::report::write_report(dir).map(|_| ())
}

/// Renders saved results; returns the file written (none for `-o -`).
fn render(args: &ReportArgs) -> anyhow::Result<Option<std::path::PathBuf>> {
    use crate::report::Format;
    let format = match args.format {
        ReportFormat::Html => Format::Html,
        ReportFormat::Md => Format::Markdown,
    };
    let text = crate::report::render(&args.results, format)?;
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
