//! Interop with Linux Soft-RoCE (`rdma_rxe`): Linux peers built by
//! `make linux-peer` (tests/linux-peer/build.sh), booted under QEMU on the same
//! kind of UDP wire the appliances use.
//!
//! Slow (each peer boots a Debian kernel under TCG), so not part of `make test`:
//! every test here is `#[ignore]`d and `make interop` runs them (`-- --ignored`,
//! one at a time) after building the peer. A test whose peer is not built says
//! so and returns.

#![deny(unsafe_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};
use tests::report::{counter, counters, usec_per_iter};
use tests::{LinuxPeer, MGMT_GUEST_PORT, MGMT_HOST_IP, Nic, NicModel, PeerOptions, free_tcp_port, free_udp_port};

/// Boots two Linux peers joined by one UDP wire (10.0.0.3 and 10.0.0.4), side by side.
fn linux_pair() -> (LinuxPeer, LinuxPeer) {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut a = LinuxPeer::start(PeerOptions::new(Nic::new("52:54:00:00:01:03", p1, p2), "10.0.0.3/24")).unwrap();
    let mut b = LinuxPeer::start(PeerOptions::new(Nic::new("52:54:00:00:01:04", p2, p1), "10.0.0.4/24")).unwrap();
    a.wait_ready().unwrap();
    b.wait_ready().unwrap();
    eprintln!("peers ready after {:.1} s and {:.1} s", a.ready_after().as_secs_f64(), b.ready_after().as_secs_f64());
    (a, b)
}

#[test]
#[ignore = "boots Linux peers: `make interop`"]
fn linux_linux_rc_pingpong() {
    if !LinuxPeer::available_or_skip("linux_linux_rc_pingpong") {
        return;
    }
    let (mut a, mut b) = linux_pair();
    for p in [&mut a, &mut b] {
        let out = p.expect("rdma link show", "state ACTIVE").unwrap();
        assert!(out.contains("link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0"), "{out}");
        let out = p.expect("ibv_devinfo -d rxe0", "hca_id:\trxe0").unwrap();
        assert!(out.contains("PORT_ACTIVE"), "{out}");
        assert!(out.contains("link_layer:\t\tEthernet"), "{out}");
        // GID index 1 is the IPv4-mapped RoCE v2 GID of eth0's address.
        let gid = p.cmd("cat /sys/class/infiniband/rxe0/ports/1/gids/1").unwrap();
        let ip: Vec<u8> = p.wire_ip().split('.').map(|o| o.parse().unwrap()).collect();
        let want = format!("0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}", ip[0], ip[1], ip[2], ip[3]);
        assert_eq!(gid.trim(), want);
    }
    // The wire itself first (ARP, IP) so the exchange does not pay for it.
    let out = b.cmd("ping -c 2 -W 5 10.0.0.3").unwrap();
    assert!(out.contains("2 packets received") || out.contains("2 received"), "{out}");

    let before = counters(&b.cmd("rdma statistic show link rxe0/1").unwrap());
    // Server on a, client on b; both check the data they receive (-c). The TCP
    // exchange of queue pair numbers goes over the wire too (port 18515).
    const ITERS: u32 = 500;
    let pp = format!("ibv_rc_pingpong -d rxe0 -g 1 -c -n {ITERS} -s 4096");
    a.spawn_bg(&pp, "/tmp/pp.log").unwrap();
    a.wait_listening(18515, Duration::from_secs(30)).unwrap();
    let t = Instant::now();
    let (status, client) = b.status(&format!("{pp} 10.0.0.3"), Duration::from_secs(180)).unwrap();
    let wall = t.elapsed();
    let server = a.cmd_timeout("wait; cat /tmp/pp.log", Duration::from_secs(60)).unwrap();
    assert_eq!(status, 0, "client failed:\n{client}\nserver:\n{server}");
    for (side, out) in [("client", &client), ("server", &server)] {
        assert!(out.contains(&format!("{ITERS} iters in")), "{side}:\n{out}");
        assert!(!out.contains("Couldn't") && !out.contains("Failed"), "{side}:\n{out}");
        assert!(out.contains("local address:  LID 0x0000, QPN"), "{side}:\n{out}");
    }
    let usec_client = usec_per_iter(&client).expect("client usec/iter");
    let usec_server = usec_per_iter(&server).expect("server usec/iter");
    eprintln!(
        "Linux<->Linux ibv_rc_pingpong 4096 B x {ITERS}: client {usec_client:.1} usec/iter, server {usec_server:.1} \
         usec/iter ({:.1} s wall)",
        wall.as_secs_f64()
    );

    for (name, p) in [("a", &mut a), ("b", &mut b)] {
        let out = p.cmd("rdma statistic show").unwrap();
        eprintln!("{name}: {}", out.trim());
        assert!(out.contains("link rxe0/1"), "{out}");
        let c = counters(&out);
        let sent = counter(&c, "sent_pkts").expect("sent_pkts");
        let rcvd = counter(&c, "rcvd_pkts").expect("rcvd_pkts");
        // 2 x ITERS messages of 4 pMTU-sized packets each way, plus the acks.
        assert!(sent >= u64::from(ITERS) * 4, "{name} sent {sent}:\n{out}");
        assert!(rcvd >= u64::from(ITERS) * 4, "{name} received {rcvd}:\n{out}");
        for err in ["retry_exceeded_err", "retry_rnr_exceeded_err", "send_err", "link_downed"] {
            assert_eq!(counter(&c, err), Some(0), "{name} {err}:\n{out}");
        }
    }
    let after = counters(&b.cmd("rdma statistic show link rxe0/1").unwrap());
    let delta = counter(&after, "rcvd_pkts").unwrap() - counter(&before, "rcvd_pkts").unwrap_or(0);
    assert!(delta >= u64::from(ITERS) * 4, "b received {delta} packets in the run");
}

/// Reads what `s` sends until `needle` came, it closes, or `limit` passes.
fn read_until(mut s: TcpStream, needle: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !String::from_utf8_lossy(&buf).contains(needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn linux_peer_management_forwards() {
    if !LinuxPeer::available_or_skip("linux_peer_management_forwards") {
        return;
    }
    // guestfwd: QEMU connects to this listener when it starts.
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    let gp = host.local_addr().unwrap().port();
    let mut opts = PeerOptions::new(Nic::new("52:54:00:00:01:05", free_udp_port(), free_udp_port()), "10.0.0.5/24");
    opts.guest_fwd_port = Some(gp);
    opts.host_port = free_tcp_port();
    let mut p = LinuxPeer::boot(opts).unwrap();
    eprintln!("peer ready after {:.1} s", p.ready_after().as_secs_f64());

    // Host -> guest through hostfwd: 127.0.0.1:HP reaches a listener on the guest's 18515.
    p.cmd(&format!("echo from-guest | nc -l -p {MGMT_GUEST_PORT} > /tmp/got &")).unwrap();
    p.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(20)).unwrap();
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], p.host_port()).into(), Duration::from_secs(10)).unwrap();
    s.write_all(b"from-host\n").unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let reply = read_until(s, "from-guest", Duration::from_secs(20));
    assert!(reply.contains("from-guest"), "host read {reply:?}");
    let out = p.cmd_timeout("wait; cat /tmp/got", Duration::from_secs(30)).unwrap();
    assert!(out.contains("from-host"), "guest read {out:?}");

    // Guest -> host through guestfwd: 10.254.0.100:18515 reaches 127.0.0.1:GP,
    // both ways (what a guest client of a host-side tool needs). QEMU's
    // forward is one host connection, opened when QEMU starts, for the
    // guest's whole life: the end of a guest connection does not close it
    // (the guest's nc only ends by `timeout`), and the next guest connection's
    // bytes come on the same host stream.
    let accepted = std::thread::spawn(move || {
        let (mut s, _) = host.accept().unwrap();
        let first = read_until(s.try_clone().unwrap(), "from-guest-client", Duration::from_secs(30));
        s.write_all(b"to-guest-client\n").unwrap();
        let second = read_until(s, "second-client", Duration::from_secs(40));
        (first, second)
    });
    let out = p.cmd(&format!("echo from-guest-client | timeout 8 nc {MGMT_HOST_IP} {MGMT_GUEST_PORT}")).unwrap();
    assert!(out.contains("to-guest-client"), "the guest read {out:?}");
    p.cmd(&format!("echo second-client | timeout 8 nc {MGMT_HOST_IP} {MGMT_GUEST_PORT}")).unwrap();
    let (first, second) = accepted.join().unwrap();
    assert!(first.contains("from-guest-client"), "the host read {first:?}");
    assert!(second.contains("second-client"), "the host read {second:?} from the second guest connection");
    drop(p);

    // The command form: one host process per guest connection, closed with it
    // (here `cat`, an echo server), so the guest's nc ends by itself.
    let mut opts = PeerOptions::new(Nic::new("52:54:00:00:01:06", free_udp_port(), free_udp_port()), "10.0.0.6/24");
    opts.guest_fwd_cmd = Some("cat".into());
    let mut p = LinuxPeer::boot(opts).unwrap();
    for word in ["one", "two"] {
        let (status, out) = p
            .status(&format!("echo {word} | timeout 10 nc {MGMT_HOST_IP} {MGMT_GUEST_PORT}"), Duration::from_secs(30))
            .unwrap();
        assert_eq!((status, out.lines().next()), (0, Some(word)), "{out}");
    }
}

