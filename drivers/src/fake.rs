//! A fake virtio device for host tests: a HAL whose DMA memory is heap memory
//! at its own address, a transport that records what the driver set up, and
//! the device's side of the split rings, driven step by step by the test (or
//! told to lie).

extern crate std;

use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::alloc::{Layout, alloc_zeroed, dealloc};
use virtio_drivers::transport::{DeviceStatus, DeviceType, InterruptStatus, Transport};
use virtio_drivers::{BufferDirection, Hal, PAGE_SIZE, PhysAddr};
use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::virtqueue::need_event;

/// DMA memory from the heap; the "physical" address is the virtual one.
pub struct FakeHal;

fn page_layout(pages: usize) -> Layout {
    Layout::from_size_align(pages * PAGE_SIZE, PAGE_SIZE).expect("test DMA layout")
}

// SAFETY: `dma_alloc` returns fresh zeroed, page-aligned heap memory that
// nothing else aliases until `dma_dealloc` frees it; the device (the test)
// reaches memory by the address, which is the pointer itself.
unsafe impl Hal for FakeHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        // SAFETY: the layout has a non-zero size (callers ask for pages > 0).
        let ptr = NonNull::new(unsafe { alloc_zeroed(page_layout(pages)) }).expect("test DMA allocation");
        (ptr.as_ptr() as PhysAddr, ptr)
    }

    unsafe fn dma_dealloc(_paddr: PhysAddr, vaddr: NonNull<u8>, pages: usize) -> i32 {
        // SAFETY: the caller passes what `dma_alloc` returned, with its pages.
        unsafe { dealloc(vaddr.as_ptr(), page_layout(pages)) };
        0
    }

    unsafe fn mmio_phys_to_virt(_paddr: PhysAddr, _size: usize) -> NonNull<u8> {
        NonNull::dangling()
    }

    unsafe fn share(buffer: NonNull<[u8]>, _direction: BufferDirection) -> PhysAddr {
        buffer.as_ptr().cast::<u8>() as PhysAddr
    }

    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _direction: BufferDirection) {}
}

/// One queue as the driver set it up.
#[derive(Clone, Copy, Debug)]
pub struct QueueAddrs {
    pub size: u16,
    pub desc: PhysAddr,
    pub avail: PhysAddr,
    pub used: PhysAddr,
}

/// What the device model holds; shared by the transport and the test.
#[derive(Default)]
pub struct State {
    pub device_features: u64,
    pub driver_features: u64,
    pub status: DeviceStatus,
    pub max_queue_size: u32,
    pub config: Vec<u8>,
    pub queues: [Option<QueueAddrs>; 2],
    /// Doorbells rung, per queue.
    pub notified: [u32; 2],
    pub isr: InterruptStatus,
    /// Clear FEATURES_OK when the driver sets it: the features are refused.
    pub refuse_features: bool,
}

/// The transport the driver owns; the test keeps a clone of `state`.
pub struct FakeTransport {
    pub state: Rc<RefCell<State>>,
}

impl Transport for FakeTransport {
    fn device_type(&self) -> DeviceType {
        DeviceType::Network
    }

    fn read_device_features(&mut self) -> u64 {
        self.state.borrow().device_features
    }

    fn write_driver_features(&mut self, driver_features: u64) {
        self.state.borrow_mut().driver_features = driver_features;
    }

    fn max_queue_size(&mut self, _queue: u16) -> u32 {
        self.state.borrow().max_queue_size
    }

    fn notify(&mut self, queue: u16) {
        if let Some(n) = self.state.borrow_mut().notified.get_mut(usize::from(queue)) {
            *n += 1;
        }
    }

    fn get_status(&self) -> DeviceStatus {
        self.state.borrow().status
    }

    fn set_status(&mut self, mut status: DeviceStatus) {
        let mut state = self.state.borrow_mut();
        if state.refuse_features {
            status.remove(DeviceStatus::FEATURES_OK);
        }
        state.status = status;
    }

