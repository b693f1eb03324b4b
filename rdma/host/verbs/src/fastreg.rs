//! Fast-register memory regions (`ib_alloc_mr(IB_MR_TYPE_MEM_REG)`,
//! `ib_map_mr_sg`, the REG_MR work request; IBA 10.6.3.5): the MR a storage
//! target registers per I/O and a peer invalidates with SEND WITH INVALIDATE.
//!
//! The MR is born free. [`FastRegMr::map`] gives it a page list (pages of the
//! context's buffer area, e.g. of a [`crate::MemoryRegion`]), then
//! [`WrOp::RegMr`](crate::WrOp::RegMr) posted on a QP makes it valid with a key
//! byte of the consumer's choosing ([`FastRegMr::next_key`], Linux's
//! `ib_update_fast_reg_key`); LOCAL_INV or a remote SEND WITH INVALIDATE frees
//! it again for the next registration.

use std::cell::Cell;

use verbs_ring::SharedMem;
use verbs_ring::cmd::{self, nr};

use crate::context::lock;
use crate::error::{Error, Result};
use crate::pd::Pd;

/// A fast-register MR; deregistered on drop.
pub struct FastRegMr<'p> {
    pd: &'p Pd<'p>,
    handle: u32,
    /// The key the next REG_MR gives (and the current one once it ran).
    key: Cell<u32>,
    max_num_sg: u32,
}

impl<'p> Pd<'p> {
    /// `ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, max_num_sg)`.
    pub fn alloc_mr(&'p self, max_num_sg: u32) -> Result<FastRegMr<'p>> {
        let req = cmd::AllocMrReq { pd_handle: self.handle, max_num_sg };
        let r: cmd::RegMrResp = self.dev.ctx.inner.call(nr::ALLOC_MR, &req)?;
        Ok(FastRegMr { pd: self, handle: r.mr_handle, key: Cell::new(r.lkey), max_num_sg })
    }
}

impl FastRegMr<'_> {
    /// The firmware's handle: what [`crate::WrOp::RegMr`] names.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The lkey and rkey: those of the last [`Self::next_key`] (a REG_MR
    /// with it must have run for them to name anything).
    pub fn key(&self) -> u32 {
        self.key.get()
    }

    /// Moves the key byte on (`ib_update_fast_reg_key`) and returns the new
    /// key, for the next REG_MR: a peer still holding the old rkey can no
    /// longer reach the memory.
    pub fn next_key(&self, byte: u8) -> u32 {
        let k = (self.key.get() & !0xFF) | u32::from(byte);
        self.key.set(k);
        k
    }

    pub fn max_num_sg(&self) -> u32 {
        self.max_num_sg
    }

    /// `ib_map_mr_sg`: the MR will name `length` bytes from `iova`, starting
    /// `iova % page_size` bytes into `pages[0]`. Each page is a region offset
    /// (an SGE address) aligned to `page_size`, inside this context's buffer
    /// area. Only a free MR (never registered, or invalidated) may be mapped.
    pub fn map(&self, iova: u64, length: u64, page_size: u64, pages: &[u64]) -> Result<()> {
        if pages.is_empty() || pages.len() > self.max_num_sg as usize {
            return Err(Error::InvalidArgument("page list longer than max_num_sg, or empty"));
        }
        let inner = &self.pd.dev.ctx.inner;
        // The list travels through the buffer area, as a device's page list
        // would through DMA.
        let len = pages.len() as u64 * 8;
        let list = {
            let mut a = lock(&inner.buffers);
            a.alloc(len).ok_or(Error::OutOfBufferSpace { requested: len, free: a.free_bytes() })?
        };
        let bytes: Vec<u8> = pages.iter().flat_map(|p| p.to_le_bytes()).collect();
        let result =
            inner.mem.write(list as usize, &bytes).map_err(|e| Error::Protocol(e.to_string())).and_then(|_| {
                let req = cmd::MapMrSgReq {
                    mr_handle: self.handle,
                    num_pages: pages.len() as u32,
                    iova,
                    length,
                    page_size,
                    list_off: list,
                };
                inner.call::<_, cmd::Empty>(nr::MAP_MR_SG, &req).map(|_| ())
            });
        let _ = lock(&inner.buffers).free(list, len);
        result
    }
}

impl Drop for FastRegMr<'_> {
    fn drop(&mut self) {
        let req = cmd::HandleReq { handle: self.handle, reserved: 0 };
        let _ = self.pd.dev.ctx.inner.call::<_, cmd::Empty>(nr::DEREG_MR, &req);
    }
}
