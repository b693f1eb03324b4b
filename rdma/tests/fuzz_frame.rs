//! Fuzzing the whole-frame parser with proptest: it must never panic, and whatever it
//! accepts must re-emit into a frame that parses to the same thing.
//!
//! Three generators reach different depths: raw bytes (mostly stopped at Ethernet/IP),
//! mutated golden frames (every layer, mostly stopped by the ICRC), and random RoCE
//! bytes inside valid Ethernet/IP/UDP headers with a correct ICRC (the opcode table and
//! header checks). The case count of each is `FUZZ_CASES` (`make fuzz` gives 10
//! million), else `PROPTEST_CASES`, else 2048; a long run by hand:
//! `FUZZ_CASES=10000000 cargo test -p rdma --release --test fuzz_frame`.

mod common;

use proptest::prelude::*;
use rdma::wire::frame;
use rdma::wire::icrc;

fn cases() -> u32 {
    let var = |name| std::env::var(name).ok().and_then(|v: String| v.replace('_', "").parse().ok());
    var("FUZZ_CASES").or_else(|| var("PROPTEST_CASES")).unwrap_or(2048)
}

/// If `bytes` parse, the repr must emit and parse back to itself.
fn check_accepted_frames_reemit(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(rx) = frame::parse(bytes) {
        let mut out = vec![0u8; rx.repr.buffer_len()];
        let len = rx.repr.emit(&mut out);
        prop_assert_eq!(len, Ok(out.len()));
        let again = frame::parse(&out);
        prop_assert_eq!(again, Ok(rx));
    }
    Ok(())
}

fn golden() -> &'static [Vec<u8>] {
    static FRAMES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    FRAMES.get_or_init(|| common::all_frames().into_iter().map(|(_, _, f)| f).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn raw_bytes(bytes in prop::collection::vec(any::<u8>(), 0..1600)) {
        check_accepted_frames_reemit(&bytes)?;
    }

    #[test]
    fn mutated_golden_frames(
        pick in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..6),
        cut in prop::option::of(any::<prop::sample::Index>()),
        fix_icrc in any::<bool>(),
    ) {
        let frames = golden();
        let mut bytes = pick.get(frames).clone();
        for (at, xor) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= xor;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        // Re-sealing the ICRC lets header mutations reach the checks after it.
        if fix_icrc && bytes.len() > 14 + 4 {
            let end = bytes.len() - 4;
            if let Ok(crc) = icrc::compute(&bytes[14..end]) {
                bytes[end..].copy_from_slice(&crc.to_le_bytes());
            }
        }
        check_accepted_frames_reemit(&bytes)?;
    }

    #[test]
    fn random_roce_in_valid_envelopes(
        v6 in any::<bool>(),
        opcode in prop_oneof![
            prop::sample::select(rdma::wire::opcode_table::TABLE.map(|i| i.opcode.to_raw()).to_vec()),
            any::<u8>(),
        ],
        mut roce in prop::collection::vec(any::<u8>(), 0..200),
        flags in any::<u8>(),
        trailing in 0usize..8,
        aligned in prop::bool::weighted(0.75),
    ) {
        // Mostly whole words, as real packets are, so fewer cases stop at the pad check.
        if aligned {
            roce.truncate(roce.len() / 4 * 4);
        }
        if let Some(first) = roce.first_mut() {
            *first = opcode;
        }
        if let Some(second) = roce.get_mut(1) {
            // Mostly TVer 0, so the opcode checks are reached.
            *second = flags & 0xF0 | u8::from(flags & 0x0F == 0x0F);
        }
        let ip_len = if v6 { 40 } else { 20 };
        let udp_len = 8 + roce.len() + 4;
        let mut bytes = vec![0u8; 14 + ip_len + udp_len];
        bytes[..12].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
        let ethertype: [u8; 2] = if v6 { [0x86, 0xDD] } else { [0x08, 0x00] };
        bytes[12..14].copy_from_slice(&ethertype);
        let ip = &mut bytes[14..];
        if v6 {
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            ip[6] = 17;
            ip[7] = 64;
        } else {
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
            ip[6] = 0x40;
            ip[8] = 64;
            ip[9] = 17;
            let sum = rdma::wire::ip::checksum_sum(&ip[..20]);
            ip[10..12].copy_from_slice(&(!sum).to_be_bytes());
        }
        let udp = 14 + ip_len;
        bytes[udp..udp + 2].copy_from_slice(&0xC000u16.to_be_bytes());
        bytes[udp + 2..udp + 4].copy_from_slice(&4791u16.to_be_bytes());
        bytes[udp + 4..udp + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        bytes[udp + 8..udp + 8 + roce.len()].copy_from_slice(&roce);
        let end = bytes.len() - 4;
        // Fewer than 12 RoCE bytes hold no BTH, so there is no ICRC to compute.
        if let Ok(crc) = icrc::compute(&bytes[14..end]) {
            bytes[end..].copy_from_slice(&crc.to_le_bytes());
        }
        bytes.extend(std::iter::repeat_n(0, trailing));

        match frame::parse(&bytes) {
            // Only the RoCE layer can object: the envelope is valid.
            Err(reason) => prop_assert!(
                matches!(
                    reason,
                    frame::DropReason::Truncated
                        | frame::DropReason::BadTransportVersion
                        | frame::DropReason::UnknownOpcode
                        | frame::DropReason::HeaderMismatch
                        | frame::DropReason::BadPadding
                ),
                "{reason:?}"
            ),
            Ok(_) => check_accepted_frames_reemit(&bytes)?,
        }
    }
}
