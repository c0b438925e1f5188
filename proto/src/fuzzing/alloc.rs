//! The counting allocator the fuzz targets and the memory test run under.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(feature = "alloc-guard")]
use super::GUARD_LIMIT;

/// A global allocator that counts live and peak bytes and refuses (so the process aborts) any
/// single allocation above its limit. Tests install it with `#[global_allocator]`.
pub struct CountingAlloc {
    live: AtomicUsize,
    peak: AtomicUsize,
    limit: usize,
}

impl CountingAlloc {
    pub const fn new(limit: usize) -> Self {
        CountingAlloc { live: AtomicUsize::new(0), peak: AtomicUsize::new(0), limit }
    }

    /// Bytes allocated and not yet freed.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Highest `live` since the last [`reset_peak`](Self::reset_peak).
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    pub fn reset_peak(&self) {
        self.peak.store(self.live(), Ordering::Relaxed);
    }

    /// Whether an allocation of `size` bytes is refused. Not while a panic is in flight: the
    /// fuzzer has found its crash then, and the panic hook's backtrace symbolizer reads debug
    /// sections of several MiB while it holds std's backtrace lock; refusing them would make the
    /// alloc-error hook wait for that same lock forever (a hang and no crash artifact, whenever
    /// RUST_BACKTRACE is set).
    fn refuses(&self, size: usize) -> bool {
        size > self.limit && !std::thread::panicking()
    }

    fn grew(&self, n: usize) {
        let now = self.live.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }
}

#[allow(unsafe_code)]
// SAFETY: nothing safe exists: a global allocator is an `unsafe trait` of std, the only way to see
// every allocation of the process. Every call is forwarded to `System` unchanged (or refused with
// a null pointer, which the trait allows); only counters are added.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.refuses(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: our caller's `alloc` contract (a non-zero-size layout), passed on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if self.refuses(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as `alloc`: the caller's layout, passed on unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with this `layout`.
        unsafe { System.dealloc(ptr, layout) };
        self.live.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if self.refuses(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: `ptr` came from `System` with `layout`; the caller's `new_size` contract holds.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
            self.grew(new_size);
        }
        p
    }
}

#[cfg(feature = "alloc-guard")]
#[global_allocator]
static GUARD: CountingAlloc = CountingAlloc::new(GUARD_LIMIT);
