//! Time as the transport sees it: an [`Instant`] the caller passes in and a
//! [`Duration`] in microseconds. There is no clock in `rdma/`: every entry point
//! takes `now`, and the transport answers with the next instant it wants to be
//! polled at (smoltcp's `time.rs` model), so a test replays exactly.

use core::ops::{Add, Sub};

/// A point in time, in microseconds since an epoch the caller chooses (boot, for the
/// kernel; zero, for the simulator). Monotonic by contract: the caller never goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

/// A span of time in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    /// Later than any deadline: "never".
    pub const NEVER: Instant = Instant(u64::MAX);

    pub const fn from_micros(micros: u64) -> Instant {
        Instant(micros)
    }

    pub const fn micros(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);

    pub const fn from_micros(micros: u64) -> Duration {
        Duration(micros)
    }

    pub const fn from_millis(millis: u64) -> Duration {
        Duration(millis.saturating_mul(1000))
    }

    pub const fn micros(self) -> u64 {
        self.0
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// Saturates at [`Instant::NEVER`]: a deadline too far away is "never".
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(rhs.0))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

/// The IBA local ACK timeout (vol. 1 9.7.6.1.3, QP attribute `timeout`): 4.096 µs ×
/// 2^`code`, rounded up to whole microseconds. Code 0 disables the timer (`None`), as
/// the spec and Linux do. Codes above 31 are refused by modify-QP before they get here;
/// they are clamped to 31 so this stays total.
pub const fn local_ack_timeout(code: u8) -> Option<Duration> {
    if code == 0 {
        return None;
    }
    let code = if code > 31 { 31 } else { code };
    let nanos = 4096u64 << code;
    Some(Duration(nanos.div_ceil(1000)))
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn ack_timeout_table() {
        assert_eq!(local_ack_timeout(0), None);
        assert_eq!(local_ack_timeout(1), Some(Duration(9)));
        // 4.096 µs × 2^14 = 67.108864 ms: what `timeout 14` (perftest's default) means.
        assert_eq!(local_ack_timeout(14), Some(Duration(67_109)));
        assert_eq!(local_ack_timeout(31), Some(Duration(8_796_093_023)));
        assert_eq!(local_ack_timeout(200), local_ack_timeout(31));
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant::NEVER + Duration(5), Instant::NEVER);
        assert_eq!(Instant(3) - Instant(5), Duration::ZERO);
        assert_eq!(Instant(5) - Instant(3), Duration(2));
    }
}
