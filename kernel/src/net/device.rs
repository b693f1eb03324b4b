//! smoltcp's view of the NIC. Frames reach it already steered: the poll loop
//! took RoCE v2 frames (for the RDMA path, headers intact, because the ICRC
//! covers the IP header exactly as sent) and ARP requests (for the neighbour
//! table) out of the stream, and queued the rest here.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use drivers::nic::Nic;
use knet::steer::LinkStats;
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

/// Frames waiting for smoltcp; bounded so a flood cannot eat the heap.
pub const STACK_QUEUE: usize = 128;

pub struct StackDevice<'a, N: Nic> {
    pub queue: &'a mut VecDeque<Vec<u8>>,
    pub nic: &'a mut N,
    pub stats: &'a mut LinkStats,
    pub scratch: &'a mut Vec<u8>,
    /// Administratively up: a down device neither sends nor receives.
    pub up: bool,
}

pub struct RxToken(Vec<u8>);

impl phy::RxToken for RxToken {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

pub struct TxToken<'a, N: Nic> {
    nic: &'a mut N,
    stats: &'a mut LinkStats,
    scratch: &'a mut Vec<u8>,
}

impl<N: Nic> phy::TxToken for TxToken<'_, N> {
    // smoltcp writes into a scratch buffer that is then copied to the NIC: the
    // closure must run even when the NIC queue is full, and management traffic
    // (ARP, ICMP) is too rare for the copy to matter.
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.scratch.clear();
        self.scratch.resize(len, 0);
        let result = f(self.scratch);
        let frame = &self.scratch[..];
        if self.nic.transmit(len, |buf| buf.copy_from_slice(frame)).is_some() {
            self.stats.record_tx(len);
        } else {
            self.stats.tx_dropped += 1;
        }
        result
    }
}

impl<N: Nic> phy::Device for StackDevice<'_, N> {
    type RxToken<'b>
        = RxToken
    where
        Self: 'b;
    type TxToken<'b>
        = TxToken<'b, N>
    where
        Self: 'b;

    fn receive(&mut self, _now: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let frame = self.queue.pop_front()?;
        self.up.then_some({
            (RxToken(frame), TxToken { nic: &mut *self.nic, stats: &mut *self.stats, scratch: &mut *self.scratch })
        })
    }

    fn transmit(&mut self, _now: Instant) -> Option<Self::TxToken<'_>> {
        self.up.then_some(TxToken { nic: &mut *self.nic, stats: &mut *self.stats, scratch: &mut *self.scratch })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.nic.max_frame_len();
        caps.max_burst_size = Some(64);
        caps
    }
}
