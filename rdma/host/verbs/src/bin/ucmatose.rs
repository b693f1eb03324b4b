//! `ucmatose`: rdmacm-utils' cmatose for the appliance, over RDMA CM. Same
//! options, output lines and exchange as Linux's, so either side may be
//! Linux: the client resolves and connects `-c` RC connections (each
//! posting its `-C` receives of `-S` bytes first), the server accepts them
//! (receives posted before the REP), and once every connection is
//! established the server SENDs `-C` messages on each, the client waits
//! for them and SENDs as many back, the server waits for those and
//! disconnects; the client answers each DISCONNECTED with its own
//! disconnect. Both end with `test complete` and `return status N`, and N
//! is the exit status (a REJECTED connection's reason, a negative errno).
//!
//! Differences from Linux's: `-m` prints what cmatose prints but keeps the
//! one event channel (a context's CM events reach every channel of it, so
//! there is nothing to migrate); `-t` and `-a` report that the option is
//! not supported, as cmatose reports a failed `rdma_set_option`, and go on;
//! `-f gid` and `-P ib` (AF_IB) are refused. Every connection of one side
//! must land on the same device.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use clap::Parser;
use verbs::cli::{RingArgs, exit};
use verbs::cm::{CmEvent, CmId, ConnParam, EventChannel, cm_event, port_space};
use verbs::queue::EMPTY_WC;
use verbs::{AccessFlags, Cq, Device, Error, MemoryRegion, Pd, Qp, QpCap, QpInitAttr, SendFlags, SendWr, WrOp};

/// How long a CQ may stay silent before the run is declared stuck.
const STALL: Duration = Duration::from_secs(30);
const EINVAL: i32 = 22;
const ENOMEM: i32 = 12;
const ETIMEDOUT: i32 = 110;

#[derive(Parser)]
#[command(name = "ucmatose", about = "RDMA CM connection and data transfer test (as rdmacm-utils' cmatose)")]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
    /// server address (client side); without it, be the server
    #[arg(short = 's')]
    server: Option<String>,
    /// bind address
    #[arg(short = 'b')]
    bind: Option<String>,
    /// address format: name, ip, ipv6 or gid
    #[arg(short = 'f')]
    format: Option<String>,
    /// port space: tcp or ib
    #[arg(short = 'P')]
    port_space: Option<String>,
    /// connections
    #[arg(short = 'c', default_value_t = 1)]
    connections: usize,
    /// message count
    #[arg(short = 'C', default_value_t = 10)]
    count: u32,
    /// message size
    #[arg(short = 'S', default_value_t = 100)]
    size: u32,
    /// type of service
    #[arg(short = 't')]
    tos: Option<String>,
    /// port number
    #[arg(short = 'p', default_value = "7471")]
    port: String,
    /// migrate to a new event channel
    #[arg(short = 'm')]
    migrate: bool,
    /// ack timeout
    #[arg(short = 'a')]
    ack_timeout: Option<String>,
}

impl Cli {
    /// cmatose sends nothing when either is 0.
    fn count(&self) -> u32 {
        if self.size == 0 { 0 } else { self.count }
    }
}

/// One connection (`struct cmatest_node`).
#[derive(Default)]
struct Node {
    id: Option<CmId>,
    connected: bool,
}

/// `struct cmatest`.
struct Test {
    nodes: Vec<Node>,
    conn_index: usize,
    connects_left: usize,
    disconnects_left: usize,
}

impl Test {
    fn node_of(&self, handle: u32) -> Option<usize> {
        self.nodes.iter().position(|n| n.id.as_ref().is_some_and(|id| id.handle() == handle))
    }
}

/// Each node's verbs objects, made once the side's device is known.
struct Res<'a, 'b> {
    pd: &'a Pd<'a>,
    /// Per node: send CQ, receive CQ.
    cqs: &'a [(Cq<'a>, Cq<'a>)],
    mrs: &'a [MemoryRegion<'a>],
    qps: &'b mut [Option<Qp<'a>>],
}

fn errno(e: &Error) -> i32 {
    -e.errno().1
}

/// `rdma_getaddrinfo` for a numeric address or a host name.
fn addr_of(host: &str, port: &str) -> Result<SocketAddr, String> {
    let port: u16 = port.parse().map_err(|_| "rdma_getaddrinfo error: Servname not supported for ai_socktype")?;
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| "rdma_getaddrinfo error: Name or service not known".to_string())
}

