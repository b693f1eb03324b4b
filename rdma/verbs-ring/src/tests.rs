//! Tests across modules: the dispatcher with a fake provider (ownership,
//! use counts, teardown order, placement, events), the firmware and host
//! sides end to end over the heap fake (attach, detach, lease expiry,
//! protocol violations, backpressure), and fuzzing of the command handler
//! and the ring indices.

use alloc::vec;
use alloc::vec::Vec;

use proptest::prelude::*;

use crate::abi::*;
use crate::cm::*;
use crate::cmd::*;
use crate::dispatch::{CmEventOut, Dispatcher, EventSource, Limits, ObjKind};
use crate::firmware::SlotEvent;
use crate::host::{HostContext, HostError};
use crate::shm::SharedMem;
use crate::shm::fake::HeapShm;
use crate::table::{self, Cap};
use crate::testutil::{FakeProvider, Fw};
use crate::wire::{Wire, name_field};

const REGION: usize = 1 << 20;

fn small_params() -> LayoutParams {
    LayoutParams {
        num_contexts: 3,
        cmd_entries: 8,
        resp_entries: 4,
        queue_area_size: 64 << 10,
        lease_beats: 10,
        ..Default::default()
    }
}

struct Harness {
    mem: HeapShm,
    d: Dispatcher,
    p: FakeProvider,
    seq: u32,
}

impl Harness {
    fn new() -> Harness {
        Harness::with_limits(Limits::default())
    }

    fn with_limits(limits: Limits) -> Harness {
        let mem = HeapShm::new(REGION);
        let layout = Layout::new(REGION as u64, small_params()).unwrap();
        let mut d = Dispatcher::new(layout, limits);
        d.attach(0).unwrap();
        d.attach(1).unwrap();
        Harness { mem, d, p: FakeProvider::new(), seq: 0 }
    }

    fn raw(&mut self, ctx: u32, bytes: &[u8]) -> (CmdHeader, Vec<u8>) {
        let mut resp = vec![0u8; 256];
        let n = self.d.handle(&self.mem, &mut self.p, ctx, bytes, &mut resp);
        assert!(n >= HEADER_SIZE && n <= resp.len());
        let h = CmdHeader::decode(&resp).unwrap();
        assert_eq!(usize::from(h.len) + HEADER_SIZE, n);
        (h, resp[HEADER_SIZE..n].to_vec())
    }

    fn cmd<Req: Wire, Resp: Wire>(&mut self, ctx: u32, nr: u16, req: Req) -> Result<Resp, Status> {
        self.seq += 1;
        let mut b = vec![0u8; HEADER_SIZE + Req::SIZE];
        CmdHeader { cmd: nr, flags: 0, len: Req::SIZE as u16, status: 0, ctx, seq: self.seq }.encode(&mut b).unwrap();
        req.encode(&mut b[HEADER_SIZE..]).unwrap();
        let (h, body) = self.raw(ctx, &b);
        assert_eq!((h.cmd, h.seq, h.ctx), (nr, self.seq, ctx));
        if h.status != 0 {
            assert!(body.is_empty());
            return Err(Status(h.status));
        }
        assert_eq!(body.len(), table::lookup(nr).unwrap().resp_size, "response size of {nr}");
        Ok(Resp::decode(&body).unwrap())
    }

    fn pd(&mut self, ctx: u32, dev: u32) -> u32 {
        let r: HandleResp = self.cmd(ctx, nr::ALLOC_PD, DevReq { dev_index: dev, reserved: 0 }).unwrap();
        r.handle
    }

    fn cq(&mut self, ctx: u32, dev: u32, cqe: u32) -> Result<CreateCqResp, Status> {
        self.cmd(ctx, nr::CREATE_CQ, CreateCqReq { user_handle: 0xc0, dev_index: dev, cqe, ..Default::default() })
    }

    fn mr(&mut self, ctx: u32, pd: u32, start: u64, length: u64, access: u32) -> Result<RegMrResp, Status> {
        self.cmd(ctx, nr::REG_MR, RegMrReq { start, length, pd_handle: pd, access, iova: start })
    }

    fn qp(&mut self, ctx: u32, pd: u32, scq: u32, rcq: u32, srq: u32) -> Result<CreateQpResp, Status> {
        let cap = QpCap { max_send_wr: 10, max_recv_wr: 5, max_send_sge: 2, max_recv_sge: 1, max_inline_data: 64 };
        let req = CreateQpReq {
            user_handle: 0x9,
            pd_handle: pd,
            send_cq_handle: scq,
            recv_cq_handle: rcq,
            srq_handle: srq,
            cap,
            qp_type: qp_type::RC,
            ..Default::default()
        };
        self.cmd(ctx, nr::CREATE_QP, req)
    }

    fn cm_id(&mut self, ctx: u32, uid: u64) -> u32 {
        let req = CmCreateIdReq { uid, ps: port_space::TCP, qp_type: qp_type::RC, ..Default::default() };
        let r: HandleResp = self.cmd(ctx, nr::CM_CREATE_ID, req).unwrap();
        r.handle
    }

    fn destroy(&mut self, ctx: u32, nr: u16, handle: u32) -> Status {
        let req = HandleReq { handle, reserved: 0 };
        let r = if matches!(nr, nr::DESTROY_QP | nr::DESTROY_CQ | nr::DESTROY_SRQ) {
            self.cmd::<_, DestroyResp>(ctx, nr, req).map(|_| ())
        } else {
            self.cmd::<_, Empty>(ctx, nr, req).map(|_| ())
        };
        r.err().unwrap_or(Status::OK)
    }
}

#[test]
fn queries_and_control_messages() {
    let mut h = Harness::new();
    assert_eq!(h.cmd::<_, Empty>(0, nr::NOP, Empty {}), Ok(Empty {}));
    let a: DeviceAttr = h.cmd(0, nr::QUERY_DEVICE, DevReq::default()).unwrap();
    assert_eq!(a.vendor_id, 0xffffff);
    assert_eq!(h.cmd::<_, DeviceAttr>(0, nr::QUERY_DEVICE, DevReq { dev_index: 7, reserved: 0 }), Err(Status::ENODEV));
    let p: PortAttr = h.cmd(0, nr::QUERY_PORT, PortReq { dev_index: 0, port_num: 1 }).unwrap();
    assert_eq!(p.state, 4);
    let g: GidEntry = h.cmd(0, nr::QUERY_GID, GidReq { dev_index: 0, port_num: 1, index: 1, reserved: 0 }).unwrap();
    assert_eq!((g.gid[15], g.valid), (1, 1));
    // The GID table dump pages through valid entries: 0, 1, 5, 7, 9, 11 | 13, 15.
    let page: GidTablePage =
        h.cmd(0, nr::QUERY_GID_TABLE, GidReq { dev_index: 0, port_num: 1, index: 0, reserved: 0 }).unwrap();
    assert_eq!(page.count, 6);
    assert_eq!(page.entries.map(|e| e.index), [0, 1, 5, 7, 9, 11]);
    assert_eq!(page.next, 12);
    let page: GidTablePage =
        h.cmd(0, nr::QUERY_GID_TABLE, GidReq { dev_index: 0, port_num: 1, index: 12, reserved: 0 }).unwrap();
    assert_eq!((page.count, page.next, page.entries[1].index), (2, NO_MORE, 15));
    let k: PkeyResp = h.cmd(0, nr::QUERY_PKEY, GidReq { dev_index: 0, port_num: 1, index: 0, reserved: 0 }).unwrap();
    assert_eq!(k.pkey, 0xffff);
    let c: CountersResp = h.cmd(0, nr::QUERY_COUNTERS, PortReq { dev_index: 0, port_num: 1 }).unwrap();
    assert_eq!((c.num_counters, c.values[0]), (15, 42));

    let add = LinkAddReq {
        dev_name: name_field("rxe2").unwrap(),
        link_type: name_field("rxe").unwrap(),
        netdev: name_field("eth1").unwrap(),
    };
    let r: HandleResp = h.cmd(0, nr::LINK_ADD, add).unwrap();
    assert_eq!(r.handle, 2);
    assert_eq!(h.cmd::<_, HandleResp>(1, nr::LINK_ADD, add), Err(Status::EEXIST));
    // A name without its NUL is refused before the provider sees it.
    let bad = LinkAddReq { dev_name: [b'x'; DEV_NAME_LEN], ..add };
    assert_eq!(h.cmd::<_, HandleResp>(0, nr::LINK_ADD, bad), Err(Status::EINVAL));
    // Dump by paging.
    let mut names = Vec::new();
    let mut at = 0;
    while at != NO_MORE {
        let l: LinkInfo = h.cmd(0, nr::LINK_SHOW, LinkShowReq { dev_index: at, port_num: 0 }).unwrap();
        names.push(alloc::string::String::from(crate::wire::name_str(&l.dev_name).unwrap()));
        at = l.next;
    }
    assert_eq!(names, ["rxe0", "rxe1", "rxe2"]);
    // A device in use by any context cannot be deleted.
    let _pd = h.pd(1, 2);
    // Resource counts cover every context, per device.
    let _pd0 = h.pd(0, 2);
    let rc: ResourceCounts = h.cmd(0, nr::QUERY_RESOURCES, DevReq { dev_index: 2, reserved: 0 }).unwrap();
    assert_eq!((rc.counts, rc.contexts), ([0, 0, 0, 0, 0, 2], 2));
    let rc: ResourceCounts = h.cmd(0, nr::QUERY_RESOURCES, DevReq { dev_index: 0, reserved: 0 }).unwrap();
    assert_eq!((rc.counts, rc.contexts), ([0; 6], 0));
    h.d.detach(&mut h.p, 0);
    h.d.attach(0).unwrap();
    assert_eq!(h.cmd::<_, Empty>(0, nr::LINK_DEL, DevReq { dev_index: 2, reserved: 0 }), Err(Status::EBUSY));
    h.d.detach(&mut h.p, 1);
    assert_eq!(h.cmd::<_, Empty>(0, nr::LINK_DEL, DevReq { dev_index: 2, reserved: 0 }), Ok(Empty {}));
}

