//! rdma_cm for the ring's host programs (Linux `cma.c` as `ucma` serves it):
//! ids named by IP address and port, resolved to a device and a path, and
//! connected through the IB CM of that device ([`IbCm`], one per device).
//!
//! As with ucma, the firmware never touches the host's QPs: the host library
//! asks [`RdmaCm::init_qp_attr`] for the attributes of each transition (from
//! the REQ/REP the CM exchanged, `rdma_init_qp_attr`) and modifies its QP
//! itself. An id's events wait in its context's queue until the host takes
//! them. Ids belong to ring contexts: a context that dies has its ids
//! destroyed, which sends the peer a REJ or a DREQ as the state asks.
//!
//! Time-dependent work (address resolution against the neighbour table, the
//! IB CM's retries and timewait) happens in [`RdmaCm::poll`], once a pass.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;
use core::net::{IpAddr, SocketAddr};

use verbs_ring::cmd::{self, qp_attr_mask as mask, qp_state};

use super::cma_ib;
use super::ib_cm::{self, CmEvent, ConnId, IbCm, ListenId, MadAddr, Output};
use super::route::{self, Route, RouteError};
use crate::core::gid::Gid;
use crate::core::{NetdevProvider, RdmaCore};
use crate::mad;
use crate::rxe::time::{Duration, Instant};
use crate::uverbs::MacResolution;
use crate::wire::MacAddr;
use crate::wire::cma_hdr::{self, PortSpace};
use crate::wire::mad::{Method, MgmtClass};

pub use verbs_ring::cm::{cm_event as event, port_space};

/// The Q_Key rdma_cm gives UD ids of the UDP port space (`RDMA_UDP_QKEY`).
pub const UDP_QKEY: u32 = 0x0123_4567;
/// rdma_cm's CM response timeout exponent (`CMA_CM_RESPONSE_TIMEOUT`: 4.096 us
/// << 20, about 4.3 s) and its retries (`CMA_MAX_CM_RETRIES`).
pub const CM_RESPONSE_TIMEOUT: u8 = 20;
pub const MAX_CM_RETRIES: u8 = 15;
/// The packet lifetime rdma_cm puts in RoCE paths (`CMA_IBOE_PACKET_LIFETIME`).
pub const IBOE_PACKET_LIFETIME: u8 = 16;
use verbs_ring::cm::{
    REJ_PRIVATE_DATA as REJ_PRIVATE, REP_PRIVATE_DATA as REP_PRIVATE, REQ_PRIVATE_DATA as REQ_PRIVATE,
    SIDR_REP_PRIVATE_DATA as SIDR_REP_PRIVATE, SIDR_REQ_PRIVATE_DATA as SIDR_REQ_PRIVATE,
};
/// The RNR NAK timer the CM's RTR attributes carry: `cm_init_qp_rtr_attr`'s
/// 0, which IBA table 45 reads as 655.36 ms.
const MIN_RNR_TIMER: u8 = 0;

/// Events waiting per context: more than a host could want unread; past it
/// the oldest go, counted.
const MAX_EVENTS: usize = 1024;
/// Requests a listener holds before the host answers them: at most Linux's
/// default `somaxconn`, 128 when the host asks for 0.
const MAX_BACKLOG: u32 = 4096;
const DEFAULT_BACKLOG: u32 = 128;
/// Ephemeral ports, as Linux's default `ip_local_port_range`.
const EPHEMERAL: core::ops::RangeInclusive<u16> = 32768..=60999;

const ETIMEDOUT: i32 = -110;
const EHOSTUNREACH: i32 = -113;

/// An id's QP type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdQpType {
    Rc,
    Uc,
    Ud,
}

impl IdQpType {
    /// From `enum ibv_qp_type` (2 RC, 3 UC, 4 UD).
    pub fn from_ibv(v: u8) -> Option<IdQpType> {
        match v {
            2 => Some(IdQpType::Rc),
            3 => Some(IdQpType::Uc),
            4 => Some(IdQpType::Ud),
            _ => None,
        }
    }
}

/// Why a command on an id failed (the ring maps these to statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmaError {
    /// No such id (or not this context's).
    NoId,
    /// The id's state does not allow the call (`EINVAL`, as Linux).
    State,
    /// A bad argument: port space, family, private data too long.
    Invalid,
    /// The address or port is taken (`EADDRINUSE`).
    InUse,
    /// The address is not one of ours (`EADDRNOTAVAIL`).
    NotLocal,
    /// No device (`ENODEV`).
    NoDevice,
    /// The IB CM refused (table full, ...): `ENOMEM`.
    Cm,
}

/// `struct rdma_conn_param` (and the UD parameters of `rdma_ud_param`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnParam {
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
    pub qkey: u32,
    pub private_data: Vec<u8>,
}

/// One event for a host context (`struct rdma_ucm_event_resp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmaEvent {
    /// The id the event is about; for CONNECT_REQUEST the new id.
    pub id: u32,
    /// For CONNECT_REQUEST, the listening id (the new id is the host's to adopt).
    pub listen_id: Option<u32>,
    pub event: u32,
    pub status: i32,
    pub param: ConnParam,
    /// UD: where the peer is (CONNECT_REQUEST, ESTABLISHED).
    pub ah: Option<cmd::AhAttr>,
}

/// The state of an id (`enum rdma_cm_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Idle,
    AddrQuery,
    AddrResolved,
    RouteResolved,
    AddrBound,
    Listen,
    /// Active: REQ or SIDR REQ out. Passive: a REQ came, not yet accepted.
    Connect,
    /// Active: the REP came, the host is moving its QP. Passive: REP out.
    Accepting,
    Established,
    Disconnect,
}

impl State {
    /// Whether the id has its route (resolved, or taken from a REQ).
    pub fn has_route(self) -> bool {
        !matches!(self, State::Idle | State::AddrQuery | State::AddrResolved | State::AddrBound | State::Listen)
    }
}

/// `rdma_resolve_addr`'s arguments: an optional source, the destination
/// (with the IPv6 scope of a link-local one, 0 for any) and the time allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrRequest {
    pub src: Option<SocketAddr>,
    pub dst: SocketAddr,
    pub scope_id: u32,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
