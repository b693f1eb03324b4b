//! The firmware's watch over the superblock. The superblock lives in shared
//! memory every host can write; the firmware published it once
//! ([`Layout::init`]) and is the only party allowed to change it. A host that
//! overwrites it (a stray write, a hostile process) would otherwise leave it
//! broken for good: every new host refuses the region (bad magic, version or
//! offsets) until someone restores the bytes by hand, and a host that read a
//! self-consistent but different layout would place its rings where the
//! firmware does not serve them.
//!
//! [`check`] runs at the start of every firmware tick: it compares the
//! superblock with the one the firmware's [`Layout`] describes and, when they
//! differ, re-publishes it the way `init` does (BOOTING, the bytes, then READY
//! with release, so a host that reads meanwhile sees "not ready" rather than
//! a torn block). The words that change at run time are kept from memory:
//! `heartbeat`, `fail_code`, and a `fw_state` of FAILED with a failure code
//! (written by [`crate::Firmware::fail`]; any other state but READY is
//! repaired to READY while the firmware ticks).
//!
//! When a field the hosts derive the layout from was wrong (magic, version,
//! region size, counts, offsets, sizes, heartbeat period, lease), any context
//! claimed meanwhile may be using that layout: [`Repair::layout_changed`] tells
//! the caller to reclaim every claimed context. A damaged `fw_state` or
//! reserved word only stops new hosts from attaching, so it is repaired
//! without reclaiming anyone.

use alloc::vec::Vec;

use crate::abi::{Layout, SB_FW_STATE, SLOT_STATE, Superblock, ctx_state, fw_state};
use crate::shm::{SharedMem, ShmError};
use crate::wire::Wire;

/// What [`check`] found wrong and put right.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Repair {
    /// A field the layout is derived from differed: contexts claimed since
    /// the damage may use a layout the firmware does not serve.
    pub layout_changed: bool,
}

/// The superblock the firmware should be showing now, given the one in memory:
/// the published layout with the run-time words (`heartbeat`, `fail_code`,
/// and a genuine FAILED state) kept.
fn expected(layout: &Layout, now: &Superblock) -> Superblock {
    let failed = now.fw_state == fw_state::FAILED && now.fail_code != 0;
    let mut sb = layout.superblock(if failed { fw_state::FAILED } else { fw_state::READY });
    sb.heartbeat = now.heartbeat;
    sb.fail_code = now.fail_code;
    sb
}

/// Compares the superblock with what `layout` publishes and repairs it when
/// it differs. `Ok(None)` when intact. Errors are those of the firmware's own
/// mapping only.
pub fn check<M: SharedMem + ?Sized>(mem: &M, layout: &Layout) -> Result<Option<Repair>, ShmError> {
    let mut b = [0u8; Superblock::SIZE];
    mem.read(0, &mut b)?;
    // A region too small for a superblock was refused at `Layout::new`.
    let Some(now) = Superblock::decode(&b) else { return Ok(None) };
    let want = expected(layout, &now);
    if now == want {
        return Ok(None);
    }
    // Only the state and the reserved words may differ without the layout
    // having changed.
    let layout_changed = Superblock { fw_state: want.fw_state, reserved: want.reserved, ..now } != want;
    mem.store_u32_release(SB_FW_STATE, fw_state::BOOTING)?;
    let mut booting = want;
    booting.fw_state = fw_state::BOOTING;
    // Encoding a superblock into its own size cannot fail.
    if booting.encode(&mut b).is_some() {
        mem.write(0, &b)?;
    }
    mem.store_u32_release(SB_FW_STATE, want.fw_state)?;
    Ok(Some(Repair { layout_changed }))
}

