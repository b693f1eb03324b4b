//! The Internet checksum (RFC 1071) and where a frame's checksums sit, for
//! the drivers' checksum offload: the transmit side finds the IPv4 header
//! and the TCP/UDP checksum field the NIC is to fill, and seeds that field
//! with the pseudo-header sum as the Intel devices expect (the transmit
//! chapters, §7.2, of the 82574 and 82576 datasheets: the device sums from
//! the start offset to the end and stores the complement, the pseudo-header
//! is the driver's).
//! Software fallbacks (a NIC without offload) and the fake devices' checks
//! use the same sums.
//!
//! Only untagged Ethernet II frames carrying IPv4 are laid out here: the
//! appliance sends no VLAN tags, and IPv6 has no header checksum.

const ETH_HEADER: usize = 14;
const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
/// Where the checksum sits in each L4 header.
const TCP_CSUM_AT: usize = 16;
const UDP_CSUM_AT: usize = 6;
/// The IPv4 header checksum's offset in the header.
const IPV4_CSUM_AT: usize = 10;

/// The one's-complement sum of `data` (big-endian 16-bit words, an odd
/// byte padded with zero) added to `sum`, folded to 16 bits.
pub fn add(sum: u16, data: &[u8]) -> u16 {
    let mut acc = u64::from(sum);
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [b] = words.remainder() {
        acc += u64::from(*b) << 8;
    }
    fold(acc)
}

fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// What a frame asks the NIC to compute on its way out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxChecksum {
    /// The IPv4 header checksum.
    pub ipv4: bool,
    /// The TCP or UDP checksum (over IPv4), whichever the header names.
    pub l4: bool,
}

impl TxChecksum {
    pub const NONE: TxChecksum = TxChecksum { ipv4: false, l4: false };

    pub fn any(self) -> bool {
        self.ipv4 || self.l4
    }
}

/// Which checksums a NIC computes on transmit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxOffload {
    pub ipv4: bool,
    /// TCP and UDP over IPv4.
    pub l4_v4: bool,
}

/// A frame's checksum geometry, in bytes from the frame's start: what the
/// 82574's context descriptor names (IPCSS/IPCSO/IPCSE, TUCSS/TUCSO) and
/// the 82576's carries as MACLEN/IPLEN and L4T.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The IPv4 header: its first byte and one past its last.
    pub ip_start: usize,
    pub ip_end: usize,
    /// The L4 header's first byte and its checksum field; `None` when the
    /// L4 checksum is not asked for.
    pub l4: Option<(usize, usize)>,
    pub tcp: bool,
}

impl Layout {
    /// Where the IPv4 header checksum goes.
    pub fn ip_csum_at(&self) -> usize {
        self.ip_start + IPV4_CSUM_AT
    }
}

/// The geometry of `frame` for `want`, and the frame readied for the NIC:
/// the IPv4 checksum zeroed, the L4 one seeded with the pseudo-header sum.
/// What cannot be done is left out: the L4 checksum of a fragment, of a
/// protocol other than TCP/UDP or of a header past `frame`'s end. `None`
/// (frame untouched) when nothing asked can be done: not an IPv4 frame,
/// too short, options past its length. `frame` needs only hold the
/// headers; the lengths come from the IPv4 header.
pub fn prepare(frame: &mut [u8], want: TxChecksum) -> Option<Layout> {
    let layout = layout(frame, want)?;
    if want.ipv4 {
        frame.get_mut(layout.ip_csum_at()..layout.ip_csum_at() + 2)?.fill(0);
    }
    if let Some((_, at)) = layout.l4 {
        let seed = pseudo_header(frame.get(layout.ip_start..layout.ip_end)?)?;
        frame.get_mut(at..at + 2)?.copy_from_slice(&seed.to_be_bytes());
    }
    Some(layout)
}

fn layout(frame: &[u8], want: TxChecksum) -> Option<Layout> {
    if frame.get(12..14)? != ETHERTYPE_IPV4 {
        return None;
    }
    let ip_start = ETH_HEADER;
    let vihl = *frame.get(ip_start)?;
    let ihl = usize::from(vihl & 0xf) * 4;
    if vihl >> 4 != 4 || ihl < 20 {
        return None;
    }
    let ip_end = ip_start + ihl;
    let header = frame.get(ip_start..ip_end)?;
    let fragment = u16::from_be_bytes([header[6], header[7]]) & 0x3fff != 0;
    let at = match header[9] {
        PROTO_TCP => Some(TCP_CSUM_AT),
        PROTO_UDP => Some(UDP_CSUM_AT),
        _ => None,
    };
    let l4 = at.filter(|&at| want.l4 && !fragment && frame.len() >= ip_end + at + 2).map(|at| (ip_end, ip_end + at));
    if !want.ipv4 && l4.is_none() {
        return None;
    }
    Some(Layout { ip_start, ip_end, l4, tcp: header[9] == PROTO_TCP })
}

