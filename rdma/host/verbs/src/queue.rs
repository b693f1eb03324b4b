//! Completion queues, queue pairs and shared receive queues, and the data
//! path: `post_send` / `post_recv` write WQEs straight into the rings the
//! firmware placed in this context's queue area and publish them with one
//! release store of the producer index (the doorbell); `poll_cq` copies
//! CQEs out of the completion ring. No command round trip on the data path.
//!
//! The rings come from the firmware's CREATE_* answers; they are checked
//! before use (inside this context's queue area, geometry the ABI allows,
//! entry sizes that hold what we write), and the ring code detects a
//! misbehaving firmware index ([`verbs_ring::ring`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use verbs_ring::SharedMem;
use verbs_ring::abi::{CQE_SIZE, Cqe, RecvWqe, RingPlacement, SendWqe, Sge, range_within, send_flags, wr_opcode};
use verbs_ring::cmd::{self, AltPath, QpAttr, QpCap, nr, qp_attr_mask, qp_state};
use verbs_ring::ring::{Consumer, Producer, RingError, RingGeometry};
use verbs_ring::wake::CqArm;
use verbs_ring::wire::Wire;
use verbs_ring::wqe;

use crate::context::{Inner, backoff, lock};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::pd::{AccessFlags, Ah, Pd};

pub use verbs_ring::cmd::qp_type;

/// Check a ring the firmware placed: inside our queue area, usable geometry,
/// entries at least `min_entry` bytes.
fn ring_geometry(inner: &Inner, p: RingPlacement, min_entry: usize, what: &str) -> Result<RingGeometry> {
    let (qo, ql) = inner.layout.queue_area(inner.ctx).unwrap_or((0, 0));
    let bytes = RingPlacement::bytes(p.entries, p.entry_size).unwrap_or(u64::MAX);
    if !range_within(p.off, bytes, qo, ql) {
        return Err(Error::Protocol(format!("{what} ring at {:#x} lies outside this context's queue area", p.off)));
    }
    if (p.entry_size as usize) < min_entry {
        return Err(Error::Protocol(format!("{what} ring entries of {} bytes are too small", p.entry_size)));
    }
    RingGeometry::new(p, inner.mem.len()).map_err(|e| Error::Protocol(format!("{what} ring: {e}")))
}

fn ring_error(e: RingError) -> Error {
    match e {
        RingError::Full => Error::QueueFull,
        RingError::TooLarge { .. } => Error::InvalidArgument("work request larger than a queue entry"),
        other => Error::Protocol(other.to_string()),
    }
}

/// `enum ibv_wc_status`, with libibverbs' strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WcStatus(pub u32);

impl WcStatus {
    pub const SUCCESS: WcStatus = WcStatus(0);

    pub fn is_success(self) -> bool {
        self.0 == 0
    }

    /// `ibv_wc_status_str`.
    pub fn as_str(self) -> &'static str {
        crate::names::wc_status(self.0)
    }
}

impl std::fmt::Display for WcStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.as_str(), self.0)
    }
}

/// A work completion (`struct ibv_wc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    pub wr_id: u64,
    pub status: WcStatus,
    /// One of [`verbs_ring::abi::wc_opcode`].
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Immediate data, or the invalidated rkey of a SEND WITH INVALIDATE
    /// (`ibv_wc`'s union of the two), when `wc_flags` says there is one.
    pub imm_data: Option<u32>,
    pub qp_num: u32,
    pub src_qp: u32,
    /// Bits of [`verbs_ring::abi::wc_flags`].
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
}

impl From<Cqe> for WorkCompletion {
    fn from(c: Cqe) -> Self {
        use verbs_ring::abi::wc_flags::{WITH_IMM, WITH_INV};
        WorkCompletion {
            wr_id: c.wr_id,
            status: WcStatus(c.status),
            opcode: c.opcode,
            vendor_err: c.vendor_err,
            byte_len: c.byte_len,
            imm_data: (c.wc_flags & (WITH_IMM | WITH_INV) != 0).then_some(c.imm_data),
            qp_num: c.qp_num,
            src_qp: c.src_qp,
            wc_flags: c.wc_flags,
            pkey_index: c.pkey_index,
            slid: c.slid,
            sl: c.sl,
        }
    }
}

