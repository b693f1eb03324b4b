//! Two appliances on one wire.

use appliance_tests::{Appliance, Nic, Options, free_udp_port};

/// Boots two appliances joined by a UDP socket wire, with the given addresses.
fn pair(ip1: &str, ip2: &str) -> (Appliance, Appliance) {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let node = |mac: &str, local, peer, ip: &str| Options {
        nic: Some(Nic { mac: mac.into(), local_port: local, peer_port: peer }),
        append: format!("ip={ip}"),
        ..Options::default()
    };
    let a = Appliance::boot(node("52:54:00:00:00:01", p1, p2, ip1)).unwrap();
    let b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, ip2)).unwrap();
    (a, b)
}

#[test]
fn two_appliances_ping_each_other() {
    let (mut a, mut b) = pair("10.0.0.1/24", "10.0.0.2/24");
    let out = a.cmd("ping 10.0.0.2 -c 3 -i 100").unwrap();
    assert!(out.contains("3 packets transmitted, 3 received, 0% packet loss"), "{out}");
    assert!(out.contains("64 bytes from 10.0.0.2: icmp_seq=3 time="), "{out}");
    let out = b.cmd("ping 10.0.0.1 -c 2 -i 100 -s 1000").unwrap();
    assert!(out.contains("2 packets transmitted, 2 received"), "{out}");
    assert!(out.contains("1008 bytes from 10.0.0.1"), "{out}");
}

#[test]
fn ip_addr_shows_and_del_makes_ping_fail() {
    let (mut a, mut b) = pair("10.0.0.1/24", "10.0.0.2/24");
    let out = b.cmd("ip addr show").unwrap();
    assert!(out.contains("link/ether 52:54:00:00:00:02 brd ff:ff:ff:ff:ff:ff"), "{out}");
    assert!(out.contains("inet 10.0.0.2/24 scope global eth0"), "{out}");
    b.expect("ip addr add 10.0.0.2/24 dev eth0", "error: ip: 10.0.0.2/24 on eth0: address already assigned").unwrap();
    b.expect("ip addr del 10.0.0.2/24 dev eth9", "error: ip: Cannot find device \"eth9\"").unwrap();
    b.expect("ip addr add 10.0.0.300/24 dev eth0", "error: ip: invalid address \"10.0.0.300/24\"").unwrap();
    assert_eq!(b.cmd("ip addr del 10.0.0.2/24 dev eth0").unwrap(), "");
    let out = a.cmd("ping 10.0.0.2 -c 2 -i 100").unwrap();
    assert!(out.contains("2 packets transmitted, 0 received, 100% packet loss"), "{out}");
    assert_eq!(b.cmd("ip addr add 10.0.0.2/24 dev eth0").unwrap(), "");
    let out = a.cmd("ping 10.0.0.2 -c 1").unwrap();
    assert!(out.contains("1 packets transmitted, 1 received"), "{out}");
}

#[test]
fn ping_without_an_address_or_with_bad_arguments_says_why() {
    let mut a = Appliance::boot(Options {
        nic: Some(Nic { mac: "52:54:00:00:00:09".into(), local_port: free_udp_port(), peer_port: free_udp_port() }),
        ..Options::default()
    })
    .unwrap();
    a.expect("ping 10.0.0.2", "error: ping: connect: Network is unreachable").unwrap();
    a.expect("ping nowhere", "error: ping: unknown host nowhere").unwrap();
    a.expect("ping 10.0.0.2 -c 0", "error: ping: -c 0 is out of range").unwrap();
}
