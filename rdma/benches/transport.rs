//! Host benchmark of the rxe transport: two transports joined by the simulated wire
//! without faults, one core. For SEND and RDMA WRITE at 64 B, 4 KiB and 64 KiB (path
//! MTU 4096), messages per second, payload Gb/s, and wall time per frame on the wire
//! (requests and ACKs, both transports and the simulator together: building, ICRC,
//! parsing, the state machines and the payload copies). Then the cost of scale: 64 B
//! WRITEs spread over 1, 100 and 1000 active QP pairs, wall time per frame (the
//! transport's poll visits the QPs with work, and QPN lookup is an index, so this
//! should stay flat). Each figure is the median of five timed runs. The output is
//! Markdown tables that name the ICRC's CRC path:
//! PCLMULQDQ folding where the CPU has it (`RDMA_ICRC=table` measures the table).
//! `cargo bench -p rdma --bench transport` (`-- 64` measures only the message
//! sizes given, and skips the scale table unless 64 is among them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant as WallClock;

use rdma::core::port::IbMtu;
use rdma::rxe::qp::QpCap;
use rdma::rxe::sim::{self, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Duration;
use rdma::rxe::wr::{RecvWr, SendWr, Sge, WrOpcode};
use rdma::wire::icrc::Path;

/// This thread's time on a CPU so far, in ns: the first field of
/// `/proc/thread-self/schedstat` (Linux's sched_info). `None` where there is none.
fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

/// Wall and CPU nanoseconds of every timed run, for the share of the wall
/// time the benchmark had a CPU.
static WALL_NS: AtomicU64 = AtomicU64::new(0);
static CPU_NS: AtomicU64 = AtomicU64::new(0);

/// Times a run by this thread's CPU time, which other processes on a busy
/// machine do not inflate (wall time where Linux does not give it).
struct Clock {
    wall: WallClock,
    cpu: Option<u64>,
}

impl Clock {
    fn start() -> Clock {
        Clock { wall: WallClock::now(), cpu: cpu_ns() }
    }

    /// Seconds on a CPU since the start (wall seconds without schedstat).
    fn secs(&self) -> f64 {
        let wall = self.wall.elapsed().as_nanos() as u64;
        let cpu = self.cpu.zip(cpu_ns()).map(|(a, b)| b.saturating_sub(a));
        WALL_NS.fetch_add(wall, Ordering::Relaxed);
        CPU_NS.fetch_add(cpu.unwrap_or(wall), Ordering::Relaxed);
        cpu.unwrap_or(wall) as f64 / 1e9
    }
}

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
    let start = Clock::start();
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
        secs: start.secs(),
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
    let start = Clock::start();
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
    start.secs() * 1e9 / (sim.wire.stats.sent - frames_before) as f64
}

/// Timed runs of each case; the table gives the median run.
const RUNS: usize = 5;

/// The median by `key` of `runs` results of `f`: this machine's speed drifts
/// from one run to the next, and CPU time is read in scheduler ticks.
fn median_of<T>(runs: usize, mut f: impl FnMut() -> T, key: impl Fn(&T) -> f64) -> T {
    let mut results: Vec<T> = (0..runs).map(|_| f()).collect();
    results.sort_by(|a, b| key(a).total_cmp(&key(b)));
    results.swap_remove(runs / 2)
}

