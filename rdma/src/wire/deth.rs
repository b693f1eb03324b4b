//! Datagram Extended Transport Header (IBA vol. 1 9.3): the Q_Key that authorises a UD
//! packet and the QP that sent it, so the receiver can answer.

use super::field::Field;
use super::{Error, Result, be};

/// A read/write view of a DETH at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const QKEY: Field = 0..4;
    pub const RESERVED: usize = 4;
    pub const SRC_QP: Field = 5..8;
}

/// Length of a DETH.
pub const HEADER_LEN: usize = field::SRC_QP.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold a DETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole DETH; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn qkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::QKEY])
    }

    /// Source QP number (24 bits).
    pub fn src_qpn(&self) -> u32 {
        be::u24(&self.buffer.as_ref()[field::SRC_QP])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_qkey(&mut self, value: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::QKEY], value);
    }

    /// Sets the source QP from the low 24 bits of `value`, and clears the reserved byte
    /// before it.
    pub fn set_src_qpn(&mut self, value: u32) {
        let data = self.buffer.as_mut();
        data[field::RESERVED] = 0;
        be::set_u24(&mut data[field::SRC_QP], value);
    }
}

/// A DETH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub qkey: u32,
    /// 24 bits.
    pub src_qpn: u32,
}

impl Repr {
    /// Reads a DETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { qkey: packet.qkey(), src_qpn: packet.src_qpn() })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the DETH into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_qkey(self.qkey);
        packet.set_src_qpn(self.src_qpn);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // DETH of the captured UD SEND ONLY: Q_Key 0x11111111 from QP 0x19.
    const UD_SEND: [u8; 8] = [0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x19];

    const REPR: Repr = Repr { qkey: 0x1111_1111, src_qpn: 0x19 };

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&UD_SEND[..]).expect("8 bytes");
        assert_eq!(Repr::parse(&packet), Ok(REPR));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xFFu8; HEADER_LEN];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, UD_SEND);
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&UD_SEND[..7]), Err(Error));
    }
}
