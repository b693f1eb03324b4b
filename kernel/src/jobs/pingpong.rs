//! `ibv_rc_pingpong`, `ibv_uc_pingpong` and `ibv_ud_pingpong` in the firmware:
//! rdma-core's examples, spoken on the wire, so an appliance pings another
//! appliance, or the unmodified Linux tools, with nothing on the host.
//!
//! The protocol (rdma-core 44, `libibverbs/examples/rc_pingpong.c`): over TCP
//! port 18515 the client sends its 52-byte `LID:QPN:PSN:GID` message
//! (`"%04x:%06x:%06x:%s"`, the GID as 32 hex digits of its bytes), the server
//! answers with its own, the client sends `"done"`. Both then move their RC QP
//! to RTR/RTS (MTU, dest QPN, PSNs, hop limit 1 — on the wire the route's 64,
//! as Linux's core overwrites it —, timeout 14, retry 7, RNR retry
//! 7, min RNR timer 12, one outstanding READ/atomic) and play ping-pong with
//! SENDs of `size` bytes from one buffer also used for receives, the client
//! first, each side sending once its last send completed and a receive arrived.
//! UC is the same without ACKs (RTR takes no RDMA-read or RNR attributes, RTS
//! only the send PSN). UD (`ud_pingpong.c`): Q_Key 0x11111111, RTR and RTS
//! with no path, an address handle to the peer, and 40 bytes in front of each
//! receive for the GRH; messages fit one MTU. `-c` is rdma-core's check
//! (`verbs_ring::show::pingpong`): the client marks its message before the
//! first send, every receive is compared with the marked fill, and the bad
//! pages are listed after the results as rdma-core's `invalid data in page N`.

use crate::net::Net;
use crate::net::memory::LOCAL_BASE;
use crate::println;
use crate::time::{Duration, Instant};
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use core::net::Ipv6Addr;
use knet::neigh::Resolution;
use rdma::core::Gid;
use rdma::core::port::IbMtu;
use rdma::rxe::ah::{AhAttr, AhHandle};
use rdma::rxe::cq::CqHandle;
use rdma::rxe::memory::Memory;
use rdma::rxe::mr::{AccessFlags, MrHandle};
use rdma::rxe::pd::PdHandle;
use rdma::rxe::qp::{QpAttr, QpCap, QpHandle, QpInitAttr};
use rdma::rxe::qp_state::{AttrMask, QpState, QpType};
use rdma::rxe::wc::{WcOpcode, WcStatus};
use rdma::rxe::wr::{RecvWr, SendFlags, SendWr, Sge, UdDest, WrOpcode};
use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;
use smoltcp::wire::Ipv4Address;
use verbs_ring::show::pingpong;

pub const DEFAULT_PORT: u16 = 18515;
const MSG_LEN: usize = 52;
const RECV_WRID: u64 = 1;
/// The Q_Key ud_pingpong uses.
const UD_QKEY: u32 = 0x1111_1111;
/// What a UD receive carries in front of the data.
const GRH_LEN: u64 = 40;
const SEND_WRID: u64 = 2;
/// Give up when nothing moves for this long (TCG is slow; a lost peer is not).
const STALL: Duration = Duration::from_secs(20);

/// What the console asked for (`ibv_rc_pingpong`'s options).
#[derive(Clone, Copy, Debug)]
pub struct Args {
    pub server: Option<Ipv4Address>,
    pub port: u16,
    pub size: u32,
    pub iters: u32,
    pub rx_depth: u32,
    pub mtu: IbMtu,
    pub gid_index: u8,
    /// RC, UC or UD: which of rdma-core's three pingpongs.
    pub qp_type: QpType,
    /// The RDMA device (`-d`; the first one when not given).
    pub dev: Option<u32>,
    /// `-c`: rdma-core's check (`verbs_ring::show::pingpong`): the client
    /// marks its message; every receive is compared with the marked fill.
    pub chk: bool,
}

