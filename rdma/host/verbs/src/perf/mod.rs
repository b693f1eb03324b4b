//! The perftest benchmarks for the appliance (`send_bw`, `write_bw`,
//! `read_bw`, `atomic_bw`, `send_lat`, `write_lat`, `read_lat`,
//! `atomic_lat`): one engine, a binary per test, interoperable with Linux's
//! `ib_*` programs of perftest 4.5 and printing what they print.
//!
//! As in perftest, the server is the side started without a host name. The
//! two programs talk over TCP ([`exchange`]) or, with `-R`/`-z`, over an
//! rdma_cm connection of their own ([`cm`]), connect their queue pairs (RC,
//! UC or UD; `-q` of them for the bandwidth tests, one keys handshake per
//! QP; by hand from the exchanged keys, or with `-R` through rdma_cm), run
//! (with `-b` both sides send, and print both directions' sum), and
//! print perftest's header ([`banner`]) and tables ([`report`]): bandwidth
//! tests keep `tx_depth` requests in flight and report peak and average
//! bandwidth (MB = 2^20 bytes, or Gb/s with `--report_gbits`) and message
//! rate; latency tests ping-pong (or, for READs and atomics, wait for each
//! operation) and report min, max, typical (median), average, deviation and
//! the 99th and 99.9th percentiles. In the one-sided tests the server's CPU
//! does nothing: it prints the figures the client sends it (bandwidth) or
//! nothing (latency). With `-g` the SEND tests go over UD to a multicast
//! group ([`mcast`]). The command line is parsed in [`args`].

pub mod args;
pub mod banner;
pub mod cm;
pub mod exchange;
pub mod json;
pub mod mcast;
pub mod report;
pub mod run;
pub mod usage;

use std::time::Duration;

use clap::Parser;

use crate::cli::fail;
use crate::{
    AccessFlags, AhAttr, Error, Qp, QpAttr, QpCap, QpInitAttr, RtrAttr, names, qp_attr_mask, qp_state, qp_type,
};
pub use args::PerfArgs;
use args::{Method, Settings};
use banner::Banner;
use exchange::{BwReport, Channel, Keys};
use report::BAR;
use run::{Layout, Run};

/// Which benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    SendBw,
    WriteBw,
    ReadBw,
    AtomicBw,
    SendLat,
    WriteLat,
    ReadLat,
    AtomicLat,
}

impl Test {
    pub fn name(self) -> &'static str {
        match self {
            Test::SendBw => "send_bw",
            Test::WriteBw => "write_bw",
            Test::ReadBw => "read_bw",
            Test::AtomicBw => "atomic_bw",
            Test::SendLat => "send_lat",
            Test::WriteLat => "write_lat",
            Test::ReadLat => "read_lat",
            Test::AtomicLat => "atomic_lat",
        }
    }

    /// perftest's name of the verb (`testsStr`), the title's first word.
    pub fn verb_name(self) -> &'static str {
        match self {
            Test::SendBw | Test::SendLat => "Send",
            Test::WriteBw | Test::WriteLat => "RDMA_Write",
            Test::ReadBw | Test::ReadLat => "RDMA_Read",
            Test::AtomicBw | Test::AtomicLat => "Atomic",
        }
    }

    pub fn is_lat(self) -> bool {
        matches!(self, Test::SendLat | Test::WriteLat | Test::ReadLat | Test::AtomicLat)
    }

    pub fn is_send(self) -> bool {
        matches!(self, Test::SendBw | Test::SendLat)
    }

    pub fn is_atomic(self) -> bool {
        matches!(self, Test::AtomicBw | Test::AtomicLat)
    }

    /// READs and atomics: the peer answers them from its responder
    /// resources (`out_reads`), and a latency sample is a whole operation.
    pub fn reads(self) -> bool {
        matches!(self, Test::ReadBw | Test::ReadLat | Test::AtomicBw | Test::AtomicLat)
    }

    /// The tests whose client alone decides when the run ends, so `-D`
    /// needs nothing from the server.
    pub fn timed_runs(self) -> bool {
        matches!(self, Test::WriteBw | Test::ReadBw | Test::AtomicBw | Test::ReadLat | Test::AtomicLat)
    }

    /// The tests perftest runs over UC (`-c UC`): SEND and WRITE.
    pub fn takes_uc(self) -> bool {
        matches!(self, Test::SendBw | Test::WriteBw | Test::SendLat | Test::WriteLat)
    }

    /// The tests that take `-a`.
    pub fn all_sizes(self) -> bool {
        matches!(self, Test::WriteBw | Test::ReadBw | Test::WriteLat | Test::ReadLat)
    }

    /// What a latency sample (the time between two posts) is divided by:
    /// half a round trip for a ping-pong, the whole for a READ or atomic.
    fn per_sample(self) -> f64 {
        if self.reads() { 1.0 } else { 2.0 }
    }
}

