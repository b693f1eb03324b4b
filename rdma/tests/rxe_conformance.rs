//! Named conformance cases for the rxe transport, each through the deterministic
//! simulated wire (`rdma::rxe::sim`): the IBA behaviours issue 6 lists, one test each.

use rdma::core::counters::RxeCounter;
use rdma::rxe::memory::Memory;
use rdma::rxe::sim::{self, End, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Instant;
use rdma::rxe::wc::{WcOpcode, WcStatus, WorkCompletion};
use rdma::rxe::wr::{RecvWr, SendWr, Sge, UdDest, WrOpcode};
use rdma::wire::frame::DropReason;
use rdma::wire::frame::{self as wire_frame};
use rdma::wire::{Opcode, Psn};
use std::cell::Cell;
use std::rc::Rc;

const MEM: usize = 1 << 20;
const LIMIT: Instant = Instant::from_micros(60_000_000);

fn setup(faults: Faults, link: &Link) -> (Sim, [End; 2]) {
    let mut sim = Sim::new(1, faults, MEM, Default::default());
    let ends = sim::connect(&mut sim, link).expect("connect");
    (sim, ends)
}

fn sge(end: &End, offset: u64, len: u32) -> Sge {
    Sge { addr: MEM_BASE + offset, length: len, lkey: end.mr.raw() }
}

fn fill(sim: &mut Sim, node: usize, offset: u64, data: &[u8]) {
    sim.nodes[node].memory_mut().write(MEM_BASE + offset, data).expect("in range");
}

fn read(sim: &Sim, node: usize, offset: u64, len: usize) -> Vec<u8> {
    sim.nodes[node].memory().slice(MEM_BASE + offset, len).expect("in range").to_vec()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Runs until `n` completions arrived on node `node`'s CQ; returns them.
fn wait_cqes(sim: &mut Sim, node: usize, end: &End, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    sim.run_until(LIMIT, |s| {
        got.extend(sim::drain_cq(&mut s.nodes[node], end.cq));
        got.len() >= n
    });
    got
}

fn post_recv(sim: &mut Sim, node: usize, end: &End, wr_id: u64, offset: u64, len: u32) {
    let sges = [sge(end, offset, len)];
    sim.nodes[node].post_recv(end.qp, &RecvWr { wr_id, sg_list: &sges }).expect("post recv");
}

#[test]
fn send_small_and_large() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    let data = pattern(3000, 7);
    fill(&mut sim, 0, 0, &data);
    post_recv(&mut sim, 1, &b, 100, 0x8000, 4096);
    post_recv(&mut sim, 1, &b, 101, 0x9000, 64);
    let s1 = [sge(&a, 0, 3000)];
    let s2 = [sge(&a, 0, 64)];
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &s1)).expect("post");
    sim.nodes[0].post_send(a.qp, &SendWr::new(2, WrOpcode::SendWithImm, &s2).with_imm(0xABCD)).expect("post");
    let sent = wait_cqes(&mut sim, 0, &a, 2);
    assert_eq!(
        sent.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    let recvd = sim::drain_cq(&mut sim.nodes[1], b.cq);
    assert_eq!(recvd.len(), 2);
    assert_eq!((recvd[0].wr_id, recvd[0].byte_len, recvd[0].opcode), (100, 3000, WcOpcode::Recv));
    assert_eq!((recvd[1].wr_id, recvd[1].byte_len, recvd[1].imm_data), (101, 64, 0xABCD));
    assert_eq!(recvd[1].src_qp, a.qpn);
    assert_eq!(read(&sim, 1, 0x8000, 3000), data);
    assert_eq!(sim.nodes[0].stats().get(RxeCounter::RdmaSends), 2);
    assert_eq!(sim.nodes[1].stats().get(RxeCounter::RdmaRecvs), 2);
}

/// Drops the first `n` frames toward `to` whose opcode is `op`; counts what it dropped.
fn drop_first(sim: &mut Sim, to: usize, op: Opcode, n: u32) -> Rc<Cell<u32>> {
    let dropped = Rc::new(Cell::new(0));
    let d = dropped.clone();
    sim.wire.filter = Some(Box::new(move |dest, frame| {
        let hit = dest == to && wire_frame::parse(frame).is_ok_and(|rx| rx.repr.roce.bth.opcode == op);
        if hit && d.get() < n {
            d.set(d.get() + 1);
            return true;
        }
        false
    }));
    dropped
}

fn statuses(wcs: &[WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

#[test]
fn write_read_and_atomics() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    let data = pattern(5000, 3);
    fill(&mut sim, 0, 0, &data);
    let remote = pattern(3000, 9);
    fill(&mut sim, 1, 0x4000, &remote);
    fill(&mut sim, 1, 0x100, &40u64.to_ne_bytes());
    let rkey = b.mr.raw();
    let n = &mut sim.nodes[0];
    n.post_send(a.qp, &SendWr::new(1, WrOpcode::RdmaWrite, &[sge(&a, 0, 5000)]).with_remote(MEM_BASE + 0x10000, rkey))
        .expect("post");
    n.post_send(
        a.qp,
        &SendWr::new(2, WrOpcode::RdmaRead, &[sge(&a, 0x20000, 3000)]).with_remote(MEM_BASE + 0x4000, rkey),
    )
    .expect("post");
    n.post_send(
        a.qp,
        &SendWr::new(3, WrOpcode::AtomicFetchAdd, &[sge(&a, 0x30000, 8)])
            .with_remote(MEM_BASE + 0x100, rkey)
            .with_atomic(2, 0),
    )
    .expect("post");
    n.post_send(
        a.qp,
        &SendWr::new(4, WrOpcode::AtomicCmpSwp, &[sge(&a, 0x30008, 8)])
            .with_remote(MEM_BASE + 0x100, rkey)
            .with_atomic(42, 7),
    )
    .expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 4);
    assert_eq!(statuses(&wcs), [1, 2, 3, 4].map(|i| (i, WcStatus::Success)));
    assert_eq!(
        wcs.iter().map(|w| w.opcode).collect::<Vec<_>>(),
        [WcOpcode::RdmaWrite, WcOpcode::RdmaRead, WcOpcode::FetchAdd, WcOpcode::CompSwap]
    );
    assert_eq!(read(&sim, 1, 0x10000, 5000), data);
    assert_eq!(read(&sim, 0, 0x20000, 3000), remote);
    assert_eq!(read(&sim, 0, 0x30000, 8), 40u64.to_ne_bytes());
    assert_eq!(read(&sim, 0, 0x30008, 8), 42u64.to_ne_bytes());
    assert_eq!(read(&sim, 1, 0x100, 8), 7u64.to_ne_bytes());
    assert!(sim::drain_cq(&mut sim.nodes[1], b.cq).is_empty(), "WRITE without immediate consumes no receive");
}

