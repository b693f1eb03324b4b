//! A single-producer single-consumer ring over [`SharedMem`], safe against a
//! hostile peer.
//!
//! Protocol (the same for command, response, send, receive and completion
//! rings): a [`RingHeader`](crate::abi::RingHeader) holds two free-running
//! `u32` indices; entry `i` lives in slot `i & (entries - 1)`. The producer
//! writes an entry's bytes, then publishes it by storing `producer = i + 1`
//! with release (virtio-drivers `queue.rs`: write the descriptor, then the
//! index). The consumer loads `producer` with acquire, copies the entry out
//! once, then frees the slot by storing `consumer = i + 1` with release.
//! The ring is empty when the indices are equal and full when they differ by
//! the capacity; free-running indices make wrap-around plain `wrapping_sub`.
//!
//! Each side keeps its own index privately and never reads it back from
//! shared memory, and keeps the capacity and entry size privately too. The
//! peer's index is checked on every load: it must lie between the last value
//! seen and what the protocol allows (at most `entries` ahead of our own
//! index). A peer index beyond capacity or moving backwards is reported as
//! [`RingError::Corrupt`] and the ring stays poisoned: a broken peer is
//! never trusted again (hubris' Ethernet ring treats the owner flag the same
//! way: acquire, check, then use).

use crate::abi::{MAX_RING_ENTRIES, RING_CONSUMER, RING_HEADER_SIZE, RING_PRODUCER, RingPlacement};
use crate::shm::{SharedMem, ShmError, check_range};

/// Geometry of one ring, validated against the region once.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RingGeometry {
    /// Region offset of the ring header.
    base: usize,
    entries: u32,
    entry_size: u32,
}

impl RingGeometry {
    /// Check a placement: capacity a power of two within the ABI limit,
    /// entry size a non-zero multiple of 4, header aligned, everything inside
    /// a region of `region_len` bytes.
    pub fn new(p: RingPlacement, region_len: usize) -> Result<RingGeometry, RingError> {
        if !p.entries.is_power_of_two() || p.entries > MAX_RING_ENTRIES {
            return Err(RingError::BadGeometry("entries must be a power of two within the ABI limit"));
        }
        if p.entry_size == 0 || !p.entry_size.is_multiple_of(4) {
            return Err(RingError::BadGeometry("entry size must be a non-zero multiple of 4"));
        }
        let base = usize::try_from(p.off).map_err(|_| RingError::BadGeometry("offset beyond the address space"))?;
        if base % 64 != 0 {
            return Err(RingError::BadGeometry("ring header must be cache-line aligned"));
        }
        let bytes = RingPlacement::bytes(p.entries, p.entry_size)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or(RingError::BadGeometry("ring size overflows"))?;
        check_range(region_len, base, bytes)?;
        Ok(RingGeometry { base, entries: p.entries, entry_size: p.entry_size })
    }

    pub fn entries(&self) -> u32 {
        self.entries
    }

    pub fn entry_size(&self) -> usize {
        self.entry_size as usize
    }

    pub fn placement(&self) -> RingPlacement {
        RingPlacement { off: self.base as u64, entries: self.entries, entry_size: self.entry_size }
    }

    fn producer_off(&self) -> usize {
        self.base + RING_PRODUCER
    }

    fn consumer_off(&self) -> usize {
        self.base + RING_CONSUMER
    }

    /// Region offset of the slot holding entry `index`. In bounds by
    /// construction: the mask keeps the slot below `entries`.
    fn slot_off(&self, index: u32) -> usize {
        self.base + RING_HEADER_SIZE + (index & (self.entries - 1)) as usize * self.entry_size as usize
    }

