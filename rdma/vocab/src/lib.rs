//! The vocabulary every layer of the appliance speaks, defined once: the kernel's
//! base and network crates, the drivers, the RDMA core and transport, and the host
//! tools all name these types from here, so no layer converts one spelling of a
//! word into another.
//!
//! - [`time`]: [`Instant`] and [`Duration`], microseconds on a monotonic clock the
//!   caller owns (protocol code takes `now` as an argument).
//! - [`mac`]: [`MacAddr`], a 48-bit Ethernet address.
//! - [`cidr`]: an interface address with its prefix length ([`Ipv4Cidr`],
//!   [`Ipv6Cidr`], [`IpCidr`]) over `core::net` addresses.
//! - [`netdev`]: [`IfIndex`], a device snapshot ([`NetdevInfo`]) and the notifier
//!   event ([`NetdevEvent`], [`NetdevEventKind`]).
//! - [`drop`]: [`DropReason`], why the receive path dropped a frame, and
//!   [`DropCounters`].
//! - [`ROCE_V2_UDP_PORT`]: the port that tells steering and the RoCE codec a
//!   frame is theirs.
//!
//! Nothing here knows smoltcp or any hardware; the kernel converts to smoltcp's
//! own types only where it calls smoltcp.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod cidr;
pub mod drop;
pub mod mac;
pub mod netdev;
pub mod time;

pub use cidr::{IpCidr, Ipv4Cidr, Ipv6Cidr};
pub use drop::{DropCounters, DropReason};
pub use mac::MacAddr;
pub use netdev::{IfIndex, NetdevEvent, NetdevEventKind, NetdevInfo, VlanInfo};
pub use time::{Duration, Instant};

/// The IANA UDP destination port of RoCE v2 (IBA annex A17.2.1).
pub const ROCE_V2_UDP_PORT: u16 = 4791;