impl Args {
    /// Bytes the buffer holds: the message, plus the GRH for UD.
    fn buffer_len(&self) -> u32 {
        self.size + self.grh()
    }

    fn grh(&self) -> u32 {
        if self.qp_type == QpType::Ud { GRH_LEN as u32 } else { 0 }
    }

    /// The tool's name, for messages.
    pub fn tool(&self) -> &'static str {
        match self.qp_type {
            QpType::Uc => "ibv_uc_pingpong",
            QpType::Ud => "ibv_ud_pingpong",
            _ => "ibv_rc_pingpong",
        }
    }
}

/// The other side's address, from its message.
#[derive(Clone, Copy, Debug)]
struct Dest {
    lid: u16,
    qpn: u32,
    psn: u32,
    gid: Gid,
}

enum Phase {
    /// The TCP exchange; `sent` and the bytes received so far.
    Exchange { sent: bool, got: heapless::Vec<u8, MSG_LEN>, remote: Option<Dest>, connected: bool },
    /// The ping-pong itself.
    Run { scnt: u32, rcnt: u32, routs: u32, pending: u64, start: Instant, bad_pages: BTreeSet<usize> },
}

pub struct Job {
    args: Args,
    /// The RDMA device the QP lives on.
    dev: u32,
    /// The link whose smoltcp interface carries the TCP exchange.
    tcp_link: usize,
    tcp: SocketHandle,
    pd: PdHandle,
    cq: CqHandle,
    qp: QpHandle,
    mr: MrHandle,
    /// UD: the address handle to the peer, made once its address is known.
    ah: Option<AhHandle>,
    remote_qpn: u32,
    local: Dest,
    phase: Phase,
    last_progress: Instant,
    ready: Rc<Cell<bool>>,
}

fn gid_hex(g: &Gid) -> String {
    g.0.iter().map(|b| format!("{b:02x}")).collect()
}

fn message(d: &Dest) -> [u8; MSG_LEN] {
    let text = format!("{:04x}:{:06x}:{:06x}:{}", d.lid, d.qpn, d.psn, gid_hex(&d.gid));
    let mut msg = [0u8; MSG_LEN];
    let n = text.len().min(MSG_LEN - 1);
    msg[..n].copy_from_slice(&text.as_bytes()[..n]);
    msg
}

fn parse_message(msg: &[u8]) -> Option<Dest> {
    let text = core::str::from_utf8(msg.split(|&b| b == 0).next()?).ok()?;
    let mut parts = text.split(':');
    let lid = u16::from_str_radix(parts.next()?, 16).ok()?;
    let qpn = u32::from_str_radix(parts.next()?, 16).ok()? & 0xff_ffff;
    let psn = u32::from_str_radix(parts.next()?, 16).ok()? & 0xff_ffff;
    let hex = parts.next()?;
    if hex.len() != 32 || parts.next().is_some() {
        return None;
    }
    let mut gid = [0u8; 16];
    for (i, b) in gid.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(Dest { lid, qpn, psn, gid: Gid(gid) })
}

fn describe(d: &Dest) -> String {
    format!("LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}", d.lid, d.qpn, d.psn, Ipv6Addr::from(d.gid.0))
}

/// How long a finished pingpong's QP stays: the peer's last SEND may still
/// be retransmitted (its ACK lost), and only a live QP answers it; the peer
/// would otherwise exhaust its retries after we are done.
const LINGER: Duration = Duration::from_secs(2);

/// The console's pingpong: the running job, if any, and the objects of
/// finished ones still answering the peer's last retransmissions.
#[derive(Default)]
pub struct Pingpong {
    job: Option<Job>,
    lingering: Vec<Lingering>,
}

/// The objects of a finished pingpong, kept until `until`.
pub struct Lingering {
    until: Instant,
    dev: u32,
    pd: PdHandle,
    cq: CqHandle,
    qp: QpHandle,
    mr: MrHandle,
    ah: Option<AhHandle>,
}

