//! The transport as the kernel drives it: one [`RxeTransport`] per rxe device, owning
//! its object pools and its memory view. The kernel creates objects and posts work
//! requests through the verbs below, hands every received RoCE frame to
//! [`RxeTransport::receive`] and ends each batch of them with
//! [`RxeTransport::end_batch`] (the transport decides when held-back ACKs go and
//! when the sink must flush), calls [`RxeTransport::poll`] when
//! [`RxeTransport::next_deadline`] comes (or whenever it has time), and lends TX
//! buffers through a [`FrameSink`]. Time is always an argument; nothing here reads a
//! clock, and nothing on the packet path allocates.
//!
//! The verbs follow IBA vol. 1 ch. 11 (and `libibverbs` for values and names);
//! Linux's counterpart is `rxe_verbs.c`.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;

use crate::core::gid::Gid;
use crate::core::port::IbMtu;
use crate::wire::frame::{self, IpId, IpPath};
use crate::wire::opcode_table::{Direction, QpTypes};
use crate::wire::{Ecn, Opcode, Psn, sport};

use super::ah::{Ah, AhAttr, AhError, AhHandle, LocalPort};
use super::apm;
use super::completer;
use super::cq::{Cq, CqHandle};
use super::device::{Config, Device};
use super::event::AsyncEvent;
use super::keys::KeyStream;
use super::mad_port::{self, MAD_SIZE, MadPort, ReceivedMad};
use super::mcast::{self, Groups, McastError};
use super::mem_ops;
use super::memory::Memory;
use super::mr::{self, AccessFlags, MAX_PAGE_SHIFT, MIN_PAGE_SHIFT, Mr, MrHandle, MrType};
use super::mw::{self, Mw, MwHandle, MwType};
use super::pd::{Pd, PdHandle};
use super::pool::{Pool, PoolFull, split};
use super::qp::{
    FIRST_QPN, GSI_QKEY, GSI_QPN, MAX_RD_ATOMIC, Qp, QpAttr, QpHandle, QpInitAttr, ReqState, RespState, SendQueue,
};
use super::qp_state::{AttrMask, ModifyError, QpState, QpType, check_transition};
use super::queue::{PostError, RecvQueue};
use super::requester;
use super::responder;
use super::sched::Schedule;
use super::sink::{FrameSink, Watched};
use super::srq::{Srq, SrqHandle};
use super::stats::Stats;
use super::time::Instant;
use super::wc::{WcOpcode, WcStatus, WorkCompletion};
use super::wr::{MemOp, RecvWr, SendWr, WrOpcode};
use vocab::DropReason;

