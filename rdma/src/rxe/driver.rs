//! The rxe driver as the RDMA core sees it (`rxe_dev_ops`): device and port
//! attributes like Linux 6.1's rxe, derived from the netdev's MAC.

use alloc::boxed::Box;
use alloc::string::String;

use crate::core::device::{DeviceAttr, Driver, DriverId, OpSet};
use crate::core::netdev::{MacAddr, NetdevInfo};
use crate::core::port::{PortAttr, PortImmutable};
use crate::core::{Error, rxe_params};

/// One rxe device, bound to a netdev's MAC.
pub struct RxeDriver {
    mac: MacAddr,
    /// The port as the core last told us (state, active MTU).
    port: PortAttr,
}

impl RxeDriver {
    pub fn new(mac: MacAddr) -> Self {
        RxeDriver { mac, port: rxe_params::port_attr() }
    }

    /// The factory `RdmaCore::with_rxe` takes: one driver per new link.
    pub fn factory() -> crate::core::link::RxeDriverFactory {
        Box::new(|nd: &NetdevInfo| Ok(Box::new(RxeDriver::new(nd.mac)) as Box<dyn Driver>))
    }

    /// The port attributes last pushed by the core.
    pub fn port(&self) -> &PortAttr {
        &self.port
    }
}

fn check_port(port: u32) -> Result<(), Error> {
    if port == 0 || port > rxe_params::NUM_PORTS { Err(Error::Driver("no such port")) } else { Ok(()) }
}

impl Driver for RxeDriver {
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
        Ok(self.port)
    }

    fn get_port_immutable(&self, port: u32) -> Result<PortImmutable, Error> {
        check_port(port)?;
        Ok(rxe_params::port_immutable())
    }

    fn dev_fw_str(&self) -> String {
        String::from(rxe_params::FW_VERSION)
    }

    fn port_changed(&mut self, port: u32, attr: &PortAttr) {
        if check_port(port).is_ok() {
            self.port = *attr;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{NetdevInfo, RdmaCore};
    use alloc::string::String;
    use alloc::vec;
    use core::net::Ipv4Addr;

    #[test]
    fn link_add_builds_an_rxe_device_with_linux_attributes() {
        let mut core = RdmaCore::with_rxe(RxeDriver::factory());
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
}
