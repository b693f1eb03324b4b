//! Property test of the RC transport over the lossy simulated wire, for random mixes
//! of SEND, WRITE, READ and atomics under random drop, duplicate, reorder and corrupt
//! rates up to 10% each. What it proves, every case:
//!
//! - Exactly once, in order: the requester completes every work request once, in
//!   posting order; every SEND is received once, in order, with its data.
//! - Success whenever the wire allows it: either every operation succeeds with the
//!   right data, or one operation ends in RETRY_EXC_ERR, every one before it
//!   succeeded (data checked), every one after it is flushed (WR_FLUSH_ERR) and the
//!   QP is in ERR; no other error is legitimate on this wire.
//! - Only when the wire beat the retry budget: RETRY_EXC_ERR is accepted only if the
//!   wire's journal shows the stuck PSN sent `retry_cnt + 1` times and a frame lost,
//!   corrupted or reordered after each of those sends before the next (a round on a
//!   clean wire must make progress). At these rates seven retries in a row are
//!   sometimes all lost (from the fixed seed, 9 and 22 of 100 000 cases for plain
//!   and coalesced ACKs), so "always completes" is not a property of the
//!   transport but of the wire.
//!
//! Deterministic: proptest runs from a fixed seed, and each case's wire from its own.
//! Case count: `PROPTEST_CASES` (default 64); generator seed: `RXE_PROP_SEED`;
//! `RXE_PROP_STATS=1` prints how the cases ended.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use rdma::core::counters::RxeCounter;
use rdma::rxe::memory::Memory;
use rdma::rxe::qp_state::QpState;
use rdma::rxe::sim::{self, Carried, End, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Instant;
use rdma::rxe::wc::{WcOpcode, WcStatus, WorkCompletion};
use rdma::rxe::wr::{RecvWr, SendWr, Sge, WrOpcode};
use rdma::wire::Psn;
use std::sync::atomic::{AtomicU64, Ordering};

const SLOT: u64 = 0x2000;
const MAX_LEN: u32 = 6000;
/// Per-op slots: A's sources/destinations from 0, B's targets from B_AREA.
const B_AREA: u64 = 0x10_0000;
const MEM: usize = 0x20_0000;

#[derive(Debug, Clone, Copy)]
enum Op {
    Send(u32),
    SendImm(u32),
    Write(u32),
    Read(u32),
    FetchAdd(u64),
    CmpSwap { hit: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..=MAX_LEN).prop_map(Op::Send),
        1 => (0..=MAX_LEN).prop_map(Op::SendImm),
        3 => (0..=MAX_LEN).prop_map(Op::Write),
        3 => (0..=MAX_LEN).prop_map(Op::Read),
        1 => any::<u64>().prop_map(Op::FetchAdd),
        1 => any::<bool>().prop_map(|hit| Op::CmpSwap { hit }),
    ]
}

fn faults() -> impl Strategy<Value = Faults> {
    (0u32..=1000, 0u32..=1000, 0u32..=1000, 0u32..=1000, 0u64..=4).prop_map(
        |(drop, duplicate, reorder, corrupt, jitter_us)| Faults {
            drop,
            duplicate,
            reorder,
            corrupt,
            delay_us: 2,
            jitter_us,
        },
    )
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len).map(|i| (i as u64).wrapping_mul(131).wrapping_add(seed.wrapping_mul(7)) as u8).collect()
}

fn sge(end: &End, offset: u64, len: u32) -> Sge {
    Sge { addr: MEM_BASE + offset, length: len, lkey: end.mr.raw() }
}

/// How a case ended, when it kept the property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Every operation succeeded.
    AllSucceeded,
    /// Operation `op` ran out of retries on a wire that lost every one of them.
    RetryExhausted { op: usize },
}

/// Runs the ops; returns an error message on any violation.
fn check(seed: u64, faults: Faults, mtu: rdma::core::port::IbMtu, ops: &[Op]) -> Result<Outcome, String> {
    check_with(seed, faults, mtu, ops, Default::default())
}

