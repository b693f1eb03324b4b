//! The 82576's descriptor rings, in its advanced formats: the one-buffer
//! receive descriptor of §7.1 (SRRCTL.DESCTYPE 001b) and the transmit
//! data descriptor of §7.2.2.3.
//!
//! Why advanced on both sides. Receive: the 82576 reads a receive
//! descriptor in the format SRRCTL names, and QEMU's igb model implements
//! only the advanced one, so it is the format that works on both. Transmit:
//! the legacy descriptor (§7.2.2.1) would do on the real device, but QEMU's
//! model leaves legacy transmit descriptors unimplemented (a to-do in its
//! igb_core.c), and Linux's igb, the driver both are tested against, sends
//! only advanced data descriptors. No context descriptor
//! is needed: no offload is asked for (RoCE's ICRC covers the headers as
//! sent), so each frame is one data descriptor with EOP, IFCS and RS.
//!
//! The advanced receive write-back replaces the whole descriptor (the
//! buffer address included: §7.1, the write-back format), so a ring keeps
//! each slot's buffer and address itself and writes both again on every
//! post. A filled slot is recognised by DD, in the write-back's
//! status/error word, which overlays the read format's header address:
//! posting writes that address as zero, so the slot reads "not done".
//!
//! A ring of `n` descriptors holds at most `n - 1` buffers: head == tail
//! means empty, so the driver never lets the tail catch the head.
//! Descriptors and buffers live in DMA memory from the HAL ([`DmaRegion`],
//! [`dma::share`]), as the e1000e's and the virtqueues' do.

use crate::dma::{self, DmaRegion};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use virtio_drivers::{BufferDirection, Hal, PAGE_SIZE, PhysAddr};

/// Bytes per descriptor, both directions.
pub const DESC_LEN: usize = 16;

// Receive descriptor, read format: packet buffer address (0..8), header
// buffer address (8..16, unused with one buffer). Write-back format: packet
// info and RSS hash (0..8), extended status (bits 19:0) and errors (bits
// 31:20) as one word (8..12), length (12..14), VLAN tag (14..16).
const RX_PKT_ADDR: usize = 0;
const RX_HDR_ADDR: usize = 8;
const RX_STATUS_ERROR: usize = 8;
const RX_LEN: usize = 12;
/// Descriptor done: the device wrote this slot back.
pub const RX_DD: u32 = 1 << 0;
/// End of packet: the last (here, only) buffer of a frame.
pub const RX_EOP: u32 = 1 << 1;
/// Errors that make a frame worthless: RXE (CRC, symbol or framing) and
/// the older frame-error bits Linux's igb also drops on (CE, SE, SEQ,
/// CXE). The checksum bits (L4E/TCPE, IPE) are left alone: checksum offload
/// is off, and the layers above check what they need.
pub const RX_ERR_FATAL: u32 = 1 << 24 | 1 << 25 | 1 << 26 | 1 << 28 | 1 << 31;

// Transmit data descriptor, advanced (§7.2.2.3), read format: buffer
// address (0..8), command/type/length (8..12: length 15:0, DTYP 23:20,
// DCMD 31:24), offload info and status (12..16: STA 3:0, PAYLEN 31:14).
// Write-back: DD in STA, the rest as written.
const TX_ADDR: usize = 0;
const TX_CMD_TYPE_LEN: usize = 8;
const TX_OLINFO_STATUS: usize = 12;
/// Data descriptor type, and the commands: end of packet, insert the FCS,
/// report status (write DD back), descriptor extension (advanced format).
pub const TX_DTYP_DATA: u32 = 0b0011 << 20;
pub const TX_DCMD_EOP: u32 = 1 << 24;
pub const TX_DCMD_IFCS: u32 = 1 << 25;
pub const TX_DCMD_RS: u32 = 1 << 27;
pub const TX_DCMD_DEXT: u32 = 1 << 29;
/// What every frame's descriptor carries besides its length.
pub const TX_CMD: u32 = TX_DTYP_DATA | TX_DCMD_EOP | TX_DCMD_IFCS | TX_DCMD_RS | TX_DCMD_DEXT;
/// Where the frame's length goes again, for the device's own accounting.
pub const TX_PAYLEN_SHIFT: u32 = 14;
/// Status: descriptor done.
pub const TX_DD: u32 = 1 << 0;

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

/// A size a ring can have: at least 8 descriptors and a multiple of 8, so
/// its length is a multiple of the 128 bytes RDLEN/TDLEN want.
fn valid_size(size: u16) -> bool {
    size >= 8 && size.is_multiple_of(8)
}

/// A receive buffer the device wrote a frame into.
pub struct RxDone {
    pub buf: Box<[u8]>,
    /// The written length, clamped to zero when the buffer cannot hold it.
    pub len: usize,
    /// The write-back's status (bits 19:0) and errors (bits 31:20).
    pub status_error: u32,
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
    /// An empty ring of `size` descriptors; `None` for a size the device
    /// cannot take or without DMA memory.
    pub fn new(size: u16) -> Option<Self> {
        if !valid_size(size) {
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
        self.mem.store64(d + RX_PKT_ADDR, paddr, Ordering::Relaxed);
        // The header address doubles as the write-back's status word: zero
        // reads "not done" until the device fills the slot (the tail write,
        // later, orders it before the device looks).
        self.mem.store64(d + RX_HDR_ADDR, 0, Ordering::Release);
        if let Some(slot) = self.slots.get_mut(usize::from(self.fill)) {
            *slot = Some((buf, paddr));
        }
        self.fill = self.next(self.fill);
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
        let status_error = self.mem.load32(d + RX_STATUS_ERROR, Ordering::Acquire);
        if status_error & RX_DD == 0 {
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
        if status_error & RX_EOP == 0 {
            self.faults.chained += 1;
        }
        Some(RxDone { buf, len, status_error })
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
            self.mem.store64(self.desc(i) + RX_HDR_ADDR, 0, Ordering::Relaxed);
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
        if !valid_size(size) {
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
        let len = u32::from(len16);
        self.mem.store64(d + TX_ADDR, paddr, Ordering::Relaxed);
        self.mem.store32(d + TX_CMD_TYPE_LEN, TX_CMD | len, Ordering::Relaxed);
        // PAYLEN leaves STA (DD) zero until the device writes it back.
        self.mem.store32(d + TX_OLINFO_STATUS, len << TX_PAYLEN_SHIFT, Ordering::Release);
        if let Some(slot) = self.slots.get_mut(usize::from(self.tail)) {
            *slot = Some((buf, paddr));
        }
        self.tail = self.next(self.tail);
        self.in_flight += 1;
        Ok(())
    }

    /// Whether the oldest queued frame is still not done (a hang suspect).
    pub fn oldest_pending(&self) -> bool {
        self.in_flight > 0 && !self.done(self.clean)
    }

    fn done(&self, i: u16) -> bool {
        self.mem.load32(self.desc(i) + TX_OLINFO_STATUS, Ordering::Acquire) & TX_DD != 0
    }

    /// The buffer of the oldest frame if the device is done with it.
    pub fn reclaim(&mut self) -> Option<Box<[u8]>> {
        if self.in_flight == 0 || !self.done(self.clean) {
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
