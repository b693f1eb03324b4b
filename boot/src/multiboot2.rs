//! The Multiboot2 information structure (Multiboot2 specification 2.0, "Boot
//! information format"), read from a byte slice into [`BootInfo`].
//!
//! The structure is a `total_size`, a reserved word, then tags, each 8-byte
//! aligned: `type`, `size` (header included, padding not), payload; type 0 ends
//! the list. Every length comes from the loader, so every read is bounds-checked
//! and a lie is an [`Error`], never a panic.

use crate::info::{
    BootInfo, CMDLINE_MAX, LOADER_NAME_MAX, MemoryKind, MemoryRegion, Protocol, RSDP_COPY_MAX, Rsdp, printable,
};
use core::ops::Range;
use heapless::{String, Vec};

/// What a Multiboot2 loader leaves in `%eax`.
pub const BOOTLOADER_MAGIC: u32 = 0x36d7_6289;

/// Largest information structure believed; GRUB's are a few KiB.
pub const MAX_TOTAL_SIZE: u32 = 1 << 20;

const TAG_END: u32 = 0;
const TAG_CMDLINE: u32 = 1;
const TAG_LOADER_NAME: u32 = 2;
const TAG_MMAP: u32 = 6;
const TAG_ACPI_OLD: u32 = 14;
const TAG_ACPI_NEW: u32 = 15;

/// The smallest memory-map entry: base (8), length (8), type (4), reserved (4).
const MMAP_ENTRY_MIN: u32 = 24;

/// How the information is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Fewer bytes than the 8-byte fixed part, or than `total_size` says.
    Truncated { have: usize, need: usize },
    /// `total_size` below 8 or above [`MAX_TOTAL_SIZE`].
    BadTotalSize(u32),
    /// A tag's `size` is below its 8-byte header or runs past `total_size`.
    BadTagSize { offset: usize, tag: u32, size: u32 },
    /// The tags run out before the end tag.
    NoEndTag,
    /// The memory-map tag's entry size is too small or not a multiple of 8.
    BadMemoryMapEntrySize(u32),
    /// There is no memory-map tag (type 6).
    NoMemoryMap,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Truncated { have, need } => write!(f, "{have} bytes where {need} are needed"),
            Self::BadTotalSize(n) => write!(f, "total_size {n} out of range"),
            Self::BadTagSize { offset, tag, size } => write!(f, "tag type {tag} at offset {offset}: bad size {size}"),
            Self::NoEndTag => write!(f, "no end tag"),
            Self::BadMemoryMapEntrySize(n) => write!(f, "memory map entry size {n}"),
            Self::NoMemoryMap => write!(f, "no memory map tag"),
        }
    }
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let bytes = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    let bytes = b.get(off..off.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// The `total_size` field: how many bytes the caller must make readable.
pub fn total_size(fixed: &[u8]) -> Result<u32, Error> {
    let size = u32_at(fixed, 0).ok_or(Error::Truncated { have: fixed.len(), need: 8 })?;
    if !(8..=MAX_TOTAL_SIZE).contains(&size) {
        return Err(Error::BadTotalSize(size));
    }
    Ok(size)
}

/// One tag: its type and payload (the bytes after the 8-byte header).
struct Tag<'a> {
    kind: u32,
    payload: &'a [u8],
}

/// Walks the tags up to the end tag.
fn tags(info: &[u8]) -> Result<impl Iterator<Item = Tag<'_>>, Error> {
    let total = total_size(info)? as usize;
    let info = info.get(..total).ok_or(Error::Truncated { have: info.len(), need: total })?;
    // Validate the whole chain first, so the iterator below cannot fail.
    let mut offset = 8;
    let mut ends = None;
    while offset < total {
        let (kind, size) = match (u32_at(info, offset), u32_at(info, offset + 4)) {
            (Some(k), Some(s)) => (k, s),
            _ => return Err(Error::NoEndTag),
        };
        let end = offset.checked_add(size as usize).filter(|&e| size >= 8 && e <= total);
        let Some(end) = end else { return Err(Error::BadTagSize { offset, tag: kind, size }) };
        if kind == TAG_END {
            ends = Some(offset);
            break;
        }
        offset = end.next_multiple_of(8);
    }
    let stop = ends.ok_or(Error::NoEndTag)?;
    let mut offset = 8;
    Ok(core::iter::from_fn(move || {
        if offset >= stop {
            return None;
        }
        // Checked above: the header and payload lie inside `info`.
        let kind = u32_at(info, offset)?;
        let size = u32_at(info, offset + 4)? as usize;
        let payload = info.get(offset + 8..offset + size)?;
        offset = (offset + size).next_multiple_of(8);
        Some(Tag { kind, payload })
    }))
}

/// Copies a NUL-terminated string (or all of `bytes` if it has no NUL).
fn string<const N: usize>(bytes: &[u8]) -> String<N> {
    let mut s = String::new();
    for &b in bytes.iter().take_while(|&&b| b != 0) {
        if s.push(printable(b)).is_err() {
            break;
        }
    }
    s
}

