//! ARP (RFC 826) for the IPv4 neighbour table: what a received ARP frame teaches
//! [`ArpTable`], and the requests and replies it sends. The state machine is
//! [`neigh`](crate::neigh)'s.
//!
//! Linux's `arp_process` rules with `arp_accept=0`: a request for one of our
//! addresses is answered and teaches its sender (as STALE, `neigh_event_ns`), a
//! reply addressed to us makes an entry REACHABLE, and other ARP only updates
//! entries we already have.

use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv4Addr;

use smoltcp::wire::{ArpOperation, ArpPacket, ArpRepr, EthernetAddress as SmolMac, EthernetFrame, EthernetProtocol};
use vocab::time::Instant;
use vocab::{Ipv4Cidr, MacAddr, NetdevInfo};

use crate::neigh::{ArpTable, Family, NeighInput, NeighState, Tx};

/// An Ethernet ARP frame without padding: 14 bytes of Ethernet, 28 of ARP.
pub const ARP_FRAME_LEN: usize = 42;

/// IPv4 over ARP, for [`NeighTable`](crate::neigh::NeighTable).
#[derive(Clone, Copy, Debug)]
pub struct Arp;

impl Family for Arp {
    type Addr = Ipv4Addr;
    type Cidr = Ipv4Cidr;
    const FRAME_LEN: usize = ARP_FRAME_LEN;

    fn locals(dev: &NetdevInfo) -> Vec<Ipv4Cidr> {
        dev.ipv4.clone()
    }

    fn address(c: &Ipv4Cidr) -> Ipv4Addr {
        c.address()
    }

    /// One on the target's subnet, else the first.
    fn source_for(local: &[Ipv4Cidr], target: Ipv4Addr) -> Option<Ipv4Addr> {
        local.iter().find(|c| c.contains_addr(&target)).or(local.first()).map(|c| c.address())
    }

    /// An ARP announcement (RFC 5227 3): a broadcast request for our own
    /// address, from it.
    fn announcement(addr: Ipv4Addr) -> Option<Tx<Ipv4Addr>> {
        Some(Tx::Request { dst_mac: None, src: addr, target: addr })
    }

    fn emit(buf: &mut [u8], mac: MacAddr, tx: &Tx<Ipv4Addr>) -> usize {
        let (operation, eth_dst, tha, spa, tpa) = match *tx {
            Tx::Request { dst_mac, src, target } => {
                (ArpOperation::Request, dst_mac.unwrap_or(MacAddr::BROADCAST), MacAddr([0; 6]), src, target)
            }
            Tx::Reply { to_mac, to, from } => (ArpOperation::Reply, to_mac, to_mac, from, to),
        };
        let mut eth = EthernetFrame::new_unchecked(&mut buf[..ARP_FRAME_LEN]);
        eth.set_dst_addr(SmolMac(eth_dst.0));
        eth.set_src_addr(SmolMac(mac.0));
        eth.set_ethertype(EthernetProtocol::Arp);
        let repr = ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: SmolMac(mac.0),
            source_protocol_addr: spa,
            target_hardware_addr: SmolMac(tha.0),
            target_protocol_addr: tpa,
        };
        repr.emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
        ARP_FRAME_LEN
    }
}

/// Why a frame given to [`ArpTable::process_arp`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArpError {
    /// Not an Ethernet frame carrying ARP, or cut short.
    Malformed,
    /// ARP for something other than Ethernet and IPv4.
    Unsupported,
    /// The sender MAC is multicast or our own (a loop, or a spoof).
    BadSender,
}

impl fmt::Display for ArpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArpError::Malformed => "malformed ARP frame",
            ArpError::Unsupported => "ARP for other than Ethernet/IPv4",
            ArpError::BadSender => "ARP from a multicast or our own MAC",
        })
    }
}

