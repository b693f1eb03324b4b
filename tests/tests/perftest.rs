//! perftest interop: Linux's unmodified `ib_send_bw`, `ib_write_bw`,
//! `ib_read_bw`, `ib_atomic_bw`, `ib_send_lat` and `ib_write_lat` (perftest
//! 4.5 from Debian bookworm, in the Linux peer) against the appliance's host
//! tools (`send_bw`, ... in rdma/host/verbs) driving the appliance through its
//! verbs ring, each side as server and as client.
//!
//! The RDMA traffic goes over the emulated wire between the appliance and
//! the Linux guest. perftest's TCP exchange goes over the peer's management
//! NIC: a host tool reaches a guest server through `hostfwd` (host port ->
//! the guest's 18515), and a guest client reaches a host tool through
//! `guestfwd` (10.254.0.100:18515 runs `tcp-stdio`, which connects to the
//! tool on 127.0.0.1).
//!
//! After the runs, a capture of the wire is checked frame by frame (our
//! codec and tshark) and Linux's error counters must show no exhausted
//! retries and no send errors. perftest does not check the data it moves;
//! the pingpong interop tests do. perftest's multicast mode (`-g -M`) runs
//! against Linux both ways too, the Linux receiver's IP stack joined to the
//! group first (tests/linux-peer/mcast_join.c says why), and between two
//! Linux peers to show that need.
//!
//! Slow (a Debian kernel under TCG), so `#[ignore]`d: `make interop` runs it.
//!
//! The output tests need no Linux peer: two appliances, our tools on their
//! rings, compared with what Debian's perftest printed in the same setup
//! (tests/fixtures/perftest/, captured by `capture_perftest_reference_outputs`
//! through our C ABI); they run in `make test`.

#![deny(unsafe_code)]

use std::path::Path;
use std::time::Duration;

use tests::report::{counter, counters, perftest_row};
use tests::tool;
use tests::{
    Appliance, Ivshmem, LinuxPeer, MGMT_GUEST_PORT, MGMT_HOST_IP, Nic, Options, PeerOptions, free_tcp_port,
    free_udp_port, ring_pair,
};

const REGION: u64 = 64 << 20;
/// A whole perftest run, TCP exchange included (perftest sleeps 1 s in it).
const RUN: Duration = Duration::from_secs(240);

/// One appliance (10.0.0.1, rxe0, a verbs ring) and one Linux peer
/// (10.0.0.3) whose guest clients reach host port `gp`; QEMU's filter-dump
/// records the appliance's side of the wire in `capture`.
fn setup(gp: u16, capture: &Path) -> (Appliance, LinuxPeer, Ivshmem) {
    setup_with_region(gp, capture, REGION)
}

/// [`setup`] with a ring of `region` bytes (`-a`'s 8 MiB messages need a
/// 256 MiB ring: a context's buffer area holds perftest's two buffers).
fn setup_with_region(gp: u16, capture: &Path, region: u64) -> (Appliance, LinuxPeer, Ivshmem) {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut opts = PeerOptions::new(Nic::new("52:54:00:00:01:03", p2, p1), "10.0.0.3/24");
    opts.guest_fwd_cmd = Some(format!("{} {gp}", env!("CARGO_BIN_EXE_tcp-stdio")));
    let mut linux = LinuxPeer::start(opts).unwrap();
    let shm = Ivshmem::temp("perftest", region);
    let mut app = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
        append: "ip=10.0.0.1/24".into(),
        ivshmem: Some(shm.clone()),
        extra: vec!["-object".into(), format!("filter-dump,id=f0,netdev=n0,file={}", capture.display())],
        ..Options::default()
    })
    .unwrap();
    linux.wait_ready().unwrap();
    assert!(app.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    // Counters from here on (`perf` prints the nonzero ones).
    assert_eq!(app.cmd("perf reset").unwrap(), "");
    // ARP both ways before the timed runs.
    let out = app.cmd("ping 10.0.0.3 -c 2 -i 200").unwrap();
    assert!(out.contains("2 received"), "{out}");
    (app, linux, shm)
}

