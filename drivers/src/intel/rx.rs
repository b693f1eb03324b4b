//! The receive ring both Intel drivers use, in either controller's
//! descriptor format ([`Format`]): buffers posted at the tail the driver
//! tells the device, taken back in order as the device writes each one
//! back (DD), lent out to the stack and posted again when they return.
//!
//! The write-back may replace the whole descriptor (the 82576's advanced
//! format does, the buffer address included), so the ring keeps each
//! slot's buffer and address itself and writes both again on every post.
//! A ring of `n` descriptors holds at most `n - 1` buffers: head == tail
//! means empty (82574 §7.1.8; the 82576 alike), so the tail never catches
//! the head. Descriptors and buffers live in DMA memory from the HAL
//! ([`DmaRegion`], [`dma::share`]), as the virtqueues' do.
#![forbid(unsafe_code)]

use super::desc::{DESC_LEN, Format, RX_DD, RX_EOP};
use super::ring::{next, pages, valid_size};
use crate::dma::{self, DmaRegion};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::marker::PhantomData;
use core::sync::atomic::Ordering;
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

/// What a ring caught the device getting wrong.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingFaults {
    /// A written length longer than the buffer, or zero.
    pub bad_len: u64,
    /// A frame spread over several buffers (never asked for: each buffer
    /// takes the largest frame the receiver admits).
    pub chained: u64,
}

/// A receive buffer the device wrote a frame into.
pub struct RxDone {
    pub buf: Box<[u8]>,
    /// The written length, clamped to zero when the buffer cannot hold it.
    pub len: usize,
    /// The write-back's status and errors, as the format lays them out
    /// (the status bits in 7:0).
    pub status: u32,
}

/// The receive ring: `size` slots, the buffers posted in them, and where
/// the driver takes (`clean`) and gives (`fill`, the tail it tells the
/// device).
pub struct RxRing<H: Hal, F: Format> {
    mem: DmaRegion<H>,
    size: u16,
    slots: Vec<Option<(Box<[u8]>, PhysAddr)>>,
    clean: u16,
    fill: u16,
    posted: u16,
    faults: RingFaults,
    _format: PhantomData<F>,
}

impl<H: Hal, F: Format> RxRing<H, F> {
    /// An empty ring of `size` descriptors; `None` for a size the device
    /// cannot take or without DMA memory.
    pub fn new(size: u16) -> Option<Self> {
        if !valid_size(size) {
            return None;
        }
        let mem = DmaRegion::new(pages(size))?;
        let slots = (0..size).map(|_| None).collect();
        let faults = RingFaults::default();
        Some(Self { mem, size, slots, clean: 0, fill: 0, posted: 0, faults, _format: PhantomData })
    }

    /// The ring's address and length in bytes, for RDBA and RDLEN.
    pub fn base(&self) -> PhysAddr {
        self.mem.paddr(0)
    }

    pub fn len_bytes(&self) -> u32 {
        u32::from(self.size) * DESC_LEN as u32
    }

    /// The tail to tell the device: one past the last buffer posted.
    pub fn tail(&self) -> u16 {
        self.fill
    }

    pub fn posted(&self) -> u16 {
        self.posted
    }

    pub fn faults(&self) -> RingFaults {
        self.faults
    }

    /// Whether another buffer fits (one slot always stays empty).
    pub fn has_room(&self) -> bool {
        self.posted < self.size - 1
    }

    fn desc(&self, i: u16) -> usize {
        usize::from(i) * DESC_LEN
    }

    /// Posts `buf` in the next slot; gives it back if the ring is full.
    pub fn post(&mut self, mut buf: Box<[u8]>) -> Result<(), Box<[u8]>> {
        if !self.has_room() {
            return Err(buf);
        }
        let Some(paddr) = dma::share::<H>(&mut buf, BufferDirection::DeviceToDriver) else { return Err(buf) };
        let d = self.desc(self.fill);
        self.mem.store64(d, paddr, Ordering::Relaxed);
        // Bytes 8..16 zero: the status reads "not done" before the device
        // sees the slot (the tail write, later, orders it).
        self.mem.store64(d + 8, 0, Ordering::Release);
        if let Some(slot) = self.slots.get_mut(usize::from(self.fill)) {
            *slot = Some((buf, paddr));
        }
        self.fill = next(self.fill, self.size);
        self.posted += 1;
        Ok(())
    }

    /// The next buffer the device wrote back, if any: taken out of the ring
    /// whatever it holds (the caller judges status and errors). A length the
    /// buffer cannot hold is clamped to zero and counted.
    pub fn pop(&mut self) -> Option<RxDone> {
        if self.posted == 0 {
            return None;
        }
        let d = self.desc(self.clean);
        let status = self.mem.load32(d + F::RX_STATUS_AT, Ordering::Acquire) & F::RX_STATUS_MASK;
        if status & RX_DD == 0 {
            return None;
        }
        let written = usize::from(self.mem.load16(d + F::RX_LEN_AT, Ordering::Relaxed));
        let (mut buf, paddr) = self.slots.get_mut(usize::from(self.clean))?.take()?;
        dma::unshare::<H>(paddr, &mut buf, BufferDirection::DeviceToDriver);
        self.clean = next(self.clean, self.size);
        self.posted -= 1;
        let len = if written == 0 || written > buf.len() {
            self.faults.bad_len += 1;
            0
        } else {
            written
        };
        if status & RX_EOP == 0 {
            self.faults.chained += 1;
        }
        Some(RxDone { buf, len, status })
    }

    /// Takes every posted buffer back (the queue must be stopped or the
    /// device reset first) and empties the ring, indices back at zero as
    /// after a reset.
    pub fn drain(&mut self) -> Vec<Box<[u8]>> {
        let mut bufs = Vec::new();
        for (mut buf, paddr) in self.slots.iter_mut().filter_map(Option::take) {
            dma::unshare::<H>(paddr, &mut buf, BufferDirection::DeviceToDriver);
            bufs.push(buf);
        }
        for i in 0..self.size {
            self.mem.store64(self.desc(i) + 8, 0, Ordering::Relaxed);
        }
        (self.clean, self.fill, self.posted) = (0, 0, 0);
        bufs
    }
}
