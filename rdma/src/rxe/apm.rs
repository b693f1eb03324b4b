//! Automatic path migration (IBA vol. 1 17.2.8; the device advertises
//! AUTO_PATH_MIG). A connected QP may hold an alternate path, loaded with
//! `IBV_QP_ALT_PATH`, and a migration state, set with
//! `IBV_QP_PATH_MIG_STATE`. While it is ARMED:
//! - the requester, when its transport retries run out on the primary path
//!   (timeouts, sequence NAKs, implied NAKs), moves to the alternate path and
//!   resends there with its retry count restored, instead of failing the WR;
//! - the responder, when its peer's packets arrive over the alternate path
//!   (the peer migrated), follows it.
//!
//! Either way the QP takes the alternate address vector, port, P_Key index
//! and local ACK timeout as its own, goes to MIGRATED and raises PATH_MIG.
//!
//! Linux rxe's driver stores the alternate path and the state and never
//! migrates; and Linux's core refuses `IBV_QP_ALT_PATH` on a RoCE port with
//! EINVAL before rxe sees it (`_ib_modify_qp`: alternate paths are for IB
//! only), so there the AUTO_PATH_MIG bit rxe advertises is unusable. Here
//! the bit is kept and made true: an alternate path is taken and used. A
//! Linux peer does not follow a migration (it drops packets from an address
//! other than its primary path's), so migrating needs this transport at
//! both ends. As in rxe, the state otherwise moves only as the consumer sets it: REARM
//! does not become ARMED on its own (IBA has it do so when a packet with
//! MigReq 0 arrives, but rxe, and so this transport, sends MigReq 0 in every
//! state, so the bit tells nothing), and a consumer setting MIGRATED on an
//! armed QP stores the state without moving the QP (IBA would migrate it
//! then, a consumer-requested migration; neither rxe nor this transport
//! does).

use crate::wire::frame::{IpPath, Path};

use super::device::Device;
use super::event::AsyncEvent;
use super::qp::{MigState, Qp};

/// Whether the QP may migrate: connected, ARMED, with an alternate path.
pub fn armed(qp: &Qp) -> bool {
    qp.qp_type.is_connected() && qp.attr.path_mig_state == MigState::Armed && qp.alt_path.is_some()
}

/// Whether a packet from `src` came from the far end of `path`.
pub fn from_far_end(path: Option<Path>, src: &IpPath) -> bool {
    match (path.map(|p| p.ip), src) {
        (Some(IpPath::V4 { dst, .. }), IpPath::V4 { src, .. }) => dst == *src,
        (Some(IpPath::V6 { dst, .. }), IpPath::V6 { src, .. }) => dst == *src,
        _ => false,
    }
}

/// Moves an armed QP onto its alternate path; returns whether it did.
pub fn migrate<M>(qp: &mut Qp, dev: &mut Device<M>) -> bool {
    if !armed(qp) {
        return false;
    }
    qp.path = qp.alt_path;
    let a = &mut qp.attr;
    a.ah_attr = a.alt_ah_attr;
    a.port_num = a.alt_port_num;
    a.pkey_index = a.alt_pkey_index;
    a.timeout = a.alt_timeout;
    a.path_mig_state = MigState::Migrated;
    dev.stats.path_migrations += 1;
    dev.event(AsyncEvent::PathMig { qpn: qp.qpn });
    true
}
