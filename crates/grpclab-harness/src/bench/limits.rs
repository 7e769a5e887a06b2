//! Resource limits for a server, like `docker --cpus --memory`: a cgroup holding only the
//! server (v2 `cpu.max`/`memory.max`, or v1 CFS quota and memory limit, whichever this machine
//! has), plus CPU affinity that keeps server and client on different cores where there are
//! enough. Where no cgroup can be made, affinity alone, and the results say so.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// CFS period used for the CPU quota (100 ms, docker's).
const CPU_PERIOD_US: u64 = 100_000;

/// Which cores the server and the client get.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CorePlan {
    /// Cores the server may run on.
    pub server: Vec<usize>,
    /// Cores the client threads are pinned to.
    pub client: Vec<usize>,
    /// Set when server and client must share cores (too few of them).
    pub oversubscribed: Option<String>,
}

/// Splits `available` cores: the server's first, the client's after them; if there are not
/// enough, the client takes the last ones and the plan says they overlap.
pub fn plan_cores(available: &[usize], server_threads: usize, client_cpus: usize) -> CorePlan {
    let total = available.len().max(1);
    if server_threads + client_cpus <= total {
        CorePlan {
            server: available[..server_threads].to_vec(),
            client: available[server_threads..server_threads + client_cpus].to_vec(),
            oversubscribed: None,
        }
    } else {
        let server: Vec<usize> = available
            .iter()
            .copied()
            .take(server_threads.min(total))
            .collect();
        let client: Vec<usize> = available
            .iter()
            .copied()
            .skip(total.saturating_sub(client_cpus))
            .collect();
        CorePlan {
            server,
            client,
            oversubscribed: Some(format!(
                "server CPUs ({server_threads}) + client CPUs ({client_cpus}) exceed the {total} cores here: they share cores, and the figures are not comparable with a run where they do not"
            )),
        }
    }
}

/// The cores this process may run on.
pub fn available_cores() -> Vec<usize> {
    // SAFETY: `set` is a zeroed cpu_set_t owned by this frame; sched_getaffinity writes at
    // most size_of::<cpu_set_t>() bytes into it, and CPU_ISSET only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            return (0..n).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|cpu| libc::CPU_ISSET(*cpu, &set))
            .collect()
    }
}

/// Pins the calling thread (and the threads it spawns afterwards) to `cores`.
pub(crate) fn pin_current_thread(cores: &[usize]) -> Result<(), String> {
    // SAFETY: `set` is a zeroed cpu_set_t owned by this frame; CPU_SET writes bits inside it
    // for core numbers below CPU_SETSIZE (checked), and sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &core in cores {
            if core < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(core, &mut set);
            }
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
    }
    Ok(())
}

/// What limits were really applied, read back from the kernel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct AppliedLimits {
    /// `cgroup-v2`, `cgroup-v1` or `affinity-only`.
    pub mechanism: String,
    /// The CPU quota as the kernel holds it: v2 `cpu.max`, v1 `quota period` in µs.
    pub cpu_quota: Option<String>,
    /// The memory limit the kernel holds, in bytes.
    pub memory_limit_bytes: Option<u64>,
    /// The server's allowed CPUs as /proc/PID/status reports them.
    pub server_cpus_allowed: Option<String>,
    /// The cores the client was pinned to.
    pub client_cores: Vec<usize>,
    /// Why there is no cgroup, where there is none.
    pub note: Option<String>,
}

/// A cgroup made for one server run. [`ServerCgroup::remove`] kills whatever still runs in it
/// and removes its folders, saying when it cannot; dropping it does the same silently, so no
/// early return leaves a folder behind.
#[derive(Debug)]
pub struct ServerCgroup {
    /// Every folder made, in creation order (removed in reverse).
    dirs: Vec<PathBuf>,
    kind: CgroupKind,
}

#[derive(Debug, Clone)]
enum CgroupKind {
    /// A v2 cgroup directory.
    V2 { dir: PathBuf },
    /// v1 cgroups in the cpu and memory hierarchies, and cpuacct where it is mounted apart
    /// (for the group's CPU time).
    V1 {
        cpu: PathBuf,
        memory: PathBuf,
        cpuacct: Option<PathBuf>,
    },
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|err| format!("cannot write {}: {err}", path.display()))
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// This process's cgroup path in a v1 hierarchy (`controller`), or in v2 (`""`).
fn own_cgroup(controller: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = if controller.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        matches.then(|| path.to_owned())
    })
}