#[test]
fn every_table_row_has_a_handler_with_its_sizes() {
    let mut h = Harness::new();
    for spec in table::TABLE {
        let mut b = vec![0u8; HEADER_SIZE + spec.req_size];
        CmdHeader { cmd: spec.nr, len: spec.req_size as u16, ctx: 0, seq: 1, ..Default::default() }
            .encode(&mut b)
            .unwrap();
        let (hdr, body) = h.raw(0, &b);
        let st = Status(hdr.status);
        assert!(st != Status::ENOSYS && st != Status::EMSGSIZE, "{} answered {st}", spec.name);
        if st.is_ok() {
            assert_eq!(body.len(), spec.resp_size, "{}", spec.name);
        }
        assert!(HEADER_SIZE + spec.resp_size <= MIN_CMD_SLOT as usize);
    }
}

#[test]
fn header_checks() {
    let mut h = Harness::new();
    let mut b = [0u8; 16];
    // A zeroed slot is command 0: unknown.
    assert_eq!(h.raw(0, &b).0.status, Status::ENOSYS.0);
    CmdHeader { cmd: nr::NOP, ctx: 1, ..Default::default() }.encode(&mut b).unwrap();
    // Context id of another context: refused.
    assert_eq!(h.raw(0, &b).0.status, Status::EPERM.0);
    // A context that is not attached.
    CmdHeader { cmd: nr::NOP, ctx: 2, ..Default::default() }.encode(&mut b).unwrap();
    assert_eq!(h.raw(2, &b).0.status, Status::EPERM.0);
    // A length beyond the slot.
    CmdHeader { cmd: nr::NOP, len: 500, ..Default::default() }.encode(&mut b).unwrap();
    assert_eq!(h.raw(0, &b).0.status, Status::EMSGSIZE.0);
    // Short header.
    assert_eq!(h.raw(0, &b[..5]).0.status, Status::EMSGSIZE.0);
    // Nonzero status or flags in a request.
    CmdHeader { cmd: nr::NOP, status: 3, ..Default::default() }.encode(&mut b).unwrap();
    assert_eq!(h.raw(0, &b).0.status, Status::EINVAL.0);
    // A response buffer without room for a header gets nothing.
    assert_eq!(h.d.handle(&h.mem, &mut h.p, 0, &b, &mut [0u8; 8]), 0);
}

#[test]
fn missing_capability_is_not_supported_and_never_reaches_the_provider() {
    let mut h = Harness::new();
    h.p.caps = h.p.caps.without(Cap::CreateSrq);
    let pd = h.pd(0, 0);
    let r = h.cmd::<_, CreateSrqResp>(
        0,
        nr::CREATE_SRQ,
        CreateSrqReq { pd_handle: pd, max_wr: 4, max_sge: 1, ..Default::default() },
    );
    assert_eq!(r, Err(Status::EOPNOTSUPP));
    assert_eq!(h.p.calls("create_srq"), 0);
}

#[test]
fn handles_of_another_context_or_kind_are_refused() {
    let mut h = Harness::new();
    let pd0 = h.pd(0, 0);
    let cq0 = h.cq(0, 0, 4).unwrap().cq_handle;
    // Context 1 cannot use, destroy or even see context 0's objects.
    assert_eq!(h.destroy(1, nr::DEALLOC_PD, pd0), Status::ENOENT);
    assert_eq!(h.destroy(1, nr::DESTROY_CQ, cq0), Status::ENOENT);
    let (_, start_area) = (0, h.d.layout().buf_area(1).unwrap().0);
    assert_eq!(h.mr(1, pd0, start_area, 4096, 0), Err(Status::ENOENT));
    let pd1 = h.pd(1, 0);
    let cq1 = h.cq(1, 0, 4).unwrap().cq_handle;
    assert_eq!(h.qp(1, pd1, cq0, cq1, 0), Err(Status::ENOENT));
    // A handle of the wrong kind, and handle 0.
    assert_eq!(h.destroy(0, nr::DESTROY_CQ, pd0), Status::ENOENT);
    assert_eq!(h.destroy(0, nr::DEALLOC_PD, 0), Status::ENOENT);
    // Context 0's objects are untouched.
    assert_eq!(h.d.count(Some(0), ObjKind::Pd), 1);
    assert_eq!(h.destroy(0, nr::DESTROY_CQ, cq0), Status::OK);
    assert_eq!(h.destroy(0, nr::DEALLOC_PD, pd0), Status::OK);
    assert!(h.p.order_violations.is_empty());
}

#[test]
fn objects_in_use_cannot_be_destroyed() {
    let mut h = Harness::new();
    let pd = h.pd(0, 0);
    let (area, _) = h.d.layout().buf_area(0).unwrap();
    let mr = h.mr(0, pd, area, 8192, access::LOCAL_WRITE).unwrap();
    assert_eq!(mr.lkey >> 8, h.p.log.len() as u32 + 100);
    let cq = h.cq(0, 0, 16).unwrap().cq_handle;
    let qp = h.qp(0, pd, cq, cq, 0).unwrap();
    assert_eq!(h.destroy(0, nr::DEALLOC_PD, pd), Status::EBUSY);
    assert_eq!(h.destroy(0, nr::DESTROY_CQ, cq), Status::EBUSY);
    assert_eq!(h.destroy(0, nr::DESTROY_QP, qp.qp_handle), Status::OK);
    assert_eq!(h.destroy(0, nr::DESTROY_CQ, cq), Status::OK);
    assert_eq!(h.destroy(0, nr::DEALLOC_PD, pd), Status::EBUSY);
    assert_eq!(h.destroy(0, nr::DEREG_MR, mr.mr_handle), Status::OK);
    assert_eq!(h.destroy(0, nr::DEALLOC_PD, pd), Status::OK);
    assert!(h.p.live.is_empty());
    // A provider failure leaves the object in place, still owned.
    let pd = h.pd(0, 0);
    h.p.fail = Some(("dealloc_pd", Status::EIO));
    assert_eq!(h.destroy(0, nr::DEALLOC_PD, pd), Status::EIO);
    h.p.fail = None;
    assert_eq!(h.destroy(0, nr::DEALLOC_PD, pd), Status::OK);
}

/// ABI 1.6: RESIZE_SRQ places a ring of the new size (the next power of
/// two, entries of the old size) for the provider to move the SRQ onto and
/// gives the old ring's range back; a refusal gives the new one back and
/// leaves the SRQ on its ring.
#[test]
fn resize_srq_moves_the_ring_and_gives_the_old_one_back() {
    let mut h = Harness::new();
    let pd = h.pd(0, 0);
    let before = h.d.queue_free(0).unwrap();
    let req = CreateSrqReq { pd_handle: pd, max_wr: 8, max_sge: 2, ..Default::default() };
    let srq: CreateSrqResp = h.cmd(0, nr::CREATE_SRQ, req).unwrap();
    let created = h.d.queue_free(0).unwrap();
    let resize = |max_wr| ResizeSrqReq { srq_handle: srq.srq_handle, max_wr };
    let r: ResizeSrqResp = h.cmd(0, nr::RESIZE_SRQ, resize(20)).unwrap();
    assert_eq!((r.max_wr, r.ring.entries, r.ring.entry_size), (32, 32, srq.ring.entry_size));
    assert_ne!(r.ring.off, srq.ring.off);
    let (qo, ql) = h.d.layout().queue_area(0).unwrap();
    assert!(range_within(r.ring.off, RingPlacement::bytes(32, r.ring.entry_size).unwrap(), qo, ql));
    let grown = h.d.queue_free(0).unwrap();
    assert!(grown < created, "the bigger ring took more than the old one gave back");
    let id = h.p.live.keys().find(|(k, _)| *k == ObjKind::Srq).map(|(_, id)| *id).unwrap();
    assert_eq!(h.p.log.last(), Some(&alloc::format!("resize_srq {id} 32")));
    // Refusals: the provider's, and a size of no WQEs; neither keeps a ring.
    h.p.fail = Some(("resize_srq", Status::EINVAL));
    assert_eq!(h.cmd::<_, ResizeSrqResp>(0, nr::RESIZE_SRQ, resize(64)).unwrap_err(), Status::EINVAL);
    h.p.fail = None;
    assert_eq!(h.cmd::<_, ResizeSrqResp>(0, nr::RESIZE_SRQ, resize(0)).unwrap_err(), Status::EINVAL);
    assert_eq!(h.d.queue_free(0), Some(grown));
    // Another context cannot resize it; destroying it gives the new ring back.
    assert_eq!(h.cmd::<_, ResizeSrqResp>(1, nr::RESIZE_SRQ, resize(8)).unwrap_err(), Status::ENOENT);
    assert_eq!(h.destroy(0, nr::DESTROY_SRQ, srq.srq_handle), Status::OK);
    assert_eq!(h.d.queue_free(0), Some(before));
}

