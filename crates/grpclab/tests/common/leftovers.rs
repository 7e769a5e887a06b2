//! Nothing left behind: every harness test marks the processes it starts (an environment
//! variable their children inherit) and, once its `grpclab` command has ended, checks that no
//! marked process is still running and that no cgroup folder of an ended harness remains.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The variable every process of one test inherits.
const MARK_VARIABLE: &str = "GRPCLAB_TEST_MARK";

/// One test's mark, and the orphan cgroups already there when it was made (a run killed
/// before this test began; the harness sweeps them at its next row), which are not this
/// test's.
pub struct Marker(String, Vec<PathBuf>);

impl Marker {
    /// A mark no other test of any run shares.
    pub fn new() -> Marker {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Marker(format!("{}-{n}", std::process::id()), orphan_cgroups())
    }

    /// Marks `command` (and so every process it starts).
    pub fn apply(&self, command: &mut Command) {
        command.env(MARK_VARIABLE, &self.0);
    }

    /// Panics if a marked process is still alive a few seconds after the command ended, or if
    /// a cgroup folder made by a harness that has ended is still there. Kills what it finds,
    /// so one leak does not spoil the next test.
    pub fn assert_nothing_left(&self) {
        let needle = format!("{MARK_VARIABLE}={}", self.0);
        // A process killed a moment ago may still be on its way out.
        let give_up = Instant::now() + Duration::from_secs(5);
        let mut left = marked_processes(&needle);
        while !left.is_empty() && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(50));
            left = marked_processes(&needle);
        }
        for (pid, _) in &left {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        assert!(left.is_empty(), "processes left running: {left:?}");
        let folders: Vec<PathBuf> = orphan_cgroups()
            .into_iter()
            .filter(|folder| !self.1.contains(folder))
            .collect();
        for folder in &folders {
            let _ = std::fs::remove_dir(folder);
        }
        assert!(
            folders.is_empty(),
            "cgroup folders left behind: {folders:?}"
        );
    }
}

/// Runs `command` to its end under a fresh mark, then checks it left nothing behind.
pub fn output_leaving_nothing(command: &mut Command) -> std::process::Output {
    let marker = Marker::new();
    marker.apply(command);
    let output = command.output().expect("run grpclab");
    marker.assert_nothing_left();
    output
}

/// Live processes whose environment holds `needle`, with their command lines.
fn marked_processes(needle: &str) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let marked = environ
                .split(|b| *b == 0)
                .any(|variable| variable == needle.as_bytes());
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            (marked && !zombie).then(|| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                (pid, String::from_utf8_lossy(&cmdline).replace('\0', " "))
            })
        })
        .collect()
}

/// Folders named `grpclab-PID-…` (the harness's cgroups) whose PID has ended, in every
/// hierarchy beside this process's own cgroup.
fn orphan_cgroups() -> Vec<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut parents = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            parents.push(Path::new("/sys/fs/cgroup").join(path));
            parents.push(Path::new("/sys/fs/cgroup/unified").join(path));
        }
        for controller in controllers.split(',').filter(|c| !c.is_empty()) {
            parents.push(Path::new("/sys/fs/cgroup").join(controller).join(path));
        }
    }
    let mut orphans = Vec::new();
    for parent in parents {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix("grpclab-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                orphans.push(entry.path());
            }
        }
    }
    orphans
}
