//! Memory windows (`ibv_alloc_mw`, `ibv_bind_mw`, `ibv_dealloc_mw`; IBA 10.6.7):
//! a slice of an MR (one registered with [`AccessFlags::MW_BIND`]) with its
//! own rkey and remote rights.
//!
//! Type 1 windows are bound with [`MemoryWindow::bind`], which (as libibverbs
//! does) posts a BIND_MW work request and moves the window's rkey to the next
//! key byte; type 2B windows are bound by posting [`WrOp::BindMw`] yourself
//! and are invalidated by LOCAL_INV or a peer's SEND WITH INVALIDATE.

use std::cell::Cell;

use verbs_ring::cmd::{self, mw_type, nr};

use crate::error::Result;
use crate::pd::{AccessFlags, MemoryRegion, Pd};
use crate::queue::{Qp, SendFlags, SendWr, WrOp};

/// `enum ibv_mw_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwType {
    Type1,
    Type2,
}

/// A memory window; deallocated on drop.
pub struct MemoryWindow<'p> {
    pd: &'p Pd<'p>,
    handle: u32,
    mw_type: MwType,
    rkey: Cell<u32>,
}

impl<'p> Pd<'p> {
    /// `ibv_alloc_mw`.
    pub fn alloc_mw(&'p self, ty: MwType) -> Result<MemoryWindow<'p>> {
        let raw = match ty {
            MwType::Type1 => mw_type::TYPE_1,
            MwType::Type2 => mw_type::TYPE_2,
        };
        let req = cmd::AllocMwReq { pd_handle: self.handle, mw_type: raw };
        let r: cmd::AllocMwResp = self.dev.ctx.inner.call(nr::ALLOC_MW, &req)?;
        Ok(MemoryWindow { pd: self, handle: r.mw_handle, mw_type: ty, rkey: Cell::new(r.rkey) })
    }
}

impl MemoryWindow<'_> {
    /// The rkey a peer uses: that of the last bind posted through this object.
    pub fn rkey(&self) -> u32 {
        self.rkey.get()
    }

    pub fn mw_type(&self) -> MwType {
        self.mw_type
    }

    /// The rkey the next bind gives (`ibv_inc_rkey`).
    pub fn next_rkey(&self) -> u32 {
        let k = self.rkey.get();
        (k & !0xFF) | ((k + 1) & 0xFF)
    }

    /// The BIND_MW work request binding `len` bytes of `mr` from `offset`
    /// with `access` and rkey `new_rkey`; post it with [`Qp::post_send`]
    /// (type 2B), then [`Self::bound`] once it completed.
    pub fn bind_wr(&self, mr: &MemoryRegion<'_>, offset: u64, len: u64, access: AccessFlags, new_rkey: u32) -> WrOp {
        WrOp::BindMw {
            mw_rkey: self.rkey.get(),
            new_rkey,
            mr_lkey: mr.lkey(),
            addr: mr.addr() + offset,
            length: len,
            access: access.0,
        }
    }

    /// Records the rkey a completed bind gave.
    pub fn bound(&self, rkey: u32) {
        self.rkey.set(rkey);
    }

    /// `ibv_bind_mw` for a type 1 window: posts the bind on `qp` (signaled,
    /// `wr_id`) and returns the window's new rkey, valid once the completion
    /// arrives (a failed bind completes with MW_BIND_ERR).
    pub fn bind(
        &self,
        qp: &Qp<'_>,
        wr_id: u64,
        mr: &MemoryRegion<'_>,
        offset: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<u32> {
        let new = self.next_rkey();
        let op = self.bind_wr(mr, offset, len, access, new);
        qp.post_send(&[SendWr { wr_id, op, sg_list: &[], flags: SendFlags::SIGNALED, ud: None }])?;
        self.rkey.set(new);
        Ok(new)
    }
}

impl Drop for MemoryWindow<'_> {
    fn drop(&mut self) {
        let req = cmd::HandleReq { handle: self.handle, reserved: 0 };
        let _ = self.pd.dev.ctx.inner.call::<_, cmd::Empty>(nr::DEALLOC_MW, &req);
    }
}
