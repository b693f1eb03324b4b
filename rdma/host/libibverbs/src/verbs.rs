//! The exported control path: devices, queries, PD, MR, CQ, completion
//! channels, QP, SRQ, AH, async events. Each function checks what it is
//! given, goes through the ring's commands, and answers as libibverbs does
//! (an errno return, or null with errno set).

use std::ffi::{c_char, c_int, c_void};
use std::ptr::null_mut;
use std::sync::Mutex;
use std::sync::atomic::AtomicU32;

use verbs_ring::abi::{CQE_SIZE, RecvWqe, SendWqe};
use verbs_ring::cmd::{self, nr};
use verbs_ring::ring::{Consumer, Producer};
use verbs_ring::wire::Wire;

use crate::abi::*;
use crate::channel::{self, ChanObj};
use crate::datapath;
use crate::ffi::{self, code, guard, minus_one, ptr_or_errno, set_errno};
use crate::mem;
use crate::mw;
use crate::state::*;

fn zeroed<T>() -> T {
    // SAFETY: only used for the plain-data C structs of `abi` (integers,
    // raw pointers, `Option<fn>`, pthread objects), for which all-zero is a
    // valid value (PTHREAD_*_INITIALIZER is all zero on glibc).
    unsafe { std::mem::zeroed() }
}

fn fw<Req: verbs_ring::wire::Wire, Resp: verbs_ring::wire::Wire>(
    sh: &Shared,
    n: u16,
    req: &Req,
) -> Result<Resp, c_int> {
    sh.ctx.command(n, req).map_err(|e| errno_of(&e))
}

fn destroy(sh: &Shared, n: u16, handle: u32) -> Result<(), c_int> {
    let req = cmd::HandleReq { handle, reserved: 0 };
    match n {
        nr::DESTROY_CQ | nr::DESTROY_QP | nr::DESTROY_SRQ => fw::<_, cmd::DestroyResp>(sh, n, &req).map(|_| ()),
        _ => fw::<_, cmd::Empty>(sh, n, &req).map(|_| ()),
    }
}

// ---- devices -------------------------------------------------------------

/// # Safety
/// `num` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    guard(null_mut(), || {
        let devs = devices().unwrap_or_default();
        // SAFETY: calloc of n + 1 pointers; freed by ibv_free_device_list.
        let list = unsafe { libc::calloc(devs.len() + 1, size_of::<*mut ibv_device>()) }.cast::<*mut ibv_device>();
        if list.is_null() {
            set_errno(libc::ENOMEM);
            return null_mut();
        }
        for (i, d) in devs.iter().enumerate() {
            // SAFETY: `i < devs.len()` entries of the array just allocated.
            unsafe { *list.add(i) = (*d).cast() };
        }
        if !num.is_null() {
            // SAFETY: the program's out pointer.
            unsafe { *num = devs.len() as c_int };
        }
        list
    })
}

/// # Safety
/// `list` came from [`ibv_get_device_list`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: the array was calloc'ed by ibv_get_device_list (the devices
    // themselves live for the whole process).
    unsafe { libc::free(list.cast()) }
}

/// # Safety
/// `dev` is a device of [`ibv_get_device_list`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    if dev.is_null() {
        return std::ptr::null();
    }
    // SAFETY: our devices live for the whole process.
    unsafe { (*dev).name.as_ptr() }
}

/// # Safety
/// `dev` is a device of [`ibv_get_device_list`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    if dev.is_null() {
        return 0;
    }
    // SAFETY: our devices are DevObj (the ibv_device first) and live forever.
    unsafe { (*dev.cast::<DevObj>()).node_guid.to_be() }
}

/// # Safety
/// `dev` is a device of [`ibv_get_device_list`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    if dev.is_null() {
        return -1;
    }
    // SAFETY: as ibv_get_device_guid.
    unsafe { (*dev.cast::<DevObj>()).index as c_int }
}

/// # Safety
/// `dev` is a device of [`ibv_get_device_list`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    guard(null_mut(), || ptr_or_errno(open_device(dev.cast())))
}

fn open_device(dev: *mut DevObj) -> Result<*mut ibv_context, c_int> {
    if dev.is_null() {
        return Err(libc::EINVAL);
    }
    let sh = shared()?;
    // SAFETY: our devices live forever.
    let dev_index = unsafe { (*dev).index };
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 writes two fds into the local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(libc::EMFILE);
    }
    let mut vctx: verbs_context = zeroed();
    vctx.query_port = Some(query_port_op);
    vctx.query_device_ex = Some(query_device_ex_op);
    vctx.create_qp_ex = Some(create_qp_ex_op);
    vctx.sz = size_of::<verbs_context>();
    let c = &mut vctx.context;
    c.device = dev.cast();
    c.ops.poll_cq = Some(datapath::poll_cq);
    c.ops.req_notify_cq = Some(datapath::req_notify_cq);
    c.ops.post_send = Some(datapath::post_send);
    c.ops.post_recv = Some(datapath::post_recv);
    c.ops.post_srq_recv = Some(datapath::post_srq_recv);
    c.ops.alloc_mw = Some(mw::alloc_mw);
    c.ops.bind_mw = Some(mw::bind_mw);
    c.ops.dealloc_mw = Some(mw::dealloc_mw);
    // The command "fd" is the async pipe's read end too: nothing reads it.
    c.cmd_fd = fds[0];
    c.async_fd = fds[0];
    c.num_comp_vectors = 1;
    c.abi_compat = VERBS_ABI_IS_EXTENDED;
    let obj = Box::new(CtxObj { vctx, sh, dev, dev_index, async_wfd: fds[1] });
    let p = Box::into_raw(obj);
    // SAFETY: just allocated.
    Ok(unsafe { &mut (*p).vctx.context })
}

/// # Safety
/// `ctx` came from [`ibv_open_device`]; the program destroyed its objects.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    guard(-1, || {
        // SAFETY: the program's context (C API).
        let Ok(c) = (unsafe { ffi::ctx(ctx) }) else { return -1 };
        let p = (c as *const CtxObj).cast_mut();
        // SAFETY: the fds are ours; the box came from open_device.
        unsafe {
            libc::close(c.vctx.context.async_fd);
            libc::close(c.async_wfd);
            drop(Box::from_raw(p));
        }
        0
    })
}

// ---- queries -------------------------------------------------------------

