//! The command line of every perf tool, parsed in one place, and what
//! perftest 4.5 derives from it before a run (its `force_dependecies`):
//! per-test defaults, depths bounded by the iterations, CQ moderation off
//! for large messages, `-a`'s largest size.

use clap::Parser;

use super::Test;
use crate::Error;
use crate::cli::RingArgs;

/// perftest's options as our tools take them; `-h` prints the tool's own
/// usage ([`super::usage`]), so clap's generated help is off.
#[derive(Parser, Debug)]
#[command(disable_help_flag = true, disable_version_flag = true)]
pub struct PerfArgs {
    #[command(flatten)]
    pub ring: RingArgs,
    #[arg(short = 'h', long = "help")]
    pub help: bool,
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,
    #[arg(short = 'c', long = "connection", default_value = "RC")]
    pub connection: String,
    #[arg(short = 'd', long = "ib-dev")]
    pub dev: Option<String>,
    #[arg(short = 'D', long = "duration")]
    pub duration: Option<u32>,
    /// Accepted as perftest does; we never warn about CPU frequency scaling.
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// `-g`: SEND over UD to a multicast group ([`super::mcast`]).
    #[arg(short = 'g', long = "mcg")]
    pub mcg: bool,
    /// `-M`: the group of `-g`, 16 bytes as perftest writes them.
    #[arg(short = 'M', long = "MGID")]
    pub mgid: Option<String>,
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,
    #[arg(short = 'x', long = "gid-index", default_value_t = 0)]
    pub gid_index: u8,
    #[arg(short = 's', long = "size")]
    pub size: Option<u64>,
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u32>,
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// The address a server listens on (ours: perftest listens on all).
    #[arg(long = "bind", default_value = "0.0.0.0")]
    pub bind: String,
    #[arg(short = 'm', long = "mtu")]
    pub mtu: Option<u32>,
    #[arg(short = 'q', long = "qp", default_value_t = 1)]
    pub qps: u32,
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,
    #[arg(short = 'r', long = "rx-depth", default_value_t = 512)]
    pub rx_depth: u32,
    #[arg(short = 'A', long = "atomic_type", default_value = "FETCH_AND_ADD")]
    pub atomic_type: String,
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    #[arg(short = 'z', long = "comm_rdma_cm", alias = "com_rdma_cm")]
    pub comm_rdma_cm: bool,
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    #[arg(long = "run_infinitely")]
    pub run_infinitely: bool,
    #[arg(long = "out_json")]
    pub out_json: bool,
    #[arg(long = "out_json_file", default_value = "perftest_out.json")]
    pub out_json_file: String,
    /// Server to connect to (else: be the server)
    pub host: Option<String>,
}

/// perftest's `MAX_SIZE`: `-a` runs 2, 4, ... up to this.
pub const MAX_SIZE: u64 = 1 << 23;
/// Messages above this size run with CQ moderation 1 (`MSG_SIZE_CQ_MOD_LIMIT`).
const CQ_MOD_LIMIT: u64 = 8192;
/// perftest's `DEF_CQ_MOD`.
const DEF_CQ_MOD: u32 = 100;
/// The most QPs a run takes (ours: each QP is a ring object).
const MAX_QPS: u32 = 64;
/// perftest's `DEF_DURATION`, the period of `--run_infinitely` without `-D`.
const DEF_DURATION: u32 = 5;

/// How a run ends: after a count of iterations or after a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Iterations,
    /// `-D`: for this many seconds.
    Duration(u32),
    /// `--run_infinitely`: a result every this many seconds, forever.
    Infinitely(u32),
}

/// What a run uses, once perftest's rules have been applied.
#[derive(Clone, Debug)]
pub struct Settings {
    pub test: Test,
    /// The message size (the largest with `-a`, which buffers are sized for).
    pub size: u64,
    /// `-a`: every power of two from 2 to [`MAX_SIZE`].
    pub all: bool,
    pub iters: u32,
    pub tx_depth: u32,
    pub rx_depth: u32,
    pub cq_mod: u32,
    pub method: Method,
    pub atomic_cas: bool,
    /// `-c UC`: an unreliable connection instead of RC.
    pub uc: bool,
    /// `-c UD`: datagrams (send_bw, send_lat), messages at most the MTU.
    pub ud: bool,
    /// `-q`: the QPs a bandwidth test runs, each `iters` messages.
    pub qps: u32,
    /// `-b`: both sides send at once.
    pub duplex: bool,
    /// `-s` was given.
    pub size_requested: bool,
    /// `-g`: over UD to a multicast group, `-M`'s or perftest's default.
    pub mcast: Option<Mcast>,
}

