//! The verbs the appliance serves to host programs over the shared-memory ring
//! (the seed's §5, uverbs): a `verbs_ring::VerbsProvider` backed by the RDMA
//! core and the rxe transport. Queries, counters and the link control
//! messages answer from the core ([`CoreAccess`]); the object commands (PD,
//! MR, CQ, QP, SRQ, AH) run on the device's transport ([`TransportAccess`],
//! [`objects`]); [`pump`] carries WQEs from the host's SQ/RQ/SRQ rings into
//! the transport and completions back into the CQ rings ([`datapath`]).
//!
//! ```text
//!  host                      firmware tick                transport
//!  command ring  ──────────▶ Dispatcher ─▶ CoreVerbs ───▶ alloc_pd, reg_mr,
//!                            (handles,      (objects.rs)   create_qp, modify_qp..
//!                             ownership)
//!  SQ/RQ/SRQ rings ────────────────────▶ pump ──────────▶ post_send/post_recv
//!  CQ rings       ◀────────────────────  pump ◀────────── poll_one (every field)
//!  async events   ◀── Dispatcher::post_event ◀─────────── poll_event
//! ```
//!
//! Memory addresses are region offsets on both sides: an MR's iova is the
//! offset of its first byte in the shared region, and the transport's
//! [`Memory`](crate::rxe::memory::Memory) maps them there ([`ShmMemory`] over
//! any [`SharedMem`](verbs_ring::SharedMem)).

pub mod client;
pub mod cm;
pub mod datapath;
mod memory;
pub mod objects;

pub use cm::cm_pump;
pub use datapath::{PumpReport, pump, pump_receives};
pub use memory::ShmMemory;
pub use objects::{
    MacResolution, ROUTE_HOP_LIMIT, TransportAccess, gid_ip, mac_of_link_local, multicast_mac, verbs_status,
};

use crate::core::{ClientId, Error, GidType, NetdevProvider, RdmaCore, RxeCounter};
use crate::rxe::ah::AhHandle;
use crate::rxe::cq::CqHandle;
use crate::rxe::mr::MrHandle;
use crate::rxe::mw::{MwHandle, MwType};
use crate::rxe::pd::PdHandle;
use crate::rxe::qp::{QpHandle, QpInitAttr};
use crate::rxe::srq::SrqHandle;
use crate::rxe::time::Instant;
use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use objects::{CqObj, Objects, QpObj, SrqObj};
use verbs_ring::SharedMem;
use verbs_ring::abi::RingPlacement;
use verbs_ring::cmd::{
    self, CountersResp, DEV_NAME_LEN, GidEntry, IFNAME_LEN, LinkInfo, MAX_COUNTERS, NO_MORE, Status,
};
use verbs_ring::dispatch::{
    CqSpec, Created, Dispatcher, EventSource, MrKeys, MrMap, MrSpec, ObjId, QpSpec, SrqSpec, VerbsProvider,
};
use verbs_ring::ring::{Consumer, Producer};
use verbs_ring::table::CapSet;
use verbs_ring::wire::name_field;

/// The appliance's own objects `rdma resource show` lists (`comm
/// [ib_core]`, as Linux's): each device's GSI QP1, which the firmware's
/// management agents own (its port 1, RTS from the start, a UD QP that
/// sends MADs with its own PSN). The appliance has no PD, CQ or MR of its
/// own: its MAD port is not built on verbs objects, so none are listed.
pub fn kernel_resources<A: TransportAccess + ?Sized>(
    access: &mut A,
    dev: u32,
    kind: u32,
) -> alloc::vec::Vec<cmd::ResEntry> {
    if kind != cmd::res_kind::QP {
        return alloc::vec::Vec::new();
    }
    let Ok(psn) = access.with_transport(dev, |t, _, _| Ok(t.mad_port().psn())) else {
        return alloc::vec::Vec::new();
    };
    alloc::vec![cmd::ResEntry::gsi(dev, psn)]
}

/// How the provider reaches the core and the netdevs for the length of one
/// command: the owner of the network state lends them, nothing is kept.
pub trait CoreAccess {
    fn with<R>(&mut self, f: impl FnOnce(&mut RdmaCore, &dyn NetdevProvider) -> Result<R, Status>)
    -> Result<R, Status>;
}

