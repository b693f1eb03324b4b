//! perftest figures for Linux rxe and the appliance, measured in one run on
//! one kind of wire (UDP over 127.0.0.1, 9000-byte netdevs, RoCE MTU 4096;
//! each end a deep socket the harness hands QEMU, `tests::udp_wire`, or with
//! `BENCH_WIRE=qemu` QEMU's own socket netdev, whose 208 KiB receive buffer
//! holds ~24 frames of 4 KiB): Linux<->Linux with Linux's `ib_*` programs; the appliance (host
//! tools through its verbs ring) against Linux, in both roles; appliance<->
//! appliance; the wire's own limits between the same two appliances
//! (`netbench`) at the frame size of an MTU-4096 WRITE: the raw frame limit
//! (a copy per frame), the raw wire limit (prebuilt frames: what the wire
//! and QEMU move when the sender does no per-byte work) and the limit with a
//! copy and an ICRC per frame (what any RoCE implementation pays); and the
//! wire's ping round trip, beside the SEND latency. RDMA WRITE bandwidth at
//! 64 B, 4 KiB and 64 KiB, its message rate at 64 B, and SEND latency at 2 B
//! (median and 99th percentile); medians of several runs, each figure with
//! its ratio to Linux<->Linux. The appliance pairs run twice: with our Rust host tools,
//! and with Debian's unmodified `ib_*` programs over our `libibverbs.so.1`
//! (`make abi`), whose cost against the Rust tools is a table of its own.
//!
//! Usage: bench-perftest [runs]; writes target/bench/perftest.{md,csv,png}
//! and perftest-latency.png.
//! Needs the Linux peer (`make linux-peer`) and the verbs tools.

#![deny(unsafe_code)]

use std::fmt::Write as _;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use tests::echo::Summary;
use tests::progress::Progress;
use tests::report::{median, number_after, perftest_row, ping_times_ms, write_chart, write_tables};
use tests::{
    Appliance, Ivshmem, LinuxPeer, MGMT_GUEST_PORT, MGMT_HOST_IP, Nic, Options, PeerOptions, free_tcp_port,
    free_udp_port,
};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const MTU: u32 = 9000;
const REGION: u64 = 64 << 20;
const RUN: Duration = Duration::from_secs(300);
/// WRITE sizes and their iteration counts: a second or more for the
/// fastest pair (appliance <-> appliance: 64 B at ~0.01 Gb/s, 4 KiB at
/// ~0.6, 64 KiB at ~1.0). Runs of a quarter to half a second, as 5000,
/// 5000 and 1000 gave, moved the C ABI's paired ratios by +-25%.
const BW: [(usize, u32); 3] = [(64, 20000), (4096, 20000), (65536, 4000)];
/// SEND latency iterations. The p99 of 500 samples is the 5th slowest, which
/// moved by 30% from run to run on these machines (one TCG stall decides
/// it); with 5000 it is the 50th, so the C ABI's p99 can be told from noise.
const LAT_ITERS: u32 = 5000;
/// An MTU-4096 RDMA WRITE MIDDLE frame: Ethernet, IPv4, UDP, BTH, payload, ICRC.
const ROCE_FRAME: usize = 14 + 20 + 8 + 12 + 4096 + 4;
const MIB: f64 = (1u64 << 20) as f64;
/// `netbench send`'s modes, each a row: the sender's work per frame, and the
/// row's name (before the frame size; no commas, for the CSV). The first is
/// the raw frame limit the table always had.
const LIMITS: [(&str, &str); 3] =
    [("copy", "raw frame limit"), ("prebuilt", "raw wire limit with prebuilt frames"), ("icrc", "copy + ICRC limit")];
/// Each netbench run's length.
const NETBENCH_MS: u64 = 2000;
/// Echoes per ping run between the two appliances, and their interval (ms).
const PINGS: u32 = 100;
const PING_INTERVAL_MS: u32 = 10;
/// The ping row's name (no commas, for the CSV).
const PING_ROW: &str = "wire ping: half round trip (appliance <-> appliance)";

/// Which host programs drive an appliance.
#[derive(Clone, Copy, PartialEq)]
enum Host {
    /// Our Rust tools (`write_bw`, ...) on the `verbs` library.
    Rust,
    /// Debian's `ib_write_bw`, ... unmodified, over our libibverbs.
    CAbi,
}