fn qp_attr(cqe: u32) -> QpInitAttr {
    QpInitAttr {
        cap: QpCap { max_send_wr: cqe, max_recv_wr: cqe, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        sq_sig_all: true,
        ..Default::default()
    }
}

fn cqe(cli: &Cli) -> u32 {
    cli.count().max(1)
}

/// The per-node CQs and message buffers on `pd` (`init_node` but the QP).
fn make_cqs<'a>(cli: &Cli, dev: &'a Device) -> Result<Vec<(Cq<'a>, Cq<'a>)>, i32> {
    (0..cli.connections)
        .map(|_| match (dev.create_cq(cqe(cli), 0), dev.create_cq(cqe(cli), 0)) {
            (Ok(s), Ok(r)) => Ok((s, r)),
            _ => {
                println!("cmatose: unable to create CQ");
                Err(-ENOMEM)
            }
        })
        .collect()
}

fn make_mrs<'a>(cli: &Cli, pd: &'a Pd<'a>) -> Result<Vec<MemoryRegion<'a>>, i32> {
    (0..cli.connections)
        .map(|_| {
            pd.reg_mr(cli.size.max(1) as usize, AccessFlags::LOCAL_WRITE).map_err(|_| {
                println!("failed to reg MR");
                println!("cmatose: failed to create messages: -1");
                -1
            })
        })
        .collect()
}

/// `init_node`'s QP and `post_recvs`.
fn init_node(cli: &Cli, t: &Test, i: usize, r: &mut Res<'_, '_>) -> Result<(), i32> {
    let id = t.nodes[i].id.as_ref().ok_or(-EINVAL)?;
    if id.device().map(|d| d.index()).ok() != Some(r.pd.device().index()) {
        println!("cmatose: connection {i} is on another device than the first one (not supported)");
        return Err(-EINVAL);
    }
    let (scq, rcq) = &r.cqs[i];
    let qp = id.create_qp(r.pd, scq, rcq, None, &qp_attr(cqe(cli))).map_err(|e| {
        println!("cmatose: unable to create QP: {e}");
        errno(&e)
    })?;
    let qp = r.qps[i].insert(qp);
    if cli.count() > 0 {
        let sge = [r.mrs[i].sge(0, cli.size).map_err(|e| errno(&e))?];
        let wrs: Vec<(u64, &[verbs::Sge])> = (0..cli.count()).map(|_| (i as u64, &sge[..])).collect();
        qp.post_recv(&wrs).map_err(|e| {
            println!("failed to post receives: {}", errno(&e));
            errno(&e)
        })?;
    }
    Ok(())
}

fn post_sends(cli: &Cli, t: &Test, i: usize, r: &Res<'_, '_>) -> Result<(), i32> {
    let (Some(qp), true) = (r.qps[i].as_ref(), t.nodes[i].connected) else { return Ok(()) };
    if cli.count() == 0 {
        return Ok(());
    }
    let sge = [r.mrs[i].sge(0, cli.size).map_err(|e| errno(&e))?];
    for _ in 0..cli.count() {
        let wr = SendWr { wr_id: i as u64, op: WrOp::Send, sg_list: &sge, flags: SendFlags::SIGNALED, ud: None };
        qp.post_send(&[wr]).map_err(|e| {
            println!("failed to post sends: {}", errno(&e));
            errno(&e)
        })?;
    }
    Ok(())
}

/// `poll_cqs`: `-C` completions from each connected node's send (`recv`
/// false) or receive CQ, every one checked.
fn poll_cqs(cli: &Cli, t: &Test, r: &Res<'_, '_>, recv: bool) -> Result<(), i32> {
    let mut wc = [EMPTY_WC; 8];
    for (i, (scq, rcq)) in r.cqs.iter().enumerate() {
        if !t.nodes[i].connected {
            continue;
        }
        let cq = if recv { rcq } else { scq };
        let (mut done, mut last) = (0, Instant::now());
        while done < cli.count() {
            let want = (cli.count() - done).min(8) as usize;
            let n = cq.poll(&mut wc[..want]).map_err(|e| {
                println!("cmatose: failed polling CQ: {}", errno(&e));
                errno(&e)
            })?;
            if let Some(bad) = wc[..n].iter().find(|w| !w.status.is_success()) {
                println!("cmatose: completion failed on connection {i}: {}", bad.status);
                return Err(-5);
            }
            done += n as u32;
            if n > 0 {
                last = Instant::now();
            } else if last.elapsed() > STALL {
                println!("cmatose: no completion on connection {i} for {}s", STALL.as_secs());
                return Err(-ETIMEDOUT);
            } else {
                std::thread::yield_now();
            }
        }
    }
    Ok(())
}

/// What `cma_handler` did with an event.
enum Handled {
    Ret(i32),
    /// The event needs the verbs objects, which need the device it names.
    NeedsDevice(CmEvent),
}

