//! Attaching to the appliance: map the ring file, claim a context slot,
//! keep its lease, send commands and wait for their answers, and detach
//! when the last handle goes.
//!
//! A [`Context`] is one claimed slot of the region (the firmware gives each
//! one its own command and response rings, queue area and buffer area). It
//! holds every control operation that is not about one device (link add,
//! delete and show, async events, the slot table); [`Context::device`]
//! names a device inside the appliance and returns a [`Device`] for the
//! verbs proper. The lease is renewed by a background thread and on every
//! command, so a process that dies (or is killed) loses its objects once
//! the firmware sees the lease expire.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use shm_host::ShmFile;
use verbs_ring::abi::{
    ContextSlot, Layout, MAX_CMD_SLOT, PAGE, SB_FAIL_CODE, SB_FW_STATE, SB_HEARTBEAT, Superblock, ctx_state,
};
use verbs_ring::area::RangeAllocator;
use verbs_ring::cmd::{self, CmdHeader, HEADER_SIZE, nr};
use verbs_ring::host::{HostContext, HostError};
use verbs_ring::ring::RingError;
use verbs_ring::wire::{Wire, name_field};
use verbs_ring::{SharedMem, Status, table};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::wake::Wake;
use verbs_ring::wake::{WakeBlock, doorbell};

/// The ring `make run` attaches (node 1).
pub const DEFAULT_RING: &str = "/dev/shm/roce-appliance-1";
/// The environment variable naming the ring when `--ring` is not given.
pub const RING_ENV: &str = "RDMA_RING";

/// The ring file to use: `explicit` (`--ring PATH`), else `$RDMA_RING`,
/// else [`DEFAULT_RING`].
pub fn resolve_ring(explicit: Option<&Path>) -> PathBuf {
    match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::var_os(RING_ENV).filter(|v| !v.is_empty()).map_or(PathBuf::from(DEFAULT_RING), PathBuf::from),
    }
}

/// How a context behaves.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// How long a command may wait for its answer.
    pub timeout: Duration,
    /// Renew the lease from a background thread (else only on commands: a
    /// process idle longer than the lease loses its context).
    pub heartbeat_thread: bool,
    /// Use the appliance's doorbell when it has one (`ivshmem-doorbell`):
    /// ring it after posting, sleep on completion events. False polls, as
    /// with `ivshmem-plain` (the default is true unless `$RDMA_DOORBELL` is
    /// `0`, which also reaches C programs over our libibverbs).
    pub doorbell: bool,
}

/// The environment variable that turns the doorbell off (`0`).
pub const DOORBELL_ENV: &str = "RDMA_DOORBELL";

impl Default for Options {
    fn default() -> Self {
        let doorbell = std::env::var(DOORBELL_ENV).map_or(true, |v| v != "0");
        Options { timeout: Duration::from_secs(5), heartbeat_thread: true, doorbell }
    }
}

/// What the shared handles of one context hold.
pub(crate) struct Inner {
    pub(crate) mem: ShmFile,
    /// `None` only while dropping.
    host: Mutex<Option<HostContext>>,
    /// MR memory of this context (page-grained), host-side bookkeeping.
    pub(crate) buffers: Mutex<RangeAllocator>,
    pub(crate) layout: Layout,
    pub(crate) ctx: u32,
    path: PathBuf,
    /// What the context was opened with, for [`Context::reopen`].
    opts: Options,
    timeout: Duration,
    lost: AtomicBool,
    /// Set when this library gave the context up after a ring protocol error
    /// (and asked the firmware to reclaim it): what went wrong.
    abandoned: Mutex<Option<String>>,
    /// Dropping it stops the heartbeat thread.
    hb_stop: Mutex<Option<mpsc::Sender<()>>>,
    /// The appliance's doorbell, when it has one ([`crate::wake`]).
    pub(crate) wake: Option<Wake>,
}

