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

mod common;

use common::rc_ops::{MAX_LEN, MEM, Op, Outcome, check, check_in, check_with, wire_beat_the_retries};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use rdma::rxe::sim::{self, Carried, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Instant;
use rdma::rxe::wr::{RecvWr, SendWr, Sge, WrOpcode};
use rdma::wire::Psn;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Cases run and cases that ended in RETRY_EXC_ERR, per property, for `RXE_PROP_STATS`.
struct Tally {
    name: &'static str,
    cases: AtomicU64,
    exhausted: AtomicU64,
}

static PLAIN: Tally = Tally { name: "plain ACKs", cases: AtomicU64::new(0), exhausted: AtomicU64::new(0) };
static COALESCED: Tally = Tally { name: "coalesced ACKs", cases: AtomicU64::new(0), exhausted: AtomicU64::new(0) };
static ZERO_COPY: Tally = Tally { name: "zero-copy", cases: AtomicU64::new(0), exhausted: AtomicU64::new(0) };

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
        let r = check_with(seed, faults, mtu, &ops, config, &[]);
        COALESCED.count(&r);
        prop_assert!(r.is_ok(), "{}", r.err().unwrap_or_default());
    }

    /// The same with every payload from memory sent zero-copy (headers, the
    /// payload's spans, pad and ICRC; the simulated NIC reads the payload after
    /// the send), retransmissions included.
    #[test]
    fn rc_ops_exactly_once_in_order_unless_the_wire_beats_every_retry_zero_copy(
        seed in any::<u64>(),
        faults in faults(),
        mtu in prop_oneof![Just(rdma::core::port::IbMtu::Mtu1024), Just(rdma::core::port::IbMtu::Mtu4096), Just(rdma::core::port::IbMtu::Mtu256)],
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let r = check_in(seed, faults, mtu, &ops, Default::default(), &[], true);
        ZERO_COPY.count(&r);
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
/// 100 000): 9.5% corruption and 8.8% drops beat all seven retries of an op.
/// Legitimate: the wire lost a frame in each of its eight rounds; everything before
/// it succeeded, everything after it is flushed. (The seed moved when the window's
/// growth after a loss slowed, which changed which frames the wire hits: the first
/// one found nearby that still beats the retries; the old one now succeeds.)
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
    // The window as it was when the seed was found: another one moves which
    // frames the wire hits.
    let config = rdma::rxe::device::Config { coalesce_acks: true, max_inflight_bytes: 96 * 1024, ..Default::default() };
    let r = check_with(16819607775214746036, faults, rdma::core::port::IbMtu::Mtu1024, &ops, config, &[]);
    assert_eq!(r, Ok(Outcome::RetryExhausted { op: 3 }));
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