/// A completion queue (`ibv_cq`); destroyed on drop.
pub struct Cq<'d> {
    dev: &'d Device,
    handle: u32,
    cqe: u32,
    ring: Mutex<Consumer>,
    /// Completion event requests (`ibv_req_notify_cq`), [`verbs_ring::wake`].
    arm: Mutex<CqArm>,
}

/// Rounds of spinning and yielding before [`Cq::wait`] sleeps: a completion
/// that is a few microseconds away is taken without a syscall.
const SPIN_ROUNDS: u32 = 256;

impl<'d> Cq<'d> {
    pub(crate) fn create(dev: &'d Device, cqe: u32, user_handle: u64) -> Result<Cq<'d>> {
        let inner = &dev.ctx.inner;
        let req = cmd::CreateCqReq { user_handle, dev_index: dev.index(), cqe, comp_vector: 0, reserved: 0 };
        let r: cmd::CreateCqResp = inner.call(nr::CREATE_CQ, &req)?;
        // From here the CQ exists: build the handle first, so that an
        // unusable ring still destroys it on the way out.
        let mut cq = Cq {
            dev,
            handle: r.cq_handle,
            cqe: r.cqe,
            ring: Mutex::new(Consumer::new(placeholder())),
            arm: Mutex::new(CqArm::default()),
        };
        let geo = ring_geometry(inner, r.ring, CQE_SIZE as usize, "completion")?;
        cq.ring = Mutex::new(Consumer::new(geo));
        Ok(cq)
    }

    /// Actual capacity.
    pub fn cqe(&self) -> u32 {
        self.cqe
    }

    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// `ibv_poll_cq`: up to `wc.len()` completions; how many were written.
    pub fn poll(&self, wc: &mut [WorkCompletion]) -> Result<usize> {
        let mem = &self.dev.ctx.inner.mem;
        let mut ring = lock(&self.ring);
        let mut b = [0u8; CQE_SIZE as usize];
        let mut n = 0;
        while n < wc.len() {
            if !ring.pop(mem, &mut b).map_err(ring_error)? {
                break;
            }
            // A CQE always decodes: any bytes are a value; checking is the caller's.
            let Some(c) = Cqe::decode(&b) else { break };
            wc[n] = c.into();
            n += 1;
        }
        Ok(n)
    }

    /// One completion, if any.
    pub fn poll_one(&self) -> Result<Option<WorkCompletion>> {
        let mut wc = [EMPTY_WC];
        Ok((self.poll(&mut wc)? == 1).then_some(wc[0]))
    }

    /// `ibv_req_notify_cq`: ask for an event at the next completion
    /// (`solicited_only`: the next solicited or unsuccessful one). Poll
    /// afterwards: completions already in the ring raise no event. Without
    /// a doorbell nobody is told; [`Cq::event_fired`] still says.
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        let mem = &self.dev.ctx.inner.mem;
        let geo = *lock(&self.ring).geometry();
        lock(&self.arm).arm(mem, &geo, solicited_only).map_err(|e| Error::Protocol(e.to_string()))
    }

    /// Whether the event last asked for with [`Cq::req_notify`] has come.
    pub fn event_fired(&self) -> bool {
        let geo = *lock(&self.ring).geometry();
        lock(&self.arm).fired(&self.dev.ctx.inner.mem, &geo).unwrap_or(false)
    }

    /// One completion, waiting at most `timeout`: a short spin (a completion
    /// microseconds away costs no syscall), then, when the appliance has a
    /// doorbell, sleep on its completion event (no CPU while nothing comes),
    /// else poll with a back-off.
    pub fn wait(&self, timeout: Duration) -> Result<WorkCompletion> {
        self.wait_with(timeout, SPIN_ROUNDS)
    }

    /// [`Cq::wait`] without the spin: arm and sleep at once (what
    /// `ibv_rc_pingpong -e` does with a completion channel).
    pub fn wait_event(&self, timeout: Duration) -> Result<WorkCompletion> {
        self.wait_with(timeout, 0)
    }

