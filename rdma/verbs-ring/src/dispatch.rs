//! The command dispatcher (seed §5, uverbs): checks a command against the
//! command [`table`], decodes the typed request, enforces per-context
//! object ownership, places queue rings, and calls the [`VerbsProvider`]
//! (the rxe transport) with already-validated arguments.
//!
//! What is provider-independent and therefore lives here:
//! - handles: every object a context creates gets a handle from the
//!   dispatcher (never 0); a handle of another context, of another kind or
//!   of nothing answers `ENOENT`, so contexts cannot see or touch each
//!   other's objects;
//! - use counts: a PD with MRs/QPs/SRQs/AHs, a CQ with QPs, an SRQ with QPs
//!   cannot be destroyed (`EBUSY`), and objects combined in one QP must be
//!   of the same device (`EINVAL`);
//! - teardown: [`Dispatcher::detach`] destroys a context's objects in
//!   dependency order, CM id, QP, AH, SRQ, MR, CQ, PD (children before
//!   parents; CM ids first, so that the provider's DREQ or REJ leaves while
//!   the QP still exists);
//! - placement: SQ, RQ, SRQ and CQ rings are carved from the context's own
//!   queue area and their indices zeroed before the host learns where they
//!   are; MR memory must lie in the context's own buffer area (`EFAULT`);
//! - async events: the provider reports an event about its object, the
//!   dispatcher queues it for the owning context (port events for all);
//! - CM events: the provider queues them per context; the dispatcher
//!   checks the id is the context's, enters a CONNECT_REQUEST's new id in
//!   the context's handle table and fills in the `uid`s.
//!
//! Nothing here panics on a request: every path ends in a response with a
//! status.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use crate::abi::{
    CQE_SIZE, Layout, MAX_RING_ENTRIES, RecvWqe, RingPlacement, Sge, range_within, recv_wqe_size, send_wqe_size,
};
use crate::area::RangeAllocator;
use crate::cm::*;
use crate::cmd::*;
use crate::ring::RingGeometry;
use crate::shm::SharedMem;
use crate::table::{self, CapSet};
use crate::wire::{Wire, name_str};

/// The provider's own id for an object (rxe pool index, QPN, ...).
pub type ObjId = u32;

/// Kinds of objects a context owns. The discriminants index
/// [`TeardownReport::destroyed`] and, for the first six,
/// [`ResourceCounts::counts`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
pub enum ObjKind {
    Qp,
    Ah,
    Srq,
    Mr,
    Cq,
    Pd,
    /// An RDMA CM id (`rdma_cm_id`); bound to no device as far as the
    /// dispatcher knows (its device is the provider's business).
    CmId,
    /// A memory window (ABI 1.3).
    Mw,
}

impl ObjKind {
    /// Teardown order: children before the objects they use, CM ids first
    /// (a connected id's DREQ goes out while its QP still exists), windows
    /// before MRs (an MR with a window bound to it cannot go).
    pub const TEARDOWN_ORDER: [ObjKind; 8] =
        [ObjKind::CmId, ObjKind::Qp, ObjKind::Ah, ObjKind::Srq, ObjKind::Mw, ObjKind::Mr, ObjKind::Cq, ObjKind::Pd];

    pub fn name(self) -> &'static str {
        match self {
            ObjKind::CmId => "cm_id",
            ObjKind::Qp => "qp",
            ObjKind::Ah => "ah",
            ObjKind::Srq => "srq",
            ObjKind::Mr => "mr",
            ObjKind::Cq => "cq",
            ObjKind::Pd => "pd",
            ObjKind::Mw => "mw",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A memory registration the dispatcher has checked: `[start, start +
/// length)` lies in the context's buffer area and inside the region.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MrSpec {
    /// Region offset of the first byte.
    pub start: u64,
    pub length: u64,
    pub access: u32,
    /// The address work requests and peers name the first byte by.
    pub iova: u64,
}

/// One CM event as the provider reports it (`struct rdma_cm_event`); the
/// dispatcher turns the ids into handles and adds the `uid`s.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CmEventOut {
    /// The id the event is about; for CONNECT_REQUEST the listening id.
    pub id: ObjId,
    /// CONNECT_REQUEST only: the id the provider created for the request.
    /// The dispatcher enters it in the listener's context (its `uid` the
    /// listener's until CM_ACCEPT names another); when it cannot, it calls
    /// `cm_destroy_id` on it (the provider then rejects the request).
    pub new_id: Option<ObjId>,
    /// One of [`cm_event`].
    pub event: u32,
    /// 0, a negative errno, or the REJ reason for REJECTED.
    pub status: i32,
    /// The peer's parameters and private data (UD: its QPN and Q_Key; its
    /// AH is the id's route, see [`crate::cm`]).
    pub param: CmConnParam,
}

/// A page list the dispatcher has checked (MAP_MR_SG): every page lies in the
/// context's buffer area and is aligned to `page_size`, a power of two of at
/// least 4096 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MrMap<'a> {
    pub iova: u64,
    pub length: u64,
    pub page_size: u64,
    /// Region offsets of the pages.
    pub pages: &'a [u64],
}

/// Most pages a MAP_MR_SG may give (rxe's `max_fast_reg_page_list_len`).
pub const MAX_MAP_PAGES: u32 = 512;

/// What `reg_mr` returns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MrKeys {
    pub id: ObjId,
    pub lkey: u32,
    pub rkey: u32,
}

/// A QP the dispatcher has checked and placed: the provider ids of the
/// objects it uses and its rings (zeroed indices).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct QpSpec {
    pub dev_index: u32,
    pub pd: ObjId,
    pub send_cq: ObjId,
    pub recv_cq: ObjId,
    pub srq: Option<ObjId>,
    pub qp_type: u8,
    pub sq_sig_all: bool,
    /// Capacities as placed (WR counts are the ring capacities).
    pub cap: QpCap,
    pub sq: RingPlacement,
    /// `None` with an SRQ.
    pub rq: Option<RingPlacement>,
}

/// An SRQ the dispatcher has checked and placed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SrqSpec {
    pub dev_index: u32,
    pub pd: ObjId,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
    pub ring: RingPlacement,
}

/// A CQ the dispatcher has checked and placed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CqSpec {
    pub dev_index: u32,
    pub cqe: u32,
    pub comp_vector: u32,
    pub ring: RingPlacement,
}

/// What creating a QP or SRQ returns: the provider's id and the number the
/// wire uses (QPN, SRQ number).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Created {
    pub id: ObjId,
    pub num: u32,
}

/// The transport's side of the command table: one method per command, with
/// typed arguments the dispatcher has already checked (sizes, handles,
/// ownership, areas). Every method has a default answering `EOPNOTSUPP`, so
/// a provider grows command by command; [`VerbsProvider::caps`] must list
/// what it implements (the dispatcher refuses the rest before calling).
#[allow(unused_variables)]
pub trait VerbsProvider {
    /// The capabilities implemented.
    fn caps(&self) -> CapSet;

