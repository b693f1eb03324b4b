//! Conformance cases for the memory operations of issue 19, through the simulated
//! wire: fast registration and invalidation (IBA 10.6.3.5, 10.6.5), memory windows
//! type 1 and 2B (10.6.7; Linux `rxe_mw.c`), and IBA 1.5's ATOMIC WRITE and FLUSH
//! (annex A19), with the error paths the issue names.

use rdma::core::counters::RxeCounter;
use rdma::rxe::memory::Memory;
use rdma::rxe::mr::{AccessFlags, MrHandle};
use rdma::rxe::mw::MwType;
use rdma::rxe::sim::{self, End, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::time::Instant;
use rdma::rxe::transport::VerbsError;
use rdma::rxe::wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion};
use rdma::rxe::wr::{MemOp, RecvWr, SendWr, Sge, WrOpcode};
use rdma::wire::feth;
use rdma::wire::frame as wire_frame;
use rdma::wire::{Opcode, Position};
use std::cell::RefCell;
use std::rc::Rc;

const MEM: usize = 1 << 20;
const LIMIT: Instant = Instant::from_micros(60_000_000);
const PAGE: u64 = 4096;
const RW: u32 = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;

fn setup() -> (Sim, [End; 2]) {
    let mut sim = Sim::new(1, Faults::NONE, MEM, Default::default());
    let ends = sim::connect(&mut sim, &Link::default()).expect("connect");
    (sim, ends)
}

fn sge(end: &End, offset: u64, len: u32) -> Sge {
    Sge { addr: MEM_BASE + offset, length: len, lkey: end.mr.raw() }
}

/// A one-SGE list that outlives the statement (test code: leaked).
fn one(s: Sge) -> &'static [Sge] {
    Box::leak(Box::new([s]))
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed)).collect()
}

fn read(sim: &Sim, node: usize, addr: u64, len: usize) -> Vec<u8> {
    sim.nodes[node].memory().slice(addr, len).expect("in range").to_vec()
}

/// Runs until `n` completions arrived on node `node`'s CQ; returns them.
fn wait_cqes(sim: &mut Sim, node: usize, end: &End, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    sim.run_until(LIMIT, |s| {
        got.extend(sim::drain_cq(&mut s.nodes[node], end.cq));
        got.len() >= n
    });
    got
}

/// Posts one WR on `node` and returns its completion (signaled).
fn run_one(sim: &mut Sim, node: usize, end: &End, wr: &SendWr<'_>) -> WorkCompletion {
    sim.nodes[node].post_send(end.qp, wr).expect("post");
    let got = wait_cqes(sim, node, end, 1);
    assert_eq!(got.len(), 1, "one completion for wr {}", wr.wr_id);
    got[0]
}

/// A fast-register MR on node 1 over two pages the wrong way round (the
/// second page of the MR is the lower one in memory), registered by a REG_MR
/// on b's QP with key byte `key_byte`. Returns (handle, rkey, pages).
fn fast_reg(sim: &mut Sim, b: &End, key_byte: u8) -> (MrHandle, u32, [u64; 2]) {
    let n = &mut sim.nodes[1];
    let mr = n.alloc_mr(b.pd, 4).expect("alloc_mr");
    let pages = [MEM_BASE + 0x40 * PAGE, MEM_BASE + 0x20 * PAGE];
    // 6000 bytes from 0x100 into the first page: they run onto the second.
    n.map_mr_sg(mr, 0x7000_0100, 6000, PAGE, &pages).expect("map");
    let key = (mr.raw() & !0xFF) | u32::from(key_byte);
    let wc = run_one(sim, 1, b, &reg_wr(1, mr, key));
    assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::RegMr));
    (mr, key, pages)
}

fn reg_wr(wr_id: u64, mr: MrHandle, key: u32) -> SendWr<'static> {
    SendWr::new(wr_id, WrOpcode::RegMr, &[]).with_mem(MemOp::Reg { mr, key, access: RW })
}

