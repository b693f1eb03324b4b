//! Work queues: fixed-capacity rings of WQEs whose scatter/gather lists live in a slab
//! allocated with the queue (IBA vol. 1 10.2.4 send and receive queues; Linux
//! `rxe_queue.c`). Posting copies the work request in; nothing on the packet path
//! allocates.
//!
//! Positions are free-running `u64` counters (`head` = oldest entry, `tail` = next free),
//! so "how far along" comparisons never wrap in practice.

use alloc::vec;
use alloc::vec::Vec;

use super::wr::{RecvWr, Sge};

/// Why a work request could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostError {
    /// The queue is full.
    Full,
    /// More SGEs than the queue was created for.
    TooManySge,
    /// Inline data longer than the QP's `max_inline_data`.
    InlineTooLong,
}

/// A ring of `T` with free-running positions.
#[derive(Debug)]
pub struct Ring<T> {
    /// A power of two of them, at least `capacity`, as Linux rounds its queues: a
    /// position's slot is then a mask, not a 64-bit division (tens of cycles, and
    /// the packet path maps positions several times a frame).
    slots: Vec<T>,
    capacity: usize,
    head: u64,
    tail: u64,
}

impl<T: Clone + Default> Ring<T> {
    pub fn new(capacity: usize) -> Ring<T> {
        let capacity = capacity.max(1);
        Ring { slots: vec![T::default(); capacity.next_power_of_two()], capacity, head: 0, tail: 0 }
    }
}

impl<T> Ring<T> {
    /// The most entries it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many slots [`Ring::slot_of`] maps positions to: the size of a slab kept
    /// beside the ring, one entry (or a fixed run of them) per slot.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub fn head(&self) -> u64 {
        self.head
    }

    pub fn tail(&self) -> u64 {
        self.tail
    }

    pub fn len(&self) -> usize {
        (self.tail - self.head) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    pub fn is_full(&self) -> bool {
        self.len() >= self.capacity
    }

    /// The slot a position maps to.
    pub fn slot_of(&self, pos: u64) -> usize {
        (pos & (self.slots.len() as u64 - 1)) as usize
    }

    /// The entry at `pos`, if it is queued.
    pub fn get(&self, pos: u64) -> Option<&T> {
        if pos < self.head || pos >= self.tail {
            return None;
        }
        self.slots.get(self.slot_of(pos))
    }

    pub fn get_mut(&mut self, pos: u64) -> Option<&mut T> {
        if pos < self.head || pos >= self.tail {
            return None;
        }
        let slot = self.slot_of(pos);
        self.slots.get_mut(slot)
    }

    /// Queues `value` at the tail; returns its position.
    pub fn push(&mut self, value: T) -> Result<u64, PostError> {
        if self.is_full() {
            return Err(PostError::Full);
        }
        let pos = self.tail;
        let slot = self.slot_of(pos);
        self.slots[slot] = value;
        self.tail += 1;
        Ok(pos)
    }

    /// Drops the head entry.
    pub fn pop(&mut self) {
        if self.head < self.tail {
            self.head += 1;
        }
    }
}

/// A posted receive WQE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvWqe {
    pub wr_id: u64,
    pub num_sge: u32,
    /// Sum of the SGE lengths: the largest message it takes.
    pub length: u64,
}

/// A receive queue (a QP's RQ or an SRQ): WQEs and their SGEs.
#[derive(Debug)]
pub struct RecvQueue {
    ring: Ring<RecvWqe>,
    sges: Vec<Sge>,
    max_sge: usize,
}

impl RecvQueue {
    pub fn new(max_wr: usize, max_sge: usize) -> RecvQueue {
        let ring = Ring::new(max_wr);
        let sges = vec![Sge::default(); ring.slot_count() * max_sge];
        RecvQueue { ring, sges, max_sge }
    }

    pub fn max_sge(&self) -> usize {
        self.max_sge
    }

    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    pub fn post(&mut self, wr: &RecvWr<'_>) -> Result<(), PostError> {
        if wr.sg_list.len() > self.max_sge {
            return Err(PostError::TooManySge);
        }
        if self.ring.is_full() {
            return Err(PostError::Full);
        }
        let length = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
        let wqe = RecvWqe { wr_id: wr.wr_id, num_sge: wr.sg_list.len() as u32, length };
        let pos = self.ring.push(wqe)?;
        let base = self.ring.slot_of(pos) * self.max_sge;
        store_sges(&mut self.sges[base..base + wr.sg_list.len()], wr.sg_list);
        Ok(())
    }

    /// The oldest WQE and its SGEs.
    pub fn front(&self) -> Option<(RecvWqe, &[Sge])> {
        let pos = self.ring.head();
        let wqe = *self.ring.get(pos)?;
        let base = self.ring.slot_of(pos) * self.max_sge;
        Some((wqe, &self.sges[base..base + wqe.num_sge as usize]))
    }

