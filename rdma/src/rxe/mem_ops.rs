//! The memory operations a QP runs on its own MRs and windows (IBA vol. 1 10.6.3.5
//! fast registration, 10.6.5 invalidation, 10.6.7 binding; Linux `rxe_mr.c`'s
//! `rxe_reg_fast_mr` / `rxe_invalidate_mr` and `rxe_mw.c`): REG_MR, LOCAL_INV and
//! BIND_MW work requests, and the invalidation a SEND WITH INVALIDATE asks of the
//! responder. Each check is named after the rule it enforces; a failure leaves
//! everything as it was.

use super::device::Device;
use super::mr::{self, AccessFlags, MrType};
use super::mw::{self, MW_ACCESS, MwType};
use super::pd::PdHandle;
use super::pool::split;
use super::wr::MemOp;

/// Why a memory operation was refused. The requester completes the WR with
/// LOC_QP_OP_ERR (REG_MR, LOCAL_INV) or MW_BIND_ERR (BIND_MW), as rxe does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemOpError {
    /// No MR or window has this key now.
    BadKey,
    /// Another PD's object, or a type 2B window bound through another QP.
    WrongOwner,
    /// The object is in the wrong state for the operation (registering a
    /// valid MR, binding a bound type 2B window, invalidating a type 1 one or
    /// an MR with windows bound to it).
    State,
    /// Rights or arguments the rules forbid (C10-73..75, unknown flags).
    Invalid,
}

/// Invalidates what `rkey` names for a QP `qpn` of `pd`: a type 2B window
/// (freed), or a fast-register MR (free again, C10-1-x: only those can be).
pub fn invalidate<M>(dev: &mut Device<M>, pd: PdHandle, qpn: u32, rkey: u32) -> Result<(), MemOpError> {
    if mw::is_mw_key(rkey) {
        let w = mw::find_mut(&mut dev.mws, rkey).ok_or(MemOpError::BadKey)?;
        if w.pd != pd {
            return Err(MemOpError::WrongOwner);
        }
        // o10-37.2.26: a type 1 window cannot be invalidated.
        if w.mw_type == MwType::Type1 || !w.valid {
            return Err(MemOpError::State);
        }
        if w.qp != Some(qpn) {
            return Err(MemOpError::WrongOwner);
        }
        let mr_key = w.mr_key;
        *w = mw::Mw::new(w.pd, w.mw_type, w.rkey);
        if let Some(m) = mr::find_mut(&mut dev.mrs, mr_key) {
            m.bound_mws = m.bound_mws.saturating_sub(1);
        }
        return Ok(());
    }
    let m = mr::find_mut(&mut dev.mrs, rkey).ok_or(MemOpError::BadKey)?;
    if m.pd != pd {
        return Err(MemOpError::WrongOwner);
    }
    if m.mr_type != MrType::MemReg || m.bound_mws > 0 {
        return Err(MemOpError::State);
    }
    m.valid = false;
    Ok(())
}

/// Runs a REG_MR or BIND_MW work request of QP `qpn` in `pd`.
pub fn run<M>(dev: &mut Device<M>, pd: PdHandle, qpn: u32, op: &MemOp) -> Result<(), MemOpError> {
    match *op {
        MemOp::None => Err(MemOpError::Invalid),
        MemOp::Reg { mr, key, access } => reg_mr(dev, pd, mr.raw(), key, access),
        MemOp::Bind { mw_rkey, new_rkey, mr_lkey, addr, length, access } => {
            bind_mw(dev, pd, qpn, Bind { mw_rkey, new_rkey, mr_lkey, addr, length, access })
        }
    }
}