    fn wait_with(&self, timeout: Duration, spin: u32) -> Result<WorkCompletion> {
        let start = Instant::now();
        let mut round = 0;
        loop {
            if let Some(wc) = self.poll_one()? {
                return Ok(wc);
            }
            let elapsed = start.elapsed();
            if elapsed > timeout {
                return Err(Error::NothingCame { what: "completion", waited: elapsed });
            }
            if round > 1024 && self.dev.ctx.is_lost() {
                return Err(self.dev.ctx.inner.lost_error());
            }
            match &self.dev.ctx.inner.wake {
                Some(w) if round >= spin => {
                    let seen = w.generation();
                    self.req_notify(false)?;
                    // Armed: what came before it is found here, what comes
                    // after raises the event.
                    if let Some(wc) = self.poll_one()? {
                        return Ok(wc);
                    }
                    // Bounded, so a lost context is noticed.
                    let left = (timeout - elapsed).min(Duration::from_millis(500));
                    if !self.event_fired() {
                        w.wait_after(seen, left);
                    }
                    round = round.saturating_add(1);
                }
                _ => backoff(&mut round),
            }
        }
    }
}

/// A completion nobody wrote (fills output arrays).
pub const EMPTY_WC: WorkCompletion = WorkCompletion {
    wr_id: 0,
    status: WcStatus(0),
    opcode: 0,
    vendor_err: 0,
    byte_len: 0,
    imm_data: None,
    qp_num: 0,
    src_qp: 0,
    wc_flags: 0,
    pkey_index: 0,
    slid: 0,
    sl: 0,
};

/// Geometry for a handle whose real ring is not known yet (never used to
/// access memory: a ring of one 4-byte entry at offset 0 of a 132-byte view).
fn placeholder() -> RingGeometry {
    // Cannot fail: constants within every check of `RingGeometry::new`.
    RingGeometry::new(RingPlacement { off: 0, entries: 1, entry_size: 4 }, 132)
        .unwrap_or_else(|_| unreachable!("constant geometry"))
}

impl Drop for Cq<'_> {
    fn drop(&mut self) {
        let req = cmd::HandleReq { handle: self.handle, reserved: 0 };
        let _ = self.dev.ctx.inner.call::<_, cmd::DestroyResp>(nr::DESTROY_CQ, &req);
    }
}

/// What a send work request does (`ibv_wr_opcode` with its operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrOp {
    Send,
    SendWithImm(u32),
    SendWithInv(u32),
    Write {
        remote_addr: u64,
        rkey: u32,
    },
    WriteWithImm {
        remote_addr: u64,
        rkey: u32,
        imm: u32,
    },
    Read {
        remote_addr: u64,
        rkey: u32,
    },
    CompareSwap {
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    },
    FetchAdd {
        remote_addr: u64,
        rkey: u32,
        add: u64,
    },
    /// Invalidate a fast-register MR or a type 2B window of this QP's PD.
    LocalInv(u32),
    /// Register a fast-register MR ([`crate::FastRegMr::handle`]) with `key`
    /// (its index, the key byte of [`crate::FastRegMr::next_key`]).
    RegMr {
        mr: u32,
        key: u32,
        access: u32,
    },
    /// Bind a memory window (see [`crate::MemoryWindow::bind_wr`]).
    BindMw {
        mw_rkey: u32,
        new_rkey: u32,
        mr_lkey: u32,
        addr: u64,
        length: u64,
        access: u32,
    },
    /// IBA 1.5: write 8 bytes indivisibly (`ibv_wr_atomic_write`).
    AtomicWrite {
        remote_addr: u64,
        rkey: u32,
        data: [u8; 8],
    },
    /// IBA 1.5: make earlier writes to the range placed (`ibv_wr_flush`);
    /// `placement` bit 0 global visibility, bit 1 persistence; `level` 0 the
    /// range, 1 the whole MR.
    Flush {
        remote_addr: u64,
        rkey: u32,
        len: u64,
        placement: u8,
        level: u8,
    },
}

/// `enum ibv_send_flags`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendFlags(pub u32);

impl SendFlags {
    pub const NONE: SendFlags = SendFlags(0);
    pub const FENCE: SendFlags = SendFlags(send_flags::FENCE);
    pub const SIGNALED: SendFlags = SendFlags(send_flags::SIGNALED);
    pub const SOLICITED: SendFlags = SendFlags(send_flags::SOLICITED);
    /// Copy the SGEs' bytes into the WQE (up to `max_inline_data`).
    pub const INLINE: SendFlags = SendFlags(send_flags::INLINE);
}

impl std::ops::BitOr for SendFlags {
    type Output = SendFlags;
    fn bitor(self, o: SendFlags) -> SendFlags {
        SendFlags(self.0 | o.0)
    }
}

/// The destination of a UD send.
#[derive(Clone, Copy)]
pub struct UdDest<'a> {
    pub ah: &'a Ah<'a>,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// A send work request (`struct ibv_send_wr`).