/// Whether the wire, not the transport, is to blame for a RETRY_EXC_ERR: of the
/// frames put on the wire up to the failure (`journal`), the last `retry_cnt + 1`
/// requests that carry the stuck PSN (a READ request carries every PSN of its
/// responses, `mtu` bytes each) must each be followed, before the next one (or
/// the failure), by at least one frame that did not arrive intact and in order.
/// A round on a clean wire ends in an ACK or a response that moves the PSN on.
fn wire_beat_the_retries(journal: &[Carried], stuck: Psn, retry_cnt: u8, mtu: u32) -> Result<(), String> {
    let carries = |c: &Carried| {
        let Some((_, psn)) = c.bth else { return false };
        let psns = c.read_len.map_or(1, |l| l.div_ceil(mtu.max(1)).max(1));
        c.to == 1 && !stuck.is_before(psn) && stuck.diff(psn) < psns as i32
    };
    let sends: Vec<usize> = journal.iter().enumerate().filter(|(_, c)| carries(c)).map(|(i, _)| i).collect();
    let attempts = usize::from(retry_cnt) + 1;
    if sends.len() < attempts {
        return Err(format!("gave up on PSN {} after {} sends; the budget is {attempts}", stuck.value(), sends.len()));
    }
    let last = &sends[sends.len() - attempts..];
    for (n, &from) in last.iter().enumerate() {
        let to = last.get(n + 1).copied().unwrap_or(journal.len());
        if !journal[from..to].iter().any(Carried::faulted) {
            return Err(format!(
                "send {} of {attempts} of PSN {} (at {} us) and all {} frames after it arrived intact and in order, \
                 yet no progress: a retry was spent on a clean wire",
                n + 1,
                stuck.value(),
                journal[from].at.as_micros(),
                to - from
            ));
        }
    }
    Ok(())
}

