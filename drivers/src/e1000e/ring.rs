//! The 82574's descriptor rings, in its legacy formats: the receive
//! descriptor of §7.1.4 and the transmit data descriptor of §7.2.10.
//!
//! Why legacy, not the extended (receive) and context/data (transmit)
//! formats: the extended receive descriptor's additions are the RSS hash
//! and packet split, and the data descriptor's are TSO and checksum
//! contexts; this appliance uses none (one queue; RoCE's ICRC covers the
//! headers as sent, so no offload touches them). The legacy formats keep
//! the buffer address in place when the device writes back, so a ring is
//! an array of 16-byte slots the device fills in, and a filled one is
//! recognised by its DD bit.
//!
//! A ring of `n` descriptors holds at most `n - 1` buffers: head == tail
//! means empty (§7.1.8), so the driver never lets the tail catch the head.
//! Descriptors and buffers live in DMA memory from the HAL ([`DmaRegion`],
//! [`dma::share`]), as the virtqueues' do.

use crate::dma::{self, DmaRegion};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use virtio_drivers::{BufferDirection, Hal, PAGE_SIZE, PhysAddr};

/// Bytes per descriptor, both directions.
pub const DESC_LEN: usize = 16;

// Receive descriptor (§7.1.4): buffer address (0..8), length (8..10),
// packet checksum (10..12), status (12), errors (13), VLAN tag (14..16).
const RX_ADDR: usize = 0;
const RX_LEN: usize = 8;
/// Status and errors, read together as one little-endian u16.
const RX_STATUS: usize = 12;
/// Descriptor done: the device wrote this slot back.
pub const RX_DD: u8 = 1 << 0;
/// End of packet: the last (here, only) buffer of a frame.
pub const RX_EOP: u8 = 1 << 1;
/// Errors that make a frame worthless: CRC/alignment (CE), symbol (SE),
/// sequence (SEQ), RX data error (RXE). The checksum error bits (TCPE,
/// IPE) are left alone: checksum offload is off, and the layers above
/// check what they need.
pub const RX_ERR_FATAL: u8 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 7;

// Transmit data descriptor, legacy (§7.2.10): buffer address (0..8),
// length (8..10), checksum offset (10), command (11), status (12),
// checksum start (13), special (14..16).
const TX_ADDR: usize = 0;
/// Length, CSO and command, written together as one u32.
const TX_LEN_CMD: usize = 8;
const TX_STATUS: usize = 12;
/// Command: end of packet, insert the FCS, report status (write DD back).
pub const TX_CMD_EOP: u8 = 1 << 0;
pub const TX_CMD_IFCS: u8 = 1 << 1;
pub const TX_CMD_RS: u8 = 1 << 3;
/// Status: descriptor done.
pub const TX_DD: u8 = 1 << 0;

/// What a ring caught the device getting wrong.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingFaults {
    /// A written length longer than the buffer, or zero.
    pub bad_len: u64,
    /// A frame spread over several buffers (never asked for: each buffer
    /// takes the largest frame the receiver admits).
    pub chained: u64,
}

fn ring_pages(size: u16) -> usize {
    (usize::from(size) * DESC_LEN).div_ceil(PAGE_SIZE)
}

/// A receive buffer the device wrote a frame into.
pub struct RxDone {
    pub buf: Box<[u8]>,
    pub len: usize,
    pub status: u8,
    pub errors: u8,
}

/// The receive ring: `size` slots, the buffers posted in them, and where
/// the driver takes (`clean`) and gives (`fill`, the tail it tells the
/// device).
pub struct RxRing<H: Hal> {
    mem: DmaRegion<H>,
    size: u16,
    slots: Vec<Option<(Box<[u8]>, PhysAddr)>>,
    clean: u16,
    fill: u16,
    posted: u16,
    faults: RingFaults,
}

