//! CRC-32 by carry-less multiplication (PCLMULQDQ), after Intel's white paper
//! "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ" (Gopal et
//! al., 2009): fold the message 64 bytes at a time in four 128-bit lanes, fold
//! the lanes into one (a message under 64 bytes folds 16 bytes at a time in one
//! lane), then reduce that to 32 bits with Barrett. The constants
//! and the bit-order argument are in [`crate::consts`].
//!
//! Two loops share the folding and the reduction: [`update_blocks_raw`] only
//! reads the message, [`copy_blocks_raw`] also stores each 16-byte block it
//! loaded into a destination, so a copy and its CRC take one pass over the
//! source (the block hashed is the block stored, whatever a concurrent writer
//! of the source does meanwhile).
//!
//! Written in inline assembly, not `core::arch` intrinsics: the firmware's
//! target (x86_64-unknown-none) is soft-float, and a `#[target_feature(enable =
//! "sse2,pclmulqdq")]` function using the intrinsics crashes LLVM there
//! ("Do not know how to split the result of this operator"). Only SSE2 and
//! PCLMULQDQ instructions are used (no SSE4.1).
//!
//! XMM state: each call's assembly is one block that declares every XMM
//! register it writes as clobbered, so on a target whose compiler uses SSE the
//! compiler saves what it needs. On the soft-float firmware nothing but this
//! block touches XMM registers, and no interrupt or exception handler calls
//! the CRC (they only count and wake the poll loop, or report and stop), so an
//! interrupt taken in the middle of the block finds nothing to save and leaves
//! the registers as they were. The OS must have enabled SSE (CR4.OSFXSR) before
//! the first call; the firmware does so in its early init.

use crate::consts::CONSTS;

/// Bytes below which the table is used instead: one whole block. From four
/// blocks on, the first four seed four lanes; fewer fold in one lane, which
/// still beats the table from the first block (two multiplications instead of
/// sixteen table loads), and RoCE headers are such short strings.
pub const MIN_LEN: usize = 16;

/// Whether this CPU has PCLMULQDQ (CPUID leaf 1, ECX bit 1). SSE2 is part of
/// x86-64 itself.
pub fn cpu_has_pclmulqdq() -> bool {
    // CPUID exists on every x86-64 CPU and leaf 1 always: core offers it safe.
    let leaf1 = core::arch::x86_64::__cpuid(1);
    leaf1.ecx & (1 << 1) != 0
}

/// Lanes 0..2 fold 128 bits ahead, one into the next, into lane 3 (xmm3);
/// leaves the 128-bit folding constant in xmm4 for the one-block loop.
macro_rules! merge_lanes {
    () => {
        concat!(
            "movdqa xmm4, [{k} + 16]\n",
            "movdqa xmm5, xmm0\n",
            "pclmulqdq xmm5, xmm4, 0x00\n",
            "pclmulqdq xmm0, xmm4, 0x11\n",
            "pxor xmm1, xmm5\n",
            "pxor xmm1, xmm0\n",
            "movdqa xmm5, xmm1\n",
            "pclmulqdq xmm5, xmm4, 0x00\n",
            "pclmulqdq xmm1, xmm4, 0x11\n",
            "pxor xmm2, xmm5\n",
            "pxor xmm2, xmm1\n",
            "movdqa xmm5, xmm2\n",
            "pclmulqdq xmm5, xmm4, 0x00\n",
            "pclmulqdq xmm2, xmm4, 0x11\n",
            "pxor xmm3, xmm5\n",
            "pxor xmm3, xmm2\n",
        )
    };
}

