//! QP1 for the firmware's own management agents (CM): the device's GSI, owned by
//! the appliance as Linux's `ib_mad` owns every port's QP1. Host programs never
//! see it; a consumer-created GSI QP (the simulator's tests) takes its place.
//!
//! Received MADs are queued with what a reply needs (the sender's GID, QPN, MAC and
//! the GRH fields); the agents above drain the queue each pass and send through
//! [`MadPort::send`], which builds a UD SEND from QP1 with the GSI Q_Key
//! (IBA vol. 1 13.5.1: the GSI's Q_Key is 0x80010000 and is checked on receive).

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use crate::core::gid::Gid;
use crate::wire::frame::IpPath;
use crate::wire::sport::src_port_for_qpn;
use crate::wire::{DethRepr, ExtHeaders, MacAddr, Opcode, Psn, RoceRepr};

use super::ah::{AhAttr, AhError, LocalPort};
use super::device::Device;
use super::qp::{GSI_QKEY, GSI_QPN};
use super::sink::FrameSink;
use super::tx;

/// Every MAD is 256 bytes (IBA vol. 1 13.4.2), the GSI's whole UD payload.
pub const MAD_SIZE: usize = 256;

/// MADs held for the agents between two passes; more are dropped and counted
/// (a peer that floods QP1 cannot grow the firmware's memory).
pub const INBOX_LEN: usize = 64;

/// A MAD as it arrived, with the addressing its reply goes back on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMad {
    /// The sender's GID (IPv4-mapped for IPv4 frames).
    pub src_gid: Gid,
    /// The local GID it was sent to.
    pub dst_gid: Gid,
    /// The sender's QP (1 for a peer's GSI).
    pub src_qpn: u32,
    /// The frame's source MAC: where a reply goes without a neighbour lookup.
    pub src_mac: MacAddr,
    pub pkey: u16,
    pub traffic_class: u8,
    pub hop_limit: u8,
    pub flow_label: u32,
    pub data: Vec<u8>,
}

/// The firmware's QP1.
#[derive(Debug, Default)]
pub struct MadPort {
    inbox: VecDeque<ReceivedMad>,
    psn: u32,
    /// MADs lost because the inbox was full.
    pub overflow: u64,
    /// MADs sent and received.
    pub sent: u64,
    pub received: u64,
}

impl MadPort {
    /// The PSN the next MAD goes out with (`rdma resource show qp`'s
    /// `sq-psn` for QP1).
    pub fn psn(&self) -> u32 {
        self.psn
    }

    /// Queues a MAD the responder accepted for QP1 (Q_Key and length checked).
    pub(crate) fn deliver(&mut self, mad: ReceivedMad) {
        if self.inbox.len() >= INBOX_LEN {
            self.overflow += 1;
            return;
        }
        self.received += 1;
        self.inbox.push_back(mad);
    }

    /// The oldest MAD not yet taken.
    pub fn take(&mut self) -> Option<ReceivedMad> {
        self.inbox.pop_front()
    }

    /// Sends `mad` from QP1 to QP `dest_qpn` along `ah` (its `dmac` resolved).
    pub(crate) fn send<M, S: FrameSink + ?Sized>(
        &mut self,
        dev: &mut Device<M>,
        ah: &AhAttr,
        dest_qpn: u32,
        mad: &[u8],
        sink: &mut S,
    ) -> Result<(), AhError> {
        let path = ah.path(&dev.port, src_port_for_qpn(GSI_QPN))?;
        let psn = Psn::new(self.psn);
        self.psn = (self.psn + 1) & 0xFF_FFFF;
        let roce = RoceRepr {
            bth: tx::bth(Opcode::UdSendOnly, dest_qpn, psn, false, false),
            ext: ExtHeaders { deth: Some(DethRepr { qkey: GSI_QKEY, src_qpn: GSI_QPN }), ..ExtHeaders::NONE },
        };
        let mut fill = |out: &mut [u8]| {
            out.copy_from_slice(mad);
            true
        };
        if tx::send(sink, &mut dev.stats, &mut dev.ip_id, &path, &roce, mad.len(), &mut fill) {
            self.sent += 1;
        }
        Ok(())
    }
}

