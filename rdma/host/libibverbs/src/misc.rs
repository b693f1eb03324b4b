//! The rest of the exported surface: strings, rates, fork control, the
//! sysfs files rdma-core's tools read, and what this appliance does not
//! offer (an error, as the C API allows): multicast, memory re-registration,
//! imports, ECE, and the `IBVERBS_PRIVATE_34` symbols of rdma-core's own
//! providers (libmlx5 and libefa are loaded by perftest and only need to
//! find them).

use std::ffi::{c_char, c_int, c_void};
use std::ptr::null_mut;

use crate::abi::*;
use crate::ffi::{c_str, guard, set_errno, static_cstr};

#[unsafe(no_mangle)]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    static_cstr(verbs::names::wc_status(status as u32))
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_event_type_str(ev: c_int) -> *const c_char {
    static_cstr(verbs::names::event_type(ev as u32))
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_node_type_str(t: c_int) -> *const c_char {
    static_cstr(match t {
        1 => "InfiniBand channel adapter",
        2 => "InfiniBand switch",
        3 => "InfiniBand router",
        4 => "iWARP NIC",
        5 => "usNIC",
        6 => "usNIC UDP",
        7 => "unspecified",
        _ => "unknown",
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_port_state_str(s: c_int) -> *const c_char {
    static_cstr(match s {
        0 => "PORT_NOP",
        1 => "PORT_DOWN",
        2 => "PORT_INIT",
        3 => "PORT_ARMED",
        4 => "PORT_ACTIVE",
        5 => "PORT_ACTIVE_DEFER",
        _ => "invalid state",
    })
}

/// `enum ibv_rate` and its multiple of 2.5 Gb/s and its Mb/s.
const RATES: &[(c_int, c_int, c_int)] = &[
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, 6, 14062),
    (12, 22, 56250),
    (13, 45, 112500),
    (14, 67, 168750),
    (15, 10, 25781),
    (16, 40, 103125),
    (17, 80, 206250),
    (18, 120, 309375),
    (19, 160, 412500),
    (20, 20, 50000),
    (21, 160, 400000),
    (22, 240, 600000),
    (23, 320, 800000),
    (24, 480, 1200000),
];

#[unsafe(no_mangle)]
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

#[unsafe(no_mangle)]
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    RATES.iter().find(|r| r.1 == mult).map_or(0, |r| r.0)
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

#[unsafe(no_mangle)]
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.2 == mbps).map_or(0, |r| r.0)
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    0 // IBV_FORK_DISABLED
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    static_cstr("/sys")
}

/// What rdma-core's tools read from sysfs about our devices; `None` for
/// files rxe does not have (`board_id`), as Linux answers.
fn sysfs(dir: &str, file: &str) -> Option<String> {
    let dev = dir.strip_prefix("/sys/class/infiniband/")?;
    let d = crate::state::devices().ok()?.into_iter().find(|&d| {
        // SAFETY: our devices live forever.
        let name = unsafe { std::ffi::CStr::from_ptr((*d).dev.name.as_ptr()) };
        name.to_str() == Ok(dev)
    })?;
    // SAFETY: as above.
    let guid = unsafe { (*d).node_guid };
    let g =
        |v: u64| format!("{:04x}:{:04x}:{:04x}:{:04x}", v >> 48, (v >> 32) & 0xffff, (v >> 16) & 0xffff, v & 0xffff);
    match file {
        "node_type" => Some("1: CA".into()),
        "node_guid" | "sys_image_guid" => Some(g(guid)),
        "fw_ver" => Some("0.0.0".into()),
        "node_desc" => Some(format!("{dev} appliance")),
        _ => None,
    }
}

/// # Safety
/// `dir` and `file` are C strings; `buf` holds `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    guard(-1, || {
        // SAFETY: the program's strings (C API).
        let (Some(dir), Some(file)) = (unsafe { c_str(dir) }, unsafe { c_str(file) }) else { return -1 };
        let Some(text) = sysfs(dir, file) else {
            set_errno(libc::ENOENT);
            return -1;
        };
        if buf.is_null() || size == 0 {
            return -1;
        }
        let n = text.len().min(size - 1);
        // SAFETY: `n + 1 <= size` bytes of the program's buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, n);
            *buf.add(n) = 0;
        }
        n as c_int
    })
}

