//! The provider behind the real ring: a host context and the firmware over one
//! shared region, the core and an rxe transport behind them, as the appliance
//! runs it. Two such nodes, frames passed between their transports, carry an
//! RC exchange driven only through the rings; the refusals are checked one
//! by one at the `HostContext` level, where a test can send what the `verbs`
//! library never would (another context's handle, a bad attribute).

use super::*;
use crate::core::{Gid, MacAddr, NetdevInfo};
use crate::rxe::RxeDriver;
use crate::rxe::device::Config;
use crate::rxe::sink::{FrameSink, VecSink};
use crate::rxe::transport::RxeTransport;
use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::net::{IpAddr, Ipv4Addr};
use verbs_ring::abi::{Cqe, Sge, send_flags, wc_opcode, wc_status, wr_opcode};
use verbs_ring::cmd::{
    AhAttr, CreateAhReq, CreateCqReq, CreateCqResp, CreateQpReq, CreateQpResp, CreateSrqReq, CreateSrqResp, DevReq,
    Empty, GidReq, HandleReq, HandleResp, LinkAddReq, LinkShowReq, ModifyQpReq, PortReq, QpAttr, QpCap, RegMrReq,
    RegMrResp, ResizeSrqReq, ResizeSrqResp, access, nr, qp_attr_mask, qp_state, qp_type,
};
use verbs_ring::dispatch::Limits;
use verbs_ring::host::HostError;
use verbs_ring::ring::{Consumer, Producer, RingGeometry};
use verbs_ring::shm::fake::HeapShm;
use verbs_ring::wire::Wire;
use verbs_ring::wqe;
use verbs_ring::{Firmware, HostContext, Layout, LayoutParams};

type Mem = ShmMemory<Rc<HeapShm>>;

/// One appliance: the core (its rxe device owns the transport over the
/// region), its netdev, the frames it sent, and an ARP table that answers
/// after `arp_delay` asks.
struct Node {
    core: RefCell<RdmaCore>,
    net: Vec<NetdevInfo>,
    shm: Rc<HeapShm>,
    sent: RefCell<VecSink>,
    arp: RefCell<BTreeMap<IpAddr, (u32, MacAddr)>>,
}

impl CoreAccess for &'static Node {
    fn with<R>(
        &mut self,
        f: impl FnOnce(&mut RdmaCore, &dyn NetdevProvider) -> Result<R, Status>,
    ) -> Result<R, Status> {
        f(&mut self.core.borrow_mut(), &self.net)
    }
}

impl TransportAccess for &'static Node {
    type Mem = Mem;
    type Shm = HeapShm;

    fn with_transport<R>(
        &mut self,
        dev: u32,
        f: impl FnOnce(&mut RxeTransport<Mem>, &mut dyn FrameSink, &HeapShm) -> Result<R, Status>,
    ) -> Result<R, Status> {
        let mut core = self.core.borrow_mut();
        let d = core.device_mut(dev).ok_or(Status::ENODEV)?;
        let t = RxeDriver::<Mem>::of_mut(d).ok_or(Status::ENODEV)?.transport_mut();
        f(t, &mut *self.sent.borrow_mut(), &self.shm)
    }

    fn resolve(&mut self, _dev: u32, ip: IpAddr, _now: Instant) -> MacResolution {
        match self.arp.borrow_mut().get_mut(&ip) {
            None => MacResolution::Failed,
            Some((0, mac)) => MacResolution::Known(*mac),
            Some((left, _)) => {
                *left -= 1;
                MacResolution::Pending
            }
        }
    }
}

impl Node {
    fn new(n: u8, region: usize) -> &'static Node {
        let mac = MacAddr([0x52, 0x54, 0, 0, 0, n]);
        // GID 0 is the link-local from the MAC, 1 the IPv4 one, 2 the global IPv6 one.
        let global = core::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(n));
        let net = vec![NetdevInfo::new(2, "eth0", mac).with_ipv4(Ipv4Addr::new(10, 0, 0, n)).with_ipv6(global)];
        let shm = Rc::new(HeapShm::new(region));
        let mem = shm.clone();
        let factory = RxeDriver::factory(move || ShmMemory(mem.clone()), Config::default());
        alloc::boxed::Box::leak(alloc::boxed::Box::new(Node {
            core: RefCell::new(RdmaCore::with_rxe(factory)),
            net,
            shm,
            sent: RefCell::default(),
            arp: RefCell::default(),
        }))
    }

    /// Runs `f` on the transport of the node's first device, if there is one.
    fn with_first_transport<R>(&self, f: impl FnOnce(&mut RxeTransport<Mem>) -> R) -> Option<R> {
        let mut core = self.core.borrow_mut();
        let index = core.devices().next()?.index();
        Some(f(RxeDriver::<Mem>::of_mut(core.device_mut(index)?)?.transport_mut()))
    }

    fn mac(&self) -> MacAddr {
        self.net[0].mac
    }
}

fn name<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    out[..s.len()].copy_from_slice(s.as_bytes());
    out
}

/// A node with its firmware and the rxe0 link added through the ring.
struct Appliance {
    node: &'static Node,
    fw: RefCell<Firmware>,
    uverbs: RefCell<Uverbs>,
    now: RefCell<u64>,
    /// Contexts the pumps said are owed a doorbell, since the last take.
    wakes: RefCell<verbs_ring::wake::ContextSet>,
}

impl Appliance {
    fn new(n: u8) -> Appliance {
        let node = Node::new(n, 4 << 20);
        let params = LayoutParams { num_contexts: 2, queue_area_size: 256 << 10, ..LayoutParams::default() };
        let layout = Layout::new(node.shm.len() as u64, params).unwrap();
        let fw = Firmware::new(&*node.shm, layout, Limits::default(), 16).unwrap();
        let a = Appliance {
            node,
            fw: RefCell::new(fw),
            uverbs: RefCell::default(),
            now: RefCell::new(0),
            wakes: RefCell::default(),
        };
        let mut host = a.attach(1);
        let add = LinkAddReq { dev_name: name("rxe0"), link_type: name("rxe"), netdev: name("eth0") };
        let dev: HandleResp = host.call(&*node.shm, nr::LINK_ADD, &add, || a.step()).unwrap();
        assert_eq!(dev.handle, 0);
        host.detach(&*node.shm).unwrap();
        a.step();
        a
    }

    fn attach(&self, pid: u32) -> HostContext {
        HostContext::attach(&*self.node.shm, pid).unwrap()
    }

