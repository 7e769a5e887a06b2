//! Sweeps: `grpclab bench --sweep KEY=V1,V2,...` (repeatable) runs every implementation at
//! every combination of the swept values.
//!
//! Keys that name a harness setting change it (`scenario`, `concurrency`, `connections`,
//! `qps`/`rps`, `server_cpus`, `client_cpus`); any other key is a server setting, passed to
//! the implementation's start command as `--KEY VALUE` (e.g. `decode=inline,pool` for lab).
//! The matrix is kept in `sweep.json`, and `sweep.md` shows req/s and p99 against the keys.

use serde::Serialize;
use std::fmt::Write as _;

use super::config::{parse_client_cpus, parse_cpus, parse_qps, parse_streams, BenchConfig};
use super::runner::{ImplResult, RowStatus};
use super::suite::{shell_quote, ImplementationSpec};
use grpclab_core::InputError;

/// One swept key and its values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Axis {
    /// The key, as given (dashes and underscores alike).
    pub key: String,
    /// Its values, in order.
    pub values: Vec<String>,
}

/// Parses `KEY=V1,V2,...`.
pub fn parse_axis(text: &str) -> Result<Axis, InputError> {
    let hint =
        "give --sweep KEY=V1,V2, e.g. --sweep concurrency=100,1000 or --sweep decode=inline,pool";
    let (key, values) = text
        .split_once('=')
        .ok_or_else(|| InputError(format!("--sweep '{text}' has no '='; {hint}")))?;
    let key = key.trim().replace('_', "-");
    let values: Vec<String> = values
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect();
    if key.is_empty() || values.is_empty() {
        return Err(InputError(format!(
            "--sweep '{text}' needs a key and at least one value; {hint}"
        )));
    }
    Ok(Axis { key, values })
}

/// Every combination of the axes' values, first axis slowest.
pub fn combinations(axes: &[Axis]) -> Vec<Vec<(String, String)>> {
    axes.iter().fold(vec![Vec::new()], |partial, axis| {
        partial
            .iter()
            .flat_map(|prefix| {
                axis.values.iter().map(move |value| {
                    let mut combination = prefix.clone();
                    combination.push((axis.key.clone(), value.clone()));
                    combination
                })
            })
            .collect()
    })
}

/// Parses a swept harness value with the same parser as its environment variable, so a
/// sweep accepts exactly what the variable accepts.
fn setting<T>(
    key: &str,
    value: &str,
    variable: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<T, InputError> {
    parse(value).map_err(|reason| {
        InputError(format!(
            "--sweep {key}: '{value}' is invalid ({variable}): {reason}"
        ))
    })
}

/// A combination applied: the run's settings and start command, and a note when a setting
/// had to give way (a swept concurrency below the connections set for the whole run: the
/// cell runs one connection per stream, as each connection needs one).
pub fn apply(
    config: &BenchConfig,
    spec: &ImplementationSpec,
    combination: &[(String, String)],
) -> Result<(BenchConfig, ImplementationSpec, Option<String>), InputError> {
    let mut config = config.clone();
    let mut spec = spec.clone();
    let mut label = spec.name.clone();
    for (key, value) in combination {
        match key.as_str() {
            "scenario" => config.scenario = value.clone(),
            "concurrency" => {
                config.concurrency = setting(key, value, "GRPC_CLIENT_CONCURRENCY", parse_streams)?
            }
            "connections" => {
                config.connections = setting(key, value, "GRPC_CLIENT_CONNECTIONS", parse_streams)?
            }
            "qps" | "rps" => config.qps = setting(key, value, "GRPC_CLIENT_QPS", parse_qps)?,
            "server-cpus" => {
                config.server_cpus = setting(key, value, "GRPC_SERVER_CPUS", parse_cpus)?
            }
            "client-cpus" => {
                config.client_cpus = setting(key, value, "GRPC_CLIENT_CPUS", parse_client_cpus)?
            }
            "network" => {
                config.network = grpclab_net::NetworkSpec::parse(value)
                    .map_err(|err| InputError(format!("--sweep {key}: {}", err.0)))?
            }
            "protocol" => {
                config.protocol = grpclab_core::protocol::Protocol::from_name(value)
                    .ok_or_else(|| {
                        InputError(format!(
                            "--sweep protocol: '{value}' is not a protocol: give grpc, grpc-web, grpc-web-text or connect"
                        ))
                    })?
            }
            server_setting => {
                spec.command
                    .push_str(&format!(" --{server_setting} {}", shell_quote(value)));
            }
        }
        let _ = write!(label, " {key}={value}");
    }
    let mut note = None;
    let fits = grpclab_load::config::connections_fit(
        config.connections,
        config.concurrency,
        ["connections", "concurrency"],
    );
    if fits.is_err() {
        let swept = |name: &str| combination.iter().any(|(key, _)| key == name);
        if swept("connections") || !swept("concurrency") {
            return Err(InputError(format!(
                "--sweep: connections ({}) above concurrency ({}) in '{label}': each connection needs a stream; sweep connections no higher than concurrency",
                config.connections, config.concurrency
            )));
        }
        note = Some(format!(
            "'{label}' ran {} connections, not {}: each connection needs a stream (set --connections or sweep connections to choose)",
            config.concurrency, config.connections
        ));
        config.connections = config.concurrency;
    }
    spec.name = label;
    Ok((config, spec, note))
}

/// One cell of the matrix, as kept in `sweep.json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SweepCell {
    /// The implementation.
    pub implementation: String,
    /// The swept settings of this cell.
    pub settings: Vec<(String, String)>,
    /// OK or failed.
    pub status: RowStatus,
    /// Requests per second, if measured.
    pub rps: Option<f64>,
    /// p99 latency in nanoseconds, if measured.
    pub p99_ns: Option<u64>,
}

