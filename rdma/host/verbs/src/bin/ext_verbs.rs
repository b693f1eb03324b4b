//! `ext_verbs`: the appliance side of the extended-verbs interop (issue 19),
//! against `tests/linux-peer/ext_verbs.c` in the Linux rdma_rxe peer (or
//! another copy of this tool). Same options, same TCP exchange, same output.
//!
//! The target owns the memory (an MR, memory windows bound over it, a
//! fast-registered MR); the initiator WRITEs, READs and SENDs WITH INVALIDATE
//! through the target's keys. Each phase connects a fresh RC QP pair: a
//! phase ends with a remote access error (IBA 9.9.3, class C), which leaves
//! both QPs in the error state.
//!
//! - `mw`: type 1 (the `bind_mw` verb) and type 2B (a BIND_MW work request)
//!   windows, read-write; data written and read back through both, a
//!   read-only type 1 window read; SEND WITH INVALIDATE of the type 2
//!   window (the target's receive completes with `IBV_WC_WITH_INV` and that
//!   rkey); a WRITE to it afterwards must fail with remote access error and
//!   leave the memory as it was.
//! - `rights1` / `rights2`: a read-only type 1 / type 2 window: READ works,
//!   WRITE is refused the same way.
//! - `atomic_write` (IBA 1.5): the initiator ATOMIC WRITEs 8 bytes into the
//!   target's MR and READs them back (Linux's rxe responds from 6.2 on).
//! - `flush` (IBA 1.5): the initiator WRITEs a page into an MR the target
//!   registered with FLUSH_GLOBAL access, FLUSHes it (global visibility, the
//!   range) and READs it back. Linux (rdma-core 44) cannot initiate a FLUSH.
//! - `frmr`: the target fast-registers two pages (`alloc_mr`, `map_mr_sg`, a
//!   REG_MR work request). Linux userspace has no fast-register verb, so only
//!   the appliance can be this phase's target. The initiator WRITEs and READs
//!   them, invalidates the rkey with a 4096-byte SEND WITH INVALIDATE (SEND
//!   FIRST .. LAST WITH INVALIDATE at MTU 1024), and a later WRITE must fail.
//!
//! The exchange: one text line each way per step, both sides writing before
//! reading: `QP <qpn> <psn> <gid as 32 hex digits>` per phase; the target's
//! keys (`MW <addr> <rkey> <addr> <rkey> <addr> <rkey>`, `RIGHTS <addr>
//! <rkey>`, `FRMR <addr> <rkey> <len>`, `ATOMIC <addr> <rkey>`, `FLUSH <addr>
//! <rkey>`) answered by `READY`; `DONE <phase>`
//! from both once the initiator's last operation completed. Numbers in hex.
//! Output: rdma-core-style address lines, one line per checked step,
//! `PASS <phase> as <role>` per phase; the first failed check prints
//! `FAIL <phase> as <role>: <why>` and exits 1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use clap::Parser;
use verbs::cli::{RingArgs, Role};
use verbs::{
    AccessFlags, Cq, Device, MemoryRegion, MemoryWindow, MwType, Pd, Qp, QpCap, QpInitAttr, RtrAttr, SendFlags, SendWr,
    WcStatus, WorkCompletion, WrOp, names, wc_opcode,
};
use verbs_ring::abi::{wc_flags, wc_status};
use verbs_ring::show::words::GidText;

