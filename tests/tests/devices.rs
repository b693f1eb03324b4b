//! Two RDMA devices in one appliance, driven from the host through its
//! ring: appliance `a` has two NICs (eth0 on a wire to `b`, eth1 on a wire
//! to `c`) and one rxe device on each (rxe0, rxe1); every appliance has its
//! own ivshmem ring and this process is the host of all three.
//!
//! The host tools name the device they mean (`-d rxe1`, `rxe1/1`,
//! `show_gids rxe1`) and get that device's values. Host `rc_pingpong` runs
//! on both of `a`'s devices at the same time, one against `b` and one
//! against `c`, every message checked by the tool itself. Then `a`'s eth1
//! goes down, and later rxe1 is deleted, each while a pingpong runs on
//! rxe0: rxe0 stays ACTIVE and that pingpong completes, data checked.

#![deny(unsafe_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use tests::tool::Watched;
use tests::{Appliance, Ivshmem, Nic, Options, free_tcp_port, free_udp_port};

/// Room for a few contexts' rings and 4 KiB buffers.
const REGION: u64 = 16 << 20;
/// Generous: three appliances share two cores under TCG.
const WAIT: Duration = Duration::from_secs(60);
/// Round trips of 4 KiB per pingpong: seconds of traffic under TCG (1.5 to
/// 7 ms each on a busy host), so that two runs started together overlap.
const ITERS: u32 = 2000;
/// Round trips of a run that a command must land in the middle of: the
/// command waits for a second of its traffic, and takes about a second.
const LONG: u32 = 6000;

struct Three {
    a: Appliance,
    b: Appliance,
    c: Appliance,
    ring_a: Ivshmem,
    ring_b: Ivshmem,
    ring_c: Ivshmem,
}

/// `a` (10.0.0.1 on eth0, 10.0.1.1 on eth1, rxe0 and rxe1), `b` (10.0.0.2)
/// on a's eth0 and `c` (10.0.1.3) on a's eth1, each peer with rxe0.
fn three() -> Three {
    let (p1, p2, p3, p4) = (free_udp_port(), free_udp_port(), free_udp_port(), free_udp_port());
    let ring = |tag: &str| Ivshmem::temp(&format!("devices-{tag}"), REGION);
    let (ring_a, ring_b, ring_c) = (ring("a"), ring("b"), ring("c"));
    let second_nic = vec![
        "-netdev".to_string(),
        format!("socket,id=n1,udp=127.0.0.1:{p4},localaddr=127.0.0.1:{p3}"),
        "-device".to_string(),
        "virtio-net-pci,netdev=n1,mac=52:54:00:00:01:01".to_string(),
    ];
    let node = |mac: &str, local, peer, ip: &str, ring: &Ivshmem, extra: Vec<String>| Options {
        nic: Some(Nic::new(mac, local, peer)),
        append: format!("ip={ip}"),
        ivshmem: Some(ring.clone()),
        extra,
        cmd_timeout: WAIT,
        ..Options::default()
    };
    let mut a = Appliance::boot(node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24", &ring_a, second_nic)).unwrap();
    let mut b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24", &ring_b, vec![])).unwrap();
    let mut c = Appliance::boot(node("52:54:00:00:01:03", p4, p3, "10.0.1.3/24", &ring_c, vec![])).unwrap();
    no_error(&a.cmd("ip addr add 10.0.1.1/24 dev eth1").unwrap());
    no_error(&a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap());
    no_error(&a.cmd("rdma link add rxe1 type rxe netdev eth1").unwrap());
    for x in [&mut b, &mut c] {
        no_error(&x.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap());
    }
    Three { a, b, c, ring_a, ring_b, ring_c }
}

/// Fails on an `error:` line; log lines (events) may come with a command.
fn no_error(out: &str) {
    assert!(!out.lines().any(|l| l.starts_with("error:")), "{out}");
}

/// Runs host tool `name` on `ring` to its end; its output, which must come
/// with success.
fn host(name: &str, ring: &Path, args: &str) -> String {
    let (ok, out) = host_status(name, ring, args);
    assert!(ok, "host `{name} {args}` failed:\n{out}");
    out
}

/// Runs host tool `name` on `ring` to its end: whether it succeeded, and its output.
fn host_status(name: &str, ring: &Path, args: &str) -> (bool, String) {
    let child = tests::tool::spawn(name, ring, args).unwrap();
    tests::tool::finish(child, WAIT).unwrap()
}

/// The index of the RoCE v2 GID of `ip` in `dev`'s table, as `show_gids`
/// prints it (`DEV PORT INDEX GID IPv4 VER NETDEV`).
fn v2_gid_index(gids: &str, dev: &str, ip: &str) -> u8 {
    gids.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 6 && f[0] == dev && f[4] == ip && f[5] == "v2")
        .and_then(|f| f[2].parse().ok())
        .unwrap_or_else(|| panic!("no RoCE v2 GID of {ip} on {dev}:\n{gids}"))
}

