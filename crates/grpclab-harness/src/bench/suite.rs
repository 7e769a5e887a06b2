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
//! `<workdir>/.build/<hash>`, the hash covering the workdir's files (but `.build`,
//! `node_modules`, `target` and `.git`), the scenario's `.proto` files (not its payload: a
//! build compiles the schema), the build command and the env;
//! a finished build leaves a stamp there and is not run again. A `{word}` a field does not
//! take (`{prot}`, `{port}` in `build`) is refused when the suite loads, naming the field;
//! shell syntax (`${VAR}`, `{a,b}`) is left alone, and `requires` and `install` run as written.
//!
//! The server's environment also holds GRPC_SERVER_CPUS and GRPC_SERVER_RAM. The built-in
//! suite (tonic-mt, tonic-st, lab) runs this very binary's `serve` command.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use grpclab_core::InputError;

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
        check_fields(path, spec)?;
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
                "--suite {}: the workdir of '{}' ({:?}) is not a folder; relative workdirs resolve against the suite file's folder",
                path.display(),
                spec.name,
                workdir
            )));
        }
        spec.workdir = Some(workdir);
    }
    Ok(implementations)
}

/// The placeholders each text field takes. `{port}` and `{host}` are not known while
/// building, and the TLS pair exists only under `--tls`, so only the `tls` arguments may
/// name it.
const PLACEHOLDERS_BUILD: &[&str] = &["threads", "scenario_dir", "build_dir", "grpclab"];
const PLACEHOLDERS_COMMAND: &[&str] = &[
    "port",
    "host",
    "threads",
    "scenario_dir",
    "build_dir",
    "grpclab",
];
const PLACEHOLDERS_TLS: &[&str] = &[
    "port",
    "host",
    "threads",
    "scenario_dir",
    "build_dir",
    "grpclab",
    "tls_cert",
    "tls_key",
];

/// Refuses, naming the field, what would only fail later and far from its cause: a
/// placeholder that is not one (`{prot}` would reach the server as text), a NUL byte (no
/// process can take it), a name that would break the table's row, an environment variable
/// name the OS cannot hold.
fn check_fields(path: &Path, spec: &ImplementationSpec) -> Result<(), InputError> {
    let refuse = |what: String| {
        Err(InputError(format!(
            "--suite {}: {what} (in '{}')",
            path.display(),
            spec.name.escape_debug()
        )))
    };
    if spec.name.chars().any(char::is_control) {
        return refuse("the name holds a control character; a name is one line of text".into());
    }
    // (field, text, the placeholders it takes; None: run or shown as written, nothing filled)
    let mut texts: Vec<(String, &str, Option<&[&str]>)> = vec![(
        "command".into(),
        spec.command.as_str(),
        Some(PLACEHOLDERS_COMMAND),
    )];
    if let Some(build) = &spec.build {
        texts.push(("build".into(), build, Some(PLACEHOLDERS_BUILD)));
    }
    if let Some(tls) = &spec.tls {
        texts.push(("tls".into(), tls, Some(PLACEHOLDERS_TLS)));
    }
    for (field, text) in [
        ("requires", &spec.requires),
        ("install", &spec.install),
        ("no_tls", &spec.no_tls),
    ] {
        if let Some(text) = text {
            texts.push((field.into(), text, None));
        }
    }
    for (key, value) in &spec.env {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return refuse(format!(
                "env: '{}' cannot be an environment variable's name (empty, or holding '=' or a NUL byte)",
                key.escape_debug()
            ));
        }
        texts.push((format!("env.{key}"), value, Some(PLACEHOLDERS_COMMAND)));
    }
    for (field, text, known) in texts {
        if text.contains('\0') {
            return refuse(format!(
                "{field} holds a NUL byte, which no command or variable can carry"
            ));
        }
        let Some(known) = known else {
            continue;
        };
        if let Some(unknown) = unknown_placeholder(text, known) {
            let known: Vec<String> = known.iter().map(|name| format!("{{{name}}}")).collect();
            return refuse(format!(
                "{field} names {{{unknown}}}, which is not a placeholder there; {field} takes {}",
                known.join(", ")
            ));
        }
    }
    Ok(())
}

/// The first `{word}` in `text` that is not one of `known`. Shell syntax is left alone: a
/// `${VAR}` expansion, and braces around anything but a plain word (`{a,b}`, `{ print $1 }`).
fn unknown_placeholder<'a>(text: &'a str, known: &[&str]) -> Option<&'a str> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let shell = open > 0 && rest.as_bytes()[open - 1] == b'$';
        rest = &rest[open + 1..];
        let close = rest.find('}')?;
        let word = &rest[..close];
        let plain = !word.is_empty()
            && word
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_');
        if plain && !shell && !known.contains(&word) {
            return Some(word);
        }
    }
    None
}

