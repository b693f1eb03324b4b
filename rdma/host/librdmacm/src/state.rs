//! What stands behind the C objects: the process's one attachment to the
//! appliance's CM ([`Global`]: a ring context of its own, one
//! `verbs::cm::EventChannel`, and the watcher thread that drains its
//! events), the event channels with their real file descriptors, the ids
//! and the events, each a Rust struct with the C struct as its first field
//! (`#[repr(C)]`), so the pointer the program holds is the pointer to ours.
//!
//! Every pointer the program hands back is looked up in a registry before
//! it is used: a stale or foreign pointer is `EINVAL`, never a dereference.
//!
//! Events: the firmware queues CM events per ring context; the watcher
//! polls them (CM_GET_EVENT, with a backoff) and hands each to the channel
//! of the id it is about, whose eventfd then counts one more event, so `poll`/`select` on `rdma_event_channel::fd` work and a blocking
//! `rdma_get_cm_event` is a blocking `read`, as librdmacm's is on its
//! `/dev/infiniband/rdma_cm` fd (`O_NONBLOCK` on the fd makes it
//! `EAGAIN`). The librdmacm-side processing (CONNECT_RESPONSE -> RTR, RTS,
//! RTU) happens in `rdma_get_cm_event`, in the caller's thread, as there.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::c_int;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use verbs::Context;
use verbs::cm::{CmEvent, CmId, EventChannel};

use crate::abi::ibv::{ibv_context, ibv_device_attr, ibv_qp_init_attr};
use crate::abi::*;
use crate::ibv::ibv;

/// Lock, ignoring poisoning (no guarded state is left half-changed).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The errno a failed library call reports.
pub(crate) fn errno_of(e: &verbs::Error) -> c_int {
    e.errno().1
}

/// An event channel's queue and its descriptor: an eventfd in semaphore
/// mode, whose count is the number of queued events (readable while one
/// is pending; each read takes one). Closed when the last holder (the
/// channel or an id still routed to it) lets go; a thread still blocked in
/// `read` on it stays blocked, as on librdmacm's fd, rather than waking
/// to an end-of-file.
pub struct ChanInner {
    pub fd: c_int,
    queue: Mutex<VecDeque<CmEvent>>,
}

impl ChanInner {
    fn new() -> Result<ChanInner, c_int> {
        // SAFETY: plain system call, no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
        if fd < 0 {
            return Err(crate::ibv::errno());
        }
        Ok(ChanInner { fd, queue: Mutex::new(VecDeque::new()) })
    }

    /// Queue `ev` and count it on the fd.
    fn push(&self, ev: CmEvent) {
        lock(&self.queue).push_back(ev);
        let one = 1u64;
        // SAFETY: `fd` is our eventfd, open while `self` lives; eight bytes
        // from a live local, as eventfd(2) takes them.
        let _ = unsafe { libc::write(self.fd, (&raw const one).cast(), 8) };
    }

    /// The event whose count the caller has just read.
    pub fn pop(&self) -> Option<CmEvent> {
        lock(&self.queue).pop_front()
    }
}

impl Drop for ChanInner {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed only here.
        unsafe { libc::close(self.fd) };
    }
}

/// `struct rdma_event_channel` and what stands behind it.
#[repr(C)]
pub struct ChanObj {
    pub ch: rdma_event_channel,
    pub inner: Arc<ChanInner>,
}

/// The part of an id the watcher thread may touch.
pub struct IdShared {
    pub handle: u32,
    /// Where the id's events go (`rdma_migrate_id` changes it).
    pub chan: Mutex<Arc<ChanInner>>,
}

/// What librdmacm's `cma_id_private` keeps beside the public id.
#[derive(Default)]
pub struct IdState {
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// CONNECT_RESPONSE processing failed: the REJECTED / DISCONNECTED
    /// that follow are not shown (as librdmacm).
    pub connect_error: bool,
    /// CQs `rdma_create_qp` made because the caller gave none.
    pub own_cqs: bool,
    pub local_ece: ibv_ece,
}