/// The uverbs server's own state, kept between commands: per object, what
/// the data path needs (rings, QPN, capacities); the dispatcher keeps which
/// context owns it. The owner of the network state lends the rest for each
/// tick and pump through [`Uverbs::provider`].
pub struct Uverbs {
    objs: Objects,
    /// The time of the last [`pump`]: MAC resolution in commands uses it.
    now: Instant,
    /// The server's [`client::UverbsClient`] in the core, once registered.
    client: Option<ClientId>,
    /// Devices that went away with objects of ours on them: destroying
    /// those objects' handles succeeds, the objects went with the device.
    gone: BTreeSet<u32>,
    /// rdma_cm: host contexts' CM ids and every device's IB CM.
    cm: crate::cm::RdmaCm,
    /// The CM's [`crate::cm::client::CmClient`] in the core, once registered.
    cm_client: Option<ClientId>,
}

impl Default for Uverbs {
    fn default() -> Self {
        Uverbs {
            objs: Objects::default(),
            now: Instant::ZERO,
            client: None,
            gone: BTreeSet::new(),
            cm: crate::cm::RdmaCm::new(0x5eed_c0de),
            cm_client: None,
        }
    }
}

impl Uverbs {
    pub fn new() -> Self {
        Self::default()
    }

    /// The verbs provider for one tick or one pump, over what `access` lends.
    pub fn provider<'a, A>(&'a mut self, access: &'a mut A) -> CoreVerbs<'a, A> {
        CoreVerbs { access, u: self }
    }

    /// Objects the server holds, by kind (qp, ah, srq, mr, cq, pd), for
    /// diagnostics and the teardown checks of tests.
    pub fn live(&self) -> [usize; 6] {
        let o = &self.objs;
        [o.qps.len(), o.ahs.len(), o.srqs.len(), o.mrs.len(), o.cqs.len(), o.pds.len()]
    }

    /// Completions dropped because a CQ ring was full, over every CQ.
    pub fn cq_overruns(&self) -> u64 {
        self.objs.cqs.values().map(|c| c.overruns).sum()
    }

    /// Whether a host posted work since the pump last looked: a new entry
    /// in a live QP's send or receive ring or an SRQ's ring (a ring whose
    /// index broke the protocol counts, so the next pump fails it). What an
    /// appliance that asked to be rung looks at before it halts
    /// ([`verbs_ring::wake`]). Entries the pump saw and left (a QP not yet
    /// in RTS, a full transport queue) do not count: what frees them (a
    /// command, an ACK) wakes the appliance itself.
    pub fn rings_pending<S: SharedMem + ?Sized>(&mut self, shm: &S) -> bool {
        let waiting = |r: &mut verbs_ring::ring::Consumer| r.producer_moved(shm).unwrap_or(true);
        self.objs
            .qps
            .values_mut()
            .filter(|q| !q.failed)
            .any(|q| waiting(&mut q.sq) || q.rq.as_mut().is_some_and(waiting))
            || self.objs.srqs.values_mut().filter(|s| !s.failed).any(|s| waiting(&mut s.ring))
    }
}

/// Takes what the server's client heard from the core since the last call
/// (registering the client the first time) and hands it to the ring: port
/// events (ACTIVE, ERR, GID change) to every context, and for a device that
/// went away `DEVICE_FATAL`, after which the server forgets that device's
/// objects. Called once per tick: port events are not latency-critical.
pub fn deliver_events<A: CoreAccess>(d: &mut Dispatcher, p: &mut CoreVerbs<'_, A>) {
    let CoreVerbs { access, u } = p;
    let heard = access.with(|core, _| {
        let id = match u.client {
            Some(id) => id,
            None => {
                let id = core.register_client(Box::new(client::UverbsClient::new())).map_err(|e| status(&e))?;
                u.client = Some(id);
                id
            }
        };
        Ok(core.client_mut::<client::UverbsClient>(id).map(|c| c.take()).unwrap_or_default())
    });
    for h in heard.unwrap_or_default() {
        match h {
            client::Heard::Port { dev, port, event_type } => {
                d.post_event(EventSource::Port { dev_index: dev, port }, event_type)
            }
            client::Heard::Added(dev) => {
                u.gone.remove(&dev);
            }
            client::Heard::Removed(dev) => {
                d.post_event(EventSource::Port { dev_index: dev, port: 0 }, cmd::event_type::DEVICE_FATAL);
                if u.objs.forget_dev(dev) > 0 {
                    u.gone.insert(dev);
                }
            }
        }
    }
}

/// The verbs provider over the core and the transports: the server's state
/// and what the owner lent it for this call.
pub struct CoreVerbs<'a, A> {
    access: &'a mut A,
    u: &'a mut Uverbs,
}