#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn perftest_against_linux_both_directions() {
    if !LinuxPeer::available_or_skip("perftest_against_linux_both_directions") {
        return;
    }
    let gp = free_tcp_port();
    let capture = std::env::temp_dir().join(format!("perftest-{}.pcap", std::process::id()));
    let (mut app, mut linux, shm) = setup(gp, &capture);
    let hp = linux.host_port();
    // (Linux program, our tool, message size, iterations)
    let matrix: [(&str, &str, usize, u32); 7] = [
        ("ib_send_bw", "send_bw", 65536, 200),
        ("ib_write_bw", "write_bw", 65536, 200),
        ("ib_read_bw", "read_bw", 65536, 200),
        ("ib_atomic_bw", "atomic_bw", 8, 500),
        ("ib_send_lat", "send_lat", 2, 300),
        ("ib_write_lat", "write_lat", 2, 300),
        ("ib_write_bw", "write_bw", 4096, 500),
    ];
    let mut summary = Vec::new();
    for (linux_prog, tool, size, iters) in matrix {
        let size_opt = if tool == "atomic_bw" { String::new() } else { format!("-s {size}") };
        let common = format!("-x 1 -n {iters} {size_opt}");
        let linux_opts = format!("-d rxe0 -F {common}");

        // Linux serves (18515 in the guest), our tool connects through hostfwd.
        linux.spawn_bg(&format!("{linux_prog} {linux_opts}"), "/tmp/pt.log").unwrap();
        linux.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(30)).unwrap();
        let (ok, ours) =
            tool::finish(tool::spawn(tool, &shm.path, &format!("{common} -p {hp} 127.0.0.1")).unwrap(), RUN).unwrap();
        let theirs = linux.finish_bg("/tmp/pt.log", RUN).unwrap();
        assert!(ok, "{tool} client failed:\n{ours}\nLinux {linux_prog} server:\n{theirs}");
        assert!(theirs.contains("exit=0"), "Linux {linux_prog} server failed:\n{theirs}\nours:\n{ours}");
        let a = perftest_row(&ours, size, iters).unwrap_or_else(|| panic!("{tool}: no result row:\n{ours}"));
        let b = perftest_row(&theirs, size, iters).unwrap_or_else(|| panic!("{linux_prog}: no result row:\n{theirs}"));
        summary.push(format!("{tool:>9} {size:>6} B appliance client: ours {a:?} / Linux server {b:?}"));

        // Our tool serves on 127.0.0.1:gp; the Linux client reaches it through guestfwd.
        let server = tool::spawn(tool, &shm.path, &format!("{common} -p {gp} --bind 127.0.0.1")).unwrap();
        let (status, theirs) =
            linux.status(&format!("{linux_prog} {linux_opts} -p {MGMT_GUEST_PORT} {MGMT_HOST_IP}"), RUN).unwrap();
        let (ok, ours) = tool::finish(server, RUN).unwrap();
        assert!(ok, "{tool} server failed:\n{ours}\nLinux {linux_prog} client:\n{theirs}");
        assert_eq!(status, 0, "Linux {linux_prog} client failed:\n{theirs}\nours:\n{ours}");
        let a = perftest_row(&ours, size, iters).unwrap_or_else(|| panic!("{tool}: no result row:\n{ours}"));
        let b = perftest_row(&theirs, size, iters).unwrap_or_else(|| panic!("{linux_prog}: no result row:\n{theirs}"));
        summary.push(format!("{tool:>9} {size:>6} B appliance server: ours {a:?} / Linux client {b:?}"));
    }
    for l in &summary {
        eprintln!("{l}");
    }
    // No run needed the retry limits or failed a send on either side.
    let out = linux.cmd("rdma statistic show link rxe0/1").unwrap();
    let c = counters(&out);
    for err in ["retry_exceeded_err", "retry_rnr_exceeded_err", "send_err", "rcvd_seq_err"] {
        let v = counter(&c, err);
        if err == "rcvd_seq_err" {
            eprintln!("Linux rcvd_seq_err {v:?} (out-of-sequence arrivals: the wire drops under load)");
        } else {
            assert_eq!(v, Some(0), "Linux {err}:\n{out}");
        }
    }
    let ours = app.cmd("rdma statistic show").unwrap();
    eprintln!("appliance: {}", ours.trim());
    // Nothing Linux sent was refused as a broken RoCE frame (ICRC, lengths,
    // headers), and no run needed the retry limits here either.
    let perf = app.cmd("perf").unwrap();
    assert!(perf.contains("ms since reset") && perf.contains("rx_frames"), "{perf}");
    for reason in rdma::wire::frame::DropReason::ALL.iter().filter(|r| !r.is_not_roce() && !r.is_transport()) {
        let name = reason.name();
        assert!(!perf.lines().any(|l| l.starts_with(&format!("{name} "))), "appliance dropped {name}:\n{perf}");
    }
    let c = counters(&ours);
    for err in ["retry_exceeded_err", "retry_rnr_exceeded_err"] {
        assert_eq!(counter(&c, err), Some(0), "appliance {err}:\n{ours}");
    }
    drop(app);
    // Every frame of every run well formed, with a good ICRC.
    tests::pcap::check_roce_capture(&capture, 10_000);
    let _ = std::fs::remove_file(&capture);
}

/// read_lat and atomic_lat, `-D`, `-a`, `-c UC` and `--out_json` against Linux's
/// perftest, each side as server and as client. A row is required where
/// the program prints one: read_lat's and atomic_lat's servers print none.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn new_tools_and_options_against_linux_both_directions() {
    if !LinuxPeer::available_or_skip("new_tools_and_options_against_linux_both_directions") {
        return;
    }
    let gp = free_tcp_port();
    let capture = std::env::temp_dir().join(format!("perftest-new-{}.pcap", std::process::id()));
    let (app, mut linux, shm) = setup_with_region(gp, &capture, 256 << 20);
    let hp = linux.host_port();
    // (Linux program, our tool, options, what each side that reports prints)
    // UC over this wire only where a lost message cannot stall a side:
    // write_bw's server waits for the client's report, not for the data.
    let matrix: [(&str, &str, &str, &str); 8] = [
        ("ib_write_bw", "write_bw", "-n 100 -c UC", " 65536      100 "),
        ("ib_read_lat", "read_lat", "-n 200", " 2       200 "),
        ("ib_atomic_lat", "atomic_lat", "-n 200", " 8       200 "),
        ("ib_read_lat", "read_lat", "-D 2", "t_avg[usec]    tps average"),
        ("ib_write_bw", "write_bw", "-D 2", " 65536      "),
        ("ib_atomic_bw", "atomic_bw", "-D 2 -A CMP_AND_SWAP", " 8          "),
        ("ib_write_lat", "write_lat", "-a -n 5", " 8388608 5 "),
        ("ib_write_bw", "write_bw", "-n 100 --out_json --out_json_file=/tmp/pt.json", " 65536      100 "),
    ];
    let lends = |tool: &str| tool == "read_lat" || tool == "atomic_lat";
    for (linux_prog, tool, opts, expect) in matrix {
        let common = format!("-x 1 {opts}");
        let linux_opts = format!("-d rxe0 -F {common}");
        linux.spawn_bg(&format!("{linux_prog} {linux_opts}"), "/tmp/pt.log").unwrap();
        linux.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(30)).unwrap();
        let ours_opts =
            common.replace("/tmp/pt.json", &std::env::temp_dir().join("pt-ours.json").display().to_string());
        let (ok, ours) =
            tool::finish(tool::spawn(tool, &shm.path, &format!("{ours_opts} -p {hp} 127.0.0.1")).unwrap(), RUN)
                .unwrap();
        let theirs = linux.finish_bg("/tmp/pt.log", RUN).unwrap();
        assert!(ok && ours.contains(expect), "{tool} {opts} client:\n{ours}\nLinux {linux_prog} server:\n{theirs}");
        assert!(theirs.contains("exit=0"), "Linux {linux_prog} {opts} server:\n{theirs}\nours:\n{ours}");
        assert!(lends(tool) || theirs.contains(expect), "Linux {linux_prog} {opts} server:\n{theirs}");

        let server = tool::spawn(tool, &shm.path, &format!("{ours_opts} -p {gp} --bind 127.0.0.1")).unwrap();
        let (status, theirs) =
            linux.status(&format!("{linux_prog} {linux_opts} -p {MGMT_GUEST_PORT} {MGMT_HOST_IP}"), RUN).unwrap();
        let (ok, ours) = tool::finish(server, RUN).unwrap();
        assert!(ok, "{tool} {opts} server failed:\n{ours}\nLinux {linux_prog} client:\n{theirs}");
        assert_eq!(status, 0, "Linux {linux_prog} {opts} client failed:\n{theirs}\nours:\n{ours}");
        assert!(theirs.contains(expect), "Linux {linux_prog} {opts} client:\n{theirs}");
        assert!(lends(tool) || ours.contains(expect), "{tool} {opts} server:\n{ours}");
        eprintln!("{tool} {opts}: both directions pass");
    }
    let json = std::env::temp_dir().join("pt-ours.json");
    let text = std::fs::read_to_string(&json).unwrap();
    let _ = std::fs::remove_file(&json);
    assert!(text.contains("test: RDMA_Write_BW_Test,") && text.contains("n_iterations: 100,"), "{text}");
    drop(app);
    tests::pcap::check_roce_capture(&capture, 1_000);
    let _ = std::fs::remove_file(&capture);
}

