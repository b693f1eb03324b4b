//! `rc_pingpong`: ibv_rc_pingpong for the appliance. Same options and the
//! same TCP exchange on port 18515 ([`verbs::pingpong`]: one 52-byte
//! address message each way, then the client's `"done"`). Without a server
//! name it is the server. The buffer holds rdma-core's 0x7b fill and serves
//! both sends and receives, as rdma-core's does. `-c` is rdma-core's check
//! (`verbs_ring::show::pingpong`): the client marks its message, and each
//! side checks every message it receives against the marked fill, printing
//! rdma-core's `invalid data in page N` lines after the results (and, unlike
//! rdma-core, exiting 1 then). Without `-c` nothing is checked. `-e` sleeps
//! on each completion event (the appliance's doorbell) without spinning
//! first; without a doorbell both ways poll.

use std::time::{Duration, Instant};

use clap::Parser;
use verbs::cli::fail;
use verbs::pingpong::{Dest, PingpongArgs, client_exchange, die, psn, server_exchange};
use verbs::{AccessFlags, Device, Error, Qp, QpCap, QpInitAttr, RtrAttr, SendFlags, SendWr, WrOp, names};
use verbs_ring::show::pingpong;

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// How long one completion may take before the run is declared stuck.
const STALL: Duration = Duration::from_secs(30);

#[derive(Parser)]
#[command(name = "rc_pingpong", about = "Ping-pong over an RC connection (as ibv_rc_pingpong)")]
struct Cli {
    #[command(flatten)]
    pp: PingpongArgs,
    /// validate received buffer
    #[arg(short = 'c', long = "chk")]
    chk: bool,
}

fn main() {
    let cli = Cli::parse();
    let Some(mtu) = names::mtu_enum(cli.pp.mtu) else { die("Invalid MTU (256, 512, 1024, 2048 or 4096)") };
    if cli.pp.size == 0 || cli.pp.size > u32::MAX as usize || cli.pp.iters == 0 || cli.pp.rx_depth == 0 {
        die("size, iters and rx-depth must be positive");
    }
    let dev = cli.pp.ring.device(cli.pp.dev.as_deref()).unwrap_or_else(|e| fail("rc_pingpong", &e));
    if let Err(e) = run(&cli, &dev, mtu) {
        fail("rc_pingpong", &e)
    }
}

