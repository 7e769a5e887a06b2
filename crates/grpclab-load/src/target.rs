//! A target as gRPC clients name it, parsed, resolved and probed once before a run:
//! `HOST:PORT` and `dns:///HOST:PORT` (every address the name resolves to, asked again on
//! each reconnect: [`crate::Naming`]), `dns://SERVER/NAME:PORT` (that DNS server),
//! `ipv4:A:PORT[,B:PORT...]`, `ipv6:[A]:PORT[,[B]:PORT...]`, and `unix:PATH` /
//! `unix:///ABSOLUTE_PATH`.
//!
//! [`Target::resolve`] reads the text; [`Target::pick_first`] makes gRPC's pick_first choice
//! (the first address that accepts a connection); [`Target::check_plaintext`] and
//! [`Target::check_unix`] turn a server that cannot answer what was asked (TLS where plaintext
//! was asked, no socket at the path) into one line before the run, not a run of failed calls.
//! The load's [`crate::LoadConfig`] takes the result (`addresses`, `unix`, `naming`,
//! `authority`).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::naming::Naming;

/// Why a target cannot be loaded; each message names the target and says what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// The text is not a target (no port, a bad address, an unsupported scheme).
    #[error("{0}")]
    Syntax(String),
    /// The name resolves to no address, or could not be resolved.
    #[error("{0}")]
    Resolve(String),
    /// The server cannot answer what was asked (TLS where plaintext was asked; no socket at
    /// a unix path; TLS or reflection over a unix socket).
    #[error("{0}")]
    Mismatch(String),
}

impl From<TargetError> for grpclab_core::InputError {
    fn from(err: TargetError) -> Self {
        grpclab_core::InputError(err.to_string())
    }
}

/// How to write a target, said in every syntax error.
const HINT: &str = "give HOST:PORT (e.g. 127.0.0.1:50051), dns:///HOST:PORT, or ipv4:A:PORT,B:PORT";

/// How long the plaintext check waits for the server's first bytes.
const PLAINTEXT_CHECK_WAIT: Duration = Duration::from_secs(2);

/// A target, resolved: where the run's connections go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The target as given.
    pub text: String,
    /// The `:authority` to send: the name and port as typed (the first address for
    /// ipv4:/ipv6:; `localhost` for a unix socket).
    pub authority: String,
    /// Every address, in order, each once (after [`Target::pick_first`], the one picked
    /// first). A unix socket's is a placeholder that only names the run.
    pub addresses: Vec<SocketAddr>,
    /// The name, resolved again on every reconnect (`None`: addresses given as such).
    pub naming: Option<Naming>,
    /// The socket a `unix:` target names.
    pub unix: Option<PathBuf>,
}

impl Target {
    /// Reads and resolves `text` (a name through the system's resolver or the DNS server it
    /// names). Nothing is connected to.
    pub fn resolve(text: &str) -> Result<Target, TargetError> {
        if let Some(path) = unix_socket(text)? {
            return Ok(Target {
                text: text.to_owned(),
                authority: "localhost".to_owned(),
                addresses: vec![SocketAddr::from(([127, 0, 0, 1], 0))],
                naming: None,
                unix: Some(path),
            });
        }
        resolve_addresses(text)
    }

    /// The part of a target that names its host (what TLS verifies): `HOST:PORT` without a
    /// `dns:` scheme; for an address list, its first entry.
    pub fn host_name(text: &str) -> String {
        host_part(text).0
    }

    /// The address the run dials first: gRPC's pick_first, the first address that accepts a
    /// connection (each tried for at most `connect_timeout`), or the first address when none
    /// does (the run's own connect then says why). With `reorder` (pick_first as the
    /// balancing), the picked address moves to the front, so a report lists the one that
    /// carried the run first.
    pub fn pick_first(&mut self, connect_timeout: Duration, reorder: bool) -> SocketAddr {
        let picked = if self.addresses.len() > 1 && self.unix.is_none() {
            self.addresses.iter().copied().find(|address| {
                std::net::TcpStream::connect_timeout(address, connect_timeout).is_ok()
            })
        } else {
            None
        };
        let picked = picked
            .or_else(|| self.addresses.first().copied())
            .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
        if reorder {
            self.addresses.retain(|address| *address != picked);
            self.addresses.insert(0, picked);
        }
        picked
    }

