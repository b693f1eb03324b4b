//! The facade the kernel holds: one [`RdmaCore`] owns the device and client
//! registries, the GID caches (inside each device's ports), the counters, the
//! link types and the ordered netdev event queue.
//!
//! The kernel calls, from its poll loop and console:
//! - [`RdmaCore::netdev_event`] from its netdev/inetaddr notifiers (enqueue
//!   only), then [`RdmaCore::process_events`] to drain the queue in order;
//! - [`RdmaCore::nldev`] (or the [`RdmaCore::link_add`] / [`RdmaCore::link_del`]
//!   shorthands) for `rdma link add/delete`, `rdma dev`, `rdma link show`;
//! - the lookups (`query_gid`, `find_gid`, `query_pkey`, `device*`) and the
//!   text formatters in [`show`](super::show) for the console.
//!
//! Registration follows `ib_register_device` step by step (seed §2), see
//! [`RdmaCore::register_device`].

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::any::Any;

use super::client::{Client, ClientContexts, ClientId, ClientRegistry};
use super::counters::Counters;
use super::device::{Device, DeviceAttr, Driver};
use super::error::Error;
use super::event::{EventHandler, EventHandlers, HandlerId, IbEvent};
use super::gid::{Gid, GidType};
use super::gid_cache::{GidAttr, GidKey, GidMask};
use super::link::{LinkOps, LinkOpsRegistry, RxeDriverFactory, RxeLinkOps};
use super::netdev::{IfIndex, NetdevEvent, NetdevInfo, NetdevProvider};
use super::notifier::{note_transition, rescan_device};
use super::port::{Port, PortAttr};
use super::registry::DeviceRegistry;
use super::workqueue::{DEFAULT_QUEUE_LIMIT, OrderedQueue};

/// Bound on ports per device.
pub const MAX_PORTS: u32 = 8;

/// Where a GID was found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct GidLocation {
    pub device_index: u32,
    pub port: u32,
    pub index: usize,
}

/// Core-wide statistics, for the console and for tests.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CoreStats {
    /// Netdev events drained from the queue.
    pub events_processed: u64,
    /// GID adds refused because a table was full (all devices).
    pub gid_table_full: u64,
}

/// The RDMA core.
pub struct RdmaCore {
    pub(crate) devices: DeviceRegistry,
    pub(crate) clients: ClientRegistry,
    pub(crate) contexts: ClientContexts,
    pub(crate) handlers: EventHandlers,
    pub(crate) link_ops: LinkOpsRegistry,
    pub(crate) queue: OrderedQueue<NetdevEvent>,
    pub(crate) stats: CoreStats,
}

impl Default for RdmaCore {
    fn default() -> Self {
        Self::new()
    }
}

impl RdmaCore {
    /// An empty core with no link types registered.
    pub fn new() -> Self {
        RdmaCore {
            devices: DeviceRegistry::new(),
            clients: ClientRegistry::default(),
            contexts: ClientContexts::default(),
            handlers: EventHandlers::default(),
            link_ops: LinkOpsRegistry::default(),
            queue: OrderedQueue::new(DEFAULT_QUEUE_LIMIT),
            stats: CoreStats::default(),
        }
    }

    /// A core with the "rxe" link type registered, building drivers with
    /// `factory`.
    pub fn with_rxe(factory: RxeDriverFactory) -> Self {
        let mut core = Self::new();
        // A fresh registry has no "rxe" yet, so this cannot collide.
        let _ = core.register_link_ops(Box::new(RxeLinkOps::new(factory)));
        core
    }

    // ------------------------------------------------------------------
    // Devices (ib_register_device / ib_unregister_device)
    // ------------------------------------------------------------------

    /// `ib_register_device`: register `driver` under `name` (a `%d` pattern
    /// takes the lowest free index), bound to `ndev`. Returns the index.
    ///
    /// 1. assign a unique name;
    /// 2. check the mandatory driver ops;
    /// 3. per port, read the immutable data once and verify it;
    /// 4. query the device attributes;
    /// 5. set the active MTU from the netdev, set up the GID tables and fill
    ///    them from the netdev's current addresses (`rdma_roce_rescan_device`:
    ///    `net` is asked for VLAN netdevs on top of `ndev`);
    /// 6. set up counters, mark the device live, run the driver's
    ///    `enable_driver` and set the port state from the netdev, then call
    ///    every client's `add` in client registration order.
    pub fn register_device(
        &mut self,
        net: &dyn NetdevProvider,
        driver: Box<dyn Driver>,
        name: &str,
        ndev: &NetdevInfo,
    ) -> Result<u32, Error> {
        self.register_device_inner(net, driver, name, ndev, false)
    }

