//! The driver's behaviour on both controllers: every test here runs
//! against the 82574's fake and the 82576's ([`super::fake`]), through the
//! same calls, so what the family's driver promises (rings that wrap and
//! refill, one doorbell per pass, chains reclaimed whole and in order, a
//! full ring refused, the watchdog, the statistics, checksum offload) is
//! checked once and holds for each. What one controller does its own way
//! is tested in its module.

use super::controller::Controller;
use super::desc::{Format, RX_DD, RX_IPCS, RX_IXSM};
use super::driver::{Driver, Error, MIN_MTU, RING_SIZE};
use super::fake::{DD_EOP, Device, FakeRegs, MAC, Model, POSTED, Rig};
use super::regs;
use crate::csum::{self, TxChecksum, TxOffload};
use crate::fake::FakeHal;
use crate::nic::{MAX_PARTS, MAX_SEGMENTS, Nic, RxChecksum, RxVerdict};
use alloc::vec::Vec;

fn udp_frame(payload_len: usize) -> Vec<u8> {
    csum::tests::ipv4_frame(csum::PROTO_UDP, &alloc::vec![0x5a; payload_len])
}

fn a_device_that_never_finishes_its_reset_fails_bring_up<M: Model>() {
    let dev = Device::<M>::new(MAC);
    dev.borrow_mut().reset_stuck = true;
    let r = Driver::<FakeHal, _, M::Ctl>::new(FakeRegs(dev), 1500);
    assert_eq!(r.err(), Some(Error::ResetTimeout));
    let r = Driver::<FakeHal, _, M::Ctl>::new(FakeRegs(Device::<M>::new(MAC)), M::Ctl::MAX_MTU + 1);
    assert_eq!(r.err(), Some(Error::BadMtu));
    let r = Driver::<FakeHal, _, M::Ctl>::new(FakeRegs(Device::<M>::new(MAC)), MIN_MTU - 1);
    assert_eq!(r.err(), Some(Error::BadMtu));
}

fn the_mac_comes_from_the_nvm_when_ral0_is_invalid<M: Model>() {
    let dev = Device::<M>::new(MAC);
    dev.borrow_mut().ral_mac = None;
    dev.borrow_mut().nvm = alloc::vec![0x0002, 0x0403, 0x0605];
    let nic = Driver::<FakeHal, _, M::Ctl>::new(FakeRegs(dev.clone()), 1500).expect("device");
    assert_eq!(nic.mac(), [2, 0, 3, 4, 5, 6]);
    assert_eq!(dev.borrow().reg(regs::RAH0), 0x0605 | regs::RAH_AV, "and programmed into the filter");
    // An NVM that never answers: no address, but a working device.
    let dev = Device::<M>::new(MAC);
    dev.borrow_mut().ral_mac = None;
    let nic = Driver::<FakeHal, _, M::Ctl>::new(FakeRegs(dev), 1500).expect("device");
    assert_eq!(nic.mac(), [0; 6]);
}

