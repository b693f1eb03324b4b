//! The C ABI's acceptance (issue 14): Debian's unmodified RDMA programs on
//! the host, over our `libibverbs.so.1` and `librdmacm.so.1` (`make abi`,
//! `$ROCE_ABI_DIR` else `target/abi`), driving the appliance through its
//! ring, against the same unmodified programs on the Linux rdma_rxe peer,
//! each side as server and as client.
//!
//! The RDMA traffic, rdma_cm's MADs included, goes over the emulated wire.
//! The TCP exchanges of the pingpongs and of perftest without `-R` go over
//! the peer's management NIC, as in perftest.rs: a host client reaches a
//! guest server through `hostfwd`, a guest client reaches a host server
//! through `guestfwd` (`tcp-stdio`).
//!
//! Slow (a Debian kernel under TCG), so `#[ignore]`d: `make interop` runs
//! them all, `make interop-smoke` the smoke.

#![deny(unsafe_code)]

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use tests::tool::finish;
use tests::{
    Appliance, Ivshmem, LinuxPeer, MGMT_GUEST_PORT, MGMT_HOST_IP, Nic, Options, PeerOptions, free_tcp_port,
    free_udp_port,
};

const REGION: u64 = 64 << 20;
/// One program run, connection set-up included.
const RUN: Duration = Duration::from_secs(240);

/// Debian's `prog` on the host, over our libraries and the appliance's ring.
fn host(prog: &str, ring: &Path, args: &str) -> Child {
    tests::tool::spawn_unmodified(prog, ring, args)
        .unwrap_or_else(|e| panic!("{prog}: {e} (make deps-rdma-core installs Debian's programs)"))
}

struct Setup {
    _app: Appliance,
    linux: LinuxPeer,
    shm: Ivshmem,
    /// Host port a host server listens on (the guest reaches it through guestfwd).
    gp: u16,
    /// Host port that reaches the guest's 18515 (hostfwd).
    hp: u16,
}

/// One appliance (10.0.0.1, rxe0, a ring) and one Linux peer (10.0.0.3).
fn setup(tag: &str) -> Setup {
    setup_with_region(tag, REGION)
}

/// `setup` with a ring of `region` bytes (a larger buffer area per context).
fn setup_with_region(tag: &str, region: u64) -> Setup {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let gp = free_tcp_port();
    let mut opts = PeerOptions::new(Nic::new("52:54:00:00:01:03", p2, p1), "10.0.0.3/24");
    opts.guest_fwd_cmd = Some(format!("{} {gp}", env!("CARGO_BIN_EXE_tcp-stdio")));
    let mut linux = LinuxPeer::start(opts).unwrap();
    let shm = Ivshmem::temp(tag, region);
    let mut app = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
        append: "ip=10.0.0.1/24".into(),
        ivshmem: Some(shm.clone()),
        cmd_timeout: Duration::from_secs(180),
        ..Options::default()
    })
    .unwrap();
    linux.wait_ready().unwrap();
    assert!(app.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
    let out = app.cmd("ping 10.0.0.3 -c 2 -i 200").unwrap();
    assert!(out.contains("2 received"), "{out}");
    let hp = linux.host_port();
    Setup { _app: app, linux, shm, gp, hp }
}

/// `prog args` over a TCP exchange: Linux serves and the host connects,
/// then the host serves and Linux connects; every side must succeed and
/// print `expect`.
fn tcp_both_roles(s: &mut Setup, prog: &str, args: &str, expect: &str) {
    tcp_both_roles_with(s, prog, args, expect, expect)
}

