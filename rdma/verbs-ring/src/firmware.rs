//! The firmware side of the region: initialise the layout, beat the
//! heartbeat, watch the context slots (claims, detaches, leases), and serve
//! each attached context's command ring into its response ring through the
//! [`Dispatcher`].
//!
//! The kernel calls [`Firmware::tick`] from its poll loop (ivshmem-plain has
//! no interrupt: a doorbell is noticed at the next tick). One tick is one
//! heartbeat; leases are counted in ticks, so time is an argument, not a
//! clock read, and tests replay exactly. An appliance that hosts can ring
//! ([`crate::wake`]) also calls [`Firmware::serve_commands`] when woken,
//! which answers commands without beating.
//!
//! Slot state machine (the firmware's private view decides, the shared
//! `state` word is only a request from the host):
//!
//! ```text
//!   FREE --host CAS--> ATTACHED --host store--> DETACHING
//!    ^                    |  lease expired,        |
//!    |                    |  ring corrupt          |
//!    |                    v                        v
//!    +---- firmware ---- RECLAIMING <--------------+
//!      (objects destroyed in dependency order, rings reset, generation + 1)
//! ```

use alloc::vec;
use alloc::vec::Vec;

use crate::abi::{
    COMM_LEN, ContextSlot, Layout, LayoutError, SB_FAIL_CODE, SB_FW_STATE, SB_HEARTBEAT, SLOT_GENERATION,
    SLOT_HOST_COMM, SLOT_HOST_HEARTBEAT, SLOT_HOST_PEER, SLOT_HOST_PID, SLOT_RECLAIM_REASON, SLOT_STATE, ctx_state,
    fw_state, reclaim_reason,
};
use crate::cmd::Status;
use crate::dispatch::{Dispatcher, Limits, TeardownReport, VerbsProvider};
use crate::ring::{Consumer, Producer, RingError, RingGeometry};
use crate::shm::{SharedMem, ShmError};
use crate::wake::WakeBlock;

/// The firmware's private view of one slot.
enum Slot {
    Free,
    Active {
        cmd: Consumer,
        resp: Producer,
        /// The host heartbeat last seen and the beat it was seen to change at.
        host_hb: u32,
        changed_at: u32,
    },
}

/// What happened to a slot during a tick.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SlotEvent {
    Attached { ctx: u32 },
    Reclaimed { ctx: u32, reason: u32, report: TeardownReport },
}

impl core::fmt::Display for SlotEvent {
    /// One log line: `ring: context 0 attached`, `ring: context 0 reclaimed
    /// (lease_expired): destroyed 1 qp, 2 cq, 1 pd`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            SlotEvent::Attached { ctx } => write!(f, "ring: context {ctx} attached"),
            SlotEvent::Reclaimed { ctx, reason, report } => {
                write!(f, "ring: context {ctx} reclaimed ({})", crate::abi::reclaim_reason::name(reason))?;
                let mut sep = ": destroyed";
                for kind in crate::dispatch::ObjKind::TEARDOWN_ORDER {
                    let n = report.destroyed[kind as usize];
                    if n > 0 {
                        write!(f, "{sep} {n} {}", kind.name())?;
                        sep = ",";
                    }
                }
                if report.provider_errors > 0 {
                    write!(f, " ({} destroy errors)", report.provider_errors)?;
                }
                Ok(())
            }
        }
    }
}

/// What one tick did.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct TickReport {
    /// Commands answered.
    pub commands: u32,
    pub events: Vec<SlotEvent>,
}

/// The firmware's end of the region.
pub struct Firmware {
    layout: Layout,
    dispatcher: Dispatcher,
    slots: Vec<Slot>,
    beat: u32,
    /// Commands served per context per tick, so one busy context cannot
    /// starve the others (nor the rest of the poll loop).
    budget: u32,
    req: Vec<u8>,
    resp: Vec<u8>,
    /// The doorbell as published ([`crate::wake`]).
    wake: WakeBlock,
}

