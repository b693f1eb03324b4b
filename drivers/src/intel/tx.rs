//! The transmit ring both Intel drivers use, in either controller's
//! descriptor format ([`Format`]): frames queued at the tail (told to the
//! device at the next doorbell) and reclaimed in order as the device
//! finishes them.
//!
//! A frame is a chain (82574 §7.2, 82576 §7.2.2.3: a packet may span
//! several data descriptors): an optional context descriptor, written only
//! when the checksum offsets differ from the context the device holds (it
//! keeps the last one; none after a reset), then one data descriptor per
//! buffer, the last asking for status (RS). Only that one gets DD written
//! back, and the whole chain is reclaimed when it has: a device that marks
//! another descriptor done reclaims nothing, and reclaim stops at the
//! first frame not done, so a frame is never taken back past an unfinished
//! one. A frame needing more descriptors than are free is refused whole,
//! its buffers left with the caller.
//!
//! A part is either one of the driver's buffers or a [`TxSegment`] of memory
//! outside the driver (zero-copy transmit): its descriptor takes the
//! segment's address, and its slot holds no buffer, so reclaim and drain give
//! back only the driver's own. Neither controller asks a transmit buffer for
//! an alignment, and a data descriptor takes up to 64 KiB - 1.
//!
//! A ring of `n` descriptors holds at most `n - 1` (head == tail means
//! empty). Descriptors and buffers live in DMA memory from the HAL
//! ([`DmaRegion`], [`dma::share`]).
#![forbid(unsafe_code)]

use super::desc::{DESC_LEN, Format, Insert, TX_DD, TX_STATUS, TxData};
use super::ring::{next, pages, valid_size};
use crate::csum::{Layout, TxChecksum};
use crate::dma::{self, DmaRegion};
use crate::nic::{MAX_PARTS, TxSegment};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::marker::PhantomData;
use core::sync::atomic::Ordering;
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

/// The offsets a context descriptor gives the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxContext {
    pub layout: Layout,
    pub want: TxChecksum,
}

impl TxContext {
    /// The checksums a data descriptor asks the device to insert under
    /// this context (POPTS): the IPv4 header's if asked, the L4 one where
    /// the layout found it.
    fn insert(&self) -> Insert {
        Insert { ipv4: self.want.ipv4, l4: self.layout.l4.is_some() }
    }
}

/// One piece of a frame to send.
pub enum TxPart {
    /// The first `len` bytes of a driver buffer, taken (`None` left behind)
    /// when the frame is queued.
    Buf { buf: Option<Box<[u8]>>, len: usize },
    /// Memory outside the driver, which the device reads where it lies.
    Segment(TxSegment),
}

impl TxPart {
    /// The bytes it adds to the frame.
    fn len(&self) -> usize {
        match self {
            TxPart::Buf { len, .. } => *len,
            TxPart::Segment(s) => s.len(),
        }
    }

    /// Whether a descriptor can take it: not empty, within a descriptor's
    /// length field, a buffer long enough.
    fn fits(&self) -> bool {
        let len = self.len();
        let buf_ok = match self {
            TxPart::Buf { buf, len } => buf.as_ref().is_some_and(|b| *len <= b.len()),
            TxPart::Segment(_) => true,
        };
        len > 0 && len <= 0xffff && buf_ok
    }

    /// Its driver buffer, if it has one.
    pub fn take_buf(&mut self) -> Option<Box<[u8]>> {
        match self {
            TxPart::Buf { buf, .. } => buf.take(),
            TxPart::Segment(_) => None,
        }
    }
}

/// The transmit ring: frames queued at `tail` (told to the device at the
/// next doorbell), reclaimed from `clean` as the device marks each one's
/// last descriptor done.
pub struct TxRing<H: Hal, F: Format> {
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
    _format: PhantomData<F>,
}

