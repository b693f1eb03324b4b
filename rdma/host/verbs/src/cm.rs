//! The RDMA connection manager for host programs, in librdmacm's shape
//! (`rdma_create_event_channel`, `rdma_create_id`, `rdma_resolve_addr`, ...)
//! over the ring's CM commands ([`verbs_ring::cm`]).
//!
//! ```text
//! EventChannel::new(&ctx)
//!  ├─ create_id(ps) -> CmId        destroyed on drop (DREQ / REJ to the peer)
//!  │   ├─ bind_addr / listen
//!  │   ├─ resolve_addr -> ADDR_RESOLVED, resolve_route -> ROUTE_RESOLVED
//!  │   ├─ device() / create_qp(..) (the QP, moved to INIT)
//!  │   ├─ connect / accept / reject / disconnect
//!  └─ get_cm_event / poll_cm_event -> CmEvent   (a CONNECT_REQUEST brings a new CmId)
//! ```
//!
//! As in librdmacm, the firmware never touches the host's QP: this library
//! asks CM_INIT_QP_ATTR for each transition and modifies the QP itself.
//! Active side: on CONNECT_RESPONSE (the REP) the QP goes RTR then RTS and
//! CM_ACCEPT has the firmware send the RTU; the caller sees ESTABLISHED
//! with the REP's private data (or CONNECT_ERROR when a step failed, the
//! QP in ERR and the peer rejected). Passive side: `accept` goes RTR then
//! RTS, then CM_ACCEPT sends the REP. UD ids' QPs go to RTS at
//! `create_qp`; their ESTABLISHED carries the peer's QPN, Q_Key and the AH
//! attributes (from the route, as Linux builds them from the path).
//!
//! Events are polled: the firmware queues them per context, and every
//! channel of a context sees the events of its own ids. An event about an
//! id already dropped is skipped; a request on a listener already dropped
//! is refused (its new id destroyed).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use verbs_ring::Status;
use verbs_ring::cm::{self as wire, CmSockAddr, af};
use verbs_ring::cmd::{self, AhAttr, QpAttr, nr, qp_attr_mask, qp_state, qp_type};

use crate::context::{Context, backoff, lock};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::pd::Pd;
use crate::queue::{Cq, Qp, QpInitAttr, Srq};

pub use verbs_ring::cm::{CmRoute, cm_event, port_space};

/// The Q_Key rdma_cm gives UD QPs (`RDMA_UDP_QKEY`).
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// `rdma_event_str`.
pub fn event_str(event: u32) -> &'static str {
    cm_event::name(event)
}

/// `struct rdma_conn_param` / `rdma_ud_param`: what `connect` and `accept`
/// send, and what an event brings from the peer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnParam {
    pub private_data: Vec<u8>,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: bool,
    /// In an event: the peer's QPN. In `connect`/`accept`: 0 to use the id's QP.
    pub qp_num: u32,
    /// UD: the peer's Q_Key in an event.
    pub qkey: u32,
}

impl ConnParam {
    fn to_wire(&self, qp_num: u32, srq: bool) -> Result<wire::CmConnParam> {
        let base = wire::CmConnParam {
            qp_num: if self.qp_num != 0 { self.qp_num } else { qp_num },
            qkey: self.qkey,
            responder_resources: self.responder_resources,
            initiator_depth: self.initiator_depth,
            flow_control: self.flow_control,
            retry_count: self.retry_count,
            rnr_retry_count: self.rnr_retry_count,
            srq: u8::from(self.srq || srq),
            ..Default::default()
        };
        base.with_private(&self.private_data).ok_or(Error::InvalidArgument("private data longer than 196 bytes"))
    }

    fn from_wire(p: &wire::CmConnParam) -> Result<ConnParam> {
        let private = p
            .private()
            .ok_or_else(|| Error::Protocol(format!("CM event private data of {} bytes", p.private_data_len)))?;
        Ok(ConnParam {
            private_data: private.to_vec(),
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            flow_control: p.flow_control,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            srq: p.srq != 0,
            qp_num: p.qp_num,
            qkey: p.qkey,
        })
    }
}

