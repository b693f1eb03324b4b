//! Memory regions (IBA vol. 1 10.6): a registered range of the consumer's virtual
//! addresses with access rights, named locally by its lkey and remotely by its rkey.
//! Every use checks the key, the MR's state, the PD, the rights and the bounds, in
//! that order, as Linux rxe's `lookup_mr` / `mr_check_range` do.

use super::pd::PdHandle;
use super::pool::handle_type;

handle_type! {
    /// A memory region. Its raw value is its lkey (and rkey, when remote access is on).
    MrHandle
}

/// `enum ibv_access_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AccessFlags(pub u32);

impl AccessFlags {
    pub const LOCAL_WRITE: u32 = 1 << 0;
    pub const REMOTE_WRITE: u32 = 1 << 1;
    pub const REMOTE_READ: u32 = 1 << 2;
    pub const REMOTE_ATOMIC: u32 = 1 << 3;
    /// Every flag this transport knows.
    pub const ALL: u32 = Self::LOCAL_WRITE | Self::REMOTE_WRITE | Self::REMOTE_READ | Self::REMOTE_ATOMIC;
    /// Any remote right: the MR gets an rkey.
    pub const REMOTE: u32 = Self::REMOTE_WRITE | Self::REMOTE_READ | Self::REMOTE_ATOMIC;

    pub const fn has(self, flags: u32) -> bool {
        self.0 & flags == flags
    }
}

/// Why a memory access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrError {
    /// No MR has this key (never registered, deregistered, or forged).
    BadKey,
    /// The MR was invalidated (LOCAL_INV or SEND WITH INVALIDATE).
    Invalidated,
    /// The MR belongs to another PD than the QP.
    PdMismatch,
    /// The MR lacks the right the access needs.
    Access,
    /// The range runs outside the MR.
    Bounds,
}

/// A registered memory region.
#[derive(Debug, Clone)]
pub struct Mr {
    pub pd: PdHandle,
    /// The address work requests and peers name the first byte by.
    pub iova: u64,
    /// Where the first byte is in the transport's memory.
    pub addr: u64,
    pub length: u64,
    pub access: AccessFlags,
    /// The lkey; equal to the rkey when any remote right is set.
    pub key: u32,
    /// Cleared by invalidation.
    pub valid: bool,
}

impl Mr {
    /// Whether this MR may be named remotely.
    pub fn rkey(&self) -> Option<u32> {
        (self.access.0 & AccessFlags::REMOTE != 0).then_some(self.key)
    }

    /// Checks an access of `len` bytes at iova `addr` needing `rights` from a QP
    /// in `pd`; the memory address of those bytes.
    pub fn check(&self, pd: PdHandle, addr: u64, len: u64, rights: u32) -> Result<u64, MrError> {
        if !self.valid {
            return Err(MrError::Invalidated);
        }
        if self.pd != pd {
            return Err(MrError::PdMismatch);
        }
        if !self.access.has(rights) {
            return Err(MrError::Access);
        }
        let end = addr.checked_add(len).ok_or(MrError::Bounds)?;
        let mr_end = self.iova.saturating_add(self.length);
        if addr < self.iova || end > mr_end {
            return Err(MrError::Bounds);
        }
        Ok(self.addr + (addr - self.iova))
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn mr(access: u32) -> Mr {
        Mr {
            pd: PdHandle(1),
            iova: 0x1000,
            addr: 0x1000,
            length: 0x100,
            access: AccessFlags(access),
            key: 0x105,
            valid: true,
        }
    }

    #[test]
    fn checks_in_order() {
        let m = mr(AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ);
        assert_eq!(m.check(PdHandle(1), 0x1000, 0x100, AccessFlags::REMOTE_READ), Ok(0x1000));
        assert_eq!(m.check(PdHandle(1), 0x1000, 0, 0), Ok(0x1000));
        assert_eq!(m.check(PdHandle(2), 0x1000, 1, 0), Err(MrError::PdMismatch));
        assert_eq!(m.check(PdHandle(1), 0x1000, 1, AccessFlags::REMOTE_WRITE), Err(MrError::Access));
        assert_eq!(m.check(PdHandle(1), 0xFFF, 1, 0), Err(MrError::Bounds));
        assert_eq!(m.check(PdHandle(1), 0x1001, 0x100, 0), Err(MrError::Bounds));
        assert_eq!(m.check(PdHandle(1), u64::MAX, 2, 0), Err(MrError::Bounds));
        let dead = Mr { valid: false, ..m.clone() };
        assert_eq!(dead.check(PdHandle(1), 0x1000, 1, 0), Err(MrError::Invalidated));
        assert_eq!(m.rkey(), Some(0x105));
        assert_eq!(mr(AccessFlags::LOCAL_WRITE).rkey(), None);
    }

    /// An MR whose iova is not its memory address (the C ABI's virtual
    /// addresses): checks are in iova space, the answer in memory's.
    #[test]
    fn an_iova_maps_onto_the_memory_address() {
        let m = Mr { iova: 0x7f00_0000_1000, addr: 0x20_0000, ..mr(AccessFlags::LOCAL_WRITE) };
        assert_eq!(m.check(PdHandle(1), 0x7f00_0000_1010, 0x10, 0), Ok(0x20_0010));
        assert_eq!(m.check(PdHandle(1), 0x20_0010, 0x10, 0), Err(MrError::Bounds));
        assert_eq!(m.check(PdHandle(1), 0x7f00_0000_10f0, 0x11, 0), Err(MrError::Bounds));
    }
}
