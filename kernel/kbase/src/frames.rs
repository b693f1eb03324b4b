//! Physical memory bookkeeping: the free 4 KiB frames, as sorted, merged ranges
//! built from the boot memory map minus what is already taken (the image, the
//! first MiB). Contiguous runs serve DMA rings and buffers; one large run serves
//! the heap.

use core::ops::Range;
use heapless::Vec;

pub const FRAME_SIZE: u64 = 4096;
/// Most disjoint free ranges tracked; a free that would need more is leaked
/// and counted rather than corrupting the list.
pub const MAX_RANGES: usize = 256;

/// Why an allocation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    OutOfMemory,
    /// Zero-sized, or the alignment is not a power of two.
    BadRequest,
}

/// The free physical frames.
#[derive(Debug, Default)]
pub struct FrameRanges {
    free: Vec<Range<u64>, MAX_RANGES>,
    total: u64,
    leaked: u64,
}

fn align_up(x: u64, a: u64) -> Option<u64> {
    Some(x.checked_add(a - 1)? & !(a - 1))
}

impl FrameRanges {
    /// Free frames = `usable` ranges minus `reserved` ranges, trimmed to whole frames.
    pub fn new(usable: impl IntoIterator<Item = Range<u64>>, reserved: &[Range<u64>]) -> Self {
        let mut this = Self::default();
        for r in usable {
            let (Some(start), end) = (align_up(r.start, FRAME_SIZE), r.end & !(FRAME_SIZE - 1)) else {
                continue;
            };
            this.add_minus(start..end, reserved);
        }
        this.total = this.free_bytes();
        this
    }

    fn add_minus(&mut self, r: Range<u64>, reserved: &[Range<u64>]) {
        if r.start >= r.end {
            return;
        }
        // Split around the first reserved range that overlaps, then recurse on the rest.
        if let Some(cut) = reserved.iter().find(|c| c.start < r.end && r.start < c.end) {
            let below = r.start..(cut.start & !(FRAME_SIZE - 1)).max(r.start);
            let above = align_up(cut.end, FRAME_SIZE).unwrap_or(u64::MAX).min(r.end)..r.end;
            self.add_minus(below, reserved);
            self.add_minus(above, reserved);
        } else {
            self.insert(r);
        }
    }

    /// Bytes in free frames now.
    pub fn free_bytes(&self) -> u64 {
        self.free.iter().map(|r| r.end - r.start).sum()
    }

    /// Bytes that were free at start-up.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Bytes freed that could not be tracked (range list full).
    pub fn leaked_bytes(&self) -> u64 {
        self.leaked
    }

    /// The largest free range.
    pub fn largest(&self) -> Option<Range<u64>> {
        self.free.iter().max_by_key(|r| r.end - r.start).cloned()
    }

    /// Takes `frames` contiguous frames aligned to `align` bytes (a power of two
    /// of at least one frame), lowest address first.
    pub fn alloc(&mut self, frames: u64, align: u64) -> Result<u64, FrameError> {
        let align = align.max(FRAME_SIZE);
        let size = frames.checked_mul(FRAME_SIZE).ok_or(FrameError::BadRequest)?;
        if size == 0 || !align.is_power_of_two() {
            return Err(FrameError::BadRequest);
        }
        for i in 0..self.free.len() {
            let r = self.free[i].clone();
            let Some(start) = align_up(r.start, align) else { continue };
            let Some(end) = start.checked_add(size) else { continue };
            if end > r.end {
                continue;
            }
            self.take(i, start..end);
            return Ok(start);
        }
        Err(FrameError::OutOfMemory)
    }

    /// Takes `bytes` (whole frames) from the top of the largest free range, for
    /// a region that lives for the whole uptime, such as the heap.
    pub fn carve_top(&mut self, bytes: u64) -> Result<Range<u64>, FrameError> {
        let bytes = align_up(bytes, FRAME_SIZE).ok_or(FrameError::BadRequest)?;
        let (i, r) = self
            .free
            .iter()
            .enumerate()
            .max_by_key(|(_, r)| r.end - r.start)
            .map(|(i, r)| (i, r.clone()))
            .ok_or(FrameError::OutOfMemory)?;
        if bytes == 0 || r.end - r.start < bytes {
            return Err(FrameError::OutOfMemory);
        }
        let taken = r.end - bytes..r.end;
        self.take(i, taken.clone());
        Ok(taken)
    }

    // Removes `part` (inside free[i]) from the free list.
    fn take(&mut self, i: usize, part: Range<u64>) {
        let r = self.free[i].clone();
        match (part.start > r.start, part.end < r.end) {
            (false, false) => {
                self.free.remove(i);
            }
            (true, false) => self.free[i].end = part.start,
            (false, true) => self.free[i].start = part.end,
            (true, true) => {
                self.free[i].end = part.start;
                if self.free.insert(i + 1, part.end..r.end).is_err() {
                    // No room to track the tail: give it up rather than lose the list.
                    self.leaked += r.end - part.end;
                }
            }
        }
    }

