//! The `ivshmem-plain` device's shared memory (PCI 1af4:1110, BAR2): the region
//! host programs and the firmware share the verbs rings in. The device has no
//! registers we use and raises no interrupts; the firmware polls the rings.
//!
//! This is the firmware's implementation of `verbs_ring::SharedMem`: every
//! access is by offset, checked against the region, and never through a Rust
//! reference to the bytes (the host writes them concurrently).

use core::ptr;
use core::sync::atomic::{AtomicU32, Ordering};
use verbs_ring::shm::{SharedMem, ShmError, check_range, check_u32};

/// PCI identity of the device.
pub const VENDOR: u16 = 0x1af4;
pub const DEVICE: u16 = 0x1110;
/// The BAR that holds the shared memory.
pub const MEMORY_BAR: usize = 2;

/// The mapped shared-memory BAR.
pub struct IvshmemRegion {
    base: *mut u8,
    len: usize,
}

impl IvshmemRegion {
    /// # Safety
    /// `base..base + len` must be mapped (write-back: it is host RAM), 4-byte
    /// aligned, used by nothing else in the firmware, and stay mapped for the
    /// life of the value.
    pub unsafe fn new(base: *mut u8, len: usize) -> Self {
        Self { base, len }
    }

    fn word(&self, off: usize) -> Result<&AtomicU32, ShmError> {
        check_u32(self.len, off)?;
        // SAFETY: `off + 4 <= len` and `off` is 4-byte aligned (checked), so
        // the word lies inside the mapping `new` vouches for and is aligned for
        // an AtomicU32; all firmware accesses to it are atomic.
        Ok(unsafe { AtomicU32::from_ptr(self.base.add(off).cast::<u32>()) })
    }
}

impl SharedMem for IvshmemRegion {
    fn len(&self) -> usize {
        self.len
    }

    fn load_u32_acquire(&self, off: usize) -> Result<u32, ShmError> {
        Ok(u32::from_le(self.word(off)?.load(Ordering::Acquire)))
    }

    fn store_u32_release(&self, off: usize, v: u32) -> Result<(), ShmError> {
        self.word(off)?.store(v.to_le(), Ordering::Release);
        Ok(())
    }

    fn compare_exchange_u32(&self, off: usize, current: u32, new: u32) -> Result<Result<u32, u32>, ShmError> {
        let r = self.word(off)?.compare_exchange(current.to_le(), new.to_le(), Ordering::AcqRel, Ordering::Acquire);
        Ok(r.map(u32::from_le).map_err(u32::from_le))
    }

    fn read(&self, off: usize, buf: &mut [u8]) -> Result<(), ShmError> {
        check_range(self.len, off, buf.len())?;
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: `off + i < len` (range checked above), inside the mapping;
            // a volatile byte read makes no reference to memory the host changes.
            *b = unsafe { ptr::read_volatile(self.base.add(off + i)) };
        }
        Ok(())
    }

    fn write(&self, off: usize, data: &[u8]) -> Result<(), ShmError> {
        check_range(self.len, off, data.len())?;
        for (i, b) in data.iter().enumerate() {
            // SAFETY: as in `read`, for a volatile byte write.
            unsafe { ptr::write_volatile(self.base.add(off + i), *b) };
        }
        Ok(())
    }
}