/// `struct rdma_cm_id` and what stands behind it.
#[repr(C)]
pub struct IdObj {
    pub id: rdma_cm_id,
    pub sh: Arc<IdShared>,
    pub cm: CmId,
    pub st: Mutex<IdState>,
    /// `id.route.path_rec` points here once the route is resolved.
    pub path: Box<ibv_sa_path_rec>,
    /// A synchronous id (created without a channel) owns its channel.
    pub sync: bool,
    /// `rdma_create_ep` on a passive id: the QP every `rdma_get_request` id gets.
    pub ep_qp_attr: Option<Box<ibv_qp_init_attr>>,
}

/// `struct rdma_cm_event` with the storage its private data points into.
#[repr(C)]
pub struct EvObj {
    pub ev: rdma_cm_event,
    pub private: [u8; verbs_ring::cm::MAX_PRIVATE_DATA],
}

/// One device as librdmacm's `cma_device`: our libibverbs' context, opened
/// once for the process, the PD ids default to, and the limits that
/// `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH` stand for.
#[derive(Clone, Copy)]
pub struct Dev {
    pub index: u32,
    pub ctx: usize,
    pub pd: usize,
    pub max_init_depth: u8,
    pub max_resp_res: u8,
}

#[derive(Default)]
pub struct Registry {
    /// handle -> (shared part, the `IdObj`'s address)
    pub ids: HashMap<u32, (Arc<IdShared>, usize)>,
    pub id_ptrs: HashSet<usize>,
    pub chans: HashSet<usize>,
    pub events: HashSet<usize>,
    /// `rdma_get_devices` lists: address -> length (without the null).
    pub lists: HashMap<usize, usize>,
}

/// The process's attachment to the appliance's CM.
pub struct Global {
    pub ctx: Context,
    pub chan: EventChannel,
    pub reg: Mutex<Registry>,
    pub devs: Mutex<Vec<Dev>>,
}

static GLOBAL: OnceLock<Result<Global, c_int>> = OnceLock::new();

/// The attachment, made on first use (`RDMA_RING`, else the default ring),
/// and its watcher thread.
pub fn global() -> Result<&'static Global, c_int> {
    let g = GLOBAL.get_or_init(|| {
        let ring = verbs::resolve_ring(None);
        let ctx = Context::open(&ring).map_err(|e| errno_of(&e))?;
        detach_at_exit();
        let chan = EventChannel::new(&ctx);
        Ok(Global { ctx, chan, reg: Mutex::default(), devs: Mutex::default() })
    });
    let g = g.as_ref().map_err(|e| *e)?;
    static WATCHER: OnceLock<()> = OnceLock::new();
    WATCHER.get_or_init(|| {
        let _ = std::thread::Builder::new().name("rdmacm-events".into()).spawn(move || watch(g));
    });
    Ok(g)
}

/// Give the appliance's slot back when the program exits (or unloads this
/// library): a C program's exit runs no Rust destructors, and a slot left
/// behind stays taken until its lease runs out, so a few short-lived
/// programs in a row (a client retried until its server listens) would find
/// every slot taken (`EBUSY`). The firmware's reclaim of what the program
/// left sends a DREQ for each connection still up, as a lease expiry does.
fn detach_at_exit() {
    extern "C" fn detach() {
        let _ = std::panic::catch_unwind(verbs::context::detach_all);
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `detach` is a plain function of this library; linked from
        // libc_nonshared, `atexit` runs it at exit or when this library is
        // unloaded, whichever comes first, so it never outlives its code.
        unsafe { libc::atexit(detach) };
    });
}

