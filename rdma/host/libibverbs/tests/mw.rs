//! Issue 19's verbs through the C ABI: `tests/c/mw_ops.c`, built against
//! rdma-core 44's `verbs.h` and linked with our `libibverbs.so.1`, on one
//! host-simulated appliance; the Rust host library on the other is its RC
//! peer (WRITE through the program's type 1 window, READ through its type
//! 2B window, SEND WITH INVALIDATE of that one; the program's ATOMIC WRITE
//! and SEND WITH INVALIDATE land here). One line at a time is exchanged on
//! the program's stdin/stdout.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::{PATIENCE, Pair, lib_dir};
use verbs::{AccessFlags, Context, MwType, Qp, QpCap, QpInitAttr, RtrAttr, SendFlags, SendWr, WrOp, wc_opcode};
use verbs_ring::abi::wc_flags;

/// `mw_ops.c`, compiled once into the test's library folder.
fn build_program() -> std::path::PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/mw_ops.c");
    let exe = lib_dir().join("mw_ops");
    let cc = Command::new("cc")
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-L")
        .arg(lib_dir())
        .arg("-l:libibverbs.so.1")
        .output()
        .expect("cc");
    assert!(cc.status.success(), "{}", String::from_utf8_lossy(&cc.stderr));
    exe
}

fn ipv4_gid(n: u8) -> [u8; 16] {
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, n]
}

/// The numbers after each word of a line such as `mw1 <rkey> <addr> ...`.
fn numbers(line: &str) -> Vec<u64> {
    line.split_whitespace().filter_map(|w| w.parse().ok()).collect()
}

#[test]
fn windows_invalidation_atomic_write_and_multicast_through_the_c_abi() {
    let exe = build_program();
    let pair = Pair::start();
    let mut child = Command::new(&exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("RDMA_RING", &pair.rings[0])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut to = child.stdin.take().unwrap();
    let mut from = BufReader::new(child.stdout.take().unwrap());
    let mut line = || {
        let mut l = String::new();
        from.read_line(&mut l).unwrap();
        assert!(!l.starts_with("FAIL") && !l.is_empty(), "mw_ops: {l}");
        l
    };

    let ctx = Context::open(&pair.rings[1]).unwrap();
    let dev = ctx.device(Some("rxe0")).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let mr = pd.reg_mr(16 << 10, AccessFlags::ALL_REMOTE | AccessFlags::MW_BIND).unwrap();
    let cq = dev.create_cq(64, 1).unwrap();
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qp = Qp::create(&pd, &cq, &cq, None, &attr).unwrap();
    let theirs = numbers(&line());
    qp.to_init(1, AccessFlags::ALL_REMOTE).unwrap();
    let rtr = RtrAttr {
        port: 1,
        path_mtu: 3,
        dest_qp_num: theirs[0] as u32,
        rq_psn: 7,
        dgid: ipv4_gid(1),
        sgid_index: 1,
        max_dest_rd_atomic: 4,
        min_rnr_timer: 12,
        ..Default::default()
    };
    qp.to_rtr(&rtr).unwrap();
    qp.to_rts(7, 4).unwrap();
    let post = |wr_id, op, sg: &[verbs::Sge]| {
        qp.post_send(&[SendWr { wr_id, op, sg_list: sg, flags: SendFlags::SIGNALED, ud: None }]).unwrap()
    };
    // Our window for the program's SEND WITH INVALIDATE.
    let mw = pd.alloc_mw(MwType::Type2).unwrap();
    let key = mw.next_rkey();
    post(1, mw.bind_wr(&mr, 8192, 4096, AccessFlags::REMOTE_READ, key), &[]);
    let c = cq.wait(PATIENCE).unwrap();
    assert_eq!((c.status.is_success(), c.opcode), (true, wc_opcode::BIND_MW), "{c:?}");
    mw.bound(key);
    writeln!(to, "{} {} {} {}", qp.qp_num(), mr.addr(), mr.rkey(), mw.rkey()).unwrap();

    // mw1 <rkey> <addr> mw2 <rkey> <addr>
    let w = numbers(&line());
    let (k1, a1, k2, a2) = (w[0] as u32, w[1], w[2] as u32, w[3]);
    mr.write(0, b"written through mw1\0").unwrap();
    post(2, WrOp::Write { remote_addr: a1, rkey: k1 }, &[mr.sge(0, 20).unwrap()]);
    assert!(cq.wait(PATIENCE).unwrap().status.is_success());
    post(3, WrOp::Read { remote_addr: a2, rkey: k2 }, &[mr.sge(1024, 16).unwrap()]);
    assert!(cq.wait(PATIENCE).unwrap().status.is_success());
    assert_eq!(mr.to_vec(1024, 16).unwrap(), b"read through mw2");
    qp.post_recv(&[(4, &[mr.sge(12288, 64).unwrap()][..])]).unwrap();
    post(5, WrOp::SendWithInv(k2), &[mr.sge(0, 8).unwrap()]);
    assert!(cq.wait(PATIENCE).unwrap().status.is_success());

    // The program's ATOMIC WRITE (no completion here) and SEND WITH INVALIDATE.
    let r = cq.wait(PATIENCE).unwrap();
    assert_eq!((r.wr_id, r.status.is_success(), r.opcode), (4, true, wc_opcode::RECV), "{r:?}");
    assert_ne!(r.wc_flags & wc_flags::WITH_INV, 0, "{r:?}");
    assert_eq!(mr.to_vec(12288, 16).unwrap(), b"invalidate yours");
    assert_eq!(mr.to_vec(0, 8).unwrap(), b"atomic!!");
    assert!(line().starts_with("ok"));
    assert!(child.wait().unwrap().success());
}