const PAGE: u64 = 4096;
/// The buffer: what the layout below uses, plus a page to align it to.
const BUF_SIZE: usize = 16 * PAGE as usize;
// The target's layout (the C program's, in page offsets of the buffer).
const OFF_MW1: u64 = 0;
const OFF_MW2: u64 = PAGE;
const OFF_RO1: u64 = 2 * PAGE;
const OFF_RO2: u64 = 3 * PAGE;
/// The two pages the fast-registered MR maps, the higher one first.
const OFF_FRMR: [u64; 2] = [6 * PAGE, 5 * PAGE];
const OFF_RECV: u64 = 8 * PAGE;
/// `atomic_write`'s 8 bytes.
const OFF_ATOMIC: u64 = 10 * PAGE;
/// What ATOMIC WRITE puts there.
const ATOMIC_DATA: [u8; 8] = *b"atomic!!";
// The initiator's.
const OFF_SRC: u64 = 0;
const OFF_DST: u64 = 4 * PAGE;
/// One packet: SEND ONLY WITH INVALIDATE.
const INV_SEND_MW: u32 = 64;
/// Four at MTU 1024: SEND FIRST, MIDDLE, MIDDLE, LAST WITH INVALIDATE.
const INV_SEND_FRMR: u32 = 4096;
/// The I/O virtual address the fast-registered MR is given (any will do:
/// the MR names its pages, not this address).
const FRMR_IOVA: u64 = 0x5000_0000;
/// How long one completion may take (TCG guests are slow).
const COMPLETION: Duration = Duration::from_secs(30);

#[derive(Parser)]
#[command(name = "ext_verbs", about = "Memory windows, fast registration and SEND WITH INVALIDATE against a peer")]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
    /// listen on/connect to port PORT
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    port: u16,
    /// listen on this address only (as a server)
    #[arg(long = "bind", default_value = "0.0.0.0")]
    bind: String,
    /// use IB device DEV (default first device found)
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// use port PORT of IB device
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    ib_port: u8,
    /// local port GID index
    #[arg(short = 'g', long = "gid-idx", default_value_t = 1)]
    gid_idx: u8,
    /// path MTU
    #[arg(short = 'm', long = "mtu", default_value_t = 1024)]
    mtu: u32,
    /// this side's role
    #[arg(short = 'R', long = "role", value_enum, default_value_t = Role::Initiator)]
    role: Role,
    /// comma-separated phases: mw, rights1, rights2, frmr, atomic_write, flush
    #[arg(short = 'P', long = "phases", default_value = "mw,rights1,rights2")]
    phases: String,
    /// server to connect to (else: be the server)
    servername: Option<String>,
}

/// Why a phase failed: printed after `FAIL <phase> as <role>: `.
type Outcome<T = ()> = Result<T, String>;

fn lib(what: &str) -> impl Fn(verbs::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// The first `len` bytes of pattern `seed` (byte `i` is the C program's `pat(seed, i)`).
fn pat(seed: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(7).wrapping_add(seed * 31 + 1) as u8).collect()
}

/// The line exchange: each side writes its line, then reads the other's.
struct Exchange {
    out: TcpStream,
    input: BufReader<TcpStream>,
}

impl Exchange {
    fn new(s: TcpStream) -> Outcome<Exchange> {
        let _ = s.set_nodelay(true);
        let input = BufReader::new(s.try_clone().map_err(|e| format!("the exchange socket: {e}"))?);
        Ok(Exchange { out: s, input })
    }

    fn xchg(&mut self, mine: &str) -> Outcome<String> {
        self.out.write_all(format!("{mine}\n").as_bytes()).map_err(|e| format!("cannot send to the peer: {e}"))?;
        let mut line = String::new();
        // A line is short; a peer that sends an endless one is cut off here.
        let n =
            (&mut self.input).take(1024).read_line(&mut line).map_err(|e| format!("cannot read from the peer: {e}"))?;
        if n == 0 || !line.ends_with('\n') {
            return Err("the peer closed the exchange".into());
        }
        Ok(line.trim_end().to_string())
    }
}

/// Parses `<tag> <hex> <hex> ...` into exactly `n` numbers.
fn fields(line: &str, tag: &str, n: usize) -> Outcome<Vec<u64>> {
    let mut it = line.split_whitespace();
    let bad = || format!("not a {tag} line: {line}");
    if it.next() != Some(tag) {
        return Err(bad());
    }
    let v: Vec<u64> = it.map(|f| u64::from_str_radix(f, 16)).collect::<Result<_, _>>().map_err(|_| bad())?;
    if v.len() == n { Ok(v) } else { Err(bad()) }
}

fn key(v: u64, line: &str) -> Outcome<u32> {
    u32::try_from(v).map_err(|_| format!("a key wider than 32 bits in: {line}"))
}

