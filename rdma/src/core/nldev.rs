//! The control API, modelled on RDMA netlink's NLDEV family (seed §1; Linux
//! `drivers/infiniband/core/nldev.c`: `nldev_newlink`, `nldev_dellink`,
//! `nldev_get_doit` / `_dumpit`, `nldev_set_doit`, `nldev_port_get_*`).
//!
//! A request is a command plus typed attributes, exactly the attributes the
//! netlink message would carry; replies use the same attribute set. The
//! console (`rdma link add ...`) and the host ring both build these messages,
//! so there is one path into the core and one set of refusals:
//! - NEWLINK needs DEV_NAME, LINK_TYPE and NDEV_NAME; refuses an empty name or
//!   one containing `%` or otherwise malformed, an unknown netdev, an unknown
//!   link type, then whatever the link type refuses (rxe: a VLAN netdev, a
//!   netdev that already has an rxe), then a name already in use;
//! - DELLINK needs DEV_INDEX and a device created by NEWLINK;
//! - GET / PORT_GET answer one device (DEV_INDEX) or, with `dump`, all;
//! - SET with DEV_INDEX and DEV_NAME renames.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::device::{Device, NodeType};
use super::error::Error;
use super::gid::Guid;
use super::netdev::NetdevProvider;
use super::port::{PhysState, PortState};
use super::rdma_core::RdmaCore;
use super::registry::validate_name;

/// NLDEV commands (`RDMA_NLDEV_CMD_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NldevCmd {
    /// `RDMA_NLDEV_CMD_GET`: device info.
    Get,
    /// `RDMA_NLDEV_CMD_SET`: rename.
    Set,
    /// `RDMA_NLDEV_CMD_NEWLINK`: `rdma link add`.
    NewLink,
    /// `RDMA_NLDEV_CMD_DELLINK`: `rdma link delete`.
    DelLink,
    /// `RDMA_NLDEV_CMD_PORT_GET`: port info, for `rdma link show`.
    PortGet,
}

/// NLDEV attributes (`RDMA_NLDEV_ATTR_*`), each typed.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct NldevAttrs {
    /// `DEV_INDEX`.
    pub dev_index: Option<u32>,
    /// `DEV_NAME`.
    pub dev_name: Option<String>,
    /// `LINK_TYPE`, e.g. "rxe".
    pub link_type: Option<String>,
    /// `NDEV_NAME`.
    pub ndev_name: Option<String>,
    /// `NDEV_INDEX`.
    pub ndev_index: Option<u32>,
    /// `PORT_INDEX`. In a GET reply Linux reuses it for the port count; we
    /// use `num_ports` for that.
    pub port_index: Option<u32>,
    /// Number of ports (a GET reply's `PORT_INDEX`).
    pub num_ports: Option<u32>,
    /// `PORT_STATE`.
    pub port_state: Option<PortState>,
    /// `PORT_PHYS_STATE`.
    pub port_phys_state: Option<PhysState>,
    /// `FW_VERSION`: present only when the driver has a string.
    pub fw_version: Option<String>,
    /// `NODE_GUID`.
    pub node_guid: Option<Guid>,
    /// `SYS_IMAGE_GUID`.
    pub sys_image_guid: Option<Guid>,
    /// `DEV_NODE_TYPE`.
    pub node_type: Option<NodeType>,
    /// `CAP_FLAGS` (port core capability flags in a PORT_GET reply).
    pub cap_flags: Option<u64>,
}

/// One message: a request or a reply.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NldevMsg {
    pub cmd: NldevCmd,
    /// `NLM_F_DUMP`: every device (or every port of every device).
    pub dump: bool,
    pub attrs: NldevAttrs,
}

impl NldevMsg {
    pub fn new(cmd: NldevCmd, attrs: NldevAttrs) -> Self {
        NldevMsg { cmd, dump: false, attrs }
    }

    /// `rdma link add NAME type TYPE netdev NETDEV`.
    pub fn new_link(name: &str, link_type: &str, netdev: &str) -> Self {
        NldevMsg::new(
            NldevCmd::NewLink,
            NldevAttrs {
                dev_name: Some(String::from(name)),
                link_type: Some(String::from(link_type)),
                ndev_name: Some(String::from(netdev)),
                ..Default::default()
            },
        )
    }

    /// `rdma link delete` of the device with this index.
    pub fn del_link(dev_index: u32) -> Self {
        NldevMsg::new(NldevCmd::DelLink, index_attrs(dev_index))
    }

    /// GET of one device.
    pub fn get(dev_index: u32) -> Self {
        NldevMsg::new(NldevCmd::Get, index_attrs(dev_index))
    }

    /// GET of every device.
    pub fn get_dump() -> Self {
        NldevMsg { dump: true, ..NldevMsg::new(NldevCmd::Get, NldevAttrs::default()) }
    }

