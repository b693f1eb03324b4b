//! The RDMA CM commands' wire structures (Linux's ucma ABI,
//! `include/uapi/rdma/rdma_user_cm.h`, in this ring's style): socket
//! addresses, connection parameters with private data, the route, the
//! event, and the request of each `CM_*` command in [`crate::cmd::nr`].
//!
//! As in ucma, the firmware never modifies a host's QP: the host library
//! asks CM_INIT_QP_ATTR for the attributes of each transition and modifies
//! its own QP, as librdmacm does. Events are polled (CM_GET_EVENT answers
//! `EAGAIN` when none is pending), like GET_ASYNC_EVENT.
//!
//! Sizes are chosen so that every request and response fits the smallest
//! command slot (256 bytes, 240 after the header): the largest private
//! data of any CM message a user gives or receives is the REP's 196 bytes
//! (IBTA vol 1 12.6.8), so the event carries exactly that much room. The
//! UD peer's address handle is not in the event (it would not fit next to
//! 196 bytes): it is the route's, CM_QUERY_ROUTE's `ah_attr`, as Linux
//! builds `param.ud.ah_attr` from the path record.

use crate::cmd::{AhAttr, QpAttr};
use crate::wire::Bytes;
use crate::wire_struct;

/// Address families (`CmSockAddr::family`), Linux's numbers.
pub mod af {
    /// No address (an optional source address left out).
    pub const UNSPEC: u16 = 0;
    pub const INET: u16 = 2;
    pub const INET6: u16 = 10;
}

/// Port spaces (`enum rdma_ucm_port_space`): the service ID is
/// `0x0000_0000_0PPP_pppp` with the port space in bits 31..16 and the port
/// below (IBTA annex A3, RDMA IP CM service).
pub mod port_space {
    pub const IPOIB: u16 = 0x0002;
    /// RC and UC ids (`RDMA_PS_TCP`).
    pub const TCP: u16 = 0x0106;
    /// UD ids (`RDMA_PS_UDP`), connected with SIDR.
    pub const UDP: u16 = 0x0111;
    pub const IB: u16 = 0x013f;

    /// Whether the ABI knows `ps`.
    pub fn is_known(ps: u16) -> bool {
        matches!(ps, IPOIB | TCP | UDP | IB)
    }
}

/// `enum rdma_cm_event_type` (`CmEvent::event`), Linux's numbers.
pub mod cm_event {
    pub const ADDR_RESOLVED: u32 = 0;
    pub const ADDR_ERROR: u32 = 1;
    pub const ROUTE_RESOLVED: u32 = 2;
    pub const ROUTE_ERROR: u32 = 3;
    pub const CONNECT_REQUEST: u32 = 4;
    pub const CONNECT_RESPONSE: u32 = 5;
    pub const CONNECT_ERROR: u32 = 6;
    pub const UNREACHABLE: u32 = 7;
    pub const REJECTED: u32 = 8;
    pub const ESTABLISHED: u32 = 9;
    pub const DISCONNECTED: u32 = 10;
    pub const DEVICE_REMOVAL: u32 = 11;
    pub const MULTICAST_JOIN: u32 = 12;
    pub const MULTICAST_ERROR: u32 = 13;
    pub const ADDR_CHANGE: u32 = 14;
    pub const TIMEWAIT_EXIT: u32 = 15;

    /// librdmacm's `rdma_event_str` spelling.
    pub fn name(e: u32) -> &'static str {
        match e {
            ADDR_RESOLVED => "RDMA_CM_EVENT_ADDR_RESOLVED",
            ADDR_ERROR => "RDMA_CM_EVENT_ADDR_ERROR",
            ROUTE_RESOLVED => "RDMA_CM_EVENT_ROUTE_RESOLVED",
            ROUTE_ERROR => "RDMA_CM_EVENT_ROUTE_ERROR",
            CONNECT_REQUEST => "RDMA_CM_EVENT_CONNECT_REQUEST",
            CONNECT_RESPONSE => "RDMA_CM_EVENT_CONNECT_RESPONSE",
            CONNECT_ERROR => "RDMA_CM_EVENT_CONNECT_ERROR",
            UNREACHABLE => "RDMA_CM_EVENT_UNREACHABLE",
            REJECTED => "RDMA_CM_EVENT_REJECTED",
            ESTABLISHED => "RDMA_CM_EVENT_ESTABLISHED",
            DISCONNECTED => "RDMA_CM_EVENT_DISCONNECTED",
            DEVICE_REMOVAL => "RDMA_CM_EVENT_DEVICE_REMOVAL",
            MULTICAST_JOIN => "RDMA_CM_EVENT_MULTICAST_JOIN",
            MULTICAST_ERROR => "RDMA_CM_EVENT_MULTICAST_ERROR",
            ADDR_CHANGE => "RDMA_CM_EVENT_ADDR_CHANGE",
            TIMEWAIT_EXIT => "RDMA_CM_EVENT_TIMEWAIT_EXIT",
            _ => "UNKNOWN EVENT",
        }
    }
}