/// `-q 2`, `-b` and `-c UD` against Linux's perftest, each side as server
/// and as client: both print their result row (a duplex row counts one
/// direction's iterations, a `-q 2` row both QPs', a UD row messages of
/// one MTU). The duplex runs use perftest's default 64 KiB messages.
///
/// Two faults once failed the duplex runs now and then. A report field
/// holding a 0x0a byte reached a Linux client in two TCP segments (the
/// guest forward's line-buffered stdout), and perftest's single `read()`
/// of it failed the run. And a Linux guest that stalled for about a second
/// under TCG outlasted this side's seven retries at perftest's 67 ms
/// timeout: the QP erred, and Linux, whose rxe retries `retry_cnt 7`
/// forever, hung; the retransmit timer now backs off (`rxe::completer`).
/// Linux's retry resumes a message with the MIDDLE or LAST packet it was
/// at (`retry_first_write_send` replays the opcodes of the packets already
/// acknowledged), which the responder takes.
///
/// `PERFTEST_CASES=-b,UD` runs only the cases whose options hold one of
/// those strings.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn qps_duplex_and_ud_against_linux_both_directions() {
    if !LinuxPeer::available_or_skip("qps_duplex_and_ud_against_linux_both_directions") {
        return;
    }
    let gp = free_tcp_port();
    let capture = std::env::temp_dir().join(format!("perftest-qbu-{}.pcap", std::process::id()));
    let (app, mut linux, shm) = setup(gp, &capture);
    let hp = linux.host_port();
    let only = std::env::var("PERFTEST_CASES").unwrap_or_default();
    // (Linux program, our tool, options, what both sides print)
    let matrix: [(&str, &str, &str, &str); 7] = [
        ("ib_write_bw", "write_bw", "-n 100 -q 2", " 65536      200 "),
        ("ib_write_bw", "write_bw", "-n 200 -b", " 65536      200 "),
        ("ib_send_bw", "send_bw", "-n 200 -b", " 65536      200 "),
        ("ib_read_bw", "read_bw", "-n 200 -b", " 65536      200 "),
        ("ib_read_bw", "read_bw", "-n 100 -q 2 -b", " 65536      200 "),
        ("ib_send_bw", "send_bw", "-n 20 -c UD", " 1024       20 "),
        ("ib_send_lat", "send_lat", "-n 100 -c UD", " 2       100 "),
    ];
    for (linux_prog, tool, opts, expect) in matrix {
        if !only.is_empty() && !only.split(',').any(|c| opts.contains(c)) {
            continue;
        }
        let common = format!("-x 1 {opts}");
        let linux_opts = format!("-d rxe0 -F {common}");
        linux.spawn_bg(&format!("{linux_prog} {linux_opts}"), "/tmp/pt.log").unwrap();
        linux.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(30)).unwrap();
        let (ok, ours) =
            tool::finish(tool::spawn(tool, &shm.path, &format!("{common} -p {hp} 127.0.0.1")).unwrap(), RUN).unwrap();
        let theirs = linux.finish_bg("/tmp/pt.log", RUN).unwrap();
        assert!(ok && ours.contains(expect), "{tool} {opts} client:\n{ours}\nLinux {linux_prog} server:\n{theirs}");
        assert!(theirs.contains("exit=0") && theirs.contains(expect), "Linux {linux_prog} {opts} server:\n{theirs}");

        let server = tool::spawn(tool, &shm.path, &format!("{common} -p {gp} --bind 127.0.0.1")).unwrap();
        let (status, theirs) =
            linux.status(&format!("{linux_prog} {linux_opts} -p {MGMT_GUEST_PORT} {MGMT_HOST_IP}"), RUN).unwrap();
        let (ok, ours) = tool::finish(server, RUN).unwrap();
        assert!(ok && ours.contains(expect), "{tool} {opts} server:\n{ours}\nLinux {linux_prog} client:\n{theirs}");
        assert_eq!(status, 0, "Linux {linux_prog} {opts} client failed:\n{theirs}\nours:\n{ours}");
        assert!(theirs.contains(expect), "Linux {linux_prog} {opts} client:\n{theirs}");
        eprintln!("{tool} {opts}: both directions pass");
    }
    drop(app);
    tests::pcap::check_roce_capture(&capture, 100);
    let _ = std::fs::remove_file(&capture);
}

/// The group of the multicast tests, as `-M` writes it, and the same as
/// an IPv4 address.
const MGID: &str = "0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3";
const GROUP: [u8; 4] = [239, 1, 2, 3];

/// Linux's rxe counter `name` now.
fn linux_counter(linux: &mut LinuxPeer, name: &str) -> u64 {
    let out = linux.cmd("rdma statistic show link rxe0/1").unwrap();
    counter(&counters(&out), name).unwrap_or_else(|| panic!("no {name} in:\n{out}"))
}

/// The RoCE frames of a capture that `mac` sent to the multicast group
/// [`GROUP`] (its MAC, its address, the multicast QPN), and their payloads'
/// lengths.
fn group_frames(frames: &[&[u8]], mac: [u8; 6]) -> Vec<usize> {
    frames
        .iter()
        .filter_map(|f| rdma::wire::frame::parse(f).ok())
        .filter(|rx| rx.repr.path.src_mac.0 == mac && rx.repr.path.dst_mac.0 == [0x01, 0x00, 0x5e, 1, 2, 3])
        .filter(|rx| matches!(rx.repr.path.ip, rdma::wire::frame::IpPath::V4 { dst, .. } if dst.0 == GROUP))
        .filter(|rx| rx.repr.roce.bth.dest_qpn == 0xff_ffff)
        .map(|rx| rx.repr.payload.len())
        .collect()
}