struct AddrQuery {
    deadline: Instant,
}

#[derive(Debug, Clone)]
struct Id {
    ctx: u32,
    ps: u16,
    qp_type: IdQpType,
    state: State,
    src: Option<SocketAddr>,
    dst: Option<SocketAddr>,
    route: Option<Route>,
    query: Option<AddrQuery>,
    /// The IB CM connection (or SIDR exchange) on `route.dev`.
    conn: Option<ConnId>,
    listens: Vec<(u32, ListenId)>,
    /// Children not yet accepted or rejected, and the bound on them.
    backlog: u32,
    pending: u32,
    parent: Option<u32>,
    /// Which port this id holds in its port space.
    port_held: Option<u16>,
    events_reported: u32,
    /// DISCONNECTED was reported (once per connection, as Linux).
    disconnected: bool,
    /// The PSN this id's QP receives from first (`id_priv->seq_num`, random):
    /// its REQ's or REP's starting PSN, and its RTR `rq_psn`.
    seq_num: u32,
    /// The QPN the program connected or accepted with (`id_priv->qp_num`;
    /// 0 before), which `rdma resource show cm_id` lists.
    qp_num: u32,
}

/// One device's GSI agents (the MAD dispatcher, the IB CM its one agent)
/// and where its peers are.
struct DevCm {
    mad: mad::Dispatcher,
    cm_agent: Option<mad::AgentId>,
    ib: IbCm,
    /// For each peer GID, the GID index we reach it from and its MAC: learned
    /// from the MADs it sends and from the routes of our connects, so replies
    /// need no neighbour lookup.
    peers: BTreeMap<Gid, (u8, MacAddr)>,
    /// MADs to send: the pump hands them to the device's QP1.
    out: VecDeque<OutMad>,
}

/// Peers a device remembers; past it, the lowest GID is forgotten first (a
/// peer flooding QP1 from many source addresses cannot grow the table), and
/// a forgotten peer is learnt again from its next MAD.
const MAX_PEERS: usize = 1024;

impl DevCm {
    fn learn(&mut self, gid: Gid, sgid_index: u8, mac: MacAddr) {
        if self.peers.len() >= MAX_PEERS && !self.peers.contains_key(&gid) {
            self.peers.pop_first();
        }
        self.peers.insert(gid, (sgid_index, mac));
    }
}

/// A MAD for a device's QP1 to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutMad {
    pub ah: crate::rxe::ah::AhAttr,
    pub dest_qpn: u32,
    pub mad: Vec<u8>,
}

/// Counters `rdma statistic`-style tools and tests read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmaStats {
    /// MADs with nowhere to go: no peer entry for their destination GID.
    pub unaddressed: u64,
    /// Events dropped because a context's queue was full.
    pub events_dropped: u64,
    pub ids: u64,
}

/// The appliance's rdma_cm: every id, every device's IB CM.
#[derive(Default)]
pub struct RdmaCm {
    ids: BTreeMap<u32, Id>,
    next_id: u32,
    devs: BTreeMap<u32, DevCm>,
    /// IB CM connection → id, per device.
    by_conn: BTreeMap<(u32, u32), u32>,
    /// IB CM listen → id, per device.
    by_listen: BTreeMap<(u32, u32), u32>,
    events: BTreeMap<u32, VecDeque<CmaEvent>>,
    ports: BTreeSet<(u16, u16)>,
    rng: u32,
    pub stats: CmaStats,
}

impl RdmaCm {
    pub fn new(seed: u32) -> RdmaCm {
        RdmaCm { rng: seed | 1, next_id: 1, ..RdmaCm::default() }
    }

