//! The verbs ring, from host programs to two appliances on one wire: NOP
//! command round trip, post_send -> CQE latency of a signaled 64-byte RDMA
//! WRITE, message rate with 1 and 16 QPs, and WRITE bandwidth at 64 B, 4 KiB
//! and 64 KiB. Medians of several runs. RoCE MTU 4096 on 9000-byte netdevs,
//! as bench-rdma's large-message rows.
//!
//! Usage: bench-verbs [runs] [filter]; writes target/bench/verbs.{md,csv}.
//! With a filter only the measurements whose names contain it run (e.g.
//! `65536`). `BENCH_VERBS_PERF=1` prints both appliances' `perf` profile
//! after each bandwidth measurement (reset before it); `BENCH_VERBS_APPEND`
//! adds to both appliances' kernel command line (e.g. `rxe.window=16`).

#![deny(unsafe_code)]

use std::fmt::Write as _;
use std::time::{Duration, Instant};
use tests::rc::connect;
use tests::report::{median, write_chart, write_tables};
use tests::{Appliance, Ivshmem, Nic, Options, free_udp_port};
use verbs::{AccessFlags, Context, Cq, MemoryRegion, Qp, QpCap, QpInitAttr, SendFlags, SendWr, WrOp};

const WAIT: Duration = Duration::from_secs(60);
const BUF: usize = 1 << 20;
/// `IBV_MTU_4096`: 64 KiB messages go as 16 packets on a 9000-byte netdev.
const PATH_MTU_4096: u32 = 5;
/// The netdevs' MTU (virtio's `host_mtu`), room for a 4096-byte RoCE payload.
const NETDEV_MTU: u32 = 9000;

