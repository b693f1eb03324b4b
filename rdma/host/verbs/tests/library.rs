//! The verbs library end to end against the real firmware logic
//! (`verbs_ring::Firmware`) and a loopback transport, over one /dev/shm-style
//! file mapped twice (host and firmware), with no appliance: attach,
//! queries, object lifetimes, the data path (WQEs consumed by the firmware
//! side, CQEs seen by poll), reclaim on detach and on a killed process, and
//! typed errors. Every wait is bounded.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Appliance;
use verbs::*;
use verbs_ring::abi::{ctx_state, reclaim_reason};
use verbs_ring::dispatch::{EventSource, ObjKind};
use verbs_ring::{Status, cmd};

/// The bound on every wait for something that must happen: generous, because a
/// busy machine can starve the appliance thread for seconds; not a timing
/// assertion (a healthy run takes milliseconds).
const T: Duration = Duration::from_secs(60);

fn rc_attr() -> QpInitAttr {
    QpInitAttr {
        cap: QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 64 },
        ..Default::default()
    }
}

/// Bring `a` to RTS towards `b_qpn`.
fn connect(a: &Qp<'_>, b_qpn: u32) {
    a.to_init(1, AccessFlags::ALL_REMOTE).unwrap();
    a.to_rtr(&RtrAttr {
        port: 1,
        path_mtu: 3,
        dest_qp_num: b_qpn,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        ..Default::default()
    })
    .unwrap();
    a.to_rts(0, 1).unwrap();
}

