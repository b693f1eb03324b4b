//! The 82576's part of the family's driver ([`crate::intel::Driver`]):
//! its advanced descriptors ([`super::desc`]), reset and bring-up in the
//! order of the datasheet's software initialization (chapter 4: interrupts
//! masked, CTRL.RST, link setup, the queues, interrupts enabled), receive
//! buffer sizes per queue (SRRCTL), and MSI-X routing through IVAR0,
//! IVAR_MISC and the extended interrupt registers (§7.3).
//!
//! Unlike the 82574, a reset here resets the PHY too: the link goes down
//! and comes back once auto-negotiation, restarted through MDIC, completes
//! (half a second under QEMU), with an LSC interrupt. So an MTU change
//! that needs new buffer sizes restarts only the receive queue (SRRCTL is
//! per queue, and a queue may be stopped and started alone, chapter 4), not
//! the device, and the carrier stays up.
#![forbid(unsafe_code)]

use super::desc::Advanced;
use super::regs::{self, Queue, Regs, poll};
use crate::intel::controller::Controller;
use crate::intel::driver::{Driver, Error, L2_OVERHEAD};
use crate::intel::init::reset_device;
use crate::intel::irq::IrqMode;
use crate::intel::stats::{StatsMap, stat_names};
use alloc::boxed::Box;
use alloc::vec::Vec;
use virtio_drivers::Hal;

/// The driver on an 82576. The carrier comes up with the first
/// link-change interrupt after bring-up, once the PHY has negotiated.
pub type Igb<H, R> = Driver<H, R, I82576>;

/// The largest MTU the driver offers: 9000, the appliance's jumbo size
/// (the 82576 itself takes frames up to 9.5 KB).
pub const MAX_MTU: usize = 9000;
/// The CRC, which RLPML counts.
const CRC_LEN: usize = 4;
/// SRRCTL sizes packet buffers in KiB.
const BUF_UNIT: usize = 1024;
/// RXDMT0 when this many free descriptors remain (RDMTS counts 16s).
pub const RDMTS: u32 = 2;

/// The 82576, as the family's driver sees it: its own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct I82576 {
    /// Receive queue restarts for a new buffer size (MTU changes).
    pub rx_restarts: u64,
    /// Auto-negotiation restarts the PHY did not acknowledge (MDIC).
    pub phy_errors: u64,
}

/// Link setup for the internal copper PHY (chapter 4): the MAC follows the
/// PHY's speed and duplex (SLU set, nothing forced, the link out of
/// reset), and the PHY negotiates again. Whether the PHY took the command.
fn set_up_link(r: &mut impl Regs) -> bool {
    let ctrl = r.read(regs::CTRL);
    let clear =
        regs::CTRL_LRST | regs::CTRL_PHY_RST | regs::CTRL_ILOS | regs::CTRL_VME | regs::CTRL_FRCSPD | regs::CTRL_FRCDPX;
    r.write(regs::CTRL, (ctrl | regs::CTRL_SLU) & !clear);
    let bmcr = regs::BMCR_AN_ENABLE | regs::BMCR_RESTART_AN | regs::BMCR_FULL_DUPLEX | regs::BMCR_SPEED1000;
    r.write(
        regs::MDIC,
        u32::from(bmcr)
            | regs::PHY_BMCR << regs::MDIC_REG_SHIFT
            | regs::MDIC_PHY_INTERNAL << regs::MDIC_PHY_SHIFT
            | regs::MDIC_OP_WRITE,
    );
    poll(r, regs::MDIC, |v| v & regs::MDIC_READY != 0).is_some_and(|v| v & regs::MDIC_ERROR == 0)
}

