//! The host side of the appliance: an ibverbs-shaped, safe
//! library over the verbs ring in a shared-memory file, used by the CLI
//! tools in `src/bin/`.
//!
//! ```text
//! Context::open(ring)          attach: claim a context slot, keep its lease
//!  ├─ links / link_add / link_del / async_event / slots
//!  └─ device("rxe0") -> Device
//!      ├─ query_device / query_port / query_gid / gid_table / query_pkey
//!      ├─ counters / resources
//!      ├─ create_cq -> Cq            poll (reads CQEs from the ring)
//!      └─ alloc_pd -> Pd
//!          ├─ reg_mr -> MemoryRegion (memory in the shared region)
//!          ├─ alloc_mr -> FastRegMr  map (page list); WrOp::RegMr, LocalInv
//!          ├─ alloc_mw -> MemoryWindow bind (type 1); WrOp::BindMw (type 2B)
//!          ├─ create_ah -> Ah
//!          ├─ Srq::create            post_recv
//!          └─ Qp::create             modify, post_send, post_recv
//!
//! cm::EventChannel::new(&ctx)  RDMA CM (librdmacm's shape)
//!  └─ create_id -> CmId          resolve_addr/route, create_qp, connect,
//!                                listen, accept, reject, disconnect
//! ```
//!
//! Objects borrow their parents, so the compiler keeps children alive no
//! longer than parents, and each is destroyed on drop (RAII). Commands go
//! through the context's command ring and wait for the answer; the data
//! path (post and poll) touches only the queue rings the firmware placed,
//! with one release store as the doorbell (and, when the appliance has an
//! `ivshmem-doorbell` and asked to be rung, one eventfd write: [`wake`]).
//! Waiting for a completion sleeps on the appliance's completion event
//! where it can ([`Cq::wait`]), and polls with a back-off where it cannot.
//! Every failure is an [`Error`] with the errno a libibverbs call would give.
//!
//! A first look at an appliance (`make run` boots one whose ring is
//! `/dev/shm/roce-appliance-1`); `examples/rdma_write.rs` goes on to an RDMA
//! WRITE and READ between two:
//!
//! ```no_run
//! use verbs::Context;
//! # fn main() -> verbs::Result<()> {
//! let ctx = Context::open("/dev/shm/roce-appliance-1".as_ref())?;
//! for dev in ctx.devices()? {
//!     let port = dev.query_port(1)?;
//!     let gid = dev.query_gid(1, 1)?;
//!     println!("{}: port 1 state {} gid[1] {:02x?}", dev.name(), port.state, gid.gid);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! All platform `unsafe` lives in `shm-host` (the mapping); this crate has
//! none.
#![deny(unsafe_code)]

pub mod cli;
pub mod cm;
pub mod context;
pub mod device;
pub mod error;
pub mod fastreg;
pub mod mw;
pub mod names;
pub mod pd;
pub mod perf;
pub mod pingpong;
pub mod queue;
pub mod wake;

pub use context::{AsyncEvent, Context, DEFAULT_RING, Link, Options, RING_ENV, SlotInfo, backoff, resolve_ring};
pub use device::{Device, DeviceAttr, GidEntry, PortAttr, ResourceCounts};
pub use error::{Error, Result};
pub use fastreg::FastRegMr;
pub use mw::{MemoryWindow, MwType};
pub use pd::{AccessFlags, Ah, MemoryRegion, Pd};
pub use queue::{Cq, Qp, QpInitAttr, RtrAttr, SendFlags, SendWr, Srq, UdDest, WcStatus, WorkCompletion, WrOp};
pub use verbs_ring::abi::{Sge, wc_opcode};
pub use verbs_ring::cmd::{AhAttr, AltPath, QpAttr, QpCap, qp_attr_mask, qp_state, qp_type};
