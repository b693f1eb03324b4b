//! Frame steering below smoltcp: which path a received Ethernet frame takes, and
//! the per-device counters `ip -s link` prints.
//!
//! Steering is a demultiplexer, not a validator: it reads the EtherType, the IP
//! protocol and the UDP destination port, and nothing else. RoCE v2 frames (UDP
//! to port 4791, over IPv4 or IPv6) go whole to the RDMA receive hook, because the
//! ICRC covers the IP header exactly as sent and smoltcp would rebuild it; there
//! `rdma::wire::frame::parse` checks every header once (IPv4 checksum, lengths,
//! ICRC) and counts what it refuses. ARP and IPv6 neighbour discovery (Neighbor
//! Solicitation and Advertisement, told apart by the ICMPv6 type) go to the
//! [`neigh`](crate::neigh) tables and to smoltcp, everything else IP to smoltcp,
//! which checks its own. What steering
//! drops itself, it drops because it cannot read those three fields (a runt, a
//! header cut short, a version that says the fields are elsewhere) or because the
//! frame is not for us, and it counts each in [`LinkStats`] by [`DropReason`].
//!
//! One check more, on ARP: its sender MAC must be the frame's source MAC. ARP
//! carries no checksum of its own, so a frame damaged after the FCS was
//! checked (a faulty switch, the soak's corrupting relay) or forged would
//! teach both neighbour caches a MAC nobody has, and every frame to that
//! neighbour would go nowhere until the entry aged out (30 s and more:
//! RC QPs run out of retries long before). Linux does not check; a sender
//! that answers for another station's MAC (some proxies) is refused here.
//! Neighbour discovery needs no such check: the ICMPv6 checksum covers it.
//!
//! The classifier reads bytes only through bounds-checked accessors, so no input
//! can make it panic (a proptest feeds it arbitrary bytes).

pub use vocab::{DropCounters, DropReason, ROCE_V2_UDP_PORT};

const ETH_HDR_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ARP_ETH_IPV4_LEN: usize = 28;
/// An ARP body's hardware type (Ethernet), protocol type (IPv4) and their
/// address lengths (RFC 826): the sender MAC follows, at bytes 8..14.
const ARP_ETH_IPV4: [u8; 6] = [0, 1, 8, 0, 6, 4];
const IPV4_MIN_HDR_LEN: usize = 20;
const IPV6_HDR_LEN: usize = 40;
/// The UDP destination port is bytes 2..4 of the UDP header.
const UDP_PORTS_LEN: usize = 4;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_ICMPV6: u8 = 58;
/// ICMPv6 Neighbor Solicitation and Neighbor Advertisement (RFC 4861 4.3, 4.4).
const ND_NEIGHBOR_SOLICIT: u8 = 135;
const ND_NEIGHBOR_ADVERT: u8 = 136;

/// Where a received frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steer {
    /// RoCE v2: the whole frame to the RDMA hook.
    Rdma,
    /// ARP: to the IPv4 neighbour table (and smoltcp).
    Arp,
    /// IPv6 neighbour solicitation or advertisement: to the IPv6 neighbour
    /// table (and smoltcp).
    Ndisc,
    /// Anything else IP: to smoltcp.
    Stack,
    /// Not readable as far as steering reads, or not for us.
    Drop(DropReason),
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Decides where a received frame goes. `our_mac` is the receiving device's
/// MAC: unicast frames for other MACs are dropped (the QEMU socket wire is a hub,
/// and virtio-net is promiscuous until told otherwise).
///
/// IPv4 fragments and IPv6 packets with extension headers go to smoltcp even if
/// they carry UDP to 4791: RoCE never fragments (it sets DF) and sends UDP right
/// after the fixed IPv6 header, and only the first fragment would show a port.
pub fn classify(frame: &[u8], our_mac: [u8; 6]) -> Steer {
    let (Some(dst), Some(ethertype)) = (frame.get(0..6), be16(frame, 12)) else {
        return Steer::Drop(DropReason::Runt);
    };
    let is_group = dst[0] & 1 != 0;
    if !is_group && dst != our_mac {
        return Steer::Drop(DropReason::OtherHost);
    }
    let payload = frame.get(ETH_HDR_LEN..).unwrap_or(&[]);
    match ethertype {
        ETHERTYPE_ARP if payload.len() < ARP_ETH_IPV4_LEN => Steer::Drop(DropReason::ArpTruncated),
        ETHERTYPE_ARP if payload.starts_with(&ARP_ETH_IPV4) && frame.get(6..12) != payload.get(8..14) => {
            Steer::Drop(DropReason::ArpSender)
        }
        ETHERTYPE_ARP => Steer::Arp,
        ETHERTYPE_IPV4 => classify_ipv4(payload),
        ETHERTYPE_IPV6 => classify_ipv6(payload),
        _ => Steer::Drop(DropReason::EtherType),
    }
}