impl<H: Hal, F: Format> TxRing<H, F> {
    /// An empty ring of `size` descriptors (a multiple of 8).
    pub fn new(size: u16) -> Option<Self> {
        if !valid_size(size) {
            return None;
        }
        let mem = DmaRegion::new(pages(size))?;
        let slots = (0..size).map(|_| None).collect();
        let frames = VecDeque::with_capacity(usize::from(size));
        Some(Self { mem, size, slots, clean: 0, tail: 0, used: 0, frames, context: None, _format: PhantomData })
    }

    /// The ring's address and length in bytes, for TDBA and TDLEN.
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

    /// Queues `parts` as one frame, the device computing the checksums
    /// `ctx` names (a context descriptor first when the device holds
    /// another). False, every buffer left in `parts`, when the ring lacks
    /// room or a part is empty, longer than its buffer or than a descriptor
    /// takes, or the frame longer than the format's length field.
    pub fn push(&mut self, parts: &mut [TxPart], ctx: Option<TxContext>) -> bool {
        if parts.is_empty() || parts.len() > MAX_PARTS || !parts.iter().all(TxPart::fits) {
            return false;
        }
        let total: usize = parts.iter().map(TxPart::len).sum();
        let new_ctx = ctx.filter(|c| self.context != Some(*c));
        if total > F::MAX_FRAME_LEN || self.free() < parts.len() + usize::from(new_ctx.is_some()) {
            return false;
        }
        let mut addrs = [0 as PhysAddr; MAX_PARTS];
        for i in 0..parts.len() {
            let shared = match &mut parts[i] {
                TxPart::Buf { buf, .. } => {
                    buf.as_mut().and_then(|b| dma::share::<H>(b, BufferDirection::DriverToDevice))
                }
                TxPart::Segment(s) => Some(s.paddr()),
            };
            let Some(paddr) = shared else {
                for (p, &a) in parts.iter_mut().zip(&addrs).take(i) {
                    if let TxPart::Buf { buf: Some(b), .. } = p {
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
        let insert = ctx.map(|c| c.insert());
        let last = parts.len() - 1;
        let mut eop_at = self.tail;
        for (i, (part, &paddr)) in parts.iter_mut().zip(&addrs).enumerate() {
            let data =
                TxData { len: part.len() as u32, first: i == 0, last: i == last, frame_len: total as u32, insert };
            let [cmd, status] = F::data(data);
            let d = self.desc(self.tail);
            self.mem.store64(d, paddr, Ordering::Relaxed);
            self.mem.store32(d + 8, cmd, Ordering::Relaxed);
            // The status dword last (DD clear until written back).
            self.mem.store32(d + TX_STATUS, status, Ordering::Release);
            // A segment's slot stays empty: nothing of the driver's to reclaim.
            if let Some(slot) = self.slots.get_mut(usize::from(self.tail)) {
                *slot = part.take_buf().map(|buf| (buf, paddr));
            }
            eop_at = self.tail;
            self.tail = next(self.tail, self.size);
            count += 1;
        }
        self.used += count;
        self.frames.push_back((eop_at, count));
        true
    }

    /// A context descriptor at the tail, as the format packs it.
    fn write_context(&mut self, c: &TxContext) {
        let d = self.desc(self.tail);
        let [w0, w1, w2, w3] = F::context(c);
        self.mem.store32(d, w0, Ordering::Relaxed);
        self.mem.store32(d + 4, w1, Ordering::Relaxed);
        self.mem.store32(d + 8, w2, Ordering::Relaxed);
        self.mem.store32(d + TX_STATUS, w3, Ordering::Release);
        if let Some(slot) = self.slots.get_mut(usize::from(self.tail)) {
            *slot = None;
        }
        self.tail = next(self.tail, self.size);
    }

    /// Whether the oldest queued frame is still not done (a hang suspect).
    pub fn oldest_pending(&self) -> bool {
        self.frames.front().is_some_and(|&(eop, _)| !self.done(eop))
    }

    fn done(&self, i: u16) -> bool {
        self.mem.load32(self.desc(i) + TX_STATUS, Ordering::Acquire) & TX_DD != 0
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
            self.clean = next(self.clean, self.size);
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