fn fail(pp: &mut Pingpong, net: &mut Net, why: &str) {
    let tool = pp.job.as_ref().map_or("ibv_rc_pingpong", |j| j.args.tool());
    println!("error: {tool}: {why}");
    finish(pp, net, None);
}

/// Ends the job: the prompt returns at once; its objects go now (`None`) or
/// once they stopped mattering to the peer.
fn finish(pp: &mut Pingpong, net: &mut Net, linger_until: Option<Instant>) {
    let Some(job) = pp.job.take() else { return };
    if let Some(l) = net.links.get_mut(job.tcp_link) {
        l.sockets.remove(job.tcp);
    }
    let left =
        Lingering { until: Instant::ZERO, dev: job.dev, pd: job.pd, cq: job.cq, qp: job.qp, mr: job.mr, ah: job.ah };
    match linger_until {
        Some(until) => pp.lingering.push(Lingering { until, ..left }),
        None => release(net, &left),
    }
    job.ready.set(true);
}

fn release(net: &mut Net, l: &Lingering) {
    if let Some(t) = net.rdma.transport_mut(l.dev) {
        let _ = t.destroy_qp(l.qp);
        if let Some(ah) = l.ah {
            let _ = t.destroy_ah(ah);
        }
        let _ = t.destroy_cq(l.cq);
        let _ = t.dereg_mr(l.mr);
        let _ = t.dealloc_pd(l.pd);
    }
}

/// Ctrl-C: ends the running pingpong as rdma-core's ends on SIGINT, without
/// a report; its QP lingers so the peer's last retransmissions get an answer.
pub fn interrupt(pp: &mut Pingpong, net: &mut Net, now: Instant) {
    finish(pp, net, Some(now + LINGER));
}

/// Destroys the objects of finished pingpongs whose time is up.
fn release_expired(pp: &mut Pingpong, net: &mut Net, now: Instant) -> bool {
    let (expired, kept): (Vec<_>, Vec<_>) =
        core::mem::take(&mut pp.lingering).into_iter().partition(|l| now >= l.until);
    pp.lingering = kept;
    for l in &expired {
        release(net, l);
    }
    !expired.is_empty()
}

