//! PCI configuration access: through the PCIe ECAM windows the ACPI MCFG
//! names (q35), else through I/O ports 0xCF8/0xCFC (mechanism #1, i440fx);
//! the list of functions found at boot; switching a function to MSI or
//! MSI-X, aimed at this CPU's local APIC.

use crate::mem::paging::{Caching, map_device};
use alloc::vec::Vec;
use kbase::msi::{self, Message};
use kbase::pci::{Bar, Bdf, Capability, ConfigAccess, Ecam, Function};
use spin::{Mutex, Once};
use x86_64::instructions::port::Port;

/// Configuration access: ECAM where a window covers the function, else
/// mechanism #1, whose address/data pair must not interleave, hence the lock.
pub struct PortConfig {
    lock: Mutex<()>,
    ecam: Once<Vec<Ecam>>,
}

pub static CONFIG: PortConfig = PortConfig { lock: Mutex::new(()), ecam: Once::new() };

impl PortConfig {
    /// The ECAM address of a dword, when a mapped window covers `bdf`.
    fn ecam_address(&self, bdf: Bdf, offset: u8) -> Option<u64> {
        self.ecam.get()?.iter().find_map(|e| e.address(bdf, offset))
    }
}

/// Maps the MCFG's ECAM windows (uncached) and uses them from now on.
fn use_ecam(windows: &[Ecam]) {
    let mapped = windows
        .iter()
        .filter(|e| match map_device(e.base, e.size(), Caching::Uncached) {
            Ok(()) => true,
            Err(err) => {
                log::warn!("cannot map ECAM {:#x}+{:#x}: {err:?}", e.base, e.size());
                false
            }
        })
        .copied()
        .collect();
    CONFIG.ecam.call_once(|| mapped);
}

static FUNCTIONS: Once<Vec<Function>> = Once::new();

fn address(bdf: Bdf, offset: u8) -> u32 {
    0x8000_0000
        | u32::from(bdf.bus) << 16
        | u32::from(bdf.device & 31) << 11
        | u32::from(bdf.function & 7) << 8
        | u32::from(offset & 0xfc)
}

impl ConfigAccess for PortConfig {
    fn read32(&self, bdf: Bdf, offset: u8) -> u32 {
        if let Some(addr) = self.ecam_address(bdf, offset) {
            // SAFETY: inside an ECAM window mapped uncached by `use_ecam`; a
            // configuration read has no side effect on memory.
            return unsafe { core::ptr::read_volatile(addr as *const u32) };
        }
        let _g = self.lock.lock();
        // SAFETY: 0xCF8/0xCFC are the PCI configuration ports; a read of a
        // configuration register has no side effect on memory.
        unsafe {
            Port::<u32>::new(0xcf8).write(address(bdf, offset));
            Port::<u32>::new(0xcfc).read()
        }
    }

    fn write32(&self, bdf: Bdf, offset: u8, value: u32) {
        if let Some(addr) = self.ecam_address(bdf, offset) {
            // SAFETY: as for `read32`; callers only write registers they own.
            unsafe { core::ptr::write_volatile(addr as *mut u32, value) };
            return;
        }
        let _g = self.lock.lock();
        // SAFETY: as for `read32`; callers only write registers they own
        // (BAR probes restore the value, drivers set up their own device).
        unsafe {
            Port::<u32>::new(0xcf8).write(address(bdf, offset));
            Port::<u32>::new(0xcfc).write(value);
        }
    }
}

/// Enumerates the buses once and maps every assigned memory BAR, wherever
/// the firmware put it: registers uncached, prefetchable memory write-back.
pub fn scan() -> &'static [Function] {
    FUNCTIONS.call_once(|| {
        use_ecam(crate::acpi::ecam());
        if let Some(w) = CONFIG.ecam.get().and_then(|w| w.first()) {
            log::info!("configuration space through ECAM at {:#x}", w.base);
        }
        let functions = kbase::pci::enumerate(&CONFIG);
        for f in &functions {
            for bar in f.bars.iter().flatten() {
                if let Bar::Memory { addr, size, prefetchable, .. } = *bar {
                    let caching = if prefetchable { Caching::WriteBack } else { Caching::Uncached };
                    match map_device(addr, size, caching) {
                        Ok(()) => log::debug!("{}: mapped BAR {addr:#x}+{size:#x} {caching:?}", f.bdf),
                        Err(e) => log::warn!("{}: cannot map BAR {addr:#x}+{size:#x}: {e:?}", f.bdf),
                    }
                }
            }
        }
        functions
    })
}

