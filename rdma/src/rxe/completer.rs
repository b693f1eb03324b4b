//! The completer (IBA vol. 1 9.7.5 "requester: responses", 9.7.6 timers; Linux
//! `rxe_comp.c`): matches ACKs, NAKs, READ responses and atomic ACKs against the send
//! queue, completes WQEs in order, runs the retransmit and RNR timers, and moves the
//! QP to the error state when the transport gives up.
//!
//! The rules, with where they come from:
//! - A response PSN at or past the highest PSN ever sent is a "ghost" (an ACK for
//!   nothing we sent): ignored and counted. One before the oldest unacknowledged PSN is
//!   a duplicate: ignored.
//! - An ACK, or any response, for PSN p acknowledges every request packet up to p
//!   (9.7.5.1.1, coalesced ACKs): SENDs and WRITEs ending at or before p complete.
//! - Implied NAK (9.7.5.1.2): a response past a READ or atomic that got no response yet
//!   means that response was lost; the requester goes back to it.
//! - Sequence NAK: everything before its PSN arrived; go back to it (go-back-N).
//! - RNR NAK: wait the timer the AETH names (the IBA RNR timer table, `aeth`), then go
//!   back to its PSN; `rnr_retry` 7 retries forever.
//! - Retransmit timer: 4.096 µs × 2^timeout (T, the Local ACK Timeout) after the last
//!   progress; on expiry go back to the oldest unacknowledged PSN. Timeouts in a row
//!   without progress double it, up to 4T: the transport timer may run from T to 4T
//!   (C9-140..C9-142, which Linux's SRP initiator reads the same way when it bounds
//!   a request by `retry_cnt` × 4T). A peer that stops answering for a while (a
//!   guest whose vCPU does not run) is so given 27T over seven retries instead of
//!   8T. Progress brings it back to T.
//! - `retry_cnt` counts retries, as the spec says (9.7.6.1.3, C9-141): 7 allows seven
//!   retries, then RETRY_EXC_ERR. (Linux rxe treats 7 as "forever"; we do not, on
//!   purpose.) Any forward progress restores the count, as rxe does. An armed QP
//!   whose count runs out migrates to its alternate path instead ([`apm`]).
//! - Pacing (TCP Reno's shape, RFC 5681, in PSNs): the window of PSNs in flight
//!   starts at `Qp::window_cap` (`max_window` packets, `max_inflight_bytes` bytes).
//!   A sequence NAK, an implied NAK or a congestion notification halves it once per
//!   loss episode (until everything sent before the loss is acknowledged: one
//!   overrun brings several NAKs), a retransmit timeout every time; the halved
//!   window becomes the threshold, at or above which the window grows by one per
//!   window of packets acknowledged (about one per round trip), below it by one
//!   per ACK. So on a path that holds less than the cap the window settles just
//!   under what the path holds instead of overrunning it again within a few ACKs.

use crate::core::counters::RxeCounter;
use crate::wire::aeth::rnr_timer_micros;
use crate::wire::frame::RxFrame;
use crate::wire::{NakCode, Operation, Psn, Syndrome};

use super::apm;
use super::device::Device;
use super::event::AsyncEvent;
use super::memory::Memory;
use super::qp::{INFINITE_RNR_RETRY, Qp, SendWqe, WqeState};
use super::qp_state::{QpState, QpType};
use super::sgl;
use super::time::{Duration, Instant, local_ack_timeout};
use super::wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion};
use super::wr::{SendFlags, WrOpcode};
use vocab::DropReason;

/// Why the requester goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    Timeout,
    SeqNak,
    ImpliedNak,
}

/// The completion opcode of a send WQE.
pub fn wc_opcode(op: WrOpcode) -> WcOpcode {
    match op {
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => WcOpcode::Send,
        WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => WcOpcode::RdmaWrite,
        WrOpcode::RdmaRead => WcOpcode::RdmaRead,
        WrOpcode::AtomicCmpSwp => WcOpcode::CompSwap,
        WrOpcode::AtomicFetchAdd => WcOpcode::FetchAdd,
        WrOpcode::LocalInv => WcOpcode::LocalInv,
        WrOpcode::BindMw => WcOpcode::BindMw,
        WrOpcode::RegMr => WcOpcode::RegMr,
        WrOpcode::Flush => WcOpcode::Flush,
        WrOpcode::AtomicWrite => WcOpcode::AtomicWrite,
    }
}

