//! Message-signalled interrupts as x86 sees them: the address and data a
//! device writes to raise a vector on a local APIC (Intel SDM vol. 3,
//! §11.11 "Message Signalled Interrupts"), the 16-byte MSI-X table entry and
//! the capability registers that switch MSI and MSI-X on (PCI Local Bus 3.0
//! §6.8; PCIe Base 6.0 §7.7.1 and §7.7.2). Pure logic: the kernel does the
//! configuration-space and table accesses.

use crate::pci::{Bdf, ConfigAccess};

/// The address window every x86 MSI write goes to (SDM §11.11.1).
pub const ADDRESS_BASE: u32 = 0xfee0_0000;

/// The message that raises `vector` on the local APIC with ID `apic_id`:
/// physical destination mode, no redirection hint, fixed delivery, edge
/// triggered. (An 8-bit APIC ID; x2APIC IDs above 255 need interrupt
/// remapping, which the appliance does not use.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    pub address: u64,
    pub data: u32,
}

impl Message {
    pub fn new(vector: u8, apic_id: u8) -> Self {
        // Address bits 19:12 the destination ID; RH (bit 3) and DM (bit 2)
        // zero: exactly the named APIC, in physical mode.
        let address = u64::from(ADDRESS_BASE | u32::from(apic_id) << 12);
        // Data bits 7:0 the vector; delivery mode (10:8) fixed = 0; level
        // (14) and trigger mode (15) zero: edge, which needs no level
        // de-assert message and no unmask.
        Self { address, data: u32::from(vector) }
    }

    /// The vector a message raises, if it is one of ours (fixed delivery,
    /// edge, into the APIC window); `None` for anything else.
    pub fn vector(&self) -> Option<u8> {
        let in_window = self.address >> 20 == u64::from(ADDRESS_BASE >> 20);
        (in_window && self.data & 0xff00 == 0).then_some(self.data as u8)
    }
}

/// One MSI-X table entry (PCIe §7.7.2.8..10): message address low and
/// high, data, vector control (bit 0 masks the vector), 16 bytes.
pub mod table {
    pub const ENTRY_LEN: u32 = 16;
    pub const ADDR_LO: u32 = 0;
    pub const ADDR_HI: u32 = 4;
    pub const DATA: u32 = 8;
    pub const VECTOR_CONTROL: u32 = 12;
    pub const MASKED: u32 = 1 << 0;

    /// The four dwords of entry `index`, as (byte offset in the table,
    /// value), in the order to write them: the message first, the
    /// vector-control word (unmasked or not) last, so the device never sees
    /// an unmasked half-written entry.
    pub fn entry(index: u16, msg: super::Message, masked: bool) -> [(u32, u32); 4] {
        let base = u32::from(index) * ENTRY_LEN;
        [
            (base + ADDR_LO, msg.address as u32),
            (base + ADDR_HI, (msg.address >> 32) as u32),
            (base + DATA, msg.data),
            (base + VECTOR_CONTROL, if masked { MASKED } else { 0 }),
        ]
    }

    /// Bytes a table of `entries` spans.
    pub fn len(entries: u16) -> u32 {
        u32::from(entries) * ENTRY_LEN
    }
}

/// MSI-X message control (the capability's upper half of its first
/// dword): enable (bit 15), function mask (14), table size − 1 (10:0).
pub mod msix_control {
    pub const ENABLE: u16 = 1 << 15;
    pub const FUNCTION_MASK: u16 = 1 << 14;
}

/// MSI message control: enable (bit 0), multiple message capable (3:1)
/// and enable (6:4), 64-bit address capable (7), per-vector masking (8).
pub mod msi_control {
    pub const ENABLE: u16 = 1 << 0;
    pub const MME_MASK: u16 = 0b111 << 4;
    pub const ADDR_64: u16 = 1 << 7;
    pub const PER_VECTOR_MASK: u16 = 1 << 8;
}

/// The command register's INTx disable bit (PCI 3.0 §6.2.2).
pub const COMMAND_INTX_DISABLE: u16 = 1 << 10;

/// Reads a capability's message control (bits 31:16 of its first dword).
pub fn control(cfg: &impl ConfigAccess, bdf: Bdf, cap: u8) -> u16 {
    (cfg.read32(bdf, cap) >> 16) as u16
}

/// Writes a capability's message control, keeping the ID and next pointer
/// (read-only, but written as read).
fn set_control(cfg: &impl ConfigAccess, bdf: Bdf, cap: u8, control: u16) {
    let head = cfg.read32(bdf, cap) & 0xffff;
    cfg.write32(bdf, cap, head | u32::from(control) << 16);
}