/// `struct rdma_cm_event`. Dropping it is `rdma_ack_cm_event`.
#[derive(Debug)]
pub struct CmEvent {
    /// One of [`cm_event`].
    pub event: u32,
    /// 0, a negative errno, or the REJ reason of REJECTED.
    pub status: i32,
    /// The handle of the id the event is about (CONNECT_REQUEST: the new id).
    pub id: u32,
    /// CONNECT_REQUEST: the listening id's handle.
    pub listen_id: Option<u32>,
    /// The peer's parameters and private data.
    pub param: ConnParam,
    /// UD ESTABLISHED: the address handle attributes toward the peer.
    pub ah_attr: Option<AhAttr>,
    /// CONNECT_REQUEST: the new id, to accept or reject (take it).
    pub request: Option<CmId>,
}

impl CmEvent {
    /// Whether the event is about `id`.
    pub fn is_for(&self, id: &CmId) -> bool {
        self.id == id.handle() || self.listen_id == Some(id.handle())
    }

    pub fn name(&self) -> &'static str {
        event_str(self.event)
    }
}

/// `rdma_ack_cm_event`: the event is released (nothing to tell the firmware).
pub fn ack_cm_event(ev: CmEvent) {
    drop(ev);
}

struct Chan {
    ctx: Context,
    ids: Mutex<Vec<Weak<IdShared>>>,
    next_uid: AtomicU64,
}

impl Chan {
    fn find(&self, f: impl Fn(&IdShared) -> bool) -> Option<Arc<IdShared>> {
        let mut ids = lock(&self.ids);
        ids.retain(|w| w.strong_count() > 0);
        ids.iter().filter_map(Weak::upgrade).find(|s| f(s))
    }

    fn register(self: &Arc<Self>, handle: u32, uid: u64, qp_type: u8) -> CmId {
        let s = Arc::new(IdShared { chan: self.clone(), handle, uid, qp_type, st: Mutex::new(IdState::default()) });
        lock(&self.ids).push(Arc::downgrade(&s));
        CmId { s }
    }

    fn uid(&self) -> u64 {
        self.next_uid.fetch_add(1, Ordering::Relaxed)
    }
}

/// `struct rdma_event_channel`: where a context's CM ids are created and
/// their events read.
#[derive(Clone)]
pub struct EventChannel {
    chan: Arc<Chan>,
}

#[derive(Clone, Copy, Debug)]
struct QpRef {
    handle: u32,
    qp_num: u32,
    srq: bool,
}

#[derive(Default)]
struct IdState {
    route: Option<CmRoute>,
    device: Option<Device>,
    qp: Option<QpRef>,
}

struct IdShared {
    chan: Arc<Chan>,
    handle: u32,
    uid: u64,
    qp_type: u8,
    st: Mutex<IdState>,
}

/// `struct rdma_cm_id`; destroyed on drop (CM_DESTROY_ID: a connected id
/// sends DREQ, a connecting one REJ). Drop it before its QP's PD and CQs
/// as librdmacm programs destroy the QP, then the id.
pub struct CmId {
    s: Arc<IdShared>,
}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmId").field("handle", &self.s.handle).field("uid", &self.s.uid).finish()
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        let req = cmd::HandleReq { handle: self.s.handle, reserved: 0 };
        let _ = self.s.chan.ctx.inner.call::<_, cmd::DestroyResp>(nr::CM_DESTROY_ID, &req);
    }
}

fn to_wire_addr(a: &SocketAddr) -> CmSockAddr {
    match a {
        SocketAddr::V4(v4) => CmSockAddr::ipv4(v4.ip().octets(), v4.port()),
        SocketAddr::V6(v6) => CmSockAddr::ipv6(v6.ip().octets(), v6.port(), v6.scope_id()),
    }
}

/// A socket address from the ring's form; `None` for no (or an unknown) family.
pub fn from_wire_addr(a: &CmSockAddr) -> Option<SocketAddr> {
    match a.family {
        af::INET => {
            let ip = Ipv4Addr::new(a.addr[0], a.addr[1], a.addr[2], a.addr[3]);
            Some(SocketAddr::V4(SocketAddrV4::new(ip, a.port)))
        }
        af::INET6 => Some(SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(a.addr), a.port, 0, a.scope_id))),
        _ => None,
    }
}

impl EventChannel {
    /// `rdma_create_event_channel` on `ctx`.
    pub fn new(ctx: &Context) -> EventChannel {
        EventChannel {
            chan: Arc::new(Chan { ctx: ctx.clone(), ids: Mutex::new(Vec::new()), next_uid: AtomicU64::new(1) }),
        }
    }

    pub fn context(&self) -> &Context {
        &self.chan.ctx
    }

