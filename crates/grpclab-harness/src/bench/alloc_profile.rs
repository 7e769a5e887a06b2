//! `--profile alloc`: the top allocation sites of a server over its measured window — the
//! "culprits" of a JVM allocation profile.
//!
//! grpclab's built-in servers record every allocation's backtrace with dhat between the admin
//! calls `HeapProfile/Start` and `Stop` (see `grpclab_server::heap_profile`). This module asks
//! for the profile, reads dhat's JSON and sums it per site: the first frame of a backtrace
//! that is not allocator or standard-collection machinery, i.e. the code that decided to
//! allocate. Servers without the admin service get one line saying so; the run completes.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::admin::admin_call;
use super::names::file_name;

/// How many sites each list keeps.
const TOP: usize = 15;
/// Frames of context shown under each site.
const CONTEXT_FRAMES: usize = 4;

/// One allocation site's share of the window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AllocationSite {
    /// The function that allocated (first frame outside allocator and collection code).
    pub site: String,
    /// Its callers, nearest first.
    pub called_from: Vec<String>,
    /// Allocations made there over the window.
    pub allocations: u64,
    /// Bytes allocated there over the window.
    pub bytes: u64,
    /// Allocations per call served (when the server counts calls).
    pub allocations_per_call: Option<f64>,
    /// Bytes per call served.
    pub bytes_per_call: Option<f64>,
}

/// What an allocation profile produced.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AllocProfile {
    /// How the allocations were seen: dhat (every allocation, exact) or Java Flight Recorder
    /// (allocation samples: counts are samples, bytes are JFR's estimates).
    pub source: String,
    /// Whether `allocations` counts samples (JFR) rather than allocations (dhat): then there is
    /// no count per call, only bytes.
    pub sampled: bool,
    /// The full profile (dhat's JSON for DHAT's viewer, or the `.jfr` recording for JDK
    /// Mission Control), in the results folder.
    pub dhat_file: String,
    /// The sites as text, in the results folder.
    pub sites_file: String,
    /// Allocations over the window (every site).
    pub allocations: u64,
    /// Bytes over the window.
    pub bytes: u64,
    /// Calls the server served over the window.
    pub calls: Option<u64>,
    /// The top sites by allocation count.
    pub by_count: Vec<AllocationSite>,
    /// The top sites by bytes.
    pub by_bytes: Vec<AllocationSite>,
}

/// A heap profile running on a server.
pub struct AllocRecording {
    target: String,
    tls: Option<grpclab_core::tls::TlsClient>,
    dhat_file: PathBuf,
    sites_file: PathBuf,
}

/// Stopping writes the whole profile (symbolized backtraces); give it time.
const ADMIN_LIMIT: Duration = Duration::from_secs(60);

/// Asks the server at `target` to start recording into `dir/<name>.dhat.json`.
pub fn start(
    target: &str,
    dir: &Path,
    name: &str,
    tls: Option<grpclab_core::tls::TlsClient>,
) -> Result<AllocRecording, String> {
    let dir = std::path::absolute(dir)
        .map_err(|err| format!("allocation profile skipped: {}: {err}", dir.display()))?;
    let dhat_file = dir.join(format!("{name}.dhat.json"));
    let path = dhat_file.to_string_lossy().into_owned();
    admin_call(ADMIN_LIMIT, grpclab_server::stats::start_heap_profile(target, &path, tls.as_ref())).map_err(|err| {
        format!(
            "allocation profile skipped: {err}; allocation sites come from grpclab's built-in servers (grpclab serve), for others see the allocs/req column or run them under a heap profiler of their own"
        )
    })?;
    Ok(AllocRecording {
        target: target.to_owned(),
        tls,
        dhat_file,
        sites_file: dir.join(format!("{name}.alloc-sites.txt")),
    })
}

impl AllocRecording {
    /// Stops recording (at the window's end, before anything else talks to the server) and
    /// reads the profile.
    pub(crate) fn stop(self) -> Result<StoppedAllocRecording, String> {
        admin_call(
            ADMIN_LIMIT,
            grpclab_server::stats::stop_heap_profile(&self.target, self.tls.as_ref()),
        )
        .map_err(|err| format!("allocation profile failed: {err}"))?;
        let dhat_json = std::fs::read_to_string(&self.dhat_file).map_err(|err| {
            format!(
                "allocation profile failed: cannot read {}: {err}",
                self.dhat_file.display()
            )
        })?;
        Ok(StoppedAllocRecording {
            dhat_json,
            dhat_file: self.dhat_file,
            sites_file: self.sites_file,
        })
    }
}

