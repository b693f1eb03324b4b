//! ACPI at boot: the RSDP (from the loader, else the BIOS-area search), then,
//! with the `acpi` crate over identity-mapped memory, the FADT's PM1 control
//! blocks and the DSDT's S5 sleep type (for `shutdown`), the MADT (logged) and
//! the MCFG's PCIe ECAM windows (for configuration space).

use crate::arch::exit::Pm1Control;
use crate::mem::paging::{Caching, map_device};
use acpi::address::{AddressSpace, GenericAddress};
use acpi::fadt::Fadt;
use acpi::madt::{Madt, MadtEntry};
use acpi::mcfg::Mcfg;
use acpi::{AcpiHandler, AcpiTables, PhysicalMapping};
use alloc::vec::Vec;
use boot::BootInfo;
use core::ptr::NonNull;
use kbase::acpi::{Rsdp, SleepType, pm1_sleep_value, rsdp, s5};
use kbase::pci::Ecam;
use spin::Once;

/// What the tables told.
struct Acpi {
    pm1a: Option<Pm1Control>,
    pm1b: Option<Pm1Control>,
    s5: Option<SleepType>,
    ecam: Vec<Ecam>,
}

static ACPI: Once<Acpi> = Once::new();

/// The BIOS data area word holding the EBDA's segment (ACPI 6.5 section 5.2.5.1).
const EBDA_POINTER: usize = 0x40e;
const BIOS_AREA: core::ops::Range<usize> = 0xe0000..0x100000;
const RSDP_BYTES: usize = 36;

/// Finds the RSDP. Must run before `mem::init`: the search reads page 0 (the
/// EBDA pointer), which the boot tables map and the kernel's do not.
pub fn find_rsdp(info: &BootInfo) -> Option<Rsdp> {
    match &info.rsdp {
        Some(boot::Rsdp::Copy(bytes)) => match Rsdp::parse(bytes) {
            Ok(r) => return Some(r),
            Err(e) => log::warn!("the loader's RSDP copy: {e}"),
        },
        Some(boot::Rsdp::Address(a)) if *a < (1 << 32) - RSDP_BYTES as u64 => {
            // SAFETY: the loader's RSDP address, below 4 GiB, identity-mapped by the
            // boot tables; 36 bytes is the longest RSDP, and reading them is harmless.
            let bytes = unsafe { core::slice::from_raw_parts(*a as usize as *const u8, RSDP_BYTES) };
            match Rsdp::parse(bytes) {
                Ok(r) => return Some(r),
                Err(e) => log::warn!("RSDP at {a:#x}: {e}"),
            }
        }
        Some(boot::Rsdp::Address(a)) => log::warn!("RSDP at {a:#x} is out of reach"),
        None => {}
    }
    // SAFETY: the BIOS data area word at 0x40e, identity-mapped by the boot tables.
    let ebda = usize::from(unsafe { core::ptr::read_unaligned(EBDA_POINTER as *const u16) }) << 4;
    let mut areas = heapless::Vec::<core::ops::Range<usize>, 2>::new();
    if (0x80000..0xa0000).contains(&ebda) {
        let _ = areas.push(ebda..ebda + 1024);
    }
    let _ = areas.push(BIOS_AREA);
    areas.into_iter().find_map(|area| {
        // SAFETY: low memory (EBDA, BIOS ROM shadow), identity-mapped by the boot
        // tables, only read.
        let bytes = unsafe { core::slice::from_raw_parts(area.start as *const u8, area.len()) };
        rsdp::search(bytes).map(|(off, r)| {
            log::debug!("RSDP found at {:#x}", area.start + off);
            r
        })
    })
}

