//! `--profile cpu` / `cpu-dwarf`: samples the server with `perf` during the measured window
//! and renders a flamegraph (inferno), the top functions by self and by total time, and the
//! heaviest call paths. Works for any server, Rust or not. Where perf is missing or may not
//! record, one line says so and how to fix it; the run itself completes.
//!
//! Call stacks: `cpu` walks frame pointers (`perf record --call-graph fp`): cheap, small files,
//! and complete for grpclab's own servers, which are built with frame pointers
//! (`.cargo/config.toml`), and for Go servers (Go keeps them). `cpu-dwarf` copies each sample's
//! stack and unwinds it with DWARF (`--call-graph dwarf`): for servers built without frame
//! pointers (most C++ and Rust builds), at the price of bigger files and more overhead.
//! ARCHITECTURE.md has the measurements. When most samples have at most two user-space
//! frames, the profile says the stacks look flat and names the other mode.

use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::names::file_name;

/// Sampling frequency (Hz): enough samples in a few seconds, little overhead.
const FREQUENCY: &str = "499";
/// How many functions the top lists keep.
const TOP: usize = 25;

/// The perf binary: `GRPCLAB_PERF` if set, else `perf` on the PATH.
fn perf_binary() -> String {
    std::env::var("GRPCLAB_PERF").unwrap_or_else(|_| "perf".to_owned())
}

/// Bytes of stack perf copies per sample under `--call-graph dwarf` (perf's default is
/// 8192): deep enough for tokio → h2 → prost stacks (measured: every sample unwound past the
/// runtime), and half of perf's largest setting in file size.
const DWARF_STACK_BYTES: &str = "8192";
/// How many functions the by-total list keeps: the runtime's scaffolding (thread start, tokio's
/// block_on and its closures, some twenty frames) comes first, with the same total each.
const TOP_TOTAL: usize = 60;
/// Frames of each call path the top file shows (the leaf end).
const PATH_FRAMES_SHOWN: usize = 8;
/// How many call paths the top file lists.
const TOP_PATHS: usize = 10;
/// Share of samples (percent) with at most two user-space frames above which the stacks are
/// said to look flat.
const FLAT_SHARE: f64 = 50.0;

/// How perf walks a sample's call stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallGraph {
    /// Frame pointers (`--call-graph fp`): for servers built with them.
    #[default]
    FramePointers,
    /// DWARF unwinding of a copied stack (`--call-graph dwarf`): for servers built without.
    Dwarf,
}

impl CallGraph {
    /// perf's `--call-graph` value.
    fn perf_value(self) -> String {
        match self {
            CallGraph::FramePointers => "fp".to_owned(),
            CallGraph::Dwarf => format!("dwarf,{DWARF_STACK_BYTES}"),
        }
    }

    /// The `--profile` kind that selects it.
    pub fn flag(self) -> &'static str {
        match self {
            CallGraph::FramePointers => "cpu",
            CallGraph::Dwarf => "cpu-dwarf",
        }
    }
}

/// A perf recording in progress.
pub struct CpuRecording {
    child: Child,
    data: PathBuf,
    svg: PathBuf,
    top: PathBuf,
    call_graph: CallGraph,
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

/// One call path (root first, kernel frames left out) and its share of the samples.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct CallPath {
    /// The frames, outermost first.
    pub frames: Vec<String>,
    /// Percent of samples with exactly this user-space path.
    pub percent: f64,
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
    /// The top functions by total (inclusive) time.
    #[serde(default)]
    pub top_total: Vec<FunctionShare>,
    /// The heaviest call paths.
    #[serde(default)]
    pub top_paths: Vec<CallPath>,
    /// How the stacks were walked (`fp`, `dwarf`; empty for Java Flight Recorder).
    #[serde(default)]
    pub call_graph: String,
    /// Percent of samples with at most two user-space frames (flat stacks).
    #[serde(default)]
    pub flat_percent: f64,
    /// A one-line hint when the stacks look flat (which mode to try instead).
    #[serde(default)]
    pub hint: Option<String>,
}

