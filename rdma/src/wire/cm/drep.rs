//! DREP, the reply to a DREQ (IBA vol. 1 12.6.11, table 113).

use super::cm_packet;
use crate::wire::Result;

cm_packet! {
    private: 8;
    local_comm_id, set_local_comm_id: u32 = u32 0;
    remote_comm_id, set_remote_comm_id: u32 = u32 4;
}

/// A DREP as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrepRepr<'a> {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    /// Up to 224 bytes; a parsed DREP holds the whole area.
    pub private_data: &'a [u8],
}

impl<'a> DrepRepr<'a> {
    /// Reads a DREP.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<DrepRepr<'a>> {
        packet.check_len()?;
        Ok(DrepRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            private_data: packet.private_data_in(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        super::MESSAGE_LEN
    }

    /// Writes the DREP, reserved bytes zeroed; fails when the private data does not fit.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        packet.clear();
        packet.set_private_data(self.private_data)?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        Ok(())
    }
}
