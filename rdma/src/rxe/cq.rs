//! Completion queues (IBA vol. 1 10.2.6, 11.4.2): a ring of work completions with a
//! fixed depth. A completion that finds the ring full is dropped and the CQ reports an
//! overrun (IBA 11.6.3.1 "CQ error"); the transport turns that into an
//! [`AsyncEvent::CqErr`](super::event::AsyncEvent::CqErr), as Linux rxe's
//! `rxe_cq_post` raises `IB_EVENT_CQ_ERR`.

use alloc::collections::VecDeque;

use super::pool::handle_type;
use super::wc::WorkCompletion;

handle_type! {
    /// A completion queue.
    CqHandle
}

/// The CQ was full; the completion was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqOverflow;

/// A completion queue.
#[derive(Debug)]
pub struct Cq {
    ring: VecDeque<WorkCompletion>,
    depth: usize,
    /// Completions lost to overflow since creation.
    pub overruns: u64,
    /// QPs using this CQ (it cannot be destroyed under them).
    pub(crate) users: u32,
    /// Armed by `req_notify_cq`; a completion clears it and counts an event.
    pub(crate) armed: bool,
    /// Completion events since creation (how many times an armed CQ got an entry).
    pub events: u64,
}

impl Cq {
    /// A CQ holding `depth` completions; the ring is allocated here, never on the hot
    /// path.
    pub fn new(depth: usize) -> Cq {
        Cq { ring: VecDeque::with_capacity(depth), depth, overruns: 0, users: 0, armed: false, events: 0 }
    }

    pub fn depth(&self) -> usize {
        self.depth
    }

    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Appends a completion.
    pub fn push(&mut self, wc: WorkCompletion) -> Result<(), CqOverflow> {
        if self.ring.len() >= self.depth {
            self.overruns += 1;
            return Err(CqOverflow);
        }
        self.ring.push_back(wc);
        if self.armed {
            self.armed = false;
            self.events += 1;
        }
        Ok(())
    }

    /// Moves up to `out.len()` completions, oldest first, into `out`.
    pub fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        let mut n = 0;
        for slot in out.iter_mut() {
            match self.ring.pop_front() {
                Some(wc) => *slot = wc,
                None => break,
            }
            n += 1;
        }
        n
    }

    /// The oldest completion.
    pub fn pop(&mut self) -> Option<WorkCompletion> {
        self.ring.pop_front()
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::rxe::wc::{WcOpcode, WcStatus};

    #[test]
    fn overflow_drops_and_counts() {
        let mut cq = Cq::new(2);
        let wc = |id| WorkCompletion::new(id, WcStatus::Success, WcOpcode::Send, 17);
        assert_eq!(cq.push(wc(1)), Ok(()));
        assert_eq!(cq.push(wc(2)), Ok(()));
        assert_eq!(cq.push(wc(3)), Err(CqOverflow));
        assert_eq!(cq.overruns, 1);
        let mut out = [wc(0); 4];
        assert_eq!(cq.poll(&mut out), 2);
        assert_eq!((out[0].wr_id, out[1].wr_id), (1, 2));
        assert!(cq.is_empty());
    }
}
