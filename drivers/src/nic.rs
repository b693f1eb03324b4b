//! The NIC boundary, shaped like smoltcp's `phy::Device`: the driver lends its
//! own buffers (a received frame until it is recycled, a transmit buffer for the
//! length of a closure), so a frame is written or read in place, once. Anything above (steering, smoltcp, the RoCE path) sees only this.
//!
//! Offloads are opt-in per frame: [`Nic::tx_offload`] says which checksums
//! a NIC computes, [`Nic::transmit_with`] asks for them (the default does
//! them in software), [`Nic::transmit_parts`] sends one frame from several
//! buffers (the default lends one buffer cut in parts), and
//! [`Nic::transmit_gather`] sends a frame whose middle the device reads from
//! memory outside the driver ([`TxSegment`]s: zero-copy transmit; the
//! default cannot, [`Nic::gather_room`] says 0, and the caller copies).

pub use crate::csum::{TxChecksum, TxOffload};

/// What the NIC found of one checksum of a received frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxChecksum {
    /// Not checked: no offload, not that protocol, or the device did not say.
    #[default]
    Unchecked,
    Good,
    Bad,
}

/// The NIC's verdict on a received frame: its IPv4 header checksum and its
/// TCP/UDP checksum, apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxVerdict {
    pub ipv4: RxChecksum,
    pub l4: RxChecksum,
}

/// The most parts [`Nic::transmit_parts`] takes.
pub const MAX_PARTS: usize = 8;

/// The most segments [`Nic::transmit_gather`] takes: with the head and tail
/// buffers, a chain of at most [`MAX_PARTS`] descriptors (far under what
/// QEMU's models accept: 64 fragments on the e1000e and igb, a chain up to
/// the queue's size on virtio-net).
pub const MAX_SEGMENTS: usize = MAX_PARTS - 2;

/// A run of memory outside the driver's buffers that the device reads part
/// of a frame from, by DMA, after the transmit call returned: its bus
/// address (here the guest-physical one) and length. Only made by whoever
/// can vouch for the memory ([`TxSegment::new`] is `unsafe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxSegment {
    paddr: u64,
    len: usize,
}

impl TxSegment {
    /// # Safety
    /// `paddr..paddr + len` must be memory a device can read by DMA (RAM, or
    /// a BAR backed by RAM such as ivshmem's), and stay so for as long as a
    /// device may read it: in practice for the life of the firmware (never
    /// unmapped, never handed back to an allocator that could give it to a
    /// device as something else). A device given anything else may fault or
    /// stop: QEMU's virtio-net marks itself broken on an address it cannot
    /// map. The device only reads the memory; what it finds there when it
    /// reads is what leaves.
    pub unsafe fn new(paddr: u64, len: usize) -> Self {
        TxSegment { paddr, len }
    }

