//! RDMA clients: the upper layers (uverbs, CM, MAD, ...) that attach to every
//! device (seed §3; Linux `ib_register_client`, `add_client_context`,
//! `remove_client_context`, `assign_client_id`).
//!
//! Rules the core enforces:
//! - a client gets a small id; ids sort in registration order because each new
//!   client takes one more than the highest id in use;
//! - `add` is called for every device already registered (in device index
//!   order) when the client registers, and for each new device in client
//!   registration order;
//! - `remove` runs in reverse registration order when a device goes away;
//! - if `add` fails for a device, the client gets no further callback for that
//!   device: no event, no rename, not even `remove`;
//! - what `add` returns is the per-(device, client) data
//!   (`ib_set_client_data` / `ib_get_client_data`);
//! - unregistering a client removes it from every device first.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use core::any::Any;

use super::device::Device;
use super::error::Error;
use super::event::IbEvent;

/// A client's small id.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct ClientId(pub u32);

/// Per-(device, client) data, owned by the core between `add` and `remove`.
pub type ClientData = Box<dyn Any>;

/// Why a client declined a device.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ClientError {
    /// The client does not work on this kind of device (Linux: EOPNOTSUPP).
    NotSupported,
    /// The client tried and failed.
    Failed(&'static str),
}

/// An upper layer attached to devices (`struct ib_client`).
pub trait Client {
    /// The client's name, for logs and `rdma` tools.
    fn name(&self) -> &str;

    /// A device appeared (or the client just registered). `Ok(data)` keeps
    /// `data` for this device; `Err` means "leave me out of this device".
    fn add(&mut self, dev: &Device) -> Result<Option<ClientData>, ClientError>;

    /// The device is going away; `data` is what `add` returned.
    fn remove(&mut self, dev: &Device, data: Option<ClientData>);

    /// The device was renamed.
    fn rename(&mut self, _dev: &Device, _data: Option<&mut ClientData>) {}

    /// An asynchronous event on a device this client was added to; the
    /// client's handler is registered when its `add` succeeds.
    fn event(&mut self, _ev: &IbEvent, _dev: &Device, _data: Option<&mut ClientData>) {}

    /// Downcast hook for whoever registered the client and wants its state
    /// back ([`RdmaCore::client_mut`](super::RdmaCore::client_mut)).
    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        None
    }
}

/// Bound on registered clients.
pub const MAX_CLIENTS: u32 = 64;

/// The registered clients, by id.
#[derive(Default)]
pub(crate) struct ClientRegistry {
    clients: BTreeMap<ClientId, Box<dyn Client>>,
    /// One more than the highest id in use (`highest_client_id`).
    highest: u32,
}

impl ClientRegistry {
    /// `assign_client_id`: the next id after the highest in use.
    pub(crate) fn insert(&mut self, client: Box<dyn Client>) -> Result<ClientId, Error> {
        if self.highest >= MAX_CLIENTS {
            return Err(Error::TooManyClients);
        }
        let id = ClientId(self.highest);
        self.clients.insert(id, client);
        self.highest += 1;
        Ok(id)
    }

    /// `remove_client_id`: drop the client, then lower `highest` past any
    /// ids no longer used at the top.
    pub(crate) fn remove(&mut self, id: ClientId) -> Option<Box<dyn Client>> {
        let client = self.clients.remove(&id)?;
        while self.highest > 0 && !self.clients.contains_key(&ClientId(self.highest - 1)) {
            self.highest -= 1;
        }
        Some(client)
    }

    pub(crate) fn get_mut(&mut self, id: ClientId) -> Option<&mut Box<dyn Client>> {
        self.clients.get_mut(&id)
    }

    pub(crate) fn contains(&self, id: ClientId) -> bool {
        self.clients.contains_key(&id)
    }

    /// Ids in registration order.
    pub(crate) fn ids(&self) -> alloc::vec::Vec<ClientId> {
        self.clients.keys().copied().collect()
    }

    pub(crate) fn name(&self, id: ClientId) -> Option<&str> {
        self.clients.get(&id).map(|c| c.name())
    }
}

/// Which clients were added to which device, with their data. Present means
/// `add` succeeded; absent means never added or `add` failed.
#[derive(Default)]
pub(crate) struct ClientContexts {
    map: BTreeMap<(u32, ClientId), Option<ClientData>>,
}

impl ClientContexts {
    pub(crate) fn insert(&mut self, dev: u32, id: ClientId, data: Option<ClientData>) {
        self.map.insert((dev, id), data);
    }

    /// `Some(data)` if the client was added to the device.
    pub(crate) fn take(&mut self, dev: u32, id: ClientId) -> Option<Option<ClientData>> {
        self.map.remove(&(dev, id))
    }