impl SweepCell {
    /// The cell for a finished run.
    pub fn of(
        implementation: &str,
        settings: &[(String, String)],
        result: &ImplResult,
    ) -> SweepCell {
        let load = result
            .load
            .as_ref()
            .filter(|_| result.status == RowStatus::Ok);
        SweepCell {
            implementation: implementation.to_owned(),
            settings: settings.to_vec(),
            status: result.status,
            rps: load.map(|l| l.measured_rps),
            p99_ns: load.and_then(|l| l.percentile(99.0)),
        }
    }

    fn rps_text(&self) -> String {
        self.rps
            .map_or_else(|| "FAILED".to_owned(), |r| format!("{r:.0}"))
    }

    fn p99_text(&self) -> String {
        self.p99_ns
            .map_or_else(|| "-".to_owned(), |ns| format!("{:.2} ms", ns as f64 / 1e6))
    }
}

/// The Markdown matrix: per implementation, req/s and p99 against the swept keys (one key:
/// a column each; two keys: a matrix each, first key down, second across; more: one row per
/// combination).
pub fn render_markdown(axes: &[Axis], cells: &[SweepCell]) -> String {
    let mut out = String::new();
    let mut implementations: Vec<&str> = Vec::new();
    for cell in cells {
        if !implementations.contains(&cell.implementation.as_str()) {
            implementations.push(&cell.implementation);
        }
    }
    let find = |implementation: &str, settings: &[(&str, &str)]| {
        cells.iter().find(|c| {
            c.implementation == implementation
                && settings
                    .iter()
                    .all(|(k, v)| c.settings.iter().any(|(ck, cv)| ck == k && cv == v))
        })
    };
    for implementation in implementations {
        let _ = writeln!(out, "### {implementation}\n");
        match axes {
            [axis] => {
                let _ = writeln!(out, "| {} | req/s | p99 |\n|---|---:|---:|", axis.key);
                for value in &axis.values {
                    if let Some(cell) = find(implementation, &[(&axis.key, value)]) {
                        let _ = writeln!(
                            out,
                            "| {value} | {} | {} |",
                            cell.rps_text(),
                            cell.p99_text()
                        );
                    }
                }
            }
            [down, across] => {
                for (title, pick) in [("req/s", true), ("p99", false)] {
                    let _ = writeln!(
                        out,
                        "{title}:\n\n| {} \\ {} | {} |\n|---|{}",
                        down.key,
                        across.key,
                        across.values.join(" | "),
                        "---:|".repeat(across.values.len())
                    );
                    for row in &down.values {
                        let cells_text: Vec<String> = across
                            .values
                            .iter()
                            .map(|column| {
                                find(implementation, &[(&down.key, row), (&across.key, column)])
                                    .map_or_else(String::new, |cell| {
                                        if pick {
                                            cell.rps_text()
                                        } else {
                                            cell.p99_text()
                                        }
                                    })
                            })
                            .collect();
                        let _ = writeln!(out, "| {row} | {} |", cells_text.join(" | "));
                    }
                    out.push('\n');
                }
            }
            _ => {
                let _ = writeln!(out, "| settings | req/s | p99 |\n|---|---:|---:|");
                for cell in cells.iter().filter(|c| c.implementation == implementation) {
                    let settings: Vec<String> = cell
                        .settings
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect();
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} |",
                        settings.join(" "),
                        cell.rps_text(),
                        cell.p99_text()
                    );
                }
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_parse_and_combine() {
        let a = parse_axis("concurrency=10,20").unwrap();
        let b = parse_axis("decode = inline, pool").unwrap();
        assert_eq!(b.key, "decode");
        let combos = combinations(&[a, b]);
        assert_eq!(combos.len(), 4);
        assert_eq!(
            combos[1],
            [
                ("concurrency".into(), "10".into()),
                ("decode".into(), "pool".into())
            ]
        );
        assert!(parse_axis("concurrency").unwrap_err().0.contains("no '='"));
        assert!(parse_axis("concurrency=").is_err());
        assert_eq!(combinations(&[]), vec![Vec::new()]);
    }
}
