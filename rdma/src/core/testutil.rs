//! Fakes shared by the core's unit tests: a driver with rxe's answers, a
//! netdev like the eth0, and clients/handlers that log what they see.

use alloc::boxed::Box;
use alloc::format;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::net::{Ipv4Addr, Ipv6Addr};

use super::client::{Client, ClientData, ClientError};
use super::counters::Counters;
use super::device::{Device, DeviceAttr, Driver, DriverId, NodeType, OpSet};
use super::error::Error;
use super::event::{EventHandler, IbEvent};
use super::gid_cache::GidAttr;
use super::netdev::{MacAddr, NetdevInfo};
use super::port::{PortAttr, PortImmutable};
use super::rdma_core::RdmaCore;
use super::rxe_params;

pub const ETH0_MAC: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x01]);

/// The eth0: MAC 52:54:00:00:00:01, 10.0.0.1/24, its EUI-64
/// link-local IPv6 address, MTU 1500, up.
pub fn eth0() -> NetdevInfo {
    NetdevInfo::new(2, "eth0", ETH0_MAC)
        .with_ipv4(Ipv4Addr::new(10, 0, 0, 1))
        .with_ipv6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0x5054, 0x00ff, 0xfe00, 0x0001))
}

/// A driver answering like Linux rxe, with knobs to misbehave.
pub struct FakeDriver {
    pub mac: MacAddr,
    pub ops: OpSet,
    pub ports: u32,
    pub immutable: PortImmutable,
    pub fail_enable: bool,
    pub port_changes: Rc<RefCell<Vec<(u32, PortAttr)>>>,
    /// `add_gid`/`del_gid` calls as `+port/index gid` and `-port/index`.
    pub gid_ops: Rc<RefCell<Vec<String>>>,
    /// What `hw_stats` answers.
    pub counters: Counters,
}

impl FakeDriver {
    pub fn rxe(mac: MacAddr) -> Self {
        FakeDriver {
            mac,
            ops: rxe_params::ops(),
            ports: rxe_params::NUM_PORTS,
            immutable: rxe_params::port_immutable(),
            fail_enable: false,
            port_changes: Rc::default(),
            gid_ops: Rc::default(),
            counters: Counters::new(),
        }
    }
}

impl Driver for FakeDriver {
    fn driver_id(&self) -> DriverId {
        DriverId::RXE
    }

    fn ops(&self) -> OpSet {
        self.ops
    }

    fn phys_port_cnt(&self) -> u32 {
        self.ports
    }

    fn query_device(&self) -> Result<DeviceAttr, Error> {
        Ok(rxe_params::device_attr(self.mac))
    }

    fn query_port(&self, port: u32) -> Result<PortAttr, Error> {
        if port == 0 || port > self.ports {
            return Err(Error::Driver("no such port"));
        }
        Ok(rxe_params::port_attr())
    }

    fn get_port_immutable(&self, port: u32) -> Result<PortImmutable, Error> {
        if port == 0 || port > self.ports {
            return Err(Error::Driver("no such port"));
        }
        Ok(self.immutable)
    }

    fn enable_driver(&mut self) -> Result<(), Error> {
        if self.fail_enable { Err(Error::Driver("enable failed")) } else { Ok(()) }
    }

    fn port_changed(&mut self, port: u32, attr: &PortAttr) {
        self.port_changes.borrow_mut().push((port, *attr));
    }

    fn add_gid(&mut self, port: u32, index: usize, attr: &GidAttr) {
        self.gid_ops.borrow_mut().push(format!("+{port}/{index} {}", attr.gid));
    }

    fn del_gid(&mut self, port: u32, index: usize) {
        self.gid_ops.borrow_mut().push(format!("-{port}/{index}"));
    }

    fn hw_stats(&self) -> Counters {
        self.counters.clone()
    }
}

/// A core with the rxe link type building [`FakeDriver`]s.
pub fn rxe_core() -> RdmaCore {
    RdmaCore::with_rxe(Box::new(|nd: &NetdevInfo| Ok(Box::new(FakeDriver::rxe(nd.mac)) as Box<dyn Driver>)))
}

