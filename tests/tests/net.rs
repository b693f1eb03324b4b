//! Two appliances on one wire: ping, addresses, link events, steering and
//! counters, and a capture of the wire.

#![deny(unsafe_code)]

use std::net::UdpSocket;
use std::time::Duration;
use tests::{Appliance, Nic, Options, free_udp_port};

fn node(mac: &str, local: u16, peer: u16, ip: &str) -> Options {
    Options {
        nic: Some(Nic::new(mac, local, peer)),
        append: if ip.is_empty() { String::new() } else { format!("ip={ip}") },
        ..Options::default()
    }
}

/// Boots two appliances joined by a UDP socket wire, with the given addresses.
fn pair(ip1: &str, ip2: &str) -> (Appliance, Appliance) {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let a = Appliance::boot(node("52:54:00:00:00:01", p1, p2, ip1)).unwrap();
    let b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, ip2)).unwrap();
    (a, b)
}

#[test]
fn two_appliances_ping_each_other() {
    let (mut a, mut b) = pair("10.0.0.1/24", "10.0.0.2/24");
    let out = a.cmd("ping 10.0.0.2 -c 3 -i 100").unwrap();
    assert!(out.contains("3 packets transmitted, 3 received, 0% packet loss"), "{out}");
    assert!(out.contains("64 bytes from 10.0.0.2: icmp_seq=3 ttl=64 time="), "{out}");
    assert!(out.contains("rtt min/avg/max/mdev = "), "{out}");
    let out = b.cmd("ping 10.0.0.1 -c 2 -i 100 -s 1000").unwrap();
    assert!(out.contains("2 packets transmitted, 2 received"), "{out}");
    assert!(out.contains("1008 bytes from 10.0.0.1"), "{out}");
    // Each learnt the other as Linux would: the asker from the reply to its
    // request (smoltcp's, for `ping`), the answerer from the request.
    let out = a.cmd("ip neigh").unwrap();
    assert!(out.contains("10.0.0.2 dev eth0 lladdr 52:54:00:00:00:02 REACHABLE"), "{out}");
    let out = b.cmd("ip -4 neigh").unwrap();
    assert!(out.contains("10.0.0.1 dev eth0 lladdr 52:54:00:00:00:01 "), "{out}");
}