#[test]
fn timeout_then_retransmit() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    let dropped = drop_first(&mut sim, 1, Opcode::RcSendLast, 1);
    post_recv(&mut sim, 1, &b, 1, 0x8000, 4096);
    fill(&mut sim, 0, 0, &pattern(2500, 1));
    sim.nodes[0].post_send(a.qp, &SendWr::new(7, WrOpcode::Send, &[sge(&a, 0, 2500)])).expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 1);
    assert_eq!(statuses(&wcs), [(7, WcStatus::Success)]);
    assert_eq!(dropped.get(), 1);
    let st = sim.nodes[0].stats();
    assert_eq!(st.timeouts, 1, "no ACK came, the timer fired once");
    // Only the LAST asked for an ACK, so nothing was acknowledged: go-back-N resends
    // all three packets, and the responder ACKs the two duplicates.
    assert_eq!(st.retransmitted_pkts, 3);
    assert_eq!(sim.nodes[1].stats().get(RxeCounter::DuplicateRequest), 2);
    // 4.096 µs × 2^5 = 131 µs after the send.
    assert!(sim.now.as_micros() >= 131, "{:?}", sim.now);
    assert_eq!(read(&sim, 1, 0x8000, 2500), pattern(2500, 1));
}

#[test]
fn lost_middle_packet_gets_one_sequence_nak() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    drop_first(&mut sim, 1, Opcode::RcRdmaWriteMiddle, 1);
    fill(&mut sim, 0, 0, &pattern(8000, 5));
    sim.nodes[0]
        .post_send(
            a.qp,
            &SendWr::new(1, WrOpcode::RdmaWrite, &[sge(&a, 0, 8000)]).with_remote(MEM_BASE + 0x4000, b.mr.raw()),
        )
        .expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 1);
    assert_eq!(statuses(&wcs), [(1, WcStatus::Success)]);
    assert_eq!(read(&sim, 1, 0x4000, 8000), pattern(8000, 5));
    assert_eq!(sim.nodes[1].stats().get(RxeCounter::OutOfSeqRequest), 6, "the 6 packets after the gap");
    assert_eq!(sim.nodes[1].stats().dropped(DropReason::OutOfSequence), 5, "one NAK, then silence");
    assert_eq!(sim.nodes[0].stats().get(RxeCounter::RcvdSeqErr), 1);
    assert_eq!(sim.nodes[0].stats().timeouts, 0);
}

#[test]
fn rnr_nak_then_success() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    fill(&mut sim, 0, 0, &pattern(100, 2));
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &[sge(&a, 0, 100)])).expect("post");
    // No receive posted: the responder NAKs RNR; post one after the first NAK.
    sim.run_until(LIMIT, |s| s.nodes[0].stats().get(RxeCounter::RcvdRnrErr) >= 1);
    post_recv(&mut sim, 1, &b, 9, 0x8000, 128);
    let wcs = wait_cqes(&mut sim, 0, &a, 1);
    assert_eq!(statuses(&wcs), [(1, WcStatus::Success)]);
    assert!(sim.nodes[1].stats().get(RxeCounter::SendRnrErr) >= 1);
    assert_eq!(sim::drain_cq(&mut sim.nodes[1], b.cq)[0].wr_id, 9);
    assert_eq!(read(&sim, 1, 0x8000, 100), pattern(100, 2));
}

#[test]
fn retry_exhausted_then_flush() {
    let link = Link { retry_cnt: 3, ..Link::default() };
    let (mut sim, [a, b]) = setup(Faults::NONE, &link);
    drop_first(&mut sim, 1, Opcode::RcSendOnly, u32::MAX);
    post_recv(&mut sim, 1, &b, 1, 0x8000, 128);
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &[sge(&a, 0, 64)])).expect("post");
    sim.nodes[0].post_send(a.qp, &SendWr::new(2, WrOpcode::Send, &[sge(&a, 0, 64)])).expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 2);
    assert_eq!(statuses(&wcs), [(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]);
    let st = sim.nodes[0].stats();
    // retry_cnt 3 means three retries: four timeouts, three resends of the packets.
    assert_eq!(st.timeouts, 4);
    assert_eq!(st.get(RxeCounter::RetryExceededErr), 1);
    assert_eq!(sim.nodes[0].query_qp(a.qp).expect("qp").qp_state, rdma::rxe::qp_state::QpState::Err);
}

#[test]
fn retry_cnt_seven_means_seven() {
    let (mut sim, [a, _b]) = setup(Faults::NONE, &Link::default());
    let dropped = drop_first(&mut sim, 1, Opcode::RcRdmaWriteOnly, u32::MAX);
    sim.nodes[0]
        .post_send(a.qp, &SendWr::new(1, WrOpcode::RdmaWrite, &[sge(&a, 0, 8)]).with_remote(MEM_BASE, 0))
        .expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 1);
    assert_eq!(statuses(&wcs), [(1, WcStatus::RetryExcErr)]);
    assert_eq!(dropped.get(), 8, "the first send and seven retries");
}

#[test]
fn rnr_retry_exhausted() {
    let link = Link { rnr_retry: 2, ..Link::default() };
    let (mut sim, [a, b]) = setup(Faults::NONE, &link);
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &[sge(&a, 0, 16)])).expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 1);
    assert_eq!(statuses(&wcs), [(1, WcStatus::RnrRetryExcErr)]);
    assert_eq!(sim.nodes[0].stats().get(RxeCounter::RcvdRnrErr), 3, "first try and two retries");
    assert_eq!(sim.nodes[0].stats().get(RxeCounter::RetryRnrExceededErr), 1);
    assert_eq!(sim.nodes[1].stats().get(RxeCounter::SendRnrErr), 3);
    let _ = b;
}

#[test]
fn implied_nak_resends_the_read() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    drop_first(&mut sim, 0, Opcode::RcRdmaReadResponseOnly, 1);
    fill(&mut sim, 1, 0x4000, &pattern(200, 4));
    post_recv(&mut sim, 1, &b, 1, 0x8000, 128);
    let n = &mut sim.nodes[0];
    n.post_send(
        a.qp,
        &SendWr::new(1, WrOpcode::RdmaRead, &[sge(&a, 0x100, 200)]).with_remote(MEM_BASE + 0x4000, b.mr.raw()),
    )
    .expect("post");
    n.post_send(a.qp, &SendWr::new(2, WrOpcode::Send, &[sge(&a, 0, 16)])).expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 2);
    assert_eq!(statuses(&wcs), [(1, WcStatus::Success), (2, WcStatus::Success)]);
    let st = sim.nodes[0].stats();
    assert_eq!(st.implied_naks, 1, "the SEND's ACK showed the READ response was lost");
    assert_eq!(st.timeouts, 0, "no need to wait for the timer");
    assert_eq!(read(&sim, 0, 0x100, 200), pattern(200, 4));
    assert_eq!(sim.nodes[1].stats().get(RxeCounter::DuplicateRequest), 2, "READ replayed, SEND re-ACKed");
}

