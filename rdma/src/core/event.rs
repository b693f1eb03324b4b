//! Asynchronous device events and their per-device handlers (seed §3; Linux
//! `ib_register_event_handler`, `ib_dispatch_event`, `dispatch_gid_change_event`).
//!
//! Handlers are registered per device and called in registration order. A
//! client whose `add` succeeded on a device is registered as one of that
//! device's handlers at that moment, as a Linux client registers its handler
//! from `add`. Events are dispatched only after the work item that caused them
//! has finished updating the caches, so a handler that reads the GID table on
//! GID_CHANGE sees the new table (Linux moved dispatch to a work queue for the
//! same guarantee: cache first, clients after).

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::client::{ClientContexts, ClientId, ClientRegistry};
use super::device::Device;

/// The event types the core raises (`enum ib_event_type`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum IbEventType {
    /// The port went ACTIVE (netdev up).
    PortActive,
    /// The port left ACTIVE (netdev down or carrier lost).
    PortErr,
    /// The port's GID table changed.
    GidChange,
    /// The port's pkey table changed (never for RoCE: one fixed pkey).
    PkeyChange,
}

impl IbEventType {
    /// The Linux constant's name, for logs.
    pub fn linux_name(self) -> &'static str {
        match self {
            IbEventType::PortActive => "IB_EVENT_PORT_ACTIVE",
            IbEventType::PortErr => "IB_EVENT_PORT_ERR",
            IbEventType::GidChange => "IB_EVENT_GID_CHANGE",
            IbEventType::PkeyChange => "IB_EVENT_PKEY_CHANGE",
        }
    }
}

/// One event on one port of one device (`struct ib_event`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct IbEvent {
    pub device_index: u32,
    pub port: u32,
    pub kind: IbEventType,
}

/// A per-device event handler (`struct ib_event_handler`).
pub trait EventHandler {
    /// Called after the caches reflect the event. `dev` is the device as it
    /// is now.
    fn handle(&mut self, ev: &IbEvent, dev: &Device);
}

/// A handler's id, for unregistering.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct HandlerId(pub u32);

pub(crate) enum HandlerTarget {
    Standalone(Box<dyn EventHandler>),
    Client(ClientId),
}

pub(crate) struct HandlerEntry {
    pub(crate) id: HandlerId,
    pub(crate) device_index: u32,
    pub(crate) target: HandlerTarget,
}

/// Every device's handlers, in registration order.
#[derive(Default)]
pub(crate) struct EventHandlers {
    entries: Vec<HandlerEntry>,
    next_id: u32,
}

impl EventHandlers {
    fn next(&mut self) -> HandlerId {
        let id = HandlerId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        id
    }

    pub(crate) fn register(&mut self, device_index: u32, h: Box<dyn EventHandler>) -> HandlerId {
        let id = self.next();
        self.entries.push(HandlerEntry { id, device_index, target: HandlerTarget::Standalone(h) });
        id
    }

    pub(crate) fn register_client(&mut self, device_index: u32, client: ClientId) {
        let id = self.next();
        self.entries.push(HandlerEntry { id, device_index, target: HandlerTarget::Client(client) });
    }

    /// Remove a standalone handler, handing it back.
    pub(crate) fn unregister(&mut self, id: HandlerId) -> Option<Box<dyn EventHandler>> {
        let pos = self.entries.iter().position(|e| e.id == id && matches!(e.target, HandlerTarget::Standalone(_)))?;
        match self.entries.remove(pos).target {
            HandlerTarget::Standalone(h) => Some(h),
            HandlerTarget::Client(_) => None,
        }
    }

    pub(crate) fn unregister_client(&mut self, device_index: u32, client: ClientId) {
        self.entries.retain(|e| {
            !(e.device_index == device_index && matches!(e.target, HandlerTarget::Client(c) if c == client))
        });
    }

    /// Drop every handler of a device that is going away.
    pub(crate) fn remove_device(&mut self, device_index: u32) {
        self.entries.retain(|e| e.device_index != device_index);
    }