/// perftest's multicast mode (`-g -M`, an IPv4-mapped group) against
/// Linux, each side as server and as client. send_bw: the server attaches
/// its UD QP to the group and receives every message the client sends to
/// it; Linux receives only once its IP stack is a member of the group
/// (`mcast_join`: Linux rxe's attach does not join it, see
/// tests/linux-peer/mcast_join.c). send_lat: both sides attach to `-M`'s
/// group and ping-pong through it; the appliance does not loop its own
/// group sends back, Linux (a member) does (its rxe's sends leave through
/// the IP stack's multicast output, which loops them back to members), so
/// Linux's own receives include what it sent and its latency figures are
/// its loopback's: both sides complete, Linux's rxe counts more receives
/// than the appliance sent. Checked: the result rows, Linux's rxe
/// counters, and every frame to the group in the capture (each side's
/// count, the group's MAC, address and QPN, the message sizes).
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn multicast_against_linux_both_directions() {
    if !LinuxPeer::available_or_skip("multicast_against_linux_both_directions") {
        return;
    }
    let gp = free_tcp_port();
    let capture = std::env::temp_dir().join(format!("perftest-mcast-{}.pcap", std::process::id()));
    let (app, mut linux, shm) = setup(gp, &capture);
    let hp = linux.host_port();
    let (status, out) = linux.status("command -v mcast_join", Duration::from_secs(10)).unwrap();
    assert_eq!(status, 0, "no mcast_join in the peer (rebuild it: `bash tests/linux-peer/build.sh`):\n{out}");
    const BW_ITERS: u32 = 20;
    const LAT_ITERS: u32 = 50;

    // send_bw, Linux sends: our server attaches and receives all.
    let common = format!("-x 1 -g -M {MGID} -n {BW_ITERS}");
    let linux_opts = format!("-d rxe0 -F {common}");
    let sent = linux_counter(&mut linux, "sent_pkts");
    let server = tool::spawn("send_bw", &shm.path, &format!("{common} -p {gp} --bind 127.0.0.1")).unwrap();
    let (status, theirs) =
        linux.status(&format!("ib_send_bw {linux_opts} -p {MGMT_GUEST_PORT} {MGMT_HOST_IP}"), RUN).unwrap();
    let (ok, ours) = tool::finish(server, RUN).unwrap();
    assert!(ok && status == 0, "send_bw server:\n{ours}\nLinux ib_send_bw client:\n{theirs}");
    assert!(perftest_row(&ours, 1024, BW_ITERS).is_some(), "every message received:\n{ours}");
    assert!(ours.contains(" local address: LID 0000 QPN 0xffffff ") && theirs.contains("QPN 0xffffff"), "{ours}");
    assert_eq!(linux_counter(&mut linux, "sent_pkts") - sent, u64::from(BW_ITERS));
    eprintln!("send_bw -g: Linux client, appliance server: {BW_ITERS} messages through the group");

    // send_bw, Linux receives once its IP stack joined the group.
    linux.spawn_bg("mcast_join eth0 239.1.2.3", "/tmp/join.log").unwrap();
    let joined = linux.cmd("sleep 0.5; cat /tmp/join.log").unwrap();
    assert!(joined.contains("joined 239.1.2.3 on eth0"), "{joined}");
    let rcvd = linux_counter(&mut linux, "rcvd_pkts");
    linux.spawn_bg(&format!("ib_send_bw {linux_opts}"), "/tmp/pt.log").unwrap();
    linux.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(30)).unwrap();
    let (ok, ours) =
        tool::finish(tool::spawn("send_bw", &shm.path, &format!("{common} -p {hp} 127.0.0.1")).unwrap(), RUN).unwrap();
    let theirs = linux.finish_bg("/tmp/pt.log", RUN).unwrap();
    assert!(ok && theirs.contains("exit=0"), "send_bw client:\n{ours}\nLinux ib_send_bw server:\n{theirs}");
    assert!(perftest_row(&theirs, 1024, BW_ITERS).is_some(), "every message received:\n{theirs}");
    assert!(ours.contains(" remote address: LID 0000 QPN 0xffffff "), "{ours}");
    assert_eq!(linux_counter(&mut linux, "rcvd_pkts") - rcvd, u64::from(BW_ITERS));
    eprintln!("send_bw -g: appliance client, Linux server (joined): {BW_ITERS} messages through the group");

    // send_lat both ways, Linux still a member of the group.
    let common = format!("-x 1 -g -M {MGID} -n {LAT_ITERS}");
    let linux_opts = format!("-d rxe0 -F {common}");
    let rcvd = linux_counter(&mut linux, "rcvd_pkts");
    let server = tool::spawn("send_lat", &shm.path, &format!("{common} -p {gp} --bind 127.0.0.1")).unwrap();
    let (status, theirs) =
        linux.status(&format!("ib_send_lat {linux_opts} -p {MGMT_GUEST_PORT} {MGMT_HOST_IP}"), RUN).unwrap();
    let (ok, ours) = tool::finish(server, RUN).unwrap();
    assert!(ok && status == 0, "send_lat server:\n{ours}\nLinux ib_send_lat client:\n{theirs}");
    assert!(perftest_row(&ours, 2, LAT_ITERS).is_some() && perftest_row(&theirs, 2, LAT_ITERS).is_some());
    linux.spawn_bg(&format!("ib_send_lat {linux_opts}"), "/tmp/pt.log").unwrap();
    linux.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(30)).unwrap();
    let (ok, ours) =
        tool::finish(tool::spawn("send_lat", &shm.path, &format!("{common} -p {hp} 127.0.0.1")).unwrap(), RUN).unwrap();
    let theirs = linux.finish_bg("/tmp/pt.log", RUN).unwrap();
    assert!(ok && theirs.contains("exit=0"), "send_lat client:\n{ours}\nLinux ib_send_lat server:\n{theirs}");
    assert!(perftest_row(&ours, 2, LAT_ITERS).is_some() && perftest_row(&theirs, 2, LAT_ITERS).is_some());
    // The appliance sent LAT_ITERS per run; Linux got its own sends back too.
    let got = linux_counter(&mut linux, "rcvd_pkts") - rcvd;
    assert!(got > u64::from(2 * LAT_ITERS), "Linux rxe received {got}: its own group sends are looped back");
    eprintln!("send_lat -g both ways: Linux's rxe received {got} ({} from the appliance)", 2 * LAT_ITERS);
    linux.kill_bg("/tmp/join.log").unwrap();

    drop(app);
    tests::pcap::check_roce_capture(&capture, 100);
    let bytes = std::fs::read(&capture).unwrap();
    let frames: Vec<&[u8]> =
        tests::pcap::frames(&bytes).unwrap().into_iter().filter(|f| tests::pcap::is_roce_v2(f)).collect();
    // Per side: a send_bw run's 1024-byte messages (the MTU), then two send_lat runs' 2-byte ones.
    let want: Vec<usize> = [vec![1024; BW_ITERS as usize], vec![2; 2 * LAT_ITERS as usize]].concat();
    assert_eq!(group_frames(&frames, [0x52, 0x54, 0, 0, 1, 3]), want, "Linux's frames to the group");
    assert_eq!(group_frames(&frames, [0x52, 0x54, 0, 0, 0, 1]), want, "the appliance's frames to the group");
    let _ = std::fs::remove_file(&capture);
}

