//! The serial console: COM1, shared by the shell, the logger and the fault
//! reporters. `print!`/`println!` write here.

use core::fmt::{self, Write};
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

/// A received byte, if one is waiting.
pub fn read_byte() -> Option<u8> {
    UART.lock().read_byte()
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
