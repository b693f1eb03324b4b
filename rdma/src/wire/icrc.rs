//! The invariant CRC (IBA vol. 1 7.8, as RoCE v2 annex A17 applies it to IP/UDP): a
//! CRC-32 over the parts of a packet that no router may change, appended little-endian.
//!
//! The CRC runs over 8 bytes of ones (standing in for the InfiniBand LRH), then the IP
//! header with its variable fields set to ones (IPv4: TOS, TTL, header checksum; IPv6:
//! traffic class, flow label, hop limit), the UDP header with its checksum set to ones,
//! the BTH with its FECN/BECN/reserved byte set to ones, then everything else up to the
//! ICRC. The result is the standard (zlib) CRC-32 of that byte string, computed by the
//! `crc` crate: PCLMULQDQ folding where the CPU has it, else a table.

pub use crc::{Hasher, Path, choose_cheaper, clmul_from, time_crossover, time_paths};

use super::{Error, Result, bth, ipv4, ipv6, udp};

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// The bytes of ones that open the covered string, for the LRH.
const ONES_LEN: usize = 8;

/// Most bytes the masked prefix can span: the ones and the longest headers.
const MAX_MASKED: usize = ONES_LEN + MAX_HEADERS;

/// Computes the ICRC of `packet`, which runs from the first byte of the IP header to the
/// last byte before the ICRC (pad included).
///
/// Fails if the IP version is neither 4 nor 6, or the packet is too short to hold the IP
/// header (IHL as given for IPv4), a UDP header and a BTH.
pub fn compute(packet: &[u8]) -> Result<u32> {
    compute_on(Path::best(), packet)
}

/// [`compute`] on a chosen CRC path, to compare them; fails also if this CPU lacks it.
pub fn compute_on(path: Path, packet: &[u8]) -> Result<u32> {
    compute_parts_on(path, packet, &[])
}

/// The ICRC of a packet held in two pieces, as a scatter-gather frame is: `head` from
/// the first byte of the IP header, holding at least the IP, UDP and BTH headers, then
/// `tail` up to the last byte before the ICRC. Equal to [`compute`] of the two joined.
pub fn compute_parts(head: &[u8], tail: &[u8]) -> Result<u32> {
    compute_parts_on(Path::best(), head, tail)
}

fn compute_parts_on(path: Path, head: &[u8], tail: &[u8]) -> Result<u32> {
    let mut hasher = start_on(path, head)?;
    hasher.update(tail);
    Ok(hasher.finalize())
}

/// The ICRC of a packet so far: a hasher that has taken `head` (from the first
/// byte of the IP header, holding at least the IP, UDP and BTH headers) with
/// its variant fields masked. Whoever builds the rest of the packet adds each
/// later byte to it in order, wherever the byte lies (a TX buffer, registered
/// memory), and ends with `finalize`: the value [`compute`] gives for the
/// whole packet.
pub fn start(head: &[u8]) -> Result<Hasher> {
    start_on(Path::best(), head)
}

/// [`start`] on a chosen CRC path; fails also if this CPU lacks it.
pub fn start_on(path: Path, head: &[u8]) -> Result<Hasher> {
    // The ones and the masked headers in one string: over IPv4 it is 48 bytes, three
    // whole blocks for the PCLMULQDQ path, which would leave 8 of 40 to its table.
    let mut masked = [0xFFu8; MAX_MASKED];
    let headers_len = mask_headers(head, &mut masked[ONES_LEN..])?;
    let rest = head.get(headers_len..).ok_or(Error)?;
    let mut hasher = Hasher::with_path(0, path).ok_or(Error)?;
    hasher.update(&masked[..ONES_LEN + headers_len]);
    hasher.update(rest);
    Ok(hasher)
}

/// Checks the ICRC of `packet`, which runs from the first byte of the IP header through
/// the ICRC.
pub fn verify(packet: &[u8]) -> bool {
    let Some(split) = packet.len().checked_sub(ICRC_LEN) else {
        return false;
    };
    let (covered, trailer) = packet.split_at(split);
    match compute(covered) {
        Ok(crc) => trailer == crc.to_le_bytes(),
        Err(Error) => false,
    }
}

