//! `grpclab load --config FILE`: ghz's config file (JSON, or TOML by its `.toml` extension),
//! whose keys are ghz's option names (`call`, `proto`, `total`, `concurrency`, `data`,
//! `metadata`, `insecure`, `host`, ...; grpclab's own long flag names work too). The file becomes
//! flags placed *before* the command line's, and the load command lets a later flag override
//! an earlier one, so flags given on the command line win, as in ghz.

use std::ffi::OsString;
use std::path::Path;

use crate::InputError;

/// ghz keys whose grpclab flag is spelled differently (the rest are `--KEY`).
const RENAMED: [(&str, &str); 1] = [("CPUs", "--cpus")];

/// Keys whose value is JSON text for the flag (objects and arrays as ghz writes them).
const JSON_VALUED: [&str; 4] = ["data", "metadata", "reflect-metadata", "tags"];

/// The load command's arguments with the config file's settings in front: `argv` is the whole
/// command line (program, `load`, flags); `--config` is taken out. `has_target`: the command
/// line named the server itself, so the file's `host` is not used.
pub fn expand(
    argv: &[OsString],
    path: &Path,
    has_target: bool,
) -> Result<Vec<OsString>, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| InputError(format!("--config: cannot read {}: {err}", path.display())))?;
    let settings = parse(path, &text)?;
    let mut from_file: Vec<OsString> = Vec::new();
    let mut host = None;
    for (key, value) in &settings {
        if key == "host" {
            host = Some(scalar(key, value, path)?);
            continue;
        }
        if key == "config" {
            return Err(InputError(format!(
                "--config {}: a config file cannot name another config file",
                path.display()
            )));
        }
        let flag = RENAMED
            .iter()
            .find(|(name, _)| name == key)
            .map_or_else(|| format!("--{key}"), |(_, flag)| (*flag).to_owned());
        match value {
            serde_json::Value::Bool(true) => from_file.push(flag.into()),
            serde_json::Value::Bool(false) | serde_json::Value::Null => {}
            serde_json::Value::Array(items) if !JSON_VALUED.contains(&key.as_str()) => {
                for item in items {
                    from_file.push(flag.clone().into());
                    from_file.push(scalar(key, item, path)?.into());
                }
            }
            value if JSON_VALUED.contains(&key.as_str()) => {
                from_file.push(flag.into());
                from_file.push(match value {
                    serde_json::Value::String(text) => text.clone().into(),
                    other => other.to_string().into(),
                });
            }
            value => {
                from_file.push(flag.into());
                from_file.push(scalar(key, value, path)?.into());
            }
        }
    }
    // argv: program, `load`, then the user's flags without --config.
    let after_load = argv
        .iter()
        .position(|arg| arg == "load")
        .map_or(1, |at| at + 1);
    let mut expanded: Vec<OsString> = argv.iter().take(after_load).cloned().collect();
    expanded.extend(from_file);
    let mut user = argv.iter().skip(after_load);
    while let Some(arg) = user.next() {
        if arg == "--config" {
            user.next();
            continue;
        }
        if arg.to_string_lossy().starts_with("--config=") {
            continue;
        }
        expanded.push(arg.clone());
    }
    if let (Some(host), false) = (host, has_target) {
        expanded.push(host.into());
    }
    Ok(expanded)
}

/// The file's settings, in file order (JSON) or key order (TOML).
fn parse(path: &Path, text: &str) -> Result<Vec<(String, serde_json::Value)>, InputError> {
    let is_toml = path.extension().is_some_and(|ext| ext == "toml");
    let value: serde_json::Value = if is_toml {
        let table: toml::Value = toml::from_str(text).map_err(|err| {
            // One line: toml's own text draws the line with a caret underneath.
            let at = err.span().map_or(0, |span| span.start);
            let before = &text[..at.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = at - before.rfind('\n').map_or(0, |newline| newline + 1) + 1;
            InputError(format!(
                "--config {}: not valid TOML at line {line}, column {column}: {}",
                path.display(),
                err.message()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        })?;
        serde_json::to_value(table)
            .map_err(|err| InputError(format!("--config {}: {err}", path.display())))?
    } else {
        serde_json::from_str(text).map_err(|err| {
            InputError(format!(
                "--config {}: not valid JSON ({err}); a .toml file is read as TOML",
                path.display()
            ))
        })?
    };
    match value {
        serde_json::Value::Object(map) => Ok(map.into_iter().collect()),
        _ => Err(InputError(format!(
            "--config {}: expected an object of ghz settings, e.g. {{\"call\": \"pkg.Svc.Method\", \"total\": 1000}}",
            path.display()
        ))),
    }
}

fn scalar(key: &str, value: &serde_json::Value, path: &Path) -> Result<String, InputError> {
    match value {
        serde_json::Value::String(text) => Ok(text.clone()),
        serde_json::Value::Number(number) => Ok(number.to_string()),
        serde_json::Value::Bool(flag) => Ok(flag.to_string()),
        _ => Err(InputError(format!(
            "--config {}: '{key}' must be a string, a number or a list of them",
            path.display()
        ))),
    }
}