/// Why a verb failed. Each names what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerbsError {
    /// A handle that names no live object of that kind.
    BadHandle(&'static str),
    /// The object is still used by others (a PD with MRs, a CQ with QPs, ...).
    Busy(&'static str),
    /// The pool for this kind of object is full.
    TooMany(&'static str),
    /// An argument out of range.
    InvalidArgument(&'static str),
    /// The modify-QP table refused the call.
    Modify(ModifyError),
    /// The work request could not be queued.
    Post(PostError),
    /// The QP's state does not allow this verb.
    InvalidState(QpState),
    /// The address vector cannot be used.
    Address(AhError),
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerbsError::BadHandle(what) => write!(f, "no such {what}"),
            VerbsError::Busy(what) => write!(f, "{what} is still in use"),
            VerbsError::TooMany(what) => write!(f, "too many {what}s"),
            VerbsError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            VerbsError::Modify(e) => write!(f, "modify QP: {e}"),
            VerbsError::Post(e) => write!(f, "post: {e:?}"),
            VerbsError::InvalidState(s) => write!(f, "not allowed in QP state {s:?}"),
            VerbsError::Address(e) => write!(f, "address vector: {e:?}"),
        }
    }
}

impl From<ModifyError> for VerbsError {
    fn from(e: ModifyError) -> Self {
        VerbsError::Modify(e)
    }
}

impl From<PostError> for VerbsError {
    fn from(e: PostError) -> Self {
        VerbsError::Post(e)
    }
}

type Result<T> = core::result::Result<T, VerbsError>;

fn full(what: &'static str) -> impl Fn(PoolFull) -> VerbsError {
    move |_| VerbsError::TooMany(what)
}

/// Pool limits (rxe's, scaled to an appliance).
const MAX_PD: u32 = 1 << 16;
const MAX_MR: u32 = 1 << 16;
/// Windows' indices start at `mw::INDEX_BASE`, above every MR's; as many as
/// rxe advertises (`max_mw`), which still fit the 24-bit index.
pub const MAX_MW: u32 = (1 << 20) - ((1 << 19) + 1);
/// Longest page list a fast-register MR may have (`max_fast_reg_page_list_len`).
pub const MAX_FAST_REG_PAGES: u32 = 512;
const MAX_CQ: u32 = 1 << 14;
const MAX_SRQ: u32 = 1 << 12;
const MAX_AH: u32 = 1 << 15;
const MAX_QP: u32 = 1 << 14;
/// Largest CQ, WR count and SGE count a caller may ask for (rxe's limits).
const MAX_CQE: usize = (1 << 15) - 1;
const MAX_WR: u32 = 1 << 15;
const MAX_SGE: u32 = 32;

/// The QPN of the QP with pool handle `h`: its slot's index above the
/// reserved ones, plus MAX_QP for each earlier QP that slot held. So a QP
/// made right after one was destroyed gets a new number, as Linux's cyclic
/// QPN allocation gives: a peer's CM still holding the old connection in
/// timewait would refuse a REQ from the same QPN as stale.
fn qpn_for(h: u32) -> u32 {
    FIRST_QPN + super::pool::split(h).0 + u32::from(super::pool::generation(h)) * MAX_QP
}

/// One rxe device's transport.
pub struct RxeTransport<M> {
    dev: Device<M>,
    qps: Pool<Qp>,
    gsi: Option<QpHandle>,
    /// QP1 for the firmware's agents while no consumer created a GSI QP.
    mad: MadPort,
    /// Frames received since the batch began or the held ACKs last went (see
    /// [`RxeTransport::end_batch`]).
    batch_frames: u32,
    /// The QPs (pool indices) that came to hold an ACK back while frames
    /// were received: what a flush visits, rather than every ready QP (a
    /// thousand busy QPs made each flush, every few frames, a walk of them all).
    owing: Vec<u32>,
    /// UD multicast groups and their QPs.
    mcast: Groups,
    /// The QPs with work now and the QPs' timers: what `poll` visits.
    sched: Schedule,
}

impl<M: Memory> RxeTransport<M> {
    /// A transport over `mem` for a port with these addresses.
    pub fn new(mem: M, port: LocalPort, config: Config) -> RxeTransport<M> {
        let keys = |space| KeyStream::new(config.key_seed, space);
        RxeTransport {
            dev: Device {
                mem,
                pds: Pool::new(MAX_PD),
                // Remote peers present these keys: random bytes, one stream each.
                mrs: Pool::with_random_keys(MAX_MR, keys(1)),
                mws: Pool::with_random_keys(MAX_MW, keys(2)),
                cqs: Pool::new(MAX_CQ),
                srqs: Pool::new(MAX_SRQ),
                ahs: Pool::new(MAX_AH),
                stats: Stats::default(),
                events: VecDeque::new(),
                ip_id: IpId::new(0),
                port,
                config,
            },
            qps: Pool::new(MAX_QP),
            gsi: None,
            mad: MadPort::default(),
            batch_frames: 0,
            owing: Vec::new(),
            mcast: Groups::default(),
            sched: Schedule::default(),
        }
    }

    pub fn memory(&self) -> &M {
        &self.dev.mem
    }

    pub fn memory_mut(&mut self) -> &mut M {
        &mut self.dev.mem
    }

    pub fn stats(&self) -> &Stats {
        &self.dev.stats
    }

    pub fn config(&self) -> &Config {
        &self.dev.config
    }

    /// The port's MAC and GIDs.
    pub fn port(&self) -> &LocalPort {
        &self.dev.port
    }

    /// The port's MAC and GIDs, for the driver to update on GID changes.
    pub fn port_mut(&mut self) -> &mut LocalPort {
        &mut self.dev.port
    }

    /// The port's active MTU changed (the netdev's MTU did): datagram QPs,
    /// which have no path MTU of their own, follow it, as rxe's do.
    pub fn set_port_mtu(&mut self, mtu: IbMtu) {
        self.dev.port.mtu = mtu;
        for i in 0..self.qps.index_bound() {
            if let Some((_, qp)) = self.qps.get_by_index_mut(i).filter(|(_, q)| q.qp_type.is_datagram()) {
                qp.attr.path_mtu = mtu;
            }
        }
    }

    /// Sets the next IPv4 identification value (tests match captures with it).
    pub fn set_ip_id(&mut self, next: u16) {
        self.dev.ip_id = IpId::new(next);
    }

    /// The oldest pending async event.
    pub fn poll_event(&mut self) -> Option<AsyncEvent> {
        self.dev.events.pop_front()
    }

    // ---- protection domains, memory regions, address handles ----

    pub fn alloc_pd(&mut self) -> Result<PdHandle> {
        self.dev.pds.insert(Pd::default()).map(PdHandle).map_err(full("PD"))
    }

    pub fn dealloc_pd(&mut self, pd: PdHandle) -> Result<()> {
        let p = self.dev.pds.get(pd.0).ok_or(VerbsError::BadHandle("PD"))?;
        if p.users > 0 {
            return Err(VerbsError::Busy("PD"));
        }
        self.dev.pds.remove(pd.0);
        Ok(())
    }

    fn pd_use(&mut self, pd: PdHandle, delta: i32) -> Result<()> {
        let p = self.dev.pds.get_mut(pd.0).ok_or(VerbsError::BadHandle("PD"))?;
        p.users = p.users.saturating_add_signed(delta);
        Ok(())
    }

    /// Registers `length` bytes at memory address `addr`, named by `iova` in
    /// work requests and by peers (the two are equal unless the consumer
    /// chose another iova, as `ibv_reg_mr_iova2` and the C ABI do).
    pub fn reg_mr(&mut self, pd: PdHandle, iova: u64, addr: u64, length: u64, access: u32) -> Result<MrHandle> {
        self.dev.pds.get(pd.0).ok_or(VerbsError::BadHandle("PD"))?;
        if access & !AccessFlags::ALL != 0 {
            return Err(VerbsError::InvalidArgument("unknown access flag"));
        }
        // IBA 10.6.3.1 (and ibv_reg_mr): remote write or atomic needs local write.
        let needs_local = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
        if access & needs_local != 0 && access & AccessFlags::LOCAL_WRITE == 0 {
            return Err(VerbsError::InvalidArgument("remote write/atomic access without local write"));
        }
        if iova.checked_add(length).is_none() || addr.checked_add(length).is_none() {
            return Err(VerbsError::InvalidArgument("MR wraps the address space"));
        }
        let access = AccessFlags(access);
        let key =
            self.dev.mrs.insert_with(|key| Mr::contiguous(pd, iova, addr, length, access, key)).map_err(full("MR"))?;
        self.pd_use(pd, 1)?;
        Ok(MrHandle(key))
    }

    /// `ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, max_num_sg)`: a fast-register MR for
    /// page lists of up to `max_pages` pages, born free: nothing may use it until
    /// a REG_MR work request registers it. Its lkey is the handle's raw value
    /// until a REG_MR changes the key byte ([`Self::mr`] shows the current one).
    pub fn alloc_mr(&mut self, pd: PdHandle, max_pages: u32) -> Result<MrHandle> {
        self.dev.pds.get(pd.0).ok_or(VerbsError::BadHandle("PD"))?;
        if max_pages == 0 || max_pages > MAX_FAST_REG_PAGES {
            return Err(VerbsError::InvalidArgument("max_num_sg"));
        }
        let key = self
            .dev
            .mrs
            .insert_with(|key| Mr {
                valid: false,
                mr_type: MrType::MemReg,
                max_pages,
                pages: Vec::with_capacity(max_pages as usize),
                ..Mr::contiguous(pd, 0, 0, 0, AccessFlags(0), key)
            })
            .map_err(full("MR"))?;
        self.pd_use(pd, 1)?;
        Ok(MrHandle(key))
    }

    /// `ib_map_mr_sg`: gives a free fast-register MR the pages its next REG_MR
    /// registers: `length` bytes named from `iova`, starting `iova % page_size`
    /// bytes into the first page, each page `page_size` bytes at a memory address
    /// aligned to it. (Linux lets this run on a registered MR too; changing the
    /// memory under a live rkey is never what a consumer means, so it is refused.)
    pub fn map_mr_sg(&mut self, mr: MrHandle, iova: u64, length: u64, page_size: u64, pages: &[u64]) -> Result<()> {
        let m = self.dev.mrs.get_mut(mr.0).ok_or(VerbsError::BadHandle("MR"))?;
        if m.mr_type != MrType::MemReg {
            return Err(VerbsError::InvalidArgument("not a fast-register MR"));
        }
        if m.valid {
            return Err(VerbsError::Busy("MR (registered)"));
        }
        let shift = page_size.trailing_zeros();
        if !page_size.is_power_of_two() || !(MIN_PAGE_SHIFT..=MAX_PAGE_SHIFT).contains(&shift) {
            return Err(VerbsError::InvalidArgument("page size"));
        }
        if pages.is_empty() || pages.len() > m.max_pages as usize {
            return Err(VerbsError::InvalidArgument("page list length"));
        }
        if pages.iter().any(|p| p % page_size != 0 || p.checked_add(page_size).is_none()) {
            return Err(VerbsError::InvalidArgument("page not aligned to the page size"));
        }
        let covered = (pages.len() as u64) << shift;
        let first = iova & (page_size - 1);
        if iova.checked_add(length).is_none() || first.saturating_add(length) > covered {
            return Err(VerbsError::InvalidArgument("length beyond the page list"));
        }
        m.pages.clear();
        m.pages.extend_from_slice(pages);
        m.page_shift = shift;
        m.iova = iova;
        m.addr = pages[0] + first;
        m.length = length;
        Ok(())
    }

    /// Deregisters an MR; refused while memory windows are bound to it (as rxe).
    pub fn dereg_mr(&mut self, mr: MrHandle) -> Result<()> {
        let m = self.dev.mrs.get(mr.0).ok_or(VerbsError::BadHandle("MR"))?;
        if m.bound_mws > 0 {
            return Err(VerbsError::Busy("MR (memory windows are bound to it)"));
        }
        let m = self.dev.mrs.remove(mr.0).ok_or(VerbsError::BadHandle("MR"))?;
        self.pd_use(m.pd, -1)
    }

    /// The MR whose current lkey is `key`.
    pub fn mr_by_key(&self, key: u32) -> Option<&Mr> {
        mr::find(&self.dev.mrs, key)
    }

    // ---- memory windows ----

    /// `ibv_alloc_mw`: a window of `mw_type` (1 or 2B) in `pd`; its first rkey
    /// is [`Self::mw_rkey`].
    pub fn alloc_mw(&mut self, pd: PdHandle, mw_type: MwType) -> Result<MwHandle> {
        self.dev.pds.get(pd.0).ok_or(VerbsError::BadHandle("PD"))?;
        let h = self.dev.mws.insert_with(|h| Mw::new(pd, mw_type, mw::rkey_of(h))).map_err(full("MW"))?;
        self.pd_use(pd, 1)?;
        Ok(MwHandle(h))
    }

    /// `ibv_dealloc_mw`: unbinds and frees a window.
    pub fn dealloc_mw(&mut self, mw: MwHandle) -> Result<()> {
        let w = self.dev.mws.remove(mw.0).ok_or(VerbsError::BadHandle("MW"))?;
        if let Some(m) = mr::find_mut(&mut self.dev.mrs, w.mr_key).filter(|_| w.mr_key != 0) {
            m.bound_mws = m.bound_mws.saturating_sub(1);
        }
        self.pd_use(w.pd, -1)
    }

    pub fn mw(&self, mw: MwHandle) -> Option<&Mw> {
        self.dev.mws.get(mw.0)
    }

    /// A window's current rkey.
    pub fn mw_rkey(&self, mw: MwHandle) -> Option<u32> {
        self.dev.mws.get(mw.0).map(|w| w.rkey)
    }

    /// `ibv_bind_mw` for a type 1 window: as libibverbs does, a BIND_MW work
    /// request on `qp` (ordered with the QP's other work, completed on its send
    /// CQ). The window's rkey takes the key byte of `new_rkey` when it runs.
    #[allow(clippy::too_many_arguments)]
    pub fn bind_mw(
        &mut self,
        qp: QpHandle,
        mw: MwHandle,
        wr_id: u64,
        send_flags: u32,
        new_rkey: u32,
        mr_lkey: u32,
        addr: u64,
        length: u64,
        access: u32,
    ) -> Result<()> {
        let w = self.dev.mws.get(mw.0).ok_or(VerbsError::BadHandle("MW"))?;
        if w.mw_type != MwType::Type1 {
            return Err(VerbsError::InvalidArgument("bind_mw binds type 1 windows; type 2B takes a BIND_MW WR"));
        }
        let op = MemOp::Bind { mw_rkey: w.rkey, new_rkey, mr_lkey, addr, length, access };
        let wr = SendWr::new(wr_id, WrOpcode::BindMw, &[]).with_flags(send_flags).with_mem(op);
        self.post_send(qp, &wr)
    }

    pub fn mr(&self, mr: MrHandle) -> Option<&Mr> {
        self.dev.mrs.get(mr.0)
    }

    pub fn create_ah(&mut self, pd: PdHandle, attr: &AhAttr) -> Result<AhHandle> {
        self.dev.pds.get(pd.0).ok_or(VerbsError::BadHandle("PD"))?;
        attr.path(&self.dev.port, 0).map_err(VerbsError::Address)?;
        let h = self.dev.ahs.insert(Ah { pd, attr: *attr }).map_err(full("AH"))?;
        self.pd_use(pd, 1)?;
        Ok(AhHandle(h))
    }

    pub fn destroy_ah(&mut self, ah: AhHandle) -> Result<()> {
        let a = self.dev.ahs.remove(ah.0).ok_or(VerbsError::BadHandle("AH"))?;
        self.pd_use(a.pd, -1)
    }

    // ---- completion queues ----

    pub fn create_cq(&mut self, depth: usize) -> Result<CqHandle> {
        if depth == 0 || depth > MAX_CQE {
            return Err(VerbsError::InvalidArgument("CQ depth"));
        }
        self.dev.cqs.insert(Cq::new(depth)).map(CqHandle).map_err(full("CQ"))
    }

    pub fn destroy_cq(&mut self, cq: CqHandle) -> Result<()> {
        let c = self.dev.cqs.get(cq.0).ok_or(VerbsError::BadHandle("CQ"))?;
        if c.users > 0 {
            return Err(VerbsError::Busy("CQ"));
        }
        self.dev.cqs.remove(cq.0);
        Ok(())
    }

    /// Moves up to `out.len()` completions into `out`; returns how many.
    pub fn poll_cq(&mut self, cq: CqHandle, out: &mut [WorkCompletion]) -> Result<usize> {
        Ok(self.dev.cqs.get_mut(cq.0).ok_or(VerbsError::BadHandle("CQ"))?.poll(out))
    }

    /// The next completion, if any.
    pub fn poll_one(&mut self, cq: CqHandle) -> Result<Option<WorkCompletion>> {
        Ok(self.dev.cqs.get_mut(cq.0).ok_or(VerbsError::BadHandle("CQ"))?.pop())
    }

    /// Arms the CQ: the next completion counts as a completion event.
    pub fn req_notify_cq(&mut self, cq: CqHandle) -> Result<()> {
        self.dev.cqs.get_mut(cq.0).ok_or(VerbsError::BadHandle("CQ"))?.armed = true;
        Ok(())
    }

    pub fn cq(&self, cq: CqHandle) -> Option<&Cq> {
        self.dev.cqs.get(cq.0)
    }

    // ---- shared receive queues ----

    pub fn create_srq(&mut self, pd: PdHandle, max_wr: u32, max_sge: u32) -> Result<SrqHandle> {
        self.dev.pds.get(pd.0).ok_or(VerbsError::BadHandle("PD"))?;
        if max_wr == 0 || max_wr > MAX_WR || max_sge == 0 || max_sge > MAX_SGE {
            return Err(VerbsError::InvalidArgument("SRQ size"));
        }
        let h = self.dev.srqs.insert(Srq::new(pd, max_wr as usize, max_sge as usize)).map_err(full("SRQ"))?;
        self.pd_use(pd, 1)?;
        Ok(SrqHandle(h))
    }

    /// Arms the SRQ limit (0 disarms).
    pub fn modify_srq_limit(&mut self, srq: SrqHandle, limit: u32) -> Result<()> {
        let s = self.dev.srqs.get_mut(srq.0).ok_or(VerbsError::BadHandle("SRQ"))?;
        if limit as usize > s.queue.capacity() {
            return Err(VerbsError::InvalidArgument("SRQ limit above its size"));
        }
        s.limit = limit;
        Ok(())
    }

    /// `ibv_modify_srq` with `IBV_SRQ_MAX_WR` (IBA 11.2.3.3; the device
    /// advertises SRQ_RESIZE): the SRQ holds `max_wr` WQEs from now on, the
    /// posted ones kept in order. Refused, changing nothing, beyond the
    /// device's most, below the WQEs posted (they would be lost) and below
    /// an armed limit (`rxe_srq_chk_attr`).
    pub fn resize_srq(&mut self, srq: SrqHandle, max_wr: u32) -> Result<()> {
        let s = self.dev.srqs.get_mut(srq.0).ok_or(VerbsError::BadHandle("SRQ"))?;
        if max_wr == 0 || max_wr > MAX_WR {
            return Err(VerbsError::InvalidArgument("SRQ size"));
        }
        if s.limit != 0 && max_wr < s.limit {
            return Err(VerbsError::InvalidArgument("SRQ size below its armed limit"));
        }
        s.queue.resize(max_wr as usize).map_err(|_| VerbsError::InvalidArgument("SRQ size below its posted WQEs"))
    }

    pub fn srq(&self, srq: SrqHandle) -> Option<&Srq> {
        self.dev.srqs.get(srq.0)
    }

    pub fn post_srq_recv(&mut self, srq: SrqHandle, wr: &RecvWr<'_>) -> Result<()> {
        let s = self.dev.srqs.get_mut(srq.0).ok_or(VerbsError::BadHandle("SRQ"))?;
        Ok(s.queue.post(wr)?)
    }

    pub fn destroy_srq(&mut self, srq: SrqHandle) -> Result<()> {
        let s = self.dev.srqs.get(srq.0).ok_or(VerbsError::BadHandle("SRQ"))?;
        if s.users > 0 {
            return Err(VerbsError::Busy("SRQ"));
        }
        let pd = s.pd;
        self.dev.srqs.remove(srq.0);
        self.pd_use(pd, -1)
    }

    // ---- queue pairs ----

    pub fn create_qp(&mut self, init: &QpInitAttr) -> Result<QpHandle> {
        self.dev.pds.get(init.pd.0).ok_or(VerbsError::BadHandle("PD"))?;
        self.dev.cqs.get(init.send_cq.0).ok_or(VerbsError::BadHandle("send CQ"))?;
        self.dev.cqs.get(init.recv_cq.0).ok_or(VerbsError::BadHandle("receive CQ"))?;
        if let Some(srq) = init.srq {
            let s = self.dev.srqs.get(srq.0).ok_or(VerbsError::BadHandle("SRQ"))?;
            if s.pd != init.pd {
                return Err(VerbsError::InvalidArgument("SRQ in another PD"));
            }
        }
        let cap = init.cap;
        if cap.max_send_wr == 0
            || cap.max_send_wr > MAX_WR
            || cap.max_recv_wr > MAX_WR
            || cap.max_send_sge > MAX_SGE
            || cap.max_recv_sge > MAX_SGE
            || cap.max_inline_data > 4096
        {
            return Err(VerbsError::InvalidArgument("QP capabilities"));
        }
        if init.qp_type == QpType::Gsi && self.gsi.is_some() {
            return Err(VerbsError::Busy("GSI QP"));
        }
        let window = self.dev.config.max_window;
        let held_sges = init.srq.and_then(|s| self.dev.srqs.get(s.0)).map_or(0, |s| s.queue.max_sge());
        let h = self
            .qps
            .insert_with(|h| {
                let qpn = if init.qp_type == QpType::Gsi { GSI_QPN } else { qpn_for(h) };
                let mut resp = RespState::new();
                resp.held.sges.reserve(held_sges);
                Qp {
                    qpn,
                    qp_type: init.qp_type,
                    state: QpState::Reset,
                    pd: init.pd,
                    send_cq: init.send_cq,
                    recv_cq: init.recv_cq,
                    srq: init.srq,
                    sq_sig_all: init.sq_sig_all,
                    cap,
                    // A datagram QP's messages are bounded by the port's MTU.
                    attr: if init.qp_type.is_datagram() {
                        QpAttr { path_mtu: self.dev.port.mtu, ..QpAttr::default() }
                    } else {
                        QpAttr::default()
                    },
                    path: None,
                    alt_path: None,
                    sq: SendQueue::new(&cap),
                    rq: RecvQueue::new(
                        if init.srq.is_some() { 0 } else { cap.max_recv_wr as usize },
                        cap.max_recv_sge as usize,
                    ),
                    req: ReqState::new(window),
                    resp,
                    sqd_notify: false,
                }
            })
            .map_err(full("QP"))?;
        let h = QpHandle(h);
        if init.qp_type == QpType::Gsi {
            self.gsi = Some(h);
        }
        self.pd_use(init.pd, 1)?;
        for cq in [init.send_cq, init.recv_cq] {
            if let Some(c) = self.dev.cqs.get_mut(cq.0) {
                c.users += 1;
            }
        }
        if let Some(s) = init.srq.and_then(|s| self.dev.srqs.get_mut(s.0)) {
            s.users += 1;
        }
        Ok(h)
    }

    /// The QP's number, as the wire and the peer know it.
    pub fn qpn(&self, qp: QpHandle) -> Option<u32> {
        self.qps.get(qp.0).map(|q| q.qpn)
    }

    /// Read access to a QP's state, for diagnostics and tests.
    pub fn qp(&self, qp: QpHandle) -> Option<&Qp> {
        self.qps.get(qp.0)
    }

    pub fn query_qp(&self, qp: QpHandle) -> Result<QpAttr> {
        let q = self.qps.get(qp.0).ok_or(VerbsError::BadHandle("QP"))?;
        let mut attr = q.attr;
        attr.qp_state = q.state;
        attr.cur_qp_state = q.state;
        Ok(attr)
    }

    /// `ibv_attach_mcast`: a UD QP joins the group of multicast GID `gid`.
    pub fn attach_mcast(&mut self, qp: QpHandle, gid: &Gid) -> Result<()> {
        let q = self.qps.get(qp.0).ok_or(VerbsError::BadHandle("QP"))?;
        if q.qp_type != QpType::Ud {
            return Err(VerbsError::InvalidArgument("only UD QPs join multicast groups"));
        }
        self.mcast.attach(gid, qp).map_err(|e| match e {
            McastError::NotMulticast => VerbsError::InvalidArgument("not a multicast GID"),
            McastError::State => VerbsError::Busy("QP (already attached to the group)"),
            McastError::Full => VerbsError::TooMany("multicast attachment"),
        })
    }

    /// The next multicast group that appeared or went on this device (for
    /// the netdev's IGMP/MLD reports).
    pub fn poll_group_change(&mut self) -> Option<mcast::GroupChange> {
        self.mcast.poll_change()
    }

    /// `ibv_detach_mcast`.
    pub fn detach_mcast(&mut self, qp: QpHandle, gid: &Gid) -> Result<()> {
        self.qps.get(qp.0).ok_or(VerbsError::BadHandle("QP"))?;
        self.mcast.detach(gid, qp).map_err(|_| VerbsError::InvalidArgument("QP not attached to the group"))
    }

    pub fn destroy_qp(&mut self, qp: QpHandle) -> Result<()> {
        let q = self.qps.remove(qp.0).ok_or(VerbsError::BadHandle("QP"))?;
        self.sched.disarm(split(qp.0).0);
        // A destroyed QP leaves its groups (rxe detaches it too).
        self.mcast.detach_all(qp);
        // Type 2B windows bound through this QP die with it (rxe holds the QP
        // until they are invalidated; a new QP reusing the number must not
        // inherit them).
        let bound: Vec<u32> = self.dev.mws.iter().filter(|(_, w)| w.qp == Some(q.qpn)).map(|(_, w)| w.rkey).collect();
        for rkey in bound {
            let _ = mem_ops::invalidate(&mut self.dev, q.pd, q.qpn, rkey);
        }
        if self.gsi == Some(qp) {
            self.gsi = None;
        }
        self.pd_use(q.pd, -1)?;
        for cq in [q.send_cq, q.recv_cq] {
            if let Some(c) = self.dev.cqs.get_mut(cq.0) {
                c.users = c.users.saturating_sub(1);
            }
        }
        if let Some(s) = q.srq.and_then(|s| self.dev.srqs.get_mut(s.0)) {
            s.users = s.users.saturating_sub(1);
        }
        Ok(())
    }

    /// Modify QP (IBA 11.2.5.3): checks the transition and attributes against the
    /// table, the values against their ranges, then applies them.
    pub fn modify_qp(&mut self, qp: QpHandle, attr: &QpAttr, mask: u32) -> Result<()> {
        let mask = AttrMask(mask);
        let Self { dev, qps, .. } = self;
        let q = qps.get_mut(qp.0).ok_or(VerbsError::BadHandle("QP"))?;
        let from = q.state;
        let to = if mask.has(AttrMask::STATE) { attr.qp_state } else { from };
        check_transition(q.qp_type, from, to, mask, Some(attr.cur_qp_state))?;
        check_values(attr, mask)?;

        // Work out the paths before changing anything, so a bad AV changes nothing.
        let mut new = q.attr;
        apply(&mut new, attr, mask);
        let path_of = |av: &AhAttr| {
            let port = sport::src_port_for_connection(av.flow_label, q.qpn, new.dest_qp_num);
            av.path(&dev.port, port).map_err(VerbsError::Address)
        };
        let connected = q.qp_type.is_connected();
        let path = if connected && mask.has(AttrMask::AV) { Some(path_of(&new.ah_attr)?) } else { q.path };
        let alt_path =
            if connected && mask.has(AttrMask::ALT_PATH) { Some(path_of(&new.alt_ah_attr)?) } else { q.alt_path };
        q.attr = new;
        q.path = path;
        q.alt_path = alt_path;
        q.attr.qp_state = to;

        match to {
            QpState::Reset => reset(q, dev.config.max_window),
            QpState::Rtr if from == QpState::Init => {
                q.resp.psn = Psn::new(q.attr.rq_psn);
                q.resp.resources.reserve(usize::from(q.attr.max_dest_rd_atomic.max(1)));
            }
            QpState::Rts if from == QpState::Rtr => {
                let psn = Psn::new(q.attr.sq_psn);
                q.req.psn = psn;
                q.req.comp_psn = psn;
                q.req.max_psn = psn;
                q.req.retry_left = q.attr.retry_cnt;
                q.req.rnr_left = q.attr.rnr_retry;
                q.req.window = q.window_cap(&dev.config);
                q.req.recover = None;
            }
            QpState::Sqd if from == QpState::Rts => q.sqd_notify = attr.en_sqd_async_notify,
            QpState::Err if from != QpState::Err => {
                q.state = QpState::Err;
                completer::enter_error(q, dev);
            }
            _ => {}
        }
        q.state = to;
        self.sched.wake(split(qp.0).0);
        Ok(())
    }

    /// Post Send (IBA 11.4.1.1). In ERR (and, for UD/UC, SQE) the WR completes at once
    /// with WR_FLUSH_ERR.
    pub fn post_send(&mut self, qp: QpHandle, wr: &SendWr<'_>) -> Result<()> {
        let Self { dev, qps, .. } = self;
        let q = qps.get_mut(qp.0).ok_or(VerbsError::BadHandle("QP"))?;
        match q.state {
            QpState::Reset | QpState::Init | QpState::Rtr => return Err(VerbsError::InvalidState(q.state)),
            _ => {}
        }
        q.sq.post(wr)?;
        if matches!(q.state, QpState::Err | QpState::Sqe) {
            let opcode = completer::wc_opcode(wr.opcode);
            while !q.sq.ring.is_empty() {
                let head = q.sq.ring.head();
                let id = q.sq.ring.get(head).map_or(0, |w| w.wr_id);
                dev.complete(q.send_cq, WorkCompletion::new(id, WcStatus::WrFlushErr, opcode, q.qpn));
                q.sq.ring.pop();
            }
            q.req.next = q.sq.ring.head();
        }
        self.sched.wake(split(qp.0).0);
        Ok(())
    }

    /// Post Receive (IBA 11.4.1.2). In ERR the WR completes at once with WR_FLUSH_ERR.
    pub fn post_recv(&mut self, qp: QpHandle, wr: &RecvWr<'_>) -> Result<()> {
        let Self { dev, qps, .. } = self;
        let q = qps.get_mut(qp.0).ok_or(VerbsError::BadHandle("QP"))?;
        if q.srq.is_some() {
            return Err(VerbsError::InvalidArgument("the QP receives through an SRQ"));
        }
        if q.state == QpState::Err {
            dev.complete(q.recv_cq, WorkCompletion::new(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, q.qpn));
            return Ok(());
        }
        Ok(q.rq.post(wr)?)
    }

    // ---- the data path ----

    fn qp_by_qpn(&self, qpn: u32) -> Option<QpHandle> {
        if qpn == GSI_QPN {
            return self.gsi;
        }
        let index = qpn.checked_sub(FIRST_QPN)? % MAX_QP;
        let (h, q) = self.qps.get_by_index(index)?;
        (q.qpn == qpn).then_some(QpHandle(h))
    }

    /// A frame for the firmware's QP1: a UD SEND carrying one MAD with the GSI
    /// Q_Key, queued for the agents; anything else is dropped and counted.
    fn receive_mad(&mut self, rx: &frame::RxFrame<'_>) {
        let stats = &mut self.dev.stats;
        let deth = match rx.repr.roce.ext.deth {
            Some(d) if rx.repr.roce.bth.opcode == Opcode::UdSendOnly => d,
            _ => {
                stats.drop(DropReason::BadMad);
                return;
            }
        };
        if deth.qkey != GSI_QKEY {
            stats.drop(DropReason::BadQkey);
            return;
        }
        if rx.repr.payload.len() != MAD_SIZE {
            stats.drop(DropReason::BadMad);
            return;
        }
        let path = rx.repr.path;
        let (src_gid, dst_gid, flow_label) = mad_port::gids_of(&path.ip);
        self.mad.deliver(ReceivedMad {
            src_gid,
            dst_gid,
            src_qpn: deth.src_qpn,
            src_mac: path.src_mac,
            pkey: rx.repr.roce.bth.pkey,
            traffic_class: (path.dscp << 2) | path.ecn as u8,
            hop_limit: path.hop_limit,
            flow_label,
            data: rx.repr.payload.to_vec(),
        });
    }

    /// The next MAD received on the firmware's QP1.
    pub fn take_mad(&mut self) -> Option<ReceivedMad> {
        self.mad.take()
    }

    /// Sends one MAD from the firmware's QP1 to QP `dest_qpn` along `ah`.
    pub fn send_mad<S: FrameSink + ?Sized>(
        &mut self,
        ah: &AhAttr,
        dest_qpn: u32,
        mad: &[u8],
        sink: &mut S,
    ) -> core::result::Result<(), AhError> {
        let Self { dev, mad: port, .. } = self;
        port.send(dev, ah, dest_qpn, mad, sink)
    }

    /// The firmware QP1's counters.
    pub fn mad_port(&self) -> &MadPort {
        &self.mad
    }

    /// The port's MAC and GID table, as paths see them.
    pub fn local_port(&self) -> &LocalPort {
        &self.dev.port
    }

    fn is_local(&self, ip: &IpPath) -> bool {
        // The GID the destination maps to, compared whole: decoding each GID of
        // the table instead cost more than the rest of this check.
        self.dev.port.gids.contains(&mad_port::dst_gid(ip))
    }

    /// Takes one received frame (from the Ethernet header on), one of a batch the
    /// caller ends with [`Self::end_batch`]. Responses and requests it causes go
    /// out through `sink` before this returns, and the ACKs held back for
    /// coalescing go every `Config::ack_batch` frames. When anything went out, the sink
    /// is flushed at once: the peer waits for an ACK, or for the packets an ACK
    /// let out, and the rest of the batch may take a while.
    pub fn receive<S: FrameSink + ?Sized>(&mut self, frame: &[u8], now: Instant, sink: &mut S) {
        self.receive_verified(frame, false, now, sink);
    }

    /// As [`Self::receive`], for a frame whose IPv4 header checksum the NIC
    /// verified (`ip_header_verified`): [`frame::parse_with`] skips only
    /// that sum; the ICRC is checked as ever.
    pub fn receive_verified<S: FrameSink + ?Sized>(
        &mut self,
        frame: &[u8],
        ip_header_verified: bool,
        now: Instant,
        sink: &mut S,
    ) {
        let mut sink = Watched::new(sink);
        self.receive_one(frame, ip_header_verified, now, &mut sink);
        // A count down to the flush, not a remainder: a division per frame costs
        // more than the rest of this function.
        self.batch_frames += 1;
        if self.batch_frames >= self.dev.config.ack_batch.max(1) {
            self.batch_frames = 0;
            self.flush_acks(&mut sink);
        }
        sink.flush_if_sent();
    }

    /// Ends a batch of received frames: what is still held back goes now (and the
    /// sink is flushed if anything went). Cheap when no frame came since they last went.
    pub fn end_batch<S: FrameSink + ?Sized>(&mut self, sink: &mut S) {
        if self.batch_frames == 0 {
            return;
        }
        self.batch_frames = 0;
        let mut sink = Watched::new(sink);
        self.flush_acks(&mut sink);
        sink.flush_if_sent();
    }

    fn receive_one<S: FrameSink + ?Sized>(&mut self, frame: &[u8], ip_ok: bool, now: Instant, sink: &mut S) {
        // Borrowed from the result, not moved out of it: the repr is over 200 bytes.
        let parsed = frame::parse_with(frame, ip_ok);
        let rx = match &parsed {
            Ok(rx) => rx,
            Err(reason) => {
                self.dev.stats.drop(*reason);
                return;
            }
        };
        self.dev.stats.inc(crate::core::counters::RxeCounter::RcvdPkts);
        if rx.repr.roce.bth.dest_qpn == mcast::MULTICAST_QPN {
            self.receive_mcast(rx, frame, now, sink);
            return;
        }
        if !self.is_local(&rx.repr.path.ip) {
            self.dev.stats.drop(DropReason::BadAddress);
            return;
        }
        let bth = rx.repr.roce.bth;
        if bth.pkey & 0x7FFF != 0x7FFF {
            self.dev.stats.drop(DropReason::BadPkey);
            return;
        }
        if bth.dest_qpn == GSI_QPN && self.gsi.is_none() {
            self.receive_mad(rx);
            return;
        }
        let Some(h) = self.qp_by_qpn(bth.dest_qpn) else {
            self.dev.stats.drop(DropReason::NoSuchQp);
            return;
        };
        let Self { dev, qps, sched, owing, .. } = self;
        let Some(qp) = qps.get_mut(h.0) else { return };
        let owed_before = qp.resp.owed_ack.is_some();
        deliver(qp, dev, rx, frame, sink, now);
        let index = split(h.0).0;
        if !owed_before && qp.resp.owed_ack.is_some() {
            owing.push(index);
        }
        // Whatever the frame did to the QP (a window opened, a timer armed, an
        // ACK owed), its schedule follows.
        settle(sched, index, qp, now);
    }

    /// A frame to the multicast QPN: to every UD QP attached to the group its
    /// IP destination names (`rxe_rcv_mcast_pkt`), each checking it as a UD
    /// receive of its own (Q_Key, receive WQE); none attached: dropped, counted.
    fn receive_mcast<S: FrameSink + ?Sized>(
        &mut self,
        rx: &frame::RxFrame<'_>,
        frame: &[u8],
        now: Instant,
        sink: &mut S,
    ) {
        let gid = mad_port::dst_gid(&rx.repr.path.ip);
        let bth = rx.repr.roce.bth;
        if bth.pkey & 0x7FFF != 0x7FFF {
            self.dev.stats.drop(DropReason::BadPkey);
            return;
        }
        if !rx.info.qp_types.contains(QpTypes::UD) {
            self.dev.stats.drop(DropReason::WrongQpType);
            return;
        }
        let members = self.mcast.members(&gid);
        if members.is_empty() {
            self.dev.stats.drop(DropReason::McastNoQp);
            return;
        }
        let Self { dev, qps, mcast, .. } = self;
        for &h in mcast.members(&gid) {
            let Some(qp) = qps.get_mut(h.0) else { continue };
            if !qp.can_receive() {
                dev.stats.drop(DropReason::QpState);
                continue;
            }
            responder::on_request(qp, dev, rx, frame, sink, now);
        }
    }

    /// Sends the ACKs held back for coalescing (and any the NIC refused) by
    /// the QPs that came to owe one while receiving. Cheap when none is owed.
    /// One the NIC refuses again stays owed: its QP is ready, and `poll` sends it.
    fn flush_acks<S: FrameSink + ?Sized>(&mut self, sink: &mut S) {
        let Self { dev, qps, owing, .. } = self;
        for index in owing.drain(..) {
            let Some((_, qp)) = qps.get_by_index_mut(index) else { continue };
            if qp.state != QpState::Err && qp.state != QpState::Reset {
                responder::send_owed_ack(qp, dev, sink);
            }
        }
    }

    /// Runs timers and sends whatever can go: call at [`Self::next_deadline`], after
    /// posting work requests, and whenever TX buffers free up.
    /// Visits only the QPs with work now or a timer due (see [`Schedule`]).
    pub fn poll<S: FrameSink + ?Sized>(&mut self, now: Instant, sink: &mut S) {
        let Self { dev, qps, sched, .. } = self;
        sched.fire_due(now);
        for index in sched.take_ready() {
            let Some((_, qp)) = qps.get_by_index_mut(index) else { continue };
            if qp.state == QpState::Err || qp.state == QpState::Reset {
                continue;
            }
            completer::on_timer(qp, dev, now);
            if qp.state != QpState::Err {
                responder::send_owed_ack(qp, dev, sink);
                if qp.resp.read.is_some() {
                    responder::send_read(qp, dev, sink);
                }
                requester::run(qp, dev, sink, now);
                completer::drain_done(qp, dev);
            }
            settle(sched, index, qp, now);
        }
    }

    /// When the transport next needs [`Self::poll`]: `now` (or earlier) when work is
    /// waiting to go out, the nearest timer otherwise, `None` when idle.
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        self.sched.next(now)
    }

    /// Every QP handle (diagnostics).
    pub fn qp_handles(&self) -> Vec<QpHandle> {
        self.qps.iter().map(|(h, _)| QpHandle(h)).collect()
    }
}

