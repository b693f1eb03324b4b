//! virtio-net over any virtio transport (virtio 1.2 §5.1), on our own split
//! virtqueues ([`crate::virtqueue`]) with our own buffer pools: 256-entry
//! queues kept full of receive buffers, transmit buffers recycled.
//!
//! The device is told about new buffers (a "kick": a write to its notify
//! register) once per batch, not per buffer, and only when it asked to be:
//! [`Nic::service`] ends a batch, and kicks a queue if the device's
//! `avail_event` (EVENT_IDX, §2.7.10) lies among the buffers added since the
//! last kick, i.e. the device had caught up and stopped looking; a device
//! still working through the queue finds them itself. Under emulation a kick
//! is a trap into the device model that waits for the lock its I/O thread
//! holds while it sends or receives a burst: kicking per frame cost more than
//! building the frame, and kicking the receive queue per recycled buffer as
//! much again.
//!
//! Interrupts (§2.7.7): none for transmit completions, since sent buffers are
//! reclaimed on every pass anyway; one for received frames only once the
//! driver has caught up with the receive queue.
//!
//! The link status is the `status` field of the device's configuration
//! (VIRTIO_NET_F_STATUS), read through the transport.
//!
//! Zero-copy transmit ([`Nic::transmit_gather`]): a frame goes out as one
//! descriptor chain, the virtio-net header and the frame's headers from one
//! transmit buffer, then the segments of memory outside the driver, then the
//! frame's tail from the same buffer, further on. Only with VIRTIO_F_VERSION_1,
//! under which the device takes a frame in any layout of descriptors (§5.1.6:
//! a legacy device without VIRTIO_F_ANY_LAYOUT wants the header alone in its
//! descriptor); and only while the queue has a free descriptor for every part
//! (a chain holds one descriptor per part, §2.7.5). Otherwise the caller copies.
#![forbid(unsafe_code)]

use crate::nic::{MAX_SEGMENTS, Nic, TxSegment};
use crate::virtqueue::{ChainPart, Faults, VirtQueue};
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use virtio_drivers::transport::{DeviceStatus, InterruptStatus, Transport};
use virtio_drivers::{BufferDirection, Error, Hal};

/// Descriptors per queue (fewer if the device cannot take that many).
pub const QUEUE_SIZE: u16 = 256;
/// The MTU when the device does not advertise one.
pub const DEFAULT_MTU: usize = 1500;
/// virtio-net header in front of every frame: 12 bytes with `num_buffers`
/// (VIRTIO_F_VERSION_1), 10 for a legacy device.
const HEADER_LEN: usize = 12;
const LEGACY_HEADER_LEN: usize = 10;
/// Ethernet header plus one VLAN tag: room around the MTU in a buffer.
const L2_OVERHEAD: usize = 18;
/// The queues' indices (§5.1.2).
pub const RECEIVE_QUEUE: u16 = 0;
pub const TRANSMIT_QUEUE: u16 = 1;

/// Feature bits (§5.1.3, 6): the MTU and MAC in config space, the link
/// status, EVENT_IDX (notifications only when asked), virtio 1.0.
const F_MTU: u64 = 1 << 3;
const F_MAC: u64 = 1 << 5;
const F_STATUS: u64 = 1 << 16;
const F_EVENT_IDX: u64 = 1 << 29;
const F_VERSION_1: u64 = 1 << 32;
const FEATURES: u64 = F_MTU | F_MAC | F_STATUS | F_EVENT_IDX | F_VERSION_1;
/// virtio-net's config space (§5.1.4): `mac[6]`, `status`, `max_virtqueue_pairs`, `mtu`.
const CONFIG_MAC: usize = 0;
const CONFIG_STATUS: usize = 6;
const CONFIG_MTU: usize = 10;
/// `status` bit: the link is up.
const S_LINK_UP: u16 = 1;

/// Frame counters kept by the driver.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Receive completions dropped: shorter than the virtio-net header, or
    /// longer than the buffer (a device fault, also in `rx_faults`).
    pub rx_errors: u64,
    /// Transmit attempts refused because the queue was full.
    pub tx_queue_full: u64,
    /// Frames sent as a chain with memory outside the driver (zero-copy).
    pub tx_zero_copy: u64,
    /// Notifications of the device about new transmit / receive buffers.
    pub tx_kicks: u64,
    pub rx_kicks: u64,
    /// What each queue caught the device getting wrong.
    pub rx_faults: Faults,
    pub tx_faults: Faults,
}

