//! The data path between the host's rings and the transport: [`pump`].
//!
//! One pump, per device with objects:
//! 1. every QP's receive ring, then its send ring, then every SRQ's ring:
//!    each new entry is copied out once, decoded and checked
//!    ([`verbs_ring::wqe`]) and posted to the transport; only then is its
//!    slot released. An entry the transport has no room for (its queue is
//!    as deep as the ring, but still holds WQEs in flight), or that a QP
//!    not yet in RTS cannot take, stays in the ring for a later pump: the
//!    host sees the ring as its flow control. An entry that fails
//!    validation completes with the status the decoder names and is
//!    released;
//! 2. the transport runs (so posted sends leave at once, not at the next
//!    network poll);
//! 3. every CQ is drained from the transport into its completion ring,
//!    every field of `ibv_wc`. A completion that finds the ring full is
//!    dropped and the CQ raises `CQ_ERR`, as rxe's `rxe_cq_post` does;
//! 4. the transport's async events go to the owning context.
//!
//! A CQ whose host asked for an event (`ibv_req_notify_cq`, the ring's `arm`
//! word) and got completions that satisfy it is answered in the ring, and its
//! context is in the report's [`PumpReport::wake`]: the kernel rings that
//! host's doorbell ([`verbs_ring::wake`]).
//!
//! A ring whose peer index breaks the protocol poisons only its object: a
//! QP goes to ERR (its WQEs flush) with `QP_FATAL`, a CQ stops being
//! written with `CQ_ERR`, an SRQ stops being read with `SRQ_ERR`.

use alloc::vec::Vec;

use verbs_ring::abi::{Cqe, RecvWqe, SendWqe, wc_opcode, wc_status};
use verbs_ring::cmd::event_type;
use verbs_ring::dispatch::{Dispatcher, EventSource, Handles, ObjId, ObjKind};
use verbs_ring::ring::Consumer;
use verbs_ring::shm::SharedMem;
use verbs_ring::wake::ContextSet;
use verbs_ring::wire::Wire;
use verbs_ring::wqe::{SendPayload, decode_recv, decode_send};

use super::objects::{CqObj, Objects, QpObj, TransportAccess};
use super::{CoreAccess, CoreVerbs};
use crate::rxe::ah::AhHandle;
use crate::rxe::cq::CqHandle;
use crate::rxe::event::AsyncEvent;
use crate::rxe::memory::Memory;
use crate::rxe::mr::MrHandle;
use crate::rxe::qp::{QpAttr, QpHandle};
use crate::rxe::qp_state::{AttrMask, QpState};
use crate::rxe::queue::PostError;
use crate::rxe::sink::FrameSink;
use crate::rxe::srq::SrqHandle;
use crate::rxe::time::Instant;
use crate::rxe::transport::{RxeTransport, VerbsError};
use crate::rxe::wc::WorkCompletion;
use crate::rxe::wr::{MemOp, RecvWr, RemoteOp, SendFlags, SendWr, Sge, UdDest, WrOpcode};

/// Entries taken from one ring per pump, so one busy queue cannot hold the
/// poll loop (the next pump continues).
const RING_BUDGET: u32 = 256;

/// What one pump moved.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PumpReport {
    /// Send WQEs taken from SQ rings (posted or completed in error).
    pub sends: u32,
    /// Receive WQEs taken from RQ and SRQ rings.
    pub recvs: u32,
    /// CQEs written into completion rings.
    pub cqes: u32,
    /// Completions lost to full completion rings.
    pub overruns: u32,
    /// Async events handed to contexts.
    pub events: u32,
    /// Contexts with a CQ whose requested completion event came: their
    /// hosts are owed a doorbell.
    pub wake: ContextSet,
}

impl PumpReport {
    /// Whether anything moved (the kernel then pumps again at once).
    pub fn moved(&self) -> bool {
        self.sends + self.recvs + self.cqes > 0
    }
}