/// The source GID index a reply to `to` from `from` uses: the local GID the MAD
/// was addressed to, in the port's table.
pub fn sgid_index(port: &LocalPort, local: &Gid) -> Option<u8> {
    port.gids.iter().position(|g| g == local).and_then(|i| u8::try_from(i).ok())
}

/// The sender's and the receiver's GIDs of a received frame's IP header.
pub(crate) fn gids_of(ip: &IpPath) -> (Gid, Gid, u32) {
    match *ip {
        IpPath::V4 { src, .. } => (Gid::from_ipv4(core::net::Ipv4Addr::from(src.0)), dst_gid(ip), 0),
        IpPath::V6 { src, flow_label, .. } => (Gid(src.0), dst_gid(ip), flow_label),
    }
}

/// The receiver's GID alone: what every received frame is checked against.
pub(crate) fn dst_gid(ip: &IpPath) -> Gid {
    match *ip {
        IpPath::V4 { dst, .. } => Gid::from_ipv4(core::net::Ipv4Addr::from(dst.0)),
        IpPath::V6 { dst, .. } => Gid(dst.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rxe::device::Config;
    use crate::rxe::memory::FlatMemory;
    use crate::rxe::sim::{node_gid, node_mac};
    use crate::rxe::sink::VecSink;
    use crate::rxe::time::Instant;
    use crate::rxe::transport::RxeTransport;

    fn node(i: usize) -> RxeTransport<FlatMemory> {
        let port =
            LocalPort { mac: node_mac(i), gids: alloc::vec![node_gid(i)], mtu: crate::core::port::IbMtu::Mtu1024 };
        RxeTransport::new(FlatMemory::new(0x1000, 0x1000), port, Config::default())
    }

    fn ah_to(i: usize) -> AhAttr {
        AhAttr { dgid: node_gid(i), sgid_index: 0, hop_limit: 64, dmac: node_mac(i), ..AhAttr::default() }
    }

    #[test]
    fn a_mad_goes_from_qp1_to_the_peers_inbox_with_its_return_address() {
        let (mut a, mut b) = (node(0), node(1));
        let mut wire = VecSink::default();
        let mad: Vec<u8> = (0..MAD_SIZE).map(|i| i as u8).collect();
        a.send_mad(&ah_to(1), GSI_QPN, &mad, &mut wire).unwrap();
        assert_eq!(wire.frames.len(), 1);
        let mut back = VecSink::default();
        b.receive(&wire.frames[0], Instant::ZERO, &mut back);
        let got = b.take_mad().expect("queued");
        assert_eq!(got.data, mad);
        assert_eq!((got.src_gid, got.dst_gid, got.src_qpn, got.src_mac), (node_gid(0), node_gid(1), 1, node_mac(0)));
        assert_eq!(got.hop_limit, 64);
        assert!(b.take_mad().is_none());
        assert!(back.frames.is_empty(), "QP1 does not acknowledge");
    }

    #[test]
    fn qp1_refuses_a_wrong_qkey_or_length_and_a_full_inbox_counts() {
        let (mut a, mut b) = (node(0), node(1));
        let mut wire = VecSink::default();
        a.send_mad(&ah_to(1), GSI_QPN, &[0; 100], &mut wire).unwrap();
        let mut sink = VecSink::default();
        b.receive(&wire.frames[0], Instant::ZERO, &mut sink);
        assert!(b.take_mad().is_none());
        assert_eq!(b.stats().drops.get(vocab::DropReason::BadMad), 1);
        wire.frames.clear();
        for _ in 0..INBOX_LEN + 3 {
            a.send_mad(&ah_to(1), GSI_QPN, &[0; MAD_SIZE], &mut wire).unwrap();
        }
        for f in &wire.frames {
            b.receive(f, Instant::ZERO, &mut sink);
        }
        assert_eq!((b.mad_port().received, b.mad_port().overflow), (INBOX_LEN as u64, 3));
    }
}