#[test]
fn attach_queries_and_detach() {
    let app = Appliance::start();
    let ctx = Context::open(&app.path).unwrap();
    ctx.nop().unwrap();
    assert_eq!(ctx.attached_contexts(), 1);
    let info = ctx.appliance();
    assert_eq!((info.fw_state, info.num_contexts, info.abi_version >> 16), (2, 4, 1));
    let links = ctx.links().unwrap();
    assert_eq!(links.len(), 1);
    assert_eq!((links[0].name.as_str(), links[0].netdev.as_str(), links[0].port_state), ("rxe0", "eth0", 4));

    let dev = ctx.device(Some("rxe0")).unwrap();
    let attr = dev.query_device().unwrap();
    assert_eq!((attr.vendor_id, attr.phys_port_cnt, attr.max_qp), (0xffffff, 1, 64));
    let port = dev.query_port(1).unwrap();
    assert_eq!((port.state, port.link_layer, port.active_mtu), (4, 2, 3));
    let gid = dev.query_gid(1, 0).unwrap();
    assert_eq!(verbs_ring::show::words::GidText(&gid.gid).to_string(), "fe80::5054:ff:fe00:1");
    let table = dev.gid_table(1).unwrap();
    assert_eq!(table.iter().map(|e| e.index).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(std::net::Ipv6Addr::from(table[1].gid).to_ipv4_mapped(), Some(std::net::Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(dev.query_pkey(1, 0).unwrap(), 0xffff);
    let counters = dev.counters(1).unwrap();
    assert_eq!(counters.len(), 15);
    assert_eq!(counters[0].0, "sent_pkts");
    assert_eq!(dev.resources().unwrap(), ResourceCounts::default());

    // The same device through the convenience opener: a second context.
    let dev2 = Device::open(&app.path, None).unwrap();
    assert_eq!(dev2.name(), "rxe0");
    assert_ne!(dev2.context().index(), ctx.index());
    assert_eq!(ctx.attached_contexts(), 2);

    let index = ctx.index();
    drop(dev);
    drop(ctx);
    app.wait_for("detach", T, |fw| fw.read_slot(&app.mem, index).unwrap().state == ctx_state::FREE);
    let slots = dev2.context().slots();
    assert_eq!(slots[index as usize].state, ctx_state::FREE);
    assert_eq!(slots[index as usize].reclaim_reason, reclaim_reason::DETACHED);
}

#[test]
fn objects_live_and_die_in_order() {
    let app = Appliance::start();
    let ctx = Context::open(&app.path).unwrap();
    let dev = ctx.device(None).unwrap();
    {
        let pd = dev.alloc_pd().unwrap();
        let cq = dev.create_cq(10, 7).unwrap();
        assert_eq!(cq.cqe(), 16);
        let mr = pd.reg_mr(10_000, AccessFlags::ALL_REMOTE).unwrap();
        assert_eq!(mr.len(), 10_000);
        let srq = Srq::create(&pd, 8, 1, 0).unwrap();
        let qp = Qp::create(&pd, &cq, &cq, None, &rc_attr()).unwrap();
        let qp_srq = Qp::create(&pd, &cq, &cq, Some(&srq), &rc_attr()).unwrap();
        let ah = pd.create_ah(&AhAttr { is_global: 1, port_num: 1, ..Default::default() }).unwrap();
        assert_eq!(qp.cap().max_send_wr, 16);
        assert!(qp.cap().max_inline_data >= 64);
        assert_ne!(qp.qp_num(), qp_srq.qp_num());
        let r = dev.resources().unwrap();
        assert_eq!((r.pd, r.cq, r.mr, r.srq, r.qp, r.ah, r.ctx), (1, 1, 1, 1, 2, 1, 1));
        // Children go before parents: the borrows make any other order a
        // compile error (dropping `srq` before `qp_srq` does not build).
        drop(ah);
        drop(qp_srq);
        drop(qp);
        drop(srq);
        drop(mr);
        let r = dev.resources().unwrap();
        assert_eq!((r.pd, r.cq, r.total_objects()), (1, 1, 2));
    }
    assert_eq!(dev.resources().unwrap().total_objects(), 0);
    assert_eq!(app.fw().p.live(), 0);
    // The buffer area is whole again.
    let (_, buf) = ctx.layout().buf_area(ctx.index()).unwrap();
    assert_eq!(ctx.buffer_space(), buf);
}

#[test]
fn send_and_receive_through_the_rings() {
    let app = Appliance::start();
    let dev = Device::open(&app.path, Some("rxe0")).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(32, 0).unwrap();
    let (a, b) =
        (Qp::create(&pd, &cq, &cq, None, &rc_attr()).unwrap(), Qp::create(&pd, &cq, &cq, None, &rc_attr()).unwrap());
    connect(&a, b.qp_num());
    connect(&b, a.qp_num());
    let tx = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let rx = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    tx.write(0, b"hello, appliance").unwrap();

    // Nothing is executed before a receive is posted (RNR waits).
    let sge = [tx.sge(0, 16).unwrap()];
    a.post_send(&[SendWr {
        wr_id: 11,
        op: WrOp::SendWithImm(0xabcd),
        sg_list: &sge,
        flags: SendFlags::SIGNALED,
        ud: None,
    }])
    .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(cq.poll_one().unwrap(), None);
    b.post_recv(&[(22, &[rx.sge(0, 4096).unwrap()])]).unwrap();

    let mut got = vec![cq.wait(T).unwrap(), cq.wait(T).unwrap()];
    got.sort_by_key(|w| w.wr_id);
    assert!(got.iter().all(|w| w.status.is_success()), "{got:?}");
    assert_eq!((got[0].wr_id, got[0].opcode, got[0].byte_len), (11, wc_opcode::SEND, 16));
    assert_eq!((got[1].wr_id, got[1].opcode, got[1].byte_len), (22, wc_opcode::RECV, 16));
    assert_eq!((got[1].imm_data, got[1].qp_num, got[1].src_qp), (Some(0xabcd), b.qp_num(), a.qp_num()));
    assert_eq!(rx.to_vec(0, 16).unwrap(), b"hello, appliance");
    // The firmware side consumed exactly the WQE we wrote.
    let consumed = app.fw().p.consumed.clone();
    assert_eq!(consumed.len(), 1);
    assert_eq!((consumed[0].0, consumed[0].1.wr_id, consumed[0].1.imm_data), (a.qp_num(), 11, 0xabcd));

    // Inline data: copied into the WQE, the MR may change right after.
    tx.write(0, b"inline!").unwrap();
    b.post_recv(&[(23, &[rx.sge(100, 64).unwrap()])]).unwrap();
    let sge = [tx.sge(0, 7).unwrap()];
    a.post_send(&[SendWr {
        wr_id: 12,
        op: WrOp::Send,
        sg_list: &sge,
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
        ud: None,
    }])
    .unwrap();
    tx.write(0, b"XXXXXXX").unwrap();
    let mut n = 0;
    while n < 2 {
        let w = cq.wait(T).unwrap();
        assert!(w.status.is_success());
        n += 1;
    }
    assert_eq!(rx.to_vec(100, 7).unwrap(), b"inline!");

    // An unsignaled send completes silently; a batch is one doorbell.
    b.post_recv(&[(24, &[rx.sge(0, 64).unwrap()]), (25, &[rx.sge(64, 64).unwrap()])]).unwrap();
    let s1 = [tx.sge(0, 8).unwrap()];
    let wr = |id, flags| SendWr { wr_id: id, op: WrOp::Send, sg_list: &s1, flags, ud: None };
    a.post_send(&[wr(13, SendFlags::NONE), wr(14, SendFlags::SIGNALED)]).unwrap();
    let mut ids: Vec<u64> = (0..3).map(|_| cq.wait(T).unwrap().wr_id).collect();
    ids.sort();
    assert_eq!(ids, [14, 24, 25]);
    assert_eq!(cq.poll_one().unwrap(), None);
    assert!(dev.counters(1).unwrap()[0].1 >= 4);
}

#[test]
fn rdma_write_read_and_atomics() {
    let app = Appliance::start();
    let dev = Device::open(&app.path, None).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, 0).unwrap();
    let qp = Qp::create(&pd, &cq, &cq, None, &QpInitAttr { sq_sig_all: true, ..rc_attr() }).unwrap();
    connect(&qp, qp.qp_num()); // loopback to itself
    let local = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let remote = pd.reg_mr(4096, AccessFlags::ALL_REMOTE).unwrap();
    let ro = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ).unwrap();

    local.write(0, &[7u8; 100]).unwrap();
    let sge = [local.sge(0, 100).unwrap()];
    let post = |op, sg: &[Sge]| {
        qp.post_send(&[SendWr { wr_id: 1, op, sg_list: sg, flags: SendFlags::NONE, ud: None }]).unwrap();
        cq.wait(T).unwrap()
    };
    let w = post(WrOp::Write { remote_addr: remote.addr() + 8, rkey: remote.rkey() }, &sge);
    assert_eq!((w.status, w.opcode, w.byte_len), (WcStatus::SUCCESS, wc_opcode::RDMA_WRITE, 100));
    assert_eq!(remote.to_vec(8, 100).unwrap(), [7u8; 100]);

    remote.write(1000, b"read me").unwrap();
    let sge = [local.sge(200, 7).unwrap()];
    let w = post(WrOp::Read { remote_addr: remote.addr() + 1000, rkey: remote.rkey() }, &sge);
    assert_eq!((w.status, w.opcode), (WcStatus::SUCCESS, wc_opcode::RDMA_READ));
    assert_eq!(local.to_vec(200, 7).unwrap(), b"read me");

    remote.write_u64(2048, 40).unwrap();
    let sge = [local.sge(256, 8).unwrap()];
    let w = post(WrOp::FetchAdd { remote_addr: remote.addr() + 2048, rkey: remote.rkey(), add: 2 }, &sge);
    assert_eq!((w.status, w.opcode), (WcStatus::SUCCESS, wc_opcode::FETCH_ADD));
    assert_eq!((local.read_u64(256).unwrap(), remote.read_u64(2048).unwrap()), (40, 42));
    let rkey = remote.rkey();
    let w = post(WrOp::CompareSwap { remote_addr: remote.addr() + 2048, rkey, compare: 42, swap: 1 }, &sge);
    assert!(w.status.is_success());
    assert_eq!((local.read_u64(256).unwrap(), remote.read_u64(2048).unwrap()), (42, 1));

    // A write to a region without remote write access fails remotely.
    let sge = [local.sge(0, 8).unwrap()];
    let w = post(WrOp::Write { remote_addr: ro.addr(), rkey: ro.rkey() }, &sge);
    assert_eq!(w.status.0, verbs_ring::abi::wc_status::REM_ACCESS_ERR);
    assert_eq!(w.status.as_str(), "remote access error");
}

#[test]
fn shared_receive_queue_feeds_qps() {
    let app = Appliance::start();
    let dev = Device::open(&app.path, None).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, 0).unwrap();
    let srq = Srq::create(&pd, 4, 1, 0).unwrap();
    let a = Qp::create(&pd, &cq, &cq, None, &rc_attr()).unwrap();
    let b = Qp::create(&pd, &cq, &cq, Some(&srq), &rc_attr()).unwrap();
    connect(&a, b.qp_num());
    let mr = pd.reg_mr(8192, AccessFlags::LOCAL_WRITE).unwrap();
    srq.post_recv(&[(5, &[mr.sge(4096, 4096).unwrap()])]).unwrap();
    assert!(matches!(b.post_recv(&[(1, &[])]), Err(Error::InvalidArgument(_))));
    mr.write(0, b"via srq").unwrap();
    let sge = [mr.sge(0, 7).unwrap()];
    a.post_send(&[SendWr { wr_id: 1, op: WrOp::Send, sg_list: &sge, flags: SendFlags::SIGNALED, ud: None }]).unwrap();
    let mut ids = [cq.wait(T).unwrap().wr_id, cq.wait(T).unwrap().wr_id];
    ids.sort();
    assert_eq!(ids, [1, 5]);
    assert_eq!(mr.to_vec(4096, 7).unwrap(), b"via srq");
}

