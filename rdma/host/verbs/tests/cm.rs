//! `verbs::cm` end to end against the real dispatcher and the test
//! appliance's loopback CM (tests/common/cm.rs): two contexts connect
//! through it as two hosts would through two appliances' CMs, the library
//! moves the QPs with CM_INIT_QP_ATTR and data flows over them; scripted
//! events play a firmware that rejects, fails, or says odd things.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::Appliance;
use verbs::cm::*;
use verbs::*;
use verbs_ring::cm::CmConnParam;
use verbs_ring::dispatch::{CmEventOut, ObjKind};

const T: Duration = Duration::from_secs(60);

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn expect(ch: &EventChannel, event: u32) -> CmEvent {
    let ev = ch.get_cm_event(T).unwrap();
    assert_eq!(ev.name(), event_str(event), "status {}", ev.status);
    ev
}

fn attr() -> QpInitAttr {
    QpInitAttr {
        cap: QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    }
}

#[test]
fn rc_connect_accept_data_and_disconnect() {
    let app = Appliance::start();
    let (sctx, cctx) = (Context::open(&app.path).unwrap(), Context::open(&app.path).unwrap());
    let (sch, cch) = (EventChannel::new(&sctx), EventChannel::new(&cctx));

    let listen = sch.create_id(port_space::TCP).unwrap();
    listen.bind_addr(addr("10.0.0.1:7174")).unwrap();
    listen.listen(4).unwrap();

    let id = cch.create_id(port_space::TCP).unwrap();
    id.resolve_addr(None, addr("10.0.0.1:7174"), 2000).unwrap();
    expect(&cch, cm_event::ADDR_RESOLVED);
    id.resolve_route(2000).unwrap();
    expect(&cch, cm_event::ROUTE_RESOLVED);
    assert_eq!(id.peer_addr(), Some(addr("10.0.0.1:7174")));
    let cdev = id.device().unwrap();
    let cpd = cdev.alloc_pd().unwrap();
    let ccq = cdev.create_cq(16, 0).unwrap();
    let cqp = id.create_qp(&cpd, &ccq, &ccq, None, &attr()).unwrap();
    assert_eq!(cqp.query(0).unwrap().attr.qp_state, qp_state::INIT);
    let too_long = ConnParam { private_data: vec![0; 197], ..Default::default() };
    assert!(matches!(id.connect(&too_long), Err(Error::InvalidArgument(_))));
    let req = ConnParam {
        private_data: b"from the client".to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        ..Default::default()
    };
    id.connect(&req).unwrap();

    let mut ev = expect(&sch, cm_event::CONNECT_REQUEST);
    assert_eq!(ev.listen_id, Some(listen.handle()));
    assert!(ev.is_for(&listen));
    assert_eq!(ev.param.private_data, b"from the client");
    assert_eq!(ev.param.qp_num, cqp.qp_num());
    let conn = ev.request.take().unwrap();
    let sdev = conn.device().unwrap();
    let spd = sdev.alloc_pd().unwrap();
    let scq = sdev.create_cq(16, 0).unwrap();
    let sqp = conn.create_qp(&spd, &scq, &scq, None, &attr()).unwrap();
    let smr = spd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    sqp.post_recv(&[(7, &[smr.sge(0, 64).unwrap()])]).unwrap();
    conn.accept(&ConnParam { private_data: vec![0xab; 196], ..Default::default() }).unwrap();
    assert_eq!(sqp.query(0).unwrap().attr.qp_state, qp_state::RTS);

    // The active side sees ESTABLISHED (CONNECT_RESPONSE handled inside:
    // RTR, RTS, the RTU) with the REP's private data.
    let est = expect(&cch, cm_event::ESTABLISHED);
    assert_eq!(est.param.private_data, vec![0xab; 196]);
    let q = cqp.query(0).unwrap().attr;
    assert_eq!((q.qp_state, q.dest_qp_num), (qp_state::RTS, sqp.qp_num()));
    expect(&sch, cm_event::ESTABLISHED);

    // Data over the connected QPs.
    let cmr = cpd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    cmr.write(0, b"ping").unwrap();
    let sge = [cmr.sge(0, 4).unwrap()];
    cqp.post_send(&[SendWr { wr_id: 1, op: WrOp::Send, sg_list: &sge, flags: SendFlags::SIGNALED, ud: None }]).unwrap();
    assert!(ccq.wait(T).unwrap().status.is_success());
    let wc = scq.wait(T).unwrap();
    assert_eq!((wc.wr_id, wc.byte_len), (7, 4));
    assert_eq!(smr.to_vec(0, 4).unwrap(), b"ping");

    id.disconnect().unwrap();
    expect(&cch, cm_event::DISCONNECTED);
    expect(&sch, cm_event::DISCONNECTED);
    assert_eq!(cqp.query(0).unwrap().attr.qp_state, qp_state::ERR);
    drop((sqp, cqp));
    drop((conn, id, listen));
    app.wait_for("CM ids destroyed", T, |s| s.p.cm.live() == 0);
}