/// Reports a send WQE: a CQE when it is signaled or failed.
fn report<M>(qp: &Qp, dev: &mut Device<M>, wqe: &SendWqe, status: WcStatus) {
    if status == WcStatus::Success && wqe.opcode.is_send() {
        dev.stats.inc(RxeCounter::RdmaSends);
    }
    if status == WcStatus::Success && !qp.sq_sig_all && !wqe.flags.has(SendFlags::SIGNALED) {
        return;
    }
    let mut wc = WorkCompletion::new(wqe.wr_id, status, wc_opcode(wqe.opcode), qp.qpn);
    wc.byte_len = wqe.length;
    wc.src_qp = if qp.qp_type.is_connected() { qp.attr.dest_qp_num } else { 0 };
    wc.wc_flags = WcFlags(0);
    dev.complete(qp.send_cq, wc);
}

/// Completes the head WQE with `status` and pops it.
fn complete_head<M>(qp: &mut Qp, dev: &mut Device<M>, status: WcStatus) {
    let head = qp.sq.ring.head();
    let Some(wqe) = qp.sq.ring.get(head).copied() else { return };
    if wqe.opcode.is_rd_atomic() && matches!(wqe.state, WqeState::Sending | WqeState::Sent) {
        qp.req.rd_atomic = qp.req.rd_atomic.saturating_sub(1);
    }
    report(qp, dev, &wqe, status);
    qp.sq.ring.pop();
    if qp.req.next < qp.sq.ring.head() {
        qp.req.next = qp.sq.ring.head();
        qp.req.offset = 0;
    }
}

/// Fails the head WQE with `status`, then takes the QP to the error state.
fn fail_head<M>(qp: &mut Qp, dev: &mut Device<M>, status: WcStatus) {
    complete_head(qp, dev, status);
    enter_error(qp, dev);
}

/// Moves the QP to ERR: every outstanding send and receive WQE completes with
/// WR_FLUSH_ERR (IBA 10.3.1 "Error state", 11.4.2.1), timers stop.
pub fn enter_error<M>(qp: &mut Qp, dev: &mut Device<M>) {
    qp.state = QpState::Err;
    qp.attr.qp_state = QpState::Err;
    flush(qp, dev);
}

/// Flushes every WQE of a QP in the error state.
pub fn flush<M>(qp: &mut Qp, dev: &mut Device<M>) {
    while let Some(wqe) = qp.sq.ring.get(qp.sq.ring.head()).copied() {
        let mut wc = WorkCompletion::new(wqe.wr_id, WcStatus::WrFlushErr, wc_opcode(wqe.opcode), qp.qpn);
        wc.byte_len = 0;
        dev.complete(qp.send_cq, wc);
        qp.sq.ring.pop();
    }
    qp.req.next = qp.sq.ring.head();
    qp.req.rd_atomic = 0;
    qp.req.timer = None;
    qp.req.rnr_until = None;
    while let Some((wqe, _)) = qp.rq.front() {
        dev.complete(qp.recv_cq, WorkCompletion::new(wqe.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, qp.qpn));
        qp.rq.pop();
    }
    if qp.resp.has_held {
        qp.resp.has_held = false;
        let wr_id = qp.resp.held.wr_id;
        dev.complete(qp.recv_cq, WorkCompletion::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, qp.qpn));
    }
    qp.resp.read = None;
    if qp.srq.is_some() {
        dev.event(AsyncEvent::QpLastWqeReached { qpn: qp.qpn });
    }
}