fn connect_error(t: &mut Test) {
    t.connects_left = t.connects_left.saturating_sub(1);
}

/// `cma_handler`.
fn handle(cli: &Cli, t: &mut Test, mut ev: CmEvent, res: Option<&mut Res<'_, '_>>) -> Handled {
    let node = t.node_of(ev.id);
    match ev.event {
        cm_event::ADDR_RESOLVED => {
            let Some(i) = node else { return Handled::Ret(0) };
            for (what, v) in [("TOS", &cli.tos), ("ack timeout", &cli.ack_timeout)] {
                if v.is_some() {
                    println!("cmatose: set {what} option failed: Operation not supported");
                }
            }
            let id = t.nodes[i].id.as_ref();
            if let Some(Err(e)) = id.map(|id| id.resolve_route(2000)) {
                println!("cmatose: resolve route failed: {e}");
                connect_error(t);
                return Handled::Ret(errno(&e));
            }
            Handled::Ret(0)
        }
        cm_event::ROUTE_RESOLVED => {
            let Some(i) = node else { return Handled::Ret(0) };
            let Some(r) = res else { return Handled::NeedsDevice(ev) };
            let ret = route_handler(cli, t, i, r);
            if ret != 0 {
                connect_error(t);
            }
            Handled::Ret(ret)
        }
        cm_event::CONNECT_REQUEST => {
            let Some(id) = ev.request.take() else { return Handled::Ret(0) };
            if t.conn_index == t.nodes.len() {
                println!("cmatose: failing connection request");
                let _ = id.reject(&[]);
                return Handled::Ret(-ENOMEM);
            }
            let Some(r) = res else {
                ev.request = Some(id);
                return Handled::NeedsDevice(ev);
            };
            let i = t.conn_index;
            t.conn_index += 1;
            t.nodes[i].id = Some(id);
            let ret = connect_handler(cli, t, i, r, &ev.param);
            if ret != 0 {
                connect_error(t);
                println!("cmatose: failing connection request");
                if let Some(id) = t.nodes[i].id.take() {
                    let _ = id.reject(&[]);
                    r.qps[i] = None;
                }
            }
            Handled::Ret(ret)
        }
        cm_event::ESTABLISHED => {
            if let Some(i) = node {
                t.nodes[i].connected = true;
                connect_error(t);
                t.disconnects_left += 1;
            }
            Handled::Ret(0)
        }
        cm_event::ADDR_ERROR
        | cm_event::ROUTE_ERROR
        | cm_event::CONNECT_ERROR
        | cm_event::UNREACHABLE
        | cm_event::REJECTED => {
            println!("cmatose: event: {}, error: {}", ev.name(), ev.status);
            connect_error(t);
            Handled::Ret(ev.status)
        }
        cm_event::DISCONNECTED => {
            if let Some(i) = node
                && let Some(id) = &t.nodes[i].id
            {
                let _ = id.disconnect();
            }
            t.disconnects_left = t.disconnects_left.saturating_sub(1);
            Handled::Ret(0)
        }
        _ => Handled::Ret(0),
    }
}

fn route_handler(cli: &Cli, t: &Test, i: usize, r: &mut Res<'_, '_>) -> i32 {
    if let Err(ret) = init_node(cli, t, i, r) {
        return ret;
    }
    let param = ConnParam { responder_resources: 1, initiator_depth: 1, retry_count: 5, ..Default::default() };
    match t.nodes[i].id.as_ref().map(|id| id.connect(&param)) {
        Some(Err(e)) => {
            println!("cmatose: failure connecting: {e}");
            errno(&e)
        }
        _ => 0,
    }
}

fn connect_handler(cli: &Cli, t: &Test, i: usize, r: &mut Res<'_, '_>, req: &ConnParam) -> i32 {
    if let Err(ret) = init_node(cli, t, i, r) {
        return ret;
    }
    // rdma_accept(id, NULL): librdmacm answers with the request's
    // resources and depth, retry and RNR retry 7.
    let param = ConnParam {
        responder_resources: req.responder_resources,
        initiator_depth: req.initiator_depth,
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    };
    match t.nodes[i].id.as_ref().map(|id| id.accept(&param)) {
        Some(Err(e)) => {
            println!("cmatose: failure accepting: {e}");
            errno(&e)
        }
        _ => 0,
    }
}

