//! perftest's `-R` (`--rdma_cm`) and `-z` (`--comm_rdma_cm`), as perftest
//! 4.5 does them, so that either side may be Linux's `ib_*` programs.
//!
//! `-R` implies `-z`. With `-z` the exchange ([`super::exchange`]) runs
//! over an RC connection of its own: the client resolves the server's
//! address and port (`-p`) and connects through rdma_cm (retry count 7,
//! RNR retry 7, no READs), the server listens on the port, accepts the
//! first request and destroys its listener. Each side keeps one 56-byte
//! receive posted; a message is one signaled SEND, waited for.
//!
//! With `-R` the test's own QP is connected through rdma_cm too, after the
//! exchange's version, page size, cache line and MTU: both sides
//! handshake, the client connects to the same port (responder resources
//! and initiator depth the READs it allows, for READ and atomic tests;
//! retry and RNR retry 7) and the server, listening again, accepts; both
//! handshake again, and the test goes on as without `-R` (the keys still
//! say where the peer's buffer is), but the QP is not moved by hand. At the
//! end the client disconnects and waits for DISCONNECTED; the server
//! disconnects.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::exchange::{Channel, KEYS_BIN_LEN, Keys};
use crate::cm::{CmEvent, CmId, ConnParam, EventChannel, cm_event, port_space};
use crate::{Context, Cq, Error, MemoryRegion, Pd, Qp, QpCap, QpInitAttr, SendFlags, SendWr, WrOp};

/// How long one step may take.
const STALL: Duration = Duration::from_secs(30);
/// perftest's retry count, and the RNR retry it asks for.
const RETRY: u8 = 7;
/// The exchange's receive buffer, and where SENDs are staged.
const RECV_AT: usize = 0;
const SEND_AT: usize = 64;
pub const COMM_MR_LEN: usize = 128;

/// A context's CM events, those about other ids kept until asked for.
pub struct Events {
    ch: EventChannel,
    stash: RefCell<VecDeque<CmEvent>>,
}

fn cm_error(what: &str, ev: &CmEvent) -> Error {
    Error::Protocol(format!("rdma_cm {what}: {} (status {})", ev.name(), ev.status))
}

pub fn addr_of(host: &str, port: u16) -> crate::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Error::Protocol(format!("cannot resolve {host}:{port}")))
}

impl Events {
    pub fn new(ctx: &Context) -> Events {
        Events { ch: EventChannel::new(ctx), stash: RefCell::new(VecDeque::new()) }
    }

    /// The next event about `id` (for a listener: a request on it).
    pub fn next_for(&self, id: &CmId, timeout: Duration) -> crate::Result<CmEvent> {
        let start = Instant::now();
        loop {
            {
                let mut stash = self.stash.borrow_mut();
                if let Some(at) = stash.iter().position(|e| e.is_for(id)) {
                    return stash.remove(at).ok_or(Error::Protocol("CM event stash".into()));
                }
            }
            let left = timeout.saturating_sub(start.elapsed());
            let ev = self.ch.get_cm_event(left)?;
            if ev.is_for(id) {
                return Ok(ev);
            }
            self.stash.borrow_mut().push_back(ev);
        }
    }

    /// The next event about `id`, which must be `want`.
    fn expect(&self, id: &CmId, want: u32, what: &str) -> crate::Result<CmEvent> {
        let ev = self.next_for(id, STALL)?;
        if ev.event == want { Ok(ev) } else { Err(cm_error(what, &ev)) }
    }

    /// A new id, its address and route toward `dst` resolved.
    pub fn resolve(&self, dst: SocketAddr) -> crate::Result<CmId> {
        let id = self.ch.create_id(port_space::TCP)?;
        id.resolve_addr(None, dst, 2000)?;
        self.expect(&id, cm_event::ADDR_RESOLVED, "address resolution")?;
        id.resolve_route(2000)?;
        self.expect(&id, cm_event::ROUTE_RESOLVED, "route resolution")?;
        Ok(id)
    }

