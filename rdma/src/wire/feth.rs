//! FLUSH Extended Transport Header (IBA 1.5, annex A19 "memory placement
//! extensions"; Linux `rxe_hdr.h`): what a FLUSH asks to be made placed. One
//! big-endian word: bits 3..0 the placement type, bits 5..4 the selectivity
//! level, the rest reserved (sent as zero, ignored on receipt).

use super::field::Field;
use super::{Error, Result, be};

/// Placement type bit: make the data globally visible.
pub const PLT_GLOBAL_VISIBILITY: u8 = 1 << 0;
/// Placement type bit: make the data persistent.
pub const PLT_PERSISTENCE: u8 = 1 << 1;
/// Selectivity level: the range the RETH names.
pub const SEL_MR_RANGE: u8 = 0;
/// Selectivity level: the whole MR the RETH's R_Key names.
pub const SEL_MR_WHOLE: u8 = 1;

const PLT_MASK: u32 = 0x0F;
const SEL_SHIFT: u32 = 4;
const SEL_MASK: u32 = 0x30;

/// A read/write view of a FETH at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const BITS: Field = 0..4;
}

/// Length of a FETH.
pub const HEADER_LEN: usize = field::BITS.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold a FETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole FETH; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn bits(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::BITS])
    }

    /// The placement type (bits 3..0).
    pub fn placement_type(&self) -> u8 {
        (self.bits() & PLT_MASK) as u8
    }

    /// The selectivity level (bits 5..4).
    pub fn selectivity_level(&self) -> u8 {
        ((self.bits() & SEL_MASK) >> SEL_SHIFT) as u8
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets both fields; the reserved bits become zero.
    pub fn set_fields(&mut self, placement_type: u8, selectivity_level: u8) {
        let bits = u32::from(placement_type) & PLT_MASK | (u32::from(selectivity_level) << SEL_SHIFT) & SEL_MASK;
        be::set_u32(&mut self.buffer.as_mut()[field::BITS], bits);
    }
}

/// A FETH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub placement_type: u8,
    pub selectivity_level: u8,
}

impl Repr {
    /// Reads a FETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { placement_type: packet.placement_type(), selectivity_level: packet.selectivity_level() })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the FETH into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_fields(self.placement_type, self.selectivity_level);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    const BYTES: [u8; 4] = [0x00, 0x00, 0x00, 0x11];

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&BYTES[..]).expect("4 bytes");
        assert_eq!(
            Repr::parse(&packet),
            Ok(Repr { placement_type: PLT_GLOBAL_VISIBILITY, selectivity_level: SEL_MR_WHOLE })
        );
    }

    #[test]
    fn reserved_bits_are_ignored_and_not_sent() {
        let noisy = [0xFF, 0xFF, 0xFF, 0xC2];
        let r = Repr::parse(&Packet::new_checked(&noisy[..]).expect("4 bytes")).expect("parses");
        assert_eq!(r, Repr { placement_type: PLT_PERSISTENCE, selectivity_level: SEL_MR_RANGE });
        let mut bytes = [0xAAu8; HEADER_LEN];
        Repr { placement_type: 0xFF, selectivity_level: 0xFF }.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, [0, 0, 0, 0x3F]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0u8; HEADER_LEN];
        Repr { placement_type: PLT_GLOBAL_VISIBILITY, selectivity_level: SEL_MR_WHOLE }
            .emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, BYTES);
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&BYTES[..3]), Err(Error));
    }
}
