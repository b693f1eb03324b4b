//! Command encoding: the header every command and response slot starts with,
//! the command numbers, the status codes, and one request and one response
//! structure per command.
//!
//! A command slot is a [`CmdHeader`] followed by the command's request
//! structure; its response slot is a [`CmdHeader`] (same `cmd`, `ctx` and
//! `seq`, with `status` set) followed by the response structure when the
//! status is [`Status::OK`], and nothing otherwise. `len` counts the bytes
//! after the header. Command numbers follow Linux's `IB_USER_VERBS_CMD_*`
//! where uverbs has the command; appliance commands start at 0x80. Number 0
//! is never a command, so a zeroed slot is refused.
//!
//! Handles are 32-bit, never 0 (0 means "none" where a handle is optional),
//! and valid only in the context that created them.

use crate::abi::RingPlacement;
use crate::wire_struct;

/// A response status: 0 or a Linux errno value, with its name.
/// Unknown values are kept (a peer may send anything) and print as such.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Status(pub u16);

impl Status {
    pub const OK: Status = Status(0);
    /// Not permitted in this state (e.g. a context not attached).
    pub const EPERM: Status = Status(1);
    /// No such object in this context (unknown handle, a handle of another
    /// context, or a handle of another kind).
    pub const ENOENT: Status = Status(2);
    /// The provider failed internally.
    pub const EIO: Status = Status(5);
    /// Nothing to return yet (no async event pending).
    pub const EAGAIN: Status = Status(11);
    /// Out of memory: the queue area, the object table or the provider.
    pub const ENOMEM: Status = Status(12);
    /// An offset or length outside the region or outside the area it must lie in.
    pub const EFAULT: Status = Status(14);
    /// The object is still in use (a PD with MRs, a CQ with QPs).
    pub const EBUSY: Status = Status(16);
    /// The object already exists.
    pub const EEXIST: Status = Status(17);
    /// No such device.
    pub const ENODEV: Status = Status(19);
    /// A field of the request is invalid.
    pub const EINVAL: Status = Status(22);
    /// A table is full.
    pub const ENOSPC: Status = Status(28);
    /// A name does not fit its fixed-size field in the ABI.
    pub const ENAMETOOLONG: Status = Status(36);
    /// Unknown command number.
    pub const ENOSYS: Status = Status(38);
    /// The request's length is not the command's request size.
    pub const EMSGSIZE: Status = Status(90);
    /// The provider lacks the capability (driver op) the command needs.
    pub const EOPNOTSUPP: Status = Status(95);
    /// A destination address did not resolve (no ARP answer, or a GID
    /// with no way to find its MAC).
    pub const EADDRINUSE: Status = Status(98);
    pub const EADDRNOTAVAIL: Status = Status(99);
    pub const EHOSTUNREACH: Status = Status(113);

    const NAMES: [(Status, &'static str); 20] = [
        (Status::OK, "OK"),
        (Status::EPERM, "EPERM"),
        (Status::ENOENT, "ENOENT"),
        (Status::EIO, "EIO"),
        (Status::EAGAIN, "EAGAIN"),
        (Status::ENOMEM, "ENOMEM"),
        (Status::EFAULT, "EFAULT"),
        (Status::EBUSY, "EBUSY"),
        (Status::EEXIST, "EEXIST"),
        (Status::ENODEV, "ENODEV"),
        (Status::EINVAL, "EINVAL"),
        (Status::ENOSPC, "ENOSPC"),
        (Status::ENAMETOOLONG, "ENAMETOOLONG"),
        (Status::ENOSYS, "ENOSYS"),
        (Status::EMSGSIZE, "EMSGSIZE"),
        (Status::EOPNOTSUPP, "EOPNOTSUPP"),
        (Status::EADDRINUSE, "EADDRINUSE"),
        (Status::EADDRNOTAVAIL, "EADDRNOTAVAIL"),
        (Status::EHOSTUNREACH, "EHOSTUNREACH"),
        (Status(u16::MAX), "?"),
    ];

    /// The errno name (`"EINVAL"`), or `None` for a value this side does not know.
    pub fn name(self) -> Option<&'static str> {
        Status::NAMES[..Status::NAMES.len() - 1].iter().find(|(s, _)| *s == self).map(|(_, n)| *n)
    }

    /// A short description for tools.
    pub fn description(self) -> &'static str {
        match self {
            Status::OK => "success",
            Status::EPERM => "operation not permitted",
            Status::ENOENT => "no such object in this context",
            Status::EIO => "provider error",
            Status::EAGAIN => "try again",
            Status::ENOMEM => "out of memory",
            Status::EFAULT => "address outside the allowed area",
            Status::EBUSY => "object in use",
            Status::EEXIST => "already exists",
            Status::ENODEV => "no such device",
            Status::EINVAL => "invalid argument",
            Status::ENOSPC => "no space left in table",
            Status::ENAMETOOLONG => "name too long for the ring's name field",
            Status::ENOSYS => "unknown command",
            Status::EMSGSIZE => "request size does not match the command",
            Status::EOPNOTSUPP => "operation not supported by the device",
            Status::EADDRINUSE => "address or port already in use",
            Status::EADDRNOTAVAIL => "address not available on this appliance",
            Status::EHOSTUNREACH => "destination address did not resolve",
            _ => "unknown status",
        }
    }

    pub fn is_ok(self) -> bool {
        self == Status::OK
    }
}