/// The contexts to reclaim after a repair that changed the layout: every slot
/// not FREE (attached, claimed but not yet seen, detaching, or holding a
/// value that is no state).
pub fn claimed_contexts<M: SharedMem + ?Sized>(mem: &M, layout: &Layout) -> Vec<u32> {
    (0..layout.num_contexts())
        .filter(|&ctx| {
            let state = layout.slot_off(ctx).map(|o| mem.load_u32_acquire(o + SLOT_STATE));
            !matches!(state, Some(Ok(ctx_state::FREE)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{LayoutParams, MAGIC, reclaim_reason};
    use crate::cmd::{Empty, nr};
    use crate::dispatch::{Limits, ObjKind};
    use crate::firmware::SlotEvent;
    use crate::host::{HostContext, HostError};
    use crate::shm::fake::HeapShm;
    use crate::testutil::Fw;
    use core::mem::offset_of;

    const REGION: usize = 4 << 20;

    fn appliance() -> (HeapShm, Fw) {
        let mem = HeapShm::new(REGION);
        let params = LayoutParams { num_contexts: 3, queue_area_size: 64 << 10, ..LayoutParams::default() };
        let layout = Layout::new(REGION as u64, params).expect("layout");
        let fw = Fw::new(&mem, layout, Limits::default(), 16);
        (mem, fw)
    }

    fn call<Resp: Wire>(
        mem: &HeapShm,
        fw: &mut Fw,
        host: &mut HostContext,
        nr: u16,
        req: &impl Wire,
    ) -> Result<Resp, HostError> {
        let mut ticks = 0;
        host.call(mem, nr, req, || {
            ticks += 1;
            fw.tick(mem).is_ok() && ticks < 100
        })
    }

    fn superblock(mem: &HeapShm) -> Superblock {
        let mut b = [0u8; Superblock::SIZE];
        mem.read(0, &mut b).expect("in the region");
        Superblock::decode(&b).expect("decodes")
    }

    fn reclaimed(events: &[SlotEvent]) -> Vec<(u32, u32)> {
        events
            .iter()
            .filter_map(|e| match e {
                SlotEvent::Reclaimed { ctx, reason, .. } => Some((*ctx, *reason)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_intact_superblock_is_left_alone() {
        let (mem, mut fw) = appliance();
        for _ in 0..3 {
            assert!(reclaimed(&fw.tick(&mem).expect("tick").events).is_empty());
        }
        assert_eq!(check(&mem, fw.layout()), Ok(None));
        assert_eq!(superblock(&mem).heartbeat, 3);
    }

    /// Issue 17: a host overwrote the superblock; new hosts were refused until
    /// the bytes were restored by hand. The next tick re-publishes the layout,
    /// reclaims the contexts claimed under it, and new hosts attach again.
    #[test]
    fn a_trampled_superblock_is_republished_and_its_contexts_reclaimed() {
        let (mem, mut fw) = appliance();
        let mut old = HostContext::attach(&mem, 1).expect("attach");
        let pd: crate::cmd::HandleResp =
            call(&mem, &mut fw, &mut old, nr::ALLOC_PD, &crate::cmd::DevReq::default()).expect("pd");
        assert_ne!(pd.handle, 0);
        let published = superblock(&mem);
        // Garbage over the first 64 bytes (magic, size, version, state, ...).
        mem.write(0, &[0xA5; 64]).expect("in the region");
        assert!(HostContext::attach(&mem, 2).is_err(), "refused while trampled");
        let events = fw.tick(&mem).expect("tick").events;
        assert_eq!(reclaimed(&events), [(0, reclaim_reason::PROTOCOL)]);
        assert_eq!(fw.dispatcher().count(None, ObjKind::Pd), 0);
        let now = superblock(&mem);
        assert_eq!(now, Superblock { heartbeat: now.heartbeat, ..published });
        assert_eq!((now.magic, now.fw_state), (MAGIC, fw_state::READY));
        // The old host learns it lost its context; a new one works.
        assert_eq!(call::<Empty>(&mem, &mut fw, &mut old, nr::NOP, &Empty {}), Err(HostError::Lost));
        let mut new = HostContext::attach(&mem, 2).expect("attach after the repair");
        assert_eq!(call::<Empty>(&mem, &mut fw, &mut new, nr::NOP, &Empty {}), Ok(Empty {}));
        assert_eq!(check(&mem, fw.layout()), Ok(None));
    }

    /// A self-consistent but different layout (fewer, smaller rings) is a
    /// trampled superblock too: a host could have attached through it.
    #[test]
    fn a_different_valid_layout_is_replaced() {
        let (mem, mut fw) = appliance();
        fw.tick(&mem).expect("tick");
        let other = Layout::new(
            REGION as u64,
            LayoutParams { num_contexts: 2, cmd_entries: 4, queue_area_size: 64 << 10, ..LayoutParams::default() },
        )
        .expect("layout");
        let mut b = [0u8; Superblock::SIZE];
        other.superblock(fw_state::READY).encode(&mut b).expect("encode");
        mem.write(0, &b).expect("in the region");
        let mut misled = HostContext::attach(&mem, 3).expect("a consistent layout is accepted");
        assert_eq!(misled.layout(), &other);
        let events = fw.tick(&mem).expect("tick").events;
        assert_eq!(reclaimed(&events), [(0, reclaim_reason::PROTOCOL)], "the claim made through it");
        assert_eq!(call::<Empty>(&mem, &mut fw, &mut misled, nr::NOP, &Empty {}), Err(HostError::Lost));
        assert_eq!(HostContext::attach(&mem, 3).expect("attach").layout(), fw.layout());
    }

    /// A damaged state word stops new hosts only: repaired, nobody reclaimed.
    /// The run-time words are the firmware's own and stay as they are.
    #[test]
    fn a_damaged_state_is_repaired_without_reclaiming_anyone() {
        let (mem, mut fw) = appliance();
        let mut host = HostContext::attach(&mem, 1).expect("attach");
        assert_eq!(call::<Empty>(&mem, &mut fw, &mut host, nr::NOP, &Empty {}), Ok(Empty {}));
        for state in [fw_state::BOOTING, fw_state::ABSENT, 77, fw_state::FAILED] {
            mem.store_u32_release(SB_FW_STATE, state).expect("in the region");
            assert!(HostContext::attach(&mem, 2).is_err());
            let events = fw.tick(&mem).expect("tick").events;
            assert!(reclaimed(&events).is_empty(), "state {state}: {events:?}");
            assert_eq!(superblock(&mem).fw_state, fw_state::READY, "state {state}");
        }
        mem.write(offset_of!(Superblock, reserved), &[1; 8]).expect("in the region");
        assert_eq!(check(&mem, fw.layout()), Ok(Some(Repair { layout_changed: false })));
        assert_eq!(call::<Empty>(&mem, &mut fw, &mut host, nr::NOP, &Empty {}), Ok(Empty {}));
        // A failure the firmware declared is not undone.
        fw.fail(&mem, crate::cmd::Status::EIO).expect("fail");
        assert_eq!(check(&mem, fw.layout()), Ok(None));
        assert_eq!(superblock(&mem).fw_state, fw_state::FAILED);
    }
}
