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
//! right after the change ([`NetdevInfo`], the shared `vocab::netdev` type the
//! RDMA core takes as it is), so a subscriber never calls back into the registry
//! and a late `process` still replays history exactly.
//!
//! Which events a change produces, and in what order, is decided in
//! [`netdev`](crate::netdev) and documented on [`Netdevs`](crate::netdev::Netdevs).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;

pub use vocab::netdev::{NetdevEvent, NetdevEventKind, NetdevInfo};

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
        replay: &[(NetdevEventKind, NetdevInfo)],
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
    pub fn enqueue(&mut self, kind: NetdevEventKind, dev: NetdevInfo) {
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
    use alloc::string::String;
    use core::cell::RefCell;

    fn snap(name: &str) -> NetdevInfo {
        NetdevInfo::new(2, name, vocab::MacAddr([0x52, 0x54, 0, 0, 0, 1]))
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
}
