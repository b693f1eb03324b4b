//! Intel 82574L (QEMU's `e1000e`, PCI 8086:10d3): what the family's driver
//! ([`crate::intel`]) needs of this controller alone: its registers, its
//! legacy descriptor layouts, and its reset, bring-up and interrupt
//! routing ([`I82574`]). [`E1000e`] is the driver on it.

pub mod desc;
pub mod driver;
#[cfg(test)]
pub(crate) mod fake;
pub mod regs;

pub use driver::{E1000e, I82574, MAX_MTU};

/// The PCI IDs this driver takes.
pub const VENDOR_INTEL: u16 = 0x8086;
pub const DEVICE_82574L: u16 = 0x10d3;
