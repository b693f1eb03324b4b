//! The requester (IBA vol. 1 9.7.4 "requester behavior" and 9.5 packet sequencing;
//! Linux `rxe_req.c`): walks the send queue, splits each message into path-MTU
//! packets (FIRST/MIDDLE/LAST/ONLY), numbers them with 24-bit PSNs, and sends as many as
//! the window allows.
//!
//! - RC keeps at most `window` PSNs unacknowledged (pacing, see `completer`; the
//!   window is also capped in bytes, `max_inflight_bytes`), asks for an ACK on the
//!   last packet of a message that wants a completion or ends what can be sent at
//!   once (rxe asks on every message's last packet), and every half window (at
//!   most every `max_pkt_per_ack` packets).
//! - An RDMA READ request is one packet but takes one PSN per response packet it asks
//!   for (9.7.1.2); READs and atomics are limited to `max_rd_atomic` outstanding, and a
//!   FENCEd WR waits until none is.
//! - After a rewind (go-back-N) the WQE being resent restarts at the packet the PSN
//!   names, with the opcode that packet had (a MIDDLE stays a MIDDLE: the responder kept
//!   the message state), and a READ asks again for the rest of its data only.
//! - UC and UD WQEs are done once sent; UD sends one packet with a DETH to the AH's
//!   address.

use crate::wire::frame::Path;
use crate::wire::{
    AtomicEthRepr, DethRepr, ExtHeaders, FethRepr, IethRepr, ImmDtRepr, Opcode, RethRepr, RoceRepr, sport,
};

use super::completer;
use super::device::Device;
use super::mem_ops;
use super::memory::Memory;
use super::qp::{Qp, WqeState};
use super::qp_state::{QpState, QpType};
use super::sgl;
use super::sink::FrameSink;
use super::time::Instant;
use super::tx;
use super::wc::WcStatus;
use super::wr::{SendFlags, WrOpcode};

/// What to do with a WQE the requester reached.
enum Start {
    /// Send its packets.
    Go,
    /// Not yet (fence, `max_rd_atomic`, SQD).
    Wait,
    /// Finished without a packet (local operation, or failed): look at the next.
    Next,
}

/// Sends what the send queue and the window allow.
pub fn run<M: Memory, S: FrameSink + ?Sized>(qp: &mut Qp, dev: &mut Device<M>, sink: &mut S, now: Instant) {
    if !qp.can_send() {
        return;
    }
    if let Some(until) = qp.req.rnr_until {
        if now < until {
            return;
        }
        qp.req.rnr_until = None;
    }
    loop {
        let pos = qp.req.next;
        let Some(wqe) = qp.sq.ring.get(pos).copied() else { break };
        match wqe.state {
            WqeState::Done | WqeState::Error(_) => {
                qp.req.next += 1;
                continue;
            }
            WqeState::Posted => match start(qp, dev, pos) {
                Start::Go => {}
                Start::Wait => break,
                Start::Next => continue,
            },
            WqeState::Sending | WqeState::Sent => {}
        }
        if qp.qp_type == QpType::Rc && qp.req.psn.diff(qp.req.comp_psn) as u32 >= qp.req.window {
            break;
        }
        if !send_one(qp, dev, sink, pos, now) {
            break;
        }
    }
}

/// Whether `run` would send something now (for the caller's deadline).
pub fn has_work(qp: &Qp, now: Instant) -> bool {
    if !qp.can_send() || qp.req.rnr_until.is_some_and(|t| now < t) {
        return false;
    }
    let Some(wqe) = qp.sq.ring.get(qp.req.next) else { return false };
    if qp.qp_type == QpType::Rc && qp.req.psn.diff(qp.req.comp_psn) as u32 >= qp.req.window {
        return false;
    }
    match wqe.state {
        WqeState::Posted => {
            qp.state != QpState::Sqd
                && !(wqe.flags.has(SendFlags::FENCE) && qp.req.rd_atomic > 0)
                && !(wqe.opcode.is_rd_atomic() && qp.req.rd_atomic >= u32::from(qp.attr.max_rd_atomic.max(1)))
        }
        _ => true,
    }
}

