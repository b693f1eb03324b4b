//! A device inside the appliance (`rxe0`): queries (`ibv_query_device`,
//! `ibv_query_port`, `ibv_query_gid`, the GID table, `ibv_query_pkey`),
//! counters, resource counts, and the roots of the object tree:
//! protection domains and completion queues.

use verbs_ring::cmd::{self, nr};
use verbs_ring::show::{DeviceView, PortView};

use crate::context::{Context, Link};
use crate::error::{Error, Result};
use crate::pd::Pd;
use crate::queue::Cq;
use verbs_ring::show::rdma_stat::COUNTER_NAMES;

pub use verbs_ring::cmd::{DeviceAttr, GidEntry, PortAttr};

/// One device of the appliance, seen through one [`Context`].
#[derive(Clone)]
pub struct Device {
    pub(crate) ctx: Context,
    link: Link,
}

/// Objects of one device in the whole appliance (every context), for
/// `rdma resource show`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceCounts {
    pub qp: u32,
    pub ah: u32,
    pub srq: u32,
    pub mr: u32,
    pub cq: u32,
    pub pd: u32,
    /// Contexts that own at least one object on the device.
    pub ctx: u32,
}

impl ResourceCounts {
    pub fn total_objects(&self) -> u32 {
        self.qp + self.ah + self.srq + self.mr + self.cq + self.pd
    }
}

impl Device {
    pub(crate) fn new(ctx: Context, link: Link) -> Device {
        Device { ctx, link }
    }

    /// Attach to `ring` and open device `name` (the first when `None`).
    pub fn open(ring: &std::path::Path, name: Option<&str>) -> Result<Device> {
        Context::open(ring)?.device(name)
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }

    pub fn name(&self) -> &str {
        &self.link.name
    }

    pub fn index(&self) -> u32 {
        self.link.dev_index
    }

    /// The link as it was when the device was opened.
    pub fn link(&self) -> &Link {
        &self.link
    }

    fn dev_req(&self) -> cmd::DevReq {
        cmd::DevReq { dev_index: self.index(), reserved: 0 }
    }

    pub fn query_device(&self) -> Result<DeviceAttr> {
        self.ctx.inner.call(nr::QUERY_DEVICE, &self.dev_req())
    }

    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        self.ctx.inner.call(nr::QUERY_PORT, &cmd::PortReq { dev_index: self.index(), port_num: u32::from(port) })
    }

    /// GID entry `index` of `port` (an empty slot has `valid == 0`).
    pub fn query_gid(&self, port: u8, index: u32) -> Result<GidEntry> {
        let req = cmd::GidReq { dev_index: self.index(), port_num: u32::from(port), index, reserved: 0 };
        self.ctx.inner.call(nr::QUERY_GID, &req)
    }

    /// Every valid GID entry of `port` (`ibv_query_gid_table`), paged.
    pub fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        let mut out = Vec::new();
        let mut index = 0;
        for _ in 0..4096 {
            let req = cmd::GidReq { dev_index: self.index(), port_num: u32::from(port), index, reserved: 0 };
            let page: cmd::GidTablePage = self.ctx.inner.call(nr::QUERY_GID_TABLE, &req)?;
            let n = (page.count as usize).min(cmd::GID_PAGE);
            out.extend(page.entries[..n].iter().copied());
            if page.next == cmd::NO_MORE {
                return Ok(out);
            }
            if page.next <= index {
                return Err(Error::Protocol(format!("GID table paging went from {index} back to {}", page.next)));
            }
            index = page.next;
        }
        Err(Error::Protocol("GID table paging did not end".into()))
    }

    /// What the tools print about this device (`verbs_ring::show`): its
    /// link, attributes, and every port (or only `only_port`) with its GIDs.
    pub fn view(&self, only_port: Option<u8>) -> Result<DeviceView> {
        let attr = self.query_device()?;
        let mut ports = Vec::new();
        for num in 1..=attr.phys_port_cnt {
            if only_port.is_some_and(|p| p != num) {
                continue;
            }
            ports.push(PortView { num: u32::from(num), attr: self.query_port(num)?, gids: self.gid_table(num)? });
        }
        Ok(DeviceView { link: self.link.info, attr, ports })
    }

    pub fn query_pkey(&self, port: u8, index: u32) -> Result<u16> {
        let req = cmd::GidReq { dev_index: self.index(), port_num: u32::from(port), index, reserved: 0 };
        let r: cmd::PkeyResp = self.ctx.inner.call(nr::QUERY_PKEY, &req)?;
        Ok(r.pkey)
    }

    /// The port's hardware counters, named (`rdma statistic show`).
    pub fn counters(&self, port: u8) -> Result<Vec<(&'static str, u64)>> {
        let req = cmd::PortReq { dev_index: self.index(), port_num: u32::from(port) };
        let r: cmd::CountersResp = self.ctx.inner.call(nr::QUERY_COUNTERS, &req)?;
        let n = (r.num_counters as usize).min(cmd::MAX_COUNTERS);
        Ok((0..n).map(|i| (COUNTER_NAMES.get(i).copied().unwrap_or("unknown"), r.values[i])).collect())
    }

    /// Objects on this device in the whole appliance.
    pub fn resources(&self) -> Result<ResourceCounts> {
        let r: cmd::ResourceCounts = self.ctx.inner.call(nr::QUERY_RESOURCES, &self.dev_req())?;
        let [qp, ah, srq, mr, cq, pd] = r.counts;
        Ok(ResourceCounts { qp, ah, srq, mr, cq, pd, ctx: r.contexts })
    }

    /// The QUERY_RESOURCES answer as the ring carries it (what
    /// `verbs_ring::show::rdma_res` prints).
    pub fn resource_counts(&self) -> Result<cmd::ResourceCounts> {
        self.ctx.inner.call(nr::QUERY_RESOURCES, &self.dev_req())
    }

    /// Every object of `kind` (one of [`cmd::res_kind`]) on the device, in
    /// every context, as RES_ENTRY pages them (what
    /// `verbs_ring::show::rdma_res_obj` prints).
    pub fn res_entries(&self, kind: u32) -> Result<Vec<cmd::ResEntry>> {
        let mut all = Vec::new();
        let mut cursor = 0;
        loop {
            let req = cmd::ResEntryReq { dev_index: self.dev_req().dev_index, kind, cursor, reserved: 0 };
            let e: cmd::ResEntry = match self.ctx.inner.call(nr::RES_ENTRY, &req) {
                Ok(e) => e,
                // Past the last object (or none at all).
                Err(e) if e.status() == Some(cmd::Status::ENOENT) => return Ok(all),
                Err(e) => return Err(e),
            };
            all.push(e);
            // Cursors only grow: a firmware answering otherwise would loop.
            if e.next == cmd::NO_MORE || e.next <= cursor {
                return Ok(all);
            }
            cursor = e.next;
        }
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&self) -> Result<Pd<'_>> {
        let r: cmd::HandleResp = self.ctx.inner.call(nr::ALLOC_PD, &self.dev_req())?;
        Ok(Pd::new(self, r.handle))
    }

    /// `ibv_create_cq` with at least `cqe` entries.
    pub fn create_cq(&self, cqe: u32, user_handle: u64) -> Result<Cq<'_>> {
        Cq::create(self, cqe, user_handle)
    }
}