/// Folds lane `$lane` 512 bits ahead onto the block at `[{p} + $off]`
/// (loaded into xmm6), storing that block at `[{d} + $off]` first when
/// `$store` is `store`.
#[rustfmt::skip]
macro_rules! fold_lane {
    ($lane:literal, $off:literal, nostore) => {
        concat!(
            "movdqa xmm5, xmm", $lane, "\n",
            "pclmulqdq xmm5, xmm4, 0x00\n",
            "pclmulqdq xmm", $lane, ", xmm4, 0x11\n",
            "movdqu xmm6, [{p} + ", $off, "]\n",
            "pxor xmm", $lane, ", xmm5\n",
            "pxor xmm", $lane, ", xmm6\n",
        )
    };
    ($lane:literal, $off:literal, store) => {
        concat!(
            "movdqa xmm5, xmm", $lane, "\n",
            "pclmulqdq xmm5, xmm4, 0x00\n",
            "pclmulqdq xmm", $lane, ", xmm4, 0x11\n",
            "movdqu xmm6, [{p} + ", $off, "]\n",
            "movdqu [{d} + ", $off, "], xmm6\n",
            "pxor xmm", $lane, ", xmm5\n",
            "pxor xmm", $lane, ", xmm6\n",
        )
    };
}

/// Reduces V = L·x^64 + H (xmm3) to V·x^32 mod P, into `{r:e}`.
macro_rules! reduce {
    () => {
        concat!(
            // First to 96 bits: N1 = L·(x^96 mod P) + H·x^32, as refl_96:
            // clmul(L, x^96) ^ H.
            "movdqa xmm4, [{k} + 32]\n",
            "movdqa xmm5, xmm3\n",
            "pclmulqdq xmm5, xmm4, 0x00\n",
            "psrldq xmm3, 8\n",
            "pxor xmm3, xmm5\n",
            // Then to 64: N1 = A·x^64 + B with A its top 32 terms (low dword
            // of refl_96); N2 = A·(x^64 mod P) + B = clmul(A, x^64) ^ (N1 >> 32).
            "movdqa xmm5, xmm3\n",
            "pand xmm5, [{k} + 64]\n",
            "pclmulqdq xmm5, xmm4, 0x10\n",
            "psrldq xmm3, 4\n",
            "pxor xmm3, xmm5\n",
            // Barrett: N2 = Nh·x^32 + Nl; q = floor(Nh·µ / x^32) is the low
            // dword of clmul(Nh, µ); the remainder is the top dword of N2 ^ q·P.
            "movdqa xmm4, [{k} + 48]\n",
            "movdqa xmm5, xmm3\n",
            "pand xmm5, [{k} + 64]\n",
            "pclmulqdq xmm5, xmm4, 0x00\n",
            "pand xmm5, [{k} + 64]\n",
            "pclmulqdq xmm5, xmm4, 0x10\n",
            "pxor xmm3, xmm5\n",
            "psrlq xmm3, 32\n",
            "movd {r:e}, xmm3\n",
        )
    };
}

/// Advances the raw CRC register (zlib's value before its final inversion)
/// over `data`, which must be at least [`MIN_LEN`] bytes; returns the register
/// and how many bytes it consumed (a multiple of 16; the rest, under 16 bytes,
/// is left to the caller).
///
/// Only to be called when [`cpu_has_pclmulqdq`] holds and SSE is enabled.
pub fn update_blocks(register: u32, data: &[u8]) -> (u32, usize) {
    // SAFETY: `data` is readable for its whole length.
    unsafe { update_blocks_raw(register, data.as_ptr(), data.len()) }
}

