//! The component's allocator: a bump arena for the short life of one call, in front of the
//! system allocator.
//!
//! A host instantiates the component afresh for every call and drops the instance after it, so
//! the frees a call makes mostly return memory nobody will ask for again. They are not cheap:
//! in a profile of acquire/resume-check/renew/destroy lifecycles, `malloc` and `free` (wasi-libc's
//! dlmalloc) took about a fifth of the component's own time, most of it for the short-lived
//! JSON trees of the objects each call reads. The terms:
//!
//! - **region**: one contiguous range of linear memory, [`REGION_BYTES`] long, that the arena
//!   takes at its first small allocation. In the component it is zero-initialised static memory,
//!   part of the instance's initial memory: pages are only made resident when touched, and no
//!   call grows the memory for it: memory a call grows, wasmtime's pooling allocator protects
//!   again before the slot's next instance, an `mprotect` per call that flushes the TLB of every
//!   core the host runs on. It is never given back; the instance's memory goes with the
//!   instance.
//! - **small**: a layout of at most [`SMALL_BYTES`]. Only small allocations are bumped, so a
//!   command's megabytes of output keep the system allocator's reuse.
//! - **latest**: the block the region handed out last.
//!
//! The rules: a small allocation is cut from the region's free end. Freeing the latest block
//! gives its bytes back, and reallocating it grows or shrinks it in place; freeing any other
//! region block does nothing, and shrinking one leaves it where it is. Everything else (large
//! layouts, and every allocation once the region is full or could not be reserved) goes to the
//! system allocator, and a block is freed by whichever allocator it came from (its address says
//! which). A call that outgrows the region therefore still runs, reusing memory as before; only
//! its first [`REGION_BYTES`] of small allocations are never reused.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ptr;

/// The region's size: more than the small allocations of any lifecycle call (an acquire's
/// objects and their JSON trees take a few hundred KiB), a small part of an instance's memory.
pub const REGION_BYTES: usize = 4 << 20;

/// The largest layout the region serves.
pub const SMALL_BYTES: usize = 16 << 10;

/// Where the region comes from: linear memory in the component, any memory in tests.
pub trait Source {
    /// The start of `bytes` of fresh memory, aligned to at least 64 KiB; `None` when there is
    /// not that much.
    fn reserve(&self, bytes: usize) -> Option<usize>;
}

/// A bump arena over `source`, in front of `fallback` (see the module docs). Not `Sync`: one
/// arena serves one thread.
pub struct Arena<S, F> {
    source: S,
    fallback: F,
    /// Whether the source has been asked for the region (once, whatever it answered).
    asked: Cell<bool>,
    /// The region is `start..end` (empty until reserved); `next` is its free end.
    start: Cell<usize>,
    next: Cell<usize>,
    end: Cell<usize>,
    /// The start of the latest block.
    latest: Cell<usize>,
}

impl<S: Source, F: GlobalAlloc> Arena<S, F> {
    /// An arena that reserves its region from `source` at its first small allocation.
    pub const fn new(source: S, fallback: F) -> Self {
        Self {
            source,
            fallback,
            asked: Cell::new(false),
            start: Cell::new(0),
            next: Cell::new(0),
            end: Cell::new(0),
            latest: Cell::new(0),
        }
    }

    /// Whether `ptr` lies in the region.
    #[inline]
    fn owns(&self, ptr: *mut u8) -> bool {
        (self.start.get()..self.end.get()).contains(&(ptr as usize))
    }

    /// A block of the region for `layout`, when it is small and fits.
    #[inline]
    fn bump(&self, layout: Layout) -> Option<*mut u8> {
        if layout.size() > SMALL_BYTES {
            return None;
        }
        let at = self.next.get().checked_next_multiple_of(layout.align())?;
        let after = at.checked_add(layout.size())?;
        if after > self.end.get() {
            return self.reserve(layout);
        }
        self.next.set(after);
        self.latest.set(at);
        Some(at as *mut u8)
    }

    /// Reserves the region at the first small allocation, and bumps `layout` in it; nothing
    /// once the source has been asked (the region is full, or there was none).
    #[cold]
    fn reserve(&self, layout: Layout) -> Option<*mut u8> {
        if self.asked.replace(true) {
            return None;
        }
        let start = self.source.reserve(REGION_BYTES)?;
        let end = start.checked_add(REGION_BYTES)?;
        self.start.set(start);
        self.next.set(start);
        self.end.set(end);
        self.bump(layout)
    }
}

// SAFETY: a region block is handed out once, inside the region and aligned as asked, and its
// bytes are only handed out again after the block was freed as the latest one (when nothing
// else points into them); every other block comes from and goes back to `fallback`.
unsafe impl<S: Source, F: GlobalAlloc> GlobalAlloc for Arena<S, F> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(block) => block,
            // SAFETY: the caller's layout, passed on.
            None => unsafe { self.fallback.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.owns(ptr) {
            // SAFETY: not the region's, so the fallback's, with this layout.
            return unsafe { self.fallback.dealloc(ptr, layout) };
        }
        if self.latest.get() == ptr as usize {
            self.next.set(ptr as usize);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.owns(ptr) {
            // SAFETY: the fallback's block, passed on with its layout.
            return unsafe { self.fallback.realloc(ptr, layout, new_size) };
        }
        let at = ptr as usize;
        if self.latest.get() == at
            && new_size <= SMALL_BYTES
            && let Some(after) = at.checked_add(new_size).filter(|after| *after <= self.end.get())
        {
            self.next.set(after);
            return ptr;
        }
        // Any other region block keeps its place when it shrinks: its tail is never reused.
        if new_size <= layout.size() {
            return ptr;
        }
        // SAFETY: `realloc`'s contract makes this a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a fresh block for the new layout; the old one stays valid until freed.
        let moved = unsafe { self.alloc(new_layout) };
        if !moved.is_null() {
            // SAFETY: two distinct live blocks, each at least this long.
            unsafe {
                ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        moved
    }
}

/// The component's allocator: the arena over linear memory, in front of wasi-libc's `malloc`.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
mod component {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::UnsafeCell;

    use super::{Arena, REGION_BYTES, Source};

    /// The region's bytes, zero-initialised static memory: part of the instance's initial
    /// linear memory, so no call grows the memory for it.
    #[repr(C, align(65536))]
    struct Region(UnsafeCell<[u8; REGION_BYTES]>);

    // SAFETY: only its address is taken, by the one-thread arena below.
    unsafe impl Sync for Region {}

    static REGION: Region = Region(UnsafeCell::new([0; REGION_BYTES]));

    /// The static region.
    struct StaticRegion;

    impl Source for StaticRegion {
        fn reserve(&self, bytes: usize) -> Option<usize> {
            (bytes <= REGION_BYTES).then(|| REGION.0.get() as usize)
        }
    }

    /// The arena as the global allocator: a wasm32 instance without the atomics feature runs
    /// one thread, so its state is never touched from two at once.
    struct OneThread(Arena<StaticRegion, System>);

    // SAFETY: see `OneThread`.
    unsafe impl Sync for OneThread {}

    // SAFETY: every method passes its arguments to the arena's, which upholds the contract.
    // Not inlined: every drop in the provider frees, and the arena's checks inlined into each
    // added a fifth to the component's code.
    unsafe impl GlobalAlloc for OneThread {
        #[inline(never)]
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            unsafe { self.0.alloc(layout) }
        }

        #[inline(never)]
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { self.0.dealloc(ptr, layout) }
        }

        #[inline(never)]
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            unsafe { self.0.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: OneThread = OneThread(Arena::new(StaticRegion, System));
}

#[cfg(test)]
mod tests;