impl<H: Hal> RxRing<H> {
    /// An empty ring of `size` descriptors (a multiple of 8, so its length
    /// is a multiple of the 128 bytes RDLEN wants); `None` if it is not.
    pub fn new(size: u16) -> Option<Self> {
        if size < 8 || !size.is_multiple_of(8) {
            return None;
        }
        let mem = DmaRegion::new(ring_pages(size))?;
        let slots = (0..size).map(|_| None).collect();
        Some(Self { mem, size, slots, clean: 0, fill: 0, posted: 0, faults: RingFaults::default() })
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

    fn next(&self, i: u16) -> u16 {
        if i + 1 == self.size { 0 } else { i + 1 }
    }

    /// Posts `buf` in the next slot; gives it back if the ring is full.
    pub fn post(&mut self, mut buf: Box<[u8]>) -> Result<(), Box<[u8]>> {
        if !self.has_room() {
            return Err(buf);
        }
        let Some(paddr) = dma::share::<H>(&mut buf, BufferDirection::DeviceToDriver) else { return Err(buf) };
        let d = self.desc(self.fill);
        self.mem.store64(d + RX_ADDR, paddr, Ordering::Relaxed);
        // Length, checksum, status, errors, special: all the device's to
        // write; the status must read "not done" before the device sees the
        // slot (the tail write, later, orders it).
        self.mem.store32(d + RX_LEN, 0, Ordering::Relaxed);
        self.mem.store32(d + RX_STATUS, 0, Ordering::Release);
        if let Some(slot) = self.slots.get_mut(usize::from(self.fill)) {
            *slot = Some((buf, paddr));
        }
        self.fill = self.next(self.fill);
        self.posted += 1;
        Ok(())
    }

    /// The next buffer the device wrote back, if any: taken out of the ring
    /// whatever it holds (the caller judges status and errors). A length the
    /// buffer cannot hold is clamped and counted.
    pub fn pop(&mut self) -> Option<RxDone> {
        if self.posted == 0 {
            return None;
        }
        let d = self.desc(self.clean);
        let [status, errors] = self.mem.load16(d + RX_STATUS, Ordering::Acquire).to_le_bytes();
        if status & RX_DD == 0 {
            return None;
        }
        let written = usize::from(self.mem.load16(d + RX_LEN, Ordering::Relaxed));
        let (mut buf, paddr) = self.slots.get_mut(usize::from(self.clean))?.take()?;
        dma::unshare::<H>(paddr, &mut buf, BufferDirection::DeviceToDriver);
        self.clean = self.next(self.clean);
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
        Some(RxDone { buf, len, status, errors })
    }

    /// Takes every posted buffer back (the device must be stopped or reset
    /// first) and empties the ring, indices back at zero as after a reset.
    pub fn drain(&mut self) -> Vec<Box<[u8]>> {
        let mut bufs = Vec::new();
        for (mut buf, paddr) in self.slots.iter_mut().filter_map(Option::take) {
            dma::unshare::<H>(paddr, &mut buf, BufferDirection::DeviceToDriver);
            bufs.push(buf);
        }
        for i in 0..self.size {
            self.mem.store32(self.desc(i) + RX_STATUS, 0, Ordering::Relaxed);
        }
        (self.clean, self.fill, self.posted) = (0, 0, 0);
        bufs
    }
}

/// The transmit ring: frames queued at `tail` (told to the device at the
/// next doorbell), reclaimed from `clean` as the device marks them done.
pub struct TxRing<H: Hal> {
    mem: DmaRegion<H>,
    size: u16,
    slots: Vec<Option<(Box<[u8]>, PhysAddr)>>,
    clean: u16,
    tail: u16,
    in_flight: u16,
}

impl<H: Hal> TxRing<H> {
    /// An empty ring of `size` descriptors (a multiple of 8).
    pub fn new(size: u16) -> Option<Self> {
        if size < 8 || !size.is_multiple_of(8) {
            return None;
        }
        let mem = DmaRegion::new(ring_pages(size))?;
        let slots = (0..size).map(|_| None).collect();
        Some(Self { mem, size, slots, clean: 0, tail: 0, in_flight: 0 })
    }

    pub fn base(&self) -> PhysAddr {
        self.mem.paddr(0)
    }

    pub fn len_bytes(&self) -> u32 {
        u32::from(self.size) * DESC_LEN as u32
    }

    pub fn tail(&self) -> u16 {
        self.tail
    }

    /// Frames queued and not yet reclaimed.
    pub fn in_flight(&self) -> u16 {
        self.in_flight
    }

    /// Frames that can still be queued.
    pub fn free(&self) -> usize {
        usize::from(self.size - 1 - self.in_flight)
    }

    fn desc(&self, i: u16) -> usize {
        usize::from(i) * DESC_LEN
    }

    fn next(&self, i: u16) -> u16 {
        if i + 1 == self.size { 0 } else { i + 1 }
    }

    /// Queues the first `len` bytes of `buf` as one frame; gives the buffer
    /// back if the ring is full or `len` does not fit a descriptor.
    pub fn push(&mut self, mut buf: Box<[u8]>, len: usize) -> Result<(), Box<[u8]>> {
        let Ok(len16) = u16::try_from(len) else { return Err(buf) };
        if self.free() == 0 || len == 0 || len > buf.len() {
            return Err(buf);
        }
        let Some(paddr) = dma::share::<H>(&mut buf, BufferDirection::DriverToDevice) else { return Err(buf) };
        let d = self.desc(self.tail);
        let cmd = TX_CMD_EOP | TX_CMD_IFCS | TX_CMD_RS;
        self.mem.store64(d + TX_ADDR, paddr, Ordering::Relaxed);
        self.mem.store32(d + TX_LEN_CMD, u32::from(len16) | u32::from(cmd) << 24, Ordering::Relaxed);
        self.mem.store32(d + TX_STATUS, 0, Ordering::Release);
        if let Some(slot) = self.slots.get_mut(usize::from(self.tail)) {
            *slot = Some((buf, paddr));
        }
        self.tail = self.next(self.tail);
        self.in_flight += 1;
        Ok(())
    }

    /// Whether the oldest queued frame is still not done (a hang suspect).
    pub fn oldest_pending(&self) -> bool {
        self.in_flight > 0 && self.status(self.clean) & TX_DD == 0
    }

    fn status(&self, i: u16) -> u8 {
        self.mem.load16(self.desc(i) + TX_STATUS, Ordering::Acquire).to_le_bytes()[0]
    }

    /// The buffer of the oldest frame if the device is done with it.
    pub fn reclaim(&mut self) -> Option<Box<[u8]>> {
        if self.in_flight == 0 || self.status(self.clean) & TX_DD == 0 {
            return None;
        }
        let (mut buf, paddr) = self.slots.get_mut(usize::from(self.clean))?.take()?;
        dma::unshare::<H>(paddr, &mut buf, BufferDirection::DriverToDevice);
        self.clean = self.next(self.clean);
        self.in_flight -= 1;
        Some(buf)
    }

    /// Takes every queued buffer back, sent or not (after a reset), and
    /// empties the ring; how many were never sent is for the caller to
    /// count from `in_flight` beforehand.
    pub fn drain(&mut self) -> Vec<Box<[u8]>> {
        let mut bufs = Vec::new();
        for (mut buf, paddr) in self.slots.iter_mut().filter_map(Option::take) {
            dma::unshare::<H>(paddr, &mut buf, BufferDirection::DriverToDevice);
            bufs.push(buf);
        }
        (self.clean, self.tail, self.in_flight) = (0, 0, 0);
        bufs
    }
}
