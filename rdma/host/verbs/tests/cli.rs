//! The CLI tools end to end against an in-process appliance (firmware
//! logic + loopback transport): `rdma`, `ibv_devinfo`, `show_gids`, and
//! `rc_pingpong` and the perf tools as client/server process pairs. Every
//! child process is killed if it outlives its deadline.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Appliance;

fn exe(name: &str) -> &'static str {
    match name {
        "rdma" => env!("CARGO_BIN_EXE_rdma"),
        "ibv_devinfo" => env!("CARGO_BIN_EXE_ibv_devinfo"),
        "ibv_devices" => env!("CARGO_BIN_EXE_ibv_devices"),
        "show_gids" => env!("CARGO_BIN_EXE_show_gids"),
        "rc_pingpong" => env!("CARGO_BIN_EXE_rc_pingpong"),
        "send_bw" => env!("CARGO_BIN_EXE_send_bw"),
        "write_bw" => env!("CARGO_BIN_EXE_write_bw"),
        "read_bw" => env!("CARGO_BIN_EXE_read_bw"),
        "atomic_bw" => env!("CARGO_BIN_EXE_atomic_bw"),
        "send_lat" => env!("CARGO_BIN_EXE_send_lat"),
        "write_lat" => env!("CARGO_BIN_EXE_write_lat"),
        "read_lat" => env!("CARGO_BIN_EXE_read_lat"),
        "atomic_lat" => env!("CARGO_BIN_EXE_atomic_lat"),
        "rping" => env!("CARGO_BIN_EXE_rping"),
        _ => unreachable!(),
    }
}

fn tool(name: &str, ring: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(exe(name));
    c.arg("--ring").arg(ring).args(args).env_remove("RDMA_RING");
    c
}

/// `name ARGS... --ring RING`, with `$RDMA_RING` naming a file that does not
/// exist: a tool that ignored a late `--ring` would fail to map that one.
fn tool_ring_last(name: &str, ring: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(exe(name));
    c.args(args).arg("--ring").arg(ring).env("RDMA_RING", "/nonexistent/ring-from-env");
    c
}

/// The bound on waiting for a tool or for the appliance: generous, because a
/// busy machine can starve a child process for seconds; not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

