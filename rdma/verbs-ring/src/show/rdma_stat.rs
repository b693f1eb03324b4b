//! iproute2's `rdma statistic show` line for one port: `link DEV/PORT` and
//! then every counter as `name value`, in Linux rxe's counter order, which
//! is also the order of the ring's QUERY_COUNTERS answer.

use core::fmt::{self, Write};

/// The counters' names, in rxe's order (`rxe_counter_name[]`): index `i`
/// names `CountersResp::values[i]`, and the RDMA core numbers its counters
/// by this list.
pub const COUNTER_NAMES: [&str; 15] = [
    "sent_pkts",
    "rcvd_pkts",
    "duplicate_request",
    "out_of_seq_request",
    "rcvd_rnr_err",
    "send_rnr_err",
    "rcvd_seq_err",
    "ack_deferred",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "completer_retry_err",
    "send_err",
    "link_downed",
    "rdma_sends",
    "rdma_recvs",
];

/// `link rxe0/1 sent_pkts 0 rcvd_pkts 0 ...`: `values` in [`COUNTER_NAMES`]
/// order; values past the names a peer may send are not printed.
pub fn write(out: &mut dyn Write, dev: &str, port: u32, values: &[u64]) -> fmt::Result {
    write!(out, "link {dev}/{port}")?;
    for (name, v) in COUNTER_NAMES.iter().zip(values) {
        write!(out, " {name} {v}")?;
    }
    writeln!(out)
}

/// The port as `rdma -j statistic show` prints it (no device index there).
pub fn write_json(o: &mut super::json::JsonObject<'_, '_>, dev: &str, port: u32, values: &[u64]) -> fmt::Result {
    o.str("ifname", dev)?;
    o.uint("port", u64::from(port))?;
    for (name, v) in COUNTER_NAMES.iter().zip(values) {
        o.uint(name, *v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    #[test]
    fn one_line_in_rxe_order() {
        let mut s = String::new();
        let mut values = [0u64; 15];
        values[0] = 7;
        values[12] = 1;
        write(&mut s, "rxe1", 1, &values).unwrap();
        assert!(s.starts_with("link rxe1/1 sent_pkts 7 rcvd_pkts 0 duplicate_request 0 "), "{s}");
        assert!(s.ends_with(" link_downed 1 rdma_sends 0 rdma_recvs 0\n"), "{s}");
        // A short answer prints what it has; a long one no names it lacks.
        let mut s = String::new();
        write(&mut s, "rxe0", 1, &[1, 2]).unwrap();
        assert_eq!(s, "link rxe0/1 sent_pkts 1 rcvd_pkts 2\n");
    }
}
