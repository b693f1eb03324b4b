//! The interrupt descriptor table: 256 gates, filled with the exception stubs
//! (vectors 0-31), the IRQ stubs (32-47), the MSI stubs (48-63) and the local
//! APIC's spurious vector (255).

use spin::Once;
use x86_64::VirtAddr;
use x86_64::instructions::tables::lidt;
use x86_64::structures::DescriptorTablePointer;

/// One 64-bit interrupt gate.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Gate {
    offset_low: u16,
    selector: u16,
    ist: u8,
    type_attr: u8,
    offset_mid: u16,
    offset_high: u32,
    reserved: u32,
}

impl Gate {
    fn new(handler: usize, selector: u16, ist: u8) -> Self {
        let h = handler as u64;
        Self {
            offset_low: h as u16,
            selector,
            ist,
            type_attr: 0x8e, // present, DPL 0, 64-bit interrupt gate (IF cleared on entry)
            offset_mid: (h >> 16) as u16,
            offset_high: (h >> 32) as u32,
            reserved: 0,
        }
    }
}

#[repr(C, align(16))]
struct Table([Gate; 256]);

static IDT: Once<Table> = Once::new();

pub fn init() {
    let table = IDT.call_once(|| {
        let sel = super::gdt::code_selector();
        let mut t = Table([Gate::default(); 256]);
        for (v, stub) in super::exceptions::STUBS.iter().enumerate() {
            let ist = if v == 8 { super::gdt::DOUBLE_FAULT_IST } else { 0 };
            t.0[v] = Gate::new(*stub as usize, sel, ist);
        }
        for (i, stub) in super::irq::STUBS.iter().enumerate() {
            t.0[super::irq::VECTOR_BASE as usize + i] = Gate::new(*stub as usize, sel, 0);
        }
        for (i, stub) in super::msi::STUBS.iter().enumerate() {
            t.0[super::msi::VECTOR_BASE as usize + i] = Gate::new(*stub as usize, sel, 0);
        }
        t.0[super::apic::SPURIOUS_VECTOR as usize] = Gate::new(super::apic::spurious as *const () as usize, sel, 0);
        t
    });
    let ptr =
        DescriptorTablePointer { limit: (core::mem::size_of::<Table>() - 1) as u16, base: VirtAddr::from_ptr(table) };
    // SAFETY: the table is 'static, fully initialised, and its gates point at
    // handlers that follow the interrupt calling convention.
    unsafe { lidt(&ptr) };
}
