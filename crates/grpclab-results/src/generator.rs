//! One load generator among several (`--shard`, `--start-at`): who it was, its part of the
//! run, when it really started, and how far its clock can be trusted. Facts only: `load`
//! gathers them, the JSON exporter writes them, `grpclab merge` reads and judges them.

use grpclab_load::{Shard, ShardShare};
use serde::{Deserialize, Serialize};
use std::time::SystemTime;

/// How far this machine's clock may be off, as the kernel's NTP discipline reports it
/// (`adjtimex`): what a shared `--start-at` is worth on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClockStatus {
    /// Whether the kernel believes its clock is synchronised (`STA_UNSYNC` clear and
    /// `adjtimex` not reporting `TIME_ERROR`). `None`: it could not be asked.
    pub synchronized: Option<bool>,
    /// The kernel's maximum error bound, microseconds (`maxerror`).
    pub max_error_us: Option<u64>,
    /// The kernel's estimated error, microseconds (`esterror`).
    pub est_error_us: Option<u64>,
}

impl ClockStatus {
    /// Asks the kernel (Linux); elsewhere, nothing is known.
    pub fn read() -> ClockStatus {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: `timex` is plain old data (integers), so all-zeroes is a valid value,
            // and with `modes` 0 `adjtimex` only reads the clock's state into the struct it
            // is given, which lives for the whole call.
            let mut timex: libc::timex = unsafe { std::mem::zeroed() };
            let state = unsafe { libc::adjtimex(&mut timex) };
            if state < 0 {
                return ClockStatus::default();
            }
            let unsynced = (timex.status & libc::STA_UNSYNC) != 0 || state == libc::TIME_ERROR;
            ClockStatus {
                synchronized: Some(!unsynced),
                max_error_us: u64::try_from(timex.maxerror).ok(),
                est_error_us: u64::try_from(timex.esterror).ok(),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            ClockStatus::default()
        }
    }

    /// The error bound to charge a start time with, microseconds: the kernel's maximum
    /// error when it is synchronised; `None` when nothing bounds it.
    pub fn bound_us(&self) -> Option<u64> {
        match self.synchronized {
            Some(true) => self.max_error_us,
            _ => None,
        }
    }
}

/// The machine's name: a Kubernetes pod's name is its hostname.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// One generator's run, as its result records it and a merge lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GeneratorRun {
    /// Its shard, from 0 (0 when the run was not sharded).
    pub shard: u64,
    /// The host (pod) it ran on.
    pub host: String,
    /// Its part of the streams.
    pub concurrency: u64,
    /// Its part of the connections.
    pub connections: u64,
    /// Its part of `-n`, when the run counted calls.
    pub total: Option<u64>,
    /// The shared start it was given (RFC 3339), if any.
    pub start_at: Option<String>,
    /// When it was released to send (RFC 3339, nanoseconds).
    pub first_send: String,
    /// Its measured window's start (RFC 3339, nanoseconds).
    pub window_start: String,
    /// Its measured window, nanoseconds.
    pub window: u64,
    /// Calls it measured.
    pub count: u64,
    /// Its calls over its window, per second.
    pub measured_rps: f64,
    /// Its clock, when it ran.
    pub clock: ClockStatus,
}

impl GeneratorRun {
    /// The facts of a generator that ran `share` of shard `shard`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        shard: Option<Shard>,
        share: ShardShare,
        start_at: Option<SystemTime>,
        first_send: SystemTime,
        window_start: SystemTime,
        window: std::time::Duration,
        count: u64,
        measured_rps: f64,
    ) -> GeneratorRun {
        GeneratorRun {
            shard: shard.map_or(0, |shard| shard.index),
            host: host_name(),
            concurrency: share.concurrency as u64,
            connections: share.connections as u64,
            total: share.total,
            start_at: start_at.map(|at| humantime::format_rfc3339_nanos(at).to_string()),
            first_send: humantime::format_rfc3339_nanos(first_send).to_string(),
            window_start: humantime::format_rfc3339_nanos(window_start).to_string(),
            window: u64::try_from(window.as_nanos()).unwrap_or(u64::MAX),
            count,
            measured_rps,
            clock: ClockStatus::read(),
        }
    }
}

/// A sharded result: which shards of how many it holds, each generator's facts, and (once
/// merged) what the merge found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sharding {
    /// How many generators shared the run.
    pub of: u64,
    /// The generators whose calls this result holds, by shard.
    pub generators: Vec<GeneratorRun>,
    /// Set by `grpclab merge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeFacts>,
}

impl Sharding {
    /// The shards held, in order.
    pub fn held(&self) -> Vec<u64> {
        let mut held: Vec<u64> = self.generators.iter().map(|g| g.shard).collect();
        held.sort_unstable();
        held
    }
}

/// What a merge of several generators' results found besides the added figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeFacts {
    /// The sum of the generators' own rates (calls over each one's window), req/s.
    pub sum_of_rates: f64,
    /// The window every generator was measuring (the latest start to the earliest end),
    /// nanoseconds; 0 when the windows do not overlap.
    pub shared_window: u64,
    /// Calls that ended in the whole seconds of the shared window (from the per-second
    /// series), and their rate.
    pub shared_window_calls: u64,
    /// `shared_window_calls` per second of those whole seconds; 0 without one.
    pub shared_window_rps: f64,
    /// The latest first send minus the earliest, nanoseconds.
    pub start_skew: u64,
    /// The worst clock error bound among the generators, microseconds; `None` when some
    /// clock was not synchronised (or could not be asked): then the skew is all there is.
    pub worst_clock_error_us: Option<u64>,
    /// Generators whose clock was not known to be synchronised.
    pub unsynchronized: Vec<String>,
    /// What the reader should know (windows that do not overlap, ...).
    pub warnings: Vec<String>,
}