    pub fn pop(&mut self) {
        self.ring.pop();
    }

    /// Makes the queue hold `max_wr` WQEs, keeping the posted ones in order
    /// with their SGEs (`rxe_queue_resize`). Refused, changing nothing, when
    /// more than `max_wr` are posted.
    pub fn resize(&mut self, max_wr: usize) -> Result<(), PostError> {
        if max_wr < self.len() {
            return Err(PostError::Full);
        }
        let mut bigger = RecvQueue::new(max_wr, self.max_sge);
        while let Some((wqe, sges)) = self.front() {
            let pos = bigger.ring.push(wqe)?;
            let base = bigger.ring.slot_of(pos) * self.max_sge;
            bigger.sges[base..base + sges.len()].copy_from_slice(sges);
            self.pop();
        }
        *self = bigger;
        Ok(())
    }
}

/// Copies a work request's SGEs into its slot of a queue (`dst` as long as
/// `src`). One SGE, nearly every WR, is a plain move: for a length it cannot
/// see, `copy_from_slice` calls memcpy.
pub(crate) fn store_sges(dst: &mut [Sge], src: &[Sge]) {
    match (dst, src) {
        ([one], [sge]) => *one = *sge,
        (dst, src) => dst.copy_from_slice(src),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn ring_positions() {
        let mut r: Ring<u32> = Ring::new(2);
        assert_eq!(r.push(1), Ok(0));
        assert_eq!(r.push(2), Ok(1));
        assert_eq!(r.push(3), Err(PostError::Full));
        r.pop();
        assert_eq!(r.push(3), Ok(2));
        assert_eq!(r.get(0), None);
        assert_eq!(r.get(2), Some(&3));
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn a_ring_of_any_size_holds_exactly_its_capacity_and_wraps() {
        for capacity in [1usize, 3, 5, 7, 8, 100] {
            let mut q = RecvQueue::new(capacity, 1);
            let sge = |n: u64| [Sge { addr: n, length: 1, lkey: 9 }];
            // Several laps, the queue full each time: every WQE comes back with its SGE.
            let mut next = 0u64;
            for _ in 0..3 {
                for _ in 0..capacity {
                    q.post(&RecvWr { wr_id: next, sg_list: &sge(next) }).expect("room");
                    next += 1;
                }
                assert_eq!(q.post(&RecvWr { wr_id: 0, sg_list: &[] }), Err(PostError::Full), "capacity {capacity}");
                for expect in next - capacity as u64..next {
                    let (wqe, list) = q.front().expect("posted");
                    assert_eq!((wqe.wr_id, list), (expect, &sge(expect)[..]), "capacity {capacity}");
                    q.pop();
                }
                assert!(q.is_empty());
            }
        }
    }

    #[test]
    fn resizing_keeps_the_posted_wqes_in_order() {
        let mut q = RecvQueue::new(2, 2);
        let sges = |n: u32| [Sge { addr: u64::from(n), length: n, lkey: 5 }, Sge { addr: 0, length: 1, lkey: 6 }];
        // Wrapped: the head is in the second slot.
        q.post(&RecvWr { wr_id: 1, sg_list: &sges(1)[..1] }).expect("room");
        q.pop();
        q.post(&RecvWr { wr_id: 2, sg_list: &sges(2) }).expect("room");
        q.post(&RecvWr { wr_id: 3, sg_list: &sges(3)[..1] }).expect("room");
        assert_eq!(q.resize(1), Err(PostError::Full), "two are posted");
        assert_eq!(q.capacity(), 2, "a refused resize changes nothing");
        q.resize(4).expect("grows");
        assert_eq!(q.capacity(), 4);
        q.post(&RecvWr { wr_id: 4, sg_list: &[] }).expect("room");
        q.post(&RecvWr { wr_id: 5, sg_list: &[] }).expect("room");
        let mut got = Vec::new();
        while let Some((w, list)) = q.front() {
            got.push((w.wr_id, list.to_vec()));
            q.pop();
        }
        assert_eq!(got, [(2, sges(2).to_vec()), (3, sges(3)[..1].to_vec()), (4, Vec::new()), (5, Vec::new())]);
    }

    #[test]
    fn recv_queue_keeps_sges() {
        let mut q = RecvQueue::new(2, 2);
        let sges = [Sge { addr: 1, length: 10, lkey: 5 }, Sge { addr: 20, length: 5, lkey: 5 }];
        q.post(&RecvWr { wr_id: 7, sg_list: &sges }).expect("room");
        assert_eq!(q.post(&RecvWr { wr_id: 8, sg_list: &[Sge::default(); 3] }), Err(PostError::TooManySge));
        let (wqe, list) = q.front().expect("posted");
        assert_eq!((wqe.wr_id, wqe.length), (7, 15));
        assert_eq!(list, &sges);
    }
}
