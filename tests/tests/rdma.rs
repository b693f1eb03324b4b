//! The rxe transport on the real (emulated) wire: two appliances play
//! `ibv_rc_pingpong` with each other, rdma-core's exchange and all.

#![deny(unsafe_code)]

use tests::{Appliance, Nic, Options, free_udp_port};

fn pair(host_mtu: Option<u32>) -> (Appliance, Appliance) {
    pair_with(host_mtu, "")
}

/// [`pair`] with `append` added to both kernel command lines.
fn pair_with(host_mtu: Option<u32>, append: &str) -> (Appliance, Appliance) {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let node = |mac: &str, local, peer, ip: &str| Options {
        nic: Some(Nic { host_mtu, ..Nic::new(mac, local, peer) }),
        append: format!("ip={ip} {append}"),
        ..Options::default()
    };
    let mut a = Appliance::boot(node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24")).unwrap();
    let mut b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24")).unwrap();
    for x in [&mut a, &mut b] {
        assert!(x.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    }
    (a, b)
}

/// Runs an RC pingpong: the server on `a`, the client on `b`.
fn pingpong(a: &mut Appliance, b: &mut Appliance, args: &str) -> (String, String) {
    pingpong_of("ibv_rc_pingpong", a, b, args)
}

/// Runs `tool` (one of the three pingpongs) with `-c`, data checked: the
/// server on `a`, the client on `b`.
fn pingpong_of(tool: &str, a: &mut Appliance, b: &mut Appliance, args: &str) -> (String, String) {
    let server = a.start_cmd(&format!("{tool} -c {args}"), "local address:").unwrap();
    let client = b.cmd(&format!("{tool} -c {args} 10.0.0.1")).unwrap();
    let server = a.finish_cmd(server).unwrap();
    checked(&server);
    checked(&client);
    (server, client)
}

/// Fails if a pingpong's `-c` check found a page that differs.
fn checked(out: &str) {
    assert!(!out.contains("invalid data in page"), "{out}");
}

/// `-c` as rdma-core has it: the client marks page starts, so a server
/// checking against a client that does not mark reports every page, and the
/// check is off without `-c`.
#[test]
fn rc_pingpong_checks_only_with_c_as_rdma_core() {
    let (mut a, mut b) = pair(None);
    let server = a.start_cmd("ibv_rc_pingpong -c -s 8192 -n 5", "local address:").unwrap();
    let client = b.cmd("ibv_rc_pingpong -s 8192 -n 5 10.0.0.1").unwrap();
    let server = a.finish_cmd(server).unwrap();
    assert!(server.ends_with("usec/iter\ninvalid data in page 0\ninvalid data in page 1\n"), "{server}");
    checked(&client);
    let (server, client) = pingpong(&mut a, &mut b, "-s 8192 -n 5");
    assert!(iters_line(&server).starts_with("5 iters in ") && iters_line(&client).starts_with("5 iters in "));
}

fn iters_line(out: &str) -> &str {
    out.lines().find(|l| l.contains(" iters in ")).unwrap_or_else(|| panic!("no result in:\n{out}"))
}

#[test]
fn rc_pingpong_between_appliances_at_several_sizes() {
    let (mut a, mut b) = pair(None);
    for size in [1, 4096, 65536] {
        let (server, client) = pingpong(&mut a, &mut b, &format!("-s {size} -n 20"));
        assert!(iters_line(&server).starts_with("20 iters in "), "{server}");
        assert!(client.contains("remote address: LID 0x0000, QPN 0x"), "{client}");
        assert!(client.contains("GID ::ffff:10.0.0.1"), "{client}");
        assert!(iters_line(&client).starts_with("20 iters in "), "{client}");
        assert!(client.contains(&format!("{} bytes in ", size * 20 * 2)), "{client}");
    }
    let server_log = a.transcript();
    assert_eq!(server_log.matches("20 iters in ").count(), 3, "{server_log}");
    let stats = b.cmd("rdma statistic show").unwrap();
    let sent: u64 = stats
        .split_whitespace()
        .skip_while(|w| *w != "sent_pkts")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{stats}"));
    assert!(sent > 60, "{stats}");
}

/// The value of counter `name` in `perf`'s output; 0 when `perf` left it out
/// (it prints only counters that moved).
fn perf_counter(perf: &str, name: &str) -> u64 {
    let prefix = format!("{name} ");
    perf.lines().find_map(|l| l.strip_prefix(&prefix)).map_or(0, |v| v.trim().parse().unwrap_or(0))
}

/// Payloads from memory (here the console pingpong's buffers) leave
/// zero-copy: the NIC reads them where they lie, as a descriptor chain, and
/// `perf` counts them; the pingpong checks the data. With `rxe.zero_copy=0`
/// they are copied into the NIC's buffers (the ICRC computed as they move).
#[test]
fn payloads_leave_zero_copy_unless_turned_off() {
    for zero_copy in [true, false] {
        let (mut a, mut b) = pair_with(Some(9000), if zero_copy { "" } else { "rxe.zero_copy=0" });
        for x in [&mut a, &mut b] {
            x.cmd("perf reset").unwrap();
        }
        let (server, client) = pingpong(&mut a, &mut b, "-m 4096 -s 65536 -n 10");
        assert!(iters_line(&server).starts_with("10 iters in "), "{server}");
        assert!(iters_line(&client).starts_with("10 iters in "), "{client}");
        // 10 messages of 16 frames each way at least.
        for x in [&mut a, &mut b] {
            let perf = x.cmd("perf").unwrap();
            let (nic, sent, copied) = (
                perf_counter(&perf, "nic tx_zero_copy"),
                perf_counter(&perf, "tx_zero_copy"),
                perf_counter(&perf, "tx_copied"),
            );
            if zero_copy {
                assert!(nic >= 160 && sent >= 160 && copied == 0, "{perf}");
            } else {
                assert!(nic == 0 && sent == 0 && copied >= 160, "{perf}");
            }
        }
    }
}

/// Ctrl-C ends a pingpong on the console, a waiting server and a running
/// client, and the next pingpong runs as usual (port 18515 and the QPs freed).
#[test]
fn ctrl_c_interrupts_a_pingpong() {
    let (mut a, mut b) = pair(None);
    // Interrupted, a command ends without finishing its report.
    let _waiting = a.start_cmd("ibv_rc_pingpong", "local address:").unwrap();
    let out = a.interrupt().unwrap();
    assert!(out.ends_with("^C\n") && !out.contains(" iters in "), "{out}");
    let _server = a.start_cmd("ibv_rc_pingpong -n 1000000", "local address:").unwrap();
    let _client = b.start_cmd("ibv_rc_pingpong -n 1000000 10.0.0.1", "remote address:").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    for x in [&mut b, &mut a] {
        let out = x.interrupt().unwrap();
        assert!(out.ends_with("^C\n") && !out.contains(" iters in "), "{out}");
    }
    let (server, client) = pingpong(&mut a, &mut b, "-n 20");
    assert!(iters_line(&server).starts_with("20 iters in "), "{server}");
    assert!(iters_line(&client).starts_with("20 iters in "), "{client}");
}

#[test]
fn uc_and_ud_pingpong_between_appliances() {
    let (mut a, mut b) = pair(None);
    let (server, client) = pingpong_of("ibv_uc_pingpong", &mut a, &mut b, "-s 4096 -n 20");
    assert!(iters_line(&client).starts_with("20 iters in ") && iters_line(&server).starts_with("20 iters in "));
    // UD: one MTU (1024 on a 1500-byte link) at most, the GRH in front of each receive.
    let (server, client) = pingpong_of("ibv_ud_pingpong", &mut a, &mut b, "-s 1024 -n 20");
    assert!(iters_line(&client).starts_with("20 iters in ") && iters_line(&server).starts_with("20 iters in "));
    b.expect("ibv_ud_pingpong -s 2048 10.0.0.1", "error: ibv_ud_pingpong: requested size larger than port MTU (1024)")
        .unwrap();
}

/// RoCE v2 over IPv6 between two appliances: `-g 0` (the link-local GID, as
/// Linux rxe's index 0) and a global address's GID, for RC, UC and UD, the next
/// hop found through neighbour discovery.
#[test]
fn pingpong_over_ipv6_gids() {
    let (mut a, mut b) = pair(None);
    a.cmd("ip -6 addr add 2001:db8::1/64 dev eth0").unwrap();
    b.cmd("ip -6 addr add 2001:db8::2/64 dev eth0").unwrap();
    let gids = a.cmd("show_gids").unwrap();
    assert!(gids.contains("rxe0\t1\t2\t2001:0db8:0000:0000:0000:0000:0000:0001"), "{gids}");
    for (tool, args, gid) in [
        ("ibv_rc_pingpong", "-g 0 -s 4096 -n 20", "GID fe80::5054:ff:fe00:1"),
        ("ibv_rc_pingpong", "-g 2 -s 65536 -n 10", "GID 2001:db8::1"),
        ("ibv_uc_pingpong", "-g 2 -s 4096 -n 20", "GID 2001:db8::1"),
        ("ibv_ud_pingpong", "-g 0 -s 1024 -n 20", "GID fe80::5054:ff:fe00:1"),
    ] {
        let (server, client) = pingpong_of(tool, &mut a, &mut b, args);
        assert!(client.contains(gid), "{tool} {args}:\n{client}");
        let n = if args.contains("-n 10") { "10" } else { "20" };
        assert!(iters_line(&client).starts_with(&format!("{n} iters in ")), "{tool} {args}:\n{client}");
        assert!(iters_line(&server).starts_with(&format!("{n} iters in ")), "{tool} {args}:\n{server}");
    }
    // The client asked for the server's addresses; smoltcp's solicited
    // advertisements answered the RDMA path's table.
    let neigh = b.cmd("ip -6 neigh").unwrap();
    assert!(neigh.contains("fe80::5054:ff:fe00:1 dev eth0 lladdr 52:54:00:00:00:01 REACHABLE"), "{neigh}");
    assert!(neigh.contains("2001:db8::1 dev eth0 lladdr 52:54:00:00:00:01 REACHABLE"), "{neigh}");
    let stats = b.cmd("ip -s link").unwrap();
    assert!(!stats.contains("ndisc 0 "), "{stats}");
}

#[test]
fn rc_pingpong_with_mtu_4096_on_a_jumbo_link() {
    let (mut a, mut b) = pair(Some(9000));
    assert!(b.cmd("ibv_devinfo").unwrap().contains("active_mtu:\t\t4096 (5)"));
    let (_, client) = pingpong(&mut a, &mut b, "-m 4096 -s 65536 -n 10");
    assert!(iters_line(&client).starts_with("10 iters in "), "{client}");
}

#[test]
fn rc_pingpong_refusals_are_clear() {
    let mut a = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:00:07", free_udp_port(), free_udp_port())),
        append: "ip=10.0.0.7/24".into(),
        ..Options::default()
    })
    .unwrap();
    a.expect("ibv_rc_pingpong 10.0.0.1", "error: ibv_rc_pingpong: no RDMA device (rdma link add").unwrap();
    a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap();
    a.expect("ibv_rc_pingpong -m 1000", "error: ibv_rc_pingpong: invalid MTU 1000").unwrap();
    a.expect("ibv_rc_pingpong -d mlx5_0", "error: ibv_rc_pingpong: IB device mlx5_0 not found").unwrap();
    a.expect("ibv_rc_pingpong -g 9 10.0.0.1", "error: ibv_rc_pingpong: no GID at index 9").unwrap();
}

