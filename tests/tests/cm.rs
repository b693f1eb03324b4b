//! RDMA CM interop: Linux's unmodified rdmacm-utils (`rping`, from Debian
//! bookworm, in the Linux peer) against the appliance's host tools over its
//! verbs ring, each side as server and as client. Everything, the connection
//! manager's MADs included, goes over the emulated wire: the appliance's
//! rdma_cm answers on its own QP1.
//!
//! Slow (a Debian kernel under TCG), so `#[ignore]`d: `make interop` runs
//! the full set; `make test` runs the smoke through `make interop-smoke`.

#![deny(unsafe_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use tests::report::{counter, counters};
use tests::tool;
use tests::{Appliance, Ivshmem, LinuxPeer, Nic, Options, PeerOptions, free_udp_port};

const REGION: u64 = 64 << 20;
/// A whole rping run, connection set-up included.
const RUN: Duration = Duration::from_secs(300);

/// One appliance (10.0.0.1, rxe0, a verbs ring) and one Linux peer
/// (10.0.0.3); with `capture`, QEMU's filter-dump records the wire there.
fn setup(tag: &str, capture: Option<&Path>) -> (Appliance, LinuxPeer, Ivshmem) {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    setup_wire(tag, capture, (p1, p2), (p2, p1))
}

/// As [`setup`], the appliance's NIC on UDP ports `a` (local, remote) and
/// Linux's on `b`: a relay between them can break the wire.
fn setup_wire(tag: &str, capture: Option<&Path>, a: (u16, u16), b: (u16, u16)) -> (Appliance, LinuxPeer, Ivshmem) {
    let (p1, p2) = a;
    let mut linux = LinuxPeer::start(PeerOptions::new(Nic::new("52:54:00:00:01:03", b.0, b.1), "10.0.0.3/24")).unwrap();
    let shm = Ivshmem::temp_plain(tag, REGION);
    let extra =
        capture.map_or(vec![], |f| vec!["-object".into(), format!("filter-dump,id=f0,netdev=n0,file={}", f.display())]);
    let mut app = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
        append: "ip=10.0.0.1/24".into(),
        ivshmem: Some(shm.clone()),
        extra,
        cmd_timeout: Duration::from_secs(180),
        ..Options::default()
    })
    .unwrap();
    linux.wait_ready().unwrap();
    assert!(app.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    let out = app.cmd("ping 10.0.0.3 -c 2 -i 200").unwrap();
    assert!(out.contains("2 received"), "{out}");
    (app, linux, shm)
}