fn device_attr(c: &CtxObj) -> Result<(cmd::DeviceAttr, ibv_device_attr), c_int> {
    let a: cmd::DeviceAttr = fw(&c.sh, nr::QUERY_DEVICE, &cmd::DevReq { dev_index: c.dev_index, reserved: 0 })?;
    let mut o: ibv_device_attr = zeroed();
    let ver = format!("{}.{}.{}", (a.fw_ver >> 32) & 0xffff, (a.fw_ver >> 16) & 0xffff, a.fw_ver & 0xffff);
    for (d, b) in o.fw_ver.iter_mut().zip(ver.bytes().take(63)) {
        *d = b as c_char;
    }
    o.node_guid = a.node_guid.to_be();
    o.sys_image_guid = a.sys_image_guid.to_be();
    o.max_mr_size = a.max_mr_size;
    o.page_size_cap = a.page_size_cap;
    (o.vendor_id, o.vendor_part_id, o.hw_ver) = (a.vendor_id, a.vendor_part_id, a.hw_ver);
    let i = |v: u32| v.min(i32::MAX as u32) as c_int;
    o.max_qp = i(a.max_qp);
    o.max_qp_wr = i(a.max_qp_wr);
    o.device_cap_flags = a.device_cap_flags as u32;
    o.max_sge = i(a.max_sge);
    o.max_sge_rd = i(a.max_sge_rd);
    o.max_cq = i(a.max_cq);
    o.max_cqe = i(a.max_cqe);
    o.max_mr = i(a.max_mr);
    o.max_pd = i(a.max_pd);
    o.max_qp_rd_atom = i(a.max_qp_rd_atom);
    o.max_ee_rd_atom = i(a.max_ee_rd_atom);
    o.max_res_rd_atom = i(a.max_res_rd_atom);
    o.max_qp_init_rd_atom = i(a.max_qp_init_rd_atom);
    o.max_ee_init_rd_atom = i(a.max_ee_init_rd_atom);
    o.atomic_cap = i(a.atomic_cap);
    o.max_ee = i(a.max_ee);
    o.max_rdd = i(a.max_rdd);
    o.max_mw = i(a.max_mw);
    o.max_raw_ethy_qp = i(a.max_raw_ethy_qp);
    o.max_mcast_grp = i(a.max_mcast_grp);
    o.max_mcast_qp_attach = i(a.max_mcast_qp_attach);
    o.max_total_mcast_qp_attach = i(a.max_total_mcast_qp_attach);
    o.max_ah = i(a.max_ah);
    o.max_fmr = i(a.max_fmr);
    o.max_map_per_fmr = i(a.max_map_per_fmr);
    o.max_srq = i(a.max_srq);
    o.max_srq_wr = i(a.max_srq_wr);
    o.max_srq_sge = i(a.max_srq_sge);
    o.max_pkeys = a.max_pkeys;
    o.local_ca_ack_delay = a.local_ca_ack_delay;
    o.phys_port_cnt = a.phys_port_cnt;
    Ok((a, o))
}

/// # Safety
/// `ctx` is an open context, `attr` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_device(ctx: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            // SAFETY: the program's context (C API).
            let c = unsafe { ffi::ctx(ctx) }?;
            let (_, o) = device_attr(c)?;
            if attr.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's out struct.
            unsafe { attr.write(o) };
            Ok(())
        })())
    })
}

unsafe extern "C" fn query_device_ex_op(
    ctx: *mut ibv_context,
    _input: *const c_void,
    attr: *mut ibv_device_attr_ex,
    size: usize,
) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            // SAFETY: the program's context (C API).
            let c = unsafe { ffi::ctx(ctx) }?;
            let (a, o) = device_attr(c)?;
            if attr.is_null() || size < size_of::<ibv_device_attr>() {
                return Err(libc::EINVAL);
            }
            let mut ex: ibv_device_attr_ex = zeroed();
            ex.orig_attr = o;
            ex.phys_port_cnt_ex = u32::from(o.phys_port_cnt);
            ex.device_cap_flags_ex = a.device_cap_flags;
            let n = size.min(size_of::<ibv_device_attr_ex>());
            // SAFETY: the program's struct of `size` bytes; we write the
            // first `n <= size` (older programs know a shorter struct).
            unsafe {
                std::ptr::write_bytes(attr.cast::<u8>(), 0, size);
                std::ptr::copy_nonoverlapping((&ex as *const ibv_device_attr_ex).cast::<u8>(), attr.cast(), n);
            }
            Ok(())
        })())
    })
}

fn port_attr(c: &CtxObj, port: u8) -> Result<ibv_port_attr, c_int> {
    let a: cmd::PortAttr =
        fw(&c.sh, nr::QUERY_PORT, &cmd::PortReq { dev_index: c.dev_index, port_num: u32::from(port) })?;
    Ok(ibv_port_attr {
        state: a.state as c_int,
        max_mtu: a.max_mtu as c_int,
        active_mtu: a.active_mtu as c_int,
        gid_tbl_len: a.gid_tbl_len as c_int,
        port_cap_flags: a.port_cap_flags,
        max_msg_sz: a.max_msg_sz,
        bad_pkey_cntr: a.bad_pkey_cntr,
        qkey_viol_cntr: a.qkey_viol_cntr,
        pkey_tbl_len: a.pkey_tbl_len.min(u32::from(u16::MAX)) as u16,
        lid: a.lid,
        sm_lid: a.sm_lid,
        lmc: a.lmc,
        max_vl_num: a.max_vl_num,
        sm_sl: a.sm_sl,
        subnet_timeout: a.subnet_timeout,
        init_type_reply: a.init_type_reply,
        active_width: a.active_width,
        active_speed: a.active_speed.min(255) as u8,
        phys_state: a.phys_state,
        link_layer: a.link_layer,
        flags: a.flags,
        port_cap_flags2: 0,
    })
}

fn write_port(c: &CtxObj, port: u8, out: *mut ibv_port_attr, len: usize) -> Result<(), c_int> {
    let a = port_attr(c, port)?;
    if out.is_null() {
        return Err(libc::EINVAL);
    }
    let n = len.min(size_of::<ibv_port_attr>());
    // SAFETY: the program's struct of at least `len` bytes; we write `n <= len`.
    unsafe { std::ptr::copy_nonoverlapping((&a as *const ibv_port_attr).cast::<u8>(), out.cast(), n) };
    Ok(())
}