#[test]
fn fast_register_write_read_through_a_page_list() {
    let (mut sim, [a, b]) = setup();
    let (_, rkey, pages) = fast_reg(&mut sim, &b, 0x33);
    assert_eq!(sim.nodes[1].mr_by_key(rkey).map(|m| m.valid), Some(true));
    let data = pattern(6000, 1);
    sim.nodes[0].memory_mut().write(MEM_BASE, &data).expect("in range");
    let w = SendWr::new(2, WrOpcode::RdmaWrite, one(sge(&a, 0, 6000))).with_remote(0x7000_0100, rkey);
    assert_eq!(run_one(&mut sim, 0, &a, &w).status, WcStatus::Success);
    // The bytes sit where the page list says: 3840 in the first page, the rest
    // at the start of the second.
    let first = (PAGE - 0x100) as usize;
    assert_eq!(read(&sim, 1, pages[0] + 0x100, first), data[..first]);
    assert_eq!(read(&sim, 1, pages[1], 6000 - first), data[first..]);
    let r = SendWr::new(3, WrOpcode::RdmaRead, one(sge(&a, 0x10000, 6000))).with_remote(0x7000_0100, rkey);
    assert_eq!(run_one(&mut sim, 0, &a, &r).status, WcStatus::Success);
    assert_eq!(read(&sim, 0, MEM_BASE + 0x10000, 6000), data);
}

#[test]
fn send_with_invalidate_then_a_write_to_the_rkey_is_naked() {
    let (mut sim, [a, b]) = setup();
    let (mr, rkey, _) = fast_reg(&mut sim, &b, 0x44);
    let rsge = [sge(&b, 0x1000, 64)];
    sim.nodes[1].post_recv(b.qp, &RecvWr { wr_id: 50, sg_list: &rsge }).expect("recv");
    let s = SendWr::new(4, WrOpcode::SendWithInv, one(sge(&a, 0, 16))).with_imm(rkey);
    assert_eq!(run_one(&mut sim, 0, &a, &s).status, WcStatus::Success);
    let got = wait_cqes(&mut sim, 1, &b, 1);
    assert_eq!((got[0].wr_id, got[0].status), (50, WcStatus::Success));
    assert!(got[0].wc_flags.has(WcFlags::WITH_INV));
    assert_eq!(got[0].imm_data, rkey, "the invalidated rkey is reported");
    assert_eq!(sim.nodes[1].mr(mr).map(|m| m.valid), Some(false));
    // IBA 10.6.5: an invalidated key admits no remote access.
    let w = SendWr::new(5, WrOpcode::RdmaWrite, one(sge(&a, 0, 64))).with_remote(0x7000_0100, rkey);
    assert_eq!(run_one(&mut sim, 0, &a, &w).status, WcStatus::RemAccessErr);
}

#[test]
fn local_invalidate_then_reregister_moves_the_key() {
    let (mut sim, [a, b]) = setup();
    let (mr, old, _) = fast_reg(&mut sim, &b, 0x10);
    let inv = SendWr::new(6, WrOpcode::LocalInv, &[]).with_imm(old);
    let wc = run_one(&mut sim, 1, &b, &inv);
    assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::LocalInv));
    // A free MR may be given a new page list and registered with a new key byte.
    sim.nodes[1].map_mr_sg(mr, 0x9000_0000, 100, PAGE, &[MEM_BASE + 0x50 * PAGE]).expect("remap");
    let new = (old & !0xFF) | 0x11;
    assert_eq!(run_one(&mut sim, 1, &b, &reg_wr(7, mr, new)).status, WcStatus::Success);
    assert!(sim.nodes[1].mr_by_key(old).is_none(), "the old key names nothing");
    let w = SendWr::new(8, WrOpcode::RdmaWrite, one(sge(&a, 0, 100))).with_remote(0x9000_0000, new);
    assert_eq!(run_one(&mut sim, 0, &a, &w).status, WcStatus::Success);
    let stale = SendWr::new(9, WrOpcode::RdmaWrite, one(sge(&a, 0, 100))).with_remote(0x9000_0000, old);
    assert_eq!(run_one(&mut sim, 0, &a, &stale).status, WcStatus::RemAccessErr);
}

