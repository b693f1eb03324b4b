//! Shared receive queues (IBA vol. 1 10.2.9, 11.2.3): receive WQEs any QP attached to
//! the SRQ may consume. When armed with a limit, the SRQ raises
//! [`AsyncEvent::SrqLimitReached`](super::event::AsyncEvent::SrqLimitReached) once its
//! WQE count falls below it, and disarms (IBA 10.2.9.4, `IBV_SRQ_LIMIT`).

use super::pd::PdHandle;
use super::pool::handle_type;
use super::queue::RecvQueue;

handle_type! {
    /// A shared receive queue.
    SrqHandle
}

/// A shared receive queue.
#[derive(Debug)]
pub struct Srq {
    pub pd: PdHandle,
    pub queue: RecvQueue,
    /// Armed limit; 0 when disarmed.
    pub limit: u32,
    pub(crate) users: u32,
}

impl Srq {
    pub fn new(pd: PdHandle, max_wr: usize, max_sge: usize) -> Srq {
        Srq { pd, queue: RecvQueue::new(max_wr, max_sge), limit: 0, users: 0 }
    }

    /// After a WQE was taken: whether the limit event fires now (and disarm it).
    pub fn take_limit_event(&mut self) -> bool {
        if self.limit != 0 && (self.queue.len() as u64) < u64::from(self.limit) {
            self.limit = 0;
            return true;
        }
        false
    }
}