/// The functions found at boot (empty before `scan`).
pub fn functions() -> &'static [Function] {
    FUNCTIONS.get().map_or(&[], Vec::as_slice)
}

/// The ACPI PM1a control port of QEMU's chipsets (PIIX4 on `pc`, ICH9 on
/// `q35`), where the firmware placed the PM I/O block (PMBA, config 0x40).
pub fn acpi_pm1a_control() -> Option<u16> {
    let f = functions().iter().find(|f| matches!((f.vendor, f.device), (0x8086, 0x7113) | (0x8086, 0x2918)))?;
    let base = CONFIG.read32(f.bdf, 0x40) as u16 & 0xffc0;
    (base != 0).then_some(base + 4)
}

/// Why a function could not be switched to message-signalled interrupts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsiSetupError {
    /// It has no such capability.
    NoCapability,
    /// Fewer table entries than vectors asked for.
    TooFewEntries,
    Msi(msi::MsiError),
}

/// Switches `f` to MSI-X with `vectors[i]` on table entry `i` (the rest
/// masked), through `write(offset, value)` into its mapped table of
/// `entries`: the capability enabled with the function masked, the entries
/// written, INTx off. The function stays masked until
/// [`msix_unmask`], so the driver can route its causes first.
pub fn msix_setup(
    f: &Function,
    entries: u16,
    vectors: &[u8],
    mut write: impl FnMut(u32, u32),
) -> Result<(), MsiSetupError> {
    let Some(Capability::MsiX { offset, .. }) = f.msix() else { return Err(MsiSetupError::NoCapability) };
    if vectors.len() > usize::from(entries) {
        return Err(MsiSetupError::TooFewEntries);
    }
    let apic = crate::arch::apic::id();
    msi::msix_enable_masked(&CONFIG, f.bdf, offset);
    for i in 0..entries {
        let (msg, masked) = match vectors.get(usize::from(i)) {
            Some(&v) => (Message::new(v, apic), false),
            None => (Message { address: 0, data: 0 }, true),
        };
        for (off, value) in msi::table::entry(i, msg, masked) {
            write(off, value);
        }
    }
    msi::set_intx_disabled(&CONFIG, f.bdf, true);
    Ok(())
}

/// Lifts `f`'s MSI-X function mask: messages flow.
pub fn msix_unmask(f: &Function) {
    if let Some(Capability::MsiX { offset, .. }) = f.msix() {
        msi::msix_unmask_function(&CONFIG, f.bdf, offset);
    }
}

/// Turns MSI and MSI-X off on `f` and lets it assert INTx again.
pub fn msi_off(f: &Function) {
    for cap in &f.capabilities {
        match *cap {
            Capability::MsiX { offset, .. } => msi::msix_disable(&CONFIG, f.bdf, offset),
            Capability::Msi { offset } => msi::msi_disable(&CONFIG, f.bdf, offset),
            _ => {}
        }
    }
    msi::set_intx_disabled(&CONFIG, f.bdf, false);
}

/// Switches `f` to one MSI message raising `vector`, INTx off.
pub fn msi_setup(f: &Function, vector: u8) -> Result<(), MsiSetupError> {
    let offset = f
        .capabilities
        .iter()
        .find_map(|c| match c {
            Capability::Msi { offset } => Some(*offset),
            _ => None,
        })
        .ok_or(MsiSetupError::NoCapability)?;
    let msg = Message::new(vector, crate::arch::apic::id());
    msi::msi_program(&CONFIG, f.bdf, offset, msg).map_err(MsiSetupError::Msi)?;
    msi::set_intx_disabled(&CONFIG, f.bdf, true);
    Ok(())
}