    fn query_device(&mut self, dev: u32) -> Result<DeviceAttr, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn query_port(&mut self, dev: u32, port: u32) -> Result<PortAttr, Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// One GID entry; an empty slot is `valid == 0`.
    fn query_gid(&mut self, dev: u32, port: u32, index: u32) -> Result<GidEntry, Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// One page of the GID table from `start`. The default walks
    /// `query_gid` up to the port's `gid_tbl_len`.
    fn query_gid_table(&mut self, dev: u32, port: u32, start: u32) -> Result<GidTablePage, Status> {
        let len = self.query_port(dev, port)?.gid_tbl_len;
        let mut page = GidTablePage { next: NO_MORE, ..Default::default() };
        let mut i = start;
        while i < len {
            if page.count as usize == GID_PAGE {
                page.next = i;
                break;
            }
            let e = self.query_gid(dev, port, i)?;
            if e.valid != 0 {
                page.entries[page.count as usize] = GidEntry { index: i, ..e };
                page.count += 1;
            }
            i += 1;
        }
        Ok(page)
    }
    fn query_pkey(&mut self, dev: u32, port: u32, index: u32) -> Result<u16, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn alloc_pd(&mut self, dev: u32) -> Result<ObjId, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn dealloc_pd(&mut self, pd: ObjId) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn reg_mr(&mut self, pd: ObjId, mr: &MrSpec) -> Result<MrKeys, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn dereg_mr(&mut self, mr: ObjId) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// A fast-register MR (ALLOC_MR); `lkey` = `rkey` = its key.
    fn alloc_mr(&mut self, pd: ObjId, max_num_sg: u32) -> Result<MrKeys, Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// A checked page list for a fast-register MR (MAP_MR_SG).
    fn map_mr_sg(&mut self, mr: ObjId, map: &MrMap<'_>) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// A memory window: its id and first rkey.
    fn alloc_mw(&mut self, pd: ObjId, mw_type: u32) -> Result<(ObjId, u32), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn dealloc_mw(&mut self, mw: ObjId) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// A UD QP joins (`attach`) or leaves a multicast group.
    fn mcast(&mut self, qp: ObjId, gid: &[u8; 16], attach: bool) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn create_cq(&mut self, cq: &CqSpec) -> Result<ObjId, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn destroy_cq(&mut self, cq: ObjId) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn create_qp(&mut self, qp: &QpSpec) -> Result<Created, Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// `attr_mask` holds only known bits; `ah_attr` and `alt` are as the
    /// host sent them (`alt` zero from a host older than ABI 1.6).
    fn modify_qp(&mut self, qp: ObjId, attr_mask: u32, attr: &QpAttr, alt: &AltPath) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn query_qp(&mut self, qp: ObjId, attr_mask: u32) -> Result<QueryQpResp, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn destroy_qp(&mut self, qp: ObjId) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn create_srq(&mut self, srq: &SrqSpec) -> Result<Created, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn modify_srq(&mut self, srq: ObjId, attr_mask: u32, max_wr: u32, srq_limit: u32) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// RESIZE_SRQ: the SRQ holds `max_wr` WQEs from now on and receives
    /// through `ring` (placed, reset, of the old ring's entry size); the
    /// provider moves the old ring's unconsumed entries into it, published,
    /// and answers how many. Refused, changing nothing, below the WQEs
    /// posted.
    fn resize_srq(&mut self, srq: ObjId, max_wr: u32, ring: RingPlacement) -> Result<u32, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn destroy_srq(&mut self, srq: ObjId) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn create_ah(&mut self, dev: u32, pd: ObjId, attr: &AhAttr) -> Result<ObjId, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn destroy_ah(&mut self, ah: ObjId) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn query_counters(&mut self, dev: u32, port: u32) -> Result<CountersResp, Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// NLDEV NEWLINK; the new device's index.
    fn link_add(&mut self, name: &str, link_type: &str, netdev: &str) -> Result<u32, Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// NLDEV DELLINK.
    fn link_del(&mut self, dev: u32) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// The link of the first device with index `>= dev` (port `port`, or
    /// the first port when 0), with `next` set for a dump; `ENODEV` past
    /// the last.
    fn link_show(&mut self, dev: u32, port: u32) -> Result<LinkInfo, Status> {
        Err(Status::EOPNOTSUPP)
    }

    // RDMA CM ([`Cap::Cm`](crate::table::Cap::Cm)), ucma's commands. Ids
    // are checked to be the calling context's; addresses have an IP family
    // (`dst`, bound address) or none (`src` of resolve_addr); private data
    // lengths are within the fields (each message's own limit, such as the
    // REQ's 56 bytes, is the provider's to check: it knows the QP type).

    /// `rdma_create_id` in context `ctx`. `uid` is what the host calls the
    /// id; the dispatcher reports it in events itself.
    fn cm_create_id(&mut self, ctx: u32, uid: u64, ps: u16, qp_type: u8) -> Result<ObjId, Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// `rdma_destroy_id`: DREQ if connected, REJ if connecting, nothing
    /// otherwise; the id's pending events are dropped. The number of events
    /// reported for the id (ucma's `events_reported`). Also called for
    /// every id of a context that detached or died.
    fn cm_destroy_id(&mut self, id: ObjId) -> Result<u32, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn cm_bind(&mut self, id: ObjId, addr: &CmSockAddr) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// `src.family == af::UNSPEC`: no source address given.
    fn cm_resolve_addr(
        &mut self,
        id: ObjId,
        src: &CmSockAddr,
        dst: &CmSockAddr,
        timeout_ms: u32,
    ) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn cm_resolve_route(&mut self, id: ObjId, timeout_ms: u32) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn cm_query_route(&mut self, id: ObjId) -> Result<CmRoute, Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn cm_listen(&mut self, id: ObjId, backlog: u32) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// The REQ (RC, UC) or SIDR REQ (UD) with `p`.
    fn cm_connect(&mut self, id: ObjId, p: &CmConnParam) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// Passive side: the REP (or SIDR REP) with `p`. Active side after
    /// CONNECT_RESPONSE: the RTU (then ESTABLISHED).
    fn cm_accept(&mut self, id: ObjId, p: &CmConnParam) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn cm_reject(&mut self, id: ObjId, private: &[u8]) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    fn cm_disconnect(&mut self, id: ObjId) -> Result<(), Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// `rdma_init_qp_attr`: `(attr_mask, attr)` moving the id's QP to
    /// `qp_state` (INIT, RTR or RTS). The mask may hold only known bits.
    fn cm_init_qp_attr(&mut self, id: ObjId, qp_state: u32) -> Result<(u32, QpAttr), Status> {
        Err(Status::EOPNOTSUPP)
    }
    /// The next CM event of context `ctx`, `EAGAIN` when none.
    fn cm_get_event(&mut self, ctx: u32) -> Result<CmEventOut, Status> {
        Err(Status::EOPNOTSUPP)
    }

    /// The provider's own objects of `kind` (one of [`res_kind`]) on `dev`,
    /// which `rdma resource show` lists as the kernel's after the hosts'
    /// (Linux lists its GSI QP1 so, `comm [ib_core]`): entries with
    /// `owner` [`res_owner::KERNEL`]; `next` is the dispatcher's to set.
    fn kernel_resources(&mut self, dev: u32, kind: u32) -> Vec<ResEntry> {
        Vec::new()
    }

    /// CM id `id` as `rdma resource show cm_id` lists it: its device and
    /// port (`None` for an id on no device yet, which Linux lists under no
    /// device either), state, port space and addresses; the owner is the
    /// dispatcher's to fill in.
    fn cm_res_entry(&mut self, id: ObjId) -> Option<ResEntry> {
        None
    }
}

/// A provider that answers nothing: where only an object's owner is
/// wanted, with the real provider borrowed elsewhere.
struct NoQuery;

impl VerbsProvider for NoQuery {
    fn caps(&self) -> CapSet {
        CapSet::default()
    }
}

/// What the provider reports to [`Dispatcher::post_event`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EventSource {
    /// About one object (QP fatal, CQ error, SRQ limit, ...).
    Object(ObjKind, ObjId),
    /// About a port of a device (port active/error, GID change): every
    /// attached context hears it.
    Port { dev_index: u32, port: u32 },
}

/// Limits that keep one context from exhausting the firmware.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Limits {
    /// Objects per context (all kinds).
    pub objects_per_ctx: u32,
    /// Queued async events per context; more are counted as dropped.
    pub events_per_ctx: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { objects_per_ctx: 4096, events_per_ctx: 64 }
    }
}

/// What tearing a context down did.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct TeardownReport {
    /// Objects destroyed, by [`ObjKind`] index (qp, ah, srq, mr, cq, pd, cm_id, mw).
    pub destroyed: [u32; 8],
    /// Provider destroy calls that failed (the object is forgotten anyway:
    /// its owner is gone).
    pub provider_errors: u32,
}

impl TeardownReport {
    pub fn total(&self) -> u32 {
        self.destroyed.iter().sum()
    }
}

#[derive(Clone, Debug)]
struct Obj {
    ctx: u32,
    kind: ObjKind,
    id: ObjId,
    dev: u32,
    user_handle: u64,
    /// Handles of the objects this one uses (0 = none).
    uses: [u32; 4],
    /// How many objects use this one.
    users: u32,
    /// Queue-area ranges to give back: (offset, length).
    rings: [(u64, u64); 2],
    events: u32,
    /// What `rdma resource show` prints of it that only its creation told.
    info: ObjInfo,
}

/// What creating an object answered that `rdma resource show` lists: a
/// QP's number and type, a CQ's depth, an MR's keys and length.
#[derive(Clone, Copy, Debug, Default)]
struct ObjInfo {
    /// QP: its QPN; CQ: its `cqe`.
    num: u32,
    /// SRQ: its ring's entry size (a resize places a new ring of them).
    entry_size: u32,
    qp_type: u8,
    lkey: u32,
    rkey: u32,
    len: u64,
}

struct Ctx {
    queues: RangeAllocator,
    buf_area: (u64, u64),
    events: VecDeque<AsyncEvent>,
    dropped: u32,
    objects: u32,
}

