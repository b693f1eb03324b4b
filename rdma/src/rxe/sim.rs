//! A deterministic simulated wire between two transports, for tests and benchmarks
//! (smoltcp's `tests/netsim.rs` idea): time is simulated, faults come from a seeded
//! generator, so a failing run replays exactly from its seed.
//!
//! The wire drops, duplicates, reorders (by extra delay), delays and corrupts frames.
//! A corrupted frame has one random bit flipped after the Ethernet header; the
//! receiver's IP checksum or ICRC must catch it (flips in the fields the ICRC masks
//! and the checks ignore, such as the UDP checksum, are harmless by design).
//!
//! Besides the random rates, a [`Script`] names the fault each of the first frames
//! gets, by the order they were sent in (both directions counted together), so a
//! test can enumerate every schedule instead of sampling them.
//!
//! With [`Sim::set_zero_copy`] the nodes send payloads from memory as a NIC with
//! descriptor chains does: the sink takes headers, tail and the payload's bus spans,
//! and the payload is read from the node's memory after the node's call returned
//! (when a NIC would DMA it), [`Sim::dma_hook`] first, so a test can rewrite memory
//! in between.

use alloc::collections::{BinaryHeap, VecDeque};
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Reverse;

use crate::core::gid::Gid;
use crate::core::port::IbMtu;
use crate::wire::{BthPacket, MacAddr, Opcode, Psn, RethPacket};

use super::ah::{AhAttr, LocalPort};
use super::cq::CqHandle;
use super::device::Config;
use super::memory::DmaSpan;
use super::memory::FlatMemory;
use super::mr::{AccessFlags, MrHandle};
use super::pd::PdHandle;
use super::qp::{QpAttr, QpCap, QpHandle, QpInitAttr};
use super::qp_state::{AttrMask, QpState, QpType};
use super::sink::{FrameSink, GatherFrame};
use super::srq::SrqHandle;
use super::time::{Duration, Instant};
use super::transport::{RxeTransport, VerbsError};
use super::wc::WorkCompletion;

/// A small, fast, seedable generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `bp` / 10 000. A zero chance draws nothing: a
    /// fault-free wire asks four times a frame, which the benchmark would count.
    pub fn chance(&mut self, bp: u32) -> bool {
        bp != 0 && self.below(10_000) < u64::from(bp)
    }
}

/// Fault rates in basis points (1/10 000) and delays in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Faults {
    pub drop: u32,
    pub duplicate: u32,
    pub reorder: u32,
    pub corrupt: u32,
    /// One-way delay every frame gets.
    pub delay_us: u64,
    /// Extra random delay, uniform in `0..=jitter_us`.
    pub jitter_us: u64,
}

impl Faults {
    /// A perfect wire with a 2 µs delay.
    pub const NONE: Faults = Faults { drop: 0, duplicate: 0, reorder: 0, corrupt: 0, delay_us: 2, jitter_us: 0 };
}

/// The fault a [`Script`] gives one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Carried as the random rates decide.
    Pass,
    Drop,
    /// Delivered, and a copy right after it.
    Duplicate,
    /// Held back until the next frame toward the same node has gone ahead of it
    /// (or [`HOLD_LIMIT`] passed, if none comes).
    DelayPastNext,
    /// One bit flipped in the last byte before the ICRC, which the ICRC covers.
    Corrupt,
}

impl Fault {
    /// Every fault, `Pass` first.
    pub const ALL: [Fault; 5] = [Fault::Pass, Fault::Drop, Fault::Duplicate, Fault::DelayPastNext, Fault::Corrupt];
}

/// Faults for the first frames put on the wire, in sending order; frames past its
/// end pass.
pub type Script = Vec<Fault>;

/// The longest a [`Fault::DelayPastNext`] frame waits for a frame to pass it.
pub const HOLD_LIMIT: Duration = Duration::from_micros(50_000);

/// What happened on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WireStats {
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    pub bytes: u64,
}

