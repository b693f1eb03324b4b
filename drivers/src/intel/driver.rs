//! The Intel NIC driver behind [`Nic`], over either controller
//! ([`Controller`]: the 82574 as [`crate::e1000e::E1000e`], the 82576 as
//! [`crate::igb::Igb`]): one receive and one transmit queue of the
//! controller's descriptors ([`super::rx`], [`super::tx`]), brought up as
//! the controller's datasheet orders it ([`super::init`]), the MAC from
//! RAL0/RAH0 (or the NVM through EERD), the link from STATUS.LU with its
//! change interrupt ([`super::irq`]), jumbo frames up to the controller's
//! MTU, receive checksum verification, transmit checksum offload and
//! descriptor chains, a transmit watchdog that resets a stuck device
//! ([`super::watchdog`]), and the statistics registers accumulated
//! ([`super::stats`]).
//!
//! Doorbells (the tail registers; each write a trap under emulation) are
//! written once per batch, in [`Nic::service`], as virtio-net's kicks are.
//! Sent buffers are reclaimed on every pass, so transmit completions raise
//! no interrupt.
#![forbid(unsafe_code)]

use super::controller::Controller;
use super::desc::{self, Format, RX_EOP};
use super::irq::IrqMode;
use super::regs::{self, Regs};
use super::rx::RxRing;
use super::stats::{HwStats, Stats};
use super::tx::{TxContext, TxPart, TxRing};
use super::watchdog::Watchdog;
use crate::csum::{self, TxChecksum, TxOffload};
use crate::nic::{MAX_PARTS, MAX_SEGMENTS, Nic, RxChecksum, RxVerdict, TxSegment};
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use virtio_drivers::Hal;

/// Descriptors per ring (one page of each).
pub const RING_SIZE: u16 = 256;
/// The MTU a new device starts with.
pub const DEFAULT_MTU: usize = 1500;
/// IPv4's minimum, as the netdev layer's.
pub const MIN_MTU: usize = 68;
/// Ethernet header plus one VLAN tag, around the MTU in a buffer (the
/// device strips the CRC, SECRC).
pub const L2_OVERHEAD: usize = 18;

/// Why the device could not be brought up, or refused a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// CTRL.RST never cleared.
    ResetTimeout,
    /// A queue's RXDCTL/TXDCTL.ENABLE never read back as asked (the 82576,
    /// whose queues are switched on and off).
    QueueTimeout,
    /// No DMA memory for a ring.
    NoMemory,
    /// An MTU outside [`MIN_MTU`]..=the controller's maximum.
    BadMtu,
    /// An MSI-X table entry the device does not have.
    BadVector,
}

/// A received frame in its receive buffer, with what the device found of
/// its checksums.
pub struct RxFrame {
    buf: Box<[u8]>,
    len: usize,
    verdict: RxVerdict,
}

impl RxFrame {
    /// The device's checksum verdict (RXCSUM is on): IPv4 header and
    /// TCP/UDP apart. A frame whose IPv4 header was found bad never gets
    /// here.
    pub fn checksum(&self) -> RxVerdict {
        self.verdict
    }
}