#[test]
fn memory_operations_that_break_the_rules_fail_locally() {
    // Registering a valid MR (rxe: only a free one): LOC_QP_OP_ERR.
    let (mut sim, [_, b]) = setup();
    let (mr, key, _) = fast_reg(&mut sim, &b, 0x20);
    assert_eq!(run_one(&mut sim, 1, &b, &reg_wr(10, mr, key)).status, WcStatus::LocQpOpErr);
    // Another index in the key: refused.
    let (mut sim, [_, b]) = setup();
    let mr = sim.nodes[1].alloc_mr(b.pd, 1).expect("alloc_mr");
    sim.nodes[1].map_mr_sg(mr, 0x1000, 10, PAGE, &[MEM_BASE]).expect("map");
    let wrong = mr.raw().wrapping_add(0x100);
    assert_eq!(run_one(&mut sim, 1, &b, &reg_wr(11, mr, wrong)).status, WcStatus::LocQpOpErr);
    // LOCAL_INV of a registered (not fast-register) MR.
    let (mut sim, [_, b]) = setup();
    let inv = SendWr::new(12, WrOpcode::LocalInv, &[]).with_imm(b.mr.raw());
    assert_eq!(run_one(&mut sim, 1, &b, &inv).status, WcStatus::LocQpOpErr);
    // The verbs refuse bad page lists.
    let (mut sim, [_, b]) = setup();
    let n = &mut sim.nodes[1];
    let mr = n.alloc_mr(b.pd, 2).expect("alloc_mr");
    assert!(n.map_mr_sg(mr, 0, 10, PAGE, &[MEM_BASE + 1]).is_err(), "unaligned page");
    assert!(n.map_mr_sg(mr, 0, 10, 1000, &[MEM_BASE]).is_err(), "page size");
    assert!(n.map_mr_sg(mr, 0, 3 * PAGE, PAGE, &[MEM_BASE, MEM_BASE + PAGE]).is_err(), "too long");
    assert!(n.map_mr_sg(mr, 0, 1, PAGE, &[MEM_BASE; 3]).is_err(), "more pages than max_num_sg");
    assert!(n.alloc_mr(b.pd, 0).is_err());
    assert!(n.map_mr_sg(b.mr, 0, 1, PAGE, &[MEM_BASE]).is_err(), "not a fast-register MR");
}

fn bind_wr(
    wr_id: u64,
    mw_rkey: u32,
    new_rkey: u32,
    mr_lkey: u32,
    addr: u64,
    length: u64,
    access: u32,
) -> SendWr<'static> {
    SendWr::new(wr_id, WrOpcode::BindMw, &[]).with_mem(MemOp::Bind { mw_rkey, new_rkey, mr_lkey, addr, length, access })
}

#[test]
fn a_type_2b_window_grants_its_own_rights_and_dies_by_send_with_invalidate() {
    let (mut sim, [a, b]) = setup();
    let mw = sim.nodes[1].alloc_mw(b.pd, MwType::Type2).expect("alloc_mw");
    let rkey0 = sim.nodes[1].mw_rkey(mw).expect("rkey");
    let new = (rkey0 & !0xFF) | 0x77;
    let win = MEM_BASE + 0x3000;
    let wc = run_one(&mut sim, 1, &b, &bind_wr(20, rkey0, new, b.mr.raw(), win, 0x1000, AccessFlags::REMOTE_READ));
    assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::BindMw));
    assert_eq!(sim.nodes[1].mw_rkey(mw), Some(new), "the rkey takes the new key byte");
    let data = pattern(0x1000, 5);
    sim.nodes[1].memory_mut().write(win, &data).expect("in range");
    let r = SendWr::new(21, WrOpcode::RdmaRead, one(sge(&a, 0, 0x1000))).with_remote(win, new);
    assert_eq!(run_one(&mut sim, 0, &a, &r).status, WcStatus::Success);
    assert_eq!(read(&sim, 0, MEM_BASE, 0x1000), data);
    // Outside the window (inside the MR): refused. The window's rights, not the MR's.
    let (mut sim2, [a2, b2]) = setup();
    let mw2 = sim2.nodes[1].alloc_mw(b2.pd, MwType::Type2).expect("alloc_mw");
    let k = sim2.nodes[1].mw_rkey(mw2).expect("rkey");
    run_one(&mut sim2, 1, &b2, &bind_wr(22, k, k, b2.mr.raw(), win, 0x1000, AccessFlags::REMOTE_READ));
    let w = SendWr::new(23, WrOpcode::RdmaWrite, one(sge(&a2, 0, 8))).with_remote(win, k);
    assert_eq!(run_one(&mut sim2, 0, &a2, &w).status, WcStatus::RemAccessErr, "no write right");
    // SEND WITH INVALIDATE frees the window: a READ then fails.
    let rsge = [sge(&b, 0x9000, 64)];
    sim.nodes[1].post_recv(b.qp, &RecvWr { wr_id: 60, sg_list: &rsge }).expect("recv");
    let s = SendWr::new(24, WrOpcode::SendWithInv, one(sge(&a, 0, 8))).with_imm(new);
    assert_eq!(run_one(&mut sim, 0, &a, &s).status, WcStatus::Success);
    let got = wait_cqes(&mut sim, 1, &b, 1);
    assert_eq!((got[0].status, got[0].imm_data), (WcStatus::Success, new));
    assert_eq!(sim.nodes[1].mw(mw).map(|w| w.valid), Some(false));
    let r = SendWr::new(25, WrOpcode::RdmaRead, one(sge(&a, 0, 8))).with_remote(win, new);
    assert_eq!(run_one(&mut sim, 0, &a, &r).status, WcStatus::RemAccessErr);
}

