//! What the CM does with each received message (Linux's `cm_*_handler`).

use vocab::Instant;

use super::conn::Conn;
use super::{
    CmEvent, CmState, IbCm, MadAddr, PathParams, RepInfo, ReqInfo, SidrRepInfo, SidrReqInfo, ack_timeout, encode, gid,
    iba_timeout,
};
use crate::wire::cm::{
    AttrId, CmMad, CmMessage, DrepRepr, DreqRepr, MessageMraed, MessageRejected, MraRepr, RejReason, RejRepr, RepRepr,
    ReqRepr, RtuRepr, SidrRepRepr, SidrReqRepr, SidrStatus,
};
use crate::wire::mad::{self, MgmtClass};

impl IbCm {
    /// A MAD received on QP1 from `from` (any MAD bytes: what is not a CM message we
    /// handle is counted and dropped; nothing here panics on bad input).
    pub fn receive(&mut self, now: Instant, from: &MadAddr, bytes: &[u8]) {
        let Ok(header) = mad::Packet::new_checked(bytes) else {
            self.counters.malformed += 1;
            return;
        };
        if header.mgmt_class() != MgmtClass::Cm || bytes.len() < mad::MAD_LEN {
            self.counters.malformed += 1;
            return;
        }
        let attr = AttrId::from_raw(header.attr_id());
        let Ok(msg) = CmMad::parse(bytes) else {
            match attr {
                AttrId::Lap | AttrId::Apr | AttrId::ClassPortInfo | AttrId::Unknown(_) => {
                    self.counters.other.received += 1;
                    self.counters.other.dropped += 1;
                }
                _ => self.counters.malformed += 1,
            }
            return;
        };
        self.counter(attr).received += 1;
        let handled = match msg.message {
            CmMessage::Req(m) => self.on_req(now, from, msg.tid, &m, bytes),
            CmMessage::Mra(m) => self.on_mra(now, &m),
            CmMessage::Rej(m) => self.on_rej(now, &m),
            CmMessage::Rep(m) => self.on_rep(now, from, &m),
            CmMessage::Rtu(m) => self.on_rtu(&m),
            CmMessage::Dreq(m) => self.on_dreq(now, from, msg.tid, &m),
            CmMessage::Drep(m) => self.on_drep(now, &m),
            CmMessage::SidrReq(m) => self.on_sidr_req(from, msg.tid, &m),
            CmMessage::SidrRep(m) => self.on_sidr_rep(&m),
        };
        if !handled {
            self.counter(attr).dropped += 1;
        }
    }

    /// Linux's `cm_acquire_id`: the connection `local`, if its peer's ID is `remote`.
    fn acquire(&self, local: u32, remote: u32) -> Option<u32> {
        self.conns.get(&local).filter(|c| c.remote_id == remote).map(|_| local)
    }

    /// The live connection whose peer is (`remote_id`, `ca_guid`): a duplicate REQ/REP.
    fn find_remote_id(&self, remote_id: u32, ca_guid: u64) -> Option<u32> {
        self.conns
            .iter()
            .find(|(_, c)| c.is_live() && c.remote_id == remote_id && c.info.remote_ca_guid == ca_guid)
            .map(|(id, _)| *id)
    }

    /// The live connection to the peer's QP (`qpn`, `ca_guid`), other than `except`: a
    /// stale connection.
    fn find_remote_qpn(&self, qpn: u32, ca_guid: u64, except: Option<u32>) -> Option<u32> {
        self.conns
            .iter()
            .find(|(id, c)| {
                Some(**id) != except
                    && c.is_live()
                    && c.state != CmState::SidrReqRcvd
                    && c.state != CmState::SidrReqSent
                    && c.info.remote_qpn == qpn
                    && c.info.remote_ca_guid == ca_guid
            })
            .map(|(id, _)| *id)
    }

    /// Resends the stored one-shot answer of a connection if it is of `attr`.
    fn resend_answer(&mut self, id: u32, attr: AttrId) -> bool {
        let Some(c) = self.conns.get(&id) else { return false };
        let Some(mad) = c.answer.as_deref().copied() else { return false };
        if super::attr_of(&mad) != attr {
            return false;
        }
        let to = c.info.peer;
        self.counter(attr).retried += 1;
        self.send(to, attr, mad);
        true
    }