    fn random(&mut self) -> u32 {
        // xorshift32: PSNs and ports need spread, not secrecy.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }

    // ---- devices (the CM's client callbacks) ----

    /// A device appeared: it gets an IB CM, and wildcard listeners listen on it.
    pub fn add_device(&mut self, dev: u32, ca_guid: u64) {
        let seed = self.random();
        let mut d = mad::Dispatcher::new();
        // The CM class (version 2) takes Send, the only method CM MADs use.
        let cm_agent = d.register(MgmtClass::Cm, 2, mad::MethodSet::EMPTY.with(Method::Send)).ok();
        let mut ib = IbCm::new(ca_guid, seed);
        if let Some(a) = cm_agent {
            ib.set_tid_high(a.0);
        }
        self.devs.insert(dev, DevCm { mad: d, cm_agent, ib, peers: BTreeMap::new(), out: VecDeque::new() });
        let wild: Vec<u32> = self
            .ids
            .iter()
            .filter(|(_, id)| id.state == State::Listen && id.src.is_some_and(|s| s.ip().is_unspecified()))
            .map(|(&n, _)| n)
            .collect();
        for n in wild {
            self.listen_on(n, dev);
        }
    }

    /// A device went away: its ids get DEVICE_REMOVAL, their connections are gone.
    pub fn remove_device(&mut self, dev: u32) {
        self.devs.remove(&dev);
        self.by_conn.retain(|(d, _), _| *d != dev);
        self.by_listen.retain(|(d, _), _| *d != dev);
        let hit: Vec<u32> =
            self.ids.iter().filter(|(_, id)| id.route.is_some_and(|r| r.dev == dev)).map(|(&n, _)| n).collect();
        for n in hit {
            if let Some(id) = self.ids.get_mut(&n) {
                id.conn = None;
                id.listens.retain(|(d, _)| *d != dev);
            }
            self.post(n, event::DEVICE_REMOVAL, 0, ConnParam::default(), None);
        }
        for id in self.ids.values_mut() {
            id.listens.retain(|(d, _)| *d != dev);
        }
    }

    // ---- ids ----

    /// `rdma_create_id` in context `ctx` (the ring names the id to the host
    /// and keeps its `uid`).
    pub fn create_id(&mut self, ctx: u32, ps: u16, qp_type: IdQpType) -> Result<u32, CmaError> {
        let ok = match ps {
            port_space::TCP | port_space::IB => qp_type != IdQpType::Ud,
            port_space::UDP => qp_type == IdQpType::Ud,
            _ => false,
        };
        if !ok {
            return Err(CmaError::Invalid);
        }
        let n = self.alloc_id();
        let mut id = Id::new(ctx, ps, qp_type);
        id.seq_num = self.random() & 0xFF_FFFF;
        self.ids.insert(n, id);
        self.stats.ids += 1;
        Ok(n)
    }

    fn alloc_id(&mut self) -> u32 {
        loop {
            let n = self.next_id;
            self.next_id = self.next_id.wrapping_add(1).max(1);
            if !self.ids.contains_key(&n) {
                return n;
            }
        }
    }

    /// The context that owns id `n`.
    pub fn owner(&self, n: u32) -> Option<u32> {
        self.ids.get(&n).map(|id| id.ctx)
    }

    pub fn state(&self, n: u32) -> Option<State> {
        self.ids.get(&n).map(|id| id.state)
    }

    /// `rdma_destroy_id`: the peer is told (REJ, DREQ) as the state asks, the
    /// port is freed, and the id's unread events go. Returns the events reported.
    pub fn destroy_id(&mut self, now: Instant, n: u32) -> Result<u32, CmaError> {
        let id = self.ids.remove(&n).ok_or(CmaError::NoId)?;
        let dev = id.route.map(|r| r.dev);
        if let (Some(dev), Some(conn)) = (dev, id.conn) {
            if let Some(d) = self.devs.get_mut(&dev) {
                d.ib.destroy(now, conn);
            }
            self.by_conn.remove(&(dev, conn.0));
        }
        for (dev, l) in &id.listens {
            if let Some(d) = self.devs.get_mut(dev) {
                d.ib.cancel_listen(*l);
            }
            self.by_listen.remove(&(*dev, l.0));
        }
        if let Some(p) = id.port_held {
            self.ports.remove(&(id.ps, p));
        }
        if let Some(parent) = id.parent.and_then(|p| self.ids.get_mut(&p))
            && id.state == State::Connect
        {
            parent.pending = parent.pending.saturating_sub(1);
        }
        if let Some(q) = self.events.get_mut(&id.ctx) {
            q.retain(|e| e.id != n);
        }
        self.pump_all(now);
        Ok(id.events_reported)
    }

    /// Every id of context `ctx` (what a dead context leaves behind).
    pub fn ids_of(&self, ctx: u32) -> Vec<u32> {
        self.ids.iter().filter(|(_, id)| id.ctx == ctx).map(|(&n, _)| n).collect()
    }

    /// `rdma_bind_addr`: a local address (or the wildcard) and a port (0: any).
    pub fn bind(&mut self, core: &RdmaCore, n: u32, addr: SocketAddr) -> Result<(), CmaError> {
        let id = self.ids.get(&n).ok_or(CmaError::NoId)?;
        if id.state != State::Idle {
            return Err(CmaError::State);
        }
        let ps = id.ps;
        if !addr.ip().is_unspecified() && route::local(core, &addr.ip()).is_none() {
            return Err(CmaError::NotLocal);
        }
        let port = self.take_port(ps, addr.port())?;
        let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
        id.src = Some(SocketAddr::new(addr.ip(), port));
        id.port_held = Some(port);
        id.state = State::AddrBound;
        Ok(())
    }

    fn take_port(&mut self, ps: u16, port: u16) -> Result<u16, CmaError> {
        if port != 0 {
            return if self.ports.insert((ps, port)) { Ok(port) } else { Err(CmaError::InUse) };
        }
        let span = u32::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
        let start = self.random() % span;
        for i in 0..span {
            let p = *EPHEMERAL.start() + ((start + i) % span) as u16;
            if self.ports.insert((ps, p)) {
                return Ok(p);
            }
        }
        Err(CmaError::InUse)
    }

    /// `rdma_resolve_addr`: picks the route now and waits (in [`Self::poll`])
    /// for the neighbour table to know the next hop's MAC, at most `timeout`.
    pub fn resolve_addr(
        &mut self,
        core: &RdmaCore,
        netdevs: &dyn NetdevProvider,
        now: Instant,
        n: u32,
        q: &AddrRequest,
    ) -> Result<(), CmaError> {
        let AddrRequest { src, dst, scope_id, timeout } = *q;
        let id = self.ids.get(&n).ok_or(CmaError::NoId)?;
        if !matches!(id.state, State::Idle | State::AddrBound) {
            return Err(CmaError::State);
        }
        if dst.ip().is_unspecified() {
            return Err(CmaError::Invalid);
        }
        let bound = id.src.filter(|s| !s.ip().is_unspecified()).map(|s| s.ip()).or(src.map(|s| s.ip()));
        if id.port_held.is_none() {
            let ps = id.ps;
            let port = self.take_port(ps, src.map_or(0, |s| s.port()))?;
            let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
            id.port_held = Some(port);
        }
        let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
        id.dst = Some(dst);
        id.state = State::AddrQuery;
        match route::resolve(core, netdevs, bound.as_ref(), &dst.ip(), scope_id) {
            Ok(r) => {
                id.src = Some(SocketAddr::new(r.src, id.port_held.unwrap_or(0)));
                id.route = Some(r);
                id.query = Some(AddrQuery { deadline: now + timeout });
            }
            Err(e) => {
                id.state = State::Idle;
                self.post(n, event::ADDR_ERROR, route_errno(e), ConnParam::default(), None);
            }
        }
        Ok(())
    }

    /// `rdma_resolve_route`: for RoCE the path follows from the addresses, so
    /// ROUTE_RESOLVED is queued at once.
    pub fn resolve_route(&mut self, n: u32) -> Result<(), CmaError> {
        let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
        if id.state != State::AddrResolved {
            return Err(CmaError::State);
        }
        id.state = State::RouteResolved;
        self.post(n, event::ROUTE_RESOLVED, 0, ConnParam::default(), None);
        Ok(())
    }

    /// What `rdma resource show cm_id` lists of id `n` besides its state
    /// and addresses: its port space, and the device it is on (its route's,
    /// or the one device a bound listener listens on; `None` for an id on
    /// no device or on all of them, a wildcard listener).
    pub fn listing(&self, n: u32) -> Option<(u16, Option<u32>)> {
        let id = self.ids.get(&n)?;
        let dev = id.route.as_ref().map(|r| r.dev).or(match id.listens.as_slice() {
            [(dev, _)] if id.src.is_some_and(|a| !a.ip().is_unspecified()) => Some(*dev),
            _ => None,
        });
        Some((id.ps, dev))
    }

    /// The QP the id connected or accepted with, and the id's QP type, once
    /// it has one.
    pub fn qp_of(&self, n: u32) -> Option<(u32, IdQpType)> {
        self.ids.get(&n).filter(|id| id.qp_num != 0).map(|id| (id.qp_num, id.qp_type))
    }

    /// The id's route and addresses (`rdma_ucm_query_route`).
    pub fn route(&self, n: u32) -> Option<(Option<SocketAddr>, Option<SocketAddr>, Option<Route>)> {
        self.ids.get(&n).map(|id| (id.src, id.dst, id.route))
    }

    /// `rdma_listen`: on the bound address's device, or on every device for
    /// the wildcard (and on devices added later).
    pub fn listen(&mut self, core: &RdmaCore, n: u32, backlog: u32) -> Result<(), CmaError> {
        // Linux bounds it by `somaxconn`; 0 asks for the default.
        let backlog = if backlog == 0 { DEFAULT_BACKLOG } else { backlog.min(MAX_BACKLOG) };
        let id = self.ids.get(&n).ok_or(CmaError::NoId)?;
        match id.state {
            State::Listen => {
                let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
                id.backlog = backlog;
                return Ok(());
            }
            State::AddrBound => {}
            _ => return Err(CmaError::State),
        }
        let src = id.src.ok_or(CmaError::State)?;
        let devs: Vec<u32> = if src.ip().is_unspecified() {
            self.devs.keys().copied().collect()
        } else {
            let (dev, _) = route::local(core, &src.ip()).ok_or(CmaError::NotLocal)?;
            alloc::vec![dev]
        };
        let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
        id.state = State::Listen;
        id.backlog = backlog;
        for dev in devs {
            self.listen_on(n, dev);
        }
        Ok(())
    }

    fn listen_on(&mut self, n: u32, dev: u32) {
        let Some(id) = self.ids.get(&n) else { return };
        let Some(port) = id.src.map(|s| s.port()) else { return };
        let service_id = cma_hdr::service_id(PortSpace::from_raw(id.ps), port);
        let Some(d) = self.devs.get_mut(&dev) else { return };
        if let Ok(l) = d.ib.listen(service_id, u64::MAX) {
            self.by_listen.insert((dev, l.0), n);
            if let Some(id) = self.ids.get_mut(&n) {
                id.listens.push((dev, l));
            }
        }
    }

    /// `rdma_connect`: a REQ (RC/UC) or a SIDR REQ (UD) to the resolved peer.
    pub fn connect(&mut self, now: Instant, n: u32, p: &ConnParam) -> Result<(), CmaError> {
        let id = self.ids.get(&n).ok_or(CmaError::NoId)?;
        let psn = id.seq_num;
        if id.state != State::RouteResolved {
            return Err(CmaError::State);
        }
        let (Some(r), Some(src), Some(dst)) = (id.route, id.src, id.dst) else { return Err(CmaError::State) };
        let limit = if id.qp_type == IdQpType::Ud { SIDR_REQ_PRIVATE } else { REQ_PRIVATE };
        if p.private_data.len() > limit {
            return Err(CmaError::Invalid);
        }
        let private = with_cma_hdr(src, dst, &p.private_data).ok_or(CmaError::Invalid)?;
        let service_id = cma_hdr::service_id(PortSpace::from_raw(id.ps), dst.port());
        let qp_type = id.qp_type;
        let d = self.devs.get_mut(&r.dev).ok_or(CmaError::NoDevice)?;
        let to = MadAddr { gid: r.dgid, qpn: 1, hop_limit: r.hop_limit, ..MadAddr::default() };
        let conn = if qp_type == IdQpType::Ud {
            d.ib.send_sidr_req(now, to, &cma_ib::sidr_req(service_id, &private)).map_err(|_| CmaError::Cm)?
        } else {
            d.ib.send_req(now, to, &cma_ib::req(service_id, qp_type, p, psn, &r, &private)).map_err(|_| CmaError::Cm)?
        };
        self.by_conn.insert((r.dev, conn.0), n);
        let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
        id.conn = Some(conn);
        id.state = State::Connect;
        id.qp_num = p.qp_num;
        self.pump_all(now);
        Ok(())
    }

    /// `rdma_accept`: passive, the REP (or SIDR REP) for the REQ; active, after
    /// CONNECT_RESPONSE moved the QP to RTS, the RTU.
    pub fn accept(&mut self, now: Instant, n: u32, p: &ConnParam) -> Result<(), CmaError> {
        let id = self.ids.get(&n).ok_or(CmaError::NoId)?;
        let psn = id.seq_num;
        let (Some(r), Some(conn)) = (id.route, id.conn) else { return Err(CmaError::State) };
        let (state, qp_type, parent) = (id.state, id.qp_type, id.parent);
        let d = self.devs.get_mut(&r.dev).ok_or(CmaError::NoDevice)?;
        match (state, parent.is_some()) {
            (State::Connect, true) if qp_type == IdQpType::Ud => {
                if p.private_data.len() > SIDR_REP_PRIVATE {
                    return Err(CmaError::Invalid);
                }
                let qkey = if p.qkey != 0 { p.qkey } else { UDP_QKEY };
                d.ib.send_sidr_rep(now, conn, &cma_ib::sidr_rep_ok(p.qp_num, qkey, &p.private_data))
                    .map_err(|_| CmaError::Cm)?;
                self.child_settled(n);
                let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
                id.state = State::Established;
                id.qp_num = p.qp_num;
            }
            (State::Connect, true) => {
                if p.private_data.len() > REP_PRIVATE {
                    return Err(CmaError::Invalid);
                }
                d.ib.send_rep(now, conn, &cma_ib::rep(p, psn, &p.private_data)).map_err(|_| CmaError::Cm)?;
                self.child_settled(n);
                let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
                id.state = State::Accepting;
                id.qp_num = p.qp_num;
            }
            (State::Accepting, false) => {
                d.ib.send_rtu(now, conn, &p.private_data).map_err(|_| CmaError::Cm)?;
                let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
                id.state = State::Established;
            }
            _ => return Err(CmaError::State),
        }
        self.pump_all(now);
        Ok(())
    }

    /// A child was accepted or rejected: it no longer counts against the backlog.
    fn child_settled(&mut self, n: u32) {
        if let Some(parent) = self.ids.get(&n).and_then(|id| id.parent)
            && let Some(l) = self.ids.get_mut(&parent)
        {
            l.pending = l.pending.saturating_sub(1);
        }
    }

    /// `rdma_reject`: a REJ (consumer-defined) or a SIDR REP with status REJECT.
    pub fn reject(&mut self, now: Instant, n: u32, private: &[u8]) -> Result<(), CmaError> {
        let id = self.ids.get(&n).ok_or(CmaError::NoId)?;
        let (Some(r), Some(conn)) = (id.route, id.conn) else { return Err(CmaError::State) };
        if id.state != State::Connect || id.parent.is_none() {
            return Err(CmaError::State);
        }
        let ud = id.qp_type == IdQpType::Ud;
        let d = self.devs.get_mut(&r.dev).ok_or(CmaError::NoDevice)?;
        if ud {
            d.ib.send_sidr_rep(now, conn, &cma_ib::sidr_rep_reject(private)).map_err(|_| CmaError::Cm)?;
        } else {
            if private.len() > REJ_PRIVATE {
                return Err(CmaError::Invalid);
            }
            d.ib.send_rej(now, conn, cma_ib::consumer_reject(), &[], private).map_err(|_| CmaError::Cm)?;
        }
        self.child_settled(n);
        let id = self.ids.get_mut(&n).ok_or(CmaError::NoId)?;
        id.state = State::Idle;
        id.conn = None;
        self.by_conn.remove(&(r.dev, conn.0));
        self.pump_all(now);
        Ok(())
    }

    /// `rdma_disconnect`: a DREQ, or the DREP to the peer's DREQ.
    pub fn disconnect(&mut self, now: Instant, n: u32) -> Result<(), CmaError> {
        let id = self.ids.get(&n).ok_or(CmaError::NoId)?;
        let (Some(r), Some(conn)) = (id.route, id.conn) else { return Err(CmaError::State) };
        let d = self.devs.get_mut(&r.dev).ok_or(CmaError::NoDevice)?;
        match d.ib.state(conn) {
            Some(ib_cm::CmState::DreqRcvd) => d.ib.send_drep(now, conn, &[]).map_err(|_| CmaError::Cm)?,
            Some(ib_cm::CmState::Established) => d.ib.send_dreq(now, conn, &[]).map_err(|_| CmaError::Cm)?,
            Some(ib_cm::CmState::RepRcvd | ib_cm::CmState::MraRepRcvd) => {
                d.ib.send_rej(now, conn, cma_ib::consumer_reject(), &[], &[]).map_err(|_| CmaError::Cm)?
            }
            // Already disconnecting or gone: nothing to send, as Linux.
            _ => {}
        }
        if let Some(id) = self.ids.get_mut(&n)
            && id.state == State::Established
        {
            id.state = State::Disconnect;
        }
        self.pump_all(now);
        Ok(())
    }

    /// `rdma_init_qp_attr`: the attributes (and their mask) of `state` for the
    /// id's QP, from the REQ/REP its IB CM exchanged (`cm_init_qp_*_attr`).
    pub fn init_qp_attr(&self, n: u32, state: u32) -> Result<(u32, cmd::QpAttr), CmaError> {
        let id = self.ids.get(&n).ok_or(CmaError::NoId)?;
        let mut a = cmd::QpAttr { qp_state: state, ..cmd::QpAttr::default() };
        if id.qp_type == IdQpType::Ud {
            return match state {
                qp_state::INIT => {
                    a.port_num = 1;
                    a.qkey = UDP_QKEY;
                    Ok((mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::QKEY, a))
                }
                qp_state::RTR => Ok((mask::STATE, a)),
                qp_state::RTS => Ok((mask::STATE | mask::SQ_PSN, a)),
                _ => Err(CmaError::Invalid),
            };
        }
        let info = match (id.route, id.conn) {
            (Some(r), Some(conn)) => self.devs.get(&r.dev).and_then(|d| d.ib.conn_info(conn)),
            _ => None,
        };
        let rc = id.qp_type == IdQpType::Rc;
        match state {
            qp_state::INIT => {
                // Before a connection (rdma_create_qp) no remote access; after,
                // cm_init_qp_init_attr: WRITE, and READ/atomics when the
                // connection grants responder resources.
                a.port_num = 1;
                if let Some(i) = info {
                    a.pkey_index = i.pkey_index;
                    a.qp_access_flags = cmd::access::REMOTE_WRITE;
                    if i.responder_resources > 0 {
                        a.qp_access_flags |= cmd::access::REMOTE_READ | cmd::access::REMOTE_ATOMIC;
                    }
                }
                Ok((mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::ACCESS_FLAGS, a))
            }
            qp_state::RTR => {
                let i = info.ok_or(CmaError::State)?;
                let r = id.route.ok_or(CmaError::State)?;
                a.ah_attr = cmd::AhAttr {
                    dgid: i.dgid.0,
                    flow_label: i.flow_label,
                    sgid_index: r.sgid_index,
                    hop_limit: i.hop_limit,
                    traffic_class: i.traffic_class,
                    is_global: 1,
                    sl: i.sl,
                    port_num: 1,
                    ..cmd::AhAttr::default()
                };
                a.path_mtu = u32::from(i.path_mtu);
                a.dest_qp_num = i.remote_qpn;
                // rdma_init_qp_attr: the id's own sequence number, which its
                // REQ or REP announced (the REP may not have gone yet).
                a.rq_psn = id.seq_num;
                let mut m = mask::STATE | mask::AV | mask::PATH_MTU | mask::DEST_QPN | mask::RQ_PSN;
                if rc {
                    a.max_dest_rd_atomic = i.responder_resources;
                    a.min_rnr_timer = MIN_RNR_TIMER;
                    m |= mask::MAX_DEST_RD_ATOMIC | mask::MIN_RNR_TIMER;
                }
                Ok((m, a))
            }
            qp_state::RTS => {
                let i = info.ok_or(CmaError::State)?;
                a.sq_psn = i.sq_psn;
                let mut m = mask::STATE | mask::SQ_PSN;
                if rc {
                    a.timeout = i.local_ack_timeout;
                    a.retry_cnt = i.retry_count;
                    a.rnr_retry = i.rnr_retry_count;
                    a.max_rd_atomic = i.initiator_depth;
                    m |= mask::TIMEOUT | mask::RETRY_CNT | mask::RNR_RETRY | mask::MAX_QP_RD_ATOMIC;
                }
                Ok((m, a))
            }
            _ => Err(CmaError::Invalid),
        }
    }

    /// The next event of context `ctx`.
    pub fn get_event(&mut self, ctx: u32) -> Option<CmaEvent> {
        let ev = self.events.get_mut(&ctx)?.pop_front()?;
        if let Some(id) = self.ids.get_mut(&ev.id) {
            id.events_reported += 1;
        }
        Some(ev)
    }

    fn post(&mut self, n: u32, ev: u32, status: i32, param: ConnParam, ah: Option<cmd::AhAttr>) {
        self.post_ev(n, None, ev, status, param, ah);
    }

    fn post_ev(
        &mut self,
        n: u32,
        listen_id: Option<u32>,
        ev: u32,
        status: i32,
        param: ConnParam,
        ah: Option<cmd::AhAttr>,
    ) {
        let Some(id) = self.ids.get(&n) else { return };
        let q = self.events.entry(id.ctx).or_default();
        if q.len() >= MAX_EVENTS {
            q.pop_front();
            self.stats.events_dropped += 1;
        }
        q.push_back(CmaEvent { id: n, listen_id, event: ev, status, param, ah });
    }

    // ---- the pass ----

    /// Address resolutions waiting on the neighbour table: `resolve` is asked
    /// once per pass per waiting id (it starts the ARP/ND request itself).
    pub fn poll(&mut self, now: Instant, resolve: &mut dyn FnMut(u32, IpAddr) -> MacResolution) {
        let waiting: Vec<u32> =
            self.ids.iter().filter(|(_, id)| id.state == State::AddrQuery).map(|(&n, _)| n).collect();
        for n in waiting {
            let Some(id) = self.ids.get_mut(&n) else { continue };
            let (Some(r), Some(q)) = (id.route.as_mut(), id.query.as_ref()) else { continue };
            match resolve(r.dev, r.next_hop) {
                MacResolution::Known(mac) => {
                    let dev = r.dev;
                    let (dgid, sgid_index) = (r.dgid, r.sgid_index);
                    id.state = State::AddrResolved;
                    id.query = None;
                    if let Some(d) = self.devs.get_mut(&dev) {
                        d.learn(dgid, sgid_index, mac);
                    }
                    self.post(n, event::ADDR_RESOLVED, 0, ConnParam::default(), None);
                }
                MacResolution::Failed => {
                    id.state = State::Idle;
                    id.query = None;
                    self.post(n, event::ADDR_ERROR, EHOSTUNREACH, ConnParam::default(), None);
                }
                MacResolution::Pending if now >= q.deadline => {
                    id.state = State::Idle;
                    id.query = None;
                    self.post(n, event::ADDR_ERROR, ETIMEDOUT, ConnParam::default(), None);
                }
                MacResolution::Pending => {}
            }
        }
        let devs: Vec<u32> = self.devs.keys().copied().collect();
        for dev in devs {
            if let Some(d) = self.devs.get_mut(&dev) {
                d.ib.poll(now);
            }
            self.drain(now, dev);
        }
    }

    /// A MAD that arrived on device `dev`'s QP1.
    pub fn receive(&mut self, now: Instant, dev: u32, mad: &crate::rxe::mad_port::ReceivedMad, sgid_index: u8) {
        let Some(d) = self.devs.get_mut(&dev) else { return };
        d.learn(mad.src_gid, sgid_index, mad.src_mac);
        let from = MadAddr {
            gid: mad.src_gid,
            qpn: mad.src_qpn,
            pkey_index: 0,
            traffic_class: mad.traffic_class,
            hop_limit: mad.hop_limit,
            flow_label: mad.flow_label,
        };
        match d.mad.receive(1, &mad.data) {
            mad::Dispatch::Agent(a) if Some(a) == d.cm_agent => d.ib.receive(now, &from, &mad.data),
            mad::Dispatch::Reply(reply) => d.out.push_back(OutMad {
                ah: crate::rxe::ah::AhAttr {
                    dgid: mad.src_gid,
                    sgid_index,
                    hop_limit: mad.hop_limit,
                    traffic_class: mad.traffic_class,
                    flow_label: mad.flow_label,
                    dmac: mad.src_mac,
                    ..crate::rxe::ah::AhAttr::default()
                },
                dest_qpn: mad.src_qpn,
                mad: reply.to_vec(),
            }),
            // Dropped and counted by the dispatcher.
            _ => {}
        }
        self.drain(now, dev);
    }

    /// The MADs device `dev`'s QP1 should send now.
    pub fn take_mads(&mut self, dev: u32) -> Vec<OutMad> {
        self.devs.get_mut(&dev).map(|d| d.out.drain(..).collect()).unwrap_or_default()
    }

    /// Device `dev`'s MAD dispatcher counters.
    pub fn mad_counters(&self, dev: u32) -> Option<&mad::MadCounters> {
        self.devs.get(&dev).map(|d| d.mad.counters())
    }

    /// Devices with an IB CM.
    pub fn devices(&self) -> impl Iterator<Item = u32> + '_ {
        self.devs.keys().copied()
    }

