//! The memory RDMA reads and writes, behind a trait: the transport never holds a raw
//! pointer. Addresses are the consumer's virtual addresses, the ones MRs are
//! registered with (IBA vol. 1 10.6: the memory region's virtual address space); the
//! kernel maps them onto its shared-memory region, tests onto a plain buffer.
//!
//! Atomics (IBA vol. 1 9.4.5, 11.4.1.1) are 64-bit operations on host-order words, as
//! Linux rxe performs them on the host (`rxe_mr.c`, `rxe_mr_do_atomic_op`); the
//! transport executes each atomic once, so the default read-modify-write is enough
//! while one core runs the transport.

/// An address range outside the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryError {
    pub addr: u64,
    pub len: usize,
}

/// Byte-addressed memory.
pub trait Memory {
    /// Fills `buf` from `addr..addr + buf.len()`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryError>;

    /// Writes `data` at `addr`.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError>;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatMemory {
    base: u64,
    bytes: alloc::vec::Vec<u8>,
}

impl FlatMemory {
    /// `len` zero bytes at `base..base + len`.
    pub fn new(base: u64, len: usize) -> FlatMemory {
        FlatMemory { base, bytes: alloc::vec![0; len] }
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
}