#[test]
fn errors_are_typed() {
    let app = Appliance::start();
    let missing = Context::open(std::path::Path::new("/nonexistent/ring")).err().unwrap();
    assert!(matches!(missing, Error::Open { .. }));
    assert_eq!(missing.errno(), ("ENOENT", 2));

    let ctx = Context::open(&app.path).unwrap();
    let e = ctx.device(Some("mlx5_0")).err().unwrap();
    assert_eq!(e.to_string(), "no RDMA device named \"mlx5_0\" in the appliance");
    assert_eq!(e.errno().0, "ENODEV");
    let dev = ctx.device(None).unwrap();

    let e = dev.create_cq(0, 0).err().unwrap();
    assert_eq!(e.status(), Some(Status::EINVAL));
    assert_eq!(e.to_string(), "CREATE_CQ refused by the firmware: EINVAL (invalid argument)");
    assert_eq!(dev.query_port(2).err().unwrap().status(), Some(Status::EINVAL));
    assert_eq!(ctx.link_add("rxe0", "rxe", "eth0").err().unwrap().status(), Some(Status::EEXIST));
    let e = ctx.link_add(&"x".repeat(40), "rxe", "eth0").err().unwrap();
    assert!(matches!(e, Error::Name { what: "device name", .. }), "{e:?}");
    assert_eq!(e.errno().0, "ENAMETOOLONG");
    assert!(e.to_string().ends_with(": name of 40 bytes is too long (the ring's name field holds at most 31)"), "{e}");

    let pd = dev.alloc_pd().unwrap();
    assert!(matches!(pd.reg_mr(0, AccessFlags::LOCAL_WRITE), Err(Error::InvalidArgument(_))));
    // Remote write without local write (IB spec o10-37).
    let e = pd.reg_mr(4096, AccessFlags::REMOTE_WRITE).err().unwrap();
    assert_eq!(e.status(), Some(Status::EINVAL));
    let e = pd.reg_mr(1 << 30, AccessFlags::LOCAL_WRITE).err().unwrap();
    assert!(matches!(e, Error::OutOfBufferSpace { requested, .. } if requested == 1 << 30), "{e}");
    assert_eq!(e.errno().0, "ENOMEM");
    let mr = pd.reg_mr(100, AccessFlags::LOCAL_WRITE).unwrap();
    assert!(matches!(mr.write(90, &[0; 11]), Err(Error::InvalidArgument(_))));
    assert!(mr.sge(0, 101).is_err());

    // A full send queue refuses the post as a whole.
    let cq = dev.create_cq(64, 0).unwrap();
    let qp = Qp::create(&pd, &cq, &cq, None, &rc_attr()).unwrap(); // not RTS: nothing consumed
    let sge = [mr.sge(0, 8).unwrap()];
    let wr = SendWr { wr_id: 0, op: WrOp::Send, sg_list: &sge, flags: SendFlags::NONE, ud: None };
    assert!(matches!(qp.post_send(&[wr; 17]), Err(Error::QueueFull)));
    qp.post_send(&[wr; 16]).unwrap();
    assert!(matches!(qp.post_send(&[wr]), Err(Error::QueueFull)));
    // Validation comes before the room check.
    let too_many = vec![sge[0]; qp.cap().max_send_sge as usize + 1];
    let e = qp.post_send(&[SendWr { sg_list: &too_many, ..wr }]).err().unwrap();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    // A wait on a CQ nothing completes into: the firmware answered every
    // poll, so the error names the missing completion, not the appliance.
    let e = cq.wait(Duration::from_millis(50)).err().unwrap();
    assert!(matches!(e, Error::NothingCame { what: "completion", .. }), "{e}");
    assert!(e.to_string().starts_with("no completion came in"), "{e}");
    assert_eq!(e.errno().0, "ETIMEDOUT");

    // A stalled appliance: the command times out, and says the heartbeat stopped.
    let quick =
        Context::open_with(&app.path, Options { timeout: Duration::from_millis(200), ..Default::default() }).unwrap();
    quick.nop().unwrap();
    app.paused.store(true, std::sync::atomic::Ordering::Release);
    let e = quick.nop().err().unwrap();
    assert!(matches!(e, Error::TimedOut { firmware_alive: false, .. }), "{e}");
    assert_eq!(e.errno().0, "ETIMEDOUT");
    app.paused.store(false, std::sync::atomic::Ordering::Release);
    // The late answer is skipped; the next command gets its own.
    quick.nop().unwrap();
    dev.query_device().unwrap();
}

