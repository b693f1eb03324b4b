//! Capabilities advertised = capabilities implemented (issue 19, item 6): what
//! `ibv_devinfo -v` prints for an rxe device (the text `verbs_ring::show`
//! renders from `rxe_params::device_attr`, as the console and the host tool do)
//! is checked against what the transport accepts, claim by claim, in the
//! simulator (or, for what the device reports, in an RDMA core with an rxe
//! device). A capability bit or limit that nothing here exercises fails the
//! test; each probe fails when its behaviour is missing.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use core::net::Ipv4Addr;
use rdma::core::gid::Gid;
use rdma::core::netdev::MacAddr;
use rdma::core::port::{IbMtu, PortState};
use rdma::core::{
    Device, EventHandler, Guid, IbEvent, IbEventType, NetdevEvent, NetdevEventKind, NetdevInfo, RdmaCore, console,
    rxe_params,
};
use rdma::rxe::RxeDriver;
use rdma::rxe::ah::{AhAttr, AhError};
use rdma::rxe::device::Config;
use rdma::rxe::event::AsyncEvent;
use rdma::rxe::mcast;
use rdma::rxe::memory::FlatMemory;
use rdma::rxe::mr::AccessFlags;
use rdma::rxe::mw::MwType;
use rdma::rxe::qp::{MigState, QpAttr, QpCap, QpInitAttr};
use rdma::rxe::qp_state::{AttrMask, ModifyError, QpState, QpType};
use rdma::rxe::sim::{self, End, Faults, Link, MEM_BASE, Sim};
use rdma::rxe::sink::FrameSink;
use rdma::rxe::time::Instant;
use rdma::rxe::transport::{self, RxeTransport, VerbsError};
use rdma::rxe::wc::{WcStatus, WorkCompletion};
use rdma::rxe::wr::{MemOp, RecvWr, SendWr, Sge, UdDest, WrOpcode};
use rdma::wire::{
    AethRepr, BthRepr, DethRepr, Ecn, ExtHeaders, FrameRepr, IpPath, Ipv4Address, Opcode, Path, Psn, RoceRepr,
    Syndrome, feth, frame,
};
use verbs_ring::cmd::LinkInfo;
use verbs_ring::show::{DeviceView, devinfo};

const LIMIT: Instant = Instant::from_micros(10_000_000);

/// `ibv_devinfo -v` of an rxe device.
fn devinfo_text() -> (String, verbs_ring::cmd::DeviceAttr) {
    let attr = rdma::uverbs::device_attr(&rxe_params::device_attr(MacAddr([0x52, 0x54, 0, 0, 0, 1])), 1);
    let view = DeviceView { link: LinkInfo::default(), attr, ports: Vec::new() };
    let mut out = String::new();
    devinfo::write(&mut out, &view, true).expect("renders");
    (out, attr)
}

/// The flag names listed under `device_cap_flags:`.
fn cap_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("\tdevice_cap_flags:") {
            inside = true;
        } else if inside && line.starts_with("\t\t\t\t\t") {
            names.insert(line.trim().to_string());
        } else if inside {
            break;
        }
    }
    names
}

/// The number after `key` (e.g. `max_mw:`), and the hex word after `device_cap_flags_ex:`.
fn value(text: &str, key: &str) -> u64 {
    let line = text.lines().find(|l| l.trim_start().starts_with(key)).unwrap_or_else(|| panic!("{key} printed"));
    let v = line.trim_start()[key.len()..].split_whitespace().next().expect("a value");
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).expect("hex"),
        None => v.parse().expect("decimal"),
    }
}

fn setup(qp_type: QpType) -> (Sim, [End; 2]) {
    let mut sim = Sim::new(5, Faults::NONE, 1 << 20, Default::default());
    let ends = sim::connect(&mut sim, &Link { qp_type, ..Link::default() }).expect("connect");
    (sim, ends)
}

fn run(sim: &mut Sim, node: usize, end: &End, wr: &SendWr<'_>) -> Option<WorkCompletion> {
    sim.nodes[node].post_send(end.qp, wr).ok()?;
    let mut got = None;
    sim.run_until(LIMIT, |s| {
        got = got.or_else(|| sim::drain_cq(&mut s.nodes[node], end.cq).first().copied());
        got.is_some()
    });
    got
}

fn ok(wc: Option<WorkCompletion>) -> bool {
    wc.is_some_and(|w| w.status == WcStatus::Success)
}

