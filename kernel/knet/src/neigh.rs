//! IPv4 neighbour resolution (the ARP cache) for the RDMA path, with a
//! non-blocking API: the transport asks, gets `Known`, `Pending` or `Failed` at
//! once, and the poll loop moves frames and time in and out.
//!
//! Mirrors Linux's `arp_tbl` over the neighbour state machine (`net/core/neighbour.c`,
//! `net/ipv4/arp.c`), one table per device:
//! - states INCOMPLETE, REACHABLE, STALE, PROBE and FAILED keep their Linux
//!   meaning. There is no DELAY: Linux waits there for an upper layer (TCP) to
//!   confirm reachability, and the RDMA transport never confirms, so a used STALE
//!   entry goes straight to PROBE (unicast requests, still using the old MAC).
//! - an unknown address is requested by broadcast every `retrans_time` (1 s), up
//!   to `max_probes` (3) times; then it is FAILED for `failed_hold` (Linux's
//!   FAILED entries are retried on the next packet; holding them keeps a
//!   transport that retries every poll from flooding the wire with broadcasts).
//! - a reply addressed to us makes an entry REACHABLE for `reachable_time`; a
//!   request for one of our addresses is answered and its sender learnt as STALE
//!   (`neigh_event_ns`), and other ARP only updates entries we already have (the
//!   `arp_accept=0` default); a same-MAC STALE update leaves the state alone.
//! - the table is flushed when the device goes down or changes MAC
//!   (`neigh_ifdown`, `neigh_changeaddr`); see [`NeighTable::apply_event`].
//!
//! Time is an argument ([`Instant`]); nothing here reads a clock.
//!
//! Why smoltcp keeps a cache of its own: smoltcp 0.14 gives no way to feed or
//! read its neighbour cache (`iface::neighbor` is a private module and
//! `Interface` has no method that fills or looks up an entry), so it cannot
//! serve the RDMA path, and this table cannot serve smoltcp's ICMP and `ping`.
//! Both learn from the same ARP frames; the double work is kept to the learning:
//! smoltcp alone answers requests (the kernel sets
//! [`NeighConfig::answer_requests`] off), so each request gets one reply.
//!
//! IPv6 neighbour discovery is not done yet: RoCE over IPv6 GIDs cannot resolve
//! a peer's MAC through this table.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv4Addr;

use smoltcp::wire::{ArpOperation, ArpPacket, ArpRepr, EthernetAddress as SmolMac, EthernetFrame, EthernetProtocol};
use vocab::time::{Duration, Instant};
use vocab::{IfIndex, Ipv4Cidr, MacAddr};

use crate::events::{NetdevEvent, NetdevEventKind};
use crate::netdev::IfName;

/// An Ethernet ARP frame without padding: 14 bytes of Ethernet, 28 of ARP.
pub const ARP_FRAME_LEN: usize = 42;

/// The timers and limits (Linux's `net.ipv4.neigh.*` sysctls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighConfig {
    /// Time between requests (`retrans_time_ms`, 1 s).
    pub retrans_time: Duration,
    /// Requests before giving up (`mcast_probes`/`ucast_probes`, 3).
    pub max_probes: u8,
    /// How long a confirmed entry stays REACHABLE (`base_reachable_time`, 30 s;
    /// Linux randomises it between 0.5x and 1.5x, we do not).
    pub reachable_time: Duration,
    /// How long a STALE entry nobody uses is kept (`gc_stale_time`, 60 s).
    pub gc_stale_time: Duration,
    /// How long a FAILED answer is given before resolving again.
    pub failed_hold: Duration,
    /// Table size; the oldest resolved entry makes room (Linux's `gc_thresh3`).
    pub max_entries: usize,
    /// Answer requests for our addresses. Off when another stack on the same
    /// device (smoltcp on the appliance) answers them, so each gets one reply.
    pub answer_requests: bool,
}