/// One end of a pingpong: a ring, a device on it, and the index of the
/// device's RoCE v2 GID to use.
#[derive(Clone, Copy)]
struct End<'a> {
    ring: &'a Path,
    dev: &'a str,
    gid: u8,
}

/// One host `rc_pingpong` pair: the server on one ring, the client on
/// another, exchanging addresses on a free TCP port of the host, `iters` round trips of 4 KiB, each
/// side checking every message it receives (`-c`).
struct Pingpong {
    what: &'static str,
    iters: u32,
    server: Watched,
    client: Watched,
}

impl Pingpong {
    /// Starts the server at `here` and, once it printed its address (it
    /// listens right after), the client at `there`.
    fn start(what: &'static str, here: End, there: End, iters: u32) -> Pingpong {
        let port = free_tcp_port();
        let args = |e: &End| format!("-p {port} -n {iters} -s 4096 -c -d {} -g {}", e.dev, e.gid);
        let server = Watched::spawn("rc_pingpong", here.ring, &args(&here)).unwrap();
        assert!(server.wait_line("local address:", WAIT).is_some(), "{what}: server never started:\n{}", server.text());
        // The client retries its TCP connect for 10 s while the server binds.
        let client_args = format!("{} 127.0.0.1", args(&there));
        let client = Watched::spawn("rc_pingpong", there.ring, &client_args).unwrap();
        Pingpong { what, iters, server, client }
    }

    /// When the server's traffic began: it printed the client's address
    /// (the QPs are connected, the first message comes next).
    fn began(&self) -> Instant {
        let what = self.what;
        self.server.wait_line("remote address:", WAIT).unwrap_or_else(|| {
            panic!("{what}: never connected:\nserver:\n{}\nclient:\n{}", self.server.text(), self.client.text())
        })
    }

    /// Waits until the server has carried traffic for a second: its first
    /// progress line (`N/ITERS iters`, once a second).
    fn wait_progress(&self) {
        let what = self.what;
        let progress = format!("/{} iters", self.iters);
        assert!(self.server.wait_line(&progress, WAIT).is_some(), "{what}: no progress:\n{}", self.server.text());
    }

    /// Whether the server has printed its result yet.
    fn ended_yet(&self) -> bool {
        self.server.wait_line(" iters in ", Duration::ZERO).is_some()
    }

    /// Waits for both ends; checks both completed every round trip (each
    /// checked every message; a bad one makes it exit 1) and returns when
    /// the server printed its result.
    fn finish(self) -> Instant {
        let (what, iters) = (self.what, self.iters);
        let limit = WAIT * 3;
        let ended = self.server.wait_line(" iters in ", limit);
        let (server_ok, server) = self.server.finish(WAIT).unwrap();
        let (client_ok, client) = self.client.finish(WAIT).unwrap();
        let both = format!("{what}:\nserver:\n{server}\nclient:\n{client}");
        assert!(server_ok && client_ok, "{both}");
        for out in [&server, &client] {
            assert!(out.contains(&format!("{iters} iters in ")), "{both}");
            assert!(!out.contains("invalid data in page"), "{both}");
            assert!(out.contains(&format!("{} bytes in ", 4096 * u64::from(iters) * 2)), "{both}");
        }
        println!("{what}: {}", server.lines().find(|l| l.contains(" iters in ")).unwrap_or(""));
        ended.unwrap()
    }
}