/// Checks a WQE and assigns its PSNs, or executes it if it is local.
fn start<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, pos: u64) -> Start {
    let Some(wqe) = qp.sq.ring.get(pos).copied() else { return Start::Wait };
    if qp.state == QpState::Sqd {
        return Start::Wait;
    }
    if wqe.flags.has(SendFlags::FENCE) && qp.req.rd_atomic > 0 {
        return Start::Wait;
    }
    if wqe.opcode.is_rd_atomic() && qp.req.rd_atomic >= u32::from(qp.attr.max_rd_atomic.max(1)) {
        return Start::Wait;
    }
    if let Err(status) = check(qp, dev, pos) {
        fail(qp, pos, status);
        return Start::Next;
    }
    if wqe.opcode.is_local() {
        // Executed here, in order with the rest of the send queue; a failure
        // completes the WR in error and takes the QP down, as rxe's
        // `rxe_do_local_ops` does (LOC_QP_OP_ERR, or MW_BIND_ERR for a bind).
        let result = match wqe.opcode {
            WrOpcode::LocalInv => mem_ops::invalidate(dev, qp.pd, qp.qpn, wqe.imm_or_rkey),
            _ => mem_ops::run(dev, qp.pd, qp.qpn, &wqe.mem),
        };
        let state = match result {
            Ok(()) => WqeState::Done,
            Err(_) if wqe.opcode == WrOpcode::BindMw => WqeState::Error(WcStatus::MwBindErr),
            Err(_) => WqeState::Error(WcStatus::LocQpOpErr),
        };
        if let Some(w) = qp.sq.ring.get_mut(pos) {
            w.state = state;
            w.first_psn = qp.req.psn;
            w.last_psn = qp.req.psn.wrapping_sub(1);
        }
        qp.req.next += 1;
        return Start::Next;
    }
    // IBA 1.5 FLUSH and ATOMIC WRITE take one PSN, like an atomic.
    let one = qp.qp_type.is_datagram() || matches!(wqe.opcode, WrOpcode::Flush | WrOpcode::AtomicWrite);
    let packets = if one { 1 } else { qp.packets(wqe.length) };
    if let Some(w) = qp.sq.ring.get_mut(pos) {
        w.state = WqeState::Sending;
        w.assigned = true;
        w.first_psn = qp.req.psn;
        w.last_psn = qp.req.psn.wrapping_add(packets - 1);
    }
    qp.req.offset = 0;
    if wqe.opcode.is_rd_atomic() {
        qp.req.rd_atomic += 1;
    }
    Start::Go
}

/// The local checks of a work request (IBA 10.8.3 local errors).
fn check<M: Memory>(qp: &Qp, dev: &Device<M>, pos: u64) -> Result<(), WcStatus> {
    let Some(wqe) = qp.sq.ring.get(pos) else { return Err(WcStatus::LocQpOpErr) };
    let allowed = match qp.qp_type {
        QpType::Rc => true,
        QpType::Uc => wqe.opcode.is_send() && wqe.opcode != WrOpcode::SendWithInv || wqe.opcode.is_write(),
        // (FLUSH and ATOMIC WRITE are RC only: they need a response.)
        QpType::Ud | QpType::Gsi => matches!(wqe.opcode, WrOpcode::Send | WrOpcode::SendWithImm),
    } || wqe.opcode.is_local() && qp.qp_type.is_connected();
    if !allowed {
        return Err(WcStatus::LocQpOpErr);
    }
    if wqe.length > dev.config.max_msg_size {
        return Err(WcStatus::LocLenErr);
    }
    if qp.qp_type.is_datagram() {
        if wqe.length > qp.mtu() {
            return Err(WcStatus::LocLenErr);
        }
        let ud = wqe.ud.ok_or(WcStatus::LocQpOpErr)?;
        let ah = dev.ahs.get(ud.ah.0).ok_or(WcStatus::LocQpOpErr)?;
        if ah.pd != qp.pd {
            return Err(WcStatus::LocQpOpErr);
        }
    }
    if wqe.opcode.is_atomic() && wqe.length != 8 {
        return Err(WcStatus::LocLenErr);
    }
    if !wqe.inline && !wqe.opcode.has_no_sges() {
        sgl::validate(qp.sq.sges(pos), &dev.mrs, qp.pd, wqe.opcode.is_rd_atomic()).map_err(|_| WcStatus::LocProtErr)?;
    }
    Ok(())
}