#[test]
fn all_slots_taken_is_busy() {
    let app = Appliance::start();
    let ctxs: Vec<Context> = (0..4).map(|_| Context::open(&app.path).unwrap()).collect();
    let e = Context::open(&app.path).err().unwrap();
    assert!(matches!(e, Error::NoFreeContext { slots: 4 }), "{e}");
    assert_eq!(e.errno().0, "EBUSY");
    drop(ctxs);
    app.wait_for("all detached", T, |fw| (0..4).all(|c| fw.read_slot(&app.mem, c).unwrap().state == ctx_state::FREE));
    Context::open(&app.path).unwrap();
}

#[test]
fn links_and_async_events() {
    let app = Appliance::start();
    let ctx = Context::open(&app.path).unwrap();
    assert_eq!(ctx.link_add("rxe1", "rxe", "eth1").unwrap(), 1);
    assert_eq!(ctx.links().unwrap().iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["rxe0", "rxe1"]);
    let dev1 = ctx.device(Some("rxe1")).unwrap();
    {
        let _pd = dev1.alloc_pd().unwrap();
        assert_eq!(ctx.link_del("rxe1").err().unwrap().status(), Some(Status::EBUSY));
    }
    ctx.link_del("rxe1").unwrap();
    assert!(matches!(ctx.link_del("rxe1"), Err(Error::NoDevice(_))));

    assert_eq!(ctx.async_event().unwrap(), None);
    ctx.nop().unwrap(); // the firmware has attached us by now
    app.fw().dispatcher_mut().post_event(EventSource::Port { dev_index: 0, port: 1 }, cmd::event_type::PORT_ERR);
    let ev = ctx.async_event().unwrap().unwrap();
    assert_eq!((ev.event_type, ev.element, ev.dev_index), (cmd::event_type::PORT_ERR, 1, 0));
    assert_eq!(names::event_type(ev.event_type), "port error");
    assert_eq!(ctx.async_event().unwrap(), None);
}

