//! GID and GUID values: how RoCE derives them from MAC and IP addresses and how
//! the tools print them.
//!
//! Seed §4: the default GID is `fe80::/64` plus the EUI-64 of the MAC (`ff:fe`
//! inserted, universal/local bit flipped), as Linux `make_default_gid` builds it
//! with `addrconf_ifid_eui48`; an IPv4 address becomes the IPv4-mapped GID
//! `::ffff:a.b.c.d` and an IPv6 address is its own GID (`rdma_ip2gid`). The
//! node and system-image GUIDs of an rxe device are the same EUI-64
//! (`addrconf_addr_eui48` in `rxe_init_device_param`).

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use super::netdev::MacAddr;

/// The link-local prefix every default RoCE GID starts with.
pub const LINK_LOCAL_PREFIX: u64 = 0xfe80_0000_0000_0000;

/// A 128-bit Global Identifier, in network byte order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The reserved all-zero GID (IBA 4.1.1): never stored in a table.
    pub const ZERO: Gid = Gid([0; 16]);

    /// The default GID of a netdev: `fe80::/64` + EUI-64 of its MAC.
    pub fn default_for_mac(mac: MacAddr) -> Gid {
        let mut raw = [0u8; 16];
        raw[..8].copy_from_slice(&LINK_LOCAL_PREFIX.to_be_bytes());
        raw[8..].copy_from_slice(&eui64_from_mac(mac));
        Gid(raw)
    }

    /// The IPv4-mapped GID `::ffff:a.b.c.d` of an IPv4 address.
    pub fn from_ipv4(addr: Ipv4Addr) -> Gid {
        Gid(addr.to_ipv6_mapped().octets())
    }

    /// An IPv6 address used as a GID unchanged.
    pub fn from_ipv6(addr: Ipv6Addr) -> Gid {
        Gid(addr.octets())
    }

    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// The IPv4 address inside an IPv4-mapped GID.
    pub fn to_ipv4_mapped(&self) -> Option<Ipv4Addr> {
        self.as_ipv6().to_ipv4_mapped()
    }

    pub fn as_ipv6(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.0)
    }

    /// The upper 64 bits (subnet prefix), host order.
    pub fn subnet_prefix(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[..8]);
        u64::from_be_bytes(b)
    }

    /// The lower 64 bits (interface id), host order.
    pub fn interface_id(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[8..]);
        u64::from_be_bytes(b)
    }
}

/// The full form `fe80:0000:0000:0000:5054:00ff:fe00:0001`: eight groups of
/// four hex digits, what sysfs and `show_gids` print (the tools' one
/// spelling of it, [`verbs_ring::show::words::GidFull`]).
impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&verbs_ring::show::words::GidFull(&self.0), f)
    }
}

/// The GID types a RoCE port can hold (`enum ib_gid_type`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum GidType {
    /// `IB_GID_TYPE_IB`, a.k.a. RoCE v1 (Ethertype 0x8915). rxe never uses it.
    RoceV1,
    /// `IB_GID_TYPE_ROCE_UDP_ENCAP`: RoCE v2, UDP port 4791. The only rxe type.
    RoceV2,
}

impl GidType {
    /// The string sysfs `gid_attrs/types/N` shows.
    pub fn sysfs_name(&self) -> &'static str {
        match self {
            GidType::RoceV1 => "IB/RoCE v1",
            GidType::RoceV2 => "RoCE v2",
        }
    }
}

/// EUI-64 from a 48-bit MAC: `ff:fe` in the middle, universal/local bit
/// flipped (`addrconf_addr_eui48`).
pub fn eui64_from_mac(mac: MacAddr) -> [u8; 8] {
    let m = mac.0;
    [m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]
}

/// A 64-bit GUID (node GUID, system image GUID, port GUID).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Guid(pub u64);

impl Guid {
    /// The GUID rxe derives from its netdev's MAC.
    pub fn from_mac(mac: MacAddr) -> Guid {
        Guid(u64::from_be_bytes(eui64_from_mac(mac)))
    }
}

/// `5054:00ff:fe00:0001`: four groups of four hex digits, as `ibv_devinfo`
/// (`guid_str`) and `rdma dev show` print GUIDs.
impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.0;
        write!(f, "{:04x}:{:04x}:{:04x}:{:04x}", (g >> 48) & 0xffff, (g >> 32) & 0xffff, (g >> 16) & 0xffff, g & 0xffff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    const MAC: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x01]);

    #[test]
    fn default_gid_matches_linux_for_the_issue_mac() {
        let gid = Gid::default_for_mac(MAC);
        assert_eq!(gid.to_string(), "fe80:0000:0000:0000:5054:00ff:fe00:0001");
        assert_eq!(gid.as_ipv6().to_string(), "fe80::5054:ff:fe00:1");
        assert_eq!(gid.subnet_prefix(), LINK_LOCAL_PREFIX);
        assert_eq!(gid.interface_id(), 0x5054_00ff_fe00_0001);
    }

    #[test]
    fn eui64_flips_the_universal_local_bit() {
        // A locally administered MAC (bit set) gives a cleared bit, and back.
        assert_eq!(eui64_from_mac(MAC)[0], 0x50);
        assert_eq!(eui64_from_mac(MacAddr([0, 1, 2, 3, 4, 5]))[0], 0x02);
        assert_eq!(eui64_from_mac(MacAddr([0, 1, 2, 3, 4, 5])), [0x02, 1, 2, 0xff, 0xfe, 3, 4, 5]);
    }

    #[test]
    fn ipv4_mapped_gid_matches_linux() {
        let gid = Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(gid.to_string(), "0000:0000:0000:0000:0000:ffff:0a00:0001");
        assert_eq!(gid.as_ipv6().to_string(), "::ffff:10.0.0.1");
        assert_eq!(gid.to_ipv4_mapped(), Some(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(Gid::default_for_mac(MAC).to_ipv4_mapped(), None);
    }

    #[test]
    fn ipv6_gid_is_the_address() {
        let a: Ipv6Addr = "2001:db8::7".parse().unwrap();
        assert_eq!(Gid::from_ipv6(a).as_ipv6(), a);
        assert!(Gid::ZERO.is_zero());
        assert!(!Gid::from_ipv6(a).is_zero());
    }

    #[test]
    fn guid_from_mac_prints_like_ibv_devinfo() {
        assert_eq!(Guid::from_mac(MAC).to_string(), "5054:00ff:fe00:0001");
    }

    #[test]
    fn gid_type_names() {
        assert_eq!(GidType::RoceV2.sysfs_name(), "RoCE v2");
        assert_eq!(GidType::RoceV1.sysfs_name(), "IB/RoCE v1");
    }
}
