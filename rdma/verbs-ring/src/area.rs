//! A first-fit range allocator over one area of the region.
//!
//! The firmware uses one per context to place SQ, RQ, SRQ and CQ rings in
//! the context's queue area; the host library uses one over its context's
//! buffer area to carve MR memory (page-grained). Bookkeeping lives with the
//! allocating side only, never in shared memory, so the peer cannot corrupt
//! it. Frees are checked: a range that was not allocated is refused.

use alloc::vec::Vec;

/// Why a free was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AreaError {
    /// The range was not allocated (a double free, or a wrong length).
    NotAllocated { off: u64, len: u64 },
}

/// Free ranges of `[base, base + size)`, sorted and coalesced; allocations
/// are rounded up to `align` (a power of two) and aligned to it.
#[derive(Clone, Debug)]
pub struct RangeAllocator {
    base: u64,
    size: u64,
    align: u64,
    free: Vec<(u64, u64)>,
}

impl RangeAllocator {
    /// An allocator over `[base, base + size)`. `base` is rounded up and
    /// `size` down to `align`, which must be a power of two (else 1 is used).
    pub fn new(base: u64, size: u64, align: u64) -> Self {
        let align = if align.is_power_of_two() { align } else { 1 };
        let start = base.checked_next_multiple_of(align).unwrap_or(u64::MAX);
        let end = base.saturating_add(size) & !(align - 1);
        let free = if end > start { alloc::vec![(start, end - start)] } else { Vec::new() };
        RangeAllocator { base, size, align, free }
    }

    /// The area this allocator manages.
    pub fn area(&self) -> (u64, u64) {
        (self.base, self.size)
    }

    /// The length an allocation of `len` bytes really takes.
    pub fn rounded(&self, len: u64) -> Option<u64> {
        len.max(1).checked_next_multiple_of(self.align)
    }

    /// Allocate `len` bytes; the region offset, or `None` when no free range
    /// is large enough.
    pub fn alloc(&mut self, len: u64) -> Option<u64> {
        let len = self.rounded(len)?;
        let i = self.free.iter().position(|&(_, l)| l >= len)?;
        let (off, l) = self.free[i];
        if l == len {
            self.free.remove(i);
        } else {
            self.free[i] = (off + len, l - len);
        }
        Some(off)
    }

    /// Allocate exactly `[off, off + len)` (`len` rounded up) if all of it
    /// is free: `Some(off)`, else `None` and nothing changes. The host
    /// library grows a run of moved pages in place with it.
    pub fn alloc_at(&mut self, off: u64, len: u64) -> Option<u64> {
        let len = self.rounded(len)?;
        let end = off.checked_add(len)?;
        if !off.is_multiple_of(self.align) {
            return None;
        }
        let i = self.free.iter().position(|&(o, l)| o <= off && end <= o + l)?;
        let (o, l) = self.free.remove(i);
        if o + l > end {
            self.free.insert(i, (end, o + l - end));
        }
        if off > o {
            self.free.insert(i, (o, off - o));
        }
        Some(off)
    }

    /// Return `[off, off + len)` (the `len` given to `alloc`).
    pub fn free(&mut self, off: u64, len: u64) -> Result<(), AreaError> {
        let err = AreaError::NotAllocated { off, len };
        let len = self.rounded(len).ok_or(err)?;
        let end = off.checked_add(len).ok_or(err)?;
        if !off.is_multiple_of(self.align) || off < self.base || end > self.base.saturating_add(self.size) {
            return Err(err);
        }
        // The first free range after `off`; the range must not overlap it nor
        // the one before.
        let i = self.free.partition_point(|&(o, _)| o < off);
        if let Some(&(next, _)) = self.free.get(i)
            && end > next
        {
            return Err(err);
        }
        if i > 0 {
            let (po, pl) = self.free[i - 1];
            if po + pl > off {
                return Err(err);
            }
        }
        self.free.insert(i, (off, len));
        // Coalesce with the neighbours.
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free[i].1;
            self.free.remove(i);
        }
        Ok(())
    }

    /// Bytes free in total.
    pub fn free_bytes(&self) -> u64 {
        self.free.iter().map(|&(_, l)| l).sum()
    }

    /// Free everything.
    pub fn reset(&mut self) {
        *self = RangeAllocator::new(self.base, self.size, self.align);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_at_takes_exactly_the_range_if_free() {
        let mut a = RangeAllocator::new(0, 4096 * 8, 4096);
        assert_eq!(a.alloc(4096), Some(0));
        assert_eq!(a.alloc_at(4096 * 2, 4096), Some(4096 * 2));
        assert_eq!(a.alloc_at(4096 * 2, 1), None, "taken");
        assert_eq!(a.alloc_at(0, 4096), None, "taken");
        assert_eq!(a.alloc_at(4096 * 7, 8192), None, "past the end");
        assert_eq!(a.alloc_at(100, 4096), None, "unaligned");
        assert_eq!(a.free_bytes(), 4096 * 6);
        assert_eq!(a.alloc(4096), Some(4096), "the hole before it");
        assert_eq!(a.alloc(4096 * 5), Some(4096 * 3));
        a.free(4096, 4096 * 7).unwrap();
        assert_eq!(a.free_bytes(), 4096 * 7);
    }

    #[test]
    fn alloc_free_coalesce() {
        let mut a = RangeAllocator::new(4096, 4096 * 4, 4096);
        let x = a.alloc(1).unwrap();
        let y = a.alloc(4097).unwrap();
        let z = a.alloc(4096).unwrap();
        assert_eq!((x, y, z), (4096, 8192, 16384));
        assert_eq!(a.alloc(1), None);
        assert_eq!(a.free(y, 4096), Ok(()));
        assert_eq!(a.free(y + 4096, 4096), Ok(()));
        assert_eq!(a.alloc(8192), Some(8192));
        assert_eq!(a.free(8192, 8192), Ok(()));
        assert_eq!(a.free(8192, 4096), Err(AreaError::NotAllocated { off: 8192, len: 4096 }));
        assert_eq!(a.free(x, 1), Ok(()));
        assert_eq!(a.free(z, 4096), Ok(()));
        assert_eq!(a.free_bytes(), 4096 * 4);
        assert_eq!(a.free, alloc::vec![(4096, 4096 * 4)]);
        assert!(a.free(0, 4096).is_err());
        assert!(a.free(u64::MAX - 10, 4096).is_err());
    }

    #[test]
    fn unaligned_area_is_trimmed() {
        let a = RangeAllocator::new(100, 300, 64);
        assert_eq!(a.free, alloc::vec![(128, 256)]);
        assert_eq!(RangeAllocator::new(u64::MAX - 5, 100, 64).free_bytes(), 0);
    }
}