    fn pump_all(&mut self, now: Instant) {
        let devs: Vec<u32> = self.devs.keys().copied().collect();
        for dev in devs {
            self.drain(now, dev);
        }
    }

    /// Takes the IB CM's output: MADs to the send queue, events to the ids.
    fn drain(&mut self, now: Instant, dev: u32) {
        loop {
            let Some(d) = self.devs.get_mut(&dev) else { return };
            let Some(out) = d.ib.take_output() else { return };
            match out {
                Output::Send { to, mad } => match d.peers.get(&to.gid) {
                    Some(&(sgid_index, dmac)) if dmac != MacAddr::default() => d.out.push_back(OutMad {
                        ah: crate::rxe::ah::AhAttr {
                            dgid: to.gid,
                            sgid_index,
                            hop_limit: to.hop_limit,
                            traffic_class: to.traffic_class,
                            flow_label: to.flow_label,
                            dmac,
                            ..crate::rxe::ah::AhAttr::default()
                        },
                        dest_qpn: to.qpn,
                        mad: mad.to_vec(),
                    }),
                    _ => self.stats.unaddressed += 1,
                },
                Output::Event { conn, event } => self.on_cm_event(now, dev, conn, event),
            }
        }
    }

    fn on_cm_event(&mut self, now: Instant, dev: u32, conn: ConnId, ev: CmEvent) {
        match ev {
            CmEvent::ReqReceived { listen, req } => {
                self.on_req(now, dev, conn, listen, cma_ib::Incoming::from_req(&req))
            }
            CmEvent::SidrReqReceived { listen, req } => {
                self.on_req(now, dev, conn, listen, cma_ib::Incoming::from_sidr_req(&req))
            }
            _ => {
                let Some(&n) = self.by_conn.get(&(dev, conn.0)) else { return };
                self.on_conn_event(dev, conn, n, ev);
            }
        }
    }