#[test]
fn read_response_completes_earlier_sends() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    drop_first(&mut sim, 0, Opcode::RcAcknowledge, 1);
    post_recv(&mut sim, 1, &b, 1, 0x8000, 128);
    let n = &mut sim.nodes[0];
    n.post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &[sge(&a, 0, 16)])).expect("post");
    n.post_send(a.qp, &SendWr::new(2, WrOpcode::RdmaRead, &[sge(&a, 0x100, 16)]).with_remote(MEM_BASE, b.mr.raw()))
        .expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 2);
    assert_eq!(statuses(&wcs), [(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert_eq!(sim.nodes[0].stats().retransmitted_pkts, 0);
    assert_eq!(sim.nodes[0].stats().timeouts, 0);
}

#[test]
fn ghost_ack_is_ignored() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    // Capture a real ACK, then replay it with a PSN never sent.
    let captured: Rc<std::cell::RefCell<Vec<u8>>> = Rc::default();
    let c = captured.clone();
    sim.wire.filter = Some(Box::new(move |to, frame| {
        if to == 0 && c.borrow().is_empty() {
            *c.borrow_mut() = frame.to_vec();
        }
        false
    }));
    post_recv(&mut sim, 1, &b, 1, 0x8000, 128);
    post_recv(&mut sim, 1, &b, 2, 0x8000, 128);
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &[sge(&a, 0, 16)])).expect("post");
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(1, WcStatus::Success)]);
    // The second SEND's ACK is lost: only a ghost could complete it.
    drop_first(&mut sim, 0, Opcode::RcAcknowledge, 1);
    sim.nodes[0].post_send(a.qp, &SendWr::new(2, WrOpcode::Send, &[sge(&a, 0, 16)])).expect("post");
    sim.step();
    let ack_bytes = captured.borrow().clone();
    let mut rx = wire_frame::parse(&ack_bytes).expect("an ACK").repr;
    let next_psn = sim.nodes[0].qp(a.qp).expect("qp").req.psn;
    rx.roce.bth.psn = next_psn.wrapping_add(5);
    let mut ghost = vec![0u8; rx.buffer_len()];
    rx.emit(&mut ghost).expect("emit");
    sim.inject(0, &ghost);
    assert!(sim::drain_cq(&mut sim.nodes[0], a.cq).is_empty(), "the ghost completed nothing");
    assert_eq!(sim.nodes[0].stats().ghost_acks, 1);
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(2, WcStatus::Success)], "the timer recovers");
    assert_eq!(sim.nodes[0].stats().timeouts, 1);
}

#[test]
fn rkey_violation_is_a_remote_access_error() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    post_recv(&mut sim, 1, &b, 1, 0x8000, 128);
    let n = &mut sim.nodes[0];
    let forged = b.mr.raw() ^ 0x01; // right index, wrong key byte
    n.post_send(a.qp, &SendWr::new(1, WrOpcode::RdmaWrite, &[sge(&a, 0, 16)]).with_remote(MEM_BASE, forged))
        .expect("post");
    n.post_send(a.qp, &SendWr::new(2, WrOpcode::Send, &[sge(&a, 0, 16)])).expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 2);
    assert_eq!(statuses(&wcs), [(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]);
    use rdma::rxe::qp_state::QpState;
    assert_eq!(sim.nodes[0].query_qp(a.qp).expect("qp").qp_state, QpState::Err);
    assert_eq!(sim.nodes[1].query_qp(b.qp).expect("qp").qp_state, QpState::Err, "class C error: responder errs too");
    let flushed = sim::drain_cq(&mut sim.nodes[1], b.cq);
    assert_eq!(statuses(&flushed), [(1, WcStatus::WrFlushErr)]);
    assert_eq!(sim.nodes[1].poll_event(), Some(rdma::rxe::event::AsyncEvent::QpAccessErr { qpn: b.qpn }));
}

#[test]
fn out_of_bounds_and_wrong_rights_are_refused() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    // An MR on node 1 without remote write, and reads past the end of the real one.
    let pd = b.pd;
    let ro = sim.nodes[1].reg_mr(pd, MEM_BASE, MEM_BASE, 4096, rdma::rxe::mr::AccessFlags::REMOTE_READ).expect("mr");
    sim.nodes[0]
        .post_send(a.qp, &SendWr::new(1, WrOpcode::RdmaWrite, &[sge(&a, 0, 16)]).with_remote(MEM_BASE, ro.raw()))
        .expect("post");
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(1, WcStatus::RemAccessErr)]);

    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    sim.nodes[0]
        .post_send(
            a.qp,
            &SendWr::new(1, WrOpcode::RdmaRead, &[sge(&a, 0, 16)]).with_remote(MEM_BASE + MEM as u64 - 8, b.mr.raw()),
        )
        .expect("post");
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(1, WcStatus::RemAccessErr)]);
}

#[test]
fn psn_wraps_at_2_pow_24() {
    let link = Link { sq_psn: [0xFF_FFFD, 0xFF_FFFE], ..Link::default() };
    let (mut sim, [a, b]) = setup(Faults::NONE, &link);
    let data = pattern(6000, 8);
    fill(&mut sim, 0, 0, &data);
    for i in 0..3 {
        post_recv(&mut sim, 1, &b, i, 0x8000 + i * 0x2000, 8192);
        sim.nodes[0].post_send(a.qp, &SendWr::new(i, WrOpcode::Send, &[sge(&a, 0, 6000)])).expect("post");
    }
    fill(&mut sim, 1, 0x40000, &data);
    sim.nodes[0]
        .post_send(
            a.qp,
            &SendWr::new(3, WrOpcode::RdmaRead, &[sge(&a, 0x40000, 6000)]).with_remote(MEM_BASE + 0x40000, b.mr.raw()),
        )
        .expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 4);
    assert_eq!(statuses(&wcs), [0, 1, 2, 3].map(|i| (i, WcStatus::Success)));
    for i in 0..3 {
        assert_eq!(read(&sim, 1, 0x8000 + i * 0x2000, 6000), data);
    }
    assert_eq!(read(&sim, 0, 0x40000, 6000), data);
    // 3 messages × 6 packets + a 6-packet READ from 0xFFFFFD: the PSN went round.
    assert_eq!(sim.nodes[0].qp(a.qp).expect("qp").req.psn, Psn::new(0xFF_FFFD).wrapping_add(24));
    assert_eq!(sim.nodes[0].qp(a.qp).expect("qp").req.psn.value(), 21);
}

