//! Hardware counters of an rxe device (Linux `rxe_hw_counters.c`, shown per
//! port by `rdma statistic show` and in sysfs `ports/1/hw_counters/`).
//!
//! rxe keeps one set of counters per device and reports it on port 1. The core
//! counts `link_downed` itself (the port state machine lives here); the
//! transport fills the rest through [`Counters::inc`] / [`Counters::add`].
//! `lifespan` is not a counter but the sysfs knob next to them: how long (ms)
//! a read value may be served from cache.

use super::error::Error;

/// One rxe counter. The order is Linux's `rxe_counter_name[]` order, which is
/// the order `rdma statistic show` prints.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(usize)]
pub enum RxeCounter {
    SentPkts,
    RcvdPkts,
    DuplicateRequest,
    OutOfSeqRequest,
    RcvdRnrErr,
    SendRnrErr,
    RcvdSeqErr,
    AckDeferred,
    RetryExceededErr,
    RetryRnrExceededErr,
    CompleterRetryErr,
    SendErr,
    LinkDowned,
    RdmaSends,
    RdmaRecvs,
}

/// Number of rxe counters.
pub const NUM_COUNTERS: usize = 15;
// Each counter is named by the ring's list, index for index.
const _: () = assert!(NUM_COUNTERS == verbs_ring::show::rdma_stat::COUNTER_NAMES.len());

impl RxeCounter {
    pub const ALL: [RxeCounter; NUM_COUNTERS] = [
        RxeCounter::SentPkts,
        RxeCounter::RcvdPkts,
        RxeCounter::DuplicateRequest,
        RxeCounter::OutOfSeqRequest,
        RxeCounter::RcvdRnrErr,
        RxeCounter::SendRnrErr,
        RxeCounter::RcvdSeqErr,
        RxeCounter::AckDeferred,
        RxeCounter::RetryExceededErr,
        RxeCounter::RetryRnrExceededErr,
        RxeCounter::CompleterRetryErr,
        RxeCounter::SendErr,
        RxeCounter::LinkDowned,
        RxeCounter::RdmaSends,
        RxeCounter::RdmaRecvs,
    ];

    /// The Linux counter name (the ring's list, which the host tools print by).
    pub fn name(self) -> &'static str {
        verbs_ring::show::rdma_stat::COUNTER_NAMES[self as usize]
    }

    pub fn from_name(name: &str) -> Option<RxeCounter> {
        RxeCounter::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// The sysfs knob that sits among the counters (`hw_counters/lifespan`).
pub const LIFESPAN: &str = "lifespan";
/// Linux's default lifespan in milliseconds (`RDMA_HW_STATS_DEFAULT_LIFESPAN`).
pub const DEFAULT_LIFESPAN_MS: u32 = 10;
/// The largest lifespan sysfs accepts.
pub const MAX_LIFESPAN_MS: u32 = 10_000;

/// The entries of `ports/1/hw_counters/` as `ls` lists them: every counter
/// plus `lifespan`, sorted by name.
pub const HW_COUNTER_DIR: [&str; NUM_COUNTERS + 1] = [
    "ack_deferred",
    "completer_retry_err",
    "duplicate_request",
    "lifespan",
    "link_downed",
    "out_of_seq_request",
    "rcvd_pkts",
    "rcvd_rnr_err",
    "rcvd_seq_err",
    "rdma_recvs",
    "rdma_sends",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "send_err",
    "send_rnr_err",
    "sent_pkts",
];

/// One device's counters.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Counters {
    values: [u64; NUM_COUNTERS],
    lifespan_ms: u32,
}

impl Default for Counters {
    fn default() -> Self {
        Counters { values: [0; NUM_COUNTERS], lifespan_ms: DEFAULT_LIFESPAN_MS }
    }
}

impl Counters {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, c: RxeCounter) -> u64 {
        self.values[c as usize]
    }

    /// Count one event.
    pub fn inc(&mut self, c: RxeCounter) {
        self.add(c, 1);
    }

    /// Count `n` events. Saturates: a counter stuck at the maximum misleads
    /// less than one that silently restarts at zero.
    pub fn add(&mut self, c: RxeCounter, n: u64) {
        let v = &mut self.values[c as usize];
        *v = v.saturating_add(n);
    }

    /// Takes a counter's value from where it is kept (the transport counts
    /// on its hot path; the core shows the numbers).
    pub fn set(&mut self, c: RxeCounter, v: u64) {
        self.values[c as usize] = v;
    }

    /// `(name, value)` in `rdma statistic show` order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        RxeCounter::ALL.into_iter().map(|c| (c.name(), self.get(c)))
    }

    pub fn lifespan_ms(&self) -> u32 {
        self.lifespan_ms
    }

    /// Write `hw_counters/lifespan` (1..=10000 ms, as sysfs accepts).
    pub fn set_lifespan_ms(&mut self, ms: u32) -> Result<(), Error> {
        if ms == 0 || ms > MAX_LIFESPAN_MS {
            return Err(Error::BadArgument(alloc::format!("lifespan {ms} ms is outside 1..={MAX_LIFESPAN_MS}")));
        }
        self.lifespan_ms = ms;
        Ok(())
    }

    /// Read one `hw_counters/` entry by name, `lifespan` included.
    pub fn read_entry(&self, name: &str) -> Option<u64> {
        if name == LIFESPAN {
            return Some(u64::from(self.lifespan_ms));
        }
        RxeCounter::from_name(name).map(|c| self.get(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn names_are_linux_rxe_names() {
        // The issue's list, alphabetical as `ls hw_counters` shows it.
        let issue = [
            "ack_deferred",
            "completer_retry_err",
            "duplicate_request",
            "lifespan",
            "link_downed",
            "out_of_seq_request",
            "rcvd_pkts",
            "rcvd_rnr_err",
            "rcvd_seq_err",
            "rdma_recvs",
            "rdma_sends",
            "retry_exceeded_err",
            "retry_rnr_exceeded_err",
            "send_err",
            "send_rnr_err",
            "sent_pkts",
        ];
        assert_eq!(HW_COUNTER_DIR, issue);
        let mut from_enum: Vec<&str> = RxeCounter::ALL.iter().map(|c| c.name()).collect();
        from_enum.push(LIFESPAN);
        from_enum.sort_unstable();
        assert_eq!(from_enum, issue);
        for c in RxeCounter::ALL {
            assert_eq!(RxeCounter::from_name(c.name()), Some(c));
        }
    }

    #[test]
    fn counting_and_reading() {
        let mut c = Counters::new();
        c.inc(RxeCounter::LinkDowned);
        c.add(RxeCounter::SentPkts, 5);
        c.add(RxeCounter::SentPkts, u64::MAX);
        assert_eq!(c.get(RxeCounter::LinkDowned), 1);
        assert_eq!(c.get(RxeCounter::SentPkts), u64::MAX);
        assert_eq!(c.read_entry("link_downed"), Some(1));
        assert_eq!(c.read_entry("lifespan"), Some(10));
        assert_eq!(c.read_entry("bogus"), None);
        assert_eq!(c.iter().next(), Some(("sent_pkts", u64::MAX)));
        assert_eq!(c.iter().count(), NUM_COUNTERS);
    }

    #[test]
    fn lifespan_bounds() {
        let mut c = Counters::new();
        assert!(c.set_lifespan_ms(0).is_err());
        assert!(c.set_lifespan_ms(10_001).is_err());
        assert_eq!(c.set_lifespan_ms(250), Ok(()));
        assert_eq!(c.lifespan_ms(), 250);
    }
}
