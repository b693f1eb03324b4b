//! `rping`: rdmacm-utils' rping for the appliance, over RDMA CM. Same
//! options, output and wire protocol as Linux's, so either side may be
//! Linux: the client advertises its start buffer (a SEND of the 16-byte
//! `{ be64 addr, be32 rkey, be32 size }`), the server RDMA READs it and
//! says "go ahead" with a SEND, the client advertises its sink buffer, the
//! server RDMA WRITEs the data back (`strlen + 1` bytes) and says "go
//! ahead" again; with `-V` the client compares both buffers.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use clap::Parser;
use verbs::cli::{RingArgs, exit, fail};
use verbs::cm::{CmEvent, CmId, ConnParam, EventChannel, cm_event, port_space};
use verbs::{
    AccessFlags, Cq, Error, MemoryRegion, Qp, QpCap, QpInitAttr, SendFlags, SendWr, WorkCompletion, WrOp, qp_state,
    qp_type, wc_opcode,
};

/// rping.c's `sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT)`: the macro
/// stringifies the name, not its value, so 8 + 15, as Linux's rping says.
const MIN_SIZE: usize = 8 + 15;
const BUFSIZE: usize = 64 * 1024;
const SQ_DEPTH: u32 = 16;
const INFO: usize = 16;
/// How long one step may take before the run is declared stuck.
const STALL: Duration = Duration::from_secs(30);

#[derive(Parser)]
#[command(name = "rping", about = "RDMA CM ping-pong (as rdmacm-utils' rping)", disable_help_flag = true)]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
    /// server side
    #[arg(short = 's')]
    server: bool,
    /// client side
    #[arg(short = 'c', conflicts_with = "server")]
    client: bool,
    /// address
    #[arg(short = 'a')]
    addr: Option<String>,
    /// source address to bind to for client
    #[arg(short = 'I')]
    source: Option<String>,
    /// port
    #[arg(short = 'p', default_value_t = 7174)]
    port: u16,
    /// ping count times (0: forever)
    #[arg(short = 'C', default_value_t = 0)]
    count: u32,
    /// ping data size
    #[arg(short = 'S', default_value_t = 64)]
    size: usize,
    /// display ping data to stdout
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    verbose: u8,
    /// validate ping data
    #[arg(short = 'V', action = clap::ArgAction::Count)]
    validate: u8,
    /// debug printfs
    #[arg(short = 'd', action = clap::ArgAction::Count)]
    debug: u8,
    /// persistent server mode allowing multiple connections (one at a time here)
    #[arg(short = 'P')]
    persistent: bool,
    /// use self-created, self-modified QP
    #[arg(short = 'q')]
    self_qp: bool,
    /// Print help
    #[arg(long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
}

macro_rules! debug {
    ($cli:expr, $($t:tt)*) => { if $cli.debug > 0 { println!($($t)*); } };
}

fn addr_of(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("getaddrinfo failed - invalid hostname or IP address {host}"))
}

/// What a wait ended with.
enum Wake {
    Wc(WorkCompletion),
    Disconnected,
}

/// The CM side of rping's event handler: errors end the run as rping's
/// `exit(ret)` does, DISCONNECTED ends the test loop.
fn cm_event_seen(cli: &Cli, ev: &CmEvent) -> Option<Wake> {
    debug!(
        cli,
        "cma_event type {} cma_id {} ({})",
        ev.name(),
        ev.id,
        if ev.listen_id.is_some() { "parent" } else { "child" }
    );
    match ev.event {
        cm_event::DISCONNECTED => {
            eprintln!("{} DISCONNECT EVENT...", if cli.server { "server" } else { "client" });
            Some(Wake::Disconnected)
        }
        cm_event::ADDR_ERROR
        | cm_event::ROUTE_ERROR
        | cm_event::CONNECT_ERROR
        | cm_event::UNREACHABLE
        | cm_event::REJECTED => {
            eprintln!("cma event {}, error {}", ev.name(), ev.status);
            exit(255)
        }
        cm_event::DEVICE_REMOVAL => {
            eprintln!("cma detected device removal!!!!");
            exit(255)
        }
        cm_event::ESTABLISHED | cm_event::CONNECT_RESPONSE | cm_event::TIMEWAIT_EXIT => None,
        _ => {
            eprintln!("unhandled event: {}, ignoring", ev.name());
            None
        }
    }
}

