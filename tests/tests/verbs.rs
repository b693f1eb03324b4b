//! Host programs on the appliances' rings: two appliances on one wire, each
//! with its own ivshmem file, and this process as the host of both. RC
//! ping-pong in both directions at 1 B, 4 KiB and 1 MiB through the `verbs`
//! library (the same calls `rc_pingpong` makes: QPs to RTS with ARP
//! resolved by the appliance, WQEs written into the SQ/RQ rings, CQEs read
//! from the CQ rings), data checked; WRITE and READ; and a host client
//! killed while holding objects, whose objects the appliance reclaims.
//!
//! The regions are 64 MiB: with the default 8 contexts that leaves each
//! context about 7 MiB of buffer area, room for 1 MiB messages (the 16 MiB
//! default of older runs gives ~984 KiB).

#![deny(unsafe_code)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::rc::connect;
use tests::{Appliance, Ivshmem, Nic, Options, free_udp_port, ring_pair};
use verbs::{AccessFlags, Context, Cq, MemoryRegion, Qp, QpCap, QpInitAttr, SendFlags, SendWr, WrOp};

const REGION: u64 = 64 << 20;
/// `enum ibv_mtu` 3: 1024-byte packets on the default 1500-byte netdevs.
const IBV_MTU_1024: u32 = 3;
const BIG: usize = 1 << 20;
/// The bound on every wait for something that must happen (a completion on the
/// emulated wire, a reclaim, a server listening): generous, because TCG on a busy
/// machine can be slow for many seconds; not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);

fn pair(tag: &str) -> (Appliance, Appliance, Ivshmem, Ivshmem) {
    ring_pair([Ivshmem::temp(&format!("{tag}-a"), REGION), Ivshmem::temp(&format!("{tag}-b"), REGION)], ["", ""])
}

/// The byte message `seq` of side `side` carries at `i`.
fn pattern(side: u8, seq: u32, i: usize) -> u8 {
    (i as u32).wrapping_add(seq.wrapping_mul(31)) as u8 ^ side
}

struct End<'a> {
    qp: &'a Qp<'a>,
    cq: &'a Cq<'a>,
    mr: &'a MemoryRegion<'a>,
    side: u8,
}

/// `iters` round trips of `size` bytes: `client` sends first, `server`
/// answers; every received message is checked. Returns the time per
/// round trip.
fn pingpong(client: &End, server: &End, size: usize, iters: u32) -> Duration {
    let sge = |e: &End| e.mr.sge(0, size as u32).unwrap();
    let send = |e: &End, seq: u32| {
        let msg: Vec<u8> = (0..size).map(|i| pattern(e.side, seq, i)).collect();
        e.mr.write(0, &msg).unwrap();
        let wr = SendWr { wr_id: 2, op: WrOp::Send, sg_list: &[sge(e)], flags: SendFlags::SIGNALED, ud: None };
        e.qp.post_send(&[wr]).unwrap();
    };
    let receive = |e: &End, from: &End, seq: u32| {
        // The send's completion and the receive's, in either order.
        let mut got_recv = false;
        let mut got_send = false;
        while !(got_recv && got_send) {
            let wc = e.cq.wait(WAIT).unwrap();
            assert!(wc.status.is_success(), "size {size} seq {seq}: {wc:?}");
            match wc.wr_id {
                1 => {
                    assert_eq!(wc.byte_len as usize, size);
                    let data = e.mr.to_vec(0, size).unwrap();
                    if let Some(i) = (0..size).find(|&i| data[i] != pattern(from.side, seq, i)) {
                        panic!("size {size}: message {seq} differs at byte {i}");
                    }
                    got_recv = true;
                }
                2 => got_send = true,
                other => panic!("unexpected wr_id {other}"),
            }
        }
    };
    let start = Instant::now();
    for seq in 0..iters {
        // A receive is posted before the peer can send into it: the server's
        // before the client's send, the client's before the server answers.
        server.qp.post_recv(&[(1, &[sge(server)][..])]).unwrap();
        client.qp.post_recv(&[(1, &[sge(client)][..])]).unwrap();
        send(client, seq);
        // The server's own send completes after its answer; the first
        // receive is waited for alone.
        let wc = server.cq.wait(WAIT).unwrap();
        assert!(wc.status.is_success() && wc.wr_id == 1, "size {size} seq {seq}: {wc:?}");
        let data = server.mr.to_vec(0, size).unwrap();
        assert!((0..size).all(|i| data[i] == pattern(client.side, seq, i)), "size {size}: message {seq}");
        send(server, seq);
        receive(client, server, seq);
        // The server's send completion.
        let wc = server.cq.wait(WAIT).unwrap();
        assert!(wc.status.is_success() && wc.wr_id == 2, "{wc:?}");
    }
    start.elapsed() / iters
}