/// Whether MSI-X is enabled on the function, read from the device (what
/// `lspci -v` shows as `Enable+`).
pub fn msix_enabled(cfg: &impl ConfigAccess, bdf: Bdf, cap: u8) -> bool {
    control(cfg, bdf, cap) & msix_control::ENABLE != 0
}

/// Whether MSI is enabled on the function.
pub fn msi_enabled(cfg: &impl ConfigAccess, bdf: Bdf, cap: u8) -> bool {
    control(cfg, bdf, cap) & msi_control::ENABLE != 0
}

/// Step one of MSI-X bring-up: enabled with the whole function masked, so
/// the table can be written (some devices only decode it once enabled)
/// while nothing is sent; MSI off (the two must not be on together).
pub fn msix_enable_masked(cfg: &impl ConfigAccess, bdf: Bdf, cap: u8) {
    let c = control(cfg, bdf, cap);
    set_control(cfg, bdf, cap, c | msix_control::ENABLE | msix_control::FUNCTION_MASK);
}

/// Step two: the entries written, the function mask lifted.
pub fn msix_unmask_function(cfg: &impl ConfigAccess, bdf: Bdf, cap: u8) {
    let c = control(cfg, bdf, cap);
    set_control(cfg, bdf, cap, (c | msix_control::ENABLE) & !msix_control::FUNCTION_MASK);
}

/// MSI-X off (the device falls back to MSI or INTx).
pub fn msix_disable(cfg: &impl ConfigAccess, bdf: Bdf, cap: u8) {
    let c = control(cfg, bdf, cap);
    set_control(cfg, bdf, cap, c & !(msix_control::ENABLE | msix_control::FUNCTION_MASK));
}

/// Programs the MSI capability at `cap` with `msg` (one vector: MME zero)
/// and enables it. The layout depends on the 64-bit bit: address low at +4,
/// then either data at +8 (32-bit) or address high at +8 and data at +0xC.
/// A message above 4 GiB on a 32-bit-only function is refused.
pub fn msi_program(cfg: &impl ConfigAccess, bdf: Bdf, cap: u8, msg: Message) -> Result<(), MsiError> {
    let c = control(cfg, bdf, cap);
    let is_64 = c & msi_control::ADDR_64 != 0;
    if !is_64 && msg.address >> 32 != 0 {
        return Err(MsiError::AddressTooHigh);
    }
    // Off while the message changes, so no half-written one is used.
    set_control(cfg, bdf, cap, c & !(msi_control::ENABLE | msi_control::MME_MASK));
    cfg.write32(bdf, cap.wrapping_add(4), msg.address as u32);
    let data_at = if is_64 {
        cfg.write32(bdf, cap.wrapping_add(8), (msg.address >> 32) as u32);
        cap.wrapping_add(0x0c)
    } else {
        cap.wrapping_add(8)
    };
    // The data register is 16 bits; the upper half of its dword is
    // reserved (or, on PCIe, extended data), written as zero.
    cfg.write32(bdf, data_at, msg.data & 0xffff);
    if c & msi_control::PER_VECTOR_MASK != 0 {
        // The mask bits follow the data dword: vector 0 unmasked.
        let mask_at = data_at.wrapping_add(4);
        let mask = cfg.read32(bdf, mask_at);
        cfg.write32(bdf, mask_at, mask & !1);
    }
    let c = c & !msi_control::MME_MASK;
    set_control(cfg, bdf, cap, c | msi_control::ENABLE);
    Ok(())
}

/// MSI off.
pub fn msi_disable(cfg: &impl ConfigAccess, bdf: Bdf, cap: u8) {
    let c = control(cfg, bdf, cap);
    set_control(cfg, bdf, cap, c & !msi_control::ENABLE);
}