/// Boots one appliance (10.0.0.1, rxe0 added) and one Linux peer (10.0.0.3)
/// on one wire; with `capture`, QEMU's filter-dump records the appliance's
/// side of the wire there.
fn appliance_and_linux(capture: Option<&std::path::Path>) -> (tests::Appliance, LinuxPeer) {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut linux = LinuxPeer::start(PeerOptions::new(Nic::new("52:54:00:00:01:03", p2, p1), "10.0.0.3/24")).unwrap();
    let extra =
        capture.map_or(vec![], |f| vec!["-object".into(), format!("filter-dump,id=f0,netdev=n0,file={}", f.display())]);
    let mut app = tests::Appliance::boot(tests::Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
        append: "ip=10.0.0.1/24".into(),
        extra,
        ..Default::default()
    })
    .unwrap();
    linux.wait_ready().unwrap();
    assert!(app.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    let out = app.cmd("ping 10.0.0.3 -c 2 -i 200").unwrap();
    assert!(out.contains("2 received"), "{out}");
    (app, linux)
}

/// Linux `ibv_rc_pingpong` against the appliance's, both ways, at several
/// sizes, `-c` on both sides: both check the data (the appliance every byte
/// of every receive, Linux the mark of each page after the run).
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn appliance_linux_rc_pingpong_both_directions() {
    if !LinuxPeer::available_or_skip("appliance_linux_rc_pingpong_both_directions") {
        return;
    }
    let capture = std::env::temp_dir().join(format!("interop-{}.pcap", std::process::id()));
    let (mut app, mut linux) = appliance_and_linux(Some(&capture));
    const ITERS: u32 = 100;
    for size in [4u32, 4096, 65536] {
        let opts = format!("-c -g 1 -n {ITERS} -s {size}");
        // Linux serves, the appliance connects.
        linux.spawn_bg(&format!("ibv_rc_pingpong -d rxe0 {opts}"), "/tmp/pp.log").unwrap();
        linux.wait_listening(18515, Duration::from_secs(30)).unwrap();
        let client = app.cmd(&format!("ibv_rc_pingpong {opts} 10.0.0.3")).unwrap();
        let server = linux.cmd_timeout("wait; cat /tmp/pp.log", Duration::from_secs(120)).unwrap();
        for (side, out) in [("appliance client", &client), ("Linux server", &server)] {
            assert!(
                out.contains(&format!("{ITERS} iters in")) && !out.contains("invalid data"),
                "{size} B, {side}:\n{out}\nother side:\n{client}\n{server}"
            );
        }
        eprintln!(
            "{size:>6} B Linux server / appliance client: appliance {:.1} usec/iter, Linux {:.1} usec/iter",
            usec_per_iter(&client).unwrap_or(f64::NAN),
            usec_per_iter(&server).unwrap_or(f64::NAN)
        );
        // The appliance serves, Linux connects.
        let running = app.start_cmd(&format!("ibv_rc_pingpong {opts}"), "local address:").unwrap();
        let (status, client) =
            linux.status(&format!("ibv_rc_pingpong -d rxe0 {opts} 10.0.0.1"), Duration::from_secs(120)).unwrap();
        let server = app.finish_cmd(running).unwrap();
        assert_eq!(status, 0, "{size} B, Linux client failed:\n{client}\nappliance server:\n{server}");
        for (side, out) in [("Linux client", &client), ("appliance server", &server)] {
            assert!(
                out.contains(&format!("{ITERS} iters in")) && !out.contains("invalid data"),
                "{size} B, {side}:\n{out}"
            );
        }
        eprintln!(
            "{size:>6} B appliance server / Linux client: appliance {:.1} usec/iter, Linux {:.1} usec/iter",
            usec_per_iter(&server).unwrap_or(f64::NAN),
            usec_per_iter(&client).unwrap_or(f64::NAN)
        );
    }
    let stats = linux.cmd("rdma statistic show").unwrap();
    eprintln!("Linux: {}", stats.trim());
    let c = counters(&stats);
    for err in ["retry_exceeded_err", "retry_rnr_exceeded_err", "send_err", "link_downed"] {
        assert_eq!(counter(&c, err), Some(0), "Linux {err}:\n{stats}");
    }
    let ours = app.cmd("rdma statistic show").unwrap();
    eprintln!("appliance: {}", ours.trim());
    let c = counters(&ours);
    for err in ["retry_exceeded_err", "retry_rnr_exceeded_err", "send_err"] {
        assert_eq!(counter(&c, err), Some(0), "appliance {err}:\n{ours}");
    }
    drop(app);
    tests::pcap::check_roce_capture(&capture, 600 * 2);
    let _ = std::fs::remove_file(&capture);
}

