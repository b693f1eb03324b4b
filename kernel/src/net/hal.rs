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
