//! The NIC boundary on the transmit side: the transport builds each whole frame
//! (Ethernet to ICRC) straight into a buffer the caller lends, the way the kernel's
//! `drivers::nic::Nic::transmit(len, f)` lends a virtio TX buffer and smoltcp's
//! `TxToken::consume` does. No frame is built in transport-owned memory and copied.
//!
//! A sink that can send a frame as a descriptor chain says so with
//! [`FrameSink::gather_room`]: the transport then lends it only the headers and the
//! tail to write, and names the payload by bus address ([`DmaSpan`]s its memory
//! gave), for the device to read where it lies after the call returns.

use super::memory::DmaSpan;

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

    /// How many payload spans a frame sent by
    /// [`transmit_gather`](FrameSink::transmit_gather) may have now: 0 (the
    /// default) when the sink cannot send from memory at all, or has no room for
    /// such a frame at the moment (the transport copies the payload then).
    fn gather_room(&mut self) -> usize {
        0
    }

    /// Sends one frame in three pieces: `head_len` bytes of headers and `tail_len`
    /// bytes of pad and ICRC, which `fill` writes into the sink's buffers, and
    /// between them the payload, which the device reads from `spans` (bus
    /// addresses from the transport's memory, [`crate::rxe::memory::Memory::dma_span`])
    /// after this call has returned. Returns `false` (without calling `fill`) when
    /// it cannot; the frame is then lost, as with `transmit`. At most
    /// [`gather_room`](FrameSink::gather_room) spans.
    fn transmit_gather(
        &mut self,
        _head_len: usize,
        _spans: &[DmaSpan],
        _tail_len: usize,
        _fill: &mut dyn FnMut(&mut [u8], &mut [u8]),
    ) -> bool {
        false
    }

    /// Sends what `transmit` queued now, without waiting for more (a NIC sink
    /// kicks the device). The transport calls it when a peer waits for what it
    /// just sent: an ACK, or the packets an ACK let out. A sink that sends at once
    /// has nothing to do.
    fn flush(&mut self) {}
}

/// A frame sent by [`FrameSink::transmit_gather`] as a test sink holds it until
/// its "device" reads the payload: the headers and tail written, the payload's
/// spans still to read. What a NIC does after the transmit call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatherFrame {
    pub head: alloc::vec::Vec<u8>,
    pub spans: alloc::vec::Vec<DmaSpan>,
    pub tail: alloc::vec::Vec<u8>,
}

impl GatherFrame {
    /// Lends `fill` the buffers for the headers and tail.
    pub fn new(
        head_len: usize,
        spans: &[DmaSpan],
        tail_len: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut [u8]),
    ) -> Self {
        let (mut head, mut tail) = (alloc::vec![0u8; head_len], alloc::vec![0u8; tail_len]);
        fill(&mut head, &mut tail);
        GatherFrame { head, spans: spans.to_vec(), tail }
    }

    /// The whole frame, each span read through `dma` (a device's read of bus
    /// memory); `None` if one cannot be.
    pub fn read<'m>(&self, dma: impl Fn(u64, usize) -> Option<&'m [u8]>) -> Option<alloc::vec::Vec<u8>> {
        let mut frame = self.head.clone();
        for s in &self.spans {
            frame.extend_from_slice(dma(s.bus, s.len)?);
        }
        frame.extend_from_slice(&self.tail);
        Some(frame)
    }
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

    fn gather_room(&mut self) -> usize {
        self.inner.gather_room()
    }

    fn transmit_gather(
        &mut self,
        head_len: usize,
        spans: &[DmaSpan],
        tail_len: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut [u8]),
    ) -> bool {
        let ok = self.inner.transmit_gather(head_len, spans, tail_len, fill);
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
    /// Payload spans it takes per frame (0, the default: it copies).
    pub gather_room: usize,
    /// Frames sent from memory, their payloads not read yet, each with its
    /// place in `frames` (which holds an empty frame there until
    /// [`VecSink::read_payloads`]).
    pub pending: alloc::vec::Vec<(usize, GatherFrame)>,
}

impl VecSink {
    /// Reads the payload of every frame sent from memory, as the NIC would after
    /// the transmit calls, and puts the whole frames in their places in
    /// `frames`; whether every span could be read.
    pub fn read_payloads<'m>(&mut self, dma: impl Fn(u64, usize) -> Option<&'m [u8]>) -> bool {
        let mut ok = true;
        for (at, g) in core::mem::take(&mut self.pending) {
            match (g.read(&dma), self.frames.get_mut(at)) {
                (Some(frame), Some(slot)) => *slot = frame,
                _ => ok = false,
            }
        }
        ok
    }
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

    fn gather_room(&mut self) -> usize {
        if self.full { 0 } else { self.gather_room }
    }

    fn transmit_gather(
        &mut self,
        head_len: usize,
        spans: &[DmaSpan],
        tail_len: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut [u8]),
    ) -> bool {
        if self.full || spans.is_empty() || spans.len() > self.gather_room {
            return false;
        }
        self.pending.push((self.frames.len(), GatherFrame::new(head_len, spans, tail_len, fill)));
        self.frames.push(alloc::vec::Vec::new());
        true
    }
}
