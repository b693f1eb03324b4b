//! virtio-net over PCI, on the `virtio-drivers` split-virtqueue layer
//! (`VirtQueue`), with our own buffer pools: 256-entry queues kept full of
//! receive buffers, transmit buffers recycled.
//!
//! The device is told about new buffers (a "kick": a write to its notify
//! register) once per batch, not per buffer, and only when it asked to be:
//! [`Nic::service`] ends a batch, and kicks a queue if the device's
//! `avail_event` (EVENT_IDX, virtio 2.7.10) lies among the buffers added since
//! the last kick, i.e. the device had caught up and stopped looking; a device
//! still working through the queue finds them itself. Under emulation a kick
//! is a trap into the device model that waits for the lock its I/O thread
//! holds while it sends or receives a burst: kicking per frame cost more than
//! building the frame, and kicking the receive queue per recycled buffer as
//! much again. (The queue layer's own `VirtIONetRaw` kicks on every buffer
//! while `avail_event` lags behind, which it does all through a burst.)

use crate::nic::Nic;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU16, Ordering, fence};
use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::{DeviceStatus, DeviceType, InterruptStatus, Transport};
use virtio_drivers::{Hal, PhysAddr};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// A HAL whose DMA memory is identity-mapped: the physical address the device
/// is given is also where the CPU reads it. The driver reads the device's
/// `avail_event` in the used ring by the address the queue layer gave it.
///
/// # Safety
///
/// Every buffer from `Hal::dma_alloc` must be readable at its physical address
/// for as long as it is allocated.
pub unsafe trait IdentityDma: Hal {}

/// Descriptors per queue.
pub const QUEUE_SIZE: usize = 256;
/// The MTU when the device does not advertise one.
pub const DEFAULT_MTU: usize = 1500;
/// virtio-net header in front of every frame: 12 bytes with `num_buffers`
/// (VIRTIO_F_VERSION_1), 10 for a legacy device.
const HEADER_LEN: usize = 12;
const LEGACY_HEADER_LEN: usize = 10;
/// Ethernet header plus one VLAN tag: room around the MTU in a buffer.
const L2_OVERHEAD: usize = 18;
/// The queues' indices (virtio 5.1.2).
const RECEIVE_QUEUE: u16 = 0;
const TRANSMIT_QUEUE: u16 = 1;

/// Feature bits (virtio 5.1.3, 6): the MTU and MAC in config space, the link
/// status, EVENT_IDX (the device interrupts only when asked), virtio 1.0.
const F_MTU: u64 = 1 << 3;
const F_MAC: u64 = 1 << 5;
const F_STATUS: u64 = 1 << 16;
const F_EVENT_IDX: u64 = 1 << 29;
const F_VERSION_1: u64 = 1 << 32;
const FEATURES: u64 = F_MTU | F_MAC | F_STATUS | F_EVENT_IDX | F_VERSION_1;
/// Offset of `mtu` in virtio-net's config space (after mac, status, max_virtqueue_pairs).
const CONFIG_MTU: usize = 10;

/// Frame counters kept by the driver.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Receive completions the device reported as errors.
    pub rx_errors: u64,
    /// Transmit attempts refused because the queue was full.
    pub tx_queue_full: u64,
    /// Notifications of the device about new transmit / receive buffers.
    pub tx_kicks: u64,
    pub rx_kicks: u64,
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
    mac: [u8; 6],
    header_len: usize,
    rxq: VirtQueue<H, QUEUE_SIZE>,
    txq: VirtQueue<H, QUEUE_SIZE>,
    rx_bell: Doorbell,
    tx_bell: Doorbell,
    /// Receive buffers the device holds, by descriptor token.
    rx: Vec<Option<Box<[u8]>>>,
    /// Transmit buffers in flight, by token, with the length given to the device.
    tx_in_flight: Vec<Option<(Box<[u8]>, usize)>>,
    tx_free: Vec<Box<[u8]>>,
    buf_len: usize,
    mtu: usize,
    link_up: bool,
    stats: Stats,
}

