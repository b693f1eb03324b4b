//! A deadline queue: the poll loop asks it for the earliest deadline (to know how
//! long it may halt) and for the timers that have expired. Later it drives the
//! transport's retransmission and RNR timers, which are often cancelled, so a
//! cancel is O(log n) and leaves no work behind for the caller.

use alloc::collections::{BTreeMap, BinaryHeap};
use core::cmp::Reverse;
use vocab::Instant;

/// Names one armed timer; stale after it fires or is cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimerId(u64);

/// Timers carrying a payload `T`, fired in deadline order (ties: arming order).
#[derive(Debug)]
pub struct TimerQueue<T> {
    heap: BinaryHeap<Reverse<(Instant, TimerId)>>,
    live: BTreeMap<TimerId, T>,
    next_id: u64,
}

impl<T> Default for TimerQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> TimerQueue<T> {
    pub const fn new() -> Self {
        Self { heap: BinaryHeap::new(), live: BTreeMap::new(), next_id: 0 }
    }

    /// Arms a timer that fires at `deadline`.
    pub fn arm(&mut self, deadline: Instant, payload: T) -> TimerId {
        let id = TimerId(self.next_id);
        self.next_id += 1;
        self.heap.push(Reverse((deadline, id)));
        self.live.insert(id, payload);
        id
    }

    /// Disarms a timer; returns its payload if it had not fired yet.
    pub fn cancel(&mut self, id: TimerId) -> Option<T> {
        let payload = self.live.remove(&id);
        self.drop_dead_head();
        payload
    }

    /// The earliest live deadline.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        self.drop_dead_head();
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Removes and returns one timer whose deadline is at or before `now`.
    pub fn pop_expired(&mut self, now: Instant) -> Option<T> {
        while let Some(&Reverse((at, id))) = self.heap.peek() {
            if at > now {
                return None;
            }
            self.heap.pop();
            if let Some(payload) = self.live.remove(&id) {
                return Some(payload);
            }
        }
        None
    }

    /// Number of armed timers.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    // Cancelled entries stay in the heap until they reach the top; drop them
    // there so the heap cannot grow without bound under arm/cancel churn.
    fn drop_dead_head(&mut self) {
        while let Some(Reverse((_, id))) = self.heap.peek() {
            if self.live.contains_key(id) {
                break;
            }
            self.heap.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn t(us: u64) -> Instant {
        Instant::from_micros(us)
    }

    #[test]
    fn fires_in_deadline_then_arming_order() {
        let mut q = TimerQueue::new();
        q.arm(t(30), "c");
        q.arm(t(10), "a");
        q.arm(t(10), "b");
        assert_eq!(q.next_deadline(), Some(t(10)));
        assert_eq!(q.pop_expired(t(9)), None);
        let fired: Vec<_> = core::iter::from_fn(|| q.pop_expired(t(30))).collect();
        assert_eq!(fired, ["a", "b", "c"]);
        assert!(q.is_empty());
        assert_eq!(q.next_deadline(), None);
    }

    #[test]
    fn cancel_removes_and_is_idempotent() {
        let mut q = TimerQueue::new();
        let a = q.arm(t(5), 1);
        q.arm(t(7), 2);
        assert_eq!(q.cancel(a), Some(1));
        assert_eq!(q.cancel(a), None);
        assert_eq!(q.next_deadline(), Some(t(7)));
        assert_eq!(q.pop_expired(t(100)), Some(2));
        assert_eq!(q.pop_expired(t(100)), None);
    }

    #[test]
    fn churn_does_not_grow_the_heap() {
        let mut q = TimerQueue::new();
        for i in 0..10_000 {
            let id = q.arm(t(i), i);
            q.cancel(id);
        }
        assert_eq!(q.heap.len(), 0);
    }

    proptest::proptest! {
        #[test]
        fn matches_a_sorted_model(ops in proptest::collection::vec((0u64..50, proptest::bool::ANY), 1..200)) {
            let mut q = TimerQueue::new();
            let mut model: Vec<(u64, usize)> = Vec::new();
            let mut ids = Vec::new();
            for (i, (at, cancel_prev)) in ops.iter().enumerate() {
                if *cancel_prev && !ids.is_empty() {
                    let (id, n) = ids.remove(0);
                    q.cancel(id);
                    model.retain(|&(_, m)| m != n);
                }
                ids.push((q.arm(t(*at), i), i));
                model.push((*at, i));
            }
            model.sort();
            let fired: Vec<_> = core::iter::from_fn(|| q.pop_expired(t(u64::MAX))).collect();
            let expected: Vec<_> = model.iter().map(|&(_, i)| i).collect();
            proptest::prop_assert_eq!(fired, expected);
        }
    }
}
