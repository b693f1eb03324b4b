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
    use crate::csum::{self, TxChecksum, TxOffload};
    use crate::fake::FakeHal;
    use crate::intel::driver::{DEFAULT_MTU, MIN_MTU, RING_SIZE};
    use crate::intel::fake::{DD_EOP, FakeRegs, MAC};
    use crate::nic::{MAX_PARTS, Nic, RxChecksum, RxVerdict};
    use alloc::vec::Vec;

    type Rig = crate::intel::fake::Rig<Fake82576>;
    type Device = crate::intel::fake::Device<Fake82576>;
    const POSTED: u32 = RING_SIZE as u32 - 1;
    /// RXE: the frame error bit of the write-back.
    const RXE: u32 = 1 << 31;

    fn rig() -> Rig {
        Rig::new()
    }

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
    fn the_mac_comes_from_the_nvm_when_ral0_is_invalid() {
        let dev = Device::new(MAC);
        dev.borrow_mut().ral_mac = None;
        dev.borrow_mut().nvm = alloc::vec![0x0002, 0x0403, 0x0605];
        let nic = Igb::<FakeHal, _>::new(FakeRegs(dev.clone()), 1500).expect("device");
        assert_eq!(nic.mac(), [2, 0, 3, 4, 5, 6]);
        assert_eq!(dev.borrow().reg(regs::RAH0), 0x0605 | regs::RAH_AV, "and programmed into the filter");
        // An NVM that never answers: no address, but a working device.
        let dev = Device::new(MAC);
        dev.borrow_mut().ral_mac = None;
        let nic = Igb::<FakeHal, _>::new(FakeRegs(dev), 1500).expect("device");
        assert_eq!(nic.mac(), [0; 6]);
    }

    #[test]
    fn a_device_that_never_finishes_its_reset_or_queue_switch_fails_bring_up() {
        let dev = Device::new(MAC);
        dev.borrow_mut().reset_stuck = true;
        let r = Igb::<FakeHal, _>::new(FakeRegs(dev), 1500);
        assert_eq!(r.err(), Some(Error::ResetTimeout));
        let dev = Device::new(MAC);
        dev.borrow_mut().model.rx_queue_stuck = true;
        let r = Igb::<FakeHal, _>::new(FakeRegs(dev), 1500);
        assert_eq!(r.err(), Some(Error::QueueTimeout));
        let r = Igb::<FakeHal, _>::new(FakeRegs(Device::new(MAC)), MAX_MTU + 1);
        assert_eq!(r.err(), Some(Error::BadMtu));
        let r = Igb::<FakeHal, _>::new(FakeRegs(Device::new(MAC)), MIN_MTU - 1);
        assert_eq!(r.err(), Some(Error::BadMtu));
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
    fn received_frames_wrap_the_ring_and_are_refilled() {
        let mut r = rig();
        // Three times round the ring.
        for i in 0..800u32 {
            let frame = alloc::vec![i as u8; 60 + (i as usize % 1400)];
            assert!(r.deliver(&frame), "frame {i}");
            let rx = r.nic.receive().expect("a frame");
            assert_eq!(rx.as_ref(), &frame[..]);
            assert!(r.nic.receive().is_none());
            r.nic.recycle(rx);
            r.nic.service();
            assert_eq!(r.rx_available(), POSTED, "refilled and told, frame {i}");
        }
        let s = r.nic.stats();
        assert_eq!((s.rx_frames, s.rx_errors), (800, 0));
        assert_eq!(s.rx_doorbells, 801);
    }

    #[test]
    fn refills_ring_the_receive_doorbell_once_per_pass() {
        let mut r = rig();
        for _ in 0..10 {
            r.deliver(&[1; 64]);
        }
        let before = r.writes(regs::RXQ.tail());
        let mut lent = Vec::new();
        while let Some(rx) = r.nic.receive() {
            lent.push(rx);
        }
        assert_eq!(lent.len(), 10);
        assert_eq!(r.rx_available(), POSTED - 10, "lent out");
        for rx in lent {
            r.nic.recycle(rx);
        }
        assert_eq!(r.writes(regs::RXQ.tail()), before, "nothing before the pass ends");
        r.nic.service();
        r.nic.service();
        assert_eq!(r.writes(regs::RXQ.tail()), before + 1);
        assert_eq!(r.rx_available(), POSTED);
    }

    #[test]
    fn a_ring_with_every_buffer_lent_misses_frames_and_says_so() {
        let mut r = rig();
        let mut lent = Vec::new();
        for _ in 0..POSTED {
            assert!(r.deliver(&[7; 64]));
            lent.push(r.nic.receive().expect("frame"));
        }
        assert!(!r.deliver(&[8; 64]), "no buffer");
        assert!(!r.nic.ack_interrupt(), "an overrun is no link change");
        assert_eq!(r.nic.stats().rx_overruns, 1);
        r.nic.watchdog(0);
        assert_eq!(r.nic.hw_stats().missed, 1);
        for rx in lent {
            r.nic.recycle(rx);
        }
        r.nic.service();
        assert!(r.deliver(&[9; 64]), "buffers back");
        assert_eq!(r.nic.receive().map(|f| f.as_ref().to_vec()), Some(alloc::vec![9; 64]));
    }

    #[test]
    fn bad_receive_descriptors_are_dropped_and_the_ring_stays_full() {
        let mut r = rig();
        r.deliver_raw(&[1; 64], 64, DD_EOP | RXE); // CRC or framing error
        r.deliver_raw(&[2; 64], 64, DD_EOP | 1 << 24); // CE, the older bit
        r.deliver_raw(&[3; 64], 0, DD_EOP); // no length
        r.deliver_raw(&[4; 64], 4000, DD_EOP); // longer than the buffer
        r.deliver_raw(&[5; 64], 64, 1); // first part of a chained frame...
        r.deliver_raw(&[6; 64], 64, DD_EOP); // ...and its end
        r.deliver_raw(&[7; 64], 64, DD_EOP | 1 << 29 | 1 << 30); // L4/IP checksum: not ours to judge
        let rx = r.nic.receive().expect("the good frame");
        assert_eq!(rx.as_ref(), &[7; 64]);
        r.nic.recycle(rx);
        assert!(r.nic.receive().is_none());
        r.nic.service();
        let s = r.nic.stats();
        assert_eq!((s.rx_frames, s.rx_errors), (1, 6));
        assert_eq!((s.rx_faults.bad_len, s.rx_faults.chained), (2, 1));
        assert_eq!(r.rx_available(), POSTED, "dropped buffers went back");
    }

    #[test]
    fn garbage_write_backs_never_panic_and_never_lose_a_buffer() {
        let mut r = rig();
        // A device writing whatever it likes into every descriptor it owns.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..2000u32 {
            let v = next();
            // DD always set, so the driver must judge the rest.
            let status = (v as u32) | 1;
            let len = (v >> 32) as u16;
            assert!(r.deliver_raw(&[round as u8; 64], len, status), "round {round}");
            while let Some(rx) = r.nic.receive() {
                assert!(!rx.as_ref().is_empty() && rx.as_ref().len() <= 2048);
                r.nic.recycle(rx);
            }
            r.nic.service();
            assert_eq!(r.rx_available(), POSTED, "round {round}");
        }
        let s = r.nic.stats();
        assert_eq!(s.rx_frames + s.rx_errors, 2000);
        // And a good frame still gets through afterwards.
        let mut drained = 0;
        while r.nic.rx_discarding && drained < 2 {
            r.deliver(&[0; 60]);
            while let Some(rx) = r.nic.receive() {
                r.nic.recycle(rx);
            }
            drained += 1;
        }
        assert!(r.deliver(&[0xee; 100]));
        assert_eq!(r.nic.receive().map(|f| f.as_ref().to_vec()), Some(alloc::vec![0xee; 100]));
    }

    #[test]
    fn a_burst_rings_the_transmit_doorbell_once_and_sent_buffers_come_back() {
        let mut r = rig();
        for i in 0..10u8 {
            assert_eq!(r.nic.transmit(60, |b| b.fill(i)), Some(()));
        }
        assert_eq!(r.writes(regs::TXQ.tail()), 1, "only the bring-up's zero before the burst ends");
        r.nic.service();
        assert_eq!(r.writes(regs::TXQ.tail()), 2);
        assert_eq!(r.send_all(), (0..10u8).map(|i| alloc::vec![i; 60]).collect::<Vec<_>>());
        r.nic.service();
        assert_eq!(r.nic.tx.in_flight(), 0, "reclaimed");
        // Many times round the ring.
        for pass in 0..300u32 {
            for _ in 0..200 {
                assert!(r.nic.transmit(100, |b| b.fill(pass as u8)).is_some(), "pass {pass}");
            }
            r.nic.service();
            let sent = r.send_all();
            assert_eq!(sent.len(), 200);
            assert!(sent.iter().all(|f| f == &alloc::vec![pass as u8; 100]));
            r.nic.service();
        }
        assert_eq!(r.nic.stats().tx_frames, 60_010);
        assert!(r.nic.tx_free.len() < usize::from(RING_SIZE), "buffers recycled, not piling up");
    }

    #[test]
    fn a_full_transmit_ring_refuses_and_rings() {
        let mut r = rig();
        for _ in 0..POSTED {
            assert!(r.nic.transmit(60, |_| ()).is_some());
        }
        assert_eq!(r.nic.transmit(60, |_| ()), None);
        assert_eq!(r.nic.stats().tx_queue_full, 1);
        assert_eq!(r.reg(regs::TXQ.tail()), POSTED, "the device told about the full ring");
        assert_eq!(r.send_all().len(), POSTED as usize);
        assert_eq!(r.nic.transmit(60, |_| ()), Some(()), "reclaimed when needed");
    }

    #[test]
    fn completions_are_reclaimed_in_order_only() {
        let mut r = rig();
        for i in 0..3u8 {
            r.nic.transmit(60, |b| b.fill(i));
        }
        r.nic.service();
        // The device marks the second and third done, not the first.
        r.dev.borrow_mut().mark_tx_done_ahead(1);
        r.dev.borrow_mut().mark_tx_done_ahead(2);
        r.nic.service();
        assert_eq!(r.nic.tx.in_flight(), 3, "nothing reclaimed past an unfinished frame");
        assert_eq!(r.send_all().len(), 3);
        r.nic.service();
        assert_eq!(r.nic.tx.in_flight(), 0);
    }

    #[test]
    fn jumbo_frames_resize_the_receive_queue_without_a_reset() {
        let mut r = rig();
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
        let mut r = rig();
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
        let mut r = rig();
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
        let mut r = rig();
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

    #[test]
    fn link_changes_are_read_on_their_interrupt() {
        let mut r = rig();
        r.dev.borrow_mut().set_link(false);
        assert!(r.nic.carrier(), "not read before the interrupt is acknowledged");
        assert!(r.nic.ack_interrupt());
        assert!(!r.nic.carrier() && !r.nic.link_up());
        assert_eq!(r.reg(regs::ICR), 0, "causes cleared, INTx released");
        assert!(!r.nic.ack_interrupt(), "nothing new");
        r.dev.borrow_mut().set_link(true);
        r.deliver(&[1; 64]);
        assert!(r.nic.ack_interrupt());
        assert!(r.nic.carrier());
        assert!(r.nic.receive().is_some());
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
        let mut r = rig();
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

    #[test]
    fn a_stuck_transmitter_is_reset_by_the_watchdog() {
        let mut r = rig();
        for _ in 0..5 {
            r.nic.transmit(60, |b| b.fill(1));
        }
        r.nic.service();
        let ms = 1000;
        assert!(!r.nic.watchdog(0));
        // Progress (one frame sent) restarts the clock.
        r.dev.borrow_mut().send_up_to(1);
        assert!(!r.nic.watchdog(1500 * ms));
        assert!(!r.nic.watchdog(3000 * ms), "1.5 s since the last progress");
        assert!(r.nic.watchdog(3600 * ms), "2.1 s without progress");
        let s = r.nic.stats();
        assert_eq!((s.tx_hangs, s.resets, s.tx_lost), (1, 1, 4));
        assert_eq!(r.resets(), 2);
        assert_eq!((r.reg(regs::TXQ.head()), r.reg(regs::TXQ.tail())), (0, 0), "a fresh ring");
        assert_eq!(r.rx_available(), POSTED, "receive ring refilled");
        assert_eq!(r.reg(regs::IMS), regs::INT_ENABLED);
        // The reset took the PHY down: the carrier follows it back.
        assert!(!r.nic.carrier() && !r.nic.link_up());
        r.dev.borrow_mut().finish_negotiation();
        assert!(r.nic.ack_interrupt() && r.nic.carrier());
        // Working again.
        r.nic.transmit(60, |b| b.fill(2));
        r.nic.service();
        assert_eq!(r.send_all(), alloc::vec![alloc::vec![2; 60]]);
        r.deliver(&[3; 64]);
        assert!(r.nic.receive().is_some());
        assert!(!r.nic.watchdog(10_000 * ms));
    }

    #[test]
    fn no_watchdog_reset_while_the_link_is_down() {
        let mut r = rig();
        r.dev.borrow_mut().set_link(false);
        r.nic.ack_interrupt();
        r.nic.transmit(60, |_| ());
        r.nic.service();
        for t in 0..10u64 {
            assert!(!r.nic.watchdog(t * 1_000_000));
        }
        assert_eq!(r.nic.stats().resets, 0);
    }

    #[test]
    fn frames_lent_across_a_reset_come_back() {
        let mut r = rig();
        r.deliver(&[5; 64]);
        let rx = r.nic.receive().expect("frame");
        r.nic.reset().expect("reset");
        assert_eq!(r.rx_available(), POSTED, "a full ring without the lent buffer");
        r.nic.recycle(rx);
        r.nic.service();
        assert_eq!(r.rx_available(), POSTED, "the ring is full: it is counted, not lost memory");
        assert_eq!(r.nic.stats().rx_errors, 1);
    }

    #[test]
    fn statistics_accumulate_across_reads_and_resets() {
        let mut r = rig();
        r.dev.borrow_mut().count(regs::GORCL, 1000);
        r.dev.borrow_mut().count(regs::GOTCH, 1);
        r.dev.borrow_mut().count(regs::CRCERRS, 2);
        for _ in 0..3 {
            r.deliver(&[1; 64]);
        }
        r.nic.watchdog(0);
        let hw = r.nic.hw_stats();
        assert_eq!((hw.rx_good, hw.rx_good_octets, hw.crc_errors), (3, 1000, 2));
        assert_eq!(hw.tx_good_octets, 1 << 32, "the high half counts");
        assert_eq!(r.reg(regs::GPRC), 0, "read, so cleared");
        r.deliver(&[1; 64]);
        r.nic.watchdog(500_000);
        assert_eq!(r.nic.hw_stats().rx_good, 3, "not read again within a second");
        r.nic.reset().expect("reset");
        assert_eq!(r.nic.hw_stats().rx_good, 4, "read before the reset cleared it");
        let named: Vec<_> = r.nic.hw_counters().collect();
        assert!(named.contains(&("igb rx_good", 4)) && named.contains(&("igb rx_oversize", 0)));
    }

    fn udp_frame(payload_len: usize) -> Vec<u8> {
        crate::csum::tests::ipv4_frame(crate::csum::PROTO_UDP, &alloc::vec![0x5a; payload_len])
    }

    #[test]
    fn receive_checksums_are_verified_and_a_bad_ip_header_dropped() {
        let mut r = rig();
        let rxcsum = r.reg(regs::RXCSUM);
        assert_eq!(rxcsum & (regs::RXCSUM_IPOFLD | regs::RXCSUM_TUOFLD), regs::RXCSUM_IPOFLD | regs::RXCSUM_TUOFLD);
        let mut good = udp_frame(100);
        csum::fill(&mut good, TxChecksum { ipv4: true, l4: true });
        let mut bad_ip = good.clone();
        bad_ip[24] ^= 0xff;
        let mut bad_udp = good.clone();
        bad_udp[60] ^= 1;
        let mut tcp = crate::csum::tests::ipv4_frame(csum::PROTO_TCP, &[1; 33]);
        csum::fill(&mut tcp, TxChecksum { ipv4: true, l4: true });
        let mut arp = alloc::vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        for f in [&good, &bad_ip, &bad_udp, &tcp, &arp] {
            assert!(r.deliver(f));
        }
        let mut got = Vec::new();
        while let Some(rx) = r.nic.receive() {
            got.push((rx.as_ref().to_vec(), rx.checksum()));
            r.nic.recycle(rx);
        }
        let (g, b, u) = (RxChecksum::Good, RxChecksum::Bad, RxChecksum::Unchecked);
        assert_eq!(
            got,
            alloc::vec![
                (good, RxVerdict { ipv4: g, l4: g }),
                (bad_udp, RxVerdict { ipv4: g, l4: b }),
                (tcp, RxVerdict { ipv4: g, l4: g }),
                (arp, RxVerdict { ipv4: u, l4: u }),
            ],
            "the bad IPv4 header dropped, the rest passed up with their verdicts"
        );
        let s = r.nic.stats();
        assert_eq!((s.rx_bad_ip_csum, s.rx_bad_l4_csum, s.rx_ip_csum_good, s.rx_frames), (1, 1, 3, 4));
        r.nic.service();
        assert_eq!(r.rx_available(), POSTED, "the dropped buffer went back");
        // IXSM: the device says to ignore its indications.
        r.deliver_raw(&[1; 64], 64, DD_EOP | 1 << 2 | 1 << 6 | 1 << 30);
        let rx = r.nic.receive().expect("not dropped: the IPE bit is void");
        assert_eq!(rx.checksum(), RxVerdict::default());
    }

    #[test]
    fn transmit_checksum_offload_uses_a_context_only_when_it_changes() {
        let mut r = rig();
        assert_eq!(r.nic.tx_offload(), TxOffload { ipv4: true, l4_v4: true });
        let both = TxChecksum { ipv4: true, l4: true };
        let udp = udp_frame(300);
        let tcp = crate::csum::tests::ipv4_frame(csum::PROTO_TCP, &[7; 1001]);
        for f in [&udp, &udp, &tcp] {
            assert!(r.nic.transmit_with(f.len(), both, |b| b.copy_from_slice(f)).is_some());
        }
        // Only the IPv4 header, then a frame without offload.
        assert!(
            r.nic.transmit_with(udp.len(), TxChecksum { ipv4: true, l4: false }, |b| b.copy_from_slice(&udp)).is_some()
        );
        assert!(r.nic.transmit(udp.len(), |b| b.copy_from_slice(&udp)).is_some());
        r.nic.service();
        let sent = r.send_all();
        assert_eq!(sent.len(), 5);
        for f in &sent[..3] {
            assert_eq!((csum::ipv4_header_ok(f), csum::l4_ok(f)), (Some(true), Some(true)));
        }
        assert_eq!(csum::ipv4_header_ok(&sent[3]), Some(true));
        assert_eq!(&sent[3][40..42], &[0, 0], "no UDP checksum asked: left as written (none)");
        assert_eq!(sent[4], udp, "sent as written");
        assert_eq!(r.dev.borrow().contexts, 3, "UDP, TCP, IPv4-only: the second UDP frame reused the first context");
        assert_eq!(r.nic.stats().tx_csum_offload, 4);
        r.nic.service();
        assert_eq!(r.nic.tx.in_flight(), 0, "every chain, contexts too, reclaimed");
        // A reset forgets the device's context: the next frame sends one.
        r.nic.reset().expect("reset");
        r.nic.transmit_with(udp.len(), both, |b| b.copy_from_slice(&udp));
        r.nic.service();
        assert_eq!(csum::l4_ok(&r.send_all()[0]), Some(true));
        assert_eq!(r.dev.borrow().contexts, 4);
        // Not IPv4 TCP/UDP: sent as written, no offload.
        let mut arp = alloc::vec![9u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        r.nic.transmit_with(60, both, |b| b.copy_from_slice(&arp));
        r.nic.service();
        assert_eq!(r.send_all(), alloc::vec![arp]);
        assert_eq!(r.nic.stats().tx_csum_offload, 5);
    }

    #[test]
    fn scatter_gather_chains_wrap_the_ring_and_are_reclaimed_whole() {
        let mut r = rig();
        // 3-part chains, many times round the ring (255 usable slots).
        for pass in 0..40u32 {
            for k in 0..20u8 {
                let got = r.nic.transmit_parts(&[14, 20, 50 + usize::from(k)], |p| {
                    p[0].fill(1);
                    p[1].fill(2);
                    p[2].fill(k);
                    p.len()
                });
                assert_eq!(got, Some(3), "pass {pass}");
            }
            r.nic.service();
            let sent = r.send_all();
            assert_eq!(sent.len(), 20);
            for (k, f) in sent.iter().enumerate() {
                assert_eq!(f.len(), 84 + k);
                assert!(f[..14].iter().all(|&b| b == 1) && f[14..34].iter().all(|&b| b == 2));
                assert!(f[34..].iter().all(|&b| b == k as u8));
            }
            r.nic.service();
            assert_eq!(r.nic.tx.in_flight(), 0);
        }
        assert_eq!(r.dev.borrow().chained, 800);
        assert_eq!(r.nic.stats().tx_chained, 800);
        // Checksum offload over a chain: headers in the first part.
        let udp = udp_frame(500);
        let both = TxChecksum { ipv4: true, l4: true };
        r.nic.send(&[42, udp.len() - 42], both, |p| {
            p[0].copy_from_slice(&udp[..42]);
            p[1].copy_from_slice(&udp[42..]);
        });
        r.nic.service();
        let sent = r.send_all();
        assert_eq!((csum::ipv4_header_ok(&sent[0]), csum::l4_ok(&sent[0])), (Some(true), Some(true)));
        // Refused: empty, too many parts, a part or the sum too long.
        assert_eq!(r.nic.transmit_parts(&[], |_| ()), None);
        assert_eq!(r.nic.transmit_parts(&[10, 0], |_| ()), None);
        assert_eq!(r.nic.transmit_parts(&[10; MAX_PARTS + 1], |_| ()), None);
        assert_eq!(r.nic.transmit_parts(&[1000, 515], |_| ()), None);
        assert_eq!(r.nic.transmit_parts(&[1000, 514], |p| p[1].len()), Some(514));
    }

    #[test]
    fn a_ring_with_fewer_free_descriptors_than_parts_refuses_the_chain() {
        let mut r = rig();
        // 85 chains of 3 take all 255 slots.
        for i in 0..85 {
            assert!(r.nic.transmit_parts(&[60, 60, 60], |_| ()).is_some(), "chain {i}");
        }
        assert_eq!(r.nic.transmit_parts(&[60], |_| ()), None, "no descriptor left");
        assert_eq!(r.nic.stats().tx_queue_full, 1);
        // The device sends one frame: three slots back, a 4-part chain still won't fit.
        r.dev.borrow_mut().send_up_to(1);
        assert_eq!(r.nic.transmit_parts(&[60; 4], |_| ()), None);
        assert!(r.nic.transmit_parts(&[60; 3], |_| ()).is_some(), "partial reclaim made room for three");
        assert_eq!(r.nic.tx.free(), 0);
        r.nic.service();
        assert_eq!(r.send_all().len(), 85);
    }

    #[test]
    fn a_device_marking_the_wrong_descriptor_done_reclaims_nothing() {
        let mut r = rig();
        r.nic.transmit_parts(&[60, 60, 60], |p| p[0].fill(1));
        r.nic.transmit_parts(&[60, 60], |p| p[0].fill(2));
        r.nic.service();
        // DD on the first chain's first and middle descriptors, and on the
        // second chain's end: none is the oldest chain's end.
        for i in [0, 1, 4] {
            r.dev.borrow_mut().mark_tx_done_ahead(i);
        }
        r.nic.service();
        assert_eq!((r.nic.tx.in_flight(), r.nic.tx.free()), (2, 250), "in order, whole chains only");
        assert!(r.nic.tx.oldest_pending());
        r.send_all();
        r.nic.service();
        assert_eq!((r.nic.tx.in_flight(), r.nic.tx.free()), (0, 255));
    }
}
