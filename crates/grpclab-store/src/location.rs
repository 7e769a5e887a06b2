//! Where runs are stored: `--history PATH|URL|CONNINFO` or `$GRPCLAB_HISTORY`, else a SQLite
//! file under the XDG data directory; `--no-history` stores nothing.
//!
//! A PostgreSQL location is read by the driver's own parser (tokio-postgres reads URLs and
//! `key=value` strings as libpq does), so the password is wherever the driver finds it — in
//! the user part up to the first `@`, in `?password=`, in `password='...'` — and never
//! where a hand-written splitter guessed. What is ever shown of the location is rebuilt from
//! the parsed parts that are not secret ([`PostgresTarget::display`]); the string the user
//! gave is never printed.

use std::path::{Path, PathBuf};

use postgres::config::Host;

use grpclab_core::InputError;

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

/// How the connection to PostgreSQL is protected: libpq's `sslmode` values, with libpq's
/// default (`prefer`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SslMode {
    /// Plaintext only.
    Disable,
    /// TLS when the server offers it, else plaintext; the certificate is not verified
    /// (unless `sslrootcert` names the roots to check it against).
    #[default]
    Prefer,
    /// TLS or no connection; the certificate is not verified (unless `sslrootcert` names
    /// the roots to check it against).
    Require,
    /// TLS, the certificate signed by a trusted root (`sslrootcert`, else the system's) and
    /// naming the host connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, InputError> {
        match value {
            "disable" => Ok(SslMode::Disable),
            "prefer" => Ok(SslMode::Prefer),
            "require" => Ok(SslMode::Require),
            "verify-full" => Ok(SslMode::VerifyFull),
            "allow" | "verify-ca" => Err(InputError(format!(
                "--history: sslmode={value} is not supported; use disable, prefer, require or verify-full"
            ))),
            _ => Err(InputError(
                "--history: sslmode must be disable, prefer, require or verify-full".to_owned(),
            )),
        }
    }

    /// libpq's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// A PostgreSQL store: the driver's configuration (password included, never printed) and
/// what may be said of it.
#[derive(Clone)]
pub struct PostgresTarget {
    /// The driver's settings, with the password from wherever it came.
    pub config: postgres::Config,
    /// TLS as asked (`sslmode`, libpq's default `prefer`).
    pub ssl_mode: SslMode,
    /// `sslrootcert`: the roots (PEM) the server's certificate is checked against.
    pub root_cert: Option<PathBuf>,
    /// The location as it may be shown: `postgres://USER@HOST:PORT/DB`, rebuilt from the
    /// parsed parts that are not secret.
    pub display: String,
}

/// Two targets are one store when they show the same and connect the same way (the
/// driver's settings have no equality of their own).
impl PartialEq for PostgresTarget {
    fn eq(&self, other: &Self) -> bool {
        self.display == other.display
            && self.ssl_mode == other.ssl_mode
            && self.root_cert == other.root_cert
            && self.password() == other.password()
    }
}

impl Eq for PostgresTarget {}

impl PostgresTarget {
    /// The password, if any.
    pub fn password(&self) -> Option<&[u8]> {
        self.config.get_password()
    }
}

/// Where the history flags point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `--no-history`: nowhere.
    Off,
    /// A store.
    Store(Backend),
    /// No place could be found (no `$HOME` for the default path): the one warning to give
    /// instead of storing, which never stops a run.
    Unavailable(String),
}