/// `-g`'s settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mcast {
    /// `-M`'s group; `None`: perftest's default ([`super::mcast::group`]).
    pub mgid: Option<[u8; 16]>,
}

impl Settings {
    /// perftest's defaults and bounds for `test`; an error for what it
    /// refuses or what we do not run.
    pub fn new(test: Test, a: &PerfArgs) -> crate::Result<Settings> {
        let atomic_cas = match a.atomic_type.as_str() {
            "CMP_AND_SWAP" => true,
            "FETCH_AND_ADD" => false,
            _ => {
                return Err(Error::InvalidArgument(
                    "Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}",
                ));
            }
        };
        let mcast = if a.mcg { Some(Self::mcast(test, a)?) } else { None };
        let (uc, ud) = match a.connection.as_str() {
            "RC" => (false, false),
            // perftest runs UC in the SEND and WRITE tests only.
            "UC" if test.takes_uc() && !a.rdma_cm => (true, false),
            "UC" if test.takes_uc() => {
                return Err(Error::InvalidArgument("UC connections (-c UC) are not supported with -R by this tool"));
            }
            // And UD in the SEND tests only.
            "UD" if test.is_send() && !a.rdma_cm => (false, true),
            "UD" if test.is_send() => {
                return Err(Error::InvalidArgument("UD connections (-c UD) are not supported with -R by this tool"));
            }
            "UC" | "UD" | "XRC" | "DC" | "SRD" => {
                return Err(Error::InvalidArgument(if test.is_send() {
                    "only RC, UC and UD connections (-c RC, -c UC, -c UD) are supported by this tool"
                } else if test.takes_uc() {
                    "only RC and UC connections (-c RC, -c UC) are supported by this tool"
                } else {
                    "only RC connections (-c RC) are supported by this tool"
                }));
            }
            _ => {
                return Err(Error::InvalidArgument(
                    "Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}",
                ));
            }
        };
        // perftest runs multicast over UD whatever `-c` says, but decides
        // CQ moderation (below) before it makes it UD.
        let ud_by_c = ud;
        let (uc, ud) = if mcast.is_some() { (false, true) } else { (uc, ud) };
        if a.qps == 0 {
            return Err(Error::InvalidArgument("the number of QPs (-q) must be positive"));
        }
        if a.qps > MAX_QPS {
            return Err(Error::InvalidArgument("at most 64 QPs (-q 64) are supported by this tool"));
        }
        if a.qps != 1 && test.is_lat() {
            return Err(Error::InvalidArgument("the latency tests run one QP (-q 1)"));
        }
        if a.qps != 1 && a.rdma_cm {
            return Err(Error::InvalidArgument("several QPs (-q) are not supported with -R by this tool"));
        }
        if a.bidirectional && test.is_lat() {
            return Err(Error::InvalidArgument("bidirectional runs (-b) are for the bandwidth tests"));
        }
        let method = match (a.run_infinitely, a.duration) {
            (true, d) => Method::Infinitely(d.unwrap_or(DEF_DURATION)),
            (false, Some(d)) => Method::Duration(d),
            (false, None) => Method::Iterations,
        };
        if method != Method::Iterations && !test.timed_runs() {
            return Err(Error::InvalidArgument(
                "-D and --run_infinitely are supported by write_bw, read_bw, atomic_bw, read_lat and atomic_lat",
            ));
        }
        if matches!(method, Method::Infinitely(_)) && a.bidirectional {
            return Err(Error::InvalidArgument("--run_infinitely with -b is not supported by this tool"));
        }
        if matches!(method, Method::Infinitely(_)) && test.is_lat() {
            return Err(Error::InvalidArgument("--run_infinitely runs bandwidth tests only"));
        }
        if matches!(method, Method::Duration(0) | Method::Infinitely(0)) {
            return Err(Error::InvalidArgument("the duration must be positive"));
        }
        if a.all && !test.all_sizes() {
            return Err(Error::InvalidArgument("-a is supported by write_bw, read_bw, write_lat and read_lat"));
        }
        if a.all && method != Method::Iterations {
            return Err(Error::InvalidArgument("-a runs a count of iterations per size: not with -D"));
        }
        let def_iters = if test == Test::WriteBw { 5000 } else { 1000 };
        let iters = a.iters.unwrap_or(def_iters);
        if !(5..=100_000_000).contains(&iters) {
            return Err(Error::InvalidArgument("Iteration count must be between 5 and 100000000"));
        }
        let size = if test.is_atomic() {
            8
        } else if a.all {
            MAX_SIZE
        } else {
            a.size.unwrap_or(if test.is_lat() { 2 } else { 65536 })
        };
        if size == 0 || size > u64::from(u32::MAX) {
            return Err(Error::InvalidArgument("the message size must be 1 to 2^32-1 bytes"));
        }
        let mut tx_depth = if test.is_lat() { 1 } else { a.tx_depth.unwrap_or(128) };
        let mut rx_depth = if test.is_send() { a.rx_depth } else { 1 };
        if tx_depth == 0 || rx_depth == 0 {
            return Err(Error::InvalidArgument("tx depth and rx depth must be positive"));
        }
        if method == Method::Iterations {
            tx_depth = tx_depth.min(iters);
            if test.is_send() {
                rx_depth = rx_depth.min(iters);
            }
        }
        let mut cq_mod = DEF_CQ_MOD;
        // perftest keeps moderation for UD, whose messages are small.
        if size > CQ_MOD_LIMIT && !a.all && !ud_by_c {
            cq_mod = 1;
        }
        cq_mod = cq_mod.min(tx_depth);
        Ok(Settings {
            test,
            size,
            all: a.all,
            iters,
            tx_depth,
            rx_depth,
            cq_mod,
            method,
            atomic_cas,
            uc,
            ud,
            qps: a.qps,
            duplex: a.bidirectional,
            size_requested: a.size.is_some(),
            mcast,
        })
    }

