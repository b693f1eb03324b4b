//! The vectors message-signalled interrupts (MSI, MSI-X) arrive on: 48-63,
//! above the PICs' 32-47, handed out by [`alloc`]. As for the PIC lines
//! (`irq.rs`), a handler only counts, raises the wake flag and ends the
//! interrupt at the local APIC; the poll loop acknowledges the device.
//! Messages are edge-triggered: nothing to mask or unmask.

use core::arch::naked_asm;
use core::sync::atomic::{AtomicU64, Ordering};
use kbase::msi::{Allowed, VectorPool};
use spin::Mutex;

pub const VECTOR_BASE: u8 = 48;
pub const VECTORS: usize = 16;

/// Interrupts taken per vector (index: vector - `VECTOR_BASE`).
static COUNTS: [AtomicU64; VECTORS] = [const { AtomicU64::new(0) }; VECTORS];
static POOL: Mutex<VectorPool> = Mutex::new(VectorPool::new(VECTOR_BASE, VECTORS as u8));

/// What the command line lets devices use (`pci=nomsi`, `pci=nomsix`).
static ALLOWED: Mutex<Allowed> = Mutex::new(Allowed::All);

/// Limits message-signalled interrupts as the command line says.
pub fn configure(cmdline: &str) {
    let allowed = Allowed::from_cmdline(cmdline);
    if allowed != Allowed::All {
        log::info!("pci: message-signalled interrupts limited to {allowed:?}");
    }
    *ALLOWED.lock() = allowed;
}

/// Whether a device may use MSI-X (`Allowed::All`) or MSI (`Allowed::Msi`).
pub fn allowed(kind: Allowed) -> bool {
    super::apic::ready() && *ALLOWED.lock() >= kind
}

/// `out.len()` free vectors, all or none; none without a local APIC to
/// deliver them.
pub fn alloc(out: &mut [u8]) -> bool {
    super::apic::ready() && POOL.lock().alloc(out.len(), out).is_some()
}

/// Gives vectors back (a device that could not use them).
pub fn free(vectors: &[u8]) {
    let mut pool = POOL.lock();
    for &v in vectors {
        pool.free(v);
    }
}

/// Interrupts taken on `vector`.
pub fn count(vector: u8) -> u64 {
    let i = usize::from(vector.wrapping_sub(VECTOR_BASE));
    COUNTS.get(i).map_or(0, |c| c.load(Ordering::Relaxed))
}

extern "C" fn dispatch(index: u64) {
    crate::prof::irq_taken();
    if let Some(c) = COUNTS.get(index as usize) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    super::irq::WAKE.store(true, Ordering::Release);
    super::apic::eoi();
}

macro_rules! msi_stub {
    ($name:ident, $i:literal) => {
        /// As `irq.rs`'s stubs: caller-saved registers (no SSE state; see
        /// there), `dispatch(index)` on a 16-byte aligned stack, return.
        #[unsafe(naked)]
        extern "C" fn $name() {
            naked_asm!(
                "push rax", "push rcx", "push rdx", "push rsi", "push rdi",
                "push r8", "push r9", "push r10", "push r11",
                "mov edi, {i}",
                "call {dispatch}",
                "pop r11", "pop r10", "pop r9", "pop r8",
                "pop rdi", "pop rsi", "pop rdx", "pop rcx", "pop rax",
                "iretq",
                i = const $i,
                dispatch = sym dispatch,
            )
        }
    };
}

msi_stub!(m0, 0);
msi_stub!(m1, 1);
msi_stub!(m2, 2);
msi_stub!(m3, 3);
msi_stub!(m4, 4);
msi_stub!(m5, 5);
msi_stub!(m6, 6);
msi_stub!(m7, 7);
msi_stub!(m8, 8);
msi_stub!(m9, 9);
msi_stub!(m10, 10);
msi_stub!(m11, 11);
msi_stub!(m12, 12);
msi_stub!(m13, 13);
msi_stub!(m14, 14);
msi_stub!(m15, 15);

/// Entry points for vectors 48-63.
pub static STUBS: [extern "C" fn(); VECTORS] = [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15];
