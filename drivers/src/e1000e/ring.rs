//! The 82574's descriptor rings: the legacy receive descriptor of §7.1.3,
//! and on the transmit side (§7.2) the legacy data descriptor for frames
//! without offload, the TCP/IP context descriptor with the extended (TCP/IP)
//! data descriptor for frames whose checksums the device inserts.
//!
//! Receive stays legacy: the extended descriptor's additions are the RSS
//! hash and packet split (one queue here), and the legacy one reports the
//! checksum verdict too (status IPCS/TCPCS/UDPCS, errors IPE/TCPE, §7.1.3;
//! the checks, §7.1). The legacy formats keep the buffer address in place
//! when the device writes back, so a ring is an array of 16-byte slots the
//! device fills in, and a filled one is recognised by its DD bit.
//!
//! A transmitted frame is a chain: an optional context descriptor (written
//! only when the checksum offsets differ from the context the device holds;
//! the device keeps the last one, §7.2), then one data descriptor per
//! buffer, EOP and RS on the last. Only that one gets DD written back, and
//! the whole chain is reclaimed when it has: a device that marks another
//! descriptor done reclaims nothing.
//!
//! A ring of `n` descriptors holds at most `n - 1`: head == tail means
//! empty (§7.1.8), so the driver never lets the tail catch the head.
//! Descriptors and buffers live in DMA memory from the HAL ([`DmaRegion`],
//! [`dma::share`]), as the virtqueues' do.

use crate::csum::{Layout, TxChecksum};
use crate::dma::{self, DmaRegion};
use crate::nic::{MAX_PARTS, RxChecksum, RxVerdict};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use virtio_drivers::{BufferDirection, Hal, PAGE_SIZE, PhysAddr};

/// Bytes per descriptor, both directions.
pub const DESC_LEN: usize = 16;

// Receive descriptor (§7.1.3): buffer address (0..8), length (8..10),
// packet checksum (10..12), status (12), errors (13), VLAN tag (14..16).
const RX_ADDR: usize = 0;
const RX_LEN: usize = 8;
/// Status and errors, read together as one little-endian u16.
const RX_STATUS: usize = 12;
/// Descriptor done: the device wrote this slot back.
pub const RX_DD: u8 = 1 << 0;
/// End of packet: the last (here, only) buffer of a frame.
pub const RX_EOP: u8 = 1 << 1;
/// Status: ignore the checksum indications (IXSM), UDP checksum computed
/// (UDPCS, with TCPCS), TCP/UDP checksum computed (TCPCS), IPv4 header
/// checksum computed (IPCS) (§7.1.3, the status field).
pub const RX_IXSM: u8 = 1 << 2;
pub const RX_UDPCS: u8 = 1 << 4;
pub const RX_TCPCS: u8 = 1 << 5;
pub const RX_IPCS: u8 = 1 << 6;
/// Errors that make a frame worthless: CRC/alignment (CE), symbol (SE),
/// sequence (SEQ), RX data error (RXE). The checksum error bits are the
/// verdict's ([`verdict`]), not a fault of the frame's reception.
pub const RX_ERR_FATAL: u8 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 7;
/// Errors: TCP/UDP checksum wrong (TCPE), IPv4 header checksum wrong (IPE)
/// (§7.1.3, the errors field); meaningful only with the matching status bit.
pub const RX_ERR_TCPE: u8 = 1 << 5;
pub const RX_ERR_IPE: u8 = 1 << 6;

/// What the device found of a frame's checksums (RXCSUM on): each one
/// Unchecked unless its "computed" status bit is set (and IXSM clear), then
/// Good or Bad by its error bit.
pub fn verdict(status: u8, errors: u8) -> RxVerdict {
    let judge = |computed: u8, error: u8| match (status & RX_IXSM == 0 && status & computed != 0, errors & error != 0) {
        (false, _) => RxChecksum::Unchecked,
        (true, false) => RxChecksum::Good,
        (true, true) => RxChecksum::Bad,
    };
    RxVerdict { ipv4: judge(RX_IPCS, RX_ERR_IPE), l4: judge(RX_TCPCS, RX_ERR_TCPE) }
}

// Transmit data descriptor, legacy (§7.2): buffer address (0..8),
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

