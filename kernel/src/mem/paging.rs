//! The kernel's page tables. Physical memory is identity-mapped (virtual ==
//! physical), which keeps DMA addresses trivial: RAM with write-back caching,
//! device memory (MMIO, BARs, anywhere in the 52-bit space) mapped on request
//! with the caching it needs. Page 0 stays unmapped to catch null pointers and
//! the lowest page of the boot stack is a guard page.

use super::frames::PageTableFrames;
use boot::{BootInfo, MemoryKind};
use spin::Mutex;
use x86_64::registers::control::{Cr3, Cr3Flags};
use x86_64::structures::paging::mapper::{MapToError, MapperFlush};
use x86_64::structures::paging::{
    Mapper, OffsetPageTable, Page, PageSize, PageTable, PageTableFlags as Flags, PhysFrame, Size2MiB, Size4KiB,
    Translate,
};
use x86_64::{PhysAddr, VirtAddr};

static MAPPER: Mutex<Option<OffsetPageTable<'static>>> = Mutex::new(None);

const SMALL: u64 = Size4KiB::SIZE;
const LARGE: u64 = Size2MiB::SIZE;

/// How a device region is cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caching {
    /// Registers: every access reaches the device, in order.
    Uncached,
    /// Memory behind a BAR that is really RAM (ivshmem): normal caching.
    WriteBack,
}

/// Why a mapping failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    OutOfFrames,
    /// The range wraps or leaves the physical address space.
    BadRange,
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

pub fn init(info: &BootInfo) {
    let l4_addr = match super::frames::alloc_zeroed(1, SMALL) {
        Ok(a) => a,
        Err(e) => crate::fatal!("no frame for the page table root: {e:?}"),
    };
    // SAFETY: a fresh zeroed frame, identity-mapped by the boot tables, used only
    // as this page table from now on.
    let l4 = unsafe { &mut *(l4_addr as *mut PageTable) };
    // SAFETY: all of physical memory is (and stays) mapped at offset 0.
    let mut mapper = unsafe { OffsetPageTable::new(l4, VirtAddr::new(0)) };

    let ram = Flags::PRESENT | Flags::WRITABLE;
    // The low area holds the image: small pages, so the guard page can be cut out.
    // (map_range would take a 2 MiB page wherever one fits, and an image
    // past 2 MiB then put the stack's guard page inside one.)
    let low_end = align_up(info.image.end, LARGE);
    let mapped = map_small_pages(&mut mapper, SMALL..low_end, ram, false);
    for r in info
        .memory_map
        .iter()
        .filter(|r| matches!(r.kind, MemoryKind::Usable | MemoryKind::AcpiReclaimable | MemoryKind::AcpiNvs))
    {
        let start = r.start.max(low_end);
        if start < r.end {
            let end = align_up(r.end, SMALL);
            if let Err(e) = map_range(&mut mapper, start..end, ram | Flags::NO_EXECUTE, false) {
                crate::fatal!("cannot map RAM {start:#x}..{end:#x}: {e:?}");
            }
        }
    }
    if let Err(e) = mapped {
        crate::fatal!("cannot map the image: {e:?}");
    }
    let guard = Page::<Size4KiB>::containing_address(VirtAddr::new(boot::stack_bottom()));
    match mapper.unmap(guard) {
        Ok((_, flush)) => flush.ignore(), // the new tables are not live yet
        // Without the guard a stack overflow silently overwrites what lies
        // below the stack: refuse to run like that.
        Err(e) => crate::fatal!("cannot unmap the stack guard page at {:#x}: {e:?}", boot::stack_bottom()),
    }
    // SAFETY: the new tables map the running code, stack, data and all RAM at
    // the same addresses as the boot tables did.
    unsafe { Cr3::write(PhysFrame::containing_address(PhysAddr::new(l4_addr)), Cr3Flags::empty()) };
    *MAPPER.lock() = Some(mapper);
}

/// Identity-maps `[start, end)` with 2 MiB pages where alignment allows and 4 KiB
/// pages elsewhere; pages already mapped are left as they are.
fn map_range(
    mapper: &mut OffsetPageTable<'static>,
    range: core::ops::Range<u64>,
    flags: Flags,
    live: bool,
) -> Result<(), MapError> {
    let mut addr = range.start & !(SMALL - 1);
    while addr < range.end {
        if addr.is_multiple_of(LARGE) && range.end - addr >= LARGE {
            let page = Page::<Size2MiB>::containing_address(VirtAddr::new(addr));
            let frame = PhysFrame::<Size2MiB>::containing_address(PhysAddr::new(addr));
            // SAFETY: identity mapping of memory nobody else maps elsewhere.
            let result = unsafe { mapper.map_to(page, frame, flags, &mut PageTableFrames) };
            match result {
                Ok(flush) => finish(flush, live),
                // Part of it is already mapped with small pages: fill in page by page.
                Err(MapToError::PageAlreadyMapped(_)) | Err(MapToError::ParentEntryHugePage) => {
                    map_small_pages(mapper, addr..addr + LARGE, flags, live)?;
                }
                Err(MapToError::FrameAllocationFailed) => return Err(MapError::OutOfFrames),
            }
            addr += LARGE;
        } else {
            map_small_pages(mapper, addr..addr + SMALL, flags, live)?;
            addr += SMALL;
        }
    }
    Ok(())
}

fn map_small_pages(
    mapper: &mut OffsetPageTable<'static>,
    range: core::ops::Range<u64>,
    flags: Flags,
    live: bool,
) -> Result<(), MapError> {
    for addr in (range.start..range.end).step_by(SMALL as usize) {
        if mapper.translate_addr(VirtAddr::new(addr)).is_some() {
            continue;
        }
        let page = Page::<Size4KiB>::containing_address(VirtAddr::new(addr));
        let frame = PhysFrame::<Size4KiB>::containing_address(PhysAddr::new(addr));
        // SAFETY: as in `map_range`.
        match unsafe { mapper.map_to(page, frame, flags, &mut PageTableFrames) } {
            Ok(flush) => finish(flush, live),
            Err(MapToError::FrameAllocationFailed) => return Err(MapError::OutOfFrames),
            // Covered by a large page already: nothing to do.
            Err(_) => {}
        }
    }
    Ok(())
}

fn finish<S: PageSize>(flush: MapperFlush<S>, live: bool) {
    if live { flush.flush() } else { flush.ignore() }
}

/// Identity-maps a device region (MMIO registers or a BAR) anywhere in the
/// physical address space; parts already mapped stay as they are.
pub fn map_device(phys: u64, len: u64, caching: Caching) -> Result<(), MapError> {
    let end = phys.checked_add(len).filter(|&e| e <= 1 << 52).ok_or(MapError::BadRange)?;
    let mut flags = Flags::PRESENT | Flags::WRITABLE | Flags::NO_EXECUTE;
    if caching == Caching::Uncached {
        flags |= Flags::NO_CACHE | Flags::WRITE_THROUGH;
    }
    let mut guard = MAPPER.lock();
    let mapper = guard.as_mut().ok_or(MapError::OutOfFrames)?;
    map_range(mapper, phys..align_up(end, SMALL), flags, true)
}

/// The physical address behind a virtual one, if mapped.
pub fn translate(virt: u64) -> Option<u64> {
    let guard = MAPPER.lock();
    guard.as_ref()?.translate_addr(VirtAddr::new(virt)).map(|p| p.as_u64())
}
