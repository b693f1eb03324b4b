//! Two QEMUs side by side, in one run: bookworm's QEMU 7.2 (unpacked by
//! `make qemu-7.2`) against the installed one (QEMU 10.0 from
//! bookworm-backports), on the same benchmarks, alternating from run to run
//! so the machine's drift falls on both alike. Per QEMU and run, two
//! appliances on one wire at MTU 9000: netbench frames/s received at 1514
//! and 9014 B, a 64 KiB RDMA WRITE between them (`write_bw`), the 2 B SEND
//! latency (`send_lat`), and the ICRC's cost on each CRC path (`cost icrc
//! 4096 2000`). Medians of the runs, and per row the second QEMU's speed
//! over the first's (above 1: the second is faster, whichever way the
//! figure runs).
//!
//! Usage: bench-qemu [runs] [ms per netbench run] [first qemu] [second
//! qemu]; the QEMUs default to target/qemu-7.2's and `tests::qemu_binary`
//! (`$APPLIANCE_QEMU`, else the installed one). Writes
//! target/bench/qemu.{md,csv,png}.

#![deny(unsafe_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tests::progress::Progress;
use tests::report::{median, number_after, perftest_row, write_chart, write_tables};
use tests::{Appliance, Ivshmem, Nic, Options, free_tcp_port, free_udp_port, qemu_binary};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const FRAMES: [usize; 2] = [1514, 9014];
const WRITE_SIZE: usize = 65536;
const WRITE_ITERS: u32 = 1000;
const LAT_ITERS: u32 = 500;
const ICRC_BYTES: usize = 4096;
const ICRC_COUNT: u32 = 2000;
const REGION: u64 = 64 << 20;
const RUN: Duration = Duration::from_secs(300);

/// A measured figure: its row name, and whether more is faster (a rate)
/// or less is (a time).
struct Metric {
    name: String,
    /// Its label in the chart.
    short: &'static str,
    higher_is_faster: bool,
}

fn metrics() -> Vec<Metric> {
    let rate = |name: String, short| Metric { name, short, higher_is_faster: true };
    let time = |name: String, short| Metric { name, short, higher_is_faster: false };
    let shorts = ["1514 B frames", "9014 B frames"];
    let mut m: Vec<Metric> =
        FRAMES.iter().zip(shorts).map(|(f, s)| rate(format!("netbench {f} B, frames/s received"), s)).collect();
    m.push(rate(format!("RDMA WRITE {} KiB, Gb/s", WRITE_SIZE / 1024), "64 KiB WRITE"));
    m.push(time("SEND 2 B latency, median us".into(), "SEND 2 B"));
    m.push(time(format!("ICRC {ICRC_BYTES} B by table, us"), "ICRC table"));
    m.push(time(format!("ICRC {ICRC_BYTES} B by pclmulqdq, us"), "ICRC pclmul"));
    m
}