#[test]
fn rejections_and_errors_reach_the_caller() {
    let app = Appliance::start();
    let ctx = Context::open(&app.path).unwrap();
    let ch = EventChannel::new(&ctx);

    // Nothing listens: REJ reason 8.
    let id = ch.create_id(port_space::TCP).unwrap();
    id.resolve_addr(None, addr("10.0.0.1:9"), 2000).unwrap();
    expect(&ch, cm_event::ADDR_RESOLVED);
    id.connect(&ConnParam::default()).unwrap();
    assert_eq!(expect(&ch, cm_event::REJECTED).status, 8);

    // An address that does not resolve.
    let lost = ch.create_id(port_space::TCP).unwrap();
    lost.resolve_addr(None, addr("10.0.0.99:9"), 2000).unwrap();
    assert_eq!(expect(&ch, cm_event::ADDR_ERROR).status, -113);

    // The listener rejects with private data.
    let listen = ch.create_id(port_space::TCP).unwrap();
    listen.bind_addr(addr("10.0.0.1:5000")).unwrap();
    listen.listen(1).unwrap();
    let active = ch.create_id(port_space::TCP).unwrap();
    active.resolve_addr(None, addr("10.0.0.1:5000"), 2000).unwrap();
    expect(&ch, cm_event::ADDR_RESOLVED);
    active.connect(&ConnParam::default()).unwrap();
    let req = expect(&ch, cm_event::CONNECT_REQUEST).request.unwrap();
    assert!(req.reject(&[0; 149]).is_err());
    req.reject(b"go away").unwrap();
    let rej = expect(&ch, cm_event::REJECTED);
    assert!(rej.is_for(&active));
    assert_eq!((rej.status, rej.param.private_data.as_slice()), (28, &b"go away"[..]));

    // Dropping a request's id unanswered rejects it too.
    let again = ch.create_id(port_space::TCP).unwrap();
    again.resolve_addr(None, addr("10.0.0.1:5000"), 2000).unwrap();
    expect(&ch, cm_event::ADDR_RESOLVED);
    again.connect(&ConnParam::default()).unwrap();
    drop(expect(&ch, cm_event::CONNECT_REQUEST));
    assert!(expect(&ch, cm_event::REJECTED).is_for(&again));
    assert!(matches!(ch.poll_cm_event(), Ok(None)));
}

#[test]
fn a_lying_or_failing_firmware_gives_errors_not_panics() {
    let app = Appliance::start();
    let ctx = Context::open(&app.path).unwrap();
    let ch = EventChannel::new(&ctx);
    let id = ch.create_id(port_space::TCP).unwrap();
    id.bind_addr(addr("10.0.0.1:6000")).unwrap();
    let dev = id.device().unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(8, 0).unwrap();
    let _qp = id.create_qp(&pd, &cq, &cq, None, &attr()).unwrap();
    assert!(matches!(id.create_qp(&pd, &cq, &cq, None, &attr()), Err(Error::InvalidArgument(_))));
    let fake = app.fw().p.cm.newest().unwrap();
    let script = |event, status, param| {
        let e = CmEventOut { id: fake, new_id: None, event, status, param };
        app.fw().p.cm.script(ctx.index(), e);
    };
    // A CONNECT_RESPONSE out of nowhere: the RTU cannot go (no peer), so the
    // caller sees CONNECT_ERROR with the errno and the QP is in ERR.
    script(cm_event::CONNECT_RESPONSE, 0, CmConnParam::default());
    let ev = expect(&ch, cm_event::CONNECT_ERROR);
    assert_eq!(ev.status, -22);
    assert_eq!(_qp.query(0).unwrap().attr.qp_state, qp_state::ERR);
    // A private data length beyond the field is cut by the dispatcher.
    script(cm_event::DISCONNECTED, 0, CmConnParam { private_data_len: 255, ..Default::default() });
    assert_eq!(expect(&ch, cm_event::DISCONNECTED).param.private_data.len(), 196);
    // Events for an id the firmware never gave us are skipped.
    app.fw()
        .p
        .cm
        .script(ctx.index(), CmEventOut { id: 0xdead, new_id: None, event: 9, status: 0, param: Default::default() });
    assert!(matches!(ch.poll_cm_event(), Ok(None)));
    // An unknown event number is passed on, named as librdmacm would.
    script(77, 0, CmConnParam::default());
    assert_eq!(ch.get_cm_event(T).unwrap().name(), "UNKNOWN EVENT");
    // No event in time is ETIMEDOUT.
    assert_eq!(ch.get_cm_event(Duration::from_millis(20)).unwrap_err().errno().1, 110);
}