/// IPv6 between two appliances: the link-local addresses from the MACs,
/// `ip -6 addr` in iproute2's filtered shape, ICMPv6 echo to a link-local and
/// to a global address (smoltcp resolves through neighbour discovery and
/// answers the peer's solicitations), and the RDMA path's IPv6 neighbour
/// table learning from the solicitations it sees.
#[test]
fn ipv6_addresses_ping_and_neighbours() {
    let (mut a, mut b) = pair("10.0.0.1/24", "10.0.0.2/24");
    let out = a.cmd("ip -6 addr").unwrap();
    assert!(out.contains("2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP"), "{out}");
    assert!(out.contains("    inet6 fe80::5054:ff:fe00:1/64 scope link"), "{out}");
    assert!(!out.contains("link/ether") && !out.contains("inet "), "only IPv6 lines:\n{out}");
    let out = a.cmd("ip -4 addr").unwrap();
    assert!(out.contains("inet 10.0.0.1/24") && !out.contains("inet6"), "{out}");

    let out = a.cmd("ping fe80::5054:ff:fe00:2 -c 3 -i 100").unwrap();
    assert!(out.contains("PING fe80::5054:ff:fe00:2(fe80::5054:ff:fe00:2) 56 data bytes"), "{out}");
    assert!(out.contains("3 packets transmitted, 3 received, 0% packet loss"), "{out}");
    assert!(out.contains("64 bytes from fe80::5054:ff:fe00:2: icmp_seq=3 ttl=64 time="), "{out}");
    // a learnt b from the advertisement its ping asked for.
    let out = a.cmd("ip -6 neigh").unwrap();
    assert!(out.contains("fe80::5054:ff:fe00:2 dev eth0 lladdr 52:54:00:00:00:02 REACHABLE"), "{out}");
    // b learnt a from a's solicitation for b's address.
    let out = b.cmd("ip -6 neigh").unwrap();
    assert!(out.contains("fe80::5054:ff:fe00:1 dev eth0 lladdr 52:54:00:00:00:01 STALE"), "{out}");
    let out = b.cmd("ip -4 neigh").unwrap();
    assert!(!out.contains("fe80::"), "{out}");

    a.cmd("ip -6 addr add 2001:db8::1/64 dev eth0").unwrap();
    b.cmd("ip addr add 2001:db8::2/64 dev eth0").unwrap();
    let out = a.cmd("ip -6 addr show dev eth0").unwrap();
    assert!(out.contains("inet6 2001:db8::1/64 scope global \n"), "{out}");
    let out = b.cmd("ping 2001:db8::1 -c 2 -i 100 -s 1000").unwrap();
    assert!(out.contains("2 packets transmitted, 2 received"), "{out}");
    assert!(out.contains("1008 bytes from 2001:db8::1: icmp_seq=2"), "{out}");
    let out = a.cmd("ip neigh").unwrap();
    assert!(out.contains(" dev eth0 lladdr 52:54:00:00:00:02 STALE"), "{out}");
    a.cmd("ip -6 addr del 2001:db8::1/64 dev eth0").unwrap();
    let out = b.cmd("ping 2001:db8::1 -c 2 -i 100").unwrap();
    assert!(out.contains("2 packets transmitted, 0 received, 100% packet loss"), "{out}");
    let out = a.cmd("ping fe80::5054:ff:fe00:2%eth0 -c 1").unwrap();
    assert!(out.contains("1 packets transmitted, 1 received"), "{out}");
    let out = a.cmd("ping fe80::5054:ff:fe00:2%eth7 -c 1").unwrap();
    assert!(out.starts_with("error: ") && out.lines().count() == 1, "{out}");
}

#[test]
fn ip_addr_shows_and_del_makes_ping_fail() {
    let (mut a, mut b) = pair("10.0.0.1/24", "10.0.0.2/24");
    let out = b.cmd("ip addr show").unwrap();
    assert!(out.contains("2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP"), "{out}");
    assert!(out.contains("link/ether 52:54:00:00:00:02 brd ff:ff:ff:ff:ff:ff"), "{out}");
    assert!(out.contains("inet 10.0.0.2/24 scope global eth0"), "{out}");
    assert!(out.contains("inet6 fe80::5054:ff:fe00:2/64 scope link"), "{out}");
    for (line, error) in [
        ("ip addr add 10.0.0.2/24 dev eth0", "error: ip: address 10.0.0.2/24 already assigned to eth0"),
        ("ip addr del 10.0.0.2/24 dev eth9", "error: ip: Cannot find device \"eth9\""),
        ("ip addr add 10.0.0.300/24 dev eth0", "error: ip: invalid address \"10.0.0.300/24\""),
        ("ip link set eth0 sideways", "error: "),
    ] {
        let out = b.cmd(line).unwrap();
        assert_eq!(out.lines().count(), 1, "`{line}`:\n{out}");
        assert!(out.starts_with(error), "`{line}`:\n{out}");
    }
    let out = b.cmd("ip addr del 10.0.0.2/24 dev eth0").unwrap();
    assert!(out.contains("inetaddr NETDEV_DOWN 10.0.0.2/24"), "{out}");
    let out = a.cmd("ping 10.0.0.2 -c 2 -i 100").unwrap();
    assert!(out.contains("2 packets transmitted, 0 received, 100% packet loss"), "{out}");
    b.cmd("ip addr add 10.0.0.2/24 dev eth0").unwrap();
    let out = a.cmd("ping 10.0.0.2 -c 1").unwrap();
    assert!(out.contains("1 packets transmitted, 1 received"), "{out}");
}