/// ABI 1.6: MODIFY_QP carries the alternate path after the attributes. A
/// 1.5 host's shorter request is still taken, its alternate path read as
/// zeros; a 1.6 request's reaches the provider; one shorter than 1.5's, or
/// longer with bytes set past 1.6's, is refused.
#[test]
fn modify_qp_takes_the_alternate_path_and_a_1_5_request() {
    let mut h = Harness::new();
    let pd = h.pd(0, 0);
    let cq = h.cq(0, 0, 8).unwrap().cq_handle;
    let qp = h.qp(0, pd, cq, cq, 0).unwrap().qp_handle;
    let id = h.p.live.keys().find(|(k, _)| *k == ObjKind::Qp).map(|(_, id)| *id).unwrap();
    let alt = AltPath { alt_port_num: 1, alt_timeout: 14, ..Default::default() };
    let req = ModifyQpReq { qp_handle: qp, attr_mask: qp_attr_mask::ALT_PATH, attr: QpAttr::default(), alt };
    assert_eq!(h.cmd::<_, Empty>(0, nr::MODIFY_QP, req), Ok(Empty {}));
    assert_eq!(h.p.log.last(), Some(&alloc::format!("modify_qp {id} {:#x} alt_port 1", qp_attr_mask::ALT_PATH)));
    let mut bytes = vec![0u8; ModifyQpReq::SIZE];
    req.encode(&mut bytes).unwrap();
    let send = |h: &mut Harness, payload: &[u8]| {
        let mut b = vec![0u8; HEADER_SIZE + payload.len()];
        CmdHeader { cmd: nr::MODIFY_QP, len: payload.len() as u16, ctx: 0, seq: 9, ..Default::default() }
            .encode(&mut b)
            .unwrap();
        b[HEADER_SIZE..].copy_from_slice(payload);
        Status(h.raw(0, &b).0.status)
    };
    assert_eq!(send(&mut h, &bytes[..MODIFY_QP_REQ_1_5]), Status::OK);
    assert_eq!(h.p.log.last(), Some(&alloc::format!("modify_qp {id} {:#x} alt_port 0", qp_attr_mask::ALT_PATH)));
    assert_eq!(send(&mut h, &bytes[..MODIFY_QP_REQ_1_5 - 4]), Status::EMSGSIZE);
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0, 0, 0, 1]);
    assert_eq!(send(&mut h, &longer), Status::EMSGSIZE);
}

/// A context with one of everything, some objects used by several others.
fn populate(h: &mut Harness, ctx: u32) -> usize {
    let pd = h.pd(ctx, 0);
    let (area, _) = h.d.layout().buf_area(ctx).unwrap();
    h.mr(ctx, pd, area, 4096, access::LOCAL_WRITE | access::REMOTE_WRITE).unwrap();
    h.mr(ctx, pd, area + 4096, 4096, 0).unwrap();
    let scq = h.cq(ctx, 0, 8).unwrap().cq_handle;
    let rcq = h.cq(ctx, 0, 8).unwrap().cq_handle;
    let srq: CreateSrqResp = h
        .cmd(ctx, nr::CREATE_SRQ, CreateSrqReq { pd_handle: pd, max_wr: 8, max_sge: 2, ..Default::default() })
        .unwrap();
    h.qp(ctx, pd, scq, rcq, srq.srq_handle).unwrap();
    h.qp(ctx, pd, scq, scq, 0).unwrap();
    let _: HandleResp = h.cmd(ctx, nr::CREATE_AH, CreateAhReq { pd_handle: pd, ..Default::default() }).unwrap();
    h.cm_id(ctx, 0x77);
    10
}

#[test]
fn detach_destroys_in_dependency_order() {
    let mut h = Harness::new();
    let n0 = populate(&mut h, 0);
    populate(&mut h, 1);
    let before = h.p.log.len();
    let report = h.d.detach(&mut h.p, 0);
    assert_eq!(report.total() as usize, n0);
    assert_eq!(report.destroyed, [2, 1, 1, 2, 2, 1, 1, 0]);
    assert_eq!(report.provider_errors, 0);
    // The fake saw nothing destroyed while something used it.
    assert!(h.p.order_violations.is_empty(), "{:?}", h.p.order_violations);
    let rank = |l: &str| {
        ["cm_destroy_id", "destroy_qp", "destroy_ah", "destroy_srq", "dereg_mr", "destroy_cq", "dealloc_pd"]
            .iter()
            .position(|p| l.starts_with(p))
            .unwrap()
    };
    let ranks: Vec<usize> = h.p.log[before..].iter().map(|l| rank(l)).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");
    // Context 1 is untouched; context 0 is gone.
    assert_eq!(h.d.count(Some(1), ObjKind::Qp), 2);
    assert_eq!(h.d.count(Some(0), ObjKind::Pd), 0);
    assert_eq!(h.cmd::<_, Empty>(0, nr::NOP, Empty {}), Err(Status::EPERM));
    // Reattached, the context has its whole queue area again: as many CQs
    // fit as in a context never used.
    h.d.attach(0).unwrap();
    h.d.attach(2).unwrap();
    let fill = |h: &mut Harness, ctx| (0..).take_while(|_| h.cq(ctx, 0, 64).is_ok()).count();
    let fresh = fill(&mut h, 2);
    assert!(fresh > 5);
    assert_eq!(fill(&mut h, 0), fresh);
    h.d.detach(&mut h.p, 2);
    h.d.detach(&mut h.p, 1);
    h.d.detach(&mut h.p, 0);
    assert!(h.p.live.is_empty());
}

#[test]
fn teardown_goes_on_when_the_provider_fails() {
    let mut h = Harness::new();
    populate(&mut h, 0);
    h.p.fail = Some(("destroy_cq", Status::EIO));
    let r = h.d.detach(&mut h.p, 0);
    assert_eq!((r.total(), r.provider_errors), (10, 2));
    assert_eq!(h.d.count(None, ObjKind::Cq), 0);
}

#[test]
fn rings_are_placed_in_the_context_queue_area_and_zeroed() {
    let mut h = Harness::new();
    let (qoff, qlen) = h.d.layout().queue_area(1).unwrap();
    // Garbage where the rings will go: placement must zero the indices.
    for off in (qoff..qoff + 4096).step_by(4) {
        h.mem.store_u32_release(off as usize, 0xdead_beef).unwrap();
    }
    let pd = h.pd(1, 0);
    let cq = h.cq(1, 0, 5).unwrap();
    assert_eq!((cq.cqe, cq.ring.entries, cq.ring.entry_size), (8, 8, CQE_SIZE));
    let qp = h.qp(1, pd, cq.cq_handle, cq.cq_handle, 0).unwrap();
    // The QPN is the provider's (the fake's is its id + 0x10), not the handle.
    assert!(qp.qp_num > 0x10 && qp.qp_num != qp.qp_handle);
    assert_eq!((qp.cap.max_send_wr, qp.cap.max_recv_wr, qp.sq.entries, qp.rq.entries), (16, 8, 16, 8));
    // 2 SGEs or 64 inline bytes round up to a 192-byte entry: 112 bytes of
    // body, which the host may use as 7 SGEs or 112 inline bytes.
    assert_eq!((qp.sq.entry_size, qp.cap.max_send_sge, qp.cap.max_inline_data), (192, 7, 112));
    assert_eq!(qp.rq.entry_size, 32);
    let rings = [cq.ring, qp.sq, qp.rq];
    for r in rings {
        let len = RingPlacement::bytes(r.entries, r.entry_size).unwrap();
        assert!(range_within(r.off, len, qoff, qlen), "{r:?}");
        assert_eq!(h.mem.load_u32_acquire(r.off as usize + RING_PRODUCER), Ok(0));
        assert_eq!(h.mem.load_u32_acquire(r.off as usize + RING_CONSUMER), Ok(0));
    }
    for (i, a) in rings.iter().enumerate() {
        for b in &rings[i + 1..] {
            let la = RingPlacement::bytes(a.entries, a.entry_size).unwrap();
            let lb = RingPlacement::bytes(b.entries, b.entry_size).unwrap();
            assert!(a.off + la <= b.off || b.off + lb <= a.off, "{a:?} overlaps {b:?}");
        }
    }
    // Too large for the area: refused, nothing leaked, provider not called.
    let calls = h.p.calls("create_cq");
    assert_eq!(h.cq(1, 0, 1 << 19).map(|_| ()), Err(Status::ENOMEM));
    assert_eq!(h.cq(1, 0, (1 << 20) + 1).map(|_| ()), Err(Status::EINVAL));
    assert_eq!(h.cq(1, 0, 0).map(|_| ()), Err(Status::EINVAL));
    assert_eq!(h.p.calls("create_cq"), calls);
    // A provider that keeps failing does not leak queue memory.
    h.p.fail = Some(("create_qp", Status::ENOMEM));
    for _ in 0..1000 {
        assert_eq!(h.qp(1, pd, cq.cq_handle, cq.cq_handle, 0).map(|_| ()), Err(Status::ENOMEM));
    }
    h.p.fail = None;
    assert!(h.qp(1, pd, cq.cq_handle, cq.cq_handle, 0).is_ok());
    // Bad capacities.
    let bad = CreateQpReq {
        pd_handle: pd,
        send_cq_handle: cq.cq_handle,
        recv_cq_handle: cq.cq_handle,
        qp_type: 9,
        ..Default::default()
    };
    assert_eq!(h.cmd::<_, CreateQpResp>(1, nr::CREATE_QP, bad), Err(Status::EINVAL));
    let bad = CreateQpReq { qp_type: qp_type::UD, cap: QpCap { max_send_sge: 33, ..Default::default() }, ..bad };
    assert_eq!(h.cmd::<_, CreateQpResp>(1, nr::CREATE_QP, bad), Err(Status::EINVAL));
}