/// [`check`] with the transports' tunables given.
fn check_with(
    seed: u64,
    faults: Faults,
    mtu: rdma::core::port::IbMtu,
    ops: &[Op],
    config: rdma::rxe::device::Config,
) -> Result<Outcome, String> {
    let mut sim = Sim::new(seed, faults, MEM, config);
    sim.wire.journal = Some(Vec::new());
    if std::env::var("RXE_TRACE").is_ok() {
        sim.wire.observer = Some(Box::new(|now, to, f| match rdma::wire::frame::parse(f) {
            Ok(rx) => {
                let b = rx.repr.roce.bth;
                eprintln!(
                    "t={} ->{to} {:?} psn {} ack {:?}",
                    now.as_micros(),
                    b.opcode,
                    b.psn.value(),
                    rx.repr.roce.ext.aeth.map(|a| a.syndrome)
                );
            }
            Err(e) => eprintln!("t={} ->{to} bad {e:?}", now.as_micros()),
        }));
    }
    let link = Link { mtu, ..Link::default() };
    let [a, b] = sim::connect(&mut sim, &link).map_err(|e| e.to_string())?;
    let rkey = b.mr.raw();
    let mut expected_recv = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let i64_ = i as u64;
        let a_off = i64_ * SLOT;
        let b_off = B_AREA + i64_ * SLOT;
        let b_addr = MEM_BASE + b_off;
        let word = 100 + i64_ * 3;
        let wr = match *op {
            Op::Send(len) | Op::SendImm(len) => {
                sim.nodes[0]
                    .memory_mut()
                    .write(MEM_BASE + a_off, &pattern(len as usize, i64_))
                    .map_err(|e| format!("{e:?}"))?;
                let rsge = [sge(&b, b_off, MAX_LEN)];
                sim.nodes[1].post_recv(b.qp, &RecvWr { wr_id: i64_, sg_list: &rsge }).map_err(|e| e.to_string())?;
                expected_recv.push((i64_, len, matches!(op, Op::SendImm(_))));
                let opcode = if matches!(op, Op::Send(_)) { WrOpcode::Send } else { WrOpcode::SendWithImm };
                SendWr::new(i64_, opcode, &[]).with_imm(i as u32)
            }
            Op::Write(len) => {
                sim.nodes[0]
                    .memory_mut()
                    .write(MEM_BASE + a_off, &pattern(len as usize, i64_))
                    .map_err(|e| format!("{e:?}"))?;
                SendWr::new(i64_, WrOpcode::RdmaWrite, &[]).with_remote(b_addr, rkey)
            }
            Op::Read(len) => {
                sim.nodes[1]
                    .memory_mut()
                    .write(b_addr, &pattern(len as usize, i64_ + 1000))
                    .map_err(|e| format!("{e:?}"))?;
                SendWr::new(i64_, WrOpcode::RdmaRead, &[]).with_remote(b_addr, rkey)
            }
            Op::FetchAdd(add) => {
                sim.nodes[1].memory_mut().write(b_addr, &word.to_ne_bytes()).map_err(|e| format!("{e:?}"))?;
                SendWr::new(i64_, WrOpcode::AtomicFetchAdd, &[]).with_remote(b_addr, rkey).with_atomic(add, 0)
            }
            Op::CmpSwap { hit } => {
                sim.nodes[1].memory_mut().write(b_addr, &word.to_ne_bytes()).map_err(|e| format!("{e:?}"))?;
                let compare = if hit { word } else { word + 1 };
                SendWr::new(i64_, WrOpcode::AtomicCmpSwp, &[]).with_remote(b_addr, rkey).with_atomic(compare, 0xDEAD)
            }
        };
        let len = match *op {
            Op::Send(l) | Op::SendImm(l) | Op::Write(l) | Op::Read(l) => l,
            _ => 8,
        };
        let sges = [sge(&a, a_off, len)];
        let wr = SendWr { sg_list: &sges, ..wr };
        sim.nodes[0].post_send(a.qp, &wr).map_err(|e| e.to_string())?;
    }

    let mut sent: Vec<WorkCompletion> = Vec::new();
    let mut recvd: Vec<WorkCompletion> = Vec::new();
    let want_recv = expected_recv.len();
    let trace = std::env::var("RXE_TRACE").is_ok();
    let mut last_seen = (0, 0, 0);
    // How much of the wire's journal had been written when an error completion
    // first showed: the frames up to the failure.
    let mut failed_at: Option<usize> = None;
    let ok = sim.run_until(Instant::from_micros(30_000_000), |s| {
        if trace {
            let q = s.nodes[0]
                .qp(a.qp)
                .map(|q| (q.req.comp_psn.value(), q.req.psn.value(), q.req.retry_left))
                .unwrap_or_default();
            if q != last_seen {
                eprintln!(
                    "t={} A comp {} psn {} retry {} drops {:?}",
                    s.now.as_micros(),
                    q.0,
                    q.1,
                    q.2,
                    s.nodes[0].stats().drops.nonzero().collect::<Vec<_>>()
                );
                last_seen = q;
            }
        }
        sent.extend(sim::drain_cq(&mut s.nodes[0], a.cq));
        recvd.extend(sim::drain_cq(&mut s.nodes[1], b.cq));
        let failed = sent.iter().any(|w| w.status != WcStatus::Success);
        if failed && failed_at.is_none() {
            failed_at = Some(s.wire.journal.as_ref().map_or(0, Vec::len));
        }
        // After a failure the receives of the flushed SENDs never complete.
        sent.len() >= ops.len() && (recvd.len() >= want_recv || failed)
    });
    // Let stragglers (duplicates, late ACKs) play out: nothing may complete twice.
    sim.run_idle(sim.now + rdma::rxe::time::Duration::from_micros(2_000_000));
    sent.extend(sim::drain_cq(&mut sim.nodes[0], a.cq));
    recvd.extend(sim::drain_cq(&mut sim.nodes[1], b.cq));
    let wire = sim.wire.stats;
    let stats = |sim: &Sim| format!("wire {wire:?}\nA {:?}\nB {:?}", sim.nodes[0].stats(), sim.nodes[1].stats());
    if !ok {
        eprintln!("A qp {:?}", sim.nodes[0].qp(a.qp).map(|q| (&q.req, q.sq.ring.head(), q.sq.ring.tail())));
        eprintln!(
            "recvd {recvd:?}\nB qp {:?}",
            sim.nodes[1].qp(b.qp).map(|q| (q.state, q.resp.psn, q.resp.msg, q.rq.len()))
        );
        return Err(format!(
            "timed out: {} of {} sends, {} of {want_recv} receives; {}",
            sent.len(),
            ops.len(),
            recvd.len(),
            stats(&sim)
        ));
    }

    // Exactly once, in order, on the requester.
    if sent.len() != ops.len() {
        return Err(format!("{} send completions for {} ops", sent.len(), ops.len()));
    }
    if let Some(i) = sent.iter().enumerate().position(|(i, wc)| wc.wr_id != i as u64) {
        return Err(format!("send completion {i} is for wr_id {}: out of order or twice", sent[i].wr_id));
    }
    // A prefix of successes, then at most one RETRY_EXC_ERR and flushes.
    let done = sent.iter().position(|wc| wc.status != WcStatus::Success).unwrap_or(ops.len());
    let outcome = if done == ops.len() {
        Outcome::AllSucceeded
    } else {
        let wc = &sent[done];
        if wc.status != WcStatus::RetryExcErr {
            return Err(format!("op {done}: {wc:?}; only RETRY_EXC_ERR can be the wire's doing\n{}", stats(&sim)));
        }
        if let Some(late) = sent[done + 1..].iter().find(|w| w.status != WcStatus::WrFlushErr) {
            return Err(format!("after the RETRY_EXC_ERR of op {done}: {late:?}, not flushed"));
        }
        let qp = sim.nodes[0].qp(a.qp).ok_or("requester QP gone")?;
        if qp.state != QpState::Err {
            return Err(format!("requester QP in {:?} after RETRY_EXC_ERR", qp.state));
        }
        let exceeded = sim.nodes[0].stats().get(RxeCounter::RetryExceededErr);
        if exceeded != 1 {
            return Err(format!("retry_exceeded_err counted {exceeded} times"));
        }
        let journal = sim.wire.journal.as_deref().unwrap_or(&[]);
        let upto = failed_at.unwrap_or(journal.len()).min(journal.len());
        wire_beat_the_retries(&journal[..upto], qp.req.comp_psn, link.retry_cnt, mtu.bytes())
            .map_err(|e| format!("op {done} RETRY_EXC_ERR without cause: {e}\n{}", stats(&sim)))?;
        Outcome::RetryExhausted { op: done }
    };

    // Receives: exactly once and in order, every SEND that succeeded and maybe
    // some later ones the responder executed before the requester gave up.
    let sends_done = expected_recv.iter().filter(|(id, _, _)| (*id as usize) < done).count();
    if recvd.len() > want_recv || recvd.len() < sends_done || (done == ops.len() && recvd.len() != want_recv) {
        return Err(format!("{} receive completions for {want_recv} sends ({sends_done} acknowledged)", recvd.len()));
    }
    for (wc, (id, len, imm)) in recvd.iter().zip(&expected_recv) {
        let good = wc.wr_id == *id
            && wc.status == WcStatus::Success
            && wc.opcode == WcOpcode::Recv
            && wc.byte_len == *len
            && (!imm || wc.imm_data == *id as u32);
        if !good {
            return Err(format!("receive {id}: {wc:?}"));
        }
    }
    // Data: of every operation that succeeded, and of every SEND received.
    let received = |i: u64| recvd.iter().any(|wc| wc.wr_id == i);
    for (i, op) in ops.iter().enumerate() {
        let i64_ = i as u64;
        let is_send = matches!(op, Op::Send(_) | Op::SendImm(_));
        if i >= done && !(is_send && received(i64_)) {
            continue;
        }
        let a_addr = MEM_BASE + i64_ * SLOT;
        let b_addr = MEM_BASE + B_AREA + i64_ * SLOT;
        let word = 100 + i64_ * 3;
        let mem_a = sim.nodes[0].memory();
        let mem_b = sim.nodes[1].memory();
        let slice = |m: &rdma::rxe::memory::FlatMemory, at: u64, len: usize| {
            m.slice(at, len).map(|s| s.to_vec()).unwrap_or_default()
        };
        let fine = match *op {
            Op::Send(len) | Op::SendImm(len) | Op::Write(len) => {
                slice(mem_b, b_addr, len as usize) == pattern(len as usize, i64_)
            }
            Op::Read(len) => slice(mem_a, a_addr, len as usize) == pattern(len as usize, i64_ + 1000),
            Op::FetchAdd(add) => {
                slice(mem_a, a_addr, 8) == word.to_ne_bytes()
                    && slice(mem_b, b_addr, 8) == word.wrapping_add(add).to_ne_bytes()
            }
            Op::CmpSwap { hit } => {
                let after: u64 = if hit { 0xDEAD } else { word };
                slice(mem_a, a_addr, 8) == word.to_ne_bytes() && slice(mem_b, b_addr, 8) == after.to_ne_bytes()
            }
        };
        if !fine {
            return Err(format!("op {i} {op:?}: wrong data"));
        }
    }
    Ok(outcome)
}