/// The core's error as a ring status (its Linux errno).
pub fn status(e: &Error) -> Status {
    u16::try_from(e.errno()).map_or(Status::EIO, Status)
}

/// The core's device attributes as the ring's QUERY_DEVICE answer (also
/// what the console formats, so both print the same values).
pub fn device_attr(d: &crate::core::DeviceAttr, ports: u32) -> cmd::DeviceAttr {
    cmd::DeviceAttr {
        fw_ver: d.fw_ver,
        node_guid: d.node_guid.0,
        sys_image_guid: d.sys_image_guid.0,
        max_mr_size: d.max_mr_size,
        page_size_cap: d.page_size_cap,
        device_cap_flags: d.device_cap_flags.0,
        vendor_id: d.vendor_id,
        vendor_part_id: d.vendor_part_id,
        hw_ver: d.hw_ver,
        max_qp: d.max_qp,
        max_qp_wr: d.max_qp_wr,
        max_sge: d.max_sge,
        max_sge_rd: d.max_sge_rd,
        max_cq: d.max_cq,
        max_cqe: d.max_cqe,
        max_mr: d.max_mr,
        max_pd: d.max_pd,
        max_qp_rd_atom: d.max_qp_rd_atom,
        max_ee_rd_atom: d.max_ee_rd_atom,
        max_res_rd_atom: d.max_res_rd_atom,
        max_qp_init_rd_atom: d.max_qp_init_rd_atom,
        max_ee_init_rd_atom: d.max_ee_init_rd_atom,
        atomic_cap: d.atomic_cap as u32,
        max_ee: d.max_ee,
        max_rdd: d.max_rdd,
        max_mw: d.max_mw,
        max_raw_ipv6_qp: d.max_raw_ipv6_qp,
        max_raw_ethy_qp: d.max_raw_ethy_qp,
        max_mcast_grp: d.max_mcast_grp,
        max_mcast_qp_attach: d.max_mcast_qp_attach,
        max_total_mcast_qp_attach: d.max_total_mcast_qp_attach,
        max_ah: d.max_ah,
        max_fmr: 0,
        max_map_per_fmr: 0,
        max_srq: d.max_srq,
        max_srq_wr: d.max_srq_wr,
        max_srq_sge: d.max_srq_sge,
        max_fast_reg_page_list_len: d.max_fast_reg_page_list_len,
        max_pkeys: d.max_pkeys,
        local_ca_ack_delay: d.local_ca_ack_delay,
        phys_port_cnt: u8::try_from(ports).unwrap_or(u8::MAX),
        // One: the firmware's poll loop serves every CQ, whatever vector
        // CREATE_CQ names.
        num_comp_vectors: 1,
    }
}

/// The core's port attributes as the ring's QUERY_PORT answer.
pub fn port_attr(p: &crate::core::PortAttr) -> cmd::PortAttr {
    use crate::core::port::LinkLayer;
    cmd::PortAttr {
        state: p.state as u32,
        max_mtu: p.max_mtu as u32,
        active_mtu: p.active_mtu as u32,
        gid_tbl_len: p.gid_tbl_len,
        port_cap_flags: p.port_cap_flags,
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: p.bad_pkey_cntr,
        qkey_viol_cntr: p.qkey_viol_cntr,
        pkey_tbl_len: p.pkey_tbl_len,
        lid: p.lid,
        sm_lid: p.sm_lid,
        port_cap_flags2: p.port_cap_flags2,
        active_speed: u16::from(p.active_speed),
        lmc: p.lmc,
        max_vl_num: p.max_vl_num,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        phys_state: p.phys_state as u8,
        // libibverbs' IBV_LINK_LAYER_*: 1 InfiniBand, 2 Ethernet.
        link_layer: match p.link_layer {
            LinkLayer::InfiniBand => 1,
            LinkLayer::Ethernet => 2,
        },
        flags: 0,
        reserved: [0; 3],
    }
}

/// GID table entry `index` as the ring's QUERY_GID answer (`None`: an
/// empty slot, all zero).
pub fn gid_entry(index: u32, g: Option<&crate::core::GidAttr>) -> GidEntry {
    match g {
        Some(g) => GidEntry {
            gid: g.gid.0,
            index,
            gid_type: match g.gid_type {
                GidType::RoceV2 => cmd::gid_type::ROCE_V2,
                _ => cmd::gid_type::ROCE_V1,
            },
            ndev_ifindex: g.ndev.ifindex,
            valid: 1,
        },
        None => GidEntry { gid: [0; 16], index, gid_type: 0, ndev_ifindex: 0, valid: 0 },
    }
}