/// Most private data bytes any CM message carries for the user (the REP's).
pub const MAX_PRIVATE_DATA: usize = 196;
/// Private data of a REQ left to an rdma_cm user: 92 bytes minus the
/// 36-byte `cma_hdr` (Linux's `IB_CM_REQ_PRIVATE_DATA_SIZE - sizeof(cma_hdr)`).
pub const REQ_PRIVATE_DATA: usize = 56;
/// Private data of a REP (IBTA 12.6.8).
pub const REP_PRIVATE_DATA: usize = 196;
/// Private data of a REJ (IBTA 12.6.7).
pub const REJ_PRIVATE_DATA: usize = 148;
/// Private data of a SIDR REQ left to the user: 216 minus the `cma_hdr`.
pub const SIDR_REQ_PRIVATE_DATA: usize = 180;
/// Private data of a SIDR REP (IBTA 12.11.2).
pub const SIDR_REP_PRIVATE_DATA: usize = 136;

wire_struct! {
    /// A socket address (`struct sockaddr_in` / `sockaddr_in6` reduced to
    /// its values). `port` is the port number itself (not in network
    /// order); `addr` holds the address bytes in network order, IPv4 in
    /// the first four.
    pub struct CmSockAddr, size 24 {
        /// One of [`af`].
        pub family: u16,
        pub port: u16,
        /// IPv6 scope (interface index for link-local addresses).
        pub scope_id: u32,
        pub addr: [u8; 16],
    }
}

impl CmSockAddr {
    pub fn ipv4(addr: [u8; 4], port: u16) -> CmSockAddr {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&addr);
        CmSockAddr { family: af::INET, port, scope_id: 0, addr: a }
    }

    pub fn ipv6(addr: [u8; 16], port: u16, scope_id: u32) -> CmSockAddr {
        CmSockAddr { family: af::INET6, port, scope_id, addr }
    }

    /// Whether the family is one a bound or destination address may have.
    pub fn is_ip(&self) -> bool {
        matches!(self.family, af::INET | af::INET6)
    }
}

wire_struct! {
    /// `struct rdma_conn_param` / `rdma_ud_param` without the peer's AH: what
    /// CM_CONNECT and CM_ACCEPT send, and what an event carries from the
    /// peer's REQ, REP, REJ, SIDR REQ or SIDR REP.
    pub struct CmConnParam, size 216 {
        /// The local QP (connect, accept); the peer's QP in an event.
        pub qp_num: u32,
        /// UD: the Q_Key (the peer's in an event).
        pub qkey: u32,
        pub responder_resources: u8,
        pub initiator_depth: u8,
        pub flow_control: u8,
        pub retry_count: u8,
        pub rnr_retry_count: u8,
        /// Nonzero when the QP uses an SRQ.
        pub srq: u8,
        /// Bytes of `private_data` in use (at most [`MAX_PRIVATE_DATA`]; each
        /// message allows less, see the `*_PRIVATE_DATA` constants).
        pub private_data_len: u8,
        pub reserved0: u8,
        pub private_data: Bytes<MAX_PRIVATE_DATA>,
        pub reserved1: u32,
    }
}

impl CmConnParam {
    /// The private data in use; `None` when `private_data_len` lies.
    pub fn private(&self) -> Option<&[u8]> {
        self.private_data.0.get(..usize::from(self.private_data_len))
    }

    /// Set the private data; `None` when it is longer than the field.
    pub fn with_private(mut self, data: &[u8]) -> Option<CmConnParam> {
        self.private_data = Bytes::from_slice(data)?;
        self.private_data_len = u8::try_from(data.len()).ok()?;
        Some(self)
    }
}

