//! `srq_pingpong`: ibv_srq_pingpong for the appliance. `-q` RC QPs (16 by
//! default) receive through one shared receive queue of `-r` WQEs, and each
//! QP ping-pongs on its own; `-n` counts the exchanges of all QPs together,
//! as rdma-core's loop does (its usage says "per QP"; its loop does not).
//! The TCP exchange is rdma-core's ([`verbs::pingpong`]) with 256 messages
//! each way whatever `-q` is, the ones beyond our QPs zero. Like rdma-core's,
//! it checks no data (the buffer starts zeroed and serves both directions)
//! and prints one address line per QP on each side, then the same two
//! result lines as `ibv_rc_pingpong`.

use std::time::{Duration, Instant};

use clap::Parser;
use verbs::cli::fail;
use verbs::pingpong::{Dest, PingpongArgs, client_exchange, die, psn, server_exchange};
use verbs::{AccessFlags, Device, Error, Qp, QpCap, QpInitAttr, RtrAttr, SendFlags, SendWr, Srq, WrOp, names};

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// rdma-core's `MAX_QP`: the number of address messages each side sends.
const MAX_QP: usize = 256;
/// How long one completion may take before the run is declared stuck.
const STALL: Duration = Duration::from_secs(30);

#[derive(Parser)]
#[command(name = "srq_pingpong", about = "Ping-pong over RC QPs sharing one receive queue (as ibv_srq_pingpong)")]
struct Cli {
    #[command(flatten)]
    pp: PingpongArgs,
    /// number of QPs to use
    #[arg(short = 'q', long = "num-qp", default_value_t = 16)]
    num_qp: u32,
}

fn main() {
    let cli = Cli::parse();
    let pp = &cli.pp;
    let _ = (pp.common.events, pp.common.sl);
    let Some(mtu) = names::mtu_enum(pp.mtu) else { die("Invalid MTU (256, 512, 1024, 2048 or 4096)") };
    if pp.size == 0 || pp.size > u32::MAX as usize || pp.common.iters == 0 || cli.num_qp == 0 {
        die("size, iters and num-qp must be positive");
    }
    if cli.num_qp as usize > MAX_QP {
        die(&format!("at most {MAX_QP} QPs"));
    }
    if cli.num_qp > pp.common.rx_depth {
        die(&format!(
            "rx_depth {} is too small for {} QPs -- must have at least one receive per QP.",
            pp.common.rx_depth, cli.num_qp
        ));
    }
    let dev = pp.common.ring.device(pp.common.dev.as_deref()).unwrap_or_else(|e| fail("srq_pingpong", &e));
    if let Err(e) = run(&cli, &dev, mtu) {
        fail("srq_pingpong", &e)
    }
}

