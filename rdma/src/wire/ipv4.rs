//! IPv4 header (RFC 791) as RoCE v2 uses it (annex A17): no options, DF set, UDP inside.

use core::fmt;

use super::field::Field;
use super::ip::{self, Ecn};
use super::{Error, Result, be};

/// An IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Address(pub [u8; 4]);

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

/// A read/write view of an IPv4 header and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    pub const FLAGS_FRAG: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC: Field = 12..16;
    pub const DST: Field = 16..20;
}

/// Length of an IPv4 header without options: the only length RoCE v2 frames use.
pub const HEADER_LEN: usize = field::DST.end;
/// The longest header, options included: IHL counts at most 15 words.
pub const MAX_HEADER_LEN: usize = 15 * 4;
/// Offsets the ICRC masks to ones: TOS, TTL and the header checksum.
pub const ICRC_MASKED: [usize; 4] = [field::TOS, field::TTL, field::CHECKSUM.start, field::CHECKSUM.start + 1];

const DONT_FRAG: u16 = 0x4000;
const MORE_FRAGS: u16 = 0x2000;
const FRAG_OFFSET: u16 = 0x1FFF;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking that the header and the total length fit in it.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds the fixed header, the IHL is at least 5 and fits,
    /// and the total length covers the header and fits. After this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error);
        }
        let header_len = usize::from(self.header_len());
        let total_len = usize::from(self.total_len());
        if header_len < HEADER_LEN || header_len > len || total_len < header_len || total_len > len {
            Err(Error)
        } else {
            Ok(())
        }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL times four).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0F) * 4
    }

    pub fn dscp(&self) -> u8 {
        ip::split_traffic_class(self.buffer.as_ref()[field::TOS]).0
    }

    pub fn ecn(&self) -> Ecn {
        ip::split_traffic_class(self.buffer.as_ref()[field::TOS]).1
    }

    /// Total length: header, payload and (for RoCE) the ICRC.
    pub fn total_len(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::LENGTH])
    }

    pub fn ident(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::IDENT])
    }

    pub fn dont_frag(&self) -> bool {
        be::u16(&self.buffer.as_ref()[field::FLAGS_FRAG]) & DONT_FRAG != 0
    }

    pub fn more_frags(&self) -> bool {
        be::u16(&self.buffer.as_ref()[field::FLAGS_FRAG]) & MORE_FRAGS != 0
    }

    /// Fragment offset in units of 8 bytes.
    pub fn frag_offset(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::FLAGS_FRAG]) & FRAG_OFFSET
    }

    /// Whether this is a fragment of a larger datagram rather than a whole one.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    pub fn src_addr(&self) -> Address {
        let mut addr = [0; 4];
        addr.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        Address(addr)
    }

    pub fn dst_addr(&self) -> Address {
        let mut addr = [0; 4];
        addr.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        Address(addr)
    }

    /// Whether the header checksum is right.
    pub fn verify_checksum(&self) -> bool {
        let header = &self.buffer.as_ref()[..usize::from(self.header_len())];
        ip::checksum_sum(header) == 0xFFFF
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload: from the end of the header to the total length. Bytes past the total
    /// length (Ethernet padding) are left out.
    pub fn payload(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        &data[usize::from(self.header_len())..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 4 and the header length (in bytes, a multiple of four).
    pub fn set_version_and_header_len(&mut self, header_len: u8) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((header_len / 4) & 0x0F);
    }

    pub fn set_traffic_class(&mut self, dscp: u8, ecn: Ecn) {
        self.buffer.as_mut()[field::TOS] = ip::traffic_class(dscp, ecn);
    }

    pub fn set_total_len(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::LENGTH], value);
    }

    pub fn set_ident(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::IDENT], value);
    }

    /// Sets DF and clears MF and the fragment offset: we never fragment.
    pub fn set_unfragmented(&mut self, dont_frag: bool) {
        let value = if dont_frag { DONT_FRAG } else { 0 };
        be::set_u16(&mut self.buffer.as_mut()[field::FLAGS_FRAG], value);
    }

    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }

    pub fn set_protocol(&mut self, value: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = value;
    }

    pub fn set_checksum(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::CHECKSUM], value);
    }

    pub fn set_src_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&value.0);
    }

    pub fn set_dst_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&value.0);
    }

    /// Computes the header checksum over the header as it now stands and stores it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = {
            let data = self.buffer.as_ref();
            let header_len = usize::from(data[field::VER_IHL] & 0x0F) * 4;
            ip::checksum_sum(&data[..header_len.max(HEADER_LEN).min(data.len())])
        };
        self.set_checksum(!sum);
    }
}

