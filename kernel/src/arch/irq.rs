//! Hardware interrupts through the legacy 8259 PIC pair, remapped to vectors
//! 32-47. Handlers only count and raise the wake flag: the poll loop does the
//! work, so nothing runs in interrupt context that could contend for a lock.

use core::arch::naked_asm;
use core::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use x86_64::instructions::port::Port;

pub const VECTOR_BASE: u8 = 32;
pub const IRQ_TIMER: u8 = 0;
pub const IRQ_CASCADE: u8 = 2;
pub const IRQ_COM1: u8 = 4;

const MASTER_CMD: u16 = 0x20;
const MASTER_DATA: u16 = 0x21;
const SLAVE_CMD: u16 = 0xa0;
const SLAVE_DATA: u16 = 0xa1;
const EOI: u8 = 0x20;
const READ_ISR: u8 = 0x0b;

/// Set by every interrupt; the poll loop clears it before a pass and checks it
/// (with interrupts off) before halting, so no wake-up is lost.
pub static WAKE: AtomicBool = AtomicBool::new(false);
/// Interrupts taken per IRQ line.
pub static COUNTS: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];
static SPURIOUS: AtomicU64 = AtomicU64::new(0);
/// Lines that are level-triggered (bit per IRQ).
static LEVEL: AtomicU16 = AtomicU16::new(0);

fn outb(port: u16, v: u8) {
    // SAFETY: the PIC ports belong to this module; the writes only program it.
    unsafe { Port::new(port).write(v) }
}

fn inb(port: u16) -> u8 {
    // SAFETY: as in `outb`.
    unsafe { Port::new(port).read() }
}

/// Remaps both PICs to `VECTOR_BASE` and masks every line but the cascade.
pub fn init() {
    outb(MASTER_CMD, 0x11); // ICW1: edge-triggered, cascade, ICW4 follows
    outb(SLAVE_CMD, 0x11);
    outb(MASTER_DATA, VECTOR_BASE); // ICW2: vector offsets
    outb(SLAVE_DATA, VECTOR_BASE + 8);
    outb(MASTER_DATA, 1 << IRQ_CASCADE); // ICW3: slave on IRQ 2
    outb(SLAVE_DATA, IRQ_CASCADE);
    outb(MASTER_DATA, 0x01); // ICW4: 8086 mode
    outb(SLAVE_DATA, 0x01);
    outb(MASTER_DATA, !(1 << IRQ_CASCADE));
    outb(SLAVE_DATA, 0xff);
}

/// Unmasks one IRQ line.
pub fn enable(irq: u8) {
    let (port, bit) = if irq < 8 { (MASTER_DATA, irq) } else { (SLAVE_DATA, irq - 8) };
    x86_64::instructions::interrupts::without_interrupts(|| outb(port, inb(port) & !(1 << bit)));
}

/// Unmasks a level-triggered line after its device was serviced and acked.
/// (PCI INTx stays asserted until the driver acks the device; the handler masks
/// the line so it cannot storm, and the poll loop calls this when done.)
pub fn unmask(irq: u8) {
    if irq < 16 && LEVEL.load(Ordering::Relaxed) & (1 << irq) != 0 {
        enable(irq);
    }
}

/// Routes a level-triggered (PCI) line: masked on each interrupt until `unmask`.
pub fn enable_level(irq: u8) {
    if irq < 16 {
        LEVEL.fetch_or(1 << irq, Ordering::Relaxed);
        enable(irq);
    }
}

fn mask(irq: u8) {
    let (port, bit) = if irq < 8 { (MASTER_DATA, irq) } else { (SLAVE_DATA, irq - 8) };
    outb(port, inb(port) | (1 << bit));
}

/// Interrupts taken on one IRQ line.
pub fn count(irq: u8) -> u64 {
    COUNTS.get(usize::from(irq)).map_or(0, |c| c.load(Ordering::Relaxed))
}

/// Interrupts taken on spurious IRQ 7/15.
pub fn spurious() -> u64 {
    SPURIOUS.load(Ordering::Relaxed)
}

fn in_service(cmd_port: u16, bit: u8) -> bool {
    outb(cmd_port, READ_ISR);
    inb(cmd_port) & (1 << bit) != 0
}

extern "C" fn dispatch(irq: u64) {
    crate::prof::irq_taken();
    let irq = irq as u8 & 15;
    // IRQ 7 and 15 may be spurious (the line dropped before acknowledgement):
    // then the PIC's in-service bit is clear and the pair must not see an EOI
    // for it (the master still needs one for a spurious slave IRQ).
    if irq == 7 && !in_service(MASTER_CMD, 7) {
        SPURIOUS.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if irq == 15 && !in_service(SLAVE_CMD, 7) {
        SPURIOUS.fetch_add(1, Ordering::Relaxed);
        outb(MASTER_CMD, EOI);
        return;
    }
    COUNTS[irq as usize].fetch_add(1, Ordering::Relaxed);
    if LEVEL.load(Ordering::Relaxed) & (1 << irq) != 0 {
        mask(irq);
    }
    WAKE.store(true, Ordering::Release);
    if irq >= 8 {
        outb(SLAVE_CMD, EOI);
    }
    outb(MASTER_CMD, EOI);
}

macro_rules! irq_stub {
    ($name:ident, $irq:literal) => {
        /// Saves the caller-saved registers (the target is soft-float: no SSE
        /// state), calls `dispatch(irq)` on a 16-byte aligned stack, returns.
        /// XMM registers are not saved: only the ICRC's assembly uses them and
        /// `dispatch` never reaches it (see `sse.rs`); keep it that way.
        #[unsafe(naked)]
        extern "C" fn $name() {
            naked_asm!(
                "push rax", "push rcx", "push rdx", "push rsi", "push rdi",
                "push r8", "push r9", "push r10", "push r11",
                "mov edi, {irq}",
                "call {dispatch}",
                "pop r11", "pop r10", "pop r9", "pop r8",
                "pop rdi", "pop rsi", "pop rdx", "pop rcx", "pop rax",
                "iretq",
                irq = const $irq,
                dispatch = sym dispatch,
            )
        }
    };
}

irq_stub!(i0, 0);
irq_stub!(i1, 1);
irq_stub!(i2, 2);
irq_stub!(i3, 3);
irq_stub!(i4, 4);
irq_stub!(i5, 5);
irq_stub!(i6, 6);
irq_stub!(i7, 7);
irq_stub!(i8, 8);
irq_stub!(i9, 9);
irq_stub!(i10, 10);
irq_stub!(i11, 11);
irq_stub!(i12, 12);
irq_stub!(i13, 13);
irq_stub!(i14, 14);
irq_stub!(i15, 15);

/// Entry points for IRQ 0-15 (vectors 32-47).
pub static STUBS: [extern "C" fn(); 16] = [i0, i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11, i12, i13, i14, i15];
