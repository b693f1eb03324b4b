//! What an Intel NIC counts: the driver's own counters ([`Stats`]), and
//! the controllers' statistics registers (82574 §10.2, 82576 §8.19; the
//! same offsets on both), accumulated ([`HwStats`]): each read clears the
//! register, so the driver adds what it read to its own totals (64-bit;
//! the 32-bit counters would wrap within hours of line rate). The kernel
//! reports `missed` as `ip -s link`'s `rx_missed_errors` and every total,
//! by the name its controller gives it ([`StatsMap`]), in `perf`.
#![forbid(unsafe_code)]

use super::regs::{self, Regs};
use super::rx::RingFaults;

/// Counters the driver keeps (the device's own are [`HwStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Receive buffers dropped: an error bit, no length, or part of a frame
    /// spread over several buffers.
    pub rx_errors: u64,
    /// Receiver overruns the device signalled (RXO).
    pub rx_overruns: u64,
    /// Transmit attempts refused because the ring was full.
    pub tx_queue_full: u64,
    /// Tail register writes.
    pub tx_doorbells: u64,
    pub rx_doorbells: u64,
    /// Device resets after bring-up (hangs, MTU changes that need one), and
    /// what caused the hang ones.
    pub resets: u64,
    pub tx_hangs: u64,
    /// Frames queued but dropped by a reset before the device sent them.
    pub tx_lost: u64,
    pub rx_faults: RingFaults,
    /// Frames dropped because the device found their IPv4 header checksum
    /// wrong.
    pub rx_bad_ip_csum: u64,
    /// Frames passed up whose TCP/UDP checksum the device found wrong (the
    /// stack above drops them, as it would have by itself).
    pub rx_bad_l4_csum: u64,
    /// Frames whose IPv4 header the device checked and found right.
    pub rx_ip_csum_good: u64,
    /// Frames sent with the device inserting checksums.
    pub tx_csum_offload: u64,
    /// Frames sent from more than one buffer.
    pub tx_chained: u64,
    /// Frames sent with memory outside the driver in their chain (zero-copy).
    pub tx_zero_copy: u64,
}

/// Totals since the driver started (across device resets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HwStats {
    pub crc_errors: u64,
    /// Frames missed for want of buffers or FIFO room (Linux's
    /// `rx_missed_errors`).
    pub missed: u64,
    pub rx_no_buffers: u64,
    /// Frames over the long-packet limit, dropped (counted where
    /// [`StatsMap::oversize`] says the driver reads ROC).
    pub rx_oversize: u64,
    pub rx_good: u64,
    pub tx_good: u64,
    pub rx_good_octets: u64,
    pub tx_good_octets: u64,
    pub rx_total: u64,
    pub tx_total: u64,
}

/// What one controller's driver makes of the registers: whether it reads
/// ROC, and the name each total has in `perf` (its driver's name first).
pub struct StatsMap {
    /// ROC is read: the 82576, whose RLPML the driver sets, so an
    /// oversize frame is one the MTU did not admit.
    pub oversize: bool,
    /// The totals' names, in [`HwStats::totals`]' order (`stat_names!`).
    pub names: [&'static str; 10],
}

/// The ten names of [`StatsMap::names`] for the driver called `$driver`
/// ("e1000e crc_errors", ...).
macro_rules! stat_names {
    ($driver:literal) => {
        [
            concat!($driver, " crc_errors"),
            concat!($driver, " missed"),
            concat!($driver, " rx_no_buffers"),
            concat!($driver, " rx_oversize"),
            concat!($driver, " rx_good"),
            concat!($driver, " tx_good"),
            concat!($driver, " rx_good_octets"),
            concat!($driver, " tx_good_octets"),
            concat!($driver, " rx_total"),
            concat!($driver, " tx_total"),
        ]
    };
}
pub(crate) use stat_names;

/// Where `rx_oversize` is in [`HwStats::totals`].
const OVERSIZE: usize = 3;

impl HwStats {
    /// Reads (and so clears) the counters `map` says into the totals.
    pub fn accumulate(&mut self, r: &impl Regs, map: &StatsMap) {
        let add = |total: &mut u64, reg| *total = total.wrapping_add(u64::from(r.read(reg)));
        add(&mut self.crc_errors, regs::CRCERRS);
        add(&mut self.missed, regs::MPC);
        add(&mut self.rx_no_buffers, regs::RNBC);
        if map.oversize {
            add(&mut self.rx_oversize, regs::ROC);
        }
        add(&mut self.rx_good, regs::GPRC);
        add(&mut self.tx_good, regs::GPTC);
        add(&mut self.rx_total, regs::TPR);
        add(&mut self.tx_total, regs::TPT);
        // Low half first: reading the high half clears the pair.
        let octets = |lo, hi| u64::from(r.read(lo)) | u64::from(r.read(hi)) << 32;
        self.rx_good_octets = self.rx_good_octets.wrapping_add(octets(regs::GORCL, regs::GORCH));
        self.tx_good_octets = self.tx_good_octets.wrapping_add(octets(regs::GOTCL, regs::GOTCH));
    }

    /// Every total, in the order of `stat_names!`.
    pub fn totals(&self) -> [u64; 10] {
        [
            self.crc_errors,
            self.missed,
            self.rx_no_buffers,
            self.rx_oversize,
            self.rx_good,
            self.tx_good,
            self.rx_good_octets,
            self.tx_good_octets,
            self.rx_total,
            self.tx_total,
        ]
    }

    /// The totals the driver reads, by name, for the `perf` counters.
    pub fn named(&self, map: &'static StatsMap) -> impl Iterator<Item = (&'static str, u64)> {
        let read = |&(i, _): &(usize, _)| i != OVERSIZE || map.oversize;
        map.names.into_iter().zip(self.totals()).enumerate().filter(read).map(|(_, named)| named)
    }
}
