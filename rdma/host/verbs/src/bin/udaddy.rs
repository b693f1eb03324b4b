//! `udaddy`: rdmacm-utils' udaddy for the appliance: UD over RDMA CM's
//! SIDR. Same options, output lines and exchange as Linux's, so either side
//! may be Linux: the client resolves and "connects" `-c` UD ids (a SIDR REQ
//! each, its `-C` receives of `-S` bytes plus the 40-byte GRH posted
//! first), learns the server's QPN, Q_Key and address handle from
//! ESTABLISHED, and SENDs `-C` messages WITH IMMEDIATE (its QPN in the
//! immediate, unsignaled) on each; the server accepts each request (a
//! SIDR REP with its QPN), waits for the messages, and answers as many
//! (signaled) to the QPN the immediate names, through an address handle
//! toward the client: Linux builds it from the GRH of the first receive,
//! this one from the request's route (the CONNECT_REQUEST names the
//! client's address). The client waits for the answers. Both end with
//! `test complete` and `return status N`; N is the exit status.
//!
//! As Linux's, the port is 7174 and `-p` is the port space (0x0111, UDP);
//! `-t` reports that TOS is not supported and goes on; `-f gid` and
//! `-P ipoib` are refused. Every id of one side must land on one device.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use clap::Parser;
use verbs::cli::{RingArgs, exit};
use verbs::cm::{CmEvent, CmId, ConnParam, EventChannel, RDMA_UDP_QKEY, cm_event, port_space};
use verbs::queue::EMPTY_WC;
use verbs::{
    AccessFlags, Ah, AhAttr, Cq, Device, Error, MemoryRegion, Pd, Qp, QpCap, QpInitAttr, SendFlags, SendWr, UdDest,
    WrOp, qp_type,
};

const PORT: u16 = 7174;
/// `sizeof(struct ibv_grh)`: what a UD receive gets ahead of the payload.
const GRH: u32 = 40;
const STALL: Duration = Duration::from_secs(30);
const EINVAL: i32 = 22;
const ENOMEM: i32 = 12;
const ETIMEDOUT: i32 = 110;

#[derive(Parser)]
#[command(name = "udaddy", about = "RDMA CM datagram test over SIDR (as rdmacm-utils' udaddy)")]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
    /// server address (client side); without it, be the server
    #[arg(short = 's')]
    server: Option<String>,
    /// bind address
    #[arg(short = 'b')]
    bind: Option<String>,
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
    /// port space: 0x111 for UDP (default), 0x2 for IPOIB
    #[arg(short = 'p')]
    ps_number: Option<String>,
    /// port space: udp or ipoib
    #[arg(short = 'P')]
    port_space: Option<String>,
    /// address format: name, ip, ipv6 or gid
    #[arg(short = 'f')]
    format: Option<String>,
}

impl Cli {
    fn count(&self) -> u32 {
        if self.size == 0 { 0 } else { self.count }
    }
}

#[derive(Default)]
struct Node {
    id: Option<CmId>,
    connected: bool,
    remote_qpn: u32,
    remote_qkey: u32,
    /// The server's AH toward the client, from the request's route.
    reply_ah: Option<AhAttr>,
}

struct Test {
    nodes: Vec<Node>,
    conn_index: usize,
    connects_left: usize,
}

impl Test {
    fn node_of(&self, handle: u32) -> Option<usize> {
        self.nodes.iter().position(|n| n.id.as_ref().is_some_and(|id| id.handle() == handle))
    }
}

struct Res<'a, 'b> {
    pd: &'a Pd<'a>,
    cqs: &'a [Cq<'a>],
    mrs: &'a [MemoryRegion<'a>],
    qps: &'b mut [Option<Qp<'a>>],
    ahs: &'b mut [Option<Ah<'a>>],
}

fn errno(e: &Error) -> i32 {
    -e.errno().1
}

fn addr_of(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| "rdma_getaddrinfo error: Name or service not known".to_string())
}

fn connect_error(t: &mut Test) {
    t.connects_left = t.connects_left.saturating_sub(1);
}

/// `verify_test_params`: a message must fit the port's active MTU.
fn verify_test_params(cli: &Cli, id: &CmId) -> Result<(), i32> {
    let dev = id.device().map_err(|e| errno(&e))?;
    let port = dev.query_port(id.port_num()).map_err(|e| errno(&e))?;
    let mtu = 1u32 << (port.active_mtu + 7);
    if cli.count() > 0 && cli.size > mtu {
        println!("udaddy: message_size {} is larger than active mtu {mtu}", cli.size);
        return Err(-EINVAL);
    }
    Ok(())
}

