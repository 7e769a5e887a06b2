//! Suites: which implementations to benchmark and how to start them.
//!
//! A suite file is TOML, one `[[implementation]]` table per server:
//!
//! ```toml
//! [[implementation]]
//! name = "go_grpc"                       # the table's row name
//! workdir = "go_grpc"                    # optional, relative to the suite file
//! requires = "command -v go"             # optional: a shell check; failing, the row is SKIPPED
//! install = "bash peers/install.sh go"   # optional: how to get what `requires` checks
//! build = "./build.sh {scenario_dir} {build_dir}"   # optional, cached (below)
//! command = "exec {build_dir}/server {port}"        # run with sh -c
//! ready = "rpc"                          # optional: "rpc" (default, one real call) or "port"
//! env = { GOMAXPROCS = "{threads}" }     # optional, added to the server's environment
//! tls = "--cert {tls_cert} --key {tls_key}"         # optional: appended under `bench --tls`
//! no_tls = "why this server cannot serve TLS"      # optional: the SKIPPED reason under --tls
//! ```
//!
//! Placeholders, filled in `build`, `command` and `env` values: `{port}` (not in `build`),
//! `{threads}`, `{scenario_dir}` (a folder holding the scenario's `.proto` files and
//! `payload`: grpc_bench rebuilds each server for its scenario's proto), `{build_dir}`
//! (where the build puts its output) and `{grpclab}` (this binary: `{grpclab} serve --impl
//! lab ...` lists a built-in server in a suite), and in `tls` `{tls_cert}` and `{tls_key}`
//! (the PEM pair of a `--tls` run). A build runs once per distinct input: `{build_dir}` is
//! `<workdir>/.build/<scenario>-<hash>`, the hash covering the workdir's files (but `.build`,
//! `node_modules`, `target` and `.git`), the scenario's files, the build command and the env;
//! a finished build leaves a stamp there and is not run again.
//!
//! The server's environment also holds GRPC_SERVER_CPUS and GRPC_SERVER_RAM. The built-in
//! suite (tonic-mt, tonic-st, lab) runs this very binary's `serve` command.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::InputError;

/// How the harness decides a server is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Readiness {
    /// One real call of the scenario succeeds.
    #[default]
    Rpc,
    /// The port accepts a TCP connection.
    Port,
}

/// One implementation to benchmark.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ImplementationSpec {
    /// The row's name.
    pub name: String,
    /// The start command, for `sh -c`, with placeholders (see the module docs).
    pub command: String,
    /// An optional build command, run once per distinct input before starting.
    #[serde(default)]
    pub build: Option<String>,
    /// A shell check that the toolchain is there (e.g. `command -v go`); when it fails the
    /// row is SKIPPED, not FAILED.
    #[serde(default)]
    pub requires: Option<String>,
    /// How to install what `requires` checks, shown in the SKIPPED row.
    #[serde(default)]
    pub install: Option<String>,
    /// The working directory for build and start.
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    /// How readiness is checked.
    #[serde(default)]
    pub ready: Readiness,
    /// Extra environment for build and server.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Arguments appended to `command` under `bench --tls`, with `{tls_cert}` and `{tls_key}`
    /// (PEM files); an entry without them is SKIPPED under --tls.
    #[serde(default)]
    pub tls: Option<String>,
    /// Why the server cannot serve TLS here: the SKIPPED reason under `--tls` of an entry
    /// without `tls` (instead of the generic one asking for `tls` arguments).
    #[serde(default)]
    pub no_tls: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    #[serde(rename = "implementation", default)]
    implementations: Vec<ImplementationSpec>,
}

