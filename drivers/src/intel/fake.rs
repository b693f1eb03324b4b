//! A fake Intel NIC for host tests: a register file with the family's side
//! effects (reset, read-to-clear causes and counters, NVM reads, ICR's
//! write-1-to-clear, the interrupt masks) and the device's half of the
//! rings (frames written back into posted buffers, chains gathered and
//! sent, the checksums a context asks for inserted, DD written back),
//! stepped by the test or told to lie. What one controller's device does
//! its own way ([`Model`]: its link and PHY, its interrupt routing and
//! MSI-X messages, its queue enables, its buffer sizes, its descriptor
//! layouts) is in its module's `fake.rs`; [`Rig`] is a driver brought up
//! on one, for the tests.

extern crate std;

use super::controller::Controller;
use super::driver::Driver;
use super::regs::{self, Queue, Regs};
use crate::csum;
use crate::fake::{FakeHal, at};
use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

/// The family's registers that clear when read.
const READ_TO_CLEAR: [u32; 13] = [
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
    regs::ROC,
    regs::TPR,
    regs::TPT,
];

/// The write-back's status bits every frame gets: descriptor done, end of
/// packet.
pub const DD_EOP: u32 = 0b11;

/// Where the device finds the checksums a context descriptor asks for:
/// the IPv4 header (its start, its checksum field, one past its end) and
/// the L4 header (its start, its checksum field, summed to the frame's
/// end), normalised from either controller's context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offsets {
    pub ip_start: usize,
    pub ip_csum: usize,
    pub ip_end: usize,
    pub l4_start: usize,
    pub l4_csum: usize,
    pub tcp: bool,
}

/// A transmit descriptor, as the model reads it.
pub enum TxDesc {
    /// A context: the offsets it sets.
    Context(Offsets),
    /// A data descriptor: its buffer, whether it ends the frame and asks
    /// for status, and (first of a frame) the checksums it asks to insert,
    /// IPv4 header and L4, and the frame's length where it says one.
    Data { addr: u64, len: usize, eop: bool, rs: bool, insert: (bool, bool), frame_len: Option<usize> },
}

/// A descriptor in one of the driver's rings, as the device reaches it.
pub struct Desc(u64);

// SAFETY (every accessor of `Desc` and `Buf`): a `Desc` is made only by
// `Device::desc`, for a slot inside a ring whose base and length the
// driver programmed, and a `Buf` only from an address the driver wrote
// into such a slot: memory `FakeHal` handed out (or a buffer it shared),
// alive while the driver is, which the driver touches only through
// atomics or not at all while the device owns it. Offsets are inside the
// 16-byte descriptor and naturally aligned.
impl Desc {
    pub fn load32(&self, off: u64) -> u32 {
        // SAFETY: see above.
        unsafe { at::<AtomicU32>(self.0 + off) }.load(Ordering::Acquire)
    }

    pub fn load64(&self, off: u64) -> u64 {
        // SAFETY: see above.
        unsafe { at::<AtomicU64>(self.0 + off) }.load(Ordering::Acquire)
    }

    pub fn store16(&self, off: u64, v: u16) {
        // SAFETY: see above.
        unsafe { at::<AtomicU16>(self.0 + off) }.store(v, Ordering::Release);
    }

    pub fn store32(&self, off: u64, v: u32) {
        // SAFETY: see above.
        unsafe { at::<AtomicU32>(self.0 + off) }.store(v, Ordering::Release);
    }

    pub fn store64(&self, off: u64, v: u64) {
        // SAFETY: see above.
        unsafe { at::<AtomicU64>(self.0 + off) }.store(v, Ordering::Release);
    }

    /// The four dwords, as the device reads a transmit descriptor.
    pub fn words(&self) -> [u32; 4] {
        [self.load32(0), self.load32(4), self.load32(8), self.load32(12)]
    }

    /// Sets DD (bit 0 of byte 12, on both controllers).
    pub fn set_dd(&self) {
        // SAFETY: see above.
        unsafe { at::<AtomicU32>(self.0 + 12) }.fetch_or(1, Ordering::Release);
    }
}

