//! The 82576 driver behind [`Nic`]: one receive and one transmit queue of
//! advanced descriptors ([`super::ring`]), reset and bring-up in the order
//! of the datasheet's software initialization (chapter 4: interrupts masked,
//! CTRL.RST, link setup, the queues, interrupts enabled), the MAC from
//! RAL0/RAH0 (or the NVM through EERD), the link from STATUS.LU with its
//! change interrupt, jumbo frames up to [`MAX_MTU`], a transmit watchdog
//! that resets a stuck device, and the statistics registers accumulated.
//!
//! Unlike the 82574, a reset here resets the PHY too: the link goes down
//! and comes back once auto-negotiation, restarted through MDIC, completes
//! (half a second under QEMU), with an LSC interrupt. So an MTU change
//! that needs new buffer sizes restarts only the receive queue (SRRCTL is
//! per queue, and a queue may be stopped and started alone, chapter 4), not
//! the device, and the carrier stays up.
//!
//! Doorbells (the tail registers; each write a trap under emulation) are
//! written once per batch, in [`Nic::service`], as virtio-net's kicks are.
//! Sent buffers are reclaimed on every pass, so transmit completions raise
//! no interrupt; received frames and link changes do, through the INTA
//! pin, one MSI message, or MSI-X with receive queue 0, transmit queue 0
//! and the "other" causes (link changes among them) on their own table
//! entries ([`IrqMode`], the 82574's). In every mode the causes are read
//! and acted on in one place, [`Igb::ack_interrupt`], from the poll loop.
#![forbid(unsafe_code)]

use super::desc::Advanced;
use super::regs::{self, Regs, poll};
use crate::csum::{self, TxChecksum, TxOffload};
pub use crate::e1000e::IrqMode;
use crate::intel::desc::{self, Format, RX_EOP};
use crate::intel::rx::{RingFaults, RxRing};
use crate::intel::stats::{HwStats, StatsMap, stat_names};
use crate::intel::tx::{TxContext, TxPart, TxRing};
use crate::nic::{MAX_PARTS, Nic, RxChecksum, RxVerdict};
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use virtio_drivers::Hal;

/// Descriptors per queue (one page of each).
pub const RING_SIZE: u16 = 256;
/// The MTU a new device starts with.
pub const DEFAULT_MTU: usize = 1500;
/// The largest MTU the driver offers: 9000, the appliance's jumbo size
/// (the 82576 itself takes frames up to 9.5 KB).
pub const MAX_MTU: usize = 9000;
/// IPv4's minimum, as the netdev layer's.
pub const MIN_MTU: usize = 68;
/// Ethernet header plus one VLAN tag, around the MTU in a buffer (the
/// device strips the CRC, SECRC).
const L2_OVERHEAD: usize = 18;
/// The CRC, which RLPML counts.
const CRC_LEN: usize = 4;
/// SRRCTL sizes packet buffers in KiB.
const BUF_UNIT: usize = 1024;
/// RXDMT0 when this many free descriptors remain (RDMTS counts 16s).
const RDMTS: u32 = 2;
/// A transmission the device has not finished in this long, with the link
/// up, means it is stuck: reset it (Linux's igb waits a few seconds too).
pub const TX_HANG_US: u64 = 2_000_000;
/// How often the statistics registers are read (each a trap; they are 32
/// bits, so at least every few seconds at line rate).
pub const STATS_EVERY_US: u64 = 1_000_000;

/// Which statistics registers the driver reads, and their `perf` names.
/// The 82576 driver reads ROC too: RLPML, which it sets, decides what is oversize.
pub const STATS: StatsMap = StatsMap { oversize: true, names: stat_names!("igb") };

/// Why the device could not be brought up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// CTRL.RST never cleared.
    ResetTimeout,
    /// A queue's RXDCTL/TXDCTL.ENABLE never read back as asked.
    QueueTimeout,
    /// No DMA memory for a ring.
    NoMemory,
    /// An MTU outside [`MIN_MTU`]..=[`MAX_MTU`].
    BadMtu,
    /// An MSI-X table entry the device does not have.
    BadVector,
}

