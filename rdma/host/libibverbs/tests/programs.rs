//! Debian's unmodified ibverbs-utils and perftest binaries over our
//! libibverbs.so.1, against two host-simulated appliances.

mod common;

use common::{Pair, free_port, program};

fn run(c: &mut std::process::Command) -> (bool, String) {
    let out = c.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn ibv_devices_and_ibv_devinfo() {
    let pair = Pair::start();
    let (ok, text) = run(&mut program("/usr/bin/ibv_devices", &pair.rings[0]));
    assert!(ok, "{text}");
    assert!(text.contains("rxe0"), "{text}");
    let (ok, text) = run(&mut program("/usr/bin/ibv_devinfo", &pair.rings[0]));
    assert!(ok, "{text}");
    println!("{text}");
    assert!(text.contains("hca_id:\trxe0"), "{text}");
    assert!(text.contains("PORT_ACTIVE"), "{text}");
}

/// Server on appliance A, client on appliance B, both Debian's `prog`
/// with `args`; both must succeed and print `expect`.
fn both_roles(pair: &Pair, prog: &str, args: &[&str], expect: &str) {
    let port = free_port().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-p", &port]);
    let server = program(prog, &pair.rings[0]).args(&all).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (ok, text) = run(program(prog, &pair.rings[1]).args(&all).arg("127.0.0.1"));
    let s = server.wait_with_output().unwrap();
    let stext = format!("{}{}", String::from_utf8_lossy(&s.stdout), String::from_utf8_lossy(&s.stderr));
    assert!(ok && s.status.success(), "{prog} {args:?}\nclient: {text}\nserver: {stext}");
    assert!(text.contains(expect) && stext.contains(expect), "{prog}: {text}\n{stext}");
}

#[test]
fn ibv_devinfo_v_matches_the_console() {
    let pair = Pair::start();
    let (ok, text) = run(program("/usr/bin/ibv_devinfo", &pair.rings[0]).arg("-v"));
    assert!(ok, "{text}");
    let ctx = verbs::Context::open(&pair.rings[0]).unwrap();
    let view = ctx.device(Some("rxe0")).unwrap().view(None).unwrap();
    let mut console = String::new();
    verbs_ring::show::devinfo::write(&mut console, &view, true).unwrap();
    assert_eq!(text.trim_end(), console.trim_end());
}

#[test]
fn ibv_rc_pingpong_sizes_and_completion_events() {
    let pair = Pair::start();
    for size in ["1", "4096", "65536"] {
        both_roles(&pair, "/usr/bin/ibv_rc_pingpong", &["-g", "1", "-n", "50", "-s", size], "50 iters in");
    }
    both_roles(&pair, "/usr/bin/ibv_rc_pingpong", &["-g", "1", "-n", "200", "-e"], "200 iters in");
    both_roles(&pair, "/usr/bin/ibv_rc_pingpong", &["-g", "1", "-n", "100", "-c"], "100 iters in");
}

#[test]
fn ibv_uc_ud_srq_pingpong() {
    let pair = Pair::start();
    both_roles(&pair, "/usr/bin/ibv_uc_pingpong", &["-g", "1", "-n", "100"], "100 iters in");
    both_roles(&pair, "/usr/bin/ibv_ud_pingpong", &["-g", "1", "-n", "100", "-s", "1024"], "100 iters in");
    both_roles(&pair, "/usr/bin/ibv_srq_pingpong", &["-g", "1", "-n", "100"], "100 iters in");
    both_roles(&pair, "/usr/bin/ibv_srq_pingpong", &["-g", "1", "-n", "100", "-e"], "100 iters in");
}

/// perftest's client and server (`prog` with `args`), both must succeed.
fn perftest(pair: &Pair, prog: &str, args: &[&str]) -> String {
    let port = free_port().to_string();
    let mut all: Vec<&str> = vec!["-d", "rxe0", "-x", "1", "-p", &port];
    all.extend(args);
    let server = program(prog, &pair.rings[0]).args(&all).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (ok, text) = run(program(prog, &pair.rings[1]).args(&all).arg("127.0.0.1"));
    let s = server.wait_with_output().unwrap();
    let stext = format!("{}{}", String::from_utf8_lossy(&s.stdout), String::from_utf8_lossy(&s.stderr));
    assert!(ok && s.status.success(), "{prog} {args:?}\nclient: {text}\nserver: {stext}");
    text
}

#[test]
fn perftest_send_bw_and_send_lat() {
    let pair = Pair::start();
    let t = perftest(&pair, "/usr/bin/ib_send_bw", &["-n", "200", "-s", "4096"]);
    println!("{t}");
    assert!(t.contains("BW average"), "{t}");
    let t = perftest(&pair, "/usr/bin/ib_send_lat", &["-n", "200", "-s", "64"]);
    println!("{t}");
    assert!(t.contains("t_avg"), "{t}");
}

/// The one-sided programs: peers name the program's buffers by their
/// virtual addresses, which each MR maps onto the region offset its pages
/// moved to.
#[test]
fn perftest_write_read_and_atomics() {
    let pair = Pair::start();
    for (prog, args, needle) in [
        ("/usr/bin/ib_write_bw", &["-n", "200", "-s", "65536"][..], "BW average"),
        ("/usr/bin/ib_read_bw", &["-n", "200", "-s", "65536"][..], "BW average"),
        ("/usr/bin/ib_atomic_bw", &["-n", "200"][..], "BW average"),
        ("/usr/bin/ib_write_lat", &["-n", "200", "-s", "64"][..], "t_avg"),
        ("/usr/bin/ib_read_lat", &["-n", "200", "-s", "64"][..], "t_avg"),
    ] {
        let t = perftest(&pair, prog, args);
        assert!(t.contains(needle), "{prog}: {t}");
    }
}

/// A C program's exit gives its slot back (the library detaches at exit)
/// instead of leaving it taken until its lease runs out: the slot it had
/// says it was left by a detach, whether it is free again or already ours.
#[test]
fn a_program_that_exits_detaches_its_slot() {
    use verbs_ring::abi::{ctx_state, reclaim_reason};
    let pair = Pair::start();
    let child = program("/usr/bin/ibv_devinfo", &pair.rings[0]).spawn().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ctx = verbs::Context::open(&pair.rings[0]).unwrap();
    let start = std::time::Instant::now();
    let left = loop {
        let slots = ctx.slots();
        // A fresh pair: a slot used before was the program's (a detach
        // clears the pid, a lease expiry leaves it).
        let used = |s: &&verbs::SlotInfo| s.generation > 0;
        let theirs = slots.iter().filter(used).find(|s| s.state == ctx_state::FREE);
        let reused = slots.iter().filter(used).find(|s| s.pid == std::process::id());
        if let Some(s) = theirs.or(reused) {
            break s.reclaim_reason;
        }
        assert!(start.elapsed() < common::PATIENCE, "{slots:?}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    assert_eq!(reclaim_reason::name(left), reclaim_reason::name(reclaim_reason::DETACHED));
}
