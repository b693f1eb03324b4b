//! `make soak`: `SOAK_MINUTES` (30) of mixed traffic on two appliances and a
//! Linux rdma_rxe peer, every wire through the fault relay, then the
//! checks that nothing was left behind.
//!
//! ```text
//!  B 10.0.0.2 eth0 ──relay AB── eth0 10.0.0.1  A  10.0.1.1 eth1 ──relay AL── eth0 10.0.1.3 Linux
//!         rxe0                       rxe0            rxe1                       rxe0
//! ```
//!
//! This process is the host of both appliances' rings. Until the deadline,
//! all at once:
//! - `rc_pingpong -c` between A and B (both directions, every message checked);
//! - `write_bw`, `read_bw`, `atomic_bw`, `send_bw` between A and B, and now
//!   and then a `write_bw` pair SIGKILLed mid-run, whose ring contexts the
//!   firmware must reclaim when their lease runs out;
//! - against Linux (A's rxe1): `ibv_rc_pingpong -c` and perftest's
//!   `ib_write_bw`, `ib_read_bw`, `ib_atomic_bw`, `ib_send_bw` against our
//!   tools, each side serving in turn;
//! - QP and MR churn: a child process (this binary again,
//!   `soak_churn_child`) that opens both rings and, per iteration, creates a
//!   PD, MRs, CQs and QPs on both, connects a QP pair, WRITEs, READs back and
//!   fetch-adds with the data checked, creates and drops spare QPs, and tears
//!   it all down; every other run is SIGKILLed after a few iterations.
//!
//! Afterwards: every ring slot free, no QP but QP1 on any device (so none
//! stuck in SQD or ERR), the heap back to its level before the traffic
//! (exact bytes from `mem -b`, within [`HEAP_SLACK`]), and the counters of
//! both appliances and Linux related to each other and to what the relays
//! did (see [`check_counters`] for which relations are exact and which only
//! inequalities). A summary table is printed; any failed check fails the
//! test, naming it.

#![deny(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tests::relay::{Faults, Relay, Rng, udp_socket};
use tests::report::{counter, counters, perftest_row};
use tests::tool;
use tests::{
    Appliance, Ivshmem, LinuxPeer, MGMT_GUEST_PORT, MGMT_HOST_IP, Nic, Options, PeerOptions, free_tcp_port,
    free_udp_port,
};
use verbs::{AccessFlags, Context, Qp, QpInitAttr, SendFlags, SendWr, WrOp};

const REGION: u64 = 64 << 20;
/// A bound on one tool run or one wait that must end; not a timing check.
const RUN: Duration = Duration::from_secs(240);
/// A bound on a reclaim after a kill: the lease (2000 beats of 1 ms) and a
/// generous margin for a busy host.
const RECLAIM: Duration = Duration::from_secs(60);
/// The appliance wire: loss, duplication, reordering and corruption.
const FAULTS_AB: Faults = Faults { drop: 0.02, duplicate: 0.01, reorder: 0.01, corrupt: 0.005, spare_arp: false };
/// The Linux wire: milder, Linux's rxe retransmits on a 67 ms timer; and
/// Linux learns from ARP unchecked (see [`Faults::spare_arp`]).
const FAULTS_AL: Faults = Faults { drop: 0.01, duplicate: 0.005, reorder: 0.005, corrupt: 0.002, spare_arp: true };
/// How much more heap may be in use after the soak than before the traffic:
/// tables that grew to the run's peak (QPN maps, the scheduler's heap, the
/// neighbour tables) keep their capacity. A leak of one small object per
/// operation would pass this in a short run but not in 30 minutes.
const HEAP_SLACK: u64 = 256 << 10;
/// Failures after which the workers stop: enough to see a pattern over a
/// whole run, not a flood; any failure fails the test.
const MAX_FAILURES: usize = 50;
/// The churn's QPs' local ACK timeout, 4.096 us * 2^18 = 1.07 s (x 7
/// retries): a TCG guest on a loaded host can stall longer than
/// rc_pingpong's 14 (67 ms x 7, about half a second), which the tools keep.
const CHURN_TIMEOUT: u8 = 18;
/// `enum ibv_mtu` 3: 1024-byte packets on the 1500-byte wires.
const IBV_MTU_1024: u32 = 3;

fn minutes() -> f64 {
    std::env::var("SOAK_MINUTES").ok().and_then(|m| m.parse().ok()).unwrap_or(30.0)
}

/// What happened, per kind of operation.
struct Tally {
    kinds: Mutex<BTreeMap<String, Kind>>,
    failures: Mutex<Vec<String>>,
    /// When the appliances' clocks started (about): a failure is stamped
    /// with the guest uptime of its moment, to find it in their consoles.
    booted: Instant,
}

#[derive(Default, Clone)]
struct Kind {
    ok: u64,
    failed: u64,
    /// Iterations, messages or objects the successful runs carried.
    units: u64,
    unit: &'static str,
}

impl Tally {
    fn ok(&self, kind: &str, units: u64, unit: &'static str) {
        let mut k = self.kinds.lock().unwrap();
        let e = k.entry(kind.to_string()).or_default();
        e.ok += 1;
        e.units += units;
        e.unit = unit;
    }

    fn new(booted: Instant) -> Tally {
        Tally { kinds: Mutex::default(), failures: Mutex::default(), booted }
    }

    fn fail(&self, kind: &str, why: String) {
        self.kinds.lock().unwrap().entry(kind.to_string()).or_default().failed += 1;
        let at = self.booted.elapsed().as_secs_f64();
        eprintln!("SOAK FAILURE {kind} (guest uptime about {at:.0} s): {why}");
        self.failures.lock().unwrap().push(format!("{kind} (guest uptime about {at:.0} s): {why}"));
    }

    fn failures(&self) -> usize {
        self.failures.lock().unwrap().len()
    }

    fn table(&self) -> String {
        let mut s = format!("{:<34} {:>7} {:>7} {:>12}\n", "operation", "ok", "failed", "units");
        for (name, k) in self.kinds.lock().unwrap().iter() {
            let _ = writeln!(s, "{name:<34} {:>7} {:>7} {:>12} {}", k.ok, k.failed, k.units, k.unit);
        }
        s
    }
}

/// One side of the soak: its ring file.
#[derive(Clone)]
struct Ring {
    name: &'static str,
    path: PathBuf,
}

/// A child process killed (SIGKILL) on drop unless taken back first.
struct Guard(Option<Child>);