/// Copies the IP, UDP and BTH headers of `packet` into `out` with the variant fields
/// set to ones, and returns how many bytes it copied.
fn mask_headers(packet: &[u8], out: &mut [u8]) -> Result<usize> {
    const V4: usize = ipv4::HEADER_LEN + udp::HEADER_LEN + bth::HEADER_LEN;
    const V6: usize = ipv6::HEADER_LEN + udp::HEADER_LEN + bth::HEADER_LEN;
    let first = *packet.first().ok_or(Error)?;
    match (first >> 4, usize::from(first & 0x0F) * 4) {
        (4, ipv4::HEADER_LEN) => or_mask::<V4>(packet, out, &V4_MASK),
        (4, ip_len) if ip_len > ipv4::HEADER_LEN => {
            let mask = variant_mask(ip_len, false);
            let masked_len = ip_len + udp::HEADER_LEN + bth::HEADER_LEN;
            let headers = packet.get(..masked_len).ok_or(Error)?;
            let out = out.get_mut(..masked_len).ok_or(Error)?;
            for ((out, byte), ones) in out.iter_mut().zip(headers).zip(mask) {
                *out = byte | ones;
            }
            Ok(masked_len)
        }
        (6, _) => or_mask::<V6>(packet, out, &V6_MASK),
        _ => Err(Error),
    }
}

/// The first `N` bytes of `packet` OR `mask` into `out`, a word at a time: byte by
/// byte, the compiler knows the mask and copies each run of unmasked bytes apart
/// (some thirty moves for an IPv4 frame's 40 bytes).
fn or_mask<const N: usize>(packet: &[u8], out: &mut [u8], mask: &[u8; MAX_HEADERS]) -> Result<usize> {
    let headers: &[u8; N] = packet.get(..N).and_then(|h| h.try_into().ok()).ok_or(Error)?;
    let out: &mut [u8; N] = out.get_mut(..N).and_then(|o| o.try_into().ok()).ok_or(Error)?;
    for ((out, bytes), ones) in out.chunks_mut(8).zip(headers.chunks(8)).zip(mask.chunks(8)) {
        match (<[u8; 8]>::try_from(bytes), <[u8; 8]>::try_from(ones)) {
            (Ok(bytes), Ok(ones)) => {
                out.copy_from_slice(&(u64::from_ne_bytes(bytes) | u64::from_ne_bytes(ones)).to_ne_bytes())
            }
            _ => out.iter_mut().zip(bytes.iter().zip(ones)).for_each(|(out, (byte, ones))| *out = byte | ones),
        }
    }
    Ok(N)
}

/// Most bytes of headers the ICRC masks: an IPv4 header with all its options, UDP, BTH.
const MAX_HEADERS: usize = ipv4::MAX_HEADER_LEN + udp::HEADER_LEN + bth::HEADER_LEN;

/// The masks OR-ed over the common headers: a word per packet instead of a
/// store per masked field.
const V4_MASK: [u8; MAX_HEADERS] = variant_mask(ipv4::HEADER_LEN, false);
const V6_MASK: [u8; MAX_HEADERS] = variant_mask(ipv6::HEADER_LEN, true);

/// Ones over the variant fields of an IP header of `ip_len` bytes (IPv6 if `v6`)
/// and the UDP header and BTH after it, zeros elsewhere.
const fn variant_mask(ip_len: usize, v6: bool) -> [u8; MAX_HEADERS] {
    let mut mask = [0u8; MAX_HEADERS];
    if v6 {
        // The version nibble stays; traffic class and flow label fill the rest of the
        // first word.
        mask[0] = 0x0F;
        mask[1] = 0xFF;
        mask[2] = 0xFF;
        mask[3] = 0xFF;
        mask[ipv6::HOP_LIMIT_OFFSET] = 0xFF;
    } else {
        let mut i = 0;
        while i < ipv4::ICRC_MASKED.len() {
            mask[ipv4::ICRC_MASKED[i]] = 0xFF;
            i += 1;
        }
    }
    mask[ip_len + udp::CHECKSUM_OFFSET] = 0xFF;
    mask[ip_len + udp::CHECKSUM_OFFSET + 1] = 0xFF;
    mask[ip_len + udp::HEADER_LEN + bth::VARIANT_BYTE] = 0xFF;
    mask
}