/// The hosts' handles from `cursor` on, for a RES_ENTRY dump: an empty
/// range for a cursor past them (a host may send any cursor).
fn user_handles(cursor: u32) -> core::ops::Range<u32> {
    cursor.clamp(1, RES_KERNEL_CURSOR)..RES_KERNEL_CURSOR
}

/// A read-only view of the dispatcher's handle table (see
/// [`Dispatcher::provider_and_handles`]).
pub struct Handles<'a> {
    objs: &'a BTreeMap<u32, Obj>,
    by_id: &'a BTreeMap<(ObjKind, ObjId), u32>,
}

impl Handles<'_> {
    /// The provider id of `handle` if it names a live `kind` owned by the
    /// same context as the provider's object `owner`; a handle of another
    /// context, of another kind or of nothing is `None`, exactly as a
    /// command would be refused.
    pub fn resolve(&self, owner: (ObjKind, ObjId), handle: u32, kind: ObjKind) -> Option<ObjId> {
        let ctx = self.objs.get(self.by_id.get(&owner)?)?.ctx;
        self.objs.get(&handle).filter(|o| o.ctx == ctx && o.kind == kind).map(|o| o.id)
    }

    /// The context that owns the provider's object `obj`.
    pub fn owner(&self, obj: (ObjKind, ObjId)) -> Option<u32> {
        Some(self.objs.get(self.by_id.get(&obj)?)?.ctx)
    }
}

/// The dispatcher: one per appliance, serving every context. It owns the
/// contexts and the handle table; the provider is handed to each call that
/// needs it, so whoever owns the provider's state lends it only for that
/// call (the firmware's network owner passes its parts down, nothing is
/// shared behind a cell).
pub struct Dispatcher {
    layout: Layout,
    limits: Limits,
    ctxs: Vec<Option<Ctx>>,
    objs: BTreeMap<u32, Obj>,
    by_id: BTreeMap<(ObjKind, ObjId), u32>,
    next_handle: u32,
}

/// Decode a checked request; a decode failure cannot happen after the
/// table's size check, but answers `EINVAL` rather than panicking.
fn decode<T: Wire>(b: &[u8]) -> Result<T, Status> {
    T::decode(b).ok_or(Status::EINVAL)
}

fn provider_destroy<P: VerbsProvider + ?Sized>(p: &mut P, kind: ObjKind, id: ObjId) -> Result<(), Status> {
    match kind {
        ObjKind::CmId => p.cm_destroy_id(id).map(|_| ()),
        ObjKind::Qp => p.destroy_qp(id),
        ObjKind::Ah => p.destroy_ah(id),
        ObjKind::Srq => p.destroy_srq(id),
        ObjKind::Mr => p.dereg_mr(id),
        ObjKind::Cq => p.destroy_cq(id),
        ObjKind::Pd => p.dealloc_pd(id),
        ObjKind::Mw => p.dealloc_mw(id),
    }
}

fn ring_entries(min: u32) -> Result<u32, Status> {
    let n = min.max(1).checked_next_power_of_two().ok_or(Status::EINVAL)?;
    if n > MAX_RING_ENTRIES { Err(Status::EINVAL) } else { Ok(n) }
}

impl Dispatcher {
    pub fn new(layout: Layout, limits: Limits) -> Self {
        let ctxs = (0..layout.num_contexts()).map(|_| None).collect();
        Dispatcher { layout, limits, ctxs, objs: BTreeMap::new(), by_id: BTreeMap::new(), next_handle: 1 }
    }

    /// A read-only view of the handle table: the provider's data path meets
    /// handles inside WQEs (a UD send names its address handle) and must
    /// resolve them with the owner checks the commands get.
    pub fn handles(&self) -> Handles<'_> {
        Handles { objs: &self.objs, by_id: &self.by_id }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Start serving context `ctx` (its slot was claimed).
    pub fn attach(&mut self, ctx: u32) -> Result<(), Status> {
        let (qo, ql) = self.layout.queue_area(ctx).ok_or(Status::EINVAL)?;
        let buf_area = self.layout.buf_area(ctx).ok_or(Status::EINVAL)?;
        let slot = self.ctxs.get_mut(ctx as usize).ok_or(Status::EINVAL)?;
        if slot.is_some() {
            return Err(Status::EEXIST);
        }
        *slot = Some(Ctx {
            queues: RangeAllocator::new(qo, ql, 64),
            buf_area,
            events: VecDeque::new(),
            dropped: 0,
            objects: 0,
        });
        Ok(())
    }

    /// Whether `ctx` is attached.
    pub fn is_attached(&self, ctx: u32) -> bool {
        matches!(self.ctxs.get(ctx as usize), Some(Some(_)))
    }

    /// Destroy every object of `ctx` in dependency order and stop serving it.
    pub fn detach<P: VerbsProvider + ?Sized>(&mut self, p: &mut P, ctx: u32) -> TeardownReport {
        let mut report = TeardownReport::default();
        for kind in ObjKind::TEARDOWN_ORDER {
            let handles: Vec<u32> =
                self.objs.iter().filter(|(_, o)| o.ctx == ctx && o.kind == kind).map(|(h, _)| *h).collect();
            for h in handles {
                let Some(o) = self.objs.get(&h) else { continue };
                let (kind, id) = (o.kind, o.id);
                if provider_destroy(p, kind, id).is_err() {
                    report.provider_errors += 1;
                }
                self.forget(h);
                report.destroyed[kind.index()] += 1;
            }
        }
        if let Some(slot) = self.ctxs.get_mut(ctx as usize) {
            *slot = None;
        }
        report
    }

    /// Bytes of context `ctx`'s queue area no ring holds: tests check that
    /// every ring placed is given back.
    #[cfg(test)]
    pub(crate) fn queue_free(&self, ctx: u32) -> Option<u64> {
        self.ctxs.get(ctx as usize)?.as_ref().map(|c| c.queues.free_bytes())
    }

    /// Objects of `kind` owned by `ctx` (or by every context), for
    /// `rdma resource show`.
    pub fn count(&self, ctx: Option<u32>, kind: ObjKind) -> usize {
        self.objs.values().filter(|o| o.kind == kind && ctx.is_none_or(|c| c == o.ctx)).count()
    }

    /// QUERY_RESOURCES: the hosts' objects on `dev` by kind, and the
    /// contexts owning some (the provider's own objects are not counted:
    /// RES_ENTRY lists them, and `rdma resource show` adds them, see
    /// [`crate::show::rdma_res::with_kernel`]). The counts are of what
    /// RES_ENTRY lists.
    pub fn resource_counts<P: VerbsProvider + ?Sized>(&self, p: &mut P, dev: u32) -> ResourceCounts {
        let mut counts = [0u32; 6];
        for o in self.objs.values().filter(|o| o.dev == dev) {
            if let Some(c) = counts.get_mut(o.kind.index()) {
                *c += 1;
            }
        }
        // CM ids have no device here: the provider says where each is.
        let cm_ids = self
            .objs
            .values()
            .filter(|o| o.kind == ObjKind::CmId)
            .filter(|o| p.cm_res_entry(o.id).is_some_and(|e| e.dev_index == dev || e.dev_index == RES_ANY_DEV))
            .count() as u32;
        let contexts = self.contexts_on(p, dev).len() as u32;
        ResourceCounts { counts, contexts, reserved: cm_ids }
    }

    /// The contexts with an object on `dev`, each with its first object's
    /// handle. librdmacm opens a device once an id is bound to it (not for
    /// a wildcard listener), so a CM id counts only where it is bound, as
    /// Linux counts contexts.
    fn contexts_on<P: VerbsProvider + ?Sized>(&self, p: &mut P, dev: u32) -> BTreeMap<u32, u32> {
        let mut on_dev = BTreeMap::new();
        for (&h, o) in &self.objs {
            let here = match o.kind {
                ObjKind::CmId => p.cm_res_entry(o.id).is_some_and(|e| e.dev_index == dev),
                _ => o.dev == dev,
            };
            if here {
                on_dev.entry(o.ctx).or_insert(h);
            }
        }
        on_dev
    }

