//! The ring server's side of rdma_cm: the CM's pass (devices heard from its
//! core client, MADs between each device's QP1 and its IB CM, timers and
//! address resolutions) and the CM commands of host contexts.

use alloc::boxed::Box;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use verbs_ring::cm::{CmConnParam, CmRoute, CmSockAddr, NO_DEVICE, af};
use verbs_ring::cmd::{self, Status};
use verbs_ring::dispatch::{CmEventOut, ObjId};

use super::{CoreAccess, CoreVerbs, TransportAccess, status};
use crate::cm::client::{CmClient, Heard};
use crate::cm::cma::{AddrRequest, CmaError, ConnParam, IdQpType, State};
use crate::rxe::mad_port::sgid_index;
use crate::rxe::time::{Duration, Instant};

/// One CM pass: devices that came or went, address resolutions and IB CM
/// timers, then every device's received MADs in and queued MADs out.
pub fn cm_pump<A: CoreAccess + TransportAccess>(p: &mut CoreVerbs<'_, A>, now: Instant) {
    let CoreVerbs { access, u } = p;
    let heard = access.with(|core, _| {
        let id = match u.cm_client {
            Some(id) => id,
            None => {
                let id = core.register_client(Box::new(CmClient::new())).map_err(|e| status(&e))?;
                u.cm_client = Some(id);
                id
            }
        };
        Ok(core.client_mut::<CmClient>(id).map(|c| c.take()).unwrap_or_default())
    });
    let cm = &mut u.cm;
    for h in heard.unwrap_or_default() {
        match h {
            Heard::Added { dev, guid } => cm.add_device(dev, guid),
            Heard::Removed(dev) => cm.remove_device(dev),
        }
    }
    cm.poll(now, &mut |dev, ip| access.resolve(dev, ip, now));
    let devs: alloc::vec::Vec<u32> = cm.devices().collect();
    for dev in devs {
        let _ = access.with_transport(dev, |t, sink, _| {
            while let Some(m) = t.take_mad() {
                let index = sgid_index(t.local_port(), &m.dst_gid).unwrap_or(0);
                cm.receive(now, dev, &m, index);
            }
            for m in cm.take_mads(dev) {
                let _ = t.send_mad(&m.ah, m.dest_qpn, &m.mad, sink);
            }
            Ok(())
        });
    }
}

/// A ring socket address as a Rust one (with its IPv6 scope); `None` for a
/// family other than AF_INET/AF_INET6.
pub(super) fn sockaddr(a: &CmSockAddr) -> Option<(SocketAddr, u32)> {
    let ip = match a.family {
        af::INET => {
            let b: [u8; 4] = a.addr.get(..4)?.try_into().ok()?;
            IpAddr::V4(Ipv4Addr::from(b))
        }
        af::INET6 => IpAddr::V6(Ipv6Addr::from(a.addr)),
        _ => return None,
    };
    Some((SocketAddr::new(ip, a.port), a.scope_id))
}

/// A Rust socket address as the ring's.
pub(super) fn ring_sockaddr(a: &SocketAddr) -> CmSockAddr {
    match a.ip() {
        IpAddr::V4(v4) => CmSockAddr::ipv4(v4.octets(), a.port()),
        IpAddr::V6(v6) => CmSockAddr::ipv6(v6.octets(), a.port(), 0),
    }
}

fn conn_param(p: &CmConnParam) -> Result<ConnParam, Status> {
    Ok(ConnParam {
        responder_resources: p.responder_resources,
        initiator_depth: p.initiator_depth,
        flow_control: p.flow_control,
        retry_count: p.retry_count,
        rnr_retry_count: p.rnr_retry_count,
        srq: p.srq,
        qp_num: p.qp_num,
        qkey: p.qkey,
        private_data: p.private().ok_or(Status::EINVAL)?.to_vec(),
    })
}

fn ring_conn_param(p: &ConnParam) -> CmConnParam {
    let base = CmConnParam {
        qp_num: p.qp_num,
        qkey: p.qkey,
        responder_resources: p.responder_resources,
        initiator_depth: p.initiator_depth,
        flow_control: p.flow_control,
        retry_count: p.retry_count,
        rnr_retry_count: p.rnr_retry_count,
        srq: p.srq,
        ..CmConnParam::default()
    };
    // Private data never exceeds a message's room, which the field holds.
    let len = p.private_data.len().min(verbs_ring::cm::MAX_PRIVATE_DATA);
    base.with_private(&p.private_data[..len]).unwrap_or(base)
}