/// What every phase shares.
struct Side<'a> {
    cli: &'a Cli,
    dev: &'a Device,
    pd: &'a Pd<'a>,
    cq: &'a Cq<'a>,
    mr: &'a MemoryRegion<'a>,
    /// The buffer's page-aligned start, as an offset into `mr`.
    base: u64,
    ex: Exchange,
    phase: String,
}

impl<'a> Side<'a> {
    fn step(&self, what: std::fmt::Arguments<'_>) {
        println!("{}: {what}: ok", self.phase);
    }

    /// A region offset (an SGE address, what a peer names) of buffer offset `off`.
    fn addr(&self, off: u64) -> u64 {
        self.mr.addr() + self.base + off
    }

    fn put(&self, off: u64, data: &[u8]) -> Outcome {
        self.mr.write((self.base + off) as usize, data).map_err(lib("writing the buffer"))
    }

    fn holds(&self, off: u64, data: &[u8]) -> Outcome<bool> {
        Ok(self.mr.to_vec((self.base + off) as usize, data.len()).map_err(lib("reading the buffer"))? == data)
    }

    fn wait(&self, what: &str) -> Outcome<WorkCompletion> {
        self.cq.wait(COMPLETION).map_err(|e| format!("no completion for {what}: {e}"))
    }

    fn expect_ok(&self, what: &str) -> Outcome<WorkCompletion> {
        let wc = self.wait(what)?;
        if wc.status.is_success() { Ok(wc) } else { Err(format!("{what} completed with {}", wc.status)) }
    }

    fn post(&self, qp: &Qp<'_>, wr_id: u64, op: WrOp, off: u64, len: u32) -> Outcome {
        let sge = [self.mr.sge((self.base + off) as usize, len).map_err(lib("an SGE"))?];
        let sg: &[verbs::Sge] = if len == 0 { &[] } else { &sge };
        qp.post_send(&[SendWr { wr_id, op, sg_list: sg, flags: SendFlags::SIGNALED, ud: None }])
            .map_err(lib("ibv_post_send"))
    }

