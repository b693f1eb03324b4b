//! The serial console: COM1, shared by the shell, the logger and the fault
//! reporters. `print!`/`println!` write here.

use crate::arch::irq::{self, IRQ_COM1};
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use drivers::serial::{ByteIo, COM1, Uart16550};
use spin::Mutex;

// SAFETY: COM1 is the console UART and only this module drives it.
static UART: Mutex<Uart16550> = Mutex::new(unsafe { Uart16550::new(COM1) });

pub fn init() {
    UART.lock().init();
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments) {
    x86_64::instructions::interrupts::without_interrupts(|| {
        let _ = UART.lock().write_fmt(args);
    });
}

/// Writes raw bytes (echo and line editing), no newline translation.
pub fn write_bytes(bytes: &[u8]) {
    let mut uart = UART.lock();
    for &b in bytes {
        uart.write_byte(b);
    }
}

/// COM1 interrupts the reader has seen.
static RX_IRQS_SEEN: AtomicU64 = AtomicU64::new(0);
/// The UART may hold received bytes: set by a new receive interrupt (and at
/// boot, for bytes typed before the line was unmasked), cleared only when a
/// read finds it empty.
static RX_PENDING: AtomicBool = AtomicBool::new(true);

/// A received byte, if one is waiting.
///
/// The UART is read only after its receive interrupt: under emulation each
/// register read is a trap into QEMU that waits for its lock, and reading on
/// every pass of the loop cost ~14 us a pass.
/// The UART raises its line while data waits (the FIFO's trigger level or its
/// timeout) and drops it only when emptied, so a reader that stops early
/// keeps `RX_PENDING` and reads again on its next call; an interrupt after the
/// read that found it empty counts anew and is not lost.
pub fn read_byte() -> Option<u8> {
    let irqs = irq::count(IRQ_COM1);
    if RX_IRQS_SEEN.swap(irqs, Ordering::Relaxed) != irqs {
        RX_PENDING.store(true, Ordering::Relaxed);
    }
    if !RX_PENDING.load(Ordering::Relaxed) {
        return None;
    }
    let byte = UART.lock().read_byte();
    if byte.is_none() {
        RX_PENDING.store(false, Ordering::Relaxed);
    }
    byte
}

/// Prints from a fault handler: takes the console even if the faulting code held
/// it, since nothing else will run after the report.
pub fn emergency_print(args: fmt::Arguments) {
    if UART.is_locked() {
        // SAFETY: called only on the way to stopping the machine; the holder was
        // interrupted by the fault and will never resume.
        unsafe { UART.force_unlock() };
    }
    let _ = UART.lock().write_fmt(args);
}

#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => ($crate::console::_print(format_args!($($arg)*)));
}

#[macro_export]
macro_rules! println {
    () => ($crate::print!("\n"));
    ($($arg:tt)*) => ($crate::console::_print(format_args!("{}\n", format_args!($($arg)*))));
}
