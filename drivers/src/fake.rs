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

/// `bytes` as memory outside a driver that a fake device reads a frame's
/// middle from (zero-copy transmit): its address is its bus address here.
/// The test keeps `bytes` alive and unchanged until the device has read it.
pub fn segment(bytes: &[u8]) -> crate::nic::TxSegment {
    // SAFETY: host memory the test owns, readable for as long as the test's
    // fake device may read it (the test's duty, above); the fake devices read
    // a bus address as a pointer.
    unsafe { crate::nic::TxSegment::new(bytes.as_ptr() as u64, bytes.len()) }
}

/// The atomic of type `A` at device address `addr`.
///
/// # Safety
///
/// `addr` must lie inside memory `FakeHal` handed out (or a buffer it shared)
/// that is still alive, aligned for `A`; the driver touches it only through
/// atomics too.
pub(crate) unsafe fn at<'a, A>(addr: PhysAddr) -> &'a A {
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
    pub next: u16,
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

    /// Takes the next available buffer, if any (the head of its chain).
    pub fn take(&mut self) -> Option<Desc> {
        if self.avail_idx() == self.last_avail {
            return None;
        }
        let ring = self.q.avail + 4 + 2 * self.slot(self.last_avail);
        // SAFETY: see above.
        let id = unsafe { at::<AtomicU16>(ring) }.load(Ordering::Relaxed);
        self.last_avail = self.last_avail.wrapping_add(1);
        Some(self.desc(id))
    }

    /// Takes the next available chain: its descriptors in order, following
    /// VIRTQ_DESC_F_NEXT (§2.7.5), no longer than the queue.
    pub fn take_chain(&mut self) -> Option<Vec<Desc>> {
        let mut chain = vec![self.take()?];
        while let Some(last) = chain.last().filter(|d| d.flags & 1 != 0) {
            assert!(chain.len() < usize::from(self.q.size), "a chain longer than the queue");
            let next = self.desc(last.next);
            chain.push(next);
        }
        Some(chain)
    }

    fn desc(&self, id: u16) -> Desc {
        assert!(id < self.q.size, "driver named descriptor {id}");
        let d = self.q.desc + 16 * u64::from(id);
        // SAFETY: see above.
        unsafe {
            Desc {
                id,
                addr: at::<AtomicU64>(d).load(Ordering::Relaxed),
                len: at::<AtomicU32>(d + 8).load(Ordering::Relaxed),
                flags: at::<AtomicU16>(d + 12).load(Ordering::Relaxed),
                next: at::<AtomicU16>(d + 14).load(Ordering::Relaxed),
            }
        }
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

    /// The bytes of a device-readable chain, in order.
    pub fn read_chain(&self, chain: &[Desc]) -> Vec<u8> {
        chain.iter().flat_map(|d| self.read(d)).collect()
    }

    /// The bytes of a device-readable buffer.
    pub fn read(&self, d: &Desc) -> Vec<u8> {
        assert!(d.flags & 2 == 0, "read of a device-writable buffer {d:?}");
        let mut v = vec![0u8; d.len as usize];
        for (i, b) in v.iter_mut().enumerate() {
            // SAFETY: as in `write`.
            *b = unsafe { core::ptr::read_volatile((d.addr as usize + i) as *const u8) };
        }
        v
    }
}
