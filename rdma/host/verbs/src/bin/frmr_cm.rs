//! `frmr_cm`: fast registration over rdma_cm connections (issue 19), the
//! appliance's side against `tests/linux-peer/kfrmr.c`, a Linux kernel
//! module in the rdma_rxe peer (Linux userspace has no fast-register verb:
//! `ib_alloc_mr`, the REG_MR work request and `ib_update_fast_reg_key` are
//! kernel-only), or against another copy of this tool. Same exchange, same
//! checks, same lines.
//!
//! The target owns the memory: a fast-register MR mapping two pages in the
//! order [second, first] (a page list, not a run of memory). The initiator
//! READs, WRITEs and SENDs WITH INVALIDATE through the target's keys. Two
//! rounds, each over its own RC connection (the first round's QPs end in the
//! error state: a refused WRITE is a class C error, IBA 9.9.3):
//!
//! 1. The target fills the pages with pattern 1, registers them (REG_MR)
//!    with a new key byte, K1, and SENDs `FRMR <iova> <rkey> <length> 0`.
//!    The initiator READs pattern 1, WRITEs pattern 2 and READs it back,
//!    SENDs 4096 bytes of pattern 3 WITH INVALIDATE of K1 (the target's
//!    receive must name K1, IBA 10.6.6.1), then WRITEs through K1: remote
//!    access error; it disconnects. The target checks the pages hold
//!    pattern 2, in the MR's page order, also after the refused WRITE.
//! 2. The target moves the key byte on (K2), fills pattern 4, registers
//!    again and SENDs `FRMR <iova> <K2> <length> <K1>`. The initiator READs
//!    pattern 4, WRITEs pattern 5 through K2 and READs it back, then WRITEs
//!    pattern 6 through K1: remote access error; it disconnects. The pages
//!    must hold pattern 5.
//!
//! Pattern n's byte i is `(i * 7 + n * 31 + 1) as u8` (ext_verbs'). The keys
//! message is 64 bytes, NUL-padded text, numbers in hex. Without a server
//! name this side listens (rdma_cm, port space TCP) for both rounds' connections
//! and prints `listening on <addr>` first; with one it connects, retrying a
//! server that does not listen yet. Output: one line per checked step
//! (`round N: <what>: ok`), then `PASS frmr as <role>`; the first failed check
//! prints `FAIL frmr as <role>: round N: <why>` and exits 1.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use clap::Parser;
use verbs::cli::{RingArgs, Role};
use verbs::cm::{CmEvent, CmId, ConnParam, EventChannel, cm_event, port_space};
use verbs::{
    AccessFlags, Cq, FastRegMr, MemoryRegion, Pd, Qp, QpCap, QpInitAttr, SendFlags, SendWr, WcStatus, WorkCompletion,
    WrOp, wc_opcode,
};
use verbs_ring::abi::{wc_flags, wc_status};

const PAGE: u64 = 4096;
const FRMR_LEN: u64 = 2 * PAGE;
/// What the initiator SENDs WITH INVALIDATE: four packets at MTU 1024.
const INV_SEND_LEN: u32 = 4096;
const MSG_LEN: u32 = 64;
/// The target's I/O virtual address for the MR (the module's is a kernel
/// address: any will do, the MR names its pages).
const FRMR_IOVA: u64 = 0x5000_0000;
/// The local buffer's layout (offsets from its page-aligned start).
/// Target: the two pages, the receive, the keys message.
const OFF_PAGES: [u64; 2] = [0, PAGE];
const OFF_RECV: u64 = 2 * PAGE;
const OFF_MSG: u64 = 3 * PAGE;
/// Initiator: what it writes and sends from, what it reads into, the receive.
const OFF_SRC: u64 = 0;
const OFF_DST: u64 = 2 * PAGE;
const OFF_KEYS: u64 = 4 * PAGE;
const BUF_LEN: usize = 6 * PAGE as usize;
/// How long one step may take (a TCG guest on a busy host is slow).
const STEP: Duration = Duration::from_secs(60);

