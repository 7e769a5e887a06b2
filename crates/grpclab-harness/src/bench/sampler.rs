//! Samples a server's CPU time and memory once a second over the measured window. Memory is
//! the sum of RSS over every live process of the server's process group, from /proc. CPU comes
//! from the server's cgroup where it has one (v2 `cpu.stat`, v1 `cpuacct.usage`: every process
//! that ever ran in it, short-lived children included); without a cgroup, from /proc: each
//! live process's utime+stime plus the cutime+cstime of the children it has reaped, so a
//! helper that lives between two samples is still counted once its parent waits for it.

use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One reading.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Sample {
    /// Seconds since the window began.
    pub at: f64,
    /// CPU seconds the group has used (live processes).
    pub cpu_seconds: f64,
    /// Resident memory of the group, in bytes.
    pub rss_bytes: u64,
    /// Of it, the group's own pages (resident minus file-backed and shared: heap, stacks,
    /// buffers), bytes; the rest is the pages of its executable and libraries it touched.
    #[serde(default)]
    pub own_bytes: u64,
}

/// The readings and what they add up to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Mean CPU over the window, in percent of one core.
    pub cpu_percent: f64,
    /// Mean resident memory, bytes.
    pub memory_average_bytes: u64,
    /// Highest resident memory seen, bytes.
    pub memory_peak_bytes: u64,
    /// Mean of the group's own memory ([`Sample::own_bytes`]), bytes.
    pub memory_own_average_bytes: u64,
    /// Every reading.
    pub samples: Vec<Sample>,
}

impl Usage {
    fn from_samples(samples: Vec<Sample>) -> Usage {
        let (first, last) = match (samples.first(), samples.last()) {
            (Some(first), Some(last)) => (*first, *last),
            _ => return Usage::default(),
        };
        let span = last.at - first.at;
        Usage {
            cpu_percent: if span > 0.0 {
                100.0 * (last.cpu_seconds - first.cpu_seconds).max(0.0) / span
            } else {
                0.0
            },
            memory_average_bytes: samples.iter().map(|s| s.rss_bytes).sum::<u64>()
                / samples.len() as u64,
            memory_peak_bytes: samples.iter().map(|s| s.rss_bytes).max().unwrap_or(0),
            memory_own_average_bytes: samples.iter().map(|s| s.own_bytes).sum::<u64>()
                / samples.len() as u64,
            samples,
        }
    }
}

/// CPU seconds and RSS bytes of process group `pgid`.
pub fn read_group(pgid: u32) -> (f64, u64) {
    let reading = read_group_memory(pgid);
    (reading.cpu_seconds, reading.rss_bytes)
}

/// One reading of a process group: CPU seconds, RSS and own memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupReading {
    /// CPU seconds, the reaped children's included.
    pub cpu_seconds: f64,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// Of it, the processes' own pages ([`Sample::own_bytes`]), bytes.
    pub own_bytes: u64,
}

/// CPU seconds, RSS and own memory of process group `pgid`: own memory is each process's
/// resident pages minus its file-backed and shared ones (`/proc/PID/statm`).
pub fn read_group_memory(pgid: u32) -> GroupReading {
    let ticks = clock_ticks();
    let page = page_size();
    let mut cpu = 0.0;
    let mut rss = 0u64;
    let mut own = 0u64;
    super::process::each_process_stat(|pid, fields| {
        // fields[2] = pgrp, [11] = utime, [12] = stime, [21] = rss (pages)
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) != Some(pgid) {
            return;
        }
        let number = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // [13] = cutime, [14] = cstime: children this process has waited for.
        cpu += (number(11) + number(12) + number(13) + number(14)) as f64 / ticks;
        rss += number(21) * page;
        own += own_pages(pid) * page;
    });
    GroupReading {
        cpu_seconds: cpu,
        rss_bytes: rss,
        own_bytes: own,
    }
}

/// A process's resident pages that are neither file-backed nor shared (`statm`: resident
/// minus shared); 0 when it is gone.
fn own_pages(pid: u32) -> u64 {
    let Ok(statm) = std::fs::read_to_string(format!("/proc/{pid}/statm")) else {
        return 0;
    };
    let mut fields = statm
        .split_whitespace()
        .map(|v| v.parse::<u64>().unwrap_or(0));
    let (_size, resident, shared) = (fields.next(), fields.next(), fields.next());
    resident.unwrap_or(0).saturating_sub(shared.unwrap_or(0))
}