/// Move WQEs from the rings into the transport and completions back, for
/// every object of the provider behind `d`. `now` is the transport's time.
pub fn pump<A: CoreAccess + TransportAccess>(d: &mut Dispatcher, p: &mut CoreVerbs<'_, A>, now: Instant) -> PumpReport {
    pump_with(d, p, now, Rings::All)
}

/// Only the receive rings (every QP's RQ and every SRQ) into the transport:
/// what the poll loop runs before it takes frames in. A host that posted a
/// receive and then told its peer to send must find it posted when the
/// peer's frame arrives, as with rxe, whose receive queue is the ring the
/// library writes; were the ring read only after the frames, a UD message
/// could be dropped for want of a receive the host posted long before.
pub fn pump_receives<A: CoreAccess + TransportAccess>(
    d: &mut Dispatcher,
    p: &mut CoreVerbs<'_, A>,
    now: Instant,
) -> PumpReport {
    pump_with(d, p, now, Rings::Receives)
}

/// Which rings a pump reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rings {
    All,
    Receives,
}

fn pump_with<A: CoreAccess + TransportAccess>(
    d: &mut Dispatcher,
    p: &mut CoreVerbs<'_, A>,
    now: Instant,
    rings: Rings,
) -> PumpReport {
    let handles = d.handles();
    p.u.now = now;
    let mut events = Vec::new();
    let mut report = PumpReport::default();
    let CoreVerbs { access, u } = p;
    let objs = &mut u.objs;
    for dev in objs.active_devs() {
        let r = access.with_transport(dev, |t, sink, shm| {
            let mut pump = Pump { t, sink, shm, objs, handles: &handles, events: &mut events, now, dev };
            Ok(match rings {
                Rings::All => pump_dev(&mut pump, dev),
                Rings::Receives => pump_dev_receives(&mut pump, dev),
            })
        });
        if let Ok(r) = r {
            report.sends += r.sends;
            report.recvs += r.recvs;
            report.cqes += r.cqes;
            report.overruns += r.overruns;
            report.wake.extend(&r.wake);
        }
    }
    report.events = events.len() as u32;
    for (src, ty) in events {
        d.post_event(src, ty);
    }
    report
}

struct Pump<'a, 'h, M: Memory, S: SharedMem + ?Sized> {
    t: &'a mut RxeTransport<M>,
    sink: &'a mut dyn FrameSink,
    shm: &'a S,
    objs: &'a mut Objects,
    handles: &'a Handles<'h>,
    events: &'a mut Vec<(EventSource, u32)>,
    now: Instant,
    /// The device whose transport `t` is.
    dev: u32,
}

fn pump_dev<M: Memory, S: SharedMem + ?Sized>(p: &mut Pump<'_, '_, M, S>, dev: u32) -> PumpReport {
    let mut r = PumpReport::default();
    let qps: Vec<ObjId> = p.objs.qps.iter().filter(|(_, q)| q.dev == dev && !q.failed).map(|(id, _)| *id).collect();
    for id in &qps {
        r.recvs += p.recv_ring(*id);
        r.sends += p.send_ring(*id);
    }
    let srqs: Vec<ObjId> = p.objs.srqs.iter().filter(|(_, s)| s.dev == dev && !s.failed).map(|(id, _)| *id).collect();
    for id in srqs {
        r.recvs += p.srq_ring(id);
    }
    if r.sends + r.recvs > 0 {
        p.t.poll(p.now, p.sink);
    }
    p.forward_events();
    let cqs: Vec<ObjId> = p.objs.cqs.iter().filter(|(_, c)| c.dev == dev).map(|(id, _)| *id).collect();
    for id in cqs {
        let (n, lost, fired) = p.drain_cq(id);
        r.cqes += n;
        r.overruns += lost;
        if fired && let Some(ctx) = p.handles.owner((ObjKind::Cq, id)) {
            r.wake.insert(ctx);
        }
    }
    r
}

