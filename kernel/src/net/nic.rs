//! The NIC drivers the appliance knows, as one type: a link holds a
//! [`NetDevice`], whichever driver probed its PCI function. An enum, not a
//! trait object, so a frame costs a branch on the variant rather than an
//! indirect call, and the virtio path compiles as before.

use super::hal::KernelHal;
use super::virtio_pci::{self, VirtioPci};
use crate::arch::source::IrqSource;
use crate::time::Instant;
use alloc::format;
use alloc::string::String;
use drivers::e1000e::{self, E1000e};
use drivers::igb::{self, Igb};
use drivers::intel::Regs as _;
use drivers::intel::{self, IrqMode, Mmio};
use drivers::nic::{Nic, RxVerdict, TxChecksum, TxOffload, TxSegment};
use drivers::virtio_net::{self, VirtioNet};

pub enum NetDevice {
    Virtio(VirtioNet<KernelHal, VirtioPci>),
    E1000e(E1000e<KernelHal, Mmio>),
    Igb(Igb<KernelHal, Mmio>),
}

/// Why a driver refused a new MTU.
#[derive(Debug)]
pub enum MtuError {
    E1000e(intel::Error),
    Igb(intel::Error),
}

impl core::fmt::Display for MtuError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MtuError::E1000e(e) => write!(f, "e1000e: {e:?}"),
            MtuError::Igb(e) => write!(f, "igb: {e:?}"),
        }
    }
}

/// A received frame, in whichever driver's buffer.
pub enum NetRx {
    Virtio(virtio_net::RxFrame),
    E1000e(intel::RxFrame),
    Igb(intel::RxFrame),
}

impl AsRef<[u8]> for NetRx {
    fn as_ref(&self) -> &[u8] {
        match self {
            NetRx::Virtio(f) => f.as_ref(),
            NetRx::E1000e(f) => f.as_ref(),
            NetRx::Igb(f) => f.as_ref(),
        }
    }
}

impl NetRx {
    /// What the NIC found of the frame's checksums (virtio-net: nothing
    /// checked; its driver takes no checksum feature).
    pub fn checksum(&self) -> RxVerdict {
        match self {
            NetRx::Virtio(_) => RxVerdict::default(),
            NetRx::E1000e(f) => f.checksum(),
            NetRx::Igb(f) => f.checksum(),
        }
    }
}

/// MSI-X on `f` with `N` vectors on table entries 0..N, each routed by
/// `route` (which tells the device which entry is which cause); `None`
/// (and nothing left enabled) when the function, the command line, the
/// vector pool or the device will not have it.
fn msix_vectors<const N: usize>(
    f: &kbase::pci::Function,
    route: impl FnOnce(&[u8; N]) -> Result<(), String>,
) -> Option<IrqSource> {
    use crate::arch::msi as vectors;
    if !vectors::allowed(kbase::msi::Allowed::All) {
        return None;
    }
    let (mut table, entries) = super::hal::msix_table(f)?;
    let mut v = [0u8; N];
    if !vectors::alloc(&mut v) {
        return None;
    }
    let done = crate::pci::msix_setup(f, entries, &v, |off, value| table.write(off, value))
        .map_err(|e| format!("{e:?}"))
        .and_then(|()| route(&v));
    if let Err(e) = done {
        log::warn!("{}: MSI-X: {e}; trying the next kind", f.bdf);
        crate::pci::msi_off(f);
        vectors::free(&v);
        return None;
    }
    crate::pci::msix_unmask(f);
    Some(IrqSource::msix(&v))
}

/// virtio-net on MSI-X: its receive queue on table entry 0, configuration
/// changes on entry 1, each its own vector.
fn virtio_msix(n: &mut VirtioNet<KernelHal, VirtioPci>, f: &kbase::pci::Function) -> Option<IrqSource> {
    msix_vectors::<2>(f, |v| {
        let routes = virtio_pci::Vectors { rx: 0, config: 1, config_cpu: v[1] };
        let (rx, tx) = (virtio_net::RECEIVE_QUEUE, virtio_net::TRANSMIT_QUEUE);
        n.transport_mut().use_msix(routes, rx, tx).map_err(|()| "the device refused a vector".into())
    })
}