/// Completes WQEs at the head that need no response: UC/UD sends once sent, local
/// operations, and local failures (after which the QP errs).
pub fn drain_done<M>(qp: &mut Qp, dev: &mut Device<M>) {
    while let Some(wqe) = qp.sq.ring.get(qp.sq.ring.head()).copied() {
        match wqe.state {
            WqeState::Done => complete_head(qp, dev, WcStatus::Success),
            WqeState::Error(status) => {
                complete_head(qp, dev, status);
                if qp.qp_type.is_connected() {
                    enter_error(qp, dev);
                } else {
                    // UD: a send error takes only the send queue down (SQE).
                    qp.state = QpState::Sqe;
                    qp.attr.qp_state = QpState::Sqe;
                    flush_sq(qp, dev);
                }
                return;
            }
            _ => break,
        }
    }
    if qp.state == QpState::Sqd && qp.sqd_notify && qp.sq.ring.is_empty() {
        qp.sqd_notify = false;
        dev.event(AsyncEvent::SqDrained { qpn: qp.qpn });
    }
}

/// Flushes the send queue only (SQE).
fn flush_sq<M>(qp: &mut Qp, dev: &mut Device<M>) {
    while let Some(wqe) = qp.sq.ring.get(qp.sq.ring.head()).copied() {
        dev.complete(qp.send_cq, WorkCompletion::new(wqe.wr_id, WcStatus::WrFlushErr, wc_opcode(wqe.opcode), qp.qpn));
        qp.sq.ring.pop();
    }
    qp.req.next = qp.sq.ring.head();
}

/// Moves the oldest unacknowledged PSN forward to `to`, if it is ahead.
fn advance<M>(qp: &mut Qp, dev: &Device<M>, to: Psn, now: Instant) {
    if to.is_after(qp.req.comp_psn) {
        let acked = to.diff(qp.req.comp_psn).unsigned_abs();
        qp.req.comp_psn = to;
        qp.req.rewound_to = None;
        qp.req.retry_left = qp.attr.retry_cnt;
        qp.req.rnr_left = qp.attr.rnr_retry;
        qp.req.backoff = 0;
        // The episode is over once all it sent is acknowledged (and a stale
        // PSN would look ahead again after half the PSN space).
        if qp.req.recover.is_some_and(|p| !p.is_after(to)) {
            qp.req.recover = None;
        }
        grow_window(qp, dev, acked);
    }
    rearm(qp, now);
}

/// The most the retransmit timer backs off: 2^2, four times the Local ACK Timeout.
pub const MAX_BACKOFF: u8 = 2;

/// How long the retransmit timer runs now: the Local ACK Timeout, doubled per
/// timeout in a row without progress (`ReqState::backoff`). `None`: no timer
/// (`timeout` 0).
pub fn retransmit_timeout(qp: &Qp) -> Option<Duration> {
    let t = local_ack_timeout(qp.attr.timeout)?;
    Some(Duration::from_micros(t.as_micros() << qp.req.backoff.min(MAX_BACKOFF)))
}

/// Runs the retransmit timer while anything is unacknowledged.
fn rearm(qp: &mut Qp, now: Instant) {
    qp.req.timer = if qp.req.comp_psn != qp.req.psn { retransmit_timeout(qp).map(|t| now + t) } else { None };
}

/// Opens the window after an ACK that acknowledged `acked` more packets: by
/// one below the threshold of the last cut, and at or above it by one per
/// window's worth acknowledged (about one per round trip), so after a loss
/// the window creeps back toward the size that overran the path instead of
/// reaching it again within a few ACKs.
fn grow_window<M>(qp: &mut Qp, dev: &Device<M>, acked: u32) {
    let cap = qp.window_cap(&dev.config);
    let r = &mut qp.req;
    if r.window < r.threshold {
        r.window += 1;
    } else {
        r.acked_toward_growth = r.acked_toward_growth.saturating_add(acked);
        if r.acked_toward_growth >= r.window {
            r.acked_toward_growth -= r.window;
            r.window += 1;
        }
    }
    r.window = r.window.min(cap);
}

/// Halves the window and makes the result the threshold of growth: once per
/// loss episode for NAKs and congestion notifications (an overrun shows up as
/// a NAK per window sent into it, answered by one go-back), on every
/// retransmit timeout (nothing got through in a whole timeout).
pub fn cut_window<M>(qp: &mut Qp, dev: &mut Device<M>, timeout: bool) {
    let r = &mut qp.req;
    if !timeout && r.recover.is_some_and(|p| p.is_after(r.comp_psn)) {
        return;
    }
    r.recover = Some(r.max_psn);
    r.window = (r.window / 2).max(dev.config.min_window);
    r.threshold = r.window;
    r.acked_toward_growth = 0;
    dev.stats.window_cuts += 1;
}