/// Wait for `child` at most `t`, killing it past that.
fn finish(mut child: Child, t: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > t {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("timed out; stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Run to completion; (success, stdout, stderr).
fn run(name: &str, ring: &Path, args: &[&str]) -> (bool, String, String) {
    let child = tool(name, ring, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let out = finish(child, PATIENCE);
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Server and client of one tool; both outputs.
fn pair(name: &str, ring: &Path, args: &[&str]) -> (String, String) {
    let port = free_port().to_string();
    let mut sargs = vec!["-p", &port];
    if name != "rc_pingpong" {
        sargs.extend(["--bind", "127.0.0.1"]);
    }
    sargs.extend_from_slice(args);
    let server = tool(name, ring, &sargs).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut cargs = sargs.clone();
    cargs.push("127.0.0.1");
    let client = tool(name, ring, &cargs).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let c = finish(client, PATIENCE);
    let s = finish(server, PATIENCE);
    assert!(c.status.success(), "{name} client failed:\n{}{}", text(&c.stdout), text(&c.stderr));
    assert!(s.status.success(), "{name} server failed:\n{}{}", text(&s.stdout), text(&s.stderr));
    (text(&s.stdout), text(&c.stdout))
}

/// rping server and client over the test appliance's loopback CM: the
/// READ/WRITE exchange with data checked, rping's output lines, and a
/// refused connection's message.
#[test]
fn rping_pings_through_the_cm_and_checks_data() {
    let app = Appliance::start();
    let ring = &app.path;
    // 64 KiB runs without -v: its lines would fill the pipes nobody reads
    // until the processes exit.
    for (size, extra) in [("64", ["-v", "-v"]), ("64", ["-v", "-q"]), ("65535", ["-V", "-q"])] {
        let verbose = extra[0] == "-v";
        let port = free_port().to_string();
        let mut sargs = vec!["-s", "-a", "10.0.0.1", "-p", &port, "-S", size];
        sargs.extend(extra);
        let server = tool("rping", ring, &sargs).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // Until the server listens, a connect is rejected: retry.
        let start = Instant::now();
        let (c_ok, c_out, c_err) = loop {
            let mut cargs = vec!["-c", "-V", "-C", "5", "-a", "10.0.0.1", "-p", &port, "-S", size];
            cargs.extend(extra);
            let r = run("rping", ring, &cargs);
            if r.0 || !r.2.contains("RDMA_CM_EVENT_REJECTED") || start.elapsed() > PATIENCE {
                break r;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if !c_ok {
            let mut server = server;
            let _ = server.kill();
            panic!("client {extra:?} failed:\n{c_out}{c_err}");
        }
        let s = finish(server, PATIENCE);
        assert!(s.status.success(), "server failed:\n{}{}", text(&s.stdout), text(&s.stderr));
        assert!(text(&s.stderr).contains("server DISCONNECT EVENT..."), "{}", text(&s.stderr));
        if !verbose {
            assert_eq!(c_out, "");
            continue;
        }
        let lines: Vec<&str> = c_out.lines().collect();
        assert_eq!(lines.len(), 5, "{c_out}");
        assert!(lines[0].starts_with("ping data: rdma-ping-0: ABCDEFGHIJ"), "{}", lines[0]);
        assert!(lines[4].starts_with("ping data: rdma-ping-4: EFGH"), "{}", lines[4]);
        assert_eq!(lines[0].len(), "ping data: ".len() + 63);
        let sout = text(&s.stdout);
        assert!(sout.lines().nth(3).is_some_and(|l| l.starts_with("server ping data: rdma-ping-3: DEF")), "{sout}");
    }
    // Nobody listens on this port: rping's REJECTED line, nonzero exit.
    let port = free_port().to_string();
    let (ok, _, err) = run("rping", ring, &["-c", "-a", "10.0.0.1", "-p", &port, "-C", "1"]);
    assert!(!ok);
    assert!(err.contains("cma event RDMA_CM_EVENT_REJECTED, error 8"), "{err}");
    let (ok, _, err) = run("rping", ring, &["-c", "-a", "10.0.0.1", "-S", "10"]);
    assert!(!ok && err.contains("Invalid size 10 (valid range is 23 to 65536)"), "{err}");
    app.wait_for("every CM id destroyed", PATIENCE, |s| s.p.cm.live() == 0);
}

#[test]
fn rdma_tool() {
    let app = Appliance::start();
    let ring = &app.path;
    let (ok, out, _) = run("rdma", ring, &["link", "show"]);
    assert!(ok);
    // iproute2 ends every field with a blank, the last one too.
    assert_eq!(out, "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0 \n");
    let (ok, _, err) = run("rdma", ring, &["link", "add", "rxe1", "type", "rxe", "netdev", "eth1"]);
    assert!(ok, "{err}");
    let (_, out, _) = run("rdma", ring, &["l"]);
    assert_eq!(out.lines().count(), 2);
    assert!(out.contains("link rxe1/1 state ACTIVE physical_state LINK_UP netdev eth1"));
    let (ok, _, err) = run("rdma", ring, &["link", "add", "rxe1", "type", "rxe", "netdev", "eth1"]);
    assert!(!ok);
    assert_eq!(err, "error: File exists\n", "as Linux's iproute2 says it");
    let (_, out, _) = run("rdma", ring, &["dev"]);
    assert_eq!(
        out.lines().next().unwrap(),
        "0: rxe0: node_type ca node_guid 5054:00ff:fe00:0001 sys_image_guid 5054:00ff:fe00:0001 "
    );
    let (_, out, _) = run("rdma", ring, &["resource", "show"]);
    assert_eq!(out.lines().next().unwrap(), "0: rxe0: pd 0 cq 0 qp 0 cm_id 0 mr 0 ctx 0 srq 0 ");
    let (_, out, _) = run("rdma", ring, &["statistic", "show", "link", "rxe0/1"]);
    assert!(out.starts_with("link rxe0/1 sent_pkts 0 rcvd_pkts 0 duplicate_request 0"), "{out}");
    let (ok, _, _) = run("rdma", ring, &["link", "delete", "rxe1"]);
    assert!(ok);
    let (ok, _, err) = run("rdma", ring, &["link", "show", "rxe1"]);
    assert!(!ok);
    assert!(err.contains("no RDMA device named \"rxe1\""), "{err}");
    let (ok, _, err) = run("rdma", Path::new("/nonexistent"), &["link"]);
    assert!(!ok);
    assert!(err.starts_with("rdma: cannot map ring /nonexistent:"), "{err}");
}

/// `rdma resource show qp|cq|mr|pd`, filters, `-j`, `-d`, `system`: a
/// waiting `rc_pingpong` server's objects listed with its pid and comm.
/// (The loopback provider has no QP1 of its own: tests/tests/golden.rs
/// checks the firmware's.)
#[test]
fn rdma_resource_listings() {
    let app = Appliance::start();
    let ring = &app.path;
    let port = free_port().to_string();
    let mut server = tool("rc_pingpong", ring, &["-g", "1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = server.id();
    let start = std::time::Instant::now();
    let qps = loop {
        let (ok, out, err) = run("rdma", ring, &["resource", "show", "qp"]);
        assert!(ok, "{err}");
        // Created in RESET, then moved to INIT, where the server waits.
        if out.lines().any(|l| l.contains("comm rc_pingpong") && l.contains(" state INIT ")) {
            break out;
        }
        assert!(start.elapsed() < PATIENCE, "no QP of rc_pingpong:\n{out}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mine = qps.lines().find(|l| l.contains("rc_pingpong") && l.contains(" state INIT ")).unwrap();
    // The loopback provider's QUERY_QP names no port (`rxe0/-`); the
    // firmware's does (golden.rs).
    assert!(mine.starts_with("link rxe0/"), "{mine}");
    assert!(mine.contains(" type RC state INIT "), "{mine}");
    assert!(mine.ends_with(&format!(" pid {pid} comm rc_pingpong ")), "{mine}");
    let lqpn = mine.split(' ').nth(3).unwrap();
    let (_, one, _) = run("rdma", ring, &["resource", "show", "qp", "lqpn", lqpn]);
    assert_eq!(one, format!("{mine}\n"));
    let (_, none, _) = run("rdma", ring, &["resource", "show", "qp", "lqpn", "0"]);
    assert_eq!(none, "");
    let (_, by_pid, _) = run("rdma", ring, &["res", "show", "qp", "dev", "rxe0", "pid", &pid.to_string()]);
    assert_eq!(by_pid, format!("{mine}\n"));
    for kind in ["cq", "mr", "pd"] {
        let (ok, out, err) = run("rdma", ring, &["resource", "show", kind]);
        assert!(
            ok && out.lines().count() == 1 && out.contains(&format!("pid {pid} comm rc_pingpong")),
            "{kind}: {out}{err}"
        );
    }
    let (_, summary, _) = run("rdma", ring, &["resource"]);
    assert_eq!(summary, "0: rxe0: pd 1 cq 1 qp 1 cm_id 0 mr 1 ctx 1 srq 0 \n");
    let (_, json, _) = run("rdma", ring, &["-j", "resource", "show", "pd"]);
    assert!(json.starts_with("[{\"ifindex\":0,\"ifname\":\"rxe0\",\"pdn\":"), "{json}");
    assert!(json.ends_with(&format!("\"pid\":{pid},\"comm\":\"rc_pingpong\"}}]\n")), "{json}");
    let (_, pretty, _) = run("rdma", ring, &["-j", "-p", "link"]);
    assert!(pretty.starts_with("[ {\n        \"ifindex\": 0,\n"), "{pretty}");
    let (_, details, _) = run("rdma", ring, &["-d", "link"]);
    assert_eq!(details, "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0 netdev_index 2 \n");
    let (ok, _, err) = run("rdma", ring, &["resource", "show", "qp", "bogus", "1"]);
    assert!(!ok && err.contains("Unknown filter \"bogus\""), "{err}");
    let (_, sys, _) = run("rdma", ring, &["system"]);
    assert_eq!(sys, "netns shared copy-on-fork on\n");
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn devinfo_and_gids() {
    let app = Appliance::start();
    let (ok, out, err) = run("ibv_devinfo", &app.path, &[]);
    assert!(ok, "{err}");
    assert!(out.starts_with("hca_id:\trxe0\n\ttransport:\t\t\tInfiniBand (0)\n"), "{out}");
    assert!(out.contains("\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"), "{out}");
    assert!(out.contains("\t\t\tactive_mtu:\t\t1024 (3)\n"), "{out}");
    assert!(out.contains("\t\t\tlink_layer:\t\tEthernet\n"), "{out}");
    let (_, out, _) = run("ibv_devinfo", &app.path, &["-v", "-d", "rxe0"]);
    assert!(out.contains("\tmax_qp:\t\t\t\t64\n"), "{out}");
    assert!(out.contains("\tatomic_cap:\t\t\tATOMIC_HCA (1)\n"), "{out}");
    assert!(out.contains("GID[  0]:\t\tfe80::5054:ff:fe00:1, RoCE v2"), "{out}");
    assert!(out.contains("GID[  1]:\t\t::ffff:10.0.0.1, RoCE v2"), "{out}");
    assert!(out.contains("\tnum_comp_vectors:\t\t"), "{out}");
    let (_, out, _) = run("ibv_devinfo", &app.path, &["-l"]);
    assert_eq!(out, "1 HCA found:\n\trxe0\n\n");
    let (ok, _, err) = run("ibv_devinfo", &app.path, &["-d", "nope"]);
    assert!(!ok && err.contains("ENODEV"), "{err}");

    let (ok, out, _) = run("show_gids", &app.path, &[]);
    assert!(ok);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert_eq!(lines[0], "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV");
    assert_eq!(lines[2], "rxe0\t1\t0\tfe80:0000:0000:0000:5054:00ff:fe00:0001\t\t\tv2\teth0");
    assert_eq!(lines[3], "rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1  \tv2\teth0");
    assert_eq!(lines[4], "n_gids_found=2");

    let (ok, out, _) = run("ibv_devices", &app.path, &[]);
    assert!(ok);
    assert_eq!(
        out,
        "    device          \t   node GUID\n    ------          \t----------------\n    rxe0            \t505400fffe000001\n"
    );
}

#[test]
fn rc_pingpong_checks_data_in_both_directions() {
    let app = Appliance::start();
    for size in ["1", "4096", "65536"] {
        let (s, c) = pair("rc_pingpong", &app.path, &["-c", "-g", "1", "-s", size, "-n", "50", "-r", "16"]);
        for out in [&s, &c] {
            assert!(!out.contains("invalid data in page"), "{out}");
            assert!(out.contains("  local address:  LID 0x0000, QPN 0x"), "{out}");
            assert!(out.contains("GID ::ffff:10.0.0.1"), "{out}");
            assert!(out.contains(&format!("{} bytes in", size.parse::<u64>().unwrap() * 100)), "{out}");
            assert!(out.contains("50 iters in"), "{out}");
        }
    }
    // Without a GID on RoCE, the tool says what is missing.
    let (ok, _, err) = run("rc_pingpong", &app.path, &["-p", &free_port().to_string()]);
    assert!(!ok && err.contains("use -g GID_INDEX"), "{err}");
    // Every object of both processes is gone.
    app.wait_for("pingpong objects released", PATIENCE, |fw| {
        fw.dispatcher().count(None, verbs_ring::dispatch::ObjKind::Qp) == 0
    });
}

#[test]
fn perf_tools_print_their_tables() {
    let app = Appliance::start();
    for (name, extra) in [
        ("send_bw", &["-s", "4096"][..]),
        ("write_bw", &["-s", "4096"][..]),
        ("read_bw", &["-s", "4096"][..]),
        ("atomic_bw", &["-A", "CMP_AND_SWAP"][..]),
        ("atomic_bw", &[][..]),
    ] {
        let mut args = vec!["-n", "200", "-t", "16"];
        args.extend_from_slice(extra);
        let (s, c) = pair(name, &app.path, &args);
        assert!(c.contains("#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"), "{c}");
        let size = if name == "atomic_bw" { "8" } else { "4096" };
        let result = |out: &str| out.lines().find(|l| l.starts_with(&format!(" {size:<10} 200"))).map(str::to_owned);
        let line = result(&c).unwrap_or_else(|| panic!("{name}:\n{c}"));
        assert!(s.contains("Device         : rxe0"), "{s}");
        if name == "send_bw" {
            // The receiver measures for itself.
            assert!(result(&s).is_some(), "{name} server:\n{s}");
        } else {
            // The one-sided tests' server prints the client's figures, sent over TCP.
            assert_eq!(result(&s), Some(line), "{name} server:\n{s}");
        }
    }
    for name in ["send_lat", "write_lat"] {
        let (s, c) = pair(name, &app.path, &["-n", "100", "-s", "64"]);
        for out in [&s, &c] {
            assert!(out.contains("t_typical[usec]"), "{out}");
            assert!(out.lines().any(|l| l.starts_with(" 64      100")), "{name}:\n{out}");
        }
    }
}

/// read_lat and atomic_lat (the client measures, the server only lends its
/// memory), `-D` runs, `-c UC`, and `--out_json`'s file.
#[test]
fn perf_latency_tools_timed_runs_and_json() {
    let app = Appliance::start();
    for (name, size) in [("read_lat", "2"), ("atomic_lat", "8")] {
        let (s, c) = pair(name, &app.path, &["-n", "100"]);
        assert!(c.contains("t_typical[usec]"), "{c}");
        assert!(c.lines().any(|l| l.starts_with(&format!(" {size:<7} 100 "))), "{name}:\n{c}");
        assert!(!s.contains("t_typical[usec]") && s.contains("Outstand reads  : "), "{name} server:\n{s}");
        let (_, c) = pair(name, &app.path, &["-D", "1"]);
        assert!(c.contains(" #bytes        #iterations       t_avg[usec]    tps average"), "{name}:\n{c}");
        assert!(c.lines().any(|l| l.starts_with(&format!(" {size:<7}       "))), "{name}:\n{c}");
    }
    let (s, c) = pair("read_bw", &app.path, &["-D", "1", "-s", "4096"]);
    for out in [&s, &c] {
        let line = out.lines().find(|l| l.starts_with(" 4096       ")).unwrap_or_else(|| panic!("{out}"));
        let count: u64 = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(count > 0, "{line}");
    }
    let json = std::env::temp_dir().join(format!("perf-json-{}.json", std::process::id()));
    let arg = format!("--out_json_file={}", json.display());
    let (_, c) = pair("write_bw", &app.path, &["-n", "50", "--out_json", &arg]);
    assert!(c.contains(" 65536      50 "), "{c}");
    let text = std::fs::read_to_string(&json).unwrap();
    let _ = std::fs::remove_file(&json);
    assert!(text.starts_with("{\ntest_info: {\ntest: RDMA_Write_BW_Test,\n"), "{text}");
    assert!(text.contains("results: {\nMsgSize: 65536,\nn_iterations: 50,\nBW_peak: "), "{text}");
    assert!(text.ends_with("},\n}\n"), "{text}");
    // UC: the SEND and WRITE tests (no loss on this loopback wire).
    for name in ["send_bw", "write_bw", "send_lat", "write_lat"] {
        let (s, c) = pair(name, &app.path, &["-n", "100", "-c", "UC", "-s", "1024"]);
        for out in [&s, &c] {
            assert!(out.contains(" Connection type : UC\t\t"), "{name}:\n{out}");
        }
        let row = if name.ends_with("_bw") { " 1024       100 " } else { " 1024    100 " };
        assert!(c.contains(row), "{name}:\n{c}");
    }
    let (ok, _, err) = run("read_bw", &app.path, &["-c", "UC", "127.0.0.1"]);
    assert!(!ok && err.contains("only RC connections (-c RC) are supported"), "{err}");
    // What the tools refuse, they say.
    let (ok, _, err) = run("write_bw", &app.path, &["-q", "2", "-R", "127.0.0.1"]);
    assert!(!ok && err.contains("several QPs (-q) are not supported with -R"), "{err}");
    let (ok, _, err) = run("send_lat", &app.path, &["-n", "3"]);
    assert!(!ok && err.contains("between 5 and 100000000"), "{err}");
}

/// Every slot's (state, reason of its last reclaim), read from the region.
fn slot_states(app: &Appliance) -> Vec<(u32, u32)> {
    use verbs_ring::SharedMem;
    use verbs_ring::abi::{SLOT_RECLAIM_REASON, SLOT_STATE};
    let layout = *app.fw().layout();
    (0..layout.num_contexts())
        .map(|i| {
            let off = layout.slot_off(i).unwrap();
            let word = |at| app.mem.load_u32_acquire(off + at).unwrap();
            (word(SLOT_STATE), word(SLOT_RECLAIM_REASON))
        })
        .collect()
}

/// A tool that exits through `std::process::exit` (an error, `ibv_devinfo`'s
/// status, rc_pingpong's refusals, `rdma`'s usage) runs no destructors; it
/// still detaches its context, so the slot is free at once, not after the
/// lease expires.
#[test]
fn tools_detach_their_context_on_every_exit() {
    use verbs_ring::abi::{ctx_state, reclaim_reason};
    let app = Appliance::start();
    let port = free_port().to_string();
    for (name, args, succeeds) in [
        ("ibv_devinfo", &["-d", "rxe0"][..], true),
        ("ibv_devinfo", &["-d", "nope"][..], false),
        ("ibv_devinfo", &["-i", "9"][..], false),
        ("rdma", &["link", "show", "nope"][..], false),
        ("rdma", &["link", "frobnicate"][..], false),
        ("show_gids", &["nope"][..], false),
        ("rc_pingpong", &["-p", &port][..], false),
    ] {
        let (ok, _, err) = run(name, &app.path, args);
        assert_eq!(ok, succeeds, "{name} {args:?}: {err}");
        let start = Instant::now();
        let states = loop {
            let s = slot_states(&app);
            if s.iter().all(|&(state, _)| state == ctx_state::FREE) || start.elapsed() > PATIENCE {
                break s;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(states.iter().all(|&(state, _)| state == ctx_state::FREE), "{name} {args:?}: {states:?}");
        assert!(
            !states.iter().any(|&(_, why)| why == reclaim_reason::LEASE_EXPIRED),
            "{name} {args:?} left its slot to the lease: {states:?}"
        );
        assert!(states.iter().any(|&(_, why)| why == reclaim_reason::DETACHED), "{states:?}");
    }
}

/// Issue 17: `rdma OBJECT ... --ring FILE` used to hand `--ring FILE` to the
/// OBJECT words and open the default ring. Every tool's options count in any
/// position, and an unknown one is refused rather than taken as a word.
#[test]
fn options_count_in_any_position_for_every_tool() {
    let app = Appliance::start();
    let ring = &app.path;
    let run_last = |name: &str, args: &[&str]| {
        let child = tool_ring_last(name, ring, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let out = finish(child, PATIENCE);
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    for args in [
        &["link", "show"][..],
        &["link", "show", "rxe0/1"],
        &["dev"],
        &["resource", "show"],
        &["statistic", "show", "link", "rxe0/1"],
    ] {
        let (ok, out, err) = run_last("rdma", args);
        assert!(ok, "rdma {args:?} --ring: {err}");
        assert!(out.contains("rxe0"), "rdma {args:?} --ring: {out}");
    }
    // Between the words, too.
    let child = Command::new(exe("rdma"))
        .args(["link", "--ring"])
        .arg(ring)
        .arg("show")
        .env("RDMA_RING", "/nonexistent/ring-from-env")
        .output()
        .unwrap();
    assert!(child.status.success(), "{}", text(&child.stderr));
    assert_eq!(text(&child.stdout), "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0 \n");
    // An option the tool does not know is refused, not taken for a word.
    let (ok, out, err) = run_last("rdma", &["link", "show", "--bogus"]);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("--bogus"), "{err}");
    for (name, args) in
        [("ibv_devinfo", &["-l"][..]), ("ibv_devinfo", &["-d", "rxe0"]), ("ibv_devices", &[]), ("show_gids", &[])]
    {
        let (ok, out, err) = run_last(name, args);
        assert!(ok, "{name} {args:?} --ring: {err}");
        assert!(out.contains("rxe0"), "{name}: {out}");
    }
    // The client/server tools: `--ring` after the server's name.
    for (name, args) in
        [("rc_pingpong", &["-g", "1", "-n", "5", "-r", "4"][..]), ("send_lat", &["-n", "10", "-s", "8"])]
    {
        let port = free_port().to_string();
        let mut sargs = vec!["-p", &port];
        if name != "rc_pingpong" {
            sargs.extend(["--bind", "127.0.0.1"]);
        }
        sargs.extend_from_slice(args);
        let server = tool_ring_last(name, ring, &sargs).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut cargs = sargs.clone();
        cargs.push("127.0.0.1");
        let client = tool_ring_last(name, ring, &cargs).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let c = finish(client, PATIENCE);
        let s = finish(server, PATIENCE);
        assert!(c.status.success(), "{name} client --ring last:\n{}{}", text(&c.stdout), text(&c.stderr));
        assert!(s.status.success(), "{name} server --ring last:\n{}{}", text(&s.stdout), text(&s.stderr));
    }
}
