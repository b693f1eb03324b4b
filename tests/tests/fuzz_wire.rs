//! Live-wire fuzzing (`make fuzz-wire`): fuzzed frames into a running
//! appliance while a checker RC QP keeps moving verified data through it.
//!
//! Two appliances, A (10.0.0.1, the target) and B (10.0.0.2), on the relay's
//! wire; this process is the host of both rings. A checker RC QP between them
//! does SEND both ways, WRITE and READ back, every byte checked, round after
//! round while an injector thread puts `FUZZ_WIRE_FRAMES` frames (default
//! 1,000,000) on A's side of the wire: golden RoCE frames readdressed to a
//! second, "victim" RC QP of A (from B's addresses, in its PSN window, RETHs
//! into its region) and mutated with the ICRC resealed, plus garbage, ARP
//! storms, IPv4 fragments, truncated and oversize frames (`tests::fuzz`). The
//! victim may legitimately go to ERR; it is re-created then, and every few
//! rounds anyway, so its PSN window comes back. At the end: the checker QPs
//! still RTS, every op verified, A still answers its console, and A's
//! counters (`ip -s link` steering drops, the transport's drops by reason in
//! `perf`, `rdma statistic show`) account for what was sent, in a table.
//!
//! The injector paces itself on the receive queue of A's netdev socket
//! (`/proc/net/udp`): bursts go out while the queue is short, so the relayed
//! checker frames are not crowded out of it.
//!
//! `FUZZ_WIRE_SEED` picks the frames (default 1); `FUZZ_WIRE_BURST` frames
//! per burst (default 32). `make test` runs a short flood of 20,000 frames.

#![deny(unsafe_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tests::fuzz::{Fuzzer, Kind, Target, golden_frames};
use tests::rc::connect;
use tests::relay::{Faults, Relay};
use tests::{Appliance, Ivshmem, Nic, Options, free_udp_port};
use verbs::{AccessFlags, Context, Cq, MemoryRegion, Qp, QpCap, QpInitAttr, SendFlags, SendWr, WrOp};

const REGION: u64 = 64 << 20;
/// `enum ibv_mtu` 3: 1024-byte packets on the default 1500-byte netdevs.
const IBV_MTU_1024: u32 = 3;
/// `enum ibv_qp_state`: RTS.
const IBV_QPS_RTS: u32 = 3;
/// `IBV_QP_STATE`.
const IBV_QP_STATE: u32 = 1;
/// The bound on every wait for something that must happen: generous, as TCG
/// on a busy machine stalls for seconds; not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);
/// Bytes each checker op moves.
const MSG: usize = 4096;
/// The victim's region.
const VICTIM_LEN: usize = 64 << 10;
/// Receives kept posted on the victim, for the SENDs that reach it.
const VICTIM_RECVS: u32 = 16;
/// Checker rounds between re-creations of the victim (its PSN window back
/// at the start, where the readdressed frames aim).
const VICTIM_ROUNDS: u64 = 5;
/// Bytes in A's netdev socket queue under which the next burst goes.
const QUEUE_LOW: u64 = 32 << 10;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

const A_MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 1];
const B_MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 2];

fn mac_text(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// What the injector and the main thread share.
#[derive(Default)]
struct Shared {
    victim_qpn: AtomicU32,
    stop: AtomicBool,
    sent: [AtomicU64; Kind::ALL.len()],
    bytes: AtomicU64,
    /// Set by the injector when it stops on its own (all sent, or A stuck).
    done: AtomicBool,
    error: std::sync::Mutex<Option<String>>,
}

/// The byte message `seq` of side `side` carries at `i`.
fn pattern(side: u8, seq: u64, i: usize) -> u8 {
    (i as u64).wrapping_add(seq.wrapping_mul(131)) as u8 ^ side
}

struct Checker<'a> {
    qa: &'a Qp<'a>,
    qb: &'a Qp<'a>,
    cqa: &'a Cq<'a>,
    cqb: &'a Cq<'a>,
    ma: &'a MemoryRegion<'a>,
    mb: &'a MemoryRegion<'a>,
}

