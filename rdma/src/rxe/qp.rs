//! Queue pairs (IBA vol. 1 10.2.4, 11.2.4): the attributes a consumer sets, the send
//! queue of WQEs with their progress, and the per-QP state of the three engines that
//! share it, as Linux rxe splits them (`rxe_qp.c`: `req`, `comp`, `resp`).

use alloc::vec;
use alloc::vec::Vec;

use crate::core::port::IbMtu;
use crate::wire::frame::Path;
use crate::wire::{Psn, Syndrome};

use super::ah::AhAttr;
use super::cq::CqHandle;
use super::device::Config;
use super::mr::AccessFlags;
use super::pd::PdHandle;
use super::pool::handle_type;
use super::qp_state::{QpState, QpType};
use super::queue::{PostError, RecvQueue, Ring, store_sges};
use super::srq::SrqHandle;
use super::time::Instant;
use super::wc::WcStatus;
use super::wr::{MemOp, RemoteOp, SendFlags, SendWr, Sge, UdDest, WrOpcode};

handle_type! {
    /// A queue pair. Its QPN is separate: see [`super::transport::RxeTransport::qpn`].
    QpHandle
}

/// The Q_Key of the GSI QP (IBA vol. 1 13.4.6.1: QP1's well-known Q_Key).
pub const GSI_QKEY: u32 = 0x8001_0000;
/// The QPN of the GSI QP (the ring's listing names it too).
pub use verbs_ring::cmd::GSI_QPN;
/// QPNs below this are reserved (0 SMI, 1 GSI), as in rxe (`RXE_MIN_QP_INDEX`).
pub const FIRST_QPN: u32 = 16;
/// The most READ/atomic requests a QP may have outstanding, and the most responder
/// resources it keeps (rxe's `max_qp_rd_atom`).
pub const MAX_RD_ATOMIC: u8 = 128;
/// The RNR and transport retry count that means "retry forever" for RNR only.
pub const INFINITE_RNR_RETRY: u8 = 7;

/// Queue sizes asked for at creation (`struct ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

impl Default for QpCap {
    fn default() -> Self {
        QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 256 }
    }
}

/// `struct ibv_qp_init_attr`.
#[derive(Debug, Clone, Copy)]
pub struct QpInitAttr {
    pub qp_type: QpType,
    pub pd: PdHandle,
    pub send_cq: CqHandle,
    pub recv_cq: CqHandle,
    pub srq: Option<SrqHandle>,
    pub cap: QpCap,
    /// Every send WR completes with a CQE, signaled or not.
    pub sq_sig_all: bool,
}

/// `enum ibv_mig_state`: where automatic path migration stands (IBA vol. 1
/// 17.2.8). Linux rxe stores what the consumer sets and never moves it;
/// here an ARMED connected QP also migrates (see [`super::apm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigState {
    /// No alternate path in use: where a QP starts, and where it is after
    /// migrating.
    #[default]
    Migrated,
    /// The consumer loaded an alternate path and asked to arm it.
    Rearm,
    /// The alternate path is armed: the QP moves to it when its primary
    /// path fails.
    Armed,
}

impl MigState {
    /// From `enum ibv_mig_state`'s value; `None` for one it does not have.
    pub fn from_raw(v: u32) -> Option<MigState> {
        match v {
            0 => Some(MigState::Migrated),
            1 => Some(MigState::Rearm),
            2 => Some(MigState::Armed),
            _ => None,
        }
    }

    /// `enum ibv_mig_state`'s value.
    pub fn raw(self) -> u32 {
        match self {
            MigState::Migrated => 0,
            MigState::Rearm => 1,
            MigState::Armed => 2,
        }
    }
}