/// [`tcp_both_roles`] for programs whose server does not print the figures
/// (`ib_read_lat`'s server only lends its memory): the host server must
/// print `server_expect`, the host client `expect`.
fn tcp_both_roles_with(s: &mut Setup, prog: &str, args: &str, expect: &str, server_expect: &str) {
    let t = Instant::now();
    s.linux.spawn_bg(&format!("{prog} {args}"), "/tmp/abi.log").unwrap();
    s.linux.wait_listening(MGMT_GUEST_PORT, Duration::from_secs(30)).unwrap();
    let (ok, ours) = finish(host(prog, &s.shm.path, &format!("{args} -p {} 127.0.0.1", s.hp)), RUN).unwrap();
    let theirs = s.linux.finish_bg("/tmp/abi.log", RUN).unwrap();
    assert!(ok && ours.contains(expect), "{prog} {args}: host client:\n{ours}\nLinux server:\n{theirs}");
    assert!(theirs.contains("exit=0"), "{prog} {args}: Linux server:\n{theirs}\nhost client:\n{ours}");
    eprintln!("{prog} {args}: Linux server / host client pass ({:.1} s)", t.elapsed().as_secs_f64());

    let t = Instant::now();
    let server = host(prog, &s.shm.path, &format!("{args} -p {}", s.gp));
    std::thread::sleep(Duration::from_secs(2));
    let (status, theirs) = s.linux.status(&format!("{prog} {args} -p {MGMT_GUEST_PORT} {MGMT_HOST_IP}"), RUN).unwrap();
    let (ok, ours) = finish(server, RUN).unwrap();
    assert!(
        ok && ours.contains(server_expect),
        "{prog} {args}: host server (ok {ok}):\n{ours}\nLinux client:\n{theirs}"
    );
    assert!(theirs.contains(expect), "{prog} {args}: Linux client:\n{theirs}\nhost server:\n{ours}");
    assert_eq!(status, 0, "{prog} {args}: Linux client:\n{theirs}\nhost server:\n{ours}");
    eprintln!("{prog} {args}: host server / Linux client pass ({:.1} s)", t.elapsed().as_secs_f64());
}

/// `server_args` / `client_args ADDR` over rdma_cm (no TCP): Linux serves
/// at 10.0.0.3 and the host connects (retried while nothing listens, which
/// the Linux program may take a while to do under TCG),
/// then the host serves at 10.0.0.1 and Linux connects.
///
/// perftest's `-R` connects twice (its exchange channel, then the test),
/// and a client refused the second time cannot go on while its server
/// waits for that second connection: the pair starts over (see
/// [`refused_after_exchange`]).
fn cm_both_roles(s: &mut Setup, prog: &str, server_args: &str, client_args: &str) {
    type Half = fn(&mut Setup, &str, &str, &str) -> Result<(), String>;
    let halves: [(&str, Half); 2] = [("Linux server", linux_serves), ("host server", host_serves)];
    for (what, half) in halves {
        let mut earlier = String::new();
        for attempt in 1.. {
            match half(s, prog, server_args, client_args) {
                Ok(()) => break,
                Err(out) if attempt < 3 => earlier.push_str(&format!("--- {out}")),
                Err(out) => panic!("{prog}: {what}: refused after the exchange channel 3 times:\n{earlier}--- {out}"),
            }
        }
        eprintln!("{prog}: {what} passes");
    }
}

