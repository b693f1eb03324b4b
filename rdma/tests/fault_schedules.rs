//! Exhaustive fault schedules: instead of sampling random fault rates (see
//! rxe_props.rs), every combination of pass / drop / duplicate / delay past the
//! next frame / corrupt is applied to each of the first `FAULT_FRAMES` frames
//! on the simulated wire (requests, ACKs, NAKs and read responses alike, both
//! directions counted in sending order), for every operation kind:
//!
//! - RC: SEND, SEND with immediate, WRITE, WRITE with immediate, READ, each as
//!   1-packet and 3-packet messages, fetch-and-add and compare-and-swap; two of
//!   a kind per run. A handful of faulted frames never beats seven retries, so
//!   every run must complete every work request exactly once, in order, with
//!   the right data, the QPs still in RTS (the shared RC check in
//!   common/rc_ops.rs proves the rest).
//! - UC (SEND, SEND/WRITE with immediate, 1 and 3 packets) and UD (SEND, with
//!   and without immediate): unreliable, so messages may be lost, and, as IBA
//!   and Linux rxe accept a duplicated or late message's first packet as a new
//!   message, delivered twice or late; but the sender completes every work
//!   request once, and whatever the receiver completes is a whole message that
//!   was sent, byte for byte, never a part of one or a mix of two.
//!
//! `FAULT_FRAMES` (default 3: 125 schedules per kind, in `make test`; `make
//! fuzz` runs 6: 15 625 per kind) sets the depth. The count and the time are
//! printed; a failure prints the schedule as a `Fault` list to replay with
//! `FAULT_SCHEDULE="kind:digits"` (digits index `Fault::ALL`).

mod common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant as WallClock;