    /// One firmware tick and one pump, 100 µs later than the last.
    fn step(&self) -> bool {
        let now = {
            let mut t = self.now.borrow_mut();
            *t += 100;
            *t
        };
        let mut fw = self.fw.borrow_mut();
        let (mut uverbs, mut node) = (self.uverbs.borrow_mut(), self.node);
        let mut p = uverbs.provider(&mut node);
        deliver_events(fw.dispatcher_mut(), &mut p);
        let ok = fw.tick(&*self.node.shm, &mut p).is_ok();
        let r = pump(fw.dispatcher_mut(), &mut p, Instant::from_micros(now));
        self.wakes.borrow_mut().extend(&r.wake);
        let sent = &self.node.sent;
        self.node.with_first_transport(|t| t.poll(Instant::from_micros(now), &mut *sent.borrow_mut()));
        ok
    }

    fn call<Req: Wire, Resp: Wire>(&self, host: &mut HostContext, n: u16, req: &Req) -> Result<Resp, HostError> {
        host.call(&*self.node.shm, n, req, || self.step())
    }
}

/// Move the frames each transport sent into the other.
fn exchange(a: &Appliance, b: &Appliance) -> usize {
    let mut moved = 0;
    for (from, to) in [(a, b), (b, a)] {
        let frames = core::mem::take(&mut from.node.sent.borrow_mut().frames);
        moved += frames.len();
        let now = Instant::from_micros(*to.now.borrow());
        for f in frames {
            let sent = &to.node.sent;
            to.node.with_first_transport(|t| t.receive(&f, now, &mut *sent.borrow_mut()));
        }
    }
    moved
}

/// What a host needs of one QP: its rings and the MR behind it.
struct Side {
    host: HostContext,
    pd: u32,
    cq: u32,
    cq_ring: Consumer,
    qp: CreateQpResp,
    sq: Producer,
    rq: Producer,
    mr: RegMrResp,
    buf: u64,
}

fn geo(a: &Appliance, p: verbs_ring::abi::RingPlacement) -> RingGeometry {
    RingGeometry::new(p, a.node.shm.len()).unwrap()
}

fn setup(a: &Appliance, pid: u32, mr_access: u32) -> Side {
    let mut host = a.attach(pid);
    let pd: HandleResp = a.call(&mut host, nr::ALLOC_PD, &DevReq { dev_index: 0, reserved: 0 }).unwrap();
    let (buf, _) = host.buf_area();
    let mr: RegMrResp = a
        .call(
            &mut host,
            nr::REG_MR,
            &RegMrReq { start: buf, length: 64 << 10, pd_handle: pd.handle, access: mr_access, iova: buf },
        )
        .unwrap();
    let cq: CreateCqResp = a
        .call(&mut host, nr::CREATE_CQ, &CreateCqReq { user_handle: 7, dev_index: 0, cqe: 16, ..Default::default() })
        .unwrap();
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 64 };
    let req = CreateQpReq {
        user_handle: 9,
        pd_handle: pd.handle,
        send_cq_handle: cq.cq_handle,
        recv_cq_handle: cq.cq_handle,
        srq_handle: 0,
        cap,
        qp_type: qp_type::RC,
        sq_sig_all: 0,
        reserved: [0; 2],
    };
    let qp: CreateQpResp = a.call(&mut host, nr::CREATE_QP, &req).unwrap();
    let (sq, rq) = (Producer::new(geo(a, qp.sq)), Producer::new(geo(a, qp.rq)));
    Side { host, pd: pd.handle, cq: cq.cq_handle, cq_ring: Consumer::new(geo(a, cq.ring)), qp, sq, rq, mr, buf }
}

fn modify(a: &Appliance, s: &mut Side, mask: u32, attr: QpAttr) -> Result<Empty, HostError> {
    a.call(
        &mut s.host,
        nr::MODIFY_QP,
        &ModifyQpReq { qp_handle: s.qp.qp_handle, attr_mask: mask, attr, ..Default::default() },
    )
}

fn ipv4_gid(n: u8) -> [u8; 16] {
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, n]
}

/// The link-local GID of node `n` (fe80:: and the EUI-64 of 52:54:00:00:00:0n).
fn link_local_gid(n: u8) -> [u8; 16] {
    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0, 0, n]
}

/// The global IPv6 GID of node `n` (2001:db8::n).
fn global_gid(n: u8) -> [u8; 16] {
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, n]
}

/// RESET -> INIT -> RTR -> RTS towards `peer` (GID index 1, the IPv4 one).
fn connect(a: &Appliance, s: &mut Side, peer_qpn: u32, peer: u8) {
    connect_via(a, s, peer_qpn, ipv4_gid(peer), 1);
}

/// RESET -> INIT -> RTR -> RTS towards `dgid` from GID `sgid_index`.
fn connect_via(a: &Appliance, s: &mut Side, peer_qpn: u32, dgid: [u8; 16], sgid_index: u8) {
    let init = QpAttr {
        qp_state: qp_state::INIT,
        port_num: 1,
        qp_access_flags: access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ,
        ..Default::default()
    };
    let m = qp_attr_mask::STATE | qp_attr_mask::PKEY_INDEX | qp_attr_mask::PORT | qp_attr_mask::ACCESS_FLAGS;
    modify(a, s, m, init).unwrap();
    let rtr = QpAttr {
        qp_state: qp_state::RTR,
        path_mtu: 3,
        dest_qp_num: peer_qpn,
        rq_psn: 100,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        ah_attr: AhAttr { dgid, sgid_index, hop_limit: 1, is_global: 1, port_num: 1, ..Default::default() },
        ..Default::default()
    };
    let m = qp_attr_mask::STATE
        | qp_attr_mask::AV
        | qp_attr_mask::PATH_MTU
        | qp_attr_mask::DEST_QPN
        | qp_attr_mask::RQ_PSN
        | qp_attr_mask::MAX_DEST_RD_ATOMIC
        | qp_attr_mask::MIN_RNR_TIMER;
    // The ARP answer takes two asks: the host retries EAGAIN.
    let mut tries = 0;
    loop {
        match modify(a, s, m, rtr) {
            Ok(_) => break,
            Err(HostError::Status(Status::EAGAIN)) if tries < 5 => tries += 1,
            Err(e) => panic!("RTR: {e:?}"),
        }
    }
    assert!(tries > 0, "the first RTR should have found ARP pending");
    let rts = QpAttr {
        qp_state: qp_state::RTS,
        sq_psn: 100,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
        ..Default::default()
    };
    let m = qp_attr_mask::STATE
        | qp_attr_mask::SQ_PSN
        | qp_attr_mask::TIMEOUT
        | qp_attr_mask::RETRY_CNT
        | qp_attr_mask::RNR_RETRY
        | qp_attr_mask::MAX_QP_RD_ATOMIC;
    modify(a, s, m, rts).unwrap();
}

fn post_send(a: &Appliance, sq: &mut Producer, w: verbs_ring::abi::SendWqe, sges: &[Sge]) {
    let mut e = vec![0u8; sq.geometry().entry_size()];
    wqe::encode_send(&mut e, &w, sges).unwrap();
    sq.push(&*a.node.shm, &e).unwrap();
}