/// The next completion of `cq`, or DISCONNECTED from the CM, whichever
/// comes first; CM events are polled between completion polls.
fn wait(cli: &Cli, ch: &EventChannel, cq: &Cq<'_>) -> Result<Wake, Error> {
    let start = Instant::now();
    let mut last_cm = Instant::now();
    loop {
        if let Some(wc) = cq.poll_one()? {
            return Ok(Wake::Wc(wc));
        }
        if last_cm.elapsed() > Duration::from_millis(1) {
            if let Some(ev) = ch.poll_cm_event()?
                && let Some(w) = cm_event_seen(cli, &ev)
            {
                return Ok(w);
            }
            last_cm = Instant::now();
        }
        if start.elapsed() > STALL {
            return Err(Error::NothingCame { what: "rping completion", waited: start.elapsed() });
        }
        std::thread::yield_now();
    }
}

/// Wait for the next CM event rping's flow needs, handling the rest.
fn wait_event(cli: &Cli, ch: &EventChannel, want: u32) -> Result<CmEvent, Error> {
    loop {
        let ev = ch.get_cm_event(STALL)?;
        if ev.event == want {
            debug!(cli, "cma_event type {} cma_id {}", ev.name(), ev.id);
            return Ok(ev);
        }
        if let Some(Wake::Disconnected) = cm_event_seen(cli, &ev) {
            return Err(Error::InvalidArgument("disconnected while connecting"));
        }
    }
}

struct Buffers<'a> {
    recv: MemoryRegion<'a>,
    send: MemoryRegion<'a>,
    rdma: MemoryRegion<'a>,
    start: Option<MemoryRegion<'a>>,
}

fn qp_attr() -> QpInitAttr {
    QpInitAttr {
        qp_type: qp_type::RC,
        cap: QpCap { max_send_wr: SQ_DEPTH, max_recv_wr: 2, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    }
}

fn conn_param(qp: &Qp<'_>, self_qp: bool) -> ConnParam {
    ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num: if self_qp { qp.qp_num() } else { 0 },
        ..Default::default()
    }
}

/// `-q`: the QP created and moved by hand with `rdma_init_qp_attr`.
fn self_modify(id: &CmId, qp: &Qp<'_>) -> Result<(), Error> {
    for state in [qp_state::INIT, qp_state::RTR, qp_state::RTS] {
        let (attr, mask) = id.init_qp_attr(state)?;
        qp.modify(&attr, mask)?;
    }
    Ok(())
}

fn post_recv(qp: &Qp<'_>, b: &Buffers<'_>) -> Result<(), Error> {
    qp.post_recv(&[(0, &[b.recv.sge(0, INFO as u32)?])])
}

fn send_info(qp: &Qp<'_>, b: &Buffers<'_>, mr: &MemoryRegion<'_>, size: usize) -> Result<(), Error> {
    let mut info = [0u8; INFO];
    info[..8].copy_from_slice(&mr.addr().to_be_bytes());
    info[8..12].copy_from_slice(&mr.rkey().to_be_bytes());
    info[12..].copy_from_slice(&(size as u32).to_be_bytes());
    b.send.write(0, &info)?;
    let sge = [b.send.sge(0, INFO as u32)?];
    qp.post_send(&[SendWr { wr_id: 0, op: WrOp::Send, sg_list: &sge, flags: SendFlags::SIGNALED, ud: None }])
}

/// Wait for a RECV (re-posting it, as rping's CQ handler does), skipping
/// SEND completions; `None` on DISCONNECTED.
fn wait_recv(cli: &Cli, ch: &EventChannel, qp: &Qp<'_>, cq: &Cq<'_>, b: &Buffers<'_>) -> Result<Option<()>, String> {
    wait_op(cli, ch, cq, wc_opcode::RECV, |wc| {
        if wc.byte_len as usize != INFO {
            return Err(format!("Received bogus data, size {}", wc.byte_len));
        }
        post_recv(qp, b).map_err(|e| format!("post recv error: {e}"))
    })
}