fn init_node(cli: &Cli, t: &Test, i: usize, r: &mut Res<'_, '_>) -> Result<(), i32> {
    let id = t.nodes[i].id.as_ref().ok_or(-EINVAL)?;
    verify_test_params(cli, id)?;
    if id.device().map(|d| d.index()).ok() != Some(r.pd.device().index()) {
        println!("udaddy: connection {i} is on another device than the first one (not supported)");
        return Err(-EINVAL);
    }
    let n = cli.count().max(1);
    let attr = QpInitAttr {
        qp_type: qp_type::UD,
        cap: QpCap { max_send_wr: n, max_recv_wr: n, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qp = id.create_qp(r.pd, &r.cqs[i], &r.cqs[i], None, &attr).map_err(|e| {
        println!("udaddy: unable to create QP: {e}");
        errno(&e)
    })?;
    let qp = r.qps[i].insert(qp);
    if cli.count() > 0 {
        let sge = [r.mrs[i].sge(0, cli.size + GRH).map_err(|e| errno(&e))?];
        let wrs: Vec<(u64, &[verbs::Sge])> = (0..cli.count()).map(|_| (i as u64, &sge[..])).collect();
        qp.post_recv(&wrs).map_err(|e| {
            println!("failed to post receives: {}", errno(&e));
            errno(&e)
        })?;
    }
    Ok(())
}

fn post_sends(cli: &Cli, t: &Test, i: usize, r: &Res<'_, '_>, signaled: bool) -> Result<(), i32> {
    let n = &t.nodes[i];
    let (Some(qp), Some(ah), true) = (r.qps[i].as_ref(), r.ahs[i].as_ref(), n.connected) else { return Ok(()) };
    if cli.count() == 0 {
        return Ok(());
    }
    let sge = [r.mrs[i].sge(0, cli.size).map_err(|e| errno(&e))?];
    let flags = if signaled { SendFlags::SIGNALED } else { SendFlags(0) };
    let ud = UdDest { ah, remote_qpn: n.remote_qpn, remote_qkey: n.remote_qkey };
    for _ in 0..cli.count() {
        let wr = SendWr { wr_id: i as u64, op: WrOp::SendWithImm(qp.qp_num()), sg_list: &sge, flags, ud: Some(ud) };
        qp.post_send(&[wr]).map_err(|e| {
            println!("failed to post sends: {}", errno(&e));
            errno(&e)
        })?;
    }
    Ok(())
}

/// `poll_cqs`: `-C` completions from each connected node's CQ; the server
/// makes its reply AH at the first (the QPN to answer is its immediate).
fn poll_cqs(cli: &Cli, t: &mut Test, r: &mut Res<'_, '_>) -> Result<(), i32> {
    let mut wc = [EMPTY_WC; 8];
    for i in 0..t.nodes.len() {
        if !t.nodes[i].connected {
            continue;
        }
        let (mut done, mut last) = (0, Instant::now());
        while done < cli.count() {
            let want = (cli.count() - done).min(8) as usize;
            let n = r.cqs[i].poll(&mut wc[..want]).map_err(|e| {
                println!("udaddy: failed polling CQ: {}", errno(&e));
                errno(&e)
            })?;
            if let Some(bad) = wc[..n].iter().find(|w| !w.status.is_success()) {
                println!("udaddy: completion failed on connection {i}: {}", bad.status);
                return Err(-5);
            }
            if n > 0 && r.ahs[i].is_none() {
                create_reply_ah(t, i, r, &wc[0]).inspect_err(|_| println!("udaddy: failed to create reply AH"))?;
            }
            done += n as u32;
            if n > 0 {
                last = Instant::now();
            } else if last.elapsed() > STALL {
                println!("udaddy: no completion on connection {i} for {}s", STALL.as_secs());
                return Err(-ETIMEDOUT);
            } else {
                std::thread::yield_now();
            }
        }
    }
    Ok(())
}

fn create_reply_ah(t: &mut Test, i: usize, r: &mut Res<'_, '_>, wc: &verbs::WorkCompletion) -> Result<(), i32> {
    let attr = t.nodes[i].reply_ah.ok_or(-EINVAL)?;
    let ah = r.pd.create_ah(&attr).map_err(|e| errno(&e))?;
    r.ahs[i] = Some(ah);
    t.nodes[i].remote_qpn = wc.imm_data.unwrap_or(wc.src_qp);
    t.nodes[i].remote_qkey = RDMA_UDP_QKEY;
    Ok(())
}

enum Handled {
    Ret(i32),
    NeedsDevice(CmEvent),
}

fn handle(cli: &Cli, t: &mut Test, mut ev: CmEvent, res: Option<&mut Res<'_, '_>>) -> Handled {
    let node = t.node_of(ev.id);
    match ev.event {
        cm_event::ADDR_RESOLVED => {
            let Some(i) = node else { return Handled::Ret(0) };
            if cli.tos.is_some() {
                println!("udaddy: set TOS option failed: Operation not supported");
            }
            if let Some(Err(e)) = t.nodes[i].id.as_ref().map(|id| id.resolve_route(2000)) {
                println!("udaddy: resolve route failed: {e}");
                connect_error(t);
                return Handled::Ret(errno(&e));
            }
            Handled::Ret(0)
        }
        cm_event::ROUTE_RESOLVED => {
            let Some(i) = node else { return Handled::Ret(0) };
            let Some(r) = res else { return Handled::NeedsDevice(ev) };
            let ret = match init_node(cli, t, i, r) {
                Err(ret) => ret,
                Ok(()) => match t.nodes[i].id.as_ref().map(|id| id.connect(&ConnParam::default())) {
                    Some(Err(e)) => {
                        println!("udaddy: failure connecting: {e}");
                        errno(&e)
                    }
                    _ => 0,
                },
            };
            if ret != 0 {
                connect_error(t);
            }
            Handled::Ret(ret)
        }
        cm_event::CONNECT_REQUEST => {
            let Some(id) = ev.request.take() else { return Handled::Ret(0) };
            if t.conn_index == t.nodes.len() {
                println!("udaddy: failing connection request");
                let _ = id.reject(&[]);
                return Handled::Ret(-ENOMEM);
            }
            let Some(r) = res else {
                ev.request = Some(id);
                return Handled::NeedsDevice(ev);
            };
            let i = t.conn_index;
            t.conn_index += 1;
            t.nodes[i].reply_ah =
                id.route().map(|route| AhAttr { is_global: 1, port_num: id.port_num(), ..route.ah_attr });
            t.nodes[i].id = Some(id);
            let ret = match init_node(cli, t, i, r) {
                Err(ret) => ret,
                Ok(()) => {
                    let qp_num = r.qps[i].as_ref().map_or(0, |q| q.qp_num());
                    match t.nodes[i].id.as_ref().map(|id| id.accept(&ConnParam { qp_num, ..Default::default() })) {
                        Some(Err(e)) => {
                            println!("udaddy: failure accepting: {e}");
                            errno(&e)
                        }
                        _ => 0,
                    }
                }
            };
            if ret != 0 {
                connect_error(t);
                println!("udaddy: failing connection request");
                if let Some(id) = t.nodes[i].id.take() {
                    let _ = id.reject(&[]);
                    r.qps[i] = None;
                }
                return Handled::Ret(ret);
            }
            t.nodes[i].connected = true;
            connect_error(t);
            Handled::Ret(0)
        }
        cm_event::ESTABLISHED => {
            let Some(i) = node else { return Handled::Ret(0) };
            let Some(r) = res else { return Handled::Ret(0) };
            // resolved_handler: the server's QPN, Q_Key and AH.
            t.nodes[i].remote_qpn = ev.param.qp_num;
            t.nodes[i].remote_qkey = ev.param.qkey;
            let ah = ev.ah_attr.ok_or(Error::Protocol("UD ESTABLISHED without an AH".into()));
            match ah.and_then(|a| r.pd.create_ah(&a)) {
                Ok(ah) => r.ahs[i] = Some(ah),
                Err(e) => {
                    println!("udaddy: failure creating address handle: {e}");
                    connect_error(t);
                    return Handled::Ret(-1);
                }
            }
            t.nodes[i].connected = true;
            connect_error(t);
            Handled::Ret(0)
        }
        cm_event::ADDR_ERROR
        | cm_event::ROUTE_ERROR
        | cm_event::CONNECT_ERROR
        | cm_event::UNREACHABLE
        | cm_event::REJECTED => {
            println!("udaddy: event: {}, error: {}", ev.name(), ev.status);
            connect_error(t);
            Handled::Ret(ev.status)
        }
        _ => Handled::Ret(0),
    }
}

fn next_event(ch: &EventChannel) -> Result<CmEvent, i32> {
    loop {
        match ch.get_cm_event(Duration::from_secs(3600)) {
            Ok(ev) => return Ok(ev),
            Err(Error::TimedOut { .. } | Error::NothingCame { .. }) => continue,
            Err(e) => {
                println!("udaddy: failure in rdma_get_cm_event: {e}");
                return Err(errno(&e));
            }
        }
    }
}

fn events_until_device(cli: &Cli, ch: &EventChannel, t: &mut Test) -> Result<Option<(Device, CmEvent)>, i32> {
    while t.connects_left > 0 {
        match handle(cli, t, next_event(ch)?, None) {
            Handled::Ret(0) => {}
            Handled::Ret(ret) => return Err(ret),
            Handled::NeedsDevice(ev) => {
                let id = ev.request.as_ref().or_else(|| t.node_of(ev.id).and_then(|i| t.nodes[i].id.as_ref()));
                let dev = id.ok_or(-EINVAL)?.device().map_err(|e| {
                    println!("udaddy: unable to allocate PD");
                    errno(&e)
                })?;
                return Ok(Some((dev, ev)));
            }
        }
    }
    Ok(None)
}

fn connect_events(cli: &Cli, ch: &EventChannel, t: &mut Test, first: CmEvent, r: &mut Res<'_, '_>) -> i32 {
    let mut pending = Some(first);
    while t.connects_left > 0 {
        let ev = match pending.take().map_or_else(|| next_event(ch), Ok) {
            Ok(ev) => ev,
            Err(ret) => return ret,
        };
        match handle(cli, t, ev, Some(r)) {
            Handled::Ret(0) => {}
            Handled::Ret(ret) => return ret,
            Handled::NeedsDevice(_) => return -EINVAL,
        }
    }
    0
}

fn with_res(cli: &Cli, t: &mut Test, dev: &Device, body: impl FnOnce(&mut Test, &mut Res<'_, '_>) -> i32) -> i32 {
    let Ok(pd) = dev.alloc_pd() else {
        println!("udaddy: unable to allocate PD");
        return -ENOMEM;
    };
    let cqe = if cli.count() > 0 { cli.count() * 2 } else { 2 };
    let cqs: Result<Vec<Cq<'_>>, _> = (0..cli.connections).map(|_| dev.create_cq(cqe, 0)).collect();
    let Ok(cqs) = cqs else {
        println!("udaddy: unable to create CQ");
        return -ENOMEM;
    };
    let mrs: Result<Vec<MemoryRegion<'_>>, _> =
        (0..cli.connections).map(|_| pd.reg_mr((cli.size + GRH) as usize, AccessFlags::LOCAL_WRITE)).collect();
    let Ok(mrs) = mrs else {
        println!("failed to reg MR");
        println!("udaddy: failed to create messages: -1");
        return -1;
    };
    let mut qps: Vec<Option<Qp<'_>>> = (0..cli.connections).map(|_| None).collect();
    let mut ahs: Vec<Option<Ah<'_>>> = (0..cli.connections).map(|_| None).collect();
    let ret = body(t, &mut Res { pd: &pd, cqs: &cqs, mrs: &mrs, qps: &mut qps, ahs: &mut ahs });
    drop(ahs);
    for n in &t.nodes {
        if let Some(id) = &n.id {
            id.forget_qp();
        }
    }
    drop(qps);
    ret
}

fn run_server(cli: &Cli, ch: &EventChannel, t: &mut Test, ps: u16) -> i32 {
    println!("udaddy: starting server");
    let listen = match ch.create_id(ps) {
        Ok(id) => id,
        Err(e) => {
            println!("udaddy: listen request failed: {e}");
            return errno(&e);
        }
    };
    let bind = match addr_of(cli.bind.as_deref().unwrap_or("0.0.0.0"), PORT) {
        Ok(a) => a,
        Err(m) => {
            println!("{m}");
            return -EINVAL;
        }
    };
    if let Err(e) = listen.bind_addr(bind) {
        println!("udaddy: bind address failed: {e}");
        return errno(&e);
    }
    if let Err(e) = listen.listen(0) {
        println!("udaddy: failure trying to listen: {e}");
        return errno(&e);
    }
    // udaddy's server goes on whatever its connect events said.
    let (dev, first) = match events_until_device(cli, ch, t) {
        Ok(Some(x)) => x,
        Ok(None) | Err(_) => return 0,
    };
    with_res(cli, t, &dev, |t, r| {
        connect_events(cli, ch, t, first, r);
        if cli.count() > 0 {
            println!("receiving data transfers");
            if let Err(ret) = poll_cqs(cli, t, r) {
                return ret;
            }
            println!("sending replies");
            for i in 0..t.nodes.len() {
                if let Err(ret) = post_sends(cli, t, i, r, true) {
                    return ret;
                }
            }
            if let Err(ret) = poll_cqs(cli, t, r) {
                return ret;
            }
            println!("data transfers complete");
        }
        0
    })
}

fn run_client(cli: &Cli, ch: &EventChannel, t: &mut Test, dst: &str) -> i32 {
    println!("udaddy: starting client");
    let src = match cli.bind.as_deref().map(|b| addr_of(b, 0)).transpose() {
        Ok(s) => s,
        Err(m) => {
            println!("{m}");
            return -EINVAL;
        }
    };
    let dst = match addr_of(dst, PORT) {
        Ok(d) => d,
        Err(m) => {
            println!("{m}");
            return -EINVAL;
        }
    };
    println!("udaddy: connecting");
    for n in &t.nodes {
        if let Some(Err(e)) = n.id.as_ref().map(|id| id.resolve_addr(src, dst, 2000)) {
            println!("udaddy: failure getting addr: {e}");
            connect_error(t);
            return errno(&e);
        }
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
                if let Err(ret) = post_sends(cli, t, i, r, false) {
                    return ret;
                }
            }
            println!("receiving data transfers");
            if let Err(ret) = poll_cqs(cli, t, r) {
                return ret;
            }
            println!("data transfers complete");
        }
        0
    })
}