#[test]
fn duplicate_read_is_replayed() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    drop_first(&mut sim, 0, Opcode::RcRdmaReadResponseLast, 1);
    fill(&mut sim, 1, 0x4000, &pattern(3000, 6));
    sim.nodes[0]
        .post_send(
            a.qp,
            &SendWr::new(1, WrOpcode::RdmaRead, &[sge(&a, 0x100, 3000)]).with_remote(MEM_BASE + 0x4000, b.mr.raw()),
        )
        .expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 1);
    assert_eq!(statuses(&wcs), [(1, WcStatus::Success)]);
    assert_eq!(read(&sim, 0, 0x100, 3000), pattern(3000, 6));
    assert_eq!(sim.nodes[1].stats().get(RxeCounter::DuplicateRequest), 1);
    assert_eq!(sim.nodes[0].stats().timeouts, 1);
    // The retry asked for the last packet only: a READ REQUEST for the tail.
    assert_eq!(sim.nodes[0].stats().retransmitted_pkts, 1);
}

#[test]
fn duplicate_atomic_returns_the_first_result() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    drop_first(&mut sim, 0, Opcode::RcAtomicAcknowledge, 1);
    fill(&mut sim, 1, 0x100, &100u64.to_ne_bytes());
    sim.nodes[0]
        .post_send(
            a.qp,
            &SendWr::new(1, WrOpcode::AtomicFetchAdd, &[sge(&a, 0x200, 8)])
                .with_remote(MEM_BASE + 0x100, b.mr.raw())
                .with_atomic(5, 0),
        )
        .expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 1);
    assert_eq!(statuses(&wcs), [(1, WcStatus::Success)]);
    assert_eq!(read(&sim, 0, 0x200, 8), 100u64.to_ne_bytes(), "the first result");
    assert_eq!(read(&sim, 1, 0x100, 8), 105u64.to_ne_bytes(), "executed once");
    assert_eq!(sim.nodes[1].stats().get(RxeCounter::DuplicateRequest), 1);
}

#[test]
fn misaligned_atomic_is_an_invalid_request() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    sim.nodes[0]
        .post_send(
            a.qp,
            &SendWr::new(1, WrOpcode::AtomicFetchAdd, &[sge(&a, 0x200, 8)])
                .with_remote(MEM_BASE + 0x104, b.mr.raw())
                .with_atomic(5, 0),
        )
        .expect("post");
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(1, WcStatus::RemInvReqErr)]);
}

fn ud_setup(qkey_b: u32) -> (Sim, [End; 2], rdma::rxe::ah::AhHandle) {
    let link = Link { qp_type: rdma::rxe::qp_state::QpType::Ud, ..Link::default() };
    let (mut sim, ends) = setup(Faults::NONE, &link);
    if qkey_b != link.qkey {
        let attr = rdma::rxe::qp::QpAttr { qkey: qkey_b, ..Default::default() };
        sim.nodes[1].modify_qp(ends[1].qp, &attr, rdma::rxe::qp_state::AttrMask::QKEY).expect("qkey");
    }
    let ah_attr = rdma::rxe::ah::AhAttr {
        dgid: sim::node_gid(1),
        sgid_index: 0,
        hop_limit: 64,
        dmac: sim::node_mac(1),
        ..Default::default()
    };
    let ah = sim.nodes[0].create_ah(ends[0].pd, &ah_attr).expect("ah");
    (sim, ends, ah)
}

#[test]
fn ud_send_puts_the_grh_first() {
    let (mut sim, [a, b], ah) = ud_setup(0x1111_1111);
    fill(&mut sim, 0, 0, &pattern(64, 3));
    post_recv(&mut sim, 1, &b, 5, 0x8000, 40 + 64);
    let ud = UdDest { ah, remote_qpn: b.qpn, remote_qkey: 0x1111_1111 };
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &[sge(&a, 0, 64)]).with_ud(ud)).expect("post");
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(1, WcStatus::Success)]);
    sim.run_idle(LIMIT);
    let wc = sim::drain_cq(&mut sim.nodes[1], b.cq);
    assert_eq!(wc.len(), 1);
    assert_eq!((wc[0].byte_len, wc[0].src_qp), (104, a.qpn));
    assert!(wc[0].wc_flags.has(rdma::rxe::wc::WcFlags::GRH));
    let grh = read(&sim, 1, 0x8000, 40);
    assert_eq!(&grh[..20], &[0; 20]);
    assert_eq!(grh[20], 0x45, "an IPv4 header in the second half");
    assert_eq!(&grh[32..40], &[10, 0, 0, 1, 10, 0, 0, 2]);
    assert_eq!(read(&sim, 1, 0x8000 + 40, 64), pattern(64, 3));
}

#[test]
fn ud_with_wrong_qkey_is_dropped_and_counted() {
    let (mut sim, [a, b], ah) = ud_setup(0x2222_2222);
    post_recv(&mut sim, 1, &b, 5, 0x8000, 256);
    let ud = UdDest { ah, remote_qpn: b.qpn, remote_qkey: 0x1111_1111 };
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &[sge(&a, 0, 64)]).with_ud(ud)).expect("post");
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(1, WcStatus::Success)], "UD completes when sent");
    sim.run_idle(LIMIT);
    assert!(sim::drain_cq(&mut sim.nodes[1], b.cq).is_empty());
    assert_eq!(sim.nodes[1].stats().dropped(DropReason::BadQkey), 1);
    // Too long for the MTU: refused locally.
    sim.nodes[0].post_send(a.qp, &SendWr::new(2, WrOpcode::Send, &[sge(&a, 0, 2000)]).with_ud(ud)).expect("post");
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(2, WcStatus::LocLenErr)]);
}

#[test]
fn qp_in_error_flushes() {
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    post_recv(&mut sim, 1, &b, 11, 0x8000, 128);
    post_recv(&mut sim, 1, &b, 12, 0x8000, 128);
    let attr = rdma::rxe::qp::QpAttr { qp_state: rdma::rxe::qp_state::QpState::Err, ..Default::default() };
    sim.nodes[1].modify_qp(b.qp, &attr, rdma::rxe::qp_state::AttrMask::STATE).expect("to ERR");
    let wcs = sim::drain_cq(&mut sim.nodes[1], b.cq);
    assert_eq!(statuses(&wcs), [(11, WcStatus::WrFlushErr), (12, WcStatus::WrFlushErr)]);
    post_recv(&mut sim, 1, &b, 13, 0x8000, 128);
    sim.nodes[1].post_send(b.qp, &SendWr::new(14, WrOpcode::Send, &[])).expect("post in ERR");
    let wcs = sim::drain_cq(&mut sim.nodes[1], b.cq);
    assert_eq!(statuses(&wcs), [(13, WcStatus::WrFlushErr), (14, WcStatus::WrFlushErr)]);
    // Node 0's sends go unanswered: retries run out.
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &[])).expect("post");
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(1, WcStatus::RetryExcErr)]);
    assert!(sim.nodes[1].stats().dropped(DropReason::QpState) >= 1);
}

