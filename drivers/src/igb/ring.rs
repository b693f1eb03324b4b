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
//! only advanced data descriptors. A frame without offload (the RoCE
//! frames, whose checksums the rdma crate writes) is data descriptors
//! alone.
//!
//! Checksum offload and scatter-gather (§7.2.2, §7.2): a frame whose
//! checksums the device inserts is preceded by an advanced context
//! descriptor (context index 0; written only when it differs from the one
//! the device holds), and a frame of several buffers is a chain of data
//! descriptors, PAYLEN and POPTS on the first, EOP and RS on the last. Only
//! the last gets DD written back, and the whole chain is reclaimed when it
//! has: DD anywhere else reclaims nothing.
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
/// CXE). The checksum error bits are the verdict's ([`verdict`]).
pub const RX_ERR_FATAL: u32 = 1 << 24 | 1 << 25 | 1 << 26 | 1 << 28 | 1 << 31;
/// Status (§7.1, the advanced write-back): ignore the checksum
/// indications (IXSM), UDP checksum computed (UDPCS, with TCPCS), TCP/UDP
/// checksum computed (TCPCS), IPv4 header checksum computed (IPCS).
pub const RX_IXSM: u32 = 1 << 2;
pub const RX_UDPCS: u32 = 1 << 4;
pub const RX_TCPCS: u32 = 1 << 5;
pub const RX_IPCS: u32 = 1 << 6;
/// Errors: TCP/UDP checksum wrong (L4E, bit 29), IPv4 header checksum
/// wrong (IPE, bit 30); meaningful only with the matching status bit.
pub const RX_ERR_L4E: u32 = 1 << 29;
pub const RX_ERR_IPE: u32 = 1 << 30;

/// What the device found of a frame's checksums (RXCSUM on): each one
/// Unchecked unless its "computed" status bit is set (and IXSM clear), then
/// Good or Bad by its error bit.
pub fn verdict(status_error: u32) -> RxVerdict {
    let judge = |computed: u32, error: u32| match (
        status_error & RX_IXSM == 0 && status_error & computed != 0,
        status_error & error != 0,
    ) {
        (false, _) => RxChecksum::Unchecked,
        (true, false) => RxChecksum::Good,
        (true, true) => RxChecksum::Bad,
    };
    RxVerdict { ipv4: judge(RX_IPCS, RX_ERR_IPE), l4: judge(RX_TCPCS, RX_ERR_L4E) }
}

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
/// What every data descriptor carries besides its length; the last of a
/// frame adds [`TX_END`].
pub const TX_CMD: u32 = TX_DTYP_DATA | TX_DCMD_IFCS | TX_DCMD_DEXT;
pub const TX_END: u32 = TX_DCMD_EOP | TX_DCMD_RS;
/// Where the frame's length goes (first descriptor), for the device's own
/// accounting and its offloads.
pub const TX_PAYLEN_SHIFT: u32 = 14;
/// Status: descriptor done.
pub const TX_DD: u32 = 1 << 0;
/// POPTS in the first data descriptor's olinfo: insert the IPv4 header
/// checksum (IXSM), the TCP/UDP one (TXSM) (§7.2.2.3).
pub const TX_POPTS_IXSM: u32 = 1 << 8;
pub const TX_POPTS_TXSM: u32 = 1 << 9;

// Advanced context descriptor (§7.2.2): MACLEN/IPLEN/VLAN (0..4),
// reserved (4..8), TUCMD/DTYP/DEXT (8..12), MSS/L4LEN/IDX (12..16).
const CTX_LENS: usize = 0;
const CTX_TUCMD: usize = 8;
const CTX_IDX: usize = 12;
pub const CTX_IPLEN_MASK: u32 = 0x1ff;
pub const CTX_MACLEN_SHIFT: u32 = 9;
/// Context descriptor type; TUCMD: IPv4, L4 type TCP (00b is UDP).
pub const TX_DTYP_CTXT: u32 = 0b0010 << 20;
pub const TX_TUCMD_IPV4: u32 = 1 << 10;
pub const TX_TUCMD_L4T_TCP: u32 = 1 << 11;

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
    /// The context the device holds in index 0 (none after a reset).
    context: Option<TxContext>,
}

