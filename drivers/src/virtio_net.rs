//! virtio-net over PCI, on the `virtio-drivers` queue layer (`VirtIONetRaw`),
//! with our own buffer pools: 256-entry queues kept full of receive buffers,
//! transmit buffers recycled, and notifications suppressed by EVENT_IDX so a
//! burst of frames costs the host one kick, not one per frame.

use crate::nic::Nic;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use virtio_drivers::Hal;
use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::Transport;

/// Descriptors per queue.
pub const QUEUE_SIZE: usize = 256;
/// The MTU when the device does not advertise one.
pub const DEFAULT_MTU: usize = 1500;
/// virtio-net header (with `num_buffers`) in front of every frame.
const HEADER_LEN: usize = 12;
/// Ethernet header plus one VLAN tag: room around the MTU in a buffer.
const L2_OVERHEAD: usize = 18;

/// Frame counters kept by the driver.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Receive completions the device reported as errors.
    pub rx_errors: u64,
    /// Transmit attempts refused because the queue was full.
    pub tx_queue_full: u64,
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
    raw: VirtIONetRaw<H, T, QUEUE_SIZE>,
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

impl<H: Hal, T: Transport> VirtioNet<H, T> {
    /// Initialises the device and fills the receive queue. The MTU is the
    /// device's own (VIRTIO_NET_F_MTU, e.g. QEMU's `host_mtu=9000`) when it
    /// offers one, else 1500.
    pub fn new(mut transport: T) -> Result<Self, virtio_drivers::Error> {
        let mtu = advertised_mtu(&mut transport).map_or(DEFAULT_MTU, usize::from).max(68);
        let mut raw = VirtIONetRaw::new(transport)?;
        let buf_len = HEADER_LEN + mtu + L2_OVERHEAD;
        let mut rx: Vec<Option<Box<[u8]>>> = (0..QUEUE_SIZE).map(|_| None).collect();
        for _ in 0..QUEUE_SIZE {
            let mut buf = vec![0u8; buf_len].into_boxed_slice();
            // SAFETY: the buffer is heap memory owned by `rx` from now on and
            // not touched until the device returns it through `poll_receive`.
            let token = unsafe { raw.receive_begin(&mut buf)? };
            if let Some(slot) = rx.get_mut(usize::from(token)) {
                *slot = Some(buf);
            }
        }
        raw.enable_interrupts();
        Ok(Self {
            raw,
            rx,
            tx_in_flight: (0..QUEUE_SIZE).map(|_| None).collect(),
            tx_free: Vec::new(),
            buf_len,
            mtu,
            link_up: true,
            stats: Stats::default(),
        })
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Acknowledges the device's interrupt (INTx is level-triggered: it stays
    /// asserted until this read); whether its configuration changed (the link
    /// status, for one).
    pub fn ack_interrupt(&mut self) -> bool {
        self.raw.ack_interrupt().contains(virtio_drivers::transport::InterruptStatus::DEVICE_CONFIGURATION_INTERRUPT)
    }

    /// Gives a receive buffer back to the device so the queue stays full.
    fn repost(&mut self, mut buf: Box<[u8]>) {
        // SAFETY: as in `new`: the buffer is owned by `rx` until the device
        // returns it.
        match unsafe { self.raw.receive_begin(&mut buf) } {
            Ok(t) => {
                if let Some(slot) = self.rx.get_mut(usize::from(t)) {
                    *slot = Some(buf);
                }
            }
            Err(_) => self.stats.rx_errors += 1,
        }
    }

    fn reclaim_tx(&mut self) {
        while let Some(token) = self.raw.poll_transmit() {
            let Some((buf, len)) = self.tx_in_flight.get_mut(usize::from(token)).and_then(Option::take) else {
                break; // a token we never issued: the device is confused; stop here
            };
            // SAFETY: the same buffer and length that `transmit_begin` got for this token.
            let _ = unsafe { self.raw.transmit_complete(token, &buf[..len]) };
            self.tx_free.push(buf);
        }
    }
}

/// VIRTIO_NET_F_MTU: the device reports its MTU in config space.
const F_MTU: u64 = 1 << 3;
/// Offset of `mtu` in virtio-net's config space (after mac, status, max_virtqueue_pairs).
const CONFIG_MTU: usize = 10;

fn advertised_mtu(transport: &mut impl Transport) -> Option<u16> {
    if transport.read_device_features() & F_MTU == 0 {
        return None;
    }
    transport.read_config_space::<u16>(CONFIG_MTU).ok().filter(|&m| m >= 68)
}

impl<H: Hal, T: Transport> Nic for VirtioNet<H, T> {
    type Rx = RxFrame;

    fn receive(&mut self) -> Option<RxFrame> {
        loop {
            let token = self.raw.poll_receive()?;
            let mut buf = self.rx.get_mut(usize::from(token)).and_then(Option::take)?;
            // SAFETY: `buf` is the buffer given to `receive_begin` for this token.
            match unsafe { self.raw.receive_complete(token, &mut buf) } {
                Ok((hdr, len)) if hdr + len <= buf.len() => {
                    self.stats.rx_frames += 1;
                    return Some(RxFrame { buf, start: hdr, end: hdr + len });
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
        if !self.raw.can_send() {
            self.reclaim_tx();
            if !self.raw.can_send() {
                self.stats.tx_queue_full += 1;
                return None;
            }
        }
        let mut buf = self.tx_free.pop().unwrap_or_else(|| vec![0u8; self.buf_len].into_boxed_slice());
        let hdr = self.raw.fill_buffer_header(&mut buf).ok()?;
        let total = hdr + len;
        let result = f(buf.get_mut(hdr..total)?);
        // SAFETY: `buf` moves into `tx_in_flight` and is not touched until the
        // device hands the token back in `reclaim_tx`.
        match unsafe { self.raw.transmit_begin(&buf[..total]) } {
            Ok(token) => {
                if let Some(slot) = self.tx_in_flight.get_mut(usize::from(token)) {
                    *slot = Some((buf, total));
                }
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
        self.reclaim_tx();
    }

    fn mac(&self) -> [u8; 6] {
        self.raw.mac_address()
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn link_up(&self) -> bool {
        self.link_up
    }
}
