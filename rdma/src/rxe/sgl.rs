//! Scatter/gather lists and packets (IBA vol. 1 10.7.1 "local memory
//! access" checks, made on every copy as Linux rxe's `copy_data` does): each SGE's lkey
//! must name a valid MR of the QP's PD covering the SGE, with LOCAL_WRITE when the
//! transport writes into it.

use super::memory::Memory;
use super::mr::{self, AccessFlags, Mr};
use super::pd::PdHandle;
use super::pool::Pool;
use super::wr::Sge;

/// An SGE failed its checks or its memory was unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SglError;

/// Checks every SGE of a list up front, before any byte moves.
pub fn validate(sges: &[Sge], mrs: &Pool<Mr>, pd: PdHandle, write: bool) -> Result<(), SglError> {
    let rights = if write { AccessFlags::LOCAL_WRITE } else { 0 };
    for sge in sges {
        let mr = mr::find(mrs, sge.lkey).ok_or(SglError)?;
        mr.check(pd, sge.addr, u64::from(sge.length), rights).map_err(|_| SglError)?;
    }
    Ok(())
}

/// Walks the list from byte `offset`, handing out `(addr, len)` pieces totalling `len`.
fn walk(
    sges: &[Sge],
    mut offset: u64,
    mut len: usize,
    mut piece: impl FnMut(&Sge, u64, usize, usize) -> Result<(), SglError>,
) -> Result<(), SglError> {
    let mut done = 0usize;
    for sge in sges {
        if len == 0 {
            break;
        }
        let sge_len = u64::from(sge.length);
        if offset >= sge_len {
            offset -= sge_len;
            continue;
        }
        let n = ((sge_len - offset) as usize).min(len);
        piece(sge, sge.addr + offset, n, done)?;
        done += n;
        len -= n;
        offset = 0;
    }
    if len == 0 { Ok(()) } else { Err(SglError) }
}

/// `len` bytes of a scatter/gather list from byte `offset`, as the runs of memory
/// they are in (what a send gathers, [`super::gather`]): each SGE's lkey, PD and
/// bounds checked every time the runs are walked, so an MR deregistered in
/// between is noticed.
pub struct SgeRuns<'a> {
    pub sges: &'a [Sge],
    pub offset: u64,
    pub len: usize,
    pub mrs: &'a Pool<Mr>,
    pub pd: PdHandle,
}

impl super::gather::Runs for SgeRuns<'_> {
    fn each(&self, f: &mut dyn FnMut(u64, usize) -> bool) -> bool {
        walk(self.sges, self.offset, self.len, |sge, addr, n, _| {
            let mr = mr::find(self.mrs, sge.lkey).ok_or(SglError)?;
            mr.check(self.pd, addr, n as u64, 0).map_err(|_| SglError)?;
            if mr.pieces(addr, n, |at, r| f(at, r.len())) { Ok(()) } else { Err(SglError) }
        })
        .is_ok()
    }
}

/// Writes `data` into the list from `offset`.
pub fn scatter<M: Memory + ?Sized>(
    sges: &[Sge],
    offset: u64,
    data: &[u8],
    mrs: &Pool<Mr>,
    pd: PdHandle,
    mem: &mut M,
) -> Result<(), SglError> {
    walk(sges, offset, data.len(), |sge, addr, n, done| {
        let mr = mr::find(mrs, sge.lkey).ok_or(SglError)?;
        mr.check(pd, addr, n as u64, AccessFlags::LOCAL_WRITE).map_err(|_| SglError)?;
        let data = &data[done..done + n];
        let ok = mr.pieces(addr, n, |at, r| data.get(r).is_some_and(|b| mem.write(at, b).is_ok()));
        if ok { Ok(()) } else { Err(SglError) }
    })
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::rxe::memory::FlatMemory;

    #[test]
    fn gather_and_scatter_across_sges() {
        let mut mrs = Pool::new(4);
        let pd = PdHandle(9);
        let key = mrs
            .insert_with(|key| Mr::contiguous(pd, 0x1000, 0x1000, 0x100, AccessFlags(AccessFlags::LOCAL_WRITE), key))
            .expect("room");
        let mut mem = FlatMemory::new(0x1000, 0x100);
        let sges = [Sge { addr: 0x1000, length: 3, lkey: key }, Sge { addr: 0x1080, length: 5, lkey: key }];
        scatter(&sges, 1, &[1, 2, 3, 4], &mrs, pd, &mut mem).expect("fits");
        assert_eq!(mem.slice(0x1000, 3).expect("in range"), &[0, 1, 2]);
        assert_eq!(mem.slice(0x1080, 3).expect("in range"), &[3, 4, 0]);
        use crate::rxe::gather::{Runs, copy_hashed};
        use crate::wire::icrc::Hasher;
        let mut out = [0u8; 8];
        let runs = SgeRuns { sges: &sges, offset: 0, len: 8, mrs: &mrs, pd };
        assert!(copy_hashed(&runs, &mem, &mut out, &mut Hasher::new()));
        assert_eq!(out, [0, 1, 2, 3, 4, 0, 0, 0]);
        assert_eq!(validate(&sges, &mrs, pd, true), Ok(()));
        let bad = [Sge { addr: 0x10F0, length: 0x20, lkey: key }];
        assert_eq!(validate(&bad, &mrs, pd, false), Err(SglError));
        // The runs, in order, from an offset.
        let mut seen = alloc::vec::Vec::new();
        let runs = SgeRuns { offset: 1, len: 6, ..runs };
        assert!(runs.each(&mut |a, n| {
            seen.push((a, n));
            true
        }));
        assert_eq!(seen, [(0x1001, 2), (0x1080, 4)]);
        assert!(!SgeRuns { len: 8, ..runs }.each(&mut |_, _| true), "past the end");
        assert!(!SgeRuns { pd: PdHandle(1), ..runs }.each(&mut |_, _| true), "wrong PD");
    }
}
