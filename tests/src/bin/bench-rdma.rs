//! RDMA between two appliances on one wire: `ibv_rc_pingpong` round trips
//! (usec/iter, which is two one-way latencies plus two completions) and the
//! bandwidth it reaches, at several message sizes, medians of several runs.
//!
//! Usage: bench-rdma [runs] [iters]; writes target/bench/rdma.{md,csv}.

#![deny(unsafe_code)]

use std::fmt::Write as _;
use tests::report::{median, number_before, write_chart, write_tables};
use tests::{Appliance, Nic, Options, free_udp_port};

const SIZES: [u32; 4] = [2, 1024, 4096, 65536];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Judged at the end: was anything else using the CPU meanwhile?
    let load = tests::load::Watch::start();
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let iters: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200).max(1);
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let node = |mac: &str, local, peer, ip: &str| Options {
        nic: Some(Nic { host_mtu: Some(9000), ..Nic::new(mac, local, peer) }),
        append: format!("ip={ip}"),
        ..Options::default()
    };
    let mut a = Appliance::boot(node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24"))?;
    let mut b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24"))?;
    for x in [&mut a, &mut b] {
        x.cmd("rdma link add rxe0 type rxe netdev eth0")?;
    }
    let mut md = String::from("| message bytes | MTU | usec/iter | Mbit/s |\n|---:|---:|---:|---:|\n");
    let mut csv = String::from("bytes,mtu,usec_per_iter,mbit_per_s\n");
    println!("appliance <-> appliance ibv_rc_pingpong, {iters} iterations, medians of {runs} runs");
    let mut by_mtu: Vec<(&str, Vec<f64>)> = vec![("MTU 1024", vec![]), ("MTU 4096", vec![])];
    for (mtu, series) in [1024, 4096].into_iter().zip(&mut by_mtu) {
        for size in SIZES {
            let (mut lat, mut bw) = (vec![], vec![]);
            for _ in 0..runs {
                let opts = format!("-m {mtu} -s {size} -n {iters}");
                let server = a.start_cmd(&format!("ibv_rc_pingpong {opts}"), "local address:")?;
                let out = b.cmd(&format!("ibv_rc_pingpong {opts} 10.0.0.1"))?;
                a.finish_cmd(server)?;
                lat.push(number_before(&out, "usec/iter").ok_or(format!("no result: {out}"))?);
                bw.push(number_before(&out, "Mbit/sec").ok_or(format!("no result: {out}"))?);
            }
            let (l, m) = (median(&mut lat), median(&mut bw));
            println!("{size:>6} B, MTU {mtu}: {l:>9.2} usec/iter, {m:>9.2} Mbit/s");
            series.1.push(l);
            writeln!(md, "| {size} | {mtu} | {l:.2} | {m:.2} |")?;
            writeln!(csv, "{size},{mtu},{l:.3},{m:.3}")?;
        }
    }
    write_tables("rdma", &md, &csv, &load)?;
    println!("written: target/bench/rdma.md, target/bench/rdma.csv");
    let groups: Vec<String> = SIZES.iter().map(|s| format!("{s} B")).collect();
    write_chart(
        "rdma",
        "appliance <-> appliance ibv_rc_pingpong round trip (usec/iter, lower is faster)",
        "usec/iter",
        &groups,
        &by_mtu,
    );
    Ok(())
}
