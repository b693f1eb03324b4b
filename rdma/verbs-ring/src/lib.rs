//! Verbs over a shared-memory ring: the versioned ABI between the
//! appliance firmware and host programs, and the pure logic on both sides.
//!
//! Host processes reach the firmware through one shared region (QEMU
//! `ivshmem-plain` BAR2 in the guest, a `MAP_SHARED` file in `/dev/shm` on
//! the host). Everything in it is `#[repr(C)]`, little-endian, plain
//! integers, with sizes asserted at compile time ([`wire`], [`abi`]):
//!
//! ```text
//! region offset
//! 0x0000  +----------------------------------+
//!         | Superblock            (page 0)   |  magic "VERBRING", ABI version,
//!         |                                  |  region size, fw_state
//!         |                                  |  (booting/ready/failed),
//!         |                                  |  heartbeat, layout, lease
//! 0x0100  | WakeBlock, FW_IDLE               |  doorbell kind, appliance's
//!         |                                  |  peer ID; "ring me" (1.7)
//! 0x1000  +----------------------------------+
//!         | ContextSlot[num_contexts] (64 B) |  state (claimed by CAS),
//!         |                                  |  generation, host heartbeat
//!         |                                  |  (the lease), pid, reason
//!         +----------------------------------+  ctx_area_off
//!         | context 0 area                   |
//!         |   command ring   host -> fw      |  RingHeader + N x slot
//!         |   response ring  fw -> host      |  RingHeader + N x slot
//!         |   queue area                     |  SQ/RQ/SRQ/CQ rings, placed
//!         |                                  |  by the firmware at CREATE_*
//!         |   buffer area                    |  MR memory, allocated by the
//!         |                                  |  host library
//!         +----------------------------------+  + ctx_area_stride
//!         | context 1 area ...               |
//!         +----------------------------------+  region_size
//!
//! every ring:  +0 producer index (u32) | +64 consumer index (u32) | +128 slots
//! ```
//!
//! Modules, in the order data flows:
//! - [`shm`]: the [`SharedMem`] trait each side implements
//!   (atomic `u32` acquire/release/CAS and bulk copies, all bounds-checked)
//!   and a heap fake for tests;
//! - [`abi`]: superblock, slots, ring header, [`Layout`], and
//!   the data-path descriptors (send/receive WQE, SGE, CQE);
//! - [`ring`]: the SPSC ring ([`Producer`](ring::Producer),
//!   [`Consumer`](ring::Consumer)) that detects a hostile peer's indices;
//! - [`cmd`]: command header, numbers, status codes, request and response
//!   structures; [`cm`]: the RDMA CM commands' structures (ucma's);
//!   [`table`]: the uverbs-style command table;
//! - [`dispatch`]: the [`Dispatcher`] and the
//!   [`VerbsProvider`] trait the rxe transport
//!   implements; per-context ownership, teardown order, ring placement;
//! - [`firmware`]: the firmware's poll step (heartbeat, slots, leases,
//!   command service); [`host`]: the host's attach, lease and call;
//! - [`wqe`]: encoding (host) and checked decoding (transport) of send and
//!   receive WQEs;
//! - [`area`]: the range allocator both sides use for their areas;
//! - [`wake`]: wake-ups without polling (the ivshmem doorbell both ways,
//!   with the "ring me" and CQ arm words that keep them rare).
//! - [`show`]: the tools' text (`ibv_devinfo`, `ibv_devices`, `show_gids`,
//!   `rdma link` / `rdma dev`) over the command types, one formatter each,
//!   for the firmware console and the host tools alike.
//!
//! Trust: the firmware trusts nothing in the region. It keeps the layout
//! and every ring's geometry and own index privately, copies each entry out
//! once before validating it, checks every handle against its owner, every
//! offset and length against the region and the area it must lie in, and
//! answers every command with a status; a peer that breaks the ring
//! protocol loses its context. Host processes are not protected from each
//! other (each maps the whole region); the firmware only keeps their
//! objects apart.
//!
//! No `unsafe` here: the platform's unsafe (mapping, volatile/atomic
//! access) stays in the `SharedMem` implementations.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod abi;
pub mod area;
pub mod cm;
pub mod cmd;
pub mod dispatch;
pub mod firmware;
pub mod host;
pub mod ring;
pub mod shm;
pub mod show;
pub mod superblock;
pub mod table;
pub mod wake;
pub mod wire;
pub mod wqe;

pub use abi::{Layout, LayoutParams};
pub use cmd::Status;
pub use dispatch::{Dispatcher, VerbsProvider};
pub use firmware::Firmware;
pub use host::HostContext;
pub use shm::SharedMem;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;
