//! The netdev notifier chain: what changed on which device, delivered in order to
//! every subscriber (the GID cache, the console's event log, smoltcp's wiring).
//!
//! Mirrors Linux's three chains folded into one: the netdev chain
//! (`register_netdevice_notifier`: `NETDEV_REGISTER`, `NETDEV_UP`, `NETDEV_DOWN`,
//! `NETDEV_CHANGE`, `NETDEV_CHANGEADDR`, `NETDEV_CHANGEMTU`, `NETDEV_UNREGISTER`),
//! the inetaddr chain (`register_inetaddr_notifier`, whose `NETDEV_UP`/`NETDEV_DOWN`
//! on an `in_ifaddr` we call [`InetAddrAdd`](NetdevEventKind::InetAddrAdd) /
//! [`InetAddrDel`](NetdevEventKind::InetAddrDel)) and the inet6addr chain. One
//! chain, because the GID cache must see "eth0 down" and "fe80:: removed" in the
//! order they happened, which separate Linux chains only give under RTNL.
//!
//! Unlike Linux, delivery is deferred: a registry change only enqueues events on
//! the single ordered work queue, and [`NotifierChain::process`] (called from the
//! poll loop) hands them out, each event to every subscriber in registration
//! order before the next event. Each event carries a snapshot of the device taken
//! right after the change, so a subscriber never calls back into the registry and
//! a late `process` still replays history exactly.
//!
//! Which events a change produces, and in what order, is decided in
//! [`netdev`](crate::netdev) and documented on [`Netdevs`](crate::netdev::Netdevs).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;

use smoltcp::wire::{Ipv4Cidr, Ipv6Cidr};
use vocab::MacAddr;

use crate::netdev::{IfIndex, IfName};

/// A device as it was right after the change an event reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevSnapshot {
    pub ifindex: IfIndex,
    pub name: IfName,
    pub mac: MacAddr,
    pub mtu: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// The link reports carrier (`netif_carrier_ok`).
    pub carrier: bool,
    /// IPv4 addresses in the order they were added.
    pub ipv4: Vec<Ipv4Cidr>,
    /// IPv6 addresses, link-local included, in the order they were added.
    pub ipv6: Vec<Ipv6Cidr>,
}

impl DevSnapshot {
    /// Up and with carrier: Linux's `netif_running() && netif_carrier_ok()`,
    /// what rxe calls a usable port.
    pub fn running(&self) -> bool {
        self.up && self.carrier
    }
}

/// What happened. Names follow the Linux constants; address events carry the
/// address with its prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEventKind {
    /// `NETDEV_REGISTER`: the device appeared (administratively down).
    Register,
    /// `NETDEV_UP`: brought administratively up.
    Up,
    /// `NETDEV_DOWN`: brought administratively down.
    Down,
    /// `NETDEV_CHANGE`: carrier changed while the device was up; the new state is
    /// in the snapshot.
    Change,
    /// `NETDEV_CHANGEADDR`: the MAC changed; `old` is what it was (Linux only
    /// offers that in `NETDEV_PRE_CHANGEADDR`).
    ChangeAddr { old: MacAddr },
    /// `NETDEV_CHANGEMTU`: the MTU changed from `old`.
    ChangeMtu { old: u32 },
    /// `NETDEV_UNREGISTER`: the device is gone; its addresses were removed (with
    /// their own events) before this one.
    Unregister,
    /// inetaddr chain `NETDEV_UP`: an IPv4 address was added.
    InetAddrAdd(Ipv4Cidr),
    /// inetaddr chain `NETDEV_DOWN`: an IPv4 address was removed.
    InetAddrDel(Ipv4Cidr),
    /// inet6addr chain `NETDEV_UP`: an IPv6 address was added.
    Inet6AddrAdd(Ipv6Cidr),
    /// inet6addr chain `NETDEV_DOWN`: an IPv6 address was removed.
    Inet6AddrDel(Ipv6Cidr),
}

impl NetdevEventKind {
    /// The Linux name of the event (chain and constant), for logs.
    pub fn linux_name(&self) -> &'static str {
        match self {
            NetdevEventKind::Register => "NETDEV_REGISTER",
            NetdevEventKind::Up => "NETDEV_UP",
            NetdevEventKind::Down => "NETDEV_DOWN",
            NetdevEventKind::Change => "NETDEV_CHANGE",
            NetdevEventKind::ChangeAddr { .. } => "NETDEV_CHANGEADDR",
            NetdevEventKind::ChangeMtu { .. } => "NETDEV_CHANGEMTU",
            NetdevEventKind::Unregister => "NETDEV_UNREGISTER",
            NetdevEventKind::InetAddrAdd(_) => "inetaddr NETDEV_UP",
            NetdevEventKind::InetAddrDel(_) => "inetaddr NETDEV_DOWN",
            NetdevEventKind::Inet6AddrAdd(_) => "inet6addr NETDEV_UP",
            NetdevEventKind::Inet6AddrDel(_) => "inet6addr NETDEV_DOWN",
        }
    }
}

