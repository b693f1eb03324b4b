//! One connection's state inside the CM: what Linux keeps in `cm_id_private` and
//! its timewait info, and the one MAD it may be waiting on an answer for.

use alloc::boxed::Box;
use vocab::{Duration, Instant};

use super::{CmState, ConnInfo, ListenId, MadAddr};
use crate::wire::mad::MAD_LEN;

/// A MAD sent that expects an answer: resent every `timeout` until `retries_left` is
/// used up (Linux's MAD layer: `timeout_ms` and `retries` of the send buffer).
#[derive(Debug, Clone)]
pub(super) struct Pending {
    pub mad: Box<[u8; MAD_LEN]>,
    pub timeout: Duration,
    pub deadline: Instant,
    pub retries_left: u8,
}

#[derive(Debug, Clone)]
pub(super) struct Conn {
    pub state: CmState,
    /// The peer's communication ID (its REQ's or REP's local ID; a SIDR_REQ's request
    /// ID); zero until known.
    pub remote_id: u32,
    /// The TID replies in this exchange carry: the REQ's (or the DREQ's, once one is
    /// received).
    pub tid: u64,
    pub info: ConnInfo,
    /// How long the peer may take to answer what we send (REQ, REP, DREQ).
    pub timeout: Duration,
    pub max_cm_retries: u8,
    /// The path's timeout exponent (Linux's `av.timeout`): timewait lasts this.
    pub av_timeout: u8,
    /// What the MRA we sent said (answered again on a duplicate).
    pub service_timeout: u8,
    pub pending: Option<Pending>,
    /// The last one-shot message (MRA, RTU, DREP) sent, for answering duplicates.
    pub answer: Option<Box<[u8; MAD_LEN]>>,
    pub timewait_until: Option<Instant>,
    /// The consumer destroyed it: no more events; freed when it reaches idle.
    pub destroyed: bool,
    /// The listen a passive connection came in through.
    pub listen: Option<ListenId>,
}

impl Conn {
    pub fn new(local_id: u32, peer: MadAddr) -> Conn {
        let info = ConnInfo { local_comm_id: local_id, peer, ..ConnInfo::default() };
        Conn {
            state: CmState::Idle,
            remote_id: 0,
            tid: 0,
            info,
            timeout: Duration::ZERO,
            max_cm_retries: 0,
            av_timeout: 0,
            service_timeout: 0,
            pending: None,
            answer: None,
            timewait_until: None,
            destroyed: false,
            listen: None,
        }
    }

    /// The earliest time this connection needs `poll`.
    pub fn deadline(&self) -> Option<Instant> {
        match (self.pending.as_ref().map(|p| p.deadline), self.timewait_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether duplicate and stale detection should see it: a connection that went
    /// back to idle is only waiting for its consumer to destroy it.
    pub fn is_live(&self) -> bool {
        self.state != CmState::Idle
    }
}
