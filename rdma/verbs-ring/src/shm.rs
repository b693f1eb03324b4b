//! The shared-memory boundary: the one trait the firmware (ivshmem BAR2) and
//! the host library (an `mmap`ped `/dev/shm` file) each implement, and a
//! heap-backed fake for host tests.
//!
//! Everything in this crate reaches shared memory through [`SharedMem`], by
//! offset, never by reference: the peer may change any byte at any time, so
//! no Rust reference into the region may exist (that would promise the
//! compiler the bytes cannot change). Like virtio-drivers' `Hal`, the trait
//! keeps the platform's `unsafe` (mapping, volatile or atomic access) on the
//! implementor's side, in one small place; this crate has none.
//!
//! Ordering model (virtio-drivers `queue.rs`, hubris' descriptor ring): bulk
//! bytes move with [`SharedMem::read`] / [`SharedMem::write`], which need no
//! ordering of their own; a producer publishes them with
//! [`SharedMem::store_u32_release`] on an index, and a consumer that observed
//! that index with [`SharedMem::load_u32_acquire`] is guaranteed to read the
//! bytes written before it.

use core::fmt;

/// Why a shared-memory access was refused. Never a panic: an offset that
/// came from the peer may be anything.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ShmError {
    /// `off + len` lies beyond the region (or overflows).
    OutOfBounds { off: usize, len: usize, region: usize },
    /// An atomic access at an offset that is not 4-byte aligned.
    Misaligned { off: usize },
}

impl fmt::Display for ShmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShmError::OutOfBounds { off, len, region } => {
                write!(f, "shared-memory access {off:#x}+{len:#x} outside the {region:#x}-byte region")
            }
            ShmError::Misaligned { off } => write!(f, "atomic access at unaligned offset {off:#x}"),
        }
    }
}

/// Check that `[off, off + len)` lies inside a region of `region` bytes.
pub fn check_range(region: usize, off: usize, len: usize) -> Result<(), ShmError> {
    match off.checked_add(len) {
        Some(end) if end <= region => Ok(()),
        _ => Err(ShmError::OutOfBounds { off, len, region }),
    }
}

/// Check an atomic `u32` access: in bounds and 4-byte aligned.
pub fn check_u32(region: usize, off: usize) -> Result<(), ShmError> {
    if !off.is_multiple_of(4) {
        return Err(ShmError::Misaligned { off });
    }
    check_range(region, off, 4)
}

/// A region of memory shared with a peer that is not trusted.
///
/// Obligations on the implementor (the firmware's ivshmem mapping, the host's
/// `mmap`):
/// 1. every method checks its offset and length with [`check_range`] /
///    [`check_u32`] and touches nothing outside `[0, len())`;
/// 2. the `u32` operations are single atomic accesses (no tearing) with the
///    stated ordering; values are little-endian in the region, so on a
///    big-endian machine the implementor swaps bytes;
/// 3. `read` / `write` never create a Rust reference to the region: use
///    volatile or relaxed-atomic copies, because the peer writes concurrently.
///    They need no ordering; the caller orders them with the `u32` operations.
///
/// Promises of this crate in return: every value read from the region is
/// checked before use (bounds, capacity, handles); bulk data is copied out
/// once and only the copy is validated and used; nothing here panics on what
/// the region holds.
pub trait SharedMem {
    /// Size of the region in bytes.
    fn len(&self) -> usize;

    /// Whether the region is empty (never, for a real one).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Atomic load with acquire ordering: later reads see everything the peer
    /// wrote before its matching release store.
    fn load_u32_acquire(&self, off: usize) -> Result<u32, ShmError>;

    /// Atomic store with release ordering: everything written before becomes
    /// visible to a peer that acquires this value.
    fn store_u32_release(&self, off: usize, v: u32) -> Result<(), ShmError>;

    /// Atomic compare-and-swap (acquire-release on success, acquire on
    /// failure): `Ok(Ok(current))` when the value was `current` and is now
    /// `new`, `Ok(Err(actual))` when it was `actual` and nothing changed.
    fn compare_exchange_u32(&self, off: usize, current: u32, new: u32) -> Result<Result<u32, u32>, ShmError>;

    /// A full (sequentially consistent) fence: this side's earlier stores
    /// are visible before its later loads. Acquire and release order one
    /// side's accesses against the peer's matching operation; the wake-up
    /// handshakes ([`crate::wake`]) need more, a store then a load of
    /// another word (Dekker's pattern), which only a full fence orders.
    fn fence(&self) {
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }

    /// Copy `buf.len()` bytes out of the region.
    fn read(&self, off: usize, buf: &mut [u8]) -> Result<(), ShmError>;

    /// Copy `data` into the region.
    fn write(&self, off: usize, data: &[u8]) -> Result<(), ShmError>;

    /// Fill `[off, off + len)` with zeroes.
    fn zero(&self, off: usize, len: usize) -> Result<(), ShmError> {
        check_range(self.len(), off, len)?;
        let zeros = [0u8; 64];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(zeros.len());
            self.write(off + done, &zeros[..n])?;
            done += n;
        }
        Ok(())
    }
}

