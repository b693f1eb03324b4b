//! The responder (IBA vol. 1 9.7.5.1 "responder behavior", 9.7.4.1 PSN checks,
//! 9.4 operations; Linux `rxe_resp.c`): checks each request against the expected PSN,
//! the message in progress, the receive queue and the memory it names, then executes
//! it and answers.
//!
//! Every request ends in a [`Verdict`], the answer the transport owes: done (ACK it if
//! asked), RNR NAK, NAK with a code, or a silent drop with a counted reason. RC turns
//! NAKs into packets and, for the errors the spec calls fatal (invalid request, remote
//! access, remote operational), takes the QP to the error state after sending them.
//! UC has no responses: every failure drops the rest of the message.
//!
//! RC PSN rules (9.7.4.1.x): a PSN ahead of the expected one gets one sequence NAK and
//! then silence until the expected PSN arrives; a PSN behind it is a duplicate: SENDs and
//! WRITEs are ACKed again without being executed, READs are answered again from the
//! saved responder resources (re-reading memory, as the spec allows), atomics are
//! answered with the saved original value and never executed twice.
//!
//! Payloads reach memory only from frames [`crate::wire::frame::parse`] accepted, the
//! ICRC checked over the whole frame first: a payload is then copied into its MR once
//! (here, and READ responses by the completer). The check and the copy stay two passes
//! over the received bytes on purpose: a copy that computed the ICRC as it moved would
//! have written the bytes before knowing they were good, into memory no retransmission
//! can always repair (a receive buffer the application reads on completion). On
//! transmit the ICRC is computed as the payload moves, or over it in place (zero-copy,
//! [`super::gather`]).

use crate::core::counters::RxeCounter;
use crate::wire::aeth::Syndrome;
use crate::wire::frame::{IpPath, RxFrame};
use crate::wire::{AethRepr, AtomicAckEthRepr, ExtHeaders, NakCode, Opcode, Operation, Position, Psn, RoceRepr};

use super::completer;
use super::device::Device;
use super::event::AsyncEvent;
use super::mem_ops;
use super::memory::Memory;
use super::mr::{self, AccessFlags};
use super::mw;
use super::qp::{InMessage, Qp, ReadReply, Resource};
use super::qp_state::{QpState, QpType};
use super::sgl;
use super::sink::FrameSink;
use super::time::Instant;
use super::tx;
use super::wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion};
use vocab::DropReason;

/// The length of the GRH Linux puts in front of UD data.
pub const GRH_LEN: usize = 40;

/// What a request deserves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Executed; the expected PSN moves on.
    Done,
    /// No receive WQE: RNR NAK (RC), drop the message (UC).
    Rnr,
    /// Refused with this NAK code.
    Nak(NakCode),
    /// Dropped silently.
    Drop(DropReason),
}

/// Handles one request packet for `qp`.
pub fn on_request<M: Memory, S: FrameSink + ?Sized>(
    qp: &mut Qp,
    dev: &mut Device<M>,
    rx: &RxFrame<'_>,
    frame: &[u8],
    sink: &mut S,
    now: Instant,
) {
    let _ = now;
    if !qp.resp.established {
        qp.resp.established = true;
        if qp.state == QpState::Rtr {
            dev.event(AsyncEvent::CommEst { qpn: qp.qpn });
        }
    }
    match qp.qp_type {
        QpType::Rc => rc(qp, dev, rx, sink),
        QpType::Uc => uc(qp, dev, rx),
        QpType::Ud | QpType::Gsi => ud(qp, dev, rx, frame),
    }
}

fn ack<M, S: FrameSink + ?Sized>(qp: &mut Qp, dev: &mut Device<M>, sink: &mut S, psn: Psn, syndrome: Syndrome) {
    let Some(path) = qp.path else { return };
    let msn = qp.resp.msn;
    // An acknowledgement the NIC had no room for is owed, not lost: the
    // requester would otherwise sit out a whole retransmit timeout. A later
    // one replaces it (ACKs are cumulative, and a NAK is about the newest state).
    let sent = tx::send_ack(sink, &mut dev.stats, &mut dev.ip_id, &path, qp.attr.dest_qp_num, psn, syndrome, msn);
    qp.resp.owed_ack = if sent { None } else { Some((psn, syndrome)) };
}