/// Repositions the requester at `psn`: the WQE holding it resends from that packet and
/// later ones restart. Used to go back (go-back-N) and, when an ACK from before a
/// rewind shows the responder already has more, to skip forward. WQEs before the one
/// holding `psn` were sent in full at some point, so they count as sent.
pub fn rewind(qp: &mut Qp, psn: Psn) {
    let head = qp.sq.ring.head();
    let tail = qp.sq.ring.tail();
    let live = |w: &SendWqe| w.assigned && !matches!(w.state, WqeState::Done | WqeState::Error(_));
    let mut k = head;
    let mut inside = false;
    while k < tail {
        let Some(w) = qp.sq.ring.get(k) else { break };
        if !w.assigned {
            break;
        }
        if live(w) && !psn.is_before(w.first_psn) && !psn.is_after(w.last_psn) {
            inside = true;
            break;
        }
        k += 1;
    }
    let mtu = qp.mtu();
    let mut rd_atomic = 0;
    for pos in head..tail {
        let Some(w) = qp.sq.ring.get_mut(pos) else { break };
        if !live(w) {
            continue;
        }
        if pos < k {
            w.state = WqeState::Sent;
            if w.opcode.is_rd_atomic() {
                rd_atomic += 1;
            }
        } else if pos == k && inside {
            w.state = WqeState::Sending;
            if w.opcode.is_rd_atomic() {
                rd_atomic += 1;
            }
        } else {
            w.state = WqeState::Posted;
        }
    }
    qp.req.offset = match qp.sq.ring.get(k).filter(|_| inside) {
        Some(w) if !w.opcode.is_atomic() => {
            let packets_done = psn.diff(w.first_psn).max(0) as u32;
            packets_done.saturating_mul(mtu).min(w.length)
        }
        _ => 0,
    };
    qp.req.next = k;
    qp.req.psn = psn;
    qp.req.noack_pkts = 0;
    qp.req.rd_atomic = rd_atomic;
    qp.req.timer = None;
}

/// A retry after a loss: counts down `retry_cnt`, or gives up.
///
/// A NAK or implied NAK for the PSN the requester already went back to is ignored:
/// it comes from packets sent before that rewind (stale ACKs, or responses the
/// go-back-N resend itself caused), and acting on it would resend the same packets
/// again and again. Only progress or the timer re-arm the rewind.
fn retry<M>(qp: &mut Qp, dev: &mut Device<M>, now: Instant, psn: Psn, why: Retry) {
    if why != Retry::Timeout && qp.req.rewound_to == Some(psn) {
        dev.stats.drop(DropReason::DuplicateResponse);
        return;
    }
    if qp.req.retry_left > 0 {
        qp.req.retry_left -= 1;
    } else if apm::migrate(qp, dev) {
        // An armed QP lost its primary path, not its peer: the resend below
        // is its first try on the alternate path, the count starts over.
        qp.req.retry_left = qp.attr.retry_cnt;
    } else {
        dev.stats.inc(RxeCounter::RetryExceededErr);
        fail_head(qp, dev, WcStatus::RetryExcErr);
        return;
    }
    dev.stats.inc(RxeCounter::CompleterRetryErr);
    dev.stats.rewinds += 1;
    if why == Retry::ImpliedNak {
        dev.stats.implied_naks += 1;
    }
    cut_window(qp, dev, why == Retry::Timeout);
    rewind(qp, psn);
    qp.req.rewound_to = Some(psn);
    rearm(qp, now);
}

/// Handles the retransmit timer. Returns whether it fired.
pub fn on_timer<M>(qp: &mut Qp, dev: &mut Device<M>, now: Instant) -> bool {
    let Some(at) = qp.req.timer else { return false };
    if now < at || qp.qp_type != QpType::Rc || qp.state == QpState::Err {
        return false;
    }
    if qp.req.comp_psn == qp.req.psn {
        qp.req.timer = None;
        return false;
    }
    dev.stats.timeouts += 1;
    qp.req.backoff = (qp.req.backoff + 1).min(MAX_BACKOFF);
    let psn = qp.req.comp_psn;
    retry(qp, dev, now, psn, Retry::Timeout);
    true
}

