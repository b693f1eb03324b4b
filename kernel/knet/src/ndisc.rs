//! IPv6 neighbour discovery (RFC 4861) for the IPv6 neighbour table: what a
//! received Neighbor Solicitation or Advertisement teaches [`NdTable`], and the
//! solicitations (and, when asked to, advertisements) it sends. The state
//! machine is [`neigh`](crate::neigh)'s, as Linux's `nd_tbl` shares
//! `neighbour.c` with ARP.
//!
//! Linux's `ndisc_recv_ns` / `ndisc_recv_na` rules:
//! - a message with a hop limit other than 255 came through a router and is
//!   refused (RFC 4861 7.1.1), as is one whose ICMPv6 checksum or code is wrong,
//!   or whose target is multicast;
//! - a solicitation for one of our addresses teaches its sender (its source
//!   link-layer option, as STALE); one from the unspecified address is duplicate
//!   address detection and teaches nothing;
//! - an advertisement only updates an entry we have (`accept_untracked_na=0`):
//!   Solicited makes it REACHABLE, otherwise STALE; without Override a different
//!   MAC is not taken, and a REACHABLE entry becomes STALE instead.
//!
//! Solicitations go to the target's solicited-node group (`ff02::1:ffXX:XXXX`,
//! MAC `33:33:ff:XX:XX:XX`) and, when an old MAC is probed, to the target itself.

use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv6Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress as SmolMac, EthernetFrame, EthernetProtocol, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv6Packet,
    Ipv6Repr, NdiscNeighborFlags, NdiscRepr, RawHardwareAddress,
};
use vocab::time::Instant;
use vocab::{Ipv6Cidr, MacAddr, NetdevInfo};

use crate::addr::is_link_local;
use crate::neigh::{Family, NdTable, NeighInput, NeighState, Tx};

const ETH_HEADER_LEN: usize = 14;
const IPV6_HEADER_LEN: usize = 40;
/// An NS or NA with one link-layer address option: 4 + 4 + 16 + 8 bytes.
const ND_LEN: usize = 32;
/// An Ethernet NS or NA frame with its link-layer address option.
pub const ND_FRAME_LEN: usize = ETH_HEADER_LEN + IPV6_HEADER_LEN + ND_LEN;
/// What neighbour discovery messages carry as hop limit, and must arrive with.
const ND_HOP_LIMIT: u8 = 255;

/// IPv6 over neighbour discovery, for [`NeighTable`](crate::neigh::NeighTable).
#[derive(Clone, Copy, Debug)]
pub struct Nd;

/// The solicited-node multicast group of `a` (RFC 4291 2.7.1).
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00 | u16::from(o[13]), u16::from_be_bytes([o[14], o[15]]))
}

/// The Ethernet group an IPv6 multicast address maps to (RFC 2464 7).
pub fn multicast_mac(a: Ipv6Addr) -> MacAddr {
    let o = a.octets();
    MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

impl Family for Nd {
    type Addr = Ipv6Addr;
    type Cidr = Ipv6Cidr;
    const FRAME_LEN: usize = ND_FRAME_LEN;

    fn locals(dev: &NetdevInfo) -> Vec<Ipv6Cidr> {
        dev.ipv6.clone()
    }

    fn address(c: &Ipv6Cidr) -> Ipv6Addr {
        c.address()
    }

    /// An address of the target's scope, on its prefix if we have one (the
    /// part of RFC 6724's source selection that matters on one link).
    fn source_for(local: &[Ipv6Cidr], target: Ipv6Addr) -> Option<Ipv6Addr> {
        let scope = |c: &&Ipv6Cidr| is_link_local(c.address()) == is_link_local(target);
        local
            .iter()
            .filter(scope)
            .find(|c| c.contains_addr(&target))
            .or_else(|| local.iter().find(scope))
            .or(local.first())
            .map(|c| c.address())
    }

    fn emit(buf: &mut [u8], mac: MacAddr, tx: &Tx<Ipv6Addr>) -> usize {
        let lladdr = Some(RawHardwareAddress::from_bytes(&mac.0));
        let (eth_dst, src, dst, nd) = match *tx {
            Tx::Request { dst_mac: Some(m), src, target } => {
                (m, src, target, NdiscRepr::NeighborSolicit { target_addr: target, lladdr })
            }
            Tx::Request { dst_mac: None, src, target } => {
                let group = solicited_node(target);
                (multicast_mac(group), src, group, NdiscRepr::NeighborSolicit { target_addr: target, lladdr })
            }
            Tx::Reply { to_mac, to, from } => {
                let flags = NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE;
                (to_mac, from, to, NdiscRepr::NeighborAdvert { flags, target_addr: from, lladdr })
            }
        };
        let icmp = Icmpv6Repr::Ndisc(nd);
        let len = ETH_HEADER_LEN + IPV6_HEADER_LEN + icmp.buffer_len();
        let mut eth = EthernetFrame::new_unchecked(&mut buf[..len]);
        eth.set_dst_addr(SmolMac(eth_dst.0));
        eth.set_src_addr(SmolMac(mac.0));
        eth.set_ethertype(EthernetProtocol::Ipv6);
        let ip = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Icmpv6,
            payload_len: icmp.buffer_len(),
            hop_limit: ND_HOP_LIMIT,
        };
        let mut packet = Ipv6Packet::new_unchecked(eth.payload_mut());
        ip.emit(&mut packet);
        icmp.emit(&src, &dst, &mut Icmpv6Packet::new_unchecked(packet.payload_mut()), &ChecksumCapabilities::default());
        len
    }
}