/// Lock, ignoring poisoning: every guarded state stays consistent across a
/// panic (plain values, ring indices advanced only after a complete step).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn cmd_name(n: u16) -> &'static str {
    table::lookup(n).map_or("command", |s| s.name)
}

/// Escalating wait between polls: spin, then yield, then short sleeps.
pub fn backoff(round: &mut u32) {
    *round = round.saturating_add(1);
    if *round < 64 {
        std::hint::spin_loop();
    } else if *round < 256 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(50));
    }
}

impl Inner {
    fn host_error(&self, cmd: &'static str, e: HostError) -> Error {
        match e {
            HostError::Lost => {
                self.lost.store(true, Ordering::Release);
                self.lost_error()
            }
            HostError::Status(status) => Error::Command { cmd, status },
            HostError::TimedOut => Error::TimedOut { cmd, firmware_alive: true },
            HostError::TooLarge => Error::InvalidArgument("request larger than a command slot"),
            HostError::NoFreeContext => Error::NoFreeContext { slots: self.layout.num_contexts() },
            HostError::Layout(error) => Error::Layout { path: self.path.clone(), error },
            HostError::Ring(r) => Error::Protocol(format!("{cmd}: {r}")),
            HostError::Shm(s) => Error::Protocol(format!("{cmd}: {s}")),
            HostError::BadResponse => Error::Protocol(format!("{cmd}: malformed response")),
        }
    }

    /// The error for a context that is gone: why, when this library gave it up.
    pub(crate) fn lost_error(&self) -> Error {
        match lock(&self.abandoned).clone() {
            Some(why) => Error::Abandoned { why },
            None => Error::Lost,
        }
    }

    /// [`Inner::host_error`], and whether the error leaves the context
    /// untrustworthy for good: a ring the firmware broke stays poisoned (every
    /// later command would fail the same way), and an answer that cannot be
    /// read means the response stream is out of step.
    fn host_failure(&self, cmd: &'static str, e: HostError) -> (Error, bool) {
        let fatal = matches!(e, HostError::Ring(RingError::Corrupt(_)) | HostError::BadResponse | HostError::Shm(_));
        (self.host_error(cmd, e), fatal)
    }

    /// Gives the context up after a protocol error: asks the firmware to
    /// reclaim the slot (it destroys every object and frees it, as for a
    /// detach), stops using it, and remembers why, so that every later call
    /// says so instead of failing with `EPROTO` again, and holds no slot.
    fn abandon(&self, host: &mut Option<HostContext>, e: &Error) {
        if let Some(h) = host.take() {
            // A slot already reclaimed answers Lost: nothing left to free.
            let _ = h.detach(&self.mem);
        }
        *lock(&self.abandoned) = Some(e.to_string());
        self.lost.store(true, Ordering::Release);
        lock(&self.hb_stop).take();
    }

    pub(crate) fn fw_heartbeat(&self) -> u32 {
        self.mem.load_u32_acquire(SB_HEARTBEAT).unwrap_or(0)
    }

    /// Renew the lease; `Lost` once the firmware took the slot back.
    fn heartbeat(&self) -> Result<()> {
        let mut guard = lock(&self.host);
        let Some(host) = guard.as_mut() else { return Err(self.lost_error()) };
        host.heartbeat(&self.mem).map_err(|e| self.host_error("heartbeat", e))
    }

    /// [`Inner::call`] for commands that resolve an address (MODIFY_QP
    /// with an address vector, CREATE_AH): the firmware answers `EAGAIN`
    /// while its ARP request is out, so ask again after a short sleep, for
    /// a bounded time (longer than the appliance's 3 s of ARP probes, which
    /// then end the wait with `EHOSTUNREACH`).
    pub(crate) fn call_resolving<Req: Wire, Resp: Wire>(&self, n: u16, req: &Req) -> Result<Resp> {
        const PAUSE: Duration = Duration::from_millis(10);
        const TRIES: u32 = 500;
        let mut tries = 0;
        loop {
            match self.call(n, req) {
                Err(Error::Command { status: Status::EAGAIN, .. }) if tries < TRIES => {
                    tries += 1;
                    std::thread::sleep(PAUSE);
                }
                r => return r,
            }
        }
    }