/// Range checks of the attribute values the mask carries.
fn check_values(attr: &QpAttr, mask: AttrMask) -> core::result::Result<(), ModifyError> {
    let bad = ModifyError::BadValue;
    if mask.has(AttrMask::PORT) && attr.port_num != 1 {
        return Err(bad("port_num (rxe has port 1 only)"));
    }
    if mask.has(AttrMask::PKEY_INDEX) && attr.pkey_index != 0 {
        return Err(bad("pkey_index (one P_Key)"));
    }
    if mask.has(AttrMask::ACCESS_FLAGS) && attr.qp_access_flags.0 & !AccessFlags::ALL != 0 {
        return Err(bad("qp_access_flags"));
    }
    if mask.has(AttrMask::PATH_MTU) && attr.path_mtu.bytes() > IbMtu::Mtu4096.bytes() {
        return Err(bad("path_mtu"));
    }
    if mask.has(AttrMask::TIMEOUT) && attr.timeout > 31 {
        return Err(bad("timeout (0..=31)"));
    }
    if mask.has(AttrMask::RETRY_CNT) && attr.retry_cnt > 7 {
        return Err(bad("retry_cnt (0..=7)"));
    }
    if mask.has(AttrMask::RNR_RETRY) && attr.rnr_retry > 7 {
        return Err(bad("rnr_retry (0..=7)"));
    }
    if mask.has(AttrMask::MIN_RNR_TIMER) && attr.min_rnr_timer > 31 {
        return Err(bad("min_rnr_timer (0..=31)"));
    }
    if mask.has(AttrMask::MAX_QP_RD_ATOMIC) && attr.max_rd_atomic > MAX_RD_ATOMIC {
        return Err(bad("max_rd_atomic (0..=128)"));
    }
    if mask.has(AttrMask::MAX_DEST_RD_ATOMIC) && attr.max_dest_rd_atomic > MAX_RD_ATOMIC {
        return Err(bad("max_dest_rd_atomic (0..=128)"));
    }
    if mask.has(AttrMask::DEST_QPN) && attr.dest_qp_num > Psn::MASK {
        return Err(bad("dest_qp_num (24 bits)"));
    }
    if mask.has(AttrMask::RQ_PSN) && attr.rq_psn > Psn::MASK {
        return Err(bad("rq_psn (24 bits)"));
    }
    if mask.has(AttrMask::SQ_PSN) && attr.sq_psn > Psn::MASK {
        return Err(bad("sq_psn (24 bits)"));
    }
    // As rxe_qp_chk_attr and the core check them; the vector itself is
    // checked when its path is worked out.
    if mask.has(AttrMask::ALT_PATH) {
        if attr.alt_port_num != super::ah::PORT {
            return Err(bad("alt_port_num (rxe has port 1 only)"));
        }
        if attr.alt_pkey_index != 0 {
            return Err(bad("alt_pkey_index (one P_Key)"));
        }
        if attr.alt_timeout > 31 {
            return Err(bad("alt_timeout (0..=31)"));
        }
    }
    Ok(())
}

