//! What one transport instance's engines share besides the QP they run on: the object
//! pools, the memory, the counters, the async event queue, the IP ID counter and the
//! port's addresses (Linux keeps the same in `struct rxe_dev`).

use alloc::collections::VecDeque;

use crate::wire::frame::IpId;

use super::ah::{Ah, LocalPort};
use super::cq::{Cq, CqHandle};
use super::event::AsyncEvent;
use super::mr::Mr;
use super::mw::Mw;
use super::pd::Pd;
use super::pool::Pool;
use super::srq::Srq;
use super::stats::Stats;
use super::wc::WorkCompletion;

/// Tunables of one transport instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Pacing: the most PSNs an RC QP keeps unacknowledged (rxe's
    /// `RXE_MAX_UNACKED_PSNS` is 128).
    pub max_window: u32,
    /// Pacing: the most payload bytes an RC QP keeps unacknowledged (0: no
    /// limit but `max_window`). Whatever is unacknowledged may sit in the
    /// receiver's queues at once, so this bounds the burst a receiver must
    /// absorb. 256 KiB (64 packets at MTU 4096) fills a deep wire under
    /// QEMU (a 64 KiB WRITE between two appliances: ~1.7x the rate of 96
    /// KiB, measured); where a path holds less (QEMU's own UDP socket keeps
    /// ~24 such frames) the window settles below it after a loss (see
    /// `completer`), at the same rate as a 96 KiB cap, measured.
    pub max_inflight_bytes: u32,
    /// Pacing: the window never shrinks below this.
    pub min_window: u32,
    /// Ask for an ACK at least every this many packets (rxe's `RXE_MAX_PKT_PER_ACK`).
    pub max_pkt_per_ack: u32,
    /// Hold the ACKs that requests ask for until a few frames later or the end
    /// of the batch ([`RxeTransport::end_batch`], or `poll`), sending one per QP
    /// for everything received by then (ACKs are cumulative): a burst of
    /// single-packet messages then costs a few ACK frames, not one each. NAKs
    /// and the answers to duplicates still go out at once. On by default: a
    /// Linux requester asks for an ACK on every message, and each one it
    /// receives costs its guest as much as a message sent (64 B WRITEs from
    /// Linux: 1.25x the rate with it, measured under QEMU).
    ///
    /// [`RxeTransport::end_batch`]: super::transport::RxeTransport::end_batch
    pub coalesce_acks: bool,
    /// With `coalesce_acks`: received frames between two flushes of the ACKs
    /// held back, besides the one at the batch's end. Few enough that a
    /// requester waiting on one is not held up long (under TCG a frame takes
    /// ~20 us, and a requester asks every half window), enough to fold a
    /// burst of small messages' ACKs into one.
    pub ack_batch: u32,
    /// Most READ response packets sent per call before yielding to other work.
    pub read_burst: u32,
    /// Largest message a work request may carry (rxe's `max_msg_sz`).
    pub max_msg_size: u32,
    /// Async events kept before the oldest are dropped.
    pub max_events: usize,
    /// The seed of the MR and MW key bytes ([`super::keys`]): fixed by
    /// default, so simulations replay; the kernel sets it from the
    /// platform's entropy at boot, and each new device forks its own.
    pub key_seed: [u8; 32],
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_window: 128,
            max_inflight_bytes: 256 * 1024,
            min_window: 4,
            max_pkt_per_ack: 64,
            coalesce_acks: true,
            ack_batch: 4,
            read_burst: 64,
            max_msg_size: crate::core::rxe_params::MAX_MSG_SZ,
            max_events: 256,
            key_seed: *b"rxe default key seed: tests only",
        }
    }
}

/// The shared part of a transport.
pub struct Device<M> {
    pub mem: M,
    pub pds: Pool<Pd>,
    pub mrs: Pool<Mr>,
    pub mws: Pool<Mw>,
    pub cqs: Pool<Cq>,
    pub srqs: Pool<Srq>,
    pub ahs: Pool<Ah>,
    pub stats: Stats,
    pub events: VecDeque<AsyncEvent>,
    pub ip_id: IpId,
    pub port: LocalPort,
    pub config: Config,
}

impl<M> Device<M> {
    /// Raises an async event; the oldest is dropped when the queue is full.
    pub fn event(&mut self, ev: AsyncEvent) {
        if self.events.len() >= self.config.max_events {
            self.events.pop_front();
        }
        self.events.push_back(ev);
    }

    /// Posts a completion; a full CQ loses it and raises CQ_ERR.
    pub fn complete(&mut self, cq: CqHandle, wc: WorkCompletion) {
        let overflow = match self.cqs.get_mut(cq.0) {
            Some(q) => q.push(wc).is_err(),
            None => false,
        };
        if overflow {
            self.event(AsyncEvent::CqErr(cq));
        }
    }
}