#[test]
fn uc_drops_the_rest_of_a_message_after_a_gap() {
    let link = Link { qp_type: rdma::rxe::qp_state::QpType::Uc, ..Link::default() };
    let (mut sim, [a, b]) = setup(Faults::NONE, &link);
    drop_first(&mut sim, 1, Opcode::UcSendFirst, 1);
    post_recv(&mut sim, 1, &b, 1, 0x8000, 4096);
    fill(&mut sim, 0, 0, &pattern(3000, 1));
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &[sge(&a, 0, 3000)])).expect("post");
    sim.nodes[0].post_send(a.qp, &SendWr::new(2, WrOpcode::Send, &[sge(&a, 0, 100)])).expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 2);
    assert_eq!(statuses(&wcs), [(1, WcStatus::Success), (2, WcStatus::Success)], "UC completes once sent");
    sim.run_idle(LIMIT);
    let got = sim::drain_cq(&mut sim.nodes[1], b.cq);
    assert_eq!(got.len(), 1, "only the second message arrived");
    assert_eq!((got[0].wr_id, got[0].byte_len), (1, 100), "into the WQE the broken message left");
    assert_eq!(
        sim.nodes[1].stats().dropped(DropReason::BadOpSequence) + sim.nodes[1].stats().dropped(DropReason::UcGap),
        2
    );
}

#[test]
fn read_resumes_after_a_lost_middle_response() {
    let link = Link { mtu: rdma::core::port::IbMtu::Mtu256, ..Link::default() };
    let (mut sim, [a, b]) = setup(Faults::NONE, &link);
    // Lose the third response packet: the requester asks again for the rest.
    let seen = Rc::new(Cell::new(0u32));
    let s2 = seen.clone();
    sim.wire.filter = Some(Box::new(move |to, frame| {
        let mid = to == 0
            && wire_frame::parse(frame).is_ok_and(|rx| rx.repr.roce.bth.opcode == Opcode::RcRdmaReadResponseMiddle);
        if mid {
            s2.set(s2.get() + 1);
            return s2.get() == 2;
        }
        false
    }));
    fill(&mut sim, 1, 0x4000, &pattern(4097, 6));
    sim.nodes[0]
        .post_send(
            a.qp,
            &SendWr::new(1, WrOpcode::RdmaRead, &[sge(&a, 0x100, 4097)]).with_remote(MEM_BASE + 0x4000, b.mr.raw()),
        )
        .expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 1);
    assert_eq!(statuses(&wcs), [(1, WcStatus::Success)]);
    assert_eq!(read(&sim, 0, 0x100, 4097), pattern(4097, 6));
    assert_eq!(sim.nodes[0].stats().timeouts, 0, "the implied NAK resends at once");
    assert_eq!(sim.nodes[0].stats().implied_naks, 1);
}

/// An ACK the NIC had no room for is sent at the next poll, not left for the
/// requester's retransmit timer.
#[test]
fn an_ack_refused_by_a_full_nic_is_sent_at_the_next_poll() {
    use rdma::rxe::sink::VecSink;
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    fill(&mut sim, 0, 0, &[7; 64]);
    post_recv(&mut sim, 1, &b, 100, 0x8000, 64);
    let s = [sge(&a, 0, 64)];
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &s)).expect("post");
    let now = Instant::from_micros(0);
    let mut out = VecSink::default();
    sim.nodes[0].poll(now, &mut out);
    assert_eq!(out.frames.len(), 1, "the SEND ONLY");
    // B takes the SEND while its NIC is full: the ACK cannot leave.
    let mut full = VecSink { full: true, ..VecSink::default() };
    sim.nodes[1].receive(&out.frames[0], now, &mut full);
    assert!(full.frames.is_empty());
    assert_eq!(sim.nodes[1].next_deadline(now), Some(now), "an owed ACK is work to do now");
    // The next poll with room sends it, and A completes without a retransmission.
    let mut room = VecSink::default();
    sim.nodes[1].poll(now, &mut room);
    assert_eq!(room.frames.len(), 1);
    let ack = wire_frame::parse(&room.frames[0]).expect("a valid frame");
    assert_eq!(ack.repr.roce.bth.opcode, Opcode::RcAcknowledge);
    let mut none = VecSink::default();
    sim.nodes[0].receive(&room.frames[0], now, &mut none);
    let done = sim::drain_cq(&mut sim.nodes[0], a.cq);
    assert_eq!(done.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), [(1, WcStatus::Success)]);
    assert_eq!(sim.nodes[0].stats().retransmitted_pkts, 0);
}

/// A window smaller than `max_pkt_per_ack` (as after a loss) still gets ACKs:
/// the packet that fills it asks for one, so a long message never waits out
/// the retransmit timer on a clean wire.
#[test]
fn a_small_window_asks_for_acks_and_never_times_out() {
    let config = rdma::rxe::device::Config { max_window: 8, min_window: 4, ..Default::default() };
    let mut sim = Sim::new(3, Faults::NONE, MEM, config);
    let link = Link { mtu: rdma::core::port::IbMtu::Mtu1024, ..Link::default() };
    let [a, b] = sim::connect(&mut sim, &link).expect("connect");
    let data = pattern(64 * 1024, 3);
    fill(&mut sim, 0, 0, &data);
    let s = [sge(&a, 0, data.len() as u32)];
    let wr = SendWr::new(1, WrOpcode::RdmaWrite, &s).with_remote(MEM_BASE + 0x10000, b.mr.raw());
    sim.nodes[0].post_send(a.qp, &wr).expect("post");
    let done = wait_cqes(&mut sim, 0, &a, 1);
    assert_eq!(done[0].status, WcStatus::Success);
    assert_eq!(read(&sim, 1, 0x10000, data.len()), data);
    assert_eq!(sim.nodes[0].stats().retransmitted_pkts, 0, "no timeout, no go-back");
    assert!(sim.now.as_micros() < 60_000, "finished long before a 67 ms retransmit timeout: {:?}", sim.now);
}

/// The window is capped in bytes as well as in packets: at MTU 4096 a QP
/// keeps at most `max_inflight_bytes` (256 KiB: 64 packets) unacknowledged
/// rather than 128 packets (512 KiB), and asks for an ACK every half window,
/// so the second half is on the wire while the first is being acknowledged.
#[test]
fn the_window_is_capped_in_bytes_and_asks_for_acks_every_half_window() {
    use rdma::rxe::sink::VecSink;
    let link = Link { mtu: rdma::core::port::IbMtu::Mtu4096, ..Link::default() };
    let (mut sim, [a, b]) = setup(Faults::NONE, &link);
    let len = 384 * 1024;
    let data = pattern(len, 9);
    fill(&mut sim, 0, 0, &data);
    let s = [sge(&a, 0, len as u32)];
    let wr = SendWr::new(1, WrOpcode::RdmaWrite, &s).with_remote(MEM_BASE + 0x60000, b.mr.raw());
    sim.nodes[0].post_send(a.qp, &wr).expect("post");
    let now = Instant::from_micros(0);
    let mut out = VecSink::default();
    sim.nodes[0].poll(now, &mut out);
    assert_eq!(out.frames.len(), 64, "256 KiB of 4 KiB packets, then the window is full");
    let asks: Vec<usize> = out
        .frames
        .iter()
        .enumerate()
        .filter(|(_, f)| wire_frame::parse(f).expect("a valid frame").repr.roce.bth.ack_req)
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(asks, [32, 64], "every half window");
    // The first half's ACK opens the window by the half it acknowledges.
    let mut acks = VecSink::default();
    for f in &out.frames[..32] {
        sim.nodes[1].receive(f, now, &mut acks);
    }
    assert_eq!(acks.frames.len(), 1);
    let mut more = VecSink::default();
    sim.nodes[0].receive(&acks.frames[0], now, &mut more);
    assert_eq!(more.frames.len(), 32);
}

