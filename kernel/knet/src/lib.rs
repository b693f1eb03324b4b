//! The kernel's pure networking logic: everything about networking that needs no
//! hardware, so `cargo test` checks it on the host. The kernel owns the NIC, the
//! clock and smoltcp; it feeds frames, time and console words in here and acts on
//! what comes back.
//!
//! - [`netdev`]: the netdev registry (`eth0`, ifindex, MAC, MTU, up/down, carrier,
//!   IPv4 and IPv6 addresses), mirroring Linux's `struct net_device` bookkeeping.
//! - [`events`]: the notifier chain and its single ordered work queue.
//! - [`steer`]: which path a received frame takes (RDMA, ARP, smoltcp, drop) and
//!   the per-device counters.
//! - [`neigh`]: the non-blocking neighbour caches the RDMA path resolves next
//!   hops with, over [`arp`] (IPv4) and [`ndisc`] (IPv6 neighbour discovery).
//! - [`mcast_report`]: the IGMPv2 and MLDv2 reports for the multicast groups
//!   the RDMA devices' UD QPs join and leave.
//! - [`format`]: iproute2- and ping-shaped console output.
//! - [`cmd`]: the console's `ip` and `ping` argument parsers.
//! - [`bootparam`]: the `ip=` kernel command-line parameter.
//!
//! The shared words (time, [`vocab::MacAddr`], interface index, netdev events)
//! come from `vocab`; IP prefixes are still smoltcp's `Ipv4Cidr`/`Ipv6Cidr`.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod addr;
pub mod arp;
pub mod bootparam;
pub mod cmd;
pub mod events;
pub mod format;
pub mod mcast_report;
pub mod ndisc;
pub mod neigh;
pub mod netdev;
pub mod steer;

pub use vocab::{IpCidr, Ipv4Cidr, Ipv6Cidr};