fn wait_op(
    cli: &Cli,
    ch: &EventChannel,
    cq: &Cq<'_>,
    want: u32,
    mut on: impl FnMut(&WorkCompletion) -> Result<(), String>,
) -> Result<Option<()>, String> {
    loop {
        match wait(cli, ch, cq).map_err(|e| e.to_string())? {
            Wake::Disconnected => return Ok(None),
            Wake::Wc(wc) if !wc.status.is_success() => {
                if wc.status.0 == verbs_ring::abi::wc_status::WR_FLUSH_ERR {
                    continue;
                }
                return Err(format!("cq completion failed status {}", wc.status.0));
            }
            Wake::Wc(wc) if wc.opcode == want => {
                on(&wc)?;
                return Ok(Some(()));
            }
            Wake::Wc(wc) if wc.opcode == wc_opcode::SEND => debug!(cli, "send completion"),
            Wake::Wc(wc) => return Err(format!("unexpected completion opcode {}", wc.opcode)),
        }
    }
}

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn run_server(cli: &Cli, ch: &EventChannel, listen: &CmId) -> Result<(), String> {
    let mut req = wait_event(cli, ch, cm_event::CONNECT_REQUEST).map_err(|e| e.to_string())?;
    let id = req.request.take().ok_or("CONNECT_REQUEST without an id")?;
    let _ = listen;
    let dev = id.device().map_err(|e| format!("setup_qp failed: {e}"))?;
    let pd = dev.alloc_pd().map_err(|e| format!("ibv_alloc_pd failed: {e}"))?;
    let cq = dev.create_cq(SQ_DEPTH * 2, 0).map_err(|e| format!("ibv_create_cq failed: {e}"))?;
    let qp = if cli.self_qp {
        let qp = Qp::create(&pd, &cq, &cq, None, &qp_attr()).map_err(|e| format!("ibv_create_qp: {e}"))?;
        self_modify(&id, &qp).map_err(|e| format!("rping_modify_qp: {e}"))?;
        qp
    } else {
        id.create_qp(&pd, &cq, &cq, None, &qp_attr()).map_err(|e| format!("rdma_create_qp: {e}"))?
    };
    let size = cli.size;
    let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
    let reg = |len, a| pd.reg_mr(len, a).map_err(|e| format!("rping_setup_buffers failed: {e}"));
    let b = Buffers {
        recv: reg(INFO, AccessFlags::LOCAL_WRITE)?,
        send: reg(INFO, AccessFlags(0))?,
        rdma: reg(size, rw)?,
        start: None,
    };
    post_recv(&qp, &b).map_err(|e| format!("ibv_post_recv failed: {e}"))?;
    id.accept(&conn_param(&qp, cli.self_qp)).map_err(|e| format!("rdma_accept: {e}"))?;
    wait_event(cli, ch, cm_event::ESTABLISHED).map_err(|e| format!("connect error {e}"))?;

    let result = (|| -> Result<(), String> {
        loop {
            let Some(()) = wait_recv(cli, ch, &qp, &cq, &b)? else { return Ok(()) };
            let mut info = [0u8; INFO];
            b.recv.read(0, &mut info).map_err(|e| e.to_string())?;
            let addr = u64::from_be_bytes(info[..8].try_into().unwrap_or_default());
            let rkey = u32::from_be_bytes(info[8..12].try_into().unwrap_or_default());
            let len = u32::from_be_bytes(info[12..].try_into().unwrap_or_default());
            debug!(cli, "Received rkey {rkey:x} addr {addr:x} len {len} from peer");
            if len as usize > size {
                return Err(format!("peer's buffer of {len} bytes is larger than ours ({size})"));
            }
            let sge = [b.rdma.sge(0, len).map_err(|e| e.to_string())?];
            let read = SendWr {
                wr_id: 1,
                op: WrOp::Read { remote_addr: addr, rkey },
                sg_list: &sge,
                flags: SendFlags::SIGNALED,
                ud: None,
            };
            qp.post_send(&[read]).map_err(|e| format!("post send error {e}"))?;
            debug!(cli, "server posted rdma read req ");
            if wait_op(cli, ch, &cq, wc_opcode::RDMA_READ, |_| Ok(()))?.is_none() {
                return Ok(());
            }
            let data = b.rdma.to_vec(0, size).map_err(|e| e.to_string())?;
            if cli.verbose > 0 {
                println!("server ping data: {}", cstr(&data));
            }
            go_ahead(&qp, &b)?;
            debug!(cli, "server posted go ahead");
            let Some(()) = wait_recv(cli, ch, &qp, &cq, &b)? else { return Ok(()) };
            b.recv.read(0, &mut info).map_err(|e| e.to_string())?;
            let addr = u64::from_be_bytes(info[..8].try_into().unwrap_or_default());
            let rkey = u32::from_be_bytes(info[8..12].try_into().unwrap_or_default());
            let wlen = (data.iter().position(|&c| c == 0).unwrap_or(size - 1) + 1).min(size) as u32;
            let sge = [b.rdma.sge(0, wlen).map_err(|e| e.to_string())?];
            let write = SendWr {
                wr_id: 2,
                op: WrOp::Write { remote_addr: addr, rkey },
                sg_list: &sge,
                flags: SendFlags::SIGNALED,
                ud: None,
            };
            qp.post_send(&[write]).map_err(|e| format!("post send error {e}"))?;
            if wait_op(cli, ch, &cq, wc_opcode::RDMA_WRITE, |_| Ok(()))?.is_none() {
                return Ok(());
            }
            debug!(cli, "server rdma write complete ");
            go_ahead(&qp, &b)?;
        }
    })();
    let _ = id.disconnect();
    id.forget_qp();
    drop(qp);
    drop(id);
    result.map_err(|e| format!("{e}\nrping server failed: -1"))
}