    /// `rdma_create_id` in port space `ps` (TCP: RC, UDP: UD, as librdmacm
    /// picks the QP type).
    pub fn create_id(&self, ps: u16) -> Result<CmId> {
        let qp_type = if ps == port_space::UDP { qp_type::UD } else { qp_type::RC };
        self.create_id_with(ps, qp_type)
    }

    /// `rdma_create_id` with an explicit QP type.
    pub fn create_id_with(&self, ps: u16, qp_type: u8) -> Result<CmId> {
        let uid = self.chan.uid();
        let req = wire::CmCreateIdReq { uid, ps, qp_type, ..Default::default() };
        let r: cmd::HandleResp = self.chan.ctx.inner.call(nr::CM_CREATE_ID, &req)?;
        Ok(self.chan.register(r.handle, uid, qp_type))
    }

    /// The next event, if one is pending (`rdma_get_cm_event` on a
    /// non-blocking channel).
    pub fn poll_cm_event(&self) -> Result<Option<CmEvent>> {
        // Bounded: events of dropped ids are skipped, not looped on forever.
        for _ in 0..64 {
            let raw = match self.chan.ctx.inner.call::<_, wire::CmEvent>(nr::CM_GET_EVENT, &cmd::Empty {}) {
                Ok(e) => e,
                Err(Error::Command { status: Status::EAGAIN, .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            if let Some(ev) = self.process(&raw)? {
                return Ok(Some(ev));
            }
        }
        Ok(None)
    }

    /// `rdma_get_cm_event`: wait up to `timeout` for the next event
    /// (`ETIMEDOUT` when none came).
    pub fn get_cm_event(&self, timeout: Duration) -> Result<CmEvent> {
        let start = Instant::now();
        let mut round = 0;
        loop {
            if let Some(ev) = self.poll_cm_event()? {
                return Ok(ev);
            }
            if start.elapsed() > timeout {
                return Err(Error::NothingCame { what: "rdma_cm event", waited: start.elapsed() });
            }
            // Each poll is a command round trip: past the first spins, rest.
            round = (round + 1).min(300);
            backoff(&mut round);
        }
    }

    /// What librdmacm's `ucma_process_*` do before the caller sees an event.
    fn process(&self, raw: &wire::CmEvent) -> Result<Option<CmEvent>> {
        let param = ConnParam::from_wire(&raw.param)?;
        let mut ev = CmEvent {
            event: raw.event,
            status: raw.status_i32(),
            id: raw.handle,
            listen_id: None,
            param,
            ah_attr: None,
            request: None,
        };
        if raw.event == cm_event::CONNECT_REQUEST {
            let Some(listener) = self.chan.find(|s| s.uid == raw.uid) else {
                // Our listener is gone: refuse the request.
                let req = cmd::HandleReq { handle: raw.handle, reserved: 0 };
                let _ = self.chan.ctx.inner.call::<_, cmd::DestroyResp>(nr::CM_DESTROY_ID, &req);
                return Ok(None);
            };
            if self.chan.find(|s| s.handle == raw.handle).is_some() {
                return Err(Error::Protocol(format!("CONNECT_REQUEST names live id {}", raw.handle)));
            }
            let id = self.chan.register(raw.handle, self.chan.uid(), listener.qp_type);
            ev.listen_id = Some(listener.handle);
            // The request's id is bound to the device it arrived on.
            if let Err(e) = id.r().refresh_route() {
                ev.status = -e.errno().1;
            }
            ev.request = Some(id);
            return Ok(Some(ev));
        }
        let Some(s) = self.chan.find(|s| s.handle == raw.handle) else { return Ok(None) };
        let id = CmIdRef(&s);
        match raw.event {
            cm_event::ADDR_RESOLVED | cm_event::ROUTE_RESOLVED => {
                if let Err(e) = id.refresh_route() {
                    ev.status = -e.errno().1;
                    ev.event =
                        if raw.event == cm_event::ADDR_RESOLVED { cm_event::ADDR_ERROR } else { cm_event::ROUTE_ERROR };
                }
            }
            cm_event::CONNECT_RESPONSE if lock(&s.st).qp.is_some() => match id.complete_connect() {
                Ok(()) => ev.event = cm_event::ESTABLISHED,
                Err(e) => {
                    ev.event = cm_event::CONNECT_ERROR;
                    ev.status = -e.errno().1;
                }
            },
            cm_event::ESTABLISHED if s.qp_type == qp_type::UD => {
                let route = id.refresh_route()?;
                ev.ah_attr = Some(AhAttr { is_global: 1, port_num: route.port_num as u8, ..route.ah_attr });
            }
            _ => {}
        }
        Ok(Some(ev))
    }
}

/// Operations shared by an owned [`CmId`] and the channel's view of one.
struct CmIdRef<'a>(&'a IdShared);

impl CmIdRef<'_> {
    fn call<Req: verbs_ring::wire::Wire, Resp: verbs_ring::wire::Wire>(&self, n: u16, req: &Req) -> Result<Resp> {
        self.0.chan.ctx.inner.call(n, req)
    }

    fn refresh_route(&self) -> Result<CmRoute> {
        let route: CmRoute = self.call(nr::CM_QUERY_ROUTE, &cmd::HandleReq { handle: self.0.handle, reserved: 0 })?;
        let device =
            if route.dev_index == wire::NO_DEVICE {
                None
            } else {
                let known = lock(&self.0.st).device.as_ref().filter(|d| d.index() == route.dev_index).cloned();
                match known {
                    Some(d) => Some(d),
                    None => {
                        Some(
                            self.0.chan.ctx.devices()?.into_iter().find(|d| d.index() == route.dev_index).ok_or_else(
                                || Error::Protocol(format!("route on unknown device {}", route.dev_index)),
                            )?,
                        )
                    }
                }
            };
        let mut st = lock(&self.0.st);
        st.route = Some(route);
        st.device = device;
        Ok(route)
    }

    fn init_qp_attr(&self, state: u32) -> Result<(QpAttr, u32)> {
        let req = wire::CmInitQpAttrReq { handle: self.0.handle, qp_state: state };
        let r: wire::CmInitQpAttrResp = self.call(nr::CM_INIT_QP_ATTR, &req)?;
        if r.attr_mask & !qp_attr_mask::ALL != 0 {
            return Err(Error::Protocol(format!("INIT_QP_ATTR mask {:#x}", r.attr_mask)));
        }
        Ok((r.attr, r.attr_mask))
    }

    fn modify(&self, qp: QpRef, attr: &QpAttr, mask: u32) -> Result<()> {
        // The CM's attributes never name an alternate path (RoCE's CM
        // has none to offer).
        let req = cmd::ModifyQpReq { qp_handle: qp.handle, attr_mask: mask, attr: *attr, alt: cmd::AltPath::default() };
        self.0.chan.ctx.inner.call_resolving::<_, cmd::Empty>(nr::MODIFY_QP, &req)?;
        Ok(())
    }

    /// INIT_QP_ATTR for `state`, then modify the QP; `adjust` may change
    /// the attributes first (librdmacm's responder resources, depth).
    fn step(&self, qp: QpRef, state: u32, adjust: impl FnOnce(&mut QpAttr, &mut u32)) -> Result<()> {
        let (mut attr, mut mask) = self.init_qp_attr(state)?;
        adjust(&mut attr, &mut mask);
        self.modify(qp, &attr, mask)
    }

    fn qp(&self) -> Option<QpRef> {
        lock(&self.0.st).qp
    }

    fn to_rtr_rts(&self, qp: QpRef, resources: u8, depth: u8) -> Result<()> {
        // INIT again first, as librdmacm does: the access flags the
        // connection grants (READ, atomics) are known only now.
        self.step(qp, qp_state::INIT, |_, _| {})?;
        self.step(qp, qp_state::RTR, |a, m| {
            if resources != 0 && *m & qp_attr_mask::MAX_DEST_RD_ATOMIC != 0 {
                a.max_dest_rd_atomic = resources;
            }
        })?;
        self.step(qp, qp_state::RTS, |a, m| {
            if depth != 0 && *m & qp_attr_mask::MAX_QP_RD_ATOMIC != 0 {
                a.max_rd_atomic = depth;
            }
        })
    }

    fn to_err(&self, qp: QpRef) {
        let attr = QpAttr { qp_state: qp_state::ERR, ..Default::default() };
        let _ = self.modify(qp, &attr, qp_attr_mask::STATE);
    }

    /// The active side's REP: RTR, RTS, then the RTU (CM_ACCEPT). On any
    /// failure the QP goes to ERR and the peer is rejected.
    fn complete_connect(&self) -> Result<()> {
        let Some(qp) = self.qp() else { return Ok(()) };
        // The firmware's attributes as they are (they come from the REP).
        let done = self.to_rtr_rts(qp, 0, 0).and_then(|()| {
            let req = wire::CmAcceptReq { handle: self.0.handle, ..Default::default() };
            self.call::<_, cmd::Empty>(nr::CM_ACCEPT, &req).map(|_| ())
        });
        if done.is_err() {
            self.to_err(qp);
            let req = wire::CmRejectReq { handle: self.0.handle, ..Default::default() };
            let _ = self.call::<_, cmd::Empty>(nr::CM_REJECT, &req);
        }
        done
    }
}

impl CmId {
    fn r(&self) -> CmIdRef<'_> {
        CmIdRef(&self.s)
    }