/// A received frame in its receive buffer (after the virtio-net header).
pub struct RxFrame {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl AsRef<[u8]> for RxFrame {
    fn as_ref(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or(&[])
    }
}

pub struct VirtioNet<H: Hal, T: Transport> {
    transport: T,
    /// The features negotiated.
    features: u64,
    mac: [u8; 6],
    mtu: usize,
    header_len: usize,
    /// Bytes in each buffer: header, MTU, L2 header.
    buf_len: usize,
    rxq: VirtQueue<H>,
    txq: VirtQueue<H>,
    /// Sent buffers, for the next frames.
    tx_free: Vec<Box<[u8]>>,
    stats: Stats,
}

impl<H: Hal, T: Transport> VirtioNet<H, T> {
    /// Initialises the device (§3.1.1) and fills the receive queue. The MTU
    /// is the device's own (VIRTIO_NET_F_MTU, e.g. QEMU's `host_mtu=9000`)
    /// when it offers one, else 1500; the MAC the device's (VIRTIO_NET_F_MAC),
    /// else zero.
    pub fn new(mut transport: T) -> Result<Self, Error> {
        transport.set_status(DeviceStatus::empty());
        transport.set_status(DeviceStatus::ACKNOWLEDGE | DeviceStatus::DRIVER);
        let features = transport.read_device_features() & FEATURES;
        transport.write_driver_features(features);
        transport.set_status(DeviceStatus::ACKNOWLEDGE | DeviceStatus::DRIVER | DeviceStatus::FEATURES_OK);
        // A modern device may refuse the subset by clearing FEATURES_OK.
        if features & F_VERSION_1 != 0 && !transport.get_status().contains(DeviceStatus::FEATURES_OK) {
            transport.set_status(DeviceStatus::FAILED);
            return Err(Error::Unsupported);
        }
        transport.set_guest_page_size(4096);
        let mtu = if features & F_MTU != 0 {
            transport.read_config_space::<u16>(CONFIG_MTU).ok().filter(|&m| m >= 68).map_or(DEFAULT_MTU, usize::from)
        } else {
            DEFAULT_MTU
        };
        let mut mac = [0u8; 6];
        if features & F_MAC != 0 {
            for (i, b) in mac.iter_mut().enumerate() {
                *b = transport.read_config_space::<u8>(CONFIG_MAC + i)?;
            }
        }
        let event_idx = features & F_EVENT_IDX != 0;
        let (rx_size, tx_size) =
            (queue_size(&mut transport, RECEIVE_QUEUE), queue_size(&mut transport, TRANSMIT_QUEUE));
        let rxq = VirtQueue::new(&mut transport, RECEIVE_QUEUE, rx_size, event_idx);
        let txq = VirtQueue::new(&mut transport, TRANSMIT_QUEUE, tx_size, event_idx);
        let (rxq, txq) = match (rxq, txq) {
            (Ok(rxq), Ok(txq)) => (rxq, txq),
            (Err(e), _) | (_, Err(e)) => {
                // The device may have one queue's address: a reset makes it
                // forget it before the memory is freed.
                transport.set_status(DeviceStatus::empty());
                return Err(e);
            }
        };
        transport.finish_init();
        let header_len = if features & F_VERSION_1 != 0 { HEADER_LEN } else { LEGACY_HEADER_LEN };
        let buf_len = header_len + mtu + L2_OVERHEAD;
        let mut nic = Self {
            transport,
            features,
            mac,
            mtu,
            header_len,
            buf_len,
            rxq,
            txq,
            tx_free: Vec::new(),
            stats: Stats::default(),
        };
        for _ in 0..nic.rxq.size() {
            nic.repost(vec![0u8; buf_len].into_boxed_slice());
        }
        // Sent buffers are reclaimed on every pass: a transmit completion
        // needs no interrupt.
        nic.txq.disable_interrupts();
        nic.kick();
        Ok(nic)
    }

