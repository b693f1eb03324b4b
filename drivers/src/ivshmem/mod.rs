//! The ivshmem device's shared memory (PCI 1af4:1110, BAR2): the region
//! host programs and the firmware share the verbs rings in. `ivshmem-plain`
//! raises no interrupts, and the firmware polls the rings;
//! `ivshmem-doorbell` adds registers and MSI-X vectors through which peers
//! interrupt each other ([`doorbell`]).
//!
//! This is the firmware's implementation of `verbs_ring::SharedMem`: every
//! access is by offset, checked against the region, and never through a Rust
//! reference to the bytes (the host writes them concurrently). Bulk copies
//! (RDMA payloads: every frame's worth goes through here) are one `rep movsq`
//! in inline assembly, which the compiler treats like a volatile access; a
//! volatile loop would cost one emulated load and store per byte, and under
//! TCG that made the copy cost as much as the frame's ICRC. For the transmit
//! path the region also gives a range's bus address (a NIC sends a payload
//! from here, zero-copy), its CRC in place, and a copy that hashes as it goes,
//! each through raw pointers as well (the `crc` crate's).

use core::sync::atomic::{AtomicU32, Ordering};
use verbs_ring::shm::{SharedMem, ShmError, check_range, check_u32};

pub mod doorbell;

/// PCI identity of the device.
pub const VENDOR: u16 = 0x1af4;
pub const DEVICE: u16 = 0x1110;
/// The BAR that holds the shared memory.
pub const MEMORY_BAR: usize = 2;

/// The mapped shared-memory BAR.
pub struct IvshmemRegion {
    base: *mut u8,
    len: usize,
}

impl IvshmemRegion {
    /// # Safety
    /// `base..base + len` must be mapped (write-back: it is host RAM), 4-byte
    /// aligned, used by nothing else in the firmware, and stay mapped for the
    /// life of the value.
    pub unsafe fn new(base: *mut u8, len: usize) -> Self {
        Self { base, len }
    }

    /// The bus address of `off..off + len` (the BAR is identity-mapped and
    /// one contiguous run of guest-physical addresses): where a NIC reads a
    /// payload from, zero-copy. `None` outside the region.
    pub fn bus_addr(&self, off: usize, len: usize) -> Option<u64> {
        check_range(self.len, off, len).ok()?;
        Some(self.base as u64 + off as u64)
    }

    /// Adds `off..off + len` to `crc`, read in place through raw pointers
    /// (the host may be writing it: the CRC is then of whatever was read).
    pub fn hash(&self, off: usize, len: usize, crc: &mut crc::Hasher) -> Result<(), ShmError> {
        check_range(self.len, off, len)?;
        // SAFETY: `off..off + len` lies inside the mapping (checked above),
        // which `new` vouches for; read through the pointer only.
        unsafe { crc.update_raw(self.base.add(off), len) };
        Ok(())
    }

    /// [`SharedMem::read`] that adds the bytes copied into `buf` to `crc` in
    /// the same pass: a payload copied into a frame with its ICRC.
    pub fn read_hashed(&self, off: usize, buf: &mut [u8], crc: &mut crc::Hasher) -> Result<(), ShmError> {
        check_range(self.len, off, buf.len())?;
        // SAFETY: as in `hash`; `buf` is ours and not in the region.
        unsafe { crc.copy_update_raw(self.base.add(off), buf) };
        Ok(())
    }

    fn word(&self, off: usize) -> Result<&AtomicU32, ShmError> {
        check_u32(self.len, off)?;
        // SAFETY: `off + 4 <= len` and `off` is 4-byte aligned (checked), so
        // the word lies inside the mapping `new` vouches for and is aligned for
        // an AtomicU32; all firmware accesses to it are atomic.
        Ok(unsafe { AtomicU32::from_ptr(self.base.add(off).cast::<u32>()) })
    }
}

impl SharedMem for IvshmemRegion {
    fn len(&self) -> usize {
        self.len
    }

    fn load_u32_acquire(&self, off: usize) -> Result<u32, ShmError> {
        Ok(u32::from_le(self.word(off)?.load(Ordering::Acquire)))
    }

    fn store_u32_release(&self, off: usize, v: u32) -> Result<(), ShmError> {
        self.word(off)?.store(v.to_le(), Ordering::Release);
        Ok(())
    }

    fn compare_exchange_u32(&self, off: usize, current: u32, new: u32) -> Result<Result<u32, u32>, ShmError> {
        let r = self.word(off)?.compare_exchange(current.to_le(), new.to_le(), Ordering::AcqRel, Ordering::Acquire);
        Ok(r.map(u32::from_le).map_err(u32::from_le))
    }

