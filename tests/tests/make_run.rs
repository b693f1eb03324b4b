//! `make run` as a user at a terminal meets it (`make boot`, the same recipe
//! without the build, under a pty): Ctrl-C reaches the guest, a second run of
//! the same node is refused, `MTU=` sizes eth0, and the ring file goes away;
//! the ring's ivshmem server starts with it (the doorbell) and stops with
//! it, and `DOORBELL=0` boots a polled `ivshmem-plain` ring without one.

#![deny(unsafe_code)]

use std::time::Duration;
use tests::{MakeRun, free_udp_port};

/// A ring file and a port base no other test or `make run` uses; the ring
/// and the port's lock file go when the test ends.
fn unique(tag: &str) -> (String, u16, Cleanup) {
    let ring = format!("/dev/shm/roce-test-{}-{tag}", std::process::id());
    // PORT_BASE + 1 is node 1's own port, PORT_BASE + 2 its peer's.
    (ring.clone(), free_udp_port() - 1, Cleanup(ring))
}

struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(format!("{}.udp.lock", self.0));
        let _ = std::fs::remove_file(format!("{}.sock", self.0));
    }
}

/// A command's output without the log lines the console interleaves.
fn quiet(out: String) -> String {
    out.lines().filter(|l| !l.starts_with('[')).map(|l| format!("{l}\n")).collect()
}

fn boot(args: &[String]) -> MakeRun {
    let run = MakeRun::start(args).unwrap();
    run.wait_prompt().unwrap_or_else(|e| panic!("{e}\n{}", run.transcript()));
    run
}

/// `shutdown`, then make's exit status (QEMU's, passed on).
fn shutdown(mut run: MakeRun) -> (bool, MakeRun) {
    run.send(b"shutdown\r").unwrap();
    let status = run.wait_exit(Duration::from_secs(60)).unwrap();
    (status.success(), run)
}

#[test]
fn ctrl_c_interrupts_the_running_command_and_qemu_stays() {
    let (ring, base, _cleanup) = unique("ctrl-c");
    let mut run = boot(&MakeRun::args(1, base, &ring));
    run.cmd("ip addr add 10.9.0.1/24 dev eth0").unwrap();
    // Nobody answers: the ping would run for 100 s.
    run.send(b"ping 10.9.0.2 -c 1000 -i 100\r").unwrap();
    run.wait_for_text("PING 10.9.0.2").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let stats = run.interrupt().unwrap();
    assert!(stats.starts_with("^C\n--- 10.9.0.2 ping statistics ---\n"), "{stats}");
    assert!(stats.contains(" packets transmitted, 0 received, 100% packet loss"), "{stats}");
    // QEMU lives on and the shell takes the next line.
    assert!(run.cmd("version").unwrap().starts_with("RoCE appliance firmware"), "{}", run.transcript());
    // A `sleep` is interrupted too, and what was typed during it is dropped.
    let wall = std::time::Instant::now();
    run.send(b"sleep 600000\r").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    run.send(b"junk").unwrap();
    assert_eq!(run.interrupt().unwrap(), "^C\n");
    assert!(run.cmd("uptime").unwrap().starts_with("up "), "{}", run.transcript());
    assert!(wall.elapsed() < Duration::from_secs(60));
    assert!(!run.transcript().contains("unknown command 'junk"), "{}", run.transcript());
    let (ok, run) = shutdown(run);
    assert!(ok, "{}", run.transcript());
    assert!(!run.ring().exists(), "make run left {} behind", run.ring().display());
}

#[test]
fn a_second_run_of_the_same_node_is_refused() {
    let (ring, base, _cleanup) = unique("lock");
    let args = MakeRun::args(1, base, &ring);
    let mut first = boot(&args);
    let mut second = MakeRun::start(&args).unwrap();
    let status = second.wait_exit(Duration::from_secs(60)).unwrap();
    let text = second.transcript();
    assert!(!status.success(), "{text}");
    assert!(text.contains(&format!("error: node 1 is already running: its ring {ring} is locked")), "{text}");
    assert!(!text.contains("roce> "), "a second appliance booted:\n{text}");
    drop(second);
    // Another ring on the same UDP port: the port's lock refuses it.
    let (other_ring, _, _other) = unique("lock-other");
    let mut same_port: Vec<String> = args.iter().filter(|a| !a.starts_with("RING=")).cloned().collect();
    same_port.push(format!("RING={other_ring}"));
    let mut third = MakeRun::start(&same_port).unwrap();
    assert!(!third.wait_exit(Duration::from_secs(60)).unwrap().success());
    let text = third.transcript();
    assert!(text.contains(&format!("error: UDP port {} is taken by another appliance", base + 1)), "{text}");
    drop(third);
    // The first one was not disturbed, and its end releases the locks.
    assert!(first.cmd("version").unwrap().starts_with("RoCE appliance firmware"));
    let (ok, first) = shutdown(first);
    assert!(ok, "{}", first.transcript());
    let again = boot(&args);
    let (ok, again) = shutdown(again);
    assert!(ok, "{}", again.transcript());
}