    /// The transport, for set-up the driver does not do (interrupt routing).
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    pub fn stats(&self) -> Stats {
        Stats { rx_faults: self.rxq.faults(), tx_faults: self.txq.faults(), ..self.stats }
    }

    /// Acknowledges the device's interrupt (INTx is level-triggered: it stays
    /// asserted until this read); whether its configuration changed (the link
    /// status, for one).
    pub fn ack_interrupt(&mut self) -> bool {
        self.transport.ack_interrupt().contains(InterruptStatus::DEVICE_CONFIGURATION_INTERRUPT)
    }

    /// Gives a receive buffer back to the device so the queue stays full.
    fn repost(&mut self, buf: Box<[u8]>) {
        let len = buf.len();
        if self.rxq.push(buf, len, BufferDirection::DeviceToDriver).is_err() {
            self.stats.rx_errors += 1;
        }
    }

    /// Tells the device about the buffers added since the last kick, if it
    /// stopped looking (see the module's doc).
    fn kick(&mut self) {
        if self.txq.kick(&mut self.transport) {
            self.stats.tx_kicks += 1;
        }
        if self.rxq.kick(&mut self.transport) {
            self.stats.rx_kicks += 1;
        }
    }

    fn reclaim_tx(&mut self) {
        while let Some(used) = self.txq.pop() {
            self.tx_free.push(used.buf);
        }
        // Keep `used_event` half the index space ahead of what was taken.
        self.txq.disable_interrupts();
    }

    /// A transmit buffer with its virtio-net header zeroed (no offloads:
    /// flags, GSO type and the rest are zero, and a recycled buffer may hold
    /// an old frame's bytes there).
    fn tx_buffer(&mut self) -> Box<[u8]> {
        let mut buf = self.tx_free.pop().unwrap_or_else(|| vec![0u8; self.buf_len].into_boxed_slice());
        if let Some(header) = buf.get_mut(..self.header_len) {
            header.fill(0);
        }
        buf
    }
}

/// The entries for queue `queue`: [`QUEUE_SIZE`], or the largest power of two
/// the device takes if that is fewer.
fn queue_size<T: Transport>(transport: &mut T, queue: u16) -> u16 {
    let max = u16::try_from(transport.max_queue_size(queue)).unwrap_or(u16::MAX);
    match max.checked_ilog2() {
        Some(log) if max < QUEUE_SIZE => 1 << log,
        _ => QUEUE_SIZE,
    }
}

impl<H: Hal, T: Transport> Drop for VirtioNet<H, T> {
    fn drop(&mut self) {
        // A reset stops the device using the rings and buffers, which are
        // freed next.
        self.transport.set_status(DeviceStatus::empty());
    }
}

impl<H: Hal, T: Transport> Nic for VirtioNet<H, T> {
    type Rx = RxFrame;

    fn receive(&mut self) -> Option<RxFrame> {
        loop {
            let Some(used) = self.rxq.pop() else {
                // Caught up: an interrupt for the next frame. One that came
                // before the device saw the request raised none: look again.
                if self.rxq.enable_interrupts() {
                    continue;
                }
                return None;
            };
            match used.written {
                Some(end) if end > self.header_len => {
                    self.stats.rx_frames += 1;
                    return Some(RxFrame { buf: used.buf, start: self.header_len, end });
                }
                _ => {
                    self.stats.rx_errors += 1;
                    self.repost(used.buf);
                }
            }
        }
    }

    fn recycle(&mut self, rx: RxFrame) {
        self.repost(rx.buf);
    }

    fn transmit<R>(&mut self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        if len > self.max_frame_len() {
            return None;
        }
        if self.txq.free() == 0 {
            self.reclaim_tx();
            if self.txq.free() == 0 {
                // The device has a whole queue to send: make sure it knows.
                self.kick();
                self.stats.tx_queue_full += 1;
                return None;
            }
        }
        let mut buf = self.tx_buffer();
        let total = self.header_len + len;
        let Some(frame) = buf.get_mut(self.header_len..total) else {
            self.tx_free.push(buf);
            return None;
        };
        let result = f(frame);
        match self.txq.push(buf, total, BufferDirection::DriverToDevice) {
            Ok(()) => {
                self.stats.tx_frames += 1;
                Some(result)
            }
            Err(buf) => {
                self.tx_free.push(buf);
                self.stats.tx_queue_full += 1;
                None
            }
        }
    }

