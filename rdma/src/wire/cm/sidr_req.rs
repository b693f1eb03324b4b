//! SIDR_REQ, service ID resolution for UD (IBA vol. 1 12.11.1, table 119): which QP and
//! Q_Key serve this service ID?

use super::cm_packet;
use crate::wire::Result;

cm_packet! {
    private: 16;
    request_id, set_request_id: u32 = u32 0;
    pkey, set_pkey: u16 = u16 4;
    service_id, set_service_id: u64 = u64 8;
}

/// A SIDR_REQ as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SidrReqRepr<'a> {
    pub request_id: u32,
    pub pkey: u16,
    pub service_id: u64,
    /// Up to 216 bytes; a parsed SIDR_REQ holds the whole area.
    pub private_data: &'a [u8],
}

impl<'a> SidrReqRepr<'a> {
    /// Reads a SIDR_REQ.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<SidrReqRepr<'a>> {
        packet.check_len()?;
        Ok(SidrReqRepr {
            request_id: packet.request_id(),
            pkey: packet.pkey(),
            service_id: packet.service_id(),
            private_data: packet.private_data_in(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        super::MESSAGE_LEN
    }

    /// Writes the SIDR_REQ, reserved bytes zeroed; fails when the private data does not
    /// fit.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        packet.clear();
        packet.set_private_data(self.private_data)?;
        packet.set_request_id(self.request_id);
        packet.set_pkey(self.pkey);
        packet.set_service_id(self.service_id);
        Ok(())
    }
}
