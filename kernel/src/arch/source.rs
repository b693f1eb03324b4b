//! Where a device's interrupts come from: a PIC line (INTx, level: masked
//! by its handler until the device is acknowledged) or message vectors
//! (MSI, MSI-X: edge, nothing to unmask). The poll loop asks a source only
//! whether it fired since the last look.

use core::fmt;

/// MSI-X vectors a source may hold (the 82574 has five table entries).
pub const MAX_VECTORS: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqSource {
    /// A legacy line through the 8259s.
    Line(u8),
    /// One MSI vector.
    Msi(u8),
    /// MSI-X vectors, `n` of them used.
    MsiX { vectors: [u8; MAX_VECTORS], n: u8 },
}

impl IrqSource {
    /// MSI-X over `vectors` (at most [`MAX_VECTORS`]; the rest ignored).
    pub fn msix(vectors: &[u8]) -> Self {
        let mut v = [0; MAX_VECTORS];
        let n = vectors.len().min(MAX_VECTORS);
        v[..n].copy_from_slice(&vectors[..n]);
        IrqSource::MsiX { vectors: v, n: n as u8 }
    }

    fn vectors(&self) -> &[u8] {
        match self {
            IrqSource::Line(_) => &[],
            IrqSource::Msi(v) => core::slice::from_ref(v),
            IrqSource::MsiX { vectors, n } => vectors.get(..usize::from(*n)).unwrap_or(vectors),
        }
    }

    /// Interrupts taken so far, over all its vectors.
    pub fn count(&self) -> u64 {
        match self {
            IrqSource::Line(l) => super::irq::count(*l),
            _ => self.vectors().iter().map(|&v| super::msi::count(v)).sum(),
        }
    }

    /// The PIC line, for a legacy source.
    pub fn line(&self) -> Option<u8> {
        match self {
            IrqSource::Line(l) => Some(*l),
            _ => None,
        }
    }

    /// Lets interrupts through: a level line unmasked at the PIC; the
    /// vectors' IDT gates are always present.
    pub fn enable(&self) {
        if let IrqSource::Line(l) = self {
            super::irq::enable_level(*l);
        }
    }
}

/// `irq 11`, `irq msi 48`, `irq msix 48-50`: the boot log's words.
impl fmt::Display for IrqSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IrqSource::Line(l) => write!(f, "irq {l}"),
            IrqSource::Msi(v) => write!(f, "irq msi {v}"),
            IrqSource::MsiX { .. } => {
                let v = self.vectors();
                match (v.first(), v.last()) {
                    (Some(a), Some(b)) if a != b => write!(f, "irq msix {a}-{b}"),
                    (Some(a), _) => write!(f, "irq msix {a}"),
                    _ => write!(f, "irq msix"),
                }
            }
        }
    }
}