/// A bare device for registry-level tests (no GID rescan, no clients).
pub fn fake_device(index: u32, name: &str, ifindex: u32) -> Device {
    let port = super::port::Port::new(1, rxe_params::port_attr(), rxe_params::port_immutable())
        .unwrap_or_else(|e| panic!("rxe port params rejected: {e}"));
    Device {
        index,
        name: String::from(name),
        driver: Box::new(FakeDriver::rxe(ETH0_MAC)),
        driver_id: DriverId::RXE,
        node_type: NodeType::Ca,
        ops: rxe_params::ops(),
        attr: rxe_params::device_attr(ETH0_MAC),
        fw_str: String::new(),
        ports: alloc::vec![port],
        netdev: NetdevInfo::new(ifindex, "eth", ETH0_MAC),
        link_downed: 0,
        created_by_link: false,
    }
}

/// A shared, ordered log of callbacks.
#[derive(Clone, Default)]
pub struct Log(Rc<RefCell<Vec<String>>>);

impl Log {
    pub fn push(&self, s: String) {
        self.0.borrow_mut().push(s);
    }

    /// Everything logged so far, emptying the log.
    pub fn take(&self) -> Vec<String> {
        core::mem::take(&mut *self.0.borrow_mut())
    }
}

fn short(ev: &IbEvent) -> &'static str {
    let n = ev.kind.linux_name();
    n.strip_prefix("IB_EVENT_").unwrap_or(n)
}

/// An event handler that logs `name: EVENT dev/port`.
pub struct LogHandler {
    name: &'static str,
    log: Log,
}

impl LogHandler {
    pub fn new(name: &'static str, log: &Log) -> Self {
        LogHandler { name, log: log.clone() }
    }
}

impl EventHandler for LogHandler {
    fn handle(&mut self, ev: &IbEvent, dev: &Device) {
        self.log.push(format!("{}: {} {}/{}", self.name, short(ev), dev.name(), ev.port));
    }
}

/// A client that accepts every device and does nothing.
pub struct NullClient;

impl Client for NullClient {
    fn name(&self) -> &str {
        "null"
    }

    fn add(&mut self, _dev: &Device) -> Result<Option<ClientData>, ClientError> {
        Ok(None)
    }

    fn remove(&mut self, _dev: &Device, _data: Option<ClientData>) {}
}

/// A client that logs every callback and refuses devices whose name is in
/// `refuse`. Its per-device data is `"<client>@<device>"`.
pub struct LogClient {
    pub name: &'static str,
    pub log: Log,
    pub refuse: Vec<&'static str>,
}

impl LogClient {
    pub fn new(name: &'static str, log: &Log) -> Self {
        LogClient { name, log: log.clone(), refuse: Vec::new() }
    }

    pub fn refusing(mut self, dev: &'static str) -> Self {
        self.refuse.push(dev);
        self
    }
}

fn data_str(data: &Option<&mut ClientData>) -> String {
    data.as_ref().and_then(|d| d.downcast_ref::<String>()).cloned().unwrap_or_default()
}

impl Client for LogClient {
    fn name(&self) -> &str {
        self.name
    }

    fn add(&mut self, dev: &Device) -> Result<Option<ClientData>, ClientError> {
        if self.refuse.contains(&dev.name()) {
            self.log.push(format!("{}: add {} failed", self.name, dev.name()));
            return Err(ClientError::NotSupported);
        }
        self.log.push(format!("{}: add {}", self.name, dev.name()));
        Ok(Some(Box::new(format!("{}@{}", self.name, dev.name()))))
    }

    fn remove(&mut self, dev: &Device, data: Option<ClientData>) {
        let d = data.and_then(|d| d.downcast::<String>().ok()).map(|b| *b).unwrap_or_default();
        self.log.push(format!("{}: remove {} ({d})", self.name, dev.name()));
    }

    fn rename(&mut self, dev: &Device, data: Option<&mut ClientData>) {
        let d = data_str(&data);
        self.log.push(format!("{}: rename {} ({d})", self.name, dev.name()));
    }

    fn event(&mut self, ev: &IbEvent, dev: &Device, _data: Option<&mut ClientData>) {
        self.log.push(format!("{}: {} {}/{}", self.name, short(ev), dev.name(), ev.port));
    }
}