    /// A listener on `addr` (perftest's backlog: its number of QPs).
    pub fn listen(&self, addr: SocketAddr) -> crate::Result<CmId> {
        let id = self.ch.create_id(port_space::TCP)?;
        id.bind_addr(addr)?;
        id.listen(1)?;
        Ok(id)
    }

    /// The id of the next request on `listener` (waiting for as long as it
    /// takes, as perftest's server does).
    pub fn request(&self, listener: &CmId) -> crate::Result<CmId> {
        loop {
            match self.next_for(listener, Duration::from_secs(3600)) {
                Ok(mut ev) if ev.event == cm_event::CONNECT_REQUEST => {
                    return ev.request.take().ok_or(Error::Protocol("CONNECT_REQUEST without an id".into()));
                }
                Ok(ev) => return Err(cm_error("listen", &ev)),
                Err(Error::TimedOut { .. } | Error::NothingCame { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Connect `id`'s QP; `Ok(false)` when the server refused (it may not
    /// listen yet).
    fn connect(&self, id: &CmId, p: &ConnParam) -> crate::Result<bool> {
        id.connect(p)?;
        let ev = self.next_for(id, STALL)?;
        match ev.event {
            cm_event::ESTABLISHED => Ok(true),
            cm_event::REJECTED => Ok(false),
            _ => Err(cm_error("connect", &ev)),
        }
    }

    /// `rdma_disconnect`; the active side waits (a while) for the
    /// DISCONNECTED that answers it, as perftest's client does.
    pub fn disconnect(&self, id: &CmId, wait: bool) {
        if id.disconnect().is_ok() && wait {
            let deadline = Instant::now() + Duration::from_secs(3);
            while let Ok(ev) = self.next_for(id, deadline.saturating_duration_since(Instant::now())) {
                if ev.event == cm_event::DISCONNECTED {
                    break;
                }
            }
        }
    }
}

/// The exchange's QP and buffer.
pub struct CommLink<'a> {
    pub qp: &'a Qp<'a>,
    pub send_cq: &'a Cq<'a>,
    pub recv_cq: &'a Cq<'a>,
    pub mr: &'a MemoryRegion<'a>,
}

fn comm_attr() -> QpInitAttr {
    QpInitAttr {
        cap: QpCap { max_send_wr: 2, max_recv_wr: 2, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    }
}

fn post_recv(qp: &Qp<'_>, mr: &MemoryRegion<'_>) -> crate::Result<()> {
    qp.post_recv(&[(5, &[mr.sge(RECV_AT, KEYS_BIN_LEN as u32)?])])
}

/// The completion of this QP's next request on `cq` (others' are stale:
/// a refused attempt's QP).
fn wait_wc(qp: &Qp<'_>, cq: &Cq<'_>, what: &str) -> crate::Result<crate::WorkCompletion> {
    let start = Instant::now();
    loop {
        let wc = cq.wait(STALL.saturating_sub(start.elapsed()))?;
        if wc.qp_num != qp.qp_num() {
            continue;
        }
        if !wc.status.is_success() {
            return Err(Error::Protocol(format!("perftest exchange over rdma_cm ({what}): {}", wc.status)));
        }
        return Ok(wc);
    }
}

impl CommLink<'_> {
    pub fn write(&self, msg: &[u8], what: &str) -> crate::Result<()> {
        self.mr.write(SEND_AT, msg)?;
        let sge = [self.mr.sge(SEND_AT, msg.len() as u32)?];
        let wr = SendWr { wr_id: 5, op: WrOp::Send, sg_list: &sge, flags: SendFlags::SIGNALED, ud: None };
        self.qp.post_send(&[wr])?;
        wait_wc(self.qp, self.send_cq, what).map(|_| ())
    }

    pub fn read(&self, buf: &mut [u8], what: &str) -> crate::Result<()> {
        let wc = wait_wc(self.qp, self.recv_cq, what)?;
        if (wc.byte_len as usize) < buf.len() {
            return Err(Error::Protocol(format!(
                "perftest exchange over rdma_cm ({what}): {} bytes where {} were expected",
                wc.byte_len,
                buf.len()
            )));
        }
        self.mr.read(RECV_AT, buf)?;
        post_recv(self.qp, self.mr)
    }
}

/// The client's side of the exchange's connection: its QP on `id` (a
/// resolved id; another one is made for each retry while the server
/// refuses, for at most `patience`).
pub fn comm_connect<'a>(
    ev: &Events,
    mut id: CmId,
    dst: SocketAddr,
    pd: &'a Pd<'a>,
    cqs: &'a (Cq<'a>, Cq<'a>),
    mr: &'a MemoryRegion<'a>,
    patience: Duration,
) -> crate::Result<(CmId, Qp<'a>)> {
    let deadline = Instant::now() + patience;
    let param = ConnParam { retry_count: RETRY, rnr_retry_count: 7, ..Default::default() };
    loop {
        let qp = id.create_qp(pd, &cqs.0, &cqs.1, None, &comm_attr())?;
        post_recv(&qp, mr)?;
        if ev.connect(&id, &param)? {
            return Ok((id, qp));
        }
        if Instant::now() > deadline {
            return Err(Error::Protocol(format!("rdma_cm connect to {dst}: rejected (nobody listening?)")));
        }
        id.forget_qp();
        drop(qp);
        std::thread::sleep(Duration::from_millis(100));
        id = ev.resolve(dst)?;
    }
}

/// The server's side: `id` is the request's; the QP, a receive, the REP.
pub fn comm_accept<'a>(
    id: &CmId,
    pd: &'a Pd<'a>,
    cqs: &'a (Cq<'a>, Cq<'a>),
    mr: &'a MemoryRegion<'a>,
) -> crate::Result<Qp<'a>> {
    let qp = id.create_qp(pd, &cqs.0, &cqs.1, None, &comm_attr())?;
    post_recv(&qp, mr)?;
    id.accept(&ConnParam { retry_count: RETRY, rnr_retry_count: 7, ..Default::default() })?;
    Ok(qp)
}

/// What the test's connection needs.
pub struct DataConn<'a, 'c> {
    pub ev: &'a Events,
    pub ch: &'a mut Channel<'c>,
    pub client: bool,
    /// Client: the server's address; server: the address to listen on.
    pub addr: SocketAddr,
    /// READs and atomics each side allows (0: the test has none).
    pub out_reads: u8,
    pub patience: Duration,
}

/// `create_rdma_cm_connection`: a handshake, the test's QP connected
/// through rdma_cm, a handshake.
pub fn data_connect<'q>(
    d: DataConn<'_, '_>,
    pd: &'q Pd<'q>,
    send_cq: &'q Cq<'q>,
    recv_cq: &'q Cq<'q>,
    attr: &QpInitAttr,
) -> crate::Result<(CmId, Qp<'q>)> {
    let param = ConnParam {
        responder_resources: d.out_reads,
        initiator_depth: d.out_reads,
        retry_count: RETRY,
        rnr_retry_count: RETRY,
        ..Default::default()
    };
    let sync = Keys::default();
    let conn = if d.client {
        d.ch.handshake(&sync)?;
        let deadline = Instant::now() + d.patience;
        let mut id = d.ev.resolve(d.addr)?;
        loop {
            let qp = id.create_qp(pd, send_cq, recv_cq, None, attr)?;
            if d.ev.connect(&id, &param)? {
                break (id, qp);
            }
            if Instant::now() > deadline {
                return Err(Error::Protocol(format!("rdma_cm connect to {}: rejected", d.addr)));
            }
            id.forget_qp();
            drop(qp);
            std::thread::sleep(Duration::from_millis(100));
            id = d.ev.resolve(d.addr)?;
        }
    } else {
        // Listening before the handshake: the client connects right after it.
        let listener = d.ev.listen(d.addr)?;
        d.ch.handshake(&sync)?;
        let id = d.ev.request(&listener)?;
        let qp = id.create_qp(pd, send_cq, recv_cq, None, attr)?;
        id.accept(&param)?;
        drop(listener);
        (id, qp)
    };
    d.ch.handshake(&sync)?;
    Ok(conn)
}
