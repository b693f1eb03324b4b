//! The one trait through which both Intel drivers reach their registers
//! ([`Regs`]: a BAR0 memory window in the kernel, [`super::mmio::Mmio`];
//! a register file played by a test), and the registers the 82574 and the
//! 82576 have at the same offsets with the same bits.
//!
//! Offsets and bits are from Intel's *82574 GbE Controller Family
//! Datasheet* (rev. 3.4), chapter 10, whose §10.2 describes them, and the
//! *82576EB Gigabit Ethernet Controller Datasheet* (rev. 2.63), chapter 8,
//! its register descriptions; each block below names its register group in
//! both (drivers/DATASHEETS.md says how each number was confirmed). Only
//! what a driver touches is listed; what one controller alone has (its
//! queues' registers, its MSI-X routing, the 82576's PHY access) is in its
//! own module's `regs.rs`.
#![forbid(unsafe_code)]

/// 32-bit register access at a byte offset into BAR0. Reads take `&self`
/// although some registers clear on read (ICR, the statistics): the device,
/// not the driver's state, changes.
pub trait Regs {
    fn read(&self, offset: u32) -> u32;
    fn write(&mut self, offset: u32, value: u32);
}

/// Register reads to wait for a reset, an NVM or PHY access or a queue to
/// switch: each datasheet gives these about a millisecond or well under;
/// a device that needs more than this many traps is not coming back.
pub const POLLS: u32 = 100_000;

/// Polls `reg` until `done` holds of it, at most [`POLLS`] reads; its last
/// value if it did.
pub fn poll(r: &impl Regs, reg: u32, done: impl Fn(u32) -> bool) -> Option<u32> {
    (0..POLLS).map(|_| r.read(reg)).find(|&v| done(v))
}

// General registers (82574 §10.2.2; 82576 chapter 8): device control,
// status, EEPROM read.

/// Device Control. RST resets the device (the 82576's internal PHY with
/// it) and self-clears; SLU sets the link up (forced on the 82574, which
/// needs it with its internal PHY in this mode; the 82576 then takes the
/// link its PHY negotiated); LRST (set at power-up) holds the link in
/// reset; ILOS inverts loss-of-signal, VME turns on VLAN mode and PHY_RST
/// holds the PHY in reset: all three cleared at bring-up.
pub const CTRL: u32 = 0x0000;
pub const CTRL_LRST: u32 = 1 << 3;
pub const CTRL_SLU: u32 = 1 << 6;
pub const CTRL_ILOS: u32 = 1 << 7;
pub const CTRL_RST: u32 = 1 << 26;
pub const CTRL_VME: u32 = 1 << 30;
pub const CTRL_PHY_RST: u32 = 1 << 31;

/// Device Status: LU is the link state the LSC interrupt reports changes of.
pub const STATUS: u32 = 0x0008;
pub const STATUS_LU: u32 = 1 << 1;

/// EEPROM Read: write the word address with START, poll DONE, take DATA.
/// Both controllers' layout: START bit 0, DONE bit 1, address bits 15:2,
/// data 31:16. Words 0..=2 of the NVM hold the MAC address.
pub const EERD: u32 = 0x0014;
pub const EERD_START: u32 = 1 << 0;
pub const EERD_DONE: u32 = 1 << 1;
pub const EERD_ADDR_SHIFT: u32 = 2;
pub const EERD_DATA_SHIFT: u32 = 16;

// Interrupt registers (82574 §10.2.4, causes described in §7.4; 82576
// chapter 8, causes in §7.3). One bit layout for all four: ICR (cause,
// read or write 1 to clear), ICS (set), IMS (enable), IMC (disable), at
// the offsets the 8254x family has always used (on the 82576, the legacy
// causes' registers, which also serve its MSI-X "other" vector).

pub const ICR: u32 = 0x00c0;
pub const ICS: u32 = 0x00c8;
pub const IMS: u32 = 0x00d0;
pub const IMC: u32 = 0x00d8;
/// Transmit descriptor written back (not enabled: completions are reaped
/// on every pass).
pub const INT_TXDW: u32 = 1 << 0;
/// Link status change.
pub const INT_LSC: u32 = 1 << 2;
/// Free receive descriptors fell below the minimum threshold.
pub const INT_RXDMT0: u32 = 1 << 4;
/// Receiver overrun: frames lost for lack of descriptors.
pub const INT_RXO: u32 = 1 << 6;

// Receive registers (82574 §10.2.5, the receive path in §7.1; 82576
// §8.10, the receive path in §7.1).

/// A descriptor queue's registers: base (low, high), length in bytes (a
/// multiple of 128), head (the device's), tail (one past the last
/// descriptor given), at the same distances from the block's start on
/// both controllers (RDBAL..RDT, TDBAL..TDT); where the block starts is
/// each controller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queue(pub u32);

impl Queue {
    pub const fn bal(self) -> u32 {
        self.0
    }
    pub const fn bah(self) -> u32 {
        self.0 + 0x04
    }
    pub const fn dlen(self) -> u32 {
        self.0 + 0x08
    }
    pub const fn head(self) -> u32 {
        self.0 + 0x10
    }
    pub const fn tail(self) -> u32 {
        self.0 + 0x18
    }
}

/// Receive Control. LPE admits frames over 1522 bytes; SECRC strips the
/// CRC so the written length is the frame's; MPE accepts every multicast
/// frame (IPv6 neighbour discovery and RoCE multicast groups need them,
/// and a table of hashes is not worth it for a handful of groups); BAM
/// accepts broadcast. How the buffer size is named differs (RCTL.BSIZE on
/// the 82574, SRRCTL per queue on the 82576).
pub const RCTL: u32 = 0x0100;
pub const RCTL_EN: u32 = 1 << 1;
pub const RCTL_MPE: u32 = 1 << 4;
pub const RCTL_LPE: u32 = 1 << 5;
pub const RCTL_BAM: u32 = 1 << 15;
pub const RCTL_SECRC: u32 = 1 << 26;

/// Receive Checksum Control (82574 §10.2.5, 82576 §8.10; the checks in
/// §7.1 of each): IPOFLD has the device check IPv4 header checksums,
/// TUOFLD TCP and UDP checksums, and say what it found in each
/// descriptor's status and error bits. The rest (the 82574's PCSS, the
/// 82576's PCSD) stays clear: unused here.
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

// Transmit registers (82574 §10.2.6, the transmit path in §7.2; 82576
// chapter 8, the transmit path in §7.2).

/// Transmit Control: EN, PSP (pad short frames to 64 bytes), the collision
/// threshold and distance (CT, COLD; meaningless in full duplex but the
/// datasheets ask for 0x0F and 0x3F).
pub const TCTL: u32 = 0x0400;
pub const TCTL_EN: u32 = 1 << 1;
pub const TCTL_PSP: u32 = 1 << 3;
pub const TCTL_CT: u32 = 0x0f << 4;
pub const TCTL_COLD: u32 = 0x3f << 12;

// Statistics (82574 §10.2; 82576 §8.19): 32-bit counters that clear when
// read; the 64-bit octet counters clear when their high half is read, so
// low first. The 82576 keeps the 82574's offsets.

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
/// Receive oversize: frames longer than the receiver admits (read on the
/// 82576, against its RLPML).
pub const ROC: u32 = 0x40ac;
/// Total packets received / transmitted.
pub const TPR: u32 = 0x40d0;
pub const TPT: u32 = 0x40d4;

/// BAR0's size on both: the 128 KiB memory register space.
pub const BAR0_LEN: usize = 128 << 10;