impl Default for NeighConfig {
    fn default() -> Self {
        NeighConfig {
            retrans_time: Duration::from_secs(1),
            max_probes: 3,
            reachable_time: Duration::from_secs(30),
            gc_stale_time: Duration::from_secs(60),
            failed_hold: Duration::from_secs(3),
            max_entries: 256,
            answer_requests: true,
        }
    }
}

/// An entry's state, as `ip neigh` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighState {
    Incomplete,
    Reachable,
    Stale,
    Probe,
    Failed,
}

impl fmt::Display for NeighState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NeighState::Incomplete => "INCOMPLETE",
            NeighState::Reachable => "REACHABLE",
            NeighState::Stale => "STALE",
            NeighState::Probe => "PROBE",
            NeighState::Failed => "FAILED",
        })
    }
}

/// The answer to a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// Send to this MAC.
    Known(MacAddr),
    /// A request is out; ask again later or watch [`NeighTable::take_completion`].
    Pending,
    /// Nobody answered (or we have no address to ask from); give up for now.
    Failed,
}

/// What a received ARP frame did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArpInput {
    /// It asked for one of our addresses: a reply is queued.
    ReplyQueued,
    /// It updated an entry we had.
    Updated,
    /// Nothing to do with us.
    Ignored,
}

/// Why a frame given to [`NeighTable::process_arp`] was refused.
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

/// The transmit buffer given to [`NeighTable::poll_transmit`] is under
/// [`ARP_FRAME_LEN`] bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferTooSmall;

#[derive(Clone, Copy, Debug)]
struct Entry {
    mac: Option<MacAddr>,
    state: NeighState,
    /// When the state was entered (or last confirmed).
    since: Instant,
    probes: u8,
    /// When the next request is due, or, all probes sent, when to give up.
    next_probe: Instant,
}

/// One line of `ip neigh show`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighView {
    pub ip: Ipv4Addr,
    pub mac: Option<MacAddr>,
    pub state: NeighState,
}

/// A frame to send that is not a probe.
#[derive(Clone, Copy, Debug)]
struct Reply {
    to_mac: MacAddr,
    to_ip: Ipv4Addr,
    from_ip: Ipv4Addr,
}

/// The ARP cache of one device.
#[derive(Clone, Debug)]
pub struct NeighTable {
    ifindex: IfIndex,
    dev: IfName,
    mac: MacAddr,
    local: Vec<Ipv4Cidr>,
    cfg: NeighConfig,
    entries: BTreeMap<Ipv4Addr, Entry>,
    replies: VecDeque<Reply>,
    completions: VecDeque<(Ipv4Addr, Resolution)>,
}

impl NeighTable {
    pub fn new(ifindex: IfIndex, dev: IfName, mac: MacAddr, cfg: NeighConfig) -> Self {
        NeighTable {
            ifindex,
            dev,
            mac,
            local: Vec::new(),
            cfg,
            entries: BTreeMap::new(),
            replies: VecDeque::new(),
            completions: VecDeque::new(),
        }
    }

    pub fn ifindex(&self) -> IfIndex {
        self.ifindex
    }
    pub fn dev_name(&self) -> &str {
        &self.dev
    }

    /// Our IPv4 addresses: what we answer for and ask from.
    pub fn set_local_addrs(&mut self, addrs: &[Ipv4Cidr]) {
        self.local = addrs.to_vec();
    }

    /// Follows the device through the notifier chain: addresses, MAC, down.
    pub fn apply_event(&mut self, ev: &NetdevEvent) {
        if ev.dev.ifindex != self.ifindex {
            return;
        }
        self.dev = IfName::try_from(ev.dev.name.as_str()).unwrap_or_default();
        self.local.clone_from(&ev.dev.ipv4);
        match ev.kind {
            NetdevEventKind::ChangeAddr { .. } => {
                self.mac = ev.dev.mac;
                self.flush();
            }
            NetdevEventKind::Down | NetdevEventKind::Unregister => self.flush(),
            _ => {}
        }
    }