    pub fn paddr(&self) -> u64 {
        self.paddr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A link-layer NIC.
pub trait Nic {
    /// A received frame (Ethernet header first) in the driver's own buffer,
    /// lent until [`Nic::recycle`] gives it back. While it is out the NIC can
    /// transmit, so a protocol can answer a frame while still reading it.
    type Rx: AsRef<[u8]>;

    /// The next received frame; `None` when nothing has arrived.
    fn receive(&mut self) -> Option<Self::Rx>;

    /// Returns a received frame's buffer to the receive queue. A buffer never
    /// recycled is a receive slot lost, not memory corrupted.
    fn recycle(&mut self, rx: Self::Rx);

    /// Lends a `len`-byte transmit buffer to `f`, which writes a whole frame;
    /// the frame is queued when `f` returns. `None` when the queue is full or
    /// `len` exceeds [`Nic::max_frame_len`].
    fn transmit<R>(&mut self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R>;

    /// The checksums this NIC computes on transmit (none by default).
    fn tx_offload(&self) -> TxOffload {
        TxOffload::default()
    }

    /// As [`Nic::transmit`], and the checksums `csum` names are filled in
    /// once `f` has written the frame: by the NIC where
    /// [`Nic::tx_offload`] says it can, else (this default) in software. A
    /// frame that is not IPv4 TCP/UDP is sent as written.
    fn transmit_with<R>(&mut self, len: usize, csum: TxChecksum, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        self.transmit(len, |buf| {
            let r = f(buf);
            crate::csum::fill(buf, csum);
            r
        })
    }

    /// Lends `f` one buffer per entry of `lens` (at most [`MAX_PARTS`],
    /// none empty, together at most [`Nic::max_frame_len`]) and sends them
    /// as one frame, in order. The default cuts one transmit buffer; a
    /// driver with scatter-gather gives each part its own descriptor.
    fn transmit_parts<R>(&mut self, lens: &[usize], f: impl FnOnce(&mut [&mut [u8]]) -> R) -> Option<R> {
        if lens.is_empty() || lens.len() > MAX_PARTS || lens.contains(&0) {
            return None;
        }
        let total = lens.iter().try_fold(0usize, |a, &l| a.checked_add(l))?;
        self.transmit(total, |buf| with_parts(buf, lens, f)).flatten()
    }

    /// How many [`TxSegment`]s a frame sent by [`Nic::transmit_gather`] may
    /// have now: 0 when the driver cannot send from outside memory (this
    /// default) or its queue has no room for such a chain at the moment; the
    /// caller then copies the frame into the driver's buffers instead
    /// ([`Nic::transmit_parts`]). At most [`MAX_SEGMENTS`].
    fn gather_room(&mut self) -> usize {
        0
    }

    /// Sends one frame as a chain: `head_len` bytes `f` writes into one
    /// driver buffer, then `segments`, which the device reads where they lie
    /// (after this call returns: the memory must stay readable, which
    /// [`TxSegment::new`]'s caller vouched for), then `tail_len` bytes `f`
    /// writes into another. `None` (and `f` not called) when the driver
    /// cannot, the queue lacks room for the chain, or the frame is empty in
    /// a part or longer than [`Nic::max_frame_len`]. A driver's reclaim of the
    /// chain gives back only its own buffers.
    fn transmit_gather<R>(
        &mut self,
        _head_len: usize,
        _segments: &[TxSegment],
        _tail_len: usize,
        _f: impl FnOnce(&mut [u8], &mut [u8]) -> R,
    ) -> Option<R> {
        None
    }

    /// Tells the device about the frames queued since the last call (a driver
    /// may hold its doorbell until then, to ring it once per burst) and
    /// reclaims finished transmissions. Call once per poll pass, and after
    /// transmitting from outside the pass.
    fn service(&mut self);

    fn mac(&self) -> [u8; 6];

    /// The device's MTU (IP packet size, without the Ethernet header).
    fn mtu(&self) -> usize;

    /// Largest frame `transmit` accepts: MTU plus the Ethernet header.
    fn max_frame_len(&self) -> usize {
        self.mtu() + 14
    }

    /// Carrier state, as the device reports it now. May be a read of the
    /// device (a trap under emulation): ask when the device signalled a
    /// change, not on every pass.
    fn link_up(&self) -> bool;
}

/// Cuts `buf` into `lens` (which must sum to at most its length) and runs
/// `f` on the parts; `None` when they do not fit.
pub fn with_parts<R>(mut buf: &mut [u8], lens: &[usize], f: impl FnOnce(&mut [&mut [u8]]) -> R) -> Option<R> {
    if lens.len() > MAX_PARTS {
        return None;
    }
    let mut parts: [&mut [u8]; MAX_PARTS] = Default::default();
    for (part, &len) in parts.iter_mut().zip(lens) {
        if len > buf.len() {
            return None;
        }
        let (head, rest) = buf.split_at_mut(len);
        *part = head;
        buf = rest;
    }
    Some(f(&mut parts[..lens.len()]))
}
