//! The results directory and the grpc_bench table.
//!
//! `results/<yymmddTHHMMSS>/` holds one `<name>.json` per implementation, `bench.params`
//! (every setting, the grpclab version and commit, the machine), and the table as
//! `table.txt` and `table.md`. Everything is rewritten after each implementation, so a crash
//! or Ctrl-C late in a run keeps what was measured.

use std::path::{Path, PathBuf};

use super::names::sanitize;
use super::runner::{ImplResult, RowStatus};

/// A results folder for one `grpclab bench` run.
pub struct ResultsDir {
    path: PathBuf,
}

impl ResultsDir {
    /// Creates `base/<yymmddTHHMMSS>` (with a suffix if that exists already).
    pub fn create(base: &Path) -> std::io::Result<ResultsDir> {
        let stamp = timestamp();
        let mut path = base.join(&stamp);
        let mut n = 1;
        while path.exists() {
            path = base.join(format!("{stamp}-{n}"));
            n += 1;
        }
        std::fs::create_dir_all(&path)?;
        Ok(ResultsDir { path })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bench.params`.
    pub fn write_params(&self, lines: &[(String, String)]) -> std::io::Result<()> {
        let text: String = lines.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        std::fs::write(self.path.join("bench.params"), text)
    }

    /// Writes one implementation's JSON record.
    pub fn write_result(&self, result: &ImplResult) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(result).map_err(std::io::Error::other)?;
        std::fs::write(
            self.path.join(format!("{}.json", sanitize(&result.name))),
            json,
        )
    }

    /// Writes the table, text and Markdown.
    pub fn write_tables(&self, results: &[ImplResult], footer: &[String]) -> std::io::Result<()> {
        std::fs::write(self.path.join("table.txt"), render_text(results, footer))?;
        std::fs::write(self.path.join("table.md"), render_markdown(results, footer))
    }
}

/// A results folder's `bench.params`, line by line (`KEY=VALUE`).
pub fn read_params(path: &Path) -> Result<Vec<(String, String)>, grpclab_core::InputError> {
    let file = path.join("bench.params");
    Ok(std::fs::read_to_string(&file)
        .map_err(|err| grpclab_core::InputError(format!("cannot read {}: {err}", file.display())))?
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect())
}

/// The rows (`<name>.json` records) of a results folder, in file-name order.
pub fn read_rows(path: &Path) -> Result<Vec<ImplResult>, grpclab_core::InputError> {
    let mut rows = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|err| grpclab_core::InputError(format!("cannot list {}: {err}", path.display())))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for file in entries {
        let Ok(text) = std::fs::read(&file) else {
            continue;
        };
        // Profiles and other JSON files live beside the rows; a row has these keys.
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(&text) else {
            continue;
        };
        if !["name", "status", "command"]
            .iter()
            .all(|key| value.get(key).is_some())
        {
            continue;
        }
        let row: ImplResult = serde_json::from_value(value).map_err(|err| {
            grpclab_core::InputError(format!(
                "{} is not a bench row grpclab can read ({err})",
                file.display()
            ))
        })?;
        rows.push(row);
    }
    Ok(rows)
}

/// `yymmddTHHMMSS` in UTC.
fn timestamp() -> String {
    let rfc = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // 2026-11-30T10:35:12Z → 261130T103512
    let digits: String = rfc.chars().filter(char::is_ascii_digit).collect();
    format!("{}T{}", &digits[2..8], &digits[8..14])
}

/// The table's columns: grpc_bench's first, in the same meaning, then ours (errors,
/// allocations per request, the server's own memory (its average memory less the pages of its
/// executable and libraries), for streaming calls the messages per second each way: sent by
/// the client, received by it, `-` for unary calls; and what bound the row).
pub const COLUMNS: [&str; 15] = [
    "name",
    "req/s",
    "avg. latency",
    "90 % in",
    "95 % in",
    "99 % in",
    "avg. cpu",
    "avg. memory",
    "errors",
    "allocs/req",
    "own memory",
    "msgs/s sent",
    "msgs/s recv",
    "bound by",
    "capacity",
];

/// Messages per second of the measured window, sent and received, for a streaming call's row.
pub fn message_rates(load: &grpclab_results::model::JsonReport) -> Option<(f64, f64)> {
    let streamed = load.messages_sent > 0 || load.messages_received > 0;
    (streamed && load.measured_window > 0).then(|| {
        let seconds = load.measured_window as f64 / 1e9;
        (
            load.messages_sent as f64 / seconds,
            load.messages_received as f64 / seconds,
        )
    })
}

/// One table row as text cells.
pub fn row_cells(result: &ImplResult) -> Vec<String> {
    let Some(load) = result
        .load
        .as_ref()
        .filter(|_| result.status == RowStatus::Ok)
    else {
        let mut cells = vec![
            result.name.clone(),
            super::runner::status_word(result.status).to_owned(),
        ];
        cells.extend(std::iter::repeat_n(String::new(), COLUMNS.len() - 2));
        return cells;
    };
    let at = |percentage: f64| load.percentile(percentage).unwrap_or(0);
    vec![
        result.name.clone(),
        format!("{:.0}", load.measured_rps),
        millis(load.average),
        millis(at(90.0)),
        millis(at(95.0)),
        millis(at(99.0)),
        format!("{:.2}%", result.usage.cpu_percent),
        // As grpc_bench prints it: two decimals, trailing zeros dropped ("204.7 MiB").
        format!(
            "{} MiB",
            trimmed(result.usage.memory_average_bytes as f64 / (1 << 20) as f64)
        ),
        load.errors.to_string(),
        result
            .allocations_per_call
            .map_or_else(|| "-".to_owned(), |a| format!("{a:.1}")),
        format!(
            "{} MiB",
            trimmed(result.usage.memory_own_average_bytes as f64 / (1 << 20) as f64)
        ),
        message_rates(load).map_or_else(|| "-".to_owned(), |(sent, _)| format!("{sent:.0}")),
        message_rates(load)
            .map_or_else(|| "-".to_owned(), |(_, received)| format!("{received:.0}")),
        result
            .bound_by
            .as_ref()
            .map_or_else(|| "-".to_owned(), |bound| bound.word()),
        result
            .capacity
            .as_ref()
            .map_or_else(|| "-".to_owned(), capacity_cell),
    ]
}

/// A row's capacity as its cell: the req/s, "≥" before it when the client's limit came first,
/// "none" when no rate met the SLO.
pub fn capacity_cell(report: &crate::capacity::CapacityReport) -> String {
    match report.capacity_rps {
        Some(rps) if report.client_bound => format!("≥{rps:.0}"),
        Some(rps) => format!("{rps:.0}"),
        None => "none".to_owned(),
    }
}

/// Two decimals without trailing zeros: 204.70 → "204.7", 12.00 → "12".
fn trimmed(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn millis(nanos: u64) -> String {
    format!("{:.2} ms", nanos as f64 / 1e6)
}

/// Rows sorted by req/s, failed rows last.
fn sorted(results: &[ImplResult]) -> Vec<&ImplResult> {
    let mut rows: Vec<&ImplResult> = results.iter().collect();
    let rps = |r: &ImplResult| match (&r.status, &r.load) {
        (RowStatus::Ok, Some(load)) => load.measured_rps,
        _ => -1.0,
    };
    rows.sort_by(|a, b| rps(b).total_cmp(&rps(a)));
    rows
}

fn failures(results: &[ImplResult]) -> Vec<String> {
    sorted(results)
        .into_iter()
        .filter(|r| r.status != RowStatus::Ok)
        .map(|r| {
            let mut line = format!(
                "{} {}: {}",
                r.name,
                super::runner::status_word(r.status),
                r.reason.as_deref().unwrap_or("unknown")
            );
            if !r.stderr_tail.is_empty() {
                line.push_str(&format!(" — stderr: {}", r.stderr_tail.join(" | ")));
            }
            line
        })
        .collect()
}

/// The table as grpc_bench's analyze step prints it: its eight columns at its widths
/// (`printf "| %-18s | %7s | %14s | ..."`: a longer name widens its own row, as there) between
/// rules of 128 dashes, so scripts written for grpc_bench's output read ours. A row that did
/// not measure says FAILED or SKIPPED in the req/s column. grpclab's own columns (errors,
/// allocations per request, own memory) follow in a second table of the same style, then the
/// notes.
pub fn render_text(results: &[ImplResult], footer: &[String]) -> String {
    let rows: Vec<Vec<String>> = sorted(results).into_iter().map(row_cells).collect();
    // grpc_bench's name column is 18 wide; a longer name widens it (and the rules) so every
    // row stays aligned.
    let name_width = rows
        .iter()
        .map(|cells| cells[0].chars().count())
        .max()
        .unwrap_or(0)
        .max(18);
    let rule = "-".repeat(128 + name_width - 18);
    let mut out = format!("{rule}\n");
    out.push_str(&grpc_bench_row(&COLUMNS[..8], name_width));
    out.push_str(&format!("{rule}\n"));
    for cells in &rows {
        out.push_str(&grpc_bench_row(&cells[..8], name_width));
    }
    out.push_str(&format!("{rule}\n"));
    // The message rates only when some row streamed: unary tables keep their shape.
    let streamed = rows
        .iter()
        .any(|cells| cells[11] != "-" && !cells[11].is_empty());
    out.push_str(&format!(
        "| {:<name_width$} | {:>6} | {:>10} | {:>10} |",
        COLUMNS[0], COLUMNS[8], COLUMNS[9], COLUMNS[10]
    ));
    if streamed {
        out.push_str(&format!(" {:>11} | {:>11} |", COLUMNS[11], COLUMNS[12]));
    }
    out.push_str(&format!(" {:<14} |", COLUMNS[13]));
    let searched = results.iter().any(|r| r.capacity.is_some());
    if searched {
        out.push_str(&format!(" {:>10} |", COLUMNS[14]));
    }
    out.push('\n');
    for cells in &rows {
        out.push_str(&format!(
            "| {:<name_width$} | {:>6} | {:>10} | {:>10} |",
            cells[0], cells[8], cells[9], cells[10]
        ));
        if streamed {
            out.push_str(&format!(" {:>11} | {:>11} |", cells[11], cells[12]));
        }
        out.push_str(&format!(" {:<14} |", cells[13]));
        if searched {
            out.push_str(&format!(" {:>10} |", cells[14]));
        }
        out.push('\n');
    }
    for result in sorted(results) {
        if let Some(capacity) = &result.capacity {
            out.push_str(&format!(
                "{} capacity at {}: {} req/s; {}\n",
                result.name,
                capacity.slo.join(", "),
                capacity_cell(capacity),
                capacity.stopped_because
            ));
        }
    }
    for result in sorted(results) {
        for verdict in &result.thresholds {
            out.push_str(&format!(
                "{} threshold {}: {} ({})\n",
                result.name,
                verdict.expression,
                if verdict.passed { "passed" } else { "FAILED" },
                verdict.actual
            ));
        }
    }
    // Each row's evidence for its "bound by", so the word can be checked.
    for result in sorted(results) {
        if let Some(bound) = result
            .bound_by
            .as_ref()
            .filter(|_| result.status == RowStatus::Ok)
        {
            out.push_str(&format!(
                "{} bound by {}: {}\n",
                result.name,
                bound.word(),
                bound.evidence
            ));
        }
    }
    for line in failures(results).iter().chain(footer) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// One row at grpc_bench's column widths (the name column `name_width` wide).
fn grpc_bench_row<S: std::fmt::Display>(cells: &[S], name_width: usize) -> String {
    format!(
        "| {:<name_width$} | {:>7} | {:>14} | {:>14} | {:>14} | {:>14} | {:>8} | {:>13} |\n",
        cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7]
    )
}

/// The table in Markdown, as grpc_bench publishes it.
pub fn render_markdown(results: &[ImplResult], footer: &[String]) -> String {
    let mut out = format!("| {} |\n", COLUMNS.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(COLUMNS.len())));
    for result in sorted(results) {
        out.push_str(&format!("| {} |\n", row_cells(result).join(" | ")));
    }
    let notes: Vec<String> = failures(results)
        .into_iter()
        .chain(footer.iter().cloned())
        .collect();
    if !notes.is_empty() {
        out.push('\n');
        for line in notes {
            out.push_str(&format!("- {line}\n"));
        }
    }
    out
}
