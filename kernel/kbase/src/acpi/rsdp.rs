//! The Root System Description Pointer (ACPI 6.5 section 5.2.5): where the
//! RSDT/XSDT is, checked by its checksums, and the BIOS-area search for it.

/// The RSDP's signature, at a 16-byte boundary.
pub const SIGNATURE: &[u8; 8] = b"RSD PTR ";
/// ACPI 1.0's RSDP length (checksummed by the first checksum).
const V1_LEN: usize = 20;
/// ACPI 2.0's RSDP length.
const V2_LEN: usize = 36;

/// What the RSDP says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rsdp {
    pub revision: u8,
    pub rsdt: u32,
    /// The XSDT (ACPI 2.0+), when non-zero.
    pub xsdt: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RsdpError {
    TooShort(usize),
    BadSignature,
    BadChecksum,
    BadExtendedChecksum,
    /// Neither an RSDT nor an XSDT address.
    NoRootTable,
}

impl core::fmt::Display for RsdpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::TooShort(n) => write!(f, "RSDP of {n} bytes"),
            Self::BadSignature => write!(f, "no RSDP signature"),
            Self::BadChecksum => write!(f, "bad RSDP checksum"),
            Self::BadExtendedChecksum => write!(f, "bad RSDP extended checksum"),
            Self::NoRootTable => write!(f, "RSDP names no RSDT or XSDT"),
        }
    }
}

fn sums_to_zero(b: &[u8]) -> bool {
    b.iter().fold(0u8, |s, &x| s.wrapping_add(x)) == 0
}

impl Rsdp {
    /// Checks and reads an RSDP from its first bytes (20 for revision 0, 36 after).
    pub fn parse(b: &[u8]) -> Result<Self, RsdpError> {
        let v1 = b.get(..V1_LEN).ok_or(RsdpError::TooShort(b.len()))?;
        if &v1[..8] != SIGNATURE {
            return Err(RsdpError::BadSignature);
        }
        if !sums_to_zero(v1) {
            return Err(RsdpError::BadChecksum);
        }
        let revision = v1[15];
        let rsdt = u32::from_le_bytes([v1[16], v1[17], v1[18], v1[19]]);
        let mut xsdt = None;
        if revision >= 2 {
            let v2 = b.get(..V2_LEN).ok_or(RsdpError::TooShort(b.len()))?;
            if !sums_to_zero(v2) {
                return Err(RsdpError::BadExtendedChecksum);
            }
            let mut x = [0u8; 8];
            x.copy_from_slice(&v2[24..32]);
            xsdt = Some(u64::from_le_bytes(x)).filter(|&a| a != 0);
        }
        if rsdt == 0 && xsdt.is_none() {
            return Err(RsdpError::NoRootTable);
        }
        Ok(Rsdp { revision, rsdt, xsdt })
    }

    /// The root table to read: the XSDT when there is one (revision 2+, as the
    /// `acpi` crate's `from_rsdt` wants it), else the RSDT (revision 0).
    pub fn root_table(&self) -> (u8, u64) {
        match self.xsdt {
            Some(x) => (self.revision.max(2), x),
            None => (0, u64::from(self.rsdt)),
        }
    }
}

/// Searches `area` (e.g. the EBDA's first KiB or 0xE0000..0x100000) at 16-byte
/// boundaries for a valid RSDP; returns its offset in `area` and its contents.
pub fn search(area: &[u8]) -> Option<(usize, Rsdp)> {
    (0..area.len()).step_by(16).find_map(|off| Rsdp::parse(&area[off..]).ok().map(|r| (off, r)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// An RSDP of `revision` with valid checksums.
    pub(crate) fn rsdp(revision: u8, rsdt: u32, xsdt: u64) -> Vec<u8> {
        let mut b = Vec::from(*SIGNATURE);
        b.push(0);
        b.extend_from_slice(b"BOCHS ");
        b.push(revision);
        b.extend_from_slice(&rsdt.to_le_bytes());
        b[8] = 0u8.wrapping_sub(b.iter().fold(0u8, |s, &x| s.wrapping_add(x)));
        if revision >= 2 {
            b.extend_from_slice(&36u32.to_le_bytes());
            b.extend_from_slice(&xsdt.to_le_bytes());
            b.extend_from_slice(&[0; 4]);
            b[32] = 0u8.wrapping_sub(b.iter().fold(0u8, |s, &x| s.wrapping_add(x)));
        }
        b
    }

    #[test]
    fn reads_both_revisions() {
        let r = Rsdp::parse(&rsdp(0, 0x7fe1234, 0)).unwrap();
        assert_eq!(r, Rsdp { revision: 0, rsdt: 0x7fe1234, xsdt: None });
        assert_eq!(r.root_table(), (0, 0x7fe1234));
        let r = Rsdp::parse(&rsdp(2, 0x7fe1234, 0x7fe5678)).unwrap();
        assert_eq!(r.xsdt, Some(0x7fe5678));
        assert_eq!(r.root_table(), (2, 0x7fe5678));
        // Revision 2 with a zero XSDT falls back to the RSDT.
        assert_eq!(Rsdp::parse(&rsdp(2, 0x1000, 0)).unwrap().root_table(), (0, 0x1000));
    }

    #[test]
    fn rejects_bad_ones() {
        let good = rsdp(2, 0x1000, 0x2000);
        assert_eq!(Rsdp::parse(&good[..19]), Err(RsdpError::TooShort(19)));
        assert_eq!(Rsdp::parse(&good[..30]), Err(RsdpError::TooShort(30)));
        let mut b = good.clone();
        b[0] = b'X';
        assert_eq!(Rsdp::parse(&b), Err(RsdpError::BadSignature));
        let mut b = good.clone();
        b[16] ^= 1;
        assert_eq!(Rsdp::parse(&b), Err(RsdpError::BadChecksum));
        let mut b = good.clone();
        b[24] ^= 1;
        assert_eq!(Rsdp::parse(&b), Err(RsdpError::BadExtendedChecksum));
        assert_eq!(Rsdp::parse(&rsdp(0, 0, 0)), Err(RsdpError::NoRootTable));
    }

    #[test]
    fn search_finds_only_aligned_valid_ones() {
        let mut area = alloc::vec![0u8; 0x400];
        // A bad-checksum decoy first, a misaligned copy, then the real one.
        let mut decoy = rsdp(0, 0x1000, 0);
        decoy[16] ^= 0xff;
        area[0x10..0x10 + 20].copy_from_slice(&decoy);
        area[0x48..0x48 + 20].copy_from_slice(&rsdp(0, 0x2000, 0));
        area[0x100..0x100 + 36].copy_from_slice(&rsdp(2, 0x3000, 0x4000));
        assert_eq!(search(&area), Some((0x100, Rsdp { revision: 2, rsdt: 0x3000, xsdt: Some(0x4000) })));
        // One cut by the end of the area is not found.
        let tail = area.len() - 16;
        let mut area2 = alloc::vec![0u8; 0x400];
        area2[tail..].copy_from_slice(&rsdp(0, 0x1000, 0)[..16]);
        assert_eq!(search(&area2), None);
        assert_eq!(search(&[]), None);
    }
}