    /// The firmware's handle of the id.
    pub fn handle(&self) -> u32 {
        self.s.handle
    }

    /// This library's name for the id (the ring's `uid`).
    pub fn uid(&self) -> u64 {
        self.s.uid
    }

    pub fn qp_type(&self) -> u8 {
        self.s.qp_type
    }

    /// `rdma_bind_addr` (port 0: any).
    pub fn bind_addr(&self, addr: SocketAddr) -> Result<()> {
        let req = wire::CmBindReq { handle: self.s.handle, reserved: 0, addr: to_wire_addr(&addr) };
        self.r().call::<_, cmd::Empty>(nr::CM_BIND, &req)?;
        // A bound address names a device (unless it is a wildcard).
        let _ = self.r().refresh_route();
        Ok(())
    }

    /// `rdma_resolve_addr`; ADDR_RESOLVED or ADDR_ERROR follows.
    pub fn resolve_addr(&self, src: Option<SocketAddr>, dst: SocketAddr, timeout_ms: u32) -> Result<()> {
        let req = wire::CmResolveAddrReq {
            handle: self.s.handle,
            timeout_ms,
            src: src.as_ref().map(to_wire_addr).unwrap_or_default(),
            dst: to_wire_addr(&dst),
        };
        self.r().call::<_, cmd::Empty>(nr::CM_RESOLVE_ADDR, &req)?;
        Ok(())
    }

