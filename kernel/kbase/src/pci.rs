//! PCI enumeration over any configuration-space accessor: functions, BARs (32-
//! and 64-bit, sized by the write-ones probe), the capability list (MSI, MSI-X,
//! vendor-specific as virtio uses it) and bridges to further buses. The kernel
//! supplies port I/O; tests supply a fake config space.

use alloc::vec::Vec;
use core::fmt;

/// Bus/device/function address of a PCI function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.device, self.function)
    }
}

/// A PCIe enhanced configuration (ECAM) window, as an ACPI MCFG entry gives
/// it: 4 KiB of configuration space per function of buses `bus_start..=bus_end`
/// of segment `segment`, from `base` (PCIe Base 6.0 section 7.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ecam {
    pub base: u64,
    pub segment: u16,
    pub bus_start: u8,
    pub bus_end: u8,
}

impl Ecam {
    /// Bytes the window spans (0 for an inverted bus range).
    pub fn size(&self) -> u64 {
        (u64::from(self.bus_end) + 1).saturating_sub(u64::from(self.bus_start)) << 20
    }

    /// The physical address of a dword of `bdf`'s configuration space, when
    /// `bdf` (segment 0) lies in this window.
    pub fn address(&self, bdf: Bdf, offset: u8) -> Option<u64> {
        if self.segment != 0
            || !(self.bus_start..=self.bus_end).contains(&bdf.bus)
            || bdf.device > 31
            || bdf.function > 7
        {
            return None;
        }
        let rel = u64::from(bdf.bus - self.bus_start) << 20
            | u64::from(bdf.device) << 15
            | u64::from(bdf.function) << 12
            | u64::from(offset & 0xfc);
        self.base.checked_add(rel)
    }
}

/// Access to configuration space (32-bit aligned dwords).
pub trait ConfigAccess {
    fn read32(&self, bdf: Bdf, offset: u8) -> u32;
    fn write32(&self, bdf: Bdf, offset: u8, value: u32);

    fn read16(&self, bdf: Bdf, offset: u8) -> u16 {
        (self.read32(bdf, offset & !3) >> ((offset & 2) * 8)) as u16
    }
    fn read8(&self, bdf: Bdf, offset: u8) -> u8 {
        (self.read32(bdf, offset & !3) >> ((offset & 3) * 8)) as u8
    }
}

/// Command register bits.
pub mod command {
    pub const IO: u16 = 1 << 0;
    pub const MEMORY: u16 = 1 << 1;
    pub const BUS_MASTER: u16 = 1 << 2;
}

/// A decoded base address register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bar {
    Io { port: u32, size: u32 },
    Memory { addr: u64, size: u64, is_64bit: bool, prefetchable: bool },
}

/// A capability found in the capability list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    Msi {
        offset: u8,
    },
    MsiX {
        offset: u8,
        table_size: u16,
        table_bar: u8,
        table_offset: u32,
        pba_bar: u8,
        pba_offset: u32,
    },
    /// Vendor-specific (virtio places its structure descriptions here).
    Vendor {
        offset: u8,
        cfg_type: u8,
    },
    PciExpress {
        offset: u8,
    },
    Other {
        id: u8,
        offset: u8,
    },
}

/// One function found on a bus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub bdf: Bdf,
    pub vendor: u16,
    pub device: u16,
    pub class: u8,
    pub subclass: u8,
    pub prog_if: u8,
    pub revision: u8,
    pub header_type: u8,
    pub interrupt_line: u8,
    pub interrupt_pin: u8,
    /// BARs by index (a 64-bit BAR occupies its slot and the next, which is `None`).
    pub bars: [Option<Bar>; 6],
    pub capabilities: Vec<Capability>,
}

impl Function {
    /// The MSI-X capability, if any.
    pub fn msix(&self) -> Option<Capability> {
        self.capabilities.iter().copied().find(|c| matches!(c, Capability::MsiX { .. }))
    }
}

