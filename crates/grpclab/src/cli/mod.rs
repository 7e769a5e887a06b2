//! The command-line layer: clap's definitions ([`args`]) and one module per verb that turns
//! its flags into the typed settings of the layers below, runs them and prints. Nothing
//! below this layer sees a clap type; the harness ([`grpclab_harness::bench`], [`grpclab_harness::compare`]),
//! the renderers ([`grpclab_results::export`], [`crate::report`]) and the load engine take typed
//! settings and return typed results.

pub mod args;
pub mod bench;
pub mod capacity;
pub mod compare;
pub mod config_file;
pub mod debug_log;
pub mod encode;
pub mod exit;
pub mod history;
pub mod live_metrics;
pub mod load;
pub mod merge;
pub mod output;
pub mod report;
pub mod serve;
pub mod session;
pub mod stamp;
pub mod stats;
mod values;

pub use args::{Cli, Command};

use args::OutputFormat;
use grpclab_results::export::{
    CsvExporter, CsvSecondsExporter, Exporter, InfluxDetailsExporter, InfluxSummaryExporter,
    JsonExporter, PrettyJsonExporter, PrometheusExporter, SummaryExporter,
};

/// The line to print when clap refuses a command line that reads like ghz's (flags or a
/// target with no verb in front: `grpclab --insecure --proto x.proto HOST:PORT`), or `None`
/// to let clap's own message stand. `args` is the whole command line, program name first.
pub fn missing_verb_hint(
    args: &[std::ffi::OsString],
    kind: clap::error::ErrorKind,
) -> Option<String> {
    use clap::error::ErrorKind;
    if !matches!(
        kind,
        ErrorKind::UnknownArgument | ErrorKind::InvalidSubcommand
    ) {
        return None;
    }
    let first = args.get(1)?.to_string_lossy();
    let help_or_version = ["-h", "--help", "-V", "--version"].contains(&first.as_ref());
    let flag = first.starts_with('-') && !help_or_version;
    let target = first.contains(':') || first.contains('/');
    (flag || target).then(|| {
        format!(
            "'{first}' needs a command in front of it: grpclab runs ghz's command lines as \
             `grpclab load {first} ...` (see `grpclab load --help`, or `grpclab --help` for every command)"
        )
    })
}

/// The exporter for `grpclab load -O FORMAT`.
pub fn exporter_for(format: OutputFormat) -> Box<dyn Exporter> {
    match format {
        OutputFormat::Summary => Box::new(SummaryExporter),
        OutputFormat::Json => Box::new(JsonExporter),
        OutputFormat::Pretty => Box::new(PrettyJsonExporter),
        OutputFormat::Csv => Box::new(CsvExporter),
        OutputFormat::CsvSeconds => Box::new(CsvSecondsExporter),
        OutputFormat::InfluxSummary => Box::new(InfluxSummaryExporter),
        OutputFormat::InfluxDetails => Box::new(InfluxDetailsExporter),
        OutputFormat::Prometheus => Box::new(PrometheusExporter),
        OutputFormat::Html => Box::new(crate::report::LoadPageExporter),
    }
}

/// Values a user could type, sane and absurd, for the property tests of every command's
/// flags: numbers of every shape, floats the parsers must refuse, huge ones, units, signs,
/// empty and non-ASCII text.
#[cfg(test)]
pub(crate) fn typed_values(seed: &mut u64) -> Vec<String> {
    let mut values: Vec<String> = [
        "0",
        "1",
        "2",
        "-1",
        "0.5",
        "0.01",
        "0.001",
        "1e9",
        "1e20",
        "inf",
        "-inf",
        "NaN",
        "nan",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999",
        "1.7976931348623157e308",
        "0x10",
        " 3 ",
        "",
        " ",
        "1s",
        "20s",
        "0s",
        "1ms",
        "1ns",
        "99999999999h",
        "100000000000000000000s",
        "1m30s",
        "512m",
        "1g",
        "9999999g",
        "4m",
        "1k",
        "lots",
        "🙂",
        "1,2",
        "=",
        "a b",
        "1e-9",
        "+5",
        "٣",
        "-5",
        "-3s",
        "100000000",
        "100001",
        "100000",
        "-9223372036854775808",
        "9223372036854775807",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    // And random strings over a small, number-heavy alphabet.
    let alphabet = b"0123456789.-+eEinfNaskmgh ";
    for _ in 0..300 {
        let mut text = String::new();
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let len = (*seed % 12) as usize;
        for i in 0..len {
            let pick = (*seed >> (i * 5 % 60)) as usize % alphabet.len();
            text.push(alphabet[pick] as char);
        }
        values.push(text);
    }
    values
}

/// `grpclab completions SHELL`: clap_complete's script on standard output.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<std::process::ExitCode> {
    let mut command = <Cli as clap::CommandFactory>::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "grpclab", &mut script);
    write_stdout(&script)?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `grpclab man`: the manual page (roff) on standard output.
pub fn man() -> anyhow::Result<std::process::ExitCode> {
    let command = <Cli as clap::CommandFactory>::command();
    let mut page = Vec::new();
    clap_mangen::Man::new(command).render(&mut page)?;
    write_stdout(&page)?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Writes generated text to standard output; a closed pipe (`grpclab man | head`) is not
/// an error.
fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    match std::io::stdout().write_all(bytes) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("cannot write to standard output: {err}"))
        }
        _ => Ok(()),
    }
}