    /// `cm_issue_rej`: a REJ for a message we keep no state for, its IDs swapped from
    /// the received one's first two words, sent back to its sender's GSI.
    fn issue_rej(&mut self, from: &MadAddr, tid: u64, ids: (u32, u32), reason: RejReason, rejected: MessageRejected) {
        let msg = RejRepr {
            local_comm_id: ids.1,
            remote_comm_id: ids.0,
            message_rejected: rejected,
            reason,
            ari: &[],
            private_data: &[],
        };
        if let Ok(mad) = encode(tid, CmMessage::Rej(msg)) {
            self.send(MadAddr { qpn: 1, ..*from }, AttrId::Rej, mad);
        }
    }

    fn on_req(&mut self, now: Instant, from: &MadAddr, tid: u64, m: &ReqRepr<'_>, bytes: &[u8]) -> bool {
        // The word after the REQ's local ID, read as a REJ's remote ID, is what Linux
        // echoes as the REJ's local ID (zero in every REQ it sends).
        let data = &bytes[mad::HEADER_LEN..];
        let second = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
        if let Some(id) = self.find_remote_id(m.local_comm_id, m.local_ca_guid) {
            return self.dup_req(id);
        }
        if let Some(old) = self.find_remote_qpn(m.local_qpn, m.local_ca_guid, None) {
            self.issue_rej(from, tid, (m.local_comm_id, second), RejReason::StaleConn, MessageRejected::Req);
            if self.conns.get(&old).is_some_and(|c| c.state == CmState::Established) {
                let _ = self.send_dreq(now, super::ConnId(old), &[]);
            }
            return true;
        }
        let Some(listen) = self.find_listen(m.service_id) else {
            self.issue_rej(from, tid, (m.local_comm_id, second), RejReason::InvalidServiceId, MessageRejected::Req);
            return true;
        };
        let id = self.alloc_id();
        let mut conn = Conn::new(id, *from);
        conn.remote_id = m.local_comm_id;
        conn.tid = tid;
        conn.timeout = iba_timeout(m.local_cm_response_timeout);
        conn.max_cm_retries = m.max_cm_retries;
        conn.listen = Some(listen);
        let p = &m.primary_path;
        // Linux rebuilds the path from the REQ, lifetime = ACK timeout - 1, and its
        // timeout exponent is lifetime + 1 again.
        let life = p.local_ack_timeout.saturating_sub(1);
        conn.av_timeout = life + 1;
        let path = PathParams {
            sgid: gid(p.remote_gid),
            dgid: gid(p.local_gid),
            flow_label: p.flow_label,
            traffic_class: p.traffic_class,
            // Linux takes the hop limit from the GRH the REQ came with.
            hop_limit: from.hop_limit,
            sl: p.sl,
            rate: p.packet_rate,
            pkey: m.pkey,
            mtu: m.path_mtu,
            packet_life_time: life,
        };
        let info = &mut conn.info;
        info.service_id = m.service_id;
        info.remote_ca_guid = m.local_ca_guid;
        info.remote_qpn = m.local_qpn;
        info.sq_psn = m.starting_psn;
        info.path_mtu = m.path_mtu;
        info.initiator_depth = m.responder_resources;
        info.responder_resources = m.initiator_depth;
        info.retry_count = m.retry_count;
        info.rnr_retry_count = m.rnr_retry_count;
        info.local_ack_timeout = conn.av_timeout;
        info.sgid = path.sgid;
        info.dgid = path.dgid;
        info.traffic_class = path.traffic_class;
        info.hop_limit = path.hop_limit;
        info.flow_label = path.flow_label;
        info.sl = path.sl;
        info.pkey = m.pkey;
        info.pkey_index = from.pkey_index;
        info.qkey = m.local_qkey;
        info.qp_type = Some(m.transport_type);
        info.srq = m.srq;
        info.flow_control = m.flow_control;
        conn.state = CmState::ReqRcvd;
        self.conns.insert(id, conn);
        let req = ReqInfo {
            from: *from,
            remote_comm_id: m.local_comm_id,
            service_id: m.service_id,
            remote_ca_guid: m.local_ca_guid,
            remote_qkey: m.local_qkey,
            remote_qpn: m.local_qpn,
            qp_type: m.transport_type,
            starting_psn: m.starting_psn,
            responder_resources: m.initiator_depth,
            initiator_depth: m.responder_resources,
            local_cm_response_timeout: m.remote_cm_response_timeout,
            remote_cm_response_timeout: m.local_cm_response_timeout,
            flow_control: m.flow_control,
            retry_count: m.retry_count,
            rnr_retry_count: m.rnr_retry_count,
            max_cm_retries: m.max_cm_retries,
            srq: m.srq,
            primary_path: path,
            private_data: m.private_data.to_vec(),
        };
        self.event(id, CmEvent::ReqReceived { listen, req });
        true
    }

