//! Debian's unmodified rdmacm-utils and perftest's `-R` mode over our
//! librdmacm.so.1 and libibverbs.so.1, between two host-simulated
//! appliances (10.0.0.1 on ring A, 10.0.0.2 on ring B) whose firmware runs
//! the real rdma_cm over the wire between them.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
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
    let mut said = text(&out);
    if !out.status.success() {
        // A program that failed without a word (a signal, an exit code)
        // still says how it ended.
        said.push_str(&format!("{what}: {}\n", out.status));
    }
    (out.status.success(), said)
}

/// Collects what `out` says, as it says it.
fn watch(out: std::process::ChildStdout) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let mut t = lock(&sink);
            t.push_str(&line);
            t.push('\n');
        }
    });
    text
}

fn lock(m: &Mutex<String>) -> std::sync::MutexGuard<'_, String> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Server `server(port)` on appliance `s`, then client `client(port)` on
/// the other; both must succeed. Returns (client, server) output.
///
/// perftest's `-R` makes two rdma_cm connections, an exchange channel and
/// then the test's, and both ends race from the first to the second: a
/// client whose second REQ comes before the server listens again is
/// refused (REJ 8) and cannot try again (perftest 4.5's retry reuses the id
/// it has just destroyed: "Failed to resolve RDMA CM address"), while its
/// server waits on for a second connection. Retrying that client alone
/// would put its first connection on the server's second listener, where
/// no receive is posted: it then waits on RNR NAKs forever. So a client
/// refused in that phase restarts the pair of programs.
fn pair_run(
    pair: &Pair,
    s: usize,
    prog: &str,
    server: impl Fn(&mut Command, &str),
    client: impl Fn(&mut Command, &str),
) -> (String, String) {
    let mut earlier = String::new();
    for _ in 0..3 {
        match try_pair_run(pair, s, prog, &server, &client) {
            Ok(out) => return out,
            Err(attempts) => {
                eprintln!("{prog}: the client was refused after the exchange channel; both start over");
                earlier.push_str(&attempts);
            }
        }
    }
    panic!("{prog} (server on {}): refused after the exchange channel three times:\n{earlier}", IP[s]);
}

