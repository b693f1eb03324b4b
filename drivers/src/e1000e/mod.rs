//! Intel 82574L (QEMU's `e1000e`, PCI 8086:10d3): the register map, the
//! legacy descriptor rings, and the driver. The BAR window
//! and the register trait are the family's ([`crate::intel`]).

pub mod desc;
pub mod driver;
pub mod regs;

pub use driver::{DEFAULT_MTU, E1000e, Error, IrqMode, MAX_MTU, RxFrame, Stats};

/// The PCI IDs this driver takes.
pub const VENDOR_INTEL: u16 = 0x8086;
pub const DEVICE_82574L: u16 = 0x10d3;
