//! Memory regions (IBA vol. 1 10.6): a registered range of the consumer's virtual
//! addresses with access rights, named locally by its lkey and remotely by its rkey.
//! Every use checks the key, the MR's state, the PD, the rights and the bounds, in
//! that order, as Linux rxe's `lookup_mr` / `mr_check_range` do.
//!
//! Two kinds (Linux `IB_MR_TYPE_USER` and `IB_MR_TYPE_MEM_REG`):
//! - registered MRs (`reg_mr`): valid from birth, one contiguous range;
//! - fast-register MRs (`alloc_mr`, IBA 10.6.3.5 "fast registration"): born
//!   free (unusable), given a page list by `map_mr_sg` and made valid by a
//!   REG_MR work request, which may also change the key byte of the lkey and
//!   rkey (10.6.3.1: the consumer owns the low 8 bits); invalidated (free again)
//!   by LOCAL_INV or a SEND WITH INVALIDATE naming the rkey.
//!
//! Keys are looked up by their index (the upper 24 bits) and then compared
//! whole with the MR's current key, as `lookup_mr` does: after a re-registration
//! with a new key byte, the old key names nothing.

use alloc::vec::Vec;

use super::pd::PdHandle;
use super::pool::{Pool, handle_type, split};

handle_type! {
    /// A memory region. Its raw value is its lkey (and rkey, when remote access is
    /// on) as registered; a fast-register MR's key may move on (see [`Mr::key`]).
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
    /// Memory windows may be bound to this MR (C10-73).
    pub const MW_BIND: u32 = 1 << 4;
    /// FLUSH with global visibility placement may target this MR (IBA 1.5 A19).
    pub const FLUSH_GLOBAL: u32 = 1 << 8;
    /// FLUSH with persistence placement (not in [`Self::ALL`]: refused).
    pub const FLUSH_PERSISTENT: u32 = 1 << 9;
    /// Every flag an MR may carry here. `ZERO_BASED`, `ON_DEMAND` and
    /// `FLUSH_PERSISTENT` are refused: nothing here implements them (the
    /// appliance has no persistent memory to flush to).
    pub const ALL: u32 = Self::LOCAL_WRITE
        | Self::REMOTE_WRITE
        | Self::REMOTE_READ
        | Self::REMOTE_ATOMIC
        | Self::MW_BIND
        | Self::FLUSH_GLOBAL;
    /// The rights a QP's `qp_access_flags` may carry.
    pub const QP_ALL: u32 = Self::LOCAL_WRITE | Self::REMOTE_WRITE | Self::REMOTE_READ | Self::REMOTE_ATOMIC;
    /// Any remote right: the MR gets an rkey.
    pub const REMOTE: u32 = Self::REMOTE_WRITE | Self::REMOTE_READ | Self::REMOTE_ATOMIC | Self::FLUSH_GLOBAL;

    pub const fn has(self, flags: u32) -> bool {
        self.0 & flags == flags
    }
}

/// Why a memory access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrError {
    /// No MR has this key (never registered, deregistered, or forged).
    BadKey,
    /// The MR was invalidated (LOCAL_INV or SEND WITH INVALIDATE), or a
    /// fast-register MR was never registered.
    Invalidated,
    /// The MR belongs to another PD than the QP.
    PdMismatch,
    /// The MR lacks the right the access needs.
    Access,
    /// The range runs outside the MR.
    Bounds,
}

/// How an MR came to be (Linux `enum ib_mr_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrType {
    /// `reg_mr`: one contiguous range, valid until deregistered.
    User,
    /// `alloc_mr(IB_MR_TYPE_MEM_REG)`: registered and invalidated by work requests.
    MemReg,
}

/// The smallest page a page list may use (`page_size_cap`'s lowest bit).
pub const MIN_PAGE_SHIFT: u32 = 12;
/// The largest (a 2 GiB page is more than the appliance has).
pub const MAX_PAGE_SHIFT: u32 = 31;

/// A registered memory region.
#[derive(Debug, Clone)]
pub struct Mr {
    pub pd: PdHandle,
    /// The address work requests and peers name the first byte by.
    pub iova: u64,
    /// Where the first byte is in the transport's memory (contiguous MRs).
    pub addr: u64,
    pub length: u64,
    pub access: AccessFlags,
    /// The current lkey; equal to the rkey when any remote right is set.
    pub key: u32,
    /// Cleared by invalidation; a fast-register MR starts cleared.
    pub valid: bool,
    pub mr_type: MrType,
    /// Fast-register MRs: the pages `map_mr_sg` gave, each `1 << page_shift`
    /// bytes at a memory address aligned to that size. Byte `iova + n` lives
    /// `(iova % page) + n` bytes into the list. Empty: contiguous at `addr`.
    pub pages: Vec<u64>,
    pub page_shift: u32,
    /// Fast-register MRs: the most pages a list may have (`max_num_sg`).
    pub max_pages: u32,
    /// Memory windows bound to this MR: while any is, it can be neither
    /// invalidated nor deregistered (Linux rxe's `num_mw`; IBA C10-1-x).
    pub bound_mws: u32,
}