unsafe extern "C" fn query_port_op(ctx: *mut ibv_context, port: u8, out: *mut ibv_port_attr, len: usize) -> c_int {
    // SAFETY: the program's context (C API).
    guard(libc::EIO, || code(unsafe { ffi::ctx(ctx) }.and_then(|c| write_port(c, port, out, len))))
}

/// The exported symbol, for programs built before the inline wrapper:
/// fills the older, shorter `struct _compat_ibv_port_attr`.
///
/// # Safety
/// `ctx` is an open context, `out` a writable compat port attr.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_port(ctx: *mut ibv_context, port: u8, out: *mut ibv_port_attr) -> c_int {
    // SAFETY: the program's context (C API).
    guard(libc::EIO, || code(unsafe { ffi::ctx(ctx) }.and_then(|c| write_port(c, port, out, COMPAT_PORT_ATTR_SIZE))))
}

fn gid(c: &CtxObj, port: u32, index: u32) -> Result<cmd::GidEntry, c_int> {
    fw(&c.sh, nr::QUERY_GID, &cmd::GidReq { dev_index: c.dev_index, port_num: port, index, reserved: 0 })
}

/// # Safety
/// `ctx` is an open context, `out` 16 writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid(ctx: *mut ibv_context, port: u8, index: c_int, out: *mut [u8; 16]) -> c_int {
    guard(-1, || {
        minus_one((|| {
            // SAFETY: the program's context (C API).
            let c = unsafe { ffi::ctx(ctx) }?;
            let e = gid(c, u32::from(port), u32::try_from(index).map_err(|_| libc::EINVAL)?)?;
            if out.is_null() {
                return Err(libc::EINVAL);
            }
            // An empty slot reads as the zero GID, as libibverbs gives it.
            // SAFETY: the program's 16-byte GID.
            unsafe { *out = if e.valid != 0 { e.gid } else { [0; 16] } };
            Ok(())
        })())
    })
}

fn gid_entry(e: &cmd::GidEntry, port: u32) -> ibv_gid_entry {
    ibv_gid_entry {
        gid: e.gid,
        gid_index: e.index,
        port_num: port,
        // enum ibv_gid_type: IBV_GID_TYPE_ROCE_V1 = 1, _ROCE_V2 = 2.
        gid_type: if e.gid_type == cmd::gid_type::ROCE_V2 { 2 } else { 1 },
        ndev_ifindex: e.ndev_ifindex,
    }
}

/// # Safety
/// `ctx` is an open context, `entry` a writable entry of `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    _flags: u32,
    size: usize,
) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            // SAFETY: the program's context (C API).
            let c = unsafe { ffi::ctx(ctx) }?;
            let e = gid(c, port, index)?;
            if e.valid == 0 {
                return Err(libc::ENODATA);
            }
            if entry.is_null() || size < size_of::<ibv_gid_entry>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's entry.
            unsafe { entry.write(gid_entry(&e, port)) };
            Ok(())
        })())
    })
}

/// # Safety
/// `ctx` is an open context, `entries` holds `max` entries of `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_table(
    ctx: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max: usize,
    _flags: u32,
    size: usize,
) -> isize {
    guard(-(libc::EIO as isize), || {
        let run = || -> Result<isize, c_int> {
            // SAFETY: the program's context (C API).
            let c = unsafe { ffi::ctx(ctx) }?;
            if size < size_of::<ibv_gid_entry>() || (max > 0 && entries.is_null()) {
                return Err(libc::EINVAL);
            }
            let (_, attr) = device_attr(c)?;
            let mut n = 0;
            for port in 1..=u32::from(attr.phys_port_cnt) {
                let page_req = |index| cmd::GidReq { dev_index: c.dev_index, port_num: port, index, reserved: 0 };
                let mut index = 0;
                loop {
                    let page: cmd::GidTablePage = fw(&c.sh, nr::QUERY_GID_TABLE, &page_req(index))?;
                    for e in page.entries.iter().take((page.count as usize).min(cmd::GID_PAGE)) {
                        if n == max {
                            return Err(libc::EINVAL);
                        }
                        // SAFETY: entry `n < max` of the program's array (stride `size`).
                        unsafe { entries.cast::<u8>().add(n * size).cast::<ibv_gid_entry>().write(gid_entry(e, port)) };
                        n += 1;
                    }
                    if page.next == cmd::NO_MORE || page.next <= index {
                        break;
                    }
                    index = page.next;
                }
            }
            Ok(n as isize)
        };
        run().unwrap_or_else(|e| -(e as isize))
    })
}

/// `IBVERBS_PRIVATE_34`: the sysfs GID type (0 = IB/RoCE v1, 1 = RoCE v2).
///
/// # Safety
/// `ctx` is an open context, `ty` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid_type(ctx: *mut ibv_context, port: u8, index: u32, ty: *mut c_int) -> c_int {
    guard(-1, || {
        minus_one((|| {
            // SAFETY: the program's context (C API).
            let c = unsafe { ffi::ctx(ctx) }?;
            let e = gid(c, u32::from(port), index)?;
            if ty.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the caller's out value.
            unsafe { *ty = c_int::from(e.gid_type == cmd::gid_type::ROCE_V2) };
            Ok(())
        })())
    })
}

/// # Safety
/// `ctx` is an open context, `pkey` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_pkey(ctx: *mut ibv_context, port: u8, index: c_int, pkey: *mut u16) -> c_int {
    guard(-1, || {
        minus_one((|| {
            // SAFETY: the program's context (C API).
            let c = unsafe { ffi::ctx(ctx) }?;
            let req = cmd::GidReq {
                dev_index: c.dev_index,
                port_num: u32::from(port),
                index: u32::try_from(index).map_err(|_| libc::EINVAL)?,
                reserved: 0,
            };
            let r: cmd::PkeyResp = fw(&c.sh, nr::QUERY_PKEY, &req)?;
            if pkey.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the caller's out value; P_Keys are in network order.
            unsafe { *pkey = r.pkey.to_be() };
            Ok(())
        })())
    })
}

/// # Safety
/// `ctx` is an open context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_pkey_index(ctx: *mut ibv_context, port: u8, pkey: u16) -> c_int {
    for i in 0..16 {
        let mut p = 0u16;
        // SAFETY: forwarded; `p` is a local.
        if unsafe { ibv_query_pkey(ctx, port, i, &mut p) } != 0 {
            break;
        }
        if p == pkey {
            return i;
        }
    }
    -1
}