#[cfg(test)]
mod test {
    use super::*;
    // An independent CRC-32 for the expected values.
    use crc32fast::Hasher;

    // The first rc_send_small frame from its IP header on: SEND ONLY of 64 x 0x7b.
    fn send_only() -> [u8; 108] {
        let mut p = [0x7bu8; 108];
        let head: [u8; 40] = [
            0x45, 0x00, 0x00, 0x6c, 0xe9, 0x9c, 0x40, 0x00, 0x40, 0x11, 0x3c, 0xe2, 0x0a, 0x00, 0x00, 0x02, 0x0a, 0x00,
            0x00, 0x01, 0xc1, 0x21, 0x12, 0xb7, 0x00, 0x58, 0x00, 0x00, 0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11,
            0x80, 0x80, 0x54, 0x5a,
        ];
        p[..40].copy_from_slice(&head);
        p[104..].copy_from_slice(&[0x09, 0xd0, 0x85, 0x86]);
        p
    }

    #[test]
    fn captured_frame_verifies() {
        let p = send_only();
        assert_eq!(compute(&p[..104]), Ok(0x8685_d009));
        assert!(verify(&p));
    }

    #[test]
    fn a_packet_in_two_pieces_has_the_same_icrc() {
        let p = send_only();
        // Cut anywhere after the BTH (IPv4 20 + UDP 8 + BTH 12 = 40 bytes).
        for cut in 40..=104 {
            assert_eq!(compute_parts(&p[..cut], &p[cut..104]), Ok(0x8685_d009), "cut at {cut}");
        }
        assert_eq!(compute_parts(&p[..39], &p[39..104]), Err(Error), "the BTH must be in the head");
    }

    #[test]
    fn a_started_packet_continued_anywhere_has_the_same_icrc() {
        let p = send_only();
        for cut in 40..=104 {
            let mut h = start(&p[..cut]).expect("headers in the head");
            // The rest in two pieces, as a payload split over memory runs.
            let mid = cut + (104 - cut) / 3;
            h.update(&p[cut..mid]);
            h.update(&p[mid..104]);
            assert_eq!(h.finalize(), 0x8685_d009, "cut at {cut}");
        }
        assert!(start(&p[..39]).is_err());
    }

    #[test]
    fn both_crc_paths_agree() {
        let p = send_only();
        let mut long = [0x5Au8; 40 + 4096];
        long[..40].copy_from_slice(&p[..40]);
        for path in Path::ALL {
            if path.available() {
                assert_eq!(compute_on(path, &p[..104]), Ok(0x8685_d009), "{path}");
                assert_eq!(compute_on(path, &long), compute_on(Path::Table, &long), "{path}");
            } else {
                assert_eq!(compute_on(path, &p[..104]), Err(Error), "{path}");
            }
        }
    }

    #[test]
    fn equals_plain_crc32_of_the_masked_string() {
        let p = send_only();
        let mut s = [0u8; 8 + 104];
        s[..8].fill(0xFF);
        s[8..].copy_from_slice(&p[..104]);
        for at in [8 + 1, 8 + 8, 8 + 10, 8 + 11, 8 + 26, 8 + 27, 8 + 32] {
            s[at] = 0xFF;
        }
        let mut h = Hasher::new();
        h.update(&s);
        assert_eq!(compute(&p[..104]), Ok(h.finalize()));
    }

