//! JVM servers: `--profile cpu` and `--profile alloc` through Java Flight Recorder, the JVM's
//! own profiler (perf sees JIT-compiled Java as anonymous addresses).
//!
//! A server whose process group holds a JVM (its executable is `java`) is recorded with
//! `jcmd PID JFR.start settings=profile method-profiling=max` at the end of the warmup and
//! `JFR.stop` after the window; `jfr print --json` then yields the execution samples (→ folded
//! stacks → the same flamegraph and top-functions files as perf's) and the allocation samples
//! (→ the same allocation-site lists as dhat's, with sampled counts and JFR's estimated
//! bytes). The JSON is read as a stream into the few fields used: a recording's JSON runs to
//! hundreds of MB.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::alloc_profile::{AllocProfile, AllocationPoint};
use super::names::file_name;
use super::profile::CpuProfile;

/// The recording's name inside the JVM.
const RECORDING: &str = "grpclab";

/// The pid of a JVM among `pids`, if one is there.
pub fn find_jvm(pids: &[u32]) -> Option<u32> {
    pids.iter().copied().find(|pid| {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .and_then(|exe| exe.file_name().map(|n| n == "java"))
            .unwrap_or(false)
    })
}

/// A Flight Recorder recording running in a JVM.
#[derive(Debug)]
pub struct JfrRecording {
    pid: u32,
    file: PathBuf,
}

fn run(tool: &str, args: &[String]) -> Result<String, String> {
    let output = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| {
            format!(
                "cannot run {tool}: {err}; it comes with the JDK (Debian: default-jdk-headless)"
            )
        })?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    if output.status.success() && !text.contains("Could not") && !text.contains("Exception") {
        Ok(text)
    } else {
        Err(format!(
            "{tool} {}: {}",
            args.first().cloned().unwrap_or_default(),
            text.lines().last().unwrap_or("failed").trim()
        ))
    }
}

/// Starts recording the JVM `pid` into `dir/<name>.jfr`: the `profile` settings (allocation
/// samples) with execution samples every 1 ms per running Java thread instead of 10 ms. At
/// 10 ms a server pinned to one busy core gave 44 to 236 samples in an 8 s window, too few to
/// show its own code's share; at 1 ms, 700 to 800.
pub(crate) fn start(pid: u32, dir: &Path, name: &str) -> Result<JfrRecording, String> {
    // The JVM resolves a relative path against its own working directory, not ours.
    let dir = std::fs::canonicalize(dir)
        .map_err(|err| format!("JVM profile skipped: {}: {err}", dir.display()))?;
    let file = dir.join(format!("{name}.jfr"));
    run(
        "jcmd",
        &[
            pid.to_string(),
            "JFR.start".to_owned(),
            format!("name={RECORDING}"),
            "settings=profile".to_owned(),
            "method-profiling=max".to_owned(),
            format!("filename={}", file.display()),
        ],
    )
    .map_err(|err| format!("JVM profile skipped: {err}"))?;
    Ok(JfrRecording { pid, file })
}

impl JfrRecording {
    /// Stops the recording; the JVM writes the file.
    pub(crate) fn stop(self) -> Result<PathBuf, String> {
        run(
            "jcmd",
            &[
                self.pid.to_string(),
                "JFR.stop".to_owned(),
                format!("name={RECORDING}"),
            ],
        )
        .map_err(|err| format!("JVM profile lost: {err}"))?;
        if self.file.is_file() {
            Ok(self.file)
        } else {
            Err(format!(
                "JVM profile lost: the JVM wrote no {}",
                self.file.display()
            ))
        }
    }
}

#[derive(Deserialize)]
struct JfrFile {
    recording: Recording,
}

#[derive(Deserialize)]
struct Recording {
    events: Vec<Event>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    values: Values,
}

#[derive(Deserialize)]
struct Values {
    #[serde(rename = "stackTrace")]
    stack_trace: Option<StackTrace>,
    /// Allocation samples: the bytes this sample stands for.
    weight: Option<u64>,
}