/// Turns a queue's descriptor control on or off and waits for the device
/// to say so (RXDCTL, TXDCTL in chapter 8: ENABLE reads back once the
/// queue switched).
fn switch_queue(r: &mut impl Regs, xdctl: u32, on: bool) -> Result<(), Error> {
    let enable = if on { regs::XDCTL_ENABLE } else { 0 };
    r.write(xdctl, regs::XDCTL_WTHRESH_1 | enable);
    poll(r, xdctl, |v| v & regs::XDCTL_ENABLE == enable).map(|_| ()).ok_or(Error::QueueTimeout)
}

/// The transmit queue at its ring's start (chapter 4), enabled.
fn start_tx<H: Hal, R: Regs>(nic: &mut Igb<H, R>) -> Result<(), Error> {
    nic.start_tx_ring();
    let r = &mut nic.regs;
    switch_queue(r, regs::TXDCTL, true)?;
    let tctl = regs::TCTL_EN | regs::TCTL_PSP | regs::TCTL_CT | regs::TCTL_COLD | regs::TCTL_RTLC;
    r.write(regs::TCTL, tctl);
    Ok(())
}

/// The receive queue at its ring's start (chapter 4) with buffers of
/// `rx_buf_len`, taken from `spare` first, and the receiver on.
fn start_rx<H: Hal, R: Regs>(nic: &mut Igb<H, R>, spare: Vec<Box<[u8]>>) -> Result<(), Error> {
    nic.start_rx_ring();
    let kib = (nic.rx_buf_len / BUF_UNIT) as u32 & regs::SRRCTL_BSIZEPKT_MASK;
    let r = &mut nic.regs;
    r.write(regs::SRRCTL, kib | regs::SRRCTL_DESCTYPE_ADV_ONEBUF | RDMTS << regs::SRRCTL_RDMTS_SHIFT);
    // The queue first, then the receiver (chapter 4); buffers once both
    // are on, since a tail written to a disabled queue is ignored.
    switch_queue(r, regs::RXDCTL, true)?;
    // Checksum verification on (§7.1, receive): the verdict is in every
    // descriptor written back.
    r.write(regs::RXCSUM, regs::RXCSUM_IPOFLD | regs::RXCSUM_TUOFLD);
    I82576::write_rctl(nic, true);
    nic.fill_rx(spare);
    Ok(())
}

impl Controller for I82576 {
    type Format = Advanced;
    const MAX_MTU: usize = MAX_MTU;
    const RXQ: Queue = regs::RXQ;
    const TXQ: Queue = regs::TXQ;
    const MSIX_ENTRIES: u8 = regs::MSIX_ENTRIES;
    /// ROC is read too: RLPML, which the driver sets, decides what is
    /// oversize.
    const STATS: StatsMap = StatsMap { oversize: true, names: stat_names!("igb") };

    /// The smallest whole number of KiB that holds a frame.
    fn rx_buf_len(mtu: usize) -> usize {
        (mtu + L2_OVERHEAD).div_ceil(BUF_UNIT) * BUF_UNIT
    }

    /// The family's reset (§4.2, software reset: interrupts masked first
    /// and after, CTRL.RST polled until it self-clears). The queues, the
    /// MAC and the PHY are back at their power-up state.
    fn reset(r: &mut impl Regs) -> Result<(), Error> {
        reset_device(r)
    }

    /// Link, address filters, both queues (the receive one filled, from
    /// `spare` buffers first).
    fn configure<H: Hal, R: Regs>(nic: &mut Driver<H, R, Self>, spare: Vec<Box<[u8]>>) -> Result<(), Error> {
        if !set_up_link(&mut nic.regs) {
            nic.ctl.phy_errors += 1;
        }
        nic.program_address();
        start_tx(nic)?;
        start_rx(nic, spare)
    }

    /// The receiver's control and its long-frame limit for the MTU.
    fn write_rctl<H: Hal, R: Regs>(nic: &mut Driver<H, R, Self>, enable: bool) {
        let limit = (nic.mtu + L2_OVERHEAD + CRC_LEN) as u32;
        let rctl = nic.rctl(enable);
        nic.regs.write(regs::RLPML, limit);
        nic.regs.write(regs::RCTL, rctl);
    }