fn post_recv(a: &Appliance, rq: &mut Producer, wr_id: u64, sges: &[Sge]) {
    let mut e = vec![0u8; rq.geometry().entry_size()];
    wqe::encode_recv(&mut e, wr_id, sges).unwrap();
    rq.push(&*a.node.shm, &e).unwrap();
}

/// Run both appliances and the wire until `s` has a CQE.
fn wait_cqe(a: &Appliance, b: &Appliance, s: &mut Side, mem: &HeapShm) -> Cqe {
    for _ in 0..10_000 {
        let mut buf = [0u8; Cqe::SIZE];
        if s.cq_ring.pop(mem, &mut buf).unwrap() {
            return Cqe::decode(&buf).unwrap();
        }
        a.step();
        b.step();
        exchange(a, b);
    }
    panic!("no completion");
}

fn pair() -> (Appliance, Appliance) {
    let (a, b) = (Appliance::new(1), Appliance::new(2));
    a.node.arp.borrow_mut().insert(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), (2, b.node.mac()));
    b.node.arp.borrow_mut().insert(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), (2, a.node.mac()));
    (a, b)
}

/// RoCE v2 over IPv6, as `ibv_rc_pingpong -g 0` (the link-local GID) and
/// with a global GID sets it up: the next hop is asked of the IPv6 neighbour
/// table (EAGAIN while it resolves, as for ARP; a link-local GID is not
/// taken apart for its MAC, as Linux does only for RoCE v1), the frames carry
/// an IPv6 header with flow label 0 and the route's hop limit (64, not the 1
/// rc_pingpong asks for), from the connection's UDP source port, and the
/// SEND arrives.
#[test]
fn rc_over_ipv6_gids_resolves_through_neighbour_discovery() {
    use crate::wire::frame::{IpPath, parse};
    for (sgid_index, gid) in [(0u8, link_local_gid as fn(u8) -> [u8; 16]), (2, global_gid)] {
        let (a, b) = (Appliance::new(1), Appliance::new(2));
        let v6 = |n| IpAddr::V6(core::net::Ipv6Addr::from(gid(n)));
        a.node.arp.borrow_mut().insert(v6(2), (2, b.node.mac()));
        b.node.arp.borrow_mut().insert(v6(1), (2, a.node.mac()));
        let (mut x, mut y) = (setup(&a, 10, access::LOCAL_WRITE), setup(&b, 20, access::LOCAL_WRITE));
        let (xq, yq) = (x.qp.qp_num, y.qp.qp_num);
        connect_via(&a, &mut x, yq, gid(2), sgid_index);
        connect_via(&b, &mut y, xq, gid(1), sgid_index);
        let q: verbs_ring::cmd::QueryQpResp = a
            .call(&mut x.host, nr::QUERY_QP, &verbs_ring::cmd::QueryQpReq { qp_handle: x.qp.qp_handle, attr_mask: 0 })
            .unwrap();
        assert_eq!(q.attr.ah_attr.hop_limit, crate::uverbs::ROUTE_HOP_LIMIT);

        let (am, bm) = (a.node.shm.clone(), b.node.shm.clone());
        let msg: Vec<u8> = (0..2000u32).map(|i| (i * 3) as u8).collect();
        am.write(x.buf as usize, &msg).unwrap();
        post_recv(&b, &mut y.rq, 0x21, &[Sge { addr: y.buf, length: 4096, lkey: y.mr.lkey }]);
        let send = verbs_ring::abi::SendWqe {
            wr_id: 0x12,
            opcode: wr_opcode::SEND,
            send_flags: send_flags::SIGNALED,
            ..Default::default()
        };
        post_send(&a, &mut x.sq, send, &[Sge { addr: x.buf, length: 2000, lkey: x.mr.lkey }]);
        a.step();
        let first = a.node.sent.borrow().frames.first().cloned().expect("a frame went out");
        let rx = parse(&first).expect("our own frame parses, ICRC included");
        let path = rx.repr.path;
        let want =
            IpPath::V6 { src: crate::wire::Ipv6Address(gid(1)), dst: crate::wire::Ipv6Address(gid(2)), flow_label: 0 };
        assert_eq!((path.ip, path.hop_limit, path.dst_mac), (want, 64, b.node.mac()));
        assert_eq!(path.src_port, crate::wire::sport::src_port_for_connection(0, xq, yq));
        let rc = wait_cqe(&a, &b, &mut y, &bm);
        assert_eq!((rc.wr_id, rc.status, rc.byte_len, rc.src_qp), (0x21, wc_status::SUCCESS, 2000, xq));
        let mut got = vec![0u8; 2000];
        bm.read(y.buf as usize, &mut got).unwrap();
        assert_eq!(got, msg);
        let sc = wait_cqe(&a, &b, &mut x, &am);
        assert_eq!((sc.wr_id, sc.status), (0x12, wc_status::SUCCESS));
    }
}

#[test]
fn multicast_gids_map_to_ethernet_groups() {
    use crate::uverbs::multicast_mac;
    let v6 = Gid(core::net::Ipv6Addr::new(0xff0e, 0, 0, 0, 0, 0, 0x1234, 0x5678).octets());
    assert_eq!(multicast_mac(&v6), Some(MacAddr([0x33, 0x33, 0x12, 0x34, 0x56, 0x78])));
    let v4 = Gid::from_ipv4(Ipv4Addr::new(239, 129, 2, 3));
    assert_eq!(multicast_mac(&v4), Some(MacAddr([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03])));
    assert_eq!(multicast_mac(&Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1))), None);
    assert_eq!(multicast_mac(&Gid(link_local_gid(1))), None);
    assert_eq!(crate::uverbs::gid_ip(&Gid(ipv4_gid(3))), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)));
}