#[test]
fn an_idle_context_without_heartbeat_loses_its_lease() {
    let app = Appliance::start();
    let ctx = Context::open_with(&app.path, Options { heartbeat_thread: false, ..Default::default() }).unwrap();
    let dev = ctx.device(None).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let index = ctx.index();
    // Nobody renews the lease: the firmware reclaims the slot and the PD.
    app.wait_for("lease expiry", T, |fw| !fw.dispatcher().is_attached(index));
    assert_eq!(app.fw().dispatcher().count(None, ObjKind::Pd), 0);
    let e = dev.query_device().err().unwrap();
    assert!(matches!(e, Error::Lost), "{e}");
    assert_eq!(e.errno().0, "ENOTCONN");
    assert!(ctx.is_lost());
    assert_eq!(ctx.slots()[index as usize].reclaim_reason, reclaim_reason::LEASE_EXPIRED);
    drop(pd); // answers Lost at once, does not hang
}

#[test]
fn a_killed_process_is_reclaimed_after_its_lease() {
    let app = Appliance::start();
    let observer = Device::open(&app.path, None).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_holding_objects", "--ignored", "--nocapture", "--test-threads=1"])
        .env("VERBS_TEST_CHILD_RING", &app.path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    // libtest may print "test child_holding_objects ... " before our line.
    while !line.contains("READY") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child exited before it was ready");
    }
    let r = observer.resources().unwrap();
    assert_eq!((r.pd, r.cq, r.qp, r.mr, r.ctx), (1, 1, 1, 1, 1));
    assert_eq!(observer.context().attached_contexts(), 2);
    child.kill().unwrap();
    child.wait().unwrap();
    app.wait_for("reclaim of the killed process", T, |fw| fw.dispatcher().count(None, ObjKind::Pd) == 0);
    assert_eq!(observer.resources().unwrap().total_objects(), 0);
    assert_eq!(observer.context().attached_contexts(), 1);
    assert!(observer.context().slots().iter().any(|s| s.reclaim_reason == reclaim_reason::LEASE_EXPIRED));
}

