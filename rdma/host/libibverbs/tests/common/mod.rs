//! Test support: two host-simulated appliances (the firmware's ring
//! server, provider and rxe transport over ring files in a tempdir, frames
//! passed in memory), as `verbs`' tests/transport.rs builds them, and our
//! `libibverbs.so.1` linked from the staticlib for Debian's programs.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
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
use shm_host::ShmFile;
use verbs_ring::abi::{Layout, LayoutParams};
use verbs_ring::dispatch::Limits;
use verbs_ring::{Firmware, Status};

/// The bound on every wait for something that must happen (a completion, a
/// process getting as far as creating its QP, a reclaim): generous, because on
/// a busy machine (two other CPU-bound processes on two cores) a child process
/// or the appliance thread can be starved for many seconds. Not a timing
/// assertion: a healthy run takes milliseconds.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub const REGION: usize = 64 << 20;
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

/// Node `n` (10.0.0.n) with rxe0 on eth0 and its transport, as the kernel
/// sets it up after `rdma link add`.
fn node(n: u8, shm: Arc<ShmFile>, peer: u8) -> Rc<Node> {
    let mut eth0 = NetdevInfo::new(2, "eth0", MacAddr(mac(n)));
    eth0.ipv4.push(vocab::Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, n), 24));
    let net = vec![eth0];
    let mem = shm.clone();
    let mut core = RdmaCore::with_rxe(RxeDriver::factory(move || ShmMemory(mem.clone()), Config::default()));
    core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
    core.process_events();
    let mut arp = BTreeMap::new();
    // One "pending" answer first, so hosts go through their EAGAIN retry.
    arp.insert(IpAddr::V4(Ipv4Addr::new(10, 0, 0, peer)), (1, MacAddr(mac(peer))));
    Rc::new(Node { core: RefCell::new(core), net, shm, sent: RefCell::default(), arp: RefCell::new(arp) })
}

/// Small, fast layout: 2 contexts, 100 µs beats, a 0.2 s lease.
fn params() -> LayoutParams {
    LayoutParams {
        num_contexts: 4,
        cmd_entries: 16,
        resp_entries: 16,
        cmd_slot_size: 256,
        queue_area_size: 2 << 20,
        heartbeat_period_us: 100,
        lease_beats: 2000,
    }
}

/// Two appliances on one wire, served by one background thread.
pub struct Pair {
    _dir: tempfile::TempDir,
    pub rings: [PathBuf; 2],
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Pair {
    pub fn start() -> Pair {
        let dir = tempfile::tempdir().unwrap();
        let rings = [dir.path().join("ring-a"), dir.path().join("ring-b")];
        let shms: Vec<Arc<ShmFile>> = rings.iter().map(|p| Arc::new(ShmFile::create(p, REGION).unwrap())).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // Everything single-threaded lives in this thread.
                let nodes = [node(1, shms[0].clone(), 2), node(2, shms[1].clone(), 1)];
                let mut fws: Vec<(Firmware, Uverbs, Access)> = nodes
                    .iter()
                    .map(|n| {
                        let layout = Layout::new(REGION as u64, params()).unwrap();
                        let fw = Firmware::new(&*n.shm, layout, Limits::default(), 16).unwrap();
                        (fw, Uverbs::new(), Access(n.clone()))
                    })
                    .collect();
                ready_tx.send(()).unwrap();
                let start = Instant::now();
                while !stop.load(Ordering::Acquire) {
                    let now = RxeInstant::from_micros(start.elapsed().as_micros() as u64);
                    let mut moved = false;
                    for ((fw, uverbs, access), n) in fws.iter_mut().zip(&nodes) {
                        let mut p = uverbs.provider(access);
                        fw.tick(&*n.shm, &mut p).unwrap();
                        cm_pump(&mut p, now);
                        moved |= pump(fw.dispatcher_mut(), &mut p, now).moved();
                        n.with_transport(|t| t.poll(now, &mut *n.sent.borrow_mut()));
                    }
                    for (from, to) in [(0, 1), (1, 0)] {
                        let frames = std::mem::take(&mut nodes[from].sent.borrow_mut().frames);
                        moved |= !frames.is_empty();
                        for f in frames {
                            let n = &nodes[to];
                            n.with_transport(|t| t.receive(&f, now, &mut *n.sent.borrow_mut()));
                        }
                    }
                    if !moved {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
            })
        };
        ready_rx.recv().unwrap();
        Pair { _dir: dir, rings, stop, thread: Some(thread) }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The staticlib cargo built for this test run: the newest
/// `deps/libibverbs_abi-*.a` (`cargo test` does not copy it up).
fn staticlib(profile: &Path) -> PathBuf {
    let deps = profile.join("deps");
    std::fs::read_dir(&deps)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("libibverbs_abi-") && n.ends_with(".a")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
        .unwrap_or_else(|| profile.join("libibverbs_abi.a"))
}

/// The folder holding `libibverbs.so.1`, linked once per test binary from
/// the staticlib cargo built, with our version script.
pub fn lib_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile = exe.parent().unwrap().parent().unwrap();
        let out = profile.join(format!("abi-test-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let status =
            std::process::Command::new(manifest.join("link.sh")).arg(staticlib(profile)).arg(&out).status().unwrap();
        assert!(status.success(), "linking libibverbs.so.1 failed");
        out
    })
}

/// Debian's program `prog` over our library and ring `ring`.
pub fn program(prog: &str, ring: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(prog);
    c.env("LD_LIBRARY_PATH", lib_dir())
        .env("RDMA_RING", ring)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    c
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