impl core::fmt::Debug for Status {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Status({})", self.0),
        }
    }
}

impl core::fmt::Display for Status {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({})", self.description()),
            None => write!(f, "status {}", self.0),
        }
    }
}

/// Command numbers.
pub mod nr {
    pub const QUERY_DEVICE: u16 = 1;
    pub const QUERY_PORT: u16 = 2;
    pub const ALLOC_PD: u16 = 3;
    pub const DEALLOC_PD: u16 = 4;
    pub const CREATE_AH: u16 = 5;
    pub const DESTROY_AH: u16 = 8;
    pub const REG_MR: u16 = 9;
    pub const DEREG_MR: u16 = 13;
    /// `ibv_alloc_mw` (uverbs' number) (ABI 1.3).
    pub const ALLOC_MW: u16 = 14;
    /// `ibv_dealloc_mw` (ABI 1.3).
    pub const DEALLOC_MW: u16 = 15;
    pub const CREATE_CQ: u16 = 18;
    pub const DESTROY_CQ: u16 = 20;
    /// `ibv_attach_mcast` (uverbs' number) (ABI 1.3).
    pub const ATTACH_MCAST: u16 = 22;
    /// `ibv_detach_mcast` (ABI 1.3).
    pub const DETACH_MCAST: u16 = 23;
    pub const CREATE_QP: u16 = 24;
    pub const QUERY_QP: u16 = 25;
    pub const MODIFY_QP: u16 = 26;
    pub const DESTROY_QP: u16 = 27;
    pub const CREATE_SRQ: u16 = 32;
    pub const MODIFY_SRQ: u16 = 33;
    pub const DESTROY_SRQ: u16 = 35;
    /// Round trip with no effect (latency benchmark, liveness).
    pub const NOP: u16 = 0x80;
    pub const QUERY_GID: u16 = 0x81;
    /// One page of a port's GID table (a dump, like `ibv_query_gid_table`).
    pub const QUERY_GID_TABLE: u16 = 0x82;
    pub const QUERY_PKEY: u16 = 0x83;
    /// The next async event of this context (`ibv_get_async_event`).
    pub const GET_ASYNC_EVENT: u16 = 0x84;
    /// A port's hardware counters (`rdma statistic show`).
    pub const QUERY_COUNTERS: u16 = 0x85;
    /// Objects on a device in every context (`rdma resource show`).
    pub const QUERY_RESOURCES: u16 = 0x86;
    /// `ib_alloc_mr(IB_MR_TYPE_MEM_REG)`: a fast-register MR, born free
    /// (the kernel verb; uverbs has no number for it) (ABI 1.3).
    pub const ALLOC_MR: u16 = 0x87;
    /// `ib_map_mr_sg`: the page list the next REG_MR work request
    /// registers (ABI 1.3).
    pub const MAP_MR_SG: u16 = 0x88;
    /// One object of a kind on a device, or the next one: `rdma resource
    /// show qp|cq|mr|pd|cm_id|ctx|srq` (NLDEV RES_*_GET, a dump by paging) (ABI 1.4; contexts and SRQs 1.5).
    pub const RES_ENTRY: u16 = 0x89;
    /// `ibv_modify_srq` with `IBV_SRQ_MAX_WR`: the SRQ takes a new size and
    /// its receive ring a new placement of that many entries, the entries
    /// the firmware had not taken moved into it (uverbs' MODIFY_SRQ, whose
    /// rxe driver data likewise hands back the resized queue's mmap info)
    /// (ABI 1.6).
    pub const RESIZE_SRQ: u16 = 0x8a;
    /// `rdma link add NAME type TYPE netdev NETDEV` (NLDEV NEWLINK).
    pub const LINK_ADD: u16 = 0x90;
    /// `rdma link delete` (NLDEV DELLINK).
    pub const LINK_DEL: u16 = 0x91;
    /// One device's link, or the next one (NLDEV GET + PORT_GET, dump by paging).
    pub const LINK_SHOW: u16 = 0x92;
    // RDMA CM (ucma): 0xA0 + `RDMA_USER_CM_CMD_*` of the same name, so the
    // order is ucma's. Structures in [`crate::cm`].
    /// `rdma_create_id`: a new CM id of this context.
    pub const CM_CREATE_ID: u16 = 0xa0;
    /// `rdma_destroy_id`: a connected id sends DREQ, a connecting one REJ.
    pub const CM_DESTROY_ID: u16 = 0xa1;
    /// `rdma_bind_addr` (ucma BIND_IP).
    pub const CM_BIND: u16 = 0xa2;
    /// `rdma_resolve_addr` (ucma RESOLVE_IP).
    pub const CM_RESOLVE_ADDR: u16 = 0xa3;
    pub const CM_RESOLVE_ROUTE: u16 = 0xa4;
    pub const CM_QUERY_ROUTE: u16 = 0xa5;
    pub const CM_CONNECT: u16 = 0xa6;
    pub const CM_LISTEN: u16 = 0xa7;
    pub const CM_ACCEPT: u16 = 0xa8;
    pub const CM_REJECT: u16 = 0xa9;
    pub const CM_DISCONNECT: u16 = 0xaa;
    pub const CM_INIT_QP_ATTR: u16 = 0xab;
    /// The next CM event of this context (`EAGAIN` when none).
    pub const CM_GET_EVENT: u16 = 0xac;
}