/// One end of a perftest run.
enum End {
    Linux(LinuxPeer),
    /// An appliance driven through its ring by host programs, and the
    /// host port a Linux client's guestfwd reaches (or a tool client dials).
    Appliance {
        app: Appliance,
        ring: Ivshmem,
        port: u16,
        host: Host,
    },
}

/// Test `test`'s host program on `ring`; `args` are perftest's own options.
fn tool(host: Host, test: &str, ring: &Path, args: &str) -> Res<Child> {
    Ok(match host {
        Host::Rust => tests::tool::spawn(test, ring, args)?,
        Host::CAbi => tests::tool::spawn_unmodified(&format!("ib_{test}"), ring, &format!("-d rxe0 -F {args}"))?,
    })
}

fn finish(child: Child) -> Res<String> {
    match tests::tool::finish(child, RUN)? {
        (true, out) => Ok(out),
        (false, out) => Err(format!("host tool failed or ran too long:\n{out}").into()),
    }
}

/// Runs that failed and were run again, reported under the tables.
static REPEATED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Attempts per measurement: a run that fails is logged and run again, at most twice more.
const ATTEMPTS: usize = 3;

/// One perftest run (see [`perftest_once`]), repeated when it fails.
fn perftest(server: &mut End, client: &mut End, test: &str, args: &str) -> Res<String> {
    let mut attempt = 1;
    loop {
        match perftest_once(server, client, test, args) {
            Err(e) if attempt < ATTEMPTS => {
                REPEATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                println!("ib_{test} {args}: attempt {attempt} failed, running it again:\n{e}");
                attempt += 1;
            }
            result => return result,
        }
    }
}

/// One perftest run of `test` (`write_bw`, `send_lat`, ...); the client's output.
fn perftest_once(server: &mut End, client: &mut End, test: &str, args: &str) -> Res<String> {
    let linux_args = format!("-d rxe0 -F {args}");
    match (server, client) {
        (End::Linux(s), c) => {
            s.spawn_bg(&format!("ib_{test} {linux_args}"), "/tmp/pt.log")?;
            s.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(30))?;
            let out = match c {
                End::Linux(c) => {
                    let (status, out) = c.status(&format!("ib_{test} {linux_args} {}", s.wire_ip()), RUN)?;
                    if status != 0 {
                        return Err(format!("ib_{test} client failed:\n{out}").into());
                    }
                    out
                }
                End::Appliance { ring, host, .. } => {
                    finish(tool(*host, test, &ring.path, &format!("{args} -p {} 127.0.0.1", s.host_port()))?)?
                }
            };
            let server_out = s.finish_bg("/tmp/pt.log", RUN)?;
            if !server_out.contains("exit=0") {
                return Err(format!("ib_{test} server failed:\n{server_out}").into());
            }
            Ok(out)
        }
        (End::Appliance { ring, port, host, .. }, c) => {
            // perftest's server listens on every address; ours binds where told.
            let bind = if *host == Host::Rust { " --bind 127.0.0.1" } else { "" };
            let server = tool(*host, test, &ring.path, &format!("{args} -p {port}{bind}"))?;
            // perftest's client does not retry a refused connection.
            if !tests::tool::wait_listening(*port, Duration::from_secs(60)) {
                let out = finish(server).err().map(|e| e.to_string()).unwrap_or_default();
                return Err(format!("ib_{test}: the host server never listened on {port}:\n{out}").into());
            }
            let out = match c {
                End::Linux(c) => {
                    let (status, out) =
                        c.status(&format!("ib_{test} {linux_args} -p {MGMT_GUEST_PORT} {MGMT_HOST_IP}"), RUN)?;
                    if status != 0 {
                        let host = match finish(server) {
                            Ok(o) => o,
                            Err(e) => e.to_string(),
                        };
                        return Err(format!("ib_{test} client failed:\n{out}\nthe host's server:\n{host}").into());
                    }
                    out
                }
                End::Appliance { ring: r2, host: h2, .. } => {
                    finish(tool(*h2, test, &r2.path, &format!("{args} -p {port} 127.0.0.1"))?)?
                }
            };
            finish(server)?;
            Ok(out)
        }
    }
}

/// One pair's figures: WRITE Gb/s per size, 64 B WRITE Mmsg/s, SEND latency median and p99 (µs).
#[derive(Clone, Debug, Default)]
struct Figures {
    gbps: Vec<f64>,
    mpps: f64,
    lat_median: f64,
    lat_p99: f64,
}