#[test]
fn a_window_bound_without_mw_bind_access_fails() {
    let (mut sim, [_, b]) = setup();
    let n = &mut sim.nodes[1];
    let plain = n.reg_mr(b.pd, MEM_BASE, MEM_BASE, 0x10000, RW).expect("reg_mr");
    let mw = n.alloc_mw(b.pd, MwType::Type2).expect("alloc_mw");
    let k = n.mw_rkey(mw).expect("rkey");
    let wc = run_one(&mut sim, 1, &b, &bind_wr(30, k, k, plain.raw(), MEM_BASE, 0x100, AccessFlags::REMOTE_READ));
    assert_eq!((wc.status, wc.opcode), (WcStatus::MwBindErr, WcOpcode::BindMw));
    assert_eq!(sim.nodes[1].mw(mw).map(|w| w.valid), Some(false));
    // A window outside its MR, or a writable window on an MR without local
    // write, fail the same way (C10-74, C10-75).
    for (mr_access, addr, len, access) in [
        (RW | AccessFlags::MW_BIND, MEM_BASE + 0xFF00, 0x200, AccessFlags::REMOTE_READ),
        (AccessFlags::REMOTE_READ | AccessFlags::MW_BIND, MEM_BASE, 0x100, AccessFlags::REMOTE_WRITE),
    ] {
        let (mut sim, [_, b]) = setup();
        let n = &mut sim.nodes[1];
        let mr = n.reg_mr(b.pd, MEM_BASE, MEM_BASE, 0x10000, mr_access).expect("reg_mr");
        let mw = n.alloc_mw(b.pd, MwType::Type2).expect("alloc_mw");
        let k = n.mw_rkey(mw).expect("rkey");
        let wc = run_one(&mut sim, 1, &b, &bind_wr(31, k, k, mr.raw(), addr, len, access));
        assert_eq!(wc.status, WcStatus::MwBindErr);
    }
}