/// Sets or clears the command register's INTx disable bit (a function on
/// MSI or MSI-X must not also assert its pin), keeping the other command
/// bits and writing the status half (write-1-to-clear) as zero.
pub fn set_intx_disabled(cfg: &impl ConfigAccess, bdf: Bdf, disabled: bool) {
    let cmd = cfg.read32(bdf, 0x04) & 0xffff;
    let cmd = if disabled { cmd | u32::from(COMMAND_INTX_DISABLE) } else { cmd & !u32::from(COMMAND_INTX_DISABLE) };
    cfg.write32(bdf, 0x04, cmd);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsiError {
    /// The function only takes 32-bit message addresses.
    AddressTooHigh,
}

/// Hands out interrupt vectors from a fixed range, one bit each.
#[derive(Clone, Copy, Debug, Default)]
pub struct VectorPool {
    base: u8,
    count: u8,
    used: u64,
}

impl VectorPool {
    /// Vectors `base..base + count` (at most 64 of them).
    pub const fn new(base: u8, count: u8) -> Self {
        Self { base, count: if count > 64 { 64 } else { count }, used: 0 }
    }

    /// `n` free vectors, all or none (a device asks for its whole set).
    pub fn alloc(&mut self, n: usize, out: &mut [u8]) -> Option<usize> {
        let free = (0..self.count).filter(|i| self.used & 1 << i == 0);
        let picked: alloc::vec::Vec<u8> = free.take(n).collect();
        if picked.len() < n || out.len() < n {
            return None;
        }
        for (slot, i) in out.iter_mut().zip(&picked) {
            self.used |= 1 << i;
            *slot = self.base + i;
        }
        Some(n)
    }

    /// Gives a vector back; one outside the pool or free is ignored.
    pub fn free(&mut self, vector: u8) {
        if let Some(i) = vector.checked_sub(self.base).filter(|&i| i < self.count) {
            self.used &= !(1 << i);
        }
    }

    /// Whether `vector` is in the pool and handed out.
    pub fn is_used(&self, vector: u8) -> bool {
        vector.checked_sub(self.base).filter(|&i| i < self.count).is_some_and(|i| self.used & 1 << i != 0)
    }
}

/// Which message-signalled interrupts the kernel may use, from the command
/// line's `pci=` options (comma-separated, as Linux's): `nomsi` (Linux's:
/// neither, every device on its INTx line) and `nomsix` (this appliance's:
/// MSI but not MSI-X, to run the MSI path on a device that has both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Allowed {
    /// INTx only.
    None,
    /// MSI, not MSI-X.
    Msi,
    /// Both.
    #[default]
    All,
}