#[derive(Parser)]
#[command(
    name = "frmr_cm",
    about = "Fast registration, SEND WITH INVALIDATE and re-keying over rdma_cm against a peer"
)]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
    /// rdma_cm port to listen on/connect to
    #[arg(short = 'p', long = "port", default_value_t = 18516)]
    port: u16,
    /// listen on this address only (as a server)
    #[arg(long = "bind", default_value = "0.0.0.0")]
    bind: String,
    /// use IB device DEV (default first device found)
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// this side's role
    #[arg(short = 'R', long = "role", value_enum, default_value_t = Role::Initiator)]
    role: Role,
    /// server to connect to (else: be the server)
    servername: Option<String>,
}

/// Why a round failed: printed after `FAIL frmr as <role>: round N: `.
type Outcome<T = ()> = Result<T, String>;

fn lib(what: &str) -> impl Fn(verbs::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// The first `len` bytes of pattern `seed`.
fn pat(seed: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(7).wrapping_add(seed * 31 + 1) as u8).collect()
}

/// The target's keys message: `FRMR <iova> <rkey> <length> <old rkey>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Keys {
    iova: u64,
    rkey: u32,
    len: u64,
    /// The rkey the previous round's registration had; 0 in the first.
    old: u32,
}

impl Keys {
    fn encode(&self) -> Vec<u8> {
        let mut m = format!("FRMR {:x} {:x} {:x} {:x}", self.iova, self.rkey, self.len, self.old).into_bytes();
        m.resize(MSG_LEN as usize, 0);
        m
    }

    fn decode(m: &[u8]) -> Option<Keys> {
        let end = m.iter().position(|&b| b == 0).unwrap_or(m.len());
        let text = std::str::from_utf8(&m[..end]).ok()?;
        let mut it = text.split(' ');
        if it.next()? != "FRMR" {
            return None;
        }
        let mut num = || u64::from_str_radix(it.next()?, 16).ok();
        let k = Keys { iova: num()?, rkey: u32::try_from(num()?).ok()?, len: num()?, old: u32::try_from(num()?).ok()? };
        it.next().is_none().then_some(k)
    }
}

/// One connection: its id and QP, and the events of its own.
struct Conn<'a> {
    id: CmId,
    qp: Qp<'a>,
}

/// What both rounds share.
struct Side<'a> {
    cli: &'a Cli,
    ch: &'a EventChannel,
    /// The listening id (a server), or none (a client).
    listen: Option<CmId>,
    pd: &'a Pd<'a>,
    cq: &'a Cq<'a>,
    mr: &'a MemoryRegion<'a>,
    /// The buffer's page-aligned start, as an offset into `mr`.
    base: u64,
    round: u32,
}

impl<'a> Side<'a> {
    fn step(&self, what: std::fmt::Arguments<'_>) {
        println!("round {}: {what}: ok", self.round);
    }

    fn addr(&self, off: u64) -> u64 {
        self.mr.addr() + self.base + off
    }

    fn put(&self, off: u64, data: &[u8]) -> Outcome {
        self.mr.write((self.base + off) as usize, data).map_err(lib("writing the buffer"))
    }

    fn get(&self, off: u64, len: usize) -> Outcome<Vec<u8>> {
        self.mr.to_vec((self.base + off) as usize, len).map_err(lib("reading the buffer"))
    }

    fn sge(&self, off: u64, len: u32) -> Outcome<verbs::Sge> {
        self.mr.sge((self.base + off) as usize, len).map_err(lib("an SGE"))
    }

    fn post(&self, qp: &Qp<'_>, wr_id: u64, op: WrOp, off: u64, len: u32) -> Outcome {
        let sge = [self.sge(off, len)?];
        let sg: &[verbs::Sge] = if len == 0 { &[] } else { &sge };
        qp.post_send(&[SendWr { wr_id, op, sg_list: sg, flags: SendFlags::SIGNALED, ud: None }])
            .map_err(lib("ibv_post_send"))
    }