fn pump_dev_receives<M: Memory, S: SharedMem + ?Sized>(p: &mut Pump<'_, '_, M, S>, dev: u32) -> PumpReport {
    let mut r = PumpReport::default();
    let qps: Vec<ObjId> = p.objs.qps.iter().filter(|(_, q)| q.dev == dev && !q.failed).map(|(id, _)| *id).collect();
    for id in qps {
        r.recvs += p.recv_ring(id);
    }
    let srqs: Vec<ObjId> = p.objs.srqs.iter().filter(|(_, s)| s.dev == dev && !s.failed).map(|(id, _)| *id).collect();
    for id in srqs {
        r.recvs += p.srq_ring(id);
    }
    r
}

/// A completion for a WQE refused before the transport saw it.
fn error_cqe(wr_id: u64, status: u32, opcode: u32, qpn: u32) -> Cqe {
    Cqe { wr_id, status, opcode, qp_num: qpn, ..Default::default() }
}

/// The wc opcode a send WQE's completion carries.
fn send_wc_opcode(op: u32) -> u32 {
    use verbs_ring::abi::wr_opcode::*;
    match op {
        RDMA_WRITE | RDMA_WRITE_WITH_IMM => wc_opcode::RDMA_WRITE,
        RDMA_READ => wc_opcode::RDMA_READ,
        ATOMIC_CMP_AND_SWP => wc_opcode::COMP_SWAP,
        ATOMIC_FETCH_AND_ADD => wc_opcode::FETCH_ADD,
        LOCAL_INV => wc_opcode::LOCAL_INV,
        BIND_MW => wc_opcode::BIND_MW,
        REG_MR => wc_opcode::REG_MR,
        FLUSH => wc_opcode::FLUSH,
        ATOMIC_WRITE => wc_opcode::ATOMIC_WRITE,
        _ => wc_opcode::SEND,
    }
}

/// The completion status for a post the transport refused outright.
fn post_error_status(e: &VerbsError) -> u32 {
    match e {
        VerbsError::Post(PostError::TooManySge | PostError::InlineTooLong) => wc_status::LOC_LEN_ERR,
        _ => wc_status::LOC_QP_OP_ERR,
    }
}

/// Every field of `ibv_wc`.
fn cqe_of(wc: &WorkCompletion) -> Cqe {
    Cqe {
        wr_id: wc.wr_id,
        status: wc.status as u32,
        opcode: wc.opcode as u32,
        vendor_err: wc.vendor_err,
        byte_len: wc.byte_len,
        imm_data: wc.imm_data,
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
        wc_flags: wc.wc_flags.0,
        pkey_index: wc.pkey_index,
        slid: wc.slid,
        sl: wc.sl,
        dlid_path_bits: wc.dlid_path_bits,
        reserved0: [0; 2],
        reserved1: [0; 2],
    }
}

/// What a ring holds, looked at before any buffer is prepared for an entry:
/// most pumps find most rings empty, and the pump runs on every pass of the
/// poll loop.
enum RingState {
    Empty,
    Ready,
    /// The host broke the ring's protocol.
    Broken,
}

fn ring_state<S: SharedMem + ?Sized>(shm: &S, ring: Option<&mut Consumer>) -> RingState {
    match ring.map(|r| r.available(shm)) {
        None | Some(Ok(0)) => RingState::Empty,
        Some(Ok(_)) => RingState::Ready,
        Some(Err(_)) => RingState::Broken,
    }
}

/// What to do with the entry at the head of a ring.
enum Take {
    /// Posted, or completed in error: release the slot.
    Release,
    /// The transport cannot take it now: leave it and stop this ring.
    Hold,
}

impl<M: Memory, S: SharedMem + ?Sized> Pump<'_, '_, M, S> {
    /// Queue a provider-made completion on CQ `cq` (written after what the
    /// transport already holds for it).
    fn local_cqe(&mut self, cq: ObjId, cqe: Cqe) {
        if let Some(c) = self.objs.cqs.get_mut(&cq) {
            c.local.push_back(cqe);
        }
    }

