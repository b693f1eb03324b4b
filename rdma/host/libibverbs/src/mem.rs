//! Application memory registration: the pages of a buffer the program
//! registers are moved into the ring's shared memory where they are, so
//! the appliance reads and writes the program's own buffer.
//!
//! `ibv_reg_mr(addr, len)` takes the pages that hold `addr .. addr + len`,
//! copies their contents into a chunk of this context's buffer area, and
//! maps that chunk of the ring file over the same virtual addresses with
//! `MAP_FIXED | MAP_SHARED`. The program keeps its pointers; the firmware
//! sees the bytes at region offsets. Bytes that share those pages with the
//! buffer (a `malloc`ed buffer's neighbours) move with them and stay valid.
//!
//! Each moved run of pages is remembered ([`Moved`]): a later MR inside a
//! run reuses it; SGE addresses are translated through the runs. Runs are
//! never moved back: deregistration leaves the memory valid (and the chunk
//! of the buffer area taken).
//!
//! Limits: a run is checked against `/proc/self/maps` before reuse, so a
//! buffer that was `munmap`ed (or `free`d back to the kernel) and whose
//! address was reused gets moved again; an MR that partly overlaps an
//! earlier run but does not fit inside it grows that run in place when the
//! buffer area right beside the run's chunk is free (consecutive `malloc`s
//! registered in order, as rping's), else it is refused (`EINVAL`); writes by
//! other threads to the pages while they move can be lost; after `fork` the
//! child shares the pages with the parent (`MAP_SHARED`, not copy-on-write);
//! a buffer larger than the free buffer area is refused (`ENOMEM`: raise
//! the ring's region size, the appliance's `ring_mb=` boot parameter).

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::RwLock;

use crate::state::Shared;

pub const PAGE: u64 = 4096;

/// One run of moved pages.
#[derive(Clone, Copy, Debug)]
struct Run {
    len: u64,
    /// Region offset of the run's first byte.
    off: u64,
}

/// The moved runs of the process, by first virtual address.
#[derive(Default)]
pub struct Moved {
    runs: RwLock<BTreeMap<u64, Run>>,
}

impl Moved {
    /// The region offset of `addr`, when it lies in a moved run.
    pub fn translate(&self, addr: u64) -> Option<u64> {
        let runs = self.runs.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (&va, run) = runs.range(..=addr).next_back()?;
        (addr - va < run.len).then(|| run.off + (addr - va))
    }
}

/// Whether the mapping at `va` is still the ring file at region offset `off`
/// (`/proc/self/maps`: the program may have unmapped it since).
fn still_mapped(sh: &Shared, va: u64, off: u64) -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return false };
    let ring = std::fs::canonicalize(&sh.ring).unwrap_or_else(|_| sh.ring.clone());
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(_perms), Some(file_off)) = (f.next(), f.next(), f.next()) else { continue };
        let Some((lo, hi)) = range.split_once('-') else { continue };
        let (Ok(lo), Ok(hi), Ok(file_off)) =
            (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16), u64::from_str_radix(file_off, 16))
        else {
            continue;
        };
        if va < lo || va >= hi {
            continue;
        }
        let path = f.nth(2).unwrap_or("");
        return std::path::Path::new(path) == ring && file_off + (va - lo) == off;
    }
    false
}

/// Move the pages of `addr .. addr + len` into the ring (or find them
/// moved already); the region offset of `addr`.
/// Copy the pages `start .. start + bytes` into the buffer area chunk at
/// `off` (already taken) and map it over them; the chunk is given back on
/// failure.
fn move_pages(sh: &Shared, start: u64, bytes: u64, off: u64) -> Result<(), c_int> {
    // SAFETY: 1. `start .. start + bytes` are whole pages around a buffer
    // the C API says the program owns and may register, so they are mapped;
    // we only read them. 2. The slice lives only for the copy.
    let current = unsafe { std::slice::from_raw_parts(start as *const u8, bytes as usize) };
    if verbs_ring::SharedMem::write(sh.ctx.shared_mem(), off as usize, current).is_err() {
        sh.ctx.free_buffer(off, bytes);
        return Err(libc::EFAULT);
    }
    // SAFETY: the new mapping replaces exactly the pages just copied, with
    // the same contents, at the same addresses: the program's pointers stay
    // valid. `fd` is the ring file, `off` a page-aligned offset inside it.
    let p = unsafe {
        libc::mmap(
            start as *mut libc::c_void,
            bytes as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            sh.fd,
            off as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        sh.ctx.free_buffer(off, bytes);
        return Err(libc::EFAULT);
    }
    Ok(())
}

/// Grow the live run at `va` to cover `start .. stop`, which sticks out of
/// it on one side only, by moving the missing pages into the buffer area
/// right beside the run's chunk (region offsets stay contiguous, as an MR
/// needs). The grown run, or `None` when that area is taken.
fn grow(sh: &Shared, va: u64, r: Run, start: u64, stop: u64) -> Option<(u64, Run)> {
    let end = va + r.len;
    if va <= start && stop > end {
        let extra = stop - end;
        let off = sh.ctx.alloc_buffer_at(r.off + r.len, extra)?;
        move_pages(sh, end, extra, off).ok()?;
        Some((va, Run { len: r.len + extra, off: r.off }))
    } else if start < va && stop <= end {
        let extra = va - start;
        let off = sh.ctx.alloc_buffer_at(r.off.checked_sub(extra)?, extra)?;
        move_pages(sh, start, extra, off).ok()?;
        Some((start, Run { len: r.len + extra, off }))
    } else {
        None
    }
}

pub fn register(sh: &Shared, addr: u64, len: u64) -> Result<u64, c_int> {
    if len == 0 || addr == 0 {
        return Err(libc::EINVAL);
    }
    let end = addr.checked_add(len).ok_or(libc::EINVAL)?;
    let start = addr & !(PAGE - 1);
    let stop = end.checked_add(PAGE - 1).ok_or(libc::EINVAL)? & !(PAGE - 1);
    let mut runs = sh.moved.runs.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Runs overlapping [start, stop): forget those no longer mapped.
    let overlapping: Vec<(u64, Run)> = runs
        .range(..stop)
        .rev()
        .take_while(|(va, r)| **va + r.len > start)
        .map(|(va, r)| (*va, *r))
        .filter(|(va, r)| *va + r.len > start)
        .collect();
    let mut live = Vec::new();
    for (va, r) in overlapping {
        if still_mapped(sh, va, r.off) {
            live.push((va, r));
        } else {
            runs.remove(&va);
            // The chunk may still be mapped elsewhere in no way we know of;
            // give it back only when nothing of it is mapped here.
            sh.ctx.free_buffer(r.off, r.len);
        }
    }
    match live.as_slice() {
        [] => {}
        [(va, r)] if *va <= start && va + r.len >= stop => return Ok(r.off + (addr - va)),
        [(va, r)] => {
            let (va, r) = (*va, *r);
            let (run_va, run) = grow(sh, va, r, start, stop).ok_or(libc::EINVAL)?;
            runs.remove(&va);
            runs.insert(run_va, run);
            return Ok(run.off + (addr - run_va));
        }
        _ => return Err(libc::EINVAL),
    }
    let bytes = stop - start;
    let off = sh.ctx.alloc_buffer(bytes).map_err(|_| libc::ENOMEM)?;
    move_pages(sh, start, bytes, off)?;
    runs.insert(start, Run { len: bytes, off });
    Ok(off + (addr - start))
}
