//! A split virtqueue (virtio 1.2 §2.7) that owns the buffers the device holds.
//!
//! One descriptor per buffer: a buffer pushed moves into the queue and comes
//! back from [`VirtQueue::pop`] when the device has used it, so nothing can
//! touch it while the device may, and a used entry naming a descriptor the
//! device does not hold is noticed (and counted) instead of trusted.
//!
//! Or a chain (§2.7.5, VIRTQ_DESC_F_NEXT; [`VirtQueue::push_chain`]): one owned
//! buffer, pieces of which the device reads, with memory outside it between
//! them ([`TxSegment`]s, which the queue never owns: zero-copy transmit). The
//! whole chain is held under its head's id and comes back as that one buffer;
//! the ids of the rest are the queue's own record, not read back from the
//! descriptors the device could have written.
//!
//! Notifications both ways are the caller's decision, made once per burst:
//! - to the device (§2.7.10): [`VirtQueue::kick`] rings its doorbell for the
//!   buffers pushed since the last call only if the device asked to be told
//!   (with VIRTIO_F_EVENT_IDX: its `avail_event` is among them; a device still
//!   working through the ring finds them by itself);
//! - from the device (§2.7.7): [`VirtQueue::enable_interrupts`] asks for an
//!   interrupt at the next used buffer, [`VirtQueue::disable_interrupts`] for
//!   none (a queue the driver reclaims on every pass anyway).
//!
//! The rings live in one [`DmaRegion`] laid out as legacy devices require
//! (§2.7.2), which modern ones accept as well. Indices are published with a
//! release store after the entries they cover and read with an acquire load
//! before the entries they cover, as the device does on its side.
//!
//! No `unsafe` here: the rings are reached through [`DmaRegion`]'s checked
//! accessors, the buffers through [`dma::share`].
#![forbid(unsafe_code)]

use crate::dma::{self, DmaRegion};
use crate::nic::{MAX_PARTS, TxSegment};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ops::Range;
use core::sync::atomic::{Ordering, fence};
use virtio_drivers::transport::Transport;
use virtio_drivers::{BufferDirection, Error, Hal, PAGE_SIZE, PhysAddr};

/// Descriptor flags (§2.7.5): the chain goes on at `next`; the device writes
/// the buffer (else reads it).
const DESC_F_NEXT: u16 = 1;
const DESC_F_WRITE: u16 = 2;
/// `avail.flags` without EVENT_IDX: no used-buffer interrupts (§2.7.7).
const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// `used.flags` without EVENT_IDX: the device needs no doorbell (§2.7.10).
const USED_F_NO_NOTIFY: u16 = 1;
/// How far ahead of the used buffers taken `used_event` goes to mean "no
/// interrupts": half the index space, the farthest the device's wrapping
/// comparison can see (it interrupts when its index crosses `used_event`).
const NEVER: u16 = 0x8000;

/// Where each part of the rings is in the region (§2.7.5, 2.7.6, 2.7.8).
#[derive(Clone, Copy, Debug)]
struct Layout {
    size: usize,
    /// The available ring: `flags`, `idx`, `ring[size]`, `used_event`.
    avail: usize,
    /// The used ring, page-aligned: `flags`, `idx`, `ring[size]` of
    /// (`id`: u32, `len`: u32), `avail_event`.
    used: usize,
    pages: usize,
}

impl Layout {
    fn new(size: usize) -> Self {
        let avail = 16 * size;
        let used = (avail + 6 + 2 * size).next_multiple_of(PAGE_SIZE);
        let pages = (used + 6 + 8 * size).div_ceil(PAGE_SIZE);
        Self { size, avail, used, pages }
    }

    fn desc(&self, id: u16) -> usize {
        16 * usize::from(id)
    }

    fn avail_flags(&self) -> usize {
        self.avail
    }

    fn avail_idx(&self) -> usize {
        self.avail + 2
    }

    fn avail_ring(&self, idx: u16) -> usize {
        self.avail + 4 + 2 * self.slot(idx)
    }

    fn used_event(&self) -> usize {
        self.avail + 4 + 2 * self.size
    }

    fn used_flags(&self) -> usize {
        self.used
    }

    fn used_idx(&self) -> usize {
        self.used + 2
    }

    fn used_elem(&self, idx: u16) -> usize {
        self.used + 4 + 8 * self.slot(idx)
    }

    fn avail_event(&self) -> usize {
        self.used + 4 + 8 * self.size
    }