    /// Forgets every entry; pending lookups complete as `Failed`.
    pub fn flush(&mut self) {
        for (ip, e) in core::mem::take(&mut self.entries) {
            if e.state == NeighState::Incomplete {
                self.completions.push_back((ip, Resolution::Failed));
            }
        }
        self.replies.clear();
    }

    /// The MAC for `ip` if known, without side effects.
    pub fn peek(&self, ip: Ipv4Addr) -> Option<MacAddr> {
        self.entries.get(&ip).filter(|e| e.state != NeighState::Failed).and_then(|e| e.mac)
    }

    /// Resolves `ip`, never blocking: starts a request when it is unknown, and
    /// re-probes a STALE entry while still answering with its MAC.
    pub fn lookup_or_request(&mut self, ip: Ipv4Addr, now: Instant) -> Resolution {
        self.poll(now);
        if let Some(e) = self.entries.get_mut(&ip) {
            return match (e.state, e.mac) {
                (NeighState::Incomplete, _) => Resolution::Pending,
                (NeighState::Failed, _) | (_, None) => Resolution::Failed,
                (NeighState::Stale, Some(mac)) => {
                    *e = Entry { mac: Some(mac), state: NeighState::Probe, since: now, probes: 0, next_probe: now };
                    Resolution::Known(mac)
                }
                (_, Some(mac)) => Resolution::Known(mac),
            };
        }
        if self.local.is_empty() || !self.make_room() {
            return Resolution::Failed;
        }
        let e = Entry { mac: None, state: NeighState::Incomplete, since: now, probes: 0, next_probe: now };
        self.entries.insert(ip, e);
        Resolution::Pending
    }

    /// A lookup that finished since the last call: `Known` or `Failed`.
    pub fn take_completion(&mut self) -> Option<(Ipv4Addr, Resolution)> {
        self.completions.pop_front()
    }

    /// Handles a received Ethernet frame that [`steer`](crate::steer) called ARP.
    pub fn process_arp(&mut self, frame: &[u8], now: Instant) -> Result<ArpInput, ArpError> {
        let eth = EthernetFrame::new_checked(frame).map_err(|_| ArpError::Malformed)?;
        if eth.ethertype() != EthernetProtocol::Arp {
            return Err(ArpError::Malformed);
        }
        let to_us = MacAddr(eth.dst_addr().0) == self.mac;
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
        if !sha.is_unicast() || sha == self.mac {
            return Err(ArpError::BadSender);
        }
        let for_us = self.local.iter().any(|c| c.address() == tpa);
        if operation == ArpOperation::Request && for_us {
            // An RFC 5227 probe (sender 0.0.0.0) gets its answer but teaches us nothing.
            if self.cfg.answer_requests {
                self.replies.push_back(Reply { to_mac: sha, to_ip: spa, from_ip: tpa });
            }
            if !spa.is_unspecified() && !spa.is_multicast() && !spa.is_broadcast() {
                self.learn(spa, sha, NeighState::Stale, now, true);
            }
            return Ok(if self.cfg.answer_requests { ArpInput::ReplyQueued } else { ArpInput::Updated });
        }
        let state = if operation == ArpOperation::Reply && to_us { NeighState::Reachable } else { NeighState::Stale };
        if self.learn(spa, sha, state, now, false) { Ok(ArpInput::Updated) } else { Ok(ArpInput::Ignored) }
    }

    /// Runs the timers: gives up on unanswered requests, ages REACHABLE to
    /// STALE, and forgets old STALE and FAILED entries.
    pub fn poll(&mut self, now: Instant) {
        let cfg = self.cfg;
        let mut gone = Vec::new();
        for (ip, e) in self.entries.iter_mut() {
            let age = now.saturating_since(e.since);
            match e.state {
                NeighState::Incomplete | NeighState::Probe if e.probes >= cfg.max_probes && now >= e.next_probe => {
                    if e.state == NeighState::Incomplete {
                        self.completions.push_back((*ip, Resolution::Failed));
                    }
                    *e = Entry { mac: None, state: NeighState::Failed, since: now, probes: 0, next_probe: now };
                }
                NeighState::Reachable if age >= cfg.reachable_time => {
                    e.state = NeighState::Stale;
                    e.since = now;
                }
                NeighState::Stale if age >= cfg.gc_stale_time => gone.push(*ip),
                NeighState::Failed if age >= cfg.failed_hold => gone.push(*ip),
                _ => {}
            }
        }
        for ip in gone {
            self.entries.remove(&ip);
        }
    }

