//! The 82576's own registers, after the ones it shares with the 82574
//! ([`crate::intel::regs`], re-exported here so the driver names its whole
//! map in one place). Reached through the same [`Regs`] trait and BAR
//! window ([`crate::intel::Mmio`]): both are 32-bit registers at byte
//! offsets into a memory BAR, only part of the map differs.
//!
//! Offsets and bits are from Intel's *82576EB Gigabit Ethernet Controller
//! Datasheet* (rev. 2.63), chapter 8, its register descriptions; each
//! block names its register group there where its number could be
//! confirmed (drivers/DATASHEETS.md). Only what the driver touches is
//! listed. Where the 82576 keeps an 82574-compatible alias (queue 0's ring
//! registers at 0x2800/0x3800), the 82576's own offset is used.

pub use crate::intel::regs::*;

// General registers (chapter 8).

/// Device Control's FRCSPD and FRCDPX force speed and duplex: cleared at
/// bring-up, so the MAC follows the PHY (the rest of CTRL is the family's).
pub const CTRL_FRCSPD: u32 = 1 << 11;
pub const CTRL_FRCDPX: u32 = 1 << 12;

/// MDI Control (chapter 8): one access to a PHY register. Data bits 15:0,
/// register 20:16, PHY address 25:21 (the internal PHY answers at 1), the
/// operation 27:26 (01 write, 10 read), READY (bit 28) when done, ERROR
/// (bit 30) when the PHY did not answer.
pub const MDIC: u32 = 0x0020;
pub const MDIC_REG_SHIFT: u32 = 16;
pub const MDIC_PHY_SHIFT: u32 = 21;
pub const MDIC_PHY_INTERNAL: u32 = 1;
pub const MDIC_OP_WRITE: u32 = 1 << 26;
pub const MDIC_READY: u32 = 1 << 28;
pub const MDIC_ERROR: u32 = 1 << 30;

/// The PHY's control register (IEEE 802.3 clause 22, register 0): a reset
/// of the MAC resets the PHY's registers, and negotiation must be started
/// again for the link to come up (chapter 4, link setup): auto-negotiation
/// enabled and restarted, 1000 Mb/s full duplex as the fallback.
pub const PHY_BMCR: u32 = 0;
pub const BMCR_SPEED1000: u16 = 1 << 6;
pub const BMCR_FULL_DUPLEX: u16 = 1 << 8;
pub const BMCR_RESTART_AN: u16 = 1 << 9;
pub const BMCR_AN_ENABLE: u16 = 1 << 12;

// Interrupt registers (chapter 8; causes in §7.3). In legacy (non-MSI-X)
// mode the family's ICR, ICS, IMS and IMC serve every cause (Linux's igb
// uses them too; QEMU's igb decodes only these). In MSI-X mode these
// causes stay where they are and the "other" vector signals them; the
// extended registers (below) route the queues' causes to vectors.

/// Receive descriptor written back: a frame arrived.
pub const INT_RXDW: u32 = 1 << 7;
/// The causes the driver enables.
pub const INT_ENABLED: u32 = INT_LSC | INT_RXDMT0 | INT_RXO | INT_RXDW;

/// Interrupt throttling for vector 0, the one legacy interrupts use
/// (chapter 8): zero, no minimum gap (latency first; the poll loop already
/// batches).
pub const EITR0: u32 = 0x1680;

// MSI-X (§7.3, the registers in chapter 8). With GPIE.MSIX_MODE the
// device sets a bit in EICR per MSI-X vector: queue causes through IVAR0
// (receive queue 0 in bits 7:0, transmit queue 0 in 15:8, each a vector
// in 4:0 and a valid bit 7), the legacy ICR causes, link change among
// them, through IVAR_MISC's "other" entry (bits 15:8; 7:0 is the TCP
// timer's). A vector's message goes out when its EICR bit rises while
// enabled in EIMS. The driver sets no auto-clear (EIAC) and no auto-mask
// (GPIE.EIAME, which EIAM only serves), so EICR and ICR hold their causes
// until the poll loop acknowledges them, as with INTx.

