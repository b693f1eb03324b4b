//! An Intel NIC's BAR0 (82574 or 82576) as [`Regs`]: volatile 32-bit
//! accesses into an uncached window, the drivers' only `unsafe` outside
//! their DMA memory ([`crate::dma`]). Offsets are checked, so a mistake in
//! a driver reads zero or writes nothing rather than touching memory
//! outside the window. The kernel maps an MSI-X table through it too.

use super::regs::Regs;
use core::ptr::NonNull;

/// A mapped register window.
pub struct Mmio {
    base: NonNull<u32>,
    len: usize,
}

impl Mmio {
    /// The window of `len` bytes at `base`.
    ///
    /// # Safety
    ///
    /// `base..base + len` must be the device's register BAR, mapped uncached
    /// for as long as the `Mmio` lives, and used by nothing else (the
    /// driver owning the `Mmio` is the device's only driver).
    pub unsafe fn new(base: NonNull<u8>, len: usize) -> Self {
        Self { base: base.cast(), len }
    }

    /// The `T`-wide register or field at `offset` (32 or 16 bits), if it lies
    /// inside the window and is aligned to its width.
    fn field<T>(&self, offset: u32) -> Option<*mut T> {
        let (offset, width) = (offset as usize, core::mem::size_of::<T>());
        if !offset.is_multiple_of(width) || offset.checked_add(width).is_none_or(|end| end > self.len) {
            debug_assert!(false, "{width}-byte field {offset:#x} outside a {:#x}-byte window", self.len);
            return None;
        }
        // SAFETY: `offset` bytes past `base` is inside the window (checked
        // above), which `new`'s caller promised is mapped.
        Some(unsafe { self.base.as_ptr().cast::<u8>().add(offset).cast::<T>() })
    }

    /// A 16-bit read (zero outside the window), as [`Regs::read`].
    pub fn read16(&self, offset: u32) -> u16 {
        // SAFETY: as in `Regs::read`, on an aligned halfword of the window.
        self.field::<u16>(offset).map_or(0, |r| unsafe { r.read_volatile() })
    }

    /// A 16-bit write (nothing outside the window), as [`Regs::write`].
    pub fn write16(&mut self, offset: u32, value: u16) {
        if let Some(r) = self.field::<u16>(offset) {
            core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
            // SAFETY: as in `Regs::write`, on an aligned halfword of the window.
            unsafe { r.write_volatile(value) }
        }
    }
}

impl Regs for Mmio {
    fn read(&self, offset: u32) -> u32 {
        // SAFETY: an aligned register inside the mapped window (`field`); a
        // volatile read is what a device register needs (it may change, and
        // reading may have an effect, so it must happen exactly once).
        self.field::<u32>(offset).map_or(0, |r| unsafe { r.read_volatile() })
    }

    fn write(&mut self, offset: u32, value: u32) {
        if let Some(r) = self.field::<u32>(offset) {
            // Descriptors written before a doorbell must be visible to the
            // device when it rings: keep the compiler (and on weaker
            // orderings the CPU) from moving them past the register write.
            core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
            // SAFETY: as in `read`; the driver owns the device, so no one
            // else's register state is changed.
            unsafe { r.write_volatile(value) }
        }
    }
}