    fn set_guest_page_size(&mut self, _guest_page_size: u32) {}

    fn requires_legacy_layout(&self) -> bool {
        false
    }

    fn queue_set(&mut self, queue: u16, size: u32, desc: PhysAddr, avail: PhysAddr, used: PhysAddr) {
        let size = u16::try_from(size).expect("queue size");
        self.state.borrow_mut().queues[usize::from(queue)] = Some(QueueAddrs { size, desc, avail, used });
    }

    fn queue_unset(&mut self, queue: u16) {
        self.state.borrow_mut().queues[usize::from(queue)] = None;
    }

    fn queue_used(&mut self, queue: u16) -> bool {
        self.state.borrow().queues.get(usize::from(queue)).is_some_and(Option::is_some)
    }

    fn ack_interrupt(&mut self) -> InterruptStatus {
        core::mem::take(&mut self.state.borrow_mut().isr)
    }

    fn read_config_generation(&self) -> u32 {
        0
    }

    fn read_config_space<V: FromBytes + IntoBytes>(&self, offset: usize) -> virtio_drivers::Result<V> {
        let state = self.state.borrow();
        let bytes =
            state.config.get(offset..offset + size_of::<V>()).ok_or(virtio_drivers::Error::ConfigSpaceTooSmall)?;
        V::read_from_bytes(bytes).map_err(|_| virtio_drivers::Error::IoError)
    }

    fn write_config_space<V: IntoBytes + Immutable>(&mut self, offset: usize, value: V) -> virtio_drivers::Result<()> {
        let mut state = self.state.borrow_mut();
        let bytes =
            state.config.get_mut(offset..offset + size_of::<V>()).ok_or(virtio_drivers::Error::ConfigSpaceTooSmall)?;
        bytes.copy_from_slice(value.as_bytes());
        Ok(())
    }
}

/// The atomic of type `A` at device address `addr`.
///
/// # Safety
///
/// `addr` must lie inside memory `FakeHal` handed out (or a buffer it shared)
/// that is still alive, aligned for `A`; the driver touches it only through
/// atomics too.
unsafe fn at<'a, A>(addr: PhysAddr) -> &'a A {
    // SAFETY: the caller's obligations.
    unsafe { &*(addr as usize as *const A) }
}

/// A descriptor as the device reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desc {
    pub id: u16,
    pub addr: PhysAddr,
    pub len: u32,
    pub flags: u16,
}

/// The device's side of one queue.
pub struct DeviceQueue {
    pub q: QueueAddrs,
    /// Available entries taken so far (the device's `last_avail_idx`).
    pub last_avail: u16,
    /// Used entries published so far.
    pub used_idx: u16,
    /// Used-buffer interrupts the device would have raised.
    pub interrupts: u32,
}

impl DeviceQueue {
    pub fn new(q: QueueAddrs) -> Self {
        Self { q, last_avail: 0, used_idx: 0, interrupts: 0 }
    }

    fn slot(&self, idx: u16) -> u64 {
        u64::from(idx & (self.q.size - 1))
    }

    // SAFETY (all the accessors below): the addresses are inside the rings
    // the driver's `VirtQueue` allocated from `FakeHal` and still owns while
    // the test runs, at the offsets §2.7 gives, all naturally aligned.

    pub fn avail_idx(&self) -> u16 {
        // SAFETY: see above.
        unsafe { at::<AtomicU16>(self.q.avail + 2) }.load(Ordering::Acquire)
    }

    pub fn avail_flags(&self) -> u16 {
        // SAFETY: see above.
        unsafe { at::<AtomicU16>(self.q.avail) }.load(Ordering::Acquire)
    }

    pub fn used_event(&self) -> u16 {
        // SAFETY: see above.
        unsafe { at::<AtomicU16>(self.q.avail + 4 + 2 * u64::from(self.q.size)) }.load(Ordering::Acquire)
    }