    fn make_qp(&self) -> Outcome<Qp<'a>> {
        let attr = QpInitAttr {
            cap: QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            ..Default::default()
        };
        let qp = Qp::create(self.pd, self.cq, self.cq, None, &attr).map_err(lib("ibv_create_qp"))?;
        let remote = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
        qp.to_init(self.cli.ib_port, remote).map_err(lib("modify QP to INIT"))?;
        Ok(qp)
    }

    /// Exchanges QP addresses with the peer and moves `qp` to RTS.
    fn connect(&mut self, qp: &Qp<'_>, mtu: u32) -> Outcome {
        let gid = self.dev.query_gid(self.cli.ib_port, u32::from(self.cli.gid_idx)).map_err(lib("ibv_query_gid"))?.gid;
        let psn = psn();
        let hex: String = gid.iter().map(|b| format!("{b:02x}")).collect();
        let line = self.ex.xchg(&format!("QP {:x} {psn:x} {hex}", qp.qp_num()))?;
        let (rqpn, rpsn, rgid) = parse_qp(&line).ok_or_else(|| format!("not a QP line: {line}"))?;
        for (what, qpn, psn, gid) in [("local", qp.qp_num(), psn, &gid), ("remote", rqpn, rpsn, &rgid)] {
            println!("  {what} address:  LID 0x0000, QPN {qpn:#08x}, PSN {psn:#08x}, GID {}", GidText(gid));
        }
        qp.to_rtr(&RtrAttr {
            port: self.cli.ib_port,
            path_mtu: mtu,
            dest_qp_num: rqpn,
            rq_psn: rpsn,
            dlid: 0,
            dgid: rgid,
            sgid_index: self.cli.gid_idx,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
        })
        .map_err(lib("modify QP to RTR"))?;
        qp.to_rts(psn, 1).map_err(lib("modify QP to RTS"))
    }

    fn write_ok(&self, qp: &Qp<'_>, seed: u32, len: u32, raddr: u64, rkey: u32, what: &str) -> Outcome {
        self.put(OFF_SRC, &pat(seed, len as usize))?;
        self.post(qp, 1, WrOp::Write { remote_addr: raddr, rkey }, OFF_SRC, len)?;
        self.expect_ok(&format!("WRITE {what}"))?;
        self.step(format_args!("WRITE {len} B {what} rkey {rkey:#x}"));
        Ok(())
    }

    fn read_ok(&self, qp: &Qp<'_>, seed: u32, len: u32, raddr: u64, rkey: u32, what: &str) -> Outcome {
        self.put(OFF_DST, &vec![0; len as usize])?;
        self.post(qp, 1, WrOp::Read { remote_addr: raddr, rkey }, OFF_DST, len)?;
        self.expect_ok(&format!("READ {what}"))?;
        if !self.holds(OFF_DST, &pat(seed, len as usize))? {
            return Err(format!("READ {what} rkey {rkey:#x} returned other data"));
        }
        self.step(format_args!("READ {len} B {what} rkey {rkey:#x}, data checked"));
        Ok(())
    }

    /// A WRITE the target must refuse: its NAK (remote access error) completes it.
    fn write_refused(&self, qp: &Qp<'_>, seed: u32, raddr: u64, rkey: u32, what: &str) -> Outcome {
        self.put(OFF_SRC, &pat(seed, 64))?;
        self.post(qp, 1, WrOp::Write { remote_addr: raddr, rkey }, OFF_SRC, 64)?;
        let wc = self.wait(&format!("WRITE {what}"))?;
        if wc.status != WcStatus(wc_status::REM_ACCESS_ERR) {
            return Err(format!("WRITE {what} rkey {rkey:#x} completed with {}, not remote access error", wc.status));
        }
        self.step(format_args!("WRITE {what} rkey {rkey:#x} refused: {}", wc.status.as_str()));
        Ok(())
    }

    fn send_inv(&self, qp: &Qp<'_>, len: u32, rkey: u32) -> Outcome {
        self.put(OFF_SRC, &pat(9, len as usize))?;
        self.post(qp, 2, WrOp::SendWithInv(rkey), OFF_SRC, len)?;
        self.expect_ok("SEND WITH INVALIDATE")?;
        self.step(format_args!("SEND WITH INVALIDATE {len} B of rkey {rkey:#x}"));
        Ok(())
    }

    fn post_recv(&self, qp: &Qp<'_>) -> Outcome {
        let sge = [self.mr.sge((self.base + OFF_RECV) as usize, PAGE as u32).map_err(lib("an SGE"))?];
        qp.post_recv(&[(3, &sge[..])]).map_err(lib("ibv_post_recv"))
    }

    /// The target's side of a SEND WITH INVALIDATE: the receive names the key.
    fn recv_inv(&self, len: u32, rkey: u32) -> Outcome {
        let wc = self.expect_ok("the SEND WITH INVALIDATE's receive")?;
        if wc.opcode != wc_opcode::RECV || wc.wc_flags & wc_flags::WITH_INV == 0 || wc.imm_data != Some(rkey) {
            return Err(format!(
                "the receive has opcode {}, wc_flags {:#x}, invalidated rkey {:x?} (want IBV_WC_WITH_INV, {rkey:#x})",
                wc.opcode, wc.wc_flags, wc.imm_data
            ));
        }
        if wc.byte_len != len || !self.holds(OFF_RECV, &pat(9, len as usize))? {
            return Err(format!("the receive holds {} B, not the {len} B sent", wc.byte_len));
        }
        self.step(format_args!("receive with IBV_WC_WITH_INV, invalidated rkey {rkey:#x}, {len} B checked"));
        Ok(())
    }

    fn bind(&self, qp: &Qp<'_>, ty: MwType, off: u64, access: AccessFlags) -> Outcome<MemoryWindow<'a>> {
        let mw = self.pd.alloc_mw(ty).map_err(lib("ibv_alloc_mw"))?;
        let offset = self.base + off;
        let rkey = match ty {
            MwType::Type1 => mw.bind(qp, 4, self.mr, offset, PAGE, access).map_err(lib("ibv_bind_mw"))?,
            MwType::Type2 => {
                let new = mw.next_rkey();
                let op = mw.bind_wr(self.mr, offset, PAGE, access, new);
                qp.post_send(&[SendWr { wr_id: 4, op, sg_list: &[], flags: SendFlags::SIGNALED, ud: None }])
                    .map_err(lib("ibv_post_send (BIND_MW)"))?;
                new
            }
        };
        let wc = self.wait("the bind")?;
        if !wc.status.is_success() || wc.opcode != wc_opcode::BIND_MW {
            return Err(format!("the bind completed with {}, opcode {}", wc.status, wc.opcode));
        }
        mw.bound(rkey);
        let rights = if access.0 & AccessFlags::REMOTE_WRITE.0 != 0 { "read-write" } else { "read-only" };
        let n = if ty == MwType::Type1 { 1 } else { 2 };
        self.step(format_args!("type {n} window bound over {PAGE} B, {rights}, rkey {rkey:#x}"));
        Ok(mw)
    }

    fn done(&mut self) -> Outcome {
        let mine = format!("DONE {}", self.phase);
        let theirs = self.ex.xchg(&mine)?;
        if theirs == mine { Ok(()) } else { Err(format!("the peer answered \"{theirs}\" to \"{mine}\"")) }
    }

    fn check_mem(&self, off: u64, seed: u32, what: &str) -> Outcome {
        if !self.holds(off, &pat(seed, PAGE as usize))? {
            return Err(format!("{what} does not hold what was written"));
        }
        self.step(format_args!("{what} holds what was written, not what the refused WRITE carried"));
        Ok(())
    }

    fn phase_mw(&mut self, qp: &Qp<'_>) -> Outcome {
        let rw = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
        if self.cli.role == Role::Target {
            self.put(0, &vec![0; 2 * PAGE as usize])?;
            self.put(OFF_RO1, &pat(3, PAGE as usize))?;
            self.post_recv(qp)?;
            let m1 = self.bind(qp, MwType::Type1, OFF_MW1, rw)?;
            let m2 = self.bind(qp, MwType::Type2, OFF_MW2, rw)?;
            let m3 = self.bind(qp, MwType::Type1, OFF_RO1, AccessFlags::REMOTE_READ)?;
            let line = format!(
                "MW {:x} {:x} {:x} {:x} {:x} {:x}",
                self.addr(OFF_MW1),
                m1.rkey(),
                self.addr(OFF_MW2),
                m2.rkey(),
                self.addr(OFF_RO1),
                m3.rkey()
            );
            self.ex.xchg(&line)?;
            self.recv_inv(INV_SEND_MW, m2.rkey())?;
            self.done()?;
            self.check_mem(OFF_MW1, 1, "the type 1 window")?;
            return self.check_mem(OFF_MW2, 2, "the invalidated type 2 window");
        }
        let line = self.ex.xchg("READY")?;
        let v = fields(&line, "MW", 6)?;
        let (a, k) = ([v[0], v[2], v[4]], [key(v[1], &line)?, key(v[3], &line)?, key(v[5], &line)?]);
        let p = PAGE as u32;
        self.write_ok(qp, 1, p, a[0], k[0], "through the type 1 window")?;
        self.write_ok(qp, 2, p, a[1], k[1], "through the type 2 window")?;
        self.read_ok(qp, 1, p, a[0], k[0], "through the type 1 window")?;
        self.read_ok(qp, 2, p, a[1], k[1], "through the type 2 window")?;
        self.read_ok(qp, 3, p, a[2], k[2], "through the read-only type 1 window")?;
        self.send_inv(qp, INV_SEND_MW, k[1])?;
        self.write_refused(qp, 4, a[1], k[1], "through the invalidated type 2 window")?;
        self.done()
    }

    fn phase_rights(&mut self, qp: &Qp<'_>, ty: MwType) -> Outcome {
        let (off, seed) = if ty == MwType::Type1 { (OFF_RO1, 3) } else { (OFF_RO2, 5) };
        if self.cli.role == Role::Target {
            self.put(off, &pat(seed, PAGE as usize))?;
            let mw = self.bind(qp, ty, off, AccessFlags::REMOTE_READ)?;
            self.ex.xchg(&format!("RIGHTS {:x} {:x}", self.addr(off), mw.rkey()))?;
            self.done()?;
            return self.check_mem(off, seed, "the read-only window");
        }
        let line = self.ex.xchg("READY")?;
        let v = fields(&line, "RIGHTS", 2)?;
        let k = key(v[1], &line)?;
        self.read_ok(qp, seed, PAGE as u32, v[0], k, "through the read-only window")?;
        self.write_refused(qp, 6, v[0], k, "through the read-only window")?;
        self.done()
    }

    fn phase_frmr(&mut self, qp: &Qp<'_>) -> Outcome {
        let len = 2 * PAGE;
        if self.cli.role == Role::Target {
            self.post_recv(qp)?;
            let frmr = self.pd.alloc_mr(2).map_err(lib("ib_alloc_mr"))?;
            let pages = OFF_FRMR.map(|o| self.addr(o));
            frmr.map(FRMR_IOVA, len, PAGE, &pages).map_err(lib("ib_map_mr_sg"))?;
            // A key byte other than the one the MR was born with: the old
            // rkey must not name the registration.
            let rkey = frmr.next_key(((frmr.key() & 0xff) as u8).wrapping_add(0x11));
            let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
            self.post(qp, 5, WrOp::RegMr { mr: frmr.handle(), key: rkey, access: access.0 }, 0, 0)?;
            let wc = self.expect_ok("REG_MR")?;
            if wc.opcode != wc_opcode::REG_MR {
                return Err(format!("REG_MR completed with opcode {}", wc.opcode));
            }
            self.step(format_args!(
                "fast-registered {len} B (two pages, the higher first) at {FRMR_IOVA:#x}, rkey {rkey:#x}"
            ));
            self.ex.xchg(&format!("FRMR {FRMR_IOVA:x} {rkey:x} {len:x}"))?;
            self.recv_inv(INV_SEND_FRMR, rkey)?;
            self.done()?;
            // The MR's first page is buffer page OFF_FRMR[0], its second OFF_FRMR[1].
            let data = pat(7, len as usize);
            for (i, &off) in OFF_FRMR.iter().enumerate() {
                let part = &data[i * PAGE as usize..(i + 1) * PAGE as usize];
                if !self.holds(off, part)? {
                    return Err(format!("page {i} of the fast-registered MR does not hold what was written"));
                }
            }
            self.step(format_args!("both pages hold what was written, in the MR's page order"));
            return Ok(());
        }
        let line = self.ex.xchg("READY")?;
        let v = fields(&line, "FRMR", 3)?;
        let (a, k) = (v[0], key(v[1], &line)?);
        let n = u32::try_from(v[2])
            .ok()
            .filter(|&n| n > 0 && u64::from(n) <= len)
            .ok_or(format!("bad length in: {line}"))?;
        self.write_ok(qp, 7, n, a, k, "into the fast-registered MR")?;
        self.read_ok(qp, 7, n, a, k, "from the fast-registered MR")?;
        self.send_inv(qp, INV_SEND_FRMR, k)?;
        self.write_refused(qp, 8, a, k, "into the invalidated fast-registered MR")?;
        self.done()
    }
}

