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
pub fn pin_current_thread(cores: &[usize]) -> Result<(), String> {
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
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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

/// A cgroup made for one server run; removed by [`ServerCgroup::remove`].
#[derive(Debug)]
pub enum ServerCgroup {
    /// A v2 cgroup directory.
    V2 {
        /// the directory
        dir: PathBuf,
    },
    /// v1 cgroups in the cpu and memory hierarchies.
    V1 {
        /// under the cpu controller
        cpu: PathBuf,
        /// under the memory controller
        memory: PathBuf,
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

impl ServerCgroup {
    /// Makes a cgroup named `name` limited to `cpus` cores and `memory` bytes.
    pub fn create(name: &str, cpus: f64, memory: u64) -> Result<ServerCgroup, String> {
        let quota = ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1000);
        let v2_root = Path::new("/sys/fs/cgroup");
        if v2_root.join("cgroup.controllers").exists() {
            let parent = v2_root.join(own_cgroup("").unwrap_or_default().trim_start_matches('/'));
            let enabled = read(&parent.join("cgroup.subtree_control")).unwrap_or_default();
            if !(enabled.contains("cpu") && enabled.contains("memory")) {
                write(&parent.join("cgroup.subtree_control"), "+cpu +memory")?;
            }
            let dir = parent.join(name);
            std::fs::create_dir_all(&dir)
                .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
            let group = ServerCgroup::V2 { dir: dir.clone() };
            write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
            write(&dir.join("memory.max"), &memory.to_string())?;
            // No swap: over the limit means the OOM killer, as in a container without swap.
            let _ = write(&dir.join("memory.swap.max"), "0");
            return Ok(group);
        }
        let cpu_root = Path::new("/sys/fs/cgroup/cpu");
        let memory_root = Path::new("/sys/fs/cgroup/memory");
        if !(cpu_root.join("cpu.cfs_quota_us").exists()
            && memory_root.join("memory.limit_in_bytes").exists())
        {
            return Err("no cgroup v2, nor v1 cpu and memory controllers, are mounted".to_owned());
        }
        let cpu = cpu_root
            .join(
                own_cgroup("cpu")
                    .unwrap_or_default()
                    .trim_start_matches('/'),
            )
            .join(name);
        let memory_dir = memory_root
            .join(
                own_cgroup("memory")
                    .unwrap_or_default()
                    .trim_start_matches('/'),
            )
            .join(name);
        for dir in [&cpu, &memory_dir] {
            std::fs::create_dir_all(dir)
                .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        }
        let group = ServerCgroup::V1 {
            cpu: cpu.clone(),
            memory: memory_dir.clone(),
        };
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

    /// The `cgroup.procs` files a process writes its PID to, to join.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        match self {
            ServerCgroup::V2 { dir } => vec![dir.join("cgroup.procs")],
            ServerCgroup::V1 { cpu, memory } => {
                vec![cpu.join("cgroup.procs"), memory.join("cgroup.procs")]
            }
        }
    }

    /// The limits as the kernel holds them.
    pub fn read_back(&self) -> AppliedLimits {
        match self {
            ServerCgroup::V2 { dir } => AppliedLimits {
                mechanism: "cgroup-v2".to_owned(),
                cpu_quota: read(&dir.join("cpu.max")),
                memory_limit_bytes: read(&dir.join("memory.max")).and_then(|v| v.parse().ok()),
                ..AppliedLimits::default()
            },
            ServerCgroup::V1 { cpu, memory } => AppliedLimits {
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

    /// How many times the kernel's OOM killer struck inside this cgroup.
    pub fn oom_kills(&self) -> u64 {
        let (file, key) = match self {
            ServerCgroup::V2 { dir } => (dir.join("memory.events"), "oom_kill"),
            ServerCgroup::V1 { memory, .. } => (memory.join("memory.oom_control"), "oom_kill"),
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

    /// Removes the cgroup (its processes must have exited).
    pub fn remove(self) {
        let dirs = match self {
            ServerCgroup::V2 { dir } => vec![dir],
            ServerCgroup::V1 { cpu, memory } => vec![cpu, memory],
        };
        for dir in dirs {
            // The kernel frees a cgroup a moment after its last process exits; retry briefly.
            for _ in 0..50 {
                if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
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
    fn core_lists_are_comma_separated() {
        assert_eq!(core_list(&[0, 2]), "0,2");
    }
}