    /// `cm_dup_req_handler`: the MRA again, a stale REJ in timewait, else nothing (the
    /// REP, if sent, is resent by its own timer).
    fn dup_req(&mut self, id: u32) -> bool {
        let Some(state) = self.conns.get(&id).map(|c| c.state) else { return false };
        match state {
            CmState::MraReqSent => self.resend_answer(id, AttrId::Mra),
            CmState::Timewait => {
                let Ok(mad) = self.format_rej(id, RejReason::StaleConn, &[], &[]) else { return false };
                let Some(to) = self.conns.get(&id).map(|c| c.info.peer) else { return false };
                self.counters.rej.retried += 1;
                self.send(to, AttrId::Rej, mad);
                true
            }
            _ => false,
        }
    }

    fn on_mra(&mut self, now: Instant, m: &MraRepr<'_>) -> bool {
        let id = match m.message_mraed {
            MessageMraed::Req => self.acquire(m.remote_comm_id, 0),
            MessageMraed::Rep | MessageMraed::Lap => self.acquire(m.remote_comm_id, m.local_comm_id),
            MessageMraed::Unknown(_) => None,
        };
        let Some(id) = id else { return false };
        let Some(c) = self.conns.get_mut(&id) else { return false };
        let next = match (c.state, m.message_mraed) {
            (CmState::ReqSent, MessageMraed::Req) => CmState::MraReqRcvd,
            (CmState::RepSent, MessageMraed::Rep) => CmState::MraRepRcvd,
            _ => return false,
        };
        let Some(p) = c.pending.as_mut() else { return false };
        // The peer needs its service timeout more, plus the path's time to reach us.
        p.timeout = super::add(iba_timeout(m.service_timeout), iba_timeout(c.av_timeout));
        p.deadline = now + p.timeout;
        c.state = next;
        self.event(id, CmEvent::MraReceived);
        true
    }

    fn on_rej(&mut self, now: Instant, m: &RejRepr<'_>) -> bool {
        let id = if m.reason == RejReason::Timeout {
            // The ARI of a timeout REJ is the sender's CA GUID.
            let mut guid = [0u8; 8];
            let n = m.ari.len().min(8);
            guid[..n].copy_from_slice(&m.ari[..n]);
            self.find_remote_id(m.local_comm_id, u64::from_be_bytes(guid))
                .and_then(|id| self.acquire(id, m.local_comm_id))
        } else if m.message_rejected == MessageRejected::Req {
            self.acquire(m.remote_comm_id, 0)
        } else {
            self.acquire(m.remote_comm_id, m.local_comm_id)
        };
        let Some(id) = id else { return false };
        let Some(state) = self.conns.get(&id).map(|c| c.state) else { return false };
        match state {
            CmState::ReqSent
            | CmState::MraReqRcvd
            | CmState::RepSent
            | CmState::MraRepRcvd
            | CmState::ReqRcvd
            | CmState::MraReqSent => {
                if m.reason == RejReason::StaleConn {
                    self.enter_timewait(now, id);
                } else {
                    self.reset_to_idle(id);
                }
            }
            CmState::DreqSent | CmState::RepRcvd | CmState::MraRepSent | CmState::Established => {
                self.enter_timewait(now, id);
            }
            _ => return false,
        }
        let event =
            CmEvent::RejReceived { reason: m.reason.to_raw(), ari: m.ari.to_vec(), private: m.private_data.to_vec() };
        self.event(id, event);
        self.free_if_done(id);
        true
    }

