//! Address handles and address vectors (IBA vol. 1 10.2.2.1, 11.2.2; for RoCE v2 the
//! GRH fields of annex A17.4): where a UD work request or a connected QP sends, as the
//! IP/UDP path the wire codec needs.
//!
//! The destination MAC is resolved outside the transport, as Linux's core does in
//! `ib_resolve_eth_dmac` before a driver sees the address: the kernel looks the
//! destination IP up in its ARP table and passes the MAC in [`AhAttr::dmac`].

use crate::core::gid::Gid;
use crate::core::port::IbMtu;
use crate::wire::frame::{IpPath, Path};
use crate::wire::{Ecn, Ipv4Address, Ipv6Address, MacAddr};

use super::pd::PdHandle;
use super::pool::handle_type;

handle_type! {
    /// An address handle.
    AhHandle
}

/// The one port of an rxe device (`rxe_params::NUM_PORTS`): the only port an
/// address vector may leave from.
pub const PORT: u8 = 1;

/// An address vector (`struct ibv_ah_attr` with its `ibv_global_route`, RoCE v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AhAttr {
    /// The destination GID: an IPv4-mapped address for IPv4 paths.
    pub dgid: Gid,
    /// Index of the source GID in the port's table.
    pub sgid_index: u8,
    pub hop_limit: u8,
    /// IP DSCP (top 6 bits) and ECN (low 2 bits).
    pub traffic_class: u8,
    /// 20 bits; picks a connected QP's UDP source port, 0 lets it derive one
    /// from the QPNs. Not sent: IPv6 headers carry flow label 0, as Linux's.
    pub flow_label: u32,
    /// The next hop's MAC, resolved by the caller's neighbour table.
    pub dmac: MacAddr,
    /// The local port the path leaves from: [`PORT`], or the vector is
    /// refused (UD_AV_PORT_ENFORCE: a UD work request's address handle, and
    /// so the work request, never names a port the device does not have).
    pub port_num: u8,
}

impl Default for AhAttr {
    fn default() -> Self {
        AhAttr {
            dgid: Gid::default(),
            sgid_index: 0,
            hop_limit: 0,
            traffic_class: 0,
            flow_label: 0,
            dmac: MacAddr::default(),
            port_num: PORT,
        }
    }
}

/// Why an address vector cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AhError {
    /// A port the device does not have (rxe has port 1 only).
    BadPort,
    /// No source GID at that index.
    BadSgidIndex,
    /// One GID is IPv4-mapped and the other is not.
    MixedFamilies,
    /// The destination MAC is zero: the neighbour is not resolved yet.
    Unresolved,
}

/// The local side of paths: the port's MAC and GID table, kept up to date by the
/// caller (the RDMA core's GID cache).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPort {
    pub mac: MacAddr,
    pub gids: alloc::vec::Vec<Gid>,
    /// The port's active MTU: the most a UD or GSI message may carry (a
    /// datagram QP has no path MTU of its own; rxe uses the port's).
    pub mtu: IbMtu,
}

impl AhAttr {
    /// The path to send on, with the UDP source port chosen by the QP.
    /// A multicast destination GID goes to its IP multicast MAC, whatever
    /// `dmac` says: there is no neighbour to resolve.
    pub fn path(&self, local: &LocalPort, src_port: u16) -> Result<Path, AhError> {
        if self.port_num != PORT {
            return Err(AhError::BadPort);
        }
        let sgid = local.gids.get(usize::from(self.sgid_index)).ok_or(AhError::BadSgidIndex)?;
        let dmac = super::mcast::mac_of(&self.dgid).unwrap_or(self.dmac);
        if dmac == MacAddr::default() {
            return Err(AhError::Unresolved);
        }
        let ip = match (sgid.to_ipv4_mapped(), self.dgid.to_ipv4_mapped()) {
            (Some(src), Some(dst)) => IpPath::V4 { src: Ipv4Address(src.octets()), dst: Ipv4Address(dst.octets()) },
            // Linux rxe writes flow label 0 into the IPv6 header whatever the
            // address vector says (`prepare_ipv6_hdr`); the label only picks
            // a connected QP's UDP source port (`rdma_get_udp_sport`).
            (None, None) => IpPath::V6 { src: Ipv6Address(sgid.0), dst: Ipv6Address(self.dgid.0), flow_label: 0 },
            _ => return Err(AhError::MixedFamilies),
        };
        Ok(Path {
            src_mac: local.mac,
            dst_mac: dmac,
            ip,
            dscp: self.traffic_class >> 2,
            ecn: Ecn::from_bits(self.traffic_class & 3),
            hop_limit: self.hop_limit,
            src_port,
        })
    }
}

/// An address handle: an address vector in a PD.
#[derive(Debug, Clone)]
pub struct Ah {
    pub pd: PdHandle,
    pub attr: AhAttr,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn port() -> LocalPort {
        let ll: Ipv6Addr = "fe80::5054:ff:fe00:1".parse().unwrap();
        LocalPort {
            mtu: IbMtu::Mtu1024,
            mac: MacAddr([0x52, 0x54, 0, 0, 0, 1]),
            gids: alloc::vec![Gid::from_ipv6(ll), Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1))],
        }
    }

    #[test]
    fn ipv6_paths_send_flow_label_zero_and_the_traffic_class() {
        let peer: Ipv6Addr = "fe80::5054:ff:fe00:2".parse().unwrap();
        let av = AhAttr {
            dgid: Gid::from_ipv6(peer),
            sgid_index: 0,
            hop_limit: 64,
            traffic_class: (26 << 2) | 1,
            flow_label: 0x12345,
            dmac: MacAddr([0x52, 0x54, 0, 0, 0, 2]),
            port_num: PORT,
        };
        let p = av.path(&port(), 0xc123).unwrap();
        let IpPath::V6 { src, dst, flow_label } = p.ip else { panic!("not IPv6: {p:?}") };
        assert_eq!((src.0, dst.0, flow_label), (port().gids[0].0, peer.octets(), 0));
        assert_eq!((p.dscp, p.ecn, p.hop_limit, p.src_port), (26, Ecn::Ect1, 64, 0xc123));
        // One family per path; an unresolved MAC is refused.
        assert_eq!(AhAttr { sgid_index: 1, ..av }.path(&port(), 0).unwrap_err(), AhError::MixedFamilies);
        assert_eq!(AhAttr { dmac: MacAddr::default(), ..av }.path(&port(), 0).unwrap_err(), AhError::Unresolved);
        // Only the device's one port.
        for bad in [0, 2] {
            assert_eq!(AhAttr { port_num: bad, ..av }.path(&port(), 0).unwrap_err(), AhError::BadPort);
        }
    }
}