/// The LINK_SHOW answer for the first device at or after index `dev`
/// (port 0 means 1). A name that does not fit the ring's field is refused
/// (`ENAMETOOLONG`), not cut.
pub fn link_info(core: &RdmaCore, dev: u32, port: u32) -> Result<LinkInfo, Status> {
    let mut devices = core.devices().filter(|d| d.index() >= dev).collect::<alloc::vec::Vec<_>>();
    devices.sort_by_key(|d| d.index());
    let d = devices.first().ok_or(Status::ENODEV)?;
    let port_num = if port == 0 { 1 } else { port };
    let p = d.port(port_num).ok_or(Status::EINVAL)?;
    let attr = d.attr();
    Ok(LinkInfo {
        node_guid: attr.node_guid.0,
        sys_image_guid: attr.sys_image_guid.0,
        dev_index: d.index(),
        port_num,
        port_state: p.state() as u32,
        phys_state: p.phys_state() as u32,
        netdev_index: d.netdev().ifindex,
        next: devices.get(1).map_or(NO_MORE, |n| n.index()),
        dev_name: name_field::<DEV_NAME_LEN>(d.name()).map_err(|_| Status::ENAMETOOLONG)?,
        netdev: name_field::<IFNAME_LEN>(&d.netdev().name).map_err(|_| Status::ENAMETOOLONG)?,
    })
}

impl<A> CoreVerbs<'_, A> {
    /// The object lived on a device that went away, and with it.
    fn gone_with_device(&self, id: ObjId) -> bool {
        self.u.gone.contains(&objects::dev_of(id))
    }
}