/// What the wire did to one frame, in [`Wire::journal`]: enough for a test to
/// tell whether a retry had a cause on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carried {
    /// When it was put on the wire.
    pub at: Instant,
    /// The destination node.
    pub to: usize,
    /// The BTH opcode and PSN as sent (before any corruption); `None` for a
    /// frame too short to hold them.
    pub bth: Option<(Opcode, Psn)>,
    /// An RDMA READ request's DMA length (its RETH): the request stands for as
    /// many PSNs as the responses it asks for.
    pub read_len: Option<u32>,
    /// Dropped (by the drop rate or by [`Wire::filter`]): never arrived.
    pub dropped: bool,
    /// A bit flipped on the way.
    pub corrupted: bool,
    /// Delayed past frames sent after it.
    pub reordered: bool,
    /// Delivered twice.
    pub duplicated: bool,
}

impl Carried {
    /// Whether the frame did not arrive once, intact and in order: the faults
    /// that can cost the transport a retry. A duplicate costs none (the
    /// responder answers a duplicate request again, the requester ignores an
    /// old response), so it does not count.
    pub fn faulted(&self) -> bool {
        self.dropped || self.corrupted || self.reordered
    }
}

/// The BTH opcode and PSN of a RoCE v2 frame, read from their fixed offsets
/// (Ethernet, then IPv4 or IPv6, then UDP), and a READ request's DMA length:
/// no checks beyond the length.
fn peek_bth(frame: &[u8]) -> Option<((Opcode, Psn), Option<u32>)> {
    let ip_len = match frame.get(12..14)? {
        [0x08, 0x00] => 20,
        [0x86, 0xDD] => 40,
        _ => return None,
    };
    let roce = frame.get(14 + ip_len + 8..)?;
    let bth = BthPacket::new_checked(roce).ok()?;
    let read_len = (bth.opcode() == Opcode::RcRdmaReadRequest)
        .then(|| RethPacket::new_checked(roce.get(crate::wire::bth::HEADER_LEN..)?).ok().map(|r| r.dma_len()))
        .flatten();
    Some(((bth.opcode(), bth.psn()), read_len))
}

struct InFlight {
    to: usize,
    frame: Vec<u8>,
}

/// A frame in flight: (arrival in µs, send order, slot). Unique by the
/// send order, so the order of arrivals is total.
type Arrival = (u64, u64, usize);

/// The frames in flight, earliest arrival first. Without jitter, arrivals
/// are queued in time order: those go to a FIFO, O(1) each; one arriving
/// before the FIFO's last (a delayed, reordered or duplicated frame) goes
/// to a heap. The next is the earlier of the two heads, so frames come out
/// in exactly the order one heap would give, at a fraction of its cost.
#[derive(Default)]
struct Arrivals {
    fifo: VecDeque<Arrival>,
    heap: BinaryHeap<Reverse<Arrival>>,
}

impl Arrivals {
    fn push(&mut self, a: Arrival) {
        if self.fifo.back().is_none_or(|last| *last <= a) {
            self.fifo.push_back(a);
        } else {
            self.heap.push(Reverse(a));
        }
    }

    fn peek(&self) -> Option<Arrival> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(Reverse(h))) => Some(*f.min(h)),
            (f, h) => f.copied().or(h.map(|Reverse(a)| *a)),
        }
    }

    fn pop(&mut self) -> Option<Arrival> {
        let next = self.peek()?;
        if self.fifo.front() == Some(&next) { self.fifo.pop_front() } else { self.heap.pop().map(|Reverse(a)| a) }
    }
}

/// The wire: frames in flight, ordered by arrival time.
pub struct Wire {
    queue: Arrivals,
    slots: Vec<Option<InFlight>>,
    free_slots: Vec<usize>,
    buffers: Vec<Vec<u8>>,
    seq: u64,
    /// Latest in-order arrival per destination: a link is FIFO, so jitter delays a
    /// frame but never lets it pass one sent before it (only `reorder` does).
    last_arrival: [Instant; 2],
    pub rng: Rng,
    pub faults: Faults,
    pub stats: WireStats,
    /// Deterministic fault injection: called with (destination node, frame) for every
    /// frame; returning `true` drops it. Tests use it to lose one chosen packet.
    pub filter: Option<Filter>,
    /// Called for every frame delivered: (time, destination node, frame). For tracing.
    pub observer: Option<Observer>,
    /// When `Some`, every frame put on the wire is appended with its fate, in
    /// the order sent. `None` (the default) records nothing.
    pub journal: Option<Vec<Carried>>,
    /// The scripted faults of the first frames (empty: none).
    pub script: Script,
    /// A [`Fault::DelayPastNext`] frame per destination: (frame, release time).
    held: [Option<(Vec<u8>, Instant)>; 2],
}

