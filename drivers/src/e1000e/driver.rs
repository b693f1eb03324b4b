//! The 82574L's part of the family's driver ([`crate::intel::Driver`]):
//! its legacy descriptors ([`super::desc`]), reset and bring-up as §4.6 of
//! the datasheet orders them (the link forced up: the internal PHY needs no
//! negotiation here), receive buffer sizes as RCTL names them (a new size
//! costs a reset), and MSI-X routing through its one IVAR (§7.4.2).
#![forbid(unsafe_code)]

use super::desc::Legacy;
use super::regs::{self, Queue, Regs};
use crate::intel::controller::Controller;
use crate::intel::driver::{Driver, Error, L2_OVERHEAD};
use crate::intel::init::reset_device;
use crate::intel::irq::IrqMode;
use crate::intel::stats::{StatsMap, stat_names};
use alloc::boxed::Box;
use alloc::vec::Vec;
use virtio_drivers::Hal;

/// The driver on an 82574L.
pub type E1000e<H, R> = Driver<H, R, I82574>;

/// The largest MTU: the 82574's 9 KB jumbo frames (9018 bytes with the
/// Ethernet header and CRC).
pub const MAX_MTU: usize = 9000;

/// The 82574L, as the family's driver sees it. It keeps nothing of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct I82574;

/// The receive buffer size for `mtu` and the RCTL bits naming it
/// (BSIZE/BSEX, §10.2.5's RCTL table): the smallest that holds a frame.
fn rx_buffer(mtu: usize) -> (usize, u32) {
    let need = mtu + L2_OVERHEAD;
    let bsize = |b: u32| b << regs::RCTL_BSIZE_SHIFT;
    if need <= 2048 {
        (2048, bsize(0b00))
    } else if need <= 4096 {
        (4096, bsize(0b11) | regs::RCTL_BSEX)
    } else if need <= 8192 {
        (8192, bsize(0b10) | regs::RCTL_BSEX)
    } else {
        (16384, bsize(0b01) | regs::RCTL_BSEX)
    }
}

impl Controller for I82574 {
    type Format = Legacy;
    const MAX_MTU: usize = MAX_MTU;
    const RXQ: Queue = regs::RXQ;
    const TXQ: Queue = regs::TXQ;
    const MSIX_ENTRIES: u8 = regs::MSIX_ENTRIES;
    /// ROC is not read (the driver sets no long-packet limit of its own).
    const STATS: StatsMap = StatsMap { oversize: false, names: stat_names!("e1000e") };

    fn rx_buf_len(mtu: usize) -> usize {
        rx_buffer(mtu).0
    }

    /// The family's reset (§4.6.1, interrupts during initialization:
    /// masked first and again after the global reset, CTRL.RST polled
    /// until it self-clears), then the link forced up.
    fn reset(r: &mut impl Regs) -> Result<(), Error> {
        reset_device(r)?;
        let ctrl = r.read(regs::CTRL);
        let clear = regs::CTRL_LRST | regs::CTRL_PHY_RST | regs::CTRL_ILOS | regs::CTRL_VME;
        r.write(regs::CTRL, (ctrl | regs::CTRL_SLU | regs::CTRL_ASDE) & !clear);
        Ok(())
    }

    /// Address filters, both rings (the receive one filled, from `spare`
    /// buffers first), in §4.6's order.
    fn configure<H: Hal, R: Regs>(nic: &mut Driver<H, R, Self>, spare: Vec<Box<[u8]>>) -> Result<(), Error> {
        nic.program_address();
        // Interrupt at once for each frame: no throttling, no delay timers.
        let r = &mut nic.regs;
        r.write(regs::ITR, 0);
        r.write(regs::RDTR, 0);
        r.write(regs::RADV, 0);
        nic.start_rx_ring();
        nic.start_tx_ring();
        let r = &mut nic.regs;
        r.write(regs::TIPG, regs::TIPG_DEFAULT);
        r.write(regs::TCTL, regs::TCTL_EN | regs::TCTL_PSP | regs::TCTL_CT | regs::TCTL_COLD);
        // Enable the receiver before giving it buffers (§7.1.8: it fetches
        // descriptors once the tail moves).
        // Checksum verification on (§7.1, receive): the verdict is in every
        // descriptor written back.
        r.write(regs::RXCSUM, regs::RXCSUM_IPOFLD | regs::RXCSUM_TUOFLD);
        Self::write_rctl(nic, true);
        nic.fill_rx(spare);
        Ok(())
    }

