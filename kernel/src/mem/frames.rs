//! The physical frame allocator: the boot memory map's usable RAM minus the
//! first MiB and the image, handed out in 4 KiB frames or contiguous runs.

use boot::{BootInfo, MemoryKind};
use kbase::frames::{FRAME_SIZE, FrameError, FrameRanges};
use spin::Mutex;
use x86_64::PhysAddr;
use x86_64::structures::paging::{FrameAllocator, PhysFrame, Size4KiB};

static FRAMES: Mutex<Option<FrameRanges>> = Mutex::new(None);

/// Below 1 MiB live the BIOS data, the VGA hole and option ROMs: never handed out.
const LOW_MEMORY: u64 = 1 << 20;

pub fn init(info: &BootInfo) {
    let usable = info.memory_map.iter().filter(|r| r.kind == MemoryKind::Usable).map(|r| r.start..r.end);
    let ranges = FrameRanges::new(usable, &[0..LOW_MEMORY, info.image.clone()]);
    *FRAMES.lock() = Some(ranges);
}

fn with<R>(f: impl FnOnce(&mut FrameRanges) -> R) -> R {
    let mut guard = FRAMES.lock();
    match guard.as_mut() {
        Some(ranges) => f(ranges),
        None => crate::fatal!("frame allocator used before init"),
    }
}

/// Allocates `count` contiguous, zeroed frames aligned to `align` bytes.
pub fn alloc_zeroed(count: u64, align: u64) -> Result<u64, FrameError> {
    let addr = with(|r| r.alloc(count, align))?;
    // SAFETY: the frames were free, so nothing else refers to them, and all RAM
    // is identity-mapped (by the boot tables, then by ours).
    unsafe { core::ptr::write_bytes(addr as *mut u8, 0, (count * FRAME_SIZE) as usize) };
    Ok(addr)
}

/// Returns frames to the allocator.
pub fn free(addr: u64, count: u64) {
    with(|r| r.free(addr, count));
}

pub(super) fn carve_heap(bytes: u64) -> Result<core::ops::Range<u64>, FrameError> {
    with(|r| r.carve_top(bytes))
}

/// Frame bookkeeping as `mem` shows it.
pub struct Stats {
    pub total: u64,
    pub free: u64,
    pub leaked: u64,
}

pub fn stats() -> Stats {
    with(|r| Stats { total: r.total_bytes(), free: r.free_bytes(), leaked: r.leaked_bytes() })
}

/// The allocator as the page-table code wants it.
pub struct PageTableFrames;

// SAFETY: every frame returned is unused, zeroed and 4 KiB aligned.
unsafe impl FrameAllocator<Size4KiB> for PageTableFrames {
    fn allocate_frame(&mut self) -> Option<PhysFrame<Size4KiB>> {
        let addr = alloc_zeroed(1, FRAME_SIZE).ok()?;
        PhysFrame::from_start_address(PhysAddr::new(addr)).ok()
    }
}