// ---- PD and MR -----------------------------------------------------------

/// # Safety
/// `ctx` is an open context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    guard(null_mut(), || {
        ptr_or_errno((|| {
            // SAFETY: the program's context (C API).
            let c = unsafe { ffi::ctx(ctx) }?;
            let r: cmd::HandleResp = fw(&c.sh, nr::ALLOC_PD, &cmd::DevReq { dev_index: c.dev_index, reserved: 0 })?;
            let obj = Box::new(PdObj { pd: ibv_pd { context: ctx, handle: r.handle }, sh: c.sh.clone() });
            Ok(Box::into_raw(obj).cast())
        })())
    })
}

/// # Safety
/// `pd` came from [`ibv_alloc_pd`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            // SAFETY: the program's PD (C API).
            let p = unsafe { ffi::pd(pd) }?;
            destroy(&p.sh, nr::DEALLOC_PD, p.pd.handle)?;
            // SAFETY: the box from ibv_alloc_pd; the firmware let it go.
            drop(unsafe { Box::from_raw(pd.cast::<PdObj>()) });
            Ok(())
        })())
    })
}

/// Moves the pages under `addr .. addr + len` into the ring and registers
/// them, named by `iova` (the program's address unless it chose another).
fn reg_mr(pd: *mut ibv_pd, addr: *mut c_void, len: usize, iova: u64, access: u32) -> Result<*mut ibv_mr, c_int> {
    // SAFETY: the program's PD (C API).
    let p = unsafe { ffi::pd(pd) }?;
    let off = mem::register(&p.sh, addr as u64, len as u64)?;
    let access = access & cmd::access::ALL;
    let req = cmd::RegMrReq { start: off, length: len as u64, pd_handle: p.pd.handle, access, iova };
    let r: cmd::RegMrResp = fw(&p.sh, nr::REG_MR, &req)?;
    let mr = ibv_mr { context: p.pd.context, pd, addr, length: len, handle: r.mr_handle, lkey: r.lkey, rkey: r.rkey };
    Ok(Box::into_raw(Box::new(MrObj { mr, sh: p.sh.clone() })).cast())
}

/// # Safety
/// `pd` came from [`ibv_alloc_pd`]; `addr .. addr + len` is the program's memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, len: usize, access: c_int) -> *mut ibv_mr {
    guard(null_mut(), || ptr_or_errno(reg_mr(pd, addr, len, addr as u64, access as u32)))
}

/// # Safety
/// As [`ibv_reg_mr`], the MR named by `iova` in work requests and by peers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    guard(null_mut(), || ptr_or_errno(reg_mr(pd, addr, len, iova, access)))
}

/// # Safety
/// As [`ibv_reg_mr_iova2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: forwarded.
    unsafe { ibv_reg_mr_iova2(pd, addr, len, iova, access as u32) }
}

/// # Safety
/// `mr` came from [`ibv_reg_mr`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            if mr.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: our MrObj (C API: an MR of this library).
            let m = unsafe { &*mr.cast::<MrObj>() };
            destroy(&m.sh, nr::DEREG_MR, m.mr.handle)?;
            // SAFETY: the box from reg_mr. The pages stay moved (mem.rs).
            drop(unsafe { Box::from_raw(mr.cast::<MrObj>()) });
            Ok(())
        })())
    })
}

// ---- completion channels and CQs -----------------------------------------

/// # Safety
/// `ctx` is an open context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    guard(null_mut(), || {
        ptr_or_errno((|| {
            // SAFETY: the program's context (C API).
            unsafe { ffi::ctx(ctx) }?;
            let mut fds = [0 as c_int; 2];
            // SAFETY: pipe2 fills the local array.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return Err(libc::EMFILE);
            }
            let ch = ibv_comp_channel { context: ctx, fd: fds[0], refcnt: 0 };
            let obj = Box::new(ChanObj { ch, wfd: fds[1], ready: Mutex::new(Default::default()) });
            Ok(Box::into_raw(obj).cast())
        })())
    })
}

/// # Safety
/// `ch` came from [`ibv_create_comp_channel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    guard(-1, || {
        minus_one((|| {
            if ch.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: our ChanObj (C API).
            let c = unsafe { &*ch.cast::<ChanObj>() };
            if c.ch.refcnt > 0 {
                return Err(libc::EBUSY);
            }
            // SAFETY: our fds and box; no CQ uses the channel any more.
            unsafe {
                libc::close(c.ch.fd);
                libc::close(c.wfd);
                drop(Box::from_raw(ch.cast::<ChanObj>()));
            }
            Ok(())
        })())
    })
}

/// # Safety
/// `ch` came from [`ibv_create_comp_channel`]; `cq`, `cq_ctx` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_ctx: *mut *mut c_void,
) -> c_int {
    guard(-1, || {
        minus_one((|| {
            if ch.is_null() || cq.is_null() || cq_ctx.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: our ChanObj (C API).
            let c = unsafe { &*ch.cast::<ChanObj>() };
            let mut b = 0u8;
            // SAFETY: reads one byte into a local (blocking unless the
            // program made the fd non-blocking).
            let n = unsafe { libc::read(c.ch.fd, (&mut b as *mut u8).cast(), 1) };
            if n != 1 {
                // SAFETY: errno of this thread.
                return Err(if n < 0 { unsafe { *libc::__errno_location() } } else { libc::EIO });
            }
            let Some(q) = lock(&c.ready).pop_front() else { return Err(libc::EIO) };
            let q = q as *mut CqObj;
            // SAFETY: a CQ queued by the watcher is alive until the program
            // acknowledges and destroys it (C API order).
            unsafe {
                *cq = q.cast();
                *cq_ctx = (*q).cq.cq_context;
            }
            Ok(())
        })())
    })
}

/// # Safety
/// `cq` came from [`ibv_create_cq`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, n: u32) {
    if cq.is_null() {
        return;
    }
    // SAFETY: the program's CQ; the count is the program's own bookkeeping
    // (one thread acks, as libibverbs requires for this field).
    unsafe { (*cq).comp_events_completed = (*cq).comp_events_completed.wrapping_add(n) };
}