    fn write_rctl<H: Hal, R: Regs>(nic: &mut Driver<H, R, Self>, enable: bool) {
        let (_, size_bits) = rx_buffer(nic.mtu);
        let rctl = nic.rctl(enable) | size_bits;
        nic.regs.write(regs::RCTL, rctl);
    }

    /// RCTL's buffer size is the whole receiver's: a reset, the ring
    /// refilled with buffers of the new size.
    fn resize_rx<H: Hal, R: Regs>(nic: &mut Driver<H, R, Self>) -> Result<(), Error> {
        nic.reset()
    }

    /// §7.4.2 for MSI-X: IVAR, CTRL_EXT.PBA_SUPPORT; no auto-clear, no
    /// auto-mask, so a cause stays in ICR until `ack_interrupt` clears it,
    /// as with INTx.
    fn route_interrupts(r: &mut impl Regs, mode: IrqMode) {
        let (ivar, pba, ims) = match mode {
            IrqMode::Msix { rx, tx, other } => {
                let alloc = |entry: u8, shift: u32| (u32::from(entry) | regs::IVAR_VALID) << shift;
                let ivar = alloc(rx, regs::IVAR_RXQ0_SHIFT)
                    | alloc(tx, regs::IVAR_TXQ0_SHIFT)
                    | alloc(other, regs::IVAR_OTHER_SHIFT);
                (ivar, regs::CTRL_EXT_PBA_SUPPORT, regs::INT_ENABLED_MSIX)
            }
            IrqMode::Intx | IrqMode::Msi => (0, 0, regs::INT_ENABLED),
        };
        let ctrl_ext = r.read(regs::CTRL_EXT) & !(regs::CTRL_EXT_PBA_SUPPORT | regs::CTRL_EXT_IAME);
        r.write(regs::CTRL_EXT, ctrl_ext | pba);
        r.write(regs::EIAC, 0);
        r.write(regs::IAM, 0);
        r.write(regs::IVAR, ivar);
        for v in 0..u32::from(regs::MSIX_ENTRIES) {
            r.write(regs::EITR0 + 4 * v, 0);
        }
        r.write(regs::IMS, ims);
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Fake82574;
    use super::*;
    use crate::intel::fake::{MAC, POSTED};
    use crate::nic::Nic;

    type Rig = crate::intel::fake::Rig<Fake82574>;

    #[test]
    fn bring_up_resets_and_programs_both_rings() {
        let r = Rig::new();
        assert_eq!(r.dev.borrow().resets, 1);
        assert_eq!((r.nic.mac(), r.nic.mtu(), r.nic.max_frame_len()), (MAC, 1500, 1514));
        assert_eq!((r.reg(regs::RXQ.dlen()), r.reg(regs::TXQ.dlen())), (4096, 4096));
        assert_ne!(r.reg(regs::RXQ.bal()), 0);
        assert_eq!(r.rx_available(), POSTED, "the receive ring full, one slot kept empty");
        assert_eq!(r.writes(regs::RXQ.tail()), 2, "zeroed, then one doorbell for the whole ring");
        let rctl = r.reg(regs::RCTL);
        assert_eq!(rctl & (regs::RCTL_EN | regs::RCTL_SECRC), regs::RCTL_EN | regs::RCTL_SECRC);
        assert_eq!(rctl & regs::RCTL_LPE, 0, "no long frames at 1500");
        assert_eq!(r.dev.borrow().rx_buffer_size(), 2048);
        assert_eq!(r.reg(regs::IMS), regs::INT_ENABLED);
        assert_ne!(r.reg(regs::TCTL) & regs::TCTL_EN, 0);
        assert_ne!(r.reg(regs::CTRL) & regs::CTRL_SLU, 0);
        assert!(r.nic.carrier() && r.nic.link_up());
        assert_eq!(r.reg(regs::RAH0), 0x5634 | regs::RAH_AV, "the address filter keeps our MAC");
    }

    #[test]
    fn jumbo_frames_need_the_mtu_raised() {
        let mut r = Rig::new();
        assert_eq!(r.nic.transmit(1515, |_| ()), None);
        r.nic.set_mtu(9000).expect("mtu");
        assert_eq!(r.dev.borrow().resets, 2, "a new buffer size resets the device");
        assert_eq!(r.dev.borrow().rx_buffer_size(), 16384);
        assert_ne!(r.reg(regs::RCTL) & regs::RCTL_LPE, 0);
        assert_eq!(r.rx_available(), POSTED);
        assert_eq!(r.nic.transmit(9015, |_| ()), None);
        assert_eq!(r.nic.transmit(9014, |b| b.len()), Some(9014));
        r.nic.service();
        assert_eq!(r.send_all()[0].len(), 9014);
        let frame = alloc::vec![0xab; 9014];
        assert!(r.deliver(&frame));
        let rx = r.nic.receive().expect("jumbo frame");
        assert_eq!(rx.as_ref(), &frame[..]);
        r.nic.recycle(rx);
        // 4096 + headers: the RoCE MTU 4096 case takes 8 KiB buffers.
        r.nic.set_mtu(4200).expect("mtu");
        assert_eq!(r.dev.borrow().rx_buffer_size(), 8192);
        // Same buffer size: no reset, the long-frame bit follows.
        r.nic.set_mtu(1400).expect("mtu");
        let resets = r.dev.borrow().resets;
        r.nic.set_mtu(1600).expect("mtu");
        assert_eq!(r.dev.borrow().resets, resets);
        assert_ne!(r.reg(regs::RCTL) & regs::RCTL_LPE, 0);
        assert_eq!(r.nic.set_mtu(9001), Err(Error::BadMtu));
        assert_eq!(r.nic.set_mtu(67), Err(Error::BadMtu));
        assert_eq!(r.nic.mtu(), 1600);
    }

    #[test]
    fn msix_routes_rx_tx_and_other_and_survives_a_reset() {
        let mut r = Rig::new();
        assert_eq!(r.nic.interrupt_mode(), IrqMode::Intx);
        assert_eq!((r.reg(regs::IVAR), r.reg(regs::CTRL_EXT) & regs::CTRL_EXT_PBA_SUPPORT), (0, 0));
        r.dev.borrow_mut().msix = true;
        r.nic.set_interrupt_mode(IrqMode::Msix { rx: 0, tx: 1, other: 2 }).expect("msix");
        // Entry | valid per nibble: RxQ0 bits 3:0, TxQ0 11:8, other 19:16.
        assert_eq!(r.reg(regs::IVAR), 0x000a_0908);
        assert_ne!(r.reg(regs::CTRL_EXT) & regs::CTRL_EXT_PBA_SUPPORT, 0);
        assert_eq!(r.reg(regs::CTRL_EXT) & regs::CTRL_EXT_IAME, 0, "no auto-mask");
        assert_eq!((r.reg(regs::EIAC), r.reg(regs::IAM)), (0, 0), "no auto-clear: the poll loop acks");
        assert_eq!(r.reg(regs::IMS), regs::INT_ENABLED_MSIX);
        assert_eq!(r.reg(regs::IMS) & regs::INT_TXQ0, 0, "transmit completions stay quiet");
        for v in 0..u32::from(regs::MSIX_ENTRIES) {
            assert!(r.writes(regs::EITR0 + 4 * v) > 0 && r.reg(regs::EITR0 + 4 * v) == 0, "no throttling on {v}");
        }

        // A frame: the receive entry; acknowledged through ICR as before.
        r.deliver(&[1; 64]);
        assert_eq!(r.dev.borrow().messages, [0]);
        assert!(!r.nic.ack_interrupt());
        assert_eq!(r.reg(regs::ICR), 0, "written back: cleared (a read alone clears nothing)");
        assert!(r.nic.receive().is_some());
        // A link change: the "other" entry, and the carrier is read.
        r.dev.borrow_mut().set_link(false);
        assert_eq!(r.dev.borrow().messages, [0, 2]);
        assert!(r.nic.ack_interrupt());
        assert!(!r.nic.carrier());
        assert_eq!(r.reg(regs::ICR), 0);

        // A reset (MTU change) clears the device's routing; the driver
        // programs it again.
        r.nic.set_mtu(9000).expect("mtu");
        assert_eq!(r.dev.borrow().resets, 2);
        assert_eq!(r.reg(regs::IVAR), 0x000a_0908);
        assert_eq!(r.reg(regs::IMS), regs::INT_ENABLED_MSIX);
        assert_ne!(r.reg(regs::CTRL_EXT) & regs::CTRL_EXT_PBA_SUPPORT, 0);

        // Back to INTx (or MSI: the same device registers).
        r.dev.borrow_mut().msix = false;
        r.nic.set_interrupt_mode(IrqMode::Msi).expect("msi");
        assert_eq!((r.reg(regs::IVAR), r.reg(regs::CTRL_EXT) & regs::CTRL_EXT_PBA_SUPPORT), (0, 0));
        assert_eq!(r.reg(regs::IMS), regs::INT_ENABLED);
        let bad = IrqMode::Msix { rx: 0, tx: 1, other: regs::MSIX_ENTRIES };
        assert_eq!(r.nic.set_interrupt_mode(bad), Err(Error::BadVector));
        assert_eq!(r.nic.interrupt_mode(), IrqMode::Msi, "unchanged");
    }
}
