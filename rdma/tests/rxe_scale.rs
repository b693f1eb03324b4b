//! Scale on one transport pair: 1000 RC QP pairs, a SEND and a WRITE on every
//! one of them at once over the simulated wire, every message's data checked
//! at its own destination, every completion exactly once. (The per-frame cost
//! at 1, 100 and 1000 QPs is in `cargo bench -p rdma --bench transport`.)

use rdma::rxe::memory::Memory;
use rdma::rxe::qp::QpCap;
use rdma::rxe::sim::{self, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Instant;
use rdma::rxe::wc::{WcOpcode, WcStatus};
use rdma::rxe::wr::{RecvWr, SendWr, Sge, WrOpcode};

const QPS: usize = 1000;
const LEN: u32 = 200;
/// Per QP pair: a SEND's receive buffer and a WRITE's target, in node 1's memory.
const SLOT: u64 = 512;

fn pattern(qp: usize, what: u8) -> Vec<u8> {
    (0..LEN as usize).map(|i| (i ^ qp.wrapping_mul(7)) as u8 ^ what).collect()
}

#[test]
fn a_thousand_rc_qps_carry_traffic_at_once() {
    let mem = QPS * SLOT as usize * 2 + 4096;
    // Some loss, so the retransmission timers of many QPs run at once too.
    let faults = Faults { drop: 100, duplicate: 100, reorder: 100, ..Faults::NONE };
    let mut sim = Sim::new(7, faults, mem, Default::default());
    let link = Link {
        cap: QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        cq_depth: 16,
        ..Link::default()
    };
    let pairs: Vec<_> = (0..QPS).map(|_| sim::connect(&mut sim, &link).expect("connect")).collect();
    for (i, [a, b]) in pairs.iter().enumerate() {
        let send_src = MEM_BASE + i as u64 * SLOT;
        let write_src = send_src + SLOT / 2;
        sim.nodes[0].memory_mut().write(send_src, &pattern(i, 0)).expect("fill");
        sim.nodes[0].memory_mut().write(write_src, &pattern(i, 0xFF)).expect("fill");
        let recv = [Sge { addr: MEM_BASE + i as u64 * SLOT, length: LEN, lkey: b.mr.raw() }];
        sim.nodes[1].post_recv(b.qp, &RecvWr { wr_id: i as u64, sg_list: &recv }).expect("recv");
        let s = [Sge { addr: send_src, length: LEN, lkey: a.mr.raw() }];
        sim.nodes[0].post_send(a.qp, &SendWr::new(2 * i as u64, WrOpcode::Send, &s)).expect("send");
        let w = [Sge { addr: write_src, length: LEN, lkey: a.mr.raw() }];
        let target = MEM_BASE + (QPS as u64 + i as u64) * SLOT;
        let wr = SendWr::new(2 * i as u64 + 1, WrOpcode::RdmaWrite, &w).with_remote(target, b.mr.raw());
        sim.nodes[0].post_send(a.qp, &wr).expect("write");
    }
    let mut sent = vec![Vec::new(); QPS];
    let mut recvd = vec![Vec::new(); QPS];
    let done = sim.run_until(Instant::from_micros(60_000_000), |s| {
        for (i, [a, b]) in pairs.iter().enumerate() {
            sent[i].extend(sim::drain_cq(&mut s.nodes[0], a.cq));
            recvd[i].extend(sim::drain_cq(&mut s.nodes[1], b.cq));
        }
        sent.iter().all(|v| v.len() == 2) && recvd.iter().all(|v| v.len() == 1)
    });
    assert!(done, "not every QP finished: {} of {QPS}", sent.iter().filter(|v| v.len() == 2).count());
    sim.run_idle(sim.now + rdma::rxe::time::Duration::from_micros(2_000_000));
    for (i, [a, b]) in pairs.iter().enumerate() {
        sent[i].extend(sim::drain_cq(&mut sim.nodes[0], a.cq));
        recvd[i].extend(sim::drain_cq(&mut sim.nodes[1], b.cq));
        let ids: Vec<(u64, WcStatus)> = sent[i].iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(ids, [(2 * i as u64, WcStatus::Success), (2 * i as u64 + 1, WcStatus::Success)], "QP {i}");
        assert_eq!(recvd[i].len(), 1, "QP {i}: the SEND received once");
        assert_eq!((recvd[i][0].opcode, recvd[i][0].byte_len), (WcOpcode::Recv, LEN));
        let mem = sim.nodes[1].memory();
        assert_eq!(mem.slice(MEM_BASE + i as u64 * SLOT, LEN as usize).expect("recv"), pattern(i, 0), "QP {i}'s SEND");
        let target = MEM_BASE + (QPS as u64 + i as u64) * SLOT;
        assert_eq!(mem.slice(target, LEN as usize).expect("write"), pattern(i, 0xFF), "QP {i}'s WRITE");
    }
    assert!(sim.wire.stats.dropped > 0, "the wire lost frames, so timers ran");
}
