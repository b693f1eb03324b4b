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

    /// As [`transmit`](FrameSink::transmit), for a frame written in two pieces: `fill`
    /// gets a `head_len`-byte buffer and a `body_len`-byte one, sent as one frame in
    /// that order. A NIC sink gives each its own descriptor (scatter-gather); this
    /// default cuts one buffer in two.
    fn transmit_parts(&mut self, head_len: usize, body_len: usize, fill: &mut dyn FnMut(&mut [u8], &mut [u8])) -> bool {
        let Some(len) = head_len.checked_add(body_len) else {
            return false;
        };
        self.transmit(len, &mut |buf: &mut [u8]| {
            if let Some((head, body)) = buf.split_at_mut_checked(head_len) {
                fill(head, body);
            }
        })
    }

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

    fn transmit_parts(&mut self, head_len: usize, body_len: usize, fill: &mut dyn FnMut(&mut [u8], &mut [u8])) -> bool {
        let ok = self.inner.transmit_parts(head_len, body_len, fill);
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
    /// How many of `frames` came in two parts.
    pub gathered: usize,
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

    fn transmit_parts(&mut self, head_len: usize, body_len: usize, fill: &mut dyn FnMut(&mut [u8], &mut [u8])) -> bool {
        if self.full {
            return false;
        }
        let (mut head, mut body) = (alloc::vec![0u8; head_len], alloc::vec![0u8; body_len]);
        fill(&mut head, &mut body);
        head.append(&mut body);
        self.frames.push(head);
        self.gathered += 1;
        true
    }
}