/// The store these flags choose. A malformed URL or an unreadable password file is the
/// user's input: an error.
pub fn resolve(flags: &HistoryFlags) -> Result<Location, InputError> {
    if flags.off {
        return Ok(Location::Off);
    }
    let location = flags.location.clone().or_else(|| {
        std::env::var(HISTORY_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
    });
    let Some(location) = location else {
        return Ok(match default_path() {
            Ok(path) => Location::Store(Backend::Sqlite(path)),
            Err(why) => Location::Unavailable(why),
        });
    };
    backend_of(&location, flags.password_file.as_deref()).map(Location::Store)
}

/// The store `location` names: a path, a `postgres://` URL or a libpq `key=value` string.
pub fn backend_of(location: &str, password_file: Option<&Path>) -> Result<Backend, InputError> {
    let location = location.trim();
    if location.is_empty() {
        return Err(InputError(
            "--history is empty: give a file path, a postgres:// URL, or --no-history".to_owned(),
        ));
    }
    let lower = location.to_ascii_lowercase();
    let is_url = ["postgres://", "postgresql://"]
        .iter()
        .any(|prefix| lower.starts_with(prefix));
    if is_url {
        return postgres_target(&normalized_scheme(location), true, password_file)
            .map(|target| Backend::Postgres(Box::new(target)));
    }
    if looks_like_conninfo(location) {
        return postgres_target(location, false, password_file)
            .map(|target| Backend::Postgres(Box::new(target)));
    }
    if let Some((scheme, _)) = location.split_once("://") {
        // Only the scheme, and only when it is one: the rest may hold a password.
        let is_scheme = !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        let what = if is_scheme {
            format!("{scheme}://...")
        } else {
            "this URL".to_owned()
        };
        return Err(InputError(format!(
            "--history {what}: only SQLite files, postgres:// URLs and libpq key=value strings are supported"
        )));
    }
    Ok(Backend::Sqlite(PathBuf::from(location)))
}

/// The URL with its scheme in lower case, as the driver matches it.
fn normalized_scheme(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    format!("{}://{rest}", scheme.to_ascii_lowercase())
}

/// Whether `text` is a libpq `key=value` string (`host=db user=me ...`) rather than a path:
/// it starts with one of libpq's keywords and an `=`.
fn looks_like_conninfo(text: &str) -> bool {
    const KEYWORDS: [&str; 8] = [
        "host", "hostaddr", "port", "user", "dbname", "password", "sslmode", "options",
    ];
    let Some((key, _)) = text.split_once('=') else {
        return false;
    };
    KEYWORDS.contains(&key.trim())
}

fn postgres_target(
    location: &str,
    is_url: bool,
    password_file: Option<&Path>,
) -> Result<PostgresTarget, InputError> {
    let (location, tls) = if is_url {
        check_one_at(location)?;
        take_url_tls_params(location)?
    } else {
        take_conninfo_tls_params(location)?
    };
    let mut config: postgres::Config = location
        .parse()
        .map_err(|err| InputError(parse_error_message(&err)))?;
    let ssl_mode = match tls.mode.as_deref() {
        Some(mode) => SslMode::parse(mode)?,
        None => SslMode::default(),
    };
    config.ssl_mode(match ssl_mode {
        SslMode::Disable => postgres::config::SslMode::Disable,
        SslMode::Prefer => postgres::config::SslMode::Prefer,
        SslMode::Require | SslMode::VerifyFull => postgres::config::SslMode::Require,
    });
    if config.get_password().is_none() {
        let password = match password_file {
            Some(file) => Some(first_line_of(file)?),
            None => std::env::var(PASSWORD_ENV).ok(),
        };
        if let Some(password) = password {
            config.password(password);
        }
    }
    let display = display_of(&config, ssl_mode);
    Ok(PostgresTarget {
        config,
        ssl_mode,
        root_cert: tls.root_cert.map(PathBuf::from),
        display,
    })
}

/// The password file's first line (the documented form: a file may end with a newline, or
/// hold notes below the password).
fn first_line_of(file: &Path) -> Result<String, InputError> {
    let text = std::fs::read_to_string(file).map_err(|err| {
        InputError(format!(
            "--history-password-file {}: {err}; give a readable file holding the password on its first line",
            file.display()
        ))
    })?;
    let line = text.lines().next().unwrap_or("");
    Ok(line.trim_end_matches('\r').to_owned())
}

/// The driver reads a URL's credentials up to the first `@`: a password holding a raw `@`
/// leaves the rest of it in the host, the database name or the parameters. Such a URL
/// cannot connect as meant; say so without echoing it.
fn check_one_at(url: &str) -> Result<(), InputError> {
    if url.matches('@').count() > 1 {
        return Err(InputError(
            "--history: the URL holds more than one '@'; percent-encode an '@' in the password or a parameter as %40 (or use --history-password-file)"
                .to_owned(),
        ));
    }
    Ok(())
}

/// The driver's parse error, said without any of the text it read: its messages for an
/// unknown option or an unexpected character quote the location, which may be the
/// password itself (a password with a space, unquoted).
fn parse_error_message(err: &postgres::Error) -> String {
    let text = err.to_string();
    let what = if text.contains("invalid value for option") {
        // Names one of the driver's own keywords, never a value.
        text
    } else if text.contains("unknown option") {
        "an option it does not know; libpq's keywords are host, hostaddr, port, user, password, dbname, options, application_name, sslmode, sslrootcert, connect_timeout, keepalives, target_session_attrs".to_owned()
    } else {
        "it cannot be read; quote a value holding spaces as '...' and percent-encode a URL's special characters".to_owned()
    };
    format!("--history: not a PostgreSQL URL or connection string ({what}); write postgres://USER@HOST:PORT/DATABASE")
}

/// The TLS settings grpclab reads itself (the driver knows neither `verify-full` nor
/// `sslrootcert`), taken out of the location.
#[derive(Debug, Default)]
struct TlsParams {
    mode: Option<String>,
    root_cert: Option<String>,
}

impl TlsParams {
    /// Keeps `key`'s value if it is one of ours; whether it was.
    fn take(&mut self, key: &str, value: String) -> bool {
        match key {
            "sslmode" => self.mode = Some(value),
            "sslrootcert" => self.root_cert = Some(value),
            _ => return false,
        }
        true
    }
}

/// A URL without its `sslmode` and `sslrootcert` parameters, and their values. The query
/// is found as the driver finds it: after the credentials (up to the first `@`), the first
/// `?`.
fn take_url_tls_params(url: &str) -> Result<(String, TlsParams), InputError> {
    let mut tls = TlsParams::default();
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let after_credentials = rest.find('@').map_or(0, |at| at + 1);
    let Some(query_at) = rest[after_credentials..]
        .find('?')
        .map(|at| at + after_credentials)
    else {
        return Ok((url.to_owned(), tls));
    };
    let mut kept = Vec::new();
    for pair in rest[query_at + 1..].split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !tls.take(&percent_decode(key), percent_decode(value)) {
            kept.push(pair);
        }
    }
    let mut out = format!("{scheme}://{}", &rest[..query_at]);
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    Ok((out, tls))
}

