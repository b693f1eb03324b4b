//! Immediate Data header (IBA vol. 1 9.3): four opaque bytes that a SEND or RDMA WRITE
//! with immediate hands to the receiver's completion.

use super::field::Field;
use super::{Error, Result, be};

/// A read/write view of an ImmDt at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const IMM: Field = 0..4;
}

/// Length of an ImmDt.
pub const HEADER_LEN: usize = field::IMM.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold an ImmDt.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole ImmDt; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The immediate data read as a big-endian integer, i.e. the four wire bytes in
    /// order; verbs hand it to the application in network byte order.
    pub fn imm(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::IMM])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_imm(&mut self, value: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::IMM], value);
    }
}

/// An ImmDt as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub imm: u32,
}

impl Repr {
    /// Reads an ImmDt.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { imm: packet.imm() })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the ImmDt into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_imm(self.imm);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    const BYTES: [u8; 4] = [0xde, 0xad, 0xbe, 0xef];

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&BYTES[..]).expect("4 bytes");
        assert_eq!(Repr::parse(&packet), Ok(Repr { imm: 0xdead_beef }));
    }

    #[test]
    fn construct() {
        let mut bytes = [0u8; HEADER_LEN];
        Repr { imm: 0xdead_beef }.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, BYTES);
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&BYTES[..3]), Err(Error));
    }
}
