//! What IPv4 and IPv6 share for RoCE v2: the traffic class byte split into DSCP and ECN
//! (RFC 2474, RFC 3168), the UDP protocol number, and the Internet checksum (RFC 1071).

/// Protocol / next-header number of UDP.
pub const PROTOCOL_UDP: u8 = 17;

/// The two ECN bits of the traffic class (RFC 3168). RoCE congestion control marks CE on
/// the way and answers CE with a CNP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// Not ECN-capable transport.
    #[default]
    NotEct = 0b00,
    /// ECN-capable transport, codepoint 1.
    Ect1 = 0b01,
    /// ECN-capable transport, codepoint 0.
    Ect0 = 0b10,
    /// Congestion experienced.
    Ce = 0b11,
}

impl Ecn {
    /// Decodes the low two bits of `bits`.
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    pub const fn to_bits(self) -> u8 {
        self as u8
    }
}

/// Splits a traffic class byte (IPv4 TOS, IPv6 traffic class) into DSCP and ECN.
pub const fn split_traffic_class(byte: u8) -> (u8, Ecn) {
    (byte >> 2, Ecn::from_bits(byte))
}

/// Joins DSCP (low 6 bits used) and ECN into a traffic class byte.
pub const fn traffic_class(dscp: u8, ecn: Ecn) -> u8 {
    ((dscp & 0x3F) << 2) | ecn.to_bits()
}

/// The ones'-complement sum of `data` as 16-bit big-endian words, folded to 16 bits and
/// not yet inverted. An odd trailing byte counts as its word's high byte.
pub fn checksum_sum(data: &[u8]) -> u16 {
    // The ones'-complement sum does not depend on byte order (RFC 1071 2(B)): add
    // 32-bit little-endian words and swap the folded result once, rather than turn
    // every 16-bit word around. Every frame sent and received sums an IPv4 header.
    let mut sum: u64 = 0;
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        sum += u64::from(u32::from_le_bytes([word[0], word[1], word[2], word[3]]));
    }
    // The last 1..3 bytes padded with zeros: an odd byte is then its word's low
    // byte here, the high byte once swapped.
    let mut tail = [0u8; 4];
    let rest = words.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    sum += u64::from(u32::from_le_bytes(tail));
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    (sum as u16).swap_bytes()
}

#[cfg(test)]
mod test {
    use super::*;

    /// The definition: 16-bit big-endian words, an odd last byte as a high byte.
    fn plain_sum(data: &[u8]) -> u16 {
        let mut sum: u64 = data.chunks(2).map(|w| u64::from(w[0]) << 8 | u64::from(*w.get(1).unwrap_or(&0))).sum();
        while sum > 0xFFFF {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn checksum_sum_is_the_sum_of_big_endian_words() {
        let bytes: alloc::vec::Vec<u8> = (0..300u32).map(|i| (i * 97 + i / 3) as u8).collect();
        for len in 0..bytes.len() {
            assert_eq!(checksum_sum(&bytes[..len]), plain_sum(&bytes[..len]), "{len} bytes");
        }
        // Carries that wrap more than once.
        for len in 0..40 {
            assert_eq!(checksum_sum(&[0xFF; 40][..len]), plain_sum(&[0xFF; 40][..len]), "{len} x 0xFF");
        }
        // RFC 1071's example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        assert_eq!(checksum_sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0xddf2);
    }

    #[test]
    fn ecn_round_trips() {
        for bits in 0..4 {
            assert_eq!(Ecn::from_bits(bits).to_bits(), bits);
        }
    }

    #[test]
    fn traffic_class_split() {
        assert_eq!(traffic_class(46, Ecn::Ect0), 0xBA);
        assert_eq!(split_traffic_class(0xBA), (46, Ecn::Ect0));
        assert_eq!(split_traffic_class(0x03), (0, Ecn::Ce));
    }

    #[test]
    fn rfc1071_example() {
        // The worked example of RFC 1071 section 3.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum_sum(&data), 0xddf2);
        assert_eq!(checksum_sum(&[0xAB]), 0xAB00);
    }
}
