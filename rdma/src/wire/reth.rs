//! RDMA Extended Transport Header (IBA vol. 1 9.3): where an RDMA WRITE or READ goes
//! (virtual address, R_Key) and how many bytes the whole operation moves.

use super::field::Field;
use super::{Error, Result, be};

/// A read/write view of a RETH at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const DMA_LEN: Field = 12..16;
}

/// Length of a RETH.
pub const HEADER_LEN: usize = field::DMA_LEN.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold a RETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole RETH; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn va(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::VA])
    }

    pub fn rkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::RKEY])
    }

    /// Length of the whole RDMA operation, not of this packet's payload.
    pub fn dma_len(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::DMA_LEN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_va(&mut self, value: u64) {
        be::set_u64(&mut self.buffer.as_mut()[field::VA], value);
    }

    pub fn set_rkey(&mut self, value: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::RKEY], value);
    }

    pub fn set_dma_len(&mut self, value: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::DMA_LEN], value);
    }
}

/// A RETH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

impl Repr {
    /// Reads a RETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { va: packet.va(), rkey: packet.rkey(), dma_len: packet.dma_len() })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the RETH into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_dma_len(self.dma_len);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // RETH of a captured RDMA READ REQUEST for 3000 bytes.
    const READ_3000: [u8; 16] =
        [0x00, 0x00, 0x56, 0x20, 0x83, 0x15, 0x20, 0x00, 0x00, 0x00, 0x07, 0x5c, 0x00, 0x00, 0x0b, 0xb8];

    const REPR: Repr = Repr { va: 0x0000_5620_8315_2000, rkey: 0x75c, dma_len: 3000 };

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&READ_3000[..]).expect("16 bytes");
        assert_eq!(packet.va(), REPR.va);
        assert_eq!(packet.rkey(), REPR.rkey);
        assert_eq!(packet.dma_len(), REPR.dma_len);
        assert_eq!(Repr::parse(&packet), Ok(REPR));
    }

    #[test]
    fn construct() {
        let mut bytes = [0u8; HEADER_LEN];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, READ_3000);
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&READ_3000[..15]), Err(Error));
    }
}
