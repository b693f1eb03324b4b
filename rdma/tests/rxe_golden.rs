//! The frames our requester and responder build, against the frames Linux rxe sent
//! (tests/fixtures): with the QPNs, PSNs, IP IDs, addresses and payload set to the
//! captured ones, a 64-byte SEND ONLY, its ACK, and a 3000-byte RDMA WRITE
//! (FIRST/MIDDLE/LAST at MTU 1024) come out byte for byte as captured, ICRC included,
//! whether the payload is copied into the frame or sent from memory (zero-copy, the
//! NIC reading it after the send).

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::{CAPTURES, read_pcapng};
use rdma::core::port::IbMtu;
use rdma::rxe::memory::Memory;
use rdma::rxe::qp::{QpCap, QpInitAttr};
use rdma::rxe::qp_state::QpType;
use rdma::rxe::sim::{self, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Instant;
use rdma::rxe::wr::{RecvWr, SendWr, Sge, WrOpcode};
use rdma::wire::frame;

fn capture(name: &str) -> Vec<Vec<u8>> {
    let c = CAPTURES.iter().find(|c| c.name == name).expect("capture");
    read_pcapng(c.pcapng)
}

/// Creates throwaway QPs on both nodes until the next QP gets `qpn`.
fn burn_qpns(sim: &mut Sim, qpn: u32) {
    for node in &mut sim.nodes {
        let pd = node.alloc_pd().expect("pd");
        let cq = node.create_cq(4).expect("cq");
        loop {
            let qp = node
                .create_qp(&QpInitAttr {
                    qp_type: QpType::Rc,
                    pd,
                    send_cq: cq,
                    recv_cq: cq,
                    srq: None,
                    cap: QpCap::default(),
                    sq_sig_all: false,
                })
                .expect("qp");
            if node.qpn(qp) == Some(qpn - 1) {
                break;
            }
        }
    }
}

/// Frames put on the wire, with their destination node.
type Log = Rc<RefCell<Vec<(usize, Vec<u8>)>>>;

/// Records every frame put on the wire.
fn record(sim: &mut Sim) -> Log {
    let log: Log = Rc::default();
    let l = log.clone();
    sim.wire.filter = Some(Box::new(move |to, f| {
        l.borrow_mut().push((to, f.to_vec()));
        false
    }));
    log
}

/// Node 1 is 10.0.0.2 (52:54:00:00:00:02), the captures' requester; node 0 is 10.0.0.1.
const REQ: usize = 1;
const RESP: usize = 0;

fn ip_id(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[18], frame[19]])
}

fn psn(frame: &[u8]) -> u32 {
    frame::parse(frame).expect("parses").repr.roce.bth.psn.value()
}

#[test]
fn send_only_and_its_ack_match_the_capture() {
    for zero_copy in [false, true] {
        send_only_and_its_ack(zero_copy);
    }
}

fn send_only_and_its_ack(zero_copy: bool) {
    let golden = capture("rc_send_small");
    let (send, ack) = (&golden[0], &golden[1]);
    let mut sim = Sim::new(1, Faults::NONE, 1 << 16, Default::default());
    sim.set_zero_copy(zero_copy);
    burn_qpns(&mut sim, 0x11);
    let mut link = Link { mtu: IbMtu::Mtu1024, ..Link::default() };
    link.sq_psn[REQ] = psn(send);
    link.sq_psn[RESP] = 0x00_d9f6;
    let ends = sim::connect(&mut sim, &link).expect("connect");
    assert_eq!(ends.map(|e| e.qpn), [0x11, 0x11]);
    sim.nodes[REQ].set_ip_id(ip_id(send));
    sim.nodes[RESP].set_ip_id(ip_id(ack));
    sim.nodes[REQ].memory_mut().write(MEM_BASE, &[0x7b; 64]).expect("memory");
    let r = ends[RESP];
    let rsge = [Sge { addr: MEM_BASE + 0x1000, length: 64, lkey: r.mr.raw() }];
    sim.nodes[RESP].post_recv(r.qp, &RecvWr { wr_id: 1, sg_list: &rsge }).expect("recv");
    let log = record(&mut sim);
    let s = ends[REQ];
    let sges = [Sge { addr: MEM_BASE, length: 64, lkey: s.mr.raw() }];
    sim.nodes[REQ].post_send(s.qp, &SendWr::new(1, WrOpcode::Send, &sges)).expect("send");
    sim.run_idle(Instant::from_micros(1_000_000));
    let log = log.borrow();
    assert_eq!(log.len(), 2, "one SEND ONLY, one ACK");
    assert_eq!(log[0].0, RESP);
    assert_eq!(&log[0].1, send, "SEND ONLY byte for byte (zero-copy {zero_copy})");
    assert_eq!(&log[1].1, ack, "ACK (syndrome 0x1F, MSN 1) byte for byte");
    let stats = sim.nodes[REQ].stats();
    assert_eq!((stats.tx_zero_copy, stats.tx_copied), if zero_copy { (1, 0) } else { (0, 1) });
}

#[test]
fn multi_packet_write_matches_the_capture() {
    for zero_copy in [false, true] {
        multi_packet_write(zero_copy);
    }
}

fn multi_packet_write(zero_copy: bool) {
    let golden = capture("rdma_write_multi");
    let first = frame::parse(&golden[0]).expect("parses");
    let reth = first.repr.roce.ext.reth.expect("RETH");
    assert_eq!(reth.dma_len, 3000);
    // The payload the capture carries, in order.
    let payload: Vec<u8> =
        golden[..3].iter().flat_map(|f| frame::parse(f).expect("parses").repr.payload.to_vec()).collect();
    assert_eq!(payload.len(), 3000);

    let mut sim = Sim::new(1, Faults::NONE, 1 << 16, Default::default());
    sim.set_zero_copy(zero_copy);
    burn_qpns(&mut sim, 0x14);
    let mut link = Link { mtu: IbMtu::Mtu1024, ..Link::default() };
    link.sq_psn[REQ] = psn(&golden[0]);
    let ends = sim::connect(&mut sim, &link).expect("connect");
    assert_eq!(ends[REQ].qpn, 0x14);
    sim.nodes[REQ].set_ip_id(ip_id(&golden[0]));
    sim.nodes[REQ].memory_mut().write(MEM_BASE, &payload).expect("memory");
    let log = record(&mut sim);
    let s = ends[REQ];
    let sges = [Sge { addr: MEM_BASE, length: 3000, lkey: s.mr.raw() }];
    let wr = SendWr::new(1, WrOpcode::RdmaWrite, &sges).with_remote(reth.va, reth.rkey);
    sim.nodes[REQ].post_send(s.qp, &wr).expect("write");
    sim.step();
    let log = log.borrow();
    let sent: Vec<&Vec<u8>> = log.iter().filter(|(to, _)| *to == RESP).map(|(_, f)| f).collect();
    assert_eq!(sent.len(), 3);
    for (i, (ours, theirs)) in sent.iter().zip(&golden[..3]).enumerate() {
        assert_eq!(*ours, theirs, "frame {i} (FIRST/MIDDLE/LAST) byte for byte (zero-copy {zero_copy})");
    }
    let stats = sim.nodes[REQ].stats();
    assert_eq!((stats.tx_zero_copy, stats.tx_copied), if zero_copy { (3, 0) } else { (0, 3) });
}
