//! MRA, "message receipt acknowledgement" (IBA vol. 1 12.6.6, table 107): the receiver
//! of a REQ, REP or LAP needs more time than the sender's timeout allows.

use super::cm_packet;
use crate::wire::Result;

enum_with_unknown! {
    /// Which message an MRA (or a REJ) refers to (2 bits).
    pub enum MessageMraed(u8) {
        Req = 0,
        Rep = 1,
        Lap = 2,
    }
}

cm_packet! {
    private: 10;
    local_comm_id, set_local_comm_id: u32 = u32 0;
    remote_comm_id, set_remote_comm_id: u32 = u32 4;
    message_mraed_raw, set_message_mraed_raw: u8 = bits (8, 0xC0);
    /// How much longer the sender of the MRA needs: 4.096 us << this (5 bits).
    service_timeout, set_service_timeout: u8 = bits (9, 0xF8);
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn message_mraed(&self) -> MessageMraed {
        MessageMraed::from_raw(self.message_mraed_raw())
    }
}

/// An MRA as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MraRepr<'a> {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub message_mraed: MessageMraed,
    pub service_timeout: u8,
    /// Up to 222 bytes; a parsed MRA holds the whole area.
    pub private_data: &'a [u8],
}

impl<'a> MraRepr<'a> {
    /// Reads an MRA.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<MraRepr<'a>> {
        packet.check_len()?;
        Ok(MraRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            message_mraed: packet.message_mraed(),
            service_timeout: packet.service_timeout(),
            private_data: packet.private_data_in(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        super::MESSAGE_LEN
    }

    /// Writes the MRA, reserved bytes zeroed; fails when the private data does not fit.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        packet.clear();
        packet.set_private_data(self.private_data)?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.set_message_mraed_raw(self.message_mraed.to_raw());
        packet.set_service_timeout(self.service_timeout);
        Ok(())
    }
}
