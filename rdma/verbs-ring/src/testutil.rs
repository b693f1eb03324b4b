//! A fake [`VerbsProvider`] for tests: objects are numbers, every call is
//! logged, and it checks on its own that nothing is destroyed while an
//! object using it is alive (so a wrong teardown order is caught by the
//! fake, not just by the dispatcher's bookkeeping).

use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::abi::{ContextSlot, Layout, RingPlacement};
use crate::cm::*;
use crate::cmd::*;
use crate::dispatch::Dispatcher;
use crate::dispatch::{CmEventOut, CqSpec, Created, MrKeys, MrSpec, ObjId, ObjKind, QpSpec, SrqSpec, VerbsProvider};
use crate::firmware::Firmware;
use crate::shm::fake::HeapShm;
use crate::table::CapSet;

pub struct FakeProvider {
    pub caps: CapSet,
    pub log: Vec<String>,
    /// Live objects: (kind, id) -> (kinds, ids) it uses.
    pub live: BTreeMap<(ObjKind, ObjId), Vec<(ObjKind, ObjId)>>,
    /// Destroys of an object still in use by a live one.
    pub order_violations: Vec<String>,
    next: ObjId,
    /// Devices that exist (index -> name).
    pub devices: BTreeMap<u32, String>,
    /// When set, the named op fails with this status.
    pub fail: Option<(&'static str, Status)>,
    /// When set, create ops return this id (to test id reuse).
    pub force_id: Option<ObjId>,
    /// CM events scripted per context, handed out by `cm_get_event`.
    pub cm_events: VecDeque<(u32, CmEventOut)>,
    /// What `cm_init_qp_attr` answers as the mask.
    pub cm_init_mask: u32,
}

impl FakeProvider {
    pub fn new() -> Self {
        let mut devices = BTreeMap::new();
        devices.insert(0, String::from("rxe0"));
        devices.insert(1, String::from("rxe1"));
        FakeProvider {
            caps: CapSet::all(),
            log: Vec::new(),
            live: BTreeMap::new(),
            order_violations: Vec::new(),
            next: 100,
            devices,
            fail: None,
            force_id: None,
            cm_events: VecDeque::new(),
            cm_init_mask: qp_attr_mask::STATE | qp_attr_mask::PKEY_INDEX | qp_attr_mask::PORT,
        }
    }

    /// Script a CONNECT_REQUEST on `listener` for context `ctx`: the new id
    /// exists in the fake as the firmware's would.
    pub fn cm_request(&mut self, ctx: u32, listener: ObjId, private: &[u8]) -> ObjId {
        self.next += 1;
        let id = self.next;
        self.live.insert((ObjKind::CmId, id), Vec::new());
        let param = CmConnParam::default().with_private(private).unwrap_or_default();
        let ev = CmEventOut { id: listener, new_id: Some(id), event: cm_event::CONNECT_REQUEST, status: 0, param };
        self.cm_events.push_back((ctx, ev));
        id
    }

    /// The fake's id of the one live CM id created with `cm_create_id` last.
    pub fn last_cm_id(&self) -> Option<ObjId> {
        self.live.keys().filter(|(k, _)| *k == ObjKind::CmId).map(|(_, id)| *id).max()
    }

    fn check(&self, op: &'static str) -> Result<(), Status> {
        match self.fail {
            Some((f, s)) if f == op => Err(s),
            _ => Ok(()),
        }
    }

    fn dev(&self, dev: u32) -> Result<(), Status> {
        if self.devices.contains_key(&dev) { Ok(()) } else { Err(Status::ENODEV) }
    }

    fn create(&mut self, op: &'static str, kind: ObjKind, uses: Vec<(ObjKind, ObjId)>) -> Result<ObjId, Status> {
        self.check(op)?;
        let id = self.force_id.unwrap_or_else(|| {
            self.next += 1;
            self.next
        });
        self.live.insert((kind, id), uses);
        self.log.push(format!("{op} {id}"));
        Ok(id)
    }

    fn destroy(&mut self, op: &'static str, kind: ObjKind, id: ObjId) -> Result<(), Status> {
        self.check(op)?;
        if !self.live.contains_key(&(kind, id)) {
            return Err(Status::ENOENT);
        }
        if let Some(user) = self.live.iter().find(|(_, uses)| uses.contains(&(kind, id))) {
            self.order_violations.push(format!("{op} {id} while {:?} uses it", user.0));
        }
        self.live.remove(&(kind, id));
        self.log.push(format!("{op} {id}"));
        Ok(())
    }

