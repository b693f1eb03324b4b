//! The data path behind the inline calls (`ibv_post_send`, `ibv_post_recv`,
//! `ibv_post_srq_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`, reached
//! through the context's ops table) and the `ibv_qp_ex` `wr_*` calls: C
//! work requests become ring WQEs, CQEs become `ibv_wc`s. SGE addresses
//! are the program's and go to the appliance as they are: each MR is
//! registered with the program's address as its iova, and the appliance
//! maps it onto the region offset its pages moved to ([`crate::mem`]).

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering::Relaxed;

use verbs_ring::abi::{CQE_SIZE, Cqe, SendWqe, Sge, send_flags, wc_flags, wr_opcode};
use verbs_ring::cmd::qp_type;
use verbs_ring::ring::RingError;
use verbs_ring::wire::Wire;
use verbs_ring::wqe;

use crate::abi::*;
use crate::channel;
use crate::ffi::{self, guard};
use crate::state::{AhObj, Building, CqObj, QpObj, RecvQueue, SendQueue, Shared, lock};

fn ring_errno(e: RingError) -> c_int {
    match e {
        RingError::Full => libc::ENOMEM,
        RingError::TooLarge { .. } => libc::EINVAL,
        _ => libc::EIO,
    }
}

/// The program's SGE list of a work request.
///
/// # Safety
/// `sg_list` points to `num_sge` SGEs when `num_sge > 0` (the C API's promise).
unsafe fn sges<'a>(sg_list: *const ibv_sge, num_sge: c_int) -> Result<&'a [ibv_sge], c_int> {
    match usize::try_from(num_sge) {
        Ok(0) => Ok(&[]),
        Ok(n) if !sg_list.is_null() => {
            // SAFETY: the caller's promise.
            Ok(unsafe { std::slice::from_raw_parts(sg_list, n) })
        }
        _ => Err(libc::EINVAL),
    }
}

fn translate(_sh: &Shared, s: &ibv_sge) -> Sge {
    // In the MR's iova space, as the program wrote it: an address outside
    // the MR fails the appliance's check with a local protection error.
    Sge { addr: s.addr, length: s.length, lkey: s.lkey }
}

/// The bytes of an inline send, gathered from the program's memory.
fn gather(list: &[ibv_sge], max: u32) -> Result<Vec<u8>, c_int> {
    let total: u64 = list.iter().map(|s| u64::from(s.length)).sum();
    if total > u64::from(max) {
        return Err(libc::EINVAL);
    }
    let mut data = Vec::with_capacity(total as usize);
    for s in list {
        if s.length == 0 {
            continue;
        }
        // SAFETY: with IBV_SEND_INLINE the C API lets the program name any
        // memory it can read; it promises `addr .. addr + length` is such.
        data.extend_from_slice(unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.length as usize) });
    }
    Ok(data)
}

impl SendQueue {
    /// Encode one WQE into the ring (staged, not yet published).
    fn stage(&mut self, sh: &Shared, b: &Building) -> Result<(), c_int> {
        let size = self.ring.geometry().entry_size();
        self.entry.clear();
        self.entry.resize(size, 0);
        let done = match &b.inline {
            Some(data) => wqe::encode_send_inline(&mut self.entry, &b.wqe, data),
            None => {
                if b.sges.len() > self.cap.max_send_sge as usize {
                    return Err(libc::EINVAL);
                }
                wqe::encode_send(&mut self.entry, &b.wqe, &b.sges)
            }
        };
        done.ok_or(libc::EINVAL)?;
        self.ring.stage(sh.ctx.shared_mem(), &self.entry).map_err(ring_errno)
    }
}

/// A BIND_MW's arguments, as the ring's WQE carries them.
struct Bind {
    mw_rkey: u32,
    new_rkey: u32,
    mr_lkey: u32,
    addr: u64,
    length: u64,
    access: u32,
}