impl NetDevice {
    /// Whether the NIC verifies every received IPv4 header checksum it
    /// can parse (and drops the bad): the Intel NICs, with RXCSUM on.
    pub fn rx_checks_ipv4(&self) -> bool {
        !matches!(self, NetDevice::Virtio(_))
    }

    /// The driver's name, for the log and `ip -d link`.
    pub fn model(&self) -> &'static str {
        match self {
            NetDevice::Virtio(_) => "virtio-net",
            NetDevice::E1000e(_) => "e1000e",
            NetDevice::Igb(_) => "igb",
        }
    }

    /// The largest MTU the device carries: virtio-net's is what the host
    /// offers (`host_mtu`), fixed; the Intel ones' is their jumbo frame size.
    pub fn max_mtu(&self) -> usize {
        match self {
            NetDevice::Virtio(n) => n.mtu(),
            NetDevice::E1000e(_) => e1000e::MAX_MTU,
            NetDevice::Igb(_) => igb::MAX_MTU,
        }
    }

    /// Sets up the device's interrupts, the best kind it has first: MSI-X
    /// (the Intel NICs' receive queue, transmit queue and other causes each
    /// on a vector; virtio-net's receive queue and configuration changes),
    /// else one MSI vector (the Intel NICs), else the INTx line.
    pub fn setup_interrupts(&mut self, f: &kbase::pci::Function) -> IrqSource {
        if let NetDevice::Virtio(n) = self {
            return virtio_msix(n, f).unwrap_or_else(|| {
                crate::pci::msi_off(f);
                IrqSource::Line(f.interrupt_line)
            });
        }
        if let Some(source) = self.msix(f).or_else(|| self.msi(f)) {
            return source;
        }
        crate::pci::msi_off(f);
        let _ = self.set_interrupt_mode(IrqMode::Intx);
        IrqSource::Line(f.interrupt_line)
    }

    /// Tells an Intel NIC how its interrupts now come (the 82574 and the
    /// 82576 take the same modes); virtio-net has only its line here.
    fn set_interrupt_mode(&mut self, mode: IrqMode) -> Result<(), String> {
        match self {
            NetDevice::Virtio(_) => Err("virtio-net: no MSI here".into()),
            NetDevice::E1000e(n) => n.set_interrupt_mode(mode).map_err(|e| format!("e1000e {e:?}")),
            NetDevice::Igb(n) => n.set_interrupt_mode(mode).map_err(|e| format!("igb {e:?}")),
        }
    }

    /// MSI-X: receive queue 0, transmit queue 0 and the other causes on
    /// table entries 0, 1, 2, each its own vector.
    fn msix(&mut self, f: &kbase::pci::Function) -> Option<IrqSource> {
        msix_vectors::<3>(f, |_| self.set_interrupt_mode(IrqMode::Msix { rx: 0, tx: 1, other: 2 }))
    }

    /// One MSI vector, every cause on it.
    fn msi(&mut self, f: &kbase::pci::Function) -> Option<IrqSource> {
        use crate::arch::msi as vectors;
        let mut v = [0u8; 1];
        if !vectors::allowed(kbase::msi::Allowed::Msi) || !vectors::alloc(&mut v) {
            return None;
        }
        let done = crate::pci::msi_setup(f, v[0])
            .map_err(|e| format!("{e:?}"))
            .and_then(|()| self.set_interrupt_mode(IrqMode::Msi));
        if let Err(e) = done {
            log::warn!("{}: MSI: {e}; using INTx", f.bdf);
            crate::pci::msi_off(f);
            vectors::free(&v);
            return None;
        }
        Some(IrqSource::Msi(v[0]))
    }

    /// Acknowledges the device's interrupt; whether the link may have changed.
    pub fn ack_interrupt(&mut self) -> bool {
        match self {
            NetDevice::Virtio(n) => n.ack_interrupt(),
            NetDevice::E1000e(n) => n.ack_interrupt(),
            NetDevice::Igb(n) => n.ack_interrupt(),
        }
    }

    /// Gives the driver the netdev's new MTU. virtio-net's frames are sized
    /// for the host's MTU already (the netdev's cannot exceed it); the
    /// 82574 and the 82576 resize their buffers.
    pub fn set_mtu(&mut self, mtu: u32) -> Result<(), MtuError> {
        match self {
            NetDevice::Virtio(_) => Ok(()),
            NetDevice::E1000e(n) => n.set_mtu(mtu as usize).map_err(MtuError::E1000e),
            NetDevice::Igb(n) => n.set_mtu(mtu as usize).map_err(MtuError::Igb),
        }
    }

    /// Per-pass care: the Intel NICs' transmit watchdog and statistics. Whether
    /// the device was reset.
    pub fn watchdog(&mut self, now: Instant) -> bool {
        match self {
            NetDevice::Virtio(_) => false,
            NetDevice::E1000e(n) => n.watchdog(now.as_micros()),
            NetDevice::Igb(n) => n.watchdog(now.as_micros()),
        }
    }

    /// Frames the device itself dropped for want of buffers, when it counts them.
    pub fn rx_missed(&self) -> Option<u64> {
        match self {
            NetDevice::Virtio(_) => None,
            NetDevice::E1000e(n) => Some(n.hw_stats().missed),
            NetDevice::Igb(n) => Some(n.hw_stats().missed),
        }
    }

    /// The driver's counters by name, for `perf`: the common ones under the
    /// same names for every driver, then the driver's own.
    pub fn counters(&self, add: &mut dyn FnMut(&'static str, u64)) {
        const COMMON: [&str; 7] = [
            "nic rx_frames",
            "nic tx_frames",
            "nic rx_errors",
            "nic tx_queue_full",
            "nic tx_kicks",
            "nic rx_kicks",
            "nic tx_zero_copy",
        ];
        let common = match self {
            NetDevice::Virtio(n) => {
                let s = n.stats();
                [s.rx_frames, s.tx_frames, s.rx_errors, s.tx_queue_full, s.tx_kicks, s.rx_kicks, s.tx_zero_copy]
            }
            NetDevice::E1000e(n) => {
                let s = n.stats();
                [s.rx_frames, s.tx_frames, s.rx_errors, s.tx_queue_full, s.tx_doorbells, s.rx_doorbells, s.tx_zero_copy]
            }
            NetDevice::Igb(n) => {
                let s = n.stats();
                [s.rx_frames, s.tx_frames, s.rx_errors, s.tx_queue_full, s.tx_doorbells, s.rx_doorbells, s.tx_zero_copy]
            }
        };
        for (name, v) in COMMON.into_iter().zip(common) {
            add(name, v);
        }
        let offload = match self {
            NetDevice::Virtio(_) => None,
            NetDevice::E1000e(n) => {
                let s = n.stats();
                Some([s.rx_bad_ip_csum, s.rx_bad_l4_csum, s.rx_ip_csum_good, s.tx_csum_offload, s.tx_chained])
            }
            NetDevice::Igb(n) => {
                let s = n.stats();
                Some([s.rx_bad_ip_csum, s.rx_bad_l4_csum, s.rx_ip_csum_good, s.tx_csum_offload, s.tx_chained])
            }
        };
        const OFFLOAD: [&str; 5] = [
            "nic rx_bad_ip_csum",
            "nic rx_bad_l4_csum",
            "nic rx_ip_csum_good",
            "nic tx_csum_offload",
            "nic tx_chained",
        ];
        for (name, v) in OFFLOAD.into_iter().zip(offload.into_iter().flatten()) {
            add(name, v);
        }
        if let NetDevice::E1000e(n) = self {
            let s = n.stats();
            add("e1000e rx_overruns", s.rx_overruns);
            add("e1000e resets", s.resets);
            add("e1000e tx_hangs", s.tx_hangs);
            add("e1000e tx_lost", s.tx_lost);
            for (name, v) in n.hw_counters() {
                add(name, v);
            }
        }
        if let NetDevice::Igb(n) = self {
            let s = n.stats();
            add("igb rx_overruns", s.rx_overruns);
            add("igb resets", s.resets);
            add("igb tx_hangs", s.tx_hangs);
            add("igb tx_lost", s.tx_lost);
            add("igb rx_restarts", n.controller().rx_restarts);
            add("igb phy_errors", n.controller().phy_errors);
            for (name, v) in n.hw_counters() {
                add(name, v);
            }
        }
    }
}