/// The protocol is at a fixed offset, the UDP header after `IHL` words: reading
/// them needs the version to be 4, the fixed header and an IHL that covers it.
fn classify_ipv4(p: &[u8]) -> Steer {
    let Some(&vihl) = p.first().filter(|_| p.len() >= IPV4_MIN_HDR_LEN) else {
        return Steer::Drop(DropReason::Truncated);
    };
    if vihl >> 4 != 4 {
        return Steer::Drop(DropReason::BadIpVersion);
    }
    let ihl = usize::from(vihl & 0x0f) * 4;
    if ihl < IPV4_MIN_HDR_LEN {
        return Steer::Drop(DropReason::BadLength);
    }
    let proto = p.get(9).copied().unwrap_or(0);
    let frag = be16(p, 6).unwrap_or(0);
    let is_fragment = frag & 0x2000 != 0 || frag & 0x1fff != 0;
    if proto != IPPROTO_UDP || is_fragment {
        return Steer::Stack;
    }
    classify_udp(p.get(ihl..).unwrap_or(&[]))
}

fn classify_ipv6(p: &[u8]) -> Steer {
    let Some(&v) = p.first().filter(|_| p.len() >= IPV6_HDR_LEN) else {
        return Steer::Drop(DropReason::Truncated);
    };
    if v >> 4 != 6 {
        return Steer::Drop(DropReason::BadIpVersion);
    }
    match p.get(6) {
        Some(&IPPROTO_UDP) => {}
        Some(&IPPROTO_ICMPV6) if matches!(p.get(IPV6_HDR_LEN), Some(&(ND_NEIGHBOR_SOLICIT | ND_NEIGHBOR_ADVERT))) => {
            return Steer::Ndisc;
        }
        _ => return Steer::Stack,
    }
    classify_udp(p.get(IPV6_HDR_LEN..).unwrap_or(&[]))
}

/// `l4` is what follows the IP header in the frame.
fn classify_udp(l4: &[u8]) -> Steer {
    if l4.len() < UDP_PORTS_LEN {
        return Steer::Drop(DropReason::Truncated);
    }
    if be16(l4, 2) == Some(ROCE_V2_UDP_PORT) { Steer::Rdma } else { Steer::Stack }
}

/// A device's counters, named and grouped as `ip -s link` prints them
/// (`struct rtnl_link_stats64`), plus where received frames went and why they
/// were dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames too short to be Ethernet (Linux's `rx_length_errors` part of it).
    pub rx_errors: u64,
    /// Well-sized frames steering dropped (every other [`DropReason`] it uses).
    pub rx_dropped: u64,
    /// Frames the device lost for lack of buffers, reported by the driver.
    pub rx_missed: u64,
    /// Multicast and broadcast frames received.
    pub rx_multicast: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    /// Frames the driver dropped because its queue was full.
    pub tx_dropped: u64,
    pub tx_carrier_errors: u64,
    pub collisions: u64,
    /// Frames handed to the RDMA hook.
    pub rx_rdma: u64,
    /// ARP frames handed to the neighbour table.
    pub rx_arp: u64,
    /// Neighbour discovery frames handed to the IPv6 neighbour table.
    pub rx_ndisc: u64,
    /// Frames handed to smoltcp.
    pub rx_stack: u64,
    drops: DropCounters,
}