    pub(crate) fn register_device_inner(
        &mut self,
        net: &dyn NetdevProvider,
        driver: Box<dyn Driver>,
        name: &str,
        ndev: &NetdevInfo,
        created_by_link: bool,
    ) -> Result<u32, Error> {
        let name = self.devices.assign_name(name)?;

        let ops = driver.ops();
        if let Some(op) = ops.first_missing_mandatory() {
            return Err(Error::MissingDriverOp(op.name()));
        }
        let nports = driver.phys_port_cnt();
        if nports == 0 || nports > MAX_PORTS {
            return Err(Error::InvalidPortCount(nports));
        }
        let mut ports = Vec::new();
        for num in 1..=nports {
            let immutable = driver.get_port_immutable(num)?;
            let attr = driver.query_port(num)?;
            let mut port = Port::new(num, attr, immutable)?;
            port.set_netdev_mtu(ndev.mtu);
            ports.push(port);
        }
        let attr = driver.query_device()?;

        // Only now take an index: a refused driver must not consume one.
        let index = self.devices.alloc_index()?;
        let mut dev = Device {
            index,
            name,
            driver_id: driver.driver_id(),
            node_type: driver.node_type(),
            fw_str: driver.dev_fw_str(),
            ops,
            attr,
            ports,
            netdev: ndev.clone(),
            link_downed: 0,
            created_by_link,
            driver,
        };
        let mut full = 0;
        rescan_device(&mut dev, net, &mut full);
        self.stats.gid_table_full += full;

        dev.driver.enable_driver()?;
        let mut events = Vec::new();
        for port in dev.ports.iter_mut() {
            let t = port.follow_netdev(ndev);
            note_transition(index, port, t, &mut dev.link_downed, &mut events);
            dev.driver.port_changed(port.num(), port.attr());
        }
        self.devices.insert(dev);
        // No handler can exist yet for a fresh index; dispatching keeps the
        // rule "every transition is announced" without a special case.
        self.dispatch_all(index, &events);

        for id in self.clients.ids() {
            self.add_client_context(index, id);
        }
        Ok(index)
    }

    /// `ib_unregister_device`: clients' `remove` in reverse registration
    /// order, then the device's handlers, GID tables and counters go.
    pub fn unregister_device(&mut self, index: u32) -> Result<(), Error> {
        if self.devices.get(index).is_none() {
            return Err(Error::NoSuchDevice(format!("index {index}")));
        }
        let mut ids = self.contexts.clients_of(index);
        ids.reverse();
        for id in ids {
            self.remove_client_context(index, id);
        }
        self.handlers.remove_device(index);
        self.devices.remove(index);
        Ok(())
    }

    /// `ib_device_rename`: rename and tell the clients added to the device.
    pub fn rename_device(&mut self, index: u32, new_name: &str) -> Result<(), Error> {
        if !self.devices.rename(index, new_name)? {
            return Ok(());
        }
        let Some(dev) = self.devices.get(index) else {
            return Ok(());
        };
        for id in self.contexts.clients_of(index) {
            if let Some(client) = self.clients.get_mut(id) {
                client.rename(dev, self.contexts.data_mut(index, id));
            }
        }
        Ok(())
    }

    pub fn device(&self, index: u32) -> Option<&Device> {
        self.devices.get(index)
    }

    pub fn device_mut(&mut self, index: u32) -> Option<&mut Device> {
        self.devices.get_mut(index)
    }

    pub fn device_by_name(&self, name: &str) -> Option<&Device> {
        self.devices.by_name(name)
    }

    /// Registered devices in index order.
    pub fn devices(&self) -> impl Iterator<Item = &Device> {
        self.devices.iter()
    }

    /// The device registry (lookups only).
    pub fn registry(&self) -> &DeviceRegistry {
        &self.devices
    }

    fn device_or_err(&self, index: u32) -> Result<&Device, Error> {
        self.devices.get(index).ok_or_else(|| Error::NoSuchDevice(format!("index {index}")))
    }