/// See [`Wire::observer`].
pub type Observer = alloc::boxed::Box<dyn FnMut(Instant, usize, &[u8])>;

/// See [`Wire::filter`].
pub type Filter = alloc::boxed::Box<dyn FnMut(usize, &[u8]) -> bool>;

impl Wire {
    pub fn new(seed: u64, faults: Faults) -> Wire {
        Wire {
            queue: Arrivals::default(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            buffers: Vec::new(),
            seq: 0,
            last_arrival: [Instant::ZERO; 2],
            rng: Rng::new(seed),
            faults,
            stats: WireStats::default(),
            filter: None,
            observer: None,
            journal: None,
            script: Vec::new(),
            held: [None, None],
        }
    }

    fn buffer(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.buffers.pop().unwrap_or_default();
        b.clear();
        b.resize(len, 0);
        b
    }

    fn enqueue(&mut self, at: Instant, to: usize, frame: Vec<u8>) {
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s] = Some(InFlight { to, frame });
                s
            }
            None => {
                self.slots.push(Some(InFlight { to, frame }));
                self.slots.len() - 1
            }
        };
        self.seq += 1;
        self.queue.push((at.as_micros(), self.seq, slot));
    }

    /// When the next frame arrives (a held frame at the latest when its hold ends).
    pub fn next_arrival(&self) -> Option<Instant> {
        let queued = self.queue.peek().map(|(t, _, _)| Instant::from_micros(t));
        self.held.iter().flatten().map(|(_, t)| *t).chain(queued).min()
    }

    /// The next frame due by `now`: `(destination node, frame)`.
    fn pop_due(&mut self, now: Instant) -> Option<(usize, Vec<u8>)> {
        for to in 0..self.held.len() {
            if self.held[to].as_ref().is_some_and(|(_, t)| *t <= now)
                && let Some((frame, _)) = self.held[to].take()
            {
                self.enqueue(now, to, frame);
            }
        }
        let (t, _, slot) = self.queue.peek()?;
        if t > now.as_micros() {
            return None;
        }
        self.queue.pop();
        let f = self.slots.get_mut(slot)?.take()?;
        self.free_slots.push(slot);
        Some((f.to, f.frame))
    }

    fn recycle(&mut self, frame: Vec<u8>) {
        if self.buffers.len() < 1024 {
            self.buffers.push(frame);
        }
    }

    fn delay(&mut self) -> Duration {
        let jitter = if self.faults.jitter_us > 0 { self.rng.below(self.faults.jitter_us + 1) } else { 0 };
        Duration::from_micros(self.faults.delay_us + jitter)
    }

    /// Puts a frame on the wire toward node `to`, applying the faults.
    fn carry(&mut self, now: Instant, to: usize, frame: Vec<u8>) {
        self.stats.sent += 1;
        self.stats.bytes += frame.len() as u64;
        let mut entry = self.journal.is_some().then(|| {
            let peeked = peek_bth(&frame);
            Carried {
                at: now,
                to,
                bth: peeked.map(|p| p.0),
                read_len: peeked.and_then(|p| p.1),
                dropped: false,
                corrupted: false,
                reordered: false,
                duplicated: false,
            }
        });
        self.carry_faulty(now, to, frame, entry.as_mut());
        if let (Some(journal), Some(entry)) = (self.journal.as_mut(), entry) {
            journal.push(entry);
        }
    }

    /// [`Wire::carry`] proper; notes what it did in `entry`.
    fn carry_faulty(&mut self, now: Instant, to: usize, frame: Vec<u8>, mut entry: Option<&mut Carried>) {
        let mut note = |f: fn(&mut Carried)| {
            if let Some(e) = entry.as_deref_mut() {
                f(e);
            }
        };
        let scripted = self.script.get(self.stats.sent as usize - 1).copied().unwrap_or(Fault::Pass);
        let filtered = self.filter.as_mut().is_some_and(|f| f(to, &frame));
        if filtered || scripted == Fault::Drop || self.rng.chance(self.faults.drop) {
            self.stats.dropped += 1;
            note(|e| e.dropped = true);
            self.recycle(frame);
            return;
        }
        let mut frame = frame;
        if scripted == Fault::Corrupt && frame.len() > 14 + 4 {
            let byte = frame.len() - 5;
            frame[byte] ^= 0x10;
            self.stats.corrupted += 1;
            note(|e| e.corrupted = true);
        } else if self.rng.chance(self.faults.corrupt) && frame.len() > 14 {
            let byte = 14 + self.rng.below(frame.len() as u64 - 14) as usize;
            frame[byte] ^= 1 << self.rng.below(8);
            self.stats.corrupted += 1;
            note(|e| e.corrupted = true);
        }
        let mut at = now + self.delay();
        if scripted == Fault::DelayPastNext && to < self.held.len() {
            self.stats.reordered += 1;
            note(|e| e.reordered = true);
            // One held frame per destination: an earlier one goes first.
            if let Some((earlier, _)) = self.held[to].take() {
                self.enqueue(at, to, earlier);
            }
            self.held[to] = Some((frame, now + HOLD_LIMIT));
            return;
        }
        if self.rng.chance(self.faults.reorder) {
            at = at + Duration::from_micros(1 + self.rng.below(4 * self.faults.delay_us.max(1) + 8));
            self.stats.reordered += 1;
            note(|e| e.reordered = true);
        } else if let Some(last) = self.last_arrival.get_mut(to) {
            at = at.max(*last);
            *last = at;
        }
        if scripted == Fault::Duplicate || self.rng.chance(self.faults.duplicate) {
            let mut copy = self.buffer(frame.len());
            copy.copy_from_slice(&frame);
            let later = at + Duration::from_micros(if scripted == Fault::Duplicate { 1 } else { self.rng.below(8) });
            self.enqueue(later, to, copy);
            self.stats.duplicated += 1;
            note(|e| e.duplicated = true);
        }
        self.enqueue(at, to, frame);
        // A held frame follows the first frame sent after it to the same node.
        if let Some((held, _)) = self.held.get_mut(to).and_then(Option::take) {
            self.enqueue(at + Duration::from_micros(1), to, held);
        }
    }
}

