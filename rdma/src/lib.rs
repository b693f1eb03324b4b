//! The appliance's RDMA logic, pure and host-tested; the kernel feeds it frames,
//! netdev events, memory and time, and it never calls back into the kernel.
//!
//! - [`wire`]: the RoCE v2 codec (one file per header, the opcode table, ICRC,
//!   whole frames: `frame::parse` is the one validator of a received frame);
//! - [`core`]: the RDMA core (device and client registries, GID cache, ports,
//!   counters, link ops, nldev), Linux's ib_core;
//! - [`rxe`]: the rxe driver ([`rxe::RxeDriver`], one per device, owning its
//!   transport) and the RC/UC/UD transport itself;
//! - [`mad`]: the MAD layer of QP1 (class dispatch, unmatched MADs answered or
//!   dropped as Linux does);
//! - [`cm`]: the IB connection manager, pure (message codecs are in [`wire::cm`]);
//! - [`uverbs`]: the verbs ring's provider over the core and the transports,
//!   and the ring server's client of the core.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod cm;
pub mod core;
pub mod mad;
pub mod rxe;
pub mod uverbs;
pub mod wire;