    /// Send command `n` and wait for its answer. Answers to earlier commands
    /// that timed out are skipped. After a protocol error the context is given
    /// up ([`Inner::abandon`]): this call returns the error, later ones
    /// [`Error::Abandoned`].
    pub(crate) fn call<Req: Wire, Resp: Wire>(&self, n: u16, req: &Req) -> Result<Resp> {
        if self.lost.load(Ordering::Acquire) {
            return Err(self.lost_error());
        }
        let mut guard = lock(&self.host);
        match self.call_locked(&mut guard, n, req) {
            Ok(resp) => Ok(resp),
            Err((e, fatal)) => {
                if fatal {
                    self.abandon(&mut guard, &e);
                }
                Err(e)
            }
        }
    }

    /// [`Inner::call`] with the lock held; an error says whether it is fatal
    /// to the context.
    fn call_locked<Req: Wire, Resp: Wire>(
        &self,
        guard: &mut Option<HostContext>,
        n: u16,
        req: &Req,
    ) -> Result<Resp, (Error, bool)> {
        let name = cmd_name(n);
        let Some(host) = guard.as_mut() else { return Err((self.lost_error(), false)) };
        host.heartbeat(&self.mem).map_err(|e| self.host_failure(name, e))?;
        let seq = host.submit(&self.mem, n, req).map_err(|e| self.host_failure(name, e))?;
        self.kick();
        let mut out = [0u8; MAX_CMD_SLOT as usize];
        let start = Instant::now();
        let mut last_beat = start;
        let hb0 = self.fw_heartbeat();
        let mut round = 0;
        loop {
            if let Some(hdr) = host.poll_response(&self.mem, &mut out).map_err(|e| self.host_failure(name, e))? {
                if hdr.seq != seq && seq.wrapping_sub(hdr.seq) < 1 << 31 {
                    continue; // a late answer to a command that timed out
                }
                // Any answer but a refusal that does not fit the question
                // means the rings are out of step.
                return self.check_response(name, n, seq, host.ctx(), &hdr, &out).map_err(|e| {
                    let fatal = matches!(e, Error::Protocol(_));
                    (e, fatal)
                });
            }
            let now = Instant::now();
            if now.duration_since(start) > self.timeout {
                return Err((Error::TimedOut { cmd: name, firmware_alive: self.fw_heartbeat() != hb0 }, false));
            }
            if now.duration_since(last_beat) > Duration::from_millis(10) {
                // Keeps the lease while we hold the lock, and notices a
                // reclaimed slot.
                host.heartbeat(&self.mem).map_err(|e| self.host_failure(name, e))?;
                last_beat = now;
            }
            backoff(&mut round);
        }
    }

    fn check_response<Resp: Wire>(
        &self,
        name: &'static str,
        n: u16,
        seq: u32,
        ctx: u32,
        hdr: &CmdHeader,
        out: &[u8],
    ) -> Result<Resp> {
        if hdr.seq != seq || hdr.cmd != n || hdr.ctx != ctx {
            return Err(Error::Protocol(format!(
                "{name}: answer for command {:#x} seq {} ctx {} (asked seq {seq} ctx {ctx})",
                hdr.cmd, hdr.seq, hdr.ctx
            )));
        }
        if hdr.status != 0 {
            return Err(Error::Command { cmd: name, status: Status(hdr.status) });
        }
        if usize::from(hdr.len) != Resp::SIZE {
            return Err(Error::Protocol(format!("{name}: {}-byte answer, expected {}", hdr.len, Resp::SIZE)));
        }
        Resp::decode(out.get(HEADER_SIZE..).unwrap_or(&[]))
            .ok_or_else(|| Error::Protocol(format!("{name}: short answer")))
    }
}