#[test]
fn memory_registration_must_lie_in_the_context_buffer_area() {
    let mut h = Harness::new();
    let pd = h.pd(0, 0);
    let (area, len) = h.d.layout().buf_area(0).unwrap();
    let (other, _) = h.d.layout().buf_area(1).unwrap();
    let (q, _) = h.d.layout().queue_area(0).unwrap();
    assert!(h.mr(0, pd, area, len, access::LOCAL_WRITE).is_ok());
    assert_eq!(h.mr(0, pd, area, len + 1, 0).map(|_| ()), Err(Status::EFAULT));
    assert_eq!(h.mr(0, pd, other, 4096, 0).map(|_| ()), Err(Status::EFAULT));
    assert_eq!(h.mr(0, pd, q, 64, 0).map(|_| ()), Err(Status::EFAULT));
    assert_eq!(h.mr(0, pd, 0, 64, 0).map(|_| ()), Err(Status::EFAULT));
    assert_eq!(h.mr(0, pd, u64::MAX - 10, 100, 0).map(|_| ()), Err(Status::EFAULT));
    assert_eq!(h.mr(0, pd, area, 0, 0).map(|_| ()), Err(Status::EINVAL));
    assert_eq!(h.mr(0, pd, area, 64, access::REMOTE_WRITE).map(|_| ()), Err(Status::EINVAL));
    assert_eq!(h.mr(0, pd, area, 64, 1 << 20).map(|_| ()), Err(Status::EINVAL));
}

#[test]
fn objects_of_one_qp_must_share_a_device() {
    let mut h = Harness::new();
    let pd = h.pd(0, 0);
    let cq0 = h.cq(0, 0, 4).unwrap().cq_handle;
    let cq1 = h.cq(0, 1, 4).unwrap().cq_handle;
    assert_eq!(h.qp(0, pd, cq0, cq1, 0).map(|_| ()), Err(Status::EINVAL));
    assert!(h.qp(0, pd, cq0, cq0, 0).is_ok());
}

#[test]
fn async_events_go_to_the_owner() {
    let mut h = Harness::with_limits(Limits { events_per_ctx: 3, ..Default::default() });
    let pd = h.pd(0, 0);
    let cq = h.cq(0, 0, 4).unwrap().cq_handle;
    let qp = h.qp(0, pd, cq, cq, 0).unwrap();
    assert_eq!(h.cmd::<_, AsyncEvent>(0, nr::GET_ASYNC_EVENT, Empty {}), Err(Status::EAGAIN));
    let id = h.p.live.keys().find(|(k, _)| *k == ObjKind::Qp).map(|(_, id)| *id).unwrap();
    h.d.post_event(EventSource::Object(ObjKind::Qp, id), event_type::QP_FATAL);
    h.d.post_event(EventSource::Port { dev_index: 0, port: 1 }, event_type::PORT_ACTIVE);
    // An event about an object nobody owns is dropped quietly.
    h.d.post_event(EventSource::Object(ObjKind::Cq, 9999), event_type::CQ_ERR);
    let e: AsyncEvent = h.cmd(0, nr::GET_ASYNC_EVENT, Empty {}).unwrap();
    assert_eq!((e.event_type, e.handle, e.element), (event_type::QP_FATAL, qp.qp_handle, 0x9));
    let e: AsyncEvent = h.cmd(0, nr::GET_ASYNC_EVENT, Empty {}).unwrap();
    assert_eq!((e.event_type, e.element), (event_type::PORT_ACTIVE, 1));
    let e: AsyncEvent = h.cmd(1, nr::GET_ASYNC_EVENT, Empty {}).unwrap();
    assert_eq!(e.event_type, event_type::PORT_ACTIVE);
    assert_eq!(h.cmd::<_, AsyncEvent>(1, nr::GET_ASYNC_EVENT, Empty {}), Err(Status::EAGAIN));
    // Overflow is counted and reported with the next event delivered.
    for _ in 0..5 {
        h.d.post_event(EventSource::Port { dev_index: 0, port: 1 }, event_type::PORT_ERR);
    }
    for _ in 0..3 {
        let _: AsyncEvent = h.cmd(1, nr::GET_ASYNC_EVENT, Empty {}).unwrap();
    }
    h.d.post_event(EventSource::Port { dev_index: 0, port: 1 }, event_type::GID_CHANGE);
    let e: AsyncEvent = h.cmd(1, nr::GET_ASYNC_EVENT, Empty {}).unwrap();
    assert_eq!((e.event_type, e.dropped), (event_type::GID_CHANGE, 2));
    let d: DestroyResp = h.cmd(0, nr::DESTROY_QP, HandleReq { handle: qp.qp_handle, reserved: 0 }).unwrap();
    assert_eq!(d.events_reported, 1);
}

#[test]
fn limits_and_provider_id_reuse() {
    let mut h = Harness::with_limits(Limits { objects_per_ctx: 3, ..Default::default() });
    for _ in 0..3 {
        h.pd(0, 0);
    }
    assert_eq!(h.cmd::<_, HandleResp>(0, nr::ALLOC_PD, DevReq::default()), Err(Status::ENOMEM));
    // Another context has its own quota.
    h.pd(1, 0);
    // A provider handing out an id that is live already is refused (EIO),
    // and the live object is not hurt.
    h.p.force_id = h.p.live.keys().next().map(|k| k.1);
    assert_eq!(h.cmd::<_, HandleResp>(1, nr::ALLOC_PD, DevReq::default()), Err(Status::EIO));
    assert_eq!(h.d.count(None, ObjKind::Pd), 4);
}

// ---------------------------------------------------------------------------
// Firmware and host, end to end over the fake region.
// ---------------------------------------------------------------------------

fn appliance() -> (HeapShm, Fw) {
    let mem = HeapShm::new(REGION);
    let layout = Layout::new(REGION as u64, small_params()).unwrap();
    let fw = Fw::new(&mem, layout, Limits::default(), 16);
    (mem, fw)
}

/// Run one command through the rings, ticking the firmware while waiting.
fn call<Req: Wire, Resp: Wire>(
    mem: &HeapShm,
    fw: &mut Fw,
    host: &mut HostContext,
    nr: u16,
    req: Req,
) -> Result<Resp, HostError> {
    let mut ticks = 0;
    host.call(mem, nr, &req, || {
        ticks += 1;
        fw.tick(mem).unwrap();
        ticks < 100
    })
}

fn slot_state(mem: &HeapShm, fw: &Fw, ctx: u32) -> ContextSlot {
    fw.read_slot(mem, ctx).unwrap()
}