/// The watcher: move each CM event of this process to its id's channel.
fn watch(g: &'static Global) {
    let mut idle = 0u32;
    loop {
        if lock(&g.reg).ids.is_empty() {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        match g.chan.poll_cm_event() {
            Ok(Some(ev)) => {
                idle = 0;
                let target = ev.listen_id.unwrap_or(ev.id);
                let chan = lock(&g.reg).ids.get(&target).map(|(s, _)| lock(&s.chan).clone());
                // An event for an id already destroyed is dropped (a
                // request's new id with it, which refuses the peer).
                if let Some(c) = chan {
                    c.push(ev);
                }
            }
            Ok(None) => {
                // Spin briefly, then rest up to a millisecond between polls:
                // each poll is a command round trip through the ring.
                idle = idle.saturating_add(1);
                if idle < 32 {
                    std::thread::yield_now();
                } else {
                    let us = (50u64 << (idle.min(36) - 32)).min(1000);
                    std::thread::sleep(Duration::from_micros(us));
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

impl Global {
    pub fn new_channel(&self) -> Result<*mut ChanObj, c_int> {
        let inner = Arc::new(ChanInner::new()?);
        let obj = Box::new(ChanObj { ch: rdma_event_channel { fd: inner.fd }, inner });
        let p = Box::into_raw(obj);
        lock(&self.reg).chans.insert(p as usize);
        Ok(p)
    }

    /// The channel behind `p`, if it is one of ours.
    pub fn chan<'a>(&self, p: *mut rdma_event_channel) -> Result<&'a ChanObj, c_int> {
        if p.is_null() || !lock(&self.reg).chans.contains(&(p as usize)) {
            return Err(libc::EINVAL);
        }
        // SAFETY: registered channels are live boxes from `new_channel`,
        // `ch` their first field.
        Ok(unsafe { &*p.cast::<ChanObj>() })
    }

    pub fn drop_channel(&self, p: *mut rdma_event_channel) -> Result<(), c_int> {
        if p.is_null() || !lock(&self.reg).chans.remove(&(p as usize)) {
            return Err(libc::EINVAL);
        }
        // SAFETY: it was registered, so it is a box from `new_channel`, and
        // no longer reachable through the registry.
        drop(unsafe { Box::from_raw(p.cast::<ChanObj>()) });
        Ok(())
    }

    /// The id behind `p`, if it is one of ours.
    pub fn id<'a>(&self, p: *mut rdma_cm_id) -> Result<&'a mut IdObj, c_int> {
        if p.is_null() || !lock(&self.reg).id_ptrs.contains(&(p as usize)) {
            return Err(libc::EINVAL);
        }
        // SAFETY: registered ids are live boxes from `register_id`, `id`
        // their first field; the program owns the id and, as librdmacm
        // requires, does not use it from two threads at once.
        Ok(unsafe { &mut *p.cast::<IdObj>() })
    }

    /// The id with firmware handle `h`.
    pub fn id_by_handle<'a>(&self, h: u32) -> Option<&'a mut IdObj> {
        let p = lock(&self.reg).ids.get(&h).map(|(_, p)| *p)?;
        // SAFETY: as in `id`.
        Some(unsafe { &mut *(p as *mut IdObj) })
    }

    /// Make the C id for `cm`, its events going to `chan`.
    pub fn register_id(&self, cm: CmId, chan: &ChanObj, sync: bool, ps: c_int, qp_type: c_int) -> *mut IdObj {
        let inner = chan.inner.clone();
        let sh = Arc::new(IdShared { handle: cm.handle(), chan: Mutex::new(inner) });
        let obj = Box::new(IdObj {
            id: rdma_cm_id {
                verbs: std::ptr::null_mut(),
                channel: (chan as *const ChanObj).cast_mut().cast(),
                context: std::ptr::null_mut(),
                qp: std::ptr::null_mut(),
                // SAFETY: all-zero is a valid `rdma_route` (no addresses,
                // null path), as librdmacm's calloc leaves it.
                route: unsafe { std::mem::zeroed() },
                ps,
                port_num: 0,
                event: std::ptr::null_mut(),
                send_cq_channel: std::ptr::null_mut(),
                send_cq: std::ptr::null_mut(),
                recv_cq_channel: std::ptr::null_mut(),
                recv_cq: std::ptr::null_mut(),
                srq: std::ptr::null_mut(),
                pd: std::ptr::null_mut(),
                qp_type,
            },
            sh: sh.clone(),
            cm,
            st: Mutex::default(),
            path: Box::default(),
            sync,
            ep_qp_attr: None,
        });
        let handle = sh.handle;
        let p = Box::into_raw(obj);
        let mut reg = lock(&self.reg);
        reg.ids.insert(handle, (sh, p as usize));
        reg.id_ptrs.insert(p as usize);
        p
    }

    /// Forget and free an id (its `CmId` drop destroys it in the firmware).
    pub fn drop_id(&self, p: *mut rdma_cm_id) -> Result<(), c_int> {
        let obj = {
            let mut reg = lock(&self.reg);
            if p.is_null() || !reg.id_ptrs.remove(&(p as usize)) {
                return Err(libc::EINVAL);
            }
            // SAFETY: it was registered: a box from `register_id`, now
            // unreachable through the registry.
            let obj = unsafe { Box::from_raw(p.cast::<IdObj>()) };
            reg.ids.remove(&obj.sh.handle);
            obj
        };
        let (sync, chan) = (obj.sync, obj.id.channel);
        drop(obj);
        if sync {
            let _ = self.drop_channel(chan);
        }
        Ok(())
    }

    pub fn new_event(&self) -> *mut EvObj {
        // SAFETY: all-zero is a valid event (null ids, zero param).
        let obj: Box<EvObj> = Box::new(unsafe { std::mem::zeroed() });
        let p = Box::into_raw(obj);
        lock(&self.reg).events.insert(p as usize);
        p
    }

    pub fn drop_event(&self, p: *mut rdma_cm_event) -> Result<(), c_int> {
        if p.is_null() || !lock(&self.reg).events.remove(&(p as usize)) {
            return Err(libc::EINVAL);
        }
        // SAFETY: a registered event is a box from `new_event`, `ev` first.
        drop(unsafe { Box::from_raw(p.cast::<EvObj>()) });
        Ok(())
    }

    /// A null-terminated `ibv_context *` array for `rdma_get_devices`.
    pub fn new_list(&self, ctxs: &[usize]) -> Result<*mut *mut ibv_context, c_int> {
        let mut v: Vec<*mut ibv_context> = ctxs.iter().map(|c| *c as *mut ibv_context).collect();
        v.push(std::ptr::null_mut());
        let len = v.len();
        let p = Box::into_raw(v.into_boxed_slice()).cast::<*mut ibv_context>();
        lock(&self.reg).lists.insert(p as usize, len);
        Ok(p)
    }

    pub fn drop_list(&self, p: *mut *mut ibv_context) {
        if let Some(len) = lock(&self.reg).lists.remove(&(p as usize)) {
            // SAFETY: a registered list is a boxed slice of `len` entries
            // from `new_list`, now unreachable through the registry.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) });
        }
    }

    /// The device with ring index `index`, opened through our libibverbs
    /// on first use.
    pub fn dev(&self, index: u32) -> Result<Dev, c_int> {
        let mut devs = lock(&self.devs);
        if let Some(d) = devs.iter().find(|d| d.index == index) {
            return Ok(*d);
        }
        let name = self
            .ctx
            .links()
            .map_err(|e| errno_of(&e))?
            .into_iter()
            .find(|l| l.dev_index == index)
            .map(|l| l.name)
            .ok_or(libc::ENODEV)?;
        let t = ibv()?;
        let mut n = 0;
        // SAFETY: libibverbs' device list: `n` entries, freed below; each
        // `ibv_device` is valid while the list is (and, ours, for the life
        // of the process).
        let ctx = unsafe {
            let list = (t.get_device_list)(&mut n);
            if list.is_null() {
                return Err(libc::ENODEV);
            }
            let mut found = std::ptr::null_mut();
            for i in 0..usize::try_from(n).unwrap_or(0) {
                let d = *list.add(i);
                let dn = std::ffi::CStr::from_ptr((*d).name.as_ptr());
                if dn.to_bytes() == name.as_bytes() {
                    found = (t.open_device)(d);
                    break;
                }
            }
            (t.free_device_list)(list);
            found
        };
        if ctx.is_null() {
            return Err(libc::ENODEV);
        }
        // SAFETY: all-zero is a valid `ibv_device_attr` to be overwritten.
        let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: an open context and a writable attribute struct.
        let (mut init, mut resp) = (1, 1);
        if unsafe { (t.query_device)(ctx, &mut attr) } == 0 {
            init = u8::try_from(attr.max_qp_init_rd_atom.max(0)).unwrap_or(u8::MAX - 1);
            resp = u8::try_from(attr.max_qp_rd_atom.max(0)).unwrap_or(u8::MAX - 1);
        }
        // SAFETY: an open context.
        let pd = unsafe { (t.alloc_pd)(ctx) };
        let d = Dev { index, ctx: ctx as usize, pd: pd as usize, max_init_depth: init, max_resp_res: resp };
        devs.push(d);
        Ok(d)
    }
}