/// MEM_MGT_EXTENSIONS: fast registration and local invalidation work.
fn fast_registration_works() -> bool {
    let (mut sim, [_, b]) = setup(QpType::Rc);
    let Ok(mr) = sim.nodes[1].alloc_mr(b.pd, 1) else { return false };
    if sim.nodes[1].map_mr_sg(mr, 0x1000, 64, 4096, &[MEM_BASE]).is_err() {
        return false;
    }
    let key = mr.raw() ^ 0x5A;
    let reg = SendWr::new(1, WrOpcode::RegMr, &[]).with_mem(MemOp::Reg { mr, key, access: AccessFlags::LOCAL_WRITE });
    ok(run(&mut sim, 1, &b, &reg)) && ok(run(&mut sim, 1, &b, &SendWr::new(2, WrOpcode::LocalInv, &[]).with_imm(key)))
}

/// MEM_WINDOW (type 1, by the verb) and MEM_WINDOW_TYPE_2B (by a work request).
fn window_works(ty: MwType) -> bool {
    let (mut sim, [_, b]) = setup(QpType::Rc);
    let Ok(mw) = sim.nodes[1].alloc_mw(b.pd, ty) else { return false };
    let k = sim.nodes[1].mw_rkey(mw).unwrap_or(0);
    let (addr, len, access) = (MEM_BASE, 64, AccessFlags::REMOTE_READ);
    match ty {
        MwType::Type1 => {
            let flags = rdma::rxe::wr::SendFlags::SIGNALED;
            if sim.nodes[1].bind_mw(b.qp, mw, 1, flags, k, b.mr.raw(), addr, len, access).is_err() {
                return false;
            }
            let mut got = Vec::new();
            sim.run_until(LIMIT, |s| {
                got.extend(sim::drain_cq(&mut s.nodes[1], b.cq));
                !got.is_empty()
            });
            got.first().is_some_and(|w| w.status == WcStatus::Success)
        }
        MwType::Type2 => {
            let op = MemOp::Bind { mw_rkey: k, new_rkey: k, mr_lkey: b.mr.raw(), addr, length: len, access };
            ok(run(&mut sim, 1, &b, &SendWr::new(1, WrOpcode::BindMw, &[]).with_mem(op)))
        }
    }
}

fn flush_works(placement: u8) -> bool {
    let (mut sim, [a, b]) = setup(QpType::Rc);
    let f = SendWr::new(1, WrOpcode::Flush, &[])
        .with_remote(MEM_BASE, b.mr.raw())
        .with_atomic(64, 0)
        .with_flush(placement, feth::SEL_MR_RANGE);
    ok(run(&mut sim, 0, &a, &f))
}

fn atomic_write_works() -> bool {
    let (mut sim, [a, b]) = setup(QpType::Rc);
    let w = SendWr::new(1, WrOpcode::AtomicWrite, &[]).with_remote(MEM_BASE + 8, b.mr.raw()).with_atomic_write([1; 8]);
    ok(run(&mut sim, 0, &a, &w)) && sim.nodes[1].memory().slice(MEM_BASE + 8, 8).is_ok_and(|s| s == [1; 8])
}

fn fetch_add_works() -> bool {
    let (mut sim, [a, b]) = setup(QpType::Rc);
    let sge = [Sge { addr: MEM_BASE, length: 8, lkey: a.mr.raw() }];
    let w = SendWr::new(1, WrOpcode::AtomicFetchAdd, &sge).with_remote(MEM_BASE + 64, b.mr.raw()).with_atomic(1, 0);
    ok(run(&mut sim, 0, &a, &w))
}

fn multicast_works() -> bool {
    let (mut sim, [_, b]) = setup(QpType::Ud);
    sim.nodes[1].attach_mcast(b.qp, &Gid::from_ipv4(Ipv4Addr::new(239, 0, 0, 1))).is_ok()
}

/// An rxe device registered in an RDMA core on a netdev with node 1's
/// addresses, so frames built as the simulator's node 0 would send them are
/// its own; its transport is reached through the driver.
fn core_device() -> (RdmaCore, Vec<NetdevInfo>, u32) {
    let factory = RxeDriver::<FlatMemory>::factory(|| FlatMemory::new(MEM_BASE, 1 << 16), Config::default());
    let mut core = RdmaCore::with_rxe(factory);
    let net = vec![NetdevInfo::new(2, "eth0", sim::node_mac(1)).with_ipv4(Ipv4Addr::new(10, 0, 0, 2))];
    let i = core.link_add(&net, "rxe0", "rxe", "eth0").expect("link add");
    (core, net, i)
}