impl Nic for NetDevice {
    type Rx = NetRx;

    #[inline]
    fn receive(&mut self) -> Option<NetRx> {
        match self {
            NetDevice::Virtio(n) => n.receive().map(NetRx::Virtio),
            NetDevice::E1000e(n) => n.receive().map(NetRx::E1000e),
            NetDevice::Igb(n) => n.receive().map(NetRx::Igb),
        }
    }

    #[inline]
    fn recycle(&mut self, rx: NetRx) {
        match (self, rx) {
            (NetDevice::Virtio(n), NetRx::Virtio(f)) => n.recycle(f),
            (NetDevice::E1000e(n), NetRx::E1000e(f)) => n.recycle(f),
            (NetDevice::Igb(n), NetRx::Igb(f)) => n.recycle(f),
            // Another driver's buffer: not ours to post; dropping it frees it.
            _ => log::warn!("nic: a frame recycled to the wrong device"),
        }
    }

    #[inline]
    fn transmit<R>(&mut self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        match self {
            NetDevice::Virtio(n) => n.transmit(len, f),
            NetDevice::E1000e(n) => n.transmit(len, f),
            NetDevice::Igb(n) => n.transmit(len, f),
        }
    }

    fn tx_offload(&self) -> TxOffload {
        match self {
            NetDevice::Virtio(n) => n.tx_offload(),
            NetDevice::E1000e(n) => n.tx_offload(),
            NetDevice::Igb(n) => n.tx_offload(),
        }
    }

