//! Where runs are stored: `--history PATH|URL` or `$GRPCLAB_HISTORY`, else a SQLite file
//! under the XDG data directory; `--no-history` stores nothing. A PostgreSQL URL's password
//! comes from the URL, `--history-password-file`, or `$GRPCLAB_HISTORY_PASSWORD`, and is
//! taken out of the URL at once so nothing downstream can echo it.

use std::path::{Path, PathBuf};

use super::store::Backend;
use crate::InputError;

/// The environment variable naming the store when `--history` is not given.
pub const HISTORY_ENV: &str = "GRPCLAB_HISTORY";
/// The environment variable holding a PostgreSQL password.
pub const PASSWORD_ENV: &str = "GRPCLAB_HISTORY_PASSWORD";
/// The default store's file name under the data directory.
pub const DEFAULT_FILE: &str = "grpclab/history.sqlite";

/// The history flags every storing command shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryFlags {
    /// `--history PATH|URL`.
    pub location: Option<String>,
    /// `--history-password-file FILE`.
    pub password_file: Option<PathBuf>,
    /// `--no-history`.
    pub off: bool,
}

/// The store these flags choose: `None` for `--no-history`; `Some(Err)` with the warning to
/// give when no place can be found (no `$HOME`), which never stops a run. A malformed URL or
/// an unreadable password file is the user's input: an error.
pub fn resolve(flags: &HistoryFlags) -> Result<Option<Result<Backend, String>>, InputError> {
    if flags.off {
        return Ok(None);
    }
    let location = flags.location.clone().or_else(|| {
        std::env::var(HISTORY_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
    });
    let Some(location) = location else {
        return Ok(Some(default_path().map(Backend::Sqlite)));
    };
    backend_of(&location, flags.password_file.as_deref()).map(|backend| Some(Ok(backend)))
}

/// The store `location` names (a path or a `postgres://` URL).
pub fn backend_of(location: &str, password_file: Option<&Path>) -> Result<Backend, InputError> {
    let location = location.trim();
    if location.is_empty() {
        return Err(InputError(
            "--history is empty: give a file path, a postgres:// URL, or --no-history".to_owned(),
        ));
    }
    let lower = location.to_ascii_lowercase();
    if !(lower.starts_with("postgres://") || lower.starts_with("postgresql://")) {
        if lower.contains("://") {
            return Err(InputError(format!(
                "--history {}: only SQLite files and postgres:// URLs are supported",
                redact_url(location)
            )));
        }
        return Ok(Backend::Sqlite(PathBuf::from(location)));
    }
    let (url, from_url) = split_password(location);
    let password = match (from_url, password_file) {
        (Some(password), _) => Some(password),
        (None, Some(file)) => Some(
            std::fs::read_to_string(file)
                .map_err(|err| {
                    InputError(format!(
                        "--history-password-file {}: {err}; give a readable file holding the password",
                        file.display()
                    ))
                })?
                .trim_end_matches(['\r', '\n'])
                .to_owned(),
        ),
        (None, None) => std::env::var(PASSWORD_ENV).ok(),
    };
    // The URL must parse now (a typo is the user's to fix), without its password.
    url.parse::<postgres::Config>().map_err(|err| {
        InputError(format!(
            "--history {url}: not a PostgreSQL URL ({err}); write postgres://USER@HOST:PORT/DATABASE"
        ))
    })?;
    Ok(Backend::Postgres { url, password })
}

/// The default SQLite file: `$XDG_DATA_HOME/grpclab/history.sqlite`, else
/// `~/.local/share/grpclab/history.sqlite`.
pub fn default_path() -> Result<PathBuf, String> {
    if let Some(data) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(data).join(DEFAULT_FILE));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/share").join(DEFAULT_FILE)),
        None => Err(
            "neither $XDG_DATA_HOME nor $HOME is set; give --history PATH, or --no-history"
                .to_owned(),
        ),
    }
}

/// The URL without its password, and the password (percent-decoded).
fn split_password(url: &str) -> (String, Option<String>) {
    let Some(scheme_end) = url.find("://") else {
        return (url.to_owned(), None);
    };
    let rest = &url[scheme_end + 3..];
    // The user part ends at the last '@' before the path.
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return (url.to_owned(), None);
    };
    let userinfo = &rest[..at];
    let Some((user, password)) = userinfo.split_once(':') else {
        return (url.to_owned(), None);
    };
    let stripped = format!("{}{user}{}", &url[..scheme_end + 3], &rest[at..]);
    (stripped, Some(percent_decode(password)))
}

/// A URL as it may be printed: any password replaced by `***`.
pub fn redact_url(url: &str) -> String {
    match split_password(url) {
        (stripped, Some(_)) => match stripped.find("://") {
            Some(scheme_end) => {
                let rest = &stripped[scheme_end + 3..];
                let at = rest.find('@').unwrap_or(0);
                format!(
                    "{}{}:***{}",
                    &stripped[..scheme_end + 3],
                    &rest[..at],
                    &rest[at..]
                )
            }
            None => stripped,
        },
        (url, None) => url,
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[index] == b'%' && index + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[index + 1]), hex(bytes[index + 2])) {
                out.push((high * 16 + low) as u8);
                index += 3;
                continue;
            }
        }
        out.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_leaves_the_url_at_once() {
        let backend = backend_of("postgres://grpclab:p%40ss:w0rd@127.0.0.1:5432/runs", None)
            .expect("a valid URL");
        assert_eq!(
            backend,
            Backend::Postgres {
                url: "postgres://grpclab@127.0.0.1:5432/runs".to_owned(),
                password: Some("p@ss:w0rd".to_owned()),
            }
        );
        assert_eq!(
            redact_url("postgresql://u:secret@h/db"),
            "postgresql://u:***@h/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn paths_urls_and_mistakes() {
        assert_eq!(
            backend_of("/tmp/h.sqlite", None),
            Ok(Backend::Sqlite(PathBuf::from("/tmp/h.sqlite")))
        );
        let err = backend_of("mysql://u:topsecret@h/db", None).expect_err("refused");
        assert!(err.0.contains("only SQLite"), "{err}");
        assert!(!err.0.contains("topsecret"), "{err}");
        assert!(backend_of("  ", None).is_err());
        let missing = backend_of(
            "postgres://u@h/db",
            Some(Path::new("/nonexistent/grpclab-password")),
        )
        .expect_err("refused");
        assert!(missing.0.contains("--history-password-file"), "{missing}");
    }
}
