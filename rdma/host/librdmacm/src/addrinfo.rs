//! `rdma_getaddrinfo` / `rdma_freeaddrinfo` (rdma-core's `addrinfo.c`
//! surface): the system's `getaddrinfo` with the hints translated (QP type
//! and port space to socket type and protocol), its first answer as an
//! `rdma_addrinfo` (a passive one fills the source, an active one the
//! destination). No IB path resolution (ibacm): routes are resolved by the
//! appliance's CM at `rdma_resolve_route`.

use std::collections::HashSet;
use std::ffi::{c_char, c_int};
use std::sync::Mutex;

use verbs_ring::cm::port_space;

use crate::abi::*;
use crate::ffi::{guard, set_errno};
use crate::state::lock;

const IBV_QPT_RC: c_int = 2;
const IBV_QPT_UC: c_int = 3;
const IBV_QPT_UD: c_int = 4;

/// Results handed out and not yet freed.
static LIVE: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

fn copy_addr(src: *const libc::sockaddr, len: libc::socklen_t) -> Result<*mut libc::sockaddr, c_int> {
    // SAFETY: malloc of `len` bytes; null checked.
    let p = unsafe { libc::malloc(len as usize) }.cast::<libc::sockaddr>();
    if p.is_null() {
        return Err(libc::ENOMEM);
    }
    // SAFETY: `src` holds `len` bytes (getaddrinfo's answer or the caller's
    // hints, C API); `p` was just allocated with that size.
    unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), p.cast::<u8>(), len as usize) };
    Ok(p)
}

/// # Safety
/// `rai` came from `alloc` and is not reachable by the program.
unsafe fn free_one(rai: *mut rdma_addrinfo) {
    // SAFETY: every pointer in it is null or malloc'd by us.
    unsafe {
        let r = &*rai;
        for p in [
            r.ai_src_addr.cast::<libc::c_void>(),
            r.ai_dst_addr.cast(),
            r.ai_src_canonname.cast(),
            r.ai_dst_canonname.cast(),
            r.ai_route,
            r.ai_connect,
        ] {
            libc::free(p);
        }
        libc::free(rai.cast());
    }
}

fn convert(hints: Option<&rdma_addrinfo>, rai: &mut rdma_addrinfo, ai: &libc::addrinfo) -> Result<(), c_int> {
    rai.ai_qp_type = match hints.map_or(0, |h| h.ai_qp_type) {
        0 => match ai.ai_socktype {
            libc::SOCK_STREAM => IBV_QPT_RC,
            libc::SOCK_DGRAM => IBV_QPT_UD,
            _ => 0,
        },
        t => t,
    };
    rai.ai_port_space = match hints.map_or(0, |h| h.ai_port_space) {
        0 => match ai.ai_protocol {
            libc::IPPROTO_TCP => c_int::from(port_space::TCP),
            libc::IPPROTO_UDP => c_int::from(port_space::UDP),
            _ => 0,
        },
        ps => ps,
    };
    rai.ai_family = ai.ai_family;
    let canon = if ai.ai_canonname.is_null() {
        std::ptr::null_mut()
    } else {
        // SAFETY: getaddrinfo's NUL-terminated canonical name.
        unsafe { libc::strdup(ai.ai_canonname) }
    };
    if ai.ai_flags & libc::AI_PASSIVE != 0 {
        rai.ai_flags = RAI_PASSIVE;
        rai.ai_src_canonname = canon;
        rai.ai_src_addr = copy_addr(ai.ai_addr, ai.ai_addrlen)?;
        rai.ai_src_len = ai.ai_addrlen;
    } else {
        rai.ai_dst_canonname = canon;
        rai.ai_dst_addr = copy_addr(ai.ai_addr, ai.ai_addrlen)?;
        rai.ai_dst_len = ai.ai_addrlen;
    }
    Ok(())
}

