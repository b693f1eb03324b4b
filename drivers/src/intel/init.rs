//! The steps of bring-up both controllers take alike, for their own
//! sequences ([`Controller::reset`], [`Controller::configure`]) to call in
//! the order their datasheets give: the software reset, the station
//! address, a queue's ring registers, the receive ring filled, the
//! receiver's common bits; and, once the controller is done, the
//! interrupts and the link.
#![forbid(unsafe_code)]

use super::controller::Controller;
use super::driver::{DEFAULT_MTU, Driver, Error};
use super::regs::{self, Regs, poll};
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use virtio_drivers::Hal;

/// The software reset (82574 §4.6.1, interrupts during initialization;
/// 82576 §4.2): interrupts masked first and again after the reset, the
/// receiver and transmitter stopped, CTRL.RST polled until it
/// self-clears, stale causes read away.
pub fn reset_device(r: &mut impl Regs) -> Result<(), Error> {
    r.write(regs::IMC, u32::MAX);
    r.write(regs::RCTL, 0);
    r.write(regs::TCTL, 0);
    let ctrl = r.read(regs::CTRL);
    r.write(regs::CTRL, ctrl | regs::CTRL_RST);
    poll(r, regs::CTRL, |v| v & regs::CTRL_RST == 0).ok_or(Error::ResetTimeout)?;
    r.write(regs::IMC, u32::MAX);
    let _ = r.read(regs::ICR);
    Ok(())
}

/// The station MAC: RAL0/RAH0 as the device loaded them from its NVM at
/// reset when valid, else NVM words 0..=2 read through EERD; zero when
/// neither answers.
pub(super) fn read_mac(r: &mut impl Regs) -> [u8; 6] {
    let (lo, hi) = (r.read(regs::RAL0), r.read(regs::RAH0));
    let mut mac = [0u8; 6];
    if hi & regs::RAH_AV != 0 && (lo != 0 || hi & 0xffff != 0) {
        mac[..4].copy_from_slice(&lo.to_le_bytes());
        mac[4..].copy_from_slice(&hi.to_le_bytes()[..2]);
        return mac;
    }
    for (word, pair) in mac.chunks_exact_mut(2).enumerate() {
        r.write(regs::EERD, (word as u32) << regs::EERD_ADDR_SHIFT | regs::EERD_START);
        let Some(v) = poll(r, regs::EERD, |v| v & regs::EERD_DONE != 0) else { return [0; 6] };
        pair.copy_from_slice(&((v >> regs::EERD_DATA_SHIFT) as u16).to_le_bytes());
    }
    mac
}

impl<H: Hal, R: Regs, C: Controller> Driver<H, R, C> {
    /// Brings a freshly reset device up: the controller's sequence, then
    /// the interrupts routed for the mode in use and the link read.
    pub(super) fn configure(&mut self, spare: Vec<Box<[u8]>>) -> Result<(), Error> {
        C::configure(self, spare)?;
        self.program_interrupts();
        self.carrier = self.link_up_now();
        Ok(())
    }

    /// The address filters: our MAC in RAL0/RAH0, the multicast hashes
    /// cleared (RCTL.MPE takes every multicast frame instead).
    pub(crate) fn program_address(&mut self) {
        let m = self.mac;
        let r = &mut self.regs;
        r.write(regs::RAL0, u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        r.write(regs::RAH0, u32::from(u16::from_le_bytes([m[4], m[5]])) | regs::RAH_AV);
        for i in 0..regs::MTA_WORDS {
            r.write(regs::MTA + 4 * i, 0);
        }
    }

    /// The receive queue's ring registers at the ring's start (head and
    /// tail zero: nothing posted yet), and the driver's view to match.
    pub(crate) fn start_rx_ring(&mut self) {
        write_ring(&mut self.regs, C::RXQ, self.rx.base(), self.rx.len_bytes());
        (self.rx_told, self.rx_discarding) = (0, false);
    }

    /// The transmit queue's ring registers at the ring's start.
    pub(crate) fn start_tx_ring(&mut self) {
        write_ring(&mut self.regs, C::TXQ, self.tx.base(), self.tx.len_bytes());
        self.tx_told = 0;
    }

    /// Fills the receive ring with buffers of `rx_buf_len`, taken from
    /// `spare` first, and tells the device.
    pub(crate) fn fill_rx(&mut self, mut spare: Vec<Box<[u8]>>) {
        while self.rx.has_room() {
            let buf = spare.pop().filter(|b| b.len() == self.rx_buf_len);
            let buf = buf.unwrap_or_else(|| vec![0u8; self.rx_buf_len].into_boxed_slice());
            if self.rx.post(buf).is_err() {
                break;
            }
        }
        self.ring_doorbells();
    }

    /// Receive Control's bits both controllers set: the receiver on (or
    /// off), every multicast and broadcast frame taken, the CRC stripped,
    /// long frames admitted above the default MTU. The controller adds how
    /// its buffer size and frame limit are named.
    pub(crate) fn rctl(&self, enable: bool) -> u32 {
        let lpe = if self.mtu > DEFAULT_MTU { regs::RCTL_LPE } else { 0 };
        let en = if enable { regs::RCTL_EN } else { 0 };
        en | regs::RCTL_MPE | regs::RCTL_BAM | regs::RCTL_SECRC | lpe
    }
}

/// A ring's base, length, head and tail registers.
fn write_ring(r: &mut impl Regs, q: regs::Queue, base: u64, len: u32) {
    r.write(q.bal(), base as u32);
    r.write(q.bah(), (base >> 32) as u32);
    r.write(q.dlen(), len);
    r.write(q.head(), 0);
    r.write(q.tail(), 0);
}
