//! The values the IB CM's callers pass in and get out: addresses, parameters of the
//! messages they send, what received messages carried, events, states, errors.

use alloc::vec::Vec;

use crate::core::Gid;
use crate::wire::cm::{SidrStatus, TransportType};

/// A local communication ID: the CM's name for one connection (also its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// A listen registered with [`IbCm::listen`](super::IbCm::listen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListenId(pub u32);

/// Where a MAD came from or goes to: the peer's GSI over RoCE v2 (a UD address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MadAddr {
    /// The peer's GID (IPv4-mapped or IPv6).
    pub gid: Gid,
    /// The peer's QP (1 for the GSI).
    pub qpn: u32,
    pub pkey_index: u16,
    pub traffic_class: u8,
    pub hop_limit: u8,
    pub flow_label: u32,
}

/// One path of a connection as the local side sees it (Linux's `sa_path_rec` subset
/// the CM uses on RoCE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathParams {
    pub sgid: Gid,
    pub dgid: Gid,
    /// 20 bits.
    pub flow_label: u32,
    pub traffic_class: u8,
    pub hop_limit: u8,
    /// 4 bits.
    pub sl: u8,
    /// IB rate enum (6 bits); 0 when unknown.
    pub rate: u8,
    pub pkey: u16,
    /// IB MTU enum (1 = 256 .. 5 = 4096).
    pub mtu: u8,
    /// Packet lifetime exponent (4.096 us << this), as the SA would give it.
    pub packet_life_time: u8,
}

/// What the active side asks for in a REQ (Linux's `ib_cm_req_param`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReqParams {
    pub primary_path: PathParams,
    pub service_id: u64,
    pub qp_num: u32,
    pub qp_type: TransportType,
    /// 24 bits.
    pub starting_psn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// How long the passive side may take to answer (exponent, 5 bits).
    pub remote_cm_response_timeout: u8,
    /// How long we take (exponent, 5 bits).
    pub local_cm_response_timeout: u8,
    pub flow_control: bool,
    /// 3 bits.
    pub retry_count: u8,
    /// 3 bits; 7 is infinite.
    pub rnr_retry_count: u8,
    /// 4 bits: sends of each CM message before giving up.
    pub max_cm_retries: u8,
    pub srq: bool,
    /// This HCA's ACK delay exponent (from which the path's local ACK timeout is made).
    pub ack_delay: u8,
    /// Up to 92 bytes.
    pub private_data: Vec<u8>,
}

/// What the passive side answers with in a REP (Linux's `ib_cm_rep_param`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RepParams {
    pub qp_num: u32,
    /// 24 bits.
    pub starting_psn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// 0 accepted, 1 rejected, 2 not supported (RoCE: no alternate path).
    pub failover_accepted: u8,
    pub flow_control: bool,
    /// 3 bits.
    pub rnr_retry_count: u8,
    pub srq: bool,
    /// This HCA's ACK delay exponent.
    pub target_ack_delay: u8,
    /// Up to 196 bytes.
    pub private_data: Vec<u8>,
}

/// What a SIDR_REQ asks (Linux's `ib_cm_sidr_req_param`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SidrReqParams {
    pub service_id: u64,
    pub pkey: u16,
    /// How long to wait for each answer.
    pub timeout_ms: u32,
    pub max_cm_retries: u8,
    /// Up to 216 bytes.
    pub private_data: Vec<u8>,
}

/// The answer to a SIDR_REQ (Linux's `ib_cm_sidr_rep_param`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SidrRepParams {
    pub qp_num: u32,
    pub qkey: u32,
    pub status: SidrStatusParam,
    /// Up to 72 bytes.
    pub info: Vec<u8>,
    /// Up to 136 bytes.
    pub private_data: Vec<u8>,
}

/// A SIDR_REP status the caller chooses ([`SidrStatus`] with a default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SidrStatusParam(pub SidrStatus);

impl Default for SidrStatusParam {
    fn default() -> Self {
        SidrStatusParam(SidrStatus::Success)
    }
}

/// A received REQ, as the passive side's consumer needs it (Linux's
/// `ib_cm_req_event_param` plus the private data). Paths are from the receiver's view:
/// `sgid` is ours, `dgid` the requester's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReqInfo {
    pub from: MadAddr,
    pub remote_comm_id: u32,
    pub service_id: u64,
    pub remote_ca_guid: u64,
    pub remote_qkey: u32,
    pub remote_qpn: u32,
    pub qp_type: TransportType,
    pub starting_psn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub local_cm_response_timeout: u8,
    pub remote_cm_response_timeout: u8,
    pub flow_control: bool,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub max_cm_retries: u8,
    pub srq: bool,
    pub primary_path: PathParams,
    /// The whole 92-byte area.
    pub private_data: Vec<u8>,
}

/// A received REP (Linux's `ib_cm_rep_event_param`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepInfo {
    pub remote_ca_guid: u64,
    pub remote_qkey: u32,
    pub remote_qpn: u32,
    pub starting_psn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub target_ack_delay: u8,
    pub failover_accepted: u8,
    pub flow_control: bool,
    pub rnr_retry_count: u8,
    pub srq: bool,
    /// The whole 196-byte area.
    pub private_data: Vec<u8>,
}

