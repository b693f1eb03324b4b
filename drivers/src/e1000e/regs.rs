//! The 82574's registers that this driver uses, and the one trait through
//! which the driver reaches them ([`Regs`]): a BAR0 memory window in the
//! kernel ([`super::mmio::Mmio`]), a register file played by a test.
//!
//! Offsets and bits are from Intel's *82574 GbE Controller Family
//! Datasheet* (rev. 3.4), chapter 10, whose §10.2 describes them; each
//! block below names its register group there. Only what the driver
//! touches is listed.

/// 32-bit register access at a byte offset into BAR0. Reads take `&self`
/// although some registers clear on read (ICR, the statistics): the device,
/// not the driver's state, changes.
pub trait Regs {
    fn read(&self, offset: u32) -> u32;
    fn write(&mut self, offset: u32, value: u32);
}

// General registers (§10.2.2): device control, status, EEPROM read.

/// Device Control. RST resets everything but PCI configuration and
/// self-clears; SLU forces the link up (needed with the internal PHY in
/// this mode); ASDE lets the MAC take the PHY's speed.
pub const CTRL: u32 = 0x0000;
pub const CTRL_LRST: u32 = 1 << 3;
pub const CTRL_ASDE: u32 = 1 << 5;
pub const CTRL_SLU: u32 = 1 << 6;
pub const CTRL_ILOS: u32 = 1 << 7;
pub const CTRL_RST: u32 = 1 << 26;
pub const CTRL_VME: u32 = 1 << 30;
pub const CTRL_PHY_RST: u32 = 1 << 31;

/// Device Status: LU is the link state the LSC interrupt reports changes of.
pub const STATUS: u32 = 0x0008;
pub const STATUS_LU: u32 = 1 << 1;

/// Extended Device Control. PBA_SUPPORT (bit 31) must be set in MSI-X
/// mode (§10.2.2, §7.4.2): the MSI-X pending bits then follow the
/// causes. IAME (bit 27), auto-masking on ICR reads, stays clear.
pub const CTRL_EXT: u32 = 0x0018;
pub const CTRL_EXT_IAME: u32 = 1 << 27;
pub const CTRL_EXT_PBA_SUPPORT: u32 = 1 << 31;

/// EEPROM Read: write the word address with START, poll DONE, take DATA.
/// The 82574's layout: START bit 0, DONE bit 1, address bits 15:2, data 31:16.
/// Words 0..=2 of the NVM hold the MAC address.
pub const EERD: u32 = 0x0014;
pub const EERD_START: u32 = 1 << 0;
pub const EERD_DONE: u32 = 1 << 1;
pub const EERD_ADDR_SHIFT: u32 = 2;
pub const EERD_DATA_SHIFT: u32 = 16;

// Interrupt registers (§10.2.4; causes described in §7.4). One bit layout
// for all four: ICR (cause, read or write 1 to clear), ICS (set), IMS
// (enable), IMC (disable).

pub const ICR: u32 = 0x00c0;
/// Interrupt Throttling: zero, no minimum gap (latency first; the poll
/// loop already batches).
pub const ITR: u32 = 0x00c4;
pub const ICS: u32 = 0x00c8;
pub const IMS: u32 = 0x00d0;
pub const IMC: u32 = 0x00d8;
/// Transmit descriptor written back (not enabled: completions are reaped
/// on every pass).
pub const INT_TXDW: u32 = 1 << 0;
/// Link status change.
pub const INT_LSC: u32 = 1 << 2;
/// Receive descriptors below the minimum threshold.
pub const INT_RXDMT0: u32 = 1 << 4;
/// Receiver overrun: frames lost for lack of descriptors.
pub const INT_RXO: u32 = 1 << 6;
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

/// Receive Control. BSIZE with BSEX picks the buffer size (RCTL's
/// encoding, §10.2.5); LPE admits frames over 1522 bytes; SECRC strips the
/// CRC so the written length is the frame's; MPE accepts every multicast
/// frame (IPv6 neighbour discovery and RoCE multicast groups need them, and
/// a table of hashes is not worth it for a handful of groups); BAM accepts
/// broadcast.
pub const RCTL: u32 = 0x0100;
pub const RCTL_EN: u32 = 1 << 1;
pub const RCTL_MPE: u32 = 1 << 4;
pub const RCTL_LPE: u32 = 1 << 5;
pub const RCTL_BAM: u32 = 1 << 15;
pub const RCTL_BSIZE_SHIFT: u32 = 16;
pub const RCTL_BSEX: u32 = 1 << 25;
pub const RCTL_SECRC: u32 = 1 << 26;

