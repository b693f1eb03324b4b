//! The library in one page: one process drives two appliances (two rings)
//! and RDMA-WRITEs a message from the first's memory into the second's, then
//! READs it back and checks it.
//!
//! Each ring is an appliance's shared-memory region; `make run NODE=1` and
//! `make run NODE=2` boot two on one wire, each with `rdma link add rxe0 type
//! rxe netdev eth0` typed at its console. Then:
//!
//! ```text
//! cargo run -p verbs --example rdma_write -- /dev/shm/roce-appliance-1 /dev/shm/roce-appliance-2
//! ```
//!
//! Both QPs are connected by hand, as `ibv_rc_pingpong` does after its TCP
//! exchange: here the one process knows both ends' QPN and GID.

use std::path::PathBuf;
use std::time::Duration;
use verbs::{AccessFlags, Context, Cq, Device, MemoryRegion, Qp, QpInitAttr, RtrAttr, SendFlags, SendWr, WrOp};

/// The RoCE v2 GID of the port's IPv4 address (`show_gids` index 1).
const GID_INDEX: u32 = 1;
/// `IBV_MTU_1024`: fits any netdev MTU.
const PATH_MTU_1024: u32 = 3;
const PSN: u32 = 0x1234;
const WAIT: Duration = Duration::from_secs(30);
const MESSAGE: &[u8] = b"hello from the other appliance";

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// One appliance's half: its device, PD, memory and an RC QP.
struct End<'a> {
    gid: [u8; 16],
    mr: MemoryRegion<'a>,
    cq: &'a Cq<'a>,
    qp: Qp<'a>,
}

fn end<'a>(dev: &Device, pd: &'a verbs::Pd<'a>, cq: &'a Cq<'a>) -> Res<End<'a>> {
    let gid = dev.query_gid(1, GID_INDEX)?;
    if gid.valid == 0 {
        return Err(format!("{}: no GID {GID_INDEX} (is eth0 up with an IPv4 address?)", dev.name()).into());
    }
    let mr = pd.reg_mr(4096, AccessFlags::ALL_REMOTE)?;
    let qp = Qp::create(pd, cq, cq, None, &QpInitAttr::default())?;
    Ok(End { gid: gid.gid, mr, cq, qp })
}

/// RESET -> INIT -> RTR -> RTS towards `peer`.
fn connect(me: &End<'_>, peer: &End<'_>) -> Res<()> {
    me.qp.to_init(1, AccessFlags::ALL_REMOTE)?;
    me.qp.to_rtr(&RtrAttr {
        port: 1,
        path_mtu: PATH_MTU_1024,
        dest_qp_num: peer.qp.qp_num(),
        rq_psn: PSN,
        dgid: peer.gid,
        sgid_index: GID_INDEX as u8,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        ..Default::default()
    })?;
    me.qp.to_rts(PSN, 1)?;
    Ok(())
}

/// Posts one signaled request on `me` against `peer`'s memory and waits for it.
fn one(me: &End<'_>, op: WrOp, offset: usize, len: usize) -> Res<()> {
    let sge = [me.mr.sge(offset, len as u32)?];
    me.qp.post_send(&[SendWr { wr_id: 1, op, sg_list: &sge, flags: SendFlags::SIGNALED, ud: None }])?;
    let wc = me.cq.wait(WAIT)?;
    if !wc.status.is_success() {
        return Err(format!("{op:?} completed with {:?}", wc.status).into());
    }
    Ok(())
}

fn main() -> Res<()> {
    let rings: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [a, b] = rings.as_slice() else {
        return Err("usage: rdma_write RING_A RING_B (two appliances' shared-memory files)".into());
    };
    let (ca, cb) = (Context::open(a)?, Context::open(b)?);
    let (da, db) = (ca.device(Some("rxe0"))?, cb.device(Some("rxe0"))?);
    let (pa, pb) = (da.alloc_pd()?, db.alloc_pd()?);
    let (qa, qb) = (da.create_cq(16, 0)?, db.create_cq(16, 0)?);
    let (x, y) = (end(&da, &pa, &qa)?, end(&db, &pb, &qb)?);
    connect(&x, &y)?;
    connect(&y, &x)?;

    x.mr.write(0, MESSAGE)?;
    let to_y = WrOp::Write { remote_addr: y.mr.addr(), rkey: y.mr.rkey() };
    one(&x, to_y, 0, MESSAGE.len())?;
    let mut landed = vec![0; MESSAGE.len()];
    y.mr.read(0, &mut landed)?;

    // And back: READ it from the second appliance into another part of the first's memory.
    let from_y = WrOp::Read { remote_addr: y.mr.addr(), rkey: y.mr.rkey() };
    one(&x, from_y, 1024, MESSAGE.len())?;
    let mut read_back = vec![0; MESSAGE.len()];
    x.mr.read(1024, &mut read_back)?;

    if landed != MESSAGE || read_back != MESSAGE {
        return Err(format!("data differ: wrote {MESSAGE:?}, landed {landed:?}, read back {read_back:?}").into());
    }
    println!(
        "RDMA WRITE of {} bytes from QP {:#x} landed in QP {:#x}'s memory; READ back intact",
        MESSAGE.len(),
        x.qp.qp_num(),
        y.qp.qp_num()
    );
    Ok(())
}
