//! The ring's doorbell on an `ivshmem-doorbell` device: hosts ring the
//! appliance through the device's MSI-X vector 0, and the appliance rings a
//! host by writing its peer ID to the Doorbell register (QEMU's
//! docs/specs/ivshmem-spec.rst; `verbs_ring::wake` has the handshakes that
//! keep both rare). An `ivshmem-plain` device (no MSI-X capability), or a
//! command line that forbids MSI-X (`pci=nomsi`, `pci=nomsix`), leaves the
//! ring polled.

use crate::arch::source::IrqSource;
use drivers::intel::Mmio;
use drivers::intel::Regs as _;
use drivers::ivshmem::doorbell::{self, Doorbell as Registers};
use kbase::pci::Function;

/// The vector the appliance rings hosts on (`verbs_ring::wake::WakeBlock::
/// ivshmem`'s; hosts ring the appliance's vector 0, the one set up here).
const HOST_VECTOR: u16 = 0;

pub struct Doorbell {
    regs: Registers<Mmio>,
    irq: IrqSource,
    /// This appliance's peer ID.
    position: u16,
    /// Hosts rung (completion events).
    rings: u64,
}

impl Doorbell {
    /// Switches `f` (the ring's ivshmem device) to MSI-X with one vector,
    /// for hosts to ring; `None` on `ivshmem-plain` or when MSI-X cannot
    /// be had, each said in the log.
    pub fn setup(f: &Function) -> Option<Doorbell> {
        use crate::arch::msi as vectors;
        f.msix()?;
        if !vectors::allowed(kbase::msi::Allowed::All) {
            log::info!("{}: ivshmem-doorbell without MSI-X (command line or no APIC): the ring is polled", f.bdf);
            return None;
        }
        let Some(regs) = crate::net::hal::bar0_registers(f, doorbell::REGISTERS_LEN) else {
            log::warn!("{}: ivshmem-doorbell's registers are not mapped: the ring is polled", f.bdf);
            return None;
        };
        let regs = Registers::new(regs);
        let Some(position) = regs.position() else {
            log::warn!("{}: ivshmem-doorbell has no peer ID: the ring is polled", f.bdf);
            return None;
        };
        let (mut table, entries) = crate::net::hal::msix_table(f)?;
        let mut v = [0u8; 1];
        if !vectors::alloc(&mut v) {
            log::warn!("{}: no interrupt vector free for the doorbell: the ring is polled", f.bdf);
            return None;
        }
        if let Err(e) = crate::pci::msix_setup(f, entries, &v, |off, value| table.write(off, value)) {
            log::warn!("{}: MSI-X: {e:?}: the ring is polled", f.bdf);
            crate::pci::msi_off(f);
            vectors::free(&v);
            return None;
        }
        // QEMU sends an MSI-X message as a bus-master write: without the
        // bit the device's interrupts are dropped.
        crate::net::hal::enable_bus_master(f);
        crate::pci::msix_unmask(f);
        let irq = IrqSource::msix(&v);
        log::info!("{}: ring doorbell: ivshmem peer {position}, {irq}", f.bdf);
        Some(Doorbell { regs, irq, position, rings: 0 })
    }

    /// This appliance's ivshmem peer ID.
    pub fn position(&self) -> u16 {
        self.position
    }

    /// Rings host peer `peer` (a completion event it asked for).
    pub fn ring_host(&mut self, peer: u16) {
        self.regs.ring(peer, HOST_VECTOR);
        self.rings += 1;
    }

    /// Doorbell interrupts taken (hosts that rang).
    pub fn interrupts(&self) -> u64 {
        self.irq.count()
    }

    /// Hosts rung.
    pub fn rings(&self) -> u64 {
        self.rings
    }

    /// The interrupt source, for the log and `ring`.
    pub fn irq(&self) -> IrqSource {
        self.irq
    }
}