fn transport(core: &mut RdmaCore, i: u32) -> &mut RxeTransport<FlatMemory> {
    let dev = core.device_mut(i).expect("registered");
    RxeDriver::<FlatMemory>::of_mut(dev).expect("an rxe device").transport_mut()
}

/// A UD SEND ONLY from node 0's QP 0x11 to `dest_qpn` on node 1, with this
/// P_Key and Q_Key.
fn ud_send_frame(dest_qpn: u32, pkey: u16, qkey: u32) -> Vec<u8> {
    let repr = FrameRepr {
        path: Path {
            src_mac: sim::node_mac(0),
            dst_mac: sim::node_mac(1),
            ip: IpPath::V4 { src: Ipv4Address([10, 0, 0, 1]), dst: Ipv4Address([10, 0, 0, 2]) },
            dscp: 0,
            ecn: Ecn::NotEct,
            hop_limit: 64,
            src_port: 0xC000,
        },
        ip_id: 0,
        roce: RoceRepr {
            bth: BthRepr {
                opcode: Opcode::UdSendOnly,
                solicited: false,
                mig_req: false,
                pad_count: 0,
                tver: 0,
                pkey,
                fecn: false,
                becn: false,
                dest_qpn,
                ack_req: false,
                psn: Psn::new(0),
            },
            ext: ExtHeaders { deth: Some(DethRepr { qkey, src_qpn: 0x11 }), ..ExtHeaders::NONE },
        },
        payload: &[0x5A; 8],
    };
    let mut frame = vec![0u8; repr.buffer_len()];
    repr.emit(&mut frame).expect("emits");
    frame
}

/// BAD_PKEY_CNTR and BAD_QKEY_CNTR: a packet dropped for its P_Key, and one
/// dropped for its Q_Key, each show in the port's counter where
/// `ibv_query_port` and `ibv_devinfo -v` read it; a good packet counts in
/// neither. Returns (P_Key counted, Q_Key counted).
fn violations_counted() -> (bool, bool) {
    const QKEY: u32 = 0x1111_1111;
    let (mut core, net, i) = core_device();
    let t = transport(&mut core, i);
    let Ok(pd) = t.alloc_pd() else { return (false, false) };
    let Ok(cq) = t.create_cq(16) else { return (false, false) };
    let init = QpInitAttr {
        qp_type: QpType::Ud,
        pd,
        send_cq: cq,
        recv_cq: cq,
        srq: None,
        cap: QpCap::default(),
        sq_sig_all: false,
    };
    let Ok(qp) = t.create_qp(&init) else { return (false, false) };
    let attr = QpAttr { qp_state: QpState::Init, qkey: QKEY, ..QpAttr::default() };
    let mask = AttrMask::STATE | AttrMask::QKEY | AttrMask::PORT | AttrMask::PKEY_INDEX;
    let rtr = QpAttr { qp_state: QpState::Rtr, ..attr };
    if t.modify_qp(qp, &attr, mask).is_err() || t.modify_qp(qp, &rtr, AttrMask::STATE).is_err() {
        return (false, false);
    }
    let qpn = t.qpn(qp).unwrap_or(0);
    let mut sink = Discard;
    for frame in [ud_send_frame(qpn, 0xFFFF, QKEY), ud_send_frame(qpn, 0x1234, QKEY), ud_send_frame(qpn, 0xFFFF, !QKEY)]
    {
        t.receive(&frame, Instant::ZERO, &mut sink);
    }
    let Ok(port) = core.query_port(i, 1) else { return (false, false) };
    let mut shown = String::new();
    let verbose = console::run(&mut core, &net, &["ibv_devinfo", "-v"], &mut shown).is_ok();
    (
        port.bad_pkey_cntr == 1 && verbose && shown.contains("bad_pkey_cntr:\t\t0x1\n"),
        port.qkey_viol_cntr == 1 && verbose && shown.contains("qkey_viol_cntr:\t\t0x1\n"),
    )
}

/// SYS_IMAGE_GUID: the device reports a system image GUID, non-zero and the
/// node GUID (rxe's: one device per system image), in `ibv_devinfo -v` and in
/// `rdma dev`, as the core registered it.
fn sys_image_guid_reported() -> bool {
    let (mut core, net, i) = core_device();
    let Ok((sys_image_guid, node_guid)) = core.query_device(i).map(|a| (a.sys_image_guid, a.node_guid)) else {
        return false;
    };
    let (mut devinfo, mut rdma_dev) = (String::new(), String::new());
    let shown = console::run(&mut core, &net, &["ibv_devinfo", "-v"], &mut devinfo).is_ok()
        && console::run(&mut core, &net, &["rdma", "dev"], &mut rdma_dev).is_ok();
    let guid = sys_image_guid.to_string();
    sys_image_guid.0 != 0
        && sys_image_guid == node_guid
        && node_guid == Guid::from_mac(sim::node_mac(1))
        && shown
        && devinfo.contains(&format!("\tsys_image_guid:\t\t\t{guid}\n"))
        && rdma_dev.contains(&format!(" sys_image_guid {guid} "))
}