/// The numeric fields of `/proc/{who}/stat` after the command name, counted from 0 at the
/// state (so utime is 11); `None` when the process is gone.
fn stat_numbers(who: &str) -> Option<Vec<Option<u64>>> {
    let stat = std::fs::read_to_string(format!("/proc/{who}/stat")).ok()?;
    // The command name (field 2) may hold spaces and ')': fields count from the last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(|v| v.parse().ok()).collect())
}

/// CPU seconds (user + system) and RSS bytes of one process; `None` when it is gone.
pub fn read_process(pid: u32) -> Option<(f64, u64)> {
    let fields = stat_numbers(&pid.to_string())?;
    let number = |i: usize| fields.get(i).copied().flatten();
    Some((
        (number(11)? + number(12)?) as f64 / clock_ticks(),
        number(21)? * page_size(),
    ))
}

/// CPU seconds (user + system) of the children this process has reaped (`cutime` +
/// `cstime`): around one child's run, that child's CPU.
pub fn reaped_children_cpu() -> Option<f64> {
    let fields = stat_numbers("self")?;
    let number = |i: usize| fields.get(i).copied().flatten();
    Some((number(13)? + number(14)?) as f64 / clock_ticks())
}

/// This process's CPU over a stretch of work (the client's, around a load run): taken at
/// [`OwnCpu::start`], read with [`OwnCpu::percent`].
pub struct OwnCpu {
    cpu_seconds: Option<f64>,
    started: std::time::Instant,
}

impl OwnCpu {
    /// Starts counting now.
    pub fn start() -> OwnCpu {
        OwnCpu {
            cpu_seconds: read_process(std::process::id()).map(|(cpu, _)| cpu),
            started: std::time::Instant::now(),
        }
    }

    /// CPU since the start, in percent of one core (200 is two cores busy).
    pub fn percent(&self) -> Option<f64> {
        let before = self.cpu_seconds?;
        let (after, _) = read_process(std::process::id())?;
        let wall = self.started.elapsed().as_secs_f64().max(1e-9);
        Some(100.0 * (after - before).max(0.0) / wall)
    }
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}

/// A sampling thread; [`Sampler::finish`] takes a last reading and returns the usage.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Sample>>,
}

impl Sampler {
    /// Starts sampling group `pgid` now, then every `interval`; CPU from `cgroup_cpu` (a
    /// cgroup usage file, see [`super::limits::cgroup_cpu_seconds`]) when given.
    pub fn start(pgid: u32, cgroup_cpu: Option<std::path::PathBuf>, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut samples = Vec::new();
            let take = |samples: &mut Vec<Sample>| {
                let reading = read_group_memory(pgid);
                let cpu_seconds = cgroup_cpu
                    .as_deref()
                    .and_then(super::limits::cgroup_cpu_seconds)
                    .unwrap_or(reading.cpu_seconds);
                samples.push(Sample {
                    at: start.elapsed().as_secs_f64(),
                    cpu_seconds,
                    rss_bytes: reading.rss_bytes,
                    own_bytes: reading.own_bytes,
                });
            };
            take(&mut samples);
            let mut next = start + interval;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                if Instant::now() >= next {
                    take(&mut samples);
                    next += interval;
                }
            }
            take(&mut samples);
            samples
        });
        Sampler { stop, thread }
    }

    /// Stops, and sums up.
    pub fn finish(self) -> Usage {
        self.stop.store(true, Ordering::Relaxed);
        Usage::from_samples(self.thread.join().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_averages_cpu_over_the_span() {
        let usage = Usage::from_samples(vec![
            Sample {
                at: 0.0,
                cpu_seconds: 1.0,
                rss_bytes: 100,
                own_bytes: 10,
            },
            Sample {
                at: 1.0,
                cpu_seconds: 1.5,
                rss_bytes: 300,
                own_bytes: 30,
            },
            Sample {
                at: 2.0,
                cpu_seconds: 2.0,
                rss_bytes: 200,
                own_bytes: 20,
            },
        ]);
        assert_eq!(usage.cpu_percent, 50.0);
        assert_eq!(usage.memory_average_bytes, 200);
        assert_eq!(usage.memory_peak_bytes, 300);
        assert_eq!(usage.memory_own_average_bytes, 20);
    }

    #[test]
    fn our_own_group_has_cpu_and_memory() {
        // SAFETY: getpgrp has no arguments and cannot fail.
        let pgid = unsafe { libc::getpgrp() } as u32;
        let reading = read_group_memory(pgid);
        assert!(reading.rss_bytes > 0);
        // A test binary's heap and stacks are its own; its code and libraries are not.
        assert!(
            reading.own_bytes > 0 && reading.own_bytes < reading.rss_bytes,
            "{reading:?}"
        );
    }
}