/// A received SIDR_REQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrReqInfo {
    pub from: MadAddr,
    pub request_id: u32,
    pub pkey: u16,
    pub service_id: u64,
    /// The whole 216-byte area.
    pub private_data: Vec<u8>,
}

/// A received SIDR_REP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrRepInfo {
    pub status: SidrStatus,
    pub qpn: u32,
    pub qkey: u32,
    pub service_id: u64,
    pub info: Vec<u8>,
    /// The whole 136-byte area.
    pub private_data: Vec<u8>,
}

/// What a connection heard; delivered through [`Output::Event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmEvent {
    /// A REQ for a listen: a new passive connection, in REQ_RCVD.
    ReqReceived {
        listen: ListenId,
        req: ReqInfo,
    },
    RepReceived {
        rep: RepInfo,
    },
    RtuReceived,
    MraReceived,
    RejReceived {
        reason: u16,
        ari: Vec<u8>,
        private: Vec<u8>,
    },
    /// The REQ went unanswered after max CM retries.
    ReqError,
    /// The REP went unanswered after max CM retries.
    RepError,
    DreqReceived {
        private: Vec<u8>,
    },
    DrepReceived,
    /// The DREQ went unanswered after max CM retries.
    DreqError,
    /// Timewait is over; the connection's ID is gone.
    TimewaitExit,
    /// A SIDR_REQ for a listen: a new passive id, in SIDR_REQ_RCVD.
    SidrReqReceived {
        listen: ListenId,
        req: SidrReqInfo,
    },
    SidrRepReceived {
        rep: SidrRepInfo,
    },
    /// The SIDR_REQ went unanswered.
    SidrReqError,
}

/// Connection states (IBA 12.9.6, Linux's `ib_cm_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmState {
    Idle,
    ReqSent,
    ReqRcvd,
    MraReqSent,
    MraReqRcvd,
    RepSent,
    RepRcvd,
    MraRepSent,
    MraRepRcvd,
    Established,
    DreqSent,
    DreqRcvd,
    Timewait,
    SidrReqSent,
    SidrReqRcvd,
}

/// What comes out of the CM, taken with [`IbCm::take_output`](super::IbCm::take_output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Send this MAD on QP1 to this address (Q_Key 0x80010000).
    Send {
        to: MadAddr,
        mad: [u8; 256],
    },
    Event {
        conn: ConnId,
        event: CmEvent,
    },
}

/// A call refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmError {
    /// No connection or listen by that ID.
    NotFound,
    /// The connection's state does not allow this call.
    InvalidState,
    /// Private data, ARI or info longer than the message has room for.
    TooLong,
    /// Something already listens on that service ID (under the mask).
    Busy,
    /// A parameter out of range.
    Invalid,
}

/// What the QP attributes of a connection come from (Linux's `cm_init_qp_init_attr`,
/// `_rtr_attr`, `_rts_attr`): filled from the REQ and the REP as they pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnInfo {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub service_id: u64,
    pub remote_ca_guid: u64,
    /// Where our MADs for this connection go.
    pub peer: MadAddr,
    pub local_qpn: u32,
    pub remote_qpn: u32,
    /// Our send queue's first PSN (RTS `sq_psn`).
    pub sq_psn: u32,
    /// The peer's first PSN (RTR `rq_psn`).
    pub rq_psn: u32,
    /// IB MTU enum (RTR `path_mtu`).
    pub path_mtu: u8,
    /// RDMA reads/atomics we accept as responder (RTR `max_dest_rd_atomic`).
    pub responder_resources: u8,
    /// RDMA reads/atomics we issue (RTS `max_rd_atomic`).
    pub initiator_depth: u8,
    /// RTS `retry_cnt`.
    pub retry_count: u8,
    /// RTS `rnr_retry`.
    pub rnr_retry_count: u8,
    /// RTS `timeout` (exponent).
    pub local_ack_timeout: u8,
    /// Our GID on the primary path (the AH's source).
    pub sgid: Gid,
    /// The peer's GID (the AH's destination).
    pub dgid: Gid,
    pub traffic_class: u8,
    pub hop_limit: u8,
    pub flow_label: u32,
    pub sl: u8,
    pub pkey: u16,
    pub pkey_index: u16,
    /// UD: the peer's Q_Key (SIDR_REP), or the REQ's Q_Key.
    pub qkey: u32,
    pub qp_type: Option<TransportType>,
    pub srq: bool,
    pub flow_control: bool,
}

/// Per message kind counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MsgCounters {
    pub sent: u64,
    pub received: u64,
    /// Sent again after a timeout or for a duplicate.
    pub retried: u64,
    /// Received but dropped (no matching connection, wrong state, malformed).
    pub dropped: u64,
}

/// What the CM sent and received, per message kind (Linux's cm `counters` group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CmCounters {
    pub req: MsgCounters,
    pub mra: MsgCounters,
    pub rej: MsgCounters,
    pub rep: MsgCounters,
    pub rtu: MsgCounters,
    pub dreq: MsgCounters,
    pub drep: MsgCounters,
    pub sidr_req: MsgCounters,
    pub sidr_rep: MsgCounters,
    /// LAP, APR (which RoCE refuses), ClassPortInfo and unknown attributes.
    pub other: MsgCounters,
    /// MADs that were not CM MADs, or CM MADs that could not be parsed.
    pub malformed: u64,
}