#[test]
fn rc_send_write_read_through_the_rings() {
    let (a, b) = pair();
    let all = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
    let (mut x, mut y) = (setup(&a, 10, all), setup(&b, 20, all));
    assert!(x.qp.qp_num >= 16 && y.qp.qp_num >= 16);
    let (xq, yq) = (x.qp.qp_num, y.qp.qp_num);
    connect(&a, &mut x, yq, 2);
    connect(&b, &mut y, xq, 1);
    let (am, bm) = (a.node.shm.clone(), b.node.shm.clone());

    // SEND 3000 bytes (three packets at MTU 1024) into a posted receive.
    let msg: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    am.write(x.buf as usize, &msg).unwrap();
    post_recv(&b, &mut y.rq, 0x77, &[Sge { addr: y.buf + 100, length: 4096, lkey: y.mr.lkey }]);
    let send = verbs_ring::abi::SendWqe {
        wr_id: 0x55,
        opcode: wr_opcode::SEND_WITH_IMM,
        send_flags: send_flags::SIGNALED,
        imm_data: 0xabcd,
        ..Default::default()
    };
    post_send(&a, &mut x.sq, send, &[Sge { addr: x.buf, length: 3000, lkey: x.mr.lkey }]);
    let rc = wait_cqe(&a, &b, &mut y, &bm);
    assert_eq!((rc.wr_id, rc.status, rc.opcode, rc.byte_len), (0x77, wc_status::SUCCESS, wc_opcode::RECV, 3000));
    assert_eq!((rc.qp_num, rc.src_qp, rc.imm_data), (yq, xq, 0xabcd));
    assert_ne!(rc.wc_flags & verbs_ring::abi::wc_flags::WITH_IMM, 0);
    let sc = wait_cqe(&a, &b, &mut x, &am);
    assert_eq!((sc.wr_id, sc.status, sc.opcode, sc.qp_num), (0x55, wc_status::SUCCESS, wc_opcode::SEND, xq));
    let mut got = vec![0u8; 3000];
    bm.read((y.buf + 100) as usize, &mut got).unwrap();
    assert_eq!(got, msg);

    // WRITE 5000 bytes from y into x's MR at offset 8192, then READ them
    // back into y at offset 20000.
    let data: Vec<u8> = (0..5000u32).map(|i| (i ^ 0x5a) as u8).collect();
    bm.write((y.buf + 4096) as usize, &data).unwrap();
    let write = verbs_ring::abi::SendWqe {
        wr_id: 1,
        opcode: wr_opcode::RDMA_WRITE,
        send_flags: send_flags::SIGNALED,
        remote_addr: x.buf + 8192,
        rkey: x.mr.rkey,
        ..Default::default()
    };
    post_send(&b, &mut y.sq, write, &[Sge { addr: y.buf + 4096, length: 5000, lkey: y.mr.lkey }]);
    let wc = wait_cqe(&a, &b, &mut y, &bm);
    assert_eq!((wc.wr_id, wc.status, wc.opcode, wc.byte_len), (1, 0, wc_opcode::RDMA_WRITE, 5000));
    let mut got = vec![0u8; 5000];
    am.read((x.buf + 8192) as usize, &mut got).unwrap();
    assert_eq!(got, data);
    let read = verbs_ring::abi::SendWqe { wr_id: 2, opcode: wr_opcode::RDMA_READ, ..write };
    post_send(&b, &mut y.sq, read, &[Sge { addr: y.buf + 20000, length: 5000, lkey: y.mr.lkey }]);
    let wc = wait_cqe(&a, &b, &mut y, &bm);
    assert_eq!((wc.wr_id, wc.status, wc.opcode, wc.byte_len), (2, 0, wc_opcode::RDMA_READ, 5000));
    bm.read((y.buf + 20000) as usize, &mut got).unwrap();
    assert_eq!(got, data);

    // A WQE that fails validation completes in error without reaching the
    // wire: an opcode that is none.
    let sge = Sge { addr: y.buf, length: 1, lkey: y.mr.lkey };
    post_send(&b, &mut y.sq, verbs_ring::abi::SendWqe { wr_id: 3, opcode: 99, ..write }, &[sge]);
    let wc = wait_cqe(&a, &b, &mut y, &bm);
    assert_eq!((wc.wr_id, wc.status), (3, wc_status::LOC_QP_OP_ERR));
    // Inline data travels in the WQE itself (the entry has room for 112).
    let mut e = vec![0u8; y.sq.geometry().entry_size()];
    wqe::encode_send_inline(&mut e, &verbs_ring::abi::SendWqe { wr_id: 6, ..write }, &[0xee; 100]).unwrap();
    y.sq.push(&*bm, &e).unwrap();
    let wc = wait_cqe(&a, &b, &mut y, &bm);
    assert_eq!((wc.wr_id, wc.status, wc.byte_len), (6, wc_status::SUCCESS, 100));
    am.read((x.buf + 8192) as usize, &mut got[..101]).unwrap();
    assert_eq!((&got[..100], got[100]), (&[0xee; 100][..], data[100]));

    // A READ beyond the remote MR: the responder NAKs, the QP goes to ERR.
    let bad = verbs_ring::abi::SendWqe { wr_id: 4, remote_addr: x.buf + (64 << 10) - 10, ..read };
    post_send(&b, &mut y.sq, bad, &[Sge { addr: y.buf, length: 100, lkey: y.mr.lkey }]);
    let wc = wait_cqe(&a, &b, &mut y, &bm);
    assert_eq!((wc.wr_id, wc.status), (4, wc_status::REM_ACCESS_ERR));

    // Detaching destroys everything in the transport too.
    let live = |ap: &Appliance| ap.uverbs.borrow().live();
    assert_eq!(live(&a), [1, 0, 0, 1, 1, 1]);
    x.host.detach(&*am).unwrap();
    y.host.detach(&*bm).unwrap();
    a.step();
    b.step();
    assert_eq!((live(&a), live(&b)), ([0; 6], [0; 6]));
    assert_eq!(a.node.with_first_transport(|t| t.qp_handles().is_empty()), Some(true));
}

/// A receive posted to the ring, then a SEND for it from the peer (the
/// host told the peer to go only once it had posted): when the frame is
/// taken in, the receive must already be in the transport. The poll loop
/// runs `pump_receives` before the network for that; without it, the frame
/// finds the receive queue empty (RC: an RNR NAK and a retry; UD: the
/// message lost), as this test shows first.
#[test]
fn receives_pumped_before_the_frames_are_there_for_them() {
    let rnr_naks = |ap: &Appliance| {
        ap.node.with_first_transport(|t| t.stats().get(crate::core::counters::RxeCounter::SendRnrErr)).unwrap()
    };
    for pump_first in [false, true] {
        let (a, b) = pair();
        let all = access::LOCAL_WRITE | access::REMOTE_WRITE;
        let (mut x, mut y) = (setup(&a, 10, all), setup(&b, 20, all));
        let (xq, yq) = (x.qp.qp_num, y.qp.qp_num);
        connect(&a, &mut x, yq, 2);
        connect(&b, &mut y, xq, 1);
        post_recv(&b, &mut y.rq, 0x71, &[Sge { addr: y.buf, length: 64, lkey: y.mr.lkey }]);
        let send = verbs_ring::abi::SendWqe {
            wr_id: 0x51,
            opcode: wr_opcode::SEND,
            send_flags: send_flags::SIGNALED,
            ..Default::default()
        };
        post_send(&a, &mut x.sq, send, &[Sge { addr: x.buf, length: 16, lkey: x.mr.lkey }]);
        a.step();
        if pump_first {
            let mut fw = b.fw.borrow_mut();
            let (mut uverbs, mut node) = (b.uverbs.borrow_mut(), b.node);
            let mut p = uverbs.provider(&mut node);
            let moved = pump_receives(fw.dispatcher_mut(), &mut p, Instant::from_micros(*b.now.borrow()));
            assert_eq!((moved.recvs, moved.sends), (1, 0));
        }
        assert!(exchange(&a, &b) >= 1, "the SEND");
        assert_eq!(rnr_naks(&b), u64::from(!pump_first), "pump first: {pump_first}");
        let bm = b.node.shm.clone();
        let rc = wait_cqe(&a, &b, &mut y, &bm);
        assert_eq!((rc.wr_id, rc.status, rc.byte_len), (0x71, wc_status::SUCCESS, 16));
    }
}

