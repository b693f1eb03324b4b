//! The perftest benchmarks for the appliance (`send_bw`, `write_bw`,
//! `read_bw`, `atomic_bw`, `send_lat`, `write_lat`): one engine, a binary
//! per test, interoperable with Linux's `ib_*` programs of perftest 4.5.
//!
//! As in perftest, the server is the side started without a host name. The
//! two programs talk over TCP ([`exchange`]) or, with `-R`/`-z`, over an
//! rdma_cm connection of their own ([`cm`]), connect one RC queue pair (by
//! hand from the exchanged keys, or with `-R` through rdma_cm),
//! run, and print perftest's tables: bandwidth tests keep `tx_depth`
//! requests in flight and report peak and average bandwidth (MB = 2^20
//! bytes, or Gb/s with `--report_gbits`) and message rate; latency tests
//! ping-pong and report min, max, typical (median), average, deviation and
//! the 99th and 99.9th percentiles of half the round trip. In the one-sided
//! bandwidth tests the server's CPU does nothing: it prints the figures the
//! client sends it.

pub mod cm;
pub mod exchange;
pub mod report;
pub mod run;

use std::time::Duration;

use clap::Parser;

use crate::cli::{RingArgs, fail};
use crate::{AccessFlags, Device, Error, Qp, QpCap, QpInitAttr, RtrAttr, names};
use exchange::{BwReport, Channel, Keys};
use report::{BAR, print_addresses};
use run::{Run, half_buffer};

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

    fn is_send(self) -> bool {
        matches!(self, Test::SendBw | Test::SendLat)
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
    /// Listen on/connect to port PORT
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// The address a server listens on
    #[arg(long = "bind", default_value = "0.0.0.0")]
    pub bind: String,
    /// MTU size: 256 - 4096 (default: the port's active MTU; the smaller of both sides' is used)
    #[arg(short = 'm', long = "mtu")]
    pub mtu: Option<u32>,
    /// Size of the send queue (requests in flight; 1 in latency tests)
    #[arg(short = 't', long = "tx-depth", default_value_t = 128)]
    pub tx_depth: u32,
    /// Receives kept posted by a SEND receiver
    #[arg(short = 'r', long = "rx-depth", default_value_t = 512)]
    pub rx_depth: u32,
    /// Atomic operation: CMP_AND_SWAP or FETCH_AND_ADD (atomic_bw)
    #[arg(short = 'A', long = "atomic_type", default_value = "FETCH_AND_ADD")]
    pub atomic_type: String,
    /// Connect QPs with rdma_cm and run test on those QPs (implies -z)
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// Communicate with rdma_cm module to exchange data - use regular QPs
    #[arg(short = 'z', long = "comm_rdma_cm")]
    pub comm_rdma_cm: bool,
    /// Report bandwidth in Gb/s instead of MB/s
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Server to connect to (else: be the server)
    pub host: Option<String>,
}

/// What we announce in the exchange: the page size and cache line of an
/// x86-64 host, as perftest reads them from sysconf.
const PAGE_SIZE: i32 = 4096;
const CACHE_LINE: i32 = 64;
/// READs and atomics we answer at once (perftest's `out_reads` on a
/// Hermon-class device); the peer's figure bounds the ones we issue.
const OUT_READS: u16 = 16;
/// How long a client retries a server that is not listening yet.
const CONNECT_PATIENCE: Duration = Duration::from_secs(10);

/// Run `test` with the command line; exits 1 on failure.
pub fn main(test: Test) {
    let args = PerfArgs::parse();
    if let Err(e) = run(test, &args) {
        fail(test.name(), &e)
    }
}

/// A PSN the peer cannot guess, as perftest's `lrand48() & 0xffffff`.
fn random_psn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (h.finish() & 0xff_ffff) as u32
}

