//! Leaving QEMU: ACPI power-off for a clean shutdown (QEMU exits 0) and the
//! isa-debug-exit device for failures (QEMU exits `(code << 1) | 1`).

use x86_64::instructions::port::Port;

/// Exit code the isa-debug-exit device sees on a firmware failure (QEMU: 3).
pub const FAILURE: u32 = 1;

/// A PM1 control register (ACPI fixed hardware), in I/O or memory space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pm1Control {
    Io(u16),
    /// A physical address, identity-mapped uncached.
    Memory(u64),
}

/// Powers the machine off by entering ACPI S5: each `(register, value)` is
/// written in order (PM1a, then PM1b; QEMU exits 0). Without any, or if the
/// machine is still running two seconds later, stops QEMU with a failure.
pub fn power_off(writes: &[(Pm1Control, u16)]) -> ! {
    for &(reg, value) in writes {
        match reg {
            // SAFETY: the PM1 control register the ACPI tables (or the chipset)
            // name; the write asks for S5 and touches no memory.
            Pm1Control::Io(port) => unsafe { Port::<u16>::new(port).write(value) },
            // SAFETY: as above, a register the FADT places in memory, mapped
            // uncached by `acpi::init`.
            Pm1Control::Memory(addr) => unsafe { core::ptr::write_volatile(addr as *mut u16, value) },
        }
    }
    if !writes.is_empty() {
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