/// Without the byte cap the window is `max_window` packets, as before.
#[test]
fn without_a_byte_cap_the_window_is_max_window_packets() {
    use rdma::rxe::sink::VecSink;
    let config = rdma::rxe::device::Config { max_inflight_bytes: 0, ..Default::default() };
    let mut sim = Sim::new(1, Faults::NONE, MEM, config);
    let link = Link { mtu: rdma::core::port::IbMtu::Mtu1024, ..Link::default() };
    let [a, b] = sim::connect(&mut sim, &link).expect("connect");
    let s = [sge(&a, 0, 256 * 1024)];
    let wr = SendWr::new(1, WrOpcode::RdmaWrite, &s).with_remote(MEM_BASE + 0x40000, b.mr.raw());
    sim.nodes[0].post_send(a.qp, &wr).expect("post");
    let mut out = VecSink::default();
    sim.nodes[0].poll(Instant::from_micros(0), &mut out);
    assert_eq!(out.frames.len(), 128);
}

/// A long WRITE through the capped window arrives whole, with no timeout.
#[test]
fn a_long_write_through_the_byte_capped_window_arrives_whole() {
    let link = Link { mtu: rdma::core::port::IbMtu::Mtu4096, ..Link::default() };
    let (mut sim, [a, b]) = setup(Faults::NONE, &link);
    let data = pattern(512 * 1024, 4);
    fill(&mut sim, 0, 0, &data);
    let s = [sge(&a, 0, data.len() as u32)];
    let wr = SendWr::new(1, WrOpcode::RdmaWrite, &s).with_remote(MEM_BASE + 0x80000, b.mr.raw());
    sim.nodes[0].post_send(a.qp, &wr).expect("post");
    let done = wait_cqes(&mut sim, 0, &a, 1);
    assert_eq!(done[0].status, WcStatus::Success);
    assert_eq!(read(&sim, 1, 0x80000, data.len()), data);
    assert_eq!(sim.nodes[0].stats().retransmitted_pkts, 0);
    assert_eq!(sim.nodes[0].stats().timeouts, 0);
}

/// With ACKs coalesced, a burst of single-packet WRITEs (each asking for an
/// ACK) gets one ACK per four frames received and one when the batch ends, each
/// for the last PSN so far, and the requester completes them all from those.
#[test]
fn coalesced_acks_answer_a_burst_with_few_acks() {
    use rdma::rxe::sink::VecSink;
    let config = rdma::rxe::device::Config { coalesce_acks: true, ..Default::default() };
    let mut sim = Sim::new(1, Faults::NONE, MEM, config);
    let [a, b] = sim::connect(&mut sim, &Link::default()).expect("connect");
    fill(&mut sim, 0, 0, &pattern(10 * 64, 5));
    for i in 0..10u64 {
        let s = [sge(&a, i * 64, 64)];
        let wr = SendWr::new(i, WrOpcode::RdmaWrite, &s)
            .with_remote(MEM_BASE + 0x10000 + i * 64, b.mr.raw())
            .with_flags(rdma::rxe::wr::SendFlags::SIGNALED);
        sim.nodes[0].post_send(a.qp, &wr).expect("post");
    }
    let now = Instant::from_micros(0);
    let mut out = VecSink::default();
    sim.nodes[0].poll(now, &mut out);
    assert_eq!(out.frames.len(), 10);
    let psn = |f: &[u8]| wire_frame::parse(f).expect("a valid frame").repr.roce.bth.psn;
    let mut acks = VecSink::default();
    for f in &out.frames[..3] {
        sim.nodes[1].receive(f, now, &mut acks);
    }
    assert!(acks.frames.is_empty(), "the ACKs are held back");
    assert_eq!(sim.nodes[1].next_deadline(now), Some(now), "an owed ACK is work to do now");
    for f in &out.frames[3..] {
        sim.nodes[1].receive(f, now, &mut acks);
    }
    assert_eq!(acks.frames.iter().map(|f| psn(f)).collect::<Vec<_>>(), [psn(&out.frames[3]), psn(&out.frames[7])]);
    sim.nodes[1].end_batch(&mut acks);
    assert_eq!(acks.frames.len(), 3);
    assert_eq!(psn(&acks.frames[2]), psn(&out.frames[9]));
    let mut none = VecSink::default();
    for ack in &acks.frames {
        sim.nodes[0].receive(ack, now, &mut none);
    }
    let done = sim::drain_cq(&mut sim.nodes[0], a.cq);
    assert_eq!(
        done.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        (0..10).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>()
    );
    assert_eq!(read(&sim, 1, 0x10000, 10 * 64), pattern(10 * 64, 5));
    let mut nothing = VecSink::default();
    sim.nodes[1].end_batch(&mut nothing);
    assert!(nothing.frames.is_empty(), "nothing more owed");
}