    /// A QP whose ring broke the protocol: to ERR (the transport flushes
    /// what it holds), and the owner hears QP_FATAL.
    fn fail_qp(&mut self, id: ObjId) {
        if let Some(q) = self.objs.qps.get_mut(&id) {
            q.failed = true;
        }
        let attr = QpAttr { qp_state: QpState::Err, ..QpAttr::default() };
        let _ = self.t.modify_qp(QpHandle::from_raw(super::objects::raw(id)), &attr, AttrMask::STATE);
        self.events.push((EventSource::Object(ObjKind::Qp, id), event_type::QP_FATAL));
    }

    fn recv_ring(&mut self, id: ObjId) -> u32 {
        match ring_state(self.shm, self.objs.qps.get_mut(&id).and_then(|q| q.rq.as_mut())) {
            RingState::Ready => {}
            RingState::Empty => return 0,
            RingState::Broken => {
                self.fail_qp(id);
                return 0;
            }
        }
        let mut n = 0;
        let mut entry = [0u8; RecvWqe::SIZE + 32 * verbs_ring::abi::Sge::SIZE];
        while n < RING_BUDGET {
            let Some(q) = self.objs.qps.get_mut(&id) else { return n };
            let (qpn, recv_cq, max_sge) = (q.qpn, q.recv_cq, q.cap.max_recv_sge);
            let Some(rq) = q.rq.as_mut() else { return n };
            let size = rq.geometry().entry_size().min(entry.len());
            match rq.peek(self.shm, &mut entry[..size]) {
                Ok(true) => {}
                Ok(false) => return n,
                Err(_) => {
                    self.fail_qp(id);
                    return n;
                }
            }
            let take = match decode_recv(&entry[..size], max_sge) {
                Err(e) => {
                    let wr_id = RecvWqe::decode(&entry[..size]).map_or(0, |w| w.wr_id);
                    self.local_cqe(recv_cq, error_cqe(wr_id, e.0, wc_opcode::RECV, qpn));
                    Take::Release
                }
                Ok((wqe, list)) => {
                    let mut sges = [Sge::default(); 32];
                    for (d, s) in sges.iter_mut().zip(list.as_slice()) {
                        *d = Sge { addr: s.addr, length: s.length, lkey: s.lkey };
                    }
                    let wr = RecvWr { wr_id: wqe.wr_id, sg_list: &sges[..list.as_slice().len()] };
                    match self.t.post_recv(QpHandle::from_raw(super::objects::raw(id)), &wr) {
                        Ok(()) => Take::Release,
                        Err(VerbsError::Post(PostError::Full)) => Take::Hold,
                        Err(e) => {
                            self.local_cqe(recv_cq, error_cqe(wqe.wr_id, post_error_status(&e), wc_opcode::RECV, qpn));
                            Take::Release
                        }
                    }
                }
            };
            if let Take::Hold = take {
                return n;
            }
            let released = self.objs.qps.get_mut(&id).and_then(|q| q.rq.as_mut()).map(|rq| rq.release(self.shm));
            if !matches!(released, Some(Ok(()))) {
                self.fail_qp(id);
                return n;
            }
            n += 1;
        }
        n
    }

    fn send_ring(&mut self, id: ObjId) -> u32 {
        match ring_state(self.shm, self.objs.qps.get_mut(&id).map(|q| &mut q.sq)) {
            RingState::Ready => {}
            RingState::Empty => return 0,
            RingState::Broken => {
                self.fail_qp(id);
                return 0;
            }
        }
        let mut n = 0;
        let mut entry = alloc::vec![0u8; 0];
        while n < RING_BUDGET {
            let Some(q) = self.objs.qps.get_mut(&id) else { return n };
            let QpObj { qpn, send_cq, cap, qp_type, .. } = *q;
            let size = q.sq.geometry().entry_size();
            entry.resize(size, 0);
            match q.sq.peek(self.shm, &mut entry) {
                Ok(true) => {}
                Ok(false) => return n,
                Err(_) => {
                    self.fail_qp(id);
                    return n;
                }
            }
            let take = match decode_send(&entry, &cap, qp_type) {
                Err(e) => {
                    let (wr_id, op) = SendWqe::decode(&entry).map_or((0, 0), |w| (w.wr_id, w.opcode));
                    self.local_cqe(send_cq, error_cqe(wr_id, e.0, send_wc_opcode(op), qpn));
                    Take::Release
                }
                Ok((wqe, payload)) => self.post_send(id, qpn, send_cq, &wqe, &payload),
            };
            if let Take::Hold = take {
                return n;
            }
            let released = self.objs.qps.get_mut(&id).map(|q| q.sq.release(self.shm));
            if !matches!(released, Some(Ok(()))) {
                self.fail_qp(id);
                return n;
            }
            n += 1;
        }
        n
    }

