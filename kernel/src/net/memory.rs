//! The memory the rxe transport reads and writes for RDMA: two windows in one
//! address space. Addresses `[0, region)` are offsets in the shared ivshmem
//! region, where host programs register their buffers; addresses from
//! [`LOCAL_BASE`] are the firmware's own buffers (the console's pingpong).
//!
//! Both can be read by a NIC where they lie (zero-copy transmit, issue 16):
//! memory is identity-mapped, so a byte's address is its guest-physical one,
//! and each window is one contiguous run of it (the ivshmem BAR, a heap
//! allocation out of the heap's one run of frames). A NIC reads a payload after
//! the transmit call returned, possibly after the device that sent it is gone,
//! so both windows are permanent: the region is mapped for the firmware's
//! life, and a local buffer, once made, is never freed: a device that goes
//! away hands it back to [`LOCAL_POOL`] for the next one (zeroed then). The
//! windows are recorded ([`device_readable`]) so the NIC sink checks every span
//! it is given before a device sees its address.
//!
//! Reads of the region go through raw pointers only (the host writes it
//! concurrently): copies, the ICRC in place and copies that hash as they go are
//! `IvshmemRegion`'s.

use alloc::rc::Rc;
use alloc::vec::Vec;
use drivers::ivshmem::IvshmemRegion;
use rdma::rxe::memory::{FlatMemory, Memory, MemoryError};
use rdma::wire::icrc::Hasher;
use spin::Mutex;
use verbs_ring::SharedMem;

/// Where the firmware's local buffers start (far above any shared region).
pub const LOCAL_BASE: u64 = 1 << 48;
/// Size of the firmware's local RDMA memory.
pub const LOCAL_SIZE: usize = 4 << 20;

/// Local buffers of devices that are gone, for the next ones: never freed,
/// since a NIC may still read one (see the module doc).
static LOCAL_POOL: Mutex<Vec<FlatMemory>> = Mutex::new(Vec::new());

/// The runs of guest-physical memory a NIC may read at any time: the shared
/// region and every local buffer ever made, each `(start, len)`.
static WINDOWS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// Records `start..start + len` as device-readable for good.
fn add_window(start: u64, len: u64) {
    let mut w = WINDOWS.lock();
    if !w.contains(&(start, len)) {
        w.push((start, len));
    }
}

/// Whether `bus..bus + len` lies wholly inside one device-readable window
/// (the shared region or a local buffer), all of it mapped RAM for the
/// firmware's life: what a `drivers::nic::TxSegment` may name.
pub fn device_readable(bus: u64, len: usize) -> bool {
    let Some(end) = bus.checked_add(len as u64) else { return false };
    len > 0 && WINDOWS.lock().iter().any(|&(start, n)| bus >= start && end <= start.saturating_add(n))
}

pub struct ApplianceMemory {
    shared: Option<Rc<IvshmemRegion>>,
    /// Always `Some` but while being dropped (back to the pool).
    local: Option<FlatMemory>,
}

impl ApplianceMemory {
    pub fn new(shared: Option<Rc<IvshmemRegion>>) -> Self {
        if let Some(region) = shared.as_deref()
            && let Some(bus) = region.bus_addr(0, region.len())
        {
            add_window(bus, region.len() as u64);
        }
        let local = match LOCAL_POOL.lock().pop() {
            Some(mut used) => {
                used.clear();
                used
            }
            None => {
                let fresh = FlatMemory::new(LOCAL_BASE, LOCAL_SIZE);
                if let Ok(bytes) = fresh.slice(LOCAL_BASE, LOCAL_SIZE) {
                    add_window(bytes.as_ptr() as u64, LOCAL_SIZE as u64);
                }
                fresh
            }
        };
        ApplianceMemory { shared, local: Some(local) }
    }

    fn shared(&self, addr: u64, len: usize) -> Result<(&IvshmemRegion, usize), MemoryError> {
        let err = MemoryError { addr, len };
        let region = self.shared.as_deref().ok_or(err)?;
        Ok((region, usize::try_from(addr).map_err(|_| err)?))
    }

    fn local(&self, addr: u64, len: usize) -> Result<&FlatMemory, MemoryError> {
        self.local.as_ref().ok_or(MemoryError { addr, len })
    }
}

impl Drop for ApplianceMemory {
    fn drop(&mut self) {
        if let Some(local) = self.local.take() {
            LOCAL_POOL.lock().push(local);
        }
    }
}

impl Memory for ApplianceMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryError> {
        if addr >= LOCAL_BASE {
            return self.local(addr, buf.len())?.read(addr, buf);
        }
        let (region, off) = self.shared(addr, buf.len())?;
        region.read(off, buf).map_err(|_| MemoryError { addr, len: buf.len() })
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        if addr >= LOCAL_BASE {
            let local = self.local.as_mut().ok_or(MemoryError { addr, len: data.len() })?;
            return local.write(addr, data);
        }
        let (region, off) = self.shared(addr, data.len())?;
        region.write(off, data).map_err(|_| MemoryError { addr, len: data.len() })
    }

    /// The region's bytes at their BAR address; a local buffer's at its own
    /// (identity-mapped: the pointer is the guest-physical address).
    fn dma_span(&self, addr: u64, len: usize) -> Option<u64> {
        if addr >= LOCAL_BASE {
            return Some(self.local(addr, len).ok()?.slice(addr, len).ok()?.as_ptr() as u64);
        }
        let (region, off) = self.shared(addr, len).ok()?;
        region.bus_addr(off, len)
    }

    fn hash(&self, addr: u64, len: usize, crc: &mut Hasher) -> Result<(), MemoryError> {
        if addr >= LOCAL_BASE {
            return self.local(addr, len)?.hash(addr, len, crc);
        }
        let (region, off) = self.shared(addr, len)?;
        region.hash(off, len, crc).map_err(|_| MemoryError { addr, len })
    }

    fn read_hashed(&self, addr: u64, buf: &mut [u8], crc: &mut Hasher) -> Result<(), MemoryError> {
        if addr >= LOCAL_BASE {
            return self.local(addr, buf.len())?.read_hashed(addr, buf, crc);
        }
        let (region, off) = self.shared(addr, buf.len())?;
        region.read_hashed(off, buf, crc).map_err(|_| MemoryError { addr, len: buf.len() })
    }
}