wire_struct! {
    /// The first 16 bytes of every command and response slot.
    pub struct CmdHeader, size 16 {
        /// A command number ([`nr`]).
        pub cmd: u16,
        /// Zero (reserved for flags).
        pub flags: u16,
        /// Bytes after the header.
        pub len: u16,
        /// Zero in a command; the [`Status`] in a response.
        pub status: u16,
        /// The context the command is sent in (its slot index); checked.
        pub ctx: u32,
        /// Chosen by the host, echoed in the response.
        pub seq: u32,
    }
}

/// Size of [`CmdHeader`].
pub const HEADER_SIZE: usize = 16;

wire_struct! {
    /// No payload (NOP, GET_ASYNC_EVENT requests; destroy responses).
    pub struct Empty, size 0 {}
}

wire_struct! {
    /// A request naming one object by handle (DEALLOC_PD, DEREG_MR,
    /// DESTROY_CQ, DESTROY_SRQ, DESTROY_AH).
    pub struct HandleReq, size 8 {
        pub handle: u32,
        pub reserved: u32,
    }
}

wire_struct! {
    /// A request naming a device (QUERY_DEVICE, ALLOC_PD, LINK_DEL).
    pub struct DevReq, size 8 {
        pub dev_index: u32,
        pub reserved: u32,
    }
}

wire_struct! {
    /// A request naming a port (QUERY_PORT, QUERY_COUNTERS).
    pub struct PortReq, size 8 {
        pub dev_index: u32,
        pub port_num: u32,
    }
}

wire_struct! {
    /// A response carrying one new handle (ALLOC_PD, CREATE_AH, LINK_ADD).
    pub struct HandleResp, size 8 {
        pub handle: u32,
        pub reserved: u32,
    }
}

wire_struct! {
    /// `struct ibv_device_attr` (QUERY_DEVICE response).
    pub struct DeviceAttr, size 184 {
        /// `major.minor.sub` in bits 47..32, 31..16, 15..0.
        pub fw_ver: u64,
        pub node_guid: u64,
        pub sys_image_guid: u64,
        pub max_mr_size: u64,
        pub page_size_cap: u64,
        pub device_cap_flags: u64,
        pub vendor_id: u32,
        pub vendor_part_id: u32,
        pub hw_ver: u32,
        pub max_qp: u32,
        pub max_qp_wr: u32,
        pub max_sge: u32,
        pub max_sge_rd: u32,
        pub max_cq: u32,
        pub max_cqe: u32,
        pub max_mr: u32,
        pub max_pd: u32,
        pub max_qp_rd_atom: u32,
        pub max_ee_rd_atom: u32,
        pub max_res_rd_atom: u32,
        pub max_qp_init_rd_atom: u32,
        pub max_ee_init_rd_atom: u32,
        /// `enum ibv_atomic_cap`: 0 none, 1 HCA, 2 global.
        pub atomic_cap: u32,
        pub max_ee: u32,
        pub max_rdd: u32,
        pub max_mw: u32,
        pub max_raw_ipv6_qp: u32,
        pub max_raw_ethy_qp: u32,
        pub max_mcast_grp: u32,
        pub max_mcast_qp_attach: u32,
        pub max_total_mcast_qp_attach: u32,
        pub max_ah: u32,
        pub max_fmr: u32,
        pub max_map_per_fmr: u32,
        pub max_srq: u32,
        pub max_srq_wr: u32,
        pub max_srq_sge: u32,
        pub max_fast_reg_page_list_len: u32,
        pub max_pkeys: u16,
        pub local_ca_ack_delay: u8,
        pub phys_port_cnt: u8,
        /// Completion vectors of the device (`ibv_context.num_comp_vectors`,
        /// which `ibv_devinfo -v` prints); 0 from firmware older than the field.
        pub num_comp_vectors: u32,
    }
}

wire_struct! {
    /// `struct ibv_port_attr` (QUERY_PORT response).
    pub struct PortAttr, size 56 {
        /// `enum ibv_port_state`: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE.
        pub state: u32,
        /// `enum ibv_mtu`: 1 = 256 .. 5 = 4096.
        pub max_mtu: u32,
        pub active_mtu: u32,
        pub gid_tbl_len: u32,
        pub port_cap_flags: u32,
        pub max_msg_sz: u32,
        pub bad_pkey_cntr: u32,
        pub qkey_viol_cntr: u32,
        pub pkey_tbl_len: u32,
        pub lid: u16,
        pub sm_lid: u16,
        pub port_cap_flags2: u16,
        pub active_speed: u16,
        pub lmc: u8,
        pub max_vl_num: u8,
        pub sm_sl: u8,
        pub subnet_timeout: u8,
        pub init_type_reply: u8,
        pub active_width: u8,
        /// `phys_state`: 5 LINK_UP, 3 DISABLED, ...
        pub phys_state: u8,
        /// 1 InfiniBand, 2 Ethernet.
        pub link_layer: u8,
        pub flags: u8,
        pub reserved: [u8; 3],
    }
}

/// GID types (`GidEntry::gid_type`).
pub mod gid_type {
    /// RoCE v1 (`IBV_GID_TYPE_IB` / `IB_GID_TYPE_IB`).
    pub const ROCE_V1: u32 = 0;
    /// RoCE v2 (`IBV_GID_TYPE_ROCE_V2`).
    pub const ROCE_V2: u32 = 2;
}

