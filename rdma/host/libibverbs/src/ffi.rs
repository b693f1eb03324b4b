//! The thin layer every exported function goes through: no panic crosses
//! into C ([`guard`]), errno is set the libibverbs way, and C pointers
//! become references only here, each with the promise of the C API that
//! makes it valid.

use std::ffi::{CStr, c_char, c_int};
use std::panic::AssertUnwindSafe;

use crate::abi::{ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_srq, verbs_context};
use crate::state::{CqObj, CtxObj, PdObj, QpObj, SrqObj};

/// Run `f`; a panic (a bug of ours) becomes `fail` instead of unwinding
/// into C.
pub fn guard<T>(fail: T, f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or(fail)
}

pub fn set_errno(e: c_int) {
    // SAFETY: glibc's errno location is valid for the calling thread.
    unsafe { *libc::__errno_location() = e };
}

/// For functions that return a pointer: null with errno on failure.
pub fn ptr_or_errno<T>(r: Result<*mut T, c_int>) -> *mut T {
    match r {
        Ok(p) => p,
        Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
    }
}

/// For functions that return an errno value (0 on success).
pub fn code(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// For functions that return -1 and set errno.
pub fn minus_one(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// The `CtxObj` behind an `ibv_context`.
///
/// # Safety
/// `p` is null or a context `ibv_open_device` returned and not yet closed.
pub unsafe fn ctx<'a>(p: *mut ibv_context) -> Result<&'a CtxObj, c_int> {
    if p.is_null() {
        return Err(libc::EINVAL);
    }
    let off = std::mem::offset_of!(verbs_context, context);
    // SAFETY: our contexts are the `context` field of a `verbs_context`,
    // the first field of a `#[repr(C)]` `CtxObj` (ibv_open_device).
    Ok(unsafe { &*(p.cast::<u8>().sub(off).cast::<CtxObj>()) })
}

macro_rules! object {
    ($name:ident, $c:ty, $obj:ty, $what:literal) => {
        #[doc = concat!("The `", stringify!($obj), "` behind an `", stringify!($c), "`.")]
        ///
        /// # Safety
        #[doc = concat!("`p` is null or ", $what, " this library returned and not yet destroyed.")]
        pub unsafe fn $name<'a>(p: *mut $c) -> Result<&'a $obj, c_int> {
            if p.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the C struct is the first field of our `#[repr(C)]`
            // object, which we allocated and the program has not destroyed.
            Ok(unsafe { &*p.cast::<$obj>() })
        }
    };
}

object!(pd, ibv_pd, PdObj, "a PD");
object!(cq, ibv_cq, CqObj, "a CQ");
object!(qp, ibv_qp, QpObj, "a QP");
object!(srq, ibv_srq, SrqObj, "an SRQ");

/// A C string the program passed, as UTF-8 (lossy).
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for the call.
pub unsafe fn c_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

/// A `&'static CStr` for one of a fixed set of strings (the `*_str`
/// functions), made once per distinct string.
pub fn static_cstr(s: &'static str) -> *const c_char {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static CACHE: Mutex<Option<HashMap<&'static str, &'static CStr>>> = Mutex::new(None);
    let mut g = crate::state::lock(&CACHE);
    let map = g.get_or_insert_with(HashMap::new);
    let c = map.entry(s).or_insert_with(|| {
        let owned = std::ffi::CString::new(s).unwrap_or_default();
        Box::leak(owned.into_boxed_c_str())
    });
    c.as_ptr()
}