/// What we announce in the exchange: the page size and cache line of an
/// x86-64 host, as perftest reads them from sysconf.
const PAGE_SIZE: i32 = 4096;
const CACHE_LINE: i32 = 64;
/// How long a client retries a server that is not listening yet.
const CONNECT_PATIENCE: Duration = Duration::from_secs(10);

/// Run `test` with the command line; exits 1 on failure.
pub fn main(test: Test) {
    let args = PerfArgs::parse();
    if args.help {
        // perftest names itself as it was called, and ends with status 1.
        let prog = std::env::args().next().map(|p| p.rsplit('/').next().unwrap_or(&p).to_string());
        print!("{}", usage::text(test, prog.as_deref().unwrap_or(test.name())));
        crate::cli::exit(1)
    }
    if let Err(e) = Settings::new(test, &args).and_then(|s| run(&s, &args)) {
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

fn run(st: &Settings, a: &PerfArgs) -> crate::Result<()> {
    let test = st.test;
    let ctx = a.ring.open()?;
    let dev = ctx.device(a.dev.as_deref())?;
    let port = dev.query_port(a.ib_port)?;
    let mtu = match a.mtu {
        Some(m) => names::mtu_enum(m).ok_or(Error::InvalidArgument("MTU must be 256, 512, 1024, 2048 or 4096"))?,
        None => port.active_mtu,
    };
    let gid = dev.query_gid(a.ib_port, u32::from(a.gid_index))?.gid;
    // perftest's `out_reads`: as many READs and atomics as the device
    // answers at once for the tests that issue them, else 1.
    let out_reads: u16 =
        if test.reads() { dev.query_device()?.max_qp_rd_atom.clamp(1, u32::from(u8::MAX)) as u16 } else { 1 };
    let use_cm = a.rdma_cm || a.comm_rdma_cm;
    let events = cm::Events::new(&ctx);
    // The exchange's own rdma_cm connection (-z, -R): its id first (the
    // device it lands on holds its objects), then the QP and the connect.
    let server_addr = match &a.host {
        Some(h) => cm::addr_of(h, a.port)?,
        None => cm::addr_of(&a.bind, a.port)?,
    };
    if test.reads() {
        // perftest 4.5 on a device it does not know (rxe, ours) turns
        // inline data off for the READ and atomic tests, printing a dashed
        // line (and a remark on stderr, which we leave out: we know).
        println!("{BAR}");
    }
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
    let mut st = st.clone();
    st.cap_to_mtu(names::mtu_bytes(agreed.mtu))?;
    let st = &st;
    let (tx_depth, rx_depth) = (st.tx_depth, st.rx_depth);
    let client = ch.is_client();
    let banner = Banner {
        test,
        atomic_cas: st.atomic_cas,
        device: dev.name().to_string(),
        client,
        tx_depth,
        rx_depth,
        cq_mod: st.cq_mod,
        mtu_bytes: names::mtu_bytes(agreed.mtu),
        link_layer: names::link_layer(port.link_layer),
        gid_index: a.gid_index,
        out_reads,
        rdma_cm_qps: a.rdma_cm,
        rdma_cm_exchange: use_cm,
        uc: st.uc,
        ud: st.ud,
        qps: st.qps,
        duplex: st.duplex,
        mcast: st.mcast.is_some(),
    };
    print!("{}", banner.text());

    // As perftest: the QPs share one send and one receive CQ.
    let nqps = st.qps as usize;
    let pd = dev.alloc_pd()?;
    let send_cq = dev.create_cq(tx_depth * st.qps + 1, 0)?;
    let recv_cq = dev.create_cq(rx_depth * st.qps + 1, 0)?;
    let cap =
        QpCap { max_send_wr: tx_depth, max_recv_wr: rx_depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp_type = if st.uc {
        qp_type::UC
    } else if st.ud {
        qp_type::UD
    } else {
        qp_type::RC
    };
    let attr = QpInitAttr { cap, qp_type, ..Default::default() };
    let (data_id, qps) = if a.rdma_cm {
        let d = cm::DataConn {
            ev: &events,
            ch: &mut ch,
            client,
            addr: server_addr,
            out_reads: if test.reads() { out_reads as u8 } else { 0 },
            patience: CONNECT_PATIENCE,
        };
        let (id, qp) = cm::data_connect(d, &pd, &send_cq, &recv_cq, &attr)?;
        (Some(id), vec![qp])
    } else {
        let mut qps = Vec::with_capacity(nqps);
        for _ in 0..nqps {
            let qp = Qp::create(&pd, &send_cq, &recv_cq, None, &attr)?;
            if st.ud {
                // perftest's Q_Key, which its UD sends carry too.
                let init =
                    QpAttr { qp_state: qp_state::INIT, port_num: a.ib_port, qkey: run::DEF_QKEY, ..Default::default() };
                qp.modify(
                    &init,
                    qp_attr_mask::STATE | qp_attr_mask::PKEY_INDEX | qp_attr_mask::PORT | qp_attr_mask::QKEY,
                )?;
            } else {
                qp.to_init(a.ib_port, AccessFlags::ALL_REMOTE)?;
            }
            qps.push(qp);
        }
        (None, qps)
    };
    // -g: the side that receives puts its QP in the group (and announces
    // the group in its keys, below).
    let group = match st.mcast {
        Some(m) if mcast::attaches(test, client) => Some(mcast::group(m.mgid, client)),
        _ => None,
    };
    if let Some(g) = group {
        for qp in &qps {
            qp.attach_mcast(g)?;
        }
    }
    let layout = Layout::new(
        st.size as usize,
        agreed.page_size.max(PAGE_SIZE) as usize,
        agreed.cache_line.max(CACHE_LINE) as usize,
        nqps,
        st.ud,
    );
    let mr = pd.reg_mr(layout.bytes(), AccessFlags::ALL_REMOTE)?;
    let mes: Vec<Keys> = qps
        .iter()
        .enumerate()
        .map(|(i, qp)| {
            let me = Keys {
                lid: port.lid,
                out_reads,
                qpn: qp.qp_num(),
                psn: random_psn(),
                rkey: mr.rkey(),
                vaddr: mr.addr() + layout.inbox(i) as u64,
                gid,
                srqn: 0,
            };
            // A group member is reached through the group: its GID, the
            // multicast LID (none on RoCE) and the multicast QPN.
            match group {
                Some(g) => Keys { lid: 0, qpn: mcast::MCAST_QPN, gid: g, ..me },
                None => me,
            }
        })
        .collect();
    let connect = |rems: &[Keys]| -> crate::Result<()> {
        if data_id.is_some() {
            // rdma_cm moved the QP already.
            return Ok(());
        }
        if rems.len() != qps.len() {
            return Err(Error::Protocol("the peer's keys do not match our QPs".into()));
        }
        if rems.first().map(Keys::gid_is_ipv4) != mes.first().map(Keys::gid_is_ipv4) {
            return Err(Error::InvalidArgument(if st.mcast.is_some() {
                "one side uses an IPv4-mapped GID and the other an IPv6 one: with -g over IPv4 (-x of an \
                 IPv4-mapped GID) name an IPv4-mapped group with -M (the default MGID is IPv6)"
            } else {
                "one side uses an IPv4-mapped GID and the other an IPv6 one: pick GIDs of the same kind with -x"
            }));
        }
        for ((qp, me), rem) in qps.iter().zip(&mes).zip(rems) {
            if st.ud {
                // A UD QP needs no peer: its sends name one (the AH).
                let rtr = QpAttr { qp_state: qp_state::RTR, ..Default::default() };
                qp.modify(&rtr, qp_attr_mask::STATE)?;
                let rts = QpAttr { qp_state: qp_state::RTS, sq_psn: me.psn, ..Default::default() };
                qp.modify(&rts, qp_attr_mask::STATE | qp_attr_mask::SQ_PSN)?;
                continue;
            }
            qp.to_rtr(&RtrAttr {
                port: a.ib_port,
                path_mtu: agreed.mtu,
                dest_qp_num: rem.qpn,
                rq_psn: rem.psn,
                dlid: rem.lid,
                dgid: rem.gid,
                sgid_index: a.gid_index,
                max_dest_rd_atomic: out_reads as u8,
                min_rnr_timer: 12,
            })?;
            // As perftest: as many READs in flight as the peer answers.
            qp.to_rts(me.psn, rem.out_reads.clamp(1, u16::from(u8::MAX)) as u8)?;
        }
        Ok(())
    };

    let conn = Conn {
        ch: &mut ch,
        mes: &mes,
        connect: &connect,
        pd: &pd,
        qps: &qps,
        send_cq: &send_cq,
        recv_cq: &recv_cq,
        mr: &mr,
        port: a.ib_port,
    };
    let result = run_test(st, a, &banner, conn, layout);
    if let Some(g) = group {
        for qp in &qps {
            let _ = qp.detach_mcast(g);
        }
    }
    // As perftest: the client disconnects and waits for DISCONNECTED, the
    // server disconnects; the QPs go before their ids.
    if let Some(id) = &data_id {
        events.disconnect(id, client);
        id.forget_qp();
    }
    drop(ch);
    drop(qps);
    if let Some(id) = &comm_id {
        id.forget_qp();
    }
    drop(comm_qp);
    drop(data_id);
    drop(comm_id);
    result
}

/// What a run works with once the QPs exist: the channel to the peer
/// program, our keys (one per QP), how to connect to the peer's, and the
/// QPs' objects.
struct Conn<'c, 'a> {
    ch: &'c mut Channel<'a>,
    mes: &'c [Keys],
    connect: &'c dyn Fn(&[Keys]) -> crate::Result<()>,
    pd: &'c crate::Pd<'c>,
    qps: &'c [Qp<'c>],
    send_cq: &'c crate::Cq<'c>,
    recv_cq: &'c crate::Cq<'c>,
    mr: &'c crate::MemoryRegion<'c>,
    port: u8,
}

/// The handshakes and the measured runs of each perftest program, in its
/// order (see exchange.rs), and what each side prints.
fn run_test(st: &Settings, a: &PerfArgs, banner: &Banner, c: Conn<'_, '_>, layout: Layout) -> crate::Result<()> {
    let test = st.test;
    let Conn { ch, mes, connect, pd, qps, send_cq, recv_cq, mr, port } = c;
    let me = mes.first().ok_or(Error::InvalidArgument("no QP"))?;
    let client = ch.is_client();
    let gbits = a.report_gbits;
    // The latency tests but send_lat make one handshake more first.
    if matches!(test, Test::WriteLat | Test::ReadLat | Test::AtomicLat) {
        ch.handshake(me)?;
    }
    // One handshake per QP for the keys (perftest's order), then the QPs
    // connected to the peer's.
    let mut rems = Vec::with_capacity(mes.len());
    for m in mes {
        rems.push(ch.handshake(m)?);
    }
    if st.mcast.is_some() && (client || test.is_lat()) {
        // As perftest, a sender gives the group's new member a moment
        // (on a fabric, for its join to reach the switches).
        std::thread::sleep(Duration::from_millis(50));
    }
    connect(&rems)?;
    // UD: the peer's GID as each QP's destination (RoCE: a GRH, hop limit
    // 255 as perftest).
    let ahs = if st.ud {
        rems.iter()
            .map(|r| {
                pd.create_ah(&AhAttr {
                    dgid: r.gid,
                    sgid_index: a.gid_index,
                    hop_limit: 0xff,
                    is_global: 1,
                    dlid: r.lid,
                    port_num: port,
                    ..Default::default()
                })
            })
            .collect::<crate::Result<Vec<_>>>()?
    } else {
        Vec::new()
    };
    let (out, keys) = (matches!(test, Test::ReadBw | Test::ReadLat), !test.is_send() && !test.is_atomic());
    // The SEND tests make their extra handshake before the remote
    // addresses, the others after.
    if test.is_send() {
        ch.handshake(me)?;
    }
    let label = |local: bool| if st.mcast.is_some() && mcast::labels_mgid(local, client) { "MGID" } else { "GID" };
    for m in mes {
        print!("{}", report::address_lines("local", m, out, keys, label(true)));
    }
    for (m, r) in mes.iter().zip(rems.iter_mut()) {
        *r = ch.handshake(m)?;
        print!("{}", report::address_lines("remote", r, out, keys, label(false)));
    }
    println!("{BAR}");
    if !test.is_send() {
        ch.handshake(me)?;
    }
    let json = |results: String| -> crate::Result<()> {
        if a.out_json { json::write(&a.out_json_file, banner, &results) } else { Ok(()) }
    };
    let run = |size: u64| Run {
        test,
        size: size as usize,
        iters: st.iters,
        tx_depth: st.tx_depth,
        cq_mod: st.cq_mod,
        rx_depth: st.rx_depth,
        qps,
        send_cq,
        recv_cq,
        mr,
        layout,
        rems: &rems,
        ahs: &ahs,
        atomic_cas: st.atomic_cas,
    };
    match test {
        Test::WriteBw | Test::ReadBw | Test::AtomicBw if st.duplex => {
            // Both sides run the client's loop; before each run a
            // handshake (with -a one after it too), after it the reports
            // exchanged and their sum printed (`print_full_bw_report`).
            println!("{}", report::bw_header(gbits));
            let mut last = BwReport::default();
            for size in if st.method == Method::Iterations { st.sizes() } else { vec![st.size] } {
                ch.handshake(me)?;
                let mine = match st.method {
                    Method::Duration(secs) => run(size).timed_bandwidth(Duration::from_secs(secs.into()))?,
                    _ => run(size).bandwidth()?,
                };
                if st.all {
                    ch.handshake(me)?;
                }
                last = report::duplex_sum(&mine, &ch.reports(&mine)?);
                println!("{}", report::bw_line(&last, gbits));
            }
            json(report::bw_json(&last, gbits))?;
            println!("{BAR}");
            ch.close(me)
        }
        Test::WriteBw | Test::ReadBw | Test::AtomicBw => {
            println!("{}", report::bw_header(gbits));
            let figures = if client {
                let mut last = BwReport::default();
                match st.method {
                    Method::Iterations => {
                        for size in st.sizes() {
                            last = run(size).bandwidth()?;
                            println!("{}", report::bw_line(&last, gbits));
                        }
                    }
                    Method::Duration(secs) => {
                        last = run(st.size).timed_bandwidth(Duration::from_secs(secs.into()))?;
                        println!("{}", report::bw_line(&last, gbits));
                    }
                    // A line every period until the program is stopped.
                    Method::Infinitely(secs) => loop {
                        let r = run(st.size).timed_bandwidth(Duration::from_secs(secs.into()))?;
                        println!("{}", report::bw_line(&r, gbits));
                    },
                }
                ch.handshake(me)?;
                ch.reports(&last)?;
                last
            } else {
                ch.handshake(me)?;
                let theirs = ch.reports(&BwReport::default())?;
                println!("{}", report::bw_line(&theirs, gbits));
                theirs
            };
            json(report::bw_json(&figures, gbits))?;
            println!("{BAR}");
            ch.close(me)
        }
        Test::SendBw => {
            println!("{}", report::bw_header(gbits));
            let r = run(st.size);
            // Whoever receives has its receives up before the handshake
            // that starts the run.
            let posted = if client && !st.duplex { 0 } else { r.post_first_recvs()? };
            ch.handshake(me)?;
            let figures = if st.duplex {
                let mine = r.bidirectional_send(client, posted)?;
                report::duplex_sum(&mine, &ch.reports(&mine)?)
            } else if client {
                r.bandwidth()?
            } else {
                r.receive_bandwidth(posted)?
            };
            println!("{}", report::bw_line(&figures, gbits));
            json(report::bw_json(&figures, gbits))?;
            println!("{BAR}");
            ch.close(me)
        }
        Test::SendLat => {
            println!("{}", report::LAT_HEADER);
            let r = run(st.size);
            let posted = r.post_first_recvs()?;
            ch.handshake(me)?;
            let posts = r.send_latency(client, posted)?;
            print_latency(st, st.size, &posts, &json)?;
            println!("{BAR}");
            ch.close(me)
        }
        Test::WriteLat => {
            println!("{}", report::LAT_HEADER);
            for size in st.sizes() {
                let posts = run(size).write_latency(client)?;
                print_latency(st, size, &posts, &json)?;
            }
            println!("{BAR}");
            // perftest's write_lat ends without a closing exchange.
            Ok(())
        }
        Test::ReadLat | Test::AtomicLat => {
            // The server only lends its memory; the client measures.
            if client {
                match st.method {
                    Method::Duration(secs) => {
                        println!("{}", report::LAT_DURATION_HEADER);
                        let (count, secs) = run(st.size).timed_latency(Duration::from_secs(secs.into()))?;
                        let (avg, tps) = report::lat_duration_figures(count, secs, test.per_sample());
                        println!("{}", report::lat_duration_line(st.size, count, avg, tps));
                        json(report::lat_duration_json(st.size, count, avg, tps))?;
                    }
                    _ => {
                        println!("{}", report::LAT_HEADER);
                        for size in st.sizes() {
                            let posts = run(size).op_latency()?;
                            print_latency(st, size, &posts, &json)?;
                        }
                    }
                }
            }
            ch.close(me)?;
            // The server's only dashed line after the addresses is the one
            // they share.
            if client {
                println!("{BAR}");
            }
            Ok(())
        }
    }
}

/// One latency result line (and its JSON) from a run's post times.
fn print_latency(
    st: &Settings,
    size: u64,
    posts: &[std::time::Instant],
    json: &dyn Fn(String) -> crate::Result<()>,
) -> crate::Result<()> {
    let f = report::lat_figures(report::post_gaps(posts, st.test.per_sample()));
    println!("{}", report::lat_line(size, u64::from(st.iters), &f));
    json(report::lat_json(size, u64::from(st.iters), &f))
}
