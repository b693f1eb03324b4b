//! The netdev registry: the appliance's network devices by name and ifindex, with
//! their MAC, MTU, admin and carrier state and IP addresses, as Linux keeps them in
//! `struct net_device`, `in_device` and `inet6_dev`.
//!
//! Every change goes through [`Netdevs`] so that it also enqueues the notifier
//! events Linux would raise (see [`events`](crate::events)); what raises what is
//! listed on [`Netdevs`]. Errors read like iproute2's, but say which device and
//! which address: `address 10.0.0.2/24 already assigned to eth0`,
//! `Cannot find device "eth9"`.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vocab::{IfIndex, IpCidr, Ipv4Cidr, Ipv6Cidr, MacAddr};

use crate::addr::{self, AddrError, AddrSpec};
use crate::events::{NetdevEventKind, NetdevInfo, NetdevNotifier, NotifierChain, SubscriberId};
use crate::steer::LinkStats;

/// A device name: at most 15 bytes, Linux's `IFNAMSIZ` less the NUL.
pub type IfName = heapless::String<15>;

/// Smallest MTU an Ethernet device takes (`ETH_MIN_MTU`, IPv4's minimum).
pub const ETH_MIN_MTU: u32 = 68;
/// The standard Ethernet MTU (`ETH_DATA_LEN`).
pub const ETH_DATA_LEN: u32 = 1500;
/// The first ifindex we hand out. Linux gives 1 to `lo`, which we do not have;
/// starting at 2 keeps `2: eth0:` as it reads on a Linux host.
pub const FIRST_IFINDEX: IfIndex = 2;

/// Why a registry operation was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetdevError {
    /// No device has that name.
    NoSuchDevice(String),
    /// The name is taken.
    NameInUse(IfName),
    /// Empty, too long, `.`/`..`, or containing `/`, `:` or whitespace.
    InvalidName(String),
    /// Every name the `%d` pattern can make is taken.
    NoFreeName(String),
    /// The address is already on the device.
    AddrExists { addr: IpCidr, dev: IfName },
    /// The address (with that prefix, if one was given) is not on the device.
    AddrNotFound { addr: AddrSpec, dev: IfName },
    /// The MTU is outside what the device takes.
    MtuOutOfRange { dev: IfName, mtu: u32, min: u32, max: u32 },
    /// Multicast or all-zero MACs cannot be a device's address.
    InvalidMac(MacAddr),
    /// The address itself is malformed or not unicast.
    Addr(AddrError),
}

impl fmt::Display for NetdevError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetdevError::NoSuchDevice(n) => write!(f, "Cannot find device \"{n}\""),
            NetdevError::NameInUse(n) => write!(f, "device \"{n}\" already exists"),
            NetdevError::InvalidName(n) => write!(f, "\"{n}\" is not a valid device name"),
            NetdevError::NoFreeName(p) => write!(f, "no free device name for \"{p}\""),
            NetdevError::AddrExists { addr, dev } => write!(f, "address {addr} already assigned to {dev}"),
            NetdevError::AddrNotFound { addr, dev } => write!(f, "address {addr} not assigned to {dev}"),
            NetdevError::MtuOutOfRange { dev, mtu, min, max } => {
                write!(f, "mtu {mtu} out of range for {dev} ({min}-{max})")
            }
            NetdevError::InvalidMac(m) => write!(f, "invalid MAC address {m}: not unicast"),
            NetdevError::Addr(e) => e.fmt(f),
        }
    }
}

impl From<AddrError> for NetdevError {
    fn from(e: AddrError) -> Self {
        NetdevError::Addr(e)
    }
}

/// Who put an IPv6 address on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inet6Origin {
    /// addrconf's link-local, derived from the MAC; comes and goes with the link.
    LinkLocal,
    /// Added by `ip addr add` (Linux's `IFA_F_PERMANENT`).
    Static,
}

/// An IPv6 address on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inet6Addr {
    pub cidr: Ipv6Cidr,
    pub origin: Inet6Origin,
}

/// What a driver tells the registry about a new device.
#[derive(Clone, Debug)]
pub struct NetdevConfig<'a> {
    /// An exact name (`eth0`) or a pattern with one `%d` (`eth%d`), which takes
    /// the lowest free number as Linux's `dev_alloc_name` does.
    pub name: &'a str,
    pub mac: MacAddr,
    pub mtu: u32,
    pub min_mtu: u32,
    /// What the device can carry: 1500, or more when virtio offers the MTU feature.
    pub max_mtu: u32,
    /// Whether the link is up at registration (Linux starts with carrier on
    /// until the driver says otherwise).
    pub carrier: bool,
}

impl<'a> NetdevConfig<'a> {
    /// An `eth%d` device with MTU 1500 and carrier.
    pub fn ethernet(mac: MacAddr) -> Self {
        NetdevConfig {
            name: "eth%d",
            mac,
            mtu: ETH_DATA_LEN,
            min_mtu: ETH_MIN_MTU,
            max_mtu: ETH_DATA_LEN,
            carrier: true,
        }
    }
}

/// One network device.
#[derive(Clone, Debug)]
pub struct Netdev {
    ifindex: IfIndex,
    name: IfName,
    mac: MacAddr,
    mtu: u32,
    min_mtu: u32,
    max_mtu: u32,
    admin_up: bool,
    carrier: bool,
    ipv4: Vec<Ipv4Cidr>,
    ipv6: Vec<Inet6Addr>,
    stats: LinkStats,
}