/// The index of `gid` (sysfs spelling, `2001:0db8:...`) in the Linux peer's
/// rxe0 GID table, waiting for the GID cache to follow the address.
fn linux_gid_index(linux: &mut LinuxPeer, gid: &str) -> u32 {
    let gids = "/sys/class/infiniband/rxe0/ports/1/gids";
    let line = format!(
        "t=0; until grep -qx '{gid}' {gids}/* 2>/dev/null || [ $t -gt 50 ]; do t=$((t+1)); sleep 0.1; done; \
         for i in 0 1 2 3 4 5 6 7; do echo \"gid $i $(cat {gids}/$i 2>/dev/null)\"; done"
    );
    let out = linux.cmd_timeout(&line, Duration::from_secs(30)).unwrap();
    out.lines()
        .find_map(|l| l.strip_suffix(gid).and_then(|l| l.strip_prefix("gid ")).and_then(|i| i.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no GID {gid} on the Linux peer:\n{out}"))
}

/// A capture's IPv6 RoCE frames, checked for what Linux rxe and the appliance
/// must agree on: flow label 0, hop limit 64 (the route's), and a connected
/// QP's UDP source port chosen from both QPNs (`rdma_get_udp_sport`), so every
/// RC frame's port is the one of some QP pair seen on the wire. Returns how
/// many IPv6 RoCE frames each side (by source MAC) sent.
fn check_ipv6_roce(capture: &std::path::Path) -> std::collections::BTreeMap<[u8; 6], usize> {
    use rdma::wire::frame::{IpPath, parse};
    let bytes = std::fs::read(capture).unwrap();
    let frames: Vec<_> =
        tests::pcap::frames(&bytes).unwrap().into_iter().filter(|f| tests::pcap::is_roce_v2(f)).collect();
    let parsed: Vec<_> =
        frames.iter().filter_map(|f| parse(f).ok()).filter(|rx| matches!(rx.repr.path.ip, IpPath::V6 { .. })).collect();
    let mut sent = std::collections::BTreeMap::new();
    let mut qpns: std::collections::BTreeMap<[u8; 6], std::collections::BTreeSet<u32>> = Default::default();
    for rx in &parsed {
        let p = rx.repr.path;
        let IpPath::V6 { flow_label, .. } = p.ip else { continue };
        assert_eq!((flow_label, p.hop_limit), (0, 64), "IPv6 RoCE frame from {:?}", p.src_mac);
        *sent.entry(p.src_mac.0).or_insert(0) += 1;
        qpns.entry(p.src_mac.0).or_default().insert(rx.repr.roce.bth.dest_qpn);
    }
    for rx in parsed.iter().filter(|rx| u8::from(rx.repr.roce.bth.opcode) < 0x20) {
        let p = rx.repr.path;
        let theirs = qpns.iter().filter(|(mac, _)| **mac != p.src_mac.0).flat_map(|(_, q)| q.iter().copied());
        let d = rx.repr.roce.bth.dest_qpn;
        assert!(
            theirs.clone().any(|q| rdma::wire::sport::src_port_for_connection(0, q, d) == p.src_port),
            "RC frame to QPN {d:#x} from port {} matches no QP pair",
            p.src_port
        );
    }
    sent
}

/// RoCE v2 over IPv6 with Linux rdma_rxe: `ibv_rc_pingpong -g 0` (the
/// link-local GIDs) and with a global address's GID, both ways, data checked
/// (both sides fill with 0x7b and the appliance checks every receive), plus
/// `ibv_uc_pingpong -g 0` and `ibv_ud_pingpong -g 0` both ways; ICMPv6 echo
/// both ways first (neighbour discovery against Linux's). The capture must
/// parse with our codec (ICRCs good) and tshark, and its IPv6 frames agree
/// with Linux's choices.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn appliance_linux_pingpong_over_ipv6_both_directions() {
    if !LinuxPeer::available_or_skip("appliance_linux_pingpong_over_ipv6_both_directions") {
        return;
    }
    let capture = std::env::temp_dir().join(format!("interop-v6-{}.pcap", std::process::id()));
    let (mut app, mut linux) = appliance_and_linux(Some(&capture));
    app.cmd("ip -6 addr add 2001:db8::1/64 dev eth0").unwrap();
    // nodad: the address is usable (and its GID there) at once.
    linux.expect("ip -6 addr add 2001:db8::3/64 dev eth0 nodad && echo added", "added").unwrap();
    let linux_global = linux_gid_index(&mut linux, "2001:0db8:0000:0000:0000:0000:0000:0003");
    let linux_ll = linux_gid_index(&mut linux, "fe80:0000:0000:0000:5054:00ff:fe00:0103");
    assert_eq!(linux_ll, 0, "Linux's GID 0 is the link-local one");

    for dst in ["fe80::5054:ff:fe00:103", "2001:db8::3"] {
        let out = app.cmd(&format!("ping {dst} -c 2 -i 200")).unwrap();
        assert!(out.contains("2 packets transmitted, 2 received"), "{out}");
    }
    for dst in ["2001:db8::1", "fe80::5054:ff:fe00:1%eth0"] {
        let (status, out) = linux.status(&format!("ping -c 2 {dst}"), Duration::from_secs(30)).unwrap();
        assert_eq!(status, 0, "Linux ping {dst}:\n{out}");
    }

    const ITERS: u32 = 50;
    for (tool, ours, theirs, size) in [
        ("ibv_rc_pingpong", 0, linux_ll, 4096u32),
        ("ibv_rc_pingpong", 2, linux_global, 65536),
        ("ibv_uc_pingpong", 0, linux_ll, 4096),
        ("ibv_ud_pingpong", 0, linux_ll, 1024),
    ] {
        let (app_opts, linux_opts) =
            (format!("-c -g {ours} -n {ITERS} -s {size}"), format!("-c -g {theirs} -n {ITERS} -s {size}"));
        // Linux serves, the appliance connects.
        linux.spawn_bg(&format!("{tool} -d rxe0 {linux_opts}"), "/tmp/pp.log").unwrap();
        linux.wait_listening(18515, Duration::from_secs(30)).unwrap();
        let client = app.cmd(&format!("{tool} {app_opts} 10.0.0.3")).unwrap();
        let server = linux.cmd_timeout("wait; cat /tmp/pp.log", Duration::from_secs(120)).unwrap();
        for (side, out) in [("appliance client", &client), ("Linux server", &server)] {
            assert!(
                out.contains(&format!("{ITERS} iters in")),
                "{tool} -g {ours}/{theirs}, {side}:\n{out}\nother side:\n{client}\n{server}"
            );
        }
        assert!(client.contains("GID fe80::") || client.contains("GID 2001:db8::"), "{client}");
        // The appliance serves, Linux connects.
        let running = app.start_cmd(&format!("{tool} {app_opts}"), "local address:").unwrap();
        let (status, client) =
            linux.status(&format!("{tool} -d rxe0 {linux_opts} 10.0.0.1"), Duration::from_secs(120)).unwrap();
        let server = app.finish_cmd(running).unwrap();
        assert_eq!(status, 0, "{tool} -g {ours}/{theirs}: Linux client failed:\n{client}\nappliance server:\n{server}");
        for (side, out) in [("Linux client", &client), ("appliance server", &server)] {
            assert!(out.contains(&format!("{ITERS} iters in")), "{tool} -g {ours}/{theirs}, {side}:\n{out}");
        }
        eprintln!("{tool} -g {ours} (Linux -g {theirs}), {size} B: both directions pass");
    }
    let neigh = app.cmd("ip -6 neigh").unwrap();
    for ip in ["fe80::5054:ff:fe00:103", "2001:db8::3"] {
        assert!(neigh.contains(&format!("{ip} dev eth0 lladdr 52:54:00:00:01:03 ")), "{neigh}");
    }
    let stats = linux.cmd("rdma statistic show").unwrap();
    let c = counters(&stats);
    for err in ["retry_exceeded_err", "retry_rnr_exceeded_err", "send_err", "link_downed"] {
        assert_eq!(counter(&c, err), Some(0), "Linux {err}:\n{stats}");
    }
    let ours = app.cmd("rdma statistic show").unwrap();
    let c = counters(&ours);
    for err in ["retry_exceeded_err", "retry_rnr_exceeded_err", "send_err"] {
        assert_eq!(counter(&c, err), Some(0), "appliance {err}:\n{ours}");
    }
    drop(app);
    tests::pcap::check_roce_capture(&capture, 6 * ITERS as usize * 2);
    let sent = check_ipv6_roce(&capture);
    eprintln!("IPv6 RoCE frames by sender: {sent:x?}");
    assert!(sent.get(&[0x52, 0x54, 0, 0, 0, 1]).is_some_and(|&n| n >= 6 * ITERS as usize), "{sent:x?}");
    assert!(sent.get(&[0x52, 0x54, 0, 0, 1, 3]).is_some_and(|&n| n >= 6 * ITERS as usize), "{sent:x?}");
    let _ = std::fs::remove_file(&capture);
}

/// Linux `ibv_uc_pingpong` and `ibv_ud_pingpong` against the appliance's, both ways.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn appliance_linux_uc_and_ud_pingpong_both_directions() {
    if !LinuxPeer::available_or_skip("appliance_linux_uc_and_ud_pingpong_both_directions") {
        return;
    }
    let (mut app, mut linux) = appliance_and_linux(None);
    // ud_pingpong's messages fit one MTU (1024 on this 1500-byte link).
    for (tool, opts) in [("ibv_uc_pingpong", "-c -g 1 -n 50 -s 4096"), ("ibv_ud_pingpong", "-c -g 1 -n 50 -s 1024")] {
        linux.spawn_bg(&format!("{tool} -d rxe0 {opts}"), "/tmp/pp.log").unwrap();
        linux.wait_listening(18515, Duration::from_secs(30)).unwrap();
        let client = app.cmd(&format!("{tool} {opts} 10.0.0.3")).unwrap();
        let server = linux.cmd_timeout("wait; cat /tmp/pp.log", Duration::from_secs(120)).unwrap();
        assert!(client.contains("50 iters in") && server.contains("50 iters in"), "{tool}:\n{client}\n{server}");
        let running = app.start_cmd(&format!("{tool} {opts}"), "local address:").unwrap();
        let (status, client) =
            linux.status(&format!("{tool} -d rxe0 {opts} 10.0.0.1"), Duration::from_secs(120)).unwrap();
        let server = app.finish_cmd(running).unwrap();
        assert_eq!(status, 0, "{tool}:\n{client}\n{server}");
        assert!(client.contains("50 iters in") && server.contains("50 iters in"), "{tool}:\n{client}\n{server}");
        eprintln!("{tool}: both directions pass");
    }
}