    fn post_send(&mut self, id: ObjId, qpn: u32, send_cq: ObjId, wqe: &SendWqe, payload: &SendPayload<'_>) -> Take {
        let fail = |me: &mut Self, status| {
            me.local_cqe(send_cq, error_cqe(wqe.wr_id, status, send_wc_opcode(wqe.opcode), qpn));
            Take::Release
        };
        // decode_send accepted the opcode for this QP type.
        let Some(opcode) = WrOpcode::from_raw(wqe.opcode) else { return fail(self, wc_status::LOC_QP_OP_ERR) };
        let ud = if self.objs.qps.get(&id).is_some_and(|q| q.qp_type == verbs_ring::cmd::qp_type::UD) {
            // The AH is a handle of the QP's own context, resolved with the
            // same owner check a command gets.
            match self.handles.resolve((ObjKind::Qp, id), wqe.ud_ah, ObjKind::Ah) {
                Some(ah) => Some(UdDest {
                    ah: AhHandle::from_raw(super::objects::raw(ah)),
                    remote_qpn: wqe.ud_remote_qpn,
                    remote_qkey: wqe.ud_remote_qkey,
                }),
                None => return fail(self, wc_status::LOC_QP_OP_ERR),
            }
        } else {
            None
        };
        let mut sges = [Sge::default(); 32];
        let (sg_list, inline): (&[Sge], &[u8]) = match payload {
            SendPayload::Inline(d) => (&[], d),
            SendPayload::Sges(list) => {
                for (d, s) in sges.iter_mut().zip(list.as_slice()) {
                    *d = Sge { addr: s.addr, length: s.length, lkey: s.lkey };
                }
                (&sges[..list.as_slice().len()], &[])
            }
        };
        // The memory operations' arguments, as `abi::SendWqe` lays them out.
        let mem = match opcode {
            WrOpcode::RegMr => match self.handles.resolve((ObjKind::Qp, id), wqe.ud_ah, ObjKind::Mr) {
                Some(mr) => MemOp::Reg {
                    mr: MrHandle::from_raw(super::objects::raw(mr)),
                    key: wqe.imm_data,
                    access: wqe.ud_remote_qpn,
                },
                None => return fail(self, wc_status::LOC_QP_OP_ERR),
            },
            WrOpcode::BindMw => MemOp::Bind {
                mw_rkey: wqe.rkey,
                new_rkey: wqe.imm_data,
                mr_lkey: wqe.ud_remote_qkey,
                addr: wqe.remote_addr,
                length: wqe.compare_add,
                access: wqe.ud_remote_qpn,
            },
            _ => MemOp::None,
        };
        let mut remote = RemoteOp {
            remote_addr: wqe.remote_addr,
            rkey: wqe.rkey,
            compare_add: wqe.compare_add,
            swap: wqe.swap,
            ..RemoteOp::default()
        };
        match opcode {
            WrOpcode::Flush => {
                remote.flush_type = wqe.imm_data as u8;
                remote.flush_level = (wqe.imm_data >> 8) as u8;
            }
            // The ring carries the 8 bytes little-endian; the transport wants
            // them as the bytes' native-order value.
            WrOpcode::AtomicWrite => remote.compare_add = u64::from_ne_bytes(wqe.compare_add.to_le_bytes()),
            _ => {}
        }
        let wr = SendWr {
            wr_id: wqe.wr_id,
            opcode,
            flags: SendFlags(wqe.send_flags),
            sg_list,
            imm_or_rkey: wqe.imm_data,
            remote,
            ud,
            inline_data: inline,
            mem,
        };
        match self.t.post_send(QpHandle::from_raw(super::objects::raw(id)), &wr) {
            Ok(()) => Take::Release,
            // Not yet RTS, or the transport's queue still holds WQEs in
            // flight: the entry waits in the ring.
            Err(VerbsError::Post(PostError::Full)) => Take::Hold,
            Err(VerbsError::InvalidState(QpState::Reset | QpState::Init | QpState::Rtr)) => Take::Hold,
            Err(e) => fail(self, post_error_status(&e)),
        }
    }