    /// `rdma_resolve_route`; ROUTE_RESOLVED or ROUTE_ERROR follows.
    pub fn resolve_route(&self, timeout_ms: u32) -> Result<()> {
        let req = wire::CmResolveRouteReq { handle: self.s.handle, timeout_ms };
        self.r().call::<_, cmd::Empty>(nr::CM_RESOLVE_ROUTE, &req)?;
        Ok(())
    }

    /// The route as last queried (`id->route`), asking the firmware now.
    pub fn query_route(&self) -> Result<CmRoute> {
        self.r().refresh_route()
    }

    /// The route as the last event left it, without asking.
    pub fn route(&self) -> Option<CmRoute> {
        lock(&self.s.st).route
    }

    /// `rdma_get_local_addr`.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.route().and_then(|r| from_wire_addr(&r.src))
    }

    /// `rdma_get_peer_addr`.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.route().and_then(|r| from_wire_addr(&r.dst))
    }

    /// The id's port (`id->port_num`), 1 before it has one.
    pub fn port_num(&self) -> u8 {
        self.route().map_or(1, |r| u8::try_from(r.port_num).unwrap_or(1).max(1))
    }

    /// The device the id is bound to (`id->verbs`), once an address is
    /// bound or resolved or a request arrived.
    pub fn device(&self) -> Result<Device> {
        lock(&self.s.st).device.clone().ok_or(Error::InvalidArgument("CM id not bound to a device yet"))
    }

    /// `rdma_init_qp_attr`: the attributes moving the id's QP to `state`.
    pub fn init_qp_attr(&self, state: u32) -> Result<(QpAttr, u32)> {
        self.r().init_qp_attr(state)
    }

    /// `rdma_create_qp`: a QP of the id's type on `pd` (of the id's device),
    /// moved to INIT with CM_INIT_QP_ATTR (UD: on to RTS, as librdmacm).
    pub fn create_qp<'a>(
        &self,
        pd: &'a Pd<'a>,
        send_cq: &'a Cq<'a>,
        recv_cq: &'a Cq<'a>,
        srq: Option<&'a Srq<'a>>,
        attr: &QpInitAttr,
    ) -> Result<Qp<'a>> {
        if self.device().map(|d| d.index()).ok() != Some(pd.device().index()) {
            return Err(Error::InvalidArgument("PD of another device than the CM id's"));
        }
        if lock(&self.s.st).qp.is_some() {
            return Err(Error::InvalidArgument("the CM id has a QP already"));
        }
        let qp = Qp::create(pd, send_cq, recv_cq, srq, &QpInitAttr { qp_type: self.s.qp_type, ..*attr })?;
        let r = QpRef { handle: qp.handle(), qp_num: qp.qp_num(), srq: srq.is_some() };
        self.r().step(r, qp_state::INIT, |_, _| {})?;
        if self.s.qp_type == qp_type::UD {
            let rtr = QpAttr { qp_state: qp_state::RTR, ..Default::default() };
            self.r().modify(r, &rtr, qp_attr_mask::STATE)?;
            let rts = QpAttr { qp_state: qp_state::RTS, sq_psn: 0, ..Default::default() };
            self.r().modify(r, &rts, qp_attr_mask::STATE | qp_attr_mask::SQ_PSN)?;
        }
        lock(&self.s.st).qp = Some(r);
        Ok(qp)
    }

    /// `rdma_destroy_qp` before the QP itself is dropped: the id forgets it.
    pub fn forget_qp(&self) {
        lock(&self.s.st).qp = None;
    }

    fn qp_num(&self) -> (u32, bool) {
        self.r().qp().map_or((0, false), |q| (q.qp_num, q.srq))
    }

    /// `rdma_connect`: the REQ (SIDR REQ for UD). CONNECT_RESPONSE is
    /// handled inside: the caller sees ESTABLISHED, REJECTED, UNREACHABLE or
    /// CONNECT_ERROR.
    pub fn connect(&self, p: &ConnParam) -> Result<()> {
        let (qpn, srq) = self.qp_num();
        let mut param = p.to_wire(qpn, srq)?;
        if self.s.qp_type == qp_type::UD && param.qkey == 0 {
            param.qkey = RDMA_UDP_QKEY;
        }
        let req = wire::CmConnectReq { handle: self.s.handle, reserved: 0, param };
        self.r().call::<_, cmd::Empty>(nr::CM_CONNECT, &req)?;
        Ok(())
    }

    /// `rdma_establish`: after a CONNECT_RESPONSE on an id without a QP
    /// (the caller moved its own QP), the RTU.
    pub fn establish(&self) -> Result<()> {
        let req = wire::CmAcceptReq { handle: self.s.handle, ..Default::default() };
        self.r().call::<_, cmd::Empty>(nr::CM_ACCEPT, &req)?;
        Ok(())
    }

    /// `rdma_listen`.
    pub fn listen(&self, backlog: u32) -> Result<()> {
        let req = wire::CmListenReq { handle: self.s.handle, backlog };
        self.r().call::<_, cmd::Empty>(nr::CM_LISTEN, &req)?;
        Ok(())
    }

    /// `rdma_accept` on a CONNECT_REQUEST's id: the QP (if any) to RTR and
    /// RTS, then the REP (SIDR REP for UD) with `p`.
    pub fn accept(&self, p: &ConnParam) -> Result<()> {
        let (qpn, srq) = self.qp_num();
        let mut param = p.to_wire(qpn, srq)?;
        if self.s.qp_type == qp_type::UD && param.qkey == 0 {
            param.qkey = RDMA_UDP_QKEY;
        }
        if self.s.qp_type != qp_type::UD
            && let Some(qp) = self.r().qp()
            && let Err(e) = self.r().to_rtr_rts(qp, p.responder_resources, p.initiator_depth)
        {
            self.r().to_err(qp);
            return Err(e);
        }
        let req = wire::CmAcceptReq { handle: self.s.handle, reserved: 0, uid: self.s.uid, param };
        self.r().call::<_, cmd::Empty>(nr::CM_ACCEPT, &req)?;
        Ok(())
    }

    /// `rdma_reject` with private data (at most 148 bytes).
    pub fn reject(&self, private: &[u8]) -> Result<()> {
        let data = verbs_ring::wire::Bytes::from_slice(private)
            .ok_or(Error::InvalidArgument("reject private data longer than 148 bytes"))?;
        let req = wire::CmRejectReq {
            handle: self.s.handle,
            private_data_len: private.len() as u8,
            reserved: [0; 3],
            private_data: data,
        };
        self.r().call::<_, cmd::Empty>(nr::CM_REJECT, &req)?;
        Ok(())
    }

    /// `rdma_disconnect`: the QP to ERR (its work flushes), then the DREQ.
    pub fn disconnect(&self) -> Result<()> {
        if let Some(qp) = self.r().qp() {
            self.r().to_err(qp);
        }
        let req = cmd::HandleReq { handle: self.s.handle, reserved: 0 };
        self.r().call::<_, cmd::Empty>(nr::CM_DISCONNECT, &req)?;
        Ok(())
    }
}
