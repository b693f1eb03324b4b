//! Atomic Acknowledge Extended Transport Header (IBA vol. 1 9.3): the value the target
//! held before a COMPARE SWAP or FETCH ADD.

use super::field::Field;
use super::{Error, Result, be};

/// A read/write view of an AtomicAckETH at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const ORIG: Field = 0..8;
}

/// Length of an AtomicAckETH.
pub const HEADER_LEN: usize = field::ORIG.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold an AtomicAckETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole AtomicAckETH; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The target's value before the atomic operation.
    pub fn orig(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::ORIG])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_orig(&mut self, value: u64) {
        be::set_u64(&mut self.buffer.as_mut()[field::ORIG], value);
    }
}

/// An AtomicAckETH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub orig: u64,
}

impl Repr {
    /// Reads an AtomicAckETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { orig: packet.orig() })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the AtomicAckETH into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_orig(self.orig);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // AtomicAckETH of a captured ATOMIC ACKNOWLEDGE.
    const BYTES: [u8; 8] = [0x7a, 0xf3, 0x97, 0x4a, 0x67, 0x40, 0x1c, 0x7f];

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&BYTES[..]).expect("8 bytes");
        assert_eq!(Repr::parse(&packet), Ok(Repr { orig: 0x7af3_974a_6740_1c7f }));
    }

    #[test]
    fn construct() {
        let mut bytes = [0u8; HEADER_LEN];
        Repr { orig: 0x7af3_974a_6740_1c7f }.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, BYTES);
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&BYTES[..7]), Err(Error));
    }
}