    pub fn set_avail_event(&self, v: u16) {
        // SAFETY: see above.
        unsafe { at::<AtomicU16>(self.q.used + 4 + 8 * u64::from(self.q.size)) }.store(v, Ordering::Release);
    }

    /// Sets `used.flags` (without EVENT_IDX: 1 = no doorbells needed).
    pub fn set_used_flags(&self, v: u16) {
        // SAFETY: see above.
        unsafe { at::<AtomicU16>(self.q.used) }.store(v, Ordering::Release);
    }

    /// Takes the next available buffer, if any.
    pub fn take(&mut self) -> Option<Desc> {
        if self.avail_idx() == self.last_avail {
            return None;
        }
        let ring = self.q.avail + 4 + 2 * self.slot(self.last_avail);
        // SAFETY: see above.
        let id = unsafe { at::<AtomicU16>(ring) }.load(Ordering::Relaxed);
        assert!(id < self.q.size, "driver put descriptor {id} in the ring");
        let d = self.q.desc + 16 * u64::from(id);
        // SAFETY: see above.
        let desc = unsafe {
            Desc {
                id,
                addr: at::<AtomicU64>(d).load(Ordering::Relaxed),
                len: at::<AtomicU32>(d + 8).load(Ordering::Relaxed),
                flags: at::<AtomicU16>(d + 12).load(Ordering::Relaxed),
            }
        };
        self.last_avail = self.last_avail.wrapping_add(1);
        Some(desc)
    }

    /// Publishes a used entry (any id and length: a test may lie) and counts
    /// the interrupt the device would raise (§2.7.7).
    pub fn complete(&mut self, id: u32, len: u32, event_idx: bool) {
        let e = self.q.used + 4 + 8 * self.slot(self.used_idx);
        // SAFETY: see above.
        unsafe {
            at::<AtomicU32>(e).store(id, Ordering::Relaxed);
            at::<AtomicU32>(e + 4).store(len, Ordering::Relaxed);
        }
        let old = self.used_idx;
        self.used_idx = self.used_idx.wrapping_add(1);
        self.publish_used(self.used_idx);
        let wants =
            if event_idx { need_event(self.used_event(), self.used_idx, old) } else { self.avail_flags() & 1 == 0 };
        if wants {
            self.interrupts += 1;
        }
    }

    /// Writes `used.idx` as is (a lying device may jump it).
    pub fn publish_used(&self, idx: u16) {
        // SAFETY: see above.
        unsafe { at::<AtomicU16>(self.q.used + 2) }.store(idx, Ordering::Release);
    }

    /// Copies `bytes` into a device-writable buffer.
    pub fn write(&self, d: &Desc, bytes: &[u8]) {
        assert!(d.flags & 2 != 0 && bytes.len() <= d.len as usize, "write into {d:?}");
        for (i, &b) in bytes.iter().enumerate() {
            // SAFETY: inside the buffer the descriptor names (checked above),
            // which the driver's queue holds until it is used; the driver
            // does not touch it meanwhile.
            unsafe { core::ptr::write_volatile((d.addr as usize + i) as *mut u8, b) };
        }
    }

    /// The bytes of a device-readable buffer.
    pub fn read(&self, d: &Desc) -> Vec<u8> {
        let mut v = vec![0u8; d.len as usize];
        for (i, b) in v.iter_mut().enumerate() {
            // SAFETY: as in `write`.
            *b = unsafe { core::ptr::read_volatile((d.addr as usize + i) as *const u8) };
        }
        v
    }
}

/// A fake 82574 for the e1000e driver's tests: a register file with the
/// device's side effects (reset, read-to-clear causes and counters, NVM
/// reads) and the device's half of the rings, stepped by the test.
pub mod e1000e {
    use super::at;
    use crate::csum;
    use crate::e1000e::desc::{
        RX_ERR_IPE, RX_ERR_TCPE, TX_DEXT, TX_DTYP_DATA, TX_POPTS_IXSM, TX_POPTS_TXSM, TX_TUCMD_IP, TX_TUCMD_TCP,
    };
    use crate::e1000e::regs::{self, Regs};
    use crate::intel::desc::{RX_IPCS, RX_TCPCS, RX_UDPCS};
    use alloc::collections::BTreeMap;
    use alloc::rc::Rc;
    use alloc::vec::Vec;
    use core::cell::RefCell;
    use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