/// Checks a capture of an interop run: every RoCE v2 frame (both sides') parses
/// with our codec, ICRC verified (Wireshark shows the ICRC but does not check
/// it), there are at least `min_roce` of them, and tshark's decode of the file
/// (`-d udp.port==4791,infiniband`) flags nothing malformed. The tshark step is
/// skipped, with a message, when tshark is missing (`make interop` installs it).
/// The short interop run `make test` includes: one pingpong each way between
/// the appliance and Linux rdma_rxe.
#[test]
#[ignore = "boots a Linux peer: `make test` runs it through `make interop-smoke`"]
fn smoke_appliance_linux_pingpong_each_way() {
    if !LinuxPeer::available_or_skip("smoke_appliance_linux_pingpong_each_way") {
        return;
    }
    let (mut app, mut linux) = appliance_and_linux(None);
    // `make test` runs this over virtio-net and over e1000e (APPLIANCE_NIC):
    // both ends must really drive the asked-for model.
    let model = NicModel::from_env();
    let boot = app.transcript();
    assert!(boot.contains(&format!("eth0: {} mac 52:54:00:00:00:01", model.driver())), "{boot}");
    let driver = linux.cmd("basename $(readlink /sys/class/net/eth0/device/driver)").unwrap();
    assert_eq!(driver.trim(), model.linux_driver(), "the peer's eth0 driver");
    let opts = "-g 1 -n 20 -s 4096";
    linux.spawn_bg(&format!("ibv_rc_pingpong -d rxe0 {opts}"), "/tmp/pp.log").unwrap();
    linux.wait_listening(18515, Duration::from_secs(30)).unwrap();
    let client = app.cmd(&format!("ibv_rc_pingpong {opts} 10.0.0.3")).unwrap();
    let server = linux.cmd_timeout("wait; cat /tmp/pp.log", Duration::from_secs(120)).unwrap();
    assert!(client.contains("20 iters in") && server.contains("20 iters in"), "{client}\n{server}");
    let running = app.start_cmd(&format!("ibv_rc_pingpong {opts}"), "local address:").unwrap();
    let (status, client) =
        linux.status(&format!("ibv_rc_pingpong -d rxe0 {opts} 10.0.0.1"), Duration::from_secs(120)).unwrap();
    let server = app.finish_cmd(running).unwrap();
    assert_eq!(status, 0, "{client}\n{server}");
    assert!(client.contains("20 iters in") && server.contains("20 iters in"), "{client}\n{server}");
}

/// The appliance and Linux rdma_rxe on a bad wire (the fault relay: 5% loss,
/// 1% reordering, 1% duplication, seeded): ibv_rc_pingpong both ways, data
/// checked by the appliance.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn appliance_linux_rc_pingpong_on_a_lossy_wire() {
    use tests::relay::{Faults, Relay};
    if !LinuxPeer::available_or_skip("appliance_linux_rc_pingpong_on_a_lossy_wire") {
        return;
    }
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let relay =
        Relay::start(p1, p2, Faults { drop: 0.05, duplicate: 0.01, reorder: 0.01, ..Faults::default() }, 7).unwrap();
    let mut linux =
        LinuxPeer::start(PeerOptions::new(Nic::new("52:54:00:00:01:03", p2, relay.port_b), "10.0.0.3/24")).unwrap();
    let mut app = tests::Appliance::boot(tests::Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, relay.port_a)),
        append: "ip=10.0.0.1/24".into(),
        cmd_timeout: Duration::from_secs(180),
        ..Default::default()
    })
    .unwrap();
    linux.wait_ready().unwrap();
    assert!(app.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    let opts = "-c -g 1 -n 100 -s 4096";
    linux.spawn_bg(&format!("ibv_rc_pingpong -d rxe0 {opts}"), "/tmp/pp.log").unwrap();
    linux.wait_listening(18515, Duration::from_secs(30)).unwrap();
    let client = app.cmd(&format!("ibv_rc_pingpong {opts} 10.0.0.3")).unwrap();
    let server = linux.cmd_timeout("wait; cat /tmp/pp.log", Duration::from_secs(180)).unwrap();
    // Every message must arrive. One loss the tool itself cannot recover from:
    // the ACK of our last SEND, when Linux's server has already finished and
    // destroyed its QP (rdma-core's pingpong exits without waiting for its
    // peer), so our retransmissions go unanswered. Then all 100 receives
    // completed and only that last send failed.
    let last_ack_lost = client.contains("RetryExcErr") && client.contains("(99 sends and 100 receives completed)");
    assert!(
        (client.contains("100 iters in") || last_ack_lost) && server.contains("100 iters in"),
        "{client}\n{server}\n{}",
        relay.summary()
    );
    let running = app.start_cmd(&format!("ibv_rc_pingpong {opts}"), "local address:").unwrap();
    let (status, client) =
        linux.status(&format!("ibv_rc_pingpong -d rxe0 {opts} 10.0.0.1"), Duration::from_secs(180)).unwrap();
    let server = app.finish_cmd(running).unwrap();
    assert_eq!(status, 0, "{client}\n{server}\n{}", relay.summary());
    assert!(client.contains("100 iters in") && server.contains("100 iters in"), "{client}\n{server}");
    eprintln!("lossy wire: {}", relay.summary());
}