    /// When [`poll`](Self::poll) or [`poll_transmit`](Self::poll_transmit) next
    /// has something to do, so the poll loop can sleep until then.
    pub fn poll_at(&self) -> Option<Instant> {
        if !self.replies.is_empty() {
            return Some(Instant::ZERO);
        }
        self.entries
            .values()
            .map(|e| match e.state {
                NeighState::Incomplete | NeighState::Probe => e.next_probe,
                NeighState::Reachable => e.since + self.cfg.reachable_time,
                NeighState::Stale => e.since + self.cfg.gc_stale_time,
                NeighState::Failed => e.since + self.cfg.failed_hold,
            })
            .min()
    }

    /// Writes the next ARP frame due into `buf` and returns its length
    /// ([`ARP_FRAME_LEN`]; pad it if the NIC wants 60 bytes), or `None` when
    /// nothing is due. Replies go before requests.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, BufferTooSmall> {
        let buf = buf.get_mut(..ARP_FRAME_LEN).ok_or(BufferTooSmall)?;
        self.poll(now);
        if let Some(r) = self.replies.pop_front() {
            self.emit(buf, ArpOperation::Reply, r.to_mac, r.to_mac, r.from_ip, r.to_ip);
            return Ok(Some(ARP_FRAME_LEN));
        }
        let retrans = self.cfg.retrans_time;
        let max = self.cfg.max_probes;
        let due = self.entries.iter_mut().find(|(_, e)| {
            matches!(e.state, NeighState::Incomplete | NeighState::Probe) && e.probes < max && now >= e.next_probe
        });
        let Some((&ip, e)) = due else {
            return Ok(None);
        };
        e.probes += 1;
        e.next_probe = now + retrans;
        // PROBE asks the MAC it already has, as Linux's unicast probes do.
        let dst = if e.state == NeighState::Probe { e.mac.unwrap_or(MacAddr::BROADCAST) } else { MacAddr::BROADCAST };
        let Some(src_ip) = self.source_for(ip) else {
            return Ok(None);
        };
        self.emit(buf, ArpOperation::Request, dst, MacAddr([0; 6]), src_ip, ip);
        Ok(Some(ARP_FRAME_LEN))
    }

    /// The entries for `ip neigh show`, in address order.
    pub fn entries(&self) -> impl Iterator<Item = NeighView> + '_ {
        self.entries.iter().map(|(ip, e)| NeighView { ip: *ip, mac: e.mac, state: e.state })
    }

    /// The local address to ask from: one on the target's subnet, else the first.
    fn source_for(&self, target: Ipv4Addr) -> Option<Ipv4Addr> {
        self.local.iter().find(|c| c.contains_addr(&target)).or(self.local.first()).map(|c| c.address())
    }

    /// Records `ip` at `mac`. Creates an entry only if `create`; returns whether
    /// an entry was touched.
    fn learn(&mut self, ip: Ipv4Addr, mac: MacAddr, state: NeighState, now: Instant, create: bool) -> bool {
        let new = Entry { mac: Some(mac), state, since: now, probes: 0, next_probe: now };
        let Some(e) = self.entries.get_mut(&ip) else {
            if create && self.make_room() {
                self.entries.insert(ip, new);
                return true;
            }
            return false;
        };
        let confirmed = matches!(e.state, NeighState::Reachable | NeighState::Probe | NeighState::Stale);
        if state == NeighState::Stale && e.mac == Some(mac) && confirmed {
            return true;
        }
        if e.state == NeighState::Incomplete {
            self.completions.push_back((ip, Resolution::Known(mac)));
        }
        *e = new;
        true
    }

    /// Makes space for one more entry by evicting the oldest resolved one;
    /// false if every entry is a request in flight.
    fn make_room(&mut self) -> bool {
        if self.entries.len() < self.cfg.max_entries {
            return true;
        }
        let victim = self
            .entries
            .iter()
            .filter(|(_, e)| e.state != NeighState::Incomplete)
            .min_by_key(|(_, e)| (e.state != NeighState::Failed, e.since))
            .map(|(ip, _)| *ip);
        victim.is_some_and(|ip| self.entries.remove(&ip).is_some())
    }

    fn emit(
        &self,
        buf: &mut [u8],
        operation: ArpOperation,
        eth_dst: MacAddr,
        tha: MacAddr,
        spa: Ipv4Addr,
        tpa: Ipv4Addr,
    ) {
        let mut eth = EthernetFrame::new_unchecked(buf);
        eth.set_dst_addr(SmolMac(eth_dst.0));
        eth.set_src_addr(SmolMac(self.mac.0));
        eth.set_ethertype(EthernetProtocol::Arp);
        let repr = ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: SmolMac(self.mac.0),
            source_protocol_addr: spa,
            target_hardware_addr: SmolMac(tha.0),
            target_protocol_addr: tpa,
        };
        repr.emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::parse_ipv4_cidr;
    use alloc::vec;

    const OURS: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 1]);
    const PEER: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 2]);
    const MY_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    fn table() -> NeighTable {
        let mut n = NeighTable::new(2, IfName::try_from("eth0").unwrap(), OURS, NeighConfig::default());
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
    fn sent(n: &mut NeighTable, now: Instant) -> Option<(MacAddr, ArpOperation, Ipv4Addr, MacAddr, Ipv4Addr)> {
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
        assert_eq!(n.process_arp(&reply, t(5)), Ok(ArpInput::Updated));
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
        let mut n = NeighTable::new(2, IfName::try_from("eth0").unwrap(), OURS, cfg);
        n.set_local_addrs(&[Ipv4Cidr::new(MY_IP, 24)]);
        let req = arp(ArpOperation::Request, MacAddr::BROADCAST, PEER, PEER_IP, MY_IP);
        assert_eq!(n.process_arp(&req, t(0)), Ok(ArpInput::Updated));
        assert_eq!(sent(&mut n, t(0)), None);
        assert_eq!(n.entries().next().unwrap(), NeighView { ip: PEER_IP, mac: Some(PEER), state: NeighState::Stale });
    }

    #[test]
    fn answers_requests_for_our_address_and_learns_stale() {
        let mut n = table();
        let req = arp(ArpOperation::Request, MacAddr::BROADCAST, PEER, PEER_IP, MY_IP);
        assert_eq!(n.process_arp(&req, t(0)), Ok(ArpInput::ReplyQueued));
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
        assert_eq!(n.process_arp(&req, t(0)), Ok(ArpInput::Ignored));
        // An unsolicited reply (arp_accept=0): nothing learnt.
        let reply = arp(ArpOperation::Reply, OURS, PEER, PEER_IP, MY_IP);
        assert_eq!(n.process_arp(&reply, t(0)), Ok(ArpInput::Ignored));
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
        assert_eq!(n.process_arp(&probe, t(0)), Ok(ArpInput::ReplyQueued));
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
        let mut n = NeighTable::new(2, IfName::try_from("eth0").unwrap(), OURS, NeighConfig::default());
        assert_eq!(n.lookup_or_request(PEER_IP, t(0)), Resolution::Failed);
        assert_eq!(n.entries().count(), 0);
    }

    #[test]
    fn full_table_evicts_resolved_entries_only() {
        let cfg = NeighConfig { max_entries: 2, ..NeighConfig::default() };
        let mut n = NeighTable::new(2, IfName::try_from("eth0").unwrap(), OURS, cfg);
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
        let mut n = NeighTable::new(2, IfName::try_from("eth0").unwrap(), OURS, NeighConfig::default());
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