    /// Registers that clear when read.
    const READ_TO_CLEAR: [u32; 12] = [
        regs::ICR,
        regs::CRCERRS,
        regs::MPC,
        regs::GPRC,
        regs::GPTC,
        regs::GORCL,
        regs::GORCH,
        regs::GOTCL,
        regs::GOTCH,
        regs::RNBC,
        regs::TPR,
        regs::TPT,
    ];

    /// The device model; the test keeps a clone of the `Rc`.
    #[derive(Default)]
    pub struct Device {
        pub regs: BTreeMap<u32, u32>,
        /// What a reset loads into RAL0/RAH0 (`None`: leave them invalid,
        /// so the driver must read the NVM).
        pub ral_mac: Option<[u8; 6]>,
        /// NVM words (the MAC in 0..=2).
        pub nvm: Vec<u16>,
        pub link: bool,
        /// CTRL.RST never clears.
        pub reset_stuck: bool,
        pub resets: u32,
        /// Writes per register, to count doorbells.
        pub writes: BTreeMap<u32, u32>,
        /// MSI-X enabled in configuration space (the kernel's side, set by
        /// the test): receive write-backs raise RXQ0 instead of RXT0, other
        /// causes add OTHER, and each enabled cause sends its IVAR entry's
        /// message.
        pub msix: bool,
        /// The MSI-X table entries messages were sent to, in order.
        pub messages: Vec<u8>,
        /// The TCP/IP context the last context descriptor set (§7.2):
        /// IPCSS, IPCSO, IPCSE, TUCSS, TUCSO, TUCMD.
        pub context: Option<[u32; 6]>,
        /// Context descriptors seen, and frames sent from several buffers.
        pub contexts: u32,
        pub chained: u32,
    }

    impl Device {
        pub fn new(mac: [u8; 6]) -> Rc<RefCell<Device>> {
            Rc::new(RefCell::new(Device { ral_mac: Some(mac), link: true, ..Device::default() }))
        }

        pub fn reg(&self, r: u32) -> u32 {
            self.regs.get(&r).copied().unwrap_or(0)
        }

        fn set(&mut self, r: u32, v: u32) {
            self.regs.insert(r, v);
        }

        pub fn writes(&self, r: u32) -> u32 {
            self.writes.get(&r).copied().unwrap_or(0)
        }

