//! The memory RDMA reads and writes, behind a trait: the transport never holds a raw
//! pointer. Addresses are the consumer's virtual addresses, the ones MRs are
//! registered with (IBA vol. 1 10.6: the memory region's virtual address space); the
//! kernel maps them onto its shared-memory region, tests onto a plain buffer.
//!
//! Atomics (IBA vol. 1 9.4.5, 11.4.1.1) are 64-bit operations on host-order words, as
//! Linux rxe performs them on the host (`rxe_mr.c`, `rxe_mr_do_atomic_op`); the
//! transport executes each atomic once, so the default read-modify-write is enough
//! while one core runs the transport.
//!
//! For the transmit path a memory also says where a range lies for a device that
//! reads it by DMA ([`Memory::dma_span`]: a NIC then sends the payload from where it
//! is, zero-copy), and reads while it hashes: the ICRC over a range in place
//! ([`Memory::hash`]), or a copy that adds what it copied ([`Memory::read_hashed`]).
//! The defaults copy through [`Memory::read`]; the kernel's memory does each with
//! raw-pointer loads in one pass. Only the memory's owner knows bus addresses; the
//! transport passes them to its sink untouched.

use crate::wire::icrc::Hasher;

/// An address range outside the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryError {
    pub addr: u64,
    pub len: usize,
}

/// A run of memory as a device reaches it by DMA: its bus address (under QEMU and on
/// an identity-mapped machine without an IOMMU, the guest-physical address) and
/// length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaSpan {
    pub bus: u64,
    pub len: usize,
}

/// Bytes [`Memory::hash`]'s default reads at a time.
const HASH_CHUNK: usize = 256;

/// Byte-addressed memory.
pub trait Memory {
    /// Fills `buf` from `addr..addr + buf.len()`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryError>;

    /// Writes `data` at `addr`.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError>;

    /// The bus address of `addr..addr + len` if a device can read the whole range
    /// there by DMA, in one run, for as long as it may take to (the memory is never
    /// unmapped or reused for anything the firmware must keep: a device that reads
    /// late reads what is there then). `None` (the default) when it cannot: a range
    /// outside, split over runs that are not adjacent on the bus, or memory no
    /// device may read. The transport then copies.
    fn dma_span(&self, _addr: u64, _len: usize) -> Option<u64> {
        None
    }

    /// Adds the bytes at `addr..addr + len` to `crc`, read where they lie: the ICRC
    /// of a payload a NIC will send from there. The default reads through a small
    /// buffer.
    fn hash(&self, addr: u64, len: usize, crc: &mut Hasher) -> Result<(), MemoryError> {
        let mut chunk = [0u8; HASH_CHUNK];
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(HASH_CHUNK);
            let buf = &mut chunk[..n];
            self.read(addr.wrapping_add(done as u64), buf).map_err(|_| MemoryError { addr, len })?;
            crc.update(buf);
            done += n;
        }
        Ok(())
    }

    /// [`read`](Memory::read) that adds the bytes it wrote into `buf` to `crc`: a
    /// payload copied into a frame with its ICRC computed as it moves. The default
    /// reads, then hashes `buf`; a memory that can does both in one pass.
    fn read_hashed(&self, addr: u64, buf: &mut [u8], crc: &mut Hasher) -> Result<(), MemoryError> {
        self.read(addr, buf)?;
        crc.update(buf);
        Ok(())
    }

    /// Compare-and-swap on the 8-byte word at `addr`; returns the original value.
    fn compare_swap(&mut self, addr: u64, compare: u64, swap: u64) -> Result<u64, MemoryError> {
        let orig = self.read_u64(addr)?;
        if orig == compare {
            self.write(addr, &swap.to_ne_bytes())?;
        }
        Ok(orig)
    }

    /// Fetch-and-add on the 8-byte word at `addr`; returns the original value.
    fn fetch_add(&mut self, addr: u64, add: u64) -> Result<u64, MemoryError> {
        let orig = self.read_u64(addr)?;
        self.write(addr, &orig.wrapping_add(add).to_ne_bytes())?;
        Ok(orig)
    }

    /// The host-order word at `addr`.
    fn read_u64(&self, addr: u64) -> Result<u64, MemoryError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }
}

/// A flat buffer mapped at `base`: what tests and the simulator use.
///
/// With DMA on ([`FlatMemory::set_dma`]) it plays memory a NIC reads where it lies:
/// its bus addresses are its own addresses, and [`FlatMemory::dma_read`] is the
/// device's read (a test sink's, after the transmit call returned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatMemory {
    base: u64,
    bytes: alloc::vec::Vec<u8>,
    dma: bool,
}

impl FlatMemory {
    /// `len` zero bytes at `base..base + len`, DMA off.
    pub fn new(base: u64, len: usize) -> FlatMemory {
        FlatMemory { base, bytes: alloc::vec![0; len], dma: false }
    }

    /// Zeroes every byte, as `new` left them.
    pub fn clear(&mut self) {
        self.bytes.fill(0);
    }

