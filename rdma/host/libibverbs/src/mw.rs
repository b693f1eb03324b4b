//! Memory windows (IBA 10.6.7): `ibv_alloc_mw`, `ibv_dealloc_mw` and
//! `ibv_bind_mw`, inline functions in verbs.h that call the context's
//! `alloc_mw` / `dealloc_mw` / `bind_mw` ops set here.
//!
//! As rdma-core's rxe provider does, a type 1 bind is a BIND_MW work
//! request posted on the caller's QP with the window's next key byte
//! (`ibv_inc_rkey`), and `mw->rkey` takes that key once the post succeeded
//! (the program undoes it on an error completion). Type 2B windows are
//! bound by the program's own BIND_MW requests ([`crate::datapath`]), whose
//! `mw->rkey` it keeps current itself.

use std::ffi::c_int;
use std::ptr::null_mut;
use std::sync::Arc;

use verbs_ring::abi::wr_opcode;
use verbs_ring::cmd::{self, mw_type, nr};

use crate::abi::*;
use crate::datapath;
use crate::ffi::{self, guard, ptr_or_errno};
use crate::state::{Shared, errno_of};

/// A memory window.
#[repr(C)]
pub struct MwObj {
    pub mw: ibv_mw,
    pub sh: Arc<Shared>,
}

/// `ibv_inc_rkey`: the next key byte, the index kept.
pub fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xFF) | (rkey.wrapping_add(1) & 0xFF)
}

/// The window behind an `ibv_mw`.
///
/// # Safety
/// `p` is null or a window [`alloc_mw`] returned and not yet deallocated.
pub unsafe fn mw<'a>(p: *mut ibv_mw) -> Result<&'a MwObj, c_int> {
    if p.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: `ibv_mw` is the first field of our `#[repr(C)]` MwObj (the
    // caller's promise that it is one of ours).
    Ok(unsafe { &*p.cast::<MwObj>() })
}

/// `ops.alloc_mw`.
pub(crate) unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, ty: c_int) -> *mut ibv_mw {
    guard(null_mut(), || {
        ptr_or_errno((|| {
            let raw = match ty {
                IBV_MW_TYPE_1 => mw_type::TYPE_1,
                IBV_MW_TYPE_2 => mw_type::TYPE_2,
                _ => return Err(libc::EINVAL),
            };
            // SAFETY: the program's PD (C API).
            let p = unsafe { ffi::pd(pd) }?;
            let req = cmd::AllocMwReq { pd_handle: p.pd.handle, mw_type: raw };
            let r: cmd::AllocMwResp = p.sh.ctx.command(nr::ALLOC_MW, &req).map_err(|e| errno_of(&e))?;
            let mw = ibv_mw { context: p.pd.context, pd, rkey: r.rkey, handle: r.mw_handle, type_: ty };
            Ok(Box::into_raw(Box::new(MwObj { mw, sh: p.sh.clone() })).cast())
        })())
    })
}

/// `ops.dealloc_mw`: a bound window is unbound by its deallocation.
pub(crate) unsafe extern "C" fn dealloc_mw(p: *mut ibv_mw) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the program's window (C API).
        let Ok(w) = (unsafe { mw(p) }) else { return libc::EINVAL };
        let req = cmd::HandleReq { handle: w.mw.handle, reserved: 0 };
        if let Err(e) = w.sh.ctx.command::<_, cmd::Empty>(nr::DEALLOC_MW, &req) {
            return errno_of(&e);
        }
        // SAFETY: the box from alloc_mw; the firmware let the window go.
        drop(unsafe { Box::from_raw(p.cast::<MwObj>()) });
        0
    })
}

/// `ops.bind_mw` (type 1; verbs.h's inline `ibv_bind_mw` has checked the
/// type and that the MR is of the window's PD).
pub(crate) unsafe extern "C" fn bind_mw(qp: *mut ibv_qp, p: *mut ibv_mw, b: *mut ibv_mw_bind) -> c_int {
    guard(libc::EIO, || {
        if p.is_null() || b.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program's bind request, valid for the call (C API).
        let b = unsafe { &*b };
        // As rxe: a type 1 window is never zero-based.
        if b.bind_info.mw_access_flags & cmd::access::ZERO_BASED != 0 {
            return libc::EINVAL;
        }
        // SAFETY: the program's window (C API).
        let rkey = match unsafe { mw(p) } {
            Ok(w) => inc_rkey(w.mw.rkey),
            Err(e) => return e,
        };
        let mut wr = ibv_send_wr {
            wr_id: b.wr_id,
            next: null_mut(),
            sg_list: null_mut(),
            num_sge: 0,
            opcode: wr_opcode::BIND_MW as c_int,
            send_flags: b.send_flags,
            imm_data: 0,
            wr: WrUnion { rdma: WrRdma { remote_addr: 0, rkey: 0 } },
            qp_type: 0,
            bind_mw: WrBindMwTso { bind_mw: WrBindMw { mw: p, rkey, bind_info: b.bind_info } },
        };
        let mut bad = null_mut();
        // SAFETY: `qp` is the program's QP (C API); `wr` is a one-request
        // list on our stack, valid for the call.
        let rc = unsafe { datapath::post_send(qp, &mut wr, &mut bad) };
        if rc == 0 {
            // SAFETY: the program's window (checked above); nothing else
            // holds a reference into it during this call.
            unsafe { (*p).rkey = rkey };
        }
        rc
    })
}
