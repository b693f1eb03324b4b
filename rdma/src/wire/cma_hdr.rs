//! The rdma_cm header Linux's RDMA CM puts at the start of a REQ's or SIDR_REQ's private
//! data for the IP port spaces (`struct cma_hdr` in drivers/infiniband/core/cma.c), and
//! the service IDs those port spaces map to (IBA annex A11, "RDMA IP CM Service").
//!
//! Layout (36 bytes): version (0), IP version in the high nibble, the active side's
//! port, then source and destination address in 16 bytes each. An IPv4 address sits in
//! the last four of its 16 bytes with the twelve before it zero (not IPv4-mapped).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::field::Field;
use super::{Error, Result, be};

/// Length of a cma_hdr.
pub const HEADER_LEN: usize = field::DST_ADDR.end;
/// The only version Linux writes and accepts.
pub const CMA_VERSION: u8 = 0x00;

/// The mask a listener on an IP port space matches service IDs with: the port space
/// and port (the low 32 bits are `ps << 16 | port`; everything above is the prefix).
pub const IP_PS_MASK: u64 = 0xFFFF_FFFF_FFFF_0000;

enum_with_unknown! {
    /// RDMA CM port spaces (`enum rdma_ucm_port_space`).
    pub enum PortSpace(u16) {
        Ipoib = 0x0002,
        /// Reliable connected (RC), the usual one: rping, perftest `-R`.
        Tcp = 0x0106,
        /// UD, resolved with SIDR.
        Udp = 0x0111,
        /// Native IB addressing (AF_IB): no cma_hdr.
        Ib = 0x013F,
    }
}

/// The service ID of `port` in port space `ps`: `(ps << 16) | port`.
pub const fn service_id(ps: PortSpace, port: u16) -> u64 {
    ((ps.to_raw() as u64) << 16) | port as u64
}

/// The port space a service ID names, when it is in the IP range (upper 32 bits zero).
pub fn port_space(service_id: u64) -> Option<PortSpace> {
    if service_id >> 32 != 0 {
        return None;
    }
    Some(PortSpace::from_raw((service_id >> 16) as u16))
}

/// The port in a service ID's low 16 bits.
pub const fn port(service_id: u64) -> u16 {
    service_id as u16
}

/// A read/write view of a cma_hdr at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const VERSION: usize = 0;
    /// IP version in bits 7:4; the low nibble is reserved.
    pub const IP_VERSION: usize = 1;
    pub const PORT: Field = 2..4;
    pub const SRC_ADDR: Field = 4..20;
    pub const DST_ADDR: Field = 20..36;
    /// Where an IPv4 address sits within its 16 bytes.
    pub const IPV4_IN_ADDR: Field = 12..16;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it can hold a cma_hdr.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds a whole cma_hdr; after this no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// 4 or 6 in a valid header.
    pub fn ip_version(&self) -> u8 {
        self.buffer.as_ref()[field::IP_VERSION] >> 4
    }

    /// The active side's port.
    pub fn port(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::PORT])
    }

    /// The source address's 16 bytes as they are.
    pub fn src_addr_raw(&self) -> &[u8] {
        &self.buffer.as_ref()[field::SRC_ADDR]
    }

    /// The destination address's 16 bytes as they are.
    pub fn dst_addr_raw(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DST_ADDR]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_version(&mut self, value: u8) {
        self.buffer.as_mut()[field::VERSION] = value;
    }

    /// Sets the IP version nibble; the reserved low nibble is cleared.
    pub fn set_ip_version(&mut self, value: u8) {
        self.buffer.as_mut()[field::IP_VERSION] = value << 4;
    }

    pub fn set_port(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::PORT], value);
    }

    pub fn set_src_addr(&mut self, addr: IpAddr) {
        write_addr(&mut self.buffer.as_mut()[field::SRC_ADDR], addr);
    }

    pub fn set_dst_addr(&mut self, addr: IpAddr) {
        write_addr(&mut self.buffer.as_mut()[field::DST_ADDR], addr);
    }
}

