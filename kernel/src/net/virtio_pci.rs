//! virtio-net's PCI transport as the appliance drives it: virtio-drivers'
//! `PciTransport` for set-up and config space, with two things it lacks.
//!
//! - Each queue's notify address is learnt once (virtio 1.2 §4.1.4.4: it
//!   is fixed once the queue is set up). The transport selects the queue and
//!   reads its notify offset on every kick, and under emulation each access
//!   is a trap that waits for the lock QEMU's I/O thread holds while it
//!   moves frames: three traps where one does.
//! - MSI-X (§4.1.4.3, §4.1.5.1.2): received frames and configuration changes
//!   each raise their own vector, so an interrupt needs neither the ISR read
//!   (a trap, which INTx needs to lower the line) nor the PIC's mask and
//!   unmask around it (two more). The transmit queue gets no vector: sent
//!   buffers are reclaimed on every pass, and the driver asks for no
//!   transmit interrupts anyway.

use drivers::intel::Mmio;
use kbase::pci::ConfigAccess as _;
use virtio_drivers::PhysAddr;
use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::transport::{DeviceStatus, DeviceType, InterruptStatus, Transport};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// `virtio_pci_cap.cfg_type` values (§4.1.4).
const CAP_COMMON: u8 = 1;
const CAP_NOTIFY: u8 = 2;
/// Offsets in `virtio_pci_cap`: the BAR, the structure's offset and length
/// in it; `virtio_pci_notify_cap` adds the notify offset multiplier.
const CAP_BAR: u8 = 4;
const CAP_OFFSET: u8 = 8;
const CAP_LENGTH: u8 = 12;
const CAP_NOTIFY_MULTIPLIER: u8 = 16;
/// Offsets in the common configuration structure (§4.1.4.3), 16-bit fields.
const MSIX_CONFIG: u32 = 0x10;
const QUEUE_SELECT: u32 = 0x16;
const QUEUE_MSIX_VECTOR: u32 = 0x1a;
const QUEUE_NOTIFY_OFF: u32 = 0x1e;
/// The part of the common structure this module touches.
const COMMON_LEN: u64 = 0x20;
/// "No vector" in `msix_config` and `queue_msix_vector`.
const NO_VECTOR: u16 = 0xffff;
/// virtio-net's queues this transport caches a notify address for.
const QUEUES: usize = 2;

/// Where a virtio structure lies: BAR, offset, length.
struct Region {
    bar: u8,
    offset: u32,
    length: u32,
}

/// The MSI-X table entries virtio-net's causes are given.
#[derive(Clone, Copy, Debug)]
pub struct Vectors {
    /// Table entry for the receive queue.
    pub rx: u16,
    /// Table entry for configuration changes (the link status).
    pub config: u16,
    /// The CPU vector `config`'s entry raises, whose count says a change came.
    pub config_cpu: u8,
}

pub struct VirtioPci {
    inner: PciTransport,
    common: Mmio,
    notify: Mmio,
    notify_multiplier: u32,
    /// Each queue's notify offset in `notify`, once known.
    notify_at: [Option<u32>; QUEUES],
    /// With MSI-X: the configuration vector and its count at the last look.
    msix: Option<(u8, u64)>,
}

impl VirtioPci {
    /// Wraps `inner`, the transport of `f`; `None` (and `inner` dropped,
    /// which resets the device) when `f`'s common or notify structure is
    /// not where a mapped memory BAR holds it.
    pub fn new(inner: PciTransport, f: &kbase::pci::Function) -> Option<VirtioPci> {
        let region = |cfg_type: u8| {
            let cap = f.capabilities.iter().find_map(|c| match *c {
                kbase::pci::Capability::Vendor { offset, cfg_type: t } if t == cfg_type => Some(offset),
                _ => None,
            })?;
            let read = |at: u8| Some(crate::pci::CONFIG.read32(f.bdf, cap.checked_add(at)?));
            Some((Region { bar: read(CAP_BAR)? as u8, offset: read(CAP_OFFSET)?, length: read(CAP_LENGTH)? }, cap))
        };
        let (common, _) = region(CAP_COMMON)?;
        let (notify, notify_cap) = region(CAP_NOTIFY)?;
        let notify_multiplier = crate::pci::CONFIG.read32(f.bdf, notify_cap.checked_add(CAP_NOTIFY_MULTIPLIER)?);
        if u64::from(common.length) < COMMON_LEN {
            return None;
        }
        Some(VirtioPci {
            inner,
            common: super::hal::bar_window(f, common.bar, common.offset, COMMON_LEN)?,
            notify: super::hal::bar_window(f, notify.bar, notify.offset, u64::from(notify.length))?,
            notify_multiplier,
            notify_at: [None; QUEUES],
            msix: None,
        })
    }

