//! The raw wire limit: UDP frames per second from one appliance to another
//! (`netbench`), at several frame sizes, medians of several runs. This is the
//! ceiling the RoCE transport is compared against.
//!
//! Usage: bench-net [runs] [ms per run]; writes target/bench/net.{md,csv}.

#![deny(unsafe_code)]

use std::fmt::Write as _;
use std::time::Duration;
use tests::report::{median, number_after, write_chart, write_tables};
use tests::{Appliance, Nic, Options, free_udp_port};

const SIZES: [usize; 5] = [64, 1024, 1514, 4200, 9014];

fn node(mac: &str, local: u16, peer: u16, ip: &str) -> Options {
    Options {
        nic: Some(Nic { host_mtu: Some(9000), ..Nic::new(mac, local, peer) }),
        append: format!("ip={ip}"),
        ..Options::default()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Judged at the end: was anything else using the CPU meanwhile?
    let load = tests::load::Watch::start();
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut tx = Appliance::boot(node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24"))?;
    let mut rx = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24"))?;
    tx.cmd("ping 10.0.0.2 -c 1")?;
    let mut md = String::from(
        "| frame bytes | sent frames/s | received frames/s | received Gb/s | loss |\n|---:|---:|---:|---:|---:|\n",
    );
    let mut csv = String::from("frame_bytes,sent_fps,received_fps,received_gbps,loss_percent\n");
    println!("netbench: {runs} runs of {ms} ms per size, medians");
    let mut received_gbps = Vec::new();
    for size in SIZES {
        let (mut sent_fps, mut rx_fps, mut gbps, mut loss) = (vec![], vec![], vec![], vec![]);
        for _ in 0..runs {
            rx.cmd("netbench reset")?;
            let out = tx.cmd(&format!("netbench send 10.0.0.2 {size} {ms}"))?;
            let sent = number_after(&out, "sent").ok_or(format!("unexpected output: {out}"))?;
            std::thread::sleep(Duration::from_millis(100));
            let got_out = rx.cmd("netbench rx")?;
            let got = number_after(&got_out, "rx:").ok_or(format!("unexpected output: {got_out}"))?;
            let secs = ms as f64 / 1000.0;
            sent_fps.push(sent / secs);
            rx_fps.push(got / secs);
            gbps.push(got * size as f64 * 8.0 / secs / 1e9);
            loss.push(100.0 * (1.0 - got / sent.max(1.0)));
        }
        let row = (median(&mut sent_fps), median(&mut rx_fps), median(&mut gbps), median(&mut loss));
        println!(
            "{size:>5} B: sent {:>8.0} frames/s, received {:>8.0} frames/s, {:>6.3} Gb/s, loss {:>5.1}%",
            row.0, row.1, row.2, row.3
        );
        received_gbps.push(row.2);
        writeln!(md, "| {size} | {:.0} | {:.0} | {:.3} | {:.1}% |", row.0, row.1, row.2, row.3)?;
        writeln!(csv, "{size},{:.0},{:.0},{:.4},{:.2}", row.0, row.1, row.2, row.3)?;
    }
    write_tables("net", &md, &csv, &load)?;
    println!("written: target/bench/net.md, target/bench/net.csv");
    let groups: Vec<String> = SIZES.iter().map(|s| format!("{s} B frames")).collect();
    write_chart(
        "net",
        "Wire limit: UDP frames received from the other appliance (Gb/s, higher is faster)",
        "Gb/s",
        &groups,
        &[("received", received_gbps)],
    );
    Ok(())
}