/// Unsignaled single-packet WRITEs with more queued behind them ask for no
/// ACK: the signaled one, the last of the burst and the one a READ waits
/// behind do, and those ACKs retire every WRITE (9.7.5.1.1), with one
/// completion each for what was signaled (WRITE 4 and the READ, signaled by
/// `SendWr::new`'s default).
#[test]
fn only_signaled_messages_and_the_ends_of_bursts_ask_for_acks() {
    use rdma::rxe::sink::VecSink;
    use rdma::rxe::wr::SendFlags;
    let mut sim = Sim::new(1, Faults::NONE, MEM, rdma::rxe::device::Config::default());
    let [a, b] = sim::connect(&mut sim, &Link::default()).expect("connect");
    fill(&mut sim, 0, 0, &pattern(12 * 64, 6));
    let post = |sim: &mut Sim, i: u64, op: WrOpcode, flags: u32| {
        let s = [sge(&a, i * 64, 64)];
        let wr = SendWr::new(i, op, &s).with_remote(MEM_BASE + 0x10000 + i * 64, b.mr.raw()).with_flags(flags);
        sim.nodes[0].post_send(a.qp, &wr).expect("post");
    };
    // Unsignaled WRITEs 0-9 but 4; a READ of WRITE 0's bytes into 10; WRITE 11.
    for i in 0..10 {
        post(&mut sim, i, WrOpcode::RdmaWrite, if i == 4 { SendFlags::SIGNALED } else { 0 });
    }
    let s = [sge(&a, 10 * 64, 64)];
    let wr = SendWr::new(10, WrOpcode::RdmaRead, &s).with_remote(MEM_BASE + 0x10000, b.mr.raw());
    sim.nodes[0].post_send(a.qp, &wr).expect("post");
    post(&mut sim, 11, WrOpcode::RdmaWrite, 0);
    let now = sim.now;
    let mut out = VecSink::default();
    sim.nodes[0].poll(now, &mut out);
    assert_eq!(out.frames.len(), 12);
    let asks: Vec<usize> = out
        .frames
        .iter()
        .enumerate()
        .filter(|(_, f)| wire_frame::parse(f).expect("a valid frame").repr.roce.bth.ack_req)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(asks, [4, 9, 10, 11], "the signaled WRITE, the one before the READ, the READ, the last");
    let mut answers = VecSink::default();
    for f in &out.frames {
        sim.nodes[1].receive(f, now, &mut answers);
    }
    sim.nodes[1].end_batch(&mut answers);
    let mut none = VecSink::default();
    for f in &answers.frames {
        sim.nodes[0].receive(f, now, &mut none);
    }
    let done = sim::drain_cq(&mut sim.nodes[0], a.cq);
    let signaled = [(4, WcStatus::Success), (10, WcStatus::Success)];
    assert_eq!(done.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), signaled, "WRITE 4 and the READ");
    assert_eq!(read(&sim, 1, 0x10000, 10 * 64), pattern(12 * 64, 6)[..10 * 64]);
    assert_eq!(read(&sim, 0, 10 * 64, 64), pattern(12 * 64, 6)[..64], "the READ brought WRITE 0's bytes back");
    // Nothing was left waiting for an ACK: no retransmit timer fires.
    assert!(sim.run_idle(sim.now + rdma::rxe::time::Duration::from_secs(1)), "both nodes go idle");
    assert_eq!((sim.nodes[0].stats().timeouts, sim.nodes[0].stats().retransmitted_pkts), (0, 0));
}

/// What the transport sends while taking a frame leaves at once: the sink is
/// flushed (the NIC kicked) right after, and not when nothing went out. With
/// ACKs coalesced (the default), the ACK and the flush come at the batch's end.
#[test]
fn a_frame_that_causes_an_ack_flushes_the_sink() {
    use rdma::rxe::sink::{FrameSink, VecSink};
    #[derive(Default)]
    struct Flushes(VecSink, usize);
    impl FrameSink for Flushes {
        fn transmit(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
            self.0.transmit(len, fill)
        }
        fn flush(&mut self) {
            self.1 += 1;
        }
    }
    for coalesce_acks in [false, true] {
        let config = rdma::rxe::device::Config { coalesce_acks, ..Default::default() };
        let mut sim = Sim::new(1, Faults::NONE, MEM, config);
        let [a, b] = sim::connect(&mut sim, &Link::default()).expect("connect");
        let s = [sge(&a, 0, 64)];
        let wr = SendWr::new(1, WrOpcode::RdmaWrite, &s)
            .with_remote(MEM_BASE + 0x10000, b.mr.raw())
            .with_flags(rdma::rxe::wr::SendFlags::SIGNALED);
        sim.nodes[0].post_send(a.qp, &wr).expect("post");
        let now = Instant::from_micros(0);
        let mut out = VecSink::default();
        sim.nodes[0].poll(now, &mut out);
        let mut sink = Flushes::default();
        sim.nodes[1].receive(&out.frames[0], now, &mut sink);
        let at_once = if coalesce_acks { (0, 0) } else { (1, 1) };
        assert_eq!((sink.0.frames.len(), sink.1), at_once, "coalesced: {coalesce_acks}");
        sim.nodes[1].end_batch(&mut sink);
        assert_eq!((sink.0.frames.len(), sink.1), (1, 1), "one ACK, one flush by the batch's end");
        let mut quiet = Flushes::default();
        sim.nodes[1].receive(&out.frames[0][..20], now, &mut quiet);
        sim.nodes[1].end_batch(&mut quiet);
        assert_eq!(quiet.1, 0, "a dropped frame sends nothing and flushes nothing");
    }
}

/// C9-88: a zero-length RDMA WRITE or READ need not carry a valid rkey or address,
/// and the responder must not check them (Linux rxe skips the check too). A Linux
/// peer sends such WRITEs with rkey 0; refusing them would take both QPs to ERR.
#[test]
fn zero_length_write_and_read_skip_the_rkey_check() {
    use rdma::rxe::qp_state::QpState;
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    let n = &mut sim.nodes[0];
    n.post_send(a.qp, &SendWr::new(1, WrOpcode::RdmaWrite, &[]).with_remote(0, 0)).expect("post");
    n.post_send(a.qp, &SendWr::new(2, WrOpcode::RdmaRead, &[]).with_remote(0, 0)).expect("post");
    // Same rkey, nonzero length: still refused.
    n.post_send(a.qp, &SendWr::new(3, WrOpcode::RdmaWrite, &[sge(&a, 0, 16)]).with_remote(0, 0)).expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 3);
    assert_eq!(statuses(&wcs), [(1, WcStatus::Success), (2, WcStatus::Success), (3, WcStatus::RemAccessErr)]);
    assert_eq!((wcs[0].opcode, wcs[0].byte_len), (WcOpcode::RdmaWrite, 0));
    assert_eq!((wcs[1].opcode, wcs[1].byte_len), (WcOpcode::RdmaRead, 0));
    assert_eq!(sim.nodes[1].stats().get(RxeCounter::DuplicateRequest), 0);
    assert_eq!(sim.nodes[0].stats().timeouts, 0, "both answered at once, not after retries");
    assert_eq!(sim.nodes[1].query_qp(b.qp).expect("qp").qp_state, QpState::Err, "the bad WRITE");
    assert_eq!(sim.nodes[1].poll_event(), Some(rdma::rxe::event::AsyncEvent::QpAccessErr { qpn: b.qpn }));
}

/// The zero-length WRITE alone leaves the responder's QP live.
#[test]
fn zero_length_write_with_rkey_0_leaves_the_qp_live() {
    use rdma::rxe::qp_state::QpState;
    let (mut sim, [a, b]) = setup(Faults::NONE, &Link::default());
    post_recv(&mut sim, 1, &b, 7, 0x8000, 128);
    let n = &mut sim.nodes[0];
    n.post_send(a.qp, &SendWr::new(1, WrOpcode::RdmaWrite, &[]).with_remote(0, 0)).expect("post");
    n.post_send(a.qp, &SendWr::new(2, WrOpcode::RdmaRead, &[]).with_remote(0x1234, 0)).expect("post");
    n.post_send(a.qp, &SendWr::new(3, WrOpcode::Send, &[sge(&a, 0, 16)])).expect("post");
    let wcs = wait_cqes(&mut sim, 0, &a, 3);
    assert_eq!(statuses(&wcs), [1, 2, 3].map(|i| (i, WcStatus::Success)));
    assert_eq!(sim.nodes[1].query_qp(b.qp).expect("qp").qp_state, QpState::Rts);
    assert_eq!(statuses(&sim::drain_cq(&mut sim.nodes[1], b.cq)), [(7, WcStatus::Success)]);
    assert_eq!(sim.nodes[1].poll_event(), None);
}