#[test]
fn mtu_9000_gives_jumbo_frames_and_rdma_mtu_4096() {
    let (ring, base, _cleanup) = unique("mtu");
    let mut args = MakeRun::args(1, base, &ring);
    args.push("MTU=9000".into());
    let mut run = boot(&args);
    assert!(run.transcript().contains(", mtu 9000, ring "), "{}", run.transcript());
    let link = run.cmd("ip link show eth0").unwrap();
    assert!(link.contains("mtu 9000 "), "{link}");
    assert_eq!(quiet(run.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap()), "");
    let active_mtu = |run: &mut MakeRun| {
        let out = run.cmd("ibv_devinfo").unwrap();
        out.lines().find(|l| l.trim_start().starts_with("active_mtu:")).map(|l| l.trim().to_string()).unwrap()
    };
    assert_eq!(active_mtu(&mut run), "active_mtu:\t\t4096 (5)");
    // Within the NIC's limit the MTU can be changed, and rxe follows.
    assert_eq!(quiet(run.cmd("ip link set eth0 mtu 1500").unwrap()), "");
    assert!(run.cmd("ip link show eth0").unwrap().contains("mtu 1500 "));
    assert_eq!(active_mtu(&mut run), "active_mtu:\t\t1024 (3)");
    assert_eq!(quiet(run.cmd("ip link set eth0 mtu 4200").unwrap()), "");
    assert_eq!(active_mtu(&mut run), "active_mtu:\t\t4096 (5)");
    let out = quiet(run.cmd("ip link set eth0 mtu 9001").unwrap());
    assert!(out.starts_with("error: ") && out.contains("9001"), "{out}");
    assert!(run.cmd("ip link show eth0").unwrap().contains("mtu 4200 "));
    let (ok, run) = shutdown(run);
    assert!(ok, "{}", run.transcript());
}

/// `make run`'s doorbell: its ivshmem server starts beside the ring, the
/// appliance becomes a peer of it, a host tool attaches through it, a
/// host's commands ring the appliance when it halts, and server and socket
/// go when QEMU exits. `DOORBELL=0`: no server, a polled ring the same tool uses.
#[test]
fn make_run_starts_and_stops_the_ivshmem_server_and_doorbell_0_polls() {
    let (ring, base, _cleanup) = unique("doorbell");
    let socket = format!("{ring}.sock");
    let mut run = boot(&MakeRun::args(1, base, &ring));
    assert!(run.transcript().contains(&format!("doorbell {socket}")), "{}", run.transcript());
    assert!(std::path::Path::new(&socket).exists(), "no socket beside the ring");
    let status = quiet(run.cmd("ring").unwrap());
    assert!(status.starts_with("ring: doorbell ivshmem peer "), "{status}");
    let rdma_link = || {
        let child = tests::tool::spawn("rdma", std::path::Path::new(&ring), "link").unwrap();
        let (ok, out) = tests::tool::finish(child, Duration::from_secs(120)).unwrap();
        assert!(ok, "{out}");
    };
    rdma_link();
    // A host rings only an appliance that halts asking for it; one that is
    // still awake from the last command finds the next by itself (a short
    // tool like `rdma link` may never ring). Commands spaced wider than the
    // appliance's 1 ms heartbeat find it halted, unless one lands in the few
    // microseconds of a heartbeat's pass.
    let ctx = verbs::Context::open(std::path::Path::new(&ring)).unwrap();
    let door = ctx.doorbell().expect("the host library found the doorbell");
    for _ in 0..20 {
        if door.rings() > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        ctx.nop().unwrap();
    }
    assert!(door.rings() > 0, "20 spaced commands never found the appliance asking to be rung");
    drop(ctx);
    let status = quiet(run.cmd("ring").unwrap());
    let interrupts: u64 = status
        .split_whitespace()
        .skip_while(|w| *w != "interrupts")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{status}"));
    assert!(interrupts > 0, "the host's rings reached the appliance: {status}");
    let (ok, run) = shutdown(run);
    assert!(ok, "{}", run.transcript());
    assert!(!run.ring().exists(), "make run left {} behind", run.ring().display());
    assert!(!std::path::Path::new(&socket).exists(), "make run left {socket} behind");

    let mut args = MakeRun::args(1, base, &ring);
    args.push("DOORBELL=0".into());
    let mut run = boot(&args);
    assert!(run.transcript().contains("(polled)"), "{}", run.transcript());
    assert!(!std::path::Path::new(&socket).exists(), "DOORBELL=0 starts no server");
    let status = quiet(run.cmd("ring").unwrap());
    assert!(status.starts_with("ring: polled"), "{status}");
    rdma_link();
    let (ok, run) = shutdown(run);
    assert!(ok, "{}", run.transcript());
}
