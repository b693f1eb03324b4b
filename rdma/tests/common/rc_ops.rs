//! The RC check the property and exhaustive fault-schedule tests share: post a
//! list of operations from node 0 to node 1 over the simulated wire and prove
//! exactly-once, in-order completion with the right data, or a RETRY_EXC_ERR the
//! wire's journal explains, everything after it flushed.

use rdma::core::counters::RxeCounter;
use rdma::rxe::memory::Memory;
use rdma::rxe::qp_state::QpState;
use rdma::rxe::sim::{self, Carried, End, Fault, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Instant;
use rdma::rxe::wc::{WcOpcode, WcStatus, WorkCompletion};
use rdma::rxe::wr::{RecvWr, SendWr, Sge, WrOpcode};
use rdma::wire::Psn;

pub const SLOT: u64 = 0x2000;
pub const MAX_LEN: u32 = 6000;
/// Per-op slots: A's sources/destinations from 0, B's targets from B_AREA.
pub const B_AREA: u64 = 0x10_0000;
pub const MEM: usize = 0x20_0000;

#[derive(Debug, Clone, Copy)]
pub enum Op {
    Send(u32),
    SendImm(u32),
    Write(u32),
    /// RDMA WRITE with immediate: consumes a receive at the responder.
    WriteImm(u32),
    Read(u32),
    FetchAdd(u64),
    CmpSwap {
        hit: bool,
    },
}

pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len).map(|i| (i as u64).wrapping_mul(131).wrapping_add(seed.wrapping_mul(7)) as u8).collect()
}

pub fn sge(end: &End, offset: u64, len: u32) -> Sge {
    Sge { addr: MEM_BASE + offset, length: len, lkey: end.mr.raw() }
}

/// How a case ended, when it kept the property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every operation succeeded.
    AllSucceeded,
    /// Operation `op` ran out of retries on a wire that lost every one of them.
    RetryExhausted { op: usize },
}

/// Runs the ops; returns an error message on any violation.
pub fn check(seed: u64, faults: Faults, mtu: rdma::core::port::IbMtu, ops: &[Op]) -> Result<Outcome, String> {
    check_with(seed, faults, mtu, ops, Default::default(), &[])
}

/// Whether the wire, not the transport, is to blame for a RETRY_EXC_ERR: of the
/// frames put on the wire up to the failure (`journal`), the last `retry_cnt + 1`
/// requests that carry the stuck PSN (a READ request carries every PSN of its
/// responses, `mtu` bytes each) must each be followed, before the next one (or
/// the failure), by at least one frame that did not arrive intact and in order.
/// A round on a clean wire ends in an ACK or a response that moves the PSN on.
pub fn wire_beat_the_retries(journal: &[Carried], stuck: Psn, retry_cnt: u8, mtu: u32) -> Result<(), String> {
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

/// [`check`] with the transports' tunables and a fault script given.
pub fn check_with(
    seed: u64,
    faults: Faults,
    mtu: rdma::core::port::IbMtu,
    ops: &[Op],
    config: rdma::rxe::device::Config,
    script: &[Fault],
) -> Result<Outcome, String> {
    check_in(seed, faults, mtu, ops, config, script, false)
}

/// [`check_with`], the payloads sent from memory (zero-copy: the simulated NIC
/// reads them after each send) when `zero_copy`.
pub fn check_in(
    seed: u64,
    faults: Faults,
    mtu: rdma::core::port::IbMtu,
    ops: &[Op],
    config: rdma::rxe::device::Config,
    script: &[Fault],
    zero_copy: bool,
) -> Result<Outcome, String> {
    let mut sim = Sim::new(seed, faults, MEM, config);
    sim.set_zero_copy(zero_copy);
    sim.wire.journal = Some(Vec::new());
    sim.wire.script = script.to_vec();
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
                expected_recv.push((i64_, len, matches!(op, Op::SendImm(_)), WcOpcode::Recv));
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
            Op::WriteImm(len) => {
                sim.nodes[0]
                    .memory_mut()
                    .write(MEM_BASE + a_off, &pattern(len as usize, i64_))
                    .map_err(|e| format!("{e:?}"))?;
                // The receive takes no data: the payload lands at the RETH's address.
                sim.nodes[1].post_recv(b.qp, &RecvWr { wr_id: i64_, sg_list: &[] }).map_err(|e| e.to_string())?;
                expected_recv.push((i64_, len, true, WcOpcode::RecvRdmaWithImm));
                SendWr::new(i64_, WrOpcode::RdmaWriteWithImm, &[]).with_remote(b_addr, rkey).with_imm(i as u32)
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
            Op::Send(l) | Op::SendImm(l) | Op::Write(l) | Op::WriteImm(l) | Op::Read(l) => l,
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
    let sends_done = expected_recv.iter().filter(|(id, ..)| (*id as usize) < done).count();
    if recvd.len() > want_recv || recvd.len() < sends_done || (done == ops.len() && recvd.len() != want_recv) {
        return Err(format!("{} receive completions for {want_recv} sends ({sends_done} acknowledged)", recvd.len()));
    }
    for (wc, (id, len, imm, opcode)) in recvd.iter().zip(&expected_recv) {
        let good = wc.wr_id == *id
            && wc.status == WcStatus::Success
            && wc.opcode == *opcode
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
        let is_send = matches!(op, Op::Send(_) | Op::SendImm(_) | Op::WriteImm(_));
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
            Op::Send(len) | Op::SendImm(len) | Op::Write(len) | Op::WriteImm(len) => {
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