/// # Safety
/// `ctx` is an open context; `ch` null or one of its channels.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    ch: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    guard(null_mut(), || {
        ptr_or_errno((|| {
            // SAFETY: the program's context (C API).
            let c = unsafe { ffi::ctx(ctx) }?;
            let n = u32::try_from(cqe).map_err(|_| libc::EINVAL)?;
            let mut cq: ibv_cq = zeroed();
            (cq.context, cq.channel, cq.cq_context) = (ctx, ch, cq_context);
            let placeholder = c.sh.ring_geometry_placeholder();
            let obj = Box::into_raw(Box::new(CqObj {
                cq,
                sh: c.sh.clone(),
                fw: 0,
                ring: Mutex::new(Consumer::new(placeholder)),
                idle: AtomicU32::new(0),
                arm: Mutex::new(Default::default()),
            }));
            let req = cmd::CreateCqReq {
                user_handle: obj as u64,
                dev_index: c.dev_index,
                cqe: n,
                comp_vector: comp_vector.max(0) as u32,
                reserved: 0,
            };
            // SAFETY (both): the box just made, not yet given to the program.
            let r: cmd::CreateCqResp = match fw(&c.sh, nr::CREATE_CQ, &req) {
                Ok(r) => r,
                Err(e) => {
                    drop(unsafe { Box::from_raw(obj) });
                    return Err(e);
                }
            };
            let o = unsafe { &mut *obj };
            (o.fw, o.cq.handle, o.cq.cqe) = (r.cq_handle, r.cq_handle, r.cqe as c_int);
            match c.sh.ring_geometry(r.ring, CQE_SIZE as usize) {
                Ok(g) => o.ring = Mutex::new(Consumer::new(g)),
                Err(e) => {
                    let _ = destroy(&c.sh, nr::DESTROY_CQ, r.cq_handle);
                    drop(unsafe { Box::from_raw(obj) });
                    return Err(e);
                }
            }
            if !ch.is_null() {
                // SAFETY: the program's channel (C API).
                unsafe { (*ch).refcnt += 1 };
            }
            Ok(obj.cast())
        })())
    })
}

/// # Safety
/// `cq` came from [`ibv_create_cq`]; no QP uses it any more.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            // SAFETY: the program's CQ (C API).
            let c = unsafe { ffi::cq(cq) }?;
            channel::disarm(cq.cast());
            destroy(&c.sh, nr::DESTROY_CQ, c.fw)?;
            let ch = c.cq.channel;
            if !ch.is_null() {
                // SAFETY: the CQ's channel is alive while the CQ is.
                unsafe {
                    (*ch).refcnt -= 1;
                    // Events of this CQ not yet taken go with it.
                    lock(&(*ch.cast::<ChanObj>()).ready).retain(|&q| q != cq as usize);
                }
            }
            // SAFETY: the box from ibv_create_cq, no longer armed.
            drop(unsafe { Box::from_raw(cq.cast::<CqObj>()) });
            Ok(())
        })())
    })
}

// ---- QPs -----------------------------------------------------------------

fn create_qp(ctx: *mut ibv_context, pd: *mut ibv_pd, a: &ibv_qp_init_attr) -> Result<*mut ibv_qp, c_int> {
    // SAFETY: the program's PD, CQs and SRQ (C API).
    let p = unsafe { ffi::pd(pd) }?;
    let (scq, rcq) = unsafe { (ffi::cq(a.send_cq)?, ffi::cq(a.recv_cq)?) };
    let srq = if a.srq.is_null() { None } else { Some(unsafe { ffi::srq(a.srq) }?) };
    let qpt = match a.qp_type {
        IBV_QPT_RC => cmd::qp_type::RC,
        IBV_QPT_UC => cmd::qp_type::UC,
        IBV_QPT_UD => cmd::qp_type::UD,
        _ => return Err(libc::EOPNOTSUPP),
    };
    let cap = cmd::QpCap {
        max_send_wr: a.cap.max_send_wr,
        max_recv_wr: a.cap.max_recv_wr,
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: a.cap.max_recv_sge,
        max_inline_data: a.cap.max_inline_data,
    };
    let mut base: ibv_qp = zeroed();
    (base.context, base.qp_context, base.pd) = (ctx, a.qp_context, pd);
    (base.send_cq, base.recv_cq, base.srq, base.qp_type) = (a.send_cq, a.recv_cq, a.srq, a.qp_type);
    let mut qpx: ibv_qp_ex = zeroed();
    qpx.qp_base = base;
    datapath::fill_qp_ex(&mut qpx);
    let placeholder = p.sh.ring_geometry_placeholder();
    let sq =
        SendQueue { ring: Producer::new(placeholder), cap, entry: Vec::new(), building: Vec::new(), build_error: 0 };
    let obj =
        Box::into_raw(Box::new(QpObj { qpx, sh: p.sh.clone(), fw: 0, qp_type: qpt, sq: Mutex::new(sq), rq: None }));
    let req = cmd::CreateQpReq {
        user_handle: obj as u64,
        pd_handle: p.pd.handle,
        send_cq_handle: scq.fw,
        recv_cq_handle: rcq.fw,
        srq_handle: srq.map_or(0, |s| s.fw),
        cap,
        qp_type: qpt,
        sq_sig_all: u8::from(a.sq_sig_all != 0),
        reserved: [0; 2],
    };
    // SAFETY (the box uses below): made here, not yet the program's.
    let r: cmd::CreateQpResp = match fw(&p.sh, nr::CREATE_QP, &req) {
        Ok(r) => r,
        Err(e) => {
            drop(unsafe { Box::from_raw(obj) });
            return Err(e);
        }
    };
    let o = unsafe { &mut *obj };
    o.fw = r.qp_handle;
    (o.qpx.qp_base.handle, o.qpx.qp_base.qp_num) = (r.qp_handle, r.qp_num);
    let rings = (|| {
        let sq = p.sh.ring_geometry(r.sq, SendWqe::SIZE)?;
        lock(&o.sq).ring = Producer::new(sq);
        lock(&o.sq).cap = r.cap;
        if srq.is_none() {
            let rq = p.sh.ring_geometry(r.rq, RecvWqe::SIZE)?;
            o.rq =
                Some(Mutex::new(RecvQueue { ring: Producer::new(rq), max_sge: r.cap.max_recv_sge, entry: Vec::new() }));
        }
        Ok(())
    })();
    if let Err(e) = rings {
        let _ = destroy(&p.sh, nr::DESTROY_QP, r.qp_handle);
        drop(unsafe { Box::from_raw(obj) });
        return Err(e);
    }
    Ok(obj.cast())
}

fn write_cap(cap: &mut ibv_qp_cap, c: &cmd::QpCap) {
    *cap = ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    };
}