    /// Free descriptors beyond the two the frame's own buffer takes (see the
    /// module doc); none on a device without VIRTIO_F_VERSION_1.
    fn gather_room(&mut self) -> usize {
        if self.features & F_VERSION_1 == 0 {
            return 0;
        }
        if self.txq.free() < 3 {
            self.reclaim_tx();
        }
        self.txq.free().saturating_sub(2).min(MAX_SEGMENTS)
    }

    fn transmit_gather<R>(
        &mut self,
        head_len: usize,
        segments: &[TxSegment],
        tail_len: usize,
        f: impl FnOnce(&mut [u8], &mut [u8]) -> R,
    ) -> Option<R> {
        let middle = segments.iter().try_fold(0usize, |a, s| a.checked_add(s.len()))?;
        let total = head_len.checked_add(middle)?.checked_add(tail_len)?;
        let refused = head_len == 0 || tail_len == 0 || segments.iter().any(TxSegment::is_empty);
        if refused || total > self.max_frame_len() || segments.is_empty() || segments.len() > self.gather_room() {
            return None;
        }
        let mut buf = self.tx_buffer();
        let head_end = self.header_len + head_len;
        let tail_end = head_end + tail_len;
        let Some((head, tail)) = buf.get_mut(self.header_len..tail_end).map(|b| b.split_at_mut(head_len)) else {
            self.tx_free.push(buf);
            return None;
        };
        let result = f(head, tail);
        let mut parts: [ChainPart; MAX_SEGMENTS + 2] = core::array::from_fn(|_| ChainPart::Own(0..0));
        parts[0] = ChainPart::Own(0..head_end);
        for (part, s) in parts[1..].iter_mut().zip(segments) {
            *part = ChainPart::Segment(*s);
        }
        parts[segments.len() + 1] = ChainPart::Own(head_end..tail_end);
        match self.txq.push_chain(buf, &parts[..segments.len() + 2]) {
            Ok(()) => {
                self.stats.tx_frames += 1;
                self.stats.tx_zero_copy += 1;
                Some(result)
            }
            Err(buf) => {
                self.tx_free.push(buf);
                self.stats.tx_queue_full += 1;
                None
            }
        }
    }