fn run(cli: &Cli, dev: &Device, mtu: u32) -> verbs::Result<()> {
    let port_attr = dev.query_port(cli.pp.ib_port)?;
    let pd = dev.alloc_pd()?;
    let mr = pd.reg_mr(cli.pp.size, AccessFlags::LOCAL_WRITE)?;
    mr.write(0, &vec![pingpong::FILL; cli.pp.size])?;
    let rx_depth = cli.pp.rx_depth;
    let cq = dev.create_cq(rx_depth + 1, 0)?;
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 1, max_recv_wr: rx_depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qp = Qp::create(&pd, &cq, &cq, None, &attr)?;
    qp.to_init(cli.pp.ib_port, AccessFlags::NONE_REMOTE)?;

    let sge = [mr.sge(0, cli.pp.size as u32)?];
    let recvs: Vec<(u64, &[verbs::Sge])> = (0..rx_depth).map(|_| (RECV_WRID, &sge[..])).collect();
    qp.post_recv(&recvs)?;
    let mut routs = rx_depth;

    let gid = match cli.pp.gid_idx {
        Some(i) => dev.query_gid(cli.pp.ib_port, u32::from(i))?.gid,
        None if port_attr.link_layer == 2 => die("Couldn't get local LID (RoCE needs a GID: use -g GID_INDEX)"),
        None => [0; 16],
    };
    let me = Dest { lid: port_attr.lid, qpn: qp.qp_num(), psn: psn(), gid };
    me.print("local");

    let connect = |rem: &Dest| -> verbs::Result<()> {
        qp.to_rtr(&RtrAttr {
            port: cli.pp.ib_port,
            path_mtu: mtu,
            dest_qp_num: rem.qpn,
            rq_psn: rem.psn,
            dlid: rem.lid,
            dgid: rem.gid,
            sgid_index: cli.pp.gid_idx.unwrap_or(0),
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
        })?;
        qp.to_rts(me.psn, 1)
    };
    let _ = cli.pp.sl;

    let rem = match &cli.pp.servername {
        Some(host) => {
            let rem = client_exchange(host, cli.pp.port, &[me], 1)[0];
            connect(&rem)?;
            rem
        }
        None => server_exchange(cli.pp.port, &[me], 1, |r: &[Dest]| connect(&r[0]))?[0],
    };
    rem.print("remote");

    let client = cli.pp.servername.is_some();
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    let mut pending = RECV_WRID;
    // Sends carry what the buffer holds: the fill, then what was received.
    let send = || -> verbs::Result<()> {
        qp.post_send(&[SendWr {
            wr_id: SEND_WRID,
            op: WrOp::Send,
            sg_list: &sge,
            flags: SendFlags::SIGNALED,
            ud: None,
        }])
    };
    let start = Instant::now();
    if client {
        if cli.chk {
            let mut msg = vec![pingpong::FILL; cli.pp.size];
            pingpong::mark(&mut msg);
            mr.write(0, &msg)?;
        }
        send()?;
        pending |= SEND_WRID;
    }
    let mut buf = vec![0u8; cli.pp.size];
    let mut bad_pages = std::collections::BTreeSet::new();
    let mut last_progress = Instant::now();
    while rcnt < cli.pp.iters || scnt < cli.pp.iters {
        // -e: arm and sleep on the completion event at once, as rdma-core's
        // with its completion channel; else a short spin first.
        let wc = if cli.pp.events { cq.wait_event(STALL) } else { cq.wait(STALL) };
        let wc = wc.map_err(|e| match e {
            Error::TimedOut { .. } => {
                die(&format!("no completion for {}s (scnt={scnt}, rcnt={rcnt})", STALL.as_secs()))
            }
            e => e,
        })?;
        if !wc.status.is_success() {
            die(&format!("Failed status {} for wr_id {}", wc.status, wc.wr_id));
        }
        match wc.wr_id {
            SEND_WRID => scnt += 1,
            RECV_WRID => {
                if cli.chk {
                    mr.read(0, &mut buf)?;
                    bad_pages.extend(pingpong::bad_pages(&buf));
                }
                rcnt += 1;
                routs -= 1;
                if routs <= 1 {
                    let n = rx_depth - routs;
                    let more: Vec<(u64, &[verbs::Sge])> = (0..n).map(|_| (RECV_WRID, &sge[..])).collect();
                    qp.post_recv(&more)?;
                    routs += n;
                }
            }
            other => die(&format!("Completion for unknown wr_id {other}")),
        }
        pending &= !wc.wr_id;
        if scnt < cli.pp.iters && pending == 0 {
            send()?;
            pending = RECV_WRID | SEND_WRID;
        }
        if last_progress.elapsed() > Duration::from_secs(1) {
            eprint!("\r{rcnt}/{} iters", cli.pp.iters);
            last_progress = Instant::now();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if secs > 1.0 {
        eprint!("\r");
    }
    let bytes = cli.pp.size as u64 * u64::from(cli.pp.iters) * 2;
    println!("{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec", bytes as f64 * 8.0 / secs / 1e6);
    println!("{} iters in {secs:.2} seconds = {:.2} usec/iter", cli.pp.iters, secs * 1e6 / f64::from(cli.pp.iters));
    for &page in &bad_pages {
        println!("{}", pingpong::InvalidPage(page));
    }
    if !bad_pages.is_empty() {
        verbs::cli::exit(1);
    }
    Ok(())
}