    /// The log entries whose op starts with `prefix`.
    pub fn calls(&self, prefix: &str) -> usize {
        self.log.iter().filter(|l| l.starts_with(prefix)).count()
    }
}

impl VerbsProvider for FakeProvider {
    fn caps(&self) -> CapSet {
        self.caps
    }
    fn query_device(&mut self, dev: u32) -> Result<DeviceAttr, Status> {
        self.dev(dev)?;
        Ok(DeviceAttr { vendor_id: 0xffffff, max_qp: 64, phys_port_cnt: 1, ..Default::default() })
    }
    fn query_port(&mut self, dev: u32, port: u32) -> Result<PortAttr, Status> {
        self.dev(dev)?;
        if port != 1 {
            return Err(Status::EINVAL);
        }
        Ok(PortAttr { state: 4, gid_tbl_len: 16, link_layer: 2, ..Default::default() })
    }
    fn query_gid(&mut self, dev: u32, port: u32, index: u32) -> Result<GidEntry, Status> {
        self.query_port(dev, port)?;
        if index >= 16 {
            return Err(Status::EINVAL);
        }
        // Entries 0, 1 and every odd index above 4 are valid.
        let valid = index < 2 || (index > 4 && index % 2 == 1);
        let mut gid = [0u8; 16];
        gid[15] = index as u8;
        Ok(GidEntry { gid, index, gid_type: gid_type::ROCE_V2, ndev_ifindex: 2, valid: u32::from(valid) })
    }
    fn query_pkey(&mut self, dev: u32, port: u32, index: u32) -> Result<u16, Status> {
        self.query_port(dev, port)?;
        if index == 0 { Ok(0xffff) } else { Err(Status::EINVAL) }
    }
    fn alloc_pd(&mut self, dev: u32) -> Result<ObjId, Status> {
        self.dev(dev)?;
        self.create("alloc_pd", ObjKind::Pd, Vec::new())
    }
    fn dealloc_pd(&mut self, pd: ObjId) -> Result<(), Status> {
        self.destroy("dealloc_pd", ObjKind::Pd, pd)
    }
    fn reg_mr(&mut self, pd: ObjId, _mr: &MrSpec) -> Result<MrKeys, Status> {
        let id = self.create("reg_mr", ObjKind::Mr, alloc::vec![(ObjKind::Pd, pd)])?;
        Ok(MrKeys { id, lkey: id << 8, rkey: (id << 8) | 1 })
    }
    fn dereg_mr(&mut self, mr: ObjId) -> Result<(), Status> {
        self.destroy("dereg_mr", ObjKind::Mr, mr)
    }
    fn alloc_mr(&mut self, pd: ObjId, _max_num_sg: u32) -> Result<MrKeys, Status> {
        let id = self.create("alloc_mr", ObjKind::Mr, alloc::vec![(ObjKind::Pd, pd)])?;
        Ok(MrKeys { id, lkey: id << 8, rkey: id << 8 })
    }
    fn map_mr_sg(&mut self, mr: ObjId, map: &crate::dispatch::MrMap<'_>) -> Result<(), Status> {
        self.check("map_mr_sg")?;
        self.log.push(format!("map_mr_sg {mr} {:x?}", map.pages));
        Ok(())
    }
    fn alloc_mw(&mut self, pd: ObjId, _mw_type: u32) -> Result<(ObjId, u32), Status> {
        let id = self.create("alloc_mw", ObjKind::Mw, alloc::vec![(ObjKind::Pd, pd)])?;
        Ok((id, (id + 0x1_0000) << 8))
    }
    fn mcast(&mut self, qp: ObjId, gid: &[u8; 16], attach: bool) -> Result<(), Status> {
        self.check("mcast")?;
        if !self.live.contains_key(&(ObjKind::Qp, qp)) {
            return Err(Status::ENOENT);
        }
        self.log.push(format!("mcast {qp} {:02x} {attach}", gid[0]));
        Ok(())
    }
    fn dealloc_mw(&mut self, mw: ObjId) -> Result<(), Status> {
        self.destroy("dealloc_mw", ObjKind::Mw, mw)
    }
    fn create_cq(&mut self, cq: &CqSpec) -> Result<ObjId, Status> {
        self.dev(cq.dev_index)?;
        self.create("create_cq", ObjKind::Cq, Vec::new())
    }
    fn destroy_cq(&mut self, cq: ObjId) -> Result<(), Status> {
        self.destroy("destroy_cq", ObjKind::Cq, cq)
    }
    fn create_qp(&mut self, qp: &QpSpec) -> Result<Created, Status> {
        let mut uses = alloc::vec![(ObjKind::Pd, qp.pd), (ObjKind::Cq, qp.send_cq), (ObjKind::Cq, qp.recv_cq)];
        if let Some(s) = qp.srq {
            uses.push((ObjKind::Srq, s));
        }
        let id = self.create("create_qp", ObjKind::Qp, uses)?;
        Ok(Created { id, num: id + 0x10 })
    }
    fn modify_qp(&mut self, qp: ObjId, attr_mask: u32, _attr: &QpAttr, alt: &AltPath) -> Result<(), Status> {
        self.check("modify_qp")?;
        self.log.push(format!("modify_qp {qp} {attr_mask:#x} alt_port {}", alt.alt_port_num));
        Ok(())
    }
    fn query_qp(&mut self, _qp: ObjId, _attr_mask: u32) -> Result<QueryQpResp, Status> {
        Ok(QueryQpResp { qp_type: qp_type::RC, ..Default::default() })
    }
    fn destroy_qp(&mut self, qp: ObjId) -> Result<(), Status> {
        self.destroy("destroy_qp", ObjKind::Qp, qp)
    }
    fn create_srq(&mut self, srq: &SrqSpec) -> Result<Created, Status> {
        let id = self.create("create_srq", ObjKind::Srq, alloc::vec![(ObjKind::Pd, srq.pd)])?;
        Ok(Created { id, num: id })
    }
    fn modify_srq(&mut self, _srq: ObjId, _mask: u32, _max_wr: u32, _limit: u32) -> Result<(), Status> {
        Ok(())
    }
    fn resize_srq(&mut self, srq: ObjId, max_wr: u32, _ring: RingPlacement) -> Result<u32, Status> {
        self.check("resize_srq")?;
        self.log.push(format!("resize_srq {srq} {max_wr}"));
        Ok(0)
    }
    fn destroy_srq(&mut self, srq: ObjId) -> Result<(), Status> {
        self.destroy("destroy_srq", ObjKind::Srq, srq)
    }
    fn create_ah(&mut self, _dev: u32, pd: ObjId, _attr: &AhAttr) -> Result<ObjId, Status> {
        self.create("create_ah", ObjKind::Ah, alloc::vec![(ObjKind::Pd, pd)])
    }
    fn destroy_ah(&mut self, ah: ObjId) -> Result<(), Status> {
        self.destroy("destroy_ah", ObjKind::Ah, ah)
    }
    fn query_counters(&mut self, dev: u32, _port: u32) -> Result<CountersResp, Status> {
        self.dev(dev)?;
        let mut values = [0u64; MAX_COUNTERS];
        values[0] = 42;
        Ok(CountersResp { num_counters: 15, reserved: 0, values })
    }
    fn link_add(&mut self, name: &str, link_type: &str, netdev: &str) -> Result<u32, Status> {
        if link_type != "rxe" {
            return Err(Status::EINVAL);
        }
        if self.devices.values().any(|n| n == name) {
            return Err(Status::EEXIST);
        }
        let idx = self.devices.keys().last().map_or(0, |k| k + 1);
        self.devices.insert(idx, String::from(name));
        self.log.push(format!("link_add {name} {netdev}"));
        Ok(idx)
    }
    fn cm_create_id(&mut self, _ctx: u32, _uid: u64, _ps: u16, _qp_type: u8) -> Result<ObjId, Status> {
        self.create("cm_create_id", ObjKind::CmId, Vec::new())
    }
    fn cm_destroy_id(&mut self, id: ObjId) -> Result<u32, Status> {
        self.destroy("cm_destroy_id", ObjKind::CmId, id)?;
        Ok(3)
    }
    fn cm_bind(&mut self, id: ObjId, addr: &CmSockAddr) -> Result<(), Status> {
        self.check("cm_bind")?;
        self.log.push(format!("cm_bind {id} {}", addr.port));
        Ok(())
    }
    fn cm_resolve_addr(&mut self, id: ObjId, _src: &CmSockAddr, _dst: &CmSockAddr, ms: u32) -> Result<(), Status> {
        self.log.push(format!("cm_resolve_addr {id} {ms}"));
        Ok(())
    }
    fn cm_resolve_route(&mut self, id: ObjId, ms: u32) -> Result<(), Status> {
        self.log.push(format!("cm_resolve_route {id} {ms}"));
        Ok(())
    }
    fn cm_query_route(&mut self, _id: ObjId) -> Result<CmRoute, Status> {
        Ok(CmRoute { dev_index: 0, port_num: 1, num_paths: 1, ..Default::default() })
    }
    fn cm_listen(&mut self, id: ObjId, backlog: u32) -> Result<(), Status> {
        self.log.push(format!("cm_listen {id} {backlog}"));
        Ok(())
    }
    fn cm_connect(&mut self, id: ObjId, p: &CmConnParam) -> Result<(), Status> {
        self.log.push(format!("cm_connect {id} {}", p.private_data_len));
        Ok(())
    }
    fn cm_accept(&mut self, id: ObjId, p: &CmConnParam) -> Result<(), Status> {
        self.log.push(format!("cm_accept {id} {}", p.qp_num));
        Ok(())
    }
    fn cm_reject(&mut self, id: ObjId, private: &[u8]) -> Result<(), Status> {
        self.log.push(format!("cm_reject {id} {}", private.len()));
        Ok(())
    }
    fn cm_disconnect(&mut self, id: ObjId) -> Result<(), Status> {
        self.log.push(format!("cm_disconnect {id}"));
        Ok(())
    }
    fn cm_init_qp_attr(&mut self, _id: ObjId, qp_state: u32) -> Result<(u32, QpAttr), Status> {
        Ok((self.cm_init_mask, QpAttr { qp_state, ..Default::default() }))
    }
    fn cm_get_event(&mut self, ctx: u32) -> Result<CmEventOut, Status> {
        let i = self.cm_events.iter().position(|(c, _)| *c == ctx).ok_or(Status::EAGAIN)?;
        self.cm_events.remove(i).map(|(_, e)| e).ok_or(Status::EAGAIN)
    }
    fn link_del(&mut self, dev: u32) -> Result<(), Status> {
        self.devices.remove(&dev).map(|_| ()).ok_or(Status::ENODEV)
    }
    fn link_show(&mut self, dev: u32, _port: u32) -> Result<LinkInfo, Status> {
        let (&idx, name) = self.devices.range(dev..).next().ok_or(Status::ENODEV)?;
        let next = self.devices.range(idx + 1..).next().map_or(NO_MORE, |(k, _)| *k);
        Ok(LinkInfo {
            dev_index: idx,
            port_num: 1,
            port_state: 4,
            next,
            dev_name: crate::wire::name_field(name).map_err(|_| Status::ENAMETOOLONG)?,
            ..Default::default()
        })
    }
}

/// A firmware over the fake region with the provider it is handed on every tick.
pub struct Fw {
    pub fw: Firmware,
    pub p: FakeProvider,
}

impl Fw {
    /// Lays the region out and publishes READY, as `Firmware::new` does.
    pub fn new(mem: &HeapShm, layout: Layout, limits: crate::dispatch::Limits, budget: u32) -> Fw {
        let fw = Firmware::new(mem, layout, limits, budget).unwrap_or_else(|e| panic!("firmware: {e:?}"));
        Fw { fw, p: FakeProvider::new() }
    }

    pub fn tick(&mut self, mem: &HeapShm) -> Result<crate::firmware::TickReport, crate::shm::ShmError> {
        self.fw.tick(mem, &mut self.p)
    }

    pub fn dispatcher(&self) -> &Dispatcher {
        self.fw.dispatcher()
    }

    pub fn detach(&mut self, ctx: u32) {
        self.fw.dispatcher_mut().detach(&mut self.p, ctx);
    }

    pub fn layout(&self) -> &Layout {
        self.fw.layout()
    }

    pub fn read_slot(&self, mem: &HeapShm, ctx: u32) -> Option<ContextSlot> {
        self.fw.read_slot(mem, ctx)
    }

    pub fn fail(&mut self, mem: &HeapShm, code: Status) -> Result<(), crate::shm::ShmError> {
        self.fw.fail(mem, &mut self.p, code)
    }
}
