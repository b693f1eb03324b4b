//! Scale on one appliance: a thousand RC QPs carrying traffic at once
//! between two appliances, and 64 host contexts attached to one ring, each
//! with its own QP in use at the same time. This process is the host of
//! both rings (as in verbs.rs); every byte moved is checked.
//!
//! The ring's shape comes from the kernel command line (`ring.contexts=N`,
//! `ring.queues=SIZE`): a context's queue area holds its QPs' send and
//! receive rings and its CQs' rings, and the region's rest is divided among
//! the contexts as buffer areas. What limits host contexts is the region:
//! each needs its command and response rings, its queue area and a buffer
//! area of at least a page, and the superblock names at most 256.

#![deny(unsafe_code)]

use std::time::{Duration, Instant};

use tests::rc::connect;
use tests::{Appliance, Ivshmem, ring_pair};
use verbs::{AccessFlags, Context, Cq, MemoryRegion, Qp, QpCap, QpInitAttr, SendFlags, SendWr, WrOp};

/// Bound on each wait for completions on the emulated wire: generous (TCG on
/// a busy machine), not a timing assertion.
const WAIT: Duration = Duration::from_secs(120);
/// `enum ibv_mtu` 3: 1024-byte packets on the default 1500-byte netdevs.
const IBV_MTU_1024: u32 = 3;

/// Two appliances on one wire, 10.0.0.1 with `append_a` and 10.0.0.2 with
/// `append_b` on their command lines, each with a `region`-byte ring.
fn pair(tag: &str, region: u64, append_a: &str, append_b: &str) -> (Appliance, Appliance, Ivshmem, Ivshmem) {
    let rings = [Ivshmem::temp_plain(&format!("{tag}-a"), region), Ivshmem::temp_plain(&format!("{tag}-b"), region)];
    ring_pair(rings, [append_a, append_b])
}

/// The byte at `i` of message `seq` of QP `qp`.
fn pattern(qp: usize, seq: u32, i: usize) -> u8 {
    (i as u32).wrapping_mul(7).wrapping_add(seq.wrapping_mul(31)).wrapping_add(qp as u32 * 13) as u8
}