/// MTU 4096 against Linux: both netdevs at 9000 bytes (active_mtu 4096 on both
/// rxe ports), ibv_rc_pingpong -m 4096 at 4 B, 4 KiB and 64 KiB both ways.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn appliance_linux_rc_pingpong_mtu_4096() {
    if !LinuxPeer::available_or_skip("appliance_linux_rc_pingpong_mtu_4096") {
        return;
    }
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut opts =
        PeerOptions::new(Nic { host_mtu: Some(9000), ..Nic::new("52:54:00:00:01:03", p2, p1) }, "10.0.0.3/24");
    opts.mtu = Some(9000);
    let mut linux = LinuxPeer::start(opts).unwrap();
    let mut app = tests::Appliance::boot(tests::Options {
        nic: Some(Nic { host_mtu: Some(9000), ..Nic::new("52:54:00:00:00:01", p1, p2) }),
        append: "ip=10.0.0.1/24".into(),
        ..Default::default()
    })
    .unwrap();
    linux.wait_ready().unwrap();
    assert!(app.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    assert!(app.cmd("ibv_devinfo").unwrap().contains("active_mtu:\t\t4096 (5)"));
    assert!(linux.cmd("ibv_devinfo -d rxe0").unwrap().contains("active_mtu:\t\t4096 (5)"));
    for size in [4u32, 4096, 65536] {
        let opts = format!("-c -g 1 -m 4096 -n 50 -s {size}");
        linux.spawn_bg(&format!("ibv_rc_pingpong -d rxe0 {opts}"), "/tmp/pp.log").unwrap();
        linux.wait_listening(18515, Duration::from_secs(30)).unwrap();
        let client = app.cmd(&format!("ibv_rc_pingpong {opts} 10.0.0.3")).unwrap();
        let server = linux.cmd_timeout("wait; cat /tmp/pp.log", Duration::from_secs(120)).unwrap();
        assert!(client.contains("50 iters in") && server.contains("50 iters in"), "{client}\n{server}");
        let running = app.start_cmd(&format!("ibv_rc_pingpong {opts}"), "local address:").unwrap();
        let (status, client) =
            linux.status(&format!("ibv_rc_pingpong -d rxe0 {opts} 10.0.0.1"), Duration::from_secs(120)).unwrap();
        let server = app.finish_cmd(running).unwrap();
        assert_eq!(status, 0, "{client}\n{server}");
        assert!(client.contains("50 iters in") && server.contains("50 iters in"), "{client}\n{server}");
        eprintln!(
            "MTU 4096, {size} B: appliance {:.1} usec/iter, Linux {:.1} usec/iter",
            usec_per_iter(&server).unwrap_or(f64::NAN),
            usec_per_iter(&client).unwrap_or(f64::NAN)
        );
    }
}

/// `-c` on both sides, as rdma-core has it (the client marks each page's
/// first byte, the server checks them after the run), between Linux's
/// `ibv_rc_pingpong -c` and ours, both ways: the console's pingpong and the
/// host tool `rc_pingpong` over the appliance's ring. First a client without
/// `-c` against Linux's `-c` server, to see that Linux's check is on.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn rc_pingpong_c_checks_across_linux_both_ways() {
    if !LinuxPeer::available_or_skip("rc_pingpong_c_checks_across_linux_both_ways") {
        return;
    }
    let RingPeer { mut app, mut linux, shm, gp } = ring_appliance_and_linux("pp-chk");
    const RUN: Duration = Duration::from_secs(120);
    let opts = "-g 1 -n 20 -s 8192";
    let done = |out: &str| out.contains("20 iters in ");
    let linux_server = |linux: &mut LinuxPeer, chk: &str| {
        linux.spawn_bg(&format!("ibv_rc_pingpong -d rxe0 {chk} {opts}"), "/tmp/pp.log").unwrap();
        linux.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(30)).unwrap();
    };

    // Linux's check is live: a client that does not mark fails it on every page.
    linux_server(&mut linux, "-c");
    let client = app.cmd(&format!("ibv_rc_pingpong {opts} 10.0.0.3")).unwrap();
    let server = linux.cmd_timeout("wait; cat /tmp/pp.log", RUN).unwrap();
    assert!(done(&client), "{client}");
    assert!(server.contains("invalid data in page 0\ninvalid data in page 1"), "{server}");

    // The console's pingpong, client and server.
    linux_server(&mut linux, "-c");
    let client = app.cmd(&format!("ibv_rc_pingpong -c {opts} 10.0.0.3")).unwrap();
    let server = linux.cmd_timeout("wait; cat /tmp/pp.log", RUN).unwrap();
    for out in [&client, &server] {
        assert!(done(out) && !out.contains("invalid data"), "appliance client:\n{client}\nLinux server:\n{server}");
    }
    let running = app.start_cmd(&format!("ibv_rc_pingpong -c {opts}"), "local address:").unwrap();
    let (status, client) = linux.status(&format!("ibv_rc_pingpong -d rxe0 -c {opts} 10.0.0.1"), RUN).unwrap();
    let server = app.finish_cmd(running).unwrap();
    assert_eq!(status, 0, "{client}");
    for out in [&client, &server] {
        assert!(done(out) && !out.contains("invalid data"), "Linux client:\n{client}\nappliance server:\n{server}");
    }

    // The host tool, client then server.
    let mut rp = RingPeer { app, linux, shm, gp };
    for (ours, theirs) in host_tool_both_roles(&mut rp, "ibv_rc_pingpong", "rc_pingpong", &format!("-c {opts}")) {
        for out in [&ours, &theirs] {
            assert!(done(out) && !out.contains("invalid data"), "ours:\n{ours}\nLinux:\n{theirs}");
        }
    }
}

/// One appliance (10.0.0.1, rxe0 added) with a verbs ring for host tools,
/// and one Linux peer (10.0.0.3) on one wire. A pingpong's TCP exchange
/// reaches Linux's server through the peer's hostfwd (`linux.host_port()`)
/// and a host tool's server on `gp` through its guestfwd.
struct RingPeer {
    app: tests::Appliance,
    linux: LinuxPeer,
    shm: tests::Ivshmem,
    gp: u16,
}

fn ring_appliance_and_linux(tag: &str) -> RingPeer {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let gp = free_tcp_port();
    let mut opts = PeerOptions::new(Nic::new("52:54:00:00:01:03", p2, p1), "10.0.0.3/24");
    opts.guest_fwd_cmd = Some(format!("{} {gp}", env!("CARGO_BIN_EXE_tcp-stdio")));
    let mut linux = LinuxPeer::start(opts).unwrap();
    let shm = tests::Ivshmem::temp(tag, 64 << 20);
    let mut app = tests::Appliance::boot(tests::Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
        append: "ip=10.0.0.1/24".into(),
        ivshmem: Some(shm.clone()),
        ..Default::default()
    })
    .unwrap();
    linux.wait_ready().unwrap();
    assert!(app.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    assert!(app.cmd("ping 10.0.0.3 -c 2 -i 200").unwrap().contains("2 received"));
    RingPeer { app, linux, shm, gp }
}

/// A host pingpong tool over the appliance's ring against Linux's
/// `linux_prog`, both roles, with the same options (`-d rxe0` added):
/// first Linux serving (its exchange reached through hostfwd), then the
/// host tool serving on `gp` (reached through guestfwd). Both ends must exit
/// 0; returns each role's `(ours, theirs)` output, host client first.
fn host_tool_both_roles(rp: &mut RingPeer, linux_prog: &str, tool: &str, opts: &str) -> [(String, String); 2] {
    const RUN: Duration = Duration::from_secs(180);
    let RingPeer { linux, shm, gp, .. } = rp;
    linux.spawn_bg(&format!("{linux_prog} -d rxe0 {opts}"), "/tmp/pp.log").unwrap();
    linux.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(30)).unwrap();
    let hp = linux.host_port();
    let client = tests::tool::spawn(tool, &shm.path, &format!("-d rxe0 {opts} -p {hp} 127.0.0.1")).unwrap();
    let (ok, ours) = tests::tool::finish(client, RUN).unwrap();
    let theirs = linux.finish_bg("/tmp/pp.log", RUN).unwrap();
    assert!(ok && theirs.contains("exit=0"), "host {tool} client:\n{ours}\nLinux {linux_prog} server:\n{theirs}");
    let as_client = (ours, theirs);

    let server = tests::tool::Watched::spawn(tool, &shm.path, &format!("-d rxe0 {opts} -p {gp}")).unwrap();
    // It listens right after printing its addresses.
    assert!(server.wait_line("local address:", RUN).is_some(), "{}", server.text());
    std::thread::sleep(Duration::from_millis(300));
    let (status, theirs) =
        linux.status(&format!("{linux_prog} -d rxe0 {opts} -p {MGMT_GUEST_PORT} {MGMT_HOST_IP}"), RUN).unwrap();
    let (ok, ours) = server.finish(RUN).unwrap();
    assert!(ok && status == 0, "Linux {linux_prog} client:\n{theirs}\nhost {tool} server:\n{ours}");
    [as_client, (ours, theirs)]
}