/// Every run's figures of one pair and kind of host program, in run order, in
/// [`Figures`]' order: WRITE Gb/s per size, 64 B Mmsg/s, SEND 2 B median, p99.
#[derive(Clone, Debug, Default)]
struct Samples(Vec<Vec<f64>>);

impl Samples {
    fn push(&mut self, cell: usize, x: f64) {
        if self.0.len() <= cell {
            self.0.resize(cell + 1, Vec::new());
        }
        self.0[cell].push(x);
    }

    fn figures(&self) -> Figures {
        let med = |cell: usize| median(&mut self.0.get(cell).cloned().unwrap_or_default());
        Figures {
            gbps: (0..BW.len()).map(med).collect(),
            mpps: med(BW.len()),
            lat_median: med(BW.len() + 1),
            lat_p99: med(BW.len() + 2),
        }
    }

    /// Per cell, the median of the runs' own ratios `other / self` (run k of
    /// one against run k of the other), with the lowest and highest of them.
    fn paired_ratios(&self, other: &Samples) -> Vec<(f64, f64, f64)> {
        self.0
            .iter()
            .zip(&other.0)
            .map(|(mine, theirs)| {
                let mut r: Vec<f64> = mine.iter().zip(theirs).map(|(m, t)| t / m).collect();
                let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (median(&mut r), lo, hi)
            })
            .collect()
    }
}

/// The pairs `main` measures, counting each kind of host program on a pair
/// once; each is [`STEPS`] perftest runs per round.
const PAIRS: usize = 7;
/// perftest runs per pair and round: each WRITE size, then SEND latency.
const STEPS: usize = BW.len() + 1;

/// Measures one pair `runs` times with each kind of host program in `hosts`
/// (set on whichever end is an appliance), interleaved: every run takes each
/// kind once, the order alternating from run to run, so the machine's drift
/// over the minutes a pair takes falls on every kind alike and a ratio of
/// run k to run k compares like with like. Returns each kind's samples.
fn measure(
    label: &str,
    server: &mut End,
    client: &mut End,
    hosts: &[Host],
    runs: usize,
    progress: &mut Progress,
) -> Res<Vec<Samples>> {
    let mut samples = vec![Samples::default(); hosts.len()];
    let order = |k: usize| -> Vec<usize> {
        let mut o: Vec<usize> = (0..hosts.len()).collect();
        if k % 2 == 1 {
            o.reverse();
        }
        o
    };
    for (i, (size, iters)) in BW.into_iter().enumerate() {
        for k in 0..runs {
            for h in order(k) {
                set_host(server, hosts[h]);
                set_host(client, hosts[h]);
                let name = host_label(label, hosts[h]);
                progress.step(&format!("{name}: WRITE {size} B, run {}/{runs}", k + 1));
                let out = perftest(server, client, "write_bw", &format!("-x 1 -s {size} -n {iters}"))?;
                let row = perftest_row(&out, size, iters).ok_or(format!("no result row:\n{out}"))?;
                // peak MB/s, average MB/s (MB = 2^20), Mpps
                samples[h].push(i, row[1] * MIB * 8.0 / 1e9);
                if size == 64 {
                    samples[h].push(BW.len(), row[2]);
                }
            }
        }
        for (h, s) in samples.iter().enumerate() {
            let g = median(&mut s.0[i].clone());
            println!("{:<34} WRITE {size:>6} B: {g:>8.4} Gb/s", host_label(label, hosts[h]));
        }
    }
    for k in 0..runs {
        for h in order(k) {
            set_host(server, hosts[h]);
            set_host(client, hosts[h]);
            progress.step(&format!("{}: SEND 2 B latency, run {}/{runs}", host_label(label, hosts[h]), k + 1));
            let out = perftest(server, client, "send_lat", &format!("-x 1 -s 2 -n {LAT_ITERS}"))?;
            let row = perftest_row(&out, 2, LAT_ITERS).ok_or(format!("no result row:\n{out}"))?;
            // min, max, typical, average, stdev, 99%, 99.9%
            samples[h].push(BW.len() + 1, row[2]);
            samples[h].push(BW.len() + 2, row[5]);
        }
    }
    for (h, s) in samples.iter().enumerate() {
        let f = s.figures();
        println!(
            "{:<34} SEND 2 B latency: median {:.1} us, p99 {:.1} us",
            host_label(label, hosts[h]),
            f.lat_median,
            f.lat_p99
        );
    }
    Ok(samples)
}