impl LinkStats {
    /// Counts a received frame and where [`classify`] sent it.
    pub fn record_rx(&mut self, frame: &[u8], steer: Steer) {
        self.rx_packets += 1;
        self.rx_bytes += frame.len() as u64;
        if frame.first().is_some_and(|b| b & 1 != 0) && steer != Steer::Drop(DropReason::Runt) {
            self.rx_multicast += 1;
        }
        match steer {
            Steer::Rdma => self.rx_rdma += 1,
            Steer::Arp => self.rx_arp += 1,
            Steer::Ndisc => self.rx_ndisc += 1,
            Steer::Stack => self.rx_stack += 1,
            Steer::Drop(r) => {
                if r == DropReason::Runt {
                    self.rx_errors += 1;
                } else {
                    self.rx_dropped += 1;
                }
                self.drops.record(r);
            }
        }
    }

    /// Counts a transmitted frame of `len` bytes.
    pub fn record_tx(&mut self, len: usize) {
        self.tx_packets += 1;
        self.tx_bytes += len as u64;
    }

    /// Frames dropped for `reason`.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops.get(reason)
    }

    /// The drop reasons that counted anything, in counter order.
    pub fn nonzero_drops(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        self.drops.nonzero()
    }
}

/// Classifies a received frame and counts it: what the driver's RX path calls.
pub fn steer(frame: &[u8], our_mac: [u8; 6], stats: &mut LinkStats) -> Steer {
    let s = classify(frame, our_mac);
    stats.record_rx(frame, s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    const OURS: [u8; 6] = [0x52, 0x54, 0, 0, 0, 1];
    const PEER: [u8; 6] = [0x52, 0x54, 0, 0, 0, 2];

    fn eth(dst: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst);
        f.extend_from_slice(&PEER);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn udp(dport: u16, body: &[u8]) -> Vec<u8> {
        let mut u = Vec::new();
        u.extend_from_slice(&49152u16.to_be_bytes());
        u.extend_from_slice(&dport.to_be_bytes());
        u.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(body);
        u
    }

    fn ipv4(proto: u8, l4: &[u8]) -> Vec<u8> {
        let total = (20 + l4.len()) as u16;
        let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
        h[2..4].copy_from_slice(&total.to_be_bytes());
        let mut sum: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        h.extend_from_slice(l4);
        h
    }

    fn ipv6(next: u8, l4: &[u8]) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0];
        h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        h.extend_from_slice(&[next, 64]);
        h.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        h.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        h.extend_from_slice(l4);
        h
    }

    fn roce_v4() -> Vec<u8> {
        eth(OURS, ETHERTYPE_IPV4, &ipv4(IPPROTO_UDP, &udp(ROCE_V2_UDP_PORT, &[0; 16])))
    }

    #[test]
    fn roce_over_ipv4_and_ipv6_goes_to_rdma() {
        assert_eq!(classify(&roce_v4(), OURS), Steer::Rdma);
        let f = eth(OURS, ETHERTYPE_IPV6, &ipv6(IPPROTO_UDP, &udp(ROCE_V2_UDP_PORT, &[0; 16])));
        assert_eq!(classify(&f, OURS), Steer::Rdma);
        // Ethernet padding after the IP packet is fine.
        let mut padded = eth(OURS, ETHERTYPE_IPV4, &ipv4(IPPROTO_UDP, &udp(ROCE_V2_UDP_PORT, &[])));
        padded.resize(60, 0);
        assert_eq!(classify(&padded, OURS), Steer::Rdma);
    }

    #[test]
    fn other_traffic_goes_to_the_stack() {
        let other_port = eth(OURS, ETHERTYPE_IPV4, &ipv4(IPPROTO_UDP, &udp(53, &[1, 2, 3])));
        assert_eq!(classify(&other_port, OURS), Steer::Stack);
        let icmp = eth([0xff; 6], ETHERTYPE_IPV4, &ipv4(1, &[8, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(classify(&icmp, OURS), Steer::Stack);
        let icmp6 = eth([0x33, 0x33, 0, 0, 0, 1], ETHERTYPE_IPV6, &ipv6(58, &[0; 8]));
        assert_eq!(classify(&icmp6, OURS), Steer::Stack);
        // A RoCE port behind an IPv6 extension header, or in a fragment, is smoltcp's.
        let hbh = eth(OURS, ETHERTYPE_IPV6, &ipv6(0, &udp(ROCE_V2_UDP_PORT, &[])));
        assert_eq!(classify(&hbh, OURS), Steer::Stack);
        let mut frag = roce_v4();
        frag[14 + 6] |= 0x20; // MF
        assert_eq!(classify(&frag, OURS), Steer::Stack);
    }

    #[test]
    fn neighbour_discovery_is_recognised() {
        let ns = eth([0x33, 0x33, 0xff, 0, 0, 1], ETHERTYPE_IPV6, &ipv6(58, &[135, 0, 0, 0]));
        assert_eq!(classify(&ns, OURS), Steer::Ndisc);
        let na = eth(OURS, ETHERTYPE_IPV6, &ipv6(58, &[136, 0, 0, 0]));
        assert_eq!(classify(&na, OURS), Steer::Ndisc);
        // Echo and router messages are smoltcp's alone.
        let echo = eth(OURS, ETHERTYPE_IPV6, &ipv6(58, &[128, 0, 0, 0]));
        assert_eq!(classify(&echo, OURS), Steer::Stack);
        let ra = eth(OURS, ETHERTYPE_IPV6, &ipv6(58, &[134, 0, 0, 0]));
        assert_eq!(classify(&ra, OURS), Steer::Stack);
    }

    /// An Ethernet/IPv4 ARP body from `sha`.
    fn arp_body(sha: [u8; 6]) -> Vec<u8> {
        [&ARP_ETH_IPV4[..], &[0, 2], &sha, &[10, 0, 0, 2], &OURS, &[10, 0, 0, 1]].concat()
    }

    #[test]
    fn arp_is_recognised() {
        assert_eq!(classify(&eth([0xff; 6], ETHERTYPE_ARP, &arp_body(PEER)), OURS), Steer::Arp);
        assert_eq!(classify(&eth(OURS, ETHERTYPE_ARP, &arp_body(PEER)), OURS), Steer::Arp);
        assert_eq!(classify(&eth([0xff; 6], ETHERTYPE_ARP, &[0; 27]), OURS), Steer::Drop(DropReason::ArpTruncated));
        // Not Ethernet/IPv4: the table refuses it, steering does not read on.
        assert_eq!(classify(&eth([0xff; 6], ETHERTYPE_ARP, &[0; 28]), OURS), Steer::Arp);
    }

    /// The soak's outage: for about 30 s A sent B's frames to a MAC nobody
    /// has (B counted 1,105 for another host), as an ARP frame whose sender
    /// MAC had a bit flipped on the wire makes it do. Every such flip is caught.
    #[test]
    fn arp_whose_sender_is_not_the_frames_source_is_dropped() {
        for byte in 0..6 {
            for bit in 0..8 {
                let mut sha = PEER;
                sha[byte] ^= 1 << bit;
                let f = eth(OURS, ETHERTYPE_ARP, &arp_body(sha));
                assert_eq!(classify(&f, OURS), Steer::Drop(DropReason::ArpSender), "byte {byte} bit {bit}");
            }
        }
        let mut stats = LinkStats::default();
        steer(&eth([0xff; 6], ETHERTYPE_ARP, &arp_body([2, 0, 0, 0, 0, 9])), OURS, &mut stats);
        assert_eq!((stats.rx_arp, stats.rx_dropped, stats.drops(DropReason::ArpSender)), (0, 1, 1));
    }

    #[test]
    fn malformed_frames_are_dropped_with_a_reason() {
        use DropReason::*;
        let d = |f: &[u8]| match classify(f, OURS) {
            Steer::Drop(r) => Some(r),
            _ => None,
        };
        assert_eq!(d(&[]), Some(Runt));
        assert_eq!(d(&[0; 13]), Some(Runt));
        assert_eq!(d(&eth(PEER, ETHERTYPE_IPV4, &[])), Some(OtherHost));
        assert_eq!(d(&eth(OURS, 0x8100, &[0; 50])), Some(EtherType));
        assert_eq!(d(&eth(OURS, 0x0040, &[0; 50])), Some(EtherType));
        assert_eq!(d(&eth(OURS, ETHERTYPE_IPV4, &[0x45; 19])), Some(Truncated));

        let good = roce_v4();
        let with = |at: usize, v: u8| {
            let mut f = good.clone();
            f[14 + at] = v;
            d(&f)
        };
        assert_eq!(with(0, 0x65), Some(BadIpVersion));
        assert_eq!(with(0, 0x44), Some(BadLength)); // IHL under 5 words
        assert_eq!(with(0, 0x4f), Some(Truncated)); // UDP would start past the end

        let short_udp = eth(OURS, ETHERTYPE_IPV4, &ipv4(IPPROTO_UDP, &[0; 3]));
        assert_eq!(d(&short_udp), Some(Truncated));

        assert_eq!(d(&eth(OURS, ETHERTYPE_IPV6, &[0x60; 39])), Some(Truncated));
        let mut v6 = eth(OURS, ETHERTYPE_IPV6, &ipv6(IPPROTO_UDP, &udp(ROCE_V2_UDP_PORT, &[])));
        v6[14] = 0x40;
        assert_eq!(d(&v6), Some(BadIpVersion));
    }

    /// What only the RoCE parser can judge (lengths, the IPv4 checksum, the UDP
    /// length) is not steering's business: such frames still go to the RDMA path,
    /// which checks them once and counts what it drops.
    #[test]
    fn validation_is_left_to_the_parser() {
        let good = roce_v4();
        let with = |at: usize, v: u8| {
            let mut f = good.clone();
            f[14 + at] = v;
            classify(&f, OURS)
        };
        assert_eq!(with(3, 19), Steer::Rdma); // total < header
        assert_eq!(with(2, 0x10), Steer::Rdma); // total > frame
        assert_eq!(with(11, good[14 + 11] ^ 1), Steer::Rdma); // checksum
        assert_eq!(with(20 + 5, 7), Steer::Rdma); // UDP length 7
        let mut v6 = eth(OURS, ETHERTYPE_IPV6, &ipv6(IPPROTO_UDP, &udp(ROCE_V2_UDP_PORT, &[])));
        v6[14 + 5] += 1; // payload length past the frame
        assert_eq!(classify(&v6, OURS), Steer::Rdma);
    }

    #[test]
    fn counters_follow_the_verdicts() {
        let mut s = LinkStats::default();
        assert_eq!(steer(&roce_v4(), OURS, &mut s), Steer::Rdma);
        steer(&eth([0xff; 6], ETHERTYPE_ARP, &[0; 28]), OURS, &mut s);
        steer(&[1; 5], OURS, &mut s);
        steer(&eth(OURS, 0x9000, &[]), OURS, &mut s);
        steer(&eth(OURS, 0x9000, &[]), OURS, &mut s);
        s.record_tx(60);
        assert_eq!((s.rx_packets, s.rx_rdma, s.rx_arp, s.rx_stack), (5, 1, 1, 0));
        assert_eq!((s.rx_errors, s.rx_dropped, s.rx_multicast), (1, 2, 1));
        assert_eq!(s.rx_bytes, roce_v4().len() as u64 + 42 + 5 + 28);
        assert_eq!((s.tx_packets, s.tx_bytes), (1, 60));
        assert_eq!(s.drops(DropReason::EtherType), 2);
        let nz: Vec<_> = s.nonzero_drops().collect();
        assert_eq!(nz, [(DropReason::Runt, 1), (DropReason::EtherType, 2)]);
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(frame in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut s = LinkStats::default();
            let _ = steer(&frame, OURS, &mut s);
            prop_assert_eq!(s.rx_packets, 1);
        }

        #[test]
        fn never_panics_on_mangled_roce(at in 0usize..80, v in any::<u8>(), cut in 0usize..80) {
            let mut f = roce_v4();
            if let Some(b) = f.get_mut(at) {
                *b = v;
            }
            f.truncate(cut);
            let _ = classify(&f, OURS);
        }
    }
}