/// The ACK a request asked for: sent now, or held back to be coalesced with
/// the next ones (`Config::coalesce_acks`; it replaces whatever was owed,
/// as it covers every PSN up to its own).
fn ack_requested<M, S: FrameSink + ?Sized>(qp: &mut Qp, dev: &mut Device<M>, sink: &mut S, psn: Psn) {
    if dev.config.coalesce_acks {
        qp.resp.owed_ack = Some((psn, Syndrome::ACK));
    } else {
        ack(qp, dev, sink, psn, Syndrome::ACK);
    }
}

/// Sends an acknowledgement owed since the NIC refused it; call from `poll`.
pub fn send_owed_ack<M, S: FrameSink + ?Sized>(qp: &mut Qp, dev: &mut Device<M>, sink: &mut S) {
    if let Some((psn, syndrome)) = qp.resp.owed_ack {
        ack(qp, dev, sink, psn, syndrome);
    }
}

fn rc<M: Memory, S: FrameSink + ?Sized>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>, sink: &mut S) {
    let bth = rx.repr.roce.bth;
    let psn = bth.psn;
    if qp.resp.read.is_some() {
        send_read(qp, dev, sink);
        if qp.resp.read.is_some() {
            dev.stats.drop(DropReason::ResponderBusy);
            return;
        }
    }
    let d = psn.diff(qp.resp.psn);
    if d > 0 {
        dev.stats.inc(RxeCounter::OutOfSeqRequest);
        if qp.resp.nak_sent {
            dev.stats.drop(DropReason::OutOfSequence);
        } else {
            qp.resp.nak_sent = true;
            let expected = qp.resp.psn;
            ack(qp, dev, sink, expected, Syndrome::Nak(NakCode::PsnSequenceError));
        }
        return;
    }
    if d < 0 {
        dev.stats.inc(RxeCounter::DuplicateRequest);
        duplicate(qp, dev, rx, sink);
        return;
    }
    qp.resp.nak_sent = false;
    let verdict = match check_sequence(qp, rx) {
        Err(v) => v,
        Ok(()) => match rx.info.operation {
            Operation::Send => send(qp, dev, rx),
            Operation::RdmaWrite => write(qp, dev, rx),
            Operation::RdmaReadRequest => read(qp, dev, rx),
            Operation::CompareSwap | Operation::FetchAdd => atomic(qp, dev, rx, sink),
            Operation::Flush => flush(qp, dev, rx),
            Operation::AtomicWrite => atomic_write(qp, dev, rx),
            _ => Verdict::Drop(DropReason::Unsupported),
        },
    };
    match verdict {
        Verdict::Done => {
            qp.resp.psn = match rx.info.operation {
                // A READ takes one PSN per response packet (9.7.1.2).
                Operation::RdmaReadRequest => psn.wrapping_add(qp.packets(read_len(rx))),
                _ => psn.next(),
            };
            match rx.info.operation {
                Operation::RdmaReadRequest | Operation::Flush | Operation::AtomicWrite => send_read(qp, dev, sink),
                Operation::CompareSwap | Operation::FetchAdd => {}
                _ if bth.ack_req => ack_requested(qp, dev, sink, psn),
                _ => {}
            }
        }
        Verdict::Rnr => {
            dev.stats.inc(RxeCounter::SendRnrErr);
            ack(qp, dev, sink, psn, Syndrome::RnrNak { timer: qp.attr.min_rnr_timer });
        }
        Verdict::Nak(code) => {
            ack(qp, dev, sink, psn, Syndrome::Nak(code));
            let event = match code {
                NakCode::RemoteAccessError => AsyncEvent::QpAccessErr { qpn: qp.qpn },
                NakCode::InvalidRequest => AsyncEvent::QpReqErr { qpn: qp.qpn },
                _ => AsyncEvent::QpFatal { qpn: qp.qpn },
            };
            dev.event(event);
            completer::enter_error(qp, dev);
        }
        Verdict::Drop(reason) => dev.stats.drop(reason),
    }
}

fn read_len(rx: &RxFrame<'_>) -> u32 {
    rx.repr.roce.ext.reth.map_or(0, |r| r.dma_len)
}

