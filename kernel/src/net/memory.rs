//! The memory the rxe transport reads and writes for RDMA: two windows in one
//! address space. Addresses `[0, region)` are offsets in the shared ivshmem
//! region, where host programs register their buffers; addresses from
//! [`LOCAL_BASE`] are the firmware's own buffers (the console's pingpong).

use alloc::rc::Rc;
use drivers::ivshmem::IvshmemRegion;
use rdma::rxe::memory::{FlatMemory, Memory, MemoryError};
use verbs_ring::SharedMem;

/// Where the firmware's local buffers start (far above any shared region).
pub const LOCAL_BASE: u64 = 1 << 48;
/// Size of the firmware's local RDMA memory.
pub const LOCAL_SIZE: usize = 4 << 20;

pub struct ApplianceMemory {
    shared: Option<Rc<IvshmemRegion>>,
    local: FlatMemory,
}

impl ApplianceMemory {
    pub fn new(shared: Option<Rc<IvshmemRegion>>) -> Self {
        ApplianceMemory { shared, local: FlatMemory::new(LOCAL_BASE, LOCAL_SIZE) }
    }

    fn shared(&self, addr: u64, len: usize) -> Result<(&IvshmemRegion, usize), MemoryError> {
        let err = MemoryError { addr, len };
        let region = self.shared.as_deref().ok_or(err)?;
        Ok((region, usize::try_from(addr).map_err(|_| err)?))
    }
}

impl Memory for ApplianceMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryError> {
        if addr >= LOCAL_BASE {
            return self.local.read(addr, buf);
        }
        let (region, off) = self.shared(addr, buf.len())?;
        region.read(off, buf).map_err(|_| MemoryError { addr, len: buf.len() })
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        if addr >= LOCAL_BASE {
            return self.local.write(addr, data);
        }
        let (region, off) = self.shared(addr, data.len())?;
        region.write(off, data).map_err(|_| MemoryError { addr, len: data.len() })
    }
}