/// Runs our `rping` client against a server that may not listen yet: a REJ
/// (nothing listening, reason 8) is tried again, anything else is the answer.
fn our_client(ring: &Path, args: &str) -> (bool, String) {
    let start = Instant::now();
    loop {
        let (ok, out) = tool::finish(tool::spawn("rping", ring, args).unwrap(), RUN).unwrap();
        if ok || !out.contains("RDMA_CM_EVENT_REJECTED, error 8") || start.elapsed() > Duration::from_secs(60) {
            return (ok, out);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The Linux `rping` client against a server that may not listen yet.
fn linux_client(linux: &mut LinuxPeer, args: &str) -> (i32, String) {
    let start = Instant::now();
    loop {
        let (status, out) = linux.status(&format!("rping {args}"), RUN).unwrap();
        if status == 0 || !out.contains("error 8") || start.elapsed() > Duration::from_secs(60) {
            return (status, out);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// rping both ways at `sizes`, `count` pings each, data verified (`-V`) by
/// both ends.
fn rping_both_ways(linux: &mut LinuxPeer, shm: &Ivshmem, sizes: &[u32], count: u32) {
    rping_both_ways_at(linux, shm, ("10.0.0.1", "10.0.0.3"), sizes, count);
}

/// As [`rping_both_ways`], with the appliance at `addrs.0` and Linux at `addrs.1`.
fn rping_both_ways_at(linux: &mut LinuxPeer, shm: &Ivshmem, addrs: (&str, &str), sizes: &[u32], count: u32) {
    let (ours_ip, theirs_ip) = addrs;
    for &size in sizes {
        let opts = format!("-V -C {count} -S {size}");
        // Linux serves, the appliance connects.
        linux.spawn_bg(&format!("rping -s -a {theirs_ip} {opts}"), "/tmp/rping.log").unwrap();
        let (ok, ours) = our_client(&shm.path, &format!("-c -a {theirs_ip} {opts}"));
        let theirs = linux.finish_bg("/tmp/rping.log", RUN).unwrap();
        assert!(ok, "{size} B, appliance rping client failed:\n{ours}\nLinux server:\n{theirs}");
        assert!(theirs.contains("exit=0"), "{size} B, Linux rping server failed:\n{theirs}\nours:\n{ours}");
        eprintln!("rping {theirs_ip} {size} B x {count}: Linux server / appliance client pass");

        // The appliance serves, Linux connects.
        let server = tool::spawn("rping", &shm.path, &format!("-s -a {ours_ip} {opts}")).unwrap();
        let (status, theirs) = linux_client(linux, &format!("-c -a {ours_ip} {opts}"));
        let (ok, ours) = tool::finish(server, RUN).unwrap();
        assert_eq!(status, 0, "{size} B, Linux rping client failed:\n{theirs}\nappliance server:\n{ours}");
        assert!(ok, "{size} B, appliance rping server failed:\n{ours}\nLinux client:\n{theirs}");
        eprintln!("rping {ours_ip} {size} B x {count}: appliance server / Linux client pass");
    }
}

/// Linux `rping` and ours, both ways, 64 B and 64 KiB - 1, 1000 verified pings
/// each; the capture parses frame by frame (MADs on QP1 included) and
/// neither side counts an exhausted retry.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn rping_against_linux_both_directions() {
    if !LinuxPeer::available_or_skip("rping_against_linux_both_directions") {
        return;
    }
    let capture = std::env::temp_dir().join(format!("cm-{}.pcap", std::process::id()));
    let (app, mut linux, shm) = setup("cm", Some(&capture));
    // 65535: rping's largest (its buffer is 64 KiB, the size must be smaller).
    rping_both_ways(&mut linux, &shm, &[64, 65535], 1000);
    let stats = linux.cmd("rdma statistic show").unwrap();
    let c = counters(&stats);
    for err in ["retry_exceeded_err", "retry_rnr_exceeded_err", "send_err"] {
        assert_eq!(counter(&c, err), Some(0), "Linux {err}:\n{stats}");
    }
    drop(app);
    tests::pcap::check_roce_capture(&capture, 100);
    let _ = std::fs::remove_file(&capture);
}

/// The short CM run `make test` includes: one rping each way.
#[test]
#[ignore = "boots a Linux peer: `make test` runs it through `make interop-smoke`"]
fn smoke_rping_against_linux_each_way() {
    if !LinuxPeer::available_or_skip("smoke_rping_against_linux_each_way") {
        return;
    }
    let (_app, mut linux, shm) = setup("cm-smoke", None);
    rping_both_ways(&mut linux, &shm, &[64], 10);
}

/// A connect to a port nobody listens on is refused at once with REJ
/// reason 8 (invalid service ID), both ways.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn a_connect_to_a_closed_port_is_rejected_both_ways() {
    if !LinuxPeer::available_or_skip("a_connect_to_a_closed_port_is_rejected_both_ways") {
        return;
    }
    let (_app, mut linux, shm) = setup("cm-rej", None);
    // REJECTED with reason 8 is the peer's answer; a lost REQ would end in
    // UNREACHABLE (-110) after the CM's retries.
    let (ok, ours) = tool::finish(tool::spawn("rping", &shm.path, "-c -a 10.0.0.3 -p 9 -C 1").unwrap(), RUN).unwrap();
    assert!(!ok && ours.contains("RDMA_CM_EVENT_REJECTED, error 8"), "{ours}");
    let (status, theirs) = linux.status("rping -c -a 10.0.0.1 -p 9 -C 1", RUN).unwrap();
    assert_ne!(status, 0);
    assert!(theirs.contains("error 8"), "{theirs}");
}

/// rping both ways on a bad wire (the fault relay: 5% loss, 1% reordering,
/// 1% duplication, seeded): the CM's retries carry the REQ/REP/RTU and
/// DREQ/DREP exchange, the transport's the data, and both ends verify it.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn rping_against_linux_on_a_lossy_wire() {
    use tests::relay::{Faults, Relay};
    if !LinuxPeer::available_or_skip("rping_against_linux_on_a_lossy_wire") {
        return;
    }
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let relay =
        Relay::start(p1, p2, Faults { drop: 0.05, duplicate: 0.01, reorder: 0.01, ..Faults::default() }, 11).unwrap();
    let (_app, mut linux, shm) = setup_wire("cm-lossy", None, (p1, relay.port_a), (p2, relay.port_b));
    rping_both_ways(&mut linux, &shm, &[64, 4096], 100);
    eprintln!("lossy wire: {}", relay.summary());
}

/// Our rping client killed mid-run: its context's lease runs out, the
/// firmware destroys its CM id, which sends the Linux server a DREQ; the
/// Linux rping hears DISCONNECTED and exits instead of hanging.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn a_killed_client_disconnects_the_linux_server() {
    if !LinuxPeer::available_or_skip("a_killed_client_disconnects_the_linux_server") {
        return;
    }
    let (_app, mut linux, shm) = setup("cm-kill", None);
    linux.spawn_bg("rping -s -a 10.0.0.3 -V -C 0", "/tmp/rping.log").unwrap();
    // Started before the server may listen: retried until it connects.
    let start = Instant::now();
    let client = loop {
        let c = tool::Watched::spawn("rping", &shm.path, "-c -a 10.0.0.3 -v -C 0").unwrap();
        if c.wait_line("ping data:", Duration::from_secs(20)).is_some() {
            break c;
        }
        let (_, out) = c.finish(Duration::from_secs(5)).unwrap();
        assert!(start.elapsed() < Duration::from_secs(60), "never connected:\n{out}");
        std::thread::sleep(Duration::from_millis(500));
    };
    std::thread::sleep(Duration::from_secs(1));
    // While connected, both ends list their connected id alike: its QP
    // (`lqpn`, `qp-type`), state CONNECT, both addresses.
    let connected = |listing: &str| -> Vec<String> {
        let keys = |l: &str| l.split(' ').step_by(2).collect::<Vec<_>>().join(" ");
        listing.lines().filter(|l| l.contains("state CONNECT")).map(keys).collect()
    };
    let (ok, ours) = tool::finish(tool::spawn("rdma", &shm.path, "resource show cm_id").unwrap(), RUN).unwrap();
    let theirs = linux.cmd("rdma resource show cm_id").unwrap();
    assert!(ok && ours.contains("qp-type RC state CONNECT"), "ours:\n{ours}");
    assert_eq!(connected(&ours), connected(&theirs), "ours:\n{ours}\nLinux:\n{theirs}");
    drop(client); // kills it (SIGKILL): no DREQ of its own
    let theirs = linux.finish_bg("/tmp/rping.log", RUN).unwrap();
    assert!(theirs.contains("exit="), "{theirs}");
    eprintln!("Linux server after the kill:\n{theirs}");
}

/// rping over IPv6 global addresses both ways: the cma header says IP
/// version 6, the GIDs are the IPv6 addresses, the frames IPv6; the capture
/// parses frame by frame with good ICRCs.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn rping_against_linux_over_ipv6() {
    if !LinuxPeer::available_or_skip("rping_against_linux_over_ipv6") {
        return;
    }
    let capture = std::env::temp_dir().join(format!("cm-v6-{}.pcap", std::process::id()));
    let (mut app, mut linux, shm) = setup("cm-v6", Some(&capture));
    app.cmd("ip -6 addr add 2001:db8::1/64 dev eth0").unwrap();
    // nodad: the address is usable (and its GID there) at once.
    linux.expect("ip -6 addr add 2001:db8::3/64 dev eth0 nodad && echo added", "added").unwrap();
    let out = app.cmd("ping 2001:db8::3 -c 2 -i 200").unwrap();
    assert!(out.contains("2 received"), "{out}");
    rping_both_ways_at(&mut linux, &shm, ("2001:db8::1", "2001:db8::3"), &[64, 65535], 1000);
    drop(app);
    tests::pcap::check_roce_capture(&capture, 100);
    let _ = std::fs::remove_file(&capture);
}

/// Linux `ucmatose` and `udaddy` against ours, both ways: two connections
/// each, the default message count and size, every side's exit status.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn ucmatose_and_udaddy_against_linux_both_directions() {
    if !LinuxPeer::available_or_skip("ucmatose_and_udaddy_against_linux_both_directions") {
        return;
    }
    let (_app, mut linux, shm) = setup("cm-cmatose", None);
    for tool in ["ucmatose", "udaddy"] {
        // Linux serves, the appliance connects (retried while nothing listens:
        // a REJ with reason 8, or for SIDR a SIDR REP with status 1, "service
        // ID not supported").
        linux.spawn_bg(&format!("{tool} -c 2"), "/tmp/cma.log").unwrap();
        let start = Instant::now();
        let (ok, ours) = loop {
            let (ok, out) = tool::finish(tool::spawn(tool, &shm.path, "-c 2 -s 10.0.0.3").unwrap(), RUN).unwrap();
            let refused = out.contains("REJECTED, error: 8") || out.contains("UNREACHABLE, error: 1");
            if ok || !refused || start.elapsed() > Duration::from_secs(60) {
                break (ok, out);
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        let theirs = linux
            .finish_bg("/tmp/cma.log", Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("{tool} Linux server did not finish: {e}\nappliance client:\n{ours}"));
        assert!(ok && ours.contains("test complete"), "{tool} appliance client:\n{ours}\nLinux server:\n{theirs}");
        assert!(
            theirs.contains("exit=0") && theirs.contains("test complete"),
            "{tool} Linux server:\n{theirs}\nours:\n{ours}"
        );
        eprintln!("{tool}: Linux server / appliance client pass");

        // The appliance serves, Linux connects.
        let server = tool::Watched::spawn(tool, &shm.path, "-c 2 -b 10.0.0.1").unwrap();
        assert!(server.wait_line("starting server", Duration::from_secs(30)).is_some(), "{}", server.text());
        std::thread::sleep(Duration::from_secs(1));
        let (status, theirs) = linux.status(&format!("{tool} -c 2 -s 10.0.0.1"), RUN).unwrap();
        let (ok, ours) = server.finish(RUN).unwrap();
        assert_eq!(status, 0, "{tool} Linux client:\n{theirs}\nappliance server:\n{ours}");
        assert!(ok && ours.contains("test complete"), "{tool} appliance server:\n{ours}\nLinux client:\n{theirs}");
        eprintln!("{tool}: appliance server / Linux client pass");
    }
}

/// Linux's unmodified perftest with `-R` (QPs connected by rdma_cm, the
/// exchange over rdma_cm too: no TCP at all) against our tools, both roles.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn perftest_rdma_cm_against_linux_both_directions() {
    use tests::report::perftest_row;
    if !LinuxPeer::available_or_skip("perftest_rdma_cm_against_linux_both_directions") {
        return;
    }
    let (_app, mut linux, shm) = setup("cm-perftest", None);
    let matrix: [(&str, &str, usize, u32); 4] = [
        ("ib_send_bw", "send_bw", 65536, 200),
        ("ib_write_bw", "write_bw", 65536, 200),
        ("ib_read_bw", "read_bw", 65536, 200),
        ("ib_send_lat", "send_lat", 2, 300),
    ];
    for (linux_prog, tool, size, iters) in matrix {
        let common = format!("-R -n {iters} -s {size}");
        // Linux serves, our tool connects (it retries while nothing listens).
        linux.spawn_bg(&format!("{linux_prog} -d rxe0 -F {common}"), "/tmp/pt.log").unwrap();
        std::thread::sleep(Duration::from_secs(2));
        let (ok, ours) =
            tool::finish(tool::spawn(tool, &shm.path, &format!("{common} 10.0.0.3")).unwrap(), RUN).unwrap();
        let theirs = linux.finish_bg("/tmp/pt.log", RUN).unwrap();
        assert!(ok, "{tool} -R client failed:\n{ours}\nLinux {linux_prog} server:\n{theirs}");
        assert!(theirs.contains("exit=0"), "Linux {linux_prog} -R server failed:\n{theirs}\nours:\n{ours}");
        let a = perftest_row(&ours, size, iters).unwrap_or_else(|| panic!("{tool}: no result row:\n{ours}"));
        eprintln!("{tool} -R {size} B appliance client / Linux server: {a:?}");

        // Our tool serves; Linux's client does not retry, so it starts once ours listens.
        let server = tool::Watched::spawn(tool, &shm.path, &common).unwrap();
        assert!(server.wait_line("Waiting for client", Duration::from_secs(30)).is_some(), "{}", server.text());
        std::thread::sleep(Duration::from_secs(1));
        let (status, theirs) = linux.status(&format!("{linux_prog} -d rxe0 -F {common} 10.0.0.1"), RUN).unwrap();
        let (ok, ours) = server.finish(RUN).unwrap();
        assert!(ok, "{tool} -R server failed:\n{ours}\nLinux {linux_prog} client:\n{theirs}");
        assert_eq!(status, 0, "Linux {linux_prog} -R client failed:\n{theirs}\nours:\n{ours}");
        let b = perftest_row(&theirs, size, iters).unwrap_or_else(|| panic!("{linux_prog}: no result row:\n{theirs}"));
        eprintln!("{tool} -R {size} B appliance server / Linux client: Linux reports {b:?}");
    }
}
