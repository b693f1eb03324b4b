//! smoltcp's view of the NIC. Frames reach it already steered: the poll loop
//! took RoCE v2 frames (for the RDMA path, headers intact, because the ICRC
//! covers the IP header exactly as sent) and ARP requests (for the neighbour
//! table) out of the stream, and queued the rest here.
//!
//! Checksums: smoltcp's [`ChecksumCapabilities`] are per device and per
//! protocol, not per frame or IP version. So on a NIC that inserts IPv4
//! header and TCP/UDP-over-IPv4 checksums ([`Nic::tx_offload`]) smoltcp is
//! told not to compute them, and every frame it sends asks the NIC for them
//! ([`Nic::transmit_with`]); IPv6 TCP/UDP, which smoltcp then also leaves
//! alone, is filled in software here. On a NIC that verifies received IPv4
//! headers (`rx_ipv4_checked`), smoltcp is told not to verify them, which is
//! sound because the steering ([`super::Net`]'s receive) checks in software
//! every IPv4 frame the NIC did not find good before queueing it. ICMP and
//! received TCP/UDP checksums stay smoltcp's.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use drivers::csum;
use drivers::nic::{Nic, TxChecksum, TxOffload};
use knet::steer::LinkStats;
use smoltcp::phy::{self, Checksum, ChecksumCapabilities, DeviceCapabilities, Medium};
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
    /// Every IPv4 frame in `queue` had its header checksum verified (by the
    /// NIC or the steering): smoltcp need not.
    pub rx_ipv4_checked: bool,
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

/// The checksums `frame` (as smoltcp wrote it, without those the NIC
/// computes) needs from a NIC offloading `offload`: IPv6 TCP/UDP is
/// completed here, in software.
fn checksums_needed(frame: &mut [u8], offload: TxOffload) -> TxChecksum {
    if offload.l4_v4 {
        csum::fill_ipv6_l4(frame);
    }
    TxChecksum { ipv4: offload.ipv4, l4: offload.l4_v4 }
}

impl<N: Nic> phy::TxToken for TxToken<'_, N> {
    // smoltcp writes into a scratch buffer that is then copied to the NIC: the
    // closure must run even when the NIC queue is full, and management traffic
    // (ARP, ICMP) is too rare for the copy to matter.
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.scratch.clear();
        self.scratch.resize(len, 0);
        let result = f(self.scratch);
        let want = checksums_needed(self.scratch, self.nic.tx_offload());
        let frame = &self.scratch[..];
        if self.nic.transmit_with(len, want, |buf| buf.copy_from_slice(frame)).is_some() {
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
        caps.checksum = checksum_caps(self.nic.tx_offload(), self.rx_ipv4_checked);
        caps
    }
}

/// What smoltcp still computes (tx) and verifies (rx) on a device whose NIC
/// offloads `offload` and whose IPv4 headers arrive verified when
/// `rx_ipv4_checked`.
fn checksum_caps(offload: TxOffload, rx_ipv4_checked: bool) -> ChecksumCapabilities {
    let either = |tx: bool, rx: bool| match (tx, rx) {
        (true, true) => Checksum::Both,
        (true, false) => Checksum::Tx,
        (false, true) => Checksum::Rx,
        (false, false) => Checksum::None,
    };
    let mut caps = ChecksumCapabilities::default();
    caps.ipv4 = either(!offload.ipv4, !rx_ipv4_checked);
    caps.tcp = either(!offload.l4_v4, true);
    caps.udp = either(!offload.l4_v4, true);
    caps
}
