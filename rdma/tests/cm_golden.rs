//! The MAD and CM codecs against the MADs two Linux 6.1 rdma_rxe peers exchanged
//! (tests/fixtures/linux-cm-mads.txt, made by tests/tests/cm_capture.rs): every MAD
//! parses, says what Linux meant, and re-emits to the same 256 bytes.

use std::net::{IpAddr, Ipv4Addr};

use rdma::cm::ib_cm::{CmEvent, CmState, ConnId, IbCm, MadAddr, Output, RepParams};
use rdma::core::Gid;
use rdma::mad::{Dispatch, Dispatcher, MethodSet};
use rdma::wire::cm::{AttrId, CmMad, CmMessage, MessageRejected, RejReason, SidrStatus, TransportType};
use rdma::wire::cma_hdr::{self, PortSpace};
use rdma::wire::mad::{self, Method, MgmtClass};
use vocab::Instant;

const FIXTURE: &str = include_str!("fixtures/linux-cm-mads.txt");

struct Captured {
    scenario: String,
    src: Ipv4Addr,
    attr: String,
    mad: Vec<u8>,
}

fn captured() -> Vec<Captured> {
    FIXTURE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 4, "fixture line {l}");
            let (src, _) = f[1].split_once('>').expect("src>dst");
            let mad = (0..f[3].len() / 2)
                .map(|i| u8::from_str_radix(&f[3][2 * i..2 * i + 2], 16).expect("hex"))
                .collect::<Vec<u8>>();
            assert_eq!(mad.len(), mad::MAD_LEN);
            Captured { scenario: f[0].into(), src: src.parse().expect("ip"), attr: f[2].into(), mad }
        })
        .collect()
}

fn find<'a>(all: &'a [Captured], scenario: &str, attr: &str) -> &'a Captured {
    all.iter().find(|c| c.scenario == scenario && c.attr == attr).unwrap_or_else(|| panic!("{scenario} {attr}"))
}

#[test]
fn every_captured_mad_round_trips_byte_exact() {
    let all = captured();
    assert_eq!(all.len(), 14);
    for c in &all {
        let header = mad::Repr::parse(&mad::Packet::new_checked(&c.mad[..]).expect("header")).expect("header");
        assert_eq!((header.base_version, header.mgmt_class, header.class_version), (1, MgmtClass::Cm, 2));
        assert_eq!(header.method, Method::Send);
        let parsed = CmMad::parse(&c.mad).unwrap_or_else(|_| panic!("{} {} parses", c.scenario, c.attr));
        let name = match parsed.message.attr_id() {
            AttrId::Req => "REQ",
            AttrId::Rej => "REJ",
            AttrId::Rep => "REP",
            AttrId::Rtu => "RTU",
            AttrId::Dreq => "DREQ",
            AttrId::Drep => "DREP",
            AttrId::SidrReq => "SIDR_REQ",
            AttrId::SidrRep => "SIDR_REP",
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(name, c.attr);
        let again = parsed.to_bytes().expect("emits");
        assert_eq!(&again[..], &c.mad[..], "{} {} re-emitted", c.scenario, c.attr);
        // The header alone re-emits too.
        let mut h = [0u8; mad::HEADER_LEN];
        header.emit(&mut mad::Packet::new_unchecked(&mut h[..]));
        assert_eq!(&h[..], &c.mad[..mad::HEADER_LEN]);
    }
}

#[test]
fn rping_req_says_what_rdma_cm_meant() {
    let all = captured();
    let c = find(&all, "rping", "REQ");
    assert_eq!(c.src, Ipv4Addr::new(10, 0, 0, 4));
    let CmMessage::Req(req) = CmMad::parse(&c.mad).expect("REQ").message else { panic!("not a REQ") };
    assert_eq!(req.service_id, cma_hdr::service_id(PortSpace::Tcp, 7174));
    assert_eq!(req.transport_type, TransportType::Rc);
    assert_ne!(req.local_comm_id, 0);
    assert_ne!(req.local_qpn, 0);
    assert_eq!(req.pkey, 0xFFFF);
    assert_eq!(req.primary_path.local_gid, Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 4)).0);
    assert_eq!(req.primary_path.remote_gid, Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 3)).0);
    // rdma_cm's header leads the private data: IPv4, the client's port, both addresses.
    let hdr =
        cma_hdr::Repr::parse(&cma_hdr::Packet::new_checked(req.private_data).expect("36 bytes")).expect("cma_hdr");
    assert_eq!(hdr.version, cma_hdr::CMA_VERSION);
    assert_eq!(hdr.src_addr, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 4)));
    assert_eq!(hdr.dst_addr, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)));
    assert_ne!(hdr.port, 0);
    let mut again = [0u8; cma_hdr::HEADER_LEN];
    hdr.emit(&mut cma_hdr::Packet::new_unchecked(&mut again[..])).expect("same family");
    assert_eq!(&again[..], &req.private_data[..cma_hdr::HEADER_LEN]);

    // The REP answers it: its IDs and the requester's PSN conventions.
    let CmMessage::Rep(rep) = CmMad::parse(&find(&all, "rping", "REP").mad).expect("REP").message else {
        panic!("not a REP")
    };
    assert_eq!(rep.remote_comm_id, req.local_comm_id);
    assert_ne!(rep.local_qpn, 0);
    let CmMessage::Rtu(rtu) = CmMad::parse(&find(&all, "rping", "RTU").mad).expect("RTU").message else {
        panic!("not an RTU")
    };
    assert_eq!((rtu.local_comm_id, rtu.remote_comm_id), (req.local_comm_id, rep.local_comm_id));
    let CmMessage::Dreq(dreq) = CmMad::parse(&find(&all, "rping", "DREQ").mad).expect("DREQ").message else {
        panic!("not a DREQ")
    };
    assert_eq!(dreq.remote_qpn, rep.local_qpn);
    let CmMessage::Drep(drep) = CmMad::parse(&find(&all, "rping", "DREP").mad).expect("DREP").message else {
        panic!("not a DREP")
    };
    assert_eq!((drep.local_comm_id, drep.remote_comm_id), (dreq.remote_comm_id, dreq.local_comm_id));
}

