//! The facts, end to end through the public API only: the same
//! netdev configuration as the Debian 12 / Linux 6.1 observation must give the
//! same `rdma link show` line, GID table, `show_gids` and `ibv_devinfo`
//! numbers, and the console session the QEMU test will run must behave.

use std::boxed::Box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::string::String;
use std::vec::Vec;

use rdma::core::console;
use rdma::core::port::{IbMtu, PortState};
use rdma::core::{
    DeviceAttr, Driver, DriverId, Error, MacAddr, NetdevEvent, NetdevEventKind, NetdevInfo, NetdevProvider, OpSet,
    PortAttr, PortImmutable, RdmaCore, rxe_params,
};

/// An rxe driver answering with Linux rxe's parameters.
struct Rxe {
    mac: MacAddr,
}

impl Driver for Rxe {
    fn driver_id(&self) -> DriverId {
        DriverId::RXE
    }
    fn ops(&self) -> OpSet {
        rxe_params::ops()
    }
    fn phys_port_cnt(&self) -> u32 {
        1
    }
    fn query_device(&self) -> Result<DeviceAttr, Error> {
        Ok(rxe_params::device_attr(self.mac))
    }
    fn query_port(&self, _port: u32) -> Result<PortAttr, Error> {
        Ok(rxe_params::port_attr())
    }
    fn get_port_immutable(&self, _port: u32) -> Result<PortImmutable, Error> {
        Ok(rxe_params::port_immutable())
    }
}

const MAC: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x01]);

fn eth0() -> NetdevInfo {
    NetdevInfo::new(2, "eth0", MAC)
        .with_ipv4(Ipv4Addr::new(10, 0, 0, 1))
        .with_ipv6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0x5054, 0x00ff, 0xfe00, 0x0001))
}

fn core() -> RdmaCore {
    RdmaCore::with_rxe(Box::new(|nd: &NetdevInfo| Ok(Box::new(Rxe { mac: nd.mac }) as Box<dyn Driver>)))
}

fn sh(core: &mut RdmaCore, net: &dyn NetdevProvider, line: &str) -> Result<String, Error> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut out = String::new();
    console::run(core, net, &words, &mut out).map(|()| out)
}

#[test]
fn linux_6_1_observation_is_reproduced() {
    let net = vec![eth0()];
    let mut core = core();
    assert_eq!(sh(&mut core, &net, "rdma link add rxe0 type rxe netdev eth0").as_deref(), Ok(""));
    assert_eq!(
        sh(&mut core, &net, "rdma link show").as_deref(),
        Ok("link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0 \n")
    );

    // GID[0] and GID[1] as Linux shows them; the other 1022 slots empty.
    let dev = core.device_by_name("rxe0").expect("rxe0 registered");
    let table = dev.port(1).expect("port 1").gid_table();
    assert_eq!(table.len(), 1024);
    let g0 = table.query(0).unwrap().expect("GID[0]");
    let g1 = table.query(1).unwrap().expect("GID[1]");
    assert_eq!(g0.gid.to_string(), "fe80:0000:0000:0000:5054:00ff:fe00:0001");
    assert_eq!(g1.gid.to_string(), "0000:0000:0000:0000:0000:ffff:0a00:0001");
    for g in [g0, g1] {
        assert_eq!(g.gid_type.sysfs_name(), "RoCE v2");
        assert_eq!(g.ndev.name, "eth0");
    }
    assert!((2..1024).all(|i| table.query(i) == Ok(None)));

    let info = sh(&mut core, &net, "ibv_devinfo -v").unwrap();
    for expect in [
        "\ttransport:\t\t\tInfiniBand (0)\n",
        "\tnode_guid:\t\t\t5054:00ff:fe00:0001\n",
        "\tvendor_id:\t\t\t0xffffff\n",
        "\tmax_qp:\t\t\t\t1048560\n",
        "\tmax_qp_wr:\t\t\t1048576\n",
        "\tmax_sge:\t\t\t32\n",
        "\tmax_cqe:\t\t\t32767\n",
        "\tmax_mr:\t\t\t\t524287\n",
        "\tmax_pd:\t\t\t\t1048576\n",
        "\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
        "\t\t\tmax_mtu:\t\t4096 (5)\n",
        "\t\t\tactive_mtu:\t\t1024 (3)\n",
        "\t\t\tport_lid:\t\t0\n",
        "\t\t\tlink_layer:\t\tEthernet\n",
    ] {
        assert!(info.contains(expect), "missing {expect:?}");
    }
}

#[test]
fn jumbo_netdev_gives_4096() {
    let nd = eth0().with_mtu(9000);
    let net = vec![nd];
    let mut core = core();
    let i = core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
    assert_eq!(core.query_port(i, 1).map(|a| a.active_mtu), Ok(IbMtu::Mtu4096));
}

#[test]
fn console_session_like_the_qemu_test() {
    let mut net = vec![eth0()];
    let mut core = core();
    sh(&mut core, &net, "rdma link add rxe0 type rxe netdev eth0").unwrap();
    let gids = sh(&mut core, &net, "show_gids").unwrap();
    assert!(gids.contains("rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1  \tv2\teth0\n"));
    assert!(gids.ends_with("n_gids_found=2\n"));

    // ip addr add 10.0.0.2/24 dev eth0
    let added = Ipv4Addr::new(10, 0, 0, 2);
    net[0] = net[0].clone().with_ipv4(added);
    core.netdev_event(NetdevEvent::new(NetdevEventKind::InetAddrAdd(vocab::Ipv4Cidr::new(added, 32)), net[0].clone()))
        .unwrap();
    core.process_events();
    let gids = sh(&mut core, &net, "show_gids rxe0").unwrap();
    assert!(gids.contains("rxe0\t1\t2\t0000:0000:0000:0000:0000:ffff:0a00:0002\t10.0.0.2  \tv2\teth0\n"));
    assert!(gids.ends_with("n_gids_found=3\n"));

    // ip addr del 10.0.0.1/24 dev eth0
    net[0].ipv4.retain(|a| a.address() != Ipv4Addr::new(10, 0, 0, 1));
    core.netdev_event(NetdevEvent::new(
        NetdevEventKind::InetAddrDel(vocab::Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 1), 32)),
        net[0].clone(),
    ))
    .unwrap();
    core.process_events();
    let gids = sh(&mut core, &net, "show_gids").unwrap();
    assert!(!gids.contains("10.0.0.1 "));
    assert!(gids.ends_with("n_gids_found=2\n"));

    // ip link set eth0 down
    net[0].up = false;
    core.netdev_event(NetdevEvent::new(NetdevEventKind::Down, net[0].clone())).unwrap();
    core.process_events();
    assert_eq!(
        sh(&mut core, &net, "rdma link").as_deref(),
        Ok("link rxe0/1 state DOWN physical_state DISABLED netdev eth0 \n")
    );
    assert_eq!(core.query_port(0, 1).map(|a| a.state), Ok(PortState::Down));
    assert!(sh(&mut core, &net, "rdma statistic").unwrap().contains(" link_downed 1 "));

    // Refusals read as Linux's iproute2 prints them (netlink's errno).
    let e = sh(&mut core, &net, "rdma link add rxe1 type rxe netdev eth0").unwrap_err();
    assert_eq!(e.to_string(), "File exists");
    let e = sh(&mut core, &net, "rdma link add rxe1 type rxe netdev eth5").unwrap_err();
    assert_eq!(e.to_string(), "No such device");

    sh(&mut core, &net, "rdma link delete rxe0").unwrap();
    assert_eq!(sh(&mut core, &net, "show_gids").unwrap().lines().last(), Some("n_gids_found=0"));
}
