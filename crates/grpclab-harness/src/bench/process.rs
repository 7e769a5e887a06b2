//! A server as a child process: started in its own process group (inside its cgroup and on its
//! cores), its stderr's tail kept for error reports, stopped with SIGTERM then SIGKILL.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines of stderr kept for a FAILED row.
const STDERR_TAIL_LINES: usize = 20;

/// Joins the cgroups, pins the cores, then becomes the user's command. Runs under `sh`.
const LAUNCH: &str = r#"for f in $GRPCLAB_CGROUP_PROCS; do
  echo $$ > "$f" || { echo "grpclab: cannot join the cgroup ($f)" >&2; exit 97; }
done
set -- sh -c "$GRPCLAB_COMMAND"
if [ -n "$GRPCLAB_CORES" ]; then
  set -- taskset -c "$GRPCLAB_CORES" "$@"
fi
if [ -n "$GRPCLAB_NETNS" ]; then
  set -- ip netns exec "$GRPCLAB_NETNS" "$@"
fi
exec "$@""#;

/// A running server.
pub struct ServerProcess {
    child: Child,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    exit: Option<ExitStatus>,
}

/// How to start one.
pub struct Launch<'a> {
    /// The command for `sh -c`.
    pub command: &'a str,
    /// Working directory.
    pub workdir: Option<&'a Path>,
    /// Environment to add.
    pub env: Vec<(String, String)>,
    /// cgroup.procs files to join first.
    pub cgroup_procs: Vec<std::path::PathBuf>,
    /// Cores for `taskset -c`, empty for no pinning.
    pub cores: String,
    /// The network namespace to run in (`--network`), if not this one.
    pub netns: Option<&'a str>,
}

impl ServerProcess {
    /// Starts the server in a new process group.
    pub fn start(launch: &Launch<'_>) -> std::io::Result<ServerProcess> {
        let procs: Vec<String> = launch
            .cgroup_procs
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(LAUNCH)
            .env("GRPCLAB_COMMAND", launch.command)
            .env("GRPCLAB_CGROUP_PROCS", procs.join(" "))
            .env("GRPCLAB_CORES", &launch.cores)
            .env("GRPCLAB_NETNS", launch.netns.unwrap_or_default())
            .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own process group: signals reach the whole server tree, and a Ctrl-C
            // meant for the harness does not reach the server before the harness stops it.
            .process_group(0);
        if let Some(workdir) = launch.workdir {
            command.current_dir(workdir);
        }
        let mut child = command.spawn()?;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = child.stderr.take() {
            let tail = Arc::clone(&stderr_tail);
            std::thread::spawn(move || keep_tail(stderr, &tail));
        }
        Ok(ServerProcess {
            child,
            stderr_tail,
            exit: None,
        })
    }

    /// The PID of the process (and of its process group).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// The last lines the server wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        // Give the reader thread a moment to take in what a dying process wrote last.
        std::thread::sleep(Duration::from_millis(50));
        self.stderr_tail
            .lock()
            .map(|tail| tail.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// SIGTERM to the group; SIGKILL after `grace`. Returns the exit status and whether the
    /// kill was needed.
    ///
    /// Descendants that left the process group (setsid) get the same signals: they are found
    /// before the first signal, while they are still the server's children. (Where the server
    /// has a cgroup, removing it kills anything left in it besides.)
    pub fn stop(&mut self, grace: Duration) -> (Option<ExitStatus>, bool) {
        let tree = descendants(self.pid());
        if let Some(status) = self.exited() {
            signal_group(self.pid(), libc::SIGKILL); // leftovers of the group, if any
            signal_each(&tree, libc::SIGKILL);
            return (Some(status), false);
        }
        signal_group(self.pid(), libc::SIGTERM);
        signal_each(&tree, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                signal_group(self.pid(), libc::SIGKILL);
                signal_each(&tree, libc::SIGKILL);
                return (Some(status), false);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        signal_group(self.pid(), libc::SIGKILL);
        signal_each(&tree, libc::SIGKILL);
        let status = self.child.wait().ok();
        self.exit = status;
        (status, true)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.exited().is_none() {
            signal_each(&descendants(self.pid()), libc::SIGKILL);
            signal_group(self.pid(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Reads a server's stderr to its end, keeping the last [`STDERR_TAIL_LINES`] lines. Bytes
/// that are not UTF-8 are shown as U+FFFD: the reader never stops early, since a closed pipe
/// would kill a server that keeps logging (SIGPIPE) and lose the tail.
fn keep_tail(stderr: impl std::io::Read, tail: &Mutex<VecDeque<String>>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']).to_owned();
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == STDERR_TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(text);
        }
    }
}

/// Calls `visit` with every process's PID and the fields of its /proc/PID/stat after the
/// command name (which may hold spaces): `[0]` state, `[1]` ppid, `[2]` pgrp, `[11]` utime,
/// `[12]` stime, `[13]` cutime, `[14]` cstime, `[21]` rss in pages. One scan of /proc for
/// every question the harness asks of the process table.
pub(crate) fn each_process_stat(mut visit: impl FnMut(u32, &[&str])) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        visit(pid, &fields);
    }
}

/// Every live descendant of `pid` (children, their children, ...): the processes a stop must
/// reach even when they left the server's process group (setsid).
fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    each_process_stat(|child, fields| {
        if let Some(parent) = fields.get(1).and_then(|p| p.parse().ok()) {
            parents.push((child, parent));
        }
    });
    let mut found = vec![pid];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(child, _)| *child),
        );
        next += 1;
    }
    found.remove(0);
    found
}

/// Sends `signal` to each of `pids` (children of ours).
pub(crate) fn signal_each(pids: &[u32], signal: libc::c_int) {
    for pid in pids {
        if let Ok(pid) = libc::pid_t::try_from(*pid) {
            // SAFETY: kill(2) on a child of ours (a server's descendant, or a client we ran); it
            // touches no memory.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
}

/// Sends `signal` to every process of the group led by `pid`.
fn signal_group(pid: u32, signal: libc::c_int) {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) with a negative pid signals that process group; it touches no memory of
    // ours. The group is the server's own (process_group(0) at spawn), never ours.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// Every process of the group led by `pgid` (the server and its children).
pub(super) fn group_pids(pgid: u32) -> Vec<u32> {
    let mut pids = vec![pgid];
    each_process_stat(|pid, fields| {
        let group = fields.get(2).and_then(|g| g.parse::<u32>().ok());
        if group == Some(pgid) && pid != pgid {
            pids.push(pid);
        }
    });
    pids
}

/// Describes an exit status: `exit code N` or `killed by signal NAME`.
pub fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {}", signal_name(signal)),
        _ => "ended".to_owned(),
    }
}

fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGKILL => "SIGKILL".to_owned(),
        libc::SIGTERM => "SIGTERM".to_owned(),
        libc::SIGSEGV => "SIGSEGV".to_owned(),
        libc::SIGABRT => "SIGABRT".to_owned(),
        libc::SIGINT => "SIGINT".to_owned(),
        other => other.to_string(),
    }
}