#[test]
fn closed_port_is_rejected_with_reason_8() {
    let all = captured();
    let req = CmMad::parse(&find(&all, "rping-closed-port", "REQ").mad).expect("REQ");
    let rej = CmMad::parse(&find(&all, "rping-closed-port", "REJ").mad).expect("REJ");
    let (CmMessage::Req(q), CmMessage::Rej(j)) = (req.message, rej.message) else { panic!("REQ, REJ") };
    assert_eq!(q.service_id, cma_hdr::service_id(PortSpace::Tcp, 7175));
    assert_eq!(j.reason, RejReason::InvalidServiceId);
    assert_eq!(j.message_rejected, MessageRejected::Req);
    assert_eq!((j.remote_comm_id, j.local_comm_id), (q.local_comm_id, 0));
    assert_eq!(rej.tid, req.tid);
}

#[test]
fn udaddy_resolves_with_sidr() {
    let all = captured();
    let q = CmMad::parse(&find(&all, "udaddy", "SIDR_REQ").mad).expect("SIDR_REQ");
    let p = CmMad::parse(&find(&all, "udaddy", "SIDR_REP").mad).expect("SIDR_REP");
    let (CmMessage::SidrReq(q), CmMessage::SidrRep(p)) = (q.message, p.message) else { panic!("SIDR") };
    assert_eq!(cma_hdr::port_space(q.service_id), Some(PortSpace::Udp));
    assert_eq!(p.request_id, q.request_id);
    assert_eq!(p.service_id, q.service_id);
    assert_eq!(p.status, SidrStatus::Success);
    assert_ne!(p.qpn, 0);
    let hdr = cma_hdr::Repr::parse(&cma_hdr::Packet::new_checked(q.private_data).expect("36")).expect("cma_hdr");
    assert_eq!(hdr.dst_addr, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)));
}

#[test]
fn the_dispatcher_hands_captured_cm_mads_to_the_cm_agent() {
    let mut d = Dispatcher::new();
    let cm = d.register(MgmtClass::Cm, 2, MethodSet::EMPTY.with(Method::Send)).expect("first agent");
    for c in captured() {
        assert_eq!(d.receive(1, &c.mad), Dispatch::Agent(cm));
    }
    assert_eq!(d.counters().delivered, 14);
}

fn addr(ip: [u8; 4]) -> MadAddr {
    MadAddr { gid: Gid::from_ipv4(Ipv4Addr::from(ip)), qpn: 1, hop_limit: 64, ..MadAddr::default() }
}

