//! Invalidate Extended Transport Header (IBA vol. 1 9.3): the R_Key a SEND WITH
//! INVALIDATE asks the responder to invalidate.

use super::field::Field;
use super::{Error, Result, be};

/// A read/write view of an IETH at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const RKEY: Field = 0..4;
}

/// Length of an IETH.
pub const HEADER_LEN: usize = field::RKEY.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold an IETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole IETH; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn rkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::RKEY])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_rkey(&mut self, value: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::RKEY], value);
    }
}

/// An IETH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub rkey: u32,
}

impl Repr {
    /// Reads an IETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { rkey: packet.rkey() })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the IETH into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_rkey(self.rkey);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    const BYTES: [u8; 4] = [0x00, 0x01, 0x23, 0x45];

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&BYTES[..]).expect("4 bytes");
        assert_eq!(Repr::parse(&packet), Ok(Repr { rkey: 0x12345 }));
    }

    #[test]
    fn construct() {
        let mut bytes = [0u8; HEADER_LEN];
        Repr { rkey: 0x12345 }.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, BYTES);
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&BYTES[..3]), Err(Error));
    }
}
