//! How netdev notifier events change ports and GID tables: the work item the
//! ordered queue runs for each event.
//!
//! Two Linux listeners in one place, applied in this order for each event:
//! - rxe's own notifier (`rxe_notify`) for the device's own netdev: UP → port
//!   ACTIVE, DOWN → port DOWN (+ `link_downed`), CHANGE → follow the carrier,
//!   CHANGEMTU → new active MTU, UNREGISTER → the device is unregistered;
//! - the RoCE GID manager (`roce_gid_mgmt.c`: `netdevice_event`,
//!   `inetaddr_event`, `inet6addr_event`): REGISTER/UP add the default GID and
//!   every address, CHANGEADDR deletes and re-adds the default GID, address
//!   add/del adds/deletes one GID per supported type, UNREGISTER of a VLAN on
//!   top deletes its GIDs. A VLAN netdev counts for the device of its real
//!   netdev (`is_eth_port_of_netdev_filter`); default GIDs come only from the
//!   device's own netdev.
//!
//! Link down leaves the GID table alone: IPv4 addresses stay on a down
//! interface, and the default GID must stay for loopback (seed §4).
//!
//! Every real table change raises one GID_CHANGE; events go out after the
//! whole work item is applied.

use alloc::vec::Vec;

use super::device::{Device, Driver};
use super::error::Error;
use super::event::{IbEvent, IbEventType};
use super::gid::Gid;
use super::gid_cache::{GidAttr, GidTable, NetdevRef};
use super::netdev::{NetdevEvent, NetdevEventKind, NetdevInfo, NetdevProvider};
use super::port::{Port, PortTransition};
use super::rdma_core::RdmaCore;

impl RdmaCore {
    /// One work item: `rxe_notify` for the device's own netdev, then the
    /// `roce_gid_mgmt` side for the GID tables.
    pub(crate) fn process_one(&mut self, ev: &NetdevEvent) {
        // (device index, the event's netdev is the device's own netdev)
        let targets: Vec<(u32, bool)> = self
            .devices
            .iter()
            .filter_map(|d| {
                let bound = d.netdev().ifindex;
                if ev.dev.ifindex == bound {
                    Some((d.index(), true))
                } else if ev.dev.is_vlan() && ev.dev.real_ifindex() == bound {
                    Some((d.index(), false))
                } else {
                    None
                }
            })
            .collect();
        for (index, own) in targets {
            if own && ev.kind == NetdevEventKind::Unregister {
                // rxe: ib_unregister_device_queued; its GIDs go with it.
                let _ = self.unregister_device(index);
                continue;
            }
            let mut events = Vec::new();
            let mut full = 0;
            if let Some(dev) = self.devices.get_mut(index) {
                apply_netdev_event(dev, ev, own, &mut events, &mut full);
            }
            self.stats.gid_table_full += full;
            self.dispatch_all(index, &events);
        }
    }
}

/// Record what a port transition announces and counts.
pub(crate) fn note_transition(
    index: u32,
    port: &Port,
    t: PortTransition,
    link_downed: &mut u64,
    events: &mut Vec<IbEvent>,
) {
    let kind = match t {
        PortTransition::Up => IbEventType::PortActive,
        PortTransition::Down => {
            *link_downed = link_downed.saturating_add(1);
            IbEventType::PortErr
        }
    };
    events.push(IbEvent { device_index: index, port: port.num(), kind });
}

fn gid_changed(index: u32, port: u32, events: &mut Vec<IbEvent>) {
    events.push(IbEvent { device_index: index, port, kind: IbEventType::GidChange });
}

/// Apply one GID table operation on a port; an actual change raises
/// GID_CHANGE, a full table is counted.
fn gid_op(
    index: u32,
    port: &mut Port,
    op: impl FnOnce(&mut GidTable) -> Result<Option<usize>, Error>,
    events: &mut Vec<IbEvent>,
    full: &mut u64,
) {
    match op(port.gid_table_mut()) {
        Ok(Some(_)) => gid_changed(index, port.num(), events),
        Ok(None) => {}
        Err(Error::GidTableFull { .. }) => *full += 1,
        // Zero GIDs and absent entries change nothing and are nobody's
        // emergency: the stack may announce an address we never stored.
        Err(_) => {}
    }
}