/// Copies the attributes the mask names.
fn apply(cur: &mut QpAttr, attr: &QpAttr, mask: AttrMask) {
    let m = |bit| mask.has(bit);
    if m(AttrMask::ACCESS_FLAGS) {
        cur.qp_access_flags = attr.qp_access_flags;
    }
    if m(AttrMask::PKEY_INDEX) {
        cur.pkey_index = attr.pkey_index;
    }
    if m(AttrMask::PORT) {
        cur.port_num = attr.port_num;
    }
    if m(AttrMask::QKEY) {
        cur.qkey = attr.qkey;
    }
    if m(AttrMask::AV) {
        cur.ah_attr = attr.ah_attr;
    }
    if m(AttrMask::PATH_MTU) {
        cur.path_mtu = attr.path_mtu;
    }
    if m(AttrMask::TIMEOUT) {
        cur.timeout = attr.timeout;
    }
    if m(AttrMask::RETRY_CNT) {
        cur.retry_cnt = attr.retry_cnt;
    }
    if m(AttrMask::RNR_RETRY) {
        cur.rnr_retry = attr.rnr_retry;
    }
    if m(AttrMask::RQ_PSN) {
        cur.rq_psn = attr.rq_psn;
    }
    if m(AttrMask::SQ_PSN) {
        cur.sq_psn = attr.sq_psn;
    }
    if m(AttrMask::MAX_QP_RD_ATOMIC) {
        cur.max_rd_atomic = attr.max_rd_atomic;
    }
    if m(AttrMask::MAX_DEST_RD_ATOMIC) {
        cur.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    }
    if m(AttrMask::MIN_RNR_TIMER) {
        cur.min_rnr_timer = attr.min_rnr_timer;
    }
    if m(AttrMask::DEST_QPN) {
        cur.dest_qp_num = attr.dest_qp_num;
    }
    if m(AttrMask::EN_SQD_ASYNC_NOTIFY) {
        cur.en_sqd_async_notify = attr.en_sqd_async_notify;
    }
    if m(AttrMask::ALT_PATH) {
        cur.alt_ah_attr = attr.alt_ah_attr;
        cur.alt_pkey_index = attr.alt_pkey_index;
        cur.alt_port_num = attr.alt_port_num;
        cur.alt_timeout = attr.alt_timeout;
    }
    if m(AttrMask::PATH_MIG_STATE) {
        cur.path_mig_state = attr.path_mig_state;
    }
}