use common::rc_ops::{Op, Outcome, check_with, pattern};
use rdma::core::port::IbMtu;
use rdma::rxe::ah::AhAttr;
use rdma::rxe::memory::Memory;
use rdma::rxe::qp_state::{QpState, QpType};
use rdma::rxe::sim::{self, Fault, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Duration;
use rdma::rxe::wc::{WcOpcode, WcStatus};
use rdma::rxe::wr::{RecvWr, SendWr, Sge, UdDest, WrOpcode};

/// 1024-byte packets: a 3-packet message is 2 full ones and a short last one.
const MTU: IbMtu = IbMtu::Mtu1024;
const ONE: u32 = 700;
const THREE: u32 = 2500;
/// Where node 1's receive buffers and WRITE targets start, one slot per message.
const RX_AREA: u64 = 0x4_0000;
const SLOT: u64 = 0x1000;
const MEM: usize = 0x8_0000;
/// Receives posted on UC/UD: room for every message twice.
const RECVS: u64 = 6;
const GRH: u32 = 40;

/// One operation kind under test.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Rc(Op),
    Uc { op: UOp, len: u32 },
    Ud { imm: bool },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum UOp {
    Send,
    SendImm,
    WriteImm,
}

fn kinds() -> Vec<(String, Kind)> {
    let mut k = Vec::new();
    for len in [ONE, THREE] {
        let pkts = len.div_ceil(MTU.bytes());
        for op in [Op::Send(len), Op::SendImm(len), Op::Write(len), Op::WriteImm(len), Op::Read(len)] {
            k.push((format!("RC {op:?} ({pkts} pkt)"), Kind::Rc(op)));
        }
        for op in [UOp::Send, UOp::SendImm, UOp::WriteImm] {
            k.push((format!("UC {op:?}({len}) ({pkts} pkt)"), Kind::Uc { op, len }));
        }
    }
    k.push(("RC FetchAdd".into(), Kind::Rc(Op::FetchAdd(0x0101_0101))));
    k.push(("RC CmpSwap".into(), Kind::Rc(Op::CmpSwap { hit: true })));
    k.push(("UD Send".into(), Kind::Ud { imm: false }));
    k.push(("UD SendImm".into(), Kind::Ud { imm: true }));
    k
}

/// Schedule `n` of `5^frames`: frame `i` gets digit `i` of `n` in base 5.
fn schedule(mut n: usize, frames: usize) -> Vec<Fault> {
    (0..frames)
        .map(|_| {
            let f = Fault::ALL[n % Fault::ALL.len()];
            n /= Fault::ALL.len();
            f
        })
        .collect()
}

fn run(kind: Kind, script: &[Fault]) -> Result<(), String> {
    match kind {
        Kind::Rc(op) => {
            let r = check_with(1, Faults::NONE, MTU, &[op, op], Default::default(), script)?;
            if r != Outcome::AllSucceeded {
                return Err(format!("{r:?}: a few faulted frames cannot exhaust seven retries"));
            }
            Ok(())
        }
        Kind::Uc { op, len } => unreliable(QpType::Uc, op, len, script),
        Kind::Ud { imm } => unreliable(QpType::Ud, if imm { UOp::SendImm } else { UOp::Send }, ONE, script),
    }
}

/// UC or UD: two messages from node 0 to node 1.
fn unreliable(qp_type: QpType, op: UOp, len: u32, script: &[Fault]) -> Result<(), String> {
    let mut sim = Sim::new(1, Faults::NONE, MEM, Default::default());
    sim.wire.script = script.to_vec();
    let link = Link { qp_type, mtu: MTU, ..Link::default() };
    let [a, b] = sim::connect(&mut sim, &link).map_err(|e| e.to_string())?;
    let ud = if qp_type == QpType::Ud {
        let attr = AhAttr {
            dgid: sim::node_gid(1),
            sgid_index: 0,
            hop_limit: 64,
            dmac: sim::node_mac(1),
            ..AhAttr::default()
        };
        let ah = sim.nodes[0].create_ah(a.pd, &attr).map_err(|e| e.to_string())?;
        Some(UdDest { ah, remote_qpn: b.qpn, remote_qkey: link.qkey })
    } else {
        None
    };
    // UD receives start with the 40-byte GRH.
    let grh = if ud.is_some() { GRH } else { 0 };
    for r in 0..RECVS {
        let sge = [Sge { addr: MEM_BASE + RX_AREA + r * SLOT, length: SLOT as u32, lkey: b.mr.raw() }];
        let sg_list: &[Sge] = if op == UOp::WriteImm { &[] } else { &sge };
        sim.nodes[1].post_recv(b.qp, &RecvWr { wr_id: 100 + r, sg_list }).map_err(|e| e.to_string())?;
    }
    let messages = 2u64;
    for i in 0..messages {
        let src = MEM_BASE + i * SLOT;
        sim.nodes[0].memory_mut().write(src, &pattern(len as usize, i)).map_err(|e| format!("{e:?}"))?;
        let sge = [Sge { addr: src, length: len, lkey: a.mr.raw() }];
        let wr = match op {
            UOp::Send => SendWr::new(i, WrOpcode::Send, &sge),
            UOp::SendImm => SendWr::new(i, WrOpcode::SendWithImm, &sge).with_imm(i as u32),
            // Message i lands in its own slot, so a mix of two shows.
            UOp::WriteImm => SendWr::new(i, WrOpcode::RdmaWriteWithImm, &sge)
                .with_remote(MEM_BASE + RX_AREA + (RECVS + i) * SLOT, b.mr.raw())
                .with_imm(i as u32),
        };
        let wr = match ud {
            Some(d) => wr.with_ud(d),
            None => wr,
        };
        sim.nodes[0].post_send(a.qp, &wr).map_err(|e| e.to_string())?;
    }
    // No timers on UC/UD: the wire empties and both nodes go idle.
    let idle = sim.run_idle(sim.now + Duration::from_micros(1_000_000));
    let sent = sim::drain_cq(&mut sim.nodes[0], a.cq);
    let got = sim::drain_cq(&mut sim.nodes[1], b.cq);

    let ids: Vec<u64> = sent.iter().map(|w| w.wr_id).collect();
    if ids != [0, 1] || sent.iter().any(|w| w.status != WcStatus::Success) {
        return Err(format!("sender completions {sent:?}: each work request once, in order, successfully"));
    }
    if got.len() as u64 > RECVS {
        return Err(format!("{} receive completions for {messages} messages", got.len()));
    }
    for wc in &got {
        if wc.status != WcStatus::Success {
            return Err(format!("receive {wc:?}: not a success"));
        }
        let slot = wc.wr_id.checked_sub(100).filter(|s| *s < RECVS).ok_or(format!("unknown receive {wc:?}"))?;
        let whole = |at: u64, i: u64| -> bool {
            sim.nodes[1].memory().slice(at, len as usize).is_ok_and(|m| m == pattern(len as usize, i).as_slice())
        };
        let fine = match op {
            UOp::Send | UOp::SendImm => {
                let at = MEM_BASE + RX_AREA + slot * SLOT + u64::from(grh);
                wc.opcode == WcOpcode::Recv
                    && wc.byte_len == len + grh
                    && (0..messages).any(|i| whole(at, i) && (op == UOp::Send || wc.imm_data == i as u32))
            }
            UOp::WriteImm => {
                let i = u64::from(wc.imm_data);
                wc.opcode == WcOpcode::RecvRdmaWithImm
                    && i < messages
                    && whole(MEM_BASE + RX_AREA + (RECVS + i) * SLOT, i)
            }
        };
        if !fine {
            return Err(format!("receive {wc:?} is not a whole message that was sent"));
        }
    }
    for (node, qp) in [(0, a.qp), (1, b.qp)] {
        let state = sim.nodes[node].qp(qp).map(|q| q.state);
        if state != Some(QpState::Rts) {
            return Err(format!("node {node}'s QP is in {state:?}, not RTS"));
        }
    }
    if !idle {
        return Err("still busy after a simulated second".into());
    }
    Ok(())
}

fn frames() -> usize {
    std::env::var("FAULT_FRAMES").ok().and_then(|v| v.parse().ok()).unwrap_or(3).min(8)
}

/// `FAULT_SCHEDULE="<kind name prefix>:<digits>"`, e.g. `RC Send(700):1304`.
fn replay() -> Option<(String, Vec<Fault>)> {
    let v = std::env::var("FAULT_SCHEDULE").ok()?;
    let (kind, digits) = v.rsplit_once(':')?;
    let script = digits.bytes().filter_map(|d| Fault::ALL.get(usize::from(d.wrapping_sub(b'0')))).copied().collect();
    Some((kind.to_string(), script))
}

#[test]
fn every_fault_schedule_of_the_first_frames_keeps_every_guarantee() {
    let kinds = kinds();
    if let Some((prefix, script)) = replay() {
        for (name, kind) in kinds.iter().filter(|(n, _)| n.starts_with(&prefix)) {
            eprintln!("{name} {script:?}: {:?}", run(*kind, &script));
        }
        return;
    }
    let frames = frames();
    let per_kind = Fault::ALL.len().pow(frames as u32);
    let jobs: Vec<(usize, usize)> = (0..kinds.len()).flat_map(|k| (0..per_kind).map(move |n| (k, n))).collect();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let started = WallClock::now();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let j = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(k, n)) = jobs.get(j) else { break };
                    let script = schedule(n, frames);
                    if let Err(e) = run(kinds[k].1, &script) {
                        let digits: String = script
                            .iter()
                            .map(|f| char::from(b'0' + Fault::ALL.iter().position(|x| x == f).unwrap_or(0) as u8))
                            .collect();
                        let mut f = failures.lock().unwrap_or_else(|p| p.into_inner());
                        f.push(format!("{}: {script:?} (FAULT_SCHEDULE=\"{}:{digits}\"): {e}", kinds[k].0, kinds[k].0));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    eprintln!(
        "fault schedules: {} kinds x {per_kind} schedules of the first {frames} frames = {} runs in {:.1} s, {} failed",
        kinds.len(),
        jobs.len(),
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} schedules broke a guarantee; the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(10)].join("\n")
    );
}

#[test]
fn schedules_enumerate_every_combination() {
    let all: std::collections::HashSet<Vec<Fault>> = (0..125).map(|n| schedule(n, 3)).collect();
    assert_eq!(all.len(), 125);
    assert_eq!(schedule(0, 3), [Fault::Pass; 3]);
}
