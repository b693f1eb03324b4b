//! UD multicast: `ibv_attach_mcast` / `ibv_detach_mcast` over the ring's
//! ATTACH_MCAST / DETACH_MCAST. RoCE has no multicast LIDs: the group is
//! its GID (an IPv4-mapped 224.0.0.0/4 or an IPv6 ff00::/8 address), and
//! the LID the program passes is carried as it is (the appliance, as Linux
//! rxe, ignores it).

use std::ffi::c_int;

use verbs_ring::cmd::{self, nr};

use crate::abi::ibv_qp;
use crate::ffi::{self, guard};
use crate::state::errno_of;

/// One attach or detach; the errno, 0 on success (libibverbs' convention).
///
/// # Safety
/// `qp` is null or a QP of this library; `gid` null or 16 readable bytes.
unsafe fn mcast(n: u16, qp: *mut ibv_qp, gid: *const [u8; 16], lid: u16) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the caller's promise.
        let Ok(q) = (unsafe { ffi::qp(qp) }) else { return libc::EINVAL };
        if gid.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's promise; `union ibv_gid` is 16 bytes.
        let gid = unsafe { gid.read_unaligned() };
        let req = cmd::McastReq { qp_handle: q.fw, mlid: lid, reserved: 0, gid };
        match q.sh.ctx.command::<_, cmd::Empty>(n, &req) {
            Ok(_) => 0,
            Err(e) => errno_of(&e),
        }
    })
}

/// # Safety
/// `qp` is a QP of this library, `gid` a `union ibv_gid` (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const [u8; 16], lid: u16) -> c_int {
    // SAFETY: forwarded.
    unsafe { mcast(nr::ATTACH_MCAST, qp, gid, lid) }
}

/// # Safety
/// As [`ibv_attach_mcast`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const [u8; 16], lid: u16) -> c_int {
    // SAFETY: forwarded.
    unsafe { mcast(nr::DETACH_MCAST, qp, gid, lid) }
}