impl<A: CoreAccess + TransportAccess> VerbsProvider for CoreVerbs<'_, A> {
    fn caps(&self) -> CapSet {
        CapSet::all()
    }

    fn query_device(&mut self, dev: u32) -> Result<cmd::DeviceAttr, Status> {
        self.access.with(|core, _| {
            let d = core.device(dev).ok_or(Status::ENODEV)?;
            Ok(device_attr(d.attr(), d.phys_port_cnt()))
        })
    }

    fn query_port(&mut self, dev: u32, port: u32) -> Result<cmd::PortAttr, Status> {
        self.access.with(|core, _| core.query_port(dev, port).map(|a| port_attr(&a)).map_err(|e| status(&e)))
    }

    fn query_gid(&mut self, dev: u32, port: u32, index: u32) -> Result<GidEntry, Status> {
        self.access.with(|core, _| {
            let entry = core.query_gid(dev, port, index as usize).map_err(|e| status(&e))?;
            Ok(gid_entry(index, entry))
        })
    }

    fn query_pkey(&mut self, dev: u32, port: u32, index: u32) -> Result<u16, Status> {
        self.access.with(|core, _| core.query_pkey(dev, port, index).map_err(|e| status(&e)))
    }

    fn query_counters(&mut self, dev: u32, _port: u32) -> Result<CountersResp, Status> {
        self.access.with(|core, _| {
            let counters = core.counters(dev).ok_or(Status::ENODEV)?;
            let mut values = [0u64; MAX_COUNTERS];
            for (v, c) in values.iter_mut().zip(RxeCounter::ALL) {
                *v = counters.get(c);
            }
            let n = RxeCounter::ALL.len().min(MAX_COUNTERS) as u32;
            Ok(CountersResp { num_counters: n, reserved: 0, values })
        })
    }

    fn link_add(&mut self, name: &str, link_type: &str, netdev: &str) -> Result<u32, Status> {
        self.access.with(|core, net| core.link_add(net, name, link_type, netdev).map_err(|e| status(&e)))
    }

    fn link_del(&mut self, dev: u32) -> Result<(), Status> {
        self.access.with(|core, net| {
            let name = alloc::string::String::from(core.device(dev).ok_or(Status::ENODEV)?.name());
            core.link_del(net, &name).map_err(|e| status(&e))
        })
    }

    fn link_show(&mut self, dev: u32, port: u32) -> Result<LinkInfo, Status> {
        self.access.with(|core, _| link_info(core, dev, port))
    }

    fn kernel_resources(&mut self, dev: u32, kind: u32) -> alloc::vec::Vec<cmd::ResEntry> {
        kernel_resources(&mut *self.access, dev, kind)
    }

    fn cm_res_entry(&mut self, id: ObjId) -> Option<cmd::ResEntry> {
        self.cm_res_entry_(id)
    }

    fn cm_create_id(&mut self, ctx: u32, _uid: u64, ps: u16, qp_type: u8) -> Result<ObjId, Status> {
        self.cm_create_id_(ctx, ps, qp_type)
    }
    fn cm_destroy_id(&mut self, id: ObjId) -> Result<u32, Status> {
        self.cm_destroy_id_(id)
    }
    fn cm_bind(&mut self, id: ObjId, addr: &verbs_ring::cm::CmSockAddr) -> Result<(), Status> {
        self.cm_bind_(id, addr)
    }
    fn cm_resolve_addr(
        &mut self,
        id: ObjId,
        src: &verbs_ring::cm::CmSockAddr,
        dst: &verbs_ring::cm::CmSockAddr,
        timeout_ms: u32,
    ) -> Result<(), Status> {
        self.cm_resolve_addr_(id, src, dst, timeout_ms)
    }
    fn cm_resolve_route(&mut self, id: ObjId, _timeout_ms: u32) -> Result<(), Status> {
        self.cm_resolve_route_(id)
    }
    fn cm_query_route(&mut self, id: ObjId) -> Result<verbs_ring::cm::CmRoute, Status> {
        self.cm_query_route_(id)
    }
    fn cm_listen(&mut self, id: ObjId, backlog: u32) -> Result<(), Status> {
        self.cm_listen_(id, backlog)
    }
    fn cm_connect(&mut self, id: ObjId, p: &verbs_ring::cm::CmConnParam) -> Result<(), Status> {
        self.cm_connect_(id, p)
    }
    fn cm_accept(&mut self, id: ObjId, p: &verbs_ring::cm::CmConnParam) -> Result<(), Status> {
        self.cm_accept_(id, p)
    }
    fn cm_reject(&mut self, id: ObjId, private: &[u8]) -> Result<(), Status> {
        self.cm_reject_(id, private)
    }
    fn cm_disconnect(&mut self, id: ObjId) -> Result<(), Status> {
        self.cm_disconnect_(id)
    }
    fn cm_init_qp_attr(&mut self, id: ObjId, qp_state: u32) -> Result<(u32, cmd::QpAttr), Status> {
        self.cm_init_qp_attr_(id, qp_state)
    }
    fn cm_get_event(&mut self, ctx: u32) -> Result<verbs_ring::dispatch::CmEventOut, Status> {
        self.cm_get_event_(ctx)
    }

    fn alloc_pd(&mut self, dev: u32) -> Result<ObjId, Status> {
        let pd = self.access.with_transport(dev, |t, _, _| t.alloc_pd().map_err(|e| verbs_status(&e)))?;
        let id = objects::obj_id(dev, pd.raw())?;
        self.u.objs.pds.insert(id, dev);
        Ok(id)
    }

    fn dealloc_pd(&mut self, pd: ObjId) -> Result<(), Status> {
        if self.gone_with_device(pd) {
            return Ok(());
        }
        let dev = self.u.objs.dev_of_pd(pd)?;
        self.access.with_transport(dev, |t, _, _| {
            t.dealloc_pd(PdHandle::from_raw(objects::raw(pd))).map_err(|e| verbs_status(&e))
        })?;
        self.u.objs.pds.remove(&pd);
        Ok(())
    }

    fn reg_mr(&mut self, pd: ObjId, mr: &MrSpec) -> Result<MrKeys, Status> {
        let dev = self.u.objs.dev_of_pd(pd)?;
        let access = objects::mr_access(mr.access)?;
        // The transport's memory is addressed by region offset; SGEs and
        // peers name the MR's bytes by its iova, which the MR maps there.
        let (key, rkey) = self.access.with_transport(dev, |t, _, _| {
            let h = t
                .reg_mr(PdHandle::from_raw(objects::raw(pd)), mr.iova, mr.start, mr.length, access)
                .map_err(|e| verbs_status(&e))?;
            Ok((h.raw(), t.mr(h).and_then(|m| m.rkey()).unwrap_or(0)))
        })?;
        // The lkey stays the transport's own: SGEs carry it to the transport as is.
        let id = objects::obj_id(dev, key)?;
        self.u.objs.mrs.insert(id, dev);
        Ok(MrKeys { id, lkey: key, rkey })
    }

    fn dereg_mr(&mut self, mr: ObjId) -> Result<(), Status> {
        if self.gone_with_device(mr) {
            return Ok(());
        }
        let dev = self.u.objs.mrs.get(&mr).copied().ok_or(Status::ENOENT)?;
        self.access.with_transport(dev, |t, _, _| {
            t.dereg_mr(MrHandle::from_raw(objects::raw(mr))).map_err(|e| verbs_status(&e))
        })?;
        self.u.objs.mrs.remove(&mr);
        Ok(())
    }

    fn alloc_mr(&mut self, pd: ObjId, max_num_sg: u32) -> Result<MrKeys, Status> {
        let dev = self.u.objs.dev_of_pd(pd)?;
        let key = self.access.with_transport(dev, |t, _, _| {
            t.alloc_mr(PdHandle::from_raw(objects::raw(pd)), max_num_sg).map(|h| h.raw()).map_err(|e| verbs_status(&e))
        })?;
        let id = objects::obj_id(dev, key)?;
        self.u.objs.mrs.insert(id, dev);
        Ok(MrKeys { id, lkey: key, rkey: key })
    }

    fn map_mr_sg(&mut self, mr: ObjId, map: &MrMap<'_>) -> Result<(), Status> {
        let dev = self.u.objs.mrs.get(&mr).copied().ok_or(Status::ENOENT)?;
        // Region offsets are the transport's memory addresses.
        self.access.with_transport(dev, |t, _, _| {
            t.map_mr_sg(MrHandle::from_raw(objects::raw(mr)), map.iova, map.length, map.page_size, map.pages)
                .map_err(|e| verbs_status(&e))
        })
    }

    fn alloc_mw(&mut self, pd: ObjId, mw_type: u32) -> Result<(ObjId, u32), Status> {
        let dev = self.u.objs.dev_of_pd(pd)?;
        let ty = MwType::from_raw(mw_type).ok_or(Status::EINVAL)?;
        let (h, rkey) = self.access.with_transport(dev, |t, _, _| {
            let h = t.alloc_mw(PdHandle::from_raw(objects::raw(pd)), ty).map_err(|e| verbs_status(&e))?;
            Ok((h.raw(), t.mw_rkey(h).unwrap_or(0)))
        })?;
        let id = objects::obj_id(dev, h)?;
        self.u.objs.mws.insert(id, dev);
        Ok((id, rkey))
    }

    fn mcast(&mut self, qp: ObjId, gid: &[u8; 16], attach: bool) -> Result<(), Status> {
        let dev = self.u.objs.qps.get(&qp).map(|q| q.dev).ok_or(Status::ENOENT)?;
        let gid = crate::core::gid::Gid(*gid);
        self.access.with_transport(dev, |t, _, _| {
            let h = QpHandle::from_raw(objects::raw(qp));
            if attach { t.attach_mcast(h, &gid) } else { t.detach_mcast(h, &gid) }.map_err(|e| verbs_status(&e))
        })
    }

    fn dealloc_mw(&mut self, mw: ObjId) -> Result<(), Status> {
        if self.gone_with_device(mw) {
            return Ok(());
        }
        let dev = self.u.objs.mws.get(&mw).copied().ok_or(Status::ENOENT)?;
        self.access.with_transport(dev, |t, _, _| {
            t.dealloc_mw(MwHandle::from_raw(objects::raw(mw))).map_err(|e| verbs_status(&e))
        })?;
        self.u.objs.mws.remove(&mw);
        Ok(())
    }

    fn create_cq(&mut self, cq: &CqSpec) -> Result<ObjId, Status> {
        let (h, ring) = self.access.with_transport(cq.dev_index, |t, _, shm| {
            let ring = objects::ring_geometry(cq.ring, shm.len())?;
            // The transport's CQ holds what the pump has not moved yet; the
            // ring is the CQ's real depth.
            let depth = (cq.cqe as usize).min(objects::MAX_TRANSPORT_CQE);
            Ok((t.create_cq(depth).map_err(|e| verbs_status(&e))?, ring))
        })?;
        let obj = CqObj {
            dev: cq.dev_index,
            ring: Producer::new(ring),
            local: Default::default(),
            overruns: 0,
            dead: false,
            notify: Default::default(),
        };
        let id = objects::obj_id(cq.dev_index, h.raw())?;
        self.u.objs.cqs.insert(id, obj);
        Ok(id)
    }

    fn destroy_cq(&mut self, cq: ObjId) -> Result<(), Status> {
        if self.gone_with_device(cq) {
            return Ok(());
        }
        let dev = self.u.objs.cqs.get(&cq).map(|c| c.dev).ok_or(Status::ENOENT)?;
        self.access.with_transport(dev, |t, _, _| {
            t.destroy_cq(CqHandle::from_raw(objects::raw(cq))).map_err(|e| verbs_status(&e))
        })?;
        self.u.objs.cqs.remove(&cq);
        Ok(())
    }

    fn create_qp(&mut self, qp: &QpSpec) -> Result<Created, Status> {
        let qp_type = objects::qp_type_of(qp.qp_type)?;
        let init = QpInitAttr {
            qp_type,
            pd: PdHandle::from_raw(objects::raw(qp.pd)),
            send_cq: CqHandle::from_raw(objects::raw(qp.send_cq)),
            recv_cq: CqHandle::from_raw(objects::raw(qp.recv_cq)),
            srq: qp.srq.map(|s| SrqHandle::from_raw(objects::raw(s))),
            cap: objects::qp_cap(&qp.cap),
            sq_sig_all: qp.sq_sig_all,
        };
        let (h, qpn, sq, rq) = self.access.with_transport(qp.dev_index, |t, _, shm| {
            let sq = objects::ring_geometry(qp.sq, shm.len())?;
            let rq = qp.rq.map(|p| objects::ring_geometry(p, shm.len())).transpose()?;
            let h = t.create_qp(&init).map_err(|e| verbs_status(&e))?;
            Ok((h, t.qpn(h).unwrap_or(0), sq, rq))
        })?;
        let obj = QpObj {
            dev: qp.dev_index,
            qpn,
            qp_type: qp.qp_type,
            sq_sig_all: qp.sq_sig_all,
            send_cq: qp.send_cq,
            recv_cq: qp.recv_cq,
            cap: qp.cap,
            sq: Consumer::new(sq),
            rq: rq.map(Consumer::new),
            failed: false,
        };
        let id = objects::obj_id(qp.dev_index, h.raw())?;
        self.u.objs.qps.insert(id, obj);
        Ok(Created { id, num: qpn })
    }

    fn modify_qp(&mut self, qp: ObjId, attr_mask: u32, attr: &cmd::QpAttr, alt: &cmd::AltPath) -> Result<(), Status> {
        let dev = self.u.objs.qps.get(&qp).map(|q| q.dev).ok_or(Status::ENOENT)?;
        let (attr, mask) = objects::qp_attr(self.access, dev, attr_mask, attr, alt, self.u.now)?;
        self.access.with_transport(dev, |t, _, _| {
            t.modify_qp(QpHandle::from_raw(objects::raw(qp)), &attr, mask.0).map_err(|e| verbs_status(&e))
        })
    }

    fn query_qp(&mut self, qp: ObjId, _attr_mask: u32) -> Result<cmd::QueryQpResp, Status> {
        let q = self.u.objs.qps.get(&qp).ok_or(Status::ENOENT)?;
        // Every attribute is answered, whatever the mask asks (as rxe does).
        let attr = self.access.with_transport(q.dev, |t, _, _| {
            t.query_qp(QpHandle::from_raw(objects::raw(qp))).map_err(|e| verbs_status(&e))
        })?;
        Ok(objects::query_resp(&attr, q))
    }

    fn destroy_qp(&mut self, qp: ObjId) -> Result<(), Status> {
        if self.gone_with_device(qp) {
            return Ok(());
        }
        let dev = self.u.objs.qps.get(&qp).map(|q| q.dev).ok_or(Status::ENOENT)?;
        self.access.with_transport(dev, |t, _, _| {
            t.destroy_qp(QpHandle::from_raw(objects::raw(qp))).map_err(|e| verbs_status(&e))
        })?;
        self.u.objs.qps.remove(&qp);
        Ok(())
    }

    fn create_srq(&mut self, srq: &SrqSpec) -> Result<Created, Status> {
        let (h, ring) = self.access.with_transport(srq.dev_index, |t, _, shm| {
            let ring = objects::ring_geometry(srq.ring, shm.len())?;
            // The transport wants at least one SGE per WQE; an entry with
            // none still fits.
            let h = t
                .create_srq(PdHandle::from_raw(objects::raw(srq.pd)), srq.max_wr, srq.max_sge.max(1))
                .map_err(|e| verbs_status(&e))?;
            if srq.srq_limit > 0
                && let Err(e) = t.modify_srq_limit(h, srq.srq_limit)
            {
                let _ = t.destroy_srq(h);
                return Err(verbs_status(&e));
            }
            Ok((h, ring))
        })?;
        let obj = SrqObj { dev: srq.dev_index, ring: Consumer::new(ring), max_sge: srq.max_sge, failed: false };
        let id = objects::obj_id(srq.dev_index, h.raw())?;
        self.u.objs.srqs.insert(id, obj);
        Ok(Created { id, num: h.raw() })
    }

    fn modify_srq(&mut self, srq: ObjId, attr_mask: u32, _max_wr: u32, srq_limit: u32) -> Result<(), Status> {
        let dev = self.u.objs.srqs.get(&srq).map(|s| s.dev).ok_or(Status::ENOENT)?;
        // Resizing moves the ring, which the host must hear of: that is
        // RESIZE_SRQ, whose answer names the new ring.
        if attr_mask & cmd::srq_attr_mask::MAX_WR != 0 {
            return Err(Status::EOPNOTSUPP);
        }
        if attr_mask & cmd::srq_attr_mask::LIMIT == 0 {
            return Ok(());
        }
        self.access.with_transport(dev, |t, _, _| {
            t.modify_srq_limit(SrqHandle::from_raw(objects::raw(srq)), srq_limit).map_err(|e| verbs_status(&e))
        })
    }

    fn resize_srq(&mut self, srq: ObjId, max_wr: u32, ring: RingPlacement) -> Result<u32, Status> {
        let CoreVerbs { access, u } = self;
        let s = u.objs.srqs.get_mut(&srq).ok_or(Status::ENOENT)?;
        // rxe refuses to modify an SRQ in error; ours is one whose ring broke.
        if s.failed {
            return Err(Status::EINVAL);
        }
        access.with_transport(s.dev, |t, _, shm| {
            let geo = objects::ring_geometry(ring, shm.len())?;
            let h = SrqHandle::from_raw(objects::raw(srq));
            // What the host posted and the pump has not taken yet is posted
            // too: the new size must hold both.
            let unread = s.ring.available(shm).map_err(|_| Status::EIO)?;
            let taken = t.srq(h).map_or(0, |q| q.queue.len());
            if taken.saturating_add(unread as usize) > max_wr as usize {
                return Err(Status::EINVAL);
            }
            t.resize_srq(h, max_wr).map_err(|e| verbs_status(&e))?;
            // The unread entries move, in order and as written, to the head
            // of the new ring (rxe_queue_resize copies its queue the same
            // way): the pump validates them there as it would have here.
            let mut into = Producer::new(geo);
            let mut entry = alloc::vec![0u8; geo.entry_size()];
            let moved = loop {
                match s.ring.pop(shm, &mut entry) {
                    Ok(true) if into.push(shm, &entry).is_ok() => {}
                    Ok(false) => break Ok(into.index()),
                    // The host broke its old ring's indices while we read
                    // it: what was left of it is lost, the SRQ is done.
                    _ => break Err(Status::EIO),
                }
            };
            match moved {
                Ok(_) => s.ring = Consumer::new(geo),
                Err(_) => s.failed = true,
            }
            moved
        })
    }

    fn destroy_srq(&mut self, srq: ObjId) -> Result<(), Status> {
        if self.gone_with_device(srq) {
            return Ok(());
        }
        let dev = self.u.objs.srqs.get(&srq).map(|s| s.dev).ok_or(Status::ENOENT)?;
        self.access.with_transport(dev, |t, _, _| {
            t.destroy_srq(SrqHandle::from_raw(objects::raw(srq))).map_err(|e| verbs_status(&e))
        })?;
        self.u.objs.srqs.remove(&srq);
        Ok(())
    }

    fn create_ah(&mut self, dev: u32, pd: ObjId, attr: &cmd::AhAttr) -> Result<ObjId, Status> {
        let attr = objects::ah_attr(self.access, dev, attr, self.u.now)?;
        let h = self.access.with_transport(dev, |t, _, _| {
            t.create_ah(PdHandle::from_raw(objects::raw(pd)), &attr).map_err(|e| verbs_status(&e))
        })?;
        let id = objects::obj_id(dev, h.raw())?;
        self.u.objs.ahs.insert(id, dev);
        Ok(id)
    }

    fn destroy_ah(&mut self, ah: ObjId) -> Result<(), Status> {
        if self.gone_with_device(ah) {
            return Ok(());
        }
        let dev = self.u.objs.ahs.get(&ah).copied().ok_or(Status::ENOENT)?;
        self.access.with_transport(dev, |t, _, _| {
            t.destroy_ah(AhHandle::from_raw(objects::raw(ah))).map_err(|e| verbs_status(&e))
        })?;
        self.u.objs.ahs.remove(&ah);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