/// SRQ_RESIZE over the ring: RESIZE_SRQ moves the receives the pump had
/// not yet taken to the head of the new ring (the host goes on after them),
/// the new size counts them with the ones the transport holds, and SENDs
/// consume every receive in the order posted.
#[test]
fn resize_srq_keeps_the_receives_the_pump_had_not_taken() {
    let (a, b) = pair();
    let all = access::LOCAL_WRITE | access::REMOTE_WRITE;
    let (mut x, mut y) = (setup(&a, 10, all), setup(&b, 20, all));
    let req = CreateSrqReq { pd_handle: y.pd, max_wr: 2, max_sge: 1, ..Default::default() };
    let srq: CreateSrqResp = b.call(&mut y.host, nr::CREATE_SRQ, &req).unwrap();
    let req = CreateQpReq {
        user_handle: 11,
        pd_handle: y.pd,
        send_cq_handle: y.cq,
        recv_cq_handle: y.cq,
        srq_handle: srq.srq_handle,
        cap: QpCap { max_send_wr: 8, max_recv_wr: 0, max_send_sge: 1, max_recv_sge: 0, max_inline_data: 0 },
        qp_type: qp_type::RC,
        sq_sig_all: 0,
        reserved: [0; 2],
    };
    y.qp = b.call(&mut y.host, nr::CREATE_QP, &req).unwrap();
    let (xq, yq) = (x.qp.qp_num, y.qp.qp_num);
    connect(&a, &mut x, yq, 2);
    connect(&b, &mut y, xq, 1);
    let into = |i: u64| [Sge { addr: y.buf + i * 64, length: 64, lkey: y.mr.lkey }];
    let mut ring = Producer::new(geo(&b, srq.ring));
    post_recv(&b, &mut ring, 1, &into(1));
    post_recv(&b, &mut ring, 2, &into(2));
    // The command runs in the next tick, before its pump: both are unread.
    let resize = |max_wr| ResizeSrqReq { srq_handle: srq.srq_handle, max_wr };
    let r: ResizeSrqResp = b.call(&mut y.host, nr::RESIZE_SRQ, &resize(3)).unwrap();
    assert_eq!((r.max_wr, r.moved, r.ring.entries), (4, 2, 4));
    let mut ring = Producer::taking_over(geo(&b, r.ring), r.moved);
    post_recv(&b, &mut ring, 3, &into(3));
    post_recv(&b, &mut ring, 4, &into(4));
    let refused = b.call::<_, ResizeSrqResp>(&mut y.host, nr::RESIZE_SRQ, &resize(2));
    assert_eq!(refused.unwrap_err(), HostError::Status(Status::EINVAL), "four are posted");
    for i in 0..4 {
        let send = verbs_ring::abi::SendWqe { wr_id: 0x50 + i, opcode: wr_opcode::SEND, ..Default::default() };
        post_send(&a, &mut x.sq, send, &[Sge { addr: x.buf, length: 16, lkey: x.mr.lkey }]);
    }
    let bm = b.node.shm.clone();
    let got: Vec<(u64, u32)> = (0..4).map(|_| wait_cqe(&a, &b, &mut y, &bm)).map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        got,
        [(1, wc_status::SUCCESS), (2, wc_status::SUCCESS), (3, wc_status::SUCCESS), (4, wc_status::SUCCESS)]
    );
}