impl<H: Hal> TxRing<H> {
    /// An empty ring of `size` descriptors (a multiple of 8).
    pub fn new(size: u16) -> Option<Self> {
        if !valid_size(size) {
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

    fn desc(&self, i: u16) -> usize {
        usize::from(i) * DESC_LEN
    }

    fn next(&self, i: u16) -> u16 {
        if i + 1 == self.size { 0 } else { i + 1 }
    }

    /// Queues `parts` as one frame, the device computing the checksums
    /// `ctx` names (a context descriptor first when the device holds
    /// another). False, every buffer left in `parts`, when the ring lacks
    /// room or a part is empty, longer than its buffer, or the frame longer
    /// than PAYLEN takes.
    pub fn push(&mut self, parts: &mut [TxPart], ctx: Option<TxContext>) -> bool {
        let fits = |p: &TxPart| p.len > 0 && p.len <= 0xffff && p.buf.as_ref().is_some_and(|b| p.len <= b.len());
        if parts.is_empty() || parts.len() > MAX_PARTS || !parts.iter().all(fits) {
            return false;
        }
        let total: usize = parts.iter().map(|p| p.len).sum();
        let new_ctx = ctx.filter(|c| self.context != Some(*c));
        if total >= 1 << 18 || self.free() < parts.len() + usize::from(new_ctx.is_some()) {
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
        if let Some(c) = new_ctx {
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
            let end = if i == last { TX_END } else { 0 };
            // PAYLEN and POPTS on the first; STA (DD) zero until written back.
            let olinfo = if i == 0 { (total as u32) << TX_PAYLEN_SHIFT | popts } else { 0 };
            let d = self.desc(self.tail);
            self.mem.store64(d + TX_ADDR, paddr, Ordering::Relaxed);
            self.mem.store32(d + TX_CMD_TYPE_LEN, TX_CMD | end | part.len as u32, Ordering::Relaxed);
            self.mem.store32(d + TX_OLINFO_STATUS, olinfo, Ordering::Release);
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

    /// A context descriptor at the tail (§7.2.2): the MAC header's and
    /// the IPv4 header's lengths, IPv4, the L4 type; index 0.
    fn write_context(&mut self, c: &TxContext) {
        let l = &c.layout;
        let lens = ((l.ip_end - l.ip_start) as u32 & CTX_IPLEN_MASK) | (l.ip_start as u32) << CTX_MACLEN_SHIFT;
        let l4t = if l.tcp { TX_TUCMD_L4T_TCP } else { 0 };
        let d = self.desc(self.tail);
        self.mem.store32(d + CTX_LENS, lens, Ordering::Relaxed);
        self.mem.store32(d + 4, 0, Ordering::Relaxed);
        self.mem.store32(d + CTX_TUCMD, TX_DCMD_DEXT | TX_DTYP_CTXT | TX_TUCMD_IPV4 | l4t, Ordering::Relaxed);
        self.mem.store32(d + CTX_IDX, 0, Ordering::Release);
        if let Some(slot) = self.slots.get_mut(usize::from(self.tail)) {
            *slot = None;
        }
        self.tail = self.next(self.tail);
    }

    /// Whether the oldest queued frame is still not done (a hang suspect).
    pub fn oldest_pending(&self) -> bool {
        self.frames.front().is_some_and(|&(eop, _)| !self.done(eop))
    }

    fn done(&self, i: u16) -> bool {
        self.mem.load32(self.desc(i) + TX_OLINFO_STATUS, Ordering::Acquire) & TX_DD != 0
    }

    /// Takes back the buffers of the oldest frame if the device is done with
    /// it (its last descriptor written back) into `out`; whether it was.
    pub fn reclaim(&mut self, out: &mut Vec<Box<[u8]>>) -> bool {
        let Some(&(eop, count)) = self.frames.front() else { return false };
        if !self.done(eop) {
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
