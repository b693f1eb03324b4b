//! The MAD common header (IBA vol. 1 13.4.2): the 24 bytes every management datagram
//! starts with. A MAD on QP1 (the GSI) is always 256 bytes: this header and 232 bytes of
//! class data.

use super::field::Field;
use super::{Error, Result, be};

/// Length of every IB MAD (base version 1).
pub const MAD_LEN: usize = 256;
/// Length of the common header.
pub const HEADER_LEN: usize = field::ATTR_MOD.end;
/// Length of the class data after the common header.
pub const DATA_LEN: usize = MAD_LEN - HEADER_LEN;
/// The only base version IB MADs have.
pub const BASE_VERSION: u8 = 1;
/// The R bit of the method byte: this MAD is a response.
pub const METHOD_RESP: u8 = 0x80;
/// The Q_Key every GSI (QP1) MAD is sent with (IBA 13.5.1.2).
pub const GSI_QKEY: u32 = 0x8001_0000;
/// The attribute every class defines (IBA 13.4.8.1).
pub const ATTR_CLASS_PORT_INFO: u16 = 0x0001;

/// Status: the class version is not supported (IBA 13.4.7, table 157).
pub const STATUS_BAD_VERSION: u16 = 0x0004;
/// Status: the method is not supported.
pub const STATUS_UNSUPPORTED_METHOD: u16 = 0x0008;
/// Status: the method/attribute combination is not supported; Linux answers an unmatched
/// Get or Set with this.
pub const STATUS_UNSUPPORTED_METHOD_ATTRIB: u16 = 0x000C;
/// Status: an attribute or attribute modifier holds an invalid value.
pub const STATUS_INVALID_ATTRIB_VALUE: u16 = 0x001C;

enum_with_unknown! {
    /// Management class (IBA 13.4.4, table 150).
    pub enum MgmtClass(u8) {
        /// Subnet management, LID routed (QP0 only).
        SubnLidRouted = 0x01,
        /// Subnet administration.
        SubnAdm = 0x03,
        PerfMgmt = 0x04,
        /// Baseboard management.
        Bm = 0x05,
        DevMgmt = 0x06,
        /// Communication management (IBA ch. 12).
        Cm = 0x07,
        Snmp = 0x08,
        /// Subnet management, directed route (QP0 only).
        SubnDirectedRoute = 0x81,
    }
}

impl MgmtClass {
    /// The subnet management classes, which only QP0 may carry.
    pub const fn is_smi(self) -> bool {
        matches!(self, MgmtClass::SubnLidRouted | MgmtClass::SubnDirectedRoute)
    }
}

enum_with_unknown! {
    /// The method byte, R bit included (IBA 13.4.5, table 151).
    pub enum Method(u8) {
        Get = 0x01,
        Set = 0x02,
        Send = 0x03,
        Trap = 0x05,
        Report = 0x06,
        TrapRepress = 0x07,
        GetTable = 0x12,
        GetResp = 0x81,
        ReportResp = 0x86,
        GetTableResp = 0x92,
    }
}

impl Method {
    /// A response (R bit set, or TrapRepress which answers a Trap), routed back to the
    /// agent that sent the request by the TID's upper half, as Linux's `ib_response_mad`
    /// decides it (the BM class's attribute-modifier response bit aside).
    pub const fn is_response(self) -> bool {
        self.to_raw() & METHOD_RESP != 0 || matches!(self, Method::TrapRepress)
    }
}

