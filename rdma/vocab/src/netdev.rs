//! A network device as every layer sees it, and the notifier events that say
//! what changed on one. The kernel's netdev registry produces them, its notifier
//! chain delivers them in order (the console log, the neighbour table, the RDMA
//! core's GID cache and ports all subscribe), and nobody converts them.
//!
//! The kinds fold Linux's three chains into one, with Linux's names: the netdev
//! chain (`NETDEV_REGISTER`, `NETDEV_UP`, `NETDEV_DOWN`, `NETDEV_CHANGE`,
//! `NETDEV_CHANGEADDR`, `NETDEV_CHANGEMTU`, `NETDEV_CHANGENAME`,
//! `NETDEV_UNREGISTER`), the inetaddr chain and the inet6addr chain (an address
//! added or removed). One chain, because the GID cache must see "eth0 down" and
//! "fe80:: removed" in the order they happened.
//!
//! Every event carries a snapshot of the device taken right after the change, so
//! a late delivery still replays history exactly and no subscriber calls back into
//! the registry.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use crate::cidr::{Ipv4Cidr, Ipv6Cidr};
use crate::mac::MacAddr;

/// Linux interface index (`dev->ifindex`).
pub type IfIndex = u32;

/// What makes a netdev a VLAN device: the device it sits on and its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanInfo {
    /// `vlan_dev_real_dev()`: the ifindex of the lower (real) device.
    pub real_ifindex: IfIndex,
    pub vlan_id: u16,
}

/// A snapshot of one netdev.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// IPv4 addresses in the order they were added.
    pub ipv4: Vec<Ipv4Cidr>,
    /// IPv6 addresses, link-local included, in the order they were added.
    pub ipv6: Vec<Ipv6Cidr>,
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

    /// Builder: add an IPv4 address as a host address (/32).
    pub fn with_ipv4(mut self, addr: Ipv4Addr) -> Self {
        self.ipv4.push(Ipv4Cidr::new(addr, 32));
        self
    }

    /// Builder: add an IPv6 address as a host address (/128).
    pub fn with_ipv6(mut self, addr: Ipv6Addr) -> Self {
        self.ipv6.push(Ipv6Cidr::new(addr, 128));
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

/// What happened. Address events carry the address with its prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEventKind {
    /// `NETDEV_REGISTER`: the device appeared (administratively down).
    Register,
    /// `NETDEV_UP`: brought administratively up.
    Up,
    /// `NETDEV_DOWN`: brought administratively down.
    Down,
    /// `NETDEV_CHANGE`: carrier changed while the device was up; the new state is
    /// in the snapshot.
    Change,
    /// `NETDEV_CHANGEADDR`: the MAC changed; `old` is what it was (Linux only
    /// offers that in `NETDEV_PRE_CHANGEADDR`).
    ChangeAddr { old: MacAddr },
    /// `NETDEV_CHANGEMTU`: the MTU changed from `old`.
    ChangeMtu { old: u32 },
    /// `NETDEV_CHANGENAME`: the device was renamed.
    ChangeName,
    /// `NETDEV_UNREGISTER`: the device is gone; its addresses were removed (with
    /// their own events) before this one.
    Unregister,
    /// inetaddr chain `NETDEV_UP`: an IPv4 address was added.
    InetAddrAdd(Ipv4Cidr),
    /// inetaddr chain `NETDEV_DOWN`: an IPv4 address was removed.
    InetAddrDel(Ipv4Cidr),
    /// inet6addr chain `NETDEV_UP`: an IPv6 address was added.
    Inet6AddrAdd(Ipv6Cidr),
    /// inet6addr chain `NETDEV_DOWN`: an IPv6 address was removed.
    Inet6AddrDel(Ipv6Cidr),
}

impl NetdevEventKind {
    /// The Linux name of the event (chain and constant), for logs.
    pub fn linux_name(&self) -> &'static str {
        match self {
            NetdevEventKind::Register => "NETDEV_REGISTER",
            NetdevEventKind::Up => "NETDEV_UP",
            NetdevEventKind::Down => "NETDEV_DOWN",
            NetdevEventKind::Change => "NETDEV_CHANGE",
            NetdevEventKind::ChangeAddr { .. } => "NETDEV_CHANGEADDR",
            NetdevEventKind::ChangeMtu { .. } => "NETDEV_CHANGEMTU",
            NetdevEventKind::ChangeName => "NETDEV_CHANGENAME",
            NetdevEventKind::Unregister => "NETDEV_UNREGISTER",
            NetdevEventKind::InetAddrAdd(_) => "inetaddr NETDEV_UP",
            NetdevEventKind::InetAddrDel(_) => "inetaddr NETDEV_DOWN",
            NetdevEventKind::Inet6AddrAdd(_) => "inet6addr NETDEV_UP",
            NetdevEventKind::Inet6AddrDel(_) => "inet6addr NETDEV_DOWN",
        }
    }
}

