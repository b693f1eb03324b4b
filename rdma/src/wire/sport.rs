//! UDP source port selection for RoCE v2 (annex A17: the source port carries flow
//! entropy for ECMP and RSS and must stay fixed for a QP so its packets keep their
//! order). The choices below reproduce Linux rxe, so our frames look like its frames.
//!
//! Linux picks the port in two steps, and the captures show both:
//! - when a QP is created, from a multiplicative (golden ratio) hash of its own QPN.
//!   UD QPs keep this port: the UD capture's QPN 0x19 sends from 58149.
//! - when a connected QP (RC, UC) is given its path, from the path's IPv6 flow label,
//!   or, when that is 0 as for IPv4, from a label derived from both QPNs. The label is
//!   symmetric, so both ends of a connection send from the same port: the captures'
//!   QPN 0x11 <-> 0x11 sends from 49441 both ways, 0x12 from 49476, 0x13 from 49513.

/// Lowest port of the range RoCE v2 source ports use (the IANA dynamic range).
pub const SRC_PORT_MIN: u16 = 0xC000;

const PORT_BITS: u32 = 14;
const PORT_MASK: u32 = (1 << PORT_BITS) - 1;
const FLOW_LABEL_MASK: u32 = 0x000F_FFFF;

/// 2^32 divided by the golden ratio: multiplying by it spreads consecutive QPNs over
/// the whole 32-bit range, and the top bits are the hash.
const GOLDEN_RATIO_32: u32 = 0x61C8_8647;

/// The source port a QP gets at creation: the top 14 bits of `qpn * GOLDEN_RATIO_32`.
/// UD QPs send from it for their whole life.
pub const fn src_port_for_qpn(qpn: u32) -> u16 {
    let hash = qpn.wrapping_mul(GOLDEN_RATIO_32) >> (32 - PORT_BITS);
    SRC_PORT_MIN | (hash & PORT_MASK) as u16
}

/// A 20-bit flow label for a connection, the same whichever end computes it: the
/// product of the two QPNs with its upper bits folded into the low 20.
pub const fn flow_label_for_qpns(local_qpn: u32, remote_qpn: u32) -> u32 {
    let mut v = local_qpn as u64 * remote_qpn as u64;
    v ^= v >> 20;
    v ^= v >> 40;
    (v as u32) & FLOW_LABEL_MASK
}

/// The source port for a flow label: its low 14 bits, with the top 6 bits folded in.
pub const fn src_port_for_flow_label(flow_label: u32) -> u16 {
    let label = flow_label & FLOW_LABEL_MASK;
    let folded = (label & PORT_MASK) ^ (label >> PORT_BITS);
    SRC_PORT_MIN | folded as u16
}

/// The source port of a connected QP once its path is known: from the path's flow label,
/// or from both QPNs when the label is 0 (always the case for IPv4 paths).
pub const fn src_port_for_connection(flow_label: u32, local_qpn: u32, remote_qpn: u32) -> u16 {
    let label = if flow_label & FLOW_LABEL_MASK != 0 { flow_label } else { flow_label_for_qpns(local_qpn, remote_qpn) };
    src_port_for_flow_label(label)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn connected_qps_match_the_captures() {
        // Both guests created their QPs in the same order, so each RC pair has equal
        // QPNs; each capture shows one port, used in both directions.
        let captured = [
            (0x11, 49441),
            (0x12, 49476),
            (0x13, 49513),
            (0x14, 49552),
            (0x15, 49593),
            (0x16, 49636),
            (0x17, 49681),
            (0x18, 49728),
        ];
        for (qpn, port) in captured {
            assert_eq!(src_port_for_connection(0, qpn, qpn), port, "QPN {qpn:#x}");
        }
    }

    #[test]
    fn ud_qp_matches_the_capture() {
        assert_eq!(src_port_for_qpn(0x19), 58149);
    }

    #[test]
    fn the_creation_hash_is_not_what_connected_qps_send_from() {
        // The creation-time port of QPN 0x11 differs from what the RC capture shows:
        // connected QPs must use `src_port_for_connection`.
        assert_ne!(src_port_for_qpn(0x11), 49441);
    }

    #[test]
    fn symmetric_and_in_range() {
        for (a, b) in [(1, 2), (0x11, 0x99), (0xFF_FFFF, 0x12_3456), (0, 7)] {
            assert_eq!(src_port_for_connection(0, a, b), src_port_for_connection(0, b, a));
            assert!(src_port_for_connection(0, a, b) >= SRC_PORT_MIN);
            assert!(src_port_for_qpn(a) >= SRC_PORT_MIN);
        }
    }

    #[test]
    fn a_flow_label_wins_over_the_qpns() {
        let port = src_port_for_connection(0x12345, 1, 2);
        assert_eq!(port, src_port_for_flow_label(0x12345));
        // 0x12345: low 14 bits 0x2345, top 6 bits 0x4; 0x2345 ^ 0x4 = 0x2341.
        assert_eq!(port, 0xC000 | 0x2341);
    }
}
