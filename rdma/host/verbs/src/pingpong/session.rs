//! One ping-pong of `ibv_rc_pingpong`, `ibv_uc_pingpong` or
//! `ibv_ud_pingpong` (rdma-core 44, `libibverbs/examples/`), the three
//! tools differing only in their transport.
//!
//! One buffer, filled with rdma-core's 0x7b, serves every send and every
//! receive: a send carries what the last receive left there. After the TCP
//! exchange ([`super::client_exchange`]) the client sends first, and each side
//! sends again once its last send completed and a message arrived, until
//! both counts reach `-n`. UC is RC without ACKs (RTR takes no RDMA-read or
//! RNR attributes, RTS only the send PSN). UD: Q_Key 0x11111111, RTR and RTS
//! with no path, an address handle to the peer made from its GID, and the
//! 40-byte GRH in front of the message in every receive, so the buffer is
//! `size + 40` bytes and sends start 40 bytes in; a message must fit the
//! port's MTU.
//!
//! `-e` sleeps on each completion event (the appliance's doorbell) without
//! spinning first; without a doorbell both ways poll.
//!
//! `-c` is rdma-core's check (`verbs_ring::show::pingpong`): the client marks
//! its message; each side checks every message it receives against the
//! marked fill, printing rdma-core's `invalid data in page N` lines after the
//! results (and, unlike rdma-core, exiting 1 then). Without `-c` nothing is
//! checked.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use verbs_ring::show::pingpong;

use super::{CommonArgs, Dest, client_exchange, die, psn, server_exchange};
use crate::cli::fail;
use crate::{
    AccessFlags, Ah, AhAttr, Device, Error, Qp, QpAttr, QpCap, QpInitAttr, RtrAttr, SendFlags, SendWr, Sge, UdDest,
    WrOp, names, qp_attr_mask, qp_state, qp_type,
};

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// The Q_Key `ibv_ud_pingpong` gives its QP and its sends.
pub const UD_QKEY: u32 = 0x1111_1111;
/// What a UD receive holds in front of the message.
pub const GRH_LEN: usize = 40;
/// How long one completion may take before the run is declared stuck.
const STALL: Duration = Duration::from_secs(30);

/// Which of the three tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Rc,
    Uc,
    Ud,
}

impl Transport {
    /// The tool's name, for its messages.
    pub fn tool(self) -> &'static str {
        match self {
            Transport::Rc => "rc_pingpong",
            Transport::Uc => "uc_pingpong",
            Transport::Ud => "ud_pingpong",
        }
    }

    fn qp_type(self) -> u8 {
        match self {
            Transport::Rc => qp_type::RC,
            Transport::Uc => qp_type::UC,
            Transport::Ud => qp_type::UD,
        }
    }

    /// Bytes in front of the message in the buffer.
    fn grh(self) -> usize {
        if self == Transport::Ud { GRH_LEN } else { 0 }
    }
}

/// What one run is asked for.
pub struct Session<'a> {
    pub transport: Transport,
    pub common: &'a CommonArgs,
    pub size: usize,
    /// The path MTU in bytes (`-m`); UD has none: its messages must fit the
    /// port's active MTU.
    pub mtu: Option<u32>,
    pub chk: bool,
}

/// Checks the options, opens the device and runs the session; any failure
/// is printed and ends the process, as the examples do.
pub fn main(s: &Session<'_>) {
    let tool = s.transport.tool();
    let c = s.common;
    let mtu =
        s.mtu.map(|bytes| names::mtu_enum(bytes).unwrap_or_else(|| die("Invalid MTU (256, 512, 1024, 2048 or 4096)")));
    if s.size == 0 || s.size + s.transport.grh() > u32::MAX as usize || c.iters == 0 || c.rx_depth == 0 {
        die("size, iters and rx-depth must be positive");
    }
    let dev = c.ring.device(c.dev.as_deref()).unwrap_or_else(|e| fail(tool, &e));
    if let Err(e) = run(s, &dev, mtu) {
        fail(tool, &e)
    }
}

