//! The ring's doorbell end to end (QEMU's `ivshmem-doorbell`, an ivshmem
//! server in this process per ring, `verbs_ring::wake`): host programs
//! that block on completion events are woken by the appliance's CQEs, the
//! appliance halts until hosts ring it (its heartbeat slowed while no host
//! is attached), and a host program blocked on completion events costs
//! (nearly) no CPU. And the fallback: the same programs on `ivshmem-plain`
//! rings, polled both ways.
//!
//! Two appliances on one wire; `rc_pingpong -e` (our tool) and Debian's
//! unmodified `ibv_rc_pingpong -e` over our libibverbs, whose completion
//! channel fd is then fed by the doorbell's wake-up thread.

#![deny(unsafe_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tests::{Appliance, Ivshmem, ring_pair};

const REGION: u64 = 64 << 20;
/// The bound on every wait for something that must happen: generous (TCG on
/// a busy machine); not a timing assertion.
const WAIT: Duration = Duration::from_secs(120);

fn pair(tag: &str, doorbell: bool) -> (Appliance, Appliance, Ivshmem, Ivshmem) {
    let ring = |side: &str| {
        let name = format!("{tag}-{side}");
        if doorbell {
            Ivshmem { doorbell: true, ..Ivshmem::temp(&name, REGION) }
        } else {
            Ivshmem::temp_plain(&name, REGION)
        }
    };
    ring_pair([ring("a"), ring("b")], ["", ""])
}

/// The console's `ring` line of counters: (doorbell interrupts, host rings).
fn ring_counters(a: &mut Appliance) -> (u64, u64) {
    let out = a.cmd("ring").unwrap();
    let word = |name: &str| -> u64 {
        let mut w = out.split_whitespace().skip_while(|w| *w != name);
        w.nth(1).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no `{name}` in:\n{out}"))
    };
    (word("interrupts"), word("rings"))
}

fn ours(ring: &Path, args: &str) -> Command {
    let mut c = Command::new(tests::verbs_tool("rc_pingpong"));
    c.arg("--ring").arg(ring).args(args.split_whitespace()).env_remove("RDMA_RING");
    c
}

fn debians(ring: &Path, args: &str) -> Command {
    let mut c = Command::new("/usr/bin/ibv_rc_pingpong");
    c.args(args.split_whitespace()).env("LD_LIBRARY_PATH", tests::abi_dir()).env("RDMA_RING", ring);
    c
}