#[test]
fn host_programs_ping_pong_between_two_appliances_through_the_rings() {
    let (mut a, mut b, s1, s2) = pair("pp");
    let (ca, cb) = (Context::open(&s1.path).unwrap(), Context::open(&s2.path).unwrap());
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
    let (ma, mb) = (pa.reg_mr(BIG, AccessFlags::ALL_REMOTE).unwrap(), pb.reg_mr(BIG, AccessFlags::ALL_REMOTE).unwrap());
    let (cqa, cqb) = (da.create_cq(16, 0).unwrap(), db.create_cq(16, 0).unwrap());
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qa = Qp::create(&pa, &cqa, &cqa, None, &attr).unwrap();
    let qb = Qp::create(&pb, &cqb, &cqb, None, &attr).unwrap();
    connect(&qa, qb.qp_num(), 2, IBV_MTU_1024).unwrap();
    connect(&qb, qa.qp_num(), 1, IBV_MTU_1024).unwrap();
    let ea = End { qp: &qa, cq: &cqa, mr: &ma, side: 0x00 };
    let eb = End { qp: &qb, cq: &cqb, mr: &mb, side: 0x5a };
    for (size, iters) in [(1, 20), (4096, 20), (BIG, 2)] {
        let ab = pingpong(&ea, &eb, size, iters);
        let ba = pingpong(&eb, &ea, size, iters);
        println!("{size} B: {ab:?}/round trip a->b, {ba:?} b->a");
    }

    // WRITE 1 MiB into b, READ it back into a.
    let data: Vec<u8> = (0..BIG).map(|i| (i ^ (i >> 9)) as u8).collect();
    ma.write(0, &data).unwrap();
    mb.fill(0, BIG, 0).unwrap();
    let post = |wr_id, op| {
        let wr = SendWr { wr_id, op, sg_list: &[ma.sge(0, BIG as u32).unwrap()], flags: SendFlags::SIGNALED, ud: None };
        qa.post_send(&[wr]).unwrap();
        let wc = cqa.wait(WAIT).unwrap();
        assert!(wc.status.is_success() && wc.wr_id == wr_id, "{wc:?}");
    };
    post(10, WrOp::Write { remote_addr: mb.addr(), rkey: mb.rkey() });
    assert!(mb.to_vec(0, BIG).unwrap() == data, "WRITE data differs");
    ma.fill(0, BIG, 0).unwrap();
    post(11, WrOp::Read { remote_addr: mb.addr(), rkey: mb.rkey() });
    assert!(ma.to_vec(0, BIG).unwrap() == data, "READ data differs");

    // Atomics on a word of b: fetch-add, then compare-and-swap, each returning
    // the word's old value into a.
    mb.write_u64(0, 40).unwrap();
    let atomic = |wr_id, op, at: usize| {
        let wr = SendWr { wr_id, op, sg_list: &[ma.sge(at, 8).unwrap()], flags: SendFlags::SIGNALED, ud: None };
        qa.post_send(&[wr]).unwrap();
        let wc = cqa.wait(WAIT).unwrap();
        assert!(wc.status.is_success() && wc.wr_id == wr_id, "{wc:?}");
    };
    atomic(12, WrOp::FetchAdd { remote_addr: mb.addr(), rkey: mb.rkey(), add: 2 }, 8);
    assert_eq!((ma.read_u64(8).unwrap(), mb.read_u64(0).unwrap()), (40, 42));
    atomic(13, WrOp::CompareSwap { remote_addr: mb.addr(), rkey: mb.rkey(), compare: 42, swap: 7 }, 16);
    assert_eq!((ma.read_u64(16).unwrap(), mb.read_u64(0).unwrap()), (42, 7));

    let r = da.resources().unwrap();
    assert_eq!((r.pd, r.mr, r.cq, r.qp, r.ctx), (1, 1, 1, 1, 1));
    // For the log: what the transports did (retransmissions show here).
    for (name, x) in [("a", &mut a), ("b", &mut b)] {
        println!("{name}: {}", x.cmd("rdma statistic show").unwrap().trim());
    }
}