/// `struct ibv_qp_attr`: the attributes modify-QP sets and query-QP reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    pub qp_state: QpState,
    pub cur_qp_state: QpState,
    pub path_mtu: IbMtu,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: AccessFlags,
    pub ah_attr: AhAttr,
    pub pkey_index: u16,
    pub en_sqd_async_notify: bool,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code this QP asks senders to wait (5 bits, `aeth::rnr_timer_micros`).
    pub min_rnr_timer: u8,
    pub port_num: u8,
    /// Local ACK timeout code: 4.096 µs × 2^timeout, 0 = no timer.
    pub timeout: u8,
    /// Transport retries after a timeout or sequence NAK: 0..=7, 7 meaning seven.
    pub retry_cnt: u8,
    /// RNR retries: 0..=6, 7 meaning forever.
    pub rnr_retry: u8,
    pub path_mig_state: MigState,
    /// The alternate path (`IBV_QP_ALT_PATH`): address vector, P_Key index,
    /// port and local ACK timeout the QP takes when it migrates.
    pub alt_ah_attr: AhAttr,
    pub alt_pkey_index: u16,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            path_mtu: IbMtu::Mtu1024,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qp_num: 0,
            qp_access_flags: AccessFlags(0),
            ah_attr: AhAttr::default(),
            pkey_index: 0,
            en_sqd_async_notify: false,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 0,
            port_num: 1,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            path_mig_state: MigState::Migrated,
            // No alternate path loaded: zeros, as Linux answers a QP that
            // never got one.
            alt_ah_attr: AhAttr { port_num: 0, ..AhAttr::default() },
            alt_pkey_index: 0,
            alt_port_num: 0,
            alt_timeout: 0,
        }
    }
}

/// Where a send WQE stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WqeState {
    /// Not started.
    #[default]
    Posted,
    /// Some packets sent.
    Sending,
    /// Every packet sent; waiting for the ACK or response (RC).
    Sent,
    /// Finished without error; completes when it reaches the head.
    Done,
    /// Failed locally; completes with this status when it reaches the head, and the
    /// QP then goes to the error state.
    Error(WcStatus),
}

/// A posted send WQE and its progress.
#[derive(Debug, Clone, Copy)]
pub struct SendWqe {
    pub wr_id: u64,
    pub opcode: WrOpcode,
    pub flags: SendFlags,
    pub imm_or_rkey: u32,
    pub remote: RemoteOp,
    pub ud: Option<UdDest>,
    /// REG_MR and BIND_MW: what to register or bind.
    pub mem: MemOp,
    pub num_sge: u32,
    /// Message length: the SGEs' sum, or the inline data's length.
    pub length: u32,
    pub inline: bool,
    pub state: WqeState,
    /// PSNs were assigned (it was sent at least once, maybe in full). A rewind keeps
    /// the assignment: resending gives every packet the same PSN again.
    pub assigned: bool,
    pub first_psn: Psn,
    pub last_psn: Psn,
}

impl Default for SendWqe {
    fn default() -> Self {
        SendWqe {
            wr_id: 0,
            opcode: WrOpcode::Send,
            flags: SendFlags(0),
            imm_or_rkey: 0,
            remote: RemoteOp::default(),
            ud: None,
            mem: MemOp::None,
            num_sge: 0,
            length: 0,
            inline: false,
            state: WqeState::Posted,
            assigned: false,
            first_psn: Psn::new(0),
            last_psn: Psn::new(0),
        }
    }
}

/// The send queue: WQEs, their SGEs and their inline data, all sized at creation.
#[derive(Debug)]
pub struct SendQueue {
    pub ring: Ring<SendWqe>,
    sges: Vec<Sge>,
    inline: Vec<u8>,
    max_sge: usize,
    max_inline: usize,
}

impl SendQueue {
    pub fn new(cap: &QpCap) -> SendQueue {
        let ring: Ring<SendWqe> = Ring::new(cap.max_send_wr as usize);
        let slots = ring.slot_count();
        SendQueue {
            sges: vec![Sge::default(); slots * cap.max_send_sge as usize],
            inline: vec![0; slots * cap.max_inline_data as usize],
            ring,
            max_sge: cap.max_send_sge as usize,
            max_inline: cap.max_inline_data as usize,
        }
    }

