//! RoCE v2 wire format: the headers of IBA vol. 1 ch. 9 (BTH and the extension headers,
//! 9.2-9.4), the opcode table (9.2.1), PSN arithmetic (9.7.1), the ICRC (7.8.1 as
//! adapted by annex A17.3.3) and whole Ethernet/IP/UDP frames (annex A17, "RoCEv2").
//!
//! Every header follows one contract, taken from smoltcp's `wire` module:
//!
//! - a zero-copy view `Packet<T: AsRef<[u8]>>` over a byte buffer, with the field offsets
//!   named in a private `field` module. `Packet::new_checked` (or `check_len` after
//!   `new_unchecked`) is the only length check: once it has passed, no getter can panic,
//!   whatever the bytes say. Setters exist when `T: AsMut<[u8]>`.
//! - a `Repr`, the header as plain values, with `parse` (from a `Packet`), `emit` (into a
//!   `Packet` at least `buffer_len()` long) and `buffer_len`. For every valid `Repr`,
//!   `parse(emit(repr)) == repr`.
//! - enums that name wire values keep the values they have no name for
//!   (`Unknown(raw)`), so decoding a byte is total and never panics.
//!
//! The transport uses two entry points in [`frame`]: [`frame::emit`], which builds a
//! frame in place in a TX buffer and writes the payload through a closure, and
//! [`frame::parse`], which turns a received frame into a [`frame::RxFrame`] or a
//! [`frame::DropReason`].

/// Declares an enum over an integer type whose named variants are the values we know,
/// plus `Unknown(raw)` for every other value, so that decoding can never fail.
///
/// `Unknown` is never produced for a value that has a name; building `Unknown(named)`
/// by hand gives a value that encodes like the named variant but is not `==` to it.
macro_rules! enum_with_unknown {
    (
        $(#[$enum_attr:meta])*
        pub enum $name:ident($ty:ty) {
            $(
                $(#[$variant_attr:meta])*
                $variant:ident = $value:expr
            ),+ $(,)?
        }
    ) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $(#[$enum_attr])*
        pub enum $name {
            $(
                $(#[$variant_attr])*
                $variant,
            )+
            /// A value with no name here, kept as received.
            Unknown($ty),
        }

        impl $name {
            /// Decodes a wire value; values without a name become `Unknown`.
            pub const fn from_raw(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant, )+
                    other => $name::Unknown(other),
                }
            }

            /// The wire value.
            pub const fn to_raw(self) -> $ty {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }

        impl ::core::convert::From<$ty> for $name {
            fn from(value: $ty) -> Self {
                $name::from_raw(value)
            }
        }

        impl ::core::convert::From<$name> for $ty {
            fn from(value: $name) -> Self {
                value.to_raw()
            }
        }
    };
}

mod field {
    /// A fixed-size field: a byte range within its header.
    pub type Field = core::ops::Range<usize>;
}

/// Big-endian reads and writes of sub-slices cut with a `field` range. The ranges have
/// the width of the integer, so the indexing here stays in bounds by construction.
mod be {
    pub fn u16(s: &[u8]) -> u16 {
        u16::from_be_bytes([s[0], s[1]])
    }

    pub fn u24(s: &[u8]) -> u32 {
        u32::from_be_bytes([0, s[0], s[1], s[2]])
    }

    pub fn u32(s: &[u8]) -> u32 {
        u32::from_be_bytes([s[0], s[1], s[2], s[3]])
    }

    pub fn u64(s: &[u8]) -> u64 {
        u64::from_be_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]])
    }

    pub fn set_u16(s: &mut [u8], value: u16) {
        s[..2].copy_from_slice(&value.to_be_bytes());
    }

    /// Writes the low 24 bits of `value`; the top byte is dropped on purpose (QPNs, PSNs,
    /// MSNs are 24-bit fields).
    pub fn set_u24(s: &mut [u8], value: u32) {
        s[..3].copy_from_slice(&value.to_be_bytes()[1..]);
    }

    pub fn set_u32(s: &mut [u8], value: u32) {
        s[..4].copy_from_slice(&value.to_be_bytes());
    }

    pub fn set_u64(s: &mut [u8], value: u64) {
        s[..8].copy_from_slice(&value.to_be_bytes());
    }
}

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cm;
pub mod cma_hdr;
pub mod deth;
pub mod ethernet;
pub mod feth;
pub mod frame;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod mad;
pub mod opcode;
pub mod opcode_table;
pub mod psn;
pub mod reth;
pub mod roce;
pub mod sport;
pub mod udp;

pub use self::aeth::{NakCode, Packet as AethPacket, Repr as AethRepr, Syndrome};
pub use self::atomic_ack_eth::{Packet as AtomicAckEthPacket, Repr as AtomicAckEthRepr};
pub use self::atomic_eth::{Packet as AtomicEthPacket, Repr as AtomicEthRepr};
pub use self::bth::{Packet as BthPacket, Repr as BthRepr};
pub use self::deth::{Packet as DethPacket, Repr as DethRepr};
pub use self::ethernet::{EtherType, Packet as EthernetPacket, Repr as EthernetRepr};
pub use self::feth::{Packet as FethPacket, Repr as FethRepr};
pub use self::frame::{DropCounters, DropReason, EmitError, FrameRepr, IpId, IpPath, Path, RxFrame};
pub use self::ieth::{Packet as IethPacket, Repr as IethRepr};
pub use self::immdt::{Packet as ImmDtPacket, Repr as ImmDtRepr};
pub use self::ip::Ecn;
pub use self::ipv4::{Address as Ipv4Address, Packet as Ipv4Packet, Repr as Ipv4Repr};
pub use self::ipv6::{Address as Ipv6Address, Packet as Ipv6Packet, Repr as Ipv6Repr};
pub use self::opcode::{Opcode, Transport};
pub use self::opcode_table::{Direction, Header, OpcodeInfo, Operation, Position, QpTypes};
pub use self::psn::Psn;
pub use self::reth::{Packet as RethPacket, Repr as RethRepr};
pub use self::roce::{ExtHeaders, RoceRepr};
pub use self::udp::{Packet as UdpPacket, ROCE_V2_UDP_PORT, Repr as UdpRepr};
pub use vocab::MacAddr;

/// A header view or parse failed: the buffer is shorter than the header, or a length
/// field in it points past the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error;

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("truncated or malformed header")
    }
}

impl core::error::Error for Error {}

/// Result of the header-level views and reprs.
pub type Result<T> = core::result::Result<T, Error>;