    fn srq_ring(&mut self, id: ObjId) -> u32 {
        match ring_state(self.shm, self.objs.srqs.get_mut(&id).map(|s| &mut s.ring)) {
            RingState::Ready => {}
            RingState::Empty => return 0,
            RingState::Broken => {
                if let Some(s) = self.objs.srqs.get_mut(&id) {
                    s.failed = true;
                }
                self.events.push((EventSource::Object(ObjKind::Srq, id), event_type::SRQ_ERR));
                return 0;
            }
        }
        let mut n = 0;
        let mut entry = [0u8; RecvWqe::SIZE + 32 * verbs_ring::abi::Sge::SIZE];
        while n < RING_BUDGET {
            let Some(s) = self.objs.srqs.get_mut(&id) else { return n };
            let max_sge = s.max_sge;
            let size = s.ring.geometry().entry_size().min(entry.len());
            let ok = match s.ring.peek(self.shm, &mut entry[..size]) {
                Ok(true) => true,
                Ok(false) => return n,
                Err(_) => false,
            };
            let take = if !ok {
                None
            } else {
                match decode_recv(&entry[..size], max_sge) {
                    // An SRQ has no CQ of its own to complete a bad entry on:
                    // it is dropped and the owner hears SRQ_ERR.
                    Err(_) => {
                        self.events.push((EventSource::Object(ObjKind::Srq, id), event_type::SRQ_ERR));
                        Some(Take::Release)
                    }
                    Ok((wqe, list)) => {
                        let mut sges = [Sge::default(); 32];
                        for (d, s) in sges.iter_mut().zip(list.as_slice()) {
                            *d = Sge { addr: s.addr, length: s.length, lkey: s.lkey };
                        }
                        let wr = RecvWr { wr_id: wqe.wr_id, sg_list: &sges[..list.as_slice().len()] };
                        match self.t.post_srq_recv(SrqHandle::from_raw(super::objects::raw(id)), &wr) {
                            Ok(()) => Some(Take::Release),
                            Err(VerbsError::Post(PostError::Full)) => Some(Take::Hold),
                            Err(_) => {
                                self.events.push((EventSource::Object(ObjKind::Srq, id), event_type::SRQ_ERR));
                                Some(Take::Release)
                            }
                        }
                    }
                }
            };
            let s = match self.objs.srqs.get_mut(&id) {
                Some(s) => s,
                None => return n,
            };
            match take {
                Some(Take::Hold) => return n,
                Some(Take::Release) if s.ring.release(self.shm).is_ok() => n += 1,
                _ => {
                    s.failed = true;
                    self.events.push((EventSource::Object(ObjKind::Srq, id), event_type::SRQ_ERR));
                    return n;
                }
            }
        }
        n
    }