/// Events until one needs the device (returned with it), or until no
/// connection is left to make.
fn events_until_device(cli: &Cli, ch: &EventChannel, t: &mut Test) -> Result<Option<(Device, CmEvent)>, i32> {
    while t.connects_left > 0 {
        let ev = next_event(ch, "connect")?;
        match handle(cli, t, ev, None) {
            Handled::Ret(0) => {}
            Handled::Ret(ret) => return Err(ret),
            Handled::NeedsDevice(ev) => {
                let id = ev.request.as_ref().or_else(|| t.node_of(ev.id).and_then(|i| t.nodes[i].id.as_ref()));
                let dev = id.ok_or(-EINVAL)?.device().map_err(|e| {
                    println!("cmatose: unable to allocate PD");
                    errno(&e)
                })?;
                return Ok(Some((dev, ev)));
            }
        }
    }
    Ok(None)
}

/// `rdma_get_cm_event`, blocking as librdmacm's does.
fn next_event(ch: &EventChannel, phase: &str) -> Result<CmEvent, i32> {
    loop {
        match ch.get_cm_event(Duration::from_secs(3600)) {
            Ok(ev) => return Ok(ev),
            Err(Error::TimedOut { .. } | Error::NothingCame { .. }) => continue,
            Err(e) => {
                println!("cmatose: failure in rdma_get_cm_event in {phase} events: {e}");
                return Err(errno(&e));
            }
        }
    }
}

/// `connect_events`, the first event (the one that needed the device) first.
fn connect_events(cli: &Cli, ch: &EventChannel, t: &mut Test, first: CmEvent, r: &mut Res<'_, '_>) -> i32 {
    let mut pending = Some(first);
    while t.connects_left > 0 {
        let ev = match pending.take() {
            Some(ev) => ev,
            None => match next_event(ch, "connect") {
                Ok(ev) => ev,
                Err(ret) => return ret,
            },
        };
        match handle(cli, t, ev, Some(r)) {
            Handled::Ret(0) => {}
            Handled::Ret(ret) => return ret,
            Handled::NeedsDevice(_) => return -EINVAL,
        }
    }
    0
}

fn disconnect_events(cli: &Cli, ch: &EventChannel, t: &mut Test, mut r: Option<&mut Res<'_, '_>>) -> i32 {
    while t.disconnects_left > 0 {
        let ev = match next_event(ch, "disconnect") {
            Ok(ev) => ev,
            Err(ret) => return ret,
        };
        match handle(cli, t, ev, r.as_deref_mut()) {
            Handled::Ret(0) | Handled::NeedsDevice(_) => {}
            Handled::Ret(ret) => return ret,
        }
    }
    0
}

/// The verbs objects for every node on `dev`, then `body` with them; the
/// QPs are destroyed before the rest, and the ids forget them.
fn with_res(cli: &Cli, t: &mut Test, dev: &Device, body: impl FnOnce(&mut Test, &mut Res<'_, '_>) -> i32) -> i32 {
    let Ok(pd) = dev.alloc_pd() else {
        println!("cmatose: unable to allocate PD");
        return -ENOMEM;
    };
    let cqs = match make_cqs(cli, dev) {
        Ok(c) => c,
        Err(ret) => return ret,
    };
    let mrs = match make_mrs(cli, &pd) {
        Ok(m) => m,
        Err(ret) => return ret,
    };
    let mut qps: Vec<Option<Qp<'_>>> = (0..cli.connections).map(|_| None).collect();
    let ret = body(t, &mut Res { pd: &pd, cqs: &cqs, mrs: &mrs, qps: &mut qps });
    for n in &t.nodes {
        if let Some(id) = &n.id {
            id.forget_qp();
        }
    }
    drop(qps);
    ret
}

fn migrate() {
    println!("migrating to new event channel");
}

fn run_server(cli: &Cli, ch: &EventChannel, t: &mut Test) -> i32 {
    println!("cmatose: starting server");
    let listen = match ch.create_id(port_space::TCP) {
        Ok(id) => id,
        Err(e) => {
            println!("cmatose: listen request failed: {e}");
            return errno(&e);
        }
    };
    let bind = match addr_of(cli.bind.as_deref().unwrap_or("0.0.0.0"), &cli.port) {
        Ok(a) => a,
        Err(m) => {
            println!("{m}");
            return -EINVAL;
        }
    };
    if let Err(e) = listen.bind_addr(bind) {
        println!("cmatose: bind address failed: {e}");
        return errno(&e);
    }
    if let Err(e) = listen.listen(0) {
        println!("cmatose: failure trying to listen: {e}");
        return errno(&e);
    }
    let (dev, first) = match events_until_device(cli, ch, t) {
        Ok(Some(x)) => x,
        Ok(None) => return 0,
        Err(ret) => return ret,
    };
    with_res(cli, t, &dev, |t, r| {
        let ret = connect_events(cli, ch, t, first, r);
        if ret != 0 {
            return ret;
        }
        if cli.count() > 0 {
            println!("initiating data transfers");
            for i in 0..t.nodes.len() {
                if let Err(ret) = post_sends(cli, t, i, r) {
                    return ret;
                }
            }
            println!("completing sends");
            if let Err(ret) = poll_cqs(cli, t, r, false) {
                return ret;
            }
            println!("receiving data transfers");
            if let Err(ret) = poll_cqs(cli, t, r, true) {
                return ret;
            }
            println!("data transfers complete");
        }
        if cli.migrate {
            migrate();
        }
        println!("cmatose: disconnecting");
        for n in &mut t.nodes {
            if n.connected {
                n.connected = false;
                if let Some(id) = &n.id {
                    let _ = id.disconnect();
                }
            }
        }
        let ret = disconnect_events(cli, ch, t, Some(r));
        println!("disconnected");
        ret
    })
}

