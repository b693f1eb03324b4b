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
