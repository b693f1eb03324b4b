//! DREQ, a disconnect request (IBA vol. 1 12.6.10, table 112).

use super::cm_packet;
use crate::wire::Result;

cm_packet! {
    private: 12;
    local_comm_id, set_local_comm_id: u32 = u32 0;
    remote_comm_id, set_remote_comm_id: u32 = u32 4;
    /// The receiver's QP (24 bits), so a stale ID can still be matched.
    remote_qpn, set_remote_qpn: u32 = u24 8;
}

/// A DREQ as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DreqRepr<'a> {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub remote_qpn: u32,
    /// Up to 220 bytes; a parsed DREQ holds the whole area.
    pub private_data: &'a [u8],
}

impl<'a> DreqRepr<'a> {
    /// Reads a DREQ.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<DreqRepr<'a>> {
        packet.check_len()?;
        Ok(DreqRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            remote_qpn: packet.remote_qpn(),
            private_data: packet.private_data_in(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        super::MESSAGE_LEN
    }

    /// Writes the DREQ, reserved bytes zeroed; fails when the private data does not fit.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        packet.clear();
        packet.set_private_data(self.private_data)?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.set_remote_qpn(self.remote_qpn);
        Ok(())
    }
}
