//! Asynchronous events the transport raises for the consumer (IBA vol. 1 11.6.3
//! Asynchronous Events; `enum ibv_event_type`): CQ overflow, the SRQ limit, QPs that
//! went to the error state on their own or migrated to their alternate path.

use super::cq::CqHandle;
use super::srq::SrqHandle;

/// One asynchronous event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncEvent {
    /// A completion had to be dropped: the CQ was full (`IBV_EVENT_CQ_ERR`).
    CqErr(CqHandle),
    /// The SRQ's WQE count fell below its armed limit (`IBV_EVENT_SRQ_LIMIT_REACHED`);
    /// the limit is disarmed until set again.
    SrqLimitReached(SrqHandle),
    /// The QP went to the error state because of a transport error: retries exhausted,
    /// or a NAK that ends the connection (`IBV_EVENT_QP_FATAL`).
    QpFatal { qpn: u32 },
    /// The responder found an invalid request (`IBV_EVENT_QP_REQ_ERR`).
    QpReqErr { qpn: u32 },
    /// The responder refused a remote access (`IBV_EVENT_QP_ACCESS_ERR`).
    QpAccessErr { qpn: u32 },
    /// A QP moved to SQD has no more outstanding sends (`IBV_EVENT_SQ_DRAINED`).
    SqDrained { qpn: u32 },
    /// A QP attached to an SRQ went to error and holds no more receive WQEs
    /// (`IBV_EVENT_QP_LAST_WQE_REACHED`).
    QpLastWqeReached { qpn: u32 },
    /// The first packet arrived on a QP in RTR (`IBV_EVENT_COMM_EST`).
    CommEst { qpn: u32 },
    /// The QP moved to its alternate path (`IBV_EVENT_PATH_MIG`).
    PathMig { qpn: u32 },
}
