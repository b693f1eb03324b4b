//! CRC-32 with zlib's parameters (the Ethernet polynomial 0x04C11DB7,
//! reflected, initial and final inversion), as the RoCE ICRC uses it: by
//! PCLMULQDQ folding where the CPU has it, else by crc32fast's table code.
//!
//! [`Hasher`] has crc32fast's semantics (`new_with_initial`, `update`,
//! `finalize`), so either path gives the same value for the same bytes; a
//! [`Path`] can be forced to compare them. The path is chosen once, from
//! CPUID; on x86-64 the caller's OS must have enabled SSE (CR4.OSFXSR), as
//! every hosted OS does and the firmware does in its early init.
//!
//! Besides slices, a hasher reads memory through raw pointers
//! ([`Hasher::update_raw`]) and copies while it hashes
//! ([`Hasher::copy_update_raw`], [`Hasher::copy_update`]): for memory that
//! another agent writes concurrently (a host's shared memory), which no Rust
//! reference may cover, and for a copy whose CRC should cost no second pass
//! over the bytes.
#![no_std]

#[cfg(test)]
extern crate std;

#[cfg(target_arch = "x86_64")]
mod clmul;
pub mod consts;

use core::fmt;
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// How a CRC is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// crc32fast's table code (16 bytes a step through 16 KiB of tables),
    /// built without its `std` feature so it never picks SIMD itself.
    Table,
    /// PCLMULQDQ folding, 64 bytes a step (16 under 64 bytes); inputs
    /// shorter than [`clmul_from`] and tails under 16 bytes use the table.
    Clmul,
}

impl Path {
    /// Both paths, the fallback first.
    pub const ALL: [Path; 2] = [Path::Table, Path::Clmul];

