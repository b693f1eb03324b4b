//! The 82574's own registers, after the ones it shares with the 82576
//! ([`crate::intel::regs`], re-exported here so the driver names its whole
//! map in one place). Reached through the same [`Regs`] trait.
//!
//! Offsets and bits are from Intel's *82574 GbE Controller Family
//! Datasheet* (rev. 3.4), chapter 10, whose §10.2 describes them; each
//! block below names its register group there. Only what the driver
//! touches is listed.

pub use crate::intel::regs::*;

// General registers (§10.2.2): device control, extended control.

/// Device Control's ASDE lets the MAC take the PHY's speed (set with
/// SLU at bring-up; the rest of CTRL is the family's).
pub const CTRL_ASDE: u32 = 1 << 5;

/// Extended Device Control. PBA_SUPPORT (bit 31) must be set in MSI-X
/// mode (§10.2.2, §7.4.2): the MSI-X pending bits then follow the
/// causes. IAME (bit 27), auto-masking on ICR reads, stays clear.
pub const CTRL_EXT: u32 = 0x0018;
pub const CTRL_EXT_IAME: u32 = 1 << 27;
pub const CTRL_EXT_PBA_SUPPORT: u32 = 1 << 31;

// Interrupt registers (§10.2.4; causes described in §7.4): the 82574's
// own among them, beside the family's ICR, ICS, IMS, IMC and causes.

/// Interrupt Throttling: zero, no minimum gap (latency first; the poll
/// loop already batches).
pub const ITR: u32 = 0x00c4;
/// Receive timer: a frame was written back.
pub const INT_RXT0: u32 = 1 << 7;
/// MSI-X causes (§7.4.2): receive queue 0 written back, transmit queue 0
/// written back, and "other" (set with any other cause: LSC, RXO, ...).
/// Only raised in MSI-X mode, where they pick the vector (IVAR).
pub const INT_RXQ0: u32 = 1 << 20;
pub const INT_TXQ0: u32 = 1 << 22;
pub const INT_OTHER: u32 = 1 << 24;
/// The causes the driver enables.
pub const INT_ENABLED: u32 = INT_LSC | INT_RXDMT0 | INT_RXO | INT_RXT0;
/// In MSI-X mode, with the vector causes: receive queue 0 and "other",
/// which carries the link changes. (Transmit completions are reaped on
/// every pass, so TXQ0, though routed, stays masked as TXDW does.)
pub const INT_ENABLED_MSIX: u32 = INT_ENABLED | INT_RXQ0 | INT_OTHER;

/// Extended Interrupt Auto Clear (§10.2.4): the MSI-X causes cleared from
/// ICR when their message is sent. Zero: the poll loop acknowledges every
/// cause through ICR as in INTx mode, so none is lost between the message
/// and the acknowledgement.
pub const EIAC: u32 = 0x00dc;
/// Interrupt Acknowledge Auto-Mask (§10.2.4): zero, nothing masked on an
/// ICR read (IAME is clear anyway).
pub const IAM: u32 = 0x00e0;
/// Interrupt Vector Allocation (§10.2.4, IVAR; §7.4.2): a 3-bit MSI-X
/// table entry and a valid bit per cause, in nibbles: receive queue 0
/// (bits 3:0), receive queue 1 (7:4), transmit queue 0 (11:8), transmit
/// queue 1 (15:12), other (19:16).
pub const IVAR: u32 = 0x00e4;
pub const IVAR_VALID: u32 = 1 << 3;
pub const IVAR_RXQ0_SHIFT: u32 = 0;
pub const IVAR_TXQ0_SHIFT: u32 = 8;
pub const IVAR_OTHER_SHIFT: u32 = 16;
/// Extended Interrupt Throttling, one per MSI-X vector (§10.2.4, EITR):
/// zero as ITR is, no minimum gap. (QEMU raises any value to its floor of
/// 128 us and, when that timer ends, sends the vector once more whether
/// or not a cause is pending: up to one extra, empty, interrupt per
/// vector and burst, which the poll loop acknowledges as nothing.)
pub const EITR0: u32 = 0x00e8;
/// MSI-X table entries the 82574 has (§7.4.2; its MSI-X capability says
/// so too).
pub const MSIX_ENTRIES: u8 = 5;

// Receive registers (§10.2.5; the receive path in §7.1).

/// Receive Control's buffer size: BSIZE with BSEX (RCTL's encoding,
/// §10.2.5); the rest of RCTL is the family's.
pub const RCTL_BSIZE_SHIFT: u32 = 16;
pub const RCTL_BSEX: u32 = 1 << 25;

/// The receive ring's registers: RDBAL, RDBAH, RDLEN, RDH, RDT.
pub const RXQ: Queue = Queue(0x2800);
/// Receive delay timer and absolute delay: zero, write back at once.
pub const RDTR: u32 = 0x2820;
pub const RADV: u32 = 0x282c;

// Transmit registers (§10.2.6; the transmit path in §7.2).

/// Inter-packet gap (IPGT, IPGR1, IPGR2): the copper defaults.
pub const TIPG: u32 = 0x0410;
pub const TIPG_DEFAULT: u32 = 8 | 8 << 10 | 6 << 20;

/// The transmit ring's, laid out as the receive one's: TDBAL, TDBAH,
/// TDLEN, TDH, TDT.
pub const TXQ: Queue = Queue(0x3800);
