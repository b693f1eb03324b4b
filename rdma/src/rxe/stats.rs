//! What the transport counts: Linux rxe's hardware counters by their names
//! (`rxe_hw_counters.c`, kept in [`crate::core::counters`]), one counter per reason a
//! received frame was dropped (the wire codec's reasons and the transport's own), and
//! the retransmission figures the benchmark and pacing look at.

use core::fmt;

use crate::core::counters::{Counters, RxeCounter};
use crate::wire::frame::{DropCounters, DropReason};

/// Why the transport dropped a frame that the wire codec accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RxDrop {
    /// The BTH names a QPN no QP has.
    NoSuchQp,
    /// The QP's state does not take packets (RESET, INIT, ERR; requests before RTR).
    QpState,
    /// The opcode belongs to another transport than the QP's type.
    WrongQpType,
    /// The P_Key is neither the default nor its limited form.
    BadPkey,
    /// UD/GSI: the DETH Q_Key is not the QP's.
    BadQkey,
    /// The destination IP is not one of ours, or a connected QP heard from a stranger.
    BadAddress,
    /// RC: a request ahead of the expected PSN after the one sequence NAK was sent.
    OutOfSequence,
    /// UC: a packet of a message whose beginning was lost.
    UcGap,
    /// UD/UC: no receive WQE was posted (these transports cannot send RNR NAK).
    NoRecvWqe,
    /// UD: a payload over the path MTU.
    TooLong,
    /// A response whose PSN was never sent (a "ghost" ACK) or that nothing waits for.
    UnexpectedResponse,
    /// A response for a PSN already completed.
    DuplicateResponse,
    /// A READ response with the wrong length or position.
    BadResponse,
    /// A duplicate READ or atomic whose saved responder resource was overwritten.
    NoResource,
    /// A request arrived while a READ response was still being sent.
    ResponderBusy,
    /// A request opcode out of order within a message (e.g. MIDDLE without FIRST), UC.
    BadOpSequence,
    /// A response opcode on a QP type that never gets responses, or a CNP.
    Unsupported,
}

impl RxDrop {
    pub const COUNT: usize = 17;

    pub const ALL: [RxDrop; RxDrop::COUNT] = [
        RxDrop::NoSuchQp,
        RxDrop::QpState,
        RxDrop::WrongQpType,
        RxDrop::BadPkey,
        RxDrop::BadQkey,
        RxDrop::BadAddress,
        RxDrop::OutOfSequence,
        RxDrop::UcGap,
        RxDrop::NoRecvWqe,
        RxDrop::TooLong,
        RxDrop::UnexpectedResponse,
        RxDrop::DuplicateResponse,
        RxDrop::BadResponse,
        RxDrop::NoResource,
        RxDrop::ResponderBusy,
        RxDrop::BadOpSequence,
        RxDrop::Unsupported,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            RxDrop::NoSuchQp => "no_such_qp",
            RxDrop::QpState => "qp_state",
            RxDrop::WrongQpType => "wrong_qp_type",
            RxDrop::BadPkey => "bad_pkey",
            RxDrop::BadQkey => "bad_qkey",
            RxDrop::BadAddress => "bad_address",
            RxDrop::OutOfSequence => "out_of_sequence",
            RxDrop::UcGap => "uc_gap",
            RxDrop::NoRecvWqe => "no_recv_wqe",
            RxDrop::TooLong => "too_long",
            RxDrop::UnexpectedResponse => "unexpected_response",
            RxDrop::DuplicateResponse => "duplicate_response",
            RxDrop::BadResponse => "bad_response",
            RxDrop::NoResource => "no_resource",
            RxDrop::ResponderBusy => "responder_busy",
            RxDrop::BadOpSequence => "bad_op_sequence",
            RxDrop::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for RxDrop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every counter of one transport instance.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Linux rxe's counters by name.
    pub rxe: Counters,
    /// Frames the wire codec refused, per reason.
    pub wire_drops: DropCounters,
    drops: [u64; RxDrop::COUNT],
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
    /// Implied NAKs: a response past a READ/atomic still unanswered.
    pub implied_naks: u64,
    /// Times pacing shrank a QP's window after a loss.
    pub window_cuts: u64,
}

impl Stats {
    pub fn inc(&mut self, c: RxeCounter) {
        self.rxe.inc(c);
    }

    pub fn get(&self, c: RxeCounter) -> u64 {
        self.rxe.get(c)
    }

    pub fn drop(&mut self, reason: RxDrop) {
        let slot = &mut self.drops[reason as usize];
        *slot = slot.saturating_add(1);
    }

    pub fn wire_drop(&mut self, reason: DropReason) {
        self.wire_drops.record(reason);
    }

    pub fn dropped(&self, reason: RxDrop) -> u64 {
        self.drops[reason as usize]
    }

    /// `(name, count)` for every transport drop reason.
    pub fn drops(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        RxDrop::ALL.iter().map(|r| (r.name(), self.dropped(*r)))
    }

    /// Frames dropped for any reason, wire or transport.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum::<u64>() + self.wire_drops.iter().map(|(_, n)| n).sum::<u64>()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn drop_reasons_index_their_counters() {
        for (i, r) in RxDrop::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        let mut s = Stats::default();
        s.drop(RxDrop::BadQkey);
        s.wire_drop(DropReason::BadIcrc);
        assert_eq!(s.dropped(RxDrop::BadQkey), 1);
        assert_eq!(s.total_drops(), 2);
        assert_eq!(s.drops().find(|(n, _)| *n == "bad_qkey"), Some(("bad_qkey", 1)));
    }
}