/// ABI 1.3: ALLOC_MR, MAP_MR_SG (the page list read from the buffer area and
/// checked page by page), ALLOC_MW, and a teardown that frees windows first.
#[test]
fn fast_register_and_window_commands() {
    let (mem, mut fw) = appliance();
    let mut host = HostContext::attach(&mem, 7).unwrap();
    let pd: HandleResp = call(&mem, &mut fw, &mut host, nr::ALLOC_PD, DevReq::default()).unwrap();
    let mr: RegMrResp =
        call(&mem, &mut fw, &mut host, nr::ALLOC_MR, AllocMrReq { pd_handle: pd.handle, max_num_sg: 4 }).unwrap();
    assert_eq!(mr.lkey, mr.rkey);
    let too_many = AllocMrReq { pd_handle: pd.handle, max_num_sg: 513 };
    assert_eq!(
        call::<_, RegMrResp>(&mem, &mut fw, &mut host, nr::ALLOC_MR, too_many),
        Err(HostError::Status(Status::EINVAL))
    );
    let (buf, len) = host.buf_area();
    // The list at the start of the buffer area, two pages after it.
    let pages = [buf + 0x2000, buf + 0x1000];
    for (i, p) in pages.iter().enumerate() {
        mem.write(buf as usize + i * 8, &p.to_le_bytes()).unwrap();
    }
    let map = MapMrSgReq {
        mr_handle: mr.mr_handle,
        num_pages: 2,
        iova: 0x1000,
        length: 0x2000,
        page_size: 4096,
        list_off: buf,
    };
    let _: Empty = call(&mem, &mut fw, &mut host, nr::MAP_MR_SG, map).unwrap();
    // A page outside the buffer area, a list outside it, an odd page size.
    mem.write(buf as usize + 8, &(buf + len).to_le_bytes()).unwrap();
    assert_eq!(call::<_, Empty>(&mem, &mut fw, &mut host, nr::MAP_MR_SG, map), Err(HostError::Status(Status::EFAULT)));
    let off_list = MapMrSgReq { list_off: buf + len - 8, ..map };
    assert_eq!(
        call::<_, Empty>(&mem, &mut fw, &mut host, nr::MAP_MR_SG, off_list),
        Err(HostError::Status(Status::EFAULT))
    );
    let odd = MapMrSgReq { page_size: 3000, ..map };
    assert_eq!(call::<_, Empty>(&mem, &mut fw, &mut host, nr::MAP_MR_SG, odd), Err(HostError::Status(Status::EINVAL)));
    let mw: AllocMwResp =
        call(&mem, &mut fw, &mut host, nr::ALLOC_MW, AllocMwReq { pd_handle: pd.handle, mw_type: mw_type::TYPE_2 })
            .unwrap();
    assert_ne!(mw.rkey, 0);
    let bad = AllocMwReq { pd_handle: pd.handle, mw_type: 3 };
    assert_eq!(
        call::<_, AllocMwResp>(&mem, &mut fw, &mut host, nr::ALLOC_MW, bad),
        Err(HostError::Status(Status::EINVAL))
    );
    assert_eq!(fw.dispatcher().count(None, ObjKind::Mw), 1);
    // Multicast names a QP of the context: a PD handle is no QP.
    let join = McastReq { qp_handle: pd.handle, mlid: 0, reserved: 0, gid: [0xff; 16] };
    assert_eq!(
        call::<_, Empty>(&mem, &mut fw, &mut host, nr::ATTACH_MCAST, join),
        Err(HostError::Status(Status::ENOENT))
    );
    // The PD is in use by both.
    let dealloc = HandleReq { handle: pd.handle, reserved: 0 };
    assert_eq!(
        call::<_, Empty>(&mem, &mut fw, &mut host, nr::DEALLOC_PD, dealloc),
        Err(HostError::Status(Status::EBUSY))
    );
    host.detach(&mem).unwrap();
    let r = fw.tick(&mem).unwrap();
    assert!(
        matches!(r.events[..], [SlotEvent::Reclaimed { report, .. }] if report.destroyed[ObjKind::Mw as usize] == 1 && report.total() == 3)
    );
}

#[test]
fn attach_command_detach_round_trip() {
    let (mem, mut fw) = appliance();
    assert!(!fw.fw.any_attached());
    let mut host = HostContext::attach(&mem, 4242).unwrap();
    assert_eq!(host.ctx(), 0);
    assert_eq!(slot_state(&mem, &fw, 0).host_pid, 4242);
    // The firmware counts it attached from the tick that sees its claim.
    assert!(!fw.fw.any_attached());
    let _: Empty = call(&mem, &mut fw, &mut host, nr::NOP, Empty {}).unwrap();
    assert!(fw.fw.any_attached());
    let pd: HandleResp = call(&mem, &mut fw, &mut host, nr::ALLOC_PD, DevReq::default()).unwrap();
    let (buf, _) = host.buf_area();
    let _: RegMrResp = call(
        &mem,
        &mut fw,
        &mut host,
        nr::REG_MR,
        RegMrReq { start: buf, length: 4096, pd_handle: pd.handle, access: 0, iova: buf },
    )
    .unwrap();
    assert_eq!(
        call::<_, RegMrResp>(
            &mem,
            &mut fw,
            &mut host,
            nr::REG_MR,
            RegMrReq { start: 0, length: 1, pd_handle: pd.handle, access: 0, iova: 0 }
        ),
        Err(HostError::Status(Status::EFAULT))
    );
    assert_eq!(fw.dispatcher().count(None, ObjKind::Mr), 1);
    host.detach(&mem).unwrap();
    let r = fw.tick(&mem).unwrap();
    assert!(
        matches!(r.events[..], [SlotEvent::Reclaimed { ctx: 0, reason: reclaim_reason::DETACHED, report }] if report.total() == 2)
    );
    assert!(!fw.fw.any_attached());
    let s = slot_state(&mem, &fw, 0);
    assert_eq!(
        (s.state, s.generation, s.reclaim_reason, s.host_pid),
        (ctx_state::FREE, 1, reclaim_reason::DETACHED, 0)
    );
    assert!(fw.p.live.is_empty());
    // The slot and its rings are usable again from index 0.
    let mut host = HostContext::attach(&mem, 1).unwrap();
    assert_eq!(host.ctx(), 0);
    let _: Empty = call(&mem, &mut fw, &mut host, nr::NOP, Empty {}).unwrap();
}

#[test]
fn a_dead_host_is_reclaimed_when_its_lease_expires() {
    let (mem, mut fw) = appliance();
    let mut live = HostContext::attach(&mem, 1).unwrap();
    let mut dead = HostContext::attach(&mem, 2).unwrap();
    assert_eq!((live.ctx(), dead.ctx()), (0, 1));
    let pd: HandleResp = call(&mem, &mut fw, &mut dead, nr::ALLOC_PD, DevReq::default()).unwrap();
    let cq: CreateCqResp =
        call(&mem, &mut fw, &mut dead, nr::CREATE_CQ, CreateCqReq { cqe: 4, ..Default::default() }).unwrap();
    let qp = CreateQpReq {
        pd_handle: pd.handle,
        send_cq_handle: cq.cq_handle,
        recv_cq_handle: cq.cq_handle,
        qp_type: qp_type::RC,
        ..Default::default()
    };
    let _: CreateQpResp = call(&mem, &mut fw, &mut dead, nr::CREATE_QP, qp).unwrap();
    let _: HandleResp = call(&mem, &mut fw, &mut live, nr::ALLOC_PD, DevReq::default()).unwrap();
    // `dead` renews once more, then stops; `live` keeps its lease.
    dead.heartbeat(&mem).unwrap();
    let mut reclaimed = None;
    for beat in 0..30 {
        live.heartbeat(&mem).unwrap();
        for e in fw.tick(&mem).unwrap().events {
            if let SlotEvent::Reclaimed { ctx, reason, report } = e {
                reclaimed = Some((beat, ctx, reason, report.total()));
            }
        }
    }
    let (beat, ctx, reason, total) = reclaimed.unwrap();
    // Seen to change at loop beat 0; lease_beats = 10; reclaimed at the
    // first beat more than 10 later.
    assert_eq!(beat, 11);
    assert_eq!((ctx, reason, total), (1, reclaim_reason::LEASE_EXPIRED, 3));
    assert_eq!(fw.dispatcher().count(Some(1), ObjKind::Pd), 0);
    assert_eq!(fw.dispatcher().count(Some(0), ObjKind::Pd), 1);
    assert!(fw.p.order_violations.is_empty());
    // The zombie finds out.
    assert_eq!(dead.heartbeat(&mem), Err(HostError::Lost));
    assert_eq!(call::<_, Empty>(&mem, &mut fw, &mut dead, nr::NOP, Empty {}), Err(HostError::Lost));
    assert_eq!(slot_state(&mem, &fw, 1).reclaim_reason, reclaim_reason::LEASE_EXPIRED);
}