#[test]
fn link_down_and_up_emit_events_in_order_and_stop_traffic() {
    let (mut a, mut b) = pair("10.0.0.1/24", "10.0.0.2/24");
    let down = b.cmd("ip link set eth0 down").unwrap();
    let lines: Vec<&str> = down.lines().map(|l| l.split("appliance::net: ").nth(1).unwrap_or(l)).collect();
    assert_eq!(lines, ["eth0: NETDEV_DOWN", "eth0: inet6addr NETDEV_DOWN fe80::5054:ff:fe00:2/64"], "{down}");
    assert!(b.cmd("ip link show").unwrap().contains("<BROADCAST,MULTICAST> mtu 1500 qdisc noqueue state DOWN"));
    let out = a.cmd("ping 10.0.0.2 -c 1").unwrap();
    assert!(out.contains("1 packets transmitted, 0 received"), "{out}");
    let up = b.cmd("ip link set eth0 up").unwrap();
    let lines: Vec<&str> = up.lines().map(|l| l.split("appliance::net: ").nth(1).unwrap_or(l)).collect();
    assert_eq!(lines, ["eth0: NETDEV_UP", "eth0: inet6addr NETDEV_UP fe80::5054:ff:fe00:2/64"], "{up}");
    let out = a.cmd("ping 10.0.0.2 -c 1").unwrap();
    assert!(out.contains("1 packets transmitted, 1 received"), "{out}");
    // The boot sequence came through the same chain, in order.
    let boot = b.transcript();
    let order = ["NETDEV_REGISTER", "eth0: NETDEV_UP", "inet6addr NETDEV_UP", "inetaddr NETDEV_UP 10.0.0.2/24"];
    let at: Vec<usize> = order.iter().map(|e| boot.find(e).unwrap_or_else(|| panic!("no {e}:\n{boot}"))).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{boot}");
}

/// One appliance at 10.0.0.1/24 on a wire whose other end is a socket of
/// the test's: frames sent from it to the returned port reach the appliance.
fn alone_on_a_wire() -> (Appliance, UdpSocket, u16) {
    let (wire, port) = (free_udp_port(), free_udp_port());
    let a = Appliance::boot(node("52:54:00:00:00:01", port, wire, "10.0.0.1/24")).unwrap();
    (a, UdpSocket::bind(("127.0.0.1", wire)).unwrap(), port)
}

#[test]
fn malformed_frames_are_dropped_and_counted() {
    let (mut a, inject, port) = alone_on_a_wire();
    let mac = [0x52, 0x54, 0, 0, 0, 1];
    let eth = |ethertype: [u8; 2], rest: &[u8]| [&mac[..], &[2, 0, 0, 0, 0, 9], &ethertype, rest].concat();
    let mut ipv4 = vec![0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 9, 10, 0, 0, 1];
    let frames = [
        vec![1, 2, 3],                    // runt
        eth([0x88, 0xb5], &[0; 50]),      // unknown ethertype
        eth([0x08, 0x00], &[0x45, 0, 0]), // truncated IPv4 header
        eth([0x08, 0x00], &[0x65; 40]),   // IP version 6 in an IPv4 ethertype
        eth([0x08, 0x00], &{
            ipv4[3] = 200;
            ipv4.clone()
        }), // total length beyond the frame
        eth([0x08, 0x00], &{
            ipv4[3] = 24;
            [ipv4.clone(), vec![0x12, 0xb7, 0x12]].concat()
        }), // truncated UDP
    ];
    for f in &frames {
        inject.send_to(f, ("127.0.0.1", port)).unwrap();
    }
    // Still alive and answering; the drops are counted.
    std::thread::sleep(Duration::from_millis(300));
    let out = a.cmd("ip -s link").unwrap();
    let c = tests::iplink::counters(&out);
    let rx = |k: &str| c.get(k).copied().unwrap_or_else(|| panic!("no {k}:\n{out}"));
    let dropped = rx("rx errors") + rx("rx dropped");
    assert!(dropped >= frames.len() as u64, "{out}");
    assert!(a.cmd("version").unwrap().starts_with("RoCE appliance"));
}