impl Netdev {
    pub fn ifindex(&self) -> IfIndex {
        self.ifindex
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn mac(&self) -> MacAddr {
        self.mac
    }
    pub fn mtu(&self) -> u32 {
        self.mtu
    }
    pub fn max_mtu(&self) -> u32 {
        self.max_mtu
    }
    /// Administratively up (`IFF_UP`).
    pub fn is_up(&self) -> bool {
        self.admin_up
    }
    /// Carrier present (`netif_carrier_ok`, iproute2's `LOWER_UP`).
    pub fn has_carrier(&self) -> bool {
        self.carrier
    }
    /// Up with carrier: the operational state iproute2 prints as `state UP`.
    pub fn is_running(&self) -> bool {
        self.admin_up && self.carrier
    }
    /// IPv4 addresses in the order they were added.
    pub fn ipv4(&self) -> &[Ipv4Cidr] {
        &self.ipv4
    }
    /// IPv6 addresses in the order they were added.
    pub fn ipv6(&self) -> &[Inet6Addr] {
        &self.ipv6
    }
    /// The receive/transmit counters.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }
    /// Whether `a` is one of this device's IPv4 addresses.
    pub fn has_ipv4(&self, a: Ipv4Addr) -> bool {
        self.ipv4.iter().any(|c| c.address() == a)
    }

    /// The device as an event payload.
    pub fn snapshot(&self) -> NetdevInfo {
        NetdevInfo {
            ifindex: self.ifindex,
            name: self.name.as_str().into(),
            mac: self.mac,
            mtu: self.mtu,
            up: self.admin_up,
            carrier: self.carrier,
            vlan: None,
            ipv4: self.ipv4.clone(),
            ipv6: self.ipv6.iter().map(|a| a.cidr).collect(),
        }
    }

    fn link_local_index(&self) -> Option<usize> {
        self.ipv6.iter().position(|a| a.origin == Inet6Origin::LinkLocal)
    }
}

/// The registry of devices and its notifier chain.
///
/// Events each change raises, in order (each only if something changed; setting
/// a device to the state it is already in raises nothing, as in Linux):
///
/// | change | events |
/// |---|---|
/// | [`register`](Self::register) | `NETDEV_REGISTER` (the device starts down) |
/// | [`set_up`](Self::set_up) `true` | `NETDEV_UP`, then `Inet6AddrAdd(fe80::…)` if the carrier is on |
/// | [`set_up`](Self::set_up) `false` | `NETDEV_DOWN`, then `Inet6AddrDel` for the link-local (and for static IPv6 addresses unless `keep_addr_on_down`) |
/// | [`set_carrier`](Self::set_carrier) | `NETDEV_CHANGE` if the device is up, then `Inet6AddrAdd(fe80::…)` when the link first comes ready |
/// | [`set_mtu`](Self::set_mtu) | `NETDEV_CHANGEMTU` |
/// | [`set_mac`](Self::set_mac) | `NETDEV_CHANGEADDR`, then `Inet6AddrDel(old fe80::…)`, `Inet6AddrAdd(new fe80::…)` if a link-local was present |
/// | [`add_ipv4`](Self::add_ipv4) / [`del_ipv4`](Self::del_ipv4) | `InetAddrAdd` / `InetAddrDel` |
/// | [`add_ipv6`](Self::add_ipv6) / [`del_ipv6`](Self::del_ipv6) | `Inet6AddrAdd` / `Inet6AddrDel` |
/// | [`unregister`](Self::unregister) | the `set_up(false)` events if up, `InetAddrDel` per IPv4, `Inet6AddrDel` per remaining IPv6, then `NETDEV_UNREGISTER` |
///
/// Linux facts behind the choices:
/// - IPv4 addresses survive down/up (`inetdev_event` leaves them) and raise no
///   address events on down/up.
/// - addrconf (`addrconf_notify`) adds the link-local on `NETDEV_UP` only if the
///   link is ready (carrier), otherwise on the `NETDEV_CHANGE` that brings carrier;
///   losing carrier keeps the addresses. On `NETDEV_DOWN`, `addrconf_ifdown`
///   removes the link-local always and, with the default `keep_addr_on_down=0`, the
///   static addresses too. We default to `keep_addr_on_down=1` (static addresses
///   stay, as for IPv4) because an appliance whose configured GIDs vanish on a
///   link flap is a surprise; [`set_keep_addr_on_down`](Self::set_keep_addr_on_down)
///   gives Linux's default back.
/// - The `NETDEV_DOWN` event is queued before the address removals it causes,
///   and `NETDEV_UP` before the link-local it causes, which is the order a
///   subscriber registered after addrconf observes.
/// - Linux leaves the link-local alone on a MAC change (most drivers only let
///   the MAC change while down, and the next up derives a new one). We replace
///   it at once so a subscriber never holds a GID made from a MAC the device no
///   longer has.
/// - On unregister, addresses go before `NETDEV_UNREGISTER`, so a subscriber can
///   forget the device on that last event and never hear of it again.
/// - Deleting one IPv4 address never deletes others (Linux's
///   `promote_secondaries=1`, which most distributions set).
/// - Linux disables IPv6 on a device whose MTU drops below 1280; we do not.
#[derive(Debug)]
pub struct Netdevs {
    devs: Vec<Netdev>,
    next_ifindex: IfIndex,
    chain: NotifierChain,
    keep_addr_on_down: bool,
}

impl Default for Netdevs {
    fn default() -> Self {
        Self::new()
    }
}

impl Netdevs {
    pub fn new() -> Self {
        Netdevs { devs: Vec::new(), next_ifindex: FIRST_IFINDEX, chain: NotifierChain::new(), keep_addr_on_down: true }
    }

