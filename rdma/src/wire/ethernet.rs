//! Ethernet II header (IEEE 802.3 with an EtherType, RoCE v2 annex A17 framing): the
//! MAC addresses and the EtherType that says whether IPv4 or IPv6 follows.

use super::field::Field;
use super::{Error, Result, be};
use vocab::MacAddr;

enum_with_unknown! {
    /// The EtherType field.
    pub enum EtherType(u16) {
        Ipv4 = 0x0800,
        Arp = 0x0806,
        /// An 802.1Q tag: we do not strip tags (rxe refuses VLAN devices too).
        Vlan = 0x8100,
        Ipv6 = 0x86DD,
    }
}

/// A read/write view of an Ethernet II header and what follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const DST: Field = 0..6;
    pub const SRC: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::ETHERTYPE.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold the header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds the whole header; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn dst_addr(&self) -> MacAddr {
        let mut addr = [0; 6];
        addr.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        MacAddr(addr)
    }

    pub fn src_addr(&self) -> MacAddr {
        let mut addr = [0; 6];
        addr.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        MacAddr(addr)
    }

    pub fn ethertype(&self) -> EtherType {
        EtherType::from_raw(be::u16(&self.buffer.as_ref()[field::ETHERTYPE]))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Everything after the header, borrowed for as long as the buffer.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_dst_addr(&mut self, value: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&value.0);
    }

    pub fn set_src_addr(&mut self, value: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&value.0);
    }

    pub fn set_ethertype(&mut self, value: EtherType) {
        be::set_u16(&mut self.buffer.as_mut()[field::ETHERTYPE], value.to_raw());
    }
}

/// An Ethernet II header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_addr: MacAddr,
    pub dst_addr: MacAddr,
    pub ethertype: EtherType,
}

impl Repr {
    /// Reads the header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { src_addr: packet.src_addr(), dst_addr: packet.dst_addr(), ethertype: packet.ethertype() })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_dst_addr(self.dst_addr);
        packet.set_src_addr(self.src_addr);
        packet.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // Ethernet header of a captured frame from 52:54:00:00:00:02 to ...:01.
    const HEADER: [u8; 14] = [0x52, 0x54, 0x00, 0x00, 0x00, 0x01, 0x52, 0x54, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00];

    const REPR: Repr = Repr {
        src_addr: MacAddr([0x52, 0x54, 0, 0, 0, 2]),
        dst_addr: MacAddr([0x52, 0x54, 0, 0, 0, 1]),
        ethertype: EtherType::Ipv4,
    };

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&HEADER[..]).expect("14 bytes");
        assert_eq!(Repr::parse(&packet), Ok(REPR));
        assert!(packet.payload().is_empty());
    }

    #[test]
    fn construct() {
        let mut bytes = [0u8; HEADER_LEN];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER);
    }

    #[test]
    fn display_and_flags() {
        extern crate alloc;
        use alloc::string::ToString;
        assert_eq!(REPR.src_addr.to_string(), "52:54:00:00:00:02");
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(!REPR.src_addr.is_multicast());
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&HEADER[..13]), Err(Error));
    }
}