/// Counters the driver keeps (the device's own are [`HwStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Receive buffers dropped: an error bit, no length, or part of a frame
    /// spread over several buffers.
    pub rx_errors: u64,
    /// Receiver overruns the device signalled (RXO).
    pub rx_overruns: u64,
    /// Transmit attempts refused because the ring was full.
    pub tx_queue_full: u64,
    /// Tail register writes.
    pub tx_doorbells: u64,
    pub rx_doorbells: u64,
    /// Device resets after bring-up (hangs), and what caused them.
    pub resets: u64,
    pub tx_hangs: u64,
    /// Receive queue restarts for a new buffer size (MTU changes).
    pub rx_restarts: u64,
    /// Frames queued but dropped by a reset before the device sent them.
    pub tx_lost: u64,
    /// Auto-negotiation restarts the PHY did not acknowledge (MDIC).
    pub phy_errors: u64,
    pub rx_faults: RingFaults,
    /// Frames dropped because the device found their IPv4 header checksum
    /// wrong.
    pub rx_bad_ip_csum: u64,
    /// Frames passed up whose TCP/UDP checksum the device found wrong (the
    /// stack above drops them, as it would have by itself).
    pub rx_bad_l4_csum: u64,
    /// Frames whose IPv4 header the device checked and found right.
    pub rx_ip_csum_good: u64,
    /// Frames sent with the device inserting checksums.
    pub tx_csum_offload: u64,
    /// Frames sent from more than one buffer.
    pub tx_chained: u64,
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

pub struct Igb<H: Hal, R: Regs> {
    regs: R,
    mac: [u8; 6],
    mtu: usize,
    /// Bytes in each receive buffer: whole KiB, as SRRCTL names them.
    rx_buf_len: usize,
    rx: RxRing<H, Advanced>,
    tx: TxRing<H, Advanced>,
    /// Sent buffers, for the next frames.
    tx_free: Vec<Box<[u8]>>,
    /// The tails the device was last told.
    rx_told: u16,
    tx_told: u16,
    /// Dropping the rest of a frame spread over several buffers.
    rx_discarding: bool,
    /// STATUS.LU as last read (at bring-up and on each LSC).
    carrier: bool,
    /// Since when the oldest transmission waits, and how many had
    /// completed then (progress restarts the clock).
    hang: Option<(u64, u64)>,
    tx_completed: u64,
    stats_at: Option<u64>,
    stats: Stats,
    hw: HwStats,
    /// Applied again after every reset (which clears GPIE and the IVARs).
    irq_mode: IrqMode,
}

/// The receive buffer for `mtu`: the smallest whole number of KiB that
/// holds a frame.
fn rx_buffer_len(mtu: usize) -> usize {
    (mtu + L2_OVERHEAD).div_ceil(BUF_UNIT) * BUF_UNIT
}