/// The MR `key` names, if it is that MR's current lkey.
pub fn find(mrs: &Pool<Mr>, key: u32) -> Option<&Mr> {
    mrs.get_by_index(split(key).0).map(|(_, m)| m).filter(|m| m.key == key)
}

/// [`find`], mutably.
pub fn find_mut(mrs: &mut Pool<Mr>, key: u32) -> Option<&mut Mr> {
    mrs.get_by_index_mut(split(key).0).map(|(_, m)| m).filter(|m| m.key == key)
}

impl Mr {
    /// A registered MR over contiguous memory.
    pub fn contiguous(pd: PdHandle, iova: u64, addr: u64, length: u64, access: AccessFlags, key: u32) -> Mr {
        Mr {
            pd,
            iova,
            addr,
            length,
            access,
            key,
            valid: true,
            mr_type: MrType::User,
            pages: Vec::new(),
            page_shift: MIN_PAGE_SHIFT,
            max_pages: 0,
            bound_mws: 0,
        }
    }

    /// Whether this MR may be named remotely.
    pub fn rkey(&self) -> Option<u32> {
        (self.access.0 & AccessFlags::REMOTE != 0).then_some(self.key)
    }

    /// The memory address of the byte at iova `at`, which must be inside the MR.
    fn translate(&self, at: u64) -> u64 {
        let off = at - self.iova;
        if self.pages.is_empty() {
            return self.addr + off;
        }
        let mask = (1u64 << self.page_shift) - 1;
        let pos = (self.iova & mask) + off;
        let page = self.pages.get((pos >> self.page_shift) as usize).copied().unwrap_or(0);
        page + (pos & mask)
    }

    /// Checks an access of `len` bytes at iova `addr` needing `rights` from a QP
    /// in `pd`; the memory address of the first of those bytes (the rest may lie
    /// on other pages: move them with [`Mr::pieces`]).
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
        self.check_bounds(addr, len)?;
        Ok(self.translate(addr))
    }

    /// Whether `addr..addr + len` lies inside the MR.
    pub fn check_bounds(&self, addr: u64, len: u64) -> Result<(), MrError> {
        let end = addr.checked_add(len).ok_or(MrError::Bounds)?;
        let mr_end = self.iova.saturating_add(self.length);
        if addr < self.iova || end > mr_end { Err(MrError::Bounds) } else { Ok(()) }
    }

    /// Splits the (checked) range `addr..addr + len` into runs of contiguous
    /// memory: `f(memory address, range of the caller's buffer)` for each, in
    /// order, stopping at the first `false`. Returns whether every run was taken.
    pub fn pieces(&self, addr: u64, len: usize, mut f: impl FnMut(u64, core::ops::Range<usize>) -> bool) -> bool {
        if self.pages.is_empty() {
            return f(self.translate(addr), 0..len);
        }
        let page = 1u64 << self.page_shift;
        let mut done = 0usize;
        while done < len {
            let at = addr + done as u64;
            let room = (page - ((at - self.iova + (self.iova & (page - 1))) & (page - 1))) as usize;
            let n = room.min(len - done);
            if !f(self.translate(at), done..done + n) {
                return false;
            }
            done += n;
        }
        true
    }
}

/// The checked range `addr..addr + len` of an MR as the runs of memory it is in
/// ([`Mr::pieces`]): a READ response's payload.
pub struct MrRuns<'a> {
    pub mr: &'a Mr,
    pub addr: u64,
    pub len: usize,
}

impl super::gather::Runs for MrRuns<'_> {
    fn each(&self, f: &mut dyn FnMut(u64, usize) -> bool) -> bool {
        self.len == 0 || self.mr.pieces(self.addr, self.len, |at, r| f(at, r.len()))
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn mr(access: u32) -> Mr {
        Mr::contiguous(PdHandle(1), 0x1000, 0x1000, 0x100, AccessFlags(access), 0x105)
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

    /// A page-list MR whose iova starts mid-page: bytes map through the list,
    /// and a range crossing a page boundary comes out in pieces.
    #[test]
    fn a_page_list_maps_page_by_page() {
        let mut m = Mr { pages: alloc::vec![0x5000, 0x2000], ..mr(AccessFlags::LOCAL_WRITE) };
        m.iova = 0x7000_0f00;
        m.length = 0x200;
        assert_eq!(m.check(PdHandle(1), 0x7000_0f00, 1, 0), Ok(0x5f00));
        assert_eq!(m.check(PdHandle(1), 0x7000_1000, 1, 0), Ok(0x2000));
        assert_eq!(m.check(PdHandle(1), 0x7000_1000, 0x101, 0), Err(MrError::Bounds));
        let mut got = alloc::vec::Vec::new();
        assert!(m.pieces(0x7000_0ff0, 0x20, |at, r| {
            got.push((at, r));
            true
        }));
        assert_eq!(got, [(0x5ff0, 0..0x10), (0x2000, 0x10..0x20)]);
    }
}
