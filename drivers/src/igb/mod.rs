//! Intel 82576 (QEMU's `igb`, PCI 8086:10c9): what the family's driver
//! ([`crate::intel`]) needs of this controller alone: its registers, its
//! advanced descriptor layouts, and its reset (the PHY's with it), link
//! setup, queue enables and MSI-X routing ([`I82576`]). [`Igb`] is the
//! driver on it.

pub mod desc;
pub mod driver;
#[cfg(test)]
pub(crate) mod fake;
pub mod regs;

pub use driver::{I82576, Igb, MAX_MTU};

/// The PCI IDs this driver takes.
pub const VENDOR_INTEL: u16 = 0x8086;
pub const DEVICE_82576: u16 = 0x10c9;
