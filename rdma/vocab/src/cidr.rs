//! An interface address with its prefix length (`10.0.0.2/24`, `fe80::1/64`):
//! `core::net` addresses plus the length, so no layer needs smoltcp to name one.
//! The kernel converts to smoltcp's cidr types where it configures smoltcp.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An IPv4 address and prefix length (at most 32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ipv4Cidr {
    address: Ipv4Addr,
    prefix_len: u8,
}

/// An IPv6 address and prefix length (at most 128).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ipv6Cidr {
    address: Ipv6Addr,
    prefix_len: u8,
}

/// Either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpCidr {
    Ipv4(Ipv4Cidr),
    Ipv6(Ipv6Cidr),
}

impl Ipv4Cidr {
    /// A prefix longer than 32 is clamped to 32, so the value is always valid.
    pub const fn new(address: Ipv4Addr, prefix_len: u8) -> Ipv4Cidr {
        Ipv4Cidr { address, prefix_len: if prefix_len > 32 { 32 } else { prefix_len } }
    }

    pub const fn address(&self) -> Ipv4Addr {
        self.address
    }

    pub const fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Whether `addr` is in this prefix (the on-link test).
    pub fn contains_addr(&self, addr: &Ipv4Addr) -> bool {
        let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix_len)).unwrap_or(0);
        u32::from(self.address) & mask == u32::from(*addr) & mask
    }
}

impl Ipv6Cidr {
    /// A prefix longer than 128 is clamped to 128, so the value is always valid.
    pub const fn new(address: Ipv6Addr, prefix_len: u8) -> Ipv6Cidr {
        Ipv6Cidr { address, prefix_len: if prefix_len > 128 { 128 } else { prefix_len } }
    }

    pub const fn address(&self) -> Ipv6Addr {
        self.address
    }

    pub const fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Whether `addr` is in this prefix.
    pub fn contains_addr(&self, addr: &Ipv6Addr) -> bool {
        let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix_len)).unwrap_or(0);
        u128::from(self.address) & mask == u128::from(*addr) & mask
    }
}

impl IpCidr {
    pub const fn address(&self) -> IpAddr {
        match self {
            IpCidr::Ipv4(c) => IpAddr::V4(c.address),
            IpCidr::Ipv6(c) => IpAddr::V6(c.address),
        }
    }

    pub const fn prefix_len(&self) -> u8 {
        match self {
            IpCidr::Ipv4(c) => c.prefix_len,
            IpCidr::Ipv6(c) => c.prefix_len,
        }
    }
}

impl From<Ipv4Cidr> for IpCidr {
    fn from(c: Ipv4Cidr) -> IpCidr {
        IpCidr::Ipv4(c)
    }
}

impl From<Ipv6Cidr> for IpCidr {
    fn from(c: Ipv6Cidr) -> IpCidr {
        IpCidr::Ipv6(c)
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix_len)
    }
}

impl fmt::Display for Ipv6Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix_len)
    }
}

impl fmt::Display for IpCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpCidr::Ipv4(c) => c.fmt(f),
            IpCidr::Ipv6(c) => c.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn prints_as_iproute2_does() {
        assert_eq!(Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 2), 24).to_string(), "10.0.0.2/24");
        let ll = Ipv6Cidr::new(Ipv6Addr::new(0xfe80, 0, 0, 0, 0x5054, 0xff, 0xfe00, 1), 64);
        assert_eq!(IpCidr::from(ll).to_string(), "fe80::5054:ff:fe00:1/64");
    }

    #[test]
    fn contains_respects_the_prefix() {
        let c = Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 2), 24);
        assert!(c.contains_addr(&Ipv4Addr::new(10, 0, 0, 200)));
        assert!(!c.contains_addr(&Ipv4Addr::new(10, 0, 1, 1)));
        assert!(Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 2), 0).contains_addr(&Ipv4Addr::new(1, 2, 3, 4)));
        assert!(!Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 2), 32).contains_addr(&Ipv4Addr::new(10, 0, 0, 3)));
        let v6 = Ipv6Cidr::new(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1), 64);
        assert!(v6.contains_addr(&Ipv6Addr::new(0xfe80, 0, 0, 0, 9, 9, 9, 9)));
        assert!(!v6.contains_addr(&Ipv6Addr::new(0xfe81, 0, 0, 0, 0, 0, 0, 1)));
        assert_eq!(Ipv6Cidr::new(Ipv6Addr::UNSPECIFIED, 200).prefix_len(), 128);
    }
}