/// The fields of a BIND_MW of window `mw` to `info` with key `rkey`, as
/// rxe's provider fills its WQE: the window named by its current rkey, the
/// MR by its lkey (none: an unbind, which must be of zero length).
///
/// # Safety
/// `mw` is null or a window of this library; `info.mr` null or an MR of
/// this library.
unsafe fn bind_fields(mw: *mut ibv_mw, rkey: u32, info: &ibv_mw_bind_info) -> Result<Bind, c_int> {
    if mw.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's promise.
    let mw_rkey = unsafe { (*mw).rkey };
    let mr_lkey = if info.mr.is_null() {
        if info.length != 0 {
            return Err(libc::EINVAL);
        }
        0
    } else {
        // SAFETY: the caller's promise.
        unsafe { (*info.mr).lkey }
    };
    Ok(Bind { mw_rkey, new_rkey: rkey, mr_lkey, addr: info.addr, length: info.length, access: info.mw_access_flags })
}

/// A BIND_MW into the ring's WQE fields (`verbs_ring::abi::SendWqe`'s use,
/// the host library's `WrOp::BindMw`).
fn set_bind(h: &mut SendWqe, b: Bind) {
    (h.rkey, h.imm_data, h.ud_remote_qkey) = (b.mw_rkey, b.new_rkey, b.mr_lkey);
    (h.remote_addr, h.compare_add, h.ud_remote_qpn) = (b.addr, b.length, b.access);
}

/// The ring WQE of one `ibv_send_wr`.
fn build(q: &QpObj, cap_inline: u32, w: &ibv_send_wr) -> Result<Building, c_int> {
    let op = u32::try_from(w.opcode).map_err(|_| libc::EINVAL)?;
    let mut h = SendWqe { wr_id: w.wr_id, opcode: op, send_flags: w.send_flags, ..Default::default() };
    // SAFETY (all three union reads): the union is plain data; which member
    // is meant is the opcode's (or the QP type's) business, and any bytes
    // are a valid value of each member.
    match op {
        wr_opcode::SEND | wr_opcode::SEND_WITH_IMM | wr_opcode::SEND_WITH_INV => {}
        wr_opcode::RDMA_WRITE | wr_opcode::RDMA_WRITE_WITH_IMM | wr_opcode::RDMA_READ => {
            let r = unsafe { w.wr.rdma };
            (h.remote_addr, h.rkey) = (r.remote_addr, r.rkey);
        }
        wr_opcode::ATOMIC_CMP_AND_SWP | wr_opcode::ATOMIC_FETCH_AND_ADD => {
            let a = unsafe { w.wr.atomic };
            (h.remote_addr, h.rkey, h.compare_add, h.swap) = (a.remote_addr, a.rkey, a.compare_add, a.swap);
        }
        wr_opcode::LOCAL_INV => {}
        wr_opcode::BIND_MW => {
            // SAFETY: plain data, as above; BIND_MW means the `bind_mw` member.
            let b = unsafe { w.bind_mw.bind_mw };
            // SAFETY: the window and MR a BIND_MW names are this library's
            // (C API); null ones are refused or mean "unbind".
            set_bind(&mut h, unsafe { bind_fields(b.mw, b.rkey, &b.bind_info) }?);
        }
        _ => return Err(libc::EINVAL),
    }
    match op {
        wr_opcode::SEND_WITH_IMM | wr_opcode::RDMA_WRITE_WITH_IMM => h.imm_data = u32::from_be(w.imm_data),
        // `invalidate_rkey`, in host order.
        wr_opcode::SEND_WITH_INV | wr_opcode::LOCAL_INV => h.imm_data = w.imm_data,
        _ => {}
    }
    if q.qp_type == qp_type::UD {
        let ud = unsafe { w.wr.ud };
        if ud.ah.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: a UD request names an AH of this library (C API promise).
        let ah = unsafe { &*ud.ah.cast::<AhObj>() };
        (h.ud_ah, h.ud_remote_qpn, h.ud_remote_qkey) = (ah.ah.handle, ud.remote_qpn, ud.remote_qkey);
    }
    // SAFETY: the request's SGE list, valid for the call (C API).
    let list = unsafe { sges(w.sg_list, w.num_sge) }?;
    if w.send_flags & send_flags::INLINE != 0 {
        return Ok(Building { wqe: h, sges: Vec::new(), inline: Some(gather(list, cap_inline)?) });
    }
    Ok(Building { wqe: h, sges: list.iter().map(|s| translate(&q.sh, s)).collect(), inline: None })
}