/// Cases run and cases that ended in RETRY_EXC_ERR, per property, for `RXE_PROP_STATS`.
struct Tally {
    name: &'static str,
    cases: AtomicU64,
    exhausted: AtomicU64,
}

static PLAIN: Tally = Tally { name: "plain ACKs", cases: AtomicU64::new(0), exhausted: AtomicU64::new(0) };
static COALESCED: Tally = Tally { name: "coalesced ACKs", cases: AtomicU64::new(0), exhausted: AtomicU64::new(0) };

impl Tally {
    /// Counts an outcome; with `RXE_PROP_STATS` set, prints the tally every 10 000 cases.
    fn count(&self, r: &Result<Outcome, String>) {
        let n = self.cases.fetch_add(1, Ordering::Relaxed) + 1;
        if matches!(r, Ok(Outcome::RetryExhausted { .. })) {
            self.exhausted.fetch_add(1, Ordering::Relaxed);
        }
        if n.is_multiple_of(10_000) && std::env::var_os("RXE_PROP_STATS").is_some() {
            eprintln!(
                "{}: {n} cases run, {} ended in RETRY_EXC_ERR",
                self.name,
                self.exhausted.load(Ordering::Relaxed)
            );
        }
    }
}

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64);
    // A fixed seed keeps CI deterministic; RXE_PROP_SEED explores others.
    let seed = std::env::var("RXE_PROP_SEED").ok().and_then(|c| c.parse().ok()).unwrap_or(0x5EED_0006);
    Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, ..Config::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn rc_ops_exactly_once_in_order_unless_the_wire_beats_every_retry(
        seed in any::<u64>(),
        faults in faults(),
        mtu in prop_oneof![Just(rdma::core::port::IbMtu::Mtu1024), Just(rdma::core::port::IbMtu::Mtu4096), Just(rdma::core::port::IbMtu::Mtu256)],
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let r = check(seed, faults, mtu, &ops);
        PLAIN.count(&r);
        prop_assert!(r.is_ok(), "{}", r.err().unwrap_or_default());
    }

    /// The same with the responders holding ACKs back to coalesce them (the
    /// appliance's setting; the simulated nodes flush them when they poll).
    #[test]
    fn rc_ops_exactly_once_in_order_unless_the_wire_beats_every_retry_with_coalesced_acks(
        seed in any::<u64>(),
        faults in faults(),
        mtu in prop_oneof![Just(rdma::core::port::IbMtu::Mtu1024), Just(rdma::core::port::IbMtu::Mtu4096), Just(rdma::core::port::IbMtu::Mtu256)],
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let config = rdma::rxe::device::Config { coalesce_acks: true, ..Default::default() };
        let r = check_with(seed, faults, mtu, &ops, config);
        COALESCED.count(&r);
        prop_assert!(r.is_ok(), "{}", r.err().unwrap_or_default());
    }
}