/// Copies `bytes` into the buffer at `addr`, of `room` bytes.
fn write_buf(addr: u64, room: usize, bytes: &[u8]) {
    for (i, &b) in bytes.iter().take(room).enumerate() {
        // SAFETY: see `Desc`; `i` is below the buffer's length.
        unsafe { core::ptr::write_volatile((addr as usize + i) as *mut u8, b) };
    }
}

/// The `len` bytes of the buffer at `addr`.
fn read_buf(addr: u64, len: usize) -> Vec<u8> {
    // SAFETY: see `Desc`; the driver gave `len` bytes there.
    (0..len).map(|i| unsafe { core::ptr::read_volatile((addr as usize + i) as *const u8) }).collect()
}

/// What one controller's device does its own way.
pub trait Model: Default + Sized {
    /// The controller its driver drives.
    type Ctl: Controller;
    /// Its registers, beyond the family's, that clear when read.
    const READ_TO_CLEAR: &'static [u32];
    /// Whether a device reset takes the link down until the PHY has
    /// negotiated again ([`Model::settle`]).
    const RESET_RENEGOTIATES: bool;

    /// Power-on state of its own, after the register file was cleared.
    fn reset(dev: &mut Device<Self>);
    /// The cable is pulled or plugged back.
    fn set_link(dev: &mut Device<Self>, up: bool);
    /// Finishes whatever bring-up left pending on the link (the 82576's
    /// negotiation); whether that raised a link change.
    fn settle(_dev: &mut Device<Self>) -> bool {
        false
    }
    /// Interrupt causes arise (and, with MSI-X, send their messages).
    fn cause(dev: &mut Device<Self>, bits: u32);
    /// IMS was written; `old` the causes that showed through it before.
    fn enabled(_dev: &mut Device<Self>, _old: u32) {}
    /// Whether reading ICR now leaves its causes (MSI-X mode).
    fn icr_held(dev: &Device<Self>) -> bool;
    /// A write to one of its own registers; false when the register is
    /// plain storage.
    fn write(dev: &mut Device<Self>, offset: u32, value: u32) -> bool;
    /// Whether its receiver and transmitter take descriptors.
    fn rx_on(dev: &Device<Self>) -> bool;
    fn tx_on(dev: &Device<Self>) -> bool;
    /// The receive buffer size the driver set.
    fn rx_buffer_size(dev: &Device<Self>) -> usize;
    /// The longest frame the receiver admits, if it checks.
    fn frame_limit(_dev: &Device<Self>) -> Option<usize> {
        None
    }
    /// Writes a receive descriptor back: the written length and the
    /// status word, as its format lays them out.
    fn write_back(d: &Desc, len: u16, status: u32);
    /// A frame was written back: the receive causes.
    fn received(dev: &mut Device<Self>);
    /// Reads a transmit descriptor (`first`: the first data descriptor of
    /// a frame), checking what the driver must have set.
    fn tx_desc(d: &Desc, first: bool) -> TxDesc;
    /// Frames were sent: the transmit causes.
    fn sent(_dev: &mut Device<Self>) {}
}

/// The device model; the test keeps a clone of the `Rc`.
#[derive(Default)]
pub struct Device<M: Model> {
    pub regs: BTreeMap<u32, u32>,
    /// What a reset loads into RAL0/RAH0 (`None`: leave them invalid, so
    /// the driver must read the NVM).
    pub ral_mac: Option<[u8; 6]>,
    /// NVM words (the MAC in 0..=2).
    pub nvm: Vec<u16>,
    /// CTRL.RST never clears.
    pub reset_stuck: bool,
    pub resets: u32,
    /// Writes per register, to count doorbells.
    pub writes: BTreeMap<u32, u32>,
    /// MSI-X enabled in configuration space (the kernel's side, set by the
    /// test): causes send the messages the model routes them to.
    pub msix: bool,
    /// The MSI-X table entries messages were sent to, in order.
    pub messages: Vec<u8>,
    /// The offsets the last context descriptor set.
    pub context: Option<Offsets>,
    /// Context descriptors seen, and frames sent from several buffers.
    pub contexts: u32,
    pub chained: u32,
    /// What the controller's device keeps of its own.
    pub model: M,
}