/// PORT_ACTIVE_EVENT: the device raises PORT_ACTIVE to its event handlers
/// when its port becomes active again (netdev down, then up), after the
/// port's state says ACTIVE.
fn port_active_raised() -> bool {
    /// (device, port, event, the port's state as the handler sees it)
    type Heard = (u32, u32, IbEventType, PortState);
    struct Record(Rc<RefCell<Vec<Heard>>>);
    impl EventHandler for Record {
        fn handle(&mut self, ev: &IbEvent, dev: &Device) {
            let state = dev.port(ev.port).map_or(PortState::Nop, |p| p.state());
            self.0.borrow_mut().push((ev.device_index, ev.port, ev.kind, state));
        }
    }
    let (mut core, net, i) = core_device();
    let heard = Rc::new(RefCell::new(Vec::new()));
    if core.register_event_handler(i, Box::new(Record(Rc::clone(&heard)))).is_err() {
        return false;
    }
    let up = net[0].clone();
    let down = NetdevInfo { up: false, ..up.clone() };
    let sent = core.netdev_event(NetdevEvent::new(NetdevEventKind::Down, down)).is_ok()
        && core.netdev_event(NetdevEvent::new(NetdevEventKind::Up, up)).is_ok();
    core.process_events();
    let heard = heard.borrow();
    sent && *heard
        == [(i, 1, IbEventType::PortErr, PortState::Down), (i, 1, IbEventType::PortActive, PortState::Active)]
}

/// RC_RNR_NAK_GEN: an RC responder with no receive posted answers a SEND
/// with an RNR NAK carrying its QP's `min_rnr_timer` (the requester, allowed
/// no RNR retry, then fails the WR with RNR_RETRY_EXC_ERR), instead of
/// dropping it (which would end in RETRY_EXC_ERR after the timeouts).
fn rnr_nak_generated() -> bool {
    const MIN_RNR_TIMER: u8 = 14;
    let link = Link { qp_type: QpType::Rc, rnr_retry: 0, min_rnr_timer: MIN_RNR_TIMER, ..Link::default() };
    let mut sim = Sim::new(5, Faults::NONE, 1 << 20, Default::default());
    let Ok([a, _]) = sim::connect(&mut sim, &link) else { return false };
    let naks = Rc::new(RefCell::new(Vec::new()));
    let seen = Rc::clone(&naks);
    sim.wire.observer = Some(Box::new(move |_, to, frame| {
        let aeth = frame::parse(frame).ok().and_then(|rx| rx.repr.roce.ext.aeth);
        if let (0, Some(AethRepr { syndrome: Syndrome::RnrNak { timer }, .. })) = (to, aeth) {
            seen.borrow_mut().push(timer);
        }
    }));
    let sge = [Sge { addr: MEM_BASE, length: 64, lkey: a.mr.raw() }];
    let wc = run(&mut sim, 0, &a, &SendWr::new(1, WrOpcode::Send, &sge));
    wc.is_some_and(|w| w.status == WcStatus::RnrRetryExcErr) && *naks.borrow() == [MIN_RNR_TIMER]
}