/// The same check without faults, as a quick sanity case.
#[test]
fn clean_wire_mix() {
    let ops = [
        Op::Send(10),
        Op::Write(5000),
        Op::Read(3000),
        Op::FetchAdd(3),
        Op::CmpSwap { hit: true },
        Op::SendImm(0),
        Op::Read(0),
    ];
    assert_eq!(check(1, Faults::NONE, rdma::core::port::IbMtu::Mtu1024, &ops), Ok(Outcome::AllSucceeded));
}

#[test]
fn regression_read_under_reorder() {
    let faults = Faults { drop: 0, duplicate: 270, reorder: 339, corrupt: 339, delay_us: 2, jitter_us: 0 };
    let ops = [Op::Read(1281), Op::Read(0), Op::FetchAdd(60560), Op::Write(3133)];
    assert_eq!(check(36280689886359922, faults, rdma::core::port::IbMtu::Mtu256, &ops), Ok(Outcome::AllSucceeded));
}

#[test]
fn regression_sends_under_corruption() {
    let faults = Faults { drop: 94, duplicate: 659, reorder: 163, corrupt: 414, delay_us: 2, jitter_us: 0 };
    let ops = [
        Op::Read(5381),
        Op::Write(4353),
        Op::Send(2305),
        Op::Read(2305),
        Op::Send(3329),
        Op::Read(513),
        Op::Write(3841),
        Op::Send(3841),
        Op::SendImm(2432),
        Op::FetchAdd(16889244751485330506),
        Op::FetchAdd(14272196563086137889),
        Op::Send(5375),
    ];
    assert_eq!(check(13826344051126487921, faults, rdma::core::port::IbMtu::Mtu256, &ops), Ok(Outcome::AllSucceeded));
}

