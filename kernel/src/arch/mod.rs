//! x86-64 specifics: descriptor tables, exception reporting, the legacy interrupt
//! controller, the local APIC and message-signalled interrupt vectors, SSE for
//! the ICRC and leaving QEMU.

pub mod apic;
pub mod crc;
pub mod entropy;
pub mod exceptions;
pub mod exit;
pub mod gdt;
pub mod idt;
pub mod irq;
pub mod msi;
pub mod source;
pub mod sse;