/// The sink a node sends into: frames go to the other node. In zero-copy mode
/// (`queued` set) every frame waits there, in order, until the node's call has
/// returned and the payloads sent from memory can be read.
struct Tx<'a> {
    wire: &'a mut Wire,
    to: usize,
    now: Instant,
    sent: &'a mut u64,
    queued: Option<&'a mut Vec<Queued>>,
}

/// A frame a node sent, not on the wire yet.
enum Queued {
    Whole(Vec<u8>),
    Gather(GatherFrame),
}

/// Payload spans a zero-copy node's sink takes per frame.
const SIM_GATHER_ROOM: usize = 6;

impl FrameSink for Tx<'_> {
    fn transmit(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let mut frame = self.wire.buffer(len);
        fill(&mut frame);
        *self.sent += 1;
        match self.queued.as_deref_mut() {
            Some(q) => q.push(Queued::Whole(frame)),
            None => self.wire.carry(self.now, self.to, frame),
        }
        true
    }

    fn gather_room(&mut self) -> usize {
        if self.queued.is_some() { SIM_GATHER_ROOM } else { 0 }
    }

    fn transmit_gather(
        &mut self,
        head_len: usize,
        spans: &[DmaSpan],
        tail_len: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut [u8]),
    ) -> bool {
        let Some(q) = self.queued.as_deref_mut() else { return false };
        if spans.is_empty() || spans.len() > SIM_GATHER_ROOM {
            return false;
        }
        *self.sent += 1;
        q.push(Queued::Gather(GatherFrame::new(head_len, spans, tail_len, fill)));
        true
    }
}

/// Rewrites a node's memory between a zero-copy send and the "NIC"'s read of it:
/// (node, its memory).
pub type DmaHook = alloc::boxed::Box<dyn FnMut(usize, &mut FlatMemory)>;

/// Node addresses: node `i` is 10.0.0.(i+1) with MAC 52:54:00:00:00:(i+1).
pub fn node_mac(i: usize) -> MacAddr {
    MacAddr([0x52, 0x54, 0, 0, 0, i as u8 + 1])
}