    /// SET: rename a device.
    pub fn set_name(dev_index: u32, new_name: &str) -> Self {
        let mut attrs = index_attrs(dev_index);
        attrs.dev_name = Some(String::from(new_name));
        NldevMsg::new(NldevCmd::Set, attrs)
    }

    /// PORT_GET of one port.
    pub fn port_get(dev_index: u32, port: u32) -> Self {
        let mut attrs = index_attrs(dev_index);
        attrs.port_index = Some(port);
        NldevMsg::new(NldevCmd::PortGet, attrs)
    }

    /// PORT_GET of every port of one device (`dev_index`) or of all devices.
    pub fn port_dump(dev_index: Option<u32>) -> Self {
        NldevMsg { dump: true, ..NldevMsg::new(NldevCmd::PortGet, NldevAttrs { dev_index, ..Default::default() }) }
    }
}

fn index_attrs(dev_index: u32) -> NldevAttrs {
    NldevAttrs { dev_index: Some(dev_index), ..Default::default() }
}

/// `fill_dev_info`.
fn dev_info(dev: &Device) -> NldevMsg {
    let fw = dev.fw_str();
    NldevMsg::new(
        NldevCmd::Get,
        NldevAttrs {
            dev_index: Some(dev.index()),
            dev_name: Some(String::from(dev.name())),
            num_ports: Some(dev.phys_port_cnt()),
            fw_version: (!fw.is_empty()).then(|| String::from(fw)),
            node_guid: Some(dev.attr().node_guid),
            sys_image_guid: Some(dev.attr().sys_image_guid),
            node_type: Some(dev.node_type()),
            ..Default::default()
        },
    )
}

/// `fill_port_info`. RoCE ports carry no LID, SM LID or LMC.
fn port_info(dev: &Device, port: u32) -> Option<NldevMsg> {
    let p = dev.port(port)?;
    Some(NldevMsg::new(
        NldevCmd::PortGet,
        NldevAttrs {
            dev_index: Some(dev.index()),
            dev_name: Some(String::from(dev.name())),
            port_index: Some(port),
            cap_flags: Some(u64::from(p.immutable().core_cap_flags.0)),
            port_state: Some(p.state()),
            port_phys_state: Some(p.phys_state()),
            ndev_index: Some(dev.netdev().ifindex),
            ndev_name: Some(dev.netdev().name.clone()),
            ..Default::default()
        },
    ))
}

fn required<'a, T>(v: &'a Option<T>, name: &'static str) -> Result<&'a T, Error> {
    v.as_ref().ok_or(Error::MissingAttribute(name))
}

impl RdmaCore {
    /// Handle one NLDEV request; the reply messages come back in order.
    /// NEWLINK replies with the new device's GET message.
    pub fn nldev(&mut self, net: &dyn NetdevProvider, req: &NldevMsg) -> Result<Vec<NldevMsg>, Error> {
        match req.cmd {
            NldevCmd::NewLink => {
                let index = self.nldev_newlink(net, &req.attrs)?;
                Ok(self.device(index).map(dev_info).into_iter().collect())
            }
            NldevCmd::DelLink => {
                let index = *required(&req.attrs.dev_index, "DEV_INDEX")?;
                let dev = self.device(index).ok_or_else(|| no_index(index))?;
                if !dev.created_by_link() || !dev.attr().allow_user_unreg {
                    return Err(Error::NotRemovable(String::from(dev.name())));
                }
                self.unregister_device(index)?;
                Ok(Vec::new())
            }
            NldevCmd::Get => {
                if req.dump {
                    return Ok(self.devices().map(dev_info).collect());
                }
                let index = *required(&req.attrs.dev_index, "DEV_INDEX")?;
                let dev = self.device(index).ok_or_else(|| no_index(index))?;
                Ok(vec![dev_info(dev)])
            }
            NldevCmd::Set => {
                let index = *required(&req.attrs.dev_index, "DEV_INDEX")?;
                let name = required(&req.attrs.dev_name, "DEV_NAME")?;
                self.rename_device(index, name)?;
                Ok(Vec::new())
            }
            NldevCmd::PortGet => self.nldev_port_get(req),
        }
    }

    fn nldev_port_get(&self, req: &NldevMsg) -> Result<Vec<NldevMsg>, Error> {
        if req.dump {
            let devs: Vec<&Device> = match req.attrs.dev_index {
                Some(i) => vec![self.device(i).ok_or_else(|| no_index(i))?],
                None => self.devices().collect(),
            };
            return Ok(devs
                .into_iter()
                .flat_map(|d| (1..=d.phys_port_cnt()).filter_map(move |p| port_info(d, p)))
                .collect());
        }
        let index = *required(&req.attrs.dev_index, "DEV_INDEX")?;
        let port = *required(&req.attrs.port_index, "PORT_INDEX")?;
        let dev = self.device(index).ok_or_else(|| no_index(index))?;
        let msg = port_info(dev, port).ok_or_else(|| Error::NoSuchPort { device: String::from(dev.name()), port })?;
        Ok(vec![msg])
    }