    /// Copies a work request in.
    pub fn post(&mut self, wr: &SendWr<'_>) -> Result<u64, PostError> {
        let inline = wr.flags.has(SendFlags::INLINE);
        if inline && wr.inline_data.len() > self.max_inline {
            return Err(PostError::InlineTooLong);
        }
        if !inline && wr.sg_list.len() > self.max_sge {
            return Err(PostError::TooManySge);
        }
        if self.ring.is_full() {
            return Err(PostError::Full);
        }
        let length = if inline {
            wr.inline_data.len() as u64
        } else {
            wr.sg_list.iter().map(|s| u64::from(s.length)).sum::<u64>()
        };
        let wqe = SendWqe {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            flags: wr.flags,
            imm_or_rkey: wr.imm_or_rkey,
            remote: wr.remote,
            ud: wr.ud,
            mem: wr.mem,
            num_sge: if inline { 0 } else { wr.sg_list.len() as u32 },
            // Longer than 2^31 is refused later (LOC_LEN_ERR); saturate so it is.
            length: u32::try_from(length).unwrap_or(u32::MAX),
            inline,
            ..SendWqe::default()
        };
        let pos = self.ring.push(wqe)?;
        let slot = self.ring.slot_of(pos);
        if inline {
            let base = slot * self.max_inline;
            self.inline[base..base + wr.inline_data.len()].copy_from_slice(wr.inline_data);
        } else {
            let base = slot * self.max_sge;
            store_sges(&mut self.sges[base..base + wr.sg_list.len()], wr.sg_list);
        }
        Ok(pos)
    }

    /// The SGEs of the WQE at `pos`.
    pub fn sges(&self, pos: u64) -> &[Sge] {
        let n = self.ring.get(pos).map_or(0, |w| w.num_sge as usize);
        let base = self.ring.slot_of(pos) * self.max_sge;
        &self.sges[base..base + n]
    }

    /// The inline data of the WQE at `pos`.
    pub fn inline_data(&self, pos: u64) -> &[u8] {
        let n = self.ring.get(pos).filter(|w| w.inline).map_or(0, |w| w.length as usize);
        let base = self.ring.slot_of(pos) * self.max_inline;
        &self.inline[base..base + n]
    }
}

/// The requester and completer state (rxe's `qp->req` and `qp->comp`).
#[derive(Debug, Clone)]
pub struct ReqState {
    /// The next PSN to send.
    pub psn: Psn,
    /// One past the highest PSN ever sent: packets below it are retransmissions.
    pub max_psn: Psn,
    /// SQ position of the WQE the requester works on.
    pub next: u64,
    /// Bytes of that WQE already sent (READ: already asked for).
    pub offset: u32,
    /// Packets since the last AckReq.
    pub noack_pkts: u32,
    /// READ/atomic WQEs started and not completed.
    pub rd_atomic: u32,
    /// The oldest PSN not yet acknowledged (for READ: the next response expected).
    pub comp_psn: Psn,
    /// Transport retries left before RETRY_EXC_ERR.
    pub retry_left: u8,
    /// RNR retries left before RNR_RETRY_EXC_ERR (unused when `rnr_retry` is 7).
    pub rnr_left: u8,
    /// When the retransmit timer fires.
    pub timer: Option<Instant>,
    /// Retransmit timeouts in a row without progress, up to
    /// `completer::MAX_BACKOFF`: the timer runs the Local ACK Timeout × 2^this.
    pub backoff: u8,
    /// While set, an RNR NAK holds the requester until then.
    pub rnr_until: Option<Instant>,
    /// The PSN the last NAK-driven rewind went back to, until progress passes it.
    pub rewound_to: Option<Psn>,
    /// Pacing: PSNs allowed in flight.
    pub window: u32,
    /// Pacing: the window at the last cut. At or above it the window grows
    /// by one per window of packets acknowledged, below it by one per ACK
    /// (`u32::MAX` until the first loss: the window starts at its cap).
    pub threshold: u32,
    /// Pacing: packets acknowledged toward the next step of growth at or
    /// above `threshold`.
    pub acked_toward_growth: u32,
    /// Pacing: the loss episode of the last cut lasts until everything sent
    /// before it (up to this PSN) is acknowledged; the NAKs of one overrun are
    /// one loss, not one each.
    pub recover: Option<Psn>,
}

impl ReqState {
    pub fn new(window: u32) -> ReqState {
        ReqState {
            psn: Psn::new(0),
            max_psn: Psn::new(0),
            next: 0,
            offset: 0,
            noack_pkts: 0,
            rd_atomic: 0,
            comp_psn: Psn::new(0),
            retry_left: 0,
            rnr_left: 0,
            timer: None,
            backoff: 0,
            rnr_until: None,
            rewound_to: None,
            window,
            threshold: u32::MAX,
            acked_toward_growth: 0,
            recover: None,
        }
    }
}

