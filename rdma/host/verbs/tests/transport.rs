//! The library and `rc_pingpong` against the real provider: two
//! host-simulated appliances, each a `verbs_ring::Firmware` over its own
//! `shm-host` ring file with `rdma::uverbs::Uverbs` and an rxe transport
//! behind it, their transports joined by passing frames in memory. This is
//! the appliance's data path without QEMU: WQEs from the SQ/RQ rings into
//! the transport, RoCE v2 frames across, CQEs back into the CQ rings.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdma::core::{MacAddr, NetdevInfo, NetdevProvider, RdmaCore};
use rdma::rxe::RxeDriver;
use rdma::rxe::device::Config;
use rdma::rxe::sink::{FrameSink, VecSink};
use rdma::rxe::time::Instant as RxeInstant;
use rdma::rxe::transport::RxeTransport;
use rdma::uverbs::{CoreAccess, MacResolution, ShmMemory, TransportAccess, Uverbs, cm_pump, pump};
use rustix::event::{PollFd, PollFlags};
use shm_host::ShmFile;
use verbs::{AccessFlags, Context, Qp, QpCap, QpInitAttr, RtrAttr, SendFlags, SendWr, WrOp};
use verbs_ring::abi::{Layout, LayoutParams};
use verbs_ring::dispatch::Limits;
use verbs_ring::wake::{Idle, WakeBlock, host_peer};
use verbs_ring::{Firmware, SharedMem, Status};

/// The bound on every wait for something that must happen (a completion, a
/// process getting as far as creating its QP, a reclaim): generous, because on
/// a busy machine (two other CPU-bound processes on two cores) a child process
/// or the appliance thread can be starved for many seconds. Not a timing
/// assertion: a healthy run takes milliseconds.
const PATIENCE: Duration = Duration::from_secs(60);

const REGION: usize = 16 << 20;
type Mem = ShmMemory<Arc<ShmFile>>;

struct Node {
    core: RefCell<RdmaCore>,
    net: Vec<NetdevInfo>,
    shm: Arc<ShmFile>,
    sent: RefCell<VecSink>,
    /// ip -> (asks still answered "pending", MAC)
    arp: RefCell<BTreeMap<IpAddr, (u32, MacAddr)>>,
}

#[derive(Clone)]
struct Access(Rc<Node>);

impl CoreAccess for Access {
    fn with<R>(
        &mut self,
        f: impl FnOnce(&mut RdmaCore, &dyn NetdevProvider) -> Result<R, Status>,
    ) -> Result<R, Status> {
        f(&mut self.0.core.borrow_mut(), &self.0.net)
    }
}

impl TransportAccess for Access {
    type Mem = Mem;
    type Shm = ShmFile;

    fn with_transport<R>(
        &mut self,
        dev: u32,
        f: impl FnOnce(&mut RxeTransport<Mem>, &mut dyn FrameSink, &ShmFile) -> Result<R, Status>,
    ) -> Result<R, Status> {
        let mut core = self.0.core.borrow_mut();
        let d = core.device_mut(dev).ok_or(Status::ENODEV)?;
        let t = RxeDriver::<Mem>::of_mut(d).ok_or(Status::ENODEV)?.transport_mut();
        f(t, &mut *self.0.sent.borrow_mut(), &self.0.shm)
    }

    fn resolve(&mut self, _dev: u32, ip: IpAddr, _now: RxeInstant) -> MacResolution {
        match self.0.arp.borrow_mut().get_mut(&ip) {
            None => MacResolution::Failed,
            Some((0, mac)) => MacResolution::Known(*mac),
            Some((left, _)) => {
                *left -= 1;
                MacResolution::Pending
            }
        }
    }
}

impl Node {
    /// Runs `f` on the transport of rxe0 (device 0), which its driver owns.
    fn with_transport(&self, f: impl FnOnce(&mut RxeTransport<Mem>)) {
        let mut core = self.core.borrow_mut();
        if let Some(t) = core.device_mut(0).and_then(RxeDriver::<Mem>::of_mut) {
            f(t.transport_mut());
        }
    }
}

fn mac(n: u8) -> [u8; 6] {
    [0x52, 0x54, 0, 0, 0, n]
}

/// What a node's second address adds to its first: node `n` has
/// 10.0.0.(n + ALT) as well when it has one.
const ALT: u8 = 10;

/// Node `n` (10.0.0.n, and 10.0.0.(n + ALT) with `second_address`) with
/// rxe0 on eth0 and its transport, as the kernel sets it up after `rdma
/// link add`.
fn node(n: u8, shm: Arc<ShmFile>, peer: u8, second_address: bool) -> Rc<Node> {
    let mut eth0 = NetdevInfo::new(2, "eth0", MacAddr(mac(n)));
    eth0.ipv4.push(vocab::Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, n), 24));
    if second_address {
        eth0.ipv4.push(vocab::Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, n + ALT), 24));
    }
    let net = vec![eth0];
    let mem = shm.clone();
    let mut core = RdmaCore::with_rxe(RxeDriver::factory(move || ShmMemory(mem.clone()), Config::default()));
    core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
    core.process_events();
    let mut arp = BTreeMap::new();
    // One "pending" answer first, so hosts go through their EAGAIN retry.
    arp.insert(IpAddr::V4(Ipv4Addr::new(10, 0, 0, peer)), (1, MacAddr(mac(peer))));
    if second_address {
        arp.insert(IpAddr::V4(Ipv4Addr::new(10, 0, 0, peer + ALT)), (0, MacAddr(mac(peer))));
    }
    Rc::new(Node { core: RefCell::new(core), net, shm, sent: RefCell::default(), arp: RefCell::new(arp) })
}

/// Small, fast layout: 2 contexts, 100 µs beats, a 0.2 s lease.
fn params() -> LayoutParams {
    LayoutParams {
        num_contexts: 2,
        cmd_entries: 16,
        resp_entries: 16,
        cmd_slot_size: 256,
        queue_area_size: 256 << 10,
        heartbeat_period_us: 100,
        lease_beats: 2000,
    }
}

/// Two appliances on one wire, served by one background thread.
struct Pair {
    _dir: tempfile::TempDir,
    rings: [PathBuf; 2],
    stop: Arc<AtomicBool>,
    /// Set: the wire loses every frame to a node's first address.
    cut: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// With doorbells: what the appliances counted ([`Doorbells`]) and
    /// their ivshmem servers.
    doorbells: Arc<Doorbells>,
    servers: Vec<(ivshmem::Stopper, JoinHandle<std::io::Result<()>>)>,
}

/// What host-simulated appliances with doorbells counted, over both.
#[derive(Default)]
struct Doorbells {
    /// Halts (waits on the own eventfd) after asking hosts to ring.
    sleeps: std::sync::atomic::AtomicU64,
    /// Wake-ups by a host's doorbell.
    rung: std::sync::atomic::AtomicU64,
    /// Hosts rung for completion events.
    host_rings: std::sync::atomic::AtomicU64,
}

/// Whether `frame` is IPv4 to 10.0.0.1 or 10.0.0.2 (the nodes' first
/// addresses).
fn to_first_address(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&[8, 0]) && matches!(frame.get(30..34), Some([10, 0, 0, 1 | 2]))
}

impl Pair {
    fn start() -> Pair {
        Pair::build(false, false)
    }

    /// `second_address`: each node has a second address too, which the
    /// wire keeps carrying after [`Pair::cut`].
    fn start_with(second_address: bool) -> Pair {
        Pair::build(second_address, false)
    }

    /// Appliances with doorbells, as `ivshmem-doorbell` gives them: an
    /// ivshmem server beside each ring, the firmware a peer of it that
    /// publishes its ID, rings hosts for their completion events and,
    /// with nothing to do, asks to be rung and sleeps on its own eventfd
    /// for a heartbeat (`verbs_ring::wake`'s handshake, as the kernel runs it).
    fn start_doorbell() -> Pair {
        Pair::build(false, true)
    }