    /// A REQ or SIDR REQ for one of our listeners: a new id in the listener's
    /// context, announced with CONNECT_REQUEST, or a REJ when the cma header
    /// does not match or the backlog is full.
    fn on_req(&mut self, now: Instant, dev: u32, conn: ConnId, listen: ListenId, inc: cma_ib::Incoming) {
        let Some(&ln) = self.by_listen.get(&(dev, listen.0)) else { return };
        let Some(l) = self.ids.get(&ln) else { return };
        let listen_port = l.src.map_or(0, |s| s.port());
        let hdr = parse_cma_hdr(&inc.private, listen_port);
        let bound = l.src.map(|s| s.ip()).filter(|a| !a.is_unspecified());
        let ok = match &hdr {
            Some((_, dst)) => bound.is_none_or(|b| b == dst.ip()),
            None => false,
        };
        let full = l.pending >= l.backlog;
        let (ctx, ps, qp_type) = (l.ctx, l.ps, l.qp_type);
        let Some(d) = self.devs.get_mut(&dev) else { return };
        let (Some((peer, local)), true, false) = (hdr, ok, full) else {
            if inc.sidr {
                let _ = d.ib.send_sidr_rep(now, conn, &cma_ib::sidr_rep_reject(&[]));
            } else {
                let _ = d.ib.send_rej(now, conn, cma_ib::consumer_reject(), &[], &[]);
            }
            self.drain(now, dev);
            return;
        };
        let sgid_index = d.peers.get(&inc.peer_gid).map_or(0, |p| p.0);
        let n = self.alloc_id();
        let mut id = Id::new(ctx, ps, qp_type);
        id.seq_num = self.random() & 0xFF_FFFF;
        id.state = State::Connect;
        id.parent = Some(ln);
        id.src = Some(local);
        id.dst = Some(peer);
        id.conn = Some(conn);
        id.route = Some(Route {
            dev,
            ifindex: 0,
            src: local.ip(),
            sgid: route::gid_of(&local.ip()),
            sgid_index,
            dst: peer.ip(),
            dgid: inc.peer_gid,
            next_hop: peer.ip(),
            mtu: inc.mtu,
            hop_limit: inc.hop_limit,
        });
        self.ids.insert(n, id);
        self.stats.ids += 1;
        self.by_conn.insert((dev, conn.0), n);
        if let Some(l) = self.ids.get_mut(&ln) {
            l.pending += 1;
        }
        let private = inc.private.get(cma_hdr::HEADER_LEN..).unwrap_or(&[]).to_vec();
        let param = ConnParam { private_data: private, ..inc.param };
        let ah = inc.sidr.then(|| self.ids.get(&n).and_then(|id| id.route).map(|r| ah_of(&r))).flatten();
        self.post_ev(n, Some(ln), event::CONNECT_REQUEST, 0, param, ah);
    }

