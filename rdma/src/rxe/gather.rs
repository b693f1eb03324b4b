//! A frame's payload as runs of memory ([`Runs`]), and the two ways the
//! transport puts it on the wire (issue 16): from where it lies, a NIC reading
//! each run by DMA after the transmit call returned ([`spans`], with the ICRC
//! computed over the runs in place by [`hash`]), or copied into the NIC's buffer
//! with the ICRC computed as the bytes move ([`copy_hashed`]). Either way each
//! payload byte is read once by the firmware.
//!
//! Lifetimes, for the zero-copy way: the memory's owner vouches that a span stays
//! readable by the device however late it reads ([`Memory::dma_span`]: the ivshmem
//! region and the firmware's RDMA buffers are never unmapped nor returned to the
//! allocator). If a host rewrites a buffer between the ICRC and the NIC's read,
//! the frame leaves with an ICRC that does not match its bytes: the receiver drops
//! it, and the retransmission, built again from memory, carries the new bytes and
//! their own ICRC (a real RNIC behaves the same way; changing a posted buffer is
//! the application's error). Nothing the firmware keeps depends on those bytes:
//! it never reads them again, and the NIC only reads.

use super::memory::{DmaSpan, Memory};
use crate::wire::icrc::Hasher;

/// The runs of memory a payload is in, in order: what a scatter/gather list or
/// an MR's pages resolve to once checked.
pub trait Runs {
    /// Calls `f(address, length)` for each run in order, stopping at the first
    /// `false`; whether every run was found (the checks passed) and taken.
    fn each(&self, f: &mut dyn FnMut(u64, usize) -> bool) -> bool;
}

/// One run: a payload that is a contiguous range of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub addr: u64,
    pub len: usize,
}

impl Runs for Run {
    fn each(&self, f: &mut dyn FnMut(u64, usize) -> bool) -> bool {
        self.len == 0 || f(self.addr, self.len)
    }
}

/// The most spans one frame's payload is sent from: a NIC's chain holds the
/// headers, these, and the tail (pad and ICRC), within `drivers::nic::MAX_PARTS`.
pub const MAX_SPANS: usize = 6;

/// A payload's bus spans, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spans {
    spans: [DmaSpan; MAX_SPANS],
    n: usize,
}

impl Spans {
    pub fn as_slice(&self) -> &[DmaSpan] {
        self.spans.get(..self.n).unwrap_or_default()
    }
}

/// Where a NIC reads the payload in `runs` from: one span per run, runs that
/// are adjacent on the bus merged. `None`, to copy instead, when a run has no
/// bus span (`mem` cannot say, or the run crosses from one mapping to another)
/// or the spans outnumber `room` (and [`MAX_SPANS`]).
pub fn spans<M: Memory + ?Sized>(runs: &dyn Runs, mem: &M, room: usize) -> Option<Spans> {
    let room = room.min(MAX_SPANS);
    let mut out = Spans { spans: [DmaSpan { bus: 0, len: 0 }; MAX_SPANS], n: 0 };
    let ok = runs.each(&mut |addr, len| {
        if len == 0 {
            return true;
        }
        let Some(bus) = mem.dma_span(addr, len) else { return false };
        if let Some(last) = out.n.checked_sub(1).and_then(|i| out.spans.get_mut(i))
            && last.bus.checked_add(last.len as u64) == Some(bus)
        {
            last.len += len;
            return true;
        }
        if out.n >= room {
            return false;
        }
        if let Some(slot) = out.spans.get_mut(out.n) {
            *slot = DmaSpan { bus, len };
            out.n += 1;
        }
        true
    });
    (ok && out.n > 0).then_some(out)
}

/// Adds the payload in `runs` to `crc`, read where it lies; whether every run
/// was read.
pub fn hash<M: Memory + ?Sized>(runs: &dyn Runs, mem: &M, crc: &mut Hasher) -> bool {
    runs.each(&mut |addr, len| mem.hash(addr, len, crc).is_ok())
}