    /// `ib_query_device` (cached at registration).
    pub fn query_device(&self, index: u32) -> Result<&DeviceAttr, Error> {
        Ok(self.device_or_err(index)?.attr())
    }

    /// `ib_query_port`, live state and the driver's counters included
    /// ([`Device::query_port`]).
    pub fn query_port(&self, index: u32, port: u32) -> Result<PortAttr, Error> {
        let dev = self.device_or_err(index)?;
        dev.query_port(port).ok_or_else(|| Error::NoSuchPort { device: String::from(dev.name()), port })
    }

    fn port_or_err(&self, index: u32, port: u32) -> Result<&Port, Error> {
        let dev = self.device_or_err(index)?;
        dev.port(port).ok_or_else(|| Error::NoSuchPort { device: String::from(dev.name()), port })
    }

    /// `ib_query_pkey`.
    pub fn query_pkey(&self, index: u32, port: u32, pkey_index: u32) -> Result<u16, Error> {
        self.port_or_err(index, port)?.pkey(pkey_index)
    }

    /// `rdma_query_gid`: `Ok(None)` for a free slot.
    pub fn query_gid(&self, index: u32, port: u32, gid_index: usize) -> Result<Option<&GidAttr>, Error> {
        self.port_or_err(index, port)?.gid_table().query(gid_index)
    }

    /// `rdma_find_gid_by_port`: match GID and type, and the netdev if given.
    pub fn find_gid_by_port(
        &self,
        index: u32,
        port: u32,
        gid: Gid,
        gid_type: GidType,
        ndev: Option<IfIndex>,
    ) -> Result<usize, Error> {
        let table = self.port_or_err(index, port)?.gid_table();
        let (key, mask) = lookup_key(gid, gid_type, ndev);
        table.find(&key, mask).ok_or(Error::GidNotFound)
    }

    /// `rdma_find_gid`: the first port of any device holding the GID.
    pub fn find_gid(&self, gid: Gid, gid_type: GidType, ndev: Option<IfIndex>) -> Option<GidLocation> {
        let (key, mask) = lookup_key(gid, gid_type, ndev);
        self.devices.iter().find_map(|dev| {
            dev.ports().iter().find_map(|p| {
                p.gid_table().find(&key, mask).map(|i| GidLocation {
                    device_index: dev.index(),
                    port: p.num(),
                    index: i,
                })
            })
        })
    }

    /// The device's counters, read from its driver (`get_hw_stats`).
    pub fn counters(&self, index: u32) -> Option<Counters> {
        self.devices.get(index).map(|d| d.counters())
    }

    pub fn stats(&self) -> CoreStats {
        self.stats
    }

    // ------------------------------------------------------------------
    // Clients (ib_register_client / ib_unregister_client)
    // ------------------------------------------------------------------

    /// `ib_register_client`: take a small id, then `add` on every device in
    /// index order.
    pub fn register_client(&mut self, client: Box<dyn Client>) -> Result<ClientId, Error> {
        let id = self.clients.insert(client)?;
        let indices: Vec<u32> = self.devices.iter().map(|d| d.index()).collect();
        for index in indices {
            self.add_client_context(index, id);
        }
        Ok(id)
    }

    /// `ib_unregister_client`: `remove` from every device it was added to,
    /// then free the id. The client is handed back.
    pub fn unregister_client(&mut self, id: ClientId) -> Result<Box<dyn Client>, Error> {
        if !self.clients.contains(id) {
            return Err(Error::NoSuchClient(id.0));
        }
        for index in self.contexts.devices_of(id) {
            self.remove_client_context(index, id);
        }
        self.clients.remove(id).ok_or(Error::NoSuchClient(id.0))
    }

    /// The registered client `id`, as the type its owner gave it.
    pub fn client_mut<T: Any>(&mut self, id: ClientId) -> Option<&mut T> {
        self.clients.get_mut(id)?.as_any_mut()?.downcast_mut::<T>()
    }

    /// `ib_get_client_data`.
    pub fn client_data<T: Any>(&self, device_index: u32, id: ClientId) -> Option<&T> {
        self.contexts.data(device_index, id)?.downcast_ref::<T>()
    }

    /// Was the client's `add` for this device successful (and not yet removed)?
    pub fn client_added(&self, device_index: u32, id: ClientId) -> bool {
        self.contexts.is_added(device_index, id)
    }