impl Inner {
    /// After publishing an entry the appliance consumes (a command, a WQE):
    /// ring its doorbell if it asked to be rung.
    pub(crate) fn kick(&self) {
        if let Some(w) = &self.wake {
            w.kick(&self.mem);
        }
    }

    /// Stop the heartbeat and give the slot back (once; later commands
    /// answer `Lost`).
    fn detach(&self) {
        lock(&self.hb_stop).take();
        if let Some(host) = lock(&self.host).take() {
            // Ask the firmware to destroy whatever is left; a slot already
            // reclaimed answers Lost, which is fine here.
            let _ = host.detach(&self.mem);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.detach();
    }
}

/// Every context this process has open, so that an exit that runs no
/// destructors (`std::process::exit`, what the tools' error paths use) can
/// still detach them instead of leaving each slot taken until its lease
/// expires.
static OPEN: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

fn remember(inner: &Arc<Inner>) {
    let mut open = lock(&OPEN);
    open.retain(|w| w.strong_count() > 0);
    open.push(Arc::downgrade(inner));
}

/// Detach every context of this process that is still open; each handle
/// left answers `Lost` afterwards. For [`crate::cli::exit`].
pub fn detach_all() {
    let open = std::mem::take(&mut *lock(&OPEN));
    for inner in open.iter().filter_map(Weak::upgrade) {
        inner.detach();
    }
}

fn spawn_heartbeat(weak: Weak<Inner>, stop: mpsc::Receiver<()>, period: Duration) {
    let body = move || {
        loop {
            match stop.recv_timeout(period) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            let Some(inner) = weak.upgrade() else { return };
            if inner.heartbeat().is_err() {
                return;
            }
        }
    };
    // Without the thread the lease is still renewed by every command.
    let _ = std::thread::Builder::new().name("verbs-lease".into()).spawn(body);
}

/// The slot table as the region shows it (for `rdma resource show`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotInfo {
    pub index: u32,
    /// One of [`ctx_state`].
    pub state: u32,
    pub pid: u32,
    pub generation: u32,
    /// One of [`verbs_ring::abi::reclaim_reason`].
    pub reclaim_reason: u32,
}

/// The appliance as the superblock shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApplianceInfo {
    pub region_size: u64,
    pub abi_version: u32,
    /// One of [`verbs_ring::abi::fw_state`].
    pub fw_state: u32,
    pub fail_code: u32,
    pub heartbeat: u32,
    pub heartbeat_period_us: u32,
    pub lease_beats: u32,
    pub num_contexts: u32,
}

/// One RDMA link of the appliance (`rdma link show`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub dev_index: u32,
    pub name: String,
    pub port: u32,
    /// `enum ibv_port_state`.
    pub port_state: u32,
    pub phys_state: u32,
    pub netdev: String,
    pub netdev_index: u32,
    pub node_guid: u64,
    pub sys_image_guid: u64,
    /// The LINK_SHOW answer itself, what `verbs_ring::show` formats.
    pub info: cmd::LinkInfo,
}

impl Link {
    fn from_info(i: &cmd::LinkInfo) -> Link {
        Link {
            dev_index: i.dev_index,
            name: verbs_ring::show::words::name(&i.dev_name).to_string(),
            port: i.port_num,
            port_state: i.port_state,
            phys_state: i.phys_state,
            netdev: verbs_ring::wire::name_str(&i.netdev).unwrap_or("").to_string(),
            netdev_index: i.netdev_index,
            node_guid: i.node_guid,
            sys_image_guid: i.sys_image_guid,
            info: *i,
        }
    }
}

/// An async event (`struct ibv_async_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// One of [`verbs_ring::cmd::event_type`]; see [`crate::names::event_type`].
    pub event_type: u32,
    /// The object's `user_handle`, or the port number for port events.
    pub element: u64,
    /// The firmware's handle of the object (0 for port events).
    pub handle: u32,
    pub dev_index: u32,
    /// Events lost before this one because the queue was full.
    pub dropped: u32,
}

