//! The perftest-style benchmarks (`send_bw`, `write_bw`, `read_bw`,
//! `atomic_bw`, `send_lat`, `write_lat`): one engine, a binary per test.
//!
//! Like perftest, the server is the side started without a host name; the
//! two sides exchange their QP and memory addresses over TCP (port 18515,
//! one text line `LID:QPN:PSN:RKEY:VADDR:GID` with the GID as 32 hex
//! digits), connect RC QPs, synchronise, run, and print perftest's table.
//! Bandwidth tests keep `tx_depth` requests in flight and report peak and
//! average bandwidth (MB = 2^20 bytes) and message rate; latency tests
//! ping-pong and report min, max, typical (median), average, deviation and
//! the 99th and 99.9th percentiles of half the round trip.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use clap::Parser;

use crate::cli::{RingArgs, fail};
use crate::queue::{Cq, WorkCompletion};
use crate::{AccessFlags, Device, Error, MemoryRegion, Qp, QpCap, QpInitAttr, RtrAttr, SendFlags, SendWr, WrOp, names};

/// Which benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    SendBw,
    WriteBw,
    ReadBw,
    AtomicBw,
    SendLat,
    WriteLat,
}

impl Test {
    fn title(self) -> &'static str {
        match self {
            Test::SendBw => "Send BW Test",
            Test::WriteBw => "RDMA_Write BW Test",
            Test::ReadBw => "RDMA_Read BW Test",
            Test::AtomicBw => "Atomic FETCH_AND_ADD/CMP_AND_SWAP BW Test",
            Test::SendLat => "Send Latency Test",
            Test::WriteLat => "RDMA_Write Latency Test",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Test::SendBw => "send_bw",
            Test::WriteBw => "write_bw",
            Test::ReadBw => "read_bw",
            Test::AtomicBw => "atomic_bw",
            Test::SendLat => "send_lat",
            Test::WriteLat => "write_lat",
        }
    }

    fn is_lat(self) -> bool {
        matches!(self, Test::SendLat | Test::WriteLat)
    }
}

/// perftest's common options.
#[derive(Parser, Debug)]
pub struct PerfArgs {
    #[command(flatten)]
    pub ring: RingArgs,
    /// Use IB device DEV (default first device found)
    #[arg(short = 'd', long = "ib-dev")]
    pub dev: Option<String>,
    /// Use port PORT of IB device
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,
    /// Source GID index
    #[arg(short = 'x', long = "gid-index", default_value_t = 0)]
    pub gid_index: u8,
    /// Size of message to exchange (default 65536 for BW, 2 for latency, 8 for atomics)
    #[arg(short = 's', long = "size")]
    pub size: Option<usize>,
    /// Number of exchanges
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    pub iters: u32,
    /// Run sizes from 2 till 2^23
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Listen on/connect to port PORT
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// MTU size: 256 - 4096
    #[arg(short = 'm', long = "mtu", default_value_t = 1024)]
    pub mtu: u32,
    /// Size of the send queue (requests in flight)
    #[arg(short = 't', long = "tx-depth", default_value_t = 128)]
    pub tx_depth: u32,
    /// Atomic operation: CMP_AND_SWAP or FETCH_AND_ADD (atomic_bw)
    #[arg(short = 'A', long = "atomic_type", default_value = "FETCH_AND_ADD")]
    pub atomic_type: String,
    /// Server to connect to (else: be the server)
    pub host: Option<String>,
}

/// How long one completion may take before the run is declared stuck.
const STALL: Duration = Duration::from_secs(30);
const BAR: &str = "---------------------------------------------------------------------------------------";

/// Run `test` with the command line; exits 1 on failure.
pub fn main(test: Test) {
    let args = PerfArgs::parse();
    if let Err(e) = run(test, &args) {
        fail(test.name(), &e)
    }
}

/// One side's addresses, exchanged over TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerInfo {
    pub lid: u16,
    pub qpn: u32,
    pub psn: u32,
    pub rkey: u32,
    pub vaddr: u64,
    pub gid: [u8; 16],
}

impl PeerInfo {
    /// `LID:QPN:PSN:RKEY:VADDR:GID` (`%04x:%06x:%06x:%08x:%016x:` and 32 hex digits).
    pub fn to_line(&self) -> String {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        format!("{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:{gid}\n", self.lid, self.qpn, self.psn, self.rkey, self.vaddr)
    }