/// A counter of `rdma statistic show` for one device (`link DEV/1 ... NAME VALUE`).
fn counter(stats: &str, dev: &str, name: &str) -> u64 {
    let line = stats
        .lines()
        .find(|l| l.starts_with(&format!("link {dev}/1 ")))
        .unwrap_or_else(|| panic!("no {dev} in:\n{stats}"));
    line.split_whitespace()
        .skip_while(|w| *w != name)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in: {line}"))
}

#[test]
fn two_devices_of_one_appliance_carry_traffic_at_once_and_apart() {
    let t0 = Instant::now();
    let Three { mut a, b: _b, c: _c, ring_a, ring_b, ring_c } = three();
    let (ra, rb, rc) = (&ring_a.path, &ring_b.path, &ring_c.path);
    println!("booted and linked in {:?}", t0.elapsed());

    // The host tools address rxe1 by name and get rxe1's values.
    let info1 = host("ibv_devinfo", ra, "-d rxe1");
    let info0 = host("ibv_devinfo", ra, "-d rxe0");
    assert!(info1.starts_with("hca_id:\trxe1\n") && !info1.contains("rxe0"), "{info1}");
    assert!(info0.starts_with("hca_id:\trxe0\n") && !info0.contains("rxe1"), "{info0}");
    let guid = |info: &str| info.lines().find(|l| l.contains("node_guid:")).map(str::to_string).unwrap();
    assert_ne!(guid(&info0), guid(&info1), "two devices, one node GUID:\n{info0}\n{info1}");
    assert_eq!(a.cmd("ibv_devinfo -d rxe1").unwrap(), info1, "console and host `ibv_devinfo -d rxe1`");
    let verbose1 = host("ibv_devinfo", ra, "-v -d rxe1");
    assert!(verbose1.contains("GID[") && verbose1.contains("::ffff:10.0.1.1, RoCE v2"), "{verbose1}");
    assert!(!verbose1.contains("10.0.0.1"), "rxe1 shows eth0's address:\n{verbose1}");

    let link1 = host("rdma", ra, "link show rxe1/1");
    assert_eq!(link1.trim_end(), "link rxe1/1 state ACTIVE physical_state LINK_UP netdev eth1", "{link1}");
    let link0 = host("rdma", ra, "link show rxe0/1");
    assert_eq!(link0.trim_end(), "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0", "{link0}");

    let gids1 = host("show_gids", ra, "rxe1");
    let rows1: Vec<&str> = gids1.lines().skip(2).filter(|l| !l.starts_with("n_gids_found")).collect();
    assert!(!rows1.is_empty() && rows1.iter().all(|l| l.starts_with("rxe1\t")), "{gids1}");
    assert!(rows1.iter().all(|l| l.ends_with("\teth1")), "{gids1}");
    assert!(!gids1.contains("10.0.0.1"), "rxe1 shows eth0's address:\n{gids1}");
    let all_gids = host("show_gids", ra, "");
    let gid_a0 = v2_gid_index(&all_gids, "rxe0", "10.0.0.1");
    let gid_a1 = v2_gid_index(&gids1, "rxe1", "10.0.1.1");
    let gid_b = v2_gid_index(&host("show_gids", rb, "rxe0"), "rxe0", "10.0.0.2");
    let gid_c = v2_gid_index(&host("show_gids", rc, "rxe0"), "rxe0", "10.0.1.3");
    let a0 = End { ring: ra, dev: "rxe0", gid: gid_a0 };
    let a1 = End { ring: ra, dev: "rxe1", gid: gid_a1 };
    let b0 = End { ring: rb, dev: "rxe0", gid: gid_b };
    let c0 = End { ring: rc, dev: "rxe0", gid: gid_c };
    assert!(!all_gids.lines().any(|l| l.starts_with("rxe0\t") && l.contains("10.0.1.1")), "{all_gids}");

    // Both of a's devices at once: rxe0 with b, rxe1 with c.
    let stats0 = host("rdma", ra, "statistic show");
    let to_b = Pingpong::start("rxe0 with b", a0, b0, ITERS);
    let to_c = Pingpong::start("rxe1 with c", a1, c0, ITERS);
    let began = [to_b.began(), to_c.began()];
    let ended = [to_b.finish(), to_c.finish()];
    let (last_start, first_end) = (began.iter().max().unwrap(), ended.iter().min().unwrap());
    let at = |t: &Instant| t.saturating_duration_since(t0).as_secs_f64();
    println!(
        "rxe0 with b ran {:.1}..{:.1} s, rxe1 with c ran {:.1}..{:.1} s",
        at(&began[0]),
        at(&ended[0]),
        at(&began[1]),
        at(&ended[1])
    );
    assert!(last_start < first_end, "the two pingpongs did not overlap: began {began:?}, ended {ended:?}");
    // Each device counted its own traffic: at least one packet per message sent.
    let stats = host("rdma", ra, "statistic show");
    for dev in ["rxe0", "rxe1"] {
        let sent = counter(&stats, dev, "sent_pkts") - counter(&stats0, dev, "sent_pkts");
        assert!(sent >= u64::from(ITERS), "{dev} sent {sent} packets for {ITERS} messages:\n{stats}");
    }

    // eth1 down in the middle of an rxe0 pingpong: rxe1 goes DOWN, rxe0
    // stays ACTIVE and the pingpong completes.
    let run = Pingpong::start("rxe0 with b, eth1 going down", a0, b0, LONG);
    run.wait_progress();
    no_error(&a.cmd("ip link set eth1 down").unwrap());
    let links = host("rdma", ra, "link show");
    assert!(links.contains("link rxe1/1 state DOWN"), "{links}");
    assert!(links.contains("link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0"), "{links}");
    let info0 = host("ibv_devinfo", ra, "-d rxe0");
    assert!(info0.contains("state:\t\t\tPORT_ACTIVE (4)"), "{info0}");
    let sent = |s: &str| counter(s, "rxe0", "sent_pkts");
    let after_down = sent(&host("rdma", ra, "statistic show link rxe0/1"));
    assert!(!run.ended_yet(), "the pingpong ended before eth1 went down; it is too short to test this");
    run.finish();
    let at_end = sent(&host("rdma", ra, "statistic show link rxe0/1"));
    assert!(at_end > after_down, "rxe0 sent nothing after eth1 went down: {after_down} then {at_end}");

    // rxe1 deleted (through the ring) in the middle of an rxe0 pingpong.
    let run = Pingpong::start("rxe0 with b, rxe1 being deleted", a0, b0, LONG);
    run.wait_progress();
    host("rdma", ra, "link delete rxe1");
    let links = host("rdma", ra, "link show");
    assert!(!links.contains("rxe1") && links.contains("link rxe0/1 state ACTIVE"), "{links}");
    let (found, out) = host_status("ibv_devinfo", ra, "-d rxe1");
    assert!(!found && out.contains("rxe1"), "ibv_devinfo -d rxe1 after the delete:\n{out}");
    let after_delete = sent(&host("rdma", ra, "statistic show link rxe0/1"));
    assert!(!run.ended_yet(), "the pingpong ended before rxe1 was deleted; it is too short to test this");
    run.finish();
    let at_end = sent(&host("rdma", ra, "statistic show link rxe0/1"));
    assert!(at_end > after_delete, "rxe0 sent nothing after the delete: {after_delete} then {at_end}");
    no_error(&a.cmd("rdma link show").unwrap());
    println!("whole test: {:?}", t0.elapsed());
}