    /// `nldev_newlink`.
    fn nldev_newlink(&mut self, net: &dyn NetdevProvider, attrs: &NldevAttrs) -> Result<u32, Error> {
        let name = required(&attrs.dev_name, "DEV_NAME")?;
        let link_type = required(&attrs.link_type, "LINK_TYPE")?;
        let ndev_name = required(&attrs.ndev_name, "NDEV_NAME")?;
        validate_name(name, false)?;
        let ndev = net.netdev_by_name(ndev_name).ok_or_else(|| Error::NoSuchNetdev(ndev_name.clone()))?;
        let ops = self.link_ops.get_mut(link_type).ok_or_else(|| Error::UnknownLinkType(link_type.clone()))?;
        let driver = ops.newlink(name, &ndev, &self.devices)?;
        self.register_device_inner(net, driver, name, &ndev, true)
    }

    /// `rdma link add NAME type TYPE netdev NETDEV`; returns the device index.
    pub fn link_add(
        &mut self,
        net: &dyn NetdevProvider,
        name: &str,
        link_type: &str,
        netdev: &str,
    ) -> Result<u32, Error> {
        self.nldev_newlink(net, &NldevMsg::new_link(name, link_type, netdev).attrs)
    }

    /// `rdma link delete NAME`.
    pub fn link_del(&mut self, net: &dyn NetdevProvider, name: &str) -> Result<(), Error> {
        let index = self.devices.index_of(name)?;
        self.nldev(net, &NldevMsg::del_link(index)).map(|_| ())
    }
}

