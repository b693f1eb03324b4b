//! Communication management messages (IBA vol. 1 12.6): the class data of CM MADs
//! (management class 0x07, class version 2, method Send), one view and `Repr` per
//! message.
//!
//! Every view here covers the 232 bytes after the MAD common header, and its byte
//! offsets are the spec tables' (106 REQ, 107 MRA, 108 REJ, 110 REP, 111 RTU, 112 DREQ,
//! 113 DREP, 119 SIDR_REQ, 120 SIDR_REP), which count from the end of that header. Each
//! message ends in a private data area that runs to the end of the MAD; the wire carries
//! no length for it, so a parsed `Repr` holds the whole area and an emitted one is
//! zero-padded to it (as Linux sends it).
//!
//! LAP and APR (alternate path) are named but have no codec: Linux refuses them on
//! RoCE, and so do we.

pub mod drep;
pub mod dreq;
pub mod message;
pub mod mra;
pub mod rej;
pub mod rep;
pub mod req;
pub mod rtu;
pub mod sidr_rep;
pub mod sidr_req;

pub use self::drep::DrepRepr;
pub use self::dreq::DreqRepr;
pub use self::message::{CmMad, CmMessage};
pub use self::mra::{MessageMraed, MraRepr};
pub use self::rej::{MessageRejected, RejReason, RejRepr};
pub use self::rep::RepRepr;
pub use self::req::{PathRepr, ReqRepr, TransportType};
pub use self::rtu::RtuRepr;
pub use self::sidr_rep::{SidrRepRepr, SidrStatus};
pub use self::sidr_req::SidrReqRepr;

/// The CM's management class version (IBA 12.6, table 104).
pub const CLASS_VERSION: u8 = 2;

/// Length of every CM message: the MAD's class data.
pub const MESSAGE_LEN: usize = super::mad::DATA_LEN;

enum_with_unknown! {
    /// The attribute ID of a CM MAD: which message it is (IBA 12.6, table 105).
    pub enum AttrId(u16) {
        ClassPortInfo = 0x0001,
        Req = 0x0010,
        Mra = 0x0011,
        Rej = 0x0012,
        Rep = 0x0013,
        Rtu = 0x0014,
        Dreq = 0x0015,
        Drep = 0x0016,
        SidrReq = 0x0017,
        SidrRep = 0x0018,
        Lap = 0x0019,
        Apr = 0x001A,
    }
}

/// Field reads and writes for the CM views. Each takes the view's buffer, already
/// checked to be [`MESSAGE_LEN`] long, and a location that the view's field table fixes
/// at compile time, so indexing stays in bounds.
pub(crate) mod access {
    use super::super::be;

    /// A sub-byte field: the byte and the mask of its bits within it.
    pub mod bits {
        pub fn get(b: &[u8], (at, mask): (usize, u8)) -> u8 {
            (b[at] & mask) >> mask.trailing_zeros()
        }

        /// Writes the low bits of `value` that fit the mask; the byte's other bits stay.
        pub fn set(b: &mut [u8], (at, mask): (usize, u8), value: u8) {
            let shifted = (value << mask.trailing_zeros()) & mask;
            b[at] = (b[at] & !mask) | shifted;
        }
    }

    /// A one-bit flag.
    pub mod flag {
        pub fn get(b: &[u8], (at, mask): (usize, u8)) -> bool {
            b[at] & mask != 0
        }

        pub fn set(b: &mut [u8], (at, mask): (usize, u8), value: bool) {
            if value {
                b[at] |= mask;
            } else {
                b[at] &= !mask;
            }
        }
    }

    pub mod u8 {
        pub fn get(b: &[u8], at: usize) -> u8 {
            b[at]
        }

        pub fn set(b: &mut [u8], at: usize, value: u8) {
            b[at] = value;
        }
    }

    pub mod u16 {
        use super::be;

        pub fn get(b: &[u8], at: usize) -> u16 {
            be::u16(&b[at..at + 2])
        }

        pub fn set(b: &mut [u8], at: usize, value: u16) {
            be::set_u16(&mut b[at..at + 2], value);
        }
    }

    /// A 24-bit field (QPN, EECN, PSN): the top three bytes of a 32-bit word.
    pub mod u24 {
        use super::be;

        pub fn get(b: &[u8], at: usize) -> u32 {
            be::u24(&b[at..at + 3])
        }

        pub fn set(b: &mut [u8], at: usize, value: u32) {
            be::set_u24(&mut b[at..at + 3], value);
        }
    }

    pub mod u32 {
        use super::be;

        pub fn get(b: &[u8], at: usize) -> u32 {
            be::u32(&b[at..at + 4])
        }

