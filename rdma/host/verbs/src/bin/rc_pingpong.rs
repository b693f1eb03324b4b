//! `rc_pingpong`: ibv_rc_pingpong for the appliance. Same options and the
//! same TCP exchange on port 18515: each side sends the 52-byte message
//! `"%04x:%06x:%06x:%s"` (LID, QPN, PSN, GID as 32 hex digits, NUL
//! terminated); the client sends first, the server answers after moving
//! its QP to RTS, and the client confirms with `"done"`. Without a server
//! name it is the server. The buffer holds rdma-core's 0x7b fill and serves
//! both sends and receives, as rdma-core's does. `-c` is rdma-core's check
//! (`verbs_ring::show::pingpong`): the client marks its message, and each
//! side checks every message it receives against the marked fill, printing
//! rdma-core's `invalid data in page N` lines after the results (and, unlike
//! rdma-core, exiting 1 then). Without `-c` nothing is checked.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use clap::Parser;
use verbs::cli::{RingArgs, fail};
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
    ring: RingArgs,
    /// listen on/connect to port PORT
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    port: u16,
    /// use IB device DEV (default first device found)
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// use port PORT of IB device
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    ib_port: u8,
    /// size of message to exchange
    #[arg(short = 's', long = "size", default_value_t = 4096)]
    size: usize,
    /// path MTU
    #[arg(short = 'm', long = "mtu", default_value_t = 1024)]
    mtu: u32,
    /// number of receives to post at a time
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    rx_depth: u32,
    /// number of exchanges
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    iters: u32,
    /// service level value
    #[arg(short = 'l', long = "sl", default_value_t = 0)]
    sl: u8,
    /// sleep on CQ events (accepted; completions are polled)
    #[arg(short = 'e', long = "events")]
    events: bool,
    /// local port GID index
    #[arg(short = 'g', long = "gid-idx")]
    gid_idx: Option<u8>,
    /// validate received buffer
    #[arg(short = 'c', long = "chk")]
    chk: bool,
    /// server to connect to (else: be the server)
    servername: Option<String>,
}

/// One side's address: what the 52-byte message carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dest {
    lid: u16,
    qpn: u32,
    psn: u32,
    gid: [u8; 16],
}

impl Dest {
    /// `"%04x:%06x:%06x:%s"` with the GID as 32 hex digits, NUL terminated: 52 bytes.
    fn to_wire(self) -> [u8; 52] {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        let s = format!("{:04x}:{:06x}:{:06x}:{gid}", self.lid, self.qpn & 0xff_ffff, self.psn & 0xff_ffff);
        let mut out = [0u8; 52];
        out[..51].copy_from_slice(s.as_bytes());
        out
    }