    /// A ring position's slot: sizes are powers of two, so the free-running
    /// 16-bit index wraps onto the ring evenly.
    fn slot(&self, idx: u16) -> usize {
        usize::from(idx) & (self.size - 1)
    }
}

/// The bytes a chain part names.
fn part_len(p: &ChainPart) -> usize {
    match p {
        ChainPart::Own(r) => r.len(),
        ChainPart::Segment(s) => s.len(),
    }
}

/// `vring_need_event` (§2.7.7, 2.7.10): whether an index moving from `old` to
/// `new` passed `event`, i.e. `event` is in `[old, new)`, wrapping.
pub fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

/// Device mistakes a queue noticed. None of them is trusted: each is counted
/// and the entry dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Used entries naming a descriptor the device does not hold (out of
    /// range, or already returned): skipped.
    pub bad_id: u64,
    /// Used entries claiming more bytes written than the buffer has: the
    /// buffer comes back with `written: None`.
    pub bad_len: u64,
    /// The used index ran more than the queue's size ahead of the entries
    /// taken: the ring cannot be read any more, and the queue stops.
    pub bad_idx: u64,
}

/// A buffer the device has used.
pub struct Used {
    pub buf: Box<[u8]>,
    /// Bytes the device wrote into it, from the start; `None` when it
    /// claimed more than the buffer was given as.
    pub written: Option<usize>,
}

/// A buffer the device holds, with what it was given: its first `len`
/// bytes shared at `paddr`, and the ids of the chain's descriptors after the
/// head.
struct Held {
    buf: Box<[u8]>,
    paddr: PhysAddr,
    len: usize,
    direction: BufferDirection,
    rest: [u16; MAX_PARTS - 1],
    rest_len: usize,
}

/// One piece of a chain the device reads ([`VirtQueue::push_chain`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainPart {
    /// These bytes of the chain's own buffer.
    Own(Range<usize>),
    /// Memory outside the queue.
    Segment(TxSegment),
}

/// A split virtqueue of `size` one-descriptor buffers. Reset the device
/// before dropping it: the device has the rings' and buffers' addresses.
pub struct VirtQueue<H: Hal> {
    mem: DmaRegion<H>,
    layout: Layout,
    queue: u16,
    event_idx: bool,
    /// The buffers the device holds, by descriptor id.
    held: Vec<Option<Held>>,
    /// Descriptor ids not in use.
    free: Vec<u16>,
    /// Our `avail.idx`: buffers pushed, wrapping. The device could write the
    /// ring's copy; this one is the truth.
    avail_idx: u16,
    /// `avail_idx` when the last doorbell decision was made.
    told: u16,
    /// Used entries taken, wrapping.
    last_used: u16,
    /// Set when the device broke the used ring's rules beyond repair.
    broken: bool,
    faults: Faults,
}

impl<H: Hal> VirtQueue<H> {
    /// Sets up queue `queue` with `size` entries (a power of two the device
    /// supports) and gives the device its rings. `event_idx`: whether
    /// VIRTIO_F_EVENT_IDX was negotiated.
    pub fn new<T: Transport>(transport: &mut T, queue: u16, size: u16, event_idx: bool) -> Result<Self, Error> {
        if transport.queue_used(queue) {
            return Err(Error::AlreadyUsed);
        }
        if !size.is_power_of_two() || u32::from(size) > transport.max_queue_size(queue) {
            return Err(Error::InvalidParam);
        }
        let layout = Layout::new(usize::from(size));
        let mem = DmaRegion::new(layout.pages).ok_or(Error::DmaError)?;
        transport.queue_set(queue, size.into(), mem.paddr(0), mem.paddr(layout.avail), mem.paddr(layout.used));
        let mut q = Self {
            mem,
            layout,
            queue,
            event_idx,
            held: (0..size).map(|_| None).collect(),
            free: (0..size).rev().collect(),
            avail_idx: 0,
            told: 0,
            last_used: 0,
            broken: false,
            faults: Faults::default(),
        };
        // Used buffers interrupt until told otherwise (`used_event` 0 in
        // zeroed memory asks for the first one).
        q.enable_interrupts();
        Ok(q)
    }

    pub fn size(&self) -> usize {
        self.layout.size
    }

