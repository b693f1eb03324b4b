//! Physical memory, page tables and the heap, set up from the boot memory map.

pub mod frames;
pub mod heap;
pub mod paging;

use boot::{BootInfo, MemoryKind};

/// Heap share of the free memory at boot; the rest stays as frames for DMA.
const HEAP_SHARE_PERCENT: u64 = 50;
const HEAP_MIN: u64 = 4 << 20;
const HEAP_MAX: u64 = 1 << 30;

/// Frames, then the kernel's own page tables, then the heap carved from frames.
pub fn init(info: &BootInfo) {
    frames::init(info);
    paging::init(info);
    let free = frames::stats().free;
    let size = (free * HEAP_SHARE_PERCENT / 100).clamp(HEAP_MIN, HEAP_MAX) & !((2 << 20) - 1);
    match frames::carve_heap(size) {
        Ok(range) => heap::init(range),
        Err(e) => crate::fatal!("no memory for a {} MiB heap: {e:?}", size >> 20),
    }
}

/// Total RAM the memory map reports.
pub fn ram_bytes(info: &BootInfo) -> u64 {
    info.memory_map.iter().filter(|r| r.kind == MemoryKind::Usable).map(|r| r.end - r.start).sum()
}
