//! IPv6 header (RFC 8200) as RoCE v2 uses it (annex A17): no extension headers, UDP
//! directly inside, the flow label carrying the QP's flow.

use core::fmt;

use super::field::Field;
use super::ip::{self, Ecn};
use super::{Error, Result, be};

/// An IPv6 address; for RoCE also the GID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Address(pub [u8; 16]);

impl fmt::Display for Address {
    /// Eight groups of hex, uncompressed: unambiguous and short enough for logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks_exact(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:x}", u16::from_be_bytes([pair[0], pair[1]]))?;
        }
        Ok(())
    }
}

/// A read/write view of an IPv6 header and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    /// Version(4) Traffic class(8) Flow label(20).
    pub const VER_TC_FLOW: Field = 0..4;
    pub const PAYLOAD_LEN: Field = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Field = 8..24;
    pub const DST: Field = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::DST.end;
/// Offset of the hop limit, which the ICRC masks along with the traffic class and flow
/// label (the low 28 bits of the first word).
pub const HOP_LIMIT_OFFSET: usize = field::HOP_LIMIT;

const FLOW_LABEL: u32 = 0x000F_FFFF;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking that the header and the payload length fit in it.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds the header and the payload it announces. After
    /// this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len - HEADER_LEN < usize::from(self.payload_len()) { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn first_word(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::VER_TC_FLOW])
    }

    pub fn version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }

    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    pub fn dscp(&self) -> u8 {
        ip::split_traffic_class(self.traffic_class()).0
    }

    pub fn ecn(&self) -> Ecn {
        ip::split_traffic_class(self.traffic_class()).1
    }

    pub fn flow_label(&self) -> u32 {
        self.first_word() & FLOW_LABEL
    }

    /// Length after the fixed header: for RoCE, UDP header through ICRC.
    pub fn payload_len(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::PAYLOAD_LEN])
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    pub fn src_addr(&self) -> Address {
        let mut addr = [0; 16];
        addr.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        Address(addr)
    }

    pub fn dst_addr(&self) -> Address {
        let mut addr = [0; 16];
        addr.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        Address(addr)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload as announced by the payload length; trailing bytes are left out.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 6, the traffic class and the flow label (low 20 bits), which share
    /// the first word.
    pub fn set_first_word(&mut self, dscp: u8, ecn: Ecn, flow_label: u32) {
        let word = (6 << 28) | (u32::from(ip::traffic_class(dscp, ecn)) << 20) | (flow_label & FLOW_LABEL);
        be::set_u32(&mut self.buffer.as_mut()[field::VER_TC_FLOW], word);
    }

    pub fn set_payload_len(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::PAYLOAD_LEN], value);
    }

    pub fn set_next_header(&mut self, value: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = value;
    }

    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    pub fn set_src_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&value.0);
    }

    pub fn set_dst_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&value.0);
    }
}

/// An IPv6 header without extension headers, as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_addr: Address,
    pub dst_addr: Address,
    pub next_header: u8,
    /// Bytes after the header (for RoCE: UDP header through ICRC).
    pub payload_len: usize,
    pub hop_limit: u8,
    /// 6 bits.
    pub dscp: u8,
    pub ecn: Ecn,
    /// 20 bits.
    pub flow_label: u32,
}

impl Repr {
    /// Reads a header; fails on a version other than 6.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            flow_label: packet.flow_label(),
        })
    }

    /// Bytes of header `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into a packet at least `buffer_len()` long. The payload length
    /// saturates at 65535; callers check the length first.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_first_word(self.dscp, self.ecn, self.flow_label);
        packet.set_payload_len(u16::try_from(self.payload_len).unwrap_or(u16::MAX));
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    const HEADER: [u8; 40] = [
        0x6b, 0xa1, 0x23, 0x45, 0x00, 0x10, 0x11, 0x40, // ver 6, TC 0xba, flow 0x12345
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x02, //
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01,
    ];

    fn repr() -> Repr {
        let mut src = [0u8; 16];
        src.copy_from_slice(&HEADER[8..24]);
        let mut dst = [0u8; 16];
        dst.copy_from_slice(&HEADER[24..40]);
        Repr {
            src_addr: Address(src),
            dst_addr: Address(dst),
            next_header: ip::PROTOCOL_UDP,
            payload_len: 16,
            hop_limit: 64,
            dscp: 46,
            ecn: Ecn::Ect0,
            flow_label: 0x12345,
        }
    }

    #[test]
    fn deconstruct() {
        let mut bytes = [0u8; 56];
        bytes[..40].copy_from_slice(&HEADER);
        let packet = Packet::new_checked(&bytes[..]).expect("whole datagram");
        assert_eq!(packet.traffic_class(), 0xba);
        assert_eq!(packet.payload().len(), 16);
        assert_eq!(Repr::parse(&packet), Ok(repr()));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xFFu8; 40];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER);
    }

    #[test]
    fn payload_past_the_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&HEADER[..]), Err(Error));
        assert_eq!(Packet::new_checked(&HEADER[..39]), Err(Error));
    }

    #[test]
    fn display() {
        extern crate alloc;
        use alloc::string::ToString;
        assert_eq!(repr().dst_addr.to_string(), "fe80:0:0:0:5054:ff:fe00:1");
    }
}