    /// The next completion, skipping the flushed ones an earlier round left.
    fn wait(&self, what: &str) -> Outcome<WorkCompletion> {
        loop {
            let wc = self.cq.wait(STEP).map_err(|e| format!("no completion for {what}: {e}"))?;
            if wc.status != WcStatus(wc_status::WR_FLUSH_ERR) {
                return Ok(wc);
            }
        }
    }

    fn expect_ok(&self, what: &str, opcode: u32) -> Outcome<WorkCompletion> {
        let wc = self.wait(what)?;
        if !wc.status.is_success() || wc.opcode != opcode {
            return Err(format!("{what} completed with {}, opcode {}", wc.status, wc.opcode));
        }
        Ok(wc)
    }

    /// The next rdma_cm event, which must be `want` (an earlier
    /// connection's TIMEWAIT_EXIT aside).
    fn cm(&self, want: u32) -> Outcome<CmEvent> {
        let ev = self.next_event()?;
        if ev.event != want {
            return Err(format!(
                "rdma_cm event {} (status {}), not {}",
                ev.name(),
                ev.status,
                verbs::cm::event_str(want)
            ));
        }
        Ok(ev)
    }

    /// The next rdma_cm event but an earlier connection's TIMEWAIT_EXIT.
    fn next_event(&self) -> Outcome<CmEvent> {
        loop {
            let ev = self.ch.get_cm_event(STEP).map_err(|e| format!("no rdma_cm event: {e}"))?;
            if ev.event != cm_event::TIMEWAIT_EXIT {
                return Ok(ev);
            }
        }
    }

    fn conn_param() -> ConnParam {
        // Responder resources: the peer may READ.
        ConnParam {
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            ..Default::default()
        }
    }

    fn qp_attr() -> QpInitAttr {
        QpInitAttr {
            cap: QpCap { max_send_wr: 8, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            ..Default::default()
        }
    }

    /// This round's connection, a receive of `recv_len` bytes at `recv_off`
    /// posted before it is up.
    fn connect(&self, recv_off: u64, recv_len: u32) -> Outcome<Conn<'a>> {
        let (id, qp) = match &self.listen {
            Some(_) => {
                let mut req = self.cm(cm_event::CONNECT_REQUEST)?;
                let id = req.request.take().ok_or("CONNECT_REQUEST without an id")?;
                let qp =
                    id.create_qp(self.pd, self.cq, self.cq, None, &Self::qp_attr()).map_err(lib("rdma_create_qp"))?;
                qp.post_recv(&[(1, &[self.sge(recv_off, recv_len)?][..])]).map_err(lib("ibv_post_recv"))?;
                id.accept(&Self::conn_param()).map_err(lib("rdma_accept"))?;
                self.cm(cm_event::ESTABLISHED)?;
                (id, qp)
            }
            None => self.connect_to(recv_off, recv_len)?,
        };
        let peer = id.peer_addr().map_or_else(|| "the peer".to_string(), |a| a.to_string());
        self.step(format_args!("connected with {peer}"));
        Ok(Conn { id, qp })
    }

    /// A client's connection, retried while nobody listens yet (REJECTED).
    fn connect_to(&self, recv_off: u64, recv_len: u32) -> Outcome<(CmId, Qp<'a>)> {
        let host = self.cli.servername.as_deref().unwrap_or_default();
        let dst = addr_of(host, self.cli.port)?;
        let start = Instant::now();
        loop {
            let id = self.ch.create_id(port_space::TCP).map_err(lib("rdma_create_id"))?;
            id.resolve_addr(None, dst, 2000).map_err(lib("rdma_resolve_addr"))?;
            self.cm(cm_event::ADDR_RESOLVED)?;
            id.resolve_route(2000).map_err(lib("rdma_resolve_route"))?;
            self.cm(cm_event::ROUTE_RESOLVED)?;
            let qp = id.create_qp(self.pd, self.cq, self.cq, None, &Self::qp_attr()).map_err(lib("rdma_create_qp"))?;
            qp.post_recv(&[(1, &[self.sge(recv_off, recv_len)?][..])]).map_err(lib("ibv_post_recv"))?;
            id.connect(&Self::conn_param()).map_err(lib("rdma_connect"))?;
            let ev = self.next_event()?;
            match ev.event {
                cm_event::ESTABLISHED => return Ok((id, qp)),
                cm_event::REJECTED if start.elapsed() < STEP => {
                    id.forget_qp();
                    drop(qp);
                    drop(id);
                    std::thread::sleep(Duration::from_millis(100));
                }
                _ => return Err(format!("rdma_connect to {dst}: {} (status {})", ev.name(), ev.status)),
            }
        }
    }