/// A frame for `qp` that passed the device's checks: to the responder or the
/// completer, then whatever the QP can send now goes.
fn deliver<M: Memory, S: FrameSink + ?Sized>(
    qp: &mut Qp,
    dev: &mut Device<M>,
    rx: &frame::RxFrame<'_>,
    frame: &[u8],
    sink: &mut S,
    now: Instant,
) {
    let bth = rx.repr.roce.bth;
    if bth.opcode == Opcode::Cnp {
        completer::on_congestion(qp, dev);
        return;
    }
    let bit = match qp.qp_type {
        QpType::Rc => QpTypes::RC,
        QpType::Uc => QpTypes::UC,
        QpType::Ud | QpType::Gsi => QpTypes::UD,
    };
    if !rx.info.qp_types.contains(bit) {
        dev.stats.drop(DropReason::WrongQpType);
        return;
    }
    if qp.qp_type.is_connected() && !apm::from_far_end(qp.path, &rx.repr.path.ip) {
        // An armed QP's peer that migrated now sends over the alternate path:
        // the QP follows it there (IBA 17.2.8).
        if !(apm::from_far_end(qp.alt_path, &rx.repr.path.ip) && apm::migrate(qp, dev)) {
            dev.stats.drop(DropReason::BadAddress);
            return;
        }
    }
    match rx.info.direction {
        Direction::Request => {
            if !qp.can_receive() {
                dev.stats.drop(DropReason::QpState);
                return;
            }
            responder::on_request(qp, dev, rx, frame, sink, now);
        }
        Direction::Response => {
            if qp.qp_type != QpType::Rc {
                dev.stats.drop(DropReason::Unsupported);
                return;
            }
            if !qp.can_send() {
                dev.stats.drop(DropReason::QpState);
                return;
            }
            if rx.repr.path.ecn == Ecn::Ce {
                completer::on_congestion(qp, dev);
            }
            completer::on_response(qp, dev, rx, now);
        }
        Direction::Notification => {}
    }
    if qp.state != QpState::Err {
        requester::run(qp, dev, sink, now);
        completer::drain_done(qp, dev);
    }
}