impl Checker<'_> {
    /// Waits for the completions `ids` on `cq`, in any order, every one a success.
    fn complete(cq: &Cq, ids: &[u64], what: &str) -> Result<(), String> {
        let mut left: Vec<u64> = ids.to_vec();
        while !left.is_empty() {
            let wc = cq.wait(WAIT).map_err(|e| format!("{what}: no completion: {e:?}"))?;
            if !wc.status.is_success() {
                return Err(format!("{what}: {wc:?}"));
            }
            let Some(at) = left.iter().position(|&id| id == wc.wr_id) else {
                return Err(format!("{what}: unexpected completion {wc:?}"));
            };
            left.swap_remove(at);
        }
        Ok(())
    }

    fn check(mr: &MemoryRegion, at: usize, side: u8, seq: u64, what: &str) -> Result<(), String> {
        let data = mr.to_vec(at, MSG).map_err(|e| format!("{e:?}"))?;
        match (0..MSG).find(|&i| data[i] != pattern(side, seq, i)) {
            None => Ok(()),
            Some(i) => Err(format!("{what} {seq}: byte {i} is {:#x}, not {:#x}", data[i], pattern(side, seq, i))),
        }
    }

    /// One round: SEND A->B, SEND B->A, WRITE A->B, READ it back; every
    /// byte checked. Returns the ops verified.
    fn round(&self, seq: u64) -> Result<u64, String> {
        let err = |e: verbs::Error| format!("{e:?}");
        let sge = |mr: &MemoryRegion, at: usize| mr.sge(at, MSG as u32).map_err(err);
        let send = |from: &Qp, mr: &MemoryRegion, side: u8| -> Result<(), String> {
            let msg: Vec<u8> = (0..MSG).map(|i| pattern(side, seq, i)).collect();
            mr.write(0, &msg).map_err(err)?;
            let wr = SendWr { wr_id: 2, op: WrOp::Send, sg_list: &[sge(mr, 0)?], flags: SendFlags::SIGNALED, ud: None };
            from.post_send(&[wr]).map_err(err)
        };
        // SEND A->B into B's buffer at MSG, and back.
        self.qb.post_recv(&[(1, &[sge(self.mb, MSG)?][..])]).map_err(err)?;
        send(self.qa, self.ma, 0x00)?;
        Self::complete(self.cqb, &[1], "B's receive")?;
        Self::complete(self.cqa, &[2], "A's send")?;
        Self::check(self.mb, MSG, 0x00, seq, "SEND A->B")?;
        self.qa.post_recv(&[(1, &[sge(self.ma, MSG)?][..])]).map_err(err)?;
        send(self.qb, self.mb, 0x5a)?;
        Self::complete(self.cqa, &[1], "A's receive")?;
        Self::complete(self.cqb, &[2], "B's send")?;
        Self::check(self.ma, MSG, 0x5a, seq, "SEND B->A")?;
        // WRITE A's pattern into B at 2*MSG, READ it back into A at 3*MSG.
        let msg: Vec<u8> = (0..MSG).map(|i| pattern(0xc3, seq, i)).collect();
        self.ma.write(2 * MSG, &msg).map_err(err)?;
        self.ma.fill(3 * MSG, MSG, 0).map_err(err)?;
        let remote = self.mb.addr() + 2 * MSG as u64;
        let rkey = self.mb.rkey();
        let (from, into) = (sge(self.ma, 2 * MSG)?, sge(self.ma, 3 * MSG)?);
        let write = WrOp::Write { remote_addr: remote, rkey };
        let wr = SendWr { wr_id: 3, op: write, sg_list: &[from], flags: SendFlags::SIGNALED, ud: None };
        self.qa.post_send(&[wr]).map_err(err)?;
        Self::complete(self.cqa, &[3], "WRITE")?;
        Self::check(self.mb, 2 * MSG, 0xc3, seq, "WRITE")?;
        let read = WrOp::Read { remote_addr: remote, rkey };
        let wr = SendWr { wr_id: 4, op: read, sg_list: &[into], flags: SendFlags::SIGNALED, ud: None };
        self.qa.post_send(&[wr]).map_err(err)?;
        Self::complete(self.cqa, &[4], "READ")?;
        Self::check(self.ma, 3 * MSG, 0xc3, seq, "READ")?;
        Ok(4)
    }
}

