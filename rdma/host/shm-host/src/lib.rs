//! The host's end of the verbs ring: a [`SharedMem`] over a file
//! in `/dev/shm` mapped `MAP_SHARED`, the same file QEMU backs the
//! appliance's `ivshmem-plain` BAR2 with
//! (`-object memory-backend-file,mem-path=/dev/shm/NAME,share=on`).
//!
//! This is the only host-side crate with `unsafe`, and it is all in this
//! file: the mapping hands out a raw pointer, never a reference, and every
//! access goes through one of four small unsafe blocks (atomic `u32` view,
//! copy out, copy in), each after the bounds check the
//! [`SharedMem`] obligations require. The peer (the firmware, another host
//! process) writes the same bytes concurrently, so no `&[u8]` or `&mut [u8]`
//! into the mapping ever exists.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use memmap2::{MmapOptions, MmapRaw};
use verbs_ring::SharedMem;
use verbs_ring::shm::{ShmError, check_range, check_u32};

/// A shared-memory file mapped read-write and shared.
///
/// The mapping starts page-aligned, so every 4-byte-aligned offset is a
/// 4-byte-aligned address, as `AtomicU32` needs.
pub struct ShmFile {
    map: MmapRaw,
    len: usize,
}

impl ShmFile {
    /// Map an existing file (the appliance's ring) at its current size.
    pub fn open(path: &Path) -> io::Result<ShmFile> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        ShmFile::map(&file)
    }

    /// Create (or truncate to) a zero-filled file of `len` bytes and map it:
    /// what the host does before starting QEMU, and what tests do.
    pub fn create(path: &Path, len: usize) -> io::Result<ShmFile> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        file.set_len(len as u64)?;
        ShmFile::map(&file)
    }

    fn map(file: &File) -> io::Result<ShmFile> {
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file larger than the address space"))?;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty shared-memory file"));
        }
        // `map_raw` is MAP_SHARED, read-write, and yields only a pointer.
        let map = MmapOptions::new().len(len).map_raw(file)?;
        Ok(ShmFile { map, len })
    }

    /// The `AtomicU32` at `off`, after [`check_u32`].
    fn atomic(&self, off: usize) -> Result<&AtomicU32, ShmError> {
        check_u32(self.len, off)?;
        // SAFETY:
        // 1. in bounds: `check_u32` proved `off + 4 <= len`, and the mapping
        //    is `len` bytes long and lives as long as `self` (the returned
        //    reference borrows `self`);
        // 2. aligned: the mapping is page-aligned and `off % 4 == 0`;
        // 3. every access to these four bytes, on either side of the ring
        //    protocol, is an atomic `u32` access (the ABI accesses index and
        //    state words only through `load/store/compare_exchange_u32`);
        //    bulk copies never target them while the peer publishes;
        // 4. an `AtomicU32` has no invalid bit patterns, so whatever the peer
        //    wrote is a valid value.
        Ok(unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(off).cast::<u32>()) })
    }
}

impl SharedMem for ShmFile {
    fn len(&self) -> usize {
        self.len
    }

    fn load_u32_acquire(&self, off: usize) -> Result<u32, ShmError> {
        Ok(u32::from_le(self.atomic(off)?.load(Ordering::Acquire)))
    }

    fn store_u32_release(&self, off: usize, v: u32) -> Result<(), ShmError> {
        self.atomic(off)?.store(v.to_le(), Ordering::Release);
        Ok(())
    }

    fn compare_exchange_u32(&self, off: usize, current: u32, new: u32) -> Result<Result<u32, u32>, ShmError> {
        let r = self.atomic(off)?.compare_exchange(current.to_le(), new.to_le(), Ordering::AcqRel, Ordering::Acquire);
        Ok(r.map(u32::from_le).map_err(u32::from_le))
    }

    fn read(&self, off: usize, buf: &mut [u8]) -> Result<(), ShmError> {
        check_range(self.len, off, buf.len())?;
        // SAFETY:
        // 1. the source `[off, off + buf.len())` lies inside the mapping
        //    (`check_range`), which outlives this call;
        // 2. the destination is our own exclusive buffer, so the ranges
        //    cannot overlap;
        // 3. no reference to the shared bytes is created: the copy works on
        //    raw pointers, and any byte value is valid for `u8`. The peer may
        //    be writing the same bytes; the ring protocol orders what matters
        //    with the acquire/release `u32` operations, and callers validate
        //    the copy, never the shared original.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr().add(off), buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn write(&self, off: usize, data: &[u8]) -> Result<(), ShmError> {
        check_range(self.len, off, data.len())?;
        // SAFETY:
        // 1. the destination `[off, off + data.len())` lies inside the
        //    read-write mapping (`check_range`), which outlives this call;
        // 2. the source is our own buffer, so the ranges cannot overlap;
        // 3. no reference to the shared bytes is created (raw pointers only);
        //    the write is published to the peer by a later release store.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.map.as_mut_ptr().add(off), data.len()) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pair(len: usize) -> (tempfile::TempDir, ShmFile, ShmFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ring");
        let a = ShmFile::create(&path, len).unwrap();
        let b = ShmFile::open(&path).unwrap();
        (dir, a, b)
    }