/// REG_MR (`rxe_reg_fast_mr`).
fn reg_mr<M>(dev: &mut Device<M>, pd: PdHandle, handle: u32, key: u32, access: u32) -> Result<(), MemOpError> {
    if access & !AccessFlags::ALL != 0 {
        return Err(MemOpError::Invalid);
    }
    // 10.6.3.1: remote write or atomic access needs local write.
    let needs_local = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
    if access & needs_local != 0 && access & AccessFlags::LOCAL_WRITE == 0 {
        return Err(MemOpError::Invalid);
    }
    let m = dev.mrs.get_mut(handle).ok_or(MemOpError::BadKey)?;
    if m.mr_type != MrType::MemReg {
        return Err(MemOpError::Invalid);
    }
    // Only a free MR may be registered.
    if m.valid {
        return Err(MemOpError::State);
    }
    if m.pd != pd {
        return Err(MemOpError::WrongOwner);
    }
    // The consumer owns the key byte only; the index stays.
    if split(key).0 != split(m.key).0 {
        return Err(MemOpError::Invalid);
    }
    m.key = key;
    m.access = AccessFlags(access);
    m.valid = true;
    Ok(())
}

struct Bind {
    mw_rkey: u32,
    new_rkey: u32,
    mr_lkey: u32,
    addr: u64,
    length: u64,
    access: u32,
}

/// BIND_MW (`rxe_bind_mw`, `rxe_check_bind_mw`).
fn bind_mw<M>(dev: &mut Device<M>, pd: PdHandle, qpn: u32, b: Bind) -> Result<(), MemOpError> {
    let w = mw::find(&dev.mws, b.mw_rkey).ok_or(MemOpError::BadKey)?;
    if b.access & !MW_ACCESS != 0 {
        return Err(MemOpError::Invalid);
    }
    match w.mw_type {
        MwType::Type1 => {
            if !w.valid {
                return Err(MemOpError::State);
            }
        }
        MwType::Type2 => {
            // o10-37.2.30: only a free type 2B window can be bound.
            if w.valid {
                return Err(MemOpError::State);
            }
            // C10-72: through a QP of the window's PD.
            if w.pd != pd {
                return Err(MemOpError::WrongOwner);
            }
            // o10-37.2.40: a type 2B window is not unbound by binding nothing.
            if b.length == 0 {
                return Err(MemOpError::Invalid);
            }
        }
    }
    let mw_pd = w.pd;
    if b.length > 0 {
        let m = mr::find(&dev.mrs, b.mr_lkey).ok_or(MemOpError::BadKey)?;
        if !m.valid {
            return Err(MemOpError::State);
        }
        if m.pd != mw_pd {
            return Err(MemOpError::WrongOwner);
        }
        // C10-73: the MR must allow binding.
        if !m.access.has(AccessFlags::MW_BIND) {
            return Err(MemOpError::Invalid);
        }
        // C10-74: a writable window needs a locally writable MR.
        let writes = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
        if b.access & writes != 0 && !m.access.has(AccessFlags::LOCAL_WRITE) {
            return Err(MemOpError::Invalid);
        }
        // C10-75: the window lies inside the MR.
        m.check_bounds(b.addr, b.length).map_err(|_| MemOpError::Invalid)?;
    }
    let (old_mr, mw_type) = (w.mr_key, w.mw_type);
    if let Some(m) = mr::find_mut(&mut dev.mrs, old_mr).filter(|_| old_mr != 0) {
        m.bound_mws = m.bound_mws.saturating_sub(1);
    }
    if b.length > 0
        && let Some(m) = mr::find_mut(&mut dev.mrs, b.mr_lkey)
    {
        m.bound_mws += 1;
    }
    let w = mw::find_mut(&mut dev.mws, b.mw_rkey).ok_or(MemOpError::BadKey)?;
    w.rkey = (w.rkey & !0xFF) | (b.new_rkey & 0xFF);
    w.access = AccessFlags(b.access);
    w.valid = true;
    w.addr = b.addr;
    w.length = b.length;
    w.mr_key = if b.length > 0 { b.mr_lkey } else { 0 };
    w.qp = (mw_type == MwType::Type2).then_some(qpn);
    Ok(())
}