    /// Zero the whole header: both indices and a completion ring's `arm`
    /// and `notified` words (the owner of the layout does this before either
    /// side starts, e.g. when the firmware places a ring or frees a context).
    pub fn reset<M: SharedMem + ?Sized>(&self, mem: &M) -> Result<(), RingError> {
        mem.zero(self.base, RING_HEADER_SIZE)?;
        mem.store_u32_release(self.producer_off(), 0)?;
        mem.store_u32_release(self.consumer_off(), 0)?;
        Ok(())
    }

    /// Region offset of the ring header (where [`crate::wake`]'s words are).
    pub fn base(&self) -> usize {
        self.base
    }
}

/// How a peer broke the protocol.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Violation {
    /// The peer's index is further from ours than the capacity allows.
    BeyondCapacity { ours: u32, theirs: u32 },
    /// The peer's index moved backwards from the last value seen.
    WentBackwards { seen: u32, theirs: u32 },
}

/// Why a ring operation failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RingError {
    /// No free slot (producer). Not an error of the peer: retry later.
    Full,
    /// The entry is larger than a slot.
    TooLarge { len: usize, entry_size: usize },
    /// The placement is unusable.
    BadGeometry(&'static str),
    /// The peer broke the protocol; the ring is poisoned.
    Corrupt(Violation),
    /// A shared-memory access was refused.
    Shm(ShmError),
}

impl From<ShmError> for RingError {
    fn from(e: ShmError) -> Self {
        RingError::Shm(e)
    }
}

impl core::fmt::Display for RingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RingError::Full => f.write_str("ring full"),
            RingError::TooLarge { len, entry_size } => write!(f, "entry of {len} bytes exceeds {entry_size}-byte slot"),
            RingError::BadGeometry(why) => write!(f, "bad ring placement: {why}"),
            RingError::Corrupt(Violation::BeyondCapacity { ours, theirs }) => {
                write!(f, "peer index {theirs} is beyond capacity from ours ({ours})")
            }
            RingError::Corrupt(Violation::WentBackwards { seen, theirs }) => {
                write!(f, "peer index went backwards from {seen} to {theirs}")
            }
            RingError::Shm(e) => write!(f, "{e}"),
        }
    }
}

/// The producer half: owns the `producer` index.
#[derive(Clone, Debug)]
pub struct Producer {
    geo: RingGeometry,
    /// Next index to publish (entries before it are visible to the consumer).
    prod: u32,
    /// Entries written but not yet published (see [`Producer::stage`]).
    staged: u32,
    /// The consumer index last seen; it only moves forward.
    cons_seen: u32,
    poisoned: Option<Violation>,
}

impl Producer {
    /// A producer for a freshly reset ring (both indices zero).
    pub fn new(geo: RingGeometry) -> Self {
        Producer { geo, prod: 0, staged: 0, cons_seen: 0, poisoned: None }
    }

    /// A producer for a fresh ring whose first `published` entries the
    /// layout's owner wrote and published before handing it over (a
    /// resized SRQ's ring, the old ring's entries moved in): it goes on
    /// from there.
    pub fn taking_over(geo: RingGeometry, published: u32) -> Self {
        Producer { prod: published, ..Producer::new(geo) }
    }

    pub fn geometry(&self) -> &RingGeometry {
        &self.geo
    }

    /// The index the next published entry gets.
    pub fn index(&self) -> u32 {
        self.prod
    }

    /// Load the consumer's index (acquire) and check it lies in
    /// `[cons_seen, prod]`: a consumer cannot free what was never produced
    /// nor take back what it freed.
    fn refresh(&mut self, mem: &(impl SharedMem + ?Sized)) -> Result<(), RingError> {
        if let Some(v) = self.poisoned {
            return Err(RingError::Corrupt(v));
        }
        let c = mem.load_u32_acquire(self.geo.consumer_off())?;
        let advanced = c.wrapping_sub(self.cons_seen);
        let outstanding = self.prod.wrapping_sub(self.cons_seen);
        if advanced > outstanding {
            let v = if self.cons_seen.wrapping_sub(c) <= self.geo.entries {
                Violation::WentBackwards { seen: self.cons_seen, theirs: c }
            } else {
                Violation::BeyondCapacity { ours: self.prod, theirs: c }
            };
            self.poisoned = Some(v);
            return Err(RingError::Corrupt(v));
        }
        self.cons_seen = c;
        Ok(())
    }