/// The same between two Linux peers, as the evidence for why Linux needs
/// `mcast_join` (Debian's perftest 4.5 on Linux 6.1): with only
/// `ibv_attach_mcast` (what `ib_send_bw -g` does) the client sends and
/// neither the server's IP stack nor its rxe sees a frame of the group:
/// rxe put 33:33:ef:01:02:03 (`ipv6_eth_mc_map` of the IPv4-mapped group)
/// in eth0's filter, not the group's IPv4 MAC, so the NIC drops them; with
/// the IPv4 MAC added by hand (`ip maddr add`) they reach the IP stack,
/// which drops them all (received, not delivered: IPv4 input refuses a
/// group's datagram unless the interface is a member), and rxe still sees
/// none; with the IP stack a member (`mcast_join`) the run passes.
#[test]
#[ignore = "boots Linux peers: `make interop`"]
fn multicast_linux_linux_needs_the_ip_join() {
    if !LinuxPeer::available_or_skip("multicast_linux_linux_needs_the_ip_join") {
        return;
    }
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut a = LinuxPeer::start(PeerOptions::new(Nic::new("52:54:00:00:01:03", p1, p2), "10.0.0.3/24")).unwrap();
    let mut b = LinuxPeer::start(PeerOptions::new(Nic::new("52:54:00:00:01:04", p2, p1), "10.0.0.4/24")).unwrap();
    a.wait_ready().unwrap();
    b.wait_ready().unwrap();
    let out = b.cmd("ping -c 2 -W 5 10.0.0.3").unwrap();
    assert!(out.contains("2 packets received"), "{out}");
    const ITERS: u32 = 20;
    let pt = format!("ib_send_bw -d rxe0 -F -x 1 -g -M {MGID} -n {ITERS}");
    // The IPv4 datagrams the server's IP stack received but did not deliver.
    let undelivered = |p: &mut LinuxPeer| -> u64 {
        let snmp = p.cmd("grep ^Ip: /proc/net/snmp").unwrap();
        let mut rows = snmp.lines().map(|l| l.split_whitespace().collect::<Vec<_>>());
        let (names, values) = (rows.next().unwrap_or_default(), rows.next().unwrap_or_default());
        let field = |name: &str| -> u64 {
            let at = names.iter().position(|n| *n == name).unwrap_or_else(|| panic!("no {name}:\n{snmp}"));
            values.get(at).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no {name} value:\n{snmp}"))
        };
        field("InReceives") - field("InDelivers")
    };
    // A run, and what it should come to: whether the server gets every
    // message, what its rxe receives, how many datagrams its IP stack drops.
    let run = |a: &mut LinuxPeer, b: &mut LinuxPeer, step: &str, want: (bool, u64, u64)| {
        let (rcvd, dropped) = (linux_counter(a, "rcvd_pkts"), undelivered(a));
        a.spawn_bg(&pt, "/tmp/pt.log").unwrap();
        a.wait_listening(18515, Duration::from_secs(30)).unwrap();
        let (status, client) = b.status(&format!("{pt} 10.0.0.3"), RUN).unwrap();
        assert_eq!(status, 0, "{step}: the client sends in any case:\n{client}");
        let passed = if want.0 {
            let server = a.finish_bg("/tmp/pt.log", RUN).unwrap();
            server.contains("exit=0") && perftest_row(&server, 1024, ITERS).is_some()
        } else {
            // The drops that should come (a bounded wait), then a moment
            // for what should not; the server waits for messages in vain.
            let start = std::time::Instant::now();
            while undelivered(a) - dropped < want.2 && start.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(200));
            }
            std::thread::sleep(Duration::from_secs(1));
            a.kill_bg("/tmp/pt.log").unwrap();
            false
        };
        let got = (passed, linux_counter(a, "rcvd_pkts") - rcvd, undelivered(a) - dropped);
        eprintln!("{step}: the server's rxe received {}, its IP stack dropped {}", got.1, got.2);
        assert_eq!(got, want, "{step}: (server passed, rxe received, IP dropped)");
    };
    let n = u64::from(ITERS);
    // Nothing gets past the NIC's filter.
    run(&mut a, &mut b, "attach only", (false, 0, 0));
    // The IP stack has them and drops them all.
    a.cmd("ip maddr add 01:00:5e:01:02:03 dev eth0").unwrap();
    run(&mut a, &mut b, "the group's MAC added", (false, 0, n));
    a.cmd("ip maddr del 01:00:5e:01:02:03 dev eth0").unwrap();
    // A member receives every message.
    a.spawn_bg("mcast_join eth0 239.1.2.3", "/tmp/join.log").unwrap();
    let joined = a.cmd("sleep 0.5; cat /tmp/join.log").unwrap();
    assert!(joined.contains("joined 239.1.2.3 on eth0"), "{joined}");
    run(&mut a, &mut b, "the IP stack joined", (true, n, 0));
    a.kill_bg("/tmp/join.log").unwrap();
}