    pub fn parse(line: &str) -> Option<PeerInfo> {
        let f: Vec<&str> = line.trim_end().split(':').collect();
        let [lid, qpn, psn, rkey, vaddr, g] = f[..] else { return None };
        if g.len() != 32 {
            return None;
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(g.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(PeerInfo {
            lid: u16::from_str_radix(lid, 16).ok()?,
            qpn: u32::from_str_radix(qpn, 16).ok()?,
            psn: u32::from_str_radix(psn, 16).ok()?,
            rkey: u32::from_str_radix(rkey, 16).ok()?,
            vaddr: u64::from_str_radix(vaddr, 16).ok()?,
            gid,
        })
    }
}

/// The TCP side channel.
struct Channel {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

fn io_err(what: &'static str) -> impl Fn(std::io::Error) -> Error {
    move |_| Error::InvalidArgument(what)
}

impl Channel {
    fn open(host: Option<&str>, port: u16) -> crate::Result<Channel> {
        let s = match host {
            Some(h) => {
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    match TcpStream::connect((h, port)) {
                        Ok(s) => break s,
                        Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
                        Err(_) => return Err(Error::InvalidArgument("cannot connect to the server's TCP port")),
                    }
                }
            }
            None => {
                let l = TcpListener::bind(("0.0.0.0", port)).map_err(io_err("cannot listen on the TCP port"))?;
                l.accept().map_err(io_err("accept failed"))?.0
            }
        };
        let w = s.try_clone().map_err(io_err("socket"))?;
        Ok(Channel { r: BufReader::new(s), w })
    }

    fn send(&mut self, line: &str) -> crate::Result<()> {
        self.w.write_all(line.as_bytes()).map_err(io_err("the peer closed the TCP connection"))
    }

    fn recv(&mut self) -> crate::Result<String> {
        let mut l = String::new();
        match self.r.read_line(&mut l) {
            Ok(n) if n > 0 => Ok(l),
            _ => Err(Error::InvalidArgument("the peer closed the TCP connection")),
        }
    }

    /// Both sides wait for each other.
    fn sync(&mut self, word: &str) -> crate::Result<()> {
        self.send(&format!("{word}\n"))?;
        let got = self.recv()?;
        if got.trim_end() != word {
            return Err(Error::InvalidArgument("the peer is out of step"));
        }
        Ok(())
    }
}

fn run(test: Test, a: &PerfArgs) -> crate::Result<()> {
    let mtu = names::mtu_enum(a.mtu).ok_or(Error::InvalidArgument("MTU must be 256, 512, 1024, 2048 or 4096"))?;
    let atomic_cas = match a.atomic_type.as_str() {
        "CMP_AND_SWAP" => true,
        "FETCH_AND_ADD" => false,
        _ => return Err(Error::InvalidArgument("atomic type must be CMP_AND_SWAP or FETCH_AND_ADD")),
    };
    if a.iters == 0 || a.tx_depth == 0 {
        return Err(Error::InvalidArgument("iterations and tx depth must be positive"));
    }
    let dev = a.ring.device(a.dev.as_deref())?;
    let sizes: Vec<usize> = if test == Test::AtomicBw {
        vec![8]
    } else if a.all {
        (1..=23).map(|e| 1 << e).collect()
    } else {
        vec![a.size.unwrap_or(if test.is_lat() { 2 } else { 65536 })]
    };
    let server = a.host.is_none();
    let mut ch = Channel::open(a.host.as_deref(), a.port)?;
    let port = dev.query_port(a.ib_port)?;
    print_banner(test, a, &dev, &port);
    let pd = dev.alloc_pd()?;
    let depth = a.tx_depth.max(1);
    let cq = dev.create_cq(depth * 2 + 2, 0)?;
    let attr = QpInitAttr {
        cap: QpCap { max_send_wr: depth, max_recv_wr: depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
        ..Default::default()
    };
    let qp = Qp::create(&pd, &cq, &cq, None, &attr)?;
    qp.to_init(a.ib_port, AccessFlags::ALL_REMOTE)?;
    let gid = dev.query_gid(a.ib_port, u32::from(a.gid_index))?.gid;
    let mut header_done = false;
    for size in sizes {
        // write_lat writes from the upper half into the peer's lower half.
        let mr_len = if test == Test::WriteLat { 2 * size } else { size.max(8) };
        let mr = match pd.reg_mr(mr_len, AccessFlags::ALL_REMOTE) {
            Ok(mr) => mr,
            Err(e @ Error::OutOfBufferSpace { .. }) if a.all && header_done => {
                eprintln!("{}: stopping at {size} bytes: {e}", test.name());
                break;
            }
            Err(e) => return Err(e),
        };
        let me = PeerInfo { lid: port.lid, qpn: qp.qp_num(), psn: 0, rkey: mr.rkey(), vaddr: mr.addr(), gid };
        // The client speaks first, as in rc_pingpong.
        let rem = if server {
            let l = ch.recv()?;
            ch.send(&me.to_line())?;
            l
        } else {
            ch.send(&me.to_line())?;
            ch.recv()?
        };
        let rem = PeerInfo::parse(&rem).ok_or(Error::InvalidArgument("the peer sent an unreadable address line"))?;
        if !header_done {
            print_addresses(&me, &rem);
            qp.to_rtr(&RtrAttr {
                port: a.ib_port,
                path_mtu: mtu,
                dest_qp_num: rem.qpn,
                rq_psn: rem.psn,
                dlid: rem.lid,
                dgid: rem.gid,
                sgid_index: a.gid_index,
                max_dest_rd_atomic: 16,
                min_rnr_timer: 12,
            })?;
            qp.to_rts(me.psn, 16)?;
            if test.is_lat() {
                println!(
                    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
                );
            } else {
                println!(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]");
            }
            header_done = true;
        }
        ch.sync("go")?;
        let ctx = Run { test, size, iters: a.iters, depth, qp: &qp, cq: &cq, mr: &mr, rem, server, atomic_cas };
        match test {
            Test::SendLat | Test::WriteLat => {
                let lat = ctx.latency()?;
                print_lat(size, a.iters, lat);
            }
            _ => {
                let stamps = ctx.bandwidth()?;
                if let Some(stamps) = stamps {
                    print_bw(size, a.iters, depth, &stamps);
                }
            }
        }
        ch.sync("done")?;
    }
    println!("{BAR}");
    Ok(())
}

fn print_banner(test: Test, a: &PerfArgs, dev: &Device, port: &crate::PortAttr) {
    println!("{BAR}");
    println!("                    {}", test.title());
    println!(" Dual-port       : OFF\t\tDevice         : {}", dev.name());
    println!(" Number of qps   : 1\t\tTransport type : IB");
    println!(" Connection type : RC\t\tUsing SRQ      : OFF");
    if !test.is_lat() {
        println!(" TX depth        : {}", a.tx_depth);
        println!(" CQ Moderation   : 1");
    }
    println!(" Mtu             : {}[B]", a.mtu.min(names::mtu_bytes(port.active_mtu).max(256)));
    println!(" Link type       : {}", names::link_layer(port.link_layer));
    println!(" GID index       : {}", a.gid_index);
    println!(" Max inline data : 0[B]");
    println!(" rdma_cm QPs\t : OFF");
    println!(" Data ex. method : Ethernet");
    println!("{BAR}");
}

fn print_addresses(me: &PeerInfo, rem: &PeerInfo) {
    for (what, p) in [("local", me), ("remote", rem)] {
        println!(
            " {what} address: LID {:#06x} QPN {:#06x} PSN {:#08x} RKey {:#010x} VAddr {:#018x}",
            p.lid, p.qpn, p.psn, p.rkey, p.vaddr
        );
        let g: Vec<String> = p.gid.iter().map(|b| format!("{b:02}")).collect();
        println!(" GID: {}", g.join(":"));
    }
    println!("{BAR}");
}

/// Bandwidth from completion timestamps: (peak, average) in MB/s (2^20).
pub fn bw_figures(size: usize, depth: u32, start: Instant, stamps: &[Instant]) -> (f64, f64, f64) {
    let mb = (1u64 << 20) as f64;
    let Some(&end) = stamps.last() else { return (0.0, 0.0, 0.0) };
    let secs = end.duration_since(start).as_secs_f64().max(1e-9);
    let avg = stamps.len() as f64 * size as f64 / secs / mb;
    let w = (depth as usize).clamp(1, stamps.len().max(1));
    let mut peak = avg;
    for pair in stamps.windows(w + 1).step_by(w.max(1)) {
        let dt = pair[w].duration_since(pair[0]).as_secs_f64();
        if dt > 0.0 {
            peak = peak.max(w as f64 * size as f64 / dt / mb);
        }
    }
    (peak, avg, stamps.len() as f64 / secs / 1e6)
}

fn print_bw(size: usize, iters: u32, depth: u32, s: &(Instant, Vec<Instant>)) {
    let (peak, avg, rate) = bw_figures(size, depth, s.0, &s.1);
    println!(" {size:<10} {iters:<10}       {peak:<7.2}            {avg:<7.2}\t\t   {rate:.6}");
}

/// Latency figures (µs) from per-iteration half round trips.
pub fn lat_figures(mut v: Vec<f64>) -> [f64; 7] {
    if v.is_empty() {
        return [0.0; 7];
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let avg = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
    let pct = |p: f64| v[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    [v[0], v[n - 1], v[n / 2], avg, var.sqrt(), pct(0.99), pct(0.999)]
}

fn print_lat(size: usize, iters: u32, lat: Option<Vec<f64>>) {
    let Some(lat) = lat else { return };
    let [min, max, typ, avg, dev, p99, p999] = lat_figures(lat);
    println!(
        " {size:<7} {iters:<10}   {min:<7.2}        {max:<7.2}      {typ:<7.2}            {avg:<7.2}          {dev:<7.2}         {p99:<7.2}                {p999:<7.2}"
    );
}

struct Run<'a> {
    test: Test,
    size: usize,
    iters: u32,
    depth: u32,
    qp: &'a Qp<'a>,
    cq: &'a Cq<'a>,
    mr: &'a MemoryRegion<'a>,
    rem: PeerInfo,
    server: bool,
    atomic_cas: bool,
}

/// Prints `done/total` on stderr at most once a second (long runs only).
struct Progress {
    last: Instant,
    shown: bool,
}

impl Progress {
    fn new() -> Progress {
        Progress { last: Instant::now(), shown: false }
    }

    fn tick(&mut self, done: u32, total: u32) {
        if self.last.elapsed() >= Duration::from_secs(1) {
            eprint!("\r {done}/{total} iterations");
            self.last = Instant::now();
            self.shown = true;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.shown {
            eprint!("\r                                        \r");
        }
    }
}

fn check(wc: &WorkCompletion) -> crate::Result<()> {
    if wc.status.is_success() {
        Ok(())
    } else {
        eprintln!("Completion with error at wr_id {}: {}", wc.wr_id, wc.status);
        Err(Error::Protocol(format!("work completion failed: {}", wc.status)))
    }
}

impl Run<'_> {
    fn op(&self, i: u64) -> WrOp {
        let (remote_addr, rkey) = (self.rem.vaddr, self.rem.rkey);
        match self.test {
            Test::SendBw | Test::SendLat => WrOp::Send,
            Test::WriteBw | Test::WriteLat => WrOp::Write { remote_addr, rkey },
            Test::ReadBw => WrOp::Read { remote_addr, rkey },
            Test::AtomicBw if self.atomic_cas => WrOp::CompareSwap { remote_addr, rkey, compare: i, swap: i + 1 },
            Test::AtomicBw => WrOp::FetchAdd { remote_addr, rkey, add: 1 },
        }
    }

    /// The client's timestamps; `None` on a server that only serves.
    fn bandwidth(&self) -> crate::Result<Option<(Instant, Vec<Instant>)>> {
        let n = self.iters;
        let sge = [self.mr.sge(0, self.size as u32)?];
        let mut wc = [crate::queue::EMPTY_WC; 16];
        let mut progress = Progress::new();
        if self.server {
            if self.test != Test::SendBw {
                return Ok(None); // one-sided: the server's CPU does nothing
            }
            let mut posted = 0;
            let batch = |k: u32| -> Vec<(u64, &[crate::Sge])> { (0..k).map(|_| (0, &sge[..])).collect() };
            let first = self.depth.min(n);
            self.qp.post_recv(&batch(first))?;
            posted += first;
            let mut got = 0;
            let start = Instant::now();
            let mut stamps = Vec::with_capacity(n as usize);
            let mut last = Instant::now();
            while got < n {
                let k = self.cq.poll(&mut wc)?;
                for w in &wc[..k] {
                    check(w)?;
                    stamps.push(Instant::now());
                }
                got += k as u32;
                let more = (n - posted).min(k as u32);
                if more > 0 {
                    self.qp.post_recv(&batch(more))?;
                    posted += more;
                }
                if k > 0 {
                    last = Instant::now();
                } else if last.elapsed() > STALL {
                    return Err(Error::TimedOut { cmd: "poll_cq", firmware_alive: true });
                }
                progress.tick(got, n);
            }
            return Ok(Some((start, stamps)));
        }
        let (mut posted, mut done) = (0u32, 0u32);
        let start = Instant::now();
        let mut stamps = Vec::with_capacity(n as usize);
        let mut last = Instant::now();
        while done < n {
            let room = (self.depth - (posted - done)).min(n - posted);
            if room > 0 {
                let wrs: Vec<SendWr<'_>> = (0..room)
                    .map(|j| SendWr {
                        wr_id: u64::from(posted + j),
                        op: self.op(u64::from(posted + j)),
                        sg_list: &sge,
                        flags: SendFlags::SIGNALED,
                        ud: None,
                    })
                    .collect();
                self.qp.post_send(&wrs)?;
                posted += room;
            }
            let k = self.cq.poll(&mut wc)?;
            for w in &wc[..k] {
                check(w)?;
                stamps.push(Instant::now());
            }
            done += k as u32;
            if k > 0 {
                last = Instant::now();
            } else if last.elapsed() > STALL {
                return Err(Error::TimedOut { cmd: "poll_cq", firmware_alive: true });
            }
            progress.tick(done, n);
        }
        Ok(Some((start, stamps)))
    }

    /// Half round trips in µs (client); `None` on the server.
    fn latency(&self) -> crate::Result<Option<Vec<f64>>> {
        let n = self.iters;
        // write_lat: the peer writes into [0, size), we write from [size, 2 size).
        let from = if self.test == Test::WriteLat { self.size } else { 0 };
        let sge = [self.mr.sge(from, self.size as u32)?];
        let mut lat = Vec::with_capacity(n as usize);
        let mut progress = Progress::new();
        let send = |i: u32| -> crate::Result<()> {
            let wr =
                SendWr { wr_id: u64::from(i), op: self.op(0), sg_list: &sge, flags: SendFlags::SIGNALED, ud: None };
            self.qp.post_send(&[wr])?;
            check(&self.cq.wait(STALL)?)
        };
        match self.test {
            Test::SendLat => {
                self.qp.post_recv(&[(0, &sge[..])])?;
                for i in 0..n {
                    let t = Instant::now();
                    if !self.server {
                        send(i)?;
                    }
                    check(&self.cq.wait(STALL)?)?; // the peer's message
                    self.qp.post_recv(&[(0, &sge[..])])?;
                    if self.server {
                        send(i)?;
                    }
                    lat.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
                    progress.tick(i + 1, n);
                }
            }
            _ => {
                // write_lat: the last byte of each write carries the iteration
                // mark; each side polls its receive half for the peer's mark.
                let last = self.size - 1;
                let out_last = 2 * self.size - 1;
                let wait_mark = |mark: u8| -> crate::Result<()> {
                    let t = Instant::now();
                    let mut b = [0u8];
                    let mut round = 0;
                    loop {
                        self.mr.read(last, &mut b)?;
                        if b[0] == mark {
                            return Ok(());
                        }
                        if t.elapsed() > STALL {
                            return Err(Error::TimedOut { cmd: "write_lat", firmware_alive: true });
                        }
                        crate::context::backoff(&mut round);
                    }
                };
                for i in 0..n {
                    let mark = (i % 255 + 1) as u8;
                    let t = Instant::now();
                    if self.server {
                        wait_mark(mark)?;
                        self.mr.write(out_last, &[mark])?;
                        send(i)?;
                    } else {
                        self.mr.write(out_last, &[mark])?;
                        send(i)?;
                        wait_mark(mark)?;
                    }
                    lat.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
                    progress.tick(i + 1, n);
                }
            }
        }
        Ok((!self.server).then_some(lat))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_line_round_trip() {
        let p = PeerInfo { lid: 0, qpn: 0x11, psn: 0, rkey: 0x1280, vaddr: 0x20_3000, gid: [0xfe; 16] };
        let l = p.to_line();
        assert_eq!(l.len(), 4 + 6 + 6 + 8 + 16 + 32 + 5 + 1);
        assert_eq!(PeerInfo::parse(&l), Some(p));
        assert_eq!(PeerInfo::parse("0000:11"), None);
    }

    #[test]
    fn figures() {
        let [min, max, typ, avg, _, p99, _] = lat_figures(vec![3.0, 1.0, 2.0, 100.0]);
        assert_eq!((min, max, typ, avg, p99), (1.0, 100.0, 3.0, 26.5, 100.0));
        let t0 = Instant::now();
        let stamps: Vec<Instant> = (1..=4).map(|i| t0 + Duration::from_secs(i)).collect();
        let (peak, avg, rate) = bw_figures(1 << 20, 1, t0, &stamps);
        assert!((avg - 1.0).abs() < 1e-9 && (peak - 1.0).abs() < 1e-9 && (rate - 1e-6).abs() < 1e-12);
    }
}