/// A `key=value` string without its `sslmode` and `sslrootcert` entries, and their values,
/// read with libpq's grammar (values plain or in single quotes, `\` escaping the next
/// character). What it cannot read is left for the driver to refuse.
fn take_conninfo_tls_params(text: &str) -> Result<(String, TlsParams), InputError> {
    let mut tls = TlsParams::default();
    let mut out = String::with_capacity(text.len());
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut at = 0;
    while at < chars.len() {
        let start = chars[at].0;
        // Whitespace, then the keyword up to whitespace or '='.
        while at < chars.len() && chars[at].1.is_whitespace() {
            at += 1;
        }
        let key_start = at;
        while at < chars.len() && !chars[at].1.is_whitespace() && chars[at].1 != '=' {
            at += 1;
        }
        let key: String = chars[key_start..at].iter().map(|(_, c)| c).collect();
        while at < chars.len() && chars[at].1.is_whitespace() {
            at += 1;
        }
        if at >= chars.len() || chars[at].1 != '=' {
            // Not a keyword=value pair: the driver says what is wrong.
            out.push_str(&text[start..]);
            break;
        }
        at += 1;
        while at < chars.len() && chars[at].1.is_whitespace() {
            at += 1;
        }
        let mut value = String::new();
        let quoted = at < chars.len() && chars[at].1 == '\'';
        if quoted {
            at += 1;
        }
        while at < chars.len() {
            let c = chars[at].1;
            if (quoted && c == '\'') || (!quoted && c.is_whitespace()) {
                break;
            }
            if c == '\\' && at + 1 < chars.len() {
                at += 1;
                value.push(chars[at].1);
            } else {
                value.push(c);
            }
            at += 1;
        }
        if quoted && at < chars.len() {
            at += 1;
        }
        let end = chars.get(at).map_or(text.len(), |(index, _)| *index);
        if !tls.take(&key, value) {
            out.push_str(&text[start..end]);
        }
    }
    Ok((out, tls))
}

/// `postgres://USER@HOST:PORT[,HOST:PORT]/DB[?sslmode=MODE]`, from the parsed parts: no
/// password, no other parameter.
fn display_of(config: &postgres::Config, ssl_mode: SslMode) -> String {
    let mut out = String::from("postgres://");
    if let Some(user) = config.get_user() {
        out.push_str(&percent_encode(user));
        out.push('@');
    }
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(index, host)| {
            let name = match host {
                Host::Tcp(name) if name.contains(':') => format!("[{name}]"),
                Host::Tcp(name) => percent_encode(name),
                Host::Unix(path) => percent_encode(&path.display().to_string()),
            };
            let port = ports.get(index).or_else(|| ports.first());
            match port {
                Some(port) => format!("{name}:{port}"),
                None => name,
            }
        })
        .collect();
    out.push_str(&hosts.join(","));
    if let Some(dbname) = config.get_dbname() {
        out.push('/');
        out.push_str(&percent_encode(dbname));
    }
    if ssl_mode != SslMode::default() {
        out.push_str("?sslmode=");
        out.push_str(ssl_mode.name());
    }
    out
}