/// A row's label: the pair's, marked when Debian's programs drive the appliance.
fn host_label(pair: &str, host: Host) -> String {
    match host {
        Host::Rust => pair.to_string(),
        Host::CAbi => format!("C ABI: {pair}"),
    }
}

fn set_host(end: &mut End, to: Host) {
    if let End::Appliance { host, .. } = end {
        *host = to;
    }
}

/// The C ABI's cost: each appliance pair's figures with Debian's programs
/// over our libibverbs, over the same pair's with our Rust tools, as the
/// median of the runs' paired ratios (run k of one over run k of the other,
/// measured back to back), with the lowest and highest such ratio.
fn cabi_table(md: &mut String, csv: &mut String, pairs: &[(&str, Samples, Samples)], runs: usize) -> Res<()> {
    writeln!(
        md,
        "\nDebian's unmodified ib_write_bw/ib_send_lat over our libibverbs, over our Rust tools on the same pair: \
         the median of {runs} paired runs' ratios (each run measures both back to back, in alternating order), \
         [lowest, highest]. Bandwidth and rate: above 0.90 is within 10%; latency: below 1.10 is.\n"
    )?;
    md.push_str("| pair |");
    for (size, _) in BW {
        write!(md, " WRITE {size} B |")?;
    }
    md.push_str(" 64 B Mmsg/s | SEND 2 B median | p99 |\n|---|");
    md.push_str(&"---:|".repeat(BW.len() + 3));
    md.push('\n');
    csv.push_str("\nC ABI over Rust tools (median of paired ratios)");
    for (size, _) in BW {
        write!(csv, ",write_{size}_gbps,lowest,highest")?;
    }
    csv.push_str(",write_64_mpps,lowest,highest,send_lat_median_us,lowest,highest,send_lat_p99_us,lowest,highest\n");
    for (pair, rust, cabi) in pairs {
        write!(md, "| {pair} |")?;
        write!(csv, "{pair}")?;
        for (x, lo, hi) in rust.paired_ratios(cabi) {
            write!(md, " {x:.2} [{lo:.2}, {hi:.2}] |")?;
            write!(csv, ",{x:.4},{lo:.4},{hi:.4}")?;
        }
        md.push('\n');
        csv.push('\n');
    }
    Ok(())
}

fn wire(mac: &str, local: u16, peer: u16) -> Nic {
    let nic = Nic { host_mtu: Some(MTU), ..Nic::new(mac, local, peer) };
    if deep_wire() { nic.deep() } else { nic }
}

/// The run's wire, for its header and notes.
fn wire_kind() -> String {
    if deep_wire() {
        format!("UDP, each end's receive buffer {} KiB", tests::udp_wire::DEEP_BUFFER >> 10)
    } else {
        "UDP, QEMU's own sockets".into()
    }
}

/// Whether the wires are deep (see the module's doc): unless `BENCH_WIRE=qemu`,
/// where the QEMU takes a socket.
fn deep_wire() -> bool {
    std::env::var("BENCH_WIRE").as_deref() != Ok("qemu")
        && tests::udp_wire::qemu_takes_connected_socket(&tests::qemu_binary())
}

/// A Linux peer at `ip` on the wire; its guest clients reach host port `gp`.
fn linux(nic: Nic, ip: &str, gp: Option<u16>) -> Res<LinuxPeer> {
    let mut o = PeerOptions::new(nic, ip);
    o.mtu = Some(MTU);
    if let Some(gp) = gp {
        let relay = std::env::current_exe()?.with_file_name("tcp-stdio");
        if !relay.exists() {
            return Err(format!("{} is missing: cargo build --release -p tests --bins", relay.display()).into());
        }
        o.guest_fwd_cmd = Some(format!("{} {gp}", relay.display()));
    }
    Ok(LinuxPeer::start(o)?)
}

fn appliance(nic: Nic, ip: &str, tag: &str) -> Res<End> {
    let ring = Ivshmem::temp(tag, REGION);
    let mut app = Appliance::boot(Options {
        nic: Some(nic),
        append: format!("ip={ip}/24"),
        ivshmem: Some(ring.clone()),
        cmd_timeout: RUN,
        ..Options::default()
    })?;
    app.cmd("rdma link add rxe0 type rxe netdev eth0")?;
    Ok(End::Appliance { app, ring, port: free_tcp_port(), host: Host::Rust })
}

