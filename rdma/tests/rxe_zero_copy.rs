//! Zero-copy transmit end to end over the simulated wire (issue 16): payloads
//! from memory go out as chains (headers, the payload's spans, pad and ICRC),
//! the simulated NIC reading the payload after the send. The wire carries the
//! same bytes as when they are copied; a buffer the host rewrites between the
//! ICRC and the NIC's read leaves with a stale ICRC, is dropped by the receiver,
//! and the retransmission carries the new bytes.

use std::cell::RefCell;
use std::rc::Rc;

use rdma::core::port::IbMtu;
use rdma::rxe::memory::Memory;
use rdma::rxe::sim::{self, End, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Instant;
use rdma::rxe::wc::{WcStatus, WorkCompletion};
use rdma::rxe::wr::{RecvWr, SendWr, Sge, WrOpcode};
use rdma::wire::frame::DropReason;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed)).collect()
}

/// Frames put on the wire, with their destination node.
type Frames = Vec<(usize, Vec<u8>)>;

fn sge(end: &End, offset: u64, len: u32) -> Sge {
    Sge { addr: MEM_BASE + offset, length: len, lkey: end.mr.raw() }
}

/// Runs until both CQs hold `want` completions between them (a minute of
/// simulated time at most); the completions.
fn complete(sim: &mut Sim, ends: &[End; 2], want: usize) -> Vec<WorkCompletion> {
    let mut done = Vec::new();
    let ok = sim.run_until(Instant::from_micros(60_000_000), |s| {
        for (i, e) in ends.iter().enumerate() {
            done.extend(sim::drain_cq(&mut s.nodes[i], e.cq));
        }
        done.len() >= want
    });
    assert!(ok, "only {} of {want} completions: {done:?}", done.len());
    done
}

/// SENDs (one SGE, two SGEs of which two runs are adjacent), a 3-packet WRITE and
/// a 3-packet READ from node 0 to node 1 at MTU 1024; every frame on the wire,
/// and the nodes' zero-copy and copied counts.
fn traffic(zero_copy: bool) -> (Frames, [(u64, u64); 2]) {
    let mut sim = Sim::new(7, Faults::NONE, 1 << 16, Default::default());
    sim.set_zero_copy(zero_copy);
    let ends = sim::connect(&mut sim, &Link { mtu: IbMtu::Mtu1024, ..Link::default() }).expect("connect");
    let [a, b] = ends;
    sim.nodes[0].memory_mut().write(MEM_BASE, &pattern(0x4000, 1)).expect("memory");
    sim.nodes[1].memory_mut().write(MEM_BASE + 0x8000, &pattern(3000, 2)).expect("memory");
    let log: Rc<RefCell<Frames>> = Rc::default();
    let l = log.clone();
    sim.wire.filter = Some(Box::new(move |to, f| {
        l.borrow_mut().push((to, f.to_vec()));
        false
    }));
    for i in 0..2 {
        let rsge = [sge(&b, 0x4000 + i * 0x1000, 0x1000)];
        sim.nodes[1].post_recv(b.qp, &RecvWr { wr_id: i, sg_list: &rsge }).expect("recv");
    }
    let one = [sge(&a, 3, 1000)];
    let two = [sge(&a, 0x100, 100), sge(&a, 0x164, 50), sge(&a, 0x2001, 333)];
    sim.nodes[0].post_send(a.qp, &SendWr::new(1, WrOpcode::Send, &one)).expect("send");
    sim.nodes[0].post_send(a.qp, &SendWr::new(2, WrOpcode::Send, &two)).expect("send");
    let write = [sge(&a, 0x1000, 3000)];
    let wr = SendWr::new(3, WrOpcode::RdmaWrite, &write).with_remote(MEM_BASE + 0x6000, b.mr.raw());
    sim.nodes[0].post_send(a.qp, &wr).expect("write");
    let read = [sge(&a, 0x3000, 3000)];
    let wr = SendWr::new(4, WrOpcode::RdmaRead, &read).with_remote(MEM_BASE + 0x8000, b.mr.raw());
    sim.nodes[0].post_send(a.qp, &wr).expect("read");
    let wcs = complete(&mut sim, &ends, 6);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let mem =
        |n: usize, at: u64, len: usize| sim.nodes[n].memory().slice(MEM_BASE + at, len).expect("in range").to_vec();
    assert_eq!(mem(1, 0x4000, 1000), mem(0, 3, 1000));
    assert_eq!(mem(1, 0x5000, 483), [mem(0, 0x100, 100), mem(0, 0x164, 50), mem(0, 0x2001, 333)].concat());
    assert_eq!(mem(1, 0x6000, 3000), mem(0, 0x1000, 3000));
    assert_eq!(mem(0, 0x3000, 3000), pattern(3000, 2));
    assert_eq!(sim.dma_errors, 0);
    let counts = [0, 1].map(|n| (sim.nodes[n].stats().tx_zero_copy, sim.nodes[n].stats().tx_copied));
    drop(sim);
    let log = Rc::try_unwrap(log).expect("the wire is gone").into_inner();
    (log, counts)
}

#[test]
fn the_wire_carries_the_same_bytes_zero_copy_or_copied() {
    let (copied, counts) = traffic(false);
    assert_eq!(counts, [(0, 5), (0, 3)], "2 SENDs and 3 WRITE packets; 3 READ responses");
    let (zero_copy, counts) = traffic(true);
    assert_eq!(counts, [(5, 0), (3, 0)], "every payload from memory sent where it lies");
    assert_eq!(zero_copy.len(), copied.len());
    for (i, (z, c)) in zero_copy.iter().zip(&copied).enumerate() {
        assert_eq!(z, c, "frame {i}");
    }
}

/// The host rewrites the source of a 1-packet WRITE after the requester computed
/// its ICRC and before the NIC read it: that frame dies at the receiver's ICRC
/// check; nothing else is hurt, and the retransmission (read from memory again)
/// delivers the new bytes.
#[test]
fn a_buffer_rewritten_before_the_nic_reads_it_is_resent_with_its_new_bytes() {
    let mut sim = Sim::new(3, Faults::NONE, 1 << 16, Default::default());
    sim.set_zero_copy(true);
    let link = Link { mtu: IbMtu::Mtu4096, timeout: 8, ..Link::default() };
    let ends = sim::connect(&mut sim, &link).expect("connect");
    let [a, b] = ends;
    sim.nodes[0].memory_mut().write(MEM_BASE, &pattern(4096, 5)).expect("memory");
    let fresh = pattern(4096, 9);
    let mut once = Some(fresh.clone());
    sim.dma_hook = Some(Box::new(move |node, mem| {
        if node == 0
            && let Some(bytes) = once.take()
        {
            mem.write(MEM_BASE, &bytes).expect("memory");
        }
    }));
    let src = [sge(&a, 0, 4096)];
    let wr = SendWr::new(1, WrOpcode::RdmaWrite, &src).with_remote(MEM_BASE + 0x8000, b.mr.raw());
    sim.nodes[0].post_send(a.qp, &wr).expect("write");
    let wcs = complete(&mut sim, &ends, 1);
    assert_eq!(wcs[0].status, WcStatus::Success);
    assert_eq!(sim.nodes[1].stats().dropped(DropReason::BadIcrc), 1, "the stale frame");
    assert!(sim.nodes[0].stats().retransmitted_pkts >= 1);
    assert_eq!(sim.nodes[1].memory().slice(MEM_BASE + 0x8000, 4096).expect("in range"), &fresh[..]);
}
