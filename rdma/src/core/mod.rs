//! The RDMA core: the appliance's ib_core, re-created from the seed
//! (`shared/seed/README.md` §1–5) without Linux.
//!
//! Where a reader of the seed finds each flow:
//! - `rdma link add` → [`nldev`] (`nldev_newlink`) → [`link`] (`rxe_newlink`)
//!   → [`RdmaCore::register_device`] (`ib_register_device`, §1–2), with the
//!   device table and naming in [`registry`] and the driver boundary in
//!   [`device`] (`struct ib_device_ops`, mandatory and optional ops);
//! - clients (`ib_register_client`, §3) in [`client`], events and handlers
//!   (`ib_register_event_handler`, `ib_dispatch_event`) in [`event`];
//! - the GID cache (§4): values in [`gid`], the per-port table in
//!   [`gid_cache`], the netdev/inetaddr notifier handling in [`notifier`],
//!   all updates through the ordered queue in [`workqueue`];
//! - ports (`rxe_port_up/down`, `rxe_set_mtu`, pkeys) in [`port`], rxe's
//!   parameters in [`rxe_params`], hardware counters in [`counters`];
//! - the network-stack boundary the kernel implements in [`netdev`];
//! - console commands in [`console`] (printed by `verbs_ring::show`, the
//!   formatters the host tools share) and `rdma statistic` in [`show`].
//!
//! Pure logic: no kernel types, no `unsafe`, no panics on outside input.
//! The kernel owns one [`RdmaCore`], feeds it [`NetdevEvent`]s and calls
//! [`RdmaCore::process_events`] from its poll loop.

pub mod client;
pub mod console;
pub mod counters;
pub mod device;
pub mod error;
pub mod event;
pub mod gid;
pub mod gid_cache;
pub mod link;
pub mod netdev;
pub mod nldev;
pub mod notifier;
pub mod port;
pub mod rdma_core;
pub mod registry;
pub mod rxe_params;
pub mod show;
pub mod workqueue;

#[cfg(test)]
mod testutil;

pub use client::{Client, ClientData, ClientError, ClientId};
pub use counters::{Counters, RxeCounter};
pub use device::{AtomicCap, Device, DeviceAttr, Driver, DriverId, NodeType, Op, OpSet};
pub use error::Error;
pub use event::{EventHandler, HandlerId, IbEvent, IbEventType};
pub use gid::{Gid, GidType, Guid};
pub use gid_cache::{GidAttr, GidMask, GidTable, NetdevRef};
pub use link::{LinkOps, RxeLinkOps};
pub use netdev::{IfIndex, MacAddr, NetdevEvent, NetdevEventKind, NetdevInfo, NetdevProvider};
pub use nldev::{NldevAttrs, NldevCmd, NldevMsg};
pub use port::{IbMtu, PhysState, Port, PortAttr, PortImmutable, PortState};
pub use rdma_core::{CoreStats, GidLocation, RdmaCore};