    /// The initiator ends a round: disconnect, then the peer's answer.
    fn hang_up(&self, c: Conn<'a>) -> Outcome {
        c.id.disconnect().map_err(lib("rdma_disconnect"))?;
        self.cm(cm_event::DISCONNECTED)?;
        self.close(c);
        Ok(())
    }

    fn close(&self, c: Conn<'a>) {
        c.id.forget_qp();
        drop(c.qp);
        drop(c.id);
        // What the error state flushed.
        while let Ok(Some(_)) = self.cq.poll_one() {}
    }

    fn target_round(&mut self, frmr: &FastRegMr<'_>, old: u32) -> Outcome<u32> {
        let c = self.connect(OFF_RECV, INV_SEND_LEN)?;
        let (fill, want) = if old == 0 { (1, 2) } else { (4, 5) };
        // The MR's page i is buffer page OFF_PAGES[1 - i].
        let data = pat(fill, FRMR_LEN as usize);
        for (i, part) in data.chunks(PAGE as usize).enumerate() {
            self.put(OFF_PAGES[1 - i], part)?;
        }
        let byte = if old == 0 { ((frmr.key() & 0xff) as u8).wrapping_add(0x11) } else { (old as u8).wrapping_add(1) };
        let rkey = frmr.next_key(byte);
        let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
        self.post(&c.qp, 2, WrOp::RegMr { mr: frmr.handle(), key: rkey, access: access.0 }, 0, 0)?;
        self.expect_ok("REG_MR", wc_opcode::REG_MR)?;
        if old == 0 {
            self.step(format_args!(
                "fast-registered {FRMR_LEN} B (two pages, the second first) at iova {FRMR_IOVA:#x}, rkey {rkey:#x}"
            ));
        } else {
            self.step(format_args!("key byte moved on, rkey {old:#x} -> {rkey:#x}, re-registered"));
        }
        let keys = Keys { iova: FRMR_IOVA, rkey, len: FRMR_LEN, old };
        self.put(OFF_MSG, &keys.encode())?;
        self.post(&c.qp, 3, WrOp::Send, OFF_MSG, MSG_LEN)?;
        self.expect_ok("the keys SEND", wc_opcode::SEND)?;
        if old == 0 {
            let wc = self.expect_ok("the SEND WITH INVALIDATE's receive", wc_opcode::RECV)?;
            if wc.wc_flags & wc_flags::WITH_INV == 0 || wc.imm_data != Some(rkey) {
                return Err(format!(
                    "the receive has wc_flags {:#x}, invalidated rkey {:x?} (want IBV_WC_WITH_INV, {rkey:#x})",
                    wc.wc_flags, wc.imm_data
                ));
            }
            if wc.byte_len != INV_SEND_LEN
                || self.get(OFF_RECV, INV_SEND_LEN as usize)? != pat(3, INV_SEND_LEN as usize)
            {
                return Err(format!("the receive holds {} B, not the {INV_SEND_LEN} B sent", wc.byte_len));
            }
            self.step(format_args!(
                "receive with IBV_WC_WITH_INV, invalidated rkey {rkey:#x}, {INV_SEND_LEN} B checked"
            ));
            self.check_pages(want, "the pages do not hold what the WRITE carried, in the MR's page order")?;
            self.step(format_args!("both pages hold what was written, in the MR's page order"));
        }
        self.cm(cm_event::DISCONNECTED)?;
        self.close(c);
        if old == 0 {
            self.check_pages(want, "the WRITE through the invalidated rkey changed the pages")?;
            self.step(format_args!(
                "disconnected; the pages still hold it (the WRITE through the invalidated rkey did not land)"
            ));
        } else {
            self.check_pages(want, "the pages do not hold what the WRITE through the new rkey carried")?;
            self.step(format_args!(
                "disconnected; the pages hold what was written through the new rkey, not the old one's"
            ));
        }
        Ok(rkey)
    }

