//! What a descriptor format is to the shared rings ([`super::rx`],
//! [`super::tx`]). The 82574's legacy formats ([`crate::e1000e::desc`])
//! and the 82576's advanced ones ([`crate::igb::desc`]) agree on most of a
//! descriptor, and a [`Format`] says the rest:
//!
//! - Both are 16 bytes, with a buffer address in bytes 0..8 when the
//!   driver hands one to the device.
//! - A receive descriptor is posted with bytes 8..16 zeroed: the legacy
//!   write-back fields (length, checksum, status, errors, VLAN tag) are all
//!   the device's to write, and the advanced read format's header address
//!   there overlays its write-back status word. Either way the slot reads
//!   "not done" until the device fills it. Where the write-back puts its
//!   length and status is the format's.
//! - The receive status bits are the same: the legacy status byte (82574
//!   §7.1.3) is bits 7:0 of the advanced extended status (82576 §7.1). The
//!   error bits are not ([`Format::RX_ERR_FATAL`] and the checksum ones).
//! - A transmit descriptor is the address and two dwords the format packs
//!   ([`Format::data`], [`Format::context`]); on both, DD comes back in
//!   bit 0 of byte 12 (the legacy STA, the advanced write-back's STA) and
//!   only where the descriptor asked with RS.
#![forbid(unsafe_code)]

use super::tx::TxContext;
use crate::nic::{RxChecksum, RxVerdict};

/// Bytes per descriptor, both directions, both formats.
pub const DESC_LEN: usize = 16;

/// Receive status (82574 §7.1.3, the status field; 82576 §7.1, the
/// advanced write-back's extended status): descriptor done (the device
/// wrote this slot back), end of packet (the last, here only, buffer of a
/// frame), ignore the checksum indications (IXSM), UDP checksum computed
/// (UDPCS, with TCPCS), TCP/UDP checksum computed (TCPCS), IPv4 header
/// checksum computed (IPCS).
pub const RX_DD: u32 = 1 << 0;
pub const RX_EOP: u32 = 1 << 1;
pub const RX_IXSM: u32 = 1 << 2;
pub const RX_UDPCS: u32 = 1 << 4;
pub const RX_TCPCS: u32 = 1 << 5;
pub const RX_IPCS: u32 = 1 << 6;

/// Where a transmit descriptor's status is, and its DD bit.
pub const TX_STATUS: usize = 12;
pub const TX_DD: u32 = 1 << 0;

/// A data descriptor, as the ring asks a format to pack it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxData {
    /// This buffer's bytes.
    pub len: u32,
    /// The first and the last descriptor of the frame's chain (both, for a
    /// frame in one buffer).
    pub first: bool,
    pub last: bool,
    /// The whole frame's length.
    pub frame_len: u32,
    /// The checksums the device inserts (POPTS), from the context the
    /// device holds; `None` for a frame sent as written.
    pub insert: Option<Insert>,
}

/// POPTS: insert the IPv4 header checksum (IXSM), the TCP/UDP one (TXSM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insert {
    pub ipv4: bool,
    pub l4: bool,
}

/// One controller's descriptor formats: the write-back's layout and bits,
/// and how a transmit descriptor is packed. Pure layout: the rings do every
/// access to descriptor memory.
pub trait Format {
    /// The receive write-back's length field (16 bits) and its status word
    /// (a 32-bit load, of which `RX_STATUS_MASK` are status and errors, the
    /// status bits in 7:0 as [`RX_DD`] ... say).
    const RX_LEN_AT: usize;
    const RX_STATUS_AT: usize;
    const RX_STATUS_MASK: u32;
    /// Error bits that make a frame worthless (CRC, symbol, sequence, RX
    /// data errors). The checksum error bits are the verdict's
    /// ([`verdict`]), not a fault of the frame's reception.
    const RX_ERR_FATAL: u32;
    /// IPv4 header checksum wrong (IPE), TCP/UDP checksum wrong (TCPE,
    /// L4E); meaningful only with the matching status bit.
    const RX_ERR_IPE: u32;
    const RX_ERR_L4E: u32;
    /// The longest frame one chain may carry (a length field's width).
    const MAX_FRAME_LEN: usize;

    /// A context descriptor's four dwords, for the checksums `c` asks.
    fn context(c: &TxContext) -> [u32; 4];

    /// A data descriptor's dwords at bytes 8 and 12 (the address is at 0),
    /// with RS on the last so that one alone gets DD written back.
    fn data(d: TxData) -> [u32; 2];
}

/// What the device found of a frame's checksums (RXCSUM on), from its
/// write-back's status word: each one Unchecked unless its "computed"
/// status bit is set (and IXSM clear), then Good or Bad by its error bit.
pub fn verdict<F: Format>(status: u32) -> RxVerdict {
    let judge = |computed: u32, error: u32| match (status & RX_IXSM == 0 && status & computed != 0, status & error != 0)
    {
        (false, _) => RxChecksum::Unchecked,
        (true, false) => RxChecksum::Good,
        (true, true) => RxChecksum::Bad,
    };
    RxVerdict { ipv4: judge(RX_IPCS, F::RX_ERR_IPE), l4: judge(RX_TCPCS, F::RX_ERR_L4E) }
}
