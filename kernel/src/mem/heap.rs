//! The kernel heap: a linked-list allocator over a run of frames carved from the
//! memory map at boot (no large static array: a big .bss slows boot under KVM).

use core::ops::Range;
use linked_list_allocator::LockedHeap;

#[global_allocator]
static HEAP: LockedHeap = LockedHeap::empty();

pub fn init(range: Range<u64>) {
    let size = (range.end - range.start) as usize;
    // SAFETY: the range was just taken from the frame allocator, so it is unused
    // RAM, identity-mapped, and handed to the heap exactly once.
    unsafe { HEAP.lock().init(range.start as *mut u8, size) };
}

/// Heap usage as `mem` shows it.
pub struct Stats {
    pub size: usize,
    pub used: usize,
    pub free: usize,
}

pub fn stats() -> Stats {
    let heap = HEAP.lock();
    Stats { size: heap.size(), used: heap.used(), free: heap.free() }
}