/// A finished recording, waiting for the window's call count.
pub struct StoppedAllocRecording {
    dhat_json: String,
    dhat_file: PathBuf,
    sites_file: PathBuf,
}

impl StoppedAllocRecording {
    /// Sums the sites and writes the sites file; `calls` is what the server served over the
    /// window, for per-call figures.
    pub(crate) fn report(self, calls: Option<u64>) -> Result<AllocProfile, String> {
        let mut profile = summarize(&self.dhat_json, calls)?;
        profile.dhat_file = file_name(&self.dhat_file);
        profile.sites_file = file_name(&self.sites_file);
        std::fs::write(&self.sites_file, render(&profile))
            .map_err(|err| format!("allocation profile failed: {err}"))?;
        Ok(profile)
    }
}

/// dhat's JSON (file version 2), the parts we read.
#[derive(Deserialize)]
struct DhatFile {
    /// Program points: one per distinct backtrace.
    pps: Vec<ProgramPoint>,
    /// Frame strings, indexed by `ProgramPoint::fs`.
    ftbl: Vec<String>,
}

#[derive(Deserialize)]
struct ProgramPoint {
    /// Total bytes.
    tb: u64,
    /// Total blocks (allocations and reallocations).
    tbk: u64,
    /// Frames, innermost first.
    fs: Vec<usize>,
}

/// A frame as shown: `function (file:line)`, from dhat's `0xADDR: function<generics>
/// (file:line:col)`. Generics go (they can run to kilobytes in tower stacks); the location
/// stays, since inlined frames carry no module path.
fn display_frame(frame: &str) -> String {
    let frame = match frame.split_once(": ") {
        Some((address, rest)) if address.starts_with("0x") => rest,
        _ => frame,
    };
    let (function, location) = match frame.rfind(" (") {
        Some(at) if frame.ends_with(')') => (&frame[..at], Some(&frame[at + 2..frame.len() - 1])),
        _ => (frame, None),
    };
    let mut name = String::with_capacity(function.len().min(120));
    let mut depth = 0usize;
    let mut previous = ' ';
    for c in function.chars() {
        match c {
            '<' => depth += 1,
            // `->` inside `fn(A) -> B` is not a closing bracket.
            '>' if depth > 0 && previous != '-' => depth -= 1,
            _ if depth == 0 => name.push(c),
            _ => {}
        }
        previous = c;
    }
    match location {
        // Drop the column: sites are lines.
        Some(location) => {
            let location = match location.rsplit_once(':') {
                Some((rest, column)) if column.chars().all(|c| c.is_ascii_digit()) => rest,
                _ => location,
            };
            format!("{name} ({location})")
        }
        None => name,
    }
}

/// Frames that allocate on someone else's behalf: the allocator, dhat, and the standard
/// library's collections (a `Vec::push` is not a culprit; its caller is). Inlined frames carry
/// no module path, so the test is on the source file too.
fn is_machinery(frame: &str) -> bool {
    let location = frame.rfind(" (").map_or("", |at| &frame[at + 2..]);
    const FILES: [&str; 16] = [
        "alloc/src/",
        "core/src/",
        "std/src/",
        "dhat-",
        "hashbrown-",
        "alloc_count.rs",
        "src/raw_vec/",
        "src/vec/",
        "src/boxed.rs",
        "src/ops/",
        "src/collections/",
        "src/string.rs",
        "src/slice.rs",
        "src/str/",
        "src/option.rs",
        "src/sync/",
    ];
    let function = frame.trim_start_matches('<');
    // The counting allocator is named by its path within the workspace (line tables give
    // `grpclab-server/src/alloc_count.rs`), not from its start.
    FILES.iter().any(|file| location.starts_with(file))
        || location.contains("/alloc_count.rs")
        || [
            "alloc::", "core::", "std::", "__rust", "__rdl", "dhat::", "[root]", "???",
        ]
        .iter()
        .any(|prefix| function.starts_with(prefix))
}