pub fn node_gid(i: usize) -> Gid {
    Gid::from_ipv4(core::net::Ipv4Addr::new(10, 0, 0, i as u8 + 1))
}

/// Two transports and the wire between them.
pub struct Sim {
    pub nodes: [RxeTransport<FlatMemory>; 2],
    pub wire: Wire,
    pub now: Instant,
    /// Zero-copy mode ([`Sim::set_zero_copy`]).
    zero_copy: bool,
    /// In zero-copy mode, called before each node's queued frames are read out
    /// of its memory and put on the wire.
    pub dma_hook: Option<DmaHook>,
    /// Frames a payload of which could not be read back (a span outside memory).
    pub dma_errors: u64,
}

/// Base address of each node's memory.
pub const MEM_BASE: u64 = 0x1_0000;

impl Sim {
    /// Two nodes with `mem_len` bytes of memory each.
    pub fn new(seed: u64, faults: Faults, mem_len: usize, config: Config) -> Sim {
        let node = |i: usize| {
            let port = LocalPort { mac: node_mac(i), gids: vec![node_gid(i)], mtu: IbMtu::Mtu1024 };
            RxeTransport::new(FlatMemory::new(MEM_BASE, mem_len), port, config)
        };
        Sim {
            nodes: [node(0), node(1)],
            wire: Wire::new(seed, faults),
            now: Instant::ZERO,
            zero_copy: false,
            dma_hook: None,
            dma_errors: 0,
        }
    }

    /// Sends payloads from memory zero-copy (on) or copied (off, the default):
    /// the nodes' memories let a device read them, and the sinks take chains.
    pub fn set_zero_copy(&mut self, on: bool) {
        self.zero_copy = on;
        for node in &mut self.nodes {
            node.memory_mut().set_dma(on);
        }
    }

    /// Delivers what is due, polls both nodes; returns how many frames moved.
    pub fn step(&mut self) -> u64 {
        let mut moved = 0;
        let mut queued = Vec::new();
        while let Some((to, frame)) = self.wire.pop_due(self.now) {
            self.wire.stats.delivered += 1;
            moved += 1;
            if let Some(obs) = self.wire.observer.as_mut() {
                obs(self.now, to, &frame);
            }
            let q = self.zero_copy.then_some(&mut queued);
            let mut tx = Tx { wire: &mut self.wire, to: 1 - to, now: self.now, sent: &mut moved, queued: q };
            self.nodes[to].receive(&frame, self.now, &mut tx);
            self.wire.recycle(frame);
            self.put_on_wire(1 - to, &mut queued);
        }
        for i in 0..self.nodes.len() {
            let q = self.zero_copy.then_some(&mut queued);
            let mut tx = Tx { wire: &mut self.wire, to: 1 - i, now: self.now, sent: &mut moved, queued: q };
            self.nodes[i].poll(self.now, &mut tx);
            self.put_on_wire(1 - i, &mut queued);
        }
        moved
    }

    /// Puts the frames node `1 - to` queued on the wire to `to`, in order,
    /// reading the payloads sent from memory out of that node's memory now.
    fn put_on_wire(&mut self, to: usize, queued: &mut Vec<Queued>) {
        if queued.is_empty() {
            return;
        }
        let from = 1 - to;
        if let (Some(hook), Some(node)) = (self.dma_hook.as_mut(), self.nodes.get_mut(from)) {
            hook(from, node.memory_mut());
        }
        for q in queued.drain(..) {
            let frame = match q {
                Queued::Whole(frame) => frame,
                Queued::Gather(g) => {
                    let mem = self.nodes[from].memory();
                    match g.read(|bus, n| mem.dma_read(bus, n)) {
                        Some(bytes) => {
                            let mut frame = self.wire.buffer(bytes.len());
                            frame.copy_from_slice(&bytes);
                            frame
                        }
                        None => {
                            self.dma_errors += 1;
                            continue;
                        }
                    }
                }
            };
            self.wire.carry(self.now, to, frame);
        }
    }