#[test]
fn ud_ids_connect_with_sidr_and_learn_the_peer() {
    let app = Appliance::start();
    let ctx = Context::open(&app.path).unwrap();
    let ch = EventChannel::new(&ctx);
    let listen = ch.create_id(port_space::UDP).unwrap();
    assert_eq!(listen.qp_type(), qp_type::UD);
    listen.bind_addr(addr("10.0.0.1:7174")).unwrap();
    listen.listen(1).unwrap();
    let id = ch.create_id(port_space::UDP).unwrap();
    id.resolve_addr(None, addr("10.0.0.1:7174"), 2000).unwrap();
    expect(&ch, cm_event::ADDR_RESOLVED);
    id.resolve_route(2000).unwrap();
    expect(&ch, cm_event::ROUTE_RESOLVED);
    let dev = id.device().unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(8, 0).unwrap();
    let qp = id.create_qp(&pd, &cq, &cq, None, &attr()).unwrap();
    assert_eq!(qp.query(0).unwrap().attr.qp_state, qp_state::RTS);
    id.connect(&ConnParam { private_data: vec![1; 180], ..Default::default() }).unwrap();
    let mut req = expect(&ch, cm_event::CONNECT_REQUEST);
    assert_eq!(req.param.private_data.len(), 180);
    let conn = req.request.take().unwrap();
    let sqp = conn.create_qp(&pd, &cq, &cq, None, &attr()).unwrap();
    conn.accept(&ConnParam::default()).unwrap();
    let est = expect(&ch, cm_event::ESTABLISHED);
    assert_eq!((est.param.qp_num, est.param.qkey), (sqp.qp_num(), RDMA_UDP_QKEY));
    let ah = est.ah_attr.unwrap();
    assert_eq!((ah.is_global, &ah.dgid[12..]), (1, &[10, 0, 0, 1][..]));
}

#[test]
fn a_dead_context_disconnects_its_peers() {
    let app = Appliance::start();
    let sctx = Context::open(&app.path).unwrap();
    let sch = EventChannel::new(&sctx);
    let listen = sch.create_id(port_space::TCP).unwrap();
    listen.bind_addr(addr("10.0.0.1:7000")).unwrap();
    listen.listen(1).unwrap();
    {
        let cctx = Context::open(&app.path).unwrap();
        let cch = EventChannel::new(&cctx);
        let id = cch.create_id(port_space::TCP).unwrap();
        id.resolve_addr(None, addr("10.0.0.1:7000"), 2000).unwrap();
        expect(&cch, cm_event::ADDR_RESOLVED);
        id.connect(&ConnParam::default()).unwrap();
        let conn = expect(&sch, cm_event::CONNECT_REQUEST).request.unwrap();
        conn.accept(&ConnParam::default()).unwrap();
        // No QP on the active id: librdmacm hands CONNECT_RESPONSE over.
        expect(&cch, cm_event::CONNECT_RESPONSE);
        // The active process "dies": the firmware reclaims its context,
        // destroying its ids first.
        {
            let mut g = app.fw();
            let common::Served { fw, p } = &mut *g;
            let report = fw.dispatcher_mut().detach(p, cctx.index());
            assert_eq!(report.destroyed[ObjKind::CmId as usize], 1);
        }
        // Its handles are gone with it (and dropping them sends nothing).
        std::mem::forget(id);
        std::mem::forget(cch);
        // The peer hears the REJ (it never saw the RTU).
        let ev = expect(&sch, cm_event::REJECTED);
        assert!(ev.is_for(&conn));
        drop(conn);
    }
    assert_eq!(app.fw().dispatcher().count(None, ObjKind::CmId), 1);
}