/// One event on the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetdevEvent {
    /// Position in the queue since boot; strictly increasing, so a subscriber
    /// can tell it missed nothing.
    pub seq: u64,
    pub kind: NetdevEventKind,
    pub dev: DevSnapshot,
}

/// One console line per event, e.g. `eth0: NETDEV_UP` or
/// `eth0: inetaddr NETDEV_UP 10.0.0.2/24`.
impl fmt::Display for NetdevEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.dev.name, self.kind.linux_name())?;
        match self.kind {
            NetdevEventKind::Register | NetdevEventKind::Up | NetdevEventKind::Down | NetdevEventKind::Unregister => {
                Ok(())
            }
            NetdevEventKind::Change => {
                write!(f, " carrier {}", if self.dev.carrier { "on" } else { "off" })
            }
            NetdevEventKind::ChangeAddr { old } => write!(f, " {} (was {})", self.dev.mac, old),
            NetdevEventKind::ChangeMtu { old } => write!(f, " {} (was {old})", self.dev.mtu),
            NetdevEventKind::InetAddrAdd(c) | NetdevEventKind::InetAddrDel(c) => write!(f, " {c}"),
            NetdevEventKind::Inet6AddrAdd(c) | NetdevEventKind::Inet6AddrDel(c) => write!(f, " {c}"),
        }
    }
}

/// A subscriber. Any `FnMut(&NetdevEvent)` closure is one.
pub trait NetdevNotifier {
    fn notify(&mut self, event: &NetdevEvent);
}

impl<F: FnMut(&NetdevEvent)> NetdevNotifier for F {
    fn notify(&mut self, event: &NetdevEvent) {
        self(event)
    }
}

/// The handle [`NotifierChain::subscribe`] returns, to unsubscribe with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubscriberId(u32);

struct Subscriber {
    id: SubscriberId,
    /// The first event this subscriber may see: events already queued when it
    /// subscribed describe changes its replay (if any) already covered.
    from_seq: u64,
    notifier: Box<dyn NetdevNotifier>,
}

/// The subscribers and the one ordered work queue.
#[derive(Default)]
pub struct NotifierChain {
    queue: VecDeque<NetdevEvent>,
    subscribers: Vec<Subscriber>,
    next_seq: u64,
    next_id: u32,
}

impl NotifierChain {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a subscriber at the end of the chain. It first receives `replay`,
    /// synchronously (Linux's `register_netdevice_notifier` likewise replays
    /// `NETDEV_REGISTER`/`NETDEV_UP` for existing devices), then every event
    /// queued from now on. The replayed events carry the current sequence
    /// number and are not queued for anybody else.
    pub fn subscribe(
        &mut self,
        mut notifier: Box<dyn NetdevNotifier>,
        replay: &[(NetdevEventKind, DevSnapshot)],
    ) -> SubscriberId {
        let id = SubscriberId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        for (kind, dev) in replay {
            notifier.notify(&NetdevEvent { seq: self.next_seq, kind: *kind, dev: dev.clone() });
        }
        self.subscribers.push(Subscriber { id, from_seq: self.next_seq, notifier });
        id
    }

    /// Removes a subscriber; false if it was not subscribed.
    pub fn unsubscribe(&mut self, id: SubscriberId) -> bool {
        let before = self.subscribers.len();
        self.subscribers.retain(|s| s.id != id);
        self.subscribers.len() != before
    }

    /// How many subscribers there are.
    pub fn subscriber_count(&self) -> usize {
        self.subscribers.len()
    }

    /// Appends an event to the work queue.
    pub fn enqueue(&mut self, kind: NetdevEventKind, dev: DevSnapshot) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push_back(NetdevEvent { seq, kind, dev });
    }

    /// Events queued and not yet delivered.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// The queued events, oldest first (for tests and the console's event log).
    pub fn queued(&self) -> impl Iterator<Item = &NetdevEvent> {
        self.queue.iter()
    }

    /// Delivers every queued event, oldest first, each to every subscriber in
    /// registration order. Returns how many events were delivered.
    pub fn process(&mut self) -> usize {
        let mut n = 0;
        while let Some(ev) = self.queue.pop_front() {
            for s in self.subscribers.iter_mut().filter(|s| ev.seq >= s.from_seq) {
                s.notifier.notify(&ev);
            }
            n += 1;
        }
        n
    }
}

