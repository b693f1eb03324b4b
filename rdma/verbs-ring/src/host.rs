//! The host side of the region, as pure logic: attach to a context slot,
//! keep its lease, send commands and collect responses. The std host library
//! (later) wraps this with its `mmap` [`SharedMem`] and a wait strategy; the
//! tests here run it against [`crate::firmware::Firmware`] over the fake.
//!
//! The host trusts the firmware no more than necessary: it checks the
//! superblock by recomputing the layout, checks response headers (sequence,
//! command, length), and its rings detect a misbehaving peer like the
//! firmware's do.

use crate::abi::{
    COMM_LEN, Layout, LayoutError, SLOT_GENERATION, SLOT_HOST_COMM, SLOT_HOST_HEARTBEAT, SLOT_HOST_PEER, SLOT_HOST_PID,
    SLOT_STATE, ctx_state,
};
use crate::cmd::{CmdHeader, HEADER_SIZE, Status};
use crate::ring::{Consumer, Producer, RingError, RingGeometry, Violation};
use crate::shm::{SharedMem, ShmError};
use crate::wire::Wire;

/// Why a host operation failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HostError {
    Layout(LayoutError),
    /// Every context slot is taken.
    NoFreeContext,
    /// A ring operation failed. `Ring(Corrupt(_))` is for good: the ring
    /// stays poisoned ([`HostContext::broken`]) and every later command fails
    /// the same way, so [`HostContext::detach`] and attach again.
    Ring(RingError),
    Shm(ShmError),
    /// The firmware reclaimed our slot (lease expired or protocol error).
    /// Attach again for a new one.
    Lost,
    /// A response that does not answer what we asked (sequence, command,
    /// or a length that does not match the expected response).
    BadResponse,
    /// The command was answered with an error status.
    Status(Status),
    /// The request does not fit a command slot.
    TooLarge,
    /// The wait callback gave up before the answer came.
    TimedOut,
}

impl From<RingError> for HostError {
    fn from(e: RingError) -> Self {
        HostError::Ring(e)
    }
}

impl From<ShmError> for HostError {
    fn from(e: ShmError) -> Self {
        HostError::Shm(e)
    }
}

impl From<LayoutError> for HostError {
    fn from(e: LayoutError) -> Self {
        HostError::Layout(e)
    }
}

/// One attached context.
pub struct HostContext {
    layout: Layout,
    ctx: u32,
    generation: u32,
    slot: usize,
    cmd: Producer,
    resp: Consumer,
    seq: u32,
    heartbeat: u32,
}

impl HostContext {
    /// Read the superblock, claim the first free slot by compare-and-swap,
    /// and record our pid.
    pub fn attach<M: SharedMem + ?Sized>(mem: &M, pid: u32) -> Result<HostContext, HostError> {
        HostContext::attach_as(mem, pid, b"")
    }

    /// [`HostContext::attach`], recording our command name too (`comm`,
    /// what `rdma resource show` prints; cut to 15 bytes).
    pub fn attach_as<M: SharedMem + ?Sized>(mem: &M, pid: u32, comm: &[u8]) -> Result<HostContext, HostError> {
        let layout = Layout::read(mem)?;
        for ctx in 0..layout.num_contexts() {
            let Some(slot) = layout.slot_off(ctx) else { continue };
            if mem.compare_exchange_u32(slot + SLOT_STATE, ctx_state::FREE, ctx_state::ATTACHED)?.is_err() {
                continue;
            }
            let generation = mem.load_u32_acquire(slot + SLOT_GENERATION)?;
            mem.store_u32_release(slot + SLOT_HOST_PID, pid)?;
            let mut name = [0u8; COMM_LEN];
            for (n, &b) in name.iter_mut().zip(comm.iter().take(COMM_LEN - 1)) {
                *n = b;
            }
            mem.write(slot + SLOT_HOST_COMM, &name)?;
            let geo = |p| RingGeometry::new(p, mem.len());
            let (Some(c), Some(r)) = (layout.cmd_ring(ctx), layout.resp_ring(ctx)) else {
                return Err(HostError::Layout(LayoutError::Field("context rings")));
            };
            return Ok(HostContext {
                layout,
                ctx,
                generation,
                slot,
                cmd: Producer::new(geo(c)?),
                resp: Consumer::new(geo(r)?),
                seq: 0,
                heartbeat: 0,
            });
        }
        Err(HostError::NoFreeContext)
    }