    /// Free slots, counting staged entries as used.
    pub fn free(&mut self, mem: &(impl SharedMem + ?Sized)) -> Result<u32, RingError> {
        self.refresh(mem)?;
        let used = self.prod.wrapping_sub(self.cons_seen) + self.staged;
        Ok(self.geo.entries - used)
    }

    /// Write an entry without publishing it; [`Producer::publish`] makes all
    /// staged entries visible with one release store (a batched doorbell).
    pub fn stage(&mut self, mem: &(impl SharedMem + ?Sized), entry: &[u8]) -> Result<(), RingError> {
        if entry.len() > self.geo.entry_size() {
            return Err(RingError::TooLarge { len: entry.len(), entry_size: self.geo.entry_size() });
        }
        if self.free(mem)? == 0 {
            return Err(RingError::Full);
        }
        let at = self.geo.slot_off(self.prod.wrapping_add(self.staged));
        mem.write(at, entry)?;
        self.staged += 1;
        Ok(())
    }

    /// Publish every staged entry (release store of the producer index).
    pub fn publish(&mut self, mem: &(impl SharedMem + ?Sized)) -> Result<(), RingError> {
        if self.staged == 0 {
            return Ok(());
        }
        let next = self.prod.wrapping_add(self.staged);
        mem.store_u32_release(self.geo.producer_off(), next)?;
        self.prod = next;
        self.staged = 0;
        Ok(())
    }

    /// Stage and publish one entry.
    pub fn push(&mut self, mem: &(impl SharedMem + ?Sized), entry: &[u8]) -> Result<(), RingError> {
        self.stage(mem, entry)?;
        self.publish(mem)
    }

    /// Whether the peer broke the protocol.
    pub fn poisoned(&self) -> Option<Violation> {
        self.poisoned
    }
}

/// The consumer half: owns the `consumer` index.
#[derive(Clone, Debug)]
pub struct Consumer {
    geo: RingGeometry,
    /// Next index to consume.
    cons: u32,
    /// The producer index last seen; it only moves forward.
    prod_seen: u32,
    poisoned: Option<Violation>,
}

impl Consumer {
    /// A consumer for a freshly reset ring (both indices zero).
    pub fn new(geo: RingGeometry) -> Self {
        Consumer { geo, cons: 0, prod_seen: 0, poisoned: None }
    }

    pub fn geometry(&self) -> &RingGeometry {
        &self.geo
    }

    /// The index of the next entry to consume.
    pub fn index(&self) -> u32 {
        self.cons
    }

    /// Load the producer's index (acquire) and check it lies in
    /// `[prod_seen, cons + entries]`.
    fn refresh(&mut self, mem: &(impl SharedMem + ?Sized)) -> Result<(), RingError> {
        if let Some(v) = self.poisoned {
            return Err(RingError::Corrupt(v));
        }
        let p = mem.load_u32_acquire(self.geo.producer_off())?;
        let avail = p.wrapping_sub(self.cons);
        let before = self.prod_seen.wrapping_sub(self.cons);
        if avail > self.geo.entries || avail < before {
            let v = if avail < before || self.prod_seen.wrapping_sub(p) <= self.geo.entries {
                Violation::WentBackwards { seen: self.prod_seen, theirs: p }
            } else {
                Violation::BeyondCapacity { ours: self.cons, theirs: p }
            };
            self.poisoned = Some(v);
            return Err(RingError::Corrupt(v));
        }
        self.prod_seen = p;
        Ok(())
    }