/// When to tell the device about a queue's new buffers.
struct Doorbell {
    queue: u16,
    /// Buffers added so far (wrapping): the queue's `avail.idx`.
    added: u16,
    /// `added` at the last kick decision.
    told: u16,
    /// The device's `avail_event` in the used ring, when EVENT_IDX was
    /// negotiated.
    avail_event: Option<*const AtomicU16>,
    /// Our `used_event` in the available ring (EVENT_IDX), and the used
    /// buffers taken so far (wrapping: the queue's last used index).
    used_event: Option<*mut AtomicU16>,
    used: u16,
}

impl Doorbell {
    /// Asks the device not to interrupt for the next used buffers: the
    /// driver looks at this queue on every pass anyway. (The queue layer
    /// re-arms `used_event` at every buffer it takes back; this undoes it.)
    fn mute(&self) {
        if let Some(event) = self.used_event {
            // SAFETY: `event` points into the available ring, which the queue
            // owned by the same driver keeps allocated; identity-mapped
            // (`IdentityDma`), 2-byte aligned; the device reads it
            // concurrently, hence the atomic store. Half the index space
            // ahead: `vring_need_event` stays false for any real batch.
            unsafe { (*event).store(self.used.wrapping_add(0x8000), Ordering::Release) };
        }
    }

    /// Whether the device must be kicked for the buffers added since the last
    /// call (`vring_need_event`: its `avail_event` is one of them).
    fn ring(&mut self, should_notify: impl FnOnce() -> bool) -> bool {
        let (old, new) = (self.told, self.added);
        if old == new {
            return false;
        }
        self.told = new;
        match self.avail_event {
            Some(event) => {
                // The device writes `avail_event` after reading `avail.idx`;
                // the idx store must be visible before this read (virtio_mb).
                fence(Ordering::SeqCst);
                // SAFETY: `event` points into the used ring, which the queue
                // owned by the same driver keeps allocated; the memory is
                // identity-mapped (`IdentityDma`) and the field 2-byte aligned.
                // The device writes it concurrently, hence the atomic load.
                let event = unsafe { (*event).load(Ordering::Acquire) };
                new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
            }
            None => should_notify(),
        }
    }
}

/// The transport as `VirtQueue::new` sees it, noting where the queue's used
/// ring (the device area) went.
struct Recorder<'a, T> {
    inner: &'a mut T,
    driver_area: PhysAddr,
    device_area: PhysAddr,
}

impl<T: Transport> Transport for Recorder<'_, T> {
    fn device_type(&self) -> DeviceType {
        self.inner.device_type()
    }

    fn read_device_features(&mut self) -> u64 {
        self.inner.read_device_features()
    }

    fn write_driver_features(&mut self, driver_features: u64) {
        self.inner.write_driver_features(driver_features)
    }

    fn max_queue_size(&mut self, queue: u16) -> u32 {
        self.inner.max_queue_size(queue)
    }

    fn notify(&mut self, queue: u16) {
        self.inner.notify(queue)
    }

    fn get_status(&self) -> DeviceStatus {
        self.inner.get_status()
    }

    fn set_status(&mut self, status: DeviceStatus) {
        self.inner.set_status(status)
    }

    fn set_guest_page_size(&mut self, guest_page_size: u32) {
        self.inner.set_guest_page_size(guest_page_size)
    }

    fn requires_legacy_layout(&self) -> bool {
        self.inner.requires_legacy_layout()
    }

    fn queue_set(&mut self, queue: u16, size: u32, descriptors: PhysAddr, driver_area: PhysAddr, device: PhysAddr) {
        self.driver_area = driver_area;
        self.device_area = device;
        self.inner.queue_set(queue, size, descriptors, driver_area, device)
    }

    fn queue_unset(&mut self, queue: u16) {
        self.inner.queue_unset(queue)
    }

    fn queue_used(&mut self, queue: u16) -> bool {
        self.inner.queue_used(queue)
    }

    fn ack_interrupt(&mut self) -> InterruptStatus {
        self.inner.ack_interrupt()
    }

    fn read_config_generation(&self) -> u32 {
        self.inner.read_config_generation()
    }

    fn read_config_space<V: FromBytes + IntoBytes>(&self, offset: usize) -> virtio_drivers::Result<V> {
        self.inner.read_config_space(offset)
    }

    fn write_config_space<V: IntoBytes + Immutable>(&mut self, offset: usize, value: V) -> virtio_drivers::Result<()> {
        self.inner.write_config_space(offset, value)
    }
}