impl<'a> Side<'a> {
    fn phase_atomic_write(&mut self, qp: &Qp<'_>) -> Outcome {
        if self.cli.role == Role::Target {
            self.put(OFF_ATOMIC, &[0; 8])?;
            self.ex.xchg(&format!("ATOMIC {:x} {:x}", self.addr(OFF_ATOMIC), self.mr.rkey()))?;
            self.done()?;
            if !self.holds(OFF_ATOMIC, &ATOMIC_DATA)? {
                return Err("the 8 bytes do not hold what ATOMIC WRITE carried".into());
            }
            self.step(format_args!("the 8 bytes hold what ATOMIC WRITE carried"));
            return Ok(());
        }
        let line = self.ex.xchg("READY")?;
        let v = fields(&line, "ATOMIC", 2)?;
        let (a, k) = (v[0], key(v[1], &line)?);
        self.post(qp, 5, WrOp::AtomicWrite { remote_addr: a, rkey: k, data: ATOMIC_DATA }, 0, 0)?;
        let wc = self.expect_ok("ATOMIC WRITE")?;
        if wc.opcode != wc_opcode::ATOMIC_WRITE {
            return Err(format!("ATOMIC WRITE completed with opcode {}", wc.opcode));
        }
        self.step(format_args!("ATOMIC WRITE 8 B rkey {k:#x}"));
        self.put(OFF_DST, &[0; 8])?;
        self.post(qp, 1, WrOp::Read { remote_addr: a, rkey: k }, OFF_DST, 8)?;
        self.expect_ok("READ of the 8 bytes")?;
        if !self.holds(OFF_DST, &ATOMIC_DATA)? {
            return Err("READ after ATOMIC WRITE returned other data".into());
        }
        self.step(format_args!("READ 8 B after it, data checked"));
        self.done()
    }

