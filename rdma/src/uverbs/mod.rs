//! The verbs the appliance serves to host programs over the shared-memory ring
//! (the seed's §5, uverbs): a `verbs_ring::VerbsProvider` backed by the RDMA
//! core. Queries, counters and the link control messages answer from the core;
//! the object commands (PD, MR, CQ, QP, ...) join when the rxe transport does,
//! and until then are absent from the capability set, so the dispatcher
//! refuses them with "operation not supported" before any handler runs.

use crate::core::{Error, GidType, NetdevProvider, RdmaCore, RxeCounter};
use verbs_ring::cmd::{
    self, CountersResp, DEV_NAME_LEN, GidEntry, IFNAME_LEN, LinkInfo, MAX_COUNTERS, NO_MORE, Status,
};
use verbs_ring::dispatch::VerbsProvider;
use verbs_ring::table::{Cap, CapSet};

/// How the provider reaches the core and the netdevs for the length of one
/// command (the kernel keeps both behind its own cell).
pub trait CoreAccess {
    fn with<R>(&self, f: impl FnOnce(&mut RdmaCore, &dyn NetdevProvider) -> Result<R, Status>) -> Result<R, Status>;
}

/// The verbs provider over the core.
pub struct CoreVerbs<A: CoreAccess> {
    access: A,
}

impl<A: CoreAccess> CoreVerbs<A> {
    pub fn new(access: A) -> Self {
        CoreVerbs { access }
    }
}

/// The core's error as a ring status (its Linux errno).
pub fn status(e: &Error) -> Status {
    u16::try_from(e.errno()).map_or(Status::EIO, Status)
}

fn name_field<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let n = s.len().min(N - 1);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
    out
}

fn device_attr(d: &crate::core::DeviceAttr, ports: u32) -> cmd::DeviceAttr {
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
        reserved: 0,
    }
}

fn port_attr(p: &crate::core::PortAttr) -> cmd::PortAttr {
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

fn link_info(core: &RdmaCore, dev: u32, port: u32) -> Result<LinkInfo, Status> {
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
        dev_name: name_field::<DEV_NAME_LEN>(d.name()),
        netdev: name_field::<IFNAME_LEN>(&d.netdev().name),
    })
}

impl<A: CoreAccess> VerbsProvider for CoreVerbs<A> {
    fn caps(&self) -> CapSet {
        CapSet::of(&[Cap::QueryDevice, Cap::QueryPort, Cap::QueryGid, Cap::QueryPkey, Cap::HwStats, Cap::LinkOps])
    }

    fn query_device(&mut self, dev: u32) -> Result<cmd::DeviceAttr, Status> {
        self.access.with(|core, _| {
            let d = core.device(dev).ok_or(Status::ENODEV)?;
            Ok(device_attr(d.attr(), d.phys_port_cnt()))
        })
    }

    fn query_port(&mut self, dev: u32, port: u32) -> Result<cmd::PortAttr, Status> {
        self.access.with(|core, _| core.query_port(dev, port).map(port_attr).map_err(|e| status(&e)))
    }

    fn query_gid(&mut self, dev: u32, port: u32, index: u32) -> Result<GidEntry, Status> {
        self.access.with(|core, _| {
            let entry = core.query_gid(dev, port, index as usize).map_err(|e| status(&e))?;
            Ok(match entry {
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
            })
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
}

#[cfg(test)]
mod tests;