fn run(s: &Session<'_>, dev: &Device, mtu: Option<u32>) -> crate::Result<()> {
    let c = s.common;
    let t = s.transport;
    let port_attr = dev.query_port(c.ib_port)?;
    if t == Transport::Ud {
        let port_mtu = names::mtu_bytes(port_attr.active_mtu);
        if s.size > port_mtu as usize {
            die(&format!("Requested size larger than port MTU ({port_mtu})"));
        }
    }
    let grh = t.grh();
    let buf_len = s.size + grh;
    let pd = dev.alloc_pd()?;
    let mr = pd.reg_mr(buf_len, AccessFlags::LOCAL_WRITE)?;
    mr.write(0, &vec![pingpong::FILL; buf_len])?;
    let cq = dev.create_cq(c.rx_depth + 1, 0)?;
    let attr = QpInitAttr {
        qp_type: t.qp_type(),
        cap: QpCap { max_send_wr: 1, max_recv_wr: c.rx_depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qp = Qp::create(&pd, &cq, &cq, None, &attr)?;
    if t == Transport::Ud {
        let init = QpAttr { qp_state: qp_state::INIT, port_num: c.ib_port, qkey: UD_QKEY, ..Default::default() };
        let mask = qp_attr_mask::STATE | qp_attr_mask::PKEY_INDEX | qp_attr_mask::PORT | qp_attr_mask::QKEY;
        qp.modify(&init, mask)?;
    } else {
        qp.to_init(c.ib_port, AccessFlags::NONE_REMOTE)?;
    }

    // Receives take the whole buffer (the GRH first for UD); sends carry the message.
    let recv_sge = [mr.sge(0, buf_len as u32)?];
    let send_sge = [mr.sge(grh, s.size as u32)?];
    let recvs: Vec<(u64, &[Sge])> = (0..c.rx_depth).map(|_| (RECV_WRID, &recv_sge[..])).collect();
    qp.post_recv(&recvs)?;
    let mut routs = c.rx_depth;

    let gid = match c.gid_idx {
        Some(i) => dev.query_gid(c.ib_port, u32::from(i))?.gid,
        None if port_attr.link_layer == 2 => die("Couldn't get local LID (RoCE needs a GID: use -g GID_INDEX)"),
        None => [0; 16],
    };
    let me = Dest { lid: port_attr.lid, qpn: qp.qp_num(), psn: psn(), gid };
    me.print("local");

    let mut ah: Option<Ah<'_>> = None;
    let mut connect = |rem: &Dest| -> crate::Result<()> {
        if t == Transport::Ud {
            ah = Some(pd.create_ah(&AhAttr {
                dgid: rem.gid,
                sgid_index: c.gid_idx.unwrap_or(0),
                hop_limit: 1,
                is_global: u8::from(rem.gid != [0; 16]),
                dlid: rem.lid,
                sl: c.sl,
                port_num: c.ib_port,
                ..Default::default()
            })?);
            qp.modify(&QpAttr { qp_state: qp_state::RTR, ..Default::default() }, qp_attr_mask::STATE)?;
            let rts = QpAttr { qp_state: qp_state::RTS, sq_psn: me.psn, ..Default::default() };
            return qp.modify(&rts, qp_attr_mask::STATE | qp_attr_mask::SQ_PSN);
        }
        qp.to_rtr(&RtrAttr {
            port: c.ib_port,
            path_mtu: mtu.unwrap_or(3),
            dest_qp_num: rem.qpn,
            rq_psn: rem.psn,
            dlid: rem.lid,
            dgid: rem.gid,
            sgid_index: c.gid_idx.unwrap_or(0),
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
        })?;
        qp.to_rts(me.psn, 1)
    };
    let rem = match &c.servername {
        Some(host) => {
            let rem = client_exchange(host, c.port, &[me], 1)[0];
            connect(&rem)?;
            rem
        }
        None => server_exchange(c.port, &[me], 1, |r: &[Dest]| connect(&r[0]))?[0],
    };
    rem.print("remote");

    let client = c.servername.is_some();
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    let mut pending = RECV_WRID;
    let ud = ah.as_ref().map(|ah| UdDest { ah, remote_qpn: rem.qpn, remote_qkey: UD_QKEY });
    let send = || -> crate::Result<()> {
        qp.post_send(&[SendWr { wr_id: SEND_WRID, op: WrOp::Send, sg_list: &send_sge, flags: SendFlags::SIGNALED, ud }])
    };
    let start = Instant::now();
    if client {
        if s.chk {
            let mut msg = vec![pingpong::FILL; s.size];
            pingpong::mark(&mut msg);
            mr.write(grh, &msg)?;
        }
        send()?;
        pending |= SEND_WRID;
    }
    let mut received = vec![0u8; s.size];
    let mut bad_pages = BTreeSet::new();
    let mut last_progress = Instant::now();
    while rcnt < c.iters || scnt < c.iters {
        // -e: arm and sleep on the completion event at once, as rdma-core's
        // with its completion channel; else a short spin first.
        let wc = if c.events { cq.wait_event(STALL) } else { cq.wait(STALL) };
        let wc = wc.map_err(|e| match e {
            Error::TimedOut { .. } | Error::NothingCame { .. } => {
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
                if s.chk {
                    mr.read(grh, &mut received)?;
                    bad_pages.extend(pingpong::bad_pages(&received));
                }
                rcnt += 1;
                routs -= 1;
                if routs <= 1 {
                    let n = c.rx_depth - routs;
                    let more: Vec<(u64, &[Sge])> = (0..n).map(|_| (RECV_WRID, &recv_sge[..])).collect();
                    qp.post_recv(&more)?;
                    routs += n;
                }
            }
            other => die(&format!("Completion for unknown wr_id {other}")),
        }
        pending &= !wc.wr_id;
        if scnt < c.iters && pending == 0 {
            send()?;
            pending = RECV_WRID | SEND_WRID;
        }
        if last_progress.elapsed() > Duration::from_secs(1) {
            eprint!("\r{rcnt}/{} iters", c.iters);
            last_progress = Instant::now();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if secs > 1.0 {
        eprint!("\r");
    }
    let bytes = s.size as u64 * u64::from(c.iters) * 2;
    println!("{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec", bytes as f64 * 8.0 / secs / 1e6);
    println!("{} iters in {secs:.2} seconds = {:.2} usec/iter", c.iters, secs * 1e6 / f64::from(c.iters));
    for &page in &bad_pages {
        println!("{}", pingpong::InvalidPage(page));
    }
    if !bad_pages.is_empty() {
        crate::cli::exit(1);
    }
    Ok(())
}