    fn phase_flush(&mut self, qp: &Qp<'_>) -> Outcome {
        let page = PAGE as usize;
        if self.cli.role == Role::Target {
            let access = AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::FLUSH_GLOBAL;
            let mr = self.pd.reg_mr(page, access).map_err(lib("ibv_reg_mr with FLUSH_GLOBAL access"))?;
            mr.write(0, &vec![0; page]).map_err(lib("writing the MR"))?;
            self.step(format_args!("MR of {page} B registered with FLUSH_GLOBAL access, rkey {:#x}", mr.rkey()));
            self.ex.xchg(&format!("FLUSH {:x} {:x}", mr.addr(), mr.rkey()))?;
            self.done()?;
            if mr.to_vec(0, page).map_err(lib("reading the MR"))? != pat(10, page) {
                return Err("the flushed page does not hold what was written".into());
            }
            self.step(format_args!("the flushed page holds what was written"));
            return Ok(());
        }
        let line = self.ex.xchg("READY")?;
        let v = fields(&line, "FLUSH", 2)?;
        let (a, k) = (v[0], key(v[1], &line)?);
        self.write_ok(qp, 10, PAGE as u32, a, k, "into the FLUSH_GLOBAL MR")?;
        // Global visibility (placement bit 0) of the range just written.
        self.post(qp, 6, WrOp::Flush { remote_addr: a, rkey: k, len: PAGE, placement: 1, level: 0 }, 0, 0)?;
        let wc = self.expect_ok("FLUSH")?;
        if wc.opcode != wc_opcode::FLUSH {
            return Err(format!("FLUSH completed with opcode {}", wc.opcode));
        }
        self.step(format_args!("FLUSH (global visibility) of {PAGE} B rkey {k:#x}"));
        self.read_ok(qp, 10, PAGE as u32, a, k, "from the flushed MR")?;
        self.done()
    }
}