    #[test]
    fn two_mappings_of_one_file_see_each_other() {
        let (_d, a, b) = pair(8192);
        assert_eq!((a.len(), b.len()), (8192, 8192));
        a.write(100, b"hello").unwrap();
        let mut buf = [0u8; 5];
        b.read(100, &mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        b.store_u32_release(4096, 0x1234_5678).unwrap();
        assert_eq!(a.load_u32_acquire(4096), Ok(0x1234_5678));
        // Little-endian in the region.
        a.read(4096, &mut buf[..4]).unwrap();
        assert_eq!(&buf[..4], &[0x78, 0x56, 0x34, 0x12]);
        b.zero(100, 3).unwrap();
        a.read(100, &mut buf).unwrap();
        assert_eq!(&buf, b"\0\0\0lo");
    }

    #[test]
    fn compare_exchange() {
        let (_d, a, b) = pair(4096);
        assert_eq!(a.compare_exchange_u32(8, 0, 1), Ok(Ok(0)));
        assert_eq!(b.compare_exchange_u32(8, 0, 2), Ok(Err(1)));
        assert_eq!(b.compare_exchange_u32(8, 1, 2), Ok(Ok(1)));
        assert_eq!(a.load_u32_acquire(8), Ok(2));
    }

    #[test]
    fn bounds_and_alignment_are_refused() {
        let (_d, a, _b) = pair(4096);
        assert_eq!(a.load_u32_acquire(4096), Err(ShmError::OutOfBounds { off: 4096, len: 4, region: 4096 }));
        assert_eq!(a.store_u32_release(4094, 0), Err(ShmError::Misaligned { off: 4094 }));
        assert_eq!(a.compare_exchange_u32(4093, 0, 1), Err(ShmError::Misaligned { off: 4093 }));
        assert!(a.write(4090, &[0; 7]).is_err());
        assert!(a.read(usize::MAX - 1, &mut [0; 4]).is_err());
        assert!(a.zero(4000, 97).is_err());
        assert!(a.write(4089, &[0; 7]).is_ok());
        assert!(a.read(0, &mut []).is_ok());
    }

    #[test]
    fn empty_or_missing_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty");
        File::create(&path).unwrap();
        assert_eq!(ShmFile::open(&path).err().map(|e| e.kind()), Some(io::ErrorKind::InvalidInput));
        assert!(ShmFile::open(&dir.path().join("missing")).is_err());
    }

    /// Release/acquire across two mappings and two threads: a counter
    /// claimed by CAS from both sides never loses an increment, and data
    /// published before an index is seen after it.
    #[test]
    fn cas_and_publish_across_mappings_and_threads() {
        let (_d, a, b) = pair(4096);
        let (a, b) = (Arc::new(a), Arc::new(b));
        let per = 20_000;
        let spawn = |m: Arc<ShmFile>| {
            std::thread::spawn(move || {
                for _ in 0..per {
                    loop {
                        let cur = m.load_u32_acquire(0).unwrap();
                        if m.compare_exchange_u32(0, cur, cur + 1).unwrap().is_ok() {
                            break;
                        }
                    }
                }
            })
        };
        let (t1, t2) = (spawn(a.clone()), spawn(b.clone()));
        t1.join().unwrap();
        t2.join().unwrap();
        assert_eq!(a.load_u32_acquire(0), Ok(2 * per));

        let producer = {
            let a = a.clone();
            std::thread::spawn(move || {
                for i in 1..=1000u32 {
                    a.write(64, &i.to_le_bytes().repeat(8)).unwrap();
                    a.store_u32_release(128, i).unwrap();
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while a.load_u32_acquire(192).unwrap() != i {
                        assert!(std::time::Instant::now() < deadline, "consumer stalled");
                        std::hint::spin_loop();
                    }
                }
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut seen = 0;
        while seen < 1000 {
            assert!(std::time::Instant::now() < deadline, "producer stalled");
            let i = b.load_u32_acquire(128).unwrap();
            if i != seen {
                let mut buf = [0u8; 32];
                b.read(64, &mut buf).unwrap();
                assert_eq!(buf, i.to_le_bytes().repeat(8)[..]);
                b.store_u32_release(192, i).unwrap();
                seen = i;
            }
        }
        producer.join().unwrap();
    }
}