    /// Linux's `net.ipv6.conf.all.keep_addr_on_down`; see the type's docs.
    pub fn set_keep_addr_on_down(&mut self, keep: bool) {
        self.keep_addr_on_down = keep;
    }

    // ---- lookups ----

    /// All devices in ifindex order.
    pub fn iter(&self) -> impl Iterator<Item = &Netdev> {
        self.devs.iter()
    }
    pub fn len(&self) -> usize {
        self.devs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.devs.is_empty()
    }
    /// The device named `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Netdev> {
        self.devs.iter().find(|d| d.name == name)
    }
    /// The device named `name`, or the iproute2-style error for the console.
    pub fn dev(&self, name: &str) -> Result<&Netdev, NetdevError> {
        self.get(name).ok_or_else(|| NetdevError::NoSuchDevice(name.to_string()))
    }
    pub fn by_index(&self, ifindex: IfIndex) -> Option<&Netdev> {
        self.devs.iter().find(|d| d.ifindex == ifindex)
    }
    /// The device that owns IPv4 address `a` (first by ifindex if several do).
    pub fn owner_of_ipv4(&self, a: Ipv4Addr) -> Option<&Netdev> {
        self.devs.iter().find(|d| d.has_ipv4(a))
    }
    /// The counters the data path updates.
    pub fn stats_mut(&mut self, ifindex: IfIndex) -> Option<&mut LinkStats> {
        self.devs.iter_mut().find(|d| d.ifindex == ifindex).map(|d| &mut d.stats)
    }

    // ---- notifier chain ----

    /// Subscribes to the chain. The new subscriber is first told, synchronously,
    /// about every existing device (`NETDEV_REGISTER`, `NETDEV_UP` if up, then an
    /// add event per address), so it needs no separate walk of the registry.
    pub fn subscribe(&mut self, notifier: alloc::boxed::Box<dyn NetdevNotifier>) -> SubscriberId {
        let mut replay = Vec::new();
        for d in &self.devs {
            let snap = d.snapshot();
            replay.push((NetdevEventKind::Register, snap.clone()));
            if d.admin_up {
                replay.push((NetdevEventKind::Up, snap.clone()));
            }
            replay.extend(d.ipv4.iter().map(|c| (NetdevEventKind::InetAddrAdd(*c), snap.clone())));
            replay.extend(d.ipv6.iter().map(|a| (NetdevEventKind::Inet6AddrAdd(a.cidr), snap.clone())));
        }
        self.chain.subscribe(notifier, &replay)
    }
    pub fn unsubscribe(&mut self, id: SubscriberId) -> bool {
        self.chain.unsubscribe(id)
    }
    /// Delivers the queued events (call from the poll loop); returns how many.
    pub fn process_events(&mut self) -> usize {
        self.chain.process()
    }
    /// The chain, to look at what is queued.
    pub fn chain(&self) -> &NotifierChain {
        &self.chain
    }

    // ---- device life cycle ----

    /// Adds a device, administratively down; returns its ifindex.
    pub fn register(&mut self, cfg: &NetdevConfig<'_>) -> Result<IfIndex, NetdevError> {
        let name = self.alloc_name(cfg.name)?;
        check_mac(cfg.mac)?;
        let (min, max) = (cfg.min_mtu, cfg.max_mtu.max(cfg.min_mtu));
        if !(min..=max).contains(&cfg.mtu) {
            return Err(NetdevError::MtuOutOfRange { dev: name, mtu: cfg.mtu, min, max });
        }
        let ifindex = self.next_ifindex;
        // Never reused, so a stale ifindex held by a subscriber cannot name a new device.
        self.next_ifindex = self.next_ifindex.saturating_add(1);
        self.devs.push(Netdev {
            ifindex,
            name,
            mac: cfg.mac,
            mtu: cfg.mtu,
            min_mtu: min,
            max_mtu: max,
            admin_up: false,
            carrier: cfg.carrier,
            ipv4: Vec::new(),
            ipv6: Vec::new(),
            stats: LinkStats::default(),
        });
        let i = self.devs.len() - 1;
        self.emit(i, NetdevEventKind::Register);
        Ok(ifindex)
    }

    /// Removes a device, taking it down and its addresses off first.
    pub fn unregister(&mut self, name: &str) -> Result<(), NetdevError> {
        let i = self.index(name)?;
        self.set_up_at(i, false);
        while let Some(c) = self.devs[i].ipv4.pop() {
            self.emit(i, NetdevEventKind::InetAddrDel(c));
        }
        while let Some(a) = self.devs[i].ipv6.pop() {
            self.emit(i, NetdevEventKind::Inet6AddrDel(a.cidr));
        }
        self.emit(i, NetdevEventKind::Unregister);
        self.devs.remove(i);
        Ok(())
    }