/// Starts sampling `pids` into `dir/<name>.perf.data`, walking stacks as `call_graph` says.
pub fn start(
    pids: &[u32],
    dir: &Path,
    name: &str,
    call_graph: CallGraph,
) -> Result<CpuRecording, String> {
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
            "--call-graph",
            &call_graph.perf_value(),
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
        call_graph,
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
    pub(crate) fn finish(self) -> Result<CpuProfile, String> {
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
            // Kernel frames marked `_[k]`: drawn in their own colour, and told apart from
            // user-space frames when judging whether stacks unwound.
            let mut options = inferno::collapse::perf::Options::default();
            options.annotate_kernel = true;
            let mut folder = inferno::collapse::perf::Folder::from(options);
            folder
                .collapse(script.stdout.as_slice(), &mut folded)
                .map_err(|err| format!("CPU profile failed: collapsing stacks: {err}"))?;
        }
        let folded = String::from_utf8_lossy(&folded).into_owned();
        let mut profile = render(
            &folded,
            &self.svg,
            &self.top,
            "grpclab: server CPU during the measured window",
        )?;
        profile.call_graph = self.call_graph.perf_value();
        if profile.flat_percent > FLAT_SHARE {
            profile.hint = Some(match self.call_graph {
                CallGraph::FramePointers => format!(
                    "stacks look flat ({:.0} % of samples have at most 2 user-space frames): the server has no frame pointers; try --profile cpu-dwarf, or build it with frame pointers (-C force-frame-pointers=yes, -fno-omit-frame-pointer)",
                    profile.flat_percent
                ),
                CallGraph::Dwarf => format!(
                    "stacks look flat ({:.0} % of samples have at most 2 user-space frames): the server has no unwind tables or symbols (a stripped binary, or a JIT); build it with debug info or frame pointers",
                    profile.flat_percent
                ),
            });
        }
        Ok(profile)
    }
}

/// Renders folded stacks (`root;...;leaf COUNT` per line) as a flamegraph at `svg` and the top
/// functions at `top`: the common end of perf's and Java Flight Recorder's profiles.
pub(crate) fn render(
    folded: &str,
    svg: &Path,
    top: &Path,
    title: &str,
) -> Result<CpuProfile, String> {
    let (weight, every) = function_shares(folded);
    if weight == 0 {
        return Err("CPU profile: no samples were recorded (was the server idle?)".to_owned());
    }
    let mut image = Vec::new();
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    inferno::flamegraph::from_lines(&mut options, folded.lines(), &mut image)
        .map_err(|err| format!("CPU profile failed: flamegraph: {err}"))?;
    std::fs::write(svg, image).map_err(|err| format!("CPU profile failed: {err}"))?;
    let shares = ranked_by_self(every.clone());
    let by_total = ranked_by_total(every);
    let paths = top_paths(folded, weight);
    let flat_percent = flat_percent(folded, weight);
    let mut text = format!("total sample weight {weight}\n");
    for (heading, list) in [
        ("by self time (the function itself)", &shares),
        ("by total time (the function and what it calls)", &by_total),
    ] {
        let _ = write!(
            text,
            "\n{heading}\n{:>8} {:>8}  function\n",
            "self %", "total %"
        );
        for share in list {
            let _ = writeln!(
                text,
                "{:>8.2} {:>8.2}  {}",
                share.self_percent, share.total_percent, share.function
            );
        }
    }
    let _ = writeln!(
        text,
        "\nthe {TOP_PATHS} heaviest call paths (user space, outermost first)"
    );
    for path in &paths {
        // The leaf end is what differs; the thread's and the runtime's frames above it are
        // the same in every path (the JSON record keeps them all).
        let shown = path.frames.len().saturating_sub(PATH_FRAMES_SHOWN);
        let elided = if shown > 0 { "... > " } else { "" };
        let _ = writeln!(
            text,
            "{:>8.2}  {elided}{}",
            path.percent,
            path.frames[shown..].join(" > ")
        );
    }
    let _ = writeln!(
        text,
        "\n{flat_percent:.1} % of samples have at most 2 user-space frames"
    );
    std::fs::write(top, text.as_bytes()).map_err(|err| format!("CPU profile failed: {err}"))?;
    Ok(CpuProfile {
        flamegraph: file_name(svg),
        top_file: file_name(top),
        weight,
        top: shares,
        top_total: by_total,
        top_paths: paths,
        call_graph: String::new(),
        flat_percent,
        hint: None,
    })
}

/// A folded stack's frames and weight (`a;b;c COUNT`), or `None` for a malformed line.
fn folded_line(line: &str) -> Option<(Vec<&str>, u64)> {
    let (stack, count) = line.rsplit_once(' ')?;
    Some((stack.split(';').collect(), count.parse().ok()?))
}