    /// Its name in logs and on the kernel command line.
    pub fn name(self) -> &'static str {
        match self {
            Path::Table => "table",
            Path::Clmul => "pclmulqdq",
        }
    }

    /// Whether this CPU can run the path.
    pub fn available(self) -> bool {
        match self {
            Path::Table => true,
            #[cfg(target_arch = "x86_64")]
            Path::Clmul => {
                // CPUID once: in a virtual machine each one traps to the hypervisor.
                static HAS: AtomicU8 = AtomicU8::new(UNKNOWN);
                match HAS.load(Ordering::Relaxed) {
                    UNKNOWN => {
                        let has = clmul::cpu_has_pclmulqdq();
                        HAS.store(if has { CLMUL } else { TABLE }, Ordering::Relaxed);
                        has
                    }
                    known => known == CLMUL,
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            Path::Clmul => false,
        }
    }

    /// The path [`Hasher::new`] uses: the one set by [`Path::set_best`], else
    /// PCLMULQDQ if the CPU has it (decided on the first call).
    pub fn best() -> Path {
        match BEST.load(Ordering::Relaxed) {
            TABLE => Path::Table,
            CLMUL => Path::Clmul,
            _ => {
                let best = if Path::Clmul.available() { Path::Clmul } else { Path::Table };
                best.store();
                best
            }
        }
    }

    /// Makes `path` the one [`Path::best`] returns; false (and no change) if
    /// this CPU cannot run it.
    pub fn set_best(path: Path) -> bool {
        let ok = path.available();
        if ok {
            path.store();
        }
        ok
    }

    fn store(self) {
        BEST.store(if self == Path::Clmul { CLMUL } else { TABLE }, Ordering::Relaxed);
    }
}

const UNKNOWN: u8 = 0;
const TABLE: u8 = 1;
const CLMUL: u8 = 2;
static BEST: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Bytes each path hashes in [`time_paths`]: a large RoCE payload.
pub const TIMING_LEN: usize = 4096;

/// The cost of one CRC of [`TIMING_LEN`] bytes on each path (in [`Path::ALL`]
/// order), in the units of `ticks` (any monotonic counter): the lowest of a
/// few runs, `None` for a path this CPU lacks. For a CPU whose instructions
/// cost what nobody can predict, e.g. QEMU's TCG, which emulates PCLMULQDQ bit
/// by bit (7.2) and may make it slower than the table.
pub fn time_paths(mut ticks: impl FnMut() -> u64) -> [(Path, Option<u64>); 2] {
    static DATA: [u8; TIMING_LEN] = [0x5A; TIMING_LEN];
    Path::ALL.map(|path| (path, cost_of(path, &DATA, 1, &mut ticks)))
}

/// The input lengths [`time_crossover`] tries, shortest first.
pub const CROSSOVER_LENS: [usize; 6] = [16, 32, 64, 128, 256, 512];

/// Times both paths on the [`CROSSOVER_LENS`] and makes the PCLMULQDQ path
/// fold inputs from the first of them from which folding is no slower at
/// every longer one tried; shorter inputs take the table. Returns that
/// length (past the longest tried when folding never won; one 16-byte block
/// natively, where two multiplications beat sixteen table loads). For the
/// same reason as [`time_paths`]: under QEMU's TCG each PCLMULQDQ is a call
/// into the emulator, and the reduction's five of them cost more than a
/// RoCE header's bytes by table. Changes nothing where the CPU has no
/// PCLMULQDQ.
pub fn time_crossover(mut ticks: impl FnMut() -> u64) -> usize {
    const LONGEST: usize = CROSSOVER_LENS[CROSSOVER_LENS.len() - 1];
    static DATA: [u8; LONGEST] = [0x5A; LONGEST];
    if !Path::Clmul.available() {
        return clmul_from();
    }
    // Each path from the shortest input on, so the comparison is the
    // paths', whatever threshold was set before.
    set_clmul_from(MIN_FOLD);
    // Enough calls per run that the clock's own cost does not decide.
    const REPS: usize = 32;
    let mut from = 2 * LONGEST;
    for len in CROSSOVER_LENS.into_iter().rev() {
        let data = &DATA[..len];
        let (table, clmul) =
            (cost_of(Path::Table, data, REPS, &mut ticks), cost_of(Path::Clmul, data, REPS, &mut ticks));
        if clmul > table {
            break;
        }
        from = len;
    }
    set_clmul_from(from);
    from
}

/// The lowest of a few runs' ticks for `reps` CRCs of `data` on `path`;
/// `None` if this CPU lacks it.
fn cost_of(path: Path, data: &[u8], reps: usize, ticks: &mut impl FnMut() -> u64) -> Option<u64> {
    const RUNS: usize = 5;
    let h = Hasher::with_path(0, path)?;
    (0..RUNS)
        .map(|_| {
            let start = ticks();
            for _ in 0..reps {
                let mut h = h.clone();
                h.update(core::hint::black_box(data));
                core::hint::black_box(h.finalize());
            }
            ticks().saturating_sub(start)
        })
        .min()
}

/// The shortest input (or part of one) the PCLMULQDQ path folds; see
/// [`time_crossover`].
static CLMUL_FROM: AtomicUsize = AtomicUsize::new(MIN_FOLD);

#[cfg(target_arch = "x86_64")]
const MIN_FOLD: usize = clmul::MIN_LEN;
#[cfg(not(target_arch = "x86_64"))]
const MIN_FOLD: usize = 16;

/// The shortest input the PCLMULQDQ path folds rather than hashing by
/// table: one 16-byte block unless [`time_crossover`] or [`set_clmul_from`]
/// found or set more.
pub fn clmul_from() -> usize {
    CLMUL_FROM.load(Ordering::Relaxed)
}

/// Sets [`clmul_from`]; values under one 16-byte block count as one.
pub fn set_clmul_from(len: usize) {
    CLMUL_FROM.store(len.max(MIN_FOLD), Ordering::Relaxed);
}

/// Makes the cheaper of `costs` (from [`time_paths`]) the best path and
/// returns it; a tie keeps the table.
pub fn choose_cheaper(costs: &[(Path, Option<u64>)]) -> Path {
    let mut cheapest = (Path::Table, u64::MAX);
    for &(path, cost) in costs {
        if let Some(c) = cost
            && (c < cheapest.1 || (c == cheapest.1 && path == Path::Table))
        {
            cheapest = (path, c);
        }
    }
    Path::set_best(cheapest.0);
    cheapest.0
}

impl core::str::FromStr for Path {
    type Err = ();

    /// [`Path::name`] back.
    fn from_str(s: &str) -> Result<Self, ()> {
        Path::ALL.into_iter().find(|p| p.name() == s).ok_or(())
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A running CRC-32: crc32fast's `Hasher` semantics, on a chosen path.
#[derive(Clone, Debug)]
pub struct Hasher {
    /// The CRC of the bytes so far (zlib's value, inverted on the way in and out).
    crc: u32,
    path: Path,
}

impl Hasher {
    /// A CRC of nothing yet, on [`Path::best`].
    pub fn new() -> Self {
        Self::new_with_initial(0)
    }

    /// Continues from `init`, the CRC of the bytes before, on [`Path::best`].
    pub fn new_with_initial(init: u32) -> Self {
        Hasher { crc: init, path: Path::best() }
    }

    /// Continues from `init` on `path`; `None` if this CPU cannot run it.
    pub fn with_path(init: u32, path: Path) -> Option<Self> {
        path.available().then_some(Hasher { crc: init, path })
    }

    /// The path this hasher uses.
    pub fn path(&self) -> Path {
        self.path
    }

    /// Adds `data`.
    // Inlined for the test: the ICRC passes an empty pad, and on transmit an
    // empty rest of the head, with every frame, and the call cost more than the
    // nothing it then did.
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        if !data.is_empty() {
            self.update_some(data);
        }
    }

    fn update_some(&mut self, data: &[u8]) {
        self.crc = match self.path {
            Path::Table => table(self.crc, data),
            #[cfg(target_arch = "x86_64")]
            Path::Clmul if data.len() >= clmul_from() => {
                let (register, done) = clmul::update_blocks(!self.crc, data);
                table(!register, data.get(done..).unwrap_or_default())
            }
            Path::Clmul => table(self.crc, data),
        };
    }

    /// Adds the `len` bytes at `src`, read through the pointer only (each
    /// byte loaded once, never through a reference): for memory someone else
    /// may write meanwhile, whose CRC is then that of whatever the loads saw.
    ///
    /// # Safety
    /// `src..src + len` must be readable for the whole call.
    pub unsafe fn update_raw(&mut self, src: *const u8, len: usize) {
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if self.path == Path::Clmul && len >= clmul_from() {
            // SAFETY: the caller vouches for the range; the path is only
            // chosen on a CPU that has PCLMULQDQ (`with_path`, `best`).
            let (register, blocks) = unsafe { clmul::update_blocks_raw(!self.crc, src, len) };
            self.crc = !register;
            done = blocks;
        }
        // The rest (all of it on the table path) through a bounce buffer the
        // table can take as a slice.
        let mut bounce = [0u8; BOUNCE];
        while done < len {
            let n = (len - done).min(BOUNCE);
            // SAFETY: `done + n <= len`: inside the caller's range; `bounce`
            // is ours and holds `n` bytes.
            unsafe { copy_raw(src.add(done), bounce.as_mut_ptr(), n) };
            self.crc = table(self.crc, bounce.get(..n).unwrap_or_default());
            done += n;
        }
    }

    /// Copies `dst.len()` bytes from `src` into `dst` and adds them, in one
    /// pass over the source on the PCLMULQDQ path (each 16-byte block loaded
    /// once, then both stored and folded in); on the table path a chunk at a
    /// time, hashed from `dst` while it is still in the cache. The CRC is
    /// always that of the bytes `dst` received, even if the source changed
    /// meanwhile.
    ///
    /// # Safety
    /// `src..src + dst.len()` must be readable for the whole call and must
    /// not overlap `dst`.
    pub unsafe fn copy_update_raw(&mut self, src: *const u8, dst: &mut [u8]) {
        let len = dst.len();
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if self.path == Path::Clmul && len >= clmul_from() {
            // SAFETY: the caller vouches for the source; `dst` is ours for
            // `len` bytes and apart from it; the path is only chosen on a
            // CPU that has PCLMULQDQ.
            let (register, blocks) = unsafe { clmul::copy_blocks_raw(!self.crc, src, dst.as_mut_ptr(), len) };
            self.crc = !register;
            done = blocks;
        }
        while done < len {
            let n = (len - done).min(BOUNCE);
            let Some(out) = dst.get_mut(done..done + n) else { break };
            // SAFETY: `done + n <= len`: inside the caller's source range and
            // inside `out`, which is ours.
            unsafe { copy_raw(src.add(done), out.as_mut_ptr(), n) };
            self.crc = table(self.crc, out);
            done += n;
        }
    }

    /// [`Hasher::copy_update_raw`] between slices: copies `src` into the
    /// start of `dst` (as much of it as fits) and adds what was copied.
    pub fn copy_update(&mut self, src: &[u8], dst: &mut [u8]) {
        let n = src.len().min(dst.len());
        if let Some(out) = dst.get_mut(..n) {
            // SAFETY: `src` is readable for `n` bytes; `out` is a distinct
            // `&mut`, so the two cannot overlap.
            unsafe { self.copy_update_raw(src.as_ptr(), out) };
        }
    }

    /// The CRC of everything added.
    pub fn finalize(self) -> u32 {
        self.crc
    }
}

impl Default for Hasher {
    fn default() -> Self {
        Self::new()
    }
}

/// Bytes the table path takes from raw memory at a time (a stack buffer).
const BOUNCE: usize = 256;

/// Copies `len` bytes from `src` to `dst` through the pointers: `rep movsb`,
/// which the compiler treats as opaque, so a concurrent writer of the source
/// is no data race in Rust's sense.
///
/// # Safety
/// `src..src + len` readable, `dst..dst + len` writable, apart.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_raw(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller vouches for both ranges; `rep movsb` copies exactly
    // `len` bytes forwards (DF is clear on entry to an asm block) and touches
    // no stack.
    unsafe {
        core::arch::asm!(
            "rep movsb",
            inout("rcx") len => _,
            inout("rsi") src => _,
            inout("rdi") dst => _,
            options(nostack, preserves_flags),
        );
    }
}

/// Elsewhere: one volatile byte at a time.
///
/// # Safety
/// As for the x86_64 version.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_raw(src: *const u8, dst: *mut u8, len: usize) {
    for i in 0..len {
        // SAFETY: `i < len`, inside both ranges the caller vouches for.
        unsafe { core::ptr::write_volatile(dst.add(i), core::ptr::read_volatile(src.add(i))) };
    }
}

/// zlib's `crc32(crc, data)` by table.
fn table(crc: u32, data: &[u8]) -> u32 {
    // The folding paths leave it whole-block messages' empty tails: crc32fast
    // spends some 20 instructions on nothing.
    if data.is_empty() {
        return crc;
    }
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(data);
    h.finalize()
}

/// zlib's CRC-32 of `data` on [`Path::best`].
pub fn hash(data: &[u8]) -> u32 {
    let mut h = Hasher::new();
    h.update(data);
    h.finalize()
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn best_defaults_to_clmul_when_available() {
        assert_eq!(Path::best() == Path::Clmul, Path::Clmul.available());
        assert_eq!(Hasher::new().path(), Path::best());
    }
}