#[test]
fn refusals() {
    let (a, _b) = pair();
    let mem = a.node.shm.clone();
    let mut x = setup(&a, 10, access::LOCAL_WRITE);
    let mut other = a.attach(11);

    // Another context's handles are not there.
    let r = a.call::<_, HandleResp>(
        &mut other,
        nr::CREATE_AH,
        &CreateAhReq { pd_handle: x.pd, reserved: 0, attr: AhAttr::default() },
    );
    assert_eq!(r.unwrap_err(), HostError::Status(Status::ENOENT));
    let r = a.call::<_, Empty>(&mut other, nr::DEALLOC_PD, &HandleReq { handle: x.pd, reserved: 0 });
    assert_eq!(r.unwrap_err(), HostError::Status(Status::ENOENT));
    let r = a.call::<_, Empty>(
        &mut other,
        nr::MODIFY_QP,
        &ModifyQpReq {
            qp_handle: x.qp.qp_handle,
            attr_mask: qp_attr_mask::STATE,
            attr: QpAttr { qp_state: qp_state::ERR, ..Default::default() },
            ..Default::default()
        },
    );
    assert_eq!(r.unwrap_err(), HostError::Status(Status::ENOENT));

    // Access: remote write without local write, zero-based, memory outside
    // the context's buffer area (the other context's).
    let (buf, _) = x.host.buf_area();
    let mr = |start, access| RegMrReq { start, length: 4096, pd_handle: x.pd, access, iova: start };
    let r = a.call::<_, RegMrResp>(&mut x.host, nr::REG_MR, &mr(buf, access::REMOTE_WRITE));
    assert_eq!(r.unwrap_err(), HostError::Status(Status::EINVAL));
    let r = a.call::<_, RegMrResp>(&mut x.host, nr::REG_MR, &mr(buf, access::ZERO_BASED));
    assert_eq!(r.unwrap_err(), HostError::Status(Status::EOPNOTSUPP));
    let r = a.call::<_, RegMrResp>(&mut x.host, nr::REG_MR, &mr(other.buf_area().0, access::LOCAL_WRITE));
    assert_eq!(r.unwrap_err(), HostError::Status(Status::EFAULT));
    // A PD with an MR and a QP is busy.
    let r = a.call::<_, Empty>(&mut x.host, nr::DEALLOC_PD, &HandleReq { handle: x.pd, reserved: 0 });
    assert_eq!(r.unwrap_err(), HostError::Status(Status::EBUSY));

    // Modify QP: a transition the table does not have, a missing attribute,
    // a state number that is none, an unknown MTU, an address that does not
    // resolve, and an extra attribute.
    let init = QpAttr { qp_state: qp_state::INIT, port_num: 1, ..Default::default() };
    let base = qp_attr_mask::STATE | qp_attr_mask::PKEY_INDEX | qp_attr_mask::PORT | qp_attr_mask::ACCESS_FLAGS;
    let rtr = QpAttr { qp_state: qp_state::RTR, ..Default::default() };
    assert_eq!(modify(&a, &mut x, qp_attr_mask::STATE, rtr).unwrap_err(), HostError::Status(Status::EINVAL));
    assert_eq!(modify(&a, &mut x, qp_attr_mask::STATE, init).unwrap_err(), HostError::Status(Status::EINVAL));
    let nine = QpAttr { qp_state: 9, ..init };
    assert_eq!(modify(&a, &mut x, base, nine).unwrap_err(), HostError::Status(Status::EINVAL));
    assert_eq!(modify(&a, &mut x, base | qp_attr_mask::QKEY, init).unwrap_err(), HostError::Status(Status::EINVAL));
    modify(&a, &mut x, base, init).unwrap();
    let rtr = QpAttr {
        qp_state: qp_state::RTR,
        path_mtu: 7,
        dest_qp_num: 17,
        ah_attr: AhAttr { dgid: ipv4_gid(9), sgid_index: 1, is_global: 1, port_num: 1, ..Default::default() },
        ..Default::default()
    };
    let m = qp_attr_mask::STATE
        | qp_attr_mask::AV
        | qp_attr_mask::PATH_MTU
        | qp_attr_mask::DEST_QPN
        | qp_attr_mask::RQ_PSN
        | qp_attr_mask::MAX_DEST_RD_ATOMIC
        | qp_attr_mask::MIN_RNR_TIMER;
    assert_eq!(modify(&a, &mut x, m, rtr).unwrap_err(), HostError::Status(Status::EINVAL), "MTU 7");
    let rtr = QpAttr { path_mtu: 3, ..rtr };
    assert_eq!(modify(&a, &mut x, m, rtr).unwrap_err(), HostError::Status(Status::EHOSTUNREACH));
    let no_grh = QpAttr { ah_attr: AhAttr { is_global: 0, ..rtr.ah_attr }, ..rtr };
    assert_eq!(modify(&a, &mut x, m, no_grh).unwrap_err(), HostError::Status(Status::EINVAL));
    // A port the device does not have is refused before any neighbour is
    // looked up (not EHOSTUNREACH): rxe's only port is 1.
    for port_num in [0, 2] {
        let other_port = QpAttr { ah_attr: AhAttr { port_num, ..rtr.ah_attr }, ..rtr };
        assert_eq!(modify(&a, &mut x, m, other_port).unwrap_err(), HostError::Status(Status::EINVAL), "{port_num}");
    }
    // A link-local GID needs no ARP: its MAC is in it.
    let mut ll = [0u8; 16];
    ll[..2].copy_from_slice(&[0xfe, 0x80]);
    ll[8..].copy_from_slice(&[0x50, 0x54, 0, 0xff, 0xfe, 0, 0, 2]);
    assert_eq!(mac_of_link_local(&Gid(ll)), Some(MacAddr([0x52, 0x54, 0, 0, 0, 2])));
    let q: verbs_ring::cmd::QueryQpResp = a
        .call(&mut x.host, nr::QUERY_QP, &verbs_ring::cmd::QueryQpReq { qp_handle: x.qp.qp_handle, attr_mask: 0 })
        .unwrap();
    assert_eq!((q.attr.qp_state, q.attr.port_num, q.qp_type), (qp_state::INIT, 1, qp_type::RC));

    // A WQE posted before RTS waits in the ring; when the QP goes to ERR it
    // flushes.
    let send = verbs_ring::abi::SendWqe { wr_id: 5, opcode: wr_opcode::SEND, ..Default::default() };
    post_send(&a, &mut x.sq, send, &[]);
    a.step();
    let mut b = [0u8; Cqe::SIZE];
    assert!(!x.cq_ring.pop(&*mem, &mut b).unwrap());
    let err = QpAttr { qp_state: qp_state::ERR, ..Default::default() };
    modify(&a, &mut x, qp_attr_mask::STATE, err).unwrap();
    a.step();
    assert!(x.cq_ring.pop(&*mem, &mut b).unwrap());
    let c = Cqe::decode(&b).unwrap();
    assert_eq!((c.wr_id, c.status), (5, wc_status::WR_FLUSH_ERR));

    // CQ overflow: 16 receives flushed into a full 16-entry ring plus more
    // are dropped and the context hears CQ_ERR.
    for i in 0..8 {
        post_recv(&a, &mut x.rq, 100 + i, &[]);
    }
    a.step();
    for i in 0..8 {
        post_recv(&a, &mut x.rq, 200 + i, &[]);
    }
    a.step();
    post_recv(&a, &mut x.rq, 300, &[]);
    a.step();
    assert_eq!(a.uverbs.borrow().cq_overruns(), 1);
    let ev: verbs_ring::cmd::AsyncEvent = a.call(&mut x.host, nr::GET_ASYNC_EVENT, &Empty {}).unwrap();
    assert_eq!((ev.event_type, ev.handle, ev.element), (verbs_ring::cmd::event_type::CQ_ERR, x.cq, 7));
}