fn received_frames_wrap_the_ring_and_are_refilled<M: Model>() {
    let mut r = Rig::<M>::new();
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

fn refills_ring_the_receive_doorbell_once_per_pass<M: Model>() {
    let mut r = Rig::<M>::new();
    for _ in 0..10 {
        r.deliver(&[1; 64]);
    }
    let before = r.writes(M::Ctl::RXQ.tail());
    let mut lent = Vec::new();
    while let Some(rx) = r.nic.receive() {
        lent.push(rx);
    }
    assert_eq!(lent.len(), 10);
    assert_eq!(r.rx_available(), POSTED - 10, "lent out");
    for rx in lent {
        r.nic.recycle(rx);
    }
    assert_eq!(r.writes(M::Ctl::RXQ.tail()), before, "nothing before the pass ends");
    r.nic.service();
    r.nic.service();
    assert_eq!(r.writes(M::Ctl::RXQ.tail()), before + 1);
    assert_eq!(r.rx_available(), POSTED);
}

fn a_ring_with_every_buffer_lent_misses_frames_and_says_so<M: Model>() {
    let mut r = Rig::<M>::new();
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

fn garbage_write_backs_never_panic_and_never_lose_a_buffer<M: Model>() {
    let mut r = Rig::<M>::new();
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

fn bad_receive_descriptors_are_dropped_and_the_ring_stays_full<M: Model>() {
    let mut r = Rig::<M>::new();
    type F<M> = <<M as Model>::Ctl as Controller>::Format;
    // Each of the format's frame errors (CRC, symbol, sequence, RX data).
    let fatal: Vec<u32> = (0..32).map(|b| 1 << b).filter(|&b| F::<M>::RX_ERR_FATAL & b != 0).collect();
    for &error in &fatal {
        assert!(r.deliver_raw(&[1; 64], 64, DD_EOP | error));
    }
    r.deliver_raw(&[2; 64], 0, DD_EOP); // no length
    r.deliver_raw(&[3; 64], 4000, DD_EOP); // longer than the buffer
    r.deliver_raw(&[4; 64], 64, RX_DD); // first part of a chained frame...
    r.deliver_raw(&[5; 64], 64, DD_EOP); // ...and its end
    // Checksum error bits with no checksum computed: not ours to judge.
    r.deliver_raw(&[6; 64], 64, DD_EOP | F::<M>::RX_ERR_IPE | F::<M>::RX_ERR_L4E);
    let rx = r.nic.receive().expect("the good frame");
    assert_eq!(rx.as_ref(), &[6; 64]);
    assert_eq!(rx.checksum(), RxVerdict::default());
    r.nic.recycle(rx);
    assert!(r.nic.receive().is_none());
    r.nic.service();
    let s = r.nic.stats();
    assert_eq!((s.rx_frames, s.rx_errors), (1, fatal.len() as u64 + 4));
    assert_eq!((s.rx_faults.bad_len, s.rx_faults.chained), (2, 1));
    assert_eq!(r.rx_available(), POSTED, "dropped buffers went back");
}

fn a_burst_rings_the_transmit_doorbell_once_and_sent_buffers_come_back<M: Model>() {
    let mut r = Rig::<M>::new();
    for i in 0..10u8 {
        assert_eq!(r.nic.transmit(60, |b| b.fill(i)), Some(()));
    }
    assert_eq!(r.writes(M::Ctl::TXQ.tail()), 1, "only the bring-up's zero before the burst ends");
    r.nic.service();
    assert_eq!(r.writes(M::Ctl::TXQ.tail()), 2);
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

fn a_full_transmit_ring_refuses_and_rings<M: Model>() {
    let mut r = Rig::<M>::new();
    for _ in 0..POSTED {
        assert!(r.nic.transmit(60, |_| ()).is_some());
    }
    assert_eq!(r.nic.transmit(60, |_| ()), None);
    assert_eq!(r.nic.stats().tx_queue_full, 1);
    assert_eq!(r.reg(M::Ctl::TXQ.tail()), POSTED, "the device told about the full ring");
    assert_eq!(r.send_all().len(), POSTED as usize);
    assert_eq!(r.nic.transmit(60, |_| ()), Some(()), "reclaimed when needed");
}

fn completions_are_reclaimed_in_order_only<M: Model>() {
    let mut r = Rig::<M>::new();
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

fn link_changes_are_read_on_their_interrupt<M: Model>() {
    let mut r = Rig::<M>::new();
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

fn a_stuck_transmitter_is_reset_by_the_watchdog<M: Model>() {
    let mut r = Rig::<M>::new();
    let ims = r.reg(regs::IMS);
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
    assert_eq!((r.reg(M::Ctl::TXQ.head()), r.reg(M::Ctl::TXQ.tail())), (0, 0), "a fresh ring");
    assert_eq!(r.rx_available(), POSTED, "receive ring refilled");
    assert_eq!(r.reg(regs::IMS), ims, "the causes enabled again");
    // Where the reset took the PHY down, the carrier follows it back.
    assert_eq!(r.nic.carrier() && r.nic.link_up(), !M::RESET_RENEGOTIATES);
    assert_eq!(r.settle(), M::RESET_RENEGOTIATES);
    assert!(r.nic.carrier());
    // Working again.
    r.nic.transmit(60, |b| b.fill(2));
    r.nic.service();
    assert_eq!(r.send_all(), alloc::vec![alloc::vec![2; 60]]);
    r.deliver(&[3; 64]);
    assert!(r.nic.receive().is_some());
    assert!(!r.nic.watchdog(10_000 * ms));
}

fn no_watchdog_reset_while_the_link_is_down<M: Model>() {
    let mut r = Rig::<M>::new();
    r.dev.borrow_mut().set_link(false);
    r.nic.ack_interrupt();
    r.nic.transmit(60, |_| ());
    r.nic.service();
    for t in 0..10u64 {
        assert!(!r.nic.watchdog(t * 1_000_000));
    }
    assert_eq!(r.nic.stats().resets, 0);
}

fn frames_lent_across_a_reset_come_back<M: Model>() {
    let mut r = Rig::<M>::new();
    r.deliver(&[5; 64]);
    let rx = r.nic.receive().expect("frame");
    r.nic.reset().expect("reset");
    assert_eq!(r.rx_available(), POSTED, "a full ring without the lent buffer");
    r.nic.recycle(rx);
    r.nic.service();
    assert_eq!(r.rx_available(), POSTED, "the ring is full: it is counted, not lost memory");
    assert_eq!(r.nic.stats().rx_errors, 1);
}

fn statistics_accumulate_across_reads_and_resets<M: Model>() {
    let mut r = Rig::<M>::new();
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
    let [.., oversize, rx_good, _, _, _, _, _] = M::Ctl::STATS.names;
    assert!(named.contains(&(rx_good, 4)), "{named:?}");
    assert_eq!(named.contains(&(oversize, 0)), M::Ctl::STATS.oversize, "ROC read where the driver says");
}

fn receive_checksums_are_verified_and_a_bad_ip_header_dropped<M: Model>() {
    let mut r = Rig::<M>::new();
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
    r.deliver_raw(&[1; 64], 64, DD_EOP | RX_IXSM | RX_IPCS | <<M::Ctl as Controller>::Format as Format>::RX_ERR_IPE);
    let rx = r.nic.receive().expect("not dropped: the IPE bit is void");
    assert_eq!(rx.checksum(), RxVerdict::default());
}

fn transmit_checksum_offload_uses_a_context_only_when_it_changes<M: Model>() {
    let mut r = Rig::<M>::new();
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

fn scatter_gather_chains_wrap_the_ring_and_are_reclaimed_whole<M: Model>() {
    let mut r = Rig::<M>::new();
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

fn a_ring_with_fewer_free_descriptors_than_parts_refuses_the_chain<M: Model>() {
    let mut r = Rig::<M>::new();
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

/// Zero-copy transmit: the head and the tail in driver buffers, memory
/// outside the driver between them, one data descriptor each; the device
/// gathers the frame, and reclaim gives back the driver's two buffers only,
/// many times round the ring.
fn frames_with_outside_memory_go_out_as_one_chain<M: Model>() {
    let mut r = Rig::<M>::new();
    let outside: Vec<u8> = (0..6000u32).map(|i| (i * 7) as u8).collect();
    assert_eq!(r.nic.gather_room(), MAX_SEGMENTS);
    for pass in 0..30usize {
        for k in 0..20usize {
            let n = 1 + (pass + k) % MAX_SEGMENTS;
            let segs: Vec<_> = (0..n).map(|i| crate::fake::segment(&outside[i * 200..i * 200 + 100 + k])).collect();
            let got = r.nic.transmit_gather(42, &segs, 5, |head, tail| {
                head.fill(k as u8);
                tail.fill(0xEE);
            });
            assert!(got.is_some(), "pass {pass}, frame {k}");
        }
        r.nic.service();
        let sent = r.send_all();
        assert_eq!(sent.len(), 20);
        for (k, f) in sent.iter().enumerate() {
            let n = 1 + (pass + k) % MAX_SEGMENTS;
            let mut want = alloc::vec![k as u8; 42];
            for i in 0..n {
                want.extend_from_slice(&outside[i * 200..i * 200 + 100 + k]);
            }
            want.extend_from_slice(&[0xEE; 5]);
            assert_eq!(f, &want, "pass {pass}, frame {k}");
        }
        r.nic.service();
        assert_eq!((r.nic.tx.in_flight(), r.nic.tx.free()), (0, usize::from(RING_SIZE) - 1));
    }
    let s = r.nic.stats();
    assert_eq!((s.tx_frames, s.tx_zero_copy, s.tx_chained), (600, 600, 600));
    assert_eq!(r.dev.borrow().chained, 600);
    assert!(r.nic.tx_free.len() <= 2 * 20, "only the driver's buffers come back");
    // Refused: an empty head, tail or segment, no segment, more than the
    // room, longer than a frame.
    let one = [crate::fake::segment(&outside[..10])];
    assert!(r.nic.transmit_gather(0, &one, 4, |_, _| ()).is_none());
    assert!(r.nic.transmit_gather(42, &one, 0, |_, _| ()).is_none());
    assert!(r.nic.transmit_gather(42, &[crate::fake::segment(&outside[..0])], 4, |_, _| ()).is_none());
    assert!(r.nic.transmit_gather(42, &[], 4, |_, _| ()).is_none());
    assert!(r.nic.transmit_gather(42, &[one[0]; MAX_SEGMENTS + 1], 4, |_, _| ()).is_none());
    assert!(r.nic.transmit_gather(42, &[crate::fake::segment(&outside[..1500])], 4, |_, _| ()).is_none());
    // A ring with three descriptors left: room for one segment, then none.
    for _ in 0..(usize::from(RING_SIZE) - 1 - 3) {
        assert!(r.nic.transmit(60, |_| ()).is_some());
    }
    assert_eq!(r.nic.gather_room(), 1);
    assert!(r.nic.transmit_gather(42, &[one[0], one[0]], 4, |_, _| ()).is_none());
    assert!(r.nic.transmit_gather(42, &one, 4, |_, _| ()).is_some());
    assert_eq!(r.nic.gather_room(), 0);
    r.nic.service();
    assert_eq!(r.send_all().len(), usize::from(RING_SIZE) - 3);
    assert_eq!(r.nic.gather_room(), MAX_SEGMENTS, "reclaimed when asked");
    // A reset drops a queued chain and takes back only its two buffers.
    assert!(r.nic.transmit_gather(42, &one, 4, |_, _| ()).is_some());
    let spare = r.nic.tx_free.len();
    r.nic.reset().expect("reset");
    assert_eq!(r.nic.tx_free.len(), spare + 2);
}

fn a_device_marking_the_wrong_descriptor_done_reclaims_nothing<M: Model>() {
    let mut r = Rig::<M>::new();
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

/// Each test above, as a `#[test]` on each controller's fake.
macro_rules! on_each_controller {
    ($($name:ident),* $(,)?) => {
        mod e1000e {
            $(#[test]
            fn $name() {
                super::$name::<crate::e1000e::fake::Fake82574>()
            })*
        }
        mod igb {
            $(#[test]
            fn $name() {
                super::$name::<crate::igb::fake::Fake82576>()
            })*
        }
    };
}

on_each_controller!(
    a_device_that_never_finishes_its_reset_fails_bring_up,
    the_mac_comes_from_the_nvm_when_ral0_is_invalid,
    received_frames_wrap_the_ring_and_are_refilled,
    refills_ring_the_receive_doorbell_once_per_pass,
    a_ring_with_every_buffer_lent_misses_frames_and_says_so,
    garbage_write_backs_never_panic_and_never_lose_a_buffer,
    bad_receive_descriptors_are_dropped_and_the_ring_stays_full,
    a_burst_rings_the_transmit_doorbell_once_and_sent_buffers_come_back,
    a_full_transmit_ring_refuses_and_rings,
    completions_are_reclaimed_in_order_only,
    link_changes_are_read_on_their_interrupt,
    a_stuck_transmitter_is_reset_by_the_watchdog,
    no_watchdog_reset_while_the_link_is_down,
    frames_lent_across_a_reset_come_back,
    statistics_accumulate_across_reads_and_resets,
    receive_checksums_are_verified_and_a_bad_ip_header_dropped,
    transmit_checksum_offload_uses_a_context_only_when_it_changes,
    scatter_gather_chains_wrap_the_ring_and_are_reclaimed_whole,
    a_ring_with_fewer_free_descriptors_than_parts_refuses_the_chain,
    frames_with_outside_memory_go_out_as_one_chain,
    a_device_marking_the_wrong_descriptor_done_reclaims_nothing,
);