#[test]
fn all_slots_taken() {
    let (mem, _fw) = appliance();
    let hosts: Vec<_> = (0..3).map(|i| HostContext::attach(&mem, i).unwrap()).collect();
    assert_eq!(hosts.iter().map(|h| h.ctx()).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(matches!(HostContext::attach(&mem, 9), Err(HostError::NoFreeContext)));
}

#[test]
fn a_host_not_ready_region_is_refused() {
    let mem = HeapShm::new(REGION);
    assert!(matches!(HostContext::attach(&mem, 1), Err(HostError::Layout(LayoutError::NotReady(0)))));
}

#[test]
fn protocol_violations_reclaim_the_context() {
    let (mem, mut fw) = appliance();
    let layout = *fw.layout();
    let mut host = HostContext::attach(&mem, 1).unwrap();
    let _: HandleResp = call(&mem, &mut fw, &mut host, nr::ALLOC_PD, DevReq::default()).unwrap();
    // The host publishes a command index far beyond the ring's capacity.
    let cmd = layout.cmd_ring(0).unwrap();
    mem.store_u32_release(cmd.off as usize + RING_PRODUCER, 1000).unwrap();
    let r = fw.tick(&mem).unwrap();
    assert!(matches!(r.events[..], [SlotEvent::Reclaimed { ctx: 0, reason: reclaim_reason::PROTOCOL, .. }]));
    assert!(fw.p.live.is_empty());
    assert_eq!(mem.load_u32_acquire(cmd.off as usize + RING_PRODUCER), Ok(0));

    // The host frees response slots that were never produced.
    let mut host = HostContext::attach(&mem, 1).unwrap();
    let resp = layout.resp_ring(0).unwrap();
    host.submit(&mem, nr::NOP, &Empty {}).unwrap();
    mem.store_u32_release(resp.off as usize + RING_CONSUMER, 7).unwrap();
    let r = fw.tick(&mem).unwrap();
    assert!(matches!(
        r.events[..],
        [SlotEvent::Attached { ctx: 0 }, SlotEvent::Reclaimed { reason: reclaim_reason::PROTOCOL, .. }]
    ));

    // A slot state that is no state.
    let _host = HostContext::attach(&mem, 1).unwrap();
    fw.tick(&mem).unwrap();
    mem.store_u32_release(layout.slot_off(0).unwrap() + SLOT_STATE, 77).unwrap();
    let r = fw.tick(&mem).unwrap();
    assert!(matches!(r.events[..], [SlotEvent::Reclaimed { reason: reclaim_reason::PROTOCOL, .. }]));
    assert_eq!(slot_state(&mem, &fw, 0).state, ctx_state::FREE);
}

#[test]
fn a_host_that_does_not_read_responses_only_stalls_itself() {
    let (mem, mut fw) = appliance();
    let mut host = HostContext::attach(&mem, 1).unwrap();
    let mut other = HostContext::attach(&mem, 2).unwrap();
    // 8 command slots, 4 response slots.
    for _ in 0..8 {
        host.submit(&mem, nr::NOP, &Empty {}).unwrap();
    }
    assert!(matches!(host.submit(&mem, nr::NOP, &Empty {}), Err(HostError::Ring(crate::ring::RingError::Full))));
    let r = fw.tick(&mem).unwrap();
    assert_eq!(r.commands, 4);
    assert_eq!(fw.tick(&mem).unwrap().commands, 0);
    // Another context is served meanwhile.
    let _: Empty = call(&mem, &mut fw, &mut other, nr::NOP, Empty {}).unwrap();
    // Reading responses lets the rest through, in order.
    let mut out = [0u8; 256];
    let mut seqs = Vec::new();
    for _ in 0..4 {
        seqs.push(host.poll_response(&mem, &mut out).unwrap().unwrap().seq);
    }
    assert_eq!(fw.tick(&mem).unwrap().commands, 4);
    while let Some(h) = host.poll_response(&mem, &mut out).unwrap() {
        seqs.push(h.seq);
    }
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
}

#[test]
fn failed_firmware_is_visible_to_hosts() {
    let (mem, mut fw) = appliance();
    let _h = HostContext::attach(&mem, 1).unwrap();
    fw.tick(&mem).unwrap();
    fw.fail(&mem, Status::EIO).unwrap();
    assert!(matches!(Layout::read(&mem), Err(LayoutError::NotReady(fw_state::FAILED))));
    assert_eq!(mem.load_u32_acquire(SB_FAIL_CODE), Ok(5));
}

// ---------------------------------------------------------------------------
// RDMA CM.
// ---------------------------------------------------------------------------

#[test]
fn cm_commands_are_checked_before_the_provider() {
    let mut h = Harness::new();
    let id = h.cm_id(0, 0x10);
    let other = h.cm_id(1, 0x20);
    let bad_ps = CmCreateIdReq { uid: 1, ps: 0x4242, qp_type: qp_type::RC, ..Default::default() };
    assert_eq!(h.cmd::<_, HandleResp>(0, nr::CM_CREATE_ID, bad_ps), Err(Status::EINVAL));
    let bad_type = CmCreateIdReq { uid: 1, ps: port_space::UDP, qp_type: 9, ..Default::default() };
    assert_eq!(h.cmd::<_, HandleResp>(0, nr::CM_CREATE_ID, bad_type), Err(Status::EINVAL));
    let calls = h.p.log.len();
    // Another context's id, or another kind's handle, is nothing.
    let bind = |handle, addr| CmBindReq { handle, reserved: 0, addr };
    let a = CmSockAddr::ipv4([10, 0, 0, 1], 7174);
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_BIND, bind(other, a)), Err(Status::ENOENT));
    let pd = h.pd(0, 0);
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_BIND, bind(pd, a)), Err(Status::ENOENT));
    assert_eq!(h.destroy(0, nr::DEALLOC_PD, pd), Status::OK);
    // Addresses need a family; a source address the destination's.
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_BIND, bind(id, CmSockAddr::default())), Err(Status::EINVAL));
    let v6 = CmSockAddr::ipv6([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 0, 2);
    let resolve = |src, dst| CmResolveAddrReq { handle: id, timeout_ms: 2000, src, dst };
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_RESOLVE_ADDR, resolve(v6, a)), Err(Status::EINVAL));
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_RESOLVE_ADDR, resolve(a, CmSockAddr::default())), Err(Status::EINVAL));
    // Private data longer than its field.
    let mut connect = CmConnectReq { handle: id, ..Default::default() };
    connect.param.private_data_len = 197;
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_CONNECT, connect), Err(Status::EINVAL));
    let reject = CmRejectReq { handle: id, private_data_len: 149, ..Default::default() };
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_REJECT, reject), Err(Status::EINVAL));
    let init = CmInitQpAttrReq { handle: id, qp_state: qp_state::SQD };
    assert_eq!(h.cmd::<_, CmInitQpAttrResp>(0, nr::CM_INIT_QP_ATTR, init), Err(Status::EINVAL));
    assert_eq!(h.p.log.len(), calls + 2, "only alloc_pd and dealloc_pd reached the provider: {:?}", h.p.log);

    // Good requests reach it.
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_BIND, bind(id, a)), Ok(Empty {}));
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_RESOLVE_ADDR, resolve(CmSockAddr::default(), a)), Ok(Empty {}));
    let rr = CmResolveRouteReq { handle: id, timeout_ms: 2000 };
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_RESOLVE_ROUTE, rr), Ok(Empty {}));
    let route: CmRoute = h.cmd(0, nr::CM_QUERY_ROUTE, HandleReq { handle: id, reserved: 0 }).unwrap();
    assert_eq!((route.port_num, route.num_paths), (1, 1));
    connect.param = CmConnParam::default().with_private(&[7; REQ_PRIVATE_DATA]).unwrap();
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_CONNECT, connect), Ok(Empty {}));
    assert!(h.p.log.iter().any(|l| l == &alloc::format!("cm_connect {} 56", h.p.last_cm_id().unwrap() - 1)));
    let init = CmInitQpAttrReq { handle: id, qp_state: qp_state::RTR };
    let r: CmInitQpAttrResp = h.cmd(0, nr::CM_INIT_QP_ATTR, init).unwrap();
    assert_eq!((r.attr.qp_state, r.attr_mask & qp_attr_mask::STATE), (qp_state::RTR, qp_attr_mask::STATE));
    // A provider that answers mask bits the ABI does not know is refused.
    h.p.cm_init_mask = 1 << 30;
    assert_eq!(h.cmd::<_, CmInitQpAttrResp>(0, nr::CM_INIT_QP_ATTR, init), Err(Status::EIO));
    let d: DestroyResp = h.cmd(0, nr::CM_DESTROY_ID, HandleReq { handle: id, reserved: 0 }).unwrap();
    assert_eq!(d.events_reported, 3);
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_DISCONNECT, HandleReq { handle: id, reserved: 0 }), Err(Status::ENOENT));
    // CM ids are never counted as a device's resources.
    let rc: ResourceCounts = h.cmd(0, nr::QUERY_RESOURCES, DevReq { dev_index: 0, reserved: 0 }).unwrap();
    assert_eq!(rc.counts, [0; 6]);
}