wire_struct! {
    /// CM_CREATE_ID request (`rdma_create_id`).
    pub struct CmCreateIdReq, size 16 {
        /// Returned in every event about the id (librdmacm's `uid`).
        pub uid: u64,
        /// One of [`port_space`].
        pub ps: u16,
        /// One of [`crate::cmd::qp_type`] (RC for TCP, UD for UDP).
        pub qp_type: u8,
        pub reserved0: u8,
        pub reserved1: u32,
    }
}

wire_struct! {
    /// CM_BIND request (`rdma_bind_addr`): port 0 asks for any port.
    pub struct CmBindReq, size 32 {
        pub handle: u32,
        pub reserved: u32,
        pub addr: CmSockAddr,
    }
}

wire_struct! {
    /// CM_RESOLVE_ADDR request (`rdma_resolve_addr`); an ADDR_RESOLVED or
    /// ADDR_ERROR event follows.
    pub struct CmResolveAddrReq, size 56 {
        pub handle: u32,
        pub timeout_ms: u32,
        /// Family [`af::UNSPEC`]: no source address (the route picks one).
        pub src: CmSockAddr,
        pub dst: CmSockAddr,
    }
}

wire_struct! {
    /// CM_RESOLVE_ROUTE request; a ROUTE_RESOLVED or ROUTE_ERROR event follows.
    pub struct CmResolveRouteReq, size 8 {
        pub handle: u32,
        pub timeout_ms: u32,
    }
}

wire_struct! {
    /// CM_LISTEN request (`rdma_listen`).
    pub struct CmListenReq, size 8 {
        pub handle: u32,
        pub backlog: u32,
    }
}

wire_struct! {
    /// CM_CONNECT request (`rdma_connect`): a REQ (RC) or SIDR REQ (UD).
    pub struct CmConnectReq, size 224 {
        pub handle: u32,
        pub reserved: u32,
        pub param: CmConnParam,
    }
}

wire_struct! {
    /// CM_ACCEPT request: on a CONNECT_REQUEST's id the REP (or SIDR REP);
    /// on the active side after CONNECT_RESPONSE the RTU (`param` unused).
    pub struct CmAcceptReq, size 232 {
        pub handle: u32,
        pub reserved: u32,
        /// The id's new `uid` from now on (librdmacm names its own id);
        /// 0 keeps the one it has.
        pub uid: u64,
        pub param: CmConnParam,
    }
}

wire_struct! {
    /// CM_REJECT request (`rdma_reject`): a REJ with consumer-defined
    /// reason, or a SIDR REP with status "rejected".
    pub struct CmRejectReq, size 156 {
        pub handle: u32,
        pub private_data_len: u8,
        pub reserved: [u8; 3],
        pub private_data: Bytes<REJ_PRIVATE_DATA>,
    }
}

impl CmRejectReq {
    /// The private data in use; `None` when `private_data_len` lies.
    pub fn private(&self) -> Option<&[u8]> {
        self.private_data.0.get(..usize::from(self.private_data_len))
    }
}

wire_struct! {
    /// CM_INIT_QP_ATTR request (`rdma_init_qp_attr`): the attributes that
    /// move the id's QP to `qp_state` (INIT, RTR or RTS).
    pub struct CmInitQpAttrReq, size 8 {
        pub handle: u32,
        /// One of [`crate::cmd::qp_state`].
        pub qp_state: u32,
    }
}

wire_struct! {
    /// CM_INIT_QP_ATTR response: what to pass to MODIFY_QP.
    pub struct CmInitQpAttrResp, size 120 {
        /// Bits of [`crate::cmd::qp_attr_mask`].
        pub attr_mask: u32,
        pub reserved: u32,
        pub attr: QpAttr,
    }
}

wire_struct! {
    /// CM_QUERY_ROUTE response (`rdma_cm_id.route`): the addresses, the
    /// device and port the id is bound to, and the path as an address
    /// handle toward the peer (the UD peer's AH; RC's comes in INIT_QP_ATTR).
    pub struct CmRoute, size 112 {
        pub src: CmSockAddr,
        pub dst: CmSockAddr,
        /// The device the id is bound to ([`NO_DEVICE`] before an address is
        /// bound or resolved).
        pub dev_index: u32,
        pub port_num: u32,
        pub sgid: [u8; 16],
        /// `dgid`, `sgid_index`, hop limit, traffic class, flow label of the path.
        pub ah_attr: AhAttr,
        pub pkey: u16,
        /// `enum ibv_mtu` of the path.
        pub path_mtu: u8,
        /// 1 once the route is resolved, 0 before.
        pub num_paths: u8,
        pub reserved: u32,
    }
}

