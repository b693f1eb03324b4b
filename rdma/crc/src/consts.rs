//! The folding and reduction constants, derived here at compile time from the
//! polynomial rather than written down, and checked by the host tests.
//!
//! CRC-32 as zlib has it is reflected: the first bit of a message is the least
//! significant bit of its first byte, and it is the highest-degree coefficient.
//! In a register loaded little-endian from the message, bit `k` of an `n`-bit
//! value holds the coefficient of `x^(n-1-k)`: call that value `refl_n(A)`.
//! The one identity everything rests on: the carry-less product of
//! `refl_n(A)` and `refl_m(B)` is `refl_(n+m-1)(A·B)`.
//!
//! A 32-bit remainder `K` (degree ≤ 31) is stored as `refl_33(K)`, i.e.
//! `refl_32(K) << 1`, so that a 64-bit lane times it is a 96-bit `refl_96`.
//! Keeping the constants to 33 bits matters under QEMU 7.2's TCG, whose
//! PCLMULQDQ helper loops over the bits of the source operand up to its highest
//! set bit: the constants are always the source operand.

/// The generator, `x^32 + x^26 + ... + 1`, without its `x^32` term, in the
/// normal (unreflected) bit order: bit `d` is the coefficient of `x^d`.
pub const POLY: u32 = 0x04C1_1DB7;

/// `x^n mod P` in normal bit order.
pub const fn xpow_mod(n: u32) -> u32 {
    let mut r: u64 = 1;
    let mut i = 0;
    while i < n {
        r <<= 1;
        if r & (1 << 32) != 0 {
            r ^= (1 << 32) | POLY as u64;
        }
        i += 1;
    }
    r as u32
}

/// Barrett's `µ = floor(x^64 / P)`, degree 32, in normal bit order (33 bits).
pub const fn barrett_mu() -> u64 {
    let p: u128 = (1 << 32) | POLY as u128;
    let mut rem: u128 = 1 << 64;
    let mut q: u64 = 0;
    let mut i: i32 = 32;
    while i >= 0 {
        if rem & (1 << (32 + i)) != 0 {
            q |= 1 << i;
            rem ^= p << i;
        }
        i -= 1;
    }
    q
}

/// `refl_33` of a polynomial of degree ≤ 32 given in normal bit order: the
/// coefficient of `x^d` goes to bit `32 - d`.
pub const fn refl33(v: u64) -> u64 {
    let mut out = 0;
    let mut d = 0;
    while d <= 32 {
        if v & (1 << d) != 0 {
            out |= 1 << (32 - d);
        }
        d += 1;
    }
    out
}

/// `refl_33(x^n mod P)`.
pub const fn fold_k(n: u32) -> u64 {
    refl33(xpow_mod(n) as u64)
}

/// The constants the assembly reads, in the order of [`Consts`]'s fields.
///
/// Folding a 128-bit block `X = L·x^64 + H` (`L` in the low lane) forward by
/// `D` bits, to be added to the block `D` bits later, needs `X·x^D mod P`:
/// `clmul(refl_64(L), refl_33(K))` is `refl_96(L·K)`, which read as a 128-bit
/// register is `L·K·x^32`, so the low lane takes `K = x^(D+32)`; the same read
/// of the high lane's product is `H·K·x^32`, so it takes `K = x^(D-32)`.
#[repr(C, align(16))]
pub struct Consts {
    /// Four blocks ahead (D = 512): `[x^544, x^480]`.
    pub fold512: [u64; 2],
    /// One block ahead (D = 128): `[x^160, x^96]`.
    pub fold128: [u64; 2],
    /// The last 128-bit block `V`, whose CRC register is `V·x^32 mod P`:
    /// `[x^96, x^64]` (see `clmul::reduce`).
    pub reduce: [u64; 2],
    /// Barrett: `[refl_33(µ), refl_33(P)]`.
    pub barrett: [u64; 2],
    /// The low 32 bits.
    pub mask32: [u64; 2],
}

pub static CONSTS: Consts = Consts {
    fold512: [fold_k(512 + 32), fold_k(512 - 32)],
    fold128: [fold_k(128 + 32), fold_k(128 - 32)],
    reduce: [fold_k(96), fold_k(64)],
    barrett: [refl33(barrett_mu()), refl33((1 << 32) | POLY as u64)],
    mask32: [0xFFFF_FFFF, 0],
};

#[cfg(test)]
mod test {
    use super::*;

    /// Carry-less 64×64 → 128 product, bit by bit.
    fn clmul(a: u64, b: u64) -> u128 {
        (0..64).filter(|i| b >> i & 1 != 0).fold(0, |acc, i| acc ^ (u128::from(a) << i))
    }

    /// The raw CRC register (no inversions) after `data` from zero, by crc32fast:
    /// its hasher inverts its state on the way in and out.
    fn raw_crc(data: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new_with_initial(!0);
        h.update(data);
        !h.finalize()
    }

    #[test]
    fn reflected_poly_is_zlibs() {
        assert_eq!(refl33(POLY as u64) >> 1, 0xEDB8_8320);
    }

    /// `x^n mod P` against a CRC: the message of one set bit followed by `m`
    /// zero bits is `x^m`, whose raw CRC is `x^(m+32) mod P`.
    #[test]
    fn powers_match_the_crc_of_a_single_bit() {
        for n in 32..=600u32 {
            let m = n - 32;
            let bytes = (m as usize) / 8 + 1;
            let mut msg = std::vec![0u8; bytes];
            // x^m is the (bytes*8 - 1 - m)-th bit from the start, reflected within its byte.
            let bit = bytes * 8 - 1 - m as usize;
            msg[bit / 8] |= 1 << (bit % 8);
            let crc = raw_crc(&msg);
            assert_eq!(crc.reverse_bits(), xpow_mod(n), "x^{n}");
        }
        for n in 0..32 {
            assert_eq!(xpow_mod(n), 1 << n);
        }
    }

    /// `x^64 = µ·P + r` with `deg r < 32`, by multiplying back.
    #[test]
    fn mu_is_the_quotient_of_x64() {
        let mu = barrett_mu();
        assert_eq!(mu >> 32, 1, "degree 32");
        let p = (1u64 << 32) | u64::from(POLY);
        let r = clmul(mu, p) ^ (1u128 << 64);
        assert!(r < 1 << 32, "remainder {r:#x}");
    }

    #[test]
    fn constants_fit_33_bits_and_low_bit_clear() {
        for k in [CONSTS.fold512, CONSTS.fold128, CONSTS.reduce].iter().flatten() {
            assert!(*k < 1 << 33 && k & 1 == 0, "{k:#x}");
        }
        assert_eq!(CONSTS.barrett[1], 0x1_DB71_0641);
    }
}
