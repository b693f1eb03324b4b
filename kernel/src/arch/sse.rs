//! SSE on (Intel SDM vol. 3, 13.1.3 and 13.1.4): the firmware's own code is
//! soft-float and never uses XMM registers, but the ICRC's PCLMULQDQ folding
//! (the `crc` crate) does, and with CR4.OSFXSR clear every SSE instruction
//! raises #UD.
//!
//! No XMM state is saved anywhere, and none needs to be: the compiler emits no
//! SSE for this target, the CRC's assembly is the only code that touches XMM
//! registers, and it runs only from the poll loop. Interrupt and exception
//! handlers (`irq.rs`, `exceptions.rs`) never reach it; an interrupt taken in
//! the middle of a CRC returns to it with the registers untouched.

use x86_64::registers::control::{Cr0, Cr0Flags, Cr4, Cr4Flags};

/// Enables SSE: CR0.EM = 0 (no x87 emulation trap), CR0.MP = 1, CR0.TS = 0 (no
/// lazy-switch trap, #NM), CR4.OSFXSR = 1 (SSE instructions, FXSAVE/FXRSTOR of
/// the XMM state), CR4.OSXMMEXCPT = 1 (unmasked SIMD floating-point errors
/// raise #XM rather than #UD; the CRC only uses integer instructions).
pub fn enable() {
    // SAFETY: these bits only govern x87/SSE instructions, which no code
    // relied on faulting; paging, protection and caching bits are kept.
    unsafe {
        Cr0::update(|f| {
            f.remove(Cr0Flags::EMULATE_COPROCESSOR | Cr0Flags::TASK_SWITCHED);
            f.insert(Cr0Flags::MONITOR_COPROCESSOR);
        });
        Cr4::update(|f| f.insert(Cr4Flags::OSFXSR | Cr4Flags::OSXMMEXCPT_ENABLE));
    }
}