    /// Buffers that can be pushed now.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    pub fn faults(&self) -> Faults {
        self.faults
    }

    /// Hands the first `len` bytes of `buf` to the device, which reads them
    /// (`DriverToDevice`) or writes them. Gives the buffer back when the queue
    /// is full, `len` is 0 or beyond the buffer, or the queue is broken.
    pub fn push(&mut self, buf: Box<[u8]>, len: usize, direction: BufferDirection) -> Result<(), Box<[u8]>> {
        if len == 0 {
            return Err(buf);
        }
        self.push_parts(buf, &[ChainPart::Own(0..len)], direction)
    }

    /// Hands the device a chain it reads, in order: pieces of `buf` and
    /// segments of memory outside it (at most [`MAX_PARTS`] in all, none
    /// empty, each at most 4 GiB; at least one piece of `buf`). Gives the
    /// buffer back, nothing queued, when the queue lacks that many free
    /// descriptors, a part is refused, or the queue is broken.
    pub fn push_chain(&mut self, buf: Box<[u8]>, parts: &[ChainPart]) -> Result<(), Box<[u8]>> {
        self.push_parts(buf, parts, BufferDirection::DriverToDevice)
    }

    fn push_parts(
        &mut self,
        mut buf: Box<[u8]>,
        parts: &[ChainPart],
        direction: BufferDirection,
    ) -> Result<(), Box<[u8]>> {
        let own_end = parts.iter().try_fold(0usize, |end, p| match p {
            ChainPart::Own(r) if r.start < r.end && r.end <= buf.len() => Some(end.max(r.end)),
            ChainPart::Segment(s) if !s.is_empty() => Some(end),
            _ => None,
        });
        let lens_fit = parts.iter().all(|p| u32::try_from(part_len(p)).is_ok());
        let Some(own_end) = own_end.filter(|&e| e > 0 && lens_fit) else { return Err(buf) };
        if self.broken || parts.is_empty() || parts.len() > MAX_PARTS || self.free.len() < parts.len() {
            return Err(buf);
        }
        let Some(paddr) = buf.get_mut(..own_end).and_then(|b| dma::share::<H>(b, direction)) else {
            return Err(buf);
        };
        let mut ids = [0u16; MAX_PARTS];
        for id in ids.iter_mut().take(parts.len()) {
            *id = self.free.pop().unwrap_or_default();
        }
        let write = if direction == BufferDirection::DriverToDevice { 0 } else { DESC_F_WRITE };
        for (i, part) in parts.iter().enumerate() {
            let (addr, len) = match part {
                ChainPart::Own(r) => (paddr + r.start as PhysAddr, r.len()),
                ChainPart::Segment(s) => (s.paddr(), s.len()),
            };
            let next = ids.get(i + 1).copied().filter(|_| i + 1 < parts.len());
            let flags = write | if next.is_some() { DESC_F_NEXT } else { 0 };
            let d = self.layout.desc(ids[i]);
            self.mem.store64(d, addr, Ordering::Relaxed);
            // `len`, `flags` and `next` (§2.7.5, little-endian) in one store:
            // under emulation every store to the ring is a costly one.
            let word = u64::from(len as u32) | u64::from(flags) << 32 | u64::from(next.unwrap_or(0)) << 48;
            self.mem.store64(d + 8, word.to_le(), Ordering::Relaxed);
        }
        let head = ids[0];
        self.mem.store16(self.layout.avail_ring(self.avail_idx), head, Ordering::Relaxed);
        self.avail_idx = self.avail_idx.wrapping_add(1);
        // Published at once, not at the kick: a device still working through
        // the ring takes it without a doorbell. The release store orders the
        // descriptor and ring writes above before it (§2.7.13.3).
        self.mem.store16(self.layout.avail_idx(), self.avail_idx, Ordering::Release);
        let mut rest = [0u16; MAX_PARTS - 1];
        rest.iter_mut().zip(&ids[1..parts.len()]).for_each(|(r, &id)| *r = id);
        if let Some(slot) = self.held.get_mut(usize::from(head)) {
            *slot = Some(Held { buf, paddr, len: own_end, direction, rest, rest_len: parts.len() - 1 });
        }
        Ok(())
    }

    /// The next buffer the device has used, skipping (and counting) entries
    /// that name no buffer it holds.
    pub fn pop(&mut self) -> Option<Used> {
        while !self.broken {
            // Acquire: the entries the device wrote before publishing its
            // index are visible once the index is.
            let used_idx = self.mem.load16(self.layout.used_idx(), Ordering::Acquire);
            let pending = used_idx.wrapping_sub(self.last_used);
            if pending == 0 {
                return None;
            }
            if usize::from(pending) > self.layout.size {
                // More used entries than the ring has slots: which of them
                // are real cannot be told.
                self.faults.bad_idx += 1;
                self.broken = true;
                return None;
            }
            let e = self.layout.used_elem(self.last_used);
            let id = self.mem.load32(e, Ordering::Relaxed);
            let written = self.mem.load32(e + 4, Ordering::Relaxed);
            self.last_used = self.last_used.wrapping_add(1);
            let id = u16::try_from(id).ok().filter(|&i| usize::from(i) < self.layout.size);
            let Some((id, mut held)) = id.and_then(|i| Some((i, self.held.get_mut(usize::from(i))?.take()?))) else {
                self.faults.bad_id += 1;
                continue;
            };
            self.free.push(id);
            self.free.extend(held.rest.iter().take(held.rest_len));
            if let Some(b) = held.buf.get_mut(..held.len) {
                dma::unshare::<H>(held.paddr, b, held.direction);
            }
            let written = usize::try_from(written).ok().filter(|&n| n <= held.len);
            if written.is_none() {
                self.faults.bad_len += 1;
            }
            return Some(Used { buf: held.buf, written });
        }
        None
    }

    /// Whether the device has used buffers not popped yet.
    pub fn has_used(&self) -> bool {
        !self.broken && self.mem.load16(self.layout.used_idx(), Ordering::Acquire) != self.last_used
    }

    /// Rings the device's doorbell if it asked to be told about the buffers
    /// pushed since the last call (§2.7.10); whether it did. Call once per
    /// burst: a doorbell is a trap into the device model.
    pub fn kick<T: Transport>(&mut self, transport: &mut T) -> bool {
        let (old, new) = (self.told, self.avail_idx);
        if old == new {
            return false;
        }
        self.told = new;
        // The device writes its answer after reading `avail.idx`; our store
        // of the index must be visible before we read the answer, a
        // store-then-load order only a full fence gives (Linux's virtio_mb).
        fence(Ordering::SeqCst);
        let asked = if self.event_idx {
            need_event(self.mem.load16(self.layout.avail_event(), Ordering::Relaxed), new, old)
        } else {
            self.mem.load16(self.layout.used_flags(), Ordering::Relaxed) & USED_F_NO_NOTIFY == 0
        };
        if asked {
            transport.notify(self.queue);
        }
        asked
    }

    /// Asks for an interrupt when the device next uses a buffer (§2.7.7).
    /// Returns whether it already has: one used before the device saw the
    /// request raised none, so the caller looks again instead of waiting.
    pub fn enable_interrupts(&mut self) -> bool {
        if self.event_idx {
            self.mem.store16(self.layout.used_event(), self.last_used, Ordering::Relaxed);
        } else {
            self.mem.store16(self.layout.avail_flags(), 0, Ordering::Relaxed);
        }
        // The request must be visible before we look at the used index
        // again (store then load: a full fence).
        fence(Ordering::SeqCst);
        self.has_used()
    }

    /// Asks for no interrupts for used buffers (§2.7.7). With EVENT_IDX this
    /// holds for the next 32768 of them: call it again after taking them.
    pub fn disable_interrupts(&mut self) {
        if self.event_idx {
            self.mem.store16(self.layout.used_event(), self.last_used.wrapping_add(NEVER), Ordering::Relaxed);
        } else {
            self.mem.store16(self.layout.avail_flags(), AVAIL_F_NO_INTERRUPT, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{DeviceQueue, FakeHal, FakeTransport, State};
    use alloc::rc::Rc;
    use alloc::vec;
    use core::cell::RefCell;

    const TO_DEVICE: BufferDirection = BufferDirection::DriverToDevice;
    const FROM_DEVICE: BufferDirection = BufferDirection::DeviceToDriver;

    /// A `size`-entry queue 0 and the device's side of it.
    fn queue(size: u16, event_idx: bool) -> (VirtQueue<FakeHal>, DeviceQueue, FakeTransport) {
        let state = Rc::new(RefCell::new(State { max_queue_size: 256, ..State::default() }));
        let mut t = FakeTransport { state: state.clone() };
        let q = VirtQueue::new(&mut t, 0, size, event_idx).expect("queue");
        let addrs = state.borrow().queues[0].expect("queue set");
        (q, DeviceQueue::new(addrs), t)
    }

    fn buf(fill: u8, len: usize) -> Box<[u8]> {
        vec![fill; len].into_boxed_slice()
    }

    fn notified(t: &FakeTransport) -> u32 {
        t.state.borrow().notified[0]
    }

    #[test]
    fn need_event_is_a_wrapping_window() {
        assert!(need_event(5, 6, 5));
        assert!(!need_event(6, 6, 5));
        assert!(!need_event(4, 6, 5));
        assert!(need_event(0xffff, 2, 0xfffe), "window across the wrap");
        assert!(need_event(1, 2, 0xfffe));
        assert!(!need_event(2, 2, 0xfffe));
        assert!(!need_event(7, 7, 7), "no buffers, no event");
    }

    #[test]
    fn layout_is_the_legacy_one() {
        let l = Layout::new(256);
        assert_eq!((l.avail, l.used_event(), l.used, l.avail_event()), (4096, 4096 + 516, 8192, 8192 + 2052));
        assert_eq!(l.pages, 3);
    }

    #[test]
    fn refuses_bad_sizes_and_reuse() {
        let state = Rc::new(RefCell::new(State { max_queue_size: 8, ..State::default() }));
        let mut t = FakeTransport { state };
        assert_eq!(VirtQueue::<FakeHal>::new(&mut t, 0, 16, true).err(), Some(Error::InvalidParam));
        assert_eq!(VirtQueue::<FakeHal>::new(&mut t, 0, 6, true).err(), Some(Error::InvalidParam));
        let _q = VirtQueue::<FakeHal>::new(&mut t, 0, 8, true).expect("queue");
        assert_eq!(VirtQueue::<FakeHal>::new(&mut t, 0, 8, true).err(), Some(Error::AlreadyUsed));
    }

    #[test]
    fn buffers_go_round_the_ring_and_the_index_wraps() {
        let (mut q, mut dev, _t) = queue(4, true);
        // 70000 buffers through a 4-entry ring: the ring wraps every 4, the
        // 16-bit indices once.
        for i in 0..70_000u32 {
            let n = (i % 3) as usize + 1;
            let fill = i as u8;
            q.push(buf(fill, 8), n, TO_DEVICE).expect("room");
            let d = dev.take().expect("published");
            assert_eq!(dev.read(&d), vec![fill; n]);
            assert_eq!(d.flags, 0, "device-readable");
            dev.complete(u32::from(d.id), 0, true);
            let used = q.pop().expect("used");
            assert_eq!((used.buf.len(), used.buf[0], used.written), (8, fill, Some(0)));
            assert!(q.pop().is_none());
        }
        assert_eq!(q.free(), 4);
        assert_eq!(q.faults(), Faults::default());
    }

    #[test]
    fn full_queue_gives_the_buffer_back() {
        let (mut q, mut dev, _t) = queue(4, true);
        for _ in 0..4 {
            q.push(buf(1, 4), 4, FROM_DEVICE).expect("room");
        }
        assert_eq!(q.free(), 0);
        let back = q.push(buf(9, 4), 4, FROM_DEVICE).expect_err("full");
        assert_eq!(back[0], 9);
        assert!(q.push(buf(0, 4), 0, FROM_DEVICE).is_err(), "empty");
        assert!(q.push(buf(0, 4), 5, FROM_DEVICE).is_err(), "beyond the buffer");
        // Out of order completion is fine.
        let ds: Vec<_> = core::iter::from_fn(|| dev.take()).collect();
        assert_eq!(ds.len(), 4);
        assert!(ds.iter().all(|d| d.flags & DESC_F_WRITE != 0));
        dev.write(&ds[2], &[7, 7]);
        dev.complete(u32::from(ds[2].id), 2, true);
        let used = q.pop().expect("used");
        assert_eq!((&used.buf[..], used.written), (&[7, 7, 1, 1][..], Some(2)));
        assert_eq!(q.free(), 1);
    }

    #[test]
    fn doorbell_only_when_the_device_asked() {
        let (mut q, mut dev, mut t) = queue(16, true);
        assert!(!q.kick(&mut t), "nothing pushed");
        // avail_event 0 (the device waits for entry 0): the first burst kicks once.
        for _ in 0..5 {
            q.push(buf(0, 4), 4, TO_DEVICE).expect("room");
        }
        assert!(q.kick(&mut t));
        assert_eq!(notified(&t), 1);
        assert!(!q.kick(&mut t), "nothing new");
        // The device works through two and says it will look again on its
        // own until entry 7: buffers 5 and 6 need no doorbell...
        dev.take();
        dev.take();
        dev.set_avail_event(7);
        q.push(buf(0, 4), 4, TO_DEVICE).expect("room");
        q.push(buf(0, 4), 4, TO_DEVICE).expect("room");
        assert!(!q.kick(&mut t));
        // ...entry 7 does, once, however many come in the same burst.
        for _ in 0..3 {
            q.push(buf(0, 4), 4, TO_DEVICE).expect("room");
        }
        assert!(q.kick(&mut t));
        assert_eq!(notified(&t), 2);
        // A device that is behind (avail_event already passed) is not rung.
        dev.set_avail_event(3);
        q.push(buf(0, 4), 4, TO_DEVICE).expect("room");
        assert!(!q.kick(&mut t));
        assert_eq!(notified(&t), 2);
    }

    #[test]
    fn doorbell_without_event_idx_follows_the_flag() {
        let (mut q, dev, mut t) = queue(8, false);
        q.push(buf(0, 4), 4, TO_DEVICE).expect("room");
        assert!(q.kick(&mut t));
        dev.set_used_flags(USED_F_NO_NOTIFY);
        q.push(buf(0, 4), 4, TO_DEVICE).expect("room");
        assert!(!q.kick(&mut t));
        dev.set_used_flags(0);
        q.push(buf(0, 4), 4, TO_DEVICE).expect("room");
        assert!(q.kick(&mut t));
        assert_eq!(notified(&t), 2);
    }

    #[test]
    fn interrupts_off_stay_off_and_on_come_once() {
        let (mut q, mut dev, _t) = queue(8, true);
        // Off: none for many completions, re-armed after each reclaim.
        q.disable_interrupts();
        for _ in 0..40 {
            for _ in 0..8 {
                q.push(buf(0, 4), 4, TO_DEVICE).expect("room");
            }
            while let Some(d) = dev.take() {
                dev.complete(u32::from(d.id), 0, true);
            }
            while q.pop().is_some() {}
            q.disable_interrupts();
        }
        assert_eq!(dev.interrupts, 0);
        // On: one interrupt for the next used buffer, none for the rest of
        // the burst that follows it.
        assert!(!q.enable_interrupts());
        for _ in 0..3 {
            q.push(buf(0, 4), 4, FROM_DEVICE).expect("room");
        }
        for _ in 0..3 {
            let d = dev.take().expect("buffer");
            dev.complete(u32::from(d.id), 4, true);
        }
        assert_eq!(dev.interrupts, 1);
        // One used after we caught up but before we asked: reported, so the
        // caller takes it instead of waiting for an interrupt.
        while q.pop().is_some() {}
        q.push(buf(0, 4), 4, FROM_DEVICE).expect("room");
        let d = dev.take().expect("buffer");
        dev.complete(u32::from(d.id), 4, true);
        assert!(q.enable_interrupts());
    }

    #[test]
    fn interrupt_flag_without_event_idx() {
        let (mut q, dev, _t) = queue(8, false);
        assert_eq!(dev.avail_flags(), 0);
        q.disable_interrupts();
        assert_eq!(dev.avail_flags(), AVAIL_F_NO_INTERRUPT);
        assert!(!q.enable_interrupts());
        assert_eq!(dev.avail_flags(), 0);
    }

    #[test]
    fn lying_device_ids_are_counted_and_skipped() {
        let (mut q, mut dev, _t) = queue(8, true);
        q.push(buf(3, 4), 4, FROM_DEVICE).expect("room");
        let d = dev.take().expect("buffer");
        dev.complete(8, 4, true); // out of range
        dev.complete(u32::MAX, 4, true); // far out of range
        dev.complete(5, 4, true); // in range, never given
        dev.complete(u32::from(d.id), 4, true);
        dev.complete(u32::from(d.id), 4, true); // the same one twice
        let used = q.pop().expect("the real one");
        assert_eq!(used.written, Some(4));
        assert!(q.pop().is_none());
        assert_eq!(q.faults(), Faults { bad_id: 4, ..Faults::default() });
        assert_eq!(q.free(), 8);
    }

    #[test]
    fn lying_device_lengths_are_counted() {
        let (mut q, mut dev, _t) = queue(8, true);
        q.push(buf(0, 16), 10, FROM_DEVICE).expect("room");
        let d = dev.take().expect("buffer");
        assert_eq!(d.len, 10);
        dev.complete(u32::from(d.id), 11, true);
        let used = q.pop().expect("buffer back");
        assert_eq!((used.buf.len(), used.written), (16, None));
        assert_eq!(q.faults().bad_len, 1);
    }

    fn segment(bytes: &[u8]) -> ChainPart {
        ChainPart::Segment(crate::fake::segment(bytes))
    }

    #[test]
    fn chains_are_read_in_order_and_come_back_whole() {
        let (mut q, mut dev, _t) = queue(16, true);
        let outside: Vec<u8> = (0..200u8).collect();
        // Many times round the ring, chains of 2 to 8 descriptors.
        for i in 0..3000usize {
            let n = 2 + i % 7;
            let mut parts = vec![ChainPart::Own(0..10)];
            for k in 0..n - 2 {
                parts.push(segment(&outside[k * 20..k * 20 + 13]));
            }
            parts.push(ChainPart::Own(10..14));
            let mut own = buf(0, 32);
            own[..14].copy_from_slice(&[i as u8; 14]);
            own[10..14].copy_from_slice(&[0xEE; 4]);
            q.push_chain(own, &parts).expect("room");
            assert_eq!(q.free(), 16 - n);
            let chain = dev.take_chain().expect("published");
            assert_eq!(chain.len(), n);
            assert!(chain.iter().all(|d| d.flags & DESC_F_WRITE == 0), "device-readable");
            let mut want = vec![i as u8; 10];
            for k in 0..n - 2 {
                want.extend_from_slice(&outside[k * 20..k * 20 + 13]);
            }
            want.extend_from_slice(&[0xEE; 4]);
            assert_eq!(dev.read_chain(&chain), want, "chain {i}");
            dev.complete(u32::from(chain[0].id), 0, true);
            let used = q.pop().expect("used");
            assert_eq!((used.buf.len(), used.buf[0]), (32, i as u8), "the chain's own buffer back");
            assert_eq!(q.free(), 16, "every descriptor of the chain freed");
        }
        assert_eq!(q.faults(), Faults::default());
    }

    #[test]
    fn chains_that_cannot_be_queued_give_the_buffer_back() {
        let (mut q, mut dev, _t) = queue(4, true);
        let outside = [7u8; 8];
        let three = [ChainPart::Own(0..4), segment(&outside), ChainPart::Own(4..8)];
        q.push_chain(buf(1, 8), &three).expect("room");
        let back = q.push_chain(buf(2, 8), &three).expect_err("one descriptor left");
        assert_eq!((back[0], q.free()), (2, 1));
        let refused: [&[ChainPart]; 5] = [
            &[],
            &[segment(&outside)],
            &[ChainPart::Own(0..4), segment(&outside[..0])],
            &[ChainPart::Own(4..9)],
            &[ChainPart::Own(2..2)],
        ];
        for parts in refused {
            assert!(q.push_chain(buf(3, 8), parts).is_err(), "{parts:?}");
        }
        let nine: Vec<ChainPart> = (0..9).map(|_| ChainPart::Own(0..1)).collect();
        let (mut big, _, _) = queue(16, true);
        assert!(big.push_chain(buf(0, 8), &nine).is_err(), "more than MAX_PARTS");
        assert_eq!(q.free(), 1, "nothing taken by the refusals");
        // The device sends the first; a device naming a chain's middle id is lying.
        let chain = dev.take_chain().expect("chain");
        dev.complete(u32::from(chain[1].id), 0, true);
        dev.complete(u32::from(chain[0].id), 0, true);
        assert!(q.pop().is_some());
        assert_eq!((q.faults().bad_id, q.free()), (1, 4));
    }

    #[test]
    fn lying_used_index_breaks_the_queue_without_panic() {
        let (mut q, dev, _t) = queue(8, true);
        q.push(buf(0, 4), 4, FROM_DEVICE).expect("room");
        dev.publish_used(9); // nine used, in an eight-entry ring
        assert!(q.pop().is_none());
        assert!(q.pop().is_none());
        assert!(!q.has_used());
        assert!(!q.enable_interrupts(), "a broken queue has nothing to look at");
        assert_eq!(q.faults().bad_idx, 1);
        assert!(q.push(buf(0, 4), 4, FROM_DEVICE).is_err(), "stopped");
    }
}
