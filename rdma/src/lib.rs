//! The appliance's RDMA logic: the RoCE v2 wire codec (`wire`) and the RDMA core
//! (`core`: device and client registries, GID cache, link ops). Pure logic that
//! `cargo test` runs on the host; the kernel feeds it frames, events and time.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod core;
pub mod rxe;
pub mod uverbs;
pub mod wire;