    /// Lets a device read this memory by DMA (bus address = address), or not.
    pub fn set_dma(&mut self, on: bool) {
        self.dma = on;
    }

    /// What a device reading `len` bytes at bus address `bus` gets; `None` with DMA
    /// off or outside the memory.
    pub fn dma_read(&self, bus: u64, len: usize) -> Option<&[u8]> {
        if !self.dma {
            return None;
        }
        self.slice(bus, len).ok()
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn range(&self, addr: u64, len: usize) -> Result<core::ops::Range<usize>, MemoryError> {
        let err = MemoryError { addr, len };
        let start = usize::try_from(addr.checked_sub(self.base).ok_or(err)?).map_err(|_| err)?;
        let end = start.checked_add(len).ok_or(err)?;
        if end > self.bytes.len() { Err(err) } else { Ok(start..end) }
    }

    /// The bytes at `addr..addr + len`, for test assertions.
    pub fn slice(&self, addr: u64, len: usize) -> Result<&[u8], MemoryError> {
        let r = self.range(addr, len)?;
        Ok(&self.bytes[r])
    }
}

impl Memory for FlatMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryError> {
        let r = self.range(addr, buf.len())?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        let r = self.range(addr, data.len())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }

    fn dma_span(&self, addr: u64, len: usize) -> Option<u64> {
        (self.dma && self.range(addr, len).is_ok()).then_some(addr)
    }

    fn hash(&self, addr: u64, len: usize, crc: &mut Hasher) -> Result<(), MemoryError> {
        crc.update(self.slice(addr, len)?);
        Ok(())
    }

    fn read_hashed(&self, addr: u64, buf: &mut [u8], crc: &mut Hasher) -> Result<(), MemoryError> {
        let r = self.range(addr, buf.len())?;
        crc.copy_update(&self.bytes[r], buf);
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn bounds_and_atomics() {
        let mut m = FlatMemory::new(0x1000, 16);
        assert!(m.write(0x1000, &[1; 16]).is_ok());
        assert_eq!(m.write(0x1001, &[1; 16]), Err(MemoryError { addr: 0x1001, len: 16 }));
        assert!(m.read(0xFFF, &mut [0; 1]).is_err());
        assert!(m.read(u64::MAX, &mut [0; 2]).is_err());
        m.write(0x1008, &5u64.to_ne_bytes()).expect("in range");
        assert_eq!(m.fetch_add(0x1008, 3), Ok(5));
        assert_eq!(m.compare_swap(0x1008, 8, 100), Ok(8));
        assert_eq!(m.compare_swap(0x1008, 8, 7), Ok(100));
        assert_eq!(m.read_u64(0x1008), Ok(100));
    }

    /// A memory that only reads: the trait's defaults for hashing.
    struct Plain(FlatMemory);

    impl Memory for Plain {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryError> {
            self.0.read(addr, buf)
        }

        fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
            self.0.write(addr, data)
        }
    }

    #[test]
    fn hashing_in_place_and_while_copying_equal_hashing_a_copy() {
        let mut m = FlatMemory::new(0x1000, 2000);
        let bytes: alloc::vec::Vec<u8> = (0..2000u32).map(|i| (i * 31 + i / 7) as u8).collect();
        m.write(0x1000, &bytes).expect("in range");
        let plain = Plain(m.clone());
        for (off, len) in [(0, 0), (0, 1), (3, 255), (5, 256), (7, 257), (1, 1999), (0, 2000)] {
            let want = crc::hash(&bytes[off..off + len]);
            let addr = 0x1000 + off as u64;
            for mem in [&m as &dyn Memory, &plain] {
                let mut h = Hasher::new();
                mem.hash(addr, len, &mut h).expect("in range");
                assert_eq!(h.finalize(), want, "hash {off}+{len}");
                let (mut h, mut out) = (Hasher::new(), alloc::vec![0u8; len]);
                mem.read_hashed(addr, &mut out, &mut h).expect("in range");
                assert_eq!((h.finalize(), &out[..]), (want, &bytes[off..off + len]), "read_hashed {off}+{len}");
            }
        }
        for mem in [&m as &dyn Memory, &plain] {
            assert!(mem.hash(0x1000 + 1990, 11, &mut Hasher::new()).is_err(), "past the end");
            assert!(mem.read_hashed(0xFFF, &mut [0; 2], &mut Hasher::new()).is_err());
        }
    }

    #[test]
    fn dma_spans_only_when_on_and_inside() {
        let mut m = FlatMemory::new(0x1000, 16);
        assert_eq!(m.dma_span(0x1000, 16), None, "off by default");
        assert_eq!(m.dma_read(0x1000, 1), None);
        m.set_dma(true);
        assert_eq!(m.dma_span(0x1004, 12), Some(0x1004));
        assert_eq!(m.dma_span(0x1004, 13), None);
        m.write(0x1004, &[9, 8]).expect("in range");
        assert_eq!(m.dma_read(0x1004, 2), Some(&[9u8, 8][..]));
        assert_eq!(Plain(m).dma_span(0x1000, 1), None, "the trait's default: no DMA");
    }
}