/// Sets up the QP, posts the receives and starts the exchange.
pub fn start(pp: &mut Pingpong, net: &mut Net, args: Args, now: Instant, ready: Rc<Cell<bool>>) -> Result<(), String> {
    if pp.job.is_some() {
        return Err("a pingpong is already running".into());
    }
    let dev = match args.dev {
        Some(d) => d,
        None => net
            .rdma
            .core
            .devices()
            .next()
            .map(|d| d.index())
            .ok_or("no RDMA device (rdma link add rxe0 type rxe netdev eth0)")?,
    };
    let dev_link = net
        .rdma
        .core
        .device(dev)
        .and_then(|d| net.link_of(d.netdev().ifindex))
        .ok_or("the RDMA device's netdev has no NIC")?;
    let tcp_link = args.server.map_or(dev_link, |s| net.link_for(s));
    let local_gid = net
        .rdma
        .core
        .device(dev)
        .and_then(|d| d.port(1))
        .and_then(|p| p.gid_table().iter().find(|(i, _)| *i == usize::from(args.gid_index)).map(|(_, a)| a.gid))
        .ok_or_else(|| format!("no GID at index {}", args.gid_index))?;
    if args.size == 0 || args.buffer_len() as usize > crate::net::memory::LOCAL_SIZE {
        return Err(format!("size {} is not in 1..={}", args.size, crate::net::memory::LOCAL_SIZE - GRH_LEN as usize));
    }
    if args.qp_type == QpType::Ud && args.size > args.mtu.bytes() {
        return Err(format!("requested size larger than port MTU ({})", args.mtu.bytes()));
    }
    let t = net.rdma.transport_mut(dev).ok_or("no RDMA device")?;
    let err = |e: &dyn core::fmt::Debug| format!("{e:?}");
    let pd = t.alloc_pd().map_err(|e| err(&e))?;
    let mr = t
        .reg_mr(pd, LOCAL_BASE, LOCAL_BASE, u64::from(args.buffer_len()), AccessFlags::LOCAL_WRITE)
        .map_err(|e| err(&e))?;
    let cq = t.create_cq(args.rx_depth as usize + 1).map_err(|e| err(&e))?;
    let cap =
        QpCap { max_send_wr: 1, max_recv_wr: args.rx_depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp = t
        .create_qp(&QpInitAttr {
            qp_type: args.qp_type,
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            cap,
            sq_sig_all: false,
        })
        .map_err(|e| err(&e))?;
    let init = QpAttr { qp_state: QpState::Init, pkey_index: 0, port_num: 1, qkey: UD_QKEY, ..QpAttr::default() };
    let mask = match args.qp_type {
        QpType::Ud => AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY,
        _ => AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
    };
    t.modify_qp(qp, &init, mask).map_err(|e| err(&e))?;
    // The buffer holds 0x7b, as rdma-core's examples fill it; receives land
    // in it too, and sends carry what it holds.
    t.memory_mut().write(LOCAL_BASE, &vec![pingpong::FILL; args.buffer_len() as usize]).map_err(|e| err(&e))?;
    let sge = [Sge { addr: LOCAL_BASE, length: args.buffer_len(), lkey: mr.raw() }];
    for _ in 0..args.rx_depth {
        t.post_recv(qp, &RecvWr { wr_id: RECV_WRID, sg_list: &sge }).map_err(|e| err(&e))?;
    }
    let qpn = t.qpn(qp).ok_or("QP vanished")?;
    let local =
        Dest { lid: 0, qpn, psn: (now.as_micros() as u32).wrapping_mul(2_654_435_761) & 0xff_ffff, gid: local_gid };

    let mut socket = tcp::Socket::new(tcp::SocketBuffer::new(vec![0; 512]), tcp::SocketBuffer::new(vec![0; 512]));
    let link = net.links.get_mut(tcp_link).ok_or("no NIC")?;
    match args.server {
        Some(server) => {
            let local_port = 49152 + (now.as_micros() % 16384) as u16;
            socket.connect(link.iface.context(), (server, args.port), local_port).map_err(|e| err(&e))?;
        }
        None => socket.listen(args.port).map_err(|e| err(&e))?,
    }
    let tcp = link.sockets.add(socket);
    println!("  local address:  {}", describe(&local));
    ready.set(false);
    pp.job = Some(Job {
        args,
        dev,
        tcp_link,
        tcp,
        pd,
        cq,
        qp,
        mr,
        ah: None,
        remote_qpn: 0,
        local,
        phase: Phase::Exchange { sent: false, got: heapless::Vec::new(), remote: None, connected: false },
        last_progress: now,
        ready,
    });
    Ok(())
}

/// When the job next needs a pass by itself (its stall check, or a finished
/// job's objects to release).
pub fn deadline(pp: &Pingpong) -> Option<Instant> {
    let lingering = pp.lingering.iter().map(|l| l.until).min();
    [pp.job.as_ref().map(|j| j.last_progress + STALL), lingering].into_iter().flatten().min()
}

fn job_pd(pp: &Pingpong) -> Result<PdHandle, String> {
    pp.job.as_ref().map(|j| j.pd).ok_or_else(|| "no job".into())
}

/// Moves the QP to RTR and RTS towards `remote` (rdma-core's `pp_connect_ctx`).
fn connect(pp: &mut Pingpong, net: &mut Net, remote: &Dest, now: Instant) -> Result<bool, String> {
    let Some(job) = pp.job.as_ref() else { return Ok(false) };
    let (args, qp, local_psn, dev) = (job.args, job.qp, job.local.psn, job.dev);
    // As the provider does (Linux's ib_resolve_eth_dmac for RoCE v2): ARP for an
    // IPv4-mapped GID, neighbour discovery for any other, and the route's hop limit.
    let ip = rdma::uverbs::gid_ip(&remote.gid);
    let dmac = match net.resolve(dev, ip, now) {
        Resolution::Known(mac) => mac,
        Resolution::Pending => return Ok(false),
        Resolution::Failed => return Err(format!("no neighbour answer from {ip}")),
    };
    let hop_limit = rdma::uverbs::ROUTE_HOP_LIMIT;
    let pd = job_pd(pp)?;
    let t = net.rdma.transport_mut(dev).ok_or("the RDMA device went away")?;
    let ah_attr = AhAttr { dgid: remote.gid, sgid_index: args.gid_index, hop_limit, dmac, ..AhAttr::default() };
    let mut ah = None;
    let (rtr, rtr_mask, rts, rts_mask) = match args.qp_type {
        QpType::Ud => {
            ah = Some(t.create_ah(pd, &ah_attr).map_err(|e| format!("create AH: {e:?}"))?);
            let rtr = QpAttr { qp_state: QpState::Rtr, ..QpAttr::default() };
            let rts = QpAttr { qp_state: QpState::Rts, sq_psn: local_psn, ..QpAttr::default() };
            (rtr, AttrMask::STATE, rts, AttrMask::STATE | AttrMask::SQ_PSN)
        }
        qp_type => {
            let rc = qp_type == QpType::Rc;
            let rtr = QpAttr {
                qp_state: QpState::Rtr,
                path_mtu: args.mtu,
                dest_qp_num: remote.qpn,
                rq_psn: remote.psn,
                max_dest_rd_atomic: 1,
                min_rnr_timer: 12,
                ah_attr,
                ..QpAttr::default()
            };
            let mut rtr_mask =
                AttrMask::STATE | AttrMask::AV | AttrMask::PATH_MTU | AttrMask::DEST_QPN | AttrMask::RQ_PSN;
            let rts = QpAttr {
                qp_state: QpState::Rts,
                timeout: 14,
                retry_cnt: 7,
                rnr_retry: 7,
                sq_psn: local_psn,
                max_rd_atomic: 1,
                ..QpAttr::default()
            };
            let mut rts_mask = AttrMask::STATE | AttrMask::SQ_PSN;
            if rc {
                rtr_mask |= AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER;
                rts_mask |= AttrMask::TIMEOUT | AttrMask::RETRY_CNT | AttrMask::RNR_RETRY | AttrMask::MAX_QP_RD_ATOMIC;
            }
            (rtr, rtr_mask, rts, rts_mask)
        }
    };
    let t = net.rdma.transport_mut(dev).ok_or("the RDMA device went away")?;
    t.modify_qp(qp, &rtr, rtr_mask).map_err(|e| format!("modify QP to RTR: {e:?}"))?;
    t.modify_qp(qp, &rts, rts_mask).map_err(|e| format!("modify QP to RTS: {e:?}"))?;
    if let Some(job) = pp.job.as_mut() {
        job.ah = ah;
        job.remote_qpn = remote.qpn;
    }
    println!("  remote address: {}", describe(remote));
    Ok(true)
}

fn post_send(pp: &mut Pingpong, net: &mut Net) -> Result<(), String> {
    let job = pp.job.as_ref().ok_or("no job")?;
    let t = net.rdma.transport_mut(job.dev).ok_or("the RDMA device went away")?;
    let grh = u64::from(job.args.grh());
    let sge = [Sge { addr: LOCAL_BASE + grh, length: job.args.size, lkey: job.mr.raw() }];
    let mut wr = SendWr { flags: SendFlags(SendFlags::SIGNALED), ..SendWr::new(SEND_WRID, WrOpcode::Send, &sge) };
    if let Some(ah) = job.ah {
        wr = wr.with_ud(UdDest { ah, remote_qpn: job.remote_qpn, remote_qkey: UD_QKEY });
    }
    t.post_send(job.qp, &wr).map_err(|e| format!("post send: {e:?}"))
}

/// Advances the job; returns whether it did anything.
pub fn poll(pp: &mut Pingpong, net: &mut Net, now: Instant) -> bool {
    let released = !pp.lingering.is_empty() && release_expired(pp, net, now);
    let Some(job) = pp.job.as_ref() else { return released };
    if now.saturating_since(job.last_progress) > STALL {
        fail(pp, net, "no progress for 20 s (peer gone, or packets lost for good)");
        return true;
    }
    let result = match job.phase {
        Phase::Exchange { .. } => exchange(pp, net, now),
        Phase::Run { .. } => run(pp, net, now),
    };
    match result {
        Ok(progress) => {
            if let Some(j) = pp.job.as_mut().filter(|_| progress) {
                j.last_progress = now;
            }
            progress
        }
        Err(why) => {
            fail(pp, net, &why);
            true
        }
    }
}

fn exchange(pp: &mut Pingpong, net: &mut Net, now: Instant) -> Result<bool, String> {
    let Some(job) = pp.job.as_mut() else { return Ok(false) };
    let is_client = job.args.server.is_some();
    let local_msg = message(&job.local);
    let Phase::Exchange { sent, got, remote, connected } = &mut job.phase else { return Ok(false) };
    let Some(link) = net.links.get_mut(job.tcp_link) else { return Err("the NIC went away".into()) };
    let socket = link.sockets.get_mut::<tcp::Socket>(job.tcp);
    let mut progress = false;
    // Client: send first. Server: send once connected to the client's QP.
    if !*sent && socket.can_send() && (is_client || *connected) {
        socket.send_slice(&local_msg).map_err(|e| format!("TCP: {e:?}"))?;
        *sent = true;
        progress = true;
    }
    if remote.is_none() && socket.can_recv() {
        let want = MSG_LEN - got.len();
        let mut buf = [0u8; MSG_LEN];
        let n = socket.recv_slice(&mut buf[..want]).map_err(|e| format!("TCP: {e:?}"))?;
        let _ = got.extend_from_slice(&buf[..n]);
        progress |= n > 0;
        if got.len() == MSG_LEN {
            *remote = Some(parse_message(got).ok_or("the peer's address message is malformed")?);
        }
    }
    if !socket.is_active() && !socket.is_listening() && remote.is_none() {
        return Err("the TCP exchange closed before the peer's address came".into());
    }
    let need_connect = remote.is_some() && !*connected;
    let dest = *remote;
    if need_connect {
        let Some(dest) = dest else { return Ok(progress) };
        if !connect(pp, net, &dest, now)? {
            return Ok(progress); // waiting for ARP
        }
        let Some(job) = pp.job.as_mut() else { return Ok(true) };
        if let Phase::Exchange { connected, .. } = &mut job.phase {
            *connected = true;
        }
        return Ok(true);
    }
    let Some(job) = pp.job.as_mut() else { return Ok(progress) };
    let Phase::Exchange { sent, connected, .. } = job.phase else { return Ok(progress) };
    if !(sent && connected) {
        return Ok(progress);
    }
    // Both addresses are known: the client says "done"; either side closes.
    let Some(link) = net.links.get_mut(job.tcp_link) else { return Err("the NIC went away".into()) };
    let socket = link.sockets.get_mut::<tcp::Socket>(job.tcp);
    if is_client {
        let _ = socket.send_slice(b"done\0");
    }
    socket.close();
    job.phase = Phase::Run {
        scnt: 0,
        rcnt: 0,
        routs: job.args.rx_depth,
        pending: RECV_WRID,
        start: now,
        bad_pages: BTreeSet::new(),
    };
    if is_client {
        if job.args.chk {
            let mut msg = vec![pingpong::FILL; job.args.size as usize];
            pingpong::mark(&mut msg);
            let at = LOCAL_BASE + u64::from(job.args.grh());
            let t = net.rdma.transport_mut(job.dev).ok_or("the RDMA device went away")?;
            t.memory_mut().write(at, &msg).map_err(|e| format!("{e:?}"))?;
        }
        post_send(pp, net)?;
        if let Some(Job { phase: Phase::Run { pending, .. }, .. }) = pp.job.as_mut() {
            *pending |= SEND_WRID;
        }
    }
    Ok(true)
}

fn run(pp: &mut Pingpong, net: &mut Net, now: Instant) -> Result<bool, String> {
    let mut progress = false;
    loop {
        let Some(job) = pp.job.as_mut() else { return Ok(progress) };
        let t = net.rdma.transport_mut(job.dev).ok_or("the RDMA device went away")?;
        let Ok(Some(wc)) = t.poll_one(job.cq) else { break };
        progress = true;
        if wc.status != WcStatus::Success {
            let (sent, received) = match job.phase {
                Phase::Run { scnt, rcnt, .. } => (scnt, rcnt),
                Phase::Exchange { .. } => (0, 0),
            };
            return Err(format!(
                "Failed status {:?} ({}) for wr_id {} ({sent} sends and {received} receives completed)",
                wc.status, wc.status as u32, wc.wr_id
            ));
        }
        let (size, iters, rx_depth, qp, lkey, chk) =
            (job.args.size, job.args.iters, job.args.rx_depth, job.qp, job.mr.raw(), job.args.chk);
        let grh = job.args.grh();
        let Phase::Run { scnt, rcnt, routs, pending, bad_pages, .. } = &mut job.phase else { break };
        match wc.wr_id {
            SEND_WRID => *scnt += 1,
            RECV_WRID => {
                if wc.opcode != WcOpcode::Recv || wc.byte_len != size + grh {
                    let want = size + grh;
                    return Err(format!("received {} bytes with opcode {:?}, expected {want}", wc.byte_len, wc.opcode));
                }
                if chk {
                    let mut data = vec![0u8; size as usize];
                    t.memory().read(LOCAL_BASE + u64::from(grh), &mut data).map_err(|e| format!("{e:?}"))?;
                    bad_pages.extend(pingpong::bad_pages(&data));
                }
                *routs -= 1;
                if *routs <= 1 {
                    let sge = [Sge { addr: LOCAL_BASE, length: size + grh, lkey }];
                    while *routs < rx_depth {
                        t.post_recv(qp, &RecvWr { wr_id: RECV_WRID, sg_list: &sge }).map_err(|e| format!("{e:?}"))?;
                        *routs += 1;
                    }
                }
                *rcnt += 1;
            }
            other => return Err(format!("completion for unknown wr_id {other}")),
        }
        *pending &= !wc.wr_id;
        let send_now = *scnt < iters && *pending == 0;
        if send_now {
            *pending = RECV_WRID | SEND_WRID;
            post_send(pp, net)?;
        }
    }
    let Some(job) = pp.job.as_ref() else { return Ok(progress) };
    if let Phase::Run { scnt, rcnt, start, ref bad_pages, .. } = job.phase
        && scnt >= job.args.iters
        && rcnt >= job.args.iters
    {
        let us = now.saturating_since(start).as_micros().max(1);
        let bytes = u64::from(job.args.size) * u64::from(job.args.iters) * 2;
        let secs = us as f64 / 1e6;
        println!("{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec", bytes as f64 * 8.0 / us as f64);
        println!(
            "{} iters in {secs:.2} seconds = {:.2} usec/iter",
            job.args.iters,
            us as f64 / f64::from(job.args.iters)
        );
        for &page in bad_pages {
            println!("{}", pingpong::InvalidPage(page));
        }
        finish(pp, net, Some(now + LINGER));
        return Ok(true);
    }
    Ok(progress)
}
