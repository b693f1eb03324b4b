//! Memory windows (IBA vol. 1 10.6.7; Linux `rxe_mw.c`): a remotely accessible
//! slice of an MR with its own rkey and its own remote rights, bound and unbound
//! without re-registering the MR.
//!
//! - Type 1 windows are bound by the `bind_mw` verb (which, as in libibverbs, posts
//!   a BIND_MW work request on a QP) and stay bound until rebound or deallocated;
//!   they cannot be invalidated (o10-37.2.26).
//! - Type 2B windows start free, are bound by a BIND_MW work request on a QP of
//!   their PD (C10-72), and are then usable through that QP only; LOCAL_INV or a
//!   SEND WITH INVALIDATE frees them.
//!
//! A window's rkey lives in its own index range, above every MR's, so the
//! responder can tell which of the two an rkey names from the key alone and look
//! at the window first (10.6.7.2, as `rxe_resp.c`'s `check_rkey` does).

use super::mr::{AccessFlags, MrError};
use super::pd::PdHandle;
use super::pool::{Pool, handle_type, join, split};

handle_type! {
    /// A memory window, as its pool names it; its rkey is [`Mw::rkey`].
    MwHandle
}

/// The index windows' rkeys start at: MR indices stay below it.
pub const INDEX_BASE: u32 = 1 << 16;

/// `enum ibv_mw_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MwType {
    Type1 = 1,
    Type2 = 2,
}

impl MwType {
    pub const fn from_raw(raw: u32) -> Option<MwType> {
        match raw {
            1 => Some(MwType::Type1),
            2 => Some(MwType::Type2),
            _ => None,
        }
    }
}

/// The rights a window may grant (Linux `RXE_ACCESS_SUPPORTED_MW`): remote ones
/// only; a window is never written locally.
pub const MW_ACCESS: u32 = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;

/// A memory window.
#[derive(Debug, Clone)]
pub struct Mw {
    pub pd: PdHandle,
    pub mw_type: MwType,
    /// The current rkey: the window's index with the key byte of its last bind.
    pub rkey: u32,
    /// Bound: the window names `addr..addr + length` of the MR `mr_key`.
    pub valid: bool,
    pub access: AccessFlags,
    pub addr: u64,
    pub length: u64,
    /// The lkey of the MR it is bound to (0: none).
    pub mr_key: u32,
    /// Type 2B: the QPN of the QP it was bound through, the only one that may
    /// use it (the QP's destruction frees the window, so a later QP reusing
    /// the number never inherits it).
    pub qp: Option<u32>,
}

/// A window's rkey from its pool handle.
pub fn rkey_of(handle: u32) -> u32 {
    let (index, key) = split(handle);
    join(index + INDEX_BASE, key)
}

/// Whether an rkey names a window rather than an MR.
pub fn is_mw_key(rkey: u32) -> bool {
    split(rkey).0 >= INDEX_BASE
}

/// The window `rkey` names, if it is that window's current rkey.
pub fn find(mws: &Pool<Mw>, rkey: u32) -> Option<&Mw> {
    let index = split(rkey).0.checked_sub(INDEX_BASE)?;
    mws.get_by_index(index).map(|(_, w)| w).filter(|w| w.rkey == rkey)
}

/// [`find`], mutably.
pub fn find_mut(mws: &mut Pool<Mw>, rkey: u32) -> Option<&mut Mw> {
    let index = split(rkey).0.checked_sub(INDEX_BASE)?;
    mws.get_by_index_mut(index).map(|(_, w)| w).filter(|w| w.rkey == rkey)
}

impl Mw {
    /// A new window: type 1 is born bound to nothing (valid, zero length, as
    /// `rxe_alloc_mw` leaves it), type 2B free.
    pub fn new(pd: PdHandle, mw_type: MwType, rkey: u32) -> Mw {
        Mw {
            pd,
            mw_type,
            rkey,
            valid: mw_type == MwType::Type1,
            access: AccessFlags(0),
            addr: 0,
            length: 0,
            mr_key: 0,
            qp: None,
        }
    }

    /// Checks a remote access of `rights` over `va..va + len` through `qp` of
    /// `pd` against the window alone (`rxe_lookup_mw`, then the range check).
    pub fn check(&self, qpn: u32, pd: PdHandle, va: u64, len: u64, rights: u32) -> Result<(), MrError> {
        if !self.valid || self.length == 0 {
            return Err(MrError::Invalidated);
        }
        if self.pd != pd {
            return Err(MrError::PdMismatch);
        }
        if self.mw_type == MwType::Type2 && self.qp != Some(qpn) {
            return Err(MrError::PdMismatch);
        }
        if !self.access.has(rights) {
            return Err(MrError::Access);
        }
        let end = va.checked_add(len).ok_or(MrError::Bounds)?;
        if va < self.addr || end > self.addr.saturating_add(self.length) {
            return Err(MrError::Bounds);
        }
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn window_keys_sit_above_mr_keys() {
        assert!(is_mw_key(rkey_of(0x05)));
        assert!(!is_mw_key(0x00FF_FFFF));
        let mut pool = Pool::new(4);
        let h = pool.insert_with(|h| Mw::new(PdHandle(1), MwType::Type2, rkey_of(h))).expect("room");
        let rkey = rkey_of(h);
        assert!(find(&pool, rkey).is_some());
        assert!(find(&pool, rkey ^ 1).is_none(), "another key byte");
        assert!(find(&pool, h).is_none(), "an MR-range key");
    }

    #[test]
    fn checks_look_at_the_window() {
        let qp = 7;
        let mut w = Mw::new(PdHandle(1), MwType::Type2, 0x0100_0001);
        assert_eq!(w.check(qp, PdHandle(1), 0x1000, 1, 0), Err(MrError::Invalidated), "free");
        w = Mw {
            valid: true,
            access: AccessFlags(AccessFlags::REMOTE_READ),
            addr: 0x1000,
            length: 0x100,
            qp: Some(qp),
            ..w
        };
        assert_eq!(w.check(qp, PdHandle(1), 0x1000, 0x100, AccessFlags::REMOTE_READ), Ok(()));
        assert_eq!(w.check(8, PdHandle(1), 0x1000, 1, 0), Err(MrError::PdMismatch), "another QP");
        assert_eq!(w.check(qp, PdHandle(2), 0x1000, 1, 0), Err(MrError::PdMismatch));
        assert_eq!(w.check(qp, PdHandle(1), 0x1000, 1, AccessFlags::REMOTE_WRITE), Err(MrError::Access));
        assert_eq!(w.check(qp, PdHandle(1), 0x10FF, 2, 0), Err(MrError::Bounds));
    }
}
