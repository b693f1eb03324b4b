//! Neighbour resolution for the RDMA path, one table per device and address
//! family, with a non-blocking API: the transport asks, gets `Known`, `Pending`
//! or `Failed` at once, and the poll loop moves frames and time in and out.
//!
//! Mirrors Linux's neighbour state machine (`net/core/neighbour.c`), which
//! `arp_tbl` ([`arp`](crate::arp), IPv4) and `nd_tbl` ([`ndisc`](crate::ndisc),
//! IPv6 neighbour discovery) share; this module is that shared part, the
//! protocol modules read and build the frames:
//! - states INCOMPLETE, REACHABLE, STALE, PROBE and FAILED keep their Linux
//!   meaning. There is no DELAY: Linux waits there for an upper layer (TCP) to
//!   confirm reachability, and the RDMA transport never confirms, so a used STALE
//!   entry goes straight to PROBE (unicast requests, still using the old MAC).
//! - an unknown address is requested by broadcast (ARP) or to its
//!   solicited-node multicast group (ND) every `retrans_time` (1 s), up to
//!   `max_probes` (3) times; then it is FAILED for `failed_hold` (Linux's FAILED
//!   entries are retried on the next packet; holding them keeps a transport that
//!   retries every poll from flooding the wire with requests).
//! - a reply addressed to us makes an entry REACHABLE for `reachable_time`; a
//!   request for one of our addresses is answered and its sender learnt as STALE
//!   (`neigh_event_ns`); what else each protocol learns is in its module.
//! - the table is flushed when the device goes down or changes MAC
//!   (`neigh_ifdown`, `neigh_changeaddr`); see [`NeighTable::apply_event`].
//!
//! Time is an argument ([`Instant`]); nothing here reads a clock.
//!
//! Why smoltcp keeps caches of its own: smoltcp 0.14 gives no way to feed or
//! read its neighbour cache (`iface::neighbor` is a private module and
//! `Interface` has no method that fills or looks up an entry), so it cannot
//! serve the RDMA path, and these tables cannot serve smoltcp's ICMP and `ping`.
//! Both learn from the same ARP and ND frames; the double work is kept to the
//! learning: smoltcp alone answers requests (the kernel sets
//! [`NeighConfig::answer_requests`] off), so each request gets one reply.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::fmt;

use vocab::MacAddr;
use vocab::time::{Duration, Instant};
use vocab::{IfIndex, NetdevInfo};

use crate::events::{NetdevEvent, NetdevEventKind};
use crate::netdev::IfName;

pub use crate::arp::Arp;
pub use crate::ndisc::Nd;

/// The IPv4 table (ARP).
pub type ArpTable = NeighTable<Arp>;
/// The IPv6 table (neighbour discovery).
pub type NdTable = NeighTable<Nd>;

/// What a protocol gives the shared state machine: its address type, how a
/// device's addresses are listed, and how its frames are written.
pub trait Family {
    /// A neighbour's protocol address.
    type Addr: Copy + Ord + fmt::Debug + fmt::Display;
    /// One of our addresses with its prefix.
    type Cidr: Copy + fmt::Debug;
    /// Bytes of the longest frame [`Family::emit`] writes.
    const FRAME_LEN: usize;

    /// Our addresses of this family on `dev`.
    fn locals(dev: &NetdevInfo) -> Vec<Self::Cidr>;
    fn address(c: &Self::Cidr) -> Self::Addr;
    /// The local address to ask `target` from, as the protocol chooses it.
    fn source_for(local: &[Self::Cidr], target: Self::Addr) -> Option<Self::Addr>;
    /// Writes `tx` from `mac` into `buf` (at least [`Family::FRAME_LEN`] bytes)
    /// and returns the frame's length.
    fn emit(buf: &mut [u8], mac: MacAddr, tx: &Tx<Self::Addr>) -> usize;
    /// What tells the segment that `addr` is ours at our MAC when it comes
    /// up or moves (a switch learns our port from it, neighbours their
    /// entry), if the family sends one.
    fn announcement(_addr: Self::Addr) -> Option<Tx<Self::Addr>> {
        None
    }
}

/// A frame the table wants sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tx<A> {
    /// Who has `target`? To `dst_mac` when the old MAC is probed (PROBE), else
    /// to everyone who may have it (broadcast, or the solicited-node group).
    Request { dst_mac: Option<MacAddr>, src: A, target: A },
    /// `from` is ours, told to the `to` that asked from `to_mac`.
    Reply { to_mac: MacAddr, to: A, from: A },
}

/// The timers and limits (Linux's `net.ipv4.neigh.*` and `net.ipv6.neigh.*`
/// sysctls, which default to the same values).
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

/// What a received ARP or ND frame did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighInput {
    /// It asked for one of our addresses: a reply is queued.
    ReplyQueued,
    /// It updated an entry we had (or created one for a neighbour that asked).
    Updated,
    /// Nothing to do with us.
    Ignored,
}

/// The transmit buffer given to [`NeighTable::poll_transmit`] is shorter
/// than the family's frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferTooSmall;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) mac: Option<MacAddr>,
    pub(crate) state: NeighState,
    /// When the state was entered (or last confirmed).
    since: Instant,
    probes: u8,
    /// When the next request is due, or, all probes sent, when to give up.
    next_probe: Instant,
}

/// One line of `ip neigh show`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighView<A> {
    pub ip: A,
    pub mac: Option<MacAddr>,
    pub state: NeighState,
}

/// The neighbour cache of one device for one address family.
#[derive(Clone, Debug)]
pub struct NeighTable<F: Family> {
    ifindex: IfIndex,
    dev: IfName,
    mac: MacAddr,
    local: Vec<F::Cidr>,
    cfg: NeighConfig,
    entries: BTreeMap<F::Addr, Entry>,
    replies: VecDeque<Tx<F::Addr>>,
    completions: VecDeque<(F::Addr, Resolution)>,
    /// Up with carrier, as last told.
    running: bool,
}