/// The system's hints for ours (librdmacm's `ucma_convert_to_ai`).
fn system_hints(h: &rdma_addrinfo) -> libc::addrinfo {
    // SAFETY: all-zero is a valid `addrinfo` (no hints).
    let mut ai: libc::addrinfo = unsafe { std::mem::zeroed() };
    if h.ai_flags & RAI_PASSIVE != 0 {
        ai.ai_flags |= libc::AI_PASSIVE;
    }
    if h.ai_flags & RAI_NUMERICHOST != 0 {
        ai.ai_flags |= libc::AI_NUMERICHOST;
    }
    if h.ai_family != libc::AF_IB {
        ai.ai_family = h.ai_family;
    }
    ai.ai_socktype = match h.ai_qp_type {
        IBV_QPT_RC | IBV_QPT_UC => libc::SOCK_STREAM,
        IBV_QPT_UD => libc::SOCK_DGRAM,
        _ => match u16::try_from(h.ai_port_space) {
            Ok(port_space::TCP) => libc::SOCK_STREAM,
            Ok(port_space::UDP | port_space::IPOIB) => libc::SOCK_DGRAM,
            _ => 0,
        },
    };
    ai.ai_protocol = match u16::try_from(h.ai_port_space) {
        Ok(port_space::TCP) => libc::IPPROTO_TCP,
        Ok(port_space::UDP | port_space::IPOIB) => libc::IPPROTO_UDP,
        _ => 0,
    };
    ai
}

/// # Safety
/// `node`, `service` null or NUL-terminated; `hints` null or valid; `res`
/// writable (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    guard(-1, || {
        if res.is_null() || (node.is_null() && service.is_null() && hints.is_null()) {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the caller's promise.
        let h = unsafe { hints.as_ref() };
        // SAFETY: calloc of one struct, null checked; all-zero is empty.
        let rai = unsafe { libc::calloc(1, std::mem::size_of::<rdma_addrinfo>()) }.cast::<rdma_addrinfo>();
        if rai.is_null() {
            set_errno(libc::ENOMEM);
            return -1;
        }
        // SAFETY: just allocated, ours until returned.
        let r = unsafe { &mut *rai };
        let done: Result<(), c_int> = (|| {
            if !node.is_null() || !service.is_null() {
                let sys = h.map(system_hints);
                let mut ai: *mut libc::addrinfo = std::ptr::null_mut();
                // SAFETY: the caller's strings; our hints; `ai` an out pointer.
                let rc =
                    unsafe { libc::getaddrinfo(node, service, sys.as_ref().map_or(std::ptr::null(), |s| s), &mut ai) };
                if rc != 0 {
                    // getaddrinfo's own (negative) code, as librdmacm returns it.
                    return Err(rc);
                }
                // SAFETY: a successful getaddrinfo gives at least one answer.
                let first = unsafe { &*ai };
                let c = convert(h, r, first);
                // SAFETY: the list getaddrinfo made.
                unsafe { libc::freeaddrinfo(ai) };
                c?;
            } else if let Some(h) = h {
                r.ai_flags = h.ai_flags;
                r.ai_family = h.ai_family;
                r.ai_qp_type = h.ai_qp_type;
                r.ai_port_space = h.ai_port_space;
                if h.ai_dst_len > 0 {
                    r.ai_dst_addr = copy_addr(h.ai_dst_addr, h.ai_dst_len)?;
                    r.ai_dst_len = h.ai_dst_len;
                }
            }
            if let Some(h) = h
                && r.ai_src_len == 0
                && h.ai_src_len > 0
            {
                r.ai_src_addr = copy_addr(h.ai_src_addr, h.ai_src_len)?;
                r.ai_src_len = h.ai_src_len;
            }
            Ok(())
        })();
        match done {
            Ok(()) => {
                lock(&LIVE).get_or_insert_with(HashSet::new).insert(rai as usize);
                // SAFETY: the caller's out pointer.
                unsafe { *res = rai };
                0
            }
            Err(e) => {
                // SAFETY: ours, never handed out.
                unsafe { free_one(rai) };
                if e < 0 {
                    e
                } else {
                    set_errno(e);
                    -1
                }
            }
        }
    })
}

/// # Safety
/// `res` null or from `rdma_getaddrinfo` (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    guard((), || {
        let mut cur = res;
        while !cur.is_null() {
            if !lock(&LIVE).get_or_insert_with(HashSet::new).remove(&(cur as usize)) {
                return;
            }
            // SAFETY: a registered result (ours, from calloc); `ai_next` is
            // always null in what we make.
            let next = unsafe { (*cur).ai_next };
            // SAFETY: registered, now forgotten.
            unsafe { free_one(cur) };
            cur = next;
        }
    })
}