fn write_addr(area: &mut [u8], addr: IpAddr) {
    match addr {
        IpAddr::V4(a) => {
            area.fill(0);
            area[field::IPV4_IN_ADDR].copy_from_slice(&a.octets());
        }
        IpAddr::V6(a) => area.copy_from_slice(&a.octets()),
    }
}

fn read_addr(area: &[u8], ip_version: u8) -> Result<IpAddr> {
    let mut raw = [0u8; 16];
    raw.copy_from_slice(area);
    match ip_version {
        4 => Ok(IpAddr::V4(Ipv4Addr::new(raw[12], raw[13], raw[14], raw[15]))),
        6 => Ok(IpAddr::V6(Ipv6Addr::from(raw))),
        _ => Err(Error),
    }
}

/// A cma_hdr as plain values. Both addresses have the family the IP version names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub version: u8,
    /// The active side's port.
    pub port: u16,
    pub src_addr: IpAddr,
    pub dst_addr: IpAddr,
}

impl Repr {
    /// Reads a cma_hdr; fails on an IP version other than 4 or 6.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        let ipv = packet.ip_version();
        Ok(Repr {
            version: packet.version(),
            port: packet.port(),
            src_addr: read_addr(packet.src_addr_raw(), ipv)?,
            dst_addr: read_addr(packet.dst_addr_raw(), ipv)?,
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the IP version comes from the source address. Fails when the
    /// two addresses are of different families.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        let ipv = match (self.src_addr, self.dst_addr) {
            (IpAddr::V4(_), IpAddr::V4(_)) => 4,
            (IpAddr::V6(_), IpAddr::V6(_)) => 6,
            _ => return Err(Error),
        };
        packet.set_version(self.version);
        packet.set_ip_version(ipv);
        packet.set_port(self.port);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // 10.0.0.1:0x9c40 -> 10.0.0.2, as Linux rping's REQ starts its private data.
    const V4: [u8; 36] = [
        0x00, 0x40, 0x9c, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        10, 0, 0, 2,
    ];

    fn v4_repr() -> Repr {
        Repr {
            version: CMA_VERSION,
            port: 0x9c40,
            src_addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst_addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        }
    }

    #[test]
    fn deconstruct_v4() {
        let packet = Packet::new_checked(&V4[..]).expect("36 bytes");
        assert_eq!(Repr::parse(&packet), Ok(v4_repr()));
    }

    #[test]
    fn construct_v4() {
        let mut bytes = [0xA5u8; 36];
        v4_repr().emit(&mut Packet::new_unchecked(&mut bytes[..])).expect("same family");
        assert_eq!(bytes, V4);
    }

    #[test]
    fn v6_round_trips() {
        let repr = Repr {
            version: 0,
            port: 7174,
            src_addr: IpAddr::V6("fe80::1".parse().expect("literal")),
            dst_addr: IpAddr::V6("2001:db8::2".parse().expect("literal")),
        };
        let mut bytes = [0u8; 36];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..])).expect("same family");
        assert_eq!(bytes[1], 0x60);
        assert_eq!(Repr::parse(&Packet::new_unchecked(&bytes[..])), Ok(repr));
    }

    #[test]
    fn bad_input_is_an_error() {
        assert_eq!(Packet::new_checked(&V4[..35]), Err(Error));
        let mut bad = V4;
        bad[1] = 0x50;
        assert_eq!(Repr::parse(&Packet::new_unchecked(&bad[..])), Err(Error));
        let mixed = Repr { dst_addr: IpAddr::V6(Ipv6Addr::LOCALHOST), ..v4_repr() };
        let mut bytes = [0u8; 36];
        assert_eq!(mixed.emit(&mut Packet::new_unchecked(&mut bytes[..])), Err(Error));
    }

    #[test]
    fn service_ids() {
        assert_eq!(service_id(PortSpace::Tcp, 7174), 0x0106_1c06);
        assert_eq!(service_id(PortSpace::Udp, 1), 0x0111_0001);
        assert_eq!(port_space(0x0106_1c06), Some(PortSpace::Tcp));
        assert_eq!(port(0x0106_1c06), 7174);
        assert_eq!(port_space(0x0000_0001_0106_1c06), None);
        assert_eq!(PortSpace::from_raw(0x013F), PortSpace::Ib);
    }
}