/// The opcode must fit the message in progress (9.7.4.1.x, C9-??: "opcode sequence").
/// Also checks the payload size rules for SEND and WRITE packets.
fn check_sequence(qp: &Qp, rx: &RxFrame<'_>) -> Result<(), Verdict> {
    let op = rx.info.operation;
    let pos = rx.info.position;
    let ok = match (qp.resp.msg, pos.starts_message()) {
        (InMessage::None, true) => true,
        (InMessage::Send { .. }, false) => op == Operation::Send,
        (InMessage::Write { .. }, false) => op == Operation::RdmaWrite,
        _ => false,
    };
    if !ok {
        return Err(Verdict::Nak(NakCode::InvalidRequest));
    }
    if matches!(op, Operation::Send | Operation::RdmaWrite) {
        let len = rx.repr.payload.len();
        let mtu = qp.mtu() as usize;
        let size_ok = match pos {
            Position::First | Position::Middle => len == mtu,
            Position::Last => (1..=mtu).contains(&len),
            Position::Only => len <= mtu,
        };
        if !size_ok {
            return Err(Verdict::Nak(NakCode::InvalidRequest));
        }
    }
    Ok(())
}

/// Makes sure a receive WQE is at hand for a message: the RQ's head, or one taken
/// from the SRQ. Returns `false` when there is none.
fn have_recv_wqe<M>(qp: &mut Qp, dev: &mut Device<M>) -> bool {
    let Some(srq_handle) = qp.srq else { return !qp.rq.is_empty() };
    if qp.resp.has_held {
        return true;
    }
    let Some(srq) = dev.srqs.get_mut(srq_handle.0) else { return false };
    let Some((wqe, sges)) = srq.queue.front() else { return false };
    qp.resp.held.wr_id = wqe.wr_id;
    qp.resp.held.length = wqe.length;
    qp.resp.held.sges.clear();
    qp.resp.held.sges.extend_from_slice(sges);
    qp.resp.has_held = true;
    srq.queue.pop();
    if srq.take_limit_event() {
        dev.event(AsyncEvent::SrqLimitReached(srq_handle));
    }
    true
}

/// The receive WQE in use: `(wr_id, length)`.
fn recv_wqe(qp: &Qp) -> Option<(u64, u64)> {
    if qp.srq.is_some() {
        qp.resp.has_held.then_some((qp.resp.held.wr_id, qp.resp.held.length))
    } else {
        qp.rq.front().map(|(w, _)| (w.wr_id, w.length))
    }
}

/// Writes into the receive WQE in use at `offset`.
fn scatter_recv<M: Memory>(qp: &Qp, dev: &mut Device<M>, offset: u64, data: &[u8]) -> Result<(), sgl::SglError> {
    let sges = if qp.srq.is_some() { &qp.resp.held.sges[..] } else { qp.rq.front().map_or(&[][..], |(_, s)| s) };
    let Device { mem, mrs, .. } = dev;
    sgl::scatter(sges, offset, data, mrs, qp.pd, mem)
}

/// Completes the receive WQE in use.
fn finish_recv<M>(qp: &mut Qp, dev: &mut Device<M>, mut wc: WorkCompletion) {
    let Some((wr_id, _)) = recv_wqe(qp) else { return };
    if qp.srq.is_some() {
        qp.resp.has_held = false;
    } else {
        qp.rq.pop();
    }
    wc.wr_id = wr_id;
    if wc.status == WcStatus::Success {
        dev.stats.inc(RxeCounter::RdmaRecvs);
    }
    dev.complete(qp.recv_cq, wc);
}

fn recv_wc(qp: &Qp, status: WcStatus, opcode: WcOpcode, byte_len: u64) -> WorkCompletion {
    let mut wc = WorkCompletion::new(0, status, opcode, qp.qpn);
    wc.byte_len = u32::try_from(byte_len).unwrap_or(u32::MAX);
    wc.src_qp = qp.attr.dest_qp_num;
    wc
}

