//! Link ops: how `rdma link add NAME type TYPE netdev NETDEV` turns into a
//! driver (seed §1; Linux `struct rdma_link_ops`, `rdma_link_register`,
//! `link_ops_get`, and rxe's `rxe_newlink`).
//!
//! Link types register by name ("rxe"). `newlink` gets the requested device
//! name and the netdev, does its type-specific refusals and hands back a
//! driver; the core then runs the generic registration. rxe refuses a VLAN
//! netdev (its GIDs would never resolve; use the VLAN's GID index on the real
//! device instead) and a netdev that already carries an rxe device.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::device::{Driver, DriverId};
use super::error::Error;
use super::netdev::NetdevInfo;
use super::registry::DeviceRegistry;

/// One link type (`struct rdma_link_ops`).
pub trait LinkOps {
    /// The type name given after `type` ("rxe").
    fn link_type(&self) -> &str;

    /// Create the driver for a new link on `ndev`. `devices` is the registry
    /// as it stands, for "already configured" checks.
    fn newlink(
        &mut self,
        ibdev_name: &str,
        ndev: &NetdevInfo,
        devices: &DeviceRegistry,
    ) -> Result<Box<dyn Driver>, Error>;
}

/// The registered link types.
#[derive(Default)]
pub struct LinkOpsRegistry {
    ops: Vec<Box<dyn LinkOps>>,
}

impl LinkOpsRegistry {
    /// `rdma_link_register`: one ops per type name.
    pub fn register(&mut self, ops: Box<dyn LinkOps>) -> Result<(), Error> {
        if self.ops.iter().any(|o| o.link_type() == ops.link_type()) {
            return Err(Error::LinkTypeExists(String::from(ops.link_type())));
        }
        self.ops.push(ops);
        Ok(())
    }

    /// `rdma_link_unregister`.
    pub fn unregister(&mut self, link_type: &str) -> Option<Box<dyn LinkOps>> {
        let pos = self.ops.iter().position(|o| o.link_type() == link_type)?;
        Some(self.ops.remove(pos))
    }

    /// `link_ops_get`.
    pub fn get_mut(&mut self, link_type: &str) -> Option<&mut Box<dyn LinkOps>> {
        self.ops.iter_mut().find(|o| o.link_type() == link_type)
    }

    /// The registered type names, in registration order.
    pub fn types(&self) -> impl Iterator<Item = &str> {
        self.ops.iter().map(|o| o.link_type())
    }
}

/// Builds the rxe driver for a netdev: the real transport in the kernel, a
/// fake in tests.
pub type RxeDriverFactory = Box<dyn FnMut(&NetdevInfo) -> Result<Box<dyn Driver>, Error>>;

/// The "rxe" link type (`rxe_link_ops`).
pub struct RxeLinkOps {
    factory: RxeDriverFactory,
}

impl RxeLinkOps {
    pub fn new(factory: RxeDriverFactory) -> Self {
        RxeLinkOps { factory }
    }
}

impl LinkOps for RxeLinkOps {
    fn link_type(&self) -> &str {
        "rxe"
    }

    /// `rxe_newlink`.
    fn newlink(
        &mut self,
        _ibdev_name: &str,
        ndev: &NetdevInfo,
        devices: &DeviceRegistry,
    ) -> Result<Box<dyn Driver>, Error> {
        if ndev.is_vlan() {
            return Err(Error::VlanNetdev(ndev.name.clone()));
        }
        if let Some(existing) = devices.by_netdev(ndev.ifindex, DriverId::RXE) {
            return Err(Error::NetdevHasDevice { netdev: ndev.name.clone(), device: String::from(existing.name()) });
        }
        let driver = (self.factory)(ndev)?;
        if driver.driver_id() != DriverId::RXE {
            return Err(Error::Driver("rxe factory built a driver that is not rxe"));
        }
        Ok(driver)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::netdev::MacAddr;
    use crate::core::testutil::{FakeDriver, fake_device};

    fn rxe_ops() -> RxeLinkOps {
        RxeLinkOps::new(Box::new(|nd: &NetdevInfo| Ok(Box::new(FakeDriver::rxe(nd.mac)) as Box<dyn Driver>)))
    }

    fn eth0() -> NetdevInfo {
        NetdevInfo::new(2, "eth0", MacAddr([0x52, 0x54, 0, 0, 0, 1]))
    }

    #[test]
    fn registry_by_type_name() {
        let mut r = LinkOpsRegistry::default();
        r.register(Box::new(rxe_ops())).unwrap();
        assert!(matches!(
            r.register(Box::new(rxe_ops())),
            Err(Error::LinkTypeExists(t)) if t == "rxe"
        ));
        assert!(r.get_mut("rxe").is_some());
        assert!(r.get_mut("siw").is_none());
        assert_eq!(r.types().collect::<Vec<_>>(), ["rxe"]);
        assert!(r.unregister("rxe").is_some());
        assert!(r.get_mut("rxe").is_none());
    }

    #[test]
    fn rxe_refuses_vlan_netdevs() {
        let vlan = NetdevInfo::new(5, "eth0.100", MacAddr::default()).with_vlan(2, 100);
        let devices = DeviceRegistry::new();
        assert_eq!(rxe_ops().newlink("rxe0", &vlan, &devices).err(), Some(Error::VlanNetdev("eth0.100".into())));
    }

    #[test]
    fn rxe_refuses_a_netdev_that_already_has_one() {
        let mut devices = DeviceRegistry::new();
        let i = devices.alloc_index().unwrap();
        devices.insert(fake_device(i, "rxe0", 2));
        assert_eq!(
            rxe_ops().newlink("rxe1", &eth0(), &devices).err(),
            Some(Error::NetdevHasDevice { netdev: "eth0".into(), device: "rxe0".into() })
        );
        let eth1 = NetdevInfo::new(3, "eth1", MacAddr::default());
        assert!(rxe_ops().newlink("rxe1", &eth1, &devices).is_ok());
    }
}