/// # Safety
/// As [`ibv_read_sysfs_file`], for `ibdev_path/file` of `dev`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_read_ibdev_sysfs_file(
    buf: *mut c_char,
    size: usize,
    dev: *mut ibv_device,
    file: *const c_char,
) -> c_int {
    if dev.is_null() {
        return -1;
    }
    // SAFETY: our device's path, a NUL-terminated array.
    unsafe { ibv_read_sysfs_file((*dev).ibdev_path.as_ptr(), file, buf, size) }
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_resize_cq(_cq: *mut ibv_cq, _cqe: c_int) -> c_int {
    libc::EOPNOTSUPP
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_rereg_mr(
    _mr: *mut ibv_mr,
    _flags: c_int,
    _pd: *mut ibv_pd,
    _a: *mut c_void,
    _l: usize,
    _acc: c_int,
) -> c_int {
    libc::EOPNOTSUPP
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_query_ece(_qp: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_set_ece(_qp: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_query_qp_data_in_order(_qp: *mut ibv_qp, _op: c_int, _flags: u32) -> c_int {
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_resolve_eth_l2_from_gid() -> c_int {
    libc::EOPNOTSUPP
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_register_driver(_name: *const c_char, _init: *mut c_void) {}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_copy_qp_attr_from_kern(_dst: *mut c_void, _src: *mut c_void) {}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_copy_ah_attr_from_kern(_dst: *mut c_void, _src: *mut c_void) {}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_copy_path_rec_from_kern(_dst: *mut c_void, _src: *mut c_void) {}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_copy_path_rec_to_kern(_dst: *mut c_void, _src: *mut c_void) {}

/// Functions that return a pointer: null, errno `EOPNOTSUPP`.
macro_rules! null_stubs {
    ($($name:ident),* $(,)?) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $name() -> *mut c_void {
            set_errno(libc::EOPNOTSUPP);
            null_mut()
        }
    )*};
}

/// Functions that return an errno or a negative count: `EOPNOTSUPP`.
macro_rules! int_stubs {
    ($($name:ident),* $(,)?) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $name() -> c_int {
            libc::EOPNOTSUPP
        }
    )*};
}

/// Functions without a result.
macro_rules! void_stubs {
    ($($name:ident),* $(,)?) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $name() {}
    )*};
}

null_stubs!(
    ibv_import_device,
    ibv_import_pd,
    ibv_import_mr,
    ibv_import_dm,
    ibv_reg_dmabuf_mr,
    _verbs_init_and_alloc_context,
    verbs_open_device,
);

void_stubs!(
    ibv_unimport_pd,
    ibv_unimport_mr,
    ibv_unimport_dm,
    __verbs_log,
    verbs_register_driver_34,
    verbs_set_ops,
    verbs_uninit_context,
    verbs_init_cq
);

int_stubs!(
    __ioctl_final_num_attrs,
    execute_ioctl,
    verbs_allow_disassociate_destroy,
    ibv_cmd_advise_mr,
    ibv_cmd_alloc_dm,
    ibv_cmd_alloc_mw,
    ibv_cmd_alloc_pd,
    ibv_cmd_attach_mcast,
    ibv_cmd_close_xrcd,
    ibv_cmd_create_ah,
    ibv_cmd_create_counters,
    ibv_cmd_create_cq,
    ibv_cmd_create_cq_ex,
    ibv_cmd_create_flow,
    ibv_cmd_create_flow_action_esp,
    ibv_cmd_create_qp,
    ibv_cmd_create_qp_ex,
    ibv_cmd_create_qp_ex2,
    ibv_cmd_create_rwq_ind_table,
    ibv_cmd_create_srq,
    ibv_cmd_create_srq_ex,
    ibv_cmd_create_wq,
    ibv_cmd_dealloc_mw,
    ibv_cmd_dealloc_pd,
    ibv_cmd_dereg_mr,
    ibv_cmd_destroy_ah,
    ibv_cmd_destroy_counters,
    ibv_cmd_destroy_cq,
    ibv_cmd_destroy_flow,
    ibv_cmd_destroy_flow_action,
    ibv_cmd_destroy_qp,
    ibv_cmd_destroy_rwq_ind_table,
    ibv_cmd_destroy_srq,
    ibv_cmd_destroy_wq,
    ibv_cmd_detach_mcast,
    ibv_cmd_free_dm,
    ibv_cmd_get_context,
    ibv_cmd_modify_cq,
    ibv_cmd_modify_flow_action_esp,
    ibv_cmd_modify_qp,
    ibv_cmd_modify_qp_ex,
    ibv_cmd_modify_srq,
    ibv_cmd_modify_wq,
    ibv_cmd_open_qp,
    ibv_cmd_open_xrcd,
    ibv_cmd_poll_cq,
    ibv_cmd_post_recv,
    ibv_cmd_post_send,
    ibv_cmd_post_srq_recv,
    ibv_cmd_query_context,
    ibv_cmd_query_device_any,
    ibv_cmd_query_mr,
    ibv_cmd_query_port,
    ibv_cmd_query_qp,
    ibv_cmd_query_srq,
    ibv_cmd_read_counters,
    ibv_cmd_reg_dm_mr,
    ibv_cmd_reg_dmabuf_mr,
    ibv_cmd_reg_mr,
    ibv_cmd_req_notify_cq,
    ibv_cmd_rereg_mr,
    ibv_cmd_resize_cq,
);