/// `add_default_gids`: one default GID per supported type.
fn add_default_gids(index: u32, port: &mut Port, ndev: &NetdevInfo, events: &mut Vec<IbEvent>, full: &mut u64) {
    let r = NetdevRef::new(ndev.ifindex, &ndev.name);
    for t in port.gid_table().default_types().to_vec() {
        gid_op(index, port, |g| g.set_default(t, &r, ndev.mac), events, full);
    }
}

/// `update_gid_ip(GID_ADD / GID_DEL)` for one address on every GID type.
fn update_gid_ip(
    index: u32,
    port: &mut Port,
    add: bool,
    gid: Gid,
    ndev: &NetdevInfo,
    events: &mut Vec<IbEvent>,
    full: &mut u64,
) {
    let types = port.immutable().core_cap_flags.gid_types();
    for t in types {
        if add {
            let attr = GidAttr { gid, gid_type: t, ndev: NetdevRef::new(ndev.ifindex, &ndev.name) };
            gid_op(index, port, |g| g.add(attr), events, full);
        } else {
            gid_op(index, port, |g| g.del(gid, t, ndev.ifindex).map(Some), events, full);
        }
    }
}

/// `_add_netdev_ips`: IPv4 addresses first, then IPv6.
fn add_netdev_ips(index: u32, port: &mut Port, ndev: &NetdevInfo, events: &mut Vec<IbEvent>, full: &mut u64) {
    for a in &ndev.ipv4 {
        update_gid_ip(index, port, true, Gid::from_ipv4(a.address()), ndev, events, full);
    }
    for a in &ndev.ipv6 {
        update_gid_ip(index, port, true, Gid::from_ipv6(a.address()), ndev, events, full);
    }
}

/// `rdma_roce_rescan_device`: default GIDs and addresses of the device's own
/// netdev, then the addresses of VLAN netdevs on top of it, in ifindex order.
pub(crate) fn rescan_device(dev: &mut Device, net: &dyn NetdevProvider, full: &mut u64) {
    let own = dev.netdev.clone();
    let mut uppers = Vec::new();
    net.for_each_netdev(&mut |nd| {
        if nd.ifindex != own.ifindex && nd.is_vlan() && nd.real_ifindex() == own.ifindex {
            uppers.push(nd.clone());
        }
    });
    uppers.sort_by_key(|nd| nd.ifindex);
    let index = dev.index;
    let mut events = Vec::new();
    for port in dev.ports.iter_mut() {
        let before = port.gid_table().clone();
        add_default_gids(index, port, &own, &mut events, full);
        add_netdev_ips(index, port, &own, &mut events, full);
        for up in &uppers {
            add_netdev_ips(index, port, up, &mut events, full);
        }
        push_gid_changes(dev.driver.as_mut(), port, &before);
    }
}

/// Tells the driver which slots of `port`'s GID table changed since
/// `before` (`add_gid` / `del_gid`), in slot order. Comparing the table's
/// few valid entries is cheaper to get right than threading the driver
/// through every table operation above.
pub(crate) fn push_gid_changes(driver: &mut dyn Driver, port: &Port, before: &GidTable) {
    let after = port.gid_table();
    for index in 0..after.len() {
        let (was, is) = (before.query(index).ok().flatten(), after.query(index).ok().flatten());
        match (was, is) {
            (_, Some(a)) if was != Some(a) => driver.add_gid(port.num(), index, a),
            (Some(_), None) => driver.del_gid(port.num(), index),
            _ => {}
        }
    }
}