fn memory_map(payload: &[u8]) -> Result<Vec<MemoryRegion, { crate::info::MEMMAP_MAX }>, Error> {
    let entry_size = u32_at(payload, 0).ok_or(Error::Truncated { have: payload.len(), need: 8 })?;
    if entry_size < MMAP_ENTRY_MIN || !entry_size.is_multiple_of(8) {
        return Err(Error::BadMemoryMapEntrySize(entry_size));
    }
    let mut map = Vec::new();
    // A partial entry at the end is ignored: only whole entries are believed.
    for entry in payload.get(8..).unwrap_or(&[]).chunks_exact(entry_size as usize) {
        let (Some(base), Some(len), Some(kind)) = (u64_at(entry, 0), u64_at(entry, 8), u32_at(entry, 16)) else {
            continue;
        };
        let region = MemoryRegion { start: base, end: base.saturating_add(len), kind: MemoryKind::from_e820(kind) };
        if map.push(region).is_err() {
            break;
        }
    }
    Ok(map)
}

/// Reads the information structure `info` (starting with `total_size`) into a
/// [`BootInfo`]; `image` is the loaded image's physical range.
pub fn parse(info: &[u8], image: Range<u64>) -> Result<BootInfo, Error> {
    let mut cmdline = String::<CMDLINE_MAX>::new();
    let mut loader_name = String::<LOADER_NAME_MAX>::new();
    let mut map = None;
    let mut rsdp_old = None;
    let mut rsdp_new = None;
    for tag in tags(info)? {
        match tag.kind {
            TAG_CMDLINE => cmdline = string(tag.payload),
            TAG_LOADER_NAME => loader_name = string(tag.payload),
            TAG_MMAP => map = Some(memory_map(tag.payload)?),
            TAG_ACPI_OLD => rsdp_old = Some(tag.payload),
            TAG_ACPI_NEW => rsdp_new = Some(tag.payload),
            _ => {} // framebuffer, modules, EFI tables...: not used
        }
    }
    // The ACPI 2.0 copy has the XSDT; either is checked by the kernel later.
    let rsdp = rsdp_new.or(rsdp_old).map(|b| Rsdp::Copy(b.iter().copied().take(RSDP_COPY_MAX).collect()));
    Ok(BootInfo {
        protocol: Protocol::Multiboot2,
        loader_name,
        cmdline,
        memory_map: map.ok_or(Error::NoMemoryMap)?,
        image,
        rsdp,
    })
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec as StdVec;

    /// Builds an information structure from (type, payload) tags, end tag added.
    fn blob(tags: &[(u32, StdVec<u8>)]) -> StdVec<u8> {
        let mut b = StdVec::from([0u8; 8]);
        for (kind, payload) in tags.iter().chain([(TAG_END, StdVec::new())].iter()) {
            b.extend_from_slice(&kind.to_le_bytes());
            b.extend_from_slice(&(8 + payload.len() as u32).to_le_bytes());
            b.extend_from_slice(payload);
            while b.len() % 8 != 0 {
                b.push(0);
            }
        }
        let total = b.len() as u32;
        b[..4].copy_from_slice(&total.to_le_bytes());
        b
    }

    fn mmap(entries: &[(u64, u64, u32)], entry_size: u32) -> StdVec<u8> {
        let mut p = StdVec::new();
        p.extend_from_slice(&entry_size.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        for &(base, len, kind) in entries {
            let start = p.len();
            p.extend_from_slice(&base.to_le_bytes());
            p.extend_from_slice(&len.to_le_bytes());
            p.extend_from_slice(&kind.to_le_bytes());
            p.resize(start + entry_size as usize, 0);
        }
        p
    }

    fn grub_like() -> StdVec<u8> {
        let mut rsdp = StdVec::from(*b"RSD PTR ");
        rsdp.resize(20, 0);
        blob(&[
            (TAG_CMDLINE, b"ip=10.0.0.1/24 log=debug\0".to_vec()),
            (TAG_LOADER_NAME, b"GRUB 2.06\0".to_vec()),
            (4, [0u8; 8].to_vec()), // basic meminfo: ignored
            (
                TAG_MMAP,
                mmap(&[(0, 0x9fc00, 1), (0x9fc00, 0x400, 2), (0x100000, 0x7ee0000, 1), (0x7fe0000, 0x20000, 3)], 24),
            ),
            (TAG_ACPI_OLD, rsdp),
        ])
    }

    #[test]
    fn reads_grub_like_information() {
        let info = parse(&grub_like(), 0x100000..0x300000).unwrap();
        assert_eq!(info.protocol, Protocol::Multiboot2);
        assert_eq!(info.cmdline.as_str(), "ip=10.0.0.1/24 log=debug");
        assert_eq!(info.loader_name.as_str(), "GRUB 2.06");
        assert_eq!(info.memory_map.len(), 4);
        assert_eq!(info.memory_map[2], MemoryRegion { start: 0x100000, end: 0x7fe0000, kind: MemoryKind::Usable });
        assert_eq!(info.memory_map[3].kind, MemoryKind::AcpiReclaimable);
        assert_eq!(info.image, 0x100000..0x300000);
        match info.rsdp {
            Some(Rsdp::Copy(b)) => assert!(b.starts_with(b"RSD PTR ") && b.len() == 20),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn prefers_the_acpi2_copy_and_takes_larger_entries() {
        let info = parse(
            &blob(&[
                (TAG_ACPI_NEW, [2u8; 40].to_vec()),
                (TAG_ACPI_OLD, [1u8; 20].to_vec()),
                (TAG_MMAP, mmap(&[(0x100000, 0x1000, 1)], 32)),
            ]),
            0..0,
        )
        .unwrap();
        assert_eq!(info.rsdp, Some(Rsdp::Copy([2u8; RSDP_COPY_MAX].into_iter().collect())));
        assert_eq!(
            info.memory_map.as_slice(),
            &[MemoryRegion { start: 0x100000, end: 0x101000, kind: MemoryKind::Usable }]
        );
        assert!(info.cmdline.is_empty());
    }

    #[test]
    fn unterminated_and_overlong_strings_are_cut() {
        let long = [b'a'; CMDLINE_MAX + 50].to_vec();
        let info = parse(
            &blob(&[(TAG_CMDLINE, long), (TAG_LOADER_NAME, b"x\x01y".to_vec()), (TAG_MMAP, mmap(&[], 24))]),
            0..0,
        )
        .unwrap();
        assert_eq!(info.cmdline.len(), CMDLINE_MAX);
        assert_eq!(info.loader_name.as_str(), "x?y");
    }

    #[test]
    fn malformed_structures_are_errors() {
        let good = grub_like();
        assert_eq!(parse(&good[..3], 0..0).unwrap_err(), Error::Truncated { have: 3, need: 8 });
        assert_eq!(parse(&good[..4], 0..0).unwrap_err(), Error::Truncated { have: 4, need: good.len() });
        // total_size larger than the bytes given.
        assert!(matches!(parse(&good[..good.len() - 8], 0..0), Err(Error::Truncated { .. })));
        // total_size out of range.
        let mut b = good.clone();
        b[..4].copy_from_slice(&4u32.to_le_bytes());
        assert_eq!(parse(&b, 0..0).unwrap_err(), Error::BadTotalSize(4));
        b[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse(&b, 0..0).unwrap_err(), Error::BadTotalSize(u32::MAX));
        // The first tag claims more than there is.
        let mut b = good.clone();
        b[12..16].copy_from_slice(&0x10000u32.to_le_bytes());
        assert!(matches!(parse(&b, 0..0), Err(Error::BadTagSize { offset: 8, tag: TAG_CMDLINE, size: 0x10000 })));
        // A tag smaller than its header.
        b[12..16].copy_from_slice(&4u32.to_le_bytes());
        assert!(matches!(parse(&b, 0..0), Err(Error::BadTagSize { size: 4, .. })));
        // total_size cut before the end tag.
        let mut b = good.clone();
        let cut = (good.len() - 8) as u32;
        b[..4].copy_from_slice(&cut.to_le_bytes());
        assert_eq!(parse(&b, 0..0).unwrap_err(), Error::NoEndTag);
        // No memory map.
        assert_eq!(parse(&blob(&[(TAG_CMDLINE, b"x\0".to_vec())]), 0..0).unwrap_err(), Error::NoMemoryMap);
        // Memory-map entry sizes that cannot hold an entry.
        for size in [0, 16, 25] {
            let b = blob(&[(TAG_MMAP, mmap(&[], size.max(24)))]);
            let mut b = b;
            b[16..20].copy_from_slice(&size.to_le_bytes());
            assert_eq!(parse(&b, 0..0).unwrap_err(), Error::BadMemoryMapEntrySize(size));
        }
        // A memory-map tag too short for its own header.
        assert!(matches!(parse(&blob(&[(TAG_MMAP, [24u8, 0].to_vec())]), 0..0), Err(Error::Truncated { .. })));
    }

    #[test]
    fn a_partial_memory_map_entry_is_dropped() {
        let mut payload = mmap(&[(0x100000, 0x1000, 1), (0x200000, 0x1000, 1)], 24);
        payload.truncate(payload.len() - 5);
        let info = parse(&blob(&[(TAG_MMAP, payload)]), 0..0).unwrap();
        assert_eq!(info.memory_map.len(), 1);
    }

    #[test]
    fn never_panics_on_any_truncation_or_corruption() {
        let good = grub_like();
        for len in 0..good.len() {
            let _ = parse(&good[..len], 0..0);
        }
        for i in 0..good.len() {
            for v in [0u8, 1, 7, 8, 0x7f, 0xff] {
                let mut b = good.clone();
                b[i] = v;
                let _ = parse(&b, 0..0);
            }
        }
    }
}
