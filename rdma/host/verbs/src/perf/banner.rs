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
}

impl Banner {
    /// `Send BW Test`, `Atomic FETCH_AND_ADD Latency Test`, ...: the
    /// title's words (the JSON joins them with `_`).
    fn title_words(&self) -> Vec<&'static str> {
        let mut w = vec![self.test.verb_name()];
        if self.test.is_atomic() {
            w.push(if self.atomic_cas { "CMP_AND_SWAP" } else { "FETCH_AND_ADD" });
        }
        w.push(if self.test.is_lat() { "Latency" } else { "BW" });
        w.push("Test");
        w
    }

    /// perftest turns relaxed ordering off in write_lat only, which polls
    /// the last byte of each write (that byte must land last).
    fn relaxed_ordering(&self) -> bool {
        self.test != Test::WriteLat
    }

    fn connection(&self) -> &'static str {
        if self.uc { "UC" } else { "RC" }
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
        s += &format!(" Dual-port       : OFF\t\tDevice         : {}\n", self.device);
        s += " Number of qps   : 1\t\tTransport type : IB\n";
        s += &format!(" Connection type : {}\t\tUsing SRQ      : OFF\n", self.connection());
        // Debian's perftest is built with relaxed ordering support (the
        // line's ON) and, on a device it does not know (rxe, ours), uses
        // the old post_send.
        s += &format!(" PCIe relax order: {}\n", on(self.relaxed_ordering()));
        s += " ibv_wr* API     : OFF\n";
        if self.client {
            s += &format!(" TX depth        : {}\n", self.tx_depth);
        }
        if self.test.is_send() && !self.client {
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
        s += &format!("Dual_port: OFF,\nDevice: \"{}\",\n", self.device);
        s += "Number_of_qps: 1,\nTransport_type: IB,\n";
        s += &format!("Connection_type: {},\nUsing_SRQ: OFF,\n", self.connection());
        s += &format!("PCIe_relax_order: {},\n", on(self.relaxed_ordering()));
        s += "ibv_wr_API: OFF,\n";
        if self.client {
            s += &format!("TX_depth : {},\n", self.tx_depth);
        }
        if self.test.is_send() && !self.client {
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
