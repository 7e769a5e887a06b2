//! A pair of network namespaces, the server's and the client's, joined by an emulated link
//! ([`crate::link`]) between a TUN device in each, with addresses of the benchmarking range
//! (RFC 2544: 198.18.0.0/15, never a real network's).
//!
//! Names carry the process id (`grpclab-PID-N-s`, `-c`): a pair whose process is gone (a
//! SIGKILL leaves it) is removed by the next pair made anywhere on the machine
//! ([`sweep_stale`]). A pair is removed when dropped, so a run that fails or is stopped with
//! Ctrl-C leaves nothing; its TUN devices end with the process in any case.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::link::{DirectionCounts, Link};
use crate::spec::LinkSpec;
use crate::{tun, NetError};

/// The server's address, inside its namespace.
pub const SERVER_ADDRESS: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The client's address, inside its namespace.
pub const CLIENT_ADDRESS: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The TUN device's name in each namespace.
pub const DEVICE: &str = "grpclab0";
/// Where `ip netns` keeps its namespaces.
const NETNS_DIR: &str = "/run/netns";

/// Pairs made by this process so far (each pair's names differ).
static PAIRS: AtomicU32 = AtomicU32::new(0);

/// A server namespace and a client namespace, joined by a link.
pub struct NetworkPair {
    server: String,
    client: String,
    link: Option<Link>,
    spec: LinkSpec,
}

impl NetworkPair {
    /// Makes the pair and starts its link; anything made before a failure is removed again.
    pub fn up(spec: LinkSpec) -> Result<NetworkPair, NetError> {
        sweep_stale()?;
        let number = PAIRS.fetch_add(1, Ordering::Relaxed);
        let base = format!("grpclab-{}-{number}", std::process::id());
        let mut pair = NetworkPair {
            server: format!("{base}-s"),
            client: format!("{base}-c"),
            link: None,
            spec,
        };
        ip(&["netns", "add", &pair.server])?;
        if let Err(err) = ip(&["netns", "add", &pair.client]) {
            // Only the server's was made: dropping the pair removes it (and tries the other).
            drop(pair);
            return Err(err);
        }
        let mut devices = Vec::with_capacity(2);
        for (namespace, own, peer) in [
            (&pair.server, SERVER_ADDRESS, CLIENT_ADDRESS),
            (&pair.client, CLIENT_ADDRESS, SERVER_ADDRESS),
        ] {
            ip(&["-n", namespace, "link", "set", "lo", "up"])?;
            devices.push(tun::open_in(&netns_path(namespace), DEVICE)?);
            ip(&[
                "-n",
                namespace,
                "addr",
                "add",
                &own.to_string(),
                "peer",
                &peer.to_string(),
                "dev",
                DEVICE,
            ])?;
            ip(&[
                "-n",
                namespace,
                "link",
                "set",
                DEVICE,
                "mtu",
                &spec.mtu.to_string(),
                "up",
            ])?;
        }
        let client = devices.pop();
        let server = devices.pop();
        if let (Some(server), Some(client)) = (server, client) {
            pair.link = Some(Link::start(client, server, spec)?);
        }
        Ok(pair)
    }

    /// The server's namespace (for `ip netns exec`).
    pub fn server_namespace(&self) -> &str {
        &self.server
    }

    /// The client's namespace.
    pub fn client_namespace(&self) -> &str {
        &self.client
    }

    /// The link's settings.
    pub fn spec(&self) -> LinkSpec {
        self.spec
    }

    /// Moves the calling thread into the client's namespace: sockets it opens from then on,
    /// and threads it starts, are the client's.
    pub fn enter_client(&self) -> Result<(), NetError> {
        enter(&netns_path(&self.client))
    }

    /// Moves the calling thread into the client's namespace until the guard is dropped,
    /// when it returns to the namespace it was in. Sockets it opens meanwhile, threads and
    /// processes it starts, are the client's.
    pub fn client_side(&self) -> Result<ClientSide, NetError> {
        let home = std::fs::File::open("/proc/thread-self/ns/net").map_err(|err| {
            NetError(format!(
                "cannot read this thread's network namespace: {err}"
            ))
        })?;
        enter(&netns_path(&self.client))?;
        Ok(ClientSide { home })
    }