    fn service(&mut self) {
        self.kick();
        self.reclaim_tx();
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    /// The device's `status` (VIRTIO_NET_F_STATUS); a device without it has
    /// its link always up (§5.1.4). A read of the device's configuration: under
    /// emulation a trap, so for after a configuration interrupt, not per pass.
    fn link_up(&self) -> bool {
        if self.features & F_STATUS == 0 {
            return true;
        }
        // An unreadable field tells nothing, as if there were none.
        self.transport.read_config_space::<u16>(CONFIG_STATUS).map_or(true, |s| s & S_LINK_UP != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{DeviceQueue, FakeHal, FakeTransport, State};
    use alloc::rc::Rc;
    use core::cell::RefCell;

    const MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 7];

    struct Rig {
        nic: VirtioNet<FakeHal, FakeTransport>,
        state: Rc<RefCell<State>>,
        rx: DeviceQueue,
        tx: DeviceQueue,
    }

    /// A device offering `features` (plus ones we do not take), with `status`
    /// and `mtu` in its config space.
    fn rig_with(features: u64, status: u16, mtu: u16) -> Rig {
        let mut config = MAC.to_vec();
        config.extend_from_slice(&status.to_le_bytes());
        config.extend_from_slice(&1u16.to_le_bytes());
        config.extend_from_slice(&mtu.to_le_bytes());
        let state = Rc::new(RefCell::new(State {
            device_features: features | 1 << 0 | 1 << 11, // CSUM, HOST_TSO4: not taken
            max_queue_size: 1024,
            config,
            ..State::default()
        }));
        let nic = VirtioNet::new(FakeTransport { state: state.clone() }).expect("device");
        let q = |i: usize| DeviceQueue::new(state.borrow().queues[i].expect("queue set"));
        let (rx, tx) = (q(0), q(1));
        Rig { nic, state, rx, tx }
    }

    fn rig() -> Rig {
        rig_with(FEATURES, S_LINK_UP, 9000)
    }

    impl Rig {
        fn notified(&self) -> [u32; 2] {
            self.state.borrow().notified
        }

        /// The device receives `frame` into the next receive buffer.
        fn deliver(&mut self, frame: &[u8]) {
            let d = self.rx.take().expect("a receive buffer");
            let mut bytes = vec![0u8; HEADER_LEN];
            bytes.extend_from_slice(frame);
            self.rx.write(&d, &bytes);
            self.rx.complete(u32::from(d.id), bytes.len() as u32, true);
        }

        /// The device sends everything queued; the frames, headers stripped.
        fn send_all(&mut self) -> Vec<Vec<u8>> {
            let mut sent = Vec::new();
            while let Some(chain) = self.tx.take_chain() {
                let bytes = self.tx.read_chain(&chain);
                assert_eq!(&bytes[..HEADER_LEN], &[0; HEADER_LEN], "no offloads");
                sent.push(bytes[HEADER_LEN..].to_vec());
                self.tx.complete(u32::from(chain[0].id), 0, true);
            }
            sent
        }

        /// Receive buffers the device holds.
        fn rx_posted(&self) -> u16 {
            self.rx.avail_idx().wrapping_sub(self.rx.last_avail)
        }
    }

    #[test]
    fn init_negotiates_and_fills_the_receive_queue() {
        let r = rig();
        let s = r.state.borrow();
        assert_eq!(s.driver_features, FEATURES, "only what we drive");
        assert!(s.status.contains(DeviceStatus::DRIVER_OK));
        assert_eq!(s.queues.map(|q| q.map(|q| q.size)), [Some(QUEUE_SIZE); 2]);
        drop(s);
        assert_eq!((r.nic.mac(), r.nic.mtu(), r.nic.max_frame_len()), (MAC, 9000, 9014));
        assert_eq!(r.rx_posted(), QUEUE_SIZE);
        assert_eq!(r.notified(), [1, 0], "one doorbell for the whole receive queue");
        assert_eq!(r.tx.used_event(), 0x8000, "no transmit interrupts");
        assert_eq!(r.rx.used_event(), 0, "an interrupt for the first frame");
    }

    #[test]
    fn mtu_and_mac_only_when_offered_and_sane() {
        assert_eq!(rig_with(FEATURES & !F_MTU, 1, 9000).nic.mtu(), DEFAULT_MTU);
        assert_eq!(rig_with(FEATURES, 1, 60).nic.mtu(), DEFAULT_MTU, "below IPv4's minimum");
        assert_eq!(rig_with(FEATURES & !F_MAC, 1, 9000).nic.mac(), [0; 6]);
    }

    #[test]
    fn smaller_device_queues_are_taken() {
        let state = Rc::new(RefCell::new(State {
            device_features: FEATURES,
            max_queue_size: 200,
            config: vec![0; 12],
            ..State::default()
        }));
        let nic = VirtioNet::<FakeHal, _>::new(FakeTransport { state: state.clone() }).expect("device");
        assert_eq!(state.borrow().queues[0].map(|q| q.size), Some(128));
        drop(nic);
        assert_eq!(state.borrow().status, DeviceStatus::empty(), "reset when dropped");
    }

    #[test]
    fn a_device_without_queues_fails_init_and_is_reset() {
        let state = Rc::new(RefCell::new(State { device_features: FEATURES, config: vec![0; 12], ..State::default() }));
        let r = VirtioNet::<FakeHal, _>::new(FakeTransport { state: state.clone() });
        assert_eq!(r.err(), Some(Error::InvalidParam));
        assert_eq!(state.borrow().status, DeviceStatus::empty());
    }

    #[test]
    fn refused_features_fail_init() {
        let state = Rc::new(RefCell::new(State {
            device_features: FEATURES,
            max_queue_size: 256,
            config: vec![0; 12],
            refuse_features: true,
            ..State::default()
        }));
        let r = VirtioNet::<FakeHal, _>::new(FakeTransport { state: state.clone() });
        assert_eq!(r.err(), Some(Error::Unsupported));
        assert!(state.borrow().status.contains(DeviceStatus::FAILED));
    }

    #[test]
    fn received_frames_are_lent_and_refilled() {
        let mut r = rig();
        // Twice round the ring: buffers come back as frames are recycled.
        for i in 0..600u32 {
            let frame = vec![i as u8; 60 + (i as usize % 1400)];
            r.deliver(&frame);
            let rx = r.nic.receive().expect("a frame");
            assert_eq!(rx.as_ref(), &frame[..]);
            assert_eq!(r.rx_posted(), QUEUE_SIZE - 1, "lent out");
            r.nic.recycle(rx);
            assert_eq!(r.rx_posted(), QUEUE_SIZE, "refilled");
            assert!(r.nic.receive().is_none());
        }
        assert_eq!(r.nic.stats().rx_frames, 600);
        assert_eq!(r.nic.stats().rx_errors, 0);
    }

    #[test]
    fn receive_doorbell_only_when_the_device_ran_dry() {
        let mut r = rig();
        // The device has a full ring and wants to hear at entry 256 + 256:
        // refills before that need no doorbell.
        r.rx.set_avail_event(QUEUE_SIZE.wrapping_mul(2));
        for _ in 0..10 {
            r.deliver(&[1; 64]);
        }
        while let Some(rx) = r.nic.receive() {
            r.nic.recycle(rx);
        }
        r.nic.service();
        assert_eq!(r.notified()[0], 1);
        // A device that took the last buffer waits for the next one.
        r.rx.set_avail_event(r.rx.avail_idx());
        r.deliver(&[1; 64]);
        let rx = r.nic.receive().expect("a frame");
        r.nic.recycle(rx);
        r.nic.service();
        r.nic.service();
        assert_eq!(r.notified()[0], 2, "once");
    }

    #[test]
    fn receive_interrupt_only_after_catching_up() {
        let mut r = rig();
        r.deliver(&[1; 64]);
        assert_eq!(r.rx.interrupts, 1, "idle driver: interrupt");
        r.deliver(&[2; 64]);
        r.deliver(&[3; 64]);
        assert_eq!(r.rx.interrupts, 1, "driver behind: no more");
        let a = r.nic.receive().expect("frame");
        let b = r.nic.receive().expect("frame");
        r.deliver(&[4; 64]);
        assert_eq!(r.rx.interrupts, 1, "still behind");
        let c = r.nic.receive().expect("frame");
        let d = r.nic.receive().expect("frame");
        assert!(r.nic.receive().is_none());
        for f in [a, b, c, d] {
            r.nic.recycle(f);
        }
        r.deliver(&[5; 64]);
        assert_eq!(r.rx.interrupts, 2, "caught up: interrupt again");
    }

    #[test]
    fn a_burst_rings_the_transmit_doorbell_once() {
        let mut r = rig();
        for i in 0..10u8 {
            assert_eq!(r.nic.transmit(60, |b| b.fill(i)), Some(()));
        }
        assert_eq!(r.notified()[1], 0, "nothing before the burst ends");
        r.nic.service();
        assert_eq!(r.notified()[1], 1);
        let sent = r.send_all();
        assert_eq!(sent, (0..10u8).map(|i| vec![i; 60]).collect::<Vec<_>>());
        // The device waits at entry 10: the next burst rings once more.
        r.tx.set_avail_event(10);
        for _ in 0..5 {
            r.nic.transmit(60, |b| b.fill(0));
        }
        r.nic.service();
        assert_eq!(r.notified()[1], 2);
        // Still working (avail_event not yet reached): no doorbell.
        r.tx.set_avail_event(40);
        for _ in 0..5 {
            r.nic.transmit(60, |b| b.fill(0));
        }
        r.nic.service();
        assert_eq!(r.notified()[1], 2);
        assert_eq!(r.nic.stats().tx_kicks, 2);
    }

    #[test]
    fn sent_buffers_come_back_without_interrupts() {
        let mut r = rig();
        // Many times round the ring, reclaimed by `service` each pass.
        for pass in 0..300u32 {
            for _ in 0..200 {
                assert!(r.nic.transmit(100, |b| b.fill(pass as u8)).is_some(), "pass {pass}");
            }
            r.nic.service();
            assert_eq!(r.send_all().len(), 200);
            r.nic.service();
        }
        assert_eq!(r.tx.interrupts, 0);
        assert_eq!(r.nic.stats().tx_frames, 60_000);
        assert!(r.nic.tx_free.len() <= usize::from(QUEUE_SIZE), "buffers recycled, not piling up");
    }

    #[test]
    fn a_full_transmit_queue_refuses_and_kicks() {
        let mut r = rig();
        for _ in 0..QUEUE_SIZE {
            assert!(r.nic.transmit(60, |_| ()).is_some());
        }
        assert_eq!(r.nic.transmit(60, |_| ()), None);
        assert_eq!(r.nic.stats().tx_queue_full, 1);
        assert_eq!(r.notified()[1], 1, "the device told about the full queue");
        assert_eq!(r.send_all().len(), usize::from(QUEUE_SIZE));
        assert_eq!(r.nic.transmit(60, |_| ()), Some(()), "reclaimed when needed");
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut r = rig();
        assert_eq!(r.nic.transmit(9015, |_| ()), None);
        assert_eq!(r.nic.transmit(9014, |b| b.len()), Some(9014));
    }

    #[test]
    fn the_default_parts_and_checksums_are_one_contiguous_frame() {
        let mut r = rig();
        assert_eq!(r.nic.tx_offload(), crate::nic::TxOffload::default(), "no offload offered");
        let got = r.nic.transmit_parts(&[14, 20, 30], |p| {
            for (i, part) in p.iter_mut().enumerate() {
                part.fill(i as u8 + 1);
            }
            p.iter().map(|x| x.len()).sum::<usize>()
        });
        assert_eq!(got, Some(64));
        assert_eq!(r.nic.transmit_parts(&[9000, 15], |_| ()), None, "over the frame limit together");
        assert_eq!(r.nic.transmit_parts(&[10, 0], |_| ()), None);
        // Checksums asked of a NIC without offload: done in software.
        let frame = crate::csum::tests::ipv4_frame(crate::csum::PROTO_UDP, &[3; 99]);
        let both = crate::nic::TxChecksum { ipv4: true, l4: true };
        assert!(r.nic.transmit_with(frame.len(), both, |b| b.copy_from_slice(&frame)).is_some());
        r.nic.service();
        let sent = r.send_all();
        let mut expect = alloc::vec![1u8; 14];
        expect.extend([2; 20]);
        expect.extend([3; 30]);
        assert_eq!(sent[0], expect);
        assert_eq!((crate::csum::ipv4_header_ok(&sent[1]), crate::csum::l4_ok(&sent[1])), (Some(true), Some(true)));
    }

    #[test]
    fn frames_with_outside_memory_go_out_as_one_chain() {
        let mut r = rig();
        let outside: Vec<u8> = (0..4000u32).map(|i| (i * 3) as u8).collect();
        let segs = [crate::fake::segment(&outside[..1000]), crate::fake::segment(&outside[2000..3500])];
        assert_eq!(r.nic.gather_room(), MAX_SEGMENTS);
        let got = r.nic.transmit_gather(54, &segs, 6, |head, tail| {
            head.fill(0x11);
            tail.fill(0x22);
            (head.len(), tail.len())
        });
        assert_eq!(got, Some((54, 6)));
        assert_eq!(r.nic.txq.free(), usize::from(QUEUE_SIZE) - 4, "head, two segments, tail");
        r.nic.service();
        let sent = r.send_all();
        let want = [&[0x11; 54][..], &outside[..1000], &outside[2000..3500], &[0x22; 6]].concat();
        assert_eq!(sent, [want]);
        r.nic.service();
        assert_eq!(r.nic.txq.free(), usize::from(QUEUE_SIZE), "the whole chain reclaimed");
        assert_eq!((r.nic.stats().tx_frames, r.nic.stats().tx_zero_copy), (1, 1));
        assert_eq!(r.nic.tx_free.len(), 1, "one transmit buffer back");
        // Refused: empty pieces, too long, more segments than room.
        let one = [crate::fake::segment(&outside[..10])];
        assert!(r.nic.transmit_gather(0, &one, 4, |_, _| ()).is_none());
        assert!(r.nic.transmit_gather(54, &one, 0, |_, _| ()).is_none());
        assert!(r.nic.transmit_gather(54, &[], 4, |_, _| ()).is_none());
        assert!(r.nic.transmit_gather(54, &[crate::fake::segment(&outside[..0])], 4, |_, _| ()).is_none());
        let long = [crate::fake::segment(&outside[..3000]); 3];
        assert!(r.nic.transmit_gather(54, &long, 6, |_, _| ()).is_none(), "over the MTU");
        let seven = [crate::fake::segment(&outside[..10]); MAX_SEGMENTS + 1];
        assert!(r.nic.transmit_gather(54, &seven, 6, |_, _| ()).is_none());
        // A nearly full queue: room shrinks, then none.
        for _ in 0..QUEUE_SIZE - 3 {
            assert!(r.nic.transmit(60, |_| ()).is_some());
        }
        assert_eq!(r.nic.gather_room(), 1);
        assert!(r.nic.transmit_gather(54, &[one[0], one[0]], 4, |_, _| ()).is_none(), "two segments, room for one");
        assert!(r.nic.transmit_gather(54, &one, 4, |_, _| ()).is_some());
        assert_eq!(r.nic.gather_room(), 0);
        assert_eq!(r.send_all().len(), usize::from(QUEUE_SIZE) - 2);
        assert_eq!(r.nic.gather_room(), MAX_SEGMENTS, "reclaimed when asked");
    }

    #[test]
    fn a_legacy_device_gets_no_chains() {
        let mut r = rig_with(FEATURES & !F_VERSION_1, S_LINK_UP, 1500);
        let outside = [5u8; 100];
        assert_eq!(r.nic.gather_room(), 0);
        assert!(r.nic.transmit_gather(54, &[crate::fake::segment(&outside)], 4, |_, _| ()).is_none());
    }

    #[test]
    fn link_status_is_read_from_the_device() {
        let r = rig();
        assert!(r.nic.link_up());
        r.state.borrow_mut().config[CONFIG_STATUS] = 0;
        assert!(!r.nic.link_up());
        r.state.borrow_mut().config[CONFIG_STATUS] = 3; // up, and an announce
        assert!(r.nic.link_up());
        // No status feature: always up, whatever the field says.
        let r = rig_with(FEATURES & !F_STATUS, 0, 1500);
        assert!(r.nic.link_up());
    }

    #[test]
    fn configuration_interrupts_are_told_apart() {
        let mut r = rig();
        r.state.borrow_mut().isr = InterruptStatus::QUEUE_INTERRUPT;
        assert!(!r.nic.ack_interrupt());
        r.state.borrow_mut().isr = InterruptStatus::DEVICE_CONFIGURATION_INTERRUPT;
        assert!(r.nic.ack_interrupt());
    }

    #[test]
    fn lying_receive_completions_are_dropped_and_the_queue_stays_full() {
        let mut r = rig();
        let buf_len = r.nic.buf_len as u32;
        let d = r.rx.take().expect("buffer");
        r.rx.complete(u32::from(d.id), buf_len + 1, true); // longer than the buffer
        let d = r.rx.take().expect("buffer");
        r.rx.complete(u32::from(d.id), HEADER_LEN as u32, true); // a header, no frame
        r.rx.complete(4000, 64, true); // no such descriptor
        r.deliver(&[9; 64]);
        let rx = r.nic.receive().expect("the good frame");
        assert_eq!(rx.as_ref(), &[9; 64]);
        r.nic.recycle(rx);
        assert!(r.nic.receive().is_none());
        let s = r.nic.stats();
        assert_eq!((s.rx_frames, s.rx_errors), (1, 2));
        assert_eq!((s.rx_faults.bad_len, s.rx_faults.bad_id), (1, 1));
        assert_eq!(r.rx_posted(), QUEUE_SIZE, "dropped buffers went back");
    }

    #[test]
    fn lying_transmit_completions_do_not_lose_buffers() {
        let mut r = rig();
        r.nic.transmit(60, |_| ());
        r.nic.service();
        let d = r.tx.take().expect("frame");
        r.tx.complete(u32::from(QUEUE_SIZE), 0, true);
        r.tx.complete(u32::from(d.id), u32::MAX, true);
        r.nic.service();
        let s = r.nic.stats();
        assert_eq!((s.tx_faults.bad_id, s.tx_faults.bad_len), (1, 1));
        assert_eq!(r.nic.txq.free(), usize::from(QUEUE_SIZE));
        assert_eq!(r.nic.tx_free.len(), 1);
    }
}