/// The built-in servers, started as `EXE serve --impl NAME`.
pub fn builtin_suite(exe: &Path) -> Vec<ImplementationSpec> {
    let exe = shell_quote(&exe.display().to_string());
    ["tonic-mt", "tonic-st", "lab"]
        .iter()
        .map(|name| ImplementationSpec {
            name: (*name).to_owned(),
            command: format!(
                "exec {exe} serve --impl {name} --host {{host}} --port {{port}} --threads {{threads}}"
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
        assert!(missing.contains("/x\")"), "{missing}");
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

    /// TOML values of every type and shape, sane and absurd, for any field.
    fn field_values() -> Vec<String> {
        let mut values: Vec<String> = [
            r#""x""#,
            r#""""#,
            r#"" ""#,
            "0",
            "-1",
            "1.5",
            "nan",
            "inf",
            "true",
            "1979-05-27",
            "[]",
            r#"["a", "b"]"#,
            "{}",
            "{ A = 1 }",
            r#"{ A = "b" }"#,
            r#"{ "" = "b" }"#,
            r#"{ "A=B" = "c" }"#,
            r#"{ "A\u0000" = "c" }"#,
            r#"{ A = "{prot}" }"#,
            r#"{ A = "{port}" }"#,
            r#"{ A = { B = "c" } }"#,
            r#""\u0000""#,
            r#""a\nb""#,
            r#""{port}""#,
            r#""{prot}""#,
            r#""{threads} {build_dir} {scenario_dir} {grpclab}""#,
            r#""{tls_cert} {tls_key}""#,
            r#""${HOME} {a,b} { print $1 } {}""#,
            r#""{""#,
            r#""}{""#,
            r#""🙂""#,
            r#""rpc""#,
            r#""port""#,
            r#""RPC""#,
            r#""/""#,
            r#""/nonexistent/dir""#,
            r#""..""#,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        // And random strings over an alphabet heavy in braces and placeholder letters.
        let alphabet = b"{}$_portlsceamdk ,.0/";
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 14) as usize;
            let text: String = (0..len)
                .map(|i| alphabet[(seed >> (i * 4 % 60)) as usize % alphabet.len()] as char)
                .collect();
            // No quote or backslash in the alphabet: the debug form is a TOML string.
            values.push(format!("{text:?}"));
        }
        values
    }

    /// Every field of a suite entry, given any value: the suite loads, or is refused with one
    /// line that names the field — never a panic.
    #[test]
    fn every_field_value_is_accepted_or_refused_by_name_never_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("suite.toml");
        let fields = [
            "name", "command", "build", "requires", "install", "workdir", "ready", "env", "tls",
            "no_tls",
        ];
        let (mut accepted, mut refused) = (0, 0);
        for field in fields {
            for value in field_values() {
                let mut entry = String::from("[[implementation]]\n");
                if field != "name" {
                    entry.push_str("name = \"a\"\n");
                }
                if field != "command" {
                    entry.push_str("command = \"run {port}\"\n");
                }
                entry.push_str(&format!("{field} = {value}\n"));
                std::fs::write(&file, &entry).unwrap();
                let outcome = std::panic::catch_unwind(|| load_suite(&file));
                let Ok(outcome) = outcome else {
                    panic!("{field} = {value} panicked");
                };
                match outcome {
                    Ok(_) => accepted += 1,
                    Err(err) => {
                        refused += 1;
                        assert!(!err.0.contains('\n'), "one line: {}", err.0);
                        assert!(err.0.contains(field), "{field} = {value}: {}", err.0);
                    }
                }
            }
        }
        // Both outcomes happen: the values are not all refused by the TOML parser.
        assert!(
            accepted > 50 && refused > 50,
            "{accepted} accepted, {refused} refused"
        );
    }

    #[test]
    fn placeholders_that_are_not_are_refused_where_they_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("suite.toml");
        let refused = |extra: &str| {
            std::fs::write(
                &file,
                format!("[[implementation]]\nname = \"a\"\ncommand = \"run {{port}}\"\n{extra}\n"),
            )
            .unwrap();
            load_suite(&file).err().map(|err| err.0)
        };
        let err = refused(r#"build = "make {port}""#).unwrap();
        assert!(err.contains("build names {port}"), "{err}");
        let err = refused(r#"tls = "--cert {tls_crt}""#).unwrap();
        assert!(err.contains("tls names {tls_crt}"), "{err}");
        assert!(err.contains("{tls_cert}"), "{err}");
        let err = refused(r#"env = { PORT = "{prt}" }"#).unwrap();
        assert!(err.contains("env.PORT names {prt}"), "{err}");
        assert!(refused(r#"command = "x""#).is_some(), "a second command");
        // Shell syntax and the placeholders each field takes pass.
        assert_eq!(refused(r#"build = "make ${HOME} {threads} {a,b}""#), None);
        assert_eq!(refused(r#"tls = "{tls_cert} {tls_key} {port}""#), None);
        assert_eq!(refused(r#"requires = "awk '{print}' {anything}""#), None);
        // The committed peers' suite passes as it is.
        let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../peers/suite.toml");
        assert!(load_suite(&peers).is_ok());
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