/// The Linux server and the host client; `Err` (the client's output) when
/// the pair must start over.
fn linux_serves(s: &mut Setup, prog: &str, server_args: &str, client_args: &str) -> Result<(), String> {
    s.linux.spawn_bg(&format!("{prog} {}", server_args.replace("ADDR", "10.0.0.3")), "/tmp/abi.log").unwrap();
    let start = Instant::now();
    let (ok, ours) = loop {
        let (ok, out) = finish(host(prog, &s.shm.path, &client_args.replace("ADDR", "10.0.0.3")), RUN).unwrap();
        if !ok && refused_after_exchange(&out) {
            s.linux.kill_bg("/tmp/abi.log").unwrap();
            return Err(out);
        }
        if ok || !refused(&out) || start.elapsed() > Duration::from_secs(60) {
            break (ok, out);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let theirs = s
        .linux
        .finish_bg("/tmp/abi.log", RUN)
        .unwrap_or_else(|e| panic!("{prog}: Linux server did not finish: {e}\nhost client:\n{ours}"));
    assert!(ok, "{prog}: host client:\n{ours}\nLinux server:\n{theirs}");
    assert!(theirs.contains("exit=0"), "{prog}: Linux server:\n{theirs}\nhost client:\n{ours}");
    Ok(())
}

/// The host server and the Linux client; `Err` (the client's output) when
/// the pair must start over.
fn host_serves(s: &mut Setup, prog: &str, server_args: &str, client_args: &str) -> Result<(), String> {
    let mut server = host(prog, &s.shm.path, &server_args.replace("ADDR", "10.0.0.1"));
    std::thread::sleep(Duration::from_secs(2));
    // The host server may not listen yet either (perftest takes a few
    // seconds to set up under load): the Linux client tries again.
    let start = Instant::now();
    let (status, theirs) = loop {
        let (status, out) =
            s.linux.status(&format!("{prog} {}", client_args.replace("ADDR", "10.0.0.1")), RUN).unwrap();
        if status != 0 && refused_after_exchange(&out) {
            let _ = server.kill();
            let _ = server.wait();
            return Err(out);
        }
        if status == 0 || !refused(&out) || start.elapsed() > Duration::from_secs(60) {
            break (status, out);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let (ok, ours) = finish(server, RUN).unwrap();
    assert!(ok, "{prog}: host server:\n{ours}\nLinux client:\n{theirs}");
    assert_eq!(status, 0, "{prog}: Linux client:\n{theirs}\nhost server:\n{ours}");
    Ok(())
}

/// Whether perftest's `-R` client was refused on the test's connection,
/// after the exchange channel connected: its server has gone on to wait for
/// that connection, and perftest 4.5 cannot try it again (its retry reuses
/// the id it has just destroyed: "Failed to resolve RDMA CM address").
fn refused_after_exchange(out: &str) -> bool {
    refused(out) && out.contains("Failed to create RDMA CM connection")
}

/// Whether a client's output says nothing listened yet: a REJ with reason 8
/// (invalid service ID) for RC, a SIDR REP with status 1
/// (IB_SIDR_UNSUPPORTED) for UD.
fn refused(out: &str) -> bool {
    out.contains("error 8")
        || out.contains("error: 8")
        || out.contains("CM event bl blka 8")
        || out.contains("RDMA_CM_EVENT_UNREACHABLE, error: 1\n")
}

/// The short run `make interop-smoke` includes: ibv_rc_pingpong each way
/// and rping each way, Debian's binaries over our libraries.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn smoke_debian_programs_over_our_libraries_against_linux() {
    if !LinuxPeer::available_or_skip("smoke_debian_programs_over_our_libraries_against_linux") {
        return;
    }
    let mut s = setup("abi-smoke");
    tcp_both_roles(&mut s, "ibv_rc_pingpong", "-d rxe0 -g 1 -n 20", "20 iters in");
    cm_both_roles(&mut s, "rping", "-s -a ADDR -V -C 10 -S 64", "-c -a ADDR -V -C 10 -S 64");
}

/// ibv_devinfo; the pingpongs (RC plain, `-c`, `-e`; UD); perftest
/// `ib_write_bw` and `ib_send_lat` over TCP exchanges.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn ibverbs_programs_against_linux_both_roles() {
    if !LinuxPeer::available_or_skip("ibverbs_programs_against_linux_both_roles") {
        return;
    }
    let mut s = setup("abi-ibv");
    let (ok, out) = finish(host("ibv_devinfo", &s.shm.path, ""), RUN).unwrap();
    assert!(ok && out.contains("hca_id:\trxe0") && out.contains("PORT_ACTIVE"), "{out}");
    tcp_both_roles(&mut s, "ibv_rc_pingpong", "-d rxe0 -g 1 -n 100", "100 iters in");
    tcp_both_roles(&mut s, "ibv_rc_pingpong", "-d rxe0 -g 1 -n 100 -c", "100 iters in");
    tcp_both_roles(&mut s, "ibv_rc_pingpong", "-d rxe0 -g 1 -n 100 -e", "100 iters in");
    tcp_both_roles(&mut s, "ibv_ud_pingpong", "-d rxe0 -g 1 -n 100 -s 512", "100 iters in");
    tcp_both_roles(&mut s, "ib_write_bw", "-d rxe0 -F -x 1 -n 200 -s 65536", "BW average");
    tcp_both_roles(&mut s, "ib_send_lat", "-d rxe0 -F -x 1 -n 200 -s 64", "t_avg");
}

/// rping -V (64 B and 65535 B) and `ib_write_bw -R` over rdma_cm.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn rdmacm_programs_against_linux_both_roles() {
    if !LinuxPeer::available_or_skip("rdmacm_programs_against_linux_both_roles") {
        return;
    }
    let mut s = setup("abi-cm");
    for size in [64, 65535] {
        cm_both_roles(
            &mut s,
            "rping",
            &format!("-s -a ADDR -V -C 100 -S {size}"),
            &format!("-c -a ADDR -V -C 100 -S {size}"),
        );
    }
    cm_both_roles(&mut s, "ib_write_bw", "-d rxe0 -F -R -n 200 -s 65536", "-d rxe0 -F -R -n 200 -s 65536 ADDR");
}

/// `ibv_uc_pingpong` and `ibv_srq_pingpong` (its default 16 QPs on one
/// SRQ, plain and with completion events).
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn uc_and_srq_pingpong_against_linux_both_roles() {
    if !LinuxPeer::available_or_skip("uc_and_srq_pingpong_against_linux_both_roles") {
        return;
    }
    let mut s = setup("abi-srq");
    tcp_both_roles(&mut s, "ibv_uc_pingpong", "-d rxe0 -g 1 -n 100", "100 iters in");
    tcp_both_roles(&mut s, "ibv_uc_pingpong", "-d rxe0 -g 1 -n 100 -s 65536", "100 iters in");
    tcp_both_roles(&mut s, "ibv_srq_pingpong", "-d rxe0 -g 1 -n 100", "100 iters in");
    tcp_both_roles(&mut s, "ibv_srq_pingpong", "-d rxe0 -g 1 -n 100 -e", "100 iters in");
}

/// perftest's one-sided programs and the latency ones: `ib_read_bw`,
/// `ib_atomic_bw`, `ib_write_lat`, `ib_read_lat`.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn perftest_read_atomic_and_latency_against_linux_both_roles() {
    if !LinuxPeer::available_or_skip("perftest_read_atomic_and_latency_against_linux_both_roles") {
        return;
    }
    let mut s = setup("abi-perf");
    tcp_both_roles(&mut s, "ib_read_bw", "-d rxe0 -F -x 1 -n 200 -s 65536", "BW average");
    tcp_both_roles(&mut s, "ib_atomic_bw", "-d rxe0 -F -x 1 -n 200", "BW average");
    tcp_both_roles(&mut s, "ib_write_lat", "-d rxe0 -F -x 1 -n 200 -s 64", "t_avg");
    // The server of a READ latency test only answers the reads: it prints
    // its peer's address and no figures.
    tcp_both_roles_with(&mut s, "ib_read_lat", "-d rxe0 -F -x 1 -n 200 -s 64", "t_avg", "remote address:");
}