/// CHANGE_PHY_PORT: modify QP changes the primary port where IBA's table
/// allows it (RESET->INIT, INIT->INIT and, for RC, SQD->SQD), to a port the
/// device has (rxe: only 1; port 2 is an invalid value) and nowhere else
/// (RTR->RTS, RTS->RTS); the QP works on after the SQD->SQD change.
fn port_change_accepted() -> bool {
    let bad_value = |r: Result<(), VerbsError>| matches!(r, Err(VerbsError::Modify(ModifyError::BadValue(_))));
    let not_taken =
        |r: Result<(), VerbsError>| matches!(r, Err(VerbsError::Modify(ModifyError::UnexpectedAttrs { .. })));
    let (mut sim, [a, b]) = setup(QpType::Rc);
    let node = &mut sim.nodes[0];
    let port = |n: u8| QpAttr { port_num: n, ..QpAttr::default() };
    let state = |s: QpState, n: u8| QpAttr { qp_state: s, port_num: n, ..QpAttr::default() };
    let rts_rts = not_taken(node.modify_qp(a.qp, &port(1), AttrMask::PORT));
    let to_sqd = node.modify_qp(a.qp, &state(QpState::Sqd, 1), AttrMask::STATE).is_ok();
    let sqd_port2 = bad_value(node.modify_qp(a.qp, &port(2), AttrMask::PORT));
    let sqd_port1 = node.modify_qp(a.qp, &port(1), AttrMask::PORT).is_ok();
    let back = node.modify_qp(a.qp, &state(QpState::Rts, 1), AttrMask::STATE).is_ok();
    let sge = [Sge { addr: MEM_BASE, length: 8, lkey: a.mr.raw() }];
    let w = SendWr::new(1, WrOpcode::RdmaWrite, &sge).with_remote(MEM_BASE + 64, b.mr.raw());
    let works = ok(run(&mut sim, 0, &a, &w));
    // A fresh QP: the port is set at RESET->INIT and may change in INIT.
    let node = &mut sim.nodes[0];
    let init = QpInitAttr {
        qp_type: QpType::Rc,
        pd: a.pd,
        send_cq: a.cq,
        recv_cq: a.cq,
        srq: None,
        cap: QpCap::default(),
        sq_sig_all: false,
    };
    let Ok(qp) = node.create_qp(&init) else { return false };
    let to_init = AttrMask::STATE | AttrMask::PORT | AttrMask::PKEY_INDEX | AttrMask::ACCESS_FLAGS;
    let reset_init2 = bad_value(node.modify_qp(qp, &state(QpState::Init, 2), to_init));
    let reset_init = node.modify_qp(qp, &state(QpState::Init, 1), to_init).is_ok();
    let init_init = node.modify_qp(qp, &port(1), AttrMask::PORT).is_ok();
    let init_init2 = bad_value(node.modify_qp(qp, &port(2), AttrMask::PORT));
    let rtr = QpAttr {
        qp_state: QpState::Rtr,
        port_num: 1,
        path_mtu: IbMtu::Mtu1024,
        dest_qp_num: b.qpn,
        ah_attr: AhAttr { dgid: sim::node_gid(1), hop_limit: 64, dmac: sim::node_mac(1), ..AhAttr::default() },
        ..QpAttr::default()
    };
    let rtr_mask = AttrMask::STATE
        | AttrMask::AV
        | AttrMask::PATH_MTU
        | AttrMask::DEST_QPN
        | AttrMask::RQ_PSN
        | AttrMask::MAX_DEST_RD_ATOMIC
        | AttrMask::MIN_RNR_TIMER;
    let init_rtr =
        not_taken(node.modify_qp(qp, &rtr, rtr_mask | AttrMask::PORT)) && node.modify_qp(qp, &rtr, rtr_mask).is_ok();
    let rts = QpAttr { qp_state: QpState::Rts, ..rtr };
    let rts_mask = AttrMask::STATE
        | AttrMask::TIMEOUT
        | AttrMask::RETRY_CNT
        | AttrMask::RNR_RETRY
        | AttrMask::SQ_PSN
        | AttrMask::MAX_QP_RD_ATOMIC;
    let rtr_rts = not_taken(node.modify_qp(qp, &rts, rts_mask | AttrMask::PORT));
    rts_rts
        && to_sqd
        && sqd_port2
        && sqd_port1
        && back
        && works
        && reset_init2
        && reset_init
        && init_init
        && init_init2
        && init_rtr
        && rtr_rts
        && node.query_qp(qp).is_ok_and(|q| q.port_num == 1)
}