/// Where memory was allocated: the frames (the allocating one first) and what was allocated
/// there (exact counts from dhat; one sample and its estimated bytes from JFR).
#[derive(Debug, Clone)]
pub struct AllocationPoint {
    /// Frames, innermost first.
    pub frames: Vec<String>,
    /// Allocations (or samples).
    pub allocations: u64,
    /// Bytes (or estimated bytes).
    pub bytes: u64,
}

/// Sums dhat's program points per site and keeps the top ones.
pub(crate) fn summarize(dhat_json: &str, calls: Option<u64>) -> Result<AllocProfile, String> {
    let file: DhatFile = serde_json::from_str(dhat_json)
        .map_err(|err| format!("allocation profile failed: not dhat's JSON: {err}"))?;
    let points = file.pps.iter().map(|point| AllocationPoint {
        frames: point
            .fs
            .iter()
            .filter_map(|&index| file.ftbl.get(index))
            .map(|frame| display_frame(frame))
            .collect(),
        allocations: point.tbk,
        bytes: point.tb,
    });
    Ok(sites(
        points,
        calls,
        is_machinery,
        "dhat: every heap allocation in the window, exact",
        false,
    ))
}

/// Sums allocation points per site — the first frame for which `machinery` is false (the
/// allocator, collections, a runtime's own classes), with its callers for context — and keeps
/// the top sites by count and by bytes.
pub fn sites(
    points: impl IntoIterator<Item = AllocationPoint>,
    calls: Option<u64>,
    machinery: fn(&str) -> bool,
    source: &str,
    sampled: bool,
) -> AllocProfile {
    struct Totals {
        allocations: u64,
        bytes: u64,
        /// The callers of the point that allocated the most here.
        context: Vec<String>,
        context_allocations: u64,
    }
    let mut by_site: HashMap<String, Totals> = HashMap::new();
    let (mut allocations, mut bytes) = (0u64, 0u64);
    for point in points {
        allocations += point.allocations;
        bytes += point.bytes;
        let mut outside = point.frames.iter().skip_while(|f| machinery(f));
        let site = outside
            .next()
            .or(point.frames.last())
            .cloned()
            .unwrap_or_else(|| "[unknown]".to_owned());
        let context: Vec<String> = outside.take(CONTEXT_FRAMES).cloned().collect();
        let totals = by_site.entry(site).or_insert(Totals {
            allocations: 0,
            bytes: 0,
            context: Vec::new(),
            context_allocations: 0,
        });
        totals.allocations += point.allocations;
        totals.bytes += point.bytes;
        if point.allocations > totals.context_allocations {
            totals.context_allocations = point.allocations;
            totals.context = context;
        }
    }
    let per_call = |n: u64| calls.filter(|&c| c > 0).map(|c| n as f64 / c as f64);
    let mut all: Vec<AllocationSite> = by_site
        .into_iter()
        .map(|(site, totals)| AllocationSite {
            site,
            called_from: totals.context,
            allocations: totals.allocations,
            bytes: totals.bytes,
            allocations_per_call: if sampled {
                None
            } else {
                per_call(totals.allocations)
            },
            bytes_per_call: per_call(totals.bytes),
        })
        .collect();
    all.sort_by(|a, b| b.allocations.cmp(&a.allocations).then(a.site.cmp(&b.site)));
    let by_count: Vec<AllocationSite> = all.iter().take(TOP).cloned().collect();
    all.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.site.cmp(&b.site)));
    let by_bytes: Vec<AllocationSite> = all.into_iter().take(TOP).collect();
    AllocProfile {
        source: source.to_owned(),
        sampled,
        dhat_file: String::new(),
        sites_file: String::new(),
        allocations,
        bytes,
        calls,
        by_count,
        by_bytes,
    }
}

