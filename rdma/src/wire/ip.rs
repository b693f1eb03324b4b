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
    let mut sum: u32 = 0;
    let mut words = data.chunks_exact(2);
    for word in &mut words {
        sum += u32::from(u16::from_be_bytes([word[0], word[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod test {
    use super::*;

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