#[test]
fn a_type_1_window_is_bound_by_the_verb_and_cannot_be_invalidated() {
    let (mut sim, [a, b]) = setup();
    let mw = sim.nodes[1].alloc_mw(b.pd, MwType::Type1).expect("alloc_mw");
    let k = sim.nodes[1].mw_rkey(mw).expect("rkey");
    let new = (k & !0xFF) | ((k + 1) & 0xFF);
    let win = MEM_BASE + 0x8000;
    let flags = rdma::rxe::wr::SendFlags::SIGNALED;
    sim.nodes[1]
        .bind_mw(b.qp, mw, 40, flags, new, b.mr.raw(), win, 64, AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ)
        .expect("bind");
    let got = wait_cqes(&mut sim, 1, &b, 1);
    assert_eq!((got[0].status, got[0].opcode), (WcStatus::Success, WcOpcode::BindMw));
    let w = SendWr::new(41, WrOpcode::RdmaWrite, one(sge(&a, 0, 64))).with_remote(win, new);
    assert_eq!(run_one(&mut sim, 0, &a, &w).status, WcStatus::Success);
    // The MR cannot go while the window is bound to it.
    assert_eq!(sim.nodes[1].dereg_mr(b.mr), Err(VerbsError::Busy("MR (memory windows are bound to it)")));
    // o10-37.2.26: LOCAL_INV of a type 1 window fails.
    let inv = SendWr::new(42, WrOpcode::LocalInv, &[]).with_imm(new);
    assert_eq!(run_one(&mut sim, 1, &b, &inv).status, WcStatus::LocQpOpErr);
    // The verb binds type 1 only.
    let (mut sim, [_, b]) = setup();
    let t2 = sim.nodes[1].alloc_mw(b.pd, MwType::Type2).expect("alloc_mw");
    assert!(sim.nodes[1].bind_mw(b.qp, t2, 43, flags, 0, b.mr.raw(), MEM_BASE, 8, 0).is_err());
}

#[test]
fn atomic_write_places_eight_bytes_and_is_acked_by_an_empty_read_response() {
    let (mut sim, [a, b]) = setup();
    let sent = capture(&mut sim, &[Opcode::RcAtomicWrite]);
    let bytes = *b"8 bytes!";
    let w =
        SendWr::new(50, WrOpcode::AtomicWrite, &[]).with_remote(MEM_BASE + 0x2008, b.mr.raw()).with_atomic_write(bytes);
    let wc = run_one(&mut sim, 0, &a, &w);
    assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::AtomicWrite));
    assert_eq!(read(&sim, 1, MEM_BASE + 0x2008, 8), bytes);
    let frames = sent.borrow();
    let kinds: Vec<(Opcode, usize, Position)> = frames
        .iter()
        .map(|f| {
            let rx = wire_frame::parse(f).expect("parses");
            (rx.repr.roce.bth.opcode, rx.repr.payload.len(), rx.info.position)
        })
        .collect();
    assert_eq!(
        kinds,
        [(Opcode::RcAtomicWrite, 8, Position::Only), (Opcode::RcRdmaReadResponseOnly, 0, Position::Only)]
    );
    // Misaligned: an invalid request.
    let (mut sim, [a, b]) = setup();
    let w =
        SendWr::new(51, WrOpcode::AtomicWrite, &[]).with_remote(MEM_BASE + 0x2004, b.mr.raw()).with_atomic_write(bytes);
    assert_eq!(run_one(&mut sim, 0, &a, &w).status, WcStatus::RemInvReqErr);
}

/// Records, in order, every frame either way whose opcode is one of `ops` or
/// a READ RESPONSE ONLY.
fn capture(sim: &mut Sim, ops: &'static [Opcode]) -> Rc<RefCell<Vec<Vec<u8>>>> {
    let into = Rc::new(RefCell::new(Vec::new()));
    let g = into.clone();
    sim.wire.filter = Some(Box::new(move |_, frame| {
        let keep = wire_frame::parse(frame).is_ok_and(|rx| {
            ops.contains(&rx.repr.roce.bth.opcode) || rx.repr.roce.bth.opcode == Opcode::RcRdmaReadResponseOnly
        });
        if keep {
            g.borrow_mut().push(frame.to_vec());
        }
        false
    }));
    into
}

