//! Each tool's `--help`, in the shape of its perftest 4.5 namesake's
//! (`ib_write_bw --help` ...): the usage lines, then one line per option in
//! perftest's order and words, listing only the options this tool takes
//! (with its own defaults), then our own options.

use super::Test;

/// Which tools an option line belongs to.
#[derive(Clone, Copy)]
enum For {
    All,
    Bw,
    /// Every test but the atomics (which have a fixed 8-byte size).
    Sized,
    Send,
    Atomic,
    /// The tests that take `-D` ([`Test::timed_runs`]).
    Timed,
    /// The bandwidth tests that take `-D`.
    TimedBw,
    /// The tests that run over UC too ([`Test::takes_uc`]), and the others.
    Uc,
    RcOnly,
}

impl For {
    fn covers(self, t: Test) -> bool {
        match self {
            For::All => true,
            For::Bw => !t.is_lat(),
            For::Sized => !t.is_atomic(),
            For::Send => t.is_send(),
            For::Atomic => t.is_atomic(),
            For::Timed => t.timed_runs(),
            For::TimedBw => t.timed_runs() && !t.is_lat(),
            For::Uc => t.takes_uc(),
            For::RcOnly => !t.takes_uc(),
        }
    }
}

/// An option's line: the same text wherever it appears, or made per tool.
#[derive(Clone, Copy)]
enum Line {
    Text(&'static str),
    /// `-n` with the tool's default count.
    Iters,
    /// `-s` with the tool's default size.
    Size,
}

const OPTIONS: &[(For, Line)] = &[
    (
        For::Atomic,
        Line::Text(
            "  -A, --atomic_type=<type>  type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD} (default FETCH_AND_ADD)",
        ),
    ),
    (For::Sized, Line::Text("  -a, --all  Run sizes from 2 till 2^23")),
    (For::Uc, Line::Text("  -c, --connection=<RC/UC>  Connection type RC/UC (default RC)")),
    (For::RcOnly, Line::Text("  -c, --connection=<RC>  Connection type RC (default RC)")),
    (For::All, Line::Text("  -d, --ib-dev=<dev>  Use IB device <dev> (default first device found)")),
    (For::Timed, Line::Text("  -D, --duration  Run test for a customized period of seconds.")),
    (
        For::All,
        Line::Text(
            "  -F, --CPU-freq  Do not show a warning even if cpufreq_ondemand module is loaded, and cpu-freq is not on max.",
        ),
    ),
    (For::Send, Line::Text("  -g, --mcg  Send messages to multicast group with 1 QP attached to it.")),
    (For::All, Line::Text("  -h, --help  Show this help screen.")),
    (For::All, Line::Text("  -i, --ib-port=<port>  Use port <port> of IB device (default 1)")),
    (For::All, Line::Text("  -m, --mtu=<mtu>  MTU size : 256 - 4096 (default port mtu)")),
    (For::Send, Line::Text("  -M, --MGID=<multicast_gid>  In multicast, uses <multicast_gid> as the group MGID.")),
    (For::All, Line::Iters),
    (For::All, Line::Text("  -p, --port=<port>  Listen on/connect to port <port> (default 18515)")),
    (
        For::Send,
        Line::Text(
            "  -r, --rx-depth=<dep>  Rx queue size (default 512). If using srq, rx-depth controls max-wr size of the srq",
        ),
    ),
    (For::All, Line::Text("  -R, --rdma_cm  Connect QPs with rdma_cm and run test on those QPs")),
    (For::Sized, Line::Size),
    (For::Bw, Line::Text("  -t, --tx-depth=<dep>  Size of tx queue (default 128)")),
    (For::All, Line::Text("  -x, --gid-index=<index>  Test uses GID with GID index (Default : IB - no gid . ETH - 0)")),
    (For::All, Line::Text("  -z, --com_rdma_cm  Communicate with rdma_cm module to exchange data - use regular QPs")),
    (For::All, Line::Text("")),
    (For::All, Line::Text("      --out_json  Save the report in a json file")),
    (
        For::All,
        Line::Text(
            "      --out_json_file=<file>  Name of the report json file. (Default: perftest_out.json in the working directory) ",
        ),
    ),
    (For::Bw, Line::Text("      --report_gbits  Report Max/Average BW of test in Gbit/sec (instead of MiB/sec)")),
    (For::Bw, Line::Text("        Note: MiB=2^20 byte, while Gb=10^9 bits. Use these formulas for conversion:")),
    (For::Bw, Line::Text("        Factor=10^9/(2^20*8)=119.2; MiB=Gb_result * factor; Gb=MiB_result / factor")),
    (For::TimedBw, Line::Text("      --run_infinitely  Run test forever, print results every <duration> seconds")),
];

impl Line {
    fn text(self, t: Test) -> String {
        match self {
            Line::Text(l) => l.to_string(),
            Line::Iters => {
                let iters = if t == Test::WriteBw { 5000 } else { 1000 };
                format!("  -n, --iters=<iters>  Number of exchanges (at least 5, default {iters})")
            }
            Line::Size => {
                let size = if t.is_lat() { 2 } else { 65536 };
                format!("  -s, --size=<size>  Size of message to exchange (default {size})")
            }
        }
    }
}

/// The whole help text of the `t` tool, named `prog` in the usage lines.
pub fn text(t: Test, prog: &str) -> String {
    let mut s = String::from("Usage:\n");
    s += &format!("  {prog}            start a server and wait for connection\n");
    s += &format!("  {prog} <host>     connect to server at <host>\n\nOptions:\n");
    for (who, line) in OPTIONS {
        if who.covers(t) {
            s += &line.text(t);
            s.push('\n');
        }
    }
    s += "\n Options of this tool, not perftest's:\n";
    s += "      --ring=<path>  The appliance's shared-memory ring file (default $RDMA_RING, else /dev/shm/roce-appliance-1)\n";
    s += "      --bind=<addr>  The address a server listens on (default 0.0.0.0)\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tool_lists_its_own_options() {
        let bw = text(Test::WriteBw, "write_bw");
        assert!(bw.contains("default 5000)") && bw.contains("--report_gbits") && bw.contains("-t, --tx-depth"));
        assert!(!bw.contains("-A, --atomic_type") && !bw.contains("-r, --rx-depth"));
        let lat = text(Test::SendLat, "send_lat");
        assert!(lat.contains("(default 2)") && lat.contains("-r, --rx-depth") && !lat.contains("--report_gbits"));
        assert!(lat.contains("-g, --mcg") && lat.contains("-M, --MGID") && !bw.contains("-g, --mcg"));
        assert!(!lat.contains("-D, --duration"));
        let atomic = text(Test::AtomicLat, "atomic_lat");
        assert!(
            atomic.contains("-A, --atomic_type") && !atomic.contains("-s, --size") && !atomic.contains("-a, --all")
        );
        assert!(atomic.contains("-D, --duration"));
        assert_ne!(text(Test::ReadBw, "read_bw"), text(Test::SendBw, "send_bw"));
    }
}