/// The injector: bursts of fuzzed frames, each once A's socket queue is short.
fn inject(relay_to_a: tests::relay::Injector, mut fuzz: Fuzzer, target: Target, frames: u64, shared: &Shared) {
    let burst = env_u64("FUZZ_WIRE_BURST", 32).max(1);
    let mut sent = 0u64;
    let mut t = target;
    while sent < frames && !shared.stop.load(Ordering::Relaxed) {
        // Bounded: a queue that does not drain for a minute is a stuck appliance.
        let since = Instant::now();
        while relay_to_a.queue().is_some_and(|(q, _)| q > QUEUE_LOW) {
            if since.elapsed() > WAIT {
                *shared.error.lock().unwrap() = Some(format!("A's queue did not drain for {WAIT:?}"));
                shared.done.store(true, Ordering::Relaxed);
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        t.qpn = shared.victim_qpn.load(Ordering::Relaxed);
        for _ in 0..burst.min(frames - sent) {
            let kind = fuzz.kind();
            let f = fuzz.frame(kind, &t);
            // A frame the host refuses to send (none should be) is not counted.
            if relay_to_a.send(&f).is_ok() {
                shared.sent[kind as usize].fetch_add(1, Ordering::Relaxed);
                shared.bytes.fetch_add(f.len() as u64, Ordering::Relaxed);
            }
            sent += 1;
        }
    }
    shared.done.store(true, Ordering::Relaxed);
}

/// `name value` counter lines of `perf` (the span table's rows end in a
/// fraction, the header in a word).
fn perf_counters(out: &str) -> BTreeMap<String, u64> {
    out.lines()
        .filter_map(|l| {
            let (name, n) = l.trim().rsplit_once(' ')?;
            Some((name.trim().to_string(), n.parse().ok()?))
        })
        .collect()
}

fn delta(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>, k: &str) -> u64 {
    after.get(k).copied().unwrap_or(0).saturating_sub(before.get(k).copied().unwrap_or(0))
}

/// `make fuzz-wire`: a million frames (about 45 s under TCG here).
#[test]
#[ignore = "long: make fuzz-wire (FUZZ_WIRE_FRAMES, default 1,000,000)"]
fn fuzzed_frames_into_a_live_appliance_leave_its_checker_qp_intact() {
    fuzz_live_appliance(env_u64("FUZZ_WIRE_FRAMES", 1_000_000));
}

/// The short run `make test` has: 20,000 frames, a second of flood.
#[test]
fn twenty_thousand_fuzzed_frames_leave_the_checker_qp_intact() {
    fuzz_live_appliance(20_000);
}

fn fuzz_live_appliance(frames: u64) {
    let seed = env_u64("FUZZ_WIRE_SEED", 1);
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let relay = Relay::start(p1, p2, Faults::default(), seed).unwrap();
    let (s1, s2) = (Ivshmem::temp_plain("fuzz-a", REGION), Ivshmem::temp_plain("fuzz-b", REGION));
    let node = |mac: [u8; 6], local, peer, ip: &str, shm: &Ivshmem| Options {
        nic: Some(Nic::new(&mac_text(mac), local, peer)),
        append: format!("ip={ip}"),
        ivshmem: Some(shm.clone()),
        cmd_timeout: Duration::from_secs(120),
        ..Options::default()
    };
    let mut a = Appliance::boot(node(A_MAC, p1, relay.port_a, "10.0.0.1/24", &s1)).unwrap();
    let mut b = Appliance::boot(node(B_MAC, p2, relay.port_b, "10.0.0.2/24", &s2)).unwrap();
    for x in [&mut a, &mut b] {
        assert!(x.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    }

    let (ca, cb) = (Context::open(&s1.path).unwrap(), Context::open(&s2.path).unwrap());
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    // The checker, in its own PDs: no fuzzed rkey can reach its memory.
    let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
    let ma = pa.reg_mr(4 * MSG, AccessFlags::ALL_REMOTE).unwrap();
    let mb = pb.reg_mr(4 * MSG, AccessFlags::ALL_REMOTE).unwrap();
    let (cqa, cqb) = (da.create_cq(16, 0).unwrap(), db.create_cq(16, 0).unwrap());
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qa = Qp::create(&pa, &cqa, &cqa, None, &attr).unwrap();
    let qb = Qp::create(&pb, &cqb, &cqb, None, &attr).unwrap();
    connect(&qa, qb.qp_num(), 2, IBV_MTU_1024).unwrap();
    connect(&qb, qa.qp_num(), 1, IBV_MTU_1024).unwrap();
    let checker = Checker { qa: &qa, qb: &qb, cqa: &cqa, cqb: &cqb, ma: &ma, mb: &mb };
    // One round before the flood: the path works, ARP is resolved.
    checker.round(0).unwrap();

    // The victim: A's RC QP the fuzzed RoCE frames are addressed to,
    // "connected" to a QP of B that never sends (B only hears A's answers).
    let pv = da.alloc_pd().unwrap();
    let mv = pv.reg_mr(VICTIM_LEN, AccessFlags::ALL_REMOTE).unwrap();
    let cqv = da.create_cq(64, 0).unwrap();
    let pvb = db.alloc_pd().unwrap();
    let cqvb = db.create_cq(64, 0).unwrap();
    let vattr = QpInitAttr {
        cap: QpCap { max_send_wr: 4, max_recv_wr: VICTIM_RECVS, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qvb = Qp::create(&pvb, &cqvb, &cqvb, None, &vattr).unwrap();
    // A victim made while the flood runs can be hit between RTR and RTS:
    // mutated frames flip bits of the victim's QPN, so its neighbours' QPNs
    // (a new QP's among them) get fuzzed requests, and a broken one puts an
    // RTR QP in ERR, from which RTS is refused. Such a QP is dropped and
    // another made.
    let new_victim = || {
        let mut tries = 0;
        let q = loop {
            let q = Qp::create(&pv, &cqv, &cqv, None, &vattr).unwrap();
            match connect(&q, qvb.qp_num(), 2, IBV_MTU_1024) {
                Ok(()) => break q,
                Err(e) => {
                    let state = q.query(IBV_QP_STATE).map(|a| a.attr.qp_state);
                    assert!(tries < 10, "no victim QP connected in {tries} tries: {e:?}, state {state:?}");
                    tries += 1;
                    eprintln!(
                        "fuzz-wire: a new victim QP {} was fuzzed while connecting ({e:?}, state {state:?}); another",
                        q.qp_num()
                    );
                }
            }
        };
        let sge = mv.sge(0, 1024).unwrap();
        for i in 0..VICTIM_RECVS {
            q.post_recv(&[(u64::from(i), &[sge][..])]).unwrap();
        }
        q
    };
    let mut victim = new_victim();
    connect(&qvb, victim.qp_num(), 1, IBV_MTU_1024).unwrap();

    let target = Target {
        mac: A_MAC,
        ip: [10, 0, 0, 1],
        peer_mac: B_MAC,
        peer_ip: [10, 0, 0, 2],
        qpn: victim.qp_num(),
        epsn: 0x1234,
        va: mv.addr(),
        rkey: mv.rkey(),
        len: VICTIM_LEN as u32,
        avoid_qpns: vec![qa.qp_num()],
        avoid_ips: vec![[10, 0, 0, 2]],
    };
    let fuzz = Fuzzer::new(golden_frames().unwrap(), seed).expect("no IPv4 RoCE frame among the golden captures");
    let link_before = tests::iplink::counters(&a.cmd("ip -s link show eth0").unwrap());
    a.cmd("perf reset").unwrap();
    let shared = Arc::new(Shared::default());
    shared.victim_qpn.store(victim.qp_num(), Ordering::Relaxed);
    let injector = relay.injector_to_a().unwrap();
    let socket_drops_before = injector.queue().map_or(0, |(_, d)| d);
    let queue_probe = relay.injector_to_a().unwrap();

    let start = Instant::now();
    let thread = {
        let shared = shared.clone();
        std::thread::spawn(move || inject(injector, fuzz, target, frames, &shared))
    };
    let (mut rounds, mut ops, mut recreated, mut after_error) = (1u64, 4u64, 0u64, 0u64);
    let (mut victim_ok, mut victim_err) = (0u64, 0u64);
    let mut last_report = Instant::now();
    let outcome = (|| -> Result<(), String> {
        while !shared.done.load(Ordering::Relaxed) {
            ops += checker.round(rounds)?;
            rounds += 1;
            // The victim's completions: receives that SENDs filled, or
            // flushed ones after it went to ERR.
            while let Ok(Some(wc)) = cqv.poll_one() {
                if wc.status.is_success() { victim_ok += 1 } else { victim_err += 1 }
            }
            let state = victim.query(IBV_QP_STATE).map_err(|e| format!("{e:?}"))?.attr.qp_state;
            if state != IBV_QPS_RTS || rounds.is_multiple_of(VICTIM_ROUNDS) {
                after_error += u64::from(state != IBV_QPS_RTS);
                recreated += 1;
                drop(std::mem::replace(&mut victim, new_victim()));
                shared.victim_qpn.store(victim.qp_num(), Ordering::Relaxed);
                while let Ok(Some(_)) = cqv.poll_one() {}
            }
            if last_report.elapsed() > Duration::from_secs(30) {
                last_report = Instant::now();
                let sent: u64 = shared.sent.iter().map(|s| s.load(Ordering::Relaxed)).sum();
                let secs = start.elapsed().as_secs_f64();
                eprintln!(
                    "fuzz-wire: {sent} frames in {secs:.0} s ({:.0}/s), {rounds} checker rounds",
                    sent as f64 / secs
                );
            }
        }
        Ok(())
    })();
    shared.stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
    let duration = start.elapsed();
    if let Err(e) = outcome {
        let perf = a.cmd("perf").unwrap_or_default();
        let queue = queue_probe.queue();
        panic!(
            "checker failed after {rounds} rounds: {e}\nrelay: {}\nA's socket (queue, drops): {queue:?}\nA's perf:\n{perf}",
            relay.summary()
        );
    }
    if let Some(e) = shared.error.lock().unwrap().take() {
        panic!("{e}");
    }
    // After the flood: the checker still works, its QPs still RTS.
    for _ in 0..3 {
        ops += checker.round(rounds).unwrap();
        rounds += 1;
    }
    for (name, q) in [("A", &qa), ("B", &qb)] {
        assert_eq!(q.query(IBV_QP_STATE).unwrap().attr.qp_state, IBV_QPS_RTS, "checker QP on {name}");
    }
    assert!(a.cmd("version").unwrap().contains("RoCE appliance"), "A no longer answers its console");

    let socket_drops = queue_probe.queue().map_or(0, |(_, d)| d).saturating_sub(socket_drops_before);
    let link_after = tests::iplink::counters(&a.cmd("ip -s link show eth0").unwrap());
    let perf = perf_counters(&a.cmd("perf").unwrap());
    // Read again: the cross check of the two below holds only if no frame
    // came between the readings.
    let link_again = tests::iplink::counters(&a.cmd("ip -s link show eth0").unwrap());
    let stats = a.cmd("rdma statistic show").unwrap();

    // The table.
    let sent: Vec<u64> = shared.sent.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    let total: u64 = sent.iter().sum();
    let secs = duration.as_secs_f64();
    println!(
        "\nfuzz-wire: seed {seed}, {total} frames ({} MB) in {secs:.1} s: {:.0} frames/s",
        shared.bytes.load(Ordering::Relaxed) >> 20,
        total as f64 / secs
    );
    println!("{:<26} {:>10}", "frames sent", "count");
    for k in Kind::ALL {
        println!("{:<26} {:>10}", k.name(), sent[k as usize]);
    }
    println!("{:<26} {:>10}", "dropped by the host (full socket queue)", socket_drops);
    println!("\nA's eth0 (since the flood began):");
    for k in ["rx packets", "rx errors", "rx dropped", "steer rdma", "steer arp", "steer ndisc", "steer stack"] {
        println!("  {:<24} {:>10}", k, delta(&link_after, &link_before, k));
    }
    println!("\n{:<24} {:>10} {:>10}", "drop reason", "steering", "rdma");
    let mut by_reason = BTreeMap::new();
    for r in vocab_reasons() {
        let (l, t) = (delta(&link_after, &link_before, r), perf.get(r).copied().unwrap_or(0));
        if l + t > 0 {
            println!("{r:<24} {l:>10} {t:>10}");
        }
        by_reason.insert(r, l + t);
    }
    println!("\ntransport (perf):");
    for (k, v) in perf.iter().filter(|(k, _)| !by_reason.contains_key(k.as_str())) {
        println!("  {k:<24} {v:>10}");
    }
    println!("\nrdma statistic show:\n{}", stats.trim());
    println!(
        "\nchecker: {rounds} rounds, {ops} ops verified (SEND both ways, WRITE, READ; {} KiB checked), QPs RTS",
        ops * MSG as u64 / 1024
    );
    println!(
        "victim: re-created {recreated} times ({after_error} after leaving RTS), {victim_ok} receives filled, \
         {victim_err} flushed or failed"
    );
    println!("relay (checker traffic): {}", relay.summary());

    // Every kind sent left its mark in the counters it should.
    let r = |name: &str| by_reason.get(name).copied().unwrap_or(0);
    let kinds = |k: Kind| sent[k as usize] > 0;
    if kinds(Kind::Fragment) {
        // Steering gives IPv4 fragments to smoltcp whatever their port (only
        // the first would show one; RoCE sets DF), so they are counted there.
        let stack = delta(&link_after, &link_before, "steer stack");
        assert!(r("ip_fragment") + stack > 0, "fragments sent, none counted");
    }
    if kinds(Kind::BadIcrc) {
        assert!(r("bad_icrc") > 0, "stale ICRCs sent, none counted");
    }
    if kinds(Kind::Truncated) {
        assert!(r("truncated") + r("bad_length") + r("runt") > 0, "truncated frames sent, none counted");
    }
    if kinds(Kind::Arp) {
        assert!(delta(&link_after, &link_before, "steer arp") > 0, "ARP sent, none steered to ARP");
    }
    if kinds(Kind::Garbage) {
        let g = r("otherhost") + r("ethertype") + r("runt") + r("bad_ip_version") + r("not_udp") + r("truncated");
        assert!(g > 0, "garbage sent, none counted");
    }
    if kinds(Kind::Mutated) {
        let transport: u64 = vocab_reasons().iter().skip_while(|&&n| n != "no_such_qp").map(|n| r(n)).sum();
        assert!(transport > 0, "mutated frames sent, no transport drop counted");
    }
    // Every frame A took is accounted for once: steered somewhere, dropped
    // by steering for a reason, or a runt.
    let d = |k| delta(&link_after, &link_before, k);
    let steered = ["steer rdma", "steer arp", "steer ndisc", "steer stack", "rx dropped", "rx errors"];
    assert!(d("rx packets") > 0);
    assert_eq!(d("rx packets"), steered.iter().map(|k| d(k)).sum::<u64>(), "{link_after:?}");
    // And every frame steered to RDMA was either refused by the frame
    // parser, for a reason, or received by the transport (`rcvd_pkts`,
    // which the transport's own drops are part of).
    let parser: u64 = rdma::wire::frame::DropReason::ALL
        .iter()
        .filter(|r| !r.is_transport())
        .map(|r| perf.get(r.name()).copied().unwrap_or(0))
        .sum();
    let rcvd = perf.get("rcvd_pkts").copied().unwrap_or(0);
    if link_again.get("steer rdma") == link_after.get("steer rdma") {
        assert_eq!(d("steer rdma"), parser + rcvd, "steered to RDMA vs parser drops + rcvd_pkts");
        println!(
            "accounting: {} frames received = steered + dropped; {} to RDMA = {parser} refused by the parser + {rcvd} received by the transport",
            d("rx packets"),
            d("steer rdma")
        );
    } else {
        println!("accounting: RoCE frames arrived between the readings; the RDMA cross check is skipped");
    }
}

/// The drop reasons' counter names, in counter order (the firmware's
/// vocabulary, through the codec's re-export).
fn vocab_reasons() -> Vec<&'static str> {
    rdma::wire::frame::DropReason::ALL.iter().map(|r| r.name()).collect()
}
