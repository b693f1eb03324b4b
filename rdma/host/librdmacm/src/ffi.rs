//! The thin layer every exported function goes through: no panic crosses
//! into C ([`guard`]), errno is set the librdmacm way (`-1` and errno), and
//! socket addresses are read from and written to C memory only here.

use std::ffi::c_int;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::panic::AssertUnwindSafe;

use libc::{sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage};

/// Run `f`; a panic (a bug of ours) becomes `fail` instead of unwinding
/// into C.
pub fn guard<T>(fail: T, f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or(fail)
}

pub fn set_errno(e: c_int) {
    // SAFETY: glibc's errno location is valid for the calling thread.
    unsafe { *libc::__errno_location() = e };
}

/// librdmacm's convention: 0, or -1 with errno.
pub fn minus_one(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// For functions that return a pointer: null with errno on failure.
pub fn ptr_or_errno<T>(r: Result<*mut T, c_int>) -> *mut T {
    r.unwrap_or_else(|e| {
        set_errno(e);
        std::ptr::null_mut()
    })
}

/// The socket address at `p` (`AF_INET` or `AF_INET6`).
///
/// # Safety
/// `p` is null or points to a `struct sockaddr` of the size its family
/// implies (the C API's promise for every address argument).
pub unsafe fn read_addr(p: *const sockaddr) -> Result<SocketAddr, c_int> {
    if p.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's promise; the family is the first field of every
    // sockaddr, and the family says which struct it is.
    unsafe {
        match c_int::from((*p).sa_family) {
            libc::AF_INET => {
                let a = &*p.cast::<sockaddr_in>();
                let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                Ok(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(a.sin_port))))
            }
            libc::AF_INET6 => {
                let a = &*p.cast::<sockaddr_in6>();
                let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                Ok(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(a.sin6_port), a.sin6_flowinfo, a.sin6_scope_id)))
            }
            _ => Err(libc::EAFNOSUPPORT),
        }
    }
}

/// `a` as a C socket address in `dst` (all zero for `None`).
pub fn write_addr(dst: &mut sockaddr_storage, a: Option<SocketAddr>) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    *dst = unsafe { std::mem::zeroed() };
    let p: *mut sockaddr_storage = dst;
    match a {
        None => {}
        Some(SocketAddr::V4(v4)) => {
            // SAFETY: a sockaddr_storage is large and aligned enough for
            // every sockaddr (that is its purpose); `p` is a live &mut.
            let s = unsafe { &mut *p.cast::<sockaddr_in>() };
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = v4.port().to_be();
            s.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
        }
        Some(SocketAddr::V6(v6)) => {
            // SAFETY: as above.
            let s = unsafe { &mut *p.cast::<sockaddr_in6>() };
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = v6.port().to_be();
            s.sin6_addr.s6_addr = v6.ip().octets();
            s.sin6_scope_id = v6.scope_id();
        }
    }
}

/// The C length of `a`'s sockaddr.
pub fn addr_len(a: &SocketAddr) -> usize {
    match a {
        SocketAddr::V4(_) => std::mem::size_of::<sockaddr_in>(),
        SocketAddr::V6(_) => std::mem::size_of::<sockaddr_in6>(),
    }
}
