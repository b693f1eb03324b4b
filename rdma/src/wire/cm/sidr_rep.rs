//! SIDR_REP, the answer to a SIDR_REQ (IBA vol. 1 12.11.2, table 120): the QP and Q_Key
//! of the service, or why there is none.

use super::cm_packet;
use crate::wire::Result;

/// Room for additional information.
pub const INFO_LEN: usize = 72;

enum_with_unknown! {
    /// SIDR_REP status (IBA table 121; Linux's `ib_cm_sidr_status`).
    pub enum SidrStatus(u8) {
        Success = 0,
        /// Nobody serves this service ID.
        UnsupportedServiceId = 1,
        Reject = 2,
        NoQp = 3,
        Redirect = 4,
        UnsupportedVersion = 5,
    }
}

cm_packet! {
    private: 96;
    request_id, set_request_id: u32 = u32 0;
    status_raw, set_status_raw: u8 = u8 4;
    /// Bytes of the additional information that mean something.
    info_length, set_info_length: u8 = u8 5;
    /// 24 bits.
    qpn, set_qpn: u32 = u24 8;
    service_id, set_service_id: u64 = u64 12;
    qkey, set_qkey: u32 = u32 20;
}

mod field {
    pub const INFO: core::ops::Range<usize> = 24..96;
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn status(&self) -> SidrStatus {
        SidrStatus::from_raw(self.status_raw())
    }

    /// The whole additional information area (72 bytes).
    pub fn info(&self) -> &[u8] {
        &self.buffer.as_ref()[field::INFO]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The meaningful part of the additional information.
    fn info_in(&self) -> &'a [u8] {
        let buffer: &'a T = self.buffer;
        let len = usize::from(self.info_length()).min(INFO_LEN);
        &buffer.as_ref()[field::INFO.start..field::INFO.start + len]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_status(&mut self, value: SidrStatus) {
        self.set_status_raw(value.to_raw());
    }

    /// Copies `info` into its area (zero-padded) and sets its length; fails, writing
    /// nothing, when it does not fit.
    pub fn set_info(&mut self, info: &[u8]) -> Result<()> {
        if info.len() > INFO_LEN {
            return Err(crate::wire::Error);
        }
        let area = &mut self.buffer.as_mut()[field::INFO];
        let (head, tail) = area.split_at_mut(info.len());
        head.copy_from_slice(info);
        tail.fill(0);
        // INFO_LEN fits a byte.
        self.set_info_length(info.len() as u8);
        Ok(())
    }
}

/// A SIDR_REP as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SidrRepRepr<'a> {
    pub request_id: u32,
    pub status: SidrStatus,
    pub qpn: u32,
    pub service_id: u64,
    pub qkey: u32,
    /// The meaningful additional information (at most 72 bytes).
    pub info: &'a [u8],
    /// Up to 136 bytes; a parsed SIDR_REP holds the whole area.
    pub private_data: &'a [u8],
}

impl<'a> SidrRepRepr<'a> {
    /// Reads a SIDR_REP. An information length past the area is cut to the area.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<SidrRepRepr<'a>> {
        packet.check_len()?;
        Ok(SidrRepRepr {
            request_id: packet.request_id(),
            status: packet.status(),
            qpn: packet.qpn(),
            service_id: packet.service_id(),
            qkey: packet.qkey(),
            info: packet.info_in(),
            private_data: packet.private_data_in(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        super::MESSAGE_LEN
    }

    /// Writes the SIDR_REP, reserved bytes zeroed; fails when the information or the
    /// private data does not fit.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        if self.info.len() > INFO_LEN {
            return Err(crate::wire::Error);
        }
        packet.clear();
        packet.set_private_data(self.private_data)?;
        packet.set_info(self.info)?;
        packet.set_request_id(self.request_id);
        packet.set_status(self.status);
        packet.set_qpn(self.qpn);
        packet.set_service_id(self.service_id);
        packet.set_qkey(self.qkey);
        Ok(())
    }
}
