//! The NIC models side by side, in one run: for each (virtio-net, e1000e, and
//! igb when the installed QEMU has it), two appliances on one wire at MTU
//! 9000, the raw wire (`netbench`: frames/s and Gb/s received, at 1514 and
//! 9014 B frames) and a 64 KiB RDMA WRITE between them (`write_bw` through
//! the rings, Gb/s), medians of several runs, each against virtio-net's.
//!
//! Usage: bench-nics [runs] [ms per netbench run]; writes
//! target/bench/nics.{md,csv}.

#![deny(unsafe_code)]

use std::fmt::Write as _;
use std::time::Duration;
use tests::report::{median, number_after, perftest_row, write_tables};
use tests::{Appliance, Ivshmem, Nic, NicModel, Options, free_tcp_port, free_udp_port};

const FRAMES: [usize; 2] = [1514, 9014];
const WRITE_SIZE: usize = 65536;
const WRITE_ITERS: u32 = 1000;
const REGION: u64 = 64 << 20;
const RUN: Duration = Duration::from_secs(300);

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// One model's medians: (frames/s, Gb/s) per frame size, then WRITE Gb/s.
struct Row {
    wire: Vec<(f64, f64)>,
    write_gbps: f64,
}

fn measure(model: NicModel, runs: usize, ms: u64) -> Res<Row> {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let tag = model.name();
    let (s1, s2) = (Ivshmem::temp(&format!("nics-{tag}-a"), REGION), Ivshmem::temp(&format!("nics-{tag}-b"), REGION));
    let node = |mac: &str, local, peer, ip: &str, shm: &Ivshmem| Options {
        nic: Some(Nic { model, host_mtu: Some(9000), ..Nic::new(mac, local, peer) }),
        append: format!("ip={ip}"),
        ivshmem: Some(shm.clone()),
        ..Options::default()
    };
    let mut tx = Appliance::boot(node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24", &s1))?;
    let mut rx = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24", &s2))?;
    tx.cmd("ping 10.0.0.2 -c 1")?;
    let mut wire = Vec::new();
    for size in FRAMES {
        let (mut fps, mut gbps) = (vec![], vec![]);
        for _ in 0..runs {
            rx.cmd("netbench reset")?;
            let out = tx.cmd(&format!("netbench send 10.0.0.2 {size} {ms}"))?;
            number_after(&out, "sent").ok_or(format!("unexpected output: {out}"))?;
            std::thread::sleep(Duration::from_millis(100));
            let got_out = rx.cmd("netbench rx")?;
            let got = number_after(&got_out, "rx:").ok_or(format!("unexpected output: {got_out}"))?;
            let secs = ms as f64 / 1000.0;
            fps.push(got / secs);
            gbps.push(got * size as f64 * 8.0 / secs / 1e9);
        }
        let (f, g) = (median(&mut fps), median(&mut gbps));
        println!("{tag:>10}: {size:>5} B frames: {f:>8.0} frames/s received, {g:>6.3} Gb/s");
        wire.push((f, g));
    }
    for x in [&mut tx, &mut rx] {
        let out = x.cmd("rdma link add rxe0 type rxe netdev eth0")?;
        if !out.contains("set active") {
            return Err(format!("{tag}: rdma link add: {out}").into());
        }
    }
    let args = format!("-x 1 -s {WRITE_SIZE} -n {WRITE_ITERS} --report_gbits");
    let mut write = vec![];
    for _ in 0..runs {
        let port = free_tcp_port();
        let server = tests::tool::spawn("write_bw", &s1.path, &format!("{args} -p {port} --bind 127.0.0.1"))?;
        if !tests::tool::wait_listening(port, Duration::from_secs(60)) {
            let (_, out) = tests::tool::finish(server, RUN)?;
            return Err(format!("{tag}: write_bw server never listened:\n{out}").into());
        }
        let client = tests::tool::spawn("write_bw", &s2.path, &format!("{args} -p {port} 127.0.0.1"))?;
        let (ok, out) = tests::tool::finish(client, RUN)?;
        let (server_ok, server_out) = tests::tool::finish(server, RUN)?;
        if !ok || !server_ok {
            return Err(format!("{tag}: write_bw failed:\n{out}\n{server_out}").into());
        }
        let row = perftest_row(&out, WRITE_SIZE, WRITE_ITERS).ok_or(format!("{tag}: no result row:\n{out}"))?;
        write.push(row.get(1).copied().ok_or("no average")?);
    }
    let write_gbps = median(&mut write);
    println!("{tag:>10}: 64 KiB RDMA WRITE {write_gbps:.3} Gb/s");
    Ok(Row { wire, write_gbps })
}

fn main() -> Res<()> {
    // Judged at the end: was anything else using the CPU meanwhile?
    let load = tests::load::Watch::start();
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let mut models = vec![NicModel::Virtio, NicModel::E1000e];
    if NicModel::Igb.available() {
        models.push(NicModel::Igb);
    } else {
        println!("igb: the installed QEMU has no igb model (QEMU 8 or later has it); its row is left out");
    }
    println!("NIC models: {runs} runs each, medians; netbench {ms} ms per run, write_bw {WRITE_ITERS} x 64 KiB");
    let mut rows = Vec::new();
    for m in &models {
        rows.push((*m, measure(*m, runs, ms)?));
    }
    let base = rows.first().map(|(_, r)| (r.wire.clone(), r.write_gbps)).ok_or("no model measured")?;
    let mut md = String::from("| NIC | ");
    for f in FRAMES {
        write!(md, "{f} B frames/s | {f} B Gb/s | ")?;
    }
    md += "64 KiB WRITE Gb/s | WRITE vs virtio-net |\n|---|";
    md += &"---:|".repeat(2 * FRAMES.len() + 2);
    md += "\n";
    let mut csv = String::from("nic,frame_bytes,received_fps,received_gbps,write_64k_gbps\n");
    for (m, r) in &rows {
        write!(md, "| {} | ", m.name())?;
        for (i, (f, g)) in r.wire.iter().enumerate() {
            let vs = base.0.get(i).map_or(f64::NAN, |b| g / b.1);
            write!(md, "{f:.0} | {g:.3} ({vs:.2}x) | ")?;
            writeln!(csv, "{},{},{f:.0},{g:.4},{:.4}", m.name(), FRAMES[i], r.write_gbps)?;
        }
        writeln!(md, "{:.3} | {:.2}x |", r.write_gbps, r.write_gbps / base.1)?;
    }
    print!("{md}");
    write_tables("nics", &md, &csv, &load)?;
    println!("written: target/bench/nics.md, target/bench/nics.csv");
    Ok(())
}