/// Our CM as the passive side of Linux's rping: the captured REQ makes a connection
/// whose QP attributes are what the REQ said, and our REP is addressed back to it.
#[test]
fn our_cm_answers_a_captured_linux_req() {
    let all = captured();
    let req_mad = &find(&all, "rping", "REQ").mad;
    let CmMessage::Req(req) = CmMad::parse(req_mad).expect("REQ").message else { panic!("REQ") };
    let mut cm = IbCm::new(0x5254_00ff_fe00_0103, 7);
    let listen = cm.listen(cma_hdr::service_id(PortSpace::Tcp, 0), cma_hdr::IP_PS_MASK).expect("listen");
    let peer = addr([10, 0, 0, 4]);
    let now = Instant::from_micros(1_000);
    cm.receive(now, &peer, req_mad);
    let Some(Output::Event { conn, event: CmEvent::ReqReceived { listen: l, req: info } }) = cm.take_output() else {
        panic!("a REQ event")
    };
    assert_eq!(l, listen);
    assert_eq!(info.remote_qpn, req.local_qpn);
    assert_eq!(info.private_data.len(), 92);
    let ci = cm.conn_info(conn).expect("conn");
    assert_eq!(ci.remote_qpn, req.local_qpn);
    assert_eq!(ci.sq_psn, req.starting_psn);
    assert_eq!(ci.path_mtu, req.path_mtu);
    assert_eq!(ci.dgid.0, req.primary_path.local_gid);
    assert_eq!(ci.responder_resources, req.initiator_depth);
    cm.send_rep(now, conn, &RepParams { qp_num: 0x11, starting_psn: 0x1234, ..RepParams::default() }).expect("REP");
    let Some(Output::Send { to, mad }) = cm.take_output() else { panic!("a REP") };
    assert_eq!(to, peer);
    let CmMessage::Rep(rep) = CmMad::parse(&mad).expect("REP").message else { panic!("REP") };
    assert_eq!(rep.remote_comm_id, req.local_comm_id);
    assert_eq!(rep.local_comm_id, conn.0);
    assert_eq!(cm.state(conn), Some(CmState::RepSent));
    // The captured RTU names Linux's REP's ID, not ours: it is not for this connection.
    cm.receive(now, &peer, &find(&all, "rping", "RTU").mad);
    assert_eq!(cm.state(ConnId(conn.0)), Some(CmState::RepSent));
    assert_eq!(cm.counters().rtu.dropped, 1);
}

fn sent(cm: &mut IbCm) -> Vec<u8> {
    loop {
        match cm.take_output() {
            Some(Output::Send { mad, .. }) => return mad.to_vec(),
            Some(Output::Event { .. }) => continue,
            None => panic!("nothing sent"),
        }
    }
}

/// A CM whose first allocated communication ID is `id` (IDs are 1, 2, ... XOR the seed).
fn cm_with_first_id(guid: u64, id: u32) -> IbCm {
    let mut cm = IbCm::new(guid, id ^ 1);
    cm.set_tid_high(2);
    cm
}