/// perftest's `-a` (every size from 2 B to 8 MiB, which perftest gives no
/// option to bound) for one bandwidth and one latency program, 20
/// iterations a size. The ring is 256 MiB so that a context's buffer area
/// (about 31 MiB) holds perftest's buffers for 8 MiB messages.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn perftest_all_sizes_against_linux_both_roles() {
    if !LinuxPeer::available_or_skip("perftest_all_sizes_against_linux_both_roles") {
        return;
    }
    let mut s = setup_with_region("abi-all", 256 << 20);
    tcp_both_roles(&mut s, "ib_write_bw", "-d rxe0 -F -x 1 -a -n 20", "8388608");
    tcp_both_roles(&mut s, "ib_write_lat", "-d rxe0 -F -x 1 -a -n 20", "8388608");
}

/// rdmacm-utils' `ucmatose` (RC, 2 connections) and `udaddy` (UD), and
/// `ib_send_bw -R`, over rdma_cm.
#[test]
#[ignore = "boots a Linux peer: `make interop`"]
fn ucmatose_udaddy_and_send_bw_over_rdma_cm_against_linux_both_roles() {
    if !LinuxPeer::available_or_skip("ucmatose_udaddy_and_send_bw_over_rdma_cm_against_linux_both_roles") {
        return;
    }
    let mut s = setup("abi-cm2");
    cm_both_roles(&mut s, "udaddy", "-c 2 -b ADDR", "-c 2 -s ADDR");
    cm_both_roles(&mut s, "ucmatose", "-c 2 -b ADDR", "-c 2 -s ADDR");
    cm_both_roles(&mut s, "ib_send_bw", "-d rxe0 -F -R -n 200 -s 65536", "-d rxe0 -F -R -n 200 -s 65536 ADDR");
}