    // ---- link state ----

    /// `ip link set DEV up|down`.
    pub fn set_up(&mut self, name: &str, up: bool) -> Result<(), NetdevError> {
        let i = self.index(name)?;
        self.set_up_at(i, up);
        Ok(())
    }

    /// The driver reports link up or down.
    pub fn set_carrier(&mut self, name: &str, carrier: bool) -> Result<(), NetdevError> {
        let i = self.index(name)?;
        let d = &mut self.devs[i];
        if d.carrier == carrier {
            return Ok(());
        }
        d.carrier = carrier;
        // Linux's linkwatch only announces carrier changes of devices that are up.
        if d.admin_up {
            self.emit(i, NetdevEventKind::Change);
            self.add_link_local_if_ready(i);
        }
        Ok(())
    }

    /// `ip link set DEV mtu N`.
    pub fn set_mtu(&mut self, name: &str, mtu: u32) -> Result<(), NetdevError> {
        let i = self.index(name)?;
        let d = &mut self.devs[i];
        if !(d.min_mtu..=d.max_mtu).contains(&mtu) {
            return Err(NetdevError::MtuOutOfRange { dev: d.name.clone(), mtu, min: d.min_mtu, max: d.max_mtu });
        }
        if d.mtu == mtu {
            return Ok(());
        }
        let old = core::mem::replace(&mut d.mtu, mtu);
        self.emit(i, NetdevEventKind::ChangeMtu { old });
        Ok(())
    }

    /// `ip link set DEV address MAC`, or the driver learning its MAC late.
    pub fn set_mac(&mut self, name: &str, mac: MacAddr) -> Result<(), NetdevError> {
        let i = self.index(name)?;
        check_mac(mac)?;
        let d = &mut self.devs[i];
        if d.mac == mac {
            return Ok(());
        }
        let old = core::mem::replace(&mut d.mac, mac);
        self.emit(i, NetdevEventKind::ChangeAddr { old });
        if let Some(ll) = self.devs[i].link_local_index() {
            let gone = self.devs[i].ipv6.remove(ll);
            self.emit(i, NetdevEventKind::Inet6AddrDel(gone.cidr));
            self.add_link_local_if_ready(i);
        }
        Ok(())
    }

    // ---- addresses ----

    /// `ip addr add A.B.C.D/N dev DEV`. The same address twice on one device is
    /// refused whatever the prefix (Linux would take it under another prefix, but
    /// it would be one GID twice).
    pub fn add_ipv4(&mut self, name: &str, cidr: Ipv4Cidr) -> Result<(), NetdevError> {
        let i = self.index(name)?;
        addr::check_ipv4_unicast(cidr.address())?;
        let d = &mut self.devs[i];
        if let Some(have) = d.ipv4.iter().find(|c| c.address() == cidr.address()) {
            return Err(NetdevError::AddrExists { addr: IpCidr::Ipv4(*have), dev: d.name.clone() });
        }
        d.ipv4.push(cidr);
        self.emit(i, NetdevEventKind::InetAddrAdd(cidr));
        Ok(())
    }

    /// `ip addr del A.B.C.D[/N] dev DEV`: without a prefix any prefix matches.
    /// Returns the address removed.
    pub fn del_ipv4(&mut self, name: &str, a: Ipv4Addr, prefix: Option<u8>) -> Result<Ipv4Cidr, NetdevError> {
        let i = self.index(name)?;
        let d = &mut self.devs[i];
        let Some(pos) = d.ipv4.iter().position(|c| c.address() == a && prefix.is_none_or(|p| p == c.prefix_len()))
        else {
            let addr = AddrSpec { addr: IpAddr::V4(a), prefix };
            return Err(NetdevError::AddrNotFound { addr, dev: d.name.clone() });
        };
        let gone = d.ipv4.remove(pos);
        self.emit(i, NetdevEventKind::InetAddrDel(gone));
        Ok(gone)
    }

    /// `ip addr add X::Y/N dev DEV` (a static address; allowed while down, as in Linux).
    pub fn add_ipv6(&mut self, name: &str, cidr: Ipv6Cidr) -> Result<(), NetdevError> {
        let i = self.index(name)?;
        addr::check_ipv6_unicast(cidr.address())?;
        let d = &mut self.devs[i];
        if let Some(have) = d.ipv6.iter().find(|a| a.cidr.address() == cidr.address()) {
            return Err(NetdevError::AddrExists { addr: IpCidr::Ipv6(have.cidr), dev: d.name.clone() });
        }
        d.ipv6.push(Inet6Addr { cidr, origin: Inet6Origin::Static });
        self.emit(i, NetdevEventKind::Inet6AddrAdd(cidr));
        Ok(())
    }

    /// `ip addr del X::Y[/N] dev DEV`; the link-local can be deleted too (it comes
    /// back on the next up, as in Linux). Returns the address removed.
    pub fn del_ipv6(&mut self, name: &str, a: Ipv6Addr, prefix: Option<u8>) -> Result<Ipv6Cidr, NetdevError> {
        let i = self.index(name)?;
        let d = &mut self.devs[i];
        let Some(pos) =
            d.ipv6.iter().position(|x| x.cidr.address() == a && prefix.is_none_or(|p| p == x.cidr.prefix_len()))
        else {
            let addr = AddrSpec { addr: IpAddr::V6(a), prefix };
            return Err(NetdevError::AddrNotFound { addr, dev: d.name.clone() });
        };
        let gone = d.ipv6.remove(pos).cidr;
        self.emit(i, NetdevEventKind::Inet6AddrDel(gone));
        Ok(gone)
    }

