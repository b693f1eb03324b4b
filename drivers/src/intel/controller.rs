//! What one Intel controller does its own way, for the family's driver
//! ([`Driver`]): its descriptor formats, where its queues' registers are,
//! its reset and bring-up sequence (the 82574 forces its link up; the
//! 82576 restarts its PHY's negotiation and enables its queues), its
//! receive buffer sizes, how it routes interrupt causes to MSI-X vectors,
//! and what a new receive buffer size costs. Everything else the driver
//! does the same way on both.
//!
//! The driver owns a value of the controller type for whatever the
//! controller keeps of its own (the 82576's PHY and queue-restart
//! counters); the hooks are handed the whole driver, whose parts they
//! program through its helpers.
#![forbid(unsafe_code)]

use super::desc::Format;
use super::driver::{Driver, Error};
use super::irq::IrqMode;
use super::regs::{Queue, Regs};
use super::stats::StatsMap;
use alloc::boxed::Box;
use alloc::vec::Vec;
use virtio_drivers::Hal;

pub trait Controller: Default + Sized {
    /// The descriptor formats its queues use.
    type Format: Format;
    /// The largest MTU the driver offers on it.
    const MAX_MTU: usize;
    /// Receive and transmit queue 0's registers.
    const RXQ: Queue;
    const TXQ: Queue;
    /// MSI-X table entries it has.
    const MSIX_ENTRIES: u8;
    /// Which statistics registers the driver reads, by which names.
    const STATS: StatsMap;

    /// The receive buffer length for `mtu`: the smallest the controller
    /// can name that holds a frame.
    fn rx_buf_len(mtu: usize) -> usize;

    /// Resets the device (its datasheet's reset sequence), leaving it with
    /// every interrupt masked; also what a dropped driver does, to stop
    /// the device using its rings.
    fn reset(r: &mut impl Regs) -> Result<(), Error>;

    /// Programs a freshly reset device up to receiving: link, address
    /// filters, both queues (the receive one filled, from `spare` buffers
    /// first, and told). The driver then routes and enables the interrupts
    /// and reads the link.
    fn configure<H: Hal, R: Regs>(nic: &mut Driver<H, R, Self>, spare: Vec<Box<[u8]>>) -> Result<(), Error>;

    /// Writes the receiver's control for the driver's MTU and buffer
    /// length, the receiver on or off.
    fn write_rctl<H: Hal, R: Regs>(nic: &mut Driver<H, R, Self>, enable: bool);

    /// Brings the receive queue to a new buffer length (the driver's
    /// `rx_buf_len`, already set), the buffers posted replaced.
    fn resize_rx<H: Hal, R: Regs>(nic: &mut Driver<H, R, Self>) -> Result<(), Error>;

    /// Routes and enables the interrupt causes as `mode` says (the causes
    /// were masked first).
    fn route_interrupts(r: &mut impl Regs, mode: IrqMode);

    /// Masks whatever the controller has beyond IMC (the 82576's vectors).
    fn mask_vectors(_r: &mut impl Regs) {}

    /// Acknowledges whatever the controller has beyond ICR in `mode` (the
    /// 82576's MSI-X vector causes), before ICR is read.
    fn ack_vectors(_r: &mut impl Regs, _mode: IrqMode) {}
}