/// Whether `qp` has work for the next poll now: a READ response to send, an
/// ACK owed, completions to retire, or WQEs the window lets out.
fn has_immediate_work(qp: &Qp, now: Instant) -> bool {
    if qp.state == QpState::Err || qp.state == QpState::Reset {
        return false;
    }
    let head_done = qp
        .sq
        .ring
        .get(qp.sq.ring.head())
        .is_some_and(|w| matches!(w.state, super::qp::WqeState::Done | super::qp::WqeState::Error(_)));
    qp.resp.read.is_some() || qp.resp.owed_ack.is_some() || head_done || requester::has_work(qp, now)
}

/// Puts QP `index` where its state says: ready if it has work now, its timer
/// armed if it has one.
fn settle(sched: &mut Schedule, index: u32, qp: &Qp, now: Instant) {
    if qp.state == QpState::Err || qp.state == QpState::Reset {
        return;
    }
    if has_immediate_work(qp, now) {
        sched.wake(index);
    }
    if let Some(t) = [qp.req.timer, qp.req.rnr_until].into_iter().flatten().min() {
        sched.arm(index, t);
    }
}

/// RESET: the queues are emptied without completions (IBA 10.3.1) and every engine
/// starts over.
fn reset(q: &mut Qp, window: u32) {
    while !q.sq.ring.is_empty() {
        q.sq.ring.pop();
    }
    while !q.rq.is_empty() {
        q.rq.pop();
    }
    let next = q.sq.ring.head();
    q.req = ReqState::new(window);
    q.req.next = next;
    q.resp = RespState::new();
    q.path = None;
    q.alt_path = None;
    q.attr = QpAttr::default();
}
