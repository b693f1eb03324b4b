//! Address text and derivation: parsing `10.0.0.2/24` and `fe80::1/64` the way
//! iproute2 reads them, and the EUI-64 link-local address Linux's addrconf derives
//! from a MAC (RFC 4291 appendix A, `addrconf_addr_gen` with the EUI-64 mode).
//!
//! Errors keep the text the user typed, so the console can say exactly what was
//! wrong with it.

use alloc::string::{String, ToString};
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vocab::{Ipv4Cidr, Ipv6Cidr, MacAddr};

/// Why an address string was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrError {
    /// The address part is not an address of the expected family.
    Invalid(String),
    /// The text after `/` is not a number.
    InvalidPrefix(String),
    /// The prefix length is larger than the family allows.
    PrefixOutOfRange { prefix: u64, max: u8 },
    /// A prefix length was required (`ip=`), but none was given.
    MissingPrefix(String),
    /// Multicast, broadcast or unspecified: never an interface address.
    NotUnicast(IpAddr),
}

impl fmt::Display for AddrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddrError::Invalid(s) => write!(f, "invalid address \"{s}\""),
            AddrError::InvalidPrefix(s) => write!(f, "invalid prefix length \"{s}\""),
            AddrError::PrefixOutOfRange { prefix, max } => {
                write!(f, "prefix length {prefix} out of range (0-{max})")
            }
            AddrError::MissingPrefix(s) => write!(f, "missing prefix length in \"{s}\" (e.g. {s}/24)"),
            AddrError::NotUnicast(a) => write!(f, "{a} is not a unicast address"),
        }
    }
}

/// An address as typed, with the prefix length if one was given. `ip addr add`
/// defaults a missing prefix to a host route (/32, /128); `ip addr del` treats it
/// as "any prefix" (iproute2's wildcard deletion).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrSpec {
    pub addr: IpAddr,
    pub prefix: Option<u8>,
}

impl AddrSpec {
    /// The prefix, or the full-length host prefix when none was typed.
    pub fn prefix_or_host(&self) -> u8 {
        match (self.prefix, self.addr) {
            (Some(p), _) => p,
            (None, IpAddr::V4(_)) => 32,
            (None, IpAddr::V6(_)) => 128,
        }
    }
}

impl fmt::Display for AddrSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix {
            Some(p) => write!(f, "{}/{p}", self.addr),
            None => write!(f, "{}", self.addr),
        }
    }
}

/// Parses `ADDR` or `ADDR/PREFIX`, either family, with the prefix checked
/// against the family's maximum.
pub fn parse_addr_spec(s: &str) -> Result<AddrSpec, AddrError> {
    let (a, p) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    let addr: IpAddr = a.parse().map_err(|_| AddrError::Invalid(s.to_string()))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match p {
        Some(p) => Some(parse_prefix(p, max)?),
        None => None,
    };
    Ok(AddrSpec { addr, prefix })
}

/// Parses `10.0.0.2/24`; the prefix is required.
pub fn parse_ipv4_cidr(s: &str) -> Result<Ipv4Cidr, AddrError> {
    let spec = parse_addr_spec(s)?;
    match (spec.addr, spec.prefix) {
        (IpAddr::V4(a), Some(p)) => Ok(Ipv4Cidr::new(a, p)),
        (IpAddr::V4(_), None) => Err(AddrError::MissingPrefix(s.to_string())),
        (IpAddr::V6(_), _) => Err(AddrError::Invalid(s.to_string())),
    }
}

/// Parses `fe80::1/64`; the prefix is required.
pub fn parse_ipv6_cidr(s: &str) -> Result<Ipv6Cidr, AddrError> {
    let spec = parse_addr_spec(s)?;
    match (spec.addr, spec.prefix) {
        (IpAddr::V6(a), Some(p)) => Ok(Ipv6Cidr::new(a, p)),
        (IpAddr::V6(_), None) => Err(AddrError::MissingPrefix(s.to_string())),
        (IpAddr::V4(_), _) => Err(AddrError::Invalid(s.to_string())),
    }
}