    fn on_conn_event(&mut self, dev: u32, conn: ConnId, n: u32, ev: CmEvent) {
        let Some(id) = self.ids.get_mut(&n) else { return };
        match ev {
            CmEvent::RepReceived { rep } => {
                let param = cma_ib::from_rep(&rep);
                id.state = State::Accepting;
                self.post(n, event::CONNECT_RESPONSE, 0, param, None);
            }
            CmEvent::RtuReceived => {
                id.state = State::Established;
                self.post(n, event::ESTABLISHED, 0, ConnParam::default(), None);
            }
            CmEvent::MraReceived => {}
            CmEvent::RejReceived { reason, private, .. } => {
                id.state = State::Idle;
                id.conn = None;
                self.by_conn.remove(&(dev, conn.0));
                let param = ConnParam { private_data: private, ..ConnParam::default() };
                self.post(n, event::REJECTED, i32::from(reason), param, None);
            }
            CmEvent::ReqError | CmEvent::RepError | CmEvent::SidrReqError => {
                id.state = State::Idle;
                id.conn = None;
                self.by_conn.remove(&(dev, conn.0));
                self.post(n, event::UNREACHABLE, ETIMEDOUT, ConnParam::default(), None);
            }
            CmEvent::DreqReceived { .. } | CmEvent::DrepReceived | CmEvent::DreqError => {
                let status = if matches!(ev, CmEvent::DreqError) { ETIMEDOUT } else { 0 };
                // Reported once, as Linux's CONNECT → DISCONNECT exchange does.
                if matches!(id.state, State::Established | State::Disconnect | State::Accepting) && !id.disconnected {
                    id.state = State::Disconnect;
                    id.disconnected = true;
                    self.post(n, event::DISCONNECTED, status, ConnParam::default(), None);
                }
            }
            CmEvent::TimewaitExit => {
                id.conn = None;
                self.by_conn.remove(&(dev, conn.0));
                self.post(n, event::TIMEWAIT_EXIT, 0, ConnParam::default(), None);
            }
            CmEvent::SidrRepReceived { rep } => {
                id.conn = None;
                self.by_conn.remove(&(dev, conn.0));
                match cma_ib::from_sidr_rep(&rep) {
                    Ok((qpn, qkey, private)) => {
                        id.state = State::Established;
                        let ah = id.route.map(|r| ah_of(&r));
                        let param = ConnParam { qp_num: qpn, qkey, private_data: private, ..ConnParam::default() };
                        self.post(n, event::ESTABLISHED, 0, param, ah);
                    }
                    Err(status) => {
                        id.state = State::Idle;
                        self.post(n, event::UNREACHABLE, status, ConnParam::default(), None);
                    }
                }
            }
            CmEvent::ReqReceived { .. } | CmEvent::SidrReqReceived { .. } => {}
        }
    }
}