/// The host tools `uc_pingpong` and `ud_pingpong` against Linux's
/// `ibv_uc_pingpong` and `ibv_ud_pingpong`, both roles, with `-c` on both
/// sides (each checks every received page's mark): UC with a multi-packet
/// message, UD with a datagram filling the 1024-byte MTU behind its GRH.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn uc_and_ud_pingpong_host_tools_check_data_against_linux_both_ways() {
    if !LinuxPeer::available_or_skip("uc_and_ud_pingpong_host_tools_check_data_against_linux_both_ways") {
        return;
    }
    let mut rp = ring_appliance_and_linux("uc-ud-pp");
    let runs = [
        ("ibv_uc_pingpong", "uc_pingpong", "-g 1 -c -n 50 -s 8192"),
        ("ibv_ud_pingpong", "ud_pingpong", "-g 1 -c -n 50 -s 1024"),
    ];
    for (linux_prog, tool, opts) in runs {
        let roles =
            ["host client", "host server"].into_iter().zip(host_tool_both_roles(&mut rp, linux_prog, tool, opts));
        for (role, (ours, theirs)) in roles {
            for out in [&ours, &theirs] {
                assert!(
                    out.contains("50 iters in ") && !out.contains("invalid data"),
                    "{tool} as {role}:\nours:\n{ours}\nLinux {linux_prog}:\n{theirs}"
                );
            }
            eprintln!("{tool} {role}: {}", ours.lines().last().unwrap_or(""));
        }
    }
}

/// The QPNs of the `  {what} address:` lines of a pingpong's output.
fn pingpong_qpns(out: &str, what: &str) -> Vec<u32> {
    let prefix = format!("  {what} address:");
    out.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.split("QPN 0x").nth(1))
        .filter_map(|r| u32::from_str_radix(r.get(..6)?, 16).ok())
        .collect()
}

/// Linux's `ibv_srq_pingpong` (16 RC QPs on one SRQ, its default) against
/// the host tool `srq_pingpong` over the appliance's ring, both ways: the
/// 256-message exchange goes through hostfwd (Linux serving) and guestfwd
/// (the host tool serving). rdma-core's program checks no data; what is
/// checked is that both finish their iterations, each side connected the 16
/// QPs the other announced (each one's remote QPNs are the other's local
/// ones), and neither side's rxe counted a retry or a send error.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn srq_pingpong_host_tool_against_linux_both_ways() {
    if !LinuxPeer::available_or_skip("srq_pingpong_host_tool_against_linux_both_ways") {
        return;
    }
    let RingPeer { app, linux, shm, gp } = ring_appliance_and_linux("srq-pp");
    const ITERS: u32 = 200;
    let opts = format!("-g 1 -n {ITERS} -s 4096");
    let check = |ours: &str, theirs: &str, who: &str| {
        for out in [ours, theirs] {
            assert!(out.contains(&format!("{ITERS} iters in ")), "{who}\nours:\n{ours}\ntheirs:\n{theirs}");
        }
        let (our_local, their_remote) = (pingpong_qpns(ours, "local"), pingpong_qpns(theirs, "remote"));
        let (their_local, our_remote) = (pingpong_qpns(theirs, "local"), pingpong_qpns(ours, "remote"));
        assert_eq!(our_local.len(), 16, "{who}: {ours}");
        assert_eq!((&our_local, &their_local), (&their_remote, &our_remote), "{who}\nours:\n{ours}\ntheirs:\n{theirs}");
    };

    let mut rp = RingPeer { app, linux, shm, gp };
    let [client, server] = host_tool_both_roles(&mut rp, "ibv_srq_pingpong", "srq_pingpong", &opts);
    check(&client.0, &client.1, "host client, Linux server");
    check(&server.0, &server.1, "Linux client, host server");
    let linux = &mut rp.linux;
    let stats = linux.cmd("rdma statistic show").unwrap();
    let c = counters(&stats);
    for err in ["retry_exceeded_err", "retry_rnr_exceeded_err", "send_err"] {
        assert_eq!(counter(&c, err), Some(0), "Linux {err}:\n{stats}");
    }
}

/// One IGMP or MLD message of a capture, with the IP fields a switch and a
/// router look at.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Membership {
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    /// IPv4 TOS or IPv6 traffic class.
    tos: u8,
    /// TTL or hop limit.
    ttl: u8,
    /// IPv4 options, or the IPv6 hop-by-hop header.
    options: Vec<u8>,
    dst_ip: std::net::IpAddr,
    /// IGMP type (0x16 v2 report, 0x17 leave, 0x22 v3 report) or ICMPv6 type (143).
    kind: u8,
    /// (record type, group) for IGMPv3 and MLDv2; (kind, group) for IGMPv2.
    records: Vec<(u8, std::net::IpAddr)>,
}

/// The IGMP and MLD messages of a capture's frames.
fn memberships(frames: &[&[u8]]) -> Vec<Membership> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut out = Vec::new();
    for f in frames {
        let (Some(dst), Some(src), Some(et)) = (f.get(0..6), f.get(6..12), f.get(12..14)) else { continue };
        let (dst_mac, src_mac) = (dst.try_into().unwrap(), src.try_into().unwrap());
        let v4 = |b: &[u8]| IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]));
        let v6 = |b: &[u8]| IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap()));
        match et {
            [0x08, 0x00] if f.get(23) == Some(&2) => {
                let ihl = usize::from(f[14] & 0x0f) * 4;
                let Some(igmp) = f.get(14 + ihl..) else { continue };
                let kind = igmp[0];
                let records = match kind {
                    0x16 | 0x17 => vec![(kind, v4(&igmp[4..8]))],
                    0x22 => {
                        let n = usize::from(u16::from_be_bytes([igmp[6], igmp[7]]));
                        (0..n).filter_map(|i| igmp.get(8 + i * 8..16 + i * 8)).map(|r| (r[0], v4(&r[4..8]))).collect()
                    }
                    _ => continue,
                };
                out.push(Membership {
                    src_mac,
                    dst_mac,
                    tos: f[15],
                    ttl: f[22],
                    options: f[34..14 + ihl].to_vec(),
                    dst_ip: v4(&f[30..34]),
                    kind,
                    records,
                });
            }
            [0x86, 0xdd] if f.get(20) == Some(&0) => {
                let Some(hbh) = f.get(54..) else { continue };
                let hbh_len = (usize::from(hbh[1]) + 1) * 8;
                let Some(icmp) = hbh.get(hbh_len..) else { continue };
                if hbh[0] != 58 || icmp.first() != Some(&143) {
                    continue;
                }
                let n = usize::from(u16::from_be_bytes([icmp[6], icmp[7]]));
                let mut records = Vec::new();
                let mut at = 8;
                for _ in 0..n {
                    let Some(r) = icmp.get(at..at + 20) else { break };
                    records.push((r[0], v6(&r[4..20])));
                    at += 20 + usize::from(r[1]) * 4 + usize::from(u16::from_be_bytes([r[2], r[3]])) * 16;
                }
                let tc = (f[14] & 0x0f) << 4 | f[15] >> 4;
                out.push(Membership {
                    src_mac,
                    dst_mac,
                    tos: tc,
                    ttl: f[21],
                    options: hbh[..hbh_len].to_vec(),
                    dst_ip: v6(&f[38..54]),
                    kind: 143,
                    records,
                });
            }
            _ => {}
        }
    }
    out
}