impl ArpTable {
    /// Handles a received Ethernet frame that [`steer`](crate::steer) called ARP.
    pub fn process_arp(&mut self, frame: &[u8], now: Instant) -> Result<NeighInput, ArpError> {
        let eth = EthernetFrame::new_checked(frame).map_err(|_| ArpError::Malformed)?;
        if eth.ethertype() != EthernetProtocol::Arp {
            return Err(ArpError::Malformed);
        }
        let to_us = MacAddr(eth.dst_addr().0) == self.mac();
        let pkt = ArpPacket::new_checked(eth.payload()).map_err(|_| ArpError::Malformed)?;
        let Ok(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_protocol_addr: tpa,
            ..
        }) = ArpRepr::parse(&pkt)
        else {
            return Err(ArpError::Unsupported);
        };
        let sha = MacAddr(sha.0);
        if !sha.is_unicast() || sha == self.mac() {
            return Err(ArpError::BadSender);
        }
        let answer = self.config().answer_requests;
        if operation == ArpOperation::Request && self.is_local(tpa) {
            // An RFC 5227 probe (sender 0.0.0.0) gets its answer but teaches us nothing.
            if answer {
                self.queue_reply(Tx::Reply { to_mac: sha, to: spa, from: tpa });
            }
            if !spa.is_unspecified() && !spa.is_multicast() && !spa.is_broadcast() {
                self.learn(spa, sha, NeighState::Stale, now, true);
            }
            return Ok(if answer { NeighInput::ReplyQueued } else { NeighInput::Updated });
        }
        let solicited = operation == ArpOperation::Reply && to_us;
        let state = if solicited { NeighState::Reachable } else { NeighState::Stale };
        // A reply to us for our address that we did not ask for was asked
        // for by the stack we share the device with (smoltcp's `ping`): the
        // host asked, so the host learns it, as Linux's one table would.
        let create = solicited && !answer && self.is_local(tpa);
        if self.learn(spa, sha, state, now, create) { Ok(NeighInput::Updated) } else { Ok(NeighInput::Ignored) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::parse_ipv4_cidr;
    use crate::neigh::{BufferTooSmall, NeighConfig, NeighView, Resolution};
    use crate::netdev::IfName;
    use alloc::vec;

    const OURS: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 1]);
    const PEER: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 2]);
    const MY_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    fn table() -> ArpTable {
        let mut n = ArpTable::new(2, IfName::try_from("eth0").unwrap(), OURS, NeighConfig::default());
        n.set_local_addrs(&[parse_ipv4_cidr("10.0.0.1/24").unwrap()]);
        n
    }

    /// An ARP frame as a peer would send it.
    fn arp(op: ArpOperation, eth_dst: MacAddr, sha: MacAddr, spa: Ipv4Addr, tpa: Ipv4Addr) -> Vec<u8> {
        let mut buf = vec![0u8; ARP_FRAME_LEN];
        let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.set_dst_addr(SmolMac(eth_dst.0));
        eth.set_src_addr(SmolMac(sha.0));
        eth.set_ethertype(EthernetProtocol::Arp);
        let tha = if op == ArpOperation::Reply { eth_dst } else { MacAddr([0; 6]) };
        ArpRepr::EthernetIpv4 {
            operation: op,
            source_hardware_addr: SmolMac(sha.0),
            source_protocol_addr: spa,
            target_hardware_addr: SmolMac(tha.0),
            target_protocol_addr: tpa,
        }
        .emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
        buf
    }

    /// The next frame to send, parsed: (eth dst, operation, spa, tha, tpa).
    fn sent(n: &mut ArpTable, now: Instant) -> Option<(MacAddr, ArpOperation, Ipv4Addr, MacAddr, Ipv4Addr)> {
        let mut buf = [0u8; 64];
        let len = n.poll_transmit(now, &mut buf).unwrap()?;
        let eth = EthernetFrame::new_checked(&buf[..len]).unwrap();
        assert_eq!(eth.src_addr().0, OURS.0);
        let ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_hardware_addr,
            target_protocol_addr,
        } = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).unwrap()).unwrap()
        else {
            unreachable!()
        };
        assert_eq!(source_hardware_addr.0, OURS.0);
        Some((
            MacAddr(eth.dst_addr().0),
            operation,
            source_protocol_addr,
            MacAddr(target_hardware_addr.0),
            target_protocol_addr,
        ))
    }

    #[test]
    fn resolve_by_request_and_reply() {
        let mut n = table();
        assert_eq!(n.lookup_or_request(PEER_IP, t(0)), Resolution::Pending);
        assert_eq!(n.lookup_or_request(PEER_IP, t(1)), Resolution::Pending);
        let req = sent(&mut n, t(1)).unwrap();
        assert_eq!(req, (MacAddr::BROADCAST, ArpOperation::Request, MY_IP, MacAddr([0; 6]), PEER_IP));
        assert_eq!(sent(&mut n, t(2)), None, "one request per retrans_time");
        let reply = arp(ArpOperation::Reply, OURS, PEER, PEER_IP, MY_IP);
        assert_eq!(n.process_arp(&reply, t(5)), Ok(NeighInput::Updated));
        assert_eq!(n.take_completion(), Some((PEER_IP, Resolution::Known(PEER))));
        assert_eq!(n.take_completion(), None);
        assert_eq!(n.lookup_or_request(PEER_IP, t(6)), Resolution::Known(PEER));
        assert_eq!(
            n.entries().next().unwrap(),
            NeighView { ip: PEER_IP, mac: Some(PEER), state: NeighState::Reachable }
        );
    }

    #[test]
    fn retransmits_then_fails_then_retries() {
        let mut n = table();
        n.lookup_or_request(PEER_IP, t(0));
        assert!(sent(&mut n, t(0)).is_some());
        assert!(sent(&mut n, t(999)).is_none());
        assert!(sent(&mut n, t(1000)).is_some());
        assert_eq!(n.poll_at(), Some(t(2000)));
        assert!(sent(&mut n, t(2000)).is_some());
        assert!(sent(&mut n, t(2999)).is_none());
        assert_eq!(n.lookup_or_request(PEER_IP, t(2999)), Resolution::Pending);
        assert_eq!(n.lookup_or_request(PEER_IP, t(3000)), Resolution::Failed);
        assert_eq!(n.take_completion(), Some((PEER_IP, Resolution::Failed)));
        assert!(sent(&mut n, t(3500)).is_none(), "FAILED sends nothing");
        assert_eq!(n.entries().next().unwrap().state, NeighState::Failed);
        // After the hold, a lookup starts over.
        assert_eq!(n.lookup_or_request(PEER_IP, t(6000)), Resolution::Pending);
        assert!(sent(&mut n, t(6000)).is_some());
    }

    #[test]
    fn learns_without_answering_when_another_stack_answers() {
        let cfg = NeighConfig { answer_requests: false, ..NeighConfig::default() };
        let mut n = ArpTable::new(2, IfName::try_from("eth0").unwrap(), OURS, cfg);
        n.set_local_addrs(&[Ipv4Cidr::new(MY_IP, 24)]);
        let req = arp(ArpOperation::Request, MacAddr::BROADCAST, PEER, PEER_IP, MY_IP);
        assert_eq!(n.process_arp(&req, t(0)), Ok(NeighInput::Updated));
        assert_eq!(sent(&mut n, t(0)), None);
        assert_eq!(n.entries().next().unwrap(), NeighView { ip: PEER_IP, mac: Some(PEER), state: NeighState::Stale });
    }

    #[test]
    fn a_reply_the_shared_stack_asked_for_is_learnt_reachable() {
        let cfg = NeighConfig { answer_requests: false, ..NeighConfig::default() };
        let mut n = ArpTable::new(2, IfName::try_from("eth0").unwrap(), OURS, cfg);
        n.set_local_addrs(&[Ipv4Cidr::new(MY_IP, 24)]);
        // smoltcp's ping asked; the reply comes to our MAC and address.
        let reply = arp(ArpOperation::Reply, OURS, PEER, PEER_IP, MY_IP);
        assert_eq!(n.process_arp(&reply, t(0)), Ok(NeighInput::Updated));
        assert_eq!(
            n.entries().next().unwrap(),
            NeighView { ip: PEER_IP, mac: Some(PEER), state: NeighState::Reachable }
        );
        // A reply to another address, or broadcast, still teaches nothing new.
        let other = Ipv4Addr::new(10, 0, 0, 9);
        let stray = arp(ArpOperation::Reply, OURS, MacAddr([2, 0, 0, 0, 0, 9]), other, Ipv4Addr::new(10, 0, 0, 77));
        assert_eq!(n.process_arp(&stray, t(0)), Ok(NeighInput::Ignored));
        assert_eq!(n.entries().count(), 1);
    }

    #[test]
    fn answers_requests_for_our_address_and_learns_stale() {
        let mut n = table();
        let req = arp(ArpOperation::Request, MacAddr::BROADCAST, PEER, PEER_IP, MY_IP);
        assert_eq!(n.process_arp(&req, t(0)), Ok(NeighInput::ReplyQueued));
        assert_eq!(sent(&mut n, t(0)), Some((PEER, ArpOperation::Reply, MY_IP, PEER, PEER_IP)));
        assert_eq!(n.entries().next().unwrap(), NeighView { ip: PEER_IP, mac: Some(PEER), state: NeighState::Stale });
        // Using a STALE entry answers at once and re-probes by unicast.
        assert_eq!(n.lookup_or_request(PEER_IP, t(10)), Resolution::Known(PEER));
        assert_eq!(n.entries().next().unwrap().state, NeighState::Probe);
        assert_eq!(sent(&mut n, t(10)), Some((PEER, ArpOperation::Request, MY_IP, MacAddr([0; 6]), PEER_IP)));
        let reply = arp(ArpOperation::Reply, OURS, PEER, PEER_IP, MY_IP);
        n.process_arp(&reply, t(20)).unwrap();
        assert_eq!(n.entries().next().unwrap().state, NeighState::Reachable);
        // Only pending lookups complete; this one never was.
        assert_eq!(n.take_completion(), None);
    }

    #[test]
    fn a_request_completes_a_pending_lookup() {
        let mut n = table();
        n.lookup_or_request(PEER_IP, t(0));
        let req = arp(ArpOperation::Request, MacAddr::BROADCAST, PEER, PEER_IP, MY_IP);
        n.process_arp(&req, t(1)).unwrap();
        assert_eq!(n.take_completion(), Some((PEER_IP, Resolution::Known(PEER))));
        assert_eq!(n.lookup_or_request(PEER_IP, t(2)), Resolution::Known(PEER));
    }

    #[test]
    fn ignores_what_is_not_for_us() {
        let mut n = table();
        let other = Ipv4Addr::new(10, 0, 0, 3);
        // A request for someone else, from someone unknown: nothing learnt.
        let req = arp(ArpOperation::Request, MacAddr::BROADCAST, PEER, PEER_IP, other);
        assert_eq!(n.process_arp(&req, t(0)), Ok(NeighInput::Ignored));
        // An unsolicited reply (arp_accept=0): nothing learnt.
        let reply = arp(ArpOperation::Reply, OURS, PEER, PEER_IP, MY_IP);
        assert_eq!(n.process_arp(&reply, t(0)), Ok(NeighInput::Ignored));
        assert_eq!(n.entries().count(), 0);
        // Our own MAC as sender, multicast sender, junk.
        let looped = arp(ArpOperation::Request, MacAddr::BROADCAST, OURS, PEER_IP, MY_IP);
        assert_eq!(n.process_arp(&looped, t(0)), Err(ArpError::BadSender));
        assert_eq!(n.process_arp(&[0; 10], t(0)), Err(ArpError::Malformed));
        let mut bad = arp(ArpOperation::Request, MacAddr::BROADCAST, PEER, PEER_IP, MY_IP);
        bad[14 + 1] = 6; // hardware type 6
        assert_eq!(n.process_arp(&bad, t(0)), Err(ArpError::Unsupported));
        assert_eq!(n.process_arp(&bad[..30], t(0)), Err(ArpError::Malformed));
    }

    #[test]
    fn probe_request_is_answered_without_learning() {
        let mut n = table();
        let probe = arp(ArpOperation::Request, MacAddr::BROADCAST, PEER, Ipv4Addr::UNSPECIFIED, MY_IP);
        assert_eq!(n.process_arp(&probe, t(0)), Ok(NeighInput::ReplyQueued));
        assert_eq!(n.entries().count(), 0);
        assert_eq!(sent(&mut n, t(0)).unwrap().4, Ipv4Addr::UNSPECIFIED);
    }

    #[test]
    fn reachable_ages_to_stale_then_goes() {
        let mut n = table();
        n.lookup_or_request(PEER_IP, t(0));
        n.process_arp(&arp(ArpOperation::Reply, OURS, PEER, PEER_IP, MY_IP), t(0)).unwrap();
        n.poll(t(29_999));
        assert_eq!(n.entries().next().unwrap().state, NeighState::Reachable);
        n.poll(t(30_000));
        assert_eq!(n.entries().next().unwrap().state, NeighState::Stale);
        // A same-MAC request keeps STALE as is; a new MAC is taken.
        n.process_arp(&arp(ArpOperation::Request, MacAddr::BROADCAST, PEER, PEER_IP, MY_IP), t(40_000)).unwrap();
        assert_eq!(n.poll_at(), Some(t(0)), "a reply is waiting");
        n.poll(t(89_999));
        assert_eq!(n.entries().count(), 1);
        n.poll(t(90_000));
        assert_eq!(n.entries().count(), 0);
    }

    #[test]
    fn no_local_address_fails_at_once() {
        let mut n = ArpTable::new(2, IfName::try_from("eth0").unwrap(), OURS, NeighConfig::default());
        assert_eq!(n.lookup_or_request(PEER_IP, t(0)), Resolution::Failed);
        assert_eq!(n.entries().count(), 0);
    }

    #[test]
    fn full_table_evicts_resolved_entries_only() {
        let cfg = NeighConfig { max_entries: 2, ..NeighConfig::default() };
        let mut n = ArpTable::new(2, IfName::try_from("eth0").unwrap(), OURS, cfg);
        n.set_local_addrs(&[parse_ipv4_cidr("10.0.0.1/24").unwrap()]);
        assert_eq!(n.lookup_or_request(Ipv4Addr::new(10, 0, 0, 2), t(0)), Resolution::Pending);
        assert_eq!(n.lookup_or_request(Ipv4Addr::new(10, 0, 0, 3), t(0)), Resolution::Pending);
        assert_eq!(n.lookup_or_request(Ipv4Addr::new(10, 0, 0, 4), t(0)), Resolution::Failed);
        n.process_arp(&arp(ArpOperation::Reply, OURS, PEER, PEER_IP, MY_IP), t(1)).unwrap();
        assert_eq!(n.lookup_or_request(Ipv4Addr::new(10, 0, 0, 4), t(2)), Resolution::Pending);
        assert!(n.peek(PEER_IP).is_none(), "the resolved entry made room");
    }

    #[test]
    fn events_keep_the_table_in_step() {
        use crate::netdev::{NetdevConfig, Netdevs};
        let mut devs = Netdevs::new();
        devs.register(&NetdevConfig::ethernet(OURS)).unwrap();
        devs.set_up("eth0", true).unwrap();
        devs.add_ipv4("eth0", parse_ipv4_cidr("10.0.0.1/24").unwrap()).unwrap();
        let mut n = ArpTable::new(2, IfName::try_from("eth0").unwrap(), OURS, NeighConfig::default());
        let evs: Vec<_> = devs.chain().queued().cloned().collect();
        evs.iter().for_each(|e| n.apply_event(e));
        n.lookup_or_request(PEER_IP, t(0));
        assert_eq!(sent(&mut n, t(0)).unwrap().2, MY_IP);
        devs.set_mac("eth0", PEER).unwrap();
        let evs: Vec<_> = devs.chain().queued().cloned().collect();
        evs.iter().for_each(|e| n.apply_event(e));
        assert_eq!(n.entries().count(), 0, "a MAC change flushes");
        assert_eq!(n.take_completion(), Some((PEER_IP, Resolution::Failed)));
        let mut buf = [0u8; 41];
        assert_eq!(n.poll_transmit(t(0), &mut buf), Err(BufferTooSmall));
    }

    #[test]
    fn an_address_that_comes_up_is_announced_once() {
        use crate::netdev::{NetdevConfig, Netdevs};
        let mut devs = Netdevs::new();
        devs.register(&NetdevConfig::ethernet(OURS)).unwrap();
        let mut n = ArpTable::new(2, IfName::try_from("eth0").unwrap(), OURS, NeighConfig::default());
        // The chain keeps what it queued: hand over only the new events.
        let mut seen = 0;
        let mut apply = |devs: &mut Netdevs, n: &mut ArpTable| {
            let evs: Vec<_> = devs.chain().queued().skip(seen).cloned().collect();
            seen += evs.len();
            evs.iter().for_each(|e| n.apply_event(e));
        };
        // Added while down: nothing said yet.
        devs.add_ipv4("eth0", parse_ipv4_cidr("10.0.0.1/24").unwrap()).unwrap();
        apply(&mut devs, &mut n);
        assert_eq!(sent(&mut n, t(0)), None);
        // Up: a broadcast request for our own address, from it.
        devs.set_up("eth0", true).unwrap();
        apply(&mut devs, &mut n);
        let announce = Some((MacAddr::BROADCAST, ArpOperation::Request, MY_IP, MacAddr([0; 6]), MY_IP));
        assert_eq!(sent(&mut n, t(0)), announce);
        assert_eq!(sent(&mut n, t(0)), None);
        // A second address while up: that one alone.
        let second = Ipv4Addr::new(10, 0, 1, 1);
        devs.add_ipv4("eth0", parse_ipv4_cidr("10.0.1.1/24").unwrap()).unwrap();
        apply(&mut devs, &mut n);
        assert_eq!(
            sent(&mut n, t(0)),
            Some((MacAddr::BROADCAST, ArpOperation::Request, second, MacAddr([0; 6]), second))
        );
        assert_eq!(sent(&mut n, t(0)), None);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_frames_never_panic(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64), ms in 0u64..100_000) {
            let mut n = table();
            n.lookup_or_request(PEER_IP, t(0));
            let mut frame = arp(ArpOperation::Request, MacAddr::BROADCAST, PEER, PEER_IP, MY_IP);
            frame.truncate(14);
            frame.extend_from_slice(&body);
            let _ = n.process_arp(&frame, t(ms));
            let _ = n.process_arp(&body, t(ms));
            let mut buf = [0u8; 60];
            while let Ok(Some(_)) = n.poll_transmit(t(ms), &mut buf) {}
            let _ = n.lookup_or_request(PEER_IP, t(ms));
        }
    }
}
