//! ACK Extended Transport Header (IBA vol. 1 9.3; its use in the ACK protocol of 9.7): what a
//! responder says about a request (ACK with credits, RNR NAK with a timer, NAK with an
//! error code) and its message sequence number.

use super::field::Field;
use super::{Error, Result, be};

/// A read/write view of an AETH at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const SYNDROME: usize = 0;
    pub const MSN: Field = 1..4;
}

/// Length of an AETH.
pub const HEADER_LEN: usize = field::MSN.end;

enum_with_unknown! {
    /// Why a responder refused a request.
    pub enum NakCode(u8) {
        /// The request's PSN was not the expected one: resend from the expected PSN.
        PsnSequenceError = 0,
        InvalidRequest = 1,
        RemoteAccessError = 2,
        RemoteOperationalError = 3,
        /// Reliable Datagram only.
        InvalidRdRequest = 4,
    }
}

/// The AETH syndrome byte. Decoding is total and lossless: every byte maps to a variant
/// and encodes back to itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with a 5-bit credit code (see [`credit_count`]);
    /// [`NO_CREDIT`] says the responder does not track credits.
    Ack { credit: u8 },
    /// Receiver not ready: retry after the 5-bit timer code (see [`rnr_timer_micros`]).
    RnrNak { timer: u8 },
    /// Negative acknowledgement. The code is 5 bits; values above 4 are reserved.
    Nak(NakCode),
    /// A reserved encoding (type 0b10, or the top bit set), kept as the raw byte.
    Reserved(u8),
}

/// The credit code that means "no credit information", as rxe and most RC responders
/// without receive-queue flow control send.
pub const NO_CREDIT: u8 = 0x1F;

const TYPE_SHIFT: u8 = 5;
const VALUE_MASK: u8 = 0x1F;
const TYPE_ACK: u8 = 0b00;
const TYPE_RNR_NAK: u8 = 0b01;
const TYPE_NAK: u8 = 0b11;

impl Syndrome {
    /// An ACK without credit information.
    pub const ACK: Syndrome = Syndrome::Ack { credit: NO_CREDIT };

    pub const fn from_byte(byte: u8) -> Syndrome {
        if byte & 0x80 != 0 {
            return Syndrome::Reserved(byte);
        }
        let value = byte & VALUE_MASK;
        match byte >> TYPE_SHIFT {
            TYPE_ACK => Syndrome::Ack { credit: value },
            TYPE_RNR_NAK => Syndrome::RnrNak { timer: value },
            TYPE_NAK => Syndrome::Nak(NakCode::from_raw(value)),
            _ => Syndrome::Reserved(byte),
        }
    }

    /// The wire byte. Out-of-range values (credit or timer above 31) keep their low 5
    /// bits.
    pub const fn to_byte(self) -> u8 {
        match self {
            Syndrome::Ack { credit } => (TYPE_ACK << TYPE_SHIFT) | (credit & VALUE_MASK),
            Syndrome::RnrNak { timer } => (TYPE_RNR_NAK << TYPE_SHIFT) | (timer & VALUE_MASK),
            Syndrome::Nak(code) => (TYPE_NAK << TYPE_SHIFT) | (code.to_raw() & VALUE_MASK),
            Syndrome::Reserved(byte) => byte,
        }
    }

    /// Whether this is a positive acknowledgement.
    pub const fn is_ack(self) -> bool {
        matches!(self, Syndrome::Ack { .. })
    }
}

/// The number of receive credits an ACK credit code grants, or `None` for
/// [`NO_CREDIT`]. The codes step by powers of two and one and a half times powers of
/// two (the AETH credit count encoding of IBA vol. 1 9.7): 0, 1, 2, 3, 4, 6, 8, 12, ... 32768.
pub const fn credit_count(code: u8) -> Option<u32> {
    let code = code & VALUE_MASK;
    if code == NO_CREDIT {
        None
    } else if code <= 4 {
        Some(code as u32)
    } else {
        // From code 4 on, even codes are 2^(code/2) and odd codes 1.5 times the even
        // code just below.
        let base = 1u32 << (code / 2);
        Some(if code % 2 == 1 { base + base / 2 } else { base })
    }
}

/// The RNR NAK timer codes in microseconds (the minimum RNR NAK timer field encoding of
/// IBA vol. 1 9.7). Code 0 is the longest wait, 655.36 ms.
const RNR_TIMER_MICROS: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840, 5_120, 7_680,
    10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760, 327_680, 491_520,
];