    /// `ib_dispatch_event`: call the device's handlers in registration order.
    /// Takes the other tables as separate borrows so the device stays
    /// readable while handlers run.
    pub(crate) fn dispatch(
        &mut self,
        ev: &IbEvent,
        dev: &Device,
        clients: &mut ClientRegistry,
        contexts: &mut ClientContexts,
    ) {
        for entry in self.entries.iter_mut().filter(|e| e.device_index == ev.device_index) {
            match &mut entry.target {
                HandlerTarget::Standalone(h) => h.handle(ev, dev),
                HandlerTarget::Client(id) => {
                    if let Some(client) = clients.get_mut(*id) {
                        client.event(ev, dev, contexts.data_mut(ev.device_index, *id));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::testutil::{Log, LogHandler, fake_device};

    #[test]
    fn handlers_run_in_registration_order_for_their_device_only() {
        let log = Log::default();
        let mut hs = EventHandlers::default();
        hs.register(0, Box::new(LogHandler::new("a", &log)));
        hs.register(1, Box::new(LogHandler::new("other", &log)));
        let b = hs.register(0, Box::new(LogHandler::new("b", &log)));
        let dev = fake_device(0, "rxe0", 2);
        let ev = IbEvent { device_index: 0, port: 1, kind: IbEventType::GidChange };
        let mut clients = ClientRegistry::default();
        let mut cx = ClientContexts::default();
        hs.dispatch(&ev, &dev, &mut clients, &mut cx);
        assert_eq!(log.take(), ["a: GID_CHANGE rxe0/1", "b: GID_CHANGE rxe0/1"]);
        assert!(hs.unregister(b).is_some());
        assert!(hs.unregister(b).is_none());
        hs.dispatch(&ev, &dev, &mut clients, &mut cx);
        assert_eq!(log.take(), ["a: GID_CHANGE rxe0/1"]);
        hs.remove_device(0);
        hs.dispatch(&ev, &dev, &mut clients, &mut cx);
        assert!(log.take().is_empty());
    }

    #[test]
    fn linux_names() {
        assert_eq!(IbEventType::PortErr.linux_name(), "IB_EVENT_PORT_ERR");
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;
    use crate::core::netdev::{NetdevEvent, NetdevEventKind, NetdevInfo};
    use crate::core::rdma_core::RdmaCore;
    use crate::core::testutil::{Log, LogClient, LogHandler, eth0, rxe_core};
    use alloc::format;
    use alloc::vec;
    use alloc::vec::Vec;
    use core::net::Ipv4Addr;

    /// Logs the GID table size it sees when GID_CHANGE arrives.
    struct CacheProbe(Log);

    impl EventHandler for CacheProbe {
        fn handle(&mut self, ev: &IbEvent, dev: &Device) {
            if ev.kind == IbEventType::GidChange {
                let n = dev.port(ev.port).map_or(0, |p| p.gid_table().valid_count());
                self.0.push(format!("probe: {n} gids"));
            }
        }
    }

    fn setup(log: &Log) -> (RdmaCore, Vec<NetdevInfo>) {
        let net = vec![eth0()];
        let mut core = rxe_core();
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        core.register_event_handler(0, Box::new(LogHandler::new("h", log))).unwrap();
        (core, net)
    }

    fn send(core: &mut RdmaCore, kind: NetdevEventKind, dev: NetdevInfo) {
        core.netdev_event(NetdevEvent::new(kind, dev)).unwrap();
        core.process_events();
    }

    #[test]
    fn port_err_on_down_and_port_active_on_up() {
        let log = Log::default();
        let (mut core, _net) = setup(&log);
        let mut down = eth0();
        down.up = false;
        send(&mut core, NetdevEventKind::Down, down);
        assert_eq!(log.take(), ["h: PORT_ERR rxe0/1"]);
        send(&mut core, NetdevEventKind::Up, eth0());
        // The default GID and 10.0.0.1 are already there: no GID_CHANGE.
        assert_eq!(log.take(), ["h: PORT_ACTIVE rxe0/1"]);
    }

    #[test]
    fn gid_change_comes_after_the_cache_changed() {
        let log = Log::default();
        let (mut core, _net) = setup(&log);
        core.register_event_handler(0, Box::new(CacheProbe(log.clone()))).unwrap();
        let a = Ipv4Addr::new(10, 0, 0, 2);
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(a, 32)), eth0().with_ipv4(a));
        assert_eq!(log.take(), ["h: GID_CHANGE rxe0/1", "probe: 3 gids"]);
        send(&mut core, NetdevEventKind::InetAddrDel(vocab::Ipv4Cidr::new(a, 32)), eth0());
        assert_eq!(log.take(), ["h: GID_CHANGE rxe0/1", "probe: 2 gids"]);
    }

    #[test]
    fn up_with_new_addresses_announces_port_then_gids() {
        let log = Log::default();
        let (mut core, _net) = setup(&log);
        let mut down = eth0();
        down.up = false;
        send(&mut core, NetdevEventKind::Down, down);
        let _ = log.take();
        let up = eth0().with_ipv4(Ipv4Addr::new(10, 0, 0, 9));
        send(&mut core, NetdevEventKind::Up, up);
        assert_eq!(log.take(), ["h: PORT_ACTIVE rxe0/1", "h: GID_CHANGE rxe0/1"]);
    }

    #[test]
    fn handlers_and_clients_share_one_registration_order() {
        let log = Log::default();
        let (mut core, _net) = setup(&log);
        core.register_client(Box::new(LogClient::new("C", &log))).unwrap();
        let late = core.register_event_handler(0, Box::new(LogHandler::new("late", &log))).unwrap();
        let _ = log.take();
        let a = Ipv4Addr::new(10, 0, 0, 7);
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(a, 32)), eth0());
        assert_eq!(log.take(), ["h: GID_CHANGE rxe0/1", "C: GID_CHANGE rxe0/1", "late: GID_CHANGE rxe0/1"]);
        assert!(core.unregister_event_handler(late).is_ok());
        assert!(matches!(core.unregister_event_handler(late), Err(crate::core::error::Error::NoSuchHandler(_))));
        assert!(matches!(
            core.register_event_handler(9, Box::new(LogHandler::new("x", &log))),
            Err(crate::core::error::Error::NoSuchDevice(_))
        ));
    }

    #[test]
    fn events_wait_for_the_queue_to_be_processed() {
        let log = Log::default();
        let (mut core, _net) = setup(&log);
        let mut down = eth0();
        down.up = false;
        core.netdev_event(NetdevEvent::new(NetdevEventKind::Down, down)).unwrap();
        assert!(log.take().is_empty());
        assert_eq!(core.pending_events(), 1);
        assert_eq!(core.process_events(), 1);
        assert_eq!(log.take(), ["h: PORT_ERR rxe0/1"]);
        assert_eq!(core.stats().events_processed, 1);
    }
}
