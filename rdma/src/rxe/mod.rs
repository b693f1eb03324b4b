//! The rxe (Soft-RoCE) device: what `rdma link add NAME type rxe netdev DEV`
//! creates. [`RxeDriver`] answers the core's queries with Linux rxe's attributes;
//! [`transport::RxeTransport`] is the RoCE v2 transport (IBA vol. 1 ch. 9-11, Linux
//! `drivers/infiniband/sw/rxe`):
//!
//! - objects: [`pool`] (unforgeable handles), [`pd`], [`mr`], [`mw`], [`cq`], [`srq`], [`ah`],
//!   [`qp`], with memory behind [`memory::Memory`];
//! - the QP state machine and modify-QP table: [`qp_state`]; path migration: [`apm`];
//! - the engines: [`requester`], [`responder`], [`completer`], sharing [`device`] and
//!   sending through [`tx`] into the caller's [`sink::FrameSink`], payloads from
//!   memory by [`gather`] (zero-copy, or copied with the ICRC as they move);
//! - work requests and completions: [`wr`], [`queue`], [`sgl`], [`wc`], [`event`];
//! - counters: [`stats`]; time: [`time`]; a lossy simulated wire for tests: [`sim`].

mod driver;

pub mod ah;
pub mod apm;
pub mod completer;
pub mod cq;
pub mod device;
pub mod event;
pub mod gather;
pub mod keys;
pub mod mad_port;
pub mod mcast;
pub mod mem_ops;
pub mod memory;
pub mod mr;
pub mod mw;
pub mod pd;
pub mod pool;
pub mod qp;
pub mod qp_state;
pub mod queue;
pub mod requester;
pub mod responder;
pub mod sched;
pub mod sgl;
pub mod sim;
pub mod sink;
pub mod srq;
pub mod stats;
pub mod time;
pub mod transport;
pub mod tx;
pub mod wc;
pub mod wr;

pub use driver::RxeDriver;
