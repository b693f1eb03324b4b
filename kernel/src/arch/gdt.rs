//! The kernel's GDT with a TSS whose IST1 is a separate stack for double faults,
//! so a kernel stack overflow is reported instead of resetting the machine.

use spin::Once;
use x86_64::VirtAddr;
use x86_64::instructions::segmentation::{CS, DS, ES, SS, Segment};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::tss::TaskStateSegment;

/// IST slot (1-based in the TSS, as the IDT entry names it) of the double-fault stack.
pub const DOUBLE_FAULT_IST: u8 = 1;
const FAULT_STACK_SIZE: usize = 16 * 1024;

#[repr(align(16))]
#[allow(dead_code, reason = "only the stack's address is used, by the CPU")]
struct Stack([u8; FAULT_STACK_SIZE]);
static mut DOUBLE_FAULT_STACK: Stack = Stack([0; FAULT_STACK_SIZE]);

static TSS: Once<TaskStateSegment> = Once::new();
static GDT: Once<(GlobalDescriptorTable, SegmentSelector, SegmentSelector, SegmentSelector)> = Once::new();

pub fn init() {
    let tss = TSS.call_once(|| {
        let mut tss = TaskStateSegment::new();
        let base = VirtAddr::from_ptr(&raw const DOUBLE_FAULT_STACK);
        tss.interrupt_stack_table[usize::from(DOUBLE_FAULT_IST - 1)] = base + FAULT_STACK_SIZE as u64;
        tss
    });
    let (gdt, code, data, tss_sel) = GDT.call_once(|| {
        let mut gdt = GlobalDescriptorTable::new();
        let code = gdt.append(Descriptor::kernel_code_segment());
        let data = gdt.append(Descriptor::kernel_data_segment());
        let tss_sel = gdt.append(Descriptor::tss_segment(tss));
        (gdt, code, data, tss_sel)
    });
    gdt.load();
    // SAFETY: the selectors index the GDT just loaded, which lives forever.
    unsafe {
        CS::set_reg(*code);
        DS::set_reg(*data);
        ES::set_reg(*data);
        SS::set_reg(*data);
        load_tss(*tss_sel);
    }
}

/// The code selector, for IDT entries.
pub fn code_selector() -> u16 {
    GDT.get().map_or(0x08, |g| g.1.0)
}
