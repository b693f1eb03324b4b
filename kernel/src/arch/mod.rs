//! x86-64 specifics: descriptor tables, exception reporting, the legacy interrupt
//! controller, SSE for the ICRC and leaving QEMU.

pub mod crc;
pub mod entropy;
pub mod exceptions;
pub mod exit;
pub mod gdt;
pub mod idt;
pub mod irq;
pub mod sse;