/// Apply one netdev event to one device. `own`: the event's netdev is the
/// device's own; otherwise it is a VLAN on top of it.
fn apply_netdev_event(dev: &mut Device, ev: &NetdevEvent, own: bool, events: &mut Vec<IbEvent>, full: &mut u64) {
    use NetdevEventKind as K;
    let index = dev.index;
    let nd = &ev.dev;
    if own {
        dev.netdev = nd.clone();
        dev.driver.netdev_changed(nd);
    }
    for port in dev.ports.iter_mut() {
        let before = *port.attr();
        let gids_before = port.gid_table().clone();
        match ev.kind {
            K::Register => {
                if own {
                    add_default_gids(index, port, nd, events, full);
                }
                add_netdev_ips(index, port, nd, events, full);
            }
            K::Up => {
                if own {
                    let t = port.port_up();
                    note_transition(index, port, t, &mut dev.link_downed, events);
                    add_default_gids(index, port, nd, events, full);
                }
                add_netdev_ips(index, port, nd, events, full);
            }
            K::Down => {
                if own {
                    let t = port.port_down(nd.up);
                    note_transition(index, port, t, &mut dev.link_downed, events);
                }
            }
            K::Change => {
                if own {
                    let t = port.follow_netdev(nd);
                    note_transition(index, port, t, &mut dev.link_downed, events);
                }
            }
            K::ChangeAddr { .. } => {
                if own {
                    for t in port.gid_table().default_types().to_vec() {
                        if port.gid_table_mut().del_default(t, nd.ifindex).is_some() {
                            gid_changed(index, port.num(), events);
                        }
                    }
                    add_default_gids(index, port, nd, events, full);
                }
            }
            K::ChangeMtu { .. } => {
                if own {
                    port.set_netdev_mtu(nd.mtu);
                }
            }
            K::ChangeName => port.gid_table_mut().rename_netdev(nd.ifindex, &nd.name),
            K::Unregister => {
                if !port.gid_table_mut().del_all_netdev(nd.ifindex).is_empty() {
                    gid_changed(index, port.num(), events);
                }
            }
            K::InetAddrAdd(a) => update_gid_ip(index, port, true, Gid::from_ipv4(a.address()), nd, events, full),
            K::InetAddrDel(a) => update_gid_ip(index, port, false, Gid::from_ipv4(a.address()), nd, events, full),
            K::Inet6AddrAdd(a) => update_gid_ip(index, port, true, Gid::from_ipv6(a.address()), nd, events, full),
            K::Inet6AddrDel(a) => update_gid_ip(index, port, false, Gid::from_ipv6(a.address()), nd, events, full),
        }
        if *port.attr() != before {
            dev.driver.port_changed(port.num(), port.attr());
        }
        push_gid_changes(dev.driver.as_mut(), port, &gids_before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::RxeCounter;
    use crate::core::gid::GidType;
    use crate::core::netdev::MacAddr;
    use crate::core::port::{IbMtu, PhysState, PortState};
    use crate::core::testutil::{ETH0_MAC, FakeDriver, eth0, rxe_core};
    use alloc::boxed::Box;
    use alloc::format;
    use alloc::rc::Rc;
    use alloc::string::String;
    use alloc::vec;
    use core::net::{Ipv4Addr, Ipv6Addr};

    /// The port's table as `index gid ndev` lines.
    fn table(core: &RdmaCore, dev: u32) -> Vec<String> {
        core.device(dev)
            .and_then(|d| d.port(1))
            .map(|p| p.gid_table().iter().map(|(i, a)| format!("{i} {} {}", a.gid, a.ndev.name)).collect())
            .unwrap_or_default()
    }

    const DEFAULT: &str = "0 fe80:0000:0000:0000:5054:00ff:fe00:0001 eth0";
    const V4_1: &str = "1 0000:0000:0000:0000:0000:ffff:0a00:0001 eth0";

    fn setup() -> RdmaCore {
        let net = vec![eth0()];
        let mut core = rxe_core();
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        core
    }

    fn send(core: &mut RdmaCore, kind: NetdevEventKind, dev: NetdevInfo) {
        core.netdev_event(NetdevEvent::new(kind, dev)).unwrap();
        core.process_events();
    }

    fn v4(d: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, d)
    }

    #[test]
    fn link_add_fills_the_table_like_linux() {
        let core = setup();
        assert_eq!(table(&core, 0), [DEFAULT, V4_1]);
        let port = core.device(0).and_then(|d| d.port(1)).unwrap();
        assert_eq!(port.gid_table().len(), 1024);
        let e = port.gid_table().query(1).unwrap().unwrap();
        assert_eq!(e.gid_type, GidType::RoceV2);
        assert_eq!(port.gid_table().iter().filter(|(_, a)| a.gid_type != GidType::RoceV2).count(), 0);
    }

    #[test]
    fn address_add_del_and_slot_reuse() {
        let mut core = setup();
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(v4(2), 32)), eth0());
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(v4(3), 32)), eth0());
        send(&mut core, NetdevEventKind::InetAddrDel(vocab::Ipv4Cidr::new(v4(1), 32)), eth0());
        assert_eq!(
            table(&core, 0),
            [
                DEFAULT,
                "2 0000:0000:0000:0000:0000:ffff:0a00:0002 eth0",
                "3 0000:0000:0000:0000:0000:ffff:0a00:0003 eth0"
            ]
        );
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(v4(4), 32)), eth0());
        assert_eq!(table(&core, 0)[1], "1 0000:0000:0000:0000:0000:ffff:0a00:0004 eth0");
        // Deleting an address that was never there changes nothing.
        send(&mut core, NetdevEventKind::InetAddrDel(vocab::Ipv4Cidr::new(v4(99), 32)), eth0());
        assert_eq!(table(&core, 0).len(), 4);
        // A duplicate add changes nothing either.
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(v4(4), 32)), eth0());
        assert_eq!(table(&core, 0).len(), 4);
    }

    #[test]
    fn ipv6_addresses_come_and_go_but_the_link_local_is_the_default() {
        let mut core = setup();
        let global: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let ll: Ipv6Addr = "fe80::5054:ff:fe00:1".parse().unwrap();
        send(&mut core, NetdevEventKind::Inet6AddrAdd(vocab::Ipv6Cidr::new(ll, 128)), eth0());
        assert_eq!(table(&core, 0), [DEFAULT, V4_1]);
        send(&mut core, NetdevEventKind::Inet6AddrAdd(vocab::Ipv6Cidr::new(global, 128)), eth0());
        assert_eq!(table(&core, 0)[2], "2 2001:0db8:0000:0000:0000:0000:0000:0001 eth0");
        send(&mut core, NetdevEventKind::Inet6AddrDel(vocab::Ipv6Cidr::new(global, 128)), eth0());
        send(&mut core, NetdevEventKind::Inet6AddrDel(vocab::Ipv6Cidr::new(ll, 128)), eth0());
        assert_eq!(table(&core, 0), [DEFAULT, V4_1]);
    }

    #[test]
    fn default_gid_follows_the_mac_and_guids_do_not() {
        let mut core = setup();
        let mut nd = eth0();
        nd.mac = MacAddr([0x52, 0x54, 0x00, 0xaa, 0xbb, 0xcc]);
        send(&mut core, NetdevEventKind::ChangeAddr { old: vocab::MacAddr::ZERO }, nd);
        assert_eq!(table(&core, 0), ["0 fe80:0000:0000:0000:5054:00ff:feaa:bbcc eth0", V4_1]);
        let dev = core.device(0).unwrap();
        assert_eq!(dev.netdev().mac, MacAddr([0x52, 0x54, 0x00, 0xaa, 0xbb, 0xcc]));
        assert_eq!(format!("{}", dev.attr().node_guid), "5054:00ff:fe00:0001");
    }

    #[test]
    fn link_down_keeps_the_table_and_up_does_not_duplicate() {
        let mut core = setup();
        let mut down = eth0();
        down.up = false;
        send(&mut core, NetdevEventKind::Down, down);
        let port = core.device(0).and_then(|d| d.port(1)).unwrap();
        assert_eq!(port.state(), PortState::Down);
        assert_eq!(port.phys_state(), PhysState::Disabled);
        assert_eq!(table(&core, 0), [DEFAULT, V4_1]);
        assert_eq!(core.counters(0).map(|c| c.get(RxeCounter::LinkDowned)), Some(1));
        send(&mut core, NetdevEventKind::Up, eth0());
        let port = core.device(0).and_then(|d| d.port(1)).unwrap();
        assert_eq!(port.state(), PortState::Active);
        assert_eq!(port.phys_state(), PhysState::LinkUp);
        assert_eq!(table(&core, 0), [DEFAULT, V4_1]);
    }

    #[test]
    fn carrier_loss_means_polling() {
        let mut core = setup();
        let mut nd = eth0();
        nd.carrier = false;
        send(&mut core, NetdevEventKind::Change, nd);
        let port = core.device(0).and_then(|d| d.port(1)).unwrap();
        assert_eq!((port.state(), port.phys_state()), (PortState::Down, PhysState::Polling));
        send(&mut core, NetdevEventKind::Change, eth0());
        let port = core.device(0).and_then(|d| d.port(1)).unwrap();
        assert_eq!(port.state(), PortState::Active);
    }

    #[test]
    fn mtu_follows_the_netdev_and_the_driver_hears_of_it() {
        let changes = Rc::default();
        let net = vec![eth0()];
        let mut core = RdmaCore::with_rxe(Box::new({
            let changes = Rc::clone(&changes);
            move |nd: &NetdevInfo| {
                let mut d = FakeDriver::rxe(nd.mac);
                d.port_changes = Rc::clone(&changes);
                Ok(Box::new(d) as Box<dyn crate::core::device::Driver>)
            }
        }));
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        let mtu = |core: &RdmaCore| core.query_port(0, 1).map(|a| a.active_mtu);
        assert_eq!(mtu(&core), Ok(IbMtu::Mtu1024));
        send(&mut core, NetdevEventKind::ChangeMtu { old: 1500 }, eth0().with_mtu(9000));
        assert_eq!(mtu(&core), Ok(IbMtu::Mtu4096));
        send(&mut core, NetdevEventKind::ChangeMtu { old: 1500 }, eth0().with_mtu(1500));
        assert_eq!(mtu(&core), Ok(IbMtu::Mtu1024));
        let seen: Vec<IbMtu> = changes.borrow().iter().map(|(_, a)| a.active_mtu).collect();
        assert_eq!(seen, [IbMtu::Mtu1024, IbMtu::Mtu4096, IbMtu::Mtu1024]);
    }

    #[test]
    fn a_full_table_refuses_and_counts() {
        let mut core = setup();
        // 1024 slots: the default, 10.0.0.1, then 1022 more fill it.
        for i in 0..1022u32 {
            let a = Ipv4Addr::from(0x0a01_0000 + i);
            core.netdev_event(NetdevEvent::new(NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(a, 32)), eth0()))
                .unwrap();
            if core.pending_events() > 500 {
                core.process_events();
            }
        }
        core.process_events();
        assert_eq!(table(&core, 0).len(), 1024);
        assert_eq!(core.stats().gid_table_full, 0);
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(v4(200), 32)), eth0());
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(v4(201), 32)), eth0());
        assert_eq!(core.stats().gid_table_full, 2);
        let port = core.device(0).and_then(|d| d.port(1)).unwrap();
        assert_eq!(port.gid_table().full_errors(), 2);
        // Freeing a slot lets the next add in, at that slot.
        send(&mut core, NetdevEventKind::InetAddrDel(vocab::Ipv4Cidr::new(v4(1), 32)), eth0());
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(v4(202), 32)), eth0());
        assert_eq!(table(&core, 0)[1], "1 0000:0000:0000:0000:0000:ffff:0a00:00ca eth0");
    }

    #[test]
    fn vlan_addresses_land_in_the_real_devices_table() {
        let mut net = vec![eth0()];
        let vlan = NetdevInfo::new(5, "eth0.100", ETH0_MAC).with_vlan(2, 100).with_ipv4(Ipv4Addr::new(10, 1, 0, 1));
        net.push(vlan.clone());
        let mut core = rxe_core();
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        // The rescan at registration picked up the VLAN's address.
        assert_eq!(table(&core, 0), [DEFAULT, V4_1, "2 0000:0000:0000:0000:0000:ffff:0a01:0001 eth0.100"]);
        let a = Ipv4Addr::new(10, 1, 0, 2);
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(a, 32)), vlan.clone());
        assert_eq!(table(&core, 0).len(), 4);
        // Down on the VLAN does not touch the rxe port.
        send(&mut core, NetdevEventKind::Down, vlan.clone());
        assert_eq!(core.query_port(0, 1).map(|a| a.state), Ok(PortState::Active));
        // Its MAC change makes no default GID: defaults come from eth0 only.
        send(&mut core, NetdevEventKind::ChangeAddr { old: vocab::MacAddr::ZERO }, vlan.clone());
        assert_eq!(table(&core, 0).len(), 4);
        send(&mut core, NetdevEventKind::Unregister, vlan);
        assert_eq!(table(&core, 0), [DEFAULT, V4_1]);
        assert!(core.device(0).is_some());
    }

    #[test]
    fn unrelated_netdevs_are_ignored() {
        let mut core = setup();
        let other = NetdevInfo::new(9, "eth9", MacAddr([2, 0, 0, 0, 0, 9]));
        send(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(v4(50), 32)), other.clone());
        let mut down = other.clone();
        down.up = false;
        send(&mut core, NetdevEventKind::Down, down);
        send(&mut core, NetdevEventKind::Unregister, other);
        assert_eq!(table(&core, 0), [DEFAULT, V4_1]);
        assert_eq!(core.query_port(0, 1).map(|a| a.state), Ok(PortState::Active));
    }

    #[test]
    fn netdev_unregister_removes_the_device() {
        let mut core = setup();
        send(&mut core, NetdevEventKind::Unregister, eth0());
        assert!(core.device(0).is_none());
        assert_eq!(core.devices().count(), 0);
    }

    #[test]
    fn the_queue_keeps_event_order() {
        let mut core = setup();
        let q = |core: &mut RdmaCore, kind| {
            core.netdev_event(NetdevEvent::new(kind, eth0())).unwrap();
        };
        q(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(v4(5), 32)));
        q(&mut core, NetdevEventKind::InetAddrDel(vocab::Ipv4Cidr::new(v4(5), 32)));
        q(&mut core, NetdevEventKind::InetAddrDel(vocab::Ipv4Cidr::new(v4(6), 32)));
        q(&mut core, NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(v4(6), 32)));
        assert_eq!(table(&core, 0), [DEFAULT, V4_1]);
        assert_eq!(core.process_events(), 4);
        assert_eq!(table(&core, 0), [DEFAULT, V4_1, "2 0000:0000:0000:0000:0000:ffff:0a00:0006 eth0"]);
    }

    #[test]
    fn rename_of_the_netdev_is_followed() {
        let mut core = setup();
        let mut nd = eth0();
        nd.name = String::from("lan0");
        send(&mut core, NetdevEventKind::ChangeName, nd);
        assert_eq!(
            table(&core, 0),
            ["0 fe80:0000:0000:0000:5054:00ff:fe00:0001 lan0", "1 0000:0000:0000:0000:0000:ffff:0a00:0001 lan0"]
        );
        assert_eq!(core.device(0).map(|d| d.netdev().name.as_str()), Some("lan0"));
    }

    #[test]
    fn registering_on_a_down_netdev() {
        let mut nd = eth0();
        nd.up = false;
        let net = vec![nd];
        let mut core = rxe_core();
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        let a = core.query_port(0, 1).unwrap();
        assert_eq!((a.state, a.phys_state), (PortState::Down, PhysState::Disabled));
        // The default GID exists even while the link is down.
        assert_eq!(table(&core, 0), [DEFAULT, V4_1]);
        assert_eq!(core.counters(0).map(|c| c.get(RxeCounter::LinkDowned)), Some(1));
    }
}