wire_struct! {
    /// QUERY_GID and QUERY_PKEY request; QUERY_GID_TABLE's `index` is the
    /// first index to return.
    pub struct GidReq, size 16 {
        pub dev_index: u32,
        pub port_num: u32,
        pub index: u32,
        pub reserved: u32,
    }
}

wire_struct! {
    /// One GID table entry (`struct ibv_gid_entry`).
    pub struct GidEntry, size 32 {
        pub gid: [u8; 16],
        pub index: u32,
        /// One of [`gid_type`].
        pub gid_type: u32,
        /// The netdev the GID came from (`ndev_ifindex`).
        pub ndev_ifindex: u32,
        /// Nonzero for a valid entry (an empty slot is all zero).
        pub valid: u32,
    }
}

/// Entries per QUERY_GID_TABLE page.
pub const GID_PAGE: usize = 6;
/// `next` value meaning "no more entries".
pub const NO_MORE: u32 = u32::MAX;

wire_struct! {
    /// QUERY_GID_TABLE response: up to [`GID_PAGE`] valid entries at or after
    /// the requested index, and where to continue.
    pub struct GidTablePage, size 200 {
        pub count: u32,
        /// Index to ask for next, or [`NO_MORE`].
        pub next: u32,
        pub entries: [GidEntry; GID_PAGE],
    }
}

wire_struct! {
    /// QUERY_PKEY response.
    pub struct PkeyResp, size 8 {
        pub pkey: u16,
        pub reserved0: u16,
        pub reserved1: u32,
    }
}

/// `enum ibv_access_flags` (REG_MR `access`, QP `qp_access_flags`).
pub mod access {
    pub const LOCAL_WRITE: u32 = 1 << 0;
    pub const REMOTE_WRITE: u32 = 1 << 1;
    pub const REMOTE_READ: u32 = 1 << 2;
    pub const REMOTE_ATOMIC: u32 = 1 << 3;
    pub const MW_BIND: u32 = 1 << 4;
    pub const ZERO_BASED: u32 = 1 << 5;
    pub const ON_DEMAND: u32 = 1 << 6;
    /// IBA 1.5 FLUSH targets (ABI 1.3).
    pub const FLUSH_GLOBAL: u32 = 1 << 8;
    pub const FLUSH_PERSISTENT: u32 = 1 << 9;
    /// Every bit the ABI knows; others are refused.
    pub const ALL: u32 = ((1 << 7) - 1) | FLUSH_GLOBAL | FLUSH_PERSISTENT;
}

wire_struct! {
    /// REG_MR request: memory at region offset `start`, which must lie in the
    /// context's buffer area. The MR's iova is `start`.
    pub struct RegMrReq, size 32 {
        /// Region offset of the MR's first byte.
        pub start: u64,
        pub length: u64,
        pub pd_handle: u32,
        /// Bits of [`access`].
        pub access: u32,
        /// The address the MR's first byte has for work requests and peers
        /// (`hca_va`, the iova of `ibv_reg_mr_iova2`): the program's virtual
        /// address for the C ABI, `start` itself for the Rust library.
        pub iova: u64,
    }
}

wire_struct! {
    /// ALLOC_MR request: a fast-register MR in a PD for page lists of up
    /// to `max_num_sg` pages. Answered with a [`RegMrResp`] (lkey = rkey:
    /// the key a REG_MR work request's new key must share the index of).
    pub struct AllocMrReq, size 8 {
        pub pd_handle: u32,
        pub max_num_sg: u32,
    }
}

wire_struct! {
    /// MAP_MR_SG request: `num_pages` little-endian `u64` region offsets at
    /// region offset `list_off`, each the start of a `page_size` page (a power
    /// of two, at least 4096, aligned to itself); the list and every page must
    /// lie in the context's buffer area. The MR's bytes are named from
    /// `iova`, `length` of them, starting `iova % page_size` into the first
    /// page. The MR must be free (never registered, or invalidated).
    pub struct MapMrSgReq, size 40 {
        pub mr_handle: u32,
        pub num_pages: u32,
        pub iova: u64,
        pub length: u64,
        pub page_size: u64,
        pub list_off: u64,
    }
}

wire_struct! {
    /// ATTACH_MCAST / DETACH_MCAST request: a UD QP and a multicast GID
    /// (IPv4-mapped 224.0.0.0/4 or IPv6 ff00::/8). RoCE has no multicast
    /// LIDs: `mlid` is ignored, as rxe ignores it.
    pub struct McastReq, size 24 {
        pub qp_handle: u32,
        pub mlid: u16,
        pub reserved: u16,
        pub gid: [u8; 16],
    }
}

/// `enum ibv_mw_type`.
pub mod mw_type {
    pub const TYPE_1: u32 = 1;
    pub const TYPE_2: u32 = 2;
}

wire_struct! {
    /// ALLOC_MW request.
    pub struct AllocMwReq, size 8 {
        pub pd_handle: u32,
        /// One of [`mw_type`].
        pub mw_type: u32,
    }
}

wire_struct! {
    /// ALLOC_MW response: the window's handle and its first rkey (a bind
    /// changes the key byte; the host library tracks it, as libibverbs does).
    pub struct AllocMwResp, size 8 {
        pub mw_handle: u32,
        pub rkey: u32,
    }
}