/// A prefix length: decimal digits only (no sign, no hex), at most `max`.
fn parse_prefix(p: &str, max: u8) -> Result<u8, AddrError> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddrError::InvalidPrefix(p.to_string()));
    }
    // Saturating so that "99999999999999999999" reports "out of range", not "invalid".
    let value = p.bytes().fold(0u64, |acc, b| acc.saturating_mul(10).saturating_add(u64::from(b - b'0')));
    match u8::try_from(value) {
        Ok(v) if v <= max => Ok(v),
        _ => Err(AddrError::PrefixOutOfRange { prefix: value, max }),
    }
}

/// Whether an IPv4 address may be assigned to an interface. Linux accepts more
/// (it will assign 224.0.0.1), but such an address would turn into a RoCE GID
/// nobody can reach, so we refuse it up front.
pub fn check_ipv4_unicast(a: Ipv4Addr) -> Result<(), AddrError> {
    if a.is_unspecified() || a.is_multicast() || a.is_broadcast() {
        return Err(AddrError::NotUnicast(IpAddr::V4(a)));
    }
    Ok(())
}

/// The address family `-4`, `-6` or `-f inet|inet6` restricts a listing to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpFamily {
    V4,
    V6,
}

impl IpFamily {
    /// Whether a listing restricted to `filter` shows this family.
    pub fn shown_by(self, filter: Option<IpFamily>) -> bool {
        filter.is_none_or(|f| f == self)
    }
}

/// Whether an IPv6 address may be assigned to an interface (Linux refuses
/// multicast in `inet6_addr_add` too).
pub fn check_ipv6_unicast(a: Ipv6Addr) -> Result<(), AddrError> {
    if a.is_unspecified() || a.is_multicast() {
        return Err(AddrError::NotUnicast(IpAddr::V6(a)));
    }
    Ok(())
}

/// The modified EUI-64 interface identifier of a MAC: `ff:fe` in the middle and
/// the universal/local bit flipped (RFC 4291 appendix A).
pub fn eui64(mac: MacAddr) -> [u8; 8] {
    let m = mac.0;
    [m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]
}

/// The link-local address addrconf gives an Ethernet device: `fe80::/64` plus the
/// EUI-64 of its MAC, e.g. 52:54:00:00:00:01 -> `fe80::5054:ff:fe00:1/64`.
pub fn link_local_from_mac(mac: MacAddr) -> Ipv6Cidr {
    let mut b = [0u8; 16];
    b[0] = 0xfe;
    b[1] = 0x80;
    b[8..].copy_from_slice(&eui64(mac));
    Ipv6Cidr::new(Ipv6Addr::from(b), 64)
}