    pub(crate) fn is_added(&self, dev: u32, id: ClientId) -> bool {
        self.map.contains_key(&(dev, id))
    }

    pub(crate) fn data(&self, dev: u32, id: ClientId) -> Option<&ClientData> {
        self.map.get(&(dev, id)).and_then(|d| d.as_ref())
    }

    pub(crate) fn data_mut(&mut self, dev: u32, id: ClientId) -> Option<&mut ClientData> {
        self.map.get_mut(&(dev, id)).and_then(|d| d.as_mut())
    }

    /// Clients added to `dev`, in id order.
    pub(crate) fn clients_of(&self, dev: u32) -> alloc::vec::Vec<ClientId> {
        self.map.keys().filter(|(d, _)| *d == dev).map(|(_, c)| *c).collect()
    }

    /// Devices `id` was added to, in index order.
    pub(crate) fn devices_of(&self, id: ClientId) -> alloc::vec::Vec<u32> {
        self.map.keys().filter(|(_, c)| *c == id).map(|(d, _)| *d).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::netdev::{MacAddr, NetdevInfo};
    use crate::core::rdma_core::RdmaCore;
    use crate::core::testutil::{Log, LogClient, NullClient, eth0, rxe_core};
    use alloc::string::String;
    use alloc::vec;
    use alloc::vec::Vec;

    fn net() -> Vec<NetdevInfo> {
        vec![
            eth0(),
            NetdevInfo::new(3, "eth1", MacAddr([0x52, 0x54, 0, 0, 0, 2])),
            NetdevInfo::new(4, "eth2", MacAddr([0x52, 0x54, 0, 0, 0, 3])),
        ]
    }

    fn with_clients(log: &Log, clients: Vec<LogClient>) -> (RdmaCore, Vec<ClientId>) {
        let mut core = rxe_core();
        let ids = clients.into_iter().map(|c| core.register_client(Box::new(c)).unwrap()).collect();
        let _ = log.take();
        (core, ids)
    }

    #[test]
    fn add_in_registration_order_remove_in_reverse() {
        let log = Log::default();
        let net = net();
        let (mut core, _) = with_clients(&log, vec![LogClient::new("A", &log), LogClient::new("B", &log)]);
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        assert_eq!(log.take(), ["A: add rxe0", "B: add rxe0"]);
        // A late client is added to existing devices, then to new ones last.
        core.register_client(Box::new(LogClient::new("C", &log))).unwrap();
        assert_eq!(log.take(), ["C: add rxe0"]);
        core.link_add(&net, "rxe1", "rxe", "eth1").unwrap();
        assert_eq!(log.take(), ["A: add rxe1", "B: add rxe1", "C: add rxe1"]);
        core.link_del(&net, "rxe0").unwrap();
        assert_eq!(log.take(), ["C: remove rxe0 (C@rxe0)", "B: remove rxe0 (B@rxe0)", "A: remove rxe0 (A@rxe0)"]);
    }

    #[test]
    fn new_client_visits_existing_devices_in_index_order() {
        let log = Log::default();
        let net = net();
        let mut core = rxe_core();
        core.link_add(&net, "rxe1", "rxe", "eth1").unwrap();
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        core.register_client(Box::new(LogClient::new("A", &log))).unwrap();
        // rxe1 was registered first, so it has the lower index.
        assert_eq!(log.take(), ["A: add rxe1", "A: add rxe0"]);
    }

    #[test]
    fn failed_add_means_no_further_callbacks_not_even_remove() {
        let log = Log::default();
        let net = net();
        let (mut core, ids) =
            with_clients(&log, vec![LogClient::new("A", &log), LogClient::new("B", &log).refusing("rxe0")]);
        let (a, b) = (ids[0], ids[1]);
        let i0 = core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        let i1 = core.link_add(&net, "rxe1", "rxe", "eth1").unwrap();
        assert_eq!(log.take(), ["A: add rxe0", "B: add rxe0 failed", "A: add rxe1", "B: add rxe1"]);
        assert!(core.client_added(i0, a));
        assert!(!core.client_added(i0, b));
        assert!(core.client_added(i1, b));
        assert_eq!(core.client_data::<String>(i0, b), None);
        // Events, renames and removal skip B on rxe0.
        core.netdev_event(crate::core::netdev::NetdevEvent::new(crate::core::netdev::NetdevEventKind::Down, {
            let mut d = eth0();
            d.up = false;
            d
        }))
        .unwrap();
        core.process_events();
        core.rename_device(i0, "lan0").unwrap();
        core.link_del(&net, "lan0").unwrap();
        assert_eq!(log.take(), ["A: PORT_ERR rxe0/1", "A: rename lan0 (A@rxe0)", "A: remove lan0 (A@rxe0)"]);
        // Unregistering B removes it from rxe1 only.
        core.unregister_client(b).unwrap();
        assert_eq!(log.take(), ["B: remove rxe1 (B@rxe1)"]);
    }

    #[test]
    fn per_device_client_data() {
        let log = Log::default();
        let net = net();
        let (mut core, ids) = with_clients(&log, vec![LogClient::new("A", &log), LogClient::new("B", &log)]);
        let i0 = core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        let i1 = core.link_add(&net, "rxe1", "rxe", "eth1").unwrap();
        assert_eq!(core.client_data::<String>(i0, ids[0]).map(String::as_str), Some("A@rxe0"));
        assert_eq!(core.client_data::<String>(i1, ids[1]).map(String::as_str), Some("B@rxe1"));
        // Asking for the wrong type is a miss, not a panic.
        assert_eq!(core.client_data::<u32>(i0, ids[0]), None);
        assert_eq!(core.client_data::<String>(9, ids[0]), None);
        assert_eq!(core.client_name(ids[1]), Some("B"));
    }

    #[test]
    fn unregistering_a_client_removes_it_from_every_device() {
        let log = Log::default();
        let net = net();
        let (mut core, ids) = with_clients(&log, vec![LogClient::new("A", &log), LogClient::new("B", &log)]);
        for (name, ndev) in [("rxe0", "eth0"), ("rxe1", "eth1")] {
            core.link_add(&net, name, "rxe", ndev).unwrap();
        }
        let _ = log.take();
        let back = core.unregister_client(ids[0]).unwrap();
        assert_eq!(back.name(), "A");
        assert_eq!(log.take(), ["A: remove rxe0 (A@rxe0)", "A: remove rxe1 (A@rxe1)"]);
        assert!(!core.client_added(0, ids[0]));
        assert!(matches!(core.unregister_client(ids[0]), Err(Error::NoSuchClient(0))));
        // Gone for good: a new device does not reach it.
        core.link_add(&net, "rxe2", "rxe", "eth2").unwrap();
        assert_eq!(log.take(), ["B: add rxe2"]);
    }

    #[test]
    fn device_unregister_with_no_clients_is_quiet() {
        let net = net();
        let mut core = rxe_core();
        core.register_client(Box::new(NullClient)).unwrap();
        let i = core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        assert_eq!(core.unregister_device(i), Ok(()));
        assert!(matches!(core.unregister_device(i), Err(Error::NoSuchDevice(_))));
    }

    #[test]
    fn ids_are_small_and_sorted_by_registration() {
        let mut r = ClientRegistry::default();
        let a = r.insert(Box::new(NullClient)).unwrap();
        let b = r.insert(Box::new(NullClient)).unwrap();
        let c = r.insert(Box::new(NullClient)).unwrap();
        assert_eq!((a, b, c), (ClientId(0), ClientId(1), ClientId(2)));
        // Removing a middle id does not let a newcomer sort before c.
        r.remove(b);
        assert_eq!(r.insert(Box::new(NullClient)).unwrap(), ClientId(3));
        // Removing the top ids lets the next one reuse them.
        r.remove(ClientId(3));
        r.remove(c);
        assert_eq!(r.insert(Box::new(NullClient)).unwrap(), ClientId(1));
        assert_eq!(r.ids(), [ClientId(0), ClientId(1)]);
    }

    #[test]
    fn client_table_is_bounded() {
        let mut r = ClientRegistry::default();
        for _ in 0..MAX_CLIENTS {
            r.insert(Box::new(NullClient)).unwrap();
        }
        assert!(matches!(r.insert(Box::new(NullClient)), Err(Error::TooManyClients)));
    }

    #[test]
    fn contexts_track_added_pairs() {
        let mut cx = ClientContexts::default();
        cx.insert(0, ClientId(1), Some(Box::new(7u32)));
        cx.insert(1, ClientId(1), None);
        cx.insert(0, ClientId(0), None);
        assert!(cx.is_added(0, ClientId(1)));
        assert!(!cx.is_added(2, ClientId(1)));
        assert_eq!(cx.data(0, ClientId(1)).and_then(|d| d.downcast_ref::<u32>()), Some(&7));
        assert_eq!(cx.clients_of(0), [ClientId(0), ClientId(1)]);
        assert_eq!(cx.devices_of(ClientId(1)), [0, 1]);
        assert!(cx.take(0, ClientId(1)).is_some());
        assert!(cx.take(0, ClientId(1)).is_none());
    }
}