/// Why a frame given to [`NdTable::process_ndisc`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NdError {
    /// Not an Ethernet frame carrying IPv6 ICMPv6, or cut short.
    Malformed,
    /// Fails RFC 4861's validity checks (hop limit, checksum, code, target,
    /// options).
    Invalid,
    /// The link-layer address it gives is multicast or our own.
    BadSender,
}

impl fmt::Display for NdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NdError::Malformed => "malformed neighbour discovery frame",
            NdError::Invalid => "invalid neighbour discovery message",
            NdError::BadSender => "neighbour discovery from a multicast or our own MAC",
        })
    }
}

impl NdTable {
    /// Handles a received Ethernet frame carrying ICMPv6; what is not a
    /// solicitation or advertisement is ignored.
    pub fn process_ndisc(&mut self, frame: &[u8], now: Instant) -> Result<NeighInput, NdError> {
        let eth = EthernetFrame::new_checked(frame).map_err(|_| NdError::Malformed)?;
        if eth.ethertype() != EthernetProtocol::Ipv6 {
            return Err(NdError::Malformed);
        }
        let ip = Ipv6Packet::new_checked(eth.payload()).map_err(|_| NdError::Malformed)?;
        let ip_repr = Ipv6Repr::parse(&ip).map_err(|_| NdError::Malformed)?;
        if ip_repr.next_header != IpProtocol::Icmpv6 {
            return Err(NdError::Malformed);
        }
        let icmp = Icmpv6Packet::new_checked(ip.payload()).map_err(|_| NdError::Malformed)?;
        let (src, dst) = (ip_repr.src_addr, ip_repr.dst_addr);
        let Ok(Icmpv6Repr::Ndisc(nd)) = Icmpv6Repr::parse(&src, &dst, &icmp, &ChecksumCapabilities::default()) else {
            // A bad checksum, or ICMPv6 that is not neighbour discovery.
            return Ok(NeighInput::Ignored);
        };
        if ip_repr.hop_limit != ND_HOP_LIMIT || icmp.msg_code() != 0 {
            return Err(NdError::Invalid);
        }
        match nd {
            NdiscRepr::NeighborSolicit { target_addr, lladdr } => {
                let lladdr = self.check_lladdr(lladdr)?;
                self.on_solicit(src, target_addr, lladdr, MacAddr(eth.src_addr().0), now)
            }
            NdiscRepr::NeighborAdvert { flags, target_addr, lladdr } => {
                if dst.is_multicast() && flags.contains(NdiscNeighborFlags::SOLICITED) {
                    return Err(NdError::Invalid);
                }
                let lladdr = self.check_lladdr(lladdr)?;
                Ok(self.on_advert(flags, target_addr, lladdr, now))
            }
            _ => Ok(NeighInput::Ignored),
        }
    }