/// `ibv_post_send` (ops.post_send).
pub(crate) unsafe extern "C" fn post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the program's QP (C API).
        let Ok(q) = (unsafe { ffi::qp(qp) }) else { return libc::EINVAL };
        let mem = q.sh.ctx.shared_mem();
        let mut sq = lock(&q.sq);
        let mut free = match sq.ring.free(mem) {
            Ok(f) => f,
            Err(e) => return ring_errno(e),
        };
        let (mut cur, mut err, mut staged) = (wr, 0, false);
        while !cur.is_null() {
            // SAFETY: a list of requests the program built, valid for the call.
            let w = unsafe { &*cur };
            if free == 0 {
                err = libc::ENOMEM;
                break;
            }
            let cap_inline = sq.cap.max_inline_data;
            match build(q, cap_inline, w).and_then(|b| sq.stage(&q.sh, &b)) {
                Ok(()) => (free, staged) = (free - 1, true),
                Err(e) => {
                    err = e;
                    break;
                }
            }
            cur = w.next;
        }
        if staged {
            match sq.ring.publish(mem) {
                Ok(()) => q.sh.ctx.kick(),
                Err(e) => err = ring_errno(e),
            }
        }
        if err != 0 && !bad.is_null() {
            // SAFETY: `bad` is the program's out pointer (C API).
            unsafe { *bad = cur };
        }
        err
    })
}

impl RecvQueue {
    /// Post a list of receive requests; the first one that fails and its errno.
    fn post(&mut self, sh: &Shared, wr: *mut ibv_recv_wr) -> Result<(), (*mut ibv_recv_wr, c_int)> {
        let mem = sh.ctx.shared_mem();
        let mut free = self.ring.free(mem).map_err(|e| (wr, ring_errno(e)))?;
        let size = self.ring.geometry().entry_size();
        let (mut cur, mut err, mut staged) = (wr, 0, false);
        while !cur.is_null() {
            // SAFETY: a list of requests the program built, valid for the call.
            let w = unsafe { &*cur };
            let mut one = || -> Result<(), c_int> {
                if free == 0 {
                    return Err(libc::ENOMEM);
                }
                // SAFETY: the request's SGE list (C API).
                let list = unsafe { sges(w.sg_list, w.num_sge) }?;
                if list.len() > self.max_sge as usize {
                    return Err(libc::EINVAL);
                }
                let sg: Vec<Sge> = list.iter().map(|s| translate(sh, s)).collect();
                self.entry.clear();
                self.entry.resize(size, 0);
                wqe::encode_recv(&mut self.entry, w.wr_id, &sg).ok_or(libc::EINVAL)?;
                self.ring.stage(mem, &self.entry).map_err(ring_errno)
            };
            if let Err(e) = one() {
                err = e;
                break;
            }
            free -= 1;
            staged = true;
            cur = w.next;
        }
        if staged {
            self.ring.publish(mem).map_err(|e| (cur, ring_errno(e)))?;
            sh.ctx.kick();
        }
        if err != 0 { Err((cur, err)) } else { Ok(()) }
    }
}

fn recv_result(r: Result<(), (*mut ibv_recv_wr, c_int)>, bad: *mut *mut ibv_recv_wr) -> c_int {
    match r {
        Ok(()) => 0,
        Err((at, e)) => {
            if !bad.is_null() {
                // SAFETY: the program's out pointer (C API).
                unsafe { *bad = at };
            }
            e
        }
    }
}

/// `ibv_post_recv` (ops.post_recv).
pub(crate) unsafe extern "C" fn post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the program's QP (C API).
        let Ok(q) = (unsafe { ffi::qp(qp) }) else { return libc::EINVAL };
        let Some(rq) = q.rq.as_ref() else { return libc::EINVAL };
        recv_result(lock(rq).post(&q.sh, wr), bad)
    })
}