/// A duplex 64 KiB WRITE run against a Linux guest that stops for a second
/// mid-run (its QEMU stopped, as a loaded host sometimes does to a TCG
/// guest): both sides finish. With perftest's `timeout 14` (67 ms) and
/// `retry_cnt 7`, seven retries at the nominal timeout gave up after about
/// half a second, the appliance's QP erred and Linux, whose rxe retries
/// `retry_cnt 7` forever, hung. The backed-off retransmit timer
/// (`rxe::completer`) gives the same seven retries 1.8 s.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn duplex_write_outlasts_a_linux_guest_frozen_for_a_second() {
    if !LinuxPeer::available_or_skip("duplex_write_outlasts_a_linux_guest_frozen_for_a_second") {
        return;
    }
    let gp = free_tcp_port();
    let capture = std::env::temp_dir().join(format!("perftest-freeze-{}.pcap", std::process::id()));
    let (mut app, mut linux, shm) = setup(gp, &capture);
    let hp = linux.host_port();
    let common = "-x 1 -n 1000 -b";
    linux.spawn_bg(&format!("ib_write_bw -d rxe0 -F {common}"), "/tmp/pt.log").unwrap();
    linux.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(30)).unwrap();
    let ours = tool::Watched::spawn("write_bw", &shm.path, &format!("{common} -p {hp} 127.0.0.1")).unwrap();
    // The first progress line: both directions are under way.
    let started = ours.wait_line("/1000 iterations", Duration::from_secs(120));
    assert!(started.is_some(), "write_bw never got going:\n{}", ours.text());
    linux.freeze(Duration::from_secs(1)).unwrap();
    let (ok, out) = ours.finish(RUN).unwrap();
    let theirs = linux
        .finish_bg("/tmp/pt.log", RUN)
        .unwrap_or_else(|e| panic!("Linux ib_write_bw server did not end: {e}\nwrite_bw client:\n{out}"));
    assert!(ok && out.contains(" 65536      1000 "), "write_bw client:\n{out}\nLinux ib_write_bw server:\n{theirs}");
    assert!(theirs.contains("exit=0") && theirs.contains(" 65536      1000 "), "Linux ib_write_bw server:\n{theirs}");
    // The freeze did cost the appliance retransmit timeouts, and no retry ran out.
    let perf = app.cmd("perf").unwrap();
    let timeouts = counter(&counters(&perf), "timeouts").unwrap_or(0);
    assert!(timeouts > 0, "no retransmit timeout during the freeze:\n{perf}");
    let stats = app.cmd("rdma statistic show").unwrap();
    assert_eq!(counter(&counters(&stats), "retry_exceeded_err"), Some(0), "{stats}");
    eprintln!("frozen for 1 s: {timeouts} retransmit timeouts on the appliance, both sides done");
    drop(app);
    let _ = std::fs::remove_file(&capture);
}

/// Two appliances on one wire (10.0.0.1 and 10.0.0.2, rxe0 on each), with
/// a ring each: a server on one ring and a client on the other, both on
/// this host, their TCP exchange on 127.0.0.1. The rings are 256 MiB so
/// that a context's buffer area (about 31 MiB) holds perftest's buffers for
/// `-a`'s 8 MiB messages.
fn pair(tag: &str) -> (Appliance, Appliance, Ivshmem, Ivshmem) {
    let region = 256 << 20;
    let (mut a, b, s1, s2) =
        ring_pair([Ivshmem::temp(&format!("{tag}-a"), region), Ivshmem::temp(&format!("{tag}-b"), region)], ["", ""]);
    let out = a.cmd("ping 10.0.0.2 -c 2 -i 200").unwrap();
    assert!(out.contains("2 received"), "{out}");
    (a, b, s1, s2)
}

/// Which programs run a case: Debian's perftest over our C ABI (the
/// reference) or our tools.
#[derive(Clone, Copy)]
enum Side {
    Debian,
    Ours,
}

/// One server/client run of `test` (`write_bw`, ...) with `args` on both
/// sides: the server on ring `s`, the client on ring `c`. Returns both
/// outputs (stdout then stderr), or both in an error when either side failed.
fn server_client(side: Side, test: &str, s: &Path, c: &Path, args: &str) -> Result<(String, String), String> {
    let port = free_tcp_port();
    let spawn = |ring: &Path, a: &str| match side {
        Side::Debian => tool::spawn_unmodified(&format!("ib_{test}"), ring, a),
        Side::Ours => tool::spawn(test, ring, a),
    };
    let server = spawn(s, &format!("{args} -p {port}")).unwrap();
    if !tool::wait_listening(port, Duration::from_secs(60)) {
        let (_, out_s) = tool::finish(server, Duration::ZERO).unwrap();
        return Err(format!("{test} {args}: the server does not listen:\n{out_s}"));
    }
    let client = spawn(c, &format!("{args} -p {port} 127.0.0.1")).unwrap();
    let finish = |child| match side {
        Side::Debian => tool::finish(child, RUN).unwrap(),
        Side::Ours => finish_stdout(child),
    };
    let (ok_c, out_c) = finish(client);
    let (ok_s, out_s) = finish(server);
    if ok_c && ok_s {
        Ok((out_s, out_c))
    } else {
        Err(format!("{test} {args}: server ok {ok_s}:\n{out_s}\nclient ok {ok_c}:\n{out_c}"))
    }
}

/// Waits for one of our tools at most [`RUN`]: whether it succeeded, and
/// its stdout alone (stderr carries our progress lines, perftest's has
/// none); its stderr is shown when it failed.
fn finish_stdout(mut child: std::process::Child) -> (bool, String) {
    use std::io::Read;
    let mut pipes = [
        child.stdout.take().map(|o| Box::new(o) as Box<dyn Read + Send>),
        child.stderr.take().map(|e| Box::new(e) as Box<dyn Read + Send>),
    ];
    let readers: Vec<_> = pipes
        .iter_mut()
        .map(|p| {
            let mut p = p.take();
            std::thread::spawn(move || {
                let mut s = String::new();
                if let Some(p) = p.as_mut() {
                    let _ = p.read_to_string(&mut s);
                }
                s
            })
        })
        .collect();
    let start = std::time::Instant::now();
    let ok = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.success();
        }
        if start.elapsed() > RUN {
            let _ = child.kill();
            let _ = child.wait();
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut outs = readers.into_iter().map(|r| r.join().unwrap_or_default());
    let (out, err) = (outs.next().unwrap_or_default(), outs.next().unwrap_or_default());
    (ok, if ok { out } else { out + &err })
}