/// `CmRoute::dev_index` of an id with no device yet.
pub const NO_DEVICE: u32 = u32::MAX;

wire_struct! {
    /// CM_GET_EVENT response (`struct rdma_cm_event`).
    pub struct CmEvent, size 240 {
        /// The id's `uid`; for CONNECT_REQUEST the listening id's.
        pub uid: u64,
        /// The id the event is about; for CONNECT_REQUEST the new id the
        /// request made (a handle of this context from now on).
        pub handle: u32,
        /// One of [`cm_event`].
        pub event: u32,
        /// 0, a negative errno (`-ETIMEDOUT`, ...), or for REJECTED the REJ
        /// reason (as Linux reports it).
        pub status: u32,
        pub reserved: u32,
        /// The peer's side: QPN, Q_Key, resources, private data.
        pub param: CmConnParam,
    }
}

impl CmEvent {
    /// `status` as Linux's signed value.
    pub fn status_i32(&self) -> i32 {
        self.status as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::HEADER_SIZE;
    use crate::wire::{Wire, to_bytes};

    #[test]
    fn every_cm_structure_fits_the_smallest_slot() {
        let room = crate::abi::MIN_CMD_SLOT as usize - HEADER_SIZE;
        for size in [
            CmConnectReq::SIZE,
            CmAcceptReq::SIZE,
            CmRejectReq::SIZE,
            CmEvent::SIZE,
            CmRoute::SIZE,
            CmInitQpAttrResp::SIZE,
            CmResolveAddrReq::SIZE,
        ] {
            assert!(size <= room, "{size}");
        }
        assert_eq!(CmEvent::SIZE, room);
    }

    #[test]
    fn sockaddr_byte_image() {
        let a = CmSockAddr::ipv4([10, 0, 0, 2], 7174);
        let b: [u8; 24] = to_bytes(&a).unwrap();
        assert_eq!(&b[..8], &[2, 0, 0x06, 0x1c, 0, 0, 0, 0]);
        assert_eq!(&b[8..12], &[10, 0, 0, 2]);
        assert!(b[12..].iter().all(|&x| x == 0));
        assert_eq!(CmSockAddr::decode(&b), Some(a));
        assert!(a.is_ip() && !CmSockAddr::default().is_ip());
    }

    #[test]
    fn conn_param_private_data_round_trip() {
        let p = CmConnParam { qp_num: 0x11, responder_resources: 1, ..Default::default() };
        let p = p.with_private(b"hello").unwrap();
        let b: [u8; 216] = to_bytes(&p).unwrap();
        assert_eq!(&b[..4], &[0x11, 0, 0, 0]);
        assert_eq!((b[8], b[14]), (1, 5));
        assert_eq!(&b[16..21], b"hello");
        let back = CmConnParam::decode(&b).unwrap();
        assert_eq!(back.private(), Some(&b"hello"[..]));
        assert!(p.with_private(&[0; MAX_PRIVATE_DATA + 1]).is_none());
        assert!(p.with_private(&[1; MAX_PRIVATE_DATA]).is_some());
        // A length beyond the field is caught, not trusted.
        let mut lying = b;
        lying[14] = 250;
        assert_eq!(CmConnParam::decode(&lying).unwrap().private(), None);
        let rej = CmRejectReq { private_data_len: 149, ..Default::default() };
        assert_eq!(rej.private(), None);
    }

    #[test]
    fn event_layout() {
        assert_eq!(core::mem::offset_of!(CmEvent, param), 24);
        let e =
            CmEvent { uid: 7, handle: 3, event: cm_event::REJECTED, status: (-110i32) as u32, ..Default::default() };
        let b: [u8; 240] = to_bytes(&e).unwrap();
        assert_eq!(&b[..16], &[7, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 8, 0, 0, 0]);
        assert_eq!(CmEvent::decode(&b).unwrap().status_i32(), -110);
        assert_eq!(cm_event::name(cm_event::TIMEWAIT_EXIT), "RDMA_CM_EVENT_TIMEWAIT_EXIT");
        assert_eq!(cm_event::name(99), "UNKNOWN EVENT");
    }
}