/// Read a little-endian `u64` that the peer may be updating, as two `u32`
/// halves: high, low, then high again, retrying until the high half is
/// stable, so a carry between the halves is never seen half-done. `None`
/// when it kept changing for four rounds (a peer rewriting it on purpose).
/// Every field the ABI updates concurrently is a `u32`, so the crate needs
/// this only for 64-bit values a later ABI minor adds (counters).
pub fn load_u64_stable<M: SharedMem + ?Sized>(mem: &M, off: usize) -> Result<Option<u64>, ShmError> {
    check_range(mem.len(), off, 8)?;
    for _ in 0..4 {
        let hi = mem.load_u32_acquire(off + 4)?;
        let lo = mem.load_u32_acquire(off)?;
        if mem.load_u32_acquire(off + 4)? == hi {
            return Ok(Some((u64::from(hi) << 32) | u64::from(lo)));
        }
    }
    Ok(None)
}

/// A heap-backed region for host tests (and for a host library's own tests):
/// words of `AtomicU32`, so the ring protocol runs across threads exactly as
/// it would across the ivshmem boundary, with no `unsafe`.
pub mod fake {
    use super::{SharedMem, ShmError, check_range, check_u32};
    use alloc::vec::Vec;
    use core::sync::atomic::{AtomicU32, Ordering};

    /// A zero-filled region of `len` bytes (rounded up to a multiple of 4).
    /// Bytes are stored little-endian inside each word whatever the host's
    /// byte order, matching the ABI.
    pub struct HeapShm {
        words: Vec<AtomicU32>,
        len: usize,
    }

    impl HeapShm {
        pub fn new(len: usize) -> Self {
            let words = (0..len.div_ceil(4)).map(|_| AtomicU32::new(0)).collect();
            HeapShm { words, len }
        }

        fn word(&self, i: usize) -> &AtomicU32 {
            // In range: every caller checked the byte range against `len`,
            // and `words` covers `len` rounded up.
            &self.words[i]
        }
    }

    impl SharedMem for HeapShm {
        fn len(&self) -> usize {
            self.len
        }

        fn load_u32_acquire(&self, off: usize) -> Result<u32, ShmError> {
            check_u32(self.len, off)?;
            Ok(self.word(off / 4).load(Ordering::Acquire))
        }

        fn store_u32_release(&self, off: usize, v: u32) -> Result<(), ShmError> {
            check_u32(self.len, off)?;
            self.word(off / 4).store(v, Ordering::Release);
            Ok(())
        }

        fn compare_exchange_u32(&self, off: usize, current: u32, new: u32) -> Result<Result<u32, u32>, ShmError> {
            check_u32(self.len, off)?;
            Ok(self.word(off / 4).compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire))
        }

        fn read(&self, off: usize, buf: &mut [u8]) -> Result<(), ShmError> {
            check_range(self.len, off, buf.len())?;
            for (i, b) in buf.iter_mut().enumerate() {
                let at = off + i;
                let w = self.word(at / 4).load(Ordering::Relaxed);
                *b = (w >> ((at % 4) * 8)) as u8;
            }
            Ok(())
        }

        fn write(&self, off: usize, data: &[u8]) -> Result<(), ShmError> {
            check_range(self.len, off, data.len())?;
            for (i, &b) in data.iter().enumerate() {
                let at = off + i;
                let shift = (at % 4) * 8;
                // A byte inside a word the peer may be writing too: update
                // only our byte, atomically.
                let _ = self.word(at / 4).fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                    Some((w & !(0xff << shift)) | (u32::from(b) << shift))
                });
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::HeapShm;
    use super::*;

    #[test]
    fn bounds_and_alignment_are_checked() {
        let m = HeapShm::new(64);
        assert_eq!(m.load_u32_acquire(64), Err(ShmError::OutOfBounds { off: 64, len: 4, region: 64 }));
        assert_eq!(m.load_u32_acquire(2), Err(ShmError::Misaligned { off: 2 }));
        assert!(m.write(60, &[0; 5]).is_err());
        assert!(m.read(usize::MAX, &mut [0; 2]).is_err());
        assert!(m.zero(32, 33).is_err());
        assert_eq!(m.compare_exchange_u32(4, 0, 7), Ok(Ok(0)));
        assert_eq!(m.compare_exchange_u32(4, 0, 9), Ok(Err(7)));
    }

    #[test]
    fn bytes_are_little_endian_in_words() {
        let m = HeapShm::new(16);
        m.write(4, &[0x78, 0x56, 0x34, 0x12]).unwrap();
        assert_eq!(m.load_u32_acquire(4), Ok(0x1234_5678));
        m.store_u32_release(8, 0xaabb_ccdd).unwrap();
        let mut b = [0; 3];
        m.read(9, &mut b).unwrap();
        assert_eq!(b, [0xcc, 0xbb, 0xaa]);
        m.store_u32_release(12, 1).unwrap();
        assert_eq!(load_u64_stable(&m, 8), Ok(Some(0x0000_0001_aabb_ccdd)));
    }
}