/// One attached context of the appliance. Cheap to clone; the slot is
/// detached when the last clone (and every [`Device`] from it) is dropped.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<Inner>,
}

impl Context {
    /// Map `path` and attach with default [`Options`].
    pub fn open(path: &Path) -> Result<Context> {
        Context::open_with(path, Options::default())
    }

    /// Map `path`, check the superblock, claim a free context slot.
    pub fn open_with(path: &Path, opts: Options) -> Result<Context> {
        let mem = ShmFile::open(path).map_err(|source| Error::Open { path: path.to_path_buf(), source })?;
        // Our command name, as `rdma resource show` prints it (Linux's
        // `comm`: what /proc/self/comm says, at most 15 bytes).
        let comm = std::fs::read("/proc/self/comm").unwrap_or_default();
        let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
        let host = HostContext::attach_as(&mem, std::process::id(), comm).map_err(|e| match e {
            HostError::Layout(error) => Error::Layout { path: path.to_path_buf(), error },
            HostError::NoFreeContext => Error::NoFreeContext {
                slots: mem.load_u32_acquire(std::mem::offset_of!(Superblock, num_contexts)).unwrap_or(0),
            },
            other => Error::Protocol(format!("attach: {other:?}")),
        })?;
        let layout = *host.layout();
        let ctx = host.ctx();
        let (buf_off, buf_len) = host.buf_area();
        // The doorbell the appliance published, if it has one and we may use it.
        let block = WakeBlock::read(&mem).unwrap_or(WakeBlock::NONE);
        let wake = match (opts.doorbell, block.doorbell) {
            (true, doorbell::IVSHMEM) => match Wake::connect(path, &block) {
                Ok(w) => {
                    if let Err(e) = host.set_peer(&mem, Some(w.peer_id())) {
                        let _ = host.detach(&mem);
                        return Err(Error::Protocol(format!("attach: {e:?}")));
                    }
                    Some(w)
                }
                Err(e) => {
                    let _ = host.detach(&mem);
                    return Err(e);
                }
            },
            _ => None,
        };
        let (tx, rx) = mpsc::channel();
        let inner = Arc::new(Inner {
            mem,
            host: Mutex::new(Some(host)),
            buffers: Mutex::new(RangeAllocator::new(buf_off, buf_len, PAGE)),
            layout,
            ctx,
            path: path.to_path_buf(),
            opts,
            timeout: opts.timeout,
            lost: AtomicBool::new(false),
            abandoned: Mutex::new(None),
            hb_stop: Mutex::new(Some(tx)),
            wake,
        });
        remember(&inner);
        if opts.heartbeat_thread {
            // A quarter of the lease, between 1 ms and 100 ms.
            let lease_us = u64::from(layout.params.heartbeat_period_us) * u64::from(layout.params.lease_beats);
            let period =
                Duration::from_micros(lease_us / 4).clamp(Duration::from_millis(1), Duration::from_millis(100));
            spawn_heartbeat(Arc::downgrade(&inner), rx, period);
        }
        Ok(Context { inner })
    }

    /// Attach again to the same ring with the same [`Options`]: a new context
    /// (most likely in another slot), for when this one is gone
    /// ([`Error::Lost`], [`Error::Abandoned`]). Objects of the old context are
    /// not carried over: the firmware destroyed them.
    pub fn reopen(&self) -> Result<Context> {
        Context::open_with(&self.inner.path, self.inner.opts)
    }

    /// Attach to the ring `--ring` / `$RDMA_RING` / [`DEFAULT_RING`] names.
    pub fn open_default(explicit: Option<&Path>) -> Result<Context> {
        Context::open(&resolve_ring(explicit))
    }

    /// The ring file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// This context's slot index.
    pub fn index(&self) -> u32 {
        self.inner.ctx
    }