/// A QP made right after one was destroyed gets a new number (Linux's
/// cyclic allocation), so a peer's CM holding the old connection in
/// timewait does not take its REQ for a stale one; frames to the old
/// number find no QP.
#[test]
fn a_reused_qp_slot_gets_a_new_qpn() {
    use rdma::rxe::qp::{QpCap, QpInitAttr};
    use rdma::rxe::qp_state::QpType;
    let mut sim = Sim::new(1, Faults::default(), 4096, rdma::rxe::device::Config::default());
    let t = &mut sim.nodes[0];
    let pd = t.alloc_pd().expect("pd");
    let cq = t.create_cq(16).expect("cq");
    let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let init = QpInitAttr { qp_type: QpType::Rc, pd, send_cq: cq, recv_cq: cq, srq: None, cap, sq_sig_all: false };
    let first = t.create_qp(&init).expect("qp");
    let old = t.qpn(first).expect("qpn");
    t.destroy_qp(first).expect("destroy");
    let second = t.create_qp(&init).expect("qp");
    let new = t.qpn(second).expect("qpn");
    assert_ne!(old, new);
    assert_eq!(new & 0x3FFF, old & 0x3FFF, "the same slot");
    assert!(new < 1 << 24);
}

/// A UD QP's messages are bounded by its port's active MTU, as it is when
/// they are sent (rxe's `get_mtu` for datagram QPs): after the port goes to
/// MTU 4096, a QP made before carries 4096-byte messages, and 4097 bytes
/// are refused locally. (A UD QP kept the 1024 it was made with, so
/// `ibv_ud_pingpong -s 2048` on a 9000-byte link failed with LocLenErr.)
#[test]
fn ud_messages_follow_the_port_mtu() {
    let (mut sim, [a, b], ah) = ud_setup(0x1111_1111);
    for n in &mut sim.nodes {
        n.set_port_mtu(rdma::core::port::IbMtu::Mtu4096);
    }
    fill(&mut sim, 0, 0, &pattern(4096, 9));
    post_recv(&mut sim, 1, &b, 5, 0x8000, 40 + 4096);
    let ud = UdDest { ah, remote_qpn: b.qpn, remote_qkey: 0x1111_1111 };
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &[sge(&a, 0, 4096)]).with_ud(ud)).expect("post");
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(1, WcStatus::Success)]);
    sim.run_idle(LIMIT);
    let wc = sim::drain_cq(&mut sim.nodes[1], b.cq);
    assert_eq!(wc.iter().map(|w| (w.status, w.byte_len)).collect::<Vec<_>>(), [(WcStatus::Success, 40 + 4096)]);
    assert_eq!(read(&sim, 1, 0x8000 + 40, 4096), pattern(4096, 9));
    sim.nodes[0].post_send(a.qp, &SendWr::new(2, WrOpcode::Send, &[sge(&a, 0, 4097)]).with_ud(ud)).expect("post");
    assert_eq!(statuses(&wait_cqes(&mut sim, 0, &a, 1)), [(2, WcStatus::LocLenErr)]);
}

/// A path that takes 32 frames per round trip and drops the rest (a shallow
/// queue in front of a receiver, as a socket buffer under QEMU is). With no
/// byte cap the window starts at 128 packets and overruns it; the losses of
/// one overrun (several NAKs) cut it once, and after a cut it grows by about
/// a packet per round trip, so the next overrun comes many round trips later
/// rather than within a few ACKs. Everything arrives; the only timeout is the
/// first overrun's, which loses every packet that asked for an ACK.
#[test]
fn after_a_loss_the_window_settles_near_what_the_path_holds() {
    use rdma::rxe::sink::VecSink;
    const PATH: usize = 32;
    let config = rdma::rxe::device::Config { max_inflight_bytes: 0, ..Default::default() };
    let mut sim = Sim::new(1, Faults::NONE, MEM, config);
    let link = Link { mtu: rdma::core::port::IbMtu::Mtu1024, ..Link::default() };
    let [a, b] = sim::connect(&mut sim, &link).expect("connect");
    let len = 256 * 1024;
    let data = pattern(len, 7);
    fill(&mut sim, 0, 0, &data);
    let messages = 16u64;
    for i in 0..messages {
        let s = [sge(&a, 0, len as u32)];
        let wr = SendWr::new(i, WrOpcode::RdmaWrite, &s)
            .with_remote(MEM_BASE + 0x40000, b.mr.raw())
            .with_flags(rdma::rxe::wr::SendFlags::SIGNALED);
        sim.nodes[0].post_send(a.qp, &wr).expect("post");
    }
    let mut done = Vec::new();
    let mut now = Instant::from_micros(0);
    // What the requester sent since the last round trip: the path takes the
    // first PATH of it.
    let mut sent = VecSink::default();
    let mut cuts_at = Vec::new();
    for round in 0..10_000 {
        now = now + rdma::rxe::time::Duration::from_micros(100);
        sim.nodes[0].poll(now, &mut sent);
        let mut answers = VecSink::default();
        for f in std::mem::take(&mut sent.frames).iter().take(PATH) {
            sim.nodes[1].receive(f, now, &mut answers);
        }
        sim.nodes[1].poll(now, &mut answers);
        for f in &answers.frames {
            sim.nodes[0].receive(f, now, &mut sent);
        }
        if sim.nodes[0].stats().window_cuts > cuts_at.len() as u64 {
            cuts_at.push(round);
        }
        done.extend(sim::drain_cq(&mut sim.nodes[0], a.cq));
        if done.len() as u64 == messages {
            break;
        }
    }
    assert_eq!(done.len() as u64, messages, "every WRITE completes");
    assert!(done.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(read(&sim, 1, 0x40000, len), data);
    let s = sim.nodes[0].stats();
    let packets = messages * (len as u64 / 1024);
    assert!(s.timeouts <= 1, "{} timeouts", s.timeouts);
    assert!(s.retransmitted_pkts * 5 < packets, "{} of {packets} packets sent again", s.retransmitted_pkts);
    // From 128 down to the path's size takes a few cuts; after that the
    // window climbs from half the path back to it (16 to 32) a packet per
    // round trip: ~16 round trips between overruns. (Growing a packet per
    // ACK, two ACKs a round trip, overran it every 8-10.)
    let settled: Vec<u32> = cuts_at.windows(2).skip(3).map(|w| w[1] - w[0]).collect();
    assert!(!settled.is_empty(), "the window overran the path again after settling: cuts at rounds {cuts_at:?}");
    assert!(settled.iter().all(|&gap| gap >= 12), "cuts at rounds {cuts_at:?}");
}