/// # Safety
/// `pd` came from [`ibv_alloc_pd`]; `attr` is readable and writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    guard(null_mut(), || {
        ptr_or_errno((|| {
            if attr.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's PD and attributes (C API).
            let (p, a) = unsafe { (ffi::pd(pd)?, &mut *attr) };
            let q = create_qp(p.pd.context, pd, a)?;
            // SAFETY: just made; the caps as granted go back, as libibverbs does.
            let cap = lock(&unsafe { &*q.cast::<QpObj>() }.sq).cap;
            write_cap(&mut a.cap, &cap);
            Ok(q)
        })())
    })
}

unsafe extern "C" fn create_qp_ex_op(ctx: *mut ibv_context, attr: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    guard(null_mut(), || {
        ptr_or_errno((|| {
            if attr.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's attributes (C API).
            let a = unsafe { &mut *attr };
            let known = qp_init_attr_mask::PD | qp_init_attr_mask::SEND_OPS_FLAGS;
            if a.comp_mask & qp_init_attr_mask::PD == 0 || a.comp_mask & !known != 0 {
                return Err(libc::EOPNOTSUPP);
            }
            // As rxe's provider: a `wr_*` call the QP type cannot carry
            // (TSO, XRC, reads on UC, ...) is refused at creation.
            if a.comp_mask & qp_init_attr_mask::SEND_OPS_FLAGS != 0 {
                let takes = match a.qp_type {
                    IBV_QPT_RC => send_ops::RC,
                    IBV_QPT_UC => send_ops::UC,
                    IBV_QPT_UD => send_ops::UD,
                    _ => 0,
                };
                if a.send_ops_flags & !takes != 0 {
                    return Err(libc::EOPNOTSUPP);
                }
            }
            let base = ibv_qp_init_attr {
                qp_context: a.qp_context,
                send_cq: a.send_cq,
                recv_cq: a.recv_cq,
                srq: a.srq,
                cap: a.cap,
                qp_type: a.qp_type,
                sq_sig_all: a.sq_sig_all,
            };
            let q = create_qp(ctx, a.pd, &base)?;
            // SAFETY: just made.
            let cap = lock(&unsafe { &*q.cast::<QpObj>() }.sq).cap;
            write_cap(&mut a.cap, &cap);
            Ok(q)
        })())
    })
}

/// # Safety
/// `qp` came from this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    // Every QP of this library is an ibv_qp_ex.
    qp.cast()
}

fn ah_in(a: &ibv_ah_attr) -> cmd::AhAttr {
    cmd::AhAttr {
        dgid: a.grh.dgid,
        flow_label: a.grh.flow_label,
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        traffic_class: a.grh.traffic_class,
        is_global: a.is_global,
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        port_num: a.port_num,
        ..Default::default()
    }
}

/// # Safety
/// `qp` came from this library; `attr` is readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            if attr.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's QP and attributes (C API).
            let (q, a) = unsafe { (ffi::qp(qp)?, &*attr) };
            let mask = mask as u32;
            let r = cmd::QpAttr {
                qp_state: a.qp_state as u32,
                cur_qp_state: a.cur_qp_state as u32,
                path_mtu: a.path_mtu as u32,
                path_mig_state: a.path_mig_state as u32,
                qkey: a.qkey,
                rq_psn: a.rq_psn,
                sq_psn: a.sq_psn,
                dest_qp_num: a.dest_qp_num,
                qp_access_flags: a.qp_access_flags,
                rate_limit: a.rate_limit,
                cap: cmd::QpCap {
                    max_send_wr: a.cap.max_send_wr,
                    max_recv_wr: a.cap.max_recv_wr,
                    max_send_sge: a.cap.max_send_sge,
                    max_recv_sge: a.cap.max_recv_sge,
                    max_inline_data: a.cap.max_inline_data,
                },
                ah_attr: ah_in(&a.ah_attr),
                pkey_index: a.pkey_index,
                sq_draining: a.sq_draining,
                max_rd_atomic: a.max_rd_atomic,
                max_dest_rd_atomic: a.max_dest_rd_atomic,
                min_rnr_timer: a.min_rnr_timer,
                port_num: a.port_num,
                timeout: a.timeout,
                retry_cnt: a.retry_cnt,
                rnr_retry: a.rnr_retry,
                en_sqd_async_notify: a.en_sqd_async_notify,
                ..Default::default()
            };
            // The alternate path goes only with its mask bit, so firmware
            // older than ABI 1.6 still takes every other request.
            let alt = if mask & cmd::qp_attr_mask::ALT_PATH != 0 {
                cmd::AltPath {
                    alt_ah_attr: ah_in(&a.alt_ah_attr),
                    alt_pkey_index: a.alt_pkey_index,
                    alt_port_num: a.alt_port_num,
                    alt_timeout: a.alt_timeout,
                    reserved: [0; 4],
                }
            } else {
                cmd::AltPath::default()
            };
            let req = cmd::ModifyQpReq { qp_handle: q.fw, attr_mask: mask, attr: r, alt };
            q.sh.ctx.command_resolving::<_, cmd::Empty>(nr::MODIFY_QP, &req).map_err(|e| errno_of(&e))?;
            if mask & cmd::qp_attr_mask::STATE != 0 {
                // SAFETY: the program's QP; `state` is informational.
                unsafe { (*qp).state = a.qp_state };
            }
            Ok(())
        })())
    })
}

