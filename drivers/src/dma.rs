//! Memory a device reads and writes by DMA, behind a safe interface: the only
//! `unsafe` on the virtqueue path lives here.
//!
//! A [`DmaRegion`] is pages from [`Hal::dma_alloc`] that the CPU touches only
//! through atomics, never through references to plain data: the device is a
//! second writer the compiler cannot see, so every access is one it must
//! perform, whole, in program order where the caller asks for it. Offsets are
//! checked, so a mistake in a ring's arithmetic is a wrong value, not a stray
//! write. [`share`] and [`unshare`] lend a buffer's memory to the device for
//! the time a queue holds the buffer.

use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use virtio_drivers::{BufferDirection, Hal, PAGE_SIZE, PhysAddr};

/// Zeroed, page-aligned, physically contiguous memory shared with a device,
/// freed when dropped. Whoever gave the device its address must stop the
/// device using it (a device reset) before dropping it.
pub struct DmaRegion<H: Hal> {
    paddr: PhysAddr,
    vaddr: NonNull<u8>,
    pages: usize,
    _hal: PhantomData<H>,
}

impl<H: Hal> DmaRegion<H> {
    /// `pages` zeroed pages; `None` for zero pages.
    pub fn new(pages: usize) -> Option<Self> {
        if pages == 0 {
            return None;
        }
        let (paddr, vaddr) = H::dma_alloc(pages, BufferDirection::Both);
        Some(Self { paddr, vaddr, pages, _hal: PhantomData })
    }

    /// The length in bytes.
    fn bytes(&self) -> usize {
        self.pages * PAGE_SIZE
    }

    /// The device's address of the byte at `offset`.
    pub fn paddr(&self, offset: usize) -> PhysAddr {
        self.paddr + offset as PhysAddr
    }

    /// The atomic of type `A` at `offset`, if it lies wholly inside the region
    /// and is aligned to its size.
    fn cell<A>(&self, offset: usize) -> Option<&A> {
        let size = size_of::<A>();
        let inside = offset.checked_add(size).is_some_and(|end| end <= self.bytes());
        if !inside || !offset.is_multiple_of(size) {
            debug_assert!(false, "DMA access of {size} bytes at {offset} outside a {}-byte region", self.bytes());
            return None;
        }
        // SAFETY:
        // 1. In bounds: `offset + size <= len`, checked above, and `dma_alloc`
        //    gave `len` bytes at `vaddr`.
        // 2. Aligned: `vaddr` is page-aligned (`dma_alloc`'s contract) and
        //    `offset` a multiple of `size`, which for the atomics used here
        //    equals their alignment.
        // 3. Live: the memory is freed only in `drop`, and the reference
        //    borrows `self`.
        // 4. No data race in Rust's sense: the region is only ever accessed
        //    through atomics (here, and by the device, which as a concurrent
        //    writer is what atomics are for); no `&`/`&mut` to plain data in
        //    it is ever made. Zeroed memory is a valid atomic integer.
        Some(unsafe { &*self.vaddr.as_ptr().add(offset).cast::<A>() })
    }

    pub fn load16(&self, offset: usize, order: Ordering) -> u16 {
        self.cell::<AtomicU16>(offset).map_or(0, |c| c.load(order))
    }

    pub fn store16(&self, offset: usize, value: u16, order: Ordering) {
        if let Some(c) = self.cell::<AtomicU16>(offset) {
            c.store(value, order);
        }
    }

    pub fn load32(&self, offset: usize, order: Ordering) -> u32 {
        self.cell::<AtomicU32>(offset).map_or(0, |c| c.load(order))
    }

    pub fn store32(&self, offset: usize, value: u32, order: Ordering) {
        if let Some(c) = self.cell::<AtomicU32>(offset) {
            c.store(value, order);
        }
    }

    pub fn store64(&self, offset: usize, value: u64, order: Ordering) {
        if let Some(c) = self.cell::<AtomicU64>(offset) {
            c.store(value, order);
        }
    }
}

impl<H: Hal> Drop for DmaRegion<H> {
    fn drop(&mut self) {
        // SAFETY: `paddr`, `vaddr` and `pages` are what `dma_alloc` returned
        // and was given, and this is the only place that frees them.
        let _ = unsafe { H::dma_dealloc(self.paddr, self.vaddr, self.pages) };
    }
}

/// Lends `buf` to the device; the address it is to use (`None` for an empty
/// buffer, which has none). The caller keeps the buffer untouched and alive
/// until [`unshare`].
pub fn share<H: Hal>(buf: &mut [u8], direction: BufferDirection) -> Option<PhysAddr> {
    if buf.is_empty() {
        return None;
    }
    // SAFETY: `buf` is a valid, non-empty range (checked above), and the
    // `&mut` borrow keeps anything else from touching it during the call.
    Some(unsafe { H::share(NonNull::from(buf), direction) })
}

/// Takes `buf` back from the device (a HAL with bounce buffers copies the
/// device's writes into it here).
pub fn unshare<H: Hal>(paddr: PhysAddr, buf: &mut [u8], direction: BufferDirection) {
    if buf.is_empty() {
        return;
    }
    // SAFETY: as in `share`; `paddr` is what `share` returned for this same
    // buffer (the queue keeps the two together).
    unsafe { H::unshare(paddr, NonNull::from(buf), direction) }
}
