//! `--profile cpu`: samples the server with `perf` during the measured window and renders a
//! flamegraph (inferno) and the top functions by self and total time. Works for any server,
//! Rust or not. Where perf is missing or may not record, one line says so and how to fix it;
//! the run itself completes.

use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::runner::file_name;

/// Sampling frequency (Hz): enough samples in a few seconds, little overhead.
const FREQUENCY: &str = "499";
/// How many functions the top lists keep.
const TOP: usize = 25;

/// The perf binary: `GRPCLAB_PERF` if set, else `perf` on the PATH.
fn perf_binary() -> String {
    std::env::var("GRPCLAB_PERF").unwrap_or_else(|_| "perf".to_owned())
}

/// A perf recording in progress.
pub struct CpuRecording {
    child: Child,
    data: PathBuf,
    svg: PathBuf,
    top: PathBuf,
}

/// One function's share of the samples.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct FunctionShare {
    /// The symbol.
    pub function: String,
    /// Percent of samples with this function on top of the stack.
    pub self_percent: f64,
    /// Percent of samples with this function anywhere on the stack.
    pub total_percent: f64,
}

/// What a CPU profile produced.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct CpuProfile {
    /// The flamegraph (SVG), in the results folder.
    pub flamegraph: String,
    /// The top functions (text), in the results folder.
    pub top_file: String,
    /// Total sample weight (perf's sampled periods, e.g. CPU cycles), the 100 % of the shares.
    pub weight: u64,
    /// The top functions by self time.
    pub top: Vec<FunctionShare>,
}

/// Starts sampling `pids` into `dir/<name>.perf.data`.
pub fn start(pids: &[u32], dir: &Path, name: &str) -> Result<CpuRecording, String> {
    let perf = perf_binary();
    let found = Command::new(&perf)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        return Err(format!(
            "CPU profile skipped: '{perf}' not found; install perf (Debian: apt-get install linux-perf) or set GRPCLAB_PERF to its path"
        ));
    }
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    let data = dir.join(format!("{name}.perf.data"));
    let child = Command::new(&perf)
        .args([
            "record",
            "-F",
            FREQUENCY,
            "-g",
            "--quiet",
            "-p",
            &list.join(","),
            "-o",
        ])
        .arg(&data)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("CPU profile skipped: cannot start {perf}: {err}"))?;
    Ok(CpuRecording {
        child,
        svg: dir.join(format!("{name}.flamegraph.svg")),
        top: dir.join(format!("{name}.top.txt")),
        data,
    })
}

fn paranoid_hint() -> String {
    let level = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|l| l.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned());
    format!("kernel.perf_event_paranoid is {level}; run as root or `sysctl kernel.perf_event_paranoid=1`")
}

impl CpuRecording {
    /// Stops sampling and renders the flamegraph and the top functions.
    pub fn finish(self) -> Result<CpuProfile, String> {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) on perf's own pid with SIGINT, which makes it stop and write its
            // data file; touches no memory of ours.
            unsafe {
                libc::kill(pid, libc::SIGINT);
            }
        }
        let output = self
            .child
            .wait_with_output()
            .map_err(|err| format!("CPU profile failed: {err}"))?;
        if !self.data.is_file() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!(
                "CPU profile skipped: perf could not record ({}); {}",
                stderr.lines().last().unwrap_or("no output").trim(),
                paranoid_hint()
            ));
        }
        let script = Command::new(perf_binary())
            .arg("script")
            .arg("-i")
            .arg(&self.data)
            .output()
            .map_err(|err| format!("CPU profile failed: perf script: {err}"))?;
        let mut folded = Vec::new();
        {
            use inferno::collapse::Collapse;
            let mut folder = inferno::collapse::perf::Folder::default();
            folder
                .collapse(script.stdout.as_slice(), &mut folded)
                .map_err(|err| format!("CPU profile failed: collapsing stacks: {err}"))?;
        }
        let folded = String::from_utf8_lossy(&folded).into_owned();
        render(
            &folded,
            &self.svg,
            &self.top,
            "grpclab: server CPU during the measured window",
        )
    }
}

/// Renders folded stacks (`root;...;leaf COUNT` per line) as a flamegraph at `svg` and the top
/// functions at `top`: the common end of perf's and Java Flight Recorder's profiles.
pub fn render(folded: &str, svg: &Path, top: &Path, title: &str) -> Result<CpuProfile, String> {
    let (weight, shares) = top_functions(folded);
    if weight == 0 {
        return Err("CPU profile: no samples were recorded (was the server idle?)".to_owned());
    }
    let mut image = Vec::new();
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    inferno::flamegraph::from_lines(&mut options, folded.lines(), &mut image)
        .map_err(|err| format!("CPU profile failed: flamegraph: {err}"))?;
    std::fs::write(svg, image).map_err(|err| format!("CPU profile failed: {err}"))?;
    let mut text = format!(
        "total sample weight {weight}\n{:>8} {:>8}  function\n",
        "self %", "total %"
    );
    for share in &shares {
        let _ = writeln!(
            text,
            "{:>8.2} {:>8.2}  {}",
            share.self_percent, share.total_percent, share.function
        );
    }
    std::fs::write(top, text.as_bytes()).map_err(|err| format!("CPU profile failed: {err}"))?;
    Ok(CpuProfile {
        flamegraph: file_name(svg),
        top_file: file_name(top),
        weight,
        top: shares,
    })
}

/// Self and total shares per function from folded stacks (`a;b;c COUNT` per line).
pub fn top_functions(folded: &str) -> (u64, Vec<FunctionShare>) {
    let mut total_samples = 0u64;
    let mut self_counts: HashMap<&str, u64> = HashMap::new();
    let mut total_counts: HashMap<&str, u64> = HashMap::new();
    for line in folded.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            continue;
        };
        total_samples += count;
        let frames: Vec<&str> = stack.split(';').collect();
        if let Some(leaf) = frames.last() {
            *self_counts.entry(leaf).or_default() += count;
        }
        let mut seen: Vec<&str> = Vec::with_capacity(frames.len());
        for frame in frames {
            if !seen.contains(&frame) {
                seen.push(frame);
                *total_counts.entry(frame).or_default() += count;
            }
        }
    }
    let percent = |n: u64| {
        if total_samples == 0 {
            0.0
        } else {
            100.0 * n as f64 / total_samples as f64
        }
    };
    let mut shares: Vec<FunctionShare> = self_counts
        .iter()
        .map(|(function, count)| FunctionShare {
            function: (*function).to_owned(),
            self_percent: percent(*count),
            total_percent: percent(total_counts.get(function).copied().unwrap_or(0)),
        })
        .collect();
    shares.sort_by(|a, b| {
        b.self_percent
            .total_cmp(&a.self_percent)
            .then(a.function.cmp(&b.function))
    });
    shares.truncate(TOP);
    (total_samples, shares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_count_self_at_the_leaf_and_total_once_per_stack() {
        let folded = "main;serve;decode 6\nmain;serve;encode 3\nmain;serve;decode;decode 1\n";
        let (samples, top) = top_functions(folded);
        assert_eq!(samples, 10);
        assert_eq!(
            top[0],
            FunctionShare {
                function: "decode".into(),
                self_percent: 70.0,
                total_percent: 70.0
            }
        );
        assert_eq!(top[1].function, "encode");
        assert!(
            top.iter().all(|s| s.function != "main"),
            "main is never a leaf here"
        );
    }
}