#[test]
fn cm_events_become_handles_of_the_owner() {
    let mut h = Harness::new();
    assert_eq!(h.cmd::<_, CmEvent>(0, nr::CM_GET_EVENT, Empty {}), Err(Status::EAGAIN));
    let listen = h.cm_id(0, 0xAAAA);
    let listen_id = h.p.last_cm_id().unwrap();
    let theirs = h.cm_id(1, 0xBBBB);
    let theirs_id = h.p.last_cm_id().unwrap();
    let lr = CmListenReq { handle: listen, backlog: 4 };
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_LISTEN, lr), Ok(Empty {}));

    // A CONNECT_REQUEST: the new id is this context's handle, with the
    // listener's uid, and the peer's private data.
    let new_id = h.p.cm_request(0, listen_id, b"hi");
    let ev: CmEvent = h.cmd(0, nr::CM_GET_EVENT, Empty {}).unwrap();
    assert_eq!((ev.event, ev.uid), (cm_event::CONNECT_REQUEST, 0xAAAA));
    assert!(ev.handle != listen && ev.handle != 0);
    assert_eq!(ev.param.private(), Some(&b"hi"[..]));
    assert_eq!(h.d.count(Some(0), ObjKind::CmId), 2);
    // Context 1 cannot use it.
    let accept = CmAcceptReq { handle: ev.handle, uid: 0xCCCC, ..Default::default() };
    assert_eq!(h.cmd::<_, Empty>(1, nr::CM_ACCEPT, accept), Err(Status::ENOENT));
    // Accept names a new uid, which later events carry.
    assert_eq!(h.cmd::<_, Empty>(0, nr::CM_ACCEPT, accept), Ok(Empty {}));
    let est =
        CmEventOut { id: new_id, new_id: None, event: cm_event::ESTABLISHED, status: 0, param: Default::default() };
    h.p.cm_events.push_back((0, est));
    let ev2: CmEvent = h.cmd(0, nr::CM_GET_EVENT, Empty {}).unwrap();
    assert_eq!((ev2.event, ev2.handle, ev2.uid), (cm_event::ESTABLISHED, ev.handle, 0xCCCC));

    // Events about ids the context does not own are dropped, and a request
    // on such a listener has its new id destroyed (the provider rejects it).
    let stray =
        CmEventOut { id: theirs_id, new_id: None, event: cm_event::DISCONNECTED, status: 0, param: Default::default() };
    h.p.cm_events.push_back((0, stray));
    h.p.cm_events.push_back((0, CmEventOut { id: 9999, ..stray }));
    let orphan = h.p.cm_request(0, theirs_id, b"");
    // A lying private data length is cut to the field.
    let param = CmConnParam { private_data_len: 255, ..Default::default() };
    let rej = CmEventOut { id: listen_id, new_id: None, event: cm_event::REJECTED, status: 8, param };
    h.p.cm_events.push_back((0, rej));
    let ev3: CmEvent = h.cmd(0, nr::CM_GET_EVENT, Empty {}).unwrap();
    assert_eq!((ev3.event, ev3.status, ev3.param.private_data_len), (cm_event::REJECTED, 8, 196));
    assert!(!h.p.live.contains_key(&(ObjKind::CmId, orphan)));
    assert_eq!(h.cmd::<_, CmEvent>(0, nr::CM_GET_EVENT, Empty {}), Err(Status::EAGAIN));
    let _ = theirs;

    // A context at its object limit cannot take a request's id: destroyed.
    let mut h = Harness::with_limits(Limits { objects_per_ctx: 1, ..Default::default() });
    let _listen = h.cm_id(0, 1);
    let full = h.p.cm_request(0, h.p.last_cm_id().unwrap(), b"");
    assert_eq!(h.cmd::<_, CmEvent>(0, nr::CM_GET_EVENT, Empty {}), Err(Status::EAGAIN));
    assert!(!h.p.live.contains_key(&(ObjKind::CmId, full)));

    // A dead context's ids are destroyed (the provider's DREQ/REJ) first.
    let mut h = Harness::new();
    let listen = h.cm_id(0, 1);
    let _ = listen;
    h.p.cm_request(0, h.p.last_cm_id().unwrap(), b"");
    let _: CmEvent = h.cmd(0, nr::CM_GET_EVENT, Empty {}).unwrap();
    let report = h.d.detach(&mut h.p, 0);
    assert_eq!(report.destroyed[ObjKind::CmId as usize], 2);
    assert_eq!(h.p.calls("cm_destroy_id"), 2);
}

// ---------------------------------------------------------------------------
// Fuzzing.
// ---------------------------------------------------------------------------

/// Invariants that hold after any sequence of commands.
fn check_invariants(h: &Harness) {
    assert!(h.p.order_violations.is_empty(), "{:?}", h.p.order_violations);
    for kind in ObjKind::TEARDOWN_ORDER {
        let fake = h.p.live.keys().filter(|(k, _)| *k == kind).count();
        assert_eq!(h.d.count(None, kind), fake, "{kind:?}");
    }
}

fn any_command() -> impl Strategy<Value = Vec<u8>> {
    let nrs: Vec<u16> = table::TABLE.iter().map(|r| r.nr).chain([0, 7, 0x7f, 0xffff]).collect();
    (
        prop::sample::select(nrs),
        0u32..3,
        any::<u32>(),
        prop::collection::vec(any::<u8>(), 0..240),
        any::<bool>(),
        any::<u16>(),
    )
        .prop_map(|(nr, ctx, seq, payload, honest_len, len)| {
            let len = if honest_len { payload.len() as u16 } else { len };
            let mut b = vec![0u8; HEADER_SIZE];
            CmdHeader { cmd: nr, len, ctx, seq, ..Default::default() }.encode(&mut b).unwrap();
            b.extend_from_slice(&payload);
            b
        })
}

/// Requests whose handles are small numbers, so random commands do hit live
/// objects (handles start at 1).
fn small_handles(mut b: Vec<u8>) -> Vec<u8> {
    for w in b[HEADER_SIZE..].chunks_mut(4) {
        if w.len() == 4 && w[0] & 1 == 0 {
            w[1] = 0;
            w[2] = 0;
            w[3] = 0;
            w[0] %= 24;
        }
    }
    b
}

/// Cases of the one-command fuzzer: `FUZZ_CASES` (`make fuzz` gives 10
/// million), else 256.
fn fuzz_cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(256)
}

/// Cases of the command-sequence fuzzer: as many commands as the one-command
/// fuzzer has cases (a sequence averages 30), at least 256 sequences.
fn fuzz_sequence_cases() -> u32 {
    (fuzz_cases() / 30).max(256)
}

/// Cases of the ring-index fuzzer, a tenth (each case attaches a context
/// and ticks the firmware up to 5 times), at least 256.
fn fuzz_ring_cases() -> u32 {
    (fuzz_cases() / 10).max(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), ..ProptestConfig::default() })]

    #[test]
    fn fuzz_random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300), ctx in 0u32..4) {
        let mut h = Harness::new();
        populate(&mut h, 0);
        let mut resp = vec![0u8; 256];
        let n = h.d.handle(&h.mem, &mut h.p, ctx, &bytes, &mut resp);
        let hdr = CmdHeader::decode(&resp[..n]).unwrap();
        // Random bytes are refused, unless they happen to be a valid command
        // for this context, whose answer then has the command's size.
        if hdr.status == 0 {
            let spec = table::lookup(hdr.cmd).unwrap();
            prop_assert_eq!(usize::from(hdr.len), spec.resp_size);
            prop_assert_eq!(hdr.ctx, ctx);
        }
        check_invariants(&h);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_sequence_cases(), ..ProptestConfig::default() })]

    #[test]
    fn fuzz_command_sequences_keep_ownership_consistent(cmds in prop::collection::vec(any_command(), 1..60)) {
        let mut h = Harness::new();
        populate(&mut h, 0);
        populate(&mut h, 1);
        for c in cmds {
            let c = small_handles(c);
            let ctx = CmdHeader::decode(&c).unwrap().ctx;
            let (hdr, body) = h.raw(ctx, &c);
            if hdr.status == 0 {
                prop_assert_eq!(body.len(), table::lookup(hdr.cmd).unwrap().resp_size);
            }
            check_invariants(&h);
        }
        for ctx in 0..3 {
            h.d.detach(&mut h.p, ctx);
        }
        check_invariants(&h);
        prop_assert!(h.p.live.is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_ring_cases(), ..ProptestConfig::default() })]

    #[test]
    fn fuzz_ring_indices_and_slots(
        writes in prop::collection::vec((0usize..6, any::<u32>()), 0..12),
        slots in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..256), 0..8),
        ticks in 1usize..6,
    ) {
        let (mem, mut fw) = appliance();
        let layout = *fw.layout();
        let mut host = HostContext::attach(&mem, 1).unwrap();
        let _: HandleResp = call(&mem, &mut fw, &mut host, nr::ALLOC_PD, DevReq::default()).unwrap();
        // Random bytes in the command slots, then random index and state words.
        let cmd = layout.cmd_ring(0).unwrap();
        for (i, s) in slots.iter().enumerate() {
            mem.write(cmd.off as usize + RING_HEADER_SIZE + i * cmd.entry_size as usize, s).unwrap();
        }
        let resp = layout.resp_ring(0).unwrap();
        let slot = layout.slot_off(0).unwrap();
        let targets = [
            cmd.off as usize + RING_PRODUCER,
            cmd.off as usize + RING_CONSUMER,
            resp.off as usize + RING_PRODUCER,
            resp.off as usize + RING_CONSUMER,
            slot + SLOT_STATE,
            slot + SLOT_HOST_HEARTBEAT,
        ];
        for (t, v) in writes {
            mem.store_u32_release(targets[t], v).unwrap();
        }
        for _ in 0..ticks {
            // Never an error: the firmware's own mapping is never left.
            fw.tick(&mem).unwrap();
        }
        let s = slot_state(&mem, &fw, 0);
        prop_assert!(s.state == ctx_state::FREE || s.state == ctx_state::ATTACHED);
        prop_assert!(fw.p.order_violations.is_empty());
        if s.state == ctx_state::FREE {
            prop_assert_eq!(fw.dispatcher().count(Some(0), ObjKind::Pd), 0);
        }
        // Whatever happened, every context can be torn down cleanly.
        for ctx in 0..3 {
            fw.detach(ctx);
        }
        prop_assert!(fw.p.live.is_empty());
    }
}