wire_struct! {
    /// REG_MR response.
    pub struct RegMrResp, size 16 {
        pub mr_handle: u32,
        pub lkey: u32,
        pub rkey: u32,
        pub reserved: u32,
    }
}

wire_struct! {
    /// CREATE_CQ request.
    pub struct CreateCqReq, size 24 {
        /// Returned in async events about this CQ (`cq_context`).
        pub user_handle: u64,
        pub dev_index: u32,
        /// Minimum number of entries.
        pub cqe: u32,
        pub comp_vector: u32,
        pub reserved: u32,
    }
}

wire_struct! {
    /// CREATE_CQ response: the CQ and its completion ring (firmware
    /// produces, host consumes [`Cqe`](crate::abi::Cqe)s).
    pub struct CreateCqResp, size 24 {
        pub cq_handle: u32,
        /// Actual capacity.
        pub cqe: u32,
        pub ring: RingPlacement,
    }
}

/// `enum ibv_qp_type`.
pub mod qp_type {
    pub const RC: u8 = 2;
    pub const UC: u8 = 3;
    pub const UD: u8 = 4;
}

wire_struct! {
    /// `struct ibv_qp_cap`.
    pub struct QpCap, size 20 {
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
    }
}

wire_struct! {
    /// CREATE_QP request (`struct ibv_qp_init_attr`).
    pub struct CreateQpReq, size 48 {
        /// Returned in async events about this QP (`qp_context`).
        pub user_handle: u64,
        pub pd_handle: u32,
        pub send_cq_handle: u32,
        pub recv_cq_handle: u32,
        /// 0 for none; with an SRQ the QP has no receive ring.
        pub srq_handle: u32,
        pub cap: QpCap,
        /// One of [`qp_type`].
        pub qp_type: u8,
        /// Nonzero: every send WQE completes (`sq_sig_all`).
        pub sq_sig_all: u8,
        pub reserved: [u8; 2],
    }
}

wire_struct! {
    /// CREATE_QP response: the QP, its actual capacities and its rings
    /// (host produces send and receive WQEs; `rq.entries == 0` with an SRQ).
    pub struct CreateQpResp, size 64 {
        pub qp_handle: u32,
        pub qp_num: u32,
        pub cap: QpCap,
        pub reserved: u32,
        pub sq: RingPlacement,
        pub rq: RingPlacement,
    }
}

wire_struct! {
    /// `struct ibv_ah_attr` with its GRH (`struct ibv_global_route`).
    pub struct AhAttr, size 32 {
        pub dgid: [u8; 16],
        pub flow_label: u32,
        pub sgid_index: u8,
        pub hop_limit: u8,
        pub traffic_class: u8,
        /// Nonzero when the GRH fields are valid (always for RoCE).
        pub is_global: u8,
        pub dlid: u16,
        pub sl: u8,
        pub src_path_bits: u8,
        pub static_rate: u8,
        pub port_num: u8,
        pub reserved: [u8; 2],
    }
}

/// `enum ibv_qp_state`.
pub mod qp_state {
    pub const RESET: u32 = 0;
    pub const INIT: u32 = 1;
    pub const RTR: u32 = 2;
    pub const RTS: u32 = 3;
    pub const SQD: u32 = 4;
    pub const SQE: u32 = 5;
    pub const ERR: u32 = 6;
}

/// `enum ibv_mig_state` (`QpAttr::path_mig_state`).
pub mod mig_state {
    pub const MIGRATED: u32 = 0;
    pub const REARM: u32 = 1;
    pub const ARMED: u32 = 2;
}

/// `enum ibv_qp_attr_mask`.
pub mod qp_attr_mask {
    pub const STATE: u32 = 1 << 0;
    pub const CUR_STATE: u32 = 1 << 1;
    pub const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const QKEY: u32 = 1 << 6;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const ALT_PATH: u32 = 1 << 14;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const PATH_MIG_STATE: u32 = 1 << 18;
    pub const CAP: u32 = 1 << 19;
    pub const DEST_QPN: u32 = 1 << 20;
    pub const RATE_LIMIT: u32 = 1 << 25;
    /// Every bit the ABI knows; others are refused.
    pub const ALL: u32 = ((1 << 21) - 1) | RATE_LIMIT;
}

wire_struct! {
    /// `struct ibv_qp_attr` (MODIFY_QP, QUERY_QP) but for the alternate
    /// path, which travels after it as an [`AltPath`] (ABI 1.6), so that
    /// this structure, and the requests and answers that embed it, keep
    /// their 1.5 layout.
    pub struct QpAttr, size 112 {
        /// One of [`qp_state`].
        pub qp_state: u32,
        pub cur_qp_state: u32,
        /// `enum ibv_mtu`.
        pub path_mtu: u32,
        pub path_mig_state: u32,
        pub qkey: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        pub dest_qp_num: u32,
        /// Bits of [`access`].
        pub qp_access_flags: u32,
        pub rate_limit: u32,
        pub cap: QpCap,
        pub ah_attr: AhAttr,
        pub pkey_index: u16,
        pub sq_draining: u8,
        pub max_rd_atomic: u8,
        pub max_dest_rd_atomic: u8,
        pub min_rnr_timer: u8,
        pub port_num: u8,
        pub timeout: u8,
        pub retry_cnt: u8,
        pub rnr_retry: u8,
        pub en_sqd_async_notify: u8,
        pub reserved: [u8; 9],
    }
}