        /// Power-on state: everything zero but the link and the address.
        fn reset(&mut self) {
            self.resets += 1;
            self.regs.clear();
            self.set(regs::STATUS, if self.link { regs::STATUS_LU } else { 0 });
            if let Some(m) = self.ral_mac {
                self.set(regs::RAL0, u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
                self.set(regs::RAH0, u32::from(u16::from_le_bytes([m[4], m[5]])) | regs::RAH_AV);
            }
            if self.reset_stuck {
                self.set(regs::CTRL, regs::CTRL_RST);
            }
        }

        /// The link goes up or down: STATUS.LU and an LSC cause.
        pub fn set_link(&mut self, up: bool) {
            self.link = up;
            let status = self.reg(regs::STATUS) & !regs::STATUS_LU;
            self.set(regs::STATUS, status | if up { regs::STATUS_LU } else { 0 });
            self.cause(regs::INT_LSC);
        }

        fn cause(&mut self, mut bits: u32) {
            if self.msix {
                if bits & regs::INT_RXT0 != 0 {
                    bits = bits & !regs::INT_RXT0 | regs::INT_RXQ0;
                }
                if bits & !(regs::INT_RXQ0 | regs::INT_TXQ0) != 0 {
                    bits |= regs::INT_OTHER;
                }
                let (ivar, ims) = (self.reg(regs::IVAR), self.reg(regs::IMS));
                for (cause, shift) in [
                    (regs::INT_RXQ0, regs::IVAR_RXQ0_SHIFT),
                    (regs::INT_TXQ0, regs::IVAR_TXQ0_SHIFT),
                    (regs::INT_OTHER, regs::IVAR_OTHER_SHIFT),
                ] {
                    let alloc = ivar >> shift;
                    if bits & ims & cause != 0 && alloc & regs::IVAR_VALID != 0 {
                        self.messages.push((alloc & 7) as u8);
                    }
                }
            }
            let icr = self.reg(regs::ICR);
            self.set(regs::ICR, icr | bits);
        }

        /// Adds to a statistics register.
        pub fn count(&mut self, r: u32, n: u32) {
            let v = self.reg(r).wrapping_add(n);
            self.set(r, v);
        }

        fn ring(&self, bal: u32, bah: u32, len: u32) -> (u64, u32) {
            (u64::from(self.reg(bal)) | u64::from(self.reg(bah)) << 32, self.reg(len) / 16)
        }

        /// Receive descriptors the driver gave and the device has not used.
        pub fn rx_available(&self) -> u32 {
            let (_, size) = self.ring(regs::RXQ.bal(), regs::RXQ.bah(), regs::RXQ.dlen());
            let (h, t) = (self.reg(regs::RXQ.head()), self.reg(regs::RXQ.tail()));
            if size == 0 { 0 } else { (t + size - h) % size }
        }

        /// The device receives `frame`: written into the next buffer with
        /// DD|EOP, or counted missed (MPC, RXO) when there is none.
        pub fn deliver(&mut self, frame: &[u8]) -> bool {
            let (status, errors) = self.rx_checksums(frame);
            self.deliver_raw(frame, frame.len() as u16, 0b11 | status, errors)
        }

        /// The checksum status and error bits RXCSUM asks for (§7.1):
        /// IPCS (and IPE) for an IPv4 frame, TCPCS (UDPCS for UDP, and
        /// TCPE) for TCP or UDP over IPv4 (a UDP checksum of zero counts as
        /// checked and right, as QEMU's model has it).
        fn rx_checksums(&self, frame: &[u8]) -> (u8, u8) {
            let rxcsum = self.reg(regs::RXCSUM);
            let mut word = 0;
            if rxcsum & regs::RXCSUM_IPOFLD != 0
                && let Some(ok) = csum::ipv4_header_ok(frame)
            {
                word |= RX_IPCS | if ok { 0 } else { RX_ERR_IPE };
            }
            if rxcsum & regs::RXCSUM_TUOFLD != 0
                && let Some(ok) = csum::l4_ok(frame)
            {
                let udp = frame.get(23) == Some(&csum::PROTO_UDP);
                word |= RX_TCPCS | if udp { RX_UDPCS } else { 0 } | if ok { 0 } else { RX_ERR_TCPE };
            }
            (word as u8, (word >> 8) as u8)
        }

        /// As `deliver` with the written length, status and errors given
        /// (a test may lie).
        pub fn deliver_raw(&mut self, bytes: &[u8], len: u16, status: u8, errors: u8) -> bool {
            let (base, size) = self.ring(regs::RXQ.bal(), regs::RXQ.bah(), regs::RXQ.dlen());
            if self.reg(regs::RCTL) & regs::RCTL_EN == 0 || self.rx_available() == 0 {
                self.count(regs::MPC, 1);
                self.cause(regs::INT_RXO);
                return false;
            }
            let head = self.reg(regs::RXQ.head());
            let d = base + 16 * u64::from(head);
            // SAFETY: the ring and the buffers it names are the driver's
            // FakeHal memory, alive while the driver is; the descriptor
            // between head and tail is the device's to write.
            unsafe {
                let addr = at::<AtomicU64>(d).load(Ordering::Acquire);
                for (i, &b) in bytes.iter().enumerate() {
                    core::ptr::write_volatile((addr as usize + i) as *mut u8, b);
                }
                at::<AtomicU16>(d + 8).store(len, Ordering::Relaxed);
                at::<AtomicU16>(d + 12).store(u16::from_le_bytes([status, errors]), Ordering::Release);
            }
            self.set(regs::RXQ.head(), (head + 1) % size);
            self.count(regs::GPRC, 1);
            self.cause(regs::INT_RXT0);
            true
        }

        /// The receive buffer size RCTL names.
        pub fn rx_buffer_size(&self) -> usize {
            let rctl = self.reg(regs::RCTL);
            let bsize = (rctl >> regs::RCTL_BSIZE_SHIFT) & 3;
            match (rctl & regs::RCTL_BSEX != 0, bsize) {
                (false, b) => 2048 >> b,
                (true, 1) => 16384,
                (true, 2) => 8192,
                (true, 3) => 4096,
                (true, _) => 0,
            }
        }

        /// The device sends every frame between TDH and TDT, writing DD
        /// back; the frames.
        pub fn send_all(&mut self) -> Vec<Vec<u8>> {
            self.send_up_to(usize::MAX)
        }

        /// Sends up to `max` frames from TDH: context descriptors are
        /// taken in, data descriptors (legacy or extended) gathered until
        /// EOP, the checksums POPTS asks for computed as the device does
        /// (from the context's offsets, the L4 sum from TUCSS to the end),
        /// DD written back where RS asks.
        pub fn send_up_to(&mut self, max: usize) -> Vec<Vec<u8>> {
            let (base, size) = self.ring(regs::TXQ.bal(), regs::TXQ.bah(), regs::TXQ.dlen());
            let mut sent = Vec::new();
            if self.reg(regs::TCTL) & regs::TCTL_EN == 0 {
                return sent;
            }
            let mut frame = Vec::new();
            let (mut parts, mut popts) = (0, 0u8);
            while self.reg(regs::TXQ.head()) != self.reg(regs::TXQ.tail()) && sent.len() < max {
                let head = self.reg(regs::TXQ.head());
                let d = base + 16 * u64::from(head);
                // SAFETY: as in `deliver_raw`, for the transmit ring.
                let (lo, hi, len_cmd) = unsafe {
                    (
                        at::<AtomicU32>(d).load(Ordering::Acquire),
                        at::<AtomicU32>(d + 4).load(Ordering::Relaxed),
                        at::<AtomicU32>(d + 8).load(Ordering::Relaxed),
                    )
                };
                let cmd = (len_cmd >> 24) as u8;
                let ext = len_cmd & TX_DEXT != 0;
                self.set(regs::TXQ.head(), (head + 1) % size);
                if ext && len_cmd & (0xf << 20) == 0 {
                    assert_eq!(len_cmd & TX_TUCMD_IP, TX_TUCMD_IP, "an IPv4 context");
                    let tcp = u32::from(len_cmd & TX_TUCMD_TCP != 0);
                    self.context = Some([lo & 0xff, lo >> 8 & 0xff, lo >> 16, hi & 0xff, hi >> 8 & 0xff, tcp]);
                    self.contexts += 1;
                    continue;
                }
                assert!(!ext || len_cmd & (0xf << 20) == TX_DTYP_DATA, "an extended data descriptor");
                assert_ne!(cmd & 0b10, 0, "IFCS on every data descriptor");
                let len = (len_cmd & if ext { 0xf_ffff } else { 0xffff }) as usize;
                let addr = u64::from(lo) | u64::from(hi) << 32;
                // SAFETY: the buffer the descriptor names, the driver's
                // until the descriptor is done.
                frame.extend((0..len).map(|i| unsafe { core::ptr::read_volatile((addr as usize + i) as *const u8) }));
                if parts == 0 && ext {
                    // SAFETY: as above.
                    popts = unsafe { at::<AtomicU32>(d + 12).load(Ordering::Relaxed) >> 8 } as u8;
                }
                parts += 1;
                if cmd & 0b1000 != 0 {
                    // SAFETY: as above; DD into STA, the rest as written.
                    unsafe { at::<AtomicU32>(d + 12).fetch_or(1, Ordering::Release) };
                }
                if cmd & 0b1 == 0 {
                    continue;
                }
                assert_ne!(cmd & 0b1000, 0, "RS on the last descriptor of a frame");
                self.insert_checksums(&mut frame, popts);
                self.chained += u32::from(parts > 1);
                sent.push(core::mem::take(&mut frame));
                (parts, popts) = (0, 0);
                self.count(regs::GPTC, 1);
            }
            assert!(frame.is_empty(), "the tail stops inside a frame");
            sent
        }

        /// Writes DD into the transmit descriptor `i` slots past the head, as
        /// a device that lies (or runs ahead) would.
        pub fn mark_tx_done_ahead(&mut self, i: u32) {
            let (base, size) = self.ring(regs::TXQ.bal(), regs::TXQ.bah(), regs::TXQ.dlen());
            let d = base + 16 * u64::from((self.reg(regs::TXQ.head()) + i) % size.max(1));
            // SAFETY: as in `deliver_raw`; the slot is inside the ring.
            unsafe { at::<AtomicU32>(d + 12).fetch_or(1, Ordering::Release) };
        }

        fn insert_checksums(&self, frame: &mut [u8], popts: u8) {
            if popts == 0 {
                return;
            }
            let [ipcss, ipcso, ipcse, tucss, tucso, tcp] =
                self.context.map(|c| c.map(|v| v as usize)).expect("a context before checksum offload");
            if popts & TX_POPTS_IXSM != 0 {
                let sum = !csum::add(0, &frame[ipcss..=ipcse]);
                frame[ipcso..ipcso + 2].copy_from_slice(&sum.to_be_bytes());
            }
            if popts & TX_POPTS_TXSM != 0 {
                let sum = csum::finish_l4(!csum::add(0, &frame[tucss..]), tcp == 1);
                frame[tucso..tucso + 2].copy_from_slice(&sum.to_be_bytes());
            }
        }
    }