    /// `ip addr add SPEC dev DEV` for either family; a missing prefix means a
    /// host address (/32, /128), as iproute2 does.
    pub fn add_addr(&mut self, name: &str, spec: AddrSpec) -> Result<(), NetdevError> {
        match spec.addr {
            IpAddr::V4(a) => self.add_ipv4(name, Ipv4Cidr::new(a, spec.prefix_or_host().min(32))),
            IpAddr::V6(a) => self.add_ipv6(name, Ipv6Cidr::new(a, spec.prefix_or_host().min(128))),
        }
    }

    /// `ip addr del SPEC dev DEV` for either family.
    pub fn del_addr(&mut self, name: &str, spec: AddrSpec) -> Result<IpCidr, NetdevError> {
        match spec.addr {
            IpAddr::V4(a) => self.del_ipv4(name, a, spec.prefix).map(IpCidr::Ipv4),
            IpAddr::V6(a) => self.del_ipv6(name, a, spec.prefix).map(IpCidr::Ipv6),
        }
    }

    // ---- internals ----

    fn index(&self, name: &str) -> Result<usize, NetdevError> {
        self.devs.iter().position(|d| d.name == name).ok_or_else(|| NetdevError::NoSuchDevice(name.to_string()))
    }

    fn emit(&mut self, i: usize, kind: NetdevEventKind) {
        let snap = self.devs[i].snapshot();
        self.chain.enqueue(kind, snap);
    }

    fn set_up_at(&mut self, i: usize, up: bool) {
        if self.devs[i].admin_up == up {
            return;
        }
        self.devs[i].admin_up = up;
        if up {
            self.emit(i, NetdevEventKind::Up);
            self.add_link_local_if_ready(i);
        } else {
            self.emit(i, NetdevEventKind::Down);
            let keep_static = self.keep_addr_on_down;
            let mut k = 0;
            while k < self.devs[i].ipv6.len() {
                let a = self.devs[i].ipv6[k];
                if a.origin == Inet6Origin::Static && keep_static {
                    k += 1;
                } else {
                    self.devs[i].ipv6.remove(k);
                    self.emit(i, NetdevEventKind::Inet6AddrDel(a.cidr));
                }
            }
        }
    }

    /// addrconf's "link ready": up with carrier and no link-local yet.
    fn add_link_local_if_ready(&mut self, i: usize) {
        let d = &mut self.devs[i];
        if !d.is_running() || d.link_local_index().is_some() {
            return;
        }
        let ll = addr::link_local_from_mac(d.mac);
        // A static copy of the same address already serves (Linux gets EEXIST and moves on).
        if d.ipv6.iter().any(|a| a.cidr.address() == ll.address()) {
            return;
        }
        d.ipv6.push(Inet6Addr { cidr: ll, origin: Inet6Origin::LinkLocal });
        self.emit(i, NetdevEventKind::Inet6AddrAdd(ll));
    }

    /// An exact name, or the lowest free `%d` of a pattern.
    fn alloc_name(&self, pattern: &str) -> Result<IfName, NetdevError> {
        let invalid = || NetdevError::InvalidName(pattern.to_string());
        match pattern.split_once("%d") {
            None => {
                let name = valid_name(pattern).ok_or_else(invalid)?;
                match self.get(&name) {
                    Some(_) => Err(NetdevError::NameInUse(name)),
                    None => Ok(name),
                }
            }
            Some((pre, post)) => {
                if pre.contains('%') || post.contains('%') {
                    return Err(invalid());
                }
                // One more number than there are devices is always enough to find a gap.
                for n in 0..=self.devs.len() {
                    let mut s = String::new();
                    let _ = fmt::write(&mut s, format_args!("{pre}{n}{post}"));
                    let name = valid_name(&s).ok_or_else(invalid)?;
                    if self.get(&name).is_none() {
                        return Ok(name);
                    }
                }
                Err(NetdevError::NoFreeName(pattern.to_string()))
            }
        }
    }
}

/// Linux's `dev_valid_name`.
fn valid_name(s: &str) -> Option<IfName> {
    if s.is_empty() || s == "." || s == ".." || s.chars().any(|c| c == '/' || c == ':' || c.is_whitespace()) {
        return None;
    }
    IfName::try_from(s).ok()
}

