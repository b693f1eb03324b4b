//! The test's description, as perftest 4.5 prints it before a run (its
//! `ctx_print_test_info`) and as `--out_json` writes it (`test_info`): one
//! description, two formatters.

use super::Test;
use super::report::BAR;

/// What the header says about a run.
#[derive(Clone, Debug)]
pub struct Banner {
    pub test: Test,
    pub atomic_cas: bool,
    pub device: String,
    /// perftest prints the send queue's depth on the client only.
    pub client: bool,
    pub tx_depth: u32,
    pub rx_depth: u32,
    pub cq_mod: u32,
    pub mtu_bytes: u32,
    pub link_layer: &'static str,
    pub gid_index: u8,
    pub out_reads: u16,
    /// `-R`: the test's QPs connected through rdma_cm.
    pub rdma_cm_qps: bool,
    /// `-R` or `-z`: the keys exchanged over rdma_cm, not TCP.
    pub rdma_cm_exchange: bool,
    /// `-c UC`.
    pub uc: bool,
    /// `-c UD`.
    pub ud: bool,
    /// `-q`.
    pub qps: u32,
    /// `-b`.
    pub duplex: bool,
    /// `-g`.
    pub mcast: bool,
}

impl Banner {
    /// `Send BW Test`, `Atomic FETCH_AND_ADD Latency Test`, ...: the
    /// title's words (the JSON joins them with `_`).
    fn title_words(&self) -> Vec<&'static str> {
        let mut w = vec![self.test.verb_name()];
        if self.test.is_atomic() {
            w.push(if self.atomic_cas { "CMP_AND_SWAP" } else { "FETCH_AND_ADD" });
        }
        if self.duplex {
            w.push("Bidirectional");
        }
        w.push(if self.test.is_lat() { "Latency" } else { "BW" });
        if self.mcast {
            w.push("Multicast");
        }
        w.push("Test");
        w
    }

    /// perftest turns relaxed ordering off in write_lat only, which polls
    /// the last byte of each write (that byte must land last).
    fn relaxed_ordering(&self) -> bool {
        self.test != Test::WriteLat
    }

    fn connection(&self) -> &'static str {
        if self.uc {
            "UC"
        } else if self.ud {
            "UD"
        } else {
            "RC"
        }
    }

    /// perftest shows the send queue's depth on a side that sends, the
    /// receive queue's on a SEND test's side that receives.
    fn shows_tx_depth(&self) -> bool {
        self.client || self.duplex
    }

    fn shows_rx_depth(&self) -> bool {
        self.test.is_send() && (!self.client || self.duplex)
    }

    fn reads(&self) -> bool {
        self.test.reads()
    }

    /// The header block, from the first dashed line to the last, each line
    /// ending in a newline.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let on = |b: bool| if b { "ON" } else { "OFF" };
        s += &format!("{BAR}\n");
        s += &format!("                    {}\n", self.title_words().join(" "));
        if self.mcast {
            s += " MultiCast runs on UD!\n";
        }
        s += &format!(" Dual-port       : OFF\t\tDevice         : {}\n", self.device);
        s += &format!(" Number of qps   : {}\t\tTransport type : IB\n", self.qps);
        s += &format!(" Connection type : {}\t\tUsing SRQ      : OFF\n", self.connection());
        // Debian's perftest is built with relaxed ordering support (the
        // line's ON) and, on a device it does not know (rxe, ours), uses
        // the old post_send.
        s += &format!(" PCIe relax order: {}\n", on(self.relaxed_ordering()));
        s += " ibv_wr* API     : OFF\n";
        if self.shows_tx_depth() {
            s += &format!(" TX depth        : {}\n", self.tx_depth);
        }
        if self.shows_rx_depth() {
            s += &format!(" RX depth        : {}\n", self.rx_depth);
        }
        if !self.test.is_lat() {
            s += &format!(" CQ Moderation   : {}\n", self.cq_mod);
        }
        s += &format!(" Mtu             : {}[B]\n", self.mtu_bytes);
        s += &format!(" Link type       : {}\n", self.link_layer);
        s += &format!(" GID index       : {}\n", self.gid_index);
        if self.reads() {
            s += &format!(" Outstand reads  : {}\n", self.out_reads);
        } else {
            s += " Max inline data : 0[B]\n";
        }
        s += &format!(" rdma_cm QPs\t : {}\n", on(self.rdma_cm_qps));
        s += &format!(" Data ex. method : {}", if self.rdma_cm_exchange { "rdma_cm" } else { "Ethernet" });
        if self.rdma_cm_qps && !self.client {
            s += &format!("\n{BAR}\n");
            s += " Waiting for client rdma_cm QP to connect\n";
            s += " Please run the same command with the IB/RoCE interface IP";
        }
        s += &format!("\n{BAR}\n");
        s
    }

    /// `--out_json`'s `test_info` object, as perftest writes it (its own
    /// shape: unquoted keys and values, trailing commas).
    pub fn json(&self) -> String {
        let mut s = String::from("test_info: {\n");
        let on = |b: bool| if b { "ON" } else { "OFF" };
        s += &format!("test: {},\n", self.title_words().join("_"));
        if self.mcast {
            // perftest's own spelling, leading space included.
            s += " MultiCast_runs: on_UD,\n";
        }
        s += &format!("Dual_port: OFF,\nDevice: \"{}\",\n", self.device);
        s += &format!("Number_of_qps: {},\nTransport_type: IB,\n", self.qps);
        s += &format!("Connection_type: {},\nUsing_SRQ: OFF,\n", self.connection());
        s += &format!("PCIe_relax_order: {},\n", on(self.relaxed_ordering()));
        s += "ibv_wr_API: OFF,\n";
        if self.shows_tx_depth() {
            s += &format!("TX_depth : {},\n", self.tx_depth);
        }
        if self.shows_rx_depth() {
            s += &format!("RX_depth: {},\n", self.rx_depth);
        }
        if !self.test.is_lat() {
            s += &format!("CQ_Moderation: {},\n", self.cq_mod);
        }
        s += &format!("Mtu: {},\n", self.mtu_bytes);
        s += &format!("Link_type: {},\n", self.link_layer);
        s += &format!("GID_index: {},\n", self.gid_index);
        if self.reads() {
            s += &format!("Outstand_reads: {},\n", self.out_reads);
        } else {
            s += "Max_inline_data: 0,\n";
        }
        s += &format!("rdma_cm_QPs: {},\n", on(self.rdma_cm_qps));
        s += &format!("Data_ex_method: {},\n", if self.rdma_cm_exchange { "rdma_cm" } else { "Ethernet" });
        s += "},\n";
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header of a fixture (what Debian's perftest printed): from the
    /// first dashed line to the second, the server's wait notice left out.
    fn header_of(fixture: &str) -> String {
        let from = fixture.find(BAR).expect("a dashed line");
        let rest = &fixture[from + BAR.len()..];
        let to = rest.find(BAR).expect("a second dashed line");
        format!("{}{}{BAR}\n", BAR, &rest[..to])
    }

    fn banner(test: Test, client: bool) -> Banner {
        Banner {
            test,
            atomic_cas: false,
            device: "rxe0".into(),
            client,
            tx_depth: 100,
            rx_depth: 100,
            cq_mod: 1,
            mtu_bytes: 1024,
            link_layer: "Ethernet",
            gid_index: 1,
            out_reads: 1,
            rdma_cm_qps: false,
            rdma_cm_exchange: false,
            uc: false,
            ud: false,
            qps: 1,
            duplex: false,
            mcast: false,
        }
    }

    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!("../../../../../tests/fixtures/perftest/", $name))
        };
    }

    #[test]
    fn qps_bidirectional_and_ud_headers_are_perftests() {
        let qps = |client| Banner { qps: 2, ..banner(Test::WriteBw, client) };
        assert_eq!(qps(true).text(), header_of(fixture!("write_bw-qps.client.txt")));
        assert_eq!(qps(false).text(), header_of(fixture!("write_bw-qps.server.txt")));
        // Duplex: both sides show what they send (and receive).
        for client in [true, false] {
            let w = Banner { duplex: true, ..banner(Test::WriteBw, client) };
            let s = Banner { duplex: true, ..banner(Test::SendBw, client) };
            let (wf, sf) = if client {
                (fixture!("write_bw-bidir.client.txt"), fixture!("send_bw-bidir.client.txt"))
            } else {
                (fixture!("write_bw-bidir.server.txt"), fixture!("send_bw-bidir.server.txt"))
            };
            assert_eq!(w.text(), header_of(wf));
            assert_eq!(s.text(), header_of(sf));
        }
        let ud = |client| Banner { ud: true, tx_depth: 1, ..banner(Test::SendLat, client) };
        assert_eq!(ud(true).text(), header_of(fixture!("send_lat-ud.client.txt")));
        assert_eq!(ud(false).text(), header_of(fixture!("send_lat-ud.server.txt")));
    }

    #[test]
    fn json_names_the_bidirectional_test_and_its_qps() {
        let b = Banner { duplex: true, qps: 2, ..banner(Test::WriteBw, false) };
        let j = b.json();
        assert!(j.contains("test: RDMA_Write_Bidirectional_BW_Test,\n"), "{j}");
        assert!(j.contains("Number_of_qps: 2,\n") && j.contains("TX_depth : 100,\n"), "{j}");
    }
}
