//! The IB communication manager (IBA vol. 1 ch. 12; Linux's drivers/infiniband/core/
//! cm.c): one per RDMA device, pure. The caller feeds it the MADs QP1 received and the
//! time, calls it to send, and takes what it produced (MADs to send, events) with
//! [`IbCm::take_output`]; timers (retries, timeouts, timewait) run in [`IbCm::poll`].
//!
//! It behaves as Linux's CM does, so the two interoperate and fail alike:
//!
//! - timeouts are 4.096 us << exponent (at least 1 ms, as `cm_convert_to_ms` rounds);
//!   the active side waits `2 * packet lifetime + remote CM response timeout` for an
//!   answer to its REQ, the passive side the REQ's local CM response timeout for its
//!   REP, and each side its own for a DREQ; every one is sent `1 + max_cm_retries`
//!   times before the connection fails (ReqError, RepError, DreqError);
//! - a REQ for a service nobody listens on is refused with REJ reason 8 at once, a REQ
//!   or REP naming a QP already connected with reason 10 (stale connection, and the old
//!   connection is sent a DREQ);
//! - duplicates are answered as `cm_dup_req_handler` and friends do: a repeated REQ
//!   gets the MRA again (or a stale REJ in timewait) and is otherwise dropped, since the
//!   REP's own retries cover it; a repeated REP gets the RTU (or MRA) again; a DREQ for
//!   a connection in timewait, or for one we no longer know, gets a DREP;
//! - an MRA extends the wait for the REQ's or REP's answer, and a REP is taken whether
//!   an MRA came first or not;
//! - the PSNs follow Linux: the REQ's starting PSN is the passive side's send PSN and
//!   the REP's the active side's (`cm_req_handler`/`cm_rep_handler` set `sq_psn` so);
//! - LAP and APR are dropped, as Linux drops them on RoCE.
//!
//! One deliberate difference: a connection destroyed while established keeps
//! resending its DREQ until answered or out of retries (Linux sends it once and moves
//! straight to timewait), so a peer behind a lossy link still hears of the disconnect.

mod conn;
mod recv;
mod types;

pub use self::types::*;
pub use crate::wire::cm::RejReason;

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use vocab::{Duration, Instant};

use self::conn::{Conn, Pending};
use crate::core::Gid;
use crate::wire::cm::{
    AttrId, CmMad, CmMessage, DrepRepr, DreqRepr, MessageMraed, MessageRejected, MraRepr, PathRepr, RejRepr, RepRepr,
    ReqRepr, RtuRepr, SidrRepRepr, SidrReqRepr, SidrStatus, TransportType, drep, dreq, mra, rej, rep, req, rtu,
    sidr_rep, sidr_req,
};
use crate::wire::mad::MAD_LEN;

/// The IB permissive LID, which Linux puts in a REQ whose path leaves the subnet.
const LID_PERMISSIVE: u16 = 0xFFFF;

/// Linux's `cm_convert_to_ms`, kept in microseconds: 4.096 us << `exponent`, at least
/// 1 ms.
pub fn iba_timeout(exponent: u8) -> Duration {
    let ns = 4096u64 << u32::from(exponent.min(31));
    Duration::from_micros((ns / 1000).max(1000))
}

/// `a + b`, saturating.
fn add(a: Duration, b: Duration) -> Duration {
    Duration::from_micros(a.as_micros().saturating_add(b.as_micros()))
}

/// Linux's `cm_ack_timeout`: the transport ACK timeout exponent for a path, from the
/// HCA's ACK delay and the packet lifetime (4.096 us << t = ACK delay + 2 * lifetime,
/// rounded to the larger term, plus one when the other is within 50 %).
pub fn ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let (delay, mut t) = (i32::from(ca_ack_delay), i32::from(packet_life_time) + 1);
    if t >= delay {
        t += i32::from(delay >= t - 1);
    } else {
        t = delay + i32::from(t >= delay - 1);
    }
    t.min(31) as u8
}

#[derive(Debug, Clone, Copy)]
struct Listen {
    id: ListenId,
    service_id: u64,
    mask: u64,
}