/// The minimum wait an RNR NAK timer code asks for, in microseconds (low 5 bits used).
pub const fn rnr_timer_micros(code: u8) -> u32 {
    RNR_TIMER_MICROS[(code & VALUE_MASK) as usize]
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold an AETH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole AETH; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_byte(self.buffer.as_ref()[field::SYNDROME])
    }

    /// Message sequence number: how many messages the responder has completed (24 bits).
    pub fn msn(&self) -> u32 {
        be::u24(&self.buffer.as_ref()[field::MSN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_syndrome(&mut self, value: Syndrome) {
        self.buffer.as_mut()[field::SYNDROME] = value.to_byte();
    }

    /// Sets the MSN from the low 24 bits of `value`.
    pub fn set_msn(&mut self, value: u32) {
        be::set_u24(&mut self.buffer.as_mut()[field::MSN], value);
    }
}

/// An AETH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub syndrome: Syndrome,
    /// 24 bits.
    pub msn: u32,
}

impl Repr {
    /// Reads an AETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { syndrome: packet.syndrome(), msn: packet.msn() })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the AETH into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_syndrome(self.syndrome);
        packet.set_msn(self.msn);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // AETH of a captured rxe ACK: no credit information, MSN 1.
    const ACK_MSN_1: [u8; 4] = [0x1f, 0x00, 0x00, 0x01];

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&ACK_MSN_1[..]).expect("4 bytes");
        assert_eq!(packet.syndrome(), Syndrome::ACK);
        assert_eq!(packet.msn(), 1);
        assert_eq!(Repr::parse(&packet), Ok(Repr { syndrome: Syndrome::ACK, msn: 1 }));
    }

    #[test]
    fn construct() {
        let mut bytes = [0u8; HEADER_LEN];
        let repr = Repr { syndrome: Syndrome::ACK, msn: 1 };
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, ACK_MSN_1);
    }

    #[test]
    fn syndrome_encodings() {
        assert_eq!(Syndrome::from_byte(0x00), Syndrome::Ack { credit: 0 });
        assert_eq!(Syndrome::from_byte(0x2E), Syndrome::RnrNak { timer: 14 });
        assert_eq!(Syndrome::from_byte(0x60), Syndrome::Nak(NakCode::PsnSequenceError));
        assert_eq!(Syndrome::from_byte(0x61), Syndrome::Nak(NakCode::InvalidRequest));
        assert_eq!(Syndrome::from_byte(0x62), Syndrome::Nak(NakCode::RemoteAccessError));
        assert_eq!(Syndrome::from_byte(0x63), Syndrome::Nak(NakCode::RemoteOperationalError));
        assert_eq!(Syndrome::from_byte(0x64), Syndrome::Nak(NakCode::InvalidRdRequest));
        assert_eq!(Syndrome::from_byte(0x65), Syndrome::Nak(NakCode::Unknown(5)));
        assert_eq!(Syndrome::from_byte(0x41), Syndrome::Reserved(0x41));
        assert_eq!(Syndrome::from_byte(0x9F), Syndrome::Reserved(0x9F));
    }

    #[test]
    fn syndrome_is_lossless() {
        for byte in 0..=u8::MAX {
            assert_eq!(Syndrome::from_byte(byte).to_byte(), byte);
        }
    }

    #[test]
    fn credits() {
        let decoded: [Option<u32>; 8] = core::array::from_fn(|c| credit_count(c as u8));
        assert_eq!(decoded, [0, 1, 2, 3, 4, 6, 8, 12].map(Some), "the small codes");
        assert_eq!(credit_count(29), Some(24_576));
        assert_eq!(credit_count(30), Some(32_768));
        assert_eq!(credit_count(NO_CREDIT), None);
    }

    #[test]
    fn rnr_timer() {
        assert_eq!(rnr_timer_micros(0), 655_360);
        assert_eq!(rnr_timer_micros(1), 10);
        assert_eq!(rnr_timer_micros(14), 1_280);
        assert_eq!(rnr_timer_micros(31), 491_520);
        // Codes 1.. grow monotonically.
        for code in 2..32u8 {
            assert!(rnr_timer_micros(code) > rnr_timer_micros(code - 1));
        }
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&ACK_MSN_1[..3]), Err(Error));
    }
}
