//! The boundary to the kernel's network layer: what the RDMA core needs to know
//! about a netdev, and the notifier events the kernel must produce.
//!
//! Mirrors the parts of Linux the seed's GID cache and rxe listen to (seed §4,
//! `roce_gid_mgmt.c` and `rxe_net.c`): the netdev notifier chain
//! (`NETDEV_REGISTER`, `NETDEV_UP`, `NETDEV_DOWN`, `NETDEV_CHANGE`,
//! `NETDEV_CHANGEADDR`, `NETDEV_CHANGEMTU`, `NETDEV_CHANGENAME`,
//! `NETDEV_UNREGISTER`) and the inetaddr / inet6addr chains (address added or
//! removed). Nothing here depends on the kernel: the kernel implements
//! [`NetdevProvider`] and feeds [`NetdevEvent`]s to
//! [`RdmaCore::netdev_event`](super::RdmaCore::netdev_event).
//!
//! Every event carries a snapshot of the netdev taken when the event happened,
//! so the ordered work queue replays history exactly even if the netdev has
//! changed again by the time the queue is drained.

use alloc::string::String;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, Ipv6Addr};

/// Linux interface index (`dev->ifindex`).
pub type IfIndex = u32;

pub use vocab::MacAddr;

/// What makes a netdev a VLAN device: the device it sits on and its tag.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct VlanInfo {
    /// `vlan_dev_real_dev()`: the ifindex of the lower (real) device.
    pub real_ifindex: IfIndex,
    pub vlan_id: u16,
}

/// A snapshot of one netdev, as the kernel's network layer sees it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NetdevInfo {
    pub ifindex: IfIndex,
    pub name: String,
    pub mac: MacAddr,
    /// Layer-3 MTU in bytes (`dev->mtu`), e.g. 1500.
    pub mtu: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// The lower layer reports a link (`netif_carrier_ok`).
    pub carrier: bool,
    /// `Some` for a VLAN netdev (`is_vlan_dev`).
    pub vlan: Option<VlanInfo>,
    /// IPv4 addresses, in the order the stack lists them.
    pub ipv4: Vec<Ipv4Addr>,
    /// IPv6 addresses, in the order the stack lists them (link-local included).
    pub ipv6: Vec<Ipv6Addr>,
}

impl NetdevInfo {
    /// An up Ethernet netdev with carrier, MTU 1500 and no addresses.
    pub fn new(ifindex: IfIndex, name: &str, mac: MacAddr) -> Self {
        NetdevInfo {
            ifindex,
            name: String::from(name),
            mac,
            mtu: 1500,
            up: true,
            carrier: true,
            vlan: None,
            ipv4: Vec::new(),
            ipv6: Vec::new(),
        }
    }

    /// Builder: add an IPv4 address.
    pub fn with_ipv4(mut self, addr: Ipv4Addr) -> Self {
        self.ipv4.push(addr);
        self
    }

    /// Builder: add an IPv6 address.
    pub fn with_ipv6(mut self, addr: Ipv6Addr) -> Self {
        self.ipv6.push(addr);
        self
    }

    /// Builder: set the MTU.
    pub fn with_mtu(mut self, mtu: u32) -> Self {
        self.mtu = mtu;
        self
    }

    /// Builder: make this a VLAN netdev on top of `real_ifindex`.
    pub fn with_vlan(mut self, real_ifindex: IfIndex, vlan_id: u16) -> Self {
        self.vlan = Some(VlanInfo { real_ifindex, vlan_id });
        self
    }

    /// `is_vlan_dev()`.
    pub fn is_vlan(&self) -> bool {
        self.vlan.is_some()
    }

    /// `netif_running() && netif_carrier_ok()`: what rxe calls a usable link.
    pub fn running(&self) -> bool {
        self.up && self.carrier
    }

    /// The device this netdev's traffic really leaves through: itself, or the
    /// real device under a VLAN (`rdma_vlan_dev_real_dev`).
    pub fn real_ifindex(&self) -> IfIndex {
        match self.vlan {
            Some(v) => v.real_ifindex,
            None => self.ifindex,
        }
    }
}

/// Which notifier fired. The names follow Linux's event constants.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NetdevEventKind {
    /// `NETDEV_REGISTER`: the netdev appeared.
    Register,
    /// `NETDEV_UP`: administratively brought up.
    Up,
    /// `NETDEV_DOWN`: administratively brought down.
    Down,
    /// `NETDEV_CHANGE`: carrier (link) state changed.
    Change,
    /// `NETDEV_CHANGEADDR`: the MAC address changed.
    ChangeAddr,
    /// `NETDEV_CHANGEMTU`: the MTU changed.
    ChangeMtu,
    /// `NETDEV_CHANGENAME`: the netdev was renamed.
    ChangeName,
    /// `NETDEV_UNREGISTER`: the netdev is going away.
    Unregister,
    /// inetaddr chain, `NETDEV_UP`: an IPv4 address was added.
    InetAddrAdd(Ipv4Addr),
    /// inetaddr chain, `NETDEV_DOWN`: an IPv4 address was removed.
    InetAddrDel(Ipv4Addr),
    /// inet6addr chain, `NETDEV_UP`: an IPv6 address was added.
    Inet6AddrAdd(Ipv6Addr),
    /// inet6addr chain, `NETDEV_DOWN`: an IPv6 address was removed.
    Inet6AddrDel(Ipv6Addr),
}