fn run(test: Test, a: &PerfArgs) -> crate::Result<()> {
    let atomic_cas = match a.atomic_type.as_str() {
        "CMP_AND_SWAP" => true,
        "FETCH_AND_ADD" => false,
        _ => return Err(Error::InvalidArgument("atomic type must be CMP_AND_SWAP or FETCH_AND_ADD")),
    };
    if a.iters == 0 || a.tx_depth == 0 || a.rx_depth == 0 {
        return Err(Error::InvalidArgument("iterations, tx depth and rx depth must be positive"));
    }
    let size = match (test, a.size) {
        (Test::AtomicBw, _) => 8,
        (_, Some(s)) => s,
        (_, None) if test.is_lat() => 2,
        (_, None) => 65536,
    };
    if size == 0 || u32::try_from(size).is_err() {
        return Err(Error::InvalidArgument("the message size must be 1 to 2^32-1 bytes"));
    }
    let ctx = a.ring.open()?;
    let dev = ctx.device(a.dev.as_deref())?;
    let port = dev.query_port(a.ib_port)?;
    let mtu = match a.mtu {
        Some(m) => names::mtu_enum(m).ok_or(Error::InvalidArgument("MTU must be 256, 512, 1024, 2048 or 4096"))?,
        None => port.active_mtu,
    };
    let gid = dev.query_gid(a.ib_port, u32::from(a.gid_index))?.gid;
    let use_cm = a.rdma_cm || a.comm_rdma_cm;
    let events = cm::Events::new(&ctx);
    // The exchange's own rdma_cm connection (-z, -R): its id first (the
    // device it lands on holds its objects), then the QP and the connect.
    let server_addr = match &a.host {
        Some(h) => cm::addr_of(h, a.port)?,
        None => cm::addr_of(&a.bind, a.port)?,
    };
    if a.host.is_none() {
        println!("\n************************************");
        println!("* Waiting for client to connect... *");
        println!("************************************");
    }
    let (comm_id, comm_listener) = match (use_cm, &a.host) {
        (false, _) => (None, None),
        (true, Some(_)) => (Some(events.resolve(server_addr)?), None),
        (true, None) => {
            let l = events.listen(server_addr)?;
            (Some(events.request(&l)?), Some(l))
        }
    };
    let comm_dev = comm_id.as_ref().map(|id| id.device()).transpose()?;
    let comm_pd = comm_dev.as_ref().map(|d| d.alloc_pd()).transpose()?;
    let comm_cqs = comm_dev.as_ref().map(|d| Ok::<_, Error>((d.create_cq(4, 0)?, d.create_cq(4, 0)?))).transpose()?;
    let comm_mr = comm_pd.as_ref().map(|pd| pd.reg_mr(cm::COMM_MR_LEN, AccessFlags::LOCAL_WRITE)).transpose()?;
    let (comm_id, comm_qp) = match (comm_id, &comm_pd, &comm_cqs, &comm_mr) {
        (Some(id), Some(pd), Some(cqs), Some(mr)) if a.host.is_some() => {
            let (id, qp) = cm::comm_connect(&events, id, server_addr, pd, cqs, mr, CONNECT_PATIENCE)?;
            (Some(id), Some(qp))
        }
        (Some(id), Some(pd), Some(cqs), Some(mr)) => {
            let qp = cm::comm_accept(&id, pd, cqs, mr)?;
            (Some(id), Some(qp))
        }
        _ => (None, None),
    };
    // perftest's server destroys its listener once it accepted (the
    // test's listener binds the same port).
    drop(comm_listener);
    let mut ch = match (&comm_qp, &comm_cqs, &comm_mr) {
        (Some(qp), Some((s, r)), Some(mr)) => {
            Channel::over_cm(cm::CommLink { qp, send_cq: s, recv_cq: r, mr }, a.host.is_some())
        }
        _ => match &a.host {
            Some(h) => Channel::connect(h, a.port, CONNECT_PATIENCE)?,
            None => Channel::accept(&a.bind, a.port)?,
        },
    };
    let agreed = ch.agree(PAGE_SIZE, CACHE_LINE, mtu)?;
    let tx_depth = if test.is_lat() { 1 } else { a.tx_depth };
    let rx_depth = if test.is_send() { a.rx_depth } else { 1 };
    print_banner(test, a, &dev, &port, names::mtu_bytes(agreed.mtu), tx_depth);

    let pd = dev.alloc_pd()?;
    let send_cq = dev.create_cq(tx_depth + 1, 0)?;
    let recv_cq = dev.create_cq(rx_depth + 1, 0)?;
    let cap =
        QpCap { max_send_wr: tx_depth, max_recv_wr: rx_depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let attr = QpInitAttr { cap, ..Default::default() };
    let client = ch.is_client();
    let (data_id, qp) = if a.rdma_cm {
        let reads = matches!(test, Test::ReadBw | Test::AtomicBw);
        let d = cm::DataConn {
            ev: &events,
            ch: &mut ch,
            client,
            addr: server_addr,
            out_reads: if reads { OUT_READS as u8 } else { 0 },
            patience: CONNECT_PATIENCE,
        };
        let (id, qp) = cm::data_connect(d, &pd, &send_cq, &recv_cq, &attr)?;
        (Some(id), qp)
    } else {
        let qp = Qp::create(&pd, &send_cq, &recv_cq, None, &attr)?;
        qp.to_init(a.ib_port, AccessFlags::ALL_REMOTE)?;
        (None, qp)
    };
    let inbox = half_buffer(size, agreed.page_size.max(PAGE_SIZE) as usize);
    let mr = pd.reg_mr(2 * inbox, AccessFlags::ALL_REMOTE)?;
    let me = Keys {
        lid: port.lid,
        out_reads: OUT_READS,
        qpn: qp.qp_num(),
        psn: random_psn(),
        rkey: mr.rkey(),
        vaddr: mr.addr() + inbox as u64,
        gid,
        srqn: 0,
    };
    let connect = |rem: &Keys| -> crate::Result<()> {
        if data_id.is_some() {
            // rdma_cm moved the QP already.
            return Ok(());
        }
        if rem.gid_is_ipv4() != me.gid_is_ipv4() {
            return Err(Error::InvalidArgument(
                "one side uses an IPv4-mapped GID and the other an IPv6 one: pick GIDs of the same kind with -x",
            ));
        }
        qp.to_rtr(&RtrAttr {
            port: a.ib_port,
            path_mtu: agreed.mtu,
            dest_qp_num: rem.qpn,
            rq_psn: rem.psn,
            dlid: rem.lid,
            dgid: rem.gid,
            sgid_index: a.gid_index,
            max_dest_rd_atomic: OUT_READS as u8,
            min_rnr_timer: 12,
        })?;
        qp.to_rts(me.psn, rem.out_reads.clamp(1, OUT_READS) as u8)
    };

    let result = run_test(
        test, a, &mut ch, &me, &connect, &qp, &send_cq, &recv_cq, &mr, size, tx_depth, rx_depth, atomic_cas, inbox,
        client,
    );
    // As perftest: the client disconnects and waits for DISCONNECTED, the
    // server disconnects; the QPs go before their ids.
    if let Some(id) = &data_id {
        events.disconnect(id, client);
        id.forget_qp();
    }
    drop(ch);
    drop(qp);
    if let Some(id) = &comm_id {
        id.forget_qp();
    }
    drop(comm_qp);
    drop(data_id);
    drop(comm_id);
    result
}

/// The handshakes and the measured run of each perftest program, in its
/// order (see exchange.rs).
#[allow(clippy::too_many_arguments)]
fn run_test(
    test: Test,
    a: &PerfArgs,
    ch: &mut Channel<'_>,
    me: &Keys,
    connect: &dyn Fn(&Keys) -> crate::Result<()>,
    qp: &Qp<'_>,
    send_cq: &crate::Cq<'_>,
    recv_cq: &crate::Cq<'_>,
    mr: &crate::MemoryRegion<'_>,
    size: usize,
    tx_depth: u32,
    rx_depth: u32,
    atomic_cas: bool,
    inbox: usize,
    client: bool,
) -> crate::Result<()> {
    if test == Test::WriteLat {
        ch.handshake(me)?;
    }
    let rem = ch.handshake(me)?;
    connect(&rem)?;
    ch.handshake(me)?;
    print_addresses(me, &rem);
    ch.handshake(me)?;
    let r = Run { test, size, iters: a.iters, tx_depth, rx_depth, qp, send_cq, recv_cq, mr, inbox, rem, atomic_cas };
    match test {
        Test::WriteBw | Test::ReadBw | Test::AtomicBw => {
            report::print_bw_header(a.report_gbits);
            let figures = if client {
                let mine = r.bandwidth()?;
                ch.handshake(me)?;
                ch.reports(&mine)?;
                mine
            } else {
                ch.handshake(me)?;
                ch.reports(&BwReport::default())?
            };
            report::print_bw(&figures, a.report_gbits);
            println!("{BAR}");
            ch.close(me)
        }
        Test::SendBw => {
            report::print_bw_header(a.report_gbits);
            let posted = if client { 0 } else { r.first_recvs() };
            r.post_recvs(posted)?;
            ch.handshake(me)?;
            let figures = if client { r.bandwidth()? } else { r.receive_bandwidth(posted)? };
            report::print_bw(&figures, a.report_gbits);
            println!("{BAR}");
            ch.close(me)
        }
        Test::SendLat => {
            report::print_lat_header();
            let posted = r.first_recvs();
            r.post_recvs(posted)?;
            ch.handshake(me)?;
            let posts = r.send_latency(client, posted)?;
            report::print_lat(size, a.iters, report::half_round_trips(&posts));
            println!("{BAR}");
            ch.close(me)
        }
        Test::WriteLat => {
            report::print_lat_header();
            let posts = r.write_latency(client)?;
            report::print_lat(size, a.iters, report::half_round_trips(&posts));
            println!("{BAR}");
            // perftest's write_lat ends without a closing exchange.
            Ok(())
        }
    }
}

fn print_banner(test: Test, a: &PerfArgs, dev: &Device, port: &crate::PortAttr, mtu_bytes: u32, tx_depth: u32) {
    println!("{BAR}");
    println!("                    {}", test.title());
    println!(" Dual-port       : OFF\t\tDevice         : {}", dev.name());
    println!(" Number of qps   : 1\t\tTransport type : IB");
    println!(" Connection type : RC\t\tUsing SRQ      : OFF");
    println!(" PCIe relax order: OFF");
    println!(" TX depth        : {tx_depth}");
    if test.is_send() {
        println!(" RX depth        : {}", a.rx_depth);
    }
    println!(" Mtu             : {mtu_bytes}[B]");
    println!(" Link type       : {}", names::link_layer(port.link_layer));
    println!(" GID index       : {}", a.gid_index);
    println!(" Max inline data : 0[B]");
    println!(" rdma_cm QPs\t : {}", if a.rdma_cm { "ON" } else { "OFF" });
    if a.rdma_cm || a.comm_rdma_cm {
        println!(" Data ex. method : rdma_cm");
    } else {
        println!(" Data ex. method : Ethernet");
    }
    if a.rdma_cm && a.host.is_none() {
        println!("{BAR}");
        println!(" Waiting for client rdma_cm QP to connect");
        println!(" Please run the same command with the IB/RoCE interface IP");
    }
    println!("{BAR}");
}