/// The CM of one device.
#[derive(Debug)]
pub struct IbCm {
    local_ca_guid: u64,
    /// XORed into every allocated ID (Linux's `random_id_operand`), so IDs differ
    /// across restarts.
    id_operand: u32,
    next_id: u32,
    /// The upper half of the TIDs we start (Linux: the MAD agent's id).
    hi_tid: u32,
    listens: Vec<Listen>,
    next_listen: u32,
    conns: BTreeMap<u32, Conn>,
    output: VecDeque<Output>,
    counters: CmCounters,
}

impl IbCm {
    /// A CM for the device whose node GUID is `local_ca_guid`; `seed` randomises the
    /// communication IDs, as Linux's random ID operand does.
    pub fn new(local_ca_guid: u64, seed: u32) -> Self {
        IbCm {
            local_ca_guid,
            id_operand: seed,
            next_id: 0,
            hi_tid: 1,
            listens: Vec::new(),
            next_listen: 0,
            conns: BTreeMap::new(),
            output: VecDeque::new(),
            counters: CmCounters::default(),
        }
    }

    /// Sets the upper 32 bits of the TIDs this CM starts (the MAD agent's id, when the
    /// caller runs a [`crate::mad::Dispatcher`]); 1 until set.
    pub fn set_tid_high(&mut self, hi: u32) {
        self.hi_tid = hi;
    }

    /// The node GUID REQs and REPs carry.
    pub fn local_ca_guid(&self) -> u64 {
        self.local_ca_guid
    }

    /// Listens for REQs and SIDR_REQs whose service ID matches `service_id` under
    /// `mask` (0: exactly). Refused when an existing listen overlaps (Linux's
    /// `cm_insert_listen`).
    pub fn listen(&mut self, service_id: u64, mask: u64) -> Result<ListenId, CmError> {
        let mask = if mask == 0 { !0 } else { mask };
        let service_id = service_id & mask;
        if self.listens.iter().any(|l| l.mask & service_id == mask & l.service_id) {
            return Err(CmError::Busy);
        }
        self.next_listen = self.next_listen.wrapping_add(1).max(1);
        let id = ListenId(self.next_listen);
        self.listens.push(Listen { id, service_id, mask });
        Ok(id)
    }

    pub fn cancel_listen(&mut self, id: ListenId) {
        self.listens.retain(|l| l.id != id);
    }

    fn find_listen(&self, service_id: u64) -> Option<ListenId> {
        self.listens.iter().find(|l| l.mask & service_id == l.service_id).map(|l| l.id)
    }

