//! Base Transport Header (IBA vol. 1 9.2): the 12 bytes every RoCE packet starts with.

use super::field::Field;
use super::opcode::Opcode;
use super::psn::Psn;
use super::{Error, Result, be};

/// A read/write view of a BTH at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const OPCODE: usize = 0;
    /// SE(1) M(1) PadCnt(2) TVer(4).
    pub const FLAGS: usize = 1;
    pub const PKEY: Field = 2..4;
    /// FECN(1) BECN(1) Resv6a(6). The whole byte is masked in the ICRC.
    pub const CONGESTION: usize = 4;
    pub const DEST_QP: Field = 5..8;
    /// AckReq(1) Resv7(7).
    pub const ACK_REQ: usize = 8;
    pub const PSN: Field = 9..12;
}

/// Length of a BTH.
pub const HEADER_LEN: usize = field::PSN.end;
/// Offset of the byte the ICRC masks (FECN, BECN and the reserved bits).
pub const VARIANT_BYTE: usize = field::CONGESTION;

const SE: u8 = 0x80;
const MIG_REQ: u8 = 0x40;
const PAD_SHIFT: u8 = 4;
const PAD_MASK: u8 = 0x30;
const TVER_MASK: u8 = 0x0F;
const FECN: u8 = 0x80;
const BECN: u8 = 0x40;
const ACK_REQ: u8 = 0x80;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold a BTH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole BTH; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn opcode(&self) -> Opcode {
        Opcode::from_raw(self.buffer.as_ref()[field::OPCODE])
    }

    /// Solicited event: the receiver should raise a completion event.
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & SE != 0
    }

    /// MigReq: the automatic path migration state bit.
    pub fn mig_req(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & MIG_REQ != 0
    }

    /// Pad count: bytes added after the payload to reach a multiple of four.
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] & PAD_MASK) >> PAD_SHIFT
    }

    /// Transport header version; 0 is the only one defined.
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & TVER_MASK
    }

    pub fn pkey(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::PKEY])
    }

    /// Forward explicit congestion notification (IB links; RoCE uses the IP ECN field).
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::CONGESTION] & FECN != 0
    }

    /// Backward explicit congestion notification.
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::CONGESTION] & BECN != 0
    }

    /// Destination QP number (24 bits).
    pub fn dest_qpn(&self) -> u32 {
        be::u24(&self.buffer.as_ref()[field::DEST_QP])
    }

    /// The requester asks for an acknowledgement of this packet.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & ACK_REQ != 0
    }

    pub fn psn(&self) -> Psn {
        Psn::new(be::u24(&self.buffer.as_ref()[field::PSN]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_opcode(&mut self, value: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = value.to_raw();
    }

    /// Sets SE, M, PadCnt (low 2 bits used) and TVer (low 4 bits used) at once: they share
    /// a byte, and a frame writes them together.
    pub fn set_flags(&mut self, solicited: bool, mig_req: bool, pad_count: u8, tver: u8) {
        let mut byte = ((pad_count << PAD_SHIFT) & PAD_MASK) | (tver & TVER_MASK);
        if solicited {
            byte |= SE;
        }
        if mig_req {
            byte |= MIG_REQ;
        }
        self.buffer.as_mut()[field::FLAGS] = byte;
    }

    pub fn set_pad_count(&mut self, value: u8) {
        let byte = &mut self.buffer.as_mut()[field::FLAGS];
        *byte = (*byte & !PAD_MASK) | ((value << PAD_SHIFT) & PAD_MASK);
    }

    pub fn set_pkey(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::PKEY], value);
    }

    /// Sets FECN and BECN and clears the reserved bits that share their byte.
    pub fn set_congestion(&mut self, fecn: bool, becn: bool) {
        let mut byte = 0;
        if fecn {
            byte |= FECN;
        }
        if becn {
            byte |= BECN;
        }
        self.buffer.as_mut()[field::CONGESTION] = byte;
    }

    /// Sets the destination QP from the low 24 bits of `value`.
    pub fn set_dest_qpn(&mut self, value: u32) {
        be::set_u24(&mut self.buffer.as_mut()[field::DEST_QP], value);
    }

    /// Sets AckReq and clears the reserved bits that share its byte.
    pub fn set_ack_req(&mut self, value: bool) {
        self.buffer.as_mut()[field::ACK_REQ] = if value { ACK_REQ } else { 0 };
    }

    pub fn set_psn(&mut self, value: Psn) {
        be::set_u24(&mut self.buffer.as_mut()[field::PSN], value.value());
    }
}