/// Reads the tables behind `rsdp`; without one, `shutdown` and PCI keep their
/// chipset defaults.
pub fn init(rsdp: Option<Rsdp>) {
    let Some(rsdp) = rsdp else {
        log::warn!("no RSDP found");
        return;
    };
    let (revision, root) = rsdp.root_table();
    // SAFETY: the address comes from a checksummed RSDP; the handler maps
    // whatever the crate reads.
    let tables = match unsafe { AcpiTables::from_rsdt(Identity, revision, root as usize) } {
        Ok(t) => t,
        Err(e) => {
            log::warn!("root table at {root:#x}: {e:?}");
            return;
        }
    };
    let (pm1a, pm1b) = match tables.find_table::<Fadt>() {
        Ok(fadt) => (
            fadt.pm1a_control_block().ok().and_then(pm1_register),
            fadt.pm1b_control_block().ok().flatten().and_then(pm1_register),
        ),
        Err(e) => {
            log::warn!("FADT: {e:?}");
            (None, None)
        }
    };
    let s5 = match tables.dsdt() {
        Ok(dsdt) => {
            let len = dsdt.length as usize;
            let aml = Identity.bytes(dsdt.address, len);
            match s5::find(aml) {
                Ok(t) => Some(t),
                Err(e) => {
                    log::warn!("{e}");
                    None
                }
            }
        }
        Err(e) => {
            log::warn!("DSDT: {e:?}");
            None
        }
    };
    let madt = madt_summary(&tables);
    let ecam = match tables.find_table::<Mcfg>() {
        Ok(mcfg) => mcfg
            .entries()
            .iter()
            .map(|e| Ecam {
                base: e.base_address,
                segment: e.pci_segment_group,
                bus_start: e.bus_number_start,
                bus_end: e.bus_number_end,
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    // One line for the lot; the details are at debug level.
    log::info!(
        "rev {revision}; FADT PM1a_CNT {pm1a:x?} PM1b_CNT {pm1b:x?}, _S5_ {:?}; MADT {madt}; MCFG {} ECAM window(s)",
        s5.map(|t| (t.a, t.b)),
        ecam.len()
    );
    for e in &ecam {
        log::debug!("MCFG: ECAM at {:#x}, segment {} buses {:02x}-{:02x}", e.base, e.segment, e.bus_start, e.bus_end);
    }
    ACPI.call_once(|| Acpi { pm1a, pm1b, s5, ecam });
}

/// A PM1 control block the kernel can write: I/O ports or memory.
fn pm1_register(g: GenericAddress) -> Option<Pm1Control> {
    match g.address_space {
        AddressSpace::SystemIo => u16::try_from(g.address).ok().filter(|&p| p != 0).map(Pm1Control::Io),
        AddressSpace::SystemMemory if g.address != 0 => match map_device(g.address, 2, Caching::Uncached) {
            Ok(()) => Some(Pm1Control::Memory(g.address)),
            Err(e) => {
                log::warn!("cannot map PM1 control at {:#x}: {e:?}", g.address);
                None
            }
        },
        _ => None,
    }
}

fn madt_summary(tables: &AcpiTables<Identity>) -> alloc::string::String {
    let madt = match tables.find_table::<Madt>() {
        Ok(m) => m,
        Err(e) => return alloc::format!("missing ({e:?})"),
    };
    let madt = madt.get();
    let (mut cpus, mut io_apics, mut overrides) = (0, 0, 0);
    for entry in madt.entries() {
        match entry {
            MadtEntry::LocalApic(l) if l.flags & 1 != 0 => cpus += 1,
            MadtEntry::LocalX2Apic(_) => cpus += 1,
            MadtEntry::IoApic(io) => {
                io_apics += 1;
                let (id, addr, gsi) = (io.io_apic_id, io.io_apic_address, io.global_system_interrupt_base);
                log::debug!("MADT: I/O APIC {id} at {addr:#x}, GSI base {gsi}");
            }
            MadtEntry::InterruptSourceOverride(o) => {
                overrides += 1;
                let (irq, gsi, flags) = (o.irq, o.global_system_interrupt, o.flags);
                log::debug!("MADT: IRQ {irq} -> GSI {gsi} (flags {flags:#x})");
            }
            _ => {}
        }
    }
    let pic = if madt.supports_8259() { ", 8259 PICs" } else { "" };
    alloc::format!("{cpus} CPU(s), {io_apics} I/O APIC(s), {overrides} IRQ override(s){pic}")
}

/// The PCIe ECAM windows the MCFG gave (none before `init`, or on i440fx).
pub fn ecam() -> &'static [Ecam] {
    ACPI.get().map_or(&[], |a| a.ecam.as_slice())
}

/// The writes that power off: SLP_TYP (from `_S5_`) | SLP_EN to the FADT's
/// PM1a (and PM1b) control blocks; else the chipset's PM1a with sleep type 0,
/// which QEMU's PIIX4 and ICH9 take as S5.
pub fn power_off_writes() -> heapless::Vec<(Pm1Control, u16), 2> {
    let mut writes = heapless::Vec::new();
    if let Some(Acpi { pm1a: Some(a), pm1b, s5: Some(t), .. }) = ACPI.get() {
        let _ = writes.push((*a, pm1_sleep_value(t.a)));
        if let Some(b) = pm1b {
            let _ = writes.push((*b, pm1_sleep_value(t.b)));
        }
        log::info!("S5 through the FADT: {writes:x?}");
    } else if let Some(port) = crate::pci::acpi_pm1a_control() {
        let _ = writes.push((Pm1Control::Io(port), pm1_sleep_value(0)));
        log::info!("no FADT/_S5_; S5 through the chipset's PM1a_CNT {port:#x}");
    }
    writes
}

/// The `acpi` crate's view of physical memory: identity-mapped, mapped on demand.
#[derive(Clone, Copy)]
struct Identity;

/// What an unmappable table address reads as: zeros, which no table signature
/// matches, so the crate reports it instead of touching the address.
#[repr(C, align(8))]
struct Zeros([u8; 64]);
static ZEROS: Zeros = Zeros([0; 64]);

impl Identity {
    /// `len` bytes at `phys`, mapped (zeros where they cannot be).
    fn bytes(&self, phys: usize, len: usize) -> &'static [u8] {
        if phys == 0 || map_device(phys as u64, len as u64, Caching::WriteBack).is_err() {
            log::warn!("cannot map {phys:#x}+{len:#x}");
            return &[];
        }
        // SAFETY: just mapped, firmware table memory that nothing writes.
        unsafe { core::slice::from_raw_parts(phys as *const u8, len) }
    }
}

impl AcpiHandler for Identity {
    unsafe fn map_physical_region<T>(&self, phys: usize, size: usize) -> PhysicalMapping<Self, T> {
        let mapped = phys != 0 && map_device(phys as u64, size as u64, Caching::WriteBack).is_ok();
        let (start, len) = if mapped {
            (phys as *mut T, size)
        } else if size <= ZEROS.0.len() {
            log::warn!("table address {phys:#x} cannot be mapped");
            (ZEROS.0.as_ptr() as *mut T, size)
        } else {
            crate::fatal!("cannot map {phys:#x}+{size:#x}")
        };
        let Some(virt) = NonNull::new(start) else { crate::fatal!("null mapping") };
        // SAFETY: `virt` is readable for `len` bytes: identity-mapped firmware
        // memory, or the zero block, which the crate only reads.
        unsafe { PhysicalMapping::new(phys, virt, len, len, *self) }
    }

    fn unmap_physical_region<T>(_: &PhysicalMapping<Self, T>) {
        // Mappings stay: the identity map keeps every page it ever mapped.
    }
}