    /// What the link has done so far, [client → server, server → client], while it runs.
    pub fn counts(&self) -> Vec<DirectionCounts> {
        self.link.as_ref().map(Link::counts).unwrap_or_default()
    }

    /// Stops the link and removes both namespaces; returns what the link did in each
    /// direction: [client → server, server → client].
    pub fn down(mut self) -> Vec<DirectionCounts> {
        let counts = self.link.take().map(Link::stop).unwrap_or_default();
        self.remove();
        counts
    }

    fn remove(&mut self) {
        self.link.take();
        for namespace in [&self.server, &self.client] {
            if netns_path(namespace).exists() {
                let _ = ip(&["netns", "del", namespace]);
            }
        }
    }
}

impl Drop for NetworkPair {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A thread inside a pair's client namespace (see [`NetworkPair::client_side`]).
pub struct ClientSide {
    home: std::fs::File,
}

impl Drop for ClientSide {
    fn drop(&mut self) {
        // SAFETY: setns takes the descriptor of the namespace this thread came from, owned
        // by the guard and open across the call; it changes only this thread's namespace.
        unsafe {
            libc::setns(
                std::os::fd::AsRawFd::as_raw_fd(&self.home),
                libc::CLONE_NEWNET,
            );
        }
    }
}

fn netns_path(namespace: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(namespace)
}

/// Moves the calling thread into the network namespace at `path`.
fn enter(path: &Path) -> Result<(), NetError> {
    let namespace = std::fs::File::open(path).map_err(|err| {
        NetError(format!(
            "cannot open network namespace {}: {err}",
            path.display()
        ))
    })?;
    // SAFETY: setns takes a descriptor this function owns (open across the call) and a
    // namespace type; it changes only the calling thread's network namespace.
    if unsafe {
        libc::setns(
            std::os::fd::AsRawFd::as_raw_fd(&namespace),
            libc::CLONE_NEWNET,
        )
    } != 0
    {
        return Err(NetError(format!(
            "cannot enter network namespace {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Runs `ip ARGS`; its complaint, if any, becomes one line (with what to do when the
/// cause is a missing privilege or a missing `ip`).
fn ip(args: &[&str]) -> Result<(), NetError> {
    let output = Command::new("ip").args(args).output().map_err(|err| {
        NetError(format!(
            "--network needs iproute2's `ip` (Debian: apt-get install iproute2): {err}"
        ))
    })?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let lacking = said.contains("Operation not permitted") || said.contains("Permission denied");
    Err(NetError(if lacking {
        format!(
            "--network makes network namespaces, which needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): `ip {}` said: {said}; run as root",
            args.join(" ")
        )
    } else {
        format!("`ip {}` failed: {said}", args.join(" "))
    }))
}

/// Removes the namespaces of pairs whose process has ended (`grpclab-PID-N-s`/`-c` with no
/// process PID); returns their names.
pub fn sweep_stale() -> Result<Vec<String>, NetError> {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return Ok(Vec::new());
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_of(&name) else {
            continue;
        };
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        // Anything still running inside (a server whose death signal failed) goes first:
        // a namespace lives on while a process holds it.
        if let Ok(output) = Command::new("ip").args(["netns", "pids", &name]).output() {
            for pid in String::from_utf8_lossy(&output.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<libc::pid_t>() {
                    // SAFETY: kill signals a process id `ip` just listed in our namespace.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
        }
        ip(&["netns", "del", &name])?;
        removed.push(name);
    }
    Ok(removed)
}

/// The process id a namespace name of ours carries.
fn owner_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("grpclab-")?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    parts.next()?.parse::<u32>().ok()?;
    matches!(parts.next()?, "s" | "c").then_some(pid)?;
    parts.next().is_none().then_some(pid)
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_names_name_an_owner() {
        assert_eq!(owner_of("grpclab-123-0-s"), Some(123));
        assert_eq!(owner_of("grpclab-123-4-c"), Some(123));
        for other in [
            "grpclab-123-0-x",
            "grpclab-123-s",
            "grpclab-abc-0-s",
            "other-1-0-s",
            "grpclab-1-0-s-x",
        ] {
            assert_eq!(owner_of(other), None, "{other}");
        }
    }
}