    /// The region layout the firmware published.
    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// The appliance's doorbell, when this context uses one: completion
    /// events wake it instead of polling ([`crate::Cq::wait`]).
    pub fn doorbell(&self) -> Option<&Wake> {
        self.inner.wake.as_ref()
    }

    /// After publishing entries in this context's rings by hand (a layer
    /// that keeps its own queues, as our libibverbs does): ring the
    /// appliance if it asked to be rung. The library's own posts do this.
    pub fn kick(&self) {
        self.inner.kick();
    }

    /// Whether the firmware has reclaimed this context.
    pub fn is_lost(&self) -> bool {
        self.inner.lost.load(Ordering::Acquire)
    }

    /// A command round trip with no effect (liveness, latency).
    pub fn nop(&self) -> Result<()> {
        self.inner.call::<cmd::Empty, cmd::Empty>(nr::NOP, &cmd::Empty {}).map(|_| ())
    }

    /// The superblock's view of the appliance.
    pub fn appliance(&self) -> ApplianceInfo {
        let m = &self.inner.mem;
        let mut b = [0u8; Superblock::SIZE];
        let sb = m.read(0, &mut b).ok().and_then(|_| Superblock::decode(&b)).unwrap_or_default();
        ApplianceInfo {
            region_size: sb.region_size,
            abi_version: sb.abi_version,
            fw_state: m.load_u32_acquire(SB_FW_STATE).unwrap_or(0),
            fail_code: m.load_u32_acquire(SB_FAIL_CODE).unwrap_or(0),
            heartbeat: self.inner.fw_heartbeat(),
            heartbeat_period_us: sb.heartbeat_period_us,
            lease_beats: sb.lease_beats,
            num_contexts: sb.num_contexts,
        }
    }

    /// Every context slot as the region shows it.
    pub fn slots(&self) -> Vec<SlotInfo> {
        let l = &self.inner.layout;
        (0..l.num_contexts())
            .filter_map(|i| {
                let mut b = [0u8; ContextSlot::SIZE];
                self.inner.mem.read(l.slot_off(i)?, &mut b).ok()?;
                let s = ContextSlot::decode(&b)?;
                Some(SlotInfo {
                    index: i,
                    state: s.state,
                    pid: s.host_pid,
                    generation: s.generation,
                    reclaim_reason: s.reclaim_reason,
                })
            })
            .collect()
    }

    /// Contexts attached now, this one included.
    pub fn attached_contexts(&self) -> usize {
        self.slots().iter().filter(|s| s.state == ctx_state::ATTACHED).count()
    }

    /// Every link of the appliance (a LINK_SHOW dump).
    pub fn links(&self) -> Result<Vec<Link>> {
        let mut out = Vec::new();
        let mut next = 0;
        // Bounded: a firmware that never says NO_MORE cannot loop us forever.
        for _ in 0..1024 {
            let req = cmd::LinkShowReq { dev_index: next, port_num: 0 };
            let info: cmd::LinkInfo = match self.inner.call(nr::LINK_SHOW, &req) {
                Ok(i) => i,
                Err(Error::Command { status: Status::ENODEV, .. }) => break,
                Err(e) => return Err(e),
            };
            out.push(Link::from_info(&info));
            if info.next == cmd::NO_MORE || info.next <= info.dev_index {
                break;
            }
            next = info.next;
        }
        Ok(out)
    }

    /// The link of device `name`.
    pub fn link(&self, name: &str) -> Result<Link> {
        self.links()?.into_iter().find(|l| l.name == name).ok_or_else(|| Error::NoDevice(name.to_string()))
    }

    /// Device `name`, or the first device when `None` (as ibverbs tools
    /// pick the first device without `-d`).
    pub fn device(&self, name: Option<&str>) -> Result<Device> {
        let links = self.links()?;
        let link = match name {
            Some(n) => links.into_iter().find(|l| l.name == n).ok_or_else(|| Error::NoDevice(n.to_string()))?,
            None => links.into_iter().next().ok_or_else(|| Error::NoDevice("(any)".to_string()))?,
        };
        Ok(Device::new(self.clone(), link))
    }