#[test]
fn regression_long_read_under_heavy_loss() {
    let faults = Faults { drop: 796, duplicate: 545, reorder: 882, corrupt: 829, delay_us: 2, jitter_us: 1 };
    let ops = [
        Op::FetchAdd(0),
        Op::Read(1281),
        Op::Send(3585),
        Op::Write(2049),
        Op::SendImm(2049),
        Op::FetchAdd(0),
        Op::Send(513),
        Op::Send(769),
        Op::Read(1281),
        Op::FetchAdd(0),
        Op::FetchAdd(0),
        Op::Send(4609),
        Op::Send(257),
        Op::FetchAdd(0),
        Op::Send(0),
        Op::Read(4097),
        Op::Write(4609),
        Op::Read(0),
        Op::Write(257),
        Op::Read(1281),
        Op::Send(3585),
        Op::Write(769),
        Op::FetchAdd(0),
        Op::Write(1537),
        Op::Send(257),
        Op::Read(4097),
    ];
    assert_eq!(check(5888265388646394779, faults, rdma::core::port::IbMtu::Mtu256, &ops), Ok(Outcome::AllSucceeded));
}

/// Arbitrary well-formed packets (valid ICRC, any opcode, header values and PSN near
/// the expected ones) thrown at a connected QP: the transport drops, NAKs or executes
/// them, and never panics.
mod hostile {
    use super::*;
    use rdma::wire::frame::{FrameRepr, IpPath, Path};
    use rdma::wire::opcode_table::{Header, TABLE};
    use rdma::wire::{
        AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Ecn, ExtHeaders, FethRepr, IethRepr, ImmDtRepr,
        Ipv4Address, Psn, RethRepr, RoceRepr, Syndrome,
    };

    fn packet() -> impl Strategy<Value = (usize, i32, [u64; 4], u8, usize, bool)> {
        (0..TABLE.len(), -8i32..40, any::<[u64; 4]>(), any::<u8>(), 0usize..4200, any::<bool>())
    }