impl<F: Family> NeighTable<F> {
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
            running: false,
        }
    }

    pub fn ifindex(&self) -> IfIndex {
        self.ifindex
    }
    pub fn dev_name(&self) -> &str {
        &self.dev
    }
    pub(crate) fn mac(&self) -> MacAddr {
        self.mac
    }
    pub(crate) fn config(&self) -> &NeighConfig {
        &self.cfg
    }

    /// Our addresses of this family: what we answer for and ask from. One
    /// added while the device runs is announced.
    pub fn set_local_addrs(&mut self, addrs: &[F::Cidr]) {
        let before = core::mem::replace(&mut self.local, addrs.to_vec());
        if self.running {
            let fresh: Vec<F::Cidr> =
                addrs.iter().filter(|c| !before.iter().any(|b| F::address(b) == F::address(c))).cloned().collect();
            self.announce(&fresh);
        }
    }

    /// Whether the device is up with carrier (frames flow); when it starts
    /// to, every address is announced.
    pub fn set_running(&mut self, running: bool) {
        let started = running && !self.running;
        self.running = running;
        if started {
            self.announce(&self.local.clone());
        }
    }

    /// Tells the segment that `addrs` are ours at our MAC (a switch learns
    /// our port, neighbours their entries), as the family does it.
    fn announce(&mut self, addrs: &[F::Cidr]) {
        self.replies.extend(addrs.iter().filter_map(|c| F::announcement(F::address(c))));
    }

    /// Whether `ip` is one of ours.
    pub(crate) fn is_local(&self, ip: F::Addr) -> bool {
        self.local.iter().any(|c| F::address(c) == ip)
    }

    /// Follows the device through the notifier chain: addresses, MAC, down.
    pub fn apply_event(&mut self, ev: &NetdevEvent) {
        if ev.dev.ifindex != self.ifindex {
            return;
        }
        self.dev = IfName::try_from(ev.dev.name.as_str()).unwrap_or_default();
        self.set_local_addrs(&F::locals(&ev.dev));
        self.set_running(ev.dev.up && ev.dev.carrier);
        match ev.kind {
            NetdevEventKind::ChangeAddr { .. } => {
                self.mac = ev.dev.mac;
                self.flush();
                // The new MAC is news for every address.
                if self.running {
                    self.announce(&self.local.clone());
                }
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
    pub fn peek(&self, ip: F::Addr) -> Option<MacAddr> {
        self.entries.get(&ip).filter(|e| e.state != NeighState::Failed).and_then(|e| e.mac)
    }

    /// Resolves `ip`, never blocking: starts a request when it is unknown, and
    /// re-probes a STALE entry while still answering with its MAC.
    pub fn lookup_or_request(&mut self, ip: F::Addr, now: Instant) -> Resolution {
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
        if F::source_for(&self.local, ip).is_none() || !self.make_room() {
            return Resolution::Failed;
        }
        let e = Entry { mac: None, state: NeighState::Incomplete, since: now, probes: 0, next_probe: now };
        self.entries.insert(ip, e);
        Resolution::Pending
    }

    /// A lookup that finished since the last call: `Known` or `Failed`.
    pub fn take_completion(&mut self) -> Option<(F::Addr, Resolution)> {
        self.completions.pop_front()
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

    /// Writes the next frame due into `buf` and returns its length (at most
    /// [`Family::FRAME_LEN`]; pad it if the NIC wants 60 bytes), or `None`
    /// when nothing is due. Replies go before requests.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, BufferTooSmall> {
        let buf = buf.get_mut(..F::FRAME_LEN).ok_or(BufferTooSmall)?;
        self.poll(now);
        if let Some(r) = self.replies.pop_front() {
            return Ok(Some(F::emit(buf, self.mac, &r)));
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
        let dst_mac = if e.state == NeighState::Probe { e.mac } else { None };
        let Some(src) = F::source_for(&self.local, ip) else {
            return Ok(None);
        };
        Ok(Some(F::emit(buf, self.mac, &Tx::Request { dst_mac, src, target: ip })))
    }

    /// The entries for `ip neigh show`, in address order.
    pub fn entries(&self) -> impl Iterator<Item = NeighView<F::Addr>> + '_ {
        self.entries.iter().map(|(ip, e)| NeighView { ip: *ip, mac: e.mac, state: e.state })
    }

    /// The entry for `ip`, as the protocols' update rules read it.
    pub(crate) fn entry(&self, ip: F::Addr) -> Option<&Entry> {
        self.entries.get(&ip)
    }

    /// Queues a reply (the protocol checked it should be sent).
    pub(crate) fn queue_reply(&mut self, reply: Tx<F::Addr>) {
        self.replies.push_back(reply);
    }

    /// Records `ip` at `mac`. Creates an entry only if `create`; returns whether
    /// an entry was touched. A STALE update with the MAC an entry already has
    /// leaves a confirmed entry alone (`NEIGH_UPDATE_F_WEAK_OVERRIDE`).
    pub(crate) fn learn(&mut self, ip: F::Addr, mac: MacAddr, state: NeighState, now: Instant, create: bool) -> bool {
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

    /// Marks a REACHABLE entry STALE without touching its MAC (an ND
    /// advertisement that may not override says the MAC may have changed).
    pub(crate) fn suspect(&mut self, ip: F::Addr, now: Instant) {
        if let Some(e) = self.entries.get_mut(&ip).filter(|e| e.state == NeighState::Reachable) {
            e.state = NeighState::Stale;
            e.since = now;
        }
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
}