fn no_index(index: u32) -> Error {
    Error::NoSuchDevice(alloc::format!("index {index}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::device::Driver;
    use crate::core::netdev::{MacAddr, NetdevInfo};
    use crate::core::testutil::{FakeDriver, eth0, rxe_core};
    use alloc::boxed::Box;
    use core::net::Ipv4Addr;

    fn net() -> Vec<NetdevInfo> {
        vec![
            eth0(),
            NetdevInfo::new(3, "eth1", MacAddr([0x52, 0x54, 0, 0, 0, 2])),
            NetdevInfo::new(5, "eth0.100", MacAddr([0x52, 0x54, 0, 0, 0, 1]))
                .with_vlan(2, 100)
                .with_ipv4(Ipv4Addr::new(10, 1, 0, 1)),
        ]
    }

    #[test]
    fn newlink_creates_a_registered_device() {
        let mut core = rxe_core();
        let net = net();
        let reply = core.nldev(&net, &NldevMsg::new_link("rxe0", "rxe", "eth0")).unwrap();
        assert_eq!(reply.len(), 1);
        assert_eq!(reply[0].attrs.dev_name.as_deref(), Some("rxe0"));
        let dev = core.device_by_name("rxe0").unwrap();
        assert!(dev.created_by_link());
        assert_eq!(dev.netdev().name, "eth0");
    }

    #[test]
    fn newlink_refusals() {
        let net = net();
        let mut core = rxe_core();
        let missing = |f: fn(&mut NldevAttrs)| {
            let mut m = NldevMsg::new_link("rxe0", "rxe", "eth0");
            f(&mut m.attrs);
            m
        };
        // Missing attributes.
        assert_eq!(core.nldev(&net, &missing(|a| a.dev_name = None)), Err(Error::MissingAttribute("DEV_NAME")));
        assert_eq!(core.nldev(&net, &missing(|a| a.link_type = None)), Err(Error::MissingAttribute("LINK_TYPE")));
        assert_eq!(core.nldev(&net, &missing(|a| a.ndev_name = None)), Err(Error::MissingAttribute("NDEV_NAME")));
        // Bad names, '%' included (patterns are for drivers, not users).
        for bad in ["", "rxe%d", "a/b", "two words"] {
            assert!(matches!(core.link_add(&net, bad, "rxe", "eth0"), Err(Error::InvalidName { .. })), "{bad:?}");
        }
        // Unknown netdev, unknown type, VLAN netdev.
        assert_eq!(core.link_add(&net, "rxe0", "rxe", "eth9"), Err(Error::NoSuchNetdev("eth9".into())));
        assert_eq!(core.link_add(&net, "rxe0", "siw", "eth0"), Err(Error::UnknownLinkType("siw".into())));
        assert_eq!(core.link_add(&net, "rxe0", "rxe", "eth0.100"), Err(Error::VlanNetdev("eth0.100".into())));
        assert_eq!(core.devices().count(), 0);
        // A netdev that already has an rxe.
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        assert_eq!(
            core.link_add(&net, "rxe1", "rxe", "eth0"),
            Err(Error::NetdevHasDevice { netdev: "eth0".into(), device: "rxe0".into() })
        );
        // A duplicate name.
        assert_eq!(core.link_add(&net, "rxe0", "rxe", "eth1"), Err(Error::NameInUse("rxe0".into())));
        assert_eq!(core.devices().count(), 1);
        assert!(core.link_add(&net, "rxe1", "rxe", "eth1").is_ok());
    }

    #[test]
    fn dellink_removes_only_link_created_devices() {
        let net = net();
        let mut core = rxe_core();
        let i = core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        let hw = core
            .register_device(
                &net,
                Box::new(FakeDriver::rxe(MacAddr([0x52, 0x54, 0, 0, 0, 2]))) as Box<dyn Driver>,
                "hw%d",
                &net[1],
            )
            .unwrap();
        assert_eq!(core.nldev(&net, &NldevMsg::del_link(hw)), Err(Error::NotRemovable("hw0".into())));
        assert_eq!(
            core.nldev(&net, &NldevMsg::new(NldevCmd::DelLink, NldevAttrs::default())),
            Err(Error::MissingAttribute("DEV_INDEX"))
        );
        assert!(matches!(core.nldev(&net, &NldevMsg::del_link(77)), Err(Error::NoSuchDevice(_))));
        assert_eq!(core.nldev(&net, &NldevMsg::del_link(i)), Ok(Vec::new()));
        assert!(core.device_by_name("rxe0").is_none());
        assert_eq!(core.link_del(&net, "rxe0"), Err(Error::NoSuchDevice("rxe0".into())));
        // The netdev is free again.
        assert!(core.link_add(&net, "rxe0", "rxe", "eth0").is_ok());
    }

    #[test]
    fn get_one_and_dump() {
        let net = net();
        let mut core = rxe_core();
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        core.link_add(&net, "rxe1", "rxe", "eth1").unwrap();
        let all = core.nldev(&net, &NldevMsg::get_dump()).unwrap();
        let names: Vec<_> = all.iter().filter_map(|m| m.attrs.dev_name.clone()).collect();
        assert_eq!(names, ["rxe0", "rxe1"]);
        let one = core.nldev(&net, &NldevMsg::get(1)).unwrap();
        let a = &one[0].attrs;
        assert_eq!(a.dev_index, Some(1));
        assert_eq!(a.node_type, Some(NodeType::Ca));
        assert_eq!(a.num_ports, Some(1));
        // Linux's rxe has no get_dev_fw_str: no FW_VERSION attribute.
        assert_eq!(a.fw_version, None);
        assert_eq!(a.node_guid.map(|g| alloc::format!("{g}")).as_deref(), Some("5054:00ff:fe00:0002"));
        assert!(matches!(core.nldev(&net, &NldevMsg::get(9)), Err(Error::NoSuchDevice(_))));
    }

    #[test]
    fn port_get_reports_state_and_netdev() {
        let net = net();
        let mut core = rxe_core();
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        let r = core.nldev(&net, &NldevMsg::port_get(0, 1)).unwrap();
        let a = &r[0].attrs;
        assert_eq!(a.port_index, Some(1));
        assert_eq!(a.port_state, Some(PortState::Active));
        assert_eq!(a.port_phys_state, Some(PhysState::LinkUp));
        assert_eq!(a.ndev_name.as_deref(), Some("eth0"));
        assert_eq!(a.ndev_index, Some(2));
        assert_eq!(
            core.nldev(&net, &NldevMsg::port_get(0, 2)),
            Err(Error::NoSuchPort { device: "rxe0".into(), port: 2 })
        );
        assert_eq!(core.nldev(&net, &NldevMsg::port_dump(None)).unwrap().len(), 1);
        assert_eq!(core.nldev(&net, &NldevMsg::port_dump(Some(0))).unwrap().len(), 1);
    }

    #[test]
    fn set_renames() {
        let net = net();
        let mut core = rxe_core();
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        core.link_add(&net, "rxe1", "rxe", "eth1").unwrap();
        assert_eq!(core.nldev(&net, &NldevMsg::set_name(0, "rxe1")), Err(Error::NameInUse("rxe1".into())));
        assert_eq!(core.nldev(&net, &NldevMsg::set_name(0, "lan0")), Ok(Vec::new()));
        assert_eq!(core.device(0).map(|d| d.name()), Some("lan0"));
        let mut no_name = NldevMsg::set_name(0, "x");
        no_name.attrs.dev_name = None;
        assert_eq!(core.nldev(&net, &no_name), Err(Error::MissingAttribute("DEV_NAME")));
    }
}