/// One [`pair_run`]: `Err` with the client's attempts when it must start
/// over with a new server.
fn try_pair_run(
    pair: &Pair,
    s: usize,
    prog: &str,
    server: &impl Fn(&mut Command, &str),
    client: &impl Fn(&mut Command, &str),
) -> Result<(String, String), String> {
    let port = free_port().to_string();
    let mut sc = program(prog, &pair.rings[s]);
    server(&mut sc, &port);
    let mut srv = sc.spawn().unwrap();
    let server_out = watch(srv.stdout.take().expect("piped"));
    // perftest's server says when it listens (line-buffered: see `program`);
    // the others get half a second and the retries below.
    let ready = prog.contains("/ib_");
    let start = Instant::now();
    while ready && !lock(&server_out).contains("Waiting for client to connect") && start.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !ready {
        std::thread::sleep(Duration::from_millis(500));
    }
    // A client that came before the server listened is refused (REJ
    // reason 8, no such service; SIDR status 1): it tries again.
    let start = Instant::now();
    let mut attempts = String::new();
    let (cok, ctext) = loop {
        let mut cc = program(prog, &pair.rings[1 - s]);
        client(&mut cc, &port);
        let (ok, t) = finish(cc.spawn().unwrap(), "client");
        attempts.push_str(&format!("--- client attempt at {:?}:\n{t}", start.elapsed()));
        let refused = t.contains("REJECTED; error: 8")
            || t.contains("REJECTED, error: 8")
            || t.contains("UNREACHABLE, error: 1")
            || t.contains("Unexpected CM event bl blka 8");
        if !ok && refused && t.contains("Failed to create RDMA CM connection") {
            // Refused on the test's connection, after the exchange channel.
            let _ = srv.kill();
            let _ = srv.wait();
            return Err(attempts);
        }
        if ok || !refused || start.elapsed() > PATIENCE {
            break (ok, t);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let (sok, stext) = finish(srv, "server");
    let stext = format!("{}{stext}", lock(&server_out));
    assert!(
        cok && sok,
        "{prog} (server on {})\nclient: {ctext}\nserver: {stext}\nevery client attempt:\n{attempts}",
        IP[s]
    );
    Ok((ctext, stext))
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

/// A fresh pair per run, as for ucmatose below (stale-connection REJs).
#[test]
fn rping_validates_small_and_large_both_roles() {
    for s in [0, 1] {
        for size in ["64", "65535"] {
            rping(&Pair::start(), s, size);
        }
    }
}

/// ucmatose (RC) and udaddy (UD, SIDR): two connections each, the default
/// messages, server on each appliance in turn. A fresh pair per run: the
/// firmware hands out the QPNs just freed again, and the peer's CM still
/// holds the last run's connections in timewait (a REQ from the same QPN
/// is refused as stale, REJ reason 10), where Linux's increasing QPNs
/// would not meet them.
#[test]
fn ucmatose_and_udaddy_both_roles() {
    for prog in ["/usr/bin/ucmatose", "/usr/bin/udaddy"] {
        for s in [0, 1] {
            let pair = Pair::start();
            let (c, srv) = pair_run(
                &pair,
                s,
                prog,
                // udaddy's -p is the port space: it keeps its default port.
                |c, port| {
                    c.args(["-c", "2", "-b", IP[s]]);
                    if prog.ends_with("ucmatose") {
                        c.args(["-p", port]);
                    }
                },
                |c, port| {
                    c.args(["-c", "2", "-s", IP[s]]);
                    if prog.ends_with("ucmatose") {
                        c.args(["-p", port]);
                    }
                },
            );
            assert!(c.contains("test complete") && srv.contains("test complete"), "{prog}:\n{c}\n{srv}");
        }
    }
}

/// perftest with `-R`: QPs connected and parameters exchanged by rdma_cm.
fn perftest_cm(pair: &Pair, prog: &str, args: &[&str], s: usize) -> String {
    let (c, _) = pair_run(
        pair,
        s,
        prog,
        |c, port| {
            c.args(["-d", "rxe0", "-R", "-F", "-p", port]).args(args);
        },
        |c, port| {
            c.args(["-d", "rxe0", "-R", "-F", "-p", port]).args(args).arg(IP[s]);
        },
    );
    c
}

/// A fresh pair per run, as for ucmatose. (It used to hang about one run
/// in six: a client refused on perftest's second connection was retried
/// alone; see [`pair_run`].)
#[test]
fn perftest_write_and_send_bw_over_rdma_cm_both_roles() {
    for s in [0, 1] {
        for prog in ["/usr/bin/ib_write_bw", "/usr/bin/ib_send_bw"] {
            let pair = Pair::start();
            let t = perftest_cm(&pair, prog, &["-n", "200", "-s", "65536"], s);
            assert!(t.contains("BW average"), "{prog}: {t}");
        }
    }
}

/// A program's exit gives both its slots back (librdmacm's and
/// libibverbs', each library detaches at exit) instead of leaving them
/// taken until their leases run out: each says it was left by a detach,
/// whether free again or already ours.
#[test]
fn a_program_that_exits_detaches_both_its_slots() {
    use verbs_ring::abi::{ctx_state, reclaim_reason};
    let pair = Pair::start();
    // A client with nothing to connect to: refused, it exits at once.
    let port = free_port().to_string();
    let child =
        program("/usr/bin/ucmatose", &pair.rings[0]).args(["-s", IP[1], "-p", &port, "-c", "1"]).spawn().unwrap();
    let (ok, out) = finish(child, "ucmatose");
    assert!(!ok && out.contains("REJECTED"), "{out}");
    let ctx = verbs::Context::open(&pair.rings[0]).unwrap();
    let start = Instant::now();
    let left: Vec<u32> = loop {
        let slots = ctx.slots();
        let left: Vec<u32> = slots
            .iter()
            .filter(|s| {
                // A fresh pair: a slot used before was the program's (a
                // detach clears the pid, a lease expiry leaves it).
                s.generation > 0 && (s.state == ctx_state::FREE || s.pid == std::process::id())
            })
            .map(|s| s.reclaim_reason)
            .collect();
        if left.len() == 2 {
            break left;
        }
        assert!(start.elapsed() < PATIENCE, "{slots:?}");
        std::thread::sleep(Duration::from_millis(1));
    };
    let names: Vec<&str> = left.iter().map(|r| reclaim_reason::name(*r)).collect();
    assert_eq!(names, [reclaim_reason::name(reclaim_reason::DETACHED); 2]);
}