    fn build(second_address: bool, doorbell: bool) -> Pair {
        let dir = tempfile::tempdir().unwrap();
        let rings = [dir.path().join("ring-a"), dir.path().join("ring-b")];
        let shms: Vec<Arc<ShmFile>> = rings.iter().map(|p| Arc::new(ShmFile::create(p, REGION).unwrap())).collect();
        let mut servers = Vec::new();
        let mut fw_peers = Vec::new();
        if doorbell {
            for r in &rings {
                let file = std::fs::File::options().read(true).write(true).open(r).unwrap();
                let mut server = ivshmem::Server::bind(&ivshmem::socket_for(r), file, 1).unwrap();
                let stopper = server.stopper();
                servers.push((stopper, std::thread::spawn(move || server.run())));
                fw_peers.push(ivshmem::Peer::connect(&ivshmem::socket_for(r)).unwrap());
            }
        }
        let doorbells = Arc::new(Doorbells::default());
        let stop = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = {
            let (stop, cut, counts) = (stop.clone(), cut.clone(), doorbells.clone());
            std::thread::spawn(move || {
                // Everything single-threaded lives in this thread.
                let nodes = [node(1, shms[0].clone(), 2, second_address), node(2, shms[1].clone(), 1, second_address)];
                let mut fws: Vec<(Firmware, Uverbs, Access)> = nodes
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        let layout = Layout::new(REGION as u64, params()).unwrap();
                        let wake = fw_peers.get(i).map_or(WakeBlock::NONE, |p| WakeBlock::ivshmem(p.id()));
                        let fw = Firmware::with_wake(&*n.shm, layout, Limits::default(), 16, wake).unwrap();
                        (fw, Uverbs::new(), Access(n.clone()))
                    })
                    .collect();
                let mut idle = [Idle::default(), Idle::default()];
                ready_tx.send(()).unwrap();
                let start = Instant::now();
                while !stop.load(Ordering::Acquire) {
                    let now = RxeInstant::from_micros(start.elapsed().as_micros() as u64);
                    let mut moved = false;
                    for (i, ((fw, uverbs, access), n)) in fws.iter_mut().zip(&nodes).enumerate() {
                        idle[i].awake(&*n.shm).unwrap();
                        let mut p = uverbs.provider(access);
                        fw.tick(&*n.shm, &mut p).unwrap();
                        cm_pump(&mut p, now);
                        let r = pump(fw.dispatcher_mut(), &mut p, now);
                        moved |= r.moved();
                        if let Some(peer) = fw_peers.get_mut(i) {
                            for ctx in r.wake.iter() {
                                if let Some(h) = host_peer(&*n.shm, fw.layout(), ctx, u32::from(peer.id())) {
                                    peer.ring(h, 0).unwrap();
                                    counts.host_rings.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        n.with_transport(|t| t.poll(now, &mut *n.sent.borrow_mut()));
                    }
                    for (from, to) in [(0, 1), (1, 0)] {
                        let frames = std::mem::take(&mut nodes[from].sent.borrow_mut().frames);
                        moved |= !frames.is_empty();
                        for f in frames {
                            if cut.load(Ordering::Acquire) && to_first_address(&f) {
                                continue;
                            }
                            let n = &nodes[to];
                            n.with_transport(|t| t.receive(&f, now, &mut *n.sent.borrow_mut()));
                        }
                    }
                    if moved {
                        continue;
                    }
                    if fw_peers.is_empty() {
                        std::thread::sleep(Duration::from_micros(100));
                        continue;
                    }
                    // Ask to be rung, look once more, then sleep on both
                    // appliances' own eventfds until rung or a heartbeat (1 ms).
                    let mut pending = false;
                    for (i, ((fw, uverbs, _), n)) in fws.iter_mut().zip(&nodes).enumerate() {
                        idle[i].ask(&*n.shm).unwrap();
                        pending |= fw.commands_pending(&*n.shm) | uverbs.rings_pending(&*n.shm);
                    }
                    if pending {
                        continue;
                    }
                    counts.sleeps.fetch_add(1, Ordering::Relaxed);
                    let mut fds: Vec<PollFd<'_>> =
                        fw_peers.iter().map(|p| PollFd::from_borrowed_fd(p.own(0).unwrap(), PollFlags::IN)).collect();
                    let beat = rustix::event::Timespec { tv_sec: 0, tv_nsec: 1_000_000 };
                    let _ = rustix::event::poll(&mut fds, Some(&beat));
                    let rung: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
                    drop(fds);
                    for (p, r) in fw_peers.iter().zip(rung) {
                        if r {
                            ivshmem::peer::wait(p.own(0).unwrap(), Some(Duration::ZERO)).unwrap();
                            counts.rung.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        };
        ready_rx.recv().unwrap();
        Pair { _dir: dir, rings, stop, cut, thread: Some(thread), doorbells, servers }
    }

    /// From now on the wire loses every frame to a node's first address.
    fn cut(&self) {
        self.cut.store(true, Ordering::Release);
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for (stopper, t) in self.servers.drain(..) {
            stopper.stop();
            let _ = t.join();
        }
    }
}

fn ipv4_gid(n: u8) -> [u8; 16] {
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, n]
}

/// Connects RC QP `a` on appliance 1 and `b` on appliance 2 to each other
/// (PSN 7, 1024-byte MTU), each allowing `rd_atomic` READs and atomics in
/// flight both ways.
fn connect_rc(a: &Qp, b: &Qp, access: AccessFlags, rd_atomic: u8) {
    for (q, remote, peer) in [(a, b, 2), (b, a, 1)] {
        q.to_init(1, access).unwrap();
        q.to_rtr(&RtrAttr {
            port: 1,
            path_mtu: 3,
            dest_qp_num: remote.qp_num(),
            rq_psn: 7,
            dgid: ipv4_gid(peer),
            sgid_index: 1,
            max_dest_rd_atomic: rd_atomic,
            min_rnr_timer: 12,
            ..Default::default()
        })
        .unwrap();
        q.to_rts(7, rd_atomic).unwrap();
    }
}

#[test]
fn rc_send_write_read_atomics_through_the_library() {
    let pair = Pair::start();
    let (ca, cb) = (Context::open(&pair.rings[0]).unwrap(), Context::open(&pair.rings[1]).unwrap());
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
    let len = 256 << 10;
    let (ma, mb) = (pa.reg_mr(len, AccessFlags::ALL_REMOTE).unwrap(), pb.reg_mr(len, AccessFlags::ALL_REMOTE).unwrap());
    let (qa_cq, qb_cq) = (da.create_cq(64, 1).unwrap(), db.create_cq(64, 2).unwrap());
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qa = Qp::create(&pa, &qa_cq, &qa_cq, None, &attr).unwrap();
    let qb = Qp::create(&pb, &qb_cq, &qb_cq, None, &attr).unwrap();
    connect_rc(&qa, &qb, AccessFlags::ALL_REMOTE, 4);
    let q = qa.query(0).unwrap();
    assert_eq!((q.attr.qp_state, q.attr.dest_qp_num), (verbs::qp_state::RTS, qb.qp_num()));

    // SEND at 1 B, 4 KiB and 200 KiB, data checked.
    for (i, size) in [1usize, 4096, 200 << 10].into_iter().enumerate() {
        let msg: Vec<u8> = (0..size).map(|j| (j * 13 + i) as u8).collect();
        ma.write(0, &msg).unwrap();
        qb.post_recv(&[(10 + i as u64, &[mb.sge(0, len as u32).unwrap()][..])]).unwrap();
        let wr = SendWr {
            wr_id: 20 + i as u64,
            op: WrOp::Send,
            sg_list: &[ma.sge(0, size as u32).unwrap()],
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        qa.post_send(&[wr]).unwrap();
        let rc = qb_cq.wait(PATIENCE).unwrap();
        assert!(rc.status.is_success(), "{rc:?}");
        assert_eq!((rc.wr_id, rc.byte_len as usize, rc.src_qp), (10 + i as u64, size, qa.qp_num()));
        let sc = qa_cq.wait(PATIENCE).unwrap();
        assert_eq!((sc.wr_id, sc.status.is_success()), (20 + i as u64, true));
        assert_eq!(mb.to_vec(0, size).unwrap(), msg, "size {size}");
    }

    // WRITE 100 KiB into b, READ it back into a elsewhere.
    let data: Vec<u8> = (0..100 << 10).map(|j: usize| (j ^ (j >> 8)) as u8).collect();
    ma.write(0, &data).unwrap();
    let write = WrOp::Write { remote_addr: mb.addr() + 1000, rkey: mb.rkey() };
    let post = |wr_id, op, sge| {
        qa.post_send(&[SendWr { wr_id, op, sg_list: &[sge], flags: SendFlags::SIGNALED, ud: None }]).unwrap()
    };
    post(30, write, ma.sge(0, data.len() as u32).unwrap());
    assert!(qa_cq.wait(PATIENCE).unwrap().status.is_success());
    assert_eq!(mb.to_vec(1000, data.len()).unwrap(), data);
    let read = WrOp::Read { remote_addr: mb.addr() + 1000, rkey: mb.rkey() };
    post(31, read, ma.sge(128 << 10, data.len() as u32).unwrap());
    let c = qa_cq.wait(PATIENCE).unwrap();
    assert_eq!((c.wr_id, c.status.is_success(), c.byte_len as usize), (31, true, data.len()));
    assert_eq!(ma.to_vec(128 << 10, data.len()).unwrap(), data);

    // Atomics: fetch-add then compare-and-swap on a word of b.
    mb.write_u64(0, 40).unwrap();
    let fa = WrOp::FetchAdd { remote_addr: mb.addr(), rkey: mb.rkey(), add: 2 };
    post(32, fa, ma.sge(8, 8).unwrap());
    assert!(qa_cq.wait(PATIENCE).unwrap().status.is_success());
    assert_eq!((ma.read_u64(8).unwrap(), mb.read_u64(0).unwrap()), (40, 42));
    let cs = WrOp::CompareSwap { remote_addr: mb.addr(), rkey: mb.rkey(), compare: 42, swap: 7 };
    post(33, cs, ma.sge(16, 8).unwrap());
    assert!(qa_cq.wait(PATIENCE).unwrap().status.is_success());
    assert_eq!((ma.read_u64(16).unwrap(), mb.read_u64(0).unwrap()), (42, 7));

    // A bad rkey: remote access error, the QP goes to error.
    let bad = WrOp::Write { remote_addr: mb.addr(), rkey: mb.rkey() ^ 0x55 };
    post(34, bad, ma.sge(0, 8).unwrap());
    let c = qa_cq.wait(PATIENCE).unwrap();
    assert_eq!((c.wr_id, c.status.as_str()), (34, "remote access error"));

    let r = da.resources().unwrap();
    assert_eq!((r.pd, r.mr, r.cq, r.qp, r.ctx), (1, 1, 1, 1, 1));
}

fn rc_pingpong(ring: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rc_pingpong"));
    c.arg("--ring").arg(ring).args(args).env_remove("RDMA_RING").stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn rc_pingpong_between_two_appliances_and_a_killed_server_is_reclaimed() {
    let pair = Pair::start();
    for size in ["1", "4096", "131072"] {
        let port = free_port().to_string();
        let args = ["-g", "1", "-s", size, "-n", "20", "-p", &port];
        let server = rc_pingpong(&pair.rings[0], &args).spawn().unwrap();
        let client = rc_pingpong(&pair.rings[1], &[&args[..], &["127.0.0.1"]].concat()).output().unwrap();
        let server = server.wait_with_output().unwrap();
        for (who, out) in [("server", &server), ("client", &client)] {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{who} -s {size}: {text}{}", String::from_utf8_lossy(&out.stderr));
            assert!(text.contains("20 iters in "), "{who}: {text}");
        }
    }

    // A server killed while waiting for its client: the lease expires and
    // its objects are destroyed.
    let ctx = Context::open(&pair.rings[0]).unwrap();
    let dev = ctx.device(Some("rxe0")).unwrap();
    let port = free_port().to_string();
    let mut server = rc_pingpong(&pair.rings[0], &["-g", "1", "-p", &port]).spawn().unwrap();
    let start = Instant::now();
    while dev.resources().unwrap().qp == 0 {
        assert!(start.elapsed() < PATIENCE, "the server never created its QP");
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = dev.resources().unwrap();
    assert_eq!((r.pd, r.mr, r.cq, r.qp, r.ctx), (1, 1, 1, 1, 1));
    server.kill().unwrap();
    let _ = server.wait();
    let start = Instant::now();
    loop {
        let r = dev.resources().unwrap();
        if (r.pd, r.mr, r.cq, r.qp, r.ctx) == (0, 0, 0, 0, 0) {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "not reclaimed: {r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ctx.nop().is_ok());
    assert_eq!(SharedMem::len(&ShmFile::open(&pair.rings[0]).unwrap()), REGION);
}

fn pingpong(exe: &str, ring: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.arg("--ring").arg(ring).args(args).env_remove("RDMA_RING").stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// `uc_pingpong` and `ud_pingpong` (and `rc_pingpong` beside them) with
/// rdma-core's `-c` on both sides: UC with one-packet and multi-packet
/// messages, UD with datagrams up to the port's MTU behind their GRH. Every
/// run completes with no `invalid data` line; UD refuses a message larger
/// than the port's MTU as rdma-core's does.
#[test]
fn uc_ud_and_rc_pingpong_check_their_data_between_two_appliances() {
    let pair = Pair::start();
    let runs = [
        (env!("CARGO_BIN_EXE_uc_pingpong"), "1"),
        (env!("CARGO_BIN_EXE_uc_pingpong"), "70000"),
        (env!("CARGO_BIN_EXE_ud_pingpong"), "1"),
        (env!("CARGO_BIN_EXE_ud_pingpong"), "1024"),
        (env!("CARGO_BIN_EXE_rc_pingpong"), "10000"),
    ];
    for (exe, size) in runs {
        let port = free_port().to_string();
        let args = ["-g", "1", "-c", "-s", size, "-n", "20", "-p", &port];
        let server = pingpong(exe, &pair.rings[0], &args).spawn().unwrap();
        let client = pingpong(exe, &pair.rings[1], &[&args[..], &["127.0.0.1"]].concat()).output().unwrap();
        let server = server.wait_with_output().unwrap();
        for (who, out) in [("server", &server), ("client", &client)] {
            let text = String::from_utf8_lossy(&out.stdout);
            let tool = exe.rsplit('/').next().unwrap_or(exe);
            assert!(out.status.success(), "{tool} {who} -s {size}: {text}{}", String::from_utf8_lossy(&out.stderr));
            assert!(text.contains("20 iters in ") && !text.contains("invalid data"), "{tool} {who}: {text}");
            assert!(text.contains("  remote address:  LID 0x0000, QPN "), "{tool} {who}: {text}");
        }
    }
    let out = pingpong(env!("CARGO_BIN_EXE_ud_pingpong"), &pair.rings[0], &["-g", "1", "-s", "4096"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Requested size larger than port MTU (1024)"));
}

/// rdma_cm between the two appliances, each side's IB CM on its own QP1:
/// a listener on 10.0.0.2, a client on 10.0.0.1 resolving, connecting with
/// private data both ways, a SEND over the QPs the library moved with the
/// CM's attributes, and a disconnect both sides hear; then a connect to a
/// port nobody listens on is rejected with reason 8 (invalid service ID).
#[test]
fn rdma_cm_connects_two_appliances_over_their_qp1() {
    use verbs::cm::{ConnParam, EventChannel, cm_event, event_str, port_space};
    let pair = Pair::start();
    let (cs, cc) = (Context::open(&pair.rings[1]).unwrap(), Context::open(&pair.rings[0]).unwrap());
    let (sch, cch) = (EventChannel::new(&cs), EventChannel::new(&cc));
    let expect = |ch: &EventChannel, event: u32| {
        let ev = ch.get_cm_event(PATIENCE).unwrap();
        assert_eq!(ev.name(), event_str(event), "status {}", ev.status);
        ev
    };
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let listen = sch.create_id(port_space::TCP).unwrap();
    listen.bind_addr("10.0.0.2:7174".parse().unwrap()).unwrap();
    listen.listen(4).unwrap();

    let id = cch.create_id(port_space::TCP).unwrap();
    id.resolve_addr(None, "10.0.0.2:7174".parse().unwrap(), 2000).unwrap();
    expect(&cch, cm_event::ADDR_RESOLVED);
    id.resolve_route(2000).unwrap();
    expect(&cch, cm_event::ROUTE_RESOLVED);
    let cdev = id.device().unwrap();
    let (cpd, ccq) = (cdev.alloc_pd().unwrap(), cdev.create_cq(16, 0).unwrap());
    let cqp = id.create_qp(&cpd, &ccq, &ccq, None, &attr).unwrap();
    let req = ConnParam {
        private_data: b"hello".to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    };
    id.connect(&req).unwrap();

    let mut ev = expect(&sch, cm_event::CONNECT_REQUEST);
    // As Linux: the REQ's whole private area after the cma header, 92 - 36 bytes.
    assert_eq!(ev.param.private_data.len(), 56);
    assert!(ev.param.private_data.starts_with(b"hello"));
    assert_eq!(ev.param.qp_num, cqp.qp_num());
    let conn = ev.request.take().unwrap();
    assert_eq!(conn.peer_addr().map(|a| a.ip()), Some("10.0.0.1".parse().unwrap()));
    let sdev = conn.device().unwrap();
    let (spd, scq) = (sdev.alloc_pd().unwrap(), sdev.create_cq(16, 0).unwrap());
    let sqp = conn.create_qp(&spd, &scq, &scq, None, &attr).unwrap();
    let smr = spd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    sqp.post_recv(&[(7, &[smr.sge(0, 64).unwrap()])]).unwrap();
    conn.accept(&ConnParam {
        private_data: vec![0xab; 196],
        responder_resources: 1,
        initiator_depth: 1,
        ..Default::default()
    })
    .unwrap();

    let est = expect(&cch, cm_event::ESTABLISHED);
    assert_eq!(est.param.private_data, vec![0xab; 196]);
    let q = cqp.query(0).unwrap().attr;
    assert_eq!((q.qp_state, q.dest_qp_num), (verbs::qp_state::RTS, sqp.qp_num()));
    // Responder resources granted: READ and atomics allowed, as cm_init_qp_init_attr gives.
    assert_eq!(q.qp_access_flags, 0b1110);
    expect(&sch, cm_event::ESTABLISHED);

    let cmr = cpd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    cmr.write(0, b"ping").unwrap();
    let sge = [cmr.sge(0, 4).unwrap()];
    cqp.post_send(&[SendWr { wr_id: 1, op: WrOp::Send, sg_list: &sge, flags: SendFlags::SIGNALED, ud: None }]).unwrap();
    let cwc = ccq.wait(PATIENCE).unwrap();
    assert!(
        cwc.status.is_success(),
        "{cwc:?} client {:?} server {:?}",
        cqp.query(0).unwrap().attr,
        sqp.query(0).unwrap().attr
    );
    let wc = scq.wait(PATIENCE).unwrap();
    assert_eq!((wc.wr_id, wc.byte_len), (7, 4));
    assert_eq!(smr.to_vec(0, 4).unwrap(), b"ping");

    id.disconnect().unwrap();
    expect(&sch, cm_event::DISCONNECTED);
    conn.disconnect().unwrap();
    expect(&cch, cm_event::DISCONNECTED);

    let nobody = cch.create_id(port_space::TCP).unwrap();
    nobody.resolve_addr(None, "10.0.0.2:9".parse().unwrap(), 2000).unwrap();
    expect(&cch, cm_event::ADDR_RESOLVED);
    nobody.resolve_route(2000).unwrap();
    expect(&cch, cm_event::ROUTE_RESOLVED);
    nobody.connect(&ConnParam::default()).unwrap();
    assert_eq!(expect(&cch, cm_event::REJECTED).status, 8);
}

fn cm_tool(name: &str, ring: &Path, args: &[&str]) -> Command {
    let exe = match name {
        "ucmatose" => env!("CARGO_BIN_EXE_ucmatose"),
        "udaddy" => env!("CARGO_BIN_EXE_udaddy"),
        "send_bw" => env!("CARGO_BIN_EXE_send_bw"),
        "write_bw" => env!("CARGO_BIN_EXE_write_bw"),
        "read_bw" => env!("CARGO_BIN_EXE_read_bw"),
        "send_lat" => env!("CARGO_BIN_EXE_send_lat"),
        "write_lat" => env!("CARGO_BIN_EXE_write_lat"),
        _ => panic!("no tool {name}"),
    };
    let mut c = Command::new(exe);
    c.arg("--ring").arg(ring).args(args).env_remove("RDMA_RING").stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Wait for `child` at most [`PATIENCE`], killing it past that.
fn finish(mut child: std::process::Child, who: &str) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{who} timed out; stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// A server tool on ring b (10.0.0.2) and its client on ring a, the client
/// run again while the server is not listening yet (`rejected` in its
/// output); both outputs (stdout then stderr) once both ended.
fn serve_and_connect(
    pair: &Pair,
    name: &str,
    server: &[&str],
    client: &[&str],
    rejected: &str,
) -> [(std::process::ExitStatus, String); 2] {
    let server = cm_tool(name, &pair.rings[1], server).spawn().unwrap();
    let start = Instant::now();
    let c = loop {
        let c = finish(cm_tool(name, &pair.rings[0], client).spawn().unwrap(), "client");
        let text = format!("{}{}", String::from_utf8_lossy(&c.stdout), String::from_utf8_lossy(&c.stderr));
        if c.status.success() || !text.contains(rejected) || start.elapsed() > PATIENCE {
            break (c.status, text);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let s = finish(server, "server");
    let s = (s.status, format!("{}{}", String::from_utf8_lossy(&s.stdout), String::from_utf8_lossy(&s.stderr)));
    [s, c]
}

/// ucmatose between the two appliances: two connections, 10 SENDs of
/// 100 bytes (the defaults) each way on each, cmatose's lines in order,
/// exit status 0 on both; first, a connection nobody accepts.
#[test]
fn ucmatose_between_two_appliances() {
    let pair = Pair::start();
    // Nobody listens: the REJ's reason (invalid service ID) is the status.
    // (First: a REQ from a QPN still in time wait after a connection would
    // be refused as stale, reason 10, as Linux's CM does.)
    let port = free_port().to_string();
    let c = finish(cm_tool("ucmatose", &pair.rings[0], &["-s", "10.0.0.2", "-p", &port]).spawn().unwrap(), "client");
    let out = String::from_utf8_lossy(&c.stdout);
    assert_eq!(c.status.code(), Some(8), "{out}");
    assert!(out.contains("cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8\n"), "{out}");
    assert!(out.ends_with("test complete\nreturn status 8\n"), "{out}");

    let port = free_port().to_string();
    let [(ss, sout), (cs, cout)] = serve_and_connect(
        &pair,
        "ucmatose",
        &["-b", "10.0.0.2", "-p", &port, "-c", "2"],
        &["-s", "10.0.0.2", "-p", &port, "-c", "2"],
        "RDMA_CM_EVENT_REJECTED",
    );
    assert!(ss.success() && cs.success(), "server:\n{sout}\nclient:\n{cout}");
    let server_lines = [
        "cmatose: starting server",
        "initiating data transfers",
        "completing sends",
        "receiving data transfers",
        "data transfers complete",
        "cmatose: disconnecting",
        "disconnected",
        "test complete",
        "return status 0",
    ];
    assert_eq!(sout.lines().collect::<Vec<_>>(), server_lines, "{sout}");
    let client_lines = [
        "cmatose: starting client",
        "cmatose: connecting",
        "receiving data transfers",
        "sending replies",
        "data transfers complete",
        "test complete",
        "return status 0",
    ];
    assert_eq!(cout.lines().collect::<Vec<_>>(), client_lines, "{cout}");
}

/// udaddy between the two appliances: two UD ids over SIDR, 10 datagrams
/// of 100 bytes each way on each (the server answering through the AH
/// toward the client and the QPN in the immediate), udaddy's lines in
/// order, exit status 0 on both; and a message larger than the MTU refused.
#[test]
fn udaddy_between_two_appliances() {
    let pair = Pair::start();
    let [(ss, sout), (cs, cout)] =
        // A SIDR REQ nobody listens for is answered status 1: UNREACHABLE, not REJECTED.
        serve_and_connect(&pair, "udaddy", &["-c", "2"], &["-s", "10.0.0.2", "-c", "2"], "RDMA_CM_EVENT_UNREACHABLE");
    assert!(ss.success() && cs.success(), "server:\n{sout}\nclient:\n{cout}");
    let server_lines = [
        "udaddy: starting server",
        "receiving data transfers",
        "sending replies",
        "data transfers complete",
        "test complete",
        "return status 0",
    ];
    assert_eq!(sout.lines().collect::<Vec<_>>(), server_lines, "{sout}");
    let client_lines = [
        "udaddy: starting client",
        "udaddy: connecting",
        "initiating data transfers",
        "receiving data transfers",
        "data transfers complete",
        "test complete",
        "return status 0",
    ];
    assert_eq!(cout.lines().collect::<Vec<_>>(), client_lines, "{cout}");

    // No listener needed: the size check comes before the SIDR REQ.
    let c = finish(cm_tool("udaddy", &pair.rings[0], &["-s", "10.0.0.2", "-S", "8192"]).spawn().unwrap(), "client");
    let out = String::from_utf8_lossy(&c.stdout);
    assert_eq!(c.status.code(), Some(256 - 22), "{out}");
    assert!(out.contains("udaddy: message_size 8192 is larger than active mtu "), "{out}");
    assert!(out.ends_with("test complete\nreturn status -22\n"), "{out}");
}

/// The perftest-style tools with `-R` between the two appliances: the
/// exchange over its own rdma_cm connection, the test's QP connected
/// through rdma_cm on the same port, the run, the figures on both sides.
#[test]
fn perf_tools_with_rdma_cm_between_two_appliances() {
    let pair = Pair::start();
    for (tool, size) in
        [("send_bw", "4096"), ("write_bw", "65536"), ("read_bw", "8192"), ("send_lat", "2"), ("write_lat", "64")]
    {
        let port = free_port().to_string();
        let common = ["-R", "-n", "50", "-s", size, "-p", &port];
        let server = [&common[..], &["--bind", "10.0.0.2"]].concat();
        let client = [&common[..], &["10.0.0.2"]].concat();
        // The client retries a server that does not listen yet by itself.
        let [(ss, sout), (cs, cout)] = serve_and_connect(&pair, tool, &server, &client, "\0");
        assert!(ss.success() && cs.success(), "{tool} server:\n{sout}\nclient:\n{cout}");
        for (who, out) in [("server", &sout), ("client", &cout)] {
            assert!(out.contains(" rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n"), "{tool} {who}:\n{out}");
            let figures = out.lines().find(|l| l.starts_with(&format!(" {size} ")));
            let iters = figures.and_then(|l| l.split_whitespace().nth(1));
            assert_eq!(iters, Some("50"), "{tool} {who}:\n{out}");
        }
        assert!(sout.contains(" Waiting for client rdma_cm QP to connect\n"), "{sout}");
    }
}

/// perftest's multicast mode (`-g`) between the two appliances: send_bw's
/// server attaches its UD QP to the group `-M` names and receives every
/// message the client sends to the group; send_lat's sides each attach and
/// ping-pong through the groups (`-M`'s one group; without `-M`,
/// perftest's two default IPv6 ones, over the link-local GIDs). Each
/// side's result line counts every message; the group is announced with
/// the multicast QPN and printed as perftest labels it.
#[test]
fn perf_tools_multicast_between_two_appliances() {
    let pair = Pair::start();
    let group = "0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3";
    let cases: [(&str, &[&str], &str, &str); 3] = [
        (
            "send_bw",
            &["-x", "1", "-g", "-M", group, "-s", "512"],
            "512",
            "00:00:00:00:00:00:00:00:00:00:255:255:239:01:02:03",
        ),
        ("send_lat", &["-x", "1", "-g", "-M", group], "2", "00:00:00:00:00:00:00:00:00:00:255:255:239:01:02:03"),
        // The server's default group, ff01:0:0:2:c985::, and the client's, one higher.
        ("send_lat", &["-x", "0", "-g"], "2", "255:01:00:00:00:02:201:133:00:00:00:00:00:00:00:00"),
    ];
    for (tool, args, size, server_group) in cases {
        let port = free_port().to_string();
        let common = [args, &["-n", "50", "-p", &port]].concat();
        let server = [&common[..], &["--bind", "127.0.0.1"]].concat();
        let client = [&common[..], &["127.0.0.1"]].concat();
        let [(ss, sout), (cs, cout)] = serve_and_connect(&pair, tool, &server, &client, "\0");
        assert!(ss.success() && cs.success(), "{tool} {args:?} server:\n{sout}\nclient:\n{cout}");
        let test = if tool == "send_bw" { "BW" } else { "Latency" };
        for (who, out) in [("server", &sout), ("client", &cout)] {
            let title = format!("Send {test} Multicast Test\n MultiCast runs on UD!\n");
            assert!(out.contains(&title) && out.contains(" Connection type : UD\t"), "{tool} {who}:\n{out}");
            let figures = out.lines().find(|l| l.starts_with(&format!(" {size} ")));
            assert_eq!(figures.and_then(|l| l.split_whitespace().nth(1)), Some("50"), "{tool} {who}:\n{out}");
        }
        // The server's group: its own line and the client's line for it.
        let mgid = format!(" MGID: {server_group}\n");
        assert!(sout.contains(" local address: LID 0000 QPN 0xffffff ") && sout.contains(&mgid), "{sout}");
        assert!(cout.contains(" remote address: LID 0000 QPN 0xffffff ") && cout.contains(&mgid), "{cout}");
        if tool == "send_lat" {
            // The client is in a group too, labelled GID as perftest does.
            assert!(cout.contains(" local address: LID 0000 QPN 0xffffff "), "{cout}");
        } else {
            assert!(!cout.contains(" local address: LID 0000 QPN 0xffffff "), "{cout}");
        }
    }
    // perftest's refusal: one direction only.
    let c = finish(cm_tool("send_bw", &pair.rings[0], &["-g", "-b", "127.0.0.1"]).spawn().unwrap(), "send_bw -g -b");
    let err = String::from_utf8_lossy(&c.stderr);
    assert!(!c.status.success() && err.contains("Bidirectional mode not supported in multicast"), "{err}");
}

/// Issue 19 through the ring and the real provider: a fast-register MR over a
/// page list, windows of both types, ATOMIC WRITE, FLUSH, and SEND WITH
/// INVALIDATE after which a WRITE to the invalidated rkey is NAKed.
#[test]
fn fast_registration_windows_atomic_write_and_flush_through_the_library() {
    use verbs::{FastRegMr, MwType, wc_opcode};
    let pair = Pair::start();
    let (ca, cb) = (Context::open(&pair.rings[0]).unwrap(), Context::open(&pair.rings[1]).unwrap());
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
    const PAGE: u64 = 4096;
    let ma = pa.reg_mr(64 << 10, AccessFlags::ALL_REMOTE).unwrap();
    let target = AccessFlags::ALL_REMOTE | AccessFlags::MW_BIND | AccessFlags::FLUSH_GLOBAL;
    let mb = pb.reg_mr(8 * PAGE as usize, target).unwrap();
    let (qa_cq, qb_cq) = (da.create_cq(64, 1).unwrap(), db.create_cq(64, 2).unwrap());
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qa = Qp::create(&pa, &qa_cq, &qa_cq, None, &attr).unwrap();
    let qb = Qp::create(&pb, &qb_cq, &qb_cq, None, &attr).unwrap();
    for (q, remote, peer) in [(&qa, &qb, 2), (&qb, &qa, 1)] {
        q.to_init(1, AccessFlags::ALL_REMOTE).unwrap();
        let rtr = RtrAttr {
            port: 1,
            path_mtu: 3,
            dest_qp_num: remote.qp_num(),
            rq_psn: 7,
            dgid: ipv4_gid(peer),
            sgid_index: 1,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 12,
            ..Default::default()
        };
        q.to_rtr(&rtr).unwrap();
        q.to_rts(7, 4).unwrap();
    }
    let post = |q: &Qp, wr_id, op, sg: &[verbs::Sge]| {
        q.post_send(&[SendWr { wr_id, op, sg_list: sg, flags: SendFlags::SIGNALED, ud: None }]).unwrap()
    };
    // Two pages of mb's memory, the higher one first in the MR.
    let base = mb.addr().next_multiple_of(PAGE);
    let off = (base - mb.addr()) as usize;
    let pages = [base + 3 * PAGE, base + PAGE];
    let frmr: FastRegMr = pb.alloc_mr(4).unwrap();
    frmr.map(0x5000_0000, 2 * PAGE, PAGE, &pages).unwrap();
    let key = frmr.next_key(0x42);
    let rw = (AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ).0;
    post(&qb, 1, WrOp::RegMr { mr: frmr.handle(), key, access: rw }, &[]);
    let c = qb_cq.wait(PATIENCE).unwrap();
    assert_eq!((c.status.is_success(), c.opcode), (true, wc_opcode::REG_MR), "{c:?}");
    let data: Vec<u8> = (0..2 * PAGE as usize).map(|j| (j * 7 + 3) as u8).collect();
    ma.write(0, &data).unwrap();
    post(&qa, 2, WrOp::Write { remote_addr: 0x5000_0000, rkey: key }, &[ma.sge(0, data.len() as u32).unwrap()]);
    assert!(qa_cq.wait(PATIENCE).unwrap().status.is_success());
    assert_eq!(mb.to_vec(off + 3 * PAGE as usize, PAGE as usize).unwrap(), data[..PAGE as usize]);
    assert_eq!(mb.to_vec(off + PAGE as usize, PAGE as usize).unwrap(), data[PAGE as usize..]);

    // A type 2B window: read-only, over one page of mb.
    let mw = pb.alloc_mw(MwType::Type2).unwrap();
    let new = mw.next_rkey();
    let op = mw.bind_wr(&mb, off as u64, PAGE, AccessFlags::REMOTE_READ, new);
    post(&qb, 3, op, &[]);
    let c = qb_cq.wait(PATIENCE).unwrap();
    assert_eq!((c.status.is_success(), c.opcode), (true, wc_opcode::BIND_MW), "{c:?}");
    mw.bound(new);
    mb.write(off, b"through the window").unwrap();
    post(&qa, 4, WrOp::Read { remote_addr: base, rkey: mw.rkey() }, &[ma.sge(0x8000, 18).unwrap()]);
    assert!(qa_cq.wait(PATIENCE).unwrap().status.is_success());
    assert_eq!(ma.to_vec(0x8000, 18).unwrap(), b"through the window");
    // A type 1 window, bound by the verb, writable.
    let mw1 = pb.alloc_mw(MwType::Type1).unwrap();
    let k1 = mw1.bind(&qb, 5, &mb, off as u64 + PAGE, 64, AccessFlags::REMOTE_WRITE).unwrap();
    assert_eq!(qb_cq.wait(PATIENCE).unwrap().opcode, wc_opcode::BIND_MW);
    post(&qa, 6, WrOp::Write { remote_addr: base + PAGE, rkey: k1 }, &[ma.sge(0, 64).unwrap()]);
    assert!(qa_cq.wait(PATIENCE).unwrap().status.is_success());
    assert_eq!(mb.to_vec(off + PAGE as usize, 64).unwrap(), data[..64]);

    // ATOMIC WRITE and FLUSH.
    let aw = WrOp::AtomicWrite { remote_addr: base + 5 * PAGE, rkey: mb.rkey(), data: *b"atomic!!" };
    post(&qa, 7, aw, &[]);
    let c = qa_cq.wait(PATIENCE).unwrap();
    assert_eq!((c.status.is_success(), c.opcode), (true, wc_opcode::ATOMIC_WRITE), "{c:?}");
    assert_eq!(mb.to_vec(off + 5 * PAGE as usize, 8).unwrap(), b"atomic!!");
    let fl = WrOp::Flush { remote_addr: base, rkey: mb.rkey(), len: PAGE, placement: 1, level: 0 };
    post(&qa, 8, fl, &[]);
    let c = qa_cq.wait(PATIENCE).unwrap();
    assert_eq!((c.status.is_success(), c.opcode), (true, wc_opcode::FLUSH), "{c:?}");

    // SEND WITH INVALIDATE of the fast-register MR, then a WRITE to it.
    qb.post_recv(&[(9, &[mb.sge(off, 64).unwrap()][..])]).unwrap();
    post(&qa, 10, WrOp::SendWithInv(key), &[ma.sge(0, 16).unwrap()]);
    assert!(qa_cq.wait(PATIENCE).unwrap().status.is_success());
    let r = qb_cq.wait(PATIENCE).unwrap();
    assert!(r.status.is_success(), "{r:?}");
    assert_ne!(r.wc_flags & verbs_ring::abi::wc_flags::WITH_INV, 0);
    post(&qa, 11, WrOp::Write { remote_addr: 0x5000_0000, rkey: key }, &[ma.sge(0, 8).unwrap()]);
    let c = qa_cq.wait(PATIENCE).unwrap();
    assert_eq!((c.wr_id, c.status.as_str()), (11, "remote access error"));
}

/// UD multicast through the ring: two QPs of b attached to a group both get a
/// send to it (an AH to the group's GID needs no neighbour resolution); once
/// detached, a send to the group reaches nobody.
#[test]
fn ud_multicast_through_the_library() {
    use verbs::{UdDest, qp_type};
    let pair = Pair::start();
    let (ca, cb) = (Context::open(&pair.rings[0]).unwrap(), Context::open(&pair.rings[1]).unwrap());
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
    let (ma, mb) =
        (pa.reg_mr(4096, AccessFlags::ALL_REMOTE).unwrap(), pb.reg_mr(4096, AccessFlags::ALL_REMOTE).unwrap());
    let (qa_cq, qb_cq) = (da.create_cq(16, 1).unwrap(), db.create_cq(16, 2).unwrap());
    let attr = QpInitAttr {
        qp_type: qp_type::UD,
        cap: QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qa = Qp::create(&pa, &qa_cq, &qa_cq, None, &attr).unwrap();
    let qbs =
        [Qp::create(&pb, &qb_cq, &qb_cq, None, &attr).unwrap(), Qp::create(&pb, &qb_cq, &qb_cq, None, &attr).unwrap()];
    for q in std::iter::once(&qa).chain(&qbs) {
        q.to_init(1, AccessFlags::NONE_REMOTE).unwrap();
        q.modify(&verbs::QpAttr { qp_state: verbs::qp_state::RTR, ..Default::default() }, verbs::qp_attr_mask::STATE)
            .unwrap();
        q.to_rts(0, 0).unwrap();
    }
    let group = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 1, 1];
    for (i, q) in qbs.iter().enumerate() {
        q.attach_mcast(group).unwrap();
        q.post_recv(&[(i as u64, &[mb.sge(i * 1024, 1024).unwrap()][..])]).unwrap();
    }
    assert!(qbs[0].attach_mcast([10; 16]).is_err(), "not a multicast GID");
    let ah = pa
        .create_ah(&verbs::AhAttr {
            dgid: group,
            sgid_index: 1,
            hop_limit: 1,
            is_global: 1,
            port_num: 1,
            ..Default::default()
        })
        .unwrap();
    ma.write(0, b"hello, group").unwrap();
    let send = |wr_id| {
        let ud = UdDest { ah: &ah, remote_qpn: 0xFF_FFFF, remote_qkey: 0 };
        let wr = SendWr {
            wr_id,
            op: WrOp::Send,
            sg_list: &[ma.sge(0, 12).unwrap()],
            flags: SendFlags::SIGNALED,
            ud: Some(ud),
        };
        qa.post_send(&[wr]).unwrap();
        assert!(qa_cq.wait(PATIENCE).unwrap().status.is_success());
    };
    send(10);
    let mut got: Vec<u64> = (0..2).map(|_| qb_cq.wait(PATIENCE).unwrap()).map(|c| c.wr_id).collect();
    got.sort();
    assert_eq!(got, [0, 1]);
    for i in 0..2 {
        assert_eq!(mb.to_vec(i * 1024 + 40, 12).unwrap(), b"hello, group", "the GRH first, then the data");
    }
    for (i, q) in qbs.iter().enumerate() {
        q.detach_mcast(group).unwrap();
        q.post_recv(&[(2 + i as u64, &[mb.sge(i * 1024, 1024).unwrap()][..])]).unwrap();
    }
    send(11);
    assert!(qb_cq.wait(Duration::from_millis(300)).is_err(), "a detached group reaches nobody");
}

/// `frmr_cm` (the appliance side of the kernel fast-registration interop
/// with Linux, tests/linux-peer/kfrmr.c) against itself over rdma_cm, each
/// role once as the listener and once connecting: two rounds, the page
/// list, SEND WITH INVALIDATE, the re-keyed registration, the invalidated
/// and the superseded rkeys refused, every check passing on both sides.
#[test]
fn frmr_cm_between_two_appliances_both_roles() {
    let pair = Pair::start();
    for (server_role, client_role) in [("initiator", "target"), ("target", "initiator")] {
        let port = free_port().to_string();
        let run = |ring: usize, role: &str, server: Option<&str>| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_frmr_cm"));
            c.arg("--ring").arg(&pair.rings[ring]).args(["-p", &port, "-R", role]).args(server);
            c.env_remove("RDMA_RING").stdout(Stdio::piped()).stderr(Stdio::piped());
            c.spawn().unwrap()
        };
        // The listener on b (10.0.0.2); the client retries until it listens.
        let server = run(1, server_role, None);
        let client = finish(run(0, client_role, Some("10.0.0.2")), client_role);
        let server = finish(server, server_role);
        for (role, out) in [(server_role, &server), (client_role, &client)] {
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success() && text.ends_with(&format!("PASS frmr as {role}\n")), "{role}:\n{text}");
            if role == "initiator" {
                assert_eq!(text.matches("refused: remote access error").count(), 2, "{text}");
                assert_eq!(text.matches("data checked").count(), 4, "{text}");
            } else {
                assert!(text.contains("receive with IBV_WC_WITH_INV"), "{text}");
                assert!(text.contains("re-registered: ok"), "{text}");
            }
        }
    }
}

/// `ext_verbs` (the appliance side of the extended-verbs interop with Linux)
/// against itself, each appliance once the target and once the initiator:
/// windows of both types, SEND WITH INVALIDATE, the refused WRITEs, the
/// fast-registered MR, ATOMIC WRITE and FLUSH, every phase passing on both sides.
#[test]
fn ext_verbs_between_two_appliances_both_roles() {
    let pair = Pair::start();
    let phases = "mw,rights1,rights2,frmr,atomic_write,flush";
    for (target, initiator) in [(0, 1), (1, 0)] {
        let port = free_port().to_string();
        let common = ["-g", "1", "-p", &port, "-P", phases];
        let run = |ring: usize, role: &str, server: Option<&str>| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_ext_verbs"));
            c.arg("--ring").arg(&pair.rings[ring]).args(common).args(["-R", role]).args(server);
            c.env_remove("RDMA_RING").stdout(Stdio::piped()).stderr(Stdio::piped());
            c.spawn().unwrap()
        };
        let server = run(target, "target", None);
        let client = finish(run(initiator, "initiator", Some("127.0.0.1")), "initiator");
        let server = finish(server, "target");
        for (role, out) in [("target", &server), ("initiator", &client)] {
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success(), "{role} on ring {target}/{initiator}:\n{text}");
            for p in phases.split(',') {
                assert!(text.contains(&format!("PASS {p} as {role}\n")), "{role}: {p}\n{text}");
            }
            assert!(!text.contains("FAIL"), "{text}");
        }
        let init = String::from_utf8_lossy(&client.stdout);
        assert_eq!(init.matches("refused: remote access error").count(), 4, "{init}");
        let targ = String::from_utf8_lossy(&server.stdout);
        assert_eq!(targ.matches("receive with IBV_WC_WITH_INV").count(), 2, "{targ}");
    }
}

fn srq_pingpong(ring: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_srq_pingpong"));
    c.arg("--ring").arg(ring).args(args).env_remove("RDMA_RING").stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// `srq_pingpong` with its default 16 QPs on one SRQ, and with 1 and 3:
/// every QP of both sides prints its address line and the run completes.
#[test]
fn srq_pingpong_between_two_appliances() {
    let pair = Pair::start();
    for (qps, size) in [("16", "4096"), ("1", "1"), ("3", "70000")] {
        let port = free_port().to_string();
        let args = ["-g", "1", "-q", qps, "-s", size, "-n", "100", "-r", "40", "-p", &port];
        let server = srq_pingpong(&pair.rings[0], &args).spawn().unwrap();
        let client = srq_pingpong(&pair.rings[1], &[&args[..], &["127.0.0.1"]].concat()).output().unwrap();
        let server = server.wait_with_output().unwrap();
        let n: usize = qps.parse().unwrap();
        for (who, out) in [("server", &server), ("client", &client)] {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{who} -q {qps}: {text}{}", String::from_utf8_lossy(&out.stderr));
            assert!(text.contains("100 iters in "), "{who}: {text}");
            assert_eq!(text.matches("  local address:  LID 0x0000, QPN ").count(), n, "{who}: {text}");
            assert_eq!(text.matches("  remote address:  LID 0x0000, QPN ").count(), n, "{who}: {text}");
            assert!(text.contains("GID ::ffff:10.0.0."), "{who}: {text}");
        }
    }
    // rdma-core's refusal: fewer receives than QPs.
    let out = srq_pingpong(&pair.rings[0], &["-q", "8", "-r", "4"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rx_depth 4 is too small for 8 QPs"));
}

/// SRQ limit events end to end (IBA 10.2.9.4, as rxe): a limit armed at
/// creation fires `IBV_EVENT_SRQ_LIMIT_REACHED` once when a receive takes
/// the SRQ's WQE count below it, and then stays quiet; `modify_srq` re-arms
/// it; a limit above the SRQ's size is refused. Resizing (SRQ_RESIZE)
/// keeps the posted receives and makes room for more.
#[test]
fn srq_limit_event_fires_once_and_modify_srq_rearms_it_and_resizes() {
    use verbs::Srq;
    use verbs_ring::cmd::event_type::SRQ_LIMIT_REACHED;
    let pair = Pair::start();
    let (ca, cb) = (Context::open(&pair.rings[0]).unwrap(), Context::open(&pair.rings[1]).unwrap());
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
    let (ma, mb) =
        (pa.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap(), pb.reg_mr(64 << 10, AccessFlags::LOCAL_WRITE).unwrap());
    let (qa_cq, qb_cq) = (da.create_cq(64, 1).unwrap(), db.create_cq(64, 2).unwrap());
    let srq = Srq::create(&pb, 16, 1, 6).unwrap();
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qa = Qp::create(&pa, &qa_cq, &qa_cq, None, &attr).unwrap();
    let qb = Qp::create(&pb, &qb_cq, &qb_cq, Some(&srq), &attr).unwrap();
    connect_rc(&qa, &qb, AccessFlags::NONE_REMOTE, 1);
    let recvs: Vec<(u64, Vec<verbs::Sge>)> =
        (0..8).map(|i| (i, vec![mb.sge(i as usize * 4096, 4096).unwrap()])).collect();
    let posted: Vec<(u64, &[verbs::Sge])> = recvs.iter().map(|(i, s)| (*i, &s[..])).collect();
    srq.post_recv(&posted).unwrap();
    // Sends one message and waits for both completions.
    let mut next = 0u64;
    let mut exchange = || {
        let wr = SendWr {
            wr_id: 100 + next,
            op: WrOp::Send,
            sg_list: &[ma.sge(0, 64).unwrap()],
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        qa.post_send(&[wr]).unwrap();
        let rc = qb_cq.wait(PATIENCE).unwrap();
        assert_eq!((rc.wr_id, rc.status.is_success(), rc.qp_num), (next, true, qb.qp_num()));
        assert!(qa_cq.wait(PATIENCE).unwrap().status.is_success());
        next += 1;
    };
    // Events travel with the next pump; a command round trip follows it.
    let events = |ctx: &Context| {
        let _ = ctx.nop();
        let mut v = Vec::new();
        while let Some(e) = ctx.async_event().unwrap() {
            v.push((e.event_type, e.handle));
        }
        v
    };
    // 8 posted, limit 6: 7 and 6 left fire nothing, 5 left fires once.
    exchange();
    exchange();
    assert_eq!(events(&cb), []);
    exchange();
    assert_eq!(events(&cb), [(SRQ_LIMIT_REACHED, srq.handle())]);
    // Disarmed: 4 and 3 left stay quiet.
    exchange();
    exchange();
    assert_eq!(events(&cb), []);
    // modify_srq re-arms: limit 2 with 3 left fires at 1 left, once.
    srq.set_limit(2).unwrap();
    exchange();
    assert_eq!(events(&cb), []);
    exchange();
    assert_eq!(events(&cb), [(SRQ_LIMIT_REACHED, srq.handle())]);
    assert_eq!(events(&ca), [], "the sender's context hears nothing");
    // rxe's refusal: a limit above the SRQ's size.
    let e = srq.set_limit(17).unwrap_err();
    assert_eq!(e.errno().0, "EINVAL", "{e}");
    // SRQ_RESIZE: 20 receives at once do not fit the 16-entry ring; once
    // the SRQ grew to 32 they do, and the one left from before is consumed
    // first, then the 20 in order.
    use verbs_ring::cmd::srq_attr_mask::MAX_WR;
    let more: Vec<(u64, Vec<verbs::Sge>)> =
        (8..28).map(|i| (i, vec![mb.sge((i % 16) as usize * 4096, 4096).unwrap()])).collect();
    let batch: Vec<(u64, &[verbs::Sge])> = more.iter().map(|(i, s)| (*i, &s[..])).collect();
    assert_eq!(srq.post_recv(&batch).unwrap_err().errno().0, "ENOMEM");
    srq.modify(MAX_WR, 20, 0).unwrap();
    assert_eq!(srq.max_wr(), 32);
    srq.post_recv(&batch).unwrap();
    for _ in 0..21 {
        exchange();
    }
    // Shrinking below the receives posted is refused; the SRQ keeps its size.
    srq.post_recv(&batch[..5]).unwrap();
    let e = srq.modify(MAX_WR, 4, 0).unwrap_err();
    assert_eq!(e.errno().0, "EINVAL", "{e}");
    assert_eq!(srq.max_wr(), 32);
}

/// UD multicast to an IPv6 group (ff0e::1:2) from the link-local GID: the
/// attached QP gets the datagram behind a GRH that is the IPv6 header as
/// sent (source the sender's link-local address, destination the group).
#[test]
fn ud_multicast_to_an_ipv6_group_through_the_library() {
    use verbs::{UdDest, qp_type};
    let pair = Pair::start();
    let (ca, cb) = (Context::open(&pair.rings[0]).unwrap(), Context::open(&pair.rings[1]).unwrap());
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
    let (ma, mb) =
        (pa.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap(), pb.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap());
    let (qa_cq, qb_cq) = (da.create_cq(16, 1).unwrap(), db.create_cq(16, 2).unwrap());
    let attr = QpInitAttr {
        qp_type: qp_type::UD,
        cap: QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qa = Qp::create(&pa, &qa_cq, &qa_cq, None, &attr).unwrap();
    let qb = Qp::create(&pb, &qb_cq, &qb_cq, None, &attr).unwrap();
    for q in [&qa, &qb] {
        q.to_init(1, AccessFlags::NONE_REMOTE).unwrap();
        q.modify(&verbs::QpAttr { qp_state: verbs::qp_state::RTR, ..Default::default() }, verbs::qp_attr_mask::STATE)
            .unwrap();
        q.to_rts(0, 0).unwrap();
    }
    let group: [u8; 16] = "ff0e::1:2".parse::<std::net::Ipv6Addr>().unwrap().octets();
    let sgid = da.query_gid(1, 0).unwrap().gid;
    assert_eq!(sgid[..2], [0xfe, 0x80], "GID 0 is the link-local one");
    qb.attach_mcast(group).unwrap();
    qb.post_recv(&[(1, &[mb.sge(0, 1024).unwrap()][..])]).unwrap();
    let ah = pa
        .create_ah(&verbs::AhAttr {
            dgid: group,
            sgid_index: 0,
            hop_limit: 1,
            is_global: 1,
            port_num: 1,
            ..Default::default()
        })
        .unwrap();
    ma.write(0, b"to an IPv6 group").unwrap();
    let ud = UdDest { ah: &ah, remote_qpn: 0xFF_FFFF, remote_qkey: 0 };
    let wr = SendWr {
        wr_id: 7,
        op: WrOp::Send,
        sg_list: &[ma.sge(0, 16).unwrap()],
        flags: SendFlags::SIGNALED,
        ud: Some(ud),
    };
    qa.post_send(&[wr]).unwrap();
    assert!(qa_cq.wait(PATIENCE).unwrap().status.is_success());
    let rc = qb_cq.wait(PATIENCE).unwrap();
    assert_eq!((rc.wr_id, rc.status.is_success(), rc.byte_len, rc.src_qp), (1, true, 40 + 16, qa.qp_num()));
    let grh = mb.to_vec(0, 40).unwrap();
    assert_eq!((grh[0] >> 4, grh[7]), (6, 1), "IPv6, the AH's hop limit");
    assert_eq!((&grh[8..24], &grh[24..40]), (&sgid[..], &group[..]));
    assert_eq!(mb.to_vec(40, 16).unwrap(), b"to an IPv6 group");
}

/// Automatic path migration through the ring (IBA vol. 1 17.2.8; the device
/// advertises AUTO_PATH_MIG): each host loads an alternate path between the
/// nodes' second addresses with `IBV_QP_ALT_PATH` (a in RTR->RTS, b in
/// RTS->RTS) and arms it. query_qp answers the alternate path as loaded and
/// `rdma res show qp` says ARMED. Once the wire loses everything to the
/// first addresses, a's WRITE runs out of retries there, a moves to the
/// alternate path and resends, b follows when a's packets arrive over it,
/// and the WRITE completes; each host gets IBV_EVENT_PATH_MIG for its QP,
/// query_qp shows MIGRATED with the alternate vector and timeout as the
/// QP's own, `rdma res show qp` says MIGRATED, and the QPs go on working.
#[test]
fn an_armed_qp_migrates_to_its_alternate_path_when_the_primary_dies() {
    use verbs::{AhAttr, AltPath, QpAttr, qp_attr_mask, qp_state};
    use verbs_ring::cmd::{event_type::PATH_MIG, mig_state, res_kind};
    let pair = Pair::start_with(true);
    let (ca, cb) = (Context::open(&pair.rings[0]).unwrap(), Context::open(&pair.rings[1]).unwrap());
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    // GID 2 is each node's second address.
    for (d, n) in [(&da, 1), (&db, 2)] {
        let g = d.query_gid(1, 2).unwrap();
        assert_eq!((g.valid != 0, g.gid), (true, ipv4_gid(n + ALT)));
    }
    let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
    let (ma, mb) =
        (pa.reg_mr(4096, AccessFlags::ALL_REMOTE).unwrap(), pb.reg_mr(4096, AccessFlags::ALL_REMOTE).unwrap());
    let (qa_cq, qb_cq) = (da.create_cq(16, 1).unwrap(), db.create_cq(16, 2).unwrap());
    let init = |user_handle| QpInitAttr {
        cap: QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        user_handle,
        ..Default::default()
    };
    let qa = Qp::create(&pa, &qa_cq, &qa_cq, None, &init(0xa)).unwrap();
    let qb = Qp::create(&pb, &qb_cq, &qb_cq, None, &init(0xb)).unwrap();
    let alt_to = |peer: u8| AltPath {
        alt_ah_attr: AhAttr {
            dgid: ipv4_gid(peer + ALT),
            sgid_index: 2,
            hop_limit: 64,
            is_global: 1,
            port_num: 1,
            ..Default::default()
        },
        alt_pkey_index: 0,
        alt_port_num: 1,
        alt_timeout: 10,
        reserved: [0; 4],
    };
    // A short local ACK timeout (4.096 us << 8, about 1 ms) and two retries,
    // so the primary path is given up on quickly.
    let rts = QpAttr {
        qp_state: qp_state::RTS,
        sq_psn: 7,
        timeout: 8,
        retry_cnt: 2,
        rnr_retry: 7,
        max_rd_atomic: 1,
        path_mig_state: mig_state::ARMED,
        ..Default::default()
    };
    let rts_mask = qp_attr_mask::STATE
        | qp_attr_mask::SQ_PSN
        | qp_attr_mask::TIMEOUT
        | qp_attr_mask::RETRY_CNT
        | qp_attr_mask::RNR_RETRY
        | qp_attr_mask::MAX_QP_RD_ATOMIC;
    let armed = qp_attr_mask::ALT_PATH | qp_attr_mask::PATH_MIG_STATE;
    for (q, remote, peer) in [(&qa, &qb, 2), (&qb, &qa, 1)] {
        q.to_init(1, AccessFlags::ALL_REMOTE).unwrap();
        q.to_rtr(&RtrAttr {
            port: 1,
            path_mtu: 3,
            dest_qp_num: remote.qp_num(),
            rq_psn: 7,
            dgid: ipv4_gid(peer),
            sgid_index: 1,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ..Default::default()
        })
        .unwrap();
    }
    qa.modify_with_alt(&rts, &alt_to(2), rts_mask | armed).unwrap();
    qb.modify(&rts, rts_mask).unwrap();
    let rts_to_rts = QpAttr { qp_state: qp_state::RTS, path_mig_state: mig_state::ARMED, ..Default::default() };
    qb.modify_with_alt(&rts_to_rts, &alt_to(1), qp_attr_mask::STATE | armed).unwrap();

    let q = qa.query(0).unwrap();
    assert_eq!(q.attr.path_mig_state, mig_state::ARMED);
    assert_eq!(q.attr.ah_attr.dgid, ipv4_gid(2));
    let alt = q.alt.alt_ah_attr;
    assert_eq!((alt.dgid, alt.sgid_index, alt.port_num), (ipv4_gid(2 + ALT), 2, 1));
    assert_eq!((q.alt.alt_port_num, q.alt.alt_timeout, q.alt.alt_pkey_index), (1, 10, 0));
    // `rdma res show qp`'s line for a QP on device `d` numbered `qpn`.
    let res_line = |d: &verbs::Device, qpn: u32| {
        let e = d.res_entries(res_kind::QP).unwrap().into_iter().find(|e| e.num == qpn).unwrap();
        let mut line = String::new();
        verbs_ring::show::rdma_res_obj::write(&mut line, "rxe0", &e).unwrap();
        line
    };
    assert!(res_line(&da, qa.qp_num()).contains(" path-mig-state ARMED "), "{}", res_line(&da, qa.qp_num()));

    // One WRITE of 64 bytes at `off` from a to b, its completion checked.
    let write = |wr_id: u64, off: usize| {
        let data: Vec<u8> = (0..64).map(|i| (i as u64 * 7 + wr_id) as u8).collect();
        ma.write(off, &data).unwrap();
        let wr = SendWr {
            wr_id,
            op: WrOp::Write { remote_addr: mb.addr() + off as u64, rkey: mb.rkey() },
            sg_list: &[ma.sge(off, 64).unwrap()],
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        qa.post_send(&[wr]).unwrap();
        let c = qa_cq.wait(PATIENCE).unwrap();
        assert_eq!((c.wr_id, c.status.as_str()), (wr_id, "success"));
        assert_eq!(mb.to_vec(off, 64).unwrap(), data);
    };
    write(1, 0);
    // Events travel with the next pump; a command round trip follows it.
    let events = |ctx: &Context| {
        let _ = ctx.nop();
        let mut v = Vec::new();
        while let Some(e) = ctx.async_event().unwrap() {
            v.push((e.event_type, e.handle, e.element));
        }
        v
    };
    assert_eq!(events(&ca), []);

    pair.cut();
    write(2, 64);
    assert_eq!(events(&ca), [(PATH_MIG, qa.handle(), 0xa)]);
    assert_eq!(events(&cb), [(PATH_MIG, qb.handle(), 0xb)]);
    for (q, peer) in [(&qa, 2), (&qb, 1)] {
        let a = q.query(0).unwrap().attr;
        assert_eq!(a.path_mig_state, mig_state::MIGRATED);
        assert_eq!((a.ah_attr.dgid, a.ah_attr.sgid_index, a.timeout), (ipv4_gid(peer + ALT), 2, 10));
    }
    for (d, q) in [(&da, &qa), (&db, &qb)] {
        let line = res_line(d, q.qp_num());
        assert!(line.contains(" path-mig-state MIGRATED "), "{line}");
    }
    // Migrated, the QPs go on over the second addresses.
    write(3, 128);
    assert_eq!((events(&ca), events(&cb)), (vec![], vec![]));
}

/// Both directions of the doorbell between host programs and appliances
/// that have one: a host thread blocked in `Cq::wait_event` (armed, asleep
/// on its eventfd) is woken by the appliance's completion event, and the
/// hosts ring appliances that asked to be rung (the appliances here sleep
/// on their eventfds whenever they are idle). Solicited-only requests wait
/// for a solicited SEND. And a ring whose server socket is gone refuses to
/// open, saying so.
#[test]
fn completion_events_and_doorbells_between_hosts_and_appliances() {
    let pair = Pair::start_doorbell();
    let (ca, cb) = (Context::open(&pair.rings[0]).unwrap(), Context::open(&pair.rings[1]).unwrap());
    assert!(ca.doorbell().is_some() && cb.doorbell().is_some(), "the appliances have doorbells");
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
    let (ma, mb) =
        (pa.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap(), pb.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap());
    let (qa_cq, qb_cq) = (da.create_cq(16, 1).unwrap(), db.create_cq(16, 2).unwrap());
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qa = Qp::create(&pa, &qa_cq, &qa_cq, None, &attr).unwrap();
    let qb = Qp::create(&pb, &qb_cq, &qb_cq, None, &attr).unwrap();
    connect_rc(&qa, &qb, AccessFlags::LOCAL_WRITE, 1);
    let send = |wr_id, flags| {
        let wr = SendWr { wr_id, op: WrOp::Send, sg_list: &[ma.sge(0, 8).unwrap()], flags, ud: None };
        qa.post_send(&[wr]).unwrap();
    };
    for round in 0..20u64 {
        qb.post_recv(&[(round, &[mb.sge(0, 64).unwrap()][..])]).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| qb_cq.wait_event(PATIENCE));
            // Let the waiter arm and fall asleep (not required: a completion
            // before the arm is found by its poll), then send.
            std::thread::sleep(Duration::from_millis(2));
            send(100 + round, SendFlags::SIGNALED);
            let rc = waiter.join().unwrap().expect("woken by the completion event");
            assert_eq!((rc.wr_id, rc.status.is_success()), (round, true));
        });
        assert_eq!(qa_cq.wait_event(PATIENCE).unwrap().wr_id, 100 + round);
    }
    let host_rings = pair.doorbells.host_rings.load(Ordering::Relaxed);
    assert!(host_rings > 0, "the appliances rang hosts for their events");
    let rung = pair.doorbells.rung.load(Ordering::Relaxed);
    let asked = pair.doorbells.sleeps.load(Ordering::Relaxed);
    let host_side = ca.doorbell().unwrap().rings() + cb.doorbell().unwrap().rings();
    assert!(
        host_side > 0 && rung > 0,
        "hosts rang sleeping appliances ({host_side} rings, {rung} wake-ups, {asked} sleeps)"
    );
    eprintln!(
        "doorbells: {host_rings} completion events, {host_side} host rings, {rung} appliance wake-ups by them, {asked} sleeps"
    );

    // Solicited only: an ordinary SEND's receive does not fire, a solicited one does.
    qb_cq.req_notify(true).unwrap();
    for (i, flags) in [(0u64, SendFlags::SIGNALED), (1, SendFlags::SIGNALED | SendFlags::SOLICITED)] {
        qb.post_recv(&[(50 + i, &[mb.sge(0, 64).unwrap()][..])]).unwrap();
        send(60 + i, flags);
        let mut got = None;
        let deadline = Instant::now() + PATIENCE;
        while got.is_none() {
            assert!(Instant::now() < deadline, "no receive");
            got = qb_cq.poll_one().unwrap();
        }
        assert_eq!(got.unwrap().wr_id, 50 + i);
        qa_cq.wait(PATIENCE).unwrap();
        if i == 0 {
            assert!(!qb_cq.event_fired(), "an unsolicited receive raises no solicited-only event");
        } else {
            let deadline = Instant::now() + PATIENCE;
            while !qb_cq.event_fired() {
                assert!(Instant::now() < deadline, "no event for the solicited SEND");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    // The server's socket gone: opening the ring says what is missing.
    std::fs::remove_file(ivshmem::socket_for(&pair.rings[0])).unwrap();
    let e = Context::open(&pair.rings[0]).err().expect("refused");
    assert_eq!(e.errno().0, "ENOENT", "{e}");
    assert!(e.to_string().contains(".sock"), "{e}");
    // Polling instead is still possible on purpose (once the firmware took
    // back the slot the refused open had claimed: two slots here).
    let opts = verbs::context::Options { doorbell: false, ..Default::default() };
    let deadline = Instant::now() + PATIENCE;
    let polled = loop {
        match Context::open_with(&pair.rings[0], opts) {
            Err(verbs::Error::NoFreeContext { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            r => break r.unwrap(),
        }
    };
    assert!(polled.doorbell().is_none());
}