/// IGMP and MLD on the wire, beside what Linux sends: a host program
/// attaches a UD QP to an IPv4-mapped and an IPv6 multicast GID through the
/// appliance's ring and detaches it; the appliance's side of the wire is
/// captured. The appliance must send an IGMPv2 report to the group and a
/// Leave Group to 224.0.0.2, and MLDv2 reports to ff02::16 with a
/// CHANGE_TO_EXCLUDE record on attach (twice, 1 s apart) and
/// CHANGE_TO_INCLUDE on detach (and leave a group still joined when `rdma
/// link delete` takes its device); and their IP framing must be Linux's: the
/// Linux peer's own IGMPv3 report (for `ip addr add ... autojoin`) and
/// MLDv2 report (for the solicited-node group of an address it adds) carry
/// the same TOS, TTL 1, Router Alert option and hop-by-hop header as ours,
/// and the same record type for a join.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn igmp_and_mld_reports_on_attach_and_detach_as_linux_frames_them() {
    use std::net::IpAddr;
    if !LinuxPeer::available_or_skip("igmp_and_mld_reports_on_attach_and_detach_as_linux_frames_them") {
        return;
    }
    let dump = std::env::temp_dir().join(format!("mcast-reports-{}.pcap", std::process::id()));
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut linux = LinuxPeer::start(PeerOptions::new(Nic::new("52:54:00:00:01:03", p2, p1), "10.0.0.3/24")).unwrap();
    let shm = tests::Ivshmem::temp("mcast-rep", 64 << 20);
    let mut app = tests::Appliance::boot(tests::Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
        append: "ip=10.0.0.1/24".into(),
        ivshmem: Some(shm.clone()),
        extra: vec!["-object".into(), format!("filter-dump,id=f0,netdev=n0,file={}", dump.display())],
        ..Default::default()
    })
    .unwrap();
    linux.wait_ready().unwrap();
    assert!(app.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));

    // Linux's own reports: IGMPv3 for an autojoined group, MLDv2 for the
    // solicited-node group of a new address.
    let out = linux
        .cmd("ip addr add 239.7.7.7/32 dev eth0 autojoin; ip -6 addr add 2001:db8::3/64 dev eth0; echo ok")
        .unwrap();
    assert!(out.contains("ok"), "{out}");

    let v4_group: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3];
    let v6_group: [u8; 16] = [0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2];
    {
        use verbs::{Context, Qp, QpCap, QpInitAttr, qp_type};
        let ctx = Context::open(&shm.path).unwrap();
        let dev = ctx.device(Some("rxe0")).unwrap();
        let pd = dev.alloc_pd().unwrap();
        let cq = dev.create_cq(4, 0).unwrap();
        let attr = QpInitAttr {
            qp_type: qp_type::UD,
            cap: QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            ..Default::default()
        };
        let qp = Qp::create(&pd, &cq, &cq, None, &attr).unwrap();
        qp.attach_mcast(v4_group).unwrap();
        qp.attach_mcast(v6_group).unwrap();
        // The MLDv2 report's repeat falls 1 s after the first.
        std::thread::sleep(Duration::from_millis(1800));
        qp.detach_mcast(v4_group).unwrap();
        qp.detach_mcast(v6_group).unwrap();
        // And the leave's.
        std::thread::sleep(Duration::from_millis(1500));
        // A group still joined when its device goes is left too.
        qp.attach_mcast(v4_group).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let out = app.cmd("rdma link delete rxe0").unwrap();
        assert!(!out.contains("error"), "{out}");
        std::thread::sleep(Duration::from_millis(500));
    }
    // Linux repeats its reports too; give the last ones time to come.
    std::thread::sleep(Duration::from_millis(500));
    drop(app);
    drop(linux);
    let bytes = std::fs::read(&dump).unwrap();
    let _ = std::fs::remove_file(&dump);
    let frames = tests::pcap::frames(&bytes).unwrap();
    let all = memberships(&frames);
    const OURS: [u8; 6] = [0x52, 0x54, 0, 0, 0, 1];
    const LINUX: [u8; 6] = [0x52, 0x54, 0, 0, 1, 3];
    let ours: Vec<&Membership> = all.iter().filter(|m| m.src_mac == OURS).collect();
    let theirs: Vec<&Membership> = all.iter().filter(|m| m.src_mac == LINUX).collect();
    let show = || format!("ours: {ours:#?}\nLinux's: {theirs:#?}");
    let g4: IpAddr = "239.1.2.3".parse().unwrap();
    let g6: IpAddr = "ff0e::1:2".parse().unwrap();

    // Ours, IPv4: one report to the group (its MAC), one leave to
    // all-routers; then the same again, the leave at the device's removal.
    let v4: Vec<&&Membership> = ours.iter().filter(|m| m.kind == 0x16 || m.kind == 0x17).collect();
    assert_eq!(v4.len(), 4, "{}", show());
    assert_eq!((v4[2].kind, v4[3].kind), (0x16, 0x17), "{}", show());
    assert_eq!(
        (v4[0].kind, v4[0].dst_ip, v4[0].dst_mac),
        (0x16, g4, [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]),
        "{}",
        show()
    );
    assert_eq!(v4[0].records, [(0x16, g4)]);
    assert_eq!(
        (v4[1].kind, v4[1].dst_ip, v4[1].dst_mac),
        (0x17, "224.0.0.2".parse().unwrap(), [0x01, 0x00, 0x5e, 0, 0, 2])
    );
    assert_eq!(v4[1].records, [(0x17, g4)]);
    // Ours, IPv6: join twice, then leave, each to ff02::16.
    let v6: Vec<Vec<(u8, IpAddr)>> = ours.iter().filter(|m| m.kind == 143).map(|m| m.records.clone()).collect();
    assert_eq!(v6, [vec![(4, g6)], vec![(4, g6)], vec![(3, g6)], vec![(3, g6)]], "{}", show());

    // Linux's framing, field by field against ours.
    let their_v4 =
        theirs.iter().find(|m| m.kind == 0x22).unwrap_or_else(|| panic!("no IGMPv3 report from Linux: {}", show()));
    assert!(their_v4.records.iter().any(|r| r.1 == "239.7.7.7".parse::<IpAddr>().unwrap()), "{}", show());
    for m in &v4 {
        assert_eq!((m.tos, m.ttl, &m.options), (their_v4.tos, their_v4.ttl, &their_v4.options), "{}", show());
    }
    assert_eq!((their_v4.ttl, &their_v4.options[..]), (1, &[0x94, 0x04, 0, 0][..]));
    let their_v6 = theirs
        .iter()
        .find(|m| m.kind == 143 && m.records.iter().any(|r| r.1 == "ff02::1:ff00:3".parse::<IpAddr>().unwrap()))
        .unwrap_or_else(|| panic!("no MLDv2 report from Linux for ff02::1:ff00:3: {}", show()));
    let ours_v6 = ours.iter().find(|m| m.kind == 143).unwrap();
    assert_eq!(
        (ours_v6.ttl, &ours_v6.options, ours_v6.dst_ip, ours_v6.dst_mac),
        (their_v6.ttl, &their_v6.options, their_v6.dst_ip, their_v6.dst_mac),
        "{}",
        show()
    );
    let join = their_v6.records.iter().find(|r| r.1 == "ff02::1:ff00:3".parse::<IpAddr>().unwrap()).unwrap();
    assert_eq!(join.0, 4, "Linux joins with CHANGE_TO_EXCLUDE as we do: {}", show());
}