fn parse_qp(line: &str) -> Option<(u32, u32, [u8; 16])> {
    let mut it = line.split_whitespace();
    if it.next()? != "QP" {
        return None;
    }
    let qpn = u32::from_str_radix(it.next()?, 16).ok()?;
    let psn = u32::from_str_radix(it.next()?, 16).ok()?;
    let g = it.next()?;
    if g.len() != 32 || it.next().is_some() {
        return None;
    }
    let mut gid = [0u8; 16];
    for (i, b) in gid.iter_mut().enumerate() {
        *b = u8::from_str_radix(g.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some((qpn & 0xff_ffff, psn & 0xff_ffff, gid))
}

/// A random 24-bit PSN.
fn psn() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (t.subsec_nanos() ^ std::process::id().wrapping_mul(2_654_435_761)) & 0xff_ffff
}

fn connect_retry(host: &str, port: u16) -> Outcome<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > deadline => return Err(format!("cannot connect to {host}:{port}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn main() {
    let cli = Cli::parse();
    let role = cli.role.name();
    let mut phase = String::from("setup");
    if let Err(why) = run(&cli, &mut phase) {
        println!("FAIL {phase} as {role}: {why}");
        verbs::cli::exit(1);
    }
}

fn run(cli: &Cli, phase: &mut String) -> Outcome {
    let mtu = names::mtu_enum(cli.mtu).ok_or("Invalid MTU (256, 512, 1024, 2048 or 4096)")?;
    let phases: Vec<&str> = cli.phases.split(',').collect();
    const PHASES: [&str; 6] = ["mw", "rights1", "rights2", "frmr", "atomic_write", "flush"];
    if let Some(p) = phases.iter().find(|p| !PHASES.contains(p)) {
        return Err(format!("unknown phase {p} ({})", PHASES.join(", ")));
    }
    let dev = cli.ring.device(cli.dev.as_deref()).map_err(lib("opening the device"))?;
    let pd = dev.alloc_pd().map_err(lib("ibv_alloc_pd"))?;
    let cq = dev.create_cq(64, 0).map_err(lib("ibv_create_cq"))?;
    let access = AccessFlags::ALL_REMOTE | AccessFlags::MW_BIND;
    let mr = pd.reg_mr(BUF_SIZE + PAGE as usize, access).map_err(lib("ibv_reg_mr"))?;
    // Page-aligned, for the fast-registered MR's page list.
    let base = mr.addr().next_multiple_of(PAGE) - mr.addr();
    let stream = match &cli.servername {
        Some(host) => connect_retry(host, cli.port)?,
        None => {
            let l = TcpListener::bind((cli.bind.as_str(), cli.port))
                .map_err(|e| format!("cannot listen on {}:{}: {e}", cli.bind, cli.port))?;
            l.accept().map_err(|e| format!("accept: {e}"))?.0
        }
    };
    let mut side =
        Side { cli, dev: &dev, pd: &pd, cq: &cq, mr: &mr, base, ex: Exchange::new(stream)?, phase: String::new() };
    for p in phases {
        *phase = p.to_string();
        side.phase = p.to_string();
        let qp = side.make_qp()?;
        side.connect(&qp, mtu)?;
        match p {
            "mw" => side.phase_mw(&qp)?,
            "rights1" => side.phase_rights(&qp, MwType::Type1)?,
            "rights2" => side.phase_rights(&qp, MwType::Type2)?,
            "atomic_write" => side.phase_atomic_write(&qp)?,
            "flush" => side.phase_flush(&qp)?,
            _ => side.phase_frmr(&qp)?,
        }
        // Completions the error state flushed are not checked.
        while let Ok(Some(_)) = cq.poll_one() {}
        drop(qp);
        println!("PASS {p} as {}", cli.role.name());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchange_lines_parse_and_refuse_garbage() {
        let gid = "00000000000000000000ffff0a000001";
        assert_eq!(parse_qp(&format!("QP 11 abcdef {gid}")).map(|(q, p, g)| (q, p, g[15])), Some((0x11, 0xabcdef, 1)));
        assert_eq!(parse_qp(&format!("QP 11 zz {gid}")), None);
        assert_eq!(parse_qp("QP 11 22 0000"), None);
        assert_eq!(fields("MW 1 2 3 4 5 6", "MW", 6), Ok(vec![1, 2, 3, 4, 5, 6]));
        assert!(fields("MW 1 2 3", "MW", 6).is_err());
        assert!(fields("RIGHTS 1 x", "RIGHTS", 2).is_err());
        assert!(key(1 << 40, "l").is_err());
    }

    #[test]
    fn the_patterns_are_the_c_programs() {
        // ext_verbs.c: (uint8_t)(i * 7 + seed * 31 + 1).
        assert_eq!(pat(0, 3), [1, 8, 15]);
        assert_eq!(pat(9, 2), [24, 31]);
        assert_ne!(pat(1, 64), pat(4, 64), "a refused WRITE's data differs from what is there");
    }
}
