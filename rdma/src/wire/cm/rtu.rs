//! RTU, "ready to use" (IBA vol. 1 12.6.9, table 111): the active side's QP is ready;
//! the passive side may move its QP to RTS.

use super::cm_packet;
use crate::wire::Result;

cm_packet! {
    private: 8;
    local_comm_id, set_local_comm_id: u32 = u32 0;
    remote_comm_id, set_remote_comm_id: u32 = u32 4;
}

/// An RTU as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtuRepr<'a> {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    /// Up to 224 bytes; a parsed RTU holds the whole area.
    pub private_data: &'a [u8],
}

impl<'a> RtuRepr<'a> {
    /// Reads an RTU.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<RtuRepr<'a>> {
        packet.check_len()?;
        Ok(RtuRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            private_data: packet.private_data_in(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        super::MESSAGE_LEN
    }

    /// Writes the RTU, reserved bytes zeroed; fails when the private data does not fit.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        packet.clear();
        packet.set_private_data(self.private_data)?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        Ok(())
    }
}