fn go_ahead(qp: &Qp<'_>, b: &Buffers<'_>) -> Result<(), String> {
    let sge = [b.send.sge(0, INFO as u32).map_err(|e| e.to_string())?];
    qp.post_send(&[SendWr { wr_id: 0, op: WrOp::Send, sg_list: &sge, flags: SendFlags::SIGNALED, ud: None }])
        .map_err(|e| format!("post send error {e}"))
}

/// The client's ping text: `"rdma-ping-N: "` then letters from `start`
/// cycling 'A'..='z', NUL at the end.
fn format_ping(buf: &mut [u8], ping: u32, start: u8) {
    let head = format!("rdma-ping-{ping}: ");
    let n = head.len().min(buf.len());
    buf[..n].copy_from_slice(&head.as_bytes()[..n]);
    let mut c = start;
    for b in buf.iter_mut().skip(n) {
        *b = c;
        c = if c >= 122 { 65 } else { c + 1 };
    }
    if let Some(last) = buf.last_mut() {
        *last = 0;
    }
}

fn run_client(cli: &Cli, ch: &EventChannel, dst: SocketAddr) -> Result<(), String> {
    let id = ch.create_id(port_space::TCP).map_err(|e| format!("rdma_create_id: {e}"))?;
    let src = match &cli.source {
        Some(s) => Some(addr_of(s, 0)?),
        None => None,
    };
    id.resolve_addr(src, dst, 2000).map_err(|e| format!("rdma_resolve_addr: {e}"))?;
    wait_event(cli, ch, cm_event::ADDR_RESOLVED).map_err(|e| format!("waiting for addr/route resolution: {e}"))?;
    id.resolve_route(2000).map_err(|e| format!("rdma_resolve_route: {e}"))?;
    wait_event(cli, ch, cm_event::ROUTE_RESOLVED).map_err(|e| format!("waiting for addr/route resolution: {e}"))?;
    debug!(cli, "rdma_resolve_addr - rdma_resolve_route successful");
    let dev = id.device().map_err(|e| format!("setup_qp failed: {e}"))?;
    let pd = dev.alloc_pd().map_err(|e| format!("ibv_alloc_pd failed: {e}"))?;
    let cq = dev.create_cq(SQ_DEPTH * 2, 0).map_err(|e| format!("ibv_create_cq failed: {e}"))?;
    let qp = if cli.self_qp {
        Qp::create(&pd, &cq, &cq, None, &qp_attr()).map_err(|e| format!("ibv_create_qp: {e}"))?
    } else {
        id.create_qp(&pd, &cq, &cq, None, &qp_attr()).map_err(|e| format!("rdma_create_qp: {e}"))?
    };
    let size = cli.size;
    let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
    let reg = |len, a| pd.reg_mr(len, a).map_err(|e| format!("rping_setup_buffers failed: {e}"));
    let b = Buffers {
        recv: reg(INFO, AccessFlags::LOCAL_WRITE)?,
        send: reg(INFO, AccessFlags(0))?,
        rdma: reg(size, rw)?,
        start: Some(reg(size, rw)?),
    };
    let start_mr = b.start.as_ref().ok_or("no start buffer")?;
    post_recv(&qp, &b).map_err(|e| format!("ibv_post_recv failed: {e}"))?;
    id.connect(&conn_param(&qp, cli.self_qp)).map_err(|e| format!("rdma_connect: {e}"))?;
    if cli.self_qp {
        wait_event(cli, ch, cm_event::CONNECT_RESPONSE).map_err(|e| format!("connect error {e}"))?;
        self_modify(&id, &qp).map_err(|e| format!("rping_modify_qp: {e}"))?;
        id.establish().map_err(|e| format!("rdma_establish: {e}"))?;
    } else {
        wait_event(cli, ch, cm_event::ESTABLISHED).map_err(|e| format!("connect error {e}"))?;
    }
    debug!(cli, "rdma_connect successful");

    let result = (|| -> Result<(), String> {
        let mut start = 65u8;
        let mut ping = 0u32;
        let mut sbuf = vec![0u8; size];
        while cli.count == 0 || ping < cli.count {
            format_ping(&mut sbuf, ping, start);
            start = if start >= 122 { 65 } else { start + 1 };
            start_mr.write(0, &sbuf).map_err(|e| e.to_string())?;
            send_info(&qp, &b, start_mr, size).map_err(|e| format!("post send error {e}"))?;
            if wait_recv(cli, ch, &qp, &cq, &b)?.is_none() {
                return Ok(());
            }
            send_info(&qp, &b, &b.rdma, size).map_err(|e| format!("post send error {e}"))?;
            if wait_recv(cli, ch, &qp, &cq, &b)?.is_none() {
                return Ok(());
            }
            let got = b.rdma.to_vec(0, size).map_err(|e| e.to_string())?;
            if cli.validate > 0 && got != sbuf {
                return Err("data mismatch!".into());
            }
            if cli.verbose > 0 {
                println!("ping data: {}", cstr(&got));
            }
            ping += 1;
        }
        Ok(())
    })();
    if cli.self_qp {
        let err = verbs::QpAttr { qp_state: qp_state::ERR, ..Default::default() };
        let _ = qp.modify(&err, verbs::qp_attr_mask::STATE);
    }
    let _ = id.disconnect();
    // The DISCONNECTED that answers our DREQ (printed as rping does).
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match ch.poll_cm_event() {
            Ok(Some(ev)) if ev.event == cm_event::DISCONNECTED => {
                cm_event_seen(cli, &ev);
                break;
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
            Err(_) => break,
        }
    }
    id.forget_qp();
    drop(qp);
    result.map_err(|e| format!("{e}\nrping client failed: -1"))
}

