//! The 82576's descriptor formats, for the family's rings
//! ([`crate::intel::rx`], [`crate::intel::tx`]): its advanced ones, the
//! one-buffer receive descriptor of §7.1 (SRRCTL.DESCTYPE 001b) and the
//! transmit data descriptor of §7.2.2.3, with the advanced context
//! descriptor (§7.2.2) before a frame whose checksums the device inserts.
//!
//! Why advanced on both sides. Receive: the 82576 reads a receive
//! descriptor in the format SRRCTL names, and QEMU's igb model implements
//! only the advanced one, so it is the format that works on both. Transmit:
//! the legacy descriptor (§7.2.2.1) would do on the real device, but QEMU's
//! model leaves legacy transmit descriptors unimplemented (a to-do in its
//! igb_core.c), and Linux's igb, the driver both are tested against, sends
//! only advanced data descriptors. A frame without offload (the RoCE
//! frames, whose checksums the rdma crate writes) is data descriptors
//! alone; a chain has PAYLEN and POPTS on its first descriptor.
//!
//! The advanced receive write-back replaces the whole descriptor (the
//! buffer address included: §7.1, the write-back format); its status/error
//! word overlays the read format's header address, which posting writes as
//! zero (unused with one buffer), so the slot reads "not done".
#![forbid(unsafe_code)]

use crate::intel::desc::{Format, TxData};
use crate::intel::tx::TxContext;

/// The 82576's formats.
pub struct Advanced;

// Receive descriptor, read format: packet buffer address (0..8), header
// buffer address (8..16, unused with one buffer). Write-back format: packet
// info and RSS hash (0..8), extended status (bits 19:0) and errors (bits
// 31:20) as one word (8..12), length (12..14), VLAN tag (14..16).

/// Errors that make a frame worthless: RXE (CRC, symbol or framing) and
/// the older frame-error bits Linux's igb also drops on (CE, SE, SEQ,
/// CXE).
pub const RX_ERR_FATAL: u32 = 1 << 24 | 1 << 25 | 1 << 26 | 1 << 28 | 1 << 31;
/// Errors: TCP/UDP checksum wrong (L4E, bit 29), IPv4 header checksum
/// wrong (IPE, bit 30); meaningful only with the matching status bit.
pub const RX_ERR_L4E: u32 = 1 << 29;
pub const RX_ERR_IPE: u32 = 1 << 30;

// Transmit data descriptor, advanced (§7.2.2.3), read format: buffer
// address (0..8), command/type/length (8..12: length 15:0, DTYP 23:20,
// DCMD 31:24), offload info and status (12..16: STA 3:0, PAYLEN 31:14).
// Write-back: DD in STA, the rest as written.

/// Data descriptor type, and the commands: end of packet, insert the FCS,
/// report status (write DD back), descriptor extension (advanced format).
pub const TX_DTYP_DATA: u32 = 0b0011 << 20;
pub const TX_DCMD_EOP: u32 = 1 << 24;
pub const TX_DCMD_IFCS: u32 = 1 << 25;
pub const TX_DCMD_RS: u32 = 1 << 27;
pub const TX_DCMD_DEXT: u32 = 1 << 29;
/// What every data descriptor carries besides its length; the last of a
/// frame adds [`TX_END`].
pub const TX_CMD: u32 = TX_DTYP_DATA | TX_DCMD_IFCS | TX_DCMD_DEXT;
pub const TX_END: u32 = TX_DCMD_EOP | TX_DCMD_RS;
/// Where the frame's length goes (first descriptor), for the device's own
/// accounting and its offloads: 18 bits.
pub const TX_PAYLEN_SHIFT: u32 = 14;
/// POPTS in the first data descriptor's olinfo: insert the IPv4 header
/// checksum (IXSM), the TCP/UDP one (TXSM) (§7.2.2.3).
pub const TX_POPTS_IXSM: u32 = 1 << 8;
pub const TX_POPTS_TXSM: u32 = 1 << 9;

// Advanced context descriptor (§7.2.2): MACLEN/IPLEN/VLAN (0..4),
// reserved (4..8), TUCMD/DTYP/DEXT (8..12), MSS/L4LEN/IDX (12..16).

pub const CTX_IPLEN_MASK: u32 = 0x1ff;
pub const CTX_MACLEN_SHIFT: u32 = 9;
/// Context descriptor type; TUCMD: IPv4, L4 type TCP (00b is UDP).
pub const TX_DTYP_CTXT: u32 = 0b0010 << 20;
pub const TX_TUCMD_IPV4: u32 = 1 << 10;
pub const TX_TUCMD_L4T_TCP: u32 = 1 << 11;

impl Format for Advanced {
    const RX_LEN_AT: usize = 12;
    const RX_STATUS_AT: usize = 8;
    const RX_STATUS_MASK: u32 = u32::MAX;
    const RX_ERR_FATAL: u32 = RX_ERR_FATAL;
    const RX_ERR_IPE: u32 = RX_ERR_IPE;
    const RX_ERR_L4E: u32 = RX_ERR_L4E;
    /// PAYLEN's 18 bits.
    const MAX_FRAME_LEN: usize = (1 << 18) - 1;

    /// A context descriptor (§7.2.2): the MAC header's and the IPv4
    /// header's lengths, IPv4, the L4 type; index 0.
    fn context(c: &TxContext) -> [u32; 4] {
        let l = &c.layout;
        let lens = ((l.ip_end - l.ip_start) as u32 & CTX_IPLEN_MASK) | (l.ip_start as u32) << CTX_MACLEN_SHIFT;
        let l4t = if l.tcp { TX_TUCMD_L4T_TCP } else { 0 };
        [lens, 0, TX_DCMD_DEXT | TX_DTYP_CTXT | TX_TUCMD_IPV4 | l4t, 0]
    }

    /// PAYLEN and POPTS on the first; STA (DD) zero until written back.
    fn data(d: TxData) -> [u32; 2] {
        let end = if d.last { TX_END } else { 0 };
        let popts =
            d.insert.map_or(0, |i| (if i.ipv4 { TX_POPTS_IXSM } else { 0 }) | (if i.l4 { TX_POPTS_TXSM } else { 0 }));
        let olinfo = if d.first { d.frame_len << TX_PAYLEN_SHIFT | popts } else { 0 };
        [TX_CMD | end | d.len, olinfo]
    }
}
