//! The PCLMULQDQ path against the table path (and both against crc32fast on its
//! own): every length 0..=9000 at every alignment 0..=63, pseudo-random bytes,
//! plus random contents, splits and initial values. Skipped, with a note, on a
//! CPU without PCLMULQDQ.

use crc::{Hasher, Path};
use proptest::prelude::*;

const MAX_LEN: usize = 9000;
const ALIGNMENTS: usize = 64;

/// xorshift64*: reproducible noise for the exhaustive sweep.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

fn crc_on(path: Path, init: u32, data: &[u8]) -> u32 {
    let mut h = Hasher::with_path(init, path).expect("path available");
    h.update(data);
    h.finalize()
}

fn clmul_available() -> bool {
    let ok = Path::Clmul.available();
    if !ok {
        eprintln!("this CPU has no PCLMULQDQ: only the table path is tested");
    }
    ok
}

#[test]
fn every_length_and_alignment_matches_the_table() {
    if !clmul_available() {
        return;
    }
    // A 64-byte aligned buffer, so offset `a` is an address ≡ a (mod 64).
    #[repr(align(64))]
    struct Aligned([u8; MAX_LEN + ALIGNMENTS]);
    let mut buf = Box::new(Aligned([0; MAX_LEN + ALIGNMENTS]));
    for align in 0..ALIGNMENTS {
        let bytes = noise(align as u64 * 0x9E37_79B9 + 7, MAX_LEN);
        buf.0[align..align + MAX_LEN].copy_from_slice(&bytes);
        let data = &buf.0[align..align + MAX_LEN];
        // The table's CRC of each prefix, one byte at a time: the reference
        // for every length costs one pass.
        let mut reference = crc32fast::Hasher::new();
        for len in 0..=MAX_LEN {
            let init = 0;
            let got = crc_on(Path::Clmul, init, &data[..len]);
            let want = reference.clone().finalize();
            assert_eq!(got, want, "length {len}, alignment {align}");
            if len < MAX_LEN {
                reference.update(&data[len..len + 1]);
            }
        }
    }
}

/// Reading through raw pointers ([`Hasher::update_raw`]) and copying while
/// hashing ([`Hasher::copy_update_raw`]) give the table's CRC for every length
/// 0..=9000 at every offset from a 16-byte boundary on the PCLMULQDQ path
/// (the loads are 16 bytes wide), and at a few on the table path (whose
/// chunking does not depend on the address); the copy holds exactly the
/// source and nothing past it.
#[test]
fn raw_reads_and_copies_match_for_every_length_and_offset() {
    #[repr(align(64))]
    struct Aligned([u8; MAX_LEN + 16]);
    let mut buf = Box::new(Aligned([0; MAX_LEN + 16]));
    let mut dst = vec![0u8; MAX_LEN + 32];
    for path in Path::ALL.into_iter().filter(|p| p.available()) {
        let offsets = if path == Path::Clmul { 0..16 } else { 0..3 };
        for off in offsets {
            let bytes = noise(off as u64 * 0x51_7CC1 + 3, MAX_LEN);
            buf.0[off..off + MAX_LEN].copy_from_slice(&bytes);
            let data = &buf.0[off..off + MAX_LEN];
            let mut reference = crc32fast::Hasher::new_with_initial(0x0BAD_F00D);
            for len in 0..=MAX_LEN {
                let want = reference.clone().finalize();
                let mut raw = Hasher::with_path(0x0BAD_F00D, path).expect("available");
                // SAFETY: `data` holds at least `len` bytes.
                unsafe { raw.update_raw(data.as_ptr(), len) };
                assert_eq!(raw.finalize(), want, "{path}: raw, length {len}, offset {off}");
                dst.fill(0xA5);
                let mut copy = Hasher::with_path(0x0BAD_F00D, path).expect("available");
                // SAFETY: `data` holds `len` bytes; `dst` is another buffer.
                unsafe { copy.copy_update_raw(data.as_ptr(), &mut dst[off..off + len]) };
                assert_eq!(copy.finalize(), want, "{path}: copy, length {len}, offset {off}");
                assert_eq!(&dst[off..off + len], &data[..len], "{path}: copied bytes, length {len}");
                // A stray store would be a block wide: look 16 bytes either side.
                let after = &dst[off + len..(off + len + 16).min(dst.len())];
                assert!(dst[..off].iter().chain(after).all(|&b| b == 0xA5), "{path}: only the copy, length {len}");
                if len < MAX_LEN {
                    reference.update(&data[len..len + 1]);
                }
            }
        }
    }
}

