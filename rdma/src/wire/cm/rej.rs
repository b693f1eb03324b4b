//! REJ, a connection refused (IBA vol. 1 12.6.7, table 108), with the reason (table 109)
//! and the reason's additional information (ARI).

use super::cm_packet;
use crate::wire::Result;

/// Room for additional reject information.
pub const ARI_LEN: usize = 72;

enum_with_unknown! {
    /// Which message a REJ refuses (2 bits).
    pub enum MessageRejected(u8) {
        Req = 0,
        Rep = 1,
        /// Anything else (a LAP, or a REJ sent after the REP).
        Other = 2,
    }
}

enum_with_unknown! {
    /// Why a connection was refused (IBA table 109; Linux's `ib_cm_rej_reason`).
    pub enum RejReason(u16) {
        NoQp = 1,
        NoEec = 2,
        NoResources = 3,
        Timeout = 4,
        Unsupported = 5,
        InvalidCommId = 6,
        InvalidCommInstance = 7,
        /// Nobody listens on the REQ's service ID.
        InvalidServiceId = 8,
        InvalidTransportType = 9,
        /// The REQ or REP names a QP that is already connected.
        StaleConn = 10,
        RdcNotExist = 11,
        InvalidGid = 12,
        InvalidLid = 13,
        InvalidSl = 14,
        InvalidTrafficClass = 15,
        InvalidHopLimit = 16,
        InvalidPacketRate = 17,
        InvalidAltGid = 18,
        InvalidAltLid = 19,
        InvalidAltSl = 20,
        InvalidAltTrafficClass = 21,
        InvalidAltHopLimit = 22,
        InvalidAltPacketRate = 23,
        PortCmRedirect = 24,
        PortRedirect = 25,
        InvalidMtu = 26,
        InsufficientRespResources = 27,
        /// The application refused (rdma_reject).
        ConsumerDefined = 28,
        InvalidRnrRetry = 29,
        DuplicateLocalCommId = 30,
        InvalidClassVersion = 31,
        InvalidFlowLabel = 32,
        InvalidAltFlowLabel = 33,
        VendorOptionNotSupported = 35,
    }
}

cm_packet! {
    private: 84;
    local_comm_id, set_local_comm_id: u32 = u32 0;
    /// Zero when the REJ answers a REQ the sender has no state for.
    remote_comm_id, set_remote_comm_id: u32 = u32 4;
    message_rejected_raw, set_message_rejected_raw: u8 = bits (8, 0xC0);
    /// Bytes of the ARI that mean something (7 bits).
    ari_length, set_ari_length: u8 = bits (9, 0xFE);
    reason_raw, set_reason_raw: u16 = u16 10;
}

mod field {
    pub const ARI: core::ops::Range<usize> = 12..84;
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn message_rejected(&self) -> MessageRejected {
        MessageRejected::from_raw(self.message_rejected_raw())
    }

    pub fn reason(&self) -> RejReason {
        RejReason::from_raw(self.reason_raw())
    }

    /// The whole ARI area (72 bytes); `ari_length` says how much of it counts.
    pub fn ari(&self) -> &[u8] {
        &self.buffer.as_ref()[field::ARI]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The meaningful part of the ARI (`ari_length` bytes, at most the area).
    fn ari_in(&self) -> &'a [u8] {
        let buffer: &'a T = self.buffer;
        let len = usize::from(self.ari_length()).min(ARI_LEN);
        &buffer.as_ref()[field::ARI.start..field::ARI.start + len]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_reason(&mut self, value: RejReason) {
        self.set_reason_raw(value.to_raw());
    }

    /// Copies `ari` into the ARI area (zero-padded) and sets the ARI length; fails,
    /// writing nothing, when it does not fit.
    pub fn set_ari(&mut self, ari: &[u8]) -> Result<()> {
        if ari.len() > ARI_LEN {
            return Err(crate::wire::Error);
        }
        let area = &mut self.buffer.as_mut()[field::ARI];
        let (head, tail) = area.split_at_mut(ari.len());
        head.copy_from_slice(ari);
        tail.fill(0);
        // ARI_LEN fits the 7-bit length field.
        self.set_ari_length(ari.len() as u8);
        Ok(())
    }
}

/// A REJ as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RejRepr<'a> {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub message_rejected: MessageRejected,
    pub reason: RejReason,
    /// The meaningful ARI bytes (at most 72; their count is the ARI length).
    pub ari: &'a [u8],
    /// Up to 148 bytes; a parsed REJ holds the whole area.
    pub private_data: &'a [u8],
}

impl<'a> RejRepr<'a> {
    /// Reads a REJ. An ARI length past the area is cut to the area.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<RejRepr<'a>> {
        packet.check_len()?;
        Ok(RejRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            message_rejected: packet.message_rejected(),
            reason: packet.reason(),
            ari: packet.ari_in(),
            private_data: packet.private_data_in(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        super::MESSAGE_LEN
    }

    /// Writes the REJ, reserved bytes zeroed; fails when the ARI or the private data
    /// does not fit.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        if self.ari.len() > ARI_LEN {
            return Err(crate::wire::Error);
        }
        packet.clear();
        packet.set_private_data(self.private_data)?;
        packet.set_ari(self.ari)?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.set_message_rejected_raw(self.message_rejected.to_raw());
        packet.set_reason(self.reason);
        Ok(())
    }
}