    proptest! {
        #![proptest_config(Config { cases: 512, rng_seed: RngSeed::Fixed(6), failure_persistence: None, ..Config::default() })]

        #[test]
        fn random_packets_never_panic(packets in prop::collection::vec(packet(), 1..40)) {
            let mut sim = Sim::new(3, Faults::NONE, MEM, Default::default());
            let link = Link { mtu: rdma::core::port::IbMtu::Mtu1024, ..Link::default() };
            let [a, b] = sim::connect(&mut sim, &link).expect("connect");
            let sges = [Sge { addr: MEM_BASE, length: 4096, lkey: b.mr.raw() }];
            for i in 0..4 {
                sim.nodes[1].post_recv(b.qp, &RecvWr { wr_id: i, sg_list: &sges }).expect("recv");
                sim.nodes[0].post_send(a.qp, &SendWr::new(i, WrOpcode::RdmaRead, &[Sge { addr: MEM_BASE, length: 3000, lkey: a.mr.raw() }]).with_remote(MEM_BASE, b.mr.raw())).expect("send");
            }
            sim.step();
            for (row, psn_off, vals, syn, len, to_a) in packets {
                let info = &TABLE[row];
                let to = usize::from(to_a);
                let (dest_qpn, base_psn) = if to == 1 { (b.qpn, sim.nodes[1].qp(b.qp).expect("qp").resp.psn) } else { (a.qpn, sim.nodes[0].qp(a.qp).expect("qp").req.comp_psn) };
                let mut ext = ExtHeaders::NONE;
                let small = |v: u64| MEM_BASE + (v % (MEM as u64 + 64));
                for at in info.headers {
                    match at.header {
                        Header::Deth => ext.deth = Some(DethRepr { qkey: vals[0] as u32, src_qpn: (vals[1] as u32) & 0xFF_FFFF }),
                        Header::Reth => ext.reth = Some(RethRepr { va: small(vals[0]), rkey: if vals[3] % 2 == 0 { b.mr.raw() } else { vals[1] as u32 }, dma_len: (vals[2] % 9000) as u32 }),
                        Header::AtomicEth => ext.atomic_eth = Some(AtomicEthRepr { va: small(vals[0]), rkey: b.mr.raw(), swap_add: vals[1], compare: vals[2] }),
                        Header::Aeth => ext.aeth = Some(AethRepr { syndrome: Syndrome::from_byte(syn), msn: vals[3] as u32 & 0xFF_FFFF }),
                        Header::AtomicAckEth => ext.atomic_ack_eth = Some(AtomicAckEthRepr { orig: vals[2] }),
                        Header::ImmDt => ext.immdt = Some(ImmDtRepr { imm: vals[3] as u32 }),
                        Header::Ieth => ext.ieth = Some(IethRepr { rkey: vals[1] as u32 }),
                        Header::Feth => ext.feth = Some(FethRepr { placement_type: syn & 0x0F, selectivity_level: (syn >> 4) & 3 }),
                    }
                }
                let payload = vec![0x5Au8; if info.payload { len } else { 0 }];
                let repr = FrameRepr {
                    path: Path {
                        src_mac: sim::node_mac(1 - to),
                        dst_mac: sim::node_mac(to),
                        ip: IpPath::V4 { src: Ipv4Address([10, 0, 0, 2 - to as u8]), dst: Ipv4Address([10, 0, 0, 1 + to as u8]) },
                        dscp: 0,
                        ecn: if syn & 1 == 0 { Ecn::NotEct } else { Ecn::Ce },
                        hop_limit: 64,
                        src_port: 0xC000,
                    },
                    ip_id: 0,
                    roce: RoceRepr {
                        bth: BthRepr { opcode: info.opcode, solicited: false, mig_req: false, pad_count: 0, tver: 0, pkey: 0xFFFF, fecn: false, becn: false, dest_qpn, ack_req: syn & 2 != 0, psn: Psn::new(base_psn.value().wrapping_add(psn_off as u32)) },
                        ext,
                    },
                    payload: &payload,
                };
                let mut frame = vec![0u8; repr.buffer_len()];
                if repr.emit(&mut frame).is_ok() {
                    sim.inject(to, &frame);
                    sim.step();
                }
            }
            sim.run_until(sim.now + rdma::rxe::time::Duration::from_micros(20_000), |_| false);
        }
    }
}