/// A BTH as plain values. Reserved bits are not kept: they are emitted as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub opcode: Opcode,
    pub solicited: bool,
    pub mig_req: bool,
    /// 0..=3. When a whole frame is emitted, the frame builder sets it from the payload.
    pub pad_count: u8,
    /// 0..=15; only 0 is valid on the wire, and the frame parser drops anything else.
    pub tver: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    /// 24 bits.
    pub dest_qpn: u32,
    pub ack_req: bool,
    pub psn: Psn,
}

impl Repr {
    /// Reads a BTH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            opcode: packet.opcode(),
            solicited: packet.solicited(),
            mig_req: packet.mig_req(),
            pad_count: packet.pad_count(),
            tver: packet.tver(),
            pkey: packet.pkey(),
            fecn: packet.fecn(),
            becn: packet.becn(),
            dest_qpn: packet.dest_qpn(),
            ack_req: packet.ack_req(),
            psn: packet.psn(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the BTH into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_opcode(self.opcode);
        packet.set_flags(self.solicited, self.mig_req, self.pad_count, self.tver);
        packet.set_pkey(self.pkey);
        packet.set_congestion(self.fecn, self.becn);
        packet.set_dest_qpn(self.dest_qpn);
        packet.set_ack_req(self.ack_req);
        packet.set_psn(self.psn);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // BTH of the first rc_send_small frame: SEND ONLY, P_Key 0xFFFF, QP 0x11, AckReq,
    // PSN 0x80545a.
    const SEND_ONLY: [u8; 12] = [0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x80, 0x54, 0x5a];

    fn send_only_repr() -> Repr {
        Repr {
            opcode: Opcode::RcSendOnly,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: 0xFFFF,
            fecn: false,
            becn: false,
            dest_qpn: 0x11,
            ack_req: true,
            psn: Psn::new(0x80545a),
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&SEND_ONLY[..]).expect("12 bytes");
        assert_eq!(packet.opcode(), Opcode::RcSendOnly);
        assert_eq!(packet.pkey(), 0xFFFF);
        assert_eq!(packet.dest_qpn(), 0x11);
        assert!(packet.ack_req());
        assert_eq!(packet.psn(), Psn::new(0x80545a));
        assert_eq!(Repr::parse(&packet), Ok(send_only_repr()));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xA5u8; 12];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        send_only_repr().emit(&mut packet);
        assert_eq!(bytes, SEND_ONLY);
    }

    #[test]
    fn flag_bits() {
        let mut bytes = [0u8; 12];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_flags(true, true, 3, 0xF);
        packet.set_congestion(true, true);
        assert_eq!(bytes[1], 0xFF);
        assert_eq!(bytes[4], 0xC0);
        let packet = Packet::new_unchecked(&bytes[..]);
        assert!(packet.solicited() && packet.mig_req() && packet.fecn() && packet.becn());
        assert_eq!((packet.pad_count(), packet.tver()), (3, 15));
    }

    #[test]
    fn set_pad_count_keeps_other_flags() {
        let mut bytes = SEND_ONLY;
        bytes[1] = 0xC5;
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_pad_count(2);
        assert_eq!(bytes[1], 0xE5);
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&SEND_ONLY[..11]), Err(Error));
    }
}
