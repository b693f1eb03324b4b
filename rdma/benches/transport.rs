//! Host benchmark of the rxe transport: two transports joined by the simulated wire
//! without faults, one core. For SEND and RDMA WRITE at 64 B, 4 KiB and 64 KiB (path
//! MTU 4096), messages per second, payload Gb/s, and wall time per frame on the wire
//! (requests and ACKs, both transports and the simulator together: building, ICRC,
//! parsing, the state machines and the payload copies). Then the cost of scale: 64 B
//! WRITEs spread over 1, 100 and 1000 active QP pairs, wall time per frame (the
//! transport's poll visits the QPs with work, and QPN lookup is an index, so this
//! should stay flat). `cargo bench -p rdma --bench transport`.

use std::time::Instant as WallClock;

use rdma::core::port::IbMtu;
use rdma::rxe::qp::QpCap;
use rdma::rxe::sim::{self, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Duration;
use rdma::rxe::wr::{RecvWr, SendWr, Sge, WrOpcode};

const DEPTH: u32 = 256;
/// Messages kept in flight.
const IN_FLIGHT: u64 = 128;

struct Result {
    msgs: u64,
    secs: f64,
    frames: u64,
    retransmitted: u64,
}

fn run(op: WrOpcode, size: u32, msgs: u64) -> Result {
    let mem = (size as usize).max(4096) * 2 + 65536;
    let mut sim = Sim::new(1, Faults::NONE, mem, Default::default());
    let link = Link {
        mtu: IbMtu::Mtu4096,
        cap: QpCap { max_send_wr: DEPTH, max_recv_wr: DEPTH, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        cq_depth: 4096,
        ..Link::default()
    };
    let [a, b] = sim::connect(&mut sim, &link).expect("connect");
    let src = [Sge { addr: MEM_BASE, length: size, lkey: a.mr.raw() }];
    let dst = [Sge { addr: MEM_BASE, length: size, lkey: b.mr.raw() }];
    let recv = RecvWr { wr_id: 0, sg_list: &dst };
    if op == WrOpcode::Send {
        for _ in 0..DEPTH {
            sim.nodes[1].post_recv(b.qp, &recv).expect("recv");
        }
    }
    let wr = SendWr::new(0, op, &src).with_remote(MEM_BASE, b.mr.raw());
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wcs =
        [rdma::rxe::wc::WorkCompletion::new(0, rdma::rxe::wc::WcStatus::Success, rdma::rxe::wc::WcOpcode::Send, 0); 64];
    let start = WallClock::now();
    while done < msgs {
        while posted < msgs && posted - done < IN_FLIGHT {
            sim.nodes[0].post_send(a.qp, &wr).expect("post");
            posted += 1;
        }
        sim.step();
        loop {
            let n = sim.nodes[0].poll_cq(a.cq, &mut wcs).expect("cq");
            if n == 0 {
                break;
            }
            assert!(wcs[..n].iter().all(|w| w.status == rdma::rxe::wc::WcStatus::Success));
            done += n as u64;
        }
        loop {
            let n = sim.nodes[1].poll_cq(b.cq, &mut wcs).expect("cq");
            for _ in 0..n {
                sim.nodes[1].post_recv(b.qp, &recv).expect("recv");
            }
            if n == 0 {
                break;
            }
        }
        let next = sim.next_event().unwrap_or(sim.now + Duration::from_micros(1));
        sim.now = sim.now.max(next);
    }
    Result {
        msgs,
        secs: start.elapsed().as_secs_f64(),
        frames: sim.wire.stats.sent,
        retransmitted: sim.nodes[0].stats().retransmitted_pkts,
    }
}

/// 64 B WRITEs over the first `active` of `qps` QP pairs, two in flight on
/// each: ns per frame.
fn scale(qps: u32, active: usize, msgs: u64) -> f64 {
    let mut sim = Sim::new(1, Faults::NONE, 65536, Default::default());
    let link = Link {
        mtu: IbMtu::Mtu4096,
        cap: QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        cq_depth: 16,
        ..Link::default()
    };
    let all: Vec<_> = (0..qps).map(|_| sim::connect(&mut sim, &link).expect("connect")).collect();
    let pairs = &all[..active.min(all.len())];
    let mut wcs =
        [rdma::rxe::wc::WorkCompletion::new(0, rdma::rxe::wc::WcStatus::Success, rdma::rxe::wc::WcOpcode::Send, 0); 16];
    let (mut posted, mut done) = (0u64, 0u64);
    let mut inflight = vec![0u32; pairs.len()];
    let start = WallClock::now();
    let frames_before = sim.wire.stats.sent;
    while done < msgs {
        for (i, [a, b]) in pairs.iter().enumerate() {
            while inflight[i] < 2 && posted < msgs {
                let src = [Sge { addr: MEM_BASE, length: 64, lkey: a.mr.raw() }];
                let wr = SendWr::new(0, WrOpcode::RdmaWrite, &src).with_remote(MEM_BASE + 4096, b.mr.raw());
                sim.nodes[0].post_send(a.qp, &wr).expect("post");
                inflight[i] += 1;
                posted += 1;
            }
        }
        sim.step();
        for (i, [a, _]) in pairs.iter().enumerate() {
            let n = sim.nodes[0].poll_cq(a.cq, &mut wcs).expect("cq");
            assert!(wcs[..n].iter().all(|w| w.status == rdma::rxe::wc::WcStatus::Success));
            inflight[i] -= n as u32;
            done += n as u64;
        }
        let next = sim.next_event().unwrap_or(sim.now + Duration::from_micros(1));
        sim.now = sim.now.max(next);
    }
    start.elapsed().as_secs_f64() * 1e9 / (sim.wire.stats.sent - frames_before) as f64
}

fn main() {
    println!("{:<6} {:>7} {:>12} {:>9} {:>10} {:>8}", "op", "size", "msgs/s", "Gb/s", "ns/frame", "retx");
    for (name, op) in [("SEND", WrOpcode::Send), ("WRITE", WrOpcode::RdmaWrite)] {
        for size in [64u32, 4096, 65536] {
            // About the same number of frames for every size.
            let msgs = (400_000 / u64::from(size.div_ceil(4096))).max(2_000);
            run(op, size, msgs / 10); // warm-up
            let r = run(op, size, msgs);
            let rate = r.msgs as f64 / r.secs;
            let gbps = rate * f64::from(size) * 8.0 / 1e9;
            let ns_frame = r.secs * 1e9 / r.frames as f64;
            println!("{name:<6} {size:>7} {rate:>12.0} {gbps:>9.2} {ns_frame:>10.0} {:>8}", r.retransmitted);
        }
    }
    // All QPs busy, and one busy among many idle ones (what a poll that
    // visited every QP would pay for).
    println!("\n{:<10} {:>8} {:>10}", "QP pairs", "active", "ns/frame");
    for (qps, active) in [(1u32, 1usize), (100, 100), (1000, 1000), (100, 1), (1000, 1)] {
        scale(qps, active, 20_000); // warm-up
        println!("{qps:<10} {active:>8} {:>10.0}", scale(qps, active, 200_000));
    }
}