/// # Safety
/// `qp` came from this library; `attr`, `init` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            // SAFETY: the program's QP (C API).
            let q = unsafe { ffi::qp(qp) }?;
            let r: cmd::QueryQpResp =
                fw(&q.sh, nr::QUERY_QP, &cmd::QueryQpReq { qp_handle: q.fw, attr_mask: mask as u32 })?;
            let a = &r.attr;
            let mut o: ibv_qp_attr = zeroed();
            o.qp_state = a.qp_state as c_int;
            o.cur_qp_state = a.cur_qp_state as c_int;
            o.path_mtu = a.path_mtu as c_int;
            o.path_mig_state = a.path_mig_state as c_int;
            (o.qkey, o.rq_psn, o.sq_psn, o.dest_qp_num) = (a.qkey, a.rq_psn, a.sq_psn, a.dest_qp_num);
            (o.qp_access_flags, o.rate_limit) = (a.qp_access_flags, a.rate_limit);
            write_cap(&mut o.cap, &a.cap);
            o.ah_attr = ibv_ah_attr::from(&a.ah_attr);
            (o.pkey_index, o.sq_draining, o.max_rd_atomic) = (a.pkey_index, a.sq_draining, a.max_rd_atomic);
            (o.max_dest_rd_atomic, o.min_rnr_timer, o.port_num) = (a.max_dest_rd_atomic, a.min_rnr_timer, a.port_num);
            (o.timeout, o.retry_cnt, o.rnr_retry) = (a.timeout, a.retry_cnt, a.rnr_retry);
            o.en_sqd_async_notify = a.en_sqd_async_notify;
            // The alternate path as loaded (zeros when none was), as rxe
            // answers it.
            o.alt_ah_attr = ibv_ah_attr::from(&r.alt.alt_ah_attr);
            (o.alt_pkey_index, o.alt_port_num, o.alt_timeout) =
                (r.alt.alt_pkey_index, r.alt.alt_port_num, r.alt.alt_timeout);
            if !attr.is_null() {
                // SAFETY: the program's out struct.
                unsafe { attr.write(o) };
            }
            if !init.is_null() {
                // SAFETY: the program's QP and out struct.
                unsafe {
                    let b = &q.qpx.qp_base;
                    let mut i = ibv_qp_init_attr {
                        qp_context: b.qp_context,
                        send_cq: b.send_cq,
                        recv_cq: b.recv_cq,
                        srq: b.srq,
                        cap: ibv_qp_cap::default(),
                        qp_type: b.qp_type,
                        sq_sig_all: c_int::from(r.sq_sig_all),
                    };
                    write_cap(&mut i.cap, &r.init_cap);
                    init.write(i);
                }
            }
            Ok(())
        })())
    })
}

/// # Safety
/// `qp` came from this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            // SAFETY: the program's QP (C API).
            let q = unsafe { ffi::qp(qp) }?;
            destroy(&q.sh, nr::DESTROY_QP, q.fw)?;
            // SAFETY: the box from create_qp.
            drop(unsafe { Box::from_raw(qp.cast::<QpObj>()) });
            Ok(())
        })())
    })
}

// ---- SRQ -----------------------------------------------------------------

/// # Safety
/// `pd` came from [`ibv_alloc_pd`]; `attr` is readable and writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq {
    guard(null_mut(), || {
        ptr_or_errno((|| {
            if attr.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's PD and attributes (C API).
            let (p, a) = unsafe { (ffi::pd(pd)?, &mut *attr) };
            let mut srq: ibv_srq = zeroed();
            (srq.context, srq.srq_context, srq.pd) = (p.pd.context, a.srq_context, pd);
            let placeholder = p.sh.ring_geometry_placeholder();
            let rq = RecvQueue { ring: Producer::new(placeholder), max_sge: 0, entry: Vec::new() };
            let obj = Box::into_raw(Box::new(SrqObj { srq, sh: p.sh.clone(), fw: 0, rq: Mutex::new(rq) }));
            let req = cmd::CreateSrqReq {
                user_handle: obj as u64,
                pd_handle: p.pd.handle,
                max_wr: a.attr.max_wr,
                max_sge: a.attr.max_sge,
                srq_limit: a.attr.srq_limit,
            };
            // SAFETY (box uses): made here, not yet the program's.
            let r: cmd::CreateSrqResp = match fw(&p.sh, nr::CREATE_SRQ, &req) {
                Ok(r) => r,
                Err(e) => {
                    drop(unsafe { Box::from_raw(obj) });
                    return Err(e);
                }
            };
            let o = unsafe { &mut *obj };
            (o.fw, o.srq.handle) = (r.srq_handle, r.srq_handle);
            match p.sh.ring_geometry(r.ring, RecvWqe::SIZE) {
                Ok(g) => *lock(&o.rq) = RecvQueue { ring: Producer::new(g), max_sge: r.max_sge, entry: Vec::new() },
                Err(e) => {
                    let _ = destroy(&p.sh, nr::DESTROY_SRQ, r.srq_handle);
                    drop(unsafe { Box::from_raw(obj) });
                    return Err(e);
                }
            }
            (a.attr.max_wr, a.attr.max_sge) = (r.max_wr, r.max_sge);
            Ok(obj.cast())
        })())
    })
}

/// # Safety
/// `srq` came from [`ibv_create_srq`]; `attr` readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            if attr.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's SRQ and attributes (C API).
            let (s, a) = unsafe { (ffi::srq(srq)?, &*attr) };
            use cmd::srq_attr_mask::{LIMIT, MAX_WR};
            let mask = mask as u32;
            if mask & MAX_WR != 0 {
                // rxe checks both before changing anything: a limit above
                // the new size would leave the SRQ resized and refused.
                if mask & LIMIT != 0 && a.srq_limit > a.max_wr {
                    return Err(libc::EINVAL);
                }
                // Held through the resize: no post may land in the old ring
                // after the firmware has moved its entries to the new one.
                let mut rq = lock(&s.rq);
                let req = cmd::ResizeSrqReq { srq_handle: s.fw, max_wr: a.max_wr };
                let r: cmd::ResizeSrqResp = fw(&s.sh, nr::RESIZE_SRQ, &req)?;
                let g = s.sh.ring_geometry(r.ring, RecvWqe::SIZE)?;
                rq.ring = Producer::taking_over(g, r.moved);
            }
            if mask & !MAX_WR == 0 {
                return Ok(());
            }
            let req = cmd::ModifySrqReq {
                srq_handle: s.fw,
                attr_mask: mask & !MAX_WR,
                max_wr: a.max_wr,
                srq_limit: a.srq_limit,
            };
            fw::<_, cmd::Empty>(&s.sh, nr::MODIFY_SRQ, &req).map(|_| ())
        })())
    })
}

/// # Safety
/// `srq` came from [`ibv_create_srq`]; `attr` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            // SAFETY: the program's SRQ (C API).
            let s = unsafe { ffi::srq(srq) }?;
            if attr.is_null() {
                return Err(libc::EINVAL);
            }
            let max_sge = lock(&s.rq).max_sge;
            let max_wr = lock(&s.rq).ring.geometry().entries().saturating_sub(1);
            // SAFETY: the program's out struct.
            unsafe { attr.write(ibv_srq_attr { max_wr, max_sge, srq_limit: 0 }) };
            Ok(())
        })())
    })
}

