//! The boot CPU's local APIC, in xAPIC (MMIO) mode, for message-signalled
//! interrupts only: the 8259 pair keeps the timer and the serial port, its
//! output reaching the CPU through LINT0 in virtual-wire mode (Intel SDM
//! vol. 3 §11.5.1 "Local Vector Table"; MP spec §3.6.2.2). MSI and MSI-X
//! messages arrive as fixed, edge-triggered interrupts and end with an EOI
//! here (§11.8.5).

use core::sync::atomic::{AtomicU64, Ordering};
use x86_64::registers::model_specific::Msr;

/// IA32_APIC_BASE (SDM §11.4.4): the page's base (bits 51:12), the global
/// enable (11) and x2APIC mode (10).
const IA32_APIC_BASE: u32 = 0x1b;
const BASE_ENABLE: u64 = 1 << 11;
const BASE_X2APIC: u64 = 1 << 10;
const BASE_ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;

// Register offsets in the page (SDM table 11-1).
const ID: u32 = 0x020;
const TPR: u32 = 0x080;
const EOI: u32 = 0x0b0;
const SVR: u32 = 0x0f0;
const ESR: u32 = 0x280;
const LVT_TIMER: u32 = 0x320;
const LVT_LINT0: u32 = 0x350;
const LVT_LINT1: u32 = 0x360;
const LVT_ERROR: u32 = 0x370;

/// SVR: the APIC software enable (bit 8) and the spurious vector.
const SVR_ENABLE: u32 = 1 << 8;
pub const SPURIOUS_VECTOR: u8 = 0xff;
/// LVT entries: delivery mode (10:8) and the mask (16).
const LVT_MASKED: u32 = 1 << 16;
const LVT_EXTINT: u32 = 0b111 << 8;
const LVT_NMI: u32 = 0b100 << 8;

/// The APIC page's address (identity-mapped), 0 until `init` succeeded.
static BASE: AtomicU64 = AtomicU64::new(0);

/// Why the local APIC cannot take MSIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApicError {
    /// CPUID says there is none.
    Absent,
    /// Globally disabled in IA32_APIC_BASE by the firmware.
    Disabled,
    /// The firmware left it in x2APIC mode (MSR access, not MMIO).
    X2Apic,
    Map(crate::mem::paging::MapError),
}

fn has_apic() -> bool {
    // CPUID.1:EDX bit 9.
    let r = core::arch::x86_64::__cpuid(1);
    r.edx & (1 << 9) != 0
}

fn read(reg: u32) -> u32 {
    let base = BASE.load(Ordering::Relaxed);
    if base == 0 {
        return 0;
    }
    // SAFETY: `base` is the APIC page, mapped uncached by `init`; `reg` is
    // one of this module's aligned register offsets inside it.
    unsafe { core::ptr::read_volatile((base + u64::from(reg)) as *const u32) }
}

fn write(reg: u32, value: u32) {
    let base = BASE.load(Ordering::Relaxed);
    if base == 0 {
        return;
    }
    // SAFETY: as in `read`; only this module programs the APIC.
    unsafe { core::ptr::write_volatile((base + u64::from(reg)) as *mut u32, value) }
}

/// Maps the APIC page uncached and software-enables the APIC, routing
/// the PICs through LINT0 (ExtINT) and NMIs through LINT1, whatever the
/// firmware left (SeaBIOS and OVMF differ), with its own timer and error
/// interrupts masked. Call with interrupts off, after paging is up.
pub fn init() -> Result<(), ApicError> {
    if !has_apic() {
        return Err(ApicError::Absent);
    }
    // SAFETY: IA32_APIC_BASE exists wherever CPUID reports an APIC;
    // reading it has no side effects.
    let msr = unsafe { Msr::new(IA32_APIC_BASE).read() };
    if msr & BASE_ENABLE == 0 {
        return Err(ApicError::Disabled);
    }
    if msr & BASE_X2APIC != 0 {
        return Err(ApicError::X2Apic);
    }
    let base = msr & BASE_ADDR_MASK;
    crate::mem::paging::map_device(base, 4096, crate::mem::paging::Caching::Uncached).map_err(ApicError::Map)?;
    BASE.store(base, Ordering::Relaxed);
    write(LVT_TIMER, LVT_MASKED);
    write(LVT_ERROR, LVT_MASKED);
    // Virtual wire: the 8259's INTR as ExtINT (the vector comes from the
    // PIC's own acknowledge cycle, and the PIC takes the EOI), NMI as NMI.
    write(LVT_LINT0, LVT_EXTINT);
    write(LVT_LINT1, LVT_NMI);
    // Accept every priority class (MSI vectors start at 0x30).
    write(TPR, 0);
    write(SVR, SVR_ENABLE | u32::from(SPURIOUS_VECTOR));
    // Clear errors latched before (written first, per SDM §11.5.3).
    write(ESR, 0);
    let _ = read(ESR);
    // Anything in service from before (firmware) is ended.
    write(EOI, 0);
    log::info!("apic: local APIC {} at {base:#x}, virtual wire for the PIC", id());
    Ok(())
}

/// Whether `init` succeeded: MSI messages can be aimed at this APIC.
pub fn ready() -> bool {
    BASE.load(Ordering::Relaxed) != 0
}

/// This CPU's (8-bit xAPIC) ID, the destination MSI messages name.
pub fn id() -> u8 {
    (read(ID) >> 24) as u8
}

/// Ends the interrupt in service (from an MSI vector's handler).
pub fn eoi() {
    write(EOI, 0);
}

/// The spurious vector's handler (SDM §11.9): no EOI.
#[unsafe(naked)]
pub extern "C" fn spurious() {
    core::arch::naked_asm!("iretq")
}