/// The receive ring: base (low, high), length in bytes (a multiple of
/// 128), head (the device's), tail (one past the last buffer posted).
pub const RDBAL: u32 = 0x2800;
pub const RDBAH: u32 = 0x2804;
pub const RDLEN: u32 = 0x2808;
pub const RDH: u32 = 0x2810;
pub const RDT: u32 = 0x2818;
/// Receive delay timer and absolute delay: zero, write back at once.
pub const RDTR: u32 = 0x2820;
pub const RADV: u32 = 0x282c;

// Receive checksum offload (§10.2.5, RXCSUM; the checks in §7.1).

/// Receive Checksum Control: IPOFLD has the device check IPv4 header
/// checksums, TUOFLD TCP and UDP checksums, and say what it found in each
/// descriptor's status and error bits. PCSS (bits 7:0) and the packet
/// checksum field are for checksums the device cannot parse; unused.
pub const RXCSUM: u32 = 0x5000;
pub const RXCSUM_IPOFLD: u32 = 1 << 8;
pub const RXCSUM_TUOFLD: u32 = 1 << 9;

/// Multicast Table Array: 128 words of hash bits, cleared (MPE does the work).
pub const MTA: u32 = 0x5200;
pub const MTA_WORDS: u32 = 128;
/// Receive Address 0, low and high: the station MAC (the first four bytes
/// in RAL, the last two in RAH's low half); AV marks the entry valid.
pub const RAL0: u32 = 0x5400;
pub const RAH0: u32 = 0x5404;
pub const RAH_AV: u32 = 1 << 31;

// Transmit registers (§10.2.6; the transmit path in §7.2).

/// Transmit Control: EN, PSP (pad short frames to 64 bytes), the collision
/// threshold and distance (CT, COLD; meaningless in full duplex but the
/// datasheet asks for 0x0F and 0x3F).
pub const TCTL: u32 = 0x0400;
pub const TCTL_EN: u32 = 1 << 1;
pub const TCTL_PSP: u32 = 1 << 3;
pub const TCTL_CT: u32 = 0x0f << 4;
pub const TCTL_COLD: u32 = 0x3f << 12;
/// Inter-packet gap (IPGT, IPGR1, IPGR2): the copper defaults.
pub const TIPG: u32 = 0x0410;
pub const TIPG_DEFAULT: u32 = 8 | 8 << 10 | 6 << 20;

/// The transmit ring, laid out as the receive one.
pub const TDBAL: u32 = 0x3800;
pub const TDBAH: u32 = 0x3804;
pub const TDLEN: u32 = 0x3808;
pub const TDH: u32 = 0x3810;
pub const TDT: u32 = 0x3818;

// Statistics (§10.2): 32-bit counters that clear when read; the 64-bit
// octet counters clear when their high half is read, so low first.

/// CRC errors.
pub const CRCERRS: u32 = 0x4000;
/// Missed packets: dropped for want of room (no descriptors, FIFO full).
pub const MPC: u32 = 0x4010;
/// Good packets received / transmitted.
pub const GPRC: u32 = 0x4074;
pub const GPTC: u32 = 0x4080;
/// Good octets received / transmitted (low, high).
pub const GORCL: u32 = 0x4088;
pub const GORCH: u32 = 0x408c;
pub const GOTCL: u32 = 0x4090;
pub const GOTCH: u32 = 0x4094;
/// Receive no buffers: times a frame found no free descriptor.
pub const RNBC: u32 = 0x40a0;
/// Total packets received / transmitted.
pub const TPR: u32 = 0x40d0;
pub const TPT: u32 = 0x40d4;

/// BAR0's size on the 82574: the memory register space of chapter 10.
pub const BAR0_LEN: usize = 128 << 10;