/// A saved responder resource (IBA vol. 1 9.7.5.1.1 "responder resources"): what a
/// duplicate READ or atomic needs to be answered without executing it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// A READ request covering `first..=last` response PSNs.
    Read { first: Psn, last: Psn },
    /// An atomic at `psn` and the value it returned.
    Atomic { psn: Psn, orig: u64 },
    /// An IBA 1.5 FLUSH or ATOMIC WRITE at `psn`: a duplicate is answered
    /// again, never executed again (oA19-14, oA19-15).
    Placed { psn: Psn },
}

/// READ responses still to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadReply {
    pub rkey: u32,
    pub va: u64,
    pub length: u32,
    /// Bytes already sent.
    pub offset: u32,
    /// PSN of the first packet of this reply (FIRST/ONLY).
    pub first_psn: Psn,
}

/// The message a responder is in the middle of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InMessage {
    #[default]
    None,
    /// A SEND: bytes received so far into the held receive WQE.
    Send { offset: u64 },
    /// An RDMA WRITE: where the next byte goes and how many are still due.
    Write { rkey: u32, va: u64, remaining: u32, total: u32 },
    /// UC: a message whose start was lost or refused; drop until the next FIRST/ONLY.
    Dropping,
}

/// A receive WQE taken from an SRQ for the message in progress.
#[derive(Debug, Clone, Default)]
pub struct HeldWqe {
    pub wr_id: u64,
    pub length: u64,
    pub sges: Vec<Sge>,
}

/// The responder state (rxe's `qp->resp`).
#[derive(Debug, Clone)]
pub struct RespState {
    /// The next PSN expected.
    pub psn: Psn,
    /// Messages completed (24 bits on the wire).
    pub msn: u32,
    /// A sequence NAK was sent for the current gap; stay silent until it closes.
    pub nak_sent: bool,
    pub msg: InMessage,
    /// SRQ: the WQE taken for the SEND in progress (valid while `has_held`; the
    /// buffer is kept so taking the next WQE does not allocate).
    pub held: HeldWqe,
    pub has_held: bool,
    /// Saved READ/atomic results, oldest overwritten first.
    pub resources: Vec<Resource>,
    pub next_resource: usize,
    pub read: Option<ReadReply>,
    /// A packet arrived since RTR (for COMM_EST).
    pub established: bool,
    /// An acknowledgement (PSN, syndrome) the NIC refused, to send again, or
    /// an ACK held back to be coalesced (`Config::coalesce_acks`).
    pub owed_ack: Option<(Psn, Syndrome)>,
}

impl RespState {
    pub fn new() -> RespState {
        RespState {
            psn: Psn::new(0),
            msn: 0,
            nak_sent: false,
            msg: InMessage::None,
            held: HeldWqe::default(),
            has_held: false,
            resources: Vec::new(),
            next_resource: 0,
            read: None,
            established: false,
            owed_ack: None,
        }
    }

    /// Saves a resource, overwriting the oldest when all `max` are in use.
    pub fn save(&mut self, res: Resource, max: usize) {
        let max = max.max(1);
        if self.resources.len() < max {
            self.resources.push(res);
            self.next_resource = self.resources.len() % max;
        } else {
            let at = self.next_resource % self.resources.len();
            self.resources[at] = res;
            self.next_resource = (at + 1) % max;
        }
    }

    /// The saved READ covering `psn`.
    pub fn find_read(&self, psn: Psn) -> Option<Resource> {
        self.resources.iter().copied().find(|r| match *r {
            Resource::Read { first, last } => !psn.is_before(first) && !psn.is_after(last),
            Resource::Atomic { .. } | Resource::Placed { .. } => false,
        })
    }

    /// Whether a FLUSH or ATOMIC WRITE at `psn` was executed.
    pub fn find_placed(&self, psn: Psn) -> bool {
        self.resources.iter().any(|r| matches!(*r, Resource::Placed { psn: p } if p == psn))
    }

    /// The saved atomic at `psn`.
    pub fn find_atomic(&self, psn: Psn) -> Option<u64> {
        self.resources.iter().find_map(|r| match *r {
            Resource::Atomic { psn: p, orig } if p == psn => Some(orig),
            _ => None,
        })
    }
}