/// What a netbench mode reached: medians of frames/s and Gb/s received.
#[derive(Clone, Copy, Debug)]
struct Limit {
    fps: f64,
    gbps: f64,
}

/// Each [`LIMITS`] mode's frames per second and Gb/s received at
/// `size`-byte frames (medians of `runs`; each run takes every mode once,
/// the order alternating), and the CRC path the `icrc` mode used.
fn limits(
    tx: &mut Appliance,
    rx: &mut Appliance,
    rx_ip: &str,
    size: usize,
    runs: usize,
    progress: &mut Progress,
) -> Res<(Vec<Limit>, String)> {
    let mut samples = vec![(vec![], vec![]); LIMITS.len()];
    let mut crc_path = String::from("?");
    for k in 0..runs {
        let mut order: Vec<usize> = (0..LIMITS.len()).collect();
        if k % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (mode, label) = LIMITS[i];
            progress.step(&format!("{label} at {size} B, run {}/{runs}", k + 1));
            rx.cmd("netbench reset")?;
            let sent = tx.cmd(&format!("netbench send {rx_ip} {size} {NETBENCH_MS} {mode}"))?;
            if let Some(path) = sent.split("ICRC per frame, by ").nth(1).and_then(|t| t.split(')').next()) {
                crc_path = path.to_string();
            }
            std::thread::sleep(Duration::from_millis(100));
            let out = rx.cmd("netbench rx")?;
            let got = number_after(&out, "rx:").ok_or(format!("unexpected output: {out}"))?;
            let secs = NETBENCH_MS as f64 / 1000.0;
            samples[i].0.push(got / secs);
            samples[i].1.push(got * size as f64 * 8.0 / secs / 1e9);
        }
    }
    let limits = samples.iter_mut().map(|(f, g)| Limit { fps: median(f), gbps: median(g) }).collect();
    Ok((limits, crc_path))
}

/// The wire's ping round trip between the two appliances (the console's
/// `ping`, timed by the pinging appliance): every reply's, in µs, over
/// `runs` runs of [`PINGS`].
fn ping_rtts(tx: &mut Appliance, rx_ip: &str, runs: usize, progress: &mut Progress) -> Res<Vec<f64>> {
    let mut rtts = Vec::new();
    for k in 0..runs {
        progress.step(&format!("ping appliance <-> appliance, run {}/{runs}", k + 1));
        let out = tx.cmd(&format!("ping {rx_ip} -c {PINGS} -i {PING_INTERVAL_MS}"))?;
        let times = ping_times_ms(&out);
        if times.is_empty() {
            return Err(format!("ping: no replies:\n{out}").into());
        }
        rtts.extend(times.iter().map(|ms| ms * 1000.0));
    }
    Ok(rtts)
}

