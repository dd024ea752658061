use std::alloc::System;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use super::*;

/// A region from the test's own heap, freed when the test ends.
struct HeapRegion {
    block: Cell<Option<*mut u8>>,
    available: bool,
    asked: Cell<usize>,
}

const REGION_LAYOUT: Layout = match Layout::from_size_align(REGION_BYTES, 64 << 10) {
    Ok(layout) => layout,
    Err(_) => panic!("the region's layout"),
};

impl HeapRegion {
    fn new(available: bool) -> Self {
        Self { block: Cell::new(None), available, asked: Cell::new(0) }
    }
}

impl Source for HeapRegion {
    fn reserve(&self, bytes: usize) -> Option<usize> {
        assert_eq!(bytes, REGION_BYTES);
        self.asked.set(self.asked.get() + 1);
        if !self.available {
            return None;
        }
        // SAFETY: a non-zero layout.
        let block = unsafe { System.alloc(REGION_LAYOUT) };
        assert!(!block.is_null());
        self.block.set(Some(block));
        Some(block as usize)
    }
}

impl Drop for HeapRegion {
    fn drop(&mut self) {
        if let Some(block) = self.block.get() {
            // SAFETY: allocated in `reserve` with this layout.
            unsafe { System.dealloc(block, REGION_LAYOUT) };
        }
    }
}

/// The system allocator, keeping the blocks it has out (address to size).
#[derive(Default)]
struct Counted {
    live: RefCell<HashMap<usize, usize>>,
    allocs: Cell<usize>,
}

unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let block = unsafe { System.alloc(layout) };
        self.allocs.set(self.allocs.get() + 1);
        self.live.borrow_mut().insert(block as usize, layout.size());
        block
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let size = self.live.borrow_mut().remove(&(ptr as usize));
        assert_eq!(size, Some(layout.size()), "a block the system allocator never gave out, or another size");
        unsafe { System.dealloc(ptr, layout) }
    }
}

type TestArena = Arena<HeapRegion, Counted>;

fn arena() -> TestArena {
    Arena::new(HeapRegion::new(true), Counted::default())
}

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

/// A block filled with `byte`.
fn filled(arena: &TestArena, layout: Layout, byte: u8) -> *mut u8 {
    let block = unsafe { arena.alloc(layout) };
    assert!(!block.is_null());
    assert_eq!(block as usize % layout.align(), 0, "aligned to {}", layout.align());
    unsafe { ptr::write_bytes(block, byte, layout.size()) };
    block
}

fn holds(block: *mut u8, len: usize, byte: u8) -> bool {
    unsafe { std::slice::from_raw_parts(block, len) }.iter().all(|b| *b == byte)
}

fn in_region(arena: &TestArena, block: *mut u8) -> bool {
    arena.owns(block)
}

#[test]
fn small_blocks_come_from_the_region_aligned_and_apart() {
    let arena = arena();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut blocks = Vec::new();
    for i in 0..2000usize {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let size = 1 + (seed as usize % 700);
        let align = 1 << ((seed >> 40) % 7);
        let byte = (i % 251) as u8;
        let l = layout(size, align);
        blocks.push((filled(&arena, l, byte), l, byte));
    }
    for (block, l, byte) in &blocks {
        assert!(in_region(&arena, *block));
        assert!(holds(*block, l.size(), *byte), "a block was overwritten by another");
    }
    assert_eq!(arena.fallback.allocs.get(), 0, "every small block came from the region");
    assert_eq!(arena.source.asked.get(), 1, "the region was reserved once");
    for (block, l, _) in blocks {
        unsafe { arena.dealloc(block, l) };
    }
}

#[test]
fn the_latest_block_is_given_back_and_grown_in_place() {
    let arena = arena();
    let first = filled(&arena, layout(24, 8), 1);
    let latest = filled(&arena, layout(40, 8), 2);
    unsafe { arena.dealloc(latest, layout(40, 8)) };
    let again = filled(&arena, layout(16, 8), 3);
    assert_eq!(again, latest, "the freed latest block's bytes are handed out again");

    let grown = unsafe { arena.realloc(again, layout(16, 8), 4000) };
    assert_eq!(grown, again, "the latest block grows where it is");
    assert!(holds(grown, 16, 3));

    let shrunk = unsafe { arena.realloc(first, layout(24, 8), 8) };
    assert_eq!(shrunk, first, "a block that shrinks stays");
    let moved = unsafe { arena.realloc(shrunk, layout(8, 8), 100) };
    assert_ne!(moved, first, "a block that is not the latest moves to grow");
    assert!(in_region(&arena, moved) && holds(moved, 8, 1));
    assert_eq!(arena.fallback.allocs.get(), 0);
}

#[test]
fn large_blocks_and_a_full_region_go_to_the_system_allocator() {
    let arena = arena();
    let small = filled(&arena, layout(64, 8), 5);
    let large = filled(&arena, layout(SMALL_BYTES + 1, 8), 6);
    assert!(!in_region(&arena, large));
    assert_eq!(arena.fallback.allocs.get(), 1);

    // A region block grown past the small limit moves out, its bytes with it.
    let moved = unsafe { arena.realloc(small, layout(64, 8), SMALL_BYTES * 2) };
    assert!(!in_region(&arena, moved) && holds(moved, 64, 5));

    let mut region_blocks = Vec::new();
    loop {
        let block = filled(&arena, layout(SMALL_BYTES, 16), 7);
        if !in_region(&arena, block) {
            unsafe { arena.dealloc(block, layout(SMALL_BYTES, 16)) };
            break;
        }
        region_blocks.push(block);
    }
    assert!(region_blocks.len() >= REGION_BYTES / SMALL_BYTES - 1, "the region was used up first");
    let after = filled(&arena, layout(8, 8), 8);
    assert!(!in_region(&arena, after), "a full region hands small blocks to the system allocator");

    unsafe {
        arena.dealloc(after, layout(8, 8));
        arena.dealloc(moved, layout(SMALL_BYTES * 2, 8));
        arena.dealloc(large, layout(SMALL_BYTES + 1, 8));
    }
    assert!(arena.fallback.live.borrow().is_empty(), "each system block went back to the system allocator");
    assert!(region_blocks.iter().all(|b| holds(*b, SMALL_BYTES, 7)));
}

#[test]
fn without_a_region_everything_is_the_system_allocator_s() {
    let arena = Arena::new(HeapRegion::new(false), Counted::default());
    let block = filled(&arena, layout(32, 8), 9);
    let grown = unsafe { arena.realloc(block, layout(32, 8), 64) };
    assert!(holds(grown, 32, 9));
    unsafe { arena.dealloc(grown, layout(64, 8)) };
    assert!(arena.fallback.live.borrow().is_empty());
    assert_eq!(arena.source.asked.get(), 1, "the source was asked once");
}