    /// The next instant anything happens, if anything will.
    pub fn next_event(&self) -> Option<Instant> {
        let mut next = self.wire.next_arrival();
        for node in &self.nodes {
            if let Some(t) = node.next_deadline(self.now) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        next
    }

    /// Runs until `done` holds, nothing is left to happen, or simulated time passes
    /// `limit`. Returns whether `done` held.
    pub fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&mut Sim) -> bool) -> bool {
        loop {
            let moved = self.step();
            if done(self) {
                return true;
            }
            let Some(next) = self.next_event() else { return false };
            let next = if next <= self.now && moved == 0 { self.now + Duration::from_micros(1) } else { next };
            self.now = self.now.max(next);
            if self.now > limit {
                return false;
            }
        }
    }

    /// Hands a frame to node `to` now, as if it came off the wire.
    pub fn inject(&mut self, to: usize, frame: &[u8]) {
        let mut moved = 0;
        let mut queued = Vec::new();
        let q = self.zero_copy.then_some(&mut queued);
        let mut tx = Tx { wire: &mut self.wire, to: 1 - to, now: self.now, sent: &mut moved, queued: q };
        self.nodes[to].receive(frame, self.now, &mut tx);
        self.put_on_wire(1 - to, &mut queued);
    }

    /// Runs until both nodes are idle (or `limit`).
    pub fn run_idle(&mut self, limit: Instant) -> bool {
        self.run_until(limit, |s| {
            s.wire.next_arrival().is_none() && s.nodes.iter().all(|n| n.next_deadline(s.now).is_none())
        })
    }
}

/// One end of a connected QP pair set up by [`connect`].
#[derive(Debug, Clone, Copy)]
pub struct End {
    pub pd: PdHandle,
    pub cq: CqHandle,
    pub qp: QpHandle,
    pub qpn: u32,
    /// One MR over the node's whole memory, with every right.
    pub mr: MrHandle,
    /// The SRQ the QP receives through, when [`Link::srq_wr`] asked for one.
    pub srq: Option<SrqHandle>,
}

/// Settings for [`connect`].
#[derive(Debug, Clone, Copy)]
pub struct Link {
    pub qp_type: QpType,
    pub mtu: IbMtu,
    pub cap: QpCap,
    pub cq_depth: usize,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub sq_psn: [u32; 2],
    pub qkey: u32,
    /// 0: each QP has its own receive queue (`cap.max_recv_wr`); otherwise
    /// each receives through an SRQ of this many WQEs, made with it.
    pub srq_wr: u32,
}

impl Default for Link {
    fn default() -> Self {
        Link {
            qp_type: QpType::Rc,
            mtu: IbMtu::Mtu1024,
            cap: QpCap { max_send_wr: 256, max_recv_wr: 256, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 64 },
            cq_depth: 4096,
            // 4.096 µs × 2^5 ≈ 131 µs: short, the simulated RTT is a few µs.
            timeout: 5,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 16,
            sq_psn: [0x10, 0x8000],
            qkey: 0x1111_1111,
            srq_wr: 0,
        }
    }
}

