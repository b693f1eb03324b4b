//! The NIC boundary on the transmit side: the transport builds each whole frame
//! (Ethernet to ICRC) straight into a buffer the caller lends, the way the kernel's
//! `drivers::nic::Nic::transmit(len, f)` lends a virtio TX buffer and smoltcp's
//! `TxToken::consume` does. No frame is built in transport-owned memory and copied.

/// Somewhere to put frames.
pub trait FrameSink {
    /// Lends a buffer of exactly `len` bytes to `fill`, then sends it. Returns `false`
    /// (without calling `fill`) when no TX buffer is free; the transport then treats
    /// the frame as lost on the wire (it counts it, and retransmission recovers).
    fn transmit(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool;

    /// Sends what `transmit` queued now, without waiting for more (a NIC sink
    /// kicks the device). The transport calls it when a peer waits for what it
    /// just sent: an ACK, or the packets an ACK let out. A sink that sends at once
    /// has nothing to do.
    fn flush(&mut self) {}
}

/// A sink that remembers whether anything went out through it, so the transport
/// knows when to [`flush`](FrameSink::flush).
pub(crate) struct Watched<'a, S: FrameSink + ?Sized> {
    pub inner: &'a mut S,
    pub sent: bool,
}

impl<'a, S: FrameSink + ?Sized> Watched<'a, S> {
    pub fn new(inner: &'a mut S) -> Self {
        Watched { inner, sent: false }
    }

    /// Flushes the inner sink if anything was sent.
    pub fn flush_if_sent(self) {
        if self.sent {
            self.inner.flush();
        }
    }
}

impl<S: FrameSink + ?Sized> FrameSink for Watched<'_, S> {
    fn transmit(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let ok = self.inner.transmit(len, fill);
        self.sent |= ok;
        ok
    }

    fn flush(&mut self) {
        self.inner.flush();
    }
}

/// Collects frames in memory: for tests.
#[derive(Debug, Default, Clone)]
pub struct VecSink {
    pub frames: alloc::vec::Vec<alloc::vec::Vec<u8>>,
    /// When set, refuse every frame (a full TX ring).
    pub full: bool,
}

impl FrameSink for VecSink {
    fn transmit(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        if self.full {
            return false;
        }
        let mut frame = alloc::vec![0u8; len];
        fill(&mut frame);
        self.frames.push(frame);
        true
    }
}