/// Handles one response packet on an RC QP.
pub fn on_response<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>, now: Instant) {
    let psn = rx.repr.roce.bth.psn;
    if !psn.is_before(qp.req.max_psn) {
        dev.stats.ghost_acks += 1;
        dev.stats.drop(DropReason::UnexpectedResponse);
        return;
    }
    if !psn.is_before(qp.req.psn) && rx.info.operation != Operation::Acknowledge {
        // Data for a request sent before a rewind and not yet resent: it will be
        // asked for again. (ACKs and NAKs from then are still true, and used.)
        dev.stats.drop(DropReason::UnexpectedResponse);
        return;
    }
    if psn.is_before(qp.req.comp_psn) {
        dev.stats.drop(DropReason::DuplicateResponse);
        return;
    }
    handle_response(qp, dev, rx, now);
    // An ACK from before a rewind may show the responder has more than the
    // requester is about to resend: skip forward.
    if qp.state != QpState::Err && qp.req.comp_psn.is_after(qp.req.psn) {
        let at = qp.req.comp_psn;
        rewind(qp, at);
        rearm(qp, now);
    }
}

fn handle_response<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>, now: Instant) {
    let psn = rx.repr.roce.bth.psn;
    loop {
        if qp.state == QpState::Err {
            return;
        }
        let head = qp.sq.ring.head();
        let Some(wqe) = qp.sq.ring.get(head).copied() else {
            dev.stats.drop(DropReason::UnexpectedResponse);
            return;
        };
        match wqe.state {
            WqeState::Done => {
                complete_head(qp, dev, WcStatus::Success);
                continue;
            }
            WqeState::Error(_) => {
                drain_done(qp, dev);
                continue;
            }
            WqeState::Posted if !wqe.assigned => {
                dev.stats.drop(DropReason::UnexpectedResponse);
                return;
            }
            WqeState::Posted | WqeState::Sending | WqeState::Sent => {}
        }
        if psn.is_after(wqe.last_psn) {
            // The responder has every packet of this WQE (in this round or before a
            // rewind).
            if !wqe.opcode.is_rd_atomic() {
                advance(qp, dev, wqe.last_psn.next(), now);
                complete_head(qp, dev, WcStatus::Success);
                continue;
            }
            // A later response while this READ/atomic still waits for its own: the
            // responses in between were lost.
            let at = qp.req.comp_psn;
            retry(qp, dev, now, at, Retry::ImpliedNak);
            return;
        }
        on_wqe_response(qp, dev, rx, &wqe, now);
        return;
    }
}