/// Creates a PD, a CQ, an all-rights MR and a QP of `link.qp_type` on both nodes and
/// brings the QPs to RTS pointing at each other (UD: at nothing; use AHs).
pub fn connect(sim: &mut Sim, link: &Link) -> Result<[End; 2], VerbsError> {
    let mut ends = [None, None];
    for (i, node) in sim.nodes.iter_mut().enumerate() {
        let pd = node.alloc_pd()?;
        let cq = node.create_cq(link.cq_depth)?;
        let len = node.memory().len() as u64;
        let mr = node.reg_mr(pd, MEM_BASE, MEM_BASE, len, AccessFlags::ALL)?;
        let srq = match link.srq_wr {
            0 => None,
            wr => Some(node.create_srq(pd, wr, link.cap.max_recv_sge.max(1))?),
        };
        let qp = node.create_qp(&QpInitAttr {
            qp_type: link.qp_type,
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq,
            cap: link.cap,
            sq_sig_all: false,
        })?;
        let qpn = node.qpn(qp).ok_or(VerbsError::BadHandle("QP"))?;
        ends[i] = Some(End { pd, cq, qp, qpn, mr, srq });
    }
    let [Some(a), Some(b)] = ends else { return Err(VerbsError::BadHandle("QP")) };
    let ends = [a, b];
    for i in 0..2 {
        let peer = ends[1 - i];
        let node = &mut sim.nodes[i];
        let me = ends[i];
        let mut attr = QpAttr {
            qp_state: QpState::Init,
            port_num: 1,
            pkey_index: 0,
            qkey: link.qkey,
            qp_access_flags: AccessFlags(AccessFlags::REMOTE),
            ..QpAttr::default()
        };
        let init_mask = match link.qp_type {
            QpType::Ud => AttrMask::QKEY | AttrMask::PORT | AttrMask::PKEY_INDEX,
            QpType::Gsi => AttrMask::QKEY | AttrMask::PKEY_INDEX,
            _ => AttrMask::ACCESS_FLAGS | AttrMask::PORT | AttrMask::PKEY_INDEX,
        };
        node.modify_qp(me.qp, &attr, AttrMask::STATE | init_mask)?;
        attr.qp_state = QpState::Rtr;
        attr.path_mtu = link.mtu;
        attr.dest_qp_num = peer.qpn;
        attr.rq_psn = link.sq_psn[1 - i];
        attr.max_dest_rd_atomic = link.max_rd_atomic;
        attr.min_rnr_timer = link.min_rnr_timer;
        attr.ah_attr =
            AhAttr { dgid: node_gid(1 - i), sgid_index: 0, hop_limit: 64, dmac: node_mac(1 - i), ..AhAttr::default() };
        let rtr_mask = match link.qp_type {
            QpType::Rc => {
                AttrMask::AV
                    | AttrMask::PATH_MTU
                    | AttrMask::DEST_QPN
                    | AttrMask::RQ_PSN
                    | AttrMask::MAX_DEST_RD_ATOMIC
                    | AttrMask::MIN_RNR_TIMER
            }
            QpType::Uc => AttrMask::AV | AttrMask::PATH_MTU | AttrMask::DEST_QPN | AttrMask::RQ_PSN,
            _ => 0,
        };
        if !link.qp_type.is_connected() {
            // UD takes its MTU from the port; give it the link's through the attr.
            node.modify_qp(me.qp, &attr, AttrMask::STATE)?;
        } else {
            node.modify_qp(me.qp, &attr, AttrMask::STATE | rtr_mask)?;
        }
        attr.qp_state = QpState::Rts;
        attr.sq_psn = link.sq_psn[i];
        attr.timeout = link.timeout;
        attr.retry_cnt = link.retry_cnt;
        attr.rnr_retry = link.rnr_retry;
        attr.max_rd_atomic = link.max_rd_atomic;
        let rts_mask = match link.qp_type {
            QpType::Rc => {
                AttrMask::TIMEOUT
                    | AttrMask::RETRY_CNT
                    | AttrMask::RNR_RETRY
                    | AttrMask::SQ_PSN
                    | AttrMask::MAX_QP_RD_ATOMIC
            }
            _ => AttrMask::SQ_PSN,
        };
        node.modify_qp(me.qp, &attr, AttrMask::STATE | rts_mask)?;
    }
    Ok(ends)
}

/// Drains a CQ into a vector.
pub fn drain_cq(node: &mut RxeTransport<FlatMemory>, cq: CqHandle) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    while let Ok(Some(wc)) = node.poll_one(cq) {
        out.push(wc);
    }
    out
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn arrivals_come_out_in_time_then_send_order() {
        let mut rng = Rng::new(7);
        let mut q = Arrivals::default();
        let mut all = Vec::new();
        let mut now = 0;
        for seq in 0..2000u64 {
            // Mostly in order, now and then one delayed or one early, and
            // pops between pushes as a wire has.
            now += rng.below(3);
            let t = match rng.below(10) {
                0 => now + rng.below(50),
                1 => now.saturating_sub(rng.below(5)),
                _ => now,
            };
            q.push((t, seq, seq as usize));
            all.push((t, seq, seq as usize));
            if rng.below(4) == 0 {
                all.sort_unstable();
                let first = all.remove(0);
                assert_eq!(q.pop(), Some(first));
            }
        }
        all.sort_unstable();
        for a in all {
            assert_eq!(q.peek(), Some(a));
            assert_eq!(q.pop(), Some(a));
        }
        assert_eq!(q.pop(), None);
    }
}
