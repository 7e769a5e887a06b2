//! Heap profiling of a built-in server over a window: every allocation's backtrace, recorded
//! by dhat, summed per allocation site, written as dhat's JSON when the window ends.
//!
//! The harness drives it through the admin service `grpclab.admin.v1.HeapProfile` (Start when
//! the measured window starts, Stop when it ends), so warm-up and start-up allocations stay
//! out of the profile. While it runs, the counting allocator routes every call through
//! `dhat::Alloc` (see [`crate::alloc_count`]); it is slow (a backtrace per allocation), so a
//! profiled window's throughput is not the server's.
//!
//! Only one profile runs per process (dhat keeps one global profiler).

use std::sync::Mutex;

use crate::alloc_count::{allocation_totals, route_through_heap_profiler};

/// The `:path` of `HeapProfile/Start`.
pub const START_PATH: &str = "/grpclab.admin.v1.HeapProfile/Start";
/// The `:path` of `HeapProfile/Stop`.
pub const STOP_PATH: &str = "/grpclab.admin.v1.HeapProfile/Stop";

/// The running profile: dhat's profiler (dropping it writes the file) and its file.
struct Running {
    profiler: dhat::Profiler,
    path: String,
}

static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

/// Why a profile cannot start or stop; the message says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeapProfileError(pub String);

impl std::fmt::Display for HeapProfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Starts recording allocations; [`stop`] writes them to `path`.
pub fn start(path: &str) -> Result<(), HeapProfileError> {
    if allocation_totals().is_none() {
        return Err(HeapProfileError(
            "this process does not run grpclab's allocator, so it cannot profile its heap"
                .to_owned(),
        ));
    }
    if path.is_empty() || !std::path::Path::new(path).is_absolute() {
        return Err(HeapProfileError(format!(
            "heap profile path '{path}' must be absolute (the server's working directory is not the caller's)"
        )));
    }
    let mut running = RUNNING
        .lock()
        .map_err(|_| HeapProfileError("heap profiler state poisoned".to_owned()))?;
    if let Some(current) = running.as_ref() {
        return Err(HeapProfileError(format!(
            "a heap profile is already running (writing to {}); stop it first",
            current.path
        )));
    }
    // Build before routing allocations through dhat: calls that reach dhat's allocator while
    // no profiler runs are just passed on, so the order only decides which allocations count.
    let profiler = dhat::Profiler::builder()
        .file_name(path)
        // Enough frames to see past the allocator, collection and codec internals (inlined
        // frames count too) to the code that asked.
        .trim_backtraces(Some(48))
        .build();
    route_through_heap_profiler(true);
    *running = Some(Running {
        profiler,
        path: path.to_owned(),
    });
    Ok(())
}

/// Stops recording and writes the profile; returns its path.
pub fn stop() -> Result<String, HeapProfileError> {
    let mut running = RUNNING
        .lock()
        .map_err(|_| HeapProfileError("heap profiler state poisoned".to_owned()))?;
    let Some(current) = running.take() else {
        return Err(HeapProfileError(
            "no heap profile is running; start one first".to_owned(),
        ));
    };
    route_through_heap_profiler(false);
    // Dropping the profiler writes dhat's JSON to the path given at start.
    drop(current.profiler);
    if !std::path::Path::new(&current.path).is_file() {
        return Err(HeapProfileError(format!(
            "the heap profile could not be written to {} (is the folder writable by the server?)",
            current.path
        )));
    }
    Ok(current.path)
}
