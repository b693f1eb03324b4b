//! Protection domains and what hangs off them directly: memory regions
//! (carved from the context's buffer area in the shared region) and
//! address handles.
//!
//! Memory regions live inside the shared region, so the firmware can DMA
//! them without copies. A [`MemoryRegion`] never hands out a Rust reference
//! to its bytes (the firmware writes them concurrently); it offers copies
//! in and out at offsets instead, like a `&mut [u8]` reached through
//! `read`/`write`. An SGE's `addr` is the region offset ([`MemoryRegion::addr`]).

use std::ops::BitOr;

use verbs_ring::SharedMem;
use verbs_ring::abi::Sge;
use verbs_ring::cmd::{self, AhAttr, nr};

use crate::context::lock;
use crate::device::Device;
use crate::error::{Error, Result};

/// `enum ibv_access_flags`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessFlags(pub u32);

impl AccessFlags {
    pub const LOCAL_WRITE: AccessFlags = AccessFlags(cmd::access::LOCAL_WRITE);
    pub const REMOTE_WRITE: AccessFlags = AccessFlags(cmd::access::REMOTE_WRITE);
    pub const REMOTE_READ: AccessFlags = AccessFlags(cmd::access::REMOTE_READ);
    pub const REMOTE_ATOMIC: AccessFlags = AccessFlags(cmd::access::REMOTE_ATOMIC);
    /// Memory windows may be bound to the MR.
    pub const MW_BIND: AccessFlags = AccessFlags(cmd::access::MW_BIND);
    /// IBA 1.5 FLUSH (global visibility) may target the MR.
    pub const FLUSH_GLOBAL: AccessFlags = AccessFlags(cmd::access::FLUSH_GLOBAL);
    /// No remote access (local use only).
    pub const NONE_REMOTE: AccessFlags = AccessFlags(0);
    /// Everything a benchmark or pingpong peer may do.
    pub const ALL_REMOTE: AccessFlags = AccessFlags(
        cmd::access::LOCAL_WRITE | cmd::access::REMOTE_WRITE | cmd::access::REMOTE_READ | cmd::access::REMOTE_ATOMIC,
    );
}

impl BitOr for AccessFlags {
    type Output = AccessFlags;
    fn bitor(self, o: AccessFlags) -> AccessFlags {
        AccessFlags(self.0 | o.0)
    }
}

/// A protection domain (`ibv_pd`); deallocated on drop.
pub struct Pd<'d> {
    pub(crate) dev: &'d Device,
    pub(crate) handle: u32,
}

impl<'d> Pd<'d> {
    pub(crate) fn new(dev: &'d Device, handle: u32) -> Pd<'d> {
        Pd { dev, handle }
    }

    pub fn device(&self) -> &'d Device {
        self.dev
    }

    /// The firmware's handle (for logs).
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// `ibv_reg_mr` over fresh, zeroed memory of `len` bytes from the
    /// context's buffer area.
    pub fn reg_mr(&self, len: usize, access: AccessFlags) -> Result<MemoryRegion<'_>> {
        if len == 0 {
            return Err(Error::InvalidArgument("memory region of zero bytes"));
        }
        let inner = &self.dev.ctx.inner;
        let len = len as u64;
        let start = {
            let mut a = lock(&inner.buffers);
            a.alloc(len).ok_or(Error::OutOfBufferSpace { requested: len, free: a.free_bytes() })?
        };
        let free = || {
            let _ = lock(&inner.buffers).free(start, len);
        };
        if let Err(e) = inner.mem.zero(start as usize, len as usize) {
            free();
            return Err(Error::Protocol(format!("buffer area outside the region: {e}")));
        }
        let req = cmd::RegMrReq { start, length: len, pd_handle: self.handle, access: access.0, iova: start };
        match inner.call::<_, cmd::RegMrResp>(nr::REG_MR, &req) {
            Ok(r) => Ok(MemoryRegion { pd: self, handle: r.mr_handle, lkey: r.lkey, rkey: r.rkey, start, len }),
            Err(e) => {
                free();
                Err(e)
            }
        }
    }

    /// `ibv_create_ah` (waits while the appliance resolves the MAC).
    pub fn create_ah(&self, attr: &AhAttr) -> Result<Ah<'_>> {
        let req = cmd::CreateAhReq { pd_handle: self.handle, reserved: 0, attr: *attr };
        let r: cmd::HandleResp = self.dev.ctx.inner.call_resolving(nr::CREATE_AH, &req)?;
        Ok(Ah { pd: self, handle: r.handle })
    }
}