/// Given what Linux's rdma_cm asked for, our CM writes the very bytes Linux's CM wrote:
/// REQ, REP, RTU, DREQ and DREP of the rping run, the REJ for the closed port, and the
/// SIDR_REQ/SIDR_REP of udaddy.
#[test]
fn our_cm_emits_what_linux_emitted() {
    use rdma::cm::ib_cm::{PathParams, ReqParams, SidrRepParams, SidrReqParams};
    let all = captured();
    let (client, server) = (addr([10, 0, 0, 4]), addr([10, 0, 0, 3]));
    let now = Instant::from_micros(1_000);
    let parse = |scenario: &str, attr: &str| CmMad::parse(&find(&all, scenario, attr).mad).expect("parses").message;
    let (CmMessage::Req(req), CmMessage::Rep(rep)) = (parse("rping", "REQ"), parse("rping", "REP")) else {
        panic!("REQ, REP")
    };
    let p = &req.primary_path;
    let params = ReqParams {
        primary_path: PathParams {
            sgid: Gid(p.local_gid),
            dgid: Gid(p.remote_gid),
            flow_label: p.flow_label,
            traffic_class: p.traffic_class,
            hop_limit: p.hop_limit,
            sl: p.sl,
            rate: p.packet_rate,
            pkey: req.pkey,
            mtu: req.path_mtu,
            // CMA_IBOE_PACKET_LIFETIME, and rxe's ACK delay below.
            packet_life_time: 18,
        },
        service_id: req.service_id,
        qp_num: req.local_qpn,
        qp_type: req.transport_type,
        starting_psn: req.starting_psn,
        responder_resources: req.responder_resources,
        initiator_depth: req.initiator_depth,
        remote_cm_response_timeout: req.remote_cm_response_timeout,
        local_cm_response_timeout: req.local_cm_response_timeout,
        flow_control: req.flow_control,
        retry_count: req.retry_count,
        rnr_retry_count: req.rnr_retry_count,
        max_cm_retries: req.max_cm_retries,
        srq: req.srq,
        ack_delay: 15,
        private_data: req.private_data.to_vec(),
    };
    let mut active = cm_with_first_id(req.local_ca_guid, req.local_comm_id);
    let mut passive = cm_with_first_id(rep.local_ca_guid, rep.local_comm_id);
    passive.listen(req.service_id, 0).expect("listen");

    let a = active.send_req(now, server, &params).expect("REQ");
    let ours = sent(&mut active);
    assert_eq!(ours, find(&all, "rping", "REQ").mad, "REQ");
    passive.receive(now, &client, &ours);
    let Some(Output::Event { conn: b, .. }) = passive.take_output() else { panic!("REQ event") };
    let rep_params = RepParams {
        qp_num: rep.local_qpn,
        starting_psn: rep.starting_psn,
        responder_resources: rep.responder_resources,
        initiator_depth: rep.initiator_depth,
        failover_accepted: rep.failover_accepted,
        flow_control: rep.flow_control,
        rnr_retry_count: rep.rnr_retry_count,
        srq: rep.srq,
        target_ack_delay: rep.target_ack_delay,
        private_data: rep.private_data.to_vec(),
    };
    passive.send_rep(now, b, &rep_params).expect("REP");
    let ours = sent(&mut passive);
    assert_eq!(ours, find(&all, "rping", "REP").mad, "REP");
    active.receive(now, &server, &ours);
    active.send_rtu(now, a, &[]).expect("RTU");
    let ours = sent(&mut active);
    assert_eq!(ours, find(&all, "rping", "RTU").mad, "RTU");
    passive.receive(now, &client, &ours);
    assert_eq!(passive.state(b), Some(CmState::Established));
    active.send_dreq(now, a, &[]).expect("DREQ");
    let ours = sent(&mut active);
    assert_eq!(ours, find(&all, "rping", "DREQ").mad, "DREQ");
    passive.receive(now, &client, &ours);
    passive.send_drep(now, b, &[]).expect("DREP");
    assert_eq!(sent(&mut passive), find(&all, "rping", "DREP").mad, "DREP");

    // Nobody listens on 7175: the REJ is Linux's.
    let mut nobody = IbCm::new(rep.local_ca_guid, 1);
    nobody.receive(now, &client, &find(&all, "rping-closed-port", "REQ").mad);
    assert_eq!(sent(&mut nobody), find(&all, "rping-closed-port", "REJ").mad, "REJ");

    // udaddy's SIDR exchange.
    let (CmMessage::SidrReq(sq), CmMessage::SidrRep(sp)) = (parse("udaddy", "SIDR_REQ"), parse("udaddy", "SIDR_REP"))
    else {
        panic!("SIDR")
    };
    let mut active = cm_with_first_id(req.local_ca_guid, sq.request_id);
    let sp_params = SidrReqParams {
        service_id: sq.service_id,
        pkey: sq.pkey,
        timeout_ms: 2000,
        max_cm_retries: 15,
        private_data: sq.private_data.to_vec(),
    };
    active.send_sidr_req(now, server, &sp_params).expect("SIDR_REQ");
    let ours = sent(&mut active);
    assert_eq!(ours, find(&all, "udaddy", "SIDR_REQ").mad, "SIDR_REQ");
    let mut passive = IbCm::new(rep.local_ca_guid, 1);
    passive.listen(sq.service_id, 0).expect("listen");
    passive.receive(now, &client, &ours);
    let Some(Output::Event { conn, .. }) = passive.take_output() else { panic!("SIDR_REQ event") };
    let reply =
        SidrRepParams { qp_num: sp.qpn, qkey: sp.qkey, private_data: sp.private_data.to_vec(), ..Default::default() };
    passive.send_sidr_rep(now, conn, &reply).expect("SIDR_REP");
    assert_eq!(sent(&mut passive), find(&all, "udaddy", "SIDR_REP").mad, "SIDR_REP");
}