/// Not a test by itself: the child process of
/// `a_killed_host_client_has_its_objects_reclaimed`, which runs this binary
/// again with `VERBS_CHILD_RING` set and kills it once it holds objects.
#[test]
#[ignore]
fn child_holds_objects() {
    let Some(ring) = std::env::var_os("VERBS_CHILD_RING") else { return };
    let ctx = Context::open(std::path::Path::new(&ring)).unwrap();
    let dev = ctx.device(Some("rxe0")).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let _mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let cq = dev.create_cq(8, 0).unwrap();
    let qp = Qp::create(&pd, &cq, &cq, None, &QpInitAttr::default()).unwrap();
    qp.to_init(1, AccessFlags::NONE_REMOTE).unwrap();
    println!("CHILD READY");
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn a_killed_host_client_has_its_objects_reclaimed() {
    let (mut a, _b, s1, _s2) = pair("kill");
    let ctx = Context::open(&s1.path).unwrap();
    let dev = ctx.device(Some("rxe0")).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_holds_objects", "--nocapture", "--test-threads=1"])
        .env("VERBS_CHILD_RING", &s1.path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let ready = BufReader::new(out).lines().map_while(Result::ok).any(|l| l.contains("CHILD READY"));
    assert!(ready, "the child never got its objects");
    let r = dev.resources().unwrap();
    assert_eq!((r.pd, r.mr, r.cq, r.qp, r.ctx), (1, 1, 1, 1, 1));
    child.kill().unwrap();
    let _ = child.wait();
    // The lease is 2000 beats of 1 ms; the reclaim follows within a beat.
    let start = Instant::now();
    loop {
        let r = dev.resources().unwrap();
        if (r.pd, r.mr, r.cq, r.qp, r.ctx) == (0, 0, 0, 0, 0) {
            break;
        }
        assert!(start.elapsed() < WAIT, "not reclaimed: {r:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The log line may still be on its way through the serial port when the
    // ring already shows the objects gone.
    let logged = a.wait_for_text("reclaimed (lease expired): destroyed 1 qp, 1 mr, 1 cq, 1 pd", WAIT);
    assert!(logged.is_ok(), "{}", a.transcript());
    assert!(a.cmd("rdma link").is_ok());
}

/// The console and the host tools format the same ring command types with
/// the same code (`verbs_ring::show`): for one appliance, each tool prints
/// the same text on the console as on the host.
#[test]
fn the_console_and_the_host_tools_print_the_same_text() {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let shm = Ivshmem::temp("same-text", REGION);
    let mut a = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
        append: "ip=10.0.0.1/24".into(),
        ivshmem: Some(shm.clone()),
        ..Options::default()
    })
    .unwrap();
    assert!(a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    for (console, tool, args) in [
        ("ibv_devinfo", "ibv_devinfo", ""),
        ("ibv_devinfo -v", "ibv_devinfo", "-v"),
        ("ibv_devinfo -v -d rxe0", "ibv_devinfo", "-v -d rxe0"),
        ("ibv_devices", "ibv_devices", ""),
        ("show_gids", "show_gids", ""),
        ("rdma link show", "rdma", "link show"),
        ("rdma dev show", "rdma", "dev show"),
    ] {
        let on_console = a.cmd(console).unwrap();
        let child = tests::tool::spawn(tool, &shm.path, args).unwrap();
        let (ok, on_host) = tests::tool::finish(child, WAIT).unwrap();
        assert!(ok, "host `{tool} {args}` failed:\n{on_host}");
        assert_eq!(on_console, on_host, "`{console}` on the console and on the host");
        assert!(on_host.contains("rxe0"), "`{console}`:\n{on_host}");
    }
}

/// Runs the host tool `rc_pingpong` on both appliances' rings: `server_ring`
/// serves on TCP `port` (on the host), the other connects; returns both outputs.
fn rc_pingpong_tool(
    server_ring: &std::path::Path,
    client_ring: &std::path::Path,
    port: u16,
    args: &str,
) -> (String, String) {
    let tool = tests::verbs_tool("rc_pingpong");
    let split = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = args.split_whitespace().map(String::from).collect();
        v.extend(["-c".into(), "-p".into(), port.to_string(), "-g".into(), "1".into(), "-d".into(), "rxe0".into()]);
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let server = std::process::Command::new(&tool)
        .arg("--ring")
        .arg(server_ring)
        .args(split(&[]))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The server listens once its QP is set up; give it that long, then connect (retrying).
    let deadline = std::time::Instant::now() + WAIT;
    let client = loop {
        let out = std::process::Command::new(&tool)
            .arg("--ring")
            .arg(client_ring)
            .args(split(&["127.0.0.1"]))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        if out.status.success() || std::time::Instant::now() > deadline || !text.contains("connect") {
            break text;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = server.wait_with_output().unwrap();
    let server = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (server, client)
}

#[test]
fn the_rc_pingpong_tool_runs_between_two_appliances_both_ways() {
    let (_a, _b, s1, s2) = pair("tool");
    let port = tests::free_tcp_port();
    for size in [1, 4096, BIG] {
        let iters = if size == BIG { 3 } else { 20 };
        for (server, client) in [(&s1.path, &s2.path), (&s2.path, &s1.path)] {
            let (srv, cli) = rc_pingpong_tool(server, client, port, &format!("-s {size} -n {iters}"));
            for (side, out) in [("server", &srv), ("client", &cli)] {
                assert!(out.contains(&format!("{iters} iters in")), "{size} B, {side}:\n{out}\nother:\n{srv}\n{cli}");
                assert!(out.contains("remote address:"), "{size} B, {side}:\n{out}");
                assert!(!out.contains("invalid data in page"), "{size} B, {side}:\n{out}");
            }
            println!("{size} B: {}", cli.lines().find(|l| l.contains("usec/iter")).unwrap_or(""));
        }
    }
}

/// A multicast router's queries are answered (RFC 2236 3, RFC 3810 6.2): with
/// a UD QP attached to an IPv4-mapped and an IPv6 group through the ring, an
/// IGMPv2 general query and an MLDv2 general query injected on the wire
/// (from a router that is not there) are each followed, within their Max
/// Response Time, by a report of the group: an IGMPv2 Membership Report,
/// and an MLDv2 report with a MODE_IS_EXCLUDE record; a query for a group
/// nobody joined gets no answer; destroying the QP leaves both groups.
#[test]
fn igmp_and_mld_queries_are_answered_for_the_attached_groups() {
    use std::net::UdpSocket;
    let (wire, port) = (free_udp_port(), free_udp_port());
    let shm = Ivshmem::temp("mcast-query", REGION);
    let dump = std::env::temp_dir().join(format!("mcast-query-{}.pcap", std::process::id()));
    let mut a = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:00:01", port, wire)),
        append: "ip=10.0.0.1/24".into(),
        ivshmem: Some(shm.clone()),
        extra: vec!["-object".into(), format!("filter-dump,id=f0,netdev=n0,file={}", dump.display())],
        ..Options::default()
    })
    .unwrap();
    assert!(a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    let inject = UdpSocket::bind(("127.0.0.1", wire)).unwrap();
    let v4_group: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3];
    let v6_group: [u8; 16] = [0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2];
    let checksum = |data: &[u8]| {
        let mut sum: u32 = data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    };
    // IGMPv2 general query from 10.0.0.254 to 224.0.0.1, Max Resp Time 1 s.
    let igmp_query = |group: [u8; 4]| {
        let mut ip = vec![0x46, 0xc0, 0, 32, 0, 0, 0x40, 0, 1, 2, 0, 0, 10, 0, 0, 254, 224, 0, 0, 1, 0x94, 4, 0, 0];
        let ck = checksum(&ip);
        ip[10..12].copy_from_slice(&ck.to_be_bytes());
        let mut igmp = vec![0x11, 10, 0, 0, group[0], group[1], group[2], group[3]];
        let ck = checksum(&igmp);
        igmp[2..4].copy_from_slice(&ck.to_be_bytes());
        [&[0x01, 0x00, 0x5e, 0, 0, 1, 0x52, 0x54, 0, 0, 0, 0xfe, 0x08, 0x00][..], &ip, &igmp].concat()
    };
    // MLDv2 general query from fe80::fe to ff02::1, Max Resp Code 1000 ms,
    // behind a hop-by-hop Router Alert; the ICMPv6 checksum over the
    // pseudo-header.
    let mld_query = || {
        let src: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xfe];
        let dst: [u8; 16] = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut icmp = vec![130, 0, 0, 0, 0x03, 0xe8, 0, 0];
        icmp.extend_from_slice(&[0; 16]);
        icmp.extend_from_slice(&[0x02, 125, 0, 0]);
        let pseudo = [&src[..], &dst, &(icmp.len() as u32).to_be_bytes(), &[0, 0, 0, 58], &icmp].concat();
        let ck = checksum(&pseudo);
        icmp[2..4].copy_from_slice(&ck.to_be_bytes());
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&((8 + icmp.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 1]);
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let hbh = [58, 0, 5, 2, 0, 0, 1, 0];
        [&[0x33, 0x33, 0, 0, 0, 1, 0x52, 0x54, 0, 0, 0, 0xfe, 0x86, 0xdd][..], &ip, &hbh, &icmp].concat()
    };
    {
        let ctx = Context::open(&shm.path).unwrap();
        let dev = ctx.device(Some("rxe0")).unwrap();
        let pd = dev.alloc_pd().unwrap();
        let cq = dev.create_cq(4, 0).unwrap();
        let attr = QpInitAttr {
            qp_type: verbs::qp_type::UD,
            cap: QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            ..Default::default()
        };
        let qp = Qp::create(&pd, &cq, &cq, None, &attr).unwrap();
        qp.attach_mcast(v4_group).unwrap();
        qp.attach_mcast(v6_group).unwrap();
        // Past the joins' own repeats (IGMPv2's is 10 s away: the query's
        // answer comes first), then one query of each kind and one for a
        // group nobody joined.
        std::thread::sleep(Duration::from_millis(2500));
        for f in [igmp_query([0; 4]), mld_query(), igmp_query([239, 9, 9, 9])] {
            inject.send_to(&f, ("127.0.0.1", port)).unwrap();
        }
        // The answers are due within 1 s; on a loaded TCG host the guest
        // may run late, so wait for them (QEMU writes the capture as
        // frames pass) rather than for a fixed time.
        let start = Instant::now();
        while start.elapsed() < WAIT {
            std::thread::sleep(Duration::from_millis(250));
            let bytes = std::fs::read(&dump).unwrap_or_default();
            let Ok(frames) = tests::pcap::frames(&bytes) else { continue };
            let (igmp, mld) = reports(&frames);
            if igmp.len() >= 2 && mld.contains(&2) {
                break;
            }
        }
        assert!(a.cmd("version").unwrap().starts_with("RoCE appliance"));
    }
    drop(a);
    let bytes = std::fs::read(&dump).unwrap();
    let _ = std::fs::remove_file(&dump);
    let frames = tests::pcap::frames(&bytes).unwrap();
    let (kinds, mld) = reports(&frames);
    // IGMPv2 reports (type 0x16) for 239.1.2.3: the join's, then the
    // answer; none for 239.9.9.9; then the leave as the QP is destroyed.
    let g = [239, 1, 2, 3];
    assert_eq!(kinds, [(0x16, g), (0x16, g), (0x17, g)], "IGMP messages");
    // MLDv2 reports: the join's two CHANGE_TO_EXCLUDE records, the answer's
    // MODE_IS_EXCLUDE, then the leave's CHANGE_TO_INCLUDE (its repeat may
    // come after the capture ended).
    assert!(mld.len() >= 4 && mld[..3] == [4, 4, 2] && mld[3..].iter().all(|&t| t == 3), "MLDv2 record types: {mld:?}");
}

/// Our IGMP messages (type, group) and the record types of our MLDv2
/// reports, in capture order.
fn reports(frames: &[&[u8]]) -> (Vec<(u8, [u8; 4])>, Vec<u8>) {
    let ours: Vec<&[u8]> =
        frames.iter().copied().filter(|f| f.get(6..12) == Some(&[0x52, 0x54, 0, 0, 0, 1][..])).collect();
    let igmp = ours
        .iter()
        .filter(|f| f.len() >= 46 && f[12..14] == [0x08, 0x00] && f[23] == 2)
        .map(|f| (f[38], [f[42], f[43], f[44], f[45]]))
        .collect();
    let mld =
        ours.iter().filter(|f| f.len() >= 71 && f[12..14] == [0x86, 0xdd] && f[62] == 143).map(|f| f[70]).collect();
    (igmp, mld)
}

/// The library's example (rdma/host/verbs/examples/rdma_write.rs) does what
/// its comment says: one process, two rings, a WRITE and a READ back.
#[test]
fn the_rdma_write_example_runs_between_two_appliances() {
    let (_a, _b, s1, s2) = pair("example");
    let example = tests::verbs_tool("examples/rdma_write");
    let out = Command::new(&example)
        .arg(&s1.path)
        .arg(&s2.path)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (cargo build --release -p verbs --examples)", example.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{text}{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("RDMA WRITE of 30 bytes from QP") && text.contains("READ back intact"), "{text}");
}
