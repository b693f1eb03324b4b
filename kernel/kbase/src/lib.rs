//! The kernel's pure building blocks: logic with no hardware in it, so `cargo test`
//! checks it on the host. The kernel supplies the port I/O, memory and clock.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod acpi;
pub mod cmdline;
pub mod frames;
pub mod line;
pub mod msi;
pub mod pci;
pub mod timer;