/// A SEND packet, the expected one.
fn send<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>) -> Verdict {
    let pos = rx.info.position;
    let offset = match qp.resp.msg {
        InMessage::Send { offset } => offset,
        _ => {
            if !have_recv_wqe(qp, dev) {
                return Verdict::Rnr;
            }
            0
        }
    };
    let Some((_, length)) = recv_wqe(qp) else { return Verdict::Rnr };
    let payload = rx.repr.payload;
    let end = offset + payload.len() as u64;
    if end > length {
        finish_recv(qp, dev, recv_wc(qp, WcStatus::LocLenErr, WcOpcode::Recv, end));
        qp.resp.msg = InMessage::None;
        return Verdict::Nak(NakCode::InvalidRequest);
    }
    if scatter_recv(qp, dev, offset, payload).is_err() {
        finish_recv(qp, dev, recv_wc(qp, WcStatus::LocProtErr, WcOpcode::Recv, end));
        qp.resp.msg = InMessage::None;
        return Verdict::Nak(NakCode::RemoteOperationalError);
    }
    if !pos.ends_message() {
        qp.resp.msg = InMessage::Send { offset: end };
        return Verdict::Done;
    }
    let mut wc = recv_wc(qp, WcStatus::Success, WcOpcode::Recv, end);
    wc.solicited = rx.repr.roce.bth.solicited;
    let ext = rx.repr.roce.ext;
    if let Some(imm) = ext.immdt {
        wc.imm_data = imm.imm;
        wc.wc_flags.0 |= WcFlags::WITH_IMM;
    }
    if let Some(ieth) = ext.ieth {
        // The named rkey (a fast-register MR or a type 2B window of this QP)
        // is invalidated before the receive completes (IBA 9.4.1.3.1 / o10-37).
        // When it cannot be, the receive completes with REM_INV_REQ_ERR and
        // the QP errs, as rxe's class J handling does; rxe then stays silent
        // and lets the requester time out, here it is also told with an
        // invalid-request NAK, so it fails at once instead of after its retries.
        if mem_ops::invalidate(dev, qp.pd, qp.qpn, ieth.rkey).is_err() {
            finish_recv(qp, dev, recv_wc(qp, WcStatus::RemInvReqErr, WcOpcode::Recv, end));
            qp.resp.msg = InMessage::None;
            return Verdict::Nak(NakCode::InvalidRequest);
        }
        wc.imm_data = ieth.rkey;
        wc.wc_flags.0 |= WcFlags::WITH_INV;
    }
    finish_recv(qp, dev, wc);
    qp.resp.msg = InMessage::None;
    qp.resp.msn = qp.resp.msn.wrapping_add(1);
    Verdict::Done
}

/// Where a checked remote access lands: the MR by its current key (0 for a
/// zero-length access) and the memory address of the first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Target {
    mr_key: u32,
    at: u64,
}

/// Looks up an rkey for a remote access of `rights` over `va..va + len`.
///
/// The window comes first (IBA 10.6.7.2; `rxe_resp.c`'s `check_rkey`): an rkey in
/// the windows' index range is checked against the window alone (its PD, its QP
/// for type 2B, its rights and its range), then the bytes are found through the
/// MR it is bound to, whose own remote rights do not matter. Any other rkey must
/// be an MR's current rkey.
///
/// A zero-length access touches no memory, so neither its rkey nor its address is
/// looked at (C9-88: a zero-length RDMA READ or WRITE need not carry valid ones;
/// Linux rxe skips the check the same way). The QP's own access rights still apply.
fn check_rkey<M>(qp: &Qp, dev: &Device<M>, rkey: u32, va: u64, len: u64, rights: u32) -> Result<Target, Verdict> {
    let denied = Verdict::Nak(NakCode::RemoteAccessError);
    if !qp.attr.qp_access_flags.has(rights & AccessFlags::QP_ALL) {
        return Err(denied);
    }
    if len == 0 {
        return Ok(Target { mr_key: 0, at: va });
    }
    if mw::is_mw_key(rkey) {
        let w = mw::find(&dev.mws, rkey).ok_or(denied)?;
        w.check(qp.qpn, qp.pd, va, len, rights).map_err(|_| denied)?;
        let m = mr::find(&dev.mrs, w.mr_key).ok_or(denied)?;
        let at = m.check(m.pd, va, len, 0).map_err(|_| denied)?;
        return Ok(Target { mr_key: w.mr_key, at });
    }
    let m = mr::find(&dev.mrs, rkey).ok_or(denied)?;
    if m.rkey() != Some(rkey) {
        return Err(denied);
    }
    let at = m.check(qp.pd, va, len, rights).map_err(|_| denied)?;
    Ok(Target { mr_key: rkey, at })
}

/// Writes `data` at iova `va` of a checked target, page by page.
fn put<M: Memory>(dev: &mut Device<M>, t: Target, va: u64, data: &[u8]) -> bool {
    let Device { mem, mrs, .. } = dev;
    mr::find(mrs, t.mr_key)
        .is_some_and(|m| m.pieces(va, data.len(), |at, r| data.get(r).is_some_and(|b| mem.write(at, b).is_ok())))
}

