//! Atomic Extended Transport Header (IBA vol. 1 9.3): target address, R_Key and operands
//! of a COMPARE SWAP or FETCH ADD.

use super::field::Field;
use super::{Error, Result, be};

/// A read/write view of an AtomicETH at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const SWAP_ADD: Field = 12..20;
    pub const COMPARE: Field = 20..28;
}

/// Length of an AtomicETH.
pub const HEADER_LEN: usize = field::COMPARE.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold an AtomicETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole AtomicETH; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Remote address of the 8-byte target.
    pub fn va(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::VA])
    }

    pub fn rkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::RKEY])
    }

    /// The value to store (COMPARE SWAP) or to add (FETCH ADD).
    pub fn swap_add(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::SWAP_ADD])
    }

    /// The value to compare with (COMPARE SWAP; unused by FETCH ADD).
    pub fn compare(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::COMPARE])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_va(&mut self, value: u64) {
        be::set_u64(&mut self.buffer.as_mut()[field::VA], value);
    }

    pub fn set_rkey(&mut self, value: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::RKEY], value);
    }

    pub fn set_swap_add(&mut self, value: u64) {
        be::set_u64(&mut self.buffer.as_mut()[field::SWAP_ADD], value);
    }

    pub fn set_compare(&mut self, value: u64) {
        be::set_u64(&mut self.buffer.as_mut()[field::COMPARE], value);
    }
}

/// An AtomicETH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub va: u64,
    pub rkey: u32,
    pub swap_add: u64,
    pub compare: u64,
}

impl Repr {
    /// Reads an AtomicETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { va: packet.va(), rkey: packet.rkey(), swap_add: packet.swap_add(), compare: packet.compare() })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the AtomicETH into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_swap_add(self.swap_add);
        packet.set_compare(self.compare);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // AtomicETH of a captured FETCH ADD of 1.
    const FETCH_ADD_1: [u8; 28] = [
        0x00, 0x00, 0x55, 0xf4, 0x55, 0x54, 0xd0, 0x00, 0x00, 0x00, 0x08, 0x29, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    const REPR: Repr = Repr { va: 0x0000_55f4_5554_d000, rkey: 0x829, swap_add: 1, compare: 0 };

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&FETCH_ADD_1[..]).expect("28 bytes");
        assert_eq!(Repr::parse(&packet), Ok(REPR));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xFFu8; HEADER_LEN];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, FETCH_ADD_1);
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&FETCH_ADD_1[..27]), Err(Error));
    }
}
