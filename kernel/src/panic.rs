//! The last word: panics and fatal errors print what and where, then stop QEMU
//! with the failure code so a test sees a failed run, never a hang.

use core::panic::PanicInfo;

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    x86_64::instructions::interrupts::disable();
    crate::console::emergency_print(format_args!("\n!!! PANIC: {info}\n!!! firmware stopped\n"));
    crate::arch::exit::fail(crate::arch::exit::FAILURE)
}

/// Stops the firmware with a message, for errors it cannot run without.
#[macro_export]
macro_rules! fatal {
    ($($arg:tt)*) => {
        panic!("fatal: {}", format_args!($($arg)*))
    };
}