/// The folder for a new cgroup `name` beside our own, under the hierarchy at `root`.
fn child_of_own(root: &Path, controller: &str, name: &str) -> PathBuf {
    root.join(
        own_cgroup(controller)
            .unwrap_or_default()
            .trim_start_matches('/'),
    )
    .join(name)
}

/// The CPU quota in µs per [`CPU_PERIOD_US`] for `cpus` cores (at least 1 ms, the kernel's
/// minimum).
fn quota_us(cpus: f64) -> u64 {
    ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1000)
}

/// Removes the cgroups a harness that has ended left behind (`grpclab-PID-…` beside our own
/// cgroup, PID no longer running: a run killed with SIGKILL cannot remove its own), killing
/// what still runs in them. Returns the folders removed and, apart, those that stayed (why).
pub(crate) fn sweep_stale_cgroups() -> (Vec<PathBuf>, Vec<String>) {
    sweep_stale_under(Path::new("/sys/fs/cgroup"))
}

/// [`sweep_stale_cgroups`] under another cgroup root.
fn sweep_stale_under(root: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let own = |controller: &str| own_cgroup(controller).unwrap_or_default();
    let parents: Vec<PathBuf> = if root.join("cgroup.controllers").exists() {
        vec![root.join(own("").trim_start_matches('/'))]
    } else {
        ["cpu", "memory", "cpuacct"]
            .iter()
            .map(|controller| {
                root.join(controller)
                    .join(own(controller).trim_start_matches('/'))
            })
            .collect()
    };
    let (mut removed, mut stayed) = (Vec::new(), Vec::new());
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
            if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            let mut dirs = vec![entry.path()];
            match kill_and_remove_dirs(&mut dirs) {
                Ok(()) => removed.push(entry.path()),
                Err(why) => stayed.push(why),
            }
        }
    }
    (removed, stayed)
}