/// Copies the payload in `runs` into `out` (exactly its length) and adds the
/// bytes copied to `crc` as they move; whether every run was read and `out`
/// filled.
pub fn copy_hashed<M: Memory + ?Sized>(runs: &dyn Runs, mem: &M, out: &mut [u8], crc: &mut Hasher) -> bool {
    let mut done = 0usize;
    let ok = runs.each(&mut |addr, len| {
        let Some(dst) = done.checked_add(len).and_then(|end| out.get_mut(done..end)) else { return false };
        done += len;
        mem.read_hashed(addr, dst, crc).is_ok()
    });
    ok && done == out.len()
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::rxe::memory::{FlatMemory, MemoryError};
    use alloc::vec::Vec;

    /// Runs given as a list.
    struct List(Vec<(u64, usize)>);

    impl Runs for List {
        fn each(&self, f: &mut dyn FnMut(u64, usize) -> bool) -> bool {
            self.0.iter().all(|&(a, l)| f(a, l))
        }
    }

    /// A memory whose bus addresses are its addresses plus an offset per 4 KiB
    /// page, so neighbouring pages are not adjacent on the bus; page 3 has none.
    struct Paged(FlatMemory);

    impl Memory for Paged {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryError> {
            self.0.read(addr, buf)
        }

        fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
            self.0.write(addr, data)
        }

        fn dma_span(&self, addr: u64, len: usize) -> Option<u64> {
            let (page, last) = (addr >> 12, (addr + len as u64 - 1) >> 12);
            (page == last && page != 3).then_some(addr + page * 0x10_0000)
        }
    }

    fn memory() -> FlatMemory {
        let mut m = FlatMemory::new(0, 0x8000);
        let bytes: Vec<u8> = (0..0x8000u32).map(|i| (i ^ i >> 8) as u8).collect();
        m.write(0, &bytes).expect("in range");
        m
    }

    #[test]
    fn spans_merge_adjacent_runs_and_refuse_what_a_nic_cannot_read() {
        let mut m = memory();
        let runs = List(alloc::vec![(0x100, 0x100), (0x200, 0x50), (0x1000, 8), (0x2000, 8)]);
        assert_eq!(spans(&runs, &m, 6), None, "DMA off: copy");
        m.set_dma(true);
        let got = spans(&runs, &m, 6).expect("spans");
        let want =
            [DmaSpan { bus: 0x100, len: 0x150 }, DmaSpan { bus: 0x1000, len: 8 }, DmaSpan { bus: 0x2000, len: 8 }];
        assert_eq!(got.as_slice(), want);
        assert_eq!(spans(&runs, &m, 2), None, "three spans, room for two");
        assert_eq!(spans(&runs, &m, 3).map(|s| s.as_slice().len()), Some(3));
        assert_eq!(spans(&List(alloc::vec![(0x7FF0, 0x20)]), &m, 6), None, "past the end");
        assert_eq!(spans(&List(alloc::vec![]), &m, 6), None, "no payload");
        let paged = Paged(memory());
        let across = List(alloc::vec![(0xFF0, 0x20)]);
        assert_eq!(spans(&across, &paged, 6), None, "a run crossing to a page elsewhere on the bus");
        let split = List(alloc::vec![(0xFF0, 0x10), (0x1000, 0x10)]);
        let got = spans(&split, &paged, 6).expect("one span per page");
        assert_eq!(got.as_slice(), [DmaSpan { bus: 0xFF0, len: 0x10 }, DmaSpan { bus: 0x10_1000, len: 0x10 }]);
        assert_eq!(spans(&List(alloc::vec![(0x3000, 4)]), &paged, 6), None, "a page no device may read");
        let many = List((0..7).map(|i| (i * 0x10, 8)).collect());
        assert_eq!(spans(&many, &m, 6), None, "more than MAX_SPANS");
    }

    #[test]
    fn hashing_and_copying_runs_cover_the_payload_in_order() {
        let m = memory();
        let runs = List(alloc::vec![(0x10, 3), (0x4000, 300), (0x20, 1)]);
        let want: Vec<u8> =
            [m.slice(0x10, 3), m.slice(0x4000, 300), m.slice(0x20, 1)].map(|s| s.expect("in range")).concat();
        let mut h = Hasher::new();
        assert!(hash(&runs, &m, &mut h));
        assert_eq!(h.finalize(), crc::hash(&want));
        let (mut h, mut out) = (Hasher::new(), alloc::vec![0u8; want.len()]);
        assert!(copy_hashed(&runs, &m, &mut out, &mut h));
        assert_eq!((h.finalize(), out), (crc::hash(&want), want.clone()));
        // The wrong length, a run outside the memory, a run refused by its checks.
        assert!(!copy_hashed(&runs, &m, &mut alloc::vec![0u8; want.len() - 1], &mut Hasher::new()));
        assert!(!copy_hashed(&runs, &m, &mut alloc::vec![0u8; want.len() + 1], &mut Hasher::new()));
        assert!(!hash(&List(alloc::vec![(0x7FFF, 2)]), &m, &mut Hasher::new()));
        assert!(Run { addr: 0, len: 0 }.each(&mut |_, _| false), "an empty run is no run");
    }
}
