//! What the two Intel NIC drivers share: the 82574L ([`crate::e1000e`],
//! legacy descriptors) and the 82576 ([`crate::igb`], advanced
//! descriptors) are one family, 32-bit registers at byte offsets into a
//! memory BAR, most of them at the same offsets with the same bits.
//!
//! Here is the whole driver but what differs ([`Driver`], over a
//! [`Controller`]): the register window and the registers both controllers
//! have ([`regs`], [`mmio`]), the descriptor rings over either
//! controller's formats ([`desc`], [`rx`], [`tx`]), the steps of bring-up
//! both take ([`init`]), the interrupt modes ([`irq`]), the transmit
//! watchdog ([`watchdog`]) and the statistics ([`stats`]); for host tests,
//! the fake device both controllers' fakes build on (`fake`) and the tests
//! that run the driver on each (`tests`). Each controller's module keeps
//! only what is its own: its registers, its descriptor layouts, its reset,
//! bring-up and interrupt routing, and its fake's differences.

pub mod controller;
pub mod desc;
pub mod driver;
#[cfg(test)]
pub(crate) mod fake;
pub mod init;
pub mod irq;
pub mod mmio;
pub mod regs;
mod ring;
pub mod rx;
pub mod stats;
#[cfg(test)]
mod tests;
pub mod tx;
pub mod watchdog;

pub use controller::Controller;
pub use driver::{DEFAULT_MTU, Driver, Error, RxFrame};
pub use irq::IrqMode;
pub use mmio::Mmio;
pub use regs::Regs;