impl Id {
    fn new(ctx: u32, ps: u16, qp_type: IdQpType) -> Id {
        Id {
            ctx,
            ps,
            qp_type,
            state: State::Idle,
            src: None,
            dst: None,
            route: None,
            query: None,
            conn: None,
            listens: Vec::new(),
            backlog: 0,
            pending: 0,
            parent: None,
            port_held: None,
            events_reported: 0,
            disconnected: false,
            seq_num: 0,
            qp_num: 0,
        }
    }
}

/// The private data of a REQ or SIDR REQ: the cma header, then the user's.
fn with_cma_hdr(src: SocketAddr, dst: SocketAddr, user: &[u8]) -> Option<Vec<u8>> {
    let hdr = cma_hdr::Repr { version: cma_hdr::CMA_VERSION, port: src.port(), src_addr: src.ip(), dst_addr: dst.ip() };
    let mut out = alloc::vec![0u8; cma_hdr::HEADER_LEN];
    hdr.emit(&mut cma_hdr::Packet::new_unchecked(&mut out[..])).ok()?;
    out.extend_from_slice(user);
    Some(out)
}

/// The peer's and our socket addresses from a REQ's cma header (our port is
/// the listener's, the service ID's).
fn parse_cma_hdr(private: &[u8], listen_port: u16) -> Option<(SocketAddr, SocketAddr)> {
    let p = cma_hdr::Packet::new_checked(private).ok()?;
    let h = cma_hdr::Repr::parse(&p).ok()?;
    Some((SocketAddr::new(h.src_addr, h.port), SocketAddr::new(h.dst_addr, listen_port)))
}

