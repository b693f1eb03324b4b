//! The RDMA core on the appliance: one `RdmaCore` with the rxe link type, fed
//! by the netdev notifier chain (the GID cache follows addresses, ports follow
//! the link), and the receive hook that RoCE v2 frames are steered to.

use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use knet::events::{DevSnapshot, NetdevEvent as NetEvent, NetdevEventKind as NetKind};
use knet::netdev::Netdevs;
use rdma::core::{MacAddr, NetdevEvent, NetdevEventKind as Kind, NetdevInfo, NetdevProvider, RdmaCore};
use rdma::rxe::RxeDriver;
use rdma::wire::frame::{DropCounters, parse};

/// The core, and the events the netdev chain handed over since the last pass.
pub struct Rdma {
    pub core: RdmaCore,
    pending: Rc<RefCell<Vec<NetdevEvent>>>,
    pub rx: RoceRx,
}

impl Rdma {
    pub fn new() -> Self {
        Rdma { core: RdmaCore::with_rxe(RxeDriver::factory()), pending: Rc::default(), rx: RoceRx::default() }
    }

    /// A netdev-chain subscriber that forwards every event to the core's queue.
    pub fn notifier(&self) -> impl FnMut(&NetEvent) + 'static {
        let pending = self.pending.clone();
        move |ev: &NetEvent| pending.borrow_mut().push(to_core_event(ev))
    }

    /// Hands queued netdev events to the core and lets it process them in order.
    pub fn process_events(&mut self) -> bool {
        let events = core::mem::take(&mut *self.pending.borrow_mut());
        let any = !events.is_empty();
        for ev in events {
            if let Err(e) = self.core.netdev_event(ev) {
                log::warn!("rdma: netdev event refused: {e}");
            }
        }
        any | (self.core.process_events() > 0)
    }
}

/// The core's view of a netdev, from a netdev-layer snapshot.
pub fn to_info(s: &DevSnapshot) -> NetdevInfo {
    let mut info = NetdevInfo::new(s.ifindex, &s.name, MacAddr(s.mac.0));
    info.mtu = s.mtu;
    info.up = s.up;
    info.carrier = s.carrier;
    info.ipv4 = s.ipv4.iter().map(|c| c.address()).collect();
    info.ipv6 = s.ipv6.iter().map(|c| c.address()).collect();
    info
}

fn to_core_event(ev: &NetEvent) -> NetdevEvent {
    let kind = match ev.kind {
        NetKind::Register => Kind::Register,
        NetKind::Up => Kind::Up,
        NetKind::Down => Kind::Down,
        NetKind::Change => Kind::Change,
        NetKind::ChangeAddr { .. } => Kind::ChangeAddr,
        NetKind::ChangeMtu { .. } => Kind::ChangeMtu,
        NetKind::Unregister => Kind::Unregister,
        NetKind::InetAddrAdd(c) => Kind::InetAddrAdd(c.address()),
        NetKind::InetAddrDel(c) => Kind::InetAddrDel(c.address()),
        NetKind::Inet6AddrAdd(c) => Kind::Inet6AddrAdd(c.address()),
        NetKind::Inet6AddrDel(c) => Kind::Inet6AddrDel(c.address()),
    };
    NetdevEvent::new(kind, to_info(&ev.dev))
}

/// The netdev table as the core's control path queries it.
pub struct Provider<'a>(pub &'a Netdevs);

impl NetdevProvider for Provider<'_> {
    fn for_each_netdev(&self, f: &mut dyn FnMut(&NetdevInfo)) {
        for dev in self.0.iter() {
            f(&to_info(&dev.snapshot()));
        }
    }
}

/// What happened to the RoCE v2 frames steered to the RDMA path.
#[derive(Default)]
pub struct RoceRx {
    /// Well-formed frames (ICRC good) with no transport to take them yet.
    pub no_transport: u64,
    pub drops: DropCounters,
}

impl RoceRx {
    pub fn receive(&mut self, frame: &[u8]) {
        match parse(frame) {
            Ok(_) => self.no_transport += 1,
            Err(reason) => self.drops.record(reason),
        }
    }
}
