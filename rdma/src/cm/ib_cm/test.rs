//! Two CMs on a simulated wire that can lose any one message: the connection and
//! disconnection exchanges under every single loss, refusals, timeouts and SIDR.

use alloc::vec;
use alloc::vec::Vec;
use core::net::Ipv4Addr;

use super::*;
use crate::wire::cm::CmMad;

const SERVICE: u64 = 0x0106_1c06;
const A_GUID: u64 = 0x0200_00ff_fe00_0001;
const B_GUID: u64 = 0x0200_00ff_fe00_0002;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    A,
    B,
}

fn addr(last: u8) -> MadAddr {
    MadAddr { gid: Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, last)), qpn: 1, hop_limit: 64, ..MadAddr::default() }
}

fn req_params() -> ReqParams {
    ReqParams {
        primary_path: PathParams {
            sgid: addr(1).gid,
            dgid: addr(2).gid,
            hop_limit: 64,
            pkey: 0xFFFF,
            mtu: 3,
            packet_life_time: 18,
            ..PathParams::default()
        },
        service_id: SERVICE,
        qp_num: 0x11,
        qp_type: TransportType::Rc,
        starting_psn: 0xabcdef,
        responder_resources: 4,
        initiator_depth: 2,
        remote_cm_response_timeout: 20,
        local_cm_response_timeout: 20,
        flow_control: true,
        retry_count: 7,
        rnr_retry_count: 7,
        max_cm_retries: 15,
        srq: false,
        ack_delay: 15,
        private_data: vec![1, 2, 3],
    }
}

fn rep_params() -> RepParams {
    RepParams {
        qp_num: 0x22,
        starting_psn: 0x123456,
        responder_resources: 2,
        initiator_depth: 4,
        rnr_retry_count: 7,
        target_ack_delay: 15,
        private_data: vec![9],
        ..RepParams::default()
    }
}

/// Two CMs, a wire between them, and consumers that answer as rdma_cm would: a REQ
/// with a REP, a REP with an RTU, a DREQ with a DREP, a SIDR_REQ with a SIDR_REP.
struct Net {
    a: IbCm,
    b: IbCm,
    now: Instant,
    /// Drop the `n`th (from 0) message of this kind sent by this side.
    lose: Option<(Side, AttrId, usize)>,
    /// Drop every message of this kind sent by this side.
    lose_all: Option<(Side, AttrId)>,
    /// Answer REQs with an MRA first.
    mra_first: bool,
    sent: Vec<(Side, AttrId)>,
    events: Vec<(Side, ConnId, CmEvent)>,
}

impl Net {
    fn new() -> Net {
        Net {
            a: IbCm::new(A_GUID, 0x1111),
            b: IbCm::new(B_GUID, 0x2222),
            now: Instant::from_micros(1_000_000),
            lose: None,
            lose_all: None,
            mra_first: false,
            sent: Vec::new(),
            events: Vec::new(),
        }
    }