/// The user-space frames of a folded stack: not kernel (`_[k]`), not unresolved
/// (`[unknown]`), and not the root (the process or thread name perf puts first).
fn user_frames<'a>(frames: &[&'a str]) -> Vec<&'a str> {
    frames
        .iter()
        .skip(1)
        .copied()
        .filter(|frame| !frame.ends_with("_[k]") && *frame != "[unknown]")
        .collect()
}

/// Percent of samples whose stack has at most two user-space frames.
fn flat_percent(folded: &str, weight: u64) -> f64 {
    let flat: u64 = folded
        .lines()
        .filter_map(folded_line)
        .filter(|(frames, _)| user_frames(frames).len() <= 2)
        .map(|(_, count)| count)
        .sum();
    if weight == 0 {
        0.0
    } else {
        100.0 * flat as f64 / weight as f64
    }
}

/// The heaviest user-space call paths (kernel frames left out, equal paths merged).
fn top_paths(folded: &str, weight: u64) -> Vec<CallPath> {
    let mut counts: HashMap<Vec<&str>, u64> = HashMap::new();
    for (frames, count) in folded.lines().filter_map(folded_line) {
        *counts.entry(user_frames(&frames)).or_default() += count;
    }
    let mut paths: Vec<(Vec<&str>, u64)> = counts.into_iter().collect();
    paths.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    paths
        .into_iter()
        .filter(|(frames, _)| !frames.is_empty())
        .take(TOP_PATHS)
        .map(|(frames, count)| CallPath {
            frames: frames.into_iter().map(str::to_owned).collect(),
            percent: if weight == 0 {
                0.0
            } else {
                100.0 * count as f64 / weight as f64
            },
        })
        .collect()
}

/// The top functions by total (inclusive) share, from every function's shares.
fn ranked_by_total(mut shares: Vec<FunctionShare>) -> Vec<FunctionShare> {
    shares.sort_by(|a, b| {
        b.total_percent
            .total_cmp(&a.total_percent)
            .then(a.function.cmp(&b.function))
    });
    // The root frame (the process or thread name) is in every sample: not a function.
    shares.retain(|share| share.total_percent < 100.0 || share.self_percent > 0.0);
    shares.truncate(TOP_TOTAL);
    shares
}

/// The top functions by self share, from every function's shares.
fn ranked_by_self(mut shares: Vec<FunctionShare>) -> Vec<FunctionShare> {
    shares.retain(|share| share.self_percent > 0.0);
    shares.sort_by(|a, b| {
        b.self_percent
            .total_cmp(&a.self_percent)
            .then(a.function.cmp(&b.function))
    });
    shares.truncate(TOP);
    shares
}

/// Self and total shares per function from folded stacks (`a;b;c COUNT` per line), the
/// top by self time.
pub fn top_functions(folded: &str) -> (u64, Vec<FunctionShare>) {
    let (weight, shares) = function_shares(folded);
    (weight, ranked_by_self(shares))
}

/// The total sample weight and every function's self and total share (a function counts
/// once per stack in its total), in one pass over the folded stacks.
fn function_shares(folded: &str) -> (u64, Vec<FunctionShare>) {
    let mut total_samples = 0u64;
    let mut self_counts: HashMap<&str, u64> = HashMap::new();
    let mut total_counts: HashMap<&str, u64> = HashMap::new();
    for (frames, count) in folded.lines().filter_map(folded_line) {
        total_samples += count;
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
    let shares = total_counts
        .iter()
        .map(|(function, total)| FunctionShare {
            function: (*function).to_owned(),
            self_percent: percent(self_counts.get(function).copied().unwrap_or(0)),
            total_percent: percent(*total),
        })
        .collect();
    (total_samples, shares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_paths_leave_the_kernel_out_and_flat_stacks_are_measured() {
        let folded = "grpclab;main;serve;decode;copy_[k] 6\n\
                      grpclab;main;serve;decode 2\n\
                      grpclab;[unknown];encode 2\n";
        let paths = top_paths(folded, 10);
        assert_eq!(paths[0].frames, ["main", "serve", "decode"]);
        assert!((paths[0].percent - 80.0).abs() < 1e-9, "6 + 2 merged");
        assert_eq!(paths[1].frames, ["encode"]);
        assert!((flat_percent(folded, 10) - 20.0).abs() < 1e-9);
        let by_total = ranked_by_total(function_shares(folded).1);
        let serve = by_total.iter().find(|s| s.function == "serve").unwrap();
        assert_eq!((serve.self_percent, serve.total_percent), (0.0, 80.0));
        assert!(
            by_total.iter().all(|s| s.function != "grpclab"),
            "the root is not a function"
        );
    }

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