/// Reads a suite file. Relative paths resolve against the file's folder: a relative
/// `workdir`, and the working directory itself when none is given, so a suite runs the same
/// from any folder. Names must map to distinct result files.
pub fn load_suite(path: &Path) -> Result<Vec<ImplementationSpec>, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| InputError(format!("--suite: cannot read {}: {err}", path.display())))?;
    let suite: SuiteFile = toml::from_str(&text).map_err(|err| {
        InputError(format!(
            "--suite {}: {}",
            path.display(),
            err.to_string().trim().replace('\n', " ")
        ))
    })?;
    if suite.implementations.is_empty() {
        return Err(InputError(format!(
            "--suite {}: no [[implementation]] tables; see README.md for an example",
            path.display()
        )));
    }
    let absolute = std::fs::canonicalize(path)
        .map_err(|err| InputError(format!("--suite: cannot read {}: {err}", path.display())))?;
    let base = absolute.parent().unwrap_or(Path::new("/")).to_path_buf();
    let mut seen = std::collections::BTreeSet::new();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut implementations = suite.implementations;
    for spec in &mut implementations {
        if spec.name.is_empty() || spec.command.is_empty() {
            return Err(InputError(format!(
                "--suite {}: every implementation needs a name and a command",
                path.display()
            )));
        }
        if !seen.insert(spec.name.clone()) {
            return Err(InputError(format!(
                "--suite {}: the name '{}' appears twice",
                path.display(),
                spec.name
            )));
        }
        let file = super::names::sanitize(&spec.name);
        if let Some(other) = files.insert(file.clone(), spec.name.clone()) {
            return Err(InputError(format!(
                "--suite {}: the names '{other}' and '{}' would both write {file}.json; rename one (names differ only in letters, digits, '-', '_' and '.')",
                path.display(),
                spec.name
            )));
        }
        let workdir = match &spec.workdir {
            Some(workdir) if workdir.is_relative() => base.join(workdir),
            Some(workdir) => workdir.clone(),
            None => base.clone(),
        };
        if !workdir.is_dir() {
            return Err(InputError(format!(
                "--suite {}: the workdir of '{}' ({}) is not a folder; relative workdirs resolve against the suite file's folder",
                path.display(),
                spec.name,
                workdir.display()
            )));
        }
        spec.workdir = Some(workdir);
    }
    Ok(implementations)
}

/// The built-in servers, started as `EXE serve --impl NAME`.
pub fn builtin_suite(exe: &Path) -> Vec<ImplementationSpec> {
    let exe = shell_quote(&exe.display().to_string());
    ["tonic-mt", "tonic-st", "lab"]
        .iter()
        .map(|name| ImplementationSpec {
            name: (*name).to_owned(),
            command: format!(
                "exec {exe} serve --impl {name} --port {{port}} --threads {{threads}}"
            ),
            build: None,
            requires: None,
            no_tls: None,
            install: None,
            workdir: None,
            ready: Readiness::Rpc,
            env: BTreeMap::new(),
            tls: Some("--tls-cert {tls_cert} --tls-key {tls_key}".to_owned()),
        })
        .collect()
}

/// Keeps the implementations named in `names` (all when empty), in the order given.
pub fn select(
    suite: Vec<ImplementationSpec>,
    names: &[String],
) -> Result<Vec<ImplementationSpec>, InputError> {
    if names.is_empty() {
        return Ok(suite);
    }
    names
        .iter()
        .map(|name| {
            suite
                .iter()
                .find(|spec| &spec.name == name)
                .cloned()
                .ok_or_else(|| {
                    let known: Vec<&str> = suite.iter().map(|spec| spec.name.as_str()).collect();
                    InputError(format!(
                        "unknown implementation '{name}'; the suite has: {}",
                        known.join(", ")
                    ))
                })
        })
        .collect()
}

/// Quotes a word for `sh`.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_parse_and_name_their_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("suite.toml");
        std::fs::write(
            &file,
            "[[implementation]]\nname = \"a\"\ncommand = \"run {port}\"\nworkdir = \"x\"\nready = \"port\"\n",
        )
        .unwrap();
        let missing = load_suite(&file).unwrap_err().0;
        assert!(missing.contains("workdir of 'a'"), "{missing}");
        assert!(missing.contains("/x)"), "{missing}");
        std::fs::create_dir(dir.path().join("x")).unwrap();
        let suite = load_suite(&file).unwrap();
        assert_eq!(suite[0].ready, Readiness::Port);
        let base = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(suite[0].workdir.as_deref(), Some(base.join("x").as_path()));
        std::fs::write(&file, "[[implementation]]\nname = \"a\"\ncomand = \"x\"\n").unwrap();
        let err = load_suite(&file).unwrap_err().0;
        assert!(err.contains("comand"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn names_that_share_a_result_file_are_refused_and_workdir_defaults_to_the_suites_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("suite.toml");
        let entry =
            |name: &str| format!("[[implementation]]\nname = \"{name}\"\ncommand = \"x\"\n");
        std::fs::write(&file, entry("a b") + &entry("a_b")).unwrap();
        let err = load_suite(&file).unwrap_err().0;
        assert!(
            err.contains("'a b' and 'a_b' would both write a_b.json"),
            "{err}"
        );
        std::fs::write(&file, entry("a")).unwrap();
        let suite = load_suite(&file).unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(suite[0].workdir.as_deref(), Some(base.as_path()));
    }

    #[test]
    fn selection_keeps_order_and_refuses_unknown_names() {
        let suite = builtin_suite(Path::new("/bin/grpclab"));
        let picked = select(suite.clone(), &["lab".to_owned(), "tonic-mt".to_owned()]).unwrap();
        assert_eq!(picked[0].name, "lab");
        assert!(select(suite, &["nope".to_owned()])
            .unwrap_err()
            .0
            .contains("tonic-st"));
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