fn check_mac(mac: MacAddr) -> Result<(), NetdevError> {
    if !mac.is_unicast() || mac.0 == [0; 6] {
        return Err(NetdevError::InvalidMac(mac));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{link_local_from_mac, parse_addr_spec, parse_ipv4_cidr, parse_ipv6_cidr};
    use crate::events::NetdevEvent;
    use alloc::boxed::Box;
    use alloc::rc::Rc;
    use alloc::string::ToString;
    use alloc::vec;
    use core::cell::RefCell;

    const MAC1: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 1]);
    const MAC2: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 2]);

    /// A registry with eth0 registered and a recording subscriber.
    fn setup() -> (Netdevs, Rc<RefCell<Vec<String>>>) {
        let mut n = Netdevs::new();
        let log: Rc<RefCell<Vec<String>>> = Rc::default();
        let l = log.clone();
        n.subscribe(Box::new(move |ev: &NetdevEvent| l.borrow_mut().push(ev.to_string())));
        n.register(&NetdevConfig::ethernet(MAC1)).unwrap();
        (n, log)
    }

    fn drain(n: &mut Netdevs, log: &Rc<RefCell<Vec<String>>>) -> Vec<String> {
        n.process_events();
        core::mem::take(&mut *log.borrow_mut())
    }

    fn v4(s: &str) -> Ipv4Cidr {
        parse_ipv4_cidr(s).unwrap()
    }

    #[test]
    fn names_and_ifindexes_are_allocated_like_linux() {
        let mut n = Netdevs::new();
        assert_eq!(n.register(&NetdevConfig::ethernet(MAC1)).unwrap(), 2);
        assert_eq!(n.register(&NetdevConfig::ethernet(MAC2)).unwrap(), 3);
        assert_eq!(n.by_index(3).unwrap().name(), "eth1");
        n.unregister("eth0").unwrap();
        // The lowest free number is reused, the ifindex is not.
        assert_eq!(n.register(&NetdevConfig::ethernet(MAC1)).unwrap(), 4);
        assert_eq!(n.by_index(4).unwrap().name(), "eth0");
        let names: Vec<_> = n.iter().map(|d| d.name().to_string()).collect();
        assert_eq!(names, ["eth1", "eth0"]);
    }

    #[test]
    fn name_errors() {
        let mut n = Netdevs::new();
        let mut cfg = NetdevConfig::ethernet(MAC1);
        cfg.name = "rdma0";
        n.register(&cfg).unwrap();
        assert_eq!(n.register(&cfg).unwrap_err().to_string(), "device \"rdma0\" already exists");
        for bad in ["", ".", "..", "a/b", "a b", "a:1", "abcdefghijklmnop", "e%d%d", "%s%d"] {
            cfg.name = bad;
            assert!(matches!(n.register(&cfg), Err(NetdevError::InvalidName(_))), "{bad:?}");
        }
        cfg.name = "abcdefghijklm%d";
        n.register(&cfg).unwrap();
        // 10 needs one byte more than IFNAMSIZ allows once 0..9 are taken.
        cfg.name = "abcdefghijklmn%d";
        for _ in 0..10 {
            n.register(&cfg).unwrap();
        }
        assert!(n.register(&cfg).is_err());
    }

    #[test]
    fn register_checks_mac_and_mtu() {
        let mut n = Netdevs::new();
        let mut cfg = NetdevConfig::ethernet(MacAddr([0x01, 0, 0x5e, 0, 0, 1]));
        assert_eq!(n.register(&cfg).unwrap_err().to_string(), "invalid MAC address 01:00:5e:00:00:01: not unicast");
        cfg.mac = MacAddr([0; 6]);
        assert!(n.register(&cfg).is_err());
        cfg.mac = MAC1;
        cfg.mtu = 9000;
        assert_eq!(n.register(&cfg).unwrap_err().to_string(), "mtu 9000 out of range for eth0 (68-1500)");
        assert!(n.is_empty());
    }

    #[test]
    fn up_down_events_in_linux_order() {
        let (mut n, log) = setup();
        assert_eq!(drain(&mut n, &log), ["eth0: NETDEV_REGISTER"]);
        n.add_ipv4("eth0", v4("10.0.0.1/24")).unwrap();
        n.set_up("eth0", true).unwrap();
        assert_eq!(
            drain(&mut n, &log),
            [
                "eth0: inetaddr NETDEV_UP 10.0.0.1/24",
                "eth0: NETDEV_UP",
                "eth0: inet6addr NETDEV_UP fe80::5054:ff:fe00:1/64"
            ]
        );
        n.set_up("eth0", true).unwrap();
        assert!(drain(&mut n, &log).is_empty(), "no event when nothing changes");
        n.set_up("eth0", false).unwrap();
        assert_eq!(drain(&mut n, &log), ["eth0: NETDEV_DOWN", "eth0: inet6addr NETDEV_DOWN fe80::5054:ff:fe00:1/64"]);
        // IPv4 survives the down.
        assert_eq!(n.get("eth0").unwrap().ipv4(), [v4("10.0.0.1/24")]);
        assert!(n.get("eth0").unwrap().ipv6().is_empty());
        n.set_up("eth0", true).unwrap();
        assert_eq!(drain(&mut n, &log), ["eth0: NETDEV_UP", "eth0: inet6addr NETDEV_UP fe80::5054:ff:fe00:1/64"]);
    }

    #[test]
    fn link_local_waits_for_carrier() {
        let mut n = Netdevs::new();
        let log: Rc<RefCell<Vec<String>>> = Rc::default();
        let l = log.clone();
        n.subscribe(Box::new(move |ev: &NetdevEvent| l.borrow_mut().push(ev.to_string())));
        let mut cfg = NetdevConfig::ethernet(MAC1);
        cfg.carrier = false;
        n.register(&cfg).unwrap();
        n.set_carrier("eth0", true).unwrap();
        n.set_carrier("eth0", false).unwrap();
        // Carrier changes of a down device are not announced.
        assert_eq!(drain(&mut n, &log), ["eth0: NETDEV_REGISTER"]);
        n.set_up("eth0", true).unwrap();
        assert_eq!(drain(&mut n, &log), ["eth0: NETDEV_UP"]);
        assert!(!n.get("eth0").unwrap().is_running());
        n.set_carrier("eth0", true).unwrap();
        assert_eq!(
            drain(&mut n, &log),
            ["eth0: NETDEV_CHANGE carrier on", "eth0: inet6addr NETDEV_UP fe80::5054:ff:fe00:1/64"]
        );
        // Losing carrier keeps the addresses; regaining it adds nothing twice.
        n.set_carrier("eth0", false).unwrap();
        n.set_carrier("eth0", true).unwrap();
        assert_eq!(drain(&mut n, &log), ["eth0: NETDEV_CHANGE carrier off", "eth0: NETDEV_CHANGE carrier on"]);
        assert_eq!(n.get("eth0").unwrap().ipv6().len(), 1);
    }

    #[test]
    fn static_ipv6_kept_on_down_unless_linux_default() {
        let (mut n, log) = setup();
        n.set_up("eth0", true).unwrap();
        n.add_ipv6("eth0", parse_ipv6_cidr("2001:db8::1/64").unwrap()).unwrap();
        drain(&mut n, &log);
        n.set_up("eth0", false).unwrap();
        assert_eq!(drain(&mut n, &log), ["eth0: NETDEV_DOWN", "eth0: inet6addr NETDEV_DOWN fe80::5054:ff:fe00:1/64"]);
        assert_eq!(n.get("eth0").unwrap().ipv6()[0].origin, Inet6Origin::Static);

        n.set_keep_addr_on_down(false);
        n.set_up("eth0", true).unwrap();
        n.set_up("eth0", false).unwrap();
        assert_eq!(
            drain(&mut n, &log),
            [
                "eth0: NETDEV_UP",
                "eth0: inet6addr NETDEV_UP fe80::5054:ff:fe00:1/64",
                "eth0: NETDEV_DOWN",
                "eth0: inet6addr NETDEV_DOWN 2001:db8::1/64",
                "eth0: inet6addr NETDEV_DOWN fe80::5054:ff:fe00:1/64",
            ]
        );
    }

    #[test]
    fn mtu_changes() {
        let (mut n, log) = setup();
        drain(&mut n, &log);
        assert_eq!(n.set_mtu("eth0", 1501).unwrap_err().to_string(), "mtu 1501 out of range for eth0 (68-1500)");
        assert!(n.set_mtu("eth0", 67).is_err());
        n.set_mtu("eth0", 1500).unwrap();
        n.set_mtu("eth0", 1280).unwrap();
        assert_eq!(drain(&mut n, &log), ["eth0: NETDEV_CHANGEMTU 1280 (was 1500)"]);
        assert_eq!(n.get("eth0").unwrap().mtu(), 1280);
        assert_eq!(n.set_mtu("eth9", 1500).unwrap_err().to_string(), "Cannot find device \"eth9\"");
    }

    #[test]
    fn mac_change_replaces_link_local() {
        let (mut n, log) = setup();
        n.set_up("eth0", true).unwrap();
        drain(&mut n, &log);
        n.set_mac("eth0", MAC2).unwrap();
        assert_eq!(
            drain(&mut n, &log),
            [
                "eth0: NETDEV_CHANGEADDR 52:54:00:00:00:02 (was 52:54:00:00:00:01)",
                "eth0: inet6addr NETDEV_DOWN fe80::5054:ff:fe00:1/64",
                "eth0: inet6addr NETDEV_UP fe80::5054:ff:fe00:2/64",
            ]
        );
        assert_eq!(n.get("eth0").unwrap().ipv6()[0].cidr, link_local_from_mac(MAC2));
        assert!(n.set_mac("eth0", MacAddr::BROADCAST).is_err());
        // While down there is no link-local to replace.
        n.set_up("eth0", false).unwrap();
        drain(&mut n, &log);
        n.set_mac("eth0", MAC1).unwrap();
        assert_eq!(drain(&mut n, &log), ["eth0: NETDEV_CHANGEADDR 52:54:00:00:00:01 (was 52:54:00:00:00:02)"]);
    }

    #[test]
    fn ipv4_add_del_and_errors() {
        let (mut n, log) = setup();
        drain(&mut n, &log);
        n.add_ipv4("eth0", v4("10.0.0.2/24")).unwrap();
        n.add_ipv4("eth0", v4("10.0.1.2/24")).unwrap();
        assert_eq!(
            n.add_ipv4("eth0", v4("10.0.0.2/16")).unwrap_err().to_string(),
            "address 10.0.0.2/24 already assigned to eth0"
        );
        assert_eq!(n.add_ipv4("eth9", v4("10.0.0.2/24")).unwrap_err().to_string(), "Cannot find device \"eth9\"");
        assert_eq!(
            n.add_ipv4("eth0", v4("224.0.0.1/4")).unwrap_err().to_string(),
            "224.0.0.1 is not a unicast address"
        );
        let a = Ipv4Addr::new(10, 0, 0, 2);
        assert_eq!(
            n.del_ipv4("eth0", a, Some(16)).unwrap_err().to_string(),
            "address 10.0.0.2/16 not assigned to eth0"
        );
        assert_eq!(n.del_ipv4("eth0", a, None).unwrap(), v4("10.0.0.2/24"));
        assert_eq!(n.del_ipv4("eth0", a, None).unwrap_err().to_string(), "address 10.0.0.2 not assigned to eth0");
        assert_eq!(n.get("eth0").unwrap().ipv4(), [v4("10.0.1.2/24")]);
        assert_eq!(
            drain(&mut n, &log),
            [
                "eth0: inetaddr NETDEV_UP 10.0.0.2/24",
                "eth0: inetaddr NETDEV_UP 10.0.1.2/24",
                "eth0: inetaddr NETDEV_DOWN 10.0.0.2/24"
            ]
        );
        assert_eq!(n.owner_of_ipv4(Ipv4Addr::new(10, 0, 1, 2)).unwrap().name(), "eth0");
        assert!(n.owner_of_ipv4(a).is_none());
    }

    #[test]
    fn addr_spec_dispatch_and_host_prefix() {
        let (mut n, _log) = setup();
        n.add_addr("eth0", parse_addr_spec("10.0.0.9").unwrap()).unwrap();
        assert_eq!(n.get("eth0").unwrap().ipv4(), [v4("10.0.0.9/32")]);
        n.add_addr("eth0", parse_addr_spec("2001:db8::9/64").unwrap()).unwrap();
        assert_eq!(
            n.add_addr("eth0", parse_addr_spec("2001:db8::9/48").unwrap()).unwrap_err().to_string(),
            "address 2001:db8::9/64 already assigned to eth0"
        );
        assert_eq!(n.del_addr("eth0", parse_addr_spec("2001:db8::9").unwrap()).unwrap().to_string(), "2001:db8::9/64");
        assert!(n.add_addr("eth0", parse_addr_spec("ff02::1/64").unwrap()).is_err());
    }

    #[test]
    fn unregister_removes_addresses_first() {
        let (mut n, log) = setup();
        n.add_ipv4("eth0", v4("10.0.0.1/24")).unwrap();
        n.add_ipv4("eth0", v4("10.0.1.1/24")).unwrap();
        n.set_up("eth0", true).unwrap();
        n.add_ipv6("eth0", parse_ipv6_cidr("2001:db8::1/64").unwrap()).unwrap();
        drain(&mut n, &log);
        n.unregister("eth0").unwrap();
        assert_eq!(
            drain(&mut n, &log),
            [
                "eth0: NETDEV_DOWN",
                "eth0: inet6addr NETDEV_DOWN fe80::5054:ff:fe00:1/64",
                "eth0: inetaddr NETDEV_DOWN 10.0.1.1/24",
                "eth0: inetaddr NETDEV_DOWN 10.0.0.1/24",
                "eth0: inet6addr NETDEV_DOWN 2001:db8::1/64",
                "eth0: NETDEV_UNREGISTER",
            ]
        );
        assert!(n.get("eth0").is_none());
        assert!(n.unregister("eth0").is_err());
    }

    #[test]
    fn snapshot_is_taken_at_the_change() {
        let mut n = Netdevs::new();
        let seen: Rc<RefCell<Vec<NetdevEvent>>> = Rc::default();
        let s = seen.clone();
        n.subscribe(Box::new(move |ev: &NetdevEvent| s.borrow_mut().push(ev.clone())));
        n.register(&NetdevConfig::ethernet(MAC1)).unwrap();
        n.add_ipv4("eth0", v4("10.0.0.1/24")).unwrap();
        n.set_mtu("eth0", 1400).unwrap();
        n.del_ipv4("eth0", Ipv4Addr::new(10, 0, 0, 1), None).unwrap();
        n.process_events();
        let seen = seen.borrow();
        assert_eq!(seen.iter().map(|e| e.seq).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(seen[0].dev.ipv4, []);
        assert_eq!(seen[1].dev.ipv4, [v4("10.0.0.1/24")]);
        assert_eq!(seen[1].dev.mtu, 1500);
        assert_eq!(seen[2].dev.mtu, 1400);
        assert_eq!(seen[3].dev.ipv4, []);
        assert_eq!(seen[3].dev.ifindex, 2);
    }

    #[test]
    fn late_subscriber_is_told_the_current_state() {
        let (mut n, log) = setup();
        n.add_ipv4("eth0", v4("10.0.0.1/24")).unwrap();
        n.set_up("eth0", true).unwrap();
        let late: Rc<RefCell<Vec<String>>> = Rc::default();
        let l = late.clone();
        n.subscribe(Box::new(move |ev: &NetdevEvent| l.borrow_mut().push(ev.to_string())));
        let replay = vec![
            "eth0: NETDEV_REGISTER",
            "eth0: NETDEV_UP",
            "eth0: inetaddr NETDEV_UP 10.0.0.1/24",
            "eth0: inet6addr NETDEV_UP fe80::5054:ff:fe00:1/64",
        ];
        assert_eq!(*late.borrow(), replay);
        // The events queued before it subscribed go only to the first subscriber.
        assert_eq!(drain(&mut n, &log).len(), 4);
        assert_eq!(late.borrow().len(), 4);
    }

    #[test]
    fn stats_are_per_device() {
        let (mut n, _log) = setup();
        n.stats_mut(2).unwrap().tx_packets += 1;
        assert_eq!(n.get("eth0").unwrap().stats().tx_packets, 1);
        assert!(n.stats_mut(9).is_none());
    }
}