/// UD multicast send and receive with Linux rdma_rxe, both ways, through
/// rdma_cm's `mckey` on the Linux side (rdmacm-utils: it joins the group
/// with `rdma_join_multicast`, which on RoCE also joins the IP group, then
/// sends or receives `-C` datagrams to QPN 0xFFFFFF with rdma_cm's UDP
/// Q_Key 0x01234567) and a host program on the appliance's ring that
/// attaches a UD QP to the group's IPv4-mapped GID and sends through an AH
/// to it. perftest's own multicast mode (`ib_send_bw -g`, `ib_send_lat
/// -g`) does not run between two Linux rxe peers (see the README), so it is
/// not the reference here. Checked: Linux's receiver completes its 10
/// datagrams; ours gets Linux's 10, each 40 bytes of GRH plus the 100 sent,
/// from Linux's QP (whose number mckey also puts in the immediate data).
/// IPv4 only: Linux 6.1's rdma_cm refuses an IPv6 multicast join on RoCE v2
/// (`mckey -m ff0e::1:2 -b 2001:db8::3`: "failure joining: Unknown error
/// 524", ENOTSUPP), so no Linux program here receives an IPv6 group; ours is
/// tested in the simulator and by the MLD capture above.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn ud_multicast_with_linux_mckey_both_ways() {
    use verbs::{AccessFlags, AhAttr, Context, Qp, QpAttr, QpCap, QpInitAttr, SendFlags, SendWr, UdDest, WrOp};
    use verbs::{qp_attr_mask, qp_state, qp_type};
    if !LinuxPeer::available_or_skip("ud_multicast_with_linux_mckey_both_ways") {
        return;
    }
    const RDMA_UDP_QKEY: u32 = 0x0123_4567;
    const COUNT: usize = 10;
    const SIZE: u32 = 100;
    // The appliance lives to the end of the test (its QEMU goes with it).
    let RingPeer { app: _app, mut linux, shm, .. } = ring_appliance_and_linux("mcast-ud");
    let run = Duration::from_secs(90);

    let ctx = Context::open(&shm.path).unwrap();
    let dev = ctx.device(Some("rxe0")).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let mr = pd.reg_mr(64 << 10, AccessFlags::LOCAL_WRITE).unwrap();
    let cq = dev.create_cq(64, 0).unwrap();
    let attr = QpInitAttr {
        qp_type: qp_type::UD,
        cap: QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qp = Qp::create(&pd, &cq, &cq, None, &attr).unwrap();
    let init = QpAttr { qp_state: qp_state::INIT, port_num: 1, qkey: RDMA_UDP_QKEY, ..Default::default() };
    qp.modify(&init, qp_attr_mask::STATE | qp_attr_mask::PKEY_INDEX | qp_attr_mask::PORT | qp_attr_mask::QKEY).unwrap();
    qp.modify(&QpAttr { qp_state: qp_state::RTR, ..Default::default() }, qp_attr_mask::STATE).unwrap();
    qp.to_rts(0, 0).unwrap();
    let group: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 1, 1];

    // The appliance sends, Linux's mckey receives.
    let t = Instant::now();
    linux.spawn_bg("timeout 60 mckey -m 239.1.1.1 -b 10.0.0.3 -C 10 -S 100", "/tmp/mckey.log").unwrap();
    // mckey's output is block-buffered in a file until it exits: its join
    // shows as the IP group on eth0 (rdma_cm joins it for RoCE), and the QP
    // is attached when librdmacm hands over the join event, right after.
    let joined = linux
        .cmd_timeout(
            "i=0; until ip maddr show dev eth0 | grep -q 239.1.1.1; do i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.1; \
             done; sleep 1; ip maddr show dev eth0",
            run,
        )
        .unwrap();
    assert!(joined.contains("239.1.1.1"), "{joined}");
    let ah = pd
        .create_ah(&AhAttr {
            dgid: group,
            sgid_index: 1,
            hop_limit: 1,
            is_global: 1,
            port_num: 1,
            ..Default::default()
        })
        .unwrap();
    mr.write(0, &[0x5a; SIZE as usize]).unwrap();
    for i in 0..COUNT as u64 {
        let ud = UdDest { ah: &ah, remote_qpn: 0xFF_FFFF, remote_qkey: RDMA_UDP_QKEY };
        let wr = SendWr {
            wr_id: i,
            op: WrOp::Send,
            sg_list: &[mr.sge(0, SIZE).unwrap()],
            flags: SendFlags::SIGNALED,
            ud: Some(ud),
        };
        qp.post_send(&[wr]).unwrap();
        let wc = cq.wait(run).unwrap();
        assert!(wc.status.is_success(), "{wc:?}");
    }
    let theirs = linux.cmd_timeout("wait; cat /tmp/mckey.log", run).unwrap();
    assert!(theirs.contains("mckey: joined dgid: ::ffff:239.1.1.1"), "{theirs}");
    assert!(theirs.contains("data transfers complete") && theirs.contains("return status 0"), "{theirs}");
    eprintln!("appliance -> Linux: {COUNT} datagrams in {:.1} s", t.elapsed().as_secs_f64());

    // Linux's mckey sends, the appliance's QP receives.
    let t = Instant::now();
    qp.attach_mcast(group).unwrap();
    let sges: Vec<verbs::Sge> = (0..COUNT).map(|i| mr.sge(4096 * (i + 1), 4096).unwrap()).collect();
    let recvs: Vec<(u64, &[verbs::Sge])> =
        sges.iter().enumerate().map(|(i, s)| (100 + i as u64, std::slice::from_ref(s))).collect();
    qp.post_recv(&recvs).unwrap();
    let (status, out) = linux.status("timeout 60 mckey -m 239.1.1.1 -b 10.0.0.3 -s -C 10 -S 100", run).unwrap();
    assert_eq!(status, 0, "{out}");
    assert!(out.contains("data transfers complete"), "{out}");
    let mut got = Vec::new();
    for _ in 0..COUNT {
        let wc =
            cq.wait(Duration::from_secs(20)).unwrap_or_else(|e| panic!("after {} datagrams: {e}\n{out}", got.len()));
        assert!(wc.status.is_success(), "{wc:?}");
        assert_eq!(wc.byte_len, 40 + SIZE, "{wc:?}");
        assert_eq!(wc.imm_data, Some(wc.src_qp), "mckey's immediate data is its QPN: {wc:?}");
        got.push(wc.wr_id);
    }
    got.sort();
    assert_eq!(got, (100..100 + COUNT as u64).collect::<Vec<_>>());
    qp.detach_mcast(group).unwrap();
    eprintln!("Linux -> appliance: {COUNT} datagrams in {:.1} s", t.elapsed().as_secs_f64());
    let stats = linux.cmd("rdma statistic show").unwrap();
    assert_eq!(counter(&counters(&stats), "send_err"), Some(0), "{stats}");
}

/// The peer's background jobs (`LinuxPeer::spawn_bg`): the status is the
/// job's own even when the shell reaped it first, and a job that overruns
/// its wait is stopped, leaving the shell answering.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn the_peers_background_jobs_report_their_status_and_can_be_stopped() {
    if !LinuxPeer::available_or_skip("the_peers_background_jobs_report_their_status_and_can_be_stopped") {
        return;
    }
    let mut linux = LinuxPeer::boot(PeerOptions::new(
        Nic::new("52:54:00:00:01:03", free_udp_port(), free_udp_port()),
        "10.0.0.3/24",
    ))
    .unwrap();
    linux.spawn_bg("sh -c 'exit 3'", "/tmp/bg.log").unwrap();
    // Another command first, so the shell reaps the job ("[1]+ Done").
    linux.cmd("sleep 1").unwrap();
    let out = linux.finish_bg("/tmp/bg.log", Duration::from_secs(30)).unwrap();
    assert!(out.contains("exit=3"), "{out}");
    linux.spawn_bg("sleep 600", "/tmp/bg.log").unwrap();
    assert!(linux.finish_bg("/tmp/bg.log", Duration::from_secs(3)).is_err());
    let out = linux.cmd("echo still-here; pidof sleep || echo no-sleep").unwrap();
    assert!(out.contains("still-here") && out.contains("no-sleep"), "{out}");
    // A foreground command past its time is interrupted the same way.
    assert!(linux.status("sleep 600", Duration::from_secs(3)).is_err());
    let (status, out) = linux.status("echo answered; pidof sleep || echo no-sleep", Duration::from_secs(30)).unwrap();
    assert!(status == 0 && out.contains("answered") && out.contains("no-sleep"), "{out}");
}