    /// Every device of the appliance.
    pub fn devices(&self) -> Result<Vec<Device>> {
        Ok(self.links()?.into_iter().map(|l| Device::new(self.clone(), l)).collect())
    }

    /// `rdma link add NAME type TYPE netdev NETDEV`; the new device's index.
    pub fn link_add(&self, name: &str, link_type: &str, netdev: &str) -> Result<u32> {
        fn field<const N: usize>(what: &'static str, name: &str) -> Result<[u8; N]> {
            name_field(name).map_err(|error| Error::Name { what, name: name.to_string(), error })
        }
        let req = cmd::LinkAddReq {
            dev_name: field("device name", name)?,
            link_type: field("link type", link_type)?,
            netdev: field("netdev name", netdev)?,
        };
        let r: cmd::HandleResp = self.inner.call(nr::LINK_ADD, &req)?;
        Ok(r.handle)
    }

    /// `rdma link delete NAME`.
    pub fn link_del(&self, name: &str) -> Result<()> {
        let link = self.link(name)?;
        self.inner.call::<_, cmd::Empty>(nr::LINK_DEL, &cmd::DevReq { dev_index: link.dev_index, reserved: 0 })?;
        Ok(())
    }

    /// The next async event of this context, if any (`ibv_get_async_event`
    /// without blocking).
    pub fn async_event(&self) -> Result<Option<AsyncEvent>> {
        match self.inner.call::<_, cmd::AsyncEvent>(nr::GET_ASYNC_EVENT, &cmd::Empty {}) {
            Ok(e) => Ok(Some(AsyncEvent {
                event_type: e.event_type,
                element: e.element,
                handle: e.handle,
                dev_index: e.dev_index,
                dropped: e.dropped,
            })),
            Err(Error::Command { status: Status::EAGAIN, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Command `n` with `req`, answered as `Resp`: the raw round trip the
    /// typed methods use, for layers that keep their own objects (the C ABI
    /// library, `rdma/host/libibverbs`).
    pub fn command<Req: Wire, Resp: Wire>(&self, n: u16, req: &Req) -> Result<Resp> {
        self.inner.call(n, req)
    }

    /// [`Context::command`] for commands that resolve an address (MODIFY_QP
    /// with an address vector, CREATE_AH): retried while the appliance's ARP
    /// request is out.
    pub fn command_resolving<Req: Wire, Resp: Wire>(&self, n: u16, req: &Req) -> Result<Resp> {
        self.inner.call_resolving(n, req)
    }

    /// The mapped region (queue rings and buffer area of this context).
    pub fn shared_mem(&self) -> &ShmFile {
        &self.inner.mem
    }

    /// This context's buffer area: (region offset, bytes).
    pub fn buffer_area(&self) -> (u64, u64) {
        self.inner.layout.buf_area(self.inner.ctx).unwrap_or((0, 0))
    }

    /// Take `len` bytes (page-grained) of the buffer area; its region offset.
    pub fn alloc_buffer(&self, len: u64) -> Result<u64> {
        let mut a = lock(&self.inner.buffers);
        a.alloc(len).ok_or(Error::OutOfBufferSpace { requested: len, free: a.free_bytes() })
    }

    /// Take exactly `[off, off + len)` of the buffer area, if it is free
    /// (to grow an earlier allocation in place).
    pub fn alloc_buffer_at(&self, off: u64, len: u64) -> Option<u64> {
        lock(&self.inner.buffers).alloc_at(off, len)
    }

    /// Give back a range [`Context::alloc_buffer`] returned.
    pub fn free_buffer(&self, start: u64, len: u64) {
        let _ = lock(&self.inner.buffers).free(start, len);
    }

    /// Bytes of buffer area still free for memory regions.
    pub fn buffer_space(&self) -> u64 {
        lock(&self.inner.buffers).free_bytes()
    }
}