#[test]
fn known_values() {
    for path in Path::ALL.into_iter().filter(|p| p.available()) {
        assert_eq!(crc_on(path, 0, b""), 0, "{path}");
        assert_eq!(crc_on(path, 0, b"123456789"), 0xCBF4_3926, "{path}: the check value");
        let zeros = [0u8; 4096];
        // zlib: crc32(0, 4096 zero bytes).
        assert_eq!(crc_on(path, 0, &zeros), 0xC71C_0011, "{path}");
        let ones = [0xFFu8; 1000];
        assert_eq!(crc_on(path, 0, &ones), crc32fast::hash(&ones), "{path}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random bytes, random split into two updates, random initial CRC: every
    /// path agrees with crc32fast.
    #[test]
    fn random_content_splits_and_inits(
        data in proptest::collection::vec(any::<u8>(), 0..9000),
        split in any::<prop::sample::Index>(),
        init in any::<u32>(),
    ) {
        let at = split.index(data.len() + 1);
        let mut want = crc32fast::Hasher::new_with_initial(init);
        want.update(&data);
        let want = want.finalize();
        for path in Path::ALL.into_iter().filter(|p| p.available()) {
            let mut h = Hasher::with_path(init, path).expect("available");
            h.update(&data[..at]);
            h.update(&data[at..]);
            prop_assert_eq!(h.finalize(), want, "{}", path);
            // The same split through the raw read, then a safe copy.
            let mut h = Hasher::with_path(init, path).expect("available");
            // SAFETY: `data` holds `at` bytes.
            unsafe { h.update_raw(data.as_ptr(), at) };
            let mut out = vec![0u8; data.len() - at];
            h.copy_update(&data[at..], &mut out);
            prop_assert_eq!(h.finalize(), want, "{} (raw, copy)", path);
            prop_assert_eq!(&out[..], &data[at..]);
        }
    }
}

/// The only test here that changes the process-wide best path and the
/// length from which the PCLMULQDQ path folds.
#[test]
fn timing_covers_the_available_paths_and_choice_sets_best() {
    let clock = std::time::Instant::now();
    let from = crc::time_crossover(|| clock.elapsed().as_nanos() as u64);
    assert_eq!(crc::clmul_from(), from);
    if Path::Clmul.available() {
        assert!(crc::CROSSOVER_LENS.contains(&from) || from == 2 * 512, "{from}");
    }
    // Wherever the threshold lies, both paths give the table's value.
    let data: Vec<u8> = (0..1500u32).map(|i| (i * 31 + i / 7) as u8).collect();
    for from in [0, 16, 48, 64, 100, 1024] {
        crc::set_clmul_from(from);
        assert_eq!(crc::clmul_from(), from.max(16));
        for len in [0, 15, 16, 17, 47, 48, 63, 64, 65, 99, 100, 101, 1023, 1024, 1025, 1500] {
            let mut h = Hasher::with_path(7, Path::best()).expect("best is available");
            h.update(&data[..len]);
            let mut t = Hasher::with_path(7, Path::Table).expect("always");
            t.update(&data[..len]);
            assert_eq!(h.finalize(), t.finalize(), "from {from}, length {len}");
        }
    }
    crc::set_clmul_from(16);

    let clock = std::time::Instant::now();
    let costs = crc::time_paths(|| clock.elapsed().as_nanos() as u64);
    for (path, cost) in costs {
        assert_eq!(cost.is_some(), path.available(), "{path}");
    }
    let chosen = crc::choose_cheaper(&costs);
    assert!(chosen.available());
    assert_eq!(Path::best(), chosen);
    // Only measured costs count, and a tie keeps the table.
    assert_eq!(crc::choose_cheaper(&[(Path::Table, Some(9)), (Path::Clmul, None)]), Path::Table);
    if Path::Clmul.available() {
        assert_eq!(crc::choose_cheaper(&[(Path::Table, Some(9)), (Path::Clmul, Some(3))]), Path::Clmul);
        assert_eq!(crc::choose_cheaper(&[(Path::Table, Some(3)), (Path::Clmul, Some(3))]), Path::Table);
        assert!(Path::set_best(Path::Clmul));
        assert_eq!(Hasher::new().path(), Path::Clmul);
    }
    assert!(Path::set_best(Path::Table));
    assert_eq!(Hasher::new().path(), Path::Table);
}

#[test]
fn names_round_trip() {
    for path in Path::ALL {
        assert_eq!(path.to_string().parse(), Ok(path));
    }
    assert_eq!("clmul".parse::<Path>(), Err(()));
}