    fn on_rep(&mut self, now: Instant, from: &MadAddr, m: &RepRepr<'_>) -> bool {
        let Some(id) = self.acquire(m.remote_comm_id, 0) else {
            return self.dup_rep(m);
        };
        let Some(state) = self.conns.get(&id).map(|c| c.state) else { return false };
        if !matches!(state, CmState::ReqSent | CmState::MraReqRcvd) {
            return false;
        }
        if self.find_remote_id(m.local_comm_id, m.local_ca_guid).is_some() {
            return false;
        }
        if let Some(old) = self.find_remote_qpn(m.local_qpn, m.local_ca_guid, Some(id)) {
            let tid = self.conns.get(&id).map_or(0, |c| c.tid);
            self.issue_rej(from, tid, (m.local_comm_id, m.remote_comm_id), RejReason::StaleConn, MessageRejected::Rep);
            if self.conns.get(&old).is_some_and(|c| c.state == CmState::Established) {
                let _ = self.send_dreq(now, super::ConnId(old), &[]);
            }
            return true;
        }
        let Some(c) = self.conns.get_mut(&id) else { return false };
        c.state = CmState::RepRcvd;
        c.remote_id = m.local_comm_id;
        c.pending = None;
        c.av_timeout = ack_timeout(m.target_ack_delay, c.av_timeout.saturating_sub(1));
        let info = &mut c.info;
        info.remote_comm_id = m.local_comm_id;
        info.remote_ca_guid = m.local_ca_guid;
        info.remote_qpn = m.local_qpn;
        info.initiator_depth = m.responder_resources;
        info.responder_resources = m.initiator_depth;
        info.sq_psn = m.starting_psn;
        info.rnr_retry_count = m.rnr_retry_count;
        info.local_ack_timeout = c.av_timeout;
        info.qkey = m.local_qkey;
        let rep = RepInfo {
            remote_ca_guid: m.local_ca_guid,
            remote_qkey: m.local_qkey,
            remote_qpn: m.local_qpn,
            starting_psn: m.starting_psn,
            responder_resources: m.initiator_depth,
            initiator_depth: m.responder_resources,
            target_ack_delay: m.target_ack_delay,
            failover_accepted: m.failover_accepted,
            flow_control: m.flow_control,
            rnr_retry_count: m.rnr_retry_count,
            srq: m.srq,
            private_data: m.private_data.to_vec(),
        };
        self.event(id, CmEvent::RepReceived { rep });
        true
    }

    /// `cm_dup_rep_handler`: the RTU again once established, the MRA again if we sent
    /// one for the REP.
    fn dup_rep(&mut self, m: &RepRepr<'_>) -> bool {
        let Some(id) = self.acquire(m.remote_comm_id, m.local_comm_id) else { return false };
        match self.conns.get(&id).map(|c| c.state) {
            Some(CmState::Established) => self.resend_answer(id, AttrId::Rtu),
            Some(CmState::MraRepSent) => self.resend_answer(id, AttrId::Mra),
            _ => false,
        }
    }

    fn on_rtu(&mut self, m: &RtuRepr<'_>) -> bool {
        let Some(id) = self.acquire(m.remote_comm_id, m.local_comm_id) else { return false };
        let Some(c) = self.conns.get_mut(&id) else { return false };
        if !matches!(c.state, CmState::RepSent | CmState::MraRepRcvd) {
            return false;
        }
        c.state = CmState::Established;
        c.pending = None;
        self.event(id, CmEvent::RtuReceived);
        true
    }

