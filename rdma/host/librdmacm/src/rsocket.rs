//! The `rsocket` symbols (`rdma/rsocket.h`): exported because Debian's
//! rping, ucmatose and udaddy import `rpoll` (their `do_poll` goes through
//! it) and rdma-core's map lists them all. rsockets themselves (sockets
//! over RDMA connections) are not offered: `rsocket` fails with
//! `EAFNOSUPPORT`, so no rsocket descriptor ever exists and every call on
//! one fails with `EBADF` — except `rpoll` and `rselect`, which are the
//! system's `poll` and `select` on ordinary descriptors (such as an event
//! channel's or a completion channel's, which are real fds here).

use std::ffi::{c_int, c_void};

use libc::{fd_set, iovec, msghdr, nfds_t, off_t, pollfd, sockaddr, socklen_t, ssize_t, timeval};

use crate::ffi::set_errno;

fn fail<T: From<i8>>(e: c_int) -> T {
    set_errno(e);
    T::from(-1)
}

#[unsafe(no_mangle)]
pub extern "C" fn rsocket(_domain: c_int, _type: c_int, _protocol: c_int) -> c_int {
    fail(libc::EAFNOSUPPORT)
}

/// `poll` itself: the caller's array, as poll(2) takes it.
///
/// # Safety
/// `fds` points to `nfds` entries (poll's contract).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rpoll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    // SAFETY: the caller's promise, passed on unchanged.
    unsafe { libc::poll(fds, nfds, timeout) }
}

/// `select` itself.
///
/// # Safety
/// Each set null or valid, `timeout` null or valid (select's contract).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rselect(
    nfds: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    timeout: *mut timeval,
) -> c_int {
    // SAFETY: the caller's promise, passed on unchanged.
    unsafe { libc::select(nfds, r, w, e, timeout) }
}

#[unsafe(no_mangle)]
pub extern "C" fn rbind(_s: c_int, _a: *const sockaddr, _l: socklen_t) -> c_int {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rlisten(_s: c_int, _backlog: c_int) -> c_int {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn raccept(_s: c_int, _a: *mut sockaddr, _l: *mut socklen_t) -> c_int {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rconnect(_s: c_int, _a: *const sockaddr, _l: socklen_t) -> c_int {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rshutdown(_s: c_int, _how: c_int) -> c_int {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rclose(_s: c_int) -> c_int {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rrecv(_s: c_int, _buf: *mut c_void, _len: usize, _flags: c_int) -> ssize_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rrecvfrom(
    _s: c_int,
    _buf: *mut c_void,
    _len: usize,
    _flags: c_int,
    _a: *mut sockaddr,
    _l: *mut socklen_t,
) -> ssize_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rrecvmsg(_s: c_int, _msg: *mut msghdr, _flags: c_int) -> ssize_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rsend(_s: c_int, _buf: *const c_void, _len: usize, _flags: c_int) -> ssize_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rsendto(
    _s: c_int,
    _buf: *const c_void,
    _len: usize,
    _flags: c_int,
    _a: *const sockaddr,
    _l: socklen_t,
) -> ssize_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rsendmsg(_s: c_int, _msg: *const msghdr, _flags: c_int) -> ssize_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rread(_s: c_int, _buf: *mut c_void, _count: usize) -> ssize_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rreadv(_s: c_int, _iov: *const iovec, _n: c_int) -> ssize_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rwrite(_s: c_int, _buf: *const c_void, _count: usize) -> ssize_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rwritev(_s: c_int, _iov: *const iovec, _n: c_int) -> ssize_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rgetpeername(_s: c_int, _a: *mut sockaddr, _l: *mut socklen_t) -> c_int {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rgetsockname(_s: c_int, _a: *mut sockaddr, _l: *mut socklen_t) -> c_int {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rsetsockopt(_s: c_int, _level: c_int, _name: c_int, _v: *const c_void, _l: socklen_t) -> c_int {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn rgetsockopt(_s: c_int, _level: c_int, _name: c_int, _v: *mut c_void, _l: *mut socklen_t) -> c_int {
    fail(libc::EBADF)
}

/// `rfcntl(socket, cmd, ...)`: declared with one word of argument, which
/// is how the x86-64 SysV ABI passes the variadic `arg` (never read here:
/// there are no rsocket descriptors).
#[unsafe(no_mangle)]
pub extern "C" fn rfcntl(_s: c_int, _cmd: c_int, _arg: usize) -> c_int {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn riomap(_s: c_int, _buf: *mut c_void, _len: usize, _prot: c_int, _flags: c_int, _off: off_t) -> off_t {
    fail(libc::EBADF)
}

#[unsafe(no_mangle)]
pub extern "C" fn riounmap(_s: c_int, _buf: *mut c_void, _len: usize) -> c_int {
    fail(libc::EBADF)
}

/// Returns `(size_t)-1` on failure, as rsocket's does.
#[unsafe(no_mangle)]
pub extern "C" fn riowrite(_s: c_int, _buf: *const c_void, _count: usize, _off: off_t, _flags: c_int) -> usize {
    set_errno(libc::EBADF);
    usize::MAX
}
