//! How the appliance image starts: the PVH entry and 32->64-bit trampoline (the
//! only boot assembly) and the typed [`BootInfo`] the kernel receives.
//!
//! The kernel names its entry function with [`entry_point!`]; the trampoline calls
//! it with the boot information already copied out of loader memory, so nothing the
//! kernel later reuses as free RAM can pull the rug from under it.
#![no_std]

mod info;

pub use info::{BootError, BootInfo, MemoryKind, MemoryRegion};

#[cfg(target_os = "none")]
core::arch::global_asm!(include_str!("entry.S"), options(att_syntax));

/// What the kernel's entry function receives.
pub type BootResult = Result<BootInfo, BootError>;

/// Declares the kernel's entry function: `fn(boot::BootResult) -> !`.
#[macro_export]
macro_rules! entry_point {
    ($path:path) => {
        #[unsafe(export_name = "boot_kernel_main")]
        extern "Rust" fn __boot_kernel_main(info: $crate::BootResult) -> ! {
            let entry: fn($crate::BootResult) -> ! = $path;
            entry(info)
        }
    };
}

#[cfg(target_os = "none")]
unsafe extern "Rust" {
    fn boot_kernel_main(info: BootResult) -> !;
}

#[cfg(target_os = "none")]
unsafe extern "C" {
    static __image_start: u8;
    static __image_end: u8;
    static boot_stack_bottom: u8;
}

/// Lowest address of the boot stack, which the kernel keeps running on; the
/// kernel unmaps its lowest page as a guard.
#[cfg(target_os = "none")]
pub fn stack_bottom() -> u64 {
    core::ptr::addr_of!(boot_stack_bottom) as u64
}

/// Called by the trampoline in long mode with the physical address of the PVH
/// `hvm_start_info`, on the boot stack, with the first 4 GiB identity-mapped.
#[cfg(target_os = "none")]
#[unsafe(no_mangle)]
extern "C" fn boot_rust_entry(start_info_paddr: u32) -> ! {
    let image = core::ops::Range {
        start: core::ptr::addr_of!(__image_start) as u64,
        end: core::ptr::addr_of!(__image_end) as u64,
    };
    // SAFETY: the loader put `hvm_start_info` at this address and nothing has
    // written memory since; the first 4 GiB, where QEMU places it, is identity-mapped.
    let info = unsafe { info::from_pvh(start_info_paddr as usize, image) };
    // SAFETY: `entry_point!` in the kernel defines this symbol with this signature.
    unsafe { boot_kernel_main(info) }
}