    /// A fresh local communication ID: never zero (zero means "not known yet" on the
    /// wire) and not in use.
    fn alloc_id(&mut self) -> u32 {
        loop {
            self.next_id = self.next_id.wrapping_add(1);
            let id = self.next_id ^ self.id_operand;
            if id != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    /// The TID of a REQ, DREQ or SIDR_REQ we start: the agent's id above, the local ID
    /// below. Linux puts the ID there in network order read as a host (little-endian)
    /// integer (`cm_form_tid`), so the bytes on the wire are the ID's swapped; we send
    /// the same, so captures of the two compare equal.
    fn tid_for(&self, local_id: u32) -> u64 {
        (u64::from(self.hi_tid) << 32) | u64::from(local_id.swap_bytes())
    }

    /// Sends a REQ and starts waiting for its answer.
    pub fn send_req(&mut self, now: Instant, to: MadAddr, p: &ReqParams) -> Result<ConnId, CmError> {
        if !matches!(p.qp_type, TransportType::Rc | TransportType::Uc) {
            return Err(CmError::Invalid);
        }
        if p.private_data.len() > req::PRIVATE_DATA_LEN {
            return Err(CmError::TooLong);
        }
        let id = self.alloc_id();
        let path = &p.primary_path;
        let subnet_local = path.hop_limit <= 1;
        let lid = if subnet_local { 0 } else { LID_PERMISSIVE };
        let local_ack_timeout = ack_timeout(p.ack_delay, path.packet_life_time);
        let tid = self.tid_for(id);
        let msg = ReqRepr {
            local_comm_id: id,
            service_id: p.service_id,
            local_ca_guid: self.local_ca_guid,
            local_qkey: 0,
            local_qpn: p.qp_num,
            responder_resources: p.responder_resources,
            local_eecn: 0,
            initiator_depth: p.initiator_depth,
            remote_eecn: 0,
            remote_cm_response_timeout: p.remote_cm_response_timeout,
            transport_type: p.qp_type,
            flow_control: p.flow_control,
            starting_psn: p.starting_psn,
            local_cm_response_timeout: p.local_cm_response_timeout,
            retry_count: p.retry_count,
            pkey: path.pkey,
            path_mtu: path.mtu,
            rdc_exists: false,
            rnr_retry_count: p.rnr_retry_count,
            max_cm_retries: p.max_cm_retries,
            srq: p.srq,
            extended_transport_type: 0,
            primary_path: PathRepr {
                local_lid: lid,
                remote_lid: lid,
                local_gid: path.sgid.0,
                remote_gid: path.dgid.0,
                flow_label: path.flow_label,
                packet_rate: path.rate,
                traffic_class: path.traffic_class,
                hop_limit: path.hop_limit,
                sl: path.sl,
                subnet_local,
                local_ack_timeout,
            },
            alternate_path: PathRepr::default(),
            sap_supported: false,
            private_data: &p.private_data,
        };
        let mad = encode(tid, CmMessage::Req(msg))?;
        let mut conn = Conn::new(id, to);
        conn.tid = tid;
        let life = iba_timeout(path.packet_life_time);
        conn.timeout = add(add(life, life), iba_timeout(p.remote_cm_response_timeout));
        conn.max_cm_retries = p.max_cm_retries;
        conn.av_timeout = path.packet_life_time.saturating_add(1);
        let info = &mut conn.info;
        info.service_id = p.service_id;
        info.local_qpn = p.qp_num;
        // Linux's active side receives at the PSN its REQ names (`rq_psn`); it sends
        // at the REP's.
        info.rq_psn = p.starting_psn;
        info.path_mtu = path.mtu;
        info.responder_resources = p.responder_resources;
        info.initiator_depth = p.initiator_depth;
        info.retry_count = p.retry_count;
        info.rnr_retry_count = p.rnr_retry_count;
        info.local_ack_timeout = conn.av_timeout;
        info.sgid = path.sgid;
        info.dgid = path.dgid;
        info.traffic_class = path.traffic_class;
        info.hop_limit = path.hop_limit;
        info.flow_label = path.flow_label;
        info.sl = path.sl;
        info.pkey = path.pkey;
        info.pkey_index = to.pkey_index;
        info.qp_type = Some(p.qp_type);
        info.srq = p.srq;
        info.flow_control = p.flow_control;
        conn.state = CmState::ReqSent;
        self.conns.insert(id, conn);
        self.send_pending(now, id, AttrId::Req, mad);
        Ok(ConnId(id))
    }

    /// Sends an MRA for the REQ or REP this connection received: the peer should wait
    /// `service_timeout` (exponent) longer.
    pub fn send_mra(
        &mut self,
        _now: Instant,
        conn: ConnId,
        service_timeout: u8,
        private: &[u8],
    ) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        let (next, mraed) = match c.state {
            CmState::ReqRcvd => (CmState::MraReqSent, MessageMraed::Req),
            CmState::RepRcvd => (CmState::MraRepSent, MessageMraed::Rep),
            _ => return Err(CmError::InvalidState),
        };
        if private.len() > mra::PRIVATE_DATA_LEN {
            return Err(CmError::TooLong);
        }
        let msg = MraRepr {
            local_comm_id: conn.0,
            remote_comm_id: c.remote_id,
            message_mraed: mraed,
            service_timeout,
            private_data: private,
        };
        let mad = encode(c.tid, CmMessage::Mra(msg))?;
        let to = c.info.peer;
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.state = next;
            c.service_timeout = service_timeout;
            c.answer = Some(Box::new(mad));
        }
        self.send(to, AttrId::Mra, mad);
        Ok(())
    }