#[test]
fn link_add_and_queries_through_the_ring() {
    let node = Node::new(1, 4 << 20);
    let mem = node.shm.clone();
    let params = LayoutParams { num_contexts: 2, queue_area_size: 64 << 10, ..LayoutParams::default() };
    let layout = Layout::new(mem.len() as u64, params).unwrap();
    let fw = RefCell::new(Firmware::new(&*mem, layout, Default::default(), 16).unwrap());
    let uverbs = RefCell::new(Uverbs::new());
    let tick = || {
        let mut node = node;
        fw.borrow_mut().tick(&*mem, &mut uverbs.borrow_mut().provider(&mut node)).is_ok()
    };
    let mut host = HostContext::attach(&*mem, 42).unwrap();

    let add = LinkAddReq { dev_name: name("rxe0"), link_type: name("rxe"), netdev: name("eth0") };
    let dev: HandleResp = host.call(&*mem, nr::LINK_ADD, &add, tick).unwrap();
    let link: LinkInfo = host.call(&*mem, nr::LINK_SHOW, &LinkShowReq { dev_index: 0, port_num: 0 }, tick).unwrap();
    assert_eq!(link.dev_index, dev.handle);
    assert_eq!(&link.dev_name[..5], b"rxe0\0");
    assert_eq!(&link.netdev[..5], b"eth0\0");
    assert_eq!(link.port_state, 4, "PORT_ACTIVE");
    assert_eq!(link.next, NO_MORE);

    let attr: cmd::DeviceAttr =
        host.call(&*mem, nr::QUERY_DEVICE, &DevReq { dev_index: dev.handle, reserved: 0 }, tick).unwrap();
    assert_eq!(attr.vendor_id, 0xffffff);
    assert_eq!(attr.node_guid, 0x5054_00ff_fe00_0001);
    assert_eq!(attr.max_qp, 1_048_560);
    let port: cmd::PortAttr =
        host.call(&*mem, nr::QUERY_PORT, &PortReq { dev_index: dev.handle, port_num: 1 }, tick).unwrap();
    assert_eq!((port.state, port.active_mtu, port.link_layer, port.gid_tbl_len), (4, 3, 2, 1024));
    let gid: GidEntry = host
        .call(&*mem, nr::QUERY_GID, &GidReq { dev_index: dev.handle, port_num: 1, index: 1, reserved: 0 }, tick)
        .unwrap();
    assert_eq!(gid.valid, 1);
    assert_eq!(gid.gid_type, cmd::gid_type::ROCE_V2);
    assert_eq!(gid.gid, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]);

    // Refusals come back as statuses: a taken netdev, an unknown device
    // (for a query and for an object).
    let again = host.call::<_, _, HandleResp>(&*mem, nr::LINK_ADD, &add, tick);
    assert!(matches!(again, Err(HostError::Status(_))), "{again:?}");
    let missing =
        host.call::<_, _, cmd::DeviceAttr>(&*mem, nr::QUERY_DEVICE, &DevReq { dev_index: 9, reserved: 0 }, tick);
    assert_eq!(missing.unwrap_err(), HostError::Status(Status::ENODEV));
    let pd = host.call::<_, _, HandleResp>(&*mem, nr::ALLOC_PD, &DevReq { dev_index: 9, reserved: 0 }, tick);
    assert_eq!(pd.unwrap_err(), HostError::Status(Status::ENODEV));

    // A device with objects cannot go; without them it can, and its
    // transport goes with it.
    let pd: HandleResp = host.call(&*mem, nr::ALLOC_PD, &DevReq { dev_index: dev.handle, reserved: 0 }, tick).unwrap();
    let busy = host.call::<_, _, Empty>(&*mem, nr::LINK_DEL, &DevReq { dev_index: dev.handle, reserved: 0 }, tick);
    assert_eq!(busy.unwrap_err(), HostError::Status(Status::EBUSY));
    let _: Empty = host.call(&*mem, nr::DEALLOC_PD, &HandleReq { handle: pd.handle, reserved: 0 }, tick).unwrap();
    let _: Empty = host.call(&*mem, nr::LINK_DEL, &DevReq { dev_index: dev.handle, reserved: 0 }, tick).unwrap();
    assert!(node.core.borrow().device_by_name("rxe0").is_none());
    assert!(node.with_first_transport(|_| ()).is_none());
}

/// The server is a client of the core: a port going down reaches every
/// context as PORT_ERR, and `rdma link delete` as DEVICE_FATAL, after which
/// the objects that lived on the device are gone and destroying their
/// handles succeeds (nothing is left to leak in the dispatcher).
#[test]
fn port_events_and_device_removal_reach_the_contexts() {
    use crate::core::netdev::{NetdevEvent, NetdevEventKind};
    use verbs_ring::cmd::event_type;
    let a = Appliance::new(1);
    let mut host = a.attach(7);
    let pd: HandleResp = a.call(&mut host, nr::ALLOC_PD, &DevReq { dev_index: 0, reserved: 0 }).unwrap();

    let mut down = a.node.net[0].clone();
    down.carrier = false;
    a.node.core.borrow_mut().netdev_event(NetdevEvent::new(NetdevEventKind::Change, down)).unwrap();
    a.node.core.borrow_mut().process_events();
    a.step();
    let ev: verbs_ring::cmd::AsyncEvent = a.call(&mut host, nr::GET_ASYNC_EVENT, &Empty {}).unwrap();
    assert_eq!((ev.event_type, ev.dev_index, ev.element), (event_type::PORT_ERR, 0, 1));

    let net = a.node.net.clone();
    a.node.core.borrow_mut().link_del(&net, "rxe0").unwrap();
    a.step();
    let ev: verbs_ring::cmd::AsyncEvent = a.call(&mut host, nr::GET_ASYNC_EVENT, &Empty {}).unwrap();
    assert_eq!((ev.event_type, ev.dev_index), (event_type::DEVICE_FATAL, 0));
    assert_eq!(a.uverbs.borrow().live(), [0; 6]);
    let done: Result<Empty, _> = a.call(&mut host, nr::DEALLOC_PD, &HandleReq { handle: pd.handle, reserved: 0 });
    assert!(done.is_ok(), "{done:?}");
    // A new device is usable again: its objects are not mistaken for the gone ones.
    let add = LinkAddReq { dev_name: name("rxe0"), link_type: name("rxe"), netdev: name("eth0") };
    let dev: HandleResp = a.call(&mut host, nr::LINK_ADD, &add).unwrap();
    let pd: Result<HandleResp, _> = a.call(&mut host, nr::ALLOC_PD, &DevReq { dev_index: dev.handle, reserved: 0 });
    assert!(pd.is_ok(), "{pd:?}");
}

// ---------------------------------------------------------------------------
// Hostile commands against the real provider.
// ---------------------------------------------------------------------------

/// Cases of the hostile-command fuzzer: `FUZZ_CASES` commands in sequences
/// of 30 on average (`make fuzz` gives 10 million commands), else 64
/// sequences.
fn hostile_sequences() -> u32 {
    match std::env::var("FUZZ_CASES").ok().and_then(|v| v.replace('_', "").parse::<u32>().ok()) {
        Some(n) => (n / 30).max(64),
        None => 64,
    }
}

/// A command of the table (or an unknown number) in `ctx` with a payload of
/// random words, most of them small numbers so that they name live handles
/// (handles start at 1) and valid states, of the request's size most of the
/// time (else any), with a length field that mostly tells the truth.
fn hostile_command(ctx: u32) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let specs: Vec<(u16, usize)> =
        verbs_ring::table::TABLE.iter().map(|r| (r.nr, r.req_size)).chain([(0, 8), (0x7f, 0), (0xffff, 16)]).collect();
    (
        prop::sample::select(specs),
        any::<u32>(),
        prop::collection::vec((prop::bool::weighted(0.7), any::<u32>()), 64),
        prop::option::weighted(0.1, 0usize..256),
        prop::bool::weighted(0.95),
        any::<u16>(),
        prop::bool::weighted(0.97),
    )
        .prop_map(move |((nr, req_size), seq, words, other_size, honest, len, own_ctx)| {
            let mut payload = Vec::new();
            for (small, w) in words {
                // Half the small ones 0..4: device 0, port 1, the first handles.
                let w = match (small, w & 1 == 0) {
                    (false, _) => w,
                    (true, true) => (w >> 1) % 4,
                    (true, false) => (w >> 1) % 24,
                };
                payload.extend_from_slice(&w.to_le_bytes());
            }
            payload.truncate(other_size.unwrap_or(req_size));
            let len = if honest { payload.len() as u16 } else { len };
            let ctx = if own_ctx { ctx } else { ctx ^ 1 };
            let mut b = vec![0u8; verbs_ring::cmd::HEADER_SIZE];
            verbs_ring::cmd::CmdHeader { cmd: nr, len, ctx, seq, ..Default::default() }.encode(&mut b).unwrap();
            b.extend_from_slice(&payload);
            b
        })
}