    /// The driver's handle on the device.
    pub struct FakeRegs(pub Rc<RefCell<Device>>);

    impl Regs for FakeRegs {
        fn read(&self, offset: u32) -> u32 {
            let mut d = self.0.borrow_mut();
            // In MSI-X mode ICR keeps its causes until written back.
            if offset == regs::ICR && d.msix {
                return d.reg(offset);
            }
            if READ_TO_CLEAR.contains(&offset) {
                return d.regs.remove(&offset).unwrap_or(0);
            }
            d.reg(offset)
        }

        fn write(&mut self, offset: u32, value: u32) {
            let mut d = self.0.borrow_mut();
            *d.writes.entry(offset).or_default() += 1;
            match offset {
                regs::CTRL if value & regs::CTRL_RST != 0 => d.reset(),
                regs::ICR => {
                    let icr = d.reg(regs::ICR) & !value;
                    d.set(regs::ICR, icr);
                }
                regs::ICS => d.cause(value),
                regs::IMS => {
                    let ims = d.reg(regs::IMS) | value;
                    d.set(regs::IMS, ims);
                }
                regs::IMC => {
                    let ims = d.reg(regs::IMS) & !value;
                    d.set(regs::IMS, ims);
                }
                regs::EERD if value & regs::EERD_START != 0 => {
                    let word = (value >> regs::EERD_ADDR_SHIFT) as usize & 0x3fff;
                    let data = d.nvm.get(word).copied();
                    match data {
                        Some(w) => d.set(regs::EERD, u32::from(w) << regs::EERD_DATA_SHIFT | regs::EERD_DONE),
                        // No such word: never done.
                        None => d.set(regs::EERD, 0),
                    }
                }
                _ => d.set(offset, value),
            }
        }
    }
}