#[test]
fn flush_global_visibility_completes_and_persistence_is_refused() {
    let (mut sim, [a, b]) = setup();
    let seen = capture(&mut sim, &[Opcode::RcFlush]);
    let f = SendWr::new(60, WrOpcode::Flush, &[])
        .with_remote(MEM_BASE + 0x100, b.mr.raw())
        .with_atomic(0x1000, 0)
        .with_flush(feth::PLT_GLOBAL_VISIBILITY, feth::SEL_MR_RANGE);
    let wc = run_one(&mut sim, 0, &a, &f);
    assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::Flush));
    {
        let frames = seen.borrow();
        let rx = wire_frame::parse(&frames[0]).expect("parses");
        assert_eq!(rx.repr.roce.bth.opcode, Opcode::RcFlush);
        let fe = rx.repr.roce.ext.feth.expect("FETH");
        assert_eq!((fe.placement_type, fe.selectivity_level), (feth::PLT_GLOBAL_VISIBILITY, feth::SEL_MR_RANGE));
        assert_eq!(rx.repr.roce.ext.reth.map(|r| (r.va, r.dma_len)), Some((MEM_BASE + 0x100, 0x1000)));
        let ack = wire_frame::parse(&frames[1]).expect("parses");
        assert_eq!((ack.repr.roce.bth.opcode, ack.repr.payload.len()), (Opcode::RcRdmaReadResponseOnly, 0));
    }
    // The whole MR: address and length are not looked at.
    let whole = SendWr::new(61, WrOpcode::Flush, &[])
        .with_remote(0, b.mr.raw())
        .with_flush(feth::PLT_GLOBAL_VISIBILITY, feth::SEL_MR_WHOLE);
    assert_eq!(run_one(&mut sim, 0, &a, &whole).status, WcStatus::Success);
    // No MR here may be flushed to persistence.
    let p = SendWr::new(62, WrOpcode::Flush, &[])
        .with_remote(MEM_BASE, b.mr.raw())
        .with_atomic(64, 0)
        .with_flush(feth::PLT_PERSISTENCE, feth::SEL_MR_RANGE);
    assert_eq!(run_one(&mut sim, 0, &a, &p).status, WcStatus::RemAccessErr);
    // An MR without FLUSH_GLOBAL access refuses a global flush.
    let (mut sim, [a, b]) = setup();
    let plain = sim.nodes[1].reg_mr(b.pd, MEM_BASE, MEM_BASE, 0x1000, RW).expect("reg_mr");
    let f = SendWr::new(63, WrOpcode::Flush, &[])
        .with_remote(MEM_BASE, plain.raw())
        .with_atomic(64, 0)
        .with_flush(feth::PLT_GLOBAL_VISIBILITY, feth::SEL_MR_RANGE);
    assert_eq!(run_one(&mut sim, 0, &a, &f).status, WcStatus::RemAccessErr);
}

#[test]
fn a_lost_flush_ack_is_answered_again_not_executed_again() {
    let (mut sim, [a, b]) = setup();
    let dropped = Rc::new(RefCell::new(0u32));
    let d = dropped.clone();
    sim.wire.filter = Some(Box::new(move |dest, frame| {
        let ack = dest == 0
            && wire_frame::parse(frame).is_ok_and(|rx| rx.repr.roce.bth.opcode == Opcode::RcRdmaReadResponseOnly);
        if ack && *d.borrow() == 0 {
            *d.borrow_mut() += 1;
            return true;
        }
        false
    }));
    let w =
        SendWr::new(70, WrOpcode::AtomicWrite, &[]).with_remote(MEM_BASE + 0x10, b.mr.raw()).with_atomic_write([7; 8]);
    assert_eq!(run_one(&mut sim, 0, &a, &w).status, WcStatus::Success);
    assert_eq!(*dropped.borrow(), 1);
    assert!(sim.nodes[1].stats().get(RxeCounter::DuplicateRequest) >= 1, "the retry was a duplicate");
}

#[test]
fn send_with_invalidate_of_a_key_that_cannot_be_invalidated_fails_both_ends() {
    // b's own registered MR is not a fast-register one: it cannot be invalidated.
    let (mut sim, [a, b]) = setup();
    let rsge = [sge(&b, 0x1000, 64)];
    sim.nodes[1].post_recv(b.qp, &RecvWr { wr_id: 80, sg_list: &rsge }).expect("recv");
    let s = SendWr::new(81, WrOpcode::SendWithInv, one(sge(&a, 0, 16))).with_imm(b.mr.raw());
    assert_eq!(run_one(&mut sim, 0, &a, &s).status, WcStatus::RemInvReqErr);
    let got = wait_cqes(&mut sim, 1, &b, 1);
    assert_eq!((got[0].wr_id, got[0].status), (80, WcStatus::RemInvReqErr));
    assert_eq!(sim.nodes[1].mr(b.mr).map(|m| m.valid), Some(true), "left as it was");
}