wire_struct! {
    /// The alternate path of `struct ibv_qp_attr` (`IBV_QP_ALT_PATH`; ABI
    /// 1.6): the address vector, P_Key index, port and local ACK timeout
    /// an armed connected QP migrates to (IBA vol. 1 17.2.8).
    pub struct AltPath, size 40 {
        pub alt_ah_attr: AhAttr,
        pub alt_pkey_index: u16,
        pub alt_port_num: u8,
        pub alt_timeout: u8,
        pub reserved: [u8; 4],
    }
}

/// MODIFY_QP's request size before ABI 1.6 (no [`AltPath`]): the firmware
/// still takes it, reading the alternate path as zeros, as uverbs
/// zero-extends an older program's shorter command.
pub const MODIFY_QP_REQ_1_5: usize = core::mem::size_of::<ModifyQpReq>() - core::mem::size_of::<AltPath>();

wire_struct! {
    /// MODIFY_QP request; QUERY_QP request uses the same header fields with
    /// a zero `attr`. `alt` is read only with [`qp_attr_mask::ALT_PATH`];
    /// a host leaves it zero otherwise, so firmware older than 1.6 (which
    /// accepts the longer request when the extra bytes are zero) still
    /// takes it.
    pub struct ModifyQpReq, size 160 {
        pub qp_handle: u32,
        /// Bits of [`qp_attr_mask`].
        pub attr_mask: u32,
        pub attr: QpAttr,
        pub alt: AltPath,
    }
}

wire_struct! {
    /// QUERY_QP request.
    pub struct QueryQpReq, size 8 {
        pub qp_handle: u32,
        /// Bits of [`qp_attr_mask`] the caller wants.
        pub attr_mask: u32,
    }
}

wire_struct! {
    /// QUERY_QP response: the attributes and the init attributes' caps,
    /// then (ABI 1.6) the alternate path.
    pub struct QueryQpResp, size 176 {
        pub attr: QpAttr,
        pub init_cap: QpCap,
        pub qp_type: u8,
        pub sq_sig_all: u8,
        pub reserved: [u8; 2],
        pub alt: AltPath,
    }
}

wire_struct! {
    /// DESTROY_QP / DESTROY_CQ / DESTROY_SRQ response: async events the
    /// firmware reported for the object (`events_reported`).
    pub struct DestroyResp, size 8 {
        pub events_reported: u32,
        pub reserved: u32,
    }
}

wire_struct! {
    /// CREATE_SRQ request (`struct ibv_srq_init_attr`).
    pub struct CreateSrqReq, size 24 {
        pub user_handle: u64,
        pub pd_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        pub srq_limit: u32,
    }
}

wire_struct! {
    /// CREATE_SRQ response: the SRQ and its receive ring.
    pub struct CreateSrqResp, size 32 {
        pub srq_handle: u32,
        pub srq_num: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        pub ring: RingPlacement,
    }
}

/// `enum ibv_srq_attr_mask`.
pub mod srq_attr_mask {
    pub const MAX_WR: u32 = 1 << 0;
    pub const LIMIT: u32 = 1 << 1;
    pub const ALL: u32 = MAX_WR | LIMIT;
}

wire_struct! {
    /// MODIFY_SRQ request (`struct ibv_srq_attr` and mask).
    pub struct ModifySrqReq, size 16 {
        pub srq_handle: u32,
        /// Bits of [`srq_attr_mask`].
        pub attr_mask: u32,
        pub max_wr: u32,
        pub srq_limit: u32,
    }
}

wire_struct! {
    /// RESIZE_SRQ request.
    pub struct ResizeSrqReq, size 8 {
        pub srq_handle: u32,
        /// The size asked for (`ibv_srq_attr::max_wr`); the ring gets the
        /// next power of two, as at creation.
        pub max_wr: u32,
    }
}

wire_struct! {
    /// RESIZE_SRQ response: the new size and ring. The ring holds the old
    /// one's unconsumed entries first, already published: the host's
    /// producer goes on from `moved`.
    pub struct ResizeSrqResp, size 24 {
        pub max_wr: u32,
        pub moved: u32,
        pub ring: RingPlacement,
    }
}

wire_struct! {
    /// CREATE_AH request.
    pub struct CreateAhReq, size 40 {
        pub pd_handle: u32,
        pub reserved: u32,
        pub attr: AhAttr,
    }
}

/// `enum ibv_event_type` (`AsyncEvent::event_type`).
pub mod event_type {
    pub const CQ_ERR: u32 = 0;
    pub const QP_FATAL: u32 = 1;
    pub const QP_REQ_ERR: u32 = 2;
    pub const QP_ACCESS_ERR: u32 = 3;
    pub const COMM_EST: u32 = 4;
    pub const SQ_DRAINED: u32 = 5;
    pub const PATH_MIG: u32 = 6;
    pub const PATH_MIG_ERR: u32 = 7;
    pub const DEVICE_FATAL: u32 = 8;
    pub const PORT_ACTIVE: u32 = 9;
    pub const PORT_ERR: u32 = 10;
    pub const LID_CHANGE: u32 = 11;
    pub const PKEY_CHANGE: u32 = 12;
    pub const SM_CHANGE: u32 = 13;
    pub const SRQ_ERR: u32 = 14;
    pub const SRQ_LIMIT_REACHED: u32 = 15;
    pub const QP_LAST_WQE_REACHED: u32 = 16;
    pub const CLIENT_REREGISTER: u32 = 17;
    pub const GID_CHANGE: u32 = 18;
}