/// A read/write view of a MAD: the common header and the class data after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;

    pub const BASE_VERSION: usize = 0;
    pub const MGMT_CLASS: usize = 1;
    pub const CLASS_VERSION: usize = 2;
    pub const METHOD: usize = 3;
    pub const STATUS: Field = 4..6;
    pub const CLASS_SPECIFIC: Field = 6..8;
    pub const TID: Field = 8..16;
    pub const ATTR_ID: Field = 16..18;
    pub const RESERVED: Field = 18..20;
    pub const ATTR_MOD: Field = 20..24;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking it holds at least the common header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fails unless the buffer holds the common header; after this no getter panics.
    /// Whether the MAD is a whole 256 bytes is the MAD layer's check, not the header's.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error) } else { Ok(()) }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }

    pub fn mgmt_class(&self) -> MgmtClass {
        MgmtClass::from_raw(self.buffer.as_ref()[field::MGMT_CLASS])
    }

    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }

    pub fn method(&self) -> Method {
        Method::from_raw(self.buffer.as_ref()[field::METHOD])
    }

    pub fn status(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::STATUS])
    }

    pub fn class_specific(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::CLASS_SPECIFIC])
    }

    /// Transaction ID. Linux puts the sending agent's id in the upper 32 bits so a
    /// response finds its way back.
    pub fn tid(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::TID])
    }

    pub fn attr_id(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::ATTR_ID])
    }

    pub fn attr_mod(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::ATTR_MOD])
    }

    /// The class data after the header (232 bytes in a whole MAD).
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_base_version(&mut self, value: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = value;
    }

    pub fn set_mgmt_class(&mut self, value: MgmtClass) {
        self.buffer.as_mut()[field::MGMT_CLASS] = value.to_raw();
    }

    pub fn set_class_version(&mut self, value: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = value;
    }

    pub fn set_method(&mut self, value: Method) {
        self.buffer.as_mut()[field::METHOD] = value.to_raw();
    }

    pub fn set_status(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::STATUS], value);
    }

    pub fn set_class_specific(&mut self, value: u16) {
        be::set_u16(&mut self.buffer.as_mut()[field::CLASS_SPECIFIC], value);
    }

    pub fn set_tid(&mut self, value: u64) {
        be::set_u64(&mut self.buffer.as_mut()[field::TID], value);
    }

    /// Sets the attribute ID and clears the reserved bytes after it.
    pub fn set_attr_id(&mut self, value: u16) {
        let data = self.buffer.as_mut();
        be::set_u16(&mut data[field::ATTR_ID], value);
        data[field::RESERVED].fill(0);
    }

    pub fn set_attr_mod(&mut self, value: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::ATTR_MOD], value);
    }

    /// The class data after the header, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The common MAD header as plain values. The reserved field is emitted as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub base_version: u8,
    pub mgmt_class: MgmtClass,
    pub class_version: u8,
    pub method: Method,
    pub status: u16,
    pub class_specific: u16,
    pub tid: u64,
    pub attr_id: u16,
    pub attr_mod: u32,
}

impl Repr {
    /// Reads the common header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            base_version: packet.base_version(),
            mgmt_class: packet.mgmt_class(),
            class_version: packet.class_version(),
            method: packet.method(),
            status: packet.status(),
            class_specific: packet.class_specific(),
            tid: packet.tid(),
            attr_id: packet.attr_id(),
            attr_mod: packet.attr_mod(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into a packet at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_base_version(self.base_version);
        packet.set_mgmt_class(self.mgmt_class);
        packet.set_class_version(self.class_version);
        packet.set_method(self.method);
        packet.set_status(self.status);
        packet.set_class_specific(self.class_specific);
        packet.set_tid(self.tid);
        packet.set_attr_id(self.attr_id);
        packet.set_attr_mod(self.attr_mod);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // A CM REQ's header: base 1, class CM, version 2, Send, TID 0x00000001_2a3b4c5d,
    // attribute REQ (0x0010).
    const REQ_HDR: [u8; 24] = [
        0x01, 0x07, 0x02, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x2a, 0x3b, 0x4c, 0x5d, 0x00, 0x10,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    fn req_repr() -> Repr {
        Repr {
            base_version: 1,
            mgmt_class: MgmtClass::Cm,
            class_version: 2,
            method: Method::Send,
            status: 0,
            class_specific: 0,
            tid: 0x0000_0001_2a3b_4c5d,
            attr_id: 0x0010,
            attr_mod: 0,
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&REQ_HDR[..]).expect("24 bytes");
        assert_eq!(Repr::parse(&packet), Ok(req_repr()));
        assert!(packet.data().is_empty());
    }

    #[test]
    fn construct() {
        let mut bytes = [0xA5u8; 24];
        req_repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, REQ_HDR);
    }

    #[test]
    fn every_field_round_trips() {
        let repr = Repr {
            base_version: 0x81,
            mgmt_class: MgmtClass::Unknown(0x30),
            class_version: 0xfe,
            method: Method::GetResp,
            status: 0xbeef,
            class_specific: 0x1234,
            tid: 0x0102_0304_0506_0708,
            attr_id: 0xff01,
            attr_mod: 0xdead_beef,
        };
        let mut bytes = [0u8; MAD_LEN];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        let packet = Packet::new_checked(&bytes[..]).expect("whole MAD");
        assert_eq!(Repr::parse(&packet), Ok(repr));
        assert_eq!(packet.data().len(), DATA_LEN);
    }

    #[test]
    fn responses() {
        assert!(Method::GetResp.is_response());
        assert!(Method::TrapRepress.is_response());
        assert!(!Method::Send.is_response());
        assert!(!Method::Get.is_response());
        assert!(MgmtClass::SubnDirectedRoute.is_smi() && !MgmtClass::Cm.is_smi());
    }

    #[test]
    fn short_buffer_is_rejected() {
        assert_eq!(Packet::new_checked(&REQ_HDR[..23]), Err(Error));
    }
}