fn run_client(cli: &Cli, ch: &EventChannel, t: &mut Test, dst: &str) -> i32 {
    println!("cmatose: starting client");
    let src = match cli.bind.as_deref().map(|b| addr_of(b, "0")).transpose() {
        Ok(s) => s,
        Err(m) => {
            println!("{m}");
            return -EINVAL;
        }
    };
    let dst = match addr_of(dst, &cli.port) {
        Ok(d) => d,
        Err(m) => {
            println!("{m}");
            return -EINVAL;
        }
    };
    println!("cmatose: connecting");
    for n in &t.nodes {
        if let Some(Err(e)) = n.id.as_ref().map(|id| id.resolve_addr(src, dst, 2000)) {
            println!("cmatose: failure getting addr: {e}");
            connect_error(t);
            return errno(&e);
        }
    }
    let (dev, first) = match events_until_device(cli, ch, t) {
        Ok(Some(x)) => x,
        Ok(None) => return disconnect_events(cli, ch, t, None),
        Err(ret) => {
            let ret2 = disconnect_events(cli, ch, t, None);
            return if ret2 != 0 { ret2 } else { ret };
        }
    };
    with_res(cli, t, &dev, |t, r| {
        let mut ret = connect_events(cli, ch, t, first, r);
        if ret == 0 && cli.count() > 0 {
            println!("receiving data transfers");
            ret = poll_cqs(cli, t, r, true).err().unwrap_or(0);
            if ret == 0 {
                println!("sending replies");
                for i in 0..t.nodes.len() {
                    if let Err(e) = post_sends(cli, t, i, r) {
                        ret = e;
                        break;
                    }
                }
            }
            if ret == 0 {
                println!("data transfers complete");
            }
        }
        if ret == 0 && cli.migrate {
            migrate();
        }
        let ret2 = disconnect_events(cli, ch, t, Some(r));
        if ret2 != 0 { ret2 } else { ret }
    })
}

fn main() {
    let cli = Cli::parse();
    match cli.format.as_deref() {
        None => {}
        Some(f) if f.to_ascii_lowercase().starts_with("ip") || f.to_ascii_lowercase().starts_with("name") => {}
        Some(f) if f.to_ascii_lowercase().starts_with("gid") => {
            eprintln!("cmatose: AF_IB addresses (-f gid) are not supported by the appliance");
            exit(1)
        }
        Some(_) => eprintln!("Warning: unknown address format"),
    }
    match cli.port_space.as_deref().map(str::to_ascii_lowercase) {
        None => {}
        Some(p) if p.starts_with("tcp") => {}
        Some(p) if p.starts_with("ib") => {
            eprintln!("cmatose: the IB port space (-P ib) is not supported by the appliance");
            exit(1)
        }
        Some(_) => eprintln!("Warning: unknown port space format"),
    }
    let ctx = match cli.ring.open() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("failed to create RDMA CM event channel: {e}");
            exit(1)
        }
    };
    let ch = EventChannel::new(&ctx);
    let mut t = Test {
        nodes: (0..cli.connections).map(|_| Node::default()).collect(),
        conn_index: 0,
        connects_left: cli.connections,
        disconnects_left: 0,
    };
    if cli.server.is_some() {
        for n in &mut t.nodes {
            match ch.create_id(port_space::TCP) {
                Ok(id) => n.id = Some(id),
                Err(e) => {
                    eprintln!("cmatose: rdma_create_id: {e}");
                    exit(1)
                }
            }
        }
    }
    let ret = match &cli.server {
        Some(dst) => run_client(&cli, &ch, &mut t, dst),
        None => run_server(&cli, &ch, &mut t),
    };
    println!("test complete");
    drop(t);
    drop(ch);
    println!("return status {ret}");
    exit(ret)
}