/// The PIDs listed in `cgroup.procs` files, each once.
fn pids_in(procs_files: &[PathBuf]) -> Vec<u32> {
    let mut pids: Vec<u32> = procs_files
        .iter()
        .filter_map(|file| read(file))
        .flat_map(|text| {
            text.lines()
                .filter_map(|line| line.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Kills every process in `dirs`' groups and removes the folders (last first), retrying
/// briefly: the kernel frees a cgroup a moment after its last process exits. What is
/// removed leaves `dirs`; `Err` says which folder stayed and why.
fn kill_and_remove_dirs(dirs: &mut Vec<PathBuf>) -> Result<(), String> {
    let mut result = Ok(());
    for _ in 0..100 {
        let procs: Vec<PathBuf> = dirs.iter().map(|dir| dir.join("cgroup.procs")).collect();
        let pids = pids_in(&procs);
        for pid in &pids {
            if let Ok(pid) = libc::pid_t::try_from(*pid) {
                // SAFETY: kill(2) on a PID read from one of the group's own cgroup.procs
                // files: a server's processes (or an ended harness's server's), never ours,
                // since this process never joins such a group.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        let mut left = Vec::new();
        for dir in dirs.iter().rev() {
            match std::fs::remove_dir(dir) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    left.push(dir.clone());
                    result = Err(format!(
                        "cannot remove the cgroup {} ({err}; {} process(es) still in it)",
                        dir.display(),
                        pids.len()
                    ));
                }
            }
        }
        left.reverse();
        *dirs = left;
        if dirs.is_empty() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    result
}

impl ServerCgroup {
    /// Makes a cgroup named `name` limited to `cpus` cores and `memory` bytes. On failure
    /// nothing is left behind: the folders made so far are removed.
    pub(crate) fn create(name: &str, cpus: f64, memory: u64) -> Result<ServerCgroup, String> {
        ServerCgroup::create_under(Path::new("/sys/fs/cgroup"), name, cpus, memory)
    }

    /// [`ServerCgroup::create`] under another cgroup root (a fake one in tests).
    pub(crate) fn create_under(
        root: &Path,
        name: &str,
        cpus: f64,
        memory: u64,
    ) -> Result<ServerCgroup, String> {
        let quota = quota_us(cpus);
        let mut group;
        if root.join("cgroup.controllers").exists() {
            let parent = root.join(own_cgroup("").unwrap_or_default().trim_start_matches('/'));
            let enabled = read(&parent.join("cgroup.subtree_control")).unwrap_or_default();
            if !(enabled.contains("cpu") && enabled.contains("memory")) {
                write(&parent.join("cgroup.subtree_control"), "+cpu +memory")?;
            }
            let dir = parent.join(name);
            group = ServerCgroup {
                dirs: Vec::new(),
                kind: CgroupKind::V2 { dir: dir.clone() },
            };
            group.make_dir(&dir)?;
            write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
            write(&dir.join("memory.max"), &memory.to_string())?;
            // No swap: over the limit means the OOM killer, as in a container without swap.
            let _ = write(&dir.join("memory.swap.max"), "0");
            return Ok(group);
        }
        let cpu_root = root.join("cpu");
        let memory_root = root.join("memory");
        if !(cpu_root.join("cpu.cfs_quota_us").exists()
            && memory_root.join("memory.limit_in_bytes").exists())
        {
            return Err("no cgroup v2, nor v1 cpu and memory controllers, are mounted".to_owned());
        }
        let cpu = child_of_own(&cpu_root, "cpu", name);
        let memory_dir = child_of_own(&memory_root, "memory", name);
        // cpuacct counts the group's CPU time, reaped children included; where it shares the
        // cpu hierarchy the cpu folder has it already.
        let cpuacct_root = root.join("cpuacct");
        let cpuacct = (!cpu_root.join("cpuacct.usage").exists()
            && cpuacct_root.join("cpuacct.usage").exists())
        .then(|| child_of_own(&cpuacct_root, "cpuacct", name));
        group = ServerCgroup {
            dirs: Vec::new(),
            kind: CgroupKind::V1 {
                cpu: cpu.clone(),
                memory: memory_dir.clone(),
                cpuacct: cpuacct.clone(),
            },
        };
        group.make_dir(&cpu)?;
        group.make_dir(&memory_dir)?;
        if let Some(dir) = &cpuacct {
            group.make_dir(dir)?;
        }
        write(&cpu.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
        write(&cpu.join("cpu.cfs_quota_us"), &quota.to_string())?;
        write(
            &memory_dir.join("memory.limit_in_bytes"),
            &memory.to_string(),
        )?;
        // Without swap accounting this file is absent; the limit above still holds RAM.
        let _ = write(
            &memory_dir.join("memory.memsw.limit_in_bytes"),
            &memory.to_string(),
        );
        Ok(group)
    }

    fn make_dir(&mut self, dir: &Path) -> Result<(), String> {
        std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        self.dirs.push(dir.to_owned());
        Ok(())
    }

    /// The `cgroup.procs` files a process writes its PID to, to join.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        match &self.kind {
            CgroupKind::V2 { dir } => vec![dir.join("cgroup.procs")],
            CgroupKind::V1 {
                cpu,
                memory,
                cpuacct,
            } => {
                let mut files = vec![cpu.join("cgroup.procs"), memory.join("cgroup.procs")];
                files.extend(cpuacct.iter().map(|dir| dir.join("cgroup.procs")));
                files
            }
        }
    }

    /// The limits as the kernel holds them.
    pub fn read_back(&self) -> AppliedLimits {
        match &self.kind {
            CgroupKind::V2 { dir } => AppliedLimits {
                mechanism: "cgroup-v2".to_owned(),
                cpu_quota: read(&dir.join("cpu.max")),
                memory_limit_bytes: read(&dir.join("memory.max")).and_then(|v| v.parse().ok()),
                ..AppliedLimits::default()
            },
            CgroupKind::V1 { cpu, memory, .. } => AppliedLimits {
                mechanism: "cgroup-v1".to_owned(),
                cpu_quota: match (
                    read(&cpu.join("cpu.cfs_quota_us")),
                    read(&cpu.join("cpu.cfs_period_us")),
                ) {
                    (Some(quota), Some(period)) => Some(format!("{quota} {period}")),
                    _ => None,
                },
                memory_limit_bytes: read(&memory.join("memory.limit_in_bytes"))
                    .and_then(|v| v.parse().ok()),
                ..AppliedLimits::default()
            },
        }
    }

    /// CPU seconds every process that ever ran in the group has used (v2 `cpu.stat`
    /// usage_usec, v1 `cpuacct.usage`): children that lived between two samples included.
    pub fn cpu_seconds(&self) -> Option<f64> {
        cgroup_cpu_seconds(&self.cpu_usage_file()?)
    }

    /// The file [`ServerCgroup::cpu_seconds`] reads.
    pub fn cpu_usage_file(&self) -> Option<PathBuf> {
        match &self.kind {
            CgroupKind::V2 { dir } => Some(dir.join("cpu.stat")),
            CgroupKind::V1 { cpu, cpuacct, .. } => {
                let file = cpuacct.as_ref().unwrap_or(cpu).join("cpuacct.usage");
                file.exists().then_some(file)
            }
        }
    }

    /// The file holding the group's throttling counters (`nr_periods`, `nr_throttled`): v2's
    /// `cpu.stat`, v1's `cpu.stat` in the cpu hierarchy.
    pub fn cpu_stat_file(&self) -> PathBuf {
        match &self.kind {
            CgroupKind::V2 { dir } => dir.join("cpu.stat"),
            CgroupKind::V1 { cpu, .. } => cpu.join("cpu.stat"),
        }
    }

    /// How many times the kernel's OOM killer struck inside this cgroup.
    pub fn oom_kills(&self) -> u64 {
        let (file, key) = match &self.kind {
            CgroupKind::V2 { dir } => (dir.join("memory.events"), "oom_kill"),
            CgroupKind::V1 { memory, .. } => (memory.join("memory.oom_control"), "oom_kill"),
        };
        read(&file)
            .unwrap_or_default()
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(' ')?;
                (name == key).then(|| value.trim().parse().ok()).flatten()
            })
            .unwrap_or(0)
    }

    /// The processes in the group now.
    pub fn pids(&self) -> Vec<u32> {
        pids_in(&self.procs_files())
    }

    /// Kills every process still in the group (a child that left the server's process group
    /// with setsid is still here), then removes the folders. `Err` says which folder stayed
    /// and why; the caller reports it.
    pub(crate) fn remove(mut self) -> Result<(), String> {
        self.kill_and_remove()
    }

    fn kill_and_remove(&mut self) -> Result<(), String> {
        kill_and_remove_dirs(&mut self.dirs)
    }
}

impl Drop for ServerCgroup {
    fn drop(&mut self) {
        if !self.dirs.is_empty() {
            let _ = self.kill_and_remove();
        }
    }
}

/// The share of the scheduling periods between two [`throttle_counts`] readings in which the
/// group was throttled; `None` without both, or without a period between them.
pub fn throttled_share(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<f64> {
    match (before, after) {
        (Some((periods0, throttled0)), Some((periods1, throttled1))) if periods1 > periods0 => {
            Some(throttled1.saturating_sub(throttled0) as f64 / (periods1 - periods0) as f64)
        }
        _ => None,
    }
}

/// Scheduling periods and throttled periods from a cgroup's `cpu.stat` (`nr_periods N`,
/// `nr_throttled N`); `None` for other files or a group without a quota.
pub fn throttle_counts(file: &Path) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(file).ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().parse::<u64>().ok())
    };
    Some((field("nr_periods ")?, field("nr_throttled ")?))
}