std::thread_local! {
    /// One appliance per test thread for every case: each case attaches a
    /// context, and what it leaves behind must be reclaimed by its detach.
    static HOSTILE: Appliance = Appliance::new(1);
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: hostile_sequences(), ..Default::default() })]

    /// A host context with live objects (PD, MR, CQ, RC QP) sends sequences of
    /// hostile commands straight to the dispatcher over the real provider and
    /// rxe transport: nothing panics, every success has the command's
    /// response size, and the context's detach leaves no object in the
    /// dispatcher or the provider.
    #[test]
    fn hostile_command_sequences_against_the_real_provider(
        cmds in proptest::collection::vec(hostile_command(0), 1..60),
    ) {
        HOSTILE.with(|a| -> Result<(), proptest::test_runner::TestCaseError> {
            let all = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
            let s = setup(a, 100, all);
            let ctx = s.host.ctx();
            let mut resp = vec![0u8; 512];
            for c in cmds {
                let mut c = c;
                // The strategy's context 0 stands for this case's.
                let own = u32::from_le_bytes([c[8], c[9], c[10], c[11]]) == 0;
                c[8..12].copy_from_slice(&(if own { ctx } else { ctx ^ 1 }).to_le_bytes());
                let n = {
                    let mut fw = a.fw.borrow_mut();
                    let (mut uverbs, mut node) = (a.uverbs.borrow_mut(), a.node);
                    let mut p = uverbs.provider(&mut node);
                    fw.dispatcher_mut().handle(&*a.node.shm, &mut p, ctx, &c, &mut resp)
                };
                let hdr = verbs_ring::cmd::CmdHeader::decode(&resp[..n]);
                proptest::prop_assert!(hdr.is_some(), "no response header");
                let hdr = hdr.unwrap();
                if hdr.status == 0 {
                    let spec = verbs_ring::table::lookup(hdr.cmd);
                    proptest::prop_assert!(spec.is_some());
                    proptest::prop_assert_eq!(usize::from(hdr.len), spec.unwrap().resp_size);
                }
                a.step();
            }
            s.host.detach(&*a.node.shm).unwrap();
            a.step();
            for kind in verbs_ring::dispatch::ObjKind::TEARDOWN_ORDER {
                proptest::prop_assert_eq!(a.fw.borrow().dispatcher().count(None, kind), 0, "{:?}", kind);
            }
            proptest::prop_assert_eq!(a.uverbs.borrow().live(), [0; 6]);
            // A LINK_DEL among the commands took rxe0 away: the next case needs it.
            if a.node.core.borrow().device_by_name("rxe0").is_none() {
                let mut host = a.attach(1);
                let add = LinkAddReq { dev_name: name("rxe0"), link_type: name("rxe"), netdev: name("eth0") };
                let _: HandleResp = host.call(&*a.node.shm, nr::LINK_ADD, &add, || a.step()).unwrap();
                host.detach(&*a.node.shm).unwrap();
                a.step();
            }
            Ok(())
        })?;
    }
}

/// `ibv_req_notify_cq` through the ring: a CQ armed for solicited
/// completions only stays armed through an ordinary SEND's receive and
/// fires, once, for a SEND with the solicited-event bit; an armed CQ fires
/// for the next completion of any kind. Each event names the owner's
/// context for its doorbell. And the pump's "work waiting" answers only
/// for entries posted since it last looked.
#[test]
fn armed_cqs_fire_for_the_completions_they_asked_for() {
    use verbs_ring::wake::CqArm;
    let (a, b) = pair();
    let (mut x, mut y) = (setup(&a, 10, access::LOCAL_WRITE), setup(&b, 20, access::LOCAL_WRITE));
    let (xq, yq) = (x.qp.qp_num, y.qp.qp_num);
    connect(&a, &mut x, yq, 2);
    connect(&b, &mut y, xq, 1);
    let (am, bm) = (a.node.shm.clone(), b.node.shm.clone());
    let y_ctx = y.host.ctx();
    let y_ring = *y.cq_ring.geometry();
    let mut arm = CqArm::default();
    arm.arm(&*bm, &y_ring, true).unwrap();
    b.wakes.take();
    for (wr_id, flags) in [(1u64, 0), (2, send_flags::SOLICITED)] {
        post_recv(&b, &mut y.rq, wr_id, &[Sge { addr: y.buf, length: 64, lkey: y.mr.lkey }]);
        let send = verbs_ring::abi::SendWqe {
            wr_id,
            opcode: wr_opcode::SEND,
            send_flags: send_flags::SIGNALED | flags,
            ..Default::default()
        };
        assert!(!a.uverbs.borrow_mut().rings_pending(&*am), "nothing posted yet");
        post_send(&a, &mut x.sq, send, &[Sge { addr: x.buf, length: 8, lkey: x.mr.lkey }]);
        assert!(a.uverbs.borrow_mut().rings_pending(&*am), "a send waits in the ring");
        let rc = wait_cqe(&a, &b, &mut y, &bm);
        assert_eq!((rc.wr_id, rc.status), (wr_id, wc_status::SUCCESS));
        let solicited = flags != 0;
        assert_eq!(arm.fired(&*bm, &y_ring).unwrap(), solicited, "send {wr_id}");
        assert_eq!(b.wakes.take().contains(y_ctx), solicited, "send {wr_id}");
        wait_cqe(&a, &b, &mut x, &am);
    }
    // Answered: no second event until armed again; then any completion fires.
    arm.arm(&*bm, &y_ring, false).unwrap();
    post_recv(&b, &mut y.rq, 3, &[Sge { addr: y.buf, length: 64, lkey: y.mr.lkey }]);
    let send = verbs_ring::abi::SendWqe {
        wr_id: 3,
        opcode: wr_opcode::SEND,
        send_flags: send_flags::SIGNALED,
        ..Default::default()
    };
    post_send(&a, &mut x.sq, send, &[Sge { addr: x.buf, length: 8, lkey: x.mr.lkey }]);
    wait_cqe(&a, &b, &mut y, &bm);
    assert!(arm.fired(&*bm, &y_ring).unwrap());
    assert!(b.wakes.take().contains(y_ctx));
    assert!(!a.wakes.take().contains(x.host.ctx()), "x never armed its CQ");
}
