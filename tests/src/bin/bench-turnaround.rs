//! One guest's frame turnaround: a host process on the guest's UDP wire
//! (`tests::echo::Wire`, the other end of QEMU's socket netdev) sends ICMP
//! echo requests to it and times each reply, for an appliance and for the
//! Linux peer measured the same way in the same run. Each request goes out
//! a gap after the previous reply, so the guest is idle (halted) when it
//! arrives: the turnaround includes waking up, as a lone request's does.
//! The appliance's own profile (`perf reset` before each round, `perf`
//! after) says where its part of the time goes: waking, the NIC, the stack,
//! the reply; the rest of the round trip is outside the guest (QEMU's socket
//! and device model, delivering the interrupt, the host's UDP).
//!
//! Usage: bench-turnaround [runs] [echoes per run] [gap us]; each run is
//! one round per guest, the order alternating. Writes
//! target/bench/turnaround.{md,csv,png}. Needs the Linux peer
//! (`make linux-peer`).

#![deny(unsafe_code)]

use std::fmt::Write as _;
use std::time::Duration;

use tests::echo::{Endpoint, Summary, Wire};
use tests::progress::Progress;
use tests::report::{Span, perf_spans, write_chart, write_tables};
use tests::{Appliance, LinuxPeer, Nic, Options, PeerOptions, free_udp_port};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The host process's end of each wire.
const HOST: Endpoint = Endpoint { mac: [0x02, 0, 0, 0, 0, 0xfe], ip: [10, 0, 0, 254] };
/// ping's default payload.
const PAYLOAD: usize = 56;
/// Echoes before each guest's measured rounds (ARP settled, caches warm).
const WARM_UP: u32 = 20;
/// How long a reply may take before the echo counts as lost.
const REPLY_LIMIT: Duration = Duration::from_secs(1);

/// A guest under measurement and the host's end of its wire.
struct Guest {
    name: &'static str,
    wire: Wire,
    at: Endpoint,
    /// ICMP identifier of this guest's echoes.
    id: u16,
    seq: u16,
    rtts_us: Vec<f64>,
    lost: u32,
}

impl Guest {
    fn new(name: &'static str, wire: Wire, ip: [u8; 4], id: u16) -> Res<Guest> {
        let mac = wire.resolve(ip, Duration::from_secs(60))?.ok_or(format!("{name}: no ARP reply"))?;
        Ok(Guest { name, wire, at: Endpoint { mac, ip }, id, seq: 0, rtts_us: Vec::new(), lost: 0 })
    }

    /// `n` echoes `gap` apart; kept unless `warm_up`.
    fn round(&mut self, n: u32, gap: Duration, warm_up: bool) -> Res<()> {
        for _ in 0..n {
            std::thread::sleep(gap);
            self.seq = self.seq.wrapping_add(1);
            match self.wire.echo(self.at, self.id, self.seq, PAYLOAD, REPLY_LIMIT)? {
                Some(rtt) if !warm_up => self.rtts_us.push(rtt.as_secs_f64() * 1e6),
                Some(_) => {}
                None if !warm_up => self.lost += 1,
                None => {}
            }
        }
        Ok(())
    }
}

/// The appliance's profile, summed over its rounds.
#[derive(Default)]
struct Profile {
    spans: Vec<Span>,
    echoes: u64,
}

impl Profile {
    fn add(&mut self, spans: Vec<Span>, echoes: u64) {
        for s in spans {
            match self.spans.iter_mut().find(|x| x.name == s.name) {
                Some(x) => {
                    // Keep the total exact: `us_each` becomes the mean of both.
                    let total = x.total_us() + s.total_us();
                    x.count += s.count;
                    x.ms += s.ms;
                    x.us_each = if x.count == 0 { 0.0 } else { total / x.count as f64 };
                }
                None => self.spans.push(s),
            }
        }
        self.echoes += echoes;
    }

