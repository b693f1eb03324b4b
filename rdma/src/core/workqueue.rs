//! The one ordered work queue through which every GID cache and port update
//! flows (seed §4: Linux queues netdev and address events to the ordered
//! `gid-cache-wq`, so updates apply one at a time in event order).
//!
//! The kernel's notifier callbacks only enqueue; the poll loop drains. The
//! queue is bounded so a storm of events cannot exhaust memory: a full queue
//! refuses the event with [`Error::QueueFull`] (the caller drains and retries)
//! and counts the refusal.

use alloc::collections::VecDeque;

use super::error::Error;

/// Default bound on queued events.
pub const DEFAULT_QUEUE_LIMIT: usize = 1024;

/// A bounded FIFO of work items.
#[derive(Debug)]
pub struct OrderedQueue<T> {
    items: VecDeque<T>,
    limit: usize,
    refused: u64,
}

impl<T> OrderedQueue<T> {
    /// A queue holding at most `limit` items (at least one).
    pub fn new(limit: usize) -> Self {
        OrderedQueue { items: VecDeque::new(), limit: limit.max(1), refused: 0 }
    }

    /// Append, or refuse when full.
    pub fn push(&mut self, item: T) -> Result<(), Error> {
        if self.items.len() >= self.limit {
            self.refused += 1;
            return Err(Error::QueueFull);
        }
        self.items.push_back(item);
        Ok(())
    }

    /// The oldest item.
    pub fn pop(&mut self) -> Option<T> {
        self.items.pop_front()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// How many pushes were refused because the queue was full.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order() {
        let mut q = OrderedQueue::new(4);
        for i in 0..3 {
            q.push(i).unwrap();
        }
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop(), Some(0));
        q.push(3).unwrap();
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.pop(), Some(2));
        assert_eq!(q.pop(), Some(3));
        assert_eq!(q.pop(), None);
        assert!(q.is_empty());
    }

    #[test]
    fn full_queue_refuses_and_counts() {
        let mut q = OrderedQueue::new(2);
        q.push(1).unwrap();
        q.push(2).unwrap();
        assert_eq!(q.push(3), Err(Error::QueueFull));
        assert_eq!(q.refused(), 1);
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.push(3), Ok(()));
        assert_eq!(q.pop(), Some(2));
        assert_eq!(q.pop(), Some(3));
    }

    #[test]
    fn zero_limit_still_holds_one() {
        let mut q = OrderedQueue::new(0);
        assert_eq!(q.push(1), Ok(()));
        assert_eq!(q.push(2), Err(Error::QueueFull));
    }
}