/// The port space `-p` (a number, as strtol reads it) or `-P` names.
fn port_space_of(cli: &Cli) -> Result<u16, String> {
    let mut ps = port_space::UDP;
    if let Some(p) = &cli.ps_number {
        let p = p.trim();
        let v = match p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            Some(hex) => u16::from_str_radix(hex, 16),
            None if p.len() > 1 && p.starts_with('0') => u16::from_str_radix(&p[1..], 8),
            None => p.parse(),
        };
        ps = v.map_err(|_| format!("udaddy: bad port space {p}"))?;
    }
    match cli.port_space.as_deref().map(str::to_ascii_lowercase) {
        Some(p) if p.starts_with("ipoib") => ps = 0x0002,
        Some(p) if !p.starts_with("udp") => eprintln!("Warning: unknown port space format"),
        _ => {}
    }
    if ps != port_space::UDP {
        return Err(format!(
            "udaddy: port space {ps:#x} is not supported by the appliance (only UDP, {:#x})",
            port_space::UDP
        ));
    }
    Ok(ps)
}

fn main() {
    let cli = Cli::parse();
    match cli.format.as_deref().map(str::to_ascii_lowercase) {
        Some(f) if f.starts_with("gid") => {
            eprintln!("udaddy: AF_IB addresses (-f gid) are not supported by the appliance");
            exit(1)
        }
        Some(f) if !f.starts_with("ip") && !f.starts_with("name") => eprintln!("Warning: unknown address format"),
        _ => {}
    }
    let ps = port_space_of(&cli).unwrap_or_else(|m| {
        eprintln!("{m}");
        exit(1)
    });
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
    };
    if cli.server.is_some() {
        for n in &mut t.nodes {
            match ch.create_id(ps) {
                Ok(id) => n.id = Some(id),
                Err(e) => {
                    eprintln!("udaddy: rdma_create_id: {e}");
                    exit(1)
                }
            }
        }
    }
    let ret = match &cli.server {
        Some(dst) => run_client(&cli, &ch, &mut t, dst),
        None => run_server(&cli, &ch, &mut t, ps),
    };
    println!("test complete");
    drop(t);
    drop(ch);
    println!("return status {ret}");
    exit(ret)
}
