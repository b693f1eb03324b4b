//! smoltcp's view of the NIC, with frame steering below it: RoCE v2 frames
//! (UDP to port 4791) never reach smoltcp; they go whole, headers intact, to the
//! RDMA receive hook, because the ICRC covers the IP header exactly as sent.

use alloc::vec::Vec;
use drivers::nic::Nic;
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

/// Where RoCE v2 frames go. The RDMA transport implements it.
pub trait RdmaHook {
    fn receive(&mut self, frame: &[u8]);
}

/// Drops and counts RoCE frames until a transport is attached.
#[derive(Default)]
pub struct NoRdma {
    pub dropped: u64,
}

impl RdmaHook for NoRdma {
    fn receive(&mut self, _frame: &[u8]) {
        self.dropped += 1;
    }
}

/// Frames the adapter saw, by destination.
#[derive(Clone, Copy, Debug, Default)]
pub struct SteerStats {
    pub to_stack: u64,
    pub to_rdma: u64,
    pub tx_dropped: u64,
}

/// Whether `frame` is RoCE v2: Ethernet, IPv4 or IPv6, UDP, destination port 4791.
pub fn is_roce_v2(frame: &[u8]) -> bool {
    const ROCE_V2_PORT: u16 = 4791;
    let be16 = |at: usize| frame.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let udp_at = match be16(12) {
        Some(0x0800) => {
            let ihl = frame.get(14).map_or(0, |b| usize::from(b & 0x0f) * 4);
            if ihl < 20 || frame.get(23) != Some(&17) {
                return false;
            }
            14 + ihl
        }
        Some(0x86dd) if frame.get(20) == Some(&17) => 14 + 40,
        _ => return false,
    };
    be16(udp_at + 2) == Some(ROCE_V2_PORT)
}

/// The adapter smoltcp polls.
pub struct Steered<'a, N: Nic, H: RdmaHook> {
    pub nic: &'a mut N,
    pub rdma: &'a mut H,
    pub rx_buf: &'a mut Vec<u8>,
    pub stats: &'a mut SteerStats,
    /// Frames taken from the NIC in this poll, to tell the loop there was work.
    pub frames_in: &'a mut u64,
}

pub struct RxToken<'a>(&'a [u8]);

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.0)
    }
}

pub struct TxToken<'a, N: Nic> {
    nic: &'a mut N,
    dropped: &'a mut u64,
}

impl<N: Nic> phy::TxToken for TxToken<'_, N> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut f = Some(f);
        if let Some(r) = self.nic.transmit(len, |buf| (f.take().expect("called once"))(buf)) {
            return r;
        }
        // The queue is full: smoltcp still needs its closure run; the frame is lost.
        *self.dropped += 1;
        let mut scratch = alloc::vec![0u8; len];
        (f.take().expect("not yet called"))(&mut scratch)
    }
}

impl<N: Nic, H: RdmaHook> phy::Device for Steered<'_, N, H> {
    type RxToken<'b>
        = RxToken<'b>
    where
        Self: 'b;
    type TxToken<'b>
        = TxToken<'b, N>
    where
        Self: 'b;

    fn receive(&mut self, _now: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        loop {
            let rx_buf = &mut *self.rx_buf;
            let rdma = &mut *self.rdma;
            let stats = &mut *self.stats;
            let for_stack = self.nic.receive(|frame| {
                if is_roce_v2(frame) {
                    stats.to_rdma += 1;
                    rdma.receive(frame);
                    false
                } else {
                    stats.to_stack += 1;
                    rx_buf.clear();
                    rx_buf.extend_from_slice(frame);
                    true
                }
            })?;
            *self.frames_in += 1;
            if for_stack {
                let tx = TxToken { nic: &mut *self.nic, dropped: &mut self.stats.tx_dropped };
                return Some((RxToken(self.rx_buf.as_slice()), tx));
            }
        }
    }

    fn transmit(&mut self, _now: Instant) -> Option<Self::TxToken<'_>> {
        Some(TxToken { nic: &mut *self.nic, dropped: &mut self.stats.tx_dropped })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.nic.max_frame_len();
        caps.max_burst_size = Some(64);
        caps
    }
}