/// UD_AV_PORT_ENFORCE: an address handle naming a port the device does not
/// have (0 or 2) is refused, so no UD work request can name one; port 1's is
/// taken and a UD SEND through it arrives. A connected QP's address vector
/// naming port 2 is refused alike.
fn av_port_enforced() -> bool {
    let refused = |r: Result<(), VerbsError>| matches!(r, Err(VerbsError::Address(AhError::BadPort)));
    let av = |port_num| AhAttr {
        dgid: sim::node_gid(1),
        hop_limit: 64,
        dmac: sim::node_mac(1),
        port_num,
        ..AhAttr::default()
    };
    let (mut sim, [a, b]) = setup(QpType::Ud);
    let bad_ports = [0, 2].into_iter().all(|p| refused(sim.nodes[0].create_ah(a.pd, &av(p)).map(|_| ())));
    let Ok(ah) = sim.nodes[0].create_ah(a.pd, &av(1)) else { return false };
    let into = [Sge { addr: MEM_BASE, length: 256, lkey: b.mr.raw() }];
    if sim.nodes[1].post_recv(b.qp, &RecvWr { wr_id: 9, sg_list: &into }).is_err() {
        return false;
    }
    let sge = [Sge { addr: MEM_BASE, length: 64, lkey: a.mr.raw() }];
    let ud = UdDest { ah, remote_qpn: b.qpn, remote_qkey: Link::default().qkey };
    let sent = ok(run(&mut sim, 0, &a, &SendWr::new(1, WrOpcode::Send, &sge).with_ud(ud)));
    let mut got = Vec::new();
    sim.run_until(LIMIT, |s| {
        got.extend(sim::drain_cq(&mut s.nodes[1], b.cq));
        !got.is_empty()
    });
    let arrived = got.first().is_some_and(|w| w.wr_id == 9 && w.status == WcStatus::Success);
    let (mut sim, [a, _]) = setup(QpType::Rc);
    let sqd = QpAttr { qp_state: QpState::Sqd, ..QpAttr::default() };
    let rc_av = QpAttr { ah_attr: av(2), ..QpAttr::default() };
    let rc = sim.nodes[0].modify_qp(a.qp, &sqd, AttrMask::STATE).is_ok()
        && refused(sim.nodes[0].modify_qp(a.qp, &rc_av, AttrMask::AV));
    bad_ports && sent && arrived && rc
}

/// SRQ_RESIZE: a full SRQ grows with its WQEs kept (SENDs after the resize
/// consume them in the order posted) and takes as many more as it grew by;
/// a size below the WQEs posted, or below an armed limit, is refused and
/// changes nothing; an emptied SRQ shrinks.
fn srq_resized() -> bool {
    let mut sim = Sim::new(5, Faults::NONE, 1 << 20, Default::default());
    let Ok([a, b]) = sim::connect(&mut sim, &Link { srq_wr: 2, ..Link::default() }) else { return false };
    let Some(srq) = b.srq else { return false };
    let refused = |r: Result<(), VerbsError>| matches!(r, Err(VerbsError::InvalidArgument(_)));
    let node = &mut sim.nodes[1];
    let mut post = |id: u64| {
        let into = [Sge { addr: MEM_BASE + 0x1000 * id, length: 64, lkey: b.mr.raw() }];
        node.post_srq_recv(srq, &RecvWr { wr_id: id, sg_list: &into })
    };
    let filled = post(1).is_ok() && post(2).is_ok() && post(3).is_err();
    let node = &mut sim.nodes[1];
    let below_posted = refused(node.resize_srq(srq, 1)) && node.srq(srq).is_some_and(|s| s.queue.capacity() == 2);
    let grown = node.resize_srq(srq, 4).is_ok() && node.srq(srq).is_some_and(|s| s.queue.capacity() == 4);
    let mut post = |id: u64| {
        let into = [Sge { addr: MEM_BASE + 0x1000 * id, length: 64, lkey: b.mr.raw() }];
        node.post_srq_recv(srq, &RecvWr { wr_id: id, sg_list: &into })
    };
    let room = post(3).is_ok() && post(4).is_ok() && post(5).is_err();
    let sge = [Sge { addr: MEM_BASE, length: 64, lkey: a.mr.raw() }];
    let sent = (1..=4).all(|i| ok(run(&mut sim, 0, &a, &SendWr::new(i, WrOpcode::Send, &sge))));
    let mut got = Vec::new();
    sim.run_until(LIMIT, |s| {
        got.extend(sim::drain_cq(&mut s.nodes[1], b.cq));
        got.len() >= 4
    });
    let consumed = got.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>()
        == (1..=4).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>();
    let node = &mut sim.nodes[1];
    let limit = node.modify_srq_limit(srq, 3).is_ok() && refused(node.resize_srq(srq, 2));
    let shrunk = node.modify_srq_limit(srq, 0).is_ok()
        && node.resize_srq(srq, 1).is_ok()
        && node.srq(srq).is_some_and(|s| s.queue.capacity() == 1);
    filled && below_posted && grown && room && sent && consumed && limit && shrunk
}

/// Each node's second address, for alternate paths: 10.0.0.(i+11).
fn alt_gid(i: usize) -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, i as u8 + 11))
}

/// An RC pair whose QPs hold alternate paths between the nodes' second
/// addresses (GID index 1), loaded in RTS->RTS with migration state `mig`;
/// once [`Apm::cut`] is called, every frame to a primary address (10.0.0.1,
/// 10.0.0.2) is lost.
struct Apm {
    sim: Sim,
    ends: [End; 2],
}