/// An RDMA WRITE packet, the expected one.
fn write<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>) -> Verdict {
    let pos = rx.info.position;
    let msg = match qp.resp.msg {
        InMessage::Write { .. } => qp.resp.msg,
        _ => {
            let Some(reth) = rx.repr.roce.ext.reth else { return Verdict::Nak(NakCode::InvalidRequest) };
            if let Err(v) = check_rkey(qp, dev, reth.rkey, reth.va, u64::from(reth.dma_len), AccessFlags::REMOTE_WRITE)
            {
                return v;
            }
            InMessage::Write { rkey: reth.rkey, va: reth.va, remaining: reth.dma_len, total: reth.dma_len }
        }
    };
    let InMessage::Write { rkey, va, remaining, total } = msg else { return Verdict::Nak(NakCode::InvalidRequest) };
    let payload = rx.repr.payload;
    let len = payload.len() as u32;
    if len > remaining || (pos.ends_message() && len != remaining) {
        return Verdict::Nak(NakCode::InvalidRequest);
    }
    let imm = rx.repr.roce.ext.immdt;
    if imm.is_some() && !have_recv_wqe(qp, dev) {
        return Verdict::Rnr;
    }
    if len > 0 {
        // The MR may have been invalidated or deregistered since the FIRST packet.
        let target = match check_rkey(qp, dev, rkey, va, u64::from(len), AccessFlags::REMOTE_WRITE) {
            Ok(t) => t,
            Err(v) => return v,
        };
        if !put(dev, target, va, payload) {
            return Verdict::Nak(NakCode::RemoteOperationalError);
        }
    }
    if !pos.ends_message() {
        qp.resp.msg = InMessage::Write { rkey, va: va.wrapping_add(u64::from(len)), remaining: remaining - len, total };
        return Verdict::Done;
    }
    if let Some(imm) = imm {
        let mut wc = recv_wc(qp, WcStatus::Success, WcOpcode::RecvRdmaWithImm, u64::from(total));
        wc.solicited = rx.repr.roce.bth.solicited;
        wc.imm_data = imm.imm;
        wc.wc_flags.0 |= WcFlags::WITH_IMM;
        finish_recv(qp, dev, wc);
    }
    qp.resp.msg = InMessage::None;
    qp.resp.msn = qp.resp.msn.wrapping_add(1);
    Verdict::Done
}

/// An RDMA READ request, the expected one: check, save the resource, start replying.
fn read<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>) -> Verdict {
    let Some(reth) = rx.repr.roce.ext.reth else { return Verdict::Nak(NakCode::InvalidRequest) };
    if let Err(v) = check_rkey(qp, dev, reth.rkey, reth.va, u64::from(reth.dma_len), AccessFlags::REMOTE_READ) {
        return v;
    }
    let psn = rx.repr.roce.bth.psn;
    let packets = qp.packets(reth.dma_len);
    let max = usize::from(qp.attr.max_dest_rd_atomic);
    qp.resp.save(Resource::Read { first: psn, last: psn.wrapping_add(packets - 1) }, max);
    qp.resp.msn = qp.resp.msn.wrapping_add(1);
    qp.resp.read = Some(ReadReply { rkey: reth.rkey, va: reth.va, length: reth.dma_len, offset: 0, first_psn: psn });
    Verdict::Done
}

/// An atomic, the expected one: executed here, exactly once.
fn atomic<M: Memory, S: FrameSink + ?Sized>(
    qp: &mut Qp,
    dev: &mut Device<M>,
    rx: &RxFrame<'_>,
    sink: &mut S,
) -> Verdict {
    let Some(a) = rx.repr.roce.ext.atomic_eth else { return Verdict::Nak(NakCode::InvalidRequest) };
    if a.va % 8 != 0 {
        return Verdict::Nak(NakCode::InvalidRequest);
    }
    let at = match check_rkey(qp, dev, a.rkey, a.va, 8, AccessFlags::REMOTE_ATOMIC) {
        Ok(t) => t.at,
        Err(v) => return v,
    };
    let result = match rx.info.operation {
        Operation::CompareSwap => dev.mem.compare_swap(at, a.compare, a.swap_add),
        _ => dev.mem.fetch_add(at, a.swap_add),
    };
    let Ok(orig) = result else { return Verdict::Nak(NakCode::RemoteOperationalError) };
    let psn = rx.repr.roce.bth.psn;
    qp.resp.save(Resource::Atomic { psn, orig }, usize::from(qp.attr.max_dest_rd_atomic));
    qp.resp.msn = qp.resp.msn.wrapping_add(1);
    atomic_ack(qp, dev, sink, psn, orig);
    Verdict::Done
}