/// The default SQLite file: `$XDG_DATA_HOME/grpclab/history.sqlite`, else
/// `~/.local/share/grpclab/history.sqlite`.
pub(crate) fn default_path() -> Result<PathBuf, String> {
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

/// Every byte outside the unreserved set and `.`, as `%XX`.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
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

/// Where the store lives.
#[derive(Clone, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database: the driver's settings (the password, from the location, the
    /// environment or a file, among them) and what may be shown of them.
    Postgres(Box<PostgresTarget>),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password, even in a debug print.
        f.write_str(&self.describe())
    }
}

impl Backend {
    /// Where it is, as said to a person: a path, or the URL with no password.
    pub fn describe(&self) -> String {
        match self {
            Backend::Sqlite(path) => path.display().to_string(),
            Backend::Postgres(target) => target.display.clone(),
        }
    }

    /// `text` with the password (if any) replaced, for any message that might quote it (a
    /// driver's error that repeats its connection string).
    pub fn redact(&self, text: &str) -> String {
        match self {
            Backend::Postgres(target) => match target.password() {
                Some(password) if !password.is_empty() => {
                    text.replace(String::from_utf8_lossy(password).as_ref(), "***")
                }
                _ => text.to_owned(),
            },
            Backend::Sqlite(_) => text.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(location: &str) -> PostgresTarget {
        match backend_of(location, None) {
            Ok(Backend::Postgres(target)) => *target,
            other => panic!("{location}: {other:?}"),
        }
    }

    #[test]
    fn the_password_is_where_the_driver_finds_it() {
        let cases = [
            (
                "postgres://grpclab:p%40ss:w0rd@127.0.0.1:5432/runs",
                "p@ss:w0rd",
            ),
            ("postgres://u:pa/ss@db:5432/runs", "pa/ss"),
            ("postgres://u:pa?ss=1@db/runs", "pa?ss=1"),
            (
                "postgres://grpclab_test@127.0.0.1:5432/grpclab_test?password=SECRET",
                "SECRET",
            ),
            (
                "postgres://u@db/runs?application_name=x&password=a%2Fb%3Fc",
                "a/b?c",
            ),
            ("host=db user=u password=s3cret dbname=runs", "s3cret"),
            (
                r"host=db user=u password='it\'s a /@?= one' dbname=runs",
                "it's a /@?= one",
            ),
            ("POSTGRESQL://u:Upper@db/runs", "Upper"),
        ];
        for (location, password) in cases {
            let target = target(location);
            assert_eq!(target.password(), Some(password.as_bytes()), "{location}");
            assert!(!target.display.contains(password), "{}", target.display);
            assert!(
                !format!("{:?}", Backend::Postgres(Box::new(target.clone()))).contains(password)
            );
        }
        assert_eq!(
            target("postgres://grpclab_test@127.0.0.1:5432/grpclab_test?password=SECRET").display,
            "postgres://grpclab_test@127.0.0.1:5432/grpclab_test"
        );
        assert_eq!(
            target("host=db user=u password=x dbname=runs sslmode=require").display,
            "postgres://u@db/runs?sslmode=require"
        );
        assert_eq!(
            target("postgres://u:x@[::1]:6543,db2/runs").display,
            "postgres://u@[::1]:6543,db2:5432/runs"
        );
    }

    #[test]
    fn tls_settings_are_read_and_left_out_of_the_driver_string() {
        let url = target("postgres://u:pw@db/runs?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&application_name=x");
        assert_eq!(url.ssl_mode, SslMode::VerifyFull);
        assert_eq!(url.root_cert.as_deref(), Some(Path::new("/tmp/ca.pem")));
        assert_eq!(url.config.get_application_name(), Some("x"));
        let conninfo = target("host=db sslrootcert='/tmp/my ca.pem' user=u sslmode=disable");
        assert_eq!(conninfo.ssl_mode, SslMode::Disable);
        assert_eq!(
            conninfo.root_cert.as_deref(),
            Some(Path::new("/tmp/my ca.pem"))
        );
        assert_eq!(conninfo.config.get_user(), Some("u"));
        assert_eq!(target("postgres://u@db/runs").ssl_mode, SslMode::Prefer);
        let refused = backend_of("postgres://u@db/runs?sslmode=verify-ca", None).unwrap_err();
        assert!(refused.0.contains("verify-full"), "{refused}");
    }

    #[test]
    fn paths_urls_and_mistakes() {
        assert_eq!(
            backend_of("/tmp/h.sqlite", None),
            Ok(Backend::Sqlite(PathBuf::from("/tmp/h.sqlite")))
        );
        assert_eq!(
            backend_of("runs=old.sqlite", None),
            Ok(Backend::Sqlite(PathBuf::from("runs=old.sqlite")))
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

    #[test]
    fn the_password_file_gives_its_first_line() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let file = dir.path().join("pw");
        std::fs::write(&file, "first/@?=line\r\nsecond line\n").expect("write");
        let Ok(Backend::Postgres(target)) = backend_of("postgres://u@db/runs", Some(&file)) else {
            panic!("a postgres store");
        };
        assert_eq!(target.password(), Some(&b"first/@?=line"[..]));
        // A password in the URL wins over the file.
        let Ok(Backend::Postgres(target)) = backend_of("postgres://u:inurl@db/runs", Some(&file))
        else {
            panic!("a postgres store");
        };
        assert_eq!(target.password(), Some(&b"inurl"[..]));
    }

    /// A small deterministic generator (xorshift), so the property test needs no crate and
    /// a failure is reproduced by its case number.
    struct Cases(u64);

    impl Cases {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick(&mut self, items: &[&'static str]) -> &'static str {
            items[(self.next() % items.len() as u64) as usize]
        }
    }

    /// Every shape of location that names a password, with passwords made of characters no
    /// message, user, host or database name here holds (Greek and Cyrillic letters) and the
    /// URL's delimiters: whatever is accepted connects with exactly that password and shows
    /// none of it; whatever is refused says none of it either.
    #[test]
    fn no_location_shows_its_password() {
        const SECRET: [&str; 4] = ["λ", "Ω", "ж", "ß"];
        const DELIMITERS: [&str; 12] =
            ["/", "@", "?", "=", ":", "&", "%", " ", "'", "\\", "#", ","];
        let hosts = [
            "db",
            "127.0.0.1",
            "[::1]",
            "db.example:6543",
            "[::1]:5433,db2",
        ];
        let mut cases = Cases(0x9e37_79b9_7f4a_7c15);
        for case in 0..4000 {
            let mut password = String::new();
            for _ in 0..(3 + cases.next() % 8) {
                if cases.next().is_multiple_of(2) {
                    password.push_str(cases.pick(&SECRET));
                } else {
                    password.push_str(cases.pick(&DELIMITERS));
                }
            }
            password.insert_str(0, cases.pick(&SECRET));
            let host = cases.pick(&hosts);
            let quoted = password.replace('\\', "\\\\").replace('\'', "\\'");
            let unquoted = quoted.replace(' ', "\\ ");
            let encoded = percent_encode(&password);
            let shapes = [
                format!("postgres://me:{password}@{host}/runs"),
                format!("postgresql://me:{encoded}@{host}/runs"),
                format!("postgres://me@{host}/runs?password={encoded}"),
                format!("postgres://me@{host}/runs?sslmode=require&password={encoded}"),
                format!("host=db user=me password='{quoted}' dbname=runs"),
                format!("user=me password={unquoted} host=db sslmode=disable"),
            ];
            for location in shapes {
                let leaked = |text: &str| {
                    SECRET.iter().any(|c| text.contains(c))
                        || ["%CE", "%D0", "%C3"].iter().any(|e| text.contains(e))
                };
                match backend_of(&location, None) {
                    Ok(Backend::Postgres(target)) => {
                        assert!(!leaked(&target.display), "case {case}: {}", target.display);
                        assert!(!leaked(&format!("{:?}", target.config)), "case {case}");
                        // What was accepted connects with the password as written, or (a
                        // raw '@' or '?' cut short) is not shown either way.
                        if !location.contains(&format!(":{password}@")) {
                            assert_eq!(
                                target.password(),
                                Some(password.as_bytes()),
                                "case {case}: {location}"
                            );
                        }
                    }
                    Ok(Backend::Sqlite(_)) => panic!("case {case}: {location} read as a path"),
                    Err(err) => assert!(!leaked(&err.0), "case {case}: {err}"),
                }
            }
        }
    }
}