/// A QP with a shallow queue: room for one request and one receive.
fn small_qp<'a>(pd: &'a verbs::Pd<'a>, cq: &'a Cq<'a>) -> Qp<'a> {
    let cap = QpCap { max_send_wr: 2, max_recv_wr: 2, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    Qp::create(pd, cq, cq, None, &QpInitAttr { cap, ..Default::default() }).unwrap()
}

/// Waits for `n` successful completions on `cq`, each `wr_id` below `n`
/// exactly once.
fn reap(cq: &Cq<'_>, n: usize, what: &str) {
    let mut seen = vec![false; n];
    let mut wcs = vec![verbs::queue::EMPTY_WC; 64];
    let (mut got, mut last) = (0, Instant::now());
    while got < n {
        let k = cq.poll(&mut wcs).unwrap();
        for wc in &wcs[..k] {
            assert!(wc.status.is_success(), "{what}: {wc:?}");
            let i = wc.wr_id as usize;
            assert!(i < n && !seen[i], "{what}: wr_id {i} twice or unknown");
            seen[i] = true;
        }
        got += k;
        if k > 0 {
            last = Instant::now();
        } else {
            assert!(last.elapsed() < WAIT, "{what}: {got} of {n} completions, none for {WAIT:?}");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// How many of the ring's context slots are attached.
fn attached(c: &Context) -> usize {
    c.slots().iter().filter(|s| s.state == verbs_ring::abi::ctx_state::ATTACHED).count()
}

/// Slot `i` of `len` bytes in `mr`.
fn slot(i: usize, len: usize) -> usize {
    i * len
}

/// One round: `from`'s QP `i` WRITEs message `seq` of QP `i` into slot `i`
/// of `to_mr`, all QPs posted before any completion is reaped; then every
/// slot is checked.
fn write_round(from: &[Qp<'_>], cq: &Cq<'_>, mr: &MemoryRegion<'_>, to_mr: &MemoryRegion<'_>, seq: u32, len: usize) {
    for (i, qp) in from.iter().enumerate() {
        let msg: Vec<u8> = (0..len).map(|b| pattern(i, seq, b)).collect();
        mr.write(slot(i, len), &msg).unwrap();
        let sge = [mr.sge(slot(i, len), len as u32).unwrap()];
        let op = WrOp::Write { remote_addr: to_mr.addr() + slot(i, len) as u64, rkey: to_mr.rkey() };
        qp.post_send(&[SendWr { wr_id: i as u64, op, sg_list: &sge, flags: SendFlags::SIGNALED, ud: None }]).unwrap();
    }
    reap(cq, from.len(), &format!("WRITE round {seq}"));
    let landed = to_mr.to_vec(0, from.len() * len).unwrap();
    for i in 0..from.len() {
        let got = &landed[slot(i, len)..slot(i, len) + len];
        if let Some(b) = (0..len).find(|&b| got[b] != pattern(i, seq, b)) {
            panic!("round {seq}: QP {i}'s WRITE differs at byte {b}");
        }
    }
}

/// 1000 RC QPs on each of two appliances, QP `i` of one connected to QP `i`
/// of the other; four rounds of a 256-byte WRITE on every QP at once, in
/// both directions; then all 1000 are listed in RTS on the console.
#[test]
fn a_thousand_rc_qps_carry_traffic_at_once() {
    const N: usize = 1000;
    const LEN: usize = 256;
    // Each QP's rings (2 send and 2 receive entries) take about 1 KiB of the
    // queue area, the CQ's 2000 entries about 128 KiB: 4 MiB is plenty.
    let params = "ring.contexts=2 ring.queues=4M";
    let (mut a, mut b, sa, sb) = pair("scale-qps", 64 << 20, params, params);
    let (ca, cb) = (Context::open(&sa.path).unwrap(), Context::open(&sb.path).unwrap());
    let (da, db) = (ca.device(Some("rxe0")).unwrap(), cb.device(Some("rxe0")).unwrap());
    let (pa, pb) = (da.alloc_pd().unwrap(), db.alloc_pd().unwrap());
    let (qa, qb) = (da.create_cq(2 * N as u32, 0).unwrap(), db.create_cq(2 * N as u32, 0).unwrap());
    let (ma, mb) =
        (pa.reg_mr(N * LEN, AccessFlags::ALL_REMOTE).unwrap(), pb.reg_mr(N * LEN, AccessFlags::ALL_REMOTE).unwrap());
    let start = Instant::now();
    let xs: Vec<Qp<'_>> = (0..N).map(|_| small_qp(&pa, &qa)).collect();
    let ys: Vec<Qp<'_>> = (0..N).map(|_| small_qp(&pb, &qb)).collect();
    for (x, y) in xs.iter().zip(&ys) {
        connect(x, y.qp_num(), 2, IBV_MTU_1024).unwrap();
        connect(y, x.qp_num(), 1, IBV_MTU_1024).unwrap();
    }
    eprintln!("{N} QP pairs created and connected in {:.1} s", start.elapsed().as_secs_f64());
    let start = Instant::now();
    for round in 0..2 {
        write_round(&xs, &qa, &ma, &mb, 2 * round, LEN);
        write_round(&ys, &qb, &mb, &ma, 2 * round + 1, LEN);
    }
    let messages = 4 * N;
    eprintln!(
        "{messages} WRITEs of {LEN} B ({} bytes checked) over {N} QP pairs in {:.1} s",
        messages * LEN,
        start.elapsed().as_secs_f64()
    );
    for x in [&mut a, &mut b] {
        let qps = x.cmd("rdma resource show qp").unwrap();
        let rts = qps.lines().filter(|l| l.contains("type RC state RTS")).count();
        assert_eq!(rts, N, "{}", qps.lines().take(5).collect::<Vec<_>>().join("\n"));
    }
}

/// 64 host contexts attached to one ring at once (a 65th is refused), each
/// with its own PD, CQ, MR and RC QP to the other appliance: every one
/// WRITEs 4 KiB with all 64 requests in flight together, then each context
/// gives its slot back.
#[test]
fn sixty_four_host_contexts_work_at_once() {
    let (_a, _b, sa, sb) = pair("scale-ctx", 128 << 20, "ring.contexts=64 ring.queues=256K", "");
    sixty_four_writes(&sa, &sb);
    // Each context detached when dropped: the firmware destroys its objects
    // and frees its slot (at its next heartbeat), for a new host.
    let start = Instant::now();
    let again = loop {
        match Context::open(&sa.path) {
            Err(verbs::Error::NoFreeContext { .. }) if start.elapsed() < WAIT => {
                std::thread::sleep(Duration::from_millis(20))
            }
            other => break other.unwrap(),
        }
    };
    while attached(&again) != 1 {
        assert!(start.elapsed() < WAIT, "slots not given back: {:?}", again.slots());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The work of [`sixty_four_host_contexts_work_at_once`], its 64 contexts
/// dropped (detached) at the end.
fn sixty_four_writes(sa: &Ivshmem, sb: &Ivshmem) {
    const N: usize = 64;
    const LEN: usize = 4096;
    let ctxs: Vec<Context> =
        (0..N).map(|i| Context::open(&sa.path).unwrap_or_else(|e| panic!("context {i}: {e}"))).collect();
    let extra = Context::open(&sa.path);
    assert!(extra.is_err(), "a 65th context was attached to a 64-context ring");
    eprintln!("the 65th context: {}", extra.err().map(|e| e.to_string()).unwrap_or_default());
    let devs: Vec<_> = ctxs.iter().map(|c| c.device(Some("rxe0")).unwrap()).collect();
    let pds: Vec<_> = devs.iter().map(|d| d.alloc_pd().unwrap()).collect();
    let cqs: Vec<_> = devs.iter().map(|d| d.create_cq(4, 0).unwrap()).collect();
    let mrs: Vec<_> = pds.iter().map(|p| p.reg_mr(LEN, AccessFlags::ALL_REMOTE).unwrap()).collect();
    let qps: Vec<_> = pds.iter().zip(&cqs).map(|(p, c)| small_qp(p, c)).collect();
    // The other appliance: one context, one QP per host context there.
    let cb = Context::open(&sb.path).unwrap();
    let db = cb.device(Some("rxe0")).unwrap();
    let pb = db.alloc_pd().unwrap();
    let qb = db.create_cq(2 * N as u32, 0).unwrap();
    let mb = pb.reg_mr(N * LEN, AccessFlags::ALL_REMOTE).unwrap();
    let ys: Vec<Qp<'_>> = (0..N).map(|_| small_qp(&pb, &qb)).collect();
    for (x, y) in qps.iter().zip(&ys) {
        connect(x, y.qp_num(), 2, IBV_MTU_1024).unwrap();
        connect(y, x.qp_num(), 1, IBV_MTU_1024).unwrap();
    }
    for (i, (qp, mr)) in qps.iter().zip(&mrs).enumerate() {
        let msg: Vec<u8> = (0..LEN).map(|b| pattern(i, 0, b)).collect();
        mr.write(0, &msg).unwrap();
        let sge = [mr.sge(0, LEN as u32).unwrap()];
        let op = WrOp::Write { remote_addr: mb.addr() + slot(i, LEN) as u64, rkey: mb.rkey() };
        qp.post_send(&[SendWr { wr_id: 0, op, sg_list: &sge, flags: SendFlags::SIGNALED, ud: None }]).unwrap();
    }
    for (i, cq) in cqs.iter().enumerate() {
        let wc = cq.wait(WAIT).unwrap();
        assert!(wc.status.is_success(), "context {i}: {wc:?}");
    }
    let landed = mb.to_vec(0, N * LEN).unwrap();
    for i in 0..N {
        let got = &landed[slot(i, LEN)..slot(i, LEN) + LEN];
        assert!((0..LEN).all(|b| got[b] == pattern(i, 0, b)), "context {i}'s WRITE differs");
    }
    assert_eq!(attached(&ctxs[0]), N, "{:?}", ctxs[0].slots());
}