impl Guard {
    fn take(&mut self) -> Child {
        self.0.take().expect("taken once")
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits for a tool server to listen on `port`, then runs the client:
/// both outputs, or why the pair failed (a tool still running past [`RUN`]
/// is killed).
fn pair(tool: &str, server: (&Path, String), client: (&Path, String), port: u16) -> Result<(String, String), String> {
    let srv = tool::spawn(tool, server.0, &server.1).map_err(|e| format!("spawn {tool} server: {e}"))?;
    let mut srv = Guard(Some(srv));
    if !tool::wait_listening(port, Duration::from_secs(60)) {
        return Err(format!("{tool} server never listened on {port}"));
    }
    let cli = tool::spawn(tool, client.0, &client.1).map_err(|e| format!("spawn {tool} client: {e}"))?;
    let (cok, cout) = tool::finish(cli, RUN).map_err(|e| e.to_string())?;
    let (sok, sout) = tool::finish(srv.take(), RUN).map_err(|e| e.to_string())?;
    if cok && sok {
        Ok((sout, cout))
    } else {
        Err(format!("{tool}: client ok={cok} server ok={sok}\n--- client ---\n{cout}\n--- server ---\n{sout}"))
    }
}

/// The one way a pingpong ends in error on a lossy wire with nothing
/// wrong: one side has completed every exchange and leaves (its QP
/// destroyed) while the ACK of the other side's last SEND was lost, so
/// that side's retransmissions find no QP: RETRY_EXC_ERR (12) for a SEND
/// (wr_id 2). The finished side received every message, so the SEND
/// itself arrived. Either side can be the one left behind: the server
/// when the client's last ACK is lost, the client when the server's is.
/// Counted, and allowed for in the `retry_exceeded_err` bounds.
const LAST_ACK_LOST_AB: &str = "rc_pingpong last ACK lost (A<->B)";
/// Against Linux, when A's SEND retried out.
const LAST_ACK_LOST_A: &str = "rc_pingpong last ACK lost (A rxe1 retried out)";
/// Against Linux, when Linux's SEND was left behind: Linux's rxe (the
/// peer's 6.1) never ends it in RETRY_EXC_ERR. Its completer does not count
/// a `retry_cnt` of 7 down (`rxe_comp.c`), which `ibv_rc_pingpong` asks
/// for, and measured here (Linux's client sending a 201st SEND to our
/// server that had left after 200) it retransmitted twice, then nothing
/// for 10 s: the program waits forever. See [`finish_linux`].
const LAST_ACK_LOST_LINUX: &str = "rc_pingpong last ACK lost (Linux waits without end)";
/// How long Linux's pingpong may take to end once ours has finished every
/// exchange: its exit and output on a busy TCG guest, with room to spare.
const LINUX_AFTER_OURS: Duration = Duration::from_secs(30);
/// Where the Linux side's program writes its output (`spawn_bg`).
const LINUX_LOG: &str = "/tmp/soak.log";

/// Whether a failed pair is that: one side ok with all `iters` done, the
/// other failed on retries of a SEND. `e` holds `client ok=..` and the
/// client's output, then `--- server ---`, `server ok=..` and the
/// server's output.
fn last_ack_lost(e: &str, iters: u32) -> bool {
    let Some((client, server)) = e.split_once("--- server ---") else { return false };
    let done = format!("{iters} iters in");
    let retried_out = "transport retry counter exceeded (12) for wr_id 2";
    // `pair`'s first line names both sides' status before the client's part.
    (client.contains("client ok=true") && client.contains(&done) && server.contains(retried_out))
        || (e.contains("server ok=true") && server.contains(&done) && client.contains(retried_out))
}

/// The report of a failed run against Linux, in the layout
/// [`last_ack_lost`] reads: `(who, ok, output)` of the client, then of the
/// server.
fn linux_report(client: (&str, bool, &str), server: (&str, bool, &str)) -> String {
    let ((c, cok, cout), (s, sok, sout)) = (client, server);
    format!("client ok={cok} ({c}):\n{cout}\n--- server ---\nserver ok={sok} ({s}):\n{sout}")
}

#[test]
fn a_pingpong_left_behind_is_told_from_a_failure() {
    let retried = "Failed status transport retry counter exceeded (12) for wr_id 2";
    // `pair`'s report, and `linux_traffic`'s.
    let pair = |c: bool, cout: &str, s: bool, sout: &str| {
        format!("rc_pingpong: client ok={c} server ok={s}\n--- client ---\n{cout}\n--- server ---\n{sout}")
    };
    let linux = |c: bool, cout: &str, s: bool, sout: &str| linux_report(("ours", c, cout), ("Linux", s, sout));
    for report in [pair, linux] {
        assert!(last_ack_lost(
            &report(false, &format!("198/200 iters{retried}"), true, "200 iters in 3.08 seconds"),
            200
        ));
        assert!(last_ack_lost(&report(true, "200 iters in 3.08 seconds", false, retried), 200));
        assert!(!last_ack_lost(&report(false, retried, false, retried), 200), "neither finished");
        assert!(!last_ack_lost(&report(false, "no completion", true, "200 iters in 3 s"), 200), "not a retry");
        assert!(!last_ack_lost(&report(true, "100 iters in 3 s", false, retried), 200), "not every exchange");
    }
}

/// rc_pingpong between the appliances, alternating directions and sizes.
fn pingpong_ab(a: &Ring, b: &Ring, deadline: Instant, t: &Tally) {
    let mut round = 0u32;
    while Instant::now() < deadline && t.failures() < MAX_FAILURES {
        let (srv, cli) = if round.is_multiple_of(2) { (b, a) } else { (a, b) };
        let size = [64u32, 4096, 32768][round as usize % 3];
        let iters: u32 = 200;
        let port = free_tcp_port();
        let args = format!("-d rxe0 -g 1 -c -n {iters} -s {size} -p {port}");
        let kind = "rc_pingpong -c A<->B";
        match pair("rc_pingpong", (&srv.path, args.clone()), (&cli.path, format!("{args} 127.0.0.1")), port) {
            Ok((s, c)) if s.contains(&format!("{iters} iters in")) && c.contains(&format!("{iters} iters in")) => {
                t.ok(kind, u64::from(iters), "round trips")
            }
            Ok((s, c)) => t.fail(kind, format!("{} -> {}, {size} B: no result\n{c}\n{s}", cli.name, srv.name)),
            Err(e) if last_ack_lost(&e, iters) => {
                t.ok(kind, u64::from(iters), "round trips");
                t.ok(LAST_ACK_LOST_AB, 1, "SENDs retried out after the peer left");
            }
            Err(e) => t.fail(kind, format!("{} -> {}, {size} B: {e}", cli.name, srv.name)),
        }
        round += 1;
    }
}

/// The perftest tools between the appliances; every fourth run a
/// `write_bw -D` pair is SIGKILLed mid-run instead, its contexts reclaimed.
fn bandwidth_ab(a: &Ring, b: &Ring, watch: &[&Context], deadline: Instant, t: &Tally, rng: &Mutex<Rng>) {
    let tools: [(&str, &str, u32); 4] = [
        ("write_bw", "-s 65536", 200),
        ("read_bw", "-s 65536", 200),
        ("atomic_bw", "", 500),
        ("send_bw", "-s 4096", 500),
    ];
    let mut round = 0usize;
    while Instant::now() < deadline && t.failures() < MAX_FAILURES {
        let (srv, cli) = if round.is_multiple_of(2) { (b, a) } else { (a, b) };
        let port = free_tcp_port();
        if round % 5 == 4 {
            kill_mid_run(srv, cli, port, watch, t, rng);
            round += 1;
            continue;
        }
        let (tool, size, iters) = tools[round % tools.len()];
        let common = format!("-d rxe0 -x 1 -n {iters} {size}");
        let kind = format!("{tool} A<->B");
        match pair(
            tool,
            (&srv.path, format!("{common} -p {port} --bind 127.0.0.1")),
            (&cli.path, format!("{common} -p {port} 127.0.0.1")),
            port,
        ) {
            Ok((_, c)) => {
                let bytes: usize = if tool == "atomic_bw" { 8 } else { size[3..].parse().unwrap_or(0) };
                if perftest_row(&c, bytes, iters).is_some() {
                    t.ok(&kind, u64::from(iters), "messages")
                } else {
                    t.fail(&kind, format!("{} -> {}: no result row\n{c}", cli.name, srv.name))
                }
            }
            Err(e) => t.fail(&kind, format!("{} -> {}: {e}", cli.name, srv.name)),
        }
        round += 1;
    }
}

/// Pids holding a slot of the ring `ctx` watches.
fn holders(ctx: &Context) -> Vec<u32> {
    ctx.slots().iter().filter(|s| s.state != verbs_ring::abi::ctx_state::FREE).map(|s| s.pid).collect()
}

/// Waits until no slot of any watched ring is held by one of `pids`.
fn wait_reclaimed(watch: &[&Context], pids: &[u32]) -> Result<Duration, String> {
    let start = Instant::now();
    loop {
        let held: Vec<u32> = watch.iter().flat_map(|c| holders(c)).filter(|p| pids.contains(p)).collect();
        if held.is_empty() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > RECLAIM {
            return Err(format!("slots of killed pids {held:?} not reclaimed after {RECLAIM:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A `write_bw -D 60` pair, both ends SIGKILLed a few seconds into the
/// run; then both rings must give their slots back.
fn kill_mid_run(srv: &Ring, cli: &Ring, port: u16, watch: &[&Context], t: &Tally, rng: &Mutex<Rng>) {
    let kind = "write_bw killed mid-run";
    let common = "-d rxe0 -x 1 -D 60 -s 65536";
    let run = || -> Result<Duration, String> {
        let s = tool::spawn("write_bw", &srv.path, &format!("{common} -p {port} --bind 127.0.0.1"))
            .map_err(|e| e.to_string())?;
        let mut s = Guard(Some(s));
        if !tool::wait_listening(port, Duration::from_secs(60)) {
            return Err("server never listened".into());
        }
        let c = tool::Watched::spawn("write_bw", &cli.path, &format!("{common} -p {port} 127.0.0.1"))
            .map_err(|e| e.to_string())?;
        // The client prints its banner's separator once both QPs are up.
        if c.wait_line("#bytes", RUN).is_none() {
            return Err(format!("the client never started its run:\n{}", c.text()));
        }
        let secs = 1 + rng.lock().unwrap().below(4);
        std::thread::sleep(Duration::from_secs(secs));
        let mut server = s.take();
        let pids = [server.id(), c.pid()];
        // Both at once: SIGKILL, no detach, the lease must run out.
        let _ = server.kill();
        drop(c);
        let _ = server.wait();
        wait_reclaimed(watch, &pids)
    };
    match run() {
        Ok(_) => t.ok(kind, 2, "processes killed, contexts reclaimed"),
        Err(e) => t.fail(kind, format!("{} -> {}: {e}", cli.name, srv.name)),
    }
}

/// The churn child, run to its end or SIGKILLed after a few iterations.
fn churn(a: &Ring, b: &Ring, watch: &[&Context], deadline: Instant, t: &Tally, rng: &Mutex<Rng>) {
    let mut round = 0u32;
    while Instant::now() < deadline && t.failures() < MAX_FAILURES {
        let kill_after = (round % 2 == 1).then(|| 2 + rng.lock().unwrap().below(6));
        let iters = if kill_after.is_some() { 1000 } else { 12 };
        let kind = if kill_after.is_some() { "QP/MR churn, SIGKILLed" } else { "QP/MR churn" };
        let child = Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--ignored", "--exact", "soak_churn_child", "--nocapture", "--test-threads=1"])
            .env("SOAK_CHURN_RINGS", format!("{}:{}", a.path.display(), b.path.display()))
            .env("SOAK_CHURN_ITERS", iters.to_string())
            .env("SOAK_CHURN_SEED", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => tool::KillOnDrop(c),
            Err(e) => return t.fail(kind, format!("spawn: {e}")),
        };
        // SIGKILL, as `Child::kill` sends.
        let pid = child.0.id();
        let out = child.0.stdout.take().expect("piped");
        let mut done = 0u64;
        let mut finished = false;
        let mut log = String::new();
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            log.push_str(&line);
            log.push('\n');
            if line.starts_with("CHURN ITER ") && line.ends_with(" OK") {
                done += 1;
                if kill_after == Some(done) {
                    let _ = child.0.kill();
                    break;
                }
            }
            if line.starts_with("CHURN DONE") {
                finished = true;
            }
        }
        let status = child.0.wait();
        let mut err = String::new();
        if let Some(mut e) = child.0.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        let result = match kill_after {
            Some(k) if done == k => wait_reclaimed(watch, &[pid]).map(|_| ()),
            Some(k) => Err(format!("ended after {done} of the {k} iterations before the kill: {status:?}")),
            None if finished && status.as_ref().is_ok_and(|s| s.success()) => Ok(()),
            None => Err(format!("did not finish: {status:?}")),
        };
        match result {
            Ok(()) => t.ok(kind, done, "iterations (2 + 4 QPs, 2 MRs each)"),
            Err(e) => t.fail(kind, format!("{e}\n--- stdout ---\n{log}--- stderr ---\n{err}")),
        }
        round += 1;
    }
}

/// The child of [`churn`]: not a test by itself.
#[test]
#[ignore]
fn soak_churn_child() {
    let Ok(rings) = std::env::var("SOAK_CHURN_RINGS") else { return };
    let iters: u32 = std::env::var("SOAK_CHURN_ITERS").ok().and_then(|n| n.parse().ok()).unwrap_or(10);
    let seed: u32 = std::env::var("SOAK_CHURN_SEED").ok().and_then(|n| n.parse().ok()).unwrap_or(0);
    let (ra, rb) = rings.split_once(':').expect("two rings");
    let (ca, cb) = (Context::open(Path::new(ra)).unwrap(), Context::open(Path::new(rb)).unwrap());
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    const WAIT: Duration = Duration::from_secs(120);
    for i in 0..iters {
        let len = [4096usize, 65536, 1 << 20, 12345][(i + seed) as usize % 4];
        let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
        // The atomic's target and result 8-byte aligned, past the data.
        let at = len.next_multiple_of(8);
        let ma = pa.reg_mr(2 * at + 8, AccessFlags::ALL_REMOTE).unwrap();
        let mb = pb.reg_mr(at + 8, AccessFlags::ALL_REMOTE).unwrap();
        let (qa_cq, qb_cq) = (da.create_cq(16, 0).unwrap(), db.create_cq(16, 0).unwrap());
        let qa = Qp::create(&pa, &qa_cq, &qa_cq, None, &QpInitAttr::default()).unwrap();
        let qb = Qp::create(&pb, &qb_cq, &qb_cq, None, &QpInitAttr::default()).unwrap();
        // Spare QPs that live a moment: two brought to INIT, two left in RESET.
        let spare: Vec<Qp> =
            (0..4).map(|_| Qp::create(&pa, &qa_cq, &qa_cq, None, &QpInitAttr::default()).unwrap()).collect();
        for q in &spare[..2] {
            q.to_init(1, AccessFlags::ALL_REMOTE).unwrap();
        }
        connect_patient(&qa, qb.qp_num(), 2);
        connect_patient(&qb, qa.qp_num(), 1);
        let msg: Vec<u8> = (0..len).map(|k| (k as u32).wrapping_mul(7).wrapping_add(i * 13 + seed) as u8).collect();
        ma.write(0, &msg).unwrap();
        let post = |wr_id: u64, op: WrOp, sge: verbs::Sge| {
            qa.post_send(&[SendWr { wr_id, op, sg_list: &[sge], flags: SendFlags::SIGNALED, ud: None }]).unwrap();
            let wc = qa_cq.wait(WAIT).unwrap();
            assert!(wc.status.is_success() && wc.wr_id == wr_id, "iteration {i}: {wc:?}");
        };
        post(1, WrOp::Write { remote_addr: mb.addr(), rkey: mb.rkey() }, ma.sge(0, len as u32).unwrap());
        assert!(mb.to_vec(0, len).unwrap() == msg, "iteration {i}: the WRITE landed wrong");
        post(2, WrOp::Read { remote_addr: mb.addr(), rkey: mb.rkey() }, ma.sge(at, len as u32).unwrap());
        assert!(ma.to_vec(at, len).unwrap() == msg, "iteration {i}: the READ brought back other bytes");
        mb.write_u64(at, 40).unwrap();
        post(
            3,
            WrOp::FetchAdd { remote_addr: mb.addr() + at as u64, rkey: mb.rkey(), add: 2 },
            ma.sge(2 * at, 8).unwrap(),
        );
        assert_eq!((ma.read_u64(2 * at).unwrap(), mb.read_u64(at).unwrap()), (40, 42), "iteration {i}");
        drop(spare);
        println!("CHURN ITER {i} OK");
    }
    println!("CHURN DONE {iters}");
}

/// [`tests::rc::connect`]'s RESET to RTR, then RTS with [`CHURN_TIMEOUT`].
fn connect_patient(q: &Qp, remote_qpn: u32, peer: u8) {
    use verbs::{QpAttr, qp_attr_mask, qp_state};
    q.to_init(1, AccessFlags::ALL_REMOTE).unwrap();
    q.to_rtr(&verbs::RtrAttr {
        port: 1,
        path_mtu: IBV_MTU_1024,
        dest_qp_num: remote_qpn,
        rq_psn: 0x1234,
        dgid: tests::rc::ipv4_gid(peer),
        sgid_index: 1,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        ..Default::default()
    })
    .unwrap();
    let attr = QpAttr {
        qp_state: qp_state::RTS,
        sq_psn: 0x1234,
        timeout: CHURN_TIMEOUT,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
        ..Default::default()
    };
    let mask = qp_attr_mask::STATE
        | qp_attr_mask::SQ_PSN
        | qp_attr_mask::TIMEOUT
        | qp_attr_mask::RETRY_CNT
        | qp_attr_mask::RNR_RETRY
        | qp_attr_mask::MAX_QP_RD_ATOMIC;
    q.modify(&attr, mask).unwrap();
}

/// Linux's programs against our tools on A's rxe1, each side serving in turn.
fn linux_traffic(linux: &mut LinuxPeer, a: &Ring, gid: u8, gp: u16, deadline: Instant, t: &Tally) {
    let hp = linux.host_port();
    // (Linux program, our tool, size option, size, iterations)
    let matrix: [(&str, &str, &str, usize, u32); 5] = [
        ("ibv_rc_pingpong", "rc_pingpong", "-s 4096", 4096, 200),
        ("ib_write_bw", "write_bw", "-s 65536", 65536, 200),
        ("ib_read_bw", "read_bw", "-s 65536", 65536, 200),
        ("ib_atomic_bw", "atomic_bw", "", 8, 500),
        ("ib_send_bw", "send_bw", "-s 4096", 4096, 500),
    ];
    let mut round = 0usize;
    while Instant::now() < deadline && t.failures() < MAX_FAILURES {
        let (prog, ours, size_opt, size, iters) = matrix[round % matrix.len()];
        let linux_serves = (round / matrix.len()).is_multiple_of(2);
        let pingpong = ours == "rc_pingpong";
        let (theirs_opts, ours_opts) = if pingpong {
            (format!("-d rxe0 -g 1 -c -n {iters} {size_opt}"), format!("-d rxe1 -g {gid} -c -n {iters} {size_opt}"))
        } else {
            (format!("-d rxe0 -F -x 1 -n {iters} {size_opt}"), format!("-d rxe1 -x {gid} -n {iters} {size_opt}"))
        };
        let kind = format!("{ours} vs Linux {prog}");
        let done = format!("{iters} iters in");
        // Both sides run at once, Linux's in its shell's background; ours
        // is waited for first, so Linux's wait knows whether ours finished.
        let result = (|| -> Result<(String, LinuxEnd), String> {
            let linux_started = |linux: &mut LinuxPeer, line: String| {
                linux.spawn_bg(&line, LINUX_LOG).map_err(|e| e.to_string()).map(|_| ())
            };
            let retries_before = linux_retries(linux)?;
            let ours_child = if linux_serves {
                linux_started(linux, format!("{prog} {theirs_opts}"))?;
                linux.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(60)).map_err(|e| e.to_string())?;
                tool::spawn(ours, &a.path, &format!("{ours_opts} -p {hp} 127.0.0.1")).map_err(|e| e.to_string())?
            } else {
                let bind = if pingpong { String::new() } else { " --bind 127.0.0.1".into() };
                let server =
                    tool::spawn(ours, &a.path, &format!("{ours_opts} -p {gp}{bind}")).map_err(|e| e.to_string())?;
                let mut server = Guard(Some(server));
                if !tool::wait_listening(gp, Duration::from_secs(60)) {
                    return Err("our server never listened".into());
                }
                linux_started(linux, format!("{prog} {theirs_opts} -p {MGMT_GUEST_PORT} {MGMT_HOST_IP}"))?;
                server.take()
            };
            let (ok, out) = tool::finish(ours_child, RUN).map_err(|e| e.to_string())?;
            let theirs = finish_linux(linux, pingpong && ok && out.contains(&done), retries_before)
                .map_err(|e| format!("{e}\n--- ours, ok={ok} ---\n{out}"))?;
            let linux_ok = matches!(&theirs, LinuxEnd::Exited(t) if t.contains("exit=0"));
            if ok && (linux_ok || matches!(theirs, LinuxEnd::LeftBehind { .. })) {
                Ok((out, theirs))
            } else {
                let text = theirs.text();
                let (ours, linux) = (("ours", ok, out.as_str()), ("Linux", linux_ok, text.as_str()));
                Err(if linux_serves { linux_report(ours, linux) } else { linux_report(linux, ours) })
            }
        })();
        let who = if linux_serves { "Linux serves" } else { "A serves" };
        match result {
            // Ours finished every exchange and checked its data; Linux's
            // last SEND lost its ACK after ours had left.
            Ok((_, LinuxEnd::LeftBehind { retries })) => {
                t.ok(&kind, u64::from(iters), "round trips");
                t.ok(LAST_ACK_LOST_LINUX, 1, "Linux programs killed, waiting for their last ACK");
                eprintln!(
                    "soak: {kind}, {who}: ours done, Linux never ended ({retries} retransmission rounds); killed"
                );
            }
            Ok((ours_out, LinuxEnd::Exited(theirs))) => {
                let complete = if pingpong {
                    ours_out.contains(&done) && theirs.contains(&done) && !theirs.contains("invalid data")
                } else {
                    perftest_row(&ours_out, size, iters).is_some() || perftest_row(&theirs, size, iters).is_some()
                };
                if complete {
                    t.ok(&kind, u64::from(iters), if pingpong { "round trips" } else { "messages" });
                } else {
                    t.fail(&kind, format!("{who}: no result\nours:\n{ours_out}\nLinux:\n{theirs}"));
                }
            }
            // Linux's side finished and ours retried out: the other way round.
            Err(e) if pingpong && last_ack_lost(&e, iters) => {
                t.ok(&kind, u64::from(iters), "round trips");
                t.ok(LAST_ACK_LOST_A, 1, "SENDs retried out after the peer left");
            }
            Err(e) => t.fail(&kind, format!("{who}: {e}")),
        }
        round += 1;
    }
}

/// How Linux's side of a run ended.
enum LinuxEnd {
    /// Its output, ending `exit=N`.
    Exited(String),
    /// Still waiting after ours finished every exchange and left (see
    /// [`LAST_ACK_LOST_LINUX`]), having retransmitted this often during
    /// the run; then killed.
    LeftBehind { retries: u64 },
}

impl LinuxEnd {
    fn text(&self) -> String {
        match self {
            LinuxEnd::Exited(t) => t.clone(),
            LinuxEnd::LeftBehind { retries } => format!("(never ended; {retries} retransmission rounds; killed)"),
        }
    }
}

/// Linux's `rdma statistic show link rxe0/1` counters.
fn linux_stats(linux: &mut LinuxPeer) -> Result<Vec<(String, u64)>, String> {
    linux.cmd("rdma statistic show link rxe0/1").map(|out| counters(&out)).map_err(|e| e.to_string())
}

/// Linux rxe0's `completer_retry_err`: its requesters' retransmission rounds.
fn linux_retries(linux: &mut LinuxPeer) -> Result<u64, String> {
    let stats = linux_stats(linux)?;
    counter(&stats, "completer_retry_err").ok_or_else(|| format!("no completer_retry_err in {stats:?}"))
}

/// Waits for the Linux job `spawn_bg` started, Linux's
/// `completer_retry_err` having been `retries_before` then. When ours
/// finished every exchange (`ours_done`: every message received and
/// checked, every SEND of ours acknowledged, so Linux has had all of
/// them), a Linux pingpong lacks at most the ACK of its own last SEND,
/// and the wait is short. One still running then is the Linux side left
/// behind ([`LAST_ACK_LOST_LINUX`]), if it retransmitted at all, as a
/// lost ACK makes it do; nothing else runs on Linux meanwhile.
fn finish_linux(linux: &mut LinuxPeer, ours_done: bool, retries_before: u64) -> Result<LinuxEnd, String> {
    if !ours_done {
        return linux.finish_bg(LINUX_LOG, RUN).map(LinuxEnd::Exited).map_err(|e| e.to_string());
    }
    match linux.finish_bg(LINUX_LOG, LINUX_AFTER_OURS) {
        Ok(out) => Ok(LinuxEnd::Exited(out)),
        Err(e) => {
            // `finish_bg` has killed the job.
            let retries = linux_retries(linux)?.saturating_sub(retries_before);
            if retries > 0 {
                Ok(LinuxEnd::LeftBehind { retries })
            } else {
                Err(format!("{e}\n(Linux never retransmitted, so no ACK of its was lost)"))
            }
        }
    }
}

/// `mem -b`'s heap bytes in use.
fn heap_used(app: &mut Appliance) -> (u64, u64) {
    let out = app.cmd("mem -b").unwrap();
    let line = out.lines().find(|l| l.starts_with("heap_bytes ")).unwrap_or_else(|| panic!("`mem -b`: {out}"));
    let c = counters(line);
    (counter(&c, "used").unwrap(), counter(&c, "total").unwrap())
}

/// `rdma statistic show link DEV/1`'s counters.
fn stats(app: &mut Appliance, dev: &str) -> Vec<(String, u64)> {
    counters(&app.cmd(&format!("rdma statistic show link {dev}/1")).unwrap())
}

/// `perf`'s counters (drop reasons and the transport's own, summed over the
/// appliance's devices).
fn perf(app: &mut Appliance) -> Vec<(String, u64)> {
    counters(&app.cmd("perf").unwrap())
}

fn get(c: &[(String, u64)], name: &str) -> u64 {
    counter(c, name).unwrap_or(0)
}

/// A frame the parser refused as broken (not a transport drop, not a frame
/// meant for another path): what a corrupted byte turns a RoCE frame into.
fn broken_frames(perf: &[(String, u64)]) -> u64 {
    use rdma::wire::frame::DropReason;
    DropReason::ALL.iter().filter(|r| !r.is_transport() && !r.is_not_roce()).map(|r| get(perf, r.name())).sum()
}

/// Datagrams the host kernel dropped at the socket bound to
/// 127.0.0.1:`port` (its receive queue full); 0 for no such socket.
fn udp_drops(port: u16) -> u64 {
    udp_socket(port).map_or(0, |(_, drops)| drops)
}

/// One relayed wire at a quiet moment: what its two NICs counted and what
/// the host kernel dropped at the relay's sockets and at QEMU's.
struct Wire<'r> {
    name: &'static str,
    relay: &'r Relay,
    /// Both ends' NIC `(rx_packets, tx_packets)`, summed.
    rx: u64,
    tx: u64,
    /// Frames the appliances' ends received for another MAC (`otherhost`):
    /// only two stations are on a wire, so each is a station that had its
    /// peer's MAC wrong.
    otherhost: u64,
}

impl Wire<'_> {
    /// Frames sent towards the relay the kernel dropped at its sockets.
    fn relay_drops(&self) -> u64 {
        udp_drops(self.relay.port_a) + udp_drops(self.relay.port_b)
    }

    /// Frames the relay sent the kernel dropped at QEMU's sockets.
    fn qemu_drops(&self) -> u64 {
        udp_drops(self.relay.a_local) + udp_drops(self.relay.b_local)
    }
}

struct Counters {
    a0: Vec<(String, u64)>,
    a1: Vec<(String, u64)>,
    b0: Vec<(String, u64)>,
    linux: Vec<(String, u64)>,
    perf_a: Vec<(String, u64)>,
    perf_b: Vec<(String, u64)>,
}

/// Pingpongs whose last ACK was lost after the peer left, by the side
/// whose SEND retried out: A or B on their wire, A's rxe1, Linux.
struct LostAcks {
    ab: u64,
    a: u64,
    linux: u64,
}

/// How the counters relate, with the relays' own counts. Exact:
/// - every SEND A completed was received once by B and the other way
///   round (`rdma_sends` = the peer's `rdma_recvs`, but for the pingpong
///   SENDs that retried out after their last ACK was lost): no SEND is ever in
///   flight when a process is killed here (the killed ones WRITE, READ and
///   fetch-add only), duplicates are not received twice, and every SEND
///   waited for its completion;
/// - no request ran out of retries (`retry_exceeded_err`,
///   `retry_rnr_exceeded_err` 0) except on a QP whose peer was killed:
///   at most two per kill event;
/// - no link went down, no RNR retry count ran out;
/// - no station sent to a MAC nobody on its wire has (the appliances'
///   `otherhost` drops 0): a damaged ARP frame taught nobody a wrong MAC;
/// - frame for frame on each wire (see the wire checks in the body).
///
/// Inequalities (the wire carries ARP and the like too, retransmissions
/// follow timers as well as losses, duplicates may hit ACKs or requests):
/// - frames the RoCE parsers refused as broken <= frames the relays
///   corrupted;
/// - RoCE packets sent and received <= the NICs' frames;
/// - a wire with losses saw retransmissions: the requesters' rewinds
///   (`completer_retry_err`) > 0, and the responders saw duplicates or
///   out-of-sequence requests.
fn check_counters(c: &Counters, wires: &[Wire; 2], kills: u64, lost: &LostAcks, fail: &mut Vec<String>) -> String {
    let (ab, al) = (wires[0].relay, wires[1].relay);
    let g = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let mut s = String::new();
    let mut info = String::new();
    let mut check = |ok: bool, what: String| {
        let _ = writeln!(s, "  [{}] {what}", if ok { "ok" } else { "FAILED" });
        if !ok {
            fail.push(what);
        }
    };
    // A pingpong SEND whose last ACK was lost was received but retried out
    // at its sender, so it is in the peer's rdma_recvs and not in the
    // sender's rdma_sends: the two sides together differ by exactly those.
    let (sa, rb) = (get(&c.a0, "rdma_sends"), get(&c.b0, "rdma_recvs"));
    let (sb, ra) = (get(&c.b0, "rdma_sends"), get(&c.a0, "rdma_recvs"));
    check(
        sa <= rb && sb <= ra && (rb - sa) + (ra - sb) == lost.ab,
        format!(
            "exact: B rxe0 rdma_recvs {rb} - A rxe0 rdma_sends {sa} + A rxe0 rdma_recvs {ra} - B rxe0 rdma_sends {sb} \
             == {} pingpong SENDs retried out after their last ACK was lost",
            lost.ab
        ),
    );
    let exceeded: u64 = [&c.a0, &c.a1, &c.b0].iter().map(|x| get(x, "retry_exceeded_err")).sum();
    let lost_app = lost.ab + lost.a;
    check(
        exceeded <= 2 * kills + lost_app,
        format!(
            "bound: appliances' retry_exceeded_err {exceeded} <= 2 x {kills} killed runs + {lost_app} pingpongs whose last ACK was lost"
        ),
    );
    for (name, x) in [("A rxe0", &c.a0), ("A rxe1", &c.a1), ("B rxe0", &c.b0), ("Linux rxe0", &c.linux)] {
        let bad: u64 = ["retry_rnr_exceeded_err", "link_downed"].iter().map(|n| get(x, n)).sum();
        check(bad == 0, format!("exact: {name} retry_rnr_exceeded_err + link_downed = {bad} == 0"));
    }
    // Nothing on that wire is killed, and Linux's rxe does not end a SEND
    // left behind in RETRY_EXC_ERR ([`LAST_ACK_LOST_LINUX`]: those runs
    // were killed, waiting).
    let lx = get(&c.linux, "retry_exceeded_err");
    check(
        lx == 0,
        format!(
            "exact: Linux retry_exceeded_err {lx} == 0 ({} Linux pingpongs left waiting for their last ACK were killed)",
            lost.linux
        ),
    );
    let (sa1, rl) = (get(&c.a1, "rdma_sends"), get(&c.linux, "rdma_recvs"));
    let (sl, ra1) = (get(&c.linux, "rdma_sends"), get(&c.a1, "rdma_recvs"));
    let _ = writeln!(
        info,
        "  [info] A rxe1 rdma_sends {sa1} / Linux rdma_recvs {rl}; Linux rdma_sends {sl} / A rxe1 rdma_recvs {ra1}"
    );
    let broken = broken_frames(&c.perf_a) + broken_frames(&c.perf_b);
    let corrupted = g(&ab.counts.corrupted) + g(&al.counts.corrupted);
    check(
        broken <= corrupted,
        format!("bound: frames refused as broken {broken} <= frames the relays corrupted {corrupted}"),
    );
    // The wires, frame for frame: every frame a NIC sent reached the
    // relay or was dropped by the host kernel at the relay's socket (queue
    // full); every frame the relay let through (frames - dropped +
    // duplicated) reached a NIC or was dropped at QEMU's socket, but for
    // the at most one frame per direction a reorder may still hold.
    for (w, ends) in wires.iter().zip([(&c.a0, &c.b0), (&c.a1, &c.linux)]) {
        let r = &w.relay.counts;
        let (frames, relay_drops, qemu_drops) = (g(&r.frames), w.relay_drops(), w.qemu_drops());
        check(
            w.tx == frames + relay_drops,
            format!(
                "exact: {} NICs sent {} frames == relay received {frames} + host dropped at the relay's sockets {relay_drops}",
                w.name, w.tx
            ),
        );
        let through = frames - g(&r.dropped) + g(&r.duplicated);
        let got = w.rx + qemu_drops;
        check(
            got <= through && through <= got + 2,
            format!(
                "exact (but <= 2 held): {} NICs received {} + host dropped at QEMU's sockets {qemu_drops} == relay let through {through}",
                w.name, w.rx
            ),
        );
        check(
            w.otherhost == 0,
            format!(
                "exact: {} frames for a MAC no station on it has {} == 0 (every station had its peer's MAC right)",
                w.name, w.otherhost
            ),
        );
        let sent = get(ends.0, "sent_pkts") + get(ends.1, "sent_pkts");
        check(sent <= w.tx, format!("bound: {} RoCE sent_pkts {sent} <= NIC frames sent {}", w.name, w.tx));
        let rcvd = get(ends.0, "rcvd_pkts") + get(ends.1, "rcvd_pkts");
        check(rcvd <= w.rx, format!("bound: {} RoCE rcvd_pkts {rcvd} <= NIC frames received {}", w.name, w.rx));
        let send_err = get(ends.0, "send_err") + get(ends.1, "send_err");
        let _ = writeln!(
            info,
            "  [info] {}: send_err {send_err} (frames the transport could not queue on a full NIC ring; the retransmissions recover them)",
            w.name
        );
    }
    if g(&ab.counts.dropped) > 0 {
        let rewinds = get(&c.a0, "completer_retry_err") + get(&c.b0, "completer_retry_err");
        check(
            rewinds > 0,
            format!(
                "bound: relay AB dropped {} frames: A+B rxe0 retransmitted ({rewinds} rewinds) > 0",
                g(&ab.counts.dropped)
            ),
        );
        let seen =
            ["duplicate_request", "out_of_seq_request"].iter().map(|n| get(&c.a0, n) + get(&c.b0, n)).sum::<u64>();
        check(seen > 0, format!("bound: A+B rxe0 responders saw {seen} duplicate or out-of-sequence requests > 0"));
    }
    s + &info
}

#[test]
#[ignore = "boots two appliances and a Linux peer for SOAK_MINUTES (30): `make soak`"]
fn soak() {
    if !LinuxPeer::available_or_skip("soak") {
        return;
    }
    let minutes = minutes();
    let seed = std::env::var("SOAK_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(17);
    let (pa0, pb0, pa1, pl) = (free_udp_port(), free_udp_port(), free_udp_port(), free_udp_port());
    let ab = Relay::start(pa0, pb0, FAULTS_AB, seed).unwrap();
    let al = Relay::start(pa1, pl, FAULTS_AL, seed ^ 0xa1).unwrap();
    let gp = free_tcp_port();
    let mut lopts = PeerOptions::new(Nic::new("52:54:00:00:01:03", pl, al.port_b), "10.0.1.3/24");
    lopts.guest_fwd_cmd = Some(format!("{} {gp}", env!("CARGO_BIN_EXE_tcp-stdio")));
    let mut linux = LinuxPeer::start(lopts).unwrap();
    let (ring_a, ring_b) = (Ivshmem::temp("soak-a", REGION), Ivshmem::temp("soak-b", REGION));
    let second_nic = vec![
        "-netdev".to_string(),
        format!("socket,id=n1,udp=127.0.0.1:{},localaddr=127.0.0.1:{pa1}", al.port_a),
        "-device".to_string(),
        "virtio-net-pci,netdev=n1,mac=52:54:00:00:01:01".to_string(),
    ];
    let node = |mac: &str, local, peer, ip: &str, ring: &Ivshmem, extra: Vec<String>| Options {
        nic: Some(Nic::new(mac, local, peer)),
        append: format!("ip={ip}"),
        ivshmem: Some(ring.clone()),
        extra,
        cmd_timeout: RUN,
        ..Options::default()
    };
    let booted = Instant::now();
    let mut a = Appliance::boot(node("52:54:00:00:00:01", pa0, ab.port_a, "10.0.0.1/24", &ring_a, second_nic)).unwrap();
    let mut b = Appliance::boot(node("52:54:00:00:00:02", pb0, ab.port_b, "10.0.0.2/24", &ring_b, vec![])).unwrap();
    linux.wait_ready().unwrap();
    let no_error = |out: String| assert!(!out.lines().any(|l| l.starts_with("error:")), "{out}");
    no_error(a.cmd("ip addr add 10.0.1.1/24 dev eth1").unwrap());
    no_error(a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap());
    no_error(a.cmd("rdma link add rxe1 type rxe netdev eth1").unwrap());
    no_error(b.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap());
    // ARP on both wires before anything is measured (the lossy wire may eat a ping).
    for (x, ip) in [(0, "10.0.0.2"), (0, "10.0.1.3"), (1, "10.0.0.1")] {
        let x = if x == 0 { &mut a } else { &mut b };
        let out = x.cmd(&format!("ping {ip} -c 5 -i 200")).unwrap();
        assert!(!out.contains(" 0 received"), "ping {ip}: {out}");
    }
    let gids = tool::finish(tool::spawn("show_gids", &ring_a.path, "").unwrap(), RUN).unwrap().1;
    let gid: u8 = gids
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 6 && f[0] == "rxe1" && f[4] == "10.0.1.1" && f[5] == "v2")
        .and_then(|f| f[2].parse().ok())
        .unwrap_or_else(|| panic!("no RoCE v2 GID of 10.0.1.1 on rxe1:\n{gids}"));

    let heap_before = [heap_used(&mut a), heap_used(&mut b)];
    for x in [&mut a, &mut b] {
        assert_eq!(x.cmd("perf reset").unwrap(), "");
    }
    let (ra, rb) = (Ring { name: "A", path: ring_a.path.clone() }, Ring { name: "B", path: ring_b.path.clone() });
    let tally = Tally::new(booted);
    let rng = Mutex::new(Rng(seed));
    let load = tests::load::Watch::start();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(minutes * 60.0);
    eprintln!("soak: {minutes} min, seed {seed}; relays AB {:?}, AL {:?}", FAULTS_AB, FAULTS_AL);
    let mut heap_samples = Vec::new();
    // A warm-up phase, then the soak proper; between them and after, with
    // every host client gone, the heap is read: what the warm-up left is
    // the level the tables grew to, and the soak proper must not add to it.
    let warmup = (minutes / 5.0).clamp(0.5, 3.0).min(minutes / 2.0);
    let phases = [start + Duration::from_secs_f64(warmup * 60.0), deadline];
    let mut heap_quiet = Vec::new();
    {
        let (wa, wb) = (Context::open(&ring_a.path).unwrap(), Context::open(&ring_b.path).unwrap());
        let watch = [&wa, &wb];
        for (phase, until) in phases.into_iter().enumerate() {
            std::thread::scope(|s| {
                let (t, rg) = (&tally, &rng);
                let (ra, rb, watch) = (&ra, &rb, &watch[..]);
                s.spawn(move || pingpong_ab(ra, rb, until, t));
                s.spawn(move || bandwidth_ab(ra, rb, watch, until, t, rg));
                s.spawn(move || churn(ra, rb, watch, until, t, rg));
                let linux = &mut linux;
                s.spawn(move || linux_traffic(linux, ra, gid, gp, until, t));
                // Progress and the heap under load, once a minute.
                while Instant::now() < until && tally.failures() < MAX_FAILURES {
                    std::thread::sleep(Duration::from_secs(60).min(until.saturating_duration_since(Instant::now())));
                    let h = (heap_used(&mut a).0, heap_used(&mut b).0);
                    heap_samples.push(h);
                    // Frames the host dropped at each QEMU's wire socket so far:
                    // a side that stops taking frames in shows here first.
                    let socket_drops = [pa0, pb0, pa1, pl].map(udp_drops);
                    eprintln!(
                        "soak {:.1} min: heap used A {} B {} bytes (under load); relay AB {}; relay AL {}; \
                         dropped at QEMU's sockets: A eth0 {} B eth0 {} A eth1 {} Linux {}\n{}",
                        start.elapsed().as_secs_f64() / 60.0,
                        h.0,
                        h.1,
                        ab.summary(),
                        al.summary(),
                        socket_drops[0],
                        socket_drops[1],
                        socket_drops[2],
                        socket_drops[3],
                        tally.table()
                    );
                }
            });
            // Every slot but the watchers' (this process's) free.
            let t0 = Instant::now();
            for (name, w) in [("A", &wa), ("B", &wb)] {
                loop {
                    let held: Vec<u32> = holders(w).into_iter().filter(|&p| p != std::process::id()).collect();
                    if held.is_empty() {
                        break;
                    }
                    assert!(
                        t0.elapsed() < RECLAIM,
                        "ring {name}: slots still held after phase {phase} by pids {held:?}\n{}",
                        tally.table()
                    );
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            // A moment for the last teardowns' frames and timers.
            std::thread::sleep(Duration::from_secs(5));
            let h = [heap_used(&mut a), heap_used(&mut b)];
            eprintln!(
                "soak phase {phase} over after {:.1} min: heap used A {} B {} bytes (quiet)",
                start.elapsed().as_secs_f64() / 60.0,
                h[0].0,
                h[1].0
            );
            heap_quiet.push(h);
        }
    }
    let elapsed = start.elapsed();
    let mut fail: Vec<String> = tally.failures.lock().unwrap().clone();

    // Nothing left: every ring slot free, no QP but QP1 (none stuck in SQD/ERR), no object.
    let mut report = String::new();
    for (name, x, devs) in [("A", &mut a, &["rxe0", "rxe1"][..]), ("B", &mut b, &["rxe0"][..])] {
        let res = x.cmd("rdma resource show").unwrap();
        for dev in devs {
            let want = format!("{dev}: pd 0 cq 0 qp 1 cm_id 0 mr 0 ctx 0 srq 0");
            if !res.lines().any(|l| l.contains(&want)) {
                fail.push(format!("{name}: objects left: want `{want}` in\n{res}"));
            }
        }
        let qps = x.cmd("rdma resource show qp").unwrap();
        let others: Vec<&str> = qps.lines().filter(|l| l.contains("lqpn ") && !l.contains("lqpn 1 ")).collect();
        if !others.is_empty() {
            fail.push(format!("{name}: QPs left besides QP1:\n{}", others.join("\n")));
        }
        let _ = writeln!(report, "{name} rdma resource show:\n{}", res.trim_end());
    }
    let lqps = linux.cmd("rdma resource show qp").unwrap();
    let lothers: Vec<&str> = lqps.lines().filter(|l| l.contains("lqpn ") && !l.contains("lqpn 1 ")).collect();
    if !lothers.is_empty() {
        fail.push(format!("Linux: QPs left besides QP1:\n{}", lothers.join("\n")));
    }

    // The heap: back to where the warm-up left it (the soak proper added
    // nothing), with the watchers' contexts attached in both readings; and
    // without them at the end, against the reading before any traffic.
    let heap_after = [heap_used(&mut a), heap_used(&mut b)];
    for (i, name) in ["A", "B"].into_iter().enumerate() {
        let (warm, end) = (heap_quiet[0][i].0, heap_quiet[1][i].0);
        if end > warm + HEAP_SLACK {
            fail.push(format!(
                "{name}: heap used {warm} bytes after the warm-up, {end} after the soak (> {HEAP_SLACK} more): a leak"
            ));
        }
    }

    // Counters, quiet now: related to each other and to the relays.
    let c = Counters {
        a0: stats(&mut a, "rxe0"),
        a1: stats(&mut a, "rxe1"),
        b0: stats(&mut b, "rxe0"),
        linux: linux_stats(&mut linux).unwrap(),
        perf_a: perf(&mut a),
        perf_b: perf(&mut b),
    };
    // The wires' NIC counters, quiet: read until two readings agree (an ARP
    // refresh may pass between them).
    let mut prev = None;
    let mut nics = (0, 0, 0, 0, 0, 0, 0, 0);
    // Frames each appliance NIC received for another MAC (A eth0, B eth0, A eth1).
    let mut otherhost = (0, 0, 0);
    for _ in 0..5 {
        // `(rx packets, tx packets, otherhost)` of one appliance NIC.
        let la = |x: &mut Appliance, dev: &str| {
            let c = tests::iplink::counters(&x.cmd(&format!("ip -s link show dev {dev}")).unwrap());
            let packets = |k: &str| c.get(k).copied().unwrap_or_else(|| panic!("ip -s link show dev {dev}: no {k}"));
            (packets("rx packets"), packets("tx packets"), c.get("otherhost").copied().unwrap_or(0))
        };
        let (a0, a1, b0) = (la(&mut a, "eth0"), la(&mut a, "eth1"), la(&mut b, "eth0"));
        let lrx = linux.cmd("cat /sys/class/net/eth0/statistics/rx_packets").unwrap().trim().parse::<u64>().unwrap();
        let ltx = linux.cmd("cat /sys/class/net/eth0/statistics/tx_packets").unwrap().trim().parse::<u64>().unwrap();
        nics = (a0.0, a0.1, b0.0, b0.1, a1.0, a1.1, lrx, ltx);
        otherhost = (a0.2, b0.2, a1.2);
        let relays = (ab.counts.frames.load(Ordering::Relaxed), al.counts.frames.load(Ordering::Relaxed));
        if prev == Some((nics, relays)) {
            break;
        }
        prev = Some((nics, relays));
        std::thread::sleep(Duration::from_secs(2));
    }
    let wires = [
        Wire {
            name: "wire AB",
            relay: &ab,
            rx: nics.0 + nics.2,
            tx: nics.1 + nics.3,
            otherhost: otherhost.0 + otherhost.1,
        },
        Wire { name: "wire AL", relay: &al, rx: nics.4 + nics.6, tx: nics.5 + nics.7, otherhost: otherhost.2 },
    ];
    let kills = tally
        .kinds
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.contains("kill") || k.contains("SIGKILL"))
        .map(|(_, v)| v.ok + v.failed)
        .sum();
    let lost = {
        let k = tally.kinds.lock().unwrap();
        let n = |name: &str| k.get(name).map_or(0, |v| v.ok);
        LostAcks { ab: n(LAST_ACK_LOST_AB), a: n(LAST_ACK_LOST_A), linux: n(LAST_ACK_LOST_LINUX) }
    };
    let relations = check_counters(&c, &wires, kills, &lost, &mut fail);

    // The summary.
    let total_ops: u64 = tally.kinds.lock().unwrap().values().map(|k| k.ok).sum();
    let mut sum = String::new();
    let _ = writeln!(sum, "==== soak summary ====");
    let _ = writeln!(
        sum,
        "duration {:.1} min (asked {minutes} min), seed {seed}, {total_ops} operations ok",
        elapsed.as_secs_f64() / 60.0
    );
    sum.push_str(&tally.table());
    let _ = writeln!(
        sum,
        "machine over the run: {} (load average now: {})",
        load.note(),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    for (i, name) in ["A", "B"].into_iter().enumerate() {
        let (before, after) = (heap_before[i].0, heap_after[i].0);
        let (warm, end) = (heap_quiet[0][i].0, heap_quiet[1][i].0);
        let peak = heap_samples.iter().map(|h| if i == 0 { h.0 } else { h.1 }).max().unwrap_or(0);
        let _ = writeln!(
            sum,
            "heap {name}: before traffic {before} B, after {after} B ({:+} B); quiet after warm-up {warm} B, \
             after the soak {end} B ({:+} B, slack {HEAP_SLACK}); peak sampled under load {peak} B; heap {} B",
            after as i64 - before as i64,
            end as i64 - warm as i64,
            heap_before[i].1
        );
    }
    let _ = writeln!(sum, "relay AB (A eth0 <-> B eth0): {}", ab.summary());
    let _ = writeln!(sum, "relay AL (A eth1 <-> Linux eth0): {}", al.summary());
    let row = |name: &str, x: &[(String, u64)]| {
        let names = [
            "sent_pkts",
            "rcvd_pkts",
            "duplicate_request",
            "out_of_seq_request",
            "rcvd_seq_err",
            "completer_retry_err",
            "retry_exceeded_err",
            "rdma_sends",
            "rdma_recvs",
        ];
        let mut l = format!("{name:<11}");
        for n in names {
            let _ = write!(l, " {n} {}", get(x, n));
        }
        l
    };
    let _ = writeln!(sum, "counters:");
    for (name, x) in [("A rxe0", &c.a0), ("A rxe1", &c.a1), ("B rxe0", &c.b0), ("Linux rxe0", &c.linux)] {
        let _ = writeln!(sum, "  {}", row(name, x));
    }
    let nonzero = |p: &[(String, u64)]| {
        p.iter()
            .filter(|(n, _)| !n.ends_with("ms") && rdma::wire::frame::DropReason::ALL.iter().any(|r| r.name() == n))
            .map(|(n, v)| format!("{n} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(sum, "drops A: {}", nonzero(&c.perf_a));
    let _ = writeln!(sum, "drops B: {}", nonzero(&c.perf_b));
    let _ = writeln!(sum, "relations:\n{relations}");
    sum.push_str(&report);
    println!("{sum}");
    let _ = std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/soak"));
    let _ = std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/soak/summary.txt"), &sum);
    // The consoles, for what the firmware logged around a failure.
    for (name, x) in [("A", &a), ("B", &b)] {
        let _ = std::fs::write(format!("{}/../target/soak/{name}.console", env!("CARGO_MANIFEST_DIR")), x.transcript());
    }
    assert!(total_ops > 0, "no operation ran");
    assert!(fail.is_empty(), "soak failed {} check(s):\n{}\n\n{sum}", fail.len(), fail.join("\n---\n"));
}

/// The exchange that once stalled a soak, on its own: Linux's
/// `ibv_rc_pingpong -c` client against our `rc_pingpong` server on A,
/// through the soak's Linux wire (the fault relay), `STRESS_ROUNDS` (60)
/// rounds of 200 x 4 KiB. A round that does not end in a minute fails with
/// both sides' output, A's QPs and counters, and A's capture
/// (target/tmp/stress-al.pcap, kept on failure).
#[test]
#[ignore = "boots an appliance and a Linux peer for some minutes"]
fn linux_pingpong_through_the_lossy_relay() {
    if !LinuxPeer::available_or_skip("linux_pingpong_through_the_lossy_relay") {
        return;
    }
    let rounds: u32 = std::env::var("STRESS_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(60);
    let seed = std::env::var("SOAK_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(17);
    let (pa, pl) = (free_udp_port(), free_udp_port());
    let al = Relay::start(pa, pl, FAULTS_AL, seed).unwrap();
    let gp = free_tcp_port();
    let mut lopts = PeerOptions::new(Nic::new("52:54:00:00:01:03", pl, al.port_b), "10.0.1.3/24");
    lopts.guest_fwd_cmd = Some(format!("{} {gp}", env!("CARGO_BIN_EXE_tcp-stdio")));
    let mut linux = LinuxPeer::start(lopts).unwrap();
    let ring = Ivshmem::temp("stress-al", REGION);
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/tmp"));
    let _ = std::fs::create_dir_all(&dir);
    let capture = dir.join("stress-al.pcap");
    let mut a = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:01:01", pa, al.port_a)),
        append: "ip=10.0.1.1/24".into(),
        ivshmem: Some(ring.clone()),
        extra: vec!["-object".into(), format!("filter-dump,id=f0,netdev=n0,file={}", capture.display())],
        cmd_timeout: RUN,
        ..Options::default()
    })
    .unwrap();
    linux.wait_ready().unwrap();
    assert!(a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    let out = a.cmd("ping 10.0.1.3 -c 5 -i 200").unwrap();
    assert!(!out.contains(" 0 received"), "{out}");
    let iters = 200;
    let (ours_opts, theirs_opts) = ("-d rxe0 -g 1 -c -n 200 -s 4096", "-d rxe0 -g 1 -c -n 200 -s 4096");
    let (mut passed, mut last_ack) = (0, 0);
    for round in 0..rounds {
        let server = tool::spawn("rc_pingpong", &ring.path, &format!("{ours_opts} -p {gp}")).unwrap();
        let mut server = Guard(Some(server));
        assert!(tool::wait_listening(gp, Duration::from_secs(60)), "round {round}: our server never listened");
        let retries_before = linux_retries(&mut linux).unwrap();
        linux
            .spawn_bg(&format!("ibv_rc_pingpong {theirs_opts} -p {MGMT_GUEST_PORT} {MGMT_HOST_IP}"), LINUX_LOG)
            .unwrap();
        let (ok, ours) = tool::finish(server.take(), Duration::from_secs(60)).unwrap();
        let done = format!("{iters} iters in");
        let linux_run = finish_linux(&mut linux, ok && ours.contains(&done), retries_before);
        match linux_run {
            Ok(LinuxEnd::Exited(theirs)) if ok && ours.contains(&done) && theirs.contains(&done) => passed += 1,
            Ok(LinuxEnd::LeftBehind { .. }) => last_ack += 1,
            Ok(LinuxEnd::Exited(theirs))
                if last_ack_lost(
                    &linux_report(("Linux", theirs.contains("exit=0"), &theirs), ("ours", ok, &ours)),
                    iters,
                ) =>
            {
                last_ack += 1
            }
            other => {
                let state = ["rdma resource show qp", "rdma statistic show link rxe0/1", "perf"]
                    .map(|c| format!("{c}:\n{}", a.cmd(c).unwrap_or_default()))
                    .join("\n");
                let linux_state = linux.cmd("rdma resource show qp; rdma statistic show").unwrap_or_default();
                let other = other.map(|end| end.text());
                panic!(
                    "round {round} (after {passed} passed, {last_ack} with the last ACK lost): Linux {other:?}\n\
                     --- our server, ok={ok} ---\n{ours}\n--- A ---\n{state}\n--- Linux ---\n{linux_state}\n\
                     capture: {}\nrelay: {}",
                    capture.display(),
                    al.summary()
                );
            }
        }
    }
    eprintln!("{passed} rounds passed, {last_ack} with the last ACK lost, of {rounds}; relay {}", al.summary());
    let _ = std::fs::remove_file(&capture);
}
