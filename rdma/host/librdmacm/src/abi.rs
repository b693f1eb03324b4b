//! rdma-core 44's RDMA CM structs as the program sees them
//! (`rdma/rdma_cma.h`, `infiniband/sa.h`), written out by hand with the C
//! names, and [`layout_checks`]: every size and field offset as a C
//! expression and our value, which `tests/layout.rs` compiles against the
//! installed headers.
//!
//! The verbs structs (`ibv_qp_attr`, `ibv_qp_init_attr`, ...) are our
//! libibverbs' own definitions ([`ibv`], the same file, already checked
//! against `verbs.h` by that crate's tests): included as source, not linked,
//! so that no `ibv_*` function of that crate ends up in this library.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of};

use libc::{sockaddr_storage, socklen_t};

#[allow(dead_code, unused_imports, clippy::all)]
#[path = "../../libibverbs/src/abi.rs"]
pub mod ibv;

pub use ibv::Check;
use ibv::{ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_srq};

/// `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH`: "as much as the device allows".
pub const RDMA_MAX_RESP_RES: u8 = 0xff;
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xff;

/// `rdma_addrinfo::ai_flags`.
pub const RAI_PASSIVE: c_int = 1;
pub const RAI_NUMERICHOST: c_int = 2;
pub const RAI_NOROUTE: c_int = 4;
pub const RAI_FAMILY: c_int = 8;

/// `union ibv_gid` (two `__be64`: 8-byte aligned).
#[repr(C, align(8))]
#[derive(Clone, Copy, Default)]
pub struct ibv_gid {
    pub raw: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct rdma_ib_addr {
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    /// Network order.
    pub pkey: u16,
}

/// `struct rdma_addr`: each union is as large as a `sockaddr_storage`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addr {
    pub src_storage: sockaddr_storage,
    pub dst_storage: sockaddr_storage,
    pub ibaddr: rdma_ib_addr,
}

/// `struct ibv_sa_path_rec` (`infiniband/sa.h`), the route's one path.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_sa_path_rec {
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_route {
    pub addr: rdma_addr,
    pub path_rec: *mut ibv_sa_path_rec,
    pub num_paths: c_int,
}

/// `struct rdma_event_channel`: only the fd is public.
#[repr(C)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

#[repr(C)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub route: rdma_route,
    /// `enum rdma_port_space`.
    pub ps: c_int,
    pub port_num: u8,
    pub event: *mut rdma_cm_event,
    pub send_cq_channel: *mut ibv_comp_channel,
    pub send_cq: *mut ibv_cq,
    pub recv_cq_channel: *mut ibv_comp_channel,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub pd: *mut ibv_pd,
    /// `enum ibv_qp_type`.
    pub qp_type: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ud_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The `param` union of `struct rdma_cm_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    pub conn: rdma_conn_param,
    pub ud: rdma_ud_param,
}

#[repr(C)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    /// `enum rdma_cm_event_type`.
    pub event: c_int,
    pub status: c_int,
    pub param: rdma_cm_event_param,
}

#[repr(C)]
pub struct rdma_addrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    pub ai_src_len: socklen_t,
    pub ai_dst_len: socklen_t,
    pub ai_src_addr: *mut libc::sockaddr,
    pub ai_dst_addr: *mut libc::sockaddr,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: usize,
    pub ai_route: *mut c_void,
    pub ai_connect_len: usize,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut rdma_addrinfo,
}

/// `struct ibv_ece` (`verbs.h`), for the ECE calls.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_ece {
    pub vendor_id: u32,
    pub options: u32,
    pub comp_mask: u32,
}

macro_rules! checks {
    ($v:ident; $($ty:ident { $($f:ident),* $(,)? })*) => {$(
        $v.push(Check { c_expr: concat!("sizeof(struct ", stringify!($ty), ")").to_string(), ours: size_of::<$ty>() });
        $($v.push(Check {
            c_expr: concat!("offsetof(struct ", stringify!($ty), ", ", stringify!($f), ")").to_string(),
            ours: offset_of!($ty, $f),
        });)*
    )*};
}

/// Every size and offset of the structs above, as C expressions over
/// `rdma/rdma_cma.h` and the value our definitions give them.
pub fn layout_checks() -> Vec<Check> {
    let mut v = Vec::new();
    checks!(v;
        rdma_ib_addr { sgid, dgid, pkey }
        ibv_sa_path_rec { dgid, sgid, dlid, slid, raw_traffic, flow_label, hop_limit, traffic_class, reversible,
            numb_path, pkey, sl, mtu_selector, mtu, rate_selector, rate, packet_life_time_selector, packet_life_time,
            preference }
        rdma_route { addr, path_rec, num_paths }
        rdma_event_channel { fd }
        rdma_cm_id { verbs, channel, context, qp, route, ps, port_num, event, send_cq_channel, send_cq,
            recv_cq_channel, recv_cq, srq, pd, qp_type }
        rdma_conn_param { private_data, private_data_len, responder_resources, initiator_depth, flow_control,
            retry_count, rnr_retry_count, srq, qp_num }
        rdma_ud_param { private_data, private_data_len, ah_attr, qp_num, qkey }
        rdma_cm_event { id, listen_id, event, status, param }
        rdma_addrinfo { ai_flags, ai_family, ai_qp_type, ai_port_space, ai_src_len, ai_dst_len, ai_src_addr,
            ai_dst_addr, ai_src_canonname, ai_dst_canonname, ai_route_len, ai_route, ai_connect_len, ai_connect,
            ai_next }
        ibv_ece { vendor_id, options, comp_mask }
    );
    let extra = [
        ("sizeof(struct rdma_addr)", size_of::<rdma_addr>()),
        ("offsetof(struct rdma_addr, src_addr)", offset_of!(rdma_addr, src_storage)),
        ("offsetof(struct rdma_addr, dst_addr)", offset_of!(rdma_addr, dst_storage)),
        ("offsetof(struct rdma_addr, addr.ibaddr)", offset_of!(rdma_addr, ibaddr)),
        ("sizeof(union ibv_gid)", size_of::<ibv_gid>()),
        ("sizeof(((struct rdma_cm_event *)0)->param)", size_of::<rdma_cm_event_param>()),
        ("RDMA_MAX_RESP_RES", RDMA_MAX_RESP_RES as usize),
        ("RDMA_MAX_INIT_DEPTH", RDMA_MAX_INIT_DEPTH as usize),
        (
            "RAI_PASSIVE | RAI_NUMERICHOST << 4 | RAI_NOROUTE << 8 | RAI_FAMILY << 12",
            (RAI_PASSIVE | RAI_NUMERICHOST << 4 | RAI_NOROUTE << 8 | RAI_FAMILY << 12) as usize,
        ),
    ];
    v.extend(extra.iter().map(|(c, o)| Check { c_expr: (*c).to_string(), ours: *o }));
    v
}