const CAP_LIST_STATUS: u16 = 1 << 4;
// A capability chain is at most (256 - 64) / 4 entries long; more means a loop.
const MAX_CAPS: usize = 48;

/// Finds every function reachable from bus 0, following PCI-to-PCI bridges.
pub fn enumerate(cfg: &impl ConfigAccess) -> Vec<Function> {
    let mut found = Vec::new();
    let mut buses = alloc::vec![0u8];
    let mut seen = [false; 256];
    while let Some(bus) = buses.pop() {
        if core::mem::replace(&mut seen[bus as usize], true) {
            continue;
        }
        for device in 0..32 {
            for function in 0..8 {
                let bdf = Bdf { bus, device, function };
                let id = cfg.read32(bdf, 0x00);
                if id & 0xffff == 0xffff {
                    if function == 0 {
                        break;
                    }
                    continue;
                }
                let f = probe(cfg, bdf, id);
                let multi = f.header_type & 0x80 != 0;
                if f.header_type & 0x7f == 1 {
                    buses.push(cfg.read8(bdf, 0x19)); // secondary bus
                }
                found.push(f);
                if function == 0 && !multi {
                    break;
                }
            }
        }
    }
    found.sort_by_key(|f| f.bdf);
    found
}

fn probe(cfg: &impl ConfigAccess, bdf: Bdf, id: u32) -> Function {
    let class_rev = cfg.read32(bdf, 0x08);
    let header_type = cfg.read8(bdf, 0x0e);
    let irq = cfg.read32(bdf, 0x3c);
    let bar_count = match header_type & 0x7f {
        0 => 6,
        1 => 2,
        _ => 0,
    };
    Function {
        bdf,
        vendor: id as u16,
        device: (id >> 16) as u16,
        class: (class_rev >> 24) as u8,
        subclass: (class_rev >> 16) as u8,
        prog_if: (class_rev >> 8) as u8,
        revision: class_rev as u8,
        header_type,
        interrupt_line: irq as u8,
        interrupt_pin: (irq >> 8) as u8,
        bars: read_bars(cfg, bdf, bar_count),
        capabilities: read_capabilities(cfg, bdf),
    }
}

fn read_bars(cfg: &impl ConfigAccess, bdf: Bdf, count: usize) -> [Option<Bar>; 6] {
    let mut bars = [None; 6];
    // Decoding off while the BARs hold all-ones, so the probe never claims addresses.
    let cmd = cfg.read32(bdf, 0x04);
    cfg.write32(bdf, 0x04, cmd & !u32::from(command::IO | command::MEMORY));
    let mut i = 0;
    while i < count {
        let off = 0x10 + 4 * i as u8;
        let (bar, slots) = size_bar(cfg, bdf, off, i + 1 < count);
        bars[i] = bar;
        i += slots;
    }
    cfg.write32(bdf, 0x04, cmd);
    bars
}

/// Sizes one BAR; returns it and how many BAR slots it used.
fn size_bar(cfg: &impl ConfigAccess, bdf: Bdf, off: u8, may_be_64: bool) -> (Option<Bar>, usize) {
    let orig = cfg.read32(bdf, off);
    cfg.write32(bdf, off, u32::MAX);
    let mask = cfg.read32(bdf, off);
    cfg.write32(bdf, off, orig);
    if orig & 1 == 1 {
        let size = (!(mask & !0x3)).wrapping_add(1) & 0xffff;
        let bar = (mask & !0x3 != 0).then_some(Bar::Io { port: orig & !0x3, size });
        return (bar, 1);
    }
    let prefetchable = orig & 0x8 != 0;
    if (orig >> 1) & 0x3 == 0x2 && may_be_64 {
        let orig_hi = cfg.read32(bdf, off + 4);
        cfg.write32(bdf, off + 4, u32::MAX);
        let mask_hi = cfg.read32(bdf, off + 4);
        cfg.write32(bdf, off + 4, orig_hi);
        let mask64 = (u64::from(mask_hi) << 32) | u64::from(mask & !0xf);
        let addr = (u64::from(orig_hi) << 32) | u64::from(orig & !0xf);
        let bar =
            (mask64 != 0).then(|| Bar::Memory { addr, size: (!mask64).wrapping_add(1), is_64bit: true, prefetchable });
        return (bar, 2);
    }
    let mask = mask & !0xf;
    let bar = (mask != 0).then(|| Bar::Memory {
        addr: u64::from(orig & !0xf),
        size: u64::from((!mask).wrapping_add(1)),
        is_64bit: false,
        prefetchable,
    });
    (bar, 1)
}