    /// For a plaintext run, makes sure the server at `address` does not speak TLS: a
    /// throwaway connection sends HTTP/2's client preface and reads the first bytes back. A
    /// TLS server answers that with a TLS alert (or hangs up); an HTTP/2 server answers with
    /// its SETTINGS. Anything but a TLS record lets the run go on (a server that is down or
    /// silent is the run's to report).
    pub fn check_plaintext(
        &self,
        address: SocketAddr,
        connect_timeout: Duration,
    ) -> Result<(), TargetError> {
        let Ok(mut tcp) = std::net::TcpStream::connect_timeout(&address, connect_timeout) else {
            return Ok(());
        };
        // The client preface and an empty SETTINGS frame (RFC 9113 §3.4).
        let mut hello = grpclab_h2::frame::PREFACE.to_vec();
        grpclab_h2::frame::write_settings(&mut hello, &[]);
        if tcp.write_all(&hello).is_err()
            || tcp
                .set_read_timeout(Some(PLAINTEXT_CHECK_WAIT.min(connect_timeout)))
                .is_err()
        {
            return Ok(());
        }
        let mut first = [0u8; 16];
        let mut got = 0;
        while got < 3 {
            match tcp.read(&mut first[got..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        // Some TLS servers (grpcio's) hang up on a plaintext preface without a word: then ask
        // in TLS whether it answers in TLS.
        let tls_answer = got == 0 && answers_tls_hello(address, connect_timeout);
        if tls_answer || grpclab_core::tls::looks_like_tls(&first[..got]) {
            return Err(TargetError::Mismatch(format!(
                "{} speaks TLS, and --insecure asks for plaintext: drop --insecure (add --cacert FILE if its certificate is from a private CA, or --skipTLS to skip verification)",
                self.text
            )));
        }
        Ok(())
    }

    /// What a unix-socket run needs before it starts: a socket at the path, plaintext (gRPC
    /// over a unix socket is, beside a sidecar), and the method from files or a built-in
    /// scenario (`schema_given`; reflection is asked over TCP). Nothing for other targets.
    pub fn check_unix(&self, tls: bool, schema_given: bool) -> Result<(), TargetError> {
        let Some(path) = &self.unix else {
            return Ok(());
        };
        check_socket(path, &self.text)?;
        if tls {
            return Err(TargetError::Mismatch(format!(
                "'{}': TLS over a unix socket is not supported; add --insecure (plaintext, as gRPC uses beside a sidecar)",
                self.text
            )));
        }
        if !schema_given {
            return Err(TargetError::Mismatch(format!(
                "'{}': grpclab asks a server's reflection over TCP only; give the method with --proto/--protoset and --call, or --scenario",
                self.text
            )));
        }
        Ok(())
    }
}

/// The host part of a target and whether it is an address list (`ipv4:`/`ipv6:`).
fn host_part(target: &str) -> (String, bool) {
    let target = target.trim();
    if let Some(rest) = target
        .strip_prefix("ipv4:")
        .or_else(|| target.strip_prefix("ipv6:"))
    {
        return (rest.split(',').next().unwrap_or("").trim().to_owned(), true);
    }
    let name = match target.strip_prefix("dns://") {
        // dns://SERVER/NAME:PORT (an empty SERVER: the system's resolver).
        Some(rest) => rest.split_once('/').map_or(rest, |(_, name)| name),
        None => target.strip_prefix("dns:").unwrap_or(target),
    };
    (name.to_owned(), false)
}

/// The DNS server of a `dns://SERVER[:PORT]/NAME:PORT` target (port 53 unless given); `None`
/// for every other target (`dns:///`: the system's resolver).
fn dns_server(target: &str) -> Result<Option<SocketAddr>, TargetError> {
    let Some((server, _)) = target
        .trim()
        .strip_prefix("dns://")
        .and_then(|rest| rest.split_once('/'))
    else {
        return Ok(None);
    };
    if server.is_empty() {
        return Ok(None);
    }
    if let Ok(address) = server.parse::<SocketAddr>() {
        return Ok(Some(address));
    }
    server
        .parse::<IpAddr>()
        .map(|ip| Some(SocketAddr::new(ip, 53)))
        .map_err(|_| {
            TargetError::Syntax(format!(
                "'{target}': '{server}' is not a DNS server's address; write dns://IP[:PORT]/NAME:PORT (e.g. dns://127.0.0.1:5353/api.local:50051), or dns:///NAME:PORT for the system's resolver"
            ))
        })
}

/// A TCP target's addresses: an address list as given, an address as such, or a name
/// resolved now (and again on every reconnect).
fn resolve_addresses(target: &str) -> Result<Target, TargetError> {
    let server = dns_server(target)?;
    if target.is_empty() {
        return Err(TargetError::Syntax(format!(
            "say which server to load: {HINT} (or \"host\" in --config)"
        )));
    }
    let (name, list) = host_part(target);
    let mut addresses: Vec<SocketAddr> = Vec::new();
    let mut naming = None;
    if list {
        let scheme = &target[..5];
        for entry in target[5..].split(',').map(str::trim) {
            let address: SocketAddr = entry.parse().map_err(|_| {
                TargetError::Syntax(format!(
                    "'{entry}' in '{target}' is not an address with a port: write {scheme}{}",
                    if scheme == "ipv6:" {
                        "[::1]:50051,[::2]:50051"
                    } else {
                        "127.0.0.2:50051,127.0.0.3:50051"
                    }
                ))
            })?;
            if !addresses.contains(&address) {
                addresses.push(address);
            }
        }
    } else if let Ok(address) = name.parse::<SocketAddr>() {
        // An address as such: nothing to resolve, now or on reconnect.
        addresses.push(address);
    } else {
        let (host, port) = name
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
            .ok_or_else(|| TargetError::Syntax(format!("'{target}' has no port; {HINT}")))?;
        let asked = Naming {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port,
            server,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| {
                TargetError::Resolve(format!(
                    "cannot start a runtime to resolve '{target}': {err}"
                ))
            })?;
        addresses = runtime
            .block_on(asked.resolve())
            .map_err(|err| TargetError::Resolve(format!("'{target}': {err}; {HINT}")))?;
        naming = Some(asked);
    }
    if addresses.is_empty() {
        return Err(TargetError::Resolve(format!(
            "'{target}' resolves to no address; {HINT}"
        )));
    }
    Ok(Target {
        text: target.to_owned(),
        authority: name,
        addresses,
        naming,
        unix: None,
    })
}

/// The socket a `unix:` target names: gRPC's `unix:PATH` (relative or absolute) and
/// `unix:///ABSOLUTE_PATH`; `None` for any other target.
fn unix_socket(target: &str) -> Result<Option<PathBuf>, TargetError> {
    let target = target.trim();
    if target.starts_with("unix-abstract:") {
        return Err(TargetError::Syntax(format!(
            "'{target}': abstract unix sockets are not supported; give unix:PATH or unix:///ABSOLUTE_PATH"
        )));
    }
    let Some(rest) = target.strip_prefix("unix:") else {
        return Ok(None);
    };
    let path = match rest.strip_prefix("//") {
        Some(absolute) if absolute.starts_with('/') => absolute,
        Some(_) => {
            return Err(TargetError::Syntax(format!(
                "'{target}': after unix:// comes an absolute path (unix:///tmp/server.sock), or write unix:PATH"
            )))
        }
        None => rest,
    };
    if path.is_empty() {
        return Err(TargetError::Syntax(format!(
            "'{target}' names no socket: give unix:PATH or unix:///ABSOLUTE_PATH"
        )));
    }
    Ok(Some(PathBuf::from(path)))
}

/// A socket at `path`, or one line saying what is there instead.
fn check_socket(path: &Path, shown: &str) -> Result<(), TargetError> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => Ok(()),
        Ok(_) => Err(TargetError::Mismatch(format!(
            "'{shown}': {} is not a socket; is this the path the server listens on?",
            path.display()
        ))),
        Err(err) => Err(TargetError::Mismatch(format!(
            "'{shown}': {}: {err}; is the server running and listening on that socket?",
            path.display()
        ))),
    }
}

/// Whether the server answers a TLS ClientHello with a TLS record (a second, throwaway
/// connection; nothing is verified, nothing is sent after the hello).
fn answers_tls_hello(target: SocketAddr, connect_timeout: Duration) -> bool {
    use tokio_rustls::rustls;
    let settings = grpclab_core::tls::ClientTls {
        skip_verify: true,
        ..grpclab_core::tls::ClientTls::default()
    };
    let Ok(config) = settings.config() else {
        return false;
    };
    let Ok(name) = rustls::pki_types::ServerName::try_from("localhost") else {
        return false;
    };
    let Ok(mut session) = rustls::ClientConnection::new(config, name) else {
        return false;
    };
    let mut hello = Vec::new();
    if session.write_tls(&mut hello).is_err() {
        return false;
    }
    let Ok(mut tcp) = std::net::TcpStream::connect_timeout(&target, connect_timeout) else {
        return false;
    };
    let mut first = [0u8; 3];
    tcp.write_all(&hello).is_ok()
        && tcp
            .set_read_timeout(Some(PLAINTEXT_CHECK_WAIT.min(connect_timeout)))
            .is_ok()
        && tcp.read_exact(&mut first).is_ok()
        && grpclab_core::tls::looks_like_tls(&first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_need_a_port() {
        let err = Target::resolve("localhost").unwrap_err();
        assert!(
            matches!(&err, TargetError::Syntax(text) if text.contains("no port")),
            "{err}"
        );
        assert_eq!(
            Target::resolve("127.0.0.1:9").unwrap().addresses[0].port(),
            9
        );
        let listed = Target::resolve("ipv4:127.0.0.2:9,127.0.0.3:9,127.0.0.2:9").unwrap();
        assert_eq!(listed.addresses.len(), 2, "each address once: {listed:?}");
        assert_eq!(listed.authority, "127.0.0.2:9");
        assert!(listed.naming.is_none());
        let named = Target::resolve("dns:///localhost:9").unwrap();
        assert!(named.naming.is_some());
        assert_eq!(named.authority, "localhost:9");
        assert!(named.addresses.iter().all(|a| a.ip().is_loopback()));
        assert!(Target::resolve("ipv4:127.0.0.2")
            .unwrap_err()
            .to_string()
            .contains("not an address with a port"));
        assert!(Target::resolve("unix-abstract:x")
            .unwrap_err()
            .to_string()
            .contains("abstract"));
        assert!(Target::resolve("dns://nameserver/x:1")
            .unwrap_err()
            .to_string()
            .contains("not a DNS server's address"));
    }

    #[test]
    fn a_unix_target_names_its_socket() {
        let target = Target::resolve("unix:///tmp/grpclab-none.sock").unwrap();
        assert_eq!(
            target.unix.as_deref(),
            Some(Path::new("/tmp/grpclab-none.sock"))
        );
        assert_eq!(target.authority, "localhost");
        let err = target.check_unix(false, true).unwrap_err();
        assert!(matches!(err, TargetError::Mismatch(_)), "{err}");
        assert!(Target::resolve("unix:").is_err());
        assert!(Target::resolve("unix://relative").is_err());
    }

    #[test]
    fn pick_first_takes_the_address_that_accepts() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap();
        // A port nothing listens on: bound, then closed.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let mut target = Target::resolve(&format!("ipv4:{closed},{open}")).unwrap();
        assert_eq!(target.pick_first(Duration::from_secs(1), true), open);
        assert_eq!(target.addresses, vec![open, closed]);
    }
}