/// Posts `n` RDMA WRITEs of `size` bytes on `qps` in turn (every `signal`-th
/// signaled, and the last of each QP), waits for the signaled ones; seconds taken.
fn writes(qps: &[(&Qp, &Cq)], mr: &MemoryRegion, remote: &MemoryRegion, size: usize, n: usize, signal: usize) -> f64 {
    let start = Instant::now();
    let mut pending = vec![0usize; qps.len()];
    for i in 0..n {
        let k = i % qps.len();
        let (qp, cq) = qps[k];
        let last = i + qps.len() >= n;
        let signaled = last || (i / qps.len()) % signal == signal - 1;
        // Keep at most `signal` unsignaled WRs per QP in its send queue.
        if signaled {
            while pending[k] >= 2 {
                cq.wait(WAIT).expect("completion");
                pending[k] -= 1;
            }
        }
        let wr = SendWr {
            wr_id: i as u64,
            op: WrOp::Write { remote_addr: remote.addr(), rkey: remote.rkey() },
            sg_list: &[mr.sge(0, size as u32).expect("sge")],
            flags: if signaled { SendFlags::SIGNALED } else { SendFlags::NONE },
            ud: None,
        };
        qp.post_send(&[wr]).expect("post");
        if signaled {
            pending[k] += 1;
        }
    }
    for (k, (_, cq)) in qps.iter().enumerate() {
        for _ in 0..pending[k] {
            let wc = cq.wait(WAIT).expect("completion");
            assert!(wc.status.is_success(), "{wc:?}");
        }
    }
    start.elapsed().as_secs_f64()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Judged at the end: was anything else using the CPU meanwhile?
    let load = tests::load::Watch::start();
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let filter = std::env::args().nth(2).unwrap_or_default();
    let wanted = |name: &str| name.contains(filter.as_str());
    let profile = std::env::var_os("BENCH_VERBS_PERF").is_some();
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let (s1, s2) = (Ivshmem::temp("bench-a", 64 << 20), Ivshmem::temp("bench-b", 64 << 20));
    let node = |mac: &str, local, peer, ip: &str, shm: &Ivshmem| Options {
        nic: Some(Nic { host_mtu: Some(NETDEV_MTU), ..Nic::new(mac, local, peer) }),
        append: format!("ip={ip} {}", std::env::var("BENCH_VERBS_APPEND").unwrap_or_default()).trim().to_string(),
        ivshmem: Some(shm.clone()),
        ..Options::default()
    };
    let mut a = Appliance::boot(node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24", &s1))?;
    let mut b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24", &s2))?;
    for x in [&mut a, &mut b] {
        x.cmd("rdma link add rxe0 type rxe netdev eth0")?;
    }
    let (ca, cb) = (Context::open(&s1.path)?, Context::open(&s2.path)?);
    let (da, db) = (ca.device(Some("rxe0"))?, cb.device(Some("rxe0"))?);
    let (pa, pb) = (da.alloc_pd()?, db.alloc_pd()?);
    let (ma, mb) = (pa.reg_mr(BUF, AccessFlags::ALL_REMOTE)?, pb.reg_mr(BUF, AccessFlags::ALL_REMOTE)?);
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let attr = QpInitAttr { cap, ..Default::default() };
    let (cqs_a, cqs_b): (Vec<Cq>, Vec<Cq>) = (0..16)
        .map(|_| Ok((da.create_cq(128, 0)?, db.create_cq(128, 0)?)))
        .collect::<Result<Vec<_>, verbs::Error>>()?
        .into_iter()
        .unzip();
    let mut qps = Vec::new();
    for k in 0..16 {
        let qa = Qp::create(&pa, &cqs_a[k], &cqs_a[k], None, &attr)?;
        let qb = Qp::create(&pb, &cqs_b[k], &cqs_b[k], None, &attr)?;
        connect(&qa, qb.qp_num(), 2, PATH_MTU_4096)?;
        connect(&qb, qa.qp_num(), 1, PATH_MTU_4096)?;
        qps.push((qa, qb));
    }
    let pairs: Vec<(&Qp, &Cq)> = qps.iter().zip(&cqs_a).map(|((qa, _), cq)| (qa, cq)).collect();

    let mut rows: Vec<(String, f64, &str)> = Vec::new();
    // NOP: one command through the ring and back.
    let name = "NOP command round trip";
    if wanted(name) {
        let mut v = Vec::new();
        for _ in 0..runs {
            let n = 200;
            let t = Instant::now();
            for _ in 0..n {
                ca.nop()?;
            }
            v.push(t.elapsed().as_secs_f64() * 1e6 / f64::from(n));
        }
        rows.push((name.into(), median(&mut v), "usec"));
    }
    // post_send -> CQE of one signaled 64-byte WRITE.
    let name = "post_send -> CQE, 64 B WRITE";
    if wanted(name) {
        let mut v = Vec::new();
        for _ in 0..runs {
            let mut lat = Vec::new();
            for _ in 0..100 {
                lat.push(writes(&pairs[..1], &ma, &mb, 64, 1, 1) * 1e6);
            }
            v.push(median(&mut lat));
        }
        rows.push((name.into(), median(&mut v), "usec"));
    }
    // Message rate: 64-byte WRITEs, signaled every 16th.
    for nq in [1usize, 16] {
        let name = format!("message rate, 64 B WRITE, {nq} QP");
        if !wanted(&name) {
            continue;
        }
        let mut v = Vec::new();
        for _ in 0..runs {
            let n = 2000;
            v.push(n as f64 / writes(&pairs[..nq], &ma, &mb, 64, n, 16));
        }
        rows.push((name, median(&mut v), "msgs/s"));
    }
    // Bandwidth: WRITEs on one QP.
    for (size, n) in [(64usize, 2000usize), (4096, 1000), (65536, 100)] {
        let name = format!("WRITE bandwidth, {size} B");
        if !wanted(&name) {
            continue;
        }
        if profile {
            for x in [&mut a, &mut b] {
                x.cmd("perf reset")?;
            }
        }
        let mut v = Vec::new();
        for _ in 0..runs {
            let secs = writes(&pairs[..1], &ma, &mb, size, n, 16);
            v.push((size * n) as f64 * 8.0 / secs / 1e9);
        }
        if profile {
            let runs: Vec<String> = v.iter().map(|g| format!("{g:.3}")).collect();
            println!("{name}: {} Gb/s per run", runs.join(" "));
            for (who, x) in [("requester", &mut a), ("responder", &mut b)] {
                println!("--- {who} ---\n{}", x.cmd("perf")?);
            }
        }
        rows.push((name, median(&mut v), "Gb/s"));
    }

    let mut md = String::from("| measurement | median | unit |\n|---|---:|---|\n");
    let mut csv = String::from("measurement,median,unit\n");
    for (name, value, unit) in &rows {
        println!("{name:<36} {value:>12.3} {unit}");
        writeln!(md, "| {name} | {value:.3} | {unit} |")?;
        writeln!(csv, "{name},{value:.4},{unit}")?;
    }
    write_tables("verbs", &md, &csv, &load)?;
    println!("written: target/bench/verbs.md, target/bench/verbs.csv");
    // The bandwidth rows, the ones on one scale.
    let (groups, gbps): (Vec<String>, Vec<f64>) =
        rows.iter().filter(|(_, _, unit)| *unit == "Gb/s").map(|(name, v, _)| (name.clone(), *v)).unzip();
    if !gbps.is_empty() {
        write_chart(
            "verbs",
            "Host program -> ring -> RDMA WRITE on one QP (Gb/s, higher is faster)",
            "Gb/s",
            &groups,
            &[("appliance <-> appliance", gbps)],
        );
    }
    Ok(())
}