impl Apm {
    fn new(mig: MigState) -> Option<Apm> {
        let mut sim = Sim::new(5, Faults::NONE, 1 << 20, Default::default());
        let ends = sim::connect(&mut sim, &Link::default()).ok()?;
        for (i, end) in ends.iter().enumerate() {
            let node = &mut sim.nodes[i];
            node.port_mut().gids.push(alt_gid(i));
            let alt = QpAttr {
                alt_ah_attr: AhAttr {
                    dgid: alt_gid(1 - i),
                    sgid_index: 1,
                    hop_limit: 64,
                    dmac: sim::node_mac(1 - i),
                    ..AhAttr::default()
                },
                alt_port_num: 1,
                alt_timeout: 6,
                path_mig_state: mig,
                ..QpAttr::default()
            };
            node.modify_qp(end.qp, &alt, AttrMask::ALT_PATH | AttrMask::PATH_MIG_STATE).ok()?;
        }
        Some(Apm { sim, ends })
    }

    /// Loses every frame to a primary address from now on.
    fn cut(&mut self) {
        self.sim.wire.filter = Some(Box::new(|_, frame| matches!(frame.get(30..34), Some([10, 0, 0, 1 | 2]))));
    }

    /// A 64-byte WRITE from node 0 to node 1: its completion.
    fn write(&mut self) -> Option<WorkCompletion> {
        let [a, b] = self.ends;
        let sge = [Sge { addr: MEM_BASE, length: 64, lkey: a.mr.raw() }];
        let w = SendWr::new(7, WrOpcode::RdmaWrite, &sge).with_remote(MEM_BASE + 0x100, b.mr.raw());
        run(&mut self.sim, 0, &a, &w)
    }

    /// The async events `node` raised.
    fn events(&mut self, node: usize) -> Vec<AsyncEvent> {
        core::iter::from_fn(|| self.sim.nodes[node].poll_event()).collect()
    }
}

/// AUTO_PATH_MIG: a connected QP takes an alternate path and a migration
/// state and answers them in query_qp as given (what Linux rxe's driver
/// does, and all it does, where Linux's core lets the alternate path
/// through, which on RoCE it does not); ARMED, it outlives its primary path: when node 0's
/// retries run out there it moves to the alternate path (MIGRATED,
/// PATH_MIG, the alternate vector and timeout now its own), node 1 follows
/// when node 0's packets arrive over it, and the WRITE completes. MIGRATED
/// with the same alternate path loaded, the same loss ends in
/// RETRY_EXC_ERR. Alternate paths naming a port the device does not have,
/// or an out-of-range timeout, are refused.
fn path_migrates() -> bool {
    let Some(mut armed) = Apm::new(MigState::Armed) else { return false };
    let [a, b] = armed.ends;
    let answered = armed.sim.nodes[0].query_qp(a.qp).is_ok_and(|q| {
        (q.path_mig_state, q.alt_ah_attr.dgid, q.alt_ah_attr.sgid_index, q.alt_port_num, q.alt_timeout)
            == (MigState::Armed, alt_gid(1), 1, 1, 6)
    });
    let before = armed.write().is_some_and(|w| w.status == WcStatus::Success);
    armed.cut();
    let after = armed.write().is_some_and(|w| w.status == WcStatus::Success);
    let moved = |node: usize, apm: &Apm, end: &End| {
        apm.sim.nodes[node].query_qp(end.qp).is_ok_and(|q| {
            q.path_mig_state == MigState::Migrated && q.ah_attr.dgid == alt_gid(1 - node) && q.timeout == 6
        })
    };
    let migrated = moved(0, &armed, &a) && moved(1, &armed, &b);
    let raised = armed.events(0) == [AsyncEvent::PathMig { qpn: a.qpn }]
        && armed.events(1) == [AsyncEvent::PathMig { qpn: b.qpn }];
    let Some(mut unarmed) = Apm::new(MigState::Migrated) else { return false };
    unarmed.cut();
    let failed = unarmed.write().is_some_and(|w| w.status == WcStatus::RetryExcErr) && unarmed.events(0).is_empty();
    let node = &mut unarmed.sim.nodes[1];
    let bad_value = |r: Result<(), VerbsError>| matches!(r, Err(VerbsError::Modify(ModifyError::BadValue(_))));
    let alt = |alt_port_num, alt_timeout, av_port| QpAttr {
        alt_ah_attr: AhAttr { dgid: alt_gid(0), dmac: sim::node_mac(0), port_num: av_port, ..AhAttr::default() },
        alt_port_num,
        alt_timeout,
        ..QpAttr::default()
    };
    let refusals = bad_value(node.modify_qp(unarmed.ends[1].qp, &alt(2, 6, 1), AttrMask::ALT_PATH))
        && bad_value(node.modify_qp(unarmed.ends[1].qp, &alt(1, 32, 1), AttrMask::ALT_PATH))
        && matches!(
            node.modify_qp(unarmed.ends[1].qp, &alt(1, 6, 2), AttrMask::ALT_PATH),
            Err(VerbsError::Address(AhError::BadPort))
        );
    answered && before && after && migrated && raised && failed && refusals
}

