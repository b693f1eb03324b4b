//! Debian's unmodified rdmacm-utils and perftest's `-R` mode over our
//! librdmacm.so.1 and libibverbs.so.1, between two host-simulated
//! appliances (10.0.0.1 on ring A, 10.0.0.2 on ring B) whose firmware runs
//! the real rdma_cm over the wire between them.

mod common;

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::{PATIENCE, Pair, free_port, program};

const IP: [&str; 2] = ["10.0.0.1", "10.0.0.2"];

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Wait for `child` at most PATIENCE; killed (and failed) past it.
fn finish(mut child: Child, what: &str) -> (bool, String) {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            return (false, format!("{what}: killed after {PATIENCE:?}\n{}", text(&out)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.success(), text(&out))
}

/// Server `server(port)` on appliance `s`, then client `client(port)` on
/// the other; both must succeed. Returns (client, server) output.
fn pair_run(
    pair: &Pair,
    s: usize,
    prog: &str,
    server: impl Fn(&mut Command, &str),
    client: impl Fn(&mut Command, &str),
) -> (String, String) {
    let port = free_port().to_string();
    let mut sc = program(prog, &pair.rings[s]);
    server(&mut sc, &port);
    let srv = sc.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut cc = program(prog, &pair.rings[1 - s]);
    client(&mut cc, &port);
    let (cok, ctext) = finish(cc.spawn().unwrap(), "client");
    let (sok, stext) = finish(srv, "server");
    assert!(cok && sok, "{prog} (server on {})\nclient: {ctext}\nserver: {stext}", IP[s]);
    (ctext, stext)
}

fn rping(pair: &Pair, s: usize, size: &str) {
    let (c, _) = pair_run(
        pair,
        s,
        "/usr/bin/rping",
        |c, port| {
            c.args(["-s", "-a", IP[s], "-p", port, "-V", "-C", "100", "-S", size]);
        },
        |c, port| {
            c.args(["-c", "-a", IP[s], "-p", port, "-V", "-C", "100", "-S", size]);
        },
    );
    assert!(!c.contains("data mismatch"), "{c}");
}

#[test]
fn rping_validates_small_and_large_both_roles() {
    let pair = Pair::start();
    for s in [0, 1] {
        rping(&pair, s, "64");
        rping(&pair, s, "65535");
    }
}
