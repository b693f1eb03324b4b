//! The appliance against Linux rxe, measured in one run on the same kind of
//! wire: `ibv_rc_pingpong` between Linux and Linux, the appliance and Linux
//! (both roles), and two appliances, at several sizes; medians of several runs
//! and each figure's ratio to Linux<->Linux. One pingpong iteration is a round
//! trip (two SENDs, their ACKs and completions), so usec/iter is latency.
//!
//! Usage: bench-interop [runs] [iters]; writes target/bench/interop.{md,csv}.
//! Needs the Linux peer (`make linux-peer`).

#![deny(unsafe_code)]

use std::fmt::Write as _;
use std::time::Duration;
use tests::report::{median, usec_per_iter, write_chart, write_tables};
use tests::{Appliance, LinuxPeer, Nic, Options, PeerOptions, free_udp_port};

const SIZES: [u32; 3] = [2, 4096, 65536];
const LONG: Duration = Duration::from_secs(300);

/// One end of a pingpong.
enum End {
    Linux(LinuxPeer),
    /// An appliance and its wire address.
    Appliance(Appliance, &'static str),
}

impl End {
    fn ip(&self) -> String {
        match self {
            End::Linux(p) => p.wire_ip().to_string(),
            End::Appliance(_, ip) => ip.to_string(),
        }
    }
}

/// Runs one pingpong, `server` serving and `client` connecting; the client's usec/iter.
fn pingpong(server: &mut End, client: &mut End, opts: &str) -> Result<f64, Box<dyn std::error::Error>> {
    let target = server.ip();
    let running = match server {
        End::Linux(p) => {
            p.cmd(&format!("ibv_rc_pingpong -d rxe0 {opts} > /tmp/pp.log 2>&1 &"))?;
            p.wait_listening(18515, Duration::from_secs(30))?;
            None
        }
        End::Appliance(a, _) => Some(a.start_cmd(&format!("ibv_rc_pingpong {opts}"), "local address:")?),
    };
    let out = match client {
        End::Linux(p) => p.cmd_timeout(&format!("ibv_rc_pingpong -d rxe0 {opts} {target}"), LONG)?,
        End::Appliance(a, _) => a.cmd(&format!("ibv_rc_pingpong {opts} {target}"))?,
    };
    match (server, running) {
        (End::Linux(p), _) => {
            p.cmd_timeout("wait; cat /tmp/pp.log", LONG)?;
        }
        (End::Appliance(a, _), Some(r)) => {
            a.finish_cmd(r)?;
        }
        (End::Appliance(..), None) => {}
    }
    Ok(usec_per_iter(&out).ok_or(format!("no result in:\n{out}"))?)
}

fn appliance(mac: &str, local: u16, peer: u16, ip: &'static str) -> Result<End, Box<dyn std::error::Error>> {
    let mut a = Appliance::boot(Options {
        nic: Some(Nic::new(mac, local, peer)),
        append: format!("ip={ip}/24"),
        cmd_timeout: LONG,
        ..Options::default()
    })?;
    a.cmd("rdma link add rxe0 type rxe netdev eth0")?;
    Ok(End::Appliance(a, ip))
}

fn linux(mac: &str, local: u16, peer: u16, ip: &str) -> Result<LinuxPeer, Box<dyn std::error::Error>> {
    let mut p = LinuxPeer::start(PeerOptions::new(Nic::new(mac, local, peer), ip))?;
    p.wait_ready()?;
    Ok(p)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Judged at the end: was anything else using the CPU meanwhile?
    let load = tests::load::Watch::start();
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let iters: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100).max(1);
    if !LinuxPeer::available() {
        return Err("the Linux peer is not built: make linux-peer".into());
    }
    // (label, results by size)
    let mut rows: Vec<(&str, Vec<f64>)> = Vec::new();
    // Four pairs, each size `runs` times.
    let mut progress = tests::progress::Progress::new("bench-interop", 4 * SIZES.len() * runs);
    let mut measure =
        |label: &'static str, server: &mut End, client: &mut End| -> Result<(), Box<dyn std::error::Error>> {
            let mut by_size = Vec::new();
            for size in SIZES {
                let mut v = Vec::new();
                for k in 1..=runs {
                    progress.step(&format!("{label}: {size} B, run {k}/{runs}"));
                    v.push(pingpong(server, client, &format!("-g 1 -n {iters} -s {size}"))?);
                }
                let m = median(&mut v);
                println!("{label:<32} {size:>6} B: {m:>10.1} usec/iter");
                by_size.push(m);
            }
            rows.push((label, by_size));
            Ok(())
        };
    {
        let (p1, p2) = (free_udp_port(), free_udp_port());
        let mut a = End::Linux(linux("52:54:00:00:01:03", p1, p2, "10.0.0.3/24")?);
        let mut b = End::Linux(linux("52:54:00:00:01:04", p2, p1, "10.0.0.4/24")?);
        measure("Linux <-> Linux", &mut a, &mut b)?;
    }
    {
        let (p1, p2) = (free_udp_port(), free_udp_port());
        let mut l = End::Linux(linux("52:54:00:00:01:03", p2, p1, "10.0.0.3/24")?);
        let mut a = appliance("52:54:00:00:00:01", p1, p2, "10.0.0.1")?;
        measure("appliance client, Linux server", &mut l, &mut a)?;
        measure("Linux client, appliance server", &mut a, &mut l)?;
    }
    {
        let (p1, p2) = (free_udp_port(), free_udp_port());
        let mut a = appliance("52:54:00:00:00:01", p1, p2, "10.0.0.1")?;
        let mut b = appliance("52:54:00:00:00:02", p2, p1, "10.0.0.2")?;
        measure("appliance <-> appliance", &mut a, &mut b)?;
    }
    let base = rows[0].1.clone();
    let mut md = String::from("| pair |");
    let mut csv = String::from("pair");
    for s in SIZES {
        write!(md, " {s} B usec/iter | ratio |")?;
        write!(csv, ",usec_{s},ratio_{s}")?;
    }
    md.push_str("\n|---|");
    md.push_str(&"---:|---:|".repeat(SIZES.len()));
    md.push('\n');
    csv.push('\n');
    for (label, v) in &rows {
        write!(md, "| {label} |")?;
        write!(csv, "{label}")?;
        for (i, x) in v.iter().enumerate() {
            write!(md, " {x:.1} | {:.2} |", x / base[i])?;
            write!(csv, ",{x:.2},{:.4}", x / base[i])?;
        }
        md.push('\n');
        csv.push('\n');
    }
    println!("\n{md}");
    write_tables("interop", &md, &csv, &load)?;
    let groups: Vec<String> = SIZES.iter().map(|s| format!("{s} B")).collect();
    let series: Vec<(&str, Vec<f64>)> = rows.iter().map(|(label, v)| (*label, v.clone())).collect();
    write_chart("interop", "ibv_rc_pingpong round trip (usec/iter, lower is faster)", "usec/iter", &groups, &series);
    println!(
        "written: target/bench/interop.md, target/bench/interop.csv (ratio = usec/iter / Linux<->Linux; lower is faster)"
    );
    Ok(())
}