impl AsRef<[u8]> for RxFrame {
    fn as_ref(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

pub struct Driver<H: Hal, R: Regs, C: Controller> {
    pub(crate) regs: R,
    pub(super) mac: [u8; 6],
    pub(crate) mtu: usize,
    /// Bytes in each receive buffer: a size the controller can name.
    pub(crate) rx_buf_len: usize,
    pub(crate) rx: RxRing<H, C::Format>,
    pub(super) tx: TxRing<H, C::Format>,
    /// Sent buffers, for the next frames.
    pub(super) tx_free: Vec<Box<[u8]>>,
    /// The tails the device was last told.
    pub(super) rx_told: u16,
    pub(super) tx_told: u16,
    /// Dropping the rest of a frame spread over several buffers.
    pub(super) rx_discarding: bool,
    /// STATUS.LU as last read (at bring-up and on each LSC).
    pub(super) carrier: bool,
    /// Frames the device finished, for the watchdog's progress.
    pub(super) tx_completed: u64,
    pub(super) watch: Watchdog,
    pub(super) stats: Stats,
    pub(super) hw: HwStats,
    /// Applied again after every reset (which clears the routing).
    pub(super) irq_mode: IrqMode,
    /// What the controller keeps of its own.
    pub(crate) ctl: C,
}

impl<H: Hal, R: Regs, C: Controller> Driver<H, R, C> {
    /// Resets and brings up the device with `mtu` (the netdev's; changed
    /// later with [`Driver::set_mtu`]).
    pub fn new(mut regs: R, mtu: usize) -> Result<Self, Error> {
        if !(MIN_MTU..=C::MAX_MTU).contains(&mtu) {
            return Err(Error::BadMtu);
        }
        let rx = RxRing::new(RING_SIZE).ok_or(Error::NoMemory)?;
        let tx = TxRing::new(RING_SIZE).ok_or(Error::NoMemory)?;
        C::reset(&mut regs)?;
        let mac = super::init::read_mac(&mut regs);
        let mut nic = Self {
            regs,
            mac,
            mtu,
            rx_buf_len: C::rx_buf_len(mtu),
            rx,
            tx,
            tx_free: Vec::new(),
            rx_told: 0,
            tx_told: 0,
            rx_discarding: false,
            carrier: false,
            tx_completed: 0,
            watch: Watchdog::default(),
            stats: Stats::default(),
            hw: HwStats::default(),
            irq_mode: IrqMode::Intx,
            ctl: C::default(),
        };
        nic.configure(Vec::new())?;
        Ok(nic)
    }

    /// Resets the device and brings it up again with the same rings: frames
    /// queued for transmission are dropped (and counted), receive buffers
    /// posted again. Frames lent out come back through `recycle` as usual.
    /// The carrier is read again once the device is up (on the 82576, whose
    /// PHY resets with it, it comes back when the PHY has negotiated).
    pub fn reset(&mut self) -> Result<(), Error> {
        // A reset clears the statistics: keep what they counted.
        self.hw.accumulate(&self.regs, &C::STATS);
        self.stats.resets += 1;
        let result = C::reset(&mut self.regs);
        self.stats.tx_lost += u64::from(self.tx.in_flight());
        let sent = self.tx.drain();
        self.tx_free.extend(sent);
        let spare = self.rx.drain();
        self.watch.clear();
        self.carrier = false;
        result?;
        self.configure(spare)
    }

    /// Sets the MTU (68..=the controller's maximum). A new receive buffer
    /// size is the controller's to apply (a reset, or a restart of the
    /// receive queue), the ring refilled with buffers of the new size;
    /// otherwise only the receiver's long-frame settings change.
    pub fn set_mtu(&mut self, mtu: usize) -> Result<(), Error> {
        if !(MIN_MTU..=C::MAX_MTU).contains(&mtu) {
            return Err(Error::BadMtu);
        }
        if mtu == self.mtu {
            return Ok(());
        }
        self.mtu = mtu;
        let len = C::rx_buf_len(mtu);
        if len != self.rx_buf_len {
            self.rx_buf_len = len;
            return C::resize_rx(self);
        }
        C::write_rctl(self, true);
        Ok(())
    }

    /// The link as last read (bring-up, link-change interrupts), without
    /// touching the device.
    pub fn carrier(&self) -> bool {
        self.carrier
    }

    /// STATUS.LU, read now.
    pub(super) fn link_up_now(&self) -> bool {
        self.regs.read(regs::STATUS) & regs::STATUS_LU != 0
    }

    pub fn stats(&self) -> Stats {
        Stats { rx_faults: self.rx.faults(), ..self.stats }
    }

    /// The device's counters, as of the last read.
    pub fn hw_stats(&self) -> HwStats {
        self.hw
    }

    /// The device's counters the driver reads, by their `perf` names.
    pub fn hw_counters(&self) -> impl Iterator<Item = (&'static str, u64)> {
        self.hw.named(&C::STATS)
    }

    /// What the controller keeps of its own (its counters).
    pub fn controller(&self) -> &C {
        &self.ctl
    }

    fn repost(&mut self, buf: Box<[u8]>) {
        // A buffer from before an MTU change is the wrong size: replace it.
        let buf = if buf.len() == self.rx_buf_len { buf } else { vec![0u8; self.rx_buf_len].into_boxed_slice() };
        if self.rx.post(buf).is_err() {
            self.stats.rx_errors += 1;
        }
    }

    /// Tells the device about buffers and frames added since the last time.
    pub(super) fn ring_doorbells(&mut self) {
        if self.rx.tail() != self.rx_told {
            self.rx_told = self.rx.tail();
            self.regs.write(C::RXQ.tail(), u32::from(self.rx_told));
            self.stats.rx_doorbells += 1;
        }
        if self.tx.tail() != self.tx_told {
            self.tx_told = self.tx.tail();
            self.regs.write(C::TXQ.tail(), u32::from(self.tx_told));
            self.stats.tx_doorbells += 1;
        }
    }

    pub(super) fn reclaim_tx(&mut self) {
        while self.tx.reclaim(&mut self.tx_free) {
            self.tx_completed += 1;
        }
    }

    /// Queues one frame of `lens` buffers, written by `f`, the device
    /// inserting the checksums `want` names (when the frame, whose headers
    /// must be in its first part, is IPv4 that can be laid out; else it goes
    /// as written).
    pub(super) fn send<T>(
        &mut self,
        lens: &[usize],
        want: TxChecksum,
        f: impl FnOnce(&mut [&mut [u8]]) -> T,
    ) -> Option<T> {
        let cap = self.mtu + L2_OVERHEAD;
        let total = lens.iter().try_fold(0usize, |a, &l| a.checked_add(l))?;
        if lens.is_empty() || lens.len() > MAX_PARTS || lens.iter().any(|&l| l == 0 || l > cap) {
            return None;
        }
        if total > self.max_frame_len() {
            return None;
        }
        // Room for the parts and perhaps a context descriptor.
        let need = lens.len() + usize::from(want.any());
        if self.tx.free() < need {
            self.reclaim_tx();
            if self.tx.free() < need {
                // A whole ring to send: make sure the device knows.
                self.ring_doorbells();
                self.stats.tx_queue_full += 1;
                return None;
            }
        }
        let mut parts: [TxPart; MAX_PARTS] = core::array::from_fn(|_| TxPart::Buf { buf: None, len: 0 });
        for (part, &len) in parts.iter_mut().zip(lens) {
            *part = TxPart::Buf { buf: Some(self.tx_buffer()), len };
        }
        let parts = &mut parts[..lens.len()];
        let (result, ctx) = {
            let mut slices: [&mut [u8]; MAX_PARTS] = Default::default();
            for (slice, part) in slices.iter_mut().zip(parts.iter_mut()) {
                if let TxPart::Buf { buf: Some(b), len } = part {
                    *slice = b.get_mut(..*len).unwrap_or_default();
                }
            }
            let result = f(&mut slices[..lens.len()]);
            let ctx =
                if want.any() { csum::prepare(slices[0], want).map(|layout| TxContext { layout, want }) } else { None };
            (result, ctx)
        };
        let offloaded = ctx.is_some();
        if self.tx.push(parts, ctx) {
            self.stats.tx_frames += 1;
            self.stats.tx_csum_offload += u64::from(offloaded);
            self.stats.tx_chained += u64::from(lens.len() > 1);
            Some(result)
        } else {
            self.tx_free.extend(parts.iter_mut().filter_map(TxPart::take_buf));
            self.stats.tx_queue_full += 1;
            None
        }
    }

    /// A transmit buffer that holds a whole frame: a spare one, else new.
    fn tx_buffer(&mut self) -> Box<[u8]> {
        let cap = self.mtu + L2_OVERHEAD;
        match self.tx_free.pop() {
            Some(b) if b.len() >= cap => b,
            _ => vec![0u8; cap].into_boxed_slice(),
        }
    }
}

impl<H: Hal, R: Regs, C: Controller> Drop for Driver<H, R, C> {
    fn drop(&mut self) {
        // Stop the device using the rings and buffers, which are freed next.
        let _ = C::reset(&mut self.regs);
    }
}

impl<H: Hal, R: Regs, C: Controller> Nic for Driver<H, R, C> {
    type Rx = RxFrame;

    fn receive(&mut self) -> Option<RxFrame> {
        loop {
            let done = self.rx.pop()?;
            let eop = done.status & RX_EOP != 0;
            let discarding = self.rx_discarding;
            self.rx_discarding = !eop;
            if discarding || !eop || done.len == 0 || done.status & C::Format::RX_ERR_FATAL != 0 {
                self.stats.rx_errors += 1;
                self.repost(done.buf);
                continue;
            }
            let verdict = desc::verdict::<C::Format>(done.status);
            if verdict.ipv4 == RxChecksum::Bad {
                // A corrupt IPv4 header: nothing above can trust its
                // addresses or lengths.
                self.stats.rx_bad_ip_csum += 1;
                self.repost(done.buf);
                continue;
            }
            self.stats.rx_ip_csum_good += u64::from(verdict.ipv4 == RxChecksum::Good);
            self.stats.rx_bad_l4_csum += u64::from(verdict.l4 == RxChecksum::Bad);
            self.stats.rx_frames += 1;
            return Some(RxFrame { buf: done.buf, len: done.len, verdict });
        }
    }

    fn recycle(&mut self, rx: RxFrame) {
        self.repost(rx.buf);
    }

    fn transmit<T>(&mut self, len: usize, f: impl FnOnce(&mut [u8]) -> T) -> Option<T> {
        self.send(&[len], TxChecksum::NONE, |parts| f(parts[0]))
    }

    /// IPv4 header and TCP/UDP-over-IPv4 checksums (§7.2 of each
    /// datasheet, transmit).
    fn tx_offload(&self) -> TxOffload {
        TxOffload { ipv4: true, l4_v4: true }
    }

    fn transmit_with<T>(&mut self, len: usize, csum: TxChecksum, f: impl FnOnce(&mut [u8]) -> T) -> Option<T> {
        self.send(&[len], csum, |parts| f(parts[0]))
    }

    /// One data descriptor per part (82574 §7.2, 82576 §7.2.2.3: a packet
    /// may span several).
    fn transmit_parts<T>(&mut self, lens: &[usize], f: impl FnOnce(&mut [&mut [u8]]) -> T) -> Option<T> {
        self.send(lens, TxChecksum::NONE, f)
    }

    /// Free descriptors beyond the head's and the tail's (82574 §7.2, 82576
    /// §7.2.2.3: one data descriptor per buffer of a packet); no context
    /// descriptor, as RoCE frames ask no checksum offload.
    fn gather_room(&mut self) -> usize {
        if self.tx.free() < 3 {
            self.reclaim_tx();
        }
        self.tx.free().saturating_sub(2).min(MAX_SEGMENTS)
    }

    /// The head and the tail each in a transmit buffer, the segments between
    /// them: one data descriptor each.
    fn transmit_gather<T>(
        &mut self,
        head_len: usize,
        segments: &[TxSegment],
        tail_len: usize,
        f: impl FnOnce(&mut [u8], &mut [u8]) -> T,
    ) -> Option<T> {
        let cap = self.mtu + L2_OVERHEAD;
        let middle = segments.iter().try_fold(0usize, |a, s| a.checked_add(s.len()))?;
        let total = head_len.checked_add(middle)?.checked_add(tail_len)?;
        let bad_len = |l: usize| l == 0 || l > cap;
        if bad_len(head_len) || bad_len(tail_len) || segments.iter().any(TxSegment::is_empty) {
            return None;
        }
        if segments.is_empty() || total > self.max_frame_len() || segments.len() > self.gather_room() {
            return None;
        }
        let (mut head, mut tail) = (self.tx_buffer(), self.tx_buffer());
        let result = f(head.get_mut(..head_len).unwrap_or_default(), tail.get_mut(..tail_len).unwrap_or_default());
        let mut parts: [TxPart; MAX_PARTS] = core::array::from_fn(|_| TxPart::Buf { buf: None, len: 0 });
        parts[0] = TxPart::Buf { buf: Some(head), len: head_len };
        for (part, s) in parts[1..].iter_mut().zip(segments) {
            *part = TxPart::Segment(*s);
        }
        parts[segments.len() + 1] = TxPart::Buf { buf: Some(tail), len: tail_len };
        let parts = &mut parts[..segments.len() + 2];
        if self.tx.push(parts, None) {
            self.stats.tx_frames += 1;
            self.stats.tx_chained += 1;
            self.stats.tx_zero_copy += 1;
            Some(result)
        } else {
            self.tx_free.extend(parts.iter_mut().filter_map(TxPart::take_buf));
            self.stats.tx_queue_full += 1;
            None
        }
    }

    fn service(&mut self) {
        self.ring_doorbells();
        self.reclaim_tx();
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    /// STATUS.LU: a register read (a trap under emulation), for after a
    /// link-change interrupt; [`Driver::carrier`] is the cached value.
    fn link_up(&self) -> bool {
        self.link_up_now()
    }
}