#[derive(Clone, Copy)]
pub struct SendWr<'a> {
    pub wr_id: u64,
    pub op: WrOp,
    pub sg_list: &'a [Sge],
    pub flags: SendFlags,
    pub ud: Option<UdDest<'a>>,
}

impl SendWr<'_> {
    /// The fixed part of the WQE.
    fn header(&self) -> SendWqe {
        let mut w = SendWqe { wr_id: self.wr_id, send_flags: self.flags.0, ..Default::default() };
        match self.op {
            WrOp::Send => w.opcode = wr_opcode::SEND,
            WrOp::SendWithImm(imm) => (w.opcode, w.imm_data) = (wr_opcode::SEND_WITH_IMM, imm),
            WrOp::SendWithInv(rkey) => (w.opcode, w.imm_data) = (wr_opcode::SEND_WITH_INV, rkey),
            WrOp::Write { remote_addr, rkey } => {
                (w.opcode, w.remote_addr, w.rkey) = (wr_opcode::RDMA_WRITE, remote_addr, rkey)
            }
            WrOp::WriteWithImm { remote_addr, rkey, imm } => {
                (w.opcode, w.remote_addr, w.rkey, w.imm_data) = (wr_opcode::RDMA_WRITE_WITH_IMM, remote_addr, rkey, imm)
            }
            WrOp::Read { remote_addr, rkey } => {
                (w.opcode, w.remote_addr, w.rkey) = (wr_opcode::RDMA_READ, remote_addr, rkey)
            }
            WrOp::CompareSwap { remote_addr, rkey, compare, swap } => {
                (w.opcode, w.remote_addr, w.rkey, w.compare_add, w.swap) =
                    (wr_opcode::ATOMIC_CMP_AND_SWP, remote_addr, rkey, compare, swap)
            }
            WrOp::FetchAdd { remote_addr, rkey, add } => {
                (w.opcode, w.remote_addr, w.rkey, w.compare_add) =
                    (wr_opcode::ATOMIC_FETCH_AND_ADD, remote_addr, rkey, add)
            }
            // The memory operations' field use is `abi::SendWqe`'s.
            WrOp::LocalInv(rkey) => (w.opcode, w.imm_data) = (wr_opcode::LOCAL_INV, rkey),
            WrOp::RegMr { mr, key, access } => {
                (w.opcode, w.ud_ah, w.imm_data, w.ud_remote_qpn) = (wr_opcode::REG_MR, mr, key, access)
            }
            WrOp::BindMw { mw_rkey, new_rkey, mr_lkey, addr, length, access } => {
                w.opcode = wr_opcode::BIND_MW;
                (w.rkey, w.imm_data, w.ud_remote_qkey) = (mw_rkey, new_rkey, mr_lkey);
                (w.remote_addr, w.compare_add, w.ud_remote_qpn) = (addr, length, access);
            }
            WrOp::AtomicWrite { remote_addr, rkey, data } => {
                (w.opcode, w.remote_addr, w.rkey, w.compare_add) =
                    (wr_opcode::ATOMIC_WRITE, remote_addr, rkey, u64::from_le_bytes(data))
            }
            WrOp::Flush { remote_addr, rkey, len, placement, level } => {
                (w.opcode, w.remote_addr, w.rkey, w.compare_add) = (wr_opcode::FLUSH, remote_addr, rkey, len);
                w.imm_data = u32::from(placement) | u32::from(level) << 8;
            }
        }
        if let Some(ud) = self.ud {
            (w.ud_ah, w.ud_remote_qpn, w.ud_remote_qkey) = (ud.ah.handle, ud.remote_qpn, ud.remote_qkey);
        }
        w
    }
}

/// A receive queue's producer side (a QP's RQ or an SRQ).
struct RecvQueue {
    ring: Producer,
    max_sge: u32,
    batch: Vec<u8>,
}

impl RecvQueue {
    fn new(geo: RingGeometry, max_sge: u32) -> RecvQueue {
        RecvQueue { batch: Vec::new(), ring: Producer::new(geo), max_sge }
    }

    /// The queue of a resized SRQ: its new ring already holds the `moved`
    /// entries the firmware had not taken from the old one.
    fn resized(geo: RingGeometry, max_sge: u32, moved: u32) -> RecvQueue {
        RecvQueue { batch: Vec::new(), ring: Producer::taking_over(geo, moved), max_sge }
    }