/// Runs a server and a client pingpong, the client retried until the
/// server listens; both outputs.
fn run_pair(server: Command, client: impl Fn() -> Command) -> (String, String) {
    let mut server = server;
    let server = server.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let server = Killed::new(server);
    let deadline = Instant::now() + WAIT;
    let client = loop {
        let out = client().output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        if out.status.success() || Instant::now() > deadline || !text.contains("onnect") {
            break text;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let (ok, server) = tests::tool::finish(server.take(), WAIT).unwrap();
    assert!(ok || !server.is_empty(), "server: {server}");
    (server, client)
}

/// A child killed on drop (a test that fails must not leave it running).
struct Killed(Option<Child>);

impl Killed {
    fn new(c: Child) -> Killed {
        Killed(Some(c))
    }

    fn take(mut self) -> Child {
        self.0.take().expect("taken once")
    }

    fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// Whether it is still running (a waiter that died would measure idle too).
    fn running(&mut self) -> bool {
        self.0.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `rc_pingpong -e` (our tool) and Debian's `ibv_rc_pingpong -e` over our
/// libibverbs between two appliances with doorbells, data checked: each side
/// sleeps on its completion events, which the appliances' CQEs raise, and
/// rings its appliance, which halts between them. The appliances' `ring`
/// counters show both directions used.
#[test]
fn pingpongs_with_dash_e_are_woken_by_completion_events() {
    let (mut a, mut b, s1, s2) = pair("dash-e", true);
    let port = tests::free_tcp_port();
    let common = format!("-d rxe0 -g 1 -p {port} -e -c -s 4096 -n 200");
    let (srv, cli) = run_pair(ours(&s1.path, &common), || ours(&s2.path, &format!("{common} 127.0.0.1")));
    for (side, out) in [("server", &srv), ("client", &cli)] {
        assert!(out.contains("200 iters in"), "ours, {side}:\n{out}\nother:\n{srv}\n{cli}");
        assert!(!out.contains("invalid data"), "ours, {side}:\n{out}");
    }
    println!("rc_pingpong -e: {}", cli.lines().find(|l| l.contains("usec/iter")).unwrap_or(""));
    let (srv, cli) = run_pair(debians(&s2.path, &common), || debians(&s1.path, &format!("{common} 127.0.0.1")));
    for (side, out) in [("server", &srv), ("client", &cli)] {
        assert!(out.contains("200 iters in"), "Debian's, {side}:\n{out}\nother:\n{srv}\n{cli}");
        assert!(!out.contains("invalid data"), "Debian's, {side}:\n{out}");
    }
    println!("ibv_rc_pingpong -e: {}", cli.lines().find(|l| l.contains("usec/iter")).unwrap_or(""));
    for (name, x) in [("a", &mut a), ("b", &mut b)] {
        let (interrupts, rings) = ring_counters(x);
        println!("appliance {name}: {interrupts} doorbell interrupts, {rings} completion events rung");
        assert!(interrupts > 0, "appliance {name} was never rung");
        assert!(rings > 0, "appliance {name} never rang a host");
    }
}

/// Without doorbells (`ivshmem-plain`) the same programs work, polled: the
/// appliances say so, and no host rings them.
#[test]
fn without_doorbells_the_same_pingpongs_poll() {
    let (mut a, _b, s1, s2) = pair("plain-e", false);
    assert!(a.cmd("ring").unwrap().contains("ring: polled"));
    let port = tests::free_tcp_port();
    let common = format!("-d rxe0 -g 1 -p {port} -e -c -s 4096 -n 50");
    let (srv, cli) = run_pair(ours(&s1.path, &common), || ours(&s2.path, &format!("{common} 127.0.0.1")));
    assert!(srv.contains("50 iters in") && cli.contains("50 iters in"), "{srv}\n{cli}");
    let (srv, cli) = run_pair(debians(&s2.path, &common), || debians(&s1.path, &format!("{common} 127.0.0.1")));
    assert!(srv.contains("50 iters in") && cli.contains("50 iters in"), "{srv}\n{cli}");
}

/// Clock ticks of CPU (user + system) process `pid` used so far
/// (`/proc/PID/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name (field 2) may hold spaces: count from its ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn clock_ticks_per_second() -> u64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(100)
}

/// Plays a pingpong client over TCP only: sends an address (a QP on
/// appliance b that will never send) and "done", so the server connects its
/// QP and then waits for a first message that never comes.
fn fake_client(port: u16) -> TcpStream {
    let deadline = Instant::now() + WAIT;
    let mut s = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(e) => {
                assert!(Instant::now() < deadline, "the server never listened: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    let gid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2];
    let me = verbs::pingpong::Dest { lid: 0, qpn: 0x11, psn: 0x22, gid };
    s.write_all(&me.to_wire()).unwrap();
    let mut theirs = [0u8; verbs::pingpong::MSG_LEN];
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.read_exact(&mut theirs).unwrap();
    s.write_all(b"done\0").unwrap();
    s
}

/// A host program blocked on completion events sits idle: our
/// `rc_pingpong -e` and Debian's `ibv_rc_pingpong -e` servers, connected to
/// a client that never sends, wait for their first completion; their CPU
/// time over a few seconds (from /proc) is reported, and only a generous
/// bound asserted (the aim is under 5% of a core; a polling waiter takes a
/// whole one).
#[test]
fn a_host_blocked_on_completion_events_sits_idle() {
    // With doorbells (asserted), then on plain rings for comparison (the
    // polled fallback; reported only).
    for doorbell in [true, false] {
        let (_a, _b, s1, _s2) = pair(if doorbell { "idle" } else { "idle-plain" }, doorbell);
        blocked_waiters_cost(&s1, doorbell);
    }
}

fn blocked_waiters_cost(s1: &Ivshmem, doorbell: bool) {
    let hz = clock_ticks_per_second();
    const SPELL: Duration = Duration::from_secs(5);
    let mode = if doorbell { "doorbell" } else { "ivshmem-plain, polled" };
    for (name, cmd) in [("rc_pingpong -e", ours as fn(&Path, &str) -> Command), ("ibv_rc_pingpong -e", debians)] {
        let port = tests::free_tcp_port();
        let mut c = cmd(&s1.path, &format!("-d rxe0 -g 1 -p {port} -e"));
        let mut server = Killed::new(c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
        let _client = fake_client(port);
        // Let it reach its wait (the RTR's ARP, the first arm).
        std::thread::sleep(Duration::from_secs(1));
        let pid = server.id();
        let (t0, c0) = (Instant::now(), cpu_ticks(pid));
        std::thread::sleep(SPELL);
        let (t1, c1) = (Instant::now(), cpu_ticks(pid));
        assert!(server.running(), "{name} is not waiting: it exited");
        let share = (c1 - c0) as f64 / hz as f64 / (t1 - t0).as_secs_f64() * 100.0;
        println!(
            "{name} ({mode}): waiting for a completion, {share:.1}% of a core over {:.1} s",
            (t1 - t0).as_secs_f64()
        );
        if doorbell {
            assert!(share < 50.0, "{name} used {share:.1}% of a core while waiting");
        }
    }
}

/// Timer interrupts the appliance took so far (`uptime`'s `irqs: timer N`).
fn timer_irqs(a: &mut Appliance) -> u64 {
    let out = a.cmd("uptime").unwrap();
    let n = tests::report::number_after(&out, "timer").unwrap_or_else(|| panic!("no timer count in:\n{out}"));
    n as u64
}

/// With a doorbell and no host attached the heartbeat slows (an idle
/// appliance halts instead of waking for a 1 ms beat nobody needs); a host
/// that attaches is served at once (its ring brings the tick that attaches
/// it) and brings the 1 ms beat back, which its lease counts. Counted in
/// the appliance's timer interrupts over two spells of the same length:
/// nominally 50 ms against 1 ms a beat; asserted only far apart.
#[test]
fn an_idle_ring_beats_slowly_until_a_host_attaches() {
    let (mut a, _b, s1, _s2) = pair("beat", true);
    const SPELL: Duration = Duration::from_secs(2);
    let spell = |a: &mut Appliance| {
        let before = timer_irqs(a);
        std::thread::sleep(SPELL);
        timer_irqs(a) - before
    };
    let idle = spell(&mut a);
    // A host waiting on completion events holds a context.
    let port = tests::free_tcp_port();
    let mut c = ours(&s1.path, &format!("-d rxe0 -g 1 -p {port} -e"));
    let mut server = Killed::new(c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let _client = fake_client(port);
    let attached = spell(&mut a);
    assert!(server.running(), "the server is not waiting: it exited");
    println!("timer interrupts in {SPELL:?}: {idle} with no host, {attached} with one attached");
    assert!(idle < 300, "{idle} timer interrupts in {SPELL:?} with no host attached");
    assert!(attached > 5 * idle.max(20), "{attached} timer interrupts with a host attached, {idle} without");
}