wire_struct! {
    /// GET_ASYNC_EVENT response (`struct ibv_async_event`).
    pub struct AsyncEvent, size 24 {
        /// The object's `user_handle`, or the port number for port events.
        pub element: u64,
        /// One of [`event_type`].
        pub event_type: u32,
        /// The object's handle in this context (0 for port events).
        pub handle: u32,
        /// The device the event is about.
        pub dev_index: u32,
        /// Events dropped before this one because the queue was full.
        pub dropped: u32,
    }
}

/// Counters per QUERY_COUNTERS response.
pub const MAX_COUNTERS: usize = 16;

wire_struct! {
    /// QUERY_COUNTERS response: the device's counters in the order of the
    /// core's `RxeCounter::ALL` (`sent_pkts`, `rcvd_pkts`, ...).
    pub struct CountersResp, size 136 {
        pub num_counters: u32,
        pub reserved: u32,
        pub values: [u64; MAX_COUNTERS],
    }
}

wire_struct! {
    /// QUERY_RESOURCES response: objects on one device in the whole
    /// appliance, every context included.
    pub struct ResourceCounts, size 32 {
        /// By kind, in teardown order: qp, ah, srq, mr, cq, pd.
        pub counts: [u32; 6],
        /// Contexts owning at least one object on the device.
        pub contexts: u32,
        /// RDMA CM ids in the whole appliance: the dispatcher binds them to
        /// no device (0 from a firmware that does not count them).
        pub reserved: u32,
    }
}

/// The kinds RES_ENTRY lists (`ResEntryReq::kind`, `ResEntry::kind`), in
/// the order of Linux's `enum rdma_restrack_type`.
pub mod res_kind {
    pub const PD: u32 = 0;
    pub const CQ: u32 = 1;
    pub const QP: u32 = 2;
    pub const CM_ID: u32 = 3;
    pub const MR: u32 = 4;
    /// A host context that has objects on the device (`ctxn`, `pid`, `comm`).
    pub const CTX: u32 = 5;
    pub const SRQ: u32 = 6;
}

/// A CM id's `dev_index` when it is listed on every device (a wildcard
/// listener, as Linux lists its per-device listeners).
pub const RES_ANY_DEV: u32 = u32::MAX;

/// How many runs of consecutive QPNs an SRQ entry carries
/// ([`ResEntry::srq_qps`]).
pub const SRQ_QP_RUNS: usize = 8;

/// Who owns a listed object (`ResEntry::owner`).
pub mod res_owner {
    /// A host context: `ctxn`, `pid` and `comm` (the name the host gave
    /// when it attached) say which.
    pub const USER: u8 = 0;
    /// The appliance itself (Linux's kernel objects, `comm [ib_core]`):
    /// `comm` is the owning module's name, there is no pid or context.
    pub const KERNEL: u8 = 1;
}

/// Largest `ResEntry` cursor of a host object: the dispatcher's handles.
/// The provider's own objects (the GSI QP) follow from [`RES_KERNEL_CURSOR`].
pub const RES_KERNEL_CURSOR: u32 = 0x8000_0000;

wire_struct! {
    /// RES_ENTRY request: the first object of `kind` on `dev_index` whose
    /// cursor is at least `cursor` (0 for the first).
    pub struct ResEntryReq, size 16 {
        pub dev_index: u32,
        /// One of [`res_kind`].
        pub kind: u32,
        pub cursor: u32,
        pub reserved: u32,
    }
}