fn read_capabilities(cfg: &impl ConfigAccess, bdf: Bdf) -> Vec<Capability> {
    let mut caps = Vec::new();
    if cfg.read16(bdf, 0x06) & CAP_LIST_STATUS == 0 {
        return caps;
    }
    let mut ptr = cfg.read8(bdf, 0x34) & !3;
    while ptr >= 0x40 && caps.len() < MAX_CAPS {
        let head = cfg.read32(bdf, ptr);
        let id = head as u8;
        caps.push(match id {
            0x05 => Capability::Msi { offset: ptr },
            0x09 => Capability::Vendor { offset: ptr, cfg_type: (head >> 24) as u8 },
            0x10 => Capability::PciExpress { offset: ptr },
            0x11 => {
                let table = cfg.read32(bdf, ptr.wrapping_add(4));
                let pba = cfg.read32(bdf, ptr.wrapping_add(8));
                Capability::MsiX {
                    offset: ptr,
                    table_size: ((head >> 16) as u16 & 0x7ff) + 1,
                    table_bar: (table & 7) as u8,
                    table_offset: table & !7,
                    pba_bar: (pba & 7) as u8,
                    pba_offset: pba & !7,
                }
            }
            id => Capability::Other { id, offset: ptr },
        });
        ptr = (head >> 8) as u8 & !3;
    }
    caps
}

/// The class name `lspci` prints, for the classes an appliance meets.
pub fn class_name(class: u8, subclass: u8) -> &'static str {
    match (class, subclass) {
        (0x01, 0x01) => "IDE interface",
        (0x01, _) => "Mass storage controller",
        (0x02, 0x00) => "Ethernet controller",
        (0x02, _) => "Network controller",
        (0x03, _) => "VGA compatible controller",
        (0x05, 0x00) => "RAM memory",
        (0x05, _) => "Memory controller",
        (0x06, 0x00) => "Host bridge",
        (0x06, 0x01) => "ISA bridge",
        (0x06, 0x04) => "PCI bridge",
        (0x06, 0x80) => "Bridge",
        (0x06, _) => "Bridge",
        (0x0c, 0x03) => "USB controller",
        (0x0c, 0x05) => "SMBus",
        (0xff, _) => "Unassigned class",
        _ => "Device",
    }
}

/// Vendor and device names for the devices QEMU gives an appliance.
pub fn device_name(vendor: u16, device: u16) -> (&'static str, &'static str) {
    let vendor_name = match vendor {
        0x1af4 | 0x1b36 => "Red Hat, Inc.",
        0x8086 => "Intel Corporation",
        0x1234 => "QEMU",
        _ => "Unknown vendor",
    };
    let device_name = match (vendor, device) {
        (0x1af4, 0x1000 | 0x1041) => "Virtio network device",
        (0x1af4, 0x1110) => "Inter-VM shared memory",
        (0x8086, 0x1237) => "440FX - 82441FX PMC [Natoma]",
        (0x8086, 0x7000) => "82371SB PIIX3 ISA [Natoma/Triton II]",
        (0x8086, 0x7010) => "82371SB PIIX3 IDE [Natoma/Triton II]",
        (0x8086, 0x7113) => "82371AB/EB/MB PIIX4 ACPI",
        (0x8086, 0x29c0) => "82G33/G31/P35/P31 Express DRAM Controller",
        (0x8086, 0x100e) => "82540EM Gigabit Ethernet Controller",
        _ => "Device",
    };
    (vendor_name, device_name)
}