    fn read(&self, off: usize, buf: &mut [u8]) -> Result<(), ShmError> {
        check_range(self.len, off, buf.len())?;
        // SAFETY: `off..off + buf.len()` lies inside the mapping (checked
        // above); `buf` is ours, and no Rust reference to the region is made.
        unsafe { copy_bytes(self.base.add(off), buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn write(&self, off: usize, data: &[u8]) -> Result<(), ShmError> {
        check_range(self.len, off, data.len())?;
        // SAFETY: as in `read`, the other way round.
        unsafe { copy_bytes(data.as_ptr(), self.base.add(off), data.len()) };
        Ok(())
    }
}

/// Copies `len` bytes from `src` to `dst`: 64 at a time through two general
/// registers, the rest with `rep movsb`. The assembly is opaque to the
/// compiler, so a peer writing the shared side meanwhile is no data race in
/// the Rust sense (the bytes copied are then whatever the peer left, as with
/// volatile accesses).
///
/// Plain moves rather than `rep movsq`, for QEMU's TCG, which runs each
/// `rep` step as its own pass through the translated block: 4 KiB took
/// 1.13 us by `rep movsq`, 0.78 us by this loop and 2.2 us by `movdqu` pairs
/// (same boot). A real CPU copies as fast either way at these sizes.
///
/// # Safety
/// `src..src + len` must be readable, `dst..dst + len` writable, and the two
/// must not overlap.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller vouches for both ranges; the loop reads and writes
    // `len / 64` whole 64-byte steps of them and `rep movsb` the rest,
    // forwards (Rust guarantees DF is clear on entry to an asm block); only
    // the named registers change, and no stack is touched.
    unsafe {
        core::arch::asm!(
            "test {n}, {n}",
            "jz 3f",
            "2:",
            "mov {a}, [rsi]",
            "mov {b}, [rsi + 8]",
            "mov [rdi], {a}",
            "mov [rdi + 8], {b}",
            "mov {a}, [rsi + 16]",
            "mov {b}, [rsi + 24]",
            "mov [rdi + 16], {a}",
            "mov [rdi + 24], {b}",
            "mov {a}, [rsi + 32]",
            "mov {b}, [rsi + 40]",
            "mov [rdi + 32], {a}",
            "mov [rdi + 40], {b}",
            "mov {a}, [rsi + 48]",
            "mov {b}, [rsi + 56]",
            "mov [rdi + 48], {a}",
            "mov [rdi + 56], {b}",
            "add rsi, 64",
            "add rdi, 64",
            "dec {n}",
            "jnz 2b",
            "3:",
            "rep movsb",
            n = inout(reg) len / 64 => _,
            a = out(reg) _,
            b = out(reg) _,
            inout("rcx") len % 64 => _,
            inout("rsi") src => _,
            inout("rdi") dst => _,
            options(nostack),
        );
    }
}

/// Elsewhere: one volatile byte at a time.
///
/// # Safety
/// As for the x86_64 version.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    for i in 0..len {
        // SAFETY: `i < len`, inside both ranges the caller vouches for.
        unsafe { core::ptr::write_volatile(dst.add(i), core::ptr::read_volatile(src.add(i))) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Every length and alignment the copy splits into 64-byte steps and a
    /// tail.
    #[test]
    fn reads_and_writes_copy_exactly_the_bytes_asked() {
        let mut backing = vec![0u64; 64];
        // SAFETY: `backing` outlives the region and nothing else touches it
        // while the region is used; u64s make it 4-byte aligned.
        let region = unsafe { IvshmemRegion::new(backing.as_mut_ptr().cast::<u8>(), 512) };
        for off in 0..9 {
            for len in 0..300 {
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + off + 1) as u8).collect();
                region.zero(0, 512).expect("zero");
                region.write(off, &data).expect("write");
                let mut back = vec![0u8; len + 2];
                region.read(off, &mut back[1..=len]).expect("read");
                assert_eq!(&back[1..=len], &data[..], "off {off} len {len}");
                assert_eq!((back[0], back[len + 1]), (0, 0), "nothing around the copy");
                let mut around = [0u8; 1];
                if off > 0 {
                    region.read(off - 1, &mut around).expect("read");
                    assert_eq!(around[0], 0, "nothing before the write");
                }
                region.read(off + len, &mut around).expect("read");
                assert_eq!(around[0], 0, "nothing after the write");
            }
        }
        assert!(region.read(506, &mut [0u8; 7]).is_err(), "past the end");
    }

    /// The CRC in place and the copy that hashes equal a plain copy's CRC, at
    /// every offset and length around the 16-byte blocks; nothing outside the
    /// region is touched or named.
    #[test]
    fn hashing_in_place_and_while_copying_match_a_copy() {
        let mut backing = vec![0u64; 64];
        let base = backing.as_mut_ptr().cast::<u8>();
        // SAFETY: as above.
        let region = unsafe { IvshmemRegion::new(base, 512) };
        let data: Vec<u8> = (0..512u32).map(|i| (i * 37 + i / 3) as u8).collect();
        region.write(0, &data).expect("write");
        for off in 0..20 {
            for len in [0, 1, 15, 16, 17, 63, 64, 65, 200, 512 - off] {
                let want = crc::hash(&data[off..off + len]);
                let mut h = crc::Hasher::new();
                region.hash(off, len, &mut h).expect("inside");
                assert_eq!(h.finalize(), want, "hash {off}+{len}");
                let (mut h, mut out) = (crc::Hasher::new(), vec![0u8; len]);
                region.read_hashed(off, &mut out, &mut h).expect("inside");
                assert_eq!((h.finalize(), &out[..]), (want, &data[off..off + len]), "read_hashed {off}+{len}");
            }
        }
        assert!(region.hash(500, 13, &mut crc::Hasher::new()).is_err());
        assert!(region.read_hashed(511, &mut [0; 2], &mut crc::Hasher::new()).is_err());
        assert_eq!(region.bus_addr(16, 496), Some(base as u64 + 16));
        assert_eq!(region.bus_addr(16, 497), None);
    }
}