        pub fn set(b: &mut [u8], at: usize, value: u32) {
            be::set_u32(&mut b[at..at + 4], value);
        }
    }

    /// A 20-bit flow label: the top 20 bits of a 32-bit word, whose low 12 bits belong
    /// to other fields and are kept.
    pub mod u20 {
        use super::be;

        pub fn get(b: &[u8], at: usize) -> u32 {
            be::u32(&b[at..at + 4]) >> 12
        }

        pub fn set(b: &mut [u8], at: usize, value: u32) {
            let low = be::u32(&b[at..at + 4]) & 0xFFF;
            be::set_u32(&mut b[at..at + 4], ((value & 0xF_FFFF) << 12) | low);
        }
    }

    pub mod u64 {
        use super::be;

        pub fn get(b: &[u8], at: usize) -> u64 {
            be::u64(&b[at..at + 8])
        }

        pub fn set(b: &mut [u8], at: usize, value: u64) {
            be::set_u64(&mut b[at..at + 8], value);
        }
    }

    /// A 128-bit GID, kept as its 16 bytes in network order.
    pub mod gid {
        pub fn get(b: &[u8], at: usize) -> [u8; 16] {
            let mut g = [0u8; 16];
            g.copy_from_slice(&b[at..at + 16]);
            g
        }

        pub fn set(b: &mut [u8], at: usize, value: [u8; 16]) {
            b[at..at + 16].copy_from_slice(&value);
        }
    }
}

/// Declares a CM message view: `Packet<T>` over the 232 class-data bytes, a getter and
/// a setter per field (the field's kind names its [`access`] module and its location),
/// and the private data area from `$private` to the end.
macro_rules! cm_packet {
    (
        private: $private:expr;
        $( $(#[$doc:meta])* $get:ident, $set:ident: $ty:ty = $kind:ident $loc:expr; )*
    ) => {
        /// A read/write view of this message's 232 bytes of MAD class data.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        /// Offset of the private data area; it runs to the end of the message.
        pub const PRIVATE_DATA_OFFSET: usize = $private;
        /// Room for private data.
        pub const PRIVATE_DATA_LEN: usize = $crate::wire::cm::MESSAGE_LEN - $private;

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Wraps a buffer without checking its length.
            pub const fn new_unchecked(buffer: T) -> Packet<T> {
                Packet { buffer }
            }

            /// Wraps a buffer, checking it holds the whole message.
            pub fn new_checked(buffer: T) -> $crate::wire::Result<Packet<T>> {
                let packet = Self::new_unchecked(buffer);
                packet.check_len()?;
                Ok(packet)
            }

            /// Fails unless the buffer holds the whole message (232 bytes); after this
            /// no getter panics.
            pub fn check_len(&self) -> $crate::wire::Result<()> {
                if self.buffer.as_ref().len() < $crate::wire::cm::MESSAGE_LEN {
                    Err($crate::wire::Error)
                } else {
                    Ok(())
                }
            }

            /// Returns the underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            $(
                $(#[$doc])*
                pub fn $get(&self) -> $ty {
                    $crate::wire::cm::access::$kind::get(self.buffer.as_ref(), $loc)
                }
            )*

            /// The whole private data area.
            pub fn private_data(&self) -> &[u8] {
                &self.buffer.as_ref()[$private..$crate::wire::cm::MESSAGE_LEN]
            }
        }

        impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
            /// The whole private data area, borrowed for as long as the buffer is (what
            /// a `Repr` keeps).
            pub fn private_data_in(&self) -> &'a [u8] {
                let buffer: &'a T = self.buffer;
                &buffer.as_ref()[$private..$crate::wire::cm::MESSAGE_LEN]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            $(
                pub fn $set(&mut self, value: $ty) {
                    $crate::wire::cm::access::$kind::set(self.buffer.as_mut(), $loc, value)
                }
            )*

            /// Copies `data` to the start of the private data area and zeroes the rest
            /// of it; fails, writing nothing, when `data` does not fit.
            pub fn set_private_data(&mut self, data: &[u8]) -> $crate::wire::Result<()> {
                let area = &mut self.buffer.as_mut()[$private..$crate::wire::cm::MESSAGE_LEN];
                if data.len() > area.len() {
                    return Err($crate::wire::Error);
                }
                let (head, tail) = area.split_at_mut(data.len());
                head.copy_from_slice(data);
                tail.fill(0);
                Ok(())
            }

            /// Zeroes the whole message, reserved bytes included, before fields are set.
            pub fn clear(&mut self) {
                self.buffer.as_mut()[..$crate::wire::cm::MESSAGE_LEN].fill(0);
            }
        }
    };
}

pub(crate) use cm_packet;