#[derive(Deserialize)]
struct StackTrace {
    frames: Vec<Frame>,
}

#[derive(Deserialize)]
struct Frame {
    method: Method,
}

#[derive(Deserialize)]
struct Method {
    #[serde(rename = "type")]
    class: Class,
    name: String,
}

#[derive(Deserialize)]
struct Class {
    name: String,
}

impl Frame {
    /// `package.Class.method`, as Java names it.
    fn display(&self) -> String {
        format!(
            "{}.{}",
            self.method.class.name.replace('/', "."),
            self.method.name
        )
    }
}

/// The samples of a recording: frames innermost first.
pub struct Samples {
    /// Execution samples (`jdk.ExecutionSample`).
    execution: Vec<Vec<String>>,
    /// Allocation samples (`jdk.ObjectAllocationSample`) with the bytes each stands for.
    allocation: Vec<(Vec<String>, u64)>,
}

impl Samples {
    /// How many execution samples the recording holds.
    pub(crate) fn execution_count(&self) -> usize {
        self.execution.len()
    }
}

const EXECUTION: &str = "jdk.ExecutionSample";
const ALLOCATION: &str = "jdk.ObjectAllocationSample";

/// Reads both kinds of sample from `jfr` in one pass of `jfr print`.
pub(crate) fn read(jfr: &Path) -> Result<Samples, String> {
    let mut child = Command::new("jfr")
        .args(["print", "--json", "--stack-depth", "64", "--events"])
        .arg(format!("{EXECUTION},{ALLOCATION}"))
        .arg(jfr)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| {
            format!("JVM profile: cannot run jfr: {err}; it comes with the JDK (Debian: default-jdk-headless)")
        })?;
    let parsed: Result<JfrFile, _> = child
        .stdout
        .take()
        .ok_or_else(|| "JVM profile: jfr gave no output".to_owned())
        .and_then(|out| {
            serde_json::from_reader(std::io::BufReader::new(out))
                .map_err(|err| format!("JVM profile: jfr print's JSON does not read: {err}"))
        });
    let _ = child.wait();
    let mut samples = Samples {
        execution: Vec::new(),
        allocation: Vec::new(),
    };
    for event in parsed?.recording.events {
        let Some(trace) = event.values.stack_trace else {
            continue;
        };
        let frames: Vec<String> = trace.frames.iter().map(Frame::display).collect();
        if event.kind == ALLOCATION {
            samples
                .allocation
                .push((frames, event.values.weight.unwrap_or(1)));
        } else if event.kind == EXECUTION {
            samples.execution.push(frames);
        }
    }
    Ok(samples)
}

/// The execution samples as a flamegraph and top functions, like perf's.
pub(crate) fn cpu_profile(samples: &Samples, dir: &Path, name: &str) -> Result<CpuProfile, String> {
    let mut folded: std::collections::BTreeMap<String, u64> = Default::default();
    for frames in &samples.execution {
        let stack: Vec<&str> = frames.iter().rev().map(String::as_str).collect();
        *folded.entry(stack.join(";")).or_default() += 1;
    }
    let lines: String = folded
        .iter()
        .map(|(stack, count)| format!("{stack} {count}\n"))
        .collect();
    super::profile::render(
        &lines,
        &dir.join(format!("{name}.flamegraph.svg")),
        &dir.join(format!("{name}.top.txt")),
        "grpclab: JVM execution samples (Java Flight Recorder) during the measured window",
    )
}

/// Execution samples per second of window below which a CPU profile is called thin.
const THIN_SAMPLES_PER_SECOND: f64 = 20.0;