/// The cases whose outputs are kept as fixtures: (fixture name, test,
/// arguments). `ib_send_bw -c UC` is not among them: over the emulated
/// wire a lost message leaves perftest's server waiting for it (120 s,
/// then it fails), so it gives no reference; `-c UD` runs few messages of
/// one MTU, all receives posted before the sender starts.
const CASES: &[(&str, &str, &str)] = &[
    ("send_bw", "send_bw", "-d rxe0 -F -x 1 -n 100"),
    ("write_bw", "write_bw", "-d rxe0 -F -x 1 -n 100"),
    ("write_bw-gbits", "write_bw", "-d rxe0 -F -x 1 -n 100 --report_gbits"),
    ("read_bw", "read_bw", "-d rxe0 -F -x 1 -n 100"),
    ("atomic_bw", "atomic_bw", "-d rxe0 -F -x 1 -n 100"),
    ("send_lat", "send_lat", "-d rxe0 -F -x 1 -n 100"),
    ("write_lat", "write_lat", "-d rxe0 -F -x 1 -n 100"),
    ("read_lat", "read_lat", "-d rxe0 -F -x 1 -n 100"),
    ("atomic_lat", "atomic_lat", "-d rxe0 -F -x 1 -n 100"),
    ("write_bw-all", "write_bw", "-d rxe0 -F -x 1 -n 5 -a"),
    ("send_lat-all", "send_lat", "-d rxe0 -F -x 1 -n 5 -a"),
    ("write_bw-duration", "write_bw", "-d rxe0 -F -x 1 -D 2"),
    ("send_lat-duration", "send_lat", "-d rxe0 -F -x 1 -D 2"),
    ("write_bw-bidir", "write_bw", "-d rxe0 -F -x 1 -n 100 -b"),
    ("send_bw-bidir", "send_bw", "-d rxe0 -F -x 1 -n 100 -b"),
    ("write_bw-qps", "write_bw", "-d rxe0 -F -x 1 -n 100 -q 2"),
    ("write_bw-uc", "write_bw", "-d rxe0 -F -x 1 -n 100 -c UC"),
    ("send_lat-ud", "send_lat", "-d rxe0 -F -x 1 -n 100 -c UD"),
    ("send_bw-ud", "send_bw", "-d rxe0 -F -x 1 -n 20 -c UD"),
    ("read_bw-qps-bidir", "read_bw", "-d rxe0 -F -x 1 -n 100 -q 2 -b"),
    ("send_bw-qps", "send_bw", "-d rxe0 -F -x 1 -n 100 -q 2"),
    ("read_lat-duration", "read_lat", "-d rxe0 -F -x 1 -D 2"),
    ("write_lat-all", "write_lat", "-d rxe0 -F -x 1 -n 5 -a"),
    ("atomic_bw-cas", "atomic_bw", "-d rxe0 -F -x 1 -n 100 -A CMP_AND_SWAP"),
    ("send_bw-mcast", "send_bw", "-d rxe0 -F -x 1 -n 20 -g -M 0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3"),
    ("send_lat-mcast", "send_lat", "-d rxe0 -F -x 1 -n 100 -g -M 0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3"),
];

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perftest")
}

/// Captures Debian's perftest 4.5 (over our C ABI, between two appliances)
/// into tests/fixtures/perftest/<case>.{server,client}.txt: the reference
/// `ours_print_what_perftest_prints` compares with. Run by hand when a case
/// is added.
#[test]
#[ignore = "regenerates the fixtures: run by hand"]
fn capture_perftest_reference_outputs() {
    let (_a, _b, s1, s2) = pair("ptcap");
    let only = std::env::var("PERFTEST_CASES").unwrap_or_default();
    for &(name, test, args) in CASES {
        if !only.is_empty() && !only.split(',').any(|c| c == name) {
            continue;
        }
        let (out_s, out_c) = match server_client(Side::Debian, test, &s1.path, &s2.path, args) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("not captured: {e}");
                continue;
            }
        };
        std::fs::write(fixtures().join(format!("{name}.server.txt")), out_s).unwrap();
        std::fs::write(fixtures().join(format!("{name}.client.txt")), out_c).unwrap();
        if args.contains("-n 100") && !args.contains(" -b") && !args.contains(" -q") && !args.contains(" -c") {
            // perftest's JSON report, written by each side.
            let dir = std::env::temp_dir();
            let json = |role: &str| dir.join(format!("pt-{name}-{role}-{}.json", std::process::id()));
            let port = free_tcp_port();
            let (js, jc) = (json("server"), json("client"));
            let server = tool::spawn_unmodified(
                &format!("ib_{test}"),
                &s1.path,
                &format!("{args} -p {port} --out_json --out_json_file={}", js.display()),
            )
            .unwrap();
            assert!(tool::wait_listening(port, Duration::from_secs(60)));
            let client = tool::spawn_unmodified(
                &format!("ib_{test}"),
                &s2.path,
                &format!("{args} -p {port} --out_json --out_json_file={} 127.0.0.1", jc.display()),
            )
            .unwrap();
            let (ok_c, oc) = tool::finish(client, RUN).unwrap();
            let (ok_s, os) = tool::finish(server, RUN).unwrap();
            assert!(ok_c && ok_s, "{os}\n{oc}");
            for (role, f) in [("server", &js), ("client", &jc)] {
                if let Ok(t) = std::fs::read_to_string(f) {
                    std::fs::write(fixtures().join(format!("{name}.{role}.json")), t).unwrap();
                    let _ = std::fs::remove_file(f);
                }
            }
        }
        eprintln!("captured {name}");
    }
}

/// The cases our tools refuse (options they do not take yet), and why.
const REFUSED: &[(&str, &str)] =
    &[("send_lat-duration", "-D and --run_infinitely are supported by"), ("send_lat-all", "-a is supported by")];

/// What perftest prints on stderr, which the comparison leaves out (ours
/// print their remarks on stderr too, and only their stdout is compared):
/// that it does not know the device's inline capability (it then uses
/// none, as ours does), and that a UD message is cut to the MTU.
const PERFTEST_ONLY: &[&str] = &[
    "Device not recognized to implement inline feature. Disabling it",
    " Max msg size in UD is MTU 1024",
    " Changing to this MTU",
];

