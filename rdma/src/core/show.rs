//! `rdma statistic show` for the console: the core's counters, in rxe's
//! order, through the formatter the host tool uses too
//! ([`verbs_ring::show::rdma_stat`]).

use core::fmt::{self, Write};

use super::counters::{Counters, RxeCounter};
use super::device::Device;

/// The counters' values in rxe's order, [`verbs_ring::show::rdma_stat`]'s.
pub fn counter_values(counters: &Counters) -> alloc::vec::Vec<u64> {
    RxeCounter::ALL.iter().map(|&c| counters.get(c)).collect()
}

/// `rdma statistic show` for one port: `link rxe0/1 sent_pkts 0 rcvd_pkts 0 ...`.
pub fn rdma_stat_show(out: &mut dyn Write, dev_name: &str, port: u32, counters: &Counters) -> fmt::Result {
    let values = RxeCounter::ALL.map(|c| counters.get(c));
    verbs_ring::show::rdma_stat::write(out, dev_name, port, &values)
}

/// `rdma statistic show` for every port of every device given.
pub fn rdma_stat_show_all<'a>(out: &mut dyn Write, devices: impl IntoIterator<Item = &'a Device>) -> fmt::Result {
    for dev in devices {
        for port in dev.ports() {
            rdma_stat_show(out, dev.name(), port.num(), &dev.counters())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::testutil::{eth0, rxe_core};
    use alloc::string::String;
    use alloc::vec;

    #[test]
    fn stat_show_lists_counters_in_rxe_order() {
        let net = vec![eth0()];
        let mut core = rxe_core();
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        let mut s = String::new();
        rdma_stat_show_all(&mut s, core.devices()).unwrap();
        assert_eq!(
            s,
            "link rxe0/1 sent_pkts 0 rcvd_pkts 0 duplicate_request 0 out_of_seq_request 0 \
             rcvd_rnr_err 0 send_rnr_err 0 rcvd_seq_err 0 ack_deferred 0 retry_exceeded_err 0 \
             retry_rnr_exceeded_err 0 completer_retry_err 0 send_err 0 link_downed 0 \
             rdma_sends 0 rdma_recvs 0\n"
        );
    }
}