/// The child of `a_killed_process_is_reclaimed_after_its_lease`.
#[test]
#[ignore = "run as a child process by a_killed_process_is_reclaimed_after_its_lease"]
fn child_holding_objects() {
    let Some(ring) = std::env::var_os("VERBS_TEST_CHILD_RING") else { return };
    let dev = Device::open(std::path::Path::new(&ring), None).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(4, 0).unwrap();
    let _mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let _qp = Qp::create(&pd, &cq, &cq, None, &rc_attr()).unwrap();
    println!("READY");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    // Bounded: the parent kills us long before, however slow the machine.
    std::thread::sleep(Duration::from_secs(600));
}

/// Issue 17: after one protocol error the context answered EPROTO forever (its
/// response ring stays poisoned, and the slot stayed attached, its lease renewed
/// by the heartbeat thread). Now the library gives the context up: the firmware
/// reclaims the slot, later calls say so (ENOTCONN, with what to do), and
/// `reopen` attaches a new context.
#[test]
fn a_protocol_error_gives_the_context_up_and_reopen_attaches_anew() {
    use verbs_ring::SharedMem;
    let app = Appliance::start();
    let ctx = Context::open(&app.path).unwrap();
    let dev = ctx.device(None).unwrap();
    let _pd = dev.alloc_pd().unwrap();
    let index = ctx.index();
    // Something scribbles over the response ring's producer index while the
    // firmware is held still, so the host is the one to see it.
    app.paused.store(true, std::sync::atomic::Ordering::Release);
    let resp = ctx.layout().resp_ring(index).unwrap();
    app.mem.store_u32_release(resp.off as usize + verbs_ring::abi::RING_PRODUCER, 0x4000_0000).unwrap();
    let e = ctx.nop().unwrap_err();
    assert_eq!(e.errno().0, "EPROTO", "{e}");
    app.paused.store(false, std::sync::atomic::Ordering::Release);
    // The next call does not retry a poisoned ring: it says what happened and what to do.
    let e = ctx.nop().unwrap_err();
    assert!(matches!(e, Error::Abandoned { .. }), "{e}");
    assert_eq!(e.errno().0, "ENOTCONN");
    let text = e.to_string();
    assert!(text.contains("ring protocol error") && text.contains("Context::reopen"), "{text}");
    assert!(ctx.is_lost());
    assert!(matches!(dev.query_device(), Err(Error::Abandoned { .. })));
    // The slot and the PD are reclaimed, not held until the process exits.
    app.wait_for("the abandoned context reclaimed", T, |fw| !fw.dispatcher().is_attached(index));
    assert_eq!(app.fw().dispatcher().count(None, ObjKind::Pd), 0);
    assert_eq!(ctx.slots()[index as usize].reclaim_reason, reclaim_reason::DETACHED);
    // And a new context works.
    let again = ctx.reopen().unwrap();
    again.nop().unwrap();
    assert_eq!(again.links().unwrap().len(), 1);
    assert_eq!(again.attached_contexts(), 1);
}
