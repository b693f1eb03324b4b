//! The rxe driver as the RDMA core sees it (`rxe_dev_ops`): one per rxe
//! device, owning that device's transport. The core asks it for Linux 6.1
//! rxe's device and port attributes, pushes GID and port changes into it
//! (`add_gid`, `del_gid`, port events) and reads its counters
//! (`get_hw_stats`); whoever runs the data path reaches the transport
//! through [`RxeDriver::of`] / [`RxeDriver::of_mut`] on the registered device.

use alloc::boxed::Box;
use core::any::Any;

use super::ah::LocalPort;
use super::device::Config;
use super::keys::KeyStream;
use super::memory::Memory;
use super::transport::RxeTransport;
use crate::core::device::{Device, DeviceAttr, Driver, DriverId, OpSet};
use crate::core::gid::Gid;
use crate::core::gid_cache::GidAttr;
use crate::core::link::RxeDriverFactory;
use crate::core::netdev::{MacAddr, NetdevInfo};
use crate::core::port::{PortAttr, PortImmutable};
use crate::core::{Counters, Error, rxe_params};
use vocab::DropReason;

/// One rxe device, bound to a netdev, with its transport.
pub struct RxeDriver<M> {
    mac: MacAddr,
    /// The port as the core last told us (state, active MTU).
    port: PortAttr,
    transport: RxeTransport<M>,
}

impl<M: Memory + 'static> RxeDriver<M> {
    /// A driver for the netdev `ndev` whose transport reads and writes `mem`.
    pub fn new(ndev: &NetdevInfo, mem: M, config: Config) -> Self {
        let port = LocalPort { mac: ndev.mac, gids: alloc::vec::Vec::new(), mtu: rxe_params::port_attr().active_mtu };
        RxeDriver { mac: ndev.mac, port: rxe_params::port_attr(), transport: RxeTransport::new(mem, port, config) }
    }

    /// The factory `RdmaCore::with_rxe` takes: one driver per new link, each
    /// with the memory `mem` makes and the transport tunables `config`.
    /// Each driver's keys come from its own seed, forked from `config`'s.
    pub fn factory(mut mem: impl FnMut() -> M + 'static, config: Config) -> RxeDriverFactory {
        let mut seeds = KeyStream::new(config.key_seed, 0);
        Box::new(move |nd: &NetdevInfo| {
            let config = Config { key_seed: seeds.seed(), ..config };
            Ok(Box::new(RxeDriver::new(nd, mem(), config)) as Box<dyn Driver>)
        })
    }

    /// The rxe driver behind a registered device, if it is one over `M`.
    pub fn of(dev: &Device) -> Option<&RxeDriver<M>> {
        dev.driver().as_any()?.downcast_ref()
    }

    pub fn of_mut(dev: &mut Device) -> Option<&mut RxeDriver<M>> {
        dev.driver_mut().as_any_mut()?.downcast_mut()
    }

    pub fn transport(&self) -> &RxeTransport<M> {
        &self.transport
    }

    pub fn transport_mut(&mut self) -> &mut RxeTransport<M> {
        &mut self.transport
    }
}

fn check_port(port: u32) -> Result<(), Error> {
    if port == 0 || port > rxe_params::NUM_PORTS { Err(Error::Driver("no such port")) } else { Ok(()) }
}

