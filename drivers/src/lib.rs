//! Thin drivers for the appliance's devices. Each one is a small piece of port or
//! MMIO access behind a trait, so the logic above can be tested with fakes.
#![no_std]

extern crate alloc;

pub mod csum;
pub mod dma;
pub mod e1000e;
#[cfg(test)]
mod fake;
pub mod igb;
pub mod intel;
pub mod ivshmem;
pub mod nic;
pub mod serial;
pub mod virtio_net;
pub mod virtqueue;
