//! The S5 (soft-off) sleep type: the `_S5_` package in the DSDT's AML
//! (ACPI 6.5 section 7.4.2), found by a small scanner instead of an AML
//! interpreter. The object is a named package of integers whose first two
//! elements are SLP_TYPa and SLP_TYPb:
//!
//! ```text
//! NameOp(0x08) ['\'] "_S5_" PackageOp(0x12) PkgLength NumElements Integer...
//! ```

const NAME_OP: u8 = 0x08;
const ROOT_CHAR: u8 = b'\\';
const PACKAGE_OP: u8 = 0x12;
const ZERO_OP: u8 = 0x00;
const ONE_OP: u8 = 0x01;
const BYTE_PREFIX: u8 = 0x0a;
const WORD_PREFIX: u8 = 0x0b;
const DWORD_PREFIX: u8 = 0x0c;
const QWORD_PREFIX: u8 = 0x0e;

/// The sleep types to write to PM1a_CNT and PM1b_CNT for S5.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SleepType {
    pub a: u8,
    pub b: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum S5Error {
    /// No `Name (_S5_, Package ...)` in the AML.
    NotFound,
    /// A `_S5_` package whose contents cannot be read (offset of the name).
    Malformed(usize),
    /// A sleep type that does not fit SLP_TYPx's three bits.
    OutOfRange(u64),
}

impl core::fmt::Display for S5Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NotFound => write!(f, "no _S5_ package in the DSDT"),
            Self::Malformed(at) => write!(f, "unreadable _S5_ package at DSDT offset {at:#x}"),
            Self::OutOfRange(v) => write!(f, "_S5_ sleep type {v:#x} does not fit 3 bits"),
        }
    }
}

/// Finds the first well-formed `_S5_` package in `aml` (a whole DSDT or its AML).
pub fn find(aml: &[u8]) -> Result<SleepType, S5Error> {
    let mut first_error = None;
    for at in (0..aml.len().saturating_sub(3)).filter(|&i| &aml[i..i + 4] == b"_S5_") {
        let named = match at.checked_sub(1).map(|i| aml[i]) {
            Some(NAME_OP) => true,
            Some(ROOT_CHAR) => at.checked_sub(2).map(|i| aml[i]) == Some(NAME_OP),
            _ => false,
        };
        if !named {
            continue; // a reference to _S5_, or bytes that happen to spell it
        }
        match package(&aml[at + 4..]) {
            Some(Ok(t)) => return Ok(t),
            Some(Err(e)) => return Err(e),
            None => {
                first_error.get_or_insert(S5Error::Malformed(at));
            }
        }
    }
    Err(first_error.unwrap_or(S5Error::NotFound))
}

/// Reads `PackageOp PkgLength NumElements Integer Integer?`; `None` when the
/// bytes are not such a package.
fn package(b: &[u8]) -> Option<Result<SleepType, S5Error>> {
    if *b.first()? != PACKAGE_OP {
        return None;
    }
    let lead = *b.get(1)?;
    // PkgLength: bits 7-6 of the lead byte count the bytes that follow it.
    let follow = usize::from(lead >> 6);
    let mut len = if follow == 0 { usize::from(lead & 0x3f) } else { usize::from(lead & 0x0f) };
    for i in 0..follow {
        len |= usize::from(*b.get(2 + i)?) << (4 + 8 * i);
    }
    // The package's bytes, from PkgLength on, must be present.
    let body = b.get(1..1 + len)?;
    let mut rest = body.get(1 + follow..)?;
    let count = *rest.first()?;
    rest = &rest[1..];
    if count == 0 {
        return None;
    }
    let (a, n) = integer(rest)?;
    let b_typ = if count >= 2 { integer(&rest[n..])?.0 } else { a };
    for v in [a, b_typ] {
        if v > 7 {
            return Some(Err(S5Error::OutOfRange(v)));
        }
    }
    Some(Ok(SleepType { a: a as u8, b: b_typ as u8 }))
}