/// Marks a WQE failed; the completer reports it in order and the QP then errs.
fn fail(qp: &mut Qp, pos: u64, status: WcStatus) {
    if let Some(w) = qp.sq.ring.get_mut(pos) {
        w.state = WqeState::Error(status);
        w.first_psn = qp.req.psn;
        w.last_psn = qp.req.psn.wrapping_sub(1);
    }
    qp.req.next += 1;
}

/// The SEND or WRITE opcode for a packet of a QP type at a position.
fn data_opcode(qp_type: QpType, op: WrOpcode, first: bool, last: bool) -> Opcode {
    use Opcode::*;
    let rc = qp_type == QpType::Rc;
    let pick = |rc_op: Opcode, uc_op: Opcode| if rc { rc_op } else { uc_op };
    match (op, first, last) {
        (WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm, true, false) => pick(RcRdmaWriteFirst, UcRdmaWriteFirst),
        (WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm, false, false) => pick(RcRdmaWriteMiddle, UcRdmaWriteMiddle),
        (WrOpcode::RdmaWrite, false, true) => pick(RcRdmaWriteLast, UcRdmaWriteLast),
        (WrOpcode::RdmaWrite, true, true) => pick(RcRdmaWriteOnly, UcRdmaWriteOnly),
        (WrOpcode::RdmaWriteWithImm, false, true) => pick(RcRdmaWriteLastWithImmediate, UcRdmaWriteLastWithImmediate),
        (WrOpcode::RdmaWriteWithImm, true, true) => pick(RcRdmaWriteOnlyWithImmediate, UcRdmaWriteOnlyWithImmediate),
        (_, true, false) => pick(RcSendFirst, UcSendFirst),
        (_, false, false) => pick(RcSendMiddle, UcSendMiddle),
        (WrOpcode::SendWithImm, false, true) => pick(RcSendLastWithImmediate, UcSendLastWithImmediate),
        (WrOpcode::SendWithImm, true, true) => pick(RcSendOnlyWithImmediate, UcSendOnlyWithImmediate),
        (WrOpcode::SendWithInv, false, true) => RcSendLastWithInvalidate,
        (WrOpcode::SendWithInv, true, true) => RcSendOnlyWithInvalidate,
        (_, false, true) => pick(RcSendLast, UcSendLast),
        (_, true, true) => pick(RcSendOnly, UcSendOnly),
    }
}

/// Whether the WQE after `pos` is queued and will follow it without waiting
/// on anything but the window: not a READ or atomic (`max_rd_atomic`), not
/// FENCEd, not a local operation (which sends nothing), the QP not draining.
/// When it is not, the packet ending `pos` asks for an ACK, or the requester
/// could sit idle with unacknowledged packets.
fn sends_next_at_once(qp: &Qp, pos: u64) -> bool {
    qp.sq.ring.get(pos + 1).is_some_and(|next| match next.state {
        WqeState::Posted => {
            qp.state != QpState::Sqd
                && !next.flags.has(SendFlags::FENCE)
                && !next.opcode.is_rd_atomic()
                && !next.opcode.is_local()
        }
        WqeState::Sending | WqeState::Sent => true,
        WqeState::Done | WqeState::Error(_) => false,
    })
}