    pub fn ctx(&self) -> u32 {
        self.ctx
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// This context's buffer area `(region offset, size)`: MR memory.
    pub fn buf_area(&self) -> (u64, u64) {
        self.layout.buf_area(self.ctx).unwrap_or((0, 0))
    }

    /// How the firmware broke one of this context's rings, if it did. A broken
    /// context never works again: detach it (the firmware reclaims the slot
    /// and its objects) and attach a new one.
    pub fn broken(&self) -> Option<Violation> {
        self.cmd.poisoned().or(self.resp.poisoned())
    }

    /// Records this host's ivshmem peer ID in the slot (ABI 1.7), so the
    /// firmware rings it when an armed CQ of this context gets a completion
    /// ([`crate::wake`]); `None`: this host has no doorbell and polls.
    pub fn set_peer<M: SharedMem + ?Sized>(&self, mem: &M, peer: Option<u16>) -> Result<(), HostError> {
        self.check_owned(mem)?;
        mem.store_u32_release(self.slot + SLOT_HOST_PEER, peer.map_or(0, |p| u32::from(p) + 1))?;
        Ok(())
    }

    /// Renew the lease, and check the slot is still ours.
    pub fn heartbeat<M: SharedMem + ?Sized>(&mut self, mem: &M) -> Result<(), HostError> {
        self.check_owned(mem)?;
        self.heartbeat = self.heartbeat.wrapping_add(1);
        mem.store_u32_release(self.slot + SLOT_HOST_HEARTBEAT, self.heartbeat)?;
        Ok(())
    }

    /// A ring error, or `Lost` when it happened because the slot was reclaimed.
    fn lost_or<M: SharedMem + ?Sized>(&self, mem: &M, e: RingError) -> HostError {
        match self.check_owned(mem) {
            Err(lost) => lost,
            Ok(()) => HostError::Ring(e),
        }
    }

    fn check_owned<M: SharedMem + ?Sized>(&self, mem: &M) -> Result<(), HostError> {
        let state = mem.load_u32_acquire(self.slot + SLOT_STATE)?;
        let generation = mem.load_u32_acquire(self.slot + SLOT_GENERATION)?;
        if state != ctx_state::ATTACHED || generation != self.generation {
            return Err(HostError::Lost);
        }
        Ok(())
    }

    /// Queue command `nr` with request `req`; returns its sequence number.
    /// `Err(Ring(Full))` when the command ring is full.
    pub fn submit<M: SharedMem + ?Sized, Req: Wire>(&mut self, mem: &M, nr: u16, req: &Req) -> Result<u32, HostError> {
        let mut slot = [0u8; crate::abi::MAX_CMD_SLOT as usize];
        let len = HEADER_SIZE + Req::SIZE;
        if len > self.cmd.geometry().entry_size() {
            return Err(HostError::TooLarge);
        }
        // A reclaimed slot's rings were reset under us: say so, rather than
        // report the reset as a ring violation.
        self.check_owned(mem)?;
        self.seq = self.seq.wrapping_add(1);
        let hdr = CmdHeader { cmd: nr, flags: 0, len: Req::SIZE as u16, status: 0, ctx: self.ctx, seq: self.seq };
        hdr.encode(&mut slot).ok_or(HostError::TooLarge)?;
        req.encode(&mut slot[HEADER_SIZE..]).ok_or(HostError::TooLarge)?;
        self.cmd.push(mem, &slot[..len]).map_err(|e| self.lost_or(mem, e))?;
        Ok(self.seq)
    }

    /// The next response, if any: its header and payload length (copied into
    /// `out`, which should hold a whole slot).
    pub fn poll_response<M: SharedMem + ?Sized>(
        &mut self,
        mem: &M,
        out: &mut [u8],
    ) -> Result<Option<CmdHeader>, HostError> {
        if !self.resp.pop(mem, out).map_err(|e| self.lost_or(mem, e))? {
            return Ok(None);
        }
        let hdr = CmdHeader::decode(out).ok_or(HostError::BadResponse)?;
        if HEADER_SIZE + usize::from(hdr.len) > out.len().min(self.resp.geometry().entry_size()) {
            return Err(HostError::BadResponse);
        }
        Ok(Some(hdr))
    }

    /// Send one command and wait for its answer, calling `wait` between
    /// polls (a test runs the firmware's tick there; the library sleeps or
    /// spins); `wait` returning false gives up with `TimedOut`. Gives up
    /// with `Lost` when the slot is reclaimed.
    pub fn call<M: SharedMem + ?Sized, Req: Wire, Resp: Wire>(
        &mut self,
        mem: &M,
        nr: u16,
        req: &Req,
        mut wait: impl FnMut() -> bool,
    ) -> Result<Resp, HostError> {
        let seq = self.submit(mem, nr, req)?;
        let mut out = [0u8; crate::abi::MAX_CMD_SLOT as usize];
        loop {
            if let Some(hdr) = self.poll_response(mem, &mut out)? {
                if hdr.seq != seq || hdr.cmd != nr || hdr.ctx != self.ctx {
                    return Err(HostError::BadResponse);
                }
                if hdr.status != 0 {
                    return Err(HostError::Status(Status(hdr.status)));
                }
                if usize::from(hdr.len) != Resp::SIZE {
                    return Err(HostError::BadResponse);
                }
                return Resp::decode(&out[HEADER_SIZE..]).ok_or(HostError::BadResponse);
            }
            self.check_owned(mem)?;
            if !wait() {
                return Err(HostError::TimedOut);
            }
        }
    }

    /// Ask the firmware to tear the context down (compare-and-swap, so a
    /// slot already reclaimed is left alone).
    pub fn detach<M: SharedMem + ?Sized>(self, mem: &M) -> Result<(), HostError> {
        match mem.compare_exchange_u32(self.slot + SLOT_STATE, ctx_state::ATTACHED, ctx_state::DETACHING)? {
            Ok(_) => Ok(()),
            Err(_) => Err(HostError::Lost),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{LayoutParams, RING_PRODUCER, reclaim_reason};
    use crate::cmd::{Empty, nr};
    use crate::dispatch::Limits;
    use crate::firmware::SlotEvent;
    use crate::shm::fake::HeapShm;
    use crate::testutil::Fw;

    const REGION: usize = 4 << 20;

    fn appliance() -> (HeapShm, Fw) {
        let mem = HeapShm::new(REGION);
        let params = LayoutParams { num_contexts: 2, queue_area_size: 64 << 10, ..LayoutParams::default() };
        let layout = Layout::new(REGION as u64, params).expect("layout");
        let fw = Fw::new(&mem, layout, Limits::default(), 16);
        (mem, fw)
    }

    fn nop(mem: &HeapShm, fw: &mut Fw, host: &mut HostContext) -> Result<Empty, HostError> {
        let mut ticks = 0;
        host.call(mem, nr::NOP, &Empty {}, || {
            ticks += 1;
            fw.tick(mem).is_ok() && ticks < 100
        })
    }

    /// A response ring the firmware (or anyone) broke poisons the context for
    /// good; detaching hands the slot back and a new attach works.
    #[test]
    fn a_broken_context_is_detached_and_attached_again() {
        let (mem, mut fw) = appliance();
        let mut host = HostContext::attach(&mem, 7).expect("attach");
        assert_eq!(nop(&mem, &mut fw, &mut host), Ok(Empty {}));
        let resp = host.layout().resp_ring(host.ctx()).expect("resp ring");
        mem.store_u32_release(resp.off as usize + RING_PRODUCER, 0x4000_0000).expect("in the region");
        let first = nop(&mem, &mut fw, &mut host);
        assert!(matches!(first, Err(HostError::Ring(RingError::Corrupt(_)))), "{first:?}");
        assert!(host.broken().is_some());
        // The firmware overwrote the index with a sane one meanwhile; still broken.
        assert!(matches!(nop(&mem, &mut fw, &mut host), Err(HostError::Ring(RingError::Corrupt(_)))));
        let ctx = host.ctx();
        host.detach(&mem).expect("still ours");
        let events = fw.tick(&mem).expect("tick").events;
        assert!(
            events.iter().any(|e| matches!(e, SlotEvent::Reclaimed { ctx: c, reason, .. }
                if *c == ctx && *reason == reclaim_reason::DETACHED)),
            "{events:?}"
        );
        let mut again = HostContext::attach(&mem, 7).expect("attach again");
        assert_eq!(again.broken(), None);
        assert_eq!(nop(&mem, &mut fw, &mut again), Ok(Empty {}));
    }
}