impl Allowed {
    pub fn from_cmdline(cmdline: &str) -> Self {
        let mut allowed = Allowed::All;
        for (_, v) in crate::cmdline::params(cmdline).filter(|(k, _)| *k == "pci") {
            for opt in v.split(',') {
                allowed = match opt {
                    "nomsi" => Allowed::None,
                    "nomsix" => allowed.min(Allowed::Msi),
                    _ => allowed,
                };
            }
        }
        allowed
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use alloc::collections::BTreeMap;
    use core::cell::RefCell;

    #[test]
    fn messages_name_the_apic_and_the_vector() {
        let m = Message::new(0x30, 0);
        assert_eq!((m.address, m.data), (0xfee0_0000, 0x30));
        let m = Message::new(0x3f, 3);
        assert_eq!((m.address, m.data), (0xfee0_3000, 0x3f));
        assert_eq!(Message::new(0xff, 0xff).address, 0xfeef_f000);
        assert_eq!(m.vector(), Some(0x3f));
        assert_eq!(Message { address: 0xfee0_0000, data: 0x4030 }.vector(), None, "level: not ours");
        assert_eq!(Message { address: 0xfec0_0000, data: 0x30 }.vector(), None);
    }

    #[test]
    fn table_entries_are_16_bytes_message_first_control_last() {
        let e = table::entry(2, Message::new(0x31, 1), false);
        assert_eq!(e, [(32, 0xfee0_1000), (36, 0), (40, 0x31), (44, 0)]);
        let e = table::entry(0, Message { address: 0x1_2345_6780, data: 7 }, true);
        assert_eq!(e, [(0, 0x2345_6780), (4, 1), (8, 7), (12, table::MASKED)]);
        assert_eq!(table::len(5), 80);
    }

    /// A config space of dwords, with the read-only bits of a real one
    /// where it matters (the capability header's low half).
    #[derive(Default)]
    struct Cfg(RefCell<BTreeMap<u8, u32>>);

    const BDF: Bdf = Bdf { bus: 0, device: 3, function: 0 };

    impl ConfigAccess for Cfg {
        fn read32(&self, _: Bdf, offset: u8) -> u32 {
            self.0.borrow().get(&offset).copied().unwrap_or(0)
        }
        fn write32(&self, _: Bdf, offset: u8, value: u32) {
            self.0.borrow_mut().insert(offset, value);
        }
    }

    #[test]
    fn msix_is_enabled_masked_then_unmasked_keeping_the_header() {
        let c = Cfg::default();
        c.write32(BDF, 0xa0, 0x0004_d011); // MSI-X, next 0xd0, 5 entries
        assert!(!msix_enabled(&c, BDF, 0xa0));
        msix_enable_masked(&c, BDF, 0xa0);
        assert_eq!(c.read32(BDF, 0xa0), 0xc004_d011);
        assert!(msix_enabled(&c, BDF, 0xa0));
        msix_unmask_function(&c, BDF, 0xa0);
        assert_eq!(c.read32(BDF, 0xa0), 0x8004_d011);
        msix_disable(&c, BDF, 0xa0);
        assert_eq!(c.read32(BDF, 0xa0), 0x0004_d011);
    }

    #[test]
    fn msi_with_64_bit_addresses() {
        let c = Cfg::default();
        c.write32(BDF, 0xd0, 0x0080_e005 | 0b010 << 17 | 0b001 << 20); // 64-bit, MMC 4, MME 2 left by someone
        msi_program(&c, BDF, 0xd0, Message::new(0x32, 2)).expect("msi");
        assert_eq!(c.read32(BDF, 0xd4), 0xfee0_2000);
        assert_eq!(c.read32(BDF, 0xd8), 0);
        assert_eq!(c.read32(BDF, 0xdc), 0x32);
        let ctl = control(&c, BDF, 0xd0);
        assert_eq!(ctl & msi_control::MME_MASK, 0, "one vector");
        assert!(msi_enabled(&c, BDF, 0xd0));
        assert_eq!(c.read32(BDF, 0xd0) & 0xffff, 0xe005, "header kept");
        msi_disable(&c, BDF, 0xd0);
        assert!(!msi_enabled(&c, BDF, 0xd0));
    }

    #[test]
    fn msi_with_32_bit_addresses_and_per_vector_masks() {
        let c = Cfg::default();
        c.write32(BDF, 0x50, 0x0100_0005); // 32-bit, per-vector masking
        c.write32(BDF, 0x5c, 0x1); // vector 0 masked
        msi_program(&c, BDF, 0x50, Message::new(0x33, 0)).expect("msi");
        assert_eq!(c.read32(BDF, 0x54), 0xfee0_0000);
        assert_eq!(c.read32(BDF, 0x58), 0x33, "data right after a 32-bit address");
        assert_eq!(c.read32(BDF, 0x5c), 0, "mask bits after the data: unmasked");
        assert!(msi_enabled(&c, BDF, 0x50));
        let high = Message { address: 0x1_fee0_0000, data: 0x33 };
        let c = Cfg::default();
        c.write32(BDF, 0x50, 0x0000_0005);
        assert_eq!(msi_program(&c, BDF, 0x50, high), Err(MsiError::AddressTooHigh));
        assert!(!msi_enabled(&c, BDF, 0x50));
    }

    #[test]
    fn intx_disable_keeps_the_other_command_bits() {
        let c = Cfg::default();
        c.write32(BDF, 0x04, 0x0010_0006);
        set_intx_disabled(&c, BDF, true);
        assert_eq!(c.read32(BDF, 0x04), 0x0406, "status half written as zero");
        set_intx_disabled(&c, BDF, false);
        assert_eq!(c.read32(BDF, 0x04), 0x0006);
    }

    #[test]
    fn vector_pool_hands_out_whole_sets() {
        let mut p = VectorPool::new(48, 16);
        let mut v = [0u8; 3];
        assert_eq!(p.alloc(3, &mut v), Some(3));
        assert_eq!(v, [48, 49, 50]);
        assert!(p.is_used(49) && !p.is_used(51) && !p.is_used(47));
        p.free(49);
        let mut w = [0u8; 14];
        assert_eq!(p.alloc(14, &mut w), Some(14));
        assert_eq!(&w[..2], &[49, 51]);
        assert_eq!(p.alloc(1, &mut v), None, "all 16 in use");
        p.free(200);
        p.free(10);
        assert_eq!(p.alloc(2, &mut [0; 1]), None, "no room in the output");
    }

    #[test]
    fn the_command_line_limits_message_interrupts() {
        assert_eq!(Allowed::from_cmdline("ip=10.0.0.1/24"), Allowed::All);
        assert_eq!(Allowed::from_cmdline("pci=nomsi"), Allowed::None);
        assert_eq!(Allowed::from_cmdline("log=debug pci=noacpi,nomsix"), Allowed::Msi);
        assert_eq!(Allowed::from_cmdline("pci=nomsi pci=nomsix"), Allowed::None, "the stricter stays");
        assert_eq!(Allowed::from_cmdline("pcinomsi"), Allowed::All);
    }
}
