//! Where the IB CM's parameter and event types meet rdma_cm's: what
//! rdma_cm puts in the messages it asks for (Linux `cma_connect_ib`,
//! `cma_accept_ib`, `cma_resolve_ib_udp`) and takes from those it gets.

use alloc::vec::Vec;

use super::cma::{CM_RESPONSE_TIMEOUT, ConnParam, IBOE_PACKET_LIFETIME, IdQpType, MAX_CM_RETRIES, UDP_QKEY};
use super::ib_cm;
use super::route::Route;
use crate::core::gid::Gid;
use crate::core::port::IbMtu;
use crate::wire::cm::{RejReason, SidrStatus, TransportType};
use ib_cm::{PathParams, RepParams, ReqParams, SidrRepParams, SidrReqParams, SidrStatusParam};

/// rxe's CA ACK delay exponent (`RXE_LOCAL_CA_ACK_DELAY`), which the CM
/// folds into the ACK timeout.
const ACK_DELAY: u8 = 15;
/// The default P_Key, RoCE's only one.
const PKEY: u16 = 0xFFFF;
/// rdma_cm's SIDR wait per try: 4.096 us << CM_RESPONSE_TIMEOUT in ms.
const SIDR_TIMEOUT_MS: u32 = 1 << (CM_RESPONSE_TIMEOUT - 8);

/// A REQ or SIDR REQ as rdma_cm hands it to its listener.
pub(crate) struct Incoming {
    pub sidr: bool,
    pub peer_gid: Gid,
    pub private: Vec<u8>,
    pub param: ConnParam,
    pub mtu: IbMtu,
    pub hop_limit: u8,
}

impl Incoming {
    pub fn from_req(req: &ib_cm::ReqInfo) -> Incoming {
        Incoming {
            sidr: false,
            peer_gid: req.from.gid,
            private: req.private_data.clone(),
            param: ConnParam {
                responder_resources: req.responder_resources,
                initiator_depth: req.initiator_depth,
                flow_control: u8::from(req.flow_control),
                retry_count: req.retry_count,
                rnr_retry_count: req.rnr_retry_count,
                srq: u8::from(req.srq),
                qp_num: req.remote_qpn,
                qkey: req.remote_qkey,
                private_data: Vec::new(),
            },
            mtu: IbMtu::from_code(req.primary_path.mtu).unwrap_or(IbMtu::Mtu1024),
            hop_limit: req.from.hop_limit,
        }
    }

    pub fn from_sidr_req(req: &ib_cm::SidrReqInfo) -> Incoming {
        Incoming {
            sidr: true,
            peer_gid: req.from.gid,
            private: req.private_data.clone(),
            param: ConnParam::default(),
            mtu: IbMtu::Mtu1024,
            hop_limit: req.from.hop_limit,
        }
    }
}

pub(crate) fn req(service_id: u64, qp_type: IdQpType, p: &ConnParam, psn: u32, r: &Route, private: &[u8]) -> ReqParams {
    ReqParams {
        primary_path: PathParams {
            sgid: r.sgid,
            dgid: r.dgid,
            flow_label: 0,
            traffic_class: 0,
            hop_limit: r.hop_limit,
            sl: 0,
            rate: 0,
            pkey: PKEY,
            mtu: r.mtu.code(),
            packet_life_time: IBOE_PACKET_LIFETIME,
        },
        service_id,
        qp_num: p.qp_num,
        qp_type: if qp_type == IdQpType::Uc { TransportType::Uc } else { TransportType::Rc },
        starting_psn: psn,
        responder_resources: p.responder_resources,
        initiator_depth: p.initiator_depth,
        remote_cm_response_timeout: CM_RESPONSE_TIMEOUT,
        local_cm_response_timeout: CM_RESPONSE_TIMEOUT,
        flow_control: p.flow_control != 0,
        retry_count: p.retry_count.min(7),
        rnr_retry_count: p.rnr_retry_count.min(7),
        max_cm_retries: MAX_CM_RETRIES,
        srq: p.srq != 0,
        ack_delay: ACK_DELAY,
        private_data: private.to_vec(),
    }
}

pub(crate) fn rep(p: &ConnParam, psn: u32, private: &[u8]) -> RepParams {
    RepParams {
        qp_num: p.qp_num,
        starting_psn: psn,
        responder_resources: p.responder_resources,
        initiator_depth: p.initiator_depth,
        failover_accepted: 0,
        flow_control: p.flow_control != 0,
        rnr_retry_count: p.rnr_retry_count.min(7),
        srq: p.srq != 0,
        target_ack_delay: ACK_DELAY,
        private_data: private.to_vec(),
    }
}

pub(crate) fn sidr_req(service_id: u64, private: &[u8]) -> SidrReqParams {
    SidrReqParams {
        service_id,
        pkey: PKEY,
        timeout_ms: SIDR_TIMEOUT_MS,
        max_cm_retries: MAX_CM_RETRIES,
        private_data: private.to_vec(),
    }
}

pub(crate) fn sidr_rep_ok(qp_num: u32, qkey: u32, private: &[u8]) -> SidrRepParams {
    SidrRepParams {
        qp_num,
        qkey,
        status: SidrStatusParam(SidrStatus::Success),
        info: Vec::new(),
        private_data: private.to_vec(),
    }
}

pub(crate) fn sidr_rep_reject(private: &[u8]) -> SidrRepParams {
    SidrRepParams {
        qp_num: 0,
        qkey: 0,
        status: SidrStatusParam(SidrStatus::Reject),
        info: Vec::new(),
        private_data: private.to_vec(),
    }
}

pub(crate) fn consumer_reject() -> RejReason {
    RejReason::ConsumerDefined
}

/// CONNECT_RESPONSE's parameters (`cma_set_rep_event_data`).
pub(crate) fn from_rep(rep: &ib_cm::RepInfo) -> ConnParam {
    ConnParam {
        responder_resources: rep.responder_resources,
        initiator_depth: rep.initiator_depth,
        flow_control: u8::from(rep.flow_control),
        retry_count: 0,
        rnr_retry_count: rep.rnr_retry_count,
        srq: u8::from(rep.srq),
        qp_num: rep.remote_qpn,
        qkey: 0,
        private_data: rep.private_data.clone(),
    }
}

/// A SIDR REP's QPN, Q_Key and private data, or the UNREACHABLE status
/// (`cma_sidr_rep_handler`: a refusal, or a Q_Key other than rdma_cm's).
pub(crate) fn from_sidr_rep(rep: &ib_cm::SidrRepInfo) -> Result<(u32, u32, Vec<u8>), i32> {
    if rep.status != SidrStatus::Success {
        return Err(i32::from(rep.status.to_raw()));
    }
    if rep.qkey != UDP_QKEY {
        return Err(-22);
    }
    Ok((rep.qpn, rep.qkey, rep.private_data.clone()))
}