impl fmt::Debug for NotifierChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotifierChain")
            .field("queued", &self.queue.len())
            .field("subscribers", &self.subscribers.len())
            .field("next_seq", &self.next_seq)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::rc::Rc;
    use alloc::string::{String, ToString};
    use alloc::vec;
    use core::cell::RefCell;

    fn snap(name: &str) -> DevSnapshot {
        DevSnapshot {
            ifindex: 2,
            name: IfName::try_from(name).unwrap(),
            mac: MacAddr([0x52, 0x54, 0, 0, 0, 1]),
            mtu: 1500,
            up: true,
            carrier: true,
            ipv4: Vec::new(),
            ipv6: Vec::new(),
        }
    }

    type Log = Rc<RefCell<Vec<String>>>;

    fn recorder(tag: &'static str, log: &Log) -> Box<dyn NetdevNotifier> {
        let log = log.clone();
        Box::new(move |ev: &NetdevEvent| log.borrow_mut().push(alloc::format!("{tag} {} {ev}", ev.seq)))
    }

    #[test]
    fn events_go_in_order_to_subscribers_in_registration_order() {
        let log = Log::default();
        let mut chain = NotifierChain::new();
        chain.subscribe(recorder("a", &log), &[]);
        chain.subscribe(recorder("b", &log), &[]);
        chain.enqueue(NetdevEventKind::Register, snap("eth0"));
        chain.enqueue(NetdevEventKind::Up, snap("eth0"));
        assert!(log.borrow().is_empty(), "nothing is delivered before process()");
        assert_eq!(chain.pending(), 2);
        assert_eq!(chain.process(), 2);
        assert_eq!(
            *log.borrow(),
            ["a 0 eth0: NETDEV_REGISTER", "b 0 eth0: NETDEV_REGISTER", "a 1 eth0: NETDEV_UP", "b 1 eth0: NETDEV_UP"]
        );
        assert_eq!(chain.pending(), 0);
        assert_eq!(chain.process(), 0);
    }

    #[test]
    fn unsubscribed_sees_nothing_more() {
        let log = Log::default();
        let mut chain = NotifierChain::new();
        let a = chain.subscribe(recorder("a", &log), &[]);
        chain.subscribe(recorder("b", &log), &[]);
        chain.enqueue(NetdevEventKind::Up, snap("eth0"));
        assert!(chain.unsubscribe(a));
        assert!(!chain.unsubscribe(a));
        chain.process();
        assert_eq!(*log.borrow(), ["b 0 eth0: NETDEV_UP"]);
        assert_eq!(chain.subscriber_count(), 1);
    }

    #[test]
    fn late_subscriber_gets_replay_then_only_new_events() {
        let log = Log::default();
        let mut chain = NotifierChain::new();
        chain.enqueue(NetdevEventKind::Register, snap("eth0"));
        chain.subscribe(recorder("late", &log), &[(NetdevEventKind::Register, snap("eth0"))]);
        assert_eq!(*log.borrow(), ["late 1 eth0: NETDEV_REGISTER"]);
        chain.enqueue(NetdevEventKind::Up, snap("eth0"));
        chain.process();
        // The REGISTER queued before subscribing is not delivered twice.
        assert_eq!(*log.borrow(), ["late 1 eth0: NETDEV_REGISTER", "late 1 eth0: NETDEV_UP"]);
    }

    #[test]
    fn display_names_every_kind() {
        let c4 = Ipv4Cidr::new(core::net::Ipv4Addr::new(10, 0, 0, 2), 24);
        let c6 = crate::addr::link_local_from_mac(MacAddr([0x52, 0x54, 0, 0, 0, 1]));
        let cases = vec![
            (NetdevEventKind::Change, "eth0: NETDEV_CHANGE carrier on"),
            (
                NetdevEventKind::ChangeAddr { old: MacAddr([0x52, 0x54, 0, 0, 0, 9]) },
                "eth0: NETDEV_CHANGEADDR 52:54:00:00:00:01 (was 52:54:00:00:00:09)",
            ),
            (NetdevEventKind::ChangeMtu { old: 9000 }, "eth0: NETDEV_CHANGEMTU 1500 (was 9000)"),
            (NetdevEventKind::InetAddrAdd(c4), "eth0: inetaddr NETDEV_UP 10.0.0.2/24"),
            (NetdevEventKind::InetAddrDel(c4), "eth0: inetaddr NETDEV_DOWN 10.0.0.2/24"),
            (NetdevEventKind::Inet6AddrAdd(c6), "eth0: inet6addr NETDEV_UP fe80::5054:ff:fe00:1/64"),
            (NetdevEventKind::Inet6AddrDel(c6), "eth0: inet6addr NETDEV_DOWN fe80::5054:ff:fe00:1/64"),
            (NetdevEventKind::Unregister, "eth0: NETDEV_UNREGISTER"),
        ];
        for (kind, text) in cases {
            assert_eq!(NetdevEvent { seq: 0, kind, dev: snap("eth0") }.to_string(), text);
        }
    }
}