    fn on_dreq(&mut self, now: Instant, from: &MadAddr, tid: u64, m: &DreqRepr<'_>) -> bool {
        let known = self.acquire(m.remote_comm_id, m.local_comm_id);
        // A connection back in idle after timewait is as good as forgotten.
        let known = known.filter(|id| self.conns.get(id).is_some_and(Conn::is_live));
        let Some(id) = known else {
            // `cm_issue_drep`: whatever we forgot, the peer may stop asking.
            let msg = DrepRepr { local_comm_id: m.remote_comm_id, remote_comm_id: m.local_comm_id, private_data: &[] };
            if let Ok(mad) = encode(tid, CmMessage::Drep(msg)) {
                self.counters.drep.retried += 1;
                self.send(MadAddr { qpn: 1, ..*from }, AttrId::Drep, mad);
            }
            return true;
        };
        let Some(c) = self.conns.get_mut(&id) else { return false };
        if c.info.local_qpn != m.remote_qpn {
            return false;
        }
        match c.state {
            CmState::RepSent | CmState::DreqSent | CmState::Established | CmState::MraRepRcvd => {}
            CmState::Timewait => {
                let msg = DrepRepr { local_comm_id: id, remote_comm_id: c.remote_id, private_data: &[] };
                let answer = c.answer.as_deref().copied().filter(|a| super::attr_of(a) == AttrId::Drep);
                let to = c.info.peer;
                let mad = match answer {
                    Some(a) => a,
                    None => match encode(tid, CmMessage::Drep(msg)) {
                        Ok(mad) => mad,
                        Err(_) => return false,
                    },
                };
                self.counters.drep.retried += 1;
                self.send(to, AttrId::Drep, mad);
                return true;
            }
            _ => return false,
        }
        c.state = CmState::DreqRcvd;
        c.pending = None;
        c.tid = tid;
        let destroyed = c.destroyed;
        let private = m.private_data.to_vec();
        if destroyed {
            // Nobody will answer for a destroyed connection: answer now.
            let _ = self.send_drep(now, super::ConnId(id), &[]);
        } else {
            self.event(id, CmEvent::DreqReceived { private });
        }
        true
    }

    fn on_drep(&mut self, now: Instant, m: &DrepRepr<'_>) -> bool {
        let Some(id) = self.acquire(m.remote_comm_id, m.local_comm_id) else { return false };
        if !self.conns.get(&id).is_some_and(|c| matches!(c.state, CmState::DreqSent | CmState::DreqRcvd)) {
            return false;
        }
        self.enter_timewait(now, id);
        self.event(id, CmEvent::DrepReceived);
        true
    }

    fn on_sidr_req(&mut self, from: &MadAddr, tid: u64, m: &SidrReqRepr<'_>) -> bool {
        let dup = self
            .conns
            .values()
            .any(|c| c.state == CmState::SidrReqRcvd && c.remote_id == m.request_id && c.info.peer.gid == from.gid);
        if dup {
            return false;
        }
        let Some(listen) = self.find_listen(m.service_id) else {
            let msg = SidrRepRepr {
                request_id: m.request_id,
                status: SidrStatus::UnsupportedServiceId,
                qpn: 0,
                service_id: m.service_id,
                qkey: 0,
                info: &[],
                private_data: &[],
            };
            if let Ok(mad) = encode(tid, CmMessage::SidrRep(msg)) {
                self.send(*from, AttrId::SidrRep, mad);
            }
            return true;
        };
        let id = self.alloc_id();
        let mut conn = Conn::new(id, *from);
        conn.remote_id = m.request_id;
        conn.tid = tid;
        conn.listen = Some(listen);
        conn.info.service_id = m.service_id;
        conn.info.pkey = m.pkey;
        conn.info.pkey_index = from.pkey_index;
        conn.info.dgid = from.gid;
        conn.state = CmState::SidrReqRcvd;
        self.conns.insert(id, conn);
        let req = SidrReqInfo {
            from: *from,
            request_id: m.request_id,
            pkey: m.pkey,
            service_id: m.service_id,
            private_data: m.private_data.to_vec(),
        };
        self.event(id, CmEvent::SidrReqReceived { listen, req });
        true
    }

    fn on_sidr_rep(&mut self, m: &SidrRepRepr<'_>) -> bool {
        let Some(id) = self.acquire(m.request_id, 0) else { return false };
        let Some(c) = self.conns.get_mut(&id) else { return false };
        if c.state != CmState::SidrReqSent {
            return false;
        }
        c.state = CmState::Idle;
        c.pending = None;
        c.info.remote_qpn = m.qpn;
        c.info.qkey = m.qkey;
        let rep = SidrRepInfo {
            status: m.status,
            qpn: m.qpn,
            qkey: m.qkey,
            service_id: m.service_id,
            info: m.info.to_vec(),
            private_data: m.private_data.to_vec(),
        };
        self.event(id, CmEvent::SidrRepReceived { rep });
        self.free_if_done(id);
        true
    }
}