/// `ibv_post_srq_recv` (ops.post_srq_recv).
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the program's SRQ (C API).
        let Ok(s) = (unsafe { ffi::srq(srq) }) else { return libc::EINVAL };
        recv_result(lock(&s.rq).post(&s.sh, wr), bad)
    })
}

fn to_wc(c: &Cqe) -> ibv_wc {
    ibv_wc {
        wr_id: c.wr_id,
        status: c.status as c_int,
        opcode: c.opcode as c_int,
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        imm_data: if c.wc_flags & wc_flags::WITH_IMM != 0 { c.imm_data.to_be() } else { c.imm_data },
        qp_num: c.qp_num,
        src_qp: c.src_qp,
        wc_flags: c.wc_flags,
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
        dlid_path_bits: c.dlid_path_bits,
    }
}

/// `ibv_poll_cq` (ops.poll_cq): up to `n` completions into `wc`.
pub(crate) unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    guard(-1, || {
        // SAFETY: the program's CQ (C API).
        let Ok(c) = (unsafe { ffi::cq(cq) }) else { return -1 };
        let Ok(n) = usize::try_from(n) else { return -1 };
        if n > 0 && wc.is_null() {
            return -1;
        }
        let mem = c.sh.ctx.shared_mem();
        let mut ring = lock(&c.ring);
        let mut b = [0u8; CQE_SIZE as usize];
        let mut got = 0;
        while got < n {
            match ring.pop(mem, &mut b) {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) => return -1,
            }
            let Some(cqe) = Cqe::decode(&b) else { break };
            // SAFETY: `wc` holds `n` entries (C API); `got < n`.
            unsafe { wc.add(got).write(to_wc(&cqe)) };
            got += 1;
        }
        drop(ring);
        if got == 0 && n > 0 {
            let mut round = c.idle.load(Relaxed);
            verbs::backoff(&mut round);
            c.idle.store(round, Relaxed);
        } else {
            c.idle.store(0, Relaxed);
        }
        got as c_int
    })
}

/// `ibv_req_notify_cq` (ops.req_notify_cq): arm the CQ (its ring's `arm`
/// word: the appliance answers with an event) and its channel.
pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the program's CQ (C API).
        let Ok(c) = (unsafe { ffi::cq(cq) }) else { return libc::EINVAL };
        if c.cq.channel.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: checked above to be the program's CQ, ours.
        unsafe { channel::arm(cq.cast::<CqObj>(), solicited_only != 0) }
    })
}

// The `ibv_qp_ex` work request builder: `wr_start`, one `wr_<op>` per
// request followed by its `wr_set_*`, then `wr_complete` posts them all.

fn with_sq(qpx: *mut ibv_qp_ex, f: impl FnOnce(&QpObj, &mut SendQueue)) {
    guard((), || {
        // SAFETY: `ibv_qp_ex` is the first field of our QpObj (the program's QP, C API).
        let Ok(q) = (unsafe { ffi::qp(qpx.cast()) }) else { return };
        f(q, &mut lock(&q.sq));
    })
}

fn begin(qpx: *mut ibv_qp_ex, op: u32, set: impl FnOnce(&mut SendWqe)) {
    with_sq(qpx, |q, sq| {
        let mut wqe = SendWqe { wr_id: q.qpx.wr_id, opcode: op, send_flags: q.qpx.wr_flags, ..Default::default() };
        set(&mut wqe);
        sq.building.push(Building { wqe, sges: Vec::new(), inline: None });
    })
}

unsafe extern "C" fn wr_start(qpx: *mut ibv_qp_ex) {
    with_sq(qpx, |_, sq| {
        sq.building.clear();
        sq.build_error = 0;
    })
}

unsafe extern "C" fn wr_abort(qpx: *mut ibv_qp_ex) {
    with_sq(qpx, |_, sq| sq.building.clear())
}

