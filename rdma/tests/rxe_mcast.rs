//! UD multicast through the simulated wire (IBA 10.5, RoCE A17.4.5; Linux
//! `rxe_mcast.c`): a send to a group reaches every QP attached to it, at the
//! IP multicast MAC, and a frame to a group nobody is attached to (any more)
//! is dropped and counted.

use core::net::Ipv4Addr;

use rdma::core::gid::Gid;
use rdma::rxe::ah::AhAttr;
use rdma::rxe::mcast::MULTICAST_QPN;
use rdma::rxe::memory::Memory;
use rdma::rxe::qp::{QpAttr, QpHandle, QpInitAttr};
use rdma::rxe::qp_state::{AttrMask, QpState, QpType};
use rdma::rxe::sim::{self, End, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Instant;
use rdma::rxe::wc::WcStatus;
use rdma::rxe::wr::{RecvWr, SendWr, Sge, UdDest, WrOpcode};
use rdma::wire::DropReason;
use rdma::wire::frame as wire_frame;
use std::cell::RefCell;
use std::rc::Rc;

const MEM: usize = 1 << 20;
const LIMIT: Instant = Instant::from_micros(10_000_000);
const QKEY: u32 = 0x1111_1111;

fn group() -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(239, 1, 2, 3))
}

/// A second UD QP on node 1, in RTS with the link's Q_Key.
fn another_ud_qp(sim: &mut Sim, b: &End) -> (QpHandle, u32) {
    let n = &mut sim.nodes[1];
    let cap = Link::default().cap;
    let init =
        QpInitAttr { qp_type: QpType::Ud, pd: b.pd, send_cq: b.cq, recv_cq: b.cq, srq: None, cap, sq_sig_all: false };
    let qp = n.create_qp(&init).expect("qp");
    let mut attr = QpAttr { qp_state: QpState::Init, qkey: QKEY, port_num: 1, ..QpAttr::default() };
    n.modify_qp(qp, &attr, AttrMask::STATE | AttrMask::QKEY | AttrMask::PORT | AttrMask::PKEY_INDEX).expect("init");
    attr.qp_state = QpState::Rtr;
    n.modify_qp(qp, &attr, AttrMask::STATE).expect("rtr");
    attr.qp_state = QpState::Rts;
    n.modify_qp(qp, &attr, AttrMask::STATE | AttrMask::SQ_PSN).expect("rts");
    (qp, n.qpn(qp).expect("qpn"))
}

fn post_recv(sim: &mut Sim, b: &End, qp: QpHandle, wr_id: u64, offset: u64) {
    let sges = [Sge { addr: MEM_BASE + offset, length: 40 + 256, lkey: b.mr.raw() }];
    sim.nodes[1].post_recv(qp, &RecvWr { wr_id, sg_list: &sges }).expect("recv");
}

#[test]
fn a_send_to_a_group_reaches_every_attached_qp_and_a_detached_group_drops() {
    let link = Link { qp_type: QpType::Ud, qkey: QKEY, ..Link::default() };
    let mut sim = Sim::new(3, Faults::NONE, MEM, Default::default());
    let [a, b] = sim::connect(&mut sim, &link).expect("connect");
    let (qp2, _) = another_ud_qp(&mut sim, &b);
    for qp in [b.qp, qp2] {
        sim.nodes[1].attach_mcast(qp, &group()).expect("attach");
    }
    assert!(sim.nodes[1].attach_mcast(b.qp, &group()).is_err(), "attached twice");
    assert!(sim.nodes[1].attach_mcast(b.qp, &sim::node_gid(1)).is_err(), "not a multicast GID");
    post_recv(&mut sim, &b, b.qp, 1, 0x1000);
    post_recv(&mut sim, &b, qp2, 2, 0x2000);
    // The AH needs no MAC: the group's is derived from its address.
    let ah_attr = AhAttr { dgid: group(), sgid_index: 0, hop_limit: 1, ..AhAttr::default() };
    let ah = sim.nodes[0].create_ah(a.pd, &ah_attr).expect("ah");
    let macs = Rc::new(RefCell::new(Vec::new()));
    let m = macs.clone();
    sim.wire.filter = Some(Box::new(move |_, f| {
        if let Ok(rx) = wire_frame::parse(f) {
            m.borrow_mut().push((f[..6].to_vec(), rx.repr.roce.bth.dest_qpn));
        }
        false
    }));
    sim.nodes[0].memory_mut().write(MEM_BASE, b"to the group").expect("in range");
    let sge = [Sge { addr: MEM_BASE, length: 12, lkey: a.mr.raw() }];
    let ud = UdDest { ah, remote_qpn: MULTICAST_QPN, remote_qkey: QKEY };
    sim.nodes[0].post_send(a.qp, &SendWr::new(9, WrOpcode::Send, &sge).with_ud(ud)).expect("send");
    sim.run_idle(LIMIT);
    assert_eq!(macs.borrow()[0], (vec![0x01, 0x00, 0x5E, 0x01, 0x02, 0x03], MULTICAST_QPN));
    let got = sim::drain_cq(&mut sim.nodes[1], b.cq);
    let mut ids: Vec<(u64, WcStatus, u32)> = got.iter().map(|w| (w.wr_id, w.status, w.src_qp)).collect();
    ids.sort_by_key(|x| x.0);
    assert_eq!(ids, [(1, WcStatus::Success, a.qpn), (2, WcStatus::Success, a.qpn)]);
    for off in [0x1000u64, 0x2000] {
        assert_eq!(sim.nodes[1].memory().slice(MEM_BASE + off + 40, 12).expect("in range"), b"to the group");
    }
    // Detached, both: the next frame finds nobody and is counted.
    for qp in [b.qp, qp2] {
        sim.nodes[1].detach_mcast(qp, &group()).expect("detach");
    }
    assert!(sim.nodes[1].detach_mcast(b.qp, &group()).is_err(), "not attached");
    post_recv(&mut sim, &b, b.qp, 3, 0x3000);
    let before = sim.nodes[1].stats().drops.get(DropReason::McastNoQp);
    sim.nodes[0].post_send(a.qp, &SendWr::new(10, WrOpcode::Send, &sge).with_ud(ud)).expect("send");
    sim.run_idle(LIMIT);
    assert_eq!(sim.nodes[1].stats().drops.get(DropReason::McastNoQp), before + 1);
    assert!(sim::drain_cq(&mut sim.nodes[1], b.cq).is_empty(), "the posted receive stays posted");
}
