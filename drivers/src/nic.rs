//! The NIC boundary, shaped like smoltcp's `phy::Device`: the driver lends its
//! own buffers (a received frame until it is recycled, a transmit buffer for the
//! length of a closure), so a frame is written or read in place, once. Anything above (steering, smoltcp, the RoCE path) sees only this.

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
