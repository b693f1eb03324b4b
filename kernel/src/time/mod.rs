//! Time: a monotonic microsecond clock from the TSC (calibrated against the
//! PIT at boot) and the one-shot PIT interrupt that ends an idle halt at the
//! next deadline.

pub mod pit;
mod tsc;

pub use vocab::time::{Duration, Instant};

/// Now, in microseconds since the clock was calibrated (0 before that).
pub fn now() -> Instant {
    tsc::now()
}

/// Calibrates the TSC; call once with interrupts off.
pub fn init() {
    tsc::calibrate();
}

/// The raw TSC, for timing short spans (profiling); [`tsc_hz`] converts.
pub fn cycles() -> u64 {
    tsc::rdtsc()
}

/// The calibrated TSC frequency in Hz.
pub fn tsc_hz() -> u64 {
    tsc::hz()
}
