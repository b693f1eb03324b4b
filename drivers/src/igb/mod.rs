//! Intel 82576 (QEMU's `igb`, PCI 8086:10c9): the register map, the
//! advanced descriptor rings, and the driver. The BAR
//! window and the register trait are the family's ([`crate::intel::Mmio`],
//! [`crate::intel::Regs`]): the same 32-bit accesses, another map.

pub mod desc;
pub mod driver;
#[cfg(test)]
mod fake;
pub mod regs;

pub use driver::{DEFAULT_MTU, Error, Igb, IrqMode, MAX_MTU, RxFrame, Stats};

/// The PCI IDs this driver takes.
pub const VENDOR_INTEL: u16 = 0x8086;
pub const DEVICE_82576: u16 = 0x10c9;