/// A FLUSH (IBA 1.5 A19), the expected one. The transport's memory is coherent
/// and volatile: once earlier writes were executed (they were, in PSN order),
/// they are globally visible, so a global-visibility FLUSH has nothing left to
/// do but answer. Persistence needs an MR with FLUSH_PERSISTENT, which no MR
/// here has (there is no persistent memory), so it is refused as an access
/// error, as rxe refuses it on MRs not backed by pmem.
fn flush<M>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>) -> Verdict {
    use crate::wire::feth;
    let (Some(f), Some(reth)) = (rx.repr.roce.ext.feth, rx.repr.roce.ext.reth) else {
        return Verdict::Nak(NakCode::InvalidRequest);
    };
    let mut rights = 0;
    if f.placement_type & feth::PLT_GLOBAL_VISIBILITY != 0 {
        rights |= AccessFlags::FLUSH_GLOBAL;
    }
    if f.placement_type & feth::PLT_PERSISTENCE != 0 {
        rights |= AccessFlags::FLUSH_PERSISTENT;
    }
    if rights == 0 || f.selectivity_level > feth::SEL_MR_WHOLE {
        return Verdict::Nak(NakCode::InvalidRequest);
    }
    let denied = Verdict::Nak(NakCode::RemoteAccessError);
    if f.selectivity_level == feth::SEL_MR_WHOLE {
        // The whole MR: the RETH's address and length are not looked at. A
        // window never grants FLUSH rights (`mw::MW_ACCESS`): refused.
        let ok = !mw::is_mw_key(reth.rkey)
            && mr::find(&dev.mrs, reth.rkey)
                .filter(|m| m.rkey() == Some(reth.rkey))
                .is_some_and(|m| m.check(qp.pd, m.iova, 0, rights).is_ok());
        if !ok {
            return denied;
        }
    } else if let Err(v) = check_rkey(qp, dev, reth.rkey, reth.va, u64::from(reth.dma_len), rights) {
        return v;
    }
    placed(qp, rx)
}

/// An ATOMIC WRITE (IBA 1.5 A19), the expected one: 8 bytes at an 8-byte aligned
/// address, written at once (one core runs the transport: no reader can see half
/// of it), needing remote write access.
fn atomic_write<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>) -> Verdict {
    let Some(reth) = rx.repr.roce.ext.reth else { return Verdict::Nak(NakCode::InvalidRequest) };
    let payload = rx.repr.payload;
    if payload.len() != 8 || reth.dma_len != 8 || reth.va % 8 != 0 {
        return Verdict::Nak(NakCode::InvalidRequest);
    }
    let target = match check_rkey(qp, dev, reth.rkey, reth.va, 8, AccessFlags::REMOTE_WRITE) {
        Ok(t) => t,
        Err(v) => return v,
    };
    if dev.mem.write(target.at, payload).is_err() {
        return Verdict::Nak(NakCode::RemoteOperationalError);
    }
    placed(qp, rx)
}

/// Saves the resource of an executed FLUSH or ATOMIC WRITE and queues its
/// acknowledgement: an RDMA READ RESPONSE ONLY without payload.
fn placed(qp: &mut Qp, rx: &RxFrame<'_>) -> Verdict {
    let psn = rx.repr.roce.bth.psn;
    qp.resp.save(Resource::Placed { psn }, usize::from(qp.attr.max_dest_rd_atomic));
    qp.resp.msn = qp.resp.msn.wrapping_add(1);
    qp.resp.read = Some(ReadReply { rkey: 0, va: 0, length: 0, offset: 0, first_psn: psn });
    Verdict::Done
}

fn atomic_ack<M, S: FrameSink + ?Sized>(qp: &Qp, dev: &mut Device<M>, sink: &mut S, psn: Psn, orig: u64) {
    let Some(path) = qp.path else { return };
    let roce = RoceRepr {
        bth: tx::bth(Opcode::RcAtomicAcknowledge, qp.attr.dest_qp_num, psn, false, false),
        ext: ExtHeaders {
            aeth: Some(AethRepr { syndrome: Syndrome::ACK, msn: qp.resp.msn & 0xFF_FFFF }),
            atomic_ack_eth: Some(AtomicAckEthRepr { orig }),
            ..ExtHeaders::NONE
        },
    };
    tx::send(sink, &mut dev.stats, &mut dev.ip_id, &path, &roce, 0, &mut |_| true);
}