    /// perftest's rules for `-g`: the SEND tests only, one QP, one
    /// direction, not over rdma_cm's QPs; and `-M`'s group, when given.
    fn mcast(test: Test, a: &PerfArgs) -> crate::Result<Mcast> {
        if !test.is_send() {
            return Err(Error::InvalidArgument("MultiCast feature only available on SEND verb"));
        }
        if a.bidirectional {
            return Err(Error::InvalidArgument("Bidirectional mode not supported in multicast"));
        }
        if a.qps > 1 {
            return Err(Error::InvalidArgument("Only 1 QP supported in multicast"));
        }
        if a.rdma_cm {
            return Err(Error::InvalidArgument("Perftest still doesn't support Multicast with rdma_cm"));
        }
        Ok(Mcast { mgid: a.mgid.as_deref().map(super::mcast::parse_mgid).transpose()? })
    }

    /// perftest's UD rule once the path MTU is known (`check_mtu`): a
    /// message is at most one MTU; a larger default size (or `-a`'s) is
    /// cut to it, saying so on stderr as perftest does, a larger `-s` is
    /// refused.
    pub fn cap_to_mtu(&mut self, mtu_bytes: u32) -> crate::Result<()> {
        let mtu = u64::from(mtu_bytes);
        if !self.ud || self.size <= mtu {
            return Ok(());
        }
        if !self.all && self.size_requested {
            return Err(Error::InvalidArgument("Max message size in UD cannot be greater than MTU"));
        }
        eprintln!(" Max msg size in UD is MTU {mtu}");
        eprintln!(" Changing to this MTU");
        self.size = mtu;
        Ok(())
    }

