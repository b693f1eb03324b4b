//! rdma_cm's address and route resolution for RoCE (Linux `rdma_resolve_ip`,
//! `cma_resolve_iboe_route`): which netdev and rxe device a destination IP is
//! reached through, the source address and its GID, the path MTU and hop limit.
//!
//! RoCE destinations are on-link: the netdev whose subnet holds the destination
//! (an IPv6 link-local one by its scope id, the interface index, as sockets do)
//! carries the traffic, and the next hop is the destination itself. The MAC is
//! resolved afterwards by the neighbour tables, without blocking.

use core::net::IpAddr;

use crate::core::gid::{Gid, GidType};
use crate::core::port::IbMtu;
use crate::core::{NetdevInfo, NetdevProvider, RdmaCore};
use vocab::IfIndex;

/// Linux's default IP hop limit (`ip_default_ttl`, IPv6's `hop_limit`), which
/// rdma_cm copies into the path for RoCE.
pub const DEFAULT_HOP_LIMIT: u8 = 64;

/// Where packets to a destination leave from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The rxe device.
    pub dev: u32,
    pub ifindex: IfIndex,
    /// The source address.
    pub src: IpAddr,
    pub sgid: Gid,
    pub sgid_index: u8,
    pub dst: IpAddr,
    pub dgid: Gid,
    /// The address whose MAC frames go to (the destination: RoCE is on-link).
    pub next_hop: IpAddr,
    pub mtu: IbMtu,
    pub hop_limit: u8,
}

/// Why no route was found (the ADDR_ERROR status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteError {
    /// No netdev's subnet holds the destination (`-ENETUNREACH`).
    NoRoute,
    /// The netdev has no rxe device, or the source address no GID (`-ENODEV`).
    NoDevice,
    /// The source address given is not ours (`-EADDRNOTAVAIL`).
    NotLocal,
}

impl RouteError {
    /// The negative errno Linux reports in the event's status.
    pub fn errno(self) -> i32 {
        match self {
            RouteError::NoRoute => -101,
            RouteError::NoDevice => -19,
            RouteError::NotLocal => -99,
        }
    }
}

/// The GID rdma_cm uses for an address: IPv4-mapped or the IPv6 address itself.
pub fn gid_of(addr: &IpAddr) -> Gid {
    match addr {
        IpAddr::V4(a) => Gid::from_ipv4(*a),
        IpAddr::V6(a) => Gid::from_ipv6(*a),
    }
}

/// The address a GID stands for.
pub fn addr_of(gid: &Gid) -> IpAddr {
    match gid.to_ipv4_mapped() {
        Some(a) => IpAddr::V4(a),
        None => IpAddr::V6(gid.as_ipv6()),
    }
}

fn is_link_local(addr: &IpAddr) -> bool {
    matches!(addr, IpAddr::V6(a) if a.segments()[0] & 0xFFC0 == 0xFE80)
}

/// The netdev a packet to `dst` leaves on, and the source address it takes.
fn egress(
    netdevs: &dyn NetdevProvider,
    dst: &IpAddr,
    scope_id: u32,
    src: Option<&IpAddr>,
) -> Result<(NetdevInfo, IpAddr), RouteError> {
    let mut found: Option<(NetdevInfo, IpAddr)> = None;
    let mut src_seen = false;
    netdevs.for_each_netdev(&mut |nd| {
        if found.is_some() || !nd.up {
            return;
        }
        let owns = |a: &IpAddr| match a {
            IpAddr::V4(a) => nd.ipv4.iter().any(|c| c.address() == *a),
            IpAddr::V6(a) => nd.ipv6.iter().any(|c| c.address() == *a),
        };
        if let Some(s) = src {
            if !owns(s) {
                return;
            }
            src_seen = true;
        }
        let pick = match dst {
            IpAddr::V4(d) => nd.ipv4.iter().find(|c| c.contains_addr(d)).map(|c| IpAddr::V4(c.address())),
            IpAddr::V6(d) if is_link_local(dst) => {
                if scope_id != 0 && scope_id != nd.ifindex {
                    None
                } else {
                    nd.ipv6.iter().find(|c| c.contains_addr(d)).map(|c| IpAddr::V6(c.address()))
                }
            }
            IpAddr::V6(d) => nd.ipv6.iter().find(|c| c.contains_addr(d)).map(|c| IpAddr::V6(c.address())),
        };
        if let Some(chosen) = pick {
            found = Some((nd.clone(), src.copied().unwrap_or(chosen)));
        }
    });
    match found {
        Some(f) => Ok(f),
        None if src.is_some() && !src_seen => Err(RouteError::NotLocal),
        None => Err(RouteError::NoRoute),
    }
}