/// A request behind the expected PSN.
fn duplicate<M: Memory, S: FrameSink + ?Sized>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>, sink: &mut S) {
    let psn = rx.repr.roce.bth.psn;
    match rx.info.operation {
        Operation::RdmaReadRequest => {
            let Some(Resource::Read { last, .. }) = qp.resp.find_read(psn) else {
                dev.stats.drop(DropReason::NoResource);
                return;
            };
            let Some(reth) = rx.repr.roce.ext.reth else { return };
            // The retried request may ask for the tail only; it must stay inside what
            // the original covered.
            let packets = qp.packets(reth.dma_len);
            if psn.wrapping_add(packets - 1).is_after(last)
                || check_rkey(qp, dev, reth.rkey, reth.va, u64::from(reth.dma_len), AccessFlags::REMOTE_READ).is_err()
            {
                dev.stats.drop(DropReason::NoResource);
                return;
            }
            qp.resp.read =
                Some(ReadReply { rkey: reth.rkey, va: reth.va, length: reth.dma_len, offset: 0, first_psn: psn });
            send_read(qp, dev, sink);
        }
        Operation::CompareSwap | Operation::FetchAdd => match qp.resp.find_atomic(psn) {
            Some(orig) => atomic_ack(qp, dev, sink, psn, orig),
            None => dev.stats.drop(DropReason::NoResource),
        },
        Operation::Flush | Operation::AtomicWrite => {
            if qp.resp.find_placed(psn) {
                qp.resp.read = Some(ReadReply { rkey: 0, va: 0, length: 0, offset: 0, first_psn: psn });
                send_read(qp, dev, sink);
            } else {
                dev.stats.drop(DropReason::NoResource);
            }
        }
        _ => {
            let prev = qp.resp.psn.wrapping_sub(1);
            ack(qp, dev, sink, prev, Syndrome::ACK);
        }
    }
}

/// Sends READ response packets while the sink takes them (up to `read_burst`).
pub fn send_read<M: Memory, S: FrameSink + ?Sized>(qp: &mut Qp, dev: &mut Device<M>, sink: &mut S) {
    let Some(path) = qp.path else {
        qp.resp.read = None;
        return;
    };
    let mtu = qp.mtu();
    for _ in 0..dev.config.read_burst.max(1) {
        let Some(r) = qp.resp.read else { return };
        let remaining = r.length - r.offset.min(r.length);
        let len = remaining.min(mtu);
        let first = r.offset == 0;
        let last = len == remaining;
        let opcode = match (first, last) {
            (true, true) => Opcode::RcRdmaReadResponseOnly,
            (true, false) => Opcode::RcRdmaReadResponseFirst,
            (false, true) => Opcode::RcRdmaReadResponseLast,
            (false, false) => Opcode::RcRdmaReadResponseMiddle,
        };
        let psn = r.first_psn.wrapping_add(r.offset / mtu);
        let aeth = (first || last).then_some(AethRepr { syndrome: Syndrome::ACK, msn: qp.resp.msn & 0xFF_FFFF });
        let roce = RoceRepr {
            bth: tx::bth(opcode, qp.attr.dest_qp_num, psn, false, false),
            ext: ExtHeaders { aeth, ..ExtHeaders::NONE },
        };
        let va = r.va.wrapping_add(u64::from(r.offset));
        let Ok(target) = check_rkey(qp, dev, r.rkey, va, u64::from(len), AccessFlags::REMOTE_READ) else {
            // Deregistered or invalidated while the reply was going out.
            qp.resp.read = None;
            ack(qp, dev, sink, psn, Syndrome::Nak(NakCode::RemoteAccessError));
            completer::enter_error(qp, dev);
            return;
        };
        let Device { mem, mrs, stats, ip_id, .. } = dev;
        // A zero-length READ names no memory (C9-88): nothing to read at `va`.
        let sent = match mr::find(mrs, target.mr_key) {
            Some(mr) if len > 0 => {
                let runs = mr::MrRuns { mr, addr: va, len: len as usize };
                tx::send_from_memory(sink, stats, ip_id, &path, &roce, len as usize, &runs, &*mem)
            }
            _ => tx::send(sink, stats, ip_id, &path, &roce, len as usize, &mut |out| out.is_empty()),
        };
        if !sent {
            return;
        }
        qp.resp.read = if last { None } else { Some(ReadReply { offset: r.offset + len, ..r }) };
    }
}

