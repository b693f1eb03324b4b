//! ACPI pieces the kernel reads itself, safely over byte slices: the RSDP (and
//! the BIOS-area search for it) and the `_S5_` sleep type in the DSDT's AML.
//! The tables themselves (FADT, MADT, MCFG) are read with the `acpi` crate.

pub mod rsdp;
pub mod s5;

pub use rsdp::{Rsdp, RsdpError};
pub use s5::{S5Error, SleepType};

/// PM1 control register bits (ACPI 6.5 section 4.8.3.2.1): SLP_TYPx, SLP_EN.
const SLP_TYP_SHIFT: u16 = 10;
const SLP_EN: u16 = 1 << 13;

/// The value written to a PM1x control register to enter sleep type `typ`.
pub fn pm1_sleep_value(typ: u8) -> u16 {
    (u16::from(typ & 7) << SLP_TYP_SHIFT) | SLP_EN
}

#[cfg(test)]
mod tests {
    #[test]
    fn sleep_values() {
        assert_eq!(super::pm1_sleep_value(0), 0x2000);
        assert_eq!(super::pm1_sleep_value(5), 0x3400);
        assert_eq!(super::pm1_sleep_value(7), 0x3c00);
    }
}
