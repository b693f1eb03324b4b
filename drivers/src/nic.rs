//! The NIC boundary, shaped like smoltcp's `phy::Device`: the driver lends its
//! own buffers for the length of a closure, so a frame is written or read in
//! place, once. Anything above (steering, smoltcp, the RoCE path) sees only this.

/// A link-layer NIC.
pub trait Nic {
    /// Lends the next received frame (Ethernet header first) to `f`; `None`
    /// when nothing has arrived.
    fn receive<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Option<R>;

    /// Lends a `len`-byte transmit buffer to `f`, which writes a whole frame;
    /// the frame is queued when `f` returns. `None` when the queue is full or
    /// `len` exceeds [`Nic::max_frame_len`].
    fn transmit<R>(&mut self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R>;

    /// Reclaims finished transmissions and re-arms interrupts; call once per poll pass.
    fn service(&mut self);

    fn mac(&self) -> [u8; 6];

    /// The device's MTU (IP packet size, without the Ethernet header).
    fn mtu(&self) -> usize;

    /// Largest frame `transmit` accepts: MTU plus the Ethernet header.
    fn max_frame_len(&self) -> usize {
        self.mtu() + 14
    }

    /// Carrier state.
    fn link_up(&self) -> bool;
}
