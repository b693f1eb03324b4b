//! The 82574's descriptor formats, for the family's rings
//! ([`crate::intel::rx`], [`crate::intel::tx`]): the legacy receive
//! descriptor of §7.1.3, and on the transmit side (§7.2) the legacy data
//! descriptor for frames without offload, the TCP/IP context descriptor
//! with the extended (TCP/IP) data descriptor for frames whose checksums
//! the device inserts.
//!
//! Receive stays legacy: the extended descriptor's additions are the RSS
//! hash and packet split (one queue here), and the legacy one reports the
//! checksum verdict too (status IPCS/TCPCS/UDPCS, errors IPE/TCPE, §7.1.3;
//! the checks, §7.1). The legacy formats keep the buffer address in place
//! when the device writes back, and a filled slot is recognised by its DD
//! bit.
#![forbid(unsafe_code)]

use crate::intel::desc::{Format, TxData};
use crate::intel::tx::TxContext;

/// The 82574's formats.
pub struct Legacy;

// Receive descriptor (§7.1.3): buffer address (0..8), length (8..10),
// packet checksum (10..12), status (12), errors (13), VLAN tag (14..16).
// Status and errors are read as one word, the status in bits 7:0 and the
// errors in 15:8, so the error bits below are the errors field's shifted
// by 8.

/// Errors: CRC/alignment (CE), symbol (SE), sequence (SEQ), RX data error
/// (RXE): a frame worthless.
pub const RX_ERR_FATAL: u32 = (1 << 0 | 1 << 1 | 1 << 2 | 1 << 7) << 8;
/// Errors: TCP/UDP checksum wrong (TCPE), IPv4 header checksum wrong (IPE)
/// (§7.1.3, the errors field); meaningful only with the matching status bit.
pub const RX_ERR_TCPE: u32 = 1 << 5 << 8;
pub const RX_ERR_IPE: u32 = 1 << 6 << 8;

// Transmit data descriptor, legacy (§7.2): buffer address (0..8),
// length (8..10), checksum offset (10), command (11), status (12),
// checksum start (13), special (14..16).

/// Command: end of packet, insert the FCS, report status (write DD back).
pub const TX_CMD_EOP: u8 = 1 << 0;
pub const TX_CMD_IFCS: u8 = 1 << 1;
pub const TX_CMD_RS: u8 = 1 << 3;

// TCP/IP context descriptor (§7.2): IPCSS (0), IPCSO (1), IPCSE
// (2..4), TUCSS (4), TUCSO (5), TUCSE (6..8), PAYLEN 19:0 / DTYP 23:20 /
// TUCMD 31:24 (8..12), STA (12), HDRLEN (13), MSS (14..16). Extended data
// descriptor (§7.2): address (0..8), DTALEN 19:0 / DTYP 23:20 / DCMD
// 31:24 (8..12), STA (12), POPTS (13), VLAN (14..16).

/// Descriptor types (DTYP, with DEXT): context 0000b, data 0001b.
pub const TX_DTYP_DATA: u32 = 1 << 20;
/// DEXT: the extended formats, as a bit of the command byte's dword.
pub const TX_DEXT: u32 = 1 << 29;
/// TUCMD: the L4 checksum is TCP's (else UDP's); the packet is IPv4.
pub const TX_TUCMD_TCP: u32 = 1 << 24;
pub const TX_TUCMD_IP: u32 = 1 << 25;
/// POPTS: insert the IPv4 header checksum (IXSM), the TCP/UDP one (TXSM).
pub const TX_POPTS_IXSM: u8 = 1 << 0;
pub const TX_POPTS_TXSM: u8 = 1 << 1;

impl Format for Legacy {
    const RX_LEN_AT: usize = 8;
    /// Status and errors; the VLAN tag above them is not ours.
    const RX_STATUS_AT: usize = 12;
    const RX_STATUS_MASK: u32 = 0xffff;
    const RX_ERR_FATAL: u32 = RX_ERR_FATAL;
    const RX_ERR_IPE: u32 = RX_ERR_IPE;
    const RX_ERR_L4E: u32 = RX_ERR_TCPE;
    /// Each descriptor has its own length; nothing counts the whole frame.
    const MAX_FRAME_LEN: usize = usize::MAX;

    /// A context descriptor (§7.2): the IPv4 header's start, checksum
    /// field and last byte; the L4 header's start and checksum field, to
    /// the end of the frame (TUCSE 0).
    fn context(c: &TxContext) -> [u32; 4] {
        let l = &c.layout;
        let (tucss, tucso) = l.l4.unwrap_or((0, 0));
        let ip = l.ip_start as u32 | (l.ip_csum_at() as u32) << 8 | ((l.ip_end - 1) as u32) << 16;
        let tu = tucss as u32 | (tucso as u32) << 8;
        let tcp = if l.tcp && l.l4.is_some() { TX_TUCMD_TCP } else { 0 };
        [ip, tu, TX_DEXT | TX_TUCMD_IP | tcp, 0]
    }

    /// A legacy data descriptor for a frame sent as written; an extended
    /// one, POPTS in every descriptor of the chain, under a context.
    fn data(d: TxData) -> [u32; 2] {
        let end = if d.last { TX_CMD_EOP | TX_CMD_RS } else { 0 };
        let cmd = u32::from(TX_CMD_IFCS | end) << 24;
        match d.insert {
            None => [d.len | cmd, 0],
            Some(i) => {
                let popts = (if i.ipv4 { TX_POPTS_IXSM } else { 0 }) | (if i.l4 { TX_POPTS_TXSM } else { 0 });
                [d.len | TX_DTYP_DATA | TX_DEXT | cmd, u32::from(popts) << 8]
            }
        }
    }
}
