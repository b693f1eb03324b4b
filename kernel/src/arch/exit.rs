//! Leaving QEMU: ACPI power-off for a clean shutdown (QEMU exits 0) and the
//! isa-debug-exit device for failures (QEMU exits `(code << 1) | 1`).

use x86_64::instructions::port::Port;

/// Exit code the isa-debug-exit device sees on a firmware failure (QEMU: 3).
pub const FAILURE: u32 = 1;

/// Powers the machine off by entering ACPI S5 through the PM1a control
/// register (QEMU exits 0); `pm1a_cnt` comes from the chipset's PM block.
pub fn power_off(pm1a_cnt: Option<u16>) -> ! {
    if let Some(port) = pm1a_cnt {
        // SLP_EN with sleep type 0, which QEMU's PIIX4 and ICH9 treat as S5.
        // SAFETY: this port is the chipset's PM1a control register; the write
        // asks it to power off and touches no memory.
        unsafe { Port::<u16>::new(port).write(0x2000) };
        // QEMU acts on the request from its main loop, a moment later; falling
        // through to isa-debug-exit at once would win the race with a failure code.
        let give_up = crate::time::now() + crate::time::Duration::from_secs(2);
        while crate::time::now() < give_up {
            core::hint::spin_loop();
        }
    }
    fail(FAILURE)
}

/// Stops QEMU with a failure code; halts forever where the device is absent.
pub fn fail(code: u32) -> ! {
    // SAFETY: isa-debug-exit at 0xf4 makes QEMU exit; elsewhere it is an unused port.
    unsafe { Port::<u32>::new(0xf4).write(code) };
    halt_forever()
}

pub fn halt_forever() -> ! {
    x86_64::instructions::interrupts::disable();
    loop {
        x86_64::instructions::hlt();
    }
}
