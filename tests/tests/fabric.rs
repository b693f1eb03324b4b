//! An N-node fabric on one L2 segment: four appliances and a Linux rdma_rxe
//! peer on a `vde_switch`, this process the host of every appliance's ring.
//!
//! - Full-mesh RC between the appliances (a QP pair per pair of nodes),
//!   RDMA WRITEs on every QP at once, each landed message checked byte for
//!   byte in the target's memory, and READs back.
//! - Meanwhile each appliance runs `ibv_rc_pingpong -c` against Linux's, so
//!   the Linux node carries traffic with every appliance on the same switch.
//! - Every appliance's neighbour table holds every other node.
//! - One node is killed mid-run, with WRITEs towards it in flight: its peers'
//!   QPs complete them with RETRY_EXC_ERR (the configured timeout and retry
//!   count: 4.096 us * 2^14 * 8 tries, about 0.5 s) and flush the rest. It
//!   boots again with the same addresses, its peers open new QPs to it, and
//!   the whole mesh carries checked traffic again.
//!
//! Long (five QEMUs under TCG): `make fabric`, and `make interop`.

#![deny(unsafe_code)]

use std::time::{Duration, Instant};

use tests::rc::connect;
use tests::{Appliance, Ivshmem, LinuxPeer, Nic, Options, PeerOptions, VdeSwitch};
use verbs::{AccessFlags, Context, Cq, Device, MemoryRegion, Pd, Qp, QpInitAttr, SendFlags, SendWr, WcStatus, WrOp};

const NODES: u8 = 4;
/// The Linux peer is 10.0.0.5.
const LINUX: u8 = 5;
const REGION: u64 = 32 << 20;
/// `IBV_MTU_1024`, for the switch's 1500-byte frames.
const IBV_MTU_1024: u32 = 3;
/// Each node's memory, in slots of SLOT bytes: slot k holds what node k+1
/// wrote here; slot NODES + k stages this node's message to node k+1; slot
/// 2 * NODES + k takes what it READs back from node k+1.
const SLOT: usize = 64 << 10;
const MR_LEN: usize = 3 * SLOT * NODES as usize;
/// A bound on waits for what must happen; not a timing check.
const WAIT: Duration = Duration::from_secs(120);
const ROUNDS: u32 = 6;
/// The Linux node's pingpong servers listen on PP_PORT, PP_PORT + 1, ...
const PP_PORT: usize = 18600;
const IBV_WC_RETRY_EXC_ERR: WcStatus = WcStatus(12);
const IBV_WC_WR_FLUSH_ERR: WcStatus = WcStatus(5);

fn mac(n: u8) -> String {
    format!("52:54:00:00:00:{n:02x}")
}

fn boot(switch: &VdeSwitch, n: u8) -> (Appliance, Ivshmem) {
    let shm = Ivshmem::temp(&format!("fabric-{n}"), REGION);
    let mut a = Appliance::boot(Options {
        nic: Some(Nic::on_switch(&mac(n), switch)),
        append: format!("ip=10.0.0.{n}/24"),
        ivshmem: Some(shm.clone()),
        cmd_timeout: WAIT,
        ..Options::default()
    })
    .unwrap_or_else(|e| panic!("node {n}: {e}"));
    let out = a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap();
    assert!(out.contains("rxe0: set active"), "node {n}: {out}");
    (a, shm)
}

/// The message node `from` writes to node `to` in round `round`.
fn message(from: u8, to: u8, round: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(round * 7 + u32::from(from) * 3 + u32::from(to)) as u8)
        .collect()
}

/// The host's objects on one node: its PD, its memory (one slot per
/// writer) and a CQ per QP.
struct Objects<'d> {
    pd: Pd<'d>,
    cqs: Vec<Cq<'d>>,
}

fn objects(dev: &Device) -> Objects<'_> {
    let pd = dev.alloc_pd().unwrap();
    let cqs = (0..NODES).map(|_| dev.create_cq(64, 0).unwrap()).collect();
    Objects { pd, cqs }
}

/// Posts one signaled request and returns; the caller waits for it.
fn post(qp: &Qp<'_>, wr_id: u64, op: WrOp, sge: &[verbs::Sge]) {
    qp.post_send(&[SendWr { wr_id, op, sg_list: sge, flags: SendFlags::SIGNALED, ud: None }]).unwrap();
}