unsafe extern "C" fn wr_complete(qpx: *mut ibv_qp_ex) -> c_int {
    let mut rc = libc::EINVAL;
    with_sq(qpx, |q, sq| {
        let batch = std::mem::take(&mut sq.building);
        let mem = q.sh.ctx.shared_mem();
        rc = sq.build_error;
        if rc == 0 {
            rc = match sq.ring.free(mem) {
                Ok(f) if (f as usize) < batch.len() => libc::ENOMEM,
                Ok(_) => 0,
                Err(e) => ring_errno(e),
            };
        }
        if rc == 0 {
            for b in &batch {
                if let Err(e) = sq.stage(&q.sh, b) {
                    rc = e;
                    break;
                }
            }
            match sq.ring.publish(mem) {
                Ok(()) => q.sh.ctx.kick(),
                Err(e) => rc = ring_errno(e),
            }
        }
    });
    rc
}

unsafe extern "C" fn wr_send(qpx: *mut ibv_qp_ex) {
    begin(qpx, wr_opcode::SEND, |_| {})
}

unsafe extern "C" fn wr_send_imm(qpx: *mut ibv_qp_ex, imm: u32) {
    begin(qpx, wr_opcode::SEND_WITH_IMM, |w| w.imm_data = u32::from_be(imm))
}

unsafe extern "C" fn wr_rdma_write(qpx: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    begin(qpx, wr_opcode::RDMA_WRITE, |w| (w.rkey, w.remote_addr) = (rkey, addr))
}

unsafe extern "C" fn wr_rdma_write_imm(qpx: *mut ibv_qp_ex, rkey: u32, addr: u64, imm: u32) {
    begin(qpx, wr_opcode::RDMA_WRITE_WITH_IMM, |w| {
        (w.rkey, w.remote_addr, w.imm_data) = (rkey, addr, u32::from_be(imm))
    })
}

unsafe extern "C" fn wr_rdma_read(qpx: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    begin(qpx, wr_opcode::RDMA_READ, |w| (w.rkey, w.remote_addr) = (rkey, addr))
}

unsafe extern "C" fn wr_atomic_cmp_swp(qpx: *mut ibv_qp_ex, rkey: u32, addr: u64, compare: u64, swap: u64) {
    begin(qpx, wr_opcode::ATOMIC_CMP_AND_SWP, |w| {
        (w.rkey, w.remote_addr, w.compare_add, w.swap) = (rkey, addr, compare, swap)
    })
}

unsafe extern "C" fn wr_atomic_fetch_add(qpx: *mut ibv_qp_ex, rkey: u32, addr: u64, add: u64) {
    begin(qpx, wr_opcode::ATOMIC_FETCH_AND_ADD, |w| (w.rkey, w.remote_addr, w.compare_add) = (rkey, addr, add))
}

unsafe extern "C" fn wr_send_inv(qpx: *mut ibv_qp_ex, invalidate_rkey: u32) {
    begin(qpx, wr_opcode::SEND_WITH_INV, |w| w.imm_data = invalidate_rkey)
}

unsafe extern "C" fn wr_local_inv(qpx: *mut ibv_qp_ex, invalidate_rkey: u32) {
    begin(qpx, wr_opcode::LOCAL_INV, |w| w.imm_data = invalidate_rkey)
}

unsafe extern "C" fn wr_bind_mw(qpx: *mut ibv_qp_ex, mw: *mut ibv_mw, rkey: u32, info: *const ibv_mw_bind_info) {
    let fields = if info.is_null() {
        Err(libc::EINVAL)
    } else {
        // SAFETY: `info` is the program's bind info, `mw` and `info.mr`
        // its window and MR (C API), valid for the call.
        unsafe { bind_fields(mw, rkey, &*info) }
    };
    match fields {
        Ok(b) => begin(qpx, wr_opcode::BIND_MW, |w| set_bind(w, b)),
        Err(e) => fail(qpx, e),
    }
}