/// rdma_cm's refusals as ring statuses (Linux's errnos).
fn cma_status(e: CmaError) -> Status {
    match e {
        CmaError::NoId => Status::ENOENT,
        CmaError::State | CmaError::Invalid => Status::EINVAL,
        CmaError::InUse => Status::EADDRINUSE,
        CmaError::NotLocal => Status::EADDRNOTAVAIL,
        CmaError::NoDevice => Status::ENODEV,
        CmaError::Cm => Status::ENOMEM,
    }
}

/// The CM commands of [`VerbsProvider`](verbs_ring::dispatch::VerbsProvider),
/// called from its impl in `mod.rs`.
impl<A: CoreAccess + TransportAccess> CoreVerbs<'_, A> {
    pub(super) fn cm_create_id_(&mut self, ctx: u32, ps: u16, qp_type: u8) -> Result<ObjId, Status> {
        let t = IdQpType::from_ibv(qp_type).ok_or(Status::EINVAL)?;
        self.u.cm.create_id(ctx, ps, t).map_err(cma_status)
    }

    pub(super) fn cm_destroy_id_(&mut self, id: ObjId) -> Result<u32, Status> {
        let now = self.u.now;
        self.u.cm.destroy_id(now, id).map_err(cma_status)
    }

    pub(super) fn cm_bind_(&mut self, id: ObjId, addr: &CmSockAddr) -> Result<(), Status> {
        let (a, _) = sockaddr(addr).ok_or(Status::EINVAL)?;
        let cm = &mut self.u.cm;
        self.access.with(|core, _| cm.bind(core, id, a).map_err(cma_status))
    }

    pub(super) fn cm_resolve_addr_(
        &mut self,
        id: ObjId,
        src: &CmSockAddr,
        dst: &CmSockAddr,
        timeout_ms: u32,
    ) -> Result<(), Status> {
        let src = if src.family == af::UNSPEC { None } else { Some(sockaddr(src).ok_or(Status::EINVAL)?.0) };
        let (dst, scope_id) = sockaddr(dst).ok_or(Status::EINVAL)?;
        let q = AddrRequest { src, dst, scope_id, timeout: Duration::from_millis(u64::from(timeout_ms.max(1))) };
        let (cm, now) = (&mut self.u.cm, self.u.now);
        self.access.with(|core, netdevs| cm.resolve_addr(core, netdevs, now, id, &q).map_err(cma_status))
    }

    pub(super) fn cm_resolve_route_(&mut self, id: ObjId) -> Result<(), Status> {
        self.u.cm.resolve_route(id).map_err(cma_status)
    }

    /// CM id `id` as `rdma resource show cm_id` lists it (see
    /// [`verbs_ring::dispatch::VerbsProvider::cm_res_entry`]).
    pub(super) fn cm_res_entry_(&mut self, id: ObjId) -> Option<cmd::ResEntry> {
        let (ps, dev) = self.u.cm.listing(id)?;
        let (src, dst, _) = self.u.cm.route(id)?;
        // Linux 6.1's `enum rdma_cm_state`; a connection stays CONNECT
        // once established, as Linux's does.
        let state = match self.u.cm.state(id)? {
            State::Idle => 0,
            State::AddrQuery => 1,
            State::AddrResolved => 2,
            State::RouteResolved => 4,
            State::Connect | State::Accepting | State::Established => 5,
            State::Disconnect => 6,
            State::AddrBound => 7,
            State::Listen => 8,
        };
        // Linux sends the destination of every id, 0.0.0.0:0 (of the
        // source's family) before it has one.
        let none = match src {
            Some(SocketAddr::V6(_)) => CmSockAddr::ipv6([0; 16], 0, 0),
            _ => CmSockAddr::ipv4([0; 4], 0),
        };
        let (lqpn, qp_type) = self.u.cm.qp_of(id).map_or((0, 0), |(n, t)| (n, ibv_qp_type(t)));
        let entry = cmd::ResEntry {
            kind: cmd::res_kind::CM_ID,
            port: 1,
            state,
            ps,
            cm_lqpn: lqpn,
            qp_type,
            src: src.as_ref().map(ring_sockaddr).unwrap_or(none),
            dst: dst.as_ref().map(ring_sockaddr).unwrap_or(none),
            ..Default::default()
        };
        match dev {
            Some(dev) => Some(cmd::ResEntry { dev_index: dev, ..entry }),
            // A wildcard listener listens on every device through an id of
            // its own there, bound to no port and with no destination: Linux
            // lists those, one per device.
            None if state == 8 => {
                Some(cmd::ResEntry { dev_index: cmd::RES_ANY_DEV, port: 0, dst: CmSockAddr::default(), ..entry })
            }
            None => None,
        }
    }

    pub(super) fn cm_query_route_(&mut self, id: ObjId) -> Result<CmRoute, Status> {
        let (src, dst, route) = self.u.cm.route(id).ok_or(Status::ENOENT)?;
        let mut out = CmRoute {
            src: src.as_ref().map(ring_sockaddr).unwrap_or_default(),
            dst: dst.as_ref().map(ring_sockaddr).unwrap_or_default(),
            dev_index: NO_DEVICE,
            ..CmRoute::default()
        };
        if let Some(r) = route {
            out.dev_index = r.dev;
            out.port_num = 1;
            out.sgid = r.sgid.0;
            out.ah_attr = cmd::AhAttr {
                dgid: r.dgid.0,
                sgid_index: r.sgid_index,
                hop_limit: r.hop_limit,
                is_global: 1,
                port_num: 1,
                ..cmd::AhAttr::default()
            };
            out.pkey = 0xFFFF;
            out.path_mtu = r.mtu.code();
            out.num_paths = u8::from(self.u.cm.state(id).is_some_and(|s| s.has_route()));
        }
        Ok(out)
    }

    pub(super) fn cm_listen_(&mut self, id: ObjId, backlog: u32) -> Result<(), Status> {
        let cm = &mut self.u.cm;
        self.access.with(|core, _| cm.listen(core, id, backlog).map_err(cma_status))
    }

    pub(super) fn cm_connect_(&mut self, id: ObjId, p: &CmConnParam) -> Result<(), Status> {
        let now = self.u.now;
        self.u.cm.connect(now, id, &conn_param(p)?).map_err(cma_status)
    }

    pub(super) fn cm_accept_(&mut self, id: ObjId, p: &CmConnParam) -> Result<(), Status> {
        let now = self.u.now;
        self.u.cm.accept(now, id, &conn_param(p)?).map_err(cma_status)
    }

    pub(super) fn cm_reject_(&mut self, id: ObjId, private: &[u8]) -> Result<(), Status> {
        let now = self.u.now;
        self.u.cm.reject(now, id, private).map_err(cma_status)
    }

    pub(super) fn cm_disconnect_(&mut self, id: ObjId) -> Result<(), Status> {
        let now = self.u.now;
        self.u.cm.disconnect(now, id).map_err(cma_status)
    }

    pub(super) fn cm_init_qp_attr_(&mut self, id: ObjId, qp_state: u32) -> Result<(u32, cmd::QpAttr), Status> {
        self.u.cm.init_qp_attr(id, qp_state).map_err(cma_status)
    }

    pub(super) fn cm_get_event_(&mut self, ctx: u32) -> Result<CmEventOut, Status> {
        let ev = self.u.cm.get_event(ctx).ok_or(Status::EAGAIN)?;
        let (id, new_id) = match ev.listen_id {
            Some(l) => (l, Some(ev.id)),
            None => (ev.id, None),
        };
        Ok(CmEventOut { id, new_id, event: ev.event, status: ev.status, param: ring_conn_param(&ev.param) })
    }
}

/// An id's QP type as `enum ib_qp_type` numbers it (2 RC, 3 UC, 4 UD).
fn ibv_qp_type(t: crate::cm::cma::IdQpType) -> u8 {
    use crate::cm::cma::IdQpType;
    match t {
        IdQpType::Rc => 2,
        IdQpType::Uc => 3,
        IdQpType::Ud => 4,
    }
}
