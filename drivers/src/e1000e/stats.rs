//! The device's statistics registers (among §10.2's register
//! descriptions), accumulated: each read clears the register, so the driver
//! adds what it read to its own totals (64-bit; the 32-bit counters would
//! wrap within hours of line rate).

use super::regs::{self, Regs};

/// Totals since the driver started (across device resets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HwStats {
    pub crc_errors: u64,
    /// Frames missed for want of buffers or FIFO room (Linux's
    /// `rx_missed_errors`).
    pub missed: u64,
    pub rx_no_buffers: u64,
    pub rx_good: u64,
    pub tx_good: u64,
    pub rx_good_octets: u64,
    pub tx_good_octets: u64,
    pub rx_total: u64,
    pub tx_total: u64,
}

impl HwStats {
    /// Reads (and so clears) the counters into the totals.
    pub fn accumulate(&mut self, r: &impl Regs) {
        let add = |total: &mut u64, reg| *total = total.wrapping_add(u64::from(r.read(reg)));
        add(&mut self.crc_errors, regs::CRCERRS);
        add(&mut self.missed, regs::MPC);
        add(&mut self.rx_no_buffers, regs::RNBC);
        add(&mut self.rx_good, regs::GPRC);
        add(&mut self.tx_good, regs::GPTC);
        add(&mut self.rx_total, regs::TPR);
        add(&mut self.tx_total, regs::TPT);
        // Low half first: reading the high half clears the pair.
        let octets = |lo, hi| u64::from(r.read(lo)) | u64::from(r.read(hi)) << 32;
        self.rx_good_octets = self.rx_good_octets.wrapping_add(octets(regs::GORCL, regs::GORCH));
        self.tx_good_octets = self.tx_good_octets.wrapping_add(octets(regs::GOTCL, regs::GOTCH));
    }

    /// The totals by name, for the `perf` counters.
    pub fn named(&self) -> [(&'static str, u64); 9] {
        [
            ("e1000e crc_errors", self.crc_errors),
            ("e1000e missed", self.missed),
            ("e1000e rx_no_buffers", self.rx_no_buffers),
            ("e1000e rx_good", self.rx_good),
            ("e1000e tx_good", self.tx_good),
            ("e1000e rx_good_octets", self.rx_good_octets),
            ("e1000e tx_good_octets", self.tx_good_octets),
            ("e1000e rx_total", self.rx_total),
            ("e1000e tx_total", self.tx_total),
        ]
    }
}