/// Whether an IPv6 address is in `fe80::/10`.
pub fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn ipv4_cidr_parses_and_round_trips() {
        let c = parse_ipv4_cidr("10.0.0.2/24").unwrap();
        assert_eq!(c.address(), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(c.prefix_len(), 24);
        assert_eq!(c.to_string(), "10.0.0.2/24");
        assert_eq!(parse_ipv4_cidr("0.0.0.0/0").unwrap().prefix_len(), 0);
    }

    #[test]
    fn ipv4_errors_name_the_bad_part() {
        assert_eq!(parse_ipv4_cidr("10.0.0.300/24").unwrap_err().to_string(), "invalid address \"10.0.0.300/24\"");
        assert_eq!(parse_ipv4_cidr("10.0.0.2/33").unwrap_err().to_string(), "prefix length 33 out of range (0-32)");
        assert_eq!(parse_ipv4_cidr("10.0.0.2/x").unwrap_err().to_string(), "invalid prefix length \"x\"");
        assert_eq!(parse_ipv4_cidr("10.0.0.2/").unwrap_err(), AddrError::InvalidPrefix("".into()));
        assert_eq!(parse_ipv4_cidr("10.0.0.2/+8").unwrap_err(), AddrError::InvalidPrefix("+8".into()));
        assert_eq!(
            parse_ipv4_cidr("10.0.0.2/99999999999999999999999").unwrap_err(),
            AddrError::PrefixOutOfRange { prefix: u64::MAX, max: 32 }
        );
        assert!(matches!(parse_ipv4_cidr("10.0.0.2"), Err(AddrError::MissingPrefix(_))));
        assert!(matches!(parse_ipv4_cidr("fe80::1/64"), Err(AddrError::Invalid(_))));
        // Leading zeros are refused, as inet_pton refuses them (no octal surprises).
        assert!(parse_ipv4_cidr("010.0.0.2/24").is_err());
        assert!(parse_ipv4_cidr("").is_err());
        assert!(parse_ipv4_cidr("/").is_err());
        assert!(parse_ipv4_cidr("10.0.0.2/24/1").is_err());
    }

    #[test]
    fn ipv6_cidr_parses() {
        let c = parse_ipv6_cidr("fe80::1/64").unwrap();
        assert_eq!(c.address(), Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));
        assert_eq!(c.prefix_len(), 64);
        assert_eq!(
            parse_ipv6_cidr("2001:db8::1/129").unwrap_err().to_string(),
            "prefix length 129 out of range (0-128)"
        );
        assert!(matches!(parse_ipv6_cidr("10.0.0.1/8"), Err(AddrError::Invalid(_))));
    }

    #[test]
    fn addr_spec_keeps_missing_prefix() {
        let s = parse_addr_spec("10.0.0.2").unwrap();
        assert_eq!(s.prefix, None);
        assert_eq!(s.prefix_or_host(), 32);
        assert_eq!(s.to_string(), "10.0.0.2");
        let s = parse_addr_spec("2001:db8::2").unwrap();
        assert_eq!(s.prefix_or_host(), 128);
        assert_eq!(parse_addr_spec("2001:db8::2/64").unwrap().to_string(), "2001:db8::2/64");
    }

    #[test]
    fn unicast_checks() {
        assert!(check_ipv4_unicast(Ipv4Addr::new(10, 0, 0, 1)).is_ok());
        for bad in [Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST, Ipv4Addr::new(224, 0, 0, 1)] {
            assert!(check_ipv4_unicast(bad).is_err());
        }
        assert_eq!(
            check_ipv4_unicast(Ipv4Addr::new(224, 0, 0, 1)).unwrap_err().to_string(),
            "224.0.0.1 is not a unicast address"
        );
        assert!(check_ipv6_unicast("ff02::1".parse().unwrap()).is_err());
        assert!(check_ipv6_unicast(Ipv6Addr::UNSPECIFIED).is_err());
        assert!(check_ipv6_unicast("2001:db8::1".parse().unwrap()).is_ok());
    }

    #[test]
    fn link_local_is_eui64_of_the_mac() {
        let mac = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x01]);
        assert_eq!(link_local_from_mac(mac).to_string(), "fe80::5054:ff:fe00:1/64");
        // The universal/local bit flips both ways.
        let mac = MacAddr([0x02, 0x00, 0x00, 0xab, 0xcd, 0xef]);
        assert_eq!(link_local_from_mac(mac).address().to_string(), "fe80::ff:feab:cdef");
        assert!(is_link_local(link_local_from_mac(mac).address()));
        assert!(!is_link_local("2001:db8::1".parse().unwrap()));
        assert!(is_link_local("febf::1".parse().unwrap()));
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_fails_cleanly(s in "[0-9a-f:./%+-]{0,48}") {
            if let Ok(spec) = parse_addr_spec(&s) {
                // What parses prints back to something that parses the same.
                proptest::prop_assert_eq!(parse_addr_spec(&spec.to_string()), Ok(spec));
            }
            let _ = parse_ipv4_cidr(&s);
            let _ = parse_ipv6_cidr(&s);
        }
    }
}