/// A response for a PSN of the head WQE.
fn on_wqe_response<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>, wqe: &SendWqe, now: Instant) {
    let psn = rx.repr.roce.bth.psn;
    let syndrome = rx.repr.roce.ext.aeth.map(|a| a.syndrome);
    match rx.info.operation {
        Operation::RdmaReadResponse => {
            // READ responses only ever carry ACK syndromes.
            if syndrome.is_some_and(|s| !s.is_ack()) {
                dev.stats.drop(DropReason::BadResponse);
                return;
            }
            read_response(qp, dev, rx, wqe, now)
        }
        Operation::AtomicAcknowledge => {
            let Some(orig) = rx.repr.roce.ext.atomic_ack_eth.map(|a| a.orig) else { return };
            if !wqe.opcode.is_atomic() || psn != wqe.first_psn {
                dev.stats.drop(DropReason::BadResponse);
                return;
            }
            let pos = qp.sq.ring.head();
            let Device { mem, mrs, .. } = dev;
            if sgl::scatter(qp.sq.sges(pos), 0, &orig.to_ne_bytes(), mrs, qp.pd, mem).is_err() {
                fail_head(qp, dev, WcStatus::LocProtErr);
                return;
            }
            advance(qp, dev, psn.next(), now);
            complete_head(qp, dev, WcStatus::Success);
        }
        Operation::Acknowledge => match syndrome {
            Some(Syndrome::Ack { .. }) => {
                if wqe.opcode.is_rd_atomic() {
                    dev.stats.drop(DropReason::BadResponse);
                    return;
                }
                advance(qp, dev, psn.next(), now);
                if psn == wqe.last_psn {
                    complete_head(qp, dev, WcStatus::Success);
                }
            }
            Some(Syndrome::RnrNak { timer }) => {
                dev.stats.inc(RxeCounter::RcvdRnrErr);
                advance(qp, dev, psn, now);
                if qp.attr.rnr_retry != INFINITE_RNR_RETRY {
                    if qp.req.rnr_left == 0 {
                        dev.stats.inc(RxeCounter::RetryRnrExceededErr);
                        fail_head(qp, dev, WcStatus::RnrRetryExcErr);
                        return;
                    }
                    qp.req.rnr_left -= 1;
                }
                rewind(qp, psn);
                qp.req.rnr_until = Some(now + Duration::from_micros(u64::from(rnr_timer_micros(timer))));
                qp.req.timer = None;
            }
            Some(Syndrome::Nak(NakCode::PsnSequenceError)) => {
                dev.stats.inc(RxeCounter::RcvdSeqErr);
                advance(qp, dev, psn, now);
                retry(qp, dev, now, psn, Retry::SeqNak);
            }
            Some(Syndrome::Nak(code)) => {
                let status = match code {
                    NakCode::InvalidRequest => WcStatus::RemInvReqErr,
                    NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                    NakCode::InvalidRdRequest => WcStatus::RemInvRdReqErr,
                    _ => WcStatus::RemOpErr,
                };
                fail_head(qp, dev, status);
            }
            Some(Syndrome::Reserved(_)) | None => dev.stats.drop(DropReason::BadResponse),
        },
        _ => dev.stats.drop(DropReason::Unsupported),
    }
}

/// One READ response packet: must be the next one expected.
fn read_response<M: Memory>(qp: &mut Qp, dev: &mut Device<M>, rx: &RxFrame<'_>, wqe: &SendWqe, now: Instant) {
    let psn = rx.repr.roce.bth.psn;
    if matches!(wqe.opcode, WrOpcode::Flush | WrOpcode::AtomicWrite) {
        // IBA 1.5 A19: both are acknowledged by a zero-length READ RESPONSE ONLY.
        let only = rx.info.position == crate::wire::Position::Only;
        if psn != wqe.first_psn || !only || !rx.repr.payload.is_empty() {
            dev.stats.drop(DropReason::BadResponse);
            return;
        }
        advance(qp, dev, psn.next(), now);
        complete_head(qp, dev, WcStatus::Success);
        return;
    }
    if wqe.opcode != WrOpcode::RdmaRead {
        dev.stats.drop(DropReason::BadResponse);
        return;
    }
    if psn != qp.req.comp_psn {
        // psn is after comp_psn (earlier ones were filtered): responses went missing.
        let at = qp.req.comp_psn;
        retry(qp, dev, now, at, Retry::ImpliedNak);
        return;
    }
    let mtu = qp.mtu();
    let offset = (psn.diff(wqe.first_psn).max(0) as u32).saturating_mul(mtu);
    let Some(remaining) = wqe.length.checked_sub(offset) else {
        dev.stats.drop(DropReason::BadResponse);
        return;
    };
    let expected = remaining.min(mtu) as usize;
    let payload = rx.repr.payload;
    let ends = rx.info.position.ends_message();
    if payload.len() != expected || ends != (expected as u32 == remaining) {
        dev.stats.drop(DropReason::BadResponse);
        return;
    }
    let pos = qp.sq.ring.head();
    let Device { mem, mrs, .. } = dev;
    if sgl::scatter(qp.sq.sges(pos), u64::from(offset), payload, mrs, qp.pd, mem).is_err() {
        fail_head(qp, dev, WcStatus::LocProtErr);
        return;
    }
    advance(qp, dev, psn.next(), now);
    if ends {
        complete_head(qp, dev, WcStatus::Success);
    }
}

/// A congestion notification or an ECN-marked response: slow down.
pub fn on_congestion<M>(qp: &mut Qp, dev: &mut Device<M>) {
    if qp.qp_type == QpType::Rc {
        cut_window(qp, dev, false);
    }
}