    /// Returns `frames` frames starting at `start` to the free list.
    pub fn free(&mut self, start: u64, frames: u64) {
        let end = start.saturating_add(frames.saturating_mul(FRAME_SIZE));
        self.insert(start..end);
    }

    // Inserts a range keeping the list sorted and merged.
    fn insert(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        let i = self.free.partition_point(|f| f.end < r.start);
        let mut merged = r;
        while i < self.free.len() && self.free[i].start <= merged.end {
            let f = self.free.remove(i);
            merged = merged.start.min(f.start)..merged.end.max(f.end);
        }
        if self.free.insert(i, merged.clone()).is_err() {
            self.leaked += merged.end - merged.start;
        }
    }

    /// The free ranges, sorted.
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.free
    }
}

#[cfg(test)]
// Lists of one range are what the API takes, not a mistyped `vec![a; n]`.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn builds_from_map_minus_reserved() {
        // 0..640 KiB and 1 MiB..128 MiB usable; image at 1 MiB..3 MiB; first MiB reserved.
        let f = FrameRanges::new([0..640 * 1024, MIB..128 * MIB], &[0..MIB, MIB..3 * MIB + 100]);
        assert_eq!(f.ranges(), &[3 * MIB + FRAME_SIZE..128 * MIB]);
        assert_eq!(f.total_bytes(), 125 * MIB - FRAME_SIZE);
    }

    #[test]
    fn unaligned_regions_are_trimmed() {
        let f = FrameRanges::new([100..3 * FRAME_SIZE + 5], &[]);
        assert_eq!(f.ranges(), &[FRAME_SIZE..3 * FRAME_SIZE]);
    }

    #[test]
    fn alloc_aligned_and_free_merges_back() {
        let mut f = FrameRanges::new([FRAME_SIZE..64 * FRAME_SIZE], &[]);
        let a = f.alloc(1, FRAME_SIZE).unwrap();
        assert_eq!(a, FRAME_SIZE);
        let b = f.alloc(4, 16 * FRAME_SIZE).unwrap();
        assert_eq!(b, 16 * FRAME_SIZE);
        assert_eq!(f.ranges().len(), 2);
        f.free(b, 4);
        f.free(a, 1);
        assert_eq!(f.ranges(), &[FRAME_SIZE..64 * FRAME_SIZE]);
    }

    #[test]
    fn bad_requests_and_exhaustion() {
        let mut f = FrameRanges::new([0..4 * FRAME_SIZE], &[]);
        assert_eq!(f.alloc(0, FRAME_SIZE), Err(FrameError::BadRequest));
        assert_eq!(f.alloc(1, 3 * FRAME_SIZE), Err(FrameError::BadRequest));
        assert_eq!(f.alloc(u64::MAX, FRAME_SIZE), Err(FrameError::BadRequest));
        assert_eq!(f.alloc(5, FRAME_SIZE), Err(FrameError::OutOfMemory));
        assert!(f.alloc(4, FRAME_SIZE).is_ok());
        assert_eq!(f.alloc(1, FRAME_SIZE), Err(FrameError::OutOfMemory));
    }

    #[test]
    fn carve_top_takes_from_the_largest() {
        let mut f = FrameRanges::new([0..8 * FRAME_SIZE, 100 * FRAME_SIZE..200 * FRAME_SIZE], &[]);
        let heap = f.carve_top(10 * FRAME_SIZE - 1).unwrap();
        assert_eq!(heap, 190 * FRAME_SIZE..200 * FRAME_SIZE);
        assert_eq!(f.carve_top(1000 * FRAME_SIZE), Err(FrameError::OutOfMemory));
    }

    proptest::proptest! {
        #[test]
        fn alloc_free_keeps_totals(sizes in proptest::collection::vec(1u64..20, 1..60)) {
            let mut f = FrameRanges::new([0..4096 * FRAME_SIZE], &[]);
            let total = f.free_bytes();
            let mut held = alloc::vec::Vec::new();
            for (i, s) in sizes.iter().enumerate() {
                if let Ok(a) = f.alloc(*s, FRAME_SIZE << (i % 3)) {
                    held.push((a, *s));
                }
            }
            // No two allocations overlap.
            let mut spans: alloc::vec::Vec<_> = held.iter().map(|&(a, s)| (a, a + s * FRAME_SIZE)).collect();
            spans.sort();
            for w in spans.windows(2) {
                proptest::prop_assert!(w[0].1 <= w[1].0);
            }
            for (a, s) in held.into_iter().rev() {
                f.free(a, s);
            }
            proptest::prop_assert_eq!(f.free_bytes(), total);
            proptest::prop_assert_eq!(f.ranges().len(), 1);
        }
    }
}