/// [`update_blocks`] over `len` bytes at `src`, read through the pointer
/// (16-byte unaligned loads, each byte once), never through a reference.
///
/// # Safety
/// `src..src + len` must be readable for the call; it may change meanwhile
/// (the CRC is then that of whatever each load saw). The CPU must have
/// PCLMULQDQ and SSE must be enabled.
pub unsafe fn update_blocks_raw(register: u32, src: *const u8, len: usize) -> (u32, usize) {
    let blocks = len / 16;
    if blocks == 0 {
        return (register, 0);
    }
    let out: u32;
    // SAFETY: reads `blocks * 16 <= len` bytes from `src` (unaligned loads),
    // readable by the caller's word, and the 16-byte aligned `CONSTS`; writes
    // only the named registers and the declared XMM clobbers; no stack use.
    // The caller checked that the CPU has PCLMULQDQ and SSE is on (see the
    // module comment on XMM state). Not `pure`: the memory may change between
    // two calls without the compiler seeing it.
    unsafe {
        core::arch::asm!(
            // The register is added to the first 32 bits of the message.
            "movd xmm4, {r:e}",
            "cmp {n}, 4",
            "jae 8f",
            // Under four blocks: one lane from the first block on.
            "movdqu xmm3, [{p}]",
            "pxor xmm3, xmm4",
            "add {p}, 16",
            "dec {n}",
            "movdqa xmm4, [{k} + 16]",
            "jmp 7f",
            // The four lanes take the first 64 bytes.
            "8:",
            "movdqu xmm0, [{p}]",
            "movdqu xmm1, [{p} + 16]",
            "movdqu xmm2, [{p} + 32]",
            "movdqu xmm3, [{p} + 48]",
            "pxor xmm0, xmm4",
            "add {p}, 64",
            "sub {n}, 4",
            "movdqa xmm4, [{k}]",
            "cmp {n}, 4",
            "jb 3f",
            // Each lane folds 512 bits ahead onto the next 64 bytes.
            "2:",
            fold_lane!("0", "0", nostore),
            fold_lane!("1", "16", nostore),
            fold_lane!("2", "32", nostore),
            fold_lane!("3", "48", nostore),
            "add {p}, 64",
            "sub {n}, 4",
            "cmp {n}, 4",
            "jae 2b",
            "3:",
            merge_lanes!(),
            // The remaining whole blocks, one at a time.
            "7:",
            "test {n}, {n}",
            "jz 5f",
            "4:",
            "movdqa xmm5, xmm3",
            "pclmulqdq xmm5, xmm4, 0x00",
            "pclmulqdq xmm3, xmm4, 0x11",
            "movdqu xmm6, [{p}]",
            "pxor xmm3, xmm5",
            "pxor xmm3, xmm6",
            "add {p}, 16",
            "dec {n}",
            "jnz 4b",
            "5:",
            reduce!(),
            p = inout(reg) src => _,
            n = inout(reg) blocks => _,
            r = inout(reg) register => out,
            k = in(reg) &CONSTS,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            out("xmm4") _, out("xmm5") _, out("xmm6") _,
            options(nostack, readonly),
        );
    }
    (out, blocks * 16)
}