    /// Whether the producer published entries since this side last looked
    /// (by this call, [`Consumer::available`] or a [`Consumer::peek`] of an
    /// empty ring): new work, as opposed to entries seen and left waiting.
    pub fn producer_moved(&mut self, mem: &(impl SharedMem + ?Sized)) -> Result<bool, RingError> {
        let before = self.prod_seen;
        self.refresh(mem)?;
        Ok(self.prod_seen != before)
    }

    /// Entries ready to consume.
    pub fn available(&mut self, mem: &(impl SharedMem + ?Sized)) -> Result<u32, RingError> {
        self.refresh(mem)?;
        Ok(self.prod_seen.wrapping_sub(self.cons))
    }

    /// Copy the next entry into `out` (the first `min(out.len(), entry
    /// size)` bytes of the slot) without freeing its slot. `Ok(false)` when
    /// empty. The copy is the only read of the slot: validate the copy.
    pub fn peek(&mut self, mem: &(impl SharedMem + ?Sized), out: &mut [u8]) -> Result<bool, RingError> {
        if self.prod_seen == self.cons && self.available(mem)? == 0 {
            return Ok(false);
        }
        if let Some(v) = self.poisoned {
            return Err(RingError::Corrupt(v));
        }
        let n = out.len().min(self.geo.entry_size());
        mem.read(self.geo.slot_off(self.cons), &mut out[..n])?;
        Ok(true)
    }

    /// Free the slot of the entry last peeked (release store of the consumer
    /// index). Does nothing when the ring is empty.
    pub fn release(&mut self, mem: &(impl SharedMem + ?Sized)) -> Result<(), RingError> {
        if self.prod_seen == self.cons {
            return Ok(());
        }
        let next = self.cons.wrapping_add(1);
        mem.store_u32_release(self.geo.consumer_off(), next)?;
        self.cons = next;
        Ok(())
    }

    /// Copy out the next entry and free its slot. `Ok(false)` when empty.
    pub fn pop(&mut self, mem: &(impl SharedMem + ?Sized), out: &mut [u8]) -> Result<bool, RingError> {
        if !self.peek(mem, out)? {
            return Ok(false);
        }
        self.release(mem)?;
        Ok(true)
    }