/// A sink for frames nobody receives.
struct Discard;

impl FrameSink for Discard {
    fn transmit(&mut self, _len: usize, _fill: &mut dyn FnMut(&mut [u8])) -> bool {
        true
    }
}

#[test]
fn every_advertised_capability_is_accepted_and_nothing_accepted_is_hidden() {
    let (text, attr) = devinfo_text();
    let names = cap_names(&text);
    let has = |n: &str| names.contains(n);
    let (pkey_counted, qkey_counted) = violations_counted();
    // Each bit of `device_cap_flags`, what its probe checks, and whether the
    // behaviour is there.
    let probes = [
        ("MEM_MGT_EXTENSIONS", "fast registration and local invalidation", fast_registration_works()),
        ("MEM_WINDOW", "type 1 windows bound by the verb", window_works(MwType::Type1)),
        ("MEM_WINDOW_TYPE_2B", "type 2B windows bound by a work request", window_works(MwType::Type2)),
        ("BAD_PKEY_CNTR", "P_Key violations counted in the port", pkey_counted),
        ("BAD_QKEY_CNTR", "Q_Key violations counted in the port", qkey_counted),
        ("SYS_IMAGE_GUID", "the system image GUID reported", sys_image_guid_reported()),
        ("PORT_ACTIVE_EVENT", "PORT_ACTIVE raised", port_active_raised()),
        ("RC_RNR_NAK_GEN", "an RNR NAK with min_rnr_timer", rnr_nak_generated()),
        ("CHANGE_PHY_PORT", "the port changed where IBA allows", port_change_accepted()),
        ("UD_AV_PORT_ENFORCE", "address vectors name the device's port", av_port_enforced()),
        ("SRQ_RESIZE", "an SRQ resized with its WQEs kept", srq_resized()),
        ("AUTO_PATH_MIG", "an armed QP migrated to its alternate path", path_migrates()),
    ];
    for (name, what, works) in probes {
        assert_eq!(has(name), works, "{name} advertised, and {what}\n{text}");
    }
    for n in &names {
        assert!(probes.iter().any(|(p, _, _)| p == n), "{n} is advertised and nothing checks it");
    }
    assert!(!has("MEM_WINDOW_TYPE_2A"), "type 2A windows are not implemented");
    // The extended word: IBA 1.5's bits.
    let ex = value(&text, "device_cap_flags_ex:");
    assert_eq!(ex & (1 << 38) != 0, flush_works(feth::PLT_GLOBAL_VISIBILITY), "FLUSH_GLOBAL");
    assert_eq!(ex & (1 << 39) != 0, flush_works(feth::PLT_PERSISTENCE), "FLUSH_PERSISTENT");
    assert_eq!(ex & (1 << 40) != 0, atomic_write_works(), "ATOMIC_WRITE");
    assert_eq!(ex >> 32, (1 << 6) | (1 << 8), "no other high bit");
    // Limits, as printed and as the transport enforces them.
    assert!(text.contains("ATOMIC_HCA") && fetch_add_works());
    assert_eq!(value(&text, "max_mw:"), u64::from(transport::MAX_MW));
    assert_eq!(attr.max_fast_reg_page_list_len, transport::MAX_FAST_REG_PAGES);
    let (mut sim, [_, b]) = setup(QpType::Rc);
    assert!(sim.nodes[1].alloc_mr(b.pd, transport::MAX_FAST_REG_PAGES).is_ok());
    assert!(sim.nodes[1].alloc_mr(b.pd, transport::MAX_FAST_REG_PAGES + 1).is_err());
    assert_eq!(value(&text, "max_mcast_grp:") > 0, multicast_works());
    assert_eq!(value(&text, "max_mcast_grp:"), u64::from(mcast::MAX_MCAST_GRP));
    assert_eq!(value(&text, "max_mcast_qp_attach:"), u64::from(mcast::MAX_MCAST_QP_ATTACH));
    assert_eq!(value(&text, "max_total_mcast_qp_attach:"), u64::from(mcast::MAX_TOTAL_MCAST_QP_ATTACH));
}
