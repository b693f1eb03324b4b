//! How an Intel NIC signals, and how the driver takes, its interrupts.
//! Received frames and link changes interrupt (transmit completions do not:
//! sent buffers are reclaimed on every pass), through the INTA pin, one
//! MSI message, or MSI-X with receive queue 0, transmit queue 0 and the
//! "other" causes (link changes among them) on their own table entries
//! ([`IrqMode`]; 82574 §7.4, 82576 §7.3). The kernel sets up the PCI side
//! and tells the driver the mode; the controller routes the causes
//! ([`Controller::route_interrupts`]), again after every reset, which
//! clears the routing. In every mode the causes are read and acted on in
//! one place, [`Driver::ack_interrupt`], from the poll loop: no
//! auto-clear, no auto-mask, so a cause stays until it is acknowledged.
#![forbid(unsafe_code)]

use super::controller::Controller;
use super::driver::{Driver, Error};
use super::regs::{self, Regs};
use virtio_drivers::Hal;

/// How the device signals its interrupts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IrqMode {
    /// The INTA pin (level; the kernel routes it through a PIC line).
    #[default]
    Intx,
    /// One MSI message for every cause: the device registers are as for
    /// INTx, the kernel switched the function's MSI capability on.
    Msi,
    /// MSI-X, the table entries (below the controller's count) that
    /// receive queue 0, transmit queue 0 and the "other" causes raise; the
    /// kernel programmed the table and enabled the capability.
    Msix { rx: u8, tx: u8, other: u8 },
}

impl<H: Hal, R: Regs, C: Controller> Driver<H, R, C> {
    /// Switches the device to `mode` (the kernel has set up the PCI side:
    /// the MSI capability, or the MSI-X table and capability), for now and
    /// after every reset.
    pub fn set_interrupt_mode(&mut self, mode: IrqMode) -> Result<(), Error> {
        if let IrqMode::Msix { rx, tx, other } = mode
            && [rx, tx, other].iter().any(|&e| e >= C::MSIX_ENTRIES)
        {
            return Err(Error::BadVector);
        }
        self.irq_mode = mode;
        self.regs.write(regs::IMC, u32::MAX);
        C::mask_vectors(&mut self.regs);
        self.program_interrupts();
        Ok(())
    }

    /// The interrupt mode in use.
    pub fn interrupt_mode(&self) -> IrqMode {
        self.irq_mode
    }

    /// Routes and enables the causes for the mode in use.
    pub(super) fn program_interrupts(&mut self) {
        C::route_interrupts(&mut self.regs, self.irq_mode);
    }

    /// Acknowledges the device's interrupt (INTx stays asserted until the
    /// causes are cleared, and in MSI-X mode reading ICR clears nothing:
    /// read ICR, write back what it held; the controller's vector causes
    /// first, the same way); whether the link changed, in which case
    /// [`Driver::carrier`] is fresh.
    pub fn ack_interrupt(&mut self) -> bool {
        C::ack_vectors(&mut self.regs, self.irq_mode);
        let icr = self.regs.read(regs::ICR);
        if icr != 0 {
            self.regs.write(regs::ICR, icr);
        }
        self.handle_causes(icr)
    }

    /// What the interrupt causes in `icr` ask for: overruns counted, the
    /// link read again on a change (whether it changed). Frames and
    /// completions need nothing here: the pass that follows takes them.
    fn handle_causes(&mut self, icr: u32) -> bool {
        if icr & regs::INT_RXO != 0 {
            self.stats.rx_overruns += 1;
        }
        if icr & regs::INT_LSC != 0 {
            self.carrier = self.link_up_now();
            return true;
        }
        false
    }
}