/// The case `make fuzz` first failed on (the coalesced-ACK property, case ~5 500 of
/// 100 000): 9.5% corruption and 8.8% drops beat all seven retries of op 29's READ.
/// Legitimate: the wire lost a frame in each of its eight rounds; everything before
/// it succeeded, everything after it is flushed.
#[test]
fn regression_retries_exhausted_by_the_wire() {
    let faults = Faults { drop: 875, duplicate: 135, reorder: 81, corrupt: 946, delay_us: 2, jitter_us: 4 };
    let ops = [
        Op::Send(2049),
        Op::Read(4097),
        Op::Write(5121),
        Op::FetchAdd(0),
        Op::Read(0),
        Op::FetchAdd(0),
        Op::FetchAdd(0),
        Op::Write(2049),
        Op::Read(1025),
        Op::Send(2049),
        Op::Send(2049),
        Op::Send(3073),
        Op::FetchAdd(0),
        Op::Write(1025),
        Op::Write(2049),
        Op::FetchAdd(0),
        Op::Send(5121),
        Op::Write(4097),
        Op::Read(4097),
        Op::Read(4097),
        Op::Write(4125),
        Op::Write(3073),
        Op::FetchAdd(0),
        Op::Write(5121),
        Op::Send(5121),
        Op::Send(2049),
        Op::SendImm(0),
        Op::Read(0),
        Op::Read(5121),
        Op::Read(3073),
        Op::Send(1025),
        Op::Read(5121),
        Op::Send(0),
    ];
    let config = rdma::rxe::device::Config { coalesce_acks: true, ..Default::default() };
    let r = check_with(16819607775214746007, faults, rdma::core::port::IbMtu::Mtu1024, &ops, config);
    assert_eq!(r, Ok(Outcome::RetryExhausted { op: 29 }));
}

/// The retry-exhaustion oracle refuses a give-up the wire did not cause: eight
/// sends of the stuck PSN with every frame after them delivered intact.
#[test]
fn retries_spent_on_a_clean_wire_are_refused() {
    let stuck = Psn::new(40);
    let frame = |at: u64, to: usize, psn: u32| Carried {
        at: Instant::from_micros(at),
        to,
        bth: Some((rdma::wire::Opcode::RcSendOnly, Psn::new(psn))),
        read_len: None,
        dropped: false,
        corrupted: false,
        reordered: false,
        duplicated: false,
    };
    // Each round: the stuck request, a later request, the responder's answer.
    let mut journal: Vec<Carried> =
        (0..8).flat_map(|r| [frame(r * 200, 1, 40), frame(r * 200 + 1, 1, 41), frame(r * 200 + 3, 0, 39)]).collect();
    let refused = wire_beat_the_retries(&journal, stuck, 7, 1024);
    assert!(refused.as_ref().is_err_and(|e| e.contains("send 1 of 8")), "{refused:?}");
    // A loss in every round but the fifth: still refused, and that round named.
    for r in [0, 1, 2, 3, 5, 6, 7] {
        journal[r * 3 + 1].dropped = true;
    }
    let refused = wire_beat_the_retries(&journal, stuck, 7, 1024);
    assert!(refused.as_ref().is_err_and(|e| e.contains("send 5 of 8")), "{refused:?}");
    // Corrupted in the fifth too: the wire beat every retry.
    journal[4 * 3 + 2].corrupted = true;
    assert_eq!(wire_beat_the_retries(&journal, stuck, 7, 1024), Ok(()));
    // Seven sends for a budget of eight: gave up early.
    assert!(wire_beat_the_retries(&journal[3..], stuck, 7, 1024).is_err());
    // Unless the first was a READ request whose responses include PSN 40.
    let mut read = journal.clone();
    read[0].bth = Some((rdma::wire::Opcode::RcRdmaReadRequest, Psn::new(38)));
    read[0].read_len = Some(3 * 1024);
    assert_eq!(wire_beat_the_retries(&read, stuck, 7, 1024), Ok(()));
    read[0].read_len = Some(2 * 1024);
    assert!(wire_beat_the_retries(&read, stuck, 7, 1024).is_err(), "PSNs 38 and 39 only");
}