fn main() -> Res<()> {
    // Judged at the end: was anything else using the CPU meanwhile?
    let load = tests::load::Watch::start();
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    if !LinuxPeer::available() {
        return Err("the Linux peer is not built: make linux-peer".into());
    }
    let accel = std::env::var("APPLIANCE_ACCEL").unwrap_or_else(|_| "tcg".into());
    println!(
        "perftest on a {MTU}-byte wire (RoCE MTU 4096; {}), medians of {runs} runs; appliances on {accel}, Linux on tcg",
        wire_kind()
    );
    let mut rows: Vec<(String, Figures)> = Vec::new();
    // Each appliance pair with the Rust tools and with the C ABI, for the cost table.
    let mut cabi: Vec<(&str, Samples, Samples)> = Vec::new();
    let mut progress = Progress::new("bench-perftest", (PAIRS * STEPS + LIMITS.len() + 1) * runs);
    let p = &mut progress;
    let both = [Host::Rust, Host::CAbi];
    let mut record = |rows: &mut Vec<(String, Figures)>, label: &'static str, samples: Vec<Samples>| {
        for (h, s) in both.iter().zip(&samples) {
            rows.push((host_label(label, *h), s.figures()));
        }
        if let [rust, c] = &samples[..] {
            cabi.push((label, rust.clone(), c.clone()));
        }
    };
    {
        let (p1, p2) = (free_udp_port(), free_udp_port());
        let mut a = linux(wire("52:54:00:00:01:03", p1, p2), "10.0.0.3/24", None)?;
        let mut b = linux(wire("52:54:00:00:01:04", p2, p1), "10.0.0.4/24", None)?;
        a.wait_ready()?;
        b.wait_ready()?;
        let label = "Linux <-> Linux";
        let s = measure(label, &mut End::Linux(a), &mut End::Linux(b), &[Host::Rust], runs, p)?;
        rows.push((label.to_string(), s[0].figures()));
    }
    {
        let (p1, p2) = (free_udp_port(), free_udp_port());
        let mut a = appliance(wire("52:54:00:00:00:01", p1, p2), "10.0.0.1", "bench-a")?;
        let End::Appliance { port, .. } = &a else { unreachable!() };
        let mut l = linux(wire("52:54:00:00:01:03", p2, p1), "10.0.0.3/24", Some(*port))?;
        l.wait_ready()?;
        let mut l = End::Linux(l);
        let label = "appliance client, Linux server";
        record(&mut rows, label, measure(label, &mut l, &mut a, &both, runs, p)?);
        let label = "Linux client, appliance server";
        record(&mut rows, label, measure(label, &mut a, &mut l, &both, runs, p)?);
    }
    let (limits, crc_path, ping);
    {
        let (p1, p2) = (free_udp_port(), free_udp_port());
        let mut a = appliance(wire("52:54:00:00:00:01", p1, p2), "10.0.0.1", "bench-a")?;
        let mut b = appliance(wire("52:54:00:00:00:02", p2, p1), "10.0.0.2", "bench-b")?;
        let label = "appliance <-> appliance";
        record(&mut rows, label, measure(label, &mut a, &mut b, &both, runs, p)?);
        let (End::Appliance { app: tx, .. }, End::Appliance { app: rx, .. }) = (&mut a, &mut b) else { unreachable!() };
        (limits, crc_path) = self::limits(tx, rx, "10.0.0.2", ROCE_FRAME, runs, p)?;
        for ((_, label), l) in LIMITS.iter().zip(&limits) {
            println!("{label} at {ROCE_FRAME} B: {:.0} frames/s, {:.3} Gb/s", l.fps, l.gbps);
        }
        let rtts = ping_rtts(tx, "10.0.0.2", runs, p)?;
        ping = Summary::of(&rtts).ok_or("ping: no replies")?;
        println!("ping appliance <-> appliance: median {:.1} us, p99 {:.1} us round trip", ping.median, ping.p99);
    }
    // The table lists the Rust tools' rows first, then the C ABI's, as before.
    rows.sort_by_key(|(label, _)| label.starts_with("C ABI"));

    let base = rows[0].1.clone();
    let mut md = String::from("| pair |");
    let mut csv = String::from("pair");
    for (size, _) in BW {
        write!(md, " WRITE {size} B Gb/s | ratio |")?;
        write!(csv, ",write_{size}_gbps,ratio")?;
    }
    md.push_str(" 64 B Mmsg/s | ratio | SEND 2 B median us | ratio | p99 us | ratio |\n|---|");
    csv.push_str(",write_64_mpps,ratio,send_lat_median_us,ratio,send_lat_p99_us,ratio\n");
    md.push_str(&"---:|---:|".repeat(BW.len() + 3));
    md.push('\n');
    for (label, f) in &rows {
        write!(md, "| {label} |")?;
        write!(csv, "{label}")?;
        let cells = f
            .gbps
            .iter()
            .zip(&base.gbps)
            .map(|(x, b)| (*x, x / b, 4))
            .chain([(f.mpps, f.mpps / base.mpps, 4), (f.lat_median, f.lat_median / base.lat_median, 1)])
            .chain([(f.lat_p99, f.lat_p99 / base.lat_p99, 1)]);
        for (x, r, digits) in cells {
            write!(md, " {x:.digits$} | {r:.2} |")?;
            write!(csv, ",{x:.5},{r:.4}")?;
        }
        md.push('\n');
        csv.push('\n');
    }
    // The wire's ceilings for MTU-sized frames: the 4 KiB and 64 KiB columns.
    for ((_, label), l) in LIMITS.iter().zip(&limits) {
        write!(md, "| {label} ({ROCE_FRAME} B frames) | | |")?;
        write!(csv, "{label} ({ROCE_FRAME} B frames),,")?;
        for b in &base.gbps[1..] {
            write!(md, " {:.4} | {:.2} |", l.gbps, l.gbps / b)?;
            write!(csv, ",{:.5},{:.4}", l.gbps, l.gbps / b)?;
        }
        md.push_str(&" | |".repeat(3));
        csv.push_str(&",,".repeat(3));
        md.push('\n');
        csv.push('\n');
    }
    // The wire's own latency: half the ping's round trip, as perftest's
    // send_lat reports half of its round trip.
    let (ping_half, ping_half_p99) = (ping.median / 2.0, ping.p99 / 2.0);
    write!(md, "| {PING_ROW} |")?;
    write!(csv, "{PING_ROW}")?;
    md.push_str(&" | |".repeat(BW.len() + 1));
    csv.push_str(&",,".repeat(BW.len() + 1));
    for (x, b) in [(ping_half, base.lat_median), (ping_half_p99, base.lat_p99)] {
        write!(md, " {x:.1} | {:.2} |", x / b)?;
        write!(csv, ",{x:.5},{:.4}", x / b)?;
    }
    md.push('\n');
    csv.push('\n');
    let figures = |label: &str| rows.iter().find(|(l, _)| l == label).map(|(_, f)| f);
    let app = figures("appliance <-> appliance");
    let app_64k = app.map_or(f64::NAN, |f| f.gbps[BW.len() - 1]);
    let share = |l: &Limit| 100.0 * app_64k / l.gbps;
    writeln!(
        md,
        "\nThe wire: {}. The limits are netbench between the two appliances at {ROCE_FRAME}-byte frames (an MTU-4096 WRITE's): \
         {:.0} frames/s with a copy per frame, {:.0} prebuilt (headers written, no per-byte work), {:.0} with a \
         copy and an ICRC per frame (by {crc_path}). appliance<->appliance 64 KiB WRITE reaches {:.1}% of the raw \
         frame limit, {:.1}% of the raw wire limit and {:.1}% of the copy + ICRC limit. The ping row is half the \
         round trip of the console's `ping` between the two appliances ({} runs of {PINGS}, {PING_INTERVAL_MS} ms \
         apart; median round trip {:.1} us, p99 {:.1} us), as perftest's SEND latency is half its round trip: \
         appliance<->appliance SEND 2 B is {:.2}x it. Ratios: bandwidth and message rate over \
         Linux<->Linux (higher is better), latency over Linux<->Linux (lower is better).",
        wire_kind(),
        limits[0].fps,
        limits[1].fps,
        limits[2].fps,
        share(&limits[0]),
        share(&limits[1]),
        share(&limits[2]),
        runs,
        ping.median,
        ping.p99,
        app.map_or(f64::NAN, |f| f.lat_median / ping_half),
    )?;
    cabi_table(&mut md, &mut csv, &cabi, runs)?;
    let repeated = REPEATED.load(std::sync::atomic::Ordering::Relaxed);
    if repeated > 0 {
        writeln!(md, "\n{repeated} perftest run(s) failed and were run again (the log shows each failure).")?;
    }
    println!("\n{md}");
    write_tables("perftest", &md, &csv, &load)?;
    let groups: Vec<String> = BW.iter().map(|(s, _)| format!("WRITE {s} B")).collect();
    let mut series: Vec<(&str, Vec<f64>)> = rows.iter().map(|(l, f)| (l.as_str(), f.gbps.clone())).collect();
    // The limits apply to MTU-sized frames: none at 64 B.
    for ((_, label), l) in LIMITS.iter().zip(&limits) {
        series.push((label, vec![0.0, l.gbps, l.gbps]));
    }
    write_chart(
        "perftest",
        "RDMA WRITE bandwidth (ib_write_bw / write_bw, Gb/s, higher is faster)",
        "Gb/s",
        &groups,
        &series,
    );
    let groups = vec!["SEND 2 B median".to_string(), "SEND 2 B p99".to_string()];
    let mut series: Vec<(&str, Vec<f64>)> =
        rows.iter().map(|(l, f)| (l.as_str(), vec![f.lat_median, f.lat_p99])).collect();
    series.push((PING_ROW, vec![ping_half, ping_half_p99]));
    write_chart(
        "perftest-latency",
        "SEND 2 B latency and the wire's ping (us, lower is faster)",
        "us",
        &groups,
        &series,
    );
    println!("written: target/bench/perftest.md, target/bench/perftest.csv");
    Ok(())
}