    /// RES_ENTRY: the first object of `kind` (one of [`res_kind`]) on `dev`
    /// at or after `cursor`, hosts' objects by handle, then the provider's
    /// own ([`VerbsProvider::kernel_resources`]) from [`RES_KERNEL_CURSOR`];
    /// `ENOENT` past the last. The console lists through it too, so both
    /// print the same objects. CM ids are bound to no device here: the
    /// provider says which device each is on ([`VerbsProvider::cm_res_entry`]).
    pub fn res_entry<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &self,
        mem: &M,
        p: &mut P,
        dev: u32,
        kind: u32,
        cursor: u32,
    ) -> Result<ResEntry, Status> {
        let obj_kind = match kind {
            res_kind::PD => ObjKind::Pd,
            res_kind::CQ => ObjKind::Cq,
            res_kind::QP => ObjKind::Qp,
            res_kind::MR => ObjKind::Mr,
            res_kind::SRQ => ObjKind::Srq,
            res_kind::CM_ID => return self.cm_id_entry(mem, p, dev, cursor),
            res_kind::CTX => return self.ctx_entry(mem, p, dev, cursor),
            _ => return Err(Status::EINVAL),
        };
        let ours = |from: u32| self.objs.range(user_handles(from)).find(|(_, o)| o.kind == obj_kind && o.dev == dev);
        let kernel = p.kernel_resources(dev, kind);
        if cursor < RES_KERNEL_CURSOR
            && let Some((&h, o)) = ours(cursor)
        {
            let next = match ours(h.saturating_add(1)) {
                Some((&n, _)) => n,
                None if !kernel.is_empty() => RES_KERNEL_CURSOR,
                None => NO_MORE,
            };
            return Ok(ResEntry { next, ..self.user_entry(mem, p, h, o) });
        }
        let i = cursor.saturating_sub(RES_KERNEL_CURSOR) as usize;
        let e = kernel.get(i).ok_or(Status::ENOENT)?;
        let next = if i + 1 < kernel.len() { RES_KERNEL_CURSOR + i as u32 + 1 } else { NO_MORE };
        Ok(ResEntry { kind, dev_index: dev, next, owner: res_owner::KERNEL, ..*e })
    }

    /// RES_ENTRY for CM ids: the dispatcher binds them to no device, the
    /// provider says which one each is on.
    fn cm_id_entry<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &self,
        mem: &M,
        p: &mut P,
        dev: u32,
        cursor: u32,
    ) -> Result<ResEntry, Status> {
        let mut on_dev =
            self.objs.range(user_handles(cursor)).filter(|(_, o)| o.kind == ObjKind::CmId).filter_map(|(&h, o)| {
                Some((h, o, p.cm_res_entry(o.id).filter(|e| e.dev_index == dev || e.dev_index == RES_ANY_DEV)?))
            });
        let (h, o, e) = on_dev.next().ok_or(Status::ENOENT)?;
        let next = on_dev.next().map_or(NO_MORE, |(n, _, _)| n);
        let owner = self.user_entry(mem, &mut NoQuery, h, o);
        Ok(ResEntry {
            kind: res_kind::CM_ID,
            dev_index: dev,
            next,
            num: h,
            ctxn: owner.ctxn,
            pid: owner.pid,
            comm: owner.comm,
            owner: res_owner::USER,
            ..e
        })
    }

    /// RES_ENTRY for contexts: those owning an object on `dev` (a CM id
    /// counts where the provider says it is), by context number; the
    /// cursor is the context number.
    fn ctx_entry<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &self,
        mem: &M,
        p: &mut P,
        dev: u32,
        cursor: u32,
    ) -> Result<ResEntry, Status> {
        let on_dev = self.contexts_on(p, dev);
        let mut it = on_dev.range(cursor..);
        let (&ctx, &h) = it.next().ok_or(Status::ENOENT)?;
        let next = it.next().map_or(NO_MORE, |(&c, _)| c);
        let o = self.objs.get(&h).ok_or(Status::ENOENT)?;
        let owner = self.user_entry(mem, &mut NoQuery, h, o);
        Ok(ResEntry {
            kind: res_kind::CTX,
            dev_index: dev,
            next,
            num: ctx,
            ctxn: ctx,
            pid: owner.pid,
            comm: owner.comm,
            owner: res_owner::USER,
            ..Default::default()
        })
    }

    /// An SRQ's QPs as runs of consecutive QPNs, in the order they were
    /// made (handle order), at most [`SRQ_QP_RUNS`] of them.
    fn srq_qps(&self, srq: u32, e: &mut ResEntry) {
        let qpns = self.objs.values().filter(|o| o.kind == ObjKind::Qp && o.uses[3] == srq).map(|o| o.info.num);
        let mut runs: alloc::vec::Vec<[u32; 2]> = alloc::vec::Vec::new();
        for n in qpns {
            match runs.last_mut() {
                Some(r) if r[1].checked_add(1) == Some(n) => r[1] = n,
                _ => runs.push([n, n]),
            }
        }
        e.srq_runs_cut = u8::from(runs.len() > SRQ_QP_RUNS);
        for (slot, r) in e.srq_qps.iter_mut().zip(&runs) {
            *slot = *r;
        }
        e.srq_runs = runs.len().min(SRQ_QP_RUNS) as u8;
    }

    /// One host object's entry; its owner as the context's slot shows it.
    fn user_entry<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &self,
        mem: &M,
        p: &mut P,
        h: u32,
        o: &Obj,
    ) -> ResEntry {
        let slot = self.layout.slot_off(o.ctx).and_then(|off| {
            let mut b = [0u8; crate::abi::ContextSlot::SIZE];
            mem.read(off, &mut b).ok()?;
            crate::abi::ContextSlot::decode(&b)
        });
        let mut e = ResEntry {
            dev_index: o.dev,
            num: h,
            ctxn: o.ctx,
            pid: slot.map_or(0, |s| s.host_pid),
            comm: crate::abi::sanitize_comm(&slot.map_or([0; crate::abi::COMM_LEN], |s| s.host_comm)),
            owner: res_owner::USER,
            ..Default::default()
        };
        match o.kind {
            ObjKind::Pd => {
                e.kind = res_kind::PD;
                e.users = o.users;
            }
            ObjKind::Cq => {
                e.kind = res_kind::CQ;
                e.cqe = o.info.num;
                e.users = o.users;
            }
            ObjKind::Mr => {
                e.kind = res_kind::MR;
                e.lkey = o.info.lkey;
                e.rkey = o.info.rkey;
                e.mrlen = o.info.len;
                e.pdn = o.uses[0];
            }
            ObjKind::CmId => e.kind = res_kind::CM_ID,
            ObjKind::Srq => {
                e.kind = res_kind::SRQ;
                e.pdn = o.uses[0];
                // Only an XRC SRQ has a CQ of its own; ours are basic.
                e.srq_type = 0;
                self.srq_qps(h, &mut e);
            }
            ObjKind::Ah | ObjKind::Mw => {}
            ObjKind::Qp => {
                e.kind = res_kind::QP;
                e.num = o.info.num;
                e.qp_type = o.info.qp_type;
                e.pdn = o.uses[0];
                match p.query_qp(o.id, 0) {
                    Ok(q) => {
                        // Linux names a QP's port once it has one (from INIT).
                        e.port = u32::from(q.attr.port_num);
                        e.state = u8::try_from(q.attr.qp_state).unwrap_or(u8::MAX);
                        e.path_mig_state = u8::try_from(q.attr.path_mig_state).unwrap_or(u8::MAX);
                        e.rqpn = q.attr.dest_qp_num;
                        e.rq_psn = q.attr.rq_psn;
                        e.sq_psn = q.attr.sq_psn;
                    }
                    // A state no table names prints as iproute2's UNKNOWN.
                    Err(_) => e.state = u8::MAX,
                }
            }
        }
        e
    }

    /// Queue an async event for whoever it concerns.
    pub fn post_event(&mut self, src: EventSource, event_type: u32) {
        let cap = self.limits.events_per_ctx as usize;
        let push = |c: &mut Ctx, mut ev: AsyncEvent| {
            if c.events.len() >= cap {
                c.dropped = c.dropped.saturating_add(1);
            } else {
                ev.dropped = core::mem::take(&mut c.dropped);
                c.events.push_back(ev);
            }
        };
        match src {
            EventSource::Object(kind, id) => {
                let Some(&h) = self.by_id.get(&(kind, id)) else { return };
                let Some(o) = self.objs.get_mut(&h) else { return };
                o.events = o.events.saturating_add(1);
                let ev = AsyncEvent { element: o.user_handle, event_type, handle: h, dev_index: o.dev, dropped: 0 };
                if let Some(Some(c)) = self.ctxs.get_mut(o.ctx as usize) {
                    push(c, ev);
                }
            }
            EventSource::Port { dev_index, port } => {
                let ev = AsyncEvent { element: u64::from(port), event_type, handle: 0, dev_index, dropped: 0 };
                for c in self.ctxs.iter_mut().flatten() {
                    push(c, ev);
                }
            }
        }
    }

    /// Handle one command slot from context `ctx` and write the response slot
    /// into `resp`; returns the response length (header included). `req` is
    /// the copy of the command slot (never the shared memory itself). Every
    /// outcome is a response: an unparseable header, a wrong context id, an
    /// unknown command, a bad size or a refused request yields an error
    /// status. `resp` must hold at least a header (else nothing is written
    /// and 0 is returned).
    pub fn handle<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        req: &[u8],
        resp: &mut [u8],
    ) -> usize {
        let Some(hdr) = CmdHeader::decode(req) else {
            return write_resp(resp, CmdHeader { ctx, ..Default::default() }, Status::EMSGSIZE, 0);
        };
        let out = CmdHeader { cmd: hdr.cmd, flags: 0, len: 0, status: 0, ctx: hdr.ctx, seq: hdr.seq };
        let payload = req.get(HEADER_SIZE..HEADER_SIZE.saturating_add(usize::from(hdr.len)));
        let (Some(payload), Some(body)) = (payload, resp.get_mut(HEADER_SIZE..)) else {
            return write_resp(resp, out, Status::EMSGSIZE, 0);
        };
        let result = if hdr.ctx != ctx || !self.is_attached(ctx) {
            Err(Status::EPERM)
        } else if hdr.flags != 0 || hdr.status != 0 {
            Err(Status::EINVAL)
        } else {
            match table::check(hdr.cmd, payload, body.len(), p.caps()) {
                Ok(spec) if payload.len() < spec.req_size => {
                    // An older host's shorter request: the fields it does
                    // not know read as zeros (the table keeps req_size
                    // within the buffer for such rows).
                    let mut padded = [0u8; table::GROWN_REQ_MAX];
                    match padded.get_mut(..payload.len()) {
                        Some(head) => {
                            head.copy_from_slice(payload);
                            self.run(mem, p, ctx, spec.nr, &padded[..spec.req_size.min(table::GROWN_REQ_MAX)], body)
                        }
                        None => Err(Status::EMSGSIZE),
                    }
                }
                Ok(spec) => self.run(mem, p, ctx, spec.nr, payload, body),
                Err(s) => Err(s),
            }
        };
        match result {
            Ok(n) => write_resp(resp, out, Status::OK, n),
            Err(s) => write_resp(resp, out, s, 0),
        }
    }

    /// Run the handler of a checked command; the response payload length.
    fn run<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        nr: u16,
        req: &[u8],
        out: &mut [u8],
    ) -> Result<usize, Status> {
        fn reply<T: Wire>(out: &mut [u8], v: T) -> Result<usize, Status> {
            v.encode(out).ok_or(Status::EMSGSIZE)?;
            Ok(T::SIZE)
        }
        match nr {
            nr::NOP => Ok(0),
            nr::QUERY_DEVICE => {
                let r: DevReq = decode(req)?;
                reply(out, p.query_device(r.dev_index)?)
            }
            nr::QUERY_PORT => {
                let r: PortReq = decode(req)?;
                reply(out, p.query_port(r.dev_index, r.port_num)?)
            }
            nr::QUERY_GID => {
                let r: GidReq = decode(req)?;
                let e = p.query_gid(r.dev_index, r.port_num, r.index)?;
                reply(out, GidEntry { index: r.index, ..e })
            }
            nr::QUERY_GID_TABLE => {
                let r: GidReq = decode(req)?;
                let page = p.query_gid_table(r.dev_index, r.port_num, r.index)?;
                if page.count as usize > GID_PAGE {
                    return Err(Status::EIO);
                }
                reply(out, page)
            }
            nr::QUERY_PKEY => {
                let r: GidReq = decode(req)?;
                let pkey = p.query_pkey(r.dev_index, r.port_num, r.index)?;
                reply(out, PkeyResp { pkey, ..Default::default() })
            }
            nr::GET_ASYNC_EVENT => {
                let c = self.ctx_mut(ctx)?;
                let ev = c.events.pop_front().ok_or(Status::EAGAIN)?;
                reply(out, ev)
            }
            nr::QUERY_COUNTERS => {
                let r: PortReq = decode(req)?;
                let c = p.query_counters(r.dev_index, r.port_num)?;
                if c.num_counters as usize > MAX_COUNTERS {
                    return Err(Status::EIO);
                }
                reply(out, c)
            }
            nr::QUERY_RESOURCES => {
                let r: DevReq = decode(req)?;
                reply(out, self.resource_counts(p, r.dev_index))
            }
            nr::RES_ENTRY => {
                let r: ResEntryReq = decode(req)?;
                reply(out, self.res_entry(mem, p, r.dev_index, r.kind, r.cursor)?)
            }
            nr::RESIZE_SRQ => {
                let r: ResizeSrqReq = decode(req)?;
                reply(out, self.resize_srq(mem, p, ctx, &r)?)
            }
            nr::LINK_ADD => {
                let r: LinkAddReq = decode(req)?;
                let (Some(name), Some(ty), Some(nd)) =
                    (name_str(&r.dev_name), name_str(&r.link_type), name_str(&r.netdev))
                else {
                    return Err(Status::EINVAL);
                };
                if name.is_empty() || ty.is_empty() || nd.is_empty() {
                    return Err(Status::EINVAL);
                }
                let dev = p.link_add(name, ty, nd)?;
                reply(out, HandleResp { handle: dev, reserved: 0 })
            }
            nr::LINK_DEL => {
                let r: DevReq = decode(req)?;
                // Objects of any context on the device keep it alive: their
                // owners must destroy them (or detach) first.
                if self.objs.values().any(|o| o.dev == r.dev_index) {
                    return Err(Status::EBUSY);
                }
                p.link_del(r.dev_index)?;
                Ok(0)
            }
            nr::LINK_SHOW => {
                let r: LinkShowReq = decode(req)?;
                reply(out, p.link_show(r.dev_index, r.port_num)?)
            }
            nr::ALLOC_PD => {
                let r: DevReq = decode(req)?;
                self.check_room(ctx)?;
                let id = p.alloc_pd(r.dev_index)?;
                let h = self.insert(ctx, ObjKind::Pd, id, r.dev_index, 0, [0; 4], [(0, 0); 2])?;
                reply(out, HandleResp { handle: h, reserved: 0 })
            }
            nr::REG_MR => {
                let r: RegMrReq = decode(req)?;
                self.reg_mr(mem, p, ctx, &r, out)
            }
            nr::CREATE_CQ => {
                let r: CreateCqReq = decode(req)?;
                self.create_cq(mem, p, ctx, &r, out)
            }
            nr::CREATE_QP => {
                let r: CreateQpReq = decode(req)?;
                self.create_qp(mem, p, ctx, &r, out)
            }
            nr::CREATE_SRQ => {
                let r: CreateSrqReq = decode(req)?;
                self.create_srq(mem, p, ctx, &r, out)
            }
            nr::CREATE_AH => {
                let r: CreateAhReq = decode(req)?;
                self.check_room(ctx)?;
                let (pd, dev) = self.lookup(ctx, r.pd_handle, ObjKind::Pd)?;
                let id = p.create_ah(dev, pd, &r.attr)?;
                let h = self.insert(ctx, ObjKind::Ah, id, dev, 0, [r.pd_handle, 0, 0, 0], [(0, 0); 2])?;
                reply(out, HandleResp { handle: h, reserved: 0 })
            }
            nr::MODIFY_QP => {
                let r: ModifyQpReq = decode(req)?;
                if r.attr_mask & !qp_attr_mask::ALL != 0 {
                    return Err(Status::EINVAL);
                }
                let (qp, _) = self.lookup(ctx, r.qp_handle, ObjKind::Qp)?;
                p.modify_qp(qp, r.attr_mask, &r.attr, &r.alt)?;
                Ok(0)
            }
            nr::QUERY_QP => {
                let r: QueryQpReq = decode(req)?;
                let (qp, _) = self.lookup(ctx, r.qp_handle, ObjKind::Qp)?;
                reply(out, p.query_qp(qp, r.attr_mask & qp_attr_mask::ALL)?)
            }
            nr::MODIFY_SRQ => {
                let r: ModifySrqReq = decode(req)?;
                if r.attr_mask & !srq_attr_mask::ALL != 0 {
                    return Err(Status::EINVAL);
                }
                let (srq, _) = self.lookup(ctx, r.srq_handle, ObjKind::Srq)?;
                p.modify_srq(srq, r.attr_mask, r.max_wr, r.srq_limit)?;
                Ok(0)
            }
            nr::DEALLOC_PD => self.destroy(p, ctx, req, ObjKind::Pd).map(|_| 0),
            nr::DEREG_MR => self.destroy(p, ctx, req, ObjKind::Mr).map(|_| 0),
            nr::ALLOC_MR => {
                let r: AllocMrReq = decode(req)?;
                if r.max_num_sg == 0 || r.max_num_sg > MAX_MAP_PAGES {
                    return Err(Status::EINVAL);
                }
                self.check_room(ctx)?;
                let (pd, dev) = self.lookup(ctx, r.pd_handle, ObjKind::Pd)?;
                let keys = p.alloc_mr(pd, r.max_num_sg)?;
                let h = self.insert(ctx, ObjKind::Mr, keys.id, dev, 0, [r.pd_handle, 0, 0, 0], [(0, 0); 2])?;
                self.set_info(h, ObjInfo { lkey: keys.lkey, rkey: keys.rkey, ..Default::default() });
                reply(out, RegMrResp { mr_handle: h, lkey: keys.lkey, rkey: keys.rkey, reserved: 0 })
            }
            nr::MAP_MR_SG => {
                let r: MapMrSgReq = decode(req)?;
                self.map_mr_sg(mem, p, ctx, &r)
            }
            nr::ALLOC_MW => {
                let r: AllocMwReq = decode(req)?;
                if !matches!(r.mw_type, mw_type::TYPE_1 | mw_type::TYPE_2) {
                    return Err(Status::EINVAL);
                }
                self.check_room(ctx)?;
                let (pd, dev) = self.lookup(ctx, r.pd_handle, ObjKind::Pd)?;
                let (id, rkey) = p.alloc_mw(pd, r.mw_type)?;
                let h = self.insert(ctx, ObjKind::Mw, id, dev, 0, [r.pd_handle, 0, 0, 0], [(0, 0); 2])?;
                reply(out, AllocMwResp { mw_handle: h, rkey })
            }
            nr::DEALLOC_MW => self.destroy(p, ctx, req, ObjKind::Mw).map(|_| 0),
            nr::ATTACH_MCAST | nr::DETACH_MCAST => {
                let r: McastReq = decode(req)?;
                let (qp, _) = self.lookup(ctx, r.qp_handle, ObjKind::Qp)?;
                p.mcast(qp, &r.gid, nr == nr::ATTACH_MCAST)?;
                Ok(0)
            }
            nr::DESTROY_AH => self.destroy(p, ctx, req, ObjKind::Ah).map(|_| 0),
            nr::DESTROY_CQ => {
                let events = self.destroy(p, ctx, req, ObjKind::Cq)?;
                reply(out, DestroyResp { events_reported: events, reserved: 0 })
            }
            nr::DESTROY_QP => {
                let events = self.destroy(p, ctx, req, ObjKind::Qp)?;
                reply(out, DestroyResp { events_reported: events, reserved: 0 })
            }
            nr::DESTROY_SRQ => {
                let events = self.destroy(p, ctx, req, ObjKind::Srq)?;
                reply(out, DestroyResp { events_reported: events, reserved: 0 })
            }
            nr::CM_CREATE_ID..=nr::CM_GET_EVENT => self.run_cm(p, ctx, nr, req, out),
            // A table row without a handler: a bug here, answered, not panicked.
            _ => Err(Status::ENOSYS),
        }
    }

    /// The RDMA CM commands: ids checked against the context, addresses
    /// and lengths against their fields, before the provider is asked.
    fn run_cm<P: VerbsProvider + ?Sized>(
        &mut self,
        p: &mut P,
        ctx: u32,
        nr: u16,
        req: &[u8],
        out: &mut [u8],
    ) -> Result<usize, Status> {
        fn reply<T: Wire>(out: &mut [u8], v: T) -> Result<usize, Status> {
            v.encode(out).ok_or(Status::EMSGSIZE)?;
            Ok(T::SIZE)
        }
        fn check_param(c: &CmConnParam) -> Result<(), Status> {
            c.private().map(|_| ()).ok_or(Status::EINVAL)
        }
        match nr {
            nr::CM_CREATE_ID => {
                let r: CmCreateIdReq = decode(req)?;
                if !port_space::is_known(r.ps) || !matches!(r.qp_type, qp_type::RC | qp_type::UC | qp_type::UD) {
                    return Err(Status::EINVAL);
                }
                self.check_room(ctx)?;
                let id = p.cm_create_id(ctx, r.uid, r.ps, r.qp_type)?;
                let h = self.insert(ctx, ObjKind::CmId, id, NO_DEVICE, r.uid, [0; 4], [(0, 0); 2])?;
                reply(out, HandleResp { handle: h, reserved: 0 })
            }
            nr::CM_DESTROY_ID => {
                let r: HandleReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                let events = p.cm_destroy_id(id)?;
                self.forget(r.handle);
                reply(out, DestroyResp { events_reported: events, reserved: 0 })
            }
            nr::CM_BIND => {
                let r: CmBindReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                if !r.addr.is_ip() {
                    return Err(Status::EINVAL);
                }
                p.cm_bind(id, &r.addr)?;
                Ok(0)
            }
            nr::CM_RESOLVE_ADDR => {
                let r: CmResolveAddrReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                let src_ok = r.src.family == af::UNSPEC || r.src.family == r.dst.family;
                if !r.dst.is_ip() || !src_ok {
                    return Err(Status::EINVAL);
                }
                p.cm_resolve_addr(id, &r.src, &r.dst, r.timeout_ms)?;
                Ok(0)
            }
            nr::CM_RESOLVE_ROUTE => {
                let r: CmResolveRouteReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                p.cm_resolve_route(id, r.timeout_ms)?;
                Ok(0)
            }
            nr::CM_QUERY_ROUTE => {
                let r: HandleReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                reply(out, p.cm_query_route(id)?)
            }
            nr::CM_CONNECT => {
                let r: CmConnectReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                check_param(&r.param)?;
                p.cm_connect(id, &r.param)?;
                Ok(0)
            }
            nr::CM_LISTEN => {
                let r: CmListenReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                p.cm_listen(id, r.backlog)?;
                Ok(0)
            }
            nr::CM_ACCEPT => {
                let r: CmAcceptReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                check_param(&r.param)?;
                p.cm_accept(id, &r.param)?;
                if r.uid != 0
                    && let Some(o) = self.objs.get_mut(&r.handle)
                {
                    o.user_handle = r.uid;
                }
                Ok(0)
            }
            nr::CM_REJECT => {
                let r: CmRejectReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                p.cm_reject(id, r.private().ok_or(Status::EINVAL)?)?;
                Ok(0)
            }
            nr::CM_DISCONNECT => {
                let r: HandleReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                p.cm_disconnect(id)?;
                Ok(0)
            }
            nr::CM_INIT_QP_ATTR => {
                let r: CmInitQpAttrReq = decode(req)?;
                let (id, _) = self.lookup(ctx, r.handle, ObjKind::CmId)?;
                if !matches!(r.qp_state, qp_state::INIT | qp_state::RTR | qp_state::RTS) {
                    return Err(Status::EINVAL);
                }
                let (attr_mask, attr) = p.cm_init_qp_attr(id, r.qp_state)?;
                if attr_mask & !qp_attr_mask::ALL != 0 {
                    return Err(Status::EIO);
                }
                reply(out, CmInitQpAttrResp { attr_mask, reserved: 0, attr })
            }
            nr::CM_GET_EVENT => reply(out, self.next_cm_event(p, ctx)?),
            _ => Err(Status::ENOSYS),
        }
    }

    /// The next CM event the provider has for `ctx`, its ids made handles.
    /// An event about an id the context does not own (a provider bug, or an
    /// id destroyed meanwhile) is dropped; so is a CONNECT_REQUEST whose new
    /// id cannot be entered (the provider is told to destroy that id, which
    /// rejects the request). Bounded, so a babbling provider cannot hold
    /// the ring: after that many dropped events the answer is `EAGAIN`.
    fn next_cm_event<P: VerbsProvider + ?Sized>(&mut self, p: &mut P, ctx: u32) -> Result<CmEvent, Status> {
        const MAX_DROPPED: usize = 16;
        for _ in 0..MAX_DROPPED {
            let ev = p.cm_get_event(ctx)?;
            let owner = self.by_id.get(&(ObjKind::CmId, ev.id)).copied();
            let Some((h, uid)) =
                owner.and_then(|h| self.objs.get(&h).filter(|o| o.ctx == ctx).map(|o| (h, o.user_handle)))
            else {
                // Nobody here to hear it: a request's new id would leak.
                if let Some(new) = ev.new_id.filter(|n| !self.by_id.contains_key(&(ObjKind::CmId, *n))) {
                    let _ = p.cm_destroy_id(new);
                }
                continue;
            };
            let mut param = ev.param;
            // The bytes are there whatever the length says: never report more.
            param.private_data_len = param.private_data_len.min(MAX_PRIVATE_DATA as u8);
            let handle = match (ev.event, ev.new_id) {
                (cm_event::CONNECT_REQUEST, Some(new)) => {
                    if self.check_room(ctx).is_err() {
                        let _ = p.cm_destroy_id(new);
                        continue;
                    }
                    // A duplicate id (provider bug) is refused by insert and
                    // must not be destroyed: the live id has it.
                    match self.insert(ctx, ObjKind::CmId, new, NO_DEVICE, uid, [0; 4], [(0, 0); 2]) {
                        Ok(nh) => nh,
                        Err(_) => continue,
                    }
                }
                (cm_event::CONNECT_REQUEST, None) => continue,
                _ => h,
            };
            return Ok(CmEvent { uid, handle, event: ev.event, status: ev.status as u32, reserved: 0, param });
        }
        Err(Status::EAGAIN)
    }

    fn ctx_mut(&mut self, ctx: u32) -> Result<&mut Ctx, Status> {
        self.ctxs.get_mut(ctx as usize).and_then(Option::as_mut).ok_or(Status::EPERM)
    }

    fn check_room(&mut self, ctx: u32) -> Result<(), Status> {
        let limit = self.limits.objects_per_ctx;
        if self.ctx_mut(ctx)?.objects >= limit { Err(Status::ENOMEM) } else { Ok(()) }
    }

    /// The provider id and device of `handle`, if it is a `kind` of `ctx`.
    fn lookup(&self, ctx: u32, handle: u32, kind: ObjKind) -> Result<(ObjId, u32), Status> {
        match self.objs.get(&handle) {
            Some(o) if o.ctx == ctx && o.kind == kind => Ok((o.id, o.dev)),
            _ => Err(Status::ENOENT),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        ctx: u32,
        kind: ObjKind,
        id: ObjId,
        dev: u32,
        user_handle: u64,
        uses: [u32; 4],
        rings: [(u64, u64); 2],
    ) -> Result<u32, Status> {
        if self.by_id.contains_key(&(kind, id)) {
            // The provider returned an id that a live object already has: a
            // provider bug. Refuse to alias two handles to one object (and
            // do not destroy by that id: it would hit the live object).
            self.free_rings(ctx, rings);
            return Err(Status::EIO);
        }
        let mut h = self.next_handle;
        while h == 0 || self.objs.contains_key(&h) {
            h = h.wrapping_add(1);
        }
        self.next_handle = h.wrapping_add(1);
        for u in uses.into_iter().filter(|&u| u != 0) {
            if let Some(p) = self.objs.get_mut(&u) {
                p.users += 1;
            }
        }
        let info = ObjInfo::default();
        self.objs.insert(h, Obj { ctx, kind, id, dev, user_handle, uses, users: 0, rings, events: 0, info });
        self.by_id.insert((kind, id), h);
        if let Ok(c) = self.ctx_mut(ctx) {
            c.objects += 1;
        }
        Ok(h)
    }

    fn set_info(&mut self, h: u32, info: ObjInfo) {
        if let Some(o) = self.objs.get_mut(&h) {
            o.info = info;
        }
    }

    /// Drop the dispatcher's record of `h`: parents' use counts, rings.
    fn forget(&mut self, h: u32) -> Option<Obj> {
        let o = self.objs.remove(&h)?;
        self.by_id.remove(&(o.kind, o.id));
        for u in o.uses.into_iter().filter(|&u| u != 0) {
            if let Some(p) = self.objs.get_mut(&u) {
                p.users = p.users.saturating_sub(1);
            }
        }
        self.free_rings(o.ctx, o.rings);
        if let Ok(c) = self.ctx_mut(o.ctx) {
            c.objects = c.objects.saturating_sub(1);
        }
        Some(o)
    }

    fn free_rings(&mut self, ctx: u32, rings: [(u64, u64); 2]) {
        if let Ok(c) = self.ctx_mut(ctx) {
            for (off, len) in rings.into_iter().filter(|&(_, l)| l != 0) {
                // Cannot fail for a range this allocator handed out.
                let _ = c.queues.free(off, len);
            }
        }
    }

    /// A destroy command: ownership, use count, provider, then forget.
    /// Returns the object's reported event count.
    fn destroy<P: VerbsProvider + ?Sized>(
        &mut self,
        p: &mut P,
        ctx: u32,
        req: &[u8],
        kind: ObjKind,
    ) -> Result<u32, Status> {
        let r: HandleReq = decode(req)?;
        let (id, _) = self.lookup(ctx, r.handle, kind)?;
        if self.objs.get(&r.handle).is_some_and(|o| o.users > 0) {
            return Err(Status::EBUSY);
        }
        provider_destroy(p, kind, id)?;
        Ok(self.forget(r.handle).map_or(0, |o| o.events))
    }

    /// Carve a ring from the context's queue area and zero its indices.
    fn place<M: SharedMem + ?Sized>(
        &mut self,
        mem: &M,
        ctx: u32,
        entries: u32,
        entry_size: u32,
    ) -> Result<RingPlacement, Status> {
        let bytes = RingPlacement::bytes(entries, entry_size).ok_or(Status::EINVAL)?;
        let c = self.ctx_mut(ctx)?;
        let off = c.queues.alloc(bytes).ok_or(Status::ENOMEM)?;
        let p = RingPlacement { off, entries, entry_size };
        let reset = RingGeometry::new(p, mem.len())
            .map_err(|_| Status::EFAULT)
            .and_then(|g| g.reset(mem).map_err(|_| Status::EFAULT));
        if let Err(s) = reset {
            let _ = c.queues.free(off, bytes);
            return Err(s);
        }
        Ok(p)
    }

    fn reg_mr<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        r: &RegMrReq,
        out: &mut [u8],
    ) -> Result<usize, Status> {
        use crate::cmd::access::*;
        if r.access & !ALL != 0 || r.length == 0 {
            return Err(Status::EINVAL);
        }
        // IB spec o10-37: remote write or atomic access needs local write.
        if r.access & (REMOTE_WRITE | REMOTE_ATOMIC) != 0 && r.access & LOCAL_WRITE == 0 {
            return Err(Status::EINVAL);
        }
        let (area_off, area_len) = self.ctx_mut(ctx)?.buf_area;
        if !range_within(r.start, r.length, area_off, area_len) || !range_within(r.start, r.length, 0, mem.len() as u64)
        {
            return Err(Status::EFAULT);
        }
        self.check_room(ctx)?;
        let (pd, dev) = self.lookup(ctx, r.pd_handle, ObjKind::Pd)?;
        if r.iova.checked_add(r.length).is_none() {
            return Err(Status::EINVAL);
        }
        let keys = p.reg_mr(pd, &MrSpec { start: r.start, length: r.length, access: r.access, iova: r.iova })?;
        let h = self.insert(ctx, ObjKind::Mr, keys.id, dev, 0, [r.pd_handle, 0, 0, 0], [(0, 0); 2])?;
        self.set_info(h, ObjInfo { lkey: keys.lkey, rkey: keys.rkey, len: r.length, ..Default::default() });
        RegMrResp { mr_handle: h, lkey: keys.lkey, rkey: keys.rkey, reserved: 0 }
            .encode(out)
            .ok_or(Status::EMSGSIZE)?;
        Ok(RegMrResp::SIZE)
    }

    /// MAP_MR_SG: the page list is copied out of the region once, then every
    /// page is checked against the context's buffer area before the provider
    /// sees it (a hostile list names nothing outside the context).
    fn map_mr_sg<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        r: &MapMrSgReq,
    ) -> Result<usize, Status> {
        if r.num_pages == 0 || r.num_pages > MAX_MAP_PAGES {
            return Err(Status::EINVAL);
        }
        if !r.page_size.is_power_of_two() || r.page_size < 4096 || r.page_size > 1 << 31 {
            return Err(Status::EINVAL);
        }
        let (mr, _) = self.lookup(ctx, r.mr_handle, ObjKind::Mr)?;
        let (area_off, area_len) = self.ctx_mut(ctx)?.buf_area;
        let list_len = u64::from(r.num_pages) * 8;
        if !range_within(r.list_off, list_len, area_off, area_len)
            || !range_within(r.list_off, list_len, 0, mem.len() as u64)
        {
            return Err(Status::EFAULT);
        }
        let mut raw = alloc::vec![0u8; list_len as usize];
        mem.read(r.list_off as usize, &mut raw).map_err(|_| Status::EFAULT)?;
        let mut pages = Vec::with_capacity(r.num_pages as usize);
        for chunk in raw.chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            let page = u64::from_le_bytes(b);
            if page % r.page_size != 0 || !range_within(page, r.page_size, area_off, area_len) {
                return Err(Status::EFAULT);
            }
            pages.push(page);
        }
        p.map_mr_sg(mr, &MrMap { iova: r.iova, length: r.length, page_size: r.page_size, pages: &pages })?;
        Ok(0)
    }

    fn create_cq<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        r: &CreateCqReq,
        out: &mut [u8],
    ) -> Result<usize, Status> {
        if r.cqe == 0 {
            return Err(Status::EINVAL);
        }
        let entries = ring_entries(r.cqe)?;
        self.check_room(ctx)?;
        let ring = self.place(mem, ctx, entries, CQE_SIZE)?;
        let rings = [(ring.off, RingPlacement::bytes(entries, CQE_SIZE).unwrap_or(0)), (0, 0)];
        let spec = CqSpec { dev_index: r.dev_index, cqe: entries, comp_vector: r.comp_vector, ring };
        let id = match p.create_cq(&spec) {
            Ok(id) => id,
            Err(s) => {
                self.free_rings(ctx, rings);
                return Err(s);
            }
        };
        let h = self.insert(ctx, ObjKind::Cq, id, r.dev_index, r.user_handle, [0; 4], rings)?;
        self.set_info(h, ObjInfo { num: entries, ..Default::default() });
        CreateCqResp { cq_handle: h, cqe: entries, ring }.encode(out).ok_or(Status::EMSGSIZE)?;
        Ok(CreateCqResp::SIZE)
    }

    fn create_qp<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        r: &CreateQpReq,
        out: &mut [u8],
    ) -> Result<usize, Status> {
        if !matches!(r.qp_type, qp_type::RC | qp_type::UC | qp_type::UD) {
            return Err(Status::EINVAL);
        }
        self.check_room(ctx)?;
        let (pd, dev) = self.lookup(ctx, r.pd_handle, ObjKind::Pd)?;
        let (send_cq, sdev) = self.lookup(ctx, r.send_cq_handle, ObjKind::Cq)?;
        let (recv_cq, rdev) = self.lookup(ctx, r.recv_cq_handle, ObjKind::Cq)?;
        let srq = match r.srq_handle {
            0 => None,
            h => Some(self.lookup(ctx, h, ObjKind::Srq)?),
        };
        if sdev != dev || rdev != dev || srq.is_some_and(|(_, d)| d != dev) {
            return Err(Status::EINVAL);
        }
        let mut cap = r.cap;
        let sq_size = send_wqe_size(cap.max_send_sge, cap.max_inline_data).ok_or(Status::EINVAL)?;
        let sq_entries = ring_entries(cap.max_send_wr)?;
        cap.max_send_wr = sq_entries;
        // The entry has room for the larger of SGEs and inline data; report
        // what really fits, as rxe does.
        let body = sq_size - crate::abi::SendWqe::SIZE as u32;
        cap.max_send_sge = (body / Sge::SIZE as u32).min(crate::abi::MAX_SGE);
        cap.max_inline_data = body.min(crate::abi::MAX_INLINE);
        let rq_geom = if srq.is_some() {
            cap.max_recv_wr = 0;
            cap.max_recv_sge = 0;
            None
        } else {
            let size = recv_wqe_size(cap.max_recv_sge).ok_or(Status::EINVAL)?;
            let n = ring_entries(cap.max_recv_wr)?;
            cap.max_recv_wr = n;
            cap.max_recv_sge = (size - RecvWqe::SIZE as u32) / Sge::SIZE as u32;
            Some((n, size))
        };
        let sq = self.place(mem, ctx, sq_entries, sq_size)?;
        let mut rings = [(sq.off, RingPlacement::bytes(sq_entries, sq_size).unwrap_or(0)), (0, 0)];
        let rq = match rq_geom {
            None => None,
            Some((n, size)) => match self.place(mem, ctx, n, size) {
                Ok(p) => {
                    rings[1] = (p.off, RingPlacement::bytes(n, size).unwrap_or(0));
                    Some(p)
                }
                Err(s) => {
                    self.free_rings(ctx, rings);
                    return Err(s);
                }
            },
        };
        let spec = QpSpec {
            dev_index: dev,
            pd,
            send_cq,
            recv_cq,
            srq: srq.map(|(id, _)| id),
            qp_type: r.qp_type,
            sq_sig_all: r.sq_sig_all != 0,
            cap,
            sq,
            rq,
        };
        let created = match p.create_qp(&spec) {
            Ok(c) => c,
            Err(s) => {
                self.free_rings(ctx, rings);
                return Err(s);
            }
        };
        let uses = [r.pd_handle, r.send_cq_handle, r.recv_cq_handle, r.srq_handle];
        let h = self.insert(ctx, ObjKind::Qp, created.id, dev, r.user_handle, uses, rings)?;
        self.set_info(h, ObjInfo { num: created.num, qp_type: r.qp_type, ..Default::default() });
        let resp = CreateQpResp {
            qp_handle: h,
            qp_num: created.num,
            cap,
            reserved: 0,
            sq,
            rq: rq.unwrap_or(RingPlacement { off: 0, entries: 0, entry_size: 0 }),
        };
        resp.encode(out).ok_or(Status::EMSGSIZE)?;
        Ok(CreateQpResp::SIZE)
    }

    fn create_srq<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        r: &CreateSrqReq,
        out: &mut [u8],
    ) -> Result<usize, Status> {
        self.check_room(ctx)?;
        let (pd, dev) = self.lookup(ctx, r.pd_handle, ObjKind::Pd)?;
        if r.max_wr == 0 {
            return Err(Status::EINVAL);
        }
        let size = recv_wqe_size(r.max_sge).ok_or(Status::EINVAL)?;
        let entries = ring_entries(r.max_wr)?;
        if r.srq_limit > entries {
            return Err(Status::EINVAL);
        }
        let ring = self.place(mem, ctx, entries, size)?;
        let rings = [(ring.off, RingPlacement::bytes(entries, size).unwrap_or(0)), (0, 0)];
        let max_sge = (size - RecvWqe::SIZE as u32) / Sge::SIZE as u32;
        let spec = SrqSpec { dev_index: dev, pd, max_wr: entries, max_sge, srq_limit: r.srq_limit, ring };
        let created = match p.create_srq(&spec) {
            Ok(c) => c,
            Err(s) => {
                self.free_rings(ctx, rings);
                return Err(s);
            }
        };
        let h = self.insert(ctx, ObjKind::Srq, created.id, dev, r.user_handle, [r.pd_handle, 0, 0, 0], rings)?;
        self.set_info(h, ObjInfo { entry_size: size, ..Default::default() });
        CreateSrqResp { srq_handle: h, srq_num: created.num, max_wr: entries, max_sge, ring }
            .encode(out)
            .ok_or(Status::EMSGSIZE)?;
        Ok(CreateSrqResp::SIZE)
    }

    /// RESIZE_SRQ: a ring of the new size is placed and the provider moves
    /// the SRQ onto it; then the old ring's range goes back (on a refusal,
    /// the new one's does and nothing changed).
    fn resize_srq<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        r: &ResizeSrqReq,
    ) -> Result<ResizeSrqResp, Status> {
        let (srq, _) = self.lookup(ctx, r.srq_handle, ObjKind::Srq)?;
        let (old, size) =
            self.objs.get(&r.srq_handle).map(|o| (o.rings[0], o.info.entry_size)).ok_or(Status::ENOENT)?;
        // As at creation (and rxe_srq_chk_attr): an SRQ of no WQEs is no SRQ.
        if r.max_wr == 0 {
            return Err(Status::EINVAL);
        }
        let entries = ring_entries(r.max_wr)?;
        let ring = self.place(mem, ctx, entries, size)?;
        let new = (ring.off, RingPlacement::bytes(entries, size).unwrap_or(0));
        match p.resize_srq(srq, entries, ring) {
            Ok(moved) => {
                self.free_rings(ctx, [old, (0, 0)]);
                if let Some(o) = self.objs.get_mut(&r.srq_handle) {
                    o.rings[0] = new;
                }
                Ok(ResizeSrqResp { max_wr: entries, moved, ring })
            }
            Err(s) => {
                self.free_rings(ctx, [new, (0, 0)]);
                Err(s)
            }
        }
    }
}

/// Write a response header (and keep the payload the handler wrote).
fn write_resp(resp: &mut [u8], mut hdr: CmdHeader, status: Status, len: usize) -> usize {
    hdr.status = status.0;
    hdr.len = u16::try_from(len).unwrap_or(0);
    match hdr.encode(resp) {
        Some(()) => HEADER_SIZE + usize::from(hdr.len),
        None => 0,
    }
}
