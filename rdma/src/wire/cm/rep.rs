//! REP, the passive side's reply to a REQ (IBA vol. 1 12.6.8, table 110): its QP, its
//! starting PSN and what it accepted of the requested resources.

use super::cm_packet;
use crate::wire::Result;

cm_packet! {
    private: 36;
    local_comm_id, set_local_comm_id: u32 = u32 0;
    /// The REQ's local communication ID, echoed.
    remote_comm_id, set_remote_comm_id: u32 = u32 4;
    local_qkey, set_local_qkey: u32 = u32 8;
    /// 24 bits.
    local_qpn, set_local_qpn: u32 = u24 12;
    local_eecn, set_local_eecn: u32 = u24 16;
    /// 24 bits: the PSN the sender's send queue starts at.
    starting_psn, set_starting_psn: u32 = u24 20;
    responder_resources, set_responder_resources: u8 = u8 24;
    initiator_depth, set_initiator_depth: u8 = u8 25;
    /// The sender's HCA ACK delay (5 bits).
    target_ack_delay, set_target_ack_delay: u8 = bits (26, 0xF8);
    /// 0 accepted, 1 alternate path rejected, 2 not supported (2 bits).
    failover_accepted, set_failover_accepted: u8 = bits (26, 0x06);
    flow_control, set_flow_control: bool = flag (26, 0x01);
    /// 3 bits.
    rnr_retry_count, set_rnr_retry_count: u8 = bits (27, 0xE0);
    srq, set_srq: bool = flag (27, 0x10);
    local_ca_guid, set_local_ca_guid: u64 = u64 28;
}

/// A REP as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepRepr<'a> {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub local_qkey: u32,
    pub local_qpn: u32,
    pub local_eecn: u32,
    pub starting_psn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub target_ack_delay: u8,
    pub failover_accepted: u8,
    pub flow_control: bool,
    pub rnr_retry_count: u8,
    pub srq: bool,
    pub local_ca_guid: u64,
    /// Up to 196 bytes; a parsed REP holds the whole area.
    pub private_data: &'a [u8],
}

impl<'a> RepRepr<'a> {
    /// Reads a REP.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<RepRepr<'a>> {
        packet.check_len()?;
        Ok(RepRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            local_qkey: packet.local_qkey(),
            local_qpn: packet.local_qpn(),
            local_eecn: packet.local_eecn(),
            starting_psn: packet.starting_psn(),
            responder_resources: packet.responder_resources(),
            initiator_depth: packet.initiator_depth(),
            target_ack_delay: packet.target_ack_delay(),
            failover_accepted: packet.failover_accepted(),
            flow_control: packet.flow_control(),
            rnr_retry_count: packet.rnr_retry_count(),
            srq: packet.srq(),
            local_ca_guid: packet.local_ca_guid(),
            private_data: packet.private_data_in(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        super::MESSAGE_LEN
    }

    /// Writes the REP, reserved bytes zeroed; fails when the private data does not fit.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        packet.clear();
        packet.set_private_data(self.private_data)?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.set_local_qkey(self.local_qkey);
        packet.set_local_qpn(self.local_qpn);
        packet.set_local_eecn(self.local_eecn);
        packet.set_starting_psn(self.starting_psn);
        packet.set_responder_resources(self.responder_resources);
        packet.set_initiator_depth(self.initiator_depth);
        packet.set_target_ack_delay(self.target_ack_delay);
        packet.set_failover_accepted(self.failover_accepted);
        packet.set_flow_control(self.flow_control);
        packet.set_rnr_retry_count(self.rnr_retry_count);
        packet.set_srq(self.srq);
        packet.set_local_ca_guid(self.local_ca_guid);
        Ok(())
    }
}