/// Resolves the route to `dst` (`src` when the caller bound one; `scope_id`
/// picks the netdev of an IPv6 link-local destination, 0 for any).
pub fn resolve(
    core: &RdmaCore,
    netdevs: &dyn NetdevProvider,
    src: Option<&IpAddr>,
    dst: &IpAddr,
    scope_id: u32,
) -> Result<Route, RouteError> {
    let (nd, src) = egress(netdevs, dst, scope_id, src)?;
    let dev = core.devices().find(|d| d.netdev().ifindex == nd.ifindex).ok_or(RouteError::NoDevice)?;
    let sgid = gid_of(&src);
    let sgid_index = core
        .find_gid_by_port(dev.index(), 1, sgid, GidType::RoceV2, Some(nd.ifindex))
        .ok()
        .and_then(|i| u8::try_from(i).ok())
        .ok_or(RouteError::NoDevice)?;
    let mtu = core.query_port(dev.index(), 1).map(|a| a.active_mtu).map_err(|_| RouteError::NoDevice)?;
    Ok(Route {
        dev: dev.index(),
        ifindex: nd.ifindex,
        src,
        sgid,
        sgid_index,
        dst: *dst,
        dgid: gid_of(dst),
        next_hop: *dst,
        mtu,
        hop_limit: DEFAULT_HOP_LIMIT,
    })
}

/// The device and GID index that own local address `addr` (a bind or a listen
/// on a specific address), or `None` when no rxe device has it.
pub fn local(core: &RdmaCore, addr: &IpAddr) -> Option<(u32, u8)> {
    let loc = core.find_gid(gid_of(addr), GidType::RoceV2, None)?;
    Some((loc.device_index, u8::try_from(loc.index).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rxe::RxeDriver;
    use crate::rxe::device::Config;
    use crate::rxe::memory::FlatMemory;
    use alloc::vec;
    use alloc::vec::Vec;
    use core::net::{Ipv4Addr, Ipv6Addr};
    use vocab::{Ipv4Cidr, Ipv6Cidr};

    const ETH0_MAC: vocab::MacAddr = vocab::MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x01]);
    const LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x5054, 0x00ff, 0xfe00, 0x0001);

    /// rxe0 on eth0: 10.0.0.1/24, 2001:db8::1/64 and its link-local address.
    fn setup() -> (RdmaCore, Vec<NetdevInfo>) {
        let mut eth0 = NetdevInfo::new(2, "eth0", ETH0_MAC);
        eth0.ipv4.push(Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 1), 24));
        eth0.ipv6.push(Ipv6Cidr::new(LL, 64));
        eth0.ipv6.push(Ipv6Cidr::new("2001:db8::1".parse().unwrap(), 64));
        let net = vec![eth0];
        let mut core = RdmaCore::with_rxe(RxeDriver::factory(|| FlatMemory::new(0, 0), Config::default()));
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        core.process_events();
        (core, net)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_on_link_destination_leaves_from_its_subnets_address_and_gid() {
        let (core, net) = setup();
        let r = resolve(&core, &net, None, &ip("10.0.0.3"), 0).unwrap();
        assert_eq!((r.dev, r.ifindex, r.src, r.next_hop, r.hop_limit), (0, 2, ip("10.0.0.1"), ip("10.0.0.3"), 64));
        assert_eq!((r.sgid, r.dgid), (gid_of(&ip("10.0.0.1")), gid_of(&ip("10.0.0.3"))));
        // rxe's table: the link-local GID first, then the addresses' GIDs.
        assert_eq!(core.query_gid(0, 1, usize::from(r.sgid_index)).unwrap().map(|g| g.gid), Some(r.sgid));
        let v6 = resolve(&core, &net, None, &ip("2001:db8::3"), 0).unwrap();
        assert_eq!((v6.src, v6.dgid), (ip("2001:db8::1"), gid_of(&ip("2001:db8::3"))));
    }

    #[test]
    fn link_local_destinations_follow_their_scope() {
        let (core, net) = setup();
        let r = resolve(&core, &net, None, &ip("fe80::5054:ff:fe00:3"), 2).unwrap();
        assert_eq!((r.src, r.sgid_index), (IpAddr::V6(LL), 0));
        assert_eq!(resolve(&core, &net, None, &ip("fe80::5054:ff:fe00:3"), 7), Err(RouteError::NoRoute));
    }

    #[test]
    fn refusals_say_why() {
        let (core, net) = setup();
        assert_eq!(resolve(&core, &net, None, &ip("192.168.1.1"), 0), Err(RouteError::NoRoute));
        assert_eq!(resolve(&core, &net, Some(&ip("10.0.0.9")), &ip("10.0.0.3"), 0), Err(RouteError::NotLocal));
        assert_eq!(RouteError::NotLocal.errno(), -99);
        let bare = RdmaCore::with_rxe(RxeDriver::factory(|| FlatMemory::new(0, 0), Config::default()));
        assert_eq!(resolve(&bare, &net, None, &ip("10.0.0.3"), 0), Err(RouteError::NoDevice));
        assert_eq!(local(&core, &ip("10.0.0.1")).map(|(d, _)| d), Some(0));
        assert_eq!(local(&core, &ip("10.0.0.2")), None);
        assert_eq!(addr_of(&gid_of(&ip("10.0.0.1"))), ip("10.0.0.1"));
    }
}