// TCP/IP context descriptor (§7.2): IPCSS (0), IPCSO (1), IPCSE
// (2..4), TUCSS (4), TUCSO (5), TUCSE (6..8), PAYLEN 19:0 / DTYP 23:20 /
// TUCMD 31:24 (8..12), STA (12), HDRLEN (13), MSS (14..16). Extended data
// descriptor (§7.2): address (0..8), DTALEN 19:0 / DTYP 23:20 / DCMD
// 31:24 (8..12), STA (12), POPTS (13), VLAN (14..16).
const CTX_IP: usize = 0;
const CTX_TU: usize = 4;
const CTX_CMD: usize = 8;
/// Descriptor types (DTYP, with DEXT): context 0000b, data 0001b.
pub const TX_DTYP_DATA: u32 = 1 << 20;
/// DEXT: the extended formats, as a bit of the command byte's dword.
pub const TX_DEXT: u32 = 1 << 29;
/// TUCMD: the L4 checksum is TCP's (else UDP's); the packet is IPv4.
pub const TX_TUCMD_TCP: u32 = 1 << 24;
pub const TX_TUCMD_IP: u32 = 1 << 25;
/// POPTS: insert the IPv4 header checksum (IXSM), the TCP/UDP one (TXSM).
pub const TX_POPTS_IXSM: u8 = 1 << 0;
pub const TX_POPTS_TXSM: u8 = 1 << 1;

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

/// The offsets a context descriptor gives the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxContext {
    pub layout: Layout,
    pub want: TxChecksum,
}

/// One buffer of a frame to send: the first `len` bytes of `buf`, taken
/// (`None` left behind) when the frame is queued.
pub struct TxPart {
    pub buf: Option<Box<[u8]>>,
    pub len: usize,
}

/// The transmit ring: frames queued at `tail` (told to the device at the
/// next doorbell), reclaimed from `clean` as the device marks each one's
/// last descriptor done.
pub struct TxRing<H: Hal> {
    mem: DmaRegion<H>,
    size: u16,
    slots: Vec<Option<(Box<[u8]>, PhysAddr)>>,
    clean: u16,
    tail: u16,
    /// Descriptors queued and not reclaimed.
    used: u16,
    /// Each queued frame's last descriptor and its descriptor count.
    frames: VecDeque<(u16, u16)>,
    /// The context the device holds (the last written; none after a reset).
    context: Option<TxContext>,
}

impl<H: Hal> TxRing<H> {
    /// An empty ring of `size` descriptors (a multiple of 8).
    pub fn new(size: u16) -> Option<Self> {
        if size < 8 || !size.is_multiple_of(8) {
            return None;
        }
        let mem = DmaRegion::new(ring_pages(size))?;
        let slots = (0..size).map(|_| None).collect();
        let frames = VecDeque::with_capacity(usize::from(size));
        Some(Self { mem, size, slots, clean: 0, tail: 0, used: 0, frames, context: None })
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
        self.frames.len() as u16
    }

    /// Descriptors that can still be queued.
    pub fn free(&self) -> usize {
        usize::from(self.size - 1 - self.used)
    }

    /// Descriptors a frame of `parts` buffers with `ctx` needs now.
    pub fn needs(&self, parts: usize, ctx: Option<&TxContext>) -> usize {
        parts + usize::from(ctx.is_some_and(|c| self.context != Some(*c)))
    }

    fn desc(&self, i: u16) -> usize {
        usize::from(i) * DESC_LEN
    }

    fn next(&self, i: u16) -> u16 {
        if i + 1 == self.size { 0 } else { i + 1 }
    }