/// The CRC path the ICRC takes in this run: `$RDMA_ICRC` (`table` or
/// `pclmulqdq`) when set, else PCLMULQDQ folding where the CPU has it.
fn choose_icrc_path() -> Path {
    let wanted = match std::env::var("RDMA_ICRC") {
        Ok(name) => name.parse().unwrap_or_else(|()| panic!("RDMA_ICRC={name}: expected table or pclmulqdq")),
        Err(_) if Path::Clmul.available() => Path::Clmul,
        Err(_) => Path::Table,
    };
    assert!(Path::set_best(wanted), "this CPU cannot run the {wanted} path");
    Path::best()
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent; keep that quick.
    if !std::env::args().any(|a| a == "--bench") {
        println!("transport bench: skipped (run with cargo bench)");
        return;
    }
    let path = choose_icrc_path();
    let how = match path {
        Path::Clmul => "PCLMULQDQ folding",
        Path::Table => "crc32fast's table",
    };
    let clock = if cpu_ns().is_some() { "this thread's CPU time (schedstat)" } else { "wall time" };
    println!(
        "Transport through the simulated wire without faults, path MTU 4096, on one thread timed by {clock}, \
         so rates are per core; ICRC by {path} ({how}; RDMA_ICRC=table|pclmulqdq picks one).\n"
    );
    // Frames per message: the data frames, and the ACKs (coalesced: fewer
    // than one per message when small messages come in bursts).
    println!(
        "| op | message | msgs/s | Gb/s per core | ns per frame | frames per message | ns per message | retransmitted |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut headline = Vec::new();
    // Message sizes named on the command line, else all.
    let only: Vec<u32> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    let wanted = |size: u32| only.is_empty() || only.contains(&size);
    for (name, op) in [("SEND", WrOpcode::Send), ("WRITE", WrOpcode::RdmaWrite)] {
        for size in [64u32, 4096, 65536].into_iter().filter(|&s| wanted(s)) {
            // About the same number of frames for every size.
            let msgs = (400_000 / u64::from(size.div_ceil(4096))).max(2_000);
            run(op, size, msgs / 10); // warm-up
            let r = median_of(RUNS, || run(op, size, msgs), |r| r.secs);
            let rate = r.msgs as f64 / r.secs;
            let gbps = rate * f64::from(size) * 8.0 / 1e9;
            let ns_frame = r.secs * 1e9 / r.frames as f64;
            let frames_per_msg = r.frames as f64 / r.msgs as f64;
            let ns_msg = r.secs * 1e9 / r.msgs as f64;
            println!(
                "| {name} | {size} B | {rate:.0} | {gbps:.2} | {ns_frame:.0} | {frames_per_msg:.2} | {ns_msg:.0} | {} |",
                r.retransmitted
            );
            match (op, size) {
                (WrOpcode::RdmaWrite, 65536) => headline.push(format!("64 KiB WRITE {gbps:.1} Gb/s per core")),
                (_, 64) => headline.push(format!("64 B {name} {ns_frame:.0} ns per frame ({ns_msg:.0} per message)")),
                _ => {}
            }
        }
    }
    // All QPs busy, and one busy among many idle ones (what a poll that
    // visited every QP would pay for).
    let scales: &[(u32, usize)] =
        if wanted(64) { &[(1, 1), (100, 100), (1000, 1000), (100, 1), (1000, 1)] } else { &[] };
    if !scales.is_empty() {
        println!("\n64 B WRITEs spread over QP pairs, two in flight on each active one:\n");
        println!("| QP pairs | active | ns per frame |");
        println!("|---:|---:|---:|");
    }
    for &(qps, active) in scales {
        scale(qps, active, 20_000); // warm-up
        let ns = median_of(RUNS, || scale(qps, active, 200_000), |&ns| ns);
        println!("| {qps} | {active} | {ns:.0} |");
        if qps == active as u32 {
            headline.push(format!("{active} active QP{} {ns:.0} ns per frame", if active == 1 { "" } else { "s" }));
        }
    }
    println!("\nICRC by {path}: {}.", headline.join(", "));
    let (wall, cpu) = (WALL_NS.load(Ordering::Relaxed), CPU_NS.load(Ordering::Relaxed));
    println!(
        "The benchmark had a CPU {:.0}% of its wall time{}.",
        100.0 * cpu as f64 / wall.max(1) as f64,
        if cpu < wall * 9 / 10 {
            " (a busy machine: CPU time keeps the figures, a cache shared with others does not)"
        } else {
            ""
        }
    );
}