impl<M: Model> Device<M> {
    pub fn new(mac: [u8; 6]) -> Rc<RefCell<Device<M>>> {
        Rc::new(RefCell::new(Device { ral_mac: Some(mac), ..Device::default() }))
    }

    pub fn reg(&self, r: u32) -> u32 {
        self.regs.get(&r).copied().unwrap_or(0)
    }

    pub fn set(&mut self, r: u32, v: u32) {
        self.regs.insert(r, v);
    }

    pub fn writes(&self, r: u32) -> u32 {
        self.writes.get(&r).copied().unwrap_or(0)
    }

    /// Power-on state: everything zero but what the model sets and the
    /// address.
    fn reset(&mut self) {
        self.resets += 1;
        self.regs.clear();
        M::reset(self);
        if let Some(m) = self.ral_mac {
            self.set(regs::RAL0, u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
            self.set(regs::RAH0, u32::from(u16::from_le_bytes([m[4], m[5]])) | regs::RAH_AV);
        }
        if self.reset_stuck {
            self.set(regs::CTRL, regs::CTRL_RST);
        }
    }

    /// STATUS.LU as `up`.
    pub fn set_lu(&mut self, up: bool) {
        let status = self.reg(regs::STATUS) & !regs::STATUS_LU;
        self.set(regs::STATUS, status | if up { regs::STATUS_LU } else { 0 });
    }

    /// The cable is pulled or plugged back: STATUS.LU follows (once the
    /// link is up at all) with an LSC cause.
    pub fn set_link(&mut self, up: bool) {
        M::set_link(self, up);
    }

    /// ICR causes arise.
    pub fn cause(&mut self, bits: u32) {
        M::cause(self, bits);
    }

    /// Adds to a statistics register.
    pub fn count(&mut self, r: u32, n: u32) {
        let v = self.reg(r).wrapping_add(n);
        self.set(r, v);
    }

    /// A queue's ring: its base and its size in descriptors.
    fn ring(&self, q: Queue) -> (u64, u32) {
        (u64::from(self.reg(q.bal())) | u64::from(self.reg(q.bah())) << 32, self.reg(q.dlen()) / 16)
    }

    /// Descriptor `i` of queue `q`'s ring.
    fn desc(&self, q: Queue, i: u32) -> Desc {
        let (base, size) = self.ring(q);
        assert!(i < size, "descriptor {i} of a {size}-descriptor ring");
        Desc(base + 16 * u64::from(i))
    }

    /// Receive descriptors the driver gave and the device has not used.
    pub fn rx_available(&self) -> u32 {
        let q = M::Ctl::RXQ;
        let (_, size) = self.ring(q);
        let (h, t) = (self.reg(q.head()), self.reg(q.tail()));
        if size == 0 { 0 } else { (t + size - h) % size }
    }

    /// The receive buffer size the driver set.
    pub fn rx_buffer_size(&self) -> usize {
        M::rx_buffer_size(self)
    }

    /// The device receives `frame`: dropped (ROC) when longer than the
    /// receiver admits, spread over as many buffers as it needs, or missed
    /// (MPC, RXO) when there are not enough; the checksums RXCSUM asks for
    /// judged.
    pub fn deliver(&mut self, frame: &[u8]) -> bool {
        if M::frame_limit(self).is_some_and(|limit| frame.len() > limit) {
            self.count(regs::ROC, 1);
            return false;
        }
        let size = self.rx_buffer_size().max(1);
        let pieces: Vec<&[u8]> = frame.chunks(size).collect();
        if !M::rx_on(self) || (self.rx_available() as usize) < pieces.len() {
            self.count(regs::MPC, 1);
            self.cause(regs::INT_RXO);
            return false;
        }
        let csum = self.rx_checksums(frame);
        for (i, piece) in pieces.iter().enumerate() {
            let status = if i + 1 == pieces.len() { DD_EOP | csum } else { 1 };
            self.write_back(piece, piece.len() as u16, status);
        }
        self.count(regs::GPRC, 1);
        M::received(self);
        true
    }

    /// The checksum status and error bits RXCSUM asks for (§7.1 of each
    /// datasheet): IPCS (and IPE) for an IPv4 frame, TCPCS (UDPCS for UDP,
    /// and the L4 error) for TCP or UDP over IPv4 (a UDP checksum of zero
    /// counts as checked and right, as QEMU's models have it).
    fn rx_checksums(&self, frame: &[u8]) -> u32 {
        use super::desc::{Format, RX_IPCS, RX_TCPCS, RX_UDPCS};
        type F<C> = <C as Controller>::Format;
        let (ipe, l4e) = (<F<M::Ctl> as Format>::RX_ERR_IPE, <F<M::Ctl> as Format>::RX_ERR_L4E);
        let rxcsum = self.reg(regs::RXCSUM);
        let mut bits = 0;
        if rxcsum & regs::RXCSUM_IPOFLD != 0
            && let Some(ok) = csum::ipv4_header_ok(frame)
        {
            bits |= RX_IPCS | if ok { 0 } else { ipe };
        }
        if rxcsum & regs::RXCSUM_TUOFLD != 0
            && let Some(ok) = csum::l4_ok(frame)
        {
            let udp = frame.get(23) == Some(&csum::PROTO_UDP);
            bits |= RX_TCPCS | if udp { RX_UDPCS } else { 0 } | if ok { 0 } else { l4e };
        }
        bits
    }

    /// One descriptor written back with the length and status word given
    /// (a test may lie); false when none is available.
    pub fn deliver_raw(&mut self, bytes: &[u8], len: u16, status: u32) -> bool {
        if !M::rx_on(self) || self.rx_available() == 0 {
            return false;
        }
        self.write_back(bytes, len, status);
        M::received(self);
        true
    }

    fn write_back(&mut self, bytes: &[u8], len: u16, status: u32) {
        let q = M::Ctl::RXQ;
        let (_, size) = self.ring(q);
        let head = self.reg(q.head());
        let d = self.desc(q, head);
        let addr = d.load64(0);
        assert_ne!(addr, 0, "a posted descriptor names its buffer");
        write_buf(addr, self.rx_buffer_size(), bytes);
        M::write_back(&d, len, status);
        self.set(q.head(), (head + 1) % size);
    }

    /// The device sends every frame between TDH and TDT, writing DD back;
    /// the frames.
    pub fn send_all(&mut self) -> Vec<Vec<u8>> {
        self.send_up_to(usize::MAX)
    }

    /// Sends up to `max` frames from TDH: context descriptors are taken
    /// in, data descriptors gathered until EOP, the checksums the first
    /// asks for computed as the device does from the context, DD written
    /// back where RS asks.
    pub fn send_up_to(&mut self, max: usize) -> Vec<Vec<u8>> {
        let q = M::Ctl::TXQ;
        let (_, size) = self.ring(q);
        let mut sent = Vec::new();
        if !M::tx_on(self) {
            return sent;
        }
        let mut frame = Vec::new();
        let (mut parts, mut insert, mut frame_len) = (0, (false, false), None);
        while self.reg(q.head()) != self.reg(q.tail()) && sent.len() < max {
            let head = self.reg(q.head());
            let d = self.desc(q, head);
            self.set(q.head(), (head + 1) % size);
            let (addr, len, eop, rs, first_insert, first_len) = match M::tx_desc(&d, parts == 0) {
                TxDesc::Context(offsets) => {
                    self.context = Some(offsets);
                    self.contexts += 1;
                    continue;
                }
                TxDesc::Data { addr, len, eop, rs, insert, frame_len } => (addr, len, eop, rs, insert, frame_len),
            };
            frame.extend(read_buf(addr, len));
            if parts == 0 {
                (insert, frame_len) = (first_insert, first_len);
            }
            parts += 1;
            if rs {
                d.set_dd();
            }
            if !eop {
                continue;
            }
            assert!(rs, "RS on the last descriptor of a frame");
            if let Some(n) = frame_len {
                assert_eq!(n, frame.len(), "the frame's length as the first descriptor says");
            }
            self.insert_checksums(&mut frame, insert);
            self.chained += u32::from(parts > 1);
            sent.push(core::mem::take(&mut frame));
            parts = 0;
            self.count(regs::GPTC, 1);
        }
        assert!(frame.is_empty(), "the tail stops inside a frame");
        if !sent.is_empty() {
            M::sent(self);
        }
        sent
    }

    fn insert_checksums(&self, frame: &mut [u8], (ipv4, l4): (bool, bool)) {
        if !ipv4 && !l4 {
            return;
        }
        let o = self.context.expect("a context before checksum offload");
        if ipv4 {
            let sum = !csum::add(0, &frame[o.ip_start..o.ip_end]);
            frame[o.ip_csum..o.ip_csum + 2].copy_from_slice(&sum.to_be_bytes());
        }
        if l4 {
            let sum = csum::finish_l4(!csum::add(0, &frame[o.l4_start..]), o.tcp);
            frame[o.l4_csum..o.l4_csum + 2].copy_from_slice(&sum.to_be_bytes());
        }
    }

    /// Writes DD into the transmit descriptor `i` slots past the head, as a
    /// device that lies (or runs ahead) would.
    pub fn mark_tx_done_ahead(&mut self, i: u32) {
        let q = M::Ctl::TXQ;
        let (_, size) = self.ring(q);
        self.desc(q, (self.reg(q.head()) + i) % size.max(1)).set_dd();
    }
}

/// The driver's handle on the device.
pub struct FakeRegs<M: Model>(pub Rc<RefCell<Device<M>>>);

impl<M: Model> Regs for FakeRegs<M> {
    fn read(&self, offset: u32) -> u32 {
        let mut d = self.0.borrow_mut();
        if offset == regs::ICR && M::icr_held(&d) {
            return d.reg(offset);
        }
        if READ_TO_CLEAR.contains(&offset) || M::READ_TO_CLEAR.contains(&offset) {
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
                let old = d.reg(regs::ICR) & d.reg(regs::IMS);
                let ims = d.reg(regs::IMS) | value;
                d.set(regs::IMS, ims);
                M::enabled(&mut d, old);
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
            _ => {
                if !M::write(&mut d, offset, value) {
                    d.set(offset, value);
                }
            }
        }
    }
}

/// A driver brought up on a fake device, its link up.
pub struct Rig<M: Model> {
    pub nic: Driver<FakeHal, FakeRegs<M>, M::Ctl>,
    pub dev: Rc<RefCell<Device<M>>>,
}

pub const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
/// Receive buffers a full ring holds (one slot stays empty).
pub const POSTED: u32 = super::driver::RING_SIZE as u32 - 1;

impl<M: Model> Rig<M> {
    /// A device brought up with `mtu`, the link settled and its change
    /// taken.
    pub fn with_mtu(mtu: usize) -> Self {
        let dev = Device::new(MAC);
        let nic = Driver::new(FakeRegs(dev.clone()), mtu).expect("device");
        let mut r = Rig { nic, dev };
        if M::settle(&mut r.dev.borrow_mut()) {
            assert!(r.nic.ack_interrupt(), "the link came up");
        }
        r
    }

    pub fn new() -> Self {
        Self::with_mtu(super::driver::DEFAULT_MTU)
    }

    pub fn reg(&self, r: u32) -> u32 {
        self.dev.borrow().reg(r)
    }

    pub fn writes(&self, r: u32) -> u32 {
        self.dev.borrow().writes(r)
    }

    pub fn deliver(&self, frame: &[u8]) -> bool {
        self.dev.borrow_mut().deliver(frame)
    }

    pub fn deliver_raw(&self, bytes: &[u8], len: u16, status: u32) -> bool {
        self.dev.borrow_mut().deliver_raw(bytes, len, status)
    }

    pub fn send_all(&self) -> Vec<Vec<u8>> {
        self.dev.borrow_mut().send_all()
    }

    pub fn rx_available(&self) -> u32 {
        self.dev.borrow().rx_available()
    }

    pub fn resets(&self) -> u32 {
        self.dev.borrow().resets
    }

    /// Settles the link again after a reset took it down; whether it came
    /// back with a change to take.
    pub fn settle(&mut self) -> bool {
        let changed = M::settle(&mut self.dev.borrow_mut());
        changed && self.nic.ack_interrupt()
    }
}