/// One `lspci -nn` style line.
pub struct LspciLine<'a>(pub &'a Function);

impl fmt::Display for LspciLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let (vendor, device) = device_name(d.vendor, d.device);
        write!(
            f,
            "{} {} [{:02x}{:02x}]: {} {} [{:04x}:{:04x}]",
            d.bdf,
            class_name(d.class, d.subclass),
            d.class,
            d.subclass,
            vendor,
            device,
            d.vendor,
            d.device
        )?;
        if d.revision != 0 {
            write!(f, " (rev {:02x})", d.revision)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecam_addresses() {
        let e = Ecam { base: 0xb000_0000, segment: 0, bus_start: 0, bus_end: 0xff };
        assert_eq!(e.size(), 256 << 20);
        let bdf = |bus, device, function| Bdf { bus, device, function };
        assert_eq!(e.address(bdf(0, 0, 0), 0), Some(0xb000_0000));
        assert_eq!(e.address(bdf(1, 2, 3), 0x13), Some(0xb000_0000 + (1 << 20) + (2 << 15) + (3 << 12) + 0x10));
        assert_eq!(e.address(bdf(0, 32, 0), 0), None);
        let part = Ecam { base: 0xe000_0000, segment: 0, bus_start: 0x10, bus_end: 0x1f };
        assert_eq!(part.size(), 16 << 20);
        assert_eq!(part.address(bdf(0x10, 0, 0), 4), Some(0xe000_0004));
        assert_eq!(part.address(bdf(0x0f, 0, 0), 0), None);
        assert_eq!(part.address(bdf(0x20, 0, 0), 0), None);
        assert_eq!(Ecam { segment: 1, ..part }.address(bdf(0x10, 0, 0), 0), None);
        assert_eq!(Ecam { bus_start: 5, bus_end: 4, ..part }.size(), 0);
        assert_eq!(Ecam { base: u64::MAX, ..e }.address(bdf(1, 0, 0), 0), None);
    }
    use alloc::collections::BTreeMap;
    use alloc::string::ToString;
    use core::cell::RefCell;

    /// A config space with BAR size masks, like real hardware.
    #[derive(Default)]
    struct FakeConfig {
        regs: RefCell<BTreeMap<(Bdf, u8), u32>>,
        bar_masks: BTreeMap<(Bdf, u8), u32>,
    }

    impl FakeConfig {
        fn set(&self, bdf: Bdf, off: u8, v: u32) {
            self.regs.borrow_mut().insert((bdf, off), v);
        }
    }

    impl ConfigAccess for FakeConfig {
        fn read32(&self, bdf: Bdf, offset: u8) -> u32 {
            let default = if offset == 0 { u32::MAX } else { 0 };
            *self.regs.borrow().get(&(bdf, offset)).unwrap_or(&default)
        }
        fn write32(&self, bdf: Bdf, offset: u8, value: u32) {
            let v = match self.bar_masks.get(&(bdf, offset)) {
                Some(mask) if value == u32::MAX => {
                    let low_flags = self.read32(bdf, offset) & if *mask == 0 { 0 } else { 0xf };
                    *mask | low_flags
                }
                _ => value,
            };
            self.set(bdf, offset, v);
        }
    }

    fn bdf(bus: u8, device: u8, function: u8) -> Bdf {
        Bdf { bus, device, function }
    }

    /// A virtio-net (BAR1 32-bit MMIO, BAR4 64-bit prefetchable above 4 GiB,
    /// MSI-X and vendor caps) behind a bridge, next to a host bridge.
    fn machine() -> FakeConfig {
        let mut c = FakeConfig::default();
        let host = bdf(0, 0, 0);
        c.set(host, 0x00, 0x1237_8086);
        c.set(host, 0x08, 0x0600_0002);
        let bridge = bdf(0, 2, 0);
        c.set(bridge, 0x00, 0x0001_1b36);
        c.set(bridge, 0x08, 0x0604_0000);
        c.set(bridge, 0x0c, 0x0001_0000);
        c.set(bridge, 0x18, 0x0000_0100); // secondary bus 1
        let nic = bdf(1, 3, 0);
        c.set(nic, 0x00, 0x1041_1af4);
        c.set(nic, 0x04, 0x0010_0007); // caps list, io|mem|master
        c.set(nic, 0x08, 0x0200_0001);
        c.set(nic, 0x14, 0xfebd_1000);
        c.bar_masks.insert((nic, 0x14), 0xffff_f000);
        c.set(nic, 0x20, 0x0000_000c);
        c.set(nic, 0x24, 0x0000_0001);
        c.bar_masks.insert((nic, 0x20), 0xffff_c000);
        c.bar_masks.insert((nic, 0x24), 0xffff_ffff);
        c.set(nic, 0x34, 0x98);
        c.set(nic, 0x98, 0x0003_8411); // MSI-X, next 0x84, 4 vectors
        c.set(nic, 0x9c, 0x0000_0001); // table in BAR1 at 0
        c.set(nic, 0xa0, 0x0000_0801); // PBA in BAR1 at 0x800
        c.set(nic, 0x84, 0x0400_0009); // vendor cap type 4, end of list
        c.set(nic, 0x3c, 0x0000_010b);
        c
    }

    #[test]
    fn walks_buses_bars_and_capabilities() {
        let c = machine();
        let fns = enumerate(&c);
        let bdfs: alloc::vec::Vec<_> = fns.iter().map(|f| f.bdf.to_string()).collect();
        assert_eq!(bdfs, ["00:00.0", "00:02.0", "01:03.0"]);
        let nic = &fns[2];
        assert_eq!((nic.vendor, nic.device, nic.class, nic.revision), (0x1af4, 0x1041, 2, 1));
        assert_eq!(
            nic.bars[1],
            Some(Bar::Memory { addr: 0xfebd_1000, size: 0x1000, is_64bit: false, prefetchable: false })
        );
        assert_eq!(
            nic.bars[4],
            Some(Bar::Memory { addr: 0x1_0000_0000, size: 0x4000, is_64bit: true, prefetchable: true })
        );
        assert_eq!(nic.bars[5], None);
        assert_eq!(nic.capabilities.len(), 2);
        assert_eq!(
            nic.msix(),
            Some(Capability::MsiX {
                offset: 0x98,
                table_size: 4,
                table_bar: 1,
                table_offset: 0,
                pba_bar: 1,
                pba_offset: 0x800
            })
        );
        assert_eq!(nic.capabilities[1], Capability::Vendor { offset: 0x84, cfg_type: 4 });
        assert_eq!((nic.interrupt_line, nic.interrupt_pin), (0x0b, 1));
        // The probe restored BARs and the command register.
        assert_eq!(c.read32(nic.bdf, 0x14), 0xfebd_1000);
        assert_eq!(c.read32(nic.bdf, 0x04), 0x0010_0007);
    }

    #[test]
    fn capability_loop_is_bounded() {
        let c = FakeConfig::default();
        let f = bdf(0, 1, 0);
        c.set(f, 0x00, 0x1000_1af4);
        c.set(f, 0x04, 0x0010_0000);
        c.set(f, 0x34, 0x40);
        c.set(f, 0x40, 0x0000_4005); // points at itself
        let fns = enumerate(&c);
        assert_eq!(fns[0].capabilities.len(), MAX_CAPS);
    }

    #[test]
    fn lspci_line() {
        let fns = enumerate(&machine());
        assert_eq!(
            LspciLine(&fns[2]).to_string(),
            "01:03.0 Ethernet controller [0200]: Red Hat, Inc. Virtio network device [1af4:1041] (rev 01)"
        );
        assert_eq!(
            LspciLine(&fns[0]).to_string(),
            "00:00.0 Host bridge [0600]: Intel Corporation 440FX - 82441FX PMC [Natoma] [8086:1237] (rev 02)"
        );
    }
}