/// The sites file: totals, then the two top lists with each site's callers.
pub fn render(profile: &AllocProfile) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "allocation sites over the measured window ({}; full profile: {})",
        profile.source, profile.dhat_file
    );
    let unit = if profile.sampled {
        "samples"
    } else {
        "allocations"
    };
    let _ = write!(
        text,
        "total {} {unit}, {} bytes",
        profile.allocations, profile.bytes
    );
    match profile.calls {
        Some(calls) if calls > 0 && profile.sampled => {
            let _ = writeln!(
                text,
                " over {calls} calls: {:.0} bytes per call",
                profile.bytes as f64 / calls as f64
            );
        }
        Some(calls) if calls > 0 => {
            let _ = writeln!(
                text,
                " over {calls} calls: {:.2} allocations and {:.0} bytes per call",
                profile.allocations as f64 / calls as f64,
                profile.bytes as f64 / calls as f64
            );
        }
        _ => text.push('\n'),
    }
    let share = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            100.0 * part as f64 / whole as f64
        }
    };
    let per_call = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
    let (by_count, count_share) = if profile.sampled {
        ("by samples", "samples%")
    } else {
        ("by allocations", "allocs%")
    };
    for (title, list) in [
        (by_count, &profile.by_count),
        ("by bytes", &profile.by_bytes),
    ] {
        let _ = writeln!(
            text,
            "\n{title}:\n{:>10} {:>12} {:>7} {:>7}  site",
            "allocs/call", "bytes/call", count_share, "bytes%"
        );
        for site in list {
            let _ = writeln!(
                text,
                "{:>10} {:>12} {:>7.1} {:>7.1}  {}",
                per_call(site.allocations_per_call),
                per_call(site.bytes_per_call),
                share(site.allocations, profile.allocations),
                share(site.bytes, profile.bytes),
                site.site
            );
            if !site.called_from.is_empty() {
                let _ = writeln!(
                    text,
                    "{:>40}  called from {}",
                    "",
                    site.called_from.join(" <- ")
                );
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dhat file in version 2's shape: two backtraces through `Vec` growth into two callers,
    /// one of them twice; one enters through the counting allocator (`alloc_count.rs`).
    const DHAT: &str = r#"{
        "dhatFileVersion": 2, "mode": "rust-heap", "verb": "Allocated",
        "pps": [
            {"tb": 600, "tbk": 6, "fs": [7, 8, 1, 2, 3, 5]},
            {"tb": 400, "tbk": 2, "fs": [1, 4, 5]},
            {"tb": 100, "tbk": 2, "fs": [1, 2, 3, 6]}
        ],
        "ftbl": [
            "[root]",
            "0x1: alloc::alloc::alloc (alloc/src/alloc.rs:95:9)",
            "0x2: reserve<u8, alloc::alloc::Global> (src/vec/mod.rs:1446:18)",
            "0x3: new<fn(axum_core::error::Error) -> tonic::status::Status> (h2-0.4.12/src/frame/headers.rs:10:5)",
            "0x4: merge<&mut &mut tonic::codec::buffer::DecodeBuf> (prost-0.14.6/src/encoding.rs:1:1)",
            "0x5: decode<grpclab_server::pb::HelloRequest> (tonic-prost-0.14.9/src/codec.rs:167:20)",
            "0x6: recv (h2-0.4.12/src/proto.rs:3:3)",
            "0x7: <grpclab_server::alloc_count::CountingAllocator as core::alloc::global::GlobalAlloc>::alloc (grpclab-server/src/alloc_count.rs:143:9)",
            "0x8: __rustc::__rust_alloc (grpclab/src/main.rs:13:1)"
        ]
    }"#;

    #[test]
    fn sites_are_the_first_frame_outside_allocator_and_collections() {
        let profile = summarize(DHAT, Some(2)).unwrap();
        assert_eq!((profile.allocations, profile.bytes), (10, 1100));
        let first = &profile.by_count[0];
        assert_eq!(first.site, "new (h2-0.4.12/src/frame/headers.rs:10)");
        assert_eq!((first.allocations, first.bytes), (8, 700));
        assert_eq!(first.allocations_per_call, Some(4.0));
        assert_eq!(
            first.called_from,
            vec!["decode (tonic-prost-0.14.9/src/codec.rs:167)"]
        );
        assert_eq!(
            profile.by_count[1].site,
            "merge (prost-0.14.6/src/encoding.rs:1)"
        );
        assert_eq!(profile.by_bytes[0].site, first.site);
        let text = render(&profile);
        assert!(
            text.contains("5.00 allocations and 550 bytes per call"),
            "{text}"
        );
        assert!(text.contains("called from decode (tonic-prost"), "{text}");
    }

    #[test]
    fn a_file_that_is_not_dhat_is_an_error() {
        let err = summarize("{\"pps\": 3}", None).unwrap_err();
        assert!(err.contains("not dhat's JSON"), "{err}");
    }
}