/// Sends the next packet of the WQE at `pos`. Returns whether it left.
fn send_one<M: Memory, S: FrameSink + ?Sized>(
    qp: &mut Qp,
    dev: &mut Device<M>,
    sink: &mut S,
    pos: u64,
    now: Instant,
) -> bool {
    let Some(wqe) = qp.sq.ring.get(pos).copied() else { return false };
    let mtu = qp.mtu();
    let offset = qp.req.offset.min(wqe.length);
    let psn = qp.req.psn;
    let rc = qp.qp_type == QpType::Rc;

    // Where to, and as which QP. A connected QP's path is borrowed, not copied:
    // this runs for every packet.
    let ud_path: Path;
    let (path, dest_qpn): (&Path, u32) = if qp.qp_type.is_datagram() {
        let Some(ud) = wqe.ud else { return false };
        let Some(ah) = dev.ahs.get(ud.ah.0) else { return false };
        let Ok(path) = ah.attr.path(&dev.port, sport::src_port_for_qpn(qp.qpn)) else {
            // The neighbour is not resolved or the GID went away: a local error.
            fail(qp, pos, WcStatus::LocQpOpErr);
            return true;
        };
        ud_path = path;
        (&ud_path, ud.remote_qpn)
    } else {
        let Some(path) = qp.path.as_ref() else { return false };
        (path, qp.attr.dest_qp_num)
    };

    // Built in place (the headers are 144 bytes); the BTH is set once its opcode
    // and flags are known.
    let mut roce = RoceRepr { bth: tx::bth(Opcode::RcSendOnly, dest_qpn, psn, false, false), ext: ExtHeaders::NONE };
    let ext = &mut roce.ext;
    let (opcode, payload_len, last, psns) = match wqe.opcode {
        WrOpcode::RdmaRead => {
            let remaining = wqe.length - offset;
            ext.reth = Some(RethRepr {
                va: wqe.remote.remote_addr.wrapping_add(u64::from(offset)),
                rkey: wqe.remote.rkey,
                dma_len: remaining,
            });
            (Opcode::RcRdmaReadRequest, 0, true, qp.packets(remaining))
        }
        WrOpcode::AtomicCmpSwp | WrOpcode::AtomicFetchAdd => {
            let (swap_add, compare) = match wqe.opcode {
                WrOpcode::AtomicCmpSwp => (wqe.remote.swap, wqe.remote.compare_add),
                _ => (wqe.remote.compare_add, 0),
            };
            ext.atomic_eth =
                Some(AtomicEthRepr { va: wqe.remote.remote_addr, rkey: wqe.remote.rkey, swap_add, compare });
            let op = if wqe.opcode == WrOpcode::AtomicCmpSwp { Opcode::RcCompareSwap } else { Opcode::RcFetchAdd };
            (op, 0, true, 1)
        }
        WrOpcode::Flush => {
            // The length rides in `compare_add`: a FLUSH moves no data of its own.
            let dma_len = u32::try_from(wqe.remote.compare_add).unwrap_or(u32::MAX);
            ext.feth =
                Some(FethRepr { placement_type: wqe.remote.flush_type, selectivity_level: wqe.remote.flush_level });
            ext.reth = Some(RethRepr { va: wqe.remote.remote_addr, rkey: wqe.remote.rkey, dma_len });
            (Opcode::RcFlush, 0, true, 1)
        }
        WrOpcode::AtomicWrite => {
            ext.reth = Some(RethRepr { va: wqe.remote.remote_addr, rkey: wqe.remote.rkey, dma_len: 8 });
            (Opcode::RcAtomicWrite, 8, true, 1)
        }
        _ => {
            let len = (wqe.length - offset).min(mtu);
            let first = offset == 0;
            let last = offset + len >= wqe.length;
            let opcode = if qp.qp_type.is_datagram() {
                if wqe.opcode == WrOpcode::SendWithImm { Opcode::UdSendOnlyWithImmediate } else { Opcode::UdSendOnly }
            } else {
                data_opcode(qp.qp_type, wqe.opcode, first, last)
            };
            if first && wqe.opcode.is_write() {
                ext.reth = Some(RethRepr { va: wqe.remote.remote_addr, rkey: wqe.remote.rkey, dma_len: wqe.length });
            }
            if last && wqe.opcode.has_imm() {
                ext.immdt = Some(ImmDtRepr { imm: wqe.imm_or_rkey });
            }
            if last && wqe.opcode == WrOpcode::SendWithInv {
                ext.ieth = Some(IethRepr { rkey: wqe.imm_or_rkey });
            }
            if let Some(ud) = wqe.ud.filter(|_| qp.qp_type.is_datagram()) {
                // A Q_Key with the top bit set asks for the QP's own (IBA 10.2.4.2).
                let qkey = if ud.remote_qkey & 0x8000_0000 != 0 { qp.qkey() } else { ud.remote_qkey };
                ext.deth = Some(DethRepr { qkey, src_qpn: qp.qpn });
            }
            (opcode, len as usize, last, 1)
        }
    };
    // Ask for an ACK every half window (at most every `max_pkt_per_ack`
    // packets) and on the packet that fills the window: the ACK for the first
    // half comes back while the second is on the wire, so a window sized to
    // what the receiver can hold still keeps the link busy; and a full window
    // whose packets asked for nothing would wait out the retransmit timer for
    // an ACK that never comes. A message's last packet asks too when its WQE
    // wants a completion, when nothing behind it goes out at once (so a
    // requester that stops sending always has an ACK coming), and for the
    // requests answered by a response. An unsignaled SEND or WRITE with more
    // following needs none (9.7.5.1.1: an ACK covers every earlier PSN), and
    // a responder that answers each 64 B message spends a frame on each: a
    // Linux responder sends one per AckReq, twice its frames per message.
    let fills_window = psn.wrapping_add(psns).diff(qp.req.comp_psn) as u32 >= qp.req.window;
    let ack_every = (qp.req.window / 2).clamp(1, dev.config.max_pkt_per_ack.max(1));
    let signaled = qp.sq_sig_all || wqe.flags.has(SendFlags::SIGNALED);
    let ends_burst = last && (signaled || wqe.opcode.is_rd_atomic() || !sends_next_at_once(qp, pos));
    let ack_req = rc && (ends_burst || fills_window || qp.req.noack_pkts + 1 >= ack_every);
    let solicited = last && wqe.flags.has(SendFlags::SOLICITED) && wqe.opcode.is_send()
        || last && wqe.opcode == WrOpcode::RdmaWriteWithImm && wqe.flags.has(SendFlags::SOLICITED);
    roce.bth = tx::bth(opcode, dest_qpn, psn, ack_req, solicited);

    let Device { mem, mrs, stats, ip_id, .. } = dev;
    let sent = if payload_len == 0 {
        tx::send(sink, stats, ip_id, path, &roce, 0, &mut |_| true)
    } else if wqe.opcode == WrOpcode::AtomicWrite {
        // The 8 bytes live in the WQE (`ibv_wr_atomic_write` copies them in).
        let bytes = wqe.remote.compare_add.to_ne_bytes();
        tx::send(sink, stats, ip_id, path, &roce, 8, &mut |out| {
            out.copy_from_slice(&bytes);
            true
        })
    } else if wqe.inline {
        let data = qp.sq.inline_data(pos);
        let chunk = data.get(offset as usize..offset as usize + payload_len);
        tx::send(sink, stats, ip_id, path, &roce, payload_len, &mut |out| match chunk {
            Some(c) => {
                out.copy_from_slice(c);
                true
            }
            None => false,
        })
    } else {
        let runs = sgl::SgeRuns { sges: qp.sq.sges(pos), offset: u64::from(offset), len: payload_len, mrs, pd: qp.pd };
        tx::send_from_memory(sink, stats, ip_id, path, &roce, payload_len, &runs, &*mem)
    };
    if !sent {
        return false;
    }

    // Commit the packet.
    if psn.is_before(qp.req.max_psn) {
        dev.stats.retransmitted_pkts += 1;
    }
    qp.req.psn = psn.wrapping_add(psns);
    if qp.req.psn.is_after(qp.req.max_psn) {
        qp.req.max_psn = qp.req.psn;
    }
    qp.req.noack_pkts = if ack_req { 0 } else { qp.req.noack_pkts + 1 };
    if last {
        let done = if rc { WqeState::Sent } else { WqeState::Done };
        if let Some(w) = qp.sq.ring.get_mut(pos) {
            w.state = done;
        }
        qp.req.next = pos + 1;
        qp.req.offset = 0;
    } else {
        qp.req.offset = offset + payload_len as u32;
    }
    if rc && qp.req.timer.is_none() {
        qp.req.timer = completer::retransmit_timeout(qp).map(|t| now + t);
    }
    true
}