    /// IPv4 with options (IHL 6 and 15): the options are covered, the UDP and BTH
    /// masks move with them.
    #[test]
    fn ipv4_options_are_covered_and_shift_the_masks() {
        let p = send_only();
        for options in [4usize, 40] {
            let mut q = std::vec![0u8; 104 + options];
            q[..20].copy_from_slice(&p[..20]);
            q[0] = 0x45 + (options / 4) as u8;
            for (i, b) in q[20..20 + options].iter_mut().enumerate() {
                *b = 0x30 + i as u8;
            }
            q[20 + options..].copy_from_slice(&p[20..104]);
            let mut s = std::vec![0xFFu8; 8];
            s.extend_from_slice(&q);
            let u = 8 + 20 + options;
            for at in [8 + 1, 8 + 8, 8 + 10, 8 + 11, u + 6, u + 7, u + 8 + 4] {
                s[at] = 0xFF;
            }
            let mut h = Hasher::new();
            h.update(&s);
            assert_eq!(compute(&q), Ok(h.finalize()), "{options} bytes of options");
        }
        let mut short = p;
        short[0] = 0x44;
        assert_eq!(compute(&short[..104]), Err(Error), "IHL under 5");
    }

    #[test]
    fn masked_fields_do_not_count() {
        let mut p = send_only();
        p[1] = 0xB8; // DSCP 46
        p[8] = 1; // TTL
        p[10] ^= 0x55; // IP checksum
        p[26] = 0x12; // UDP checksum
        p[32] = 0xC0; // FECN, BECN
        assert!(verify(&p));
        p[4] ^= 1; // IP ID is covered
        assert!(!verify(&p));
    }

    /// An IPv6 packet: IPv6 header, UDP, BTH, 8 bytes of payload.
    fn ipv6_packet() -> [u8; 68] {
        let mut p = [0x3Cu8; 68];
        p[0..4].copy_from_slice(&[0x6B, 0xA1, 0x23, 0x45]); // TC 0xBA, flow label 0x12345
        p[4..6].copy_from_slice(&28u16.to_be_bytes());
        p[6] = 17;
        p[7] = 64;
        p[40..48].copy_from_slice(&[0xC1, 0x21, 0x12, 0xB7, 0x00, 0x1C, 0x00, 0x00]);
        p[48..60].copy_from_slice(&[0x04, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x80, 0, 0, 1]);
        p
    }

    #[test]
    fn ipv6_masks_traffic_class_flow_label_and_hop_limit() {
        let p = ipv6_packet();
        let mut s = [0xFFu8; 8 + 64];
        s[8..].copy_from_slice(&p[..64]);
        s[8] = 0x6F; // version kept, traffic class high nibble masked
        s[9..12].fill(0xFF);
        s[8 + 7] = 0xFF;
        s[8 + 46..8 + 48].fill(0xFF);
        s[8 + 52] = 0xFF;
        let mut h = Hasher::new();
        h.update(&s);
        let expected = h.finalize();
        assert_eq!(compute(&p[..64]), Ok(expected));

        let mut q = p;
        q[0] = 0x60;
        q[1..4].copy_from_slice(&[0, 0, 0]);
        q[7] = 1;
        q[46] = 0xAB;
        assert_eq!(compute(&q[..64]), Ok(expected), "variant fields");
        for (at, xor) in [(0, 0x10), (4, 1), (6, 1), (8, 1), (39, 0x80), (41, 1), (48, 1), (63, 1)] {
            let mut q = p;
            q[at] ^= xor;
            assert_ne!(compute(&q[..64]), Ok(expected), "byte {at}");
        }
    }

    #[test]
    fn short_or_foreign_input_fails_cleanly() {
        let p = send_only();
        assert_eq!(compute(&p[..39]), Err(Error));
        assert_eq!(compute(&[]), Err(Error));
        assert!(!verify(&p[..3]));
        let mut q = p;
        q[0] = 0x55;
        assert_eq!(compute(&q), Err(Error));
        q[0] = 0x44;
        assert_eq!(compute(&q), Err(Error));
    }
}
