//! CPU exception reporting. Every exception is fatal for the appliance: the
//! handler prints the vector, its name, the error code, RIP (and CR2 for page
//! faults) with the registers, then stops QEMU with the failure code.

use core::arch::naked_asm;

/// The registers as the common stub leaves them on the stack, lowest first.
#[repr(C)]
#[derive(Debug)]
pub struct ExceptionFrame {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rbp: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub rbx: u64,
    pub rax: u64,
    pub vector: u64,
    pub error_code: u64,
    // Pushed by the CPU.
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

const NAMES: [&str; 32] = [
    "divide error",
    "debug",
    "non-maskable interrupt",
    "breakpoint",
    "overflow",
    "bound range exceeded",
    "invalid opcode",
    "device not available",
    "double fault",
    "coprocessor segment overrun",
    "invalid TSS",
    "segment not present",
    "stack-segment fault",
    "general protection fault",
    "page fault",
    "reserved (15)",
    "x87 floating-point error",
    "alignment check",
    "machine check",
    "SIMD floating-point error",
    "virtualization exception",
    "control protection exception",
    "reserved (22)",
    "reserved (23)",
    "reserved (24)",
    "reserved (25)",
    "reserved (26)",
    "reserved (27)",
    "hypervisor injection exception",
    "VMM communication exception",
    "security exception",
    "reserved (31)",
];

/// Called by the common stub with the saved frame; never returns. It touches
/// no XMM register (none is saved; see `sse.rs`).
extern "C" fn report(frame: &ExceptionFrame) -> ! {
    let v = frame.vector as usize;
    let name = NAMES.get(v).copied().unwrap_or("unknown");
    crate::console::emergency_print(format_args!(
        "\n!!! CPU EXCEPTION {v} ({name}) error_code={:#x} rip={:#018x}\n",
        frame.error_code, frame.rip
    ));
    if v == 14 {
        let cr2 = x86_64::registers::control::Cr2::read_raw();
        let e = frame.error_code;
        crate::console::emergency_print(format_args!(
            "!!! page fault at cr2={cr2:#018x}: {} on a {} page{}\n",
            if e & 2 != 0 {
                "write"
            } else if e & 16 != 0 {
                "instruction fetch"
            } else {
                "read"
            },
            if e & 1 != 0 { "present" } else { "non-present" },
            if e & 8 != 0 { " (reserved bit set)" } else { "" },
        ));
    }
    crate::console::emergency_print(format_args!(
        "    rax={:#018x} rbx={:#018x} rcx={:#018x} rdx={:#018x}\n    rsi={:#018x} rdi={:#018x} rbp={:#018x} rsp={:#018x}\n    r8 ={:#018x} r9 ={:#018x} r10={:#018x} r11={:#018x}\n    r12={:#018x} r13={:#018x} r14={:#018x} r15={:#018x}\n    cs={:#x} ss={:#x} rflags={:#x}\n",
        frame.rax,
        frame.rbx,
        frame.rcx,
        frame.rdx,
        frame.rsi,
        frame.rdi,
        frame.rbp,
        frame.rsp,
        frame.r8,
        frame.r9,
        frame.r10,
        frame.r11,
        frame.r12,
        frame.r13,
        frame.r14,
        frame.r15,
        frame.cs,
        frame.ss,
        frame.rflags,
    ));
    crate::console::emergency_print(format_args!("!!! firmware stopped\n"));
    super::exit::fail(super::exit::FAILURE)
}

/// Saves the general registers above the vector and error code, then reports.
#[unsafe(naked)]
extern "C" fn common() -> ! {
    naked_asm!(
        "push rax", "push rbx", "push rcx", "push rdx", "push rsi", "push rdi", "push rbp",
        "push r8", "push r9", "push r10", "push r11", "push r12", "push r13", "push r14", "push r15",
        "mov rdi, rsp",
        "and rsp, -16",
        "call {report}",
        "ud2",
        report = sym report,
    )
}

macro_rules! stub {
    // The CPU pushed no error code: push a zero so every frame has the same shape.
    ($name:ident, $v:literal) => {
        #[unsafe(naked)]
        extern "C" fn $name() -> ! {
            naked_asm!("push 0", "push {v}", "jmp {common}", v = const $v, common = sym common)
        }
    };
    ($name:ident, $v:literal, error_code) => {
        #[unsafe(naked)]
        extern "C" fn $name() -> ! {
            naked_asm!("push {v}", "jmp {common}", v = const $v, common = sym common)
        }
    };
}

stub!(e0, 0);
stub!(e1, 1);
stub!(e2, 2);
stub!(e3, 3);
stub!(e4, 4);
stub!(e5, 5);
stub!(e6, 6);
stub!(e7, 7);
stub!(e8, 8, error_code);
stub!(e9, 9);
stub!(e10, 10, error_code);
stub!(e11, 11, error_code);
stub!(e12, 12, error_code);
stub!(e13, 13, error_code);
stub!(e14, 14, error_code);
stub!(e15, 15);
stub!(e16, 16);
stub!(e17, 17, error_code);
stub!(e18, 18);
stub!(e19, 19);
stub!(e20, 20);
stub!(e21, 21, error_code);
stub!(e22, 22);
stub!(e23, 23);
stub!(e24, 24);
stub!(e25, 25);
stub!(e26, 26);
stub!(e27, 27);
stub!(e28, 28);
stub!(e29, 29, error_code);
stub!(e30, 30, error_code);
stub!(e31, 31);

/// Entry points for vectors 0-31, by vector.
pub static STUBS: [extern "C" fn() -> !; 32] = [
    e0, e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11, e12, e13, e14, e15, e16, e17, e18, e19, e20, e21, e22, e23, e24,
    e25, e26, e27, e28, e29, e30, e31,
];
