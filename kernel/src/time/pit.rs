//! The 8254 PIT: channel 2 (gated through port 0x61) measures the TSC rate at
//! boot; channel 0 in one-shot mode raises IRQ 0 at the next deadline so the
//! idle loop can halt until then.

use x86_64::instructions::port::Port;

/// The PIT's input clock.
pub const HZ: u64 = 1_193_182;
/// The longest one-shot the 16-bit counter can time (~54.9 ms).
pub const MAX_ONE_SHOT_US: u64 = 65_535 * 1_000_000 / HZ;

const CHANNEL0: u16 = 0x40;
const CHANNEL2: u16 = 0x42;
const MODE: u16 = 0x43;
const GATE: u16 = 0x61;

fn outb(port: u16, v: u8) {
    // SAFETY: the PIT and port 0x61 belong to this module; writes program timers only.
    unsafe { Port::new(port).write(v) }
}

fn inb(port: u16) -> u8 {
    // SAFETY: as in `outb`.
    unsafe { Port::new(port).read() }
}

/// Counts `clock` ticks while channel 2 times `ms` milliseconds. `None` if the
/// channel never finished (no PIT).
pub fn measure_ticks(ms: u64, clock: impl Fn() -> u64) -> Option<u64> {
    let count = (HZ * ms / 1000) as u16;
    // Gate on, speaker off; channel 2, lobyte/hibyte, mode 0 (terminal count).
    outb(GATE, (inb(GATE) & !0x02) | 0x01);
    outb(MODE, 0b1011_0000);
    outb(CHANNEL2, count as u8);
    outb(CHANNEL2, (count >> 8) as u8);
    let start = clock();
    // Bounded: ~10 ms of port reads is far below this even on fast hosts.
    for _ in 0..100_000_000u32 {
        if inb(GATE) & 0x20 != 0 {
            return Some(clock() - start);
        }
    }
    None
}

/// Arms channel 0 to raise IRQ 0 once, `us` microseconds from now (clamped to
/// what the counter can time).
pub fn one_shot(us: u64) {
    let count = (us.clamp(1, MAX_ONE_SHOT_US) * HZ / 1_000_000).clamp(1, 65_535) as u16;
    // Channel 0, lobyte/hibyte, mode 0: the output rises (IRQ 0) at terminal count.
    outb(MODE, 0b0011_0000);
    outb(CHANNEL0, count as u8);
    outb(CHANNEL0, (count >> 8) as u8);
}
