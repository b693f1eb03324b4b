//! `ivshmem-doorbell`'s registers (BAR0) and the facts about its MSI-X
//! vectors (BAR1), from QEMU's docs/specs/ivshmem-spec.rst ("PCI device
//! registers"): the device of a guest that is a peer of an ivshmem server,
//! which can interrupt the other peers and be interrupted by them.
//!
//! Only two registers matter with MSI-X: IVPosition (this peer's ID) and
//! Doorbell (raise vector V of peer P). Interrupt Mask and Status drive the
//! legacy INTx of revision 0 devices, which the appliance does not use.
//! Which kind of device the appliance has is told by its MSI-X capability:
//! `ivshmem-plain` has none (its IVPosition reads zero, as a doorbell
//! device's first peer's does, so the register cannot tell).

use crate::intel::Regs;

/// The BAR holding the registers.
pub const REGISTERS_BAR: usize = 0;
/// Bytes of BAR0 (256; only the first 16 are registers).
pub const REGISTERS_LEN: usize = 256;

/// Interrupt Mask (rev 0 INTx only).
pub const INTR_MASK: u32 = 0;
/// Interrupt Status (rev 0 INTx only; reading clears it).
pub const INTR_STATUS: u32 = 4;
/// IVPosition: this device's peer ID (0..=65535) once it has one from the
/// server; zero on a device without interrupts.
pub const IV_POSITION: u32 = 8;
/// Doorbell (write only): bits 31..16 the peer to interrupt, 15..0 the
/// vector. A write for a peer or vector that is not connected is ignored.
pub const DOORBELL: u32 = 12;

/// The doorbell registers of one ivshmem-doorbell device.
pub struct Doorbell<R: Regs> {
    regs: R,
}

impl<R: Regs> Doorbell<R> {
    pub fn new(regs: R) -> Self {
        Doorbell { regs }
    }

    /// This peer's ID. Devices before QEMU 2.6 (revision 0) read -1 until
    /// the server has given one: `None` then, as for any value beyond 16 bits.
    pub fn position(&self) -> Option<u16> {
        u16::try_from(self.regs.read(IV_POSITION)).ok()
    }

    /// Raises `vector` of peer `peer` (QEMU writes 1 to that peer's eventfd).
    pub fn ring(&mut self, peer: u16, vector: u16) {
        self.regs.write(DOORBELL, u32::from(peer) << 16 | u32::from(vector));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use core::cell::RefCell;

    /// A register file that answers IVPosition and records writes.
    struct Fake {
        position: u32,
        writes: RefCell<Vec<(u32, u32)>>,
    }

    impl Regs for &Fake {
        fn read(&self, offset: u32) -> u32 {
            if offset == IV_POSITION { self.position } else { 0 }
        }
        fn write(&mut self, offset: u32, value: u32) {
            self.writes.borrow_mut().push((offset, value));
        }
    }

    #[test]
    fn position_and_ring() {
        let f = Fake { position: 3, writes: RefCell::default() };
        let mut d = Doorbell::new(&f);
        assert_eq!(d.position(), Some(3));
        d.ring(0x1234, 0);
        d.ring(7, 2);
        assert_eq!(*f.writes.borrow(), [(DOORBELL, 0x1234_0000), (DOORBELL, 0x0007_0002)]);
        let early = Fake { position: u32::MAX, writes: RefCell::default() };
        assert_eq!(Doorbell::new(&early).position(), None, "rev 0 before the server answered");
    }
}