/// RC between two appliances on a bad wire: 5% loss, 1% reordering, 1%
/// duplication and 0.5% corruption (caught by the ICRC, or by TCP's checksum
/// for the exchange), seeded. Every iteration completes with its data checked.
#[test]
fn rc_pingpong_under_loss_reordering_duplication_and_corruption() {
    use tests::relay::{Faults, Relay};
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let faults = Faults { drop: 0.05, duplicate: 0.01, reorder: 0.01, corrupt: 0.005, spare_arp: false };
    let relay = Relay::start(p1, p2, faults, 42).unwrap();
    let node = |mac: &str, local, peer, ip: &str| Options {
        nic: Some(Nic::new(mac, local, peer)),
        append: format!("ip={ip}"),
        cmd_timeout: std::time::Duration::from_secs(120),
        ..Options::default()
    };
    let mut a = Appliance::boot(node("52:54:00:00:00:01", p1, relay.port_a, "10.0.0.1/24")).unwrap();
    let mut b = Appliance::boot(node("52:54:00:00:00:02", p2, relay.port_b, "10.0.0.2/24")).unwrap();
    for x in [&mut a, &mut b] {
        assert!(x.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    }
    for size in [4096, 65536] {
        let (server, client) = pingpong(&mut a, &mut b, &format!("-s {size} -n 100"));
        assert!(iters_line(&client).starts_with("100 iters in "), "{client}\n{}", relay.summary());
        assert!(iters_line(&server).starts_with("100 iters in "), "{server}\n{}", relay.summary());
    }
    let stats = b.cmd("rdma statistic show").unwrap();
    println!("relay: {}\nb: {}", relay.summary(), stats.trim());
    assert!(relay.counts.dropped.load(std::sync::atomic::Ordering::Relaxed) > 0, "{}", relay.summary());
}

/// Fails on an `error:` line; log lines (events) may come with a command.
fn no_error(out: &str) {
    assert!(!out.lines().any(|l| l.starts_with("error:")), "{out}");
}

/// One appliance with two NICs on two wires, to two other appliances: one
/// rxe device per NIC (rxe0 on eth0 to `b`, rxe1 on eth1 to `c`), each with
/// its own GID table, QPN space and counters. Traffic on either device,
/// data checked by the pingpong; eth1 going down leaves rxe0 ACTIVE and
/// carrying traffic; `rdma link delete rxe1` leaves rxe0 working.
#[test]
fn two_nics_carry_two_rdma_devices() {
    let (p1, p2, p3, p4) = (free_udp_port(), free_udp_port(), free_udp_port(), free_udp_port());
    let second_nic = vec![
        "-netdev".to_string(),
        format!("socket,id=n1,udp=127.0.0.1:{p4},localaddr=127.0.0.1:{p3}"),
        "-device".to_string(),
        "virtio-net-pci,netdev=n1,mac=52:54:00:00:01:01".to_string(),
    ];
    let mut a = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
        extra: second_nic,
        append: "ip=10.0.0.1/24".into(),
        ..Options::default()
    })
    .unwrap();
    let node = |mac: &str, local, peer, ip: &str| Options {
        nic: Some(Nic::new(mac, local, peer)),
        append: format!("ip={ip}"),
        ..Options::default()
    };
    let mut b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24")).unwrap();
    let mut c = Appliance::boot(node("52:54:00:00:01:03", p4, p3, "10.0.1.3/24")).unwrap();

    let links = a.cmd("ip link show").unwrap();
    assert!(links.contains("eth0:") && links.contains("eth1:"), "{links}");
    no_error(&a.cmd("ip addr add 10.0.1.1/24 dev eth1").unwrap());
    no_error(&a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap());
    no_error(&a.cmd("rdma link add rxe1 type rxe netdev eth1").unwrap());
    for x in [&mut b, &mut c] {
        no_error(&x.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap());
    }
    let shown = a.cmd("rdma link show").unwrap();
    assert!(shown.contains("link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0"), "{shown}");
    assert!(shown.contains("link rxe1/1 state ACTIVE physical_state LINK_UP netdev eth1"), "{shown}");
    // Each device's GID table holds its own netdev's addresses.
    let gids = a.cmd("show_gids").unwrap();
    assert!(gids.lines().any(|l| l.starts_with("rxe1") && l.contains("10.0.1.1")), "{gids}");
    assert!(!gids.lines().any(|l| l.starts_with("rxe1") && l.contains("10.0.0.1")), "{gids}");

    // rxe1 to c, then rxe0 to b: a is the server, the peers check the data too.
    let server = a.start_cmd("ibv_rc_pingpong -c -d rxe1 -n 200 -s 4096", "local address:").unwrap();
    let client = c.cmd("ibv_rc_pingpong -c -n 200 -s 4096 10.0.1.1").unwrap();
    let served = a.finish_cmd(server).unwrap();
    checked(&served);
    checked(&client);
    assert!(iters_line(&served).starts_with("200 iters"), "{served}");
    assert!(iters_line(&client).starts_with("200 iters"), "{client}");
    let rc_pingpong_with_b = |a: &mut Appliance, b: &mut Appliance| {
        let server = a.start_cmd("ibv_rc_pingpong -c -d rxe0 -n 200 -s 4096", "local address:").unwrap();
        let client = b.cmd("ibv_rc_pingpong -c -n 200 -s 4096 10.0.0.1").unwrap();
        let served = a.finish_cmd(server).unwrap();
        checked(&served);
        checked(&client);
        assert!(iters_line(&served).starts_with("200 iters"), "{served}");
        assert!(iters_line(&client).starts_with("200 iters"), "{client}");
    };
    rc_pingpong_with_b(&mut a, &mut b);
    // The counters are per device: both moved 200 round trips of one frame each way.
    let stats = a.cmd("rdma statistic show").unwrap();
    for dev in ["rxe0", "rxe1"] {
        let line = stats.lines().find(|l| l.starts_with(&format!("link {dev}/1"))).unwrap_or_else(|| panic!("{stats}"));
        let sent: u64 = line.split_whitespace().skip_while(|w| *w != "sent_pkts").nth(1).unwrap().parse().unwrap();
        assert!(sent >= 200, "{line}");
    }

    // eth1 down: rxe1 goes DOWN, rxe0 stays ACTIVE and works.
    no_error(&a.cmd("ip link set eth1 down").unwrap());
    let shown = a.cmd("rdma link show").unwrap();
    assert!(shown.contains("link rxe1/1 state DOWN"), "{shown}");
    assert!(shown.contains("link rxe0/1 state ACTIVE"), "{shown}");
    rc_pingpong_with_b(&mut a, &mut b);

    // rxe1 deleted: rxe0 carries on.
    no_error(&a.cmd("rdma link delete rxe1").unwrap());
    let shown = a.cmd("rdma link show").unwrap();
    assert!(!shown.contains("rxe1") && shown.contains("link rxe0/1 state ACTIVE"), "{shown}");
    rc_pingpong_with_b(&mut a, &mut b);
}
