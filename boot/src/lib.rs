//! How the appliance image starts: the PVH and Multiboot2 entries and the shared
//! 32->64-bit trampoline (the only boot assembly) and the typed [`BootInfo`] the
//! kernel receives, whichever loader started it.
//!
//! The kernel names its entry function with [`entry_point!`]; the trampoline calls
//! it with the boot information already copied out of loader memory, so nothing the
//! kernel later reuses as free RAM can pull the rug from under it.
#![no_std]

mod info;
pub mod multiboot2;

pub use info::{BootError, BootInfo, MemoryKind, MemoryRegion, Protocol, Rsdp};

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

/// Called by the trampoline in long mode, on the boot stack, with the first
/// 4 GiB identity-mapped: `info_paddr` is the PVH `hvm_start_info` when
/// `loader_magic` is 0 (the PVH entry), the Multiboot2 information when it is
/// Multiboot2's magic (what the loader left in `%eax`).
#[cfg(target_os = "none")]
#[unsafe(no_mangle)]
extern "C" fn boot_rust_entry(info_paddr: u32, loader_magic: u32) -> ! {
    let image = core::ops::Range {
        start: core::ptr::addr_of!(__image_start) as u64,
        end: core::ptr::addr_of!(__image_end) as u64,
    };
    let info = match loader_magic {
        // SAFETY: the loader put `hvm_start_info` at this address and nothing has
        // written memory since; the first 4 GiB, where QEMU places it, is identity-mapped.
        0 => unsafe { info::from_pvh(info_paddr as usize, image) },
        // SAFETY: as above, for the Multiboot2 information (32-bit address, so
        // identity-mapped).
        multiboot2::BOOTLOADER_MAGIC => unsafe { from_multiboot2(info_paddr as usize, image) },
        other => Err(BootError::BadMagic(other)),
    };
    // SAFETY: `entry_point!` in the kernel defines this symbol with this signature.
    unsafe { boot_kernel_main(info) }
}

/// Reads the Multiboot2 information at `paddr`: its fixed part says how many
/// bytes to take, and the safe parser checks everything within them.
///
/// # Safety
/// `paddr` must be the identity-mapped address the loader passed in `%ebx`.
#[cfg(target_os = "none")]
unsafe fn from_multiboot2(paddr: usize, image: core::ops::Range<u64>) -> BootResult {
    // SAFETY: the loader guarantees the 8-byte fixed part at `paddr`.
    let fixed = unsafe { core::slice::from_raw_parts(paddr as *const u8, 8) };
    let total = multiboot2::total_size(fixed).map_err(BootError::Multiboot2)?;
    // SAFETY: the structure is `total` bytes long (bounded by MAX_TOTAL_SIZE),
    // below 4 GiB and not written by anyone while we read it.
    let bytes = unsafe { core::slice::from_raw_parts(paddr as *const u8, total as usize) };
    multiboot2::parse(bytes, image).map_err(BootError::Multiboot2)
}