/// `qemu --version`'s first line, shortened to `QEMU 10.0.2`.
fn version(qemu: &Path) -> Res<String> {
    let out = Command::new(qemu).arg("--version").output().map_err(|e| format!("{}: {e}", qemu.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = number_word_after(&text, "version").ok_or(format!("{}: no version in {text}", qemu.display()))?;
    Ok(format!("QEMU {v}"))
}

fn number_word_after(text: &str, word: &str) -> Option<String> {
    let mut it = text.split_whitespace();
    it.find(|w| *w == word)?;
    it.next().map(str::to_string)
}

/// Runs `tool` between the two rings (server on `a`, client on `b`) and
/// returns the client's output.
fn tool_pair(tool: &str, a: &Path, b: &Path, args: &str) -> Res<String> {
    let port = free_tcp_port();
    let server = tests::tool::spawn(tool, a, &format!("{args} -p {port} --bind 127.0.0.1"))?;
    if !tests::tool::wait_listening(port, Duration::from_secs(60)) {
        let (_, out) = tests::tool::finish(server, RUN)?;
        return Err(format!("{tool}: the server never listened:\n{out}").into());
    }
    let client = tests::tool::spawn(tool, b, &format!("{args} -p {port} 127.0.0.1"))?;
    let (ok, out) = tests::tool::finish(client, RUN)?;
    let (server_ok, server_out) = tests::tool::finish(server, RUN)?;
    if !ok || !server_ok {
        return Err(format!("{tool} failed:\n{out}\n{server_out}").into());
    }
    Ok(out)
}

/// `cost icrc`'s microseconds per CRC on `path`, from its line `icrc N B: X
/// us each, ... (PATH[, in use])`; NaN when the CPU lacks the path.
fn icrc_us(out: &str, path: &str) -> f64 {
    out.lines()
        .find(|l| l.contains(&format!("({path}")) && l.contains("us each"))
        .and_then(|l| tests::report::number_before(l, "us"))
        .unwrap_or(f64::NAN)
}

/// The CRC path `cost icrc` marks `in use`: the one the firmware chose at boot.
fn icrc_in_use(out: &str) -> Option<String> {
    let l = out.lines().find(|l| l.contains(", in use)"))?;
    Some(l.rsplit('(').next()?.trim_end_matches(", in use)").to_string())
}

/// One run on `qemu`: every metric's figure, in [`metrics`] order, and the
/// ICRC's path in use.
fn measure(qemu: &Path, tag: &str, ms: u64) -> Res<(Vec<f64>, String)> {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let (s1, s2) = (Ivshmem::temp(&format!("qemu-{tag}-a"), REGION), Ivshmem::temp(&format!("qemu-{tag}-b"), REGION));
    let node = |mac: &str, local, peer, ip: &str, shm: &Ivshmem| Options {
        qemu: Some(qemu.to_path_buf()),
        nic: Some(Nic { host_mtu: Some(9000), ..Nic::new(mac, local, peer) }),
        append: format!("ip={ip}"),
        ivshmem: Some(shm.clone()),
        cmd_timeout: RUN,
        ..Options::default()
    };
    let mut tx = Appliance::boot(node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24", &s1))?;
    let mut rx = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24", &s2))?;
    tx.cmd("ping 10.0.0.2 -c 1")?;
    let mut figures = Vec::new();
    for size in FRAMES {
        rx.cmd("netbench reset")?;
        let out = tx.cmd(&format!("netbench send 10.0.0.2 {size} {ms}"))?;
        number_after(&out, "sent").ok_or(format!("unexpected output: {out}"))?;
        std::thread::sleep(Duration::from_millis(100));
        let out = rx.cmd("netbench rx")?;
        let got = number_after(&out, "rx:").ok_or(format!("unexpected output: {out}"))?;
        figures.push(got / (ms as f64 / 1000.0));
    }
    for x in [&mut tx, &mut rx] {
        let out = x.cmd("rdma link add rxe0 type rxe netdev eth0")?;
        if !out.contains("set active") {
            return Err(format!("rdma link add: {out}").into());
        }
    }
    let out =
        tool_pair("write_bw", &s1.path, &s2.path, &format!("-x 1 -s {WRITE_SIZE} -n {WRITE_ITERS} --report_gbits"))?;
    let row = perftest_row(&out, WRITE_SIZE, WRITE_ITERS).ok_or(format!("write_bw: no result row:\n{out}"))?;
    figures.push(row.get(1).copied().ok_or("write_bw: no average")?);
    let out = tool_pair("send_lat", &s1.path, &s2.path, &format!("-x 1 -s 2 -n {LAT_ITERS}"))?;
    let row = perftest_row(&out, 2, LAT_ITERS).ok_or(format!("send_lat: no result row:\n{out}"))?;
    // min, max, typical, ...: perftest's typical is its median.
    figures.push(row.get(2).copied().ok_or("send_lat: no typical")?);
    let out = tx.cmd(&format!("cost icrc {ICRC_BYTES} {ICRC_COUNT}"))?;
    figures.push(icrc_us(&out, "table"));
    figures.push(icrc_us(&out, "pclmulqdq"));
    let in_use = icrc_in_use(&out).unwrap_or_else(|| "?".into());
    let _ = tx.shutdown();
    let _ = rx.shutdown();
    Ok((figures, in_use))
}

fn main() -> Res<()> {
    let load = tests::load::Watch::start();
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let old = args.next().map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/qemu-7.2/usr/bin/qemu-system-x86_64")
    });
    let new = args.next().map(PathBuf::from).unwrap_or_else(qemu_binary);
    // A bare name is looked up on PATH; a path must be there.
    if old.components().count() > 1 && !old.exists() {
        return Err(format!("{} is missing: make qemu-7.2", old.display()).into());
    }
    let qemus = [(version(&old)?, old), (version(&new)?, new)];
    println!(
        "{} against {}: {runs} runs each, alternating; netbench {ms} ms per run, write_bw {WRITE_ITERS} x 64 KiB, \
         send_lat {LAT_ITERS} x 2 B, cost icrc {ICRC_BYTES} {ICRC_COUNT}",
        qemus[0].0, qemus[1].0
    );
    let metrics = metrics();
    let mut samples = vec![vec![Vec::new(); metrics.len()]; qemus.len()];
    let mut progress = Progress::new("bench-qemu", runs * qemus.len());
    let mut in_use = vec![String::new(); qemus.len()];
    for k in 0..runs {
        let order: [usize; 2] = if k % 2 == 0 { [0, 1] } else { [1, 0] };
        for q in order {
            let (name, path) = &qemus[q];
            progress.step(&format!("{name}, run {}/{runs}", k + 1));
            let figures;
            (figures, in_use[q]) = measure(path, &format!("{q}"), ms)?;
            for ((m, x), s) in metrics.iter().zip(&figures).zip(&mut samples[q]) {
                println!("{name:>12}: {:<40} {x:.2}", m.name);
                s.push(*x);
            }
        }
    }
    let medians: Vec<Vec<f64>> = samples.iter_mut().map(|per| per.iter_mut().map(|s| median(s)).collect()).collect();
    let (a, b) = (&qemus[0].0, &qemus[1].0);
    let mut md = format!("| benchmark | {a} | {b} | {b} speed over {a} |\n|---|---:|---:|---:|\n");
    let mut csv = String::from("benchmark,first,second,speed_ratio\n");
    let mut ratios = Vec::new();
    for (i, m) in metrics.iter().enumerate() {
        let (x, y) = (medians[0][i], medians[1][i]);
        let speed = if m.higher_is_faster { y / x } else { x / y };
        ratios.push(speed);
        let digits = if x.abs() >= 1000.0 { 0 } else { 2 };
        writeln!(md, "| {} | {x:.digits$} | {y:.digits$} | {speed:.2} |", m.name)?;
        writeln!(csv, "\"{}\",{x:.4},{y:.4},{speed:.4}", m.name)?;
    }
    writeln!(
        md,
        "\nMedians of {runs} runs each, the two QEMUs alternating run by run; first: {}, second: {}. \
         The last column is how many times faster the second ran each benchmark (frames/s and Gb/s: \
         second over first; latency and ICRC time: first over second). The firmware takes the CRC path \
         that was cheaper at boot (WRITE and SEND ran with it): {} on {a}, {} on {b}.",
        qemus[0].1.display(),
        qemus[1].1.display(),
        in_use[0],
        in_use[1]
    )?;
    println!("\n{md}");
    write_tables("qemu", &md, &csv, &load)?;
    let groups: Vec<String> = metrics.iter().map(|m| m.short.to_string()).collect();
    let series = [(a.as_str(), vec![1.0; metrics.len()]), (b.as_str(), ratios)];
    write_chart("qemu", &format!("{b} against {a}: speed relative to {a} (higher is faster)"), "x", &groups, &series);
    println!("written: target/bench/qemu.md, target/bench/qemu.csv");
    Ok(())
}

#[cfg(test)]
mod parse {
    use super::*;

    #[test]
    fn cost_icrc_is_read_per_path() {
        let out = "icrc 4096 B: 19.98 us each, 205.0 MB/s (table, in use)\n\
                   icrc 4096 B: 28.78 us each, 142.3 MB/s (pclmulqdq)\n";
        assert_eq!(icrc_us(out, "table"), 19.98);
        assert_eq!(icrc_us(out, "pclmulqdq"), 28.78);
        assert_eq!(icrc_in_use(out).as_deref(), Some("table"));
        let out = "icrc 4096 B: 19.98 us each, 205.0 MB/s (table, in use)\n\
                   icrc 4096 B: pclmulqdq not available on this CPU\n";
        assert!(icrc_us(out, "pclmulqdq").is_nan());
    }
}
