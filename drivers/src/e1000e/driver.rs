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
    use crate::csum::{self, TxChecksum, TxOffload};
    use crate::fake::FakeHal;
    use crate::intel::driver::RING_SIZE;
    use crate::intel::fake::{FakeRegs, MAC};
    use crate::nic::{MAX_PARTS, Nic, RxChecksum, RxVerdict};
    use alloc::vec::Vec;

    type Rig = crate::intel::fake::Rig<Fake82574>;
    type Device = crate::intel::fake::Device<Fake82574>;
    const POSTED: u32 = RING_SIZE as u32 - 1;

    fn rig() -> Rig {
        Rig::new()
    }

    #[test]
    fn bring_up_resets_and_programs_both_rings() {
        let r = rig();
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
    fn the_mac_comes_from_the_nvm_when_ral0_is_invalid() {
        let dev = Device::new(MAC);
        dev.borrow_mut().ral_mac = None;
        dev.borrow_mut().nvm = alloc::vec![0x0002, 0x0403, 0x0605];
        let nic = E1000e::<FakeHal, _>::new(FakeRegs(dev.clone()), 1500).expect("device");
        assert_eq!(nic.mac(), [2, 0, 3, 4, 5, 6]);
        // An NVM that never answers: no address, but a working device.
        let dev = Device::new(MAC);
        dev.borrow_mut().ral_mac = None;
        let nic = E1000e::<FakeHal, _>::new(FakeRegs(dev), 1500).expect("device");
        assert_eq!(nic.mac(), [0; 6]);
    }

    #[test]
    fn a_device_that_never_finishes_its_reset_fails_bring_up() {
        let dev = Device::new(MAC);
        dev.borrow_mut().reset_stuck = true;
        let r = E1000e::<FakeHal, _>::new(FakeRegs(dev), 1500);
        assert_eq!(r.err(), Some(Error::ResetTimeout));
        let r = E1000e::<FakeHal, _>::new(FakeRegs(Device::new(MAC)), MAX_MTU + 1);
        assert_eq!(r.err(), Some(Error::BadMtu));
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
        {
            let mut d = r.dev.borrow_mut();
            d.deliver_raw(&[1; 64], 64, 0b11 | 1 << 8); // CRC error
            d.deliver_raw(&[2; 64], 0, 0b11); // no length
            d.deliver_raw(&[3; 64], 4000, 0b11); // longer than the buffer
            d.deliver_raw(&[4; 64], 64, 0b01); // first part of a chained frame...
            d.deliver_raw(&[5; 64], 64, 0b11); // ...and its end
            d.deliver_raw(&[6; 64], 64, 0b11 | (1 << 5) << 8); // TCP checksum flag: not ours to judge
        }
        let rx = r.nic.receive().expect("the good frame");
        assert_eq!(rx.as_ref(), &[6; 64]);
        r.nic.recycle(rx);
        assert!(r.nic.receive().is_none());
        r.nic.service();
        let s = r.nic.stats();
        assert_eq!((s.rx_frames, s.rx_errors), (1, 5));
        assert_eq!((s.rx_faults.bad_len, s.rx_faults.chained), (2, 1));
        assert_eq!(r.rx_available(), POSTED, "dropped buffers went back");
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
    fn jumbo_frames_need_the_mtu_raised() {
        let mut r = rig();
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

    #[test]
    fn msix_routes_rx_tx_and_other_and_survives_a_reset() {
        let mut r = rig();
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
        assert_eq!(r.dev.borrow().resets, 2);
        assert_eq!((r.reg(regs::TXQ.head()), r.reg(regs::TXQ.tail())), (0, 0), "a fresh ring");
        assert_eq!(r.rx_available(), POSTED, "receive ring refilled");
        assert_eq!(r.reg(regs::IMS), regs::INT_ENABLED);
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
        r.dev.borrow_mut().count(regs::CRCERRS, 2);
        for _ in 0..3 {
            r.deliver(&[1; 64]);
        }
        r.nic.watchdog(0);
        let hw = r.nic.hw_stats();
        assert_eq!((hw.rx_good, hw.rx_good_octets, hw.crc_errors), (3, 1000, 2));
        assert_eq!(r.reg(regs::GPRC), 0, "read, so cleared");
        r.deliver(&[1; 64]);
        r.nic.watchdog(500_000);
        assert_eq!(r.nic.hw_stats().rx_good, 3, "not read again within a second");
        r.nic.reset().expect("reset");
        assert_eq!(r.nic.hw_stats().rx_good, 4, "read before the reset cleared it");
        let named: Vec<_> = r.nic.hw_counters().map(|(name, _)| name).collect();
        assert!(named.contains(&"e1000e rx_good") && !named.contains(&"e1000e rx_oversize"), "ROC is not read");
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
        r.dev.borrow_mut().deliver_raw(&[1; 64], 64, 0b11 | 1 << 2 | 1 << 6 | 1 << 14);
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