impl Default for RespState {
    fn default() -> Self {
        Self::new()
    }
}

/// A queue pair.
#[derive(Debug)]
pub struct Qp {
    pub qpn: u32,
    pub qp_type: QpType,
    pub state: QpState,
    pub pd: PdHandle,
    pub send_cq: CqHandle,
    pub recv_cq: CqHandle,
    pub srq: Option<SrqHandle>,
    pub sq_sig_all: bool,
    pub cap: QpCap,
    pub attr: QpAttr,
    /// The connected QP's path, from its address vector at RTR.
    pub path: Option<Path>,
    /// The path its alternate address vector names, once one was loaded.
    pub alt_path: Option<Path>,
    pub sq: SendQueue,
    pub rq: RecvQueue,
    pub req: ReqState,
    pub resp: RespState,
    /// RTS -> SQD asked for the drained event.
    pub sqd_notify: bool,
}

impl Qp {
    /// The path MTU in bytes.
    pub fn mtu(&self) -> u32 {
        self.attr.path_mtu.bytes()
    }

    /// The Q_Key the QP checks and sends: QP1's is fixed.
    pub fn qkey(&self) -> u32 {
        if self.qp_type == QpType::Gsi { GSI_QKEY } else { self.attr.qkey }
    }

    /// The most PSNs this QP may keep unacknowledged: `max_window`, and no
    /// more packets of its path MTU than `max_inflight_bytes` (never below
    /// `min_window`).
    pub fn window_cap(&self, config: &Config) -> u32 {
        let by_bytes = match config.max_inflight_bytes {
            0 => u32::MAX,
            bytes => bytes / self.mtu().max(1),
        };
        config.max_window.min(by_bytes).max(config.min_window)
    }

    /// Packets (PSNs) a message of `length` bytes takes.
    pub fn packets(&self, length: u32) -> u32 {
        length.div_ceil(self.mtu()).max(1)
    }

    /// Whether the requester may send.
    pub fn can_send(&self) -> bool {
        matches!(self.state, QpState::Rts | QpState::Sqd)
    }

    /// Whether the responder takes requests.
    pub fn can_receive(&self) -> bool {
        matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn resources_overwrite_the_oldest() {
        let mut r = RespState::new();
        r.save(Resource::Atomic { psn: Psn::new(1), orig: 10 }, 2);
        r.save(Resource::Read { first: Psn::new(2), last: Psn::new(4) }, 2);
        assert_eq!(r.find_atomic(Psn::new(1)), Some(10));
        assert!(r.find_read(Psn::new(3)).is_some());
        r.save(Resource::Atomic { psn: Psn::new(5), orig: 50 }, 2);
        assert_eq!(r.find_atomic(Psn::new(1)), None, "overwritten");
        assert!(r.find_read(Psn::new(4)).is_some());
        r.save(Resource::Atomic { psn: Psn::new(6), orig: 60 }, 2);
        assert_eq!(r.find_read(Psn::new(4)), None);
        assert_eq!(r.find_atomic(Psn::new(5)), Some(50));
    }

    #[test]
    fn send_queue_copies_sges_and_inline() {
        let cap = QpCap { max_send_wr: 2, max_send_sge: 2, max_inline_data: 8, ..QpCap::default() };
        let mut sq = SendQueue::new(&cap);
        let sges = [Sge { addr: 1, length: 2, lkey: 3 }];
        let p = sq.post(&SendWr::new(1, WrOpcode::Send, &sges)).expect("room");
        assert_eq!(sq.sges(p), &sges);
        let p = sq.post(&SendWr::new(2, WrOpcode::Send, &[]).with_inline(b"hi")).expect("room");
        assert_eq!(sq.inline_data(p), b"hi");
        assert_eq!(sq.ring.get(p).map(|w| w.length), Some(2));
        assert_eq!(sq.post(&SendWr::new(3, WrOpcode::Send, &[])).err(), Some(PostError::Full));
        let long = [0u8; 9];
        let mut sq = SendQueue::new(&cap);
        assert_eq!(
            sq.post(&SendWr::new(3, WrOpcode::Send, &[]).with_inline(&long)).err(),
            Some(PostError::InlineTooLong)
        );
    }
}
