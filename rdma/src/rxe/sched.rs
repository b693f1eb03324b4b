//! Which QPs need the transport's attention, so that a poll costs what the busy
//! QPs cost, not what every QP costs (Linux rxe schedules a QP's tasks when work
//! arrives for it and arms a kernel timer per QP; this is the same idea for one
//! owner loop): a FIFO of QPs with work to do now, and a min-heap of the QPs'
//! timers (retransmission, RNR back-off).
//!
//! The heap is lazy: a QP's entry is pushed when its deadline comes earlier than
//! the one already queued for it, and an entry that no longer matches the QP's
//! armed deadline is skipped when it comes up. A deadline that moved later leaves
//! an early entry behind, which wakes the QP once for nothing; the QP then
//! re-arms the later one.

use alloc::collections::{BinaryHeap, VecDeque};
use alloc::vec::Vec;
use core::cmp::Reverse;

use super::time::Instant;

#[derive(Default)]
pub struct Schedule {
    /// QP indices to run at the next poll, each at most once.
    ready: VecDeque<u32>,
    /// Per QP index: whether it is in `ready`.
    queued: Vec<bool>,
    /// (deadline in µs, QP index).
    timers: BinaryHeap<Reverse<(u64, u32)>>,
    /// Per QP index: the deadline its newest heap entry stands for.
    armed: Vec<Option<Instant>>,
}

impl Schedule {
    /// QP `index` has work now: it runs at the next poll.
    pub fn wake(&mut self, index: u32) {
        let i = index as usize;
        if self.queued.len() <= i {
            self.queued.resize(i + 1, false);
        }
        if !self.queued[i] {
            self.queued[i] = true;
            self.ready.push_back(index);
        }
    }

    /// QP `index` needs to run at `at` (its earliest timer).
    pub fn arm(&mut self, index: u32, at: Instant) {
        let i = index as usize;
        if self.armed.len() <= i {
            self.armed.resize(i + 1, None);
        }
        if self.armed[i].is_some_and(|t| t <= at) {
            // An entry at or before `at` is queued: it wakes the QP in time.
            return;
        }
        self.armed[i] = Some(at);
        self.timers.push(Reverse((at.as_micros(), index)));
    }

    /// Wakes every QP whose timer entry is due by `now`.
    pub fn fire_due(&mut self, now: Instant) {
        while let Some(&Reverse((t, index))) = self.timers.peek() {
            if t > now.as_micros() {
                break;
            }
            self.timers.pop();
            let slot = self.armed.get_mut(index as usize);
            if let Some(armed) = slot
                && *armed == Some(Instant::from_micros(t))
            {
                *armed = None;
                self.wake(index);
            }
        }
    }

    /// Takes the QPs to run now; QPs woken while they run wait for the next poll.
    pub fn take_ready(&mut self) -> VecDeque<u32> {
        let ready = core::mem::take(&mut self.ready);
        for &i in &ready {
            if let Some(q) = self.queued.get_mut(i as usize) {
                *q = false;
            }
        }
        ready
    }

    /// The QPs waiting to run, without taking them.
    pub fn ready(&self) -> impl Iterator<Item = u32> + '_ {
        self.ready.iter().copied()
    }

    /// When the next poll is due: now when a QP is ready, else the earliest
    /// timer entry (possibly one that turns out stale), `None` when idle.
    pub fn next(&self, now: Instant) -> Option<Instant> {
        if !self.ready.is_empty() {
            return Some(now);
        }
        self.timers.peek().map(|Reverse((t, _))| Instant::from_micros(*t))
    }

    /// Forgets QP `index`'s timer (the QP is gone or reset).
    pub fn disarm(&mut self, index: u32) {
        if let Some(a) = self.armed.get_mut(index as usize) {
            *a = None;
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn at(us: u64) -> Instant {
        Instant::from_micros(us)
    }

    #[test]
    fn a_qp_is_ready_once_however_often_it_is_woken() {
        let mut s = Schedule::default();
        for _ in 0..3 {
            s.wake(7);
        }
        s.wake(2);
        assert_eq!(s.next(at(5)), Some(at(5)));
        assert_eq!(s.take_ready(), [7, 2]);
        assert_eq!(s.next(at(5)), None);
        s.wake(7);
        assert_eq!(s.take_ready(), [7], "taken QPs can be woken again");
    }

    #[test]
    fn timers_wake_in_order_and_stale_entries_are_skipped() {
        let mut s = Schedule::default();
        s.arm(1, at(300));
        s.arm(2, at(100));
        s.arm(1, at(200)); // earlier: a new entry; the 300 one is now stale
        s.arm(2, at(150)); // later than the queued 100: nothing new
        assert_eq!(s.next(at(0)), Some(at(100)));
        s.fire_due(at(120));
        assert_eq!(s.take_ready(), [2]);
        s.fire_due(at(250));
        assert_eq!(s.take_ready(), [1]);
        s.fire_due(at(1000));
        assert!(s.take_ready().is_empty(), "the stale 300 entry wakes nobody");
        assert_eq!(s.next(at(1000)), None);
    }

    #[test]
    fn a_disarmed_timer_wakes_nobody() {
        let mut s = Schedule::default();
        s.arm(4, at(10));
        s.disarm(4);
        s.fire_due(at(20));
        assert!(s.take_ready().is_empty());
    }
}
