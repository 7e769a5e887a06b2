//! The watch over a row's server during its window, on a thread of its own: at the end of the
//! warm-up it reads the server's admin counters, starts the CPU and memory sampler and any
//! profile (perf, dhat through the admin RPC, or a JVM's Flight Recorder), and says so on a
//! channel (another client's run starts only then); while the load runs it checks the server
//! is alive and stops the load at once if it died; when the load is done it stops the
//! profiles and hands back what it saw.

use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use grpclab_core::tls::TlsClient;
use grpclab_load::CancellationToken;

use super::readiness::{fetch_stats, process_alive};
use super::sampler::{Sampler, Usage};

/// What the monitor watches and records.
pub(super) struct MonitorPlan {
    /// The server's process (group leader).
    pub pid: u32,
    /// How long after the start the window begins.
    pub warmup: Duration,
    /// The server's address, for its admin counters and heap profile.
    pub target: String,
    /// `--tls`: the client for admin calls.
    pub tls: Option<TlsClient>,
    /// The cgroup's CPU counter, where the server has a cgroup.
    pub cpu_usage_file: Option<std::path::PathBuf>,
    /// `--profile cpu`: where the profile goes.
    pub profile_dir: Option<std::path::PathBuf>,
    /// How perf walks the stacks.
    pub call_graph: super::profile::CallGraph,
    /// `--profile alloc`: where the allocation profile goes.
    pub alloc_dir: Option<std::path::PathBuf>,
    /// The row's name as a file name.
    pub profile_name: String,
    /// Cancelled when the server dies, which stops the load.
    pub cancel: CancellationToken,
}

/// What the monitor saw over the window.
#[derive(Default)]
pub(super) struct MonitorOutcome {
    /// The server's CPU and memory.
    pub usage: Usage,
    /// Its admin counters when the window began.
    pub stats_before: Option<grpclab_server::pb_admin::StatsReply>,
    /// It died during the run.
    pub died: bool,
    /// `--profile cpu` with perf.
    pub profile: Option<Result<super::profile::CpuProfile, String>>,
    /// `--profile alloc` through the admin RPC, stopped.
    pub alloc_profile: Option<Result<super::alloc_profile::StoppedAllocRecording, String>>,
    /// A JVM's recording.
    pub jfr: Option<Result<std::path::PathBuf, String>>,
}

/// Starts the monitor: `done` ends it (the load finished), `window_started` is told when the
/// window's counters and recordings are started.
pub(super) fn spawn(
    plan: MonitorPlan,
    done: Receiver<()>,
    window_started: Sender<()>,
) -> std::thread::JoinHandle<MonitorOutcome> {
    std::thread::spawn(move || {
        let MonitorPlan {
            pid,
            warmup,
            ref target,
            ref cpu_usage_file,
            ref profile_dir,
            call_graph,
            ref alloc_dir,
            ref profile_name,
            ..
        } = plan;
        let warmup_end = Instant::now() + warmup;
        let mut sampler = None;
        let mut stats_before = None;
        let mut died = false;
        let mut recording: Option<Result<super::profile::CpuRecording, String>> = None;
        let mut alloc_recording: Option<Result<super::alloc_profile::AllocRecording, String>> =
            None;
        let mut jfr_recording: Option<Result<super::jfr::JfrRecording, String>> = None;
        loop {
            if sampler.is_none() && Instant::now() >= warmup_end {
                stats_before = fetch_stats(target, plan.tls.as_ref());
                sampler = Some(Sampler::start(
                    pid,
                    cpu_usage_file.clone(),
                    Duration::from_secs(1),
                ));
                // A JVM is profiled by its own recorder (perf cannot name JIT-compiled
                // frames), for CPU and allocations at once.
                let pids = super::process::group_pids(pid);
                let jvm = profile_dir
                    .as_ref()
                    .or(alloc_dir.as_ref())
                    .and_then(|dir| super::jfr::find_jvm(&pids).map(|jvm| (jvm, dir)));
                if let Some((jvm, dir)) = jvm {
                    jfr_recording = Some(super::jfr::start(jvm, dir, profile_name));
                } else {
                    if let Some(dir) = &profile_dir {
                        recording =
                            Some(super::profile::start(&pids, dir, profile_name, call_graph));
                    }
                    if let Some(dir) = &alloc_dir {
                        alloc_recording = Some(super::alloc_profile::start(
                            target,
                            dir,
                            profile_name,
                            plan.tls.clone(),
                        ));
                    }
                }
                let _ = window_started.send(());
            }
            if !process_alive(pid) {
                died = true;
                plan.cancel.cancel();
                break;
            }
            match done.recv_timeout(Duration::from_millis(50)) {
                Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        let usage = sampler.map(Sampler::finish).unwrap_or_default();
        // The heap profile stops first: nothing else has talked to the server since the load.
        let alloc_profile = if died {
            alloc_recording.map(|_| Err("allocation profile lost: the server died".to_owned()))
        } else {
            alloc_recording
                .map(|started| started.and_then(super::alloc_profile::AllocRecording::stop))
        };
        let profile =
            recording.map(|started| started.and_then(super::profile::CpuRecording::finish));
        let jfr = if died {
            jfr_recording.map(|_| Err("JVM profile lost: the server died".to_owned()))
        } else {
            jfr_recording.map(|started| started.and_then(super::jfr::JfrRecording::stop))
        };
        MonitorOutcome {
            usage,
            stats_before,
            died,
            profile,
            alloc_profile,
            jfr,
        }
    })
}