    /// All or nothing, as [`Qp::post_send`].
    fn post(&mut self, mem: &impl SharedMem, wrs: &[(u64, &[Sge])]) -> Result<()> {
        let size = self.ring.geometry().entry_size();
        self.batch.clear();
        self.batch.resize(size * wrs.len(), 0);
        for (&(wr_id, sges), entry) in wrs.iter().zip(self.batch.chunks_mut(size)) {
            if sges.len() > self.max_sge as usize {
                return Err(Error::InvalidArgument("more SGEs than the receive queue's max_recv_sge"));
            }
            wqe::encode_recv(entry, wr_id, sges)
                .ok_or(Error::InvalidArgument("receive work request larger than a queue entry"))?;
        }
        if (self.ring.free(mem).map_err(ring_error)? as usize) < wrs.len() {
            return Err(Error::QueueFull);
        }
        for entry in self.batch.chunks(size) {
            self.ring.stage(mem, entry).map_err(ring_error)?;
        }
        self.ring.publish(mem).map_err(ring_error)
    }
}

/// Posts through `post` on `inner`'s rings, then rings the appliance if it
/// asked (after the entries are published, never before).
fn posted(inner: &Inner, r: Result<()>) -> Result<()> {
    if r.is_ok() {
        inner.kick();
    }
    r
}

struct SendQueue {
    ring: Producer,
    cap: QpCap,
    /// Encoded entries of the request being posted.
    batch: Vec<u8>,
}

/// The attributes a QP was created with (`struct ibv_qp_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct QpInitAttr {
    /// One of [`qp_type`].
    pub qp_type: u8,
    pub cap: QpCap,
    /// Every send WQE completes, whatever its flags.
    pub sq_sig_all: bool,
    pub user_handle: u64,
}

impl Default for QpInitAttr {
    fn default() -> Self {
        QpInitAttr {
            qp_type: qp_type::RC,
            cap: QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            sq_sig_all: false,
            user_handle: 0,
        }
    }
}

/// A queue pair (`ibv_qp`); destroyed on drop, before the PD, CQs and SRQ
/// it borrows.
pub struct Qp<'a> {
    pd: &'a Pd<'a>,
    handle: u32,
    qp_num: u32,
    qp_type: u8,
    cap: QpCap,
    sq: Mutex<SendQueue>,
    rq: Option<Mutex<RecvQueue>>,
}