impl<M: Memory + 'static> Driver for RxeDriver<M> {
    fn driver_id(&self) -> DriverId {
        DriverId::RXE
    }

    fn ops(&self) -> OpSet {
        rxe_params::ops()
    }

    fn phys_port_cnt(&self) -> u32 {
        rxe_params::NUM_PORTS
    }

    fn query_device(&self) -> Result<DeviceAttr, Error> {
        Ok(rxe_params::device_attr(self.mac))
    }

    fn query_port(&self, port: u32) -> Result<PortAttr, Error> {
        check_port(port)?;
        // rxe counts in its port attributes every packet it drops for a
        // P_Key or a Q_Key that is not the QP's (`set_bad_pkey_cntr`,
        // `set_qkey_viol_cntr`), stopping at 0xffff as the 16-bit
        // P_KeyViolations and Q_KeyViolations of PortInfo do.
        let stats = self.transport.stats();
        let saturated = |n: u64| u32::try_from(n.min(0xffff)).unwrap_or(0xffff);
        Ok(PortAttr {
            bad_pkey_cntr: saturated(stats.dropped(DropReason::BadPkey)),
            qkey_viol_cntr: saturated(stats.dropped(DropReason::BadQkey)),
            ..self.port
        })
    }

    fn get_port_immutable(&self, port: u32) -> Result<PortImmutable, Error> {
        check_port(port)?;
        Ok(rxe_params::port_immutable())
    }

    fn port_changed(&mut self, port: u32, attr: &PortAttr) {
        if check_port(port).is_ok() {
            self.port = *attr;
            self.transport.set_port_mtu(attr.active_mtu);
        }
    }

    fn add_gid(&mut self, port: u32, index: usize, attr: &GidAttr) {
        if check_port(port).is_err() {
            return;
        }
        let gids = &mut self.transport.port_mut().gids;
        if gids.len() <= index {
            gids.resize(index + 1, Gid([0; 16]));
        }
        gids[index] = attr.gid;
    }

    fn del_gid(&mut self, port: u32, index: usize) {
        if check_port(port).is_err() {
            return;
        }
        let gids = &mut self.transport.port_mut().gids;
        if let Some(g) = gids.get_mut(index) {
            *g = Gid([0; 16]);
        }
        // An empty slot at the end is as good as none: keep the table short.
        while gids.last() == Some(&Gid([0; 16])) {
            gids.pop();
        }
    }

    fn netdev_changed(&mut self, ndev: &NetdevInfo) {
        self.mac = ndev.mac;
        self.transport.port_mut().mac = ndev.mac;
    }

    fn hw_stats(&self) -> Counters {
        self.transport.stats().rxe.clone()
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::RdmaCore;
    use crate::rxe::memory::FlatMemory;
    use alloc::string::String;
    use alloc::vec;
    use core::net::Ipv4Addr;

    fn core() -> RdmaCore {
        RdmaCore::with_rxe(RxeDriver::factory(|| FlatMemory::new(0, 4096), Config::default()))
    }

    #[test]
    fn link_add_builds_an_rxe_device_with_linux_attributes() {
        let mut core = core();
        let mac = MacAddr([0x52, 0x54, 0, 0, 0, 1]);
        let net = vec![NetdevInfo::new(2, "eth0", mac).with_ipv4(Ipv4Addr::new(10, 0, 0, 1))];
        core.link_add(&net, "rxe0", "rxe", "eth0").expect("link add");
        let dev = core.device_by_name("rxe0").expect("registered");
        assert_eq!(dev.attr.vendor_id, 0xffffff);
        assert_eq!(alloc::format!("{}", dev.attr.node_guid), "5054:00ff:fe00:0001");
        let mut out = String::new();
        crate::core::console::run(&mut core, &net, &["show_gids"], &mut out).expect("show_gids");
        assert!(out.contains("0000:0000:0000:0000:0000:ffff:0a00:0001"), "{out}");
    }

    /// The transport's port follows the core's GID table and the netdev's
    /// MAC through the driver ops, with nobody copying between them.
    #[test]
    fn the_transport_follows_gid_and_mac_changes() {
        use crate::core::netdev::{NetdevEvent, NetdevEventKind};
        let mut core = core();
        let mac = MacAddr([0x52, 0x54, 0, 0, 0, 1]);
        let eth0 = NetdevInfo::new(2, "eth0", mac).with_ipv4(Ipv4Addr::new(10, 0, 0, 1));
        let i = core.link_add(&vec![eth0.clone()], "rxe0", "rxe", "eth0").expect("link add");
        let gids = |core: &RdmaCore| {
            RxeDriver::<FlatMemory>::of(core.device(i).unwrap()).unwrap().transport().port().gids.clone()
        };
        let v4 = Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(gids(&core), vec![Gid::default_for_mac(mac), v4]);

        let seven = vocab::Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 7), 32);
        let mut more = eth0.clone().with_ipv4(Ipv4Addr::new(10, 0, 0, 7));
        let ev = NetdevEvent::new(NetdevEventKind::InetAddrAdd(seven), more.clone());
        core.netdev_event(ev).unwrap();
        core.process_events();
        assert_eq!(gids(&core)[2], Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 7)));

        more.ipv4.retain(|a| *a != seven);
        let ev = NetdevEvent::new(NetdevEventKind::InetAddrDel(seven), more.clone());
        core.netdev_event(ev).unwrap();
        core.process_events();
        assert_eq!(gids(&core), vec![Gid::default_for_mac(mac), v4]);

        let new_mac = MacAddr([0x52, 0x54, 0, 0, 0, 9]);
        more.mac = new_mac;
        core.netdev_event(NetdevEvent::new(NetdevEventKind::ChangeAddr { old: mac }, more)).unwrap();
        core.process_events();
        let d = RxeDriver::<FlatMemory>::of(core.device(i).unwrap()).unwrap();
        assert_eq!(d.transport().port().mac, new_mac);
        assert_eq!(gids(&core)[0], Gid::default_for_mac(new_mac));
    }
}
