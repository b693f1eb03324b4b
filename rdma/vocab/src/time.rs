//! Monotonic time in microseconds. There is no clock here: the kernel reads its
//! own (microseconds since boot) and every protocol entry point takes `now` as an
//! argument, so a test drives time by hand and a failing case replays exactly
//! (smoltcp's `time.rs` model).

use core::fmt;
use core::ops::{Add, Sub};

/// A point in time, in microseconds since an epoch the caller chooses (boot, for
/// the kernel; zero, for a simulation). Monotonic by contract: the caller never
/// goes back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

/// A span of time in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    /// Later than any deadline: "never".
    pub const NEVER: Instant = Instant(u64::MAX);

    pub const fn from_micros(us: u64) -> Instant {
        Instant(us)
    }

    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);

    pub const fn from_micros(us: u64) -> Duration {
        Duration(us)
    }

    pub const fn from_millis(ms: u64) -> Duration {
        Duration(ms.saturating_mul(1000))
    }

    pub const fn from_secs(s: u64) -> Duration {
        Duration(s.saturating_mul(1_000_000))
    }

    pub const fn as_micros(self) -> u64 {
        self.0
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// Saturates at [`Instant::NEVER`]: a deadline too far away is "never".
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}

/// `1d 02:03:04.567890` style, as `uptime` prints it.
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0;
        let (secs, frac) = (us / 1_000_000, us % 1_000_000);
        let (days, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
        if days > 0 {
            write!(f, "{days}d ")?;
        }
        write!(f, "{h:02}:{m:02}:{s:02}.{frac:06}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_micros(10);
        assert_eq!(t - Instant::from_micros(20), Duration::ZERO);
        assert_eq!(Instant::from_micros(5) - Instant::from_micros(3), Duration::from_micros(2));
        assert_eq!((t + Duration::from_millis(2)).as_micros(), 2010);
        assert_eq!(Instant::NEVER + Duration::from_secs(1), Instant::NEVER);
    }

    #[test]
    fn display() {
        assert_eq!(Duration::from_micros(3_723_000_042).to_string(), "01:02:03.000042");
        assert_eq!(Duration::from_secs(90_000).to_string(), "1d 01:00:00.000000");
    }
}
