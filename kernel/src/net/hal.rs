//! What `virtio-drivers` needs from the kernel: DMA memory from the frame
//! allocator (identity-mapped, so physical == virtual) and PCI configuration
//! access through our port I/O.

use crate::mem::frames;
use crate::pci::CONFIG;
use core::ptr::NonNull;
use kbase::pci::{Bdf, ConfigAccess};
use virtio_drivers::transport::pci::bus::{ConfigurationAccess, DeviceFunction};
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

pub struct KernelHal;

// SAFETY: `dma_alloc` returns zeroed, page-aligned, physically contiguous frames
// that nothing else uses until `dma_dealloc`; all memory is identity-mapped, so
// the virtual address is the physical one and device and CPU see the same bytes
// (x86 DMA is cache-coherent, so `share`/`unshare` need no maintenance).
unsafe impl Hal for KernelHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        match frames::alloc_zeroed(pages as u64, 4096) {
            Ok(addr) => match NonNull::new(addr as *mut u8) {
                Some(ptr) => (addr, ptr),
                None => crate::fatal!("DMA allocation returned address 0"),
            },
            Err(e) => crate::fatal!("out of DMA memory ({pages} pages): {e:?}"),
        }
    }

    unsafe fn dma_dealloc(paddr: PhysAddr, _vaddr: NonNull<u8>, pages: usize) -> i32 {
        frames::free(paddr, pages as u64);
        0
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, _size: usize) -> NonNull<u8> {
        // BARs were identity-mapped when the bus was scanned.
        NonNull::new(paddr as *mut u8).unwrap_or(NonNull::dangling())
    }

    unsafe fn share(buffer: NonNull<[u8]>, _direction: BufferDirection) -> PhysAddr {
        buffer.as_ptr() as *mut u8 as PhysAddr
    }

    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _direction: BufferDirection) {}
}

/// Our port-I/O configuration access in the shape `virtio-drivers` asks for.
pub struct PciConfig;

fn bdf(df: DeviceFunction) -> Bdf {
    Bdf { bus: df.bus, device: df.device, function: df.function }
}

impl ConfigurationAccess for PciConfig {
    fn read_word(&self, df: DeviceFunction, offset: u8) -> u32 {
        CONFIG.read32(bdf(df), offset)
    }

    fn write_word(&mut self, df: DeviceFunction, offset: u8, data: u32) {
        CONFIG.write32(bdf(df), offset, data)
    }

    unsafe fn unsafe_clone(&self) -> Self {
        PciConfig
    }
}

/// A device's register window: BAR0 of `f` (memory, at least `len` bytes:
/// 128 KiB on the 82574 and the 82576, 256 on ivshmem), which `pci::scan`
/// mapped uncached; `None` when the BAR is not that or not mapped.
pub fn bar0_registers(f: &kbase::pci::Function, len: usize) -> Option<drivers::intel::Mmio> {
    bar_window(f, 0, 0, len as u64)
}

/// `len` bytes at `offset` into `f`'s memory BAR `bar`, which `pci::scan`
/// mapped uncached; `None` when that BAR is not a mapped memory BAR holding
/// the whole window.
pub fn bar_window(f: &kbase::pci::Function, bar: u8, offset: u32, len: u64) -> Option<drivers::intel::Mmio> {
    let Some(Some(kbase::pci::Bar::Memory { addr, size, .. })) = f.bars.get(usize::from(bar)) else {
        return None;
    };
    if len == 0 || u64::from(offset).checked_add(len)? > *size {
        return None;
    }
    let start = addr.checked_add(u64::from(offset))?;
    crate::mem::paging::translate(start)?;
    crate::mem::paging::translate(start.checked_add(len - 1)?)?;
    let base = NonNull::new(start as *mut u8)?;
    // SAFETY: `start..start + len` lies inside the function's own memory
    // BAR (checked above), identity-mapped uncached by `pci::scan` for the
    // life of the kernel at both ends; each function has one driver (a
    // NIC's probe, the ring's doorbell), so nothing else touches it.
    Some(unsafe { drivers::intel::Mmio::new(base, usize::try_from(len).ok()?) })
}

/// Lets `f` decode its memory BARs and master the bus (DMA), keeping the
/// other command bits as they are (the status half, write-1-to-clear, is
/// written as zero).
pub fn enable_bus_master(f: &kbase::pci::Function) {
    const COMMAND: u8 = 0x04;
    const MEMORY_SPACE: u32 = 1 << 1;
    const BUS_MASTER: u32 = 1 << 2;
    let cmd = CONFIG.read32(f.bdf, COMMAND) & 0xffff;
    CONFIG.write32(f.bdf, COMMAND, cmd | MEMORY_SPACE | BUS_MASTER);
}

/// `f`'s MSI-X table, in the memory BAR its capability names (BAR3 on the
/// 82574 and the 82576), which `pci::scan` mapped uncached with the
/// others; with its entry count. `None` without MSI-X, or when that BAR is
/// not a mapped memory BAR holding the whole table.
pub fn msix_table(f: &kbase::pci::Function) -> Option<(drivers::intel::Mmio, u16)> {
    let Some(kbase::pci::Capability::MsiX { table_size, table_bar, table_offset, .. }) = f.msix() else {
        return None;
    };
    let len = u64::from(kbase::msi::table::len(table_size));
    Some((bar_window(f, table_bar, table_offset, len)?, table_size))
}