    pub fn client_name(&self, id: ClientId) -> Option<&str> {
        self.clients.name(id)
    }

    /// `add_client_context`. A failed `add` is remembered by absence: the
    /// client gets nothing more for this device.
    fn add_client_context(&mut self, index: u32, id: ClientId) {
        let Some(dev) = self.devices.get(index) else {
            return;
        };
        let Some(client) = self.clients.get_mut(id) else {
            return;
        };
        if let Ok(data) = client.add(dev) {
            self.contexts.insert(index, id, data);
            self.handlers.register_client(index, id);
        }
    }

    /// `remove_client_context`: only for clients whose `add` succeeded.
    fn remove_client_context(&mut self, index: u32, id: ClientId) {
        let Some(data) = self.contexts.take(index, id) else {
            return;
        };
        self.handlers.unregister_client(index, id);
        if let (Some(dev), Some(client)) = (self.devices.get(index), self.clients.get_mut(id)) {
            client.remove(dev, data);
        }
    }

    // ------------------------------------------------------------------
    // Event handlers
    // ------------------------------------------------------------------

    /// `ib_register_event_handler` on one device.
    pub fn register_event_handler(
        &mut self,
        device_index: u32,
        handler: Box<dyn EventHandler>,
    ) -> Result<HandlerId, Error> {
        self.device_or_err(device_index)?;
        Ok(self.handlers.register(device_index, handler))
    }

    /// `ib_unregister_event_handler`; the handler is handed back.
    pub fn unregister_event_handler(&mut self, id: HandlerId) -> Result<Box<dyn EventHandler>, Error> {
        self.handlers.unregister(id).ok_or(Error::NoSuchHandler(id.0))
    }

    pub(crate) fn dispatch_all(&mut self, index: u32, events: &[IbEvent]) {
        let Some(dev) = self.devices.get(index) else {
            return;
        };
        for ev in events {
            self.handlers.dispatch(ev, dev, &mut self.clients, &mut self.contexts);
        }
    }

    // ------------------------------------------------------------------
    // Link types
    // ------------------------------------------------------------------

    /// `rdma_link_register`.
    pub fn register_link_ops(&mut self, ops: Box<dyn LinkOps>) -> Result<(), Error> {
        self.link_ops.register(ops)
    }

    /// `rdma_link_unregister`.
    pub fn unregister_link_ops(&mut self, link_type: &str) -> Option<Box<dyn LinkOps>> {
        self.link_ops.unregister(link_type)
    }

    // ------------------------------------------------------------------
    // Netdev events: the ordered work queue
    // ------------------------------------------------------------------

    /// Queue a notifier event. Nothing changes until [`Self::process_events`].
    pub fn netdev_event(&mut self, ev: NetdevEvent) -> Result<(), Error> {
        self.queue.push(ev)
    }

    /// Events waiting in the queue.
    pub fn pending_events(&self) -> usize {
        self.queue.len()
    }

    /// Events refused because the queue was full.
    pub fn refused_events(&self) -> u64 {
        self.queue.refused()
    }

    /// Drain the queue in order. Each event is applied completely (port
    /// state, GID tables, counters) before its IB events are dispatched and
    /// before the next event starts. Returns how many events ran.
    pub fn process_events(&mut self) -> usize {
        let mut n = 0;
        while let Some(ev) = self.queue.pop() {
            self.process_one(&ev);
            self.stats.events_processed += 1;
            n += 1;
        }
        n
    }
}