/// `text` with the values that must differ between two runs masked: the
/// QPN, PSN, RKey and VAddr of the address lines, every measured figure of
/// a result line (each keeps its field's width rule: perftest pads figures
/// to 7 characters, so a figure and its padding become `#` and the
/// separator after it), and with `timed` the iteration count too.
fn mask(text: &str, timed: bool) -> String {
    let mut out = String::new();
    for line in text.lines().filter(|l| !PERFTEST_ONLY.contains(l)) {
        let masked = if line.starts_with(" local address:") || line.starts_with(" remote address:") {
            let mut words: Vec<String> = line.split(' ').map(str::to_string).collect();
            for i in 1..words.len() {
                if ["QPN", "PSN", "RKey", "VAddr"].contains(&words[i - 1].as_str()) {
                    words[i] = "#".into();
                }
            }
            words.join(" ")
        } else if line.starts_with(' ') && line[1..].starts_with(|c: char| c.is_ascii_digit()) {
            // perftest's deviation can come out NaN (it squares integers
            // that overflow): a figure too, of the same width.
            let line = line.replace("-nan", "0.00").replace("nan", "0.0").replace("-inf", "0.00").replace("inf", "0.0");
            mask_figures(&line, timed)
        } else {
            line.to_string()
        };
        out += &masked;
        out.push('\n');
    }
    out
}

/// A result line's size kept, the rest of its numbers masked as [`mask`] says.
fn mask_figures(line: &str, timed: bool) -> String {
    // A bandwidth line has five numbers, a latency line nine or four.
    let bw_line = line.split_whitespace().count() == 5;
    let mut out = String::new();
    let mut rest = line;
    let mut field = 0;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        out += &rest[..start];
        let after = &rest[start..];
        let len = after.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(after.len());
        let number = &after[..len];
        let spaces = after[len..].len() - after[len..].trim_start_matches(' ').len();
        let keep = field == 0 || (field == 1 && !timed);
        if keep {
            out += number;
            out += &after[len..len + spaces];
        } else {
            // A figure printed %-7.Nf is padded with spaces to 7
            // characters, a bandwidth line's count (%-10lu) to 10.
            let width: usize = if number.contains('.') {
                7
            } else if bw_line {
                10
            } else {
                0
            };
            let padding = width.saturating_sub(len);
            out.push('#');
            out += &" ".repeat(spaces.saturating_sub(padding));
        }
        rest = &after[len + spaces..];
        field += 1;
    }
    out + rest
}

/// Our tools between two appliances print what Debian's perftest 4.5
/// printed in the same run (the fixtures), byte for byte but the masked
/// values: the header, the address lines, the column headings and the
/// result lines, on the server and on the client; and the `--out_json`
/// files. The cases our tools do not run yet must be refused, saying so.
#[test]
fn ours_print_what_perftest_prints() {
    let (_a, _b, s1, s2) = pair("ptours");
    let mut compared = 0;
    // PERFTEST_CASES=a,b: only those (to rerun a few by hand).
    let only = std::env::var("PERFTEST_CASES").unwrap_or_default();
    for &(name, test, args) in CASES {
        if !only.is_empty() && !only.split(',').any(|c| c == name) {
            continue;
        }
        let fixture = |role: &str| std::fs::read_to_string(fixtures().join(format!("{name}.{role}.txt")));
        let (Ok(want_s), Ok(want_c)) = (fixture("server"), fixture("client")) else {
            eprintln!("{name}: no fixture (perftest could not run it here)");
            continue;
        };
        if let Some((_, why)) = REFUSED.iter().find(|(n, _)| *n == name) {
            let (ok, out) =
                tool::finish(tool::spawn(test, &s2.path, &format!("{args} 127.0.0.1")).unwrap(), RUN).unwrap();
            assert!(!ok && out.contains(why), "{name}: ours should refuse ({why}):\n{out}");
            continue;
        }
        let timed = args.contains(" -D ");
        let (got_s, got_c) = server_client(Side::Ours, test, &s1.path, &s2.path, args).unwrap();
        for (role, got, want) in [("server", &got_s, &want_s), ("client", &got_c, &want_c)] {
            let (got, want) = (mask(got, timed), mask(want, timed));
            assert_eq!(got, want, "{name} {role}: ours (left) differ from perftest's (right)");
        }
        eprintln!("{name}: ours print what perftest printed");
        compared += 1;
    }
    assert!(compared >= 8 || !only.is_empty(), "only {compared} cases compared");
}

/// The JSON report's measured figures.
const MEASURED: &[&str] = &[
    "BW_peak",
    "BW_average",
    "MsgRate",
    "t_min",
    "t_max",
    "t_typical",
    "t_avg",
    "t_stdev",
    "percentile_99",
    "percentile_99.9",
    "tps_average",
];

/// `--out_json`: ours write perftest's report file, the same keys in the
/// same order, on each side that writes one.
#[test]
fn ours_write_perftests_json() {
    let (_a, _b, s1, s2) = pair("ptjson");
    let dir = std::env::temp_dir();
    for &(name, test, args) in
        CASES.iter().filter(|(n, _, _)| ["write_bw", "send_lat", "read_lat", "atomic_bw", "send_lat-mcast"].contains(n))
    {
        let json = |role: &str| dir.join(format!("ours-{name}-{role}-{}.json", std::process::id()));
        let (js, jc) = (json("server"), json("client"));
        let port = free_tcp_port();
        let server =
            tool::spawn(test, &s1.path, &format!("{args} -p {port} --out_json --out_json_file={}", js.display()))
                .unwrap();
        assert!(tool::wait_listening(port, Duration::from_secs(60)));
        let client = tool::spawn(
            test,
            &s2.path,
            &format!("{args} -p {port} --out_json --out_json_file={} 127.0.0.1", jc.display()),
        )
        .unwrap();
        let (ok_c, oc) = tool::finish(client, RUN).unwrap();
        let (ok_s, os) = tool::finish(server, RUN).unwrap();
        assert!(ok_c && ok_s, "{name}: server:\n{os}\nclient:\n{oc}");
        for (role, path) in [("server", &js), ("client", &jc)] {
            let want = std::fs::read_to_string(fixtures().join(format!("{name}.{role}.json"))).ok();
            let got = std::fs::read_to_string(path).ok();
            let _ = std::fs::remove_file(path);
            // Keys and fixed values kept, measured figures masked.
            let keys = |t: &str| -> Vec<String> {
                t.lines()
                    .map(|l| match l.split_once(": ") {
                        Some((k, _)) if MEASURED.contains(&k) => format!("{k}: #"),
                        _ => l.to_string(),
                    })
                    .collect()
            };
            match (want, got) {
                (Some(w), Some(g)) => assert_eq!(keys(&g), keys(&w), "{name} {role}: our JSON (left) vs perftest's"),
                (None, None) => {}
                (w, g) => panic!("{name} {role}: perftest wrote {}, ours {}", w.is_some(), g.is_some()),
            }
        }
    }
}