    /// The MAC of a link-layer address option, if it is a usable one.
    fn check_lladdr(&self, lladdr: Option<RawHardwareAddress>) -> Result<Option<MacAddr>, NdError> {
        let Some(raw) = lladdr else { return Ok(None) };
        let bytes: [u8; 6] = raw.as_bytes().try_into().map_err(|_| NdError::Invalid)?;
        let mac = MacAddr(bytes);
        if !mac.is_unicast() || mac == self.mac() {
            return Err(NdError::BadSender);
        }
        Ok(Some(mac))
    }

    fn on_solicit(
        &mut self,
        src: Ipv6Addr,
        target: Ipv6Addr,
        lladdr: Option<MacAddr>,
        eth_src: MacAddr,
        now: Instant,
    ) -> Result<NeighInput, NdError> {
        if target.is_multicast() {
            return Err(NdError::Invalid);
        }
        if src.is_unspecified() {
            // Duplicate address detection: must carry no link-layer address,
            // and teaches nothing. Nothing to answer either, as we defend no
            // address (no DAD here).
            return if lladdr.is_some() { Err(NdError::Invalid) } else { Ok(NeighInput::Ignored) };
        }
        if !self.is_local(target) {
            return Ok(NeighInput::Ignored);
        }
        if let Some(mac) = lladdr {
            self.learn(src, mac, NeighState::Stale, now, true);
        }
        if self.config().answer_requests {
            // A unicast solicitation may leave the option out; its frame says who sent it.
            self.queue_reply(Tx::Reply { to_mac: lladdr.unwrap_or(eth_src), to: src, from: target });
            return Ok(NeighInput::ReplyQueued);
        }
        Ok(if lladdr.is_some() { NeighInput::Updated } else { NeighInput::Ignored })
    }

