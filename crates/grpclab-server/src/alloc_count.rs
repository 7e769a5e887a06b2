//! A counting global allocator: how many heap allocations a process makes, and how many bytes,
//! cheaply enough to leave on while benchmarking.
//!
//! Each thread counts into a slot of its own (a cache line in a static array), as its only
//! writer, with plain relaxed loads and stores — no locked instruction on the allocation path.
//! Readers sum the slots. Threads past [`SLOTS`] share one overflow slot with atomic adds.
//! Slots are never reused, so counts of threads that ended still add up.
//!
//! The binary installs it with `#[global_allocator]`; a process without it reports
//! `counting: false` through the admin RPC.
//!
//! It also hosts the heap profiler (see [`crate::heap_profile`]): while a profile runs, every
//! call goes through `dhat::Alloc` (which records a backtrace per allocation); otherwise
//! straight to `System`. The switch is one relaxed load per call, so the profiler is always
//! built in and needs no rebuild, and a server that is not being profiled never touches dhat
//! (dhat's allocator takes a global lock on every call, even with no profiler running).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Per-thread slots; the last one is the shared overflow slot.
pub const SLOTS: usize = 256;

/// Two counters on one cache line.
#[repr(align(64))]
pub(crate) struct Slot {
    first: AtomicU64,
    second: AtomicU64,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            first: AtomicU64::new(0),
            second: AtomicU64::new(0),
        }
    }
}

/// A pair of counters kept per thread.
pub(crate) struct ThreadCounters {
    slots: [Slot; SLOTS],
}

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // `const` init and no destructor: reading it never allocates, so the allocator may use it.
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's slot index, assigned on first use; the overflow slot during thread teardown.
fn my_slot() -> usize {
    MY_SLOT
        .try_with(|slot| {
            if slot.get() == usize::MAX {
                let index = NEXT_SLOT.fetch_add(1, Ordering::Relaxed).min(SLOTS - 1);
                slot.set(index);
            }
            slot.get()
        })
        .unwrap_or(SLOTS - 1)
}

impl ThreadCounters {
    pub(crate) const fn new() -> ThreadCounters {
        ThreadCounters {
            slots: [const { Slot::new() }; SLOTS],
        }
    }

    /// Adds to this thread's counters.
    #[inline]
    pub(crate) fn add(&self, first: u64, second: u64) {
        let index = my_slot();
        let slot = &self.slots[index];
        if index < SLOTS - 1 {
            // Single writer: load + store is enough, and avoids a locked instruction.
            slot.first.store(
                slot.first.load(Ordering::Relaxed) + first,
                Ordering::Relaxed,
            );
            slot.second.store(
                slot.second.load(Ordering::Relaxed) + second,
                Ordering::Relaxed,
            );
        } else {
            slot.first.fetch_add(first, Ordering::Relaxed);
            slot.second.fetch_add(second, Ordering::Relaxed);
        }
    }

    /// The sums over all threads.
    pub(crate) fn totals(&self) -> (u64, u64) {
        self.slots.iter().fold((0, 0), |(first, second), slot| {
            (
                first + slot.first.load(Ordering::Relaxed),
                second + slot.second.load(Ordering::Relaxed),
            )
        })
    }
}

static ALLOCATIONS: ThreadCounters = ThreadCounters::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// True while a heap profile runs: allocation calls go through dhat.
static HEAP_PROFILING: AtomicBool = AtomicBool::new(false);

/// Routes allocation calls through dhat (true) or straight to the system allocator (false).
/// dhat's allocator itself allocates with `System`, so blocks may cross the switch either way:
/// dhat ignores frees of blocks it never saw and treats reallocations of such blocks as new.
pub(crate) fn route_through_heap_profiler(on: bool) {
    HEAP_PROFILING.store(on, Ordering::SeqCst);
}

#[inline]
fn profiling() -> bool {
    HEAP_PROFILING.load(Ordering::Relaxed)
}

/// The system allocator, counting allocations and bytes per thread.
pub struct CountingAllocator;

impl CountingAllocator {
    #[inline]
    fn count(&self, bytes: usize) {
        ALLOCATIONS.add(1, bytes as u64);
    }
}

// SAFETY: every method forwards to `System`, or to `dhat::Alloc` (which itself forwards to
// `System`), with the caller's arguments unchanged, so the `GlobalAlloc` contract (layout
// validity, pointer provenance, dealloc with the same layout) is `System`'s whichever way a
// block went in or out; the counting touches only atomics and a const thread-local, and never
// allocates, so it cannot re-enter the allocator (dhat guards its own re-entry).
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.count(layout.size());
        // SAFETY: forwarded unchanged; see the impl's comment.
        unsafe {
            if profiling() {
                dhat::Alloc.alloc(layout)
            } else {
                System.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.count(layout.size());
        // SAFETY: forwarded unchanged; see the impl's comment.
        unsafe {
            if profiling() {
                dhat::Alloc.alloc_zeroed(layout)
            } else {
                System.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; see the impl's comment.
        unsafe {
            if profiling() {
                dhat::Alloc.dealloc(ptr, layout)
            } else {
                System.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.count(new_size);
        // SAFETY: forwarded unchanged; see the impl's comment.
        unsafe {
            if profiling() {
                dhat::Alloc.realloc(ptr, layout, new_size)
            } else {
                System.realloc(ptr, layout, new_size)
            }
        }
    }
}

/// Marks the counting allocator as installed; the binary calls this at start-up.
pub fn mark_installed() {
    INSTALLED.store(true, Ordering::Relaxed);
}

/// Allocations and bytes allocated so far, over all threads; `None` when the process does not
/// run the counting allocator.
pub fn allocation_totals() -> Option<(u64, u64)> {
    INSTALLED
        .load(Ordering::Relaxed)
        .then(|| ALLOCATIONS.totals())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_over_threads() {
        static COUNTERS: ThreadCounters = ThreadCounters::new();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..1000 {
                        COUNTERS.add(1, 10);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(COUNTERS.totals(), (4000, 40_000));
    }
}