    /// Per echo: the runs of the first span in `names`, and the
    /// microseconds of all of them together.
    fn per_echo(&self, names: &[&str]) -> (f64, f64) {
        let e = self.echoes.max(1) as f64;
        let us = self.spans.iter().filter(|s| names.contains(&s.name.as_str())).map(|s| s.total_us() / e).sum();
        let first = self.spans.iter().find(|s| names.first() == Some(&s.name.as_str()));
        (first.map_or(0.0, |s| s.count as f64 / e), us)
    }
}

fn main() -> Res<()> {
    let load = tests::load::Watch::start();
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let echoes: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000).max(1);
    let gap = Duration::from_micros(args.next().and_then(|a| a.parse().ok()).unwrap_or(1000));
    if !LinuxPeer::available() {
        return Err("the Linux peer is not built: make linux-peer".into());
    }
    println!(
        "frame turnaround: {runs} runs of {echoes} ICMP echoes ({PAYLOAD} B payload) per guest, {} us apart",
        gap.as_micros()
    );
    let mut progress = Progress::new("bench-turnaround", 2 + 2 * runs);

    // Both guests stay up for the whole run; each has its own wire.
    progress.step("booting the appliance and the Linux peer");
    let (wire_a, wire_l) = (Wire::bind(HOST)?, Wire::bind(HOST)?);
    let (port_a, port_l) = (free_udp_port(), free_udp_port());
    let mut linux =
        LinuxPeer::start(PeerOptions::new(Nic::new("52:54:00:00:01:03", port_l, wire_l.port()?), "10.0.0.3/24"))?;
    let mut app = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:00:01", port_a, wire_a.port()?)),
        append: "ip=10.0.0.1/24".into(),
        ..Options::default()
    })?;
    wire_a.connect(port_a)?;
    wire_l.connect(port_l)?;
    linux.wait_ready()?;
    progress.step("resolving both guests and warming up");
    let mut guests = [
        Guest::new("appliance", wire_a, [10, 0, 0, 1], 0x7a01)?,
        Guest::new("Linux guest", wire_l, [10, 0, 0, 3], 0x7a03)?,
    ];
    for g in &mut guests {
        g.round(WARM_UP, gap, true)?;
    }

    let mut profile = Profile::default();
    for k in 0..runs {
        let order: [usize; 2] = if k % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let g = &mut guests[i];
            progress.step(&format!("{}: {echoes} echoes, run {}/{runs}", g.name, k + 1));
            let before = g.rtts_us.len();
            if i == 0 {
                app.cmd("perf reset")?;
            }
            g.round(echoes, gap, false)?;
            if i == 0 {
                let out = app.cmd("perf")?;
                profile.add(perf_spans(&out), (g.rtts_us.len() - before) as u64);
            }
            let s = Summary::of(&g.rtts_us[before..]);
            println!("{:>12}: median {:.1} us", g.name, s.map_or(f64::NAN, |s| s.median));
        }
    }
    drop(linux);

    let sums: Vec<(&Guest, Summary)> = guests
        .iter()
        .map(|g| Summary::of(&g.rtts_us).map(|s| (g, s)).ok_or(format!("{}: no replies", g.name)))
        .collect::<Result<_, _>>()?;
    let linux_median = sums[1].1.median;
    let mut md = String::from(
        "| guest | echoes | lost | min us | p10 us | median us | p90 us | p99 us | mean us | median vs Linux |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut csv = String::from("guest,echoes,lost,min_us,p10_us,median_us,p90_us,p99_us,mean_us,median_ratio\n");
    for (g, s) in &sums {
        let r = s.median / linux_median;
        writeln!(
            md,
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {r:.2} |",
            g.name, s.n, g.lost, s.min, s.p10, s.median, s.p90, s.p99, s.mean
        )?;
        writeln!(
            csv,
            "{},{},{},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{r:.4}",
            g.name, s.n, g.lost, s.min, s.p10, s.median, s.p90, s.p99, s.mean
        )?;
    }

    // Where the appliance's turnaround goes: its spans per echo, and the
    // rest of the mean round trip, spent outside the guest's clock.
    let p = &profile;
    let wake = p.per_echo(&["wake: irq to loop"]);
    let nic_rx = p.per_echo(&["net: irq ack", "rx: virtio ring"]);
    let stack = p.per_echo(&["net: smoltcp"]);
    let reply = p.per_echo(&["nic: doorbell"]);
    let pass = p.per_echo(&["net task"]);
    let other_tasks = p.per_echo(&["verbs pump", "verbs tick", "rdma_cm", "shell, jobs"]);
    let rest = pass.1 - nic_rx.1 - stack.1 - reply.1;
    let in_guest = wake.1 + pass.1 + other_tasks.1;
    let mean = sums[0].1.mean;
    let rows: [(&str, &str, f64, f64); 8] = [
        ("wake-up: interrupt handler to the loop running", "wake: irq to loop", wake.0, wake.1),
        (
            "NIC: interrupt acknowledged, frame taken from the receive ring",
            "net: irq ack; rx: virtio ring",
            nic_rx.0,
            nic_rx.1,
        ),
        ("stack: smoltcp reads the request, answers, queues the reply", "net: smoltcp", stack.0, stack.1),
        ("reply: the device told of it, sent buffers reclaimed", "nic: doorbell", reply.0, reply.1),
        ("the rest of the network pass (RDMA timers, neighbours, events)", "net task less the above", pass.0, rest),
        ("in the guest, in all", "wake; net task; verbs; rdma_cm; shell, jobs", f64::NAN, in_guest),
        (
            "outside the guest: QEMU's socket and device model, interrupt delivery, the host's UDP",
            "",
            f64::NAN,
            mean - in_guest,
        ),
        ("the turnaround (mean round trip)", "", f64::NAN, mean),
    ];
    writeln!(
        md,
        "\nWhere the appliance's turnaround goes: its profile (`perf`) over the measured rounds, per echo \
         (every pass and wake-up in a round, divided by its echoes, so a timer's wake-ups count too; \
         runs: of the first span named), against the mean round trip measured from the host.\n\n\
         | where | perf spans | runs per echo | us per echo | share |\n|---|---|---:|---:|---:|"
    )?;
    csv.push_str("\nappliance profile,perf_spans,runs_per_echo,us_per_echo,share\n");
    for (label, spans, runs_per, us) in rows {
        let runs_md = if runs_per.is_nan() { String::new() } else { format!("{runs_per:.2}") };
        writeln!(md, "| {label} | {spans} | {runs_md} | {us:.1} | {:.0}% |", 100.0 * us / mean)?;
        writeln!(csv, "\"{label}\",\"{spans}\",{runs_md},{us:.2},{:.4}", us / mean)?;
    }
    writeln!(
        md,
        "\nEach echo: an ICMP echo request of {PAYLOAD} B payload from a host process on the guest's UDP wire, \
         sent {} us after the previous reply; {runs} rounds of {echoes} per guest, alternating; \
         percentiles over every echo (nearest rank). Linux: the rdma_rxe peer guest (tests/src/linux.rs), one vCPU, TCG.",
        gap.as_micros()
    )?;
    println!("\n{md}");
    write_tables("turnaround", &md, &csv, &load)?;
    let groups: Vec<String> = ["min", "p10", "median", "p90"].iter().map(|s| s.to_string()).collect();
    let series: Vec<(&str, Vec<f64>)> =
        sums.iter().map(|(g, s)| (g.name, vec![s.min, s.p10, s.median, s.p90])).collect();
    write_chart(
        "turnaround",
        "Frame turnaround: ICMP echo round trip from the wire (us, lower is faster)",
        "us",
        &groups,
        &series,
    );
    println!("written: target/bench/turnaround.md, target/bench/turnaround.csv");
    let _ = app.shutdown();
    Ok(())
}