/// ARP has no checksum: a frame whose sender MAC was damaged on the wire (the
/// soak's corrupting relay did it once, and A sent B's traffic to a MAC
/// nobody had for 30 s) must teach nothing. Its sender MAC disagrees with the
/// frame's source, so it is dropped and counted, and the entry keeps its MAC.
#[test]
fn an_arp_frame_damaged_on_the_wire_teaches_nothing() {
    let (mut a, inject, port) = alone_on_a_wire();
    let station = [2, 0, 0, 0, 0, 9];
    // Who has 10.0.0.1? Tell 10.0.0.9, at `sha`; sent from `station`.
    let request = |sha: [u8; 6]| {
        let mut f = tests::echo::arp_request(tests::echo::Endpoint { mac: sha, ip: [10, 0, 0, 9] }, [10, 0, 0, 1]);
        f[6..12].copy_from_slice(&station);
        f
    };
    inject.send_to(&request(station), ("127.0.0.1", port)).unwrap();
    let learnt = "10.0.0.9 dev eth0 lladdr 02:00:00:00:00:09 ";
    let mut out = String::new();
    for _ in 0..50 {
        out = a.cmd("ip neigh").unwrap();
        if out.contains(learnt) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(out.contains(learnt), "the requester is learnt:\n{out}");
    // The same request with one bit of its sender MAC flipped.
    let mut damaged = station;
    damaged[5] ^= 2;
    inject.send_to(&request(damaged), ("127.0.0.1", port)).unwrap();
    // Taken in: refused (counted), or, as before this check, given to the
    // neighbour tables (a second frame steered to ARP).
    let mut link = String::new();
    for _ in 0..50 {
        link = a.cmd("ip -s link show dev eth0").unwrap();
        if link.contains("arp_sender 1") || link.contains(" arp 2 ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = a.cmd("ip neigh").unwrap();
    assert!(out.contains(learnt) && !out.contains("02:00:00:00:00:0b"), "the entry keeps its MAC:\n{out}");
    assert!(link.contains("arp_sender 1") && link.contains(" arp 1 "), "the damaged frame is counted:\n{link}");
}

#[test]
fn rdma_link_follows_the_netdev() {
    let (mut a, _b) = pair("10.0.0.1/24", "10.0.0.2/24");
    assert!(a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    assert_eq!(a.cmd("rdma link show").unwrap().trim(), "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0");
    let gids = a.cmd("show_gids").unwrap();
    assert!(gids.contains("rxe0\t1\t0\tfe80:0000:0000:0000:5054:00ff:fe00:0001"), "{gids}");
    assert!(gids.contains("rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1"), "{gids}");
    assert!(gids.contains("n_gids_found=2"), "{gids}");
    // A new address takes the next slot; removing one frees its slot, which is reused.
    a.cmd("ip addr add 10.0.0.7/24 dev eth0").unwrap();
    a.cmd("ip addr del 10.0.0.1/24 dev eth0").unwrap();
    let gids = a.cmd("show_gids").unwrap();
    assert!(gids.contains("rxe0\t1\t2\t0000:0000:0000:0000:0000:ffff:0a00:0007\t10.0.0.7"), "{gids}");
    assert!(!gids.contains("10.0.0.1"), "{gids}");
    a.cmd("ip addr add 10.0.0.9/24 dev eth0").unwrap();
    assert!(a.cmd("show_gids").unwrap().contains("rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a00:0009"));
    // Port state follows the link, and the console's client of the core
    // logs each change as Linux's rxe does.
    let down = a.cmd("ip link set eth0 down").unwrap();
    assert!(down.contains("rxe0: set down"), "{down}");
    assert!(a.cmd("rdma link show").unwrap().contains("state DOWN physical_state DISABLED"));
    let up = a.cmd("ip link set eth0 up").unwrap();
    assert!(up.contains("rxe0: set active"), "{up}");
    assert!(a.cmd("rdma link show").unwrap().contains("state ACTIVE physical_state LINK_UP"));
    let info = a.cmd("ibv_devinfo").unwrap();
    for want in
        ["hca_id:\trxe0", "node_guid:\t\t\t5054:00ff:fe00:0001", "active_mtu:\t\t1024 (3)", "link_layer:\t\tEthernet"]
    {
        assert!(info.contains(want), "no {want:?} in:\n{info}");
    }
    assert_eq!(
        a.cmd("rdma dev show").unwrap().trim(),
        // As Linux's rxe: no firmware string, so no `fw` field.
        "0: rxe0: node_type ca node_guid 5054:00ff:fe00:0001 sys_image_guid 5054:00ff:fe00:0001"
    );
    let stats = a.cmd("rdma statistic show").unwrap();
    for counter in ["sent_pkts 0", "rcvd_pkts 0", "retry_exceeded_err 0", "rdma_recvs 0"] {
        assert!(stats.contains(counter), "no {counter:?} in:\n{stats}");
    }
    // Refusals are one clear line each.
    for (line, error) in [
        // What Linux's iproute2 prints for these two (netlink's errno).
        ("rdma link add rxe1 type rxe netdev eth0", "error: File exists"),
        ("rdma link add rxe1 type foo netdev eth0", "error: rdma: unknown link type \"foo\""),
        ("rdma link add rxe1 type rxe netdev eth7", "error: No such device"),
        ("rdma frobnicate", "error: rdma: command \"frobnicate\" is unknown"),
    ] {
        let out = a.cmd(line).unwrap();
        assert_eq!(out.lines().count(), 1, "`{line}`:\n{out}");
        assert!(out.starts_with(error), "`{line}`:\n{out}");
    }
    assert_eq!(a.cmd("rdma link delete rxe0").unwrap(), "");
    assert_eq!(a.cmd("rdma link show").unwrap().trim(), "");
}

/// A deep wire (`Nic::deep`): the harness opens each end, bound and connected
/// to its peer with a 2 MiB receive buffer, and QEMU sends and receives on
/// the socket it is handed. Pings cross it both ways, and the sockets on its
/// ports hold the buffer asked for (`ss`'s `rb`), ten times QEMU's own.
#[test]
fn a_deep_wire_carries_frames_with_the_buffer_asked_for() {
    use tests::udp_wire::{DEEP_BUFFER, qemu_takes_connected_socket};
    assert!(qemu_takes_connected_socket(&tests::qemu_binary()), "the set-up installs QEMU 10, which takes a socket");
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let deep = |mac: &str, local, peer, ip: &str| Options {
        nic: Some(Nic::new(mac, local, peer).deep()),
        ..node(mac, local, peer, ip)
    };
    let mut a = Appliance::boot(deep("52:54:00:00:00:01", p1, p2, "10.0.0.1/24")).unwrap();
    let mut b = Appliance::boot(deep("52:54:00:00:00:02", p2, p1, "10.0.0.2/24")).unwrap();
    let out = a.cmd("ping 10.0.0.2 -c 3 -i 100").unwrap();
    assert!(out.contains("3 packets transmitted, 3 received"), "{out}");
    let out = b.cmd("ping 10.0.0.1 -c 2 -i 100 -s 1000").unwrap();
    assert!(out.contains("2 packets transmitted, 2 received"), "{out}");
    for port in [p1, p2] {
        let ss = std::process::Command::new("ss").args(["-u", "-a", "-n", "-m", &format!("sport = :{port}")]).output();
        let text = ss.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        let rb: Option<usize> =
            text.split("rb").nth(1).and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok());
        assert!(rb.is_some_and(|rb| rb >= DEEP_BUFFER), "port {port}: {text}");
    }
}

#[test]
fn netbench_frames_reach_the_peer() {
    let (mut a, mut b) = pair("10.0.0.1/24", "10.0.0.2/24");
    let out = a.cmd("netbench send 10.0.0.2 1514 200").unwrap();
    let sent: u64 = out.split_whitespace().nth(2).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{out}"));
    assert!(sent > 0, "{out}");
    std::thread::sleep(Duration::from_millis(200));
    let rx = b.cmd("netbench rx").unwrap();
    let got: u64 = rx.split_whitespace().nth(2).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{rx}"));
    assert!(got > 0 && got <= sent, "sent {sent}, received {rx}");
    // The other senders' work per frame: headers only, and a copy with an ICRC.
    for (mode, says) in [("prebuilt", "prebuilt: headers only"), ("icrc", "a copy and an ICRC per frame, by ")] {
        b.cmd("netbench reset").unwrap();
        let out = a.expect(&format!("netbench send 10.0.0.2 1514 200 {mode}"), says).unwrap();
        let sent: u64 = out.split_whitespace().nth(2).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{out}"));
        std::thread::sleep(Duration::from_millis(200));
        let rx = b.cmd("netbench rx").unwrap();
        let got: u64 = rx.split_whitespace().nth(2).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{rx}"));
        assert!(sent > 0 && got > 0 && got <= sent, "{mode}: sent {out}, received {rx}");
    }
    a.expect("netbench send 10.0.0.2 20 10", "error: netbench: frame length '20' is not in 60..=1514").unwrap();
    a.expect("netbench send 10.0.0.2 1514 10 fast", "error: netbench: 'fast' is not a mode (copy, prebuilt, icrc)")
        .unwrap();
}

#[test]
fn ping_without_an_address_or_with_bad_arguments_says_why() {
    let mut a = Appliance::boot(node("52:54:00:00:00:09", free_udp_port(), free_udp_port(), "")).unwrap();
    a.expect("ping 10.0.0.2", "error: ping: connect: Network is unreachable").unwrap();
    let out = a.cmd("ping nowhere").unwrap();
    assert!(out.starts_with("error: ") && out.lines().count() == 1, "{out}");
    let out = a.cmd("ping 10.0.0.2 -c 0").unwrap();
    assert!(out.starts_with("error: ") && out.lines().count() == 1, "{out}");
}

/// The Internet checksum over `data` (0 when a stored checksum verifies).
fn inet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[test]
fn a_capture_of_the_wire_holds_valid_arp_and_icmp() {
    let dump = std::env::temp_dir().join(format!("roce-wire-{}.pcap", std::process::id()));
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut opts = node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24");
    opts.extra = vec!["-object".into(), format!("filter-dump,id=f0,netdev=n0,file={}", dump.display())];
    let mut a = Appliance::boot(opts).unwrap();
    let _b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24")).unwrap();
    let out = a.cmd("ping 10.0.0.2 -c 2 -i 100").unwrap();
    assert!(out.contains("2 received"), "{out}");
    a.shutdown().unwrap();
    let bytes = std::fs::read(&dump).unwrap();
    let _ = std::fs::remove_file(&dump);
    let frames = tests::pcap::frames(&bytes).unwrap();
    let (mut arp_requests, mut arp_replies, mut echo_requests, mut echo_replies) = (0, 0, 0, 0);
    let mut announced = false;
    for f in frames {
        match u16::from_be_bytes([f[12], f[13]]) {
            0x0806 => {
                let arp = &f[14..];
                assert_eq!(&arp[..6], &[0, 1, 8, 0, 6, 4], "ARP for Ethernet/IPv4");
                // An RFC 5227 announcement: a broadcast request from 10.0.0.1 for itself.
                let ours = [10, 0, 0, 1];
                announced |= f[..6] == [0xff; 6] && arp[14..18] == ours && arp[24..28] == ours;
                match u16::from_be_bytes([arp[6], arp[7]]) {
                    1 => arp_requests += 1,
                    2 => arp_replies += 1,
                    op => panic!("ARP operation {op}"),
                }
            }
            0x0800 => {
                let ip = &f[14..];
                let ihl = usize::from(ip[0] & 0x0f) * 4;
                assert_eq!(ip[0] >> 4, 4);
                assert_eq!(inet_checksum(&ip[..ihl]), 0, "IPv4 header checksum");
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                assert!(total <= ip.len());
                if ip[9] == 1 {
                    let icmp = &ip[ihl..total];
                    assert_eq!(inet_checksum(icmp), 0, "ICMP checksum");
                    match icmp[0] {
                        8 => echo_requests += 1,
                        0 => echo_replies += 1,
                        t => panic!("ICMP type {t}"),
                    }
                }
            }
            _ => {}
        }
    }
    assert!(arp_requests >= 1 && arp_replies >= 1, "ARP: {arp_requests} requests, {arp_replies} replies");
    assert_eq!((echo_requests, echo_replies), (2, 2));
    assert!(announced, "10.0.0.1 was not announced when eth0 came up");
}

/// Cable pulled: QEMU's `set_link n0 off` (through a monitor socket) clears
/// virtio-net's link status; the appliance sees the configuration interrupt,
/// drops the carrier (NETDEV_CHANGE, NO-CARRIER, RDMA port DOWN), and comes
/// back when the link does.
#[test]
fn link_status_follows_the_device() {
    use std::io::Write as _;
    let sock = std::env::temp_dir().join(format!("roce-mon-{}.sock", std::process::id()));
    let mut opts = node("52:54:00:00:00:01", free_udp_port(), free_udp_port(), "10.0.0.1/24");
    opts.extra = vec![
        "-chardev".into(),
        format!("socket,id=mon0,path={},server=on,wait=off", sock.display()),
        "-mon".into(),
        "chardev=mon0,mode=readline".into(),
    ];
    let mut a = Appliance::boot(opts).unwrap();
    a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap();
    let mut monitor = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let set_link = |monitor: &mut std::os::unix::net::UnixStream, state: &str| {
        monitor.write_all(format!("set_link n0 {state}\n").as_bytes()).unwrap();
    };
    set_link(&mut monitor, "off");
    a.wait_for_text("eth0: NETDEV_CHANGE", Duration::from_secs(30)).unwrap();
    let link = a.cmd("ip link show").unwrap();
    assert!(link.contains("<NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state DOWN"), "{link}");
    assert!(a.cmd("rdma link show").unwrap().contains("state DOWN"), "port follows the carrier");
    set_link(&mut monitor, "on");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let link = a.cmd("ip link show").unwrap();
        if link.contains("<BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "carrier never came back:\n{link}");
        a.cmd("sleep 100").unwrap();
    }
    assert!(a.cmd("rdma link show").unwrap().contains("state ACTIVE"));
    let _ = std::fs::remove_file(&sock);
}

/// virtio-net takes MSI-X when the machine offers it, its receive queue and
/// configuration changes each on a vector (no ISR read, no PIC mask and
/// unmask per interrupt); `pci=nomsix` leaves it on its INTx line. Both
/// carry ping and count their interrupts.
#[test]
fn virtio_net_interrupts_through_msix_or_its_line() {
    for (append, log, lspci) in
        [("", "irq msix 48-49", "MSI-X: Enable+ Count="), ("pci=nomsix", "irq 10", "MSI-X: Enable- Count=")]
    {
        let (p1, p2) = (free_udp_port(), free_udp_port());
        let ip = |ip: &str| if append.is_empty() { ip.to_string() } else { format!("{ip} {append}") };
        let mut a = Appliance::boot(node("52:54:00:00:00:01", p1, p2, &ip("10.0.0.1/24"))).unwrap();
        let _b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, &ip("10.0.0.2/24"))).unwrap();
        let boot = a.transcript();
        assert!(boot.contains(&format!("eth0: virtio-net mac 52:54:00:00:00:01 mtu 1500 {log}")), "{append}:\n{boot}");
        let out = a.cmd("lspci -v").unwrap();
        assert!(out.contains(lspci), "{append}:\n{out}");
        a.cmd("perf reset").unwrap();
        let out = a.cmd("ping 10.0.0.2 -c 5 -i 100").unwrap();
        assert!(out.contains("5 packets transmitted, 5 received, 0% packet loss"), "{append}:\n{out}");
        let perf = a.cmd("perf").unwrap();
        let interrupts =
            perf.lines().find_map(|l| l.strip_prefix("nic interrupts ")).and_then(|n| n.trim().parse().ok());
        assert!(interrupts.is_some_and(|n: u64| n >= 5), "one interrupt per reply at least:\n{perf}");
    }
}