/// General Purpose Interrupt Enable (chapter 8): MSIX_MODE as above; PBA
/// support, set with MSI-X (as Linux's igb does); NSICR and EIAME (the
/// clear-on-read and auto-mask behaviours) stay off.
pub const GPIE: u32 = 0x1514;
pub const GPIE_NSICR: u32 = 1 << 0;
pub const GPIE_MSIX_MODE: u32 = 1 << 4;
pub const GPIE_EIAME: u32 = 1 << 30;
pub const GPIE_PBA: u32 = 1 << 31;
/// Extended cause set, mask set (enable) and clear, auto-clear, auto-mask
/// (chapter 8): one bit per vector in MSI-X mode.
pub const EICS: u32 = 0x1520;
pub const EIMS: u32 = 0x1524;
pub const EIMC: u32 = 0x1528;
pub const EIAC: u32 = 0x152c;
pub const EIAM: u32 = 0x1530;
/// Extended cause (chapter 8): cleared by writing 1s (and, under QEMU, by
/// reading it).
pub const EICR: u32 = 0x1580;
/// Interrupt Vector Allocation, queues 0 and 1 (chapter 8), and the one for
/// the other causes.
pub const IVAR0: u32 = 0x1700;
pub const IVAR_MISC: u32 = 0x1740;
pub const IVAR_VALID: u32 = 1 << 7;
pub const IVAR_RXQ0_SHIFT: u32 = 0;
pub const IVAR_TXQ0_SHIFT: u32 = 8;
pub const IVAR_OTHER_SHIFT: u32 = 8;
/// The vector field of an IVAR entry.
pub const IVAR_VECTOR_MASK: u32 = 0x1f;
/// MSI-X table entries of the 82576's physical function (§7.3; QEMU's
/// igb has as many): 10, each with its own EITR.
pub const MSIX_ENTRIES: u8 = 10;
/// The ICR causes enabled in MSI-X mode, all on the "other" vector: link
/// changes and overruns (frames come on the receive vector, so RXDW and
/// RXDMT0 stay masked lest every frame fire "other" too).
pub const INT_ENABLED_MSIX: u32 = INT_LSC | INT_RXO;

// Receive registers (§8.10; the receive path in §7.1). The buffer size
// is per queue here (SRRCTL), so the family's RCTL.BSIZE stays 0.

/// Long Packet Maximum Length (§8.10): the largest frame, CRC included,
/// that LPE admits.
pub const RLPML: u32 = 0x5004;

/// Receive queue 0's ring registers: RDBAL, RDBAH, RDLEN, RDH, RDT, with
/// its own between them (below).
pub const RXQ: Queue = Queue(0xc000);
/// Split and Replication Receive Control, queue 0 (§8.10.2): the packet
/// buffer size in KiB (BSIZEPACKET, bits 6:0), the descriptor type (bits
/// 27:25; 001b the advanced one-buffer descriptor) and the free-descriptor
/// threshold for RXDMT0 (RDMTS, bits 24:20, in units of 16 descriptors).
pub const SRRCTL: u32 = 0xc00c;
pub const SRRCTL_BSIZEPKT_SHIFT: u32 = 10;
pub const SRRCTL_BSIZEPKT_MASK: u32 = 0x7f;
pub const SRRCTL_RDMTS_SHIFT: u32 = 20;
pub const SRRCTL_DESCTYPE_ADV_ONEBUF: u32 = 0b001 << 25;
/// Receive Descriptor Control, queue 0 (§8.10): ENABLE turns the queue
/// on (the device acknowledges by reading it back set) and off; WTHRESH 1
/// writes each descriptor back at once.
pub const RXDCTL: u32 = 0xc028;
pub const XDCTL_WTHRESH_1: u32 = 1 << 16;
pub const XDCTL_ENABLE: u32 = 1 << 25;

// Transmit registers (chapter 8; the transmit path in §7.2).

/// Transmit Control's RTLC (retransmit on late collision), beside the
/// family's bits.
pub const TCTL_RTLC: u32 = 1 << 24;

/// Transmit queue 0, laid out as the receive one (TDBAL .. TDT); TXDCTL
/// (chapter 8) with the same ENABLE and WTHRESH bits as RXDCTL.
pub const TXQ: Queue = Queue(0xe000);
pub const TXDCTL: u32 = 0xe028;
