//! The main loop. Every task is polled in turn; when none had work the CPU
//! halts until an interrupt or the earliest deadline. Halting matters here: a
//! guest that spins takes a host core from QEMU's own I/O thread.

use crate::arch::irq::WAKE;
use crate::time::{self, Instant, pit};
use alloc::boxed::Box;
use core::sync::atomic::Ordering;
use kbase::timer::TimerQueue;
use x86_64::instructions::interrupts;

/// Something the loop drives: drivers, protocol engines, the shell.
pub trait Task {
    /// Does whatever work is ready; returns whether there was any.
    fn poll(&mut self, now: Instant, timers: &mut Timers) -> bool;

    /// When the task next needs polling even if no interrupt comes.
    fn deadline(&mut self, _now: Instant) -> Option<Instant> {
        None
    }

    /// Called when no task had work, just before the loop halts: false
    /// keeps it awake for another pass (a task that, having told its
    /// peers it sleeps, found work they posted meanwhile).
    fn may_halt(&mut self) -> bool {
        true
    }
}

/// A deferred action, run by the loop at its deadline.
pub type TimerAction = Box<dyn FnOnce()>;
pub type Timers = TimerQueue<TimerAction>;

/// Idle statistics for `uptime`.
pub static HALTS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

pub fn run(tasks: &mut [&mut dyn Task]) -> ! {
    let mut timers = Timers::new();
    loop {
        WAKE.store(false, Ordering::Relaxed);
        let now = time::now();
        let mut busy = false;
        while let Some(action) = timers.pop_expired(now) {
            action();
            busy = true;
        }
        for task in tasks.iter_mut() {
            busy |= task.poll(now, &mut timers);
        }
        if !busy && tasks.iter_mut().all(|t| t.may_halt()) {
            let deadline = tasks.iter_mut().filter_map(|t| t.deadline(now)).chain(timers.next_deadline()).min();
            idle(deadline);
        }
    }
}

/// Halts until an interrupt; the PIT bounds the halt by `deadline`.
fn idle(deadline: Option<Instant>) {
    interrupts::disable();
    // An interrupt since the pass began may have brought work: don't sleep on it.
    if WAKE.load(Ordering::Acquire) {
        interrupts::enable();
        return;
    }
    let wait = deadline.map_or(pit::MAX_ONE_SHOT_US, |d| d.saturating_since(time::now()).as_micros());
    if wait == 0 {
        interrupts::enable();
        return;
    }
    pit::one_shot(wait);
    HALTS.fetch_add(1, Ordering::Relaxed);
    let t = crate::prof::start();
    // `sti` takes effect after the next instruction, so no interrupt can slip in
    // between enabling and halting.
    interrupts::enable_and_hlt();
    crate::prof::IDLE.add(t);
    crate::prof::woke(t);
}