    #[inline]
    fn transmit_with<R>(&mut self, len: usize, csum: TxChecksum, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        match self {
            NetDevice::Virtio(n) => n.transmit_with(len, csum, f),
            NetDevice::E1000e(n) => n.transmit_with(len, csum, f),
            NetDevice::Igb(n) => n.transmit_with(len, csum, f),
        }
    }

    #[inline]
    fn transmit_parts<R>(&mut self, lens: &[usize], f: impl FnOnce(&mut [&mut [u8]]) -> R) -> Option<R> {
        match self {
            NetDevice::Virtio(n) => n.transmit_parts(lens, f),
            NetDevice::E1000e(n) => n.transmit_parts(lens, f),
            NetDevice::Igb(n) => n.transmit_parts(lens, f),
        }
    }

    fn gather_room(&mut self) -> usize {
        match self {
            NetDevice::Virtio(n) => n.gather_room(),
            NetDevice::E1000e(n) => n.gather_room(),
            NetDevice::Igb(n) => n.gather_room(),
        }
    }

    #[inline]
    fn transmit_gather<R>(
        &mut self,
        head_len: usize,
        segments: &[TxSegment],
        tail_len: usize,
        f: impl FnOnce(&mut [u8], &mut [u8]) -> R,
    ) -> Option<R> {
        match self {
            NetDevice::Virtio(n) => n.transmit_gather(head_len, segments, tail_len, f),
            NetDevice::E1000e(n) => n.transmit_gather(head_len, segments, tail_len, f),
            NetDevice::Igb(n) => n.transmit_gather(head_len, segments, tail_len, f),
        }
    }

    #[inline]
    fn service(&mut self) {
        match self {
            NetDevice::Virtio(n) => n.service(),
            NetDevice::E1000e(n) => n.service(),
            NetDevice::Igb(n) => n.service(),
        }
    }

    fn mac(&self) -> [u8; 6] {
        match self {
            NetDevice::Virtio(n) => n.mac(),
            NetDevice::E1000e(n) => n.mac(),
            NetDevice::Igb(n) => n.mac(),
        }
    }

    fn mtu(&self) -> usize {
        match self {
            NetDevice::Virtio(n) => n.mtu(),
            NetDevice::E1000e(n) => n.mtu(),
            NetDevice::Igb(n) => n.mtu(),
        }
    }

    fn max_frame_len(&self) -> usize {
        match self {
            NetDevice::Virtio(n) => n.max_frame_len(),
            NetDevice::E1000e(n) => n.max_frame_len(),
            NetDevice::Igb(n) => n.max_frame_len(),
        }
    }

    fn link_up(&self) -> bool {
        match self {
            NetDevice::Virtio(n) => n.link_up(),
            NetDevice::E1000e(n) => n.link_up(),
            NetDevice::Igb(n) => n.link_up(),
        }
    }
}
