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
        }
    }
}

/// The only test here that changes the process-wide best path.
#[test]
fn timing_covers_the_available_paths_and_choice_sets_best() {
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