    fn check_pages(&self, seed: u32, why: &str) -> Outcome {
        let mut got = self.get(OFF_PAGES[1], PAGE as usize)?;
        got.extend(self.get(OFF_PAGES[0], PAGE as usize)?);
        if got == pat(seed, FRMR_LEN as usize) { Ok(()) } else { Err(why.to_string()) }
    }

    fn write(&self, qp: &Qp<'_>, seed: u32, k: &Keys, rkey: u32) -> Outcome<WorkCompletion> {
        self.put(OFF_SRC, &pat(seed, k.len as usize))?;
        self.post(qp, 4, WrOp::Write { remote_addr: k.iova, rkey }, OFF_SRC, k.len as u32)?;
        self.wait("WRITE")
    }

    fn read_checked(&self, qp: &Qp<'_>, seed: u32, k: &Keys, rkey: u32) -> Outcome {
        self.put(OFF_DST, &vec![0; k.len as usize])?;
        self.post(qp, 5, WrOp::Read { remote_addr: k.iova, rkey }, OFF_DST, k.len as u32)?;
        self.expect_ok("READ", wc_opcode::RDMA_READ)?;
        if self.get(OFF_DST, k.len as usize)? != pat(seed, k.len as usize) {
            return Err(format!("READ through rkey {rkey:#x} returned other data"));
        }
        self.step(format_args!("READ {} B through rkey {rkey:#x}, data checked", k.len));
        Ok(())
    }

    fn write_ok(&self, qp: &Qp<'_>, seed: u32, k: &Keys, rkey: u32) -> Outcome {
        let wc = self.write(qp, seed, k, rkey)?;
        if !wc.status.is_success() {
            return Err(format!("WRITE through rkey {rkey:#x} completed with {}", wc.status));
        }
        self.step(format_args!("WRITE {} B through rkey {rkey:#x}", k.len));
        Ok(())
    }

    fn write_refused(&self, qp: &Qp<'_>, k: &Keys, rkey: u32, what: &str) -> Outcome {
        let wc = self.write(qp, 6, k, rkey)?;
        if wc.status != WcStatus(wc_status::REM_ACCESS_ERR) {
            return Err(format!(
                "WRITE through {what} rkey {rkey:#x} completed with {}, not remote access error",
                wc.status
            ));
        }
        self.step(format_args!("WRITE through {what} rkey {rkey:#x} refused: {}", wc.status.as_str()));
        Ok(())
    }

    fn initiator_round(&mut self, last: u32) -> Outcome<u32> {
        let c = self.connect(OFF_KEYS, MSG_LEN)?;
        self.expect_ok("the keys' receive", wc_opcode::RECV)?;
        let msg = self.get(OFF_KEYS, MSG_LEN as usize)?;
        let k = Keys::decode(&msg).ok_or_else(|| format!("not a keys message: {:?}", String::from_utf8_lossy(&msg)))?;
        if k.len == 0 || k.len > FRMR_LEN || k.old != last {
            return Err(format!("the keys {k:x?} do not follow the previous round's rkey {last:#x}"));
        }
        if last == 0 {
            self.read_checked(&c.qp, 1, &k, k.rkey)?;
            self.write_ok(&c.qp, 2, &k, k.rkey)?;
            self.read_checked(&c.qp, 2, &k, k.rkey)?;
            self.put(OFF_SRC, &pat(3, INV_SEND_LEN as usize))?;
            self.post(&c.qp, 7, WrOp::SendWithInv(k.rkey), OFF_SRC, INV_SEND_LEN)?;
            self.expect_ok("SEND WITH INVALIDATE", wc_opcode::SEND)?;
            self.step(format_args!("SEND WITH INVALIDATE {INV_SEND_LEN} B of rkey {:#x}", k.rkey));
            self.write_refused(&c.qp, &k, k.rkey, "the invalidated")?;
        } else {
            self.read_checked(&c.qp, 4, &k, k.rkey)?;
            self.write_ok(&c.qp, 5, &k, k.rkey)?;
            self.read_checked(&c.qp, 5, &k, k.rkey)?;
            self.write_refused(&c.qp, &k, k.old, "the old")?;
        }
        self.hang_up(c)?;
        Ok(k.rkey)
    }
}