    fn cm(&mut self, side: Side) -> &mut IbCm {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// Delivers until both CMs are quiet, moving time to the next deadline when
    /// nothing is in flight, for at most `limit` of simulated time.
    fn run(&mut self, limit: Duration) {
        let end = self.now + limit;
        loop {
            let mut busy = false;
            for side in [Side::A, Side::B] {
                while let Some(out) = self.cm(side).take_output() {
                    busy = true;
                    self.handle(side, out);
                }
            }
            if busy {
                continue;
            }
            let next = match (self.a.next_deadline(), self.b.next_deadline()) {
                (Some(x), Some(y)) => x.min(y),
                (x, y) => match x.or(y) {
                    Some(d) => d,
                    None => return,
                },
            };
            if next > end {
                return;
            }
            self.now = self.now.max(next);
            let now = self.now;
            self.a.poll(now);
            self.b.poll(now);
        }
    }

    fn handle(&mut self, side: Side, out: Output) {
        let other = if side == Side::A { Side::B } else { Side::A };
        match out {
            Output::Send { to, mad } => {
                let attr = AttrId::from_raw(u16::from_be_bytes([mad[16], mad[17]]));
                let nth = self.sent.iter().filter(|s| **s == (side, attr)).count();
                self.sent.push((side, attr));
                if self.lose == Some((side, attr, nth)) || self.lose_all == Some((side, attr)) {
                    return;
                }
                let want = if other == Side::A { addr(1) } else { addr(2) };
                assert_eq!(to.gid, want.gid, "{side:?} sent {attr:?} to the wrong GID");
                let from = if side == Side::A { addr(1) } else { addr(2) };
                let now = self.now;
                self.cm(other).receive(now, &from, &mad);
            }
            Output::Event { conn, event } => {
                let now = self.now;
                let mra_first = self.mra_first;
                let cm = self.cm(side);
                match &event {
                    CmEvent::ReqReceived { .. } => {
                        if mra_first {
                            cm.send_mra(now, conn, 22, &[]).expect("MRA");
                        }
                        cm.send_rep(now, conn, &rep_params()).expect("REP");
                    }
                    CmEvent::RepReceived { .. } => cm.send_rtu(now, conn, &[7]).expect("RTU"),
                    CmEvent::DreqReceived { .. } => cm.send_drep(now, conn, &[]).expect("DREP"),
                    CmEvent::SidrReqReceived { .. } => {
                        let p = SidrRepParams { qp_num: 0x33, qkey: 0x1234_5678, ..SidrRepParams::default() };
                        cm.send_sidr_rep(now, conn, &p).expect("SIDR_REP");
                    }
                    _ => {}
                }
                self.events.push((side, conn, event));
            }
        }
    }

    fn events_of(&self, side: Side) -> Vec<&CmEvent> {
        self.events.iter().filter(|e| e.0 == side).map(|e| &e.2).collect()
    }

    fn count(&self, side: Side, attr: AttrId) -> usize {
        self.sent.iter().filter(|s| **s == (side, attr)).count()
    }

    /// Listens on B, connects from A; returns both connections.
    fn connect(&mut self) -> (ConnId, Option<ConnId>) {
        self.b.listen(SERVICE, 0).expect("listen");
        let now = self.now;
        let a = self.a.send_req(now, addr(2), &req_params()).expect("REQ");
        self.run(Duration::from_secs(600));
        let b = self.events.iter().find(|e| e.0 == Side::B).map(|e| e.1);
        (a, b)
    }

    fn disconnect_from_a(&mut self, a: ConnId) {
        let now = self.now;
        self.a.send_dreq(now, a, &[]).expect("DREQ");
        self.run(Duration::from_secs(600));
    }
}

fn is_req_received(e: &&&CmEvent) -> bool {
    matches!(e, CmEvent::ReqReceived { .. })
}

fn assert_established(net: &Net, a: ConnId, b: Option<ConnId>) {
    let b = b.expect("B saw the REQ");
    assert_eq!(net.a.state(a), Some(CmState::Established));
    assert_eq!(net.b.state(b), Some(CmState::Established));
    let ea = net.events_of(Side::A);
    let eb = net.events_of(Side::B);
    assert_eq!(ea.iter().filter(|e| matches!(e, CmEvent::RepReceived { .. })).count(), 1, "{ea:?}");
    assert_eq!(eb.iter().filter(is_req_received).count(), 1, "{eb:?}");
    assert_eq!(eb.iter().filter(|e| matches!(e, CmEvent::RtuReceived)).count(), 1, "{eb:?}");
    // The QP attributes both sides got agree, Linux's PSN convention included.
    let (ia, ib) = (net.a.conn_info(a).expect("A"), net.b.conn_info(b).expect("B"));
    assert_eq!((ia.local_qpn, ia.remote_qpn), (0x11, 0x22));
    assert_eq!((ib.local_qpn, ib.remote_qpn), (0x22, 0x11));
    assert_eq!(ia.sq_psn, ib.rq_psn);
    assert_eq!(ib.sq_psn, ia.rq_psn);
    assert_eq!((ia.sq_psn, ia.rq_psn), (0x123456, 0xabcdef));
    assert_eq!((ia.initiator_depth, ib.responder_resources), (2, 2));
    assert_eq!((ia.responder_resources, ib.initiator_depth), (4, 4));
    assert_eq!((ia.sgid, ia.dgid), (ib.dgid, ib.sgid));
    assert_eq!(ia.remote_ca_guid, B_GUID);
    assert_eq!(ib.remote_ca_guid, A_GUID);
    assert_eq!((ia.path_mtu, ib.path_mtu), (3, 3));
    assert_eq!(ia.local_ack_timeout, ib.local_ack_timeout);
}

fn assert_torn_down(net: &Net, a: ConnId, b: ConnId) {
    let ea = net.events_of(Side::A);
    let eb = net.events_of(Side::B);
    assert_eq!(eb.iter().filter(|e| matches!(e, CmEvent::DreqReceived { .. })).count(), 1, "{eb:?}");
    assert_eq!(ea.iter().filter(|e| matches!(e, CmEvent::DrepReceived)).count(), 1, "{ea:?}");
    assert!(ea.iter().any(|e| matches!(e, CmEvent::TimewaitExit)), "{ea:?}");
    assert!(eb.iter().any(|e| matches!(e, CmEvent::TimewaitExit)), "{eb:?}");
    assert_eq!(net.a.state(a), Some(CmState::Idle));
    assert_eq!(net.b.state(b), Some(CmState::Idle));
    assert_eq!(net.a.next_deadline(), None);
    assert_eq!(net.b.next_deadline(), None);
}

#[test]
fn connect_and_disconnect_without_loss() {
    let mut net = Net::new();
    let (a, b) = net.connect();
    assert_established(&net, a, b);
    assert_eq!(net.sent, vec![(Side::A, AttrId::Req), (Side::B, AttrId::Rep), (Side::A, AttrId::Rtu)]);
    let eb = net.events_of(Side::B);
    let Some(CmEvent::ReqReceived { req, .. }) = eb.first() else { panic!("{eb:?}") };
    assert_eq!(&req.private_data[..3], &[1, 2, 3]);
    assert_eq!(req.private_data.len(), 92);
    net.disconnect_from_a(a);
    assert_torn_down(&net, a, b.expect("B"));
    assert_eq!(net.count(Side::A, AttrId::Dreq), 1);
    assert_eq!(net.count(Side::B, AttrId::Drep), 1);
}

#[test]
fn a_lost_req_is_resent() {
    let mut net = Net::new();
    net.lose = Some((Side::A, AttrId::Req, 0));
    let (a, b) = net.connect();
    assert_established(&net, a, b);
    assert_eq!(net.count(Side::A, AttrId::Req), 2);
    assert_eq!(net.a.counters().req.retried, 1);
}

#[test]
fn a_lost_rep_is_resent_and_the_repeated_req_ignored() {
    let mut net = Net::new();
    net.lose = Some((Side::B, AttrId::Rep, 0));
    let (a, b) = net.connect();
    assert_established(&net, a, b);
    // A's REQ timer or B's REP timer, whichever fires first, repairs it; B never makes
    // a second connection of the repeated REQ.
    assert!(net.count(Side::B, AttrId::Rep) >= 2);
    assert_eq!(net.b.conn_count(), 1);
}

#[test]
fn a_lost_rtu_is_repaired_by_the_repeated_rep() {
    let mut net = Net::new();
    net.lose = Some((Side::A, AttrId::Rtu, 0));
    let (a, b) = net.connect();
    assert_established(&net, a, b);
    assert_eq!(net.count(Side::B, AttrId::Rep), 2);
    assert_eq!(net.count(Side::A, AttrId::Rtu), 2);
    assert_eq!(net.a.counters().rtu.retried, 1);
}

#[test]
fn a_lost_dreq_is_resent() {
    let mut net = Net::new();
    let (a, b) = net.connect();
    net.lose = Some((Side::A, AttrId::Dreq, 0));
    net.disconnect_from_a(a);
    assert_torn_down(&net, a, b.expect("B"));
    assert_eq!(net.count(Side::A, AttrId::Dreq), 2);
}

#[test]
fn a_lost_drep_is_answered_again_from_timewait() {
    let mut net = Net::new();
    let (a, b) = net.connect();
    net.lose = Some((Side::B, AttrId::Drep, 0));
    net.disconnect_from_a(a);
    assert_torn_down(&net, a, b.expect("B"));
    assert_eq!(net.count(Side::A, AttrId::Dreq), 2);
    assert_eq!(net.count(Side::B, AttrId::Drep), 2);
    assert_eq!(net.b.counters().drep.retried, 1);
}

#[test]
fn no_listener_is_rejected_with_reason_8_at_once() {
    let mut net = Net::new();
    let now = net.now;
    let a = net.a.send_req(now, addr(2), &req_params()).expect("REQ");
    net.run(Duration::ZERO);
    assert_eq!(net.now, now, "no timer had to fire");
    let ea = net.events_of(Side::A);
    assert!(matches!(ea.as_slice(), [CmEvent::RejReceived { reason: 8, .. }]), "{ea:?}");
    assert_eq!(net.a.state(a), Some(CmState::Idle));
    assert_eq!(net.b.conn_count(), 0);
    assert_eq!(net.a.next_deadline(), None);
}

#[test]
fn an_unanswered_req_fails_after_max_cm_retries() {
    let mut net = Net::new();
    net.b.listen(SERVICE, 0).expect("listen");
    net.lose_all = Some((Side::A, AttrId::Req));
    let mut p = req_params();
    p.max_cm_retries = 3;
    let start = net.now;
    let a = net.a.send_req(start, addr(2), &p).expect("REQ");
    net.run(Duration::from_secs(600));
    assert_eq!(net.count(Side::A, AttrId::Req), 4);
    assert_eq!(net.events_of(Side::A), vec![&CmEvent::ReqError]);
    assert_eq!(net.a.state(a), Some(CmState::Idle));
    // Each wait is 2 * lifetime + the remote response timeout.
    let each = 2 * iba_timeout(18).as_micros() + iba_timeout(20).as_micros();
    assert_eq!(net.now - start, Duration::from_micros(4 * each));
    net.a.destroy(net.now, a);
    assert_eq!(net.a.conn_count(), 0);
}

#[test]
fn an_unanswered_rep_fails_on_the_passive_side() {
    let mut net = Net::new();
    net.lose_all = Some((Side::B, AttrId::Rep));
    let (a, b) = net.connect();
    let eb = net.events_of(Side::B);
    assert!(eb.contains(&&CmEvent::RepError), "{eb:?}");
    assert!(net.events_of(Side::A).contains(&&CmEvent::ReqError));
    assert_eq!(net.b.state(b.expect("B")), Some(CmState::Idle));
    assert_eq!(net.a.state(a), Some(CmState::Idle));
}

#[test]
fn an_mra_extends_the_wait_and_the_rep_still_lands() {
    let mut net = Net::new();
    net.mra_first = true;
    let (a, b) = net.connect();
    assert_established(&net, a, b);
    assert!(net.events_of(Side::A).contains(&&CmEvent::MraReceived));
    assert_eq!(net.count(Side::B, AttrId::Mra), 1);
}

#[test]
fn an_mra_for_a_lost_rep_holds_the_req_back() {
    let mut net = Net::new();
    net.mra_first = true;
    net.lose = Some((Side::B, AttrId::Rep, 0));
    let (a, b) = net.connect();
    assert_established(&net, a, b);
}

#[test]
fn destroying_an_established_connection_disconnects_it() {
    let mut net = Net::new();
    let (a, b) = net.connect();
    let b = b.expect("B");
    let now = net.now;
    net.a.destroy(now, a);
    net.run(Duration::from_secs(600));
    assert!(net.events_of(Side::B).iter().any(|e| matches!(e, CmEvent::DreqReceived { .. })));
    // A reports nothing for a destroyed id and has freed it after timewait.
    assert!(!net.events_of(Side::A).iter().any(|e| matches!(e, CmEvent::DrepReceived)));
    assert_eq!(net.a.conn_count(), 0);
    assert_eq!(net.b.state(b), Some(CmState::Idle));
}

#[test]
fn destroying_a_passive_connection_before_accepting_rejects_it() {
    let mut net = Net::new();
    net.b.listen(SERVICE, 0).expect("listen");
    let now = net.now;
    let a = net.a.send_req(now, addr(2), &req_params()).expect("REQ");
    // Deliver the REQ by hand so no REP goes out.
    let Some(Output::Send { mad, .. }) = net.a.take_output() else { panic!("REQ") };
    net.b.receive(now, &addr(1), &mad);
    let Some(Output::Event { conn: b, .. }) = net.b.take_output() else { panic!("REQ event") };
    net.b.destroy(now, b);
    net.run(Duration::ZERO);
    let ea = net.events_of(Side::A);
    assert!(matches!(ea.as_slice(), [CmEvent::RejReceived { reason: 28, .. }]), "{ea:?}");
    assert_eq!(net.a.state(a), Some(CmState::Idle));
    assert_eq!(net.b.conn_count(), 0);
}

#[test]
fn a_dreq_for_a_forgotten_connection_still_gets_a_drep() {
    let mut net = Net::new();
    let (a, b) = net.connect();
    let b = b.expect("B");
    // B destroys its side and nothing it sends arrives; once it has forgotten the
    // connection, A's DREQ is still answered.
    let mut now = net.now;
    net.b.destroy(now, b);
    while net.b.conn_count() > 0 {
        now = net.b.next_deadline().expect("a timer while the connection lingers");
        net.b.poll(now);
    }
    while net.b.take_output().is_some() {}
    net.a.send_dreq(now, a, &[]).expect("DREQ");
    let Some(Output::Send { mad, .. }) = net.a.take_output() else { panic!("DREQ") };
    net.b.receive(now, &addr(1), &mad);
    let Some(Output::Send { to, mad }) = net.b.take_output() else { panic!("an answer") };
    assert_eq!(to.gid, addr(1).gid);
    assert_eq!(CmMad::parse(&mad).map(|m| m.message.attr_id()), Ok(AttrId::Drep));
    net.a.receive(now, &addr(2), &mad);
    assert_eq!(net.a.state(a), Some(CmState::Timewait));
}

#[test]
fn a_req_naming_a_connected_qp_is_rejected_as_stale() {
    let mut net = Net::new();
    let (_a, b) = net.connect();
    let b = b.expect("B");
    // A second REQ from the same QP under a new communication ID.
    let now = net.now;
    let mut fresh = IbCm::new(A_GUID, 0x9999);
    fresh.send_req(now, addr(2), &req_params()).expect("REQ");
    let Some(Output::Send { mad, .. }) = fresh.take_output() else { panic!("REQ") };
    net.b.receive(now, &addr(1), &mad);
    let sent: Vec<AttrId> = core::iter::from_fn(|| net.b.take_output())
        .filter_map(|o| match o {
            Output::Send { mad, .. } => CmMad::parse(&mad).ok().map(|m| {
                if let crate::wire::cm::CmMessage::Rej(r) = m.message {
                    assert_eq!(r.reason, RejReason::StaleConn);
                }
                m.message.attr_id()
            }),
            _ => None,
        })
        .collect();
    assert_eq!(sent, vec![AttrId::Rej, AttrId::Dreq]);
    assert_eq!(net.b.state(b), Some(CmState::DreqSent));
}

#[test]
fn sidr_resolves_a_service() {
    let mut net = Net::new();
    net.b.listen(0x0111_1c06, 0).expect("listen");
    let now = net.now;
    let p = SidrReqParams {
        service_id: 0x0111_1c06,
        pkey: 0xFFFF,
        timeout_ms: 100,
        max_cm_retries: 3,
        private_data: vec![5],
    };
    let a = net.a.send_sidr_req(now, addr(2), &p).expect("SIDR_REQ");
    net.run(Duration::from_secs(10));
    let ea = net.events_of(Side::A);
    let [CmEvent::SidrRepReceived { rep }] = ea.as_slice() else { panic!("{ea:?}") };
    assert_eq!((rep.status, rep.qpn, rep.qkey), (SidrStatus::Success, 0x33, 0x1234_5678));
    assert_eq!(net.a.conn_info(a).map(|i| (i.remote_qpn, i.qkey)), Some((0x33, 0x1234_5678)));
    let eb = net.events_of(Side::B);
    let [CmEvent::SidrReqReceived { req, .. }] = eb.as_slice() else { panic!("{eb:?}") };
    assert_eq!(req.private_data[0], 5);
}

#[test]
fn a_lost_sidr_req_is_resent_and_no_listener_is_unsupported() {
    let mut net = Net::new();
    net.lose = Some((Side::A, AttrId::SidrReq, 0));
    let now = net.now;
    let p = SidrReqParams { service_id: 0x0111_0001, timeout_ms: 100, max_cm_retries: 3, ..SidrReqParams::default() };
    net.a.send_sidr_req(now, addr(2), &p).expect("SIDR_REQ");
    net.run(Duration::from_secs(10));
    assert_eq!(net.count(Side::A, AttrId::SidrReq), 2);
    let ea = net.events_of(Side::A);
    let [CmEvent::SidrRepReceived { rep }] = ea.as_slice() else { panic!("{ea:?}") };
    assert_eq!(rep.status, SidrStatus::UnsupportedServiceId);
    assert_eq!(net.b.conn_count(), 0);
}

#[test]
fn an_unanswered_sidr_req_fails() {
    let mut net = Net::new();
    net.lose_all = Some((Side::A, AttrId::SidrReq));
    let now = net.now;
    let p = SidrReqParams { service_id: 1, timeout_ms: 100, max_cm_retries: 2, ..SidrReqParams::default() };
    net.a.send_sidr_req(now, addr(2), &p).expect("SIDR_REQ");
    net.run(Duration::from_secs(10));
    assert_eq!(net.count(Side::A, AttrId::SidrReq), 3);
    assert_eq!(net.events_of(Side::A), vec![&CmEvent::SidrReqError]);
    assert_eq!(net.now - now, Duration::from_millis(300));
}

#[test]
fn overlapping_listens_are_refused() {
    let mut cm = IbCm::new(1, 1);
    let l = cm.listen(0x0106_0000, 0xFFFF_FFFF_FFFF_0000).expect("port space");
    assert_eq!(cm.listen(0x0106_1c06, 0), Err(CmError::Busy));
    cm.cancel_listen(l);
    assert!(cm.listen(0x0106_1c06, 0).is_ok());
}

#[test]
fn calls_in_the_wrong_state_are_refused() {
    let mut cm = IbCm::new(1, 1);
    let now = Instant::ZERO;
    assert_eq!(cm.send_rtu(now, ConnId(5), &[]), Err(CmError::NotFound));
    let c = cm.send_req(now, addr(2), &req_params()).expect("REQ");
    assert_eq!(cm.send_rep(now, c, &rep_params()), Err(CmError::InvalidState));
    assert_eq!(cm.send_dreq(now, c, &[]), Err(CmError::InvalidState));
    let mut p = req_params();
    p.private_data = vec![0; 93];
    assert_eq!(cm.send_req(now, addr(2), &p), Err(CmError::TooLong));
    p.private_data.clear();
    p.qp_type = TransportType::Rd;
    assert_eq!(cm.send_req(now, addr(2), &p), Err(CmError::Invalid));
}

#[test]
fn garbage_is_counted_and_dropped() {
    let mut cm = IbCm::new(1, 1);
    cm.listen(SERVICE, 0).expect("listen");
    let now = Instant::ZERO;
    cm.receive(now, &addr(2), &[]);
    cm.receive(now, &addr(2), &[1, 7, 2, 3]);
    let mut lap = [0u8; MAD_LEN];
    lap[..4].copy_from_slice(&[1, 7, 2, 3]);
    lap[17] = 0x19;
    cm.receive(now, &addr(2), &lap);
    let mut x = 0x1234_5678u32;
    for _ in 0..2000 {
        let mut m = [0u8; MAD_LEN];
        for b in m.iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        // Mostly valid CM headers, so the message parsers and handlers see the junk.
        m[..4].copy_from_slice(&[1, 7, 2, 3]);
        m[16] = 0;
        m[17] = 0x10 + (x % 9) as u8;
        cm.receive(now, &addr(2), &m);
    }
    assert_eq!(cm.counters().malformed, 2);
    assert_eq!(cm.counters().other.dropped, 1);
    while cm.take_output().is_some() {}
}

#[test]
fn timeouts_follow_linux() {
    assert_eq!(iba_timeout(0), Duration::from_millis(1));
    assert_eq!(iba_timeout(20), Duration::from_micros(4_294_967));
    assert_eq!(ack_timeout(15, 18), 19);
    assert_eq!(ack_timeout(15, 14), 16);
    assert_eq!(ack_timeout(20, 10), 20);
    assert_eq!(ack_timeout(0, 31), 31);
}