fn route_errno(e: RouteError) -> i32 {
    e.errno()
}

/// The address vector of a route, as the ring's QP attributes carry it.
fn ah_of(r: &Route) -> cmd::AhAttr {
    cmd::AhAttr {
        dgid: r.dgid.0,
        flow_label: 0,
        sgid_index: r.sgid_index,
        hop_limit: r.hop_limit,
        traffic_class: 0,
        is_global: 1,
        port_num: 1,
        ..cmd::AhAttr::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rxe::mad_port::ReceivedMad;
    use crate::wire::mad::{Packet, Repr};

    fn mad_from(gid: Gid, repr: &Repr) -> ReceivedMad {
        let mut data = alloc::vec![0u8; 256];
        repr.emit(&mut Packet::new_unchecked(&mut data[..]));
        ReceivedMad {
            src_gid: gid,
            dst_gid: Gid::from_ipv4(core::net::Ipv4Addr::new(10, 0, 0, 1)),
            src_qpn: 1,
            src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
            pkey: 0xFFFF,
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
            data,
        }
    }

    fn get(class: MgmtClass, method: Method) -> Repr {
        Repr {
            base_version: 1,
            mgmt_class: class,
            class_version: 1,
            method,
            status: 0,
            class_specific: 0,
            tid: 0x1234,
            attr_id: 0x10,
            attr_mod: 0,
        }
    }

    /// A Get of a class nobody serves is answered "unsupported" to its
    /// sender, from QP1, with the GID index it came in on; a Send of it is
    /// dropped; both counted.
    #[test]
    fn unknown_classes_are_answered_or_dropped_as_linux_does() {
        let mut cm = RdmaCm::new(1);
        cm.add_device(0, 0x1122);
        let peer = Gid::from_ipv4(core::net::Ipv4Addr::new(10, 0, 0, 9));
        cm.receive(Instant::ZERO, 0, &mad_from(peer, &get(MgmtClass::PerfMgmt, Method::Get)), 1);
        let out = cm.take_mads(0);
        assert_eq!(out.len(), 1);
        let (ah, reply) = (&out[0].ah, &out[0].mad);
        assert_eq!((ah.dgid, ah.sgid_index, ah.dmac, out[0].dest_qpn), (peer, 1, MacAddr([2, 0, 0, 0, 0, 9]), 1));
        let r = Repr::parse(&Packet::new_checked(&reply[..]).unwrap()).unwrap();
        assert_eq!((r.method, r.status, r.tid), (Method::GetResp, 0x000C, 0x1234));
        cm.receive(Instant::ZERO, 0, &mad_from(peer, &get(MgmtClass::PerfMgmt, Method::Send)), 1);
        assert!(cm.take_mads(0).is_empty());
        let c = cm.mad_counters(0).unwrap();
        assert_eq!((c.received, c.answered_unsupported, c.no_agent), (2, 1, 1));
    }
}