/// What one directed pair needs: the writer's QP and memory, the target's memory.
struct Link<'a> {
    from: u8,
    to: u8,
    qp: &'a Qp<'a>,
    cq: &'a Cq<'a>,
    src: &'a MemoryRegion<'a>,
    dst: &'a MemoryRegion<'a>,
}

/// `rounds` rounds of a WRITE on every link at once, each landed message
/// checked in the target's memory, then a READ back of it checked too;
/// returns the bytes checked.
fn traffic(links: &[Link<'_>], first_round: u32, rounds: u32) -> usize {
    let mut checked = 0;
    for round in first_round..first_round + rounds {
        let len = [4096, 65536, 1000, 30000][round as usize % 4];
        for l in links {
            let at = SLOT * usize::from(NODES + l.to - 1);
            l.src.write(at, &message(l.from, l.to, round, len)).unwrap();
            let sge = [l.src.sge(at, len as u32).unwrap()];
            let op =
                WrOp::Write { remote_addr: l.dst.addr() + (SLOT * usize::from(l.from - 1)) as u64, rkey: l.dst.rkey() };
            post(l.qp, u64::from(round), op, &sge);
        }
        for l in links {
            let wc = l.cq.wait(WAIT).unwrap();
            assert!(wc.status.is_success(), "{} -> {} round {round}: {}", l.from, l.to, wc.status);
            let mut got = vec![0; len];
            l.dst.read(SLOT * usize::from(l.from - 1), &mut got).unwrap();
            assert!(got == message(l.from, l.to, round, len), "{} -> {} round {round}: data differ", l.from, l.to);
            checked += len;
        }
        // READ back into the writer's memory past its own slot.
        for l in links {
            let back = SLOT * usize::from(2 * NODES + l.to - 1);
            l.src.write(back, &vec![0; len]).unwrap();
            let sge = [l.src.sge(back, len as u32).unwrap()];
            let op =
                WrOp::Read { remote_addr: l.dst.addr() + (SLOT * usize::from(l.from - 1)) as u64, rkey: l.dst.rkey() };
            post(l.qp, u64::from(round), op, &sge);
        }
        for l in links {
            let wc = l.cq.wait(WAIT).unwrap();
            assert!(wc.status.is_success(), "{} <- {} READ round {round}: {}", l.from, l.to, wc.status);
            let mut got = vec![0; len];
            l.src.read(SLOT * usize::from(2 * NODES + l.to - 1), &mut got).unwrap();
            assert!(got == message(l.from, l.to, round, len), "{} <- {} READ round {round}: data differ", l.from, l.to);
            checked += len;
        }
    }
    checked
}

/// Every node's objects and a connected QP from each node to every other;
/// `body` gets the links a filter (`from`, `to`) keeps. Everything is
/// destroyed when `body` returns.
fn with_mesh<R>(
    ctxs: &[Context],
    body: impl for<'m> FnOnce(&'m dyn Fn(&dyn Fn(u8, u8) -> bool) -> Vec<Link<'m>>) -> R,
) -> R {
    let n = ctxs.len();
    let devs: Vec<Device> = ctxs.iter().map(|c| c.device(Some("rxe0")).unwrap()).collect();
    let objs: Vec<Objects> = devs.iter().map(objects).collect();
    let mrs: Vec<MemoryRegion> = objs.iter().map(|o| o.pd.reg_mr(MR_LEN, AccessFlags::ALL_REMOTE).unwrap()).collect();
    // qps[i][j]: node i+1's QP towards node j+1, on CQ j of node i+1.
    let qps: Vec<Vec<Option<Qp>>> = (0..n)
        .map(|i| {
            let o = &objs[i];
            (0..n)
                .map(|j| {
                    (i != j).then(|| Qp::create(&o.pd, &o.cqs[j], &o.cqs[j], None, &QpInitAttr::default()).unwrap())
                })
                .collect()
        })
        .collect();
    for (i, row) in qps.iter().enumerate() {
        for (j, me) in row.iter().enumerate() {
            if let (Some(me), Some(peer)) = (me, &qps[j][i]) {
                connect(me, peer.qp_num(), j as u8 + 1, IBV_MTU_1024).unwrap();
            }
        }
    }
    let links = |keep: &dyn Fn(u8, u8) -> bool| -> Vec<Link> {
        let mut v = Vec::new();
        for i in 0..n {
            for j in 0..n {
                let (from, to) = (i as u8 + 1, j as u8 + 1);
                if let Some(qp) = qps[i][j].as_ref().filter(|_| keep(from, to)) {
                    v.push(Link { from, to, qp, cq: &objs[i].cqs[j], src: &mrs[i], dst: &mrs[j] });
                }
            }
        }
        v
    };
    body(&links)
}

/// Each appliance's client against the Linux node's `ibv_rc_pingpong -c` server, started.
fn pingpong_with_linux(linux: &mut LinuxPeer, apps: &mut [(u8, &mut Appliance)]) -> Vec<(u8, tests::Running)> {
    // One server per client, each on its own TCP port, all listening
    // (LISTEN is state 0A in /proc/net/tcp) before the clients start.
    for k in 0..apps.len() {
        let port = PP_PORT + k;
        linux
            .spawn_bg(&format!("ibv_rc_pingpong -d rxe0 -g 1 -c -n 300 -p {port}"), &format!("/tmp/pp{port}.log"))
            .unwrap();
        let listening = format!(
            "for i in $(seq 300); do grep -q ':{port:04X} 00000000:0000 0A' /proc/net/tcp && break; sleep 0.2; done; \
             grep -c ':{port:04X} 00000000:0000 0A' /proc/net/tcp"
        );
        let out = linux.cmd(&listening).unwrap();
        assert_eq!(out.trim(), "1", "Linux's server on port {port} does not listen");
    }
    let mut running = Vec::new();
    for (k, (n, app)) in apps.iter_mut().enumerate() {
        let line = format!("ibv_rc_pingpong -g 1 -c -n 300 -p {} 10.0.0.{LINUX}", PP_PORT + k);
        running.push((*n, app.start_cmd(&line, "local address:").unwrap()));
    }
    running
}

fn finish_pingpongs(
    linux: &mut LinuxPeer,
    apps: &mut [(u8, &mut Appliance)],
    running: Vec<(u8, tests::Running)>,
) -> usize {
    let mut iters = 0;
    for (k, ((n, app), (m, r))) in apps.iter_mut().zip(running).enumerate() {
        assert_eq!(*n, m);
        let out = app.finish_cmd(r).unwrap();
        if !out.contains("300 iters in") {
            let server = linux.cmd(&format!("sleep 1; cat /tmp/pp{}.log", PP_PORT + k)).unwrap_or_default();
            panic!("node {n} against Linux:\n{out}\nLinux's server:\n{server}");
        }
        iters += 300;
    }
    iters
}

/// Every other node answers and sits in the neighbour table.
fn neighbours_complete(app: &mut Appliance, n: u8) {
    for m in (1..=NODES).chain([LINUX]).filter(|&m| m != n) {
        // Three tries: a rebooted node has lost its cache, and smoltcp drops
        // the echo reply whose sending starts the resolution of the asker
        // (Linux would queue it), so the first echo can go unanswered.
        let out = app.cmd(&format!("ping 10.0.0.{m} -c 3 -i 200")).unwrap();
        assert!(!out.contains(" 0 received"), "node {n} -> 10.0.0.{m}:\n{out}");
    }
    let table = app.cmd("ip neigh").unwrap();
    for m in (1..=NODES).chain([LINUX]).filter(|&m| m != n) {
        let want = format!("10.0.0.{m} dev eth0 lladdr ");
        assert!(table.lines().any(|l| l.starts_with(&want)), "node {n} has no neighbour 10.0.0.{m}:\n{table}");
    }
}

#[test]
#[ignore = "five QEMUs on a vde_switch; make fabric / make interop"]
fn four_appliances_and_linux_on_one_switch_full_mesh_and_a_reboot() {
    if !VdeSwitch::available() {
        panic!("vde_switch is missing: make deps-vde (Debian's vde2)");
    }
    if !LinuxPeer::available_or_skip("fabric") {
        return;
    }
    let started = Instant::now();
    let switch = VdeSwitch::start("fabric", 16).unwrap();
    let mut linux =
        LinuxPeer::start(PeerOptions::new(Nic::on_switch("52:54:00:00:01:05", &switch), "10.0.0.5/24")).unwrap();
    let mut apps: Vec<(Appliance, Ivshmem)> = (1..=NODES).map(|n| boot(&switch, n)).collect();
    linux.wait_ready().unwrap();
    for (k, (app, _)) in apps.iter_mut().enumerate() {
        neighbours_complete(app, k as u8 + 1);
    }
    println!("fabric: {NODES} appliances and Linux up, neighbour tables full, {:.0?}", started.elapsed());

    let mut ctxs: Vec<Context> = apps.iter().map(|(_, shm)| Context::open(&shm.path).unwrap()).collect();
    let victim = NODES;
    with_mesh(&ctxs, |links| {
        // The mesh at full load, with every appliance pinging-ponging with Linux.
        let t = Instant::now();
        let mut consoles: Vec<(u8, &mut Appliance)> =
            apps.iter_mut().enumerate().map(|(k, (a, _))| (k as u8 + 1, a)).collect();
        let running = pingpong_with_linux(&mut linux, &mut consoles);
        let mesh = links(&|_, _| true);
        let checked = traffic(&mesh, 0, ROUNDS);
        let linux_iters = finish_pingpongs(&mut linux, &mut consoles, running);
        println!(
            "fabric: {} QPs on {} links, {ROUNDS} rounds of WRITE + READ back: {} messages, {checked} bytes \
             checked; {linux_iters} pingpong iterations with Linux; {:.1?}",
            mesh.len(),
            mesh.len() / 2,
            2 * ROUNDS as usize * mesh.len(),
            t.elapsed()
        );
        drop(consoles);

        // The victim dies with WRITEs towards it in flight.
        let towards = links(&|_, to| to == victim);
        drop(apps.pop());
        let killed = Instant::now();
        for l in &towards {
            let sge = [l.src.sge(0, 4096).unwrap()];
            for k in 0..4 {
                post(l.qp, k, WrOp::Write { remote_addr: l.dst.addr(), rkey: l.dst.rkey() }, &sge);
            }
        }
        for l in &towards {
            let first = l.cq.wait(WAIT).unwrap();
            assert_eq!(first.status, IBV_WC_RETRY_EXC_ERR, "{} -> {}: {}", l.from, l.to, first.status);
            for _ in 1..4 {
                let wc = l.cq.wait(WAIT).unwrap();
                assert_eq!(wc.status, IBV_WC_WR_FLUSH_ERR, "{} -> {}: {}", l.from, l.to, wc.status);
            }
        }
        println!(
            "fabric: node {victim} killed; its {} peers' QPs reached RETRY_EXC_ERR in {:.1?}",
            towards.len(),
            killed.elapsed()
        );
        // The rest of the mesh is unaffected.
        let survivors = links(&|from, to| from != victim && to != victim);
        let checked = traffic(&survivors, ROUNDS, 2);
        println!("fabric: the {} survivors' links checked {checked} bytes meanwhile", survivors.len());
    });
    // The victim's host objects went with its firmware.
    drop(ctxs.pop());

    // It returns with the same MAC and IP; every node opens new QPs to every
    // other and the whole mesh carries checked traffic again.
    let t = Instant::now();
    apps.push(boot(&switch, victim));
    println!("fabric: node {victim} back in {:.1?}", t.elapsed());
    ctxs.push(Context::open(&apps[usize::from(victim - 1)].1.path).unwrap());
    for (k, (app, _)) in apps.iter_mut().enumerate() {
        neighbours_complete(app, k as u8 + 1);
    }
    with_mesh(&ctxs, |links| {
        let mut consoles: Vec<(u8, &mut Appliance)> =
            apps.iter_mut().enumerate().map(|(k, (a, _))| (k as u8 + 1, a)).collect();
        let running = pingpong_with_linux(&mut linux, &mut consoles);
        let mesh = links(&|_, _| true);
        let checked = traffic(&mesh, ROUNDS + 2, ROUNDS);
        let linux_iters = finish_pingpongs(&mut linux, &mut consoles, running);
        println!(
            "fabric: after the reboot the full mesh checked {checked} bytes, {linux_iters} pingpong iterations \
             with Linux; {:.0?} in all",
            started.elapsed()
        );
    });
}