fn run(cli: &Cli, dev: &Device, mtu: u32) -> verbs::Result<()> {
    let pp = &cli.pp;
    let num_qp = cli.num_qp as usize;
    let port_attr = dev.query_port(pp.common.ib_port)?;
    let pd = dev.alloc_pd()?;
    // Zeroed by reg_mr, as rdma-core's memset leaves its buffer.
    let mr = pd.reg_mr(pp.size, AccessFlags::LOCAL_WRITE)?;
    let cq = dev.create_cq(pp.common.rx_depth + cli.num_qp, 0)?;
    let srq = Srq::create(&pd, pp.common.rx_depth, 1, 0)?;
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 1, max_recv_wr: 0, max_send_sge: 1, max_recv_sge: 0, max_inline_data: 0 },
        ..Default::default()
    };
    let qps = (0..num_qp).map(|_| Qp::create(&pd, &cq, &cq, Some(&srq), &attr)).collect::<verbs::Result<Vec<_>>>()?;
    for qp in &qps {
        qp.to_init(pp.common.ib_port, AccessFlags::NONE_REMOTE)?;
    }

    let sge = [mr.sge(0, pp.size as u32)?];
    let post_recvs = |n: u32| -> verbs::Result<()> {
        let wrs: Vec<(u64, &[verbs::Sge])> = (0..n).map(|_| (RECV_WRID, &sge[..])).collect();
        srq.post_recv(&wrs)
    };
    post_recvs(pp.common.rx_depth)?;
    let mut routs = pp.common.rx_depth;

    let gid = match pp.common.gid_idx {
        Some(i) => dev.query_gid(pp.common.ib_port, u32::from(i))?.gid,
        None if port_attr.link_layer == 2 => die("Couldn't get local LID (RoCE needs a GID: use -g GID_INDEX)"),
        None => [0; 16],
    };
    let mut mine = vec![Dest::default(); MAX_QP];
    for (d, qp) in mine.iter_mut().zip(&qps) {
        *d = Dest { lid: port_attr.lid, qpn: qp.qp_num(), psn: psn(), gid };
        d.print("local");
    }

    let connect = |rem: &[Dest]| -> verbs::Result<()> {
        for ((qp, me), r) in qps.iter().zip(&mine).zip(rem) {
            qp.to_rtr(&RtrAttr {
                port: pp.common.ib_port,
                path_mtu: mtu,
                dest_qp_num: r.qpn,
                rq_psn: r.psn,
                dlid: r.lid,
                dgid: r.gid,
                sgid_index: pp.common.gid_idx.unwrap_or(0),
                max_dest_rd_atomic: 1,
                min_rnr_timer: 12,
            })?;
            qp.to_rts(me.psn, 1)?;
        }
        Ok(())
    };
    let client = pp.common.servername.is_some();
    let rem = match &pp.common.servername {
        Some(host) => client_exchange(host, pp.common.port, &mine, MAX_QP),
        None => server_exchange(pp.common.port, &mine, MAX_QP, connect)?,
    };
    for r in &rem[..num_qp] {
        r.print("remote");
    }
    if client {
        connect(&rem)?;
    }

    let send = |qp: &Qp| -> verbs::Result<()> {
        qp.post_send(&[SendWr {
            wr_id: SEND_WRID,
            op: WrOp::Send,
            sg_list: &sge,
            flags: SendFlags::SIGNALED,
            ud: None,
        }])
    };
    // What each QP still waits for before it sends again.
    let mut pending = vec![RECV_WRID; num_qp];
    let start = Instant::now();
    if client {
        for (qp, p) in qps.iter().zip(pending.iter_mut()) {
            send(qp)?;
            *p = RECV_WRID | SEND_WRID;
        }
    }
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    let mut last_progress = Instant::now();
    while rcnt < pp.common.iters || scnt < pp.common.iters {
        let wc = cq.wait(STALL).map_err(|e| match e {
            Error::TimedOut { .. } | Error::NothingCame { .. } => {
                die(&format!("no completion for {}s (scnt={scnt}, rcnt={rcnt})", STALL.as_secs()))
            }
            e => e,
        })?;
        if !wc.status.is_success() {
            die(&format!("Failed status {} for wr_id {}", wc.status, wc.wr_id));
        }
        let Some(i) = qps.iter().position(|q| q.qp_num() == wc.qp_num) else {
            die(&format!("Couldn't find QPN {:06x}", wc.qp_num))
        };
        match wc.wr_id {
            SEND_WRID => scnt += 1,
            RECV_WRID => {
                routs -= 1;
                // Refill when no more than one receive per QP is left.
                if routs <= cli.num_qp {
                    post_recvs(pp.common.rx_depth - routs)?;
                    routs = pp.common.rx_depth;
                }
                rcnt += 1;
            }
            other => die(&format!("Completion for unknown wr_id {other}")),
        }
        pending[i] &= !wc.wr_id;
        if scnt < pp.common.iters && pending[i] == 0 {
            send(&qps[i])?;
            pending[i] = RECV_WRID | SEND_WRID;
        }
        if last_progress.elapsed() > Duration::from_secs(1) {
            eprint!("\r{rcnt}/{} iters", pp.common.iters);
            last_progress = Instant::now();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if secs > 1.0 {
        eprint!("\r");
    }
    let bytes = pp.size as u64 * u64::from(pp.common.iters) * 2;
    println!("{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec", bytes as f64 * 8.0 / secs / 1e6);
    println!(
        "{} iters in {secs:.2} seconds = {:.2} usec/iter",
        pp.common.iters,
        secs * 1e6 / f64::from(pp.common.iters)
    );
    Ok(())
}