    /// The transport's async events, for the objects this provider owns
    /// (the console's own QPs share the transport; their events are not
    /// any context's).
    fn forward_events(&mut self) {
        while let Some(ev) = self.t.poll_event() {
            let dev = self.dev;
            let by_qpn = |objs: &Objects, qpn: u32| {
                objs.qps.iter().find(|(_, q)| q.dev == dev && q.qpn == qpn).map(|(id, _)| *id)
            };
            let tagged = |raw: u32| super::objects::obj_id(dev, raw).ok();
            let (kind, id, ty) = match ev {
                AsyncEvent::CqErr(h) => (ObjKind::Cq, tagged(h.raw()), event_type::CQ_ERR),
                AsyncEvent::SrqLimitReached(h) => (ObjKind::Srq, tagged(h.raw()), event_type::SRQ_LIMIT_REACHED),
                AsyncEvent::QpFatal { qpn } => (ObjKind::Qp, by_qpn(self.objs, qpn), event_type::QP_FATAL),
                AsyncEvent::QpReqErr { qpn } => (ObjKind::Qp, by_qpn(self.objs, qpn), event_type::QP_REQ_ERR),
                AsyncEvent::QpAccessErr { qpn } => (ObjKind::Qp, by_qpn(self.objs, qpn), event_type::QP_ACCESS_ERR),
                AsyncEvent::SqDrained { qpn } => (ObjKind::Qp, by_qpn(self.objs, qpn), event_type::SQ_DRAINED),
                AsyncEvent::QpLastWqeReached { qpn } => {
                    (ObjKind::Qp, by_qpn(self.objs, qpn), event_type::QP_LAST_WQE_REACHED)
                }
                AsyncEvent::CommEst { qpn } => (ObjKind::Qp, by_qpn(self.objs, qpn), event_type::COMM_EST),
                AsyncEvent::PathMig { qpn } => (ObjKind::Qp, by_qpn(self.objs, qpn), event_type::PATH_MIG),
            };
            // The dispatcher drops an event about an id it does not know.
            if let Some(id) = id {
                self.events.push((EventSource::Object(kind, id), ty));
            }
        }
    }

    /// Move CQ `id`'s completions (the transport's, then the provider's own)
    /// into its ring; returns (written, dropped, whether they answer the
    /// host's request for an event).
    fn drain_cq(&mut self, id: ObjId) -> (u32, u32, bool) {
        let Some(c) = self.objs.cqs.get_mut(&id) else { return (0, 0, false) };
        // Nothing to write: leave the ring alone (a broken consumer index is
        // found when there is something to write).
        if c.local.is_empty() && self.t.cq(CqHandle::from_raw(super::objects::raw(id))).is_none_or(|q| q.is_empty()) {
            return (0, 0, false);
        }
        let CqObj { ring, local, overruns, dead, notify, .. } = c;
        let was_dead = *dead;
        let mut room = match (*dead, ring.free(self.shm)) {
            (true, _) => 0,
            (false, Ok(n)) => n,
            (false, Err(_)) => {
                // The host's consumer index broke the protocol: this CQ is
                // done, and says so once.
                *dead = true;
                self.events.push((EventSource::Object(ObjKind::Cq, id), event_type::CQ_ERR));
                0
            }
        };
        let (mut written, mut lost, mut solicited) = (0u32, 0u32, false);
        let mut b = [0u8; Cqe::SIZE];
        let cq = CqHandle::from_raw(super::objects::raw(id));
        loop {
            let (cqe, sol) = match self.t.poll_one(cq) {
                Ok(Some(wc)) => (cqe_of(&wc), wc.raises_solicited_event()),
                _ => match local.pop_front() {
                    // The provider's own are all errors.
                    Some(c) => (c, true),
                    None => break,
                },
            };
            if room == 0 || cqe.encode(&mut b).is_none() || ring.stage(self.shm, &b).is_err() {
                lost += 1;
                continue;
            }
            room -= 1;
            written += 1;
            solicited |= sol;
        }
        if written > 0 && ring.publish(self.shm).is_err() {
            *dead = true;
        }
        // The completions are published: now, and only now, look at the
        // host's request (the order `wake` depends on).
        let fired =
            written > 0 && !*dead && notify.completions_added(self.shm, ring.geometry(), solicited).unwrap_or(false);
        if lost > 0 {
            *overruns += u64::from(lost);
            // An overrun of a live ring: one CQ_ERR per drain that lost
            // completions (the count is the CQ's `overruns`).
            if !was_dead && !*dead {
                self.events.push((EventSource::Object(ObjKind::Cq, id), event_type::CQ_ERR));
            }
        }
        (written, lost, fired)
    }
}
