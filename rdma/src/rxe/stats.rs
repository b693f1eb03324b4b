//! What the transport counts: Linux rxe's hardware counters by their names
//! (`rxe_hw_counters.c`, kept in [`crate::core::counters`]), one counter per reason a
//! received frame was dropped (the wire codec's reasons and the transport's own), and
//! the retransmission figures the benchmark and pacing look at.

use crate::core::counters::{Counters, RxeCounter};
use crate::wire::frame::{DropCounters, DropReason};

/// Every counter of one transport instance.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Linux rxe's counters by name.
    pub rxe: Counters,
    /// Frames dropped, per reason: the wire codec's and the transport's own.
    pub drops: DropCounters,
    /// Request packets sent again (go-back-N after a timeout or NAK, RNR retries).
    pub retransmitted_pkts: u64,
    /// Retransmit timer expiries.
    pub timeouts: u64,
    /// Times the requester went back to an earlier PSN.
    pub rewinds: u64,
    /// ACKs for PSNs never sent ("ghost" ACKs), ignored.
    pub ghost_acks: u64,
    /// Frames the TX sink had no room for.
    pub tx_full: u64,
    /// Frames whose payload (from memory) the sink sent from where it lies, and
    /// frames whose payload from memory was copied into the sink's buffer.
    pub tx_zero_copy: u64,
    pub tx_copied: u64,
    /// Implied NAKs: a response past a READ/atomic still unanswered.
    pub implied_naks: u64,
    /// Times pacing shrank a QP's window after a loss.
    pub window_cuts: u64,
    /// QPs moved to their alternate path ([`super::apm`]).
    pub path_migrations: u64,
}

impl Stats {
    pub fn inc(&mut self, c: RxeCounter) {
        self.rxe.inc(c);
    }

    pub fn get(&self, c: RxeCounter) -> u64 {
        self.rxe.get(c)
    }

    /// Counts a frame dropped for `reason` (the wire codec's or ours).
    pub fn drop(&mut self, reason: DropReason) {
        self.drops.record(reason);
    }

    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops.get(reason)
    }

    /// Frames dropped for any reason, wire or transport.
    pub fn total_drops(&self) -> u64 {
        self.drops.total()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn drop_reasons_index_their_counters() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        let mut s = Stats::default();
        s.drop(DropReason::BadQkey);
        s.drop(DropReason::BadIcrc);
        assert_eq!(s.dropped(DropReason::BadQkey), 1);
        assert_eq!(s.total_drops(), 2);
        assert_eq!(
            s.drops.nonzero().map(|(r, n)| (r.name(), n)).collect::<alloc::vec::Vec<_>>(),
            [("bad_icrc", 1), ("bad_qkey", 1)]
        );
    }
}