/// An IPv4 header without options, unfragmented, as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_addr: Address,
    pub dst_addr: Address,
    pub protocol: u8,
    /// Bytes after the header (for RoCE: UDP header through ICRC).
    pub payload_len: usize,
    pub ttl: u8,
    /// 6 bits.
    pub dscp: u8,
    pub ecn: Ecn,
    pub ident: u16,
    pub dont_frag: bool,
}

impl Repr {
    /// Reads a header. Fails on a wrong version, options, fragments or a bad checksum:
    /// none of these can be represented here.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.version() != 4
            || usize::from(packet.header_len()) != HEADER_LEN
            || packet.is_fragment()
            || !packet.verify_checksum()
        {
            return Err(Error);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - HEADER_LEN,
            ttl: packet.ttl(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// Bytes of header `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header, checksum included, into a packet at least `buffer_len()` long.
    /// The total length is `HEADER_LEN + payload_len`, saturated at 65535; callers check
    /// the length first.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let total = u16::try_from(HEADER_LEN.saturating_add(self.payload_len)).unwrap_or(u16::MAX);
        packet.set_version_and_header_len(HEADER_LEN as u8);
        packet.set_traffic_class(self.dscp, self.ecn);
        packet.set_total_len(total);
        packet.set_ident(self.ident);
        packet.set_unfragmented(self.dont_frag);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // IPv4 header of the first rc_send_small frame: 10.0.0.2 -> 10.0.0.1, ID 0xe99c,
    // DF, TTL 64, UDP, total length 108.
    const HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x6c, 0xe9, 0x9c, 0x40, 0x00, 0x40, 0x11, 0x3c, 0xe2, 0x0a, 0x00, 0x00, 0x02, 0x0a, 0x00,
        0x00, 0x01,
    ];

    const REPR: Repr = Repr {
        src_addr: Address([10, 0, 0, 2]),
        dst_addr: Address([10, 0, 0, 1]),
        protocol: ip::PROTOCOL_UDP,
        payload_len: 88,
        ttl: 64,
        dscp: 0,
        ecn: Ecn::NotEct,
        ident: 0xe99c,
        dont_frag: true,
    };

    fn with_payload() -> [u8; 108] {
        let mut bytes = [0u8; 108];
        bytes[..20].copy_from_slice(&HEADER);
        bytes
    }

    #[test]
    fn deconstruct() {
        let bytes = with_payload();
        let packet = Packet::new_checked(&bytes[..]).expect("whole datagram");
        assert!(packet.verify_checksum());
        assert_eq!(packet.payload().len(), 88);
        assert_eq!(Repr::parse(&packet), Ok(REPR));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xFFu8; 20];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER);
    }

    #[test]
    fn trailing_padding_is_not_payload() {
        let mut bytes = [0u8; 120];
        bytes[..20].copy_from_slice(&HEADER);
        let packet = Packet::new_checked(&bytes[..]).expect("padded datagram");
        assert_eq!(packet.payload().len(), 88);
    }

    #[test]
    fn length_checks() {
        // Total length past the buffer.
        assert_eq!(Packet::new_checked(&HEADER[..]), Err(Error));
        let mut bytes = with_payload();
        // IHL 4 is shorter than the fixed header.
        bytes[0] = 0x44;
        assert_eq!(Packet::new_checked(&bytes[..]), Err(Error));
        // IHL 15 is fine if it fits, but options are not representable.
        bytes[0] = 0x4F;
        let packet = Packet::new_checked(&bytes[..]).expect("60-byte header fits");
        assert_eq!(Repr::parse(&packet), Err(Error));
    }

    #[test]
    fn bad_checksum_fails_parse() {
        let mut bytes = with_payload();
        bytes[8] = 63;
        let packet = Packet::new_checked(&bytes[..]).expect("whole datagram");
        assert!(!packet.verify_checksum());
        assert_eq!(Repr::parse(&packet), Err(Error));
    }

    #[test]
    fn display() {
        extern crate alloc;
        use alloc::string::ToString;
        assert_eq!(REPR.src_addr.to_string(), "10.0.0.2");
    }
}