#[test]
fn slot_events_log_as_one_readable_line() {
    use crate::dispatch::TeardownReport;
    use crate::firmware::SlotEvent;
    use alloc::string::ToString;
    assert_eq!(SlotEvent::Attached { ctx: 3 }.to_string(), "ring: context 3 attached");
    let report = TeardownReport { destroyed: [1, 0, 0, 2, 1, 1, 0, 0], provider_errors: 0 };
    let ev = SlotEvent::Reclaimed { ctx: 1, reason: reclaim_reason::LEASE_EXPIRED, report };
    assert_eq!(ev.to_string(), "ring: context 1 reclaimed (lease expired): destroyed 1 qp, 2 mr, 1 cq, 1 pd");
    let bare = SlotEvent::Reclaimed { ctx: 0, reason: reclaim_reason::DETACHED, report: TeardownReport::default() };
    assert_eq!(bare.to_string(), "ring: context 0 reclaimed (detached)");
}

/// ABI 1.4: RES_ENTRY pages every context's objects of a kind with their
/// owner's pid and the comm it attached with (sanitized, a lying host's
/// too); the slot's comm is cleared when it is reclaimed.
#[test]
fn res_entry_lists_objects_with_their_owners() {
    let (mem, mut fw) = appliance();
    let mut a = HostContext::attach_as(&mem, 100, b"ibv_rc_pingpong").unwrap();
    // A host that writes its own comm, longer than the field and unprintable.
    let mut b = HostContext::attach_as(&mem, 200, b"x").unwrap();
    let slot = fw.layout().slot_off(b.ctx()).unwrap();
    mem.write(slot + crate::abi::SLOT_HOST_COMM, b"evil \"name\"\n\xff!!").unwrap();
    let pd_a: HandleResp = call(&mem, &mut fw, &mut a, nr::ALLOC_PD, DevReq::default()).unwrap();
    let pd_b: HandleResp = call(&mem, &mut fw, &mut b, nr::ALLOC_PD, DevReq::default()).unwrap();
    let (buf, _) = a.buf_area();
    let mr: RegMrResp = call(
        &mem,
        &mut fw,
        &mut a,
        nr::REG_MR,
        RegMrReq { start: buf, length: 8192, pd_handle: pd_a.handle, access: 0, iova: buf },
    )
    .unwrap();
    let list = |fw: &mut Fw, host: &mut HostContext, kind: u32| {
        let mut out = Vec::new();
        let mut cursor = 0;
        loop {
            let req = ResEntryReq { dev_index: 0, kind, cursor, reserved: 0 };
            match call::<_, ResEntry>(&mem, fw, host, nr::RES_ENTRY, req) {
                Ok(e) => {
                    out.push(e);
                    if e.next == NO_MORE {
                        return out;
                    }
                    cursor = e.next;
                }
                Err(HostError::Status(Status::ENOENT)) => return out,
                Err(e) => panic!("{e:?}"),
            }
        }
    };
    let pds = list(&mut fw, &mut a, res_kind::PD);
    assert_eq!(pds.len(), 2);
    assert_eq!((pds[0].num, pds[0].pid, pds[0].users, pds[0].ctxn), (pd_a.handle, 100, 1, a.ctx()));
    assert_eq!(crate::wire::name_str(&pds[0].comm), Some("ibv_rc_pingpong"));
    assert_eq!((pds[1].num, pds[1].pid), (pd_b.handle, 200));
    assert_eq!(crate::wire::name_str(&pds[1].comm), Some("evil??name???!!"));
    let mrs = list(&mut fw, &mut a, res_kind::MR);
    assert_eq!(mrs.len(), 1);
    assert_eq!((mrs[0].lkey, mrs[0].rkey, mrs[0].mrlen, mrs[0].pdn), (mr.lkey, mr.rkey, 8192, pd_a.handle));
    // Nothing of a kind, another device, a kind that does not exist.
    assert!(list(&mut fw, &mut a, res_kind::QP).is_empty());
    let other = ResEntryReq { dev_index: 5, kind: res_kind::PD, cursor: 0, reserved: 0 };
    assert_eq!(
        call::<_, ResEntry>(&mem, &mut fw, &mut a, nr::RES_ENTRY, other),
        Err(HostError::Status(Status::ENOENT))
    );
    let bogus = ResEntryReq { dev_index: 0, kind: 77, cursor: 0, reserved: 0 };
    assert_eq!(
        call::<_, ResEntry>(&mem, &mut fw, &mut a, nr::RES_ENTRY, bogus),
        Err(HostError::Status(Status::EINVAL))
    );
    b.detach(&mem).unwrap();
    fw.tick(&mem).unwrap();
    assert_eq!(slot_state(&mem, &fw, 1).host_comm, [0; crate::abi::COMM_LEN]);
    assert_eq!(list(&mut fw, &mut a, res_kind::PD).len(), 1);
}

/// ABI 1.5: RES_ENTRY lists the contexts with objects on a device, and
/// each SRQ with the QPs on it as runs of consecutive QPNs.
#[test]
fn res_entry_lists_contexts_and_srqs_with_their_qps() {
    let mut h = Harness::new();
    let pd = h.pd(0, 0);
    let cq = h.cq(0, 0, 8).unwrap().cq_handle;
    let srq: CreateSrqResp =
        h.cmd(0, nr::CREATE_SRQ, CreateSrqReq { pd_handle: pd, max_wr: 8, max_sge: 1, ..Default::default() }).unwrap();
    let on_srq: Vec<u32> = (0..3).map(|_| h.qp(0, pd, cq, cq, srq.srq_handle).unwrap().qp_num).collect();
    let alone = h.qp(0, pd, cq, cq, 0).unwrap().qp_num;
    let last = h.qp(0, pd, cq, cq, srq.srq_handle).unwrap().qp_num;
    h.pd(1, 0);
    let list = |h: &mut Harness, kind: u32| {
        let (mut out, mut cursor) = (Vec::new(), 0);
        while let Ok(e) = h.d.res_entry(&h.mem, &mut h.p, 0, kind, cursor) {
            out.push(e);
            if e.next == NO_MORE {
                break;
            }
            cursor = e.next;
        }
        out
    };
    let ctxs = list(&mut h, res_kind::CTX);
    assert_eq!(ctxs.iter().map(|e| (e.kind, e.num)).collect::<Vec<_>>(), [(res_kind::CTX, 0), (res_kind::CTX, 1)]);
    let srqs = list(&mut h, res_kind::SRQ);
    assert_eq!(srqs.len(), 1);
    let e = srqs[0];
    assert_eq!((e.num, e.pdn, e.srq_type, e.srq_runs_cut), (srq.srq_handle, pd, 0, 0));
    // The fake numbers QPs in order: three on the SRQ, one not, one more.
    assert_eq!((on_srq[1], on_srq[2], alone), (on_srq[0] + 1, on_srq[0] + 2, on_srq[0] + 3));
    assert_eq!(&e.srq_qps[..usize::from(e.srq_runs)], &[[on_srq[0], on_srq[2]], [last, last]]);
    // Another device has none of them.
    assert_eq!(h.d.res_entry(&h.mem, &mut h.p, 3, res_kind::CTX, 0), Err(Status::ENOENT));
    assert_eq!(h.d.res_entry(&h.mem, &mut h.p, 3, res_kind::SRQ, 0), Err(Status::ENOENT));
}

/// RES_ENTRY takes any cursor a host sends, of every kind: past the hosts'
/// handles, past the provider's own objects, the last value there is: an
/// answer or ENOENT, never a panic (the hostile-command fuzzer found a CM id
/// dump that panicked on a cursor past the hosts' handles).
#[test]
fn res_entry_survives_any_cursor() {
    let mut h = Harness::new();
    populate(&mut h, 0);
    let kinds = [
        res_kind::PD,
        res_kind::CQ,
        res_kind::QP,
        res_kind::CM_ID,
        res_kind::MR,
        res_kind::CTX,
        res_kind::SRQ,
        7,
        u32::MAX,
    ];
    let cursors =
        [0, 1, 2, RES_KERNEL_CURSOR - 1, RES_KERNEL_CURSOR, RES_KERNEL_CURSOR + 1, NO_MORE - 1, NO_MORE, u32::MAX];
    for kind in kinds {
        for cursor in cursors {
            for dev in [0, 1, u32::MAX] {
                let req = ResEntryReq { dev_index: dev, kind, cursor, reserved: 0 };
                let _ = h.cmd::<_, ResEntry>(0, nr::RES_ENTRY, req);
            }
        }
    }
    // Still serving.
    h.pd(0, 0);
}
