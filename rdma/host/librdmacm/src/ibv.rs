//! The libibverbs functions librdmacm calls, found at run time in the
//! process's `libibverbs.so.1` (ours, which `librdmacm.so.1` names as
//! NEEDED) by name and rdma-core version (`dlvsym`), as the program's own
//! calls bind: the QPs and PDs we make are the program's, in the one
//! libibverbs of the process.
//!
//! Looking them up instead of linking them keeps this crate's rlib free of
//! undefined symbols, so its tests link without a libibverbs.

use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;

use crate::abi::ibv::*;

pub type GetDeviceList = unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device;
pub type FreeDeviceList = unsafe extern "C" fn(*mut *mut ibv_device);
pub type OpenDevice = unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context;
pub type QueryDevice = unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int;
pub type AllocPd = unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd;
pub type CreateCompChannel = unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_comp_channel;
pub type DestroyCompChannel = unsafe extern "C" fn(*mut ibv_comp_channel) -> c_int;
pub type CreateCq =
    unsafe extern "C" fn(*mut ibv_context, c_int, *mut c_void, *mut ibv_comp_channel, c_int) -> *mut ibv_cq;
pub type DestroyCq = unsafe extern "C" fn(*mut ibv_cq) -> c_int;
pub type CreateQp = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
pub type ModifyQp = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
pub type DestroyQp = unsafe extern "C" fn(*mut ibv_qp) -> c_int;
pub type CreateSrq = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq;
pub type DestroySrq = unsafe extern "C" fn(*mut ibv_srq) -> c_int;

/// The table, every entry present (a libibverbs without one of them is
/// not rdma-core 44's).
pub struct Ibv {
    pub get_device_list: GetDeviceList,
    pub free_device_list: FreeDeviceList,
    pub open_device: OpenDevice,
    pub query_device: QueryDevice,
    pub alloc_pd: AllocPd,
    pub create_comp_channel: CreateCompChannel,
    pub destroy_comp_channel: DestroyCompChannel,
    pub create_cq: CreateCq,
    pub destroy_cq: DestroyCq,
    pub create_qp: CreateQp,
    pub modify_qp: ModifyQp,
    pub destroy_qp: DestroyQp,
    pub create_srq: CreateSrq,
    pub destroy_srq: DestroySrq,
}

fn sym(handle: *mut c_void, name: &CStr, version: &CStr) -> Option<*mut c_void> {
    // SAFETY: `handle` is a dlopen handle and both strings are NUL-terminated.
    let p = unsafe { libc::dlvsym(handle, name.as_ptr(), version.as_ptr()) };
    (!p.is_null()).then_some(p)
}

macro_rules! load {
    ($h:ident; $($field:ident: $ty:ty = $name:literal @ $ver:literal),* $(,)?) => {
        Ibv { $($field: {
            let p = sym($h, $name, $ver)?;
            // SAFETY: rdma-core's `verbs.h` declares the function under this
            // name and version with exactly this signature.
            unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
        },)* }
    };
}

fn open() -> Option<Ibv> {
    // SAFETY: a NUL-terminated soname; NOLOAD first: the program (or our
    // NEEDED entry) has loaded it already.
    let mut h = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        // SAFETY: as above.
        h = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW) };
    }
    if h.is_null() {
        return None;
    }
    Some(load!(h;
        get_device_list: GetDeviceList = c"ibv_get_device_list" @ c"IBVERBS_1.1",
        free_device_list: FreeDeviceList = c"ibv_free_device_list" @ c"IBVERBS_1.1",
        open_device: OpenDevice = c"ibv_open_device" @ c"IBVERBS_1.1",
        query_device: QueryDevice = c"ibv_query_device" @ c"IBVERBS_1.1",
        alloc_pd: AllocPd = c"ibv_alloc_pd" @ c"IBVERBS_1.1",
        create_comp_channel: CreateCompChannel = c"ibv_create_comp_channel" @ c"IBVERBS_1.0",
        destroy_comp_channel: DestroyCompChannel = c"ibv_destroy_comp_channel" @ c"IBVERBS_1.0",
        create_cq: CreateCq = c"ibv_create_cq" @ c"IBVERBS_1.1",
        destroy_cq: DestroyCq = c"ibv_destroy_cq" @ c"IBVERBS_1.1",
        create_qp: CreateQp = c"ibv_create_qp" @ c"IBVERBS_1.1",
        modify_qp: ModifyQp = c"ibv_modify_qp" @ c"IBVERBS_1.1",
        destroy_qp: DestroyQp = c"ibv_destroy_qp" @ c"IBVERBS_1.1",
        create_srq: CreateSrq = c"ibv_create_srq" @ c"IBVERBS_1.1",
        destroy_srq: DestroySrq = c"ibv_destroy_srq" @ c"IBVERBS_1.1",
    ))
}

/// The process's libibverbs, or `ENOSYS` when it cannot be found.
pub fn ibv() -> Result<&'static Ibv, c_int> {
    static IBV: OnceLock<Option<Ibv>> = OnceLock::new();
    IBV.get_or_init(open).as_ref().ok_or(libc::ENOSYS)
}

/// `ibv_create_qp_ex` as `verbs.h` inlines it: a mask of only the PD is
/// `ibv_create_qp`, anything more goes through the context's
/// `create_qp_ex` op.
///
/// # Safety
/// `ctx` is an open context of the process's libibverbs and `attr` a valid
/// `ibv_qp_init_attr_ex` (the C API's promises for the inline call).
pub unsafe fn create_qp_ex(ctx: *mut ibv_context, attr: *mut ibv_qp_init_attr_ex) -> Result<*mut ibv_qp, c_int> {
    let t = ibv()?;
    // SAFETY: the caller's promise.
    let a = unsafe { &mut *attr };
    let made = if a.comp_mask == qp_init_attr_mask::PD {
        // SAFETY: `ibv_qp_init_attr` is the prefix of `ibv_qp_init_attr_ex`
        // (verbs.h declares them so; our layout tests check both).
        unsafe { (t.create_qp)(a.pd, attr.cast::<ibv_qp_init_attr>()) }
    } else {
        // SAFETY: a libibverbs context is the `context` field of a
        // `verbs_context` whose `abi_compat` says so; `sz` says how far the
        // ops in front of it reach (verbs_get_ctx_op).
        unsafe {
            if (*ctx).abi_compat != VERBS_ABI_IS_EXTENDED {
                return Err(libc::EOPNOTSUPP);
            }
            let off = std::mem::offset_of!(verbs_context, context);
            let vctx = ctx.cast::<u8>().sub(off).cast::<verbs_context>();
            let need = std::mem::size_of::<verbs_context>() - std::mem::offset_of!(verbs_context, create_qp_ex);
            match (*vctx).create_qp_ex {
                Some(f) if (*vctx).sz >= need => f(ctx, attr),
                _ => return Err(libc::EOPNOTSUPP),
            }
        }
    };
    if made.is_null() { Err(errno()) } else { Ok(made) }
}

/// The calling thread's errno.
pub fn errno() -> c_int {
    // SAFETY: glibc's errno location is valid for the calling thread.
    unsafe { *libc::__errno_location() }
}