/// # Safety
/// `srq` came from [`ibv_create_srq`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            // SAFETY: the program's SRQ (C API).
            let s = unsafe { ffi::srq(srq) }?;
            destroy(&s.sh, nr::DESTROY_SRQ, s.fw)?;
            // SAFETY: the box from ibv_create_srq.
            drop(unsafe { Box::from_raw(srq.cast::<SrqObj>()) });
            Ok(())
        })())
    })
}

// ---- AH ------------------------------------------------------------------

fn create_ah(pd: *mut ibv_pd, a: &ibv_ah_attr) -> Result<*mut ibv_ah, c_int> {
    // SAFETY: the program's PD (C API).
    let p = unsafe { ffi::pd(pd) }?;
    let req = cmd::CreateAhReq { pd_handle: p.pd.handle, reserved: 0, attr: ah_in(a) };
    let r: cmd::HandleResp = p.sh.ctx.command_resolving(nr::CREATE_AH, &req).map_err(|e| errno_of(&e))?;
    let ah = ibv_ah { context: p.pd.context, pd, handle: r.handle };
    Ok(Box::into_raw(Box::new(AhObj { ah, sh: p.sh.clone() })).cast())
}

/// # Safety
/// `pd` came from [`ibv_alloc_pd`]; `attr` readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    guard(null_mut(), || {
        if attr.is_null() {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        // SAFETY: the program's attributes (C API).
        ptr_or_errno(create_ah(pd, unsafe { &*attr }))
    })
}

/// # Safety
/// `ah` came from [`ibv_create_ah`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    guard(libc::EIO, || {
        code((|| {
            if ah.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: our AhObj (C API).
            let a = unsafe { &*ah.cast::<AhObj>() };
            destroy(&a.sh, nr::DESTROY_AH, a.ah.handle)?;
            // SAFETY: the box from create_ah.
            drop(unsafe { Box::from_raw(ah.cast::<AhObj>()) });
            Ok(())
        })())
    })
}

/// The address vector back to the sender of `wc`, from the 40 bytes in
/// front of the payload (a GRH, or for RoCE v2 over IPv4 an IPv4 header in
/// its last 20 bytes, as rdma_rxe writes it).
fn ah_from_wc(ctx: &CtxObj, port: u8, wc: &ibv_wc, grh: &[u8; 40]) -> Result<ibv_ah_attr, c_int> {
    if wc.wc_flags & 1 == 0 {
        return Err(libc::EINVAL);
    }
    let (sgid, dgid) = if grh[20] >> 4 == 4 {
        let v4 = |at: usize| {
            let mut g = [0u8; 16];
            (g[10], g[11]) = (0xff, 0xff);
            g[12..].copy_from_slice(&grh[at..at + 4]);
            g
        };
        (v4(32), v4(36))
    } else {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&grh[8..24]);
        d.copy_from_slice(&grh[24..40]);
        (s, d)
    };
    // Our GID index for the address the packet was sent to.
    let mut sgid_index = 0;
    for i in 0..256 {
        match gid(ctx, u32::from(port), i) {
            Ok(e) if e.valid != 0 && e.gid == dgid => {
                sgid_index = i as u8;
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(ibv_ah_attr {
        grh: ibv_global_route { dgid: sgid, flow_label: 0, sgid_index, hop_limit: 0xff, traffic_class: 0 },
        dlid: wc.slid,
        sl: wc.sl,
        src_path_bits: wc.dlid_path_bits,
        static_rate: 0,
        is_global: 1,
        port_num: port,
    })
}

/// # Safety
/// `ctx` open; `wc` and `grh` (40 bytes) readable; `attr` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    ctx: *mut ibv_context,
    port: u8,
    wc: *mut ibv_wc,
    grh: *mut [u8; 40],
    attr: *mut ibv_ah_attr,
) -> c_int {
    guard(-1, || {
        minus_one((|| {
            if wc.is_null() || grh.is_null() || attr.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's context, completion, GRH and out struct.
            let a = unsafe { ah_from_wc(ffi::ctx(ctx)?, port, &*wc, &*grh)? };
            unsafe { attr.write(a) };
            Ok(())
        })())
    })
}

/// # Safety
/// As [`ibv_init_ah_from_wc`], with `pd` from [`ibv_alloc_pd`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut [u8; 40],
    port: u8,
) -> *mut ibv_ah {
    guard(null_mut(), || {
        ptr_or_errno((|| {
            if wc.is_null() || grh.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's PD, its context, completion and GRH.
            let a = unsafe {
                let p = ffi::pd(pd)?;
                ah_from_wc(ffi::ctx(p.pd.context)?, port, &*wc, &*grh)?
            };
            create_ah(pd, &a)
        })())
    })
}

// ---- async events --------------------------------------------------------

/// # Safety
/// `ctx` open; `ev` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_async_event(ctx: *mut ibv_context, ev: *mut ibv_async_event) -> c_int {
    guard(-1, || {
        minus_one((|| {
            // SAFETY: the program's context (C API).
            let c = unsafe { ffi::ctx(ctx) }?;
            if ev.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: fcntl on our own fd.
            let nonblock = unsafe { libc::fcntl(c.vctx.context.async_fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0;
            loop {
                if let Some(e) = c.sh.ctx.async_event().map_err(|e| errno_of(&e))? {
                    let element = match e.event_type {
                        // Port events (PORT_ACTIVE, PORT_ERR, LID/PKEY/GID change,
                        // SM change, CLIENT_REREGISTER) carry the port number.
                        9 | 10 | 11 | 12 | 14 | 15 | 18 => AsyncElement { port_num: e.element as c_int },
                        _ => AsyncElement { ptr: e.element as *mut c_void },
                    };
                    // SAFETY: the program's out struct.
                    unsafe { ev.write(ibv_async_event { element, event_type: e.event_type as c_int }) };
                    return Ok(());
                }
                if nonblock {
                    return Err(libc::EAGAIN);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_ack_async_event(_ev: *mut ibv_async_event) {}

impl Shared {
    /// A ring geometry for an object whose real ring is not known yet
    /// (never used to access memory).
    pub fn ring_geometry_placeholder(&self) -> verbs_ring::ring::RingGeometry {
        let p = verbs_ring::abi::RingPlacement { off: 0, entries: 1, entry_size: 4 };
        verbs_ring::ring::RingGeometry::new(p, 132).unwrap_or_else(|_| unreachable!("constant geometry"))
    }
}