impl<'a> Qp<'a> {
    /// `ibv_create_qp`.
    pub fn create(
        pd: &'a Pd<'a>,
        send_cq: &'a Cq<'a>,
        recv_cq: &'a Cq<'a>,
        srq: Option<&'a Srq<'a>>,
        attr: &QpInitAttr,
    ) -> Result<Qp<'a>> {
        let inner = &pd.dev.ctx.inner;
        let req = cmd::CreateQpReq {
            user_handle: attr.user_handle,
            pd_handle: pd.handle,
            send_cq_handle: send_cq.handle,
            recv_cq_handle: recv_cq.handle,
            srq_handle: srq.map_or(0, |s| s.handle),
            cap: attr.cap,
            qp_type: attr.qp_type,
            sq_sig_all: u8::from(attr.sq_sig_all),
            reserved: [0; 2],
        };
        let r: cmd::CreateQpResp = inner.call(nr::CREATE_QP, &req)?;
        let dummy = || SendQueue { ring: Producer::new(placeholder()), cap: r.cap, batch: Vec::new() };
        let mut qp = Qp {
            pd,
            handle: r.qp_handle,
            qp_num: r.qp_num,
            qp_type: attr.qp_type,
            cap: r.cap,
            sq: Mutex::new(dummy()),
            rq: None,
        };
        let sq = ring_geometry(inner, r.sq, SendWqe::SIZE, "send")?;
        qp.sq = Mutex::new(SendQueue { batch: Vec::new(), ring: Producer::new(sq), cap: r.cap });
        if srq.is_none() {
            let rq = ring_geometry(inner, r.rq, RecvWqe::SIZE, "receive")?;
            qp.rq = Some(Mutex::new(RecvQueue::new(rq, r.cap.max_recv_sge)));
        }
        Ok(qp)
    }

    pub fn qp_num(&self) -> u32 {
        self.qp_num
    }

    pub fn qp_type(&self) -> u8 {
        self.qp_type
    }

    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Capacities as created (rounded up by the firmware).
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// `ibv_modify_qp`. With an address vector the appliance may first
    /// have to resolve the destination's MAC; the call waits for that.
    pub fn modify(&self, attr: &QpAttr, mask: u32) -> Result<()> {
        self.modify_with_alt(attr, &AltPath::default(), mask)
    }

    /// `ibv_modify_qp` with the alternate path too, which `mask` names with
    /// [`qp_attr_mask::ALT_PATH`] (`alt` is sent only then, so firmware
    /// older than ABI 1.6 still takes the other requests); an armed
    /// connected QP migrates to it when its primary path fails, raising
    /// `PATH_MIG` (see `Context::async_event`).
    pub fn modify_with_alt(&self, attr: &QpAttr, alt: &AltPath, mask: u32) -> Result<()> {
        let alt = if mask & qp_attr_mask::ALT_PATH != 0 { *alt } else { AltPath::default() };
        let req = cmd::ModifyQpReq { qp_handle: self.handle, attr_mask: mask, attr: *attr, alt };
        self.pd.dev.ctx.inner.call_resolving::<_, cmd::Empty>(nr::MODIFY_QP, &req)?;
        Ok(())
    }

    /// `ibv_attach_mcast`: this UD QP receives what is sent to the multicast
    /// GID `gid` (an IPv4-mapped 224.0.0.0/4 or an IPv6 ff00::/8 address; RoCE
    /// has no multicast LIDs). Send to a group with an AH to `gid` and remote
    /// QPN 0xFFFFFF.
    pub fn attach_mcast(&self, gid: [u8; 16]) -> Result<()> {
        let req = cmd::McastReq { qp_handle: self.handle, mlid: 0, reserved: 0, gid };
        self.pd.dev.ctx.inner.call::<_, cmd::Empty>(nr::ATTACH_MCAST, &req).map(|_| ())
    }

    /// `ibv_detach_mcast`.
    pub fn detach_mcast(&self, gid: [u8; 16]) -> Result<()> {
        let req = cmd::McastReq { qp_handle: self.handle, mlid: 0, reserved: 0, gid };
        self.pd.dev.ctx.inner.call::<_, cmd::Empty>(nr::DETACH_MCAST, &req).map(|_| ())
    }

    /// `ibv_query_qp`.
    pub fn query(&self, mask: u32) -> Result<cmd::QueryQpResp> {
        let req = cmd::QueryQpReq { qp_handle: self.handle, attr_mask: mask };
        self.pd.dev.ctx.inner.call(nr::QUERY_QP, &req)
    }

    /// RESET -> INIT with the port, P_Key index 0 and `access`.
    pub fn to_init(&self, port: u8, access: AccessFlags) -> Result<()> {
        let attr = QpAttr { qp_state: qp_state::INIT, port_num: port, qp_access_flags: access.0, ..Default::default() };
        let mut mask = qp_attr_mask::STATE | qp_attr_mask::PKEY_INDEX | qp_attr_mask::PORT;
        mask |= if self.qp_type == qp_type::UD { qp_attr_mask::QKEY } else { qp_attr_mask::ACCESS_FLAGS };
        self.modify(&attr, mask)
    }

    /// INIT -> RTR towards `remote` (RC/UC), as ibv_rc_pingpong does.
    pub fn to_rtr(&self, remote: &RtrAttr) -> Result<()> {
        let attr = QpAttr {
            qp_state: qp_state::RTR,
            path_mtu: remote.path_mtu,
            dest_qp_num: remote.dest_qp_num,
            rq_psn: remote.rq_psn,
            max_dest_rd_atomic: remote.max_dest_rd_atomic,
            min_rnr_timer: remote.min_rnr_timer,
            ah_attr: cmd::AhAttr {
                dgid: remote.dgid,
                sgid_index: remote.sgid_index,
                hop_limit: 1,
                is_global: 1,
                dlid: remote.dlid,
                port_num: remote.port,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut mask = qp_attr_mask::STATE | qp_attr_mask::AV | qp_attr_mask::PATH_MTU;
        if self.qp_type != qp_type::UD {
            mask |= qp_attr_mask::DEST_QPN | qp_attr_mask::RQ_PSN;
        }
        if self.qp_type == qp_type::RC {
            mask |= qp_attr_mask::MAX_DEST_RD_ATOMIC | qp_attr_mask::MIN_RNR_TIMER;
        }
        self.modify(&attr, mask)
    }

    /// RTR -> RTS with send PSN `sq_psn` (rc_pingpong's timeout 14, retry 7,
    /// RNR retry 7, one outstanding read/atomic).
    pub fn to_rts(&self, sq_psn: u32, max_rd_atomic: u8) -> Result<()> {
        let attr = QpAttr {
            qp_state: qp_state::RTS,
            sq_psn,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic,
            ..Default::default()
        };
        let mut mask = qp_attr_mask::STATE | qp_attr_mask::SQ_PSN;
        if self.qp_type == qp_type::RC {
            mask |= qp_attr_mask::TIMEOUT
                | qp_attr_mask::RETRY_CNT
                | qp_attr_mask::RNR_RETRY
                | qp_attr_mask::MAX_QP_RD_ATOMIC;
        }
        self.modify(&attr, mask)
    }

    /// `ibv_post_send`: write every WQE, then ring the doorbell once.
    /// All or nothing: every request is checked and encoded, and the queue
    /// checked for room, before the first one is written.
    pub fn post_send(&self, wrs: &[SendWr<'_>]) -> Result<()> {
        let mem = &self.pd.dev.ctx.inner.mem;
        let mut guard = lock(&self.sq);
        let sq = &mut *guard;
        let size = sq.ring.geometry().entry_size();
        sq.batch.clear();
        sq.batch.resize(size * wrs.len(), 0);
        for (wr, entry) in wrs.iter().zip(sq.batch.chunks_mut(size)) {
            if wr.ud.is_some() != (self.qp_type == qp_type::UD) {
                return Err(Error::InvalidArgument("a UD destination is needed for UD QPs and only for them"));
            }
            let hdr = wr.header();
            if wr.flags.0 & send_flags::INLINE != 0 {
                let total: usize = wr.sg_list.iter().map(|s| s.length as usize).sum();
                if total > sq.cap.max_inline_data as usize {
                    return Err(Error::InvalidArgument("inline data beyond max_inline_data"));
                }
                let mut data = vec![0u8; total];
                let mut at = 0;
                for s in wr.sg_list {
                    let n = s.length as usize;
                    let off = usize::try_from(s.addr).map_err(|_| Error::InvalidArgument("SGE address"))?;
                    mem.read(off, &mut data[at..at + n])
                        .map_err(|_| Error::InvalidArgument("SGE outside the region"))?;
                    at += n;
                }
                wqe::encode_send_inline(entry, &hdr, &data)
            } else {
                if wr.sg_list.len() > sq.cap.max_send_sge as usize {
                    return Err(Error::InvalidArgument("more SGEs than max_send_sge"));
                }
                wqe::encode_send(entry, &hdr, wr.sg_list)
            }
            .ok_or(Error::InvalidArgument("work request larger than a send queue entry"))?;
        }
        if (sq.ring.free(mem).map_err(ring_error)? as usize) < wrs.len() {
            return Err(Error::QueueFull);
        }
        for entry in sq.batch.chunks(size) {
            sq.ring.stage(mem, entry).map_err(ring_error)?;
        }
        let r = sq.ring.publish(mem).map_err(ring_error);
        drop(guard);
        posted(&self.pd.dev.ctx.inner, r)
    }

    /// `ibv_post_recv` on the QP's own receive queue.
    pub fn post_recv(&self, wrs: &[(u64, &[Sge])]) -> Result<()> {
        let rq = self.rq.as_ref().ok_or(Error::InvalidArgument("the QP receives through an SRQ"))?;
        let inner = &self.pd.dev.ctx.inner;
        let r = lock(rq).post(&inner.mem, wrs);
        posted(inner, r)
    }
}

impl Drop for Qp<'_> {
    fn drop(&mut self) {
        let req = cmd::HandleReq { handle: self.handle, reserved: 0 };
        let _ = self.pd.dev.ctx.inner.call::<_, cmd::DestroyResp>(nr::DESTROY_QP, &req);
    }
}

/// The remote side of a connection, for [`Qp::to_rtr`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RtrAttr {
    pub port: u8,
    /// `enum ibv_mtu` (1 = 256 .. 5 = 4096).
    pub path_mtu: u32,
    pub dest_qp_num: u32,
    pub rq_psn: u32,
    pub dlid: u16,
    pub dgid: [u8; 16],
    pub sgid_index: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
}