/// UC: no ACKs, no NAKs; a lost packet costs the rest of its message (IBA 9.7.4.2
/// "UC responder": PSN errors drop the message in progress).
fn uc<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>) {
    let psn = rx.repr.roce.bth.psn;
    let starts = rx.info.position.starts_message();
    if psn != qp.resp.psn {
        // A gap: whatever message was in progress is lost. Its receive WQE stays
        // posted (for an SRQ, held) for the next message.
        qp.resp.msg = if starts { InMessage::None } else { InMessage::Dropping };
    }
    qp.resp.psn = psn.next();
    match (qp.resp.msg, starts) {
        (InMessage::Dropping, false) => {
            dev.stats.drop(DropReason::UcGap);
            return;
        }
        (InMessage::None, false) => {
            qp.resp.msg = InMessage::Dropping;
            dev.stats.drop(DropReason::BadOpSequence);
            return;
        }
        (InMessage::Dropping | InMessage::Send { .. } | InMessage::Write { .. }, true) => {
            qp.resp.msg = InMessage::None;
        }
        _ => {}
    }
    let verdict = match check_sequence(qp, rx) {
        Err(v) => v,
        Ok(()) => match rx.info.operation {
            Operation::Send => send(qp, dev, rx),
            Operation::RdmaWrite => write(qp, dev, rx),
            _ => Verdict::Drop(DropReason::WrongQpType),
        },
    };
    match verdict {
        Verdict::Done => {}
        Verdict::Rnr => {
            qp.resp.msg = InMessage::Dropping;
            dev.stats.drop(DropReason::NoRecvWqe);
        }
        Verdict::Nak(_) => {
            qp.resp.msg = InMessage::Dropping;
            dev.stats.drop(DropReason::BadOpSequence);
        }
        Verdict::Drop(reason) => {
            qp.resp.msg = InMessage::Dropping;
            dev.stats.drop(reason);
        }
    }
}

/// UD and GSI: Q_Key check, one packet per message, the GRH in front of the data.
fn ud<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>, frame: &[u8]) {
    let Some(deth) = rx.repr.roce.ext.deth else {
        dev.stats.drop(DropReason::WrongQpType);
        return;
    };
    if deth.qkey != qp.qkey() {
        dev.stats.drop(DropReason::BadQkey);
        return;
    }
    let payload = rx.repr.payload;
    if payload.len() > qp.mtu() as usize {
        dev.stats.drop(DropReason::TooLong);
        return;
    }
    if !have_recv_wqe(qp, dev) {
        dev.stats.drop(DropReason::NoRecvWqe);
        return;
    }
    let Some((_, length)) = recv_wqe(qp) else { return };
    let total = (GRH_LEN + payload.len()) as u64;
    let mut wc = recv_wc(qp, WcStatus::Success, WcOpcode::Recv, total);
    wc.src_qp = deth.src_qpn;
    wc.solicited = rx.repr.roce.bth.solicited;
    if total > length {
        wc.status = WcStatus::LocLenErr;
        finish_recv(qp, dev, wc);
        return;
    }
    // Linux fills the 40 bytes with the received IP header: an IPv6 header as is, an
    // IPv4 header in the last 20 bytes after 20 zeros (`union rdma_network_hdr`).
    let mut grh = [0u8; GRH_LEN];
    let ip = frame.get(crate::wire::ethernet::HEADER_LEN..).unwrap_or(&[]);
    match rx.repr.path.ip {
        IpPath::V4 { .. } => {
            if let Some(h) = ip.get(..20) {
                grh[20..].copy_from_slice(h);
            }
        }
        IpPath::V6 { .. } => {
            if let Some(h) = ip.get(..GRH_LEN) {
                grh.copy_from_slice(h);
            }
        }
    }
    if scatter_recv(qp, dev, 0, &grh).is_err() || scatter_recv(qp, dev, GRH_LEN as u64, payload).is_err() {
        wc.status = WcStatus::LocProtErr;
        finish_recv(qp, dev, wc);
        return;
    }
    wc.wc_flags.0 |= WcFlags::GRH;
    if let Some(imm) = rx.repr.roce.ext.immdt {
        wc.imm_data = imm.imm;
        wc.wc_flags.0 |= WcFlags::WITH_IMM;
    }
    finish_recv(qp, dev, wc);
}