/// The pseudo-header sum (not complemented) of an IPv4 header: addresses,
/// protocol and the L4 length its total length implies.
fn pseudo_header(header: &[u8]) -> Option<u16> {
    let total = usize::from(u16::from_be_bytes([*header.get(2)?, *header.get(3)?]));
    let l4_len = u16::try_from(total.checked_sub(header.len())?).ok()?;
    let sum = add(0, header.get(12..20)?);
    Some(add(sum, &[0, header[9], (l4_len >> 8) as u8, l4_len as u8]))
}

/// Computes what `want` asks in software, as the NIC would: for a driver
/// without the offload. A frame this cannot lay out is left as it is.
pub fn fill(frame: &mut [u8], want: TxChecksum) {
    let Some(layout) = prepare(frame, want) else { return };
    if want.ipv4 {
        let sum = !add(0, &frame[layout.ip_start..layout.ip_end]);
        frame[layout.ip_csum_at()..layout.ip_csum_at() + 2].copy_from_slice(&sum.to_be_bytes());
    }
    if let Some((start, at)) = layout.l4 {
        let end = l4_end(frame, &layout);
        let sum = finish_l4(!add(0, frame.get(start..end).unwrap_or(&[])), layout.tcp);
        frame[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    }
}

/// One past the L4 data: the IPv4 total length's end, within the frame.
fn l4_end(frame: &[u8], layout: &Layout) -> usize {
    let total = usize::from(u16::from_be_bytes([frame[layout.ip_start + 2], frame[layout.ip_start + 3]]));
    (layout.ip_start + total).min(frame.len())
}

/// A computed UDP checksum of zero goes out as 0xFFFF (zero means "none",
/// RFC 768); TCP's stays as computed.
pub fn finish_l4(sum: u16, tcp: bool) -> u16 {
    if sum == 0 && !tcp { 0xffff } else { sum }
}

/// Whether `frame`'s IPv4 header checksum is right; `None` when it is no
/// IPv4 frame (or too short to tell).
pub fn ipv4_header_ok(frame: &[u8]) -> Option<bool> {
    let layout = layout(frame, TxChecksum { ipv4: true, l4: false })?;
    Some(add(0, frame.get(layout.ip_start..layout.ip_end)?) == 0xffff)
}

/// Whether `frame`'s TCP/UDP checksum over IPv4 is right (a UDP checksum
/// of zero, "none", counts as right); `None` when it has none to check.
pub fn l4_ok(frame: &[u8]) -> Option<bool> {
    let layout = layout(frame, TxChecksum { ipv4: false, l4: true })?;
    let (start, at) = layout.l4?;
    if !layout.tcp && frame.get(at..at + 2)? == [0, 0] {
        return Some(true);
    }
    let seed = pseudo_header(frame.get(layout.ip_start..layout.ip_end)?)?;
    let end = l4_end(frame, &layout);
    Some(add(seed, frame.get(start..end)?) == 0xffff)
}

/// Fills the TCP or UDP checksum of an IPv6 frame whose next header is
/// TCP or UDP (no extension headers), in software: the NICs here offload
/// only IPv4's, and smoltcp's checksum switches do not tell the two apart.
/// Other frames are left as they are.
pub fn fill_ipv6_l4(frame: &mut [u8]) {
    const IPV6_HEADER: usize = 40;
    if frame.get(12..14) != Some(&ETHERTYPE_IPV6[..]) || frame.len() < ETH_HEADER + IPV6_HEADER {
        return;
    }
    let ip = ETH_HEADER;
    let (next, payload_len) = (frame[ip + 6], usize::from(u16::from_be_bytes([frame[ip + 4], frame[ip + 5]])));
    let (tcp, at) = match next {
        PROTO_TCP => (true, TCP_CSUM_AT),
        PROTO_UDP => (false, UDP_CSUM_AT),
        _ => return,
    };
    let start = ip + IPV6_HEADER;
    let end = (start + payload_len).min(frame.len());
    if end < start + at + 2 {
        return;
    }
    frame[start + at..start + at + 2].fill(0);
    let mut sum = add(0, &frame[ip + 8..ip + 40]);
    let len = payload_len as u32;
    sum = add(sum, &[(len >> 24) as u8, (len >> 16) as u8, (len >> 8) as u8, len as u8, 0, 0, 0, next]);
    let sum = finish_l4(!add(sum, &frame[start..end]), tcp);
    frame[start + at..start + at + 2].copy_from_slice(&sum.to_be_bytes());
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// An Ethernet + IPv4 + UDP (or TCP) frame with `payload`, checksums
    /// zero.
    pub fn ipv4_frame(proto: u8, payload: &[u8]) -> Vec<u8> {
        let l4_header = if proto == PROTO_TCP { 20 } else { 8 };
        let total = 20 + l4_header + payload.len();
        let mut f = Vec::new();
        f.extend_from_slice(&[0x52, 0x54, 0, 0, 0, 1, 0x52, 0x54, 0, 0, 0, 2, 0x08, 0x00]);
        f.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        let l4_len = l4_header + payload.len();
        if proto == PROTO_TCP {
            f.extend_from_slice(&[0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        } else {
            f.extend_from_slice(&[0x30, 0x39, 0x12, 0xb7, (l4_len >> 8) as u8, l4_len as u8, 0, 0]);
        }
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3's example words sum to 0xddf2.
        assert_eq!(add(0, &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0xddf2);
        assert_eq!(add(0, &[0xab]), 0xab00);
    }

    #[test]
    fn software_fill_makes_both_checksums_right() {
        for proto in [PROTO_UDP, PROTO_TCP] {
            for len in [0usize, 1, 17, 1400] {
                let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let mut f = ipv4_frame(proto, &payload);
                assert_eq!(ipv4_header_ok(&f), Some(false));
                fill(&mut f, TxChecksum { ipv4: true, l4: true });
                assert_eq!((ipv4_header_ok(&f), l4_ok(&f)), (Some(true), Some(true)), "{proto} {len}");
                let last = f.len() - 1;
                f[50.min(last)] ^= 1;
                assert_eq!(l4_ok(&f), Some(false), "a flipped bit shows");
            }
        }
    }

    #[test]
    fn ipv6_tcp_is_filled_in_software() {
        let payload = [0x11u8; 21];
        let mut f = alloc::vec![0x52, 0x54, 0, 0, 0, 1, 0x52, 0x54, 0, 0, 0, 2, 0x86, 0xdd];
        let plen = 20 + payload.len();
        f.extend_from_slice(&[0x60, 0, 0, 0, (plen >> 8) as u8, plen as u8, PROTO_TCP, 64]);
        f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&[0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        f.extend_from_slice(&payload);
        fill_ipv6_l4(&mut f);
        // The whole sum over pseudo-header and segment is 0xffff.
        let mut sum = add(0, &f[22..54]);
        sum = add(sum, &[0, 0, 0, plen as u8, 0, 0, 0, PROTO_TCP]);
        assert_eq!(add(sum, &f[54..]), 0xffff);
        assert_ne!(&f[70..72], &[0, 0]);
    }

    #[test]
    fn frames_it_cannot_lay_out_are_left_alone() {
        let mut arp = [0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(prepare(&mut arp, TxChecksum { ipv4: true, l4: true }), None);
        let mut icmp = ipv4_frame(1, &[0; 8]);
        assert_eq!(prepare(&mut icmp, TxChecksum { ipv4: false, l4: true }), None, "L4 of ICMP: not ours");
        let header_only = prepare(&mut icmp, TxChecksum { ipv4: true, l4: true }).map(|l| l.l4);
        assert_eq!(header_only, Some(None), "the IPv4 header still done");
        let mut frag = ipv4_frame(PROTO_UDP, &[0; 8]);
        frag[20] = 0x20; // more fragments
        assert_eq!(prepare(&mut frag, TxChecksum { ipv4: false, l4: true }), None);
        let mut short = ipv4_frame(PROTO_UDP, &[]);
        short[14] = 0x4f; // 60-byte header, past the frame
        assert_eq!(prepare(&mut short, TxChecksum { ipv4: true, l4: false }), None);
        assert_eq!(prepare(&mut [0u8; 10], TxChecksum { ipv4: true, l4: false }), None);
    }
}