/// Sets up queue `queue` and its doorbell.
fn new_queue<H: IdentityDma, T: Transport>(
    transport: &mut T,
    queue: u16,
    event_idx: bool,
) -> Result<(VirtQueue<H, QUEUE_SIZE>, Doorbell), virtio_drivers::Error> {
    let mut rec = Recorder { inner: transport, driver_area: 0, device_area: 0 };
    let q = VirtQueue::new(&mut rec, queue, false, event_idx)?;
    // The used ring: flags, idx, QUEUE_SIZE elements of 8 bytes, then
    // avail_event; the available ring: flags, idx, QUEUE_SIZE entries of 2
    // bytes, then used_event (virtio 2.7.6, 2.7.8).
    let field = |area: PhysAddr, offset: usize| {
        let at = usize::try_from(area).ok().and_then(|a| a.checked_add(offset));
        at.filter(|&a| event_idx && a != 0).map(|a| a as *mut AtomicU16)
    };
    let avail_event = field(rec.device_area, 4 + 8 * QUEUE_SIZE).map(|p| p.cast_const());
    let used_event = field(rec.driver_area, 4 + 2 * QUEUE_SIZE);
    Ok((q, Doorbell { queue, added: 0, told: 0, avail_event, used_event, used: 0 }))
}

impl<H: IdentityDma, T: Transport> VirtioNet<H, T> {
    /// Initialises the device (virtio 3.1.1) and fills the receive queue. The
    /// MTU is the device's own (VIRTIO_NET_F_MTU, e.g. QEMU's `host_mtu=9000`)
    /// when it offers one, else 1500.
    pub fn new(mut transport: T) -> Result<Self, virtio_drivers::Error> {
        transport.set_status(DeviceStatus::empty());
        transport.set_status(DeviceStatus::ACKNOWLEDGE | DeviceStatus::DRIVER);
        let features = transport.read_device_features() & FEATURES;
        transport.write_driver_features(features);
        transport.set_status(DeviceStatus::ACKNOWLEDGE | DeviceStatus::DRIVER | DeviceStatus::FEATURES_OK);
        transport.set_guest_page_size(4096);
        let mtu = if features & F_MTU != 0 {
            transport.read_config_space::<u16>(CONFIG_MTU).ok().filter(|&m| m >= 68).map_or(DEFAULT_MTU, usize::from)
        } else {
            DEFAULT_MTU
        };
        let mut mac = [0u8; 6];
        if features & F_MAC != 0 {
            for (i, b) in mac.iter_mut().enumerate() {
                *b = transport.read_config_space::<u8>(i)?;
            }
        }
        let event_idx = features & F_EVENT_IDX != 0;
        let (rxq, rx_bell) = new_queue(&mut transport, RECEIVE_QUEUE, event_idx)?;
        let (txq, tx_bell) = new_queue(&mut transport, TRANSMIT_QUEUE, event_idx)?;
        transport.finish_init();
        let header_len = if features & F_VERSION_1 != 0 { HEADER_LEN } else { LEGACY_HEADER_LEN };
        let buf_len = header_len + mtu + L2_OVERHEAD;
        let mut nic = Self {
            transport,
            mac,
            header_len,
            rxq,
            txq,
            rx_bell,
            tx_bell,
            rx: (0..QUEUE_SIZE).map(|_| None).collect(),
            tx_in_flight: (0..QUEUE_SIZE).map(|_| None).collect(),
            tx_free: Vec::new(),
            buf_len,
            mtu,
            link_up: true,
            stats: Stats::default(),
        };
        for _ in 0..QUEUE_SIZE {
            nic.repost(vec![0u8; buf_len].into_boxed_slice());
        }
        nic.kick();
        nic.tx_bell.mute();
        Ok(nic)
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Acknowledges the device's interrupt (INTx is level-triggered: it stays
    /// asserted until this read); whether its configuration changed (the link
    /// status, for one).
    pub fn ack_interrupt(&mut self) -> bool {
        self.transport
            .ack_interrupt()
            .contains(virtio_drivers::transport::InterruptStatus::DEVICE_CONFIGURATION_INTERRUPT)
    }

    /// Gives a receive buffer back to the device so the queue stays full.
    fn repost(&mut self, mut buf: Box<[u8]>) {
        // SAFETY: the buffer is heap memory that moves into `rx` below and is
        // not touched until the device returns its token through the used ring.
        match unsafe { self.rxq.add(&[], &mut [&mut buf[..]]) } {
            Ok(t) => {
                if let Some(slot) = self.rx.get_mut(usize::from(t)) {
                    *slot = Some(buf);
                }
                self.rx_bell.added = self.rx_bell.added.wrapping_add(1);
            }
            Err(_) => self.stats.rx_errors += 1,
        }
    }

    /// Tells the device about the buffers added since the last kick, if it
    /// stopped looking (see the module's doc).
    fn kick(&mut self) {
        let txq = &self.txq;
        if self.tx_bell.ring(|| txq.should_notify()) {
            self.transport.notify(self.tx_bell.queue);
            self.stats.tx_kicks += 1;
        }
        let rxq = &self.rxq;
        if self.rx_bell.ring(|| rxq.should_notify()) {
            self.transport.notify(self.rx_bell.queue);
            self.stats.rx_kicks += 1;
        }
    }

    fn reclaim_tx(&mut self) {
        while let Some(token) = self.txq.peek_used() {
            let Some((buf, len)) = self.tx_in_flight.get_mut(usize::from(token)).and_then(Option::take) else {
                break; // a token we never issued: the device is confused; stop here
            };
            // SAFETY: the same buffer and length that `add` got for this token.
            if unsafe { self.txq.pop_used(token, &[&buf[..len]], &mut []) }.is_ok() {
                self.tx_bell.used = self.tx_bell.used.wrapping_add(1);
            }
            self.tx_free.push(buf);
        }
        // Sent buffers are reclaimed on every pass: a transmit completion
        // needs no interrupt.
        self.tx_bell.mute();
    }
}

impl<H: IdentityDma, T: Transport> Nic for VirtioNet<H, T> {
    type Rx = RxFrame;

