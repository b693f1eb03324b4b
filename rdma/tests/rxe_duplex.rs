//! Two RC QPs writing to each other at once (perftest's `-b`) through the
//! deterministic simulated wire (`rdma::rxe::sim`), with the faults seen
//! against a Linux rxe peer under TCG on a loaded host.

use rdma::core::counters::RxeCounter;
use rdma::rxe::memory::Memory;
use rdma::rxe::sim::{self, End, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::{Duration, Instant, local_ack_timeout};
use rdma::rxe::wc::{WcStatus, WorkCompletion};
use rdma::rxe::wr::{SendWr, Sge, WrOpcode};
use std::cell::Cell;
use std::rc::Rc;

const MEM: usize = 1 << 20;
const LIMIT: Instant = Instant::from_micros(120_000_000);
/// perftest's QP attributes: `timeout 14` (4.096 µs × 2^14 ≈ 67 ms), `retry_cnt 7`.
fn perftest() -> Link {
    Link { timeout: 14, retry_cnt: 7, ..Link::default() }
}
/// 64 KiB messages, perftest's default size: 64 packets each at MTU 1024.
const MSG: u32 = 64 << 10;

fn sge(end: &End, offset: u64, len: u32) -> Sge {
    Sge { addr: MEM_BASE + offset, length: len, lkey: end.mr.raw() }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Each node posts `n` 64 KiB WRITEs of its own pattern (from offset 0) to the
/// other's memory at 0x80000.
fn post_writes(sim: &mut Sim, ends: &[End; 2], n: u64) {
    for node in 0..2 {
        sim.nodes[node].memory_mut().write(MEM_BASE, &pattern(MSG as usize, node as u8)).expect("in range");
        let (me, peer) = (ends[node], ends[1 - node]);
        let sges = [sge(&me, 0, MSG)];
        for i in 0..n {
            let wr = SendWr::new(i, WrOpcode::RdmaWrite, &sges).with_remote(MEM_BASE + 0x80000, peer.mr.raw());
            sim.nodes[node].post_send(me.qp, &wr).expect("post");
        }
    }
}

/// Drops every frame, both ways, while the returned flag is set: a peer that
/// neither answers nor is heard (a guest whose vCPU did not run).
fn stall_switch(sim: &mut Sim) -> Rc<Cell<bool>> {
    let stalled = Rc::new(Cell::new(false));
    let s = stalled.clone();
    sim.wire.filter = Some(Box::new(move |_, _| s.get()));
    stalled
}

/// Runs until both nodes have `n` completions, or `LIMIT`; returns them.
fn completions(sim: &mut Sim, ends: &[End; 2], n: usize) -> [Vec<WorkCompletion>; 2] {
    let mut got = [Vec::new(), Vec::new()];
    sim.run_until(LIMIT, |s| {
        for node in 0..2 {
            got[node].extend(sim::drain_cq(&mut s.nodes[node], ends[node].cq));
        }
        got.iter().all(|g| g.len() >= n)
    });
    got
}

/// A peer that goes silent for 1.1 s in the middle of a duplex 64 KiB WRITE
/// run (what a Linux rxe guest did under TCG on a loaded host: no frame
/// either way for 1.1 s, then everything it had queued) is waited out: with
/// perftest's `timeout 14` and `retry_cnt 7`, seven retries at the nominal
/// 67 ms gave up after about half a second, the QP erred, and Linux, whose
/// rxe retries `retry_cnt 7` forever, hung. The retransmit timer backs off
/// over consecutive timeouts instead (up to four times the Local ACK
/// Timeout), so the same seven retries cover 1.8 s.
#[test]
fn a_peer_silent_for_a_second_is_waited_out_not_failed() {
    let mut sim = Sim::new(1, Faults::NONE, MEM, Default::default());
    let ends = sim::connect(&mut sim, &perftest()).expect("connect");
    let stalled = stall_switch(&mut sim);
    post_writes(&mut sim, &ends, 4);
    // A hundred frames into the run, then silence.
    sim.run_until(LIMIT, |s| s.wire.stats.delivered >= 100);
    let t0 = sim.now;
    stalled.set(true);
    sim.run_until(t0 + Duration::from_micros(1_100_000), |_| false);
    stalled.set(false);
    let got = completions(&mut sim, &ends, 4);
    for (node, wcs) in got.iter().enumerate() {
        let statuses: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(statuses, (0..4).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>(), "node {node}");
        let peer = 1 - node;
        let data = sim.nodes[peer].memory().slice(MEM_BASE + 0x80000, MSG as usize).expect("in range").to_vec();
        assert_eq!(data, pattern(MSG as usize, node as u8), "node {node}'s data at node {peer}");
        assert_eq!(sim.nodes[node].stats().get(RxeCounter::RetryExceededErr), 0);
        assert!(sim.nodes[node].stats().timeouts >= 3, "node {node} waited through timeouts");
    }
}

/// The retransmit timer of consecutive timeouts without progress: T, 2T,
/// then 4T for the rest (T the Local ACK Timeout); the first progress
/// brings it back to T.
#[test]
fn consecutive_timeouts_back_off_to_four_times_the_ack_timeout() {
    let mut sim = Sim::new(1, Faults::NONE, MEM, Default::default());
    let link = Link::default();
    let ends = sim::connect(&mut sim, &link).expect("connect");
    let t = local_ack_timeout(link.timeout).expect("a timer").as_micros();
    // Node 1 hears nothing while `deaf` is set.
    let deaf = Rc::new(Cell::new(true));
    let d = deaf.clone();
    sim.wire.filter = Some(Box::new(move |to, _| to == 1 && d.get()));
    sim.nodes[0].memory_mut().write(MEM_BASE, &pattern(64, 1)).expect("in range");
    let sges = [sge(&ends[0], 0, 64)];
    let write =
        |wr_id| SendWr::new(wr_id, WrOpcode::RdmaWrite, &sges).with_remote(MEM_BASE + 0x80000, ends[1].mr.raw());
    sim.nodes[0].post_send(ends[0].qp, &write(1)).expect("post");
    let posted = sim.now;
    // Five timeouts go by unanswered: when each fired.
    let mut fired = Vec::new();
    sim.run_until(LIMIT, |s| {
        if s.nodes[0].stats().timeouts as usize > fired.len() {
            fired.push(s.now);
        }
        fired.len() >= 5
    });
    let gaps: Vec<u64> =
        [posted].iter().chain(&fired).collect::<Vec<_>>().windows(2).map(|w| (*w[1] - *w[0]).as_micros()).collect();
    // Each within a few µs of its multiple (the simulated wire's delay).
    let near = |gap: u64, k: u64| (t * k..=t * k + 20).contains(&gap);
    assert!(
        [1, 2, 4, 4, 4].iter().zip(&gaps).all(|(&k, &gap)| near(gap, k)) && gaps.len() == 5,
        "gaps before each timeout {gaps:?} µs (T = {t} µs)"
    );
    // The next try gets through; a new WRITE after that progress is timed from T again.
    deaf.set(false);
    let got = completions_on(&mut sim, &ends[0], 1);
    assert_eq!(got.iter().map(|w| w.status).collect::<Vec<_>>(), [WcStatus::Success]);
    let before = sim.nodes[0].stats().timeouts;
    deaf.set(true);
    sim.nodes[0].post_send(ends[0].qp, &write(2)).expect("post");
    let start = sim.now;
    sim.run_until(LIMIT, |s| s.nodes[0].stats().timeouts > before);
    let gap = (sim.now - start).as_micros();
    assert!(near(gap, 1), "the first timeout after progress came after {gap} µs (T = {t} µs)");
}

fn completions_on(sim: &mut Sim, end: &End, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    sim.run_until(LIMIT, |s| {
        got.extend(sim::drain_cq(&mut s.nodes[0], end.cq));
        got.len() >= n
    });
    got
}