    /// Accepts a received REQ with a REP and waits for the RTU.
    pub fn send_rep(&mut self, now: Instant, conn: ConnId, p: &RepParams) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        if !matches!(c.state, CmState::ReqRcvd | CmState::MraReqSent) {
            return Err(CmError::InvalidState);
        }
        if p.private_data.len() > rep::PRIVATE_DATA_LEN {
            return Err(CmError::TooLong);
        }
        let msg = RepRepr {
            local_comm_id: conn.0,
            remote_comm_id: c.remote_id,
            local_qkey: 0,
            local_qpn: p.qp_num,
            local_eecn: 0,
            starting_psn: p.starting_psn,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            target_ack_delay: p.target_ack_delay,
            failover_accepted: p.failover_accepted,
            flow_control: p.flow_control,
            rnr_retry_count: p.rnr_retry_count,
            srq: p.srq,
            local_ca_guid: self.local_ca_guid,
            private_data: &p.private_data,
        };
        let mad = encode(c.tid, CmMessage::Rep(msg))?;
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.state = CmState::RepSent;
            c.info.local_qpn = p.qp_num & 0xFF_FFFF;
            c.info.rq_psn = p.starting_psn;
            c.info.initiator_depth = p.initiator_depth;
            c.info.responder_resources = p.responder_resources;
            c.info.srq = p.srq;
        }
        self.send_pending(now, conn.0, AttrId::Rep, mad);
        Ok(())
    }

    /// Answers a received REP with an RTU: the connection is established.
    pub fn send_rtu(&mut self, _now: Instant, conn: ConnId, private: &[u8]) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        if !matches!(c.state, CmState::RepRcvd | CmState::MraRepSent) {
            return Err(CmError::InvalidState);
        }
        if private.len() > rtu::PRIVATE_DATA_LEN {
            return Err(CmError::TooLong);
        }
        let msg = RtuRepr { local_comm_id: conn.0, remote_comm_id: c.remote_id, private_data: private };
        let mad = encode(c.tid, CmMessage::Rtu(msg))?;
        let to = c.info.peer;
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.state = CmState::Established;
            c.answer = Some(Box::new(mad));
        }
        self.send(to, AttrId::Rtu, mad);
        Ok(())
    }

    /// Refuses a connection being set up (ib_send_cm_rej): after the REP was sent it
    /// goes to timewait, before that back to idle.
    pub fn send_rej(
        &mut self,
        now: Instant,
        conn: ConnId,
        reason: RejReason,
        ari: &[u8],
        private: &[u8],
    ) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        let to_timewait = match c.state {
            CmState::ReqSent
            | CmState::MraReqRcvd
            | CmState::ReqRcvd
            | CmState::MraReqSent
            | CmState::RepRcvd
            | CmState::MraRepSent => false,
            CmState::RepSent | CmState::MraRepRcvd => true,
            _ => return Err(CmError::InvalidState),
        };
        if private.len() > rej::PRIVATE_DATA_LEN || ari.len() > rej::ARI_LEN {
            return Err(CmError::TooLong);
        }
        let mad = self.format_rej(conn.0, reason, ari, private)?;
        let to = c.info.peer;
        self.send(to, AttrId::Rej, mad);
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.pending = None;
        }
        if to_timewait {
            self.enter_timewait(now, conn.0);
        } else {
            self.reset_to_idle(conn.0);
        }
        Ok(())
    }

    /// A REJ from this connection's state, as Linux's `cm_format_rej` words it.
    fn format_rej(&self, id: u32, reason: RejReason, ari: &[u8], private: &[u8]) -> Result<[u8; MAD_LEN], CmError> {
        let c = self.conns.get(&id).ok_or(CmError::NotFound)?;
        let (local, rejected) = match c.state {
            // The passive side has not told the peer its ID yet.
            CmState::ReqRcvd => (0, MessageRejected::Req),
            CmState::MraReqSent => (id, MessageRejected::Req),
            CmState::RepRcvd | CmState::MraRepSent => (id, MessageRejected::Rep),
            _ => (id, MessageRejected::Other),
        };
        let msg = RejRepr {
            local_comm_id: local,
            remote_comm_id: c.remote_id,
            message_rejected: rejected,
            reason,
            ari,
            private_data: private,
        };
        encode(c.tid, CmMessage::Rej(msg))
    }

    /// Starts a disconnect: DREQ, then wait for the DREP.
    pub fn send_dreq(&mut self, now: Instant, conn: ConnId, private: &[u8]) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        if c.state != CmState::Established {
            return Err(CmError::InvalidState);
        }
        if private.len() > dreq::PRIVATE_DATA_LEN {
            return Err(CmError::TooLong);
        }
        let msg = DreqRepr {
            local_comm_id: conn.0,
            remote_comm_id: c.remote_id,
            remote_qpn: c.info.remote_qpn,
            private_data: private,
        };
        let mad = encode(self.tid_for(conn.0), CmMessage::Dreq(msg))?;
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.state = CmState::DreqSent;
        }
        self.send_pending(now, conn.0, AttrId::Dreq, mad);
        Ok(())
    }

    /// Answers a received DREQ; the connection enters timewait.
    pub fn send_drep(&mut self, now: Instant, conn: ConnId, private: &[u8]) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        if c.state != CmState::DreqRcvd {
            return Err(CmError::InvalidState);
        }
        if private.len() > drep::PRIVATE_DATA_LEN {
            return Err(CmError::TooLong);
        }
        let msg = DrepRepr { local_comm_id: conn.0, remote_comm_id: c.remote_id, private_data: private };
        let mad = encode(c.tid, CmMessage::Drep(msg))?;
        let to = c.info.peer;
        self.enter_timewait(now, conn.0);
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.answer = Some(Box::new(mad));
        }
        self.send(to, AttrId::Drep, mad);
        Ok(())
    }

    /// Marks a connection established without an RTU, when the QP saw traffic first
    /// (Linux's `ib_cm_notify(IB_EVENT_COMM_EST)`): the REP stops being resent. No
    /// event follows; the caller knows.
    pub fn establish(&mut self, conn: ConnId) -> Result<(), CmError> {
        let c = self.conns.get_mut(&conn.0).ok_or(CmError::NotFound)?;
        match c.state {
            CmState::RepSent | CmState::MraRepRcvd => {
                c.state = CmState::Established;
                c.pending = None;
                Ok(())
            }
            _ => Err(CmError::InvalidState),
        }
    }

    /// ib_destroy_cm_id: REJ / DREQ / nothing as the state asks; the id lingers in
    /// timewait as Linux's does, then is freed. No event is reported for it again.
    pub fn destroy(&mut self, now: Instant, conn: ConnId) {
        let Some(c) = self.conns.get_mut(&conn.0) else { return };
        c.destroyed = true;
        let state = c.state;
        match state {
            CmState::SidrReqSent => {
                c.pending = None;
                c.state = CmState::Idle;
            }
            CmState::SidrReqRcvd => {
                let p = SidrRepParams { status: SidrStatusParam(SidrStatus::Reject), ..SidrRepParams::default() };
                let _ = self.send_sidr_rep(now, conn, &p);
            }
            CmState::ReqSent | CmState::MraReqRcvd => {
                let guid = self.local_ca_guid.to_be_bytes();
                let _ = self.send_rej(now, conn, RejReason::Timeout, &guid, &[]);
            }
            CmState::ReqRcvd
            | CmState::MraReqSent
            | CmState::RepRcvd
            | CmState::MraRepSent
            | CmState::RepSent
            | CmState::MraRepRcvd => {
                let _ = self.send_rej(now, conn, RejReason::ConsumerDefined, &[], &[]);
            }
            CmState::Established => {
                let _ = self.send_dreq(now, conn, &[]);
            }
            CmState::DreqRcvd => {
                let _ = self.send_drep(now, conn, &[]);
            }
            CmState::DreqSent | CmState::Timewait | CmState::Idle => {}
        }
        self.free_if_done(conn.0);
    }

    /// Frees a destroyed connection that has nothing left to do.
    fn free_if_done(&mut self, id: u32) {
        if self.conns.get(&id).is_some_and(|c| c.destroyed && c.state == CmState::Idle) {
            self.conns.remove(&id);
        }
    }

    /// Sends a SIDR_REQ and waits `timeout_ms` for each answer.
    pub fn send_sidr_req(&mut self, now: Instant, to: MadAddr, p: &SidrReqParams) -> Result<ConnId, CmError> {
        if p.private_data.len() > sidr_req::PRIVATE_DATA_LEN {
            return Err(CmError::TooLong);
        }
        let id = self.alloc_id();
        let tid = self.tid_for(id);
        let msg = SidrReqRepr { request_id: id, pkey: p.pkey, service_id: p.service_id, private_data: &p.private_data };
        let mad = encode(tid, CmMessage::SidrReq(msg))?;
        let mut conn = Conn::new(id, to);
        conn.tid = tid;
        conn.timeout = Duration::from_millis(u64::from(p.timeout_ms));
        conn.max_cm_retries = p.max_cm_retries;
        conn.info.service_id = p.service_id;
        conn.info.pkey = p.pkey;
        conn.info.pkey_index = to.pkey_index;
        conn.info.dgid = to.gid;
        conn.state = CmState::SidrReqSent;
        self.conns.insert(id, conn);
        self.send_pending(now, id, AttrId::SidrReq, mad);
        Ok(ConnId(id))
    }

    /// Answers a received SIDR_REQ; the passive id goes back to idle.
    pub fn send_sidr_rep(&mut self, _now: Instant, conn: ConnId, p: &SidrRepParams) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        if c.state != CmState::SidrReqRcvd {
            return Err(CmError::InvalidState);
        }
        if p.private_data.len() > sidr_rep::PRIVATE_DATA_LEN || p.info.len() > sidr_rep::INFO_LEN {
            return Err(CmError::TooLong);
        }
        let msg = SidrRepRepr {
            request_id: c.remote_id,
            status: p.status.0,
            qpn: p.qp_num,
            service_id: c.info.service_id,
            qkey: p.qkey,
            info: &p.info,
            private_data: &p.private_data,
        };
        let mad = encode(c.tid, CmMessage::SidrRep(msg))?;
        let to = c.info.peer;
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.state = CmState::Idle;
            c.info.local_qpn = p.qp_num;
            c.info.qkey = p.qkey;
        }
        self.send(to, AttrId::SidrRep, mad);
        self.free_if_done(conn.0);
        Ok(())
    }

    /// Everything the REQ/REP carried that QP attributes come from (cm_init_qp_*_attr).
    pub fn conn_info(&self, conn: ConnId) -> Option<&ConnInfo> {
        self.conns.get(&conn.0).map(|c| &c.info)
    }

    pub fn state(&self, conn: ConnId) -> Option<CmState> {
        self.conns.get(&conn.0).map(|c| c.state)
    }

    /// How many connections the CM holds (those in timewait and destroyed included).
    pub fn conn_count(&self) -> usize {
        self.conns.len()
    }

    /// Timers: resends, timeouts, timewait ends.
    pub fn poll(&mut self, now: Instant) {
        let due: Vec<u32> =
            self.conns.iter().filter(|(_, c)| c.deadline().is_some_and(|d| d <= now)).map(|(id, _)| *id).collect();
        for id in due {
            self.expire(now, id);
        }
    }

    fn expire(&mut self, now: Instant, id: u32) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        if c.timewait_until.is_some_and(|d| d <= now) {
            c.timewait_until = None;
            c.state = CmState::Idle;
            self.event(id, CmEvent::TimewaitExit);
            // A destroyed connection is gone; otherwise it waits, idle, for its
            // consumer (Linux frees the id only on ib_destroy_cm_id).
            self.free_if_done(id);
            return;
        }
        let Some(p) = c.pending.as_mut().filter(|p| p.deadline <= now) else { return };
        if p.retries_left > 0 {
            p.retries_left -= 1;
            p.deadline = now + p.timeout;
            let (mad, to) = (*p.mad, c.info.peer);
            let kind = attr_of(&mad);
            self.counter(kind).retried += 1;
            self.send(to, kind, mad);
            return;
        }
        c.pending = None;
        let state = c.state;
        match state {
            CmState::ReqSent | CmState::MraReqRcvd => {
                self.reset_to_idle(id);
                self.event(id, CmEvent::ReqError);
            }
            CmState::RepSent | CmState::MraRepRcvd => {
                self.reset_to_idle(id);
                self.event(id, CmEvent::RepError);
            }
            CmState::DreqSent => {
                self.enter_timewait(now, id);
                self.event(id, CmEvent::DreqError);
            }
            CmState::SidrReqSent => {
                self.reset_to_idle(id);
                self.event(id, CmEvent::SidrReqError);
            }
            _ => {}
        }
        self.free_if_done(id);
    }

    /// When `poll` next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.conns.values().filter_map(Conn::deadline).min()
    }

    pub fn take_output(&mut self) -> Option<Output> {
        self.output.pop_front()
    }

    pub fn counters(&self) -> &CmCounters {
        &self.counters
    }

    // ---- shared by the senders and the receive handlers ----

    fn counter(&mut self, attr: AttrId) -> &mut MsgCounters {
        let c = &mut self.counters;
        match attr {
            AttrId::Req => &mut c.req,
            AttrId::Mra => &mut c.mra,
            AttrId::Rej => &mut c.rej,
            AttrId::Rep => &mut c.rep,
            AttrId::Rtu => &mut c.rtu,
            AttrId::Dreq => &mut c.dreq,
            AttrId::Drep => &mut c.drep,
            AttrId::SidrReq => &mut c.sidr_req,
            AttrId::SidrRep => &mut c.sidr_rep,
            _ => &mut c.other,
        }
    }

    /// Queues a MAD for the wire.
    fn send(&mut self, to: MadAddr, attr: AttrId, mad: [u8; MAD_LEN]) {
        self.counter(attr).sent += 1;
        self.output.push_back(Output::Send { to, mad });
    }

    /// Sends a MAD that waits for an answer, and arms its resend timer.
    fn send_pending(&mut self, now: Instant, id: u32, attr: AttrId, mad: [u8; MAD_LEN]) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        c.pending = Some(Pending {
            mad: Box::new(mad),
            timeout: c.timeout,
            deadline: now + c.timeout,
            retries_left: c.max_cm_retries,
        });
        let to = c.info.peer;
        self.send(to, attr, mad);
    }

    fn event(&mut self, id: u32, event: CmEvent) {
        if self.conns.get(&id).is_some_and(|c| !c.destroyed) {
            self.output.push_back(Output::Event { conn: ConnId(id), event });
        }
    }

    fn reset_to_idle(&mut self, id: u32) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.state = CmState::Idle;
            c.pending = None;
            c.timewait_until = None;
        }
    }

    /// Timewait (IBA 12.9.6.2): the QPN and IDs stay taken for the path's timeout so
    /// stray packets of the old connection die out.
    fn enter_timewait(&mut self, now: Instant, id: u32) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.state = CmState::Timewait;
            c.pending = None;
            c.timewait_until = Some(now + iba_timeout(c.av_timeout));
        }
    }
}

/// Encodes a CM MAD; a field too long for its message is the caller's error.
fn encode(tid: u64, message: CmMessage<'_>) -> Result<[u8; MAD_LEN], CmError> {
    CmMad { tid, attr_mod: 0, message }.to_bytes().map_err(|_| CmError::TooLong)
}

/// The attribute of a MAD we built.
fn attr_of(mad: &[u8; MAD_LEN]) -> AttrId {
    AttrId::from_raw(u16::from_be_bytes([mad[16], mad[17]]))
}

/// A GID from a path's 16 bytes.
fn gid(raw: [u8; 16]) -> Gid {
    Gid(raw)
}

#[cfg(test)]
mod test;
