//! REQ, the connection request (IBA vol. 1 12.6.5, table 106): everything the passive
//! side needs to bring its QP to RTR and answer, and the paths the connection uses.

use super::cm_packet;
use crate::wire::Result;

enum_with_unknown! {
    /// Transport service type of the requested connection (2 bits).
    pub enum TransportType(u8) {
        Rc = 0,
        Uc = 1,
        Rd = 2,
        /// "Extended": the type is in the extended transport type field (XRC).
        Extended = 3,
    }
}

mod field {
    pub const PRIMARY_PATH: usize = 52;
    pub const ALTERNATE_PATH: usize = 96;
    pub const PATH_LEN: usize = 44;
}

cm_packet! {
    private: 140;
    local_comm_id, set_local_comm_id: u32 = u32 0;
    service_id, set_service_id: u64 = u64 8;
    local_ca_guid, set_local_ca_guid: u64 = u64 16;
    local_qkey, set_local_qkey: u32 = u32 28;
    /// 24 bits.
    local_qpn, set_local_qpn: u32 = u24 32;
    /// RDMA reads/atomics the sender accepts as responder.
    responder_resources, set_responder_resources: u8 = u8 35;
    local_eecn, set_local_eecn: u32 = u24 36;
    /// RDMA reads/atomics the sender will have outstanding as initiator.
    initiator_depth, set_initiator_depth: u8 = u8 39;
    remote_eecn, set_remote_eecn: u32 = u24 40;
    /// How long the passive side may take to answer: 4.096 us << this (5 bits).
    remote_cm_response_timeout, set_remote_cm_response_timeout: u8 = bits (43, 0xF8);
    transport_type_raw, set_transport_type_raw: u8 = bits (43, 0x06);
    flow_control, set_flow_control: bool = flag (43, 0x01);
    /// 24 bits: the PSN the sender's send queue starts at.
    starting_psn, set_starting_psn: u32 = u24 44;
    /// How long the sender takes to answer (5 bits).
    local_cm_response_timeout, set_local_cm_response_timeout: u8 = bits (47, 0xF8);
    /// Transport retries (3 bits).
    retry_count, set_retry_count: u8 = bits (47, 0x07);
    pkey, set_pkey: u16 = u16 48;
    /// IB MTU enum (1 = 256 .. 5 = 4096), 4 bits.
    path_mtu, set_path_mtu: u8 = bits (50, 0xF0);
    rdc_exists, set_rdc_exists: bool = flag (50, 0x08);
    /// RNR retries (3 bits; 7 is "infinite").
    rnr_retry_count, set_rnr_retry_count: u8 = bits (50, 0x07);
    /// CM message retries before giving up (4 bits).
    max_cm_retries, set_max_cm_retries: u8 = bits (51, 0xF0);
    srq, set_srq: bool = flag (51, 0x08);
    extended_transport_type, set_extended_transport_type: u8 = bits (51, 0x07);
    /// Alternate path migration supported (the alternate path's last byte).
    sap_supported, set_sap_supported: bool = flag (139, 0x04);
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn transport_type(&self) -> TransportType {
        TransportType::from_raw(self.transport_type_raw())
    }

    pub fn primary_path(&self) -> PathRepr {
        PathRepr::read(&self.buffer.as_ref()[field::PRIMARY_PATH..field::PRIMARY_PATH + field::PATH_LEN])
    }

    pub fn alternate_path(&self) -> PathRepr {
        PathRepr::read(&self.buffer.as_ref()[field::ALTERNATE_PATH..field::ALTERNATE_PATH + field::PATH_LEN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_transport_type(&mut self, value: TransportType) {
        self.set_transport_type_raw(value.to_raw());
    }

    pub fn set_primary_path(&mut self, path: &PathRepr) {
        path.write(&mut self.buffer.as_mut()[field::PRIMARY_PATH..field::PRIMARY_PATH + field::PATH_LEN]);
    }

    /// Writes the alternate path; SAP supported, which shares its last byte, is kept.
    pub fn set_alternate_path(&mut self, path: &PathRepr) {
        path.write(&mut self.buffer.as_mut()[field::ALTERNATE_PATH..field::ALTERNATE_PATH + field::PATH_LEN]);
    }
}

/// One path of a REQ (primary or alternate), as the sender sees it: "local" is the
/// sender's end. On RoCE the LIDs are zero and the GIDs carry the addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathRepr {
    pub local_lid: u16,
    pub remote_lid: u16,
    pub local_gid: [u8; 16],
    pub remote_gid: [u8; 16],
    /// 20 bits.
    pub flow_label: u32,
    /// 6 bits (IB rate enum).
    pub packet_rate: u8,
    pub traffic_class: u8,
    pub hop_limit: u8,
    /// 4 bits.
    pub sl: u8,
    pub subnet_local: bool,
    /// Transport ACK timeout, 4.096 us << this (5 bits).
    pub local_ack_timeout: u8,
}

impl PathRepr {
    /// Reads a path from its 44 bytes.
    fn read(b: &[u8]) -> PathRepr {
        use super::access::*;
        PathRepr {
            local_lid: u16::get(b, 0),
            remote_lid: u16::get(b, 2),
            local_gid: gid::get(b, 4),
            remote_gid: gid::get(b, 20),
            flow_label: u20::get(b, 36),
            packet_rate: bits::get(b, (39, 0x3F)),
            traffic_class: u8::get(b, 40),
            hop_limit: u8::get(b, 41),
            sl: bits::get(b, (42, 0xF0)),
            subnet_local: flag::get(b, (42, 0x08)),
            local_ack_timeout: bits::get(b, (43, 0xF8)),
        }
    }

    /// Writes a path into its 44 bytes; the reserved bits are cleared, the one bit of
    /// the last byte that is not the path's (SAP supported) is kept.
    fn write(&self, b: &mut [u8]) {
        use super::access::*;
        u16::set(b, 0, self.local_lid);
        u16::set(b, 2, self.remote_lid);
        gid::set(b, 4, self.local_gid);
        gid::set(b, 20, self.remote_gid);
        b[39] = 0;
        u20::set(b, 36, self.flow_label);
        bits::set(b, (39, 0x3F), self.packet_rate);
        u8::set(b, 40, self.traffic_class);
        u8::set(b, 41, self.hop_limit);
        b[42] = 0;
        bits::set(b, (42, 0xF0), self.sl);
        flag::set(b, (42, 0x08), self.subnet_local);
        b[43] &= 0x04;
        bits::set(b, (43, 0xF8), self.local_ack_timeout);
    }
}

/// A REQ as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReqRepr<'a> {
    pub local_comm_id: u32,
    pub service_id: u64,
    pub local_ca_guid: u64,
    pub local_qkey: u32,
    pub local_qpn: u32,
    pub responder_resources: u8,
    pub local_eecn: u32,
    pub initiator_depth: u8,
    pub remote_eecn: u32,
    pub remote_cm_response_timeout: u8,
    pub transport_type: TransportType,
    pub flow_control: bool,
    pub starting_psn: u32,
    pub local_cm_response_timeout: u8,
    pub retry_count: u8,
    pub pkey: u16,
    pub path_mtu: u8,
    pub rdc_exists: bool,
    pub rnr_retry_count: u8,
    pub max_cm_retries: u8,
    pub srq: bool,
    pub extended_transport_type: u8,
    pub primary_path: PathRepr,
    /// All zero when there is none (always, on RoCE).
    pub alternate_path: PathRepr,
    pub sap_supported: bool,
    /// Up to 92 bytes; a parsed REQ holds the whole area.
    pub private_data: &'a [u8],
}

impl<'a> ReqRepr<'a> {
    /// Reads a REQ.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<ReqRepr<'a>> {
        packet.check_len()?;
        Ok(ReqRepr {
            local_comm_id: packet.local_comm_id(),
            service_id: packet.service_id(),
            local_ca_guid: packet.local_ca_guid(),
            local_qkey: packet.local_qkey(),
            local_qpn: packet.local_qpn(),
            responder_resources: packet.responder_resources(),
            local_eecn: packet.local_eecn(),
            initiator_depth: packet.initiator_depth(),
            remote_eecn: packet.remote_eecn(),
            remote_cm_response_timeout: packet.remote_cm_response_timeout(),
            transport_type: packet.transport_type(),
            flow_control: packet.flow_control(),
            starting_psn: packet.starting_psn(),
            local_cm_response_timeout: packet.local_cm_response_timeout(),
            retry_count: packet.retry_count(),
            pkey: packet.pkey(),
            path_mtu: packet.path_mtu(),
            rdc_exists: packet.rdc_exists(),
            rnr_retry_count: packet.rnr_retry_count(),
            max_cm_retries: packet.max_cm_retries(),
            srq: packet.srq(),
            extended_transport_type: packet.extended_transport_type(),
            primary_path: packet.primary_path(),
            alternate_path: packet.alternate_path(),
            sap_supported: packet.sap_supported(),
            private_data: packet.private_data_in(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        super::MESSAGE_LEN
    }

    /// Writes the REQ, reserved bytes zeroed, into a packet at least `buffer_len()`
    /// long; fails when the private data does not fit.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        packet.clear();
        packet.set_private_data(self.private_data)?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_service_id(self.service_id);
        packet.set_local_ca_guid(self.local_ca_guid);
        packet.set_local_qkey(self.local_qkey);
        packet.set_local_qpn(self.local_qpn);
        packet.set_responder_resources(self.responder_resources);
        packet.set_local_eecn(self.local_eecn);
        packet.set_initiator_depth(self.initiator_depth);
        packet.set_remote_eecn(self.remote_eecn);
        packet.set_remote_cm_response_timeout(self.remote_cm_response_timeout);
        packet.set_transport_type(self.transport_type);
        packet.set_flow_control(self.flow_control);
        packet.set_starting_psn(self.starting_psn);
        packet.set_local_cm_response_timeout(self.local_cm_response_timeout);
        packet.set_retry_count(self.retry_count);
        packet.set_pkey(self.pkey);
        packet.set_path_mtu(self.path_mtu);
        packet.set_rdc_exists(self.rdc_exists);
        packet.set_rnr_retry_count(self.rnr_retry_count);
        packet.set_max_cm_retries(self.max_cm_retries);
        packet.set_srq(self.srq);
        packet.set_extended_transport_type(self.extended_transport_type);
        packet.set_primary_path(&self.primary_path);
        packet.set_alternate_path(&self.alternate_path);
        packet.set_sap_supported(self.sap_supported);
        Ok(())
    }
}