impl Firmware {
    /// Lay out the region (superblock, slots, command rings) and publish
    /// READY, without a doorbell. `budget` is commands per context per tick.
    pub fn new<M: SharedMem + ?Sized>(
        mem: &M,
        layout: Layout,
        limits: Limits,
        budget: u32,
    ) -> Result<Self, LayoutError> {
        Firmware::with_wake(mem, layout, limits, budget, WakeBlock::NONE)
    }

    /// [`Firmware::new`] for an appliance that hosts can ring: `wake` is
    /// published before READY, so every host that attaches sees it.
    pub fn with_wake<M: SharedMem + ?Sized>(
        mem: &M,
        layout: Layout,
        limits: Limits,
        budget: u32,
        wake: WakeBlock,
    ) -> Result<Self, LayoutError> {
        layout.init(mem, &wake)?;
        let slot_bytes = layout.params.cmd_slot_size as usize;
        Ok(Firmware {
            layout,
            dispatcher: Dispatcher::new(layout, limits),
            slots: (0..layout.num_contexts()).map(|_| Slot::Free).collect(),
            beat: 0,
            budget: budget.max(1),
            req: vec![0; slot_bytes],
            resp: vec![0; slot_bytes],
            wake,
        })
    }

    /// The doorbell this firmware published.
    pub fn wake(&self) -> &WakeBlock {
        &self.wake
    }

    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    pub fn dispatcher_mut(&mut self) -> &mut Dispatcher {
        &mut self.dispatcher
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Stop serving: every context is reclaimed and the superblock says
    /// FAILED with `code`.
    pub fn fail<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        code: Status,
    ) -> Result<(), ShmError> {
        for ctx in 0..self.layout.num_contexts() {
            self.reclaim(mem, p, ctx, reclaim_reason::DETACHED)?;
        }
        mem.store_u32_release(SB_FAIL_CODE, u32::from(code.0))?;
        mem.store_u32_release(SB_FW_STATE, fw_state::FAILED)
    }