fn addr_of(host: &str, port: u16) -> Outcome<SocketAddr> {
    (host, port).to_socket_addrs().ok().and_then(|mut a| a.next()).ok_or_else(|| format!("not an address: {host}"))
}

fn main() {
    let cli = Cli::parse();
    let role = cli.role.name();
    let mut round = 0;
    if let Err(why) = run(&cli, &mut round) {
        println!("FAIL frmr as {role}: round {round}: {why}");
        verbs::cli::exit(1);
    }
    println!("PASS frmr as {role}");
}

fn run(cli: &Cli, round: &mut u32) -> Outcome {
    let ctx = cli.ring.open().map_err(lib("opening the ring"))?;
    let dev = ctx.device(cli.dev.as_deref()).map_err(lib("opening the device"))?;
    let pd = dev.alloc_pd().map_err(lib("ibv_alloc_pd"))?;
    let cq = dev.create_cq(32, 0).map_err(lib("ibv_create_cq"))?;
    let mr = pd.reg_mr(BUF_LEN + PAGE as usize, AccessFlags::ALL_REMOTE).map_err(lib("ibv_reg_mr"))?;
    let base = mr.addr().next_multiple_of(PAGE) - mr.addr();
    let ch = EventChannel::new(&ctx);
    let listen = match &cli.servername {
        Some(_) => None,
        None => {
            let at = addr_of(&cli.bind, cli.port)?;
            let l = ch.create_id(port_space::TCP).map_err(lib("rdma_create_id"))?;
            l.bind_addr(at).map_err(lib("rdma_bind_addr"))?;
            l.listen(2).map_err(lib("rdma_listen"))?;
            println!("listening on {at}");
            Some(l)
        }
    };
    let mut side = Side { cli, ch: &ch, listen, pd: &pd, cq: &cq, mr: &mr, base, round: 0 };
    let frmr = match cli.role {
        Role::Target => {
            let frmr = pd.alloc_mr(2).map_err(lib("ib_alloc_mr"))?;
            let pages = [side.addr(OFF_PAGES[1]), side.addr(OFF_PAGES[0])];
            frmr.map(FRMR_IOVA, FRMR_LEN, PAGE, &pages).map_err(lib("ib_map_mr_sg"))?;
            Some(frmr)
        }
        Role::Initiator => None,
    };
    let mut key = 0;
    for r in 1..=2 {
        *round = r;
        side.round = r;
        key = match &frmr {
            Some(f) => side.target_round(f, key)?,
            None => side.initiator_round(key)?,
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_messages_round_trip_and_refuse_garbage() {
        let k = Keys { iova: 0xffff_8880_0123_4000, rkey: 0x1234_56ab, len: 0x2000, old: 0x1234_56aa };
        let m = k.encode();
        assert_eq!(m.len(), MSG_LEN as usize);
        assert!(m.starts_with(b"FRMR ffff888001234000 123456ab 2000 123456aa\0"));
        assert_eq!(Keys::decode(&m), Some(k));
        for bad in
            [&b"FRMR 1 2 3"[..], b"FRMR 1 2 3 4 5", b"KEYS 1 2 3 4", b"FRMR 1 123456789 3 4", b"FRMR x 2 3 4", b""]
        {
            assert_eq!(Keys::decode(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_patterns_are_the_modules() {
        // kfrmr.c: (u8)(i * 7 + seed * 31 + 1).
        assert_eq!(pat(1, 3), [32, 39, 46]);
        assert_ne!(pat(2, 64), pat(6, 64));
    }
}