/// IBA 1.5 ATOMIC WRITE of the 8 bytes at `data` (`ibv_wr_atomic_write`).
unsafe extern "C" fn wr_atomic_write(qpx: *mut ibv_qp_ex, rkey: u32, addr: u64, data: *const c_void) {
    if data.is_null() {
        return fail(qpx, libc::EINVAL);
    }
    let mut bytes = [0u8; 8];
    // SAFETY: verbs.h: `atomic_wr` points to the 8 bytes to write.
    unsafe { std::ptr::copy_nonoverlapping(data.cast::<u8>(), bytes.as_mut_ptr(), 8) };
    // The ring carries the bytes as they lie in memory (`WrOp::AtomicWrite`).
    let value = u64::from_le_bytes(bytes);
    begin(qpx, wr_opcode::ATOMIC_WRITE, |w| (w.rkey, w.remote_addr, w.compare_add) = (rkey, addr, value))
}

/// A request of the batch that cannot be built: `wr_complete` reports `e`
/// and posts nothing (as a provider that refuses a WQE).
fn fail(qpx: *mut ibv_qp_ex, e: c_int) {
    with_sq(qpx, |_, sq| {
        if sq.build_error == 0 {
            sq.build_error = e;
        }
    })
}

fn last(sq: &mut SendQueue, f: impl FnOnce(&mut Building) -> Result<(), c_int>) {
    let r = match sq.building.last_mut() {
        Some(b) => f(b),
        None => Err(libc::EINVAL),
    };
    if let Err(e) = r
        && sq.build_error == 0
    {
        sq.build_error = e;
    }
}

unsafe extern "C" fn wr_set_sge(qpx: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    with_sq(qpx, |q, sq| {
        last(sq, |b| {
            b.sges = vec![translate(&q.sh, &ibv_sge { addr, length, lkey })];
            Ok(())
        })
    })
}

unsafe extern "C" fn wr_set_sge_list(qpx: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) {
    with_sq(qpx, |q, sq| {
        last(sq, |b| {
            // SAFETY: `list` holds `n` SGEs (C API).
            let l = unsafe { sges(list, c_int::try_from(n).map_err(|_| libc::EINVAL)?) }?;
            b.sges = l.iter().map(|s| translate(&q.sh, s)).collect();
            Ok(())
        })
    })
}

unsafe extern "C" fn wr_set_inline_data(qpx: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    with_sq(qpx, |_, sq| {
        let max = sq.cap.max_inline_data;
        last(sq, |b| {
            let len = u32::try_from(length).map_err(|_| libc::EINVAL)?;
            b.inline = Some(gather(&[ibv_sge { addr: addr as u64, length: len, lkey: 0 }], max)?);
            b.wqe.send_flags |= send_flags::INLINE;
            Ok(())
        })
    })
}

unsafe extern "C" fn wr_set_ud_addr(qpx: *mut ibv_qp_ex, ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32) {
    with_sq(qpx, |_, sq| {
        last(sq, |b| {
            if ah.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: an AH of this library (C API).
            let ah = unsafe { &*ah.cast::<AhObj>() };
            (b.wqe.ud_ah, b.wqe.ud_remote_qpn, b.wqe.ud_remote_qkey) = (ah.ah.handle, remote_qpn, remote_qkey);
            Ok(())
        })
    })
}

/// Fill the `wr_*` table of a new QP.
pub fn fill_qp_ex(x: &mut ibv_qp_ex) {
    x.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    x.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    x.wr_atomic_write = Some(wr_atomic_write);
    x.wr_bind_mw = Some(wr_bind_mw);
    x.wr_local_inv = Some(wr_local_inv);
    x.wr_send_inv = Some(wr_send_inv);
    x.wr_rdma_read = Some(wr_rdma_read);
    x.wr_rdma_write = Some(wr_rdma_write);
    x.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    x.wr_send = Some(wr_send);
    x.wr_send_imm = Some(wr_send_imm);
    x.wr_set_ud_addr = Some(wr_set_ud_addr);
    x.wr_set_inline_data = Some(wr_set_inline_data);
    x.wr_set_sge = Some(wr_set_sge);
    x.wr_set_sge_list = Some(wr_set_sge_list);
    x.wr_start = Some(wr_start);
    x.wr_complete = Some(wr_complete);
    x.wr_abort = Some(wr_abort);
}