/// [`update_blocks_raw`] that also stores every block it loads at the same
/// offset from `dst`: copies and hashes the first whole 16-byte blocks of
/// `len` bytes (at least [`MIN_LEN`]) in one pass; returns the register and
/// the bytes done (copied and hashed alike, a multiple of 16).
///
/// # Safety
/// `src..src + len` must be readable and `dst..dst + len` writable for the
/// call, the two apart; the source may change meanwhile (what was stored is
/// what was hashed). The CPU must have PCLMULQDQ and SSE must be enabled.
pub unsafe fn copy_blocks_raw(register: u32, src: *const u8, dst: *mut u8, len: usize) -> (u32, usize) {
    let blocks = len / 16;
    if blocks == 0 {
        return (register, 0);
    }
    let out: u32;
    // SAFETY: reads `blocks * 16 <= len` bytes from `src` and writes as many
    // to `dst` (unaligned 16-byte accesses), both ranges the caller vouches
    // for and apart; reads the 16-byte aligned `CONSTS`; writes only the
    // named registers and the declared XMM clobbers; no stack use. The CPU
    // checks are the caller's, as for `update_blocks_raw`.
    unsafe {
        core::arch::asm!(
            "movd xmm4, {r:e}",
            "cmp {n}, 4",
            "jae 8f",
            "movdqu xmm3, [{p}]",
            "movdqu [{d}], xmm3",
            "pxor xmm3, xmm4",
            "add {p}, 16",
            "add {d}, 16",
            "dec {n}",
            "movdqa xmm4, [{k} + 16]",
            "jmp 7f",
            "8:",
            "movdqu xmm0, [{p}]",
            "movdqu [{d}], xmm0",
            "movdqu xmm1, [{p} + 16]",
            "movdqu [{d} + 16], xmm1",
            "movdqu xmm2, [{p} + 32]",
            "movdqu [{d} + 32], xmm2",
            "movdqu xmm3, [{p} + 48]",
            "movdqu [{d} + 48], xmm3",
            "pxor xmm0, xmm4",
            "add {p}, 64",
            "add {d}, 64",
            "sub {n}, 4",
            "movdqa xmm4, [{k}]",
            "cmp {n}, 4",
            "jb 3f",
            "2:",
            fold_lane!("0", "0", store),
            fold_lane!("1", "16", store),
            fold_lane!("2", "32", store),
            fold_lane!("3", "48", store),
            "add {p}, 64",
            "add {d}, 64",
            "sub {n}, 4",
            "cmp {n}, 4",
            "jae 2b",
            "3:",
            merge_lanes!(),
            "7:",
            "test {n}, {n}",
            "jz 5f",
            "4:",
            "movdqa xmm5, xmm3",
            "pclmulqdq xmm5, xmm4, 0x00",
            "pclmulqdq xmm3, xmm4, 0x11",
            "movdqu xmm6, [{p}]",
            "movdqu [{d}], xmm6",
            "pxor xmm3, xmm5",
            "pxor xmm3, xmm6",
            "add {p}, 16",
            "add {d}, 16",
            "dec {n}",
            "jnz 4b",
            "5:",
            reduce!(),
            p = inout(reg) src => _,
            d = inout(reg) dst => _,
            n = inout(reg) blocks => _,
            r = inout(reg) register => out,
            k = in(reg) &CONSTS,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            out("xmm4") _, out("xmm5") _, out("xmm6") _,
            options(nostack),
        );
    }
    (out, blocks * 16)
}

#[cfg(test)]
mod test {
    use super::*;

    /// The raw register after `data`, by the table.
    fn table_register(register: u32, data: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new_with_initial(!register);
        h.update(data);
        !h.finalize()
    }

    #[test]
    fn blocks_consume_whole_16s_and_match_the_table() {
        if !cpu_has_pclmulqdq() {
            return;
        }
        let data: std::vec::Vec<u8> = (0..300u32).map(|i| (i * 7 + i / 5) as u8).collect();
        for len in 0..=300 {
            let (register, done) = update_blocks(0x1234_5678, &data[..len]);
            if len < MIN_LEN {
                assert_eq!((register, done), (0x1234_5678, 0));
            } else {
                assert_eq!(done, len / 16 * 16, "length {len}");
                assert_eq!(register, table_register(0x1234_5678, &data[..done]), "length {len}");
            }
        }
    }

    #[test]
    fn copying_blocks_stores_exactly_what_it_hashes() {
        if !cpu_has_pclmulqdq() {
            return;
        }
        let data: std::vec::Vec<u8> = (0..300u32).map(|i| (i * 13 + i / 3) as u8).collect();
        for len in 0..=300 {
            let mut out = std::vec![0xEEu8; len + 16];
            // SAFETY: `data` holds `len` bytes and `out` more, apart.
            let (register, done) = unsafe { copy_blocks_raw(7, data.as_ptr(), out.as_mut_ptr(), len) };
            assert_eq!((register, done), update_blocks(7, &data[..len]), "length {len}");
            assert_eq!(&out[..done], &data[..done], "length {len}");
            assert!(out[done..].iter().all(|&b| b == 0xEE), "nothing past the blocks, length {len}");
        }
    }
}