    /// Stops the receive queue, takes its buffers back and starts it again
    /// with buffers of the current size: what a new MTU needs, without the
    /// device reset that would take the link down.
    /// A queue that will not stop may still write into its buffers: then
    /// the whole device is reset instead, which stops it for sure.
    fn resize_rx<H: Hal, R: Regs>(nic: &mut Driver<H, R, Self>) -> Result<(), Error> {
        nic.ctl.rx_restarts += 1;
        Self::write_rctl(nic, false);
        if switch_queue(&mut nic.regs, regs::RXDCTL, false).is_err() {
            return nic.reset();
        }
        let spare = nic.rx.drain();
        start_rx(nic, spare)
    }

    /// INTx and MSI: legacy mode, the causes in IMS. MSI-X (§7.3):
    /// GPIE.MSIX_MODE and PBA, the receive and transmit queue 0 entries of
    /// IVAR0, the other causes' entry of IVAR_MISC, the receive and other
    /// vectors enabled in EIMS (transmit completions are reaped on every
    /// pass, so their vector stays masked), link changes and overruns in
    /// IMS. No auto-clear, no auto-mask: a cause stays until
    /// `ack_interrupt` clears it. GPIE goes first: the device reads EIMS's
    /// bits as vectors only in MSI-X mode.
    fn route_interrupts(r: &mut impl Regs, mode: IrqMode) {
        let entry = |e: u8, shift: u32| (u32::from(e) | regs::IVAR_VALID) << shift;
        let (gpie, ivar, misc, eims, ims) = match mode {
            IrqMode::Msix { rx, tx, other } => (
                regs::GPIE_MSIX_MODE | regs::GPIE_PBA,
                entry(rx, regs::IVAR_RXQ0_SHIFT) | entry(tx, regs::IVAR_TXQ0_SHIFT),
                entry(other, regs::IVAR_OTHER_SHIFT),
                1 << rx | 1 << other,
                regs::INT_ENABLED_MSIX,
            ),
            IrqMode::Intx | IrqMode::Msi => (0, 0, 0, 0, regs::INT_ENABLED),
        };
        r.write(regs::GPIE, gpie);
        r.write(regs::IVAR0, ivar);
        r.write(regs::IVAR_MISC, misc);
        r.write(regs::EIAC, 0);
        // Interrupt at once for each frame: no throttling on any vector
        // (EITR0 is the legacy modes' too).
        for v in 0..u32::from(regs::MSIX_ENTRIES) {
            r.write(regs::EITR0 + 4 * v, 0);
        }
        if eims != 0 {
            r.write(regs::EIMS, eims);
        }
        r.write(regs::IMS, ims);
    }

    /// The vectors too (EIMC).
    fn mask_vectors(r: &mut impl Regs) {
        r.write(regs::EIMC, u32::MAX);
    }