    /// The sizes to run: one, or `-a`'s 2 B to 8 MiB.
    pub fn sizes(&self) -> Vec<u64> {
        if self.all && !self.test.is_atomic() { (1..=23).map(|i| 1u64 << i).collect() } else { vec![self.size] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(test: Test, line: &str) -> crate::Result<Settings> {
        let a = PerfArgs::try_parse_from(std::iter::once("t").chain(line.split_whitespace())).expect("parses");
        Settings::new(test, &a)
    }

    #[test]
    fn perftest_defaults_and_bounds() {
        let s = settings(Test::WriteBw, "").unwrap();
        assert_eq!((s.size, s.iters, s.tx_depth, s.cq_mod), (65536, 5000, 128, 1));
        let s = settings(Test::ReadBw, "-n 100 -s 4096").unwrap();
        assert_eq!((s.iters, s.tx_depth, s.cq_mod), (100, 100, 100));
        let s = settings(Test::SendBw, "-n 100").unwrap();
        assert_eq!((s.rx_depth, s.tx_depth), (100, 100));
        let s = settings(Test::AtomicLat, "-s 64").unwrap();
        assert_eq!((s.size, s.tx_depth), (8, 1));
        let s = settings(Test::WriteBw, "-a -n 5").unwrap();
        assert_eq!(s.sizes().len(), 23);
        assert_eq!((s.sizes()[0], s.size, s.cq_mod), (2, MAX_SIZE, 5));
        let s = settings(Test::ReadBw, "-D 3").unwrap();
        assert_eq!((s.method, s.tx_depth), (Method::Duration(3), 128));
        let s = settings(Test::WriteBw, "--run_infinitely").unwrap();
        assert_eq!(s.method, Method::Infinitely(5));
        assert!(settings(Test::WriteBw, "-n 4").is_err());
        assert!(settings(Test::WriteBw, "-c XX").is_err());
        assert!(settings(Test::WriteLat, "-c UC").unwrap().uc);
        assert!(settings(Test::ReadBw, "-c UC").is_err() && settings(Test::WriteBw, "-c UD").is_err());
        let s = settings(Test::SendBw, "-c UD -n 100").unwrap();
        // UD keeps CQ moderation: its messages are capped at the MTU.
        assert!(s.ud && !s.uc && s.cq_mod == 100);
        let mut capped = s.clone();
        capped.cap_to_mtu(1024).unwrap();
        assert_eq!((s.size, capped.size), (65536, 1024));
        assert!(settings(Test::SendBw, "-c UD -s 2048").unwrap().cap_to_mtu(1024).is_err());
        let mut small = settings(Test::SendBw, "-c UD -s 512").unwrap();
        small.cap_to_mtu(1024).unwrap();
        assert_eq!(small.size, 512);
        assert!(settings(Test::SendLat, "-c UD -R").is_err());
        let s = settings(Test::WriteBw, "-q 2 -b -n 100").unwrap();
        assert!(s.duplex && s.qps == 2 && s.iters == 100 && s.tx_depth == 100);
        assert!(settings(Test::WriteLat, "-q 2").is_err() && settings(Test::SendLat, "-b").is_err());
        assert!(settings(Test::WriteBw, "-q 0").is_err() && settings(Test::WriteBw, "-q 2 -R").is_err());
        assert!(settings(Test::WriteBw, "-A NOPE").is_err());
        assert!(settings(Test::SendLat, "--run_infinitely").is_err());
    }

    #[test]
    fn multicast_is_ud_one_qp_one_way() {
        let s = settings(Test::SendBw, "-g -n 20").unwrap();
        assert!(s.ud && !s.uc && s.mcast == Some(Mcast { mgid: None }));
        // Moderation is off for 64 KiB, as perftest decides it before UD.
        assert_eq!((s.cq_mod, settings(Test::SendBw, "-g -n 20 -c UD").unwrap().cq_mod), (1, 20));
        // Whatever -c says.
        assert!(settings(Test::SendLat, "-g -c RC").unwrap().ud);
        let s = settings(Test::SendLat, "-g -M 0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3").unwrap();
        assert_eq!(s.mcast.and_then(|m| m.mgid).map(|g| g[12]), Some(239));
        // -M alone is ignored, as perftest does.
        assert!(settings(Test::SendBw, "-M 1:2").unwrap().mcast.is_none());
        for (test, line) in [
            (Test::WriteBw, "-g"),
            (Test::SendBw, "-g -b"),
            (Test::SendBw, "-g -q 2"),
            (Test::SendBw, "-g -R"),
            (Test::SendBw, "-g -M 1:2:3"),
        ] {
            assert!(settings(test, line).is_err(), "{line}");
        }
    }

    #[test]
    fn perftest_spellings_parse() {
        let a = PerfArgs::try_parse_from(["t", "-F", "--out_json", "--out_json_file=x.json", "-D", "2", "-c", "RC"])
            .expect("parses");
        assert!(a.cpu_freq && a.out_json && a.out_json_file == "x.json" && a.duration == Some(2));
        assert!(PerfArgs::try_parse_from(["t", "--help"]).expect("parses").help);
    }
}