impl NetdevEventKind {
    /// The Linux name of the event, for logs.
    pub fn linux_name(&self) -> &'static str {
        match self {
            NetdevEventKind::Register => "NETDEV_REGISTER",
            NetdevEventKind::Up => "NETDEV_UP",
            NetdevEventKind::Down => "NETDEV_DOWN",
            NetdevEventKind::Change => "NETDEV_CHANGE",
            NetdevEventKind::ChangeAddr => "NETDEV_CHANGEADDR",
            NetdevEventKind::ChangeMtu => "NETDEV_CHANGEMTU",
            NetdevEventKind::ChangeName => "NETDEV_CHANGENAME",
            NetdevEventKind::Unregister => "NETDEV_UNREGISTER",
            NetdevEventKind::InetAddrAdd(_) => "inetaddr NETDEV_UP",
            NetdevEventKind::InetAddrDel(_) => "inetaddr NETDEV_DOWN",
            NetdevEventKind::Inet6AddrAdd(_) => "inet6addr NETDEV_UP",
            NetdevEventKind::Inet6AddrDel(_) => "inet6addr NETDEV_DOWN",
        }
    }
}

/// One notifier event: what happened, and the netdev as it was right after.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NetdevEvent {
    pub kind: NetdevEventKind,
    pub dev: NetdevInfo,
}

impl NetdevEvent {
    pub fn new(kind: NetdevEventKind, dev: NetdevInfo) -> Self {
        NetdevEvent { kind, dev }
    }
}

/// The kernel's netdev table, queried synchronously by the control path
/// (`dev_get_by_name`, `for_each_netdev`).
pub trait NetdevProvider {
    /// Look a netdev up by name.
    fn netdev_by_name(&self, name: &str) -> Option<NetdevInfo> {
        let mut found = None;
        self.for_each_netdev(&mut |dev| {
            if found.is_none() && dev.name == name {
                found = Some(dev.clone());
            }
        });
        found
    }

    /// Visit every netdev, in ifindex order.
    fn for_each_netdev(&self, f: &mut dyn FnMut(&NetdevInfo));
}

/// A fixed list of netdevs is a provider: handy for tests and for a kernel
/// that keeps its netdevs in a plain vector.
impl NetdevProvider for [NetdevInfo] {
    fn for_each_netdev(&self, f: &mut dyn FnMut(&NetdevInfo)) {
        let mut sorted: Vec<&NetdevInfo> = self.iter().collect();
        sorted.sort_by_key(|d| d.ifindex);
        for dev in sorted {
            f(dev);
        }
    }
}

impl NetdevProvider for Vec<NetdevInfo> {
    fn for_each_netdev(&self, f: &mut dyn FnMut(&NetdevInfo)) {
        self.as_slice().for_each_netdev(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn vlan_resolves_to_its_real_device() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let eth = NetdevInfo::new(2, "eth0", mac);
        let vlan = NetdevInfo::new(5, "eth0.100", mac).with_vlan(2, 100);
        assert!(!eth.is_vlan());
        assert_eq!(eth.real_ifindex(), 2);
        assert!(vlan.is_vlan());
        assert_eq!(vlan.real_ifindex(), 2);
    }

    #[test]
    fn running_needs_admin_up_and_carrier() {
        let mut d = NetdevInfo::new(2, "eth0", MacAddr::default());
        assert!(d.running());
        d.carrier = false;
        assert!(!d.running());
        d.carrier = true;
        d.up = false;
        assert!(!d.running());
    }

    #[test]
    fn slice_provider_finds_by_name_in_ifindex_order() {
        let mac = MacAddr::default();
        let list = vec![NetdevInfo::new(7, "eth1", mac), NetdevInfo::new(2, "eth0", mac)];
        assert_eq!(list.netdev_by_name("eth1").map(|d| d.ifindex), Some(7));
        assert!(list.netdev_by_name("eth9").is_none());
        let mut order = Vec::new();
        list.for_each_netdev(&mut |d| order.push(d.ifindex));
        assert_eq!(order, vec![2, 7]);
    }

    #[test]
    fn event_names_follow_linux() {
        assert_eq!(NetdevEventKind::ChangeAddr.linux_name(), "NETDEV_CHANGEADDR");
        assert_eq!(NetdevEventKind::InetAddrAdd(Ipv4Addr::new(10, 0, 0, 1)).linux_name(), "inetaddr NETDEV_UP");
    }
}