fn main() {
    let cli = Cli::parse();
    if !cli.server && !cli.client {
        println!("rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]");
        println!("rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]");
        exit(22);
    }
    if cli.size < MIN_SIZE || cli.size > BUFSIZE - 1 {
        eprintln!("Invalid size {} (valid range is {MIN_SIZE} to {BUFSIZE})", cli.size);
        exit(22);
    }
    let ctx = cli.ring.open().unwrap_or_else(|e| fail("rping", &e));
    let ch = EventChannel::new(&ctx);
    let code = if cli.server {
        let any = if cli.addr.as_deref().is_some_and(|a| a.contains(':')) { "::" } else { "0.0.0.0" };
        let bind = match addr_of(cli.addr.as_deref().unwrap_or(any), cli.port) {
            Ok(a) => a,
            Err(e) => {
                println!("{e}");
                exit(22)
            }
        };
        let listen = ch.create_id(port_space::TCP).unwrap_or_else(|e| fail("rdma_create_id", &e));
        listen.bind_addr(bind).unwrap_or_else(|e| fail("rdma_bind_addr", &e));
        debug!(cli, "rdma_bind_addr successful");
        listen.listen(3).unwrap_or_else(|e| fail("rdma_listen", &e));
        loop {
            match run_server(&cli, &ch, &listen) {
                Ok(()) if cli.persistent => continue,
                Ok(()) => break 0,
                Err(e) => {
                    eprintln!("{e}");
                    if cli.persistent {
                        continue;
                    }
                    break 255;
                }
            }
        }
    } else {
        let Some(a) = cli.addr.as_deref() else {
            println!("rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]");
            exit(22)
        };
        let dst = match addr_of(a, cli.port) {
            Ok(d) => d,
            Err(e) => {
                println!("{e}");
                exit(22)
            }
        };
        match run_client(&cli, &ch, dst) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("{e}");
                255
            }
        }
    };
    drop(ch);
    exit(code)
}

#[cfg(test)]
mod tests {
    use super::format_ping;

    #[test]
    fn ping_text_is_rpings() {
        let mut b = [0u8; 26];
        format_ping(&mut b, 0, b'A');
        assert_eq!(&b, b"rdma-ping-0: ABCDEFGHIJKL\0");
        format_ping(&mut b, 12, b'y');
        assert_eq!(&b, b"rdma-ping-12: yzABCDEFGHI\0");
    }
}
