//! The `ip=` kernel command-line parameter (`-append "ip=10.0.0.2/24"`), which
//! configures a device at boot.
//!
//! Linux's own `ip=` (nfsroot's `ip=client:server:gw:netmask:host:dev:autoconf`)
//! is built for DHCP and NFS root; ours takes the CIDR form iproute2 users type:
//! `ip=ADDR/PREFIX[,DEV]`, the device defaulting to `eth0`. `ip=off` and
//! `ip=none` mean "configure nothing", as in Linux.

use alloc::string::{String, ToString};
use core::fmt;

use vocab::Ipv4Cidr;

use crate::addr::{self, AddrError};
use crate::netdev::IfName;

/// The device `ip=` configures when it names none.
pub const DEFAULT_DEV: &str = "eth0";

/// A parsed `ip=` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpParam {
    pub cidr: Ipv4Cidr,
    pub dev: IfName,
}

/// Why an `ip=` value was refused; the text names the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IpParamError {
    Addr { value: String, error: AddrError },
    BadDevice { value: String, dev: String },
}

impl fmt::Display for IpParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpParamError::Addr { value, error } => write!(f, "ip={value}: {error}"),
            IpParamError::BadDevice { value, dev } => write!(f, "ip={value}: \"{dev}\" is not a valid device name"),
        }
    }
}

/// Parses the value of `ip=`; `Ok(None)` for `off`/`none`.
pub fn parse_ip_param(value: &str) -> Result<Option<IpParam>, IpParamError> {
    if value == "off" || value == "none" {
        return Ok(None);
    }
    let (addr_text, dev_text) = match value.split_once(',') {
        Some((a, d)) => (a, d),
        None => (value, DEFAULT_DEV),
    };
    let addr_err = |error| IpParamError::Addr { value: value.to_string(), error };
    let cidr = addr::parse_ipv4_cidr(addr_text).map_err(addr_err)?;
    addr::check_ipv4_unicast(cidr.address()).map_err(addr_err)?;
    let bad_dev = || IpParamError::BadDevice { value: value.to_string(), dev: dev_text.to_string() };
    if dev_text.is_empty() || dev_text.contains([',', '/', ':']) {
        return Err(bad_dev());
    }
    let dev = IfName::try_from(dev_text).map_err(|_| bad_dev())?;
    Ok(Some(IpParam { cidr, dev }))
}

/// Finds and parses `ip=` on a kernel command line (the last one wins, as in
/// Linux); `Ok(None)` when there is none or it says `off`.
pub fn from_cmdline(cmdline: &str) -> Result<Option<IpParam>, IpParamError> {
    match kbase::cmdline::get(cmdline, "ip") {
        Some(v) => parse_ip_param(v),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::parse_ipv4_cidr;
    use alloc::string::ToString;

    #[test]
    fn cidr_with_and_without_device() {
        let p = parse_ip_param("10.0.0.2/24").unwrap().unwrap();
        assert_eq!(
            p,
            IpParam { cidr: parse_ipv4_cidr("10.0.0.2/24").unwrap(), dev: IfName::try_from("eth0").unwrap() }
        );
        let p = parse_ip_param("10.0.0.2/24,eth1").unwrap().unwrap();
        assert_eq!(p.dev.as_str(), "eth1");
        assert_eq!(parse_ip_param("off"), Ok(None));
        assert_eq!(parse_ip_param("none"), Ok(None));
    }

    #[test]
    fn errors_name_the_value() {
        let e = |v: &str| parse_ip_param(v).unwrap_err().to_string();
        assert_eq!(e("10.0.0.300/24"), "ip=10.0.0.300/24: invalid address \"10.0.0.300/24\"");
        assert_eq!(e("10.0.0.2/33"), "ip=10.0.0.2/33: prefix length 33 out of range (0-32)");
        assert_eq!(e("10.0.0.2"), "ip=10.0.0.2: missing prefix length in \"10.0.0.2\" (e.g. 10.0.0.2/24)");
        assert_eq!(e("224.0.0.1/4"), "ip=224.0.0.1/4: 224.0.0.1 is not a unicast address");
        assert_eq!(e("10.0.0.2/24,"), "ip=10.0.0.2/24,: \"\" is not a valid device name");
        assert_eq!(e("10.0.0.2/24,eth0,x"), "ip=10.0.0.2/24,eth0,x: \"eth0,x\" is not a valid device name");
        assert!(parse_ip_param("10.0.0.2/24,abcdefghijklmnop").is_err());
        assert!(parse_ip_param("").is_err());
        assert!(parse_ip_param("dhcp").is_err());
    }

    #[test]
    fn found_on_the_command_line() {
        assert_eq!(from_cmdline("quiet"), Ok(None));
        let p = from_cmdline("console=ttyS0 ip=10.0.0.1/24 ip=10.0.0.2/16,eth1 quiet").unwrap().unwrap();
        assert_eq!(p.cidr.to_string(), "10.0.0.2/16");
        assert_eq!(p.dev.as_str(), "eth1");
        assert!(from_cmdline("ip=bogus").is_err());
    }
}