/// The mask and key for a GID lookup with an optional netdev.
fn lookup_key(gid: Gid, gid_type: GidType, ndev: Option<IfIndex>) -> (GidKey, GidMask) {
    let mut mask = GidMask::GID | GidMask::GID_TYPE;
    if ndev.is_some() {
        mask = mask | GidMask::NETDEV;
    }
    let key = GidKey { gid, gid_type, ifindex: ndev.unwrap_or(0), default: false };
    (key, mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::device::{Op, OpSet};
    use crate::core::netdev::MacAddr;
    use crate::core::port::CoreCapFlags;
    use crate::core::testutil::{ETH0_MAC, FakeDriver, eth0};
    use alloc::vec;
    use core::net::Ipv4Addr;

    fn fake() -> FakeDriver {
        FakeDriver::rxe(ETH0_MAC)
    }

    fn register(core: &mut RdmaCore, d: FakeDriver, name: &str) -> Result<u32, Error> {
        let net = vec![eth0()];
        core.register_device(&net, Box::new(d), name, &eth0())
    }

    #[test]
    fn pattern_names_and_cyclic_indices() {
        let mut core = RdmaCore::new();
        assert_eq!(register(&mut core, fake(), "rxe%d"), Ok(0));
        assert_eq!(register(&mut core, fake(), "rxe%d"), Ok(1));
        assert_eq!(core.device(1).map(|d| d.name()), Some("rxe1"));
        core.unregister_device(0).unwrap();
        // The name comes back, the index does not.
        assert_eq!(register(&mut core, fake(), "rxe%d"), Ok(2));
        assert_eq!(core.device(2).map(|d| d.name()), Some("rxe0"));
        assert_eq!(register(&mut core, fake(), "rxe1"), Err(Error::NameInUse("rxe1".into())));
        assert!(!core.device(0).is_some_and(|d| d.created_by_link()));
    }

    #[test]
    fn mandatory_ops_are_verified() {
        let mut core = RdmaCore::new();
        let mut d = fake();
        d.ops = OpSet::all().without(Op::PostSend);
        assert_eq!(register(&mut core, d, "rxe%d"), Err(Error::MissingDriverOp("post_send")));
        // A refused driver consumes no index.
        assert_eq!(register(&mut core, fake(), "rxe%d"), Ok(0));
    }

    #[test]
    fn optional_ops_are_refused_as_not_supported() {
        let mut core = RdmaCore::new();
        let mut d = fake();
        d.ops = OpSet::mandatory();
        let i = register(&mut core, d, "rxe%d").unwrap();
        let dev = core.device(i).unwrap();
        assert_eq!(dev.require(Op::CreateQp), Ok(()));
        assert_eq!(dev.require(Op::CreateSrq), Err(Error::NotSupported("create_srq")));
        assert!(!dev.supports(Op::AllocMw));
        assert_eq!(alloc::format!("{}", dev.require(Op::AllocMw).unwrap_err()), "operation not supported: alloc_mw");
    }

    #[test]
    fn port_count_and_immutable_data_are_verified() {
        let mut core = RdmaCore::new();
        let mut d = fake();
        d.ports = 0;
        assert_eq!(register(&mut core, d, "x"), Err(Error::InvalidPortCount(0)));
        let mut d = fake();
        d.ports = MAX_PORTS + 1;
        assert!(matches!(register(&mut core, d, "x"), Err(Error::InvalidPortCount(_))));
        let mut d = fake();
        d.immutable.max_mad_size = 0;
        assert!(matches!(register(&mut core, d, "x"), Err(Error::BadPortImmutable { port: 1, .. })));
        let mut d = fake();
        d.immutable.core_cap_flags = CoreCapFlags(CoreCapFlags::PROT_IB | CoreCapFlags::IB_MAD);
        assert!(matches!(register(&mut core, d, "x"), Err(Error::BadPortImmutable { .. })));
        let mut d = fake();
        d.fail_enable = true;
        assert_eq!(register(&mut core, d, "x"), Err(Error::Driver("enable failed")));
        assert_eq!(core.devices().count(), 0);
    }

    #[test]
    fn multi_port_devices_get_a_table_per_port() {
        let mut core = RdmaCore::new();
        let mut d = fake();
        d.ports = 2;
        let i = register(&mut core, d, "dual").unwrap();
        let dev = core.device(i).unwrap();
        assert_eq!(dev.phys_port_cnt(), 2);
        for p in dev.ports() {
            assert_eq!(p.gid_table().valid_count(), 2);
        }
        assert!(dev.port(0).is_none());
        assert!(dev.port(3).is_none());
    }

    #[test]
    fn lookups() {
        let mut core = RdmaCore::new();
        let i = register(&mut core, fake(), "rxe0").unwrap();
        let other = NetdevInfo::new(3, "eth1", MacAddr([0x52, 0x54, 0, 0, 0, 2])).with_ipv4(Ipv4Addr::new(10, 0, 1, 1));
        let net = vec![eth0(), other.clone()];
        let j = core.register_device(&net, Box::new(FakeDriver::rxe(other.mac)), "rxe1", &other).unwrap();
        assert_eq!(core.device_by_name("rxe1").map(|d| d.index()), Some(j));
        assert_eq!(core.query_device(i).map(|a| a.vendor_id), Ok(0xffffff));
        assert!(matches!(core.query_device(7), Err(Error::NoSuchDevice(_))));
        assert_eq!(core.query_pkey(i, 1, 0), Ok(0xffff));
        assert_eq!(core.query_pkey(i, 1, 1), Err(Error::InvalidPkeyIndex(1)));
        assert_eq!(core.query_port(i, 2).err(), Some(Error::NoSuchPort { device: "rxe0".into(), port: 2 }));
        assert_eq!(core.query_gid(i, 1, 5), Ok(None));
        assert_eq!(core.query_gid(i, 1, 5000), Err(Error::InvalidGidIndex(5000)));
        let g = Gid::from_ipv4(Ipv4Addr::new(10, 0, 1, 1));
        assert_eq!(core.find_gid(g, GidType::RoceV2, None), Some(GidLocation { device_index: j, port: 1, index: 1 }));
        assert_eq!(core.find_gid(g, GidType::RoceV2, Some(2)), None);
        assert_eq!(core.find_gid(g, GidType::RoceV1, None), None);
        assert_eq!(core.find_gid_by_port(j, 1, g, GidType::RoceV2, Some(3)), Ok(1));
        assert_eq!(core.find_gid_by_port(i, 1, g, GidType::RoceV2, None), Err(Error::GidNotFound));
        let dflt = Gid::default_for_mac(ETH0_MAC);
        assert_eq!(core.find_gid_by_port(i, 1, dflt, GidType::RoceV2, Some(2)), Ok(0));
    }

    #[test]
    fn counters_are_read_from_the_driver() {
        use crate::core::counters::RxeCounter;
        let mut core = RdmaCore::new();
        let mut driver = FakeDriver::rxe(ETH0_MAC);
        driver.counters.add(RxeCounter::SentPkts, 7);
        // The driver's link_downed gives way to the core's own count.
        driver.counters.add(RxeCounter::LinkDowned, 99);
        let i = register(&mut core, driver, "rxe0").unwrap();
        let c = core.counters(i).unwrap();
        assert_eq!(c.get(RxeCounter::SentPkts), 7);
        assert_eq!(c.get(RxeCounter::LinkDowned), 0);
        assert!(core.counters(99).is_none());
    }

    #[test]
    fn gid_changes_reach_the_driver_as_add_gid_and_del_gid() {
        use crate::core::netdev::NetdevEventKind;
        let mut core = RdmaCore::new();
        let driver = fake();
        let ops = driver.gid_ops.clone();
        let i = register(&mut core, driver, "rxe0").unwrap();
        // Registration fills slot 0 (the MAC's default GID) and one per address.
        assert_eq!(ops.borrow().len(), core.device(i).unwrap().port(1).unwrap().gid_table().valid_count());
        assert!(ops.borrow()[0].starts_with("+1/0 fe80:"), "{:?}", ops.borrow());
        ops.borrow_mut().clear();
        let a = Ipv4Addr::new(10, 0, 0, 9);
        let with = eth0().with_ipv4(a);
        core.netdev_event(NetdevEvent::new(NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(a, 32)), with)).unwrap();
        core.process_events();
        let slot = core.find_gid_by_port(i, 1, Gid::from_ipv4(a), GidType::RoceV2, None).unwrap();
        assert_eq!(*ops.borrow(), vec![alloc::format!("+1/{slot} {}", Gid::from_ipv4(a))]);
        ops.borrow_mut().clear();
        core.netdev_event(NetdevEvent::new(NetdevEventKind::InetAddrDel(vocab::Ipv4Cidr::new(a, 32)), eth0())).unwrap();
        core.process_events();
        assert_eq!(*ops.borrow(), vec![alloc::format!("-1/{slot}")]);
    }

    #[test]
    fn a_full_queue_refuses_events() {
        let mut core = RdmaCore::new();
        let ev = NetdevEvent::new(crate::core::netdev::NetdevEventKind::Up, eth0());
        for _ in 0..DEFAULT_QUEUE_LIMIT {
            core.netdev_event(ev.clone()).unwrap();
        }
        assert_eq!(core.netdev_event(ev), Err(Error::QueueFull));
        assert_eq!(core.refused_events(), 1);
        assert_eq!(core.process_events(), DEFAULT_QUEUE_LIMIT);
        assert_eq!(core.pending_events(), 0);
    }
}