/// An AML integer constant and how many bytes it took.
fn integer(b: &[u8]) -> Option<(u64, usize)> {
    let le = |n: usize| -> Option<(u64, usize)> {
        let bytes = b.get(1..1 + n)?;
        Some((bytes.iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x)), 1 + n))
    };
    match *b.first()? {
        ZERO_OP => Some((0, 1)),
        ONE_OP => Some((1, 1)),
        BYTE_PREFIX => le(1),
        WORD_PREFIX => le(2),
        DWORD_PREFIX => le(4),
        QWORD_PREFIX => le(8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// Some AML around `body`, as a DSDT would have it.
    fn dsdt(body: &[u8]) -> Vec<u8> {
        let mut b = Vec::from(*b"DSDT\x40\x00\x00\x00\x01\x00BOCHS BXPC    ");
        b.resize(36, 0);
        // Scope (\_SB) { Name (XS5_, 1) } and a reference to _S5_ in a method call.
        b.extend_from_slice(&[0x10, 0x0b, b'\\', b'_', b'S', b'B', b'_', 0x08, b'X', b'S', b'5', b'_', 0x01]);
        b.extend_from_slice(&[0x70, b'_', b'S', b'5', b'_', 0x60]);
        b.extend_from_slice(body);
        b.extend_from_slice(&[0x14, 0x08, b'_', b'P', b'T', b'S', 0x01, 0xa3]);
        b
    }

    #[test]
    fn zero_ops_as_qemu_writes_them() {
        // Name (_S5_, Package (4) { 0, 0, 0, 0 })
        let aml = dsdt(&[0x08, b'_', b'S', b'5', b'_', 0x12, 0x06, 0x04, 0x00, 0x00, 0x00, 0x00]);
        assert_eq!(find(&aml), Ok(SleepType { a: 0, b: 0 }));
    }

    #[test]
    fn byte_prefixed_rooted_and_long_pkglength() {
        // Name (\_S5_, Package (2) { 0x05, 0x07 }), PkgLength in two bytes.
        let aml = dsdt(&[
            0x08, b'\\', b'_', b'S', b'5', b'_', 0x12, 0x47, 0x00, 0x02, 0x0a, 0x05, 0x0a, 0x07, 0, 0, 0, 0, 0, 0,
        ]);
        // 0x47 0x00: one following byte, length 7 (lead's low nibble) | 0 << 4.
        assert_eq!(find(&aml), Ok(SleepType { a: 5, b: 7 }));
        // One element: used for both registers; word and dword prefixes.
        let aml = dsdt(&[0x08, b'_', b'S', b'5', b'_', 0x12, 0x05, 0x01, 0x0b, 0x06, 0x00]);
        assert_eq!(find(&aml), Ok(SleepType { a: 6, b: 6 }));
        let aml = dsdt(&[0x08, b'_', b'S', b'5', b'_', 0x12, 0x08, 0x02, 0x01, 0x0c, 0x03, 0, 0, 0]);
        assert_eq!(find(&aml), Ok(SleepType { a: 1, b: 3 }));
    }

    #[test]
    fn missing_malformed_and_out_of_range() {
        assert_eq!(find(&dsdt(&[])), Err(S5Error::NotFound));
        assert_eq!(find(&[]), Err(S5Error::NotFound));
        assert_eq!(find(b"_S5"), Err(S5Error::NotFound));
        // Truncated inside the package.
        let mut cut = dsdt(&[]);
        let at = cut.len() + 1;
        cut.extend_from_slice(&[0x08, b'_', b'S', b'5', b'_', 0x12, 0x06, 0x04, 0x0a]);
        assert_eq!(find(&cut), Err(S5Error::Malformed(at)));
        // A name that is not a package (Name (_S5_, 5)).
        assert!(matches!(find(&dsdt(&[0x08, b'_', b'S', b'5', b'_', 0x0a, 0x05])), Err(S5Error::Malformed(_))));
        // An empty package, and a value past three bits.
        assert!(matches!(find(&dsdt(&[0x08, b'_', b'S', b'5', b'_', 0x12, 0x02, 0x00])), Err(S5Error::Malformed(_))));
        assert_eq!(
            find(&dsdt(&[0x08, b'_', b'S', b'5', b'_', 0x12, 0x05, 0x02, 0x0a, 0x09, 0x00])),
            Err(S5Error::OutOfRange(9))
        );
    }

    #[test]
    fn never_panics_on_any_prefix_or_corruption() {
        let good = dsdt(&[0x08, b'_', b'S', b'5', b'_', 0x12, 0x47, 0x00, 0x02, 0x0a, 0x05, 0x0a, 0x07, 0, 0, 0, 0, 0]);
        for len in 0..=good.len() {
            let _ = find(&good[..len]);
        }
        for i in 0..good.len() {
            for v in [0u8, 0x08, 0x12, 0x5c, 0x3f, 0x7f, 0xc0, 0xff] {
                let mut b = good.clone();
                b[i] = v;
                let _ = find(&b);
            }
        }
    }
}
