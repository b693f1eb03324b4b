//! The transport's memory over a shared region: address = region offset.
//!
//! Host programs register MRs inside the shared region and name bytes by
//! their region offset, so the transport's [`Memory`] is the region itself.
//! Every access is bounds-checked by the [`SharedMem`] implementation; a
//! miss is a [`MemoryError`] the transport turns into a protection error.

use core::ops::Deref;

use verbs_ring::SharedMem;

use crate::rxe::memory::{Memory, MemoryError};

/// A shared region as the transport's memory. `S` is any owner of a region
/// (`Rc<HeapShm>`, `Arc<ShmFile>`, `&'static ...`).
pub struct ShmMemory<S>(pub S);

impl<S> ShmMemory<S>
where
    S: Deref,
    S::Target: SharedMem,
{
    fn at(addr: u64, len: usize) -> Result<usize, MemoryError> {
        usize::try_from(addr).map_err(|_| MemoryError { addr, len })
    }
}

impl<S> Memory for ShmMemory<S>
where
    S: Deref,
    S::Target: SharedMem,
{
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryError> {
        let off = Self::at(addr, buf.len())?;
        self.0.read(off, buf).map_err(|_| MemoryError { addr, len: buf.len() })
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        let off = Self::at(addr, data.len())?;
        self.0.write(off, data).map_err(|_| MemoryError { addr, len: data.len() })
    }
}
