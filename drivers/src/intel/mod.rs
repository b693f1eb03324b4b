//! What the two Intel NIC drivers share: the 82574L ([`crate::e1000e`],
//! legacy descriptors) and the 82576 ([`crate::igb`], advanced
//! descriptors) are one family, 32-bit registers at byte offsets into a
//! memory BAR, most of them at the same offsets with the same bits.
//!
//! This module holds the register window and the registers both
//! controllers have ([`regs`], [`mmio`]), the descriptor rings over either
//! controller's formats ([`desc`], [`rx`], [`tx`]) and the statistics
//! accumulator ([`stats`]). Each controller's module keeps only what is
//! its own.

pub mod desc;
pub mod mmio;
pub mod regs;
mod ring;
pub mod rx;
pub mod stats;
pub mod tx;

pub use mmio::Mmio;
pub use regs::Regs;