/// A note for a CPU recording too thin to read shares from: `samples` execution samples over
/// a `window`. A JVM that ran little Java code in the window (starved of CPU by its
/// neighbours, or idle) takes few samples, and its flamegraph is then noise.
pub(crate) fn thin_recording_note(samples: usize, window: std::time::Duration) -> Option<String> {
    let seconds = window.as_secs_f64();
    (seconds > 0.0 && (samples as f64) < THIN_SAMPLES_PER_SECOND * seconds).then(|| {
        format!(
            "CPU profile thin: {samples} execution samples in {seconds:.1} s (fewer than \
             {THIN_SAMPLES_PER_SECOND:.0}/s): the JVM ran little Java code in the window \
             (starved of CPU or idle), so its shares are noise"
        )
    })
}

/// Frames that are the JVM's own classes: an allocation site is the first frame past them.
pub fn is_jvm_machinery(frame: &str) -> bool {
    ["java.", "jdk.", "sun.", "javax."]
        .iter()
        .any(|prefix| frame.starts_with(prefix))
}

/// The allocation samples as allocation sites beside the recording `jfr`; `calls` (the
/// window's calls) makes them per call.
pub fn alloc_profile(
    samples: &Samples,
    jfr: &Path,
    name: &str,
    calls: Option<u64>,
) -> Result<AllocProfile, String> {
    if samples.allocation.is_empty() {
        return Err("JVM allocation profile: JFR took no allocation samples in the window (a longer window takes more)".to_owned());
    }
    let points = samples
        .allocation
        .iter()
        .map(|(frames, weight)| AllocationPoint {
            frames: frames.clone(),
            allocations: 1,
            bytes: *weight,
        });
    let mut profile = super::alloc_profile::sites(
        points,
        calls,
        is_jvm_machinery,
        "Java Flight Recorder allocation samples: counts are samples, bytes are JFR's estimates",
        true,
    );
    profile.dhat_file = file_name(jfr);
    let dir = jfr.parent().unwrap_or(Path::new("."));
    let sites_file = dir.join(format!("{name}.alloc-sites.txt"));
    std::fs::write(&sites_file, super::alloc_profile::render(&profile))
        .map_err(|err| format!("JVM allocation profile: {err}"))?;
    profile.sites_file = file_name(&sites_file);
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_with_few_samples_for_its_window_is_called_thin() {
        let window = std::time::Duration::from_secs(8);
        let note = thin_recording_note(19, window).expect("19 samples in 8 s is thin");
        assert!(note.contains("19 execution samples in 8.0 s"), "{note}");
        assert_eq!(thin_recording_note(160, window), None);
        assert_eq!(thin_recording_note(700, window), None);
        assert_eq!(thin_recording_note(0, std::time::Duration::ZERO), None);
    }

    #[test]
    fn frames_read_as_java_names_them_and_runtime_frames_are_machinery() {
        let json = r#"{"recording":{"events":[{"type":"jdk.ObjectAllocationSample","values":{
            "weight": 4096, "objectClass": {"name": "byte[]"},
            "stackTrace": {"truncated": false, "frames": [
              {"method": {"type": {"name": "java/util/Arrays"}, "name": "copyOf"}, "lineNumber": 1},
              {"method": {"type": {"name": "com/google/protobuf/CodedInputStream"}, "name": "readBytes"}, "lineNumber": 2}
            ]}}}]}}"#;
        let file: JfrFile = serde_json::from_str(json).unwrap();
        let frames: Vec<String> = file.recording.events[0]
            .values
            .stack_trace
            .as_ref()
            .unwrap()
            .frames
            .iter()
            .map(Frame::display)
            .collect();
        assert_eq!(
            frames,
            [
                "java.util.Arrays.copyOf",
                "com.google.protobuf.CodedInputStream.readBytes"
            ]
        );
        assert_eq!(file.recording.events[0].values.weight, Some(4096));
        assert!(is_jvm_machinery(&frames[0]));
        assert!(!is_jvm_machinery(&frames[1]));
        assert_eq!(
            find_jvm(&[std::process::id()]),
            None,
            "this test is not a JVM"
        );
    }
}
