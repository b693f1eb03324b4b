//! The TSC as the monotonic clock. Its rate is measured once against PIT
//! channel 2 (a known 1.193182 MHz), then reading the time is one `rdtsc`.

use super::pit;
use core::sync::atomic::{AtomicU64, Ordering};
use vocab::time::Instant;

static TSC_START: AtomicU64 = AtomicU64::new(0);
static TSC_HZ: AtomicU64 = AtomicU64::new(0);
/// Microseconds per tick as a 32.32 fixed-point factor, so `now` needs no division.
static US_PER_TICK_FP32: AtomicU64 = AtomicU64::new(0);

const CALIBRATION_MS: u64 = 10;
/// If the measurement fails, assume 1 GHz rather than stop the clock.
const FALLBACK_HZ: u64 = 1_000_000_000;

pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc only reads the time-stamp counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

pub fn calibrate() {
    let hz = match pit::measure_ticks(CALIBRATION_MS, rdtsc) {
        Some(ticks) if ticks > 0 => ticks * (1000 / CALIBRATION_MS),
        _ => {
            log::warn!("TSC calibration failed; assuming 1 GHz");
            FALLBACK_HZ
        }
    };
    TSC_HZ.store(hz, Ordering::Relaxed);
    US_PER_TICK_FP32.store((1_000_000u64 << 32) / hz, Ordering::Relaxed);
    TSC_START.store(rdtsc(), Ordering::Release);
}

pub fn hz() -> u64 {
    TSC_HZ.load(Ordering::Relaxed)
}

pub fn now() -> Instant {
    let start = TSC_START.load(Ordering::Acquire);
    if start == 0 {
        return Instant::ZERO;
    }
    let ticks = rdtsc().saturating_sub(start);
    let us = (u128::from(ticks) * u128::from(US_PER_TICK_FP32.load(Ordering::Relaxed))) >> 32;
    Instant::from_micros(us as u64)
}