    fn from_wire(m: &[u8; 52]) -> Option<Dest> {
        let s = std::str::from_utf8(&m[..51]).ok()?;
        let mut f = s.split(':');
        let lid = u16::from_str_radix(f.next()?, 16).ok()?;
        let qpn = u32::from_str_radix(f.next()?, 16).ok()?;
        let psn = u32::from_str_radix(f.next()?, 16).ok()?;
        let g = f.next()?;
        if g.len() != 32 || f.next().is_some() {
            return None;
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(g.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Dest { lid, qpn, psn, gid })
    }

    fn print(&self, what: &str) {
        println!(
            "  {what} address:  LID {:#06x}, QPN {:#08x}, PSN {:#08x}, GID {}",
            self.lid,
            self.qpn,
            self.psn,
            verbs_ring::show::words::GidText(&self.gid)
        );
    }
}

fn die(msg: &str) -> ! {
    eprintln!("{msg}");
    verbs::cli::exit(1)
}

fn main() {
    let cli = Cli::parse();
    let _ = cli.events;
    let Some(mtu) = names::mtu_enum(cli.mtu) else { die("Invalid MTU (256, 512, 1024, 2048 or 4096)") };
    if cli.size == 0 || cli.size > u32::MAX as usize || cli.iters == 0 || cli.rx_depth == 0 {
        die("size, iters and rx-depth must be positive");
    }
    let dev = cli.ring.device(cli.dev.as_deref()).unwrap_or_else(|e| fail("rc_pingpong", &e));
    if let Err(e) = run(&cli, &dev, mtu) {
        fail("rc_pingpong", &e)
    }
}

fn run(cli: &Cli, dev: &Device, mtu: u32) -> verbs::Result<()> {
    let port_attr = dev.query_port(cli.ib_port)?;
    let pd = dev.alloc_pd()?;
    let mr = pd.reg_mr(cli.size, AccessFlags::LOCAL_WRITE)?;
    mr.write(0, &vec![pingpong::FILL; cli.size])?;
    let rx_depth = cli.rx_depth;
    let cq = dev.create_cq(rx_depth + 1, 0)?;
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: 1, max_recv_wr: rx_depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qp = Qp::create(&pd, &cq, &cq, None, &attr)?;
    qp.to_init(cli.ib_port, AccessFlags::NONE_REMOTE)?;

    let sge = [mr.sge(0, cli.size as u32)?];
    let recvs: Vec<(u64, &[verbs::Sge])> = (0..rx_depth).map(|_| (RECV_WRID, &sge[..])).collect();
    qp.post_recv(&recvs)?;
    let mut routs = rx_depth;

    let gid = match cli.gid_idx {
        Some(i) => dev.query_gid(cli.ib_port, u32::from(i))?.gid,
        None if port_attr.link_layer == 2 => die("Couldn't get local LID (RoCE needs a GID: use -g GID_INDEX)"),
        None => [0; 16],
    };
    let me = Dest { lid: port_attr.lid, qpn: qp.qp_num(), psn: psn(), gid };
    me.print("local");

    let connect = |rem: &Dest| -> verbs::Result<()> {
        qp.to_rtr(&RtrAttr {
            port: cli.ib_port,
            path_mtu: mtu,
            dest_qp_num: rem.qpn,
            rq_psn: rem.psn,
            dlid: rem.lid,
            dgid: rem.gid,
            sgid_index: cli.gid_idx.unwrap_or(0),
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
        })?;
        qp.to_rts(me.psn, 1)
    };
    let _ = cli.sl;

    let rem = match &cli.servername {
        Some(host) => {
            let mut s = connect_retry(host, cli.port);
            s.write_all(&me.to_wire()).unwrap_or_else(|e| die(&format!("Couldn't send local address: {e}")));
            let rem = read_dest(&mut s);
            connect(&rem)?;
            let _ = s.write_all(b"done\0");
            rem
        }
        None => {
            let listener = TcpListener::bind(("0.0.0.0", cli.port))
                .unwrap_or_else(|e| die(&format!("Couldn't listen to port {}: {e}", cli.port)));
            let (mut s, _) = listener.accept().unwrap_or_else(|e| die(&format!("accept() failed: {e}")));
            let rem = read_dest(&mut s);
            connect(&rem)?;
            s.write_all(&me.to_wire()).unwrap_or_else(|e| die(&format!("Couldn't send local address: {e}")));
            let mut done = [0u8; 5];
            let _ = s.read_exact(&mut done);
            rem
        }
    };
    rem.print("remote");

    let client = cli.servername.is_some();
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
            let mut msg = vec![pingpong::FILL; cli.size];
            pingpong::mark(&mut msg);
            mr.write(0, &msg)?;
        }
        send()?;
        pending |= SEND_WRID;
    }
    let mut buf = vec![0u8; cli.size];
    let mut bad_pages = std::collections::BTreeSet::new();
    let mut last_progress = Instant::now();
    while rcnt < cli.iters || scnt < cli.iters {
        let wc = cq.wait(STALL).map_err(|e| match e {
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
        if scnt < cli.iters && pending == 0 {
            send()?;
            pending = RECV_WRID | SEND_WRID;
        }
        if last_progress.elapsed() > Duration::from_secs(1) {
            eprint!("\r{rcnt}/{} iters", cli.iters);
            last_progress = Instant::now();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if secs > 1.0 {
        eprint!("\r");
    }
    let bytes = cli.size as u64 * u64::from(cli.iters) * 2;
    println!("{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec", bytes as f64 * 8.0 / secs / 1e6);
    println!("{} iters in {secs:.2} seconds = {:.2} usec/iter", cli.iters, secs * 1e6 / f64::from(cli.iters));
    for &page in &bad_pages {
        println!("{}", pingpong::InvalidPage(page));
    }
    if !bad_pages.is_empty() {
        verbs::cli::exit(1);
    }
    Ok(())
}

/// A random 24-bit PSN.
fn psn() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (t.subsec_nanos() ^ std::process::id().wrapping_mul(2_654_435_761)) & 0xff_ffff
}

fn connect_retry(host: &str, port: u16) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => return s,
            Err(e) if Instant::now() > deadline => die(&format!("Couldn't connect to {host}:{port}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn read_dest(s: &mut TcpStream) -> Dest {
    let mut m = [0u8; 52];
    s.read_exact(&mut m).unwrap_or_else(|e| die(&format!("Couldn't read remote address: {e}")));
    Dest::from_wire(&m).unwrap_or_else(|| die("Couldn't parse remote address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_52_byte_message() {
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 1]);
        let d = Dest { lid: 0, qpn: 0x11, psn: 0xabcdef, gid };
        let w = d.to_wire();
        assert_eq!(&w[..], b"0000:000011:abcdef:00000000000000000000ffff0a000001\0");
        assert_eq!(Dest::from_wire(&w), Some(d));
        let mut bad = w;
        bad[5] = b'x';
        assert_eq!(Dest::from_wire(&bad), None);
    }
}