    /// Queues `parts` as one frame, with the device computing the
    /// checksums `ctx` names (a context descriptor first when the device
    /// holds another). False, every buffer left in `parts`, when the ring
    /// lacks room or a part is empty, longer than its buffer or than a
    /// descriptor takes.
    pub fn push(&mut self, parts: &mut [TxPart], ctx: Option<TxContext>) -> bool {
        let fits = |p: &TxPart| p.len > 0 && p.len <= 0xffff && p.buf.as_ref().is_some_and(|b| p.len <= b.len());
        if parts.is_empty() || parts.len() > MAX_PARTS || !parts.iter().all(fits) {
            return false;
        }
        if self.free() < self.needs(parts.len(), ctx.as_ref()) {
            return false;
        }
        let mut addrs = [0 as PhysAddr; MAX_PARTS];
        for i in 0..parts.len() {
            let shared = parts[i].buf.as_mut().and_then(|b| dma::share::<H>(b, BufferDirection::DriverToDevice));
            let Some(paddr) = shared else {
                for (p, &a) in parts.iter_mut().zip(&addrs).take(i) {
                    if let Some(b) = p.buf.as_mut() {
                        dma::unshare::<H>(a, b, BufferDirection::DriverToDevice);
                    }
                }
                return false;
            };
            addrs[i] = paddr;
        }
        let mut count = 0u16;
        if let Some(c) = ctx.filter(|c| self.context != Some(*c)) {
            self.write_context(&c);
            self.context = Some(c);
            count += 1;
        }
        let popts = ctx.map_or(0, |c| {
            (if c.want.ipv4 { TX_POPTS_IXSM } else { 0 }) | (if c.layout.l4.is_some() { TX_POPTS_TXSM } else { 0 })
        });
        let last = parts.len() - 1;
        let mut eop_at = self.tail;
        for (i, (part, &paddr)) in parts.iter_mut().zip(&addrs).enumerate() {
            let end = if i == last { TX_CMD_EOP | TX_CMD_RS } else { 0 };
            let cmd = u32::from(TX_CMD_IFCS | end) << 24;
            let d = self.desc(self.tail);
            self.mem.store64(d + TX_ADDR, paddr, Ordering::Relaxed);
            let len = part.len as u32;
            if ctx.is_some() {
                self.mem.store32(d + TX_LEN_CMD, len | TX_DTYP_DATA | TX_DEXT | cmd, Ordering::Relaxed);
                self.mem.store32(d + TX_STATUS, u32::from(popts) << 8, Ordering::Release);
            } else {
                self.mem.store32(d + TX_LEN_CMD, len | cmd, Ordering::Relaxed);
                self.mem.store32(d + TX_STATUS, 0, Ordering::Release);
            }
            if let (Some(slot), Some(buf)) = (self.slots.get_mut(usize::from(self.tail)), part.buf.take()) {
                *slot = Some((buf, paddr));
            }
            eop_at = self.tail;
            self.tail = self.next(self.tail);
            count += 1;
        }
        self.used += count;
        self.frames.push_back((eop_at, count));
        true
    }

    /// A context descriptor at the tail (§7.2): the IPv4 header's
    /// start, checksum field and last byte; the L4 header's start and
    /// checksum field, to the end of the frame (TUCSE 0).
    fn write_context(&mut self, c: &TxContext) {
        let l = &c.layout;
        let (tucss, tucso) = l.l4.unwrap_or((0, 0));
        let ip = l.ip_start as u32 | (l.ip_csum_at() as u32) << 8 | ((l.ip_end - 1) as u32) << 16;
        let tu = tucss as u32 | (tucso as u32) << 8;
        let tcp = if l.tcp && l.l4.is_some() { TX_TUCMD_TCP } else { 0 };
        let d = self.desc(self.tail);
        self.mem.store32(d + CTX_IP, ip, Ordering::Relaxed);
        self.mem.store32(d + CTX_TU, tu, Ordering::Relaxed);
        self.mem.store32(d + CTX_CMD, TX_DEXT | TX_TUCMD_IP | tcp, Ordering::Relaxed);
        self.mem.store32(d + TX_STATUS, 0, Ordering::Release);
        if let Some(slot) = self.slots.get_mut(usize::from(self.tail)) {
            *slot = None;
        }
        self.tail = self.next(self.tail);
    }

    /// Whether the oldest queued frame is still not done (a hang suspect).
    pub fn oldest_pending(&self) -> bool {
        self.frames.front().is_some_and(|&(eop, _)| self.status(eop) & TX_DD == 0)
    }

    fn status(&self, i: u16) -> u8 {
        self.mem.load16(self.desc(i) + TX_STATUS, Ordering::Acquire).to_le_bytes()[0]
    }

    /// Takes back the buffers of the oldest frame if the device is done with
    /// it (its last descriptor written back) into `out`; whether it was.
    pub fn reclaim(&mut self, out: &mut Vec<Box<[u8]>>) -> bool {
        let Some(&(eop, count)) = self.frames.front() else { return false };
        if self.status(eop) & TX_DD == 0 {
            return false;
        }
        self.frames.pop_front();
        for _ in 0..count {
            if let Some((mut buf, paddr)) = self.slots.get_mut(usize::from(self.clean)).and_then(Option::take) {
                dma::unshare::<H>(paddr, &mut buf, BufferDirection::DriverToDevice);
                out.push(buf);
            }
            self.clean = self.next(self.clean);
        }
        self.used -= count;
        true
    }

    /// Takes every queued buffer back, sent or not (after a reset), and
    /// empties the ring, forgetting the device's context; how many frames
    /// were never sent is for the caller to count from `in_flight`
    /// beforehand.
    pub fn drain(&mut self) -> Vec<Box<[u8]>> {
        let mut bufs = Vec::new();
        for (mut buf, paddr) in self.slots.iter_mut().filter_map(Option::take) {
            dma::unshare::<H>(paddr, &mut buf, BufferDirection::DriverToDevice);
            bufs.push(buf);
        }
        (self.clean, self.tail, self.used) = (0, 0, 0);
        self.frames.clear();
        self.context = None;
        bufs
    }
}