/// A shared receive queue (`ibv_srq`); destroyed on drop.
pub struct Srq<'a> {
    pd: &'a Pd<'a>,
    handle: u32,
    srq_num: u32,
    /// Its size, which a resize changes (under the `rq` lock).
    max_wr: AtomicU32,
    rq: Mutex<RecvQueue>,
}

impl<'a> Srq<'a> {
    /// `ibv_create_srq`.
    pub fn create(pd: &'a Pd<'a>, max_wr: u32, max_sge: u32, srq_limit: u32) -> Result<Srq<'a>> {
        let inner = &pd.dev.ctx.inner;
        let req = cmd::CreateSrqReq { user_handle: 0, pd_handle: pd.handle, max_wr, max_sge, srq_limit };
        let r: cmd::CreateSrqResp = inner.call(nr::CREATE_SRQ, &req)?;
        let mut srq = Srq {
            pd,
            handle: r.srq_handle,
            srq_num: r.srq_num,
            max_wr: AtomicU32::new(r.max_wr),
            rq: Mutex::new(RecvQueue::new(placeholder(), 0)),
        };
        let geo = ring_geometry(inner, r.ring, RecvWqe::SIZE, "shared receive")?;
        srq.rq = Mutex::new(RecvQueue::new(geo, r.max_sge));
        Ok(srq)
    }

    pub fn srq_num(&self) -> u32 {
        self.srq_num
    }

    pub fn max_wr(&self) -> u32 {
        self.max_wr.load(Ordering::Relaxed)
    }

    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// `ibv_modify_srq`: `attr_mask` of [`cmd::srq_attr_mask`]. `MAX_WR`
    /// resizes the SRQ (to the next power of two, as at creation), the WQEs
    /// posted kept; refused below the WQEs posted or an armed limit (EINVAL).
    /// `LIMIT` re-arms the limit (the SRQ then raises
    /// `IBV_EVENT_SRQ_LIMIT_REACHED` once, when a receive leaves fewer WQEs
    /// than `srq_limit`). With both, the resize goes first, as rxe's, and a
    /// limit above the new size is refused before anything changes.
    pub fn modify(&self, attr_mask: u32, max_wr: u32, srq_limit: u32) -> Result<()> {
        use cmd::srq_attr_mask::{LIMIT, MAX_WR};
        let inner = &self.pd.dev.ctx.inner;
        if attr_mask & MAX_WR != 0 {
            if attr_mask & LIMIT != 0 && srq_limit > max_wr {
                return Err(Error::InvalidArgument("an SRQ limit above its new size"));
            }
            // Held through the resize: no post may land in the old ring
            // after the firmware has moved its entries.
            let mut rq = lock(&self.rq);
            let req = cmd::ResizeSrqReq { srq_handle: self.handle, max_wr };
            let r: cmd::ResizeSrqResp = inner.call(nr::RESIZE_SRQ, &req)?;
            let geo = ring_geometry(inner, r.ring, RecvWqe::SIZE, "shared receive")?;
            *rq = RecvQueue::resized(geo, rq.max_sge, r.moved);
            self.max_wr.store(r.max_wr, Ordering::Relaxed);
        }
        if attr_mask & !MAX_WR != 0 {
            let req = cmd::ModifySrqReq { srq_handle: self.handle, attr_mask: attr_mask & !MAX_WR, max_wr, srq_limit };
            inner.call::<_, cmd::Empty>(nr::MODIFY_SRQ, &req)?;
        }
        Ok(())
    }

    /// [`Srq::modify`] of the limit alone (0 disarms).
    pub fn set_limit(&self, srq_limit: u32) -> Result<()> {
        self.modify(cmd::srq_attr_mask::LIMIT, 0, srq_limit)
    }

    /// `ibv_post_srq_recv`.
    pub fn post_recv(&self, wrs: &[(u64, &[Sge])]) -> Result<()> {
        let inner = &self.pd.dev.ctx.inner;
        let r = lock(&self.rq).post(&inner.mem, wrs);
        posted(inner, r)
    }
}

impl Drop for Srq<'_> {
    fn drop(&mut self) {
        let req = cmd::HandleReq { handle: self.handle, reserved: 0 };
        let _ = self.pd.dev.ctx.inner.call::<_, cmd::DestroyResp>(nr::DESTROY_SRQ, &req);
    }
}