/// CPU seconds from a cgroup usage file: v2 `cpu.stat` (`usage_usec N`) or v1
/// `cpuacct.usage` (nanoseconds).
pub fn cgroup_cpu_seconds(file: &Path) -> Option<f64> {
    let text = read(file)?;
    if file.file_name().is_some_and(|n| n == "cpu.stat") {
        text.lines().find_map(|line| {
            let value = line.strip_prefix("usage_usec ")?;
            value.trim().parse::<u64>().ok().map(|us| us as f64 / 1e6)
        })
    } else {
        text.parse::<u64>().ok().map(|ns| ns as f64 / 1e9)
    }
}

/// The allowed-CPU list of a process, as /proc reports it.
pub fn cpus_allowed(pid: u32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(|list| list.trim().to_owned())
}

/// A core list as `taskset -c` takes it.
pub fn core_list(cores: &[usize]) -> String {
    cores
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_split_without_overlap_when_there_are_enough() {
        let plan = plan_cores(&[0, 1, 2, 3], 2, 1);
        assert_eq!((plan.server, plan.client), (vec![0, 1], vec![2]));
        assert!(plan.oversubscribed.is_none());
    }

    #[test]
    fn cores_overlap_with_a_warning_when_there_are_not() {
        let plan = plan_cores(&[0, 1], 2, 1);
        assert_eq!((plan.server, plan.client), (vec![0, 1], vec![1]));
        assert!(plan.oversubscribed.unwrap().contains("exceed the 2 cores"));
    }

    #[test]
    fn cgroup_cpu_usage_reads_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        let v2 = dir.path().join("cpu.stat");
        std::fs::write(
            &v2,
            "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
        )
        .unwrap();
        assert_eq!(cgroup_cpu_seconds(&v2), Some(2.5));
        let v1 = dir.path().join("cpuacct.usage");
        std::fs::write(&v1, "1500000000\n").unwrap();
        assert_eq!(cgroup_cpu_seconds(&v1), Some(1.5));
        assert_eq!(cgroup_cpu_seconds(&dir.path().join("missing")), None);
    }

    /// A quota the kernel rejects leaves no cgroup folder behind (it used to return
    /// early after making the folders). Needs cgroups this process may write (root).
    #[test]
    fn a_rejected_quota_leaves_no_folder() {
        let name = format!("grpclab-{}-rejected-quota-test", std::process::id());
        let folders = || -> Vec<PathBuf> {
            let own = |c: &str| own_cgroup(c).unwrap_or_default();
            [
                Path::new("/sys/fs/cgroup").join(own("").trim_start_matches('/')),
                Path::new("/sys/fs/cgroup/cpu").join(own("cpu").trim_start_matches('/')),
                Path::new("/sys/fs/cgroup/memory").join(own("memory").trim_start_matches('/')),
                Path::new("/sys/fs/cgroup/cpuacct").join(own("cpuacct").trim_start_matches('/')),
            ]
            .into_iter()
            .map(|parent| parent.join(&name))
            .filter(|dir| dir.exists())
            .collect()
        };
        // A billion cores: a quota far above what the kernel accepts (EINVAL).
        match ServerCgroup::create(&name, 1e9, 256 << 20) {
            Ok(group) => {
                let made = format!("{group:?}");
                drop(group);
                panic!("the kernel accepted a quota of a billion cores: {made}");
            }
            Err(reason) if reason.contains("cannot create") || reason.contains("no cgroup") => {
                // CI runs as root with writable cgroups: there the path must be reached.
                assert!(
                    std::env::var_os("CI").is_none(),
                    "no writable cgroups on CI: {reason}"
                );
                eprintln!(
                    "SKIPPED (no writable cgroups here: {reason}): the early-exit path is not reachable"
                );
            }
            Err(reason) => assert!(reason.contains("cpu"), "{reason}"),
        }
        assert_eq!(folders(), Vec::<PathBuf>::new(), "folders left behind");
    }

    /// The v2 path over a fake cgroup root (this machine may have v1 only): the quota and
    /// limit files, the procs file, the CPU counter, and removal.
    #[test]
    fn the_v2_layout_over_a_fake_root() {
        let root = tempfile::tempdir().unwrap();
        let own = own_cgroup("").unwrap_or_default();
        let parent = root.path().join(own.trim_start_matches('/'));
        std::fs::create_dir_all(&parent).unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "cpu memory").unwrap();
        std::fs::write(parent.join("cgroup.subtree_control"), "cpu memory").unwrap();
        let group = ServerCgroup::create_under(root.path(), "grpclab-fake", 0.5, 256 << 20)
            .expect("a fake v2 root takes every write");
        let dir = parent.join("grpclab-fake");
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.max")).unwrap(),
            "50000 100000"
        );
        let limits = group.read_back();
        assert_eq!(limits.mechanism, "cgroup-v2");
        assert_eq!(limits.memory_limit_bytes, Some(256 << 20));
        assert_eq!(group.procs_files(), vec![dir.join("cgroup.procs")]);
        assert_eq!(group.cpu_usage_file(), Some(dir.join("cpu.stat")));
        std::fs::write(dir.join("cpu.stat"), "usage_usec 1000000\n").unwrap();
        assert_eq!(group.cpu_seconds(), Some(1.0));
        std::fs::write(dir.join("cgroup.procs"), "").unwrap();
        assert!(group.pids().is_empty());
        // A real cgroup folder's files vanish with it; a fake one's must go first.
        for entry in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        group.remove().unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn dropping_a_cgroup_removes_its_folders() {
        let name = format!("grpclab-{}-drop-test", std::process::id());
        let group = match ServerCgroup::create(&name, 0.5, 64 << 20) {
            Ok(group) => group,
            Err(reason) => {
                // CI runs as root with writable cgroups: there this must be checked.
                assert!(
                    std::env::var_os("CI").is_none(),
                    "no writable cgroups on CI: {reason}"
                );
                eprintln!("SKIPPED (no writable cgroups here: {reason}): nothing to remove");
                return;
            }
        };
        let dirs = group.dirs.clone();
        assert!(dirs.iter().all(|d| d.exists()));
        drop(group);
        assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
    }

    #[test]
    fn throttling_is_a_share_of_the_periods_between_two_readings() {
        assert_eq!(throttled_share(Some((100, 10)), Some((200, 60))), Some(0.5));
        // No period passed, or a reading missing: nothing to say.
        assert_eq!(throttled_share(Some((100, 10)), Some((100, 10))), None);
        assert_eq!(throttled_share(None, Some((200, 60))), None);
    }

    #[test]
    fn core_lists_are_comma_separated() {
        assert_eq!(core_list(&[0, 2]), "0,2");
    }

    /// A harness killed with SIGKILL leaves its cgroup, maybe with a server still in it: the
    /// next harness removes the folder and kills the process; a live harness's is kept.
    #[test]
    fn a_dead_harnesss_cgroup_is_swept_and_a_live_ones_kept() {
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = ended.id();
        ended.wait().unwrap();
        let stale =
            match ServerCgroup::create(&format!("grpclab-{dead_pid}-sweep-test"), 0.5, 64 << 20) {
                Ok(group) => group,
                Err(reason) => {
                    assert!(
                        std::env::var_os("CI").is_none(),
                        "no writable cgroups on CI: {reason}"
                    );
                    eprintln!("SKIPPED (no writable cgroups here: {reason}): nothing to sweep");
                    return;
                }
            };
        let live = ServerCgroup::create(
            &format!("grpclab-{}-sweep-live-test", std::process::id()),
            0.5,
            64 << 20,
        )
        .unwrap();
        // A server the dead harness left running in its group.
        let mut server = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap();
        for file in stale.procs_files() {
            std::fs::write(file, server.id().to_string()).unwrap();
        }
        let stale_dirs = stale.dirs.clone();
        // As if the harness had been killed: nothing of ours removes it.
        std::mem::forget(stale);
        let (removed, stayed) = sweep_stale_cgroups();
        let swept = stale_dirs.iter().all(|d| !d.exists());
        // Whatever the sweep did, nothing outlives the test.
        let _ = server.kill();
        let status = server.wait().unwrap();
        let live_kept = live.dirs.iter().all(|d| d.exists());
        live.remove().unwrap();
        assert!(stayed.is_empty(), "{stayed:?}");
        assert!(swept, "{stale_dirs:?} still there; removed {removed:?}");
        assert!(
            stale_dirs.iter().all(|d| removed.contains(d)),
            "{removed:?}"
        );
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL),
            "the server left in the group was killed"
        );
        assert!(live_kept, "a live harness's group is kept");
    }
}