    /// Routes the receive queue and configuration changes to MSI-X table
    /// entries (the function's MSI-X already enabled) and the transmit queue
    /// to none. `Err` when the device refused a vector (§4.1.5.1.2: it
    /// answers NO_VECTOR), with every vector taken back.
    pub fn use_msix(&mut self, v: Vectors, rx_queue: u16, tx_queue: u16) -> Result<(), ()> {
        self.common.write16(MSIX_CONFIG, v.config);
        let config_ok = self.common.read16(MSIX_CONFIG) == v.config;
        let rx_ok = self.set_queue_vector(rx_queue, v.rx) == v.rx;
        self.set_queue_vector(tx_queue, NO_VECTOR);
        if !(config_ok && rx_ok) {
            self.no_msix(rx_queue);
            return Err(());
        }
        self.msix = Some((v.config_cpu, crate::arch::msi::count(v.config_cpu)));
        Ok(())
    }

    /// Takes every vector back: the device interrupts by INTx again once
    /// the function's MSI-X is off.
    fn no_msix(&mut self, rx_queue: u16) {
        self.common.write16(MSIX_CONFIG, NO_VECTOR);
        self.set_queue_vector(rx_queue, NO_VECTOR);
        self.msix = None;
    }

    /// Sets `queue`'s vector; what the device kept.
    fn set_queue_vector(&mut self, queue: u16, entry: u16) -> u16 {
        self.common.write16(QUEUE_SELECT, queue);
        self.common.write16(QUEUE_MSIX_VECTOR, entry);
        self.common.read16(QUEUE_MSIX_VECTOR)
    }
}

impl Transport for VirtioPci {
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
        let Some(slot) = self.notify_at.get_mut(usize::from(queue)) else {
            return self.inner.notify(queue);
        };
        let at = *slot.get_or_insert_with(|| {
            self.common.write16(QUEUE_SELECT, queue);
            u32::from(self.common.read16(QUEUE_NOTIFY_OFF)).wrapping_mul(self.notify_multiplier)
        });
        // Outside the window `write16` writes nothing; the device would
        // then find the buffers on its next look.
        self.notify.write16(at, queue);
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

    fn queue_set(
        &mut self,
        queue: u16,
        size: u32,
        descriptors: PhysAddr,
        driver_area: PhysAddr,
        device_area: PhysAddr,
    ) {
        self.inner.queue_set(queue, size, descriptors, driver_area, device_area)
    }

    fn queue_unset(&mut self, queue: u16) {
        self.inner.queue_unset(queue)
    }

    fn queue_used(&mut self, queue: u16) -> bool {
        self.inner.queue_used(queue)
    }

    /// With MSI-X, nothing to acknowledge at the device: a configuration
    /// change is one that raised its vector since the last look. With INTx,
    /// the ISR read that lowers the line.
    fn ack_interrupt(&mut self) -> InterruptStatus {
        match &mut self.msix {
            Some((vector, seen)) => {
                let now = crate::arch::msi::count(*vector);
                let changed = core::mem::replace(seen, now) != now;
                if changed { InterruptStatus::DEVICE_CONFIGURATION_INTERRUPT } else { InterruptStatus::empty() }
            }
            None => self.inner.ack_interrupt(),
        }
    }

    fn read_config_generation(&self) -> u32 {
        self.inner.read_config_generation()
    }

    fn read_config_space<T: FromBytes + IntoBytes>(&self, offset: usize) -> virtio_drivers::Result<T> {
        self.inner.read_config_space(offset)
    }

    fn write_config_space<T: IntoBytes + Immutable>(&mut self, offset: usize, value: T) -> virtio_drivers::Result<()> {
        self.inner.write_config_space(offset, value)
    }
}