    /// One poll: heartbeat, slot transitions, leases, and up to `budget`
    /// commands per attached context. Errors are only those of the firmware's
    /// own mapping (an access outside it), never of the host's doing.
    pub fn tick<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
    ) -> Result<TickReport, ShmError> {
        self.beat = self.beat.wrapping_add(1);
        mem.store_u32_release(SB_HEARTBEAT, self.beat)?;
        let mut report = TickReport::default();
        // A host may have overwritten the superblock: publish it again, and
        // reclaim the contexts that may have attached through a wrong layout.
        if crate::superblock::check(mem, &self.layout)?.is_some_and(|r| r.layout_changed) {
            for ctx in crate::superblock::claimed_contexts(mem, &self.layout) {
                let r = self.reclaim(mem, p, ctx, reclaim_reason::PROTOCOL)?;
                report.events.push(SlotEvent::Reclaimed { ctx, reason: reclaim_reason::PROTOCOL, report: r });
            }
        }
        // The doorbell block too: a host that changed it would make the
        // others ring the wrong peer, or none.
        if WakeBlock::read(mem)? != self.wake {
            self.wake.publish(mem)?;
        }
        for ctx in 0..self.layout.num_contexts() {
            self.tick_slot(mem, p, ctx, &mut report)?;
        }
        Ok(report)
    }

    /// Commands only, between heartbeats: up to `budget` per attached
    /// context, without beating, counting leases or looking at slot
    /// changes (a tick does those). What an appliance woken by a doorbell
    /// runs, so a command is answered at once while leases still count
    /// heartbeats, not doorbells.
    pub fn serve_commands<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
    ) -> Result<TickReport, ShmError> {
        let mut report = TickReport::default();
        for ctx in 0..self.layout.num_contexts() {
            if !matches!(self.slots.get(ctx as usize), Some(Slot::Active { .. })) {
                continue;
            }
            if let Some(reason) = self.serve_commands_of(mem, p, ctx, &mut report)? {
                let r = self.reclaim(mem, p, ctx, reason)?;
                report.events.push(SlotEvent::Reclaimed { ctx, reason, report: r });
            }
        }
        Ok(report)
    }

    /// Whether any context is attached: its lease counts beats, and its
    /// commands are served.
    pub fn any_attached(&self) -> bool {
        self.slots.iter().any(|s| matches!(s, Slot::Active { .. }))
    }

    /// Whether an attached context published a command since the last
    /// look (a host that broke its ring counts: the next tick reclaims
    /// it). What the appliance looks at after asking to be rung, before it
    /// halts; commands seen and left waiting (their answers have no room)
    /// do not keep it awake.
    pub fn commands_pending<M: SharedMem + ?Sized>(&mut self, mem: &M) -> bool {
        self.slots.iter_mut().any(|s| match s {
            Slot::Active { cmd, .. } => cmd.producer_moved(mem).unwrap_or(true),
            Slot::Free => false,
        })
    }

    fn slot_field(&self, ctx: u32, field: usize) -> Result<usize, ShmError> {
        // `ctx` is below num_contexts by every caller's loop; the fallback
        // offset is past any region, so an impossible miss is an error.
        self.layout.slot_off(ctx).map(|o| o + field).ok_or(ShmError::OutOfBounds { off: usize::MAX, len: 4, region: 0 })
    }

    fn tick_slot<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        report: &mut TickReport,
    ) -> Result<(), ShmError> {
        let state = mem.load_u32_acquire(self.slot_field(ctx, SLOT_STATE)?)?;
        let active = matches!(self.slots.get(ctx as usize), Some(Slot::Active { .. }));
        let reason = match (active, state) {
            (false, ctx_state::FREE) => return Ok(()),
            (false, ctx_state::ATTACHED) => {
                self.attach(mem, p, ctx)?;
                report.events.push(SlotEvent::Attached { ctx });
                None
            }
            (_, ctx_state::DETACHING) => Some(reclaim_reason::DETACHED),
            (true, ctx_state::ATTACHED) => None,
            // FREE or RECLAIMING written by the host over an attached slot,
            // RECLAIMING over a free one, or a value that is no state at all.
            _ => Some(reclaim_reason::PROTOCOL),
        };
        let reason = match reason {
            Some(r) => Some(r),
            None => self.serve(mem, p, ctx, report)?,
        };
        if let Some(reason) = reason {
            let r = self.reclaim(mem, p, ctx, reason)?;
            report.events.push(SlotEvent::Reclaimed { ctx, reason, report: r });
        }
        Ok(())
    }

    fn attach<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
    ) -> Result<(), ShmError> {
        let geo = |placement| RingGeometry::new(placement, mem.len()).ok();
        let (Some(cmd), Some(resp)) =
            (self.layout.cmd_ring(ctx).and_then(geo), self.layout.resp_ring(ctx).and_then(geo))
        else {
            // The layout was validated against this region at `new`.
            return Err(ShmError::OutOfBounds { off: 0, len: 0, region: mem.len() });
        };
        let host_hb = mem.load_u32_acquire(self.slot_field(ctx, SLOT_HOST_HEARTBEAT)?)?;
        // A context left attached in the dispatcher cannot exist (reclaim
        // detaches); if it did, start clean.
        if self.dispatcher.is_attached(ctx) {
            self.dispatcher.detach(p, ctx);
        }
        let _ = self.dispatcher.attach(ctx);
        if let Some(s) = self.slots.get_mut(ctx as usize) {
            *s = Slot::Active { cmd: Consumer::new(cmd), resp: Producer::new(resp), host_hb, changed_at: self.beat };
        }
        Ok(())
    }

    /// Lease check and command service; `Some(reason)` to reclaim.
    fn serve<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        report: &mut TickReport,
    ) -> Result<Option<u32>, ShmError> {
        let hb = mem.load_u32_acquire(self.slot_field(ctx, SLOT_HOST_HEARTBEAT)?)?;
        let lease = self.layout.params.lease_beats;
        let beat = self.beat;
        let Some(Slot::Active { host_hb, changed_at, .. }) = self.slots.get_mut(ctx as usize) else {
            return Ok(None);
        };
        if hb != *host_hb {
            *host_hb = hb;
            *changed_at = beat;
        } else if beat.wrapping_sub(*changed_at) > lease {
            return Ok(Some(reclaim_reason::LEASE_EXPIRED));
        }
        self.serve_commands_of(mem, p, ctx, report)
    }

    /// Up to `budget` of `ctx`'s commands; `Some(reason)` to reclaim.
    fn serve_commands_of<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        report: &mut TickReport,
    ) -> Result<Option<u32>, ShmError> {
        let Some(Slot::Active { cmd, resp, .. }) = self.slots.get_mut(ctx as usize) else {
            return Ok(None);
        };
        for _ in 0..self.budget {
            // Backpressure: take a command only when its answer has room.
            match resp.free(mem) {
                Ok(0) => break,
                Ok(_) => {}
                Err(RingError::Shm(e)) => return Err(e),
                Err(_) => return Ok(Some(reclaim_reason::PROTOCOL)),
            }
            match cmd.pop(mem, &mut self.req) {
                Ok(false) => break,
                Ok(true) => {}
                Err(RingError::Shm(e)) => return Err(e),
                Err(_) => return Ok(Some(reclaim_reason::PROTOCOL)),
            }
            let n = self.dispatcher.handle(mem, p, ctx, &self.req, &mut self.resp);
            match resp.push(mem, &self.resp[..n.min(self.resp.len())]) {
                Ok(()) => report.commands += 1,
                Err(RingError::Shm(e)) => return Err(e),
                Err(_) => return Ok(Some(reclaim_reason::PROTOCOL)),
            }
        }
        Ok(None)
    }

    /// Tear `ctx` down and hand the slot back: RECLAIMING, objects destroyed,
    /// rings reset, reason and generation written, then FREE (release).
    fn reclaim<M: SharedMem + ?Sized, P: VerbsProvider + ?Sized>(
        &mut self,
        mem: &M,
        p: &mut P,
        ctx: u32,
        reason: u32,
    ) -> Result<TeardownReport, ShmError> {
        let slot = self.layout.slot_off(ctx).ok_or(ShmError::OutOfBounds { off: usize::MAX, len: 0, region: 0 })?;
        mem.store_u32_release(slot + SLOT_STATE, ctx_state::RECLAIMING)?;
        let report = self.dispatcher.detach(p, ctx);
        for p in [self.layout.cmd_ring(ctx), self.layout.resp_ring(ctx)].into_iter().flatten() {
            if let Ok(g) = RingGeometry::new(p, mem.len()) {
                g.reset(mem).map_err(|e| match e {
                    RingError::Shm(e) => e,
                    _ => ShmError::OutOfBounds { off: p.off as usize, len: 0, region: mem.len() },
                })?;
            }
        }
        let generation = mem.load_u32_acquire(slot + SLOT_GENERATION)?.wrapping_add(1);
        mem.store_u32_release(slot + SLOT_GENERATION, generation)?;
        mem.store_u32_release(slot + SLOT_RECLAIM_REASON, reason)?;
        mem.store_u32_release(slot + SLOT_HOST_PID, 0)?;
        mem.write(slot + SLOT_HOST_COMM, &[0u8; COMM_LEN])?;
        mem.store_u32_release(slot + SLOT_HOST_PEER, 0)?;
        mem.store_u32_release(slot + SLOT_HOST_HEARTBEAT, 0)?;
        mem.store_u32_release(slot + SLOT_STATE, ctx_state::FREE)?;
        if let Some(s) = self.slots.get_mut(ctx as usize) {
            *s = Slot::Free;
        }
        Ok(report)
    }

    /// The slot as the region shows it (for `rdma resource show`).
    pub fn read_slot<M: SharedMem + ?Sized>(&self, mem: &M, ctx: u32) -> Option<ContextSlot> {
        use crate::wire::Wire;
        let mut b = [0u8; ContextSlot::SIZE];
        mem.read(self.layout.slot_off(ctx)?, &mut b).ok()?;
        ContextSlot::decode(&b)
    }
}
