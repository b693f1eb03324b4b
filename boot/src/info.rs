//! The boot information, copied out of the PVH `hvm_start_info` structure
//! (Xen's `arch-x86/hvm/start_info.h`, version 1) or the Multiboot2 information
//! (see `multiboot2.rs`) into owned, typed values.

use core::ops::Range;
use heapless::{String, Vec};

/// Longest kernel command line kept; the rest is cut.
pub const CMDLINE_MAX: usize = 1024;
/// Most memory-map entries kept (QEMU gives fewer than ten, UEFI firmware
/// through GRUB a few dozen).
pub const MEMMAP_MAX: usize = 128;
/// Longest RSDP a Multiboot2 loader copies (ACPI 2.0+: 36 bytes).
pub const RSDP_COPY_MAX: usize = 36;
/// Longest boot loader name kept.
pub const LOADER_NAME_MAX: usize = 64;

#[cfg(target_os = "none")]
const PVH_MAGIC: u32 = 0x336e_c578;

/// What a region of physical memory is, as the firmware's e820 map says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    Usable,
    Reserved,
    AcpiReclaimable,
    AcpiNvs,
    Unusable,
    Other(u32),
}

impl MemoryKind {
    pub(crate) fn from_e820(kind: u32) -> Self {
        match kind {
            1 => Self::Usable,
            2 => Self::Reserved,
            3 => Self::AcpiReclaimable,
            4 => Self::AcpiNvs,
            5 => Self::Unusable,
            other => Self::Other(other),
        }
    }
}

/// One memory-map entry: physical `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryRegion {
    pub start: u64,
    pub end: u64,
    pub kind: MemoryKind,
}

/// Which boot protocol started the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// QEMU's `-kernel` (the PVH ELF note).
    Pvh,
    /// A Multiboot2 loader (GRUB from the ISO).
    Multiboot2,
}

/// Where the ACPI root (RSDP) is, as the loader told it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rsdp {
    /// Its physical address (PVH's `rsdp_paddr`).
    Address(u64),
    /// A copy of the structure itself (Multiboot2 tags 14 and 15), unchecked.
    Copy(Vec<u8, RSDP_COPY_MAX>),
}

/// Everything the kernel learns from the loader.
#[derive(Debug)]
pub struct BootInfo {
    pub protocol: Protocol,
    /// The loader's name (Multiboot2 tag 2), when it gave one.
    pub loader_name: String<LOADER_NAME_MAX>,
    /// The `-append` command line (non-ASCII bytes replaced by `?`).
    pub cmdline: String<CMDLINE_MAX>,
    /// The e820 memory map, in the loader's order.
    pub memory_map: Vec<MemoryRegion, MEMMAP_MAX>,
    /// Physical range of the loaded image (code, data, bss and boot stack).
    pub image: Range<u64>,
    /// The ACPI RSDP, when the loader gave one (else the kernel scans the BIOS area).
    pub rsdp: Option<Rsdp>,
}

/// Why the boot information could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootError {
    /// The structure at the given address does not carry the PVH magic.
    BadMagic(u32),
    /// Version 0 of the structure has no memory map.
    NoMemoryMap { version: u32 },
    /// The Multiboot2 information is malformed.
    Multiboot2(crate::multiboot2::Error),
}

impl core::fmt::Display for BootError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::BadMagic(m) => write!(f, "not a PVH start_info (magic {m:#x})"),
            Self::NoMemoryMap { version } => {
                write!(f, "PVH start_info version {version} has no memory map")
            }
            Self::Multiboot2(e) => write!(f, "bad Multiboot2 information: {e}"),
        }
    }
}

/// Reads and copies the `hvm_start_info` at `paddr`.
///
/// # Safety
/// `paddr` must be the identity-mapped address the PVH loader passed in `%ebx`,
/// with the structure, its command line and memory map still intact.
#[cfg(target_os = "none")]
pub(crate) unsafe fn from_pvh(paddr: usize, image: Range<u64>) -> Result<BootInfo, BootError> {
    use core::ptr::read_unaligned as read;
    let base = paddr as *const u8;
    // SAFETY: the caller vouches for the structure at `paddr`; these are the
    // offsets of hvm_start_info v1's magic and version fields.
    let (magic, version) = unsafe { (read(base as *const u32), read(base.add(4) as *const u32)) };
    if magic != PVH_MAGIC {
        return Err(BootError::BadMagic(magic));
    }
    if version < 1 {
        return Err(BootError::NoMemoryMap { version });
    }
    // SAFETY: a version-1 structure (checked above) has these fields at these
    // offsets: cmdline_paddr, rsdp_paddr, memmap_paddr, memmap_entries.
    let (cmdline_paddr, rsdp, memmap_paddr, memmap_entries) = unsafe {
        (
            read(base.add(24) as *const u64),
            read(base.add(32) as *const u64),
            read(base.add(40) as *const u64),
            read(base.add(48) as *const u32),
        )
    };

    let mut cmdline = String::new();
    if cmdline_paddr != 0 {
        let s = cmdline_paddr as *const u8;
        for i in 0..CMDLINE_MAX {
            // SAFETY: the loader put a NUL-terminated string here; we stop at
            // the NUL or after CMDLINE_MAX bytes, whichever comes first.
            let b = unsafe { s.add(i).read() };
            if b == 0 || cmdline.push(printable(b)).is_err() {
                break;
            }
        }
    }

    let mut memory_map = Vec::new();
    for i in 0..memmap_entries as usize {
        let e = (memmap_paddr as usize + i * 24) as *const u8;
        // SAFETY: entry `i` < memmap_entries of the loader's table of 24-byte
        // hvm_memmap_table_entry records (addr, size, type).
        let (addr, size, kind) =
            unsafe { (read(e as *const u64), read(e.add(8) as *const u64), read(e.add(16) as *const u32)) };
        let region = MemoryRegion { start: addr, end: addr.saturating_add(size), kind: MemoryKind::from_e820(kind) };
        if memory_map.push(region).is_err() {
            break;
        }
    }
    Ok(BootInfo {
        protocol: Protocol::Pvh,
        loader_name: String::new(),
        cmdline,
        memory_map,
        image,
        rsdp: (rsdp != 0).then_some(Rsdp::Address(rsdp)),
    })
}

pub(crate) fn printable(b: u8) -> char {
    if b.is_ascii() && !b.is_ascii_control() { b as char } else { '?' }
}