impl Drop for Pd<'_> {
    fn drop(&mut self) {
        let req = cmd::HandleReq { handle: self.handle, reserved: 0 };
        let _ = self.dev.ctx.inner.call::<_, cmd::Empty>(nr::DEALLOC_PD, &req);
    }
}

/// A registered memory region (`ibv_mr`) over memory in the shared region;
/// deregistered and its memory returned on drop.
pub struct MemoryRegion<'p> {
    pd: &'p Pd<'p>,
    handle: u32,
    lkey: u32,
    rkey: u32,
    /// Region offset of the first byte: the MR's iova.
    start: u64,
    len: u64,
}

impl MemoryRegion<'_> {
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// The address SGEs and remote peers use for byte 0 (a region offset).
    pub fn addr(&self) -> u64 {
        self.start
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn range(&self, offset: usize, len: usize) -> Result<usize> {
        match offset.checked_add(len) {
            Some(end) if end as u64 <= self.len => Ok(self.start as usize + offset),
            _ => Err(Error::InvalidArgument("access outside the memory region")),
        }
    }

    /// Copy `buf.len()` bytes out of the region, from `offset`.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        let at = self.range(offset, buf.len())?;
        self.pd.dev.ctx.inner.mem.read(at, buf).map_err(|e| Error::Protocol(e.to_string()))
    }

    /// Copy `data` into the region at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let at = self.range(offset, data.len())?;
        self.pd.dev.ctx.inner.mem.write(at, data).map_err(|e| Error::Protocol(e.to_string()))
    }

    /// Set `len` bytes from `offset` to `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        self.range(offset, len)?;
        let chunk = vec![byte; len.min(64 << 10)];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk.len());
            self.write(offset + done, &chunk[..n])?;
            done += n;
        }
        Ok(())
    }

    /// A copy of `len` bytes from `offset`.
    pub fn to_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        let mut v = vec![0; len];
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// A little-endian `u64` at `offset` (atomic results, counters).
    pub fn read_u64(&self, offset: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn write_u64(&self, offset: usize, v: u64) -> Result<()> {
        self.write(offset, &v.to_le_bytes())
    }

    /// The SGE for `len` bytes at `offset`.
    pub fn sge(&self, offset: usize, len: u32) -> Result<Sge> {
        self.range(offset, len as usize)?;
        Ok(Sge { addr: self.start + offset as u64, length: len, lkey: self.lkey })
    }
}

impl Drop for MemoryRegion<'_> {
    fn drop(&mut self) {
        let inner = &self.pd.dev.ctx.inner;
        let req = cmd::HandleReq { handle: self.handle, reserved: 0 };
        match inner.call::<_, cmd::Empty>(nr::DEREG_MR, &req) {
            // Deregistered, or the whole context is gone: the memory is ours.
            Ok(_) | Err(Error::Lost | Error::Abandoned { .. }) => {
                let _ = lock(&inner.buffers).free(self.start, self.len);
            }
            // The firmware may still use it: leak the range rather than
            // hand it to the next MR.
            Err(_) => {}
        }
    }
}

/// An address handle (`ibv_ah`), for UD sends; destroyed on drop.
pub struct Ah<'p> {
    pd: &'p Pd<'p>,
    pub(crate) handle: u32,
}

impl Ah<'_> {
    pub fn handle(&self) -> u32 {
        self.handle
    }
}

impl Drop for Ah<'_> {
    fn drop(&mut self) {
        let req = cmd::HandleReq { handle: self.handle, reserved: 0 };
        let _ = self.pd.dev.ctx.inner.call::<_, cmd::Empty>(nr::DESTROY_AH, &req);
    }
}