wire_struct! {
    /// RES_ENTRY response: one object as Linux's nldev describes it (one
    /// `rdma resource show` line); fields a kind does not have are zero.
    /// Which fields a line prints follows from the kind, the QP type and
    /// the owner, as nldev decides which attributes to send.
    pub struct ResEntry, size 216 {
        /// MR: its length (`mrlen`).
        pub mrlen: u64,
        /// One of [`res_kind`].
        pub kind: u32,
        pub dev_index: u32,
        /// QP: its port (0 before INIT: no port, as Linux).
        pub port: u32,
        /// The cursor of the next object of this kind on the device, or
        /// [`NO_MORE`].
        pub next: u32,
        /// `lqpn`, `cqn`, `mrn`, `pdn`: the object's number.
        pub num: u32,
        /// The owning context (`ctxn`); 0 for the appliance's own objects.
        pub ctxn: u32,
        /// The owning host process (`pid`); 0 when unknown or the appliance's.
        pub pid: u32,
        /// QP, MR: the number of their PD (`pdn`).
        pub pdn: u32,
        /// QP (RC, UC): `rqpn`, `rq-psn`; `sq-psn`.
        pub rqpn: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        /// CQ: `cqe`.
        pub cqe: u32,
        /// CQ, PD: objects using it (`users`).
        pub users: u32,
        /// MR: `lkey`, `rkey`; PD: `local_dma_lkey` in `lkey`.
        pub lkey: u32,
        pub rkey: u32,
        /// QP: one of [`qp_state`]; CM id: `enum rdma_cm_state` as Linux 6.1
        /// numbers it (IDLE 0 .. ADDR_BOUND 7, LISTEN 8, ...).
        /// `path-mig-state`: `enum ibv_mig_state`.
        pub state: u8,
        pub path_mig_state: u8,
        /// QP: `enum ib_qp_type` (2 RC, 3 UC, 4 UD, 1 GSI).
        pub qp_type: u8,
        /// One of [`res_owner`].
        pub owner: u8,
        /// CQ of the appliance's: `enum ib_poll_context` (`poll-ctx`).
        pub poll_ctx: u8,
        pub reserved0: [u8; 3],
        /// The owner's command name (`comm`), NUL-padded; the firmware
        /// keeps only printable ASCII of what a host wrote.
        pub comm: [u8; 16],
        /// CM id: its port space (`enum rdma_ucm_port_space`: 0x106 TCP,
        /// 0x111 UDP, 0x2 IPoIB, 0x3f IB).
        pub ps: u16,
        pub reserved: [u8; 2],
        /// CM id: its source and destination (family 0: none).
        pub src: crate::cm::CmSockAddr,
        pub dst: crate::cm::CmSockAddr,
        /// SRQ: `enum ib_srq_type` (0 BASIC, 1 XRC, 2 TM).
        pub srq_type: u8,
        /// SRQ: how many of [`ResEntry::srq_qps`] are used.
        pub srq_runs: u8,
        /// SRQ: 1 when its QPs made more runs than fit (the list is cut
        /// there, as iproute2 cuts its own text).
        pub srq_runs_cut: u8,
        pub reserved1: u8,
        /// SRQ: the QPs that take their receives from it, as nldev sends
        /// them: runs of consecutive QPNs `[first, last]` in creation order.
        pub srq_qps: [[u32; 2]; SRQ_QP_RUNS],
        /// CM id: the QPN it connected or accepted with (`lqpn`; 0: none,
        /// and then no `qp-type` either).
        pub cm_lqpn: u32,
    }
}

/// QP1, the General Services Interface's QP (IBA 13.5.1): on every port.
pub const GSI_QPN: u32 = 1;

impl ResEntry {
    /// The firmware's own GSI QP1 on port 1 of `dev_index`, as Linux lists
    /// the kernel's: type GSI, state RTS, owned by `[ib_core]`.
    pub fn gsi(dev_index: u32, sq_psn: u32) -> Self {
        ResEntry {
            kind: res_kind::QP,
            dev_index,
            port: 1,
            num: GSI_QPN,
            // IB_QPT_GSI.
            qp_type: 1,
            state: qp_state::RTS as u8,
            sq_psn,
            owner: res_owner::KERNEL,
            comm: crate::wire::name_field("ib_core").unwrap_or_default(),
            ..Default::default()
        }
    }
}

/// Size of a device name field (Linux `IB_DEVICE_NAME_MAX` is 64; ours are short).
pub const DEV_NAME_LEN: usize = 32;
/// Size of a netdev name field (`IFNAMSIZ`).
pub const IFNAME_LEN: usize = 16;

wire_struct! {
    /// LINK_ADD request: NUL-padded names.
    pub struct LinkAddReq, size 64 {
        pub dev_name: [u8; DEV_NAME_LEN],
        pub link_type: [u8; 16],
        pub netdev: [u8; IFNAME_LEN],
    }
}

wire_struct! {
    /// LINK_SHOW request: the first device index to report (0 to start a dump).
    pub struct LinkShowReq, size 8 {
        pub dev_index: u32,
        pub port_num: u32,
    }
}

wire_struct! {
    /// LINK_SHOW response: one link (`rdma link show` line).
    pub struct LinkInfo, size 88 {
        pub node_guid: u64,
        pub sys_image_guid: u64,
        pub dev_index: u32,
        pub port_num: u32,
        /// `enum ibv_port_state`.
        pub port_state: u32,
        /// `phys_state`.
        pub phys_state: u32,
        pub netdev_index: u32,
        /// The next device index for a dump, or [`NO_MORE`].
        pub next: u32,
        pub dev_name: [u8; DEV_NAME_LEN],
        pub netdev: [u8; IFNAME_LEN],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Wire, to_bytes};
    use alloc::format;

    #[test]
    fn status_names() {
        assert_eq!(Status::EINVAL.name(), Some("EINVAL"));
        assert_eq!(Status(999).name(), None);
        assert_eq!(format!("{:?}", Status(999)), "Status(999)");
        assert_eq!(format!("{}", Status::EOPNOTSUPP), "EOPNOTSUPP (operation not supported by the device)");
        assert_eq!(Status(u16::MAX).name(), None);
    }

    #[test]
    fn header_byte_image() {
        let h = CmdHeader { cmd: nr::NOP, flags: 0, len: 0, status: 22, ctx: 3, seq: 0x0102_0304 };
        let b: [u8; 16] = to_bytes(&h).unwrap();
        assert_eq!(b, [0x80, 0, 0, 0, 0, 0, 22, 0, 3, 0, 0, 0, 4, 3, 2, 1]);
        assert_eq!(CmdHeader::decode(&b), Some(h));
    }

    #[test]
    fn largest_structures_fit_a_minimal_slot() {
        for size in [DeviceAttr::SIZE, GidTablePage::SIZE, QueryQpResp::SIZE, ModifyQpReq::SIZE, CountersResp::SIZE] {
            assert!(HEADER_SIZE + size <= crate::abi::MIN_CMD_SLOT as usize, "{size}");
        }
    }
}
