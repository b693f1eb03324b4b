//! What stands behind the C objects: the process's one attachment to the
//! appliance ([`Shared`]), the device list, and one Rust struct per C
//! object with the C struct as its first field (`#[repr(C)]`), so that the
//! pointer the program holds is the pointer to ours.
//!
//! Every `ibv_context` of the process shares one ring context (one slot of
//! the appliance, however many devices are opened): the slot count is
//! small, and the ring names objects of every device.

use std::ffi::{CString, c_int};
use std::path::PathBuf;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use verbs::{Context, Error};
use verbs_ring::abi::{RingPlacement, range_within};
use verbs_ring::ring::RingGeometry;

use crate::abi::*;
use crate::mem::Moved;

/// Lock, ignoring poisoning (no guarded state is left half-changed).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The errno a failed call reports.
pub(crate) fn errno_of(e: &Error) -> c_int {
    e.errno().1
}

/// The process's attachment to the appliance.
pub struct Shared {
    pub ctx: Context,
    pub ring: PathBuf,
    /// The ring file, for mapping moved pages over the program's memory.
    pub fd: c_int,
    pub moved: Moved,
    /// Completion channels hear of events from here: the doorbell's
    /// listener, registered once (`channel`).
    pub listening: std::sync::Once,
}

static SHARED: Mutex<Option<Arc<Shared>>> = Mutex::new(None);

/// The attachment, made on first use (`RDMA_RING`, else the default ring).
pub fn shared() -> Result<Arc<Shared>, c_int> {
    let mut g = lock(&SHARED);
    if let Some(s) = g.as_ref()
        && !s.ctx.is_lost()
    {
        return Ok(s.clone());
    }
    let ring = verbs::resolve_ring(None);
    let ctx = Context::open(&ring).map_err(|e| errno_of(&e))?;
    let path = CString::new(ring.as_os_str().as_encoded_bytes()).map_err(|_| libc::EINVAL)?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(libc::EACCES);
    }
    let s = Arc::new(Shared { ctx, ring, fd, moved: Moved::default(), listening: std::sync::Once::new() });
    *g = Some(s.clone());
    detach_at_exit();
    Ok(s)
}

/// Give the appliance's slot back when the program exits (or unloads this
/// library), as the Rust tools do: a C program's exit runs no Rust
/// destructors, and each slot left behind stays taken until its lease runs
/// out, so a few short-lived programs in a row (a client retried until its
/// server listens) would find every slot taken (`EBUSY`).
pub(crate) fn detach_at_exit() {
    extern "C" fn detach() {
        crate::ffi::guard((), verbs::context::detach_all);
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `detach` is a plain function of this library; linked from
        // libc_nonshared, `atexit` runs it at exit or when this library is
        // unloaded, whichever comes first, so it never outlives its code.
        unsafe { libc::atexit(detach) };
    });
}

impl Shared {
    /// Check a ring the firmware placed: inside this context's queue area,
    /// geometry the ABI allows, entries of at least `min_entry` bytes.
    pub fn ring_geometry(&self, p: RingPlacement, min_entry: usize) -> Result<RingGeometry, c_int> {
        let (qo, ql) = self.ctx.layout().queue_area(self.ctx.index()).unwrap_or((0, 0));
        let bytes = RingPlacement::bytes(p.entries, p.entry_size).unwrap_or(u64::MAX);
        if !range_within(p.off, bytes, qo, ql) || (p.entry_size as usize) < min_entry {
            return Err(libc::EPROTO);
        }
        RingGeometry::new(p, verbs_ring::SharedMem::len(self.ctx.shared_mem())).map_err(|_| libc::EPROTO)
    }
}

/// One device of the appliance as `ibv_get_device_list` shows it; made
/// once per name and kept for the life of the process (programs may keep
/// `ibv_device` pointers after freeing the list).
#[repr(C)]
pub struct DevObj {
    pub dev: ibv_device,
    pub index: u32,
    pub node_guid: u64,
}

static DEVICES: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());

fn fill(dst: &mut [libc::c_char], s: &str) {
    let room = dst.len().saturating_sub(1);
    for (d, b) in dst.iter_mut().zip(s.bytes().take(room)) {
        *d = b as libc::c_char;
    }
}