/// One event: what happened, and the netdev as it was right after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetdevEvent {
    /// Position in the notifier queue since boot; strictly increasing, so a
    /// subscriber can tell it missed nothing (0 for events made by hand).
    pub seq: u64,
    pub kind: NetdevEventKind,
    pub dev: NetdevInfo,
}

impl NetdevEvent {
    /// An event outside any queue (`seq` 0).
    pub fn new(kind: NetdevEventKind, dev: NetdevInfo) -> Self {
        NetdevEvent { seq: 0, kind, dev }
    }
}

/// One console line per event, e.g. `eth0: NETDEV_UP` or
/// `eth0: inetaddr NETDEV_UP 10.0.0.2/24`.
impl fmt::Display for NetdevEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.dev.name, self.kind.linux_name())?;
        match self.kind {
            NetdevEventKind::Register
            | NetdevEventKind::Up
            | NetdevEventKind::Down
            | NetdevEventKind::ChangeName
            | NetdevEventKind::Unregister => Ok(()),
            NetdevEventKind::Change => write!(f, " carrier {}", if self.dev.carrier { "on" } else { "off" }),
            NetdevEventKind::ChangeAddr { old } => write!(f, " {} (was {old})", self.dev.mac),
            NetdevEventKind::ChangeMtu { old } => write!(f, " {} (was {old})", self.dev.mtu),
            NetdevEventKind::InetAddrAdd(c) | NetdevEventKind::InetAddrDel(c) => write!(f, " {c}"),
            NetdevEventKind::Inet6AddrAdd(c) | NetdevEventKind::Inet6AddrDel(c) => write!(f, " {c}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    const MAC: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 1]);

    #[test]
    fn vlan_resolves_to_its_real_device() {
        let eth = NetdevInfo::new(2, "eth0", MAC);
        let vlan = NetdevInfo::new(5, "eth0.100", MAC).with_vlan(2, 100);
        assert!(!eth.is_vlan());
        assert_eq!(eth.real_ifindex(), 2);
        assert!(vlan.is_vlan());
        assert_eq!(vlan.real_ifindex(), 2);
    }

    #[test]
    fn running_needs_admin_up_and_carrier() {
        let mut d = NetdevInfo::new(2, "eth0", MAC);
        assert!(d.running());
        d.carrier = false;
        assert!(!d.running());
        d.carrier = true;
        d.up = false;
        assert!(!d.running());
    }

    #[test]
    fn display_names_every_kind() {
        let c4 = Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 2), 24);
        let c6 = Ipv6Cidr::new(Ipv6Addr::new(0xfe80, 0, 0, 0, 0x5054, 0xff, 0xfe00, 1), 64);
        let cases = vec![
            (NetdevEventKind::Up, "eth0: NETDEV_UP"),
            (NetdevEventKind::Change, "eth0: NETDEV_CHANGE carrier on"),
            (
                NetdevEventKind::ChangeAddr { old: MacAddr([0x52, 0x54, 0, 0, 0, 9]) },
                "eth0: NETDEV_CHANGEADDR 52:54:00:00:00:01 (was 52:54:00:00:00:09)",
            ),
            (NetdevEventKind::ChangeMtu { old: 9000 }, "eth0: NETDEV_CHANGEMTU 1500 (was 9000)"),
            (NetdevEventKind::ChangeName, "eth0: NETDEV_CHANGENAME"),
            (NetdevEventKind::InetAddrAdd(c4), "eth0: inetaddr NETDEV_UP 10.0.0.2/24"),
            (NetdevEventKind::InetAddrDel(c4), "eth0: inetaddr NETDEV_DOWN 10.0.0.2/24"),
            (NetdevEventKind::Inet6AddrAdd(c6), "eth0: inet6addr NETDEV_UP fe80::5054:ff:fe00:1/64"),
            (NetdevEventKind::Inet6AddrDel(c6), "eth0: inet6addr NETDEV_DOWN fe80::5054:ff:fe00:1/64"),
            (NetdevEventKind::Unregister, "eth0: NETDEV_UNREGISTER"),
        ];
        for (kind, text) in cases {
            assert_eq!(NetdevEvent::new(kind, NetdevInfo::new(2, "eth0", MAC)).to_string(), text);
        }
    }
}
