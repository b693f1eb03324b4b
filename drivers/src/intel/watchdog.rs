//! The periodic care an Intel NIC gets from the poll loop: a transmit
//! watchdog that resets a device whose oldest transmission has made no
//! progress for [`TX_HANG_US`] with the link up (Linux's e1000e and igb
//! wait a few seconds too), and the statistics registers read every
//! [`STATS_EVERY_US`] before their 32 bits wrap.
#![forbid(unsafe_code)]

use super::controller::Controller;
use super::driver::Driver;
use super::regs::Regs;
use virtio_drivers::Hal;

/// A transmission the device has not finished in this long, with the link
/// up, means it is stuck: reset it.
pub const TX_HANG_US: u64 = 2_000_000;
/// How often the statistics registers are read (each a trap; they are 32
/// bits, so at least every few seconds at line rate).
pub const STATS_EVERY_US: u64 = 1_000_000;

/// The watchdog's clocks (`now_us`: any monotonic microsecond clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watchdog {
    /// Since when the oldest transmission waits, and how many frames had
    /// completed then (progress restarts the clock).
    hang: Option<(u64, u64)>,
    /// When the statistics were last read.
    stats_at: Option<u64>,
}

impl Watchdog {
    /// Whether the statistics are due at `now_us` (they are then taken as
    /// read).
    pub fn stats_due(&mut self, now_us: u64) -> bool {
        let due = self.stats_at.is_none_or(|t| now_us.saturating_sub(t) >= STATS_EVERY_US);
        if due {
            self.stats_at = Some(now_us);
        }
        due
    }

    /// Whether the transmitter is hung at `now_us`: `waiting` (the link up
    /// and the oldest frame not done) for [`TX_HANG_US`] with `completed`
    /// (frames finished so far) unchanged.
    pub fn hung(&mut self, now_us: u64, waiting: bool, completed: u64) -> bool {
        if !waiting {
            self.hang = None;
            return false;
        }
        match self.hang {
            Some((since, done)) if done == completed => now_us.saturating_sub(since) >= TX_HANG_US,
            _ => {
                self.hang = Some((now_us, completed));
                false
            }
        }
    }

    /// Forgets the wait (a reset emptied the ring).
    pub fn clear(&mut self) {
        self.hang = None;
    }
}

impl<H: Hal, R: Regs, C: Controller> Driver<H, R, C> {
    /// Periodic care, cheap enough for every pass (`now_us`: any monotonic
    /// microsecond clock): resets a device whose oldest transmission has
    /// waited [`TX_HANG_US`] with the link up, and reads the statistics every
    /// [`STATS_EVERY_US`]. Whether it reset the device.
    pub fn watchdog(&mut self, now_us: u64) -> bool {
        if self.watch.stats_due(now_us) {
            self.hw.accumulate(&self.regs, &C::STATS);
        }
        self.reclaim_tx();
        let waiting = self.carrier && self.tx.oldest_pending();
        if !self.watch.hung(now_us, waiting, self.tx_completed) {
            return false;
        }
        self.stats.tx_hangs += 1;
        // A failed reset leaves the device down; the next pass's watchdog
        // finds nothing queued and tries no more.
        let _ = self.reset();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hang_is_progress_stopped_for_the_whole_wait() {
        let mut w = Watchdog::default();
        assert!(!w.hung(0, true, 0), "the clock starts");
        assert!(!w.hung(TX_HANG_US - 1, true, 0));
        assert!(!w.hung(TX_HANG_US + 5, true, 1), "progress restarts it");
        assert!(!w.hung(2 * TX_HANG_US, true, 1));
        assert!(w.hung(2 * TX_HANG_US + 5, true, 1));
        assert!(!w.hung(3 * TX_HANG_US, false, 1), "nothing waiting: no hang, and the clock stops");
        assert!(!w.hung(4 * TX_HANG_US, true, 1), "a fresh wait");
        w.clear();
        assert!(!w.hung(9 * TX_HANG_US, true, 1));
    }

    #[test]
    fn statistics_are_due_once_a_period() {
        let mut w = Watchdog::default();
        assert!(w.stats_due(5));
        assert!(!w.stats_due(5 + STATS_EVERY_US - 1));
        assert!(w.stats_due(5 + STATS_EVERY_US));
        assert!(!w.stats_due(0), "a clock that went back waits for the period");
    }
}