    fn receive(&mut self) -> Option<RxFrame> {
        loop {
            let token = self.rxq.peek_used()?;
            let mut buf = self.rx.get_mut(usize::from(token)).and_then(Option::take)?;
            // SAFETY: `buf` is the buffer given to `add` for this token.
            let used = unsafe { self.rxq.pop_used(token, &[], &mut [&mut buf[..]]) };
            let hdr = self.header_len;
            match used.map(|n| n as usize) {
                Ok(len) if len > hdr && len <= buf.len() => {
                    self.stats.rx_frames += 1;
                    return Some(RxFrame { buf, start: hdr, end: len });
                }
                _ => {
                    self.stats.rx_errors += 1;
                    self.repost(buf);
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
        if self.txq.available_desc() == 0 {
            self.reclaim_tx();
            if self.txq.available_desc() == 0 {
                // The device has a whole queue to send: make sure it knows.
                self.kick();
                self.stats.tx_queue_full += 1;
                return None;
            }
        }
        let mut buf = self.tx_free.pop().unwrap_or_else(|| vec![0u8; self.buf_len].into_boxed_slice());
        let hdr = self.header_len;
        let total = hdr + len;
        // No offloads: flags, GSO type and the rest of the header are zero
        // (and a recycled buffer may hold an old frame's bytes there).
        buf.get_mut(..hdr)?.fill(0);
        let result = f(buf.get_mut(hdr..total)?);
        // SAFETY: `buf` moves into `tx_in_flight` and is not touched until the
        // device hands the token back in `reclaim_tx`.
        match unsafe { self.txq.add(&[&buf[..total]], &mut []) } {
            Ok(token) => {
                if let Some(slot) = self.tx_in_flight.get_mut(usize::from(token)) {
                    *slot = Some((buf, total));
                }
                self.tx_bell.added = self.tx_bell.added.wrapping_add(1);
                self.stats.tx_frames += 1;
                Some(result)
            }
            Err(_) => {
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

    fn link_up(&self) -> bool {
        self.link_up
    }
}