/// Resets the device (§4.2, software reset: interrupts masked first
/// and after, CTRL.RST polled until it self-clears). The queues, the MAC
/// and the PHY are back at their power-up state.
fn reset_device(r: &mut impl Regs) -> Result<(), Error> {
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

/// The station MAC: RAL0/RAH0 as the device loaded them from its NVM at
/// reset when valid, else NVM words 0..=2 read through EERD; zero when
/// neither answers.
fn read_mac(r: &mut impl Regs) -> [u8; 6] {
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

/// Turns a queue's descriptor control on or off and waits for the device
/// to say so (RXDCTL, TXDCTL in chapter 8: ENABLE reads back once the
/// queue switched).
fn switch_queue(r: &mut impl Regs, xdctl: u32, on: bool) -> Result<(), Error> {
    let enable = if on { regs::XDCTL_ENABLE } else { 0 };
    r.write(xdctl, regs::XDCTL_WTHRESH_1 | enable);
    poll(r, xdctl, |v| v & regs::XDCTL_ENABLE == enable).map(|_| ()).ok_or(Error::QueueTimeout)
}

impl<H: Hal, R: Regs> Igb<H, R> {
    /// Resets and brings up the device with `mtu` (the netdev's; changed
    /// later with [`Igb::set_mtu`]). The carrier comes up with the first
    /// link-change interrupt, once the PHY has negotiated.
    pub fn new(mut regs: R, mtu: usize) -> Result<Self, Error> {
        if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
            return Err(Error::BadMtu);
        }
        let rx = RxRing::new(RING_SIZE).ok_or(Error::NoMemory)?;
        let tx = TxRing::new(RING_SIZE).ok_or(Error::NoMemory)?;
        reset_device(&mut regs)?;
        let mac = read_mac(&mut regs);
        let mut nic = Self {
            regs,
            mac,
            mtu,
            rx_buf_len: rx_buffer_len(mtu),
            rx,
            tx,
            tx_free: Vec::new(),
            rx_told: 0,
            tx_told: 0,
            rx_discarding: false,
            carrier: false,
            hang: None,
            tx_completed: 0,
            stats_at: None,
            stats: Stats::default(),
            hw: HwStats::default(),
            irq_mode: IrqMode::Intx,
        };
        nic.configure(Vec::new())?;
        Ok(nic)
    }

    /// Programs a freshly reset device: link, address filters, both queues
    /// (the receive one filled, from `spare` buffers first), interrupts.
    fn configure(&mut self, spare: Vec<Box<[u8]>>) -> Result<(), Error> {
        if !set_up_link(&mut self.regs) {
            self.stats.phy_errors += 1;
        }
        let r = &mut self.regs;
        let m = self.mac;
        r.write(regs::RAL0, u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        r.write(regs::RAH0, u32::from(u16::from_le_bytes([m[4], m[5]])) | regs::RAH_AV);
        for i in 0..regs::MTA_WORDS {
            r.write(regs::MTA + 4 * i, 0);
        }
        self.start_tx()?;
        self.start_rx(spare)?;
        self.program_interrupts();
        self.carrier = self.regs.read(regs::STATUS) & regs::STATUS_LU != 0;
        Ok(())
    }

    /// Switches the device to `mode` (the kernel has set up the PCI side:
    /// the MSI capability, or the MSI-X table and capability), for now and
    /// after every reset.
    pub fn set_interrupt_mode(&mut self, mode: IrqMode) -> Result<(), Error> {
        if let IrqMode::Msix { rx, tx, other } = mode
            && [rx, tx, other].iter().any(|&e| e >= regs::MSIX_ENTRIES)
        {
            return Err(Error::BadVector);
        }
        self.irq_mode = mode;
        self.regs.write(regs::IMC, u32::MAX);
        self.regs.write(regs::EIMC, u32::MAX);
        self.program_interrupts();
        Ok(())
    }

    /// The interrupt mode in use.
    pub fn interrupt_mode(&self) -> IrqMode {
        self.irq_mode
    }

    /// Routes the causes as `irq_mode` says and enables them. INTx and MSI:
    /// legacy mode, the causes in IMS. MSI-X (§7.3): GPIE.MSIX_MODE and
    /// PBA, the receive and transmit queue 0 entries of IVAR0, the other
    /// causes' entry of IVAR_MISC, the receive and other vectors enabled in
    /// EIMS (transmit completions are reaped on every pass, so their vector
    /// stays masked), link changes and overruns in IMS. No auto-clear, no
    /// auto-mask: a cause stays until `ack_interrupt` clears it. GPIE goes
    /// first: the device reads EIMS's bits as vectors only in MSI-X mode.
    fn program_interrupts(&mut self) {
        let r = &mut self.regs;
        let entry = |e: u8, shift: u32| (u32::from(e) | regs::IVAR_VALID) << shift;
        let (gpie, ivar, misc, eims, ims) = match self.irq_mode {
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

    /// The transmit queue at its ring's start (chapter 4), enabled.
    fn start_tx(&mut self) -> Result<(), Error> {
        let r = &mut self.regs;
        let base = self.tx.base();
        r.write(regs::TDBAL, base as u32);
        r.write(regs::TDBAH, (base >> 32) as u32);
        r.write(regs::TDLEN, self.tx.len_bytes());
        r.write(regs::TDH, 0);
        r.write(regs::TDT, 0);
        self.tx_told = 0;
        switch_queue(r, regs::TXDCTL, true)?;
        let tctl = regs::TCTL_EN | regs::TCTL_PSP | regs::TCTL_CT | regs::TCTL_COLD | regs::TCTL_RTLC;
        r.write(regs::TCTL, tctl);
        Ok(())
    }

    /// The receive queue at its ring's start (chapter 4) with buffers of
    /// `rx_buf_len`, taken from `spare` first, and the receiver on.
    fn start_rx(&mut self, mut spare: Vec<Box<[u8]>>) -> Result<(), Error> {
        let r = &mut self.regs;
        let base = self.rx.base();
        r.write(regs::RDBAL, base as u32);
        r.write(regs::RDBAH, (base >> 32) as u32);
        r.write(regs::RDLEN, self.rx.len_bytes());
        r.write(regs::RDH, 0);
        r.write(regs::RDT, 0);
        let kib = (self.rx_buf_len / BUF_UNIT) as u32 & regs::SRRCTL_BSIZEPKT_MASK;
        r.write(regs::SRRCTL, kib | regs::SRRCTL_DESCTYPE_ADV_ONEBUF | RDMTS << regs::SRRCTL_RDMTS_SHIFT);
        (self.rx_told, self.rx_discarding) = (0, false);
        // The queue first, then the receiver (chapter 4); buffers once both
        // are on, since a tail written to a disabled queue is ignored.
        switch_queue(r, regs::RXDCTL, true)?;
        // Checksum verification on (§7.1, receive): the verdict is in every
        // descriptor written back.
        r.write(regs::RXCSUM, regs::RXCSUM_IPOFLD | regs::RXCSUM_TUOFLD);
        self.write_rctl(true);
        while self.rx.has_room() {
            let buf = spare.pop().filter(|b| b.len() == self.rx_buf_len);
            let buf = buf.unwrap_or_else(|| vec![0u8; self.rx_buf_len].into_boxed_slice());
            if self.rx.post(buf).is_err() {
                break;
            }
        }
        self.ring_doorbells();
        Ok(())
    }

    /// The receiver's control and its long-frame limit for the MTU.
    fn write_rctl(&mut self, enable: bool) {
        let lpe = if self.mtu > DEFAULT_MTU { regs::RCTL_LPE } else { 0 };
        let en = if enable { regs::RCTL_EN } else { 0 };
        let limit = (self.mtu + L2_OVERHEAD + CRC_LEN) as u32;
        self.regs.write(regs::RLPML, limit);
        self.regs.write(regs::RCTL, en | regs::RCTL_MPE | regs::RCTL_BAM | regs::RCTL_SECRC | lpe);
    }

    /// Stops the receive queue, takes its buffers back and starts it again
    /// with buffers of the current size: what a new MTU needs, without the
    /// device reset that would take the link down.
    /// A queue that will not stop may still write into its buffers: then
    /// the whole device is reset instead, which stops it for sure.
    fn restart_rx(&mut self) -> Result<(), Error> {
        self.stats.rx_restarts += 1;
        self.write_rctl(false);
        if switch_queue(&mut self.regs, regs::RXDCTL, false).is_err() {
            return self.reset();
        }
        let spare = self.rx.drain();
        self.start_rx(spare)
    }

    /// Resets the device and brings it up again with the same rings: frames
    /// queued for transmission are dropped (and counted), receive buffers
    /// posted again. Frames lent out come back through `recycle` as usual.
    /// The link goes down and comes back when the PHY has negotiated.
    pub fn reset(&mut self) -> Result<(), Error> {
        // A reset clears the statistics: keep what they counted.
        self.hw.accumulate(&self.regs, &STATS);
        self.stats.resets += 1;
        let result = reset_device(&mut self.regs);
        self.stats.tx_lost += u64::from(self.tx.in_flight());
        let sent = self.tx.drain();
        self.tx_free.extend(sent);
        let spare = self.rx.drain();
        self.hang = None;
        self.carrier = false;
        result?;
        self.configure(spare)
    }

    /// Sets the MTU (68..=9000). A new receive buffer size restarts the
    /// receive queue with buffers of that size; otherwise only the
    /// receiver's long-frame settings change.
    pub fn set_mtu(&mut self, mtu: usize) -> Result<(), Error> {
        if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
            return Err(Error::BadMtu);
        }
        if mtu == self.mtu {
            return Ok(());
        }
        self.mtu = mtu;
        let len = rx_buffer_len(mtu);
        if len != self.rx_buf_len {
            self.rx_buf_len = len;
            return self.restart_rx();
        }
        self.write_rctl(true);
        Ok(())
    }

    /// Acknowledges the device's interrupt (INTx stays asserted until the
    /// causes are cleared, and in MSI-X mode reading ICR clears nothing:
    /// read ICR, write back what it held); whether the link changed, in
    /// which case [`Igb::carrier`] is fresh. In MSI-X mode EICR is cleared
    /// first, the same way: a vector fires again only once its bit has
    /// fallen, and a cause arriving after this read raises its bit anew
    /// (one arriving between the two reads is in ICR, taken below).
    pub fn ack_interrupt(&mut self) -> bool {
        if let IrqMode::Msix { .. } = self.irq_mode {
            let eicr = self.regs.read(regs::EICR);
            if eicr != 0 {
                self.regs.write(regs::EICR, eicr);
            }
        }
        let icr = self.regs.read(regs::ICR);
        if icr != 0 {
            self.regs.write(regs::ICR, icr);
        }
        self.handle_causes(icr)
    }

    /// What the interrupt causes in `icr` ask for: overruns counted, the
    /// link read again on a change (whether it changed). Frames and
    /// completions need nothing here: the pass that follows takes them.
    fn handle_causes(&mut self, icr: u32) -> bool {
        if icr & regs::INT_RXO != 0 {
            self.stats.rx_overruns += 1;
        }
        if icr & regs::INT_LSC != 0 {
            self.carrier = self.regs.read(regs::STATUS) & regs::STATUS_LU != 0;
            return true;
        }
        false
    }

    /// The link as last read (bring-up, link-change interrupts), without
    /// touching the device.
    pub fn carrier(&self) -> bool {
        self.carrier
    }

    /// Periodic care, cheap enough for every pass (`now_us`: any monotonic
    /// microsecond clock): resets a device whose oldest transmission has
    /// waited [`TX_HANG_US`] with the link up, and reads the statistics every
    /// [`STATS_EVERY_US`]. Whether it reset the device.
    pub fn watchdog(&mut self, now_us: u64) -> bool {
        if self.stats_at.is_none_or(|t| now_us.saturating_sub(t) >= STATS_EVERY_US) {
            self.stats_at = Some(now_us);
            self.hw.accumulate(&self.regs, &STATS);
        }
        self.reclaim_tx();
        if !(self.carrier && self.tx.oldest_pending()) {
            self.hang = None;
            return false;
        }
        match self.hang {
            Some((since, done)) if done == self.tx_completed => {
                if now_us.saturating_sub(since) < TX_HANG_US {
                    return false;
                }
                self.stats.tx_hangs += 1;
                // A failed reset leaves the device down; the next pass's
                // watchdog finds nothing queued and tries no more.
                let _ = self.reset();
                true
            }
            _ => {
                self.hang = Some((now_us, self.tx_completed));
                false
            }
        }
    }

    pub fn stats(&self) -> Stats {
        Stats { rx_faults: self.rx.faults(), ..self.stats }
    }

    /// The device's counters, as of the last read.
    pub fn hw_stats(&self) -> HwStats {
        self.hw
    }

    fn repost(&mut self, buf: Box<[u8]>) {
        // A buffer from before an MTU change is the wrong size: replace it.
        let buf = if buf.len() == self.rx_buf_len { buf } else { vec![0u8; self.rx_buf_len].into_boxed_slice() };
        if self.rx.post(buf).is_err() {
            self.stats.rx_errors += 1;
        }
    }

    /// Tells the device about buffers and frames added since the last time.
    fn ring_doorbells(&mut self) {
        if self.rx.tail() != self.rx_told {
            self.rx_told = self.rx.tail();
            self.regs.write(regs::RDT, u32::from(self.rx_told));
            self.stats.rx_doorbells += 1;
        }
        if self.tx.tail() != self.tx_told {
            self.tx_told = self.tx.tail();
            self.regs.write(regs::TDT, u32::from(self.tx_told));
            self.stats.tx_doorbells += 1;
        }
    }

    fn reclaim_tx(&mut self) {
        while self.tx.reclaim(&mut self.tx_free) {
            self.tx_completed += 1;
        }
    }

    /// Queues one frame of `lens` buffers, written by `f`, the device
    /// inserting the checksums `want` names (when the frame, whose headers
    /// must be in its first part, is IPv4 that can be laid out; else it goes
    /// as written).
    fn send<T>(&mut self, lens: &[usize], want: TxChecksum, f: impl FnOnce(&mut [&mut [u8]]) -> T) -> Option<T> {
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
        let mut parts: [TxPart; MAX_PARTS] = core::array::from_fn(|_| TxPart { buf: None, len: 0 });
        for (part, &len) in parts.iter_mut().zip(lens) {
            let buf = match self.tx_free.pop() {
                Some(b) if b.len() >= cap => b,
                _ => vec![0u8; cap].into_boxed_slice(),
            };
            *part = TxPart { buf: Some(buf), len };
        }
        let parts = &mut parts[..lens.len()];
        let (result, ctx) = {
            let mut slices: [&mut [u8]; MAX_PARTS] = Default::default();
            for (slice, part) in slices.iter_mut().zip(parts.iter_mut()) {
                *slice = part.buf.as_deref_mut().and_then(|b| b.get_mut(..part.len)).unwrap_or_default();
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
            self.tx_free.extend(parts.iter_mut().filter_map(|p| p.buf.take()));
            self.stats.tx_queue_full += 1;
            None
        }
    }
}

impl<H: Hal, R: Regs> Drop for Igb<H, R> {
    fn drop(&mut self) {
        // Stop the device using the rings and buffers, which are freed next.
        let _ = reset_device(&mut self.regs);
    }
}

impl<H: Hal, R: Regs> Nic for Igb<H, R> {
    type Rx = RxFrame;

    fn receive(&mut self) -> Option<RxFrame> {
        loop {
            let done = self.rx.pop()?;
            let eop = done.status & RX_EOP != 0;
            let discarding = self.rx_discarding;
            self.rx_discarding = !eop;
            if discarding || !eop || done.len == 0 || done.status & Advanced::RX_ERR_FATAL != 0 {
                self.stats.rx_errors += 1;
                self.repost(done.buf);
                continue;
            }
            let verdict = desc::verdict::<Advanced>(done.status);
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

    /// IPv4 header and TCP/UDP-over-IPv4 checksums (§7.2, transmit).
    fn tx_offload(&self) -> TxOffload {
        TxOffload { ipv4: true, l4_v4: true }
    }

    fn transmit_with<T>(&mut self, len: usize, csum: TxChecksum, f: impl FnOnce(&mut [u8]) -> T) -> Option<T> {
        self.send(&[len], csum, |parts| f(parts[0]))
    }

    /// One data descriptor per part (§7.2.2.3: a packet may span several).
    fn transmit_parts<T>(&mut self, lens: &[usize], f: impl FnOnce(&mut [&mut [u8]]) -> T) -> Option<T> {
        self.send(lens, TxChecksum::NONE, f)
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
    /// link-change interrupt; [`Igb::carrier`] is the cached value.
    fn link_up(&self) -> bool {
        self.regs.read(regs::STATUS) & regs::STATUS_LU != 0
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{DD_EOP, Device, FakeRegs};
    use super::*;
    use crate::fake::FakeHal;
    use alloc::rc::Rc;
    use core::cell::RefCell;

    const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
    const POSTED: u32 = RING_SIZE as u32 - 1;
    /// RXE: the frame error bit of the write-back.
    const RXE: u32 = 1 << 31;

    struct Rig {
        nic: Igb<FakeHal, FakeRegs>,
        dev: Rc<RefCell<Device>>,
    }

    /// A device brought up, its link negotiated and the change taken.
    fn rig_with(mtu: usize) -> Rig {
        let dev = Device::new(MAC);
        let nic = Igb::new(FakeRegs(dev.clone()), mtu).expect("device");
        let mut r = Rig { nic, dev };
        r.dev.borrow_mut().finish_negotiation();
        assert!(r.nic.ack_interrupt(), "the link came up");
        r
    }

    fn rig() -> Rig {
        rig_with(DEFAULT_MTU)
    }

    impl Rig {
        fn reg(&self, r: u32) -> u32 {
            self.dev.borrow().reg(r)
        }
        fn writes(&self, r: u32) -> u32 {
            self.dev.borrow().writes(r)
        }
        fn deliver(&self, frame: &[u8]) -> bool {
            self.dev.borrow_mut().deliver(frame)
        }
        fn deliver_raw(&self, bytes: &[u8], len: u16, status_error: u32) -> bool {
            self.dev.borrow_mut().deliver_raw(bytes, len, status_error)
        }
        fn send_all(&self) -> Vec<Vec<u8>> {
            self.dev.borrow_mut().send_all()
        }
        fn rx_available(&self) -> u32 {
            self.dev.borrow().rx_available()
        }
        fn resets(&self) -> u32 {
            self.dev.borrow().resets
        }
    }

    #[test]
    fn bring_up_resets_programs_both_queues_and_negotiates_the_link() {
        let dev = Device::new(MAC);
        let mut nic = Igb::<FakeHal, _>::new(FakeRegs(dev.clone()), DEFAULT_MTU).expect("device");
        let reg = |r| dev.borrow().reg(r);
        assert_eq!(dev.borrow().resets, 1);
        assert_eq!((nic.mac(), nic.mtu(), nic.max_frame_len()), (MAC, 1500, 1514));
        assert_eq!((reg(regs::RDLEN), reg(regs::TDLEN)), (4096, 4096));
        assert_ne!(reg(regs::RDBAL), 0);
        assert_ne!(reg(regs::TDBAL), 0);
        assert_eq!(dev.borrow().rx_buffer_size(), 2048);
        assert_eq!(reg(regs::SRRCTL) >> regs::SRRCTL_RDMTS_SHIFT & 0x1f, RDMTS);
        assert_ne!(reg(regs::RXDCTL) & regs::XDCTL_ENABLE, 0);
        assert_ne!(reg(regs::TXDCTL) & regs::XDCTL_ENABLE, 0);
        assert_eq!(dev.borrow().rx_available(), POSTED, "the receive ring full, one slot kept empty");
        assert_eq!(dev.borrow().writes(regs::RDT), 2, "zeroed, then one doorbell for the whole ring");
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
        assert!(dev.borrow().negotiating, "auto-negotiation restarted through MDIC");
        assert!(!nic.carrier() && !nic.link_up());
        dev.borrow_mut().finish_negotiation();
        assert!(nic.ack_interrupt(), "LSC");
        assert!(nic.carrier() && nic.link_up());
        assert_eq!(nic.stats().phy_errors, 0);
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
        dev.borrow_mut().rx_queue_stuck = true;
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
        dev.borrow_mut().phy_broken = true;
        let mut nic = Igb::<FakeHal, _>::new(FakeRegs(dev.clone()), 1500).expect("device");
        assert_eq!(nic.stats().phy_errors, 1);
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
        let before = r.writes(regs::RDT);
        let mut lent = Vec::new();
        while let Some(rx) = r.nic.receive() {
            lent.push(rx);
        }
        assert_eq!(lent.len(), 10);
        assert_eq!(r.rx_available(), POSTED - 10, "lent out");
        for rx in lent {
            r.nic.recycle(rx);
        }
        assert_eq!(r.writes(regs::RDT), before, "nothing before the pass ends");
        r.nic.service();
        r.nic.service();
        assert_eq!(r.writes(regs::RDT), before + 1);
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
        assert_eq!(r.writes(regs::TDT), 1, "only the bring-up's zero before the burst ends");
        r.nic.service();
        assert_eq!(r.writes(regs::TDT), 2);
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
        assert_eq!(r.reg(regs::TDT), POSTED, "the device told about the full ring");
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
        assert_eq!(r.nic.stats().rx_restarts, 1);
        assert_eq!(r.dev.borrow().rx_buffer_size(), 9 * 1024);
        assert_ne!(r.reg(regs::RCTL) & (regs::RCTL_LPE | regs::RCTL_EN), 0);
        assert_eq!(r.reg(regs::RLPML), 9022, "the frame with its CRC");
        assert_eq!((r.reg(regs::RDH), r.rx_available()), (0, POSTED));
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
        let restarts = r.nic.stats().rx_restarts;
        r.nic.set_mtu(1600).expect("mtu");
        assert_eq!(r.nic.stats().rx_restarts, restarts);
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
        r.dev.borrow_mut().rx_queue_wont_stop = true;
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
        assert_eq!((r.reg(regs::TDH), r.reg(regs::TDT)), (0, 0), "a fresh ring");
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
        let named: Vec<_> = r.nic.hw_stats().named(&STATS).collect();
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