    /// Whether the peer broke the protocol.
    pub fn poisoned(&self) -> Option<Violation> {
        self.poisoned
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::fake::HeapShm;
    use alloc::collections::VecDeque;
    use alloc::vec::Vec;

    fn ring(entries: u32, entry_size: u32) -> (HeapShm, RingGeometry) {
        let m = HeapShm::new(8192);
        let g = RingGeometry::new(RingPlacement { off: 64, entries, entry_size }, m.len()).unwrap();
        (m, g)
    }

    #[test]
    fn geometry_is_checked() {
        let len = 4096;
        let bad = |off, entries, entry_size| RingGeometry::new(RingPlacement { off, entries, entry_size }, len);
        assert!(matches!(bad(0, 3, 16), Err(RingError::BadGeometry(_))));
        assert!(matches!(bad(0, 0, 16), Err(RingError::BadGeometry(_))));
        assert!(matches!(bad(0, 4, 6), Err(RingError::BadGeometry(_))));
        assert!(matches!(bad(8, 4, 16), Err(RingError::BadGeometry(_))));
        assert!(matches!(bad(4096 - 64, 4, 16), Err(RingError::Shm(_))));
        assert!(bad(u64::MAX - 63, 4, 16).is_err());
        assert!(bad(0, 16, 248).is_ok());
        assert!(bad(0, 16, 249 + 3).is_err());
    }

    #[test]
    fn empty_full_and_wrap() {
        let (m, g) = ring(4, 8);
        let (mut p, mut c) = (Producer::new(g), Consumer::new(g));
        let mut out = [0u8; 8];
        assert_eq!(c.pop(&m, &mut out), Ok(false));
        // Many laps around the ring, leaving it full each time.
        for lap in 0u32..10 {
            for i in 0..4 {
                p.push(&m, &(lap * 4 + i).to_le_bytes()).unwrap();
            }
            assert_eq!(p.push(&m, &[1]), Err(RingError::Full));
            assert_eq!(c.available(&m), Ok(4));
            for i in 0..4 {
                assert_eq!(c.pop(&m, &mut out), Ok(true));
                assert_eq!(u32::from_le_bytes(out[..4].try_into().unwrap()), lap * 4 + i);
            }
            assert_eq!(c.pop(&m, &mut out), Ok(false));
        }
        assert_eq!(p.push(&m, &[0; 9]), Err(RingError::TooLarge { len: 9, entry_size: 8 }));
    }

    #[test]
    fn indices_wrap_around_u32() {
        let (m, g) = ring(4, 8);
        // Start both sides just before the u32 wrap, as after 2^32 entries.
        let start = u32::MAX - 1;
        m.store_u32_release(64 + RING_PRODUCER, start).unwrap();
        m.store_u32_release(64 + RING_CONSUMER, start).unwrap();
        let mut p = Producer { prod: start, cons_seen: start, ..Producer::new(g) };
        let mut c = Consumer { cons: start, prod_seen: start, ..Consumer::new(g) };
        let mut out = [0u8; 8];
        for i in 0u8..20 {
            p.push(&m, &[i]).unwrap();
            p.push(&m, &[i + 100]).unwrap();
            assert_eq!(c.pop(&m, &mut out), Ok(true));
            assert_eq!(out[0], i);
            assert_eq!(c.pop(&m, &mut out), Ok(true));
            assert_eq!(out[0], i + 100);
        }
    }

    #[test]
    fn staged_entries_are_invisible_until_published() {
        let (m, g) = ring(8, 8);
        let (mut p, mut c) = (Producer::new(g), Consumer::new(g));
        p.stage(&m, &[1]).unwrap();
        p.stage(&m, &[2]).unwrap();
        assert_eq!(c.available(&m), Ok(0));
        assert_eq!(p.free(&m), Ok(6));
        p.publish(&m).unwrap();
        assert_eq!(c.available(&m), Ok(2));
    }

    #[test]
    fn hostile_producer_index_is_detected_and_sticks() {
        let (m, g) = ring(4, 8);
        let mut c = Consumer::new(g);
        m.store_u32_release(64 + RING_PRODUCER, 5).unwrap();
        let e = RingError::Corrupt(Violation::BeyondCapacity { ours: 0, theirs: 5 });
        assert_eq!(c.available(&m), Err(e));
        // Even once the index looks sane again, the ring stays poisoned.
        m.store_u32_release(64 + RING_PRODUCER, 1).unwrap();
        assert_eq!(c.available(&m), Err(e));
        assert_eq!(c.pop(&m, &mut [0; 8]), Err(e));

        let mut c = Consumer::new(g);
        m.store_u32_release(64 + RING_PRODUCER, 3).unwrap();
        assert_eq!(c.available(&m), Ok(3));
        m.store_u32_release(64 + RING_PRODUCER, 2).unwrap();
        assert_eq!(c.available(&m), Err(RingError::Corrupt(Violation::WentBackwards { seen: 3, theirs: 2 })));
    }

    #[test]
    fn hostile_consumer_index_is_detected() {
        let (m, g) = ring(4, 8);
        let mut p = Producer::new(g);
        p.push(&m, &[1]).unwrap();
        // Consumer claims to have freed two entries when one was produced.
        m.store_u32_release(64 + RING_CONSUMER, 2).unwrap();
        assert_eq!(p.free(&m), Err(RingError::Corrupt(Violation::BeyondCapacity { ours: 1, theirs: 2 })));
        assert_eq!(p.push(&m, &[1]), Err(RingError::Corrupt(Violation::BeyondCapacity { ours: 1, theirs: 2 })));

        let mut p = Producer::new(g);
        m.store_u32_release(64 + RING_CONSUMER, 0).unwrap();
        p.push(&m, &[1]).unwrap();
        p.push(&m, &[1]).unwrap();
        m.store_u32_release(64 + RING_CONSUMER, 2).unwrap();
        assert_eq!(p.free(&m), Ok(4));
        m.store_u32_release(64 + RING_CONSUMER, 1).unwrap();
        assert_eq!(p.free(&m), Err(RingError::Corrupt(Violation::WentBackwards { seen: 2, theirs: 1 })));
    }

    #[test]
    fn the_slot_is_copied_once() {
        // The consumer validates its copy; a later change by the producer in
        // the slot does not reach an entry already popped.
        let (m, g) = ring(2, 8);
        let (mut p, mut c) = (Producer::new(g), Consumer::new(g));
        p.push(&m, &[7; 8]).unwrap();
        let mut out = [0; 8];
        c.peek(&m, &mut out).unwrap();
        m.write(64 + RING_HEADER_SIZE, &[9; 8]).unwrap();
        assert_eq!(out, [7; 8]);
    }

    /// A seeded generator so a failing interleaving replays exactly.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u32 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) as u32
        }
    }

    #[test]
    fn random_interleavings_match_a_queue_model() {
        for seed in 0..50u64 {
            let mut rng = Lcg(seed);
            let entries = 1 << (rng.next() % 4);
            let (m, g) = ring(entries, 8);
            let (mut p, mut c) = (Producer::new(g), Consumer::new(g));
            let mut model: VecDeque<u64> = VecDeque::new();
            let mut staged: Vec<u64> = Vec::new();
            let mut next = 0u64;
            for _ in 0..2000 {
                match rng.next() % 4 {
                    0 => {
                        let r = p.stage(&m, &next.to_le_bytes());
                        if model.len() + staged.len() == entries as usize {
                            assert_eq!(r, Err(RingError::Full), "seed {seed}");
                        } else {
                            r.unwrap();
                            staged.push(next);
                            next += 1;
                        }
                    }
                    1 => {
                        p.publish(&m).unwrap();
                        model.extend(staged.drain(..));
                    }
                    _ => {
                        let mut out = [0u8; 8];
                        let got = c.pop(&m, &mut out).unwrap();
                        match model.pop_front() {
                            Some(v) => assert!(got && u64::from_le_bytes(out) == v, "seed {seed}"),
                            None => assert!(!got, "seed {seed}"),
                        }
                    }
                }
                assert_eq!(c.available(&m).unwrap() as usize, model.len());
            }
        }
    }

    #[test]
    fn two_threads_pass_entries_in_order() {
        extern crate std;
        use std::sync::Arc;
        let m = Arc::new(HeapShm::new(4096));
        let g = RingGeometry::new(RingPlacement { off: 0, entries: 8, entry_size: 16 }, m.len()).unwrap();
        const N: u64 = 200_000;
        let pm = m.clone();
        let t = std::thread::spawn(move || {
            let mut p = Producer::new(g);
            let mut i = 0u64;
            while i < N {
                let mut e = [0u8; 16];
                e[..8].copy_from_slice(&i.to_le_bytes());
                e[8..].copy_from_slice(&(!i).to_le_bytes());
                match p.push(&*pm, &e) {
                    Ok(()) => i += 1,
                    Err(RingError::Full) => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            }
        });
        let mut c = Consumer::new(g);
        let mut want = 0u64;
        let mut out = [0u8; 16];
        while want < N {
            if c.pop(&*m, &mut out).unwrap() {
                // Release/acquire: both halves of the entry are the ones written.
                assert_eq!(u64::from_le_bytes(out[..8].try_into().unwrap()), want);
                assert_eq!(u64::from_le_bytes(out[8..].try_into().unwrap()), !want);
                want += 1;
            } else {
                std::thread::yield_now();
            }
        }
        t.join().unwrap();
    }
}