/// The devices of the appliance now, as stable pointers.
pub fn devices() -> Result<Vec<*mut DevObj>, c_int> {
    let sh = shared()?;
    let links = sh.ctx.links().map_err(|e| errno_of(&e))?;
    let mut known = lock(&DEVICES);
    let mut out = Vec::new();
    for l in links {
        let ptr = match known.iter().find(|(n, _)| *n == l.name) {
            Some((_, p)) => *p as *mut DevObj,
            None => {
                let mut dev = ibv_device {
                    _ops: _ibv_device_ops { _dummy1: std::ptr::null_mut(), _dummy2: std::ptr::null_mut() },
                    node_type: 1,      // IBV_NODE_CA
                    transport_type: 0, // IBV_TRANSPORT_IB
                    name: [0; IBV_SYSFS_NAME_MAX],
                    dev_name: [0; IBV_SYSFS_NAME_MAX],
                    dev_path: [0; IBV_SYSFS_PATH_MAX],
                    ibdev_path: [0; IBV_SYSFS_PATH_MAX],
                };
                fill(&mut dev.name, &l.name);
                fill(&mut dev.dev_name, &format!("uverbs{}", l.dev_index));
                fill(&mut dev.dev_path, &format!("/sys/class/infiniband_verbs/uverbs{}", l.dev_index));
                fill(&mut dev.ibdev_path, &format!("/sys/class/infiniband/{}", l.name));
                let obj = Box::new(DevObj { dev, index: l.dev_index, node_guid: l.node_guid });
                let p = Box::into_raw(obj);
                known.push((l.name.clone(), p as usize));
                p
            }
        };
        // SAFETY: every pointer in DEVICES came from Box::into_raw above and
        // is never freed; only `index` changes, under the DEVICES lock.
        unsafe { (*ptr).index = l.dev_index };
        out.push(ptr);
    }
    Ok(out)
}

/// An open device (`ibv_open_device`): the `verbs_context` (which ends in
/// the `ibv_context` the program holds) and what the library needs.
#[repr(C)]
pub struct CtxObj {
    pub vctx: verbs_context,
    pub sh: Arc<Shared>,
    pub dev: *mut DevObj,
    pub dev_index: u32,
    /// The write end of the async event pipe (`async_fd` is the read end).
    pub async_wfd: c_int,
}

/// A completion queue.
#[repr(C)]
pub struct CqObj {
    pub cq: ibv_cq,
    pub sh: Arc<Shared>,
    pub fw: u32,
    pub ring: Mutex<verbs_ring::ring::Consumer>,
    /// Empty polls in a row: a program that spins on `ibv_poll_cq` backs
    /// off as our tools do, so it does not take a core from the appliance.
    pub idle: AtomicU32,
    /// Event requests (`ibv_req_notify_cq`) in the ring's `arm` word.
    pub arm: Mutex<verbs_ring::wake::CqArm>,
}

/// A receive queue's producer side (a QP's RQ or an SRQ).
pub struct RecvQueue {
    pub ring: verbs_ring::ring::Producer,
    pub max_sge: u32,
    pub entry: Vec<u8>,
}

/// One send WQE being built through the `ibv_qp_ex` `wr_*` calls.
pub struct Building {
    pub wqe: verbs_ring::abi::SendWqe,
    pub sges: Vec<verbs_ring::abi::Sge>,
    pub inline: Option<Vec<u8>>,
}

pub struct SendQueue {
    pub ring: verbs_ring::ring::Producer,
    pub cap: verbs_ring::cmd::QpCap,
    pub entry: Vec<u8>,
    /// Requests of the `wr_start` .. `wr_complete` batch.
    pub building: Vec<Building>,
    /// The first error of the batch, returned by `wr_complete`.
    pub build_error: c_int,
}

/// A queue pair; the C side is an `ibv_qp_ex` (which starts with the
/// `ibv_qp`), so `ibv_qp_to_qp_ex` is a cast.
#[repr(C)]
pub struct QpObj {
    pub qpx: ibv_qp_ex,
    pub sh: Arc<Shared>,
    pub fw: u32,
    pub qp_type: u8,
    pub sq: Mutex<SendQueue>,
    pub rq: Option<Mutex<RecvQueue>>,
}

#[repr(C)]
pub struct SrqObj {
    pub srq: ibv_srq,
    pub sh: Arc<Shared>,
    pub fw: u32,
    pub rq: Mutex<RecvQueue>,
}

#[repr(C)]
pub struct PdObj {
    pub pd: ibv_pd,
    pub sh: Arc<Shared>,
}

#[repr(C)]
pub struct MrObj {
    pub mr: ibv_mr,
    pub sh: Arc<Shared>,
}

#[repr(C)]
pub struct AhObj {
    pub ah: ibv_ah,
    pub sh: Arc<Shared>,
}