    fn on_advert(
        &mut self,
        flags: NdiscNeighborFlags,
        target: Ipv6Addr,
        lladdr: Option<MacAddr>,
        now: Instant,
    ) -> NeighInput {
        if target.is_multicast() || self.is_local(target) {
            return NeighInput::Ignored;
        }
        let solicited = flags.contains(NdiscNeighborFlags::SOLICITED);
        let Some(e) = self.entry(target) else {
            // Solicited by the stack we share the device with (see ARP's
            // replies): the host asked, so the host learns it.
            return match lladdr {
                Some(mac) if solicited && !self.config().answer_requests => {
                    self.learn(target, mac, NeighState::Reachable, now, true);
                    NeighInput::Updated
                }
                _ => NeighInput::Ignored,
            };
        };
        let (old_mac, old_state) = (e.mac, e.state);
        // Without the option the entry's own MAC is confirmed, if it has one.
        let Some(mac) = lladdr.or(old_mac) else { return NeighInput::Ignored };
        let state = if solicited { NeighState::Reachable } else { NeighState::Stale };
        let valid = !matches!(old_state, NeighState::Incomplete | NeighState::Failed);
        if valid && old_mac != Some(mac) && !flags.contains(NdiscNeighborFlags::OVERRIDE) {
            self.suspect(target, now);
            return NeighInput::Updated;
        }
        self.learn(target, mac, state, now, false);
        NeighInput::Updated
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::neigh::{NeighConfig, NeighView, Resolution};
    use crate::netdev::IfName;
    use alloc::vec;

    const OURS: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 1]);
    const PEER: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 2]);
    const OTHER: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 3]);

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }
    fn my_ll() -> Ipv6Addr {
        ip("fe80::5054:ff:fe00:1")
    }
    fn peer_ll() -> Ipv6Addr {
        ip("fe80::5054:ff:fe00:2")
    }

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    fn table_with(cfg: NeighConfig) -> NdTable {
        let mut n = NdTable::new(2, IfName::try_from("eth0").unwrap(), OURS, cfg);
        n.set_local_addrs(&[Ipv6Cidr::new(my_ll(), 64), Ipv6Cidr::new(ip("2001:db8::1"), 64)]);
        n
    }

    fn table() -> NdTable {
        table_with(NeighConfig { answer_requests: false, ..NeighConfig::default() })
    }

    /// A frame as a peer would build it: the message, then bytes to patch.
    fn frame(eth_dst: MacAddr, src: Ipv6Addr, dst: Ipv6Addr, nd: NdiscRepr, hop_limit: u8) -> Vec<u8> {
        let icmp = Icmpv6Repr::Ndisc(nd);
        let mut buf = vec![0u8; ETH_HEADER_LEN + IPV6_HEADER_LEN + icmp.buffer_len()];
        let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.set_dst_addr(SmolMac(eth_dst.0));
        eth.set_src_addr(SmolMac(PEER.0));
        eth.set_ethertype(EthernetProtocol::Ipv6);
        let repr = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Icmpv6,
            payload_len: icmp.buffer_len(),
            hop_limit,
        };
        let mut p = Ipv6Packet::new_unchecked(eth.payload_mut());
        repr.emit(&mut p);
        icmp.emit(&src, &dst, &mut Icmpv6Packet::new_unchecked(p.payload_mut()), &ChecksumCapabilities::default());
        buf
    }

    fn ll(mac: MacAddr) -> Option<RawHardwareAddress> {
        Some(RawHardwareAddress::from_bytes(&mac.0))
    }

    fn na(flags: NdiscNeighborFlags, mac: Option<MacAddr>) -> Vec<u8> {
        let nd = NdiscRepr::NeighborAdvert { flags, target_addr: peer_ll(), lladdr: mac.and_then(ll) };
        frame(OURS, peer_ll(), my_ll(), nd, 255)
    }

    /// The next frame sent, parsed: (eth dst, ip src, ip dst, message).
    fn sent(n: &mut NdTable, now: Instant) -> Option<(MacAddr, Ipv6Addr, Ipv6Addr, NdiscRepr<'static>)> {
        let mut buf = [0u8; 128];
        let len = n.poll_transmit(now, &mut buf).unwrap()?;
        assert_eq!(len, ND_FRAME_LEN);
        let eth = EthernetFrame::new_checked(&buf[..len]).unwrap();
        assert_eq!(eth.src_addr().0, OURS.0);
        let p = Ipv6Packet::new_checked(eth.payload()).unwrap();
        let r = Ipv6Repr::parse(&p).unwrap();
        assert_eq!(r.hop_limit, 255);
        let icmp = Icmpv6Packet::new_checked(p.payload()).unwrap();
        let caps = ChecksumCapabilities::default();
        let Icmpv6Repr::Ndisc(nd) = Icmpv6Repr::parse(&r.src_addr, &r.dst_addr, &icmp, &caps).unwrap() else {
            panic!("not ND")
        };
        // Owned copy: the message holds no borrowed data for NS/NA.
        let nd = match nd {
            NdiscRepr::NeighborSolicit { target_addr, lladdr } => NdiscRepr::NeighborSolicit { target_addr, lladdr },
            NdiscRepr::NeighborAdvert { flags, target_addr, lladdr } => {
                NdiscRepr::NeighborAdvert { flags, target_addr, lladdr }
            }
            _ => panic!("not NS/NA"),
        };
        Some((MacAddr(eth.dst_addr().0), r.src_addr, r.dst_addr, nd))
    }

    #[test]
    fn solicited_node_group_and_mac() {
        let g = solicited_node(ip("2001:db8::12:3456"));
        assert_eq!(g, ip("ff02::1:ff12:3456"));
        assert_eq!(multicast_mac(g), MacAddr([0x33, 0x33, 0xff, 0x12, 0x34, 0x56]));
    }

    #[test]
    fn resolve_by_solicitation_and_advertisement() {
        let mut n = table();
        assert_eq!(n.lookup_or_request(peer_ll(), t(0)), Resolution::Pending);
        let (dst_mac, src, dst, nd) = sent(&mut n, t(0)).unwrap();
        assert_eq!(dst_mac, MacAddr([0x33, 0x33, 0xff, 0x00, 0x00, 0x02]));
        assert_eq!((src, dst), (my_ll(), ip("ff02::1:ff00:2")));
        assert_eq!(nd, NdiscRepr::NeighborSolicit { target_addr: peer_ll(), lladdr: ll(OURS) });
        assert_eq!(sent(&mut n, t(1)), None, "one solicitation per retrans_time");
        let flags = NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE;
        assert_eq!(n.process_ndisc(&na(flags, Some(PEER)), t(5)), Ok(NeighInput::Updated));
        assert_eq!(n.take_completion(), Some((peer_ll(), Resolution::Known(PEER))));
        assert_eq!(n.lookup_or_request(peer_ll(), t(6)), Resolution::Known(PEER));
        assert_eq!(
            n.entries().next().unwrap(),
            NeighView { ip: peer_ll(), mac: Some(PEER), state: NeighState::Reachable }
        );
    }

    #[test]
    fn a_global_target_is_asked_from_a_global_address() {
        let mut n = table();
        n.lookup_or_request(ip("2001:db8::2"), t(0));
        let (_, src, dst, _) = sent(&mut n, t(0)).unwrap();
        assert_eq!((src, dst), (ip("2001:db8::1"), ip("ff02::1:ff00:2")));
    }

    #[test]
    fn retransmits_then_fails() {
        let mut n = table();
        n.lookup_or_request(peer_ll(), t(0));
        assert!(sent(&mut n, t(0)).is_some());
        assert!(sent(&mut n, t(1000)).is_some());
        assert!(sent(&mut n, t(2000)).is_some());
        assert!(sent(&mut n, t(2999)).is_none());
        assert_eq!(n.lookup_or_request(peer_ll(), t(3000)), Resolution::Failed);
        assert_eq!(n.take_completion(), Some((peer_ll(), Resolution::Failed)));
    }

    #[test]
    fn a_solicitation_for_us_teaches_its_sender_and_is_answered_when_asked() {
        let ns = NdiscRepr::NeighborSolicit { target_addr: my_ll(), lladdr: ll(PEER) };
        let ns = frame(MacAddr([0x33, 0x33, 0xff, 0, 0, 1]), peer_ll(), ip("ff02::1:ff00:1"), ns, 255);
        let mut quiet = table();
        assert_eq!(quiet.process_ndisc(&ns, t(0)), Ok(NeighInput::Updated));
        assert_eq!(sent(&mut quiet, t(0)), None, "smoltcp answers on the appliance");
        assert_eq!(
            quiet.entries().next().unwrap(),
            NeighView { ip: peer_ll(), mac: Some(PEER), state: NeighState::Stale }
        );
        let mut n = table_with(NeighConfig::default());
        assert_eq!(n.process_ndisc(&ns, t(0)), Ok(NeighInput::ReplyQueued));
        let flags = NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE;
        assert_eq!(
            sent(&mut n, t(0)),
            Some((
                PEER,
                my_ll(),
                peer_ll(),
                NdiscRepr::NeighborAdvert { flags, target_addr: my_ll(), lladdr: ll(OURS) }
            ))
        );
        // Using the STALE entry answers at once and probes the old MAC directly.
        assert_eq!(n.lookup_or_request(peer_ll(), t(10)), Resolution::Known(PEER));
        let (dst_mac, _, dst, _) = sent(&mut n, t(10)).unwrap();
        assert_eq!((dst_mac, dst), (PEER, peer_ll()));
    }

    #[test]
    fn override_rules() {
        let mut n = table();
        n.lookup_or_request(peer_ll(), t(0));
        n.process_ndisc(&na(NdiscNeighborFlags::SOLICITED, Some(PEER)), t(1)).unwrap();
        assert_eq!(n.peek(peer_ll()), Some(PEER));
        // No Override, another MAC: not taken, REACHABLE becomes STALE.
        n.process_ndisc(&na(NdiscNeighborFlags::empty(), Some(OTHER)), t(2)).unwrap();
        assert_eq!(n.entries().next().unwrap(), NeighView { ip: peer_ll(), mac: Some(PEER), state: NeighState::Stale });
        // Override: taken, STALE as it was unsolicited.
        n.process_ndisc(&na(NdiscNeighborFlags::OVERRIDE, Some(OTHER)), t(3)).unwrap();
        assert_eq!(
            n.entries().next().unwrap(),
            NeighView { ip: peer_ll(), mac: Some(OTHER), state: NeighState::Stale }
        );
        // Solicited without the option confirms the MAC we have.
        n.process_ndisc(&na(NdiscNeighborFlags::SOLICITED, None), t(4)).unwrap();
        assert_eq!(
            n.entries().next().unwrap(),
            NeighView { ip: peer_ll(), mac: Some(OTHER), state: NeighState::Reachable }
        );
    }

    #[test]
    fn refuses_and_ignores() {
        // The only stack on its device did not ask for this advertisement
        // of an unknown neighbour: nothing learnt.
        let mut n = table_with(NeighConfig::default());
        let flags = NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE;
        assert_eq!(n.process_ndisc(&na(flags, Some(PEER)), t(0)), Ok(NeighInput::Ignored));
        assert_eq!(n.entries().count(), 0);
        // Sharing the device with smoltcp, a solicited one was smoltcp's
        // question: learnt; an unsolicited one still is not.
        let mut shared = table();
        assert_eq!(shared.process_ndisc(&na(NdiscNeighborFlags::OVERRIDE, Some(PEER)), t(0)), Ok(NeighInput::Ignored));
        assert_eq!(shared.entries().count(), 0);
        assert_eq!(shared.process_ndisc(&na(flags, Some(PEER)), t(0)), Ok(NeighInput::Updated));
        assert_eq!(
            shared.entries().next().unwrap(),
            NeighView { ip: peer_ll(), mac: Some(PEER), state: NeighState::Reachable }
        );
        n.lookup_or_request(peer_ll(), t(0));
        // Through a router (hop limit 254).
        let nd = NdiscRepr::NeighborAdvert { flags, target_addr: peer_ll(), lladdr: ll(PEER) };
        assert_eq!(n.process_ndisc(&frame(OURS, peer_ll(), my_ll(), nd, 254), t(0)), Err(NdError::Invalid));
        // Solicited to a multicast group.
        let all_nodes = ip("ff02::1");
        let nd = NdiscRepr::NeighborAdvert { flags, target_addr: peer_ll(), lladdr: ll(PEER) };
        let to_group = frame(MacAddr([0x33, 0x33, 0, 0, 0, 1]), peer_ll(), all_nodes, nd, 255);
        assert_eq!(n.process_ndisc(&to_group, t(0)), Err(NdError::Invalid));
        // Our own MAC, a multicast MAC.
        assert_eq!(n.process_ndisc(&na(flags, Some(OURS)), t(0)), Err(NdError::BadSender));
        assert_eq!(n.process_ndisc(&na(flags, Some(MacAddr::BROADCAST)), t(0)), Err(NdError::BadSender));
        // A corrupted checksum is not neighbour discovery.
        let mut bad = na(flags, Some(PEER));
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(n.process_ndisc(&bad, t(0)), Ok(NeighInput::Ignored));
        assert_eq!(n.take_completion(), None, "still pending");
        // DAD probes teach nothing; junk is refused.
        let dad = NdiscRepr::NeighborSolicit { target_addr: my_ll(), lladdr: None };
        let dad = frame(MacAddr([0x33, 0x33, 0xff, 0, 0, 1]), Ipv6Addr::UNSPECIFIED, ip("ff02::1:ff00:1"), dad, 255);
        assert_eq!(n.process_ndisc(&dad, t(0)), Ok(NeighInput::Ignored));
        assert_eq!(n.process_ndisc(&[0; 10], t(0)), Err(NdError::Malformed));
        assert_eq!(n.process_ndisc(&bad[..60], t(0)), Err(NdError::Malformed));
        let mut buf = [0u8; ND_FRAME_LEN - 1];
        assert!(n.poll_transmit(t(0), &mut buf).is_err());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_frames_never_panic(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120), ms in 0u64..100_000) {
            let mut n = table_with(NeighConfig::default());
            n.lookup_or_request(peer_ll(), t(0));
            let mut f = na(NdiscNeighborFlags::SOLICITED, Some(PEER));
            f.truncate(14);
            f.extend_from_slice(&body);
            let _ = n.process_ndisc(&f, t(ms));
            let _ = n.process_ndisc(&body, t(ms));
            let mut buf = [0u8; 128];
            while let Ok(Some(_)) = n.poll_transmit(t(ms), &mut buf) {}
            let _ = n.lookup_or_request(peer_ll(), t(ms));
        }
    }
}