    /// In MSI-X mode EICR is cleared first, as ICR is: a vector fires again
    /// only once its bit has fallen, and a cause arriving after this read
    /// raises its bit anew (one arriving between the two reads is in ICR,
    /// taken next).
    fn ack_vectors(r: &mut impl Regs, mode: IrqMode) {
        if let IrqMode::Msix { .. } = mode {
            let eicr = r.read(regs::EICR);
            if eicr != 0 {
                r.write(regs::EICR, eicr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Fake82576;
    use super::*;
    use crate::fake::FakeHal;
    use crate::intel::driver::DEFAULT_MTU;
    use crate::intel::fake::{FakeRegs, MAC, POSTED};
    use crate::nic::Nic;

    type Rig = crate::intel::fake::Rig<Fake82576>;
    type Device = crate::intel::fake::Device<Fake82576>;

    #[test]
    fn bring_up_resets_programs_both_queues_and_negotiates_the_link() {
        let dev = Device::new(MAC);
        let mut nic = Igb::<FakeHal, _>::new(FakeRegs(dev.clone()), DEFAULT_MTU).expect("device");
        let reg = |r| dev.borrow().reg(r);
        assert_eq!(dev.borrow().resets, 1);
        assert_eq!((nic.mac(), nic.mtu(), nic.max_frame_len()), (MAC, 1500, 1514));
        assert_eq!((reg(regs::RXQ.dlen()), reg(regs::TXQ.dlen())), (4096, 4096));
        assert_ne!(reg(regs::RXQ.bal()), 0);
        assert_ne!(reg(regs::TXQ.bal()), 0);
        assert_eq!(dev.borrow().rx_buffer_size(), 2048);
        assert_eq!(reg(regs::SRRCTL) >> regs::SRRCTL_RDMTS_SHIFT & 0x1f, RDMTS);
        assert_ne!(reg(regs::RXDCTL) & regs::XDCTL_ENABLE, 0);
        assert_ne!(reg(regs::TXDCTL) & regs::XDCTL_ENABLE, 0);
        assert_eq!(dev.borrow().rx_available(), POSTED, "the receive ring full, one slot kept empty");
        assert_eq!(dev.borrow().writes(regs::RXQ.tail()), 2, "zeroed, then one doorbell for the whole ring");
        let rctl = reg(regs::RCTL);
        let want = regs::RCTL_EN | regs::RCTL_SECRC | regs::RCTL_BAM | regs::RCTL_MPE;
        assert_eq!(rctl & want, want, "broadcast and every multicast accepted, CRC stripped");
        assert_eq!(rctl & regs::RCTL_LPE, 0, "no long frames at 1500");
        assert_eq!(reg(regs::IMS), regs::INT_ENABLED);
        assert_ne!(reg(regs::TCTL) & regs::TCTL_EN, 0);
        let ctrl = reg(regs::CTRL);
        assert_eq!(ctrl & (regs::CTRL_SLU | regs::CTRL_LRST), regs::CTRL_SLU, "link set up, out of reset");
        assert_eq!(reg(regs::RAH0), 0x5634 | regs::RAH_AV, "the address filter keeps our MAC");
        // The PHY was reset with the MAC: down until it has negotiated.
        assert!(dev.borrow().model.negotiating, "auto-negotiation restarted through MDIC");
        assert!(!nic.carrier() && !nic.link_up());
        dev.borrow_mut().finish_negotiation();
        assert!(nic.ack_interrupt(), "LSC");
        assert!(nic.carrier() && nic.link_up());
        assert_eq!(nic.controller().phy_errors, 0);
    }

    #[test]
    fn a_queue_that_never_switches_on_fails_bring_up() {
        let dev = Device::new(MAC);
        dev.borrow_mut().model.rx_queue_stuck = true;
        let r = Igb::<FakeHal, _>::new(FakeRegs(dev), 1500);
        assert_eq!(r.err(), Some(Error::QueueTimeout));
    }

    #[test]
    fn a_phy_that_does_not_answer_is_counted_not_fatal() {
        let dev = Device::new(MAC);
        dev.borrow_mut().model.phy_broken = true;
        let mut nic = Igb::<FakeHal, _>::new(FakeRegs(dev.clone()), 1500).expect("device");
        assert_eq!(nic.controller().phy_errors, 1);
        assert!(!nic.carrier());
        // The rings work regardless (a link forced up elsewhere would carry).
        assert!(nic.transmit(60, |b| b.fill(1)).is_some());
        nic.service();
        assert_eq!(dev.borrow_mut().send_all(), alloc::vec![alloc::vec![1; 60]]);
    }

    #[test]
    fn jumbo_frames_resize_the_receive_queue_without_a_reset() {
        let mut r = Rig::new();
        assert_eq!(r.nic.transmit(1515, |_| ()), None);
        assert!(!r.deliver(&[1; 1600]), "too long for a 1500 MTU");
        r.nic.set_mtu(9000).expect("mtu");
        assert_eq!(r.resets(), 1, "the queue restarted, the device (and the link) left alone");
        assert!(r.nic.carrier());
        assert_eq!(r.nic.controller().rx_restarts, 1);
        assert_eq!(r.dev.borrow().rx_buffer_size(), 9 * 1024);
        assert_ne!(r.reg(regs::RCTL) & (regs::RCTL_LPE | regs::RCTL_EN), 0);
        assert_eq!(r.reg(regs::RLPML), 9022, "the frame with its CRC");
        assert_eq!((r.reg(regs::RXQ.head()), r.rx_available()), (0, POSTED));
        assert_eq!(r.nic.transmit(9015, |_| ()), None);
        assert_eq!(r.nic.transmit(9014, |b| b.len()), Some(9014));
        r.nic.service();
        assert_eq!(r.send_all()[0].len(), 9014);
        let frame = alloc::vec![0xab; 9018];
        assert!(r.deliver(&frame), "the largest frame, a VLAN tag's room included");
        let rx = r.nic.receive().expect("jumbo frame");
        assert_eq!(rx.as_ref(), &frame[..]);
        r.nic.recycle(rx);
        assert!(!r.deliver(&alloc::vec![1; 9019]), "over RLPML");
        r.nic.watchdog(0);
        assert_eq!(r.nic.hw_stats().rx_oversize, 2);
        // 4096 + headers: the RoCE MTU 4096 case.
        r.nic.set_mtu(4200).expect("mtu");
        assert_eq!(r.dev.borrow().rx_buffer_size(), 5 * 1024);
        // Same buffer size: no restart, the long-frame settings follow.
        r.nic.set_mtu(1400).expect("mtu");
        assert_eq!(r.reg(regs::RCTL) & regs::RCTL_LPE, 0);
        let restarts = r.nic.controller().rx_restarts;
        r.nic.set_mtu(1600).expect("mtu");
        assert_eq!(r.nic.controller().rx_restarts, restarts);
        assert_ne!(r.reg(regs::RCTL) & regs::RCTL_LPE, 0);
        assert_eq!(r.reg(regs::RLPML), 1622);
        assert_eq!(r.nic.set_mtu(9001), Err(Error::BadMtu));
        assert_eq!(r.nic.set_mtu(67), Err(Error::BadMtu));
        assert_eq!(r.nic.mtu(), 1600);
        assert_eq!(r.resets(), 1);
    }

    #[test]
    fn a_receive_queue_that_will_not_stop_gets_a_device_reset_instead() {
        let mut r = Rig::new();
        r.dev.borrow_mut().model.rx_queue_wont_stop = true;
        r.nic.set_mtu(9000).expect("mtu");
        assert_eq!(r.resets(), 2, "the reset stopped the queue for sure");
        assert_eq!(r.dev.borrow().rx_buffer_size(), 9 * 1024);
        assert_eq!(r.rx_available(), POSTED);
        assert!(!r.nic.carrier(), "the PHY negotiates again");
        r.dev.borrow_mut().finish_negotiation();
        assert!(r.nic.ack_interrupt() && r.nic.carrier());
        assert!(r.deliver(&alloc::vec![4; 9000]));
        assert_eq!(r.nic.receive().map(|f| f.as_ref().len()), Some(9000));
    }

    #[test]
    fn frames_lent_across_an_mtu_change_are_replaced_by_buffers_of_the_new_size() {
        let mut r = Rig::new();
        r.deliver(&[5; 64]);
        let rx = r.nic.receive().expect("frame");
        r.nic.set_mtu(9000).expect("mtu");
        assert_eq!(r.rx_available(), POSTED, "a full ring without the lent buffer");
        r.nic.recycle(rx);
        r.nic.service();
        assert_eq!(r.nic.stats().rx_errors, 1, "the ring is full: counted, not lost memory");
        assert!(r.deliver(&alloc::vec![3; 9000]));
        assert_eq!(r.nic.receive().map(|f| f.as_ref().len()), Some(9000));
    }

    #[test]
    fn a_frame_spread_over_buffers_is_dropped_whole() {
        let mut r = Rig::new();
        // The device's limit raised behind the driver's back: 3 KiB frames
        // land in two 2 KiB buffers.
        let rctl = r.reg(regs::RCTL) | regs::RCTL_LPE;
        r.dev.borrow_mut().regs.insert(regs::RCTL, rctl);
        r.dev.borrow_mut().regs.insert(regs::RLPML, 4000);
        assert!(r.deliver(&[1; 3000]));
        assert!(r.deliver(&[2; 100]));
        assert_eq!(r.nic.receive().map(|f| f.as_ref().to_vec()), Some(alloc::vec![2; 100]));
        let s = r.nic.stats();
        assert_eq!((s.rx_errors, s.rx_faults.chained), (2, 1));
    }

    /// The MSI-X routing the rig is switched to: receive queue 0 on entry
    /// 0, transmit queue 0 on 1, the other causes on 2 (the kernel's).
    const MSIX: IrqMode = IrqMode::Msix { rx: 0, tx: 1, other: 2 };

    /// What MSI-X mode leaves in the device's registers.
    fn assert_msix_programmed(r: &Rig) {
        let gpie = r.reg(regs::GPIE);
        assert_eq!(gpie & (regs::GPIE_MSIX_MODE | regs::GPIE_PBA), regs::GPIE_MSIX_MODE | regs::GPIE_PBA);
        assert_eq!(gpie & (regs::GPIE_EIAME | regs::GPIE_NSICR), 0, "no auto-mask, no clear-on-read mode");
        // Entry | valid per byte: RxQ0 bits 7:0, TxQ0 15:8; other 15:8 of IVAR_MISC.
        assert_eq!(r.reg(regs::IVAR0), 0x0000_8180);
        assert_eq!(r.reg(regs::IVAR_MISC), 0x0000_8200);
        assert_eq!(r.reg(regs::EIMS), 0b101, "the receive and other vectors");
        assert_eq!(r.reg(regs::EIAC), 0, "no auto-clear: the poll loop acks");
        assert_eq!(r.reg(regs::IMS), regs::INT_ENABLED_MSIX);
        assert_eq!(r.reg(regs::IMS) & regs::INT_RXDW, 0, "frames come on their own vector only");
        for v in 0..u32::from(regs::MSIX_ENTRIES) {
            assert!(r.writes(regs::EITR0 + 4 * v) > 0 && r.reg(regs::EITR0 + 4 * v) == 0, "no throttling on {v}");
        }
    }

    #[test]
    fn msix_routes_rx_tx_and_other_and_survives_a_reset() {
        let mut r = Rig::new();
        assert_eq!(r.nic.interrupt_mode(), IrqMode::Intx);
        assert_eq!((r.reg(regs::GPIE), r.reg(regs::IVAR0), r.reg(regs::IVAR_MISC)), (0, 0, 0));
        r.dev.borrow_mut().msix = true;
        r.nic.set_interrupt_mode(MSIX).expect("msix");
        assert_eq!(r.nic.interrupt_mode(), MSIX);
        assert_msix_programmed(&r);
        assert!(r.dev.borrow().messages.is_empty(), "nothing was pending");

        // A frame: the receive entry; acknowledged through EICR and ICR.
        assert!(r.deliver(&[1; 64]));
        assert_eq!(r.dev.borrow().messages, [0]);
        assert!(!r.nic.ack_interrupt());
        assert_eq!((r.reg(regs::EICR), r.reg(regs::ICR)), (0, 0), "both cleared (ICR: a read alone clears nothing)");
        assert!(r.nic.receive().is_some());
        // The next frame fires the vector again: its bit fell.
        assert!(r.deliver(&[2; 64]));
        assert_eq!(r.dev.borrow().messages, [0, 0]);
        assert!(!r.nic.ack_interrupt());
        assert!(r.nic.receive().is_some());

        // Sent frames: routed to entry 1, which stays masked.
        r.nic.transmit(60, |b| b.fill(3));
        r.nic.service();
        assert_eq!(r.send_all().len(), 1);
        assert_eq!(r.dev.borrow().messages, [0, 0], "no message for completions");
        assert_eq!(r.reg(regs::EICR), 0b10, "the transmit cause, routed but masked");
        assert!(!r.nic.ack_interrupt());
        assert_eq!(r.reg(regs::EICR), 0);

        // A link change: the other entry, and the carrier is read; the next
        // one fires again.
        r.dev.borrow_mut().set_link(false);
        assert_eq!(r.dev.borrow().messages, [0, 0, 2]);
        assert!(r.nic.ack_interrupt());
        assert!(!r.nic.carrier());
        assert_eq!((r.reg(regs::EICR), r.reg(regs::ICR)), (0, 0));
        r.dev.borrow_mut().set_link(true);
        assert_eq!(r.dev.borrow().messages, [0, 0, 2, 2]);
        assert!(r.nic.ack_interrupt());
        assert!(r.nic.carrier());

        // A reset (the watchdog's, or a stuck queue's) clears the device's
        // routing; the driver programs it again, and the renegotiated link
        // comes on the other vector.
        r.nic.reset().expect("reset");
        assert_eq!(r.resets(), 2);
        assert_msix_programmed(&r);
        r.dev.borrow_mut().messages.clear();
        r.dev.borrow_mut().finish_negotiation();
        assert_eq!(r.dev.borrow().messages, [2]);
        assert!(r.nic.ack_interrupt() && r.nic.carrier());
        assert!(r.deliver(&[4; 64]));
        assert_eq!(r.dev.borrow().messages, [2, 0]);
        assert!(!r.nic.ack_interrupt());
        assert!(r.nic.receive().is_some());
        // An MTU change that restarts the receive queue keeps it too.
        r.nic.set_mtu(9000).expect("mtu");
        assert_eq!(r.resets(), 2, "no device reset");
        assert_msix_programmed(&r);
        assert!(r.deliver(&[5; 8000]));
        assert_eq!(r.dev.borrow().messages, [2, 0, 0]);

        // Back to MSI (or INTx: the same device registers).
        r.dev.borrow_mut().msix = false;
        r.nic.set_interrupt_mode(IrqMode::Msi).expect("msi");
        assert_eq!((r.reg(regs::GPIE), r.reg(regs::IVAR0), r.reg(regs::IVAR_MISC)), (0, 0, 0));
        assert_eq!((r.reg(regs::IMS), r.reg(regs::EIMS)), (regs::INT_ENABLED, 0));
        let bad = IrqMode::Msix { rx: 0, tx: 1, other: regs::MSIX_ENTRIES };
        assert_eq!(r.nic.set_interrupt_mode(bad), Err(Error::BadVector));
        assert_eq!(r.nic.interrupt_mode(), IrqMode::Msi, "unchanged");
    }

    #[test]
    fn a_link_change_pending_when_msix_is_switched_on_is_not_lost() {
        let dev = Device::new(MAC);
        let mut nic = Igb::<FakeHal, _>::new(FakeRegs(dev.clone()), DEFAULT_MTU).expect("device");
        // The PHY finishes negotiating before the kernel sets up MSI-X.
        dev.borrow_mut().finish_negotiation();
        dev.borrow_mut().msix = true;
        nic.set_interrupt_mode(MSIX).expect("msix");
        assert_eq!(dev.borrow().messages, [2], "IMS enabled over a pending LSC: the other vector");
        assert!(nic.ack_interrupt() && nic.carrier());
    }
}
