//! UDP header (RFC 768) as the RoCE v2 encapsulation (annex A17) uses it: destination
//! port 4791, a per-flow source port, and a zero checksum since the ICRC protects the
//! packet.

use super::field::Field;
use super::{Error, Result, be};

pub use vocab::ROCE_V2_UDP_PORT;

/// A read/write view of a UDP header and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
}

/// Length of a UDP header.
pub const HEADER_LEN: usize = field::CHECKSUM.end;
/// Offset of the checksum, which the ICRC masks to ones.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking that the header and the announced length fit.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds the header and the length field is between the
    /// header length and the buffer length. After this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error);
        }
        let field_len = usize::from(self.length());
        if field_len < HEADER_LEN || field_len > len { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn src_port(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::SRC_PORT])
    }

    pub fn dst_port(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::DST_PORT])
    }

    /// Length of header and payload.
    pub fn length(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::LENGTH])
    }

    pub fn checksum(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::CHECKSUM])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload, up to the length field.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.length())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::SRC_PORT], value);
    }

    pub fn set_dst_port(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::DST_PORT], value);
    }

    pub fn set_length(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::LENGTH], value);
    }

    pub fn set_checksum(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::CHECKSUM], value);
    }
}

/// A UDP header as plain values. The checksum is not kept: RoCE v2 sends zero and the
/// receiver relies on the ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Bytes after the header.
    pub payload_len: usize,
}

impl Repr {
    /// Reads a header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.length()) - HEADER_LEN,
        })
    }

    /// Bytes of header `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with a zero checksum into a packet at least `buffer_len()`
    /// long. The length saturates at 65535; callers check the length first.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_length(u16::try_from(HEADER_LEN.saturating_add(self.payload_len)).unwrap_or(u16::MAX));
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // UDP header of the first rc_send_small frame: 49441 -> 4791, length 88, checksum 0.
    const HEADER: [u8; 8] = [0xc1, 0x21, 0x12, 0xb7, 0x00, 0x58, 0x00, 0x00];

    const REPR: Repr = Repr { src_port: 49441, dst_port: ROCE_V2_UDP_PORT, payload_len: 80 };

    #[test]
    fn deconstruct() {
        let mut bytes = [0u8; 88];
        bytes[..8].copy_from_slice(&HEADER);
        let packet = Packet::new_checked(&bytes[..]).expect("whole datagram");
        assert_eq!(packet.checksum(), 0);
        assert_eq!(packet.payload().len(), 80);
        assert_eq!(Repr::parse(&packet), Ok(REPR));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xFFu8; 8];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER);
    }

    #[test]
    fn bad_lengths_are_rejected() {
        assert_eq!(Packet::new_checked(&HEADER[..]), Err(Error));
        let mut bytes = HEADER;
        bytes[5] = 7;
        assert_eq!(Packet::new_checked(&bytes[..]), Err(Error));
    }
}
